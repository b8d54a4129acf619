#!/usr/bin/env python3
"""Corpus selection for the specdec training recipe (stage 0; python3 stdlib only).

Walks an unpacked linux-source-6.1 tree and writes:
  <out>/train.txt.xz, <out>/heldout.txt.xz : documents "// FILE: <path>\n<text>\n<|endoftext|>"
  <out>/corpus.json                        : sizes, counts, token estimates, parameters
  <prompts>                                : jsonl of 48 C + 16 English prompts from held-out files

Split by path: held-out = top-level fs/ and sound/, plus Documentation/filesystems/ and
Documentation/sound/ (their prose describes the held-out code). Everything else is train.
Selection: *.c, *.h anywhere; *.rst, *.txt under Documentation/. Files that are not UTF-8,
empty, larger than --max-file-bytes, or mostly hex tables (firmware / register dumps) are skipped.
Train C/H files are sub-sampled by a hash of their path to fit the compressed budget; all train
Documentation is kept (it is the only English, and small). Everything is deterministic: document
order and sub-sampling use sha256 of the path, never the file system order or a clock.
"""
import argparse
import hashlib
import json
import lzma
import os
import re
import subprocess
import sys

EOT = "<|endoftext|>"
HELDOUT_PREFIXES = ("fs/", "sound/", "Documentation/filesystems/", "Documentation/sound/")
BYTES_PER_TOKEN_EST = 3.5


def h(s):
    return hashlib.sha256(s.encode("utf-8")).hexdigest()


def is_heldout(path):
    return path.startswith(HELDOUT_PREFIXES)


def wanted(path):
    if path.endswith((".c", ".h")):
        return True
    return path.startswith("Documentation/") and path.endswith((".rst", ".txt"))


def looks_like_table(text):
    # firmware blobs / register dumps: a large share of the bytes are hex literals
    n = len(text)
    if n < 4096:
        return False
    hexlits = len(re.findall(r"0x[0-9a-fA-F]{2,}", text))
    return hexlits * 6 > 0.4 * n


def load_docs(src, max_file_bytes):
    docs = {}  # path -> text
    skipped = {"not_utf8": 0, "too_big": 0, "empty": 0, "table": 0}
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        for fn in sorted(filenames):
            full = os.path.join(dirpath, fn)
            rel = os.path.relpath(full, src).replace(os.sep, "/")
            if not wanted(rel) or os.path.islink(full):
                continue
            size = os.path.getsize(full)
            if size > max_file_bytes:
                skipped["too_big"] += 1
                continue
            raw = open(full, "rb").read()
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                skipped["not_utf8"] += 1
                continue
            if EOT in text:
                text = text.replace(EOT, "<| endoftext |>")
            if not text.strip():
                skipped["empty"] += 1
                continue
            if looks_like_table(text):
                skipped["table"] += 1
                continue
            docs[rel] = text
    return docs, skipped


def render(path, text):
    if not text.endswith("\n"):
        text += "\n"
    return "// FILE: %s\n%s%s" % (path, text, EOT)


def xz_file(txt_path, level):
    subprocess.run(["xz", "-T2", "-%d" % level, "-f", "-k", txt_path], check=True)
    return os.path.getsize(txt_path + ".xz")


def write_split(path, items):
    with open(path, "w", encoding="utf-8") as f:
        for p, t in items:
            f.write(render(p, t))
    return os.path.getsize(path)


# ---------------------------------------------------------------- prompts
FUNC_RE = re.compile(r"^(static\s+|inline\s+|const\s+|unsigned\s+|struct\s+)*[A-Za-z_][\w]*[\s\*]+[A-Za-z_]\w*\(")


def grow_window(lines, i, hi, stop=None):
    """Lines i, i+1, ... joined with newlines while the text stays within hi characters; stop(w,
    line), when given, ends the window after the line just added."""
    w = ""
    for ln2 in lines[i:]:
        nxt = w + ln2 + "\n"
        if len(nxt) > hi:
            break
        w = nxt
        if stop and stop(w, ln2):
            break
    return w


