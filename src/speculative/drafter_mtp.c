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
#include "model/runtime.h"
#include "util/err.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct mtp {
    const specdec_model *tm;
    sd_target t;                 /* the bound target (its backend and weights there) */
    sd_backend *be;
    const sd_mtp_w *w;           /* t.w->mtp: the module's weights on the backend */
    sd_runtime rt; bool rt_ok;
    int key_nctx, key_mb; sd_kv_dtype_e key_kv; const void *key_w;
    sd_kv_cache kv;
    /* backend memory */
    float *e, *cat, *x;          /* (mb, H), (mb, 2H), (mb, H) */
    float *m_last, *logits;      /* (H), (V) */
    int kv_n;                    /* entries 0..kv_n-1 are held */
    bool has_prop; int prop_pos; /* logits predict position prop_pos + 1 (prop_pos = bonus position) */
    /* host scratch for choices the backend cannot make (rejection sampling) */
    sd_sampler_ws ws;
    float *h_row, *h_sc;         /* (V), (V) -inf except while a subset row is being chosen */
    sd_drafter_prof prof;
    /* reduced draft vocabulary (dv.n == 0: the full head); host gather, uploaded at bind */
    sd_draft_vocab dv;
    sd_mat head_h; void *head_buf;   /* (N, H) gathered rows of the LM head, host */
    sd_mat head_r;                   /* the same on the backend */
    int32_t *d2t_dev;                /* (N) the ids on the backend */
    float *logits_r;                 /* (N) backend */
    sd_backend *dv_be;               /* the backend head_r / d2t_dev / logits_r live on */
} mtp;

static void dv_unload(mtp *m) {
    if (!m->dv_be) return;
    sd_be_unload_mat(m->dv_be, &m->head_r);
    m->dv_be->i->release(m->dv_be, m->d2t_dev);
    m->dv_be->i->release(m->dv_be, m->logits_r);
    m->d2t_dev = NULL; m->logits_r = NULL; m->dv_be = NULL;
}

static void mtp_release(mtp *m) {
    if (m->rt_ok) sd_runtime_free(&m->rt);
    sd_kv_free(&m->kv);
    if (m->be) {
        float *bufs[] = {m->e, m->cat, m->x, m->m_last, m->logits};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) m->be->i->release(m->be, bufs[i]);
    }
    m->e = m->cat = m->x = m->m_last = m->logits = NULL;
    m->rt_ok = false;
}

/* The draft vocabulary's head, ids and logits on the bound backend. */
static specdec_status dv_upload(mtp *m, specdec_err *err) {
    if (!m->dv.n || m->dv_be == m->be) return SPECDEC_OK;
    dv_unload(m);
    sd_backend *b = m->be;
    SD_TRY(sd_be_upload_mat(b, &m->head_h, "draft vocabulary LM head", &m->head_r, err));
    m->dv_be = b;
    SD_TRY(b->i->alloc(b, sizeof(int32_t) * (size_t)m->dv.n, "draft vocabulary ids", (void **)&m->d2t_dev, err));
    SD_TRY(b->i->write(b, m->d2t_dev, m->dv.d2t, sizeof(int32_t) * (size_t)m->dv.n, err));
    SD_TRY(b->i->alloc(b, sizeof(float) * (size_t)m->dv.n, "draft vocabulary logits", (void **)&m->logits_r, err));
    return SPECDEC_OK;
}

