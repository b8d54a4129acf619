/* attn_staged.cu: attention.cu's computation, every value the same bits, with a chunk's K and V
 * rows staged in shared memory by cp.async and the slots' merge done by the last block of each
 * (row, head group) instead of a second kernel.
 *
 * What differs from attention.cu's attn_split, and why. There a chunk's keys are read 32 dims at
 * a time and its values 32 keys at a time, each batch a round trip to memory (8 for a chunk of
 * hd 128), and attn_combine is a second launch: at 128-512 keys (one to four chunks) a layer
 * measured 17-19 us on an H200, over 100x the bytes it reads. Here every 16 bytes of the chunk's
 * K and V rows are one cp.async, all in flight together (K and V at once where both fit in
 * shared memory; else V after the scores, in K's place), so a chunk costs one round trip; rows
 * are staged hd entries plus 16 bytes apart, so the lanes' 16-byte reads of different keys fall
 * on distinct banks.
 *
 * Same bits. Per chunk: a lane's score is the fmaf chain over d = 0..hd-1 of q[d] k[d] (read
 * 16 bytes at a time from shared memory, in the same d order), times scale; the chunk max,
 * expf(s - m), the warp butterfly then the four warps in order for l; o[d] the fmaf chain over
 * the keys in order; the merge into the slot's (M, L, O) by the same expressions. The merge of
 * the used slots 0 .. min(32, chunks) - 1 is attn_combine's: M = max, w_s = expf(M_s - M),
 * L = sum l_s w_s, O = sum o_s w_s in slot order, out = O / L. Which block of a (row, head
 * group) runs it changes nothing (it reads every slot's partials); a counter per (row, head
 * group) in scratch, zero between calls, says which block finished last, and that block sets it
 * back to 0. */
#include "cuda/attention.h"
#include "cuda/common.cuh"

