#!/usr/bin/env python3
"""make_draft_vocab.py: write a reduced draft vocabulary (EAGLE-3's d2t map) from token counts.
Python standard library only.

    ./build/count_tokens models/qwen3-kernel .dev/corpus/train.txt.xz /tmp/train_counts.tsv
    python3 tools/draft/make_draft_vocab.py /tmp/train_counts.tsv 16384 models/qwen3-kernel/draft_vocab.json \
        --source "train split .dev/corpus/train.txt.xz"

Input: "id<TAB>count" lines (bench/count_tokens.c). Output: {"source": ..., "n": N, "d2t": [...]}
where d2t lists the N most frequent target ids, by descending count, ties by ascending id (so
the file is a pure function of the counts). A prefix of the list is itself a valid smaller
subset: the library's FILE:M takes the first M. Ids listed with --force (e.g. EOS ids) are put
in even when rare, at the end of the list in place of the least frequent ones. --default-n M
records the prefix specdec run/serve take when the file ships in a model directory."""
import argparse, json, sys

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("counts")
    ap.add_argument("n", type=int)
    ap.add_argument("out")
    ap.add_argument("--source", default="")
    ap.add_argument("--force", default="", help="comma-separated ids that must be in the subset")
    ap.add_argument("--default-n", type=int, default=0, help="the prefix specdec takes by default (measure it)")
    ap.add_argument("--default-n-why", default="", help="where that measurement is recorded")
    a = ap.parse_args()
    counts = []
    for ln, line in enumerate(open(a.counts), 1):
        f = line.split()
        if len(f) != 2:
            sys.exit(f"{a.counts}:{ln}: want 'id count'")
        counts.append((int(f[0]), int(f[1])))
    if not 1 <= a.n <= len(counts):
        sys.exit(f"n {a.n} not in 1..{len(counts)}")
    ranked = sorted(counts, key=lambda t: (-t[1], t[0]))
    d2t = [i for i, _ in ranked[:a.n]]
    force = [int(x) for x in a.force.split(",") if x]
    missing = [i for i in force if i not in set(d2t)]
    if missing:
        d2t = d2t[:a.n - len(missing)] + missing
    total = sum(c for _, c in counts)
    covered = sum(c for i, c in counts if i in set(d2t))
    with open(a.out, "w") as o:
        obj = {"source": a.source, "n": len(d2t)}
        if a.default_n:
            if not 1 <= a.default_n <= len(d2t):
                sys.exit(f"--default-n {a.default_n} not in 1..{len(d2t)}")
            obj["default_n"] = a.default_n
            obj["default_n_why"] = a.default_n_why
        obj["coverage"] = round(covered / total, 6) if total else 0
        obj["d2t"] = d2t
        json.dump(obj, o, separators=(",", ":"))
        o.write("\n")
    print(f"{a.out}: n={len(d2t)}, covers {covered}/{total} = {covered / max(total, 1):.4%} of the counted tokens")

if __name__ == "__main__":
    main()
