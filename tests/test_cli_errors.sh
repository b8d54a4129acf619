#!/bin/bash
# test_cli_errors.sh: the bad-input matrix through the real CLI. Each case must exit non-zero
# (1, not a signal), print a message naming what is at fault, and write nothing to stdout.
set -u
BIN=${SPECDEC_BIN:?}
SRC=${SPECDEC_SOURCE_DIR:?}
T=$(mktemp -d /tmp/sdclierr-XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0; n=0
MODEL=$SRC/models/qwen3-kernel
FX=$SRC/tests/fixtures/tiny-bf16

# expect NAME PATTERN CMD...: non-zero exit below 128, stderr matching PATTERN, empty stdout
expect() {
    local name=$1 pat=$2; shift 2
    n=$((n + 1))
    "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    if [ $rc -eq 0 ] || [ $rc -ge 128 ]; then echo "FAIL $name: exit $rc"; cat "$T/err"; fail=$((fail + 1)); return; fi
    if ! grep -qE -- "$pat" "$T/err"; then echo "FAIL $name: message does not match /$pat/:"; cat "$T/err"; fail=$((fail + 1)); return; fi
    if [ -s "$T/out" ]; then echo "FAIL $name: wrote to stdout"; fail=$((fail + 1)); return; fi
    echo "ok   $name: $(head -c 200 "$T/err" | tr '\n' ' ')"
}

mk() { rm -rf "$T/$1"; mkdir -p "$T/$1"; cp "$FX/config.json" "$FX/model.safetensors" "$T/$1/"; }

mk trunc; head -c 100000 "$FX/model.safetensors" > "$T/trunc/model.safetensors"
expect "truncated safetensors" "model.safetensors" "$BIN" info -m "$T/trunc"
mk hdr; printf '\xff\xff\xff\x7f\x00\x00\x00\x00{}' > "$T/hdr/model.safetensors"
expect "header length past EOF" "model.safetensors.*header" "$BIN" info -m "$T/hdr"
mk mt; sed -i 's/"qwen3"/"llama"/' "$T/mt/config.json"
expect "unknown model_type" "model_type.*llama|llama.*model_type" "$BIN" info -m "$T/mt"
mk badjson; printf '{"model_type": "qwen3", "hidden_size": 12,,}' > "$T/badjson/config.json"
expect "malformed config.json" "config.json.*(line|column)" "$BIN" info -m "$T/badjson"
mk shape; sed -i 's/"hidden_size": 128/"hidden_size": 256/' "$T/shape/config.json"
expect "shape contradicting config" "shape" "$BIN" info -m "$T/shape"
mk nokey; python3 - "$T/nokey/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); del c["num_key_value_heads"]; json.dump(c, open(sys.argv[1], "w"))
PY
expect "missing config key" "num_key_value_heads" "$BIN" info -m "$T/nokey"
expect "missing directory" "$T/none" "$BIN" info -m "$T/none"
expect "invalid UTF-8 prompt" "UTF-8.*byte|byte.*UTF-8|offset" "$BIN" tokenize -m "$MODEL" -p $'abc\xff\xfedef'
expect "invalid UTF-8 prompt (run)" "UTF-8.*byte|byte.*UTF-8|offset" "$BIN" run -m "$MODEL" -p $'abc\xc3' -n 4
expect "prompt longer than the context" "context" "$BIN" run -m "$MODEL" --ctx 8 -n 4 -p "one two three four five six seven eight nine ten eleven twelve"
expect "bad -n" "-n" "$BIN" run -m "$MODEL" -p hi -n 12x
expect "bad --kv-dtype" "kv-dtype" "$BIN" run -m "$MODEL" -p hi --kv-dtype f8
expect "bad --precision" "--precision: 'fp8'" "$BIN" run -m "$MODEL" -p hi --precision fp8
expect "bad --batch" "--batch: '5000' is not an integer in \\[1, 4096\\]" "$BIN" run -m "$MODEL" -p hi --batch 5000
expect "bad --sampling" "--sampling: 'greedy' is not one of seeded, rejection" "$BIN" run -m "$MODEL" -p hi --sampling greedy
expect "bench: bad --sampling" "--sampling: 'greedy' is not one of" "$BIN" bench -m "$MODEL" --sampling greedy
expect "inflate: bad --fill" "--fill: 'ones' is not one of random, zero" "$BIN" inflate "$MODEL" "$T/never" --fill ones
# the context options are one set for every command that runs a model (tools/cli/cli.c, cli_ctx_option)
for c in bench score serve; do
    expect "$c: bad --kv-dtype" "kv-dtype: 'f8'" "$BIN" $c -m "$MODEL" --kv-dtype f8
    expect "$c: bad --precision" "--precision: 'int4'" "$BIN" $c -m "$MODEL" --precision int4
    expect "$c: bad --threads" "--threads" "$BIN" $c -m "$MODEL" --threads 0
    expect "$c: bad --batch" "--batch: '0' is not an integer" "$BIN" $c -m "$MODEL" --batch 0
    expect "$c: --backend without a name" "--backend needs a name" "$BIN" $c -m "$MODEL" --backend
done
expect "decode of a non-array" "JSON array" "$BIN" tokenize -m "$MODEL" --decode -p '{"a":1}'
expect "decode of an out-of-range id" "token id" "$BIN" tokenize -m "$MODEL" --decode -p '[1, 99999999]'
# quantize never writes over good data
mkdir -p "$T/good"; echo keep > "$T/good/file"
expect "quantize into a non-empty directory" "$T/good" "$BIN" quantize "$FX" "$T/good" --bits 4 --group-size 32
[ "$(cat "$T/good/file")" = keep ] && [ "$(ls "$T/good")" = file ] || { echo "FAIL quantize touched good data"; fail=$((fail + 1)); }
expect "quantize with a bad group size" "group-size" "$BIN" quantize "$FX" "$T/q" --bits 4 --group-size 48
expect "unknown SPECDEC_SIMD level" "SPECDEC_SIMD=sse9" env SPECDEC_SIMD=sse9 "$BIN" run -m "$MODEL" -p hi -n 4
# a level this machine does not run is refused, not replaced (x86 has no neon, arm no avx2)
if [ "$(uname -m)" = x86_64 ]; then NOTHERE=neon; else NOTHERE=avx2; fi
expect "SPECDEC_SIMD level not on this machine" "SPECDEC_SIMD=$NOTHERE" env SPECDEC_SIMD=$NOTHERE "$BIN" run -m "$MODEL" -p hi -n 4

echo "test_cli_errors: $((n - fail)) passed, $fail failed"
[ $fail -eq 0 ]
