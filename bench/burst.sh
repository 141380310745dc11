#!/usr/bin/env bash
# bench/burst.sh: the memory target of issue 23 as it is worded, "RSS back within 10 MB of idle
# within 30 s after a burst ends" (BENCHMARKS.md, "Performance work"). The shared harness samples
# RSS only 5 s after its last level; this runs one burst and samples for 30 s after it.
#
# It uses the shared harness's binaries (mock upstream, loadgen, procmon) and Arbor's system file,
# pinned like measure.sh (server on core 1, mock and loadgen on core 0):
#
#   cp -r /work/shared/bench /tmp/anchors/bench && chmod -R u+w /tmp/anchors/bench
#   ln -sf "$PWD/bench/systems/arbor.sh" /tmp/anchors/bench/systems/arbor.sh
#   (cd /tmp/anchors/bench && cargo build --release)
#   HARNESS=/tmp/anchors/bench ARBOR_BIN=target/release/arbor bench/burst.sh
#
# Steps: a fresh data dir; the server started and left idle IDLE_SETTLE s (RSS sampled: "idle");
# one request per model; WARM s at 100 streams, then BURST s at 1,000 streams, 5 ms between
# chunks; the harness's drain (no stream in flight, CPU quiet); then RSS every 5 s for 30 s,
# counted from the end of the burst. Prints one JSON object; the target is met when `after_30s`
# minus `idle` is at most 10 MB.
#
# Knobs: HARNESS (the harness copy, default /tmp/anchors/bench), ARBOR_BIN, IDLE_SETTLE=10,
# WARM=3, BURST=10, STREAMS=1000, SUT_CPUS=1, HARNESS_CPUS=0, MOCK_PORT=18000, SYS_PORT=7000.
set -euo pipefail

HARNESS=${HARNESS:-/tmp/anchors/bench}
BIN=$HARNESS/target/release
IDLE_SETTLE=${IDLE_SETTLE:-10}
WARM=${WARM:-3}
BURST=${BURST:-10}
STREAMS=${STREAMS:-1000}
SUT_CPUS=${SUT_CPUS-1}
HARNESS_CPUS=${HARNESS_CPUS-0}
MOCK_PORT=${MOCK_PORT:-18000}
for b in mock-upstream loadgen procmon; do
  [ -x "$BIN/$b" ] || { echo "burst.sh: no $BIN/$b (build the harness copy: cd $HARNESS && cargo build --release)" >&2; exit 2; }
done

WORK_DIR=$(mktemp -d /tmp/arbor-burst.XXXXXX)
PIN_SUT=""; PIN_H=""
[ -n "$SUT_CPUS" ] && PIN_SUT="taskset -c $SUT_CPUS"
[ -n "$HARNESS_CPUS" ] && PIN_H="taskset -c $HARNESS_CPUS"
MOCK_URL="http://127.0.0.1:$MOCK_PORT"
export PIN_SUT MOCK_URL WORK_DIR

http_ok() { [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$1" || true)" = 200 ]; }
rss_mb() { "$BIN/procmon" "$1" --once | python3 -c 'import json,sys; print(json.load(sys.stdin)["rss_mb"])'; }
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

MOCK_PID=""; SYS_PID=""
stop() { # the process group setsid made, then the leader
  local pid=$1
  [ -z "$pid" ] && return 0
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
cleanup() { stop "$SYS_PID"; stop "$MOCK_PID"; rm -rf "$WORK_DIR"; }
trap cleanup EXIT

http_ok "$MOCK_URL/health" && { echo "burst.sh: port $MOCK_PORT already in use" >&2; exit 1; }
# shellcheck disable=SC2086  # $PIN_H is "taskset -c N" or empty: splitting intended
( exec setsid $PIN_H "$BIN/mock-upstream" --port "$MOCK_PORT" --chunks 200 --models mock-d0,mock-d5 \
    >>"$WORK_DIR/mock.log" 2>&1 ) &
MOCK_PID=$!
until http_ok "$MOCK_URL/health"; do sleep 0.05; done

# shellcheck source=systems/arbor.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/systems/arbor.sh"
sys_prepare
sys_start
until http_ok "$SYS_HEALTH_URL"; do
  sleep 0.1
  kill -0 "$SYS_PID" 2>/dev/null || { echo "burst.sh: the server exited; see $WORK_DIR/arbor/server.log" >&2; exit 1; }
done
sleep "$IDLE_SETTLE"
IDLE=$(rss_mb "$SYS_PID")
log "idle: $IDLE MB (pid $SYS_PID)"
TOKEN=$(sys_token)

load() { # STREAMS SECONDS
  # shellcheck disable=SC2086
  $PIN_H "$BIN/loadgen" --url "$SYS_CHAT_URL" --token "$TOKEN" --model "$SYS_MODEL_D5" -c "$1" \
    --duration "$2" --timeout 60 --ramp 1 --include-usage --out "$WORK_DIR/load-$1.json" >/dev/null
}
for m in "$SYS_MODEL_D0" "$SYS_MODEL_D5"; do
  # shellcheck disable=SC2086
  $PIN_H "$BIN/loadgen" --url "$SYS_CHAT_URL" --token "$TOKEN" --model "$m" -c 1 --requests 1 \
    --timeout 60 --out "$WORK_DIR/sanity.json" >/dev/null
done
load 100 "$WARM"
"$BIN/procmon" "$SYS_PID" --interval-ms 500 >"$WORK_DIR/burst.procmon.json" &
PM=$!
load "$STREAMS" "$BURST"
ENDED=$(date +%s.%N)
kill -TERM "$PM" 2>/dev/null || true; wait "$PM" 2>/dev/null || true
python3 "$HARNESS/tools/drain.py" "$MOCK_URL" "$BIN/procmon" "$SYS_PID" 120 >/dev/null
SAMPLES=()
for at in 5 10 15 20 25 30; do
  python3 -c "import time; time.sleep(max(0.0, $ENDED + $at - time.time()))"
  SAMPLES+=("$at:$(rss_mb "$SYS_PID")")
  log "+${at}s: ${SAMPLES[-1]#*:} MB"
done

python3 - "$IDLE" "$WORK_DIR/load-$STREAMS.json" "$WORK_DIR/burst.procmon.json" "$ARBOR_BIN" "${SAMPLES[@]}" <<'EOF'
import json, sys
idle, load, procmon, binary, samples = float(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
after = {f"after_{s.split(':')[0]}s": float(s.split(':')[1]) for s in samples}
load, burst = json.load(open(load)), json.load(open(procmon))
print(json.dumps({
    "binary": binary,
    "burst": {"rps": load["rps"], "ok": load["requests_ok"], "errors": load["requests_err"]},
    "idle": idle,
    "peak": burst.get("rss_mb_max"),
    **after,
    "over_idle_at_30s": round(after["after_30s"] - idle, 1),
    "target_met": after["after_30s"] - idle <= 10.0,
}))
EOF
