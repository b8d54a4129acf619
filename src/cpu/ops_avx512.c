/* ops_avx512.c: AVX-512 (F+BW+VL) kernels: matmul rows for every weight kind, rmsnorm of a
 * row and attention for one (query, head). Compiled with -mavx512f/bw/vl (CMake, by suffix)
 * and only called when the CPU has them (dispatch in ops_fast.c).
 *
 * Invariance: every reduction below runs in an order fixed by its length (cols, n, hd). The
 * matmul tiles tokens (NT <= 4 share one weight load) but keeps separate accumulators per
 * token, and each token's instruction sequence is the one it would get with NT = 1. */
#include "cpu/ops_internal.h"
#include "util/dtype.h"
#include <immintrin.h>
#include "cpu/ops_simd.h"
#include <math.h>
#include <string.h>


#define NT_MAX 4

/* ---- dense rows: y[t][r] = sum over 16-wide chunks c, chunk c into accumulator c % 4 ---- */
SD_AINLINE void dense_rows(const sd_mm_args *a, int r0, int r1, int t0, const int NT, specdec_dtype dt) {
    const sd_mat *W = a->W;
    const int cols = W->cols, nch = (cols + 15) / 16, nfull4 = (cols / 64);
    const size_t es = dt == SPECDEC_DTYPE_F32 ? 4 : 2;
    const float *xt[NT_MAX];
    for (int t = 0; t < NT; t++) xt[t] = a->x + (size_t)(t0 + t) * a->ldx;
    for (int r = r0; r < r1; r++) {
        const char *wr = (const char *)W->w + (size_t)r * cols * es;
        __m512 acc[NT_MAX][4];
        for (int t = 0; t < NT; t++)
            for (int u = 0; u < 4; u++) acc[t][u] = _mm512_setzero_ps();
        int c = 0;
        for (; c < nfull4 * 4; c += 4) {
            _mm_prefetch((const char *)(wr + (size_t)(c * 16 + 512) * es), _MM_HINT_T0);
            for (int u = 0; u < 4; u++) {
                __m512 w = sd_load16(dt, wr + (size_t)(c + u) * 16 * es, 0xFFFF);
                for (int t = 0; t < NT; t++)
                    acc[t][u] = _mm512_fmadd_ps(w, _mm512_loadu_ps(xt[t] + (c + u) * 16), acc[t][u]);
            }
        }
        for (int u = 0; u < 4; u++) { /* tail chunks c = 4*nfull4 + u, u a constant after unrolling */
            int cc = c + u;
            if (cc >= nch) break;
            int rem = cols - cc * 16;
            __mmask16 m = rem >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << rem) - 1u);
            __m512 w = sd_load16(dt, wr + (size_t)cc * 16 * es, m);
            for (int t = 0; t < NT; t++)
                acc[t][u] = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(m, xt[t] + cc * 16), acc[t][u]);
        }
        for (int t = 0; t < NT; t++) {
            __m512 s = _mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]), _mm512_add_ps(acc[t][2], acc[t][3]));
            a->y[(size_t)(t0 + t) * a->ldy + r] = sd_hsum16(s);
        }
    }
}

/* ---- quantized rows (see ops_internal.h for the xp / xs layout), L = 16 ----
 * A row is walked in super-blocks of 16 groups: their 16 scales and 16 biases are loaded and
 * converted once (one vector each); the bias term is one FMA against the 16 group sums of x;
 * each block inside picks its per-lane scales with one permute from a table of lane->group
 * indices that depends only on (bits, group). */
/* ---- 4-bit unpack: q[k] lane l = (float) nibble k of word l, exactly ----
 * uv 0: shift + permute (vpermps reads the low 4 index bits: one op masks and converts);
 *       7 shifts + 8 permutes per 16 words.
 * uv 1: shift + permute for nibbles 0..3 and vpermw for nibbles 4..7 from the same sources:
 *       vpermw reads 5 index bits per word, so a dword's high word sees bits 16..20; with a
 *       32-word table t[j] = bf16(j & 15) and the low words zeroed it returns, as floats, the
 *       nibble at bits 16..19. So 4 sources (3 shifts) give all 8 nibbles: 11 ops instead of 15
 *       (AVX-512BW only, no VBMI).
 * Both yield the same floats (small integers), so the FMAs that follow give the same bits
 * whichever is used: the choice may depend on the token tile. Measured (bench_matmul ab):
 * uv 1 is faster with 1-2 tokens per unpack, uv 0 with more (vpermw costs more than a shift
 * on Zen 4 once the unpack is amortized). Also tried and slower at every T: an exponent trick
 * (AND/OR the nibble into the mantissa of 2^(23-4k), subtract 2^(23-4k)), alone or mixed. */
