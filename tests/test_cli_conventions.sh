#!/bin/bash
# test_cli_conventions.sh: what a new user tries first. --help on every command (stdout, exit 0),
# --version; -f FILE and -f - equal -p; -m defaults to the embedded model from any working
# directory (and says where it looked when it is not there); a GGUF file given to -m is named as
# such; output files that cannot be written fail before the model loads; --seed -1 is a fresh seed
# that is reported, other bad seeds and numbers are refused naming the option; stop reasons are names;
# --batch changes no output.
. "$(dirname "$0")/cli_lib.sh"

# --help / -h on every command: usage on stdout, exit 0
CMDS="run info tokenize quantize inflate score bench"
"$BIN" --help | grep -q "^  serve" && CMDS="$CMDS serve"   # the server is built where libmicrohttpd is
for c in $CMDS; do
    for h in --help -h; do
        out=$("$BIN" $c $h 2>"$T/err"); rc=$?
        [ $rc -eq 0 ] || { bad "$c $h: exit $rc: $(cat "$T/err")"; continue; }
        echo "$out" | grep -q "usage" || bad "$c $h: no usage on stdout: $out"
        echo "$out" | grep -q "$c" || bad "$c $h: usage does not name $c"
    done
done
"$BIN" run -m "$M" -p hi --bogus >/dev/null 2>"$T/err" && bad "unknown option accepted"
grep -q -- "--bogus" "$T/err" || bad "unknown option not named: $(cat "$T/err")"
# a choice option with a value it does not know names the option, the value and the choices
"$BIN" run -m "$M" -p hi --drafter-weights q3 >/dev/null 2>"$T/err" && bad "--drafter-weights q3 accepted"
grep -q -- "--drafter-weights: 'q3' is not one of stored, q4, default" "$T/err" || bad "--drafter-weights q3: $(cat "$T/err")"

