#!/bin/bash
# test_tp_cli.sh: --tp through the real CLI (docs/tensor-parallel.md). On the CPU --tp 2 runs the
# simulation: the same greedy text as without --tp on the embedded model, classic and MTP, with the
# [tp] line naming the sim communicator; info --tp 2 prints the plan; shapes that do not split, bad
# values and --tp on cuda without enough GPUs are refused with a message naming the fault (exit 1,
# nothing on stdout).
set -u
BIN=${SPECDEC_BIN:?}
SRC=${SPECDEC_SOURCE_DIR:?}
M=$SRC/models/qwen3-kernel
T=$(mktemp -d /tmp/sdtpcli-XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL $*"; fail=1; }
P=$'// FILE: kernel/fork.c\nstatic int copy_files(unsigned long clone_flags, struct task_struct *tsk)\n{'

"$BIN" run -m "$M" --backend cpu -p "$P" -n 24 --ignore-eos > "$T/plain" 2>/dev/null || bad "plain run"
for be in cpu cpu-sim; do
    "$BIN" run -m "$M" --backend $be --tp 2 -p "$P" -n 24 --ignore-eos > "$T/tp" 2> "$T/err" || bad "tp 2 $be: $(tail -1 "$T/err")"
    cmp -s "$T/plain" "$T/tp" || bad "tp 2 $be: greedy text differs from the unsharded model's"
    grep -q '^\[tp\] 2 rank(s) over sim: [1-9][0-9]* all-reduces' "$T/err" || bad "tp 2 $be: no [tp] line: $(grep '\[tp\]' "$T/err")"
    "$BIN" run -m "$M" --backend $be --tp 2 -p "$P" -n 24 --ignore-eos --draft mtp --block-size 4 > "$T/spec" 2> "$T/err" || bad "tp 2 $be mtp: $(tail -1 "$T/err")"
    cmp -s "$T/plain" "$T/spec" || bad "tp 2 $be mtp: speculative text differs from classic"
    grep -q 'probe passed' "$T/err" || bad "tp 2 $be mtp: the probe did not pass: $(grep '\[spec\]' "$T/err" | head -1)"
done

"$BIN" info -m "$M" --tp 2 > "$T/info" 2>&1 || bad "info --tp 2: $(tail -1 "$T/info")"
grep -q '^tensor parallel: *2 rank(s): per rank 3 of 6 heads, 1 of 2 KV heads, 320 of 640 MLP columns' "$T/info" || bad "info --tp 2: no plan: $(cat "$T/info")"
grep -q '^bytes per rank: ' "$T/info" || bad "info --tp 2: no bytes per rank"

# expect NAME PATTERN CMD...: exit 1 (not a signal), stderr matching PATTERN, nothing on stdout
expect() {
    local name=$1 pat=$2; shift 2
    "$@" > "$T/out" 2> "$T/err"; local rc=$?
    [ $rc -eq 1 ] || { bad "$name: exit $rc"; return; }
    grep -qE -- "$pat" "$T/err" || bad "$name: message does not match /$pat/: $(cat "$T/err")"
    [ -s "$T/out" ] && bad "$name: wrote to stdout"
    return 0
}
expect "tp 4 (6 heads)" "6 attention heads .* 4 equal parts" "$BIN" run -m "$M" --backend cpu --tp 4 -p x -n 1
expect "tp 3 (2 KV heads)" "2 KV heads" "$BIN" run -m "$M" --backend cpu --tp 3 -p x -n 1
expect "info tp 8" "6 attention heads" "$BIN" info -m "$M" --tp 8
expect "tp 0" "--tp" "$BIN" run -m "$M" --tp 0 -p x -n 1
expect "tp 9" "--tp" "$BIN" run -m "$M" --tp 9 -p x -n 1
expect "tp junk" "--tp" "$BIN" run -m "$M" --tp 2x -p x -n 1
expect "tp-reduce junk" "--tp-reduce" "$BIN" run -m "$M" --tp 2 --tp-reduce tree -p x -n 1
expect "score tp 4" "6 attention heads" "$BIN" score -m "$M" --backend cpu --tp 4 -p x --ids '[1]'
if ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L > /dev/null 2>&1; then
    expect "tp 2 cuda without GPUs" "CUDA|cuda" "$BIN" run -m "$M" --backend cuda --tp 2 -p x -n 1
fi
[ $fail = 0 ] && echo "test_tp_cli: ok"
exit $fail
