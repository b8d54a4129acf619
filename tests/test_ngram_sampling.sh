#!/bin/bash
# test_ngram_sampling.sh: the n-gram drafter at temperature > 0, through the CLI. On a periodic
# prompt it must draft in every run and get drafts accepted under both sampling modes (summed over
# the seeds: a seed whose first sampled token leaves the pattern rightly gets none accepted, as seed
# 2 at t = 1.0 does with the int8 path's logits); seeded output must equal classic seeded output
# byte for byte (rejection mode's distribution is checked by test_spec_sampling, the n-gram
# proposal being a point mass there).
. "$(dirname "$0")/cli_lib.sh"
P=$'static const int t[] = {1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4,'
num() { sed -n "s/^  \"$1\": \([0-9]*\),/\1/p" "$2"; }
declare -A acc
for temp in 0.7 1.0; do
    for seed in 1 2; do
        "$BIN" run -m "$M" -p "$P" -n 32 --temp $temp --seed $seed > "$T/classic" 2>/dev/null || { echo "FAIL classic run"; fail=1; }
        for mode in seeded rejection; do
            for k in 4 auto; do
                "$BIN" run -m "$M" -p "$P" -n 32 --temp $temp --seed $seed --draft ngram --block-size $k --sampling $mode \
                    --stats-json "$T/s.json" > "$T/out" 2>"$T/err" || { echo "FAIL $mode t=$temp s=$seed K=$k: $(cat "$T/err")"; fail=1; continue; }
                d=$(num drafted "$T/s.json"); a=$(num accepted "$T/s.json")
                [ "${d:-0}" -gt 0 ] && [ -n "$a" ] || { echo "FAIL $mode t=$temp s=$seed K=$k: drafted ${d:-?}, accepted ${a:-?}"; fail=1; }
                acc[$mode/$temp/$k]=$(( ${acc[$mode/$temp/$k]:-0} + ${a:-0} ))
                if [ $mode = seeded ]; then
                    cmp -s "$T/classic" "$T/out" || { echo "FAIL seeded t=$temp s=$seed K=$k: text differs from classic"; fail=1; }
                fi
                echo "ok   $mode t=$temp seed $seed K=$k: drafted $d accepted $a"
            done
        done
    done
done
for key in "${!acc[@]}"; do
    [ "${acc[$key]}" -gt 0 ] || { echo "FAIL $key: no draft accepted over the seeds"; fail=1; }
done
exit $fail
