#!/usr/bin/env bash
# test_server_spec.sh: speculative decoding through `specdec serve` on a model with an MTP module
# (a generated random tiny Qwen3 + mtp.*): MTP is engaged by default once the exactness probe
# passes (on the CPU backend of the tests, --draft auto means mtp+ngram: server.h's srv_auto_draft),
# and for every drafter (mtp, mtp+ngram, ngram), block width (auto, 4), greedy and seeded sampling,
# streamed or not, the text equals classic `specdec run` byte for byte; the stats (tau,
# acceptance, probe verdict) are in the responses and in /metrics.
set -u
source "$(dirname "$0")/server/lib.sh"

MODEL=$(make_test_model tiny-mtp) || die "cannot make the MTP test model"
start_server spec "$MODEL" || die "server did not start"
BASE=http://127.0.0.1:$PORT_spec
AUTH=()
PROMPT="Hello world"
check "log: MTP with prompt lookup by default, probe passed" grep -q "speculative decoding by default with the mtp+ngram drafter: exactness probe passed" "$TMP/server-spec.log"
run_text "$TMP/run-greedy" -m "$MODEL" -p "$PROMPT" -n 24 --temp 0 || die "run failed"
run_text "$TMP/run-seeded" -m "$MODEL" -p "$PROMPT" -n 24 --temp 0.8 --top-p 0.9 --top-k 40 --seed 42 || die "run failed"

# default request: MTP with prompt lookup engaged, text == classic
http POST $BASE/v1/completions -d "{\"prompt\":\"$PROMPT\",\"max_tokens\":24,\"temperature\":0}" >/dev/null
jget "$TMP/body" 'j["choices"][0]["text"]' | python3 -c "import sys; sys.stdout.write(sys.stdin.read()[:-1])" >"$TMP/def"
check "default request text == run" same_file "$TMP/def" "$TMP/run-greedy"
check "default request speculated with mtp+ngram" [ "$(jget $TMP/body 'j["specdec"]["draft"], j["specdec"]["speculated"], j["specdec"]["probe"]')" = "mtp+ngram True 1" ]
check "stats: rounds, tau, acceptance" [ "$(jget $TMP/body '(lambda s: s["rounds"] > 0 and s["tau"] >= 1 and 0 <= s["acceptance"] <= 1 and s["drafted"] >= s["accepted"])(j["specdec"])')" = True ]

spec_matrix "mtp mtp+ngram ngram"

# chat through the default drafter == run of the ChatML prompt
CHAT_PROMPT=$'<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n'
run_text "$TMP/runchat" -m "$MODEL" -p "$CHAT_PROMPT" -n 24 --temp 0 || die "run failed"
http POST $BASE/v1/chat/completions -N -d '{"messages":[{"role":"user","content":"Hi there"}],"max_tokens":24,"temperature":0,"stream":true}' >/dev/null
sse_text "$TMP/body" >"$TMP/chat"
check "chat stream with mtp == run" same_file "$TMP/chat" "$TMP/runchat"

http GET $BASE/metrics >/dev/null
check "metrics: probe verdict 1" grep -q '^specdec_spec_probe_verdict 1$' "$TMP/body"
check "metrics: rounds" grep -q '^specdec_spec_rounds_total [1-9]' "$TMP/body"
check "metrics: drafted" grep -q '^specdec_spec_drafted_total [1-9]' "$TMP/body"
check "metrics: tau" grep -q '^specdec_spec_tau [1-9]' "$TMP/body"
check "metrics: acceptance" grep -q '^specdec_spec_acceptance [0-9]' "$TMP/body"
check "server alive" kill -0 "$PID_spec"
finish