namespace {

constexpr int AT_THREADS = 128, AT_WARPS = 4, AT_CK = SDC_ATTN_CHUNK;
static_assert(AT_CK == AT_WARPS * 32, "one lane per key of a chunk");

/* cp.async: 16 bytes global -> shared (both 16-byte aligned), in the current group */
SDC_D void at_cp16(void *dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(src)
                 : "memory");
}
SDC_D void at_commit(void) { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> SDC_D void at_wait(void) { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

/* Entry e of a staged cache row (shared memory) as f32: exact. */
template <int KVDT> SDC_D float kv_sm(const unsigned char *row, int e) {
    if constexpr (KVDT == SDC_F32) return ((const float *)row)[e];
    else if constexpr (KVDT == SDC_BF16) return __uint_as_float((uint32_t)((const unsigned short *)row)[e] << 16);
    else return __half2float(__ushort_as_half(((const unsigned short *)row)[e]));
}

/* The 16 bytes raw of a staged row as f32 (4 entries for f32, 8 for f16 / bf16): exact. */
template <int KVDT> SDC_D void kv_unpack16(const uint4 raw, float *f) {
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        if constexpr (KVDT == SDC_F32) f[i] = __uint_as_float(w[i]);
        else if constexpr (KVDT == SDC_BF16) {
            f[2 * i] = __uint_as_float(w[i] << 16);
            f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
        } else {
            f[2 * i] = __half2float(__ushort_as_half((unsigned short)(w[i] & 0xffffu)));
            f[2 * i + 1] = __half2float(__ushort_as_half((unsigned short)(w[i] >> 16)));
        }
    }
}

/* Stage rows j0 .. j0 + n - 1 of one kv head of cache c into dst (row stride rs bytes): one
 * cp.async per 16 bytes, every load of the chunk in flight together (one round trip to memory
 * where loads of 32 keys or 32 dims at a time took eight). */
template <int KVDT>
SDC_D void at_stage(const void *c, size_t kstride, size_t kbase, int j0, int n, int hd, unsigned char *dst, int rs) {
    constexpr int ES = KVDT == SDC_F32 ? 4 : 2;
    const int ng = hd * ES / 16;
    for (int i = threadIdx.x; i < n * ng; i += AT_THREADS) {
        const int key = i / ng, g = i - key * ng;
        const unsigned char *src = (const unsigned char *)c + ((size_t)(j0 + key) * kstride + kbase) * ES + (size_t)g * 16;
        at_cp16(dst + (size_t)key * rs + g * 16, src);
    }
    at_commit();
}

/* grid (SDC_ATTN_SPLITS, nkv * (group / GS), T); dynamic shared memory: one or two staged
 * chunks of rs-byte rows (two: K and V land together; one: V after the scores, in K's place) */
template <int GS, int KVDT>
__global__ void __launch_bounds__(AT_THREADS) attn_staged(const sdc_attn_params p, const int rs, const int two) {
    sdc_grid_enter();
    extern __shared__ __align__(16) unsigned char at_smem[];
    __shared__ __align__(16) float qs[GS][SDC_ATTN_MAX_HD];
    __shared__ float pr[GS][AT_CK];
    __shared__ float red[AT_WARPS][GS];
    __shared__ int last;
    unsigned char *ks = at_smem, *vs = two ? at_smem + (size_t)AT_CK * rs : at_smem;
    const int s = blockIdx.x, t = blockIdx.z, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int grp = p.nh / p.nkv, nsl = grp / GS;
    const int kh = blockIdx.y / nsl, h0 = kh * grp + (blockIdx.y % nsl) * GS;
    const int nkeys = sdc_pos(p.pos_base, p.pos_off, t) + 1;
    const int nch = (nkeys + AT_CK - 1) / AT_CK;
    if (s >= nch) return;   /* this slot has no chunk yet */
    const int hd = p.hd;
    const size_t kstride = (size_t)p.nkv * (size_t)hd, kbase = (size_t)kh * (size_t)hd;
    for (int i = tid; i < GS * hd; i += AT_THREADS) {
        const int gg = i / hd, dd = i - gg * hd;
        qs[gg][dd] = p.q[(size_t)t * p.nh * hd + (size_t)(h0 + gg) * hd + dd];
    }

    /* the slot's running max, sum and output; merging the first chunk into (-inf, 0, 0) gives
     * a = 0, b = 1: that chunk's own values */
    float M[GS], L[GS], O[GS][2];
#pragma unroll
    for (int gg = 0; gg < GS; gg++) {
        M[gg] = -INFINITY;
        L[gg] = O[gg][0] = O[gg][1] = 0.0f;
    }
    for (int ch = s; ch < nch; ch += SDC_ATTN_SPLITS) {
        const int j0 = ch * AT_CK, nvalid = min(AT_CK, nkeys - j0);
        const int key = warp * 32 + lane;
        const bool valid = key < nvalid;
        at_stage<KVDT>(p.k, kstride, kbase, j0, nvalid, hd, ks, rs);
        if (two) {
            at_stage<KVDT>(p.v, kstride, kbase, j0, nvalid, hd, vs, rs);
            at_wait<1>();
        } else {
            at_wait<0>();
        }
        __syncthreads();   /* K (and q) landed for every thread */

        /* scores of this lane's key for the GS heads: an fmaf chain over d = 0..hd-1 */
        float sc[GS];
#pragma unroll
        for (int gg = 0; gg < GS; gg++) sc[gg] = 0.0f;
        if (valid) {   /* 16-byte reads of the key's row: rows rs apart fall on distinct banks */
            constexpr int PER = KVDT == SDC_F32 ? 4 : 8;   /* entries per 16 bytes */
            const unsigned char *kr = ks + (size_t)key * rs;
            for (int d0 = 0; d0 < hd; d0 += PER) {
                const uint4 raw = *(const uint4 *)(kr + (size_t)d0 * (16 / PER));
                float kf[PER];
                kv_unpack16<KVDT>(raw, kf);
#pragma unroll
                for (int e = 0; e < PER; e += 4)
#pragma unroll
                    for (int gg = 0; gg < GS; gg++) {
                        const float4 q4 = *(const float4 *)&qs[gg][d0 + e];
                        sc[gg] = fmaf(q4.x, kf[e], sc[gg]);
                        sc[gg] = fmaf(q4.y, kf[e + 1], sc[gg]);
                        sc[gg] = fmaf(q4.z, kf[e + 2], sc[gg]);
                        sc[gg] = fmaf(q4.w, kf[e + 3], sc[gg]);
                    }
            }
        }

        /* chunk max and sum of exp */
        float mch[GS], lch[GS];
#pragma unroll
        for (int gg = 0; gg < GS; gg++) {
            sc[gg] = valid ? sc[gg] * p.scale : -INFINITY;
            const float m = sdc_warp_max(sc[gg]);
            if (lane == 0) red[warp][gg] = m;
        }
        __syncthreads();   /* also: every read of K is done */
        if (!two) at_stage<KVDT>(p.v, kstride, kbase, j0, nvalid, hd, vs, rs);
#pragma unroll
        for (int gg = 0; gg < GS; gg++) mch[gg] = fmaxf(fmaxf(red[0][gg], red[1][gg]), fmaxf(red[2][gg], red[3][gg]));
        __syncthreads();
#pragma unroll
        for (int gg = 0; gg < GS; gg++) {
            const float e = valid ? expf(sc[gg] - mch[gg]) : 0.0f;
            pr[gg][key] = e;
            const float su = sdc_warp_sum(e);
            if (lane == 0) red[warp][gg] = su;
        }
        at_wait<0>();
        __syncthreads();   /* pr, red and V are complete */

        /* merge factors (every thread computes the same) */
        float fa[GS], fb[GS];
#pragma unroll
        for (int gg = 0; gg < GS; gg++) {
            lch[gg] = ((red[0][gg] + red[1][gg]) + red[2][gg]) + red[3][gg];
            const float mn = fmaxf(M[gg], mch[gg]);
            fa[gg] = expf(M[gg] - mn);
            fb[gg] = expf(mch[gg] - mn);
            L[gg] = fmaf(L[gg], fa[gg], lch[gg] * fb[gg]);
            M[gg] = mn;
        }

        /* P.V for this thread's dims d = tid, tid + 128: an fmaf chain over the keys in order */
#pragma unroll
        for (int di = 0; di < 2; di++) {
            const int d = tid + di * AT_THREADS;
            if (d >= hd) continue;
            float o[GS];
#pragma unroll
            for (int gg = 0; gg < GS; gg++) o[gg] = 0.0f;
            for (int j = 0; j < nvalid; j++) {
                const float vv = kv_sm<KVDT>(vs + (size_t)j * rs, d);
#pragma unroll
                for (int gg = 0; gg < GS; gg++) o[gg] = fmaf(pr[gg][j], vv, o[gg]);
            }
#pragma unroll
            for (int gg = 0; gg < GS; gg++) O[gg][di] = fmaf(O[gg][di], fa[gg], o[gg] * fb[gg]);
        }
        __syncthreads();   /* pr, red, K and V are rewritten by the next chunk */
    }

#pragma unroll
    for (int gg = 0; gg < GS; gg++) {
        const size_t idx = ((size_t)t * p.nh + (size_t)(h0 + gg)) * SDC_ATTN_SPLITS + (size_t)s;
        if (tid == 0) {
            p.part_ml[2 * idx] = M[gg];
            p.part_ml[2 * idx + 1] = L[gg];
        }
#pragma unroll
        for (int di = 0; di < 2; di++) {
            const int d = tid + di * AT_THREADS;
            if (d < hd) p.part_o[idx * hd + d] = O[gg][di];
        }
    }

    /* The block of the (row, head group) that finishes last merges the used slots 0 .. ns - 1
     * in order (which block that is changes nothing: the merge reads every slot's partials):
     * M = max, w_s = expf(M_s - M), L = sum l_s w_s, O = sum o_s w_s, out = O / L. Its counter
     * goes back to 0 for the next call. */
    __threadfence();
    __syncthreads();
    int *cnt = p.count + (size_t)t * gridDim.y + blockIdx.y;
    const int ns = nch < SDC_ATTN_SPLITS ? nch : SDC_ATTN_SPLITS;
    if (tid == 0) {
        last = atomicAdd(cnt, 1) == ns - 1;
        if (last) *cnt = 0;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int i = tid; i < GS * hd; i += AT_THREADS) {
        const int gg = i / hd, d = i - gg * hd, h = h0 + gg;
        const size_t b0 = ((size_t)t * p.nh + (size_t)h) * SDC_ATTN_SPLITS;
        float Mx = -INFINITY;
        for (int k = 0; k < ns; k++) Mx = fmaxf(Mx, __ldcg(p.part_ml + 2 * (b0 + k)));
        float Ls = 0.0f, Os = 0.0f;
        for (int k = 0; k < ns; k++) {
            const float w = expf(__ldcg(p.part_ml + 2 * (b0 + k)) - Mx);
            Ls = fmaf(__ldcg(p.part_ml + 2 * (b0 + k) + 1), w, Ls);
            Os = fmaf(__ldcg(p.part_o + (b0 + k) * hd + d), w, Os);
        }
        p.out[(size_t)t * p.nh * hd + (size_t)h * hd + d] = Os / Ls;
    }
}

typedef void (*attn_fn)(const sdc_attn_params, const int, const int);

template <int GS> attn_fn pick_dt(int kvdt) {
    if (kvdt == SDC_F32) return attn_staged<GS, SDC_F32>;
    if (kvdt == SDC_BF16) return attn_staged<GS, SDC_BF16>;
    return attn_staged<GS, SDC_F16>;
}

} // namespace

