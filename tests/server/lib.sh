# lib.sh: helpers shared by tests/test_server*.sh (sourced, not run): a scratch directory, the
# model to serve, starting `specdec serve` on a free loopback port, and check bookkeeping.
# Environment: SPECDEC_BIN (the CLI), SPECDEC_SOURCE_DIR (the repo), optional SPECDEC_TEST_MODEL
# (a model dir with a tokenizer to use instead of the generated one), SPECDEC_TEST_THREADS.

SRC=${SPECDEC_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
BIN=${SPECDEC_BIN:-$SRC/build/specdec}
THREADS=${SPECDEC_TEST_THREADS:-1}
TMP=$(mktemp -d /tmp/sdserver-XXXXXX)
SERVER_PIDS=()
N_CHECKS=0
N_FAILED=0

cleanup() {
    local rc=$? bad=0
    for p in "${SERVER_PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${SERVER_PIDS[@]}"; do wait "$p" 2>/dev/null; done
    # a server that shut down cleanly leaves no sanitizer report (leaks included)
    for f in "$TMP"/server-*.log; do
        [ -f "$f" ] || continue
        if grep -q "AddressSanitizer\|LeakSanitizer\|runtime error" "$f"; then
            echo "FAIL sanitizer report in $(basename "$f"):"; head -40 "$f"; bad=1
        fi
    done
    rm -rf "$TMP"
    [ $bad = 1 ] && exit 1
    exit $rc
}
trap cleanup EXIT

check() {  # check NAME CONDITION-COMMAND...
    local name=$1; shift
    N_CHECKS=$((N_CHECKS + 1))
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; N_FAILED=$((N_FAILED + 1)); fi
}

finish() {
    echo "$N_CHECKS checks, $N_FAILED failed"
    [ "$N_FAILED" -eq 0 ]
    exit $?
}

die() { echo "FATAL: $*"; [ -f "$TMP/server.log" ] && tail -20 "$TMP"/server*.log; exit 1; }

# A model dir with a tokenizer: $SPECDEC_TEST_MODEL, else the tiny-bf16 fixture plus a generated
# tokenizer, else a generated random model. $1 = tiny | slow | tiny-mtp (always generated: a
# random tiny model with an mtp module).
make_test_model() {
    local size=${1:-tiny} out=$TMP/model-$1
    if [ "$size" = tiny-mtp ]; then
        python3 "$SRC/tests/server/make_model.py" "$out" --size tiny || return 1
        echo "$out"; return
    fi
    if [ "$size" = tiny ] && [ -n "${SPECDEC_TEST_MODEL:-}" ] && [ -f "${SPECDEC_TEST_MODEL:-}/tokenizer.json" ]; then
        echo "$SPECDEC_TEST_MODEL"; return
    fi
    if [ "$size" = tiny ] && [ -f "$SRC/tests/fixtures/tiny-bf16/model.safetensors" ]; then
        python3 "$SRC/tests/server/make_model.py" "$out" --from "$SRC/tests/fixtures/tiny-bf16" || return 1
    else
        python3 "$SRC/tests/server/make_model.py" "$out" --size "$size" || return 1
    fi
    echo "$out"
}

# start_server NAME MODEL_DIR [serve options...]: sets PORT_<NAME>; retries on a busy port.
start_server() {
    local name=$1 model=$2; shift 2
    local log=$TMP/server-$name.log
    for try in 1 2 3 4 5 6 7 8; do
        local port=$((20000 + (RANDOM * 7 + $$ + try * 131) % 40000))
        "$BIN" serve -m "$model" --port "$port" --threads "$THREADS" "$@" >"$log" 2>&1 &
        local pid=$!
        for i in $(seq 1 100); do
            if curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$port/health"; then
                SERVER_PIDS+=("$pid"); eval "PORT_$name=$port"; eval "PID_$name=$pid"; return 0
            fi
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
        grep -q "cannot listen" "$log" || { cat "$log"; return 1; }
    done
    return 1
}

# http METHOD URL [curl args...]: prints "STATUS" and writes the body to $TMP/body.
http() {
    local m=$1 u=$2; shift 2
    curl -s -o "$TMP/body" -w '%{http_code}' -X "$m" --max-time 30 "$@" "$u"
}

# jget FILE PYEXPR: evaluate PYEXPR with j = the JSON in FILE; prints the result.
jget() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }

# sse_text FILE: concatenated text of an SSE stream (completions or chat), strictly parsed.
sse_text() {
    python3 - "$1" <<'EOF'
import json, sys
data = open(sys.argv[1], "rb").read().decode("utf-8")
events = [e for e in data.split("\n\n") if e.strip()]
assert events[-1] == "data: [DONE]", "stream does not end with [DONE]"
text = []
for e in events[:-1]:
    assert e.startswith("data: "), e
    c = json.loads(e[6:])
    for ch in c["choices"]:
        text.append(ch.get("text") or (ch.get("delta") or {}).get("content") or "")
sys.stdout.write("".join(text))
EOF
}

# run_text OUT [run args...]: the text `specdec run` prints (without its final newline).
run_text() {
    local out=$1; shift
    "$BIN" run --threads "$THREADS" "$@" >"$out.raw" 2>"$out.err" || return 1
    python3 -c "import sys; d=open(sys.argv[1],'rb').read(); assert d.endswith(b'\n'); open(sys.argv[2],'wb').write(d[:-1])" "$out.raw" "$out"
}

same_file() { cmp -s "$1" "$2" || { echo "  differ: $(head -c 200 "$1" | od -c | head -3) vs $(head -c 200 "$2" | od -c | head -3)"; return 1; }; }

# spec_matrix "DRAFTS": for each drafter x block size (auto, 4) x greedy/seeded (sampling mode
# "seeded" named, whatever the default) x stream or not,
# the completion text must equal $TMP/run-greedy / $TMP/run-seeded (classic `specdec run` of
# $PROMPT, 24 tokens) and the stats must say the drafter speculated after a passed probe.
# Needs BASE, AUTH, PROMPT.
spec_matrix() {
    local drafts=$1 dr bs c samp stream
for dr in $drafts; do
    for bs in '"auto"' 4; do
        for c in greedy seeded; do
            if [ $c = greedy ]; then samp='"temperature":0'; else samp='"temperature":0.8,"top_p":0.9,"top_k":40,"seed":42'; fi
            for stream in false true; do
                http POST $BASE/v1/completions "${AUTH[@]}" -N -d "{\"prompt\":\"$PROMPT\",\"max_tokens\":24,$samp,\"stream\":$stream,\"stream_options\":$([ $stream = true ] && echo '{"include_usage":true}' || echo null),\"specdec\":{\"draft\":\"$dr\",\"block_size\":$bs,\"sampling\":\"seeded\"}}" >/dev/null
                if [ $stream = true ]; then sse_text "$TMP/body" >"$TMP/spec-out"; grep '"usage"' "$TMP/body" | sed 's/^data: //' >"$TMP/spec.json"
                else jget "$TMP/body" 'j["choices"][0]["text"]' | python3 -c "import sys; sys.stdout.write(sys.stdin.read()[:-1])" >"$TMP/spec-out"; cp "$TMP/body" "$TMP/spec.json"; fi
                check "spec $dr K=$bs $c stream=$stream text == run" same_file "$TMP/spec-out" "$TMP/run-$c"
                check "spec $dr K=$bs $c stream=$stream stats" [ "$(jget $TMP/spec.json 'j["specdec"]["draft"], j["specdec"]["speculated"], j["specdec"]["probe"]')" = "$dr True 1" ]
            done
        done
    done
done
}
