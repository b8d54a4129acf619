#!/usr/bin/env bash
# test_server_robust.sh: `specdec serve` under abuse, on loopback: header floods, clients that
# hang up mid-stream and mid-request (the next request must be answered promptly: the
# generation was cancelled), the per-request time limit, concurrent requests past the queue
# (503 + Retry-After), and a bounded, self-terminating load loop. Fails through the exit code.
set -u
source "$(dirname "$0")/server/lib.sh"
T0=$(date +%s)

SLOW=$(make_test_model slow) || die "cannot make the slow model"     # ~8 ms / token, 1 thread
TINY=$(make_test_model tiny) || die "cannot make the tiny model"
start_server slow "$SLOW" --queue 1 || die "slow server did not start"
start_server limit "$SLOW" --timeout-s 1 || die "time-limited server did not start"
start_server tiny "$TINY" --queue 8 || die "tiny server did not start"
S=http://127.0.0.1:$PORT_slow
Q=http://127.0.0.1:$PORT_tiny
L=http://127.0.0.1:$PORT_limit
LONG='"max_tokens":900,"temperature":0,"specdec":{"ignore_eos":true}'
now_ms() { date +%s%3N; }
alive() { [ "$(http GET $1/health)" = 200 ]; }

# ---- header floods --------------------------------------------------------------------------
hdrs=(); for i in $(seq 1 300); do hdrs+=(-H "X-Flood-$i: $(printf 'v%.0s' $(seq 1 200))"); done
st=$(http GET $S/health "${hdrs[@]}")
check "300 x 200-byte headers -> 4xx ($st)" [ "${st:0:1}" = 4 ]
st=$(http GET $S/health -H "X-Huge: $(head -c 100000 /dev/zero | tr '\0' a)")
check "one 100 KB header -> 4xx ($st)" [ "${st:0:1}" = 4 ]
st=$(python3 - "$PORT_slow" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
try:
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
    for i in range(5000): s.sendall(b"X-%d: y\r\n" % i)
    s.sendall(b"\r\n")
except OSError:
    pass                     # the server may close on us mid-flood: that is fine
try:
    print(s.recv(64).split(b" ")[1].decode())
except Exception:
    print("closed")
EOF
)
check "5000 headers on a raw socket -> 4xx or closed ($st)" [ "${st:0:1}" = 4 -o "$st" = closed ]
check "alive after header floods" alive $S

# ---- client hangs up mid-stream / mid-request -----------------------------------------------
curl -s -N --max-time 0.7 -o "$TMP/partial" $S/v1/completions -d "{\"prompt\":\"Once\",\"stream\":true,$LONG}"
check "the stream had started" grep -q '^data: {' "$TMP/partial"
# answered_after WHAT: the next short request gets 200, promptly, after the hangup WHAT
answered_after() {
    local t st dt
    t=$(now_ms)
    st=$(http POST $S/v1/completions -d '{"prompt":"Hi","max_tokens":4,"temperature":0}')
    dt=$(( $(now_ms) - t ))
    check "next request answered 200 after a $1 hangup ($st)" [ "$st" = 200 ]
    check "... promptly (${dt} ms < 1500)" [ "$dt" -lt 1500 ]
}
answered_after mid-stream
curl -s --max-time 0.7 -o /dev/null $S/v1/completions -d "{\"prompt\":\"Once\",$LONG}"
answered_after non-streaming
http GET $S/metrics >/dev/null
check "metrics count the cancellations" grep -q '^specdec_cancelled_total [2-9]' "$TMP/body"

# ---- per-request time limit (--timeout-s 1) -------------------------------------------------
t=$(now_ms)
st=$(http POST $L/v1/completions -d "{\"prompt\":\"Once\",$LONG}")
dt=$(( $(now_ms) - t ))
check "timed-out request still answers 200 ($st)" [ "$st" = 200 ]
check "... within the limit (${dt} ms < 2000)" [ "$dt" -lt 2000 ]
check "... with finish_reason length and specdec.timed_out" [ "$(jget $TMP/body 'j["choices"][0]["finish_reason"], j["specdec"]["timed_out"], j["usage"]["completion_tokens"] < 900')" = "length True True" ]

# ---- concurrent requests past the queue (1 running + 1 queued) ------------------------------
qpids=()
for i in $(seq 1 6); do
    curl -s -D "$TMP/q$i.h" -o "$TMP/q$i.b" -w '%{http_code}\n' --max-time 20 $S/v1/completions \
        -d '{"prompt":"Hi","max_tokens":60,"temperature":0,"specdec":{"ignore_eos":true}}' >"$TMP/q$i.st" &
    qpids+=($!)
done
wait "${qpids[@]}"     # not a bare wait: the servers are children of this shell too
n200=$(cat "$TMP"/q*.st | grep -c '^200$'); n503=$(cat "$TMP"/q*.st | grep -c '^503$')
check "queue overflow: some 200 ($n200) and some 503 ($n503), nothing else" [ "$n200" -ge 1 -a "$n503" -ge 1 -a $((n200 + n503)) = 6 ]
r=$(grep -l '^503$' "$TMP"/q*.st | head -1); r=${r%.st}
check "503 carries Retry-After" grep -qi '^Retry-After: [0-9]' "$r.h"
check "503 is an OpenAI error" [ "$(jget $r.b 'j["error"]["code"]')" = server_busy ]
check "alive after the queue overflow" alive $S

