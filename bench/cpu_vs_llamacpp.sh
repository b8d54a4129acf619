#!/bin/bash
# cpu_vs_llamacpp.sh: CPU decode speed of specdec next to llama.cpp on the same machine, the same
# model (the embedded target; llama.cpp gets it as Q4_0, the same 4.5 bits per weight) and the same
# threads, in one run, arms interleaved round by round (benchmarking protocol: medians of >= 5 with
# min / max, load, the floor).
#   llama.cpp   llama-bench tg128 (-p 0 -n 128), built -march=native from the pinned peer source
#   specdec     classic decoding at each SIMD level this CPU runs x precision f32 / int8, and
#               speculation (auto block width) at the default level: MTP at f32 and int8, MTP with
#               prompt lookup (mtp+ngram) and prompt lookup alone (ngram) at int8; 128 tokens at
#               temperature 0 after a short C prompt (--ignore-eos), decode tok/s from run's stats
#   floor       bytes one decode step reads (specdec info) over the streaming-read bandwidth measured
#               in the same run (bench_matmul's 1 GiB read, same thread count)
# Guards: every specdec arm must print its kernel level and precision in the [backend] line (so the
# arms differ), and every speculative arm's text must equal classic's (else the comparison is
# refused).
# Usage: bench/cpu_vs_llamacpp.sh [ROUNDS=5] [THREADS=2]
#   env PEERS (default ../shared/peers next to the repository), PEER_DIR (llama.cpp build, default
#   /tmp/peer-cpu; built when missing, ~10 min on 2 cores, not counted in the run), GGUF (default
#   /tmp/qk-q4_0.gguf; converted when missing, needs python3-numpy), BUILD (default build).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
ROUNDS=${1:-5}
TH=${2:-2}
PEERS=${PEERS:-$ROOT/../shared/peers}
PEER_DIR=${PEER_DIR:-/tmp/peer-cpu}
GGUF=${GGUF:-/tmp/qk-q4_0.gguf}
BUILD=${BUILD:-build}
MODEL=models/qwen3-kernel
N=128
PROMPT=$'// FILE: drivers/char/mem.c\n#include <linux/fs.h>\n\nstatic ssize_t read_null(struct file *file, char __user *buf,\n\t\t\t size_t count, loff_t *ppos)\n{'

[ -x "$PEER_DIR/bin/llama-bench" ] || bash "$PEERS/build.sh" cpu "$PEER_DIR" >&2
PY=${PYTHON:-python3}   # the system python3 has Debian's numpy; another first on PATH may not
$PY -c 'import numpy' 2>/dev/null || PY=/usr/bin/python3
[ -s "$GGUF" ] || $PY -c 'import numpy' 2>/dev/null || { echo "$(basename "$0"): the peer's GGUF conversion needs numpy: apt-get install python3-numpy" >&2; exit 2; }
[ -s "$GGUF" ] || $PY "$PEERS/mlx_to_gguf.py" "$MODEL" "$GGUF" q4_0 >&2
if [ ! -x "$BUILD/specdec" ] || [ ! -x "$BUILD/bench_matmul" ]; then
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSPECDEC_CUDA=OFF >/dev/null
    cmake --build "$BUILD" -j2 --target specdec_cli bench_matmul >/dev/null
fi
SD=$BUILD/specdec
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

levels=()
for l in avx512 avx2 neon; do
    SPECDEC_SIMD=$l "$SD" info -m "$MODEL" >/dev/null 2>&1 && levels+=("$l")
done

echo "# cpu_vs_llamacpp: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) online CPUs, threads $TH"
echo "flags (SIMD): $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|f16c|avx512[a-z_0-9]*|avx_vnni|amx[a-z_0-9]*)$' | tr '\n' ' ')"
echo "llama.cpp: $(cat "$PEER_DIR/.peer" 2>/dev/null || echo '?'), model $GGUF"
echo "specdec levels here: ${levels[*]}; default: $("$SD" info -m "$MODEL" 2>/dev/null | grep -E '^kernels chosen' | cut -c20-)"
echo "loadavg before: $(cat /proc/loadavg)"

# the floor: bytes per decode step over the bandwidth measured now
BYTES=$("$SD" info -m "$MODEL" 2>/dev/null | awk '/^bytes\/decode step/ {print $3}')
BW=$("$BUILD/bench_matmul" "$TH" 5 no-shape-matches 2>/dev/null | awk '/streaming read bandwidth/ {print $(NF-1)}')

arms=("llama.cpp tg128")
for l in "${levels[@]}"; do arms+=("specdec classic $l f32" "specdec classic $l int8"); done
arms+=("specdec MTP default f32" "specdec MTP default int8" "specdec MTP+ngram default int8" "specdec ngram default int8")

