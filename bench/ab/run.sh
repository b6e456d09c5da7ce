#!/usr/bin/env bash
# A/B: two builds of wasmkeep side by side in one run, each its own node on a
# mem:// bucket, under the peer benchmark's load generator: the scenarios
# alternate between the two nodes, rep by rep, so the machine's swings hit
# both alike. Reports each scenario's median for A and B and the ratio B/A, and
# the ratio of the node's CPU per unit of work over the load generator's (a
# measure the machine's swings in speed cancel out of).
#
#   bench/ab/run.sh                          A = WASMKEEP_REF (default HEAD~1), B = the working tree
#   WASMKEEP_REF=c5437b7 bench/ab/run.sh     A = that commit
#   B_REF=HEAD bench/ab/run.sh               B = a commit too
#   WASMKEEP_REF=HEAD B_REF=HEAD A_FLAGS="--wasm-isolation class" B_FLAGS="--wasm-isolation actor" bench/ab/run.sh
#                                            one build, two sets of node flags
#
# env:
#   PEER      the peer benchmark (default ../shared/bench/peer)
#   WORK      writable build folder (default bench/peer/.work, git-ignored)
#   REPS      repetitions                                    3
#   DURATION  measured time of each http run                 6s
#   CONNS     keep-alive connections of the http runs        32
#   WS_SOCKETS, WS_MSGS, WS_BCAST   echo and broadcast sizes 100, 300, 1000
#   IDLE_SOCKETS  idle sockets (over 50 rooms)                2000
#   IDLE_HOLD     how long they are held before the measure   8s
#   A_FLAGS, B_FLAGS  more flags of each side's node (split on spaces)   none
#   BUCKET    mem (mem://) or dir (a fresh directory bucket per side, the
#             embedded store a node runs on by default)            mem
#   SCENARIOS which to run (default all): http-1name http-1000names ws-echo ws-echo-wasm ws-bcast ws-bcast-wasm ws-idle
# Scenarios: http-1name, http-1000names (class counter), ws-echo and ws-bcast
# (class chat), ws-echo-wasm and ws-bcast-wasm (class room-wasm, the wasm chat room,
# built from each side's own source), ws-idle (a fresh node of each side, --idle-timeout 2s,
# no wasm classes).
# Output: bench/ab/results/<time>/{log.txt,results.jsonl,summary.txt}
set -u -o pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PEER=${PEER:-$REPO/../shared/bench/peer}
WORK=${WORK:-$REPO/bench/peer/.work}
A_REF=${WASMKEEP_REF:-HEAD~1}; B_REF=${B_REF:-}
SCENARIOS=${SCENARIOS:-"http-1name http-1000names ws-echo ws-echo-wasm ws-bcast ws-bcast-wasm ws-idle"}
want() { [[ " $SCENARIOS " == *" $1 "* ]]; }
REPS=${REPS:-3}; DURATION=${DURATION:-6s}; CONNS=${CONNS:-32}
WS_SOCKETS=${WS_SOCKETS:-100}; WS_MSGS=${WS_MSGS:-300}; WS_BCAST=${WS_BCAST:-1000}; IDLE_SOCKETS=${IDLE_SOCKETS:-2000}
IDLE_HOLD=${IDLE_HOLD:-8s}
OUT=$HERE/results/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$OUT" "$WORK/bin"
LOG=$OUT/log.txt; RES=$OUT/results.jsonl; : >"$RES"
say() { echo "$*" | tee -a "$LOG"; }
die() { say "ab: $*"; exit 1; }
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

