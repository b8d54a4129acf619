/* gemv_i4.cu: y (T, ldy) = x (T, ldx) . W^T for 4-bit weights against int8 activations
 * (SDC_MM_Q4I) with rows of a multiple of 1024 columns, T = 1..8, and the fused LM head + argmax
 * for those calls: the decode steps, drafter steps and short verifies of every Qwen3 shape from
 * 1.7B up.
 *
 * Why a kernel of its own. gemv.cu's kernel serves every format, lane-group width and partial
 * row, so each chunk it loads pays for that generality: 64-bit row x group products for the
 * scale and bias addresses, the run-time scale dtype, the partial-chunk guards. Hardware
 * counters on an H100 (8B shape, T = 1) showed ~130 instructions per 16-byte chunk a lane loads,
 * its warps waiting on their own instruction chains while the memory was 29-60% busy
 * (docs/benchmarks/cuda-gemv-i4-h100-2026-12-05.md). Here the shape is fixed where it can be:
 * every lane owns whole chunks (cols / 1024 of them, chunk lane + 32 j), a row's code and group
 * offsets are made once per row (32-bit indices), a chunk's
 * group is the lane's group plus j times a step (a power-of-two group of 32 to 1024 columns),
 * and the scale dtype is a template parameter. The loads of D chunks of R rows are issued
 * before any is used, as in gemv.cu.
 *
 * Bits. A row's value is mm_chunk (mm_core.cuh) over chunks lane, lane + 32, ... in ascending
 * order, then the 32-lane xor butterfly: gemv.cu's kernel with 32 lanes a row, and so matmul.cu's
 * tiled kernel, exactly (the scale and bias floats are the values sdc_wordf reads from the
 * words holding them). The choice of kernel never changes a value. */
#include "cuda/gemv_i4.h"
#include "cuda/mm_core.cuh"
#include <limits.h>

