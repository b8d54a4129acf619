#!/usr/bin/env bash
# test_server_limits.sh: every documented limit of `specdec serve` (tools/server/README.md,
# "Limits"), set below its default on the real binary over loopback: each is enforced with its
# HTTP status and a JSON error naming the limit, a request inside it is served, and the server
# keeps serving afterwards. Fails through the exit code.
set -u
source "$(dirname "$0")/server/lib.sh"
command -v jq >/dev/null || die "jq is needed (scripts/test.sh installs it)"
MODEL=$SRC/models/qwen3-kernel
[ -f "$MODEL/model.safetensors" ] || die "no embedded model at $MODEL"
start_server a "$MODEL" --ctx 64 --max-tokens 8 --max-body 2048 --max-header-bytes 2048 --idle-timeout-s 1 \
    || die "server a did not start"
start_server q "$MODEL" --queue 1 || die "server q did not start"
# server t decodes slowly on purpose (f32, 1 thread, no drafter in its requests): its requests
# must outlast a second on any machine (the context is 1024 tokens: at int8 with a drafter a fast
# CPU writes them in half a second)
start_server t "$MODEL" --timeout-s 1 --queue 4 --precision f32 --threads 1 || die "server t did not start"
A=http://127.0.0.1:$PORT_a
Q=http://127.0.0.1:$PORT_q
T=http://127.0.0.1:$PORT_t
alive() { [ "$(http GET $1/health)" = 200 ]; }
# err_is STATUS CODE PATTERN: the last answer had this status, error.code and a message matching PATTERN
err_is() {
    local st=$1 code=$2 pat=$3
    [ "$ST" = "$st" ] || { echo "  status $ST, expected $st"; return 1; }
    jq -e --arg c "$code" '.error.code == $c and (.error.message|type) == "string" and .error.type != null' "$TMP/body" >/dev/null \
        || { echo "  body: $(head -c 300 "$TMP/body")"; return 1; }
    jq -r .error.message "$TMP/body" | grep -q -- "$pat" || { echo "  message: $(jq -r .error.message "$TMP/body")"; return 1; }
}

# ---- context length (--ctx 64) ----------------------------------------------------------
long=$(printf 'int x%d = %d; ' $(seq 1 40 | awk '{print $1, $1}'))
ST=$(http POST $A/v1/completions -d "{\"prompt\":\"$long\",\"max_tokens\":4}")
check "prompt over --ctx -> 400 context_length_exceeded ($ST)" err_is 400 context_length_exceeded "maximum context length is 64 tokens; the prompt has [0-9]* tokens (--ctx)"
ST=$(http POST $A/v1/completions -d '{"prompt":"static int","max_tokens":8,"temperature":0}')
check "a short prompt inside --ctx is served ($ST)" [ "$ST" = 200 ]

# ---- tokens per request (--max-tokens 8) ---------------------------------------------------
ST=$(http POST $A/v1/completions -d '{"prompt":"static int","max_tokens":9}')
check "max_tokens 9 over --max-tokens 8 -> 400 max_tokens_exceeded ($ST)" err_is 400 max_tokens_exceeded "at most 8"
check "... naming the field" [ "$(jq -r .error.param "$TMP/body")" = max_tokens ]
ST=$(http POST $A/v1/chat/completions -d '{"messages":[{"role":"user","content":"hi"}],"temperature":0,"specdec":{"ignore_eos":true}}')
check "chat without max_tokens is served ($ST)" [ "$ST" = 200 ]
check "... and stops at --max-tokens (8 tokens, length)" [ "$(jq -r '"\(.usage.completion_tokens) \(.choices[0].finish_reason)"' "$TMP/body")" = "8 length" ]

# ---- body size (--max-body 2048) ----------------------------------------------------------
pad=$(head -c 2100 /dev/zero | tr '\0' a)
ST=$(http POST $A/v1/completions -d "{\"prompt\":\"$pad\"}")
check "a 2.1 KB body over --max-body 2048 -> 413 body_too_large ($ST)" err_is 413 body_too_large "larger than 2048 bytes"
ST=$(http POST $A/v1/completions -H 'Transfer-Encoding: chunked' -d "{\"prompt\":\"$pad\"}")
check "... also when chunked, without Content-Length ($ST)" err_is 413 body_too_large "larger than 2048 bytes"
pad=$(head -c 1900 /dev/zero | tr '\0' a)
ST=$(http POST $A/v1/completions -d "{\"prompt\":\"$pad\",\"max_tokens\":1}")
check "a body under --max-body reaches the parser (the prompt is over --ctx: 400, not 413) ($ST)" err_is 400 context_length_exceeded "context length"

# ---- header size (--max-header-bytes 2048) -------------------------------------------------
ST=$(http GET $A/health -H "X-Big: $(head -c 3000 /dev/zero | tr '\0' b)")
check "3 KB of headers over --max-header-bytes 2048 -> 431 headers_too_large ($ST)" err_is 431 headers_too_large "at most 2048"
ST=$(http GET $A/health -H "X-Small: $(head -c 1000 /dev/zero | tr '\0' b)")
check "1 KB of headers is served ($ST)" [ "$ST" = 200 ]
printf 'X-Huge: %s\r\n' "$(head -c 200000 /dev/zero | tr '\0' b)" >"$TMP/huge.h"
ST=$(http GET $A/health -H @"$TMP/huge.h")
check "200 KB of headers (past the connection pool) -> 431 from libmicrohttpd ($ST)" [ "$ST" = 431 ]

