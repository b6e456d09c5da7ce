#!/usr/bin/env bash
# Overload: one wasmkeep node (directory bucket, class counter) under the peer
# benchmark's load generator, first within its connection budget, then with
# more connections than it serves (OVER_CONNS against --max-conns MAX_CONNS
# and its overflow band). Measures what admitted requests see (rate, p50,
# p99) in both runs of one script, what the node shed (its /metrics), and
# that it kept its lease (/readyz, and it did not exit). All traffic stays
# on 127.0.0.1; every run is bounded by DURATION and the loadgen's -max.
#
#   bench/overload/run.sh
#
# env:
#   PEER        the peer benchmark (default ../shared/bench/peer from the repo)
#   WORK        writable build folder (default bench/peer/.work, git-ignored)
#   MAX_CONNS   the node's --max-conns                     64
#   IN_CONNS    connections of the run within the budget  MAX_CONNS (the node at its full budget)
#   OVER_CONNS  connections of the overload run           160
#   DURATION    measured time of each run                 10s
#   REPS        repetitions (alternating in, over)        3
# Output: bench/overload/results/<time>/{log.txt,results.jsonl,node.log}
set -u -o pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PEER=${PEER:-$REPO/../shared/bench/peer}
WORK=${WORK:-$REPO/bench/peer/.work}
MAX_CONNS=${MAX_CONNS:-64}; IN_CONNS=${IN_CONNS:-$MAX_CONNS}; OVER_CONNS=${OVER_CONNS:-160}
DURATION=${DURATION:-10s}; REPS=${REPS:-3}
PORT=8795
OUT=$HERE/results/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$OUT" "$WORK/bin"
LOG=$OUT/log.txt
say() { echo "$*" | tee -a "$LOG"; }
die() { say "run.sh: $*"; exit 1; }

cp -r "$PEER/go" "$WORK/" && chmod -R u+w "$WORK/go" || die "copy $PEER/go"
(cd "$WORK" && . go/env.sh && cd go && go build -o ../bin/loadgen ./cmd/loadgen) || die "build loadgen"
(cd "$REPO" && go build -o "$WORK/bin/wasmkeep" ./cmd/wasmkeep) || die "build wasmkeep"
LOADGEN=$WORK/bin/loadgen

DATA=$(mktemp -d)
NODE_PID=
cleanup() { [ -n "$NODE_PID" ] && kill "$NODE_PID" 2>/dev/null && wait "$NODE_PID" 2>/dev/null; rm -rf "$DATA"; }
trap cleanup EXIT
"$WORK/bin/wasmkeep" serve --listen 127.0.0.1:$PORT --bucket "$DATA/bucket" --classes "" --cache-dir "" \
  --max-conns "$MAX_CONNS" >"$OUT/node.log" 2>&1 &
NODE_PID=$!
"$LOADGEN" wait-ready -url "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 || die "node did not start: $(tail -5 "$OUT/node.log")"
say "node pid $NODE_PID: $(grep -o 'msg="descriptor budget".*' "$OUT/node.log")"

metrics() { curl -s "http://127.0.0.1:$PORT/metrics" | grep -E '^wasmkeep_http_connections_shed_total|^wasmkeep_lease' | tr '\n' ' '; }
for rep in $(seq 1 "$REPS"); do
  for run in in over; do
    conns=$IN_CONNS; [ "$run" = over ] && conns=$OVER_CONNS
    say "rep $rep $run: $conns connections against --max-conns $MAX_CONNS"
    "$LOADGEN" http -url "http://127.0.0.1:$PORT/actor/counter/" -names 1000 -conns "$conns" -duration "$DURATION" \
      -warmup 1s -server-pid "$NODE_PID" -label "$run-$rep" 2>>"$LOG" | tee -a "$LOG" | sed -n 's/^RESULT [^ ]* //p' >>"$OUT/results.jsonl"
    ready=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/readyz")
    kill -0 "$NODE_PID" 2>/dev/null || die "the node exited: $(tail -5 "$OUT/node.log")"
    say "  readyz $ready; $(metrics)"
    [ "$ready" = 200 ] || die "the node's lease is not valid after the $run run"
  done
done
python3 - "$OUT/results.jsonl" <<'PY' | tee -a "$LOG"
import json, sys, statistics as st
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def med(kind, f):
    return st.median(f(r) for r in rows if r["label"].startswith(kind + "-"))
for kind in ("in", "over"):
    print(f"{kind}: {med(kind, lambda r: r['conns']):.0f} conns, {med(kind, lambda r: r['rps']):.0f} ok/s, "
          f"p50 {med(kind, lambda r: r['lat']['p50_us']):.0f} us, p99 {med(kind, lambda r: r['lat']['p99_us']):.0f} us, "
          f"errors (shed) {med(kind, lambda r: r['errors']):.0f} per run (medians of {len([r for r in rows if r['label'].startswith(kind)])})")
print(f"over/in: rate {med('over', lambda r: r['rps']) / med('in', lambda r: r['rps']):.2f}x, "
      f"p99 {med('over', lambda r: r['lat']['p99_us']) / med('in', lambda r: r['lat']['p99_us']):.2f}x")
PY
say "results in $OUT"
