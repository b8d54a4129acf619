"""Shared PyTorch code of the specdec training recipe: the Qwen3 target, the MTP drafter,
the drafter's train-as-you-infer unrolled forward, and inference-style KV caches.

Math follows HF transformers' Qwen3ForCausalLM exactly (see ../shared/docs/model-format.md):
  per layer: x += o_proj(attn(rope(q_norm(q_proj(n1(x)))), rope(k_norm(k_proj(n1(x)))), v_proj(n1(x))))
             x += down(silu(gate(n2(x))) * up(n2(x)))
  RMSNorm in f32: w * (x / sqrt(mean(x^2) + eps)).to(x.dtype); RoPE rotate_half (NeoX) over the
  full head_dim, base rope_theta; GQA: query head i uses kv head i // (nh / nkv); tied LM head.
Parameter names equal the HF / model-format.md names ("model.layers.0.self_attn.q_proj.weight",
and for the drafter the same names under "mtp.").

Shapes: B batch, T tokens, H hidden, nh / nkv heads, hd head_dim, V vocab, I intermediate.
"""
import json
import math
import os
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

EOT_ID = 151643  # <|endoftext|>: the document separator of the corpus, bos and eos of the export


@dataclass
class Cfg:
    vocab_size: int = 151936
    hidden_size: int = 384
    intermediate_size: int = 640
    num_hidden_layers: int = 8
    num_attention_heads: int = 6
    num_key_value_heads: int = 2
    head_dim: int = 128
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1000000.0
    max_position_embeddings: int = 1024
    mtp_num_hidden_layers: int = 1
    tie_word_embeddings: bool = True   # the recipe's own target is tied; HF targets may not be

    def validate(self):
        assert self.num_attention_heads % self.num_key_value_heads == 0
        assert self.head_dim % 2 == 0
        return self


def smoke_cfg():
    return Cfg(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
               num_key_value_heads=1, head_dim=32)


def cfg_from_dict(d):
    keys = Cfg.__dataclass_fields__.keys()
    return Cfg(**{k: d[k] for k in keys if k in d}).validate()


# ----------------------------------------------------------------------------- building blocks
class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        dt = x.dtype
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(dt)


def rope_cos_sin(pos, head_dim, theta):
    """pos: int64 [T] on the compute device -> cos, sin f32 [T, hd] (HF's default rope)."""
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64, device=pos.device).float() / head_dim))
    f = pos.float()[:, None] * inv[None, :]
    emb = torch.cat([f, f], dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rope(x, cos, sin):
    # x [B, heads, T, hd]; cos/sin [T, hd] (f32) cast to x's dtype as HF does
    cos = cos.to(x.dtype)
    sin = sin.to(x.dtype)
    return x * cos + rotate_half(x) * sin


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.nh, self.nkv, self.hd = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        H = c.hidden_size
        self.q_proj = nn.Linear(H, self.nh * self.hd, bias=False)
        self.k_proj = nn.Linear(H, self.nkv * self.hd, bias=False)
        self.v_proj = nn.Linear(H, self.nkv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.nh * self.hd, H, bias=False)
        self.q_norm = RMSNorm(self.hd, c.rms_norm_eps)
        self.k_norm = RMSNorm(self.hd, c.rms_norm_eps)

    def qkv(self, x, cos, sin):
        """x [B, T, H] (already input_layernorm'ed) -> q [B, nh, T, hd], k, v [B, nkv, T, hd]."""
        B, T, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(B, T, self.nh, self.hd)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(B, T, self.nkv, self.hd)).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        dt = v.dtype  # bf16 under autocast (linear output), f32 otherwise
        return q.to(dt), k.to(dt), v

    def attend(self, q, k, v, mask=None, causal=False):
        """q [B, nh, Tq, hd], k/v [B, nkv, Tk, hd]; mask bool [Tq, Tk] (True = attend) -> [B, Tq, H]."""
        rep = self.nh // self.nkv
        if rep > 1:
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
        B, _, Tq, _ = q.shape
        return self.o_proj(o.transpose(1, 2).reshape(B, Tq, self.nh * self.hd))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = MLP(c)

    def forward(self, x, cos, sin):
        """Full causal sequence (training / reference)."""
        q, k, v = self.self_attn.qkv(self.input_layernorm(x), cos, sin)
        x = x + self.self_attn.attend(q, k, v, causal=True)
        return x + self.mlp(self.post_attention_layernorm(x))

    def forward_cached(self, x, cos, sin, kbuf, vbuf, start):
        """Inference step: x [1, n, H] at positions start..start+n-1. Writes its k/v at cache
        indices [start, start+n) of kbuf/vbuf [1, nkv, Lmax, hd], attends to [0, start+n)."""
        n = x.shape[1]
        q, k, v = self.self_attn.qkv(self.input_layernorm(x), cos, sin)
        kbuf[:, :, start:start + n] = k.to(kbuf.dtype)
        vbuf[:, :, start:start + n] = v.to(vbuf.dtype)
        K = kbuf[:, :, :start + n].to(q.dtype)
        V = vbuf[:, :, :start + n].to(q.dtype)
        mask = torch.ones(n, start + n, dtype=torch.bool, device=x.device).tril(diagonal=start)
        x = x + self.self_attn.attend(q, K, V, mask=mask)
        return x + self.mlp(self.post_attention_layernorm(x))