static specdec_status mtp_bind(specdec_drafter *d, const sd_target *t, specdec_err *err) {
    mtp *m = d->impl;
    if (!t->model || t->model != m->tm)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "MTP drafter: bound to a different target model than it was made for");
    if (!t->w->mtp)
        return sd_fail(err, SPECDEC_ERR_MISSING, "MTP drafter: the target context has no mtp.* weights on its backend");
    if (m->rt_ok && m->be == t->be && m->key_nctx == t->n_ctx && m->key_mb == t->max_batch && m->key_kv == t->kv_dtype &&
        m->key_w == t->w) {
        m->t = *t;   /* same shape on the same backend: reuse everything */
        return dv_upload(m, err);
    }
    mtp_release(m);
    m->t = *t;
    m->be = t->be;
    m->w = t->w->mtp;
    const sd_config *c = &m->tm->cfg;
    sd_backend *b = m->be;
    size_t H = (size_t)c->hidden_size, mb = (size_t)t->max_batch, V = (size_t)c->vocab_size;
    specdec_status st = sd_runtime_init(&m->rt, b, c, t->n_ctx, t->max_batch, t->kv_dtype, err);
    if (st != SPECDEC_OK) return st;
    m->rt_ok = true;
    st = sd_kv_init(&m->kv, b, m->w->n_layers, t->n_ctx, m->rt.nkv * c->head_dim, t->kv_dtype, err);
    if (!st) st = b->i->alloc(b, sizeof(float) * mb * H, "MTP drafter", (void **)&m->e, err);
    if (!st) st = b->i->alloc(b, sizeof(float) * mb * 2 * H, "MTP drafter", (void **)&m->cat, err);
    if (!st) st = b->i->alloc(b, sizeof(float) * mb * H, "MTP drafter", (void **)&m->x, err);
    if (!st) st = b->i->alloc(b, sizeof(float) * H, "MTP drafter", (void **)&m->m_last, err);
    if (!st) st = b->i->alloc(b, sizeof(float) * V, "MTP drafter logits", (void **)&m->logits, err);
    if (!st && (!m->h_row || !m->h_sc)) {
        m->h_row = malloc(sizeof(float) * V);
        m->h_sc = malloc(sizeof(float) * V);
        if (!m->h_row || !m->h_sc) st = sd_fail(err, SPECDEC_ERR_NOMEM, "MTP drafter buffers: out of memory");
        else for (size_t i = 0; i < V; i++) m->h_sc[i] = -INFINITY;
    }
    if (!st) st = dv_upload(m, err);
    if (st != SPECDEC_OK) { mtp_release(m); return st; }
    m->key_nctx = t->n_ctx; m->key_mb = t->max_batch; m->key_kv = t->kv_dtype; m->key_w = t->w;
    m->kv_n = 0; m->has_prop = false;
    return SPECDEC_OK;
}

/* Entries for T rows at positions pos(t) (T <= max_batch): tokens tk (T), hidden hid (T, H), both
 * backend. Leaves m of the last row in m_last. prof: time the parts (synchronized). */
static specdec_status mtp_rows(mtp *m, const int32_t *tk, const float *hid, int T, sd_pos pos, bool prof,
                               specdec_err *err) {
    const sd_config *c = &m->tm->cfg;
    sd_backend *b = m->be;
    const sd_backend_i *o = b->i;
    int H = c->hidden_size;
    float eps = c->rms_norm_eps;
    double t0 = prof ? sd_now_ms() : 0;
    SD_BE(b, err, "MTP embed", o->embed(b, &m->t.w->embed, tk, T, m->e, H));
    SD_BE(b, err, "MTP norm", o->rmsnorm(b, m->cat, 2 * H, m->e, H, m->w->pre_fc_norm_embedding, H, T, eps)); /* embedding first */
    SD_BE(b, err, "MTP norm", o->rmsnorm(b, m->cat + H, 2 * H, hid, H, m->w->pre_fc_norm_hidden, H, T, eps));  /* then hidden */
    SD_BE(b, err, "MTP fc", o->matmul(b, &m->w->fc, m->cat, 2 * H, m->x, H, T));
    if (prof) SD_TRY(o->sync(b, err));
    double t1 = prof ? sd_now_ms() : 0;
    for (int l = 0; l < m->w->n_layers; l++)
        SD_TRY(sd_layer_forward(&m->rt, &m->w->layers[l], &m->kv.layers[l], m->x, T, pos, err));
    SD_BE(b, err, "MTP norm", o->rmsnorm(b, m->x, H, m->x, H, m->w->norm, H, T, eps));
    SD_TRY(o->copy(b, m->m_last, m->x + (size_t)(T - 1) * H, sizeof(float) * (size_t)H, err));
    if (prof) {
        SD_TRY(o->sync(b, err));
        double t2 = sd_now_ms();
        m->prof.embed_ms += t1 - t0;
        m->prof.layers_ms += t2 - t1;
        m->prof.clock_reads += 3;
    }
    return SPECDEC_OK;
}

