/* ops_i8_avx512.c: the int8-activation matmul over packed tiles (ops_i8.h) with AVX-512 VNNI
 * (vpdpbusd: unsigned weight bytes x signed activation bytes, four products summed into each
 * 32-bit lane, exactly). A quad of a tile is one zmm whose 16 lanes are the tile's 16 rows; the
 * 4 activation bytes it pairs with are broadcast to every lane (an embedded broadcast of the
 * instruction's memory operand). Per block of 32 columns and token: the block's integer sums of
 * 16 rows in two chains of vpdpbusd (4-bit: the low nibbles' and the high nibbles'; 8-bit: even
 * and odd quads), then convert, times D, one FMA by the rows' scales: 3 float operations per 16
 * rows and 32 columns. The biases' term is one FMA per group after the blocks. Every lane does
 * exactly the recipe's operations for its row, so the result is the scalar recipe's bits, and
 * there is no horizontal sum.
 *
 * Shape (measured with bench/bench_i8.c): the unpacked quads of a block (8 zmm) serve every token
 * of a token tile of up to 8 (tiles of 4 walked the weights twice for a verify of 5 rows: 8 gained
 * 11-14% at T = 5, 0-8% at T = 8 to 16 on 4-bit weights, 8-bit 9% slower at T = 8); with one
 * token, tiles go in pairs (tile_pair1: 7-14% faster at T = 1 on most shapes, the Qwen3 1.7B
 * shape's decode 1.05-1.08x in single runs); a matrix larger than a core's L2 (1 MB on Zen 4 / 5, 2 MB on recent Xeons; the LM
 * head) is prefetched SD_I8_PF_TILES tiles ahead by its first token tile (on the Xeon of the record, where
 * the 1.7B shape streams from DRAM, any distance from 2 to 64 KB and none measured the same). Compiled with the AVX-512
 * flags (CMake); VNNI is asked for here. In the token tiles the activation broadcast is the
 * instruction's memory operand and the tokens are reached by two walking pointers
 * (docs/benchmarks/cpu-zen5-vs-llamacpp-2026-12-05.md: up to 13% less time at T = 2 and 4 on a Zen 5). */
#include "cpu/ops_i8.h"
#include <immintrin.h>
#include <string.h>
#include "cpu/ops_simd.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx512vnni")
#elif defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512vnni"))), apply_to = function)
#endif

#define NT_MAX 8

/* 16 scale or bias values of a group as f32 (bf16 in the high half of a 32-bit lane is its f32
 * value; f16 converted exactly). */
SD_AINLINE __m512 load16(const specdec_dtype dt, const unsigned char *p) {
    if (dt == SPECDEC_DTYPE_BF16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
    if (dt == SPECDEC_DTYPE_F16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_loadu_ps((const float *)p);
}

/* 4 activation bytes in every 32-bit lane. */
SD_AINLINE __m512i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* acc + (w's unsigned bytes . the 4 signed bytes at p, broadcast to every lane), the broadcast
 * inside the instruction (an embedded {1to16} memory operand): GCC 12 emits a separate
 * vpbroadcastd for _mm512_dpbusd_epi32(acc, w, bcast4(p)), one more instruction per product.
 * For tile_nt, where each token's broadcast serves one tile: with tiles in pairs (tile_pair1)
 * one register broadcast serves both, and the folded form measured 4-11% slower there. */
SD_AINLINE __m512i dpb_bc(__m512i acc, __m512i w, const int8_t *p) {
#if defined(__GNUC__)
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int32_t(*)[1])p));
    return acc;
#else
    return _mm512_dpbusd_epi32(acc, w, bcast4(p));
#endif
}

/* Tile `tile` (nr of its rows kept) against tokens t0 .. t0 + NT - 1. pf: prefetch the tile pf
 * tiles ahead (0: none). */
