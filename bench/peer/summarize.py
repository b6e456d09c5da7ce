#!/usr/bin/env python3
"""Summarize bench/peer/run.sh results (results.jsonl) into markdown.

usage: python3 bench/peer/summarize.py [--max-other=CORES] results/<time>/results.jsonl [more ...]

Per scenario and target: medians over repetitions, with [min-max] when there is more than
one. Then the issue's targets as ratios: each ratio is taken within one repetition (the
targets ran back to back in it) and the median of those is shown, with [min-max].
--max-other drops repetitions during which other processes used more than CORES cores
(loadgen measures it: machine busy time minus its own and the server's).
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

rows, dropped = [], defaultdict(int)
for p in paths:
    with open(p) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            r = json.loads(line)
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
    for root in ("lat", "cold", "warm"):
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
conns = sorted({r.get("conns") for r in rows if r.get("label", "").startswith("http")} - {None})
names = sorted({r.get("names") for r in rows if r.get("label") == "http-1000names"} - {None})
cnames = sorted({r.get("names") for r in rows if r.get("label") == "cold"} - {None})
secs = sorted({round(r.get("elapsed_s", 0)) for r in rows if r.get("label", "").startswith("http")})
reps = sorted({r.get("rep") for r in rows if r.get("rep")})
conns, names, cnames, secs = (", ".join(str(x) for x in v) or "?" for v in (conns, names, cnames, secs))
print(f"## wasmkeep vs workerd: {len(reps)} rep(s); http runs {secs} s, {conns} conns")
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
table("Process start to first 200 (counter URL)", "startup", [("ready ms", "ready_ms", n0)])


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

errs = [(r.get("target"), r.get("label"), r.get("rep"), r.get("errors")) for r in rows if r.get("errors")]
if errs:
    print("\nRuns with errors: " + ", ".join(f"{t}/{l} rep {p}: {e}" for t, l, p, e in errs))
