/* ops_i8_avx512.c: the int8-activation matmul rows with AVX-512 VNNI (vpdpbusd: unsigned weight
 * bytes x signed activation bytes, four products summed into each 32-bit lane, exactly). One
 * step (ops_i8.h) is one zmm of 16 lanes: for 4-bit weights the 64 packed bytes of two chunks
 * split into their low and high nibbles (two dpbusd against the prepared activations), for
 * 8-bit weights the 64 bytes of one chunk (one dpbusd). Then the recipe's float part: convert,
 * times D, one FMA by the lane scales and one by the lane biases, the row's group values put in
 * their lanes by one permute per step. Every lane does exactly the recipe's operations, so the
 * result is the scalar recipe's bits.
 *
 * Why it is shaped this way (measured on Zen 5, docs/benchmarks/cpu-decode-vs-llamacpp-*.md): the
 * arithmetic of a 384-column row is about 9 cycles on the two multiply pipes, but the recipe chains
 * two FMAs per step on one accumulator (about 40 cycles of latency per row), and the first version
 * spent as much again on per-row bookkeeping (group vectors loaded, converted and masked per row),
 * so the LM head ran at 10 ns a row from any cache level, far from the memory stream. Here:
 *  - the group values are read by the permute itself, straight from memory: bf16 through vpermw
 *    (a bf16 placed in the high half of a 32-bit lane is its f32 value, so no conversion), f32
 *    through vpermps; f16 is converted once per row and 16 groups;
 *  - with one token, rows go in pairs, their steps interleaved (two independent chains in flight);
 *    with 2 to 4 tokens the tokens' chains are enough, and pairs were slower (up to 25% at T = 3);
 *  - token tiles of at most 4: tiles of 8 (the unpacked weights and group values serving 8 tokens)
 *    gained 3% at T = 8 and 16 on 4-bit weights and 16% on 8-bit, but the larger frame made the
 *    one-token kernel 12% slower (bench/ab_bench_i8.sh, one core, load 2);
 *  - a matrix larger than the caches (the LM head: 33 MB) is prefetched PF_ROWS rows ahead: the
 *    hardware prefetcher alone left the 2-thread LM head at about half the streaming bandwidth;
 *  - rows whose groups fit one 16-group window with at most 8 steps (every matrix of the embedded
 *    model, the LM head included) are compiled per step count, so the per-step constants (lane
 *    indices) stay in registers;
 *  - reads of group values past the matrix's end are avoided by giving the last tile a zero-padded
 *    copy of its group values (same values, same instructions).
 * 16 rows are finished together by one transpose-add network per token (sd_tree16_store:
 * sd_hsum16's tree, the recipe's final sum). Compiled with the AVX-512 flags (CMake); VNNI is
 * asked for here. */
#include "cpu/ops_i8.h"
#include <immintrin.h>
#include <string.h>
#include "cpu/ops_simd.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx512vnni")
#elif defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512vnni"))), apply_to = function)
#endif

#define NT_MAX 4
#define NS_MAX 8   /* step counts compiled as constants (one 16-group window) */
/* Software prefetch distance in rows, and the matrix size from which it is used. Measured on the LM
 * head, 2 threads (min us): none 1025, 4 rows 917, 8 698, 16 641, 32 605, 64 629; from L2 (2048
 * rows) it costs about 10%, hence a threshold: the L2 of a core (1 MB on Zen 4 / 5). At 4 MB the
 * 1.2-2.4 MB q, k, v and o of the Qwen3 1.7B shape, which come from DRAM in a model of 1.1 GB,
 * went without it: classic decode there 1.08-1.15x faster with 1 MB (both arms in one run,
 * docs/benchmarks/cpu-decode-vs-llamacpp-epyc-zen5-2026-12-03.md); the embedded pair, whose
 * layer matrices are all below 1 MB, unchanged within its noise (0.97-1.02). */
#define PF_ROWS 32
#define PF_MIN_BYTES (1u << 20)

/* Bytes a step's group read may touch from a row's first group of the window: bf16 reads 32 words
 * (vpermw's table is a whole zmm), f32 16 floats, f16 16 halves. */
static inline size_t group_span(specdec_dtype dt) { return dt == SPECDEC_DTYPE_F16 ? 16 : dt == SPECDEC_DTYPE_BF16 ? 32 : 16; }

/* Per row and window: what the step permutes read. f16: the 16 values converted once; bf16 and
 * f32: nothing (the permute reads memory), the returned vector is unused. */
