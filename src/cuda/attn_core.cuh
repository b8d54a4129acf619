/* attn_core.cuh: the per-chunk and per-slot arithmetic both attention kernels run (attention.cu's
 * split kernel and its combine, attn_staged.cu's kernel), so that they compute every value with the
 * same expressions in the same order: attention.cu's header states the order, and the kernels
 * differ only in how K and V reach the lanes and where the slots are merged. The slots' combine
 * comes in two forms with the one arithmetic: at_combine (an output at a time) and at_finish_one
 * (one slot, from registers). */
#pragma once
#include "cuda/attention.h"
#include "cuda/common.cuh"

namespace {

constexpr int AT_THREADS = 128, AT_WARPS = 4, AT_CK = SDC_ATTN_CHUNK;
static_assert(AT_CK == AT_WARPS * 32, "one lane per key of a chunk");

/* Query heads a block serves (GS): the largest of 8, 4, 3, 2, 1 that divides the group, so K and
 * V rows are read once for GS heads. */
SDC_HD int at_gs(int grp) { return grp % 8 == 0 ? 8 : grp % 4 == 0 ? 4 : grp % 3 == 0 ? 3 : grp % 2 == 0 ? 2 : 1; }

/* What a block of grid (SDC_ATTN_SPLITS, nkv * (group / GS), T) works on: split slot s of row t,
 * GS query heads from h0 of kv head kh; nch chunks in the row's nkeys keys. (attn_staged.cu's
 * blocks serve several rows in turn: at_block(p, t) for each.) */
struct AtBlock {
    int s, t, kh, h0, nkeys, nch;
    size_t kstride, kbase;   /* a key's row in the cache; the kv head's first entry in it */
};
template <int GS> SDC_D AtBlock at_block(const sdc_attn_params &p, int t) {
    AtBlock b;
    const int grp = p.nh / p.nkv, nsl = grp / GS;
    b.s = blockIdx.x;
    b.t = t;
    b.kh = blockIdx.y / nsl;
    b.h0 = b.kh * grp + (blockIdx.y % nsl) * GS;
    b.nkeys = sdc_pos(p.pos_base, p.pos_off, b.t) + 1;
    b.nch = (b.nkeys + AT_CK - 1) / AT_CK;
    b.kstride = (size_t)p.nkv * (size_t)p.hd;
    b.kbase = (size_t)b.kh * (size_t)p.hd;
    return b;
}
template <int GS> SDC_D AtBlock at_block(const sdc_attn_params &p) { return at_block<GS>(p, blockIdx.z); }

/* q of the block's heads into qs (every thread, tid its index among AT_THREADS: a block's, or a
 * team's in attn_staged.cu's teams; read after the caller's next barrier). */
template <int GS>
SDC_D void at_load_q(const sdc_attn_params &p, const AtBlock &b, float (&qs)[GS][SDC_ATTN_MAX_HD], int tid) {
    for (int i = tid; i < GS * p.hd; i += AT_THREADS) {
        const int gg = i / p.hd, dd = i - gg * p.hd;
        qs[gg][dd] = p.q[(size_t)b.t * p.nh * p.hd + (size_t)(b.h0 + gg) * p.hd + dd];
    }
}

/* The slot's running max, sum and output at (-inf, 0, 0): merging the first chunk into it gives
 * a = 0, b = 1, that chunk's own values. */
template <int GS> SDC_D void at_state_init(float (&M)[GS], float (&L)[GS], float (&O)[GS][2]) {
#pragma unroll
    for (int gg = 0; gg < GS; gg++) {
        M[gg] = -INFINITY;
        L[gg] = O[gg][0] = O[gg][1] = 0.0f;
    }
}

/* The lane's scores times scale (-inf where its key is past the chunk); each warp's max to red. */
template <int GS>
SDC_D void at_scores_max(float (&sc)[GS], bool valid, float scale, int lane, int warp, float (&red)[AT_WARPS][GS]) {
#pragma unroll
    for (int gg = 0; gg < GS; gg++) {
        sc[gg] = valid ? sc[gg] * scale : -INFINITY;
        const float m = sdc_warp_max(sc[gg]);
        if (lane == 0) red[warp][gg] = m;
    }
}

/* The chunk max from the warps' (after a barrier; fmaxf: exact in any order). */
template <int GS> SDC_D void at_chunk_max(const float (&red)[AT_WARPS][GS], float (&mch)[GS]) {
#pragma unroll
    for (int gg = 0; gg < GS; gg++) mch[gg] = fmaxf(fmaxf(red[0][gg], red[1][gg]), fmaxf(red[2][gg], red[3][gg]));
}

/* p_j = expf(s_j - m) into pr; each warp's sum (the xor butterfly) to red. */
template <int GS>
SDC_D void at_exp_sum(const float (&sc)[GS], const float (&mch)[GS], bool valid, int key, int lane, int warp,
                      float (&pr)[GS][AT_CK], float (&red)[AT_WARPS][GS]) {
#pragma unroll
    for (int gg = 0; gg < GS; gg++) {
        const float e = valid ? expf(sc[gg] - mch[gg]) : 0.0f;
        pr[gg][key] = e;
        const float su = sdc_warp_sum(e);
        if (lane == 0) red[warp][gg] = su;
    }
}

/* After a barrier: the chunk's l (the four warps' sums in order) merged into the slot's (M, L),
 * and the factors a (of the slot's values so far) and b (of the chunk's) for its outputs. */
template <int GS>
SDC_D void at_merge(const float (&red)[AT_WARPS][GS], const float (&mch)[GS], float (&M)[GS], float (&L)[GS],
                    float (&fa)[GS], float (&fb)[GS]) {
#pragma unroll
    for (int gg = 0; gg < GS; gg++) {
        const float lch = ((red[0][gg] + red[1][gg]) + red[2][gg]) + red[3][gg];
        const float mn = fmaxf(M[gg], mch[gg]);
        fa[gg] = expf(M[gg] - mn);
        fb[gg] = expf(mch[gg] - mn);
        L[gg] = fmaf(L[gg], fa[gg], lch * fb[gg]);
        M[gg] = mn;
    }
}

/* The chunk's outputs o (sum_j p_j v_j[d], an fmaf chain over the keys in order) merged into O. */
template <int GS> SDC_D void at_merge_o(float (&O)[GS][2], int di, const float (&o)[GS], const float (&fa)[GS],
                                        const float (&fb)[GS]) {
#pragma unroll
    for (int gg = 0; gg < GS; gg++) O[gg][di] = fmaf(O[gg][di], fa[gg], o[gg] * fb[gg]);
}

/* The slot's (M, L) and O of the block's heads into the partials; thread tid holds dims tid and
 * tid + 128. */
template <int GS>
SDC_D void at_write_part(const sdc_attn_params &p, const AtBlock &b, const float (&M)[GS], const float (&L)[GS],
                         const float (&O)[GS][2], int tid) {
#pragma unroll
    for (int gg = 0; gg < GS; gg++) {
        const size_t idx = ((size_t)b.t * p.nh + (size_t)(b.h0 + gg)) * SDC_ATTN_SPLITS + (size_t)b.s;
        if (tid == 0) {
            p.part_ml[2 * idx] = M[gg];
            p.part_ml[2 * idx + 1] = L[gg];
        }
#pragma unroll
        for (int di = 0; di < 2; di++) {
            const int d = tid + di * AT_THREADS;
            if (d < p.hd) p.part_o[idx * p.hd + d] = O[gg][di];
        }
    }
}

/* A row whose keys fit one chunk (one slot used): at_combine's arithmetic for ns = 1 on the
 * slot's (M, L, O) as the block holds them, written straight to the output. The same expressions
 * on the same values (M = max(-inf, M_0), w = expf(M_0 - M), L = fmaf(L_0, w, 0),
 * O = fmaf(O_0, w, 0), out = O / L), so the same bits as writing the partials and combining. */
template <int GS>
SDC_D void at_finish_one(const sdc_attn_params &p, const AtBlock &b, const float (&Ms)[GS], const float (&Ls)[GS],
                         const float (&Os)[GS][2], int tid) {
#pragma unroll
    for (int gg = 0; gg < GS; gg++) {
        const float M = fmaxf(-INFINITY, Ms[gg]);
        const float w = expf(Ms[gg] - M);
        const float L = fmaf(Ls[gg], w, 0.0f);
#pragma unroll
        for (int di = 0; di < 2; di++) {
            const int d = tid + di * AT_THREADS;
            if (d < p.hd) p.out[(size_t)b.t * p.nh * p.hd + (size_t)(b.h0 + gg) * p.hd + d] = fmaf(Os[gg][di], w, 0.0f) / L;
        }
    }
}

/* Output dim d of head h of row t from the used slots 0 .. ns - 1, in order: M = max,
 * w_s = expf(M_s - M), L = sum l_s w_s, O = sum o_s w_s, out = O / L. The partials are read
 * through L2 (__ldcg): other blocks of the same launch may have written them. */
SDC_D void at_combine(const sdc_attn_params &p, int t, int h, int d, int ns) {
    const size_t b0 = ((size_t)t * p.nh + (size_t)h) * SDC_ATTN_SPLITS;
    float M = -INFINITY;
    for (int k = 0; k < ns; k++) M = fmaxf(M, __ldcg(p.part_ml + 2 * (b0 + k)));
    float L = 0.0f, O = 0.0f;
    for (int k = 0; k < ns; k++) {
        const float w = expf(__ldcg(p.part_ml + 2 * (b0 + k)) - M);
        L = fmaf(__ldcg(p.part_ml + 2 * (b0 + k) + 1), w, L);
        O = fmaf(__ldcg(p.part_o + (b0 + k) * p.hd + d), w, O);
    }
    p.out[(size_t)t * p.nh * p.hd + (size_t)h * p.hd + d] = O / L;
}

} // namespace
