#!/bin/bash
# exact.sh BIN BACKEND: the exactness contract on one backend (scripts/gpu.sh runs it on the CUDA
# backend; any backend name works, e.g. cpu-sim, the CPU's device simulator, which CI checks
# against the cpu backend in tests/test_backend_sim.sh). For three held-out
# prompts: the speculative text of every drafter (mtp with the shipped draft vocabulary and with
# the full head, n-gram, a draft model) at K = 2, 3, 4, 6, 8, 12, 16 equals the classic text of
# the same backend, greedy and seeded (unfiltered: the backend's own sampler; top-k: the host
# filter path), and the exactness probe passes at K = 16. Exit status 1 on any difference.
# EXACT_ARGS: more `run` options for every run (e.g. --precision int8). EXACT_MODEL: another model
# directory (default the embedded pair; e.g. an inflated shape, whose rows reach the kernels the
# embedded pair's do not); EXACT_KS: the greedy block sizes (default "2 3 4 6 8 12 16").
set -u
BIN=${1:?BIN}; BE=${2:?BACKEND}
read -r -a XA <<< "${EXACT_ARGS:-}"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
M=${EXACT_MODEL:-$SRC/models/qwen3-kernel}
T=$(mktemp -d /tmp/sdexact-XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0; n=0
for pf in "$SRC"/tests/golden/prompts/*.txt; do
    p=$(cat "$pf"); id=$(basename "$pf" .txt)
    for mode in greedy seeded seeded-topk; do
        case $mode in greedy) S=();; seeded) S=(--temp 0.8 --seed 11);; seeded-topk) S=(--temp 0.8 --seed 11 --top-k 40);; esac
        "$BIN" run -m "$M" --backend "$BE" "${XA[@]}" -p "$p" -n 48 --ignore-eos "${S[@]}" > "$T/classic" 2> "$T/err" || { echo "FAIL $id $mode classic: $(tail -1 "$T/err")"; fail=1; continue; }
        for dr in mtp mtp-full ngram model; do
            case $dr in mtp) D=(--draft mtp);; mtp-full) D=(--draft mtp --draft-vocab none);; ngram) D=(--draft ngram);; model) D=(--draft "model:$M");; esac
            Ks=${EXACT_KS:-2 3 4 6 8 12 16}; [ $mode != greedy ] && Ks="3 5"
            for K in $Ks; do
                "$BIN" run -m "$M" --backend "$BE" "${XA[@]}" -p "$p" -n 48 --ignore-eos "${S[@]}" "${D[@]}" --block-size $K \
                    --sampling seeded --stats-json "$T/s.json" > "$T/spec" 2> "$T/err" || { echo "FAIL $id $mode $dr K=$K: $(tail -1 "$T/err")"; fail=1; continue; }
                n=$((n + 1))
                grep -q '"result": "passed"\|"cached": true' "$T/s.json" || { echo "FAIL $id $mode $dr K=$K: probe $(grep -A1 '"probe"' "$T/s.json" | tail -1)"; fail=1; }
                cmp -s "$T/spec" "$T/classic" || { echo "FAIL $id $mode $dr K=$K: text differs from classic"; diff "$T/classic" "$T/spec" | head -4; fail=1; }
            done
        done
    done
done
echo "exact.sh $BE ${EXACT_ARGS:-} $(basename "$M"): $n speculative runs compared with classic, $([ $fail = 0 ] && echo 'all identical' || echo 'DIFFERENCES')"
exit $fail
