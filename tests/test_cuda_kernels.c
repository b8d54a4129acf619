/* test_cuda_kernels.c: the CUDA kernels' arithmetic. Everywhere: the host self-check
 * (sd_cuda_selfcheck: the device functions' bit-level arithmetic run on the CPU against the C
 * code). On a machine with a CUDA device, the compute ops against the scalar reference backend
 * and their batch invariance:
 *   matmul: every weight layout (dense f32/f16/bf16 with aligned and unaligned rows, 4- and
 *     8-bit with groups 32/64/128 and f32/f16/bf16 scales), T = 1..64: within a rounding bound
 *     of the double-precision reference, and every row bitwise equal to the same row computed
 *     alone (T = 1), and from the tiled kernel equal to the gemv kernel's (T <= 8); the fused LM
 *     head's argmax equals the argmax of those logits, with a map;
 *   embed: bitwise sd_mat_row_f32; rope, add, kv_store: bitwise the reference; rmsnorm, silu_mul:
 *     within a few ulps, rmsnorm bitwise across T and in place;
 *   matmul_n: matrices laid end to end (one launch) and apart, bitwise each matrix's matmul;
 *   the fused ops (norm_matmul_n, matmul_add, swiglu_matmul_add, norm_mlp_add, qk_norm_rope_store) at both
 *     precisions: bitwise the ops they stand for (norm_matmul_n's int8 preparation both spread
 *     over blocks and in one block a token);
 *   attention: GQA shapes, head_dim 16..256, f32/bf16/f16 caches, contexts up to 33 chunks (the
 *     split slots wrap): within tolerance, and each row bitwise equal alone, inside T = 4 / 9
 *     and across a call split in two, in every form of the staged kernel;
 *   wide calls (--batch above 64): the int8 tensor-core matmul at T = 200 and 256, the
 *     attention's teams and rows-in-turn forms at T = 200, bitwise each row alone. */
#include "cuda_test.h"
#ifdef SPECDEC_HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif

/* ---- matmul and the fused LM head ---- */

/* |w| summed against |x|, per the quantized value's two parts (|s q| + |b|): the scale of the
 * rounding error any summation order makes */
static void mm_mag(const sd_mat *m, const float *x, int ldx, int T, double *mag) {
    float *w = malloc(sizeof(float) * (size_t)m->cols);
    for (int r = 0; r < m->rows; r++) {
        sd_mat_row_f32(m, r, w);
        for (int t = 0; t < T; t++) {
            double s = 0.0;
            for (int j = 0; j < m->cols; j++) {
                double a = fabs((double)w[j]);
                if (m->bits) a += 2.0 * fabs((double)sd_elem_f32(m->dtype, m->biases,
                                                                 (size_t)r * (m->cols / m->group) + j / m->group));
                s += a * fabs((double)x[(size_t)t * ldx + j]);
            }
            mag[(size_t)t * m->rows + r] = s;
        }
    }
    free(w);
}

static int32_t host_argmax(const float *v, int n) {
    int best = -1;
    for (int i = 0; i < n; i++)
        if (v[i] == v[i] && (best < 0 || v[i] > v[best])) best = i;
    return best < 0 ? 0 : best;
}

/* The backends of precision int8 (NULL until main makes them): the CUDA one and the scalar
 * reference, whose int8 matmul quantizes x the same way (block scale, codes) but sums in its
 * own order, so they agree within rounding. */
static sd_backend *G8, *R8;

/* One call of T tokens of g's matmul over h into dy (poisoned first), read back into y: how many
 * of its T rows differ in any bit from the same tokens run alone (one, T x rows). */
static int rows_off_alone(sd_backend *g, hmat *h, float *dx, int ldx, float *dy, int ldy, float *y, const float *one,
                          int T, const char *what) {
    const int rows = h->m.rows;
    dpoison(dy, (size_t)T * ldy * 4);
    CHECK_OP(g, g->i->matmul(g, &h->d, dx, ldx, dy, ldy, T), what);
    dget(y, dy, (size_t)T * ldy * 4);
    int diff = 0;
    for (int t = 0; t < T; t++) diff += !same_bits(y + (size_t)t * ldy, one + (size_t)t * rows, (size_t)rows * 4);
    return diff;
}

/* One backend pair's matmul over h: every token alone into one (T x rows), within the rounding
 * bound of r, bitwise equal at every T, tiled == gemv, and the fused LM head's argmax. */
static void mm_case(sd_backend *g, sd_backend *r, hmat *h, const float *x, float *dx, int ldx, const char *what,
                    float *one) {
    enum { TMAX = 64 };
    const int rows = h->m.rows, cols = h->m.cols, ldy = rows + 1;
    const size_t ny = (size_t)TMAX * ldy;
    float *y = malloc(ny * 4), *yref = malloc(ny * 4);
    double *mag = malloc(sizeof(double) * (size_t)TMAX * rows);
    float *dy = dput(NULL, ny * 4);
    int32_t *dout = dput(NULL, TMAX * 4), out[TMAX];

    for (int t = 0; t < TMAX; t++) {   /* every row alone */
        CHECK_OP(g, g->i->matmul(g, &h->d, dx + (size_t)t * ldx, ldx, dy, ldy, 1), what);
        dget(one + (size_t)t * rows, dy, (size_t)rows * 4);
    }
    CHECK_OP(r, r->i->matmul(r, &h->m, x, ldx, yref, ldy, TMAX), "reference matmul");
    mm_mag(&h->m, x, ldx, TMAX, mag);
    int bad = 0;
    const double u = 6e-8 * (cols / 8 + 64);   /* unit roundoff times a bound on any term's depth */
    for (int t = 0; t < TMAX; t++)
        for (int i = 0; i < rows; i++) {
            double d = fabs((double)one[(size_t)t * rows + i] - (double)yref[(size_t)t * ldy + i]);
            if (!(d <= u * mag[(size_t)t * rows + i] + 1e-30) && bad++ < 3)
                CHECK(0, "%s: row %d token %d: %.9g vs reference %.9g", what, i, t, (double)one[(size_t)t * rows + i],
                      (double)yref[(size_t)t * ldy + i]);
        }
    CHECK(bad == 0, "%s: %d values off the reference", what, bad);

    const int Ts[] = {2, 3, 4, 5, 6, 7, 8, 9, 17, 33, 64};   /* every width the gemv kernels have, 1..8 */
    for (size_t k = 0; k < sizeof Ts / sizeof Ts[0]; k++) {
        const int T = Ts[k], diff = rows_off_alone(g, h, dx, ldx, dy, ldy, y, one, T, what);
        CHECK(diff == 0, "%s: %d of %d rows at T = %d differ from the row alone (batch invariance)", what, diff, T, T);
    }
    /* every kernel gives the bits of the default pick above (gemv_i4.cu's kernel where it
     * applies, else gemv.cu's for T <= 8 where x fits, else the tiled one): the streaming kernel
     * (stream.cu) where it applies, the tiled kernel (matmul.cu) alone, the streaming kernel on
     * 3 blocks of 2 stages (several tiles a block, its stages reused), the picks without
     * gemv_i4.cu's kernel, it on 4 rows a warp, it with the other setting of what its blocks
     * fetch before their wait, and it with its preparation releasing it before or after the
     * preparation's own wait; the switches exist only where the CUDA backend is built */
#ifdef SPECDEC_HAVE_CUDA
    const char *kname[7] = {"the streaming kernel", "the tiled kernel", "the streaming kernel on 3 blocks",
                            "the generic picks (without gemv_i4.cu's kernel)", "gemv_i4.cu's kernel on 4 rows a warp",
                            "gemv_i4.cu's kernel with the other preload (sd_cuda_gi_preload)",
                            "gemv_i4.cu's kernel with the other preparation release (sd_cuda_gi_early)"};
    for (int m = 0; m < 7; m++) {
        const int pre0 = sd_cuda_gi_preload(0), early0 = sd_cuda_gi_early(0);
        sd_cuda_gi_preload(m == 5 ? !pre0 : pre0);
        sd_cuda_gi_early(m == 6 ? !early0 : early0);
        sd_cuda_matmul_kernels(m == 1 ? SD_CUDA_MM_TILED : m == 3 ? SD_CUDA_MM_GENERIC : m >= 4 ? SD_CUDA_MM_GEMV : SD_CUDA_MM_STREAM);
        if (m == 2) sd_cuda_matmul_stream_cap(3, 2);
        sd_cuda_gi_rows(m == 4 ? 4 : 0);
        const int Tk[] = {1, 2, 3, 4, 5, 6, 7, 8};
        for (size_t k = 0; k < sizeof Tk / sizeof Tk[0]; k++) {
            const int T = Tk[k], diff = rows_off_alone(g, h, dx, ldx, dy, ldy, y, one, T, what);
            CHECK(diff == 0, "%s: %d of %d rows at T = %d differ between %s and the default pick", what, diff, T, T, kname[m]);
        }
        sd_cuda_matmul_kernels(SD_CUDA_MM_GEMV);
        sd_cuda_matmul_stream_cap(0, 0);
        sd_cuda_gi_rows(0);
        sd_cuda_gi_preload(pre0);
        sd_cuda_gi_early(early0);
    }
    /* the tensor-core kernels at T >= 16 (pass 1 mma_i4.cu's; 2 and 3 mma_tile.cu's, its blocks
     * of 32 and of 16 tokens whatever the shape; 4 and 5 the same with its weights staged): the row
     * alone's bits, and taken where they apply (int8 4-bit rows of whole 1024-column runs, a group
     * of 32 to 1024; the weights staged where the scales' rows are whole 16-byte windows, else
     * the activations alone) */
    for (int mode = 1; mode <= 5; mode++) {
        const char *kns[5] = {"mma_i4.cu", "mma_tile.cu (32 tokens a block)", "mma_tile.cu (16 tokens)",
                              "mma_tile.cu staged weights (32 tokens)", "mma_tile.cu staged weights (16 tokens)"};
        const char *kn = kns[mode - 1];
        const int mq0 = sd_cuda_mma(mode == 1 ? 1 : mode <= 3 ? 2 : 4),
                  nt0 = sd_cuda_mma_tile_tokens(mode == 2 || mode == 4 ? 4 : 2);
        const long taken0 = sd_cuda_mma_taken(), staged0 = sd_cuda_mma_staged_taken();
        const int Tm[] = {16, 17, 24, 31, 33, 64};
        const int nt = (int)(sizeof Tm / sizeof Tm[0]);
        for (int k = 0; k < nt; k++) {
            const int T = Tm[k], diff = rows_off_alone(g, h, dx, ldx, dy, ldy, y, one, T, what);
            CHECK(diff == 0, "%s: %d of %d rows at T = %d differ between %s's kernel and the row alone", what, diff, T, T, kn);
        }
        sd_cuda_mma(mq0);
        sd_cuda_mma_tile_tokens(nt0);
        const int grp = h->m.group;
        const bool applies = g == G8 && sd_i8_applies(&h->m) && h->m.bits == 4 && cols % 1024 == 0 && grp >= 32 &&
                             grp <= 1024 && (grp & (grp - 1)) == 0;
        const long taken = sd_cuda_mma_taken() - taken0;
        CHECK(taken == (applies ? nt : 0), "%s: %s's kernel took %ld of %d calls, expected %d", what, kn, taken, nt,
              applies ? nt : 0);
        /* the weights staged: rows of scales of whole 16-byte windows (the arrays are allocations
         * of their own, so aligned) */
        const size_t sbytes = (size_t)(cols / (grp > 0 ? grp : 1)) * (h->m.dtype == SPECDEC_DTYPE_F32 ? 4 : 2);
        const long staged = sd_cuda_mma_staged_taken() - staged0, want = mode >= 4 && applies && sbytes % 16 == 0 ? nt : 0;
        CHECK(staged == want, "%s: %s: %ld of %d calls with the weights staged, expected %ld", what, kn, staged, nt, want);
    }
#endif

    /* fused LM head: plain and through a map (row r -> token 7 * r + 1) */
    int32_t *map = malloc(sizeof(int32_t) * (size_t)rows);
    for (int i = 0; i < rows; i++) map[i] = 7 * i + 1;
    int32_t *dmap = dput(map, sizeof(int32_t) * (size_t)rows);
    const int Tl[] = {1, 3, 5, 6, 8, 64};
    for (int km = 0; km < 3; km++) {   /* the default pick, the streaming kernel, and it on 3 blocks */
#ifdef SPECDEC_HAVE_CUDA
        sd_cuda_matmul_kernels(km ? SD_CUDA_MM_STREAM : SD_CUDA_MM_GEMV);
        sd_cuda_matmul_stream_cap(km == 2 ? 3 : 0, km == 2 ? 2 : 0);
#else
        if (km) break;
#endif
        for (size_t k = 0; k < sizeof Tl / sizeof Tl[0]; k++)
            for (int use_map = 0; use_map < 2; use_map++) {
                const int T = Tl[k];
                dpoison(dout, (size_t)T * 4);
                CHECK_OP(g, g->i->lm_argmax(g, &h->d, dx, ldx, T, use_map ? dmap : NULL, dout), "lm_argmax");
                dget(out, dout, (size_t)T * 4);
                for (int t = 0; t < T; t++) {
                    int32_t a = host_argmax(one + (size_t)t * rows, rows);
                    CHECK(out[t] == (use_map ? map[a] : a), "%s: lm_argmax T %d token %d: %d, argmax of the logits %d",
                          what, T, t, out[t], use_map ? map[a] : a);
                }
            }
    }
#ifdef SPECDEC_HAVE_CUDA
    sd_cuda_matmul_kernels(SD_CUDA_MM_GEMV);
    sd_cuda_matmul_stream_cap(0, 0);
#endif
    dfree(dmap);
    free(map);
    dfree(dy);
    dfree(dout);
    free(y); free(yref); free(mag);
}

