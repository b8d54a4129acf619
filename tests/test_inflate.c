/* test_inflate.c: specdec_inflate preserves the function. Tiny source models (f32, bf16, 4- and
 * 8-bit; tied and untied; with an mtp.* module) are inflated to bigger shapes (wider hidden and
 * MLP, more layers, a smaller GQA group (kv heads duplicated), a larger one, an odd one with a
 * padded kv head, one kv head per q head), with random and zero fill; then:
 * - the target's logits equal the source's within TOL x the largest logit, and its final hidden
 *   states are [h, 0]: the padded dims exactly 0, the rest within tolerance;
 * - the MTP module's logits (the reference step of mtp_ref.h, fed each model's own hidden states)
 *   equal the source's within the same tolerance;
 * - quantizing on the way (dense source, bits) equals inflating the quantizer's output;
 * - speculative decoding on an inflated pair equals classic decoding, token for token, and equals
 *   the source's tokens and drafter counters.
 * TOL: the differences left are f32 summation order over longer rows and the rms_norm_eps bound
 * of inflate_plan.c, eps*(H2/H - 1)/(2*ms): 4e-5 to 1e-4 here (eps 1e-6, H2/H 1.5 to 2.5, residual
 * mean squares from 0.013); measured 1e-5 to 4e-5 of the largest logit (0 when H is unchanged).
 * A broken padding or a norm left unscaled moves logits by far more: two planted defects must
 * exceed 10 x TOL in the same comparison (measured 3e-2 and 1.6e-1). */
#include "check.h"
#include "tiny_model.h"
#include "tiny_spec.h"
#include "mtp_ref.h"
#include <math.h>
#include <sys/stat.h>

#define TOL 2e-4
#define NT 12   /* positions compared */

static char root[64];
static int n_dirs;

/* A fresh directory name under root. */
static const char *fresh(char *buf, size_t n, const char *tag) {
    snprintf(buf, n, "%s/%02d-%s", root, n_dirs++, tag);
    return buf;
}

typedef struct shape { int H, I, L, nh, nkv; } shape;

static specdec_status inflate_to(const char *in, const char *out, shape s, bool zero, specdec_inflate_tie tie, int bits,
                                 bool qmtp, specdec_err *e) {
    specdec_inflate_params p = specdec_inflate_default_params();
    p.hidden_size = s.H; p.intermediate_size = s.I; p.n_layers = s.L; p.n_heads = s.nh; p.n_kv_heads = s.nkv;
    p.fill_zero = zero;
    p.tie = tie;
    p.bits = bits;
    p.group_size = bits ? 32 : 0;
    p.quantize_mtp = qmtp;
    p.n_threads = 2;
    p.seed = 7;
    return specdec_inflate(in, out, &p, e);
}

typedef struct run { specdec_model *m; float *logits, *hidden, *mtp; int V, H; } run;

/* Logits and hidden states of model dir over toks; MTP logits for entries 0..NT-2 when present. */
static int run_model(const char *dir, const int32_t *toks, run *r) {
    specdec_err e = {0};
    memset(r, 0, sizeof *r);
    if (specdec_model_load(dir, NULL, &r->m, &e)) { CHECK(0, "load %s: %s", dir, e.msg); return -1; }
    r->V = r->m->cfg.vocab_size;
    r->H = r->m->cfg.hidden_size;
    specdec_ctx_params cp = specdec_ctx_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 2;
    cp.kv_dtype = SPECDEC_KV_F32;   /* both models' values compared within float rounding: an f32 cache */
    specdec_ctx *c = NULL;
    r->logits = malloc(sizeof(float) * NT * (size_t)r->V);
    r->hidden = malloc(sizeof(float) * NT * (size_t)r->H);
    int rc = specdec_ctx_init(r->m, &cp, &c, &e) || specdec_ctx_forward(c, toks, NT, r->logits, r->hidden, &e) ? -1 : 0;
    CHECK(rc == 0, "forward %s: %s", dir, e.msg);
    specdec_ctx_free(c);
    if (rc || !r->m->w.mtp) return rc;
    mtp_ref mr;
    float *mo = malloc(sizeof(float) * (size_t)r->H);
    r->mtp = malloc(sizeof(float) * (NT - 1) * (size_t)r->V);
    if (mtp_ref_init(&mr, r->m, 64, &e)) { CHECK(0, "mtp reference: %s", e.msg); rc = -1; }
    for (int i = 0; rc == 0 && i < NT - 1; i++) {
        mtp_ref_step(&mr, toks[i + 1], r->hidden + (size_t)i * r->H, i, mo);
        memcpy(r->mtp + (size_t)i * r->V, mr.logits, sizeof(float) * (size_t)r->V);
    }
    mtp_ref_free(&mr);
    free(mo);
    return rc;
}

