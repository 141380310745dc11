# shellcheck shell=bash disable=SC2034  # the SYS_* variables are read by measure.sh
# Arbor, release build, SQLite in a fresh data dir, upstream -> the harness's mock.
#
# System file for the comparison harness (shared/bench, see its README "Adding Arbor"). It is
# sourced by measure.sh, which only looks in its own systems/ folder, and the harness folder is
# read-only, so run it from a copy with this file symlinked in (the symlink keeps the repo
# path below right):
#
#   cargo build --release                                   # in the Arbor repo
#   cp -r /work/shared/bench /tmp/anchors/bench && chmod -R u+w /tmp/anchors/bench
#   ln -sf /work/main/bench/systems/arbor.sh /tmp/anchors/bench/systems/arbor.sh
#   cd /tmp/anchors/bench && ./measure.sh mock && ./measure.sh arbor
#
# Knobs (environment):
#   ARBOR_BIN            binary to run (default ${CARGO_TARGET_DIR:-$ARBOR_REPO/target}/release/arbor)
#   ARBOR_REPO           Arbor checkout (default: two levels above this file, symlinks resolved)
#   SYS_PORT             listen port (default 7000)
#   ARBOR_BENCH_TOKEN    bearer token to use instead of creating one
#   ARBOR_BENCH_MODEL_D0, ARBOR_BENCH_MODEL_D5   model names as Arbor lists the mock's models
#   ARBOR_BENCH_ENV      extra VAR=value words for the server's environment (space-separated)
#
# The mock is configured as provider "mock" (OpenAI-compatible, models mock-d0 and mock-d5) in a
# config file written by sys_prepare; the harness asks for "mock-d0", which the gateway finds
# without a provider prefix. sys_token creates a local admin and an API token with the CLI.

ARBOR_REPO=${ARBOR_REPO:-$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)}
ARBOR_BIN=${ARBOR_BIN:-${CARGO_TARGET_DIR:-$ARBOR_REPO/target}/release/arbor}
SYS_PORT=${SYS_PORT:-7000}
SYS_DESC="Arbor, release build, SQLite, upstream -> mock"
SYS_HEALTH_URL="http://127.0.0.1:$SYS_PORT/healthz"
SYS_CHAT_URL="http://127.0.0.1:$SYS_PORT/v1/chat/completions"
SYS_MODEL_D0=${ARBOR_BENCH_MODEL_D0:-mock-d0}
SYS_MODEL_D5=${ARBOR_BENCH_MODEL_D5:-mock-d5}
# Page-load probes (GET with the token). measure.sh needs the variable set, even if empty.
# Arbor's pages take a browser session, not the API token the harness sends, so none are
# probed here; benches/session_page.rs times the session page (BENCHMARKS.md, "Session page").
SYS_PAGES=""

sys_version() { "$ARBOR_BIN" --version; }

sys_prepare() {
  if [ ! -x "$ARBOR_BIN" ]; then
    echo "arbor.sh: no executable at ARBOR_BIN=$ARBOR_BIN (run 'cargo build --release' in $ARBOR_REPO or set ARBOR_BIN)" >&2
    return 1
  fi
  rm -rf "$WORK_DIR/arbor"
  mkdir -p "$WORK_DIR/arbor/data"
  cat > "$WORK_DIR/arbor/arbor.toml" <<TOML
[llm]
detect_local_ollama = false
infer_titles = false
[llm.providers.mock]
kind = "openai_compatible"
base_url = "$MOCK_URL/v1"
api_key = "mock-key"
models = ["mock-d0", "mock-d5"]
TOML
}

# Starts the server in the background in its own session (setsid: measure.sh stops the whole
# process group) and sets SYS_PID to the server's own PID (exec all the way down).
sys_start() {
  local extra_env=()
  # ARBOR_BENCH_ENV is a list of VAR=value words by design.
  read -r -a extra_env <<<"${ARBOR_BENCH_ENV:-}"
  # ARBOR_DATABASE_URL is unset so a value in the caller's environment cannot turn this into a
  # PostgreSQL run; this file's own ARBOR_* knobs are unset so Arbor's ARBOR_-prefixed config
  # loader never sees them.
  # shellcheck disable=SC2086  # $PIN_SUT is "taskset -c N" or empty: splitting intended
  ( cd "$WORK_DIR/arbor" && exec env -u ARBOR_DATABASE_URL -u ARBOR_BIN -u ARBOR_REPO \
      -u ARBOR_BENCH_TOKEN -u ARBOR_BENCH_MODEL_D0 -u ARBOR_BENCH_MODEL_D5 -u ARBOR_BENCH_ENV \
      "${extra_env[@]}" \
      setsid $PIN_SUT "$ARBOR_BIN" --config "$WORK_DIR/arbor/arbor.toml" serve --bind "127.0.0.1:$SYS_PORT" \
      --data-dir "$WORK_DIR/arbor/data" \
      >>"$WORK_DIR/arbor/server.log" 2>&1 ) &
  SYS_PID=$!
}

# Prints a bearer token for /v1: a local admin and an API token, made with the CLI next to the
# running server (SQLite in WAL mode takes the second writer).
sys_token() {
  if [ -n "${ARBOR_BENCH_TOKEN:-}" ]; then
    echo "$ARBOR_BENCH_TOKEN"
    return 0
  fi
  local cli=(env -u ARBOR_DATABASE_URL -u ARBOR_BIN "$ARBOR_BIN" --config "$WORK_DIR/arbor/arbor.toml")
  printf 'bench-password-0123456789\n' |
    "${cli[@]}" admin create --email bench@example.com --data-dir "$WORK_DIR/arbor/data" >&2 || true
  "${cli[@]}" admin token --email bench@example.com --name harness --data-dir "$WORK_DIR/arbor/data"
}
