/* sample.cu: the seeded choice of sd_sample (src/sample/sample.c) for rows of logits without
 * filters, token for token the CPU's, in three kernels over fixed column ranges of SMP_CHUNK
 * entries per block:
 *   1. smp_am: each block's best (logit, token id) -> part_a (ties to the lower token id: the
 *      CPU takes the argmax of the row scattered over the vocabulary);
 *   2. smp_gumbel: every block reduces part_a to the row's argmax am (exact), and when the
 *      choice is not greedy and x[am] is finite, scores its tokens: z = x / temp in double,
 *      kept while exp(z - zmax) > 0, pruned when z + bound < zmax + g(am) (never a winner),
 *      else z + g with g from Philox bits at (seed, pos(t), stream 0, token id) -> part_b;
 *   3. smp_finish: the row's best of part_b, or, greedy or degenerate (x[am] not finite), the
 *      CPU's sd_argmax answer, which for an all -inf / NaN row with a map needs the lowest
 *      token outside the map (a bitmap in shared memory, built only then).
 * Every reduction is a lexicographic maximum, exact in any order: no row's token depends on T,
 * the split or the grid. The per-token arithmetic is rng.cuh's, the CPU's operation for
 * operation, so a row whose logits equal the CPU's gives the CPU's token. */
#include "cuda/sample.h"
#include "cuda/rng.cuh"
#include <limits.h>

/* Gumbel-max candidates reduce through common.cuh's sdc_warp_best / sdc_block_best (found by
 * argument-dependent lookup, so at global scope). */
static SDC_D void sdc_offer(sdc_dbest *b, double v, int32_t i) {
    if (sdc_dbeats(v, i, b->v, b->i)) { b->v = v; b->i = i; }
}

