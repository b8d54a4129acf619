/* test_tp.c: tensor parallelism on the CPU (docs/tensor-parallel.md). The plan (shapes that split,
 * shapes refused with the shape named, quantization groups), weight slices against the matrix they
 * come from, the all-reduce's order of additions (gather-sum in rank order; the ring's chunks), the
 * sharded forward against the unsharded one at N = 2, 4, 8 within a tolerance set by two valid
 * summation orders of the unsharded model, greedy tokens, speculative == classic through the sim
 * (MTP, n-gram, a draft model; greedy and seeded), run-to-run determinism, and the NCCL communicator's answer without a device. */
#include "check.h"
#include "tiny_spec.h"
#include "specdec.h"
#include "model/config.h"
#include "backend/backend.h"
#include "tp/plan.h"
#include "tp/comm.h"
#include "tp/tp_backend.h"
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static sd_config shape(int nh, int nkv, int H, int I, int hd, int qbits, int qgroup) {
    sd_config c;
    memset(&c, 0, sizeof c);
    c.n_heads = nh; c.n_kv_heads = nkv; c.hidden_size = H; c.intermediate_size = I; c.head_dim = hd;
    c.quant_bits = qbits; c.quant_group = qgroup; c.n_layers = 1; c.vocab_size = 16;
    return c;
}

static void test_plan(void) {
    specdec_err e = {0};
    sd_tp_plan p;
    /* the embedded model: 6 heads, 2 KV heads, intermediate 640, head_dim 128, 4-bit groups of 64 */
    sd_config k = shape(6, 2, 384, 640, 128, 4, 64);
    CHECK(sd_tp_plan_make(&k, 2, 64, "model", &p, &e) == SPECDEC_OK, "kernel N=2: %s", e.msg);
    CHECK(p.nh == 3 && p.nkv == 1 && p.I == 320 && p.kv_groups == 1, "kernel N=2 plan %d %d %d %d", p.nh, p.nkv, p.I, p.kv_groups);
    CHECK(sd_tp_plan_make(&k, 3, 64, "model", &p, &e) == SPECDEC_ERR_INVALID_ARG && strstr(e.msg, "2 KV heads"),
          "kernel N=3 must be refused naming the KV heads: %s", e.msg);
    CHECK(sd_tp_plan_make(&k, 4, 64, "model", &p, &e) == SPECDEC_ERR_INVALID_ARG && strstr(e.msg, "6 attention heads"),
          "kernel N=4 must be refused naming the heads: %s", e.msg);
    CHECK(sd_tp_plan_make(&k, 8, 64, "model", &p, &e) == SPECDEC_ERR_INVALID_ARG && strstr(e.msg, "6 attention heads"),
          "kernel N=8 (more ranks than heads): %s", e.msg);
    CHECK(sd_tp_plan_make(&k, 6, 64, "model", &p, &e) == SPECDEC_ERR_INVALID_ARG && strstr(e.msg, "intermediate_size 640"),
          "kernel N=6: %s", e.msg);
    CHECK(sd_tp_plan_make(&k, 0, 0, "model", &p, &e) == SPECDEC_ERR_INVALID_ARG, "N=0 accepted");
    CHECK(sd_tp_plan_make(&k, 16, 0, "model", &p, &e) == SPECDEC_ERR_INVALID_ARG, "N=16 accepted");
    /* the inflated shapes: 1.7B 16/8, 8B 32/8, 32B 64/8 at N = 1, 2, 4, 8 */
    sd_config big[3] = {shape(16, 8, 2048, 6144, 128, 4, 64), shape(32, 8, 4096, 12288, 128, 4, 64),
                        shape(64, 8, 5120, 25600, 128, 4, 64)};
    for (int i = 0; i < 3; i++)
        for (int n = 1; n <= 8; n *= 2) {
            CHECK(sd_tp_plan_make(&big[i], n, 64, "model", &p, &e) == SPECDEC_OK, "shape %d N=%d: %s", i, n, e.msg);
            CHECK(p.nh * n == big[i].n_heads && p.nkv * n == big[i].n_kv_heads && p.I * n == big[i].intermediate_size,
                  "shape %d N=%d plan", i, n);
        }
    /* KV heads replicated when fewer than ranks: 8 heads, 2 KV heads over 4 ranks -> 2 ranks per KV head */
    sd_config g = shape(8, 2, 64, 128, 16, 0, 0);
    CHECK(sd_tp_plan_make(&g, 4, 0, "model", &p, &e) == SPECDEC_OK, "8/2 N=4: %s", e.msg);
    CHECK(p.nh == 2 && p.nkv == 1 && p.kv_groups == 2, "8/2 N=4 plan");
    int kv0[4];
    for (int r = 0; r < 4; r++) kv0[r] = sd_tp_kv0(&p, &g, r);
    CHECK(kv0[0] == 0 && kv0[1] == 0 && kv0[2] == 1 && kv0[3] == 1, "KV heads per rank %d %d %d %d", kv0[0], kv0[1], kv0[2], kv0[3]);
    /* rank r's q heads [2r, 2r+2) belong to GQA group (2r)/(8/2): the KV head it holds */
    for (int r = 0; r < 4; r++) CHECK(2 * r / 4 == kv0[r], "rank %d: q heads of group %d, KV head %d", r, 2 * r / 4, kv0[r]);
    /* quantized column slices must hold whole groups */
    sd_config q1 = shape(4, 4, 64, 192, 32, 4, 64);
    CHECK(sd_tp_plan_make(&q1, 2, 64, "model", &p, &e) == SPECDEC_ERR_INVALID_ARG && strstr(e.msg, "down_proj") &&
          strstr(e.msg, "groups of 64"), "I 192 / 2 = 96 is no whole group: %s", e.msg);
    sd_config q2 = shape(6, 2, 64, 256, 16, 4, 64);
    CHECK(sd_tp_plan_make(&q2, 2, 64, "model", &p, &e) == SPECDEC_ERR_INVALID_ARG && strstr(e.msg, "o_proj"),
          "o_proj slice of 3 x 16 columns is no whole group: %s", e.msg);
    CHECK(sd_tp_plan_make(&q2, 2, 0, "model", &p, &e) == SPECDEC_OK, "the same shape dense splits: %s", e.msg);
}

