#!/usr/bin/env bash
# One-script interleaved comparison: wasmkeep beside workerd (Cloudflare's runtime,
# Durable Objects) and a plain Go baseline, with the peer benchmark's load generator.
# Only ratios from one run of this script count: every scenario runs against every
# target back to back, rep by rep, so a noisy neighbour hits all targets alike.
#
#   bench/peer/run.sh                 smoke run (REPS=1, DURATION=2s, CONNS=8, ...)
#   FULL=1 bench/peer/run.sh          the documented run (REPS=3, DURATION=10s, CONNS=32, ...)
#
# env (FULL=1 changes the defaults in brackets; an explicit value always wins):
#   PEER        the peer benchmark, read-only is fine   (default: ../shared/bench/peer from the repo)
#   WORK        writable copy of it: npm install, bin/ (default: bench/peer/.work, git-ignored)
#   REPS        repetitions                             1      [3]
#   DURATION    measured time of each http run          2s     [10s]
#   WARMUP      unmeasured warm-up before it            1s     [2s]
#   CONNS       keep-alive connections                  8      [32]
#   NAMES       names in the spread scenario            1000   [1000]
#   COLD_NAMES  new names per cold run                  50     [200]
#   QUIET_MAX   wait at most this for an idle machine   2s     [90s]   (QUIET=0 skips the wait)
#   QUIET_THR   "idle" = machine busy % below this      15     [15]
#   TARGETS     which servers (all by default): workerd-disk workerd-mem baseline
#               wasmkeep wasmkeep-wasm wasmkeep-mem wasmkeep-mem-wasm
#   SCENARIOS   which scenarios: http-1name http-1000names cold      (default: all three)
#   WK_FLAGS    extra flags for every wasmkeep node, e.g. "--idle-timeout 60s" (default: none)
#   PRIME=0     do not touch each of the NAMES once before the spread scenario's warm-up
#   PRIME_MAX   time bound of that priming pass (default 120s)
#   BUILD=0     skip make build examples / go build of loadgen and baseline
#   WASMKEEP_REF  build wasmkeep from this commit (git archive into $WORK/src-<sha>) instead of
#               the working tree, e.g. WASMKEEP_REF=HEAD while the tree holds unfinished edits
#
# Targets: workerd-disk (DO storage in SQLite on disk, :8788), workerd-mem (in-memory DO
# storage, :8787), baseline (the peer's plain Go map, :8790), and four wasmkeep nodes, each
# its own process on a fresh bucket: wasmkeep (directory bucket, class counter, :8791),
# wasmkeep-wasm (directory bucket, class counter-wasm, :8792), wasmkeep-mem (mem:// bucket,
# counter, :8793), wasmkeep-mem-wasm (mem://, counter-wasm, :8794). Directory buckets and
# workerd's SQLite files live under $WORK/data, on the same file system.
#
# Output: bench/peer/results/<time>/{log.txt,results.jsonl,server-*.log,summary.md}
# Every process this script starts is stopped by PID on exit (trap).
set -u -o pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PEER=${PEER:-$REPO/../shared/bench/peer}
WORK=${WORK:-$HERE/.work}
if [ "${FULL:-0}" = 1 ]; then
  REPS=${REPS:-3}; DURATION=${DURATION:-10s}; WARMUP=${WARMUP:-2s}; CONNS=${CONNS:-32}
  COLD_NAMES=${COLD_NAMES:-200}; QUIET_MAX=${QUIET_MAX:-90s}
else
  REPS=${REPS:-1}; DURATION=${DURATION:-2s}; WARMUP=${WARMUP:-1s}; CONNS=${CONNS:-8}
  COLD_NAMES=${COLD_NAMES:-50}; QUIET_MAX=${QUIET_MAX:-2s}
fi
NAMES=${NAMES:-1000}
QUIET=${QUIET:-1}
QUIET_THR=${QUIET_THR:-15}
TARGETS=${TARGETS:-"workerd-disk workerd-mem baseline wasmkeep wasmkeep-wasm wasmkeep-mem wasmkeep-mem-wasm"}
SCENARIOS=${SCENARIOS:-"http-1name http-1000names cold"}
BUILD=${BUILD:-1}
PRIME=${PRIME:-1}
WK_FLAGS=${WK_FLAGS:-}
PRIME_MAX=${PRIME_MAX:-120s}

die() { echo "run.sh: $*" >&2; exit 1; }
[ -f "$PEER/go/cmd/loadgen/main.go" ] || die "no peer benchmark at PEER=$PEER"
ulimit -n 20000 2>/dev/null || true

