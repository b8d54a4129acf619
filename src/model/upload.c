/* upload.c: a model's weights put on a backend once. Every matrix is uploaded under its tensor
 * name (so an out-of-memory message names it); the norm vectors, converted to f32 into one pool
 * at load, go up as one buffer and the pointers are rebased into it. A tied LM head shares the
 * embedding's upload. On the CPU backend all of this is a zero-copy view of the mapping. A
 * progress callback, when given, hears the bytes copied after each tensor. The MTP drafter may go
 * up as a 4-bit copy of its dense matrices (mtp_q4.c), which the uploaded weights then own. */
#include "model/weights.h"
#include "backend/backend.h"
#include "tp/plan.h"
#include "util/err.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const float *rebase(const float *p, const float *host_pool, const float *dev_pool) {
    return p ? dev_pool + (p - host_pool) : NULL;
}

/* A layer matrix on a tensor-parallel backend: each rank gets its slice (tp/plan.h). */
static specdec_status up_shard(sd_backend *b, const sd_tp_plan *pl, const sd_config *c, const sd_mat *h,
                               sd_tp_split split, const char *name, sd_mat *d, specdec_err *err) {
    sd_mat sl[SD_TP_MAX];
    memset(sl, 0, sizeof sl);
    *d = *h;
    d->w = d->scales = d->biases = NULL;
    specdec_status st = SPECDEC_OK;
    for (int r = 0; r < pl->n && st == SPECDEC_OK; r++) st = sd_tp_slice(pl, c, h, split, r, name, &sl[r], err);
    if (st == SPECDEC_OK) {
        d->rows = sl[0].rows;
        d->cols = sl[0].cols;
        const void *w[SD_TP_MAX], *sc[SD_TP_MAX], *bi[SD_TP_MAX];
        for (int r = 0; r < pl->n; r++) { w[r] = sl[r].w; sc[r] = sl[r].scales; bi[r] = sl[r].biases; }
        size_t es = h->dtype == SPECDEC_DTYPE_F32 ? 4 : 2, R = (size_t)d->rows, C = (size_t)d->cols;
        size_t wbytes = h->bits ? R * (C * (size_t)h->bits / 8) : R * C * es;
        st = b->i->upload_ranks(b, w, wbytes, name, &d->w, err);
        if (st == SPECDEC_OK && h->bits) {
            size_t sbytes = R * (C / (size_t)h->group) * es;
            st = b->i->upload_ranks(b, sc, sbytes, name, &d->scales, err);
            if (st == SPECDEC_OK) st = b->i->upload_ranks(b, bi, sbytes, name, &d->biases, err);
        }
    }
    for (int r = 0; r < pl->n; r++) sd_tp_slice_free(&sl[r]);
    if (st == SPECDEC_OK && b->i->prepare_mat) st = b->i->prepare_mat(b, d, name, err);   /* each rank its own form */
    if (st != SPECDEC_OK) sd_be_unload_mat(b, d);
    return st;
}

/* bytes copied so far of the total, told to the caller's callback after each tensor */
typedef struct up_prog { specdec_progress_fn fn; void *user; uint64_t done, total; } up_prog;

static specdec_status prog_tick(up_prog *pg, const sd_mat *h, const char *name, specdec_err *err) {
    pg->done += sd_mat_bytes(h);
    if (pg->fn && !pg->fn(pg->done, pg->total, pg->user))
        return sd_fail(err, SPECDEC_ERR_CANCELLED, "upload cancelled after %s", name);
    return SPECDEC_OK;
}

static uint64_t layer_bytes(const sd_layer_w *h) {
    return sd_mat_bytes(&h->q) + sd_mat_bytes(&h->k) + sd_mat_bytes(&h->v) + sd_mat_bytes(&h->o) + sd_mat_bytes(&h->gate) +
           sd_mat_bytes(&h->up) + sd_mat_bytes(&h->down);
}

static specdec_status up_mat(sd_backend *b, const sd_mat *h, const char *name, sd_mat *d, up_prog *pg, specdec_err *err) {
    SD_TRY(sd_be_upload_mat(b, h, name, d, err));
    return prog_tick(pg, h, name, err);
}