# ---- chat templates we cannot render are refused clearly; completions still work -------------
for kind in none llama; do
    d=$TMP/model-tpl-$kind; mkdir -p "$d"; cp "$TINY"/config.json "$TINY"/model.safetensors "$TINY"/tokenizer.json "$d"/
    python3 - "$d/tokenizer_config.json" "$kind" <<'PYEOF'
import json, sys
cfg = {"eos_token": "<|im_end|>"}
if sys.argv[2] == "llama":
    cfg["chat_template"] = "{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}"
json.dump(cfg, open(sys.argv[1], "w"))
PYEOF
    start_server tpl$kind "$d" || die "template server did not start"
    eval "TP=\$PORT_tpl$kind"
    st=$(http POST http://127.0.0.1:$TP/v1/chat/completions -d '{"messages":[{"role":"user","content":"x"}]}')
    check "chat template $kind -> 400 unsupported_chat_template" [ "$st $(jget $TMP/body 'j["error"]["code"]')" = "400 unsupported_chat_template" ]
    check "chat template $kind: message names the problem" grep -q "chat_template" "$TMP/body"
    check "chat template $kind: completions still 200" [ "$(http POST http://127.0.0.1:$TP/v1/completions -d '{"prompt":"x","max_tokens":2}')" = 200 ]
done

# ---- bounded load loop: 200 requests, 4 in parallel, hard limit 40 s -------------------------
req() {  # one request; prints its status (000 = transport failure)
    local i=$1 body
    if [ $((i % 3)) = 0 ]; then
        body="{\"messages\":[{\"role\":\"user\",\"content\":\"load $i\"}],\"max_tokens\":6,\"temperature\":0.7,\"seed\":$i,\"stream\":$([ $((i % 2)) = 0 ] && echo true || echo false)}"
        curl -s -o /dev/null -w '%{http_code}\n' --max-time 10 "$Q/v1/chat/completions" -d "$body"
    else
        body="{\"prompt\":\"load $i\",\"max_tokens\":6,\"temperature\":0,\"stream\":$([ $((i % 2)) = 0 ] && echo true || echo false)}"
        curl -s -o /dev/null -w '%{http_code}\n' --max-time 10 "$Q/v1/completions" -d "$body"
    fi
}
export -f req; export Q
t=$(now_ms)
seq 1 200 | timeout 40 xargs -P 4 -I{} bash -c 'req {}' >"$TMP/load.st"
load_rc=$?
dt=$(( $(now_ms) - t ))
sent=200; answered=$(grep -c '^200$' "$TMP/load.st"); failed=$((sent - answered))
echo "load loop: sent $sent, answered $answered, failed $failed (statuses: $(sort "$TMP/load.st" | uniq -c | tr '\n' ' ')), ${dt} ms"
check "load loop finished in time (rc $load_rc)" [ "$load_rc" = 0 ]
check "load loop: all 200 answered" [ "$answered" = 200 ]
http GET $Q/metrics >/dev/null
check "metrics saw the load" [ "$(sed -n 's/^specdec_generations_total //p' "$TMP/body")" -ge 200 ]
check "all servers alive" kill -0 "$PID_slow" "$PID_tiny" "$PID_limit"

# ---- shutdown mid-generation: an error (503 / in-band), never a "length" completion ---------
for mode in plain stream; do
    start_server "down_$mode" "$SLOW" || die "server for the shutdown test did not start"
    eval "DP=\$PORT_down_$mode; DPID=\$PID_down_$mode"
    body='{"prompt":"x",'"$LONG"'}'; [ $mode = stream ] && body='{"prompt":"x","stream":true,'"$LONG"'}'
    curl -s -N -o "$TMP/down.body" -w '%{http_code}' --max-time 30 "http://127.0.0.1:$DP/v1/completions" -d "$body" >"$TMP/down.st" &
    CPID=$!
    sleep 0.8
    kill -TERM "$DPID"
    wait "$CPID"
    wait "$DPID"; drc=$?
    if [ $mode = plain ]; then
        check "shutdown mid-generation -> 503 ($(cat "$TMP/down.st"))" [ "$(cat "$TMP/down.st")" = 503 ]
    else
        check "shutdown mid-stream -> an in-band error event" grep -q '^data: {"error"' "$TMP/down.body"
        check "shutdown mid-stream -> no finish_reason" bash -c "! grep -q '\"finish_reason\":\"' $TMP/down.body"
    fi
    check "shutdown ($mode): the message says so" grep -q "shut down during the generation" "$TMP/down.body"
    check "shutdown ($mode): the server exited 0 ($drc)" [ "$drc" = 0 ]
done
echo "elapsed $(( $(date +%s) - T0 )) s"
finish
