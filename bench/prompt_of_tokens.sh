#!/bin/bash
# prompt_of_tokens.sh SPECDEC MODEL N OUT: a prompt of about N tokens in MODEL's tokenizer, for
# prefill measurements: the held-out prompts joined, their first N ids decoded back to text (which
# may tokenize again to a token more), written as OUT.txt and as OUT.jsonl (one prompt, id pN).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SD=$1 MODEL=$2 N=$3 OUT=$4
python3 -c 'import json,sys
print(" ".join(json.loads(l)["prompt"] for l in open(sys.argv[1])))' "$ROOT/tests/data/prompts/heldout.jsonl" > "$OUT.long"
"$SD" tokenize -m "$MODEL" -f "$OUT.long" | python3 -c 'import sys,json; print(json.dumps(json.load(sys.stdin)[:int(sys.argv[1])]))' "$N" > "$OUT.ids"
"$SD" tokenize -m "$MODEL" -f "$OUT.ids" --decode > "$OUT.txt"
python3 -c 'import json,sys; print(json.dumps({"id": "p" + sys.argv[2], "prompt": open(sys.argv[1]).read()}))' "$OUT.txt" "$N" > "$OUT.jsonl"
rm -f "$OUT.long" "$OUT.ids"
