/* common.cuh: device helpers the kernel files share (CUDA C++ only). Bit casts and the 16-bit
 * float conversions are util/bits.h, compiled here for host and device from the C engine's source
 * (selfcheck.cu runs them, built by the CUDA toolchain, against references); loads of a run-time
 * float dtype; the argmax comparator; warp reductions in a fixed xor-butterfly order (lane l adds
 * lane l^m, which is commutative, so every lane ends with the same bits and the order depends only
 * on the warp width). */
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "cuda/dev.h"
#include "util/bits.h"

#define SDC_HD __host__ __device__ __forceinline__
#define SDC_D __device__ __forceinline__

/* Bit casts (sd_u2f, sd_f2u, sd_u2d, sd_d2u) and the 16-bit float conversions (sd_bf16_to_f32,
 * sd_f32_to_bf16, sd_f16_to_f32, sd_f32_to_f16): util/bits.h, the C engine's own source. */

/* Element i of a float array of run-time dtype dt (SDC_F32 / SDC_F16 / SDC_BF16), read through
 * the read-only cache. */
SDC_D float sdc_ldf(const void *p, size_t i, int dt) {
    if (dt == SDC_F32) return __ldg((const float *)p + i);
    unsigned short h = __ldg((const unsigned short *)p + i);
    if (dt == SDC_BF16) return __uint_as_float((uint32_t)h << 16);
    return __half2float(__ushort_as_half(h));
}

/* The float of run-time dtype dt held in the aligned 32-bit word w: f32, the whole word; f16 and
 * bf16, its high half when hi, else its low half. Selects, no branches. */
SDC_D float sdc_wordf(uint32_t w, int hi, int dt) {
    const uint32_t h = hi ? w >> 16 : w & 0xffffu;
    const float fb = __uint_as_float(h << 16), fh = __half2float(__ushort_as_half((unsigned short)h));
    return dt == SDC_F32 ? __uint_as_float(w) : dt == SDC_BF16 ? fb : fh;
}

/* ---- argmax candidates ---- */
SDC_HD sdc_best sdc_best_none(void) {
    sdc_best b;
    b.v = sd_u2f(0x7fc00000u);
    b.i = -1;
    return b;
}
/* (v, i) beats (bv, bi): NaN never does; anything beats "none"; larger value, then lower index. */
SDC_HD bool sdc_beats(float v, int32_t i, float bv, int32_t bi) {
    if (v != v || i < 0) return false;
    if (bi < 0) return true;
    return v > bv || (v == bv && i < bi);
}
SDC_HD void sdc_best_offer(sdc_best *b, float v, int32_t i) {
    if (sdc_beats(v, i, b->v, b->i)) { b->v = v; b->i = i; }
}

/* ---- warp reductions (fixed xor-butterfly order, full warp participates) ---- */
SDC_D float sdc_warp_sum(float v) {
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) v = v + __shfl_xor_sync(0xffffffffu, v, m);
    return v;
}
SDC_D float sdc_warp_max(float v) {
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, m));
    return v;
}
/* The best of the warp's candidates (B: sdc_best, or any {v, i} pair with an sdc_offer
 * overload); exact (a lexicographic maximum), so any order gives it. */
SDC_HD void sdc_offer(sdc_best *b, float v, int32_t i) { sdc_best_offer(b, v, i); }
template <typename B> SDC_D B sdc_warp_best(B b) {
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) {
        const auto ov = __shfl_xor_sync(0xffffffffu, b.v, m);
        const int32_t oi = __shfl_xor_sync(0xffffffffu, b.i, m);
        sdc_offer(&b, ov, oi);
    }
    return b;
}

/* Entry i of a KV cache of dtype dt (SDC_F32 / SDC_F16 / SDC_BF16) = v, through util/bits.h's
 * round-to-nearest-even converters (dtype.h's bits). */
