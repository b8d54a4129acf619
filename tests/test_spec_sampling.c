/* test_spec_sampling.c: speculative sampling at temperature > 0.
 * - seeded mode: byte-identical to classic seeded decoding for every drafter, K and seed.
 * - rejection mode: over many seeds, on a tiny-vocabulary target, the joint distribution of the
 *   first two tokens that rounds produce (emitted tokens 2 and 3; token 1 comes from the
 *   prefill) matches the target's filtered distribution p(t2 | t1) p(t3 | t1, t2) given the
 *   prompt and t1, by a chi-square test, for drafters with q (mtp, model) and without (ngram,
 *   point mass), and for mtp+ngram (seeded: lookup rounds among its rounds; rejection: the module
 *   drafts every round). Acceptance must be > 0 so the accept path is exercised. */
#include "check.h"
#include "tiny_spec.h"
#include "specdec.h"
#include "sample/sample.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define V 16

/* Wilson-Hilferty chi-square quantile at z standard deviations. */
static double chi2_crit(int df, double z) {
    double a = 2.0 / (9.0 * df);
    return df * pow(1 - a + z * sqrt(a), 3);
}

int main(void) {
    char tdir[64], ddir[64];
    ts_dims dm = {V, 32, 64, 4, 2, 8, 512, 1.6f, 0.05f};
    specdec_err err = {0};
    specdec_model *m = ts_open_pair(tdir, ddir, &dm, 21, &err);
    if (!m) return check_finish("test_spec_sampling");
    specdec_ctx *c = ts_ctx(m, 128, 1, &err);
    CHECK(c != NULL, "ctx: %s", err.msg);
    const char *names[4] = {"ngram", "mtp", "model", "mtp+ngram"};
    specdec_drafter *dr[4] = {0};
    CHECK(ts_three_drafters(m, ddir, dr, &err) == SPECDEC_OK, "drafters: %s", err.msg);
    CHECK(specdec_drafter_init(m, "mtp+ngram:2", &dr[3], &err) == SPECDEC_OK, "mtp+ngram: %s", err.msg);
    int32_t prompt[6] = {1, 5, 9, 5, 9, 5};

    /* ---- seeded: identical to classic seeded runs */
    for (int di = 0; di < 4; di++) {
        int64_t accepted = 0, lookups = 0, rounds = 0;
        for (int seed = 0; seed < 12; seed++)
            for (int K = 2; K <= 16; K += (K < 8 ? 1 : 4)) {
                specdec_gen_params gp = specdec_gen_default_params();
                gp.ignore_eos = true; gp.max_tokens = 40;
                gp.sampling.temperature = 0.8f; gp.sampling.top_k = seed % 3 ? 0 : 10;
                gp.sampling.top_p = seed % 2 ? 0.95f : 1.0f; gp.sampling.seed = 1000 + seed;
                int32_t *a = NULL, *b = NULL; int na = 0, nb = 0;
                specdec_generate(c, NULL, prompt, 6, &gp, &a, &na, NULL, &err);
                specdec_spec_params sp = specdec_spec_default_params();
                sp.block_size = K; sp.sampling = SPECDEC_SPEC_SEEDED; sp.quiet = true;
                specdec_spec_stats ss;
                CHECK(specdec_spec_generate(c, dr[di], NULL, prompt, 6, &gp, &sp, &b, &nb, &ss, &err) == SPECDEC_OK, "%s", err.msg);
                CHECK(na == nb && memcmp(a, b, 4 * (size_t)na) == 0, "seeded %s K=%d seed %d differs from classic", names[di], K, seed);
                accepted += ss.accepted;
                lookups += ss.lookup_rounds;
                rounds += ss.rounds;
                free(a); free(b);
            }
        fprintf(stderr, "seeded %s: accepted %lld, lookup rounds %lld of %lld\n", names[di], (long long)accepted,
                (long long)lookups, (long long)rounds);
        CHECK(accepted > 0, "seeded %s: nothing accepted", names[di]);
        if (di == 3) CHECK(lookups > 0 && lookups < rounds, "seeded mtp+ngram: %lld of %lld rounds by lookup", (long long)lookups,
                           (long long)rounds);
    }

    /* ---- rejection: distribution of (t2, t3) given t1 */
    specdec_sampling_params samp = specdec_sampling_default_params();
    samp.temperature = 1.0f;
    sd_sampler_ws ws;
    sd_sampler_ws_init(&ws, V, &err);
    sd_dist p;
    sd_dist_init(&p, V, &err);
    float *lg = malloc(sizeof(float) * 8 * V);
    /* t1 from the prefill logits; p2[t1][t2], p3[t1][t2][t3] from the target */
    static double p1[V], p2[V][V], p3[V][V][V];
    int32_t seq[9];
    memcpy(seq, prompt, sizeof prompt);
    specdec_ctx_truncate(c, 0, &err);
    specdec_ctx_forward(c, prompt, 6, lg, NULL, &err);
    sd_filter(&ws, &samp, lg + 5 * V, V, &p, &err);
    for (int t = 0; t < V; t++) p1[t] = sd_dist_prob(&p, t);
    (void)p1;
    for (int a = 0; a < V; a++) {
        specdec_ctx_truncate(c, 6, &err);
        seq[6] = a;
        specdec_ctx_forward(c, seq + 6, 1, lg, NULL, &err);
        sd_filter(&ws, &samp, lg, V, &p, &err);
        for (int b = 0; b < V; b++) p2[a][b] = sd_dist_prob(&p, b);
        for (int b = 0; b < V; b++) {
            specdec_ctx_truncate(c, 7, &err);
            seq[7] = b;
            specdec_ctx_forward(c, seq + 7, 1, lg, NULL, &err);
            sd_filter(&ws, &samp, lg, V, &p, &err);
            for (int t = 0; t < V; t++) p3[a][b][t] = sd_dist_prob(&p, t);
        }
    }
    int N = 6000;
    static int cnt[V][V][V];
    static int c1[V];
    for (int di = 0; di < 4; di++) {
        for (int K = 3; K <= 5; K += 2) {
            memset(cnt, 0, sizeof cnt); memset(c1, 0, sizeof c1);
            int64_t accepted = 0, drafted = 0;
            for (int s = 0; s < N; s++) {
                specdec_gen_params gp = specdec_gen_default_params();
                gp.ignore_eos = true; gp.max_tokens = 3 + K;   /* the first round drafts K-1 */
                gp.sampling = samp; gp.sampling.seed = (uint64_t)s * 7919 + 17 + (uint64_t)di * 1000003;
                specdec_spec_params sp = specdec_spec_default_params();
                sp.block_size = K; sp.sampling = SPECDEC_SPEC_REJECTION; sp.quiet = true;
                specdec_spec_stats ss;
                int32_t *o = NULL; int no = 0;
                specdec_spec_generate(c, dr[di], NULL, prompt, 6, &gp, &sp, &o, &no, &ss, &err);
                if (no >= 3) { cnt[o[0]][o[1]][o[2]]++; c1[o[0]]++; }
                accepted += ss.accepted; drafted += ss.drafted;
                CHECK(ss.lookup_rounds == 0, "rejection %s: %lld rounds by lookup (the module must draft)", names[di],
                      (long long)ss.lookup_rounds);
                free(o);
            }
            /* chi-square over cells (t2, t3) given the observed t1 counts, expected >= 5 */
            double chi = 0, rest_o = 0, rest_e = 0;
            int cells = 0;
            for (int a = 0; a < V; a++)
                for (int b = 0; b < V; b++)
                    for (int t = 0; t < V; t++) {
                        double e = c1[a] * p2[a][b] * p3[a][b][t];
                        if (e >= 5) { chi += (cnt[a][b][t] - e) * (cnt[a][b][t] - e) / e; cells++; }
                        else { rest_o += cnt[a][b][t]; rest_e += e; }
                    }
            if (rest_e >= 5) { chi += (rest_o - rest_e) * (rest_o - rest_e) / rest_e; cells++; }
            /* df: cells minus one constraint per t1 group (approximately) */
            int groups = 0;
            for (int a = 0; a < V; a++) groups += c1[a] > 0;
            int df = cells - groups > 1 ? cells - groups : 1;
            double crit = chi2_crit(df, 3.5);
            fprintf(stderr, "rejection %s K=%d: chi2 %.1f over %d cells (df %d, crit %.1f), accepted %lld / %lld\n", names[di],
                    K, chi, cells, df, crit, (long long)accepted, (long long)drafted);
            CHECK(cells > 10, "%s: too few cells (%d)", names[di], cells);
            CHECK(chi < crit, "rejection %s K=%d: chi2 %.1f >= %.1f: the output is not the target's distribution", names[di], K, chi, crit);
            CHECK(accepted > 0, "rejection %s K=%d: nothing accepted", names[di], K);
        }
    }
    free(lg);
    sd_dist_free(&p);
    sd_sampler_ws_free(&ws);
    for (int i = 0; i < 4; i++) specdec_drafter_free(dr[i]);
    specdec_ctx_free(c);
    specdec_model_free(m);
    tm_rm_rf(tdir); tm_rm_rf(ddir);
    return check_finish("test_spec_sampling");
}
