/* test_invariance.c: the ground of the exactness contract. The logits (and final hidden
 * states) at a position must be bitwise identical whether the position is computed alone or
 * inside a block of T positions (T up to 64), whatever the split of the sequence into calls and
 * whatever the thread count; for every weight kind and KV dtype. */
#include "check.h"
#include "specdec.h"
#include <stdlib.h>
#include <string.h>

#define N 112

static int run(specdec_model *m, int threads, specdec_kv_dtype kv, const int *blocks, int nblocks,
               const int32_t *tok, float *logits, float *hidden, int V, int H) {
    specdec_ctx_params cp = specdec_ctx_default_params();
    cp.n_ctx = 256; cp.n_threads = threads; cp.kv_dtype = kv; cp.max_batch = 64;
    specdec_ctx *c = NULL;
    specdec_err err = {0};
    if (specdec_ctx_init(m, &cp, &c, &err)) { fprintf(stderr, "ctx: %s\n", err.msg); return 1; }
    CHECK(specdec_ctx_kv_dtype(c) == kv, "the context runs the KV dtype asked for (%d, runs %d)", (int)kv,
          (int)specdec_ctx_kv_dtype(c));
    int pos = 0, bi = 0;
    while (pos < N) {
        int T = blocks[bi < nblocks ? bi : nblocks - 1];
        bi++;
        if (T > N - pos) T = N - pos;
        if (specdec_ctx_forward(c, tok + pos, T, logits + (size_t)pos * V, hidden + (size_t)pos * H, &err)) {
            fprintf(stderr, "forward: %s\n", err.msg);
            specdec_ctx_free(c);
            return 1;
        }
        pos += T;
    }
    specdec_ctx_free(c);
    return 0;
}

static void check_model(const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "tests/fixtures/%s", name);
    specdec_err err = {0};
    specdec_model *m = NULL;
    CHECK(specdec_model_load(check_path(rel), NULL, &m, &err) == SPECDEC_OK, "%s: %s", name, err.msg);
    if (!m) return;
    specdec_model_info in;
    specdec_model_get_info(m, &in);
    int V = in.vocab_size, H = in.hidden_size;
    int32_t tok[N];
    for (int i = 0; i < N; i++) tok[i] = (int32_t)((i * 7919u + 13) % (unsigned)V);
    size_t nl = (size_t)N * V, nh = (size_t)N * H;
    float *l0 = malloc(nl * 4), *h0 = malloc(nh * 4), *l1 = malloc(nl * 4), *h1 = malloc(nh * 4);
    static const int chain[] = {1};
    static const int split_a[] = {30, 64, 1};        /* a prefill, a 64-wide verify, then decode */
    static const int split_b[] = {7};
    static const int split_c[] = {64, 5, 3, 16, 2};
    struct { const int *b; int n; int threads; const char *what; } arms[] = {
        {split_a, 3, 2, "30+64+1.. on 2 threads"}, {split_b, 1, 3, "blocks of 7 on 3 threads"},
        {split_c, 5, 4, "64,5,3,16,2.. on 4 threads"}, {chain, 1, 2, "chain on 2 threads"},
    };
    specdec_kv_dtype kvs[] = {SPECDEC_KV_F32, SPECDEC_KV_BF16, SPECDEC_KV_F16};
    for (int k = 0; k < 3; k++) {
        memset(l0, 0xff, nl * 4); memset(h0, 0xff, nh * 4);
        CHECK(run(m, 1, kvs[k], chain, 1, tok, l0, h0, V, H) == 0, "%s: chain run failed", name);
        for (int a = 0; a < 4; a++) {
            memset(l1, 0xff, nl * 4); memset(h1, 0xff, nh * 4);
            CHECK(run(m, arms[a].threads, kvs[k], arms[a].b, arms[a].n, tok, l1, h1, V, H) == 0,
                  "%s: run failed", name);
            int bad = -1;
            for (int p = 0; p < N && bad < 0; p++)
                if (memcmp(l0 + (size_t)p * V, l1 + (size_t)p * V, (size_t)V * 4) ||
                    memcmp(h0 + (size_t)p * H, h1 + (size_t)p * H, (size_t)H * 4)) bad = p;
            CHECK(bad < 0, "%s kv=%d %s: position %d differs from the 1-thread chain", name, k, arms[a].what, bad);
        }
    }
    free(l0); free(h0); free(l1); free(h1);
    specdec_model_free(m);
}