/* A quantized (4-bit, group 64) and a dense bf16 matrix sliced by rows and columns: every slice
 * row equals the matching part of the source row. */
static void test_slices(void) {
    specdec_err e = {0};
    enum { R = 8, C = 256, G = 64 };
    uint32_t w[R * C / 8];
    uint16_t sc[R * C / G], bi[R * C / G], dense[R * C];
    uint64_t s = 5;
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) w[i] = (uint32_t)(tm_rand(&s) * 2147483647.0f) ^ 0x5a5a5a5au;
    for (int i = 0; i < R * C / G; i++) { float a = 0.01f + 0.1f * fabsf(tm_rand(&s)), b = tm_rand(&s); sd_from_f32(SPECDEC_DTYPE_BF16, &a, &sc[i], 1); sd_from_f32(SPECDEC_DTYPE_BF16, &b, &bi[i], 1); }
    for (int i = 0; i < R * C; i++) { float a = tm_rand(&s); sd_from_f32(SPECDEC_DTYPE_BF16, &a, &dense[i], 1); }
    sd_mat mq = {R, C, SPECDEC_DTYPE_BF16, 4, G, w, sc, bi, false, NULL};
    sd_mat md = {R, C, SPECDEC_DTYPE_BF16, 0, 0, dense, NULL, NULL, false, NULL};
    /* a config where ROWS_I takes rows and COLS_I takes columns of these matrices: I = 256 over 2 */
    sd_config c = shape(2, 2, 8, 256, 4, 4, 64);
    sd_tp_plan p;
    CHECK(sd_tp_plan_make(&c, 2, 0, "model", &p, &e) == SPECDEC_OK, "plan: %s", e.msg);
    float full[C], part[C];
    for (int which = 0; which < 2; which++) {
        const sd_mat *m = which ? &md : &mq;
        for (int r = 0; r < 2; r++) {
            sd_mat sl;
            CHECK(sd_tp_slice(&p, &c, m, SD_TP_COLS_I, r, "down", &sl, &e) == SPECDEC_OK, "cols: %s", e.msg);
            CHECK(sl.rows == R && sl.cols == C / 2, "cols slice shape %d x %d", sl.rows, sl.cols);
            for (int i = 0; i < R; i++) {
                sd_mat_row_f32(m, i, full);
                sd_mat_row_f32(&sl, i, part);
                CHECK(!memcmp(part, full + r * (C / 2), sizeof(float) * (C / 2)), "%s cols rank %d row %d differ",
                      which ? "dense" : "4-bit", r, i);
            }
            CHECK(sd_tp_slice_bytes(&p, &c, m, SD_TP_COLS_I, r) == sd_mat_bytes(&sl), "slice bytes");
            sd_tp_slice_free(&sl);
        }
    }
    /* rows: the I rows of gate/up (here R = 8 rows would need I = 8: use a config with I = 8) */
    sd_config cr = shape(2, 2, 8, 8, 4, 0, 0);
    CHECK(sd_tp_plan_make(&cr, 2, 0, "model", &p, &e) == SPECDEC_OK, "plan rows: %s", e.msg);
    for (int r = 0; r < 2; r++) {
        sd_mat sl;
        CHECK(sd_tp_slice(&p, &cr, &mq, SD_TP_ROWS_I, r, "gate", &sl, &e) == SPECDEC_OK, "rows: %s", e.msg);
        for (int i = 0; i < 4; i++) {
            sd_mat_row_f32(&mq, r * 4 + i, full);
            sd_mat_row_f32(&sl, i, part);
            CHECK(!memcmp(part, full, sizeof(float) * C), "4-bit rows rank %d row %d differ", r, i);
        }
        sd_tp_slice_free(&sl);
    }
    /* a column slice off a group boundary: 256 columns over I = 256 / 8 ranks = 32 per rank */
    sd_config c8 = shape(8, 8, 8, 256, 4, 0, 0);
    CHECK(sd_tp_plan_make(&c8, 8, 0, "model", &p, &e) == SPECDEC_OK, "plan 8: %s", e.msg);
    sd_mat sl;
    CHECK(sd_tp_slice(&p, &c8, &mq, SD_TP_COLS_I, 1, "model.layers.0.mlp.down_proj.weight", &sl, &e) ==
          SPECDEC_ERR_INVALID_ARG && strstr(e.msg, "down_proj") && strstr(e.msg, "group 64"),
          "off-group slice must be refused naming the tensor: %s", e.msg);
}

