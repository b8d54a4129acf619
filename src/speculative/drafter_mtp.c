/* drafter_mtp.c: the MTP drafter, the mtp.* module of the target checkpoint (model-format.md).
 * It borrows the target's embedding and LM head and keeps its own KV cache (one entry per
 * context position). One step over rows t (token x, hidden h, position i):
 *   cat = [rmsnorm(embed(x), pre_fc_norm_embedding), rmsnorm(h, pre_fc_norm_hidden)]   (2H)
 *   u = fc(cat) (H); u = mtp.layers(u, i); m = rmsnorm(u, mtp.norm); logits = lm_head(m)
 * Pairing: the entry at position i pairs x_{i+1} with the target's h_i and predicts x_{i+2}.
 * accept() rebuilds the entries of the verified positions from the target's true h in one
 * batched call (chunks of max_batch) and leaves the logits of the last one: the first proposal
 * of the next round. draft() then recurses: the drafted token with the previous step's m, at the
 * next position; those entries are speculative and the next accept overwrites them.
 *
 * Reduced draft vocabulary (opt-in, specdec_drafter_set_draft_vocab; draft_vocab.h): the LM-head
 * rows of N frequent target ids are gathered once into their own matrix and each step computes
 * N logits (N x H instead of V x H). Greedy drafting takes the argmax over the N and maps it
 * through d2t; the seeded and sampling modes scatter the N logits into a V row that is -inf
 * elsewhere and choose exactly as with the full head (Gumbel noise indexed by the target id; the
 * draft distribution q is then zero outside the subset, which rejection sampling handles like
 * any q). Drafts are always ids of the subset; the target verifies them, so output is unchanged. */
#include "speculative/drafter.h"
#include "speculative/draft_vocab.h"
#include "model/model.h"
#include "util/err.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct mtp {
    const specdec_model *tm;
    const sd_mtp_w *w;
    sd_runtime rt; bool rt_ok;
    int key_nctx, key_mb, key_threads; const sd_ops *key_ops; sd_kv_dtype_e key_kv;
    sd_kv_cache kv;
    float *e, *cat, *x, *hin;   /* (mb, H), (mb, 2H), (mb, H), (H) */
    float *m_last, *logits;     /* (H), (V) */
    int kv_n;                   /* entries 0..kv_n-1 are held */
    bool has_prop; int prop_pos;/* logits predict position prop_pos + 1 (prop_pos = bonus position) */
    sd_sampler_ws ws;
    sd_drafter_prof prof;
    /* reduced draft vocabulary (dv.n == 0: the full head) */
    sd_draft_vocab dv;
    sd_mat head_r; void *head_buf;   /* (N, H) gathered rows of the LM head */
    float *logits_r;                 /* (N) */
    float *logits_sc;                /* (V) -inf except at d2t: the scatter row for non-greedy modes */
} mtp;

static void mtp_release(mtp *m) {
    if (m->rt_ok) sd_runtime_free(&m->rt);
    sd_kv_free(&m->kv);
    free(m->e); free(m->cat); free(m->x); free(m->hin); free(m->m_last); free(m->logits);
    m->e = m->cat = m->x = m->hin = m->m_last = m->logits = NULL;
    m->rt_ok = false;
}

static specdec_status mtp_bind(specdec_drafter *d, const sd_target *t, specdec_err *err) {
    mtp *m = d->impl;
    if (!t->model || t->model != m->tm)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "MTP drafter: bound to a different target model than it was made for");
    if (m->rt_ok && m->key_nctx == t->n_ctx && m->key_mb == t->max_batch && m->key_threads == t->n_threads &&
        m->key_ops == t->ops && m->key_kv == t->kv_dtype) {
        m->rt.pool = t->pool;   /* same shape: reuse everything, on this ctx's pool */
        return SPECDEC_OK;
    }
    mtp_release(m);
    const sd_config *c = &m->tm->cfg;
    int H = c->hidden_size, mb = t->max_batch;
    SD_TRY(sd_runtime_init_shared(&m->rt, c, t->n_ctx, mb, t->pool, t->ops, t->kv_dtype, err));
    m->rt_ok = true;
    specdec_status st = sd_kv_init(&m->kv, m->w->n_layers, t->n_ctx, c->n_kv_heads * c->head_dim, t->kv_dtype, err);
    if (st != SPECDEC_OK) { mtp_release(m); return st; }
    m->e = malloc(sizeof(float) * (size_t)mb * H);
    m->cat = malloc(sizeof(float) * (size_t)mb * 2 * H);
    m->x = malloc(sizeof(float) * (size_t)mb * H);
    m->hin = malloc(sizeof(float) * (size_t)H);
    m->m_last = malloc(sizeof(float) * (size_t)H);
    m->logits = malloc(sizeof(float) * (size_t)c->vocab_size);
    if (!m->e || !m->cat || !m->x || !m->hin || !m->m_last || !m->logits) {
        mtp_release(m);
        return sd_fail(err, SPECDEC_ERR_NOMEM, "MTP drafter buffers: out of memory");
    }
    m->key_nctx = t->n_ctx; m->key_mb = mb; m->key_threads = t->n_threads; m->key_ops = t->ops; m->key_kv = t->kv_dtype;
    m->kv_n = 0; m->has_prop = false;
    return SPECDEC_OK;
}

