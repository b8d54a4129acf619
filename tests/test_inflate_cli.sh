#!/bin/bash
# test_inflate_cli.sh: `specdec inflate` through the real CLI on the embedded pair (4-bit target,
# bf16 mtp module), to a small explicit shape (H 512, I 768, 9 layers, 8/4 heads: a smaller GQA
# group than the source's 6/2, an extra layer): the output loads with the new shape, generates the
# source's text classic and speculative, on the cpu and cpu-sim backends, and tools/inflate/agree.sh
# reports the agreement (options passed through to every run) and traces a divergence; `specdec
# score` ranks every greedy token first; `run --ids-out` writes the ids. Bad requests exit 1 with a
# message naming the dimension or option, and write nothing.
set -u
BIN=${SPECDEC_BIN:?}
SRC=${SPECDEC_SOURCE_DIR:?}
T=$(mktemp -d /tmp/sdinflate-XXXXXX)
trap 'rm -rf "$T"' EXIT
M=$SRC/models/qwen3-kernel
fail=0; n=0
ok() { n=$((n + 1)); echo "ok   $1"; }
bad() { n=$((n + 1)); fail=$((fail + 1)); echo "FAIL $1"; }

# expect NAME PATTERN CMD...: exit 1, stderr matching PATTERN, no OUT left behind
expect() {
    local name=$1 pat=$2; shift 2
    "$@" > "$T/out" 2> "$T/err"
    local rc=$?
    if [ $rc -ne 1 ]; then bad "$name: exit $rc"; cat "$T/err"; return; fi
    if ! grep -qE -- "$pat" "$T/err"; then bad "$name: message does not match /$pat/:"; cat "$T/err"; return; fi
    if [ -e "$T/no" ] || ls -d "$T"/no.tmp-* > /dev/null 2>&1; then bad "$name: wrote output"; return; fi
    ok "$name: $(head -c 160 "$T/err" | tr '\n' ' ')"
}
expect "no shape" "--shape" "$BIN" inflate "$M" "$T/no"
expect "unknown shape" "qwen3-7b" "$BIN" inflate "$M" "$T/no" --shape qwen3-7b
expect "smaller hidden" "hidden_size.*smaller" "$BIN" inflate "$M" "$T/no" --hidden 256
expect "fewer layers" "num_hidden_layers.*smaller" "$BIN" inflate "$M" "$T/no" --shape qwen3-8b --layers 4
expect "GQA without room" "num_key_value_heads" "$BIN" inflate "$M" "$T/no" --heads 6 --kv-heads 3
expect "bad fill" "--fill" "$BIN" inflate "$M" "$T/no" --hidden 512 --fill ones
expect "bits on a quantized source" "already quantized" "$BIN" inflate "$M" "$T/no" --hidden 512 --bits 8
expect "missing source" "config.json" "$BIN" inflate "$T/nothing" "$T/no" --hidden 512
mkdir -p "$T/full"; echo keep > "$T/full/keep.txt"
expect "non-empty OUT" "not empty" "$BIN" inflate "$M" "$T/full" --hidden 512
[ "$(cat "$T/full/keep.txt")" = keep ] && [ ! -e "$T/full/config.json" ] && ok "non-empty OUT untouched" || bad "non-empty OUT touched"

I=$T/inf
if "$BIN" inflate "$M" "$I" --hidden 512 --intermediate 768 --layers 9 --heads 8 --kv-heads 4 --threads 2 > "$T/out" 2> "$T/err"; then
    ok "inflate to H 512, I 768, 9 layers, 8/4 heads"
else
    bad "inflate:"; cat "$T/err"
fi
grep -q "inflating: 100%" "$T/err" && ok "progress reaches 100%" || { bad "no progress line"; cat "$T/err"; }
"$BIN" info -m "$I" > "$T/info" 2>&1
grep -q "hidden / mlp: *512 / 768" "$T/info" && grep -q "layers: *9" "$T/info" && grep -q "heads (q / kv): *8 / 4" "$T/info" &&
    grep -q "mtp drafter: *1 layer" "$T/info" && ok "info shows the new shape and the drafter" || { bad "info:"; cat "$T/info"; }