static void test_matmul(int rows, int cols, specdec_dtype dt, int bits, int group) {
    enum { TMAX = 64 };
    hmat h = hmat_make(rows, cols, dt, bits, group, true);
    const int ldx = cols + 3;
    const size_t nx = (size_t)TMAX * ldx;
    float *x = malloc(nx * 4), *one = malloc((size_t)TMAX * rows * 4), *one8 = malloc((size_t)TMAX * rows * 4);
    fill_normal(x, nx, 1.0f);
    float *dx = dput(x, nx * 4);
    char what[128];
    snprintf(what, sizeof what, "matmul %dx%d %s %d-bit g%d", rows, cols, specdec_dtype_name(dt), bits, group);
    mm_case(G, R, &h, x, dx, ldx, what, one);
    if (G8) {
        /* int8 activations where the rule takes the matrix; elsewhere the f32 path's very bits */
        const bool takes = sd_i8_applies(&h.m);
        snprintf(what, sizeof what, "int8 matmul %dx%d %s %d-bit g%d", rows, cols, specdec_dtype_name(dt), bits, group);
        /* G8 runs on a stream of its own: the buffers G wrote must be complete, and the test's
         * device helpers (dput, dget: through G) must go through G8 while it runs */
        CHECK(G->i->sync(G, &E) == SPECDEC_OK, "sync: %s", E.msg);
        sd_backend *g0 = G;
        G = G8;
        mm_case(G8, R8, &h, x, dx, ldx, what, one8);
        CHECK(G8->i->sync(G8, &E) == SPECDEC_OK, "sync: %s", E.msg);
        G = g0;
        const bool same = same_bits(one, one8, (size_t)TMAX * rows * 4);
        CHECK(takes ? !same : same, "%s: the rule %s the matrix but its values %s the f32 path's", what,
              takes ? "takes" : "leaves", same ? "equal" : "differ from");
    }
    dfree(dx);
    free(x); free(one); free(one8);
    hmat_free(&h);
}

/* Calls wider than the 64 rows a context runs by default (--batch goes to 4096): the int8
 * tensor-core matmul at T = 200 and 256 (blocks of 32 and 16 tokens, weights staged or not, a last
 * block part full), every row the row alone's bits, and the kernel taken each time. */
static void test_matmul_wide(void) {
#ifdef SPECDEC_HAVE_CUDA
    enum { TW = 256 };
    const int rows = 512, cols = 4096, ldx = cols + 3, ldy = rows + 1;
    hmat h = hmat_make(rows, cols, SPECDEC_DTYPE_BF16, 4, 64, true);
    float *x = malloc((size_t)TW * ldx * 4), *one = malloc((size_t)TW * rows * 4), *y = malloc((size_t)TW * ldy * 4);
    fill_normal(x, (size_t)TW * ldx, 1.0f);
    float *dx = dput(x, (size_t)TW * ldx * 4);
    CHECK(G->i->sync(G, &E) == SPECDEC_OK, "sync: %s", E.msg);
    sd_backend *g0 = G;
    G = G8;   /* the device helpers through G8 while it runs (test_matmul says why) */
    float *dy = dput(NULL, (size_t)TW * ldy * 4);
    const char *what = "int8 matmul 512x4096 bf16 4-bit g64, wide calls";
    for (int t = 0; t < TW; t++) {
        CHECK_OP(G8, G8->i->matmul(G8, &h.d, dx + (size_t)t * ldx, ldx, dy, ldy, 1), what);
        dget(one + (size_t)t * rows, dy, (size_t)rows * 4);
    }
    const int modes[4][2] = {{3, 0}, {2, 2}, {4, 4}, {4, 2}};   /* (sd_cuda_mma, tokens a block / 8; 0 its rule) */
    for (int m = 0; m < 4; m++) {
        const int mq0 = sd_cuda_mma(modes[m][0]), nt0 = sd_cuda_mma_tile_tokens(modes[m][1]);
        const int Tw[2] = {200, TW};
        for (int k = 0; k < 2; k++) {
            const long taken0 = sd_cuda_mma_taken();
            const int T = Tw[k], diff = rows_off_alone(G8, &h, dx, ldx, dy, ldy, y, one, T, what);
            CHECK(diff == 0, "%s: %d of %d rows at T = %d (mode %d, %d tokens a block) differ from the row alone", what,
                  diff, T, T, modes[m][0], 8 * modes[m][1]);
            CHECK(sd_cuda_mma_taken() - taken0 == 1, "%s: T = %d did not take a tensor-core kernel (mode %d)", what, T,
                  modes[m][0]);
        }
        sd_cuda_mma(mq0);
        sd_cuda_mma_tile_tokens(nt0);
    }
    CHECK(G8->i->sync(G8, &E) == SPECDEC_OK, "sync: %s", E.msg);
    dfree(dy);
    G = g0;
    dfree(dx);
    free(x); free(one); free(y);
    hmat_free(&h);
#endif
}

/* Rows of T x n floats (ld apart) that differ bitwise between a and b. */
static int rows_differ(const float *a, const float *b, int T, int ld, int n) {
    int diff = 0;
    for (int t = 0; t < T; t++) diff += !same_bits(a + (size_t)t * ld, b + (size_t)t * ld, (size_t)n * 4);
    return diff;
}

/* n matrices of one kind (rows rs[i]) on g: h[i] each uploaded alone (sep[i] = &h[i].d), and
 * all of them uploaded end to end (jp[i] = &joined[i], sd_be_upload_mats: one launch). */
static void mats_make(sd_backend *g, int n, const int *rs, int cols, specdec_dtype dt, int bits, int group,
                      const char *what, hmat *h, sd_mat *joined, const sd_mat **sep, const sd_mat **jp) {
    const sd_mat *hp[3];
    sd_mat *jd[3];
    for (int i = 0; i < n; i++) {
        h[i] = hmat_make(rs[i], cols, dt, bits, group, true);
        hp[i] = &h[i].m;
        sep[i] = &h[i].d;
        jp[i] = &joined[i];
        jd[i] = &joined[i];
    }
    CHECK(sd_be_upload_mats(g, n, hp, "joined test weights", jd, &E) == SPECDEC_OK, "%s: upload: %s", what, E.msg);
}

