/* forward.c: the Qwen3 forward pass on the CPU, composed from the ops table (src/cpu/ops.h).
 * The same sd_layer_forward runs target layers and MTP drafter layers. Because every op is
 * batch-invariant, a position's values do not depend on T or on how calls were chunked. */
#include "model/ctx.h"
#include "util/err.h"
#include "util/dtype.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static size_t kv_elem_size(sd_kv_dtype_e dt) { return dt == SD_KV_F32 ? 4 : 2; }

specdec_status sd_kv_init(sd_kv_cache *kv, int n_layers, int n_ctx, int row, sd_kv_dtype_e dt,
                          specdec_err *err) {
    memset(kv, 0, sizeof *kv);
    kv->dtype = dt; kv->n_layers = n_layers; kv->n_ctx = n_ctx; kv->row = row;
    size_t per = (size_t)n_ctx * row * kv_elem_size(dt);
    kv->layers = calloc((size_t)n_layers, sizeof *kv->layers);
    kv->mem = malloc(per * 2 * (size_t)n_layers);
    if (!kv->layers || !kv->mem) {
        sd_kv_free(kv);
        return sd_fail(err, SPECDEC_ERR_NOMEM, "KV cache of %zu MiB: out of memory",
                       per * 2 * (size_t)n_layers >> 20);
    }
    for (int l = 0; l < n_layers; l++) {
        kv->layers[l].k = (char *)kv->mem + per * (2 * (size_t)l);
        kv->layers[l].v = (char *)kv->mem + per * (2 * (size_t)l + 1);
    }
    return SPECDEC_OK;
}

void sd_kv_free(sd_kv_cache *kv) {
    free(kv->layers); free(kv->mem);
    memset(kv, 0, sizeof *kv);
}

/* Scratch and RoPE tables for rt, whose pool is already set. */
static specdec_status runtime_alloc(sd_runtime *rt, const sd_config *c, int n_ctx, int max_batch,
                                    specdec_err *err);

specdec_status sd_runtime_init(sd_runtime *rt, const sd_config *c, int n_ctx, int max_batch,
                               int n_threads, sd_kv_dtype_e kvdt, bool reference, specdec_err *err) {
    memset(rt, 0, sizeof *rt);
    rt->cfg = c;
    if (!reference) {
        specdec_status st = sd_simd_check(err);
        if (st) return st;
    }
    rt->ops = reference ? sd_ops_ref() : sd_ops_fast();
    rt->n_ctx = n_ctx;
    rt->max_batch = max_batch;
    rt->kv_dtype = kvdt;
    rt->pool = sd_pool_create(n_threads);
    if (!rt->pool) return sd_fail(err, SPECDEC_ERR_INTERNAL, "could not start %d threads", n_threads);
    rt->n_threads = sd_pool_size(rt->pool);
    return runtime_alloc(rt, c, n_ctx, max_batch, err);
}

specdec_status sd_runtime_init_shared(sd_runtime *rt, const sd_config *c, int n_ctx, int max_batch,
                                      sd_pool *pool, const sd_ops *ops, sd_kv_dtype_e kvdt,
                                      specdec_err *err) {
    memset(rt, 0, sizeof *rt);
    if (!pool || !ops) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "sd_runtime_init_shared: NULL pool or ops");
    rt->cfg = c;
    rt->ops = ops;
    rt->n_ctx = n_ctx;
    rt->max_batch = max_batch;
    rt->kv_dtype = kvdt;
    rt->pool = pool;
    rt->pool_borrowed = true;
    rt->n_threads = sd_pool_size(pool);
    return runtime_alloc(rt, c, n_ctx, max_batch, err);
}

