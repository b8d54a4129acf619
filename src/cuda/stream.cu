/* stream.cu: y (T, ldy) = x (T, ldx) . W^T for T = 1..8 with the weights streamed through shared
 * memory by bulk asynchronous copies (cp.async.bulk, sm_90), and the fused LM head + argmax for
 * those T.
 *
 * Why. At batch 1 a matmul is a stream of weight bytes, and it runs at the memory's speed only
 * when every SM keeps tens of KB of loads in flight. gemv.cu holds its loads in registers, so what
 * is in flight is bounded by registers and warps per SM (its profile: most warps stalled on the
 * loads, 0.3 eligible warps per scheduler, the 8B shape's matmuls at 2.5x their floor). Here the
 * copier warp's bulk copies put up to SDC_ST_MAX_STAGES stages (~32 KB of codes each, and their
 * scales) of a block's rows in flight at once, and the copies of the first stages are issued before the kernel waits on the
 * one before it (weights are no kernel's output: common.cuh), so they overlap its tail.
 *
 * Work split. One block per SM; block b owns the launch rows [rows b / G, rows (b + 1) / G), in
 * tiles of rt = R x nwc rows (R rows to each of nwc compute warps), each row cut into slices of
 * sc chunks (a multiple of 32 chunks; a chunk is 16 bytes, mm_core.cuh). An item is (tile,
 * slice), tile-major; item i lands in stage i mod nst. The block's last warp is the copier: for
 * each item it announces the bytes on the stage's full barrier and issues one bulk copy per row
 * (codes, and for a quantized matrix its scales and biases), after the compute warps have
 * released the stage on its empty barrier. x is staged once per block, whole (every column of
 * every token), after the wait.
 *
 * Batch invariance (matmul.cu's header states the contract). Lane l of a compute warp owns chunks
 * l, l + 32, l + 64, ... of each of its rows: slices start at multiples of 32 chunks, so walking
 * the slices in order walks the lane's chunks in ascending order. Each chunk's contribution is
 * mm_chunk's (mm_core.cuh) on the same values mm_load would give (the codes' 16 bytes, and the
 * scale and bias converted exactly from their dtype), and the lanes are summed by the xor
 * butterfly m = 16, ..., 1: the tiled kernel's arithmetic exactly. So a row has the same bits
 * here at any T <= 8, R, nwc, slice, stage count or grid as from the other kernels at any T, and
 * the fused LM head sees exactly the logits matmul writes. */
#include "cuda/stream.h"
#include "cuda/mm_core.cuh"

namespace {

constexpr int ST_NWC = 8;                         /* compute warps */
constexpr int ST_THREADS = 32 * (ST_NWC + 1);     /* and the copier */
constexpr int ST_HEAD = 1024;                     /* barriers (256 bytes) and the LM head's bests */
constexpr int ST_STAGE_TARGET = 32 << 10;         /* bytes of codes per stage aimed at */

template <int TT> struct StShape {
    static constexpr int R = TT <= 2 ? 2 : 4;     /* rows per compute warp */
};

/* ---- mbarriers and bulk copies (PTX, sm_90) ---- */
SDC_D uint32_t st_saddr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
SDC_D void st_bar_init(uint64_t *b, uint32_t n) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(st_saddr(b)), "r"(n) : "memory");
}
/* one arrival that also expects `bytes` of copies to complete on the barrier's current phase */
SDC_D void st_bar_expect(uint64_t *b, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(st_saddr(b)), "r"(bytes) : "memory");
}
SDC_D void st_bar_arrive(uint64_t *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(st_saddr(b)) : "memory");
}
/* returns once the phase of parity `par` has completed */
SDC_D void st_bar_wait(uint64_t *b, uint32_t par) {
    uint32_t done;
    do {
        asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n}"
                     : "=r"(done)
                     : "r"(st_saddr(b)), "r"(par)
                     : "memory");
    } while (!done);
}
/* bytes (a multiple of 16, both addresses 16-byte aligned) from global to shared memory,
 * completing on barrier b */
