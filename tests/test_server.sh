#!/usr/bin/env bash
# test_server.sh: `specdec serve` end to end on loopback: every endpoint through curl and through
# the official `openai` npm client, streamed and not, with the text checked byte for byte
# against `specdec run` for the same prompt / seed / settings (greedy and seeded sampling), plus
# the OpenAI-style errors for bad requests, auth, body size, and the metrics they leave.
set -u
source "$(dirname "$0")/server/lib.sh"

MODEL=$(make_test_model tiny) || die "cannot make a test model"
KEY=test-key-123
start_server main "$MODEL" --api-key "$KEY" --max-body 4096 --timeout-s 30 || die "server did not start"
BASE=http://127.0.0.1:$PORT_main
AUTH=(-H "Authorization: Bearer $KEY")
NAME=$(basename "$MODEL")
echo "serving $MODEL on port $PORT_main"

# ---- health, models, auth ---------------------------------------------------------------
check "health 200 without key" [ "$(http GET $BASE/health)" = 200 ]
check "models 401 without key" [ "$(http GET $BASE/v1/models)" = 401 ]
check "401 is an OpenAI error" [ "$(jget $TMP/body 'j["error"]["code"]')" = invalid_api_key ]
check "models 401 with a wrong key" [ "$(http GET $BASE/v1/models -H 'Authorization: Bearer nope')" = 401 ]
check "models 200 with key" [ "$(http GET $BASE/v1/models "${AUTH[@]}")" = 200 ]
check "models lists the model" [ "$(jget $TMP/body 'j["data"][0]["id"]')" = "$NAME" ]

# ---- completions vs specdec run ---------------------------------------------------------
PROMPT="Hello world"
compare_completion() {  # NAME JSON_SAMPLING RUN_ARGS...
    local name=$1 samp=$2; shift 2
    run_text "$TMP/run-$name" -m "$MODEL" -p "$PROMPT" -n 24 "$@" || { check "run $name" false; return; }
    local body="{\"model\":\"$NAME\",\"prompt\":\"$PROMPT\",\"max_tokens\":24,$samp"
    check "completion $name 200" [ "$(http POST $BASE/v1/completions "${AUTH[@]}" -d "$body}")" = 200 ]
    cp "$TMP/body" "$TMP/resp-$name.json"
    jget "$TMP/body" 'j["choices"][0]["text"]' | python3 -c "import sys; sys.stdout.write(sys.stdin.read()[:-1])" >"$TMP/srv-$name"
    check "completion $name text == run" same_file "$TMP/srv-$name" "$TMP/run-$name"
    local pt
    pt=$(sed -n 's/.*prompt \([0-9]*\) tokens.*/\1/p' "$TMP/run-$name.err")
    check "completion $name usage.prompt_tokens == run's" [ "$(jget $TMP/resp-$name.json 'j["usage"]["prompt_tokens"]')" = "$pt" ]
    check "completion $name usage adds up" [ "$(jget $TMP/resp-$name.json 'j["usage"]["total_tokens"] == j["usage"]["prompt_tokens"] + j["usage"]["completion_tokens"] and 0 < j["usage"]["completion_tokens"] <= 24')" = True ]
    check "completion $name finish_reason" [ "$(jget $TMP/resp-$name.json 'j["choices"][0]["finish_reason"] in ("stop", "length")')" = True ]
    check "completion $name stream 200" [ "$(http POST $BASE/v1/completions "${AUTH[@]}" -N -d "$body,\"stream\":true}")" = 200 ]
    sse_text "$TMP/body" >"$TMP/sse-$name" || check "completion $name stream parses" false
    check "completion $name stream text == run" same_file "$TMP/sse-$name" "$TMP/run-$name"
}
compare_completion greedy '"temperature":0' --temp 0
compare_completion seeded '"temperature":0.8,"top_p":0.9,"top_k":40,"seed":42' --temp 0.8 --top-p 0.9 --top-k 40 --seed 42