static void mats_free(sd_backend *g, int n, hmat *h, sd_mat *joined) {
    for (int i = n - 1; i >= 0; i--) sd_be_unload_mat(g, &joined[i]);
    for (int i = 0; i < n; i++) hmat_free(&h[i]);
}

/* matmul_n over n matrices of one kind (rows rs[i]) on backend g: uploaded end to end
 * (sd_be_upload_mats: one launch) and uploaded apart (one launch each), every output bitwise
 * what each matrix's own matmul gives, at T from 1 to 33. */
static void test_matmul_n(sd_backend *g, int n, const int *rs, int cols, specdec_dtype dt, int bits, int group) {
    enum { TMAX = 33 };
    char what[128];
    snprintf(what, sizeof what, "matmul_n (%s) %d x [%d, %d, %d] x %d %s %d-bit g%d", g->name, n, rs[0], rs[1],
             n > 2 ? rs[2] : 0, cols, specdec_dtype_name(dt), bits, group);
    sd_backend *g0 = G;
    G = g;   /* the device helpers go through g */
    hmat h[3];
    sd_mat joined[3];
    const sd_mat *sep[3], *jp[3];
    mats_make(g, n, rs, cols, dt, bits, group, what, h, joined, sep, jp);
    for (int i = 1; i < n; i++)
        CHECK(joined[i].part && (const char *)joined[i].w == (const char *)joined[i - 1].w + sd_mat_wbytes(&h[i - 1].m),
              "%s: matrix %d not laid after matrix %d", what, i, i - 1);
    const int ldx = cols + 1;
    float *x = malloc((size_t)TMAX * ldx * 4);
    fill_normal(x, (size_t)TMAX * ldx, 1.0f);
    float *dx = dput(x, (size_t)TMAX * ldx * 4);
    float *dy[3], *dz[3], *hy = NULL, *hz = NULL;
    int ld[3];
    size_t most = 0;
    for (int i = 0; i < n; i++) {
        ld[i] = rs[i] + 2 * i + 1;
        dy[i] = dput(NULL, (size_t)TMAX * ld[i] * 4);
        dz[i] = dput(NULL, (size_t)TMAX * ld[i] * 4);
        if ((size_t)TMAX * ld[i] > most) most = (size_t)TMAX * ld[i];
    }
    hy = malloc(most * 4);
    hz = malloc(most * 4);
    const int Ts[] = {1, 2, 3, 4, 5, 6, 8, 9, 33};
    for (size_t k = 0; k < sizeof Ts / sizeof Ts[0]; k++) {
        const int T = Ts[k];
        for (int way = 0; way < 2; way++) {   /* 0: joined, 1: apart */
            for (int i = 0; i < n; i++) {   /* a skipped store shows, not an earlier call's values */
                dpoison(dy[i], (size_t)T * ld[i] * 4);
                dpoison(dz[i], (size_t)T * ld[i] * 4);
            }
            CHECK_OP(g, sd_be_matmul_n(g, n, way ? sep : jp, dx, ldx, dy, ld, T), what);
            for (int i = 0; i < n; i++) {
                CHECK_OP(g, g->i->matmul(g, &h[i].d, dx, ldx, dz[i], ld[i], T), what);
                dget(hy, dy[i], (size_t)T * ld[i] * 4);
                dget(hz, dz[i], (size_t)T * ld[i] * 4);
                const int diff = rows_differ(hy, hz, T, ld[i], rs[i]);
                CHECK(diff == 0, "%s: %s, T %d: matrix %d differs from its own matmul in %d rows", what,
                      way ? "apart" : "joined", T, i, diff);
            }
        }
    }
    for (int i = 0; i < n; i++) {
        dfree(dy[i]);
        dfree(dz[i]);
    }
    dfree(dx);
    mats_free(g, n, h, joined);
    free(x); free(hy); free(hz);
    G = g0;
}

/* ---- the fused ops: bitwise the ops they stand for ---- */

/* norm_matmul_n over n matrices (joined and apart), matmul_add and swiglu_matmul_add over the
 * first, on backend g, against the unfused ops of the same backend: outputs, the normed x and the
 * SwiGLU product bitwise, at T from 1 to 33. */
static void test_fused_mm(sd_backend *g, int n, const int *rs, int cols, specdec_dtype dt, int bits, int group) {
    enum { TMAX = 33 };
    char what[128];
    snprintf(what, sizeof what, "fused (%s) %d x [%d, %d, %d] x %d %s %d-bit g%d", g->name, n, rs[0], rs[1],
             n > 2 ? rs[2] : 0, cols, specdec_dtype_name(dt), bits, group);
    sd_backend *g0 = G;
    G = g;
    hmat h[3];
    sd_mat joined[3];
    const sd_mat *sep[3], *jp[3];
    mats_make(g, n, rs, cols, dt, bits, group, what, h, joined, sep, jp);
    const int ldx = cols + 3;
    const size_t nx = (size_t)TMAX * ldx;
    float *x = malloc(nx * 4), *w = malloc((size_t)cols * 4), *hu = malloc(nx * 4);
    fill_normal(x, nx, 1.5f);
    fill_normal(w, (size_t)cols, 1.0f);
    fill_normal(hu, nx, 1.0f);
    float *dx = dput(x, nx * 4), *dw = dput(w, (size_t)cols * 4), *dxn = dput(NULL, nx * 4), *dxr = dput(NULL, nx * 4);
    float *dy[3], *dz[3], *hy = NULL, *hz = NULL;
    int ld[3];
    size_t most = nx;
    for (int i = 0; i < n; i++) {
        ld[i] = rs[i] + i + 1;
        dy[i] = dput(NULL, (size_t)TMAX * ld[i] * 4);
        dz[i] = dput(NULL, (size_t)TMAX * ld[i] * 4);
        if ((size_t)TMAX * ld[i] > most) most = (size_t)TMAX * ld[i];
    }
    hy = malloc(most * 4);
    hz = malloc(most * 4);
    const int Ts[] = {1, 2, 3, 5, 8, 9, 33};
    for (size_t k = 0; k < sizeof Ts / sizeof Ts[0]; k++) {
        const int T = Ts[k];
        for (int way = 0; way < 3; way++) {   /* 0: joined, 1: apart, 2: joined, the norm preparation in one block */
#ifdef SPECDEC_HAVE_CUDA
            sd_cuda_norm_blocks(way != 2);
#endif
            CHECK_OP(g, sd_be_norm_matmul_n(g, dw, 1e-6f, dx, ldx, dxn, ldx, n, way == 1 ? sep : jp, dy, ld, T), what);
#ifdef SPECDEC_HAVE_CUDA
            sd_cuda_norm_blocks(1);
#endif
            CHECK_OP(g, g->i->rmsnorm(g, dxr, ldx, dx, ldx, dw, cols, T, 1e-6f), what);
            CHECK_OP(g, sd_be_matmul_n(g, n, sep, dxr, ldx, dz, ld, T), what);
            dget(hy, dxn, (size_t)T * ldx * 4);
            dget(hz, dxr, (size_t)T * ldx * 4);
            int d = rows_differ(hy, hz, T, ldx, cols);
            const char *how = way == 0 ? "joined" : way == 1 ? "apart" : "joined, one block";
            CHECK(d == 0, "%s: norm_matmul_n %s, T %d: the normed x differs from rmsnorm's in %d rows", what, how, T, d);
            for (int i = 0; i < n; i++) {
                dget(hy, dy[i], (size_t)T * ld[i] * 4);
                dget(hz, dz[i], (size_t)T * ld[i] * 4);
                d = rows_differ(hy, hz, T, ld[i], rs[i]);
                CHECK(d == 0, "%s: norm_matmul_n %s, T %d: matrix %d differs from rmsnorm + matmul in %d rows", what,
                      how, T, i, d);
            }
        }
        /* matmul_add: y (random) += x W0^T, against matmul into scratch then add */
        const int l0 = ld[0], r0 = rs[0];
        float *y0 = malloc((size_t)T * l0 * 4);
        fill_normal(y0, (size_t)T * l0, 1.0f);
        CHECK(g->i->write(g, dy[0], y0, (size_t)T * l0 * 4, &E) == SPECDEC_OK, "write: %s", E.msg);
        CHECK(g->i->write(g, dz[0], y0, (size_t)T * l0 * 4, &E) == SPECDEC_OK, "write: %s", E.msg);
        CHECK_OP(g, sd_be_matmul_add(g, &h[0].d, dx, ldx, dy[0], l0, T, NULL), what);
        CHECK_OP(g, g->i->matmul(g, &h[0].d, dx, ldx, dxr, l0, T), what);
        for (int t = 0; t < T; t++)
            CHECK_OP(g, g->i->add(g, dz[0] + (size_t)t * l0, dxr + (size_t)t * l0, (size_t)r0), what);
        dget(hy, dy[0], (size_t)T * l0 * 4);
        dget(hz, dz[0], (size_t)T * l0 * 4);
        int d = rows_differ(hy, hz, T, l0, r0);
        CHECK(d == 0, "%s: matmul_add, T %d: %d rows differ from matmul + add", what, T, d);
        /* swiglu_matmul_add over (T, cols) g and u: g is written as silu_mul writes it */
        float *dg = dput(x, (size_t)T * cols * 4), *dg2 = dput(x, (size_t)T * cols * 4), *du = dput(hu, (size_t)T * cols * 4);
        CHECK(g->i->write(g, dy[0], y0, (size_t)T * l0 * 4, &E) == SPECDEC_OK, "write: %s", E.msg);
        CHECK(g->i->write(g, dz[0], y0, (size_t)T * l0 * 4, &E) == SPECDEC_OK, "write: %s", E.msg);
        CHECK_OP(g, sd_be_swiglu_matmul_add(g, &h[0].d, dg, du, dy[0], l0, T, NULL), what);
        CHECK_OP(g, g->i->silu_mul(g, dg2, du, cols, T), what);
        CHECK_OP(g, g->i->matmul(g, &h[0].d, dg2, cols, dxr, l0, T), what);
        for (int t = 0; t < T; t++)
            CHECK_OP(g, g->i->add(g, dz[0] + (size_t)t * l0, dxr + (size_t)t * l0, (size_t)r0), what);
        dget(hy, dg, (size_t)T * cols * 4);
        dget(hz, dg2, (size_t)T * cols * 4);
        CHECK(same_bits(hy, hz, (size_t)T * cols * 4), "%s: swiglu_matmul_add, T %d: g differs from silu_mul's", what, T);
        dget(hy, dy[0], (size_t)T * l0 * 4);
        dget(hz, dz[0], (size_t)T * l0 * 4);
        d = rows_differ(hy, hz, T, l0, r0);
        CHECK(d == 0, "%s: swiglu_matmul_add, T %d: %d rows differ from silu_mul + matmul + add", what, T, d);
        dfree(dg); dfree(dg2); dfree(du);
        free(y0);
    }
    /* in place: xn == x */
    CHECK_OP(g, g->i->rmsnorm(g, dxr, ldx, dx, ldx, dw, cols, 5, 1e-6f), what);
    CHECK_OP(g, sd_be_matmul_n(g, n, sep, dxr, ldx, dz, ld, 5), what);
    CHECK_OP(g, sd_be_norm_matmul_n(g, dw, 1e-6f, dx, ldx, dx, ldx, n, jp, dy, ld, 5), what);
    dget(hy, dx, (size_t)5 * ldx * 4);
    dget(hz, dxr, (size_t)5 * ldx * 4);
    CHECK(rows_differ(hy, hz, 5, ldx, cols) == 0, "%s: norm_matmul_n in place: the normed x differs", what);
    for (int i = 0; i < n; i++) {
        dget(hy, dy[i], (size_t)5 * ld[i] * 4);
        dget(hz, dz[i], (size_t)5 * ld[i] * 4);
        CHECK(rows_differ(hy, hz, 5, ld[i], rs[i]) == 0, "%s: norm_matmul_n in place: matrix %d differs", what, i);
    }
    for (int i = 0; i < n; i++) {
        dfree(dy[i]);
        dfree(dz[i]);
    }
    dfree(dx); dfree(dw); dfree(dxn); dfree(dxr);
    mats_free(g, n, h, joined);
    free(x); free(w); free(hu); free(hy); free(hz);
    G = g0;
}

