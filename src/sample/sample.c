/* sample.c: filtering a logits row into a sparse distribution, Gumbel-max seeded sampling,
 * and the inverse-CDF / residual draws of speculative sampling (contracts in sample.h).
 *
 * Cost per row of V logits: greedy is one pass. top-k is one pass with a k-entry min-heap
 * (O(V log k) worst case, ~O(V) typical) and then work on k entries only. top-p without top-k
 * computes the softmax mass over V once and sorts only the candidates above a threshold chosen
 * so their mass already covers top_p (never a full sort unless the row is nearly flat).
 * All sums run in a fixed order (ascending id, or the sorted order) so a row always gives the
 * same distribution and the same token. Seeded sampling (Gumbel-max) batches its uniforms,
 * prunes tokens that cannot win, and skips the filter entirely for an unfiltered row. */
#include "sample/sample.h"
#include "sample/rng.h"
#include "util/err.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- dist ------------------------------------------------------------------------- */

specdec_status sd_dist_init(sd_dist *d, int vocab, specdec_err *err) {
    memset(d, 0, sizeof *d);
    if (vocab <= 0) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "sd_dist_init: vocab %d <= 0", vocab);
    d->id = malloc((size_t)vocab * sizeof *d->id);
    d->p = malloc((size_t)vocab * sizeof *d->p);
    d->z = malloc((size_t)vocab * sizeof *d->z);
    if (!d->id || !d->p || !d->z) {
        sd_dist_free(d);
        return sd_fail(err, SPECDEC_ERR_NOMEM, "sd_dist_init: no memory for a %d-token distribution", vocab);
    }
    d->vocab = d->cap = vocab;
    sd_dist_set_onehot(d, 0);
    return SPECDEC_OK;
}

void sd_dist_free(sd_dist *d) {
    if (!d) return;
    free(d->id); free(d->p); free(d->z);
    memset(d, 0, sizeof *d);
}

void sd_dist_set_onehot(sd_dist *d, int32_t id) {
    d->n = 1;
    d->id[0] = id;
    d->p[0] = 1.0;
    d->z[0] = 0.0;
    d->total = 1.0;
}

double sd_dist_prob(const sd_dist *d, int32_t id) {
    if (id < 0 || id >= d->vocab || d->n <= 0) return 0.0;
    if (d->n == d->vocab) return d->p[id];
    int lo = 0, hi = d->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (d->id[mid] == id) return d->p[mid];
        if (d->id[mid] < id) lo = mid + 1; else hi = mid - 1;
    }
    return 0.0;
}

int32_t sd_dist_sample(const sd_dist *d, double u) {
    if (d->n <= 0) return -1;
    double target = u * d->total, cum = 0.0;
    for (int i = 0; i < d->n; i++) {
        cum += d->p[i];
        if (cum > target) return d->id[i];
    }
    return d->id[d->n - 1];   /* u * total rounded up to the full mass */
}

/* q's probability of p->id[i], walking q's ascending ids with cursor *j. */
static double q_at(const sd_dist *q, int32_t id, int *j) {
    if (q->n == q->vocab) return (id >= 0 && id < q->vocab) ? q->p[id] : 0.0;
    while (*j < q->n && q->id[*j] < id) (*j)++;
    return (*j < q->n && q->id[*j] == id) ? q->p[*j] : 0.0;
}

int32_t sd_residual_sample(const sd_dist *p, const sd_dist *q, double u) {
    if (p->n <= 0) return -1;
    double mass = 0.0;
    int j = 0, last = -1;
    for (int i = 0; i < p->n; i++) {
        double r = p->p[i] - q_at(q, p->id[i], &j);
        if (r > 0) { mass += r; last = i; }
    }
    if (!(mass > 0)) return sd_dist_sample(p, u);
    double target = u * mass, cum = 0.0;
    j = 0;
    for (int i = 0; i < p->n; i++) {
        double r = p->p[i] - q_at(q, p->id[i], &j);
        if (r > 0) {
            cum += r;
            if (cum > target) return p->id[i];
        }
    }
    return p->id[last];
}

