/* bits.h: bit casts and the 16-bit float conversions, written once for the C engine and the CUDA
 * kernels. Compiled as C these are static inline functions (util/dtype.h, sample/rng_core.h);
 * compiled by nvcc they are __host__ __device__, so a kernel converts exactly as the CPU does and
 * the CUDA self-check runs the same bodies on the host.
 * bf16: round to nearest even (as PyTorch does), NaN stays NaN (quieted). f16: IEEE binary16,
 * round to nearest even, overflow to infinity, subnormals kept. */
#ifndef SD_BITS_H
#define SD_BITS_H
#include <stdint.h>
#include <string.h>
#include "util/hostdev.h"

/* To name(From x): the bits of x read as To (the device intrinsic on the GPU, memcpy elsewhere). */
#ifdef __CUDA_ARCH__
#define SD_BITCAST(name, To, From, intrinsic) \
    SD_HD_FN To name(From x) { return (To)intrinsic(x); }
#else
#define SD_BITCAST(name, To, From, intrinsic) \
    SD_HD_FN To name(From x) { To y; memcpy(&y, &x, sizeof y); return y; }
#endif
SD_BITCAST(sd_u2f, float, uint32_t, __uint_as_float)
SD_BITCAST(sd_f2u, uint32_t, float, __float_as_uint)
SD_BITCAST(sd_u2d, double, uint64_t, __longlong_as_double)
SD_BITCAST(sd_d2u, uint64_t, double, __double_as_longlong)
#undef SD_BITCAST

SD_HD_FN float sd_bf16_to_f32(uint16_t h) { return sd_u2f((uint32_t)h << 16); }
SD_HD_FN uint16_t sd_f32_to_bf16(float f) {
    uint32_t u = sd_f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* f16 -> f32 by the bits (kernels on hot paths use the hardware convert, which gives the same
 * value for every non-NaN input). */
SD_HD_FN float sd_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, ex = (h >> 10) & 0x1f, man = h & 0x3ffu, u;
    if (ex == 0) {
        if (man == 0) u = sign;
        else { /* subnormal: renormalize */
            ex = 127 - 15 + 1;
            while (!(man & 0x400u)) { man <<= 1; ex--; }
            man &= 0x3ffu;
            u = sign | (ex << 23) | (man << 13);
        }
    } else if (ex == 31) u = sign | 0x7f800000u | (man << 13);
    else u = sign | ((ex + 127 - 15) << 23) | (man << 13);
    return sd_u2f(u);
}

SD_HD_FN uint16_t sd_f32_to_f16(float f) {
    uint32_t u = sd_f2u(f);
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* overflow -> inf */
    if (a < 0x38800000u) { /* subnormal or zero in f16 */
        if (a < 0x33000000u) return (uint16_t)sign;
        /* value = m * 2^(e-150); the f16 subnormal unit is 2^-24, so q = m * 2^(e-126) */
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        uint32_t sh = 126 - e; /* 14..24 here */
        uint32_t q = m >> sh, rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - (0x70u << 23);
    return (uint16_t)(sign | (r >> 13));
}

#endif
