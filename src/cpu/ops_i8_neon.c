/* ops_i8_neon.c: the int8-activation matmul over packed tiles (ops_i8.h) on AArch64. A quad of a
 * tile (16 rows x 4 bytes) is four 16-byte vectors, each holding 4 rows in 32-bit lanes; a vector
 * pairs with the 4 activation bytes it multiplies, broadcast to every lane, so no horizontal sum
 * is needed. Tokens go in tiles of up to 4: a block's weights, unpacked once, serve every token of
 * the tile. The tile's rows are taken in quarters of 4, one after another within each group: a
 * quarter's 8 weight vectors, its up to 4 accumulators and a token's 32 activation bytes then stay
 * in registers, where all 16 rows at once would need 16 accumulators and 32 weight vectors, more
 * than the 32 vector registers. The price: a group's codes are read four times in a row (from L1
 * at the usual groups of 64 and 128 columns) and the 4 x 4 accumulators are kept in memory
 * between groups.
 *
 * The integer sums are signed x signed, four products into a 32-bit lane:
 *   sdot (FEAT_DotProd, when the CPU has it): vdotq_laneq_s32 against the block's activation bytes
 *     loaded once per token (lane k selects bytes 4k .. 4k + 3), in two chains;
 *   otherwise widening multiplies: smull of the weights by the broadcast bytes (16-bit products),
 *     pairs added into 32-bit lanes, a row's two pairs added at the block's end; the same
 *     integers.
 * 4-bit codes (0..15) are valid signed bytes as they are. 8-bit codes (0..255) are not: they go in
 * as q - 128 (the top bit flipped) and 128 * X_b (X_b the sum of the block's activation codes, per
 * token, computed once per tile and token tile) is added back, exactly in int32: 8 products per
 * block and quarter where a split into nibbles would take 16. Integer sums are exact in any
 * order, so both forms give the recipe's I_b.
 *
 * The float part is the recipe's, lane for lane: per block F = (float)I_b * D_b, accS = fma(S, F,
 * accS) (vfmaq_f32: one rounding); after the blocks, per group accB = fma(B, XG_g, accB); y = accS
 * + accB. Every lane is one row doing exactly its row's operations in the recipe's order, so the
 * result is the scalar recipe's bits. Scales and biases are read 4 rows at a time in the matrix's
 * dtype (bf16 shifted into the high half of a 32-bit lane, f16 converted: both exact). The last
 * tile stores only its kept rows (its padding rows are zero codes, and quarters wholly past the
 * kept rows are skipped).
 *
 * No software prefetch (the AVX-512 kernel has one for matrices larger than L2): a tile is walked
 * front to back and tiles are contiguous; one would be added only as measured on AArch64
 * hardware. sdot is enabled per function (target attribute, so the file builds for baseline
 * ARMv8-A) and chosen at run time from HWCAP_ASIMDDP. */
#include "cpu/ops_i8.h"
#include <arm_neon.h>
#include <string.h>
#include "cpu/ops_simd.h"
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif

#define NT_MAX 4
/* The loops over a block's quads and a tile's tokens run fully unrolled, so that w[] and the
 * accumulators are registers (GCC at -O2 otherwise keeps w[] on the stack and reloads it per
 * token). */
#if defined(__clang__)
#define UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define UNROLL _Pragma("GCC unroll 8")
#else
#define UNROLL
#endif
#define SD_SDOT __attribute__((target("arch=armv8.2-a+dotprod")))

/* 4 scale or bias values (4 rows of a group) as f32. */
SD_AINLINE float32x4_t load4(const specdec_dtype dt, const unsigned char *p) {
    if (dt == SPECDEC_DTYPE_BF16) return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)p), 16));
    if (dt == SPECDEC_DTYPE_F16) return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)p)));
    return vld1q_f32((const float *)p);
}

/* One block's I for 4 rows: w[k] (4 rows x 4 bytes) against the activation bytes 4k .. 4k + 3
 * (x0: bytes 0..15 of the block, x1: 16..31), in two chains. Not always_inline: the smull kernels
 * never call it but must compile without FEAT_DotProd, which an always_inline copy would refuse. */
