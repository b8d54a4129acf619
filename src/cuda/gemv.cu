/* gemv.cu: y (T, ldy) = x (T, ldx) . W^T for T = 1..8 (decode, drafter steps, short verifies),
 * and the fused LM head + argmax for those T, when the T rows of x fit in shared memory whole.
 *
 * Why a kernel of its own. At batch 1 a matmul is a stream of weight bytes: it runs at the
 * memory's speed only when every SM keeps tens of KB of loads in flight. Here each block stages
 * x once (all T tokens, every column) and then walks its warps' rows grid-stride, so staging is
 * paid once per block, not once per few rows. A warp carries R rows at a time (2 for T <= 2, 4
 * above, so a staged x value read from shared memory serves R rows) and issues the loads of D
 * chunks of all R rows (R * D = 8 sixteen-byte loads per lane, plus their scales and biases)
 * before it uses any, then computes them; with ~24 warps per SM (about 80 registers each at
 * T = 1) half of them waiting on memory keep ~50 KB in flight per SM.
 *
 * Batch invariance (matmul.cu's header states the contract). A row's lane group has LPR lanes,
 * lane l of it owning chunks l, l + LPR, l + 2 LPR, ... in ascending order, each chunk's
 * contribution computed by mm_chunk (mm_core.cuh), then the group's lanes summed by the xor
 * butterfly m = LPR/2, ..., 1. With LPR = 32 that is matmul.cu's tiled kernel exactly. A row of
 * nch <= 16 chunks may take LPR = 16 (or 8 when nch <= 8): lane l still owns chunk l only, and in
 * the 32-lane butterfly the lanes >= nch hold +0 (an accumulator starts at +0 and fmaf never
 * turns a +0 into -0: an exact zero sum of opposite signs rounds to +0), so its first steps add
 * +0 to each lane of the group (v + 0 == v for every v that is not -0) and the rest is the
 * LPR-lane butterfly. LPR depends on cols and the format alone. So every row gets the same bits
 * from this kernel at any T <= 8, R, D or grid, as from the tiled kernel at any T, and the fused
 * LM head sees exactly the logits matmul writes. */
#include "cuda/gemv.h"
#include "cuda/mm_core.cuh"

namespace {

constexpr int GV_THREADS = 256;   /* largest block */

/* rows a lane group carries (R) and chunks loaded per batch (D), per token tile; NARROW (T = 1,
 * quantized rows of at most 2 chunks a lane in a matrix of many rows, e.g. the embedded model's
 * 384-column LM head): 8 rows of one chunk each, so a batch still issues 8 loads a lane */
template <int TT, bool NARROW> struct GvShape {
    static constexpr int R = NARROW ? 8 : TT <= 2 ? 2 : 4, D = NARROW ? 1 : TT <= 2 ? 4 : 2;
};

/* int8 (reading x from global memory, its loads hoisted with the weights') at most 85 registers,
 * 3 blocks of 256 a SM, up to 2 tokens: at 122 registers only 16 warps stayed resident to hide the
 * latency. From 3 tokens on 85 registers spilled the accumulators (ptxas, sm_90: 100 to 852
 * bytes a thread at T = 3 to 8), so those take 128 (2 blocks), as gemv_i4.cu's do. */
template <int FMT, int TT, bool LMA, bool NARROW>
__global__ void __launch_bounds__(GV_THREADS, Fmt<FMT>::I8 && !NARROW ? (TT <= 2 ? 3 : 2) : 1)
    gv_kernel(const sdc_mm_params p, const int lg, const int tile_ch, const int nrb) {
    using F = Fmt<FMT>;
    constexpr int E = F::E, R = GvShape<TT, NARROW>::R, D = GvShape<TT, NARROW>::D;
    extern __shared__ float4 gv_smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int lpr = 1 << lg, ll = lane & (lpr - 1), sub = lane >> lg, urows = R << (5 - lg);
    const int nch = (p.cols + E - 1) / E, xt4 = tile_ch * F::XG, nk = (nch + lpr - 1) >> lg;
    /* x: staged in shared memory, or (int8) read where the preparation kernel left it, which
     * costs the block no staging pass and no barrier before its first weight load */
    const float4 *xs = gv_smem;
    const float *sx = (const float *)(gv_smem + TT * xt4);
    sdc_best *wb = (sdc_best *)(sx + TT * tile_ch * F::SF);   /* LMA: (nw, T) */
    if constexpr (F::I8) {
        xs = (const float4 *)p.xq;   /* tile_ch == p.ncp */
        sx = (const float *)p.xsd;
        wb = (sdc_best *)gv_smem;
    }
    const size_t rowbytes = F::QUANT ? (size_t)p.cols * F::BITS / 8 : (size_t)p.cols * F::ES;
    const int ngroups = F::QUANT ? p.cols / p.group : 0;

    /* The weights are no kernel's output: the first batch of this block's rows is sent towards
     * L2 while the kernel before it still runs (common.cuh, programmatic dependent launch). */
    if (p.wvec && blockIdx.x < nrb) {
        const int r0 = (blockIdx.x * nw + warp) * urows + sub * R;
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int j = 0; j < D; j++) {
                const int c = ll + (j << lg);
                if (c < nch) {
                    const char *a = (const char *)p.w + (size_t)min(r0 + r, p.rows - 1) * rowbytes + (size_t)c * 16;
                    asm volatile("prefetch.global.L2 [%0];" ::"l"(a));
                }
            }
    }
    sdc_grid_enter();

