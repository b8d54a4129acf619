#!/usr/bin/env bash
# setup.sh: install what building and running specdec needs on a fresh Debian machine (as root),
# then build it.
#   bash scripts/setup.sh            # Release build in build/
# Idempotent: packages already present are not reinstalled. The tools only the tests use are
# installed by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/apt_need.sh

need_pkg build-essential pkg-config libpcre2-dev libjansson-dev libutf8proc-dev libmicrohttpd-dev
need_cmd cmake cmake
need_cmd xz xz-utils   # the model tools unpack .xz parts (tools/train/reassemble.sh)
apt_install_needed
BUILD=${BUILD:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
