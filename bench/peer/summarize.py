#!/usr/bin/env python3
"""Summarize bench/peer/run.sh results (results.jsonl) into markdown.

usage: python3 bench/peer/summarize.py [--max-other=CORES] results/<time>/results.jsonl [more ...]

Per scenario and target: medians over repetitions, with [min-max] when there is more than
one. Then the issue's targets as ratios: each ratio is taken within one repetition (the
targets ran back to back in it) and the median of those is shown, with [min-max].
--max-other drops repetitions during which other processes used more than CORES cores
(loadgen measures it: machine busy time minus its own and the server's).

WebSocket scenarios (ws-echo, ws-bcast, ws-idle, and ws-idle-50k of WS_IDLE_50K=1): the rows
wasmkeep / wasmkeep-mem are the Go-native class chat, wasmkeep-wasm / wasmkeep-mem-wasm the wasm
class room-wasm; runs run.sh skipped (no room-wasm built, limits too low for 50,000 sockets) are
listed with the reason; wasmkeep's socket counters from /metrics are shown as deltas per run.
"""
import json
import statistics
import sys
from collections import defaultdict

ORDER = ["wasmkeep", "wasmkeep-wasm", "wasmkeep-mem", "wasmkeep-mem-wasm",
         "workerd-disk", "workerd-mem", "baseline"]

max_other, paths = None, []
for a in sys.argv[1:]:
    if a.startswith("--max-other="):
        max_other = float(a.split("=", 1)[1])
    elif a in ("-h", "--help"):
        print(__doc__)
        sys.exit(0)
    else:
        paths.append(a)
if not paths:
    sys.exit(__doc__)

rows, dropped, skipped, wkm = [], defaultdict(int), [], []
for p in paths:
    with open(p) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if r.get("skipped"):
                skipped.append(r)
                continue
            if str(r.get("label", "")).endswith("-metrics"):
                wkm.append(r)
                continue
            oc = (r.get("cpu") or {}).get("other_cores")
            if max_other is not None and oc is not None and oc > max_other:
                dropped[(r.get("target"), r.get("label"))] += 1
                continue
            rows.append(r)
if dropped:
    print("Dropped noisy repetitions (other_cores > %s): " % max_other +
          ", ".join(f"{t}/{l} x{n}" for (t, l), n in sorted(dropped.items())))


def get(r, path):
    for k in path.split("."):
        if not isinstance(r, dict):
            return None
        r = r.get(k)
    return r if isinstance(r, (int, float)) and not isinstance(r, bool) else None


# Derived fields: milliseconds, server CPU per request.
for r in rows:
    for root in ("lat", "cold", "warm", "fanout_lat", "wake_lat"):
        d = r.get(root)
        if isinstance(d, dict):
            for k in list(d):
                if k.endswith("_us"):
                    d[k[:-3] + "_ms"] = d[k] / 1000.0
    c = r.get("cpu") or {}
    n = r.get("ok")
    if r.get("label") == "cold":  # two requests per name (cold + warm)
        n = 2 * ((r.get("cold") or {}).get("n") or 0)
    if n and c.get("server_cpu_s", -1) >= 0:
        r["server_us_per_req"] = 1e6 * c["server_cpu_s"] / n
    if n and c.get("loadgen_cpu_s") is not None:
        r["loadgen_us_per_req"] = 1e6 * c["loadgen_cpu_s"] / n
    # WebSocket: server CPU per round trip (ws-echo) or per delivery (ws-bcast); KiB per socket (ws-idle)
    if r.get("label") == "ws-echo":
        n = r.get("round_trips")
    elif r.get("label") == "ws-bcast":
        n = (r.get("broadcasts") or 0) * (r.get("sockets") or 0)
    else:
        n = None
    if n and c.get("server_cpu_s", -1) >= 0:
        r["server_us_per_msg"] = 1e6 * c["server_cpu_s"] / n
    for k in ("server_bytes_per_socket_after_open", "server_bytes_per_socket_after_hold", "server_bytes_per_socket_held"):
        if isinstance(r.get(k), (int, float)):
            r[k.replace("bytes", "kib")] = r[k] / 1024.0
    # resident-<class>-<n>: one request to each of n new names on a fresh process
    if r.get("label", "").startswith("resident-") and r.get("ok") and isinstance(r.get("server_rss_kb_after"), (int, float)):
        r["resident_kib_per_actor"] = (r["server_rss_kb_after"] - r["server_rss_kb_before"]) / r["ok"]
        r["rss_mib_after"] = r["server_rss_kb_after"] / 1024.0
    rss = r.get("server_rss_kb")
    if isinstance(rss, dict) and r.get("label") == "ws-idle":
        for k in ("before", "after_open", "after_hold", "after_close"):
            if isinstance(rss.get(k), (int, float)):
                r["rss_mib_" + k] = rss[k] / 1024.0

