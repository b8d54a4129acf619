/* ops_i8.c: the integer-activation matmul (recipe and layout in ops_i8.h): the block
 * quantizer, the token preparation, the canonical recipe in plain C (the portable level's
 * kernel), the scalar reference straight from the definition, and the dispatcher that prepares
 * the tokens once per call and splits the output rows over the pool. */
#include "cpu/ops_i8.h"
#include "util/dtype.h"
#include <math.h>
#include <string.h>

int sd_i8_avx2_novnni = 0;

int sd_i8_supported(const sd_mat *W) {
    if (W->bits != 4 && W->bits != 8) return 0;
    if (W->group < 64 || W->group % 64 != 0) return 0;
    const int step = W->bits == 4 ? 128 : 64;
    return W->cols > 0 && W->cols % step == 0 && W->cols <= SD_I8_MAXCOLS;
}

float sd_i8_quant_block(const float *x, int n, int8_t *q) {
    float amax = 0.0f;
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a > amax) amax = a;
    }
    /* an infinite or NaN entry (amax never NaN: NaN > amax is false) gives a zero block rather than
     * garbage integers; the f32 path would have produced non-finite logits anyway */
    int finite = isfinite(amax);
    for (int i = 0; i < n; i++) finite &= isfinite(x[i]);
    if (amax == 0.0f || !finite) {
        memset(q, 0, (size_t)n);
        return 0.0f;
    }
    const float id = 127.0f / amax;
    for (int i = 0; i < n; i++) {
        float v = nearbyintf(x[i] * id);   /* |v| <= 127 up to rounding of id: clamp anyway */
        q[i] = (int8_t)(v > 127.0f ? 127 : v < -127.0f ? -127 : (int)v);
    }
    return amax / 127.0f;
}

/* Natural-order quantization of a row: q[cols], d[cols / 32]. */
static void quant_row(const float *x, int cols, int8_t *q, float *d) {
    for (int b = 0; b * SD_I8_BLOCK < cols; b++) {
        int n = cols - b * SD_I8_BLOCK < SD_I8_BLOCK ? cols - b * SD_I8_BLOCK : SD_I8_BLOCK;
        d[b] = sd_i8_quant_block(x + b * SD_I8_BLOCK, n, q + b * SD_I8_BLOCK);
    }
}

/* Column of the chunk (relative) held by lane l, element k of the lane (k < 8 for 4-bit, < 4 for
 * 8-bit), and the chunk of the step the lane belongs to. */
static inline int lane_chunk(int bits, int p, int l) { return bits == 4 ? 2 * p + (l >= 8) : p; }
static inline int lane_col(int bits, int p, int l, int k) {
    return bits == 4 ? lane_chunk(4, p, l) * 64 + 8 * (l & 7) + k : p * 64 + 4 * l + k;
}
static inline int lane_width(int bits) { return bits == 4 ? 8 : 4; }

/* sd_i8_quant_block's results with loops a compiler vectorizes (the preparation runs once per
 * token and matrix: 56 times a decode step on the embedded model, at 3.3 ns a column with the
 * definition's per-element nearbyintf call and branches). For finite values |x| orders as the
 * integer (bits & 0x7fffffff), and an exponent field of all ones marks inf / NaN, so the range and
 * the finiteness are integer maxima and ors. Rounding: with |v| < 2^22, (v + 1.5 * 2^23) - 1.5 * 2^23
 * is v rounded to nearest even in float arithmetic, which is nearbyintf's result in the default
 * rounding mode (the library's; ISO C builds do not contract the product into the add). The clamp
 * is the definition's, on the float. */
float sd_i8_quant_block_fast(const float *x, int n, int8_t *q) {
    uint32_t mx = 0, bad = 0;
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        u &= 0x7fffffffu;
        mx = u > mx ? u : mx;
        bad |= u >= 0x7f800000u;
    }
    if (mx == 0 || bad) {
        memset(q, 0, (size_t)n);
        return 0.0f;
    }
    float amax;
    memcpy(&amax, &mx, 4);
    const float id = 127.0f / amax, magic = 12582912.0f;   /* 1.5 * 2^23 */
    for (int i = 0; i < n; i++) {
        float v = x[i] * id;
        float r = (v + magic) - magic;
        q[i] = (int8_t)(r > 127.0f ? 127 : r < -127.0f ? -127 : (int)r);
    }
    return amax / 127.0f;
}

