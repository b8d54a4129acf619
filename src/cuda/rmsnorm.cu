/* rmsnorm.cu: RMSNorm of T rows. The sum of squares of a row is reduced in an order fixed by n
 * alone: rows of up to RN_WARP_N entries by one warp (lane l accumulates entries l, l+32, ... with
 * fmaf, then the xor butterfly), longer rows by a block of RN_THREADS (thread i accumulates i,
 * i+256, ..., warp butterflies, then the 8 warp sums in warp order: rms_core.cuh). Then
 * inv = 1 / sqrtf(ss / n + eps) (IEEE division and square root) and out_i = x_i * inv * w_i.
 * x is read with plain loads: out may alias it (each element is read by the thread that later
 * writes it, before it writes). */
#include "cuda/rmsnorm.h"
#include "cuda/rms_core.cuh"

namespace {

constexpr int RN_THREADS = SDC_RN_THREADS, RN_WARP_N = SDC_RN_WARP_N;

/* 8 rows per block, one warp each */
__global__ void __launch_bounds__(RN_THREADS) rms_warp(float *out, int ldo, const float *x, int ldx, const float *w,
                                                       int n, int T, float eps) {
    sdc_grid_enter();
    const int row = blockIdx.x * (RN_THREADS / 32) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= T) return;   /* whole warps: no block-wide barrier below */
    const float *xr = x + (size_t)row * ldx;
    float *o = out + (size_t)row * ldo;
    const float inv = sdc_rms_inv_warp(xr, n, eps, lane);
    for (int i = lane; i < n; i += 32) o[i] = sdc_rms_apply(xr[i], inv, __ldg(w + i));
}

/* one row per block */
__global__ void __launch_bounds__(RN_THREADS) rms_block(float *out, int ldo, const float *x, int ldx, const float *w,
                                                        int n, float eps) {
    sdc_grid_enter();
    __shared__ float ws[RN_THREADS / 32];
    const float *xr = x + (size_t)blockIdx.x * ldx;
    float *o = out + (size_t)blockIdx.x * ldo;
    const float inv = sdc_rms_inv_block(xr, n, eps, ws);
    for (int i = threadIdx.x; i < n; i += RN_THREADS) o[i] = sdc_rms_apply(xr[i], inv, __ldg(w + i));
}

} // namespace

extern "C" cudaError_t sdc_rmsnorm(float *out, int ldo, const float *x, int ldx, const float *w, int n, int T, float eps,
                                   const sdc_dev *d) {
    if (T <= 0 || n <= 0) return cudaSuccess;
    if (n <= RN_WARP_N) {
        const int rows = RN_THREADS / 32;
        return sdc_launch(d, rms_warp, (T + rows - 1) / rows, RN_THREADS, 0, out, ldo, x, ldx, w, n, T, eps);
    }
    return sdc_launch(d, rms_block, T, RN_THREADS, 0, out, ldo, x, ldx, w, n, eps);
}
