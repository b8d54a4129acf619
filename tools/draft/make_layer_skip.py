#!/usr/bin/env python3
"""make_layer_skip.py: derive a draft model from a Qwen3 model directory by keeping its first N
decoder layers (plus the embedding, the final norm and the LM head), the "early exit" draft of
LayerSkip-style self-speculation. The result is an ordinary Qwen3 directory with the same
tokenizer, usable as `--draft model:DIR`. Python standard library only (runs anywhere).

    python3 tools/draft/make_layer_skip.py models/qwen3-kernel 2 /tmp/qwen3-kernel-l2

The tensors are copied byte for byte (quantized ones stay quantized); mtp.* is dropped."""
import json, os, re, shutil, struct, sys

def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)), 8 + n

def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    src, keep, dst = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    cfg = json.load(open(os.path.join(src, "config.json")))
    if not 1 <= keep < cfg["num_hidden_layers"]:
        sys.exit(f"keep must be in [1, {cfg['num_hidden_layers'] - 1}]")
    if os.path.exists(dst) and os.listdir(dst):
        sys.exit(f"{dst} exists and is not empty")
    st = os.path.join(src, "model.safetensors")
    hdr, base = read_header(st)
    names = []
    for name in hdr:
        if name == "__metadata__" or name.startswith("mtp."):
            continue
        m = re.match(r"model\.layers\.(\d+)\.", name)
        if m and int(m.group(1)) >= keep:
            continue
        names.append(name)
    names.sort(key=lambda k: hdr[k]["data_offsets"][0])
    out_hdr, off = {}, 0
    for k in names:
        b, e = hdr[k]["data_offsets"]
        out_hdr[k] = {"dtype": hdr[k]["dtype"], "shape": hdr[k]["shape"], "data_offsets": [off, off + e - b]}
        off += e - b
    hb = json.dumps(out_hdr, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    tmp = dst + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    with open(st, "rb") as f, open(os.path.join(tmp, "model.safetensors"), "wb") as o:
        o.write(struct.pack("<Q", len(hb))); o.write(hb)
        for k in names:
            b, e = hdr[k]["data_offsets"]
            f.seek(base + b); o.write(f.read(e - b))
    cfg["num_hidden_layers"] = keep
    cfg.pop("mtp_num_hidden_layers", None)
    if "max_window_layers" in cfg: cfg["max_window_layers"] = keep
    json.dump(cfg, open(os.path.join(tmp, "config.json"), "w"), indent=1)
    for fn in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        if os.path.exists(os.path.join(src, fn)):
            shutil.copy(os.path.join(src, fn), tmp)
    os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
    if os.path.exists(dst): os.rmdir(dst)
    os.rename(tmp, dst)
    print(f"wrote {dst}: first {keep} of the layers, {len(names)} tensors, {off / 2**20:.1f} MiB")

if __name__ == "__main__":
    main()