# --version / -V: one line, the version CMake defines (project VERSION)
want=$(sed -n 's/^project(specdec VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
[ -n "$want" ] || bad "no project VERSION in CMakeLists.txt"
for v in --version -V; do
    out=$("$BIN" $v); rc=$?
    [ $rc -eq 0 ] && [ "$out" = "specdec $want" ] || bad "$v: exit $rc, '$out', want 'specdec $want'"
done

# -f FILE and -f - give what -p gives for the same text (bytes as they are, no newline added)
P=$'// FILE: fs/x.c\n#include <linux/fs.h>\n\nstatic int x_open(struct inode *inode, struct file *f)\n{'
printf '%s' "$P" > "$T/prompt.txt"
"$BIN" run -m "$M" -n 12 -p "$P" > "$T/p.out" 2>/dev/null || bad "run -p failed"
"$BIN" run -m "$M" -n 12 -f "$T/prompt.txt" > "$T/f.out" 2>/dev/null || bad "run -f FILE failed"
"$BIN" run -m "$M" -n 12 -f - < "$T/prompt.txt" > "$T/s.out" 2>/dev/null || bad "run -f - failed"
[ -s "$T/p.out" ] && cmp -s "$T/p.out" "$T/f.out" && cmp -s "$T/p.out" "$T/s.out" || bad "-f FILE / -f - differ from -p"

# --batch N changes the prefill's chunks and the widest verify, never the output: a prompt of more
# than 5 tokens in chunks of 5, and MTP at block size 4 with 3 rows a call (capped), as the default
"$BIN" run -m "$M" -n 12 -p "$P" --batch 5 > "$T/b5.out" 2>"$T/b5.err" || bad "run --batch 5 failed"
cmp -s "$T/p.out" "$T/b5.out" || bad "run --batch 5 differs from the default"
grep -q "^\[backend\] .*, batch 5$" "$T/b5.err" || bad "run --batch 5: the stats do not name batch 5: $(cat "$T/b5.err")"
# the default is the backend's choice, named in the stats: 64 on the CPU
"$BIN" run -m "$M" -n 2 -p "$P" --backend cpu > /dev/null 2>"$T/bd.err" || bad "run --backend cpu failed"
grep -q "^\[backend\] cpu .*, batch 64$" "$T/bd.err" || bad "run --backend cpu: the stats do not name batch 64: $(cat "$T/bd.err")"
"$BIN" run -m "$M" -n 12 -p "$P" --draft mtp --block-size 4 --batch 3 > "$T/b3.out" 2>/dev/null || bad "run --batch 3 with MTP failed"
cmp -s "$T/p.out" "$T/b3.out" || bad "MTP with --batch 3 differs from classic"
[ "$("$BIN" tokenize -m "$M" -f "$T/prompt.txt")" = "$("$BIN" tokenize -m "$M" -p "$P")" ] || bad "tokenize -f differs from -p"
"$BIN" run -m "$M" -n 4 -f "$T/none.txt" >/dev/null 2>"$T/err" && bad "-f of a missing file accepted"
grep -q "none.txt" "$T/err" || bad "-f of a missing file: not named: $(cat "$T/err")"
"$BIN" run -m "$M" -n 4 -p hi -f "$T/prompt.txt" >/dev/null 2>&1 && bad "-p and -f together accepted"

# loading progress: on stderr only; off a terminal, once the load outlasts SPECDEC_PROGRESS_AFTER_MS
# (default 1 s; 0 here so the small model shows it), never on a quick load by default
SPECDEC_PROGRESS_AFTER_MS=0 "$BIN" run -m "$M" -n 12 -p "$P" > "$T/pg.out" 2>"$T/err" || bad "run with progress failed"
grep -q "^loading weights: 100% (.* MiB" "$T/err" || bad "no loading progress on stderr: $(cat "$T/err")"
cmp -s "$T/p.out" "$T/pg.out" || bad "loading progress changed stdout"
"$BIN" run -m "$M" -n 2 -p hi 2>&1 >/dev/null | grep -q "loading weights" && bad "progress shown for a quick load off a terminal"
# a backend that copies the weights (cpu-sim, as a GPU) shows the upload too; the CPU's views do not
SPECDEC_PROGRESS_AFTER_MS=0 "$BIN" run -m "$M" -n 2 -p hi --backend cpu-sim 2>&1 >/dev/null | grep -q "^uploading weights: 100%" ||
    bad "no upload progress on cpu-sim"
SPECDEC_PROGRESS_AFTER_MS=0 "$BIN" run -m "$M" -n 2 -p hi --backend cpu 2>&1 >/dev/null | grep -q "uploading weights" &&
    bad "upload progress on the CPU backend (zero-copy views)"

# -m absent: the embedded model, from any working directory
(cd "$T" && "$BIN" run -n 12 -p "$P" > "$T/d.out" 2>"$T/err") || bad "run without -m (cwd $T): $(cat "$T/err")"
cmp -s "$T/p.out" "$T/d.out" || bad "run without -m differs from -m models/qwen3-kernel"
(cd / && "$BIN" info > "$T/info" 2>&1) || bad "info without -m: $(cat "$T/info")"
# a binary with no model beside it says every place it looked; $SPECDEC_MODEL is the last one
mkdir -p "$T/bin" && cp "$BIN" "$T/bin/specdec"
env -u SPECDEC_MODEL "$T/bin/specdec" run -p hi -n 2 >/dev/null 2>"$T/err" && bad "run with no model anywhere succeeded"
grep -q "$T/bin/../models/qwen3-kernel" "$T/err" && grep -q "share/specdec/models/qwen3-kernel" "$T/err" && grep -q "SPECDEC_MODEL" "$T/err" ||
    bad "no-model message does not list the places: $(cat "$T/err")"
if [[ $CMDS == *serve* ]]; then
    env -u SPECDEC_MODEL "$T/bin/specdec" serve --port 1 >/dev/null 2>"$T/err" && bad "serve with no model anywhere started"
    grep -q "share/specdec/models/qwen3-kernel" "$T/err" || bad "serve without -m does not look for the embedded model: $(cat "$T/err")"
fi
SPECDEC_MODEL=$M "$T/bin/specdec" run -p "$P" -n 12 > "$T/e.out" 2>/dev/null || bad "SPECDEC_MODEL not used"
cmp -s "$T/p.out" "$T/e.out" || bad "SPECDEC_MODEL run differs"

# GGUF given to -m: say GGUF is not read and what is
printf 'GGUF\003\000\000\000junk' > "$T/model.gguf"
for what in "$T/model.gguf" "$T"; do
    for c in "run -p hi -n 2" info "tokenize -p hi"; do
        # shellcheck disable=SC2086
        "$BIN" $c -m "$what" >/dev/null 2>"$T/err"; rc=$?
        [ $rc -eq 1 ] || bad "$c -m $what: exit $rc"
        grep -q "GGUF" "$T/err" && grep -q "config.json" "$T/err" && grep -q "safetensors" "$T/err" || bad "$c -m $what: $(cat "$T/err")"
    done
done

# unwritable output files fail before anything loads (the model named here does not even exist)
for o in --stats-json --ids-out; do
    "$BIN" run -m "$T/no-model" -p hi -n 2 $o "$T/no-dir/x.json" >/dev/null 2>"$T/err"; rc=$?
    [ $rc -eq 1 ] && grep -q -- "$o" "$T/err" && grep -q "no-dir/x.json" "$T/err" || bad "$o unwritable: exit $rc: $(cat "$T/err")"
    [ -e "$T/no-model" ] && bad "$o: something was created"
done
"$BIN" run -m "$M" -p hi -n 2 --stats-json "$T" >/dev/null 2>"$T/err" && bad "--stats-json to a directory accepted"
"$BIN" bench -m "$T/no-model" --draft mtp --prompts "$T/none.jsonl" --out "$T/no-dir/b.md" >/dev/null 2>"$T/err"
grep -q -- "--out.*no-dir/b.md" "$T/err" || bad "bench --out unwritable not found first: $(cat "$T/err")"

# --seed -1: a fresh seed, printed in the stats line and the JSON, and replayable
"$BIN" run -m "$M" -p "$P" -n 12 --temp 0.9 --seed -1 --stats-json "$T/s1.json" > "$T/r1.out" 2>"$T/err" || bad "--seed -1 failed"
seed=$(sed -n 's/.*seed \([0-9]*\) (fresh).*/\1/p' "$T/err")
[ -n "$seed" ] || bad "--seed -1: no 'seed N (fresh)' in the stats line: $(cat "$T/err")"
grep -q "\"seed\": $seed" "$T/s1.json" || bad "--seed -1: seed $seed not in the stats JSON"
"$BIN" run -m "$M" -p "$P" -n 12 --temp 0.9 --seed "$seed" > "$T/r2.out" 2>/dev/null
cmp -s "$T/r1.out" "$T/r2.out" || bad "the reported fresh seed does not replay the text"
"$BIN" run -m "$M" -p "$P" -n 12 --temp 0.9 --seed -1 --stats-json "$T/s2.json" >/dev/null 2>&1
[ "$(grep '"seed"' "$T/s1.json")" != "$(grep '"seed"' "$T/s2.json")" ] || bad "two --seed -1 runs used the same seed"
for s in -2 -18446744073709551615 abc 12x 18446744073709551616 " 5" +5; do
    "$BIN" run -m "$M" -p hi -n 2 --seed "$s" >/dev/null 2>"$T/err" && bad "--seed '$s' accepted"
    grep -q -- "--seed" "$T/err" || bad "--seed '$s': option not named: $(cat "$T/err")"
done

# numeric options: junk and overflow refused, naming the option
while read -r opt val; do
    "$BIN" run -m "$M" -p hi $opt "$val" >/dev/null 2>"$T/err" && bad "$opt '$val' accepted"
    grep -q -- "$opt" "$T/err" || bad "$opt '$val': option not named: $(cat "$T/err")"
done <<LIST
-n 99999999999999999999
-n -1
--temp nan
--temp 1e999
--top-p 1.5
--top-k 1e3
--threads 0
--ctx 4k
--block-size 99
LIST

# one default sampling mode, seeded: for a seed the speculative text is the classic text (rejection
# sampling would draw differently); bench's defaults are run's (block size auto, the shipped draft vocabulary)
"$BIN" run -m "$M" -p "$P" -n 24 --temp 0.9 --seed 5 > "$T/c.out" 2>/dev/null
for d in mtp ngram; do
    "$BIN" run -m "$M" -p "$P" -n 24 --temp 0.9 --seed 5 --draft $d > "$T/sp.out" 2>/dev/null
    cmp -s "$T/c.out" "$T/sp.out" || bad "default sampling: --draft $d text differs from classic at the same seed"
done
printf '{"id":"p","prompt":"int main(void)\\n{"}\n' > "$T/b.jsonl"
out=$("$BIN" bench -m "$M" --draft mtp --prompts "$T/b.jsonl" -n 4 --repeats 1 --threads 1 2>&1)
echo "$out" | grep -qF -- "--block-size auto" || bad "bench's default block size is not run's (auto): $out"
echo "$out" | grep -qF "arm dv 16384: draft vocabulary 16384" || bad "bench's default draft vocabulary is not run's: $out"

# stop reasons by name, in the stats line and the JSON
"$BIN" run -m "$M" -p "$P" -n 3 --stats-json "$T/st.json" >/dev/null 2>"$T/err"
grep -q "stop: length" "$T/err" || bad "stats line: no 'stop: length': $(cat "$T/err")"
grep -q '"stop_reason": "length"' "$T/st.json" || bad "JSON stop_reason is not \"length\""
"$BIN" run -m "$M" -p "$P" -n 40 --stop ";" --stats-json "$T/st.json" >/dev/null 2>"$T/err"
grep -q "stop: stop" "$T/err" && grep -q '"stop_reason": "stop"' "$T/st.json" || bad "stop string: $(cat "$T/err")"
"$BIN" run -m "$M" -p "$P" -n 100 --ctx 40 --ignore-eos --stats-json "$T/st.json" >/dev/null 2>"$T/err"
grep -q "stop: context_full" "$T/err" && grep -q '"stop_reason": "context_full"' "$T/st.json" || bad "full context: $(cat "$T/err")"

[ $fail -eq 0 ] && echo "test_cli_conventions: ok"
exit $fail
