#!/usr/bin/env bash
# gpu_deps.sh: gather the headers and static archives of PCRE2, Jansson and utf8proc from this
# machine's Debian packages into .dev/deps (ignored by git), so the GPU machine, which cannot
# install packages, builds specdec with them (cmake -DSPECDEC_DEPS_PREFIX=.dev/deps; scripts/gpu.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
D=.dev/deps
rm -rf "$D"; mkdir -p "$D/include" "$D/lib"
for pkg in libpcre2-dev libjansson-dev libutf8proc-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || { echo "gpu_deps.sh: $pkg is not installed (bash scripts/setup.sh)" >&2; exit 1; }
done
cp /usr/include/pcre2.h /usr/include/jansson.h /usr/include/jansson_config.h /usr/include/utf8proc.h "$D/include/"
for l in pcre2-8 jansson utf8proc; do cp "/usr/lib/$(gcc -dumpmachine)/lib$l.a" "$D/lib/"; done
du -sh "$D"