P=$'// FILE: drivers/char/mem.c\n#include <linux/fs.h>\n\nstatic ssize_t read_null(struct file *file, char __user *buf,\n\t\t\t size_t count, loff_t *ppos)\n{'
"$BIN" run -m "$M" -p "$P" -n 24 --threads 2 --ids-out "$T/ids.json" > "$T/a" 2> /dev/null
"$BIN" run -m "$I" -p "$P" -n 24 --threads 2 > "$T/b" 2> /dev/null
"$BIN" run -m "$I" -p "$P" -n 24 --threads 2 --draft mtp > "$T/c" 2> "$T/c.err"
[ -s "$T/a" ] && cmp -s "$T/a" "$T/b" && ok "inflated text == source text" || { bad "texts differ"; diff "$T/a" "$T/b"; }
cmp -s "$T/b" "$T/c" && grep -q "\[spec\]" "$T/c.err" && ok "inflated: speculative (mtp) == classic" || { bad "speculative differs"; cat "$T/c.err"; }
"$BIN" run -m "$I" -p "$P" -n 24 --threads 2 --draft mtp --backend cpu-sim > "$T/d" 2> "$T/d.err"
cmp -s "$T/b" "$T/d" && grep -q "\[backend\] cpu-sim" "$T/d.err" && ok "inflated on the cpu-sim backend (mtp) == classic on cpu" || { bad "cpu-sim differs"; cat "$T/d.err"; }
nid=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).length)' "$T/ids.json" 2>/dev/null)
[ "$nid" = 24 ] && ok "--ids-out: 24 ids" || bad "--ids-out wrote '$nid' ids"
"$BIN" score -m "$I" -p "$P" --ids "@$T/ids.json" --threads 2 > "$T/score" 2> "$T/score.err"
lines=$(wc -l < "$T/score"); rank0=$(grep -c '"rank": 0,' "$T/score")
[ "$lines" = 24 ] && [ "$rank0" = 24 ] && ok "score: 24 lines, every greedy token ranked first" || { bad "score: $lines lines, $rank0 rank 0"; cat "$T/score.err"; }
expect "score without ids" "--ids" "$BIN" score -m "$I" -p "$P"
expect "score with a bad id" "vocab_size" "$BIN" score -m "$I" -p "$P" --ids "[1, 999999]"

head -n 2 "$SRC/tests/data/prompts/heldout.jsonl" > "$T/prompts.jsonl"
# run options pass through to every run (here a backend), score options through AGREE_SCORE_ARGS
if SPECDEC_BIN=$BIN AGREE_SCORE_ARGS="--threads 2 --backend cpu" bash "$SRC/tools/inflate/agree.sh" "$I" "$M" "$T/prompts.jsonl" 12 --threads 2 --backend cpu-sim > "$T/agree" 2> "$T/agree.err"; then
    cat "$T/agree"
    grep -qE "^summary: [0-9]+ of 2 prompts agree on all 12 tokens; [0-9]+ of 24 tokens" "$T/agree" && ok "agree.sh summary" || bad "agree.sh: no summary"
    # a prompt either agrees on all tokens or names its divergence with both models' top-2 gaps
    [ "$(grep -cE '^[^ ]+: (12/12 agree$|[0-9]+/12 agree; first divergence at token [0-9]+: source top-2 .*gap.*inflated top-2 .*gap)' "$T/agree")" = 2 ] &&
        ok "agree.sh: a line per prompt" || bad "agree.sh lines"
else
    bad "agree.sh failed:"; cat "$T/agree.err"
fi
# a model that does compute something else (rms_norm_eps 0.05): the divergence is found and traced
mkdir -p "$T/other"
for f in model.safetensors tokenizer.json tokenizer_config.json; do ln -s "$M/$f" "$T/other/$f"; done
sed 's/"rms_norm_eps": [0-9.e-]*/"rms_norm_eps": 0.05/' "$M/config.json" > "$T/other/config.json"
if SPECDEC_BIN=$BIN AGREE_SCORE_ARGS="--backend cpu-sim" bash "$SRC/tools/inflate/agree.sh" "$T/other" "$M" "$T/prompts.jsonl" 8 --threads 2 > "$T/agree2" 2> "$T/agree2.err"; then
    cat "$T/agree2"
    grep -qE "^summary: 0 of 2 prompts agree" "$T/agree2" &&
        [ "$(grep -cE '^[^ ]+: [0-7]/8 agree; first divergence at token [0-7]: source top-2 [0-9]+ / [0-9]+ \(gap [0-9.e-]+\), inflated top-2 [0-9]+ / [0-9]+ \(gap [0-9.e-]+\)$' "$T/agree2")" = 2 ] &&
        ok "agree.sh: divergences found and traced" || bad "agree.sh on a different model"
else
    bad "agree.sh (different model) failed:"; cat "$T/agree2.err"
fi
echo "test_inflate_cli: $n checks, $fail failed"
[ $fail = 0 ]
