#!/usr/bin/env python3
"""Stage 2: train the Qwen3-architecture target on the tokenized kernel corpus (one GPU).

Time-based budget made deterministic: the first --calib-steps steps are timed, then the total
step count is fixed from the remaining --train-seconds (compile and evals included) and the
cosine schedule runs to exactly that count. The chosen count is logged; `--steps N` replays a run
with the same data order and schedule (same seed). GPU kernels are not bitwise deterministic.

  python3 tools/train/train_target.py --data /tmp/sdtrain/data --work /tmp/sdtrain [--smoke]
Writes <work>/target.pt ({"cfg", "model" (f32 state_dict, HF names), "meta"}) and
<work>/logs/target_log.jsonl (train loss, held-out loss, lr, tokens/s).
"""
import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import budget  # noqa: E402
from common import (Cfg, Qwen3LM, add_train_args, append_jsonl, cfg_dict, cosine_lr, init_weights, load_tokens,  # noqa: E402
                    param_groups, save_json, smoke_cfg)


def get_batch(tokens, B, T, gen):
    """B random windows of T+1 tokens -> x [B, T], y [B, T] (int64, on tokens' device)."""
    starts = torch.randint(0, tokens.numel() - T - 1, (B,), device=tokens.device, generator=gen)
    idx = starts[:, None] + torch.arange(T + 1, device=tokens.device)[None, :]
    w = tokens[idx].long()
    return w[:, :-1], w[:, 1:]