/* norm_mlp_add (gate and up end to end, down alone; hidden H, intermediate I) on g against the
 * ops one by one on the same backend (rmsnorm, matmul gate, matmul up, silu_mul, matmul down into
 * scratch, add): x, xn, g and u bitwise, at T from 1 to 9, with the fused MLP launch wherever
 * the kernel takes it (sd_cuda_mlp_fuse(2): these shapes are too small for the default rule)
 * and without it (norm_matmul_n, then swiglu_matmul_add). */
static void test_mlp(sd_backend *g, int H, int I, specdec_dtype dt, int bits, int group, bool gemv) {
    enum { TMAX = 9 };
    char what[128];
    snprintf(what, sizeof what, "norm_mlp_add (%s) H %d I %d %s %d-bit g%d", g->name, H, I, specdec_dtype_name(dt), bits,
             group);
    sd_backend *g0 = G;
    G = g;
    hmat h[2];
    sd_mat joined[2];
    const sd_mat *sep[2], *jp[2];
    const int rs[2] = {I, I};
    mats_make(g, 2, rs, H, dt, bits, group, what, h, joined, sep, jp);
    hmat dn = hmat_make(H, I, dt, bits, group, true);
    const size_t nx = (size_t)TMAX * H, ni = (size_t)TMAX * I, nh = nx > ni ? nx : ni;   /* ha, hb: rows of H or I */
    float *x = malloc(nx * 4), *w = malloc((size_t)H * 4), *ha = malloc(nh * 4), *hb = malloc(nh * 4);
    fill_normal(x, nx, 1.5f);
    fill_normal(w, (size_t)H, 1.0f);
    float *dw = dput(w, (size_t)H * 4);
    float *dx[2], *dxn[2], *dg[2], *du[2], *dt2 = dput(NULL, nx * 4);
    for (int k = 0; k < 2; k++) {
        dx[k] = dput(x, nx * 4);
        dxn[k] = dput(NULL, nx * 4);
        dg[k] = dput(NULL, ni * 4);
        du[k] = dput(NULL, ni * 4);
    }
    const int Ts[] = {1, 2, 3, 5, 8, 9};
    for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++)
        for (int fuse = 2; fuse >= 0; fuse--) {   /* 2: fused, with the other preload and preparation release settings */
            const int T = Ts[ti];
            for (int k = 0; k < 2; k++) CHECK(g->i->write(g, dx[k], x, nx * 4, &E) == SPECDEC_OK, "write: %s", E.msg);
#ifdef SPECDEC_HAVE_CUDA
            const int pre0 = sd_cuda_gi_preload(0), early0 = sd_cuda_gi_early(0);
            sd_cuda_gi_preload(fuse == 2 ? !pre0 : pre0);
            sd_cuda_gi_early(fuse == 2 ? !early0 : early0);
            sd_cuda_mlp_fuse(fuse ? 2 : 0);
            const long n0 = sd_cuda_mlp_taken();
#endif
            CHECK_OP(g, sd_be_norm_mlp_add(g, dw, 1e-6f, dx[0], H, dxn[0], H, jp[0], jp[1], &dn.d, dg[0], du[0], T, dt2),
                     what);
#ifdef SPECDEC_HAVE_CUDA
            sd_cuda_mlp_fuse(1);
            sd_cuda_gi_preload(pre0);
            sd_cuda_gi_early(early0);
            /* the fused launch is taken exactly where it applies: int8, 4-bit rows, T <= 2, the
             * default kernels (these shapes have fewer 32-row groups than blocks fit the GPU) */
            const bool expect = fuse && gemv && g->int8 && bits == 4 && T <= 2;
            CHECK((sd_cuda_mlp_taken() > n0) == expect, "%s, T %d: the fused MLP launch %s", what, T,
                  expect ? "was not taken" : "was taken where it does not apply");
#else
            (void)gemv;
#endif
            /* the ops one by one */
            CHECK_OP(g, g->i->rmsnorm(g, dxn[1], H, dx[1], H, dw, H, T, 1e-6f), what);
            CHECK_OP(g, g->i->matmul(g, sep[0], dxn[1], H, dg[1], I, T), what);
            CHECK_OP(g, g->i->matmul(g, sep[1], dxn[1], H, du[1], I, T), what);
            CHECK_OP(g, g->i->silu_mul(g, dg[1], du[1], I, T), what);
            CHECK_OP(g, g->i->matmul(g, &dn.d, dg[1], I, dt2, H, T), what);
            CHECK_OP(g, g->i->add(g, dx[1], dt2, (size_t)T * H), what);
            const char *how = fuse == 2 ? "fused, other preload" : fuse ? "fused" : "two ops";
            const struct { float *a, *b; int n; const char *name; } cmp[4] = {
                {dxn[0], dxn[1], H, "xn"}, {du[0], du[1], I, "u"}, {dg[0], dg[1], I, "g (silu(g) * u)"}, {dx[0], dx[1], H, "x"}};
            for (int c = 0; c < 4; c++) {
                dget(ha, cmp[c].a, (size_t)T * cmp[c].n * 4);
                dget(hb, cmp[c].b, (size_t)T * cmp[c].n * 4);
                const int d = rows_differ(ha, hb, T, cmp[c].n, cmp[c].n);
                CHECK(d == 0, "%s (%s), T %d: %s differs from the ops one by one in %d rows", what, how, T, cmp[c].name, d);
            }
        }
    for (int k = 0; k < 2; k++) {
        dfree(dx[k]);
        dfree(dxn[k]);
        dfree(dg[k]);
        dfree(du[k]);
    }
    dfree(dt2);
    dfree(dw);
    hmat_free(&dn);
    mats_free(g, 2, h, joined);
    free(x); free(w); free(ha); free(hb);
    G = g0;
}

/* qk_norm_rope_store against q_norm, k_norm, two ropes and two KV stores on the same backend:
 * q, k and both caches bitwise, rows at positions 40.. of a 64-row cache. */