/* bytes of one staged cache row: hd entries and 16 bytes of padding (the lanes' 16-byte reads
 * of different rows then fall on different banks) */
static int at_row_bytes(int hd, int kvdt) { return hd * (kvdt == SDC_F32 ? 4 : 2) + 16; }

static bool g_ok = false;   /* the kernels took their shared memory */

extern "C" cudaError_t sdc_attn_staged_init(int optin) {
    g_ok = false;
    const int big = AT_CK * at_row_bytes(SDC_ATTN_MAX_HD, SDC_F32);   /* one chunk, the largest rows */
    const int lim = optin - (16 << 10) < 2 * big ? optin - (16 << 10) : 2 * big;   /* the static arrays' room */
    if (lim < big) return cudaErrorInvalidValue;
    const int gsv[5] = {1, 2, 3, 4, 8};
    for (int g = 0; g < 5; g++)
        for (int dt = 0; dt < 3; dt++) {
            attn_fn fn = gsv[g] == 8 ? pick_dt<8>(dt) : gsv[g] == 4 ? pick_dt<4>(dt) : gsv[g] == 3 ? pick_dt<3>(dt)
                       : gsv[g] == 2 ? pick_dt<2>(dt) : pick_dt<1>(dt);
            cudaError_t e = cudaFuncSetAttribute((const void *)fn, cudaFuncAttributeMaxDynamicSharedMemorySize, lim);
            if (e != cudaSuccess) return e;
        }
    g_ok = true;
    return cudaSuccess;
}