SD_SDOT static inline int32x4_t block_sdot(const int8x16_t *w, int8x16_t x0, int8x16_t x1) {
    int32x4_t a = vdupq_n_s32(0), b = vdupq_n_s32(0);
    a = vdotq_laneq_s32(a, w[0], x0, 0);
    b = vdotq_laneq_s32(b, w[1], x0, 1);
    a = vdotq_laneq_s32(a, w[2], x0, 2);
    b = vdotq_laneq_s32(b, w[3], x0, 3);
    a = vdotq_laneq_s32(a, w[4], x1, 0);
    b = vdotq_laneq_s32(b, w[5], x1, 1);
    a = vdotq_laneq_s32(a, w[6], x1, 2);
    b = vdotq_laneq_s32(b, w[7], x1, 3);
    return vaddq_s32(a, b);
}

/* The same integers by widening multiplies: each product fits 16 bits (|q| <= 128, |x| <= 127);
 * lo gathers rows 0-1 as [r0 b01, r0 b23, r1 b01, r1 b23], hi rows 2-3; one pairwise add gives
 * [r0, r1, r2, r3]. */
#define MULL_STEP(W, XS, L)                                                              \
    do {                                                                                 \
        const int8x8_t xb = vreinterpret_s8_s32(vdup_laneq_s32(XS, L));                  \
        lo = vpadalq_s16(lo, vmull_s8(vget_low_s8(W), xb));                              \
        hi = vpadalq_s16(hi, vmull_s8(vget_high_s8(W), xb));                             \
    } while (0)
SD_AINLINE int32x4_t block_mull(const int8x16_t *w, int8x16_t x0, int8x16_t x1) {
    int32x4_t lo = vdupq_n_s32(0), hi = vdupq_n_s32(0);
    const int32x4_t a = vreinterpretq_s32_s8(x0), b = vreinterpretq_s32_s8(x1);
    MULL_STEP(w[0], a, 0);
    MULL_STEP(w[1], a, 1);
    MULL_STEP(w[2], a, 2);
    MULL_STEP(w[3], a, 3);
    MULL_STEP(w[4], b, 0);
    MULL_STEP(w[5], b, 1);
    MULL_STEP(w[6], b, 2);
    MULL_STEP(w[7], b, 3);
    return vpaddq_s32(lo, hi);
}
#undef MULL_STEP

/* Tile `tile` (nr of its rows kept) against tokens t0 .. t0 + NT - 1. xc: room for NT_MAX x nkb
 * int32 (8-bit: the 128 X_b). */