SD_AINLINE void unpack4(__m512i wv, __m512 *q, const int uv) {
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    if (uv == 0) {
        q[0] = _mm512_permutexvar_ps(wv, iota);
        for (int k = 1; k < 8; k++) q[k] = _mm512_permutexvar_ps(_mm512_srli_epi32(wv, 4 * k), iota);
    } else {
        const __m512i tbl = _mm512_set_epi16(0x4170, 0x4160, 0x4150, 0x4140, 0x4130, 0x4120, 0x4110, 0x4100,
                                             0x40E0, 0x40C0, 0x40A0, 0x4080, 0x4040, 0x4000, 0x3F80, 0x0000,
                                             0x4170, 0x4160, 0x4150, 0x4140, 0x4130, 0x4120, 0x4110, 0x4100,
                                             0x40E0, 0x40C0, 0x40A0, 0x4080, 0x4040, 0x4000, 0x3F80, 0x0000);
        for (int j = 0; j < 4; j++) {
            __m512i sj = j ? _mm512_srli_epi32(wv, 4 * j) : wv;
            q[j] = _mm512_permutexvar_ps(sj, iota);
            q[j + 4] = _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16((__mmask32)0xAAAAAAAAu, sj, tbl));
        }
    }
}

/* One block of 16 packed words against NT tokens: acc[t] += (sum over k of q_k * xp_k) * sv, the
 * sum in two chains (even / odd k) and then one add: shorter latency, fixed order. quant_rows and
 * qs_tile both go through here, so a (row, token) gets the same instructions in either. */
SD_AINLINE void qblock(__m512i wv, __m512 sv, const float *const *xp, size_t off, const int NT, const int bits,
                       const int uv, __m512 *acc) {
    const int E = 32 / bits;
    __m512 q[8];
    if (bits == 4) {
        unpack4(wv, q, uv);
    } else {
        const __m512i m8 = _mm512_set1_epi32(0xFF);
        q[0] = _mm512_cvtepi32_ps(_mm512_and_si512(wv, m8));
        q[1] = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(wv, 8), m8));
        q[2] = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(wv, 16), m8));
        q[3] = _mm512_cvtepi32_ps(_mm512_srli_epi32(wv, 24));
    }
    for (int t = 0; t < NT; t++) {
        const float *xb = xp[t] + off;
        __m512 p0 = _mm512_mul_ps(q[0], _mm512_loadu_ps(xb));
        __m512 p1 = _mm512_mul_ps(q[1], _mm512_loadu_ps(xb + 16));
        for (int k = 2; k < E; k += 2) {
            p0 = _mm512_fmadd_ps(q[k], _mm512_loadu_ps(xb + 16 * k), p0);
            p1 = _mm512_fmadd_ps(q[k + 1], _mm512_loadu_ps(xb + 16 * (k + 1)), p1);
        }
        acc[t] = _mm512_fmadd_ps(_mm512_add_ps(p0, p1), sv, acc[t]);
    }
}