static void run_free(run *r) {
    specdec_model_free(r->m);
    free(r->logits); free(r->hidden); free(r->mtp);
    memset(r, 0, sizeof *r);
}

/* Largest |a - b| over n values, and the largest |a| into *scale. */
static double maxdiff(const float *a, const float *b, size_t n, double *scale) {
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(fabs((double)a[i] - b[i]) <= d)) d = isnan(b[i]) ? INFINITY : fabs((double)a[i] - b[i]);
        if (fabs(a[i]) > s) s = fabs(a[i]);
    }
    *scale = s > 1 ? s : 1;
    return d;
}

static const int32_t toks[NT] = {3, 17, 42, 5, 60, 8, 33, 21, 1, 50, 12, 44};

/* Compare ref_dir's model with inf_dir's: logits, hidden states, MTP logits. Returns the worst
 * relative logit difference. `expect_fail`: a planted defect, which must exceed TOL. */
static double compare(const char *ref_dir, const char *inf_dir, const char *label, bool expect_fail) {
    run a, b;
    if (run_model(ref_dir, toks, &a) || run_model(inf_dir, toks, &b)) { run_free(&a); run_free(&b); return INFINITY; }
    double sc, worst;
    const double dl = maxdiff(a.logits, b.logits, NT * (size_t)a.V, &sc) / sc;
    worst = dl;
    int nonzero = 0;
    double dh = 0, hs = 1;
    for (int t = 0; t < NT; t++) {
        for (int j = a.H; j < b.H; j++) nonzero += b.hidden[(size_t)t * b.H + j] != 0.0f;
        double s1;
        double d1 = maxdiff(a.hidden + (size_t)t * a.H, b.hidden + (size_t)t * b.H, (size_t)a.H, &s1);
        if (d1 / s1 > dh) { dh = d1 / s1; hs = s1; }
    }
    double dm = 0;
    if (a.mtp && b.mtp) {
        double s2;
        dm = maxdiff(a.mtp, b.mtp, (NT - 1) * (size_t)a.V, &s2) / s2;
        if (dm > worst) worst = dm;
    }
    if (getenv("SD_VERBOSE"))
        fprintf(stderr, "%-44s logits %.2e  hidden %.2e (scale %.2f)  mtp %.2e\n", label, dl, dh, hs, dm);
    if (expect_fail) {
        CHECK(worst > 10 * TOL, "%s: a planted defect went unnoticed (worst %.2e)", label, worst);
    } else {
        CHECK(dl <= TOL, "%s: logits differ by %.3e of the largest", label, dl);
        CHECK(dh <= TOL, "%s: hidden states differ by %.3e", label, dh);
        CHECK(nonzero == 0, "%s: %d padded hidden dims are not exactly 0", label, nonzero);
        CHECK((a.mtp != NULL) == (b.mtp != NULL), "%s: mtp module present in both", label);
        CHECK(dm <= TOL, "%s: MTP logits differ by %.3e of the largest", label, dm);
        for (int t = 0; t < NT; t++) {
            int ia = 0, ib = 0;
            for (int v = 1; v < a.V; v++) {
                if (a.logits[(size_t)t * a.V + v] > a.logits[(size_t)t * a.V + ia]) ia = v;
                if (b.logits[(size_t)t * b.V + v] > b.logits[(size_t)t * b.V + ib]) ib = v;
            }
            CHECK(ia == ib, "%s: argmax at position %d: %d vs %d", label, t, ia, ib);
        }
    }
    run_free(&a);
    run_free(&b);
    return worst;
}