SD_AINLINE __m512 window_f16(specdec_dtype dt, const void *p) {
    if (dt == SPECDEC_DTYPE_F16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_setzero_ps();
}

/* A step's lane values from the window at p (ix: the lanes' groups in the window, in the form the
 * permute reads: bf16 in the high word of each dword, the low word zeroed; else the dword). */
SD_AINLINE __m512 step_groups(specdec_dtype dt, __m512i ix, const void *p, __m512 f16v) {
    if (dt == SPECDEC_DTYPE_BF16)
        return _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16((__mmask32)0xAAAAAAAAu, ix, _mm512_loadu_si512(p)));
    if (dt == SPECDEC_DTYPE_F32) return _mm512_permutexvar_ps(ix, _mm512_loadu_ps(p));
    return _mm512_permutexvar_ps(ix, f16v);
}

/* The per-token operands of a step. */
typedef struct tok_ptrs {
    const int8_t *xq[NT_MAX];
    const float *dv[NT_MAX], *xv[NT_MAX];
} tok_ptrs;

/* R rows (1 or 2): the first's weights start at wr and its group values at element e of sb / bb
 * (es bytes each); the second's are dw bytes and de elements further (0 and 0: the same row
 * twice), against NT tokens: the recipe's 16 lanes per (row, token) into out[j][t]. NS > 0: NS
 * steps in one window (constants, lane indices in ixv); NS == 0: a->steps in windows of sps
 * (indices in ixt). pf: prefetch the row(s) pf rows ahead (0: none). */
SD_AINLINE void rows_lanes(const sd_i8_args *a, const int32_t *ixt, const __m512i *ixv, const uint8_t *wr, size_t dw,
                           const char *sb, const char *bb, size_t e, size_t de, int pf, const tok_ptrs *tp,
                           const int R, const int NT, const int NS, const int bits, const specdec_dtype dt,
                           __m512 out[2][NT_MAX]) {
    const size_t es = dt == SPECDEC_DTYPE_F32 ? 4 : 2;
    const size_t rb = (size_t)a->W->cols * bits / 8, ng = (size_t)(a->W->cols / a->W->group);
    const int sw = bits == 4 ? 128 : 64;
    const int steps = NS ? NS : a->steps;
    const int sps = NS ? NS : 16 * a->W->group / (bits == 4 ? 128 : 64);   /* steps per window */
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512 acc[2][NT_MAX];
    for (int j = 0; j < R; j++)
        for (int t = 0; t < NT; t++) acc[j][t] = _mm512_setzero_ps();
    for (int p0 = 0, gs = 0; p0 < steps; p0 += sps, gs += 16) {
        const char *sp[2], *bp[2];
        __m512 sf[2], bf[2];
        for (int j = 0; j < R; j++) {
            sp[j] = sb + (e + (size_t)j * de + (size_t)gs) * es;
            bp[j] = bb + (e + (size_t)j * de + (size_t)gs) * es;
            sf[j] = window_f16(dt, sp[j]);
            bf[j] = window_f16(dt, bp[j]);
        }
        if (pf) {   /* the pair pf rows ahead: its weight lines of this window, its group values */
            for (int j = 0; j < R; j++)
                for (int p = p0; p < (p0 + sps < steps ? p0 + sps : steps); p++)
                    _mm_prefetch((const char *)wr + (size_t)pf * rb + (size_t)j * dw + (size_t)p * 64, _MM_HINT_T0);
            _mm_prefetch(sp[0] + (size_t)pf * ng * es, _MM_HINT_T0);
            _mm_prefetch(bp[0] + (size_t)pf * ng * es, _MM_HINT_T0);
        }
        const int p1 = p0 + sps < steps ? p0 + sps : steps;
        for (int p = p0; p < p1; p++) {
            const __m512i ix = NS ? ixv[p] : _mm512_loadu_si512(ixt + p * 16);
            __m512i lo[2], hi[2];
            for (int j = 0; j < R; j++) {
                const __m512i w = _mm512_loadu_si512(wr + (size_t)j * dw + (size_t)p * 64);
                lo[j] = hi[j] = w;
                if (bits == 4) {
                    lo[j] = _mm512_and_si512(w, m4);
                    hi[j] = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
                }
            }
            for (int t = 0; t < NT; t++) {
                const int8_t *xq = tp->xq[t] + (size_t)p * sw;
                __m512 F[2];
                for (int j = 0; j < R; j++) {
                    __m512i I = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[j], _mm512_loadu_si512(xq));
                    if (bits == 4) I = _mm512_dpbusd_epi32(I, hi[j], _mm512_loadu_si512(xq + 64));
                    F[j] = _mm512_mul_ps(_mm512_cvtepi32_ps(I), _mm512_loadu_ps(tp->dv[t] + p * 16));
                }
                for (int j = 0; j < R; j++)
                    acc[j][t] = _mm512_fmadd_ps(step_groups(dt, ix, sp[j], sf[j]), F[j], acc[j][t]);
                for (int j = 0; j < R; j++)
                    acc[j][t] = _mm512_fmadd_ps(step_groups(dt, ix, bp[j], bf[j]), _mm512_loadu_ps(tp->xv[t] + p * 16),
                                                acc[j][t]);
            }
        }
    }
    for (int j = 0; j < R; j++)
        for (int t = 0; t < NT; t++) out[j][t] = acc[j][t];
}

