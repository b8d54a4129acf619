/* mma_tile.cu: the tensor-core matmul of mma_i4.cu (4-bit weights against int8 activations,
 * SDC_MM_Q4I, rows of a multiple of 1024 columns, T >= SDC_MQ_MIN_T) with its operands staged:
 * the same integer sums (mma.sync m16n8k32) and the same float part in the same order, so the
 * same bits as every other matmul kernel, from a tile that keeps the tensor cores and the float
 * pipes fed instead of waiting on global memory.
 *
 * Why mma_i4.cu's kernel idles: a warp holds 16 rows x 16 tokens and loads every operand of every
 * chunk from global memory (14 loads for 2 mma), the activations of a 16-row tile again for each
 * of the matrix's row tiles, and converts each chunk's integer sum with I2F, a quarter-rate
 * instruction on sm_90. Here:
 *   - A block is 4 class warps x MT_RW row warps on one tile of 16 MT_RW rows x 8 NT tokens. Class
 *     warp w owns the lane classes mma_order.cuh gives warp w (its level-3 subtree, the same
 *     order as mma_i4.cu), so the 4 class warps of a row tile read the 4 neighbouring chunks of a
 *     run together (whole 32-byte sectors of each row), and the row warps share one copy of the
 *     activations.
 *   - The activations of the block's tokens go through a ring of shared-memory stages by
 *     cp.async. A run here is 4 chunks (128 columns: a token's 8 granules of codes, mm_swz's unit,
 *     and 4 (d, dY) pairs); class step i's chains need runs b + 8 j (b = brev3(i), chunk 4 r +
 *     w's class of each), and a stage holds up to MT_JB of them in order of j. A token's record is
 *     176 bytes (128 of codes, 32 of (d, dY), 16 of padding: the fragment loads of 8 tokens then
 *     hit 32 distinct banks). Each stage is copied verbatim, so a granule f sits at its place in
 *     the run's swizzle (mm_swz: granule f of run r at (f & 7) ^ (r & 7), and r & 7 = b).
 *   - The mma accumulator starts at MM_I8_BIAS (mm_core.cuh): the chunk's sum comes back biased
 *     and one exact subtraction gives (float) I, at full rate (mm_i8_float).
 *   - WS (SPECDEC_CUDA_MMA=4): the stage also holds, per run and block row, the row's 64 bytes of
 *     codes and the aligned 16-byte windows of its scales and biases. Without it each thread loads
 *     its rows' words and scales from global memory at the top of a stage, and that wait after
 *     the barrier was the largest stall measured (below).
 * A row's float operations are mma_i4.cu's: per chunk acc = fmaf(s, I * d, acc), acc = fmaf(b,
 * dY, acc), chained over each class's chunks in ascending order, the classes summed as the xor
 * butterfly.
 *
 * Measured on an H100 (docs/benchmarks/cuda-prefill-tile-h100-2026-12-07.md), without WS:
 * 0.57-0.80x mma_i4.cu's time on the 8B shape's matrices of 4096 rows or more at T = 32 and 64,
 * 1.11-1.57x at T = 16 and on 1024-row matrices (matmul.cu's default rule follows that); the 8B
 * prefill 1.39x faster. 4 warps a scheduler (2 blocks of 8 warps an SM, bound by registers and
 * shared memory), the largest stall the global loads above. WS (docs/benchmarks/
 * cuda-prefill-ws-h100-2026-12-07.md): 0.58-0.82x the time without it on every matrix and T, the
 * 8B prefill 1.25x faster; matmul.cu's default takes it from T = 16 on. Each thread's copies
 * worked out once (MtPlan) instead of at every stage: the 8B prefill 4128 -> 4574 tok/s at
 * 256-token chunks (docs/benchmarks/cuda-prefill-batch-h100-2026-12-07.md). Nsight Compute
 * there: ~57 instructions a warp per mma.sync, of which 16 are the float part above and 4 the
 * fragment loads; the rest is the per-run scale lookups, the stage's copies and barriers, and
 * the class steps' butterfly (its stack in local memory), spread over 16 mma a stage. */
#include "cuda/mma_i4.h"
#include "cuda/mm_core.cuh"
#include "cuda/mma_order.cuh"

