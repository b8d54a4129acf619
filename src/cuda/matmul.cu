/* matmul.cu: y (T, ldy) = x (T, ldx) . W^T for dense (f32 / f16 / bf16) and affine 4- / 8-bit
 * W (MLX layout, tensor.h), and the fused LM head + argmax built from the same per-row code.
 *
 * Work split. A warp owns MM_R = 4 consecutive rows; a block holds nw warps (1..8, chosen from
 * the row count so the grid fills the GPU) and walks row blocks grid-stride. A "chunk" is 16
 * bytes of one row (E columns: 32 for 4-bit, 16 for 8-bit, 8 for 16-bit, 4 for f32); lane l owns
 * chunks l, l+32, l+64, ... of each of its rows, loaded with one 16-byte load each (a warp reads
 * 512 contiguous bytes per row), one chunk ahead of the arithmetic. Tokens are applied in
 * register tiles of TT = 1, 2, 4 or 8 (the smallest power of two >= T, 8 past that; larger T
 * loops over tiles, re-reading the block's rows from L1/L2), so each weight is loaded and
 * dequantized once per tile and used for all TT tokens.
 *
 * Activations. The block stages x (TT tokens x a column tile) in shared memory as float4
 * granules, swizzled (granule f at f ^ ((f >> 3) & 7)) so the warp's 16-byte reads, 64 or 128
 * bytes apart, hit distinct banks. When the whole row fits (T <= 8 and the tile covers every
 * column) it is staged once per block and reused for every row block.
 *
 * Quantized arithmetic. A chunk lies inside one quantization group (group >= 32, cols % group
 * == 0). Per (row, token) and chunk: dq = sum_j q_j x_j (an fmaf chain over the chunk's columns in
 * order), then acc = fmaf(scale, dq, acc) and acc = fmaf(bias, sx, acc) with sx = sum_j x_j (the
 * chunk's x sum, staged once per block). A code is turned into a float with one mask-and-or and
 * one subtraction: (v & (mask << p)) | 0x4B000000 reads as 2^23 + q 2^p, so subtracting 2^23
 * gives q 2^p exactly; the staged x of that column was multiplied by 2^-p (exact), so
 * fmaf(q 2^p, x 2^-p, dq) == fmaf(q, x, dq) bit for bit. p is the code's bit position (4k for
 * the first five nibbles of a word, 4k-12 for the rest taken from the word shifted by 12; 8k /
 * 8k-16 for bytes), which keeps every code below bit 20 of the mantissa.
 * Dense arithmetic: acc = fmaf(w_j, x_j, acc) over the chunk's columns in order.
 *
 * Int8 activations (precision int8, formats Q4I / Q8I, for the matrices sd_i8_applies takes).
 * A preparation kernel quantizes each token's x once per call, 32 columns to a block exactly as
 * the CPU does (mm_core.cuh), into scratch. Per (row, token) and chunk: I = sum_j q_j xq_j, an
 * integer dot product (dp4a, exact in any order), then acc = fmaf(scale, I * d, acc) and acc =
 * fmaf(bias, d * X, acc) with d the block's scale and X the sum of the chunk's codes: four float
 * operations per 32 (4-bit) or 16 (8-bit) weights, where the f32 path does two per weight. The
 * lane ownership and the butterfly are the f32 path's, so the contract below holds unchanged.
 *
 * Batch invariance. For one (row, token) the value is: per lane, the chunks it owns in ascending
 * order with the fixed per-chunk arithmetic above, then the lanes summed by a fixed xor butterfly.
 * That depends only on cols and the format: never on T, TT, the tile widths, nw, the grid or
 * the other rows and tokens (each token's sums are separate register chains; the compiler may
 * not reassociate them and --fmad=false keeps it from contracting anything). Every TT
 * instantiation therefore gives every row the same bits, and lm_argmax, which runs this same
 * per-row code, sees exactly the logits matmul writes.
 *
 * Which kernel. Int8 calls of T <= 8 on 4-bit rows of whole 1024-column runs go to gemv_i4.cu's
 * lean kernel (the Qwen3 shapes from 1.7B up); other calls of T <= 8 whose x fits in shared
 * memory whole to gemv.cu's kernel (made for memory-level parallelism at batch 1), the rest to
 * the tiled kernel here; all run the per-row code of mm_core.cuh with the same lane ownership,
 * so the choice never changes a bit (gemv.cu's header has the argument for its shorter lane
 * groups). Before them, calls of T <= 8 with rows of at least 32 chunks may go to stream.cu's
 * kernel, which streams the weights through shared memory and runs the same per-row code
 * (sd_cuda_matmul_kernels, cuda_backend.h: off by default, measured slower on an H100).
 *
 * The fused LM head keeps, per warp and token, the best (logit, row) in shared memory, then per
 * block; the blocks' bests go to p->part and a second small kernel (argmax.cu) reduces them.
 * An argmax is exact (a lexicographic maximum), so the partition does not matter. */