/* Entries for T rows at positions pos0.. (T <= max_batch): tokens tk (T), hidden hid (T, H).
 * Leaves m of the last row in m_last. prof: time the parts (a synchronized profile on CPU). */
static void mtp_rows(specdec_drafter *d, mtp *m, const int32_t *tk, const float *hid, int T, int pos0, bool prof) {
    const sd_config *c = &m->tm->cfg;
    const sd_ops *op = m->rt.ops;
    int H = c->hidden_size;
    float eps = c->rms_norm_eps;
    double t0 = prof ? sd_now_ms() : 0;
    sd_embed(&m->tm->w.embed, tk, T, m->e);
    for (int t = 0; t < T; t++) {
        op->rmsnorm(m->cat + (size_t)t * 2 * H, m->e + (size_t)t * H, m->w->pre_fc_norm_embedding, H, 1, eps);
        op->rmsnorm(m->cat + (size_t)t * 2 * H + H, hid + (size_t)t * H, m->w->pre_fc_norm_hidden, H, 1, eps);
    }
    op->matmul(&m->w->fc, m->cat, 2 * H, m->x, H, T, m->rt.pool);
    double t1 = prof ? sd_now_ms() : 0;
    for (int l = 0; l < m->w->n_layers; l++)
        sd_layer_forward(&m->rt, &m->w->layers[l], &m->kv.layers[l], m->x, T, pos0);
    op->rmsnorm(m->x, m->x, m->w->norm, H, T, eps);
    memcpy(m->m_last, m->x + (size_t)(T - 1) * H, sizeof(float) * (size_t)H);
    if (prof) {
        double t2 = sd_now_ms();
        m->prof.embed_ms += t1 - t0;
        m->prof.layers_ms += t2 - t1;
        m->prof.clock_reads += 3;
    }
}

static void mtp_head(mtp *m, bool prof) {
    double t0 = prof ? sd_now_ms() : 0;
    if (m->dv.n)
        m->rt.ops->matmul(&m->head_r, m->m_last, m->tm->cfg.hidden_size, m->logits_r, m->dv.n, 1, m->rt.pool);
    else
        m->rt.ops->matmul(&m->tm->w.lm_head, m->m_last, m->tm->cfg.hidden_size, m->logits, m->tm->cfg.vocab_size, 1,
                          m->rt.pool);
    if (prof) { m->prof.head_ms += sd_now_ms() - t0; m->prof.clock_reads += 2; }
}

static specdec_status mtp_prefill(specdec_drafter *d, const int32_t *prompt, int n, specdec_err *err) {
    mtp *m = d->impl;
    m->kv_n = 0; m->has_prop = false;   /* entries come from accept(0, x_1..x_n, h_0..h_{n-1}) */
    return SPECDEC_OK;
}

static specdec_status mtp_accept(specdec_drafter *d, int pos0, const int32_t *tokens, const float *hidden,
                                 int T, specdec_err *err) {
    mtp *m = d->impl;
    if (!m->rt_ok) return sd_fail(err, SPECDEC_ERR_INTERNAL, "MTP accept before bind");
    if (!hidden) return sd_fail(err, SPECDEC_ERR_INTERNAL, "MTP accept without the target's hidden states");
    if (pos0 < 0 || pos0 > m->kv_n || pos0 + T > m->rt.n_ctx || T < 1)
        return sd_fail(err, SPECDEC_ERR_INTERNAL, "MTP accept of positions %d..%d: %d entries held, n_ctx %d",
                       pos0, pos0 + T - 1, m->kv_n, m->rt.n_ctx);
    int H = m->tm->cfg.hidden_size, mb = m->rt.max_batch;
    m->kv_n = pos0;   /* rollback: entries >= pos0 are rebuilt below (truncate, no copy) */
    for (int t0 = 0; t0 < T; t0 += mb) {
        int n = T - t0 < mb ? T - t0 : mb;
        mtp_rows(d, m, tokens + t0, hidden + (size_t)t0 * H, n, pos0 + t0, false);
    }
    m->kv_n = pos0 + T;
    mtp_head(m, false);
    m->has_prop = true;
    m->prop_pos = pos0 + T;
    return SPECDEC_OK;
}