static specdec_status runtime_alloc(sd_runtime *rt, const sd_config *c, int n_ctx, int max_batch,
                                    specdec_err *err) {
    sd_kv_dtype_e kvdt = rt->kv_dtype;
    int H = c->hidden_size, hd = c->head_dim, I = c->intermediate_size;
    size_t B = (size_t)max_batch, qd = (size_t)c->n_heads * hd, kd = (size_t)c->n_kv_heads * hd;
    sd_attn_shape as = {c->n_heads, c->n_kv_heads, hd, kvdt};
    rt->rope_cos = malloc(sizeof(float) * (size_t)n_ctx * (hd / 2));
    rt->rope_sin = malloc(sizeof(float) * (size_t)n_ctx * (hd / 2));
    rt->xn = malloc(sizeof(float) * B * H);
    rt->q = malloc(sizeof(float) * B * qd);
    rt->k = malloc(sizeof(float) * B * kd);
    rt->v = malloc(sizeof(float) * B * kd);
    rt->att = malloc(sizeof(float) * B * qd);
    rt->tmp = malloc(sizeof(float) * B * (size_t)(H > (int)qd ? H : (int)qd));
    rt->gate = malloc(sizeof(float) * B * I);
    rt->up = malloc(sizeof(float) * B * I);
    rt->attn_scratch = malloc(sizeof(float) * (sd_attention_scratch_floats(&as, max_batch, n_ctx, rt->n_threads) + 1));
    if (!rt->rope_cos || !rt->rope_sin || !rt->xn || !rt->q || !rt->k || !rt->v || !rt->att ||
        !rt->tmp || !rt->gate || !rt->up || !rt->attn_scratch) {
        sd_runtime_free(rt);
        return sd_fail(err, SPECDEC_ERR_NOMEM, "forward scratch: out of memory");
    }
    /* RoPE tables in double, rounded once: inv_freq_i = theta^(-2i/hd). */
    for (int p = 0; p < n_ctx; p++)
        for (int i = 0; i < hd / 2; i++) {
            double ang = (double)p * pow(c->rope_theta, -2.0 * i / hd);
            rt->rope_cos[(size_t)p * (hd / 2) + i] = (float)cos(ang);
            rt->rope_sin[(size_t)p * (hd / 2) + i] = (float)sin(ang);
        }
    return SPECDEC_OK;
}

void sd_runtime_free(sd_runtime *rt) {
    if (rt->pool && !rt->pool_borrowed) sd_pool_free(rt->pool);
    free(rt->rope_cos); free(rt->rope_sin); free(rt->xn); free(rt->q); free(rt->k); free(rt->v);
    free(rt->att); free(rt->tmp); free(rt->gate); free(rt->up); free(rt->attn_scratch);
    memset(rt, 0, sizeof *rt);
}

void sd_embed(const sd_mat *embed, const int32_t *tokens, int T, float *x) {
    for (int t = 0; t < T; t++) sd_mat_row_f32(embed, tokens[t], x + (size_t)t * embed->cols);
}

static void add_inplace(float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

void sd_layer_forward(sd_runtime *rt, const sd_layer_w *L, sd_kv_layer *kv, float *x, int T, int pos0) {
    const sd_config *c = rt->cfg;
    const sd_ops *op = rt->ops;
    int H = c->hidden_size, hd = c->head_dim, I = c->intermediate_size;
    int qd = c->n_heads * hd, kd = c->n_kv_heads * hd;
    sd_attn_shape as = {c->n_heads, c->n_kv_heads, hd, rt->kv_dtype};

    /* attention block */
    op->rmsnorm(rt->xn, x, L->attn_norm, H, T, c->rms_norm_eps);
    op->matmul(&L->q, rt->xn, H, rt->q, qd, T, rt->pool);           /* (T, nh*hd) */
    op->matmul(&L->k, rt->xn, H, rt->k, kd, T, rt->pool);           /* (T, nkv*hd) */
    op->matmul(&L->v, rt->xn, H, rt->v, kd, T, rt->pool);
    op->rmsnorm(rt->q, rt->q, L->q_norm, hd, T * c->n_heads, c->rms_norm_eps);  /* per head */
    op->rmsnorm(rt->k, rt->k, L->k_norm, hd, T * c->n_kv_heads, c->rms_norm_eps);
    op->rope(rt->q, T, c->n_heads, hd, pos0, rt->rope_cos, rt->rope_sin);
    op->rope(rt->k, T, c->n_kv_heads, hd, pos0, rt->rope_cos, rt->rope_sin);
    sd_kv_store(rt->kv_dtype, kv->k, kd, pos0, rt->k, T);
    sd_kv_store(rt->kv_dtype, kv->v, kd, pos0, rt->v, T);
    op->attention(&as, kv, rt->q, rt->att, T, pos0, rt->attn_scratch, rt->pool);
    op->matmul(&L->o, rt->att, qd, rt->tmp, H, T, rt->pool);
    add_inplace(x, rt->tmp, (size_t)T * H);

    /* MLP block */
    op->rmsnorm(rt->xn, x, L->mlp_norm, H, T, c->rms_norm_eps);
    op->matmul(&L->gate, rt->xn, H, rt->gate, I, T, rt->pool);
    op->matmul(&L->up, rt->xn, H, rt->up, I, T, rt->pool);
    op->silu_mul(rt->gate, rt->up, I, T);
    op->matmul(&L->down, rt->gate, I, rt->tmp, H, T, rt->pool);
    add_inplace(x, rt->tmp, (size_t)T * H);
}

/* ---- the target context ---------------------------------------------------------- */

specdec_ctx_params specdec_ctx_default_params(void) {
    specdec_ctx_params p;
    memset(&p, 0, sizeof p);
    p.kv_dtype = SPECDEC_KV_F32;
    p.max_batch = 64;
    return p;
}

specdec_status specdec_ctx_init(const specdec_model *m, const specdec_ctx_params *p,
                                specdec_ctx **out, specdec_err *err) {
    specdec_ctx_params def = specdec_ctx_default_params();
    if (!p) p = &def;
    if (!m || !out) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "specdec_ctx_init: NULL argument");
    *out = NULL;
    const sd_config *c = &m->cfg;
    int n_ctx = p->n_ctx > 0 ? p->n_ctx : c->max_position_embeddings;
    if (n_ctx > c->max_position_embeddings)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "n_ctx %d exceeds the model's max_position_embeddings %d",
                       n_ctx, c->max_position_embeddings);
    int mb = p->max_batch > 0 ? p->max_batch : 64;
    if ((unsigned)p->kv_dtype > SPECDEC_KV_F16)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "unknown kv dtype %d", (int)p->kv_dtype);
    specdec_ctx *cx = calloc(1, sizeof *cx);
    if (!cx) return sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory");
    cx->model = m;
    sd_kv_dtype_e kvdt = (sd_kv_dtype_e)p->kv_dtype;
    specdec_status st = sd_runtime_init(&cx->rt, c, n_ctx, mb, p->n_threads, kvdt, p->reference_kernels, err);
    if (st == SPECDEC_OK)
        st = sd_kv_init(&cx->kv, c->n_layers, n_ctx, c->n_kv_heads * c->head_dim, kvdt, err);
    if (st == SPECDEC_OK && !(cx->x = malloc(sizeof(float) * (size_t)mb * c->hidden_size)))
        st = sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory");
    if (st != SPECDEC_OK) { specdec_ctx_free(cx); return st; }
    *out = cx;
    return SPECDEC_OK;
}

