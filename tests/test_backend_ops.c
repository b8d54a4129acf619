/* test_backend_ops.c: every op of every backend built into this binary, against the scalar
 * reference (src/cpu/ops_ref.c, double accumulation), over many shapes: odd sizes, every weight
 * kind (f32 / f16 / bf16, affine 4 and 8 bit with groups 32 / 64 / 128), T = 1..64, several KV
 * dtypes and positions. The backends under test are the CPU backend at each SIMD level this machine
 * runs and, where a GPU is present, the CUDA backend; inputs go through the interface (upload,
 * write, read), so a device backend is checked exactly as it is used.
 *
 * Tolerances are principled: a sum of n products computed in f32 in any order is within
 * gamma_n * sum|terms| of the exact value (gamma_n = n u / (1 - n u), u = 2^-24); a kernel passes
 * when its error is at most twice that bound (plus the rounding of the output itself). Anything
 * wrong in indexing, layout or dequantization is off by the size of a term, far above that.
 * Batch invariance is checked bitwise: a row computed inside T rows equals the row computed alone.
 * Choices (argmax, the seeded sampler, the walk) must match the host reference exactly. */
#include "check.h"
#include "backend/backend.h"
#include "cpu/ops.h"
#include "sample/sample.h"
#include "util/dtype.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_s = 0x9E3779B97F4A7C15ull;
static float frand(void) {   /* uniform [-1, 1) */
    rng_s ^= rng_s << 13; rng_s ^= rng_s >> 7; rng_s ^= rng_s << 17;
    return (float)((double)(rng_s >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}
static uint32_t urand(void) { rng_s ^= rng_s << 13; rng_s ^= rng_s >> 7; rng_s ^= rng_s << 17; return (uint32_t)(rng_s >> 32); }

static const double U = 1.0 / 16777216.0;
static double gamma_n(int n) { double nu = n * U; return nu / (1.0 - nu); }

/* ---- backend helpers ---- */
static sd_backend *B;
static const char *BN;
static specdec_err E;

static void *dev(size_t bytes) {
    void *p = NULL;
    if (B->i->alloc(B, bytes, "test buffer", &p, &E) != SPECDEC_OK) { CHECK(0, "%s: alloc %zu: %s", BN, bytes, E.msg); exit(1); }
    return p;
}
static void *dev_from(const void *host, size_t bytes) {
    void *p = dev(bytes);
    CHECK(B->i->write(B, p, host, bytes, &E) == SPECDEC_OK, "%s: write: %s", BN, E.msg);
    return p;
}
static void get(void *host, const void *p, size_t bytes) {
    CHECK(B->i->read(B, host, p, bytes, &E) == SPECDEC_OK, "%s: read: %s", BN, E.msg);
}
static void rel(void *p) { B->i->release(B, p); }
#define OP(name, call) CHECK((call) == SPECDEC_OK, "%s: %s failed: %s", BN, name, B->err.msg)

/* ---- weights ---- */
typedef struct wkind { specdec_dtype dt; int bits, group; const char *name; } wkind;
static const wkind KINDS[] = {
    {SPECDEC_DTYPE_F32, 0, 0, "f32"}, {SPECDEC_DTYPE_F16, 0, 0, "f16"}, {SPECDEC_DTYPE_BF16, 0, 0, "bf16"},
    {SPECDEC_DTYPE_BF16, 4, 32, "q4 g32 bf16"}, {SPECDEC_DTYPE_BF16, 4, 64, "q4 g64 bf16"},
    {SPECDEC_DTYPE_F16, 4, 128, "q4 g128 f16"}, {SPECDEC_DTYPE_F32, 4, 64, "q4 g64 f32"},
    {SPECDEC_DTYPE_BF16, 8, 64, "q8 g64 bf16"}, {SPECDEC_DTYPE_F16, 8, 32, "q8 g32 f16"},
};
#define NKINDS (int)(sizeof KINDS / sizeof KINDS[0])

typedef struct hmat { sd_mat m; void *w, *s, *b; } hmat;   /* a host matrix and its buffers */

static void hmat_make(hmat *h, const wkind *k, int rows, int cols) {
    memset(h, 0, sizeof *h);
    h->m = (sd_mat){.rows = rows, .cols = cols, .dtype = k->dt, .bits = k->bits, .group = k->group};
    size_t es = sd_dtype_size(k->dt);
    if (!k->bits) {
        float *f = malloc(sizeof(float) * (size_t)rows * cols);
        for (size_t i = 0; i < (size_t)rows * cols; i++) f[i] = frand();
        h->w = malloc(es * (size_t)rows * cols);
        sd_from_f32(k->dt, f, h->w, (size_t)rows * cols);
        free(f);
    } else {
        size_t nw = (size_t)rows * cols * k->bits / 32, ng = (size_t)rows * cols / k->group;
        uint32_t *w = malloc(4 * nw);
        for (size_t i = 0; i < nw; i++) w[i] = urand();
        float *s = malloc(sizeof(float) * ng), *b = malloc(sizeof(float) * ng);
        for (size_t i = 0; i < ng; i++) { s[i] = 0.02f * (frand() + 1.5f) / (1 << (k->bits - 4)); b[i] = 0.1f * frand(); }
        h->w = w;
        h->s = malloc(es * ng); h->b = malloc(es * ng);
        sd_from_f32(k->dt, s, h->s, ng); sd_from_f32(k->dt, b, h->b, ng);
        free(s); free(b);
    }
    h->m.w = h->w; h->m.scales = h->s; h->m.biases = h->b;
}
static void hmat_free(hmat *h) { free(h->w); free(h->s); free(h->b); }

/* |W| . |x| for the tolerance, from the dequantized rows. */
static void abs_dot(const sd_mat *W, const float *x, int ldx, int T, double *out) {
    float *row = malloc(sizeof(float) * W->cols);
    for (int r = 0; r < W->rows; r++) {
        sd_mat_row_f32(W, r, row);
        for (int t = 0; t < T; t++) {
            double a = 0;
            for (int j = 0; j < W->cols; j++) a += fabs((double)row[j] * x[(size_t)t * ldx + j]);
            out[(size_t)t * W->rows + r] = a;
        }
    }
    free(row);
}

/* ---- matmul + embed + lm_argmax ---- */
static void test_matmul(void) {
    static const int shapes[][2] = {{1, 64}, {7, 128}, {33, 192}, {257, 384}, {100, 640}, {384, 768}, {5, 1024}};
    static const int dense_cols[] = {3, 17, 100, 385};
    static const int Ts[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 31, 33, 64};
    const sd_ops *ref = sd_ops_ref();
    int n_cases = 0;
    for (int ki = 0; ki < NKINDS; ki++) {
        const wkind *k = &KINDS[ki];
        sd_op_desc d = {.dtype = k->dt, .bits = k->bits, .group = k->group};
        if (!B->i->supports(B, SD_OP_MATMUL, &d)) { CHECK(0, "%s: matmul %s unsupported", BN, k->name); continue; }
        int nsh = (int)(sizeof shapes / sizeof shapes[0]) + (k->bits ? 0 : 4);
        for (int si = 0; si < nsh; si++) {
            int rows = si < 7 ? shapes[si][0] : 13 + si, cols = si < 7 ? shapes[si][1] : dense_cols[si - 7];
            if (k->bits && cols % k->group) continue;
            hmat h;
            hmat_make(&h, k, rows, cols);
            sd_mat Wd;
            CHECK(sd_be_upload_mat(B, &h.m, "W", &Wd, &E) == SPECDEC_OK, "%s: upload: %s", BN, E.msg);
            int T = Ts[(ki * 7 + si) % 12], Tmax = 64;
            int ldx = cols + 3, ldy = rows + 1;
            float *x = malloc(sizeof(float) * (size_t)Tmax * ldx);
            for (size_t i = 0; i < (size_t)Tmax * ldx; i++) x[i] = frand();
            float *xd = dev_from(x, sizeof(float) * (size_t)Tmax * ldx);
            float *yd = dev(sizeof(float) * (size_t)Tmax * ldy);
            float *y = malloc(sizeof(float) * (size_t)Tmax * ldy), *y1 = malloc(sizeof(float) * ldy);
            float *yr = malloc(sizeof(float) * (size_t)T * rows);
            double *ab = malloc(sizeof(double) * (size_t)T * rows);
            OP("matmul", B->i->matmul(B, &Wd, xd, ldx, yd, ldy, T));
            get(y, yd, sizeof(float) * (size_t)T * ldy);
            ref->matmul(&h.m, x, ldx, yr, rows, T, NULL);
            abs_dot(&h.m, x, ldx, T, ab);
            int bad = 0;
            for (int t = 0; t < T && bad < 3; t++)
                for (int r = 0; r < rows && bad < 3; r++) {
                    double e = fabs((double)y[(size_t)t * ldy + r] - yr[(size_t)t * rows + r]);
                    double tol = 2.0 * gamma_n(cols + 2) * ab[(size_t)t * rows + r] + 2 * U * fabs(yr[(size_t)t * rows + r]) + 1e-30;
                    if (!(e <= tol)) { bad++; CHECK(0, "%s: matmul %s %dx%d T=%d y[%d][%d] = %.9g, reference %.9g (tol %.3g)", BN, k->name, rows, cols, T, t, r, y[(size_t)t * ldy + r], yr[(size_t)t * rows + r], tol); }
                }
            /* batch invariance: every row of a T = 64 call equals that row alone, bitwise */
            OP("matmul", B->i->matmul(B, &Wd, xd, ldx, yd, ldy, Tmax));
            get(y, yd, sizeof(float) * (size_t)Tmax * ldy);
            for (int t = 0; t < Tmax; t += 9) {
                OP("matmul", B->i->matmul(B, &Wd, xd + (size_t)t * ldx, ldx, yd, ldy, 1));
                get(y1, yd, sizeof(float) * rows);
                CHECK(memcmp(y1, y + (size_t)t * ldy, sizeof(float) * rows) == 0, "%s: matmul %s %dx%d: row %d of T=64 differs from T=1", BN, k->name, rows, cols, t);
            }
            /* lm_argmax == argmax of matmul's rows, exactly */
            if (B->i->lm_argmax && rows > 1) {
                int32_t *idd = dev(sizeof(int32_t) * Tmax), ids[64];
                OP("lm_argmax", B->i->lm_argmax(B, &Wd, xd, ldx, T, NULL, idd));
                get(ids, idd, sizeof(int32_t) * T);
                OP("matmul", B->i->matmul(B, &Wd, xd, ldx, yd, ldy, T));
                get(y, yd, sizeof(float) * (size_t)T * ldy);
                for (int t = 0; t < T; t++)
                    CHECK(ids[t] == sd_argmax(y + (size_t)t * ldy, rows), "%s: lm_argmax %s row %d: %d, argmax of matmul %d", BN, k->name, t, ids[t], sd_argmax(y + (size_t)t * ldy, rows));
                rel(idd);
            }
            /* embed: rows gathered by backend ids, exactly sd_mat_row_f32 */
            if (B->i->supports(B, SD_OP_EMBED, &d)) {
                int32_t ids[5] = {0, rows - 1, rows / 2, rows / 3, 0};
                int32_t *idd = dev_from(ids, sizeof ids);
                float *ed = dev(sizeof(float) * 5 * (size_t)ldx), *e = malloc(sizeof(float) * 5 * (size_t)ldx), *er = malloc(sizeof(float) * cols);
                OP("embed", B->i->embed(B, &Wd, idd, 5, ed, ldx));
                get(e, ed, sizeof(float) * 5 * (size_t)ldx);
                for (int t = 0; t < 5; t++) {
                    sd_mat_row_f32(&h.m, ids[t], er);
                    CHECK(memcmp(er, e + (size_t)t * ldx, sizeof(float) * cols) == 0, "%s: embed %s row %d", BN, k->name, ids[t]);
                }
                rel(idd); rel(ed); free(e); free(er);
            }
            sd_be_unload_mat(B, &Wd);
            rel(xd); rel(yd);
            free(x); free(y); free(y1); free(yr); free(ab);
            hmat_free(&h);
            n_cases++;
        }
    }
    CHECK(n_cases > 40, "%s: only %d matmul cases ran", BN, n_cases);
}

/* ---- element-wise and normalization ---- */
static void test_elementwise(void) {
    const sd_ops *ref = sd_ops_ref();
    static const int ns[] = {1, 7, 16, 100, 384, 1027};
    for (int ni = 0; ni < 6; ni++) {
        int n = ns[ni], T = 1 + ni * 5, ld = n + 5, ldo = n + 2;
        float *x = malloc(sizeof(float) * (size_t)T * ld), *w = malloc(sizeof(float) * n), *o = malloc(sizeof(float) * (size_t)T * ld);
        float *r = malloc(sizeof(float) * (size_t)T * n), *xc = malloc(sizeof(float) * (size_t)T * n);
        for (size_t i = 0; i < (size_t)T * ld; i++) x[i] = 3.0f * frand();
        for (int i = 0; i < n; i++) w[i] = 1.0f + 0.2f * frand();
        for (int t = 0; t < T; t++) memcpy(xc + (size_t)t * n, x + (size_t)t * ld, sizeof(float) * n);
        float *xd = dev_from(x, sizeof(float) * (size_t)T * ld), *wd = dev_from(w, sizeof(float) * n), *od = dev(sizeof(float) * (size_t)T * ld);
        OP("rmsnorm", B->i->rmsnorm(B, od, ldo, xd, ld, wd, n, T, 1e-6f));
        get(o, od, sizeof(float) * (size_t)T * ldo);
        ref->rmsnorm(r, xc, w, n, T, 1e-6f);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < n; i++) {
                double e = fabs((double)o[(size_t)t * ldo + i] - r[(size_t)t * n + i]);
                CHECK(e <= (2 * gamma_n(n) + 8 * U) * fabs(r[(size_t)t * n + i]) + 1e-30, "%s: rmsnorm n=%d [%d][%d] %.9g vs %.9g", BN, n, t, i, o[(size_t)t * ldo + i], r[(size_t)t * n + i]);
            }
        /* in place, contiguous rows: the same values */
        float *cd = dev_from(xc, sizeof(float) * (size_t)T * n), *c = malloc(sizeof(float) * (size_t)T * n);
        OP("rmsnorm", B->i->rmsnorm(B, cd, n, cd, n, wd, n, T, 1e-6f));
        get(c, cd, sizeof(float) * (size_t)T * n);
        for (int t = 0; t < T; t++)
            CHECK(memcmp(c + (size_t)t * n, o + (size_t)t * ldo, sizeof(float) * n) == 0, "%s: rmsnorm in place differs (n=%d)", BN, n);
        /* silu_mul and add */
        float *u = malloc(sizeof(float) * (size_t)T * n);
        for (size_t i = 0; i < (size_t)T * n; i++) u[i] = 2.0f * frand();
        float *ud = dev_from(u, sizeof(float) * (size_t)T * n), *gd = dev_from(xc, sizeof(float) * (size_t)T * n);
        OP("silu_mul", B->i->silu_mul(B, gd, ud, n, T));
        get(c, gd, sizeof(float) * (size_t)T * n);
        memcpy(r, xc, sizeof(float) * (size_t)T * n);
        ref->silu_mul(r, u, n, T);
        for (size_t i = 0; i < (size_t)T * n; i++)
            CHECK(fabs((double)c[i] - r[i]) <= 8 * U * fabs(r[i]) + 1e-37, "%s: silu_mul [%zu] %.9g vs %.9g", BN, i, c[i], r[i]);
        OP("add", B->i->add(B, gd, ud, (size_t)T * n));
        get(o, gd, sizeof(float) * (size_t)T * n);
        for (size_t i = 0; i < (size_t)T * n; i++) CHECK(o[i] == c[i] + u[i], "%s: add [%zu]", BN, i);
        rel(xd); rel(wd); rel(od); rel(cd); rel(ud); rel(gd);
        free(x); free(w); free(o); free(r); free(xc); free(c); free(u);
    }
}

/* ---- RoPE, KV store, attention: positions from backend memory ---- */
static void test_attention(void) {
    const sd_ops *ref = sd_ops_ref();
    typedef struct { int nh, nkv, hd, pos0, T, n_ctx; } ac;
    static const ac cases[] = {{6, 2, 128, 0, 1, 64}, {6, 2, 128, 37, 4, 64}, {4, 4, 16, 200, 7, 256}, {8, 1, 64, 3, 16, 32},
                               {2, 2, 32, 511, 1, 512}, {6, 2, 128, 300, 33, 400}, {16, 8, 128, 1000, 2, 1100}};
    static const sd_kv_dtype_e kvs[] = {SD_KV_F32, SD_KV_BF16, SD_KV_F16};
    for (int ci = 0; ci < (int)(sizeof cases / sizeof cases[0]); ci++) {
        ac a = cases[ci];
        sd_kv_dtype_e kv = kvs[ci % 3];
        sd_attn_shape s = {a.nh, a.nkv, a.hd, kv};
        sd_op_desc d = {.kv_dtype = kv};
        if (!B->i->supports(B, SD_OP_ATTENTION, &d)) { CHECK(0, "%s: attention kv %d unsupported", BN, kv); continue; }
        CHECK(B->i->reserve(B, &s, 64, a.n_ctx, 1000, &E) == SPECDEC_OK, "%s: reserve: %s", BN, E.msg);
        int half = a.hd / 2, qd = a.nh * a.hd, kd = a.nkv * a.hd, n = a.pos0 + a.T;
        float *ct = malloc(sizeof(float) * (size_t)a.n_ctx * half), *st = malloc(sizeof(float) * (size_t)a.n_ctx * half);
        for (int p = 0; p < a.n_ctx; p++)
            for (int i = 0; i < half; i++) {
                double ang = p * pow(10000.0, -2.0 * i / a.hd);
                ct[(size_t)p * half + i] = (float)cos(ang); st[(size_t)p * half + i] = (float)sin(ang);
            }
        float *ctd = dev_from(ct, sizeof(float) * (size_t)a.n_ctx * half), *std_ = dev_from(st, sizeof(float) * (size_t)a.n_ctx * half);
        /* the cache up to pos0 comes from host rows; the T new rows through rope + kv_store */
        size_t esz = sd_kv_elem_size(kv);
        float *kall = malloc(sizeof(float) * (size_t)n * kd), *vall = malloc(sizeof(float) * (size_t)n * kd);
        for (size_t i = 0; i < (size_t)n * kd; i++) { kall[i] = frand(); vall[i] = frand(); }
        void *kh = malloc(esz * (size_t)a.n_ctx * kd), *vh = malloc(esz * (size_t)a.n_ctx * kd);
        memset(kh, 0, esz * (size_t)a.n_ctx * kd); memset(vh, 0, esz * (size_t)a.n_ctx * kd);
        sd_kv_store(kv, kh, kd, 0, kall, a.pos0);
        sd_kv_store(kv, vh, kd, 0, vall, a.pos0);
        sd_kv_layer kvd = {dev_from(kh, esz * (size_t)a.n_ctx * kd), dev_from(vh, esz * (size_t)a.n_ctx * kd)};
        int32_t pv = a.pos0 - 5;    /* base + off = pos0: the offset is honoured */
        int32_t *posd = dev_from(&pv, sizeof pv);
        sd_pos pos = {posd, 5};
        float *q = malloc(sizeof(float) * (size_t)a.T * qd), *kn = kall + (size_t)a.pos0 * kd;
        for (size_t i = 0; i < (size_t)a.T * qd; i++) q[i] = frand();
        float *qd_ = dev_from(q, sizeof(float) * (size_t)a.T * qd), *knd = dev_from(kn, sizeof(float) * (size_t)a.T * kd);
        float *vnd = dev_from(vall + (size_t)a.pos0 * kd, sizeof(float) * (size_t)a.T * kd);
        OP("rope", B->i->rope(B, qd_, a.T, a.nh, a.hd, pos, ctd, std_));
        OP("rope", B->i->rope(B, knd, a.T, a.nkv, a.hd, pos, ctd, std_));
        float *qr = malloc(sizeof(float) * (size_t)a.T * qd), *qr_ref = malloc(sizeof(float) * (size_t)a.T * qd);
        get(qr, qd_, sizeof(float) * (size_t)a.T * qd);
        memcpy(qr_ref, q, sizeof(float) * (size_t)a.T * qd);
        ref->rope(qr_ref, a.T, a.nh, a.hd, a.pos0, ct, st);
        CHECK(memcmp(qr, qr_ref, sizeof(float) * (size_t)a.T * qd) == 0, "%s: rope differs from the reference (case %d)", BN, ci);
        ref->rope(kn, a.T, a.nkv, a.hd, a.pos0, ct, st);   /* the host copy of the new keys, rotated */
        OP("kv_store", B->i->kv_store(B, kv, kvd.k, kd, knd, a.T, pos));
        OP("kv_store", B->i->kv_store(B, kv, kvd.v, kd, vnd, a.T, pos));
        sd_kv_store(kv, kh, kd, a.pos0, kn, a.T);
        sd_kv_store(kv, vh, kd, a.pos0, vall + (size_t)a.pos0 * kd, a.T);
        void *kb = malloc(esz * (size_t)n * kd);
        get(kb, kvd.k, esz * (size_t)n * kd);
        CHECK(memcmp(kb, kh, esz * (size_t)n * kd) == 0, "%s: kv_store differs (case %d, kv %d)", BN, ci, kv);
        float *od = dev(sizeof(float) * (size_t)a.T * qd), *o = malloc(sizeof(float) * (size_t)a.T * qd), *orf = malloc(sizeof(float) * (size_t)a.T * qd);
        OP("attention", B->i->attention(B, &s, &kvd, qd_, od, a.T, pos));
        get(o, od, sizeof(float) * (size_t)a.T * qd);
        float *scr = malloc(sizeof(float) * (sd_attention_scratch_floats(&s, a.T, a.n_ctx, 1) + 64));
        sd_kv_layer kvh = {kh, vh};
        ref->attention(&s, &kvh, qr_ref, orf, a.T, a.pos0, scr, NULL);
        /* softmax-weighted means of |v| <= 1: errors of a few ulps of 1 per key on top of rounding */
        for (size_t i = 0; i < (size_t)a.T * qd; i++) {
            double tol = 2.0 * (gamma_n(a.hd) * a.hd / sqrt((double)a.hd) + gamma_n(n + 2)) + 64 * U;
            if (!(fabs((double)o[i] - orf[i]) <= tol)) { CHECK(0, "%s: attention case %d [%zu] %.9g vs %.9g", BN, ci, i, o[i], orf[i]); break; }
        }
        /* batch invariance: the last row again, alone */
        float *o1 = malloc(sizeof(float) * qd);
        int32_t pv1 = a.pos0 + a.T - 1;
        CHECK(B->i->write(B, posd, &pv1, sizeof pv1, &E) == SPECDEC_OK, "write");
        OP("attention", B->i->attention(B, &s, &kvd, qd_ + (size_t)(a.T - 1) * qd, od, 1, (sd_pos){posd, 0}));
        get(o1, od, sizeof(float) * qd);
        CHECK(memcmp(o1, o + (size_t)(a.T - 1) * qd, sizeof(float) * qd) == 0, "%s: attention case %d: last row alone differs from inside T=%d", BN, ci, a.T);
        rel(ctd); rel(std_); rel(kvd.k); rel(kvd.v); rel(posd); rel(qd_); rel(knd); rel(vnd); rel(od);
        free(ct); free(st); free(kall); free(vall); free(kh); free(vh); free(q); free(qr); free(qr_ref); free(kb);
        free(o); free(orf); free(scr); free(o1);
    }
}

/* ---- choices: argmax, the seeded sampler, the walk, copy_row ---- */
static void test_choices(void) {
    int V = 1000, T = 5;
    float *lg = malloc(sizeof(float) * (size_t)T * V);
    for (int i = 0; i < T * V; i++) lg[i] = 4.0f * frand();
    lg[1 * V + 10] = lg[1 * V + 20] = 9.0f;           /* a tie: the lower index wins */
    for (int i = 0; i < V; i++) lg[2 * V + i] = NAN;   /* all NaN: 0 */
    lg[3 * V + 0] = NAN; lg[3 * V + 999] = 7.5f;
    lg[4 * V + 5] = INFINITY;
    float *lgd = dev_from(lg, sizeof(float) * (size_t)T * V);
    int32_t map[1000], got[8];
    for (int i = 0; i < V; i++) map[i] = (i * 7919) % 1009;
    int32_t *mapd = dev_from(map, sizeof map), *outd = dev(sizeof(int32_t) * 8);
    OP("argmax", B->i->argmax(B, lgd, V, T, NULL, outd));
    get(got, outd, sizeof(int32_t) * T);
    for (int t = 0; t < T; t++) CHECK(got[t] == sd_argmax(lg + (size_t)t * V, V), "%s: argmax row %d: %d vs %d", BN, t, got[t], sd_argmax(lg + (size_t)t * V, V));
    OP("argmax", B->i->argmax(B, lgd, V, T, mapd, outd));
    get(got, outd, sizeof(int32_t) * T);
    for (int t = 0; t < T; t++) CHECK(got[t] == map[sd_argmax(lg + (size_t)t * V, V)], "%s: argmax with map row %d", BN, t);
    /* seeded sampling: the token sd_sample picks, at each row's position */
    sd_sampler_ws ws, ws2;   /* the sampler's scratch is per vocabulary size */
    sd_sampler_ws_init(&ws, V, NULL);
    sd_sampler_ws_init(&ws2, 1009, NULL);
    for (int f = 0; f < 2; f++) {
        specdec_sampling_params p = specdec_sampling_default_params();
        p.temperature = 0.8f; p.seed = 12345; if (f) { p.top_k = 40; p.top_p = 0.9f; }
        sd_op_desc d = {.filtered = f == 1};
        if (!B->i->supports(B, SD_OP_SAMPLE, &d)) continue;
        int32_t pv = 17;
        int32_t *pd = dev_from(&pv, sizeof pv);
        int rows[3] = {0, 1, 4};
        for (int ri = 0; ri < 3; ri++) {
            OP("sample", B->i->sample(B, &p, lgd + (size_t)rows[ri] * V, V, V, NULL, 1, (sd_pos){pd, 1 + ri}, outd));
            get(got, outd, sizeof(int32_t));
            CHECK(got[0] == sd_sample(&ws, &p, lg + (size_t)rows[ri] * V, V, 18 + ri), "%s: sample (filters %d) row %d: %d vs %d", BN, f, rows[ri], got[0], sd_sample(&ws, &p, lg + (size_t)rows[ri] * V, V, 18 + ri));
            /* over a subset: row entries stand for map ids, the rest of a 1009-token vocabulary is -inf */
            OP("sample", B->i->sample(B, &p, lgd + (size_t)rows[ri] * V, V, 1009, mapd, 1, (sd_pos){pd, 0}, outd));
            get(got, outd, sizeof(int32_t));
            float *sc = malloc(sizeof(float) * 1009);
            for (int i = 0; i < 1009; i++) sc[i] = -INFINITY;
            for (int i = 0; i < V; i++) sc[map[i]] = lg[(size_t)rows[ri] * V + i];
            CHECK(got[0] == sd_sample(&ws2, &p, sc, 1009, 17), "%s: sample over a subset row %d", BN, rows[ri]);
            free(sc);
        }
        rel(pd);
    }
    sd_sampler_ws_free(&ws); sd_sampler_ws_free(&ws2);
    /* the walk */
    typedef struct { int nd; int32_t blk[6], choice[6]; int acc; } wc;
    static const wc ws_[] = {{0, {5}, {9}, 0}, {3, {5, 1, 2, 3}, {1, 2, 3, 8}, 3}, {3, {5, 1, 2, 3}, {1, 7, 3, 8}, 1}, {4, {5, 1, 2, 3, 4}, {6, 2, 3, 4, 9}, 0}};
    for (int i = 0; i < 4; i++) {
        const wc *w = &ws_[i];
        int32_t pv[2] = {100, -1}, emit[8], blk0;
        int32_t *bd = dev_from(w->blk, sizeof(int32_t) * (w->nd + 1)), *cd = dev_from(w->choice, sizeof(int32_t) * (w->nd + 1));
        int32_t *ed = dev(sizeof(int32_t) * 8), *pd = dev_from(pv, sizeof pv);
        OP("walk", B->i->walk(B, bd, w->nd, cd, ed, pd, pd + 1));
        get(emit, ed, sizeof(int32_t) * (w->acc + 2));
        get(pv, pd, sizeof pv);
        get(&blk0, bd, sizeof blk0);
        CHECK(emit[0] == w->acc + 1, "%s: walk %d emitted %d, want %d", BN, i, emit[0], w->acc + 1);
        for (int j = 0; j < w->acc; j++) CHECK(emit[1 + j] == w->blk[1 + j], "%s: walk %d token %d", BN, i, j);
        CHECK(emit[1 + w->acc] == w->choice[w->acc] && blk0 == w->choice[w->acc], "%s: walk %d bonus", BN, i);
        CHECK(pv[0] == 100 + w->acc + 1 && pv[1] == 100, "%s: walk %d positions %d %d", BN, i, pv[0], pv[1]);
        rel(bd); rel(cd); rel(ed); rel(pd);
    }
    /* copy_row: the row the backend index names */
    int32_t idx = 3, *idd = dev_from(&idx, sizeof idx);
    float row[1000];
    OP("copy_row", B->i->copy_row(B, outd == NULL ? NULL : (float *)lgd, lgd, V, 7, idd, -2));
    get(row, lgd, sizeof(float) * 7);
    CHECK(memcmp(row, lg + (size_t)1 * V, sizeof(float) * 7) == 0, "%s: copy_row", BN);
    rel(idd); rel(lgd); rel(mapd); rel(outd);
    free(lg);
}

/* ---- memory and recording ---- */
static void test_memory(void) {
    size_t n = 100003;
    unsigned char *h = malloc(n), *g = malloc(n);
    for (size_t i = 0; i < n; i++) h[i] = (unsigned char)urand();
    void *a = dev(n), *b = dev(n);
    unsigned char *z = malloc(n);
    get(z, a, n);
    size_t nz = 0;
    for (size_t i = 0; i < n; i++) nz += z[i] != 0;
    CHECK(nz == 0, "%s: alloc is not zero-filled (%zu bytes)", BN, nz);
    CHECK(B->i->write(B, a, h, n, &E) == SPECDEC_OK && B->i->copy(B, b, a, n, &E) == SPECDEC_OK, "%s: write/copy", BN);
    get(g, b, n);
    CHECK(memcmp(g, h, n) == 0, "%s: write / copy / read round trip", BN);
    const void *u = NULL;
    CHECK(B->i->upload(B, h, n, "test upload", &u, &E) == SPECDEC_OK, "%s: upload: %s", BN, E.msg);
    get(g, u, n);
    CHECK(memcmp(g, h, n) == 0, "%s: upload round trip", BN);
    B->i->unload(B, u);
    CHECK(B->i->sync(B, &E) == SPECDEC_OK, "%s: sync: %s", BN, E.msg);
    /* a recorded sequence replays with the position read at replay time */
    if (B->i->seq_begin) {
        float x[64], y[64], w[64];
        for (int i = 0; i < 64; i++) { x[i] = frand(); w[i] = 1.0f; }
        float *xd = dev_from(x, sizeof x), *wd = dev_from(w, sizeof w), *yd = dev(sizeof y);
        for (int rep = 0; rep < 3; rep++) {
            if (!B->i->seq_begin(B, 42)) {
                OP("rmsnorm", B->i->rmsnorm(B, yd, 64, xd, 64, wd, 64, 1, 1e-6f));
                OP("add", B->i->add(B, xd, yd, 64));
                CHECK(B->i->seq_end(B, 42, &E) == SPECDEC_OK, "%s: seq_end: %s", BN, E.msg);
            }
        }
        get(y, xd, sizeof y);
        float r[64], t[64];
        for (int i = 0; i < 64; i++) t[i] = x[i];
        for (int rep = 0; rep < 3; rep++) {
            sd_ops_ref()->rmsnorm(r, t, w, 64, 1, 1e-6f);
            for (int i = 0; i < 64; i++) t[i] += r[i];
        }
        for (int i = 0; i < 64; i++) CHECK(fabs(y[i] - t[i]) <= 1e-5 * fabs(t[i]) + 1e-6, "%s: recorded sequence replay [%d]", BN, i);
        CHECK(B->stats.seq_replayed >= 2, "%s: nothing was replayed", BN);
        rel(xd); rel(wd); rel(yd);
    }
    rel(a); rel(b);
    free(h); free(g); free(z);
}

static void run_backend(const char *name, const sd_backend_opts *o) {
    memset(&E, 0, sizeof E);
    if (sd_backend_create(name, o, &B, &E) != SPECDEC_OK) { CHECK(0, "create %s: %s", name, E.msg); return; }
    char label[96];
    snprintf(label, sizeof label, "%s/%s", B->name, B->i->kernels(B));
    BN = label;
    int f0 = check_failures;
    test_memory();
    test_elementwise();
    test_choices();
    test_attention();
    test_matmul();
    fprintf(stderr, "%-28s %s (%llu ops)\n", label, check_failures == f0 ? "ok" : "FAILED", (unsigned long long)B->stats.ops);
    sd_backend_free(B);
    B = NULL;
}

int main(void) {
    static const char *levels[] = {"avx512", "avx2", "neon", "scalar"};
    int ran = 0;
    for (int i = 0; i < 4; i++) {
        /* f32 activations: this test holds every op to the f32 reference's error bounds (the int8
         * path has its own reference, tests/test_ops_i8.c), whatever precision is the default */
        sd_backend_opts o = {.n_threads = 2, .cpu_level = levels[i], .precision = SD_PRECISION_F32};
        sd_backend *probe = NULL;
        if (sd_backend_create("cpu", &o, &probe, &E) != SPECDEC_OK) { fprintf(stderr, "cpu/%-24s not on this machine\n", levels[i]); continue; }
        sd_backend_free(probe);
        run_backend("cpu", &o);
        ran++;
    }
    CHECK(ran >= 1, "no CPU level ran");
    if (sd_backend_cuda_available()) {
        sd_backend_opts o = {.precision = SD_PRECISION_F32};   /* int8: test_cuda_kernels */
        run_backend("cuda", &o);
    } else fprintf(stderr, "cuda: %s\n", strstr(specdec_backends(), "cuda") ? "no device here" : "not built");
    return check_finish("test_backend_ops");
}