/* ---- Gumbel-max ------------------------------------------------------------------- */
/* The naive loop (sd_dist_gumbel_ref) draws a Gumbel value for every kept token. The fast
 * path computes the same argmax with the same g_i, but:
 * - draws the 52-bit uniforms GCHUNK tokens at a time, one Philox block per token pair
 *   (sd_rng_bits_pairs, vectorized);
 * - bounds g_i from above by sd_gumbel_bound_of_bits (exponent of 1 - u only) and skips token
 *   i when fl(z_i + bound_i) < best-so-far: then fl(z_i + g_i) <= fl(z_i + bound_i) < best
 *   (rounding is monotone), so i could never win or tie. best starts at the largest z, so
 *   for an LLM row only a handful of tokens per row reach the two logs. */

#define GCHUNK 256   /* tokens per batch (even): bits and bounds stay in L1 */

typedef struct { double v; int32_t id; } gbest;   /* best z + g so far; ties: lower id */

static inline void gbest_offer(gbest *b, double v, int32_t id) {
    if (v > b->v || (v == b->v && id < b->id)) { b->v = v; b->id = id; }
}

/* Tokens i0 .. i0+n-1 (i0 even, n <= GCHUNK) with scaled logits z[0..n) (-inf or NaN: not
 * kept; either makes ub fail the test).
 * With zmax non-NULL a surviving token must also have exp(z - zmax) > 0, the rule by which
 * sd_filter drops tokens whose probability underflows. */
static void gumbel_dense_chunk(const double *z, int i0, int n, uint64_t seed, int64_t pos,
                               const double *zmax, gbest *b) {
    uint64_t k[GCHUNK];
    double ub[GCHUNK];
    sd_rng_bits_pairs(seed, pos, SD_RNG_STREAM_GUMBEL, (uint32_t)i0 >> 1, (n + 1) >> 1, k);
    for (int j = 0; j < n; j++) ub[j] = z[j] + sd_gumbel_bound_of_bits(k[j]);
    for (int j = 0; j < n; j++) {
        if (!(ub[j] >= b->v)) continue;
        if (zmax && !(exp(z[j] - *zmax) > 0)) continue;
        gbest_offer(b, z[j] + sd_gumbel_of_bits(k[j]), i0 + j);
    }
}

int32_t sd_dist_gumbel_ref(const sd_dist *d, uint64_t seed, int64_t pos) {
    if (d->n <= 0) return -1;
    if (d->n == 1) return d->id[0];
    int best = 0;
    double bv = -INFINITY;
    for (int i = 0; i < d->n; i++) {
        double v = d->z[i] + sd_rng_gumbel(seed, pos, SD_RNG_STREAM_GUMBEL, (uint32_t)d->id[i]);
        if (v > bv) { bv = v; best = i; }   /* strict: ties keep the lower id */
    }
    return d->id[best];
}

int32_t sd_dist_gumbel(const sd_dist *d, uint64_t seed, int64_t pos) {
    if (d->n <= 0) return -1;
    if (d->n == 1) return d->id[0];
    int top = 0;                                   /* start from the largest z */
    for (int i = 1; i < d->n; i++) if (d->z[i] > d->z[top]) top = i;
    gbest b = { d->z[top] + sd_rng_gumbel(seed, pos, SD_RNG_STREAM_GUMBEL, (uint32_t)d->id[top]),
                d->id[top] };
    if (d->n == d->vocab) {                        /* dense: id[i] == i */
        for (int i0 = 0; i0 < d->n; i0 += GCHUNK) {
            int n = d->n - i0 < GCHUNK ? d->n - i0 : GCHUNK;
            gumbel_dense_chunk(d->z + i0, i0, n, seed, pos, NULL, &b);
        }
        return b.id;
    }
    for (int i = 0; i < d->n; i++) {               /* sparse: one block per kept token */
        uint64_t k = sd_rng_bits(seed, pos, SD_RNG_STREAM_GUMBEL, (uint32_t)d->id[i]);
        if (!(d->z[i] + sd_gumbel_bound_of_bits(k) >= b.v)) continue;
        gbest_offer(&b, d->z[i] + sd_gumbel_of_bits(k), d->id[i]);
    }
    return b.id;
}

/* sd_filter + sd_dist_gumbel for a row with no top-k / top-p / min-p, without building the
 * distribution: z_i = logit_i / T exactly as sd_filter computes it, -inf / NaN and
 * underflowing tokens excluded as sd_filter excludes them. Same token, bit for bit. */