namespace {

constexpr int SMP_THREADS = 256;
constexpr int SMP_CHUNK = 4096;          /* entries per block */
constexpr int SMP_BITMAP_WORDS = 11776;  /* 46 KiB of shared memory: vocabularies up to 376832 */

SDC_D int32_t token_of(const sdc_sample_params &p, int k) { return p.map ? __ldg(p.map + k) : k; }

/* the row's argmax candidate from its nb partials, reduced by warp 0 into *out */
SDC_D void reduce_am(const sdc_sample_params &p, int t, int nb, sdc_best *out) {
    if (threadIdx.x >= 32) return;
    sdc_best b = sdc_best_none();
    for (int i = threadIdx.x; i < nb; i += 32) {
        const sdc_best c = p.part_a[(size_t)t * nb + i];
        sdc_best_offer(&b, c.v, c.i);
    }
    b = sdc_warp_best(b);
    if (threadIdx.x == 0) *out = b;
}

/* grid (nb, T) */
__global__ void __launch_bounds__(SMP_THREADS) smp_am(const sdc_sample_params p) {
    sdc_grid_enter();
    const int t = blockIdx.y, lo = blockIdx.x * SMP_CHUNK, hi = min(p.n, lo + SMP_CHUNK);
    const float *row = p.logits + (size_t)t * (size_t)p.n;
    sdc_best b = sdc_best_none();
    for (int k = lo + threadIdx.x; k < hi; k += SMP_THREADS) sdc_best_offer(&b, __ldg(row + k), token_of(p, k));
    b = sdc_block_best<SMP_THREADS>(b);
    if (threadIdx.x == 0) p.part_a[(size_t)t * gridDim.x + blockIdx.x] = b;
}

/* grid (nb, T) */
__global__ void __launch_bounds__(SMP_THREADS) smp_gumbel(const sdc_sample_params p) {
    sdc_grid_enter();
    __shared__ sdc_best am_s;
    const int t = blockIdx.y, nb = gridDim.x;
    reduce_am(p, t, nb, &am_s);
    __syncthreads();
    const sdc_best am = am_s;
    if (p.greedy || am.i < 0 || !isfinite(am.v)) return;   /* smp_finish answers without part_b */
    const double zmax = (double)am.v / p.temp;
    const int64_t pos = (int64_t)sdc_pos(p.pos_base, p.pos_off, 0) + t;
    const double thr = zmax + sd_gumbel_of(sd_rng_bits_of(p.seed, pos, 0u, (uint32_t)am.i));
    const float *row = p.logits + (size_t)t * (size_t)p.n;
    const int lo = blockIdx.x * SMP_CHUNK, hi = min(p.n, lo + SMP_CHUNK);
    sdc_dbest b;
    b.v = 0.0;
    b.i = -1;
    b.pad = 0;
    for (int k = lo + threadIdx.x; k < hi; k += SMP_THREADS) {
        double v;
        const int32_t id = token_of(p, k);
        if (sdc_gumbel_cand(__ldg(row + k), p.temp, zmax, thr, p.seed, pos, id, &v)) sdc_offer(&b, v, id);
    }
    b = sdc_block_best<SMP_THREADS>(b);
    if (threadIdx.x == 0) p.part_b[(size_t)t * nb + blockIdx.x] = b;
}

/* grid (T); dynamic shared memory: the bitmap of mapped tokens when p.map is set */
__global__ void __launch_bounds__(SMP_THREADS) smp_finish(const sdc_sample_params p, const int nb) {
    sdc_grid_enter();
    extern __shared__ uint32_t bm[];
    __shared__ sdc_best am_s;
    __shared__ int unm_s;
    const int t = blockIdx.x;
    reduce_am(p, t, nb, &am_s);
    __syncthreads();
    const sdc_best am = am_s;
    if (!p.greedy && am.i >= 0 && isfinite(am.v)) {
        if (threadIdx.x < 32) {
            sdc_dbest b;
            b.v = 0.0;
            b.i = -1;
            b.pad = 0;
            for (int i = threadIdx.x; i < nb; i += 32) {
                const sdc_dbest c = p.part_b[(size_t)t * nb + i];
                sdc_offer(&b, c.v, c.i);
            }
            b = sdc_warp_best(b);
            /* am's own token always competes, so b.i >= 0 */
            if (threadIdx.x == 0) p.out[t] = b.i;
        }
        return;
    }
    int unmapped = -1;
    if (p.map && (am.i < 0 || am.v == -INFINITY)) {   /* only then can a token outside the map win */
        const int nw = (p.vocab + 31) / 32;
        for (int w = threadIdx.x; w < nw; w += SMP_THREADS) bm[w] = 0u;
        if (threadIdx.x == 0) unm_s = INT_MAX;
        __syncthreads();
        for (int k = threadIdx.x; k < p.n; k += SMP_THREADS) {
            const int32_t id = __ldg(p.map + k);
            if (id >= 0 && id < p.vocab) atomicOr(&bm[id >> 5], 1u << (id & 31));
        }
        __syncthreads();
        for (int w = threadIdx.x; w < nw; w += SMP_THREADS) {
            uint32_t fr = ~bm[w];
            if (w == nw - 1 && (p.vocab & 31)) fr &= (1u << (p.vocab & 31)) - 1u;
            if (fr) atomicMin(&unm_s, w * 32 + __ffs((int)fr) - 1);
        }
        __syncthreads();
        unmapped = unm_s == INT_MAX ? -1 : unm_s;
    }
    if (threadIdx.x == 0) p.out[t] = sdc_sample_argmax_answer(am.v, am.i, unmapped);
}

} // namespace

extern "C" int sdc_sample_blocks(int n) { return n <= 0 ? 1 : (n + SMP_CHUNK - 1) / SMP_CHUNK; }
extern "C" int sdc_sample_max_mapped_vocab(void) { return SMP_BITMAP_WORDS * 32; }

extern "C" cudaError_t sdc_sample(const sdc_sample_params *p, const sdc_dev *d) {
    if (p->T <= 0) return cudaSuccess;
    if (p->map && (p->vocab <= 0 || p->vocab > SMP_BITMAP_WORDS * 32)) return cudaErrorInvalidValue;
    const int nb = sdc_sample_blocks(p->n);
    cudaError_t e = sdc_launch(d, smp_am, dim3(nb, p->T), SMP_THREADS, 0, *p);
    if (e != cudaSuccess) return e;
    if (!p->greedy && (e = sdc_launch(d, smp_gumbel, dim3(nb, p->T), SMP_THREADS, 0, *p)) != cudaSuccess) return e;
    const size_t smem = p->map ? (size_t)((p->vocab + 31) / 32) * 4u : 0u;
    return sdc_launch(d, smp_finish, p->T, SMP_THREADS, smem, *p, nb);
}
