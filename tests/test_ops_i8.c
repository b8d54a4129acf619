/* test_ops_i8.c: the int8-activation matmul (src/cpu/ops_i8.h).
 *  - the block quantizer: range, rounding, zero and non-finite blocks;
 *  - every level this CPU runs (and on x86 the AVX2 maddubs form next to AVX-VNNI, the AVX-512
 *    AMX form next to VNNI where the CPU and OS give AMX) against the
 *    scalar reference sd_i8_matmul_ref, BIT FOR BIT (the recipe is fixed, integer sums exact),
 *    for 4/8-bit x groups 64/128 x scales f32/f16/bf16, odd row counts, several widths;
 *  - batch invariance: every T in 1..64 gives each row the bits it gets alone, with pools of
 *    1, 2 and 3 threads;
 *  - closeness to the f32 reference (the quantization error of int8 activations is bounded:
 *    per block |x - d xq| <= d / 2, so |y_i8 - y_f32| <= sum_j |w_j| d_j / 2 plus rounding);
 *  - shapes the path does not take (group 32, cols not a whole step) are refused by
 *    sd_i8_supported, and the backend then gives the f32 result.
 * Seeds are fresh each run (printed); SD_TEST_SEED=<n> replays one. */
#include "backend/backend.h"
#include "check.h"
#include "test_mats.h"
#include "cpu/ops.h"
#include "cpu/ops_i8.h"
#include "util/dtype.h"
#include "sample/sample.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>



static void test_quant_block(void) {
    float x[32];
    int8_t q[32];
    for (int i = 0; i < 32; i++) x[i] = rndf(0.0f, 3.0f);
    x[5] = -4.0f; /* the largest magnitude: its q is -127 */
    float d = sd_i8_quant_block(x, 32, q);
    CHECK(fabsf(d - 4.0f / 127.0f) < 1e-9f, "d = %g", d);
    CHECK(q[5] == -127, "q[5] = %d", q[5]);
    for (int i = 0; i < 32; i++) CHECK(fabsf(x[i] - d * q[i]) <= d * 0.5f * 1.0001f, "x[%d] %g q %d d %g", i, x[i], q[i], d);
    memset(x, 0, sizeof x);
    CHECK(sd_i8_quant_block(x, 32, q) == 0.0f && q[0] == 0 && q[31] == 0, "zero block");
    x[3] = INFINITY; x[4] = 1.0f;
    CHECK(sd_i8_quant_block(x, 32, q) == 0.0f && q[4] == 0, "non-finite block gives zeros");
    x[3] = NAN;
    CHECK(sd_i8_quant_block(x, 32, q) == 0.0f && q[4] == 0, "NaN block gives zeros");
    /* the preparation's quantizer gives the definition's d and q, bit for bit: random blocks, exact
     * halves (round to even), signed zeros, subnormals (a subnormal max makes 127 / max infinite),
     * inf and NaN anywhere */
    int8_t q2[32];
    for (int trial = 0; trial < 3000; trial++) {
        const int kind = trial % 8;
        for (int i = 0; i < 32; i++) {
            float v = rndf(0.0f, 1.0f);
            if (kind == 1) v = (float)((int)(v * 20.0f)) * 0.5f;          /* halves after scaling by 127 / 10 */
            if (kind == 2) v = v * 1e-39f;                                  /* subnormals */
            if (kind == 3 && i % 5 == 0) v = i % 2 ? -0.0f : 0.0f;
            if (kind == 4) v = i == trial % 32 ? 127.0f : (float)(i - 16) * 0.5f;   /* x * id lands on halves */
            x[i] = v;
        }
        if (kind == 5) x[trial % 32] = (trial & 16) ? INFINITY : -INFINITY;
        if (kind == 6) x[trial % 32] = NAN;
        if (kind == 7) for (int i = 0; i < 32; i++) x[i] = i % 3 ? 0.0f : -0.0f;
        float da = sd_i8_quant_block(x, 32, q), db = sd_i8_quant_block_fast(x, 32, q2);
        CHECK(memcmp(&da, &db, 4) == 0 && memcmp(q, q2, 32) == 0, "quant_block_fast trial %d (kind %d): d %g vs %g", trial,
              kind, da, db);
    }
}

/* The vector preparation (sd_i8_prep_avx2) writes sd_i8_prep's xq, d and xg bit for bit: rows of
 * every width class with blocks of each hostile kind (the quant_block kinds above: halves, signed
 * zeros, subnormal maxima with zeros among them, inf and NaN), groups of 64 and 128. */
