/* ops_i8.h: the integer-activation matmul (precision int8) over affine 4- and 8-bit weights.
 * Not a public interface: what the dispatcher (ops_i8.c) and the per-ISA kernels share.
 *
 * The activation row x is quantized once per call in blocks of 32 (sd_i8_quant_block):
 * d = max|x| / 127, xq = round(x * 127 / max|x|) in [-127, 127], so x_i ~ d * xq_i. A weight is
 * w = s_g * q + b_g (q unsigned, s and b per group of g >= 64 columns, g % 64 == 0), so
 *   y = sum_i w_i x_i ~ sum over lanes of  d_lane * (s_g * I_lane + b_g * X_lane)
 * with I_lane = sum q_i * xq_i and X_lane = sum xq_i over the few columns a lane holds: integer
 * sums, exact whatever the order, then a fixed float recipe.
 *
 * The canonical recipe (every level gives exactly these bits, the scalar reference included):
 * a row is walked in "steps" of 16 lanes.
 *   4-bit: a step is two chunks of 64 columns (2p, 2p+1); lane l < 8 holds columns 8l..8l+7 of
 *          chunk 2p, lane 8 + l the same of chunk 2p+1.            steps = cols / 128
 *   8-bit: a step is one chunk of 64 columns; lane l holds columns 4l..4l+3.   steps = cols / 64
 * Per step, with S, B the lane's group scale and bias (as f32), D the lane's block scale d and
 * DX = D * (float)X_lane (both per token, from the preparation):
 *   acc[l] = fma(S, (float)I * D, acc[l]);  acc[l] = fma(B, DX, acc[l]);
 * and at the end y = t(acc): u_l = acc[l] + acc[l+8] (l < 8), then
 *   ((u0 + u4) + (u2 + u6)) + ((u1 + u5) + (u3 + u7))
 * (hsum16's tree). The order depends only on cols, never on T, the tile or the thread split.
 *
 * The prepared token (sd_i8_prep), per step: 128 (4-bit) or 64 (8-bit) int8 activations laid out
 * so the kernels need no shuffles: 4-bit, for the two chunks c = 2p, 2p+1:
 *   xq[p*128 +      (c&1)*32 + m] = xq of column 64c + 2m      (pairs with low nibbles,  m < 32)
 *   xq[p*128 + 64 + (c&1)*32 + m] = xq of column 64c + 2m + 1  (pairs with high nibbles)
 * since byte m of a chunk's 32 packed bytes holds columns 2m (low nibble) and 2m + 1 (high);
 * 8-bit: columns in order. Then dv[step*16 + l] = D and xv[step*16 + l] = DX per lane. */
#ifndef SD_OPS_I8_H
#define SD_OPS_I8_H
#include <stddef.h>
#include <stdint.h>
#include "cpu/ops_internal.h"
#include "cpu/pool.h"

#define SD_I8_BLOCK 32
#define SD_I8_MAXCOLS 32768   /* the kernels keep a row's group indices on the stack */

/* One int8 matmul call as the kernels see it. */
typedef struct sd_i8_args {
    const sd_mat *W;
    const int8_t *xq; int ldq;   /* (T, ldq) prepared activations (ldq = cols) */
    const float *dv, *xv; int ldv; /* (T, ldv) per-lane D and D * X (ldv = steps * 16) */
    const int32_t *g16;          /* (steps, 16): the group of each lane (absolute) */
    float *y; int ldy;
    int T, steps;
} sd_i8_args;

/* Whether the int8 path takes this matrix (affine 4/8-bit, group % 64 == 0, cols a whole number
 * of steps, at most SD_I8_MAXCOLS); other matrices keep the f32 path. */
int sd_i8_supported(const sd_mat *W);
/* Quantize one block of n <= 32 values: q[i] in [-127, 127], returns d (0 for an all-zero or
 * non-finite block, whose q are then 0). */
float sd_i8_quant_block(const float *x, int n, int8_t *q);
/* The same results (q and d, bit for bit) by a vectorizable route; what sd_i8_prep uses. */
float sd_i8_quant_block_fast(const float *x, int n, int8_t *q);
/* The prepared activations of one token (layout above). */
void sd_i8_prep(const float *x, int cols, int bits, int8_t *xq, float *dv, float *xv);
/* The same preparation, bit for bit, with 256-bit vectors (NULL where this build or CPU has no AVX2). */
typedef void (*sd_i8_prep_fn)(const float *x, int cols, int bits, int8_t *xq, float *dv, float *xv);
sd_i8_prep_fn sd_i8_prep_avx2(void);
/* The canonical recipe in plain C over prepared activations (the portable level's kernel). */
void sd_i8_rows_c(const sd_i8_args *a, int r0, int r1);
/* Scalar reference straight from the definition (x as floats; quantizes each block itself). */
void sd_i8_matmul_ref(const sd_mat *W, const float *x, int ldx, float *y, int ldy, int T);
/* The fast int8 matmul with a level's kernel (rows NULL: sd_i8_rows_c) and preparation (prep NULL:
 * sd_i8_prep), split over the pool by output rows. Matrices sd_i8_supported refuses go to f32_mm
 * instead. */
typedef void (*sd_i8_rows_fn)(const sd_i8_args *a, int r0, int r1);
void sd_i8_matmul(sd_i8_rows_fn rows, sd_i8_prep_fn prep, const sd_mat *W, const float *x, int ldx, float *y, int ldy, int T,
                  sd_pool *p);

/* Per-level kernels; NULL when this build or CPU has none (the level then uses sd_i8_rows_c). */
sd_i8_rows_fn sd_i8_rows_avx512(void);   /* AVX-512 VNNI */
sd_i8_rows_fn sd_i8_rows_avx2(void);     /* AVX-VNNI when the CPU has it, else maddubs */
sd_i8_rows_fn sd_i8_rows_neon(void);     /* sdot when the CPU has it, else widening multiplies */
/* The AVX2 level's two forms by name: vnni 1 = AVX-VNNI (NULL when the CPU lacks it), 0 = maddubs.
 * Both give the same bits; calibration times them and sd_i8_avx2_prefer_vnni(0) makes
 * sd_i8_rows_avx2 hand out maddubs where it measured faster (default: VNNI where present). */
sd_i8_rows_fn sd_i8_rows_avx2_form(int vnni);
void sd_i8_avx2_prefer_vnni(int on);
/* Tests and benchmarks: 1 makes sd_i8_rows_avx2 hand out the maddubs form even with AVX-VNNI. */
extern int sd_i8_avx2_novnni;

/* The final tree of the recipe. */
static inline float sd_i8_tree(const float *acc) {
    float u[8];
    for (int l = 0; l < 8; l++) u[l] = acc[l] + acc[l + 8];
    return ((u[0] + u[4]) + (u[2] + u[6])) + ((u[1] + u[5]) + (u[3] + u[7]));
}

#endif
