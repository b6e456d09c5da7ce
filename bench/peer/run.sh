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
#   SCENARIOS   which scenarios (default: all seven): http-1name http-1000names cold
#               ws-echo ws-bcast ws-idle resident
#   RESIDENT    resident: the counts of new names, each on a fresh process   [1000 10000]
#               (one request to each, 32 conns, then the server's RSS: memory per resident
#               actor; on the wasm targets the wasm room room-wasm too, by an HTTP GET of its page)
#   WebSocket scenarios (on every target with a room; see "Targets" below):
#   WS_SOCKETS  ws-echo and ws-bcast: sockets in the one room 20     [100]
#   WS_MSGS     ws-echo: messages per socket, sequential    50     [1000]
#   WS_SIZE     ws-echo: message size in bytes              16     [16]
#   WS_BCAST    ws-bcast: broadcasts, lock-step             20     [2000] (200 made a 0.3 s run: too noisy)
#   WS_IDLE_SOCKETS  ws-idle: idle sockets                  500    [10000]
#   WS_IDLE_ROOMS    ws-idle: rooms they spread over        10     [100]
#   WS_IDLE_HOLD     ws-idle: idle hold before the wake     4s     [30s]
#   WS_IDLE_HOLD_WK  the same on wasmkeep nodes             WS_IDLE_HOLD
#               (a wasmkeep node pings every socket every 25 s and closes it with 1011 when
#               nothing came back within 10 s; the load generator answers pings during the
#               hold, as a browser does. The runs record the node's ping_timeout closes, and
#               summarize.py marks a run with any as not valid.)
#   WS_IDLE_WK_FLAGS ws-idle: flags of the fresh wasmkeep node it runs on ("--idle-timeout 2s":
#               the rooms hibernate 2 s after the last message, well inside the hold)
#   WS_IDLE_50K=1    after the reps, one more idle run on a fresh `wasmkeep` node (chat) with
#               WS_BIG_SOCKETS (50000) sockets over WS_BIG_ROOMS (100) rooms, held WS_BIG_HOLD
#               (8s), from several loadgen processes (WS_BIG_PART sockets each, 12500): records the
#               node's RSS and its open sockets at that moment (/metrics). Needs a hard
#               `ulimit -n` above the socket count and more local ports than sockets
#               (net.ipv4.ip_local_port_range); it is skipped with a note when they are short.
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
# WebSocket rooms, same plain protocol everywhere (echo; "all:..." to every socket of the room):
# workerd's Room and the baseline at /actor/room/<name>, the Go-native class chat at
# /actor/chat/<name> on wasmkeep and wasmkeep-mem, the wasm class room-wasm (examples/room-wasm)
# at /actor/room-wasm/<name> on wasmkeep-wasm and wasmkeep-mem-wasm: skipped, with a note in the
# log and in results.jsonl, when classes/room-wasm.wasm was not built. ws-idle runs on a fresh
# process of each target (clean RSS; wasmkeep with WS_IDLE_WK_FLAGS), which is restarted with
# its normal flags afterwards. Every (re)start of a node uses a fresh bucket / SQLite directory.
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
  WS_SOCKETS=${WS_SOCKETS:-100}; WS_MSGS=${WS_MSGS:-1000}; WS_BCAST=${WS_BCAST:-2000}
  WS_IDLE_SOCKETS=${WS_IDLE_SOCKETS:-10000}; WS_IDLE_ROOMS=${WS_IDLE_ROOMS:-100}; WS_IDLE_HOLD=${WS_IDLE_HOLD:-30s}
  WS_IDLE_HOLD_WK=${WS_IDLE_HOLD_WK:-$WS_IDLE_HOLD}
else
  REPS=${REPS:-1}; DURATION=${DURATION:-2s}; WARMUP=${WARMUP:-1s}; CONNS=${CONNS:-8}
  COLD_NAMES=${COLD_NAMES:-50}; QUIET_MAX=${QUIET_MAX:-2s}
  WS_SOCKETS=${WS_SOCKETS:-20}; WS_MSGS=${WS_MSGS:-50}; WS_BCAST=${WS_BCAST:-20}
  WS_IDLE_SOCKETS=${WS_IDLE_SOCKETS:-500}; WS_IDLE_ROOMS=${WS_IDLE_ROOMS:-10}; WS_IDLE_HOLD=${WS_IDLE_HOLD:-4s}
  WS_IDLE_HOLD_WK=${WS_IDLE_HOLD_WK:-$WS_IDLE_HOLD}
