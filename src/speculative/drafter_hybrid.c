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
 * Both parts see every accept (the module must keep its KV entries of all verified positions;
 * the lookup its history), each told as "own" only the drafts it made itself. */
#include "speculative/drafter.h"
#include "util/err.h"
#include <stdlib.h>

typedef struct hybrid {
    specdec_drafter *mtp, *ng;
    int last_lookup;               /* the last draft came from the lookup */
    int64_t lookup_rounds;
} hybrid;

static void sync_profile(specdec_drafter *d) {
    hybrid *h = d->impl;
    h->mtp->profile = h->ng->profile = d->profile;
}

static specdec_status hy_bind(specdec_drafter *d, const sd_target *t, specdec_err *err) {
    hybrid *h = d->impl;
    SD_TRY(h->mtp->vt->bind(h->mtp, t, err));
    return h->ng->vt->bind(h->ng, t, err);
}

static specdec_status hy_prefill(specdec_drafter *d, const int32_t *prompt, int n, specdec_err *err) {
    hybrid *h = d->impl;
    h->last_lookup = 0;
    SD_TRY(h->mtp->vt->prefill(h->mtp, prompt, n, err));
    return h->ng->vt->prefill(h->ng, prompt, n, err);
}

static specdec_status hy_accept(specdec_drafter *d, const sd_accept *a, specdec_err *err) {
    hybrid *h = d->impl;
    sd_accept am = *a, an = *a;
    am.own = h->last_lookup ? 0 : a->own;
    an.own = h->last_lookup ? a->own : 0;
    SD_TRY(h->mtp->vt->accept(h->mtp, &am, err));
    return h->ng->vt->accept(h->ng, &an, err);
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
    return h->mtp->vt->draft(h->mtp, req, n_out, err);
}

static void hy_reset(specdec_drafter *d) {
    hybrid *h = d->impl;
    h->last_lookup = 0;
    h->mtp->vt->reset(h->mtp);
    h->ng->vt->reset(h->ng);
}

static void hy_release(specdec_drafter *d) {
    hybrid *h = d->impl;
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
