#!/usr/bin/env python3
"""mtp_agreement.py: specdec's own MTP acceptance measurement vs the PyTorch reference
(tools/train/eval_mtp.py -> mtp_eval.json), prompt by prompt, like with like.

For every held-out prompt and K in the reference's block sizes, runs
  specdec run -m MODEL -p PROMPT -n NEW --draft mtp --block-size K --ignore-eos --stats-json F
(temperature 0) and compares:
  - the greedy text with the reference's greedy ids (decoded by `specdec tokenize --decode`);
  - the counters with the reference's per-round accepted lengths *replayed under specdec's
    budget rule*: specdec never exceeds the budget, so a round's width is min(K, NEW - emitted)
    (emitted starts at 1: the token from the prefill), its drafts are cut to width - 1 and its
    acceptance to min(a, width - 1); the reference always runs full-K rounds and cuts the
    output afterwards. Both loops stop once NEW tokens exist, so the round count is the same.
    Equal integers (rounds, drafted, accepted, emitted, per-depth drafted/accepted) mean the two
    implementations took the same decisions in every round.
Aggregates per kind (c / en / all), both acceptance definitions:
  conditional[d] = accepted_at_depth[d] / accepted_at_depth[d-1] (accepted_at_depth[0] = rounds
                   that drafted depth 1): P(depth d accepted | depth d-1 accepted, d drafted)
  of_rounds[d]   = accepted_at_depth[d] / rounds
Writes a JSON with everything (per prompt) to --out.

  python3 bench/mtp_agreement.py --specdec build-h9/specdec --model .dev/model \
      --ref tools/train/results/2026-12-01/mtp_eval.json --out /tmp/agree-bf16.json
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "train"))
from counts import median_tau, sum_counts  # noqa: E402


def replay(per_round, K, new):
    """The reference's per-round accepted lengths under specdec's budget rule."""
    emitted_total = 1
    c = {"rounds": 0, "drafted": 0, "accepted": 0, "emitted": 0, "dad": [0] * (K - 1), "aad": [0] * (K - 1)}
    for a in per_round:
        if emitted_total >= new:
            break
        w = min(K, new - emitted_total)
        nd = w - 1
        aa = min(a, nd)
        c["rounds"] += 1
        c["drafted"] += nd
        c["accepted"] += aa
        c["emitted"] += aa + 1
        for d in range(nd):
            c["dad"][d] += 1
        for d in range(aa):
            c["aad"][d] += 1
        emitted_total += aa + 1
    return c


def ref_counters(st, K):
    """The reference's own counters (full-K rounds, output cut afterwards)."""
    return {"rounds": st["rounds"], "drafted": st["drafted"], "accepted": st["accepted"], "emitted": st["emitted"],
            "dad": [st["rounds"]] * (K - 1), "aad": list(st["acc"])}


def spec_counters(js, K):
    dad = list(js["drafted_at_depth"]) + [0] * (K - 1)
    aad = list(js["accepted_at_depth"]) + [0] * (K - 1)
    return {"rounds": js["rounds"], "drafted": js["drafted"], "accepted": js["accepted"],
            "emitted": js["emitted_in_rounds"], "dad": dad[:K - 1], "aad": aad[:K - 1]}


def summarize(rows, K):
    t = sum_counts(rows, K, ("rounds", "drafted", "accepted", "emitted"), ("dad", "aad"))
    R = max(1, t["rounds"])
    prev = [t["dad"][0]] + t["aad"][:-1]
    t["tau"] = t["emitted"] / R
    t["conditional"] = [t["aad"][d] / max(1, prev[d]) for d in range(K - 1)]
    t["of_rounds"] = [t["aad"][d] / R for d in range(K - 1)]
    t["acceptance_rate"] = t["accepted"] / max(1, t["drafted"])
    t["tau_per_prompt_median"] = median_tau(rows)
    t["prompts"] = len(rows)
    return t