static void test_qkv_fused(int nh, int nkv, int hd, sd_kv_dtype_e kdt, int T) {
    enum { NCTX = 64 };
    char what[96];
    snprintf(what, sizeof what, "qk_norm_rope_store %d/%d heads x %d, kv dtype %d, T %d", nh, nkv, hd, (int)kdt, T);
    const size_t nq = (size_t)T * nh * hd, nk = (size_t)T * nkv * hd, half = (size_t)hd / 2;
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *qw = malloc((size_t)hd * 4), *kw = malloc((size_t)hd * 4);
    float *ct = malloc(NCTX * half * 4), *st = malloc(NCTX * half * 4);
    fill_normal(q, nq, 2.0f);
    fill_normal(k, nk, 2.0f);
    fill_normal(v, nk, 2.0f);
    fill_normal(qw, (size_t)hd, 1.0f);
    fill_normal(kw, (size_t)hd, 1.0f);
    for (size_t i = 0; i < NCTX * half; i++) { ct[i] = cosf(0.011f * (float)i); st[i] = sinf(0.011f * (float)i); }
    const size_t cb = sd_kv_elem_size(kdt) * NCTX * (size_t)nkv * hd;
    float *dq = dput(q, nq * 4), *dk = dput(k, nk * 4), *dv = dput(v, nk * 4), *dq2 = dput(q, nq * 4), *dk2 = dput(k, nk * 4);
    float *dqw = dput(qw, (size_t)hd * 4), *dkw = dput(kw, (size_t)hd * 4), *dct = dput(ct, NCTX * half * 4),
          *dst = dput(st, NCTX * half * 4);
    void *kc = dput(NULL, cb), *vc = dput(NULL, cb), *kc2 = dput(NULL, cb), *vc2 = dput(NULL, cb);
    int32_t *dbase = dint(37);
    const sd_pos pos = {dbase, 3};
    const sd_attn_shape as = {nh, nkv, hd, kdt};
    const sd_kv_layer kv = {kc, vc};
    CHECK_OP(G, G->i->qk_norm_rope_store(G, &as, &kv, dq, dk, dv, dqw, dkw, 1e-6f, T, pos, dct, dst), what);
    CHECK_OP(G, G->i->rmsnorm(G, dq2, hd, dq2, hd, dqw, hd, T * nh, 1e-6f), what);
    CHECK_OP(G, G->i->rmsnorm(G, dk2, hd, dk2, hd, dkw, hd, T * nkv, 1e-6f), what);
    CHECK_OP(G, G->i->rope(G, dq2, T, nh, hd, pos, dct, dst), what);
    CHECK_OP(G, G->i->rope(G, dk2, T, nkv, hd, pos, dct, dst), what);
    CHECK_OP(G, G->i->kv_store(G, kdt, kc2, nkv * hd, dk2, T, pos), what);
    CHECK_OP(G, G->i->kv_store(G, kdt, vc2, nkv * hd, dv, T, pos), what);
    float *a = malloc(nq * 4), *b = malloc(nq * 4);
    unsigned char *ca = malloc(cb), *cbuf = malloc(cb);
    dget(a, dq, nq * 4); dget(b, dq2, nq * 4);
    CHECK(same_bits(a, b, nq * 4), "%s: q differs", what);
    dget(a, dk, nk * 4); dget(b, dk2, nk * 4);
    CHECK(same_bits(a, b, nk * 4), "%s: k differs", what);
    dget(ca, kc, cb); dget(cbuf, kc2, cb);
    CHECK(same_bits(ca, cbuf, cb), "%s: k cache differs", what);
    dget(ca, vc, cb); dget(cbuf, vc2, cb);
    CHECK(same_bits(ca, cbuf, cb), "%s: v cache differs", what);
    dfree(dq); dfree(dk); dfree(dv); dfree(dq2); dfree(dk2); dfree(dqw); dfree(dkw); dfree(dct); dfree(dst);
    dfree(kc); dfree(vc); dfree(kc2); dfree(vc2); dfree(dbase);
    free(q); free(k); free(v); free(qw); free(kw); free(ct); free(st); free(a); free(b); free(ca); free(cbuf);
}

/* ---- embed, rmsnorm, rope, silu_mul, add, kv_store ---- */

static void test_embed(int rows, int cols, specdec_dtype dt, int bits, int group) {
    hmat h = hmat_make(rows, cols, dt, bits, group, true);
    enum { T = 7 };
    int32_t ids[T];
    for (int t = 0; t < T; t++) ids[t] = (int32_t)(rnd() % (uint64_t)rows);
    ids[T - 1] = rows - 1;
    const int ldx = cols + 2;
    int32_t *dids = dput(ids, sizeof ids);
    float *dx = dput(NULL, sizeof(float) * T * ldx), *x = malloc(sizeof(float) * T * ldx), *want = malloc(sizeof(float) * cols);
    CHECK_OP(G, G->i->embed(G, &h.d, dids, T, dx, ldx), "embed");
    dget(x, dx, sizeof(float) * T * ldx);
    for (int t = 0; t < T; t++) {
        sd_mat_row_f32(&h.m, ids[t], want);
        CHECK(same_bits(x + (size_t)t * ldx, want, sizeof(float) * cols), "embed %s %d-bit: row %d differs from sd_mat_row_f32",
              specdec_dtype_name(dt), bits, ids[t]);
    }
    dfree(dids); dfree(dx); free(x); free(want);
    hmat_free(&h);
}

static void test_rmsnorm(int n) {
    enum { T = 9 };
    const int ld = n + 5;
    const size_t nx = (size_t)T * ld;
    float *x = malloc(nx * 4), *w = malloc((size_t)n * 4), *o = malloc(nx * 4), *ref = malloc(nx * 4), *o1 = malloc(nx * 4);
    fill_normal(x, nx, 2.0f);
    fill_normal(w, (size_t)n, 1.0f);
    float *dx = dput(x, nx * 4), *dw = dput(w, (size_t)n * 4), *dout = dput(NULL, nx * 4);
    CHECK_OP(G, G->i->rmsnorm(G, dout, ld, dx, ld, dw, n, T, 1e-6f), "rmsnorm");
    dget(o, dout, nx * 4);
    CHECK_OP(R, R->i->rmsnorm(R, ref, ld, x, ld, w, n, T, 1e-6f), "reference rmsnorm");
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < n; i++) {
            double a = o[(size_t)t * ld + i], b = ref[(size_t)t * ld + i];
            if (!(fabs(a - b) <= 4e-6 * fabs(b) + 1e-30)) {
                CHECK(0, "rmsnorm n %d: row %d entry %d: %.9g vs %.9g", n, t, i, a, b);
                break;
            }
        }
        CHECK_OP(G, G->i->rmsnorm(G, dout, ld, dx + (size_t)t * ld, ld, dw, n, 1, 1e-6f), "rmsnorm T=1");
        dget(o1, dout, (size_t)n * 4);
        CHECK(same_bits(o1, o + (size_t)t * ld, (size_t)n * 4), "rmsnorm n %d: row %d alone differs", n, t);
    }
    CHECK_OP(G, G->i->rmsnorm(G, dx, ld, dx, ld, dw, n, T, 1e-6f), "rmsnorm in place");
    dget(o1, dx, nx * 4);
    for (int t = 0; t < T; t++)
        CHECK(same_bits(o1 + (size_t)t * ld, o + (size_t)t * ld, (size_t)n * 4), "rmsnorm n %d in place: row %d differs", n, t);
    dfree(dx); dfree(dw); dfree(dout);
    free(x); free(w); free(o); free(ref); free(o1);
}

static void test_pointwise(void) {
    /* rope: rows at positions 12..16 (base 10, off 2), tables of 64 positions */
    enum { T = 5, NH = 3, HD = 16, NCTX = 64 };
    float x[T * NH * HD], xr[T * NH * HD], ct[NCTX * HD / 2], st[NCTX * HD / 2];
    fill_normal(x, T * NH * HD, 1.0f);
    for (int i = 0; i < NCTX * HD / 2; i++) { ct[i] = cosf(0.37f * i); st[i] = sinf(0.37f * i); }
    memcpy(xr, x, sizeof x);
    int32_t base = 10;
    int32_t *dbase = dint(base);
    float *dxp = dput(x, sizeof x), *dct = dput(ct, sizeof ct), *dst = dput(st, sizeof st);
    CHECK_OP(G, G->i->rope(G, dxp, T, NH, HD, (sd_pos){dbase, 2}, dct, dst), "rope");
    CHECK_OP(R, R->i->rope(R, xr, T, NH, HD, (sd_pos){&base, 2}, ct, st), "reference rope");
    dget(x, dxp, sizeof x);
    CHECK(same_bits(x, xr, sizeof x), "rope differs from the reference");

    /* silu_mul (expf differs by ulps from libm's), then add (exact) on the device's result */
    enum { N = 1000, TT = 3 };
    static float g[N * TT], u[N * TT], gr[N * TT], a[N * TT];
    fill_normal(g, N * TT, 3.0f);
    fill_normal(u, N * TT, 1.0f);
    memcpy(gr, g, sizeof g);
    float *dg = dput(g, sizeof g), *du = dput(u, sizeof u);
    CHECK_OP(G, G->i->silu_mul(G, dg, du, N, TT), "silu_mul");
    CHECK_OP(R, R->i->silu_mul(R, gr, u, N, TT), "reference silu_mul");
    dget(g, dg, sizeof g);
    int bad = 0;
    for (int i = 0; i < N * TT; i++) bad += !(fabsf(g[i] - gr[i]) <= 4e-7f * fabsf(gr[i]) + 1e-30f);
    CHECK(bad == 0, "silu_mul: %d values off the reference", bad);
    memcpy(a, g, sizeof a);
    CHECK_OP(G, G->i->add(G, dg, du, (size_t)N * TT), "add");
    CHECK_OP(R, R->i->add(R, a, u, (size_t)N * TT), "reference add");
    dget(g, dg, sizeof g);
    CHECK(same_bits(g, a, sizeof g), "add differs from the reference");

    /* kv_store: rows 3..6 of a 10-row cache, each dtype, bitwise the reference */
    enum { RE = 40, NR = 10, KT = 4 };
    float src[KT * RE];
    fill_normal(src, KT * RE, 5.0f);
    src[0] = NAN; src[1] = INFINITY; src[2] = 1e-30f; src[3] = 70000.0f;
    float *dsrc = dput(src, sizeof src);
    int32_t kbase = 1;
    int32_t *dkb = dint(kbase);
    for (int dt = 0; dt < 3; dt++) {
        size_t bytes = sd_kv_elem_size((sd_kv_dtype_e)dt) * NR * RE;
        unsigned char *hc = calloc(1, bytes), *gc = malloc(bytes);
        void *dc = dput(NULL, bytes);
        CHECK_OP(G, G->i->kv_store(G, (sd_kv_dtype_e)dt, dc, RE, dsrc, KT, (sd_pos){dkb, 2}), "kv_store");
        CHECK_OP(R, R->i->kv_store(R, (sd_kv_dtype_e)dt, hc, RE, src, KT, (sd_pos){&kbase, 2}), "reference kv_store");
        dget(gc, dc, bytes);
        CHECK(same_bits(gc, hc, bytes), "kv_store dtype %d differs from the reference", dt);
        dfree(dc);
        free(hc); free(gc);
    }
    dfree(dsrc); dfree(dkb); dfree(dbase); dfree(dxp); dfree(dct); dfree(dst); dfree(dg); dfree(du);
}

