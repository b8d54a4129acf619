/* ops_avx2.c: AVX2+FMA+F16C kernels (8 lanes), the same algorithms as ops_avx512.c:
 * matmul rows for every weight kind, rmsnorm of a row, attention for one (query, head).
 * Partial chunks at the end of a row are copied into a zeroed stack buffer (AVX2 has no
 * 16-bit masked loads); all reduction orders are fixed by the reduction length. */
#include "cpu/ops_internal.h"
#include "util/dtype.h"
#include <immintrin.h>
#include "cpu/ops_simd.h"
#include <math.h>
#include <string.h>


#define NT_MAX 4

/* 8 elements of dtype dt at p, all present. */
SD_AINLINE __m256 load8(specdec_dtype dt, const void *p) {
    if (dt == SPECDEC_DTYPE_BF16) {
        __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
        return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
    }
    if (dt == SPECDEC_DTYPE_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    return _mm256_loadu_ps((const float *)p);
}

SD_PART_LOADERS(__m256, 8, load8, _mm256_loadu_ps)

/* ---- dense rows: 8-wide chunk c into accumulator c % 4 ---- */
SD_AINLINE void dense_rows(const sd_mm_args *a, int r0, int r1, int t0, const int NT, specdec_dtype dt) {
    const sd_mat *W = a->W;
    const int cols = W->cols, nch = (cols + 7) / 8, nfull = cols / 8, nfull4 = cols / 32;
    const size_t es = dt == SPECDEC_DTYPE_F32 ? 4 : 2;
    const float *xt[NT_MAX];
    for (int t = 0; t < NT; t++) xt[t] = a->x + (size_t)(t0 + t) * a->ldx;
    for (int r = r0; r < r1; r++) {
        const char *wr = (const char *)W->w + (size_t)r * cols * es;
        __m256 acc[NT_MAX][4];
        for (int t = 0; t < NT; t++)
            for (int u = 0; u < 4; u++) acc[t][u] = _mm256_setzero_ps();
        int c = 0;
        for (; c < nfull4 * 4; c += 4)
            for (int u = 0; u < 4; u++) {
                __m256 w = load8(dt, wr + (size_t)(c + u) * 8 * es);
                for (int t = 0; t < NT; t++)
                    acc[t][u] = _mm256_fmadd_ps(w, _mm256_loadu_ps(xt[t] + (c + u) * 8), acc[t][u]);
            }
        for (int u = 0; u < 4; u++) { /* tail chunks c = 4*nfull4 + u */
            int cc = c + u;
            if (cc >= nch) break;
            int full = cc < nfull;
            __m256 w = full ? load8(dt, wr + (size_t)cc * 8 * es) : load_part(dt, wr + (size_t)cc * 8 * es, cols - cc * 8);
            for (int t = 0; t < NT; t++) {
                __m256 xv = full ? _mm256_loadu_ps(xt[t] + cc * 8) : loadx_part(xt[t] + cc * 8, cols - cc * 8);
                acc[t][u] = _mm256_fmadd_ps(w, xv, acc[t][u]);
            }
        }
        for (int t = 0; t < NT; t++) {
            __m256 s = _mm256_add_ps(_mm256_add_ps(acc[t][0], acc[t][1]), _mm256_add_ps(acc[t][2], acc[t][3]));
            a->y[(size_t)(t0 + t) * a->ldy + r] = sd_hsum8(s);
        }
    }
}

/* ---- quantized rows, L = 8 (layout in ops_internal.h) ----
 * A row is walked in super-blocks of 8 groups: their 8 scales and 8 biases are loaded and
 * converted once (one vector each, no scalar staging: a store-then-vector-load stalls); the
 * bias term is one FMA against the 8 group sums of x; each block inside picks its per-lane
 * scales with one permute (lane -> group index, a function of (bits, group) only). Same
 * arithmetic, in the same order, as the per-block scalar-staged loads this replaced (checked
 * bitwise on 575,910 outputs), 1.5-2.7x faster at T = 1 (docs/benchmarks/cpu-avx2-2026-12-01.md).
 * Also tried: activations pre-scaled by 2^(-4k) so one AND replaces shift + AND (exact, same
 * bits): 2% faster at T = 1, 6% slower at T >= 4 on Zen 4 (bench_matmul A/B), so not kept. */
SD_AINLINE __m256 lanes_lt(int n) {
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
}

/* 8 scales or biases from element e of base (row-major, `total` elements in all), the lanes
 * past n zero. Reads past n only while still inside the array. */
SD_AINLINE __m256 load_groups8(specdec_dtype dt, const void *base, size_t e, int n, size_t total) {
    if (n == 8) return load8(dt, (const char *)base + e * (dt == SPECDEC_DTYPE_F32 ? 4 : 2));
    if (dt == SPECDEC_DTYPE_F32) return _mm256_maskload_ps((const float *)base + e, _mm256_castps_si256(lanes_lt(n)));
    if (e + 8 <= total) return _mm256_and_ps(load8(dt, (const uint16_t *)base + e), lanes_lt(n));
    return load_part(dt, (const uint16_t *)base + e, n);
}

SD_AINLINE void quant_rows(const sd_mm_args *a, int r0, int r1, int t0, const int NT, const int bits,
                           specdec_dtype dt) {
    const sd_mat *W = a->W;
    const int E = 32 / bits, BE = 8 * E, cols = W->cols, g = W->group;
    const int nw = cols / E, nb = (nw + 7) / 8, ng = cols / g;
    const int bps = 8 * g / BE; /* blocks per super-block: 4..32 (groups 32..128) */
    const size_t total = (size_t)W->rows * ng;
    /* lane -> group of block j of a super-block: row j of the dispatcher's table (a->gidx, built
     * for 16-group super-blocks; its first bps rows are those of an 8-group one) */
    const int32_t *idxt = a->gidx;
    const __m256i msk = _mm256_set1_epi32((int)((1u << bits) - 1u));
    const float *xp[NT_MAX], *xs[NT_MAX];
    for (int t = 0; t < NT; t++) {
        xp[t] = a->xp + (size_t)(t0 + t) * a->ldxp;
        xs[t] = a->xs + (size_t)(t0 + t) * a->ldxs;
    }
    for (int r = r0; r < r1; r++) {
        const uint32_t *wr = (const uint32_t *)W->w + (size_t)r * nw;
        const size_t gr = (size_t)r * ng;
        __m256 acc[NT_MAX], bacc[NT_MAX];
        for (int t = 0; t < NT; t++) { acc[t] = _mm256_setzero_ps(); bacc[t] = _mm256_setzero_ps(); }
        for (int gs = 0, b0 = 0; gs < ng; gs += 8, b0 += bps) {
            const int n8 = ng - gs < 8 ? ng - gs : 8;
            const __m256 S = load_groups8(dt, W->scales, gr + gs, n8, total);
            const __m256 B = load_groups8(dt, W->biases, gr + gs, n8, total);
            for (int t = 0; t < NT; t++) bacc[t] = _mm256_fmadd_ps(B, _mm256_loadu_ps(xs[t] + gs), bacc[t]);
            const int b1 = b0 + bps < nb ? b0 + bps : nb;
            for (int b = b0; b < b1; b++) {
                int remw = nw - b * 8;
                __m256i wv;
                if (remw >= 8) wv = _mm256_loadu_si256((const __m256i *)(wr + b * 8));
                else wv = _mm256_maskload_epi32((const int *)(wr + b * 8), _mm256_castps_si256(lanes_lt(remw)));
                const __m256 sv = _mm256_permutevar8x32_ps(S, _mm256_loadu_si256((const __m256i *)(idxt + (b - b0) * 8)));
                __m256 q[8];
                for (int k = 0; k < E; k++) q[k] = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(wv, bits * k), msk));
                for (int t = 0; t < NT; t++) {
                    const float *xb = xp[t] + (size_t)b * BE;
                    __m256 p = _mm256_mul_ps(q[0], _mm256_loadu_ps(xb));
                    for (int k = 1; k < E; k++) p = _mm256_fmadd_ps(q[k], _mm256_loadu_ps(xb + 8 * k), p);
                    acc[t] = _mm256_fmadd_ps(p, sv, acc[t]);
                }
            }
        }
        for (int t = 0; t < NT; t++) a->y[(size_t)(t0 + t) * a->ldy + r] = sd_hsum8(_mm256_add_ps(acc[t], bacc[t]));
    }
}