fi
WS_SIZE=${WS_SIZE:-16}
WS_IDLE_WK_FLAGS=${WS_IDLE_WK_FLAGS:---idle-timeout 2s}
WS_IDLE_50K=${WS_IDLE_50K:-0}
WS_BIG_SOCKETS=${WS_BIG_SOCKETS:-50000}; WS_BIG_ROOMS=${WS_BIG_ROOMS:-100}; WS_BIG_HOLD=${WS_BIG_HOLD:-8s}
NAMES=${NAMES:-1000}
QUIET=${QUIET:-1}
QUIET_THR=${QUIET_THR:-15}
TARGETS=${TARGETS:-"workerd-disk workerd-mem baseline wasmkeep wasmkeep-wasm wasmkeep-mem wasmkeep-mem-wasm"}
SCENARIOS=${SCENARIOS:-"http-1name http-1000names cold ws-echo ws-bcast ws-idle resident"}
RESIDENT=${RESIDENT:-"1000 10000"}
BUILD=${BUILD:-1}
PRIME=${PRIME:-1}
WK_FLAGS=${WK_FLAGS:-}
PRIME_MAX=${PRIME_MAX:-120s}

die() { echo "run.sh: $*" >&2; exit 1; }
[ -f "$PEER/go/cmd/loadgen/main.go" ] || die "no peer benchmark at PEER=$PEER"
# open files: as many as the hard limit allows (every server and loadgen started below inherits
# it). ws-idle needs one fd per socket in the loadgen and one (wasmkeep, baseline) or two
# (workerd) per socket in the server.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || ulimit -n 20000 2>/dev/null || true
NOFILE=$(ulimit -n); [ "$NOFILE" = unlimited ] && NOFILE=1048576

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

declare -A PID PORT URL WSURL WSSKIP STATS
PORT[workerd-mem]=8787; PORT[workerd-disk]=8788; PORT[baseline]=8790
PORT[wasmkeep]=8791; PORT[wasmkeep-wasm]=8792; PORT[wasmkeep-mem]=8793; PORT[wasmkeep-mem-wasm]=8794
for t in $TARGETS; do
  [ -n "${PORT[$t]:-}" ] || die "unknown target $t"
  case "$t" in
    *-wasm) URL[$t]=http://127.0.0.1:${PORT[$t]}/actor/counter-wasm/ ;;
    *)      URL[$t]=http://127.0.0.1:${PORT[$t]}/actor/counter/ ;;
  esac
  case "$t" in # the WebSocket room of each target (WSSKIP: why it has none)
    workerd-*|baseline) WSURL[$t]=ws://127.0.0.1:${PORT[$t]}/actor/room/
                        STATS[$t]=http://127.0.0.1:${PORT[$t]}/stats ;;
    *-wasm) if [ -f "$SRC/classes/room-wasm.wasm" ]; then WSURL[$t]=ws://127.0.0.1:${PORT[$t]}/actor/room-wasm/
            else WSSKIP[$t]="no room-wasm class: $SRC/classes/room-wasm.wasm was not built (examples/room-wasm)"; fi ;;
    *)      WSURL[$t]=ws://127.0.0.1:${PORT[$t]}/actor/chat/ ;;
  esac
done
NSTART=0 # counts server starts: every start gets a fresh bucket / SQLite directory

log() { echo "$@" | tee -a "$LOG"; }

start_server() { # start_server TARGET [extra wasmkeep flags]
  local t=$1 extra=${2:-} t0 d
  NSTART=$((NSTART + 1)); d=$DATA/$t.$NSTART
  case "$t" in
    workerd-mem)  set -- "$WORKERD" serve "$WORK/workerd/config.capnp" ;;
    workerd-disk) mkdir -p "$d"
                  set -- "$WORKERD" serve "$WORK/workerd/config-disk.capnp" --directory-path do-disk="$d" ;;
    baseline)     set -- "$WORK/bin/baseline" -addr "127.0.0.1:${PORT[$t]}" ;;
    wasmkeep-mem|wasmkeep-mem-wasm)
                  set -- "$WK" serve --listen "127.0.0.1:${PORT[$t]}" --bucket mem:// --classes "$SRC/classes" $WK_FLAGS $extra ;;
    wasmkeep|wasmkeep-wasm)
                  set -- "$WK" serve --listen "127.0.0.1:${PORT[$t]}" --bucket "$d" --classes "$SRC/classes" $WK_FLAGS $extra ;;
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

