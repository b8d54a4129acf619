/* gather.cu: the embedding lookup of device-resident ids, dequantized exactly as
 * sd_mat_row_f32 (src/backend/tensor.c) does it (scale * (float)q + bias: a product and a sum,
 * each rounded, never contracted), and the row copy the round uses to pick a hidden state. */
#include "cuda/gather.h"
#include "cuda/common.cuh"

namespace {

constexpr int G_THREADS = 256;

/* grid (ceil(cols / 256), T) */
__global__ void embed_k(const sdc_embed_params p) {
    sdc_grid_enter();
    const int t = blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= p.cols) return;
    const int id = __ldg(p.ids + t);
    float v = 0.0f;
    if (id >= 0 && id < p.rows) {
        const size_t r = (size_t)id;
        if (p.bits == 0) v = sdc_ldf(p.w, r * p.cols + j, p.dt);
        else {
            const int epw = 32 / p.bits;
            const uint32_t word = __ldg((const uint32_t *)p.w + r * (size_t)(p.cols / epw) + j / epw);
            const uint32_t q = (word >> (p.bits * (j % epw))) & ((1u << p.bits) - 1u);
            const size_t gi = r * (size_t)(p.cols / p.group) + (size_t)(j / p.group);
            const float s = sdc_ldf(p.scales, gi, p.dt), b = sdc_ldf(p.biases, gi, p.dt);
            v = s * (float)q + b;
        }
    }
    p.x[(size_t)t * p.ldx + j] = v;
}

__global__ void copy_row_k(float *dst, const float *src, int ld, int n, const int32_t *idx, int off) {
    sdc_grid_enter();
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    dst[i] = src[(size_t)(__ldg(idx) + off) * ld + i];
}

} // namespace

extern "C" cudaError_t sdc_embed(const sdc_embed_params *p, const sdc_dev *d) {
    if (p->T <= 0 || p->cols <= 0) return cudaSuccess;
    return sdc_launch(d, embed_k, dim3((p->cols + G_THREADS - 1) / G_THREADS, p->T), G_THREADS, 0, *p);
}

extern "C" cudaError_t sdc_copy_row(float *dst, const float *src, int ld, int n, const int32_t *idx, int off,
                                    const sdc_dev *d) {
    if (n <= 0) return cudaSuccess;
    return sdc_launch(d, copy_row_k, (n + G_THREADS - 1) / G_THREADS, G_THREADS, 0, dst, src, ld, n, idx, off);
}