/* Rows rt..rt+nr-1 (nr <= 16) against tokens t0..t0+NT-1. sb / bb hold the group values with row
 * rt's first at element e0 (the matrix's own arrays, or the last tile's padded copy). */
SD_AINLINE void tile16(const sd_i8_args *a, const int32_t *ixt, int rt, int nr, const char *sb, const char *bb,
                       size_t e0, int pf, int t0, const int NT, const int NS, const int bits, const specdec_dtype dt) {
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
    __m512 rs[NT_MAX][16], v[2][NT_MAX];
    __m512i ixv[NS_MAX];
    for (int p = 0; p < NS; p++) ixv[p] = _mm512_loadu_si512(ixt + p * 16);
    int i = 0;
    /* one token, or two on a large 4-bit matrix of at most 3 steps (the LM heads of the embedded
     * pair: 1205 -> 781 us at T = 2, bench/ab_bench_i8.sh; the cached 3-step matrices and the
     * longer rows were the same or slower with pairs at T = 2): two rows' chains interleaved */
    if (NT == 1 || (NT == 2 && bits == 4 && NS > 0 && NS <= 3 && pf)) {
        for (; i < nr; i += 2) {
            /* an odd last row is computed twice, its second copy dropped: one code path, the same bits */
            const int two = i + 1 < nr;
            rows_lanes(a, ixt, ixv, w0 + (size_t)i * rb, two ? rb : 0, sb, bb, e0 + (size_t)i * ng, two ? ng : 0, pf,
                       &tp, 2, NT, NS, bits, dt, v);
            for (int t = 0; t < NT; t++) {
                rs[t][i] = v[0][t];
                if (two) rs[t][i + 1] = v[1][t];
            }
        }
    } else {         /* the tokens' chains are independent already: one row at a time */
        for (; i < nr; i++) {
            rows_lanes(a, ixt, ixv, w0 + (size_t)i * rb, 0, sb, bb, e0 + (size_t)i * ng, 0, pf, &tp, 1, NT, NS, bits,
                       dt, v);
            for (int t = 0; t < NT; t++) rs[t][i] = v[0][t];
        }
    }
    i = nr;
    for (; i < 16; i++)
        for (int t = 0; t < NT; t++) rs[t][i] = _mm512_setzero_ps();
    const __mmask16 om = (__mmask16)(nr >= 16 ? 0xFFFFu : (1u << nr) - 1u);
    for (int t = 0; t < NT; t++) sd_tree16_store(rs[t], a->y + (size_t)(t0 + t) * a->ldy + rt, om);
}

/* Every token tile of one row tile. */
SD_AINLINE void tile_tokens(const sd_i8_args *a, const int32_t *ixt, int rt, int nr, const char *sb, const char *bb,
                            size_t e0, int pf, const int NS, const int bits, const specdec_dtype dt) {
    int t = 0;
    for (; t + 4 <= a->T; t += 4) tile16(a, ixt, rt, nr, sb, bb, e0, t ? 0 : pf, t, 4, NS, bits, dt);
    const int pt = t ? 0 : pf;   /* the first token tile of a row tile brings its rows in */
    switch (a->T - t) {
    case 3: tile16(a, ixt, rt, nr, sb, bb, e0, pt, t, 3, NS, bits, dt); break;
    case 2: tile16(a, ixt, rt, nr, sb, bb, e0, pt, t, 2, NS, bits, dt); break;
    case 1: tile16(a, ixt, rt, nr, sb, bb, e0, pt, t, 1, NS, bits, dt); break;
    default: break;
    }
}

/* The row tiles of [r0, r1). A tile whose group reads would pass the end of the scales / biases
 * gets a zero-padded copy of its group values (it is the last one or two of the matrix). */