SD_AINLINE void quant_rows(const sd_mm_args *a, int r0, int r1, int t0, const int NT, const int bits,
                           specdec_dtype dt) {
    const sd_mat *W = a->W;
    const int E = 32 / bits, BE = 16 * E, cols = W->cols, g = W->group;
    const int nw = cols / E, nb = (nw + 15) / 16, ng = cols / g;
    const int bps = 16 * g / BE;           /* blocks per super-block of 16 groups: 2..32 */
    const int32_t *idxt = a->gidx;         /* (bps, 16) lane -> group within the super-block */
    const float *xp[NT_MAX], *xs[NT_MAX];
    for (int t = 0; t < NT; t++) {
        xp[t] = a->xp + (size_t)(t0 + t) * a->ldxp;
        xs[t] = a->xs + (size_t)(t0 + t) * a->ldxs;
    }
    /* Tiles of RT rows x one super-block of columns, so the NT tokens' activations for that
     * super-block stay in L1 while RT rows use them. Each (row, token) keeps its accumulators
     * in st_* between super-blocks: its arithmetic sequence is unchanged by the tiling. */
    enum { RT = 8 };
    __m512 st_acc[RT][NT_MAX], st_bacc[RT][NT_MAX];
    for (int rt = r0; rt < r1; rt += RT) {
        const int nr = r1 - rt < RT ? r1 - rt : RT;
        for (int i = 0; i < nr; i++)
            for (int t = 0; t < NT; t++) { st_acc[i][t] = _mm512_setzero_ps(); st_bacc[i][t] = _mm512_setzero_ps(); }
        for (int gs = 0, b0 = 0; gs < ng; gs += 16, b0 += bps) {
            const int ngs = ng - gs < 16 ? ng - gs : 16;
            const __mmask16 gm = (__mmask16)(ngs == 16 ? 0xFFFFu : (1u << ngs) - 1u);
            const int b1 = b0 + bps < nb ? b0 + bps : nb;
            for (int i = 0; i < nr; i++) {
                const int r = rt + i;
                const uint32_t *wr = (const uint32_t *)W->w + (size_t)r * nw;
                const size_t gr = (size_t)r * ng;
                __m512 acc[NT_MAX], bacc[NT_MAX];
                for (int t = 0; t < NT; t++) { acc[t] = st_acc[i][t]; bacc[t] = st_bacc[i][t]; }
                __m512 S = sd_load_groups16(dt, W->scales, gr + gs, gm);
                __m512 B = sd_load_groups16(dt, W->biases, gr + gs, gm);
                for (int t = 0; t < NT; t++) bacc[t] = _mm512_fmadd_ps(B, _mm512_loadu_ps(xs[t] + gs), bacc[t]);
                for (int b = b0; b < b1; b++) {
                    int remw = nw - b * 16;
                    __mmask16 m = remw >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << remw) - 1u);
                    __m512i wv = remw >= 16 ? _mm512_loadu_si512(wr + b * 16) : _mm512_maskz_loadu_epi32(m, wr + b * 16);   /* full: a plain load (load16) */
                    __m512 sv = _mm512_permutexvar_ps(_mm512_loadu_si512(idxt + (b - b0) * 16), S);
                    qblock(wv, sv, xp, (size_t)b * BE, NT, bits, 0, acc);   /* shift+permute unpack */
                }
                for (int t = 0; t < NT; t++) { st_acc[i][t] = acc[t]; st_bacc[i][t] = bacc[t]; }
            }
        }
        for (int i = 0; i < nr; i++)
            for (int t = 0; t < NT; t++)
                a->y[(size_t)(t0 + t) * a->ldy + rt + i] = sd_hsum16(_mm512_add_ps(st_acc[i][t], st_bacc[i][t]));
    }
}

/* ---- short quantized rows (cols <= QS_MAXCOLS): tiles of 16 rows ----
 * Per (row, token) the arithmetic is exactly that of quant_rows above: acc over the blocks in
 * order (two chains per block, then one FMA by the lane scales), bacc = bias term per super-block,
 * then the 16 lanes of acc + bacc summed by hsum16's tree (l + l+8, + l+4, + l+2, + l+1).
 * What changes is where the per-row work goes: the tile's 16 x ng scales and biases are
 * converted to f32 once (contiguous vectors, not one short masked load per row), and the 16
 * rows' lane sums are finished together by a transpose-and-add network (45 shuffles/adds for
 * 16 rows, one vector store) that applies hsum16's tree to every row. A lane of the network's
 * output depends only on its own row's vector, so a partial tile (rows past the end are zero
 * vectors) gives every row the same bits as a full one: there is no separate remainder path.
 * Tokens go in tiles of up to QS_NT sharing one unpack of the weights; each token keeps its own
 * accumulators, so its instruction sequence is the one it gets alone. */
/* Bench / test A/B switch (bit 0: short-row tiles on; bit 1: q4 short rows unpack by shift +
 * permute only, i.e. the kernel before the vpermw unpack). All settings give the same bits. */
int sd_avx512_qs_mode = 1;
#define QS_R 16
#define QS_NT 8
#define QS_MAXCOLS 2048