    if constexpr (!F::I8) {
        mm_stage<FMT, TT>(p, gv_smem, (float *)(gv_smem + TT * xt4), 0, 0, tile_ch);
        __syncthreads();
    }

    sdc_best best[TT];   /* LMA: lane 0's best (logit, row) per token over the warp's rows */
#pragma unroll
    for (int t = 0; t < TT; t++) best[t] = sdc_best_none();

    for (int rb = blockIdx.x; rb < nrb; rb += gridDim.x) {
        const int u0 = (rb * nw + warp) * urows, r0 = u0 + sub * R;
        int row[R];
#pragma unroll
        for (int r = 0; r < R; r++) row[r] = min(r0 + r, p.rows - 1);   /* past the end: loaded, never stored */
        float acc[R][TT];
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int t = 0; t < TT; t++) acc[r][t] = 0.0f;
        for (int k0 = 0; k0 < nk; k0 += D) {
            Chunk<R> ch[D];
#pragma unroll
            for (int j = 0; j < D; j++) {   /* every load of the batch first */
                const int c = ll + ((k0 + j) << lg);
                if (c < nch) mm_load<FMT, true>(p, rowbytes, ngroups, row, c, ch[j]);
            }
            if (((k0 + D) << lg) <= nch) {   /* every lane has all D chunks: one basic block, chains interleave */
#pragma unroll
                for (int j = 0; j < D; j++) mm_chunk<FMT, TT, R>(ch[j], ll + ((k0 + j) << lg), xs, sx, xt4, tile_ch, acc);
            } else {
#pragma unroll
                for (int j = 0; j < D; j++) {
                    const int c = ll + ((k0 + j) << lg);
                    if (c < nch) mm_chunk<FMT, TT, R>(ch[j], c, xs, sx, xt4, tile_ch, acc);
                }
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int t = 0; t < TT; t++)
                for (int m = lpr >> 1; m >= 1; m >>= 1) acc[r][t] = acc[r][t] + __shfl_xor_sync(0xffffffffu, acc[r][t], m);
        if constexpr (LMA) {
            for (int s = 0; s < (32 >> lg); s++)
#pragma unroll
                for (int r = 0; r < R; r++)
#pragma unroll
                    for (int t = 0; t < TT; t++) {
                        const float v = __shfl_sync(0xffffffffu, acc[r][t], s << lg);
                        const int rr = u0 + s * R + r;
                        if (lane == 0 && rr < p.rows && t < p.T) sdc_best_offer(&best[t], v, rr);
                    }
        } else if (ll == 0) {
#pragma unroll
            for (int r = 0; r < R; r++) {
                const int rr = r0 + r;
                if (rr >= p.rows) continue;
#pragma unroll
                for (int t = 0; t < TT; t++)
                    if (t < p.T) mm_store(p, rr, t, acc[r][t]);
            }
        }
    }
    if constexpr (LMA) {
        if (lane == 0)
#pragma unroll
            for (int t = 0; t < TT; t++)
                if (t < p.T) wb[warp * p.T + t] = best[t];
        __syncthreads();
        mm_lma_part(p, wb, nw, blockDim.x);
    }
}

typedef void (*gv_fn)(const sdc_mm_params, const int, const int, const int);