void sd_i8_prep(const float *x, int cols, int bits, int8_t *xq, float *dv, float *xv) {
    int8_t q[SD_I8_MAXCOLS];
    float d[SD_I8_MAXCOLS / SD_I8_BLOCK];
    for (int b = 0; b < cols / SD_I8_BLOCK; b++)   /* cols % 64 == 0 (sd_i8_supported) */
        d[b] = sd_i8_quant_block_fast(x + b * SD_I8_BLOCK, SD_I8_BLOCK, q + b * SD_I8_BLOCK);
    if (bits == 4) {
        for (int c = 0; c < cols / 64; c++) {
            int8_t *o = xq + (size_t)(c / 2) * 128 + (c & 1) * 32;
            const int8_t *s = q + 64 * c;
            for (int m = 0; m < 32; m++) {
                o[m] = s[2 * m];
                o[64 + m] = s[2 * m + 1];
            }
        }
    } else {
        memcpy(xq, q, (size_t)cols);
    }
    /* lane j (= step * 16 + l) holds w consecutive columns from j * w in natural order (lane_col:
     * 4-bit chunk 2p is columns 128p .. 128p + 63, chunk 2p + 1 the next 64), all in one block */
    const int w = lane_width(bits), lanes = cols / w;
    for (int j = 0; j < lanes; j++) {
        int X = 0;
        for (int k = 0; k < w; k++) X += q[j * w + k];
        const float D = d[j * w / SD_I8_BLOCK];
        dv[j] = D;
        xv[j] = D * (float)X;
    }
}

static inline uint32_t wq_at(const sd_mat *W, int r, int j) {
    const int per = 32 / W->bits;
    const uint32_t *wr = (const uint32_t *)W->w + (size_t)r * (W->cols / per);
    return (wr[j / per] >> (W->bits * (j % per))) & ((1u << W->bits) - 1u);
}

/* The recipe for one (row, token) over per-lane integers I (computed by the caller's means). */
static float recipe_row(const sd_mat *W, int r, int steps, const int32_t *I, const float *dv, const float *xv,
                        const int32_t *g16) {
    const size_t gr = (size_t)r * (W->cols / W->group);
    float acc[16] = {0};
    for (int p = 0; p < steps; p++)
        for (int l = 0; l < 16; l++) {
            size_t g = gr + (size_t)g16[p * 16 + l];
            float S = sd_ref_elem_f32(W->dtype, W->scales, g), B = sd_ref_elem_f32(W->dtype, W->biases, g);
            acc[l] = fmaf(S, (float)I[p * 16 + l] * dv[p * 16 + l], acc[l]);
            acc[l] = fmaf(B, xv[p * 16 + l], acc[l]);
        }
    return sd_i8_tree(acc);
}

void sd_i8_rows_c(const sd_i8_args *a, int r0, int r1) {
    const sd_mat *W = a->W;
    int32_t I[SD_I8_MAXCOLS / 4];
    for (int r = r0; r < r1; r++)
        for (int t = 0; t < a->T; t++) {
            const int8_t *xq = a->xq + (size_t)t * a->ldq;
            for (int p = 0; p < a->steps; p++)
                for (int l = 0; l < 16; l++) {
                    int s = 0;
                    for (int k = 0; k < lane_width(W->bits); k++) {
                        int j = lane_col(W->bits, p, l, k);
                        /* where the preparation put column j */
                        int pos = W->bits == 4 ? (j / 128) * 128 + (j & 1) * 64 + ((j / 64) & 1) * 32 + (j % 64) / 2 : j;
                        s += (int)wq_at(W, r, j) * xq[pos];
                    }
                    I[p * 16 + l] = s;
                }
            a->y[(size_t)t * a->ldy + r] = recipe_row(W, r, a->steps, I, a->dv + (size_t)t * a->ldv,
                                                      a->xv + (size_t)t * a->ldv, a->g16);
        }
}

static void make_g16(const sd_mat *W, int steps, int32_t *g16) {
    for (int p = 0; p < steps; p++)
        for (int l = 0; l < 16; l++) g16[p * 16 + l] = lane_col(W->bits, p, l, 0) / W->group;
}

