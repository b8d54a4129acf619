#!/usr/bin/env python3
"""make_fixtures.py: tiny random-init Qwen3 checkpoints plus reference logits from HF transformers.

Runs where PyTorch and transformers are installed (the GPU machine; CPU is enough). Writes
tests/fixtures/tiny-{f32,bf16,q4}/ (config.json + model.safetensors) and, per fixture,
ref_logits.bin (little-endian f32, (T, V) float64 reference rounded to f32) and ref.json (tokens,
shapes, and the max error of the same forward run by torch in float32 against float64).

Principle of the tolerance (flash-attention style): specdec's f32 logits pass when their max error
against the float64 reference is at most twice torch-float32's error, plus a small floor.

The q4 fixture is quantized here in Python with the MLX affine layout (independently of specdec's
quantizer) and the reference runs on the dequantized weights."""
import json, os, struct, sys
import numpy as np
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures"
SHAPE = dict(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, head_dim=64,
             max_position_embeddings=256, rms_norm_eps=1e-6, rope_theta=10000.0)
T = 40

def bf16_bytes(t):
    return t.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()

def write_safetensors(path, tensors):
    """tensors: list of (name, dtype_str, shape, bytes). Written by hand to control dtypes (U32, BF16)."""
    header, off, blobs = {}, 0, []
    for name, dt, shape, data in tensors:
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        off += len(data); blobs.append(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h))); f.write(h)
        for b in blobs: f.write(b)

def config_json(tied, dtype, quant=None):
    c = dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", tie_word_embeddings=tied,
             bos_token_id=None, eos_token_id=[1, 2], torch_dtype=dtype, attention_bias=False,
             hidden_act="silu", **SHAPE)
    if quant: c["quantization"] = quant
    return c

