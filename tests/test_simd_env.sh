#!/bin/bash
# test_simd_env.sh: SPECDEC_SIMD picks a SIMD level by hand; every level this machine runs must
# generate exactly the default level's text (greedy, classic and speculative), and the level named
# must be the one used (a wrong-level name is refused: test_cli_errors.sh).
set -u
BIN=${SPECDEC_BIN:?}
SRC=${SPECDEC_SOURCE_DIR:?}
MODEL=$SRC/models/qwen3-kernel
T=$(mktemp -d /tmp/sdsimd-XXXXXX)
trap 'rm -rf "$T"' EXIT
P=$'// FILE: fs/x.c\n#include <linux/fs.h>\n\nstatic int'
fail=0; ran=0
"$BIN" run -m "$MODEL" -n 24 --threads 2 -p "$P" > "$T/default" 2> /dev/null || { echo "FAIL: default run"; exit 1; }
"$BIN" run -m "$MODEL" -n 24 --threads 2 --draft mtp -p "$P" > "$T/default_mtp" 2> /dev/null || { echo "FAIL: default mtp run"; exit 1; }
for l in avx512 avx2 neon portable scalar; do
  if ! SPECDEC_SIMD=$l "$BIN" run -m "$MODEL" -n 24 --threads 2 -p "$P" > "$T/$l" 2> "$T/$l.err"; then
    grep -q "SPECDEC_SIMD=$l: not a SIMD level this machine runs" "$T/$l.err" || { echo "FAIL $l: unexpected error:"; cat "$T/$l.err"; fail=1; }
    echo "--   $l: not on this machine"
    continue
  fi
  ran=$((ran + 1))
  k=$(SPECDEC_SIMD=$l "$BIN" info -m "$MODEL" | sed -n 's/^cpu kernels: *\([a-z0-9]*\).*/\1/p')
  want=$l; [ $l = portable ] && want=scalar   # one portable C level, two names
  [ "$k" = "$want" ] || { echo "FAIL $l: info reports kernels '$k'"; fail=1; continue; }
  # portable/scalar are ~50x slower: classic only
  cmp -s "$T/$l" "$T/default" || { echo "FAIL $l: classic text differs from the default level's"; fail=1; continue; }
  if [ $l != portable ] && [ $l != scalar ]; then
    SPECDEC_SIMD=$l "$BIN" run -m "$MODEL" -n 24 --threads 2 --draft mtp -p "$P" > "$T/$l.mtp" 2> /dev/null
    cmp -s "$T/$l.mtp" "$T/default_mtp" || { echo "FAIL $l: mtp text differs from the default level's"; fail=1; continue; }
  fi
  echo "ok   $l: same text as the default level"
done
[ $ran -ge 2 ] || { echo "FAIL: fewer than 2 levels ran"; fail=1; }
exit $fail
