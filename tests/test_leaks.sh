#!/usr/bin/env bash
# test_leaks.sh: every CLI command (info, run, tokenize and --decode, score, bench, quantize,
# inflate, serve with a request then SIGTERM) on a tiny model, checked for leaks and memory errors:
#   - a binary built with AddressSanitizer (the ASan/UBSan build of scripts/test.sh) runs as is,
#     with LeakSanitizer on: exit status 0 and no sanitizer report;
#   - any other binary runs under valgrind --leak-check=full (definite and indirect leaks and
#     every memcheck error fail the command through --error-exitcode). Without valgrind the test
#     is skipped (status 77); scripts/test.sh installs it.
# The model is tests/fixtures/tiny-bf16 (vocab 512) with a tokenizer.json written here: the 256
# byte-level tokens and 256 added tokens, so every id the model can produce decodes.
set -uo pipefail
SRC=${SPECDEC_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${SPECDEC_BIN:-$SRC/build/specdec}
TMP=$(mktemp -d /tmp/sdleaks-XXXXXX)
SERVER_PID=
trap '[ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null; rm -rf "$TMP"' EXIT

ASAN=0
# The listings are read whole before matching: with pipefail, `ldd | grep -q` fails whenever grep
# exits at its match while ldd is still writing (SIGPIPE), which sent ASan builds to valgrind.
LISTING=$( { ldd "$BIN"; nm "$BIN"; } 2>/dev/null || true)
case $LISTING in *libasan*|*__asan_init*) ASAN=1 ;; esac
if [ $ASAN = 0 ] && ! command -v valgrind >/dev/null; then
    echo "test_leaks: valgrind is not installed and $BIN is not an ASan build: skipped"
    exit 77
fi
# valgrind does not run AVX-512; the portable kernels are enough for a tiny model
VG=(valgrind -q --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect
    --error-exitcode=99 --num-callers=30)

N=0 FAILED=0
# leakcheck NAME [--fails] CMD...: run CMD (the CLI and its arguments) under the checker; it must
# exit 0 (--fails: with an error status below valgrind's 99); stdout in $TMP/NAME.out
leakcheck() {
    local name=$1; shift
    local want=0
    [ "$1" = --fails ] && { want=1; shift; }
    local log=$TMP/$name.log rc ok
    N=$((N + 1))
    if [ $ASAN = 1 ]; then
        ASAN_OPTIONS=detect_leaks=1:${ASAN_OPTIONS:-} "$@" >"$TMP/$name.out" 2>"$log"; rc=$?
    else
        SPECDEC_SIMD=portable "${VG[@]}" "$@" >"$TMP/$name.out" 2>"$log"; rc=$?
    fi
    if [ $want = 0 ]; then ok=$([ $rc -eq 0 ] && echo 1 || echo 0); else ok=$([ $rc -ge 1 ] && [ $rc -lt 99 ] && echo 1 || echo 0); fi
    if [ $ok = 0 ] || grep -q "Sanitizer\|runtime error:\|definitely lost\|indirectly lost\|Invalid read\|Invalid write" "$log"; then
        echo "FAIL $name: exit status $rc"; head -60 "$log"; FAILED=$((FAILED + 1))
    else
        echo "ok   $name"
    fi
}

# ---- the model: tiny-bf16 plus a byte-level tokenizer of 512 ids ----
M=$TMP/model
mkdir -p "$M"
cp "$SRC/tests/fixtures/tiny-bf16/config.json" "$SRC/tests/fixtures/tiny-bf16/model.safetensors" "$M/"
{
    printf '{"version":"1.0","added_tokens":['
    for i in $(seq 256 511); do
        [ $i -gt 256 ] && printf ','
        printf '{"id":%d,"content":"<t%d>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}' $i $i
    done
    printf '],"normalizer":null,"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":true},'
    printf '"post_processor":null,"decoder":{"type":"ByteLevel"},"model":{"type":"BPE","unk_token":null,"vocab":{'
    n=0
    for b in $(seq 0 255); do
        # GPT-2 byte-to-unicode: printable Latin-1 bytes stand for themselves, the rest for 256 + k
        if { [ $b -ge 33 ] && [ $b -le 126 ]; } || { [ $b -ge 161 ] && [ $b -le 172 ]; } || [ $b -ge 174 ]; then cp=$b
        else cp=$((256 + n)); n=$((n + 1)); fi
        [ $b -gt 0 ] && printf ','
        printf '"\\u%04x":%d' $cp $b
    done
    printf '},"merges":[]}}'
} > "$M/tokenizer.json"
printf '{"prompt": "int main(void) {"}\n{"prompt": "hello world"}\n' > "$TMP/prompts.jsonl"