/* A copy of model dir `in` in `out` where tensor `name` is changed: element `idx` set to `val`
 * (idx >= 0), or every element multiplied by `val` (idx < 0). F32 tensors only. */
static void plant(const char *in, const char *out, const char *name, long idx, float val) {
    sd_st_set *s = NULL;
    specdec_err e = {0};
    mkdir(out, 0755);
    CHECK(sd_st_open_dir(in, &s, &e) == SPECDEC_OK, "open %s: %s", in, e.msg);
    if (!s) return;
    sd_st_writer *w = sd_st_writer_new();
    float *buf = NULL;
    for (int i = 0; i < sd_st_count(s); i++) {
        const sd_st_tensor *t = sd_st_at(s, i);
        const void *data = t->data;
        if (!strcmp(t->name, name)) {
            CHECK(t->dtype == SPECDEC_DTYPE_F32, "plant: %s is F32", name);
            buf = malloc((size_t)t->nbytes);
            memcpy(buf, t->data, (size_t)t->nbytes);
            if (idx >= 0) buf[idx] = val;
            else for (size_t k = 0; k < t->nbytes / 4; k++) buf[k] *= val;
            data = buf;
        }
        sd_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, data, &e);
    }
    CHECK(buf != NULL, "plant: tensor %s found", name);
    CHECK(sd_st_writer_write(w, out, 0, &e) == SPECDEC_OK, "plant write: %s", e.msg);
    sd_st_writer_free(w);
    free(buf);
    sd_st_close(s);
    char path[512], text[8192];
    snprintf(path, sizeof path, "%s/config.json", in);
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(text, 1, sizeof text, f) : 0;
    if (f) fclose(f);
    CHECK(n > 0 && n < sizeof text && tm_write_file(out, "config.json", text, n) == 0, "copy config.json");
}

static void make_source(const char *dir, tm_dims d, uint64_t seed) {
    mkdir(dir, 0755);
    CHECK(tm_write_model(dir, &d, seed, NULL, NULL, NULL, 0) == 0, "write source %s", dir);
}

static void quantize(const char *in, const char *out, int bits, bool qmtp) {
    specdec_quantize_params q = specdec_quantize_default_params();
    q.bits = bits;
    q.group_size = 32;
    q.quantize_mtp = qmtp;
    specdec_err e = {0};
    CHECK(specdec_quantize(in, out, &q, &e) == SPECDEC_OK, "quantize %s: %s", in, e.msg);
}

/* Inflate src to shape s (options as inflate_to) and compare with ref (src when NULL). */
static void check_case(const char *src, const char *ref, shape s, bool zero, specdec_inflate_tie tie, int bits, bool qmtp,
                       const char *label) {
    char out[256];
    specdec_err e = {0};
    fresh(out, sizeof out, "inf");
    specdec_status st = inflate_to(src, out, s, zero, tie, bits, qmtp, &e);
    CHECK(st == SPECDEC_OK, "%s: inflate: %s", label, e.msg);
    if (st == SPECDEC_OK) compare(ref ? ref : src, out, label, false);
}