SDC_D void st_copy(void *dst, const void *src, uint32_t bytes, uint64_t *b) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     st_saddr(dst)),
                 "l"(src), "r"(bytes), "r"(st_saddr(b))
                 : "memory");
}

/* A scale or bias of dtype sdt in shared memory, converted exactly (sdc_wordf's values). */
SDC_D float st_sf(const unsigned char *a, int sdt) {
    if (sdt == SDC_F32) return *(const float *)a;
    const unsigned short h = *(const unsigned short *)a;
    return sdt == SDC_BF16 ? __uint_as_float((uint32_t)h << 16) : __half2float(__ushort_as_half(h));
}

/* The block's rows and a launch's fixed geometry. */
struct StGeo {
    size_t rowbytes;
    int ngroups, es, nch, r_lo, r_hi, nitems;
};

/* The copier warp (every lane) issues item i into its stage. */
template <int FMT>
SDC_D void st_issue(const sdc_mm_params &p, const sdc_st_plan &pl, const StGeo &g, unsigned char *smem, uint64_t *full,
                    int i, int lane) {
    using F = Fmt<FMT>;
    const int s = i % pl.nst, tr = i / pl.nsl, sl = i - tr * pl.nsl;
    const int row0 = g.r_lo + tr * pl.rt, nr = min(pl.rt, g.r_hi - row0);
    const int c0 = sl * pl.sc, ncs = min(pl.sc, g.nch - c0);
    const uint32_t wb = (uint32_t)ncs * 16u;
    const uint32_t sb = F::QUANT ? (uint32_t)(ncs * F::E / p.group * g.es) : 0u;
    unsigned char *st = smem + pl.stoff + (size_t)s * pl.rt * (pl.stw + 2 * pl.sts);
    if (lane == 0) st_bar_expect(&full[s], (uint32_t)nr * (wb + 2u * sb));
    __syncwarp();
    for (int r = lane; r < nr; r += 32) {
        const size_t row = (size_t)(row0 + r);
        st_copy(st + (size_t)r * pl.stw, (const unsigned char *)p.w + row * g.rowbytes + (size_t)c0 * 16, wb, &full[s]);
        if constexpr (F::QUANT) {
            const size_t off = (row * (size_t)g.ngroups + (size_t)(c0 * F::E / p.group)) * (size_t)g.es;
            st_copy(st + (size_t)pl.rt * pl.stw + (size_t)r * pl.sts, (const unsigned char *)p.scales + off, sb, &full[s]);
            st_copy(st + (size_t)pl.rt * (pl.stw + pl.sts) + (size_t)r * pl.sts, (const unsigned char *)p.biases + off, sb,
                    &full[s]);
        }
    }
}

/* Chunk j (of the slice) of local rows lr from a landed stage: what mm_load reads from memory. */
template <int FMT, int R>
SDC_D void st_load(const sdc_mm_params &p, const sdc_st_plan &pl, const unsigned char *st, int es, const int (&lr)[R],
                   int j, Chunk<R> &k) {
    using F = Fmt<FMT>;
#pragma unroll
    for (int r = 0; r < R; r++) k.w[r] = *(const uint4 *)(st + (size_t)lr[r] * pl.stw + (size_t)j * 16);
    if constexpr (F::QUANT) {
        const int go = (j * F::E) / p.group * es;   /* a slice starts at a group boundary */
        const unsigned char *ss = st + (size_t)pl.rt * pl.stw, *sbi = ss + (size_t)pl.rt * pl.sts;
#pragma unroll
        for (int r = 0; r < R; r++) {
            k.s[r] = st_sf(ss + (size_t)lr[r] * pl.sts + go, p.sdt);
            k.b[r] = st_sf(sbi + (size_t)lr[r] * pl.sts + go, p.sdt);
        }
    }
}

