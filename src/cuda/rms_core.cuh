/* rms_core.cuh: the RMSNorm scale 1 / sqrt(mean(x^2) + eps) of one row, in the one order the
 * backend uses for a row of n entries: rows of up to SDC_RN_WARP_N entries by one warp (lane l
 * accumulates entries l, l + 32, ... with fmaf, then the xor butterfly), longer rows by a block
 * of SDC_RN_THREADS (thread i accumulates i, i + 256, ..., warp butterflies, then the 8 warp sums
 * in warp order). rmsnorm.cu and the kernels that fuse a norm into their first step (the int8
 * preparation of a matmul's x, the q/k head norms) call these very functions, so a normed value
 * has the same bits whichever kernel made it. */
#pragma once
#include "cuda/common.cuh"

constexpr int SDC_RN_THREADS = 256, SDC_RN_WARP_N = 1024;

/* The rest of sdc_rms_inv_warp from a lane's sum ss (its entries lane, lane + 32, ... squared and
 * added with fmaf in that order), for a caller that holds the row in registers. */
SDC_D float sdc_rms_inv_warp_from(float ss, int n, float eps) {
    ss = sdc_warp_sum(ss);
    return 1.0f / sqrtf(ss / (float)n + eps);
}

/* A warp's scale for row xr (n <= SDC_RN_WARP_N); every lane gets it. Plain loads: the caller
 * may overwrite the row afterwards. */
SDC_D float sdc_rms_inv_warp(const float *xr, int n, float eps, int lane) {
    float ss = 0.0f;
    for (int i = lane; i < n; i += 32) ss = fmaf(xr[i], xr[i], ss);
    return sdc_rms_inv_warp_from(ss, n, eps);
}

/* A block's scale for row xr (blockDim.x == SDC_RN_THREADS; ws: SDC_RN_THREADS / 32 floats of
 * shared memory); every thread gets it. Contains a barrier: the whole block calls it. */
SDC_D float sdc_rms_inv_block(const float *xr, int n, float eps, float *ws) {
    float ss = 0.0f;
    for (int i = threadIdx.x; i < n; i += SDC_RN_THREADS) ss = fmaf(xr[i], xr[i], ss);
    ss = sdc_warp_sum(ss);
    if ((threadIdx.x & 31) == 0) ws[threadIdx.x >> 5] = ss;
    __syncthreads();
    float tot = ws[0];
#pragma unroll
    for (int k = 1; k < SDC_RN_THREADS / 32; k++) tot = tot + ws[k];
    return 1.0f / sqrtf(tot / (float)n + eps);
}

/* Entry i of the normed row: x_i * inv * w_i, left to right. */
SDC_D float sdc_rms_apply(float x, float inv, float w) { return x * inv * w; }
