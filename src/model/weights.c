/* weights.c: bind the Qwen3 tensors of a safetensors set to sd_weights (names and shapes in
 * ../shared/docs/model-format.md), checking presence, dtype and the exact shape the config implies.
 * Linears point into the mapping; norm vectors are converted to f32 into one pool.
 * A linear is quantized when `<name>.scales` exists (so a quantized target may carry dense MTP
 * linears or a dense embedding); it then needs the config's quantization block. */
#include "model/weights.h"
#include "util/dtype.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_float(specdec_dtype dt) {
    return dt == SPECDEC_DTYPE_F32 || dt == SPECDEC_DTYPE_F16 || dt == SPECDEC_DTYPE_BF16;
}

static void shape_str(const sd_st_tensor *t, char *buf, size_t n) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (int i = 0; i < t->ndim && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

/* Check t is 2-D [r, c] (c < 0: 1-D [r]). */
static specdec_status check_shape(const sd_st_set *st, const sd_st_tensor *t, long long r, long long c, specdec_err *err) {
    bool ok = (c < 0) ? (t->ndim == 1 && t->shape[0] == r) : (t->ndim == 2 && t->shape[0] == r && t->shape[1] == c);
    if (ok) return SPECDEC_OK;
    char have[160], want[64];
    shape_str(t, have, sizeof have);
    if (c < 0) snprintf(want, sizeof want, "[%lld]", r);
    else snprintf(want, sizeof want, "[%lld, %lld]", r, c);
    return sd_fail(err, SPECDEC_ERR_SHAPE, "%s: tensor '%s' has shape %s, config implies %s", sd_st_file_path(st, t->file),
                   t->name, have, want);
}

/* Where a missing tensor was looked for, for messages: the one file, or the first of the shards. */
static const char *st_where(const sd_st_set *st) {
    const char *p = sd_st_file_path(st, 0);
    return p ? p : "the checkpoint";
}

static const sd_st_tensor *find2(const sd_st_set *st, const char *base, const char *suffix) {
    char name[256];
    snprintf(name, sizeof name, "%s%s", base, suffix);
    return sd_st_find(st, name);
}

/* Bind linear `base` (".weight" etc. appended) as an (rows, cols) matrix. */
static specdec_status bind_mat(const sd_config *c, const sd_st_set *st, const char *base, int rows, int cols,
                               sd_mat *m, specdec_err *err) {
    memset(m, 0, sizeof *m);
    m->rows = rows;
    m->cols = cols;
    const sd_st_tensor *w = find2(st, base, ".weight"), *s = find2(st, base, ".scales");
    if (!w) return sd_fail(err, SPECDEC_ERR_MISSING, "%s%s: tensor '%s.weight' is missing", st_where(st),
                           sd_st_file_path(st, 1) ? " (and the other shards)" : "", base);
    if (!s) {
        if (w->dtype == SPECDEC_DTYPE_U32 && c->quant_bits)
            return sd_fail(err, SPECDEC_ERR_MISSING, "%s: tensor '%s.scales' is missing (quantized '%s.weight' needs it)",
                           sd_st_file_path(st, w->file), base, base);
        if (!is_float(w->dtype))
            return sd_fail(err, SPECDEC_ERR_DTYPE, "%s: tensor '%s' has dtype %s, a dense linear needs F32, F16 or BF16%s", sd_st_file_path(st, w->file), w->name,
                           specdec_dtype_name(w->dtype), w->dtype == SPECDEC_DTYPE_U32 ? " (U32 without quantization in config.json)" : "");
        SD_TRY(check_shape(st, w, rows, cols, err));
        m->dtype = w->dtype;
        m->w = w->data;
        return SPECDEC_OK;
    }
    int bits = c->quant_bits, g = c->quant_group;
    if (!bits)
        return sd_fail(err, SPECDEC_ERR_CONFIG, "tensor '%s' exists but config.json has no \"quantization\" block", s->name);
    if (cols % g != 0 || ((long long)cols * bits) % 32 != 0)
        return sd_fail(err, SPECDEC_ERR_SHAPE, "tensor '%s.weight': %d input columns are not a multiple of group size %d", base, cols, g);
    const sd_st_tensor *b = find2(st, base, ".biases");
    if (!b) return sd_fail(err, SPECDEC_ERR_MISSING, "%s: tensor '%s.biases' is missing (quantized '%s.weight' needs it)",
                          sd_st_file_path(st, w->file), base, base);
    if (w->dtype != SPECDEC_DTYPE_U32)
        return sd_fail(err, SPECDEC_ERR_DTYPE, "%s: tensor '%s' has dtype %s, a quantized weight must be U32", sd_st_file_path(st, w->file), w->name, specdec_dtype_name(w->dtype));
    if (!is_float(s->dtype))
        return sd_fail(err, SPECDEC_ERR_DTYPE, "%s: tensor '%s' has dtype %s, scales must be F32, F16 or BF16", sd_st_file_path(st, s->file), s->name, specdec_dtype_name(s->dtype));
    if (b->dtype != s->dtype)
        return sd_fail(err, SPECDEC_ERR_DTYPE, "%s: tensor '%s' has dtype %s but '%s' has %s (must match)", sd_st_file_path(st, b->file), b->name,
                       specdec_dtype_name(b->dtype), s->name, specdec_dtype_name(s->dtype));
    SD_TRY(check_shape(st, w, rows, (long long)cols * bits / 32, err));
    SD_TRY(check_shape(st, s, rows, cols / g, err));
    SD_TRY(check_shape(st, b, rows, cols / g, err));
    m->dtype = s->dtype;
    m->bits = bits;
    m->group = g;
    m->w = w->data;
    m->scales = s->data;
    m->biases = b->data;
    return SPECDEC_OK;
}

/* Norm vectors: converted into the pool at *pos (advanced by n). */
static specdec_status bind_norm(const sd_st_set *st, const char *name, int n, float *pool, size_t *pos,
                                const float **out, specdec_err *err) {
    const sd_st_tensor *t = sd_st_find(st, name);
    if (!t) return sd_fail(err, SPECDEC_ERR_MISSING, "%s%s: tensor '%s' is missing", st_where(st),
                          sd_st_file_path(st, 1) ? " (and the other shards)" : "", name);
    if (!is_float(t->dtype))
        return sd_fail(err, SPECDEC_ERR_DTYPE, "%s: tensor '%s' has dtype %s, a norm weight needs F32, F16 or BF16", sd_st_file_path(st, t->file), name,
                       specdec_dtype_name(t->dtype));
    SD_TRY(check_shape(st, t, n, -1, err));
    float *dst = pool + *pos;
    /* The mapping may place a tensor at any byte offset: convert through an aligned copy. */
    size_t es = sd_dtype_size(t->dtype);
    if (((uintptr_t)t->data % es) == 0) sd_to_f32(t->dtype, t->data, dst, (size_t)n);
    else {
        for (int i = 0; i < n; i++) {
            uint32_t raw = 0;
            memcpy(&raw, (const char *)t->data + (size_t)i * es, es);
            sd_to_f32(t->dtype, &raw, dst + i, 1);
        }
    }
    *pos += (size_t)n;
    *out = dst;
    return SPECDEC_OK;
}

/* One decoder layer under `prefix` ("model.layers.3" or "mtp.layers.0"). */
static specdec_status bind_layer(const sd_config *c, const sd_st_set *st, const char *prefix, float *pool, size_t *pos,
                                 sd_layer_w *L, specdec_err *err) {
    const int H = c->hidden_size, I = c->intermediate_size, hd = c->head_dim;
    const int qd = c->n_heads * hd, kvd = c->n_kv_heads * hd;
    char name[256];
#define NM(sfx) (snprintf(name, sizeof name, "%s.%s", prefix, sfx), name)
    SD_TRY(bind_norm(st, NM("input_layernorm.weight"), H, pool, pos, &L->attn_norm, err));
    SD_TRY(bind_norm(st, NM("post_attention_layernorm.weight"), H, pool, pos, &L->mlp_norm, err));
    SD_TRY(bind_norm(st, NM("self_attn.q_norm.weight"), hd, pool, pos, &L->q_norm, err));
    SD_TRY(bind_norm(st, NM("self_attn.k_norm.weight"), hd, pool, pos, &L->k_norm, err));
    SD_TRY(bind_mat(c, st, NM("self_attn.q_proj"), qd, H, &L->q, err));
    SD_TRY(bind_mat(c, st, NM("self_attn.k_proj"), kvd, H, &L->k, err));
    SD_TRY(bind_mat(c, st, NM("self_attn.v_proj"), kvd, H, &L->v, err));
    SD_TRY(bind_mat(c, st, NM("self_attn.o_proj"), H, qd, &L->o, err));
    SD_TRY(bind_mat(c, st, NM("mlp.gate_proj"), I, H, &L->gate, err));
    SD_TRY(bind_mat(c, st, NM("mlp.up_proj"), I, H, &L->up, err));
    SD_TRY(bind_mat(c, st, NM("mlp.down_proj"), H, I, &L->down, err));
#undef NM
    return SPECDEC_OK;
}

static specdec_status bind_all(const sd_config *c, const sd_st_set *st, bool want_mtp, sd_weights *w, specdec_err *err) {
    const int H = c->hidden_size, V = c->vocab_size, hd = c->head_dim, L = c->n_layers;
    const int M = (want_mtp && c->mtp_n_layers > 0) ? c->mtp_n_layers : 0;
    const size_t per_layer = 2 * (size_t)H + 2 * (size_t)hd;
    size_t pool_n = (size_t)H + (size_t)L * per_layer + (M ? 3 * (size_t)H + (size_t)M * per_layer : 0), pos = 0;
    w->f32_pool = malloc(pool_n * sizeof(float));
    w->f32_pool_n = pool_n;
    w->layers = calloc((size_t)L, sizeof *w->layers);
    if (!w->f32_pool || !w->layers) return sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory binding weights");

    SD_TRY(bind_mat(c, st, "model.embed_tokens", V, H, &w->embed, err));
    SD_TRY(bind_norm(st, "model.norm.weight", H, w->f32_pool, &pos, &w->final_norm, err));
    if (c->tie_word_embeddings) {
        w->lm_head = w->embed; /* a stored lm_head.weight of a tied checkpoint is ignored, as transformers does */
    } else {
        if (!sd_st_find(st, "lm_head.weight"))
            return sd_fail(err, SPECDEC_ERR_MISSING, "%s%s: tensor 'lm_head.weight' is missing (config.json: tie_word_embeddings is false)",
                           st_where(st), sd_st_file_path(st, 1) ? " (and the other shards)" : "");
        SD_TRY(bind_mat(c, st, "lm_head", V, H, &w->lm_head, err));
    }
    for (int l = 0; l < L; l++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "model.layers.%d", l);
        SD_TRY(bind_layer(c, st, prefix, w->f32_pool, &pos, &w->layers[l], err));
    }
    if (M) {
        w->mtp = calloc(1, sizeof *w->mtp);
        if (!w->mtp) return sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory binding weights");
        w->mtp->layers = calloc((size_t)M, sizeof *w->mtp->layers);
        if (!w->mtp->layers) return sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory binding weights");
        w->mtp->n_layers = M;
        SD_TRY(bind_norm(st, "mtp.pre_fc_norm_embedding.weight", H, w->f32_pool, &pos, &w->mtp->pre_fc_norm_embedding, err));
        SD_TRY(bind_norm(st, "mtp.pre_fc_norm_hidden.weight", H, w->f32_pool, &pos, &w->mtp->pre_fc_norm_hidden, err));
        SD_TRY(bind_mat(c, st, "mtp.fc", H, 2 * H, &w->mtp->fc, err));
        for (int k = 0; k < M; k++) {
            char prefix[64];
            snprintf(prefix, sizeof prefix, "mtp.layers.%d", k);
            SD_TRY(bind_layer(c, st, prefix, w->f32_pool, &pos, &w->mtp->layers[k], err));
        }
        SD_TRY(bind_norm(st, "mtp.norm.weight", H, w->f32_pool, &pos, &w->mtp->norm, err));
    }
    if (pos != pool_n) return sd_fail(err, SPECDEC_ERR_INTERNAL, "norm pool: used %zu of %zu floats", pos, pool_n);
    return SPECDEC_OK;
}

specdec_status sd_weights_bind(const sd_config *c, const sd_st_set *st, bool want_mtp, sd_weights *w, specdec_err *err) {
    if (!c || !st || !w) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "sd_weights_bind: NULL argument");
    memset(w, 0, sizeof *w);
    specdec_status s = bind_all(c, st, want_mtp, w, err);
    if (s != SPECDEC_OK) sd_weights_free(w);
    return s;
}

void sd_weights_free(sd_weights *w) {
    if (!w) return;
    free(w->f32_pool);
    free(w->layers);
    if (w->mtp) free(w->mtp->layers);
    free(w->mtp);
    memset(w, 0, sizeof *w);
}
