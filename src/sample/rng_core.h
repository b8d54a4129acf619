/* rng_core.h: the bodies of the seeded sampler's randomness, compiled as C for the CPU
 * (sample/rng.c, rng.h) and as CUDA C++ for host and device (cuda/rng.cuh, the sampling kernel),
 * so the two backends draw the same bits from one source: Philox4x32-10 keyed by (seed, position,
 * stream, index), the libm-free natural log, the Gumbel transform and its cheap upper bound.
 *
 * Philox, written from the published round function: each round multiplies counter words 0 and 2
 * by two constants into 64-bit products, mixes the high halves with the other counter words and
 * the key, and the key is bumped by two Weyl constants between rounds. 10 rounds.
 *
 * The log: x = 2^k * m with m in [sqrt(1/2), sqrt(2)) taken from the IEEE bits (integer adds,
 * shifts and masks only), then log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.1716, as the
 * odd series 2 (s + s^3/3 + ... + s^21/21) (truncation < 1e-18 relative), and
 * log(x) = k ln2_hi + (log(m) + k ln2_lo) with ln2_hi having 20 trailing zero bits so k ln2_hi is
 * exact. Only IEEE +, -, *, / on doubles (each correctly rounded) and exact bit operations: the
 * result is the same on every IEEE-754 machine and compiler that keeps FP contraction off (ISO C11
 * builds, where GCC/Clang default to -ffp-contract=off; the CUDA kernels build with --fmad=false). */
#ifndef SD_RNG_CORE_H
#define SD_RNG_CORE_H
#include <stdint.h>
#include <string.h>

#include "util/bits.h"

#define SD_PHILOX_M0 0xD2511F53u
#define SD_PHILOX_M1 0xCD9E8D57u
#define SD_PHILOX_W0 0x9E3779B9u   /* golden ratio */
#define SD_PHILOX_W1 0xBB67AE85u   /* sqrt(3) - 1 */
#define SD_RNG_TWO52 4503599627370496.0

/* One Philox4x32-10 block: key {seed lo, seed hi}, counter {clo lo, clo hi, chi lo, chi hi}. */
SD_HD_FN void sd_philox_block(uint64_t seed, uint64_t chi, uint64_t clo, uint32_t out[4]) {
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    uint32_t c0 = (uint32_t)clo, c1 = (uint32_t)(clo >> 32), c2 = (uint32_t)chi, c3 = (uint32_t)(chi >> 32);
#ifdef __CUDACC__
#pragma unroll
#endif
    for (int r = 0; r < 10; r++) {
        if (r > 0) { k0 += SD_PHILOX_W0; k1 += SD_PHILOX_W1; }
        uint64_t p0 = (uint64_t)SD_PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)SD_PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* 52 bits keyed by (seed, pos, stream, index); one block serves indices 2j and 2j+1 (words 0,1
 * and 2,3). */
SD_HD_FN uint64_t sd_rng_bits_of(uint64_t seed, int64_t pos, uint32_t stream, uint32_t index) {
    uint32_t o[4];
    sd_philox_block(seed, ((uint64_t)stream << 32) | (index >> 1), (uint64_t)pos, o);
    return (index & 1) ? ((((uint64_t)o[3] << 32) | o[2]) >> 12) : ((((uint64_t)o[1] << 32) | o[0]) >> 12);
}

#define SD_LN2_HI 0x1.62e42feep-1            /* ln 2 cut to 33 significant bits: k * LN2_HI exact */
#define SD_LN2_LO 0x1.a39ef35793c76p-33      /* ln 2 - LN2_HI */
#define SD_SQRT_HALF_BITS 0x3fe6a09e667f3bcdull   /* bits of sqrt(1/2) */

/* Natural log for finite normal x > 0 (see the file comment). */
SD_HD_FN double sd_rng_log_of(double x) {
    /* Shift the bits so [sqrt(1/2), sqrt(2)) maps onto one binade: the exponent field of ix is
     * then k + 1023 and its mantissa field, rebased on sqrt(1/2), is m. */
    uint64_t ix = sd_d2u(x) + (0x3ff0000000000000ull - SD_SQRT_HALF_BITS);
    double m = sd_u2d((ix & 0x000fffffffffffffull) + SD_SQRT_HALF_BITS);
    /* k as a double without an int->double conversion: 2^52 + e has e in its low bits. */
    double k = sd_u2d(0x4330000000000000ull + (ix >> 52)) - (SD_RNG_TWO52 + 1023.0);
    double f = m - 1.0;                    /* exact (Sterbenz) */
    double s = f / (2.0 + f), s2 = s * s;
    double p = 1.0 / 21;
    p = 1.0 / 19 + s2 * p;
    p = 1.0 / 17 + s2 * p;
    p = 1.0 / 15 + s2 * p;
    p = 1.0 / 13 + s2 * p;
    p = 1.0 / 11 + s2 * p;
    p = 1.0 / 9 + s2 * p;
    p = 1.0 / 7 + s2 * p;
    p = 1.0 / 5 + s2 * p;
    p = 1.0 / 3 + s2 * p;
    double lm = 2.0 * s + (2.0 * s) * (s2 * p);
    return k * SD_LN2_HI + (lm + k * SD_LN2_LO);
}

/* -log(-log(u)), u = (bits + 0.5) 2^-52 (exact in double: 2*bits+1 has at most 53 bits). */
SD_HD_FN double sd_gumbel_of(uint64_t bits) {
    double u = sd_u2d(0x4330000000000000ull | bits) - SD_RNG_TWO52;   /* (double)bits, exact */
    u = (u + 0.5) * (1.0 / SD_RNG_TWO52);
    return -sd_rng_log_of(-sd_rng_log_of(u));
}

/* An upper bound of sd_gumbel_of(bits) from the exponent of 1 - u alone: g = -log(-log u) <=
 * -log(1 - u) since -log u >= 1 - u. 1 - u = (w + 0.5) 2^-52 with w = 2^52 - 1 - bits is exact in
 * double; with 1 - u >= 2^e (e its binary exponent), g <= -e ln2. The 1e-9 covers the rounding of
 * sd_gumbel_of (< 1e-13 absolute). Integer <-> double moves go through the bits of 2^52 + n
 * (exact, and vectorizable). */
SD_HD_FN double sd_gumbel_bound_of(uint64_t bits) {
    double w = sd_u2d(0x4330000000000000ull | (bits ^ 0x000fffffffffffffull));
    double om = (w - SD_RNG_TWO52 + 0.5) * (1.0 / SD_RNG_TWO52);
    double e = sd_u2d(0x4330000000000000ull + (sd_d2u(om) >> 52));
    return -(e - (SD_RNG_TWO52 + 1023.0)) * 0x1.62e42fefa39efp-1 + 1e-9;
}

#endif