def init_weights(module, std=0.02):
    """HF Qwen3 init: Linear / Embedding ~ N(0, 0.02), RMSNorm weights 1."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=std)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=std)
        elif isinstance(m, RMSNorm):
            nn.init.ones_(m.weight)


# ----------------------------------------------------------------------------- target
class Qwen3Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([Layer(c) for _ in range(c.num_hidden_layers)])
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)


class Qwen3LM(nn.Module):
    """Qwen3ForCausalLM. state_dict names = HF names, except that an untied LM head is `head.weight`
    here (HF: `lm_head.weight`; `lm_head` is the method below): hf_state_to_ours / ours_to_hf."""

    def __init__(self, c):
        super().__init__()
        self.cfg = c
        self.model = Qwen3Model(c)
        if not c.tie_word_embeddings:
            self.head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)

    @property
    def emb_w(self):
        return self.model.embed_tokens.weight

    @property
    def head_w(self):
        """The LM head's [V, H] weight: the embedding when tied. The MTP drafter borrows both."""
        return self.emb_w if self.cfg.tie_word_embeddings else self.head.weight

    def hidden(self, idx):
        """idx [B, T] -> final hidden h [B, T, H] after model.norm (positions 0..T-1)."""
        c = self.cfg
        T = idx.shape[1]
        cos, sin = rope_cos_sin(torch.arange(T, device=idx.device), c.head_dim, c.rope_theta)
        x = self.model.embed_tokens(idx)
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        return self.model.norm(x)

    def lm_head(self, h):
        return F.linear(h, self.head_w)

    def forward(self, idx, targets=None):
        logits = self.lm_head(self.hidden(idx))
        if targets is None:
            return logits
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))

    # --- inference with a KV cache (eval / checks); cache = KVCache
    def hidden_cached(self, idx, start, cache):
        """idx [1, n] at positions start..start+n-1 -> h [1, n, H]; appends n cache entries."""
        c = self.cfg
        n = idx.shape[1]
        assert start + n <= cache.max_len, (start, n, cache.max_len)
        cos, sin = rope_cos_sin(torch.arange(start, start + n, device=idx.device), c.head_dim, c.rope_theta)
        x = self.model.embed_tokens(idx)
        for l, layer in enumerate(self.model.layers):
            x = layer.forward_cached(x, cos, sin, cache.k[l], cache.v[l], start)
        return self.model.norm(x)


class KVCache:
    """One K and one V buffer per layer, [1, nkv, max_len, hd]. Entry index = position.
    Truncation (the round's finalize) is just using a smaller `start` next time."""

    def __init__(self, n_layers, c, max_len, device, dtype=torch.float32):
        shape = (1, c.num_key_value_heads, max_len, c.head_dim)
        self.k = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(n_layers)]
        self.v = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(n_layers)]
        self.max_len = max_len