void sd_i8_matmul_ref(const sd_mat *W, const float *x, int ldx, float *y, int ldy, int T) {
    const int cols = W->cols, steps = cols / (W->bits == 4 ? 128 : 64);
    int8_t q[SD_I8_MAXCOLS];
    float d[SD_I8_MAXCOLS / SD_I8_BLOCK], dv[SD_I8_MAXCOLS / 4], xv[SD_I8_MAXCOLS / 4];
    int32_t I[SD_I8_MAXCOLS / 4], g16[SD_I8_MAXCOLS / 4];
    make_g16(W, steps, g16);
    for (int t = 0; t < T; t++) {
        quant_row(x + (size_t)t * ldx, cols, q, d);
        for (int p = 0; p < steps; p++)
            for (int l = 0; l < 16; l++) {
                int X = 0, c0 = lane_col(W->bits, p, l, 0);
                for (int k = 0; k < lane_width(W->bits); k++) X += q[c0 + k];
                dv[p * 16 + l] = d[c0 / SD_I8_BLOCK];
                xv[p * 16 + l] = dv[p * 16 + l] * (float)X;
            }
        for (int r = 0; r < W->rows; r++) {
            for (int p = 0; p < steps; p++)
                for (int l = 0; l < 16; l++) {
                    int s = 0;
                    for (int k = 0; k < lane_width(W->bits); k++) {
                        int j = lane_col(W->bits, p, l, k);
                        s += (int)wq_at(W, r, j) * q[j];
                    }
                    I[p * 16 + l] = s;
                }
            y[(size_t)t * ldy + r] = recipe_row(W, r, steps, I, dv, xv, g16);
        }
    }
}

/* ---------------------------------------------------------------- dispatch */
typedef struct i8_job {
    sd_i8_rows_fn rows;
    sd_i8_args a;
} i8_job;

static void i8_task(void *arg, int ith, int nth) {
    i8_job *j = (i8_job *)arg;
    int r0, r1;   /* ranges on multiples of 16 rows; each row is computed whole by one thread */
    sd_pool_rows(j->a.W->rows, ith, nth, 16, &r0, &r1);
    if (r1 > r0) j->rows(&j->a, r0, r1);
}

/* Below this many multiply-adds a call runs on the caller alone (as the f32 path). */
#define I8_INLINE_MACS 65536.0

void sd_i8_matmul(sd_i8_rows_fn rows, sd_i8_prep_fn prep, const sd_mat *W, const float *x, int ldx, float *y, int ldy, int T,
                  sd_pool *p) {
    if (T <= 0 || W->rows <= 0) return;
    const int cols = W->cols, steps = cols / (W->bits == 4 ? 128 : 64), ldv = steps * 16;
    /* one scratch: per token ldv floats of dv and of xv, then cols bytes of xq (cols % 64 == 0,
     * so every token's xq starts 64-byte aligned), then the lane -> group table */
    size_t fl = (size_t)T * 2 * ldv + (size_t)T * cols / 4 + (size_t)ldv;
    float *buf = sd_ops_scratch(fl);
    if (!buf) { /* out of memory: the reference needs only its stack */
        sd_i8_matmul_ref(W, x, ldx, y, ldy, T);
        return;
    }
    float *dv = buf, *xv = buf + (size_t)T * ldv;
    int8_t *xq = (int8_t *)(buf + (size_t)T * 2 * ldv);
    int32_t *g16 = (int32_t *)(buf + (size_t)T * 2 * ldv + (size_t)T * cols / 4);
    make_g16(W, steps, g16);
    if (!prep) prep = sd_i8_prep;
    for (int t = 0; t < T; t++)
        prep(x + (size_t)t * ldx, cols, W->bits, xq + (size_t)t * cols, dv + (size_t)t * ldv,
                   xv + (size_t)t * ldv);
    i8_job j = {.rows = rows ? rows : sd_i8_rows_c,
                .a = {.W = W, .xq = xq, .ldq = cols, .dv = dv, .xv = xv, .ldv = ldv, .g16 = g16,
                      .y = y, .ldy = ldy, .T = T, .steps = steps}};
    double macs = (double)W->rows * cols * T;
    if (!p || sd_pool_size(p) == 1 || macs < I8_INLINE_MACS) i8_task(&j, 0, 1);
    else sd_pool_run(p, i8_task, &j);
}