/* n elements of dt at src -> f32 at dst, in 16-wide vectors (dst rounded up to 16, tail 0). */
SD_AINLINE void groups_to_f32(specdec_dtype dt, const void *src, size_t e0, int n, float *dst) {
    for (int e = 0; e < n; e += 16) {
        int rem = n - e;
        __mmask16 m = rem >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << rem) - 1u);
        _mm512_storeu_ps(dst + e, sd_load_groups16(dt, src, e0 + (size_t)e, m));
    }
}

/* One tile of nr <= 16 rows from rt, tokens t0..t0+NT-1; sb/bb = the tile's f32 scales/biases. */
SD_AINLINE void qs_tile(const sd_mm_args *a, int rt, int nr, int t0, const int NT, const int bits,
                        const int uv, const float *sb, const float *bb) {
    const sd_mat *W = a->W;
    const int E = 32 / bits, BE = 16 * E, cols = W->cols, g = W->group;
    const int nw = cols / E, nb = (nw + 15) / 16, ng = cols / g;
    const int bps = 16 * g / BE;
    const int32_t *idxt = a->gidx;
    const float *xp[QS_NT], *xs[QS_NT];
    for (int t = 0; t < NT; t++) {
        xp[t] = a->xp + (size_t)(t0 + t) * a->ldxp;
        xs[t] = a->xs + (size_t)(t0 + t) * a->ldxs;
    }
    __m512 rs[QS_NT][QS_R]; /* per token, per row: acc + bacc, the vector hsum16 takes */
    for (int i = 0; i < nr; i++) {
        const uint32_t *wr = (const uint32_t *)W->w + (size_t)(rt + i) * nw;
        __m512 acc[QS_NT], bacc[QS_NT];
        for (int t = 0; t < NT; t++) { acc[t] = _mm512_setzero_ps(); bacc[t] = _mm512_setzero_ps(); }
        for (int gs = 0, b0 = 0; gs < ng; gs += 16, b0 += bps) {
            const int ngs = ng - gs < 16 ? ng - gs : 16;
            const __mmask16 gm = (__mmask16)(ngs == 16 ? 0xFFFFu : (1u << ngs) - 1u);
            const int b1 = b0 + bps < nb ? b0 + bps : nb;
            const __m512 S = _mm512_maskz_loadu_ps(gm, sb + (size_t)i * ng + gs);
            for (int b = b0; b < b1; b++) {
                int remw = nw - b * 16;
                __mmask16 m = remw >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << remw) - 1u);
                __m512i wv = remw >= 16 ? _mm512_loadu_si512(wr + b * 16) : _mm512_maskz_loadu_epi32(m, wr + b * 16);   /* full: a plain load (load16) */
                __m512 sv = _mm512_permutexvar_ps(_mm512_loadu_si512(idxt + (b - b0) * 16), S);
                qblock(wv, sv, xp, (size_t)b * BE, NT, bits, uv == 2 ? (NT <= 2) : uv, acc);
            }
            const __m512 B = _mm512_maskz_loadu_ps(gm, bb + (size_t)i * ng + gs);
            for (int t = 0; t < NT; t++) bacc[t] = _mm512_fmadd_ps(B, _mm512_loadu_ps(xs[t] + gs), bacc[t]);
        }
        for (int t = 0; t < NT; t++) rs[t][i] = _mm512_add_ps(acc[t], bacc[t]);
    }
    for (int i = nr; i < QS_R; i++)
        for (int t = 0; t < NT; t++) rs[t][i] = _mm512_setzero_ps();
    const __mmask16 om = (__mmask16)(nr >= 16 ? 0xFFFFu : (1u << nr) - 1u);
    for (int t = 0; t < NT; t++) sd_tree16_store(rs[t], a->y + (size_t)(t0 + t) * a->ldy + rt, om);
}