# ----------------------------------------------------------------------------- drafter
class MTP(nn.Module):
    """The mtp.* module (model-format.md). Borrows the target's embedding / tied LM head (emb_w)."""

    def __init__(self, c):
        super().__init__()
        self.cfg = c
        H = c.hidden_size
        self.pre_fc_norm_embedding = RMSNorm(H, c.rms_norm_eps)
        self.pre_fc_norm_hidden = RMSNorm(H, c.rms_norm_eps)
        self.fc = nn.Linear(2 * H, H, bias=False)          # weight [H, 2H]
        self.layers = nn.ModuleList([Layer(c) for _ in range(c.mtp_num_hidden_layers)])
        self.norm = RMSNorm(H, c.rms_norm_eps)

    def fuse(self, emb_w, tok, hid):
        """tok [B, n] int64, hid [B, n, H] -> u [B, n, H] = fc(concat(norm_e(embed(tok)), norm_h(hid)))."""
        e = self.pre_fc_norm_embedding(F.embedding(tok, emb_w))
        g = self.pre_fc_norm_hidden(hid)
        # f32 residual stream under autocast, like the target's (whose embedding output is f32)
        return self.fc(torch.cat([e, g.to(e.dtype)], dim=-1)).float()

    def init_from_target(self, target, seed):
        """Start sensible: layers = copies of the target's last layer(s), mtp.norm = model.norm,
        fc = 0.5 * [I | I] + N(0, 0.002) so u starts as the mean of the normalized token embedding
        and the normalized target hidden (a residual stream the copied layer already understands)."""
        H = self.cfg.hidden_size
        n = len(self.layers)
        with torch.no_grad():
            for i, layer in enumerate(self.layers):
                src = target.model.layers[len(target.model.layers) - n + i]
                layer.load_state_dict(src.state_dict())
            self.norm.weight.copy_(target.model.norm.weight)
            self.pre_fc_norm_embedding.weight.fill_(1.0)
            self.pre_fc_norm_hidden.weight.fill_(1.0)
            gen = torch.Generator(device="cpu").manual_seed(seed)
            eye = torch.eye(H)
            w = 0.5 * torch.cat([eye, eye], dim=1) + 0.002 * torch.randn(H, 2 * H, generator=gen)
            self.fc.weight.copy_(w.to(self.fc.weight.device))

    # --- inference-style step (eval, selftest simulation)
    def step_cached(self, emb_w, tok, hid, start, cache):
        """Entries at positions start..start+n-1: entry i pairs tok[:, i] with hid[:, i].
        tok [1, n], hid [1, n, H]. Writes n drafter KV entries, returns m [1, n, H]."""
        c = self.cfg
        n = tok.shape[1]
        assert hid.shape[:2] == (1, n), (hid.shape, n)
        assert start + n <= cache.max_len
        cos, sin = rope_cos_sin(torch.arange(start, start + n, device=tok.device), c.head_dim, c.rope_theta)
        u = self.fuse(emb_w, tok, hid)
        for l, layer in enumerate(self.layers):
            u = layer.forward_cached(u, cos, sin, cache.k[l], cache.v[l], start)
        return self.norm(u)


_MASKS = {}


def depth_mask(L, k, device):
    """Attention mask of the depth-k queries (k >= 1) of the unrolled drafter, bool [L, k*L].
    Keys are [depth-1 entries | depth-2 entries | ... | depth-k entries], L positions each.
    The depth-k entry at position j attends to depth-1 entries at positions <= j-k+1 and to the
    depth-d entry at position j-k+d for d = 2..k (itself last): exactly the drafter KV cache of
    inference, where positions <= j-k+1 hold entries rebuilt from true target hidden states and
    the k-1 newest entries are this chain's speculative ones."""
    key = (L, k, str(device))
    if key not in _MASKS:
        j = torch.arange(L, device=device)[:, None]
        i = torch.arange(L, device=device)[None, :]
        parts = [i <= j - k + 1]
        for d in range(2, k + 1):
            parts.append(i == j - k + d)
        m = torch.cat(parts, dim=1)
        assert m.shape == (L, k * L)
        assert bool(m.any(dim=1).all()), "every query row must see at least itself"
        _MASKS[key] = m
    return _MASKS[key]


