/* ops_i8_avx2.c: the int8-activation matmul rows with 256-bit integer dot products. A step's 16
 * lanes (ops_i8.h) are two ymm halves of 8, each accumulated on its own (lane-wise, so the
 * recipe's bits). The dot products of unsigned weight bytes and signed activation bytes:
 *   AVX-VNNI (vpdpbusd, VEX): four products summed into a 32-bit lane, exactly;
 *   AVX2 (vpmaddubsw + vpmaddwd): pairs into 16 bits, then pairs of pairs into 32. A pair of 4-bit
 *     weights times activations is at most 2 * 15 * 127 = 3810, so the low- and high-nibble pairs
 *     can even be added in 16 bits (7620) before one vpmaddwd. 8-bit weights would overflow a pair
 *     (2 * 255 * 127), so they are split into nibbles: I = I(low) + 16 * I(high), exact.
 * Both forms give the same integers, hence the same results. */
#include "cpu/ops_i8.h"
#include "util/dtype.h"
#include <cpuid.h>
#include <immintrin.h>
#include "cpu/ops_simd.h"

#define NT_MAX 4

/* 32-bit lanes of (u8 a) . (s8 b) over 4 bytes, plus those of (u8 c) . (s8 d), added to acc. */
SD_AINLINE __m256i dot2_mad(__m256i acc, __m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(a, b), _mm256_maddubs_epi16(c, d));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones));
}
/* Not always_inline: the non-VNNI kernels keep an uncalled copy rather than fail to inline. */
__attribute__((target("avxvnni"))) static inline __m256i dot2_vnni(__m256i acc, __m256i a, __m256i b, __m256i c,
                                                                   __m256i d) {
    return _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(acc, a, b), c, d);
}

SD_AINLINE void row_tile(const sd_i8_args *a, int r, int t0, const int NT, const int bits, const specdec_dtype dt,
                         const int vnni) {
    const sd_mat *W = a->W;
    const int cols = W->cols, ng = cols / W->group;
    const uint8_t *wr = (const uint8_t *)W->w + (size_t)r * (size_t)(cols * bits / 8);
    const size_t gr = (size_t)r * ng;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc[NT_MAX][2];
    for (int t = 0; t < NT; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    for (int p = 0; p < a->steps; p++) {
        for (int h = 0; h < 2; h++) {
            const int g = a->g16[p * 16 + 8 * h];
            const __m256 S = _mm256_set1_ps(sd_elem(dt, W->scales, gr + g));
            const __m256 B = _mm256_set1_ps(sd_elem(dt, W->biases, gr + g));
            const __m256i w = _mm256_loadu_si256((const __m256i *)(wr + (size_t)p * 64 + 32 * h));
            const __m256i lo = _mm256_and_si256(w, m4), hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), m4);
            for (int t = 0; t < NT; t++) {
                const size_t tt = (size_t)(t0 + t);
                const int8_t *xq = a->xq + tt * a->ldq;
                __m256i I;
                if (bits == 4) {   /* low nibbles against xq[p*128 + 32h ..], high against [+ 64] */
                    const __m256i xa = _mm256_loadu_si256((const __m256i *)(xq + (size_t)p * 128 + 32 * h));
                    const __m256i xb = _mm256_loadu_si256((const __m256i *)(xq + (size_t)p * 128 + 64 + 32 * h));
                    I = vnni ? dot2_vnni(_mm256_setzero_si256(), lo, xa, hi, xb)
                             : dot2_mad(_mm256_setzero_si256(), lo, xa, hi, xb);
                } else {
                    const __m256i x = _mm256_loadu_si256((const __m256i *)(xq + (size_t)p * 64 + 32 * h));
                    if (vnni) {
                        I = _mm256_setzero_si256();
                        I = dot2_vnni(I, w, x, _mm256_setzero_si256(), x);
                    } else {
                        const __m256i z = _mm256_setzero_si256();
                        __m256i il = dot2_mad(z, lo, x, z, x), ih = dot2_mad(z, hi, x, z, x);
                        I = _mm256_add_epi32(il, _mm256_slli_epi32(ih, 4));
                    }
                }
                const __m256 F = _mm256_mul_ps(_mm256_cvtepi32_ps(I), _mm256_loadu_ps(a->dv + tt * a->ldv + p * 16 + 8 * h));
                acc[t][h] = _mm256_fmadd_ps(S, F, acc[t][h]);
                acc[t][h] = _mm256_fmadd_ps(B, _mm256_loadu_ps(a->xv + tt * a->ldv + p * 16 + 8 * h), acc[t][h]);
            }
        }
    }
    for (int t = 0; t < NT; t++) a->y[(size_t)(t0 + t) * a->ldy + r] = sd_hsum8(_mm256_add_ps(acc[t][0], acc[t][1]))   /* the recipe's tree */;
}

