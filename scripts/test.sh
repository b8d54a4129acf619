#!/usr/bin/env bash
# test.sh: set up, build and run the whole test suite: a Release build, then the same tests
# under AddressSanitizer + UndefinedBehaviorSanitizer, plus the static CLI's check. Exit status is
# non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# test-only tools: clang with libFuzzer (scripts/fuzz.sh), valgrind (tests/test_leaks.sh)
need=()
for pkg in clang libclang-rt-dev valgrind; do dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg"); done
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
(cd build && ctest --output-on-failure -j2)
# every parser's libFuzzer target for a bounded time (10 s each; `bash scripts/fuzz.sh 600` for a campaign)
bash scripts/fuzz.sh "${SPECDEC_FUZZ_SECONDS:-10}"
# the static CLI the training recipe carries to the GPU machine (tools/train/README.md)
cmake -S . -B build-static -DSPECDEC_STATIC=ON > /dev/null
cmake --build build-static -j2 --target specdec_cli > /dev/null
bash tests/static_cli_check.sh build-static/specdec build/specdec
if [ "${SPECDEC_SKIP_ASAN:-0}" != 1 ]; then
  BUILD=build-asan CMAKE_ARGS="-DSPECDEC_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo" bash scripts/setup.sh
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j2)
fi