/* Speculative decoding on an inflated tiny_spec pair: equal to classic, and to the source. */
static void check_spec(void) {
    char src[256], out[256];
    fresh(src, sizeof src, "spec-src");
    fresh(out, sizeof out, "spec-inf");
    mkdir(src, 0755);
    ts_dims d = ts_default();
    CHECK(ts_write_pair(src, NULL, &d, 5, NULL, 0) == 0, "write spec pair");
    specdec_err e = {0};
    shape s = {128, 192, 3, 8, 8};   /* q group 2 -> 1: each source kv head twice */
    CHECK(inflate_to(src, out, s, false, SPECDEC_INFLATE_TIE_KEEP, 0, false, &e) == SPECDEC_OK, "inflate spec pair: %s", e.msg);
    int32_t prompt[6] = {5, 9, 14, 3, 77, 21};
    int32_t *ids[3] = {NULL, NULL, NULL};
    int n[3] = {0, 0, 0};
    specdec_spec_stats ss[2];
    const char *dirs[2] = {src, out};
    for (int k = 0; k < 2; k++) {
        specdec_model *m = NULL;
        specdec_ctx *c = NULL;
        specdec_drafter *dr = NULL;
        specdec_ctx_params cp = specdec_ctx_default_params();
        cp.n_ctx = 128;
        cp.n_threads = 2;
        specdec_gen_params gp = specdec_gen_default_params();
        gp.max_tokens = 40;
        gp.ignore_eos = true;
        specdec_spec_params sp = specdec_spec_default_params();
        sp.block_size = 4;
        sp.quiet = true;
        if (specdec_model_load(dirs[k], NULL, &m, &e) || specdec_ctx_init(m, &cp, &c, &e) ||
            specdec_drafter_init_mtp(m, &dr, &e) ||
            specdec_spec_generate(c, dr, NULL, prompt, 6, &gp, &sp, &ids[k], &n[k], &ss[k], &e)) {
            CHECK(0, "speculative run on %s: %s", dirs[k], e.msg);
        } else if (k == 1) {
            specdec_gen_stats gs;
            CHECK(specdec_generate(c, NULL, prompt, 6, &gp, &ids[2], &n[2], &gs, &e) == SPECDEC_OK, "classic: %s", e.msg);
        }
        specdec_drafter_free(dr);
        specdec_ctx_free(c);
        specdec_model_free(m);
    }
    CHECK(n[0] == 40 && n[1] == 40 && n[2] == 40, "token counts %d %d %d", n[0], n[1], n[2]);
    CHECK(ss[1].speculated && ss[1].drafted > 0, "the inflated pair speculated (drafted %lld)", (long long)ss[1].drafted);
    CHECK(n[1] == n[2] && ids[1] && ids[2] && !memcmp(ids[1], ids[2], sizeof(int32_t) * (size_t)n[1]), "inflated: speculative == classic");
    CHECK(n[0] == n[1] && ids[0] && ids[1] && !memcmp(ids[0], ids[1], sizeof(int32_t) * (size_t)n[0]), "inflated tokens == source tokens");
    CHECK(ss[0].drafted == ss[1].drafted && ss[0].accepted == ss[1].accepted && ss[0].rounds == ss[1].rounds,
          "drafter counters: source %lld/%lld in %lld rounds, inflated %lld/%lld in %lld", (long long)ss[0].accepted,
          (long long)ss[0].drafted, (long long)ss[0].rounds, (long long)ss[1].accepted, (long long)ss[1].drafted, (long long)ss[1].rounds);
    if (getenv("SD_VERBOSE")) fprintf(stderr, "spec: accepted %lld of %lld drafts, tau %.2f\n", (long long)ss[1].accepted, (long long)ss[1].drafted, ss[1].tau);
    for (int k = 0; k < 3; k++) free(ids[k]);
}