#include "cpu/ops_tiles.h"

static void mm_rows(const sd_mm_args *a, int r0, int r1) {
    const sd_mat *W = a->W;
    int d = W->dtype == SPECDEC_DTYPE_F16 ? 1 : W->dtype == SPECDEC_DTYPE_BF16 ? 2 : 0;
    static void (*const dense[3])(const sd_mm_args *, int, int) = {mm_f32, mm_f16, mm_bf16};
    static void (*const q4[3])(const sd_mm_args *, int, int) = {mm_q4_f32, mm_q4_f16, mm_q4_bf16};
    static void (*const q8[3])(const sd_mm_args *, int, int) = {mm_q8_f32, mm_q8_f16, mm_q8_bf16};
    if (W->bits == 4) q4[d](a, r0, r1);
    else if (W->bits == 8) q8[d](a, r0, r1);
    else dense[d](a, r0, r1);
}

/* ---- rmsnorm: 8-wide chunks into 2 accumulators (chunk % 2) ---- */
static void rmsnorm_row(float *out, const float *x, const float *w, int n, float eps) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int nch = (n + 7) / 8;
    for (int c = 0; c < nch; c++) {
        __m256 v = n - c * 8 >= 8 ? _mm256_loadu_ps(x + c * 8) : loadx_part(x + c * 8, n - c * 8);
        if (c & 1) s1 = _mm256_fmadd_ps(v, v, s1);
        else s0 = _mm256_fmadd_ps(v, v, s0);
    }
    float ss = sd_hsum8(_mm256_add_ps(s0, s1));
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    int i = 0;
    __m256 vi = _mm256_set1_ps(inv);
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vi), _mm256_loadu_ps(w + i)));
    for (; i < n; i++) out[i] = x[i] * inv * w[i]; /* same two roundings as the vector lanes */
}