namespace {

constexpr int GI_THREADS = 256;   /* largest block */

/* rows a warp carries (R) and chunks of each loaded per batch (D): 2 rows and 8 sixteen-byte
 * loads a lane up to T = 4, 4 from T = 5 on (T = 8's accumulators leave no room for more
 * without spilling); RW = 4: 4 rows a warp from T = 4 on (fewer warps, each x value read
 * serving twice the rows: the LM heads' pick, sdc_gi_plan_for). TT is the launch's tile,
 * mm_gemv_tile (mm_core.cuh): T itself up to 6, then 8. */
constexpr int gi_rows_a_warp(int TT, int RW) { return TT >= 4 && RW == 4 ? 4 : 2; }
template <int TT, int RW> struct GiShape {
    static constexpr int R = gi_rows_a_warp(TT, RW);
    static constexpr int D = TT <= 2 ? 4 : TT <= 4 ? (R == 4 ? 2 : 4) : (R == 4 ? 1 : 2);
};

/* A scale or bias as stored; its float is sdc_wordf's for the low half of a word holding it. */
template <int SDT> struct Sv { typedef unsigned short raw; };
template <> struct Sv<SDC_F32> { typedef float raw; };
template <int SDT> SDC_D float gi_sf(typename Sv<SDT>::raw v) {
    if constexpr (SDT == SDC_F32) return sdc_wordf(__float_as_uint(v), 0, SDT);
    else return sdc_wordf((uint32_t)v, 0, SDT);
}

/* Chunks j0 .. j0 + DD - 1 of the lane's chunks of R rows as loaded (wo[r]: the row's first code
 * chunk for this lane, as a 16-byte index into W; so[r]: its first chunk's group, an index into
 * the scales and biases; 32-bit, as a matrix holds fewer than 2^32 chunks). */
template <int SDT, int R, int DD> struct GiBatch {
    uint4 w[DD][R];
    typename Sv<SDT>::raw s[DD][R], b[DD][R];
};

/* Every load of a batch, none used: weights only, so a kernel may issue them before its
 * griddepcontrol.wait (common.cuh's rule: no kernel writes them). */
template <int SDT, int R, int DD>
SDC_D void gi_load(const uint4 *W, const typename Sv<SDT>::raw *S, const typename Sv<SDT>::raw *B,
                   const uint32_t (&wo)[R], const uint32_t (&so)[R], int j0, int gstep, GiBatch<SDT, R, DD> &bt) {
#pragma unroll
    for (int j = 0; j < DD; j++)
#pragma unroll
        for (int r = 0; r < R; r++) {
            const uint32_t g = so[r] + (uint32_t)((j0 + j) * gstep);
            bt.w[j][r] = mm_ldw(W + wo[r] + 32u * (uint32_t)(j0 + j));
            bt.s[j][r] = mm_ldw(S + g);
            bt.b[j][r] = mm_ldw(B + g);
        }
}

/* A loaded batch's contributions: the floats of its scales and biases, then each chunk's
 * mm_chunk in ascending order. */
template <int TT, int SDT, int R, int DD>
SDC_D void gi_use(const GiBatch<SDT, R, DD> &bt, int j0, int lane, const float4 *xs, const float *sx, int xt4,
                  int tile_ch, float (&acc)[R][TT]) {
    Chunk<R> ch[DD];
#pragma unroll
    for (int j = 0; j < DD; j++)
#pragma unroll
        for (int r = 0; r < R; r++) {
            ch[j].w[r] = bt.w[j][r];
            ch[j].s[r] = gi_sf<SDT>(bt.s[j][r]);
            ch[j].b[r] = gi_sf<SDT>(bt.b[j][r]);
        }
#pragma unroll
    for (int j = 0; j < DD; j++) mm_chunk<SDC_MM_Q4I, TT, R>(ch[j], lane + 32 * (j0 + j), xs, sx, xt4, tile_ch, acc);
}

/* One batch: every load first, then the contributions. */
template <int TT, int SDT, int R, int DD>
SDC_D void gi_batch(const uint4 *W, const typename Sv<SDT>::raw *S, const typename Sv<SDT>::raw *B,
                    const uint32_t (&wo)[R], const uint32_t (&so)[R], int j0, int lane, int gstep, const float4 *xs,
                    const float *sx, int xt4, int tile_ch, float (&acc)[R][TT]) {
    GiBatch<SDT, R, DD> bt;
    gi_load<SDT, R, DD>(W, S, B, wo, so, j0, gstep, bt);
    gi_use<TT, SDT, R, DD>(bt, j0, lane, xs, sx, xt4, tile_ch, acc);
}

/* A warp's code and group offsets of rows row[] (see GiBatch). */
template <int R>
SDC_D void gi_offsets(const uint32_t (&row)[R], uint32_t rowq, uint32_t ngroups, int glane, int lane, uint32_t (&wo)[R],
                      uint32_t (&so)[R]) {
#pragma unroll
    for (int r = 0; r < R; r++) {
        wo[r] = row[r] * rowq + (uint32_t)lane;
        so[r] = row[r] * ngroups + (uint32_t)glane;
    }
}

/* Which kernels may load their first batch before the wait (gi_pre): the single-token matmuls
 * (decode and drafter steps). Elsewhere the batch held across the wait spilled (ptxas, sm_90: up
 * to 576 bytes a thread in the T = 8 LM head). */
template <int TT, bool LMA> constexpr bool gi_pre_regs_ok() { return TT == 1 && !LMA; }

/* What every warp of a launch shares: the matrix, its geometry and the prepared x. */
template <int SDT> struct GiCtx {
    const uint4 *W;
    const typename Sv<SDT>::raw *S, *B;
    uint32_t rowq, ngroups;   /* 16-byte chunks and groups a row */
    int glane, gstep, nj, lane;
    const float4 *xs;         /* x as the preparation kernel left it (mm_core.cuh): read from global memory */
    const float *sx;
    int xt4, tile_ch;
};

template <int SDT> SDC_D GiCtx<SDT> gi_ctx(const sdc_mm_params &p, int nj) {
    GiCtx<SDT> c;
    const int lane = threadIdx.x & 31;
    const int gs = __ffs(p.group) - 6;   /* group = 32 << gs, gs in 0..5 */
    c.W = (const uint4 *)p.w;
    c.S = (const typename Sv<SDT>::raw *)p.scales;
    c.B = (const typename Sv<SDT>::raw *)p.biases;
    c.rowq = (uint32_t)p.cols >> 5;
    c.ngroups = (uint32_t)(p.cols / p.group);
    c.glane = lane >> gs;     /* chunk lane + 32 j: group glane + j gstep */
    c.gstep = 32 >> gs;
    c.nj = nj;
    c.lane = lane;
    c.xs = (const float4 *)p.xq;
    c.sx = (const float *)p.xsd;
    c.tile_ch = p.ncp;
    c.xt4 = 2 * p.ncp;
    return c;
}

/* Before the kernel's wait (weights only: common.cuh's rule), for the rows row[] the warp takes
 * first: their first batch loaded into `first` (with `pre`, in the kernels that may; returns
 * whether it did), else prefetched towards L2.
 *
 * Why registers. With the L2 prefetch alone the batch still crosses from L2 after the wait, and
 * the kernel's first round of loads is the launch's critical path; loaded into registers, it
 * arrives while the kernel before (a preparation or attention, a few microseconds) still runs.
 * On an H100 (docs/benchmarks/cuda-preload-h100-2026-12-06.md) classic decode of the 8B shape
 * ran 1.06-1.07x (text identical; MTP 1.00x, its verifies being wider). Prefetching the rest of
 * the rows towards L2 as well ran 0.78x (with the register load 1.00x): as with the earlier
 * prefetch kernels, L2 prefetches beyond the first batch cost more than they save. */
template <int SDT, int R, int D, bool OK>
SDC_D bool gi_pre(const GiCtx<SDT> &c, const uint32_t (&row)[R], int pre, GiBatch<SDT, R, D> &first) {
    uint32_t wo[R], so[R];
    gi_offsets<R>(row, c.rowq, c.ngroups, c.glane, c.lane, wo, so);
    if (OK && pre && c.nj >= D) {
        gi_load<SDT, R, D>(c.W, c.S, c.B, wo, so, 0, c.gstep, first);
        return true;
    }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int j = 0; j < D; j++)
            if (j < c.nj) asm volatile("prefetch.global.L2 [%0];" ::"l"(c.W + wo[r] + 32u * (uint32_t)j));
    return false;
}