def mtp_unrolled(mtp, emb_w, x, h, g, D, masks=None):
    """Train-as-you-infer forward of D drafter depths over all positions at once.

    x [B, T] tokens, h [B, T, H] target final hidden (after model.norm), g [B, T] target greedy
    tokens (g[:, t] = argmax lm_head(h_t), the target's choice for position t+1).
    L = T-1 entries per depth, entry j at RoPE position j:
      depth 1: token x[:, j+1] with h[:, j]                      (predicts position j+2)
      depth d: token g[:, j]   with m_{d-1}[:, j-1]              (predicts position j+2)
    (g[:, j] is what depth d-1 at position j-1 proposed whenever its draft was accepted.)
    Entries of depth d at j < d-1 have no chain root: their inputs are padding and they are
    masked out of the loss (valid entries never attend to them, see depth_mask).
    masks: optional precomputed [depth_mask(L, d) for d in 1..D] (pass them under torch.compile).
    Returns a list of D tensors m_d [B, L, H]."""
    B, T = x.shape
    L = T - 1
    c = mtp.cfg
    assert h.shape[:2] == (B, T) and g.shape == (B, T)
    cos, sin = rope_cos_sin(torch.arange(L, device=x.device), c.head_dim, c.rope_theta)
    nl = len(mtp.layers)
    ks = [[] for _ in range(nl)]
    vs = [[] for _ in range(nl)]
    ms = []
    prev = None
    for d in range(1, D + 1):
        if d == 1:
            tok, hid = x[:, 1:], h[:, :L]
        else:
            tok = g[:, :L]
            hid = torch.cat([torch.zeros_like(prev[:, :1]), prev[:, :-1]], dim=1)
        u = mtp.fuse(emb_w, tok, hid)
        mask = masks[d - 1] if masks is not None else depth_mask(L, d, x.device)
        for l, layer in enumerate(mtp.layers):
            q, k, v = layer.self_attn.qkv(layer.input_layernorm(u), cos, sin)
            ks[l].append(k)
            vs[l].append(v)
            K = torch.cat(ks[l], dim=2)
            V = torch.cat(vs[l], dim=2)
            u = u + layer.self_attn.attend(q, K, V, mask=mask)
            u = u + layer.mlp(layer.post_attention_layernorm(u))
        m = mtp.norm(u)
        assert m.shape == (B, L, c.hidden_size)
        ms.append(m)
        prev = m
    return ms


def valid_masks(x, g, D, exact=True):
    """Loss masks [B, L] per depth. match[t] = (g[t-1] == x[t]): the target's greedy choice equals
    the data. exact=True: depth d at j counts only if its chain's drafted positions j-d+3..j+1 all
    match, so the context it sees is the true data and the target distribution at j+1 is exact.
    exact=False: every entry with a chain root (j >= d-1) counts."""
    B, T = x.shape
    L = T - 1
    match = torch.zeros(B, T, dtype=torch.bool, device=x.device)
    match[:, 1:T] = g[:, :T - 1] == x[:, 1:]            # match[t] for t in 1..T-1
    masks = [torch.ones(B, L, dtype=torch.bool, device=x.device)]
    j = torch.arange(L, device=x.device)
    for d in range(2, D + 1):
        prev = torch.cat([torch.zeros(B, 1, dtype=torch.bool, device=x.device), masks[-1][:, :-1]], dim=1)
        if exact:
            cur = prev & match[:, 1:L + 1]                  # match[j+1] for j in 0..L-1
        else:
            cur = prev & (j >= d - 1)[None, :]
        masks.append(cur)
    return masks


# ----------------------------------------------------------------------------- arguments

def add_train_args(ap, seed, lr, train_seconds, batch, warmup, calib_steps, eval_windows):
    """The arguments both training stages take (time budget, batch, schedule, evaluation), with the
    stage's defaults; the ones given as None are filled in after parsing, from --smoke."""
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--seed", type=int, default=seed)
    ap.add_argument("--train-seconds", type=float, default=None, help="default %g (smoke 20)" % train_seconds)
    ap.add_argument("--steps", type=int, default=0, help="fixed step count (skips calibration)")
    ap.add_argument("--batch", type=int, default=None, help="default %d (smoke %d)" % batch)
    ap.add_argument("--seq", type=int, default=None, help="default 1024 (smoke 256)")
    ap.add_argument("--lr", type=float, default=lr)
    ap.add_argument("--min-lr-frac", type=float, default=0.02)
    ap.add_argument("--warmup", type=int, default=None, help="default %d (smoke 5)" % warmup)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--calib-steps", type=int, default=None, help="default %d (smoke 10)" % calib_steps)
    ap.add_argument("--eval-every", type=int, default=None, help="default 500 (smoke 20)")
    ap.add_argument("--eval-windows", type=int, default=eval_windows)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--no-compile", action="store_true")