namespace {

constexpr int MT_CW = 4;                     /* class warps (mma_order.cuh's warp w) */
constexpr int MT_RW = 2;                     /* row warps */
constexpr int MT_WARPS = MT_CW * MT_RW;
constexpr int MT_ROWS = 16 * MT_RW;          /* rows of a block */
constexpr int MT_JB = 4;                     /* runs (values of j) of a stage */
constexpr int MT_NS = 3;                     /* stages in the ring */
constexpr int MT_REC = 176;                  /* a token's bytes in a stage per run */
constexpr int MT_XB = 128;                   /* of which codes; then (d, dY) of the run's 4 chunks */

constexpr int MT_WREC = 80;                  /* a block row's bytes in a stage per run (WS): 64 of codes, 16 of padding */

/* WS: the weights and their scales and biases staged too (per run and block row: the 64 bytes of
 * its 4 chunks, the aligned 16-byte windows holding the run's scales and biases), else loaded
 * from global memory by each thread at the top of a stage. */
template <int NT, bool WS> struct MtT {
    static constexpr int TOK = 8 * NT;                       /* tokens of a block */
    static constexpr int E = 4 * NT;                         /* a thread's sums per class */
    static constexpr int XST = MT_JB * TOK * MT_REC;         /* bytes of a stage's activations */
    static constexpr int WST = WS ? MT_JB * MT_ROWS * MT_WREC : 0;   /* its weights */
    static constexpr int SST = WS ? MT_JB * MT_ROWS * 16 : 0;        /* its scales' windows, then as much for biases */
    static constexpr int STAGE = XST + WST + 2 * SST;        /* bytes of a stage */
    static constexpr int PART = 3 * MT_RW * E * 32 * 4;      /* bytes of the class warps' subtrees */
    static constexpr int SMEM = MT_NS * STAGE > PART ? MT_NS * STAGE : PART;
};

/* d = A . B + MM_I8_BIAS (mm_core.cuh: mm_i8_float turns it into the float of the sum) */
SDC_D void mt_mma(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%10,%10,%10};\n"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(MM_I8_BIAS));
}

/* The float of a scale or bias of dtype SDT (the values sdc_wordf gives) from its bits: all 32
 * for f32, the low 16 for f16 / bf16. */
template <int SDT> SDC_D float mt_scf(uint32_t h) {
    if constexpr (SDT == SDC_F32) return __uint_as_float(h);
    if constexpr (SDT == SDC_BF16) return __uint_as_float(h << 16);
    return __half2float(__ushort_as_half((unsigned short)h));
}
/* Entry i of a scales (or biases) array in global memory; an entry at `at` in a stage's window. */
template <int SDT> SDC_D float mt_sc(const void *p, size_t i) {
    return mt_scf<SDT>(SDT == SDC_F32 ? __ldg((const uint32_t *)p + i) : __ldg((const unsigned short *)p + i));
}
template <int SDT> SDC_D float mt_scs(const unsigned char *at) {
    return mt_scf<SDT>(SDT == SDC_F32 ? *(const uint32_t *)at : *(const unsigned short *)at);
}

/* The first byte, from its row's first, of the aligned 16-byte window of a scales (or biases)
 * array that holds the scales of run r (chunks 4r .. 4r + 3: 128 columns); WS takes only rows of
 * a multiple of 16 bytes of them. The run's groups are 4, 2 or 1 (group 32, 64, >= 128) entries of
 * es bytes, at an offset aligned to their size, so never more than 16 bytes and never across a
 * window's edge. */
SDC_D uint32_t mt_win(uint32_t r, int gsh, uint32_t es) { return (((4u * r) >> gsh) * es) & ~15u; }

/* A thread's share of every stage's copies (16 bytes each), worked out once: a stage's copies
 * differ only in their run, r = b + 8 (j0 + jj), so each copy keeps its source's offset at
 * b + 8 j0 = 0 and its destination in the slot, and a stage adds its run's offset (per array: the
 * run's place in a token's or a row's bytes). Copy u of a stage (u = thread + 256 k): activations
 * u = 10 jt + c (jt = jj TOK + token, c < 8 a granule of codes, else the (d, dY) pairs), weights
 * u = 6 jr + c (jr = jj MT_ROWS + row, c < 4 a quarter of the row's 64 bytes of codes, 4 the
 * scales' window, 5 the biases'). Tokens past T copy token T - 1, rows past the matrix's last
 * row the last (used, never stored). Offsets are 32-bit: sdc_mt_plan_for takes only matrices and
 * calls whose arrays fit. Every stage working out every copy (divisions by 10 and 6, 64-bit
 * address arithmetic) made the 8B prefill 1.11x slower than this (docs/benchmarks/
 * cuda-prefill-batch-h100-2026-12-07.md). */
