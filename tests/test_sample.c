/* test_sample.c: Philox4x32-10 known answers, keyed uniforms, the portable log / Gumbel
 * transform against libm (accuracy bounds), the pruned Gumbel-max against its scalar
 * reference, argmax, the filters (top-k, top-p, min-p, greedy), seeded determinism,
 * chi-square goodness of fit of Gumbel-max, inverse-CDF, residual and full speculative
 * (accept/resample) sampling, and a timing print. */
#include "check.h"
#include "sample/rng.h"
#include "sample/sample.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHI2_DF7_P001 24.322   /* chi-square critical value, 7 degrees of freedom, p = 0.001 */

static void test_philox_kat(void) {
    struct { uint32_t ctr[4], key[2], want[4]; } kat[3] = {
        { {0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8} },
        { {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
          {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd} },
        { {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
          {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1} },
    };
    for (int t = 0; t < 3; t++) {
        uint64_t seed = (uint64_t)kat[t].key[1] << 32 | kat[t].key[0];
        uint64_t lo = (uint64_t)kat[t].ctr[1] << 32 | kat[t].ctr[0];
        uint64_t hi = (uint64_t)kat[t].ctr[3] << 32 | kat[t].ctr[2];
        uint32_t out[4];
        sd_philox(seed, hi, lo, out);
        for (int i = 0; i < 4; i++)
            CHECK(out[i] == kat[t].want[i], "philox KAT %d word %d: %08x != %08x", t, i, out[i], kat[t].want[i]);
    }
}

static void test_uniform(void) {
    const int N = 200000;
    double s = 0, s2 = 0, mn = 1, mx = 0;
    for (int i = 0; i < N; i++) {
        double u = sd_rng_uniform(42, i / 100, (uint32_t)(i % 3), (uint32_t)(i % 100));
        s += u; s2 += u * u;
        if (u < mn) mn = u;
        if (u > mx) mx = u;
    }
    CHECK(mn > 0.0 && mx < 1.0, "uniform out of (0,1): min %g max %g", mn, mx);
    double mean = s / N, var = s2 / N - mean * mean;
    /* sd of the mean ~ 0.00065; of the variance ~ 0.00019: allow > 5 sigma */
    CHECK(fabs(mean - 0.5) < 0.004, "uniform mean %f", mean);
    CHECK(fabs(var - 1.0 / 12) < 0.0015, "uniform variance %f", var);
    /* keyed: same key same value; streams, positions, seeds differ */
    CHECK(sd_rng_uniform(7, 3, 0, 5) == sd_rng_uniform(7, 3, 0, 5), "uniform not a pure function");
    CHECK(sd_rng_uniform(7, 3, 0, 5) != sd_rng_uniform(7, 3, 1, 5), "streams collide");
    CHECK(sd_rng_uniform(7, 3, 0, 5) != sd_rng_uniform(7, 4, 0, 5), "positions collide");
    CHECK(sd_rng_uniform(7, 3, 0, 5) != sd_rng_uniform(8, 3, 0, 5), "seeds collide");
    double g = sd_rng_gumbel(1, 2, 0, 3);
    CHECK(isfinite(g), "gumbel not finite");
}

static void test_argmax(void) {
    float a[6] = {1, 3, 2, 3, -1, 3};
    CHECK_EQ_INT(sd_argmax(a, 6), 1);
    float b[4] = {NAN, -INFINITY, NAN, -5};
    CHECK_EQ_INT(sd_argmax(b, 4), 3);
    float c[2] = {NAN, NAN};
    CHECK_EQ_INT(sd_argmax(c, 2), 0);
    float d[3] = {-INFINITY, -INFINITY, -INFINITY};
    CHECK_EQ_INT(sd_argmax(d, 3), 0);
    float e[3] = {-0.0f, 0.0f, -1.0f};   /* +0 == -0: the lower index */
    CHECK_EQ_INT(sd_argmax(e, 3), 0);
    /* the chunked search against the definition on long rows: ties across chunks, NaN and -inf
     * runs, the maximum in the tail, lengths that are not a whole number of chunks */
    enum { N = 5000 };
    static float x[N];
    uint64_t s = 0x2545F4914F6CDD1DULL;
    for (int trial = 0; trial < 400; trial++) {
        int n = 1 + (int)(s % N);
        for (int i = 0; i < n; i++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            int kind = (int)(s >> 59);   /* 0..31 */
            x[i] = kind == 0 ? NAN : kind == 1 ? -INFINITY : (float)((int)((s >> 20) % 64) - 40);   /* many ties */
        }
        if (trial % 5 == 0) for (int i = 0; i < n; i++) x[i] = NAN;
        if (trial % 7 == 0) x[n - 1] = 1000.0f;
        int want = -1;
        for (int i = 0; i < n; i++)
            if (x[i] == x[i] && (want < 0 || x[i] > x[want])) want = i;
        if (want < 0) want = 0;
        CHECK(sd_argmax(x, n) == want, "argmax trial %d n %d: %d, definition %d", trial, n, sd_argmax(x, n), want);
    }
}

static specdec_sampling_params params(float T, int k, float top_p, float min_p) {
    specdec_sampling_params p = specdec_sampling_default_params();
    p.temperature = T; p.top_k = k; p.top_p = top_p; p.min_p = min_p;
    return p;
}

static int ids_are(const sd_dist *d, const int32_t *want, int n) {
    if (d->n != n) return 0;
    for (int i = 0; i < n; i++) if (d->id[i] != want[i]) return 0;
    return 1;
}

/* Block layout: index 2j and 2j+1 share one Philox block; index 0 keeps the pre-pairing value. */
static void test_bits_layout(void) {
    uint64_t k[64];
    sd_rng_bits_pairs(77, 123, SD_RNG_STREAM_GUMBEL, 5, 32, k);
    for (int i = 0; i < 64; i++)
        CHECK(k[i] == sd_rng_bits(77, 123, SD_RNG_STREAM_GUMBEL, (uint32_t)(10 + i)), "pairs != bits at %d", i);
    for (uint32_t st = 0; st < 4; st++) {
        uint32_t o[4];
        sd_philox(9, (uint64_t)st << 32, 44, o);
        double old = ((double)((((uint64_t)o[1] << 32) | o[0]) >> 12) + 0.5) * (1.0 / 4503599627370496.0);
        CHECK(sd_rng_uniform(9, 44, st, 0) == old, "index 0 of stream %u changed", st);
        uint64_t odd = (((uint64_t)o[3] << 32) | o[2]) >> 12;
        CHECK(sd_rng_bits(9, 44, st, 1) == odd, "index 1 is words 2, 3 of block 0");
    }
    CHECK(sd_rng_bits(9, 44, 0, 2) != sd_rng_bits(9, 44, 0, 0), "indices collide");
}

/* Accuracy against libm (a reference here, never in the library):
 * sd_rng_log: relative error < 4e-16 over all binades and next to 1;
 * Gumbel: |g - g_libm| < 1e-13 * max(1, |g_libm|) (measured ~1e-15), and the prune bound
 * is never below the computed value. */
static void test_portable_gumbel(void) {
    double worst_log = 0;
    for (int i = 0; i < 400000; i++) {
        uint64_t r = sd_rng_bits(3, i, 7, 0), e = sd_rng_bits(3, i, 7, 1) % 2045 + 1;
        double x;
        uint64_t b = e << 52 | r;
        memcpy(&x, &b, sizeof x);
        if (i % 4 == 1) x = 1.0 + (double)(int64_t)(r % 2001 - 1000) * 0x1p-52;  /* next to 1 */
        if (i % 4 == 2) x = 0.5 + (double)(r >> 1) * 0x1p-52;                      /* (0.5, 1.5) */
        double ref = log(x), got = sd_rng_log(x);
        double rel = ref == 0 ? fabs(got) : fabs(got - ref) / fabs(ref);
        if (rel > worst_log) worst_log = rel;
    }
    CHECK(sd_rng_log(1.0) == 0.0, "log(1) = %g", sd_rng_log(1.0));
    CHECK(worst_log < 4e-16, "sd_rng_log relative error %.3g", worst_log);

    double worst_g = 0, gmin = 1e9, gmax = -1e9;
    int bad_bound = 0;
    const uint64_t M = 0x000fffffffffffffull;
    for (int i = 0; i < 2000000 + 8; i++) {
        uint64_t k = sd_rng_bits(11, i / 1024, 0, (uint32_t)(i % 1024));
        if (i >= 2000000) {   /* the extremes, u = 1/2 and u next to 1/e */
            uint64_t ext[8] = {0, 1, 2, M, M - 1, M - 2, 1ull << 51, (uint64_t)(0.36787944117144233 * 0x1p52)};
            k = ext[i - 2000000];
        }
        double u = sd_rng_uniform_of_bits(k), ref = -log(-log(u)), g = sd_gumbel_of_bits(k);
        double err = fabs(g - ref) / fmax(1.0, fabs(ref));
        if (err > worst_g) worst_g = err;
        if (g < gmin) gmin = g;
        if (g > gmax) gmax = g;
        if (!(sd_gumbel_bound_of_bits(k) >= g)) bad_bound++;
    }
    fprintf(stderr, "portable log: max rel err %.3g; gumbel: max err %.3g (rel to max(1,|g|)), range [%.4f, %.4f]\n",
            worst_log, worst_g, gmin, gmax);
    CHECK(worst_g < 1e-13, "Gumbel error %.3g vs libm", worst_g);
    CHECK(bad_bound == 0, "prune bound below g for %d inputs", bad_bound);
    CHECK(gmin > -3.61 && gmax < 36.75 && gmax > 36.7, "Gumbel range [%g, %g]", gmin, gmax);
    CHECK(sd_rng_gumbel(1, 2, 0, 3) == sd_gumbel_of_bits(sd_rng_bits(1, 2, 0, 3)), "rng_gumbel = of_bits");
}

/* The pruned Gumbel-max picks exactly the reference's token: dense and sparse dists, the
 * unfiltered straight-from-logits path, odd V, -inf / NaN logits, ties. */
static void test_gumbel_fast_equals_ref(void) {
    int sizes[4] = {3, 257, 1000, 4099};
    int mismatch = 0, trials = 0;
    for (int si = 0; si < 4; si++) {
        int V = sizes[si];
        float *x = malloc((size_t)V * sizeof *x);
        sd_sampler_ws ws; sd_dist d;
        sd_sampler_ws_init(&ws, V, NULL); sd_dist_init(&d, V, NULL);
        for (int row = 0; row < 12; row++) {
            double scale = row % 3 == 0 ? 0.3 : row % 3 == 1 ? 3.0 : 30.0;
            for (int i = 0; i < V; i++) {
                double u1 = sd_rng_uniform(row, i, 9, 0), u2 = sd_rng_uniform(row, i, 9, 1);
                x[i] = (float)(scale * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
            }
            if (row % 4 == 1) { x[V / 2] = -INFINITY; x[V - 1] = NAN; }
            if (row % 4 == 2) for (int i = 0; i < V; i++) x[i] = (float)(i % 5);   /* many ties */
            float T = row % 2 ? 1.0f : 0.6f;
            for (int64_t pos = 0; pos < 24; pos++) {
                specdec_sampling_params p = params(T, 0, 1.0f, 0.0f);
                p.seed = 500 + (uint64_t)row;
                sd_filter(&ws, &p, x, V, &d, NULL);
                int32_t ref = sd_dist_gumbel_ref(&d, p.seed, pos);
                mismatch += sd_dist_gumbel(&d, p.seed, pos) != ref;
                mismatch += sd_sample(&ws, &p, x, V, pos) != ref;
                mismatch += specdec_sample(&p, x, V, pos) != ref;
                mismatch += sd_sample(NULL, &p, x, V, pos) != ref;
                specdec_sampling_params q = params(T, V / 3 + 1, 1.0f, 0.0f);   /* sparse */
                q.seed = p.seed;
                sd_filter(&ws, &q, x, V, &d, NULL);
                mismatch += sd_dist_gumbel(&d, q.seed, pos) != sd_dist_gumbel_ref(&d, q.seed, pos);
                trials += 5;
            }
        }
        sd_dist_free(&d); sd_sampler_ws_free(&ws); free(x);
    }
    CHECK(mismatch == 0, "pruned Gumbel-max differs from the reference in %d of %d draws", mismatch, trials);
    /* exact ties in z + g (z so large that g is below half an ulp): the lowest id wins */
    { float e[6] = {1, 1, 1, 1, 1, 1}; specdec_sampling_params p = params(1e-25f, 0, 1.0f, 0.0f);
      for (int64_t pos = 0; pos < 8; pos++) CHECK_EQ_INT(sd_sample(NULL, &p, e, 6, pos), 0); }
}

static void test_defaults(void) {
    specdec_sampling_params p = specdec_sampling_default_params();
    CHECK(p.temperature == 0 && p.top_k == 0 && p.top_p == 1 && p.min_p == 0 && p.seed == 0, "defaults");
}

static void test_filters(void) {
    enum { V = 10 };
    sd_sampler_ws ws; sd_dist d;
    CHECK_EQ_INT(sd_sampler_ws_init(&ws, V, NULL), SPECDEC_OK);
    CHECK_EQ_INT(sd_dist_init(&d, V, NULL), SPECDEC_OK);
    /* ties: ids 1, 4, 7 share the top logit; 2 and 8 the next */
    float x[V] = {0.0f, 5.0f, 4.0f, 1.0f, 5.0f, -2.0f, 3.0f, 5.0f, 4.0f, 2.0f};

    /* top-k keeps exactly k, ties to the lower id */
    for (int k = 1; k <= 9; k++) {
        specdec_sampling_params p = params(1.0f, k, 1.0f, 0.0f);
        CHECK_EQ_INT(sd_filter(&ws, &p, x, V, &d, NULL), SPECDEC_OK);
        CHECK_EQ_INT(d.n, k);
    }
    { specdec_sampling_params p = params(1.0f, 2, 1.0f, 0.0f); sd_filter(&ws, &p, x, V, &d, NULL);
      int32_t w[] = {1, 4}; CHECK(ids_are(&d, w, 2), "top-2 ids"); }
    { specdec_sampling_params p = params(1.0f, 4, 1.0f, 0.0f); sd_filter(&ws, &p, x, V, &d, NULL);
      int32_t w[] = {1, 2, 4, 7}; CHECK(ids_are(&d, w, 4), "top-4 ids");
      double e5 = exp(0.0), e4 = exp(-1.0), s = 3 * e5 + e4;
      CHECK(fabs(sd_dist_prob(&d, 2) - e4 / s) < 1e-12, "top-4 renormalized p");
      CHECK(sd_dist_prob(&d, 8) == 0.0, "dropped token has p 0");
      CHECK(fabs(d.total - 1.0) < 1e-12, "total"); }
    { specdec_sampling_params p = params(1.0f, 0, 1.0f, 0.0f); sd_filter(&ws, &p, x, V, &d, NULL);
      CHECK_EQ_INT(d.n, V); }

    /* top-p boundaries on a row with exact probabilities 0.5, 0.25, 0.125, 0.125 */
    float y[4] = {logf(4.0f), logf(2.0f), 0.0f, 0.0f};
    sd_sampler_ws w4; sd_dist d4;
    sd_sampler_ws_init(&w4, 4, NULL); sd_dist_init(&d4, 4, NULL);
    /* float logits make the ratios inexact (logf(2) rounds up), so cases sit off the boundaries.
     * Full row: cumulative 0.5, 0.75, 0.875, 1. Top-3 renormalized: 4/7, 6/7, 1. */
    struct { float top_p; int n, n_k3; } tp[] = {
        {0.0f, 1, 1}, {0.3f, 1, 1}, {0.49f, 1, 1}, {0.51f, 2, 1}, {0.58f, 2, 2}, {0.74f, 2, 2},
        {0.76f, 3, 2}, {0.86f, 3, 3}, {0.87f, 3, 3}, {0.89f, 4, 3}, {0.9999f, 4, 3} };
    for (int i = 0; i < (int)(sizeof tp / sizeof tp[0]); i++) {
        specdec_sampling_params p = params(1.0f, 0, tp[i].top_p, 0.0f);
        sd_filter(&w4, &p, y, 4, &d4, NULL);
        CHECK(d4.n == tp[i].n, "top_p %g keeps %d, want %d", tp[i].top_p, d4.n, tp[i].n);
        p.top_k = 3;   /* through the top-k path: the mass is over the top 3 */
        sd_filter(&w4, &p, y, 4, &d4, NULL);
        CHECK(d4.n == tp[i].n_k3, "top_k 3 top_p %g keeps %d, want %d", tp[i].top_p, d4.n, tp[i].n_k3);
    }
    /* tie at the top-p boundary: token 3 (same p as token 2) is dropped, lower id wins */
    { specdec_sampling_params p = params(1.0f, 0, 0.8f, 0.0f); sd_filter(&w4, &p, y, 4, &d4, NULL);
      int32_t w[] = {0, 1, 2}; CHECK(ids_are(&d4, w, 3), "top-p tie to lower id"); }

    /* min-p: drop p_i < min_p * p_max (ratios 1, 0.5, 0.25, 0.25 up to float rounding) */
    { specdec_sampling_params p = params(1.0f, 0, 1.0f, 0.49f); sd_filter(&w4, &p, y, 4, &d4, NULL);
      int32_t w[] = {0, 1}; CHECK(ids_are(&d4, w, 2), "min-p 0.49");
      CHECK(fabs(d4.p[0] - 2.0 / 3) < 1e-6, "min-p renormalized"); }
    { specdec_sampling_params p = params(1.0f, 0, 1.0f, 0.51f); sd_filter(&w4, &p, y, 4, &d4, NULL);
      CHECK_EQ_INT(d4.n, 1); }
    { specdec_sampling_params p = params(1.0f, 0, 1.0f, 0.26f); sd_filter(&w4, &p, y, 4, &d4, NULL);
      CHECK_EQ_INT(d4.n, 2); }
    { specdec_sampling_params p = params(1.0f, 0, 1.0f, 0.24f); sd_filter(&w4, &p, y, 4, &d4, NULL);
      CHECK_EQ_INT(d4.n, 4); }
    { specdec_sampling_params p = params(1.0f, 0, 1.0f, 7.0f); sd_filter(&w4, &p, y, 4, &d4, NULL);
      CHECK(d4.n == 1 && d4.id[0] == 0, "min-p > 1 keeps the top token"); }
    /* exact boundary: with equal logits every ratio is exactly 1, so min_p 1 keeps all */
    { float e4[4] = {2, 2, 2, 2}; specdec_sampling_params p = params(1.0f, 0, 1.0f, 1.0f);
      sd_filter(&w4, &p, e4, 4, &d4, NULL); CHECK_EQ_INT(d4.n, 4);
      CHECK(d4.p[0] == 0.25 && d4.total == 1.0, "uniform row exact"); }
    /* min-p applied after top-k and top-p */
    { specdec_sampling_params p = params(1.0f, 3, 0.99f, 0.3f); sd_filter(&w4, &p, y, 4, &d4, NULL);
      int32_t w[] = {0, 1}; CHECK(ids_are(&d4, w, 2), "top-k + top-p + min-p"); }

    /* temperature scales the logits before the filters: T = 0.5 squares the ratios */
    { specdec_sampling_params p = params(0.5f, 0, 1.0f, 0.0f); sd_filter(&w4, &p, y, 4, &d4, NULL);
      double s = 16 + 4 + 1 + 1;
      CHECK(fabs(d4.p[0] - 16 / s) < 1e-6 && fabs(d4.p[3] - 1 / s) < 1e-6, "temperature 0.5");
      CHECK(fabs(d4.z[0] - 2 * log(4.0)) < 1e-6, "z = logit / T"); }

    /* greedy: T = 0 gives a one-hot on argmax whatever the filters, and sd_sample is argmax */
    { specdec_sampling_params p = params(0.0f, 3, 0.5f, 0.2f); sd_filter(&ws, &p, x, V, &d, NULL);
      CHECK(d.n == 1 && d.id[0] == 1 && d.p[0] == 1.0, "greedy one-hot");
      for (int64_t pos = 0; pos < 50; pos++) {
          CHECK_EQ_INT(sd_sample(&ws, &p, x, V, pos), 1);
          CHECK_EQ_INT(specdec_sample(&p, x, V, pos), 1);
      } }
    /* degenerate rows never crash: all -inf, NaN, +inf */
    { float z[3] = {-INFINITY, -INFINITY, -INFINITY}; specdec_sampling_params p = params(1.0f, 0, 0.9f, 0.0f);
      CHECK_EQ_INT(specdec_sample(&p, z, 3, 0), 0);
      float n2[3] = {NAN, 1.0f, NAN}; CHECK_EQ_INT(specdec_sample(&p, n2, 3, 0), 1);
      float i2[3] = {0.0f, INFINITY, INFINITY}; CHECK_EQ_INT(specdec_sample(&p, i2, 3, 0), 1);
      CHECK_EQ_INT(specdec_sample(&p, NULL, 3, 0), -1);
      CHECK_EQ_INT(specdec_sample(NULL, z, 3, 0), -1);
      CHECK_EQ_INT(specdec_sample(&p, z, 0, 0), -1);
      CHECK(sd_filter(&ws, &p, z, 3, &d, NULL) == SPECDEC_ERR_INVALID_ARG, "vocab mismatch rejected"); }

    sd_dist_free(&d4); sd_sampler_ws_free(&w4);
    sd_dist_free(&d); sd_sampler_ws_free(&ws);
}

static void test_determinism(void) {
    enum { V = 1000 };
    static float x[V];
    for (int i = 0; i < V; i++) x[i] = (float)(4.0 * sd_rng_uniform(9, 0, 7, (uint32_t)i));
    sd_sampler_ws ws; sd_sampler_ws_init(&ws, V, NULL);
    specdec_sampling_params p = params(1.0f, 50, 0.95f, 0.0f);
    p.seed = 1234;
    int distinct = 0, prev = -1;
    for (int64_t pos = 0; pos < 64; pos++) {
        int32_t a = sd_sample(&ws, &p, x, V, pos), b = specdec_sample(&p, x, V, pos);
        CHECK(a == b && a == sd_sample(&ws, &p, x, V, pos), "seeded sample not a pure function at %lld", (long long)pos);
        CHECK(a >= 0 && a < V, "token out of range");
        if (a != prev) distinct++;
        prev = a;
    }
    CHECK(distinct > 20, "different positions give varying tokens (%d changes)", distinct);
    specdec_sampling_params q = p; q.seed = 1235;
    int differ = 0;
    for (int64_t pos = 0; pos < 64; pos++) differ += sd_sample(&ws, &p, x, V, pos) != sd_sample(&ws, &q, x, V, pos);
    CHECK(differ > 20, "different seeds give different tokens (%d)", differ);
    sd_sampler_ws_free(&ws);
}

/* chi-square statistic of counts against probabilities over n cells */
static double chi2(const int *count, const double *prob, int n, int draws) {
    double c = 0;
    for (int i = 0; i < n; i++) { double e = prob[i] * draws; c += (count[i] - e) * (count[i] - e) / e; }
    return c;
}

static const float ROW8[8] = {1.0f, 0.2f, 2.1f, -0.5f, 1.4f, 0.9f, -1.0f, 1.9f};

static void test_gumbel_chi2(void) {
    enum { N = 20000 };
    sd_sampler_ws ws; sd_sampler_ws_init(&ws, 8, NULL);
    const float T = 0.8f;
    double prob[8], s = 0;
    for (int i = 0; i < 8; i++) { prob[i] = exp((double)ROW8[i] / T); s += prob[i]; }
    for (int i = 0; i < 8; i++) prob[i] /= s;
    int count[8] = {0};
    for (int t = 0; t < N; t++) {
        specdec_sampling_params p = params(T, 0, 1.0f, 0.0f);
        p.seed = 1000 + (uint64_t)t;
        int32_t tok = sd_sample(&ws, &p, ROW8, 8, 17);
        if (tok >= 0 && tok < 8) count[tok]++;
    }
    double c = chi2(count, prob, 8, N);
    fprintf(stderr, "gumbel chi2 over seeds = %.2f (crit %.2f)\n", c, CHI2_DF7_P001);
    CHECK(c < CHI2_DF7_P001, "Gumbel-max over seeds: chi2 %.2f", c);

    /* over positions at one seed, with top-k 5: matches the renormalized top-5 softmax */
    int ck[8] = {0};
    double pk[8] = {0}, sk = 0;
    int top5[5] = {2, 7, 4, 0, 5};
    for (int i = 0; i < 5; i++) { pk[top5[i]] = exp((double)ROW8[top5[i]] / T); sk += pk[top5[i]]; }
    for (int t = 0; t < N; t++) {
        specdec_sampling_params p = params(T, 5, 1.0f, 0.0f);
        p.seed = 77;
        int32_t tok = sd_sample(&ws, &p, ROW8, 8, t);
        if (tok >= 0 && tok < 8) ck[tok]++;
    }
    CHECK(ck[1] == 0 && ck[3] == 0 && ck[6] == 0, "top-k dropped tokens were sampled");
    int cc[5]; double pc[5];
    for (int i = 0; i < 5; i++) { cc[i] = ck[top5[i]]; pc[i] = pk[top5[i]] / sk; }
    double c5 = chi2(cc, pc, 5, N);
    CHECK(c5 < 18.467, "Gumbel-max top-5 over positions: chi2 %.2f (df 4 crit 18.47)", c5);
    sd_sampler_ws_free(&ws);
}

static void build_dist(sd_sampler_ws *ws, sd_dist *d, float T, const float *row) {
    specdec_sampling_params p = params(T, 0, 1.0f, 0.0f);
    CHECK_EQ_INT(sd_filter(ws, &p, row, 8, d, NULL), SPECDEC_OK);
}

static void test_dist_chi2(void) {
    enum { N = 20000 };
    sd_sampler_ws ws; sd_sampler_ws_init(&ws, 8, NULL);
    sd_dist p, q;
    sd_dist_init(&p, 8, NULL); sd_dist_init(&q, 8, NULL);
    const float ROWQ[8] = {0.1f, 1.5f, 1.0f, 0.5f, 1.6f, -0.2f, 0.3f, 0.4f};
    build_dist(&ws, &p, 1.0f, ROW8);
    build_dist(&ws, &q, 1.0f, ROWQ);
    double pp[8], rr[8], rs = 0;
    for (int i = 0; i < 8; i++) {
        pp[i] = sd_dist_prob(&p, i);
        rr[i] = fmax(0.0, pp[i] - sd_dist_prob(&q, i));
        rs += rr[i];
    }

    int count[8] = {0};
    for (int t = 0; t < N; t++) count[sd_dist_sample(&p, sd_rng_uniform(5, t, SD_RNG_STREAM_DRAFT, 0))]++;
    double c = chi2(count, pp, 8, N);
    CHECK(c < CHI2_DF7_P001, "sd_dist_sample: chi2 %.2f", c);
    CHECK_EQ_INT(sd_dist_sample(&p, 0.0), 0);
    CHECK_EQ_INT(sd_dist_sample(&p, 0.9999999999), 7);

    /* residual: only cells with positive residual mass take part */
    int rc[8] = {0}, cells = 0, rcnt[8]; double rp[8];
    for (int t = 0; t < N; t++) rc[sd_residual_sample(&p, &q, sd_rng_uniform(5, t, SD_RNG_STREAM_RESIDUAL, 0))]++;
    for (int i = 0; i < 8; i++) {
        if (rr[i] > 0) { rcnt[cells] = rc[i]; rp[cells] = rr[i] / rs; cells++; }
        else CHECK(rc[i] == 0, "residual sampled token %d with p <= q", i);
    }
    double crit[8] = {0, 10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322};   /* df 1..7, p = 0.001 */
    CHECK(cells >= 3, "test row has %d residual cells", cells);
    double cr = chi2(rcnt, rp, cells, N);
    fprintf(stderr, "residual chi2 = %.2f over %d cells (crit %.2f)\n", cr, cells, crit[cells - 1]);
    CHECK(cr < crit[cells - 1], "sd_residual_sample: chi2 %.2f", cr);
    /* p == q: the residual is zero, falls back to p */
    CHECK_EQ_INT(sd_residual_sample(&p, &p, 0.0), sd_dist_sample(&p, 0.0));
    CHECK_EQ_INT(sd_residual_sample(&p, &p, 0.7), sd_dist_sample(&p, 0.7));

    /* full speculative sampling step: x ~ q, accept with min(1, p/q), else residual: ~ p */
    int sc[8] = {0};
    for (int t = 0; t < N; t++) {
        int32_t x = sd_dist_sample(&q, sd_rng_uniform(11, t, SD_RNG_STREAM_DRAFT, 0));
        double a = sd_dist_prob(&p, x) / sd_dist_prob(&q, x);
        int32_t tok = sd_rng_uniform(11, t, SD_RNG_STREAM_ACCEPT, 0) < a ? x
                    : sd_residual_sample(&p, &q, sd_rng_uniform(11, t, SD_RNG_STREAM_RESIDUAL, 0));
        sc[tok]++;
    }
    double cs = chi2(sc, pp, 8, N);
    CHECK(cs < CHI2_DF7_P001, "speculative accept/resample: chi2 %.2f", cs);

    /* sparse dists: q with top-k 3, p with top-k 5; residual over p's support */
    specdec_sampling_params pk = params(1.0f, 5, 1.0f, 0.0f), qk = params(1.0f, 3, 1.0f, 0.0f);
    sd_filter(&ws, &pk, ROW8, 8, &p, NULL);
    sd_filter(&ws, &qk, ROWQ, 8, &q, NULL);
    CHECK(p.n == 5 && q.n == 3, "sparse dists");
    for (int t = 0; t < 200; t++) {
        int32_t r = sd_residual_sample(&p, &q, sd_rng_uniform(3, t, 2, 0));
        CHECK(sd_dist_prob(&p, r) > sd_dist_prob(&q, r), "residual token %d outside p > q", r);
    }
    sd_dist_free(&p); sd_dist_free(&q); sd_sampler_ws_free(&ws);
}

static double now_ms(void) {
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static void test_timing(void) {
    enum { V = 151936, R = 50 };
    float *x = malloc(V * sizeof *x);
    CHECK(x != NULL, "alloc");
    if (!x) return;
    /* LLM-like row: roughly normal logits (sum of uniforms), a few strong candidates */
    for (int i = 0; i < V; i++) {
        double s = 0;
        for (int j = 0; j < 4; j++) s += sd_rng_uniform(99, i, 9, (uint32_t)j);
        x[i] = (float)(3.0 * (s - 2.0));
    }
    for (int i = 0; i < 8; i++) x[(i * 7919) % V] = 14.0f - i;
    sd_sampler_ws ws; sd_sampler_ws_init(&ws, V, NULL);
    struct { const char *name; specdec_sampling_params p; } cfg[] = {
        {"greedy", params(0.0f, 0, 1.0f, 0.0f)},
        {"T0.7 top_k 40 top_p 0.95", params(0.7f, 40, 0.95f, 0.0f)},
        {"T0.7 top_p 0.95", params(0.7f, 0, 0.95f, 0.0f)},
        {"T0.7 min_p 0.05", params(0.7f, 0, 1.0f, 0.05f)},
        {"T1.0 unfiltered", params(1.0f, 0, 1.0f, 0.0f)},
    };
    for (int c = 0; c < (int)(sizeof cfg / sizeof cfg[0]); c++) {
        int32_t tok = 0;
        double t0 = now_ms();
        for (int r = 0; r < R; r++) tok ^= specdec_sample(&cfg[c].p, x, V, r);
        double t1 = now_ms();
        for (int r = 0; r < R; r++) tok ^= sd_sample(&ws, &cfg[c].p, x, V, r);
        double t2 = now_ms();
        fprintf(stderr, "timing V=%d %-26s specdec_sample %.3f ms  sd_sample(ws) %.3f ms  kept %d (%d)\n",
                V, cfg[c].name, (t1 - t0) / R, (t2 - t1) / R, cfg[c].p.temperature <= 0 ? 1
                : (cfg[c].p.top_k > 0 || cfg[c].p.top_p < 1 || cfg[c].p.min_p > 0) ? ws.dist.n : V, tok & 1);
    }
    /* the seeded-sampling case this path was tuned for: Gaussian logits, std 3, T = 1, no
     * filters; against the scalar reference (every token drawn) over the same dense dist */
    for (int i = 0; i < V; i++) {
        double u1 = sd_rng_uniform(98, i, 9, 0), u2 = sd_rng_uniform(98, i, 9, 1);
        x[i] = (float)(3.0 * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
    }
    specdec_sampling_params g = params(1.0f, 0, 1.0f, 0.0f);
    int32_t tok = 0, same = 0;
    double t0 = now_ms();
    for (int r = 0; r < R; r++) tok ^= sd_sample(&ws, &g, x, V, r);
    double t1 = now_ms();
    sd_filter(&ws, &g, x, V, &ws.dist, NULL);
    double t2 = now_ms();
    for (int r = 0; r < 10; r++) same += sd_dist_gumbel_ref(&ws.dist, g.seed, r) == sd_sample(&ws, &g, x, V, r);
    double t3 = now_ms();
    fprintf(stderr, "timing V=%d gauss std 3, T1.0 unfiltered: sd_sample %.3f ms; filter + reference Gumbel %.3f ms (%d)\n",
            V, (t1 - t0) / R, (t2 - t1) + (t3 - t2) / 10, tok & 1);
    CHECK(same == 10, "fast and reference disagree on the timing row (%d / 10)", same);
    sd_sampler_ws_free(&ws);
    free(x);
}

int main(void) {
    test_philox_kat();
    test_uniform();
    test_bits_layout();
    test_portable_gumbel();
    test_gumbel_fast_equals_ref();
    test_argmax();
    test_defaults();
    test_filters();
    test_determinism();
    test_gumbel_chi2();
    test_dist_chi2();
    test_timing();
    return check_finish("test_sample");
}
