// A key-value Durable Object per name, for bench/bigstate: the same routes
// as wasmkeep's built-in kv class, on workerd's SQLite-backed storage.
//   PUT /actor/kv/<name>/<key>   stores the body
//   GET /actor/kv/<name>/<key>   returns it, 404 when absent
import { DurableObject } from "cloudflare:workers";

export default {
  async fetch(request, env) {
    const parts = new URL(request.url).pathname.split("/"); // ["", "actor", "kv", name, key...]
    if (parts.length < 5 || parts[1] !== "actor" || parts[2] !== "kv") {
      return new Response("not found\n", { status: 404 });
    }
    return env.KV.get(env.KV.idFromName(decodeURIComponent(parts[3]))).fetch(request);
  },
};

export class KV extends DurableObject {
  async fetch(request) {
    const key = decodeURIComponent(new URL(request.url).pathname.split("/").slice(4).join("/"));
    if (request.method === "PUT") {
      this.ctx.storage.put(key, new Uint8Array(await request.arrayBuffer()));
      return new Response(null, { status: 204 });
    }
    const v = await this.ctx.storage.get(key);
    if (v === undefined) return new Response("absent\n", { status: 404 });
    return new Response(v);
  }
}