SD_AINLINE void qs_rows(const sd_mm_args *a, int r0, int r1, const int bits, const int uv, specdec_dtype dt) {
    const sd_mat *W = a->W;
    const int ng = W->cols / W->group;
    /* the tile's scales and biases as f32: 16 rows x ng groups (ng <= QS_MAXCOLS / 32) */
    float sb[QS_R * (QS_MAXCOLS / 32) + 16], bb[QS_R * (QS_MAXCOLS / 32) + 16];
    for (int rt = r0; rt < r1; rt += QS_R) {
        const int nr = r1 - rt < QS_R ? r1 - rt : QS_R;
        groups_to_f32(dt, W->scales, (size_t)rt * ng, nr * ng, sb);
        groups_to_f32(dt, W->biases, (size_t)rt * ng, nr * ng, bb);
        int t = 0;
        for (; t + QS_NT <= a->T; t += QS_NT) qs_tile(a, rt, nr, t, QS_NT, bits, uv, sb, bb);
        switch (a->T - t) {
        case 7: qs_tile(a, rt, nr, t, 7, bits, uv, sb, bb); break;
        case 6: qs_tile(a, rt, nr, t, 6, bits, uv, sb, bb); break;
        case 5: qs_tile(a, rt, nr, t, 5, bits, uv, sb, bb); break;
        case 4: qs_tile(a, rt, nr, t, 4, bits, uv, sb, bb); break;
        case 3: qs_tile(a, rt, nr, t, 3, bits, uv, sb, bb); break;
        case 2: qs_tile(a, rt, nr, t, 2, bits, uv, sb, bb); break;
        case 1: qs_tile(a, rt, nr, t, 1, bits, uv, sb, bb); break;
        default: break;
        }
    }
}
#define QS_FN(name, BITS, UV, DT) static void name(const sd_mm_args *a, int r0, int r1) { qs_rows(a, r0, r1, BITS, UV, DT); }
/* UV 2 = pick per token tile (vpermw unpack for tiles of 1-2 tokens), 0 = shift+permute only */
QS_FN(qs_q4_f32, 4, 2, SPECDEC_DTYPE_F32)
QS_FN(qs_q4_f16, 4, 2, SPECDEC_DTYPE_F16)
QS_FN(qs_q4_bf16, 4, 2, SPECDEC_DTYPE_BF16)
QS_FN(qs_q4o_f32, 4, 0, SPECDEC_DTYPE_F32)
QS_FN(qs_q4o_f16, 4, 0, SPECDEC_DTYPE_F16)
QS_FN(qs_q4o_bf16, 4, 0, SPECDEC_DTYPE_BF16)
QS_FN(qs_q8_f32, 8, 0, SPECDEC_DTYPE_F32)
QS_FN(qs_q8_f16, 8, 0, SPECDEC_DTYPE_F16)
QS_FN(qs_q8_bf16, 8, 0, SPECDEC_DTYPE_BF16)

/* Instantiate one kernel per (kind, NT) so the inner loops unroll with constants. Rows go in
 * tiles of 8 with every token tile applied to a row tile before moving on, so a tile's
 * weights are read from memory once and reused from cache for T > 4. */
#define TILED_FN(name, CALL) \
    static void name(const sd_mm_args *a, int r0, int r1) { \
        for (int rt = r0; rt < r1; rt += 8) { \
            int re = r1 - rt < 8 ? r1 : rt + 8, t = 0; \
            for (; t + 4 <= a->T; t += 4) CALL(a, rt, re, t, 4); \
            switch (a->T - t) { \
            case 3: CALL(a, rt, re, t, 3); break; \
            case 2: CALL(a, rt, re, t, 2); break; \
            case 1: CALL(a, rt, re, t, 1); break; \
            default: break; } } }
#define D_F32(a, r0, r1, t, n) dense_rows(a, r0, r1, t, n, SPECDEC_DTYPE_F32)
#define D_F16(a, r0, r1, t, n) dense_rows(a, r0, r1, t, n, SPECDEC_DTYPE_F16)
#define D_BF16(a, r0, r1, t, n) dense_rows(a, r0, r1, t, n, SPECDEC_DTYPE_BF16)
#define Q4_F32(a, r0, r1, t, n) quant_rows(a, r0, r1, t, n, 4, SPECDEC_DTYPE_F32)
#define Q4_F16(a, r0, r1, t, n) quant_rows(a, r0, r1, t, n, 4, SPECDEC_DTYPE_F16)
#define Q4_BF16(a, r0, r1, t, n) quant_rows(a, r0, r1, t, n, 4, SPECDEC_DTYPE_BF16)
#define Q8_F32(a, r0, r1, t, n) quant_rows(a, r0, r1, t, n, 8, SPECDEC_DTYPE_F32)
#define Q8_F16(a, r0, r1, t, n) quant_rows(a, r0, r1, t, n, 8, SPECDEC_DTYPE_F16)
#define Q8_BF16(a, r0, r1, t, n) quant_rows(a, r0, r1, t, n, 8, SPECDEC_DTYPE_BF16)
TILED_FN(mm_f32, D_F32)
TILED_FN(mm_f16, D_F16)
TILED_FN(mm_bf16, D_BF16)
TILED_FN(mm_q4_f32, Q4_F32)
TILED_FN(mm_q4_f16, Q4_F16)
TILED_FN(mm_q4_bf16, Q4_BF16)
TILED_FN(mm_q8_f32, Q8_F32)
TILED_FN(mm_q8_f16, Q8_F16)
TILED_FN(mm_q8_bf16, Q8_BF16)

