#!/usr/bin/env python3
"""Stage 1: tokenize the corpus (CPU work on the GPU machine; all cores).

Named tokenize_corpus.py, not tokenize.py: a script called tokenize.py shadows the standard
library's `tokenize` module (imported by linecache / inspect, hence by torch) and breaks Python.

Reads <corpus>/{train,heldout}.txt.xz (documents "// FILE: <path>\n<text><|endoftext|>"), encodes
every document with HF tokenizers (Tokenizer.from_file, encode_batch, add_special_tokens=False;
the "<|endoftext|>" text maps to id 151643, checked), writes <out>/{train,heldout}.bin (uint32
token streams) and <out>/tokens.json (counts).

  python3 tools/train/tokenize_corpus.py --corpus .dev/corpus --out /tmp/sdtrain/data [--max-bytes N]
"""
import argparse
import json
import lzma
import os
import time

EOT = "<|endoftext|>"
EOT_ID = 151643


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-bytes", type=int, default=0, help="smoke: keep only the first N bytes of train (heldout: N/4)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 16)
    ap.add_argument("--batch-docs", type=int, default=1024)
    a = ap.parse_args()
    os.environ["TOKENIZERS_PARALLELISM"] = "true"
    os.environ["RAYON_NUM_THREADS"] = str(a.threads)
    import numpy as np
    from tokenizers import Tokenizer

    os.makedirs(a.out, exist_ok=True)
    tok = Tokenizer.from_file(os.path.join(a.corpus, "tokenizer.json"))
    assert tok.token_to_id(EOT) == EOT_ID
    info = {"tokenizer": os.path.join(a.corpus, "tokenizer.json")}
    t_all = time.time()
    for split in ("train", "heldout"):
        t0 = time.time()
        with lzma.open(os.path.join(a.corpus, split + ".txt.xz"), "rb") as f:
            text = f.read().decode("utf-8")
        t_read = time.time() - t0
        docs = text.split(EOT)
        assert docs[-1].strip() == "", "corpus must end with <|endoftext|>"
        docs = docs[:-1]
        if a.max_bytes:
            cap = a.max_bytes if split == "train" else max(a.max_bytes // 4, 200_000)
            keep, n = [], 0
            for d in docs:
                if n >= cap:
                    break
                keep.append(d)
                n += len(d)
            docs = keep
        # the separator really is one token: check on the first document
        one = tok.encode(docs[0] + EOT, add_special_tokens=False).ids
        assert one[-1] == EOT_ID and one[:-1] == tok.encode(docs[0], add_special_tokens=False).ids
        path = os.path.join(a.out, split + ".bin")
        n_tok = 0
        with open(path, "wb") as f:
            for b in range(0, len(docs), a.batch_docs):
                encs = tok.encode_batch(docs[b:b + a.batch_docs], add_special_tokens=False)
                parts = []
                for e in encs:
                    parts.append(np.asarray(e.ids, dtype=np.uint32))
                    parts.append(np.asarray([EOT_ID], dtype=np.uint32))
                arr = np.concatenate(parts)
                assert int(arr.max()) < 151936
                f.write(arr.tobytes())
                n_tok += arr.size
        nbytes = sum(len(d.encode("utf-8")) for d in docs)
        dt = time.time() - t0
        info[split] = {"docs": len(docs), "bytes": nbytes, "tokens": n_tok,
                       "bytes_per_token": nbytes / max(1, n_tok), "seconds": dt, "read_seconds": t_read}
        print("[tokenize] %s: %d docs, %.1f MB -> %d tokens (%.2f B/tok) in %.1f s" %
              (split, len(docs), nbytes / 1e6, n_tok, nbytes / max(1, n_tok), dt), flush=True)
        back = np.fromfile(path, dtype=np.uint32)
        assert back.size == n_tok and back[-1] == EOT_ID
    info["seconds"] = time.time() - t_all
    with open(os.path.join(a.out, "tokens.json"), "w") as f:
        json.dump(info, f, indent=1)


if __name__ == "__main__":
    main()
