/* runtime.c: the KV cache and the per-forward scratch on a backend (runtime.h). */
#include "model/runtime.h"
#include "tp/plan.h"
#include "util/err.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

specdec_status sd_kv_init(sd_kv_cache *kv, sd_backend *be, int n_layers, int n_ctx, int row, sd_kv_dtype_e dt,
                          specdec_err *err) {
    memset(kv, 0, sizeof *kv);
    kv->dtype = dt; kv->n_layers = n_layers; kv->n_ctx = n_ctx; kv->row = row; kv->be = be;
    size_t per = (size_t)n_ctx * (size_t)row * sd_kv_elem_size(dt);
    kv->layers = calloc((size_t)n_layers, sizeof *kv->layers);
    if (!kv->layers) return sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory");
    for (int l = 0; l < n_layers; l++) {
        char what[96];
        snprintf(what, sizeof what, "KV cache (layer %d of %d, %d positions)", l, n_layers, n_ctx);
        specdec_status st = be->i->alloc(be, per, what, &kv->layers[l].k, err);
        if (st == SPECDEC_OK) st = be->i->alloc(be, per, what, &kv->layers[l].v, err);
        if (st != SPECDEC_OK) { sd_kv_free(kv); return st; }
    }
    return SPECDEC_OK;
}

void sd_kv_free(sd_kv_cache *kv) {
    if (kv->layers && kv->be)
        for (int l = 0; l < kv->n_layers; l++) {
            kv->be->i->release(kv->be, kv->layers[l].k);
            kv->be->i->release(kv->be, kv->layers[l].v);
        }
    free(kv->layers);
    memset(kv, 0, sizeof *kv);
}

static specdec_status alloc_f(sd_backend *be, size_t n, const char *what, float **out, specdec_err *err) {
    return be->i->alloc(be, n * sizeof(float), what, (void **)out, err);
}

specdec_status sd_runtime_init(sd_runtime *rt, sd_backend *be, const sd_config *c, int n_ctx, int max_batch,
                               sd_kv_dtype_e kvdt, specdec_err *err) {
    memset(rt, 0, sizeof *rt);
    rt->be = be; rt->cfg = c; rt->n_ctx = n_ctx; rt->max_batch = max_batch; rt->kv_dtype = kvdt;
    rt->nh = c->n_heads; rt->nkv = c->n_kv_heads; rt->I = c->intermediate_size;
    if (be->tp_ranks) {
        sd_tp_plan pl;
        SD_TRY(sd_tp_plan_make(c, be->tp_ranks, 0, "model", &pl, err));
        rt->nh = pl.nh; rt->nkv = pl.nkv; rt->I = pl.I;
    }
    int H = c->hidden_size, hd = c->head_dim, I = rt->I;
    size_t B = (size_t)max_batch, qd = (size_t)rt->nh * hd, kd = (size_t)rt->nkv * hd;
    size_t half = (size_t)hd / 2;
    specdec_status st = SPECDEC_OK;
    float *tab = malloc(sizeof(float) * (size_t)n_ctx * half * 2);
    if (!tab) return sd_fail(err, SPECDEC_ERR_NOMEM, "RoPE tables: out of memory");
    /* RoPE tables in double, rounded once: inv_freq_i = theta^(-2i/hd). */
    for (int p = 0; p < n_ctx; p++)
        for (size_t i = 0; i < half; i++) {
            double ang = (double)p * pow(c->rope_theta, -2.0 * (double)i / hd);
            tab[(size_t)p * half + i] = (float)cos(ang);
            tab[(size_t)n_ctx * half + (size_t)p * half + i] = (float)sin(ang);
        }
    if (!st) st = alloc_f(be, (size_t)n_ctx * half, "RoPE cos table", &rt->rope_cos, err);
    if (!st) st = alloc_f(be, (size_t)n_ctx * half, "RoPE sin table", &rt->rope_sin, err);
    if (!st) st = be->i->write(be, rt->rope_cos, tab, sizeof(float) * (size_t)n_ctx * half, err);
    if (!st) st = be->i->write(be, rt->rope_sin, tab + (size_t)n_ctx * half, sizeof(float) * (size_t)n_ctx * half, err);
    free(tab);
    if (!st) st = alloc_f(be, B * H, "forward scratch", &rt->xn, err);
    if (!st) st = alloc_f(be, B * qd, "forward scratch", &rt->q, err);
    if (!st) st = alloc_f(be, B * kd, "forward scratch", &rt->k, err);
    if (!st) st = alloc_f(be, B * kd, "forward scratch", &rt->v, err);
    if (!st) st = alloc_f(be, B * qd, "forward scratch", &rt->att, err);
    if (!st) st = alloc_f(be, B * ((size_t)H > qd ? (size_t)H : qd), "forward scratch", &rt->tmp, err);
    if (!st) st = alloc_f(be, B * I, "forward scratch", &rt->gate, err);
    if (!st) st = alloc_f(be, B * I, "forward scratch", &rt->up, err);
    if (!st && be->i->allreduce)
        st = alloc_f(be, (size_t)be->tp_ranks * B * H, "all-reduce scratch", &rt->red, err);
    sd_attn_shape as = {rt->nh, rt->nkv, hd, kvdt};
    if (!st) st = be->i->reserve(be, &as, max_batch, n_ctx, c->vocab_size, err);
    if (st) sd_runtime_free(rt);
    return st;
}

