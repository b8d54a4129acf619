#!/bin/bash
# gen.sh: the output record that tests/test_golden.sh compares against a committed copy. For one
# CPU kernel level (SPECDEC_SIMD) it runs `specdec run` on the embedded model over a fixed
# matrix: classic, MTP (fixed and auto width, full head and draft vocabulary),
# n-gram and draft-model drafting, greedy, seeded and rejection sampling, several thread counts
# and a bf16 KV cache. Each entry is the generated text and, for fixed-width speculative runs, the
# drafter's counters (rounds, drafted, accepted), so a change in what a drafter proposes shows up
# even when the text cannot change. Activations are f32 (the path held to HF transformers' greedy
# text) whatever the default precision; the int8 path's bits are held by tests/test_ops_i8.c and
# its texts across levels by tests/test_simd_env.sh.
#   usage: gen.sh BIN LEVEL OUT_FILE
set -u
BIN=$1; LEVEL=$2; OUT=$3
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
M=$SRC/models/qwen3-kernel
T=$(mktemp -d /tmp/sdgolden-XXXXXX)
trap 'rm -rf "$T"' EXIT
export SPECDEC_SIMD=$LEVEL
: > "$OUT"
fail=0

# one entry: NAME MODEL PROMPT_FILE ARGS...
entry() {
    local name=$1 model=$2 pf=$3; shift 3
    local p; p=$(cat "$pf")
    if ! "$BIN" run -m "$model" -p "$p" --precision f32 --stats-json "$T/s.json" "$@" > "$T/out" 2> "$T/err"; then
        echo "gen.sh: $name failed:" >&2; cat "$T/err" >&2; fail=1; return
    fi
    {
        printf '### %s %s\n' "$name" "$(basename "$pf" .txt)"
        cat "$T/out"
        if grep -q '"speculated": true' "$T/s.json" && grep -q '"block_size": [1-9]' "$T/s.json"; then
            printf '## counters:'
            for k in rounds drafted accepted; do
                printf ' %s %s' "$k" "$(sed -n "s/^  \"$k\": \([0-9]*\),/\1/p" "$T/s.json")"
            done
            printf '\n'
        fi
    } >> "$OUT"
}

S="--temp 0.8 --top-k 40 --seed 7"
if [ "$LEVEL" = scalar ] || [ "$LEVEL" = portable ]; then
    # the portable C level is ~50x slower: a short matrix
    pf=$HERE/prompts/c-fs-01.txt
    entry classic "$M" "$pf" -n 8 --threads 2
    entry mtp-k3 "$M" "$pf" -n 8 --threads 2 --draft mtp --block-size 3
    entry mtp-seeded-k3 "$M" "$pf" -n 8 --threads 2 --draft mtp --block-size 3 --sampling seeded $S
    exit $fail
fi
for pf in "$HERE"/prompts/*.txt; do
    entry classic "$M" "$pf" -n 40 --threads 2
    entry classic-t1 "$M" "$pf" -n 40 --threads 1
    entry classic-t3 "$M" "$pf" -n 40 --threads 3
    entry classic-seeded "$M" "$pf" -n 40 --threads 2 $S
    entry classic-bf16kv "$M" "$pf" -n 40 --threads 2 --kv-dtype bf16
    entry mtp-k4 "$M" "$pf" -n 40 --threads 2 --draft mtp --block-size 4
    entry mtp-k4-t1 "$M" "$pf" -n 40 --threads 1 --draft mtp --block-size 4
    entry mtp-k4-t3 "$M" "$pf" -n 40 --threads 3 --draft mtp --block-size 4
    entry mtp-k6-full "$M" "$pf" -n 40 --threads 2 --draft mtp --block-size 6 --draft-vocab none
    entry mtp-auto "$M" "$pf" -n 40 --threads 2 --draft mtp
    entry mtp-k4-bf16kv "$M" "$pf" -n 40 --threads 2 --draft mtp --block-size 4 --kv-dtype bf16
    entry mtp-seeded-k3 "$M" "$pf" -n 40 --threads 2 --draft mtp --block-size 3 --sampling seeded $S
    entry mtp-rejection-k3 "$M" "$pf" -n 40 --threads 2 --draft mtp --block-size 3 --sampling rejection $S
    entry ngram-k4 "$M" "$pf" -n 40 --threads 2 --draft ngram --block-size 4
    entry model-k3 "$M" "$pf" -n 40 --threads 2 --draft "model:$M" --block-size 3
    entry model-rejection-k3 "$M" "$pf" -n 40 --threads 2 --draft "model:$M" --block-size 3 --sampling rejection $S
done
exit $fail