template <int NT, bool WS> struct MtPlan {
    static constexpr int NTH = MT_WARPS * 32;
    static constexpr int NX = (MT_JB * 8 * NT * 10 + NTH - 1) / NTH;   /* activation copies a thread */
    static constexpr int NW = WS ? (MT_JB * MT_ROWS * 6 + NTH - 1) / NTH : 1;   /* weight copies (WS) */
    uint32_t xs[NX], xd[NX];   /* source offset in xq or xsd; destination | jj << 16 | scales << 20 | none << 21 */
    uint32_t ws[NW], wd[NW];   /* source offset in w, scales or biases; destination | jj << 16 | kind << 20 (0 codes,
                                * 1 scales, 2 biases) | none << 22 */
};
constexpr uint32_t MT_NONE_X = 1u << 21, MT_NONE_W = 1u << 22;

template <int NT, bool WS>
SDC_D void mt_plan(const sdc_mm_params &p, MtPlan<NT, WS> &pl, int t0, int rb0) {
    using C = MtT<NT, WS>;
    using L = MtPlan<NT, WS>;
    const uint32_t xrow = (uint32_t)p.ncp * 32, srow = (uint32_t)p.ncp * 8;   /* a token's bytes of xq, xsd */
#pragma unroll
    for (int k = 0; k < L::NX; k++) {
        const int u = threadIdx.x + L::NTH * k, jt = u / 10, c = u - jt * 10, jj = jt / C::TOK, tk = jt - jj * C::TOK;
        const uint32_t tc = (uint32_t)min(t0 + tk, p.T - 1);
        pl.xs[k] = c < 8 ? tc * xrow + (uint32_t)(8 * jj) * 128u + 16u * (uint32_t)c
                         : tc * srow + (uint32_t)(8 * jj) * 32u + 16u * (uint32_t)(c - 8);
        pl.xd[k] = (uint32_t)(jt * MT_REC + 16 * c) | (uint32_t)jj << 16 | (c >= 8 ? 1u << 20 : 0u) |
                   (u >= MT_JB * C::TOK * 10 ? MT_NONE_X : 0u);
    }
    if constexpr (WS) {
        const uint32_t rowb = (uint32_t)p.cols / 2, es = p.sdt == SDC_F32 ? 4 : 2;
        const uint32_t srowb = (uint32_t)(p.cols / p.group) * es;   /* a row's bytes of scales (a multiple of 16) */
#pragma unroll
        for (int k = 0; k < L::NW; k++) {
            const int u = threadIdx.x + L::NTH * k, jr = u / 6, c = u - jr * 6, jj = jr / MT_ROWS, rr = jr - jj * MT_ROWS;
            const uint32_t row = (uint32_t)min(rb0 + rr, p.rows - 1);
            pl.ws[k] = c < 4 ? row * rowb + (uint32_t)(8 * jj) * 64u + 16u * (uint32_t)c : row * srowb;
            pl.wd[k] = (uint32_t)(c < 4 ? C::XST + jr * MT_WREC + 16 * c : C::XST + C::WST + (c - 4) * C::SST + jr * 16) |
                       (uint32_t)jj << 16 | (uint32_t)(c < 4 ? 0 : c - 3) << 20 |
                       (u >= MT_JB * MT_ROWS * 6 ? MT_NONE_W : 0u);
        }
    }
}

/* Stage s (class step s / njb, run block s % njb) into its slot: per token of the block and run
 * j of the block, the run's 128 bytes of codes and 32 of (d, dY), 16 bytes a copy (consecutive
 * threads on consecutive bytes of a token); WS: per run and block row, its 64 bytes of codes and
 * the 16-byte windows of its scales and biases (mt_win). */
