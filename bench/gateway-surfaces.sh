#!/usr/bin/env bash
# The gateway's four surfaces under the shared harness's load, in one sitting: the mock served
# directly, then Arbor through Chat Completions, Anthropic Messages, OpenAI Responses and Google
# GenAI. The harness (../shared/bench) is read-only and its loadgen speaks only Chat Completions,
# so this copies it, applies bench/harness/loadgen-surfaces.patch (a --surface option, default
# from LOADGEN_SURFACE) and links Arbor's system files in.
#
#   cargo build --release          # Arbor, in this checkout
#   bench/gateway-surfaces.sh      # ~15 minutes with the defaults below
#
# Knobs: HARNESS (default ../shared/bench), COPY (default /tmp/anchors/bench-surfaces),
# SURFACES (default "arbor arbor_anthropic arbor_responses arbor_gemini"), and measure.sh's
# own (MODES, CONCS, RUNS, DURATION; defaults here: d5, "1 100", 2 runs of 10 s).
set -euo pipefail
repo=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
harness=${HARNESS:-$repo/../shared/bench}
copy=${COPY:-/tmp/anchors/bench-surfaces}
surfaces=${SURFACES:-"arbor arbor_anthropic arbor_responses arbor_gemini"}
export MODES=${MODES:-d5} CONCS=${CONCS:-"1 100"} RUNS=${RUNS:-2} DURATION=${DURATION:-10}
export ARBOR_BIN=${ARBOR_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/arbor}

rm -rf "$copy"
mkdir -p "$(dirname "$copy")"
cp -r "$harness" "$copy"
chmod -R u+w "$copy"
patch -s -d "$copy" -p1 <"$repo/bench/harness/loadgen-surfaces.patch"
for f in "$repo"/bench/systems/*.sh; do ln -sf "$f" "$copy/systems/"; done

cd "$copy"
./measure.sh mock
for s in $surfaces; do ./measure.sh "$s"; done
mock=$(ls -t results/mock-*.json | head -1)
new=()
for s in $surfaces; do new+=("$(ls -t results/"$s"-*.json | head -1)"); done
python3 tools/report.py --baseline "$mock" "${new[@]}"
echo "results: $copy/results (copy the new files to bench/results/)"