# ---- prepare: a writable copy of the peer benchmark, workerd, loadgen, baseline, wasmkeep ----
mkdir -p "$WORK"
cp -r "$PEER/." "$WORK/" || die "copy $PEER -> $WORK"
chmod -R u+w "$WORK"
if [ ! -x "$WORK/node_modules/.bin/workerd" ]; then
  (cd "$WORK" && npm install --no-audit --no-fund) || die "npm install in $WORK"
fi
WORKERD=$WORK/node_modules/@cloudflare/workerd-linux-64/bin/workerd # the binary itself, so -server-pid is workerd's
[ -x "$WORKERD" ] || WORKERD=$WORK/node_modules/.bin/workerd
if [ "$BUILD" = 1 ]; then
  (cd "$WORK" && . go/env.sh && cd go && go build -o ../bin/loadgen ./cmd/loadgen && go build -o ../bin/baseline ./cmd/baseline) ||
    die "building loadgen/baseline"
fi
SRC=$REPO # the wasmkeep tree that is built and run
if [ -n "${WASMKEEP_REF:-}" ]; then
  sha=$(git -C "$REPO" rev-parse --short=12 "$WASMKEEP_REF^{commit}") || die "bad WASMKEEP_REF $WASMKEEP_REF"
  SRC=$WORK/src-$sha
  if [ ! -d "$SRC" ]; then
    rm -rf "$SRC.tmp" && mkdir -p "$SRC.tmp" && git -C "$REPO" archive "$sha" | tar -x -C "$SRC.tmp" && mv "$SRC.tmp" "$SRC" ||
      die "git archive $sha"
  fi
fi
if [ "$BUILD" = 1 ]; then
  (cd "$SRC" && make build examples) || die "make build examples in $SRC"
fi
LG=$WORK/bin/loadgen
WK=$SRC/bin/wasmkeep
[ -x "$LG" ] && [ -x "$WORK/bin/baseline" ] && [ -x "$WK" ] && [ -f "$SRC/classes/counter-wasm.wasm" ] ||
  die "missing binaries (run with BUILD=1)"

OUT=$HERE/results/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$OUT" "$WORK/data"
OUT=$(cd "$OUT" && pwd)
RES=$OUT/results.jsonl
LOG=$OUT/log.txt
: >"$RES"
DATA=$(mktemp -d -p "$WORK/data" run.XXXXXX) # buckets and SQLite files of this run; removed on exit

declare -A PID PORT URL
PORT[workerd-mem]=8787; PORT[workerd-disk]=8788; PORT[baseline]=8790
PORT[wasmkeep]=8791; PORT[wasmkeep-wasm]=8792; PORT[wasmkeep-mem]=8793; PORT[wasmkeep-mem-wasm]=8794
for t in $TARGETS; do
  [ -n "${PORT[$t]:-}" ] || die "unknown target $t"
  case "$t" in
    *-wasm) URL[$t]=http://127.0.0.1:${PORT[$t]}/actor/counter-wasm/ ;;
    *)      URL[$t]=http://127.0.0.1:${PORT[$t]}/actor/counter/ ;;
  esac
done

log() { echo "$@" | tee -a "$LOG"; }

start_server() { # start_server TARGET
  local t=$1 t0
  case "$t" in
    workerd-mem)  set -- "$WORKERD" serve "$WORK/workerd/config.capnp" ;;
    workerd-disk) mkdir -p "$DATA/workerd-disk"
                  set -- "$WORKERD" serve "$WORK/workerd/config-disk.capnp" --directory-path do-disk="$DATA/workerd-disk" ;;
    baseline)     set -- "$WORK/bin/baseline" -addr "127.0.0.1:${PORT[$t]}" ;;
    wasmkeep-mem|wasmkeep-mem-wasm)
                  set -- "$WK" serve --listen "127.0.0.1:${PORT[$t]}" --bucket mem:// --classes "$SRC/classes" $WK_FLAGS ;;
    wasmkeep|wasmkeep-wasm)
                  set -- "$WK" serve --listen "127.0.0.1:${PORT[$t]}" --bucket "$DATA/$t" --classes "$SRC/classes" $WK_FLAGS ;;
  esac
  log "start $t: $*"
  t0=$(date +%s%N)
  "$@" >>"$OUT/server-$t.log" 2>&1 &
  PID[$t]=$!
  if ! "$LG" wait-ready -url "${URL[$t]}ready" -since "$t0" -max-wait 30s | tee -a "$LOG" |
      sed -n "s/^RESULT startup {/{\"target\":\"$t\",/p" >>"$RES"; then
    die "$t did not get ready (see $OUT/server-$t.log)"
  fi
  kill -0 "${PID[$t]}" 2>/dev/null || die "$t exited (see $OUT/server-$t.log)"
  sleep 1
  log "server $t pid ${PID[$t]} exe $(readlink /proc/${PID[$t]}/exe) $(grep VmRSS /proc/${PID[$t]}/status | tr -s ' \t' ' ')"
}