SD_AINLINE void tile_nt(const sd_i8_args *a, int tile, int nr, int t0, int pf, const int NT, const int bits,
                        const specdec_dtype dt) {
    const sd_i8_packed *P = a->P;
    const unsigned char *tp = sd_i8_tile(P, tile);
    const int nq = SD_I8_QUADS(bits), bpg = P->group / SD_I8_BLOCK;
    const size_t kbb = (size_t)nq * 64, pfo = (size_t)pf * P->tile_bytes;
    const size_t ldq = (size_t)a->ldq, ldd = (size_t)a->ldd;
    const int8_t *xq0 = a->xq + (size_t)t0 * ldq;
    const float *dv0 = a->d + (size_t)t0 * ldd;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512 accS[NT_MAX], accB[NT_MAX];
    for (int t = 0; t < NT; t++) accS[t] = accB[t] = _mm512_setzero_ps();
    for (int g = 0, b = 0; g < P->ng; g++) {
        const __m512 S = load16(dt, sd_i8_scales(P, tp, g));
        if (pf) {
            _mm_prefetch((const char *)sd_i8_scales(P, tp, g) + pfo, _MM_HINT_T0);
            _mm_prefetch((const char *)sd_i8_biases(P, tp, g) + pfo, _MM_HINT_T0);
        }
        for (int bb = 0; bb < bpg; bb++, b++) {
            const unsigned char *wk = sd_i8_codes(P, tp, g) + (size_t)bb * kbb;
            if (pf)
                for (int u = 0; u < nq; u++) _mm_prefetch((const char *)wk + pfo + 64 * u, _MM_HINT_T0);
            __m512i w[8];
            if (bits == 4) {
                for (int u = 0; u < 4; u++) {
                    const __m512i v = _mm512_loadu_si512(wk + 64 * u);
                    w[2 * u] = _mm512_and_si512(v, m4);
                    w[2 * u + 1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                }
            } else {
                for (int u = 0; u < 8; u++) w[u] = _mm512_loadu_si512(wk + 64 * u);
            }
            /* the tokens' codes and block scales lie ldq / ldd apart: two walking pointers rather
             * than a pointer per token (16 live ones at 8 tokens); measured together with the
             * folded broadcast, not apart */
            const int8_t *x = xq0 + (size_t)b * SD_I8_BLOCK;
            const float *dp = dv0 + b;
            for (int t = 0; t < NT; t++, x += ldq, dp += ldd) {
                /* 4-bit: w[2u] pairs with x[8u..], w[2u+1] with x[8u+4..]; 8-bit: w[u] with x[4u..]:
                 * either way w[k] with x[4k..4k+3]. Two chains (one chain per token measured
                 * 2-7% slower at T = 4 and 8 on the Zen 5 of the record) */
                __m512i I0 = _mm512_setzero_si512(), I1 = _mm512_setzero_si512();
                for (int k = 0; k < 8; k += 2) {
                    I0 = dpb_bc(I0, w[k], x + 4 * k);
                    I1 = dpb_bc(I1, w[k + 1], x + 4 * k + 4);
                }
                const __m512i I = _mm512_add_epi32(I0, I1);
                const __m512 F = _mm512_mul_ps(_mm512_cvtepi32_ps(I), _mm512_set1_ps(*dp));
                accS[t] = _mm512_fmadd_ps(S, F, accS[t]);
            }
        }
    }
    const float *xg0 = a->xg + (size_t)t0 * a->ldg;
    for (int g = 0; g < P->ng; g++) {
        const __m512 B = load16(dt, sd_i8_biases(P, tp, g));
        for (int t = 0; t < NT; t++) accB[t] = _mm512_fmadd_ps(B, _mm512_set1_ps(xg0[(size_t)t * a->ldg + g]), accB[t]);
    }
    const __mmask16 om = (__mmask16)(nr >= 16 ? 0xFFFFu : (1u << nr) - 1u);
    for (int t = 0; t < NT; t++)
        _mm512_mask_storeu_ps(a->y + (size_t)(t0 + t) * a->ldy + (size_t)tile * SD_I8_TILE, om,
                              _mm512_add_ps(accS[t], accB[t]));
}

/* One token, two consecutive tiles walked together (two independent streams of loads and chains
 * of arithmetic in flight; one tile alone leaves a core waiting on each block's loads). */
SD_AINLINE void tile_pair1(const sd_i8_args *a, int ta, int nra, int nrb, int pf, const int bits, const specdec_dtype dt) {
    const sd_i8_packed *P = a->P;
    const unsigned char *tp[2] = {sd_i8_tile(P, ta), sd_i8_tile(P, ta + 1)};
    const int nq = SD_I8_QUADS(bits), bpg = P->group / SD_I8_BLOCK;
    const size_t kbb = (size_t)nq * 64, pfo = (size_t)pf * P->tile_bytes;
    const int8_t *xq = a->xq;
    const float *dv = a->d, *xg = a->xg;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int g = 0, b = 0; g < P->ng; g++) {
        __m512 S[2];
        for (int k = 0; k < 2; k++) {
            S[k] = load16(dt, sd_i8_scales(P, tp[k], g));
            if (pf) {
                _mm_prefetch((const char *)sd_i8_scales(P, tp[k], g) + pfo, _MM_HINT_T0);
                _mm_prefetch((const char *)sd_i8_biases(P, tp[k], g) + pfo, _MM_HINT_T0);
            }
        }
        for (int bb = 0; bb < bpg; bb++, b++) {
            const int8_t *x = xq + (size_t)b * SD_I8_BLOCK;
            const __m512 D = _mm512_set1_ps(dv[b]);
            for (int k = 0; k < 2; k++) {
                const unsigned char *wk = sd_i8_codes(P, tp[k], g) + (size_t)bb * kbb;
                if (pf)
                    for (int u = 0; u < nq; u++) _mm_prefetch((const char *)wk + pfo + 64 * u, _MM_HINT_T0);
                __m512i I0 = _mm512_setzero_si512(), I1 = _mm512_setzero_si512();
                if (bits == 4) {
                    for (int u = 0; u < 4; u++) {
                        const __m512i v = _mm512_loadu_si512(wk + 64 * u);
                        I0 = _mm512_dpbusd_epi32(I0, _mm512_and_si512(v, m4), bcast4(x + 8 * u));
                        I1 = _mm512_dpbusd_epi32(I1, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4), bcast4(x + 8 * u + 4));
                    }
                } else {
                    for (int u = 0; u < 8; u += 2) {
                        I0 = _mm512_dpbusd_epi32(I0, _mm512_loadu_si512(wk + 64 * u), bcast4(x + 4 * u));
                        I1 = _mm512_dpbusd_epi32(I1, _mm512_loadu_si512(wk + 64 * u + 64), bcast4(x + 4 * u + 4));
                    }
                }
                acc[k] = _mm512_fmadd_ps(S[k], _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(I0, I1)), D), acc[k]);
            }
        }
    }
    for (int k = 0; k < 2; k++) {
        __m512 accB = _mm512_setzero_ps();
        for (int g = 0; g < P->ng; g++)
            accB = _mm512_fmadd_ps(load16(dt, sd_i8_biases(P, tp[k], g)), _mm512_set1_ps(xg[g]), accB);
        const int nr = k ? nrb : nra;
        const __mmask16 om = (__mmask16)(nr >= 16 ? 0xFFFFu : (1u << nr) - 1u);
        _mm512_mask_storeu_ps(a->y + (size_t)(ta + k) * SD_I8_TILE, om, _mm512_add_ps(acc[k], accB));
    }
}