template <int FMT, int TT, bool LMA>
__global__ void __launch_bounds__(ST_THREADS, 1) st_kernel(const sdc_mm_params p, const sdc_st_plan pl) {
    using F = Fmt<FMT>;
    constexpr int R = StShape<TT>::R, D = 2;
    extern __shared__ __align__(128) unsigned char st_smem[];
    uint64_t *full = (uint64_t *)st_smem, *empty = full + SDC_ST_MAX_STAGES;
    sdc_best *wb = (sdc_best *)(st_smem + 256);   /* LMA: (ST_NWC, T) */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    StGeo g;
    g.rowbytes = F::QUANT ? (size_t)p.cols * F::BITS / 8 : (size_t)p.cols * F::ES;
    g.ngroups = F::QUANT ? p.cols / p.group : 0;
    g.es = p.sdt == SDC_F32 ? 4 : 2;
    g.nch = (p.cols + F::E - 1) / F::E;
    g.r_lo = (int)((long long)p.rows * blockIdx.x / gridDim.x);
    g.r_hi = (int)((long long)p.rows * (blockIdx.x + 1) / gridDim.x);
    g.nitems = (g.r_hi - g.r_lo + pl.rt - 1) / pl.rt * pl.nsl;

    if (threadIdx.x == 0) {
        for (int s = 0; s < pl.nst; s++) {
            st_bar_init(&full[s], 1);
            st_bar_init(&empty[s], ST_NWC);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    /* the first stages' weights before the wait: no kernel writes them */
    const int npre = min(g.nitems, pl.nst);
    if (warp == ST_NWC)
        for (int i = 0; i < npre; i++) st_issue<FMT>(p, pl, g, st_smem, full, i, lane);
    sdc_grid_enter();

    /* x, whole, for TT tokens (zeros past T) */
    float4 *xs = (float4 *)(st_smem + pl.xoff);
    float *sx = (float *)(xs + TT * pl.tile_ch * F::XG);
    if constexpr (F::I8) {
        const int ng = pl.tile_ch * F::XG;   /* tile_ch == p.ncp: the prepared rows verbatim */
        for (int i = threadIdx.x; i < TT * ng; i += blockDim.x)
            ((uint4 *)xs)[i] = i < p.T * ng ? __ldg((const uint4 *)p.xq + i) : make_uint4(0u, 0u, 0u, 0u);
        for (int i = threadIdx.x; i < TT * pl.tile_ch; i += blockDim.x)
            ((float2 *)sx)[i] = i < p.T * pl.tile_ch ? __ldg((const float2 *)p.xsd + i) : make_float2(0.f, 0.f);
        __syncthreads();
    } else {
        mm_stage<FMT, TT>(p, xs, sx, 0, 0, pl.tile_ch);
        __syncthreads();
    }

    if (warp == ST_NWC) {   /* the copier: the remaining items, each once its stage is released */
        for (int i = npre; i < g.nitems; i++) {
            st_bar_wait(&empty[i % pl.nst], (uint32_t)((i / pl.nst - 1) & 1));
            st_issue<FMT>(p, pl, g, st_smem, full, i, lane);
        }
        return;
    }

    const int xt4 = pl.tile_ch * F::XG;
    sdc_best best[TT];   /* LMA: lane 0's best (logit, row) per token over the warp's rows */
#pragma unroll
    for (int t = 0; t < TT; t++) best[t] = sdc_best_none();
    float acc[R][TT];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int t = 0; t < TT; t++) acc[r][t] = 0.0f;

    for (int i = 0; i < g.nitems; i++) {
        const int s = i % pl.nst, tr = i / pl.nsl, sl = i - tr * pl.nsl;
        const int row0 = g.r_lo + tr * pl.rt, nr = min(pl.rt, g.r_hi - row0), lr0 = warp * R;
        const bool active = lr0 < nr;
        st_bar_wait(&full[s], (uint32_t)((i / pl.nst) & 1));
        if (active) {
            const unsigned char *st = st_smem + pl.stoff + (size_t)s * pl.rt * (pl.stw + 2 * pl.sts);
            const int c0 = sl * pl.sc, ncs = min(pl.sc, g.nch - c0), nk = (ncs + 31) >> 5;
            int lr[R];
#pragma unroll
            for (int r = 0; r < R; r++) lr[r] = min(lr0 + r, nr - 1);   /* past the tile's rows: read, never stored */
            for (int k0 = 0; k0 < nk; k0 += D) {
                Chunk<R> ch[D];
#pragma unroll
                for (int j = 0; j < D; j++) {
                    const int c = lane + ((k0 + j) << 5);
                    if (c < ncs) st_load<FMT, R>(p, pl, st, g.es, lr, c, ch[j]);
                }
#pragma unroll
                for (int j = 0; j < D; j++) {
                    const int c = lane + ((k0 + j) << 5);
                    if (c < ncs) mm_chunk<FMT, TT, R>(ch[j], c0 + c, xs, sx, xt4, pl.tile_ch, acc);
                }
            }
        }
        __syncwarp();
        if (lane == 0) st_bar_arrive(&empty[s]);   /* this warp is done with the stage */
        if (sl == pl.nsl - 1 && active) {          /* the tile's rows are complete */
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int t = 0; t < TT; t++) acc[r][t] = sdc_warp_sum(acc[r][t]);
            if (lane == 0) {
#pragma unroll
                for (int r = 0; r < R; r++) {
                    const int rr = row0 + lr0 + r;
                    if (lr0 + r >= nr) continue;
#pragma unroll
                    for (int t = 0; t < TT; t++) {
                        if (t >= p.T) continue;
                        if constexpr (LMA) sdc_best_offer(&best[t], acc[r][t], rr);
                        else mm_store(p, rr, t, acc[r][t]);
                    }
                }
            }
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int t = 0; t < TT; t++) acc[r][t] = 0.0f;
        }
    }
    if constexpr (LMA) {
        if (lane == 0)
#pragma unroll
            for (int t = 0; t < TT; t++)
                if (t < p.T) wb[warp * p.T + t] = best[t];
        asm volatile("bar.sync 1, %0;" ::"r"(ST_NWC * 32) : "memory");   /* the compute warps only */
        mm_lma_part(p, wb, ST_NWC, ST_NWC * 32);
    }
}

