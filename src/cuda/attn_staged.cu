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
 * The query rows are read while the first chunk's copies are in flight.
 *
 * Prefill chunks (16 rows or more) take the teams form (attn_teams below): a block's 2 or 4 rows
 * at once over one staged copy of each chunk, the same steps per row, so the same bits. */
#include "cuda/attn_core.cuh"
#include "cuda/qk_core.cuh"

namespace {

constexpr int AT_STATIC_ROOM = 16 << 10;   /* shared memory left to the kernel's static arrays (12.4 KB at GS 8) */


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

/* Entry e of a staged row = v in the cache's dtype, converted as sdc_kv_put converts. */
template <int KVDT> SDC_D void kv_sm_put(unsigned char *row, int e, float v) {
    if constexpr (KVDT == SDC_F32) ((float *)row)[e] = v;
    else if constexpr (KVDT == SDC_BF16) ((uint16_t *)row)[e] = sd_f32_to_bf16(v);
    else ((uint16_t *)row)[e] = sd_f32_to_f16(v);
}

/* The scores of one key for the GS heads of qs (the key's staged row kr; none where !valid: 0):
 * per head an fmaf chain over d = 0..hd-1 in order, the row read 16 bytes at a time (rows rs
 * apart fall on distinct banks). attention.cu's chain, so its bits. */
template <int GS, int KVDT>
SDC_D void at_scores(bool valid, const unsigned char *kr, const float (&qs)[GS][SDC_ATTN_MAX_HD], int hd,
                     float (&sc)[GS]) {
#pragma unroll
    for (int gg = 0; gg < GS; gg++) sc[gg] = 0.0f;
    if (!valid) return;
    constexpr int PER = KVDT == SDC_F32 ? 4 : 8;   /* entries per 16 bytes */
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

/* P.V of a chunk for this thread's dims d = tid, tid + AT_THREADS (the staged V rows vs, rs bytes
 * apart; pr the chunk's probabilities): per head an fmaf chain over keys 0 .. nvalid - 1 in order,
 * then merged into O with the chunk's factors fa, fb (at_merge_o). */
template <int GS, int KVDT>
SDC_D void at_pv(const unsigned char *vs, int rs, int tid, int hd, int nvalid, const float (&pr)[GS][AT_CK],
                 const float (&fa)[GS], const float (&fb)[GS], float (&O)[GS][2]) {
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
}

/* Whether this block (or team) is the last of the ns that count at cnt; the last sets the counter
 * back to 0 for the next call. Called by one thread, after the barrier that follows the block's
 * partial writes: one fence by that thread, the grid-barrier pattern of cooperative groups (the
 * barrier orders the block's writes before the fence, the fence makes them visible device-wide
 * before the count says so), and in the last block one more after reading the count, before the
 * merge reads the partials through L2 (at_combine). A fence in every thread before the barrier
 * was attn_teams' largest stall (Nsight Compute, membar). */
SDC_D bool at_count_last(int *cnt, int ns) {
    __threadfence();
    const bool last = atomicAdd(cnt, 1) == ns - 1;
    if (last) {
        *cnt = 0;
        __threadfence();
    }
    return last;
}

/* Stage rows j0 .. j0 + n - 1 of one kv head of cache c into dst (row stride rs bytes) by the
 * block's NTH threads: one cp.async per 16 bytes, every load of the chunk in flight together (one
 * round trip to memory where loads of 32 keys or 32 dims at a time took eight). */
template <int KVDT, int NTH = AT_THREADS>
SDC_D void at_stage(const void *c, size_t kstride, size_t kbase, int j0, int n, int hd, unsigned char *dst, int rs) {
    constexpr int ES = KVDT == SDC_F32 ? 4 : 2;
    const int ng = hd * ES / 16;
    for (int i = threadIdx.x; i < n * ng; i += NTH) {
        const int key = i / ng, g = i - key * ng;
        const unsigned char *src = (const unsigned char *)c + ((size_t)(j0 + key) * kstride + kbase) * ES + (size_t)g * 16;
        sdc_cp16(dst + (size_t)key * rs + g * 16, src);
    }
    sdc_cp_commit();
}

/* Row entries 0 .. hd - 1 of position P's cos then sin (hd/2 each) into cs, by cp.async. */
SDC_D void at_stage_cs(const sdc_attn_fuse &f, int P, int hd, float *cs) {
    const int half = hd / 2;
    for (int e = 4 * threadIdx.x; e < hd; e += 4 * AT_THREADS)
        sdc_cp16(cs + e, e < half ? f.cos_t + (size_t)P * half + e : f.sin_t + (size_t)P * half + (e - half));
}

/* The fused form's step before a chunk's scores (attention.h, sdc_attention_fused): the heads
 * it needs normed and rotated by qk_core.cuh's functions, so every value is what qkv.cu stores.
 * At the block's first chunk its GS q heads (raw rows in qs, rotated there in place); the keys
 * of this call in the chunk (positions lo .. lo + nnew - 1, rows lo - pos0 ... of f.k and f.v)
 * into the staged rows nold .. nvalid - 1, converted to the cache's dtype. The chunk's earlier
 * keys are in the cache (written by earlier calls) and already being staged. The block that owns
 * its row's last chunk, of the kv head's first head group, also stores its row's key into the
 * caches: no other block of the launch reads that cache row (the others compute it too). fw:
 * the norm weights and the tables' rows, 3 + 3 nk rows of hd floats after the two chunks. */
template <int GS, int KVDT>
SDC_D void at_fuse_heads(const sdc_attn_params &p, const sdc_attn_fuse &f, const AtBlock &b, int ch, int lo, int nnew,
                         int nold, int nvalid, int nk, float *fw, float (&qs)[GS][SDC_ATTN_MAX_HD],
                         unsigned char *ks, unsigned char *vs, int rs) {
    const int hd = p.hd, half = hd / 2, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int pos_t = b.nkeys - 1, pos0 = pos_t - b.t;
    float *wq = fw, *wk = fw + hd, *qcs = fw + 2 * hd, *kraw = fw + 3 * hd, *vraw = kraw + (size_t)nk * hd,
          *kcs = vraw + (size_t)nk * hd;
    const int nq = ch == b.s ? GS : 0;
    if (nq) {   /* the block's q heads before their norm, and the row's cos / sin */
        const int n4 = hd / 4;
        for (int i = tid; i < GS * n4; i += AT_THREADS) {
            const int gg = i / n4, e = 4 * (i - gg * n4);
            sdc_cp16(&qs[gg][e], p.q + (size_t)b.t * p.nh * hd + (size_t)(b.h0 + gg) * hd + e);
        }
        at_stage_cs(f, pos_t, hd, qcs);
    }
    if (nnew) {   /* this call's keys in the chunk: k before its norm, v, their positions' cos / sin */
        const int n4 = hd / 4, t0 = lo - pos0;
        for (int i = tid; i < nnew * n4; i += AT_THREADS) {
            const int r = i / n4, e = 4 * (i - r * n4);
            const size_t o = ((size_t)(t0 + r) * p.nkv + b.kh) * hd + e;
            sdc_cp16(kraw + (size_t)r * hd + e, f.k + o);
            sdc_cp16(vraw + (size_t)r * hd + e, f.v + o);
        }
        for (int r = 0; r < nnew; r++) at_stage_cs(f, lo + r, hd, kcs + (size_t)r * hd);
    }
    sdc_cp_commit();
    sdc_cp_wait<0>();
    __syncthreads();   /* every row (the cache's too) landed */

    /* a warp an item: q heads 0 .. nq - 1, then the new keys */
    for (int it = warp; it < nq + nnew; it += AT_WARPS) {
        const bool isq = it < nq;
        const int r = it - nq;
        float *row = isq ? &qs[0][0] + (size_t)it * SDC_ATTN_MAX_HD : kraw + (size_t)r * hd;
        const float *w = isq ? wq : wk, *cs = isq ? qcs : kcs + (size_t)r * hd;
        float xv[SDC_QK_PER], wv[SDC_QK_PER];
#pragma unroll
        for (int k = 0; k < SDC_QK_PER; k++) {
            const int i = lane + 32 * k;
            xv[k] = i < hd ? row[i] : 0.0f;
            wv[k] = i < hd ? w[i] : 0.0f;
        }
        sdc_qk_norm(xv, wv, hd, f.eps, lane, row);
        __syncwarp();
        unsigned char *kr = ks + (size_t)(nold + r) * rs;
#pragma unroll
        for (int k = 0; k < SDC_QK_PER / 2; k++) {
            const int j = lane + 32 * k;
            if (j >= half) continue;
            float a, bb;
            sdc_qk_rot(row, j, half, cs[j], cs[half + j], a, bb);
            if (isq) {
                row[j] = a;
                row[j + half] = bb;
            } else {
                kv_sm_put<KVDT>(kr, j, a);
                kv_sm_put<KVDT>(kr, j + half, bb);
            }
        }
        __syncwarp();
    }
    for (int i = tid; i < nnew * hd; i += AT_THREADS) {   /* v: stored as is, in the cache's dtype */
        const int r = i / hd, d = i - r * hd;
        kv_sm_put<KVDT>(vs + (size_t)(nold + r) * rs, d, vraw[(size_t)r * hd + d]);
    }
    __syncthreads();   /* q, K and V of the chunk complete */
    if (ch == b.nch - 1 && b.h0 == b.kh * (p.nh / p.nkv)) {   /* the row's own key into the caches */
        constexpr int ES = KVDT == SDC_F32 ? 4 : 2;
        const int ng = hd * ES / 16;
        const size_t o = ((size_t)pos_t * b.kstride + b.kbase) * ES;
        for (int i = tid; i < 2 * ng; i += AT_THREADS) {
            const bool isv = i >= ng;
            const int g = isv ? i - ng : i;
            const uint4 w4 = *(const uint4 *)((isv ? vs : ks) + (size_t)(nvalid - 1) * rs + (size_t)g * 16);
            *(uint4 *)((unsigned char *)(isv ? f.vc : f.kc) + o + (size_t)g * 16) = w4;
        }
    }
}

/* grid (SDC_ATTN_SPLITS, nkv * (group / GS), ceil(T / rows)); block z serves rows z rows ..
 * z rows + rows - 1 in turn, each with exactly the arithmetic a block of its own would do. Dynamic
 * shared memory: one or two staged chunks of rs-byte rows (two: K and V land together; one: V
 * after the scores, in K's place), and for the fused form (FUSE: attention.h's
 * sdc_attention_fused; two always, rows 1) the norm weights and rows at_fuse_heads stages, nk the
 * call's rows. The fused form's bound of one block an SM lets ptxas take the registers it asks
 * for (152-190; under the default bound it held 128 and spilled up to 20 bytes); two blocks an SM
 * still fit, and its shared memory allows no more.
 *
 * Rows of a block share the staged chunk. A prefill chunk's rows need the same chunks of keys
 * (chunk c is keys 128c .. 128c + 127 for every row; a row sees those up to its own position), so
 * with K and V both resident (two) a row stages only the keys of the chunk the rows before it did
 * not: a block of R rows reads a chunk once instead of R times. Which bytes are staged changes no
 * value a row computes: it reads keys below its own count only. With one chunk a slot (contexts
 * of up to 4096 keys) a block stages each chunk once; beyond, a slot's chunks alternate, and each
 * row stages them again, as a block of its own would. Measured (docs/benchmarks/
 * cuda-prefill-ws-h100-2026-12-07.md): 4 rows in turn took 0.79-0.86x a block a row's time for a
 * 64-row chunk, the 8B prefill only 1.02-1.03x faster; the teams form below took 0.41-0.69x and is
 * what 16 rows or more take, this form only where the teams do not fit (V over K) or when
 * sd_cuda_attention_rows sets the rows. */
template <int GS, int KVDT, bool FUSE>
__global__ void __launch_bounds__(AT_THREADS, FUSE ? 1 : 0)
    attn_staged(const sdc_attn_params p, const int rs, const int two, const sdc_attn_fuse f, const int nk, const int rows) {
    extern __shared__ __align__(16) unsigned char at_smem[];
    float *fw = (float *)(at_smem + (size_t)2 * AT_CK * rs);
    if constexpr (FUSE)   /* the norm weights: no kernel writes them (common.cuh), so before the wait */
        for (int i = threadIdx.x; i < p.hd; i += AT_THREADS) {
            fw[i] = __ldg(f.qw + i);
            fw[p.hd + i] = __ldg(f.kw + i);
        }
    sdc_grid_enter();
    __shared__ __align__(16) float qs[GS][SDC_ATTN_MAX_HD];
    __shared__ float pr[GS][AT_CK];
    __shared__ float red[AT_WARPS][GS];
    __shared__ int last;
    unsigned char *ks = at_smem, *vs = two ? at_smem + (size_t)AT_CK * rs : at_smem;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int hd = p.hd;
    int st_ch = -1, st_n = 0;   /* the chunk whose first st_n keys K and V hold (-1: none) */

    const int nrows = FUSE ? 1 : rows;   /* the fused form: one row a block */
    for (int r = 0; r < nrows; r++) {
        const int t = blockIdx.z * nrows + r;
        if (t >= p.T) break;
        const AtBlock b = at_block<GS>(p, t);
        if (b.s >= b.nch) continue;   /* this slot has no chunk yet */

        float M[GS], L[GS], O[GS][2];
        at_state_init<GS>(M, L, O);
        for (int ch = b.s; ch < b.nch; ch += SDC_ATTN_SPLITS) {
            const int j0 = ch * AT_CK, nvalid = min(AT_CK, b.nkeys - j0);
            const int key = warp * 32 + lane;
            const bool valid = key < nvalid;
            /* keys from lo on are this call's (the fused form computes them; else all are cached) */
            const int lo = FUSE ? max(j0, b.nkeys - 1 - b.t) : j0 + nvalid, nnew = max(0, j0 + nvalid - lo);
            /* the keys an earlier row of the block left staged (the unfused form with K and V
             * resident only: the fused form writes its own keys in, the other puts V over K) */
            const int have = !FUSE && two && st_ch == ch ? min(st_n, nvalid) : 0;
            at_stage<KVDT>(p.k, b.kstride, b.kbase, j0 + have, nvalid - nnew - have, hd, ks + (size_t)have * rs, rs);
            if (two) at_stage<KVDT>(p.v, b.kstride, b.kbase, j0 + have, nvalid - nnew - have, hd, vs + (size_t)have * rs, rs);
            st_n = st_ch == ch ? max(st_n, nvalid) : nvalid;
            st_ch = !FUSE && two ? ch : -1;
            if constexpr (FUSE) at_fuse_heads<GS, KVDT>(p, f, b, ch, lo, nnew, nvalid - nnew, nvalid, nk, fw, qs, ks, vs, rs);
            else {
                if (ch == b.s) at_load_q<GS>(p, b, qs, tid);   /* while the first chunk's copies are in flight */
                if (two) sdc_cp_wait<1>();
                else sdc_cp_wait<0>();
                __syncthreads();   /* K (and q) landed for every thread */
            }

            /* scores of this lane's key for the GS heads: an fmaf chain over d = 0..hd-1 */
            float sc[GS];
            at_scores<GS, KVDT>(valid, ks + (size_t)key * rs, qs, hd, sc);

            /* chunk max and sum of exp, then the merge factors (every thread computes the same) */
            float mch[GS], fa[GS], fb[GS];
            at_scores_max<GS>(sc, valid, p.scale, lane, warp, red);
            __syncthreads();   /* also: every read of K is done */
            if (!two) at_stage<KVDT>(p.v, b.kstride, b.kbase, j0, nvalid, hd, vs, rs);
            at_chunk_max<GS>(red, mch);
            __syncthreads();
            at_exp_sum<GS>(sc, mch, valid, key, lane, warp, pr, red);
            sdc_cp_wait<0>();
            __syncthreads();   /* pr, red and V are complete */
            at_merge<GS>(red, mch, M, L, fa, fb);

            at_pv<GS, KVDT>(vs, rs, tid, hd, nvalid, pr, fa, fb, O);
            __syncthreads();   /* pr, red, K and V are rewritten by the next chunk */
        }
        if (b.nch == 1) {   /* the only slot: no partials to merge (one write, no round trips) */
            at_finish_one<GS>(p, b, M, L, O, tid);
            continue;
        }
        at_write_part<GS>(p, b, M, L, O, tid);

        /* The block of the (row, head group) that finishes last merges the used slots (which block
         * that is changes nothing: the merge reads every slot's partials); its counter goes back to 0
         * for the next call (at_count_last). */
        __syncthreads();
        int *cnt = p.count + (size_t)b.t * gridDim.y + blockIdx.y;
        const int ns = b.nch < SDC_ATTN_SPLITS ? b.nch : SDC_ATTN_SPLITS;
        if (tid == 0) last = at_count_last(cnt, ns);
        __syncthreads();
        if (!last) continue;
        for (int i = tid; i < GS * hd; i += AT_THREADS) at_combine(p, b.t, b.h0 + i / hd, i % hd, ns);
    }
}

/* The teams form, for prefill chunks: NT teams of AT_THREADS threads, team g serving row
 * blockIdx.z NT + g, all rows of the block at once over one staged copy of each chunk's K and V
 * (both resident: the form needs two chunks of shared memory). The kernel above gives a block 4
 * warps, and its two chunks of f32 K and V (135 KB at hd 128) allow one block an SM: 4 warps an SM,
 * whose chains of loads, fmaf and barriers leave the SM idle most of the time
 * (docs/benchmarks/cuda-prefill-ws-h100-2026-12-07.md: about 5% of the f32 rate). Here an SM runs
 * 4 NT warps on the same shared memory.
 *
 * Same bits. A team runs the kernel above's steps for its row, in the same order, on the same
 * staged rows: a chunk's keys are staged up to the most any row of the block sees there (a row
 * reads its own keys only), and every barrier is the block's, so the teams go through the chunks
 * in step; a row whose slot has no chunk left (its keys end earlier) skips the chunk's merges and
 * writes, so its state stays what its own block would have. Team g's q, scores, sums and merge
 * flag sit in its own slice of the dynamic shared memory after the two chunks (at_team_bytes). */
/* bytes of one team's slice: qs (GS x SDC_ATTN_MAX_HD), pr (GS x AT_CK), red (AT_WARPS x 8), last */
SDC_HD int at_team_bytes(int gs) {
    return (gs * SDC_ATTN_MAX_HD + gs * AT_CK + AT_WARPS * 8) * (int)sizeof(float) + 16;
}

template <int GS, int KVDT, int NT>
__global__ void __launch_bounds__(AT_THREADS *NT, 1)
    attn_teams(const sdc_attn_params p, const int rs) {
    extern __shared__ __align__(16) unsigned char at_smem[];
    sdc_grid_enter();
    __shared__ int nkeys_s[NT];
    unsigned char *ks = at_smem, *vs = at_smem + (size_t)AT_CK * rs;
    const int team = threadIdx.x / AT_THREADS, tid = threadIdx.x - team * AT_THREADS, lane = tid & 31, warp = tid >> 5;
    unsigned char *tb = at_smem + (size_t)2 * AT_CK * rs + (size_t)team * at_team_bytes(GS);
    float(&qs)[GS][SDC_ATTN_MAX_HD] = *(float(*)[GS][SDC_ATTN_MAX_HD])tb;
    float(&pr)[GS][AT_CK] = *(float(*)[GS][AT_CK])(tb + GS * SDC_ATTN_MAX_HD * sizeof(float));
    float(&red)[AT_WARPS][GS] = *(float(*)[AT_WARPS][GS])(tb + GS * (SDC_ATTN_MAX_HD + AT_CK) * sizeof(float));
    int *last = (int *)(tb + (GS * (SDC_ATTN_MAX_HD + AT_CK) + AT_WARPS * 8) * sizeof(float));
    const int hd = p.hd;
    const int t = blockIdx.z * NT + team;
    const bool active = t < p.T;
    const AtBlock b = at_block<GS>(p, active ? t : p.T - 1);
    const int my_nch = active ? b.nch : 0;
    if (tid == 0) nkeys_s[team] = active ? b.nkeys : 0;
    __syncthreads();
    int nch_max = 0;   /* the chunks any row of the block has */
#pragma unroll
    for (int g = 0; g < NT; g++) nch_max = max(nch_max, (nkeys_s[g] + AT_CK - 1) / AT_CK);

    float M[GS], L[GS], O[GS][2];
    at_state_init<GS>(M, L, O);
    for (int ch = b.s; ch < nch_max; ch += SDC_ATTN_SPLITS) {
        const int j0 = ch * AT_CK;
        int nstage = 0;   /* keys of the chunk the block stages: the most any row sees */
#pragma unroll
        for (int g = 0; g < NT; g++) nstage = max(nstage, min(AT_CK, nkeys_s[g] - j0));
        const bool mine = ch < my_nch;
        const int nvalid = mine ? min(AT_CK, b.nkeys - j0) : 0;
        const int key = warp * 32 + lane;
        const bool valid = key < nvalid;
        at_stage<KVDT, AT_THREADS * NT>(p.k, b.kstride, b.kbase, j0, nstage, hd, ks, rs);
        at_stage<KVDT, AT_THREADS * NT>(p.v, b.kstride, b.kbase, j0, nstage, hd, vs, rs);
        if (mine && ch == b.s) at_load_q<GS>(p, b, qs, tid);   /* while the first chunk's copies are in flight */
        sdc_cp_wait<1>();
        __syncthreads();   /* K (and q) landed for every thread */

        float sc[GS];
        at_scores<GS, KVDT>(valid, ks + (size_t)key * rs, qs, hd, sc);

        float mch[GS], fa[GS], fb[GS];
        at_scores_max<GS>(sc, valid, p.scale, lane, warp, red);
        __syncthreads();
        at_chunk_max<GS>(red, mch);
        __syncthreads();
        at_exp_sum<GS>(sc, mch, valid, key, lane, warp, pr, red);
        sdc_cp_wait<0>();
        __syncthreads();   /* pr, red and V are complete */
        if (mine) {
            at_merge<GS>(red, mch, M, L, fa, fb);
            at_pv<GS, KVDT>(vs, rs, tid, hd, nvalid, pr, fa, fb, O);
        }
        __syncthreads();   /* pr, red, K and V are rewritten by the next chunk */
    }
    const bool has = active && b.s < b.nch;   /* this row's slot had a chunk */
    if (has && b.nch == 1) at_finish_one<GS>(p, b, M, L, O, tid);
    const bool part = has && b.nch > 1;
    if (part) at_write_part<GS>(p, b, M, L, O, tid);
    __syncthreads();   /* the team's partials written (at_count_last) */
    const int ns = b.nch < SDC_ATTN_SPLITS ? b.nch : SDC_ATTN_SPLITS;
    if (part && tid == 0) *last = at_count_last(p.count + (size_t)b.t * gridDim.y + blockIdx.y, ns);
    __syncthreads();
    if (!part || !*last) return;
    for (int i = tid; i < GS * hd; i += AT_THREADS) at_combine(p, b.t, b.h0 + i / hd, i % hd, ns);
}

typedef void (*attn_fn)(const sdc_attn_params, const int, const int, const sdc_attn_fuse, const int, const int);

template <int GS, bool FUSE> attn_fn pick_dt(int kvdt) {
    if (kvdt == SDC_F32) return attn_staged<GS, SDC_F32, FUSE>;
    if (kvdt == SDC_BF16) return attn_staged<GS, SDC_BF16, FUSE>;
    return attn_staged<GS, SDC_F16, FUSE>;
}
template <bool FUSE> attn_fn pick_gs(int gs, int kvdt) {
    return gs == 8 ? pick_dt<8, FUSE>(kvdt) : gs == 4 ? pick_dt<4, FUSE>(kvdt) : gs == 3 ? pick_dt<3, FUSE>(kvdt)
         : gs == 2 ? pick_dt<2, FUSE>(kvdt) : pick_dt<1, FUSE>(kvdt);
}
attn_fn pick(int gs, int kvdt, bool fuse) { return fuse ? pick_gs<true>(gs, kvdt) : pick_gs<false>(gs, kvdt); }

typedef void (*teams_fn)(const sdc_attn_params, const int);

#define AT_T(G, NT)                                                                                                    \
    (kvdt == SDC_F32 ? attn_teams<G, SDC_F32, NT> : kvdt == SDC_BF16 ? attn_teams<G, SDC_BF16, NT> : attn_teams<G, SDC_F16, NT>)
/* nt teams (2 or 4) of gs heads each; 8 heads a block come in 2 teams only (at_teams) */
teams_fn pick_teams(int nt, int gs, int kvdt) {
    if (gs == 8) return AT_T(8, 2);
    if (nt == 4) return gs == 4 ? AT_T(4, 4) : gs == 3 ? AT_T(3, 4) : gs == 2 ? AT_T(2, 4) : AT_T(1, 4);
    return gs == 4 ? AT_T(4, 2) : gs == 3 ? AT_T(3, 2) : gs == 2 ? AT_T(2, 2) : AT_T(1, 2);
}
#undef AT_T

/* bytes of one staged cache row: hd entries and 16 bytes of padding (the lanes' 16-byte reads
 * of different rows then fall on different banks) */
int at_row_bytes(int hd, int kvdt) { return hd * (kvdt == SDC_F32 ? 4 : 2) + 16; }

/* dynamic shared memory of the fused form: two chunks, then 3 + 3 nk rows of hd floats */
size_t at_fused_bytes(int hd, int kvdt, int nk) {
    return (size_t)2 * AT_CK * at_row_bytes(hd, kvdt) + (size_t)(3 + 3 * nk) * hd * sizeof(float);
}

bool g_ok = false, g_fused_ok = false, g_teams_ok = false;   /* the kernels took their shared memory */

int g_rows = 0;    /* sd_cuda_attention_rows: 0 the rule below, else rows a block of the form above */
int g_teams = 0;   /* sd_cuda_attention_teams: 0 the rule below, 1 never, 2 or 4 teams at any T */

/* Teams of the teams form (0: the form above): from 16 rows on (prefill chunks) 4, or 2 for 8
 * heads a block, always (at 4 its 512 threads' bound of 128 registers spills); below, a block a
 * row keeps the most blocks in flight (decode, verifies). */
int at_teams(int T, int gs) {
    if (g_rows > 0 || g_teams == 1) return 0;
    const int nt = g_teams > 1 ? g_teams : T >= 16 ? 4 : 0;
    return gs == 8 && nt ? 2 : nt;
}
/* Rows a block of the form above serves in turn: 1 up to 15 rows, 4 from 16 rows on. */
int at_rows(int T) { return g_rows > 0 ? g_rows : T >= 16 ? 4 : 1; }

} // namespace

extern "C" cudaError_t sdc_attn_staged_init(int optin) {
    g_ok = g_fused_ok = g_teams_ok = false;
    const int big = AT_CK * at_row_bytes(SDC_ATTN_MAX_HD, SDC_F32);   /* one chunk, the largest rows */
    const int lim = optin - AT_STATIC_ROOM < 2 * big ? optin - AT_STATIC_ROOM : 2 * big;
    if (lim < big) return cudaErrorInvalidValue;
    const int gsv[5] = {1, 2, 3, 4, 8};
    for (int fu = 0; fu < 2; fu++) {
        for (int g = 0; g < 5; g++)
            for (int dt = 0; dt < 3; dt++) {
                const cudaError_t e = cudaFuncSetAttribute((const void *)pick(gsv[g], dt, fu), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                           fu ? optin - AT_STATIC_ROOM : lim);
                if (e != cudaSuccess) return e;
            }
        if (!fu) g_ok = true;
    }
    g_fused_ok = true;
    const int gsv2[5] = {1, 2, 3, 4, 8};
    for (int nt = 2; nt <= 4; nt += 2)
        for (int g = 0; g < 5; g++)
            for (int dt = 0; dt < 3; dt++) {
                const cudaError_t e = cudaFuncSetAttribute((const void *)pick_teams(nt, gsv2[g], dt),
                                                           cudaFuncAttributeMaxDynamicSharedMemorySize, optin - 1024);
                if (e != cudaSuccess) return e;
            }
    g_teams_ok = true;
    return cudaSuccess;
}

/* Called by sdc_attention, which has checked the shape, the caches' alignment and count. */
extern "C" cudaError_t sdc_attn_staged(const sdc_attn_params *p, const sdc_dev *d) {
    if (!g_ok) return cudaErrorNotSupported;
    const int grp = p->nh / p->nkv, gs = at_gs(grp);
    const int rs = at_row_bytes(p->hd, p->kvdt), one = AT_CK * rs;
    const int two = 2 * one <= d->smem_optin - AT_STATIC_ROOM ? 1 : 0;
    const int nt = at_teams(p->T, gs);
    const size_t tsmem = (size_t)2 * one + (size_t)nt * at_team_bytes(gs);
    if (nt && two && g_teams_ok && tsmem <= (size_t)(d->smem_optin - 1024))
        return sdc_launch(d, pick_teams(nt, gs, p->kvdt), dim3(SDC_ATTN_SPLITS, p->nkv * (grp / gs), (p->T + nt - 1) / nt),
                          AT_THREADS * nt, tsmem, *p, rs);
    const int rows = at_rows(p->T);
    return sdc_launch(d, pick(gs, p->kvdt, false), dim3(SDC_ATTN_SPLITS, p->nkv * (grp / gs), (p->T + rows - 1) / rows),
                      AT_THREADS, (size_t)(two ? 2 * one : one), *p, rs, two, sdc_attn_fuse{}, 0, rows);
}

/* Called by sdc_attention_fused, which has checked the shape, T, the policy and the alignment. */
extern "C" cudaError_t sdc_attn_staged_fused(const sdc_attn_params *p, const sdc_attn_fuse *f, const sdc_dev *d) {
    if (!g_fused_ok) return cudaErrorNotSupported;
    const size_t smem = at_fused_bytes(p->hd, p->kvdt, p->T);
    if (smem > (size_t)(d->smem_optin - AT_STATIC_ROOM)) return cudaErrorNotSupported;
    const int grp = p->nh / p->nkv, gs = at_gs(grp);
    return sdc_launch(d, pick(gs, p->kvdt, true), dim3(SDC_ATTN_SPLITS, p->nkv * (grp / gs), p->T), AT_THREADS, smem, *p,
                      at_row_bytes(p->hd, p->kvdt), 1, *f, p->T, 1);
}

extern "C" int sd_cuda_attention_rows(int rows) {
    const int was = g_rows;
    g_rows = rows >= 0 && rows <= 64 ? rows : 0;
    return was;
}

extern "C" int sd_cuda_attention_teams(int teams) {
    const int was = g_teams;
    g_teams = teams == 1 || teams == 2 || teams == 4 ? teams : 0;
    return was;
}
