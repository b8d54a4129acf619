/* drafter_hybrid.c: MTP with prompt lookup ("mtp+ngram"). Each round first looks the context up
 * (drafter_ngram.c: the most recent earlier occurrence of its last tokens); when a match of at
 * least min_n tokens exists, the tokens that followed it are the round's drafts, at no model cost;
 * otherwise the MTP module drafts as it would alone.
 *
 * Why: text that repeats itself (code, lists, a quoted prompt, a model's loops) is predicted
 * exactly by the lookup, longer and cheaper than by the one-layer module, and elsewhere the module
 * keeps its acceptance. The target verifies every draft whichever source made it, so the output
 * is classic decoding's (greedy and seeded); in rejection sampling the round needs the draft
 * distribution q, which only the module has, so there the module drafts every round.
 *
 * The lookup sees every accept at once (its history). The module needs its KV entries of every
 * verified position, but only when it drafts: its accepts are kept (ids and the target's hidden
 * states copied into buffers of this drafter) and given to it as one slice just before it drafts,
 * so a stretch of lookup rounds costs no module work at all, and the catch-up that follows runs
 * as one batch (measured on the embedded pair: the module's accept was ~0.2 ms of a ~2.3 ms
 * round whichever source drafted). */
#include "speculative/drafter.h"
#include "util/err.h"
#include <stdlib.h>
#include <string.h>

#define HY_CAP 64                  /* verified positions kept for the module before it must take them */

typedef struct hybrid {
    specdec_drafter *mtp, *ng;
    int last_lookup;               /* the last draft came from the lookup */
    int64_t lookup_rounds;
    /* the module's pending accepts: positions p0 .. p0 + pn - 1 (one contiguous verified slice) */
    sd_backend *be;
    int H, p0, pn;
    int32_t *tok_dev, *pos_dev;    /* backend: HY_CAP ids, the slice's first position */
    float *hid_dev;                /* backend: HY_CAP x H hidden states */
    int32_t tok_host[HY_CAP];
} hybrid;

static void free_bufs(hybrid *h) {
    if (h->be) {
        h->be->i->release(h->be, h->tok_dev);
        h->be->i->release(h->be, h->pos_dev);
        h->be->i->release(h->be, h->hid_dev);
    }
    h->tok_dev = h->pos_dev = NULL;
    h->hid_dev = NULL;
    h->be = NULL;
    h->pn = 0;
}

/* The pending slice to the module (one accept). */
static specdec_status flush(hybrid *h, specdec_err *err) {
    if (h->pn == 0) return SPECDEC_OK;
    SD_TRY(h->be->i->write(h->be, h->pos_dev, &h->p0, sizeof h->p0, err));
    const sd_accept a = {.pos0 = h->p0, .T = h->pn, .pos = {h->pos_dev, 0}, .tokens = h->tok_dev,
                         .tokens_host = h->tok_host, .hidden = h->hid_dev, .own = 0};
    h->pn = 0;
    return h->mtp->vt->accept(h->mtp, &a, err);
}

static void sync_profile(specdec_drafter *d) {
    hybrid *h = d->impl;
    h->mtp->profile = h->ng->profile = d->profile;
}

static specdec_status hy_bind(specdec_drafter *d, const sd_target *t, specdec_err *err) {
    hybrid *h = d->impl;
    if (h->be != t->be || h->H != t->hidden) {
        free_bufs(h);
        h->be = t->be;
        h->H = t->hidden;
        const sd_backend_i *o = t->be->i;
        specdec_status st = o->alloc(t->be, sizeof(int32_t) * HY_CAP, "mtp+ngram ids", (void **)&h->tok_dev, err);
        if (st == SPECDEC_OK) st = o->alloc(t->be, sizeof(int32_t), "mtp+ngram position", (void **)&h->pos_dev, err);
        if (st == SPECDEC_OK)
            st = o->alloc(t->be, sizeof(float) * HY_CAP * (size_t)t->hidden, "mtp+ngram hidden states", (void **)&h->hid_dev, err);
        if (st != SPECDEC_OK) { free_bufs(h); return st; }
    }
    h->pn = 0;
    SD_TRY(h->mtp->vt->bind(h->mtp, t, err));
    return h->ng->vt->bind(h->ng, t, err);
}

static specdec_status hy_prefill(specdec_drafter *d, const int32_t *prompt, int n, specdec_err *err) {
    hybrid *h = d->impl;
    h->last_lookup = 0;
    h->pn = 0;
    SD_TRY(h->mtp->vt->prefill(h->mtp, prompt, n, err));
    return h->ng->vt->prefill(h->ng, prompt, n, err);
}

