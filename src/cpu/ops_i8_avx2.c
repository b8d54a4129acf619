/* ops_i8_avx2.c: the int8-activation matmul rows with 256-bit integer dot products. A step's 16
 * lanes (ops_i8.h) are two ymm halves of 8, each accumulated on its own (lane-wise, so the
 * recipe's bits). The dot products of unsigned weight bytes and signed activation bytes:
 *   AVX-VNNI (vpdpbusd, VEX): four products summed into a 32-bit lane, exactly;
 *   AVX2 (vpmaddubsw + vpmaddwd): pairs into 16 bits, then pairs of pairs into 32. A pair of 4-bit
 *     weights times activations is at most 2 * 15 * 127 = 3810, so the low- and high-nibble pairs
 *     can even be added in 16 bits (7620) before one vpmaddwd. 8-bit weights would overflow a pair
 *     (2 * 255 * 127), so they are split into nibbles: I = I(low) + 16 * I(high), the factor 16
 *     applied by the vpmaddwd of the high pairs (exact in 32 bits).
 * Both forms give the same integers, hence the same results.
 *
 * Why it is shaped this way (bench/bench_i8.c, one Zen 5 core): the first version, one row and up
 * to 4 tokens at a time, ran at 13 ns a row where the AVX-512 kernel takes 5: per half step it
 * converted two scalar group values and broadcast them, and finished every row with its own
 * horizontal sum, and it asked CPUID for AVX-VNNI on every call (3 us under a hypervisor, which
 * traps the instruction). Here:
 *  - the CPU's features are read once;
 *  - a group value reaches its lanes as one broadcast load plus one shift (bf16 in the high half
 *    of a 32-bit lane is its f32 value); with 4-bit weights, group 64 and bf16 scales (the models
 *    here) the two halves' groups are adjacent (g, g + 1, g even), so one 32-bit broadcast carries
 *    both and a shift / a mask picks each;
 *  - one row at a time, also with one token: rows in pairs or fours (their chains interleaved, as
 *    the AVX-512 kernel does) ran 40% and 55% slower here, the 16 ymm registers spilling;
 *  - 8 rows are finished together by one transpose-add network per token (tree8: the
 *    recipe's final tree for 8 rows at once, one store);
 *  - a matrix larger than a core's L2 (the LM head; at the 1.7B shape every layer matrix) is
 *    prefetched PF_ROWS rows ahead, as in the AVX-512 kernel (its PF_MIN_BYTES says why 1 MB). */
#include "cpu/ops_i8.h"
#include "util/dtype.h"
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include "cpu/ops_simd.h"

#define NT_MAX 4
#define PF_ROWS 32
#define PF_MIN_BYTES (1u << 20)

/* The recipe's final tree for 8 rows: v[i] holds row i's u (acc[l] + acc[l + 8], l < 8); y[i] =
 * ((u0 + u4) + (u2 + u6)) + ((u1 + u5) + (u3 + u7)) of row i, the same additions as sd_hsum8. */
SD_AINLINE __m256 tree8(const __m256 *v) {
    __m256 a[4], b[2];
    /* a_l = u_l + u_l+4: lanes 0-3 row j, lanes 4-7 row j + 4 */
    for (int j = 0; j < 4; j++)
        a[j] = _mm256_add_ps(_mm256_permute2f128_ps(v[j], v[j + 4], 0x20), _mm256_permute2f128_ps(v[j], v[j + 4], 0x31));
    /* b = (a0 + a2, a1 + a3): per 128-bit half, rows (j, j + 1) */
    for (int j = 0; j < 2; j++)
        b[j] = _mm256_add_ps(_mm256_shuffle_ps(a[2 * j], a[2 * j + 1], 0x44), _mm256_shuffle_ps(a[2 * j], a[2 * j + 1], 0xEE));
    /* b0 + b1: rows 0 1 2 3 | 4 5 6 7 */
    return _mm256_add_ps(_mm256_shuffle_ps(b[0], b[1], 0x88), _mm256_shuffle_ps(b[0], b[1], 0xDD));
}

/* A broadcast 32-bit word of memory (no alignment, no aliasing assumptions). */
SD_AINLINE __m256i bcast32(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* Element e of group values at p (dtype dt) in every lane. */
SD_AINLINE __m256 bcast_group(specdec_dtype dt, const void *p, size_t e) {
    if (dt == SPECDEC_DTYPE_F32) return _mm256_set1_ps(((const float *)p)[e]);
    uint16_t h;
    memcpy(&h, (const uint16_t *)p + e, 2);
    if (dt == SPECDEC_DTYPE_F16) return _mm256_cvtph_ps(_mm_set1_epi16((short)h));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_set1_epi16((short)h), 16));
}

