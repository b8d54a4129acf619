#!/usr/bin/env bash
# hf_target_check.sh: end-to-end check of the "train an MTP head for your own target" path, on the
# GPU machine (torch, transformers, tokenizers; ~2 min). Needs models/qwen3-kernel and the static
# specdec in .dev/bin (tools/train/README.md). Output under ${OUT:-/tmp}/hfcheck.
#
# 1. train_mtp.py --selftest (includes the untied-HF-directory checks)
# 2. a user-style target: the shipped 4-bit target dequantized to bf16 and saved UNTIED (lm_head a
#    copy of the embedding: the same function, the untied code path), no mtp.* -> $W/target
# 3. train data: the repository's own C sources and docs, tokenized (real text, not the kernel)
# 4. train_mtp.py --target-hf $W/target (checks our model code against transformers first)
# 5. attach_mtp.py -> $W/attached; transformers loads it; specdec runs it: classic == --draft mtp
#    byte for byte; eval_mtp.py (PyTorch) vs specdec (bench/mtp_agreement.py) on 8 held-out prompts
# 6. specdec quantize $W/attached -> 4-bit target + drafter; classic == speculative again
set -euo pipefail
cd "$(dirname "$0")/../.."
R=$PWD
O=${OUT:-/tmp}/hfcheck
W=/tmp/hfcheck
SPECDEC=$R/.dev/bin/specdec
rm -rf "$W" && mkdir -p "$W" "$O"
exec > >(tee "$O/hf_target_check.log") 2>&1
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }

step "1 selftest"
python3 tools/train/train_mtp.py --selftest

step "2 untied bf16 target from models/qwen3-kernel"
python3 - "$R/models/qwen3-kernel" "$W/target" <<'PY'
import json, os, shutil, sys, torch
from safetensors.torch import load_file, save_file
src, dst = sys.argv[1], sys.argv[2]
cfg = json.load(open(os.path.join(src, "config.json")))
q = cfg.pop("quantization"); cfg.pop("quantization_config", None); G, B = q["group_size"], q["bits"]
sd = load_file(os.path.join(src, "model.safetensors"))
out = {}
for k, v in sd.items():
    if k.startswith("mtp.") or k.endswith(".scales") or k.endswith(".biases"):
        continue
    if v.dtype in (torch.uint32, torch.int32):        # MLX affine: element j of a row in word j//E, bits*(j%E)
        base = k[:-len(".weight")]
        E = 32 // B
        w = v.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
        shifts = torch.arange(E, dtype=torch.int64) * B
        qv = ((w[..., None] >> shifts) & ((1 << B) - 1)).reshape(w.shape[0], -1).float()
        s, b = sd[base + ".scales"].float(), sd[base + ".biases"].float()
        val = qv.view(qv.shape[0], -1, G) * s[..., None] + b[..., None]
        out[k] = val.reshape(qv.shape[0], -1).to(torch.bfloat16)
    else:
        out[k] = v.to(torch.bfloat16)
out["lm_head.weight"] = out["model.embed_tokens.weight"].clone()
cfg["tie_word_embeddings"] = False
cfg.pop("mtp_num_hidden_layers", None)
cfg["torch_dtype"] = "bfloat16"
os.makedirs(dst)
save_file(out, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
json.dump(cfg, open(os.path.join(dst, "config.json"), "w"), indent=1)
for f in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
    shutil.copy(os.path.join(src, f), dst)
print("target:", len(out), "tensors, untied, bf16")
PY

step "3 train data: this repository's sources"
python3 - "$R" "$W/data" <<'PY'
import glob, json, os, sys
import numpy as np
from tokenizers import Tokenizer
R, D = sys.argv[1], sys.argv[2]
os.makedirs(D)
tok = Tokenizer.from_file(os.path.join(R, "models/qwen3-kernel/tokenizer.json"))
files = sorted(f for pat in ("src/**/*.c", "src/**/*.h", "tools/**/*.c", "tests/*.c", "docs/**/*.md", "bench/*.c")
               for f in glob.glob(os.path.join(R, pat), recursive=True))
held = [f for f in files if "/tests/" in f]
train = [f for f in files if "/tests/" not in f]
def enc(fs):
    ids = []
    for f in fs:
        ids += tok.encode("// FILE: %s\n%s" % (os.path.relpath(f, R), open(f, errors="replace").read()), add_special_tokens=False).ids
        ids.append(151643)
    return np.asarray(ids, dtype=np.uint32)
for name, fs in (("train", train), ("heldout", held)):
    a = enc(fs); a.tofile(os.path.join(D, name + ".bin"))
    print(name, len(fs), "files", a.size, "tokens")
json.dump({"note": "hf_target_check: repository sources"}, open(os.path.join(D, "tokens.json"), "w"))
PY

step "4 train_mtp --target-hf (90 s budget)"
python3 tools/train/train_mtp.py --target-hf "$W/target" --data "$W/data" --work "$W/work" \
    --train-seconds 90 --eval-windows 16

step "5 attach, transformers, specdec"
python3 tools/train/attach_mtp.py "$W/target" "$W/work/mtp.pt" "$W/attached"
ls -la "$W/attached"
python3 - "$W/target" "$W/attached" <<'PY'
import sys, torch, transformers
a = transformers.Qwen3ForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32).eval()
b = transformers.Qwen3ForCausalLM.from_pretrained(sys.argv[2], dtype=torch.float32).eval()
x = torch.randint(0, 151643, (1, 48), generator=torch.Generator().manual_seed(1))
with torch.no_grad():
    d = float((a(input_ids=x).logits - b(input_ids=x).logits).abs().max())
print("transformers: attached dir loads, logits equal to the target's: max diff", d)
assert d == 0.0
PY
"$SPECDEC" info -m "$W/attached"
P=$'// FILE: src/util/example.c\n#include <stdio.h>\n\nstatic int'
for m in attached; do
  "$SPECDEC" run -m "$W/$m" -n 96 --threads 8 -p "$P" > "$O/classic.txt"
  "$SPECDEC" run -m "$W/$m" -n 96 --threads 8 --draft mtp --block-size 4 -p "$P" > "$O/spec.txt"
  cmp "$O/classic.txt" "$O/spec.txt" && echo "specdec $m: speculative == classic (96 tokens)"
done
head -c 600 "$O/spec.txt"; echo
python3 tools/train/eval_mtp.py --model "$W/attached" --prompts tests/data/prompts/heldout.jsonl \
    --out "$O/eval_attached.json" --new 64 --ks 4 --limit 4
python3 bench/mtp_agreement.py --specdec "$SPECDEC" --model "$W/attached" --ref "$O/eval_attached.json" \
    --out "$O/agree_attached.json" --jobs 8 --threads 1

step "6 specdec quantize -> 4-bit"
"$SPECDEC" quantize "$W/attached" "$W/attached-q4" --bits 4 --group-size 64 | tail -3
"$SPECDEC" run -m "$W/attached-q4" -n 96 --threads 8 -p "$P" > "$O/classic4.txt"
"$SPECDEC" run -m "$W/attached-q4" -n 96 --threads 8 --draft mtp --block-size 4 -p "$P" > "$O/spec4.txt"
cmp "$O/classic4.txt" "$O/spec4.txt" && echo "specdec 4-bit: speculative == classic (96 tokens)"
cp "$W/work/logs/mtp_summary.json" "$O/" 2>/dev/null || true
step "done"