static void mm_rows(const sd_mm_args *a, int r0, int r1) {
    const sd_mat *W = a->W;
    int d = W->dtype == SPECDEC_DTYPE_F16 ? 1 : W->dtype == SPECDEC_DTYPE_BF16 ? 2 : 0;
    static void (*const dense[3])(const sd_mm_args *, int, int) = {mm_f32, mm_f16, mm_bf16};
    static void (*const q4[3])(const sd_mm_args *, int, int) = {mm_q4_f32, mm_q4_f16, mm_q4_bf16};
    static void (*const q8[3])(const sd_mm_args *, int, int) = {mm_q8_f32, mm_q8_f16, mm_q8_bf16};
    static void (*const qs4[2][3])(const sd_mm_args *, int, int) = {{qs_q4_f32, qs_q4_f16, qs_q4_bf16},
                                                                     {qs_q4o_f32, qs_q4o_f16, qs_q4o_bf16}};
    static void (*const qs8[3])(const sd_mm_args *, int, int) = {qs_q8_f32, qs_q8_f16, qs_q8_bf16};
    /* short rows: 16-row tiles (same bits per row as quant_rows, chosen by cols alone) */
    const int qs = W->cols <= QS_MAXCOLS && (sd_avx512_qs_mode & 1);
    const int old = (sd_avx512_qs_mode >> 1) & 1;
    if (W->bits == 4) (qs ? qs4[old] : q4)[d](a, r0, r1);
    else if (W->bits == 8) (qs ? qs8 : q8)[d](a, r0, r1);
    else dense[d](a, r0, r1);
}

/* ---- rmsnorm: sum of squares over 16-wide chunks into 2 accumulators (chunk % 2) ---- */
static void rmsnorm_row(float *out, const float *x, const float *w, int n, float eps) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int nch = (n + 15) / 16;
    for (int c = 0; c < nch; c++) {
        int rem = n - c * 16;
        __mmask16 m = rem >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << rem) - 1u);
        __m512 v = _mm512_maskz_loadu_ps(m, x + c * 16);
        if (c & 1) s1 = _mm512_fmadd_ps(v, v, s1);
        else s0 = _mm512_fmadd_ps(v, v, s0);
    }
    float ss = sd_hsum16(_mm512_add_ps(s0, s1));
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    __m512 vi = _mm512_set1_ps(inv);
    for (int c = 0; c < nch; c++) {
        int rem = n - c * 16;
        __mmask16 m = rem >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << rem) - 1u);
        __m512 v = _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + c * 16), vi),
                                 _mm512_maskz_loadu_ps(m, w + c * 16));
        _mm512_mask_storeu_ps(out + c * 16, m, v);
    }
}

/* ---- attention for one (query, head) ---- */
SD_AINLINE __m512 load_kv(sd_kv_dtype_e dt, const void *base, size_t e, __mmask16 m) {
    if (dt == SD_KV_BF16) return sd_load16(SPECDEC_DTYPE_BF16, (const uint16_t *)base + e, m);
    if (dt == SD_KV_F16) return sd_load16(SPECDEC_DTYPE_F16, (const uint16_t *)base + e, m);
    return sd_load16(SPECDEC_DTYPE_F32, (const float *)base + e, m);
}

#define HD_CH 8 /* 16-wide chunks of the output held in registers at once (128 dims) */

/* ---- attention: g query heads sharing one kv head (g = 1: attn_one), one pass over its K / V
 * rows per sub-group of heads. Per head, the operations and their order do not depend on g or
 * on the sub-group: scores = the d0/d1 chains over the chunks (chunk c into accumulator c % 2),
 * then hsum16's tree, done for 16 keys at once by tree16_store (the same adds per key), then the
 * scale; max in key order; the shared softmax; P.V per chunk in key order. So grouped and
 * per-head calls give the same bits. ---- */