/* The R rows row[] of a warp, every token of the tile: the lane's chunks in batches of D (then
 * singles), then the xor butterfly, so every lane holds every row's sums in acc. gi_kernel and
 * gi_swq_kernel both run it; only which rows a warp takes differs. With `have` the first batch
 * (chunks 0 .. D - 1; nj >= D) is already in `first` (gi_pre). Callers pass `first` only to the
 * first rows a warp takes, outside any loop, so it is dead once used. */
template <int TT, int SDT, int R, int D>
SDC_D void gi_rows(const GiCtx<SDT> &c, const uint32_t (&row)[R], float (&acc)[R][TT], GiBatch<SDT, R, D> &first,
                   bool have) {
    uint32_t wo[R], so[R];
    gi_offsets<R>(row, c.rowq, c.ngroups, c.glane, c.lane, wo, so);
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int t = 0; t < TT; t++) acc[r][t] = 0.0f;
    int j0 = 0;
    if (c.nj >= D) {
        if (!have) gi_load<SDT, R, D>(c.W, c.S, c.B, wo, so, 0, c.gstep, first);
        gi_use<TT, SDT, R, D>(first, 0, c.lane, c.xs, c.sx, c.xt4, c.tile_ch, acc);
        j0 = D;
    }
    for (; j0 + D <= c.nj; j0 += D)
        gi_batch<TT, SDT, R, D>(c.W, c.S, c.B, wo, so, j0, c.lane, c.gstep, c.xs, c.sx, c.xt4, c.tile_ch, acc);
    for (; j0 < c.nj; j0++)
        gi_batch<TT, SDT, R, 1>(c.W, c.S, c.B, wo, so, j0, c.lane, c.gstep, c.xs, c.sx, c.xt4, c.tile_ch, acc);
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int t = 0; t < TT; t++) acc[r][t] = sdc_warp_sum(acc[r][t]);
}

