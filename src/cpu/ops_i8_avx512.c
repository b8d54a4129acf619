/* ops_i8_avx512.c: the int8-activation matmul rows with AVX-512 VNNI (vpdpbusd: unsigned weight
 * bytes x signed activation bytes, four products summed into each 32-bit lane, exactly). One
 * step (ops_i8.h) is one zmm of 16 lanes: for 4-bit weights the 64 packed bytes of two chunks
 * split into their low and high nibbles (two dpbusd against the prepared activations), for
 * 8-bit weights the 64 bytes of one chunk (one dpbusd). Then the recipe's float part: convert,
 * times D, one FMA by the lane scales (a permute of the row's 16 group scales) and one by the
 * lane biases. Every lane does exactly the recipe's operations, so the result is the scalar
 * recipe's bits. Compiled with the AVX-512 flags (CMake); VNNI is asked for here. */
#include "cpu/ops_i8.h"
#include <immintrin.h>
#include "cpu/ops_simd.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx512vnni")
#elif defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512vnni"))), apply_to = function)
#endif

#define NT_MAX 4

/* 16 group values of dtype dt from element e0, lanes past the row's groups unused (no permute
 * index picks them): a whole-vector load when 16 values exist there (the next rows' groups follow),
 * as masked loads that miss the caches are slow on Zen 5 (sd_load16). */
SD_AINLINE __m512 groups16(specdec_dtype dt, const void *base, size_t e0, __mmask16 m, size_t total) {
    return sd_load_groups16(dt, base, e0, e0 + 16 <= total ? (__mmask16)0xFFFF : m);
}

/* Row r against tokens t0..t0+NT-1: the recipe's 16 lanes per token into out[t] (summed later). */
SD_AINLINE void row_tile(const sd_i8_args *a, int r, int t0, const int NT, const int bits, const specdec_dtype dt,
                         __m512 *out) {
    const sd_mat *W = a->W;
    const int cols = W->cols, ng = cols / W->group;
    const int sps = 16 * W->group / (bits == 4 ? 128 : 64);   /* steps per 16 groups */
    const uint8_t *wr = (const uint8_t *)W->w + (size_t)r * (size_t)(cols * bits / 8);
    const size_t gr = (size_t)r * ng;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512 acc[NT_MAX];
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    for (int p0 = 0, gs = 0; p0 < a->steps; p0 += sps, gs += 16) {
        const int n = ng - gs < 16 ? ng - gs : 16;
        const __mmask16 gm = (__mmask16)(n == 16 ? 0xFFFFu : (1u << n) - 1u);
        const size_t tot = (size_t)W->rows * ng;
        const __m512 S = groups16(dt, W->scales, gr + gs, gm, tot), B = groups16(dt, W->biases, gr + gs, gm, tot);
        const int p1 = p0 + sps < a->steps ? p0 + sps : a->steps;
        for (int p = p0; p < p1; p++) {
            /* permutexvar reads the low 4 bits of the absolute group: its place among these 16 */
            const __m512i gi = _mm512_loadu_si512(a->g16 + p * 16);
            const __m512 S16 = _mm512_permutexvar_ps(gi, S), B16 = _mm512_permutexvar_ps(gi, B);
            const __m512i w = _mm512_loadu_si512(wr + (size_t)p * 64);
            __m512i lo = w, hi = w;
            if (bits == 4) {
                lo = _mm512_and_si512(w, m4);
                hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
            }
            for (int t = 0; t < NT; t++) {
                const size_t tt = (size_t)(t0 + t);
                const int8_t *xq = a->xq + tt * a->ldq + (size_t)p * (bits == 4 ? 128 : 64);
                __m512i I = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_loadu_si512(xq));
                if (bits == 4) I = _mm512_dpbusd_epi32(I, hi, _mm512_loadu_si512(xq + 64));
                const __m512 F = _mm512_mul_ps(_mm512_cvtepi32_ps(I), _mm512_loadu_ps(a->dv + tt * a->ldv + p * 16));
                acc[t] = _mm512_fmadd_ps(S16, F, acc[t]);
                acc[t] = _mm512_fmadd_ps(B16, _mm512_loadu_ps(a->xv + tt * a->ldv + p * 16), acc[t]);
            }
        }
    }
    for (int t = 0; t < NT; t++) out[t] = acc[t];
}

/* Rows rt..rt+nr-1 (nr <= 16) against tokens t0..: each row's lanes, then one transpose-add network
 * per token (sd_tree16_store: sd_hsum16's tree for every row at once, the same bits). */
SD_AINLINE void tile16(const sd_i8_args *a, int rt, int nr, int t0, const int NT, const int bits,
                       const specdec_dtype dt) {
    __m512 rs[NT_MAX][16], v[NT_MAX];
    for (int i = 0; i < 16; i++) {
        if (i < nr) row_tile(a, rt + i, t0, NT, bits, dt, v);
        for (int t = 0; t < NT; t++) rs[t][i] = i < nr ? v[t] : _mm512_setzero_ps();
    }
    const __mmask16 om = (__mmask16)(nr >= 16 ? 0xFFFFu : (1u << nr) - 1u);
    for (int t = 0; t < NT; t++) sd_tree16_store(rs[t], a->y + (size_t)(t0 + t) * a->ldy + rt, om);
}

SD_AINLINE void rows_kind(const sd_i8_args *a, int r0, int r1, const int bits, const specdec_dtype dt) {
    for (int rt = r0; rt < r1; rt += 16) {
        const int nr = r1 - rt < 16 ? r1 - rt : 16;
        int t = 0;
        for (; t + 4 <= a->T; t += 4) tile16(a, rt, nr, t, 4, bits, dt);
        switch (a->T - t) {
        case 3: tile16(a, rt, nr, t, 3, bits, dt); break;
        case 2: tile16(a, rt, nr, t, 2, bits, dt); break;
        case 1: tile16(a, rt, nr, t, 1, bits, dt); break;
        default: break;
        }
    }
}

#define KIND(name, BITS, DT) static void name(const sd_i8_args *a, int r0, int r1) { rows_kind(a, r0, r1, BITS, DT); }
KIND(q4_f32, 4, SPECDEC_DTYPE_F32)
KIND(q4_f16, 4, SPECDEC_DTYPE_F16)
KIND(q4_bf16, 4, SPECDEC_DTYPE_BF16)
KIND(q8_f32, 8, SPECDEC_DTYPE_F32)
KIND(q8_f16, 8, SPECDEC_DTYPE_F16)
KIND(q8_bf16, 8, SPECDEC_DTYPE_BF16)

static void rows(const sd_i8_args *a, int r0, int r1) {
    const sd_mat *W = a->W;
    int d = W->dtype == SPECDEC_DTYPE_F16 ? 1 : W->dtype == SPECDEC_DTYPE_BF16 ? 2 : 0;
    static void (*const q4[3])(const sd_i8_args *, int, int) = {q4_f32, q4_f16, q4_bf16};
    static void (*const q8[3])(const sd_i8_args *, int, int) = {q8_f32, q8_f16, q8_bf16};
    (W->bits == 4 ? q4 : q8)[d](a, r0, r1);
}

#if defined(__clang__)
#pragma clang attribute pop
#endif

sd_i8_rows_fn sd_i8_rows_avx512(void) {
    return __builtin_cpu_supports("avx512vnni") ? rows : (sd_i8_rows_fn)0;
}
