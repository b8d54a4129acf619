/* ops_i8_avx2.c: the int8-activation matmul over packed tiles (ops_i8.h) with 256-bit integer dot
 * products. A quad's 64 bytes are two ymm of 8 rows each (rows 0-7, then 8-15), every 32-bit lane
 * one row, against 4 activation bytes broadcast to every lane. The dot products of unsigned
 * weight bytes and signed activation bytes:
 *   AVX-VNNI (vpdpbusd, VEX): four products summed into a 32-bit lane, exactly;
 *   AVX2 (vpmaddubsw + vpmaddwd): pairs into 16 bits, then pairs of pairs into 32. A pair of 4-bit
 *     weights times activations is at most 2 * 15 * 127 = 3810 in magnitude, so a whole block's 8
 *     pairs per 16-bit lane (30480) add in 16 bits before one vpmaddwd. 8-bit weights would
 *     overflow a pair (2 * 255 * 127), so they are split into nibbles: I = I(low) + 16 * I(high),
 *     the factor 16 applied by the vpmaddwd of the high sums (exact in 32 bits).
 * Both forms give the same integers, hence the same results, and the float part is the recipe's
 * per lane (convert, times D, FMA by the scales; an FMA per group for the biases).
 *
 * Shape: a tile is walked as its two halves of 8 rows one after the other (16 ymm registers hold
 * one half's accumulators for a token tile of up to 6 and the quad in hand); the second walk reads
 * the tile from L1 or L2. With one or two tokens the low and the high nibbles (8-bit: even and odd
 * quads) go to two chains of vpdpbusd, so a block's latency does not serialize. The CPU's features
 * are read once (a hypervisor traps CPUID: 3 us a call). A matrix larger than a core's L2 is
 * prefetched SD_I8_PF_TILES tiles ahead by the first half's first token tile. */
#include "cpu/ops_i8.h"
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include "cpu/ops_simd.h"

#define NT_MAX 6