/* The rows of a warp of gi_kernel in row block rb, and their results: stored, or (LMA) offered
 * to the warp's bests. */
template <int TT, int SDT, bool LMA, int R, int D>
SDC_D void gi_block(const sdc_mm_params &p, const GiCtx<SDT> &c, int rb, int nw, int warp, GiBatch<SDT, R, D> &first,
                    bool have, sdc_best (&best)[TT]) {
    const int r0 = (rb * nw + warp) * R;
    uint32_t row[R];
#pragma unroll
    for (int r = 0; r < R; r++) row[r] = (uint32_t)min(r0 + r, p.rows - 1);   /* past the end: loaded, never stored */
    float acc[R][TT];
    gi_rows<TT, SDT, R, D>(c, row, acc, first, have);
    /* every lane now holds every sum (the butterfly is symmetric) */
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int rr = r0 + r;
        if (rr >= p.rows) continue;
#pragma unroll
        for (int t = 0; t < TT; t++) {
            if (t >= p.T) continue;
            if constexpr (LMA) {
                if (c.lane == 0) sdc_best_offer(&best[t], acc[r][t], rr);
            } else if (c.lane == r * TT + t) {
                mm_store(p, rr, t, acc[r][t]);
            }
        }
    }
}

/* T <= 2: at most 80 registers, 3 blocks of 256 threads a SM; T = 3..8: at most 128 (2 blocks),
 * where 80 spilled the accumulators and the token loop's x to local memory */
template <int TT, int SDT, bool LMA, int RW>
__global__ void __launch_bounds__(GI_THREADS, TT <= 2 ? 3 : 2) gi_kernel(const sdc_mm_params p, const int nj, const int nrb,
                                                                         const int pre) {
    constexpr int R = GiShape<TT, RW>::R, D = GiShape<TT, RW>::D;
    extern __shared__ sdc_best gi_wb[];   /* LMA: (nw, T) */
    const int warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const GiCtx<SDT> c = gi_ctx<SDT>(p, nj);

    /* The weights are no kernel's output, so the warp's first rows are fetched while the kernel
     * before it still runs (common.cuh, programmatic dependent launch): gi_pre. */
    GiBatch<SDT, R, D> first;
    bool have = false;
    if ((int)blockIdx.x < nrb) {
        const int r0 = ((int)blockIdx.x * nw + warp) * R;
        uint32_t row[R];
#pragma unroll
        for (int r = 0; r < R; r++) row[r] = (uint32_t)min(r0 + r, p.rows - 1);
        have = gi_pre<SDT, R, D, gi_pre_regs_ok<TT, LMA>()>(c, row, pre, first);
    }
    sdc_grid_enter();

    sdc_best best[TT];   /* LMA: lane 0's best (logit, row) per token over the warp's rows */
#pragma unroll
    for (int t = 0; t < TT; t++) best[t] = sdc_best_none();

    if constexpr (gi_pre_regs_ok<TT, LMA>()) {
        /* the first row block apart, so that `first` is dead before the loop */
        int rb = blockIdx.x;
        if (rb < nrb) gi_block<TT, SDT, LMA, R, D>(p, c, rb, nw, warp, first, have, best);
        for (rb += gridDim.x; rb < nrb; rb += gridDim.x) {
            GiBatch<SDT, R, D> bt;
            gi_block<TT, SDT, LMA, R, D>(p, c, rb, nw, warp, bt, false, best);
        }
    } else {
        for (int rb = blockIdx.x; rb < nrb; rb += gridDim.x) {
            GiBatch<SDT, R, D> bt;
            gi_block<TT, SDT, LMA, R, D>(p, c, rb, nw, warp, bt, false, best);
        }
    }
    if constexpr (LMA) {
        if (c.lane == 0)
#pragma unroll
            for (int t = 0; t < TT; t++)
                if (t < p.T) gi_wb[warp * p.T + t] = best[t];
        __syncthreads();
        mm_lma_part(p, gi_wb, nw, blockDim.x);
    }
}

