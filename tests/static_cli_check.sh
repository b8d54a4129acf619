#!/usr/bin/env bash
# static_cli_check.sh STATIC_SPECDEC DYNAMIC_SPECDEC: the static CLI (cmake -DSPECDEC_STATIC=ON),
# which the training recipe carries to the GPU machine, must be fully static and must quantize and
# inflate and generate exactly as the normal build does.
# (Not named test_*.sh: scripts/test.sh runs it with two binaries; ctest does not pick it up.)
set -euo pipefail
S=$1 D=$2
cd "$(dirname "$0")/.."
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
if ldd "$S" > "$T/ldd" 2>&1; then
  grep -q "not a dynamic executable\|statically linked" "$T/ldd" || { echo "FAIL: $S links shared libraries:"; cat "$T/ldd"; exit 1; }
fi
"$S" quantize tests/fixtures/tiny-bf16 "$T/qs" --bits 4 --group-size 64 > /dev/null 2>&1
"$D" quantize tests/fixtures/tiny-bf16 "$T/qd" --bits 4 --group-size 64 > /dev/null 2>&1
cmp "$T/qs/model.safetensors" "$T/qd/model.safetensors" || { echo "FAIL: static and dynamic quantize differ"; exit 1; }
cmp "$T/qs/config.json" "$T/qd/config.json" || { echo "FAIL: static and dynamic config.json differ"; exit 1; }
# inflation runs there too (the at-scale models are made on the GPU machine)
"$S" inflate tests/fixtures/tiny-bf16 "$T/is" --hidden 192 --layers 3 --heads 8 --quiet > /dev/null 2>&1
"$D" inflate tests/fixtures/tiny-bf16 "$T/id" --hidden 192 --layers 3 --heads 8 --quiet > /dev/null 2>&1
cmp "$T/is/model.safetensors" "$T/id/model.safetensors" || { echo "FAIL: static and dynamic inflate differ"; exit 1; }
P=$'int main(void)\n{'
M=models/qwen3-kernel   # the fixtures have no tokenizer; the embedded model has one and a drafter
"$S" run -m $M -n 24 --draft mtp -p "$P" > "$T/os" 2> "$T/es" || { echo "FAIL: static run:"; cat "$T/es"; exit 1; }
"$D" run -m $M -n 24 --draft mtp -p "$P" > "$T/od" 2> /dev/null
[ -s "$T/os" ] || { echo "FAIL: static run wrote nothing"; exit 1; }
cmp "$T/os" "$T/od" || { echo "FAIL: static and dynamic run outputs differ"; exit 1; }
echo "static CLI ok: fully static, quantize, inflate and run byte-identical to the normal build"