/* 32-bit lanes of (u8 a) . (s8 b) over 4 bytes, plus those of (u8 c) . (s8 d). */
SD_AINLINE __m256i dot2_mad(__m256i a, __m256i b, __m256i c, __m256i d) {
    __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(a, b), _mm256_maddubs_epi16(c, d));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}
/* Not always_inline: the non-VNNI kernels keep an uncalled copy rather than fail to inline. */
__attribute__((target("avxvnni"))) static inline __m256i dot2_vnni(__m256i a, __m256i b, __m256i c, __m256i d) {
    return _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), a, b), c, d);
}
__attribute__((target("avxvnni"))) static inline __m256i dot1_vnni(__m256i a, __m256i b) {
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), a, b);
}

/* The per-token operands. */
typedef struct tok_ptrs {
    const int8_t *xq[NT_MAX];
    const float *dv[NT_MAX], *xv[NT_MAX];
} tok_ptrs;

/* One row (weights at wr, group values from element e) against NT tokens: u[t] = acc half 0 + acc
 * half 1 (the tree's first level). PAIR: 4-bit, group 64, bf16 (the halves' groups adjacent, the
 * first even). pf: prefetch the row pf rows ahead (0: none). */
SD_AINLINE void row_u(const sd_i8_args *a, const uint8_t *wr, size_t e, int pf, const tok_ptrs *tp, const int NT,
                      const int bits, const specdec_dtype dt, const int vnni, const int PAIR, __m256 *u) {
    const sd_mat *W = a->W;
    const size_t rb = (size_t)W->cols * bits / 8, es = dt == SPECDEC_DTYPE_F32 ? 4 : 2;
    const size_t ng = (size_t)(W->cols / W->group);
    const char *sc = (const char *)W->scales, *bi = (const char *)W->biases;
    const int sw = bits == 4 ? 128 : 64;
    const __m256i m4 = _mm256_set1_epi8(0x0F), hm = _mm256_set1_epi32((int)0xFFFF0000u);
    __m256 acc[NT_MAX][2];
    for (int t = 0; t < NT; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    if (pf) {   /* the row's group values (a few bytes) */
        _mm_prefetch(sc + (e + (size_t)pf * ng) * es, _MM_HINT_T0);
        _mm_prefetch(bi + (e + (size_t)pf * ng) * es, _MM_HINT_T0);
    }
    for (int p = 0; p < a->steps; p++) {
        if (pf) _mm_prefetch((const char *)wr + (size_t)pf * rb + (size_t)p * 64, _MM_HINT_T0);   /* a step: 64 bytes */
        __m256i s2 = _mm256_setzero_si256(), b2 = s2;
        if (PAIR) {   /* group 64: half h of step p is group 2p + h, the pair's low word first */
            s2 = bcast32(sc + (e + (size_t)(2 * p)) * 2);
            b2 = bcast32(bi + (e + (size_t)(2 * p)) * 2);
        }
        for (int h = 0; h < 2; h++) {
            __m256 S, B;
            if (PAIR) {
                S = _mm256_castsi256_ps(h ? _mm256_and_si256(s2, hm) : _mm256_slli_epi32(s2, 16));
                B = _mm256_castsi256_ps(h ? _mm256_and_si256(b2, hm) : _mm256_slli_epi32(b2, 16));
            } else {
                const size_t g = e + (size_t)a->g16[p * 16 + 8 * h];
                S = bcast_group(dt, sc, g);
                B = bcast_group(dt, bi, g);
            }
            const __m256i w = _mm256_loadu_si256((const __m256i *)(wr + (size_t)p * 64 + 32 * h));
            __m256i lo = w, hi = w;
            if (bits == 4 || !vnni) {
                lo = _mm256_and_si256(w, m4);
                hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), m4);
            }
            for (int t = 0; t < NT; t++) {
                const int8_t *xq = tp->xq[t] + (size_t)p * sw + 32 * h;
                const __m256i xa = _mm256_loadu_si256((const __m256i *)xq);
                __m256i I;
                if (bits == 4) {   /* high nibbles against the activations 64 bytes on */
                    const __m256i xb = _mm256_loadu_si256((const __m256i *)(xq + 64));
                    I = vnni ? dot2_vnni(lo, xa, hi, xb) : dot2_mad(lo, xa, hi, xb);
                } else if (vnni) {
                    I = dot1_vnni(lo, xa);
                } else {
                    I = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(lo, xa), _mm256_set1_epi16(1)),
                                         _mm256_madd_epi16(_mm256_maddubs_epi16(hi, xa), _mm256_set1_epi16(16)));
                }
                const __m256 F = _mm256_mul_ps(_mm256_cvtepi32_ps(I), _mm256_loadu_ps(tp->dv[t] + p * 16 + 8 * h));
                acc[t][h] = _mm256_fmadd_ps(S, F, acc[t][h]);
                acc[t][h] = _mm256_fmadd_ps(B, _mm256_loadu_ps(tp->xv[t] + p * 16 + 8 * h), acc[t][h]);
            }
        }
    }
    for (int t = 0; t < NT; t++) u[t] = _mm256_add_ps(acc[t][0], acc[t][1]);
}

