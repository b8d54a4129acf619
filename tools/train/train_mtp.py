#!/usr/bin/env python3
"""Stage 3: train the one-layer MTP drafter (mtp.*) against the frozen target.

Train as you infer (see common.mtp_unrolled / depth_mask): D depths unrolled in one step with the
attention pattern of the inference drafter KV cache. Depth 1 pairs the true token x_{j+1} with
the target's h_j; depth d >= 2 pairs the target's greedy token (= the previous depth's draft
whenever it was accepted) with the previous depth's m at position j-1. Loss: soft cross-entropy
against the target's next-token distribution at the predicted position (= KL + const), computed
on the fly (target in bf16 autocast, no grad), weighted per depth (default 1.0 0.8 0.6 0.5 [0.4]).
--mask exact (default): a depth-d entry counts only where its chain's greedy tokens equal the data,
so the target distribution used is exactly the one the drafter is verified against.

  python3 tools/train/train_mtp.py --selftest            # CPU, fp32: batched == literal inference loop
  python3 tools/train/train_mtp.py --data D --work W [--smoke]
  python3 tools/train/train_mtp.py --target-hf DIR --data D --work W   # a user's own Qwen3 target
Writes <work>/mtp.pt ({"cfg", "mtp" (state_dict, names without the "mtp." prefix), "meta"}).
"""
import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from common import (MTP, Cfg, KVCache, Qwen3LM, add_train_args, append_jsonl, cfg_dict, cfg_from_dict, cosine_lr,  # noqa: E402
                    depth_mask, hf_config, init_weights, load_hf_target, load_tokens, mtp_unrolled,
                    param_groups, save_json, valid_masks)

DEFAULT_WEIGHTS = [1.0, 0.8, 0.6, 0.5, 0.4, 0.3]


def target_outputs(target, x):
    """No-grad target pass: h [B, T, H] final hidden, g [B, T] greedy ids, logp [B, T-1, V] f32
    log-softmax at positions 1..T-1 (the drafter entry at j is scored against position j+1)."""
    with torch.no_grad():
        h = target.hidden(x)
        z = target.lm_head(h)
        g = z.argmax(-1)
        logp = torch.log_softmax(z[:, 1:].float(), dim=-1)
    return h, g, logp


def drafter_loss(mtp, emb_w, x, h, g, logp, vmasks, dmasks, weights, head_w=None):
    """Returns (loss, per-depth stacked stats [D, 4] = (ce, kl, top1, count)). emb_w embeds the
    drafter's input tokens, head_w (default: emb_w, a tied target) turns its outputs into logits."""
    D = len(weights)
    head_w = emb_w if head_w is None else head_w
    ms = mtp_unrolled(mtp, emb_w, x, h, g, D, masks=dmasks)
    with torch.no_grad():
        p = logp.exp()
        ent = -(p * logp).sum(-1)                      # [B, L] target entropy
        g_next = g[:, 1:]                              # target greedy for position j+2
    loss = 0.0
    stats = []
    for d in range(D):
        lq = torch.log_softmax(F.linear(ms[d], head_w).float(), dim=-1)
        ce = -(p * lq).sum(-1)                         # [B, L]
        v = vmasks[d]
        n = v.sum().clamp(min=1)
        ce_d = torch.where(v, ce, torch.zeros_like(ce)).sum() / n
        loss = loss + weights[d] * ce_d
        with torch.no_grad():
            kl_d = ce_d - torch.where(v, ent, torch.zeros_like(ent)).sum() / n
            top1 = ((lq.argmax(-1) == g_next) & v).sum() / n
            stats.append(torch.stack([ce_d.detach(), kl_d, top1.float(), v.sum().float()]))
    return loss, torch.stack(stats)


