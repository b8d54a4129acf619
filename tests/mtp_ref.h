/* mtp_ref.h: a reference MTP drafter step written from model-format.md (header-only, static),
 * one row at a time on a CPU backend of its own with the host weights and its own KV cache:
 * e = rmsnorm(embed(tok)), g = rmsnorm(h), u = fc([e, g]), the mtp layers at RoPE position pos,
 * m = rmsnorm(u) and logits = lm_head(m). Used by the MTP drafter's test and by the inflation
 * test (the MTP module's logits). */
#ifndef SD_MTP_REF_H
#define SD_MTP_REF_H
#include "model/ctx.h"
#include "cpu/ops.h"
#include <stdlib.h>
#include <string.h>

typedef struct mtp_ref { const specdec_model *m; sd_backend *be; sd_runtime rt; sd_kv_cache kv; float *x, *cat, *e, *logits; } mtp_ref;

/* 0 on success. n_ctx: positions the KV cache holds. */
static inline int mtp_ref_init(mtp_ref *r, const specdec_model *m, int n_ctx, specdec_err *err) {
    memset(r, 0, sizeof *r);
    r->m = m;
    const sd_config *c = &m->cfg;
    const int H = c->hidden_size;
    sd_backend_opts bo = {.n_threads = 1};
    if (sd_backend_cpu_new(&bo, &r->be, err) != SPECDEC_OK) return -1;
    if (sd_runtime_init(&r->rt, r->be, c, n_ctx, 1, SD_KV_F32, err) != SPECDEC_OK) return -1;
    if (sd_kv_init(&r->kv, r->be, m->w.mtp->n_layers, n_ctx, c->n_kv_heads * c->head_dim, SD_KV_F32, err) != SPECDEC_OK) return -1;
    r->x = malloc(4 * (size_t)H); r->cat = malloc(8 * (size_t)H); r->e = malloc(4 * (size_t)H);
    r->logits = malloc(4 * (size_t)c->vocab_size);
    return r->x && r->cat && r->e && r->logits ? 0 : -1;
}

/* One step: token `tok` paired with hidden state h (H floats) at position pos; the output hidden
 * goes to m_out (H floats), the logits to r->logits. */
static inline void mtp_ref_step(mtp_ref *r, int32_t tok, const float *h, int pos, float *m_out) {
    const sd_config *c = &r->m->cfg;
    const sd_mtp_w *w = r->m->w.mtp;
    const sd_ops *op = sd_ops_fast();
    int H = c->hidden_size;
    int32_t pv = pos;
    sd_mat_row_f32(&r->m->w.embed, tok, r->e);
    op->rmsnorm(r->cat, r->e, w->pre_fc_norm_embedding, H, 1, c->rms_norm_eps);       /* embedding first */
    op->rmsnorm(r->cat + H, h, w->pre_fc_norm_hidden, H, 1, c->rms_norm_eps);         /* then hidden */
    op->matmul(&w->fc, r->cat, 2 * H, r->x, H, 1, NULL);
    for (int l = 0; l < w->n_layers; l++) sd_layer_forward(&r->rt, &w->layers[l], &r->kv.layers[l], r->x, 1, (sd_pos){&pv, 0}, NULL);
    op->rmsnorm(m_out, r->x, w->norm, H, 1, c->rms_norm_eps);
    op->matmul(&r->m->w.lm_head, m_out, H, r->logits, c->vocab_size, 1, NULL);
}

static inline void mtp_ref_free(mtp_ref *r) {
    free(r->x); free(r->cat); free(r->e); free(r->logits);
    sd_kv_free(&r->kv);
    sd_runtime_free(&r->rt);
    sd_backend_free(r->be);
    memset(r, 0, sizeof *r);
}

#endif