/* The all-reduce on a tensor-parallel backend of cpu ranks, with values where the association of
 * the additions shows: gather-sum is ((p0 + p1) + p2) + p3 everywhere; the ring sums chunk k from
 * rank k+1 round to rank k. Both are checked against those formulas bit for bit. */
static void test_allreduce_order(void) {
    enum { N = 4, n = 10 };
    float vals[N][n];
    for (int r = 0; r < N; r++)
        for (int e = 0; e < n; e++) {
            static const float pat[N] = {1e8f, 1.0f, -1e8f, 3.0f};
            vals[r][e] = pat[(r + e) % N] * (1.0f + 0.125f * (float)e);
        }
    for (int mode = 0; mode < 2; mode++) {
        specdec_err e = {0};
        sd_backend_opts o = {.n_threads = 1};
        sd_tp_opts to = {.n = N, .rank_backend = "cpu", .reduce = mode ? SD_TP_REDUCE_RING : SD_TP_REDUCE_GATHER};
        sd_backend *b = NULL;
        CHECK(sd_backend_tp_new(&to, &o, &b, &e) == SPECDEC_OK, "tp backend: %s", e.msg);
        if (!b) return;
        const void *host[N];
        for (int r = 0; r < N; r++) host[r] = vals[r];
        const void *src = NULL;
        float *x = NULL, *scr = NULL;
        CHECK(b->i->upload_ranks(b, host, sizeof vals[0], "partials", &src, &e) == SPECDEC_OK, "upload_ranks: %s", e.msg);
        CHECK(b->i->alloc(b, sizeof vals[0], "x", (void **)&x, &e) == SPECDEC_OK, "alloc");
        CHECK(b->i->alloc(b, sizeof vals, "scratch", (void **)&scr, &e) == SPECDEC_OK, "alloc");
        CHECK(b->i->copy(b, x, src, sizeof vals[0], &e) == SPECDEC_OK, "copy: %s", e.msg);
        CHECK(b->i->allreduce(b, x, n, scr) == SPECDEC_OK, "allreduce: %s", b->err.msg);
        float got[n], want[n];
        CHECK(b->i->read(b, got, x, sizeof got, &e) == SPECDEC_OK, "read");
        for (int el = 0; el < n; el++) {
            if (!mode) {
                float a = vals[0][el];
                for (int r = 1; r < N; r++) a = a + vals[r][el];
                want[el] = a;
            } else {
                int k = 0;
                for (; k < N; k++) { size_t k0, k1; sd_comm_ring_chunk(n, N, k, &k0, &k1); if ((size_t)el >= k0 && (size_t)el < k1) break; }
                float a = vals[(k + 1) % N][el];
                for (int step = 2; step <= N; step++) a = a + vals[(k + step) % N][el];
                want[el] = a;
            }
        }
        CHECK(!memcmp(got, want, sizeof got), "%s: the sums are not in the documented order", mode ? "ring" : "gather");
        sd_backend_free(b);
    }
    /* the data makes the order matter (otherwise the checks above prove nothing) */
    float g = ((vals[0][0] + vals[1][0]) + vals[2][0]) + vals[3][0];
    float rg = ((vals[1][0] + vals[2][0]) + vals[3][0]) + vals[0][0];
    CHECK(memcmp(&g, &rg, sizeof g) != 0, "test data: the two orders agree (%g)", g);
}

