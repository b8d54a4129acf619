#!/usr/bin/env python3
"""Stage 4: export target + drafter as an HF-style model directory, then check it.

Writes <out>/ (default <work>/export):
  config.json            HF Qwen3 keys + "mtp_num_hidden_layers": 1 (common.hf_config)
  model.safetensors      bf16; target names as HF (no lm_head.weight: tied) + mtp.* (model-format.md)
  tokenizer.json         minified Qwen3 tokenizer (from the corpus dir)
  tokenizer_config.json  copied
  generation_config.json eos = bos = 151643 (<|endoftext|>, the document separator)
  reference.json         the numbers of the checks below + reference logits for specdec
  SHA256SUMS
Checks: (a) the file reloads to exactly the in-memory bf16 weights and gives identical logits
(and the f32-master vs bf16 drift is reported); (b) transformers' Qwen3ForCausalLM.from_pretrained
on the directory, in f32, matches our model in f32 on the same weights on held-out prompts.

  python3 tools/train/export.py --work /tmp/sdtrain --corpus .dev/corpus --prompts tests/data/prompts/heldout.jsonl
"""
import argparse
import hashlib
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from common import (EOT_ID, MTP, KVCache, Qwen3LM, cfg_from_dict, hf_config, hf_rope_theta,  # noqa: E402
                    load_export, mtp_unrolled, read_prompts, save_json)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