# ws-idle: were the rooms really hibernated? workerd (/stats): Room objects constructed again at
# the wake; wasmkeep (/metrics): socket wakes during the run.
for r in rows:
    st = r.get("stats")
    if r.get("label") == "ws-idle" and isinstance(st, dict):
        try:
            a, b = json.loads(st.get("after_hold") or "null"), json.loads(st.get("after_wake") or "null")
            r["rooms_rewoken"] = b["roomCtor"] - a["roomCtor"]
        except (ValueError, TypeError, KeyError):
            pass
for m in wkm:
    if m.get("label") == "ws-idle-metrics":
        for r in rows:
            if (r.get("target"), r.get("rep"), r.get("label")) == (m.get("target"), m.get("rep"), "ws-idle"):
                a, b = m.get("after") or {}, m.get("before") or {}
                if "websocket_wakes_total" in a:
                    r["rooms_rewoken"] = a["websocket_wakes_total"] - b.get("websocket_wakes_total", 0)
                # sockets the node closed itself during the run (ping_timeout: the loadgen does not
                # read while idle, so it does not answer pings); the run's closes at its end are 1000s
                r["node_closes"] = sum(v - b.get(k, 0) for k, v in a.items() if k.startswith("websocket_node_closes_total"))
for r in rows:
    if r.get("label") == "ws-idle-50k" and isinstance(r.get("metrics_held"), dict):
        r["node_closes"] = sum(v for k, v in r["metrics_held"].items() if k.startswith("websocket_node_closes_total"))

by = defaultdict(list)
for r in rows:
    by[(r.get("target", "?"), r.get("label", "?"))].append(r)
targets = [t for t in ORDER if any(k[0] == t for k in by)]
targets += sorted({k[0] for k in by} - set(targets))


def fmt_range(vals, fmt):
    if not vals:
        return "–"
    s = fmt.format(statistics.median(vals))
    if len(vals) > 1:
        s += " [" + fmt.format(min(vals)) + "–" + fmt.format(max(vals)) + "]"
    return s


def vals(target, label, path):
    return [v for v in (get(r, path) for r in by.get((target, label), [])) if v is not None]


def med(target, label, path):
    v = vals(target, label, path)
    return statistics.median(v) if v else None


def table(title, label, metrics):
    present = [t for t in targets if by.get((t, label))]
    if not present:
        return
    print(f"\n### {title}\n")
    print("| target | " + " | ".join(m[0] for m in metrics) + " |")
    print("|---|" + "---|" * len(metrics))
    for t in present:
        print(f"| {t} | " + " | ".join(fmt_range(vals(t, label, p), f) for _, p, f in metrics) + " |")


ms, n0, n1, c2 = "{:,.2f}", "{:,.0f}", "{:,.1f}", "{:.2f}"
http_metrics = [
    ("requests/s", "rps", n0), ("p50 ms", "lat.p50_ms", ms), ("p99 ms", "lat.p99_ms", ms),
    ("errors", "errors", n0), ("server CPU µs/req", "server_us_per_req", n1),
    ("server cores", "cpu.server_cores", c2), ("loadgen cores", "cpu.loadgen_cores", c2),
    ("other cores (noise)", "cpu.other_cores", c2),
]
def ws_set(label, key):
    return ", ".join(str(x) for x in sorted({r.get(key) for r in rows if r.get("label") == label} - {None})) or "?"