/* ---- attention ---- */

static void test_attention(int nh, int nkv, int hd, sd_kv_dtype_e dt, int pos0) {
    enum { TMAX = 9 };
    const sd_attn_shape s = {nh, nkv, hd, dt};
    const int n_ctx = pos0 + TMAX, row = nkv * hd, qn = nh * hd;
    const size_t es = sd_kv_elem_size(dt), cbytes = (size_t)n_ctx * row * es;
    unsigned char *k = malloc(cbytes), *v = malloc(cbytes);
    float *tmp = calloc((size_t)n_ctx * row, sizeof(float));
    fill_normal(tmp, (size_t)n_ctx * row, 1.0f);
    int32_t zero = 0;
    CHECK_OP(R, R->i->kv_store(R, dt, k, row, tmp, n_ctx, (sd_pos){&zero, 0}), "reference kv_store");
    fill_normal(tmp, (size_t)n_ctx * row, 1.0f);
    CHECK_OP(R, R->i->kv_store(R, dt, v, row, tmp, n_ctx, (sd_pos){&zero, 0}), "reference kv_store");
    float *q = malloc(sizeof(float) * TMAX * qn), *o = malloc(sizeof(float) * TMAX * qn);
    float *ref = malloc(sizeof(float) * TMAX * qn), *one = malloc(sizeof(float) * TMAX * qn);
    fill_normal(q, (size_t)TMAX * qn, 1.5f);
    sd_kv_layer hkv = {k, v}, dkv = {dput(k, cbytes), dput(v, cbytes)};
    float *dq = dput(q, sizeof(float) * TMAX * qn), *dout = dput(NULL, sizeof(float) * TMAX * qn);
    int32_t *dp = dint(pos0);
    char what[96];
#ifdef SPECDEC_HAVE_CUDA
    sd_cuda_attention_kernel(0);   /* the split kernel first; the staged one is checked against it below */
#endif
    snprintf(what, sizeof what, "attention %d/%d heads, hd %d, kv dtype %d, at %d", nh, nkv, hd, (int)dt, pos0);

    CHECK_OP(R, R->i->attention(R, &s, &hkv, q, ref, TMAX, (sd_pos){&pos0, 0}), "reference attention");
    for (int t = 0; t < TMAX; t++) {
        CHECK_OP(G, G->i->attention(G, &s, &dkv, dq + (size_t)t * qn, dout, 1, (sd_pos){dp, t}), what);
        dget(one + (size_t)t * qn, dout, sizeof(float) * qn);
    }
    int bad = 0;
    for (int i = 0; i < TMAX * qn; i++) bad += !(fabsf(one[i] - ref[i]) <= 2e-5f);
    CHECK(bad == 0, "%s: %d values off the reference", what, bad);
    const int Ts[] = {4, 9};
    for (int k2 = 0; k2 < 2; k2++) {
        CHECK_OP(G, G->i->attention(G, &s, &dkv, dq, dout, Ts[k2], (sd_pos){dp, 0}), what);
        dget(o, dout, sizeof(float) * Ts[k2] * qn);
        CHECK(same_bits(o, one, sizeof(float) * Ts[k2] * qn), "%s: rows at T = %d differ from the rows alone", what, Ts[k2]);
    }
    /* the same 9 rows as a call of 2 then a call of 7 */
    CHECK_OP(G, G->i->attention(G, &s, &dkv, dq, dout, 2, (sd_pos){dp, 0}), what);
    CHECK_OP(G, G->i->attention(G, &s, &dkv, dq + 2 * qn, dout + 2 * qn, 7, (sd_pos){dp, 2}), what);
    dget(o, dout, sizeof(float) * TMAX * qn);
    CHECK(same_bits(o, one, sizeof(float) * TMAX * qn), "%s: a call split 2 + 7 differs", what);
#ifdef SPECDEC_HAVE_CUDA
    /* the staged kernel (attn_staged.cu): the same bits, alone, at T = 9 and split 2 + 7, with a
     * block serving one row (the rule below 16 rows), 2, 4 or 16 rows in turn (the rows of a
     * block share its staged keys; 16: one block for all 9), and in the teams form with 2 and 4
     * teams (rows of a block at once; at T = 9 the last block's teams partly idle) */
    sd_cuda_attention_kernel(1);
    const int rowsv[6] = {0, 2, 4, 16, 0, 0}, teamsv[6] = {1, 0, 0, 0, 2, 4};
    for (int pass = 0; pass < 18; pass++) {
        const int rows = rowsv[pass / 3], teams = teamsv[pass / 3];
        sd_cuda_attention_rows(rows);
        sd_cuda_attention_teams(teams);
        dpoison(dout, sizeof(float) * TMAX * qn);
        if (pass % 3 == 0)
            for (int t = 0; t < TMAX; t++)
                CHECK_OP(G, G->i->attention(G, &s, &dkv, dq + (size_t)t * qn, dout + (size_t)t * qn, 1, (sd_pos){dp, t}), what);
        else if (pass % 3 == 1) CHECK_OP(G, G->i->attention(G, &s, &dkv, dq, dout, TMAX, (sd_pos){dp, 0}), what);
        else {
            CHECK_OP(G, G->i->attention(G, &s, &dkv, dq, dout, 2, (sd_pos){dp, 0}), what);
            CHECK_OP(G, G->i->attention(G, &s, &dkv, dq + 2 * qn, dout + 2 * qn, 7, (sd_pos){dp, 2}), what);
        }
        dget(o, dout, sizeof(float) * TMAX * qn);
        CHECK(same_bits(o, one, sizeof(float) * TMAX * qn),
              "%s: the staged kernel differs from the split kernel (pass %d, rows a block %d, teams %d)", what, pass % 3,
              rows, teams);
    }
    sd_cuda_attention_rows(0);
    sd_cuda_attention_teams(0);
    sd_cuda_attention_kernel(1);   /* back to the default */
#endif
    dfree(dkv.k); dfree(dkv.v); dfree(dq); dfree(dout); dfree(dp);
    free(k); free(v); free(tmp); free(q); free(o); free(ref); free(one);
}

#ifdef SPECDEC_HAVE_CUDA
/* A wide call's attention (--batch above 64): 32/8 heads, hd 128, f32 cache, T = 200 rows at
 * positions 3950.. (their keys cross 4096, where slot 0 takes a second chunk for the later rows
 * only), in the teams form with 4 and 2 teams and in the rows-in-turn form: the bits of every row
 * alone. */
static void test_attention_wide(void) {
    enum { TW = 200, POS0 = 3950 };
    const sd_attn_shape s = {32, 8, 128, SD_KV_F32};
    const int n_ctx = POS0 + TW, row = 8 * 128, qn = 32 * 128;
    float *kv = malloc(sizeof(float) * (size_t)n_ctx * row), *q = malloc(sizeof(float) * (size_t)TW * qn);
    float *one = malloc(sizeof(float) * (size_t)TW * qn), *o = malloc(sizeof(float) * (size_t)TW * qn);
    fill_normal(kv, (size_t)n_ctx * row, 1.0f);
    sd_kv_layer dkv;
    dkv.k = dput(kv, sizeof(float) * (size_t)n_ctx * row);
    fill_normal(kv, (size_t)n_ctx * row, 1.0f);
    dkv.v = dput(kv, sizeof(float) * (size_t)n_ctx * row);
    fill_normal(q, (size_t)TW * qn, 1.5f);
    float *dq = dput(q, sizeof(float) * (size_t)TW * qn), *dout = dput(NULL, sizeof(float) * (size_t)TW * qn);
    int32_t *dp = dint(POS0);
    const char *what = "attention 32/8 heads, hd 128, f32 KV, T = 200 at 3950";
    sd_cuda_attention_kernel(1);
    for (int t = 0; t < TW; t++)
        CHECK_OP(G, G->i->attention(G, &s, &dkv, dq + (size_t)t * qn, dout + (size_t)t * qn, 1, (sd_pos){dp, t}), what);
    dget(one, dout, sizeof(float) * (size_t)TW * qn);
    const int teams[3] = {0, 2, 1}, rows[3] = {0, 0, 4};   /* the rule (4 teams), 2 teams, 4 rows in turn */
    for (int v = 0; v < 3; v++) {
        sd_cuda_attention_teams(teams[v]);
        sd_cuda_attention_rows(rows[v]);
        dpoison(dout, sizeof(float) * (size_t)TW * qn);
        CHECK_OP(G, G->i->attention(G, &s, &dkv, dq, dout, TW, (sd_pos){dp, 0}), what);
        dget(o, dout, sizeof(float) * (size_t)TW * qn);
        CHECK(same_bits(o, one, sizeof(float) * (size_t)TW * qn), "%s: teams %d, rows %d: differs from the rows alone",
              what, teams[v], rows[v]);
    }
    sd_cuda_attention_teams(0);
    sd_cuda_attention_rows(0);
    dfree(dkv.k); dfree(dkv.v); dfree(dq); dfree(dout); dfree(dp);
    free(kv); free(q); free(one); free(o);
}

/* qk_norm_rope_attention (the fused form, attention.h's sdc_attention_fused) against
 * qk_norm_rope_store then attention on the same backend, T rows at positions pos0.. over a cache
 * whose earlier rows are random: out and both caches bitwise; the same rows as T calls of one
 * row (the fused form reads this call's earlier keys from its own staging at T > 1, from the
 * cache at T = 1): bitwise again. The fused launch is taken exactly where it applies (T <= 16,
 * K and V chunks fitting in shared memory) and not when it is turned off. */
