#!/usr/bin/env bash
# Actors that each hold a large state, on wasmkeep (directory bucket, its built-in class kv)
# beside workerd (Durable Objects, SQLite storage on local disk; worker.js here), one run:
# each server is filled with NAMES actors of SIZE bytes, then reads and 100-byte writes are
# measured against each, rep by rep, alternating (bench/bigstate/main.go).
#
#   bench/bigstate/run.sh                  NAMES=1000 SIZE=1048576 REPS=3 DURATION=10s CONNS=16
#
# env: WASMKEEP_REF  build wasmkeep from this commit instead of the working tree
#      WORK          where workerd is installed (default bench/peer/.work, as bench/peer/run.sh
#                    leaves it; npm install there if it is missing)
#      PEER          the peer benchmark whose package.json that install copies (default
#                    ../shared/bench/peer)
# Output: bench/bigstate/results/<time>/{log.txt,results.jsonl,server-*.log}
# Every process started here is stopped by PID on exit.
set -u -o pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
WORK=${WORK:-$REPO/bench/peer/.work}
PEER=${PEER:-$REPO/../shared/bench/peer}
NAMES=${NAMES:-1000}; SIZE=${SIZE:-1048576}; REPS=${REPS:-3}; DURATION=${DURATION:-10s}; CONNS=${CONNS:-16}
die() { echo "bigstate: $*" >&2; exit 1; }
WORKERD=$WORK/node_modules/@cloudflare/workerd-linux-64/bin/workerd
if [ ! -x "$WORKERD" ]; then
  mkdir -p "$WORK" && cp -r "$PEER/." "$WORK/" && chmod -R u+w "$WORK" &&
    (cd "$WORK" && npm install --no-audit --no-fund) || die "npm install in $WORK"
fi
OUT=$HERE/results/$(date -u +%Y%m%dT%H%M%SZ); mkdir -p "$OUT"
DATA=$(mktemp -d); LOG=$OUT/log.txt; RES=$OUT/results.jsonl
SRC=$REPO
if [ -n "${WASMKEEP_REF:-}" ]; then
  SRC=$DATA/src && mkdir -p "$SRC" && git -C "$REPO" archive "$WASMKEEP_REF" | tar -x -C "$SRC" || die "archive $WASMKEEP_REF"
fi
(cd "$SRC" && go build -o "$DATA/wasmkeep" ./cmd/wasmkeep && go build -o "$DATA/bigstate" ./bench/bigstate) || die "build"
declare -A PID URL DIR
cleanup() { for t in "${!PID[@]}"; do kill "${PID[$t]}" 2>/dev/null; wait "${PID[$t]}" 2>/dev/null; done; rm -rf "$DATA"; }
trap cleanup EXIT
log() { echo "$@" | tee -a "$LOG"; }
DIR[wasmkeep]=$DATA/bucket; URL[wasmkeep]=http://127.0.0.1:8799/actor/kv/
"$DATA/wasmkeep" serve --listen 127.0.0.1:8799 --bucket "${DIR[wasmkeep]}" --classes "" --cache-dir "" >"$OUT/server-wasmkeep.log" 2>&1 &
PID[wasmkeep]=$!
DIR[workerd-disk]=$DATA/do; URL[workerd-disk]=http://127.0.0.1:8798/actor/kv/; mkdir -p "${DIR[workerd-disk]}"
(cd "$HERE" && exec "$WORKERD" serve config.capnp --directory-path do-disk="${DIR[workerd-disk]}") >"$OUT/server-workerd-disk.log" 2>&1 &
PID[workerd-disk]=$!
for t in wasmkeep workerd-disk; do
  for _ in $(seq 1 100); do curl -s -o /dev/null "${URL[$t]}probe/x" && break; sleep 0.2; done
done
log "bigstate $(date -u -Is): names=$NAMES size=$SIZE reps=$REPS duration=$DURATION conns=$CONNS; $(uname -r), $(nproc) cpus; wasmkeep ${WASMKEEP_REF:-working tree at $(git -C "$REPO" rev-parse --short HEAD)}; $("$WORKERD" --version)"
bench() { # target rep fill
  "$DATA/bigstate" -url "${URL[$1]}" -label "$1" -names "$NAMES" -size "$SIZE" -conns "$CONNS" -duration "$DURATION" \
    -pid "${PID[$1]}" -dir "${DIR[$1]}" -fill="$3" -rep "$2" 2>&1 | tee -a "$LOG" | sed -n "s/^RESULT {/{\"rep\":$2,/p" >>"$RES"
}
for t in wasmkeep workerd-disk; do bench "$t" 0 true; done
for r in $(seq 1 "$REPS"); do
  order="wasmkeep workerd-disk"; [ $((r % 2)) = 0 ] && order="workerd-disk wasmkeep"
  for t in $order; do bench "$t" "$r" false; done
done
python3 - "$RES" <<'PY' | tee "$OUT/summary.md" | tee -a "$LOG"
import json, sys, statistics as st
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("| target | fill s | reads/s | read p50 ms | writes/s | write p50 ms | RSS MiB | storage MiB |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for t in ("wasmkeep", "workerd-disk"):
    rs = [r for r in rows if r["label"] == t and r["rep"] > 0]
    f = [r.get("fill_s") for r in rows if r["label"] == t and r["rep"] == 0]
    if not rs: continue
    m = lambda g: st.median(g(r) for r in rs)
    print(f"| {t} | {f[0] if f else '-'} | {m(lambda r: r['reads']['rps']):,.0f} | {m(lambda r: r['reads']['p50_ms']):.2f} | "
          f"{m(lambda r: r['writes']['rps']):,.0f} | {m(lambda r: r['writes']['p50_ms']):.2f} | "
          f"{m(lambda r: r.get('server_rss_kb', 0)) / 1024:.0f} | {m(lambda r: r.get('storage_bytes', 0)) / 2**20:.0f} |")
PY
log "done -> $OUT"