template <int NT, bool WS>
SDC_D void mt_stage(const sdc_mm_params &p, const MtPlan<NT, WS> &pl, unsigned char *sm, int s, int njb, int nj, int gsh) {
    using C = MtT<NT, WS>;
    using L = MtPlan<NT, WS>;
    const int i = s / njb, jb = s - i * njb, b = sdc_mq_brev3(i), j0 = jb * MT_JB;
    const uint32_t nJ = (uint32_t)min(MT_JB, nj - j0), r0 = (uint32_t)(b + 8 * j0);
    unsigned char *slot = sm + (s % MT_NS) * C::STAGE;
    if constexpr (WS) {
        const uint32_t es = p.sdt == SDC_F32 ? 4 : 2;
#pragma unroll
        for (int k = 0; k < L::NW; k++) {
            const uint32_t d = pl.wd[k], jj = (d >> 16) & 7u, kind = (d >> 20) & 3u;
            if ((d & MT_NONE_W) || jj >= nJ) continue;
            const unsigned char *src;
            if (kind == 0) src = (const unsigned char *)p.w + pl.ws[k] + r0 * 64u;
            else src = (const unsigned char *)(kind == 1 ? p.scales : p.biases) + pl.ws[k] + mt_win(r0 + 8u * jj, gsh, es);
            sdc_cp16(slot + (d & 0xFFFFu), src);
        }
    }
#pragma unroll
    for (int k = 0; k < L::NX; k++) {
        const uint32_t d = pl.xd[k], jj = (d >> 16) & 7u;
        if ((d & MT_NONE_X) || jj >= nJ) continue;
        const unsigned char *src = (d >> 20) & 1u ? (const unsigned char *)p.xsd + pl.xs[k] + r0 * 32u
                                                  : (const unsigned char *)p.xq + pl.xs[k] + r0 * 128u;
        sdc_cp16(slot + (d & 0xFFFFu), src);
    }
}