stop_server() { # stop_server TARGET: SIGTERM, then SIGKILL after 15 s (wasmkeep stops cleanly on SIGTERM)
  local t=$1 p=${PID[$1]:-} rc
  [ -n "$p" ] || return 0
  kill "$p" 2>/dev/null
  for _ in $(seq 1 150); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$p" 2>/dev/null && { log "$t pid $p still running after 15 s: SIGKILL"; kill -9 "$p" 2>/dev/null; }
  wait "$p" 2>/dev/null; rc=$?
  log "stopped $t pid $p (exit $rc)"
  PID[$t]=""
}
cleanup() {
  for t in "${!PID[@]}"; do stop_server "$t"; done
  rm -rf "$DATA"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

run() { # run TARGET LABEL loadgen-mode args...   ({U} is replaced by the target's counter URL)
  local t=$1 label=$2; shift 2
  local args=() a
  for a in "$@"; do args+=("${a//\{U\}/${URL[$t]}}"); done
  kill -0 "${PID[$t]}" 2>/dev/null || { log "!! [$t] server pid ${PID[$t]} is gone; skipping $label"; return; }
  [ "$QUIET" = 1 ] && "$LG" quiet -threshold "$QUIET_THR" -max-wait "$QUIET_MAX" | tee -a "$LOG"
  log "+ [$t] loadgen ${args[*]} -label $label -server-pid ${PID[$t]}"
  "$LG" "${args[@]}" -label "$label" -server-pid "${PID[$t]}" 2>&1 | tee -a "$LOG" |
    sed -n "s/^RESULT [^ ]* {/{\"target\":\"$t\",\"rep\":$r,/p" >>"$RES"
}

rotate() { # rotate N words...: the words starting at position N mod count (the order changes each rep)
  local n=$1; shift
  local a=("$@") i
  for i in "${!a[@]}"; do echo -n "${a[$(((i + n) % ${#a[@]}))]} "; done
}

log "wasmkeep vs workerd run $(date -u -Is): targets=[$TARGETS] scenarios=[$SCENARIOS]"
log "  reps=$REPS duration=$DURATION warmup=$WARMUP conns=$CONNS names=$NAMES cold_names=$COLD_NAMES quiet=$QUIET max=$QUIET_MAX thr=$QUIET_THR prime=$PRIME wk_flags=[$WK_FLAGS]"
log "  uname $(uname -r); cpus $(nproc); $("$WORKERD" --version); $(go version 2>/dev/null); wasmkeep $(if [ "$SRC" = "$REPO" ]; then echo "working tree at $(git -C "$REPO" rev-parse --short HEAD)$(git -C "$REPO" diff --quiet HEAD || echo ' (with uncommitted changes)')"; else echo "commit $sha (${WASMKEEP_REF:-})"; fi)"
log "  peer=$PEER work=$WORK data=$DATA out=$OUT"

r=0
for t in $TARGETS; do start_server "$t"; done

for r in $(seq 1 "$REPS"); do
  log "===== rep $r/$REPS ====="
  order=$(rotate "$((r - 1))" $TARGETS)
  for s in $SCENARIOS; do
    for t in $order; do
      case "$s" in
        http-1name)     run "$t" http-1name http -url "{U}" -names 1 -prefix one -conns "$CONNS" -duration "$DURATION" -warmup "$WARMUP" ;;
        http-1000names)
          # prime: one request to each name first (bounded in count and time), so that the measured
          # run sees resident actors on every target rather than first touches (recorded, label prime)
          [ "$PRIME" = 1 ] && QUIET=0 run "$t" prime http -url "{U}" -names "$NAMES" -prefix spread -conns "$CONNS" -duration "$PRIME_MAX" -warmup 0 -max "$NAMES"
          run "$t" http-1000names http -url "{U}" -names "$NAMES" -prefix spread -conns "$CONNS" -duration "$DURATION" -warmup "$WARMUP" ;;
        cold)           run "$t" cold cold -url "{U}" -names "$COLD_NAMES" -prefix "cold$r-$(date +%s%N)" ;;
        *) die "unknown scenario $s" ;;
      esac
    done
  done
done

for t in $TARGETS; do
  case "$t" in wasmkeep*)
    log "[$t] server log: $(grep -c 'level=ERROR' "$OUT/server-$t.log") ERROR, $(grep -c 'level=WARN' "$OUT/server-$t.log") WARN lines" ;;
  esac
done
cleanup
trap - EXIT
python3 "$HERE/summarize.py" "$RES" | tee "$OUT/summary.md"
log "done $(date -u -Is) -> $OUT"
