/* attention.cu: causal GQA attention over the KV cache, batch-invariant by fixed chunks.
 *
 * The keys 0..pos(t) of row t are cut into chunks of SDC_ATTN_CHUNK = 128 keys counted from key
 * 0 (the last one partial). Chunk c belongs to split slot c % 32; a block of attn_split handles
 * one (slot, kv head, row) and GS query heads of that kv head (GS in {1, 2, 3, 4, 8}, the largest
 * that divides the group, so K and V rows are read once for GS heads). For each of its chunks,
 * in ascending order, it computes:
 *   scores  s_j = (q . k_j) * scale, one lane per key, an fmaf chain over d = 0..hd-1 (K tiles
 *           of 32 keys x 32 dims pass through shared memory so the loads stay coalesced);
 *   m       the chunk max (fmaxf: exact in any order);
 *   p_j     expf(s_j - m); l = the sum of p_j by a fixed tree (warp butterfly, then the four
 *           warps in order);
 *   o[d]    sum_j p_j v_j[d], one thread per d, an fmaf chain over j ascending;
 * and merges it into the slot's running (M, L, O), which starts at (-inf, 0, 0): M' = max(M, m),
 * a = expf(M - M'), b = expf(m - M'), L = fmaf(L, a, l*b), O = fmaf(O, a, o*b).
 * attn_combine then merges the used slots 0..min(32, chunks)-1 of each (row, head) in order:
 * M = max, w_s = expf(M_s - M), L = sum l_s w_s, O = sum o_s w_s, out = O / L.
 * Every step's order depends only on the row's position and head_dim, never on T, on the other
 * rows, on GS or on the grid: a row's output is the same bits in any call that holds it, and a
 * prefill split into calls differently gives the same cache and the same rows. Blocks whose slot
 * has no chunk (short contexts) exit at once; the grid depends only on T and the shape.
 * attn_staged.cu computes the same values with the chunk staged in shared memory and the merge
 * in the same launch; sd_cuda_attention_kernel (SPECDEC_CUDA_ATTN=staged) picks it. */
#include "cuda/attn_core.cuh"

