/* drafter_ngram.c: prompt-lookup drafting. The context (prompt + committed tokens, ending with
 * the bonus) is searched for the most recent earlier occurrence of its last n tokens, n from
 * max_n down to 1; the tokens that followed that occurrence are proposed. The continuation is
 * read from the context extended by the proposal itself, so a periodic text keeps proposing its
 * period. No weights; never samples (q is a point mass). */
#include "speculative/drafter.h"
#include "util/err.h"
#include <stdlib.h>
#include <string.h>

typedef struct ngram {
    int max_n, min_n;               /* suffix lengths tried, longest first; shorter: no proposal */
    int32_t *hist; int n_hist, cap;
    int32_t *ext; int cap_ext;      /* hist + proposal scratch */
    sd_backend *be;                 /* where the proposals go */
    sd_drafter_prof prof;
} ngram;

static specdec_status ensure(ngram *g, int n, specdec_err *err) {
    if (n <= g->cap) return SPECDEC_OK;
    int cap = g->cap ? g->cap : 1024;
    while (cap < n) cap *= 2;
    int32_t *h = realloc(g->hist, sizeof *h * (size_t)cap);
    if (!h) return sd_fail(err, SPECDEC_ERR_NOMEM, "ngram history of %d tokens: out of memory", cap);
    g->hist = h; g->cap = cap;
    return SPECDEC_OK;
}

static specdec_status ng_bind(specdec_drafter *d, const sd_target *t, specdec_err *err) {
    ((ngram *)d->impl)->be = t->be;
    return SPECDEC_OK;
}

static specdec_status ng_prefill(specdec_drafter *d, const int32_t *prompt, int n, specdec_err *err) {
    ngram *g = d->impl;
    SD_TRY(ensure(g, n + 1, err));
    memcpy(g->hist, prompt, sizeof *prompt * (size_t)n);
    g->n_hist = n;
    return SPECDEC_OK;
}

static specdec_status ng_accept(specdec_drafter *d, const sd_accept *a, specdec_err *err) {
    ngram *g = d->impl;
    int pos0 = a->pos0, T = a->T;
    const int32_t *tokens = a->tokens_host;
    if (pos0 + 1 > g->n_hist)
        return sd_fail(err, SPECDEC_ERR_INTERNAL, "ngram accept at %d: history holds %d tokens", pos0, g->n_hist);
    SD_TRY(ensure(g, pos0 + 1 + T, err));
    memcpy(g->hist + pos0 + 1, tokens, sizeof *tokens * (size_t)T);
    g->n_hist = pos0 + 1 + T;
    return SPECDEC_OK;
}

static specdec_status ng_draft(specdec_drafter *d, sd_draft_req *req, int *n_out, specdec_err *err) {
    ngram *g = d->impl;
    double t0 = d->profile ? sd_now_ms() : 0;
    *n_out = 0;
    int L = g->n_hist;   /* hist = x_0..x_P; the bonus must be the last entry */
    if (L != req->pos + 1 || g->hist[L - 1] != req->bonus)
        return sd_fail(err, SPECDEC_ERR_INTERNAL, "ngram draft at position %lld: history holds %d tokens",
                       (long long)req->pos, L);
    if (L + req->n > g->cap_ext) {
        int cap = (L + req->n) * 2;
        int32_t *e = realloc(g->ext, sizeof *e * (size_t)cap);
        if (!e) return sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory");
        g->ext = e; g->cap_ext = cap;
    }
    const int32_t *h = g->hist;
    int match_end = -1;   /* index of the last token of the earlier occurrence */
    for (int n = g->max_n < L - 1 ? g->max_n : L - 1; n >= g->min_n && match_end < 0; n--) {
        const int32_t *suf = h + L - n;
        for (int e = L - 2; e >= n - 1; e--) {     /* most recent occurrence ending before L-1 */
            if (h[e] != suf[n - 1]) continue;
            if (memcmp(h + e - n + 1, suf, sizeof *h * (size_t)n) == 0) { match_end = e; break; }
        }
    }
    if (match_end >= 0) {
        memcpy(g->ext, h, sizeof *h * (size_t)L);
        int k = 0;
        for (; k < req->n; k++) g->ext[L + k] = g->ext[match_end + 1 + k];  /* reads ahead into ext itself */
        if (k > 0) SD_TRY(g->be->i->write(g->be, req->out, g->ext + L, sizeof *h * (size_t)k, err));
        *n_out = k;
    }
    if (d->profile) {
        g->prof.steps++;
        g->prof.clock_reads += 2;
        g->prof.sample_ms += sd_now_ms() - t0;   /* the lookup is the whole step: "sampling" */
    }
    return SPECDEC_OK;
}

static void ng_reset(specdec_drafter *d) { ((ngram *)d->impl)->n_hist = 0; }
static void ng_unbind(specdec_drafter *d) { ((ngram *)d->impl)->be = NULL; }
static void ng_profile(const specdec_drafter *d, sd_drafter_prof *o) { *o = ((const ngram *)d->impl)->prof; }
static void ng_free(specdec_drafter *d) {
    ngram *g = d->impl;
    if (!g) return;
    free(g->hist); free(g->ext); free(g);
    d->impl = NULL;
}

static const sd_drafter_vt ngram_vt = {
    .name = "ngram", .needs_hidden = false, .supports_sampling = false, .supports_tree = false,
    .bind = ng_bind, .prefill = ng_prefill, .draft = ng_draft, .draft_tree = NULL, .accept = ng_accept,
    .reset = ng_reset, .release = ng_unbind, .profile = ng_profile, .free = ng_free,
};

specdec_status sd_drafter_ngram_new(int max_n, specdec_drafter **out, specdec_err *err) {
    return sd_drafter_ngram_new_min(max_n, 1, out, err);
}

specdec_status sd_drafter_ngram_new_min(int max_n, int min_n, specdec_drafter **out, specdec_err *err) {
    specdec_drafter *d = calloc(1, sizeof *d);
    ngram *g = calloc(1, sizeof *g);
    if (!d || !g) { free(d); free(g); return sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory"); }
    g->max_n = max_n;
    g->min_n = min_n < 1 ? 1 : min_n;
    d->vt = &ngram_vt;
    d->impl = g;
    d->probe_result = -1;
    *out = d;
    return SPECDEC_OK;
}