static specdec_status up_one(sd_backend *b, const sd_tp_plan *pl, const sd_config *c, const sd_mat *h, sd_tp_split split,
                             const char *name, sd_mat *d, up_prog *pg, specdec_err *err) {
    if (!pl) return up_mat(b, h, name, d, pg, err);
    SD_TRY(up_shard(b, pl, c, h, split, name, d, err));
    return prog_tick(pg, h, name, err);
}

static specdec_status up_layer(sd_backend *b, const sd_tp_plan *pl, const sd_config *c, const char *prefix,
                               const sd_layer_w *h, sd_layer_w *d, const float *hp, const float *dp, up_prog *pg,
                               specdec_err *err) {
    char nm[160];
    d->attn_norm = rebase(h->attn_norm, hp, dp);
    d->mlp_norm = rebase(h->mlp_norm, hp, dp);
    d->q_norm = rebase(h->q_norm, hp, dp);
    d->k_norm = rebase(h->k_norm, hp, dp);
#define UP(f, n, split)                                                                         \
    (snprintf(nm, sizeof nm, "%s.%s.weight", prefix, n),                                        \
     up_one(b, pl, c, &h->f, split, nm, &d->f, pg, err))
    if (pl) {   /* each rank its slices */
        SD_TRY(UP(q, "self_attn.q_proj", SD_TP_ROWS_Q));
        SD_TRY(UP(k, "self_attn.k_proj", SD_TP_ROWS_KV));
        SD_TRY(UP(v, "self_attn.v_proj", SD_TP_ROWS_KV));
    } else {    /* q, k, v end to end: one matmul_n launch on a device */
        snprintf(nm, sizeof nm, "%s.self_attn.{q,k,v}_proj.weight", prefix);
        const sd_mat *hs[3] = {&h->q, &h->k, &h->v};
        sd_mat *ds[3] = {&d->q, &d->k, &d->v};
        SD_TRY(sd_be_upload_mats(b, 3, hs, nm, ds, err));
        for (int i = 0; i < 3; i++) SD_TRY(prog_tick(pg, hs[i], nm, err));
    }
    SD_TRY(UP(o, "self_attn.o_proj", SD_TP_COLS_O));
    if (pl) {
        SD_TRY(UP(gate, "mlp.gate_proj", SD_TP_ROWS_I));
        SD_TRY(UP(up, "mlp.up_proj", SD_TP_ROWS_I));
    } else {
        snprintf(nm, sizeof nm, "%s.mlp.{gate,up}_proj.weight", prefix);
        const sd_mat *hs[2] = {&h->gate, &h->up};
        sd_mat *ds[2] = {&d->gate, &d->up};
        SD_TRY(sd_be_upload_mats(b, 2, hs, nm, ds, err));
        for (int i = 0; i < 2; i++) SD_TRY(prog_tick(pg, hs[i], nm, err));
    }
    SD_TRY(UP(down, "mlp.down_proj", SD_TP_COLS_I));
#undef UP
    return SPECDEC_OK;
}

static void unload_layer(sd_backend *b, sd_layer_w *L) {
    sd_be_unload_mat(b, &L->q); sd_be_unload_mat(b, &L->k); sd_be_unload_mat(b, &L->v); sd_be_unload_mat(b, &L->o);
    sd_be_unload_mat(b, &L->gate); sd_be_unload_mat(b, &L->up); sd_be_unload_mat(b, &L->down);
}

