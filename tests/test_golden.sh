#!/bin/bash
# test_golden.sh: outputs unchanged. For every CPU kernel level this machine runs, the output record
# of tests/golden/gen.sh (texts of classic and every drafter and sampling mode, and the drafters'
# counters) must equal the committed tests/data/golden/<level>.txt byte for byte. A level with no
# committed record is reported and skipped. `test_golden.sh --update` rewrites the records of the
# levels this machine runs (only when a change is meant to alter outputs: say so in its commit).
set -u
BIN=${SPECDEC_BIN:?}
SRC=${SPECDEC_SOURCE_DIR:?}
DIR=$SRC/tests/data/golden
T=$(mktemp -d /tmp/sdgold-XXXXXX)
trap 'rm -rf "$T"' EXIT
update=0; [ "${1:-}" = --update ] && update=1
fail=0; ran=0
for l in avx512 avx2 neon scalar; do
    if ! SPECDEC_SIMD=$l "$BIN" info -m "$SRC/models/qwen3-kernel" > /dev/null 2>&1; then
        echo "--   $l: not on this machine"; continue
    fi
    if ! bash "$SRC/tests/golden/gen.sh" "$BIN" $l "$T/$l.txt"; then echo "FAIL $l: gen.sh"; fail=1; continue; fi
    if [ $update = 1 ]; then mkdir -p "$DIR"; cp "$T/$l.txt" "$DIR/$l.txt"; echo "updated $l"; continue; fi
    if [ ! -f "$DIR/$l.txt" ]; then echo "--   $l: no committed record"; continue; fi
    ran=$((ran + 1))
    if cmp -s "$T/$l.txt" "$DIR/$l.txt"; then
        echo "ok   $l: $(grep -c '^### ' "$DIR/$l.txt") entries identical"
    else
        echo "FAIL $l: output differs from the committed record"
        diff "$DIR/$l.txt" "$T/$l.txt" | head -20
        fail=1
    fi
done
[ $update = 1 ] || [ $ran -ge 1 ] || { echo "FAIL: no level had a committed record"; fail=1; }
exit $fail
