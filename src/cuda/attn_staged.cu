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
 * Same bits. Both kernels run attn_core.cuh's functions for everything after the scores (max,
 * exp and sums, the merges, the partials, the slots' combine); what each writes itself is the
 * two fmaf chains: a lane's score over d = 0..hd-1 of q[d] k[d] (here read 16 bytes at a time
 * from shared memory, in the same d order) and o[d] over the keys in order. Which block of a
 * (row, head group) combines the slots changes nothing (it reads every slot's partials); a
 * counter per (row, head group) in scratch, zero between calls, says which block finished last,
 * and that block sets it back to 0, then merges an output at a time (at_combine; a form that
 * read every slot's partials at once, at_combine_block, ran 1.3x slower at 512 keys and 1.9x at
 * 2048 on an H200, ~1 us more a slot: docs/benchmarks/cuda-h200-2026-12-06.md). A row whose keys fit one chunk (a context of up
 * to 128 tokens) has one slot: its block writes the output itself (at_finish_one), skipping the
 * partials, the fence, the counter and the re-reads, with at_combine's arithmetic for one slot.
 * The query rows are read while the first chunk's copies are in flight. */
#include "cuda/attn_core.cuh"

namespace {

constexpr int AT_STATIC_ROOM = 16 << 10;   /* shared memory left to the kernel's static arrays (12.4 KB at GS 8) */

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
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const AtBlock b = at_block<GS>(p);
    if (b.s >= b.nch) return;   /* this slot has no chunk yet */
    const int hd = p.hd;

    float M[GS], L[GS], O[GS][2];
    at_state_init<GS>(M, L, O);
    for (int ch = b.s; ch < b.nch; ch += SDC_ATTN_SPLITS) {
        const int j0 = ch * AT_CK, nvalid = min(AT_CK, b.nkeys - j0);
        const int key = warp * 32 + lane;
        const bool valid = key < nvalid;
        at_stage<KVDT>(p.k, b.kstride, b.kbase, j0, nvalid, hd, ks, rs);
        if (two) at_stage<KVDT>(p.v, b.kstride, b.kbase, j0, nvalid, hd, vs, rs);
        if (ch == b.s) at_load_q<GS>(p, b, qs);   /* while the first chunk's copies are in flight */
        if (two) at_wait<1>();
        else at_wait<0>();
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

        /* chunk max and sum of exp, then the merge factors (every thread computes the same) */
        float mch[GS], fa[GS], fb[GS];
        at_scores_max<GS>(sc, valid, p.scale, lane, warp, red);
        __syncthreads();   /* also: every read of K is done */
        if (!two) at_stage<KVDT>(p.v, b.kstride, b.kbase, j0, nvalid, hd, vs, rs);
        at_chunk_max<GS>(red, mch);
        __syncthreads();
        at_exp_sum<GS>(sc, mch, valid, key, lane, warp, pr, red);
        at_wait<0>();
        __syncthreads();   /* pr, red and V are complete */
        at_merge<GS>(red, mch, M, L, fa, fb);

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
            at_merge_o<GS>(O, di, o, fa, fb);
        }
        __syncthreads();   /* pr, red, K and V are rewritten by the next chunk */
    }
    if (b.nch == 1) {   /* the only slot: no partials to merge (one write, no round trips) */
        at_finish_one<GS>(p, b, M, L, O);
        return;
    }
    at_write_part<GS>(p, b, M, L, O);

    /* The block of the (row, head group) that finishes last merges the used slots (which block
     * that is changes nothing: the merge reads every slot's partials); its counter goes back to 0
     * for the next call. */
    __threadfence();
    __syncthreads();
    int *cnt = p.count + (size_t)b.t * gridDim.y + blockIdx.y;
    const int ns = b.nch < SDC_ATTN_SPLITS ? b.nch : SDC_ATTN_SPLITS;
    if (tid == 0) {
        last = atomicAdd(cnt, 1) == ns - 1;
        if (last) *cnt = 0;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int i = tid; i < GS * hd; i += AT_THREADS) at_combine(p, b.t, b.h0 + i / hd, i % hd, ns);
}

typedef void (*attn_fn)(const sdc_attn_params, const int, const int);

template <int GS> attn_fn pick_dt(int kvdt) {
    if (kvdt == SDC_F32) return attn_staged<GS, SDC_F32>;
    if (kvdt == SDC_BF16) return attn_staged<GS, SDC_BF16>;
    return attn_staged<GS, SDC_F16>;
}
attn_fn pick(int gs, int kvdt) {
    return gs == 8 ? pick_dt<8>(kvdt) : gs == 4 ? pick_dt<4>(kvdt) : gs == 3 ? pick_dt<3>(kvdt)
         : gs == 2 ? pick_dt<2>(kvdt) : pick_dt<1>(kvdt);
}

/* bytes of one staged cache row: hd entries and 16 bytes of padding (the lanes' 16-byte reads
 * of different rows then fall on different banks) */
int at_row_bytes(int hd, int kvdt) { return hd * (kvdt == SDC_F32 ? 4 : 2) + 16; }

bool g_ok = false;   /* the kernels took their shared memory */

} // namespace

extern "C" cudaError_t sdc_attn_staged_init(int optin) {
    g_ok = false;
    const int big = AT_CK * at_row_bytes(SDC_ATTN_MAX_HD, SDC_F32);   /* one chunk, the largest rows */
    const int lim = optin - AT_STATIC_ROOM < 2 * big ? optin - AT_STATIC_ROOM : 2 * big;
    if (lim < big) return cudaErrorInvalidValue;
    const int gsv[5] = {1, 2, 3, 4, 8};
    for (int g = 0; g < 5; g++)
        for (int dt = 0; dt < 3; dt++) {
            cudaError_t e = cudaFuncSetAttribute((const void *)pick(gsv[g], dt), cudaFuncAttributeMaxDynamicSharedMemorySize, lim);
            if (e != cudaSuccess) return e;
        }
    g_ok = true;
    return cudaSuccess;
}

/* Called by sdc_attention, which has checked the shape, the caches' alignment and count. */
extern "C" cudaError_t sdc_attn_staged(const sdc_attn_params *p, const sdc_dev *d) {
    if (!g_ok) return cudaErrorNotSupported;
    const int grp = p->nh / p->nkv, gs = at_gs(grp);
    const int rs = at_row_bytes(p->hd, p->kvdt), one = AT_CK * rs;
    const int two = 2 * one <= d->smem_optin - AT_STATIC_ROOM ? 1 : 0;
    return sdc_launch(d, pick(gs, p->kvdt), dim3(SDC_ATTN_SPLITS, p->nkv * (grp / gs), p->T), AT_THREADS,
                      (size_t)(two ? 2 * one : one), *p, rs, two);
}