def c_windows(text, lo=300, hi=600):
    """Candidate windows that start at a function definition line (column 0, previous line
    blank or a comment end) and end at a line break, lo <= len <= hi."""
    lines = text.split("\n")
    out = []
    for i, ln in enumerate(lines):
        if i == 0 or not FUNC_RE.match(ln) or ln.rstrip().endswith(";"):
            continue
        prev = lines[i - 1].strip()
        if prev not in ("", "*/") and not prev.endswith("*/"):
            continue
        if ln.startswith(("return", "if", "else", "for", "while", "switch", "do")):
            continue
        w = grow_window(lines, i, hi, lambda w, ln2: len(w) >= lo and ln2.strip() in ("}", "};", ""))
        if lo <= len(w) <= hi and "{" in w:
            out.append((i + 1, w))
    return out


def prose_ok(w):
    lines = [l for l in w.split("\n") if l.strip()]
    for l in lines:
        s = l.strip()
        if s.startswith(("..", "::", "|", "+-", "===", "---", "~~~", "***", "#", "$", "-", "*")):
            return False
        if "::" in s or "\t" in l or l.startswith("   "):
            return False
    letters = sum(c.isalpha() or c == " " for c in w)
    return letters >= 0.85 * len(w)


def en_windows(text, lo=300, hi=600):
    lines = text.split("\n")
    out = []
    for i, ln in enumerate(lines):
        if i == 0 or lines[i - 1].strip() != "" or not ln[:1].isalpha():
            continue
        w = grow_window(lines, i, hi)
        # end at a paragraph end if one is inside the window past lo
        cut = w.rfind("\n\n")
        if cut + 2 >= lo:
            w = w[: cut + 1]
        if lo <= len(w) <= hi and prose_ok(w):
            out.append((i + 1, w))
    return out