cp -r "$PEER/go" "$WORK/" && chmod -R u+w "$WORK/go" || die "copy $PEER/go"
(cd "$WORK" && . go/env.sh && cd go && go build -o ../bin/loadgen ./cmd/loadgen) || die "build loadgen"
LG=$WORK/bin/loadgen
# classes SRC DIR builds SRC's wasm chat room into DIR/room-wasm.wasm, with
# the guest SDK of the same source, for the ws-echo-wasm scenario.
classes() {
  mkdir -p "$2/classes" # served as --classes: it must exist, empty or not
  want ws-echo-wasm || want ws-bcast-wasm || return 0
  (cd "$1" && GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o "$2/classes/room-wasm.wasm" ./examples/room-wasm) ||
    die "build room-wasm in $1"
}
# build REF into $WORK/ab-<sha>/wasmkeep; "" is the working tree.
build() {
  local ref=$1 dir
  if [ -z "$ref" ]; then
    dir=$WORK/ab-tree; mkdir -p "$dir"
    (cd "$REPO" && go build -o "$dir/wasmkeep" ./cmd/wasmkeep) || die "build the working tree"
    classes "$REPO" "$dir"
    echo "$dir/wasmkeep"; return
  fi
  local sha; sha=$(git -C "$REPO" rev-parse --short=12 "$ref^{commit}") || die "bad ref $ref"
  dir=$WORK/ab-$sha
  if [ ! -x "$dir/wasmkeep" ]; then
    rm -rf "$dir.src" && mkdir -p "$dir.src" && git -C "$REPO" archive "$sha" | tar -x -C "$dir.src" || die "archive $sha"
    (cd "$dir.src" && go build -o "$dir/wasmkeep" ./cmd/wasmkeep) || die "build $sha"
  fi
  [ -e "$dir/classes/room-wasm.wasm" ] || classes "$dir.src" "$dir"
  echo "$dir/wasmkeep"
}
BIN_A=$(build "$A_REF"); BIN_B=$(build "$B_REF")
say "A: $A_REF ($(git -C "$REPO" rev-parse --short "$A_REF")), B: ${B_REF:-working tree at $(git -C "$REPO" rev-parse --short HEAD)$(git -C "$REPO" diff --quiet HEAD || echo ' with changes')}"
say "$(uname -r); cpus $(nproc); $(go version)"
[ -n "${A_FLAGS:-}${B_FLAGS:-}" ] && say "node flags: A ${A_FLAGS:-(none)}; B ${B_FLAGS:-(none)}"

declare -A PID PORT BIN
PORT[A]=8796; PORT[B]=8797; BIN[A]=$BIN_A; BIN[B]=$BIN_B
declare -A FLAGS; FLAGS[A]=${A_FLAGS:-}; FLAGS[B]=${B_FLAGS:-}
BUCKET=${BUCKET:-mem}
declare -A BUCKETS
case "$BUCKET" in
mem) BUCKETS[A]=mem://; BUCKETS[B]=mem:// ;;
dir) for s in A B; do BUCKETS[$s]=$OUT/bucket-$s; rm -rf "${BUCKETS[$s]}"; done ;;
*) die "BUCKET=$BUCKET: want mem or dir" ;;
esac
say "bucket: $BUCKET"
start() { # side [flags...]
  local s=$1; shift
  # shellcheck disable=SC2086 # the side's flags are words
  "${BIN[$s]}" serve ${FLAGS[$s]} --listen 127.0.0.1:${PORT[$s]} --node ab$s --bucket "${BUCKETS[$s]}" --classes "$(dirname "${BIN[$s]}")/classes" --cache-dir "" "$@" \
    >>"$OUT/node-$s.log" 2>&1 &
  PID[$s]=$!
  "$LG" wait-ready -url "http://127.0.0.1:${PORT[$s]}/readyz" >/dev/null 2>&1 || die "node $s did not start"
}
stop() { kill "${PID[$1]}" 2>/dev/null; wait "${PID[$1]}" 2>/dev/null; PID[$1]=; }
cleanup() { for s in A B; do [ -n "${PID[$s]:-}" ] && stop "$s"; done; }
trap cleanup EXIT
NOCLASSES=$OUT/no-classes; mkdir -p "$NOCLASSES"
start A; start B
run() { # side label args...
  local s=$1 label=$2; shift 2
  "$LG" "$@" -server-pid "${PID[$s]}" -label "$label-$s" 2>>"$LOG" | tee -a "$LOG" | sed -n 's/^RESULT [^ ]* //p' >>"$RES"
}
for rep in $(seq 1 "$REPS"); do
  order="A B"; [ $((rep % 2)) = 0 ] && order="B A"
  for s in $order; do
    u=http://127.0.0.1:${PORT[$s]}; w=ws://127.0.0.1:${PORT[$s]}
    want http-1name && run "$s" http-1name http -url "$u/actor/counter/" -names 1 -conns "$CONNS" -duration "$DURATION" -warmup 1s -prefix "r$rep"
    want http-1000names && run "$s" http-1000names http -url "$u/actor/counter/" -names 1000 -conns "$CONNS" -duration "$DURATION" -warmup 1s -prefix "m$rep"
    want ws-echo && run "$s" ws-echo ws-echo -url "$w/actor/chat/echo-$rep" -sockets "$WS_SOCKETS" -msgs "$WS_MSGS" -timeout 120s
    want ws-echo-wasm && run "$s" ws-echo-wasm ws-echo -url "$w/actor/room-wasm/echo-$rep" -sockets "$WS_SOCKETS" -msgs "$WS_MSGS" -timeout 120s
    want ws-bcast && run "$s" ws-bcast ws-bcast -url "$w/actor/chat/bcast-$rep" -sockets "$WS_SOCKETS" -msgs "$WS_BCAST" -timeout 120s
    want ws-bcast-wasm && run "$s" ws-bcast-wasm ws-bcast -url "$w/actor/room-wasm/bcast-$rep" -sockets "$WS_SOCKETS" -msgs "$WS_BCAST" -timeout 120s
  done
  for s in $order; do # idle on a fresh node, then the normal one again
    want ws-idle || continue
    # No wasm classes on the idle node (chat is a Go class): the memory a module's
    # compile at start takes and gives back would fall inside the measure.
    stop "$s"; start "$s" --idle-timeout 2s --classes "$NOCLASSES"
    run "$s" ws-idle ws-idle -url "ws://127.0.0.1:${PORT[$s]}/actor/chat/" -sockets "$IDLE_SOCKETS" -rooms 50 -prefix "idle$rep" \
      -dial-conc 32 -hold "$IDLE_HOLD"
    stop "$s"; start "$s"
  done
