#!/bin/bash
# test_simd_env.sh: SPECDEC_SIMD picks the CPU kernel level by hand. For every level this machine
# runs: `info` reports that level, and speculative decoding (mtp, greedy) gives exactly the
# classic text of the same level. Levels sum in different orders, so the text of two levels is
# compared for information only (a near-tie may flip between them). With int8 activations
# (--precision int8) every level computes the same recipe bit for bit (src/cpu/ops_i8.h), so there
# the text of every level must equal the portable C level's, and speculative == classic for the MTP,
# n-gram and draft-model drafters at both precisions. A name the machine cannot run is refused (test_cli_errors.sh).
. "$(dirname "$0")/cli_lib.sh"
MODEL=$M
P=$'// FILE: fs/x.c\n#include <linux/fs.h>\n\nstatic int'
fail=0; ran=0
"$BIN" run -m "$MODEL" -n 24 --threads 2 -p "$P" > "$T/default" 2> /dev/null || { echo "FAIL: default run"; exit 1; }
for l in avx512 avx2 neon portable scalar; do
  if ! SPECDEC_SIMD=$l "$BIN" info -m "$MODEL" > "$T/$l.info" 2> "$T/$l.err"; then
    grep -q "SPECDEC_SIMD=$l: not a SIMD level this machine runs" "$T/$l.err" || { echo "FAIL $l: unexpected error:"; cat "$T/$l.err"; fail=1; }
    echo "--   $l: not on this machine"
    continue
  fi
  ran=$((ran + 1))
  k=$(sed -n 's/^cpu kernels: *\([a-z0-9]*\).*/\1/p' "$T/$l.info")
  want=$l; [ $l = portable ] && want=scalar   # one portable C level, two names
  [ "$k" = "$want" ] || { echo "FAIL $l: info reports kernels '$k'"; fail=1; continue; }
  n=24; [ $l = portable ] || [ $l = scalar ] && n=8   # the portable C level is ~50x slower
  SPECDEC_SIMD=$l "$BIN" run -m "$MODEL" -n $n --threads 2 -p "$P" > "$T/$l" 2> /dev/null || { echo "FAIL $l: classic run"; fail=1; continue; }
  SPECDEC_SIMD=$l "$BIN" run -m "$MODEL" -n $n --threads 2 --draft mtp --block-size 3 -p "$P" > "$T/$l.mtp" 2> /dev/null ||
    { echo "FAIL $l: mtp run"; fail=1; continue; }
  cmp -s "$T/$l.mtp" "$T/$l" || { echo "FAIL $l: mtp text differs from classic at the same level"; fail=1; continue; }
  for pr in f32 int8; do   # every drafter x precision: speculative == classic
    SPECDEC_SIMD=$l "$BIN" run -m "$MODEL" -n 8 --threads 2 --precision $pr -p "$P" > "$T/$l.$pr" 2> /dev/null ||
      { echo "FAIL $l $pr: classic run"; fail=1; continue; }
    for d in mtp ngram model; do   # model: the target drafting for itself through the draft-model drafter
      D=(--draft $d); [ $d = model ] && D=(--draft "model:$MODEL")
      SPECDEC_SIMD=$l "$BIN" run -m "$MODEL" -n 8 --threads 2 --precision $pr "${D[@]}" -p "$P" > "$T/$l.$pr.$d" 2> /dev/null ||
        { echo "FAIL $l $pr: $d run"; fail=1; continue; }
      cmp -s "$T/$l.$pr.$d" "$T/$l.$pr" || { echo "FAIL $l $pr: $d text differs from classic"; fail=1; }
    done
  done
  same="differs from"; [ $n = 24 ] && cmp -s "$T/$l" "$T/default" && same="same as"
  [ $n = 24 ] || same="(shorter run, not compared with)"
  echo "ok   $l: info reports it; mtp == classic; text $same the default level's"
done
[ $ran -ge 2 ] || { echo "FAIL: fewer than 2 levels ran"; fail=1; }
# int8: one recipe, the same bits at every level: the same text as the portable C level
for l in avx512 avx2 neon; do
  [ -f "$T/$l.int8" ] || continue
  cmp -s "$T/$l.int8" "$T/scalar.int8" || { echo "FAIL $l int8: text differs from the portable level's int8 text"; fail=1; continue; }
  echo "ok   $l int8: text == the portable level's int8 text"
done
exit $fail