static void test_attn_fused(int nh, int nkv, int hd, sd_kv_dtype_e kdt, int pos0, int T, bool fits) {
    char what[128];
    snprintf(what, sizeof what, "qk_norm_rope_attention %d/%d heads x %d, kv dtype %d, at %d, T %d", nh, nkv, hd, (int)kdt,
             pos0, T);
    const int n_ctx = pos0 + T + 3, row = nkv * hd, qn = nh * hd;
    const size_t nq = (size_t)T * qn, nk = (size_t)T * row, half = (size_t)hd / 2;
    const size_t cb = sd_kv_elem_size(kdt) * (size_t)n_ctx * row;
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *qw = malloc((size_t)hd * 4),
          *kw = malloc((size_t)hd * 4), *ct = malloc(n_ctx * half * 4), *st = malloc(n_ctx * half * 4),
          *tmp = malloc((size_t)n_ctx * row * 4);
    fill_normal(q, nq, 2.0f);
    fill_normal(k, nk, 2.0f);
    fill_normal(v, nk, 2.0f);
    fill_normal(qw, (size_t)hd, 1.0f);
    fill_normal(kw, (size_t)hd, 1.0f);
    for (size_t i = 0; i < (size_t)n_ctx * half; i++) { ct[i] = cosf(0.013f * (float)i); st[i] = sinf(0.013f * (float)i); }
    unsigned char *hk = malloc(cb), *hv = malloc(cb), *ha = malloc(cb), *hb = malloc(cb);
    int32_t zero = 0;
    fill_normal(tmp, (size_t)n_ctx * row, 1.0f);
    CHECK_OP(R, R->i->kv_store(R, kdt, hk, row, tmp, n_ctx, (sd_pos){&zero, 0}), "reference kv_store");
    fill_normal(tmp, (size_t)n_ctx * row, 1.0f);
    CHECK_OP(R, R->i->kv_store(R, kdt, hv, row, tmp, n_ctx, (sd_pos){&zero, 0}), "reference kv_store");
    float *dqw = dput(qw, (size_t)hd * 4), *dkw = dput(kw, (size_t)hd * 4), *dct = dput(ct, n_ctx * half * 4),
          *dst = dput(st, n_ctx * half * 4), *dv = dput(v, nk * 4);
    int32_t *dbase = dint(pos0);
    const sd_attn_shape as = {nh, nkv, hd, kdt};
    float *out[3], *hout[3];
    sd_kv_layer kv[3];
    for (int m = 0; m < 3; m++) {   /* 0: fused, 1: the two ops, 2: the fused op a row at a time */
        kv[m] = (sd_kv_layer){dput(hk, cb), dput(hv, cb)};
        out[m] = dput(NULL, nq * 4);
        dpoison(out[m], nq * 4);
        hout[m] = malloc(nq * 4);
        float *dq = dput(q, nq * 4), *dk = dput(k, nk * 4);
        const long n0 = sd_cuda_attention_fused_taken();
        if (m == 1) {
            CHECK_OP(G, G->i->qk_norm_rope_store(G, &as, &kv[m], dq, dk, dv, dqw, dkw, 1e-6f, T, (sd_pos){dbase, 0}, dct,
                                                 dst), what);
            CHECK_OP(G, G->i->attention(G, &as, &kv[m], dq, out[m], T, (sd_pos){dbase, 0}), what);
        } else if (m == 0) {
            CHECK_OP(G, G->i->qk_norm_rope_attention(G, &as, &kv[m], dq, dk, dv, dqw, dkw, 1e-6f, T, (sd_pos){dbase, 0},
                                                     dct, dst, out[m]), what);
            const bool expect = fits && T <= 16;
            CHECK((sd_cuda_attention_fused_taken() > n0) == expect, "%s: the fused launch %s", what,
                  expect ? "was not taken" : "was taken where it does not apply");
        } else {
            for (int t = 0; t < T; t++)
                CHECK_OP(G, G->i->qk_norm_rope_attention(G, &as, &kv[m], dq + (size_t)t * qn, dk + (size_t)t * row,
                                                         dv + (size_t)t * row, dqw, dkw, 1e-6f, 1, (sd_pos){dbase, t}, dct,
                                                         dst, out[m] + (size_t)t * qn), what);
            CHECK((sd_cuda_attention_fused_taken() - n0 == T) == fits, "%s: rows alone: the fused launch taken %ld of %d times",
                  what, sd_cuda_attention_fused_taken() - n0, T);
        }
        dget(hout[m], out[m], nq * 4);
        dfree(dq);
        dfree(dk);
    }
    static const char *const name[3] = {"fused", "two ops", "fused, a row at a time"};
    for (int m = 0; m < 3; m += 2) {
        const int d = rows_differ(hout[m], hout[1], T, qn, qn);
        CHECK(d == 0, "%s: out (%s) differs from the two ops' in %d rows", what, name[m], d);
        dget(ha, kv[m].k, cb); dget(hb, kv[1].k, cb);
        CHECK(same_bits(ha, hb, cb), "%s: k cache (%s) differs from the two ops'", what, name[m]);
        dget(ha, kv[m].v, cb); dget(hb, kv[1].v, cb);
        CHECK(same_bits(ha, hb, cb), "%s: v cache (%s) differs from the two ops'", what, name[m]);
    }
    /* turned off: the two launches */
    const int was = sd_cuda_attention_fuse(0);
    float *dq = dput(q, nq * 4), *dk = dput(k, nk * 4);
    const long n0 = sd_cuda_attention_fused_taken();
    CHECK_OP(G, G->i->qk_norm_rope_attention(G, &as, &kv[0], dq, dk, dv, dqw, dkw, 1e-6f, T, (sd_pos){dbase, 0}, dct, dst,
                                             out[0]), what);
    CHECK(sd_cuda_attention_fused_taken() == n0, "%s: the fused launch was taken while turned off", what);
    sd_cuda_attention_fuse(was);
    dget(hout[0], out[0], nq * 4);
    CHECK(rows_differ(hout[0], hout[1], T, qn, qn) == 0, "%s: out (fusion off) differs from the two ops'", what);
    dfree(dq); dfree(dk);
    for (int m = 0; m < 3; m++) {
        dfree(kv[m].k); dfree(kv[m].v); dfree(out[m]); free(hout[m]);
    }
    dfree(dqw); dfree(dkw); dfree(dct); dfree(dst); dfree(dv); dfree(dbase);
    free(q); free(k); free(v); free(qw); free(kw); free(ct); free(st); free(tmp); free(hk); free(hv); free(ha); free(hb);
}
#endif

