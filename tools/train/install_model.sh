#!/usr/bin/env bash
# Install a fetched training run as the embedded model (run here, after `fetch ship`):
#
#   tools/train/install_model.sh FETCHED_DIR [RESULTS_NAME]
#
# 1. reassembles and checks the 4-bit directory (reassemble.sh --ship) into .dev/ship-<name>;
# 2. unpacks results.tar.gz into tools/train/results/<name>/ (logs, reference.json, mtp_eval.json,
#    agree_*.json; the bf16 export's sha256 list as bf16_export.sha256);
# 3. replaces the model files of models/qwen3-kernel (MODEL_DIR overrides) with the new ones,
#    keeping README.md (the model card: edit it) and draft_vocab.json (regenerate it from the new
#    train split: tools/draft/make_draft_vocab.py). The old files are kept in .dev/prev-model.
# <name> defaults to today's date, with a suffix if that results folder exists.
set -euo pipefail
cd "$(dirname "$0")/../.."
F=${1:?fetched folder (the one of the call that ran fetch ship)}
NAME=${2:-$(date +%F)}
MODEL=${MODEL_DIR:-models/qwen3-kernel}
R=tools/train/results/$NAME
if [ -z "${2:-}" ]; then i=2; while [ -e "$R" ]; do R=tools/train/results/$NAME-$i; i=$((i + 1)); done; fi
[ -e "$R" ] && { echo "$R exists" >&2; exit 1; }
SHIP=.dev/ship-$(basename "$R")
rm -rf "$SHIP"
bash tools/train/reassemble.sh --ship "$SHIP" "$F" > /dev/null
echo "[install] $SHIP: every part and file matches the GPU side's sha256 lists"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
tar -xzf "$F/results.tar.gz" -C "$T"
mkdir -p "$R"
for f in reference.json mtp_eval.json agree_bf16.json agree_q4.json config.json; do
  [ -f "$T/$f" ] && cp "$T/$f" "$R/"
done
[ -f "$T/SHA256SUMS.all" ] && cp "$T/SHA256SUMS.all" "$R/bf16_export.sha256"
[ -d "$T/train_logs" ] && cp -r "$T/train_logs/." "$R/"
echo "[install] results -> $R ($(ls "$R" | wc -l) files)"
# swap the model files: new ones land in a temporary folder beside the model, then move in
mkdir -p .dev/prev-model "$MODEL"
N=$(mktemp -d "$(dirname "$MODEL")/.install.XXXXXX")
for f in config.json model.safetensors tokenizer.json tokenizer_config.json generation_config.json; do
  cp "$SHIP/$f" "$N/$f"
done
for f in config.json model.safetensors tokenizer.json tokenizer_config.json generation_config.json; do
  [ -f "$MODEL/$f" ] && mv "$MODEL/$f" ".dev/prev-model/$f"
  mv "$N/$f" "$MODEL/$f"
done
rmdir "$N"
echo "[install] $MODEL: new model files; README.md and draft_vocab.json kept (update them); old files in .dev/prev-model"
ls -la "$MODEL"
