/* drafter_model.c: a separate draft model (same architecture family, same vocabulary) with its
 * own context and KV cache on the target's backend (so on the CPU it runs on the target's threads). It keeps the committed token
 * history and the token behind every entry of its KV cache; accept() truncates the cache to the
 * longest prefix that still matches the history (rollback without copy), and draft() forwards
 * whatever committed tokens are missing (plus the bonus) in one batched call, then one token per
 * further draft. */
#include "speculative/drafter.h"
#include "model/ctx.h"
#include "tok/tok_compare.h"
#include "util/err.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct dmodel {
    const specdec_model *target;
    specdec_model *dm;          /* owned */
    specdec_ctx *cx;            /* own ctx on the target's backend (NULL until bound) */
    sd_backend *be;
    int key_nctx, key_mb; sd_kv_dtype_e key_kv;
    int32_t *hist; int n_hist;  /* committed x_0..x_P (host) */
    int32_t *kvtok;             /* token behind KV entry i; -1: a draft whose value stayed on the backend */
    int cap;
    float *logits;              /* (V) backend */
    sd_sampler_ws ws;
    float *h_row;               /* (V) host view of the logits for host-side choices */
    sd_drafter_prof prof;
} dmodel;

static void ctx_release(dmodel *g) {
    if (g->cx && g->logits) g->be->i->release(g->be, g->logits);
    g->logits = NULL;
    specdec_ctx_free(g->cx);   /* runs on the target's backend: frees its own buffers only */
    g->cx = NULL;
    g->be = NULL;
}

static specdec_status dm_bind(specdec_drafter *d, const sd_target *t, specdec_err *err) {
    dmodel *g = d->impl;
    const sd_config *c = &g->dm->cfg;
    int n_ctx = t->n_ctx < c->max_position_embeddings ? t->n_ctx : c->max_position_embeddings;
    /* reuse only when the history buffers (sized from the target's n_ctx) are large enough too */
    if (g->cx && g->be == t->be && g->key_nctx == n_ctx && g->cap >= t->n_ctx + 2 && g->key_mb == t->max_batch &&
        g->key_kv == t->kv_dtype) {
        SD_TRY(sd_ctx_set_pos(g->cx, 0, err));
        return SPECDEC_OK;
    }
    ctx_release(g);
    specdec_ctx_params p = specdec_ctx_default_params();
    p.n_ctx = n_ctx;
    p.max_batch = t->max_batch;
    p.kv_dtype = (specdec_kv_dtype)t->kv_dtype;
    SD_TRY(sd_ctx_init_on(g->dm, t->be, &p, &g->cx, err));
    g->be = t->be;
    specdec_status st = t->be->i->alloc(t->be, sizeof(float) * (size_t)c->vocab_size, "draft model logits",
                                        (void **)&g->logits, err);
    free(g->hist); free(g->kvtok);
    g->cap = t->n_ctx + 2;
    g->hist = malloc(sizeof(int32_t) * (size_t)g->cap);
    g->kvtok = malloc(sizeof(int32_t) * (size_t)g->cap);
    if (st == SPECDEC_OK && (!g->hist || !g->kvtok)) st = sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory");
    if (st != SPECDEC_OK) { ctx_release(g); return st; }
    g->key_nctx = n_ctx; g->key_mb = t->max_batch; g->key_kv = t->kv_dtype;
    return SPECDEC_OK;
}

static specdec_status dm_prefill(specdec_drafter *d, const int32_t *prompt, int n, specdec_err *err) {
    dmodel *g = d->impl;
    if (!g->cx) return sd_fail(err, SPECDEC_ERR_INTERNAL, "draft model prefill before bind");
    if (n + 1 > g->cap) return sd_fail(err, SPECDEC_ERR_CONTEXT, "draft model: prompt of %d tokens too long", n);
    memcpy(g->hist, prompt, sizeof(int32_t) * (size_t)n);
    g->n_hist = n;
    SD_TRY(sd_ctx_set_pos(g->cx, 0, err));
    int fw = n < g->cx->rt.n_ctx ? n : g->cx->rt.n_ctx;
    if (fw > 0) {
        SD_TRY(sd_ctx_forward(g->cx, prompt, fw, NULL, 0, NULL, err));
        memcpy(g->kvtok, prompt, sizeof(int32_t) * (size_t)fw);
    }
    return SPECDEC_OK;
}