#include "cuda/matmul.h"
#include "cuda/argmax.h"
#include "cuda/gemv.h"
#include "cuda/gemv_i4.h"
#include "cuda/mma_i4.h"
#include "cuda/stream.h"
#include "cuda/cuda_backend.h"
#include "cuda/mm_core.cuh"
#include "cuda/rms_core.cuh"

namespace {

constexpr int MM_R = 4;               /* rows per warp */
constexpr int MM_THREADS = 256;       /* largest block */
constexpr int MM_LMA_MAX_GRID = SDC_LMA_MAX_GRID; /* blocks of the fused LM head (bounds its scratch) */
constexpr int MM_LMA_MAX_T = SDC_LMA_MAX_T;       /* tokens of one fused LM head call (per-warp bests in smem) */

/* tile_ch: chunks per staged column tile (a multiple of 32); nrb: row blocks (nw * MM_R rows). */
template <int FMT, int TT, bool LMA>
__global__ void __launch_bounds__(MM_THREADS) mm_kernel(const sdc_mm_params p, const int tile_ch, const int nrb) {
    sdc_grid_enter();
    using F = Fmt<FMT>;
    constexpr int E = F::E;
    extern __shared__ float4 mm_smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int nch = (p.cols + E - 1) / E, xt4 = tile_ch * F::XG;
    float4 *xs = mm_smem;
    float *sx = (float *)(mm_smem + TT * xt4);
    sdc_best *wb = (sdc_best *)(sx + TT * tile_ch * F::SF);   /* LMA: (nw, T) */
    const int ntile = (nch + tile_ch - 1) / tile_ch;
    const bool once = ntile == 1 && p.T <= TT;
    const size_t rowbytes = F::QUANT ? (size_t)p.cols * F::BITS / 8 : (size_t)p.cols * F::ES;
    const int ngroups = F::QUANT ? p.cols / p.group : 0;

    if (LMA)
        for (int i = threadIdx.x; i < nw * p.T; i += blockDim.x) wb[i] = sdc_best_none();
    if (once) mm_stage<FMT, TT>(p, xs, sx, 0, 0, tile_ch);
    __syncthreads();

    for (int rb = blockIdx.x; rb < nrb; rb += gridDim.x) {
        const int r0 = (rb * nw + warp) * MM_R;
        int row[MM_R];
#pragma unroll
        for (int r = 0; r < MM_R; r++) row[r] = min(r0 + r, p.rows - 1);   /* past the end: loaded, never stored */
        for (int tb = 0; tb < p.T; tb += TT) {
            float acc[MM_R][TT];
#pragma unroll
            for (int r = 0; r < MM_R; r++)
#pragma unroll
                for (int t = 0; t < TT; t++) acc[r][t] = 0.0f;
            for (int ti = 0; ti < ntile; ti++) {
                const int c_lo = ti * tile_ch, c_hi = min(nch, c_lo + tile_ch);
                int c = c_lo + lane;
                Chunk<MM_R> cur, nxt;
                if (c < c_hi) mm_load<FMT, false>(p, rowbytes, ngroups, row, c, cur);
                if (!once) {
                    __syncthreads();   /* every warp is done with the previous tile */
                    mm_stage<FMT, TT>(p, xs, sx, tb, c_lo, tile_ch);
                    __syncthreads();
                }
                while (c < c_hi) {
                    const int cn = c + 32;
                    const bool more = cn < c_hi;
                    if (more) mm_load<FMT, false>(p, rowbytes, ngroups, row, cn, nxt);
                    mm_chunk<FMT, TT, MM_R>(cur, c - c_lo, xs, sx, xt4, tile_ch, acc);
                    if (!more) break;
                    cur = nxt;
                    c = cn;
                }
            }
#pragma unroll
            for (int r = 0; r < MM_R; r++)
#pragma unroll
                for (int t = 0; t < TT; t++) acc[r][t] = sdc_warp_sum(acc[r][t]);
            if (lane == 0) {
#pragma unroll
                for (int r = 0; r < MM_R; r++) {
                    const int rr = r0 + r;
                    if (rr >= p.rows) continue;
#pragma unroll
                    for (int t = 0; t < TT; t++) {
                        if (tb + t >= p.T) continue;
                        if (LMA) sdc_best_offer(&wb[warp * p.T + tb + t], acc[r][t], rr);
                        else mm_store(p, rr, tb + t, acc[r][t]);
                    }
                }
            }
        }
    }
    if (LMA) {
        __syncthreads();
        mm_lma_part(p, wb, nw, blockDim.x);
    }
}

/* The int8 form of x for an int8-format call (mm_core.cuh): a warp per 128 columns of a token.
 * With p.pre == SDC_PRE_SWIGLU the four columns are silu(g) * u first (pointwise.cu's
 * expression), written to pre_out, then quantized. */
template <int BITS, int PRE>
__global__ void __launch_bounds__(256) i8_prep_kernel(const sdc_mm_params p) {
    if (p.early) sdc_grid_release_early();
    else sdc_grid_enter();
    constexpr int XG = BITS == 4 ? 2 : 1;
    const int lane = threadIdx.x & 31, nq = p.ncp * (BITS == 4 ? 32 : 16) / 128;
    const int item = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (item >= p.T * nq) return;   /* the whole warp */
    const int t = item / nq, qd = item - t * nq, col = qd * 128 + 4 * lane;
    float4 v;
    if constexpr (PRE == SDC_PRE_SWIGLU) {
        /* plain loads: pre_out may be x itself (each entry is read by the thread that writes it) */
        const float *g = p.x + (size_t)t * (size_t)p.ldx, *u = p.pre_u + (size_t)t * (size_t)p.ldx;
        float *o = p.pre_out + (size_t)t * (size_t)p.pre_ld;
        float f[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            f[k] = 0.0f;
            if (col + k < p.cols) {
                const float gv = g[col + k];
                f[k] = gv / (1.0f + expf(-gv)) * u[col + k];
                o[col + k] = f[k];
            }
        }
        v = make_float4(f[0], f[1], f[2], f[3]);
    } else {
        v = mm_x4(p, p.x + (size_t)t * (size_t)p.ldx, col);
    }
    mm_i8_quad<BITS>(v, lane, (unsigned char *)((uint4 *)p.xq + (size_t)t * p.ncp * XG), (float2 *)p.xsd + (size_t)t * p.ncp,
                     qd);
}

/* The int8 form of rmsnorm(x) * pre_w, nb blocks of SDC_RN_THREADS per token (block b of token t
 * is blockIdx.x = t nb + b): each block computes the row's scale by rms_core.cuh (the order
 * rmsnorm.cu gives a row of cols entries: every block gets the same bits), then warp w of block b
 * normalizes and quantizes quads g, g + 8 nb, ... with g = 8 b + w, writing the normed row to
 * pre_out as rmsnorm.cu would. One block a token did a 4096-entry row's 32 quads four at a time
 * per warp (5.0 us a launch on an H200, 14% of the 8B shape's step); nb = quads / 8 gives each
 * warp one, every block reading the whole row for its scale (from L2): the 8B shape's classic
 * decode 1.036-1.040x on an H100 (docs/benchmarks/cuda-h100-2026-12-06.md). nb > 1 only where
 * pre_out does not overlap x (a block's writes would race another's reads for the scale). The
 * norm weights of a warp's first PN_Q quads are loaded into registers before the wait (no kernel
 * writes them, common.cuh), so after it only x is a round trip. */
constexpr int PN_WARPS = SDC_RN_THREADS / 32, PN_Q = 8;   /* rows of up to 8192 entries: every weight early */

template <int BITS>
SDC_D void pn_quad(const float *xr, float *o, float inv, int n, int qd, int lane,
                   const float (&w4)[4], unsigned char *xb, float2 *sd) {
    const int col = qd * 128 + 4 * lane;
    float f[4];
#pragma unroll
    for (int k = 0; k < 4; k++) f[k] = col + k < n ? sdc_rms_apply(xr[col + k], inv, w4[k]) : 0.0f;
    mm_i8_quad<BITS>(make_float4(f[0], f[1], f[2], f[3]), lane, xb, sd, qd);
    /* stored after the quad's shuffles: x of this warp's columns is no longer read */
#pragma unroll
    for (int k = 0; k < 4; k++)
        if (col + k < n) o[col + k] = f[k];
}

template <int BITS>
__global__ void __launch_bounds__(SDC_RN_THREADS) i8_prep_norm_kernel(const sdc_mm_params p, const int nb) {
    __shared__ float ws[PN_WARPS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n = p.cols;
    const int nq = p.ncp * (BITS == 4 ? 32 : 16) / 128, t = blockIdx.x / nb, b = blockIdx.x - t * nb;
    const int g0 = b * PN_WARPS + warp, gs = nb * PN_WARPS;   /* this warp's quads: g0, g0 + gs, ... */
    float wq[PN_Q][4];
#pragma unroll
    for (int k = 0; k < PN_Q; k++) {
        const int col = (g0 + k * gs) * 128 + 4 * lane;
#pragma unroll
        for (int e = 0; e < 4; e++) wq[k][e] = col + e < n ? __ldg(p.pre_w + col + e) : 0.0f;
    }
    if (p.early) sdc_grid_release_early();
    else sdc_grid_enter();
    constexpr int XG = BITS == 4 ? 2 : 1;
    const float *xr = p.x + (size_t)t * (size_t)p.ldx;
    float *o = p.pre_out + (size_t)t * (size_t)p.pre_ld;
    const float inv = n <= SDC_RN_WARP_N ? sdc_rms_inv_warp(xr, n, p.pre_eps, lane) : sdc_rms_inv_block(xr, n, p.pre_eps, ws);
    __syncthreads();   /* every read of x for the scale is done before pre_out (which may be x) is written */
    unsigned char *xb = (unsigned char *)((uint4 *)p.xq + (size_t)t * p.ncp * XG);
    float2 *sd = (float2 *)p.xsd + (size_t)t * p.ncp;
#pragma unroll
    for (int k = 0; k < PN_Q; k++) {
        const int qd = g0 + k * gs;
        if (qd < nq) pn_quad<BITS>(xr, o, inv, n, qd, lane, wq[k], xb, sd);
    }
    for (int qd = g0 + PN_Q * gs; qd < nq; qd += gs) {
        const int col = qd * 128 + 4 * lane;
        float w4[4];
#pragma unroll
        for (int e = 0; e < 4; e++) w4[e] = col + e < n ? __ldg(p.pre_w + col + e) : 0.0f;
        pn_quad<BITS>(xr, o, inv, n, qd, lane, w4, xb, sd);
    }
}

bool pn_norm_blocks = true;   /* sd_cuda_norm_blocks */

/* The matmul launch's parameters once its preparation has run: x is what that step wrote. */
sdc_mm_params mm_prepared(const sdc_mm_params *p) {
    sdc_mm_params q = *p;
    if (q.pre != SDC_PRE_NONE) {
        q.x = q.pre_out;
        q.ldx = q.pre_ld;
        q.xvec = ((uintptr_t)q.x & 15u) == 0 && q.ldx % 4 == 0;
        q.pre = SDC_PRE_NONE;
    }
    return q;
}

/* Blocks a token for i8_prep_norm_kernel over nq quads: one quad a warp, or 1 where pre_out
 * overlaps x. */
int pn_blocks(const sdc_mm_params *p, long nq) {
    const uintptr_t x0 = (uintptr_t)p->x, x1 = x0 + ((size_t)(p->T - 1) * (size_t)p->ldx + (size_t)p->cols) * 4;
    const uintptr_t o0 = (uintptr_t)p->pre_out, o1 = o0 + ((size_t)(p->T - 1) * (size_t)p->pre_ld + (size_t)p->cols) * 4;
    if (!(o1 <= x0 || x1 <= o0)) return 1;
    const int nb = (int)((nq + PN_WARPS - 1) / PN_WARPS);
    return nb > 0 ? nb : 1;
}

cudaError_t i8_prep(const sdc_mm_params *p, const sdc_dev *d) {
    if (!sdc_mm_i8(p->fmt)) return p->pre == SDC_PRE_NONE ? cudaSuccess : cudaErrorInvalidValue;
    if (!p->xq || !p->xsd || p->ncp != sdc_mm_ncp(p->fmt, p->cols)) return cudaErrorInvalidValue;
    const bool q4 = p->fmt == SDC_MM_Q4I;
    const long nq = (long)p->ncp * sdc_mm_chunk_cols(p->fmt) / 128;   /* quads of 128 columns a token */
    if (p->pre == SDC_PRE_RMSNORM) {
        if (!p->pre_w || !p->pre_out || p->pre_ld < p->cols) return cudaErrorInvalidValue;
        const int nb = pn_norm_blocks ? pn_blocks(p, nq) : 1;
        return sdc_launch(d, q4 ? i8_prep_norm_kernel<4> : i8_prep_norm_kernel<8>, p->T * nb, SDC_RN_THREADS, 0, *p, nb);
    }
    const long items = (long)p->T * nq;
    const int blocks = (int)((items + 7) / 8);
    if (p->pre == SDC_PRE_SWIGLU) {
        if (!p->pre_u || !p->pre_out || p->pre_ld < p->cols) return cudaErrorInvalidValue;
        return sdc_launch(d, q4 ? i8_prep_kernel<4, SDC_PRE_SWIGLU> : i8_prep_kernel<8, SDC_PRE_SWIGLU>, blocks, 256, 0, *p);
    }
    return sdc_launch(d, q4 ? i8_prep_kernel<4, SDC_PRE_NONE> : i8_prep_kernel<8, SDC_PRE_NONE>, blocks, 256, 0, *p);
}

typedef void (*mm_fn)(const sdc_mm_params, const int, const int);

/* kernel for (format, tile index 0..3 = TT 1/2/4/8, fused argmax) */
template <int FMT, bool LMA> mm_fn mm_pick_tt(int ti) {
    switch (ti) {
    case 0: return mm_kernel<FMT, 1, LMA>;
    case 1: return mm_kernel<FMT, 2, LMA>;
    case 2: return mm_kernel<FMT, 4, LMA>;
    default: return mm_kernel<FMT, 8, LMA>;
    }
}
template <bool LMA> mm_fn mm_pick(int fmt, int ti) {
#define PICK(F) mm_pick_tt<F, LMA>(ti)
    SDC_MM_FMT_SWITCH(fmt, PICK)
#undef PICK
}

/* How one call launches (nothing here changes a row's arithmetic): stream.cu's kernel where it
 * applies (st), else gemv_i4.cu's (gi), else gemv.cu's (gv), else this file's tiled kernel. */
struct Plan {
    mm_fn fn;
    int ti, TT, nw, tile_ch, nrb, smem, grid;
    bool use_gv, use_st, use_gi, use_mq, mq_tile;
    sdc_gv_plan gv;
    sdc_st_plan st;
    sdc_gi_plan gi;
    sdc_mq_plan mq;
};

int g_kernels = SD_CUDA_MM_GEMV;   /* sd_cuda_matmul_kernels (benchmarks, tests, SPECDEC_CUDA_STREAM) */
int g_mlp_fuse = 1;                /* sd_cuda_mlp_fuse */
int g_gi_early = 0;                /* sd_cuda_gi_early */
long g_mlp_taken = 0;              /* sd_cuda_mlp_taken */
bool g_st_ok = false;              /* the streaming kernels took their shared memory (sdc_mm_init) */
int g_mma = 3;                     /* sd_cuda_mma: 0 off, 1 mma_i4.cu, 2 mma_tile.cu, 3 by the call's shape, 4 mma_tile.cu with its weights staged */
long g_mq_taken = 0;               /* sd_cuda_mma_taken */

cudaError_t mm_plan(const sdc_mm_params *p, const sdc_dev *d, bool lma, Plan *pl) {
    pl->use_gv = false;
    pl->use_st = false;
    pl->use_gi = false;
    pl->use_mq = false;
    if (g_kernels == SD_CUDA_MM_STREAM && g_st_ok) {
        cudaError_t e = cudaSuccess;
        const int r = sdc_st_plan_for(p, d, lma, d->smem_optin, &pl->st, &e);
        if (r < 0) return e;
        if (r > 0) {
            pl->use_st = true;
            pl->grid = pl->st.grid;
            return cudaSuccess;
        }
    }
    /* 4-bit rows of whole 1024-column runs at int8: gemv_i4.cu's lean kernel for T <= 8 (its
     * header says why; SD_CUDA_MM_GENERIC leaves it out, for A/B runs and the tests) */
    if (g_kernels != SD_CUDA_MM_TILED && g_kernels != SD_CUDA_MM_GENERIC) {
        cudaError_t e = cudaSuccess;
        const int r = sdc_gi_plan_for(p, d, lma, &pl->gi, &e);
        if (r < 0) return e;
        if (r > 0) {
            pl->use_gi = true;
            pl->grid = pl->gi.grid;
            return cudaSuccess;
        }
    }
    /* 4-bit rows of whole 1024-column runs at int8, T >= 16: a tensor-core kernel (sd_cuda_mma).
     * mma_i4.cu's took 0.70-0.85x the tiled kernel's time on the 8B shape's matrices at T =
     * 16..64, 0.09-0.33x on its 1024-row k and v, the same bits
     * (docs/benchmarks/cuda-prefill-mma-h100-2026-12-07.md). Mode 3 (the default): mma_tile.cu's
     * kernel from 32 tokens on for matrices of 2048 rows or more, mma_i4.cu's elsewhere.
     * bench_cuda on an H100, 8B shape
     * (docs/benchmarks/cuda-prefill-tile-h100-2026-12-07.md): mma_tile.cu took 0.57-0.80x
     * mma_i4.cu's time on the 4096- to 151936-row matrices at T = 32 and 64, but 1.11-1.57x at
     * T = 16 and 1.42-1.58x on the 1024-row k and v at any T. With its weights, scales and biases
     * staged too (mode 4; docs/benchmarks/cuda-prefill-ws-h100-2026-12-07.md) it took 0.58-0.82x
     * mode 2's time on every matrix and T = 16..64, and the 8B prefill went 1.25x faster: mode 3
     * takes that form from T = 16 on, except on matrices of fewer than 2048 rows from T = 32 on,
     * where mma_i4.cu's measured 0.94-0.98x its time (bench_cuda --arm-b mma_w, same run: the
     * staged form 0.41-0.93x mma_i4.cu's time elsewhere). */
    const bool ws = g_mma == 4 || (g_mma == 3 && (p->rows >= 2048 || p->T < 32));
    const bool tile = g_mma == 2 || ws;
    if (g_mma && g_kernels != SD_CUDA_MM_TILED &&
        (tile ? sdc_mt_plan_for(p, lma, d->n_sm, ws, &pl->mq) : sdc_mq_plan_for(p, lma, &pl->mq))) {
        pl->use_mq = true;
        pl->mq_tile = tile;
        pl->grid = pl->mq.gx;
        return cudaSuccess;
    }
    /* int8 rows: the tiled kernel from T = 3 on for matrices of 4096 rows or more, and at any T
     * for matrices of 2^28 weights or more (an 8B LM head); gemv.cu's kernel elsewhere. bench_cuda
     * on an H200, 8B shape (docs/benchmarks/cuda-int8-h200-2026-12-02.md): at T = 4 the tiled
     * kernel took 0.5-0.8x the gemv kernel's time on the 4096- and 12288-row matrices but 1.5x
     * on the 1024-row k and v; at T = 1 1.2-1.7x, except the LM head's 0.94x. Both give a row
     * the same bits. */
    const bool i8_tiled = sdc_mm_i8(p->fmt) && ((p->T > 2 && p->rows >= 4096) ||
                                                 (double)p->rows * (double)p->cols >= 268435456.0);
    if (g_kernels != SD_CUDA_MM_TILED && !i8_tiled) {
        cudaError_t e = cudaSuccess;
        const int r = sdc_gv_plan_for(p, d, lma, d->smem_optin, &pl->gv, &e);
        if (r < 0) return e;
        if (r > 0) {
            pl->use_gv = true;
            pl->grid = pl->gv.grid;
            return cudaSuccess;
        }
    }
    const int E = sdc_mm_chunk_cols(p->fmt), nch = (p->cols + E - 1) / E;
    pl->ti = p->T <= 1 ? 0 : p->T <= 2 ? 1 : p->T <= 4 ? 2 : 3;
    pl->TT = 1 << pl->ti;
    pl->nw = 8;
    while (pl->nw > 1 && (p->rows + MM_R * pl->nw - 1) / (MM_R * pl->nw) < d->n_sm) pl->nw >>= 1;
    pl->nrb = (p->rows + MM_R * pl->nw - 1) / (MM_R * pl->nw);
    const int step = pl->TT * 32 * sdc_mm_stage_bytes(p->fmt);   /* bytes per 32 chunks */
    const int extra = lma ? pl->nw * p->T * (int)sizeof(sdc_best) : 0;   /* on top of the budget */
    int nstep = d->smem_budget / step;
    const int full = (nch + 31) / 32;
    if (nstep > full) nstep = full;
    if (nstep < 1) nstep = 1;
    pl->tile_ch = 32 * nstep;
    pl->smem = nstep * step + extra;
    pl->fn = lma ? mm_pick<true>(p->fmt, pl->ti) : mm_pick<false>(p->fmt, pl->ti);
    if (!pl->fn || (lma && p->T > MM_LMA_MAX_T)) return cudaErrorInvalidValue;
    int per_sm = 0;
    cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, pl->fn, pl->nw * 32, (size_t)pl->smem);
    if (e != cudaSuccess) return e;
    if (per_sm < 1) per_sm = 1;
    long g = (long)per_sm * d->n_sm;
    if (g > pl->nrb) g = pl->nrb;
    if (lma && g > MM_LMA_MAX_GRID) g = MM_LMA_MAX_GRID;
    pl->grid = (int)g;
    return cudaSuccess;
}

} // namespace