# ----------------------------------------------------------------------------- io helpers
def load_tokens(path):
    import numpy as np
    a = np.fromfile(path, dtype=np.uint32)
    assert a.size > 0 and int(a.max()) < 151936, path
    return torch.from_numpy(a.astype(np.int32))


def save_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def append_jsonl(path, obj):
    with open(path, "a") as f:
        f.write(json.dumps(obj) + "\n")


def cosine_lr(step, total, warmup, peak, min_frac):
    if step < warmup:
        return peak * (step + 1) / warmup
    p = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (min_frac + (1 - min_frac) * 0.5 * (1 + math.cos(math.pi * p)))


def param_groups(module, wd):
    decay = [p for p in module.parameters() if p.requires_grad and p.dim() >= 2]
    other = [p for p in module.parameters() if p.requires_grad and p.dim() < 2]
    return [{"params": decay, "weight_decay": wd}, {"params": other, "weight_decay": 0.0}]


def cfg_dict(c):
    return asdict(c)


def hf_config(c, dtype="bfloat16"):
    """config.json for the export: HF Qwen3 keys (model-format.md) + the mtp extension."""
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "vocab_size": c.vocab_size,
        "hidden_size": c.hidden_size,
        "intermediate_size": c.intermediate_size,
        "num_hidden_layers": c.num_hidden_layers,
        "num_attention_heads": c.num_attention_heads,
        "num_key_value_heads": c.num_key_value_heads,
        "head_dim": c.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": c.max_position_embeddings,
        "rms_norm_eps": c.rms_norm_eps,
        "rope_theta": c.rope_theta,
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "use_sliding_window": False,
        "sliding_window": None,
        "max_window_layers": c.num_hidden_layers,
        "tie_word_embeddings": c.tie_word_embeddings,
        "bos_token_id": EOT_ID,
        "eos_token_id": EOT_ID,
        "initializer_range": 0.02,
        "use_cache": True,
        "torch_dtype": dtype,
        "mtp_num_hidden_layers": c.mtp_num_hidden_layers,
    }


def hf_rope_theta(hf_cfg):
    rp = getattr(hf_cfg, "rope_parameters", None)
    if isinstance(rp, dict) and "rope_theta" in rp:
        return float(rp["rope_theta"])
    return float(getattr(hf_cfg, "rope_theta"))


def split_export_state(sd):
    """safetensors dict -> (target state_dict, mtp state_dict without the 'mtp.' prefix), f32."""
    tsd = {k: v.float() for k, v in sd.items() if not k.startswith("mtp.")}
    msd = {k[len("mtp."):]: v.float() for k, v in sd.items() if k.startswith("mtp.")}
    return tsd, msd


def hf_state_to_ours(tsd):
    return {("head.weight" if k == "lm_head.weight" else k): v for k, v in tsd.items()}


def load_safetensors_dir(d):
    """Every tensor of an HF directory: model.safetensors, or the shards named by
    model.safetensors.index.json (the layout specdec reads too). CPU tensors, dtypes as stored."""
    from safetensors.torch import load_file
    ip = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(ip):
        with open(ip) as f:
            wm = json.load(f).get("weight_map")
        if not isinstance(wm, dict) or not wm:
            raise ValueError("%s: no weight_map" % ip)
        out = {}
        for shard in sorted(set(wm.values())):
            if os.path.basename(shard) != shard:
                raise ValueError("%s: shard name %r is not a plain file name" % (ip, shard))
            part = load_file(os.path.join(d, shard))
            for k in part:
                if wm.get(k) != shard:
                    raise ValueError("%s: tensor %s of %s is not mapped to that shard" % (ip, k, shard))
            out.update(part)
        missing = [k for k in wm if k not in out]
        if missing:
            raise ValueError("%s: weight_map names %s, which no shard holds" % (ip, missing[0]))
        return out
    return load_file(os.path.join(d, "model.safetensors"))


