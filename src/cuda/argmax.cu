/* argmax.cu: argmax over rows of logits, split over fixed column ranges of ARG_CHUNK per block
 * (a 152k-entry row is read by 19 blocks, not one SM), each block's best written to a partial
 * and reduced by sdc_best_finish; one block per row writes the answer directly. The argmax is a
 * lexicographic maximum (value, then lower index), exact in any order, so neither the split nor
 * T changes a row's answer. */
#include "cuda/argmax.h"
#include "cuda/common.cuh"

namespace {

constexpr int ARG_THREADS = 256;
constexpr int ARG_CHUNK = 8192;   /* logits per block */

__device__ int32_t mapped(const int32_t *map, int32_t a) { return map ? __ldg(map + a) : a; }

/* grid (nb, T): block x of row t scans logits [x*ARG_CHUNK, +ARG_CHUNK) */
__global__ void __launch_bounds__(ARG_THREADS) argmax_part(const float *logits, int n, const int32_t *map,
                                                           sdc_best *part, int32_t *out) {
    sdc_grid_enter();
    const int t = blockIdx.y, nb = gridDim.x;
    const float *row = logits + (size_t)t * (size_t)n;
    const int lo = blockIdx.x * ARG_CHUNK, hi = min(n, lo + ARG_CHUNK);
    sdc_best b = sdc_best_none();
#pragma unroll 8
    for (int i = lo + threadIdx.x; i < hi; i += blockDim.x) sdc_best_offer(&b, __ldg(row + i), i);
    b = sdc_block_best<ARG_THREADS>(b);
    if (threadIdx.x != 0) return;
    if (nb == 1) out[t] = mapped(map, b.i < 0 ? 0 : b.i);
    else part[(size_t)t * nb + blockIdx.x] = b;
}

/* grid (T), one warp: reduce row t's nb partials */
__global__ void __launch_bounds__(32) best_finish(const sdc_best *part, int nb, const int32_t *map, int32_t *out) {
    sdc_grid_enter();
    const int t = blockIdx.x;
    sdc_best b = sdc_best_none();
    for (int i = threadIdx.x; i < nb; i += 32) {
        const sdc_best c = part[(size_t)t * nb + i];
        sdc_best_offer(&b, c.v, c.i);
    }
    b = sdc_warp_best(b);
    if (threadIdx.x == 0) out[t] = mapped(map, b.i < 0 ? 0 : b.i);
}

} // namespace

extern "C" int sdc_argmax_blocks(int n) { return n <= 0 ? 1 : (n + ARG_CHUNK - 1) / ARG_CHUNK; }

extern "C" cudaError_t sdc_argmax(const float *logits, int n, int T, const int32_t *map, sdc_best *part, int32_t *out,
                                  const sdc_dev *d) {
    if (T <= 0) return cudaSuccess;
    const int nb = sdc_argmax_blocks(n);
    cudaError_t e = sdc_launch(d, argmax_part, dim3(nb, T), ARG_THREADS, 0, logits, n, map, part, out);
    if (e != cudaSuccess || nb == 1) return e;
    return sdc_best_finish(part, nb, T, map, out, d);
}

extern "C" cudaError_t sdc_best_finish(const sdc_best *part, int nb, int T, const int32_t *map, int32_t *out,
                                       const sdc_dev *d) {
    if (T <= 0) return cudaSuccess;
    return sdc_launch(d, best_finish, T, 32, 0, part, nb, map, out);
}