static specdec_status mtp_draft(specdec_drafter *d, sd_draft_req *req, int *n_out, specdec_err *err) {
    mtp *m = d->impl;
    int V = m->tm->cfg.vocab_size, H = m->tm->cfg.hidden_size;
    bool prof = d->profile;
    *n_out = 0;
    if (!m->has_prop || m->prop_pos != req->pos)
        return sd_fail(err, SPECDEC_ERR_INTERNAL, "MTP draft at position %lld without its first proposal",
                       (long long)req->pos);
    int P = (int)req->pos, n = req->n;
    if (P + n - 1 > m->rt.n_ctx) n = m->rt.n_ctx - P + 1;
    for (int j = 0; j < n; j++) {
        if (j > 0) {   /* entry at P+j-1 pairs d_j with m of the previous step, predicts d_{j+1} */
            memcpy(m->hin, m->m_last, sizeof(float) * (size_t)H);
            mtp_rows(d, m, &req->out[j - 1], m->hin, 1, P + j - 1, prof);
            mtp_head(m, prof);
            m->kv_n = P + j;
        }
        double t0 = prof ? sd_now_ms() : 0;
        if (m->dv.n && req->mode == SD_DRAFT_GREEDY) {
            req->out[j] = m->dv.d2t[sd_argmax(m->logits_r, m->dv.n)];
        } else if (m->dv.n) {
            for (int k = 0; k < m->dv.n; k++) m->logits_sc[m->dv.d2t[k]] = m->logits_r[k];
            req->out[j] = sd_draft_choose(&m->ws, req, m->logits_sc, V, (int64_t)P + 1 + j, req->q ? &req->q[j] : NULL);
        } else
            req->out[j] = sd_draft_choose(&m->ws, req, m->logits, V, (int64_t)P + 1 + j, req->q ? &req->q[j] : NULL);
        if (prof) { m->prof.sample_ms += sd_now_ms() - t0; m->prof.clock_reads += 2; m->prof.steps++; }
    }
    m->has_prop = false;
    *n_out = n;
    return SPECDEC_OK;
}

static void mtp_reset(specdec_drafter *d) { mtp *m = d->impl; m->kv_n = 0; m->has_prop = false; }
static void mtp_profile(const specdec_drafter *d, sd_drafter_prof *o) { *o = ((const mtp *)d->impl)->prof; }
static void mtp_dv_release(mtp *m) {
    sd_draft_vocab_free(&m->dv);
    free(m->head_buf); free(m->logits_r); free(m->logits_sc);
    m->head_buf = NULL; m->logits_r = m->logits_sc = NULL;
    memset(&m->head_r, 0, sizeof m->head_r);
}

static void mtp_free(specdec_drafter *d) {
    mtp *m = d->impl;
    if (!m) return;
    mtp_release(m);
    mtp_dv_release(m);
    sd_sampler_ws_free(&m->ws);
    free(m);
    d->impl = NULL;
}

static const sd_drafter_vt mtp_vt = {
    .name = "mtp", .needs_hidden = true, .supports_sampling = true, .supports_tree = false,
    .bind = mtp_bind, .prefill = mtp_prefill, .draft = mtp_draft, .draft_tree = NULL, .accept = mtp_accept,
    .reset = mtp_reset, .profile = mtp_profile, .free = mtp_free,
};

specdec_status sd_drafter_mtp_new(const specdec_model *target, specdec_drafter **out, specdec_err *err) {
    *out = NULL;
    if (!target->w.mtp)
        return sd_fail(err, SPECDEC_ERR_MISSING, "%s: no mtp.* drafter module bound (config.json needs "
                       "mtp_num_hidden_layers and the model loaded with load_mtp)", target->dir);
    specdec_drafter *d = calloc(1, sizeof *d);
    mtp *m = calloc(1, sizeof *m);
    if (!d || !m) { free(d); free(m); return sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory"); }
    m->tm = target;
    m->w = target->w.mtp;
    specdec_status st = sd_sampler_ws_init(&m->ws, target->cfg.vocab_size, err);
    if (st != SPECDEC_OK) { free(d); free(m); return st; }
    d->vt = &mtp_vt;
    d->impl = m;
    d->probe_result = -1;
    *out = d;
    return SPECDEC_OK;
}

specdec_status specdec_drafter_set_draft_vocab(specdec_drafter *d, const char *path, int n, specdec_err *err) {
    if (!d) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "specdec_drafter_set_draft_vocab: NULL drafter");
    if (d->vt != &mtp_vt)
        return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "a reduced draft vocabulary needs the mtp drafter (this one is %s)",
                       specdec_drafter_name(d));
    mtp *m = d->impl;
    mtp_dv_release(m);
    if (!path) return SPECDEC_OK;   /* back to the full head */
    int V = m->tm->cfg.vocab_size;
    SD_TRY(sd_draft_vocab_load(path, n, V, &m->dv, err));
    specdec_status st = sd_mat_gather_rows(&m->tm->w.lm_head, m->dv.d2t, m->dv.n, &m->head_r, &m->head_buf, err);
    if (st != SPECDEC_OK) { sd_err_prefix(err, "%s: LM head", path); mtp_dv_release(m); return st; }
    m->logits_r = malloc(sizeof(float) * (size_t)m->dv.n);
    m->logits_sc = malloc(sizeof(float) * (size_t)V);
    if (!m->logits_r || !m->logits_sc) { mtp_dv_release(m); return sd_fail(err, SPECDEC_ERR_NOMEM, "%s: out of memory", path); }
    for (int i = 0; i < V; i++) m->logits_sc[i] = -INFINITY;
    m->has_prop = false;   /* a proposal computed with the other head is stale */
    return SPECDEC_OK;
}

int specdec_drafter_draft_vocab_size(const specdec_drafter *d) {
    if (!d || d->vt != &mtp_vt || !d->impl) return 0;
    return ((const mtp *)d->impl)->dv.n;
}
