#!/usr/bin/env bash
# test_server_conventions.sh: `specdec serve` conventions on the embedded model, on loopback:
# seeds (a fresh one per request when none is given, echoed in the x-specdec-seed header, the
# "specdec" object and the stream's last chunk, and replaying it reproduces the text), the default
# sampling mode shared with `specdec run`, server text == `specdec run --sampling X --seed S` for
# both modes, the per-request log line (text and --log-format json), and the latency histograms
# of /metrics. Fails through the exit code.
set -u
source "$(dirname "$0")/server/lib.sh"
command -v jq >/dev/null || die "jq is needed (scripts/test.sh installs it)"
MODEL=$SRC/models/qwen3-kernel
[ -f "$MODEL/model.safetensors" ] || die "no embedded model at $MODEL"
start_server text "$MODEL" || die "server did not start"
start_server json "$MODEL" --log-format json || die "json-logging server did not start"
B=http://127.0.0.1:$PORT_text
J=http://127.0.0.1:$PORT_json
PROMPT='static int'
SPEC='"specdec":{"draft":"mtp","block_size":4'

# completion BASE BODY: POSTs, leaves the body in $TMP/body and the headers in $TMP/hdr.
completion() { curl -s -D "$TMP/hdr" -o "$TMP/body" -w '%{http_code}' --max-time 60 "$1/v1/completions" -d "$2"; }
hdr_seed() { tr -d '\r' <"$TMP/hdr" | awk -F': ' 'tolower($1)=="x-specdec-seed" {print $2}'; }
# the seed as sent (jq would read a 63-bit integer as a double and round it)
seed_of() { grep -o '"seed":[0-9]*' "$1" | head -1 | cut -d: -f2; }
jqe() { jq -e "$@" >/dev/null; }
differ() { ! cmp -s "$1" "$2"; }
text_of() { jq -j '.choices[0].text' "$1"; }
stream_text() { sed -n 's/^data: //p' "$1" | grep -v '^\[DONE\]$' | jq -j '.choices[0].text'; }
# run_out FILE ARGS...: `specdec run` text without the final newline it prints.
run_out() { local f=$1; shift; "$BIN" run -m "$MODEL" --threads "$THREADS" -p "$PROMPT" "$@" 2>"$f.err" | head -c -1 >"$f"; }

# ---- seeds -------------------------------------------------------------------------------
for i in 1 2; do
    st=$(completion $B "{\"prompt\":\"$PROMPT\",\"max_tokens\":24,\"temperature\":1,$SPEC}}")
    check "no-seed request $i answers 200 ($st)" [ "$st" = 200 ]
    text_of "$TMP/body" >"$TMP/free$i"
    seed[$i]=$(hdr_seed)
    check "request $i: x-specdec-seed header (${seed[$i]}) == specdec.seed" [ -n "${seed[$i]}" -a "$(seed_of "$TMP/body")" = "${seed[$i]}" ]
done
check "two no-seed requests at temperature 1 get different seeds" [ "${seed[1]}" != "${seed[2]}" ]
check "... and different texts" differ "$TMP/free1" "$TMP/free2"
completion $B "{\"prompt\":\"$PROMPT\",\"max_tokens\":24,\"temperature\":1,\"seed\":${seed[1]},$SPEC}}" >/dev/null
text_of "$TMP/body" >"$TMP/replay"
check "replaying the echoed seed reproduces the text" same_file "$TMP/replay" "$TMP/free1"
curl -s -N -D "$TMP/hdr" -o "$TMP/sse" --max-time 60 $B/v1/completions -d "{\"prompt\":\"$PROMPT\",\"max_tokens\":8,\"temperature\":1,\"stream\":true}"
sseed=$(grep '"finish_reason":"' "$TMP/sse" | seed_of -)
check "stream: the last chunk's seed ($sseed) == x-specdec-seed" [ -n "$sseed" -a "$sseed" = "$(hdr_seed)" ]

# ---- server text == specdec run, both sampling modes, and the shared default ---------------
for mode in seeded rejection; do
    run_out "$TMP/run-$mode" -n 16 --temp 1 --seed 77 --draft mtp --block-size 4 --sampling $mode
    completion $B "{\"prompt\":\"$PROMPT\",\"max_tokens\":16,\"temperature\":1,\"seed\":77,$SPEC,\"sampling\":\"$mode\"}}" >/dev/null
    text_of "$TMP/body" >"$TMP/srv-$mode"
    check "sampling $mode: server text == run text" same_file "$TMP/srv-$mode" "$TMP/run-$mode"
    check "sampling $mode: echoed as specdec.sampling" [ "$(jq -r .specdec.sampling "$TMP/body")" = $mode ]
    curl -s -N -o "$TMP/sse" --max-time 60 $B/v1/completions -d "{\"prompt\":\"$PROMPT\",\"max_tokens\":16,\"temperature\":1,\"seed\":77,\"stream\":true,$SPEC,\"sampling\":\"$mode\"}}"
    stream_text "$TMP/sse" >"$TMP/srvs-$mode"
    check "sampling $mode: streamed text == run text" same_file "$TMP/srvs-$mode" "$TMP/run-$mode"
done
check "the two modes differ here (the comparison can tell them apart)" differ "$TMP/run-seeded" "$TMP/run-rejection"
run_out "$TMP/run-default" -n 16 --temp 1 --seed 77 --draft mtp --block-size 4
completion $B "{\"prompt\":\"$PROMPT\",\"max_tokens\":16,\"temperature\":1,\"seed\":77,$SPEC}}" >/dev/null
text_of "$TMP/body" >"$TMP/srv-default"
check "no mode given: server and run use the same default mode" same_file "$TMP/srv-default" "$TMP/run-default"