int main(void) {
    if (!tm_mkdtemp(root, sizeof root)) { CHECK(0, "mkdtemp"); return check_finish("test_inflate"); }
    char f32u[256], b16t[256], q4t[256], q4tm[256], q8u[256], b16u[256], tmp[256], tmp2[256];
    /* sources: nh 6 / nkv 2 (group 3), head_dim 32, H 64, I 96, 2 layers, an mtp module */
    tm_dims d = {64, 64, 96, 2, 6, 2, 32, 1, false, SPECDEC_DTYPE_F32};
    make_source(fresh(f32u, sizeof f32u, "f32-untied"), d, 3);
    d.dt = SPECDEC_DTYPE_BF16;
    d.tied = true;
    make_source(fresh(b16t, sizeof b16t, "bf16-tied"), d, 4);
    d.tied = false;
    make_source(fresh(b16u, sizeof b16u, "bf16-untied"), d, 5);
    quantize(b16t, fresh(q4t, sizeof q4t, "q4-tied"), 4, false);      /* dense mtp, as the shipped pair */
    quantize(b16t, fresh(q4tm, sizeof q4tm, "q4-tied-qmtp"), 4, true);
    quantize(b16u, fresh(q8u, sizeof q8u, "q8-untied"), 8, true);

    const shape A = {128, 160, 3, 8, 4};     /* group 3 -> 2: kv heads duplicated; an extra layer */
    const shape B = {96, 128, 2, 12, 2};     /* group 3 -> 6 */
    const shape C = {160, 96, 4, 9, 3};      /* group 3 -> 3, a padded kv head; I unchanged; 2 extra layers */
    const shape D = {64, 96, 2, 10, 10};     /* one kv head per q head: three copies of each; H unchanged */
    const specdec_inflate_tie KEEP = SPECDEC_INFLATE_TIE_KEEP, UNTIED = SPECDEC_INFLATE_UNTIED;
    check_case(f32u, NULL, A, false, KEEP, 0, false, "f32 untied -> A, random fill");
    check_case(f32u, NULL, A, true, KEEP, 0, false, "f32 untied -> A, zero fill");
    check_case(f32u, NULL, D, false, KEEP, 0, false, "f32 untied -> D");
    check_case(b16t, NULL, B, false, KEEP, 0, false, "bf16 tied -> B (tied)");
    check_case(b16t, NULL, B, false, UNTIED, 0, false, "bf16 tied -> B untied");
    check_case(b16u, NULL, C, false, KEEP, 0, false, "bf16 untied -> C");
    check_case(q4t, NULL, A, false, KEEP, 0, false, "q4 tied (bf16 mtp) -> A");
    check_case(q4t, NULL, C, true, UNTIED, 0, false, "q4 tied -> C untied, zero fill");
    check_case(q8u, NULL, B, false, KEEP, 0, false, "q8 untied (q8 mtp) -> B");
    check_case(q8u, NULL, D, false, KEEP, 0, false, "q8 untied -> D");
    /* quantized on the way == inflating the quantizer's output */
    check_case(b16t, q4t, A, false, KEEP, 4, false, "bf16 tied -> A quantized 4-bit");
    check_case(b16u, q8u, C, false, KEEP, 8, true, "bf16 untied -> C quantized 8-bit, mtp too");
    check_case(q4t, q4tm, B, false, KEEP, 0, true, "q4 tied, mtp quantized on the way -> B");

    /* planted defects must fail the same comparison: a non-zero padded row of an output
     * projection (the residual stream's padding), and a norm left unscaled */
    const specdec_err e0 = {0};
    specdec_err e = e0;
    CHECK(inflate_to(f32u, fresh(tmp, sizeof tmp, "defect-base"), A, false, KEEP, 0, false, &e) == SPECDEC_OK, "inflate: %s", e.msg);
    plant(tmp, fresh(tmp2, sizeof tmp2, "defect-row"), "model.layers.0.self_attn.o_proj.weight", (long)A.nh * 32 * 64 + 5, 0.5f);
    compare(f32u, tmp2, "planted: padded o_proj row 64 non-zero", true);
    plant(tmp, fresh(tmp2, sizeof tmp2, "defect-norm"), "model.layers.1.input_layernorm.weight", -1, (float)sqrt(128.0 / 64.0));
    compare(f32u, tmp2, "planted: input_layernorm of layer 1 unscaled", true);

    check_spec();
    if (!getenv("SD_KEEP")) tm_rm_rf(root);
    return check_finish("test_inflate");
}