/* Rows rt..rt+nr-1 (nr <= 8) against tokens t0..t0+NT-1. */
SD_AINLINE void tile8(const sd_i8_args *a, int rt, int nr, int pf, int t0, const int NT, const int bits,
                      const specdec_dtype dt, const int vnni, const int PAIR) {
    const sd_mat *W = a->W;
    const size_t rb = (size_t)W->cols * bits / 8, ng = (size_t)(W->cols / W->group);
    const uint8_t *w0 = (const uint8_t *)W->w + (size_t)rt * rb;
    tok_ptrs tp;
    for (int t = 0; t < NT; t++) {
        const size_t tt = (size_t)(t0 + t);
        tp.xq[t] = a->xq + tt * a->ldq;
        tp.dv[t] = a->dv + tt * a->ldv;
        tp.xv[t] = a->xv + tt * a->ldv;
    }
    __m256 rs[NT_MAX][8], v[NT_MAX];
    for (int i = 0; i < nr; i++) {
        row_u(a, w0 + (size_t)i * rb, (size_t)(rt + i) * ng, pf, &tp, NT, bits, dt, vnni, PAIR, v);
        for (int t = 0; t < NT; t++) rs[t][i] = v[t];
    }
    for (int i = nr; i < 8; i++)
        for (int t = 0; t < NT; t++) rs[t][i] = _mm256_setzero_ps();
    for (int t = 0; t < NT; t++) {
        float *y = a->y + (size_t)(t0 + t) * a->ldy + rt;
        const __m256 r = tree8(rs[t]);
        if (nr == 8) {
            _mm256_storeu_ps(y, r);
        } else {
            float tmp[8];
            _mm256_storeu_ps(tmp, r);
            memcpy(y, tmp, sizeof(float) * (size_t)nr);
        }
    }
}

SD_AINLINE void rows_kind(const sd_i8_args *a, int r0, int r1, const int bits, const specdec_dtype dt, const int vnni,
                          const int PAIR) {
    const sd_mat *W = a->W;
    const size_t es = dt == SPECDEC_DTYPE_F32 ? 4 : 2, ng = (size_t)(W->cols / W->group);
    const size_t bytes = (size_t)W->rows * ((size_t)W->cols * bits / 8 + 2 * ng * es);
    const int pf = bytes >= PF_MIN_BYTES ? PF_ROWS : 0;
    for (int rt = r0; rt < r1; rt += 8) {
        const int nr = r1 - rt < 8 ? r1 - rt : 8;
        /* prefetches stay inside the matrix: none for the last PF_ROWS + 8 rows */
        const int pt = pf && rt + 8 + pf <= W->rows ? pf : 0;
        int t = 0;
        for (; t + 4 <= a->T; t += 4) tile8(a, rt, nr, t ? 0 : pt, t, 4, bits, dt, vnni, PAIR);
        const int pr = t ? 0 : pt;   /* the first token tile of a row tile brings its rows in */
        switch (a->T - t) {
        case 3: tile8(a, rt, nr, pr, t, 3, bits, dt, vnni, PAIR); break;
        case 2: tile8(a, rt, nr, pr, t, 2, bits, dt, vnni, PAIR); break;
        case 1: tile8(a, rt, nr, pr, t, 1, bits, dt, vnni, PAIR); break;
        default: break;
        }
    }
}

#define KIND(name, BITS, DT, VN, PAIR, ATTR) \
    ATTR static void name(const sd_i8_args *a, int r0, int r1) { rows_kind(a, r0, r1, BITS, DT, VN, PAIR); }