# ----------------------------------------------------------------------------- selftest
def selftest():
    """Tiny fp32 CPU check: the batched unrolled drafter equals a literal inference loop that
    builds the drafter KV cache entry by entry; the target's KV-cached path equals its full
    forward; the loss masks equal their definition; and (if transformers is importable) our
    target equals transformers' Qwen3ForCausalLM on the same weights."""
    torch.manual_seed(0)
    dev = torch.device("cpu")
    c = Cfg(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, max_position_embeddings=64).validate()
    tgt = Qwen3LM(c)
    init_weights(tgt, std=0.1)
    mtp = MTP(c)
    init_weights(mtp, std=0.1)
    with torch.no_grad():
        for mod in (tgt, mtp):
            for name, p_ in mod.named_parameters():
                if p_.dim() == 1:
                    p_.mul_(1 + 0.2 * torch.randn_like(p_))   # non-trivial norm weights
    B, T, D = 2, 21, 4
    L = T - 1
    x = torch.randint(0, c.vocab_size, (B, T))
    worst = {}

    def err(name, a, b):
        e = float((a - b).abs().max())
        worst[name] = max(worst.get(name, 0.0), e)

    with torch.no_grad():
        h = tgt.hidden(x)
        z = tgt.lm_head(h)
        g = z.argmax(-1)
        # 1. target: prefill 7, three single steps, a wrong block then rollback, true block
        for b in range(B):
            cache = KVCache(c.num_hidden_layers, c, T, dev)
            err("target_cache", tgt.hidden_cached(x[b:b + 1, :7], 0, cache)[0], h[b, :7])
            for t in range(7, 10):
                err("target_cache", tgt.hidden_cached(x[b:b + 1, t:t + 1], t, cache)[0], h[b, t:t + 1])
            junk = torch.randint(0, c.vocab_size, (1, 5))
            tgt.hidden_cached(junk, 10, cache)            # a rejected verify block ...
            err("target_cache", tgt.hidden_cached(x[b:b + 1, 10:T], 10, cache)[0], h[b, 10:T])  # ... truncated
        # 2. drafter: batched unrolled vs literal inference loop
        ms = mtp_unrolled(mtp, tgt.emb_w, x, h, g, D)
        assert len(ms) == D and all(m.shape == (B, L, c.hidden_size) for m in ms)
        n_checked = 0
        for b in range(B):
            cache = KVCache(len(mtp.layers), c, T, dev)
            for p in range(L):
                # accept hook for root p: (re)build the true entry at position p (x_{p+1}, h_p)
                m = mtp.step_cached(tgt.emb_w, x[b:b + 1, p + 1:p + 2], h[b:b + 1, p:p + 1], p, cache)
                err("drafter_depth1", m[0, 0], ms[0][b, p])
                n_checked += 1
                for d in range(2, D + 1):
                    j = p + d - 1
                    if j > L - 1:
                        break
                    # draft step: the proposed token (here the target's greedy) with the previous m
                    m = mtp.step_cached(tgt.emb_w, g[b:b + 1, j:j + 1], m, j, cache)
                    err("drafter_depth%d" % d, m[0, 0], ms[d - 1][b, j])
                    err("drafter_logits", tgt.lm_head(m[0, 0]), tgt.lm_head(ms[d - 1][b, j]))
                    n_checked += 1
            # accept hook as one batched call (two slices) == depth 1
            cache = KVCache(len(mtp.layers), c, T, dev)
            m1 = mtp.step_cached(tgt.emb_w, x[b:b + 1, 1:9], h[b:b + 1, 0:8], 0, cache)
            m2 = mtp.step_cached(tgt.emb_w, x[b:b + 1, 9:T], h[b:b + 1, 8:L], 8, cache)
            err("drafter_batched_hook", torch.cat([m1, m2], 1)[0], ms[0][b])
        # 3. masks
        vm = valid_masks(x, g, D, exact=True)
        va = valid_masks(x, g, D, exact=False)
        for b in range(B):
            for d in range(1, D + 1):
                for j in range(L):
                    root = j - d + 1
                    ok_all = root >= 0
                    ok_exact = ok_all and all(int(g[b, t - 1]) == int(x[b, t]) for t in range(j - d + 3, j + 2))
                    assert bool(vm[d - 1][b, j]) == ok_exact, (b, d, j)
                    assert bool(va[d - 1][b, j]) == ok_all, (b, d, j)
        for d in range(1, D + 1):
            mk = depth_mask(L, d, dev)
            assert mk.shape == (L, d * L) and int(mk[L - 1].sum()) == (L - d + 1) + (d - 1)
    # 4. loss runs and back-propagates
    logp = torch.log_softmax(z[:, 1:].float(), -1)
    loss, st = drafter_loss(mtp, tgt.emb_w.detach(), x, h, g, logp, va, None, DEFAULT_WEIGHTS[:D])
    loss.backward()
    assert math.isfinite(float(loss.detach())) and all(p_.grad is not None for p_ in mtp.parameters())
    assert bool(torch.isfinite(st).all())
    # 5. HF equivalence of the target on CPU (skipped when transformers is absent)
    # (an API problem only warns here; export.py's from_pretrained check is the binding one,
    #  but a numeric mismatch fails now, before any GPU time is spent on a wrong model)
    try:
        import transformers
        hc = dict(hf_config(c, dtype="float32"))
        hc.pop("architectures")
        hc.pop("model_type")
        hc.pop("torch_dtype")
        hfc = transformers.Qwen3Config(**hc)
        hf = transformers.Qwen3ForCausalLM(hfc).float().eval()
        missing, unexpected = hf.load_state_dict(tgt.state_dict(), strict=False)
        assert not unexpected and all(k == "lm_head.weight" for k in missing), (missing, unexpected)
        with torch.no_grad():
            if hf.lm_head.weight.data_ptr() != hf.model.embed_tokens.weight.data_ptr():
                hf.lm_head.weight.copy_(hf.model.embed_tokens.weight)
            hz = hf(input_ids=x).logits.float()
        worst["hf_logits"] = float((hz - z).abs().max())
        print("[selftest] transformers %s Qwen3ForCausalLM vs ours: max |logit diff| %.2e (logit scale %.2f)" %
              (transformers.__version__, worst["hf_logits"], float(z.abs().max())))
    except Exception as e:  # noqa: BLE001
        print("[selftest] WARNING: HF comparison not run (%s: %s)" % (type(e).__name__, e))
    # 6. the --target-hf path: an untied HF directory on disk -> load_hf_target -> same logits as
    #    transformers; the drafter loss scores with the LM head (not the embedding) of such a target
    try:
        import tempfile
        import transformers
        hc = dict(hf_config(c, dtype="float32"))
        for k in ("architectures", "model_type", "torch_dtype", "mtp_num_hidden_layers"):
            hc.pop(k)
        hc["tie_word_embeddings"] = False
        hfu = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**hc)).float().eval()
        with tempfile.TemporaryDirectory() as td:
            hfu.save_pretrained(td)
            cu, tu, _ = load_hf_target(td)
        assert not cu.tie_word_embeddings and not torch.equal(tu.head_w, tu.emb_w)
        with torch.no_grad():
            err("hf_untied_logits", hfu(input_ids=x).logits.float(), tu(x))
            mu = MTP(cu)
            mu.load_state_dict(mtp.state_dict())
            hu = tu.hidden(x)
            zu = tu.lm_head(hu)
            gu = zu.argmax(-1)
            lpu = torch.log_softmax(zu[:, 1:].float(), -1)
            vu = valid_masks(x, gu, 1, exact=True)
            lu, _ = drafter_loss(mu, tu.emb_w, x, hu, gu, lpu, vu, None, [1.0], tu.head_w)
            m1 = mtp_unrolled(mu, tu.emb_w, x, hu, gu, 1)[0]
            ce = -(lpu.exp() * torch.log_softmax(tu.lm_head(m1).float(), -1)).sum(-1)
            err("untied_loss", lu, ce[vu[0]].sum() / vu[0].sum().clamp(min=1))
        print("[selftest] untied HF directory via load_hf_target: logits and drafter loss checked")
    except ImportError as e:
        print("[selftest] WARNING: untied HF check not run (%s)" % e)
    print("[selftest] %d drafter entries checked; max abs errors: %s" %
          (n_checked, json.dumps({k: float("%.3g" % v) for k, v in worst.items()})))
    for k, v in worst.items():
        assert v < 1e-4, "selftest %s error %.3g too large" % (k, v)
    print("[selftest] OK")