def cfg_from_hf_config(path):
    """config.json of an HF Qwen3 checkpoint -> Cfg, refusing what the recipe's model code does not
    implement (it must compute exactly the target specdec runs, or the drafter learns the wrong one)."""
    with open(path) as f:
        hc = json.load(f)
    if hc.get("model_type") != "qwen3":
        raise ValueError("%s: model_type %r, want \"qwen3\"" % (path, hc.get("model_type")))
    if "quantization" in hc or "quantization_config" in hc:
        raise ValueError("%s: quantized checkpoint; train the drafter against the bf16/f32 target" % path)
    for k in ("rope_scaling", "rope_parameters"):   # transformers 5 writes rope_parameters {rope_type: default}
        v = hc.get(k)
        if isinstance(v, dict) and v.get("rope_type", v.get("type", "default")) != "default":
            raise ValueError("%s: %s = %r: only plain RoPE is implemented by the recipe's model code" % (path, k, v))
    if hc.get("use_sliding_window"):
        raise ValueError("%s: use_sliding_window = true is not implemented by the recipe's model code" % path)
    if hc.get("attention_bias"):
        raise ValueError("%s: attention_bias = true is not Qwen3" % path)
    d = dict(hc)
    rp = hc.get("rope_parameters")
    if "rope_theta" not in d and isinstance(rp, dict) and "rope_theta" in rp:
        d["rope_theta"] = rp["rope_theta"]
    d["tie_word_embeddings"] = bool(hc.get("tie_word_embeddings", False))   # HF Qwen3Config's default
    d.setdefault("mtp_num_hidden_layers", 1)
    need = [k for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                        "num_key_value_heads", "head_dim", "rms_norm_eps", "rope_theta", "max_position_embeddings")
            if k not in d]
    if need:
        raise ValueError("%s: missing key %s" % (path, need[0]))
    return cfg_from_dict(d)


def load_hf_target(d, mtp_layers=1):
    """An HF Qwen3 directory (no MTP head needed) -> (cfg, Qwen3LM in f32, source dtype). Any mtp.*
    tensors it already has are ignored (a new drafter is trained)."""
    cfg = cfg_from_hf_config(os.path.join(d, "config.json"))
    cfg.mtp_num_hidden_layers = mtp_layers
    sd = load_safetensors_dir(d)
    tsd = {k: v for k, v in sd.items() if not k.startswith("mtp.")}
    if any(k.endswith(".scales") for k in tsd):
        raise ValueError("%s: quantized weights (%s); train against the bf16/f32 target" %
                         (d, next(k for k in tsd if k.endswith(".scales"))))
    if cfg.tie_word_embeddings:
        tsd.pop("lm_head.weight", None)   # some tied checkpoints store the copy anyway
    dtypes = sorted({str(v.dtype).replace("torch.", "") for v in tsd.values()})
    target = Qwen3LM(cfg)
    ours = hf_state_to_ours({k: v.float() for k, v in tsd.items()})
    want = target.state_dict()
    for k in want:
        if k not in ours:
            raise ValueError("%s: tensor %s missing" % (d, "lm_head.weight" if k == "head.weight" else k))
        if tuple(ours[k].shape) != tuple(want[k].shape):
            raise ValueError("%s: tensor %s has shape %s, config.json implies %s" %
                             (d, k, list(ours[k].shape), list(want[k].shape)))
    extra = [k for k in ours if k not in want]
    if extra:
        raise ValueError("%s: unexpected tensor %s" % (d, extra[0]))
    target.load_state_dict(ours, strict=True)
    return cfg, target, dtypes


def load_export(d, device):
    """Load an exported (or attach_mtp.py-made) directory into (cfg, target, mtp) in f32."""
    cfg = cfg_from_hf_config(os.path.join(d, "config.json"))
    tsd, msd = split_export_state(load_safetensors_dir(d))
    if cfg.tie_word_embeddings:
        tsd.pop("lm_head.weight", None)
    target = Qwen3LM(cfg)
    target.load_state_dict(hf_state_to_ours(tsd), strict=True)
    mtp = MTP(cfg)
    mtp.load_state_dict(msd, strict=True)
    return cfg, target.to(device).eval(), mtp.to(device).eval()


def read_prompts(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(l) for l in f if l.strip()]
