/* ops_tiles.h: the token-tile drivers shared by the 4-lane and 8-lane SIMD levels (avx2, neon).
 * Include after defining, in the ISA file,
 *   static void dense_rows(const sd_mm_args *a, int r0, int r1, int t0, int NT, specdec_dtype dt);
 *   static void quant_rows(const sd_mm_args *a, int r0, int r1, int t0, int NT, int bits, specdec_dtype dt);
 * It defines mm_f32 .. mm_q8_bf16: T is walked in tiles of 4 tokens plus one tail tile, and each
 * token's arithmetic is the same whatever tile it lands in, so the split never shows in the bits. */
#ifndef SD_OPS_TILES_H
#define SD_OPS_TILES_H

#define DENSE_FN(name, DT) \
    static void name(const sd_mm_args *a, int r0, int r1) { \
        int t = 0; \
        for (; t + 4 <= a->T; t += 4) dense_rows(a, r0, r1, t, 4, DT); \
        switch (a->T - t) { \
        case 3: dense_rows(a, r0, r1, t, 3, DT); break; \
        case 2: dense_rows(a, r0, r1, t, 2, DT); break; \
        case 1: dense_rows(a, r0, r1, t, 1, DT); break; \
        default: break; } }
#define QUANT_FN(name, BITS, DT) \
    static void name(const sd_mm_args *a, int r0, int r1) { \
        int t = 0; \
        for (; t + 4 <= a->T; t += 4) quant_rows(a, r0, r1, t, 4, BITS, DT); \
        switch (a->T - t) { \
        case 3: quant_rows(a, r0, r1, t, 3, BITS, DT); break; \
        case 2: quant_rows(a, r0, r1, t, 2, BITS, DT); break; \
        case 1: quant_rows(a, r0, r1, t, 1, BITS, DT); break; \
        default: break; } }

DENSE_FN(mm_f32, SPECDEC_DTYPE_F32)
DENSE_FN(mm_f16, SPECDEC_DTYPE_F16)
DENSE_FN(mm_bf16, SPECDEC_DTYPE_BF16)
QUANT_FN(mm_q4_f32, 4, SPECDEC_DTYPE_F32)
QUANT_FN(mm_q4_f16, 4, SPECDEC_DTYPE_F16)
QUANT_FN(mm_q4_bf16, 4, SPECDEC_DTYPE_BF16)
QUANT_FN(mm_q8_f32, 8, SPECDEC_DTYPE_F32)
QUANT_FN(mm_q8_f16, 8, SPECDEC_DTYPE_F16)
QUANT_FN(mm_q8_bf16, 8, SPECDEC_DTYPE_BF16)

#endif