extern "C" void sd_cuda_matmul_kernels(int which) { g_kernels = which; }
extern "C" void sd_cuda_norm_blocks(int spread) { pn_norm_blocks = spread != 0; }

extern "C" cudaError_t sdc_mm_init(int bytes, int gv_bytes) {
    cudaError_t e0 = sdc_gv_init(gv_bytes);
    if (e0 != cudaSuccess) return e0;
    /* the streaming kernel is optional: without its shared memory the other kernels serve */
    g_st_ok = sdc_st_init(gv_bytes) == cudaSuccess;
    if (!g_st_ok) cudaGetLastError();
    cudaError_t et = sdc_mt_init();
    if (et != cudaSuccess) return et;
    /* the per-warp argmax bests of a fused LM head call ride on top of the x tile budget */
    const int lim = bytes + MM_LMA_MAX_T * 8 * (int)sizeof(sdc_best);
    for (int lma = 0; lma < 2; lma++)
        for (int fmt = 0; fmt < SDC_MM_NFMT; fmt++)
            for (int ti = 0; ti < 4; ti++) {
                mm_fn fn = lma ? mm_pick<true>(fmt, ti) : mm_pick<false>(fmt, ti);
                cudaError_t e = cudaFuncSetAttribute((const void *)fn, cudaFuncAttributeMaxDynamicSharedMemorySize, lim);
                if (e != cudaSuccess) return e;
            }
    return cudaSuccess;
}