static int32_t gumbel_unfiltered(const float *x, int V, double T, uint64_t seed, int64_t pos) {
    int32_t am = sd_argmax(x, V);
    if (!isfinite(x[am])) return am;
    double zmax = (double)x[am] / T;
    gbest b = { zmax + sd_rng_gumbel(seed, pos, SD_RNG_STREAM_GUMBEL, (uint32_t)am), am };
    double z[GCHUNK];
    for (int i0 = 0; i0 < V; i0 += GCHUNK) {
        int n = V - i0 < GCHUNK ? V - i0 : GCHUNK;
        /* -inf stays -inf and NaN stays NaN: both fail the bound test in the chunk */
        for (int j = 0; j < n; j++) z[j] = (double)x[i0 + j] / T;
        gumbel_dense_chunk(z, i0, n, seed, pos, &zmax, &b);
    }
    return b.id;
}

static bool no_filters(const specdec_sampling_params *p, int vocab) {
    return !(p->top_k > 0 && p->top_k < vocab) && !(p->top_p < 1.0f) && !(p->min_p > 0);
}

bool sd_sampling_filtered(const specdec_sampling_params *p, int vocab) { return !no_filters(p, vocab); }

/* ---- workspace -------------------------------------------------------------------- */

specdec_status sd_sampler_ws_init(sd_sampler_ws *ws, int vocab, specdec_err *err) {
    memset(ws, 0, sizeof *ws);
    if (vocab <= 0) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "sd_sampler_ws_init: vocab %d <= 0", vocab);
    ws->cand = malloc((size_t)vocab * sizeof *ws->cand);
    ws->heap = malloc((size_t)vocab * sizeof *ws->heap);
    if (!ws->cand || !ws->heap) {
        sd_sampler_ws_free(ws);
        return sd_fail(err, SPECDEC_ERR_NOMEM, "sd_sampler_ws_init: no memory for vocab %d", vocab);
    }
    specdec_status st = sd_dist_init(&ws->dist, vocab, err);
    if (st != SPECDEC_OK) { sd_sampler_ws_free(ws); return st; }
    ws->vocab = vocab;
    return SPECDEC_OK;
}

void sd_sampler_ws_free(sd_sampler_ws *ws) {
    if (!ws) return;
    free(ws->cand); free(ws->heap);
    sd_dist_free(&ws->dist);
    memset(ws, 0, sizeof *ws);
}

/* ---- argmax and top-k ------------------------------------------------------------- */

/* The maximum of logits[0..n) skipping NaN, -inf when there is none. 16 running maxima (each
 * `v > m ? v : m`, a NaN v leaves m): a loop the compiler turns into vector max instructions; the
 * order does not matter for a maximum (+0 and -0, the only equal values it could tell apart, are
 * both found by the == search that follows). */
static float max_skip_nan(const float *x, int n) {
    enum { L = 16 };
    float m[L];
    for (int l = 0; l < L; l++) m[l] = -INFINITY;
    int i = 0;
    for (; i + L <= n; i += L)
        for (int l = 0; l < L; l++) m[l] = x[i + l] > m[l] ? x[i + l] : m[l];
    for (; i < n; i++) m[0] = x[i] > m[0] ? x[i] : m[0];
    float r = m[0];
    for (int l = 1; l < L; l++) r = m[l] > r ? m[l] : r;
    return r;
}

/* The decode step's greedy pick runs over the whole vocabulary (151936 logits): one scalar
 * compare-and-branch per logit cost about 4% of a CPU decode step. So: the maximum of each chunk
 * (vectorizable), then the first index equal to the overall maximum inside the first chunk that
 * holds it. The same index as the definition: the lowest index of the largest non-NaN value. */
int32_t sd_argmax(const float *logits, int n) {
    enum { CH = 1024 };
    float best = -INFINITY;
    int bc = -1;
    for (int c = 0; c < n; c += CH) {
        float m = max_skip_nan(logits + c, n - c < CH ? n - c : CH);
        if (bc < 0 || m > best) { best = m; bc = c; }
    }
    const int end = n - bc < CH ? n : bc + CH;
    for (int i = bc; i < end; i++)
        if (logits[i] == best) return i;
    return 0;   /* every value NaN */
}

/* a ranks below b: smaller logit, or equal logit and higher id. */
static int ranks_below(const float *x, int32_t a, int32_t b) {
    return x[a] < x[b] || (x[a] == x[b] && a > b);
}