SD_AINLINE void grp_scores(const float *q, const void *k, size_t stride, const int hd, const sd_kv_dtype_e dt,
                           int n, float scale, float *sc, size_t ss, const int HG) {
    const int nch = (hd + 15) / 16;
    const __m512 sv = _mm512_set1_ps(scale);
    const size_t es = sd_kv_elem_size(dt);
    for (int j0 = 0; j0 < n; j0 += 16) {
        const int nk = n - j0 < 16 ? n - j0 : 16;
        __m512 dv[4][16];
        for (int i = 0; i < nk; i++) {
            const size_t kj = (size_t)(j0 + i) * stride;
            if (j0 + i + SD_ATT_PF < n) sd_prefetch_bytes(k, (kj + (size_t)SD_ATT_PF * stride) * es, (size_t)hd * es);
            __m512 d0[4], d1[4];
            for (int h = 0; h < HG; h++) { d0[h] = _mm512_setzero_ps(); d1[h] = _mm512_setzero_ps(); }
            for (int c = 0; c < nch; c++) {
                int rem = hd - c * 16;
                __mmask16 m = rem >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << rem) - 1u);
                __m512 kv = load_kv(dt, k, kj + c * 16, m);
                for (int h = 0; h < HG; h++) {
                    __m512 qv = _mm512_maskz_loadu_ps(m, q + (size_t)h * hd + c * 16);
                    if (c & 1) d1[h] = _mm512_fmadd_ps(qv, kv, d1[h]);
                    else d0[h] = _mm512_fmadd_ps(qv, kv, d0[h]);
                }
            }
            for (int h = 0; h < HG; h++) dv[h][i] = _mm512_add_ps(d0[h], d1[h]);
        }
        const __mmask16 om = (__mmask16)(nk >= 16 ? 0xFFFFu : (1u << nk) - 1u);
        for (int h = 0; h < HG; h++) {
            for (int i = nk; i < 16; i++) dv[h][i] = _mm512_setzero_ps();
            float *y = sc + (size_t)h * ss + j0;
            sd_tree16_store(dv[h], y, om);
            _mm512_mask_storeu_ps(y, om, _mm512_mul_ps(_mm512_maskz_loadu_ps(om, y), sv));
        }
    }
}

/* out_h[c0*16 ..] = inv_h * sum_j p_h,j v_j over CN chunks, for HG heads, keys in order. */
SD_AINLINE void grp_pv(const void *v, size_t stride, const sd_kv_dtype_e dt, int n, const float *sc, size_t ss,
                       const float *inv, int c0, const int CN, const int hd, float *out, const int HG) {
    __m512 acc[3][HD_CH];
    __mmask16 mk[HD_CH];
#pragma GCC unroll 8
    for (int c = 0; c < HD_CH; c++) {
        int rem = hd - (c0 + c) * 16;
        mk[c] = c >= CN ? (__mmask16)0 : rem >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << rem) - 1u);
        for (int h = 0; h < 3; h++) acc[h][c] = _mm512_setzero_ps();
    }
    const size_t es = sd_kv_elem_size(dt);
    for (int j = 0; j < n; j++) {
        if (j + SD_ATT_PF < n) {   /* this pass's dims of the row ahead */
            const int nd = CN * 16 < hd - c0 * 16 ? CN * 16 : hd - c0 * 16;
            sd_prefetch_bytes(v, ((size_t)(j + SD_ATT_PF) * stride + (size_t)c0 * 16) * es, (size_t)nd * es);
        }
        __m512 pj[3];
        for (int h = 0; h < HG; h++) pj[h] = _mm512_set1_ps(sc[(size_t)h * ss + j]);
#pragma GCC unroll 8
        for (int c = 0; c < CN; c++) {
            __m512 vv = load_kv(dt, v, (size_t)j * stride + (c0 + c) * 16, mk[c]);
            for (int h = 0; h < HG; h++) acc[h][c] = _mm512_fmadd_ps(pj[h], vv, acc[h][c]);
        }
    }
    for (int h = 0; h < HG; h++) {
        __m512 vi = _mm512_set1_ps(inv[h]);
#pragma GCC unroll 8
        for (int c = 0; c < CN; c++)
            _mm512_mask_storeu_ps(out + (size_t)h * hd + (c0 + c) * 16, mk[c], _mm512_mul_ps(acc[h][c], vi));
    }
}

