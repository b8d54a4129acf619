#!/usr/bin/env bash
# ab_bench_i8.sh: two builds of bench/bench_i8 side by side in one run (docs/benchmarking.md): the
# binaries alternate (old, new, old, new, ...) after a discarded warm-up run of each, and each
# (shape, T, arm) row gets the median, min and max over the runs of each build's per-run median,
# and new / old of the medians. Both builds' rows must exist (an arm one build lacks shows "-").
#
#   bash bench/ab_bench_i8.sh OLD_BENCH_I8 NEW_BENCH_I8 [RUNS=5] [THREADS=1] [SAMPLES=7] [Ts=1,2,4,8,16] [FILTER]
#
# Exits 1 when a run's guard fails (its arms wrote different y).
set -euo pipefail
OLD=$1 NEW=$2 R=${3:-5} TH=${4:-1} S=${5:-7} TS=${6:-1,2,4,8,16} F=${7:-}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
echo "loadavg before: $(cat /proc/loadavg)"
for r in $(seq 0 "$R"); do   # r = 0: warm-up, discarded
  for arm in old new; do
    bin=$OLD; [ $arm = new ] && bin=$NEW
    "$bin" "$TH" "$S" "$TS" $F > "$W/$arm.$r" || { echo "$arm run $r: guard failed"; cat "$W/$arm.$r"; exit 1; }
  done
done
echo "loadavg after: $(cat /proc/loadavg)"
grep -h 'bandwidth' "$W"/new.1 | sed 's/^/new run 1: /'
echo
echo "| shape | bits | T | arm | old us med [min, max] | new us med [min, max] | new / old |"
echo "|---|---|---|---|---|---|---|"
for arm in old new; do
  for r in $(seq 1 "$R"); do
    # | shape | rows x cols | bits | T | arm | median | ...
    awk -F'|' -v a=$arm 'NF > 10 && $7 ~ /[0-9]/ {gsub(/ /, "", $5); gsub(/ /, "", $4); gsub(/^ | $/, "", $2); gsub(/ /, "", $6);
      print a "\t" $2 "\t" $4 "\t" $5 "\t" $6 "\t" $7 + 0}' "$W/$arm.$r"
  done
done > "$W/all.tsv"
cut -f2-5 "$W/all.tsv" | awk '!seen[$0]++' | while IFS=$'\t' read -r shape bits T armn; do
  row=()
  for b in old new; do
    awk -F'\t' -v b=$b -v s="$shape" -v bi="$bits" -v t="$T" -v a="$armn" '$1 == b && $2 == s && $3 == bi && $4 == t && $5 == a {print $6}' "$W/all.tsv" |
      sort -g > "$W/v.$b"
    if [ -s "$W/v.$b" ]; then
      row+=("$(awk '{v[NR]=$1} END {m = NR % 2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2; printf "%.2f [%.2f, %.2f]", m, v[1], v[NR]}' "$W/v.$b")")
    else row+=("-"); fi
  done
  ratio=-
  if [ -s "$W/v.old" ] && [ -s "$W/v.new" ]; then
    ratio=$(paste <(awk '{v[NR]=$1} END {print (NR % 2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}' "$W/v.old") \
                  <(awk '{v[NR]=$1} END {print (NR % 2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}' "$W/v.new") |
            awk '{printf "%.3f", $2 / $1}')
  fi
  echo "| $shape | $bits | $T | $armn | ${row[0]} | ${row[1]} | $ratio |"
done
