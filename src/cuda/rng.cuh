/* rng.cuh: the seeded sampler's randomness on the device, operation for operation the host's
 * (src/sample/rng.c, rng.h): Philox4x32-10 bits keyed by (seed, position, stream, index), the
 * libm-free log and the Gumbel transform and its cheap upper bound. Only integer operations and
 * IEEE double +, -, *, / appear; the kernels are compiled with --fmad=false, so nothing is
 * contracted into a multiply-add and every double operation rounds exactly as the CPU's. The
 * functions are __host__ __device__: selfcheck.cu runs these same bodies on the CPU against the
 * C ones for many bit patterns. */
#pragma once
#include "cuda/common.cuh"

#define SDC_PHILOX_M0 0xD2511F53u
#define SDC_PHILOX_M1 0xCD9E8D57u
#define SDC_PHILOX_W0 0x9E3779B9u
#define SDC_PHILOX_W1 0xBB67AE85u

/* One Philox4x32-10 block: key {seed lo, seed hi}, counter {clo lo, clo hi, chi lo, chi hi}. */
SDC_HD void sdc_philox(uint64_t seed, uint64_t chi, uint64_t clo, uint32_t out[4]) {
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    uint32_t c0 = (uint32_t)clo, c1 = (uint32_t)(clo >> 32), c2 = (uint32_t)chi, c3 = (uint32_t)(chi >> 32);
#pragma unroll
    for (int r = 0; r < 10; r++) {
        if (r > 0) { k0 += SDC_PHILOX_W0; k1 += SDC_PHILOX_W1; }
        uint64_t p0 = (uint64_t)SDC_PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)SDC_PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* sd_rng_bits: 52 bits; one block serves indices 2j and 2j+1 (words 0,1 and 2,3). */
SDC_HD uint64_t sdc_rng_bits(uint64_t seed, int64_t pos, uint32_t stream, uint32_t index) {
    uint32_t o[4];
    sdc_philox(seed, ((uint64_t)stream << 32) | (index >> 1), (uint64_t)pos, o);
    return (index & 1) ? ((((uint64_t)o[3] << 32) | o[2]) >> 12) : ((((uint64_t)o[1] << 32) | o[0]) >> 12);
}

#define SDC_LN2_HI 0x1.62e42feep-1
#define SDC_LN2_LO 0x1.a39ef35793c76p-33
#define SDC_SQRT_HALF_BITS 0x3fe6a09e667f3bcdull
#define SDC_TWO52 4503599627370496.0

/* sd_rng_log, the same operations in the same order. */
SDC_HD double sdc_rng_log(double x) {
    uint64_t ix = sdc_d2u(x) + (0x3ff0000000000000ull - SDC_SQRT_HALF_BITS);
    double m = sdc_u2d((ix & 0x000fffffffffffffull) + SDC_SQRT_HALF_BITS);
    double k = sdc_u2d(0x4330000000000000ull + (ix >> 52)) - (SDC_TWO52 + 1023.0);
    double f = m - 1.0;
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
    return k * SDC_LN2_HI + (lm + k * SDC_LN2_LO);
}

/* sd_gumbel_of_bits: -log(-log(u)), u = (bits + 0.5) 2^-52. */
SDC_HD double sdc_gumbel_of_bits(uint64_t bits) {
    double u = sdc_u2d(0x4330000000000000ull | bits) - SDC_TWO52;
    u = (u + 0.5) * (1.0 / SDC_TWO52);
    return -sdc_rng_log(-sdc_rng_log(u));
}

/* sd_gumbel_bound_of_bits: an upper bound from the exponent of 1 - u. */
SDC_HD double sdc_gumbel_bound_of_bits(uint64_t bits) {
    double w = sdc_u2d(0x4330000000000000ull | (bits ^ 0x000fffffffffffffull));
    double om = (w - SDC_TWO52 + 0.5) * (1.0 / SDC_TWO52);
    double e = sdc_u2d(0x4330000000000000ull + (sdc_d2u(om) >> 52));
    return -(e - (SDC_TWO52 + 1023.0)) * 0x1.62e42fefa39efp-1 + 1e-9;
}

/* sample.c keeps a token only while exp(z - zmax) > 0 (its probability does not underflow).
 * For d = z - zmax <= 0 that holds exactly when d >= SDC_EXP_POS_MIN, the least double above
 * -1075 ln 2 (below it exp rounds to 0, at and above it to >= 2^-1074); a comparison replaces the
 * exp, and the self-check confirms the host's libm agrees at that boundary. */
#define SDC_EXP_POS_MIN (-0x1.74910d52d3051p+9)
SDC_HD bool sdc_prob_positive(double d) { return d >= SDC_EXP_POS_MIN; }

/* ---- the unfiltered Gumbel-max sampler's per-token step (sample.c, gumbel_unfiltered) ---- */

/* (v, id) beats (bv, bid) in double: larger v, ties to the lower id; id < 0 is "none". */
SDC_HD bool sdc_dbeats(double v, int32_t i, double bv, int32_t bi) {
    if (i < 0) return false;
    if (bi < 0) return true;
    return v > bv || (v == bv && i < bi);
}
/* Token `id` with logit x at (seed, pos): its Gumbel-max value z + g in *v, or false when the CPU
 * would never choose it: z = x / temp is -inf / NaN or so far below zmax that its probability
 * underflows, or its upper bound z + bound < thr, where thr = zmax + g(argmax token) is a value
 * some eligible token reaches, so the token cannot win or tie (rounding is monotone). */
SDC_HD bool sdc_gumbel_cand(float x, double temp, double zmax, double thr, uint64_t seed, int64_t pos, int32_t id,
                            double *v) {
    const double z = (double)x / temp;
    if (!sdc_prob_positive(z - zmax)) return false;
    const uint64_t bits = sdc_rng_bits(seed, pos, 0u, (uint32_t)id);
    if (!(z + sdc_gumbel_bound_of_bits(bits) >= thr)) return false;
    *v = z + sdc_gumbel_of_bits(bits);
    return true;
}
/* sd_argmax of the scattered row when the choice is greedy or the row's largest value is not
 * finite: am is the best (value, token id) over the row's entries (-1: all NaN), unmapped the
 * lowest token id outside the map (-1: none, or no map). Tokens outside the map read -inf. */
SDC_HD int32_t sdc_sample_argmax_answer(float am_v, int32_t am_i, int32_t unmapped) {
    if (am_i >= 0 && am_v != -INFINITY) return am_i;
    int32_t c = am_i;   /* lowest id holding -inf (the ties of the best), or -1 */
    if (unmapped >= 0 && (c < 0 || unmapped < c)) c = unmapped;
    return c < 0 ? 0 : c;
}