conns = sorted({r.get("conns") for r in rows if r.get("label", "").startswith("http")} - {None})
names = sorted({r.get("names") for r in rows if r.get("label") == "http-1000names"} - {None})
cnames = sorted({r.get("names") for r in rows if r.get("label") == "cold"} - {None})
secs = sorted({round(r.get("elapsed_s", 0)) for r in rows if r.get("label", "").startswith("http")})
reps = sorted({r.get("rep") for r in rows if r.get("rep")})
conns, names, cnames, secs = (", ".join(str(x) for x in v) or "?" for v in (conns, names, cnames, secs))
has_http = any(r.get("label", "").startswith("http") for r in rows)
print(f"## wasmkeep vs workerd: {len(reps)} rep(s)" + (f"; http runs {secs} s, {conns} conns" if has_http else ""))
table(f"Durable counter, one hot actor, {conns} keep-alive conns", "http-1name", http_metrics)
table(f"Durable counter, {names} names round-robin, {conns} keep-alive conns", "http-1000names", http_metrics)
table(f"Priming pass before the spread scenario: one request to each of {names} names, {conns} conns "
      "(first touch; not a target)", "prime", [
    ("requests/s", "rps", n0), ("p50 ms", "lat.p50_ms", ms), ("p99 ms", "lat.p99_ms", ms), ("errors", "errors", n0),
    ("server CPU µs/req", "server_us_per_req", n1),
    ("server RSS after (KiB)", "server_rss_kb_after", n0),
])
table(f"First request to a new name ({cnames} new names, sequential, 1 keep-alive conn)", "cold", [
    ("cold p50 ms", "cold.p50_ms", ms), ("cold p90 ms", "cold.p90_ms", ms), ("cold p99 ms", "cold.p99_ms", ms),
    ("warm 2nd p50 ms", "warm.p50_ms", ms), ("errors", "errors", n0),
    ("server CPU µs/req", "server_us_per_req", n1), ("RSS bytes/new name", "server_bytes_per_new_name", n0),
])
for lbl in sorted({r.get("label") for r in rows if r.get("label", "").startswith("resident-")},
                  key=lambda l: (l.rsplit("-", 1)[0], int(l.rsplit("-", 1)[1]))):
    cls, n = lbl[len("resident-"):].rsplit("-", 1)
    table(f"Resident actors: one request to each of {int(n):,} new names of {cls} on a fresh process, {conns} conns", lbl, [
        ("KiB per resident actor", "resident_kib_per_actor", n1), ("server RSS after (MiB)", "rss_mib_after", n1),
        ("requests/s", "rps", n0), ("p50 ms", "lat.p50_ms", ms), ("errors", "errors", n0),
    ])
table(f"WebSocket echo: {ws_set('ws-echo', 'sockets')} sockets in one room, {ws_set('ws-echo', 'msgs_per_socket')} "
      f"messages each, sequential round trips", "ws-echo", [
    ("round trips/s", "msgs_per_s", n0), ("p50 ms", "lat.p50_ms", ms), ("p99 ms", "lat.p99_ms", ms),
    ("errors", "errors", n0), ("mismatches", "mismatches", n0), ("server CPU µs/round trip", "server_us_per_msg", n1),
    ("server cores", "cpu.server_cores", c2), ("other cores (noise)", "cpu.other_cores", c2),
])
table(f"WebSocket broadcast: {ws_set('ws-bcast', 'sockets')} sockets in one room, "
      f"{ws_set('ws-bcast', 'broadcasts')} lock-step broadcasts", "ws-bcast", [
    ("deliveries/s", "deliveries_per_s", n0), ("fan-out p50 ms", "fanout_lat.p50_ms", ms),
    ("fan-out p99 ms", "fanout_lat.p99_ms", ms), ("timeouts", "timeouts", n0),
    ("server CPU µs/delivery", "server_us_per_msg", n1), ("other cores (noise)", "cpu.other_cores", c2),
])
table(f"Idle sockets: {ws_set('ws-idle', 'sockets_open')} sockets over {ws_set('ws-idle', 'rooms')} rooms, "
      f"held {ws_set('ws-idle', 'hold_s')} s on a fresh process, then one echo per room (wake)", "ws-idle", [
    ("sockets open", "sockets_open", n0), ("KiB/socket open", "server_kib_per_socket_after_open", n1),
    ("KiB/socket held", "server_kib_per_socket_after_hold", n1), ("RSS before MiB", "rss_mib_before", n1),
    ("RSS held MiB", "rss_mib_after_hold", n1), ("wake p50 ms", "wake_lat.p50_ms", ms),
    ("wake p99 ms", "wake_lat.p99_ms", ms), ("rooms echoed", "wake_lat.n", n0),
    ("rooms woken from hibernation", "rooms_rewoken", n0),
    ("dial errors", "dial_errors", n0), ("verify errors", "verify_errors", n0),
    ("closed by the node", "node_closes", n0),
])
table("Idle sockets at scale on one node (WS_IDLE_50K=1; several loadgen processes)", "ws-idle-50k", [
    ("sockets opened", "sockets_open", n0), ("open on the node", "server_sockets_open", n0),
    ("closed by the node", "node_closes", n0), ("rooms", "rooms", n0), ("RSS before KiB", "server_rss_kb.before", n0),
    ("RSS held KiB", "server_rss_kb.held", n0), ("KiB/socket held (per socket open on the node)", "server_kib_per_socket_held", n1),
    ("server fds", "server_fds", n0),
])
table("Process start to first 200 (counter URL)", "startup", [("ready ms", "ready_ms", n0)])

