# shellcheck shell=bash disable=SC2034  # the SYS_* variables are read by measure.sh
# Arbor's Google GenAI surface (POST /v1beta/models/{model}:streamGenerateContent?alt=sse, key in
# x-goog-api-key), same server and mock as arbor.sh. Needs the harness's loadgen with
# bench/harness/loadgen-surfaces.patch (bench/gateway-surfaces.sh applies it), which puts the
# model into the URL; LOADGEN_SURFACE tells loadgen the wire format.
# shellcheck source=arbor.sh
. "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/arbor.sh"
SYS_DESC="Arbor, release build, SQLite, Google GenAI surface, upstream -> mock"
SYS_CHAT_URL="http://127.0.0.1:$SYS_PORT/v1beta/models/{model}:streamGenerateContent?alt=sse"
export LOADGEN_SURFACE=gemini
