/* test_generate.c: classic generation through the public API on the HF-checked fixtures:
 * greedy output equals the argmax chain of specdec_ctx_forward, the budget is exact, seeded runs
 * reproduce to the token, and a prompt longer than the context is refused with a clear error. */
#include "check.h"
#include "specdec.h"
#include <stdlib.h>
#include <string.h>

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[b]) b = i;
    return b;
}

int main(void) {
    specdec_err err = {0};
    specdec_model *m = NULL;
    CHECK(specdec_model_load(check_path("tests/fixtures/tiny-q4"), NULL, &m, &err) == SPECDEC_OK, "load: %s", err.msg);
    if (!m) return check_finish("test_generate");
    specdec_ctx_params cp = specdec_ctx_default_params();
    cp.n_ctx = 256; cp.n_threads = 2;
    specdec_ctx *c = NULL;
    CHECK(specdec_ctx_init(m, &cp, &c, &err) == SPECDEC_OK, "ctx: %s", err.msg);
    int32_t prompt[5] = {5, 17, 300, 42, 9};
    specdec_gen_params gp = specdec_gen_default_params();
    gp.max_tokens = 20; gp.ignore_eos = true;
    int32_t *ids = NULL; int n = 0;
    specdec_gen_stats st;
    CHECK(specdec_generate(c, NULL, prompt, 5, &gp, &ids, &n, &st, &err) == SPECDEC_OK, "gen: %s", err.msg);
    CHECK_EQ_INT(n, 20);
    CHECK_EQ_INT(st.prompt_tokens, 5);
    /* the same chain by hand */
    specdec_ctx *c2 = NULL;
    CHECK(specdec_ctx_init(m, &cp, &c2, &err) == SPECDEC_OK, "ctx2: %s", err.msg);
    float *lg = malloc(sizeof(float) * 512 * 5);
    specdec_ctx_forward(c2, prompt, 5, lg, NULL, &err);
    int32_t t = argmax(lg + 4 * 512, 512);
    for (int i = 0; i < n; i++) {
        CHECK(ids[i] == t, "greedy token %d: %d != argmax %d", i, ids[i], t);
        specdec_ctx_forward(c2, &t, 1, lg, NULL, &err);
        t = argmax(lg, 512);
    }
    free(ids);
    /* seeded sampling: same seed, same tokens; another seed, (almost surely) different */
    gp.sampling.temperature = 30.0f; gp.sampling.seed = 99; /* logits span ~90: make it really random */
    int32_t *a = NULL, *b = NULL, *d = NULL; int na, nb, nd;
    specdec_generate(c, NULL, prompt, 5, &gp, &a, &na, NULL, &err);
    specdec_generate(c, NULL, prompt, 5, &gp, &b, &nb, NULL, &err);
    gp.sampling.seed = 100;
    specdec_generate(c, NULL, prompt, 5, &gp, &d, &nd, NULL, &err);
    CHECK(na == nb && memcmp(a, b, sizeof *a * na) == 0, "seeded runs differ");
    CHECK(na != nd || memcmp(a, d, sizeof *a * na) != 0, "different seeds gave identical 20-token outputs");
    free(a); free(b); free(d);
    /* budget 0 emits nothing */
    gp.max_tokens = 0;
    CHECK(specdec_generate(c, NULL, prompt, 5, &gp, &ids, &n, NULL, &err) == SPECDEC_OK && n == 0, "budget 0");
    free(ids);
    /* a prompt longer than the context */
    int32_t *longp = calloc(300, sizeof *longp);
    gp.max_tokens = 4;
    specdec_status s = specdec_generate(c, NULL, longp, 300, &gp, &ids, &n, NULL, &err);
    CHECK(s == SPECDEC_ERR_CONTEXT, "long prompt: status %d", s);
    CHECK(strstr(err.msg, "300") != NULL, "long prompt message does not name the length: %s", err.msg);
    /* an out-of-vocabulary id */
    int32_t bad = 512;
    s = specdec_ctx_forward(c2, &bad, 1, lg, NULL, &err);
    CHECK(s == SPECDEC_ERR_INVALID_ARG && strstr(err.msg, "512"), "bad id: %d %s", s, err.msg);
    free(longp); free(lg);
    specdec_ctx_free(c); specdec_ctx_free(c2);
    specdec_model_free(m);
    return check_finish("test_generate");
}