extern "C" cudaError_t sdc_attn_staged(const sdc_attn_params *p, const sdc_dev *d) {
    if (!g_ok) return cudaErrorNotSupported;
    if (p->T <= 0) return cudaSuccess;
    if (p->nkv <= 0 || p->nh % p->nkv || p->hd <= 0 || p->hd % 16 || p->hd > SDC_ATTN_MAX_HD) return cudaErrorInvalidValue;
    if ((((uintptr_t)p->k | (uintptr_t)p->v) & 15u) != 0 || !p->count) return cudaErrorInvalidValue;
    const int grp = p->nh / p->nkv;
    const int gs = grp % 8 == 0 ? 8 : grp % 4 == 0 ? 4 : grp % 3 == 0 ? 3 : grp % 2 == 0 ? 2 : 1;
    attn_fn fn = gs == 8 ? pick_dt<8>(p->kvdt) : gs == 4 ? pick_dt<4>(p->kvdt) : gs == 3 ? pick_dt<3>(p->kvdt)
               : gs == 2 ? pick_dt<2>(p->kvdt) : pick_dt<1>(p->kvdt);
    const int rs = at_row_bytes(p->hd, p->kvdt), one = AT_CK * rs;
    const int two = 2 * one <= d->smem_optin - (16 << 10) ? 1 : 0;
    return sdc_launch(d, fn, dim3(SDC_ATTN_SPLITS, p->nkv * (grp / gs), p->T), AT_THREADS, (size_t)(two ? 2 * one : one), *p,
                      rs, two);
}