def run_one(args, p, K, tmpdir):
    sj = os.path.join(tmpdir, "%s-K%d.json" % (p["id"], K))
    cmd = [args.specdec, "run", "-m", args.model, "-p", p["prompt"], "-n", str(args.new), "--draft", "mtp",
           "--block-size", str(K), "--ignore-eos", "--threads", str(args.threads), "--stats-json", sj,
           "--draft-vocab", "none"]   # the reference drafts over the full head; so must we
    r = subprocess.run(cmd, capture_output=True)
    if r.returncode != 0:
        sys.exit("specdec failed on %s K=%d: %s" % (p["id"], K, r.stderr.decode(errors="replace")))
    out = r.stdout
    if out.endswith(b"\n"):
        out = out[:-1]   # specdec run adds one newline after the generation
    with open(sj) as f:
        js = json.load(f)
    return out, js


def decode(args, ids):
    r = subprocess.run([args.specdec, "tokenize", "-m", args.model, "--decode", "-p", json.dumps(ids)],
                       capture_output=True, check=True)
    out = r.stdout
    return out[:-1] if out.endswith(b"\n") else out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--specdec", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--ref", required=True)
    ap.add_argument("--prompts", default="tests/data/prompts/heldout.jsonl")
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    ref = json.load(open(a.ref))
    a.new = ref["new_tokens"]
    Ks = ref["block_sizes"]
    refp = {r["id"]: r for r in ref["per_prompt"]}
    # the prompts the reference ran (all of them, or its --limit subset)
    prompts = [p for p in (json.loads(l) for l in open(a.prompts) if l.strip()) if p["id"] in refp]
    tmpdir = tempfile.mkdtemp(prefix="mtp_agree_")
    jobs = [(p, K) for p in prompts for K in Ks]
    with ThreadPoolExecutor(a.jobs) as ex:
        res = list(ex.map(lambda pk: run_one(a, pk[0], pk[1], tmpdir), jobs))
    with ThreadPoolExecutor(a.jobs) as ex:
        ref_text = dict(zip([p["id"] for p in prompts], ex.map(lambda p: decode(a, refp[p["id"]]["greedy"]), prompts)))
    rows = []
    by = {K: {"ref": {}, "replay": {}, "spec": {}} for K in Ks}
    for (p, K), (out, js) in zip(jobs, res):
        rp = refp[p["id"]]
        st = rp["K%d" % K]
        rc, rr, sc = ref_counters(st, K), replay(st["accepted_per_round"], K, a.new), spec_counters(js, K)
        same = all(rr[k] == sc[k] for k in rr)
        rows.append({"id": p["id"], "kind": p["kind"], "K": K, "prompt_tokens_ref": rp["prompt_tokens"],
                     "prompt_tokens_specdec": js["gen"]["prompt_tokens"], "generated": js["gen"]["generated_tokens"],
                     "text_equals_ref_greedy": out == ref_text[p["id"]], "counters_equal_replay": same,
                     "ref": rc, "replay": rr, "specdec": sc, "text": out.decode("utf-8", errors="replace")})
        for kind in (p["kind"], "all"):
            for name, c in (("ref", rc), ("replay", rr), ("spec", sc)):
                by[K][name].setdefault(kind, []).append(c)
    summ = {"K%d" % K: {name: {kind: summarize(v, K) for kind, v in d.items()} for name, d in by[K].items()} for K in Ks}
    json.dump({"model": a.model, "specdec": a.specdec, "new_tokens": a.new, "block_sizes": Ks, "summary": summ,
               "per_prompt": rows}, open(a.out, "w"), indent=1)
    for K in Ks:
        n = [r for r in rows if r["K"] == K]
        print("K=%d: text == ref greedy %d/%d, prompt tokens equal %d/%d, counters == replay %d/%d" % (
            K, sum(r["text_equals_ref_greedy"] for r in n), len(n),
            sum(r["prompt_tokens_ref"] == r["prompt_tokens_specdec"] for r in n), len(n),
            sum(r["counters_equal_replay"] for r in n), len(n)))
        for kind in ("c", "en", "all"):
            for name in ("ref", "replay", "spec"):
                if kind not in summ["K%d" % K][name]:
                    continue
                s = summ["K%d" % K][name][kind]
                print("  %-3s %-6s tau %.4f rounds %5d emitted %5d cond %s of_rounds %s" % (
                    kind, name, s["tau"], s["rounds"], s["emitted"], " ".join("%.4f" % x for x in s["conditional"]),
                    " ".join("%.4f" % x for x in s["of_rounds"])))


if __name__ == "__main__":
    main()