# a stop string taken from the middle of the greedy output
STOP=$(python3 -c "import sys; t=open(sys.argv[1],encoding='utf-8').read(); s=t[6:8]; print(s if len(s)==2 and s.isalnum() else '')" "$TMP/run-greedy")
if [ -n "$STOP" ]; then
    run_text "$TMP/run-stop" -m "$MODEL" -p "$PROMPT" -n 24 --temp 0 --stop "$STOP"
    http POST $BASE/v1/completions "${AUTH[@]}" -d "{\"prompt\":\"$PROMPT\",\"max_tokens\":24,\"temperature\":0,\"stop\":[\"$STOP\"]}" >/dev/null
    jget "$TMP/body" 'j["choices"][0]["text"]' | python3 -c "import sys; sys.stdout.write(sys.stdin.read()[:-1])" >"$TMP/srv-stop"
    check "stop string text == run --stop" same_file "$TMP/srv-stop" "$TMP/run-stop"
    check "stop string finish_reason stop" [ "$(jget $TMP/body 'j["choices"][0]["finish_reason"]')" = stop ]
fi

# ---- chat vs specdec run with the ChatML rendering ----------------------------------------
CHAT_PROMPT=$'<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n'
MSGS='[{"role":"system","content":"You are terse."},{"role":"user","content":"Hi there"}]'
for c in greedy seeded; do
    if [ $c = greedy ]; then samp='"temperature":0'; ra=(--temp 0); else samp='"temperature":0.8,"top_p":0.9,"seed":42'; ra=(--temp 0.8 --top-p 0.9 --seed 42); fi
    run_text "$TMP/runchat-$c" -m "$MODEL" -p "$CHAT_PROMPT" -n 24 "${ra[@]}"
    check "chat $c 200" [ "$(http POST $BASE/v1/chat/completions "${AUTH[@]}" -d "{\"model\":\"$NAME\",\"messages\":$MSGS,\"max_tokens\":24,$samp}")" = 200 ]
    jget "$TMP/body" 'j["choices"][0]["message"]["content"]' | python3 -c "import sys; sys.stdout.write(sys.stdin.read()[:-1])" >"$TMP/srvchat-$c"
    check "chat $c role assistant" [ "$(jget $TMP/body 'j["choices"][0]["message"]["role"] + "/" + j["object"]')" = assistant/chat.completion ]
    check "chat $c text == run of the ChatML prompt" same_file "$TMP/srvchat-$c" "$TMP/runchat-$c"
    http POST $BASE/v1/chat/completions "${AUTH[@]}" -N -d "{\"messages\":$MSGS,\"max_tokens\":24,\"stream\":true,\"stream_options\":{\"include_usage\":true},$samp}" >/dev/null
    sse_text "$TMP/body" >"$TMP/ssechat-$c" || check "chat $c stream parses" false
    check "chat $c stream text == run" same_file "$TMP/ssechat-$c" "$TMP/runchat-$c"
    check "chat $c stream has a usage chunk" grep -q '"usage":{"prompt_tokens"' "$TMP/body"
done
# the same conversation with text parts renders the same prompt
http POST $BASE/v1/chat/completions "${AUTH[@]}" -d '{"messages":[{"role":"developer","content":[{"type":"text","text":"You are "},{"type":"text","text":"terse."}]},{"role":"user","content":"Hi there"}],"max_tokens":24,"temperature":0}' >/dev/null
jget "$TMP/body" 'j["choices"][0]["message"]["content"]' | python3 -c "import sys; sys.stdout.write(sys.stdin.read()[:-1])" >"$TMP/srvchat-parts"
check "chat content parts + developer role == system string" same_file "$TMP/srvchat-parts" "$TMP/runchat-greedy"

# ---- speculative decoding: every drafter / width gives run's classic text ----------------------
HAS_MTP=$(python3 -c "import json,sys; print(1 if json.load(open(sys.argv[1])).get('mtp_num_hidden_layers') else 0)" "$MODEL/config.json")
http GET $BASE/v1/models "${AUTH[@]}" >/dev/null
check "models reports mtp_layers" [ "$(jget $TMP/body 'j["data"][0]["specdec"]["mtp_layers"] > 0')" = "$([ $HAS_MTP = 1 ] && echo True || echo False)" ]
drafts="ngram"; [ "$HAS_MTP" = 1 ] && drafts="mtp ngram"
spec_matrix "$drafts"
if [ "$HAS_MTP" = 1 ]; then
    http POST $BASE/v1/completions "${AUTH[@]}" -d "{\"prompt\":\"$PROMPT\",\"max_tokens\":4,\"temperature\":0}" >/dev/null
    # --draft auto on a CPU backend: MTP with prompt lookup (server.h, srv_auto_draft)
    check "MTP with prompt lookup engaged by default" [ "$(jget $TMP/body 'j["specdec"]["draft"], j["specdec"]["speculated"]')" = "mtp+ngram True" ]
    check "server log reports the probe verdict" grep -q "exactness probe passed" "$TMP/server-main.log"
else
    bad_mtp=$(http POST $BASE/v1/completions "${AUTH[@]}" -d '{"prompt":"x","specdec":{"draft":"mtp"}}')
    check "draft mtp without an mtp module -> 400 specdec.draft" [ "$bad_mtp $(jget $TMP/body 'j["error"]["param"]')" = "400 specdec.draft" ]
fi
http POST $BASE/v1/completions "${AUTH[@]}" -d "{\"prompt\":\"$PROMPT\",\"max_tokens\":4,\"temperature\":0,\"specdec\":{\"draft\":\"none\"}}" >/dev/null
check "draft none runs classic" [ "$(jget $TMP/body 'j["specdec"]["draft"], j["specdec"]["speculated"]')" = "none False" ]

# ---- the official openai client -----------------------------------------------------------
if [ -d "$SRC/node_modules/openai" ] && command -v node >/dev/null; then
    if node "$SRC/tests/server/openai_client.mjs" "$BASE/v1" "$NAME" "$KEY" "$PROMPT" "Hi there" 24 >"$TMP/oa.json" 2>"$TMP/oa.err"; then
        for c in greedy seeded; do
            for k in completion completion_stream; do
                jget "$TMP/oa.json" "j['$c']['$k']['text']" | python3 -c "import sys; sys.stdout.write(sys.stdin.read()[:-1])" >"$TMP/oa-$c-$k"
                check "openai $c $k == run" same_file "$TMP/oa-$c-$k" "$TMP/run-$c"
            done
            for k in chat chat_stream; do
                jget "$TMP/oa.json" "j['$c']['$k']['text']" | python3 -c "import sys; sys.stdout.write(sys.stdin.read()[:-1])" >"$TMP/oa-$c-$k"
                check "openai $c $k == run" same_file "$TMP/oa-$c-$k" "$TMP/runchat-$c"
            done
        done
        check "openai streamed usage" [ "$(jget $TMP/oa.json 'j["greedy"]["completion_stream"]["usage"]["completion_tokens"] > 0')" = True ]
        check "openai models.list" [ "$(jget $TMP/oa.json 'j["models"]')" = "['$NAME']" ]
        check "openai unknown model -> 404 model_not_found" [ "$(jget $TMP/oa.json 'j["err_model"]["status"], j["err_model"]["code"]')" = "404 model_not_found" ]
        check "openai bad temperature -> 400 param" [ "$(jget $TMP/oa.json 'j["err_temp"]["status"], j["err_temp"]["param"]')" = "400 temperature" ]
        check "openai bad role -> 400 param" [ "$(jget $TMP/oa.json 'j["err_msgs"]["status"], j["err_msgs"]["param"]')" = "400 messages[0].role" ]
        check "openai wrong key -> 401" [ "$(jget $TMP/oa.json 'j["err_key"]["status"]')" = 401 ]
    else
        cat "$TMP/oa.err"; check "openai client ran" false
    fi
else
    echo "skip openai client: node or $SRC/node_modules/openai missing"
fi

# ---- bad requests: 400 naming the field, 404, 405, 413 -----------------------------------
bad() {  # NAME EXPECT_STATUS EXPECT_PARAM BODY [URL]
    local st
    st=$(http POST "${5:-$BASE/v1/completions}" "${AUTH[@]}" -H 'Content-Type: application/json' --data-binary "$4")
    check "$1 -> $2" [ "$st" = "$2" ]
    if [ "$2" != 413 ]; then
        check "$1 error.param = $3" [ "$(jget $TMP/body 'j["error"]["param"]')" = "$3" ]
        check "$1 error.type" [ "$(jget $TMP/body 'j["error"]["type"]')" = invalid_request_error ]
    fi
}
bad "malformed json" 400 None '{"prompt": "x",'
bad "not an object" 400 None '[1,2]'
bad "trailing garbage" 400 None '{"prompt":"x"} x'
bad "duplicate key" 400 None '{"prompt":"x","prompt":"y"}'
bad "prompt missing" 400 prompt '{"max_tokens":3}'
bad "prompt number" 400 prompt '{"prompt":5}'
bad "max_tokens string" 400 max_tokens '{"prompt":"x","max_tokens":"ten"}'
bad "max_tokens float" 400 max_tokens '{"prompt":"x","max_tokens":2.5}'
bad "max_tokens negative" 400 max_tokens '{"prompt":"x","max_tokens":-1}'
bad "max_tokens past context" 400 max_tokens '{"prompt":"x","max_tokens":16000000}'
bad "temperature range" 400 temperature '{"prompt":"x","temperature":3}'
bad "temperature type" 400 temperature '{"prompt":"x","temperature":"hot"}'
bad "top_p zero" 400 top_p '{"prompt":"x","top_p":0}'
bad "top_k type" 400 top_k '{"prompt":"x","top_k":1.5}'
bad "seed negative" 400 seed '{"prompt":"x","seed":-4}'
bad "stop type" 400 stop '{"prompt":"x","stop":[1]}'
bad "stop empty" 400 stop '{"prompt":"x","stop":""}'
bad "stream type" 400 stream '{"prompt":"x","stream":"yes"}'
bad "n=2 unsupported" 400 n '{"prompt":"x","n":2}'
bad "unknown field" 400 frobnicate '{"prompt":"x","frobnicate":1}'
bad "specdec.draft value" 400 specdec.draft '{"prompt":"x","specdec":{"draft":"magic"}}'
bad "specdec.block_size range" 400 specdec.block_size '{"prompt":"x","specdec":{"block_size":0}}'
bad "unknown model" 404 model '{"model":"gpt-9","prompt":"x"}'
check "unknown model code" [ "$(jget $TMP/body 'j["error"]["code"]')" = model_not_found ]
bad "model type" 400 model '{"model":7,"prompt":"x"}'
bad "invalid utf-8" 400 None $'{"prompt":"\xff\xfe"}'
bad "NUL escape" 400 None '{"prompt":"a\u0000b"}'
bad "deep nesting" 400 None "$(python3 -c 'print("["*2000 + "]"*2000)')"
bad "messages missing" 400 messages '{"max_tokens":3}' $BASE/v1/chat/completions
bad "messages empty" 400 messages '{"messages":[]}' $BASE/v1/chat/completions
bad "message not object" 400 'messages[0]' '{"messages":["hi"]}' $BASE/v1/chat/completions
bad "message role" 400 'messages[0].role' '{"messages":[{"role":"wizard","content":"x"}]}' $BASE/v1/chat/completions
bad "message content type" 400 'messages[1].content' '{"messages":[{"role":"user","content":"x"},{"role":"user","content":5}]}' $BASE/v1/chat/completions
bad "message image part" 400 'messages[0].content' '{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}' $BASE/v1/chat/completions
bad "message unknown key" 400 'messages[0]' '{"messages":[{"role":"user","content":"x","tool_calls":[]}]}' $BASE/v1/chat/completions
check "GET on completions -> 405" [ "$(http GET $BASE/v1/completions "${AUTH[@]}")" = 405 ]
check "unknown path -> 404" [ "$(http GET $BASE/v2/nothing "${AUTH[@]}")" = 404 ]
python3 -c 'print("{\"prompt\":\"" + "a"*10000 + "\"}")' >"$TMP/big.json"
check "oversized body -> 413" [ "$(http POST $BASE/v1/completions "${AUTH[@]}" --data-binary @"$TMP/big.json")" = 413 ]
check "oversized chunked body -> 413" [ "$(http POST $BASE/v1/completions "${AUTH[@]}" -H 'Transfer-Encoding: chunked' --data-binary @"$TMP/big.json")" = 413 ]
check "server alive after bad requests" [ "$(http GET $BASE/health)" = 200 ]

# ---- metrics ------------------------------------------------------------------------------
check "metrics 200" [ "$(http GET $BASE/metrics "${AUTH[@]}")" = 200 ]
check "metrics counts completions 200" grep -q '^specdec_requests_total{endpoint="/v1/completions",status="200"} [1-9]' "$TMP/body"
check "metrics counts 400s" grep -q '^specdec_requests_total{endpoint="/v1/completions",status="400"} [1-9]' "$TMP/body"
check "metrics tokens out" grep -q '^specdec_completion_tokens_total [1-9]' "$TMP/body"
check "metrics tokens in" grep -q '^specdec_prompt_tokens_total [1-9]' "$TMP/body"
check "metrics tok/s" grep -q '^specdec_decode_tokens_per_second [0-9]' "$TMP/body"
check "metrics: probe verdict passed" grep -q '^specdec_spec_probe_verdict 1$' "$TMP/body"
check "metrics: speculative rounds counted" grep -q '^specdec_spec_rounds_total [1-9]' "$TMP/body"
check "server never died" kill -0 "$PID_main"
finish