#define VNNI_ATTR __attribute__((target("avxvnni")))
KIND(q4_f32, 4, SPECDEC_DTYPE_F32, 0, 0, )
KIND(q4_f16, 4, SPECDEC_DTYPE_F16, 0, 0, )
KIND(q4_bf16, 4, SPECDEC_DTYPE_BF16, 0, 0, )
KIND(q4_bf16_pair, 4, SPECDEC_DTYPE_BF16, 0, 1, )
KIND(q8_f32, 8, SPECDEC_DTYPE_F32, 0, 0, )
KIND(q8_f16, 8, SPECDEC_DTYPE_F16, 0, 0, )
KIND(q8_bf16, 8, SPECDEC_DTYPE_BF16, 0, 0, )
KIND(v4_f32, 4, SPECDEC_DTYPE_F32, 1, 0, VNNI_ATTR)
KIND(v4_f16, 4, SPECDEC_DTYPE_F16, 1, 0, VNNI_ATTR)
KIND(v4_bf16, 4, SPECDEC_DTYPE_BF16, 1, 0, VNNI_ATTR)
KIND(v4_bf16_pair, 4, SPECDEC_DTYPE_BF16, 1, 1, VNNI_ATTR)
KIND(v8_f32, 8, SPECDEC_DTYPE_F32, 1, 0, VNNI_ATTR)
KIND(v8_f16, 8, SPECDEC_DTYPE_F16, 1, 0, VNNI_ATTR)
KIND(v8_bf16, 8, SPECDEC_DTYPE_BF16, 1, 0, VNNI_ATTR)

typedef void (*rows_fn)(const sd_i8_args *, int, int);
/* [vnni][bits == 8][scale dtype: f32, f16, bf16, bf16 with the 4-bit group-64 pairing] */
static const rows_fn tab[2][2][4] = {{{q4_f32, q4_f16, q4_bf16, q4_bf16_pair}, {q8_f32, q8_f16, q8_bf16, q8_bf16}},
                                     {{v4_f32, v4_f16, v4_bf16, v4_bf16_pair}, {v8_f32, v8_f16, v8_bf16, v8_bf16}}};

static int kind_ix(const sd_mat *W) {
    if (W->dtype == SPECDEC_DTYPE_F16) return 1;
    if (W->dtype == SPECDEC_DTYPE_BF16) return W->bits == 4 && W->group == 64 ? 3 : 2;
    return 0;
}
static void rows_mad(const sd_i8_args *a, int r0, int r1) { tab[0][a->W->bits == 8][kind_ix(a->W)](a, r0, r1); }
static void rows_vnni(const sd_i8_args *a, int r0, int r1) { tab[1][a->W->bits == 8][kind_ix(a->W)](a, r0, r1); }

/* AVX-VNNI is CPUID.(7,1):EAX bit 4; asked directly because clang (14) has no "avxvnni" for
 * __builtin_cpu_supports, and the library must also build with clang (the fuzz targets). Asked
 * once: a hypervisor traps CPUID (3 us a call measured here), and this runs on every matmul. */
static int g_avxvnni;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void detect(void) {
    unsigned a, b, c, d;
    g_avxvnni = __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4));
}
/* calibration's choice; atomic because a backend may be multiplying while another one calibrates */
static _Atomic int g_prefer_vnni = 1;

sd_i8_rows_fn sd_i8_rows_avx2_form(int vnni) {
    pthread_once(&g_once, detect);
    return !vnni ? rows_mad : g_avxvnni ? rows_vnni : (sd_i8_rows_fn)0;
}

void sd_i8_avx2_prefer_vnni(int on) { atomic_store_explicit(&g_prefer_vnni, on != 0, memory_order_relaxed); }

sd_i8_rows_fn sd_i8_rows_avx2(void) {
    pthread_once(&g_once, detect);
    const int vn = g_avxvnni && atomic_load_explicit(&g_prefer_vnni, memory_order_relaxed) && !sd_i8_avx2_novnni;
    return vn ? rows_vnni : rows_mad;
}

/* ---------------------------------------------------------------- token preparation */
/* sd_i8_prep with 256-bit vectors: the same xq, dv and xv, bit for bit, so any level may use it.
 * It runs once per token and matrix (56 times a decode step on the embedded model), and the plain
 * C one took 1.5 ns a column (0.57 us for 384 columns, 15% of the AVX-512 q projection). Per chunk
 * of 64 columns (two quantization blocks):
 *  - sd_i8_quant_block_fast's operations lane-wise: the range as the integer maximum of the
 *    magnitude bits, non-finite entries by an integer compare, id = 127 / amax in scalar float,
 *    x * id rounded by the 1.5 * 2^23 add and subtract, clamped to [-127, 127]. One case needs
 *    care: a subnormal amax makes id infinite and 0 * id NaN, which the C conversion turns into the
 *    byte 0 (x86: (int)NaN is INT_MIN, its low byte 0); here NaN is zeroed before the clamp;
 *  - the 4-bit layout (even columns, then odd ones) by byte shuffles;
 *  - the lanes' sums X of w consecutive columns by vpmaddubsw / vpmaddwd against ones (exact
 *    integers), xv = D * (float)X as the C code does. */
