#!/bin/bash
# cpu_prefill_vs_llamacpp.sh: CPU prompt processing (prefill) of specdec next to llama.cpp on the
# same machine, the same threads and a prompt of the same length, in one run, arms interleaved
# round by round (medians of ROUNDS with min / max, load before and after).
#   llama.cpp   llama-bench pp512 (-p 512 -n 0), built -march=native from the pinned peer source,
#               on the embedded target as Q4_0 (4.5 bits per weight, as specdec's 4-bit g64 bf16),
#               or on random Q4_0 weights of the inflated shape (gguf_random_shape.py)
#   specdec     classic prefill of a 512-token prompt (bench/prompt_of_tokens.sh): specdec bench's
#               prefill line (a discarded warm-up, then one timed generation of 4 tokens a round), at
#               the default precision and kernel level
# Usage: bench/cpu_prefill_vs_llamacpp.sh [ROUNDS=5] [THREADS=2] [MODEL=models/qwen3-kernel]
#   A MODEL made by `specdec inflate --shape S` (its config.json names the shape's sizes) is compared
#   with random Q4_0 weights of shape S: SHAPE=qwen3-1.7b|qwen3-8b|qwen3-32b names it.
#   env PEERS (default ../shared/peers next to the repository), PEER_DIR (llama.cpp build, default
#   /tmp/peer-cpu; built when missing), BUILD (default build). The GGUF conversion needs numpy
#   (Debian package python3-numpy).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
ROUNDS=${1:-5}
TH=${2:-2}
MODEL=${3:-models/qwen3-kernel}
PEERS=${PEERS:-$ROOT/../shared/peers}
PEER_DIR=${PEER_DIR:-/tmp/peer-cpu}
BUILD=${BUILD:-build}
SD=$BUILD/specdec
[ -x "$SD" ] || { echo "no $SD: build specdec first" >&2; exit 1; }
[ -x "$PEER_DIR/bin/llama-bench" ] || bash "$PEERS/build.sh" cpu "$PEER_DIR" >&2
PY=${PYTHON:-python3}
$PY -c 'import numpy' 2>/dev/null || PY=/usr/bin/python3
$PY -c 'import numpy' 2>/dev/null || { echo "$(basename "$0"): the peer's GGUF conversion needs numpy: apt-get install python3-numpy" >&2; exit 2; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

if [ -n "${SHAPE:-}" ]; then
    $PY "$PEERS/gguf_random_shape.py" "$SHAPE" models/qwen3-kernel "$T/peer.gguf" q4_0 >&2
    what="random Q4_0 weights of the $SHAPE shape"
else
    $PY "$PEERS/mlx_to_gguf.py" "$MODEL" "$T/peer.gguf" q4_0 >&2
    what="$MODEL as Q4_0"
fi

# the 512-token prompt, in specdec's tokenizer (the same vocabulary as llama.cpp's for Qwen3)
bash bench/prompt_of_tokens.sh "$SD" "$MODEL" 512 "$T/p512"

echo "# cpu_prefill_vs_llamacpp: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) online CPUs, threads $TH"
echo "flags (SIMD): $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|f16c|avx512[a-z_0-9]*|avx_vnni|amx[a-z_0-9]*)$' | tr '\n' ' ')"
echo "llama.cpp: $(cat "$PEER_DIR/.peer" 2>/dev/null || echo '?'), $what"
echo "specdec: $MODEL, $("$SD" info -m "$MODEL" --threads "$TH" 2>/dev/null | grep -E '^kernels chosen' || true)"
echo "loadavg before: $(cat /proc/loadavg)"

llama() {
    "$PEER_DIR/bin/llama-bench" -m "$T/peer.gguf" -p 512 -n 0 -t "$TH" -r 1 -o csv 2>/dev/null |
        awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i ~ /avg_ts/) c = i } NR == 2 { gsub(/"/, "", $c); print $c }'
}
spec() {   # the prefill median of bench's one timed run, and the prompt's token count
    "$SD" bench -m "$MODEL" --draft ngram --prompts "$T/p512.jsonl" -n 4 --repeats 1 --threads "$TH" --ignore-eos \
        > "$T/b.md" 2> "$T/b.err"
    sed -n 's/^classic prefill.*: p512 \([0-9.]*\) \[[^]]*\] (\([0-9]*\))$/\1 \2/p' "$T/b.md"
}
for r in $(seq 1 "$ROUNDS"); do
    a=$(llama); read -r b n < <(spec)
    [ -n "$a" ] && [ -n "${b:-}" ] || { echo "round $r: no rate (llama.cpp '$a', specdec '${b:-}')" >&2; cat "$T/b.err" >&2; exit 1; }
    echo "$a" >> "$T/llama.ts"; echo "$b" >> "$T/spec.ts"
    echo "round $r: llama.cpp pp512 $a tok/s, specdec prefill $b tok/s ($n tokens)"
done
echo "loadavg after:  $(cat /proc/loadavg)"
stats() { sort -g "$1" | awk '{v[NR] = $1} END {m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.1f %.1f %.1f\n", m, v[1], v[NR]}'; }
read -r lm ll lh < <(stats "$T/llama.ts")
read -r sm sl sh < <(stats "$T/spec.ts")
echo
echo "| arm | median tok/s | min | max | vs llama.cpp |"
echo "| --- | --- | --- | --- | --- |"
echo "| llama.cpp pp512 | $lm | $ll | $lh | 1.00x |"
echo "| specdec prefill ($n tokens) | $sm | $sl | $sh | $(awk -v a="$sm" -v b="$lm" 'BEGIN { printf "%.2fx", a / b }') |"
