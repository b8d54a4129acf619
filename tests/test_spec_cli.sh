#!/bin/bash
# test_spec_cli.sh: `specdec bench` end to end on the random tiny pair (bench/spec_tiny_pair):
# both arms run, outputs are byte-identical at temperature 0, the comparison is printed, and a
# broken option is refused with a message naming it.
set -u
BIN=${SPECDEC_BIN:?}
PAIR=$(dirname "$BIN")/spec_tiny_pair
SRC=${SPECDEC_SOURCE_DIR:?}
T=$(mktemp -d /tmp/sdspeccli-XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
"$PAIR" "$T/t" "$T/d" || { echo "FAIL: spec_tiny_pair"; exit 1; }
head -2 "$SRC/tests/data/prompts/heldout.jsonl" > "$T/p.jsonl"
for dr in ngram mtp "model:$T/d"; do
    out=$("$BIN" bench -m "$T/t" --draft "$dr" --prompts "$T/p.jsonl" -n 24 --threads 1 --block-size 3 2>&1)
    rc=$?
    if [ $rc -ne 0 ]; then echo "FAIL: bench --draft $dr exit $rc"; echo "$out"; fail=1; continue; fi
    echo "$out" | grep -q "median speedup" || { echo "FAIL: bench --draft $dr: no comparison"; echo "$out"; fail=1; }
    n=$(echo "$out" | grep -c "| yes |")
    [ "$n" -eq 2 ] || { echo "FAIL: bench --draft $dr: $n of 2 prompts identical"; echo "$out"; fail=1; }
done
out=$("$BIN" bench -m "$T/t" --draft ngram --prompts "$T/p.jsonl" --block-size 17 2>&1)
[ $? -ne 0 ] && echo "$out" | grep -q -- "--block-size" || { echo "FAIL: --block-size 17 accepted: $out"; fail=1; }
out=$("$BIN" bench -m "$T/t" --draft eagle --prompts "$T/p.jsonl" 2>&1)
[ $? -ne 0 ] && echo "$out" | grep -q "eagle" || { echo "FAIL: unknown drafter accepted: $out"; fail=1; }
[ $fail -eq 0 ] && echo "test_spec_cli: ok"
exit $fail
