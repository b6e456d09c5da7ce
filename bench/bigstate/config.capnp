# workerd for bench/bigstate: the KV Durable Object of worker.js, its storage
# in SQLite files on local disk. run.sh passes --directory-path do-disk=<dir>.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .mainWorker),
    (name = "do-disk", disk = (path = "do-storage", writable = true)),
  ],
  sockets = [
    (name = "http", address = "127.0.0.1:8798", http = (), service = "main"),
  ],
);

const mainWorker :Workerd.Worker = (
  modules = [
    (name = "worker.js", esModule = embed "worker.js"),
  ],
  compatibilityDate = "2025-01-01",
  durableObjectNamespaces = [
    (className = "KV", uniqueKey = "bigstate-kv", enableSql = true),
  ],
  durableObjectStorage = (localDisk = "do-disk"),
  bindings = [
    (name = "KV", durableObjectNamespace = "KV"),
  ],
);
