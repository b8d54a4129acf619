/* tiny_spec.h: tiny random model pairs for the speculative-decoding tests (header-only, static).
 * A target (2 layers, small vocab) built to be predictable: unit-RMS embedding rows, a second
 * layer with small output projections, so its greedy text falls into cycles quickly (an n-gram
 * drafter then matches); a random mtp.* module whose layer copies the target's layer 0 and whose
 * fc keeps mostly the embedding half (so MTP drafts are often right); and a 1-layer draft model
 * that is the target without its second layer (same vocab, often right, not always). */
#ifndef SD_TINY_SPEC_H
#define SD_TINY_SPEC_H
#include "check.h"
#include "tiny_model.h"
#include <math.h>

typedef struct ts_dims { int V, H, I, nh, nkv, hd, max_pos; float head_scale, fc_hidden; } ts_dims;

static inline ts_dims ts_default(void) { ts_dims d = {128, 64, 128, 4, 2, 16, 512, 1.0f, 0.05f}; return d; }

/* Values are a pure function of (seed, name): copies across tensors use the source's name. */
static inline uint64_t ts_hash(const char *s, uint64_t seed) {
    uint64_t h = 1469598103934665603ull ^ seed;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h ? h : 1;
}

typedef struct ts_writer { sd_st_writer *w; void *bufs[256]; int n; uint64_t seed; } ts_writer;

/* kind: 0 random * scale, 1 norm (1 + 0.1 r), 2 ones, 3 unit-RMS rows, 4 fc [I | scale * r] */
static inline void ts_add(ts_writer *tw, const char *name, const char *src, int64_t r, int64_t c, int kind, float scale) {
    size_t n = (size_t)r * (size_t)(c ? c : 1);
    float *f = malloc(n * 4);
    uint64_t s = ts_hash(src ? src : name, tw->seed);
    for (size_t i = 0; i < n; i++) {
        float u = tm_rand(&s);
        f[i] = kind == 1 ? 1.0f + 0.1f * u : kind == 2 ? 1.0f : scale * u;
    }
    if (kind == 3)
        for (int64_t i = 0; i < r; i++) {
            double ss = 0;
            for (int64_t j = 0; j < c; j++) ss += (double)f[i * c + j] * f[i * c + j];
            float k = (float)(1.0 / sqrt(ss / (double)c));
            for (int64_t j = 0; j < c; j++) f[i * c + j] *= k;
        }
    if (kind == 4) /* (H, 2H): identity on the embedding half, small random on the hidden half */
        for (int64_t i = 0; i < r; i++)
            for (int64_t j = 0; j < c; j++)
                if (j < r) f[i * c + j] = (i == j) ? 1.0f : 0.0f;
    void *data = malloc(n * 2);
    sd_from_f32(SPECDEC_DTYPE_BF16, f, data, n);
    free(f);
    tw->bufs[tw->n++] = data;
    int64_t shape[2] = {r, c};
    sd_st_writer_add(tw->w, name, SPECDEC_DTYPE_BF16, c ? 2 : 1, shape, data, NULL);
}

static inline void ts_layer(ts_writer *tw, const ts_dims *d, const char *dst, const char *src, float out_scale) {
    char a[128], b[128];
#define TS_L(nm, r, c, kind, sc) (snprintf(a, sizeof a, "%s.%s", dst, nm), snprintf(b, sizeof b, "%s.%s", src, nm), \
                                  ts_add(tw, a, b, r, c, kind, sc))
    TS_L("input_layernorm.weight", d->H, 0, 1, 0);
    TS_L("post_attention_layernorm.weight", d->H, 0, 1, 0);
    TS_L("self_attn.q_norm.weight", d->hd, 0, 1, 0);
    TS_L("self_attn.k_norm.weight", d->hd, 0, 1, 0);
    TS_L("self_attn.q_proj.weight", d->nh * d->hd, d->H, 0, 0.3f);
    TS_L("self_attn.k_proj.weight", d->nkv * d->hd, d->H, 0, 0.3f);
    TS_L("self_attn.v_proj.weight", d->nkv * d->hd, d->H, 0, 0.3f);
    TS_L("self_attn.o_proj.weight", d->H, d->nh * d->hd, 0, 0.2f * out_scale);
    TS_L("mlp.gate_proj.weight", d->I, d->H, 0, 0.3f);
    TS_L("mlp.up_proj.weight", d->I, d->H, 0, 0.3f);
    TS_L("mlp.down_proj.weight", d->H, d->I, 0, 0.2f * out_scale);
#undef TS_L
}

static inline int ts_config(const char *dir, const ts_dims *d, int n_layers, int mtp, const int *eos, int n_eos) {
    char eb[128] = "[";
    for (int i = 0; i < n_eos; i++) snprintf(eb + strlen(eb), sizeof eb - strlen(eb), "%s%d", i ? ", " : "", eos[i]);
    strcat(eb, "]");
    char buf[2048];
    int n = snprintf(buf, sizeof buf,
        "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"vocab_size\": %d,"
        " \"hidden_size\": %d, \"intermediate_size\": %d, \"num_hidden_layers\": %d,"
        " \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"head_dim\": %d,"
        " \"rms_norm_eps\": 1e-06, \"rope_theta\": 10000, \"max_position_embeddings\": %d,"
        " \"tie_word_embeddings\": false, \"bos_token_id\": null, \"eos_token_id\": %s,"
        " \"torch_dtype\": \"bfloat16\"%s}\n",
        d->V, d->H, d->I, n_layers, d->nh, d->nkv, d->hd, d->max_pos, n_eos ? eb : "[]",
        mtp ? ", \"mtp_num_hidden_layers\": 1" : "");
    return tm_write_file(dir, "config.json", buf, (size_t)n);
}