/* SPECDEC_KV_DEFAULT resolves to bf16 on the CPU's int8 path, f32 at precision f32 (the CPU backend named:
 * "auto" would take a GPU where there is one). */
static void check_kv_default(void) {
    specdec_err err = {0};
    specdec_model *m = NULL;
    CHECK(specdec_model_load(check_path("tests/fixtures/tiny-q4"), NULL, &m, &err) == SPECDEC_OK, "tiny-q4: %s", err.msg);
    if (!m) return;
    static const struct { specdec_precision p; specdec_kv_dtype want; } cases[] = {
        {SPECDEC_PRECISION_INT8, SPECDEC_KV_BF16}, {SPECDEC_PRECISION_F32, SPECDEC_KV_F32}};
    for (int i = 0; i < 2; i++) {
        specdec_ctx_params cp = specdec_ctx_default_params();
        CHECK(cp.kv_dtype == SPECDEC_KV_DEFAULT, "default params ask for the backend's KV dtype");
        cp.n_ctx = 64; cp.n_threads = 1; cp.precision = cases[i].p; cp.backend = "cpu";
        specdec_ctx *c = NULL;
        CHECK(specdec_ctx_init(m, &cp, &c, &err) == SPECDEC_OK, "ctx: %s", err.msg);
        if (!c) continue;
        CHECK(specdec_ctx_kv_dtype(c) == cases[i].want, "precision %d: default KV dtype %d, expected %d", (int)cases[i].p,
              (int)specdec_ctx_kv_dtype(c), (int)cases[i].want);
        specdec_ctx_free(c);
    }
    specdec_model_free(m);
}

/* max_batch 0 (the default parameter) resolves to the backend's chunk: 64 on the CPU; a value
 * given is kept; a NULL context reports 0. */
static void check_batch_default(void) {
    specdec_err err = {0};
    specdec_model *m = NULL;
    CHECK(specdec_model_load(check_path("tests/fixtures/tiny-q4"), NULL, &m, &err) == SPECDEC_OK, "tiny-q4: %s", err.msg);
    if (!m) return;
    CHECK(specdec_ctx_max_batch(NULL) == 0, "a NULL context reports max_batch %d", specdec_ctx_max_batch(NULL));
    static const struct { int ask, want; } cases[] = {{0, 64}, {7, 7}, {300, 300}};
    for (int i = 0; i < 3; i++) {
        specdec_ctx_params cp = specdec_ctx_default_params();
        CHECK(cp.max_batch == 0, "default params leave max_batch to the backend (%d)", cp.max_batch);
        cp.n_ctx = 64; cp.n_threads = 1; cp.backend = "cpu"; cp.max_batch = cases[i].ask;
        specdec_ctx *c = NULL;
        CHECK(specdec_ctx_init(m, &cp, &c, &err) == SPECDEC_OK, "ctx: %s", err.msg);
        if (!c) continue;
        CHECK(specdec_ctx_max_batch(c) == cases[i].want, "max_batch %d: the context runs %d, expected %d", cases[i].ask,
              specdec_ctx_max_batch(c), cases[i].want);
        specdec_ctx_free(c);
    }
    specdec_model_free(m);
}

int main(void) {
    check_kv_default();
    check_batch_default();
    check_model("tiny-f32");
    check_model("tiny-bf16");
    check_model("tiny-q4");
    return check_finish("test_invariance");
}