/* Whether the preparation lets the plan's matmul start before its own wait (sdc_mm_params.early):
 * the streaming kernel's first copies, and with sd_cuda_gi_early gemv_i4.cu's first batch, may
 * then overlap the kernel before the preparation. */
static bool mm_early(const Plan &pl) { return pl.use_st || (pl.use_gi && g_gi_early); }

extern "C" cudaError_t sdc_matmul(const sdc_mm_params *p0, const sdc_dev *d) {
    if (p0->T <= 0 || p0->rows <= 0) return cudaSuccess;
    Plan pl;
    cudaError_t e = mm_plan(p0, d, false, &pl);
    sdc_mm_params pp = *p0;
    pp.early = mm_early(pl);
    if (e == cudaSuccess) e = i8_prep(&pp, d);
    if (e != cudaSuccess) return e;
    const sdc_mm_params q = mm_prepared(p0);
    const sdc_mm_params *p = &q;
    if (pl.use_st) return sdc_st_launch(&pl.st, p, d);
    if (pl.use_gi) return sdc_gi_launch(&pl.gi, p, d);
    if (pl.use_mq) {
        g_mq_taken++;
        return pl.mq_tile ? sdc_mt_launch(&pl.mq, p, d) : sdc_mq_launch(&pl.mq, p, d);
    }
    if (pl.use_gv) return sdc_gv_launch(&pl.gv, p, d);
    return sdc_launch(d, pl.fn, pl.grid, pl.nw * 32, pl.smem, *p, pl.tile_ch, pl.nrb);
}