static void test_prep(void) {
    const sd_i8_prep_fn vp = sd_i8_prep_avx2();
    if (!vp) { fprintf(stderr, "prep: no vector preparation here, skipped\n"); return; }
    enum { C = 2048 };
    static float x[C];
    static int8_t q1[C], q2[C];
    static float d1[C / 32], d2[C / 32], v1[C / 64], v2[C / 64];
    static const int widths[] = {64, 128, 384, 640, 1088, 2048};
    for (int trial = 0; trial < 600; trial++) {
        const int cols = widths[trial % 6], group = (trial / 6) % 2 ? 128 : 64;
        if (cols % group) continue;
        for (int i = 0; i < cols; i++) {
            const int kind = (i / 32 + trial) % 9;
            float v = rndf(0.0f, 1.0f);
            if (kind == 1) v = (float)((int)(v * 20.0f)) * 0.5f;
            if (kind == 2) v = i % 7 ? v * 1e-39f : (i % 2 ? -0.0f : 0.0f);   /* subnormal max, zeros */
            if (kind == 3 && i % 5 == 0) v = i % 2 ? -0.0f : 0.0f;
            if (kind == 4) v = i % 32 == trial % 32 ? 127.0f : (float)(i % 32 - 16) * 0.5f;
            if (kind == 5 && i % 32 == trial % 32) v = (trial & 16) ? INFINITY : -INFINITY;
            if (kind == 6 && i % 32 == trial % 32) v = NAN;
            if (kind == 7) v = i % 3 ? 0.0f : -0.0f;
            x[i] = v;
        }
        memset(q1, 0x55, sizeof q1); memset(q2, 0x55, sizeof q2);
        sd_i8_prep(x, cols, group, q1, d1, v1);
        vp(x, cols, group, q2, d2, v2);
        CHECK(memcmp(q1, q2, (size_t)cols) == 0 && memcmp(d1, d2, sizeof(float) * (size_t)(cols / 32)) == 0 &&
                  memcmp(v1, v2, sizeof(float) * (size_t)(cols / group)) == 0,
              "prep_avx2 trial %d (%d columns, group %d): not sd_i8_prep's bits", trial, cols, group);
    }
}

static sd_pool *pools[4];

/* One weight kind at one level: bitwise equal to the reference at every T in 1..64 (each row
 * alone and inside blocks), with 1..3 threads, from the packed tiles made once (as the CPU
 * backend does at upload) and, at a few T, packed per call; close to the f32 reference. */