static specdec_status dm_accept(specdec_drafter *d, const sd_accept *a, specdec_err *err) {
    dmodel *g = d->impl;
    int pos0 = a->pos0, T = a->T;
    const int32_t *tokens = a->tokens_host;
    /* During a chunked prompt prefill the round reports each chunk; the history already holds the
     * whole prompt, so a slice that lies inside it and agrees with it changes nothing (truncating
     * here would throw the prefilled draft KV away). */
    if (pos0 + 1 + T < g->n_hist && !memcmp(g->hist + pos0 + 1, tokens, sizeof *tokens * (size_t)T))
        return SPECDEC_OK;
    if (pos0 + 1 > g->n_hist || pos0 + 1 + T > g->cap)
        return sd_fail(err, SPECDEC_ERR_INTERNAL, "draft model accept at %d: history holds %d", pos0, g->n_hist);
    memcpy(g->hist + pos0 + 1, tokens, sizeof(int32_t) * (size_t)T);
    g->n_hist = pos0 + 1 + T;
    /* the drafts this slice accepted were forwarded with exactly these values */
    for (int i = 0; i < a->own && pos0 + 1 + i < g->cx->n_past; i++) g->kvtok[pos0 + 1 + i] = tokens[i];
    /* the bonus x_P (last history entry) is always forwarded by the next draft: keep <= P */
    int keep = g->cx->n_past < g->n_hist - 1 ? g->cx->n_past : g->n_hist - 1;
    for (int i = pos0 + 1; i < keep; i++)
        if (g->kvtok[i] != g->hist[i]) { keep = i; break; }
    if (keep < g->cx->n_past) SD_TRY(sd_ctx_set_pos(g->cx, keep, err));
    return SPECDEC_OK;
}

static specdec_status dm_draft(specdec_drafter *d, sd_draft_req *req, int *n_out, specdec_err *err) {
    dmodel *g = d->impl;
    specdec_ctx *cx = g->cx;
    sd_backend *b = g->be;
    int V = g->dm->cfg.vocab_size;
    bool prof = d->profile;
    *n_out = 0;
    int P = (int)req->pos;
    if (g->n_hist != P + 1 || g->hist[P] != req->bonus)
        return sd_fail(err, SPECDEC_ERR_INTERNAL, "draft model at position %d: history holds %d", P, g->n_hist);
    int n = req->n;
    if (n > cx->rt.n_ctx - P) n = cx->rt.n_ctx - P;    /* entries up to P+n-1 */
    if (n <= 0) return SPECDEC_OK;
    for (int j = 0; j < n; j++) {
        double t0 = prof ? sd_now_ms() : 0;
        int from = cx->n_past;
        int T;
        const int32_t *ids;
        if (j == 0) {   /* the committed tokens it has not seen, ending with the bonus */
            while (P + 1 - from > cx->rt.max_batch) {   /* a long backlog: whole chunks first */
                SD_TRY(sd_ctx_forward(cx, g->hist + from, cx->rt.max_batch, NULL, 0, NULL, err));
                memcpy(g->kvtok + from, g->hist + from, sizeof(int32_t) * (size_t)cx->rt.max_batch);
                from = cx->n_past;
            }
            T = P + 1 - from;
            SD_TRY(b->i->write(b, cx->ids, g->hist + from, sizeof(int32_t) * (size_t)T, err));
            memcpy(g->kvtok + from, g->hist + from, sizeof(int32_t) * (size_t)T);
            ids = cx->ids;
        } else {        /* the previous draft, straight from backend memory */
            T = 1;
            g->kvtok[from] = -1;
            ids = &req->out[j - 1];
        }
        SD_TRY(sd_ctx_run(cx, ids, T, (sd_pos){cx->pos, 0}, err));
        SD_TRY(sd_ctx_set_pos(cx, from + T, err));
        SD_TRY(sd_ctx_head(cx, T - 1, 1, g->logits, err));
        if (prof) SD_TRY(b->i->sync(b, err));
        double t1 = prof ? sd_now_ms() : 0;
        SD_TRY(sd_draft_pick(b, req, j, g->logits, V, V, NULL, NULL, &g->ws, g->h_row, NULL, err));
        if (prof) {
            SD_TRY(b->i->sync(b, err));
            double t2 = sd_now_ms();
            g->prof.layers_ms += t1 - t0;   /* embedding, layers and head: attributed to layers */
            g->prof.sample_ms += t2 - t1;
            g->prof.clock_reads += 3;
            g->prof.steps++;
        }
    }
    *n_out = n;
    return SPECDEC_OK;
}

