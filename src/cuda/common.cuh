/* common.cuh: device helpers the kernel files share (CUDA C++ only). Bit casts and the 16-bit
 * float conversions compile for host and device (__host__ __device__), so the self-check
 * (selfcheck.cu) can run the very functions the kernels use on the CPU and compare them with
 * src/util/dtype.h; loads of a run-time float dtype; the argmax comparator; warp reductions in
 * a fixed xor-butterfly order (lane l adds lane l^m, which is commutative, so every lane ends
 * with the same bits and the order depends only on the warp width). */
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "cuda/dev.h"

#define SDC_HD __host__ __device__ __forceinline__
#define SDC_D __device__ __forceinline__

SDC_HD float sdc_u2f(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}
SDC_HD uint32_t sdc_f2u(float f) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
#endif
}
SDC_HD double sdc_u2d(uint64_t u) {
#ifdef __CUDA_ARCH__
    return __longlong_as_double((long long)u);
#else
    double d;
    memcpy(&d, &u, 8);
    return d;
#endif
}
SDC_HD uint64_t sdc_d2u(double d) {
#ifdef __CUDA_ARCH__
    return (uint64_t)__double_as_longlong(d);
#else
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
#endif
}

/* ---- 16-bit floats: bit for bit src/util/dtype.h ---- */
SDC_HD float sdc_bf16_to_f32(uint16_t h) { return sdc_u2f((uint32_t)h << 16); }
SDC_HD uint16_t sdc_f32_to_bf16(float f) {
    uint32_t u = sdc_f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
/* f16 -> f32 by the bits (dtype.c's algorithm; kernels on hot paths use the hardware convert,
 * which gives the same value for every non-NaN input). */
SDC_HD float sdc_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, ex = (h >> 10) & 0x1f, man = h & 0x3ffu, u;
    if (ex == 0) {
        if (man == 0) u = sign;
        else {
            ex = 127 - 15 + 1;
            while (!(man & 0x400u)) { man <<= 1; ex--; }
            man &= 0x3ffu;
            u = sign | (ex << 23) | (man << 13);
        }
    } else if (ex == 31) u = sign | 0x7f800000u | (man << 13);
    else u = sign | ((ex + 127 - 15) << 23) | (man << 13);
    return sdc_u2f(u);
}
SDC_HD uint16_t sdc_f32_to_f16(float f) {
    uint32_t u = sdc_f2u(f);
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) {
        if (a < 0x33000000u) return (uint16_t)sign;
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        uint32_t sh = 126 - e;
        uint32_t q = m >> sh, rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - (0x70u << 23);
    return (uint16_t)(sign | (r >> 13));
}

/* Element i of a float array of run-time dtype dt (SDC_F32 / SDC_F16 / SDC_BF16), read through
 * the read-only cache. */
SDC_D float sdc_ldf(const void *p, size_t i, int dt) {
    if (dt == SDC_F32) return __ldg((const float *)p + i);
    unsigned short h = __ldg((const unsigned short *)p + i);
    if (dt == SDC_BF16) return __uint_as_float((uint32_t)h << 16);
    return __half2float(__ushort_as_half(h));
}

/* ---- argmax candidates ---- */
SDC_HD sdc_best sdc_best_none(void) {
    sdc_best b;
    b.v = sdc_u2f(0x7fc00000u);
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

/* Position of row t of a call: *base + off + t (base in device memory). */
SDC_D int sdc_pos(const int32_t *base, int off, int t) { return __ldg(base) + off + t; }

/* Launch status of the kernels just queued. */
static inline cudaError_t sdc_launched(void) { return cudaGetLastError(); }

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