static specdec_status mtp_head(mtp *m, bool prof, specdec_err *err) {
    sd_backend *b = m->be;
    int H = m->tm->cfg.hidden_size;
    double t0 = prof ? sd_now_ms() : 0;
    if (m->dv.n) SD_BE(b, err, "MTP head", b->i->matmul(b, &m->head_r, m->m_last, H, m->logits_r, m->dv.n, 1));
    else SD_BE(b, err, "MTP head", b->i->matmul(b, &m->t.w->lm_head, m->m_last, H, m->logits, m->tm->cfg.vocab_size, 1));
    if (prof) {
        SD_TRY(b->i->sync(b, err));
        m->prof.head_ms += sd_now_ms() - t0;
        m->prof.clock_reads += 2;
    }
    return SPECDEC_OK;
}

static specdec_status mtp_prefill(specdec_drafter *d, const int32_t *prompt, int n, specdec_err *err) {
    mtp *m = d->impl;
    m->kv_n = 0; m->has_prop = false;   /* entries come from accept(0, x_1..x_n, h_0..h_{n-1}) */
    return SPECDEC_OK;
}

static specdec_status mtp_accept(specdec_drafter *d, const sd_accept *a, specdec_err *err) {
    mtp *m = d->impl;
    int pos0 = a->pos0, T = a->T;
    if (!m->rt_ok) return sd_fail(err, SPECDEC_ERR_INTERNAL, "MTP accept before bind");
    if (!a->hidden) return sd_fail(err, SPECDEC_ERR_INTERNAL, "MTP accept without the target's hidden states");
    if (pos0 < 0 || pos0 > m->kv_n || pos0 + T > m->rt.n_ctx || T < 1)
        return sd_fail(err, SPECDEC_ERR_INTERNAL, "MTP accept of positions %d..%d: %d entries held, n_ctx %d",
                       pos0, pos0 + T - 1, m->kv_n, m->rt.n_ctx);
    int H = m->tm->cfg.hidden_size, mb = m->rt.max_batch;
    m->kv_n = pos0;   /* rollback: entries >= pos0 are rebuilt below (truncate, no copy) */
    /* one recorded sequence per (slice length, where its tokens / hidden states / position live) */
    uint64_t kv[6] = {(uint64_t)(uintptr_t)m, (uint64_t)T, (uint64_t)(uintptr_t)a->tokens, (uint64_t)(uintptr_t)a->hidden,
                      (uint64_t)(uintptr_t)a->pos.base, (uint64_t)(int64_t)a->pos.off};
    uint64_t key = sd_be_key("mtp accept", kv, 6);
    if (!sd_be_seq_begin(m->be, key)) {
        for (int t0 = 0; t0 < T; t0 += mb) {
            int n = T - t0 < mb ? T - t0 : mb;
            SD_TRY(mtp_rows(m, a->tokens + t0, a->hidden + (size_t)t0 * H, n, (sd_pos){a->pos.base, a->pos.off + t0}, false, err));
        }
        SD_TRY(mtp_head(m, false, err));
        SD_TRY(sd_be_seq_end(m->be, key, err));
    }
    m->kv_n = pos0 + T;
    m->has_prop = true;
    m->prop_pos = pos0 + T;
    return SPECDEC_OK;
}

static specdec_status mtp_draft(specdec_drafter *d, sd_draft_req *req, int *n_out, specdec_err *err) {
    mtp *m = d->impl;
    int V = m->tm->cfg.vocab_size;
    bool prof = d->profile;
    *n_out = 0;
    if (!m->has_prop || m->prop_pos != req->pos)
        return sd_fail(err, SPECDEC_ERR_INTERNAL, "MTP draft at position %lld without its first proposal",
                       (long long)req->pos);
    int P = (int)req->pos, n = req->n;
    if (P + n - 1 > m->rt.n_ctx) n = m->rt.n_ctx - P + 1;
    const float *lg = m->dv.n ? m->logits_r : m->logits;
    int nl = m->dv.n ? m->dv.n : V;
    /* when the backend makes every choice, the n steps are one recorded sequence per (n, mode,
     * sampling parameters, head): the positions and the drafted ids stay in backend memory */
    bool rec = !prof && sd_draft_on_backend(m->be, req);
    uint64_t key = 0;
    if (rec) {
        uint64_t kv[10] = {(uint64_t)(uintptr_t)m, (uint64_t)n, (uint64_t)req->mode, (uint64_t)m->dv.n,
                           (uint64_t)(uintptr_t)req->out, (uint64_t)(uintptr_t)req->pos_dev};
        sd_be_key_sampling(req->sp, kv + 6);
        key = sd_be_key("mtp draft", kv, 10);
    }
    if (!rec || !sd_be_seq_begin(m->be, key)) {
        for (int j = 0; j < n; j++) {
            if (j > 0) {   /* entry at P+j-1 pairs d_j with m of the previous step, predicts d_{j+1} */
                SD_TRY(mtp_rows(m, &req->out[j - 1], m->m_last, 1, (sd_pos){req->pos_dev, j - 1}, prof, err));
                SD_TRY(mtp_head(m, prof, err));
            }
            double t0 = prof ? sd_now_ms() : 0;
            SD_TRY(sd_draft_pick(m->be, req, j, lg, nl, V, m->dv.n ? m->d2t_dev : NULL, m->dv.n ? m->dv.d2t : NULL, &m->ws,
                                 m->h_row, m->h_sc, err));
            if (prof) {
                SD_TRY(m->be->i->sync(m->be, err));
                m->prof.sample_ms += sd_now_ms() - t0;
                m->prof.clock_reads += 2;
                m->prof.steps++;
            }
        }
        if (rec) SD_TRY(sd_be_seq_end(m->be, key, err));
    }
    if (n > 1) m->kv_n = P + n - 1;
    m->has_prop = false;
    *n_out = n;
    return SPECDEC_OK;
}