/* One pair of gi_swq_kernel (gate row i, up row i, i = 32 G + 8 k + warp) and its epilogue. */
template <int TT, int SDT, int D>
SDC_D void gi_swq_pair(const sdc_mm_params &p, const sdc_swq_out &o, const GiCtx<SDT> &c, int G, int k, int warp, int I,
                       float (&hs)[TT][32], GiBatch<SDT, 2, D> &first, bool have) {
    const int i = G * 32 + k * 8 + warp;
    const uint32_t row[2] = {(uint32_t)i, (uint32_t)(i + I)};
    float acc[2][TT];
    gi_rows<TT, SDT, 2, D>(c, row, acc, first, have);
#pragma unroll
    for (int t = 0; t < TT; t++)
        if (t < p.T && c.lane == t) {
            const float g = acc[0][t], u = acc[1][t];
            const float h = g / (1.0f + expf(-g)) * u;
            o.g[(size_t)t * (size_t)o.ld + (size_t)i] = h;
            o.u[(size_t)t * (size_t)o.ld + (size_t)i] = u;
            hs[t][k * 8 + warp] = h;
        }
}

/* Group G of gi_swq_kernel: its four pairs a warp, then the down projection's x chunk G. */
template <int TT, int SDT, int D>
SDC_D void gi_swq_group(const sdc_mm_params &p, const sdc_swq_out &o, const GiCtx<SDT> &c, int G, int warp, int I,
                        size_t txq, float (&hs)[TT][32], GiBatch<SDT, 2, D> &first, bool have) {
    gi_swq_pair<TT, SDT, D>(p, o, c, G, 0, warp, I, hs, first, have);
#pragma unroll 1
    for (int k = 1; k < 4; k++) {
        GiBatch<SDT, 2, D> bt;
        gi_swq_pair<TT, SDT, D>(p, o, c, G, k, warp, I, hs, bt, false);
    }
    __syncthreads();
    if (warp < p.T)
        mm_i8_block32(hs[warp][c.lane], c.lane, (unsigned char *)o.xq + (size_t)warp * txq, (float2 *)o.xsd + (size_t)warp * o.ncp, G);
    __syncthreads();   /* hs is the next group's */
}

/* The gate and up projections of an MLP (one matrix of 2 I rows: gate's I, then up's) with the
 * SwiGLU and the int8 preparation of the down projection's x in their epilogue: block b takes
 * the 32-row groups b, b + grid, ...; for group G warp w computes the pairs (gate row i, up row i),
 * i = 32 G + 8 k + w, k = 0..3, each pair as gi_kernel's two rows of a warp (the same per-row code,
 * so g and u are matmul's bits), then lane t writes token t's h = silu(g) * u (pointwise.cu's
 * expression) to o.g and u to o.u, and keeps h; once the group is complete warp t quantizes
 * token t's 32 values h (mm_core.cuh's mm_i8_block32) into o.xq / o.xsd, chunk G of the down
 * projection's x, as its preparation kernel would. The MLP block then needs no preparation
 * kernel for down: one launch fewer in the chain. */
template <int TT, int SDT>
__global__ void __launch_bounds__(GI_THREADS, TT <= 2 ? 3 : 2) gi_swq_kernel(const sdc_mm_params p, const sdc_swq_out o,
                                                                             const int nj, const int pre) {
    constexpr int D = GiShape<TT, 2>::D;
    __shared__ float hs[TT][32];
    const int warp = threadIdx.x >> 5;   /* 8 warps */
    const GiCtx<SDT> c = gi_ctx<SDT>(p, nj);
    const int I = p.rows >> 1, ngrp = I >> 5;
    const size_t txq = (size_t)o.ncp * 32;   /* bytes of a token's codes in o.xq */

    /* the weights are no kernel's output: the block's first group is fetched while the kernel
     * before still runs (gi_pre: its first pair) */
    GiBatch<SDT, 2, D> first;
    bool have = false;
    if ((int)blockIdx.x < ngrp) {
        const int i = blockIdx.x * 32 + warp;
        const uint32_t row[2] = {(uint32_t)i, (uint32_t)(i + I)};
        have = gi_pre<SDT, 2, D, gi_pre_regs_ok<TT, false>()>(c, row, pre, first);
    }
    sdc_grid_enter();

    /* the first group apart, so that `first` is dead before the loop */
    int G = blockIdx.x;
    if constexpr (gi_pre_regs_ok<TT, false>()) {
        if (G < ngrp) gi_swq_group<TT, SDT, D>(p, o, c, G, warp, I, txq, hs, first, have);
        G += gridDim.x;
    }
    for (; G < ngrp; G += gridDim.x) {
        GiBatch<SDT, 2, D> bt;
        gi_swq_group<TT, SDT, D>(p, o, c, G, warp, I, txq, hs, bt, false);
    }
}

