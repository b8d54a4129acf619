#!/usr/bin/env python3
"""Size budget of the SHIPPED model directory (python3 stdlib only; runs anywhere).

The shipped form (made later by specdec's quantizer, not by this recipe) is:
  - every target linear AND the [V, H] embedding: 4-bit affine, group 64, bf16 scales + biases
    -> 4 bits + 2 * 16 bits / 64 = 4.5 bits per parameter
  - target norms in bf16
  - the MTP drafter (fc [H, 2H], N full decoder layers, 3 norms) in bf16
  - tokenizer.json (minified) + tokenizer_config.json + small json files / safetensors headers
Limit: 47 MiB. `python3 tools/train/budget.py` prints the table used in README.md.
"""
import sys

MIB = 2**20
TOKENIZER_JSON_BYTES = 5_363_085      # minified Qwen3 tokenizer.json (prepare_corpus.sh)
TOKENIZER_CONFIG_BYTES = 9_675
SMALL_FILES_BYTES = 64 * 1024          # config.json, generation_config.json, safetensors headers
LIMIT_MIB = 47.0


def layer_counts(H, I, nh, nkv, hd):
    lin = H * nh * hd + 2 * H * nkv * hd + nh * hd * H + 3 * H * I
    norms = 2 * H + 2 * hd
    return lin, norms


def shipped_bytes(V, H, I, L, nh, nkv, hd, mtp_layers=1, group=64, bits=4):
    qbits = bits + 2 * 16 / group
    lin, norms = layer_counts(H, I, nh, nkv, hd)
    rows = {}
    rows["embedding %dx%d @%.2f bit" % (V, H, qbits)] = V * H * qbits / 8
    rows["%d target layers linears (%d params) @%.2f bit" % (L, L * lin, qbits)] = L * lin * qbits / 8
    rows["target norms bf16"] = (L * norms + H) * 2
    mtp = 2 * H * H + mtp_layers * (lin + norms) + 3 * H
    rows["mtp drafter bf16 (%d params)" % mtp] = mtp * 2
    rows["tokenizer.json (minified)"] = TOKENIZER_JSON_BYTES
    rows["tokenizer_config.json"] = TOKENIZER_CONFIG_BYTES
    rows["config/generation json + safetensors headers (allowance)"] = SMALL_FILES_BYTES
    return rows


def params(V, H, I, L, nh, nkv, hd):
    lin, norms = layer_counts(H, I, nh, nkv, hd)
    return V * H + L * (lin + norms) + H


def check(cfg, verbose=True):
    """cfg: dict with the config.json keys. Returns total MiB; raises if over the limit."""
    a = (cfg["vocab_size"], cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"],
         cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"])
    rows = shipped_bytes(*a, mtp_layers=cfg.get("mtp_num_hidden_layers", 1))
    total = sum(rows.values())
    if verbose:
        for k, v in rows.items():
            print("  %-62s %12.0f B %8.3f MiB" % (k, v, v / MIB))
        print("  %-62s %12.0f B %8.3f MiB (limit %.1f MiB)" % ("TOTAL", total, total / MIB, LIMIT_MIB))
        print("  target params: %d" % params(*a))
    return total / MIB


def main():
    base = dict(vocab_size=151936, hidden_size=384, num_hidden_layers=8, num_attention_heads=6,
                num_key_value_heads=2, head_dim=128, mtp_num_hidden_layers=1)
    for I in (512, 640, 704, 768, 1024):
        c = dict(base, intermediate_size=I)
        print("intermediate_size=%d:" % I)
        mib = check(c)
        print("  -> %s\n" % ("fits" if mib <= LIMIT_MIB else "DOES NOT FIT"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