def check_against_transformers(d, target, cfg, dev, n=64):
    """--target-hf: our model code on the loaded weights must reproduce transformers' logits for the
    directory, or the drafter would learn a target specdec does not run. f32, TF32 off, 2 x n tokens."""
    try:
        import transformers
    except ImportError:
        print("[mtp] WARNING: transformers not importable; target not checked against it", flush=True)
        return
    kw = {"dtype": torch.float32} if int(transformers.__version__.split(".")[0]) >= 5 else {"torch_dtype": torch.float32}
    hf = transformers.Qwen3ForCausalLM.from_pretrained(d, attn_implementation="eager", **kw).to(dev).eval()
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        g = torch.Generator(device="cpu").manual_seed(7)
        x = torch.randint(0, cfg.vocab_size, (2, min(n, cfg.max_position_embeddings)), generator=g).to(dev)
        target.to(dev)
        with torch.no_grad():
            zh = hf(input_ids=x).logits.float()
            zo = target(x).float()
        diff, scale = float((zh - zo).abs().max()), float(zh.abs().max())
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        del hf
        torch.cuda.empty_cache()
    print("[mtp] transformers %s vs ours on %s: max |logit diff| %.3g (logit scale %.3g)" %
          (transformers.__version__, d, diff, scale), flush=True)
    assert diff <= 1e-3 * max(1.0, scale), "the recipe's model code does not reproduce %s (diff %.3g)" % (d, diff)