static void heap_down(int32_t *h, int n, int i, const float *x) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && ranks_below(x, h[l], h[m])) m = l;
        if (r < n && ranks_below(x, h[r], h[m])) m = r;
        if (m == i) return;
        int32_t t = h[i]; h[i] = h[m]; h[m] = t;
        i = m;
    }
}

static void heap_up(int32_t *h, int i, const float *x) {
    while (i > 0) {
        int par = (i - 1) / 2;
        if (!ranks_below(x, h[i], h[par])) return;
        int32_t t = h[i]; h[i] = h[par]; h[par] = t;
        i = par;
    }
}

/* The k best ids (by logit, ties to the lower id; NaN skipped) into h, in heap order. */
static int top_k_ids(const float *x, int n, int k, int32_t *h) {
    int m = 0;
    for (int i = 0; i < n; i++) {
        float v = x[i];
        if (v != v) continue;
        if (m < k) { h[m] = i; heap_up(h, m, x); m++; continue; }
        /* ids arrive ascending, so an equal logit never outranks the root */
        if (v > x[h[0]]) { h[0] = i; heap_down(h, m, 0, x); }
    }
    return m;
}

/* ---- filter ----------------------------------------------------------------------- */

static int cmp_prob_desc(const void *a, const void *b) {
    const sd_cand *x = a, *y = b;
    if (x->e != y->e) return x->e > y->e ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int cmp_id_asc(const void *a, const void *b) {
    const sd_cand *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* Gather every token with e = exp(z - zmax) >= thr into c; the mass over all V (id order)
 * goes to *sum_all and the candidates' mass to *sum_c. Returns the count. Without need_sum,
 * tokens clearly below thr in log space skip the exp (the exact e >= thr test still decides). */
static int gather(const float *x, int n, double T, double zmax, double thr, bool need_sum,
                  sd_cand *c, double *sum_all, double *sum_c) {
    double s = 0.0, sc = 0.0;
    double lthr = (!need_sum && thr > 0) ? log(thr) - 1e-9 : -INFINITY;
    int m = 0;
    for (int i = 0; i < n; i++) {
        float v = x[i];
        if (!(v > -INFINITY)) continue;             /* -inf and NaN: probability 0 */
        double z = (double)v / T;
        if (z - zmax < lthr) continue;
        double e = exp(z - zmax);
        s += e;
        if (e >= thr && e > 0) { c[m].z = z; c[m].e = e; c[m].id = i; m++; sc += e; }
    }
    *sum_all = s; *sum_c = sc;
    return m;
}

specdec_status sd_filter(sd_sampler_ws *ws, const specdec_sampling_params *p, const float *logits,
                         int vocab, sd_dist *out, specdec_err *err) {
    if (!ws || !p || !logits || !out)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "sd_filter: NULL argument");
    if (vocab <= 0 || vocab != ws->vocab || vocab != out->vocab || out->cap < vocab)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG,
                       "sd_filter: vocab %d does not match workspace %d / dist %d", vocab, ws->vocab, out->vocab);
    int32_t am = sd_argmax(logits, vocab);
    double T = p->temperature;
    if (!(T > 0) || !isfinite(logits[am])) { sd_dist_set_onehot(out, am); return SPECDEC_OK; }

    double zmax = (double)logits[am] / T;
    bool use_k = p->top_k > 0 && p->top_k < vocab;
    bool use_p = p->top_p < 1.0f;                    /* NaN: off */
    double min_p = p->min_p > 0 ? (p->min_p > 1 ? 1.0 : (double)p->min_p) : 0.0;
    double top_p = p->top_p > 0 ? (double)p->top_p : 0.0;
    sd_cand *c = ws->cand;
    int nc = 0;

    if (use_k) {
        nc = top_k_ids(logits, vocab, p->top_k, ws->heap);
        int m = 0;
        for (int i = 0; i < nc; i++) {
            int32_t id = ws->heap[i];
            double z = (double)logits[id] / T, e = exp(z - zmax);
            if (e > 0) { c[m].z = z; c[m].e = e; c[m].id = id; m++; }
        }
        nc = m;
        if (use_p) {
            qsort(c, (size_t)nc, sizeof *c, cmp_prob_desc);
            double s = 0.0, cum = 0.0;
            for (int i = 0; i < nc; i++) s += c[i].e;
            int keep = nc;
            for (int i = 0; i < nc; i++) {
                cum += c[i].e;
                if (cum >= top_p * s) { keep = i + 1; break; }
            }
            nc = keep;
        }
    } else if (use_p) {
        /* Candidates above a relative threshold; if their mass covers top_p the nucleus lies
         * inside them (they are a prefix of the sorted order). A second threshold of
         * (1 - top_p) / (2V) of the mass guarantees coverage; 0 takes every token. */
        double s_all = 0.0, s_c = 0.0, thr = 1e-3;
        for (int attempt = 0; attempt < 3; attempt++) {
            nc = gather(logits, vocab, T, zmax, thr, true, c, &s_all, &s_c);
            if (s_c >= top_p * s_all) break;
            double g = 0.5 * (1.0 - top_p) * s_all / (double)vocab;
            thr = attempt == 0 && g < thr ? g : 0.0;
        }
        qsort(c, (size_t)nc, sizeof *c, cmp_prob_desc);
        double cum = 0.0;
        int keep = nc;
        for (int i = 0; i < nc; i++) {
            cum += c[i].e;
            if (cum >= top_p * s_all) { keep = i + 1; break; }
        }
        nc = keep;
    } else {
        double s_all, s_c;
        nc = gather(logits, vocab, T, zmax, min_p, false, c, &s_all, &s_c);   /* min_p 0: all e > 0 */
    }

    /* min-p relative to the top token, whose e is exp(0) = 1 exactly. */
    if (min_p > 0) {
        int m = 0;
        for (int i = 0; i < nc; i++) if (c[i].e >= min_p) c[m++] = c[i];
        nc = m;
    }
    if (nc <= 0) { sd_dist_set_onehot(out, am); return SPECDEC_OK; }   /* cannot happen: am has e = 1 */

    if (use_k || use_p) qsort(c, (size_t)nc, sizeof *c, cmp_id_asc);
    double s = 0.0;
    for (int i = 0; i < nc; i++) s += c[i].e;
    double inv = 1.0 / s, tot = 0.0;
    for (int i = 0; i < nc; i++) {
        out->id[i] = c[i].id;
        out->z[i] = c[i].z;
        out->p[i] = c[i].e * inv;
        tot += out->p[i];
    }
    out->n = nc;
    out->total = tot;
    return SPECDEC_OK;
}

