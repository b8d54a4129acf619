/* tiny_model.h: helpers shared by the safetensors / config / weights / quantize tests: temporary
 * directories, raw file writing, and a builder for tiny random Qwen3 model directories written
 * with the safetensors writer. Header-only (static) so each test stays one .c file. */
#ifndef SD_TINY_MODEL_H
#define SD_TINY_MODEL_H
#include <ftw.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "io/safetensors.h"
#include "util/dtype.h"

static inline int tm_rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}
/* Remove a directory tree we created. */
static inline void tm_rm_rf(const char *dir) { nftw(dir, tm_rm_cb, 16, FTW_DEPTH | FTW_PHYS); }

/* A fresh directory /tmp/sdtest-XXXXXX in buf. */
static inline const char *tm_mkdtemp(char *buf, size_t n) {
    snprintf(buf, n, "/tmp/sdtest-XXXXXX");
    return mkdtemp(buf);
}

static inline int tm_write_file(const char *dir, const char *name, const void *data, size_t len) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f) return -1;
    size_t w = len ? fwrite(data, 1, len, f) : 0;
    fclose(f);
    return w == len ? 0 : -1;
}

/* Two files with the same bytes (both readable). */
static inline bool tm_file_equal(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool eq = fa && fb;
    while (eq) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) eq = false;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return eq;
}