static void test_kind(const sd_ops *F, const char *lvl, int rows, int cols, int bits, int group, specdec_dtype dt) {
    enum { TMAX = 64 };
    tmat W = make_mat(rows, cols, bits, group, dt);
    CHECK(sd_i8_supported(&W.m), "supported %dx%d q%d g%d", rows, cols, bits, group);
    sd_i8_packed pk;
    CHECK(sd_i8_pack(&W.m, &pk) == 0, "pack %dx%d", rows, cols);
    sd_mat Wp = W.m;
    Wp.pk = &pk;
    const int ldx = cols + 3, ldy = rows + 1;
    float *x = malloc(sizeof(float) * (size_t)TMAX * ldx);
    for (int i = 0; i < TMAX * ldx; i++) x[i] = rndf(0.0f, 1.0f) * ((i % 97) == 0 ? 8.0f : 1.0f);
    float *yr = malloc(sizeof(float) * (size_t)TMAX * ldy), *y = malloc(sizeof(float) * (size_t)TMAX * ldy);
    float *yf = malloc(sizeof(float) * (size_t)TMAX * ldy);
    sd_i8_matmul_ref(&W.m, x, ldx, yr, ldy, TMAX);
    sd_ops_ref()->matmul(&W.m, x, ldx, yf, ldy, TMAX, NULL);
    int bad = 0;
    const int slow = strcmp(lvl, "scalar") == 0;   /* the plain C recipe: a spread of T only */
    for (int T = 1; T <= TMAX && !bad; T++)
        for (int th = 0; th <= 3 && !bad; th++) {
            if (slow && T != 1 && T != 2 && T != 5 && T != TMAX) continue;
            if (th > 0 && T % 7 != 1 && T != TMAX) continue;   /* threads: a spread of T */
            for (int i = 0; i < T * ldy; i++) y[i] = NAN;
            const int per_call = T % 16 == 3 && th < 2;
            F->matmul_i8(per_call ? &W.m : &Wp, x, ldx, y, ldy, T, th ? pools[th] : NULL);
            for (int t = 0; t < T && !bad; t++)
                for (int r = 0; r < rows && !bad; r++)
                    if (memcmp(&y[(size_t)t * ldy + r], &yr[(size_t)t * ldy + r], 4) != 0) {
                        CHECK(0, "%s q%d g%d %s %dx%d T=%d threads=%d: y[%d][%d] = %.9g, reference %.9g", lvl, bits,
                              group, dt == SPECDEC_DTYPE_F32 ? "f32" : dt == SPECDEC_DTYPE_F16 ? "f16" : "bf16", rows, cols, T, th, t, r, y[(size_t)t * ldy + r],
                              yr[(size_t)t * ldy + r]);
                        bad = 1;
                    }
            for (int t = 0; t < T && !bad; t++)
                if (!isnan(y[(size_t)t * ldy + rows])) { CHECK(0, "%s: padding written", lvl); bad = 1; }
        }
    /* closeness: |y - y_f32| within the activation quantization error bound */
    if (strcmp(lvl, "scalar") == 0)
        for (int t = 0; t < TMAX; t += 9)
            for (int r = 0; r < rows; r++) {
                double bound = 0.0;
                const float *xt = x + (size_t)t * ldx;
                float row[SD_I8_MAXCOLS];
                sd_mat_row_f32(&W.m, r, row);
                for (int b = 0; b < cols / 32; b++) {
                    float amax = 0.0f, wsum = 0.0f;
                    for (int j = b * 32; j < b * 32 + 32; j++) {
                        if (fabsf(xt[j]) > amax) amax = fabsf(xt[j]);
                        wsum += fabsf(row[j]);
                    }
                    bound += (double)wsum * amax / 127.0 * 0.5;
                }
                bound = bound * 1.01 + 1e-4;
                double e = fabs((double)yr[(size_t)t * ldy + r] - yf[(size_t)t * ldy + r]);
                if (e > bound) {
                    CHECK(0, "q%d g%d: int8 vs f32 error %g > bound %g at [%d][%d]", bits, group, e, bound, t, r);
                    t = TMAX;
                    break;
                }
            }
    free(x); free(y); free(yr); free(yf);
    sd_i8_pack_free(&pk);
    free_mat(&W);
}

static void test_level(const sd_ops *F, const char *lvl) {
    static const specdec_dtype dts[3] = {SPECDEC_DTYPE_BF16, SPECDEC_DTYPE_F16, SPECDEC_DTYPE_F32};
    static const int widths4[] = {128, 384, 640, 1152}, widths8[] = {64, 192, 384, 1088};
    for (int d = 0; d < 3; d++)
        for (int wi = 0; wi < 4; wi++) {
            int rows = 37 + 16 * wi + d;   /* odd counts: thread splits cut the 16-row ranges */
            test_kind(F, lvl, rows, widths4[wi], 4, 64, dts[d]);
            if (widths4[wi] % 128 == 0 && widths4[wi] >= 128) test_kind(F, lvl, rows, widths4[wi], 4, 128, dts[d]);
            test_kind(F, lvl, rows, widths8[wi], 8, 64, dts[d]);
        }
    test_kind(F, lvl, 19, 1024, 8, 128, SPECDEC_DTYPE_BF16);
    /* more widths, odd row counts (a last tile of 5 to 11 rows) */
    static const int ns4[] = {256, 512, 896, 4096}, ns8[] = {128, 256, 448, 512};
    for (int i = 0; i < 4; i++) {
        test_kind(F, lvl, 21 + 2 * i, ns4[i], 4, 64, SPECDEC_DTYPE_BF16);
        test_kind(F, lvl, 21 + 2 * i, ns8[i], 8, 64, SPECDEC_DTYPE_BF16);
    }
}

/* A matrix larger than the caches (the kernels prefetch those, tiles ahead): the reference's bits
 * at T = 1 and 2 (and 5 for AMX) on 1 and 2 threads (kept short: the NEON run is emulated), in
 * either tile arrangement (ops_i8.h: 384 columns are packed in runs, 512 grouped). */
