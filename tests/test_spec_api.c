/* test_spec_api.c: the public speculative API's edges and the adaptive width controller.
 * - bad arguments are errors that say what is wrong (block size 1 or 17, unknown drafter, a draft
 *   model with another vocabulary); a NULL drafter runs classic decoding;
 * - cancellation stops at the same token as classic decoding;
 * - the controller (sd_auto): after its sweep it exploits the width with the best measured rate,
 *   and picks width 1 (declines speculation) when classic is fastest. */
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
        /* a round at width w emits w tokens in w / rate ms */
        sd_auto_update(&a, w, w, w / rate_of_w[w]);
    }
    int best = 1;
    for (int w = 2; w <= 8; w++) if (cnt[w] > cnt[best]) best = w;
    CHECK(cnt[best] > 300 * 0.85, "exploited width picked %d of 300", cnt[best]);
    return best;
}

int main(void) {
    double r1[9] = {0, 10, 9, 8, 7, 6, 5, 4, 3};      /* classic is fastest */
    double r2[9] = {0, 10, 12, 15, 19, 17, 14, 12, 11};/* width 4 is fastest */
    CHECK_EQ_INT(most_picked(r1), 1);
    CHECK_EQ_INT(most_picked(r2), 4);

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