def quantize_mlx(w, bits, group):
    """MLX affine quantization of w (out, in) float32 -> (packed u32, scales bf16, biases bf16, dequant f32)."""
    out, inn = w.shape
    g = w.reshape(out, inn // group, group).double()
    wmin, wmax = g.min(-1).values, g.max(-1).values
    nq = (1 << bits) - 1
    scale = ((wmax - wmin) / nq).clamp(min=1e-8)
    scale_b = scale.float().to(torch.bfloat16)
    bias_b = wmin.float().to(torch.bfloat16)
    s, b = scale_b.double().unsqueeze(-1), bias_b.double().unsqueeze(-1)
    q = torch.round((g - b) / s).clamp(0, nq).to(torch.int64)
    deq = (s.float() * q.float() + b.float()).reshape(out, inn)   # f32: scale*q + bias
    per = 32 // bits
    qf = q.reshape(out, inn // per, per)
    words = torch.zeros(out, inn // per, dtype=torch.int64)
    for j in range(per): words |= qf[..., j] << (bits * j)
    packed = words.numpy().astype("<u4").tobytes()
    return packed, scale_b, bias_b, deq

def main():
    torch.manual_seed(1234)
    cfg = Qwen3Config(**SHAPE, tie_word_embeddings=False, attention_bias=False)
    H, V, L = SHAPE["hidden_size"], SHAPE["vocab_size"], SHAPE["num_hidden_layers"]
    names = {}
    # Weights with real spread (std ~ 1/sqrt(fan_in) * 1.2) so logits are far from uniform.
    def rnd(*shape): return torch.randn(*shape) * (1.2 / shape[-1] ** 0.5)
    base = {"model.embed_tokens.weight": torch.randn(V, H), "model.norm.weight": 1 + 0.2 * torch.randn(H),
            "lm_head.weight": rnd(V, H)}
    for l in range(L):
        p = f"model.layers.{l}."
        nh, nkv, hd, I = SHAPE["num_attention_heads"], SHAPE["num_key_value_heads"], SHAPE["head_dim"], SHAPE["intermediate_size"]
        base[p + "input_layernorm.weight"] = 1 + 0.2 * torch.randn(H)
        base[p + "post_attention_layernorm.weight"] = 1 + 0.2 * torch.randn(H)
        base[p + "self_attn.q_proj.weight"] = rnd(nh * hd, H)
        base[p + "self_attn.k_proj.weight"] = rnd(nkv * hd, H)
        base[p + "self_attn.v_proj.weight"] = rnd(nkv * hd, H)
        base[p + "self_attn.o_proj.weight"] = rnd(H, nh * hd)
        base[p + "self_attn.q_norm.weight"] = 1 + 0.2 * torch.randn(hd)
        base[p + "self_attn.k_norm.weight"] = 1 + 0.2 * torch.randn(hd)
        base[p + "mlp.gate_proj.weight"] = rnd(I, H)
        base[p + "mlp.up_proj.weight"] = rnd(I, H)
        base[p + "mlp.down_proj.weight"] = rnd(H, I)
    tokens = torch.randint(0, V, (T,), generator=torch.Generator().manual_seed(7))

    def reference(weights, tied, name):
        c = Qwen3Config(**SHAPE, tie_word_embeddings=tied, attention_bias=False)
        res = {}
        for dt in (torch.float64, torch.float32):
            m = Qwen3ForCausalLM(c).to(dt).eval()
            sd = {k: v.to(dt) for k, v in weights.items()}
            if tied: sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
            missing, unexpected = m.load_state_dict(sd, strict=False)
            assert not unexpected, unexpected
            assert all(k == "lm_head.weight" for k in missing), missing
            m.config._attn_implementation = "eager"
            # transformers 5 moved rope_theta into rope_parameters: check it took our theta.
            hd = SHAPE["head_dim"]
            want = 1.0 / (SHAPE["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
            got = m.model.rotary_emb.inv_freq.to(torch.float64)
            assert torch.allclose(got, want, rtol=1e-6), (got[:4], want[:4])
            with torch.no_grad():
                res[dt] = m(tokens.unsqueeze(0)).logits[0].to(torch.float64)
        err32 = (res[torch.float32] - res[torch.float64]).abs().max().item()
        d = os.path.join(OUT, name)
        res[torch.float64].float().numpy().astype("<f4").tofile(os.path.join(d, "ref_logits.bin"))
        json.dump({"tokens": tokens.tolist(), "T": T, "vocab_size": V, "torch_f32_max_abs_err": err32,
                   "logit_absmax": res[torch.float64].abs().max().item(),
                   "torch_version": torch.__version__}, open(os.path.join(d, "ref.json"), "w"), indent=1)
        print(f"{name}: torch f32 vs f64 max abs err {err32:.3e}, |logit| max {res[torch.float64].abs().max().item():.2f}")

    # f32, untied
    d = os.path.join(OUT, "tiny-f32"); os.makedirs(d, exist_ok=True)
    json.dump(config_json(False, "float32"), open(os.path.join(d, "config.json"), "w"), indent=1)
    write_safetensors(os.path.join(d, "model.safetensors"),
                      [(k, "F32", v.shape, v.float().numpy().astype("<f4").tobytes()) for k, v in base.items()])
    reference(base, False, "tiny-f32")

    # bf16, tied (lm_head dropped): reference on the bf16-rounded weights
    tied = {k: v.to(torch.bfloat16).float() for k, v in base.items() if k != "lm_head.weight"}
    d = os.path.join(OUT, "tiny-bf16"); os.makedirs(d, exist_ok=True)
    json.dump(config_json(True, "bfloat16"), open(os.path.join(d, "config.json"), "w"), indent=1)
    write_safetensors(os.path.join(d, "model.safetensors"),
                      [(k, "BF16", v.shape, bf16_bytes(v)) for k, v in tied.items()])
    reference(tied, True, "tiny-bf16")

    # 4-bit group 32, tied, embedding quantized; bf16 scales/biases; norms bf16 dense
    d = os.path.join(OUT, "tiny-q4"); os.makedirs(d, exist_ok=True)
    json.dump(config_json(True, "bfloat16", {"group_size": 32, "bits": 4}), open(os.path.join(d, "config.json"), "w"), indent=1)
    ts, deqw = [], {}
    for k, v in tied.items():
        if k.endswith("norm.weight"):
            ts.append((k, "BF16", v.shape, bf16_bytes(v))); deqw[k] = v
        else:
            packed, s, b, deq = quantize_mlx(v, 4, 32)
            base_name = k[: -len(".weight")]
            ts.append((k, "U32", (v.shape[0], v.shape[1] // 8), packed))
            ts.append((base_name + ".scales", "BF16", s.shape, bf16_bytes(s)))
            ts.append((base_name + ".biases", "BF16", b.shape, bf16_bytes(b)))
            deqw[k] = deq
    write_safetensors(os.path.join(d, "model.safetensors"), ts)
    reference(deqw, True, "tiny-q4")

if __name__ == "__main__":
    main()
