#!/usr/bin/env bash
# cpu_scale_vs_llamacpp.sh: CPU decode at a published Qwen3 shape, specdec next to llama.cpp on the
# same machine, threads and run (benchmarking protocol: arms interleaved round by round after a
# discarded warm-up round, medians with min / max, load, the floor).
#   specdec    the embedded pair inflated to SHAPE (specdec inflate: the trained function at the
#              shape's byte count), classic, MTP and MTP with prompt lookup (mtp+ngram; auto block
#              width), 128 tokens at temperature 0
#              after a short C prompt (--ignore-eos); decode tok/s from run's stats line
#   llama.cpp  llama-bench tg128 on random Q4_0 weights of the same shape (gguf_random_shape.py of
#              the peers folder: decode speed does not depend on the values), the same 4.5 bits per
#              weight
#   floor      bytes one decode step reads (specdec info) over the streaming-read bandwidth of
#              bench_matmul, measured in the same run with the same thread count
# Guard: the speculative arms' text must equal classic's (else the comparison is refused).
# Usage: bench/cpu_scale_vs_llamacpp.sh [SHAPE=qwen3-1.7b] [ROUNDS=5] [THREADS=2]
#   env PEERS (default ../shared/peers beside the repository), PEER_DIR (a llama.cpp CPU build,
#   default /tmp/peer-cpu, built when missing), BUILD (default build), WORK (model files; default
#   a temporary directory, removed at the end), BASE (another specdec binary, e.g. an earlier
#   commit's build: its classic decode becomes one more arm of every round, its text guarded
#   equal to this build's, for a change measured in the same run as the peer).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
SHAPE=${1:-qwen3-1.7b}
ROUNDS=${2:-5}
TH=${3:-2}
PEERS=${PEERS:-$ROOT/../shared/peers}
PEER_DIR=${PEER_DIR:-/tmp/peer-cpu}
BUILD=${BUILD:-build}
SD=$BUILD/specdec
W=${WORK:-$(mktemp -d)}
[ -n "${WORK:-}" ] || trap 'rm -rf "$W"' EXIT
PROMPT=$'// FILE: drivers/char/mem.c\n#include <linux/fs.h>\n\nstatic ssize_t read_null(struct file *file, char __user *buf,\n\t\t\t size_t count, loff_t *ppos)\n{'

[ -x "$PEER_DIR/bin/llama-bench" ] || bash "$PEERS/build.sh" cpu "$PEER_DIR" >&2
[ -d "$W/model" ] || "$SD" inflate models/qwen3-kernel "$W/model" --shape "$SHAPE" >&2
PY=${PYTHON:-python3}   # the system python3 has Debian's numpy; another first on PATH may not
$PY -c 'import numpy' 2>/dev/null || PY=/usr/bin/python3
[ -s "$W/peer.gguf" ] || $PY -c 'import numpy' 2>/dev/null || { echo "$(basename "$0"): the peer's GGUF conversion needs numpy: apt-get install python3-numpy" >&2; exit 2; }
[ -s "$W/peer.gguf" ] || $PY "$PEERS/gguf_random_shape.py" "$SHAPE" models/qwen3-kernel "$W/peer.gguf" >&2

bytes=$("$SD" info -m "$W/model" 2>/dev/null | sed -n 's/^bytes\/decode step: *\([0-9]*\).*/\1/p')
bw=$("$BUILD/bench_matmul" "$TH" 2>&1 | grep -m1 'streaming read bandwidth' | sed -n 's/.*: *\([0-9.]*\) GB\/s.*/\1/p' || true)

sd_run() {   # sd_run classic|mtp|mtp+ngram|base -> decode tok/s; text in $W/out.$1
  local a=() bin=$SD
  [ "$1" = base ] && bin=$BASE
  [ "$1" != classic ] && [ "$1" != base ] && a=(--draft "$1")
  "$bin" run -m "$W/model" -p "$PROMPT" -n 128 --ignore-eos --threads "$TH" "${a[@]}" > "$W/out.$1" 2> "$W/err"
  sed -n 's/.*decode \([0-9.]*\) tok\/s.*/\1/p' "$W/err" | tail -1
}
peer_run() {
  "$PEER_DIR/bin/llama-bench" -m "$W/peer.gguf" -p 0 -n 128 -t "$TH" -r 1 -o csv 2>/dev/null |
    awk -F, 'NR == 1 {for (i = 1; i <= NF; i++) if ($i ~ /avg_ts/) c = i} NR > 1 && c {gsub(/"/, "", $c); print $c}'
}
stats() { sort -g | awk '{v[NR] = $1} END {m = (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2); printf "%.2f [%.2f, %.2f]", m, v[1], v[NR]}'; }
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }

echo "# CPU decode at the $SHAPE shape: specdec beside llama.cpp"
echo
echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') model $(grep -m1 '^model\s' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), $(nproc) vCPUs; ISA flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512bw|avx512_vnni|avx_vnni|avx512_bf16)$' | tr '\n' ' ')"
echo "- specdec $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $("$SD" info -m "$W/model" 2>/dev/null | grep -m1 '^kernels chosen' | cut -c1-120)"
[ -z "${BASE:-}" ] || echo "- base arm: $BASE ($("$BASE" --version 2>/dev/null | head -1)), classic"
echo "- threads $TH, $ROUNDS rounds after a warm-up, loadavg before: $(cat /proc/loadavg)"
echo
: > "$W/c"; : > "$W/m"; : > "$W/p"; : > "$W/h"; : > "$W/b"
for r in $(seq 0 "$ROUNDS"); do
  c=$(sd_run classic); p=$(peer_run); m=$(sd_run mtp); h=$(sd_run mtp+ngram)
  cmp -s "$W/out.classic" "$W/out.mtp" || { echo "REFUSED: MTP text differs from classic (round $r)"; exit 1; }
  cmp -s "$W/out.classic" "$W/out.mtp+ngram" || { echo "REFUSED: MTP+ngram text differs from classic (round $r)"; exit 1; }
  if [ -n "${BASE:-}" ]; then
    b=$(sd_run base)
    cmp -s "$W/out.classic" "$W/out.base" || { echo "REFUSED: the base build's text differs from classic (round $r)"; exit 1; }
  fi
  [ "$r" = 0 ] && continue
  echo "$c" >> "$W/c"; echo "$m" >> "$W/m"; echo "$p" >> "$W/p"; echo "$h" >> "$W/h"
  [ -z "${BASE:-}" ] || echo "$b" >> "$W/b"
done
pm=$(median < "$W/p")
floor=$(awk -v b="$bytes" -v g="$bw" 'BEGIN {print (g > 0 ? g * 1e9 / b : 0)}')
echo "| arm | tok/s median [min, max] | vs llama.cpp | share of the floor |"
echo "|---|---|---|---|"
arms="p:llama.cpp c:specdec_classic m:specdec_mtp h:specdec_mtp+ngram"
[ -z "${BASE:-}" ] || arms="$arms b:base_classic"
for a in $arms; do
  f=${a%%:*} name=${a#*:}
  md=$(median < "$W/$f")
  echo "| $name | $(stats < "$W/$f") | $(awk -v x="$md" -v y="$pm" 'BEGIN {printf "%.2fx", x / y}') | $(awk -v x="$md" -v y="$floor" 'BEGIN {if (y > 0) printf "%.1f%%", 100 * x / y; else printf "-"}') |"
done
echo
echo "floor: $bytes bytes per step over ${bw:-?} GB/s = $(awk -v f="$floor" 'BEGIN {printf "%.1f", f}') tok/s; loadavg after: $(cat /proc/loadavg)"