namespace {

constexpr int AT_DT = 32;   /* dims of a K tile */

template <int KVDT> SDC_D float kv_ld(const void *p, size_t i) {
    if constexpr (KVDT == SDC_F32) return __ldg((const float *)p + i);
    else if constexpr (KVDT == SDC_BF16) return __uint_as_float((uint32_t)__ldg((const unsigned short *)p + i) << 16);
    else return __half2float(__ushort_as_half(__ldg((const unsigned short *)p + i)));
}

/* grid (SDC_ATTN_SPLITS, nkv * (group / GS), T) */
template <int GS, int KVDT>
__global__ void __launch_bounds__(AT_THREADS, 1) attn_split(const sdc_attn_params p) {
    sdc_grid_enter();
    __shared__ __align__(16) float qs[GS][SDC_ATTN_MAX_HD];
    __shared__ float kt[AT_WARPS][32][33];   /* (key, dim) tile per warp, padded: conflict-free */
    __shared__ float pr[GS][AT_CK];
    __shared__ float red[AT_WARPS][GS];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const AtBlock b = at_block<GS>(p);
    if (b.s >= b.nch) return;   /* this slot has no chunk yet */
    const int hd = p.hd;
    at_load_q<GS>(p, b, qs, threadIdx.x);
    __syncthreads();

    float M[GS], L[GS], O[GS][2];
    at_state_init<GS>(M, L, O);
    for (int ch = b.s; ch < b.nch; ch += SDC_ATTN_SPLITS) {
        const int j0 = ch * AT_CK, nvalid = min(AT_CK, b.nkeys - j0);
        const int key = warp * 32 + lane;
        const bool valid = key < nvalid;

        /* scores of this lane's key for the GS heads */
        float sc[GS];
#pragma unroll
        for (int gg = 0; gg < GS; gg++) sc[gg] = 0.0f;
        for (int d0 = 0; d0 < hd; d0 += AT_DT) {
            const bool dok = d0 + lane < hd;
            const size_t kb0 = (size_t)(j0 + warp * 32) * b.kstride + b.kbase + (size_t)(d0 + lane);
            float kv[32];   /* the tile's 32 loads in flight together, then stored */
#pragma unroll
            for (int kk = 0; kk < 32; kk++)
                kv[kk] = warp * 32 + kk < nvalid && dok ? kv_ld<KVDT>(p.k, kb0 + (size_t)kk * b.kstride) : 0.0f;
#pragma unroll
            for (int kk = 0; kk < 32; kk++) kt[warp][kk][lane] = kv[kk];
            __syncwarp();
            const int dn = min(AT_DT, hd - d0);   /* 16 or 32: hd is a multiple of 16 */
            for (int dd = 0; dd < dn; dd += 4) {
                const float k0 = kt[warp][lane][dd], k1 = kt[warp][lane][dd + 1];
                const float k2 = kt[warp][lane][dd + 2], k3 = kt[warp][lane][dd + 3];
#pragma unroll
                for (int gg = 0; gg < GS; gg++) {
                    const float4 q4 = *(const float4 *)&qs[gg][d0 + dd];
                    sc[gg] = fmaf(q4.x, k0, sc[gg]);
                    sc[gg] = fmaf(q4.y, k1, sc[gg]);
                    sc[gg] = fmaf(q4.z, k2, sc[gg]);
                    sc[gg] = fmaf(q4.w, k3, sc[gg]);
                }
            }
            __syncwarp();
        }

        /* chunk max and sum of exp, then the merge factors (every thread computes the same) */
        float mch[GS], fa[GS], fb[GS];
        at_scores_max<GS>(sc, valid, p.scale, lane, warp, red);
        __syncthreads();
        at_chunk_max<GS>(red, mch);
        __syncthreads();
        at_exp_sum<GS>(sc, mch, valid, key, lane, warp, pr, red);
        __syncthreads();
        at_merge<GS>(red, mch, M, L, fa, fb);

        /* P.V for this thread's dims d = tid, tid + 128 */
#pragma unroll
        for (int di = 0; di < 2; di++) {
            const int d = tid + di * AT_THREADS;
            if (d >= hd) continue;
            float o[GS];
#pragma unroll
            for (int gg = 0; gg < GS; gg++) o[gg] = 0.0f;
            const size_t vb = b.kbase + (size_t)d;
            int j = 0;
            for (; j + 32 <= nvalid; j += 32) {   /* 32 loads in flight, then the chain in key order */
                float vv[32];
#pragma unroll
                for (int u = 0; u < 32; u++) vv[u] = kv_ld<KVDT>(p.v, (size_t)(j0 + j + u) * b.kstride + vb);
#pragma unroll
                for (int u = 0; u < 32; u++)
#pragma unroll
                    for (int gg = 0; gg < GS; gg++) o[gg] = fmaf(pr[gg][j + u], vv[u], o[gg]);
            }
            for (; j + 8 <= nvalid; j += 8) {
                float vv[8];
#pragma unroll
                for (int u = 0; u < 8; u++) vv[u] = kv_ld<KVDT>(p.v, (size_t)(j0 + j + u) * b.kstride + vb);
#pragma unroll
                for (int u = 0; u < 8; u++)
#pragma unroll
                    for (int gg = 0; gg < GS; gg++) o[gg] = fmaf(pr[gg][j + u], vv[u], o[gg]);
            }
            for (; j < nvalid; j++) {
                const float vv = kv_ld<KVDT>(p.v, (size_t)(j0 + j) * b.kstride + vb);
#pragma unroll
                for (int gg = 0; gg < GS; gg++) o[gg] = fmaf(pr[gg][j], vv, o[gg]);
            }
            at_merge_o<GS>(O, di, o, fa, fb);
        }
        __syncthreads();   /* pr and red are rewritten by the next chunk */
    }
    at_write_part<GS>(p, b, M, L, O, threadIdx.x);
}

/* grid (nh, T), block: hd rounded up to a warp */
__global__ void attn_combine(const sdc_attn_params p) {
    sdc_grid_enter();
    const int h = blockIdx.x, t = blockIdx.y, d = threadIdx.x;
    const int nch = (sdc_pos(p.pos_base, p.pos_off, t) + 1 + AT_CK - 1) / AT_CK;
    if (d >= p.hd) return;
    at_combine(p, t, h, d, nch < SDC_ATTN_SPLITS ? nch : SDC_ATTN_SPLITS);
}

typedef void (*attn_fn)(const sdc_attn_params);

template <int GS> attn_fn pick_dt(int kvdt) {
    if (kvdt == SDC_F32) return attn_split<GS, SDC_F32>;
    if (kvdt == SDC_BF16) return attn_split<GS, SDC_BF16>;
    return attn_split<GS, SDC_F16>;
}

} // namespace