SD_AINLINE void rows_kind(const sd_i8_args *a, int r0, int r1, const int bits, const specdec_dtype dt) {
    const sd_i8_packed *P = a->P;
    const int pf = sd_i8_streamed(P) ? SD_I8_PF_TILES : 0;
    int r = r0;
    if (a->T == 1)   /* one token: tiles in pairs while two remain */
        for (; r + SD_I8_TILE < r1; r += 2 * SD_I8_TILE) {
            const int nrb = r1 - (r + SD_I8_TILE) < SD_I8_TILE ? r1 - (r + SD_I8_TILE) : SD_I8_TILE;
            tile_pair1(a, r / SD_I8_TILE, SD_I8_TILE, nrb, pf, bits, dt);
        }
    for (; r < r1; r += SD_I8_TILE) {
        const int tile = r / SD_I8_TILE, nr = r1 - r < SD_I8_TILE ? r1 - r : SD_I8_TILE;
        int t = 0;
        for (; t + NT_MAX <= a->T; t += NT_MAX) tile_nt(a, tile, nr, t, t ? 0 : pf, NT_MAX, bits, dt);
        const int pt = t ? 0 : pf;   /* the first token tile brings the tile in */
        switch (a->T - t) {
        case 7: tile_nt(a, tile, nr, t, pt, 7, bits, dt); break;
        case 6: tile_nt(a, tile, nr, t, pt, 6, bits, dt); break;
        case 5: tile_nt(a, tile, nr, t, pt, 5, bits, dt); break;
        case 4: tile_nt(a, tile, nr, t, pt, 4, bits, dt); break;
        case 3: tile_nt(a, tile, nr, t, pt, 3, bits, dt); break;
        case 2: tile_nt(a, tile, nr, t, pt, 2, bits, dt); break;
        case 1: tile_nt(a, tile, nr, t, pt, 1, bits, dt); break;
        default: break;
        }
    }
}

SD_I8_FORMS(rows, , rows_kind)

#if defined(__clang__)
#pragma clang attribute pop
#endif

sd_i8_rows_fn sd_i8_rows_avx512(void) {
    return __builtin_cpu_supports("avx512vnni") ? rows : (sd_i8_rows_fn)0;
}
