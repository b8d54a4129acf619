/* qk_core.cuh: one q or k head's RMSNorm and NeoX rotation by one warp, in the order qkv.cu's
 * header states. qkv.cu and attn_staged.cu's fused form (which norms and rotates the heads it
 * needs itself) call these very functions, so a rotated value has the same bits whichever
 * kernel made it. */
#pragma once
#include "cuda/qkv.h"
#include "cuda/rms_core.cuh"

constexpr int SDC_QK_PER = SDC_QKV_MAX_HD / 32;   /* entries of a head a lane holds, at most */

/* The head's normed entries into row s (shared memory; lane l writes entries l, l + 32, ...)
 * from the lane's entries xv and norm weights wv (entry lane + 32 k at k): the lane's squares
 * summed with fmaf over k in order (sdc_rms_inv_warp's loop, from registers), the warp's scale,
 * then x * inv * w. s may be the row xv was read from: each lane writes only its own entries. */
SDC_D void sdc_qk_norm(const float (&xv)[SDC_QK_PER], const float (&wv)[SDC_QK_PER], int hd, float eps, int lane,
                       float *s) {
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < SDC_QK_PER; k++)
        if (lane + 32 * k < hd) ss = fmaf(xv[k], xv[k], ss);
    const float inv = sdc_rms_inv_warp_from(ss, hd, eps);
#pragma unroll
    for (int k = 0; k < SDC_QK_PER; k++) {
        const int i = lane + 32 * k;
        if (i < hd) s[i] = sdc_rms_apply(xv[k], inv, wv[k]);
    }
}

/* Entries j and j + half of the rotated head from the normed row s (after the warp's
 * __syncwarp), c and sn the position's cos and sin of pair j (rope_k's expression). The caller
 * may write a and b back over s[j] and s[j + half]: no other lane reads them. */
SDC_D void sdc_qk_rot(const float *s, int j, int half, float c, float sn, float &a, float &b) {
    const float x1 = s[j], x2 = s[j + half];
    a = x1 * c - x2 * sn;
    b = x2 * c + x1 * sn;
}