static specdec_ctx *mk_ctx(specdec_model *m, int tp, const char *be, int reduce, specdec_err *e) {
    specdec_ctx_params cp = specdec_ctx_default_params();
    cp.n_ctx = 256; cp.n_threads = 1; cp.backend = be; cp.tp = tp; cp.tp_reduce = reduce;
    cp.precision = SPECDEC_PRECISION_F32;   /* the tolerances below are f32 rounding bounds */
    specdec_ctx *c = NULL;
    if (specdec_ctx_init(m, &cp, &c, e) != SPECDEC_OK) return NULL;
    return c;
}

static float max_abs_diff(const float *a, const float *b, size_t n) {
    float d = 0;
    for (size_t i = 0; i < n; i++) { float x = fabsf(a[i] - b[i]); if (!(x <= d)) d = x; }
    return d;
}

/* Logits of the prompt on ctx (rows n_prompt x V). */
static float *logits_of(specdec_ctx *c, const int32_t *p, int np, int V, specdec_err *e) {
    float *lg = malloc(sizeof(float) * (size_t)np * V);
    if (specdec_ctx_truncate(c, 0, e) != SPECDEC_OK || specdec_ctx_forward(c, p, np, lg, NULL, e) != SPECDEC_OK) {
        free(lg);
        return NULL;
    }
    return lg;
}

/* The sharded forward against the unsharded one. The only difference is the order of additions in
 * the o_proj and down_proj sums (a rank's partial, then the partials), two reassociated f32 sums per
 * layer carried to the logits by the residual stream. Tolerance: twice the gap between two valid
 * orders of the unsharded model (the scalar reference ops vs the SIMD ops), or, when larger, a budget
 * of 16 eps of the largest logit per layer. */