static void test_large_cols(const sd_ops *F, const char *lvl, const int cols) {
    const int rows = 20011, T = 5;
    tmat W = make_mat(rows, cols, 4, 64, SPECDEC_DTYPE_BF16);
    float *x = malloc(sizeof(float) * (size_t)T * cols);
    float *yr = malloc(sizeof(float) * (size_t)T * rows), *y = malloc(sizeof(float) * (size_t)T * rows);
    for (int i = 0; i < T * cols; i++) x[i] = rndf(0.0f, 1.0f);
    sd_i8_matmul_ref(&W.m, x, cols, yr, rows, T);
    sd_i8_packed pk;
    CHECK(sd_i8_pack(&W.m, &pk) == 0, "pack large");
    CHECK(pk.grouped == (cols >= 512) && sd_i8_streamed(&pk), "large %dx%d: packed %s (%zu-byte tiles), streamed %d",
          rows, cols, pk.grouped ? "grouped" : "in runs", pk.tile_bytes, sd_i8_streamed(&pk));
    W.m.pk = &pk;
    static const int Ts[] = {1, 2, 5};
    const int nT = strstr(lvl, "amx") ? 3 : 2;   /* AMX: a verify width past its rule's threshold too */
    for (int k = 0; k < nT; k++)
        for (int th = 1; th <= 2; th++) {
            F->matmul_i8(&W.m, x, cols, y, rows, Ts[k], pools[th]);
            CHECK(memcmp(y, yr, sizeof(float) * (size_t)Ts[k] * rows) == 0, "%s large %dx%d T=%d threads=%d: not the reference's bits",
                  lvl, rows, cols, Ts[k], th);
        }
    free(x); free(y); free(yr);
    W.m.pk = NULL;
    sd_i8_pack_free(&pk);
    free_mat(&W);
}
static void test_large(const sd_ops *F, const char *lvl) {
    test_large_cols(F, lvl, 384);
    test_large_cols(F, lvl, 512);
}

/* Several packed matrices over one x in one pass (matmul_i8_n: q, k, v; gate, up): every value
 * bit for bit the single-matrix call's, at T = 1..9 and 1..3 threads; a matrix that is not packed,
 * or of another width, makes it do nothing (-1). */
static void test_n(const sd_ops *F, const char *lvl) {
    if (!F->matmul_i8_n) return;
    tmat A = make_mat(67, 384, 4, 64, SPECDEC_DTYPE_BF16), B = make_mat(32, 384, 4, 64, SPECDEC_DTYPE_BF16),
         C = make_mat(21, 384, 4, 64, SPECDEC_DTYPE_BF16), D = make_mat(16, 256, 4, 64, SPECDEC_DTYPE_BF16);
    sd_i8_packed pa, pb, pc, pd;
    CHECK(sd_i8_pack(&A.m, &pa) == 0 && sd_i8_pack(&B.m, &pb) == 0 && sd_i8_pack(&C.m, &pc) == 0 &&
          sd_i8_pack(&D.m, &pd) == 0, "pack");
    A.m.pk = &pa; B.m.pk = &pb; C.m.pk = &pc; D.m.pk = &pd;
    enum { TM = 9 };
    float x[TM * 384], y1[3][TM * 70], y2[3][TM * 70];
    for (int i = 0; i < TM * 384; i++) x[i] = rndf(0.0f, 1.0f);
    const sd_mat *W[3] = {&A.m, &B.m, &C.m};
    for (int T = 1; T <= TM; T++)
        for (int th = 0; th <= 3; th++) {
            float *ys[3] = {y2[0], y2[1], y2[2]};
            const int ld[3] = {70, 33, 21};
            for (int m = 0; m < 3; m++) F->matmul_i8(W[m], x, 384, y1[m], ld[m], T, th ? pools[th] : NULL);
            memset(y2, 0, sizeof y2);
            CHECK(F->matmul_i8_n(3, W, x, 384, ys, ld, T, th ? pools[th] : NULL) == 0, "%s matmul_i8_n ran", lvl);
            for (int m = 0; m < 3; m++)
                for (int t = 0; t < T; t++)
                    CHECK(memcmp(y1[m] + t * ld[m], y2[m] + t * ld[m], sizeof(float) * (size_t)W[m]->rows) == 0,
                          "%s matmul_i8_n T=%d threads=%d: matrix %d token %d differs from matmul_i8", lvl, T, th, m, t);
        }
    float *ys[2] = {y2[0], y2[1]};
    const int ld2[2] = {70, 33};
    const sd_mat *Wd[2] = {&A.m, &D.m};
    CHECK(F->matmul_i8_n(2, Wd, x, 384, ys, ld2, 1, NULL) == -1, "%s: widths differ, nothing done", lvl);
    B.m.pk = NULL;
    CHECK(F->matmul_i8_n(3, W, x, 384, ys, ld2, 1, NULL) == -1, "%s: an unpacked matrix, nothing done", lvl);
    sd_i8_pack_free(&pa); sd_i8_pack_free(&pb); sd_i8_pack_free(&pc); sd_i8_pack_free(&pd);
    free_mat(&A); free_mat(&B); free_mat(&C); free_mat(&D);
}