SD_AINLINE void rows_kind(const sd_i8_args *a, const int32_t *ixt, int r0, int r1, const int NS, const int bits,
                          const specdec_dtype dt) {
    const sd_mat *W = a->W;
    const size_t ng = (size_t)(W->cols / W->group), tot = (size_t)W->rows * ng, span = group_span(dt);
    const size_t es = dt == SPECDEC_DTYPE_F32 ? 4 : 2;
    const size_t bytes = (size_t)W->rows * ((size_t)W->cols * bits / 8 + 2 * ng * es);
    const int pf = bytes >= PF_MIN_BYTES ? PF_ROWS : 0;
    for (int rt = r0; rt < r1; rt += 16) {
        const int nr = r1 - rt < 16 ? r1 - rt : 16;
        const size_t e0 = (size_t)rt * ng;
        /* the last group window read: row rt+nr-1's, from its last window start */
        const size_t last = e0 + (size_t)(nr - 1) * ng + (ng - 1) / 16 * 16 + span;
        if (last <= tot) {
            tile_tokens(a, ixt, rt, nr, (const char *)W->scales, (const char *)W->biases, e0, pf, NS, bits, dt);
        } else {
            /* 16 rows of at most SD_I8_MAXCOLS / 64 groups, then one span of zeros (read, never used:
             * no lane's index points there) */
            _Alignas(64) char sc[16 * (SD_I8_MAXCOLS / 64) * 4 + 32 * 4], bc[sizeof sc];
            const size_t n = (size_t)nr * ng * es;
            memcpy(sc, (const char *)W->scales + e0 * es, n);
            memcpy(bc, (const char *)W->biases + e0 * es, n);
            memset(sc + n, 0, span * es);
            memset(bc + n, 0, span * es);
            tile_tokens(a, ixt, rt, nr, sc, bc, 0, 0, NS, bits, dt);
        }
    }
}

/* Kernels per (bits, dtype): one compiled per step count 1..NS_MAX where the row's groups fit one
 * window (bf16 only, the scales every model here has), else the general one (NS = 0). */
#define GEN(name, BITS, DT) \
    static void name(const sd_i8_args *a, const int32_t *ixt, int r0, int r1) { rows_kind(a, ixt, r0, r1, 0, BITS, DT); }
GEN(q4_f32, 4, SPECDEC_DTYPE_F32)
GEN(q4_f16, 4, SPECDEC_DTYPE_F16)
GEN(q4_bf16, 4, SPECDEC_DTYPE_BF16)
GEN(q8_f32, 8, SPECDEC_DTYPE_F32)
GEN(q8_f16, 8, SPECDEC_DTYPE_F16)
GEN(q8_bf16, 8, SPECDEC_DTYPE_BF16)
#define NSK(BITS, NS) \
    static void q##BITS##_bf16_s##NS(const sd_i8_args *a, const int32_t *ixt, int r0, int r1) { \
        rows_kind(a, ixt, r0, r1, NS, BITS, SPECDEC_DTYPE_BF16); }
NSK(4, 1) NSK(4, 2) NSK(4, 3) NSK(4, 4) NSK(4, 5) NSK(4, 6) NSK(4, 7) NSK(4, 8)
NSK(8, 1) NSK(8, 2) NSK(8, 3) NSK(8, 4) NSK(8, 5) NSK(8, 6) NSK(8, 7) NSK(8, 8)

typedef void (*kern_fn)(const sd_i8_args *, const int32_t *, int, int);

static void rows(const sd_i8_args *a, int r0, int r1) {
    const sd_mat *W = a->W;
    const int d = W->dtype == SPECDEC_DTYPE_F16 ? 1 : W->dtype == SPECDEC_DTYPE_BF16 ? 2 : 0;
    static const kern_fn gen[2][3] = {{q4_f32, q4_f16, q4_bf16}, {q8_f32, q8_f16, q8_bf16}};
    static const kern_fn ns[2][NS_MAX] = {
        {q4_bf16_s1, q4_bf16_s2, q4_bf16_s3, q4_bf16_s4, q4_bf16_s5, q4_bf16_s6, q4_bf16_s7, q4_bf16_s8},
        {q8_bf16_s1, q8_bf16_s2, q8_bf16_s3, q8_bf16_s4, q8_bf16_s5, q8_bf16_s6, q8_bf16_s7, q8_bf16_s8}};
    /* lane -> group within its window in the permute's form (bf16: high word, < 16) */
    int32_t ixt[SD_I8_MAXCOLS / 4];
    for (int i = 0; i < a->steps * 16; i++) ixt[i] = d == 2 ? (a->g16[i] & 15) << 16 : a->g16[i] & 15;
    kern_fn k = gen[W->bits == 8][d];
    const int one_window = W->cols / W->group <= 16 && a->steps <= NS_MAX;
    if (d == 2 && one_window) k = ns[W->bits == 8][a->steps - 1];
    k(a, ixt, r0, r1);
}

#if defined(__clang__)
#pragma clang attribute pop
#endif

sd_i8_rows_fn sd_i8_rows_avx512(void) {
    return __builtin_cpu_supports("avx512vnni") ? rows : (sd_i8_rows_fn)0;
}