/* ---- attention for one (query, head) ---- */
SD_AINLINE __m256 kv8(sd_kv_dtype_e dt, const void *base, size_t e, int n) {
    specdec_dtype d = dt == SD_KV_BF16 ? SPECDEC_DTYPE_BF16 : dt == SD_KV_F16 ? SPECDEC_DTYPE_F16 : SPECDEC_DTYPE_F32;
    const char *p = (const char *)base + e * (dt == SD_KV_F32 ? 4 : 2);
    return n >= 8 ? load8(d, p) : load_part(d, p, n);
}

#define HD_CH 8 /* 8-wide chunks of the output kept in registers at once (64 dims) */

/* y[0..nk-1] = hsum8 of v[0..nk-1], 8 keys at once: the same adds per key as hsum8 (l + l+4,
 * then + l+2, then + l+1), so the same bits, without a serial horizontal sum per key. */
SD_AINLINE void tree8_store(const __m256 *v, float *y, int nk) {
    __m256 w[4];
    for (int i = 0; i < 4; i++)   /* keys 2i, 2i+1: s_l = v_l + v_l+4 in 128-bit lanes 0 and 1 */
        w[i] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x20),
                             _mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x31));
    /* a_l = s_l + s_l+2: lane pair (0,1) of each 128-bit half, keys (2i | 2i+1) and (2i+2 | 2i+3) */
    __m256 u0 = _mm256_add_ps(_mm256_shuffle_ps(w[0], w[1], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm256_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 2, 3, 2)));
    __m256 u1 = _mm256_add_ps(_mm256_shuffle_ps(w[2], w[3], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm256_shuffle_ps(w[2], w[3], _MM_SHUFFLE(3, 2, 3, 2)));
    /* b = a_0 + a_1; half 0 holds keys 0, 2, 4, 6 and half 1 keys 1, 3, 5, 7 */
    __m256 r = _mm256_add_ps(_mm256_shuffle_ps(u0, u1, _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm256_shuffle_ps(u0, u1, _MM_SHUFFLE(3, 1, 3, 1)));
    float t[8];
    _mm256_storeu_ps(t, r);
    static const int key_of_lane[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    for (int l = 0; l < 8; l++)
        if (key_of_lane[l] < nk) y[key_of_lane[l]] = t[l];
}

/* One (query, head); attn_one instantiates it through SD_ATTN_SPECIALIZE. */
SD_AINLINE void attn_body(const float *q, const void *k, const void *v, size_t stride, const int hd,
                          const sd_kv_dtype_e dt, int n, float scale, float *sc, float *out) {
    const int nch = (hd + 7) / 8;
    const size_t es = sd_kv_elem_size(dt);   /* the KV cache's prefetch: ops_simd.h */
    sd_prefetch_first_rows(k, n, stride * es, (size_t)hd * es);
    for (int j0 = 0; j0 < n; j0 += 8) {
        const int nk = n - j0 < 8 ? n - j0 : 8;
        __m256 dv[8];
        for (int i = 0; i < nk; i++) {
            const size_t kj = (size_t)(j0 + i) * stride;
            if (j0 + i + SD_ATT_PF < n) sd_prefetch_bytes(k, (kj + (size_t)SD_ATT_PF * stride) * es, (size_t)hd * es);
            __m256 d0 = _mm256_setzero_ps(), d1 = _mm256_setzero_ps();
            for (int c = 0; c < nch; c++) {
                int rem = hd - c * 8;
                __m256 kv = kv8(dt, k, kj + c * 8, rem);
                __m256 qv = rem >= 8 ? _mm256_loadu_ps(q + c * 8) : loadx_part(q + c * 8, rem);
                if (c & 1) d1 = _mm256_fmadd_ps(qv, kv, d1);
                else d0 = _mm256_fmadd_ps(qv, kv, d0);
            }
            dv[i] = _mm256_add_ps(d0, d1);
        }
        for (int i = nk; i < 8; i++) dv[i] = _mm256_setzero_ps();
        tree8_store(dv, sc + j0, nk);
        for (int i = 0; i < nk; i++) sc[j0 + i] *= scale;
    }
    sd_prefetch_first_rows(v, n, stride * es, (size_t)hd * es);
    float mx = -INFINITY;
    for (int j = 0; j < n; j++)
        if (sc[j] > mx) mx = sc[j];
    float sum = sd_softmax_exp(sc, n, mx);
    float inv = 1.0f / sum;
    for (int c0 = 0; c0 < nch; c0 += HD_CH) {
        const int cn = nch - c0 < HD_CH ? nch - c0 : HD_CH;
        __m256 acc[HD_CH];
#pragma GCC unroll 8
        for (int c = 0; c < HD_CH; c++) acc[c] = _mm256_setzero_ps();
        for (int j = 0; j < n; j++) {
            if (j + SD_ATT_PF < n) {   /* this pass's dims of the row ahead */
                const int nd = cn * 8 < hd - c0 * 8 ? cn * 8 : hd - c0 * 8;
                sd_prefetch_bytes(v, ((size_t)(j + SD_ATT_PF) * stride + (size_t)c0 * 8) * es, (size_t)nd * es);
            }
            __m256 pj = _mm256_set1_ps(sc[j]);
#pragma GCC unroll 8
            for (int c = 0; c < HD_CH; c++)
                if (c < cn) acc[c] = _mm256_fmadd_ps(pj, kv8(dt, v, (size_t)j * stride + (c0 + c) * 8, hd - (c0 + c) * 8), acc[c]);
        }
        __m256 vi = _mm256_set1_ps(inv);
        for (int c = 0; c < cn; c++) {
            float tmp[8];
            _mm256_storeu_ps(tmp, _mm256_mul_ps(acc[c], vi));
            int rem = hd - (c0 + c) * 8;
            memcpy(out + (c0 + c) * 8, tmp, (size_t)(rem >= 8 ? 8 : rem) * sizeof(float));
        }
    }
}

static void attn_one(const float *q, const void *k, const void *v, size_t stride, int hd,
                     sd_kv_dtype_e dt, int n, float scale, float *sc, float *out) {
#define ONE(HD, DT) attn_body(q, k, v, stride, HD, DT, n, scale, sc, out)
    SD_ATTN_SPECIALIZE(hd, dt, ONE);
#undef ONE
}

/* ---- silu_mul: g (T, n) = silu(g) * u = g / (1 + e^-g) * u ---- */
/* e^x for 8 lanes by ops_neon.c's exp4, operation for operation (the same constants, the same
 * fused steps, round to nearest even, the same 2^(n/2) * 2^(n - n/2) scaling), so the two SIMD
 * levels give the same bits; within ~2 ulp of expf. NaN propagates: maxps / minps return their
 * second operand when either is NaN, and x is passed second. */
SD_AINLINE __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_set1_ps(89.0f), _mm256_max_ps(_mm256_set1_ps(-104.0f), x));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);   /* ln2 high part: n * hi exact */
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);     /* ln2 - hi */
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i ni = _mm256_cvttps_epi32(n);   /* n is integral: truncation is exact */
    const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

