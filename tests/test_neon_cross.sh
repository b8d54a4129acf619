#!/bin/bash
# test_neon_cross.sh: ctest entry for the NEON kernels on x86. Runs tests/cross/run_neon_tests.sh
# (test_ops cross-built for aarch64, run under qemu-aarch64) when the cross tools are installed,
# and fails when that fails. When they are absent it prints "cross tools absent: NEON not
# checked" and exits 77, which ctest reports as skipped (scripts/setup.sh should install
# gcc-aarch64-linux-gnu, libc6-dev-arm64-cross and qemu-user so CI always runs it).
# On an aarch64 host the native test_ops already tests the neon level.
set -u
SRC=${SPECDEC_SOURCE_DIR:?}
case "$(uname -m)" in
aarch64 | arm64) echo "native aarch64: the neon level is checked by test_ops itself"; exit 77 ;;
esac
missing=""
for tool in aarch64-linux-gnu-gcc aarch64-linux-gnu-objdump qemu-aarch64; do
    command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
[ -d /usr/aarch64-linux-gnu/lib ] || missing="$missing /usr/aarch64-linux-gnu/lib(libc6-dev-arm64-cross)"
if [ -n "$missing" ]; then
    echo "cross tools absent:$missing: NEON not checked"
    exit 77   # ctest: skipped (SKIP_RETURN_CODE), never a silent pass
fi
exec bash "$SRC/tests/cross/run_neon_tests.sh"
