#!/bin/bash
# test_backend_sim.sh: the code above the backend interface, run the way a GPU runs it. The cpu-sim
# backend (src/backend/sim.c) has no host-visible memory and replays recorded op sequences by key,
# so a round that keeps a position, an id or a count on the host instead of in backend memory, or a
# recording that names a stale buffer, gives different text there. Every drafter and sampling mode
# must give the cpu backend's text byte for byte, the drafters' counters included (at a fixed block
# size: the auto width's rounds follow measured times), and replays must
# have happened (the recording is really exercised).
. "$(dirname "$0")/cli_lib.sh"
P=$(cat "$SRC/tests/golden/prompts/c-sound-02.txt")
S="--temp 0.8 --top-k 40 --seed 7"
fail=0; n=0
while IFS='|' read -r name args; do
    [ -z "$name" ] && continue
    for be in cpu cpu-sim; do
        # shellcheck disable=SC2086
        if ! "$BIN" run -m "$M" -p "$P" -n 40 --threads 2 --backend $be --stats-json "$T/$be.json" $args > "$T/$be.out" 2> "$T/$be.err"; then
            echo "FAIL $name ($be): exit status"; cat "$T/$be.err"; fail=1; continue 2
        fi
    done
    n=$((n + 1))
    cmp -s "$T/cpu.out" "$T/cpu-sim.out" || { echo "FAIL $name: cpu-sim text differs from cpu"; diff "$T/cpu.out" "$T/cpu-sim.out" | head -5; fail=1; continue; }
    # the auto width follows measured round times, which differ between the two backends, so its
    # rounds differ too: its text is compared, not its counters
    [ "$name" = "mtp auto" ] && { echo "ok   $name (text)"; continue; }
    for k in rounds drafted accepted; do
        a=$(sed -n "s/^  \"$k\": \([0-9]*\),/\1/p" "$T/cpu.json"); b=$(sed -n "s/^  \"$k\": \([0-9]*\),/\1/p" "$T/cpu-sim.json")
        [ "$a" = "$b" ] || { echo "FAIL $name: $k $a on cpu, $b on cpu-sim"; fail=1; }
    done
    echo "ok   $name"
done <<EOF
classic|
classic seeded|$S
classic seeded unfiltered|--temp 0.8 --seed 3
mtp k4|--draft mtp --block-size 4
mtp k6 full head|--draft mtp --block-size 6 --draft-vocab none
mtp auto|--draft mtp
mtp seeded k3|--draft mtp --block-size 3 --sampling seeded $S
mtp rejection k3|--draft mtp --block-size 3 --sampling rejection $S
ngram k4|--draft ngram --block-size 4
model k3|--draft model:$M --block-size 3
model seeded k3|--draft model:$M --block-size 3 --sampling seeded $S
EOF
[ $n -ge 10 ] || { echo "FAIL: only $n configurations ran"; fail=1; }
# the recording is exercised: run's [backend] line counts the recorded and replayed sequences
"$BIN" run -m "$M" -p "$P" -n 24 --threads 2 --backend cpu-sim --draft mtp --block-size 3 2> "$T/err" > /dev/null
grep -q "replayed [1-9]" "$T/err" || { echo "FAIL: no recorded sequence was replayed on cpu-sim"; cat "$T/err"; fail=1; }
exit $fail