run() { # run TARGET LABEL loadgen-mode args...   ({U}: the target's counter URL, {W}: its room base URL, {S}: -stats URL)
  local t=$1 label=$2; shift 2
  local args=() a
  for a in "$@"; do a=${a//\{U\}/${URL[$t]}}; a=${a//\{W\}/${WSURL[$t]:-}}; args+=("${a//\{S\}/${STATS[$t]:-}}"); done
  kill -0 "${PID[$t]}" 2>/dev/null || { log "!! [$t] server pid ${PID[$t]} is gone; skipping $label"; return; }
  [ "$QUIET" = 1 ] && "$LG" quiet -threshold "$QUIET_THR" -max-wait "$QUIET_MAX" | tee -a "$LOG"
  log "+ [$t] loadgen ${args[*]} -label $label -server-pid ${PID[$t]}"
  "$LG" "${args[@]}" -label "$label" -server-pid "${PID[$t]}" 2>&1 | tee -a "$LOG" |
    sed -n "s/^RESULT [^ ]* {/{\"target\":\"$t\",\"rep\":$r,/p" >>"$RES"
}

jskip() { # jskip TARGET LABEL REASON...: a skipped run, logged and recorded in results.jsonl
  local t=$1 label=$2; shift 2
  log "-- [$t] $label skipped: $*"
  printf '{"target":"%s","rep":%s,"label":"%s","skipped":"%s"}\n' "$t" "$r" "$label" "$(echo "$*" | tr -d '"\\')" >>"$RES"
}

wk_metrics() { # wk_metrics TARGET: the node's socket and hibernation counters as one JSON object
  curl -s --max-time 5 "http://127.0.0.1:${PORT[$1]}/metrics" | awk '
    $1 ~ /^wasmkeep_(websocket|parks_total|parked_wakes_total|actor_failures_total|actor_restarts_total)/ {
      k = $1; sub(/\{/, "_", k); gsub(/[}"]/, "", k); gsub(/[=,]/, "_", k); sub(/^wasmkeep_/, "", k); v[k] += $2 }
    END { printf "{"; n = 0; for (k in v) printf "%s\"%s\":%s", (n++ ? "," : ""), k, v[k]; printf "}" }'
}

ws_run() { # ws_run TARGET LABEL loadgen-mode args...: run, or a skip note; wasmkeep's counters around it
  local t=$1 label=$2 m0=""
  if [ -n "${WSSKIP[$t]:-}" ]; then jskip "$t" "$label" "${WSSKIP[$t]}"; return; fi
  case "$t" in wasmkeep*) m0=$(wk_metrics "$t") ;; esac
  run "$@"
  case "$t" in wasmkeep*)
    [ -n "$m0" ] || m0='{}'
    printf '{"target":"%s","rep":%s,"label":"%s-metrics","before":%s,"after":%s}\n' \
      "$t" "$r" "$label" "$m0" "$(wk_metrics "$t")" >>"$RES"
    log "[$t] after $label: $(tail -1 "$RES" | sed 's/.*"after":\(.*\)}$/\1/')" ;;
  esac
}

ws_idle() { # ws_idle TARGET: a fresh process (wasmkeep: with WS_IDLE_WK_FLAGS), idle sockets, restart
  local t=$1 n=$WS_IDLE_SOCKETS cap hold=$WS_IDLE_HOLD
  case "$t" in wasmkeep*) hold=$WS_IDLE_HOLD_WK ;; esac
  if [ -n "${WSSKIP[$t]:-}" ]; then jskip "$t" ws-idle "${WSSKIP[$t]}"; return; fi
  case "$t" in workerd-*) cap=$(((NOFILE - 1000) / 2)) ;; *) cap=$((NOFILE - 1000)) ;; esac # workerd: 2 fds a socket
  [ "$cap" -gt 19000 ] && cap=19000 # loadgen's own bound
  if [ "$n" -gt "$cap" ]; then
    log "-- [$t] ws-idle: $cap sockets instead of $n (open-file limit $NOFILE$(case "$t" in workerd-*) echo ', workerd holds 2 fds per socket' ;; esac))"
    n=$cap
  fi
  stop_server "$t"
  case "$t" in wasmkeep*) start_server "$t" "$WS_IDLE_WK_FLAGS" ;; *) start_server "$t" ;; esac
  ws_run "$t" ws-idle ws-idle -url "{W}" -sockets "$n" -rooms "$WS_IDLE_ROOMS" -prefix "idle$r" -dial-conc 32 \
    -hold "$hold" -verify=true -wake=true -stats "{S}"
  stop_server "$t"
  start_server "$t"
}