static void check_forward(specdec_model *m, const char *what, const int *ns, int nn, const int32_t *p, int np) {
    specdec_err e = {0};
    specdec_model_info in;
    specdec_model_get_info(m, &in);
    int V = in.vocab_size;
    specdec_ctx *plain = mk_ctx(m, 0, "cpu", 0, &e);
    CHECK(plain, "%s plain ctx: %s", what, e.msg);
    specdec_ctx_params rp = specdec_ctx_default_params();
    rp.n_ctx = 256; rp.n_threads = 1; rp.backend = "cpu"; rp.reference_kernels = true;
    specdec_ctx *ref = NULL;
    CHECK(specdec_ctx_init(m, &rp, &ref, &e) == SPECDEC_OK, "%s reference ctx: %s", what, e.msg);
    if (!plain || !ref) { specdec_ctx_free(plain); specdec_ctx_free(ref); return; }
    float *a = logits_of(plain, p, np, V, &e), *r = logits_of(ref, p, np, V, &e);
    CHECK(a && r, "%s: forward: %s", what, e.msg);
    if (!a || !r) { free(a); free(r); specdec_ctx_free(plain); specdec_ctx_free(ref); return; }
    size_t NV = (size_t)np * V;
    float big = 0;
    for (size_t i = 0; i < NV; i++) if (fabsf(a[i]) > big) big = fabsf(a[i]);
    float orders = max_abs_diff(a, r, NV);
    float budget = 16.0f * (float)in.n_layers * FLT_EPSILON * big;
    float tol = 2 * orders > budget ? 2 * orders : budget;
    for (int k = 0; k < nn; k++) {
        const char *be = k % 2 ? "cpu-sim" : "cpu";   /* both rank backends */
        specdec_ctx *t = mk_ctx(m, ns[k], be, 0, &e);
        CHECK(t, "%s tp=%d (%s ranks): %s", what, ns[k], be, e.msg);
        if (!t) continue;
        float *b = logits_of(t, p, np, V, &e);
        CHECK(b, "%s tp=%d forward: %s", what, ns[k], e.msg);
        if (b) {
            float d = max_abs_diff(a, b, NV);
            fprintf(stderr, "%s tp=%d: max |sharded - unsharded| %.3g, tolerance %.3g (two orders unsharded: %.3g, "
                    "largest logit %.3g)\n", what, ns[k], d, tol, orders, big);
            CHECK(d <= tol, "%s tp=%d: logits differ by %g > %g", what, ns[k], d, tol);
            CHECK(d > 0 || ns[k] == 1, "%s tp=%d: bitwise equal logits: is the forward sharded at all?", what, ns[k]);
            /* determinism: the same run again gives the same bits */
            float *b2 = logits_of(t, p, np, V, &e);
            CHECK(b2 && !memcmp(b, b2, sizeof(float) * NV), "%s tp=%d: two runs differ", what, ns[k]);
            free(b2);
        }
        free(b);
        specdec_tp_stats ts;
        specdec_ctx_tp_stats(t, &ts);
        CHECK(ts.ranks == ns[k] && ts.comm && !strcmp(ts.comm, "sim") && ts.allreduce_calls > 0,
              "%s tp=%d stats: ranks %d comm %s calls %llu", what, ns[k], ts.ranks, ts.comm ? ts.comm : "-",
              (unsigned long long)ts.allreduce_calls);
        /* greedy tokens equal */
        specdec_gen_params gp = specdec_gen_default_params();
        gp.ignore_eos = true; gp.max_tokens = 24;
        int32_t *x = NULL, *y = NULL; int nx = 0, ny = 0;
        specdec_ctx_truncate(plain, 0, &e);
        specdec_ctx_truncate(t, 0, &e);
        CHECK(specdec_generate(plain, NULL, p, np, &gp, &x, &nx, NULL, &e) == SPECDEC_OK, "generate: %s", e.msg);
        CHECK(specdec_generate(t, NULL, p, np, &gp, &y, &ny, NULL, &e) == SPECDEC_OK, "generate tp: %s", e.msg);
        CHECK(nx == ny && nx > 0 && !memcmp(x, y, sizeof *x * (size_t)nx), "%s tp=%d: greedy tokens differ", what, ns[k]);
        free(x); free(y);
        specdec_ctx_free(t);
    }
    free(a); free(r);
    specdec_ctx_free(plain);
    specdec_ctx_free(ref);
}

/* speculative == classic on a tensor-parallel context, and the probe's verdict. */
static void check_spec_t(specdec_model *m, int tp, const char *be, int reduce, specdec_drafter *d, const char *dn,
                         const int32_t *p, int np, bool expect_spec, float temp) {
    specdec_err e = {0};
    specdec_ctx *c = mk_ctx(m, tp, be, reduce, &e);
    CHECK(c, "tp=%d: %s", tp, e.msg);
    if (!c) return;
    specdec_gen_params gp = specdec_gen_default_params();
    gp.ignore_eos = true;
    gp.sampling.temperature = temp;   /* > 0: the seeded sampler, whose output equals classic's too */
    gp.sampling.seed = 11;
    long long acc = 0;
    for (int K = 2; K <= 8; K += 3) {
        gp.max_tokens = 30 + K;
        int32_t *ref = NULL, *out = NULL; int nref = 0, nout = 0;
        CHECK(specdec_generate(c, NULL, p, np, &gp, &ref, &nref, NULL, &e) == SPECDEC_OK, "classic: %s", e.msg);
        specdec_spec_params sp = specdec_spec_default_params();
        sp.block_size = K; sp.quiet = true;
        specdec_spec_stats ss;
        CHECK(specdec_spec_generate(c, d, NULL, p, np, &gp, &sp, &out, &nout, &ss, &e) == SPECDEC_OK, "spec: %s", e.msg);
        CHECK(nref == nout && nref > 0 && !memcmp(ref, out, sizeof *ref * (size_t)nref),
              "tp=%d %s reduce %d %s K=%d: speculative != classic", tp, be, reduce, dn, K);
        CHECK(ss.speculated == expect_spec, "tp=%d %s reduce %d %s K=%d: speculated %d (probe %d: %s), expected %d", tp,
              be, reduce, dn, K, ss.speculated, ss.probe, ss.note, expect_spec);
        acc += ss.accepted;
        free(ref); free(out);
    }
    if (expect_spec) CHECK(acc > 0, "tp=%d %s: no draft accepted: the identity proves little", tp, dn);
    specdec_ctx_free(c);
}
static void check_spec(specdec_model *m, int tp, const char *be, int reduce, specdec_drafter *d, const char *dn,
                       const int32_t *p, int np, bool expect_spec) {
    check_spec_t(m, tp, be, reduce, d, dn, p, np, expect_spec, 0.0f);
}