typedef void (*gi_fn)(const sdc_mm_params, const int, const int, const int);

int g_rows = 0;   /* sd_cuda_gi_rows: 0 the rule of sdc_gi_plan_for, else 2 or 4 */
int g_pre = 1;    /* sd_cuda_gi_preload: the first batch loaded before the wait (gi_pre) */

template <int SDT, bool LMA> gi_fn gi_pick_tt(int TT, int rw) {
    switch (TT) {
    case 1: return gi_kernel<1, SDT, LMA, 2>;
    case 2: return gi_kernel<2, SDT, LMA, 2>;
    case 3: return gi_kernel<3, SDT, LMA, 2>;
    case 4: return rw == 4 ? gi_kernel<4, SDT, LMA, 4> : gi_kernel<4, SDT, LMA, 2>;
    case 5: return rw == 4 ? gi_kernel<5, SDT, LMA, 4> : gi_kernel<5, SDT, LMA, 2>;
    case 6: return rw == 4 ? gi_kernel<6, SDT, LMA, 4> : gi_kernel<6, SDT, LMA, 2>;
    case 8: return rw == 4 ? gi_kernel<8, SDT, LMA, 4> : gi_kernel<8, SDT, LMA, 2>;
    default: return nullptr;
    }
}
template <bool LMA> gi_fn gi_pick(int sdt, int TT, int rw) {
    switch (sdt) {
    case SDC_F32: return gi_pick_tt<SDC_F32, LMA>(TT, rw);
    case SDC_F16: return gi_pick_tt<SDC_F16, LMA>(TT, rw);
    case SDC_BF16: return gi_pick_tt<SDC_BF16, LMA>(TT, rw);
    default: return nullptr;
    }
}

} // namespace

extern "C" void sd_cuda_gi_rows(int rows) { g_rows = rows == 2 || rows == 4 ? rows : 0; }
extern "C" int sd_cuda_gi_preload(int on) {
    const int was = g_pre;
    g_pre = on ? 1 : 0;
    return was;
}

extern "C" int sdc_gi_plan_for(const sdc_mm_params *p, const sdc_dev *d, int lma, sdc_gi_plan *pl, cudaError_t *e) {
    *e = cudaSuccess;
    /* 32-bit chunk and group indices (gi_batch) */
    if ((double)p->rows * (double)p->cols / 32.0 >= 4294967296.0) return 0;
    if (p->fmt != SDC_MM_Q4I || p->T < 1 || p->T > SDC_GI_MAX_T || p->rows < 1 || !p->wvec || p->cols < 1024 ||
        p->cols % 1024 != 0)
        return 0;
    if (p->group < 32 || p->group > 1024 || (p->group & (p->group - 1)) != 0 || p->ncp != p->cols / 32) return 0;
    if (!p->xq || !p->xsd || !p->scales || !p->biases) return 0;
    const int TT = mm_gemv_tile(p->T);
    /* rows a warp from T = 4 on: 4 for LM heads (2^28 weights or more), 2 elsewhere. bench_cuda
     * on an H100 (docs/benchmarks/cuda-gemv-i4-h100-2026-12-05.md), 8B shape: 2 rows took
     * 0.69-0.96x the time of 4 on the layers' matrices at T = 4 and 8, 1.07-1.09x on the LM head */
    const int rw = g_rows ? g_rows : (double)p->rows * (double)p->cols >= 268435456.0 ? 4 : 2;
    const int R = gi_rows_a_warp(TT, rw);
    gi_fn fn = lma ? gi_pick<true>(p->sdt, TT, rw) : gi_pick<false>(p->sdt, TT, rw);
    if (!fn) return 0;
    pl->fn = (const void *)fn;
    pl->nj = p->cols / 1024;
    pl->pre = g_pre;
    const long units = (p->rows + R - 1) / R;
    return mm_launch_shape(pl->fn, units, 0, lma, p->T, LONG_MAX, d, &pl->nw, &pl->nrb, &pl->smem, &pl->grid, e);
}