# ----------------------------------------------------------------------------- training
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--selftest", action="store_true")
    ap.add_argument("--data")
    ap.add_argument("--work")
    add_train_args(ap, seed=4321, lr=1e-3, train_seconds=450, batch=(8, 4), warmup=100, calib_steps=50,
                   eval_windows=32)
    ap.add_argument("--depths", type=int, default=4)
    ap.add_argument("--weights", type=str, default="", help="comma list, default 1.0,0.8,0.6,0.5[,0.4]")
    ap.add_argument("--mask", choices=["exact", "all"], default="exact")
    ap.add_argument("--target-hf", metavar="DIR", help="train against this HF Qwen3 directory (bf16/f16/f32 "
                    "safetensors, tied or untied head, no MTP head needed) instead of WORK/target.pt; "
                    "tools/train/attach_mtp.py then writes the drafter into a copy of it")
    ap.add_argument("--mtp-layers", type=int, default=1, help="decoder layers of the drafter (--target-hf)")
    ap.add_argument("--no-hf-check", action="store_true", help="--target-hf: skip the transformers logits check")
    a = ap.parse_args()
    if a.selftest:
        return selftest()
    assert a.data and a.work
    S = a.smoke
    train_seconds = a.train_seconds if a.train_seconds is not None else (20.0 if S else 450.0)
    B = a.batch or (4 if S else 8)
    T = a.seq or (256 if S else 1024)
    L = T - 1
    D = a.depths
    weights = [float(w) for w in a.weights.split(",")] if a.weights else DEFAULT_WEIGHTS[:D]
    assert len(weights) == D
    warmup = a.warmup if a.warmup is not None else (5 if S else 100)
    calib = a.calib_steps or (10 if S else 50)
    eval_every = a.eval_every or (20 if S else 500)

    assert torch.cuda.is_available()
    dev = torch.device("cuda")
    torch.manual_seed(a.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    log_path = os.path.join(a.work, "logs", "mtp_log.jsonl")
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    if os.path.exists(log_path):
        os.remove(log_path)

    if a.target_hf:
        # a user's target: trained against exactly the weights stored in its directory
        cfg, target, dtypes = load_hf_target(a.target_hf, a.mtp_layers)
        print("[mtp] target %s: %d layers, hidden %d, vocab %d, %s head, weights %s" %
              (a.target_hf, cfg.num_hidden_layers, cfg.hidden_size, cfg.vocab_size,
               "tied" if cfg.tie_word_embeddings else "untied", ",".join(dtypes)), flush=True)
        if not a.no_hf_check:
            check_against_transformers(a.target_hf, target, cfg, dev)
    else:
        ck = torch.load(os.path.join(a.work, "target.pt"), map_location="cpu")
        cfg = cfg_from_dict(ck["cfg"])
        target = Qwen3LM(cfg)
        # the drafter trains against the target exactly as shipped: bf16-rounded weights
        target.load_state_dict({k: v.bfloat16().float() for k, v in ck["model"].items()})
    assert T <= cfg.max_position_embeddings, "--seq %d exceeds the target's context %d" % (T, cfg.max_position_embeddings)
    train_probe = load_tokens(os.path.join(a.data, "train.bin"))
    top = int(train_probe.max())
    assert top < cfg.vocab_size, "%s: token id %d >= the target's vocab_size %d (another tokenizer?)" % (
        os.path.join(a.data, "train.bin"), top, cfg.vocab_size)
    del train_probe
    target.eval()
    for p_ in target.parameters():
        p_.requires_grad_(False)
    mtp = MTP(cfg)
    mtp.init_from_target(target, a.seed)
    target.to(dev)
    mtp.to(dev)
    emb_w = target.emb_w
    head_w = target.head_w
    assert emb_w.device.type == "cuda" and not emb_w.requires_grad and not head_w.requires_grad
    opt = torch.optim.AdamW(param_groups(mtp, a.wd), lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)

    train = load_tokens(os.path.join(a.data, "train.bin")).to(dev)
    held = load_tokens(os.path.join(a.data, "heldout.bin")).to(dev)
    nwin = min(a.eval_windows, (held.numel() - 1) // T)
    nwin = max(B, (nwin // B) * B)
    assert (nwin) * T + 1 <= held.numel(), "held-out too small"
    ew = torch.stack([held[i * T:i * T + T] for i in range(nwin)]).long()
    dmasks = [depth_mask(L, d, dev) for d in range(1, D + 1)]
    gen = torch.Generator(device=dev)
    gen.manual_seed(a.seed)

    def tgt_fn(x):
        return target_outputs(target, x)

    def loss_fn(x, h, g, logp, vm):
        return drafter_loss(mtp, emb_w, x, h, g, logp, vm, dmasks, weights, head_w)

    c_tgt = tgt_fn if a.no_compile else torch.compile(tgt_fn)
    c_loss = loss_fn if a.no_compile else torch.compile(loss_fn)
    compiled_ok = not a.no_compile

    def run(x):
        """Loss and stats through the compiled graphs. Evals call this too, in grad mode with the
        same shapes (and simply skip backward), so they reuse the training graph: no recompile."""
        nonlocal c_tgt, c_loss, compiled_ok
        with torch.autocast("cuda", dtype=torch.bfloat16):
            try:
                h, g, logp = c_tgt(x)
                vm = valid_masks(x, g, D, exact=(a.mask == "exact"))
                return c_loss(x, h, g, logp, vm)
            except Exception as e:
                if not compiled_ok:
                    raise
                print("[mtp] WARNING torch.compile failed (%s: %s); running eager" % (type(e).__name__, e), flush=True)
                c_tgt, c_loss, compiled_ok = tgt_fn, loss_fn, False
                h, g, logp = c_tgt(x)
                vm = valid_masks(x, g, D, exact=(a.mask == "exact"))
                return c_loss(x, h, g, logp, vm)

    eval_time = 0.0

    def do_eval():
        nonlocal eval_time
        t0 = time.time()
        acc = torch.zeros(D, 4, device=dev)
        for i in range(0, nwin, B):
            loss_, st = run(ew[i:i + B])
            del loss_
            acc[:, :3] += st[:, :3] * st[:, 3:4]
            acc[:, 3] += st[:, 3]
        res = {"ce": [], "kl": [], "top1": [], "n": []}
        for d in range(D):
            n = max(1.0, float(acc[d, 3]))
            res["ce"].append(float(acc[d, 0]) / n)
            res["kl"].append(float(acc[d, 1]) / n)
            res["top1"].append(float(acc[d, 2]) / n)
            res["n"].append(int(acc[d, 3]))
        eval_time = time.time() - t0
        return res

    t_start = time.time()
    r0 = do_eval()
    print("[mtp] step 0 held-out top1 per depth %s kl %s (eval %.1f s)" %
          (["%.3f" % v for v in r0["top1"]], ["%.3f" % v for v in r0["kl"]], eval_time), flush=True)
    append_jsonl(log_path, {"step": 0, "t": time.time() - t_start, "heldout": r0})
    total = a.steps if a.steps > 0 else None
    step = 0
    acc = torch.zeros(D, 4, device=dev)
    acc_loss = torch.zeros((), device=dev)
    acc_n = 0
    t_log = time.time()
    t_c0 = None
    while total is None or step < total:
        lr = cosine_lr(step, total if total is not None else 10**9, warmup, a.lr, a.min_lr_frac)
        for gp in opt.param_groups:
            gp["lr"] = lr
        starts = torch.randint(0, train.numel() - T, (B,), device=dev, generator=gen)
        x = train[starts[:, None] + torch.arange(T, device=dev)[None, :]].long()
        loss, st = run(x)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(mtp.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        acc_loss += loss.detach()
        acc += st
        acc_n += 1
        step += 1
        if step == 20 and total is None:
            torch.cuda.synchronize()
            t_c0 = time.time()
        if step == calib and total is None:
            torch.cuda.synchronize()
            per_step = (time.time() - t_c0) / (calib - 20) if calib > 20 else (time.time() - t_start) / calib
            r = do_eval()
            append_jsonl(log_path, {"step": step, "t": time.time() - t_start, "heldout": r})
            remaining = train_seconds - (time.time() - t_start) - 3.0
            total = max(step + 1, warmup + 1, step + int(remaining / (per_step + eval_time / eval_every)))
            print("[mtp] calibrated: %.1f ms/step, eval %.2f s -> total %d steps" % (per_step * 1e3, eval_time, total),
                  flush=True)
            append_jsonl(log_path, {"calibrated_total_steps": total, "ms_per_step": per_step * 1e3})
        if step % a.log_every == 0 or step == total:
            l = float(acc_loss) / acc_n
            assert math.isfinite(l), "mtp loss not finite at step %d" % step
            now = time.time()
            top1 = (acc[:, 2] / acc_n).tolist()
            kl = (acc[:, 1] / acc_n).tolist()
            append_jsonl(log_path, {"step": step, "t": now - t_start, "lr": lr, "loss": l, "gnorm": float(gnorm),
                                    "top1": top1, "kl": kl, "steps_per_s": acc_n / (now - t_log)})
            if step % (a.log_every * 8) == 0 or step == total:
                print("[mtp] step %d/%s t %.0fs loss %.4f top1 %s" %
                      (step, total, now - t_start, l, ["%.3f" % v for v in top1]), flush=True)
            acc.zero_()
            acc_loss.zero_()
            acc_n = 0
            t_log = now
        if step % eval_every == 0 or step == total:
            r = do_eval()
            print("[mtp] step %d held-out top1 %s kl %s" %
                  (step, ["%.3f" % v for v in r["top1"]], ["%.3f" % v for v in r["kl"]]), flush=True)
            append_jsonl(log_path, {"step": step, "t": time.time() - t_start, "heldout": r})
        if total is None and time.time() - t_start > train_seconds + 300:  # safety
            total = step
    r = do_eval()
    meta = {"steps": step, "train_seconds": time.time() - t_start, "depths": D, "weights": weights,
            "mask": a.mask, "batch": B, "seq": T, "lr": a.lr, "warmup": warmup, "seed": a.seed,
            "final_heldout": r, "compiled": compiled_ok, "smoke": S,
            "max_gpu_mem_gib": torch.cuda.max_memory_allocated() / 2**30,
            "init": "layers <- target last layer, mtp.norm <- model.norm, fc <- 0.5*[I|I] + N(0,0.002)",
            "target": os.path.abspath(a.target_hf) if a.target_hf else os.path.join(a.work, "target.pt"),
            "data": os.path.abspath(a.data)}
    print("[mtp] done: %s" % json.dumps(meta), flush=True)
    sd = {k: v.detach().float().cpu() for k, v in mtp.state_dict().items()}
    torch.save({"cfg": cfg_dict(cfg), "mtp": sd, "meta": meta}, os.path.join(a.work, "mtp.pt"))
    save_json(os.path.join(a.work, "logs", "mtp_summary.json"), meta)


if __name__ == "__main__":
    main()