template <int NT, int SDT, bool WS>
__global__ void __launch_bounds__(MT_WARPS * 32, 2) mt_kernel(const sdc_mm_params p, const int nj) {
    using C = MtT<NT, WS>;
    extern __shared__ __align__(16) unsigned char sm[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, cw = warp & 3, rw = warp >> 2;
    const int g = lane >> 2, q = lane & 3;
    const int cc = sdc_mq_class(cw, 0) & 3;   /* the chunk of each run this warp's classes take */
    const int t0 = blockIdx.x * C::TOK, rb0 = blockIdx.y * MT_ROWS, r0 = rb0 + 16 * rw;
    const int ra = min(r0 + g, p.rows - 1), rb = min(r0 + g + 8, p.rows - 1);   /* past the end: loaded, never stored */
    const size_t rw32 = (size_t)p.cols / 8, ngroups = (size_t)(p.cols / p.group);
    const uint32_t *wa = (const uint32_t *)p.w + (size_t)ra * rw32 + q, *wb = (const uint32_t *)p.w + (size_t)rb * rw32 + q;
    const size_t sa = (size_t)ra * ngroups, sb = (size_t)rb * ngroups;
    const int gsh = __ffs(p.group) - 6;   /* chunk ch lies in group ch >> gsh */
    const int es = SDT == SDC_F32 ? 4 : 2;
    const int njb = (nj + MT_JB - 1) / MT_JB, S = 8 * njb;
    MtPlan<NT, WS> pl;
    mt_plan<NT, WS>(p, pl, t0, rb0);
    sdc_grid_enter();

#pragma unroll
    for (int s = 0; s < MT_NS - 1; s++) {
        if (s < S) mt_stage<NT, WS>(p, pl, sm, s, njb, nj, gsh);
        sdc_cp_commit();
    }
    float v[C::E], st[3][C::E];
#pragma unroll 1
    for (int i = 0; i < 8; i++) {
        const int b = sdc_mq_brev3(i);
        const int xlo = 16 * ((2 * cc) ^ b) + 4 * q, xhi = 16 * ((2 * cc + 1) ^ b) + 4 * q;
#pragma unroll
        for (int e = 0; e < C::E; e++) v[e] = 0.0f;
#pragma unroll 1
        for (int jb = 0; jb < njb; jb++) {
            const int s = i * njb + jb, j0 = jb * MT_JB, nJ = min(MT_JB, nj - j0);
            /* this stage's weights first: their loads overlap the wait */
            uint32_t w0[MT_JB], w1[MT_JB];
            float s0[MT_JB], s1[MT_JB], b0[MT_JB], b1[MT_JB];
#pragma unroll
            for (int jj = 0; jj < MT_JB; jj++) {
                if (!WS && jj < nJ) {
                    const int ch = 4 * (b + 8 * (j0 + jj)) + cc;
                    const size_t gi = (size_t)(ch >> gsh);
                    w0[jj] = __ldg(wa + 4 * ch);
                    w1[jj] = __ldg(wb + 4 * ch);
                    s0[jj] = mt_sc<SDT>(p.scales, sa + gi);
                    s1[jj] = mt_sc<SDT>(p.scales, sb + gi);
                    b0[jj] = mt_sc<SDT>(p.biases, sa + gi);
                    b1[jj] = mt_sc<SDT>(p.biases, sb + gi);
                }
            }
            sdc_cp_wait<MT_NS - 2>();   /* this thread's copies of stage s have landed */
            __syncthreads();        /* everyone's have, and stage s - 1's slot is free */
            if (s + MT_NS - 1 < S) mt_stage<NT, WS>(p, pl, sm, s + MT_NS - 1, njb, nj, gsh);
            sdc_cp_commit();
            const unsigned char *slot = sm + (s % MT_NS) * C::STAGE;
#pragma unroll
            for (int jj = 0; jj < MT_JB; jj++) {
                if (jj < nJ) {
                    if constexpr (WS) {   /* this warp's rows of the stage: codes, scales, biases */
                        const unsigned char *wr = slot + C::XST + (jj * MT_ROWS + 16 * rw + g) * MT_WREC + 16 * cc + 4 * q;
                        w0[jj] = *(const uint32_t *)wr;
                        w1[jj] = *(const uint32_t *)(wr + 8 * MT_WREC);
                        const int go = ((4 * (b + 8 * (j0 + jj)) + cc) >> gsh) * es;   /* group's offset from the row's first */
                        const unsigned char *sw = slot + C::XST + C::WST + (jj * MT_ROWS + 16 * rw + g) * 16;
                        s0[jj] = mt_scs<SDT>(sw + (go & 15));
                        s1[jj] = mt_scs<SDT>(sw + 8 * 16 + (go & 15));
                        b0[jj] = mt_scs<SDT>(sw + C::SST + (go & 15));
                        b1[jj] = mt_scs<SDT>(sw + C::SST + 8 * 16 + (go & 15));
                    }
                    const uint32_t a0 = w0[jj] & 0x0F0F0F0Fu, a1 = w1[jj] & 0x0F0F0F0Fu;
                    const uint32_t a2 = (w0[jj] >> 4) & 0x0F0F0F0Fu, a3 = (w1[jj] >> 4) & 0x0F0F0F0Fu;
                    const unsigned char *rec = slot + jj * C::TOK * MT_REC;
#pragma unroll
                    for (int n = 0; n < NT; n++) {
                        const unsigned char *rx = rec + (8 * n + g) * MT_REC;
                        int d[4];
                        mt_mma(d, a0, a1, a2, a3, *(const uint32_t *)(rx + xlo), *(const uint32_t *)(rx + xhi));
                        const float2 e0 = *(const float2 *)(rec + (8 * n + 2 * q) * MT_REC + MT_XB + 8 * cc);
                        const float2 e1 = *(const float2 *)(rec + (8 * n + 2 * q + 1) * MT_REC + MT_XB + 8 * cc);
#pragma unroll
                        for (int k = 0; k < 4; k++) {
                            const float sc = k < 2 ? s0[jj] : s1[jj], bi = k < 2 ? b0[jj] : b1[jj];
                            const float2 e = (k & 1) ? e1 : e0;
                            const float I = mm_i8_float(d[k]);
                            float &a = v[4 * n + k];
                            a = fmaf(sc, __fmul_rn(I, e.x), a);
                            a = fmaf(bi, e.y, a);
                        }
                    }
                }
            }
        }
        sdc_mq_push<C::E>(i, v, st);
    }

    /* levels 4 and 5 of the butterfly: (warp 0 + warp 1) + (warp 2 + warp 3) of the row tile */
    sdc_cp_wait<0>();
    __syncthreads();   /* the ring is free: the subtrees take its place */
    float *part = (float *)sm;   /* [cw - 1][rw][e][lane] */
    if (cw > 0)
#pragma unroll
        for (int e = 0; e < C::E; e++) part[(((cw - 1) * MT_RW + rw) * C::E + e) * 32 + lane] = v[e];
    __syncthreads();
    if (cw != 0) return;
#pragma unroll
    for (int e = 0; e < C::E; e++) {
        const float y = sdc_mq_top(v[e], part[(rw * C::E + e) * 32 + lane], part[((MT_RW + rw) * C::E + e) * 32 + lane],
                                   part[((2 * MT_RW + rw) * C::E + e) * 32 + lane]);
        const int n = e >> 2, k = e & 3;
        const int row = r0 + g + 8 * (k >> 1), t = t0 + 8 * n + 2 * q + (k & 1);
        if (row < p.rows && t < p.T) mm_store(p, row, t, y);
    }
}

using mt_fn = void (*)(const sdc_mm_params, const int);
template <int NT, bool WS> mt_fn mt_pick(int sdt) {
    return sdt == SDC_F32 ? mt_kernel<NT, SDC_F32, WS> : sdt == SDC_F16 ? mt_kernel<NT, SDC_F16, WS> : mt_kernel<NT, SDC_BF16, WS>;
}

} // namespace