specdec_status sd_weights_upload(sd_backend *b, const sd_config *c, const sd_weights *h, sd_weights *d,
                                 bool mtp_q4, specdec_progress_fn progress, void *progress_user, specdec_err *err) {
    memset(d, 0, sizeof *d);
    /* the drafter as stored, or its 4-bit host copy (whose buffers d->mtp takes over: on a
     * host-visible backend the upload is a view of them) */
    sd_mtp_w q4;
    memset(&q4, 0, sizeof q4);
    const sd_mtp_w *hm = h->mtp;
    if (hm && mtp_q4) {
        SD_TRY(sd_mtp_q4(h->mtp, &q4, err));
        hm = &q4;
    }
    up_prog pg = {progress, progress_user, 0, sd_mat_bytes(&h->embed)};
    if (h->lm_head.w != h->embed.w) pg.total += sd_mat_bytes(&h->lm_head);
    for (int l = 0; l < c->n_layers; l++) pg.total += layer_bytes(&h->layers[l]);
    if (hm) {
        pg.total += sd_mat_bytes(&hm->fc);
        for (int k = 0; k < hm->n_layers; k++) pg.total += layer_bytes(&hm->layers[k]);
    }
    sd_tp_plan plan, *pl = NULL;   /* the split on a tensor-parallel backend */
    if (b->tp_ranks) {
        SD_TRY(sd_tp_plan_make(c, b->tp_ranks, c->quant_bits ? c->quant_group : 0, "model", &plan, err));
        if (!b->i->upload_ranks)
            return sd_fail(err, SPECDEC_ERR_INTERNAL, "backend %s: tensor parallel without upload_ranks", b->name);
        pl = &plan;
    }
    specdec_status st = SPECDEC_OK;
    const float *dp = NULL;
    size_t pool_n = h->f32_pool_n;
    d->layers = calloc((size_t)c->n_layers, sizeof *d->layers);
    if (h->mtp) {
        d->mtp = calloc(1, sizeof *d->mtp);
        if (d->mtp) d->mtp->layers = calloc((size_t)h->mtp->n_layers, sizeof *d->mtp->layers);
    }
    if (!d->layers || (h->mtp && (!d->mtp || !d->mtp->layers))) { st = sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory"); goto fail; }
    if (h->mtp) {   /* d->mtp owns the quantized copy's buffers from here (none when stored) */
        d->mtp->owned = q4.owned;
        d->mtp->n_owned = q4.n_owned;
        q4.owned = NULL;
        q4.n_owned = 0;
    }
    st = sd_be_upload_f32(b, h->f32_pool, pool_n, "norm weights", &dp, err);
    if (st) goto fail;
    d->norm_pool = dp;
    st = up_mat(b, &h->embed, "model.embed_tokens.weight", &d->embed, &pg, err);
    if (st) goto fail;
    if (h->lm_head.w == h->embed.w) d->lm_head = d->embed, d->lm_head_shared = true;
    else if ((st = up_mat(b, &h->lm_head, "lm_head.weight", &d->lm_head, &pg, err))) goto fail;
    d->final_norm = rebase(h->final_norm, h->f32_pool, dp);
    for (int l = 0; l < c->n_layers; l++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "model.layers.%d", l);
        if ((st = up_layer(b, pl, c, prefix, &h->layers[l], &d->layers[l], h->f32_pool, dp, &pg, err))) goto fail;
    }
    if (hm) {
        sd_mtp_w *m = d->mtp;
        m->n_layers = hm->n_layers;
        m->pre_fc_norm_embedding = rebase(hm->pre_fc_norm_embedding, h->f32_pool, dp);
        m->pre_fc_norm_hidden = rebase(hm->pre_fc_norm_hidden, h->f32_pool, dp);
        m->norm = rebase(hm->norm, h->f32_pool, dp);
        if ((st = up_mat(b, &hm->fc, "mtp.fc.weight", &m->fc, &pg, err))) goto fail;
        for (int k = 0; k < m->n_layers; k++) {
            char prefix[64];
            snprintf(prefix, sizeof prefix, "mtp.layers.%d", k);
            if ((st = up_layer(b, pl, c, prefix, &hm->layers[k], &m->layers[k], h->f32_pool, dp, &pg, err))) goto fail;
        }
    }
    sd_mtp_q4_free(&q4);   /* its layer array; the buffers are d's */
    return SPECDEC_OK;
fail:
    sd_mtp_q4_free(&q4);
    sd_weights_unload(b, c, d);
    return st;
}

void sd_weights_unload(sd_backend *b, const sd_config *c, sd_weights *d) {
    if (!b || !d) return;
    if (d->layers)
        for (int l = 0; l < c->n_layers; l++) unload_layer(b, &d->layers[l]);
    if (d->mtp) {
        if (d->mtp->layers)
            for (int k = 0; k < d->mtp->n_layers; k++) unload_layer(b, &d->mtp->layers[k]);
        sd_be_unload_mat(b, &d->mtp->fc);
        free(d->mtp->layers);
        for (int i = 0; i < d->mtp->n_owned; i++) free(d->mtp->owned[i]);
        free(d->mtp->owned);
        free(d->mtp);
    }
    if (!d->lm_head_shared) sd_be_unload_mat(b, &d->lm_head);
    sd_be_unload_mat(b, &d->embed);
    if (d->norm_pool) b->i->unload(b, d->norm_pool);
    free(d->layers);
    memset(d, 0, sizeof *d);
}