run_arm() {   # arm name -> tok/s on stdout; text into $T/<slug>.txt
    local a=$1 slug
    slug=$(echo "$a" | tr ' ' '_')
    case $a in
    llama.cpp*)
        "$PEER_DIR/bin/llama-bench" -m "$GGUF" -p 0 -n $N -t "$TH" -r 1 -o csv 2>/dev/null |
            awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i ~ /avg_ts/) c = i } NR == 2 { gsub(/"/, "", $c); print $c }' ;;
    "specdec classic"*)
        local l p
        l=$(echo "$a" | awk '{print $3}'); p=$(echo "$a" | awk '{print $4}')
        SPECDEC_SIMD=$l "$SD" run -m "$MODEL" -p "$PROMPT" -n $N --threads "$TH" --precision "$p" --ignore-eos \
            >"$T/$slug.txt" 2>"$T/$slug.err"
        grep -q "cpu ($l$( [ "$p" = int8 ] && echo ' int8'))" "$T/$slug.err" || { echo "guard: $a ran $(grep '^\[backend\]' "$T/$slug.err")" >&2; exit 1; }
        sed -n 's/.*decode \([0-9.]*\) tok\/s.*/\1/p' "$T/$slug.err" | tail -1 ;;
    "specdec MTP"* | "specdec ngram"*)
        local p d
        p=$(echo "$a" | awk '{print $4}'); d=$(echo "$a" | awk '{print tolower($2)}')
        "$SD" run -m "$MODEL" -p "$PROMPT" -n $N --threads "$TH" --precision "$p" --ignore-eos --draft "$d" \
            >"$T/$slug.txt" 2>"$T/$slug.err"
        sed -n 's/.*decode \([0-9.]*\) tok\/s.*/\1/p' "$T/$slug.err" | tail -1 ;;
    esac
}

for a in "${arms[@]}"; do run_arm "$a" >/dev/null; done   # warm-up, discarded
for r in $(seq 1 "$ROUNDS"); do
    for a in "${arms[@]}"; do
        v=$(run_arm "$a")
        [ -n "$v" ] || { echo "no tok/s from arm '$a'" >&2; exit 1; }
        echo "$v" >>"$T/$(echo "$a" | tr ' ' '_').ts"
    done
done
echo "loadavg after:  $(cat /proc/loadavg)"

# guard: speculative text == classic text at the same level and precision
dl=$("$SD" info -m "$MODEL" 2>/dev/null | awk '/^cpu kernels/ {print $3}')
for p in f32 int8; do
    m=specdec_MTP_default_$p.txt c=specdec_classic_${dl}_$p.txt
    [ -f "$T/$c" ] || c=$(ls "$T" | grep "classic_.*_$p.txt" | head -1)
    SPECDEC_SIMD=$dl "$SD" run -m "$MODEL" -p "$PROMPT" -n $N --threads "$TH" --precision "$p" --ignore-eos >"$T/ref_$p.txt" 2>/dev/null
    if ! cmp -s "$T/ref_$p.txt" "$T/$m"; then echo "REFUSED: MTP $p text differs from classic $p" >&2; exit 1; fi
done
for m in specdec_MTP+ngram_default_int8.txt specdec_ngram_default_int8.txt; do
    if ! cmp -s "$T/ref_int8.txt" "$T/$m"; then echo "REFUSED: $m differs from classic int8" >&2; exit 1; fi
done
echo "guard: MTP text == classic text (f32 and int8, level $dl); MTP+ngram and ngram text == classic int8"

stats() { sort -g "$1" | awk '{v[NR] = $1} END {m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.1f %.1f %.1f\n", m, v[1], v[NR]}'; }
ref=$(stats "$T/llama.cpp_tg128.ts" | awk '{print $1}')
floor=$(awk -v b="$BYTES" -v bw="$BW" 'BEGIN { if (b > 0) printf "%.0f", bw * 1e9 / b; else print "?" }')
echo
echo "streaming read bandwidth: $BW GB/s ($TH threads); bytes per decode step: $BYTES; floor: $floor tok/s"
echo
echo "| arm | median tok/s | min | max | vs llama.cpp | share of floor |"
echo "| --- | --- | --- | --- | --- | --- |"
for a in "${arms[@]}"; do
    read -r med lo hi < <(stats "$T/$(echo "$a" | tr ' ' '_').ts")
    awk -v a="$a" -v m="$med" -v lo="$lo" -v hi="$hi" -v r="$ref" -v f="$floor" \
        'BEGIN { printf "| %s | %.1f | %.1f | %.1f | %.2fx | %s |\n", a, m, lo, hi, m / r, (f > 0 ? sprintf("%.0f%%", 100 * m / f) : "?") }'
done