extern "C" size_t sdc_attn_scratch_floats(int T, int nh, int hd) {
    return (size_t)(T > 0 ? T : 1) * (size_t)nh * SDC_ATTN_SPLITS * ((size_t)hd + 2);
}

/* sd_cuda_attention_kernel; the staged kernel by default: an H100 measured it 1.3-2.1x faster at
 * 128-8192 keys (bench_cuda) and the 8B shape's classic decode 1.035x, MTP 0.997x, text identical
 * (docs/benchmarks/cuda-h100-2026-12-05.md); compute-sanitizer memcheck and racecheck clean */
static int g_staged = 1;

extern "C" void sd_cuda_attention_kernel(int staged) { g_staged = staged != 0; }

/* sd_cuda_attention_fuse; sd_cuda_attention_fused_taken */
static int g_fuse = 1;
static long g_fused_taken = 0;

extern "C" int sd_cuda_attention_fuse(int on) {
    const int was = g_fuse;
    g_fuse = on != 0;
    return was;
}
extern "C" long sd_cuda_attention_fused_taken(void) { return g_fused_taken; }

extern "C" cudaError_t sdc_attention_fused(const sdc_attn_params *p, const sdc_attn_fuse *f, const sdc_dev *d) {
    if (!g_staged || !g_fuse || !p->count || p->T <= 0 || p->T > SDC_ATTN_FUSE_T) return cudaErrorNotSupported;
    if (p->nkv <= 0 || p->nh % p->nkv || p->hd <= 0 || p->hd % 16 || p->hd > SDC_ATTN_MAX_HD) return cudaErrorInvalidValue;
    const uintptr_t a = (uintptr_t)p->k | (uintptr_t)p->v | (uintptr_t)p->q | (uintptr_t)f->k | (uintptr_t)f->v |
                        (uintptr_t)f->cos_t | (uintptr_t)f->sin_t;
    if (a & 15u) return cudaErrorNotSupported;
    const cudaError_t e = sdc_attn_staged_fused(p, f, d);
    if (e == cudaSuccess) g_fused_taken++;
    return e;
}

extern "C" cudaError_t sdc_attention(const sdc_attn_params *p, const sdc_dev *d) {
    if (p->T <= 0) return cudaSuccess;
    if (p->nkv <= 0 || p->nh % p->nkv || p->hd <= 0 || p->hd % 16 || p->hd > SDC_ATTN_MAX_HD) return cudaErrorInvalidValue;
    if (g_staged && p->count && (((uintptr_t)p->k | (uintptr_t)p->v) & 15u) == 0) {
        const cudaError_t e = sdc_attn_staged(p, d);
        if (e != cudaErrorNotSupported) return e;   /* not set up (sdc_attn_staged_init failed): the split kernel */
    }
    const int grp = p->nh / p->nkv, gs = at_gs(grp);
    attn_fn fn = gs == 8 ? pick_dt<8>(p->kvdt) : gs == 4 ? pick_dt<4>(p->kvdt) : gs == 3 ? pick_dt<3>(p->kvdt)
               : gs == 2 ? pick_dt<2>(p->kvdt) : pick_dt<1>(p->kvdt);
    cudaError_t e = sdc_launch(d, fn, dim3(SDC_ATTN_SPLITS, p->nkv * (grp / gs), p->T), AT_THREADS, 0, *p);
    if (e != cudaSuccess) return e;
    return sdc_launch(d, attn_combine, dim3(p->nh, p->T), (p->hd + 31) / 32 * 32, 0, *p);
}
