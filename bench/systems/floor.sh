# shellcheck shell=bash disable=SC2034  # the SYS_* variables are read by measure.sh
# A bare relay in front of the harness's mock: the floor under Arbor's gateway on this machine.
#
# The relay is `benches/relay/mod.rs`, served by the browser-path bench's binary with
# `--relay-serve KIND PORT UPSTREAM_PORT` (BENCHMARKS.md, step 35). Two kinds:
#   bytes       tokio alone: each read from the upstream written to the client as it is
#   libraries   actix-web (one worker) + reqwest, the upstream's body passed through unparsed
# Neither checks a token, parses a chunk or writes anything down: what they cost per answer, any
# proxy (the first) or any server on Arbor's libraries (the second) costs at least here.
#
#   cargo bench --locked --bench browser_path --no-run      # in the Arbor repo
#   ln -sf /work/main/bench/systems/floor.sh /tmp/anchors/bench/systems/floor.sh
#   cd /tmp/anchors/bench && FLOOR_KIND=bytes ./measure.sh floor
#
# Knobs (environment):
#   FLOOR_KIND   bytes (default) or libraries
#   FLOOR_BIN    the bench binary (default: the newest target/release/deps/browser_path-*)
#   SYS_PORT     listen port (default 7100)

FLOOR_REPO=${FLOOR_REPO:-$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)}
FLOOR_KIND=${FLOOR_KIND:-bytes}
if [ -z "${FLOOR_BIN:-}" ]; then
  # The bench's executable: the newest file without an extension of that name.
  FLOOR_BIN=$(find "${CARGO_TARGET_DIR:-$FLOOR_REPO/target}/release/deps" -maxdepth 1 -type f \
    -name 'browser_path-*' ! -name '*.d' -printf '%T@ %p\n' 2>/dev/null | sort -n | tail -1 | cut -d' ' -f2-)
fi
SYS_PORT=${SYS_PORT:-7100}
SYS_DESC="bare relay ($FLOOR_KIND) in front of the mock"
SYS_HEALTH_URL="http://127.0.0.1:$SYS_PORT/healthz"
SYS_CHAT_URL="http://127.0.0.1:$SYS_PORT/v1/chat/completions"
SYS_MODEL_D0=mock-d0
SYS_MODEL_D5=mock-d5
SYS_PAGES=""

sys_version() { echo "floor-$FLOOR_KIND $(cd "$FLOOR_REPO" && git rev-parse --short HEAD)"; }

sys_prepare() {
  if [ ! -x "${FLOOR_BIN:-}" ]; then
    echo "floor.sh: no bench binary (run 'cargo bench --bench browser_path --no-run' or set FLOOR_BIN)" >&2
    return 1
  fi
  mkdir -p "$WORK_DIR/floor"
}

sys_start() {
  # shellcheck disable=SC2086  # $PIN_SUT is "taskset -c N" or empty: splitting intended
  ( exec setsid $PIN_SUT "$FLOOR_BIN" --relay-serve "$FLOOR_KIND" "$SYS_PORT" "${MOCK_URL##*:}" \
      >>"$WORK_DIR/floor/relay.log" 2>&1 ) &
  SYS_PID=$!
}

sys_token() { echo "none"; }