/* Deterministic uniform [-1, 1) generator (xorshift). */
static inline float tm_rand(uint64_t *s) {
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return (float)((double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

typedef struct tm_dims { int V, H, I, L, nh, nkv, hd, mtp; bool tied; specdec_dtype dt; } tm_dims;

static inline tm_dims tm_default_dims(void) {
    tm_dims d = {64, 32, 48, 2, 4, 2, 8, 0, false, SPECDEC_DTYPE_BF16};
    return d;
}

/* Write config.json for d (plus `extra` JSON members, e.g. ", \"x\": 1"). */
static inline int tm_write_config(const char *dir, const tm_dims *d, const char *extra) {
    char buf[4096];
    const char *dts = d->dt == SPECDEC_DTYPE_BF16 ? "bfloat16" : d->dt == SPECDEC_DTYPE_F16 ? "float16" : "float32";
    int n = snprintf(buf, sizeof buf,
        "{\n  \"architectures\": [\"Qwen3ForCausalLM\"],\n  \"model_type\": \"qwen3\",\n"
        "  \"vocab_size\": %d, \"hidden_size\": %d, \"intermediate_size\": %d,\n"
        "  \"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d,\n"
        "  \"head_dim\": %d, \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000,\n"
        "  \"max_position_embeddings\": 512, \"tie_word_embeddings\": %s,\n"
        "  \"bos_token_id\": null, \"eos_token_id\": [1, 2], \"torch_dtype\": \"%s\"%s%s\n}\n",
        d->V, d->H, d->I, d->L, d->nh, d->nkv, d->hd, d->tied ? "true" : "false", dts,
        d->mtp ? ", \"mtp_num_hidden_layers\": 1" : "", extra ? extra : "");
    return tm_write_file(dir, "config.json", buf, (size_t)n);
}

/* A model's tensors: random data kept alive here until tm_model_free. */
typedef struct tm_model {
    sd_st_writer *w;
    void *bufs[512];
    int nbufs;
    uint64_t seed;
    tm_dims d;
    const char *skip;      /* tensor name to leave out (NULL = none) */
    const char *reshape;   /* tensor name to give a wrong first dimension */
    const char *redtype;   /* tensor name to store as I32 */
} tm_model;

static inline void tm_add(tm_model *m, const char *name, int ndim, int64_t r, int64_t c, bool is_norm) {
    if (m->skip && strcmp(name, m->skip) == 0) return;
    if (m->reshape && strcmp(name, m->reshape) == 0) r *= 2;
    specdec_dtype dt = (m->redtype && strcmp(name, m->redtype) == 0) ? SPECDEC_DTYPE_I32 : m->d.dt;
    size_t n = (size_t)r * (size_t)(ndim == 2 ? c : 1);
    float *f = malloc(n * sizeof(float));
    void *data = malloc(n * 4);
    for (size_t i = 0; i < n; i++) f[i] = is_norm ? 1.0f + 0.1f * tm_rand(&m->seed) : 0.2f * tm_rand(&m->seed);
    if (dt == SPECDEC_DTYPE_I32) memcpy(data, f, n * 4); else sd_from_f32(dt, f, data, n);
    free(f);
    m->bufs[m->nbufs++] = data;
    int64_t shape[2] = {r, c};
    sd_st_writer_add(m->w, name, dt, ndim, shape, data, NULL);
}

static inline void tm_add_layer(tm_model *m, const char *prefix) {
    const tm_dims *d = &m->d;
    char nm[256];
#define TM_N(s) (snprintf(nm, sizeof nm, "%s.%s", prefix, s), nm)
    tm_add(m, TM_N("input_layernorm.weight"), 1, d->H, 0, true);
    tm_add(m, TM_N("post_attention_layernorm.weight"), 1, d->H, 0, true);
    tm_add(m, TM_N("self_attn.q_norm.weight"), 1, d->hd, 0, true);
    tm_add(m, TM_N("self_attn.k_norm.weight"), 1, d->hd, 0, true);
    tm_add(m, TM_N("self_attn.q_proj.weight"), 2, d->nh * d->hd, d->H, false);
    tm_add(m, TM_N("self_attn.k_proj.weight"), 2, d->nkv * d->hd, d->H, false);
    tm_add(m, TM_N("self_attn.v_proj.weight"), 2, d->nkv * d->hd, d->H, false);
    tm_add(m, TM_N("self_attn.o_proj.weight"), 2, d->H, d->nh * d->hd, false);
    tm_add(m, TM_N("mlp.gate_proj.weight"), 2, d->I, d->H, false);
    tm_add(m, TM_N("mlp.up_proj.weight"), 2, d->I, d->H, false);
    tm_add(m, TM_N("mlp.down_proj.weight"), 2, d->H, d->I, false);
#undef TM_N
}

/* Build every tensor of model-format.md for dims d (and mtp.* when d.mtp). */
static inline void tm_model_build(tm_model *m, const tm_dims *d, uint64_t seed) {
    m->w = sd_st_writer_new();
    m->d = *d;
    m->seed = seed ? seed : 1;
    tm_add(m, "model.embed_tokens.weight", 2, d->V, d->H, false);
    for (int l = 0; l < d->L; l++) {
        char p[64];
        snprintf(p, sizeof p, "model.layers.%d", l);
        tm_add_layer(m, p);
    }
    tm_add(m, "model.norm.weight", 1, d->H, 0, true);
    if (!d->tied) tm_add(m, "lm_head.weight", 2, d->V, d->H, false);
    if (d->mtp) {
        tm_add(m, "mtp.pre_fc_norm_embedding.weight", 1, d->H, 0, true);
        tm_add(m, "mtp.pre_fc_norm_hidden.weight", 1, d->H, 0, true);
        tm_add(m, "mtp.fc.weight", 2, d->H, 2 * d->H, false);
        tm_add_layer(m, "mtp.layers.0");
        tm_add(m, "mtp.norm.weight", 1, d->H, 0, true);
    }
}

static inline void tm_model_free(tm_model *m) {
    sd_st_writer_free(m->w);
    for (int i = 0; i < m->nbufs; i++) free(m->bufs[i]);
    m->nbufs = 0;
}

/* Write a whole tiny model directory (config + weights). Returns 0 on success. */
static inline int tm_write_model(const char *dir, const tm_dims *d, uint64_t seed, const char *skip, const char *reshape,
                          const char *redtype, uint64_t max_shard) {
    tm_model m;
    memset(&m, 0, sizeof m);
    m.skip = skip;
    m.reshape = reshape;
    m.redtype = redtype;
    tm_model_build(&m, d, seed);
    specdec_err e = {0};
    specdec_status st = sd_st_writer_write(m.w, dir, max_shard, &e);
    if (st != SPECDEC_OK) fprintf(stderr, "tm_write_model: %s\n", e.msg);
    tm_model_free(&m);
    if (st != SPECDEC_OK) return -1;
    return tm_write_config(dir, d, NULL);
}

/* Byte b's token in the GPT-2 byte-to-unicode alphabet of byte-level BPE tokenizers, written as
 * the body of a JSON string (a \u escape, or \" and \\) into out (at least 8 bytes). */
static inline void tm_byte_key(int b, char *out) {
    int cp;
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) cp = b;
    else {
        int n = 0;   /* the other bytes map, in order, to 256, 257, ... */
        for (int x = 0; x < b; x++)
            if (!((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF))) n++;
        cp = 256 + n;
    }
    if (cp == '"' || cp == '\\') sprintf(out, "\\%c", cp);
    else sprintf(out, "\\u%04x", cp);
}

/* dir/tokenizer.json: a byte-level BPE tokenizer whose vocabulary is the 256 byte tokens (id = the
 * byte) and no merges, so text tokenizes to its bytes. Returns 0 on success. */
static inline int tm_write_byte_tokenizer(const char *dir) {
    static char json[16384];
    size_t l = (size_t)snprintf(json, sizeof json, "{\"version\":\"1.0\",\"added_tokens\":[],\"normalizer\":null,"
        "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true},\"post_processor\":null,"
        "\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"unk_token\":null,\"vocab\":{");
    for (int b = 0; b < 256; b++) {
        char k[16];
        tm_byte_key(b, k);
        l += (size_t)snprintf(json + l, sizeof json - l, "%s\"%s\":%d", b ? "," : "", k, b);
    }
    l += (size_t)snprintf(json + l, sizeof json - l, "},\"merges\":[]}}");
    return tm_write_file(dir, "tokenizer.json", json, l);
}

#endif