# ---- the request log line ----------------------------------------------------------------
completion $B "{\"prompt\":\"$PROMPT\",\"max_tokens\":5,\"temperature\":0,\"seed\":9,\"specdec\":{\"ignore_eos\":true}}" >/dev/null
id=$(jq -r .id "$TMP/body"); pt=$(jq -r .usage.prompt_tokens "$TMP/body")
completion $B '{"prompt":"x","max_tokens":"five"}' >/dev/null
sleep 0.3
line=$(grep "request id=$id " "$TMP/server-text.log")
check "log line for $id" [ -n "$line" ]
check "... names status, tokens, stop reason, seed ($line)" \
    grep -qE "status=200 prompt_tokens=$pt completion_tokens=5 ms=[0-9.]+ queue_ms=[0-9.]+ ttft_ms=[0-9.]+ stop=length seed=9$" <<<"$line"
check "a refused request has its line too (status=400)" grep -q 'POST /v1/completions status=400 ' "$TMP/server-text.log"
n_gen=$(grep -c 'request id=cmpl-' "$TMP/server-text.log")
check "one line per generation request ($n_gen == 10)" [ "$n_gen" = 10 ]

curl -s -o /dev/null $J/health
completion $J "{\"prompt\":\"$PROMPT\",\"max_tokens\":3,\"temperature\":0}" >/dev/null
id=$(jq -r .id "$TMP/body")
completion $J '{"prompt":"x","bogus":1}' >/dev/null
sleep 0.3
check "json log: every line is a JSON object with ts, level, msg" \
    jqe -s 'length > 3 and all(.[]; (.ts|type)=="string" and (.level|type)=="string" and (.msg|type)=="string")' "$TMP/server-json.log"
check "json log: the request line of $id" jqe -s --arg id "$id" \
    'any(.[]; .msg=="request" and .id==$id and .status==200 and .completion_tokens==3 and .stop=="length" and (.seed|type)=="number" and (.ms|type)=="number")' "$TMP/server-json.log"
check "json log: the 400 and the /health lines" jqe -s \
    'any(.[]; .msg=="request" and .status==400 and .path=="/v1/completions") and any(.[]; .msg=="request" and .path=="/health" and .status==200)' "$TMP/server-json.log"
check "json log: the startup message is JSON too" jqe -s 'any(.[]; .msg|startswith("listening on"))' "$TMP/server-json.log"
"$BIN" serve -m "$MODEL" --threads "$THREADS" --port "$PORT_json" --log-format json >/dev/null 2>"$TMP/fail.log"
rc=$?
check "json log: a fatal error (port in use) is a JSON line too (rc $rc)" \
    [ "$rc" = 1 ] && jqe -s 'length >= 1 and any(.[]; .level=="error" and (.msg|test("cannot listen")))' "$TMP/fail.log"

# ---- latency histograms --------------------------------------------------------------------
HISTS="specdec_queue_wait_seconds specdec_time_to_first_token_seconds specdec_time_per_output_token_seconds specdec_request_duration_seconds"
metric() { awk -v n="$2" '$1==n {print $2}' "$1"; }
hist_ok() {  # hist_ok FILE NAME: TYPE line, cumulative buckets, +Inf == count
    local f=$1 n=$2
    grep -q "^# TYPE $n histogram$" "$f" || { echo "  no TYPE for $n"; return 1; }
    awk -v n="$n" -v c="$(metric "$f" ${n}_count)" 'index($1, n "_bucket{")==1 { if ($2 < prev) bad=1; prev=$2; last=$2; nb++ }
        END { exit !(nb >= 2 && !bad && last == c) }' "$f"
}
curl -s -o "$TMP/m0" $B/metrics
K=4
for i in $(seq 1 $K); do
    if [ $((i % 2)) = 0 ]; then
        curl -s -N -o /dev/null --max-time 60 $B/v1/completions -d "{\"prompt\":\"$PROMPT\",\"max_tokens\":6,\"temperature\":0,\"stream\":true,\"specdec\":{\"ignore_eos\":true}}"
    else
        completion $B "{\"prompt\":\"$PROMPT\",\"max_tokens\":6,\"temperature\":0,\"specdec\":{\"ignore_eos\":true}}" >/dev/null
    fi
done
completion $B '{"prompt":"x","max_tokens":0}' >/dev/null     # refused before the queue: no observation
curl -s -o "$TMP/m1" $B/metrics
for h in $HISTS; do
    check "$h: histogram type, cumulative buckets, +Inf == count" hist_ok "$TMP/m1" $h
    d=$(( $(metric "$TMP/m1" ${h}_count) - $(metric "$TMP/m0" ${h}_count) ))
    check "$h: count moved by $K ($d)" [ "$d" = $K ]
    check "$h: sum moved up" awk -v a="$(metric "$TMP/m0" ${h}_sum)" -v b="$(metric "$TMP/m1" ${h}_sum)" 'BEGIN { exit !(b > a) }'
done
dsum() { awk -v a="$(metric "$TMP/m0" $1_sum)" -v b="$(metric "$TMP/m1" $1_sum)" 'BEGIN { printf "%.6f", b - a }'; }
check "queue wait <= time to first token <= request duration (sums)" awk -v q="$(dsum specdec_queue_wait_seconds)" \
    -v t="$(dsum specdec_time_to_first_token_seconds)" -v e="$(dsum specdec_request_duration_seconds)" 'BEGIN { exit !(q <= t && t <= e) }'
check "per-token time x 5 tokens <= duration - TTFT (+5 ms of rounding)" awk -v p="$(dsum specdec_time_per_output_token_seconds)" \
    -v t="$(dsum specdec_time_to_first_token_seconds)" -v e="$(dsum specdec_request_duration_seconds)" 'BEGIN { exit !(p * 5 <= e - t + 0.005 && p > 0) }'
finish