done
python3 - "$RES" <<'PY' | tee "$OUT/summary.txt" | tee -a "$LOG"
import json, sys, statistics as st
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
metric = {
    "http-1name": ("req/s", lambda r: r["rps"]), "http-1000names": ("req/s", lambda r: r["rps"]),
    "ws-echo": ("msg/s", lambda r: r["msgs_per_s"]), "ws-echo-wasm": ("msg/s", lambda r: r["msgs_per_s"]),
    "ws-bcast": ("deliveries/s", lambda r: r["deliveries_per_s"]),
    "ws-bcast-wasm": ("deliveries/s", lambda r: r["deliveries_per_s"]),
    "ws-idle": ("B/socket held (lower is better)", lambda r: r["server_bytes_per_socket_after_hold"]),
}
# cost: the node's CPU per unit of work over the load generator's. The load
# generator does the same work for either side, so its CPU per unit follows
# the machine's speed of the moment (it swings by 20% over minutes here),
# and the quotient cancels it: a steadier measure than throughput.
def cost(r):
    c = r.get("cpu") or {}
    if c.get("server_cpu_s", -1) <= 0 or not c.get("loadgen_cpu_s"):
        return None
    return c["server_cpu_s"] / c["loadgen_cpu_s"]
print("| scenario | unit | A (median) | B (median) | B/A | node CPU over load CPU, B/A | reps |")
print("| --- | --- | ---: | ---: | ---: | ---: | --- |")
for name, (unit, f) in metric.items():
    a = [f(r) for r in rows if r["label"] == name + "-A"]
    b = [f(r) for r in rows if r["label"] == name + "-B"]
    if not a or not b:
        continue
    ma, mb = st.median(a), st.median(b)
    ca = [x for x in (cost(r) for r in rows if r["label"] == name + "-A") if x]
    cb = [x for x in (cost(r) for r in rows if r["label"] == name + "-B") if x]
    cr = f"{st.median(cb) / st.median(ca):.3f}" if ca and cb and name != "ws-idle" else ""
    print(f"| {name} | {unit} | {ma:,.0f} | {mb:,.0f} | {mb / ma:.3f} | {cr} | A {', '.join(f'{x:,.0f}' for x in a)}; B {', '.join(f'{x:,.0f}' for x in b)} |")
PY
say "results in $OUT"