static void dm_reset(specdec_drafter *d) { dmodel *g = d->impl; g->n_hist = 0; if (g->cx) sd_ctx_set_pos(g->cx, 0, NULL); }
static void dm_unbind(specdec_drafter *d) { ctx_release(d->impl); }
static void dm_profile(const specdec_drafter *d, sd_drafter_prof *o) { *o = ((const dmodel *)d->impl)->prof; }
static void dm_free(specdec_drafter *d) {
    dmodel *g = d->impl;
    if (!g) return;
    ctx_release(g);
    specdec_model_free(g->dm);
    free(g->hist); free(g->kvtok); free(g->h_row);
    sd_sampler_ws_free(&g->ws);
    free(g);
    d->impl = NULL;
}

static const sd_drafter_vt model_vt = {
    .name = "model", .needs_hidden = false, .supports_sampling = true, .supports_tree = false,
    .bind = dm_bind, .prefill = dm_prefill, .draft = dm_draft, .draft_tree = NULL, .accept = dm_accept,
    .reset = dm_reset, .release = dm_unbind, .profile = dm_profile, .free = dm_free,
};

/* Both directories' tokenizer.json must give the same ids when both exist (sd_tok_file_compare:
 * what decides the ids, not the bytes, so a differently formatted copy of one tokenizer passes). */
static specdec_status same_tokenizer(const char *a, const char *b, specdec_err *err) {
    char pa[1100], pb[1100];
    snprintf(pa, sizeof pa, "%s/tokenizer.json", a);
    snprintf(pb, sizeof pb, "%s/tokenizer.json", b);
    struct stat sa, sb;
    if (stat(pa, &sa) != 0 || stat(pb, &sb) != 0) return SPECDEC_OK;
    return sd_tok_file_compare(pa, pb, err);
}

specdec_status sd_drafter_model_new(const specdec_model *target, const char *dir, specdec_drafter **out,
                                    specdec_err *err) {
    *out = NULL;
    specdec_model_params mp = specdec_model_default_params();
    mp.load_mtp = false;
    specdec_model *dm = NULL;
    SD_TRY(specdec_model_load(dir, &mp, &dm, err));
    if (dm->cfg.vocab_size != target->cfg.vocab_size) {
        specdec_status st = sd_fail(err, SPECDEC_ERR_SHAPE, "draft model %s: vocab_size %d, the target's is %d", dir,
                                    dm->cfg.vocab_size, target->cfg.vocab_size);
        specdec_model_free(dm);
        return st;
    }
    specdec_status st = same_tokenizer(target->dir, dir, err);
    if (st != SPECDEC_OK) { specdec_model_free(dm); return st; }
    specdec_drafter *d = calloc(1, sizeof *d);
    dmodel *g = calloc(1, sizeof *g);
    if (g) g->h_row = malloc(sizeof(float) * (size_t)dm->cfg.vocab_size);
    if (!d || !g || !g->h_row) {
        free(d); if (g) free(g->h_row); free(g); specdec_model_free(dm);
        return sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory");
    }
    g->target = target;
    g->dm = dm;
    st = sd_sampler_ws_init(&g->ws, dm->cfg.vocab_size, err);
    if (st != SPECDEC_OK) { free(d); free(g->h_row); free(g); specdec_model_free(dm); return st; }
    d->vt = &model_vt;
    d->impl = g;
    d->probe_result = -1;
    *out = d;
    return SPECDEC_OK;
}
