/* test_spec_api.c: the public speculative API's edges and the adaptive width controller.
 * - bad arguments are errors that say what is wrong (block size 1 or 17, unknown drafter, a draft
 *   model with another vocabulary); a NULL drafter runs classic decoding;
 * - cancellation stops at the same token as classic decoding;
 * - the controller (sd_auto): it settles on the width with the best rate, picks width 1 and
 *   declines speculation when classic is fastest, and on rounds drawn from a model of drafts and
 *   costs reaches most of the best fixed width's rate, short generations included. */
#include "check.h"
#include "tiny_spec.h"
#include "specdec.h"
#include "speculative/spec_internal.h"
#include <stdlib.h>
#include <string.h>

static int most_picked(double rate_of_w[9]) {
    sd_auto a;
    sd_auto_init(&a);
    int cnt[9] = {0};
    for (int i = 0; i < 400; i++) {
        int w = sd_auto_pick(&a);
        if (i >= 100) cnt[w]++;
        /* a round at width w accepts every draft and emits w tokens in w / rate ms */
        sd_auto_update(&a, w, w - 1, w - 1, w / rate_of_w[w]);
    }
    int best = 1;
    for (int w = 2; w <= 8; w++) if (cnt[w] > cnt[best]) best = w;
    CHECK(cnt[best] > 300 * 0.85, "exploited width picked %d of 300", cnt[best]);
    return best;
}

static uint64_t xs = 0x9e3779b97f4a7c15ull;
static double unif(void) {
    xs ^= xs << 13; xs ^= xs >> 7; xs ^= xs << 17;
    return (double)(xs >> 11) / 9007199254740992.0;
}

/* Rounds drawn from a model: draft j accepted with probability p (drafts checked in order up
 * to the first rejection), a round of width w costing c0 + c1 (w - 1) ms with 10% noise, and the
 * first round at each width `first` times slower (a graph recorded in it); in the first `cold`
 * rounds drafts are accepted with probability 0.05 only (the start of an answer). Over n rounds, the
 * mean over 50 generations of the controller's tokens per ms must reach `want` of the best fixed
 * width's expected rate. */
static void modelled(double p, double c0, double c1, double first, int cold, int n, double want) {
    double best = 0;
    int wbest = 1;
    for (int w = 1; w <= 8; w++) {
        double e = 0, run = 1;
        for (int j = 0; j < w; j++) { e += run; run *= p; }
        if (e / (c0 + c1 * (w - 1)) > best) { best = e / (c0 + c1 * (w - 1)); wbest = w; }
    }
    double sum = 0;
    for (int g = 0; g < 50; g++) {
        sd_auto a;
        sd_auto_init(&a);
        double tok = 0, ms = 0;
        int seen[9] = {0};
        for (int i = 0; i < n; i++) {
            const int w = sd_auto_pick(&a);
            int acc = 0;
            while (acc < w - 1 && unif() < (i < cold ? 0.05 : p)) acc++;
            double t = (c0 + c1 * (w - 1)) * (0.9 + 0.2 * unif());
            if (!seen[w]++) t *= first;
            tok += acc + 1;
            ms += t;
            sd_auto_update(&a, w, w - 1, acc, t);
        }
        sum += tok / ms / best;
    }
    CHECK(sum / 50 >= want, "p %.2f, cost %.2f + %.2f (w - 1), first rounds x%.0f, %d cold, %d rounds: %.3f of the best "
          "width's rate (%d: %.3f tokens/ms)", p, c0, c1, first, cold, n, sum / 50, wbest, best);
}

