# ncu_prefill.awk: the prefill of an `ncu --csv --print-units base --metrics gpu__time_duration.sum`
# log of `specdec run -n 1` (scripts/gpu.sh pfstep): every launch of the run (the prompt's prefill,
# chunk by chunk, and the pick of its one token; no decode step), each kernel's own duration (ncu
# runs them one at a time), summed by kernel (name without its template arguments).
#   awk -F'","' -f bench/ncu_prefill.awk pfstep_X.csv
# Prints a Markdown table (kernel, launches, us in all, share), the largest first, and the total.
function short(s) { sub(/^void /, "", s); gsub(/\(anonymous namespace\)::/, "", s); gsub(/<unnamed>::/, "", s); sub(/\(.*/, "", s); sub(/<.*/, "", s); sub(/^.*::/, "", s); return s }
$0 ~ /gpu__time_duration/ {
    gsub(/^"|"$/, "", $0)
    k = short($5)
    v = $NF; gsub(/,/, "", v)   # a value may carry thousands separators
    if (!(k in cnt)) order[++nk] = k
    cnt[k]++; sum[k] += v; tot += v; n++
}
END {
    if (!n) { print "no kernel durations in the log"; exit 1 }
    for (i = 1; i <= nk; i++)   # largest first (insertion sort: a few dozen kernels)
        for (j = i; j > 1 && sum[order[j]] > sum[order[j - 1]]; j--) { t = order[j]; order[j] = order[j - 1]; order[j - 1] = t }
    printf "| kernel | launches | us in all | share |\n|---|---|---|---|\n"
    for (i = 1; i <= nk; i++) { k = order[i]; printf "| %s | %d | %.1f | %.1f%% |\n", k, cnt[k], sum[k] / 1000, 100 * sum[k] / tot }
    printf "\nprefill: %d launches, %.1f us of kernel time\n", n, tot / 1000
}