resident() { # resident TARGET: for each count in RESIDENT, a fresh process, one request to each new name, its RSS
  local t=$1 n u cls
  for n in $RESIDENT; do
    for cls in counter room-wasm; do
      u=${URL[$t]}
      if [ "$cls" = room-wasm ]; then
        case "$t" in *-wasm) [ -z "${WSSKIP[$t]:-}" ] || continue; u=http://127.0.0.1:${PORT[$t]}/actor/room-wasm/ ;; *) continue ;; esac
      fi
      stop_server "$t"; start_server "$t"
      QUIET=0 run "$t" "resident-$cls-$n" http -url "$u" -names "$n" -prefix "res$r" -conns "$CONNS" -duration "$PRIME_MAX" -warmup 0 -max "$n"
    done
  done
  stop_server "$t"; start_server "$t"
}

big_idle() { # WS_IDLE_50K=1: WS_BIG_SOCKETS idle sockets on one fresh wasmkeep node (chat), its RSS
  local t=wasmkeep need=$((WS_BIG_SOCKETS + 1000)) ports why="" part=${WS_BIG_PART:-12500} i n left lp pids=() rss0 rss1 open fds mheld sopen
  ports=$(awk '{print $2 - $1 + 1}' /proc/sys/net/ipv4/ip_local_port_range)
  [ "$NOFILE" -lt "$need" ] && why="open-file limit $NOFILE (hard $(ulimit -Hn)) < $need: the node holds one fd per socket"
  [ "$ports" -lt "$need" ] && why="${why:+$why; }$ports local ports (net.ipv4.ip_local_port_range) < $need: every socket goes from 127.0.0.1 to one port"
  if [ -n "$why" ]; then jskip "$t" ws-idle-50k "$why"; return; fi
  stop_server "$t"
  start_server "$t" "$WS_IDLE_WK_FLAGS"
  rss0=$(awk '/^VmRSS/{print $2}' "/proc/${PID[$t]}/status")
  log "+ [$t] ws-idle-50k: $WS_BIG_SOCKETS sockets over $WS_BIG_ROOMS rooms from $(((WS_BIG_SOCKETS + part - 1) / part)) loadgen processes, hold $WS_BIG_HOLD; server RSS before $rss0 kB"
  left=$WS_BIG_SOCKETS; i=0
  while [ "$left" -gt 0 ] && [ "$i" -lt 20 ]; do
    n=$((left < part ? left : part)); left=$((left - n)); i=$((i + 1))
    # the same prefix: every part's sockets join the same WS_BIG_ROOMS rooms
    "$LG" ws-idle -url "${WSURL[$t]}" -sockets "$n" -rooms "$WS_BIG_ROOMS" -prefix big -dial-conc 16 -hold "$WS_BIG_HOLD" \
      -verify=true -wake=true -label ws-idle-50k-part -server-pid "${PID[$t]}" >"$OUT/ws-idle-50k-part$i.log" 2>&1 &
    pids+=($!)
  done
  for _ in $(seq 1 600); do # until every part has opened its sockets (at most 10 min)
    [ "$(cat "$OUT"/ws-idle-50k-part*.log 2>/dev/null | grep -c '^opened ')" -ge "${#pids[@]}" ] && break
    sleep 1
  done
  sleep 5 # past --idle-timeout 2s: the rooms hibernated
  rss1=$(awk '/^VmRSS/{print $2}' "/proc/${PID[$t]}/status")
  fds=$(ls "/proc/${PID[$t]}/fd" | wc -l)
  mheld=$(wk_metrics "$t")
  sopen=$(echo "$mheld" | sed -n 's/.*"websockets_open":\([0-9.e+]*\).*/\1/p'); sopen=${sopen:-0}
  open=$(cat "$OUT"/ws-idle-50k-part*.log | sed -n 's#^opened \([0-9]*\)/.*#\1#p' | awk '{s += $1} END {print s + 0}')
  log "[$t] ws-idle-50k: $open sockets opened, $sopen open on the node, server RSS $rss0 -> $rss1 kB, $fds fds"
  [ "${sopen%%.*}" -lt "$open" ] && log "!! [$t] ws-idle-50k: the node holds $sopen of the $open sockets opened: per-socket RSS is per socket still open; see the node's close reasons in results.jsonl"
  for lp in "${pids[@]}"; do wait "$lp"; done
  cat "$OUT"/ws-idle-50k-part*.log >>"$LOG"
  cat "$OUT"/ws-idle-50k-part*.log | sed -n "s/^RESULT [^ ]* {/{\"target\":\"$t\",\"rep\":0,/p" >>"$RES"
  printf '{"target":"%s","rep":0,"label":"ws-idle-50k","sockets":%s,"sockets_open":%s,"server_sockets_open":%s,"rooms":%s,"server_rss_kb":{"before":%s,"held":%s},"server_bytes_per_socket_held":%s,"server_fds":%s,"metrics_held":%s,"metrics_end":%s}\n' \
    "$t" "$WS_BIG_SOCKETS" "$open" "$sopen" "$WS_BIG_ROOMS" "$rss0" "$rss1" \
    "$(awk -v a="$rss0" -v b="$rss1" -v n="$sopen" 'BEGIN {printf "%.1f", n ? (b - a) * 1024 / n : 0}')" "$fds" "$mheld" "$(wk_metrics "$t")" >>"$RES"
  stop_server "$t"
}