int main(void) {
    double r1[9] = {0, 10, 9, 8, 7, 6, 5, 4, 3};      /* classic is fastest */
    double r2[9] = {0, 10, 12, 15, 19, 17, 14, 12, 11};/* width 4 is fastest */
    CHECK_EQ_INT(most_picked(r1), 1);
    CHECK_EQ_INT(most_picked(r2), 4);
    {   /* classic fastest: the controller declines speculation */
        sd_auto a;
        sd_auto_init(&a);
        for (int i = 0; i < 20; i++) {
            const int w = sd_auto_pick(&a);
            sd_auto_update(&a, w, w - 1, w - 1, w / r1[w]);
        }
        CHECK(sd_auto_declines(&a), "classic measured fastest, yet not declined (best width %d)", sd_auto_best(&a));
        sd_auto_init(&a);
        for (int i = 0; i < 20; i++) {
            const int w = sd_auto_pick(&a);
            sd_auto_update(&a, w, w - 1, w - 1, w / r2[w]);
        }
        CHECK(!sd_auto_declines(&a), "width 4 measured fastest, yet declined");
    }
    /* a GPU-like round (the verify nearly flat in the width, graphs recorded in a width's first
     * round), a CPU-like one (the verify growing with the width), a poor drafter, a cold start:
     * short generations (40 rounds) and long ones */
    modelled(0.8, 1.0, 0.06, 2.0, 0, 40, 0.75);
    modelled(0.8, 1.0, 0.06, 2.0, 0, 400, 0.93);
    modelled(0.7, 1.0, 0.35, 1.0, 0, 40, 0.90);
    modelled(0.7, 1.0, 0.35, 1.0, 0, 400, 0.95);
    modelled(0.2, 1.0, 0.5, 1.0, 0, 400, 0.90);
    modelled(0.85, 1.0, 0.3, 1.0, 6, 40, 0.82);   /* an answer's first rounds reject */

    char tdir[64], ddir[64];
    if (!tm_mkdtemp(tdir, sizeof tdir) || !tm_mkdtemp(ddir, sizeof ddir)) { CHECK(0, "mkdtemp"); return check_finish("test_spec_api"); }
    ts_dims dm = ts_default();
    CHECK(ts_write_pair(tdir, NULL, &dm, 3, NULL, 0) == 0, "write target");
    ts_dims d2 = dm;
    d2.V = 96;
    CHECK(ts_write_pair(ddir, NULL, &d2, 3, NULL, 0) == 0, "write other-vocab model");
    specdec_err err = {0};
    specdec_model *m = NULL;
    CHECK(specdec_model_load(tdir, NULL, &m, &err) == SPECDEC_OK, "load: %s", err.msg);
    if (!m) return check_finish("test_spec_api");
    specdec_drafter *d = NULL;
    char spec[128];
    snprintf(spec, sizeof spec, "model:%s", ddir);
    CHECK(specdec_drafter_init(m, spec, &d, &err) == SPECDEC_ERR_SHAPE && !d && strstr(err.msg, "vocab"), "vocab mismatch: %s", err.msg);
    CHECK(specdec_drafter_init(m, "eagle", &d, &err) == SPECDEC_ERR_INVALID_ARG && strstr(err.msg, "eagle"), "unknown: %s", err.msg);
    /* mtp+ngram[:M]: M the shortest match the lookup drafts from, 1..64 */
    const char *bad_hy[4] = {"mtp+ngram:0", "mtp+ngram:65", "mtp+ngram:", "mtp+ngram:3x"};
    for (int i = 0; i < 4; i++)
        CHECK(specdec_drafter_init(m, bad_hy[i], &d, &err) == SPECDEC_ERR_INVALID_ARG && !d && strstr(err.msg, bad_hy[i]),
              "%s: %s", bad_hy[i], err.msg);
    CHECK(specdec_drafter_init(m, "mtp+ngramx", &d, &err) == SPECDEC_ERR_INVALID_ARG && !d && strstr(err.msg, "unknown"),
          "mtp+ngramx: %s", err.msg);
    CHECK(specdec_drafter_init(m, "mtp+ngram:3", &d, &err) == SPECDEC_OK && d && !strcmp(specdec_drafter_name(d), "mtp+ngram"),
          "mtp+ngram:3: %s", err.msg);
    specdec_drafter_free(d);
    d = NULL;
    CHECK(specdec_drafter_init(m, "ngram", &d, &err) == SPECDEC_OK, "ngram");
    CHECK(!strcmp(specdec_drafter_name(d), "ngram"), "name");

    specdec_ctx_params cp = specdec_ctx_default_params();
    cp.n_ctx = 128; cp.n_threads = 1;
    specdec_ctx *c = NULL;
    CHECK(specdec_ctx_init(m, &cp, &c, &err) == SPECDEC_OK, "ctx");
    int32_t prompt[4] = {7, 8, 9, 10};
    specdec_gen_params gp = specdec_gen_default_params();
    gp.ignore_eos = true; gp.max_tokens = 30;
    specdec_spec_params sp = specdec_spec_default_params();
    sp.quiet = true;
    specdec_spec_stats ss;
    sp.block_size = 1;
    CHECK(specdec_spec_generate(c, d, NULL, prompt, 4, &gp, &sp, NULL, NULL, &ss, &err) == SPECDEC_ERR_INVALID_ARG, "K=1");
    sp.block_size = 17;
    CHECK(specdec_spec_generate(c, d, NULL, prompt, 4, &gp, &sp, NULL, NULL, &ss, &err) == SPECDEC_ERR_INVALID_ARG &&
          strstr(err.msg, "17"), "K=17: %s", err.msg);
    sp.block_size = 4;
    CHECK(specdec_spec_generate(c, d, NULL, prompt, 0, &gp, &sp, NULL, NULL, &ss, &err) == SPECDEC_ERR_INVALID_ARG, "empty prompt");
    /* NULL drafter: classic */
    int32_t *a = NULL, *b = NULL; int na = 0, nb = 0;
    specdec_generate(c, NULL, prompt, 4, &gp, &a, &na, NULL, &err);
    CHECK(specdec_spec_generate(c, NULL, NULL, prompt, 4, &gp, &sp, &b, &nb, &ss, &err) == SPECDEC_OK, "null drafter");
    CHECK(na == nb && !memcmp(a, b, 4 * (size_t)na) && !ss.speculated && ss.rounds == 0, "null drafter = classic");
    free(a); free(b);
    /* cancellation: set before the call, so both stop after their first token */
    volatile int cancel = 1;
    gp.cancel = &cancel;
    specdec_gen_stats gs;
    specdec_generate(c, NULL, prompt, 4, &gp, &a, &na, &gs, &err);
    CHECK(specdec_spec_generate(c, d, NULL, prompt, 4, &gp, &sp, &b, &nb, &ss, &err) == SPECDEC_OK, "cancel run");
    CHECK(na == nb && na == 1 && gs.stop_reason == 3 && ss.gen.stop_reason == 3, "cancel: %d vs %d tokens, reason %d vs %d",
          na, nb, gs.stop_reason, ss.gen.stop_reason);
    free(a); free(b);
    specdec_drafter_free(d);
    specdec_ctx_free(c);
    specdec_model_free(m);
    tm_rm_rf(tdir); tm_rm_rf(ddir);
    return check_finish("test_spec_api");
}
