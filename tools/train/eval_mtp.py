#!/usr/bin/env python3
"""Stage 5: PyTorch reference of specdec's speculative round with the MTP drafter.

Loads the exported directory (bf16 weights, f32 compute, TF32 off), and for every held-out
prompt: (1) plain greedy decoding of --new tokens with a KV cache; (2) the round of
../shared/docs/design.md at block sizes K (default 4 and 6), literally:
  prefill the prompt (target), emit the first token (the first bonus); accept hook: the drafter
    builds its entries for positions 0..n-1 in one batched call (entry i pairs x_{i+1} with h_i)
    and proposes d_1 from the last one;
  round: draft d_2..d_{K-1} (entry at position p+1 pairs the previous draft with the previous m);
    verify: the target runs once over [bonus, d_1..d_{K-1}] (T = K) appending K cache entries;
    walk: accepted = agreeing prefix; emit d_1..d_accepted + the target's token after it (bonus);
    finalize: the target cache is cut back to the accepted length (later writes overwrite);
    accept hook: drafter entries for the verified positions are rebuilt from the target's true
    hidden states in one batched call; its last entry proposes the next d_1.
Stats per round: drafted, accepted, acceptance per depth (reached / accepted), tau = emitted /
rounds (bonus included). Rounds run until >= --new tokens were emitted (the first token from the
prefill is not a round's); the output is cut to --new tokens and compared with plain greedy.
EOS is not a stop (fixed-length generation). Writes <out> (mtp_eval.json).

  python3 tools/train/eval_mtp.py --model /tmp/sdtrain/export --prompts tests/data/prompts/heldout.jsonl --out X.json
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from common import KVCache, load_export, read_prompts, save_json  # noqa: E402
from counts import median_tau, sum_counts  # noqa: E402


class Ref:
    def __init__(self, target, mtp, dev):
        self.t, self.m, self.dev = target, mtp, dev
        self.cfg = target.cfg
        self.emb_w = target.emb_w

    def ids(self, lst):
        return torch.tensor([lst], device=self.dev, dtype=torch.long)

    def argmax_last(self, h):
        return int(self.t.lm_head(h[0, -1]).argmax())

    @torch.no_grad()
    def greedy(self, prompt, n_new):
        cache = KVCache(self.cfg.num_hidden_layers, self.cfg, len(prompt) + n_new + 1, self.dev)
        h = self.t.hidden_cached(self.ids(prompt), 0, cache)
        out = [self.argmax_last(h)]
        pos = len(prompt)
        while len(out) < n_new:
            h = self.t.hidden_cached(self.ids([out[-1]]), pos, cache)
            pos += 1
            out.append(self.argmax_last(h))
        return out

    @torch.no_grad()
    def spec(self, prompt, n_new, K):
        assert K >= 2
        n0 = len(prompt)
        max_len = n0 + n_new + 2 * K + 2
        assert max_len <= self.cfg.max_position_embeddings, "prompt + new tokens exceed the context"
        tc = KVCache(self.cfg.num_hidden_layers, self.cfg, max_len, self.dev)
        dc = KVCache(len(self.m.layers), self.cfg, max_len, self.dev)
        # prefill: target positions 0..n0-1, first bonus
        h = self.t.hidden_cached(self.ids(prompt), 0, tc)
        bonus = self.argmax_last(h)
        out = [bonus]
        # accept hook after the prefill: drafter entries 0..n0-1 (x_{i+1}, h_i), x_{n0} = bonus
        m = self.m.step_cached(self.emb_w, self.ids(prompt[1:] + [bonus]), h, 0, dc)
        m_last = m[:, -1:]
        d1 = self.argmax_last(m_last)
        n = n0 + 1          # tokens in the context including the bonus (at position n-1)
        rounds = emitted = drafted = accepted = 0
        reached = [0] * (K - 1)
        acc = [0] * (K - 1)
        per_round = []
        while len(out) < n_new:
            # 1. draft: d_1 came from the accept hook; d_k from the entry at position n+k-3
            drafts = [d1]
            mm = m_last
            for k in range(2, K):
                mm = self.m.step_cached(self.emb_w, self.ids([drafts[-1]]), mm, n + k - 3, dc)
                drafts.append(self.argmax_last(mm))
            # 2. verify: T = K positions n-1 .. n+K-2
            hv = self.t.hidden_cached(self.ids([bonus] + drafts), n - 1, tc)
            choice = self.t.lm_head(hv[0]).argmax(-1).tolist()   # choice[i]: target's token for position n+i
            # 3. walk
            a = 0
            while a < K - 1 and drafts[a] == choice[a]:
                a += 1
            new_bonus = choice[a]
            out.extend(drafts[:a] + [new_bonus])
            rounds += 1
            emitted += a + 1
            drafted += K - 1
            accepted += a
            for i in range(K - 1):
                if a >= i:
                    reached[i] += 1
                if a > i:
                    acc[i] += 1
            per_round.append(a)
            # 4. finalize: target cache valid for positions 0..n-1+a (next verify starts at n+a)
            # 5. accept hook: rebuild drafter entries n-1..n-1+a from true hidden states
            m = self.m.step_cached(self.emb_w, self.ids(drafts[:a] + [new_bonus]), hv[:, :a + 1], n - 1, dc)
            m_last = m[:, -1:]
            d1 = self.argmax_last(m_last)
            bonus = new_bonus
            n += a + 1
        return out[:n_new], {"rounds": rounds, "emitted": emitted, "drafted": drafted, "accepted": accepted,
                             "reached": reached, "acc": acc, "accepted_per_round": per_round}


def summarize(rows, K):
    tot = sum_counts(rows, K, ("rounds", "emitted", "drafted", "accepted"), ("reached", "acc"))
    R = max(1, tot["rounds"])
    return {"prompts": len(rows), "rounds": tot["rounds"], "emitted": tot["emitted"],
            "tau": tot["emitted"] / R, "mean_accepted": tot["accepted"] / R,
            "acceptance_rate": tot["accepted"] / max(1, tot["drafted"]),
            "acceptance_per_depth_conditional": [tot["acc"][i] / max(1, tot["reached"][i]) for i in range(K - 1)],
            "acceptance_per_depth_of_rounds": [tot["acc"][i] / R for i in range(K - 1)],
            "reached_per_depth": tot["reached"], "accepted_per_depth": tot["acc"],
            "tau_per_prompt_median": median_tau(rows)}


def eval_prompts(ref, tok, prompts, idxs, n_new, Ks, tag=""):
    """The records of prompts[i] for i in idxs: plain greedy, then the round at every K."""
    t0 = time.time()
    recs = []
    for j, i in enumerate(idxs):
        p = prompts[i]
        ids = tok.encode(p["prompt"], add_special_tokens=False).ids
        g = ref.greedy(ids, n_new)
        rec = {"index": i, "id": p["id"], "kind": p["kind"], "prompt_tokens": len(ids), "greedy": g}
        for K in Ks:
            out, st = ref.spec(ids, n_new, K)
            st["first_diff"] = next((k for k in range(n_new) if out[k] != g[k]), None)
            st["tau"] = st["emitted"] / max(1, st["rounds"])
            rec["K%d" % K] = st
        recs.append(rec)
        if j < 2 or (j + 1) % 8 == 0:
            print("[eval%s] %d/%d %s: %s (%.0f s)" % (tag, j + 1, len(idxs), p["id"],
                  " ".join("K%d tau %.2f" % (K, rec["K%d" % K]["tau"]) for K in Ks), time.time() - t0), flush=True)
    return recs


def run_workers(a, n_prompts):
    """Shard the prompts over a.workers processes on the same GPU (each is launch-bound at batch 1,
    so they overlap almost perfectly); returns the records in prompt order, or None if any failed."""
    import subprocess
    procs, outs = [], []
    for w in range(a.workers):
        o = "%s.shard%d" % (a.out, w)
        outs.append(o)
        cmd = [sys.executable, os.path.abspath(__file__), "--model", a.model, "--prompts", a.prompts, "--out", o,
               "--new", str(a.new), "--ks", a.ks, "--limit", str(a.limit), "--shard", "%d/%d" % (w, a.workers)]
        procs.append(subprocess.Popen(cmd))
    rcs = [p.wait() for p in procs]
    if any(rcs):
        print("[eval] WARNING worker exit codes %s; falling back to one process" % rcs, flush=True)
        return None
    recs = []
    for o in outs:
        recs.extend(json.load(open(o))["records"])
        os.remove(o)
    recs.sort(key=lambda r: r["index"])
    if [r["index"] for r in recs] != list(range(n_prompts)):
        print("[eval] WARNING workers returned %d records for %d prompts; falling back" % (len(recs), n_prompts), flush=True)
        return None
    return recs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--ks", type=str, default="4,6")
    ap.add_argument("--limit", type=int, default=0, help="smoke: first N prompts of each kind")
    ap.add_argument("--workers", type=int, default=1, help="processes sharing the GPU (results are identical)")
    ap.add_argument("--shard", type=str, default="", help="internal: W/N, write this shard's raw records")
    a = ap.parse_args()
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(a.model, "tokenizer.json"))
    prompts = read_prompts(a.prompts)
    if a.limit:
        prompts = [p for p in prompts if p["kind"] == "c"][:a.limit] + [p for p in prompts if p["kind"] == "en"][:a.limit]
    Ks = [int(k) for k in a.ks.split(",")]
    t0 = time.time()
    if a.shard:
        w, n = (int(x) for x in a.shard.split("/"))
        cfg, target, mtp = load_export(a.model, dev)
        recs = eval_prompts(Ref(target, mtp, dev), tok, prompts, list(range(w, len(prompts), n)), a.new, Ks, " %d/%d" % (w, n))
        save_json(a.out, {"records": recs})
        return
    recs = run_workers(a, len(prompts)) if a.workers > 1 else None
    if recs is None:
        cfg, target, mtp = load_export(a.model, dev)
        recs = eval_prompts(Ref(target, mtp, dev), tok, prompts, list(range(len(prompts))), a.new, Ks)
    by = {K: {"c": [], "en": [], "all": []} for K in Ks}
    mismatches = {K: [] for K in Ks}
    for rec in recs:
        for K in Ks:
            st = rec["K%d" % K]
            if st["first_diff"] is not None:
                mismatches[K].append({"id": rec["id"], "first_diff": st["first_diff"]})
            by[K][rec["kind"]].append(st)
            by[K]["all"].append(st)
    per_prompt = recs
    res = {"model": a.model, "new_tokens": a.new, "block_sizes": Ks, "compute": "float32, bf16 weights, TF32 off",
           "protocol": "design.md round; tau = emitted/rounds incl. bonus; first token (prefill) not counted; "
                       "all rounds counted, output cut to new_tokens; eos not a stop",
           "workers": a.workers,
           "summary": {}, "mismatch_vs_greedy": mismatches, "seconds": None, "per_prompt": per_prompt,
           "samples": [{"id": r["id"], "continuation": tok.decode(r["greedy"])} for r in per_prompt[:2] +
                       [r for r in per_prompt if r["kind"] == "en"][:1]]}
    for K in Ks:
        res["summary"]["K%d" % K] = {kind: summarize(rows, K) for kind, rows in by[K].items() if rows}
        s = res["summary"]["K%d" % K]
        print("[eval] K=%d: %s" % (K, "; ".join("%s tau %.3f acc/depth %s" % (
            kind, v["tau"], ["%.3f" % x for x in v["acceptance_per_depth_conditional"]]) for kind, v in s.items())),
            flush=True)
        if mismatches[K]:
            print("[eval] WARNING K=%d: %d prompts differ from plain greedy (f32 near-ties): %s" %
                  (K, len(mismatches[K]), mismatches[K][:4]), flush=True)
    res["seconds"] = time.time() - t0
    save_json(a.out, res)
    print("[eval] wrote %s in %.0f s" % (a.out, res["seconds"]), flush=True)


if __name__ == "__main__":
    main()