SD_AINLINE void tile_nt(const sd_i8_args *a, int tile, int nr, int t0, const int NT, const int bits,
                        const specdec_dtype dt, const int sdot, int32_t (*xc)[SD_I8_MAXCOLS / SD_I8_BLOCK]) {
    const sd_i8_packed *P = a->P;
    const unsigned char *tp = sd_i8_tile(P, tile);
    const size_t es = dt == SPECDEC_DTYPE_F32 ? 4 : 2, sv = 4 * es;
    const int nq = SD_I8_QUADS(bits), bpg = P->group / SD_I8_BLOCK, nv = (nr + 3) / 4;
    const size_t kbb = (size_t)nq * 64;
    const int8_t *xq[NT_MAX];
    const float *dv[NT_MAX], *xg[NT_MAX];
    sd_i8_tokens(a, t0, NT, xq, dv, xg);
    /* 8-bit: 128 * X_b per token and block, once for the four quarters */
    if (bits == 8)
        for (int t = 0; t < NT; t++)
            for (int b = 0; b < P->nkb; b++) {
                const int8_t *x = xq[t] + (size_t)b * SD_I8_BLOCK;
                xc[t][b] = 128 * ((int32_t)vaddlvq_s8(vld1q_s8(x)) + (int32_t)vaddlvq_s8(vld1q_s8(x + 16)));
            }
    const uint8x16_t m4 = vdupq_n_u8(0x0F), top = vdupq_n_u8(0x80);
    float32x4_t accS[4][NT_MAX];
    for (int v = 0; v < 4; v++)
        for (int t = 0; t < NT; t++) accS[v][t] = vdupq_n_f32(0.0f);
    for (int g = 0; g < P->ng; g++)
        for (int v = 0; v < nv; v++) {
            const float32x4_t S = load4(dt, sd_i8_scales(P, tp, g) + (size_t)v * sv);
            float32x4_t acc[NT_MAX];
            UNROLL
            for (int t = 0; t < NT; t++) acc[t] = accS[v][t];
            for (int b = g * bpg; b < (g + 1) * bpg; b++) {
                const unsigned char *wk = sd_i8_codes(P, tp, g) + (size_t)(b - g * bpg) * kbb + 16 * v;
                /* w[k] pairs with the block's activation bytes 4k .. 4k + 3: 4-bit quad u's low
                 * nibbles are w[2u], its high ones w[2u + 1]; 8-bit quad u is w[u] */
                int8x16_t w[8];
                if (bits == 4) {
                    UNROLL
                    for (int u = 0; u < 4; u++) {
                        const uint8x16_t q = vld1q_u8(wk + 64 * u);
                        w[2 * u] = vreinterpretq_s8_u8(vandq_u8(q, m4));
                        w[2 * u + 1] = vreinterpretq_s8_u8(vshrq_n_u8(q, 4));
                    }
                } else {
                    UNROLL
                    for (int u = 0; u < 8; u++) w[u] = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(wk + 64 * u), top));
                }
                UNROLL
                for (int t = 0; t < NT; t++) {
                    const int8_t *x = xq[t] + (size_t)b * SD_I8_BLOCK;
                    const int8x16_t x0 = vld1q_s8(x), x1 = vld1q_s8(x + 16);
                    int32x4_t I = sdot ? block_sdot(w, x0, x1) : block_mull(w, x0, x1);
                    if (bits == 8) I = vaddq_s32(I, vdupq_n_s32(xc[t][b]));   /* (q - 128) . x + 128 X */
                    const float32x4_t F = vmulq_f32(vcvtq_f32_s32(I), vdupq_n_f32(dv[t][b]));
                    acc[t] = vfmaq_f32(acc[t], S, F);   /* acc + S * F, one rounding */
                }
            }
            UNROLL
            for (int t = 0; t < NT; t++) accS[v][t] = acc[t];
        }
    for (int v = 0; v < nv; v++) {
        float32x4_t accB[NT_MAX];
        for (int t = 0; t < NT; t++) accB[t] = vdupq_n_f32(0.0f);
        for (int g = 0; g < P->ng; g++) {
            const float32x4_t B = load4(dt, sd_i8_biases(P, tp, g) + (size_t)v * sv);
            UNROLL
            for (int t = 0; t < NT; t++) accB[t] = vfmaq_f32(accB[t], B, vdupq_n_f32(xg[t][g]));
        }
        const int n = nr - 4 * v < 4 ? nr - 4 * v : 4;
        for (int t = 0; t < NT; t++) {
            float *yp = a->y + (size_t)(t0 + t) * a->ldy + (size_t)tile * SD_I8_TILE + 4 * v;
            const float32x4_t y = vaddq_f32(accS[v][t], accB[t]);
            if (n == 4) {
                vst1q_f32(yp, y);
            } else {   /* the last tile's last quarter: its padding rows are not stored */
                float tmp[4];
                vst1q_f32(tmp, y);
                memcpy(yp, tmp, sizeof(float) * (size_t)n);
            }
        }
    }
}

SD_AINLINE void rows_kind(const sd_i8_args *a, int r0, int r1, const int bits, const specdec_dtype dt, const int sdot) {
    int32_t xc[NT_MAX][SD_I8_MAXCOLS / SD_I8_BLOCK];   /* 16 KB, as the reference's row of codes */
    for (int r = r0; r < r1; r += SD_I8_TILE) {
        const int tile = r / SD_I8_TILE, nr = r1 - r < SD_I8_TILE ? r1 - r : SD_I8_TILE;
        int t = 0;
        for (; t + NT_MAX <= a->T; t += NT_MAX) tile_nt(a, tile, nr, t, NT_MAX, bits, dt, sdot, xc);
        switch (a->T - t) {
        case 3: tile_nt(a, tile, nr, t, 3, bits, dt, sdot, xc); break;
        case 2: tile_nt(a, tile, nr, t, 2, bits, dt, sdot, xc); break;
        case 1: tile_nt(a, tile, nr, t, 1, bits, dt, sdot, xc); break;
        default: break;
        }
    }
}

#define MULL(a, r0, r1, BITS, DT) rows_kind(a, r0, r1, BITS, DT, 0)
#define SDOT(a, r0, r1, BITS, DT) rows_kind(a, r0, r1, BITS, DT, 1)
SD_I8_FORMS(rows_mull, , MULL)
SD_I8_FORMS(rows_sdot, SD_SDOT, SDOT)
#undef MULL
#undef SDOT

sd_i8_rows_fn sd_i8_rows_neon(void) {
    /* sd_i8_avx2_novnni doubles as "no dot-product instruction" here (the tests run both forms) */
    return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) && !sd_i8_avx2_novnni ? rows_sdot : rows_mull;
}