/* Write the target (with mtp.*) into tdir and the 1-layer draft model into ddir (NULL: none).
 * eos: the ids config.json lists (n_eos may be 0). Returns 0 on success. */
static inline int ts_write_pair(const char *tdir, const char *ddir, const ts_dims *d, uint64_t seed, const int *eos, int n_eos) {
    for (int which = 0; which < 2; which++) {
        const char *dir = which ? ddir : tdir;
        if (!dir) continue;
        ts_writer tw;
        memset(&tw, 0, sizeof tw);
        tw.w = sd_st_writer_new();
        tw.seed = seed;
        ts_add(&tw, "model.embed_tokens.weight", NULL, d->V, d->H, 3, 1.0f);
        ts_layer(&tw, d, "model.layers.0", "model.layers.0", 1.0f);
        if (!which) ts_layer(&tw, d, "model.layers.1", "model.layers.1", 0.35f);
        ts_add(&tw, "model.norm.weight", NULL, d->H, 0, 1, 0);
        ts_add(&tw, "lm_head.weight", NULL, d->V, d->H, 0, 0.6f * d->head_scale);
        if (!which) {
            ts_add(&tw, "mtp.pre_fc_norm_embedding.weight", NULL, d->H, 0, 2, 0);
            ts_add(&tw, "mtp.pre_fc_norm_hidden.weight", NULL, d->H, 0, 1, 0);
            ts_add(&tw, "mtp.fc.weight", NULL, d->H, 2 * d->H, 4, d->fc_hidden);
            ts_layer(&tw, d, "mtp.layers.0", "model.layers.0", 1.0f);
            ts_add(&tw, "mtp.norm.weight", "model.norm.weight", d->H, 0, 1, 0);
        }
        specdec_err e = {0};
        specdec_status st = sd_st_writer_write(tw.w, dir, 0, &e);
        if (st != SPECDEC_OK) fprintf(stderr, "ts_write_pair: %s\n", e.msg);
        sd_st_writer_free(tw.w);
        for (int i = 0; i < tw.n; i++) free(tw.bufs[i]);
        if (st != SPECDEC_OK) return -1;
        if (ts_config(dir, d, which ? 1 : 2, !which, eos, n_eos)) return -1;
    }
    return 0;
}

/* Write the pair (ts_write_pair, no eos ids) and load the target; NULL, with err filled, when either
 * fails. */
static inline specdec_model *ts_pair_load(const char *tdir, const char *ddir, const ts_dims *d, uint64_t seed,
                                          specdec_err *err) {
    specdec_model *m = NULL;
    if (ts_write_pair(tdir, ddir, d, seed, NULL, 0) != 0) {
        snprintf(err->msg, sizeof err->msg, "could not write the tiny model pair into %s", tdir);
        return NULL;
    }
    return specdec_model_load(tdir, NULL, &m, err) == SPECDEC_OK ? m : NULL;
}

/* The opening of most speculative tests: fresh directories (tdir, and ddir when non-NULL, 64 bytes
 * each), the pair of dims *d written with seed and its target loaded. A failure is CHECKed here with
 * its reason and gives NULL, so the caller only returns. */
static inline specdec_model *ts_open_pair(char *tdir, char *ddir, const ts_dims *d, uint64_t seed, specdec_err *err) {
    if (!tm_mkdtemp(tdir, 64) || (ddir && !tm_mkdtemp(ddir, 64))) {
        CHECK(0, "mkdtemp");
        return NULL;
    }
    specdec_model *m = ts_pair_load(tdir, ddir, d, seed, err);
    CHECK(m != NULL, "models: %s", err->msg);
    return m;
}

/* The tests' three drafters over target m, by their command-line names: dr[0] "ngram", dr[1] "mtp",
 * dr[2] "model:ddir". Returns 0 when all three were made; else the first failure's status, with err
 * saying why (the drafters that were made stay in dr[]). */
static inline specdec_status ts_three_drafters(specdec_model *m, const char *ddir, specdec_drafter *dr[3],
                                               specdec_err *err) {
    char spec[160];
    snprintf(spec, sizeof spec, "model:%s", ddir);
    const char *names[3] = {"ngram", "mtp", spec};
    for (int k = 0; k < 3; k++) {
        specdec_status st = specdec_drafter_init(m, names[k], &dr[k], err);
        if (st != SPECDEC_OK) return st;
    }
    return SPECDEC_OK;
}

/* A context on m with n_ctx positions and n_threads threads; NULL, with err filled, on failure. */
/* A context on the CPU with the drafter as stored (the tests hold the MTP drafter to a reference
 * written from the stored weights; test_spec_mtp checks the 4-bit copy on its own). */
static inline specdec_ctx *ts_ctx(specdec_model *m, int n_ctx, int n_threads, specdec_err *err) {
    specdec_ctx_params cp = specdec_ctx_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = n_threads;
    cp.drafter_weights = SPECDEC_DRAFTER_WEIGHTS_STORED;
    specdec_ctx *c = NULL;
    return specdec_ctx_init(m, &cp, &c, err) == SPECDEC_OK ? c : NULL;
}

#endif
