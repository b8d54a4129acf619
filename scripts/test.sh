#!/usr/bin/env bash
# test.sh: set up, build and run the whole test suite: a Release build, then the same tests
# under AddressSanitizer + UndefinedBehaviorSanitizer, plus the static CLI's check. Exit status is
# non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# test-only tools: jq reads the server's JSON in the server tests
command -v jq >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq >/dev/null; }
(cd build && ctest --output-on-failure -j2)
# the static CLI the training recipe carries to the GPU machine (tools/train/README.md)
cmake -S . -B build-static -DSPECDEC_STATIC=ON > /dev/null
cmake --build build-static -j2 --target specdec_cli > /dev/null
bash tests/static_cli_check.sh build-static/specdec build/specdec
if [ "${SPECDEC_SKIP_ASAN:-0}" != 1 ]; then
  BUILD=build-asan CMAKE_ARGS="-DSPECDEC_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo" bash scripts/setup.sh
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j2)
fi