/* 8 scale or bias values (rows h*8 .. h*8+7 of a group) as f32. */
SD_AINLINE __m256 load8(const specdec_dtype dt, const unsigned char *p) {
    if (dt == SPECDEC_DTYPE_BF16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
    if (dt == SPECDEC_DTYPE_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    return _mm256_loadu_ps((const float *)p);
}

SD_AINLINE __m256i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* vpdpbusd, for the VNNI form. Not always_inline: the maddubs kernels, compiled without AVX-VNNI,
 * keep an uncalled copy rather than fail to inline it. */
__attribute__((target("avxvnni"))) static inline __m256i DPB(__m256i acc, __m256i w, __m256i x) {
    return _mm256_dpbusd_avx_epi32(acc, w, x);
}

/* Half h of tile `tile` (rows 8h .. 8h+7, nr of the tile's rows kept) against tokens t0 ..
 * t0 + NT - 1. */
SD_AINLINE void half_nt(const sd_i8_args *a, int tile, int h, int nr, int t0, int pf, const int NT, const int bits,
                        const specdec_dtype dt, const int vnni) {
    const sd_i8_packed *P = a->P;
    const unsigned char *tp = sd_i8_tile(P, tile);
    const size_t es = dt == SPECDEC_DTYPE_F32 ? 4 : 2, so = (size_t)h * 8 * es;
    const int nq = SD_I8_QUADS(bits), bpg = P->group / SD_I8_BLOCK;
    const size_t kbb = (size_t)nq * 64, pfo = (size_t)pf * P->tile_bytes;
    const int8_t *xq[NT_MAX];
    const float *dv[NT_MAX], *xg[NT_MAX];
    sd_i8_tokens(a, t0, NT, xq, dv, xg);
    const __m256i m4 = _mm256_set1_epi8(0x0F), one16 = _mm256_set1_epi16(1);
    __m256 acc[NT_MAX];
    for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
    for (int g = 0, b = 0; g < P->ng; g++) {
        const __m256 S = load8(dt, sd_i8_scales(P, tp, g) + so);
        if (pf) {
            _mm_prefetch((const char *)sd_i8_scales(P, tp, g) + pfo, _MM_HINT_T0);
            _mm_prefetch((const char *)sd_i8_biases(P, tp, g) + pfo, _MM_HINT_T0);
        }
        for (int bb = 0; bb < bpg; bb++, b++) {
            const unsigned char *wk = sd_i8_codes(P, tp, g) + (size_t)bb * kbb + 32 * h;
            if (pf)
                for (int u = 0; u < nq; u++) _mm_prefetch((const char *)wk + pfo + 64 * u, _MM_HINT_T0);
            __m256i I0[NT_MAX], I1[NT_MAX];
            for (int t = 0; t < NT; t++) I0[t] = I1[t] = _mm256_setzero_si256();
            for (int u = 0; u < nq; u++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(wk + 64 * u));
                /* the two operands of this quad and the activation bytes each pairs with:
                 * 4-bit: low nibbles with x[8u..], high with x[8u+4..]; 8-bit (VNNI): the bytes with
                 * x[4u..]; 8-bit (maddubs): the low and high nibbles, both with x[4u..] */
                __m256i lo, hi;
                if (bits == 4 || !vnni) {
                    lo = _mm256_and_si256(v, m4);
                    hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                } else {
                    lo = hi = v;
                }
                for (int t = 0; t < NT; t++) {
                    const int8_t *x = xq[t] + (size_t)b * SD_I8_BLOCK;
                    if (vnni) {
                        if (bits == 4) {
                            I0[t] = DPB(I0[t], lo, bcast4(x + 8 * u));
                            if (NT <= 2) I1[t] = DPB(I1[t], hi, bcast4(x + 8 * u + 4));
                            else I0[t] = DPB(I0[t], hi, bcast4(x + 8 * u + 4));
                        } else if (NT <= 2 && (u & 1)) {
                            I1[t] = DPB(I1[t], v, bcast4(x + 4 * u));
                        } else {
                            I0[t] = DPB(I0[t], v, bcast4(x + 4 * u));
                        }
                    } else if (bits == 4) {   /* 16-bit pair sums of the block in I0 */
                        I0[t] = _mm256_add_epi16(I0[t], _mm256_add_epi16(_mm256_maddubs_epi16(lo, bcast4(x + 8 * u)),
                                                                         _mm256_maddubs_epi16(hi, bcast4(x + 8 * u + 4))));
                    } else {                  /* low nibbles' pairs in I0, high nibbles' in I1 */
                        const __m256i xb = bcast4(x + 4 * u);
                        I0[t] = _mm256_add_epi16(I0[t], _mm256_maddubs_epi16(lo, xb));
                        I1[t] = _mm256_add_epi16(I1[t], _mm256_maddubs_epi16(hi, xb));
                    }
                }
            }
            for (int t = 0; t < NT; t++) {
                __m256i I;
                if (vnni) I = NT <= 2 ? _mm256_add_epi32(I0[t], I1[t]) : I0[t];
                else if (bits == 4) I = _mm256_madd_epi16(I0[t], one16);
                else I = _mm256_add_epi32(_mm256_madd_epi16(I0[t], one16), _mm256_madd_epi16(I1[t], _mm256_set1_epi16(16)));
                const __m256 F = _mm256_mul_ps(_mm256_cvtepi32_ps(I), _mm256_set1_ps(dv[t][b]));
                acc[t] = _mm256_fmadd_ps(S, F, acc[t]);
            }
        }
    }
    __m256 accB[NT_MAX];
    for (int t = 0; t < NT; t++) accB[t] = _mm256_setzero_ps();
    for (int g = 0; g < P->ng; g++) {
        const __m256 B = load8(dt, sd_i8_biases(P, tp, g) + so);
        for (int t = 0; t < NT; t++) accB[t] = _mm256_fmadd_ps(B, _mm256_set1_ps(xg[t][g]), accB[t]);
    }
    const int keep = nr - 8 * h;   /* rows of this half to store (1..8) */
    for (int t = 0; t < NT; t++) {
        float *y = a->y + (size_t)(t0 + t) * a->ldy + (size_t)tile * SD_I8_TILE + 8 * h;
        const __m256 v = _mm256_add_ps(acc[t], accB[t]);
        if (keep >= 8) {
            _mm256_storeu_ps(y, v);
        } else {
            float tmp[8];
            _mm256_storeu_ps(tmp, v);
            memcpy(y, tmp, sizeof(float) * (size_t)keep);
        }
    }
}

SD_AINLINE void rows_kind(const sd_i8_args *a, int r0, int r1, const int bits, const specdec_dtype dt, const int vnni) {
    const sd_i8_packed *P = a->P;
    const int pf = sd_i8_streamed(P) ? SD_I8_PF_TILES : 0;
    for (int r = r0; r < r1; r += SD_I8_TILE) {
        const int tile = r / SD_I8_TILE, nr = r1 - r < SD_I8_TILE ? r1 - r : SD_I8_TILE;
        for (int h = 0; h < 2 && 8 * h < nr; h++) {
            const int ph = h ? 0 : pf;   /* the first walk brings the tile in */
            int t = 0;
            /* tiles of 4 while more than 6 tokens remain, then the rest (up to 6) in one: a verify
             * of 5 or 6 rows walks the weights once (0.82-0.88 at T = 5, 6 with VNNI), and 8 stays 4 + 4
             * (6 + 2 measured up to 5% slower there) */
            for (; a->T - t > NT_MAX; t += 4) half_nt(a, tile, h, nr, t, t ? 0 : ph, 4, bits, dt, vnni);
            const int pt = t ? 0 : ph;
            switch (a->T - t) {
            case 6: half_nt(a, tile, h, nr, t, pt, 6, bits, dt, vnni); break;
            case 5: half_nt(a, tile, h, nr, t, pt, 5, bits, dt, vnni); break;
            case 4: half_nt(a, tile, h, nr, t, pt, 4, bits, dt, vnni); break;
            case 3: half_nt(a, tile, h, nr, t, pt, 3, bits, dt, vnni); break;
            case 2: half_nt(a, tile, h, nr, t, pt, 2, bits, dt, vnni); break;
            case 1: half_nt(a, tile, h, nr, t, pt, 1, bits, dt, vnni); break;
            default: break;
            }
        }
    }
}

#define MAD(a, r0, r1, BITS, DT) rows_kind(a, r0, r1, BITS, DT, 0)
#define VNNI(a, r0, r1, BITS, DT) rows_kind(a, r0, r1, BITS, DT, 1)
SD_I8_FORMS(rows_mad, , MAD)
SD_I8_FORMS(rows_vnni, __attribute__((target("avxvnni"))), VNNI)
#undef MAD
#undef VNNI

/* AVX-VNNI is CPUID.(7,1):EAX bit 4; asked directly because clang (14) has no "avxvnni" for
 * __builtin_cpu_supports, and the library must also build with clang (the fuzz targets). Asked
 * once: a hypervisor traps CPUID (3 us a call measured), and this runs on every matmul. */
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
/* sd_i8_prep with 256-bit vectors: the same xq, d and xg, bit for bit, so any level may use it.
 * It runs once per token and matrix (56 times a decode step on the embedded model), and plain C
 * took 1.5 ns a column. Per block of 32 columns:
 *  - sd_i8_quant_block_fast's operations lane-wise: the range as the integer maximum of the
 *    magnitude bits, non-finite entries by an integer compare, id = 127 / amax in scalar float,
 *    x * id rounded by the 1.5 * 2^23 add and subtract, clamped to [-127, 127]. One case needs
 *    care: a subnormal amax makes id infinite and 0 * id NaN, which the C conversion turns into the
 *    byte 0 (x86: (int)NaN is INT_MIN, its low byte 0); here NaN is zeroed before the clamp;
 *  - the block's code sum X by vpmaddubsw / vpmaddwd against ones (exact integers), then the
 *    group sums XG in scalar float, in sd_i8_prep's order. */
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

static void prep_avx2(const float *x, int cols, int group, int8_t *xq, float *d, float *xg) {
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    const int bpg = group / SD_I8_BLOCK;
    for (int g = 0, b = 0; g < cols / group; g++) {
        float s = 0.0f;
        for (int k = 0; k < bpg; k++, b++) {
            const __m256i q = quant32(x + (size_t)b * SD_I8_BLOCK, &d[b]);
            _mm256_storeu_si256((__m256i *)(xq + (size_t)b * SD_I8_BLOCK), q);
            __m256i v = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q), ones16);
            __m128i w = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
            w = _mm_add_epi32(w, _mm_shuffle_epi32(w, 0x4E));
            w = _mm_add_epi32(w, _mm_shuffle_epi32(w, 0xB1));
            const float dx = d[b] * (float)_mm_cvtsi128_si32(w);
            s = s + dx;
        }
        xg[g] = s;
    }
}

sd_i8_prep_fn sd_i8_prep_avx2(void) { return __builtin_cpu_supports("avx2") ? prep_avx2 : (sd_i8_prep_fn)0; }
