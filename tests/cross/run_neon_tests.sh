#!/bin/bash
# run_neon_tests.sh: build tests/test_ops.c for aarch64 with the cross compiler and run it under
# qemu's user-mode emulator, so the NEON kernels (src/cpu/ops_neon.c) are checked on an x86
# machine: against the scalar reference, and bit for bit across T = 1..64 and pool sizes 1..4.
# Sources: only what test_ops links against (the CPU ops, the pool, dtype/err utilities); the
# x86 kernel files are left out (ops_fast.c stubs them on non-x86). Flags as the library's own
# build: ISO C11 (no implicit FMA contraction), -O2, _GNU_SOURCE.
# Needs: gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user (qemu-aarch64).
# Env: CC_AARCH64 (default aarch64-linux-gnu-gcc), QEMU (default qemu-aarch64), SYSROOT (default
#      /usr/aarch64-linux-gnu), SD_TEST_SEED (replay a seed), KEEP=1 keeps the build dir,
#      EXTRA_CFLAGS (e.g. "-fsanitize=address,undefined -fno-sanitize-recover=undefined", with
#      ASAN_OPTIONS=detect_leaks=0: LeakSanitizer cannot run under qemu-user).
# Exit 0 only when the binary ran, selected "neon" as its fast level, tested the neon level
# and reported no failure.
set -u
ROOT=${SPECDEC_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
CC=${CC_AARCH64:-aarch64-linux-gnu-gcc}
QEMU=${QEMU:-qemu-aarch64}
SYSROOT=${SYSROOT:-/usr/aarch64-linux-gnu}
for tool in "$CC" "$QEMU"; do
    command -v "$tool" >/dev/null 2>&1 || { echo "run_neon_tests: $tool not found" >&2; exit 2; }
done
B=$(mktemp -d /tmp/sdneon-XXXXXX)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$B"' EXIT

cd "$ROOT" || exit 2
LIB="src/cpu/ops_fast.c src/cpu/ops_ref.c src/cpu/ops_neon.c src/cpu/ops_i8.c src/cpu/ops_i8_neon.c src/cpu/calibrate.c
     src/cpu/pool.c src/sample/sample.c src/sample/rng.c src/util/dtype.c src/util/err.c src/util/mem.c src/util/version.c tests/check.c"
SRCS="$LIB tests/test_ops.c"
CFLAGS="-std=c11 -O2 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -fno-strict-aliasing
        -Isrc -Iinclude -Itests -DSPECDEC_SOURCE_DIR_DEFAULT=\"$ROOT\" -DSPECDEC_VERSION_STRING=\"cross\" ${EXTRA_CFLAGS:-}"
echo "run_neon_tests: $CC $(echo $CFLAGS)"
# shellcheck disable=SC2086
if ! "$CC" $CFLAGS -o "$B/test_ops" $SRCS -lm -lpthread ${EXTRA_CFLAGS:-} 2>"$B/cc.log"; then
    cat "$B/cc.log" >&2; echo "run_neon_tests: FAIL: cross build failed" >&2; exit 1
fi
[ -s "$B/cc.log" ] && { echo "run_neon_tests: compiler warnings:" >&2; cat "$B/cc.log" >&2; }
# shellcheck disable=SC2086
if ! "$CC" $CFLAGS -DSD_I8_NO_BACKEND -o "$B/test_ops_i8" $LIB src/backend/tensor.c tests/test_ops_i8.c -lm -lpthread ${EXTRA_CFLAGS:-} 2>"$B/cc8.log"; then
    cat "$B/cc8.log" >&2; echo "run_neon_tests: FAIL: cross build of test_ops_i8 failed" >&2; exit 1
fi
if ! "${CC%gcc}objdump" -d "$B/test_ops_i8" 2>/dev/null | grep -q 'sdot'; then
    echo "run_neon_tests: FAIL: no sdot instruction in test_ops_i8" >&2; exit 1
fi
# the NEON kernels must really be in the binary (not the stub)
if ! "${CC%gcc}objdump" -d "$B/test_ops" 2>/dev/null | grep -q 'fmla'; then
    echo "run_neon_tests: FAIL: no fmla instruction in the binary" >&2; exit 1
fi

start=$(date +%s)
SPECDEC_SOURCE_DIR=$ROOT "$QEMU" -L "$SYSROOT" "$B/test_ops" >"$B/out.log" 2>&1
rc=$?
end=$(date +%s)
cat "$B/out.log"
echo "run_neon_tests: test_ops under $QEMU: exit $rc in $((end - start)) s"
fail=0
if [ $rc -ne 0 ]; then echo "run_neon_tests: FAIL: test_ops exited $rc" >&2; fail=1; fi
if ! grep -q 'fast level neon' "$B/out.log"; then
    echo "run_neon_tests: FAIL: sd_simd_name() is not \"neon\" under emulation" >&2; fail=1
fi
if ! grep -qx 'level neon' "$B/out.log"; then
    echo "run_neon_tests: FAIL: the neon level was not tested" >&2; fail=1
fi
SPECDEC_SOURCE_DIR=$ROOT "$QEMU" -L "$SYSROOT" "$B/test_ops_i8" >"$B/out8.log" 2>&1
rc8=$?
cat "$B/out8.log"
echo "run_neon_tests: test_ops_i8 under $QEMU: exit $rc8"
if [ $rc8 -ne 0 ]; then echo "run_neon_tests: FAIL: test_ops_i8 exited $rc8" >&2; fail=1; fi
if ! grep -qx 'level neon' "$B/out8.log"; then
    echo "run_neon_tests: FAIL: the neon int8 level was not tested" >&2; fail=1
fi
[ $fail -eq 0 ] && echo "run_neon_tests: PASS"
exit $fail