static void mtp_reset(specdec_drafter *d) { mtp *m = d->impl; m->kv_n = 0; m->has_prop = false; }
static void mtp_unbind(specdec_drafter *d) {
    mtp *m = d->impl;
    dv_unload(m);
    mtp_release(m);
    m->be = NULL;
}
static void mtp_profile(const specdec_drafter *d, sd_drafter_prof *o) { *o = ((const mtp *)d->impl)->prof; }
static void mtp_dv_release(mtp *m) {
    dv_unload(m);
    sd_draft_vocab_free(&m->dv);
    free(m->head_buf);
    m->head_buf = NULL;
    memset(&m->head_h, 0, sizeof m->head_h);
}

static void mtp_free(specdec_drafter *d) {
    mtp *m = d->impl;
    if (!m) return;
    mtp_dv_release(m);
    mtp_release(m);
    sd_sampler_ws_free(&m->ws);
    free(m->h_row); free(m->h_sc);
    free(m);
    d->impl = NULL;
}

static const sd_drafter_vt mtp_vt = {
    .name = "mtp", .needs_hidden = true, .supports_sampling = true, .supports_tree = false,
    .bind = mtp_bind, .prefill = mtp_prefill, .draft = mtp_draft, .draft_tree = NULL, .accept = mtp_accept,
    .reset = mtp_reset, .release = mtp_unbind, .profile = mtp_profile, .free = mtp_free,
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
    specdec_drafter *part = sd_drafter_hybrid_mtp(d);   /* mtp+ngram: its module's vocabulary */
    if (part) return specdec_drafter_set_draft_vocab(part, path, n, err);
    if (d->vt != &mtp_vt)
        return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "a reduced draft vocabulary needs the mtp drafter (this one is %s)",
                       specdec_drafter_name(d));
    mtp *m = d->impl;
    mtp_dv_release(m);
    if (!path) return SPECDEC_OK;   /* back to the full head */
    int V = m->tm->cfg.vocab_size;
    SD_TRY(sd_draft_vocab_load(path, n, V, &m->dv, err));
    specdec_status st = sd_mat_gather_rows(&m->tm->w.lm_head, m->dv.d2t, m->dv.n, &m->head_h, &m->head_buf, err);
    if (st != SPECDEC_OK) { sd_err_prefix(err, "%s: LM head", path); mtp_dv_release(m); return st; }
    m->has_prop = false;   /* a proposal computed with the other head is stale */
    /* bound already: the subset's head goes to the backend now (else at bind) */
    if (m->be && (st = dv_upload(m, err)) != SPECDEC_OK) { mtp_dv_release(m); return st; }
    return SPECDEC_OK;
}

int specdec_drafter_draft_vocab_size(const specdec_drafter *d) {
    const specdec_drafter *part = sd_drafter_hybrid_mtp(d);
    if (part) return specdec_drafter_draft_vocab_size(part);
    if (!d || d->vt != &mtp_vt || !d->impl) return 0;
    return ((const mtp *)d->impl)->dv.n;
}
