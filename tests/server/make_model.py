#!/usr/bin/env python3
"""make_model.py: a model directory with a tokenizer for the server tests (standard library only).

usage: make_model.py OUT [--from DIR] [--size tiny|slow]   (the generated tiny one has an mtp module)

Weights: copied from DIR (config.json + model.safetensors, e.g. tests/fixtures/tiny-bf16) when
given, else a random bf16 Qwen3 written here. The random values are a short pseudo-random block
tiled over each tensor, so even the larger "slow" model (used where requests must overlap in
time) is written in well under a second.

Tokenizer: a byte-level BPE with no merges: ids 0..255 are the 256 byte symbols (GPT-2's
byte-to-unicode alphabet), 256..258 the ChatML specials (<|endoftext|>, <|im_start|>,
<|im_end|>), and 259..511 two-byte tokens that encoding never produces but every id of a
512-entry LM head decodes to something. tokenizer_config.json has a ChatML chat_template and
eos_token <|im_end|>."""
import json, os, random, shutil, struct, sys

VOCAB = 512
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")

def byte_alphabet():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b); cs.append(256 + n); n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}

def write_tokenizer(out):
    alpha = byte_alphabet()
    vocab = {alpha[b]: b for b in range(256)}
    letters = [ord(c) for c in "etaoinshrdlu ETAOINS.,"]
    nid = 256 + len(SPECIALS)
    for a in letters:
        for b in letters:
            if nid >= VOCAB: break
            vocab[alpha[a] + alpha[b]] = nid; nid += 1
    added = [dict(id=256 + i, content=s, single_word=False, lstrip=False, rstrip=False, normalized=False, special=True)
             for i, s in enumerate(SPECIALS)]
    bl = dict(type="ByteLevel", add_prefix_space=False, trim_offsets=False, use_regex=True)
    tok = dict(version="1.0", truncation=None, padding=None, added_tokens=added, normalizer=None,
               pre_tokenizer=bl, post_processor=None, decoder=bl,
               model=dict(type="BPE", dropout=None, unk_token=None, continuing_subword_prefix="",
                          end_of_word_suffix="", fuse_unk=False, byte_fallback=False, ignore_merges=False,
                          vocab=vocab, merges=[]))
    with open(os.path.join(out, "tokenizer.json"), "w") as f: json.dump(tok, f, ensure_ascii=False)
    cfg = dict(chat_template=CHATML, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None,
               model_max_length=4096, tokenizer_class="Qwen2Tokenizer")
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f: json.dump(cfg, f)

def bf16(x):
    return struct.unpack("<I", struct.pack("<f", x))[0] >> 16

def write_weights(out, d, seed=7):
    rng = random.Random(seed)
    blk_w = struct.pack("<4099H", *[bf16(0.2 * (2 * rng.random() - 1)) for _ in range(4099)])
    blk_n = struct.pack("<4099H", *[bf16(1 + 0.1 * (2 * rng.random() - 1)) for _ in range(4099)])
    def data(n, norm):
        blk = blk_n if norm else blk_w
        reps = (2 * n + len(blk) - 1) // len(blk)
        off = 2 * rng.randrange(4099)
        return (blk * (reps + 1))[off:off + 2 * n]
    H, I, V, hd, nh, nkv = d["hidden_size"], d["intermediate_size"], d["vocab_size"], d["head_dim"], \
        d["num_attention_heads"], d["num_key_value_heads"]
    tensors = [("model.embed_tokens.weight", [V, H], False)]
    for l in range(d["num_hidden_layers"]):
        p = "model.layers.%d." % l
        tensors += [(p + "input_layernorm.weight", [H], True), (p + "post_attention_layernorm.weight", [H], True),
                    (p + "self_attn.q_norm.weight", [hd], True), (p + "self_attn.k_norm.weight", [hd], True),
                    (p + "self_attn.q_proj.weight", [nh * hd, H], False), (p + "self_attn.k_proj.weight", [nkv * hd, H], False),
                    (p + "self_attn.v_proj.weight", [nkv * hd, H], False), (p + "self_attn.o_proj.weight", [H, nh * hd], False),
                    (p + "mlp.gate_proj.weight", [I, H], False), (p + "mlp.up_proj.weight", [I, H], False),
                    (p + "mlp.down_proj.weight", [H, I], False)]
    tensors += [("model.norm.weight", [H], True), ("lm_head.weight", [V, H], False)]
    if d.get("mtp_num_hidden_layers"):
        tensors += [("mtp.pre_fc_norm_embedding.weight", [H], True), ("mtp.pre_fc_norm_hidden.weight", [H], True),
                    ("mtp.fc.weight", [H, 2 * H], False)]
        tensors += [(n.replace("model.layers.0.", "mtp.layers.0."), s, nm) for n, s, nm in tensors
                    if n.startswith("model.layers.0.")]
        tensors += [("mtp.norm.weight", [H], True)]
    header, blobs, off = {}, [], 0
    for name, shape, norm in tensors:
        n = 1
        for s in shape: n *= s
        b = data(n, norm)
        header[name] = dict(dtype="BF16", shape=shape, data_offsets=[off, off + len(b)])
        off += len(b); blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h))); f.write(h)
        for b in blobs: f.write(b)

def main():
    args = sys.argv[1:]
    if not args: sys.exit(__doc__)
    out, src, size = args[0], None, "tiny"
    if "--from" in args: src = args[args.index("--from") + 1]
    if "--size" in args: size = args[args.index("--size") + 1]
    os.makedirs(out, exist_ok=True)
    if src:
        for f in ("config.json", "model.safetensors"): shutil.copy(os.path.join(src, f), os.path.join(out, f))
    else:
        dims = dict(tiny=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                              num_key_value_heads=2, head_dim=16, max_position_embeddings=512),
                    slow=dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=8,
                              num_key_value_heads=4, head_dim=64, max_position_embeddings=1024))[size]
        cfg = dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", vocab_size=VOCAB, rms_norm_eps=1e-6,
                   rope_theta=10000.0, tie_word_embeddings=False, bos_token_id=None, eos_token_id=[258],
                   torch_dtype="bfloat16", attention_bias=False, hidden_act="silu", **dims)
        if size == "tiny": cfg["mtp_num_hidden_layers"] = 1     # an MTP drafter: speculation on by default
        with open(os.path.join(out, "config.json"), "w") as f: json.dump(cfg, f, indent=1)
        write_weights(out, cfg)
    write_tokenizer(out)

if __name__ == "__main__":
    main()