def heldout_loss(model_fn, eval_x, eval_y, B):
    """Mean held-out loss. Runs the SAME compiled graph as training (grad mode on, same batch
    shape, no eval() toggle) so it costs no second compile; the autograd graph is dropped."""
    tot, n = 0.0, 0
    for i in range(0, eval_x.shape[0], B):
        x, y = eval_x[i:i + B], eval_y[i:i + B]
        if x.shape[0] < B:
            break
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model_fn(x, y)
        tot += float(loss.detach()) * x.shape[0]
        n += x.shape[0]
        del loss
    return tot / max(1, n)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--work", required=True)
    add_train_args(ap, seed=1234, lr=1.5e-3, train_seconds=660, batch=(32, 8), warmup=250, calib_steps=60,
                   eval_windows=256)
    a = ap.parse_args()
    S = a.smoke
    train_seconds = a.train_seconds if a.train_seconds is not None else (20.0 if S else 660.0)
    B = a.batch or (8 if S else 32)
    T = a.seq or (256 if S else 1024)
    warmup = a.warmup if a.warmup is not None else (5 if S else 250)
    calib = a.calib_steps or (10 if S else 60)
    eval_every = a.eval_every or (20 if S else 500)

    assert torch.cuda.is_available(), "train_target.py needs a GPU"
    dev = torch.device("cuda")
    os.makedirs(os.path.join(a.work, "logs"), exist_ok=True)
    log_path = os.path.join(a.work, "logs", "target_log.jsonl")
    if os.path.exists(log_path):
        os.remove(log_path)
    torch.manual_seed(a.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True

    cfg = smoke_cfg() if S else Cfg()
    cfg.validate()
    assert T <= cfg.max_position_embeddings
    print("[target] cfg %s" % json.dumps(cfg_dict(cfg)), flush=True)
    if not S:
        mib = budget.check(cfg_dict(cfg))
        assert mib <= budget.LIMIT_MIB, "shipped size %.2f MiB over budget" % mib

    train = load_tokens(os.path.join(a.data, "train.bin")).to(dev)
    held = load_tokens(os.path.join(a.data, "heldout.bin")).to(dev)
    nwin = min(a.eval_windows, (held.numel() - 1) // T)
    nwin = (nwin // B) * B
    assert nwin >= B, "held-out too small for one eval batch"
    ew = torch.stack([held[i * T:i * T + T + 1] for i in range(nwin)]).long()
    eval_x, eval_y = ew[:, :-1].contiguous(), ew[:, 1:].contiguous()
    print("[target] train %d tokens, held-out %d tokens, eval slice %d x %d" %
          (train.numel(), held.numel(), nwin, T), flush=True)

    model = Qwen3LM(cfg)
    init_weights(model)
    model.to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    print("[target] params %d" % n_params, flush=True)
    opt = torch.optim.AdamW(param_groups(model, a.wd), lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    fwd = model if a.no_compile else torch.compile(model)
    gen = torch.Generator(device=dev)
    gen.manual_seed(a.seed)

    total = a.steps if a.steps > 0 else None
    t_start = time.time()
    step = 0
    acc_loss = torch.zeros((), device=dev)
    acc_n = 0
    t_log = time.time()
    t_calib0 = None
    eval_time = 0.0
    compiled_ok = not a.no_compile

    def do_eval():
        nonlocal eval_time
        t0 = time.time()
        hl = heldout_loss(fwd, eval_x, eval_y, B)
        eval_time = time.time() - t0
        return hl

    hl0 = do_eval()
    print("[target] step 0 held-out loss %.4f (eval %.1f s)" % (hl0, eval_time), flush=True)
    append_jsonl(log_path, {"step": 0, "t": time.time() - t_start, "heldout_loss": hl0})
    while True:
        if total is not None and step >= total:
            break
        lr = cosine_lr(step, total if total is not None else 10**9, warmup, a.lr, a.min_lr_frac)
        for gp in opt.param_groups:
            gp["lr"] = lr
        x, y = get_batch(train, B, T, gen)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            try:
                loss = fwd(x, y)
            except Exception as e:  # compile failure: fall back to eager once, loudly
                if not compiled_ok:
                    raise
                print("[target] WARNING torch.compile failed (%s: %s); running eager" % (type(e).__name__, e), flush=True)
                fwd, compiled_ok = model, False
                loss = fwd(x, y)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        acc_loss += loss.detach()
        acc_n += 1
        step += 1

        if step == 20 and total is None:
            torch.cuda.synchronize()
            t_calib0 = time.time()
        if step == calib and total is None:
            torch.cuda.synchronize()
            per_step = (time.time() - t_calib0) / (calib - 20) if calib > 20 else (time.time() - t_start) / calib
            hl = do_eval()  # timed eval (graph already compiled at step 0)
            append_jsonl(log_path, {"step": step, "t": time.time() - t_start, "heldout_loss": hl})
            remaining = train_seconds - (time.time() - t_start) - 3.0
            per = per_step + eval_time / eval_every
            total = max(step + 1, warmup + 1, step + int(remaining / per))
            print("[target] calibrated: %.1f ms/step, eval %.2f s -> total %d steps (%.0f s budget)" %
                  (per_step * 1e3, eval_time, total, train_seconds), flush=True)
            append_jsonl(log_path, {"calibrated_total_steps": total, "ms_per_step": per_step * 1e3,
                                    "eval_seconds": eval_time})

        if step % a.log_every == 0 or step == total:
            l = float(acc_loss) / acc_n
            assert math.isfinite(l), "training loss is not finite at step %d" % step
            now = time.time()
            tps = acc_n * B * T / (now - t_log)
            rec = {"step": step, "t": now - t_start, "lr": lr, "loss": l, "gnorm": float(gnorm), "tok_per_s": tps}
            append_jsonl(log_path, rec)
            if step % (a.log_every * 8) == 0 or step == total:
                print("[target] step %d/%s t %.0fs lr %.2e loss %.4f gnorm %.2f %.0f tok/s" %
                      (step, total, now - t_start, lr, l, float(gnorm), tps), flush=True)
            acc_loss.zero_()
            acc_n = 0
            t_log = now
        if step % eval_every == 0 or step == total:
            hl = do_eval()
            print("[target] step %d held-out loss %.4f" % (step, hl), flush=True)
            append_jsonl(log_path, {"step": step, "t": time.time() - t_start, "heldout_loss": hl})
        if total is None and time.time() - t_start > train_seconds + 300:  # safety: calibration never reached
            total = step
    train_time = time.time() - t_start
    hl = do_eval()
    meta = {"steps": step, "train_seconds": train_time, "final_heldout_loss": hl, "batch": B, "seq": T,
            "tokens_seen": step * B * T, "train_tokens": train.numel(), "epochs": step * B * T / train.numel(),
            "lr": a.lr, "warmup": warmup, "min_lr_frac": a.min_lr_frac, "wd": a.wd, "seed": a.seed,
            "params": n_params, "compiled": compiled_ok, "smoke": S,
            "max_gpu_mem_gib": torch.cuda.max_memory_allocated() / 2**30}
    print("[target] done: %s" % json.dumps(meta), flush=True)
    sd = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    torch.save({"cfg": cfg_dict(cfg), "model": sd, "meta": meta}, os.path.join(a.work, "target.pt"))
    save_json(os.path.join(a.work, "logs", "target_summary.json"), meta)


if __name__ == "__main__":
    main()