rotate() { # rotate N words...: the words starting at position N mod count (the order changes each rep)
  local n=$1; shift
  local a=("$@") i
  for i in "${!a[@]}"; do echo -n "${a[$(((i + n) % ${#a[@]}))]} "; done
}

log "wasmkeep vs workerd run $(date -u -Is): targets=[$TARGETS] scenarios=[$SCENARIOS]"
log "  reps=$REPS duration=$DURATION warmup=$WARMUP conns=$CONNS names=$NAMES cold_names=$COLD_NAMES quiet=$QUIET max=$QUIET_MAX thr=$QUIET_THR prime=$PRIME wk_flags=[$WK_FLAGS]"
log "  ws: sockets=$WS_SOCKETS msgs=$WS_MSGS size=$WS_SIZE bcast=$WS_BCAST idle_sockets=$WS_IDLE_SOCKETS idle_rooms=$WS_IDLE_ROOMS idle_hold=$WS_IDLE_HOLD (wasmkeep $WS_IDLE_HOLD_WK) idle_wk_flags=[$WS_IDLE_WK_FLAGS] 50k=$WS_IDLE_50K ($WS_BIG_SOCKETS over $WS_BIG_ROOMS rooms, hold $WS_BIG_HOLD); ulimit -n $NOFILE (hard $(ulimit -Hn)); local ports $(tr -s '\t' ' ' </proc/sys/net/ipv4/ip_local_port_range)"
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
        ws-echo)        ws_run "$t" ws-echo ws-echo -url "{W}echo-$r" -sockets "$WS_SOCKETS" -msgs "$WS_MSGS" -size "$WS_SIZE" -timeout 300s ;;
        ws-bcast)       ws_run "$t" ws-bcast ws-bcast -url "{W}bcast-$r" -sockets "$WS_SOCKETS" -msgs "$WS_BCAST" -timeout 120s ;;
        ws-idle)        ws_idle "$t" ;;
        resident)       resident "$t" ;;
        *) die "unknown scenario $s" ;;
      esac
    done
  done
done

if [ "$WS_IDLE_50K" = 1 ]; then
  r=0
  if [ -n "${PORT[wasmkeep]:-}" ] && [[ " $TARGETS " == *" wasmkeep "* ]]; then big_idle; else jskip wasmkeep ws-idle-50k "target wasmkeep not in TARGETS"; fi
fi

for t in $TARGETS; do
  case "$t" in wasmkeep*)
    log "[$t] server log: $(grep -c 'level=ERROR' "$OUT/server-$t.log") ERROR, $(grep -c 'level=WARN' "$OUT/server-$t.log") WARN lines" ;;
  esac
done
cleanup
trap - EXIT
python3 "$HERE/summarize.py" "$RES" | tee "$OUT/summary.md"
log "done $(date -u -Is) -> $OUT"
