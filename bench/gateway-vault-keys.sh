#!/usr/bin/env bash
# The gateway with a key from the configuration file against the same mock behind a key an admin
# shared in the vault, for one or more builds run in turn (A, B, A, B, ...). The shared harness
# configures its mock with a key in the configuration file, so it never sees what a call with a
# stored key costs: reading the secret and its data key, decrypting, and the audit row.
#
#   cargo build --release
#   bench/gateway-vault-keys.sh [BIN ...]        # default: this checkout's release build
#
# Each build gets a fresh data directory (SQLite), one HTTP worker pinned to core 1 (the mock and
# the load generator on core 0), an admin, a token, provider "vk" made through the admin console
# (OpenAI-compatible, the mock) with one shared key, and then streamed Chat Completions through
# `mock/…` (key from the configuration file) and `vk/…` (key from the vault): 200 chunks, at
# 1 stream without delay and with 5 ms between chunks, and at 100 streams with 5 ms.
# Knobs: HARNESS (default ../shared/bench, built in a copy), ROUNDS (default 2), SECONDS_PER (8).
set -euo pipefail
repo=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
harness=${HARNESS:-$repo/../shared/bench}
rounds=${ROUNDS:-2}
per=${SECONDS_PER:-8}
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=("${CARGO_TARGET_DIR:-$repo/target}/release/arbor")
work=$(mktemp -d /tmp/arbor-vault-keys.XXXXXX)
port=7000
mock_port=18000
origin="Origin: http://127.0.0.1:$port"

cp -r "$harness" "$work/harness"
chmod -R u+w "$work/harness"
(cd "$work/harness" && cargo build --release -q)
tools=$work/harness/target/release

cleanup() {
  [ -n "${server:-}" ] && kill "$server" 2>/dev/null || true
  [ -n "${mock:-}" ] && kill "$mock" 2>/dev/null || true
}
trap cleanup EXIT
taskset -c 0 "$tools/mock-upstream" --port "$mock_port" >"$work/mock.log" 2>&1 &
mock=$!

# The harness's system file for Arbor: its configuration (the mock as provider "mock"), start
# and token.
WORK_DIR=$work MOCK_URL="http://127.0.0.1:$mock_port" SYS_PORT=$port PIN_SUT="taskset -c 1"
# shellcheck source=systems/arbor.sh
source "$repo/bench/systems/arbor.sh"

# Starts BIN on a fresh data directory and prepares the token, the provider and its shared key.
start() {
  ARBOR_BIN=$1
  rm -f "$work/cookies"
  sys_prepare
  sys_start
  server=$SYS_PID
  for _ in $(seq 100); do curl -sf "127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
  token=$(sys_token 2>/dev/null | tail -1)
  curl -s -c "$work/cookies" -o /dev/null -H "$origin" --data-urlencode email=bench@example.com \
    --data-urlencode password=bench-password-0123456789 "127.0.0.1:$port/login"
  local csrf provider
  csrf=$(curl -s -b "$work/cookies" "127.0.0.1:$port/admin/providers" |
    grep -o 'csrf-token" content="[^"]*' | head -1 | sed 's/.*content="//')
  provider=$(curl -s -b "$work/cookies" -o /dev/null -w "%{redirect_url}" -H "$origin" -H "X-CSRF-Token: $csrf" \
    --data-urlencode name=vk --data-urlencode label=VK --data-urlencode kind=openai_compatible \
    --data-urlencode "base_url=http://127.0.0.1:$mock_port/v1" --data-urlencode enabled=on \
    --data-urlencode visibility=everyone --data-urlencode allowed_emails= --data-urlencode allowed_groups= \
    --data-urlencode "models=mock-d0
mock-d5" --data-urlencode rpm= --data-urlencode tpm= "127.0.0.1:$port/admin/providers")
  curl -sf -b "$work/cookies" -o /dev/null -H "$origin" -H "X-CSRF-Token: $csrf" \
    --data-urlencode label=shared --data-urlencode key=mock-key-from-the-vault "${provider}/keys"
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$server/stat"; }

# One level: MODEL CONCURRENCY, after a 2 s warm-up.
level() {
  local model=$1 c=$2 t0 t1
  taskset -c 0 "$tools/loadgen" --url "http://127.0.0.1:$port/v1/chat/completions" --token "$token" \
    --model "$model" -c "$c" --duration 2 >/dev/null 2>&1
  t0=$(cpu_ticks)
  taskset -c 0 "$tools/loadgen" --url "http://127.0.0.1:$port/v1/chat/completions" --token "$token" \
    --model "$model" -c "$c" --duration "$per" --out "$work/level.json" >/dev/null 2>&1
  t1=$(cpu_ticks)
  python3 - "$work/level.json" "$model" "$c" "$t0" "$t1" "$(getconf CLK_TCK)" "$label" <<'PY'
import json, sys
path, model, c, t0, t1, tck, label = sys.argv[1:]
d = json.load(open(path))
n = d["ttft_ms"]["n"]
cpu = (int(t1) - int(t0)) * 1000 / int(tck) / max(n, 1)
f = lambda k, p: d[k][p]
print(f"| {label} | {model} | {c} | {n} | {f('ttft_ms','p50'):.2f} / {f('ttft_ms','p99'):.2f} "
      f"| {f('ingress_ms','p50'):.2f} | {f('first_egress_ms','p50'):.2f} | {cpu:.2f} | {sum(d.get('errors', {}).values())} |")
PY
}

echo "| build | model | streams | requests | TTFT p50 / p99 ms | to upstream p50 ms | first chunk back p50 ms | CPU per request ms | errors |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for round in $(seq "$rounds"); do
  for i in "${!bins[@]}"; do
    label="$(printf "%s" "ABCDEFGH" | cut -c$((i + 1)))$round"
    start "${bins[$i]}"
    for spec in "mock-d0 1" "mock-d5 1" "mock-d5 100"; do
      set -- $spec
      level "mock/$1" "$2"
      level "vk/$1" "$2"
    done
    kill "$server"
    wait "$server" 2>/dev/null || true
    server=
  done
done
echo "builds: ${bins[*]}" >&2
