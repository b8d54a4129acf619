#!/usr/bin/env bash
# server_soak.sh: the long soak of `specdec serve` (tests/test_server_soak.sh at length: thousands
# of requests from several clients, on loopback with the real binary and the embedded model) and
# its record.
#   bash scripts/server_soak.sh [OUT.md]   # default docs/benchmarks/server-soak-cpu-<UTC date>.md
# SOAK_REQUESTS (2000), SOAK_CLIENTS (8), SOAK_N (tokens per generation, 4) size it; SPECDEC_BIN
# names the CLI (build/specdec; the load generator server_soak is built next to it). Exit status
# is the soak's: non-zero on any wrong answer, unexpected status, crash or memory growth.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-docs/benchmarks/server-soak-cpu-$(date -u +%F).md}
export SOAK_REQUESTS=${SOAK_REQUESTS:-2000} SOAK_CLIENTS=${SOAK_CLIENTS:-8} SOAK_N=${SOAK_N:-4}
export SPECDEC_BIN=${SPECDEC_BIN:-$PWD/build/specdec}
rep=$(mktemp); log=$(mktemp)
trap 'rm -f "$rep" "$log"' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(date +%s)
SOAK_REPORT=$rep bash tests/test_server_soak.sh >"$log" 2>&1
rc=$?
secs=$(( $(date +%s) - t0 ))
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'avx2|fma|f16c|avx512f|avx512bw|avx512vl|avx512_bf16|avx512_vnni|amx_tile' | tr '\n' ' ')
{
    echo "# Server soak on CPU: $SOAK_REQUESTS requests from $SOAK_CLIENTS clients"
    echo
    echo "\`specdec serve\` under load and faults on loopback: the real binary serving the embedded model"
    echo "(\`models/qwen3-kernel\`, MTP drafter on by default, 1 thread, \`--queue $((SOAK_CLIENTS * 2)) --max-body 16384\`), driven by"
    echo "the load generator \`tests/server/soak.c\`. Every greedy and seeded completion is compared byte for"
    echo "byte with the text \`specdec run\` printed for the same prompt and settings (6 prompts, $SOAK_N tokens;"
    echo "seeded: temperature 0.8, top-p 0.95, seed 1000 + prompt index, \`specdec.sampling\` \"seeded\")."
    echo "Hang-ups close the socket after the first SSE event of a 200-token stream; oversized bodies are"
    echo "sent with Content-Length and chunked; headers run past the default --max-header-bytes (16384);"
    echo "malformed JSON and bad HTTP come in several forms."
    echo
    echo "- machine: $cpu, $(nproc) CPUs, flags used by specdec: $flags; $(free -g | awk '/^Mem:/ {print $2}') GiB; Linux $(uname -r)"
    echo "- load average (1/5/15 min) before: $load_before; after: $load_after (the machine is shared)"
    echo "- commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src tools tests include CMakeLists.txt || echo ' (with uncommitted changes)')"
    echo "- command: \`SOAK_REQUESTS=$SOAK_REQUESTS SOAK_CLIENTS=$SOAK_CLIENTS SOAK_N=$SOAK_N bash scripts/server_soak.sh\` ($secs s in all, expected texts included)"
    echo
    echo "One worker generates for all clients (batch 1), so with several clients the latencies below are"
    echo "mostly time in the queue; a generation alone is the hang-up row's last request."
    echo
    cat "$rep"
} >"$OUT"
tail -5 "$log"
echo "record: $OUT"
exit $rc
