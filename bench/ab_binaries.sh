#!/usr/bin/env bash
# ab_binaries.sh: two builds of the specdec CLI side by side in one run, per docs/benchmarking.md:
# classic and MTP decode tok/s of OLD and NEW on the same prompts, interleaved (old classic, new
# classic, old MTP, new MTP, ...) after a discarded warm-up, medians with min and max, and the
# generated text of both builds compared byte for byte (the guard: a row whose two outputs differ
# says so instead of a ratio).
#
#   bash bench/ab_binaries.sh OLD_BIN NEW_BIN [MODEL=models/qwen3-kernel] [PROMPTS=4] [REPEATS=5] [TOKENS=128]
#
# Environment: THREADS (default 2), SPECDEC_SIMD passes through to both builds; OLD_ARGS / NEW_ARGS:
# extra `run` options of each arm (e.g. one binary twice with --precision f32 / int8, --backend
# cuda); OLD_ENV / NEW_ENV: VAR=value words set for that arm only (e.g. OLD_ENV=SPECDEC_CUDA_PDL=0);
# TEXT_MAY_DIFFER=1 for arms that are allowed to write different text (two precisions): a
# difference is then reported and the ratio still printed; MODES: the modes run (default
# "classic mtp"); ERR_DIR: a folder that keeps every run's [stats] and [spec] lines
# (PROMPT.MODE.ARM.log). Prints a markdown table on stdout; exits 1 when any output differs
# (unless TEXT_MAY_DIFFER=1).
set -euo pipefail
OLD=$1 NEW=$2
MODEL=${3:-models/qwen3-kernel}
NP=${4:-4} R=${5:-5} N=${6:-128}
THREADS=${THREADS:-2}
cd "$(dirname "$0")/.."
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
[ -z "${ERR_DIR:-}" ] || mkdir -p "$ERR_DIR"
# held-out prompts (c-fs-04 ends at EOS at once under greedy decoding)
grep -v '"c-fs-04"' tests/data/prompts/heldout.jsonl | sed -n "1,${NP}p" |
  python3 -c 'import json,sys
for i,l in enumerate(sys.stdin): open(sys.argv[1]+"/p%d.txt"%i,"w").write(json.loads(l)["prompt"])' "$W"

read -r -a OLDA <<< "${OLD_ARGS:-}"
read -r -a NEWA <<< "${NEW_ARGS:-}"
one() {   # one BIN MODE PROMPT_FILE OUT_TEXT ARM_ARGS... -> prints decode tok/s
  local extra=("${@:5}")
  [ "$2" = mtp ] && extra+=(--draft mtp)
  read -r -a armenv <<< "${ARM_ENV:-}"
  env "${armenv[@]}" "$1" run -m "$MODEL" -p "$(cat "$3")" -n "$N" --ignore-eos --threads "$THREADS" "${extra[@]}" > "$4" 2> "$4.err"
  [ -n "${ERR_DIR:-}" ] && grep -h '^\[stats\]\|^\[spec\] rounds' "$4.err" >> "$ERR_DIR/$(basename "$3" .txt).$2.$ARM_NAME.log"
  sed -n 's/.*decode \([0-9.]*\) tok\/s.*/\1/p' "$4.err" | tail -1
}
stats() {   # median [min, max] of the numbers on stdin
  sort -g | awk '{v[NR]=$1} END {m = NR % 2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2; printf "%.1f [%.1f, %.1f]", m, v[1], v[NR]}'
}
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

echo "loadavg before: $(cat /proc/loadavg)"
echo
echo "| prompt | mode | old tok/s med [min, max] | new tok/s med [min, max] | new / old | output |"
echo "|---|---|---|---|---|---|"
bad=0
for p in "$W"/p*.txt; do
  pn=$(basename "$p" .txt)
  for mode in ${MODES:-classic mtp}; do
    : > "$W/old.$mode"; : > "$W/new.$mode"
    for r in $(seq 0 "$R"); do   # r = 0: warm-up, discarded
      o=$(ARM_NAME=old ARM_ENV=${OLD_ENV:-} one "$OLD" $mode "$p" "$W/out_old" "${OLDA[@]}")
      n=$(ARM_NAME=new ARM_ENV=${NEW_ENV:-} one "$NEW" $mode "$p" "$W/out_new" "${NEWA[@]}")
      [ "$r" = 0 ] && continue
      echo "$o" >> "$W/old.$mode"; echo "$n" >> "$W/new.$mode"
    done
    same=identical
    if ! cmp -s "$W/out_old" "$W/out_new"; then
      if [ "${TEXT_MAY_DIFFER:-0}" = 1 ]; then same="differs (allowed)"; else same="DIFFERS"; bad=1; fi
    fi
    mo=$(median < "$W/old.$mode"); mn=$(median < "$W/new.$mode")
    ratio=$(awk -v a="$mo" -v b="$mn" 'BEGIN {printf "%.3f", (a > 0 ? b / a : 0)}')
    [ "$same" = DIFFERS ] && ratio=-
    echo "| $pn | $mode | $(stats < "$W/old.$mode") | $(stats < "$W/new.$mode") | $ratio | $same |"
  done
done
echo
echo "loadavg after: $(cat /proc/loadavg)"
exit $bad