if wkm:  # wasmkeep's socket counters (/metrics), change over each run
    keys = [("accepted", "websocket_accepted_total"), ("refused", "websocket_refused_total"),
            ("msgs in", "websocket_messages_total_direction_in"), ("msgs out", "websocket_messages_total_direction_out"),
            ("event failures", "websocket_event_failures_total"), ("parks", "parks_total"),
            ("wakes", "websocket_wakes_total"), ("node closes", "websocket_node_closes_total"),
            ("owner closes", "websocket_owner_closes_total")]
    codes = sorted({k for m in wkm for k in (m.get("after") or {}) if k.startswith("websocket_closed_total_code_")})
    keys += [("closed " + k.rsplit("_", 1)[1], k) for k in codes]
    print("\n### wasmkeep socket counters per run (/metrics after minus before)\n")
    print("| target | run | rep | " + " | ".join(k[0] for k in keys) + " |")
    print("|---|---|---|" + "---|" * len(keys))
    for m in wkm:
        a, b = m.get("after") or {}, m.get("before") or {}
        cells = []
        for _, k in keys:
            cells.append("–" if k not in a else f"{a[k] - b.get(k, 0):,.0f}")
        print(f"| {m.get('target')} | {m['label'][:-len('-metrics')]} | {m.get('rep')} | " + " | ".join(cells) + " |")


def ratio(num_t, den_t, label, path):
    """Median and range of per-rep ratios num/den; falls back to the ratio of medians."""
    a = {r.get("rep"): get(r, path) for r in by.get((num_t, label), [])}
    b = {r.get("rep"): get(r, path) for r in by.get((den_t, label), [])}
    per = [a[k] / b[k] for k in a if k is not None and k in b and a[k] is not None and b[k]]
    if per:
        return statistics.median(per), min(per), max(per), len(per)
    ma, mb = med(num_t, label, path), med(den_t, label, path)
    if ma is None or not mb:
        return None
    return ma / mb, ma / mb, ma / mb, 1


checks = []  # (what, num, den, label, path, op, goal)
for wk in ("wasmkeep", "wasmkeep-wasm"):
    checks += [
        (f"one hot actor: req/s {wk} / workerd-disk", wk, "workerd-disk", "http-1name", "rps", ">=", 3.0),
        (f"one hot actor: p99 {wk} / workerd-disk", wk, "workerd-disk", "http-1name", "lat.p99_ms", "<", 1.0),
        (f"1,000 names: req/s {wk} / workerd-disk", wk, "workerd-disk", "http-1000names", "rps", ">=", 3.0),
        (f"1,000 names: p99 {wk} / workerd-disk (no target)", wk, "workerd-disk", "http-1000names", "lat.p99_ms", None, None),
        (f"new name: cold p50 {wk} / workerd-disk", wk, "workerd-disk", "cold", "cold.p50_ms", "<=", 0.5),
    ]
for wk in ("wasmkeep-mem", "wasmkeep-mem-wasm"):
    for label, what in (("http-1name", "one hot actor"), ("http-1000names", "1,000 names")):
        checks.append((f"{what}: server CPU/req {wk} / baseline", wk, "baseline", label, "server_us_per_req", "<=", 2.0))
for wk in ("wasmkeep", "wasmkeep-wasm"):  # the durable path, for reference
    checks.append((f"one hot actor: server CPU/req {wk} / baseline (no target)", wk, "baseline", "http-1name",
                   "server_us_per_req", None, None))
for label, what in (("http-1name", "one hot actor"), ("http-1000names", "1,000 names")):
    checks.append((f"{what}: server CPU/req workerd-mem / baseline (no target)", "workerd-mem", "baseline", label,
                   "server_us_per_req", None, None))