# ---- idle connection (--idle-timeout-s 1) --------------------------------------------------
exec 3<>/dev/tcp/127.0.0.1/$PORT_a
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\n' >&3      # ... and nothing more
t0=$(date +%s%3N)
timeout 5 cat <&3 >/dev/null; rc=$?
dt=$(( $(date +%s%3N) - t0 ))
exec 3<&-
check "a connection idle mid-request is closed by --idle-timeout-s 1 (rc $rc, ${dt} ms in 700..3000)" \
    [ "$rc" = 0 -a "$dt" -ge 700 -a "$dt" -lt 3000 ]
check "server a alive after all of it" alive $A

# prompt + max_tokens past the context (the model's 1024 on server q)
ST=$(http POST $Q/v1/completions -d '{"prompt":"static int x = 1; static int y = 2;","max_tokens":1020}')
check "prompt + max_tokens over the context -> 400 context_length_exceeded ($ST)" err_is 400 context_length_exceeded "max_tokens is 1020 (--ctx)"
check "... naming max_tokens" [ "$(jq -r .error.param "$TMP/body")" = max_tokens ]

# ---- pending requests (--queue 1) ----------------------------------------------------------
# 300 tokens each, so the first is still running when the fifth arrives even on a quiet machine
for i in 1 2 3 4 5; do
    curl -s -D "$TMP/qh$i" -o "$TMP/qb$i" -w '%{http_code}\n' --max-time 60 $Q/v1/completions \
        -d '{"prompt":"static int","max_tokens":300,"temperature":0,"specdec":{"ignore_eos":true}}' >"$TMP/qs$i" &
    pids+=($!)
    sleep 0.02
done
wait "${pids[@]}"
n200=$(cat "$TMP"/qs* | grep -c '^200$'); n503=$(cat "$TMP"/qs* | grep -c '^503$')
check "5 at once past --queue 1: 2 served, 3 refused with 503 ($n200, $n503)" [ "$n200" = 2 -a "$n503" = 3 ]
for i in 1 2 3 4 5; do
    if grep -q '^503$' "$TMP/qs$i"; then cp "$TMP/qb$i" "$TMP/body"; h=$TMP/qh$i; break; fi
done
ST=503
check "the 503 says server_busy and names --queue" err_is 503 server_busy "queue 1"
check "... with Retry-After" grep -qi '^retry-after: 1' "$h"
check "server q serves again once the queue drains" [ "$(http POST $Q/v1/completions -d '{"prompt":"a","max_tokens":2}')" = 200 ]

# ---- time per request (--timeout-s 1) ------------------------------------------------------
# five long requests at once (1000 tokens, classic, on server t: several seconds), sent by one curl
# in parallel so they arrive within a millisecond or two: the first runs until its second is up
# and stops at the next step; the later ones wait in the queue past their own second (504),
# except perhaps one that starts just in time (requests sent by five curl processes arrived a few
# ms apart, and each then started just before its own deadline and ran a step)
t0=$(date +%s%3N)
body='{"prompt":"static int","max_tokens":1000,"temperature":0,"specdec":{"ignore_eos":true,"draft":"none"}}'
args=()
for i in 1 2 3 4 5; do
    [ $i -gt 1 ] && args+=(--next)
    args+=(-s --max-time 30 -o "$TMP/t$i" -w "%{http_code} $i\n" -d "$body" $T/v1/completions)
done
curl -Z --parallel-immediate "${args[@]}" > "$TMP/tcodes"
for i in 1 2 3 4 5; do awk -v i=$i '$2 == i { print $1 }' "$TMP/tcodes" > "$TMP/t${i}s"; done
dt=$(( $(date +%s%3N) - t0 ))
n_len=0; n_504=0; n_other=0
for i in 1 2 3 4 5; do
    st=$(cat "$TMP/t${i}s")
    if [ "$st" = 200 ] && [ "$(jq -r '"\(.choices[0].finish_reason) \(.specdec.timed_out) \(.usage.completion_tokens < 1000)"' "$TMP/t$i")" = "length true true" ]; then
        n_len=$((n_len + 1))
    elif [ "$st" = 504 ]; then n_504=$((n_504 + 1)); cp "$TMP/t$i" "$TMP/body"
    else n_other=$((n_other + 1)); echo "  request $i: $st $(head -c 200 "$TMP/t$i")"; fi
done
check "past --timeout-s 1: stopped generations (200, length, timed_out: $n_len) and queued ones 504 ($n_504), nothing else" \
    [ "$n_len" -ge 1 -a "$n_504" -ge 1 -a "$n_other" = 0 ]
ST=504
check "the 504 says timeout and names --timeout-s" err_is 504 timeout "timeout-s 1"
check "... all answered within the limit and a few steps (${dt} ms < 3000)" [ "$dt" -lt 3000 ]
check "server t alive" alive $T
finish