extern "C" cudaError_t sdc_gi_launch(const sdc_gi_plan *pl, const sdc_mm_params *p, const sdc_dev *d) {
    return sdc_launch(d, (gi_fn)pl->fn, pl->grid, pl->nw * 32, pl->smem, *p, pl->nj, pl->nrb, pl->pre);
}

typedef void (*swq_fn)(const sdc_mm_params, const sdc_swq_out, const int, const int);

template <int SDT> swq_fn swq_pick_tt(int ti) { return ti == 0 ? gi_swq_kernel<1, SDT> : gi_swq_kernel<2, SDT>; }

extern "C" int sdc_gi_swq_plan(const sdc_mm_params *p, const sdc_dev *d, int full, sdc_gi_plan *pl, cudaError_t *e) {
    *e = cudaSuccess;
    sdc_gi_plan base;
    const int r = sdc_gi_plan_for(p, d, 0, &base, e);   /* gemv_i4.cu's conditions on the matrix */
    if (r <= 0) return r;
    if (p->nseg != 2 || p->rows % 64 != 0 || p->seg[1].row0 != p->rows / 2 || p->pre != SDC_PRE_NONE) return 0;
    /* T <= 2 only, and only where every 32-row group has a block of its own (one wave): a block
     * works through its groups one after another, so where some blocks take two the launch
     * lasts two groups' time. With `full`, only where the groups also fill 90% of that wave: a
     * block's 8 warps take its group's 64 rows four pairs at a time, so fewer groups than blocks
     * is fewer loads in flight than gi_kernel's grid gives. On an H100
     * (docs/benchmarks/cuda-h100-2026-12-06b.md): 8B shape, 384 groups in 396 blocks, classic
     * decode 1.027-1.028x; with verifies of T = 4..8 taken too (264 blocks) MTP 0.97x; 1.7B shape,
     * 192 groups, classic 0.976-0.983x. */
    if (p->T > 2) return 0;
    const int ti = p->T <= 1 ? 0 : 1;
    swq_fn fn = p->sdt == SDC_F32 ? swq_pick_tt<SDC_F32>(ti) : p->sdt == SDC_F16 ? swq_pick_tt<SDC_F16>(ti)
                                                                : swq_pick_tt<SDC_BF16>(ti);
    int per_sm = 0;
    *e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, GI_THREADS, 0);
    if (*e != cudaSuccess) return -1;
    if (per_sm < 1) return 0;
    const long ngrp = p->rows / 64;
    long g = (long)per_sm * d->n_sm;
    if (ngrp > g || (full && ngrp * 10 < g * 9)) return 0;
    g = ngrp;
    pl->fn = (const void *)fn;
    pl->nj = base.nj;
    pl->pre = base.pre;
    pl->nw = GI_THREADS / 32;
    pl->nrb = (int)ngrp;
    pl->smem = 0;
    pl->grid = (int)g;
    return 1;
}

extern "C" cudaError_t sdc_gi_swq_launch(const sdc_gi_plan *pl, const sdc_mm_params *p, const sdc_swq_out *o,
                                         const sdc_dev *d) {
    return sdc_launch(d, (swq_fn)pl->fn, pl->grid, GI_THREADS, 0, *p, *o, pl->nj, pl->pre);
}