for wk in ("wasmkeep", "wasmkeep-wasm"):  # WebSocket rooms: chat, and room-wasm on the -wasm node
    for wd in ("workerd-mem", "workerd-disk"):
        checks += [
            (f"ws echo: round trips/s {wk} / {wd}", wk, wd, "ws-echo", "msgs_per_s", ">=", 1.5),
            (f"ws echo: p99 {wk} / {wd}", wk, wd, "ws-echo", "lat.p99_ms", "<", 1.0),
            (f"ws broadcast: deliveries/s {wk} / {wd}", wk, wd, "ws-bcast", "deliveries_per_s", ">=", 1.5),
            (f"ws idle: bytes/socket held {wk} / {wd} (no target)", wk, wd, "ws-idle",
             "server_bytes_per_socket_after_hold", None, None),
            (f"ws idle: wake p50 {wk} / {wd} (no target)", wk, wd, "ws-idle", "wake_lat.p50_ms", None, None),
        ]

print("\n### Issue targets (ratios within each rep; median [min–max])\n")
print("| ratio | value | target | met |")
print("|---|---|---|---|")
for what, a, b, label, path, op, goal in checks:
    x = ratio(a, b, label, path)
    if x is None:
        continue
    m, lo, hi, n = x
    val = f"{m:.2f}" + (f" [{lo:.2f}–{hi:.2f}]" if n > 1 else "")
    if op is None:
        print(f"| {what} | {val} | – | – |")
        continue
    ok = {">=": m >= goal, "<": m < goal, "<=": m <= goal}[op]
    print(f"| {what} | {val} | {op} {goal:g} | {'yes' if ok else 'NO'} |")

absolute = []  # (what, target, label, path, op, goal, unit)
for wk in ("wasmkeep", "wasmkeep-wasm", "wasmkeep-mem", "wasmkeep-mem-wasm"):
    absolute += [
        (f"ws idle: RSS growth per hibernated socket, {wk}", wk, "ws-idle", "server_kib_per_socket_after_hold", "<=", 12, "KiB"),
        (f"ws idle: wake p50 after hibernation, {wk}", wk, "ws-idle", "wake_lat.p50_ms", None, None, "ms"),
        (f"ws idle: wake p99 after hibernation, {wk}", wk, "ws-idle", "wake_lat.p99_ms", None, None, "ms"),
    ]
absolute += [(f"ws idle: RSS growth per socket, {t} (reference; the issue cites 73 KB for workerd)", t, "ws-idle",
              "server_kib_per_socket_after_hold", None, None, "KiB") for t in ("workerd-mem", "workerd-disk", "baseline")]
absolute.append((f"{ws_set('ws-idle-50k', 'sockets_open')} idle sockets on one node (ws-idle-50k): RSS growth per socket, "
                 "wasmkeep", "wasmkeep", "ws-idle-50k",
                 "server_kib_per_socket_held", "<=", 12, "KiB"))
absrows = [(w + (f" — NOT VALID: the node closed {sum(vals(t, l, 'node_closes')):,.0f} sockets during the run"
               if sum(vals(t, l, "node_closes")) else ""), vals(t, l, p), op, g, u)
           for w, t, l, p, op, g, u in absolute if vals(t, l, p)]
if absrows:
    print("\n### Absolute targets and references (median [min–max] over reps)\n")
    print("| measure | value | target | met |")
    print("|---|---|---|---|")
    for w, v, op, g, u in absrows:
        val = fmt_range(v, "{:,.2f}") + " " + u
        if op is None:
            print(f"| {w} | {val} | – | – |")
        else:
            ok = {">=": statistics.median(v) >= g, "<=": statistics.median(v) <= g}[op]
            print(f"| {w} | {val} | {op} {g:g} {u} | {'yes' if ok else 'NO'} |")

if skipped:
    print("\nSkipped runs: " + "; ".join(f"{r.get('target')}/{r.get('label')} rep {r.get('rep')}: {r.get('skipped')}"
                                        for r in skipped))

errs = [(r.get("target"), r.get("label"), r.get("rep"), r.get("errors")) for r in rows if r.get("errors")]
for r in rows:  # WebSocket troubles have their own fields
    for k in ("mismatches", "timeouts", "dial_errors", "verify_errors"):
        if r.get(k):
            errs.append((r.get("target"), r.get("label"), r.get("rep"), f"{r[k]} {k.replace('_', ' ')}"))
if errs:
    print("\nRuns with errors: " + ", ".join(f"{t}/{l} rep {p}: {e}" for t, l, p, e in errs))