int main(void) {
    test_plan();
    test_slices();
    test_allreduce_order();

    char t1[64], t2[64], t3[64];
    if (!tm_mkdtemp(t1, sizeof t1) || !tm_mkdtemp(t2, sizeof t2) || !tm_mkdtemp(t3, sizeof t3)) {
        CHECK(0, "mkdtemp");
        return check_finish("test_tp");
    }
    specdec_err e = {0};
    /* model A: 4 heads / 2 KV heads (N = 4 replicates each KV head on 2 ranks); model B: 8 / 4, I 128 (N = 8) */
    ts_dims da = ts_default(), db = ts_default();
    db.nh = 8; db.nkv = 4; db.hd = 8;
    int no_eos[1] = {0};
    CHECK(ts_write_pair(t1, t3, &da, 7, no_eos, 0) == 0 && ts_write_pair(t2, NULL, &db, 9, no_eos, 0) == 0, "write models");
    specdec_model *ma = NULL, *mb = NULL;
    CHECK(specdec_model_load(t1, NULL, &ma, &e) == SPECDEC_OK, "load A: %s", e.msg);
    CHECK(specdec_model_load(t2, NULL, &mb, &e) == SPECDEC_OK, "load B: %s", e.msg);
    int32_t prompt[40];
    uint64_t s = 77;
    for (int i = 0; i < 40; i++) prompt[i] = (int32_t)((uint64_t)((tm_rand(&s) + 1.0f) * 63.0f) % 128);
    if (ma && mb) {
        int na[] = {1, 2, 4}, nb[] = {2, 4, 8};
        check_forward(ma, "tiny 4/2", na, 3, prompt, 20);
        check_forward(mb, "tiny 8/4", nb, 3, prompt, 20);

        /* --tp-reduce none skips the sums (a timing arm): the logits must then be far off, while the
         * counter still counts the all-reduces it skipped */
        {
            specdec_model_info ia;
            specdec_model_get_info(ma, &ia);
            specdec_ctx *pl = mk_ctx(ma, 0, "cpu", 0, &e), *nr = mk_ctx(ma, 2, "cpu", SD_TP_REDUCE_NONE, &e);
            CHECK(pl && nr, "reduce none ctx: %s", e.msg);
            float *a = pl ? logits_of(pl, prompt, 8, ia.vocab_size, &e) : NULL;
            float *b = nr ? logits_of(nr, prompt, 8, ia.vocab_size, &e) : NULL;
            CHECK(a && b && max_abs_diff(a, b, (size_t)8 * ia.vocab_size) > 1e-2f, "reduce none: logits close to the true ones");
            specdec_tp_stats ts;
            specdec_ctx_tp_stats(nr, &ts);
            CHECK(ts.allreduce_calls == 2 * 2, "reduce none: %llu all-reduces counted for 2 layers", (unsigned long long)ts.allreduce_calls);
            free(a); free(b);
            specdec_ctx_free(pl); specdec_ctx_free(nr);
        }

        specdec_drafter *mtp = NULL, *ng = NULL;
        CHECK(specdec_drafter_init_mtp(ma, &mtp, &e) == SPECDEC_OK, "mtp: %s", e.msg);
        CHECK(specdec_drafter_init_ngram(0, &ng, &e) == SPECDEC_OK, "ngram: %s", e.msg);
        for (int n = 2; n <= 4; n *= 2) {
            check_spec(ma, n, "cpu-sim", SD_TP_REDUCE_GATHER, mtp, "mtp", prompt, 17, true);
            check_spec(ma, n, "cpu", SD_TP_REDUCE_GATHER, ng, "ngram", prompt, 17, true);
        }
        /* the ring at N = 2 adds two numbers, which commutes: batch-invariant, speculation runs;
         * at N = 4 a row's order of additions depends on T, the probe sees it and declines */
        check_spec(ma, 2, "cpu", SD_TP_REDUCE_RING, mtp, "mtp ring", prompt, 17, true);
        check_spec(ma, 4, "cpu", SD_TP_REDUCE_RING, mtp, "mtp ring", prompt, 17, false);
        /* seeded sampling, and a draft model (its own plan, on the same ranks) */
        check_spec_t(ma, 2, "cpu-sim", SD_TP_REDUCE_GATHER, mtp, "mtp seeded", prompt, 17, true, 0.8f);
        specdec_drafter *dm = NULL;
        CHECK(specdec_drafter_init_model(ma, t3, &dm, &e) == SPECDEC_OK, "draft model: %s", e.msg);
        if (dm) check_spec(ma, 2, "cpu-sim", SD_TP_REDUCE_GATHER, dm, "draft model", prompt, 17, true);
        specdec_drafter_free(dm);
        specdec_drafter_free(mtp);
        specdec_drafter_free(ng);

        /* bad N: refused with the shape named, nothing crashes */
        CHECK(!mk_ctx(ma, 3, "cpu", 0, &e) && e.status == SPECDEC_ERR_INVALID_ARG && strstr(e.msg, "4 attention heads"),
              "tp=3 on 4 heads: %s", e.msg);
        CHECK(!mk_ctx(ma, 8, "cpu", 0, &e) && strstr(e.msg, "4 attention heads"), "tp=8 on 4 heads: %s", e.msg);
        CHECK(!mk_ctx(ma, 9, "cpu", 0, &e) && strstr(e.msg, "1..8"), "tp=9: %s", e.msg);
        CHECK(!mk_ctx(ma, -1, "cpu", 0, &e) && e.status == SPECDEC_ERR_INVALID_ARG, "tp=-1: %s", e.msg);
        char buf[512];
        CHECK(specdec_tp_describe(ma, 2, buf, sizeof buf, &e) == SPECDEC_OK && strstr(buf, "2 of 4 heads"), "describe: %s", buf);
        CHECK(specdec_tp_describe(ma, 3, buf, sizeof buf, &e) == SPECDEC_ERR_INVALID_ARG, "describe 3");
    }
    specdec_model_free(ma);
    specdec_model_free(mb);
    tm_rm_rf(t1);
    tm_rm_rf(t2);
    tm_rm_rf(t3);

    /* the embedded model at N = 2 (4-bit, groups of 64: the column slices hold 6 and 5 groups) */
    specdec_model *mk = NULL;
    if (specdec_model_load(check_path("models/qwen3-kernel"), NULL, &mk, &e) == SPECDEC_OK) {
        int n2[] = {2};
        int32_t kp[8] = {1, 322, 4080, 77, 11, 25, 9001, 13};
        check_forward(mk, "qwen3-kernel", n2, 1, kp, 8);
        specdec_model_free(mk);
    } else {
        CHECK(0, "load models/qwen3-kernel: %s", e.msg);
    }

    /* the NCCL communicator: a clear error without a device (or without CUDA built in), no crash */
    sd_comm *cm = NULL;
    int dev0[1] = {0};
    specdec_status st = sd_comm_nccl_new(NULL, 1, dev0, &cm, &e);
    if (sd_comm_cuda_devices() == 0) {
        CHECK(st == SPECDEC_ERR_UNSUPPORTED && !cm && (strstr(e.msg, "device") || strstr(e.msg, "not built")),
              "nccl without a device: status %d: %s", st, e.msg);
        fprintf(stderr, "nccl communicator here: %s\n", e.msg);
        /* --tp 2 --backend cuda: says how many devices it needs and found */
        sd_backend_opts o = {0};
        sd_tp_opts to = {.n = 2, .rank_backend = "cuda"};
        sd_backend *b = NULL;
        CHECK(sd_backend_tp_new(&to, &o, &b, &e) == SPECDEC_ERR_UNSUPPORTED && !b && strstr(e.msg, "needs 2 CUDA device(s)") &&
              strstr(e.msg, "sees 0"), "tp 2 on cuda without GPUs: %s", e.msg);
    } else if (cm) {
        cm->i->free(cm);
    }
    return check_finish("test_tp");
}
