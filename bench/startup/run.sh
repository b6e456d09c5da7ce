#!/usr/bin/env bash
# Start-up: process start to the first 200 of /actor/counter/ready, for a
# node built from the working tree (with the wasm classes of ./classes, and
# with none), one built from WASMKEEP_REF, and workerd when the peer
# benchmark has it installed (npm ci in its folder), in turn, REPS times
# each. Every node runs on a mem:// bucket and is stopped by its PID.
#
#   make examples && bench/startup/run.sh
#   WASMKEEP_REF=ccc6ab9 REPS=15 bench/startup/run.sh
#
# env: PEER (default ../shared/bench/peer), WORK (default bench/peer/.work),
#      REPS (default 9), WASMKEEP_REF (default HEAD~1).
# Prints each start's time, then the median and range of each.
set -u -o pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PEER=${PEER:-$REPO/../shared/bench/peer}
WORK=${WORK:-$REPO/bench/peer/.work}
REPS=${REPS:-9}
REF=${WASMKEEP_REF:-HEAD~1}
mkdir -p "$WORK/bin"
[ -x "$WORK/bin/loadgen" ] || (cp -r "$PEER/go" "$WORK/" && cd "$WORK/go" && go build -o ../bin/loadgen ./cmd/loadgen) || exit 1
LG=$WORK/bin/loadgen
NEW=$WORK/startup-tree/wasmkeep
(cd "$REPO" && go build -o "$NEW" ./cmd/wasmkeep) || exit 1
sha=$(git -C "$REPO" rev-parse --short=12 "$REF^{commit}") || exit 1
OLD=$WORK/startup-$sha/wasmkeep
if [ ! -x "$OLD" ]; then
  rm -rf "$OLD.src" && mkdir -p "$OLD.src" && git -C "$REPO" archive "$sha" | tar -x -C "$OLD.src" && (cd "$OLD.src" && go build -o "$OLD" ./cmd/wasmkeep) || exit 1
fi
CLASSES=$REPO/classes
[ -d "$CLASSES" ] || { echo "no $CLASSES: run make examples first"; exit 1; }
WORKERD=$PEER/node_modules/.bin/workerd
one() { # label port command...
  local label=$1 port=$2; shift 2
  local t0 pid r
  t0=$(date +%s%N)
  "$@" >/dev/null 2>&1 &
  pid=$!
  r=$($LG wait-ready -url "http://127.0.0.1:$port/actor/counter/ready" -since "$t0" | grep -o '"ready_ms":[0-9.]*' | cut -d: -f2)
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  echo "$label ${r:-none}"
}
# A first start of each build compiles its classes and records them (known
# modules): not measured.
for b in "$NEW" "$OLD"; do
  "$b" serve --listen 127.0.0.1:18099 --bucket mem:// --classes "$CLASSES" >/dev/null 2>&1 & p=$!
  $LG wait-ready -url http://127.0.0.1:18099/actor/counter/ready >/dev/null; kill $p; wait $p 2>/dev/null
done
out=$(for i in $(seq 1 "$REPS"); do
  [ -x "$WORKERD" ] && (cd "$PEER" && one workerd 8787 "$WORKERD" serve workerd/config.capnp)
  one "before($sha)" 18091 "$OLD" serve --listen 127.0.0.1:18091 --bucket mem:// --classes "$CLASSES"
  one after 18092 "$NEW" serve --listen 127.0.0.1:18092 --bucket mem:// --classes "$CLASSES"
  one after-no-classes 18093 "$NEW" serve --listen 127.0.0.1:18093 --bucket mem:// --classes ""
done)
echo "$out"
echo "$out" | sort -k1,1 -k2,2n | awk '{v[$1]=v[$1]" "$2; n[$1]++} END {for (k in v) {split(v[k], a, " "); m=a[int((n[k]+1)/2)]; printf "%-22s median %s ms (%s to %s)\n", k, m, a[1], a[n[k]]}}'
