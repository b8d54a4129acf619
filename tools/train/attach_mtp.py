#!/usr/bin/env python3
"""attach_mtp.py: write a drafter trained by `train_mtp.py --target-hf DIR` into a copy of DIR.

    python3 tools/train/attach_mtp.py DIR WORK/mtp.pt OUT

OUT (must not exist) gets every file of DIR unchanged, plus
  mtp.safetensors                 the drafter's tensors as mtp.* in bf16 (model-format.md)
  model.safetensors.index.json    DIR's weight_map (or one listing DIR's model.safetensors) + the mtp.* entries
  config.json                     DIR's, with "mtp_num_hidden_layers" set
so the target's weight files are byte copies and `transformers` still loads OUT (it ignores mtp.*).
specdec loads OUT as is (`specdec run -m OUT --draft mtp`) or after `specdec quantize OUT OUT4 --bits 4`.
OUT is written under a temporary name and renamed at the end: a failure leaves no partial OUT.
"""
import argparse
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from common import MTP, cfg_from_hf_config  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target_dir")
    ap.add_argument("mtp_pt")
    ap.add_argument("out")
    a = ap.parse_args()
    if os.path.exists(a.out):
        sys.exit("%s: exists; give a new directory" % a.out)
    cfg = cfg_from_hf_config(os.path.join(a.target_dir, "config.json"))
    ck = torch.load(a.mtp_pt, map_location="cpu")
    meta = ck.get("meta", {})
    for k in ("vocab_size", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim"):
        if ck["cfg"][k] != getattr(cfg, k):
            sys.exit("%s: %s %s, but %s has %s: trained for another target" %
                     (a.mtp_pt, k, ck["cfg"][k], a.target_dir, getattr(cfg, k)))
    cfg.mtp_num_hidden_layers = ck["cfg"]["mtp_num_hidden_layers"]
    mtp = MTP(cfg)
    mtp.load_state_dict(ck["mtp"], strict=True)   # the names and shapes model-format.md fixes
    tensors = {"mtp." + k: v.detach().to(torch.bfloat16).contiguous() for k, v in mtp.state_dict().items()}

    with open(os.path.join(a.target_dir, "config.json")) as f:
        hc = json.load(f)
    ip = os.path.join(a.target_dir, "model.safetensors.index.json")
    if os.path.exists(ip):
        with open(ip) as f:
            index = json.load(f)
    else:
        sp = os.path.join(a.target_dir, "model.safetensors")
        with safe_open(sp, "pt") as f:
            index = {"metadata": {}, "weight_map": {k: "model.safetensors" for k in f.keys()}}
    wm = index["weight_map"]
    old = [k for k in wm if k.startswith("mtp.")]
    if old:
        sys.exit("%s already has a drafter (%s); attach to a directory without one" % (a.target_dir, old[0]))
    if "mtp.safetensors" in set(wm.values()) or os.path.exists(os.path.join(a.target_dir, "mtp.safetensors")):
        sys.exit("%s: a file named mtp.safetensors exists already" % a.target_dir)

    tmp = a.out.rstrip("/") + ".tmp-attach"
    if os.path.exists(tmp):
        shutil.rmtree(tmp)
    shutil.copytree(a.target_dir, tmp)
    save_file(tensors, os.path.join(tmp, "mtp.safetensors"), metadata={"format": "pt"})
    for k in tensors:
        wm[k] = "mtp.safetensors"
    index.setdefault("metadata", {})
    index["weight_map"] = dict(sorted(wm.items()))
    with open(os.path.join(tmp, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")
    hc["mtp_num_hidden_layers"] = cfg.mtp_num_hidden_layers
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(hc, f, indent=2)
        f.write("\n")
    with open(os.path.join(tmp, "mtp_meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    os.rename(tmp, a.out)
    n = sum(v.numel() for v in tensors.values())
    print("%s: %s + mtp.safetensors (%d tensors, %d parameters, bf16), mtp_num_hidden_layers %d" %
          (a.out, a.target_dir, len(tensors), n, cfg.mtp_num_hidden_layers))


if __name__ == "__main__":
    main()