SD_AINLINE void grp_body(const float *q, int g, const void *k, const void *v, size_t stride, const int hd,
                         const sd_kv_dtype_e dt, int n, float scale, float *sc, size_t ss, float *out) {
    const int nch = (hd + 15) / 16;
    const size_t es = sd_kv_elem_size(dt);
    sd_prefetch_first_rows(k, n, stride * es, (size_t)hd * es);
    for (int h0 = 0; h0 < g; h0 += 4) {   /* scores: up to 4 heads per pass over K */
        const float *qh = q + (size_t)h0 * hd;
        float *sh = sc + (size_t)h0 * ss;
        switch (g - h0 < 4 ? g - h0 : 4) {
        case 4: grp_scores(qh, k, stride, hd, dt, n, scale, sh, ss, 4); break;
        case 3: grp_scores(qh, k, stride, hd, dt, n, scale, sh, ss, 3); break;
        case 2: grp_scores(qh, k, stride, hd, dt, n, scale, sh, ss, 2); break;
        default: grp_scores(qh, k, stride, hd, dt, n, scale, sh, ss, 1); break;
        }
    }
    sd_prefetch_first_rows(v, n, stride * es, (size_t)hd * es);   /* during the softmax */
    float inv[64];
    for (int h = 0; h < g; h++) {
        float *sh = sc + (size_t)h * ss, mx = -INFINITY;
        for (int j = 0; j < n; j++)
            if (sh[j] > mx) mx = sh[j];
        inv[h] = 1.0f / sd_softmax_exp(sh, n, mx);
    }
    for (int c0 = 0; c0 < nch; c0 += HD_CH) {
        const int cn = nch - c0 < HD_CH ? nch - c0 : HD_CH;
        for (int h0 = 0; h0 < g; h0 += 3) {   /* P.V: up to 3 heads x 8 accumulators per pass over V */
            const int hg = g - h0 < 3 ? g - h0 : 3;
            const float *sh = sc + (size_t)h0 * ss;
            float *oh = out + (size_t)h0 * hd;
            if (cn == HD_CH && hg == 3) grp_pv(v, stride, dt, n, sh, ss, inv + h0, c0, HD_CH, hd, oh, 3);
            else if (cn == HD_CH && hg == 2) grp_pv(v, stride, dt, n, sh, ss, inv + h0, c0, HD_CH, hd, oh, 2);
            else if (cn == HD_CH) grp_pv(v, stride, dt, n, sh, ss, inv + h0, c0, HD_CH, hd, oh, 1);
            else for (int h = 0; h < hg; h++)
                grp_pv(v, stride, dt, n, sh + (size_t)h * ss, ss, inv + h0 + h, c0, cn, hd, oh + (size_t)h * hd, 1);
        }
    }
}

static void attn_group(const float *q, int g, const void *k, const void *v, size_t stride, int hd,
                       sd_kv_dtype_e dt, int n, float scale, float *sc, size_t ss, float *out) {
    if (g > 64) {   /* inv[] bound; no Qwen3 shape comes near it */
        for (int h = 0; h < g; h++)
            attn_group(q + (size_t)h * hd, 1, k, v, stride, hd, dt, n, scale, sc, ss, out + (size_t)h * hd);
        return;
    }
#define GRP(HD, DT) grp_body(q, g, k, v, stride, HD, DT, n, scale, sc, ss, out)
    SD_ATTN_SPECIALIZE(hd, dt, GRP);
#undef GRP
}

static void attn_one(const float *q, const void *k, const void *v, size_t stride, int hd,
                     sd_kv_dtype_e dt, int n, float scale, float *sc, float *out) {
#define ONE(HD, DT) grp_body(q, 1, k, v, stride, HD, DT, n, scale, sc, 0, out)   /* g = 1 folds */
    SD_ATTN_SPECIALIZE(hd, dt, ONE);
#undef ONE
}

static const sd_isa isa = {
    .name = "avx512",
    .lanes = 16,
    .mm_rows = mm_rows,
    .rmsnorm_row = rmsnorm_row,
    .attn_one = attn_one,
    .attn_group = attn_group,
};

const sd_isa *sd_isa_avx512(void) { return &isa; }