int main(void) {
#ifdef SPECDEC_HAVE_CUDA
    char msg[512];
    int bad = sd_cuda_selfcheck(msg, sizeof msg);
    CHECK(bad == 0, "self-check of the device arithmetic on the host: %d mismatches, first: %s", bad, msg);
#else
    CHECK(!sd_backend_cuda_available(), "a build without the CUDA backend reports a CUDA device");
#endif
    if (!cuda_setup()) {
        fprintf(stderr, "test_cuda_kernels: no CUDA device: the device ops were not run\n");
        cuda_teardown();
        return check_finish("test_cuda_kernels");
    }
    fprintf(stderr, "test_cuda_kernels: %s\n", G->i->kernels(G));
    /* SPECDEC_TEST_QUICK=1: one case of each kernel family (gemv and tiled, 4- and 8-bit, int8,
     * joined, fused, norms, RoPE / KV store, attention), for runs under compute-sanitizer */
    const char *qe = getenv("SPECDEC_TEST_QUICK");
    const bool quick = qe && qe[0] == '1';
    if (quick) fprintf(stderr, "test_cuda_kernels: quick subset (SPECDEC_TEST_QUICK=1)\n");
    test_matmul(37, 50, SPECDEC_DTYPE_F32, 0, 0);      /* rows not 16-byte aligned */
    if (!quick) {
        test_matmul(64, 130, SPECDEC_DTYPE_BF16, 0, 0);
        test_matmul(129, 256, SPECDEC_DTYPE_F16, 0, 0);
        test_matmul(300, 1024, SPECDEC_DTYPE_BF16, 0, 0);
        test_matmul(70, 384, SPECDEC_DTYPE_BF16, 4, 32);
    }
    test_matmul(257, 4096, SPECDEC_DTYPE_BF16, 4, 64);  /* several column tiles at 8 tokens */
    test_matmul(33, 256, SPECDEC_DTYPE_F16, 8, 128);
    if (!quick) {
        test_matmul(100, 2048, SPECDEC_DTYPE_F32, 8, 64);
        test_matmul(40, 12288, SPECDEC_DTYPE_BF16, 4, 64);
        test_matmul(2000, 384, SPECDEC_DTYPE_F16, 4, 128);
        test_matmul(50, 256, SPECDEC_DTYPE_BF16, 4, 64);   /* 8 chunks a row: 8 lanes a row in the gemv kernel */
        test_matmul(16000, 256, SPECDEC_DTYPE_F32, 4, 32);  /* more row blocks than blocks: the grid-stride walk */
        test_matmul(16400, 384, SPECDEC_DTYPE_BF16, 4, 64); /* an LM head's shape: the gemv kernel's 8-row units */
    }
    /* precision int8: the same calls on int8 activations (the shapes the rule leaves keep f32) */
    sd_backend_opts o8;
    memset(&o8, 0, sizeof o8);
    o8.precision = SD_PRECISION_INT8;
    o8.reference = true;
    o8.n_threads = 2;
    CHECK(sd_backend_cpu_new(&o8, &R8, &E) == SPECDEC_OK, "int8 reference backend: %s", E.msg);
    memset(&o8, 0, sizeof o8);
    o8.precision = SD_PRECISION_INT8;
    CHECK(sd_backend_create("cuda", &o8, &G8, &E) == SPECDEC_OK, "int8 cuda backend: %s", E.msg);
    if (G8 && R8) {
        fprintf(stderr, "test_cuda_kernels: %s\n", G8->i->kernels(G8));
        test_matmul(257, 4096, SPECDEC_DTYPE_BF16, 4, 64);
        test_matmul(129, 192, SPECDEC_DTYPE_BF16, 8, 64);    /* 8-bit: the last 128-column quad half full */
        if (!quick) {
            test_matmul(40, 12288, SPECDEC_DTYPE_BF16, 4, 64);  /* several column tiles in the tiled kernel */
            /* gemv_i4.cu's kernel: f16 and f32 scales, a group of 128, and 5 chunks a
             * lane (a batch of 4 and one of 1 at T <= 2); the backend takes groups of 32 to 128 */
            test_matmul(48, 2048, SPECDEC_DTYPE_F16, 4, 128);
            test_matmul(37, 1024, SPECDEC_DTYPE_F32, 4, 64);
            test_matmul(70, 5120, SPECDEC_DTYPE_BF16, 4, 64);
            test_matmul(33, 256, SPECDEC_DTYPE_F16, 8, 128);
            test_matmul(100, 2048, SPECDEC_DTYPE_F32, 8, 64);
            test_matmul(2000, 384, SPECDEC_DTYPE_F16, 4, 128);
            test_matmul(16400, 384, SPECDEC_DTYPE_BF16, 4, 64);
            test_matmul(50, 256, SPECDEC_DTYPE_BF16, 4, 64);     /* 8 lanes a row in the gemv kernel */
            test_matmul(70, 384, SPECDEC_DTYPE_BF16, 4, 32);     /* group 32: the rule leaves it to f32 */
            test_matmul(64, 130, SPECDEC_DTYPE_BF16, 0, 0);      /* dense: f32 */
            test_matmul_wide();
        }
    }
    /* q, k, v and gate, up in one launch (a part of 36 rows: a lane group's rows may span two) */
    const int qkv[3] = {256, 64, 64}, gu[3] = {512, 512, 0}, odd[3] = {36, 100, 28};
    const int fq[3] = {256, 64, 64}, fg[3] = {300, 300, 0};
    sd_backend *gs[2] = {G, G8};
    /* under the default pick, under the streaming kernel (its segmented stores, its residual
     * adds, and the preparations that let it start early) and under the generic picks (gemv.cu's
     * kernel where the default takes gemv_i4.cu's) */
#ifdef SPECDEC_HAVE_CUDA
    const int mma0 = sd_cuda_mma(3);
#endif
    /* km 3: the default picks without a tensor-core kernel (T = 33: the tiled one); km 4: with
     * mma_tile.cu's for every call it takes (the default's rule gives these small matrices
     * mma_i4.cu's); km 5: the same with its weights staged */
    for (int km = 0; km < 6; km++) {
#ifdef SPECDEC_HAVE_CUDA
    sd_cuda_matmul_kernels(km == 1 ? SD_CUDA_MM_STREAM : km == 2 ? SD_CUDA_MM_GENERIC : SD_CUDA_MM_GEMV);
    sd_cuda_mma(km == 3 ? 0 : km == 4 ? 2 : km == 5 ? 4 : 3);
#else
    if (km) break;
#endif
    for (int k = 0; k < 2; k++) {
        if (!gs[k]) continue;
        CHECK(G->i->sync(G, &E) == SPECDEC_OK, "sync: %s", E.msg);
        test_matmul_n(gs[k], 3, qkv, 1024, SPECDEC_DTYPE_BF16, 4, 64);
        if (!quick) {
            test_matmul_n(gs[k], 2, gu, 2048, SPECDEC_DTYPE_BF16, 4, 64);
            test_matmul_n(gs[k], 3, odd, 512, SPECDEC_DTYPE_F16, 8, 64);
            test_matmul_n(gs[k], 3, odd, 384, SPECDEC_DTYPE_BF16, 0, 0);
            test_matmul_n(gs[k], 3, qkv, 256, SPECDEC_DTYPE_BF16, 4, 32);
        }
        CHECK(gs[k]->i->sync(gs[k], &E) == SPECDEC_OK, "sync: %s", E.msg);
    }
    /* the fused ops at both precisions: the int8 preparation applies the norm and SwiGLU itself */
    for (int k = 0; k < 2; k++) {
        if (!gs[k]) continue;
        test_fused_mm(gs[k], 2, fg, 4096, SPECDEC_DTYPE_BF16, 4, 64);   /* a norm by one block */
        if (!quick) {
            test_fused_mm(gs[k], 3, fq, 1024, SPECDEC_DTYPE_BF16, 4, 64);   /* a norm by one warp */
            test_fused_mm(gs[k], 3, odd, 1152, SPECDEC_DTYPE_F16, 8, 64);   /* 8-bit, a quad half full */
            test_fused_mm(gs[k], 2, fg, 512, SPECDEC_DTYPE_BF16, 0, 0);     /* dense: the ops one by one */
            test_fused_mm(gs[k], 1, fq, 2048, SPECDEC_DTYPE_BF16, 4, 32);   /* group 32: f32 at either precision */
            test_fused_mm(gs[k], 1, fq, 9216, SPECDEC_DTYPE_BF16, 4, 64);   /* a row past the weights held early */
        }
        /* the MLP block: rows of 1024 (a warp's norm), 2048 and 4096 (a block's); f16 scales; 8-bit
         * (the two ops: the fused launch takes 4-bit only); dense. The fused launch is the default
         * kernels' (passes 0, 3, 4 and 5). */
        const bool fused = km == 0 || km >= 3;
        test_mlp(gs[k], 2048, 3072, SPECDEC_DTYPE_BF16, 4, 64, fused);
        if (!quick) {
            test_mlp(gs[k], 1024, 2048, SPECDEC_DTYPE_F16, 4, 128, fused);
            test_mlp(gs[k], 1024, 1024, SPECDEC_DTYPE_BF16, 8, 64, fused);
            test_mlp(gs[k], 512, 1024, SPECDEC_DTYPE_BF16, 0, 0, fused);
            /* rows of 4096: a whole first batch of gate and up a lane (gemv_i4.cu's preload) */
            test_mlp(gs[k], 4096, 1024, SPECDEC_DTYPE_BF16, 4, 64, fused);
        }
        CHECK(gs[k]->i->sync(gs[k], &E) == SPECDEC_OK, "sync: %s", E.msg);
    }
    }
#ifdef SPECDEC_HAVE_CUDA
    sd_cuda_matmul_kernels(SD_CUDA_MM_GEMV);
    sd_cuda_mma(mma0);
#endif
    if (G8) sd_backend_free(G8);
    if (R8) sd_backend_free(R8);
    G8 = R8 = NULL;
    test_embed(500, 384, SPECDEC_DTYPE_BF16, 4, 64);
    if (!quick) {
        test_embed(300, 256, SPECDEC_DTYPE_F32, 8, 32);
        test_embed(200, 96, SPECDEC_DTYPE_F16, 0, 0);
        test_embed(200, 100, SPECDEC_DTYPE_BF16, 0, 0);
    }
    const int ns[] = {16, 128, 384, 1024, 1025, 4096};
    for (int i = 0; i < 6; i++)
        if (!quick || ns[i] == 128 || ns[i] == 4096) test_rmsnorm(ns[i]);
    test_pointwise();
    test_qkv_fused(32, 8, 128, SD_KV_BF16, 5);
    if (!quick) {
        test_qkv_fused(32, 8, 128, SD_KV_BF16, 1);
        test_qkv_fused(16, 8, 128, SD_KV_F32, 9);
        test_qkv_fused(6, 2, 64, SD_KV_F16, 3);
        test_qkv_fused(4, 1, 256, SD_KV_BF16, 2);
        test_qkv_fused(3, 3, 18, SD_KV_F32, 4);   /* half a head is not a whole number of lanes */
    }
    test_attention(6, 2, 128, SD_KV_BF16, 100);
    if (!quick) {
        test_attention(4, 2, 64, SD_KV_F32, 0);
        test_attention(8, 8, 16, SD_KV_F16, 300);
        test_attention(32, 8, 128, SD_KV_BF16, 4200);   /* 33+ chunks: split slots take two each */
        test_attention(5, 1, 48, SD_KV_F32, 127);
        test_attention(16, 2, 256, SD_KV_F16, 250);
        test_attention(4, 2, 256, SD_KV_F32, 200);        /* V staged after the scores, in K's place */
#ifdef SPECDEC_HAVE_CUDA
        test_attention_wide();
#endif
    }
#ifdef SPECDEC_HAVE_CUDA
    /* the fused q/k norm, RoPE, KV store and attention: a decode step, a verify block, rows across
     * a chunk's end, the first rows, contexts whose split slots wrap */
    test_attn_fused(32, 8, 128, SD_KV_BF16, 37, 1, true);
    test_attn_fused(32, 8, 128, SD_KV_BF16, 124, 9, true);
    if (!quick) {
        test_attn_fused(32, 8, 128, SD_KV_BF16, 0, 5, true);
        test_attn_fused(32, 8, 128, SD_KV_BF16, 4200, 5, true);
        test_attn_fused(32, 8, 128, SD_KV_BF16, 127, 16, true);
        test_attn_fused(32, 8, 128, SD_KV_BF16, 300, 17, true);   /* more rows: the two launches */
        test_attn_fused(6, 2, 64, SD_KV_F16, 250, 3, true);
        test_attn_fused(16, 2, 256, SD_KV_F16, 130, 16, true);
        test_attn_fused(5, 1, 48, SD_KV_F32, 126, 4, true);
        test_attn_fused(8, 8, 16, SD_KV_BF16, 4095, 2, true);
        test_attn_fused(16, 4, 128, SD_KV_F32, 40, 7, true);
        test_attn_fused(4, 2, 256, SD_KV_F32, 60, 2, false);     /* K and V chunks do not fit together */
    }
#endif
    cuda_teardown();
    return check_finish("test_cuda_kernels");
}
