#!/usr/bin/env bash
# plant_check.sh: shows that the safetensors fuzz target finds an out-of-bounds read in the
# parser within the CI budget, without the bug ever being committed. It copies
# src/io/safetensors.c into a temporary directory, plants one of these bugs there,
#   offsets  (default) the check that a tensor's data_offsets end inside the data section is
#            removed, so a tensor may point past the end of the file (read when bound);
#   header   the check that the header length fits in the file is removed, so the JSON parser
#            reads past the end of the file,
# builds the fuzz target against the planted copy and against the real file (clang, libFuzzer,
# ASan/UBSan), and runs each for SECONDS (default 10, fuzz.sh's CI budget per target) from the
# committed seed corpus. It passes only when the planted build reports an AddressSanitizer
# out-of-bounds read and the real one runs clean for the same time.
#   bash tests/fuzz/plant_check.sh [offsets|header] [SECONDS]
set -uo pipefail
cd "$(dirname "$0")/../.."
PLANT=${1:-offsets}
SECS=${2:-10}
command -v clang >/dev/null || { echo "plant_check: clang is not installed"; exit 1; }
TMP=$(mktemp -d /tmp/sdplant-XXXXXX)
trap 'rm -rf "$TMP"' EXIT

mkdir -p "$TMP/planted"
cp src/io/safetensors.c "$TMP/planted/safetensors.c"
case $PLANT in
  offsets) old='if ((uint64_t)e > f->data_len)'; new='if (0 /* planted: end past the data section */)' ;;
  header)  old='if (n > size - 8)'; new='if (0 /* planted: header length unchecked */)' ;;
  *) echo "plant_check: unknown plant '$PLANT' (offsets or header)"; exit 1 ;;
esac
grep -qF "$old" "$TMP/planted/safetensors.c" || { echo "plant_check: '$old' not found in src/io/safetensors.c"; exit 1; }
text=$(<src/io/safetensors.c)
printf '%s\n' "${text/"$old"/"$new"}" > "$TMP/planted/safetensors.c"
if cmp -s src/io/safetensors.c "$TMP/planted/safetensors.c"; then echo "plant_check: the plant did not apply"; exit 1; fi
echo "plant '$PLANT':"
diff src/io/safetensors.c "$TMP/planted/safetensors.c" | sed 's/^/  /'

# the target and the parts of the library the reader needs (errors, dtypes, paths)
flags=(-std=c11 -D_GNU_SOURCE -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=undefined -Iinclude -Isrc -Itests/fuzz)
libs=(src/util/err.c src/util/dtype.c src/util/path.c tests/fuzz/fuzz_safetensors.c $(pkg-config --cflags --libs jansson) -lm -lpthread)
clang "${flags[@]}" -o "$TMP/fuzz_planted" "$TMP/planted/safetensors.c" "${libs[@]}" || exit 1
clang "${flags[@]}" -o "$TMP/fuzz_real" src/io/safetensors.c "${libs[@]}" || exit 1

# run NAME: the target for SECS from a copy of the seed corpus; sets RC, TIME and EXECS
run() {
    mkdir -p "$TMP/corpus-$1" "$TMP/findings-$1"
    cp tests/fuzz/corpus/safetensors/* "$TMP/corpus-$1/"
    local t0=$(date +%s.%N)
    "$TMP/fuzz_$1" -dict=tests/fuzz/safetensors.dict -max_total_time="$SECS" -seed=1 -print_final_stats=1 \
        -artifact_prefix="$TMP/findings-$1/" "$TMP/corpus-$1" >"$TMP/$1.log" 2>&1
    RC=$?
    TIME=$(echo "$(date +%s.%N) - $t0" | bc)
    EXECS=$(grep -aoE 'stat::number_of_executed_units: [0-9]+' "$TMP/$1.log" | awk '{print $2}')
    [ -n "$EXECS" ] || EXECS=$(grep -aoE '^#[0-9]+' "$TMP/$1.log" | tail -1 | tr -d '#')
}

ok=1
run planted
if [ $RC -ne 0 ] && grep -aq "ERROR: AddressSanitizer: heap-buffer-overflow\|ERROR: AddressSanitizer: .*READ" "$TMP/planted.log"; then
    printf 'planted: found in %.1f s after %s executions: ' "$TIME" "${EXECS:-?}"
    grep -a -m1 -E "READ of size" "$TMP/planted.log"
    grep -a -m1 -E "^    #[0-9]+ .* in (parse_entry|parse_image|LLVMFuzzerTestOneInput|json_)" "$TMP/planted.log" | sed 's/^ */  at /'
else
    echo "FAIL planted: no out-of-bounds read reported in $SECS s (exit status $RC)"; tail -20 "$TMP/planted.log"; ok=0
fi
run real
if [ $RC -eq 0 ]; then
    printf 'real parser: clean for %s s, %s executions\n' "$SECS" "${EXECS:-?}"
else
    echo "FAIL real parser: a finding in $SECS s (exit status $RC)"; grep -aE "ERROR|SUMMARY" "$TMP/real.log" | head; ok=0
fi
[ $ok = 1 ]
