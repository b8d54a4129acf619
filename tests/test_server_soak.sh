#!/usr/bin/env bash
# test_server_soak.sh: a short soak of `specdec serve` on the embedded model, on loopback with the
# real binary: the load generator (tests/server/soak.c) sends a few hundred requests from several
# clients (greedy and seeded, streaming and not, hung up mid-stream, oversized, malformed JSON, bad
# HTTP, headers over the limit); every completion must equal `specdec run`'s text for the same
# prompt and settings, the server must stay up, free the slots of clients that left, and keep its
# resident memory flat.
# SOAK_REQUESTS / SOAK_CLIENTS / SOAK_N / SOAK_RSS_GROWTH_KB size it (scripts/server_soak.sh runs
# the long version); SOAK_REPORT names a file for the Markdown report. Fails through the exit code.
set -u
source "$(dirname "$0")/server/lib.sh"
MODEL=$SRC/models/qwen3-kernel
SOAK=$(dirname "$BIN")/server_soak
[ -x "$SOAK" ] || die "no load generator at $SOAK (built with the server)"
REQUESTS=${SOAK_REQUESTS:-250}
CLIENTS=${SOAK_CLIENTS:-4}
N=${SOAK_N:-4}
MAX_BODY=16384
# first half vs second half of the run; the server's allocations settle within the first requests
GROWTH_KB=${SOAK_RSS_GROWTH_KB:-8192}

# the expected texts: `specdec run` of each prompt, greedy and seeded (seed 1000 + prompt index)
mkdir -p "$TMP/exp"
cat >"$TMP/exp/prompts.txt" <<'PROMPTS'
static int
struct device *dev =
#include <linux/
	spin_lock_irqsave(&
return -EINVAL;
/* Copyright "quoted" \ back
PROMPTS
i=0
while IFS= read -r p; do
    "$BIN" run -m "$MODEL" --threads "$THREADS" -p "$p" -n "$N" --temp 0 2>/dev/null | head -c -1 >"$TMP/exp/greedy-$i.txt" \
        || die "run (greedy) failed for prompt $i"
    "$BIN" run -m "$MODEL" --threads "$THREADS" -p "$p" -n "$N" --temp 0.8 --top-p 0.95 --seed $((1000 + i)) 2>/dev/null \
        | head -c -1 >"$TMP/exp/seeded-$i.txt" || die "run (seeded) failed for prompt $i"
    i=$((i + 1))
done <"$TMP/exp/prompts.txt"

start_server soak "$MODEL" --queue $((CLIENTS * 2)) --max-body $MAX_BODY || die "server did not start"
"$SOAK" --port "$PORT_soak" --pid "$PID_soak" --expect "$TMP/exp" --clients "$CLIENTS" --requests "$REQUESTS" -n "$N" \
    --max-body $MAX_BODY --temp 0.8 --top-p 0.95 --seed-base 1000 --rss-growth-kb "$GROWTH_KB" >"$TMP/report.md"
rc=$?
cat "$TMP/report.md"
[ -n "${SOAK_REPORT:-}" ] && cp "$TMP/report.md" "$SOAK_REPORT"
check "soak: no wrong answer, no unexpected status, slots freed, memory flat (rc $rc)" [ "$rc" = 0 ]
check "soak: the server is still up" kill -0 "$PID_soak"
check "soak: no crash or sanitizer report in the server log" bash -c "! grep -q 'AddressSanitizer\|runtime error\|Segmentation' '$TMP/server-soak.log'"
finish