@torch.no_grad()
def greedy(target, ids, n_new, dev):
    cache = KVCache(target.cfg.num_hidden_layers, target.cfg, len(ids) + n_new + 1, dev)
    h = target.hidden_cached(torch.tensor([ids], device=dev), 0, cache)
    out = [int(target.lm_head(h[0, -1]).argmax())]
    pos = len(ids)
    while len(out) < n_new:
        h = target.hidden_cached(torch.tensor([[out[-1]]], device=dev), pos, cache)
        pos += 1
        out.append(int(target.lm_head(h[0, -1]).argmax()))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--out", default=None)
    ap.add_argument("--n-check", type=int, default=6, help="held-out prompts for the HF check")
    a = ap.parse_args()
    out = a.out or os.path.join(a.work, "export")
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    t0 = time.time()

    ck = torch.load(os.path.join(a.work, "target.pt"), map_location="cpu")
    mk = torch.load(os.path.join(a.work, "mtp.pt"), map_location="cpu")
    cfg = cfg_from_dict(ck["cfg"])
    assert cfg_from_dict(mk["cfg"]) == cfg
    tensors = {}
    for k, v in ck["model"].items():
        tensors[k] = v.to(torch.bfloat16).contiguous()
    for k, v in mk["mtp"].items():
        tensors["mtp." + k] = v.to(torch.bfloat16).contiguous()
    assert "lm_head.weight" not in tensors
    H, V = cfg.hidden_size, cfg.vocab_size
    expect = {"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,), "mtp.fc.weight": (H, 2 * H),
              "mtp.pre_fc_norm_embedding.weight": (H,), "mtp.pre_fc_norm_hidden.weight": (H,),
              "mtp.norm.weight": (H,),
              "mtp.layers.0.self_attn.q_proj.weight": (cfg.num_attention_heads * cfg.head_dim, H),
              "model.layers.0.self_attn.k_norm.weight": (cfg.head_dim,),
              "model.layers.%d.mlp.down_proj.weight" % (cfg.num_hidden_layers - 1): (H, cfg.intermediate_size)}
    for k, shp in expect.items():
        assert tuple(tensors[k].shape) == shp, (k, tuple(tensors[k].shape), shp)
    n_layer_keys = 11  # 2 norms + q,k,v,o + q_norm,k_norm + gate,up,down
    assert len(tensors) == 2 + n_layer_keys * cfg.num_hidden_layers + 4 + n_layer_keys * cfg.mtp_num_hidden_layers

    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    from safetensors.torch import save_file
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    save_json(os.path.join(out, "config.json"), hf_config(cfg))
    save_json(os.path.join(out, "generation_config.json"),
              {"bos_token_id": EOT_ID, "eos_token_id": EOT_ID, "do_sample": False})
    with open(os.path.join(a.corpus, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(tj, separators=(",", ":"), ensure_ascii=False))
    shutil.copy(os.path.join(a.corpus, "tokenizer_config.json"), os.path.join(out, "tokenizer_config.json"))
    print("[export] wrote %s (%.1f s)" % (out, time.time() - t0), flush=True)

    # ---- check (a): reload == in-memory bf16, identical logits; f32-master drift
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
    prompts = read_prompts(a.prompts)
    chosen = [p for p in prompts if p["kind"] == "c"][: (a.n_check + 1) // 2] + \
             [p for p in prompts if p["kind"] == "en"][: a.n_check // 2]
    ids_list = [tok.encode(p["prompt"], add_special_tokens=False).ids for p in chosen]
    from safetensors.torch import load_file
    back = load_file(os.path.join(out, "model.safetensors"))
    assert set(back) == set(tensors)
    for k in tensors:
        assert back[k].dtype == torch.bfloat16 and torch.equal(back[k], tensors[k]), k
    cfg2, tgt, mtp = load_export(out, dev)
    assert cfg2 == cfg
    mem = Qwen3LM(cfg)
    mem.load_state_dict({k: v.bfloat16().float() for k, v in ck["model"].items()})
    mem.to(dev).eval()
    master = Qwen3LM(cfg)
    master.load_state_dict(ck["model"])
    master.to(dev).eval()
    mem_mtp = MTP(cfg)
    mem_mtp.load_state_dict({k: v.bfloat16().float() for k, v in mk["mtp"].items()})
    mem_mtp.to(dev).eval()
    reload_diff, drift, mtp_diff = 0.0, 0.0, 0.0
    with torch.no_grad():
        for ids in ids_list:
            x = torch.tensor([ids], device=dev)
            zr = tgt(x)
            zm = mem(x)
            reload_diff = max(reload_diff, float((zr - zm).abs().max()))
            drift = max(drift, float((master(x) - zm).abs().max()))
            hr = tgt.hidden(x)
            g = tgt.lm_head(hr).argmax(-1)
            a1 = mtp_unrolled(mtp, tgt.emb_w, x, hr, g, 4)
            a2 = mtp_unrolled(mem_mtp, mem.emb_w, x, mem.hidden(x), g, 4)
            mtp_diff = max(mtp_diff, max(float((u - w).abs().max()) for u, w in zip(a1, a2)))
    assert reload_diff == 0.0 and mtp_diff == 0.0, (reload_diff, mtp_diff)
    print("[export] (a) reload exact: target logits diff %g, drafter diff %g; f32-master vs bf16 max logit diff %.4f"
          % (reload_diff, mtp_diff, drift), flush=True)

    # ---- check (b): transformers loads the directory and gives the same logits
    import transformers
    from transformers import Qwen3ForCausalLM
    try:
        hf = Qwen3ForCausalLM.from_pretrained(out, dtype=torch.float32, attn_implementation="eager")
    except TypeError:
        hf = Qwen3ForCausalLM.from_pretrained(out, torch_dtype=torch.float32, attn_implementation="eager")
    hf = hf.float().to(dev).eval()
    theta = hf_rope_theta(hf.config)
    assert abs(theta - cfg.rope_theta) < 1e-3, theta
    assert torch.equal(hf.lm_head.weight, hf.model.embed_tokens.weight), "HF did not tie the LM head"
    assert torch.equal(hf.model.embed_tokens.weight, tgt.emb_w)
    hf_diff, scale, per = 0.0, 0.0, []
    refs = []
    with torch.no_grad():
        for p, ids in zip(chosen, ids_list):
            x = torch.tensor([ids], device=dev)
            zh = hf(input_ids=x).logits.float()
            zo = tgt(x)
            d = float((zh - zo).abs().max())
            s = float(zo.abs().max())
            per.append({"id": p["id"], "tokens": len(ids), "max_abs_diff": d, "max_abs_logit": s,
                        "argmax_agree": float((zh.argmax(-1) == zo.argmax(-1)).float().mean())})
            hf_diff, scale = max(hf_diff, d), max(scale, s)
            last = zo[0, -1]
            top = torch.topk(last, 10)
            refs.append({"id": p["id"], "input_ids": ids,
                         "last_top10": [[int(i), float(v)] for v, i in zip(top.values, top.indices)],
                         "greedy16": greedy(tgt, ids, 16, dev)})
    rel = hf_diff / max(1.0, scale)
    print("[export] (b) transformers %s vs ours (f32, bf16 weights): max |logit diff| %.3g, logit scale %.2f, rel %.3g"
          % (transformers.__version__, hf_diff, scale, rel), flush=True)
    assert rel < 1e-3, "HF logits differ from ours: rel %.3g" % rel

    files = {}
    for fn in sorted(os.listdir(out)):
        files[fn] = {"bytes": os.path.getsize(os.path.join(out, fn)), "sha256": sha256(os.path.join(out, fn))}
    ref = {"config": hf_config(cfg), "target_meta": ck.get("meta"), "mtp_meta": mk.get("meta"),
           "check_a": {"reload_max_logit_diff": reload_diff, "reload_drafter_max_diff": mtp_diff,
                       "f32_master_vs_bf16_max_logit_diff": drift},
           "check_b": {"transformers": transformers.__version__, "max_abs_logit_diff": hf_diff,
                       "max_abs_logit": scale, "rel": rel, "per_prompt": per, "attn_implementation": "eager",
                       "compute": "float32 on %s, TF32 off" % dev},
           "reference_logits": refs,
           "note": "reference_logits: our f32 compute on the bf16 weights; last_top10 = [id, logit] at the "
                   "prompt's last position; greedy16 = 16 greedy tokens after the prompt",
           "files_before_reference": files}
    save_json(os.path.join(out, "reference.json"), ref)
    with open(os.path.join(out, "SHA256SUMS"), "w") as f:
        for fn in sorted(os.listdir(out)):
            if fn != "SHA256SUMS":
                f.write("%s  %s\n" % (sha256(os.path.join(out, fn)), fn))
    tot = sum(os.path.getsize(os.path.join(out, fn)) for fn in os.listdir(out))
    print("[export] done in %.1f s; directory %.1f MB (bf16, before specdec's 4-bit quantization)" %
          (time.time() - t0, tot / 1e6), flush=True)


if __name__ == "__main__":
    main()