SDC_D void sdc_kv_put(int dt, void *cache, size_t i, float v) {
    if (dt == SDC_F32) ((float *)cache)[i] = v;
    else if (dt == SDC_BF16) ((uint16_t *)cache)[i] = sd_f32_to_bf16(v);
    else ((uint16_t *)cache)[i] = sd_f32_to_f16(v);
}

/* Position of row t of a call: *base + off + t (base in device memory). */
SDC_D int sdc_pos(const int32_t *base, int off, int t) { return __ldg(base) + off + t; }

/* Launch status of the kernels just queued. */
static inline cudaError_t sdc_launched(void) { return cudaGetLastError(); }

/* ---- cp.async (attn_staged.cu, mma_tile.cu): 16 bytes global -> shared (both 16-byte aligned)
 * in the current group; close the group; wait until at most N of this thread's groups are
 * pending ---- */
SDC_D void sdc_cp16(void *dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(src)
                 : "memory");
}
SDC_D void sdc_cp_commit(void) { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> SDC_D void sdc_cp_wait(void) { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

/* ---- programmatic dependent launch (sm_90) ----
 * Every kernel is queued by sdc_launch, which (d->pdl; SPECDEC_CUDA_PDL=0 turns it off) lets the GPU start it while the kernel
 * before it on the stream is still running, so its launch and the filling of its blocks overlap
 * that kernel's tail instead of following it. The price is a rule every kernel keeps: it calls
 * sdc_grid_wait() before its first access to memory another kernel writes or reads (inputs,
 * outputs, scratch: the wait returns once the previous kernel has completed and its writes are
 * visible), and only then sdc_grid_release(), which lets the next kernel start; so at most one
 * kernel runs ahead, waiting, and the order of every access is the stream's. Before the wait a
 * kernel computes from its parameters only, or reads what no kernel writes (weights: uploaded
 * by copies, never a kernel's output; stream.cu's first copies feed values from them, so this
 * must stay true). Without
 * the launch attribute (d->pdl = 0) both are no-ops and launches are the stream's plain order. */
SDC_D void sdc_grid_wait(void) { asm volatile("griddepcontrol.wait;" ::: "memory"); }
SDC_D void sdc_grid_release(void) { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
/* The two at a kernel's start (kernels with nothing to do before the wait). */
SDC_D void sdc_grid_enter(void) {
    sdc_grid_wait();
    sdc_grid_release();
}
/* The two the other way round, for the int8 preparation kernels before the streaming matmul
 * (sdc_mm_params.early), whose next kernel is always that matmul: it may then start while the
 * kernel before the preparation still runs, and its work before the wait reads only weights
 * (stream.cu's first copies). Still
 * correct under the rule: the matmul's wait returns once the preparation has completed, which
 * is after the preparation's own wait on the kernel before it. Two kernels may then wait at
 * once, each launched only after every block before it is resident, so none starves another. */
SDC_D void sdc_grid_release_early(void) {
    sdc_grid_release();
    sdc_grid_wait();
}

template <typename... K, typename... A>
static cudaError_t sdc_launch(const sdc_dev *d, void (*fn)(K...), dim3 grid, dim3 block, size_t smem, A... args) {
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = d->pdl ? 1 : 0;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = d->stream;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    const cudaError_t e = cudaLaunchKernelEx(&cfg, fn, args...);
    const cudaError_t l = cudaGetLastError();
    return e != cudaSuccess ? e : l;
}

/* The block's best candidate (every thread passes one; the answer is valid in thread 0). NT:
 * the block size. Contains a __syncthreads: call from every thread. */
template <int NT, typename B> SDC_D B sdc_block_best(B b) {
    __shared__ B wbest[NT / 32];
    b = sdc_warp_best(b);
    if ((threadIdx.x & 31) == 0) wbest[threadIdx.x >> 5] = b;
    __syncthreads();
    if (threadIdx.x == 0)
        for (int w = 1; w < NT / 32; w++) sdc_offer(&b, wbest[w].v, wbest[w].i);
    return b;
}