B=$BIN
leakcheck info "$B" info -m "$M"
leakcheck run "$B" run -m "$M" -p "hello" -n 6 --threads 2
leakcheck run_ngram "$B" run -m "$M" -p "hello hello hello" -n 6 --draft ngram --ignore-eos --threads 1
leakcheck tokenize "$B" tokenize -m "$M" -p "hello <t300> world"
leakcheck detokenize "$B" tokenize -m "$M" --decode -p "[104, 105, 300, 32]"
leakcheck score "$B" score -m "$M" -p "hello" --ids "[32, 119, 300]" --top 3
leakcheck bench "$B" bench -m "$M" --draft ngram --prompts "$TMP/prompts.jsonl" -n 4 --repeats 1 --threads 1 --out "$TMP/bench.json"
leakcheck quantize "$B" quantize "$M" "$TMP/q4" --bits 4 --group-size 64
leakcheck inflate "$B" inflate "$M" "$TMP/inflated" --hidden 256 --intermediate 512 --layers 2 --heads 4 --kv-heads 2 --threads 1 --quiet
# error paths free what they allocated too
leakcheck run_missing_model --fails "$B" run -m "$TMP/nonexistent" -p x -n 2
leakcheck tokenize_bad_utf8 --fails "$B" tokenize -m "$M" -p $'\xff\xfe'
leakcheck quantize_bad_bits --fails "$B" quantize "$M" "$TMP/q3" --bits 3 --group-size 64

# ---- serve: one completion, then SIGTERM; the process must exit 0 with nothing leaked ----
SERVE_HELP=$("$BIN" serve --help 2>&1 || true)
if [[ $SERVE_HELP == *"without the HTTP server"* ]]; then
    echo "skip serve (built without the server)"
else
    N=$((N + 1))
    log=$TMP/serve.log
    for try in 1 2 3 4 5; do
        port=$((20000 + (RANDOM * 7 + $$ + try * 131) % 40000))
        if [ $ASAN = 1 ]; then
            ASAN_OPTIONS=detect_leaks=1:${ASAN_OPTIONS:-} "$BIN" serve -m "$M" --port $port --threads 1 >"$log" 2>&1 &
        else
            SPECDEC_SIMD=portable "${VG[@]}" "$BIN" serve -m "$M" --port $port --threads 1 >"$log" 2>&1 &
        fi
        SERVER_PID=$!
        up=0
        for i in $(seq 1 600); do
            curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$port/health" && { up=1; break; }
            kill -0 $SERVER_PID 2>/dev/null || break
            sleep 0.1
        done
        [ $up = 1 ] && break
        kill $SERVER_PID 2>/dev/null; wait $SERVER_PID 2>/dev/null; SERVER_PID=
        grep -q "cannot listen" "$log" || break
    done
    code=$(curl -s -o "$TMP/reply.json" -w '%{http_code}' --max-time 120 -H 'Content-Type: application/json' \
        -d '{"prompt": "hello", "max_tokens": 4, "temperature": 0}' "http://127.0.0.1:$port/v1/completions")
    scode=$(curl -s -o "$TMP/stream.txt" -w '%{http_code}' --max-time 120 -H 'Content-Type: application/json' \
        -d '{"prompt": "hello", "max_tokens": 4, "stream": true}' "http://127.0.0.1:$port/v1/completions")
    kill -TERM $SERVER_PID 2>/dev/null
    wait $SERVER_PID; rc=$?
    SERVER_PID=
    if [ "$code" != 200 ] || [ "$scode" != 200 ] || [ $rc -ne 0 ] ||
       grep -q "Sanitizer\|runtime error:\|definitely lost\|indirectly lost\|Invalid read\|Invalid write" "$log"; then
        echo "FAIL serve: replies $code / $scode, exit status $rc"; tail -60 "$log"; FAILED=$((FAILED + 1))
    else
        echo "ok   serve (a completion and a stream, then SIGTERM)"
    fi
fi

echo "test_leaks ($([ $ASAN = 1 ] && echo LeakSanitizer || echo valgrind)): $N commands, $FAILED failed"
[ $FAILED -eq 0 ]