/* The fused LM head choice (matmul_i8_argmax) is sd_argmax of matmul_i8's logits: with the
 * largest row duplicated into other threads' ranges (ties go to the lowest index), a NaN row, and
 * a matrix whose every logit is NaN (0), at T = 1..5 and 1..3 threads. */
static void test_argmax(const sd_ops *F, const char *lvl) {
    if (!F->matmul_i8_argmax) return;
    enum { R = 150, C = 384, TM = 5 };
    tmat A = make_mat(R, C, 4, 64, SPECDEC_DTYPE_F32);
    float x[TM * C], y[TM * R], sc[2 * TM * R + 64];
    int32_t out[TM];
    for (int i = 0; i < TM * C; i++) x[i] = fabsf(rndf(0.0f, 1.0f)) + 0.01f;   /* positive: row 37 below wins */
    const size_t wpr = C / 8, gpr = C / 64;   /* u32 words and groups per row */
    for (int pass = 0; pass < 3; pass++) {
        if (pass == 1) {   /* make row 37 the largest for every token, copied to rows 38, 101 and 140 */
            for (size_t g = 0; g < gpr; g++) ((float *)A.s)[37 * gpr + g] = ((float *)A.b)[37 * gpr + g] = 0.5f;
            static const int cp[3] = {38, 101, 140};
            for (int k = 0; k < 3; k++) {
                memcpy((uint32_t *)A.w + cp[k] * wpr, (uint32_t *)A.w + 37 * wpr, wpr * 4);
                memcpy((float *)A.s + cp[k] * gpr, (float *)A.s + 37 * gpr, gpr * 4);
                memcpy((float *)A.b + cp[k] * gpr, (float *)A.b + 37 * gpr, gpr * 4);
            }
            ((float *)A.s)[12 * gpr] = NAN;   /* row 12's logits NaN */
        }
        if (pass == 2)
            for (size_t g = 0; g < (size_t)R * gpr; g++) ((float *)A.s)[g] = NAN;
        sd_i8_packed pk;
        CHECK(sd_i8_pack(&A.m, &pk) == 0, "pack");
        sd_mat Wp = A.m;
        Wp.pk = &pk;
        for (int T = 1; T <= TM; T++)
            for (int th = 0; th <= 3; th++) {
                sd_pool *p = th ? pools[th] : NULL;
                F->matmul_i8(&Wp, x, C, y, R, T, p);
                CHECK(sizeof sc / sizeof sc[0] >= sd_i8_argmax_scratch(R, T, th ? th : 1), "scratch size");
                CHECK(F->matmul_i8_argmax(&Wp, x, C, T, p, sc, out) == 0, "%s matmul_i8_argmax ran", lvl);
                for (int t = 0; t < T; t++) {
                    const int32_t want = sd_argmax(y + (size_t)t * R, R);
                    CHECK(out[t] == want, "%s argmax pass %d T=%d threads=%d token %d: %d, sd_argmax %d", lvl, pass, T, th, t,
                          out[t], want);
                    if (pass == 1) CHECK(want == 37, "pass 1: the duplicated row wins at its lowest index (%d)", want);
                    if (pass == 2) CHECK(want == 0, "pass 2: every logit NaN gives 0 (%d)", want);
                }
            }
        CHECK(F->matmul_i8_argmax(&A.m, x, C, 1, NULL, sc, out) == -1, "%s: unpacked, nothing done", lvl);
        sd_i8_pack_free(&pk);
    }
    free_mat(&A);
}