static specdec_status hy_accept(specdec_drafter *d, const sd_accept *a, specdec_err *err) {
    hybrid *h = d->impl;
    sd_accept an = *a;
    an.own = h->last_lookup ? a->own : 0;
    SD_TRY(h->ng->vt->accept(h->ng, &an, err));
    if (!h->be) return sd_fail(err, SPECDEC_ERR_INTERNAL, "mtp+ngram accept before bind");
    if (h->pn && a->pos0 != h->p0 + h->pn) {   /* not where the pending slice ends: keep what precedes */
        if (a->pos0 < h->p0 || a->pos0 > h->p0 + h->pn)
            return sd_fail(err, SPECDEC_ERR_INTERNAL, "mtp+ngram accept at %d: pending positions %d..%d", a->pos0, h->p0,
                           h->p0 + h->pn - 1);
        h->pn = a->pos0 - h->p0;
    }
    if (h->pn + a->T > HY_CAP) SD_TRY(flush(h, err));
    if (a->T > HY_CAP) {   /* longer than the buffers: straight to the module */
        sd_accept am = *a;
        am.own = 0;
        return h->mtp->vt->accept(h->mtp, &am, err);
    }
    const size_t H = (size_t)h->H;
    if (h->pn == 0) h->p0 = a->pos0;
    SD_TRY(h->be->i->copy(h->be, h->tok_dev + h->pn, a->tokens, sizeof(int32_t) * (size_t)a->T, err));
    SD_TRY(h->be->i->copy(h->be, h->hid_dev + (size_t)h->pn * H, a->hidden, sizeof(float) * (size_t)a->T * H, err));
    memcpy(h->tok_host + h->pn, a->tokens_host, sizeof(int32_t) * (size_t)a->T);
    h->pn += a->T;
    return SPECDEC_OK;
}

static specdec_status hy_draft(specdec_drafter *d, sd_draft_req *req, int *n_out, specdec_err *err) {
    hybrid *h = d->impl;
    sync_profile(d);
    *n_out = 0;
    if (req->mode != SD_DRAFT_SAMPLE) {
        int k = 0;
        SD_TRY(h->ng->vt->draft(h->ng, req, &k, err));
        if (k > 0) {
            h->last_lookup = 1;
            h->lookup_rounds++;
            *n_out = k;
            return SPECDEC_OK;
        }
    }
    h->last_lookup = 0;
    SD_TRY(flush(h, err));
    return h->mtp->vt->draft(h->mtp, req, n_out, err);
}

static void hy_reset(specdec_drafter *d) {
    hybrid *h = d->impl;
    h->last_lookup = 0;
    h->pn = 0;
    h->mtp->vt->reset(h->mtp);
    h->ng->vt->reset(h->ng);
}

static void hy_release(specdec_drafter *d) {
    hybrid *h = d->impl;
    free_bufs(h);
    h->mtp->vt->release(h->mtp);
    h->ng->vt->release(h->ng);
}

/* The module's step profile, the lookups added as sampling time (a lookup is the whole step). */
static void hy_profile(const specdec_drafter *d, sd_drafter_prof *o) {
    const hybrid *h = d->impl;
    sd_drafter_prof pn;
    h->mtp->vt->profile(h->mtp, o);
    h->ng->vt->profile(h->ng, &pn);
    o->steps += pn.steps;
    o->sample_ms += pn.sample_ms;
    o->clock_reads += pn.clock_reads;
    o->lookup_rounds = h->lookup_rounds;
}

static void hy_free(specdec_drafter *d) {
    hybrid *h = d->impl;
    if (!h) return;
    free_bufs(h);
    specdec_drafter_free(h->mtp);
    specdec_drafter_free(h->ng);
    free(h);
    d->impl = NULL;
}

static const sd_drafter_vt hybrid_vt = {
    .name = "mtp+ngram", .needs_hidden = true, .supports_sampling = true, .supports_tree = false,
    .bind = hy_bind, .prefill = hy_prefill, .draft = hy_draft, .draft_tree = NULL, .accept = hy_accept,
    .reset = hy_reset, .release = hy_release, .profile = hy_profile, .free = hy_free,
};

specdec_drafter *sd_drafter_hybrid_mtp(const specdec_drafter *d) {
    return d && d->vt == &hybrid_vt && d->impl ? ((const hybrid *)d->impl)->mtp : NULL;
}

specdec_status sd_drafter_hybrid_new(const specdec_model *target, int min_n, specdec_drafter **out, specdec_err *err) {
    *out = NULL;
    specdec_drafter *d = calloc(1, sizeof *d);
    hybrid *h = calloc(1, sizeof *h);
    if (!d || !h) { free(d); free(h); return sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory"); }
    specdec_status st = sd_drafter_mtp_new(target, &h->mtp, err);
    if (st == SPECDEC_OK) st = sd_drafter_ngram_new_min(min_n > 4 ? min_n : 4, min_n, &h->ng, err);
    if (st != SPECDEC_OK) {
        specdec_drafter_free(h->mtp);
        free(h); free(d);
        return st;
    }
    d->vt = &hybrid_vt;
    d->impl = h;
    d->probe_result = -1;
    *out = d;
    return SPECDEC_OK;
}