/* ---- sampling --------------------------------------------------------------------- */

int32_t sd_sample(sd_sampler_ws *ws, const specdec_sampling_params *p, const float *logits,
                  int vocab, int64_t pos) {
    if (!p || !logits || vocab <= 0) return -1;
    if (!(p->temperature > 0)) return sd_argmax(logits, vocab);
    if (no_filters(p, vocab)) return gumbel_unfiltered(logits, vocab, (double)p->temperature, p->seed, pos);
    if (!ws || sd_filter(ws, p, logits, vocab, &ws->dist, NULL) != SPECDEC_OK) return -1;
    return sd_dist_gumbel(&ws->dist, p->seed, pos);
}

/* Defaults: greedy (temperature 0), no top-k (0), no top-p (1), no min-p (0), seed 0. Callers
 * who want sampling set temperature > 0 (and usually top_k / top_p) explicitly. */
specdec_sampling_params specdec_sampling_default_params(void) {
    specdec_sampling_params p;
    memset(&p, 0, sizeof p);
    p.temperature = 0.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = 0;
    return p;
}

/* Convenience path: a workspace per call (one malloc, its pages touched only as far as the
 * filters need). The engine keeps an sd_sampler_ws and calls sd_sample instead. Returns -1
 * for invalid arguments or when memory runs out. */
int32_t specdec_sample(const specdec_sampling_params *p, const float *logits, int vocab, int64_t pos) {
    if (!p || !logits || vocab <= 0) return -1;
    if (!(p->temperature > 0)) return sd_argmax(logits, vocab);
    if (no_filters(p, vocab)) return gumbel_unfiltered(logits, vocab, (double)p->temperature, p->seed, pos);
    sd_sampler_ws ws;
    if (sd_sampler_ws_init(&ws, vocab, NULL) != SPECDEC_OK) return -1;
    int32_t t = sd_sample(&ws, p, logits, vocab, pos);
    sd_sampler_ws_free(&ws);
    return t;
}
