/* ops_i8_neon.c: the int8-activation matmul rows on AArch64. A step's 16 lanes (ops_i8.h) are
 * four quads of 4; each 16-byte vector of weights feeds one quad. The dot products are signed x
 * signed: 4-bit weights (0..15) are valid signed bytes as they are; 8-bit weights go in as
 * q - 128 (flip the top bit) and get 128 * (sum of the lane's activations) back, exactly.
 *   sdot (FEAT_DotProd, when the CPU has it): four products summed into a 32-bit lane;
 *   otherwise smull + pairwise adds: the same integers.
 * The float part is the recipe's, lane for lane (fused multiply-adds), so the bits are the
 * scalar recipe's. */
#include "cpu/ops_i8.h"
#include "util/dtype.h"
#include <arm_neon.h>
#include "cpu/ops_simd.h"
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif

#define NT_MAX 4

/* lanes of a . b over 4 bytes, added to acc (smull form) */
SD_AINLINE int32x4_t dot_mull(int32x4_t acc, int8x16_t a, int8x16_t b) {
    int32x4_t lo = vpaddlq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    int32x4_t hi = vpaddlq_s16(vmull_s8(vget_high_s8(a), vget_high_s8(b)));
    return vaddq_s32(acc, vpaddq_s32(lo, hi));
}
/* Not always_inline: the smull kernels keep an uncalled copy rather than fail to inline. */
__attribute__((target("arch=armv8.2-a+dotprod"))) static inline int32x4_t dot_sdot(int32x4_t acc, int8x16_t a, int8x16_t b) {
    return vdotq_s32(acc, a, b);
}

SD_AINLINE void row_tile(const sd_i8_args *a, int r, int t0, const int NT, const int bits, const int sdot) {
    const sd_mat *W = a->W;
    const int cols = W->cols, ng = cols / W->group;
    const specdec_dtype dt = W->dtype;
    const uint8_t *wr = (const uint8_t *)W->w + (size_t)r * (size_t)(cols * bits / 8);
    const size_t gr = (size_t)r * ng;
    const uint8x16_t m4 = vdupq_n_u8(0x0F), top = vdupq_n_u8(0x80);
    const int8x16_t ones = vdupq_n_s8(1);
    float32x4_t acc[NT_MAX][4];
    for (int t = 0; t < NT; t++)
        for (int v = 0; v < 4; v++) acc[t][v] = vdupq_n_f32(0.0f);
    for (int p = 0; p < a->steps; p++)
        for (int v = 0; v < 4; v++) {
            const int g = a->g16[p * 16 + 4 * v];
            const float32x4_t S = vdupq_n_f32(sd_elem(dt, W->scales, gr + g));
            const float32x4_t B = vdupq_n_f32(sd_elem(dt, W->biases, gr + g));
            const uint8x16_t w = vld1q_u8(wr + (size_t)p * 64 + 16 * v);
            const int8x16_t lo = vreinterpretq_s8_u8(bits == 4 ? vandq_u8(w, m4) : veorq_u8(w, top));
            const int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(w, 4));
            for (int t = 0; t < NT; t++) {
                const size_t tt = (size_t)(t0 + t);
                const int8_t *xq = a->xq + tt * a->ldq;
                int32x4_t I = vdupq_n_s32(0);
                if (bits == 4) {
                    const int8x16_t xa = vld1q_s8(xq + (size_t)p * 128 + 16 * v);
                    const int8x16_t xb = vld1q_s8(xq + (size_t)p * 128 + 64 + 16 * v);
                    I = sdot ? dot_sdot(dot_sdot(I, lo, xa), hi, xb) : dot_mull(dot_mull(I, lo, xa), hi, xb);
                } else {
                    const int8x16_t x = vld1q_s8(xq + (size_t)p * 64 + 16 * v);
                    int32x4_t X = vdupq_n_s32(0);
                    I = sdot ? dot_sdot(I, lo, x) : dot_mull(I, lo, x);
                    X = sdot ? dot_sdot(X, ones, x) : dot_mull(X, ones, x);
                    I = vaddq_s32(I, vshlq_n_s32(X, 7));   /* (q - 128) . x + 128 * sum x */
                }
                const size_t o = tt * a->ldv + (size_t)p * 16 + 4 * v;
                const float32x4_t F = vmulq_f32(vcvtq_f32_s32(I), vld1q_f32(a->dv + o));
                acc[t][v] = vfmaq_f32(acc[t][v], S, F);
                acc[t][v] = vfmaq_f32(acc[t][v], B, vld1q_f32(a->xv + o));
            }
        }
    for (int t = 0; t < NT; t++) {
        /* u_l = acc_l + acc_l+8; w_i = u_i + u_i+4; then (w0 + w2) + (w1 + w3) */
        float32x4_t u = vaddq_f32(vaddq_f32(acc[t][0], acc[t][2]), vaddq_f32(acc[t][1], acc[t][3]));
        float32x2_t h = vadd_f32(vget_low_f32(u), vget_high_f32(u));
        a->y[(size_t)(t0 + t) * a->ldy + r] = vget_lane_f32(h, 0) + vget_lane_f32(h, 1);
    }
}

SD_AINLINE void rows_kind(const sd_i8_args *a, int r0, int r1, const int bits, const int sdot) {
    for (int r = r0; r < r1; r++) {
        int t = 0;
        for (; t + 4 <= a->T; t += 4) row_tile(a, r, t, 4, bits, sdot);
        switch (a->T - t) {
        case 3: row_tile(a, r, t, 3, bits, sdot); break;
        case 2: row_tile(a, r, t, 2, bits, sdot); break;
        case 1: row_tile(a, r, t, 1, bits, sdot); break;
        default: break;
        }
    }
}

static void q4_mull(const sd_i8_args *a, int r0, int r1) { rows_kind(a, r0, r1, 4, 0); }
static void q8_mull(const sd_i8_args *a, int r0, int r1) { rows_kind(a, r0, r1, 8, 0); }
__attribute__((target("arch=armv8.2-a+dotprod"))) static void q4_sdot(const sd_i8_args *a, int r0, int r1) { rows_kind(a, r0, r1, 4, 1); }
__attribute__((target("arch=armv8.2-a+dotprod"))) static void q8_sdot(const sd_i8_args *a, int r0, int r1) { rows_kind(a, r0, r1, 8, 1); }
static void rows_mull(const sd_i8_args *a, int r0, int r1) { (a->W->bits == 4 ? q4_mull : q8_mull)(a, r0, r1); }
static void rows_sdot(const sd_i8_args *a, int r0, int r1) { (a->W->bits == 4 ? q4_sdot : q8_sdot)(a, r0, r1); }

sd_i8_rows_fn sd_i8_rows_neon(void) {
    /* sd_i8_avx2_novnni doubles as "no dot-product instruction" here (tests run both forms) */
    return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) && !sd_i8_avx2_novnni ? rows_sdot : rows_mull;
}
