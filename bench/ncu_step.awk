# ncu_step.awk: the last decode step of an `ncu --csv --print-units base --metrics
# gpu__time_duration.sum` log of `specdec run` (scripts/gpu.sh step): the launches from the last
# embedding gather (embed_k, a step's first kernel) to the end, each kernel's own duration (ncu
# runs them one at a time), summed by kernel (name without its template arguments) and grid.
#   awk -F'","' -f bench/ncu_step.awk step_X.csv
# Prints a Markdown table (kernel, grid, launches, us in all, us a launch) and the total.
function short(s) { sub(/^void /, "", s); gsub(/\(anonymous namespace\)::/, "", s); gsub(/<unnamed>::/, "", s); sub(/\(.*/, "", s); sub(/<.*/, "", s); sub(/^.*::/, "", s); return s }
$0 ~ /gpu__time_duration/ {
    gsub(/^"|"$/, "", $0)
    n++
    v = $NF; gsub(/,/, "", v)   # a value may carry thousands separators
    name[n] = short($5); grid[n] = $9; val[n] = v + 0
    if (name[n] == "embed_k") last = n
}
END {
    if (!last) { print "no embed_k launch in the log"; exit 1 }
    for (i = last; i <= n; i++) {
        k = name[i] " | " grid[i]
        if (!(k in cnt)) order[++nk] = k
        cnt[k]++; sum[k] += val[i]; tot += val[i]
    }
    printf "| kernel | grid | launches | us in all | us a launch |\n|---|---|---|---|---|\n"
    for (i = 1; i <= nk; i++) { k = order[i]; printf "| %s | %d | %.1f | %.2f |\n", k, cnt[k], sum[k] / 1000, sum[k] / 1000 / cnt[k] }
    printf "\nlast step: %d launches, %.1f us of kernel time (launches %d to %d of %d)\n", n - last + 1, tot / 1000, last, n, n
}
