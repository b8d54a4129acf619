#!/bin/bash
# test_spec_cli.sh: `specdec bench` end to end on the random tiny pair (bench/spec_tiny_pair):
# both arms run, outputs are byte-identical at temperature 0, the comparison is printed, and a
# broken option is refused with a message naming it; `run` drafts over the draft vocabulary the
# embedded model ships, or the one named, or the full head, with the classic text every time.
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
    # the classic arm's prefill: each prompt by id, a rate above zero, its token count
    pf='[1-9][0-9]*\.[0-9] \[[0-9.]+, [0-9.]+\] \([1-9][0-9]*\)'
    echo "$out" | grep -Eq "^classic prefill, tok/s median \[min, max\] \(prompt tokens\): c-fs-01 $pf; c-fs-02 $pf\$" ||
        { echo "FAIL: bench --draft $dr: no prefill line for both prompts"; echo "$out"; fail=1; }
    n=$(echo "$out" | grep -c "| yes |")
    [ "$n" -eq 2 ] || { echo "FAIL: bench --draft $dr: $n of 2 prompts identical"; echo "$out"; fail=1; }
done
out=$("$BIN" bench -m "$T/t" --draft ngram --prompts "$T/p.jsonl" --block-size 17 2>&1)
[ $? -ne 0 ] && echo "$out" | grep -q -- "--block-size" || { echo "FAIL: --block-size 17 accepted: $out"; fail=1; }
out=$("$BIN" bench -m "$T/t" --draft eagle --prompts "$T/p.jsonl" 2>&1)
[ $? -ne 0 ] && echo "$out" | grep -q "eagle" || { echo "FAIL: unknown drafter accepted: $out"; fail=1; }
# the embedded model ships draft_vocab.json (default_n 16384): run uses it unless told otherwise,
# and the text is the classic text every way
M=$SRC/models/qwen3-kernel
P=$'// FILE: fs/x.c\n#include <linux/fs.h>\n\nstatic int'
"$BIN" run -m "$M" -n 32 -p "$P" > "$T/classic" 2> /dev/null || { echo "FAIL: classic run"; fail=1; }
for dv in auto none "$M/draft_vocab.json:4096"; do
    arg=(); [ "$dv" != auto ] && arg=(--draft-vocab "$dv")
    "$BIN" run -m "$M" -n 32 --draft mtp "${arg[@]}" -p "$P" > "$T/spec" 2> "$T/err" || { echo "FAIL: run --draft mtp ($dv)"; cat "$T/err"; fail=1; continue; }
    cmp -s "$T/spec" "$T/classic" || { echo "FAIL: draft vocabulary $dv changed the text"; fail=1; }
    got=$(sed -n 's/.*draft vocabulary: \([0-9]*\) of.*/\1/p' "$T/err")
    case $dv in auto) want=16384;; none) want="";; *) want=4096;; esac
    [ "$got" = "$want" ] || { echo "FAIL: draft vocabulary $dv: drafted over '$got' ids, want '$want'"; fail=1; }
done
# bench labels each draft-vocabulary arm by the size it resolved to; the first arm is run's default
# (the shipped draft_vocab.json at its default_n), "none" is the full head
printf '{"id":"p","kind":"c","prompt":"// FILE: fs/x.c\\n#include <linux/fs.h>\\n"}\n' > "$T/pk.jsonl"
out=$("$BIN" bench -m "$M" --draft mtp --prompts "$T/pk.jsonl" -n 8 --repeats 1 --threads 1 --block-size 3 \
    --draft-vocab none --draft-vocab "$M/draft_vocab.json:8192" 2>&1)
for want in "| p | full |" "| p | dv 16384 |" "| p | dv 8192 |" "arm dv 16384: median speedup" "arm full: median speedup"; do
    echo "$out" | grep -qF "$want" || { echo "FAIL: bench draft-vocab arms: no '$want'"; echo "$out"; fail=1; }
done
# a prompt whose greedy continuation is EOS at once: bench says why the row is empty
grep '"c-fs-04"' "$SRC/tests/data/prompts/heldout.jsonl" > "$T/eos.jsonl"
out=$("$BIN" bench -m "$M" --draft mtp --prompts "$T/eos.jsonl" -n 4 --repeats 1 --threads 1 --block-size 3 2>&1)
echo "$out" | grep -q "stopped at EOS after 0 tokens (--ignore-eos)" || {
    echo "FAIL: bench on an EOS-first prompt gives no hint (if c-fs-04 no longer ends at once with this model, pick one that does)"; echo "$out"; fail=1; }
out=$("$BIN" run -m "$M" -n 4 --draft ngram --draft-vocab none -p "$P" 2>&1)
[ $? -ne 0 ] && echo "$out" | grep -q -- "--draft-vocab" || { echo "FAIL: --draft-vocab with ngram accepted: $out"; fail=1; }
[ $fail -eq 0 ] && echo "test_spec_cli: ok"
exit $fail