def pick_prompts(held, n_c_each=24, n_en_each=8):
    prompts = []
    groups = [("c", "fs/", n_c_each), ("c", "sound/", n_c_each),
              ("en", "Documentation/filesystems/", n_en_each), ("en", "Documentation/sound/", n_en_each)]
    for kind, prefix, n in groups:
        cands = [p for p in held if p.startswith(prefix) and
                 (p.endswith(".c") if kind == "c" else p.endswith((".rst", ".txt")))]
        cands.sort(key=lambda p: h("prompt:" + p))
        per_dir = {}
        got = 0
        for p in cands:
            if got >= n:
                break
            d = "/".join(p.split("/")[:3 if kind == "en" else 2])
            if per_dir.get(d, 0) >= (2 if kind == "c" else 3):
                continue
            wins = c_windows(held[p]) if kind == "c" else en_windows(held[p])
            if not wins:
                continue
            line, w = wins[int(h("win:" + p), 16) % len(wins)]
            per_dir[d] = per_dir.get(d, 0) + 1
            got += 1
            tag = prefix.rstrip("/").replace("/", "-").lower()
            prompts.append({"id": "%s-%s-%02d" % (kind, tag, got), "kind": kind, "source": p,
                            "line": line, "prompt": "// FILE: %s\n%s" % (p, w)})
        assert got == n, "only %d prompts for %s" % (got, prefix)
    return prompts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--budget-mib", type=float, default=50.0, help="train.xz + heldout.xz target")
    ap.add_argument("--heldout-max-bytes", type=int, default=12_000_000)
    ap.add_argument("--max-file-bytes", type=int, default=200_000)
    ap.add_argument("--xz-level", type=int, default=6)
    a = ap.parse_args()

    docs, skipped = load_docs(a.src, a.max_file_bytes)
    print("[select] %d documents kept, skipped %s" % (len(docs), skipped), flush=True)
    held_all = {p: t for p, t in docs.items() if is_heldout(p)}
    train_all = {p: t for p, t in docs.items() if not is_heldout(p)}
    assert not any(p.startswith(HELDOUT_PREFIXES) for p in train_all)

    # prompts come from the held-out set (all of it; the held-out text file is a subset)
    prompts = pick_prompts(held_all)
    os.makedirs(os.path.dirname(a.prompts), exist_ok=True)
    with open(a.prompts, "w", encoding="utf-8") as f:
        for pr in prompts:
            f.write(json.dumps(pr, ensure_ascii=False) + "\n")
    print("[select] wrote %d prompts to %s" % (len(prompts), a.prompts), flush=True)

    # held-out text: hash order, capped, but always including the prompt source files
    prompt_src = {pr["source"] for pr in prompts}
    held_order = sorted(held_all, key=lambda p: (p not in prompt_src, h("doc:" + p)))
    held_items, nbytes = [], 0
    for p in held_order:
        b = len(held_all[p].encode("utf-8"))
        if nbytes + b > a.heldout_max_bytes and p not in prompt_src:
            continue
        held_items.append((p, held_all[p]))
        nbytes += b
    held_items.sort(key=lambda it: h("doc:" + it[0]))

    # train: all Documentation, C/H sub-sampled in hash order to a byte budget
    tdoc = sorted([p for p in train_all if p.startswith("Documentation/")], key=lambda p: h("doc:" + p))
    tsrc = sorted([p for p in train_all if not p.startswith("Documentation/")], key=lambda p: h("doc:" + p))
    # compression ratio estimate from a deterministic ~16 MB sample
    sample, sb = [], 0
    for p in tsrc:
        sample.append(render(p, train_all[p]))
        sb += len(sample[-1])
        if sb > 16_000_000:
            break
    sample = "".join(sample).encode("utf-8")
    ratio = len(lzma.compress(sample, preset=a.xz_level)) / len(sample)
    print("[select] xz-%d ratio on a %.1f MB sample: %.4f" % (a.xz_level, len(sample) / 1e6, ratio), flush=True)

    held_path = os.path.join(a.out, "heldout.txt")
    train_path = os.path.join(a.out, "train.txt")
    held_raw = write_split(held_path, held_items)
    held_xz = xz_file(held_path, a.xz_level)
    budget = a.budget_mib * 2**20
    doc_bytes = sum(len(render(p, train_all[p]).encode("utf-8")) for p in tdoc)
    target_raw = (budget - held_xz) / ratio
    for attempt in range(4):
        items, nb = [], doc_bytes
        items = [(p, train_all[p]) for p in tdoc]
        for p in tsrc:
            b = len(render(p, train_all[p]).encode("utf-8"))
            if nb + b > target_raw:
                continue
            items.append((p, train_all[p]))
            nb += b
        items.sort(key=lambda it: h("doc:" + it[0]))
        train_raw = write_split(train_path, items)
        train_xz = xz_file(train_path, a.xz_level)
        total = train_xz + held_xz
        print("[select] attempt %d: train raw %.1f MB -> xz %.2f MiB; total %.2f MiB (budget %.1f)" %
              (attempt, train_raw / 1e6, train_xz / 2**20, total / 2**20, a.budget_mib), flush=True)
        if total <= budget:
            break
        target_raw *= 0.97 * budget / total
    else:
        sys.exit("could not fit the budget")
    for pth in (train_path, held_path):
        os.remove(pth)

    n_src_kept = sum(1 for p, _ in items if not p.startswith("Documentation/"))
    info = {
        "source": "Debian linux-source-6.1 (6.1.192-3), Linux kernel v6.1",
        "license": "GPL-2.0 (kernel sources; Documentation mostly GPL-2.0 / CC-BY-4.0 per SPDX lines)",
        "heldout_prefixes": list(HELDOUT_PREFIXES),
        "document_format": "// FILE: <path>\\n<text ending in \\n><|endoftext|>",
        "skipped": skipped,
        "train": {"docs": len(items), "docs_documentation": len(tdoc), "docs_source": n_src_kept,
                  "docs_source_available": len(tsrc), "bytes": train_raw, "xz_bytes": train_xz,
                  "tokens_est": int(train_raw / BYTES_PER_TOKEN_EST)},
        "heldout": {"docs": len(held_items), "docs_available": len(held_all), "bytes": held_raw,
                    "xz_bytes": held_xz, "tokens_est": int(held_raw / BYTES_PER_TOKEN_EST)},
        "xz_level": a.xz_level, "ratio_est": ratio, "budget_mib": a.budget_mib,
        "max_file_bytes": a.max_file_bytes, "heldout_max_bytes": a.heldout_max_bytes,
        "prompts": {"c": sum(p["kind"] == "c" for p in prompts), "en": sum(p["kind"] == "en" for p in prompts)},
    }
    with open(os.path.join(a.out, "corpus.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(json.dumps(info, indent=1))


if __name__ == "__main__":
    main()