void specdec_ctx_free(specdec_ctx *c) {
    if (!c) return;
    sd_runtime_free(&c->rt);
    sd_kv_free(&c->kv);
    free(c->x);
    free(c);
}

int specdec_ctx_n_past(const specdec_ctx *c) { return c->n_past; }

specdec_status specdec_ctx_truncate(specdec_ctx *c, int n, specdec_err *err) {
    if (n < 0 || n > c->n_past)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "truncate to %d: context holds %d positions", n, c->n_past);
    c->n_past = n;   /* entries past n are simply overwritten later */
    return SPECDEC_OK;
}

specdec_status sd_ctx_forward(specdec_ctx *c, const int32_t *tokens, int T, float *logits,
                              int logits_from, float *hidden, specdec_err *err) {
    const sd_config *cf = &c->model->cfg;
    const sd_weights *w = &c->model->w;
    int H = cf->hidden_size, V = cf->vocab_size;
    if (T <= 0) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "forward of %d tokens", T);
    if (c->n_past + T > c->rt.n_ctx)
        return sd_fail(err, SPECDEC_ERR_CONTEXT, "%d positions do not fit the context window: %d held, n_ctx %d",
                       T, c->n_past, c->rt.n_ctx);
    for (int t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= V)
            return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "token id %d at index %d is outside the vocabulary (%d)",
                           tokens[t], t, V);
    for (int t0 = 0; t0 < T; t0 += c->rt.max_batch) {
        int n = T - t0 < c->rt.max_batch ? T - t0 : c->rt.max_batch;
        int pos0 = c->n_past;
        sd_embed(&w->embed, tokens + t0, n, c->x);
        for (int l = 0; l < cf->n_layers; l++)
            sd_layer_forward(&c->rt, &w->layers[l], &c->kv.layers[l], c->x, n, pos0);
        c->rt.ops->rmsnorm(c->x, c->x, w->final_norm, H, n, cf->rms_norm_eps);
        if (hidden) memcpy(hidden + (size_t)t0 * H, c->x, sizeof(float) * (size_t)n * H);
        if (logits) {
            int from = logits_from - t0; /* first row of this chunk that wants logits */
            if (from < 0) from = 0;
            if (from < n)
                c->rt.ops->matmul(&w->lm_head, c->x + (size_t)from * H, H,
                                  logits + (size_t)(t0 + from - logits_from) * V, V, n - from, c->rt.pool);
        }
        c->n_past += n;
    }
    return SPECDEC_OK;
}

specdec_status specdec_ctx_forward(specdec_ctx *c, const int32_t *tokens, int T, float *logits,
                                   float *hidden, specdec_err *err) {
    return sd_ctx_forward(c, tokens, T, logits, 0, hidden, err);
}