void sd_runtime_free(sd_runtime *rt) {
    sd_backend *be = rt->be;
    if (be) {
        float *bufs[] = {rt->rope_cos, rt->rope_sin, rt->xn, rt->q, rt->k, rt->v, rt->att, rt->tmp, rt->gate, rt->up, rt->red};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) be->i->release(be, bufs[i]);
    }
    memset(rt, 0, sizeof *rt);
}

specdec_status sd_layer_forward(sd_runtime *rt, const sd_layer_w *L, const sd_kv_layer *kv, float *x, int T,
                                sd_pos pos, specdec_err *err) {
    const sd_config *c = rt->cfg;
    sd_backend *b = rt->be;
    const sd_backend_i *o = b->i;
    const int H = c->hidden_size, hd = c->head_dim, I = rt->I;
    const int nh = rt->nh, nkv = rt->nkv, qd = nh * hd, kd = nkv * hd;
    const float eps = c->rms_norm_eps;
    sd_attn_shape as = {nh, nkv, hd, rt->kv_dtype};

    /* attention block: the fused helpers fall back to the ops they stand for on a backend
     * without them (backend.h); with an all-reduce between a projection and its residual add
     * (tensor parallelism) those two stay apart */
    {   /* q (T, nh*hd), k and v (T, nkv*hd): one call over the same normed x */
        const sd_mat *W[3] = {&L->q, &L->k, &L->v};
        float *y[3] = {rt->q, rt->k, rt->v};
        const int ld[3] = {qd, kd, kd};
        SD_BE(b, err, "rmsnorm, matmul q, k, v",
              sd_be_norm_matmul_n(b, L->attn_norm, eps, x, H, rt->xn, H, 3, W, y, ld, T));
    }
    SD_BE(b, err, "q/k norm, rope, kv store, attention",
          sd_be_qk_norm_rope_attention(b, &as, kv, rt->q, rt->k, rt->v, L->q_norm, L->k_norm, eps, T, pos,
                                       rt->rope_cos, rt->rope_sin, rt->att));
    if (o->allreduce) {
        SD_BE(b, err, "matmul o", o->matmul(b, &L->o, rt->att, qd, rt->tmp, H, T));
        SD_BE(b, err, "all-reduce o", o->allreduce(b, rt->tmp, (size_t)T * H, rt->red));
        SD_BE(b, err, "add", o->add(b, x, rt->tmp, (size_t)T * H));
    } else {
        SD_BE(b, err, "matmul o, add", sd_be_matmul_add(b, &L->o, rt->att, qd, x, H, T, rt->tmp));
    }

    /* MLP block */
    if (!o->allreduce) {
        SD_BE(b, err, "rmsnorm, matmul gate, up, silu_mul, matmul down, add",
              sd_be_norm_mlp_add(b, L->mlp_norm, eps, x, H, rt->xn, H, &L->gate, &L->up, &L->down, rt->gate, rt->up, T,
                                 rt->tmp));
        return SPECDEC_OK;
    }
    {
        const sd_mat *W[2] = {&L->gate, &L->up};
        float *y[2] = {rt->gate, rt->up};
        const int ld[2] = {I, I};
        SD_BE(b, err, "rmsnorm, matmul gate, up",
              sd_be_norm_matmul_n(b, L->mlp_norm, eps, x, H, rt->xn, H, 2, W, y, ld, T));
    }
    SD_BE(b, err, "silu_mul", o->silu_mul(b, rt->gate, rt->up, I, T));
    SD_BE(b, err, "matmul down", o->matmul(b, &L->down, rt->gate, I, rt->tmp, H, T));
    SD_BE(b, err, "all-reduce down", o->allreduce(b, rt->tmp, (size_t)T * H, rt->red));
    SD_BE(b, err, "add", o->add(b, x, rt->tmp, (size_t)T * H));
    return SPECDEC_OK;
}