typedef void (*st_fn)(const sdc_mm_params, const sdc_st_plan);

template <int FMT, bool LMA> st_fn st_pick_tt(int ti) {
    switch (ti) {
    case 0: return st_kernel<FMT, 1, LMA>;
    case 1: return st_kernel<FMT, 2, LMA>;
    case 2: return st_kernel<FMT, 4, LMA>;
    default: return st_kernel<FMT, 8, LMA>;
    }
}
template <bool LMA> st_fn st_pick(int fmt, int ti) {
#define PICK(F) st_pick_tt<F, LMA>(ti)
    SDC_MM_FMT_SWITCH(fmt, PICK)
#undef PICK
}

int g_cap_blocks = 0, g_cap_stages = 0;   /* sd_cuda_matmul_stream_cap (tests) */

} // namespace

extern "C" void sd_cuda_matmul_stream_cap(int blocks, int stages) {
    g_cap_blocks = blocks > 0 ? blocks : 0;
    g_cap_stages = stages >= 2 ? stages : 0;
}

extern "C" cudaError_t sdc_st_init(int bytes) {
    for (int lma = 0; lma < 2; lma++)
        for (int fmt = 0; fmt < SDC_MM_NFMT; fmt++)
            for (int ti = 0; ti < 4; ti++) {
                st_fn fn = lma ? st_pick<true>(fmt, ti) : st_pick<false>(fmt, ti);
                cudaError_t e = cudaFuncSetAttribute((const void *)fn, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
                if (e != cudaSuccess) return e;
            }
    return cudaSuccess;
}

extern "C" int sdc_st_plan_for(const sdc_mm_params *p, const sdc_dev *d, int lma, int bytes, sdc_st_plan *pl,
                               cudaError_t *e) {
    *e = cudaSuccess;
    if (p->T < 1 || p->T > SDC_ST_MAX_T || p->rows < 1 || !p->wvec) return 0;
    if (lma && (long)ST_NWC * p->T * (long)sizeof(sdc_best) > ST_HEAD - 256) return 0;
    const int fmt = p->fmt;
    const bool quant = sdc_mm_quant(fmt), i8 = sdc_mm_i8(fmt);
    const int E = sdc_mm_chunk_cols(fmt), nch = (p->cols + E - 1) / E;
    if (nch < 32) return 0;   /* short rows: gemv.cu's narrower lane groups suit them */
    const int es = p->sdt == SDC_F32 ? 4 : 2;
    if (((uintptr_t)p->w & 15u) != 0) return 0;   /* wvec: rows of whole 16-byte chunks */
    if (quant && (((uintptr_t)p->scales | (uintptr_t)p->biases) & 15u) != 0) return 0;
    if (quant && (p->cols / p->group * es) % 16 != 0) return 0;   /* each row's scales 16-byte aligned */
    const int ti = p->T <= 1 ? 0 : p->T <= 2 ? 1 : p->T <= 4 ? 2 : 3, TT = 1 << ti, R = TT <= 2 ? 2 : 4;
    pl->nwc = ST_NWC;
    pl->rt = R * ST_NWC;
    /* slices: whole multiples of 32 chunks, about ST_STAGE_TARGET bytes of codes per stage */
    int k32 = ST_STAGE_TARGET / (pl->rt * 512);
    if (k32 < 1) k32 = 1;
    const int full32 = (nch + 31) / 32;
    if (k32 > full32) k32 = full32;
    pl->sc = 32 * k32;
    if (quant) {   /* every slice starts at a group boundary, its scales a whole number of 16-byte units */
        while (pl->sc < 32 * full32 && ((pl->sc * E) % p->group != 0 || (pl->sc * E / p->group * es) % 16 != 0))
            pl->sc += 32;
        if ((pl->sc * E) % p->group != 0) return 0;
        if (pl->sc < nch && (pl->sc * E / p->group * es) % 16 != 0) return 0;
    }
    pl->nsl = (nch + pl->sc - 1) / pl->sc;
    pl->stw = pl->sc * 16;
    pl->sts = quant ? (pl->sc * E / p->group * es + 15) & ~15 : 0;   /* a row's stride in the stage */
    pl->tile_ch = i8 ? p->ncp : (nch + 7) & ~7;
    if (i8 && (!p->xq || !p->xsd || p->ncp != sdc_mm_ncp(fmt, p->cols))) return 0;
    pl->xoff = ST_HEAD;
    const long xbytes = (long)TT * pl->tile_ch * sdc_mm_stage_bytes(fmt);
    pl->stoff = (int)((ST_HEAD + xbytes + 127) & ~127L);
    const long stage = (long)pl->rt * (pl->stw + 2L * pl->sts);
    long nst = ((long)bytes - pl->stoff) / stage;
    if (nst > SDC_ST_MAX_STAGES) nst = SDC_ST_MAX_STAGES;
    if (nst < 2) return 0;
    if (g_cap_stages && nst > g_cap_stages) nst = g_cap_stages;
    pl->nst = (int)nst;
    pl->smem = (int)(pl->stoff + nst * stage);
    st_fn fn = lma ? st_pick<true>(fmt, ti) : st_pick<false>(fmt, ti);
    pl->fn = (const void *)fn;
    int per_sm = 0;
    *e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, ST_THREADS, (size_t)pl->smem);
    if (*e != cudaSuccess) return -1;
    if (per_sm < 1) return 0;
    long grid = d->n_sm;
    const long units = (p->rows + R - 1) / R;
    if (grid > units) grid = units;
    if (g_cap_blocks && grid > g_cap_blocks) grid = g_cap_blocks;
    if (lma && grid > SDC_LMA_MAX_GRID) grid = SDC_LMA_MAX_GRID;
    pl->grid = (int)grid;
    return 1;
}

extern "C" cudaError_t sdc_st_launch(const sdc_st_plan *pl, const sdc_mm_params *p, const sdc_dev *d) {
    return sdc_launch(d, (st_fn)pl->fn, pl->grid, ST_THREADS, pl->smem, *p, *pl);
}