SD_AINLINE __m256i quant32(const float *x, float *d) {
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), finmax = _mm256_set1_epi32(0x7f7fffff);
    __m256 v[4];
    __m256i mx = _mm256_setzero_si256(), bad = mx;
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        const __m256i u = _mm256_and_si256(_mm256_castps_si256(v[k]), absm);
        mx = _mm256_max_epu32(mx, u);
        bad = _mm256_or_si256(bad, _mm256_cmpgt_epi32(u, finmax));
    }
    mx = _mm256_max_epu32(mx, _mm256_permute2x128_si256(mx, mx, 1));
    mx = _mm256_max_epu32(mx, _mm256_shuffle_epi32(mx, 0x4E));
    mx = _mm256_max_epu32(mx, _mm256_shuffle_epi32(mx, 0xB1));
    const uint32_t m = (uint32_t)_mm256_cvtsi256_si32(mx);
    if (m == 0 || !_mm256_testz_si256(bad, bad)) {
        *d = 0.0f;
        return _mm256_setzero_si256();
    }
    float amax;
    memcpy(&amax, &m, 4);
    const __m256 id = _mm256_set1_ps(127.0f / amax), magic = _mm256_set1_ps(12582912.0f);
    const __m256 hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f);
    __m256i q[4];
    for (int k = 0; k < 4; k++) {
        __m256 r = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(v[k], id), magic), magic);
        r = _mm256_and_ps(r, _mm256_cmp_ps(r, r, _CMP_ORD_Q));   /* NaN -> 0 */
        q[k] = _mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi));
    }
    /* packs interleave the 128-bit halves: bytes come out as dwords 0 4 1 5 2 6 3 7 of the order */
    const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    *d = amax / 127.0f;
    return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* 32-bit sums of each 4 consecutive bytes. */
SD_AINLINE __m256i sum4(__m256i q) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1));
}

static void prep_avx2(const float *x, int cols, int bits, int8_t *xq, float *dv, float *xv) {
    /* within each 128-bit half: the 8 even bytes, then the 8 odd ones */
    const __m256i eo = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12, 14,
                                        1, 3, 5, 7, 9, 11, 13, 15);
    for (int c = 0; c < cols / 64; c++) {   /* cols % 64 == 0 (sd_i8_supported) */
        float da, db;
        const __m256i qa = quant32(x + 64 * c, &da), qb = quant32(x + 64 * c + 32, &db);
        const __m256i sa = sum4(qa), sb = sum4(qb);
        if (bits == 4) {
            /* [evens of a | odds of a], [evens of b | odds of b], then evens (columns 2m) and odds */
            const __m256i ea = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(qa, eo), 0xD8);
            const __m256i eb = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(qb, eo), 0xD8);
            int8_t *o = xq + (size_t)(c / 2) * 128 + (c & 1) * 32;
            _mm256_storeu_si256((__m256i *)o, _mm256_permute2x128_si256(ea, eb, 0x20));
            _mm256_storeu_si256((__m256i *)(o + 64), _mm256_permute2x128_si256(ea, eb, 0x31));
            /* lanes of 8 columns: a's 4 then b's 4 (hadd pairs the 4-sums; the permute orders them) */
            const __m256i X = _mm256_permute4x64_epi64(_mm256_hadd_epi32(sa, sb), 0xD8);
            const __m256 D = _mm256_setr_m128(_mm_set1_ps(da), _mm_set1_ps(db));
            _mm256_storeu_ps(dv + 8 * c, D);
            _mm256_storeu_ps(xv + 8 * c, _mm256_mul_ps(D, _mm256_cvtepi32_ps(X)));
        } else {
            _mm256_storeu_si256((__m256i *)(xq + 64 * c), qa);
            _mm256_storeu_si256((__m256i *)(xq + 64 * c + 32), qb);
            const __m256 Da = _mm256_set1_ps(da), Db = _mm256_set1_ps(db);
            _mm256_storeu_ps(dv + 16 * c, Da);
            _mm256_storeu_ps(dv + 16 * c + 8, Db);
            _mm256_storeu_ps(xv + 16 * c, _mm256_mul_ps(Da, _mm256_cvtepi32_ps(sa)));
            _mm256_storeu_ps(xv + 16 * c + 8, _mm256_mul_ps(Db, _mm256_cvtepi32_ps(sb)));
        }
    }
}

sd_i8_prep_fn sd_i8_prep_avx2(void) { return __builtin_cpu_supports("avx2") ? prep_avx2 : (sd_i8_prep_fn)0; }