extern "C" int sd_cuda_mma(int mode) {
    const int was = g_mma;
    g_mma = mode >= 0 && mode <= 4 ? mode : 3;
    return was;
}
extern "C" long sd_cuda_mma_taken(void) { return g_mq_taken; }

extern "C" void sd_cuda_mlp_fuse(int mode) { g_mlp_fuse = mode >= 0 && mode <= 2 ? mode : 1; }
extern "C" int sd_cuda_gi_early(int on) {
    const int was = g_gi_early;
    g_gi_early = on ? 1 : 0;
    return was;
}
extern "C" long sd_cuda_mlp_taken(void) { return g_mlp_taken; }

extern "C" cudaError_t sdc_mlp(const sdc_mm_params *gu, const sdc_mm_params *down, void *xq2, void *xsd2, const sdc_dev *d,
                               int *taken) {
    *taken = 0;
    if (!g_mlp_fuse || g_kernels != SD_CUDA_MM_GEMV || gu->T < 1 || gu->T > SDC_GI_MAX_T || gu->fmt != SDC_MM_Q4I ||
        down->fmt != SDC_MM_Q4I || gu->pre != SDC_PRE_RMSNORM || gu->nseg != 2 || gu->acc || down->pre != SDC_PRE_NONE ||
        gu->ldy != gu->seg[1].ldy || down->cols != gu->rows / 2 || down->T != gu->T)
        return cudaSuccess;
    const sdc_mm_params q = mm_prepared(gu);   /* the gate + up launch after the norm preparation */
    sdc_gi_plan pg, pd;
    cudaError_t e = cudaSuccess;
    int r = sdc_gi_swq_plan(&q, d, g_mlp_fuse == 1, &pg, &e);
    if (r <= 0) return r < 0 ? e : cudaSuccess;
    sdc_mm_params dn = *down;
    dn.xq = xq2;
    dn.xsd = xsd2;
    dn.ncp = sdc_mm_ncp(SDC_MM_Q4I, dn.cols);
    r = sdc_gi_plan_for(&dn, d, 0, &pd, &e);
    if (r <= 0) return r < 0 ? e : cudaSuccess;
    *taken = 1;
    g_mlp_taken++;
    sdc_mm_params gp = *gu;
    gp.early = g_gi_early;   /* the gate/up launch's first batch may overlap the kernel before the preparation */
    if ((e = i8_prep(&gp, d)) != cudaSuccess) return e;
    const sdc_swq_out o = {gu->y, gu->seg[1].y, gu->ldy, xq2, xsd2, dn.ncp};
    if ((e = sdc_gi_swq_launch(&pg, &q, &o, d)) != cudaSuccess) return e;
    return sdc_gi_launch(&pd, &dn, d);
}

