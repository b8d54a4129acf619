/* pointwise.cu: element-wise kernels, one thread per element, each element's arithmetic the
 * scalar reference's (src/cpu/ops_ref.c) written the same way: silu g / (1 + expf(-g)) * u,
 * RoPE x1 c - x2 s and x2 c + x1 s (no contraction: --fmad=false), the KV store through
 * common.cuh's converters (bit for bit dtype.h's round-to-nearest-even). Nothing is reduced, so
 * nothing depends on T or on the other rows. */
#include "cuda/pointwise.h"
#include "cuda/common.cuh"

namespace {

constexpr int PW_THREADS = 256;

__global__ void silu_mul_k(float *g, const float *u, size_t n) {
    sdc_grid_enter();
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float v = g[i];
        g[i] = v / (1.0f + expf(-v)) * u[i];
    }
}

__global__ void add_k(float *x, const float *y, size_t n) {
    sdc_grid_enter();
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = x[i] + y[i];
}

/* grid (ceil(nh*hd/2 / 256), T) */
__global__ void rope_k(float *x, int nh, int hd, const int32_t *pb, int off, const float *ct, const float *st) {
    sdc_grid_enter();
    const int t = blockIdx.y, half = hd / 2;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nh * half) return;
    const int h = i / half, j = i - h * half;
    const size_t pos = (size_t)sdc_pos(pb, off, t);
    const float c = __ldg(ct + pos * half + j), s = __ldg(st + pos * half + j);
    float *v = x + (size_t)t * nh * hd + (size_t)h * hd;
    const float x1 = v[j], x2 = v[j + half];
    v[j] = x1 * c - x2 * s;
    v[j + half] = x2 * c + x1 * s;
}

/* grid (ceil(row_elems / 256), T) */
__global__ void kv_store_k(int dt, void *cache, int row_elems, const float *src, const int32_t *pb, int off) {
    sdc_grid_enter();
    const int t = blockIdx.y, i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= row_elems) return;
    sdc_kv_put(dt, cache, (size_t)sdc_pos(pb, off, t) * row_elems + i, src[(size_t)t * row_elems + i]);
}

unsigned grid_for(size_t n) {
    size_t b = (n + PW_THREADS - 1) / PW_THREADS;
    return (unsigned)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

} // namespace

extern "C" cudaError_t sdc_silu_mul(float *g, const float *u, size_t n, const sdc_dev *d) {
    if (!n) return cudaSuccess;
    return sdc_launch(d, silu_mul_k, grid_for(n), PW_THREADS, 0, g, u, n);
}

extern "C" cudaError_t sdc_add(float *x, const float *y, size_t n, const sdc_dev *d) {
    if (!n) return cudaSuccess;
    return sdc_launch(d, add_k, grid_for(n), PW_THREADS, 0, x, y, n);
}

extern "C" cudaError_t sdc_rope(float *x, int T, int nh, int hd, const int32_t *pos_base, int pos_off,
                                const float *cos_t, const float *sin_t, const sdc_dev *d) {
    if (T <= 0 || nh <= 0 || hd < 2) return cudaSuccess;
    const int n = nh * (hd / 2);
    return sdc_launch(d, rope_k, dim3((n + PW_THREADS - 1) / PW_THREADS, T), PW_THREADS, 0, x, nh, hd, pos_base, pos_off,
                      cos_t, sin_t);
}

extern "C" cudaError_t sdc_kv_store(int dt, void *cache, int row_elems, const float *src, int T,
                                    const int32_t *pos_base, int pos_off, const sdc_dev *d) {
    if (T <= 0 || row_elems <= 0) return cudaSuccess;
    return sdc_launch(d, kv_store_k, dim3((row_elems + PW_THREADS - 1) / PW_THREADS, T), PW_THREADS, 0, dt, cache,
                      row_elems, src, pos_base, pos_off);
}
