/* ops_simd.h: the helpers the SIMD kernel files share, each written once: the always-inline
 * marker, the scalar dtype reader, the partial-vector loaders of the ISAs without 16-bit masked
 * loads (AVX2, NEON), and the x86 horizontal sums and 16-wide dtype loaders used by both the f32
 * and the int8 kernels. Include after the ISA's intrinsics header; the x86 parts appear only in
 * files compiled with those ISAs. The sums' trees are part of the exactness contract (fixed by
 * the vector width alone). */
#ifndef SD_OPS_SIMD_H
#define SD_OPS_SIMD_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "specdec.h"
#include "util/dtype.h"

#if defined(__GNUC__)
#define SD_AINLINE static inline __attribute__((always_inline))
#else
#define SD_AINLINE static inline
#endif

/* The attention kernels' prefetch of the KV cache. A kv head's rows are a whole cache row apart
 * (all kv heads' entries of a position lie together), a stride the hardware prefetchers follow
 * poorly; where the cache is not in the CPU's caches (a model whose weights stream from DRAM
 * evicts it every step) each row's lines were a round trip. So the kernels ask for the row
 * SD_ATT_PF rows ahead while reading one (the 1.7B shape's decode 1.015-1.02x, the embedded
 * pair's MTP 1.03x; docs/benchmarks/cpu-mtp-ngram-xeon-2026-12-05.md). */
#define SD_ATT_PF 8
SD_AINLINE void sd_prefetch_bytes(const void *base, size_t off, size_t bytes) {
    const char *p = (const char *)base + off;
    for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(p + b, 0, 3);
}
/* The first SD_ATT_PF of n rows (row_bytes each, stride bytes apart), before a pass over them. */
SD_AINLINE void sd_prefetch_first_rows(const void *base, int n, size_t stride, size_t row_bytes) {
    for (int j = 0; j < n && j < SD_ATT_PF; j++) sd_prefetch_bytes(base, (size_t)j * stride, row_bytes);
}

/* One f16 as f32: F16C where the file is built with it, else the (exact, same-valued) software one. */
#if defined(__F16C__)
#define SD_F16_F32(h) _cvtsh_ss(h)
#else
#define SD_F16_F32(h) sd_f16_to_f32(h)
#endif

/* Element e of dtype dt at p as f32 (bf16 and f16 convert exactly). */
SD_AINLINE float sd_elem(specdec_dtype dt, const void *p, size_t e) {
    if (dt == SPECDEC_DTYPE_BF16) return sd_bf16_to_f32(((const uint16_t *)p)[e]);
    if (dt == SPECDEC_DTYPE_F16) return SD_F16_F32(((const uint16_t *)p)[e]);
    return ((const float *)p)[e];
}

/* load_part(dt, p, n) / loadx_part(p, n): n < W elements (dtype dt / f32), the rest zero, through
 * a zeroed stack copy and the file's full-vector loaders LOAD(dt, p) / LOADF(p). */
#define SD_PART_LOADERS(VEC, W, LOAD, LOADF)                                  \
    SD_AINLINE VEC load_part(specdec_dtype dt, const void *p, int n) {        \
        unsigned char tmp[(W) * 4] = {0};                                     \
        size_t es = dt == SPECDEC_DTYPE_F32 ? 4 : 2;                          \
        memcpy(tmp, p, (size_t)n * es);                                       \
        return LOAD(dt, tmp);                                                 \
    }                                                                         \
    SD_AINLINE VEC loadx_part(const float *p, int n) {                        \
        float tmp[W] = {0};                                                   \
        memcpy(tmp, p, (size_t)n * sizeof(float));                           \
        return LOADF(tmp);                                                    \
    }

#if defined(__AVX2__)
/* Fixed tree: 8 -> 4 -> 2 -> 1. */
SD_AINLINE float sd_hsum8(__m256 v) {
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    a = _mm_add_ss(a, _mm_movehdup_ps(a));
    return _mm_cvtss_f32(a);
}
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__)
/* Fixed tree: 16 -> 8 (l + l+8), then sd_hsum8's. */
SD_AINLINE float sd_hsum16(__m512 v) {
    __m256 lo = _mm512_castps512_ps256(v);
    __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    return sd_hsum8(_mm256_add_ps(lo, hi));
}

/* y[0..15] (masked by m) = sd_hsum16 of v[0..15], row by row, all at once. */
SD_AINLINE void sd_tree16_store(const __m512 *v, float *y, __mmask16 m) {
    /* level 1, pairs (i, i+4): chunks 0-1 = row i's s_l = v_l + v_l+8, chunks 2-3 = row i+4's */
    static const int p1[8] = {0, 1, 2, 3, 8, 9, 10, 11};
    __m512 w[8];
    for (int j = 0; j < 8; j++) {
        __m512 x0 = v[p1[j]], x1 = v[p1[j] + 4];
        w[j] = _mm512_add_ps(_mm512_shuffle_f32x4(x0, x1, 0x44), _mm512_shuffle_f32x4(x0, x1, 0xEE));
    }
    /* level 2: a_l = s_l + s_l+4; X holds rows 0,4,8,12 (one per 128-bit chunk), Y 1,5,9,13, ... */
    __m512 u[4];
    for (int j = 0; j < 4; j++)
        u[j] = _mm512_add_ps(_mm512_shuffle_f32x4(w[j], w[j + 4], 0x88), _mm512_shuffle_f32x4(w[j], w[j + 4], 0xDD));
    /* level 3: b_l = a_l + a_l+2; chunk c of h0 = rows 4c, 4c+1 (2 lanes each), h1 = 4c+2, 4c+3 */
    __m512 h0 = _mm512_add_ps(_mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(3, 2, 3, 2)));
    __m512 h1 = _mm512_add_ps(_mm512_shuffle_ps(u[2], u[3], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_ps(u[2], u[3], _MM_SHUFFLE(3, 2, 3, 2)));
    /* level 4: b_0 + b_1; lane 4c + j = row 4c + j */
    __m512 r = _mm512_add_ps(_mm512_shuffle_ps(h0, h1, _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_ps(h0, h1, _MM_SHUFFLE(3, 1, 3, 1)));
    _mm512_mask_storeu_ps(y, m, r);
}

/* 16 elements of dtype dt at p (masked lanes read as 0). A full mask takes a plain load: masked
 * loads that miss the caches run several times slower on Zen 5 (the f32 LM head went from 22 ms
 * to 2 ms, docs/benchmarks/cpu-int8-vs-llamacpp-*.md); the values are the same. */
SD_AINLINE __m512 sd_load16(specdec_dtype dt, const void *p, __mmask16 m) {
    if (m == (__mmask16)0xFFFF) {
        if (dt == SPECDEC_DTYPE_BF16)
            return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
        if (dt == SPECDEC_DTYPE_F16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
        return _mm512_loadu_ps(p);
    }
    if (dt == SPECDEC_DTYPE_BF16) {
        __m512i u = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
        return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
    }
    if (dt == SPECDEC_DTYPE_F16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
    return _mm512_maskz_loadu_ps(m, p);
}

/* 16 group values (scales or biases) of dtype dt from element g0 of base, lanes outside m zero. */
SD_AINLINE __m512 sd_load_groups16(specdec_dtype dt, const void *base, size_t g0, __mmask16 m) {
    return sd_load16(dt, (const char *)base + g0 * (dt == SPECDEC_DTYPE_F32 ? 4 : 2), m);
}
#endif

#endif