template <int NT, bool WS> static cudaError_t mt_init_one(int sdt) {
    return cudaFuncSetAttribute((const void *)mt_pick<NT, WS>(sdt), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                MtT<NT, WS>::SMEM);
}

extern "C" cudaError_t sdc_mt_init(void) {
    const int sdts[3] = {SDC_F32, SDC_F16, SDC_BF16};
    for (int k = 0; k < 3; k++) {
        cudaError_t e = mt_init_one<2, false>(sdts[k]);
        if (e == cudaSuccess) e = mt_init_one<4, false>(sdts[k]);
        if (e == cudaSuccess) e = mt_init_one<2, true>(sdts[k]);
        if (e == cudaSuccess) e = mt_init_one<4, true>(sdts[k]);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}

static int g_mt_nt = 0;   /* sd_cuda_mma_tile_tokens: 0 the rule below, else 8 x this tokens a block */
extern "C" int sd_cuda_mma_tile_tokens(int nt) {
    const int was = g_mt_nt;
    g_mt_nt = nt == 2 || nt == 4 ? nt : 0;
    return was;
}

extern "C" int sdc_mt_plan_for(const sdc_mm_params *p, int lma, int n_sm, int ws, sdc_mq_plan *pl) {
    if (!sdc_mq_plan_for(p, lma, pl) || (((uintptr_t)p->xq | (uintptr_t)p->xsd) & 15u) != 0) return 0;   /* cp.async: 16-byte copies */
    /* MtPlan's 32-bit offsets: the activations' codes and the weights' under 2^31 bytes */
    if ((uint64_t)p->T * (uint64_t)p->cols >= (1ull << 31) || (uint64_t)p->rows * (uint64_t)p->cols / 2 >= (1ull << 31))
        return 0;
    /* ws where every window of scales and biases lies inside its array (16-byte aligned arrays,
     * rows of a multiple of 16 bytes of them; rows of codes are 16-byte aligned: wvec), else the
     * activations alone staged */
    const size_t es = p->sdt == SDC_F32 ? 4 : 2;
    pl->ws = ws && ((((uintptr_t)p->scales | (uintptr_t)p->biases) & 15u) == 0) &&
             ((size_t)(p->cols / p->group) * es) % 16 == 0;
    /* 32 tokens a block, or 16 where that leaves most of the GPU idle (the 1024-row k and v) */
    const int gr = (p->rows + MT_ROWS - 1) / MT_ROWS;
    pl->nt = g_mt_nt ? g_mt_nt : p->T <= 16 || (long)gr * ((p->T + 31) / 32) < 2L * n_sm ? 2 : 4;
    pl->gx = (p->T + 8 * pl->nt - 1) / (8 * pl->nt);
    pl->gy = gr;
    return pl->gy <= 65535;
}

template <int NT, bool WS> static cudaError_t mt_go(const sdc_mq_plan *pl, const sdc_mm_params *p, const sdc_dev *d) {
    return sdc_launch(d, mt_pick<NT, WS>(p->sdt), dim3((unsigned)pl->gx, (unsigned)pl->gy), MT_WARPS * 32,
                      MtT<NT, WS>::SMEM, *p, pl->nj);
}

static long g_mt_ws_taken = 0;   /* sd_cuda_mma_staged_taken */
extern "C" long sd_cuda_mma_staged_taken(void) { return g_mt_ws_taken; }

extern "C" cudaError_t sdc_mt_launch(const sdc_mq_plan *pl, const sdc_mm_params *p, const sdc_dev *d) {
    g_mt_ws_taken += pl->ws;
    if (pl->ws) return pl->nt == 2 ? mt_go<2, true>(pl, p, d) : mt_go<4, true>(pl, p, d);
    return pl->nt == 2 ? mt_go<2, false>(pl, p, d) : mt_go<4, false>(pl, p, d);
}