/* ti 0..6 index the token tiles 1, 2, 3, 4, 5, 6, 8 (mm_gemv_tile, mm_core.cuh), ti GV_NARROW
 * the single-token NARROW form. */
constexpr int GV_NARROW = 7;
int gv_ti(int TT) { return TT <= 6 ? TT - 1 : 6; }

template <int FMT, bool LMA> gv_fn gv_pick_tt(int ti) {
    switch (ti) {
    case 0: return gv_kernel<FMT, 1, LMA, false>;
    case 1: return gv_kernel<FMT, 2, LMA, false>;
    case 2: return gv_kernel<FMT, 3, LMA, false>;
    case 3: return gv_kernel<FMT, 4, LMA, false>;
    case 4: return gv_kernel<FMT, 5, LMA, false>;
    case 5: return gv_kernel<FMT, 6, LMA, false>;
    case 6: return gv_kernel<FMT, 8, LMA, false>;
    default:
        if constexpr (Fmt<FMT>::QUANT) return gv_kernel<FMT, 1, LMA, true>;
        else return nullptr;   /* dense rows take the plain T = 1 kernel */
    }
}
template <bool LMA> gv_fn gv_pick(int fmt, int ti) {
#define PICK(F) gv_pick_tt<F, LMA>(ti)
    SDC_MM_FMT_SWITCH(fmt, PICK)
#undef PICK
}

} // namespace

extern "C" cudaError_t sdc_gv_init(int bytes) {
    for (int lma = 0; lma < 2; lma++)
        for (int fmt = 0; fmt < SDC_MM_NFMT; fmt++)
            for (int ti = 0; ti <= GV_NARROW; ti++) {
                gv_fn fn = lma ? gv_pick<true>(fmt, ti) : gv_pick<false>(fmt, ti);
                if (!fn) continue;
                cudaError_t e = cudaFuncSetAttribute((const void *)fn, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
                if (e != cudaSuccess) return e;
            }
    return cudaSuccess;
}

extern "C" int sdc_gv_plan_for(const sdc_mm_params *p, const sdc_dev *d, int lma, int bytes, sdc_gv_plan *pl,
                               cudaError_t *e) {
    *e = cudaSuccess;
    if (p->T < 1 || p->T > SDC_GV_MAX_T || p->rows < 1) return 0;
    const bool quant = sdc_mm_quant(p->fmt);
    const int E = sdc_mm_chunk_cols(p->fmt), nch = (p->cols + E - 1) / E;
    const int TT = mm_gemv_tile(p->T), ti0 = gv_ti(TT);
    pl->lg = nch <= 8 ? 3 : nch <= 16 ? 4 : 5;   /* from cols and the format only */
    /* NARROW only for the many-row LM heads: on small matrices its 8-row units left too few warps
     * (embedded q/k/v/o at T = 1 measured 7-9 us, the plain kernel 4.4-4.7 us at T = 2) */
    const bool narrow = quant && TT == 1 && nch <= 2 << pl->lg && p->rows >= 16384;
    const int ti = narrow ? GV_NARROW : ti0, R = narrow ? 8 : TT <= 2 ? 2 : 4;
    pl->tile_ch = (nch + 7) & ~7;                 /* granule rows a multiple of 8: the swizzle stays inside */
    const bool i8 = sdc_mm_i8(p->fmt);
    if (i8) pl->tile_ch = p->ncp;                 /* x is read from the prepared rows: nothing staged */
    const long urows = (long)R << (5 - pl->lg), units = (p->rows + urows - 1) / urows;
    gv_fn fn = lma ? gv_pick<true>(p->fmt, ti) : gv_pick<false>(p->fmt, ti);
    if (!fn) return 0;
    pl->fn = (const void *)fn;
    /* 8 or 4 warps a block (at least 4: they stage x); the x of large T x cols limits blocks per SM */
    const long smem0 = i8 ? 0 : (long)TT * pl->tile_ch * sdc_mm_stage_bytes(p->fmt);
    return mm_launch_shape(pl->fn, units, smem0, lma, p->T, bytes, d, &pl->nw, &pl->nrb, &pl->smem, &pl->grid, e);
}

extern "C" cudaError_t sdc_gv_launch(const sdc_gv_plan *pl, const sdc_mm_params *p, const sdc_dev *d) {
    return sdc_launch(d, (gv_fn)pl->fn, pl->grid, pl->nw * 32, pl->smem, *p, pl->lg, pl->tile_ch, pl->nrb);
}