extern "C" int sdc_lm_argmax_grid(const sdc_mm_params *p, const sdc_dev *d) {
    Plan pl;
    if (p->T <= 0 || p->T > MM_LMA_MAX_T || p->rows <= 0 || mm_plan(p, d, true, &pl) != cudaSuccess) return -1;
    return pl.grid;
}

extern "C" cudaError_t sdc_lm_argmax(const sdc_mm_params *p, const sdc_dev *d) {
    if (p->T <= 0) return cudaSuccess;
    if (p->T > MM_LMA_MAX_T || p->rows <= 0) return cudaErrorInvalidValue;
    Plan pl;
    cudaError_t e = mm_plan(p, d, true, &pl);
    sdc_mm_params pp = *p;
    pp.early = mm_early(pl);
    if (e == cudaSuccess) e = i8_prep(&pp, d);
    if (e != cudaSuccess) return e;
    if (pl.use_st) e = sdc_st_launch(&pl.st, p, d);
    else if (pl.use_gi) e = sdc_gi_launch(&pl.gi, p, d);
    else if (pl.use_gv) e = sdc_gv_launch(&pl.gv, p, d);
    else e = sdc_launch(d, pl.fn, pl.grid, pl.nw * 32, pl.smem, *p, pl.tile_ch, pl.nrb);
    if (e != cudaSuccess) return e;
    return sdc_best_finish(p->part, pl.grid, p->T, p->map, p->out, d);
}