/* Shapes the int8 path does not take give, through the backend, the f32 result. */
static void test_refused(void) {
    tmat a = make_mat(8, 96, 4, 32, SPECDEC_DTYPE_BF16), b = make_mat(8, 64, 4, 64, SPECDEC_DTYPE_BF16);
    CHECK(!sd_i8_supported(&a.m), "group 32 refused");
    CHECK(!sd_i8_supported(&b.m), "4-bit cols 64 (half a step) refused");
#ifndef SD_I8_NO_BACKEND   /* the aarch64 cross build links the CPU ops only */
    sd_backend_opts o = {.n_threads = 1, .precision = SD_PRECISION_INT8};
    sd_backend *B = NULL;
    specdec_err err;
    CHECK(sd_backend_cpu_new(&o, &B, &err) == SPECDEC_OK, "cpu backend");
    if (B) {
        float x[96], y[8], yf[8];
        for (int i = 0; i < 96; i++) x[i] = rndf(0.0f, 1.0f);
        B->i->matmul(B, &a.m, x, 96, y, 8, 1);
        sd_ops_fast()->matmul(&a.m, x, 96, yf, 8, 1, NULL);
        CHECK(memcmp(y, yf, sizeof y) == 0, "refused shape: f32 result");
        CHECK(strstr(B->i->kernels(B), "int8") != NULL, "kernels names int8: %s", B->i->kernels(B));
        sd_backend_free(B);
    }
#endif
    free_mat(&a); free_mat(&b);
}

int main(void) {
    const char *env = getenv("SD_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 10) : ((uint64_t)time(NULL) * 1000003u) ^ (uint64_t)getpid();
    if (!seed) seed = 88172645463325252ULL;
    rng_s = seed;
    fprintf(stderr, "test_ops_i8: seed %llu (SD_TEST_SEED to replay)\n", (unsigned long long)seed);
    for (int n = 1; n <= 3; n++) pools[n] = sd_pool_create(n);
    test_quant_block();
    test_prep();
    static const char *levels[] = {"avx512", "avx2", "neon", "scalar"};
    for (int i = 0; i < 4; i++) {
        const sd_ops *F = sd_ops_fast_level(levels[i]);
        if (!F) { fprintf(stderr, "level %s: not supported here, skipped\n", levels[i]); continue; }
        fprintf(stderr, "level %s\n", levels[i]);
        test_level(F, levels[i]);
        test_n(F, levels[i]);
        test_argmax(F, levels[i]);
        if (strcmp(levels[i], "scalar") != 0) test_large(F, levels[i]);
        if (strcmp(levels[i], "avx2") == 0 || strcmp(levels[i], "neon") == 0) {
            /* the form without a dot-product instruction too (maddubs / smull), where VNNI / sdot
             * took its place */
            sd_i8_avx2_novnni = 1;
            test_level(F, levels[i][0] == 'a' ? "avx2-maddubs" : "neon-smull");
            sd_i8_avx2_novnni = 0;
        }
        if (strcmp(levels[i], "avx512") == 0) {
            if (sd_i8_rows_amx()) {
                /* the AMX form, at every T >= 2 (its rule would leave most of these small matrices
                 * to VNNI), then under its own rule on the large matrix */
                sd_i8_avx512_prefer_amx(1);
                CHECK(sd_i8_avx512_amx_preferred(), "prefer amx: the AMX form is in force");
                sd_i8_amx_always = 1;
                test_level(F, "avx512-amx");
                test_n(F, "avx512-amx");
                test_argmax(F, "avx512-amx");
                test_large(F, "avx512-amx");
                /* wider than the A operands the kernel keeps on its stack at 8 tokens (VNNI then),
                 * within them at 7 and fewer */
                test_kind(F, "avx512-amx", 23, 4224, 4, 64, SPECDEC_DTYPE_BF16);
                test_kind(F, "avx512-amx", 19, 4160, 8, 64, SPECDEC_DTYPE_F16);
                sd_i8_amx_always = 0;
                test_large(F, "avx512-amx rule");
                sd_i8_avx512_prefer_amx(0);
                CHECK(!sd_i8_avx512_amx_preferred(), "prefer vnni: the AMX form is off");
            } else {
                fprintf(stderr, "avx512-amx: no AMX here (CPU, OS or hypervisor), skipped\n");
            }
        }
    }
    test_refused();
    /* calibration's choice of the AVX2 form reaches the kernel handed out */
    if (sd_ops_fast_level("avx2")) {
        sd_i8_avx2_prefer_vnni(0);
        CHECK(sd_i8_rows_avx2() == sd_i8_rows_avx2_form(0), "prefer maddubs: the maddubs form handed out");
        sd_i8_avx2_prefer_vnni(1);
        const sd_i8_rows_fn v = sd_i8_rows_avx2_form(1);
        CHECK(sd_i8_rows_avx2() == (v ? v : sd_i8_rows_avx2_form(0)), "prefer vnni: VNNI where the CPU has it");
        CHECK(sd_i8_rows_avx2_form(0) != v, "two distinct forms");
    }
    for (int n = 1; n <= 3; n++) sd_pool_free(pools[n]);
    return check_finish("test_ops_i8");
}