SD_AINLINE void rows_kind(const sd_i8_args *a, int r0, int r1, const int bits, const specdec_dtype dt, const int vnni) {
    for (int r = r0; r < r1; r++) {
        int t = 0;
        for (; t + 4 <= a->T; t += 4) row_tile(a, r, t, 4, bits, dt, vnni);
        switch (a->T - t) {
        case 3: row_tile(a, r, t, 3, bits, dt, vnni); break;
        case 2: row_tile(a, r, t, 2, bits, dt, vnni); break;
        case 1: row_tile(a, r, t, 1, bits, dt, vnni); break;
        default: break;
        }
    }
}

#define KIND(name, BITS, DT, VN, ATTR) \
    ATTR static void name(const sd_i8_args *a, int r0, int r1) { rows_kind(a, r0, r1, BITS, DT, VN); }
#define VNNI_ATTR __attribute__((target("avxvnni")))
KIND(q4_f32, 4, SPECDEC_DTYPE_F32, 0, )
KIND(q4_f16, 4, SPECDEC_DTYPE_F16, 0, )
KIND(q4_bf16, 4, SPECDEC_DTYPE_BF16, 0, )
KIND(q8_f32, 8, SPECDEC_DTYPE_F32, 0, )
KIND(q8_f16, 8, SPECDEC_DTYPE_F16, 0, )
KIND(q8_bf16, 8, SPECDEC_DTYPE_BF16, 0, )
KIND(v4_f32, 4, SPECDEC_DTYPE_F32, 1, VNNI_ATTR)
KIND(v4_f16, 4, SPECDEC_DTYPE_F16, 1, VNNI_ATTR)
KIND(v4_bf16, 4, SPECDEC_DTYPE_BF16, 1, VNNI_ATTR)
KIND(v8_f32, 8, SPECDEC_DTYPE_F32, 1, VNNI_ATTR)
KIND(v8_f16, 8, SPECDEC_DTYPE_F16, 1, VNNI_ATTR)
KIND(v8_bf16, 8, SPECDEC_DTYPE_BF16, 1, VNNI_ATTR)

typedef void (*rows_fn)(const sd_i8_args *, int, int);
static const rows_fn tab[2][2][3] = {{{q4_f32, q4_f16, q4_bf16}, {q8_f32, q8_f16, q8_bf16}},
                                     {{v4_f32, v4_f16, v4_bf16}, {v8_f32, v8_f16, v8_bf16}}};

static int dtype_ix(specdec_dtype dt) { return dt == SPECDEC_DTYPE_F16 ? 1 : dt == SPECDEC_DTYPE_BF16 ? 2 : 0; }
static void rows_mad(const sd_i8_args *a, int r0, int r1) { tab[0][a->W->bits == 8][dtype_ix(a->W->dtype)](a, r0, r1); }
static void rows_vnni(const sd_i8_args *a, int r0, int r1) { tab[1][a->W->bits == 8][dtype_ix(a->W->dtype)](a, r0, r1); }

/* AVX-VNNI is CPUID.(7,1):EAX bit 4; asked directly because clang (14) has no "avxvnni" for
 * __builtin_cpu_supports, and the library must also build with clang (the fuzz targets). */
static int has_avxvnni(void) {
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4));
}

sd_i8_rows_fn sd_i8_rows_avx2(void) {
    return has_avxvnni() && !sd_i8_avx2_novnni ? rows_vnni : rows_mad;
}