SD_AINLINE __m256 silu_mul8(__m256 g, __m256 u) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

/* Every element, the tail included (through a zero-padded copy), takes the same 8-lane path, so a
 * value never depends on its position or on T. Measured: the scalar reference's libm expf made
 * silu ~2% of a 1.7B-shape decode step on one core while the other waited
 * (docs/benchmarks/cpu-zen5-vs-llamacpp-2026-12-05.md, section 8). */
void sd_avx2_silu_mul(float *g, const float *u, int n, int T) {
    const size_t N = (size_t)n * (size_t)T;
    size_t i = 0;
    for (; i + 8 <= N; i += 8) _mm256_storeu_ps(g + i, silu_mul8(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
    if (i < N) {
        float a[8] = {0}, b[8] = {0};
        memcpy(a, g + i, (N - i) * sizeof(float));
        memcpy(b, u + i, (N - i) * sizeof(float));
        _mm256_storeu_ps(a, silu_mul8(_mm256_loadu_ps(a), _mm256_loadu_ps(b)));
        memcpy(g + i, a, (N - i) * sizeof(float));
    }
}

static const sd_isa isa = {
    .name = "avx2",
    .lanes = 8,
    .mm_rows = mm_rows,
    .rmsnorm_row = rmsnorm_row,
    .attn_one = attn_one,
};

const sd_isa *sd_isa_avx2(void) { return &isa; }
