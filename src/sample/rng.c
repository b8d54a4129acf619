/* rng.c: Philox4x32-10 (see rng.h), the keyed 52-bit uniforms built on it, and a portable
 * natural log / Gumbel transform.
 *
 * Philox, written from the published round function: each round multiplies counter words 0
 * and 2 by two constants into 64-bit products, mixes the high halves with the other counter
 * words and the key, and the key is bumped by two Weyl constants between rounds. 10 rounds.
 *
 * sd_rng_log: x = 2^k * m with m in [sqrt(1/2), sqrt(2)) taken from the IEEE bits (integer
 * adds, shifts and masks only), then log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.1716,
 * as the odd series 2 (s + s^3/3 + ... + s^21/21) (truncation < 1e-18 relative), and
 * log(x) = k ln2_hi + (log(m) + k ln2_lo) with ln2_hi having 20 trailing zero bits so k ln2_hi
 * is exact. Only IEEE +, -, *, / on doubles (each correctly rounded) and exact bit operations:
 * the result is the same on every IEEE-754 machine and compiler that keeps FP contraction off
 * (this project builds ISO C11, where GCC/Clang default to -ffp-contract=off). */
#include "sample/rng.h"
#include <string.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u   /* golden ratio */
#define PHILOX_W1 0xBB67AE85u   /* sqrt(3) - 1 */

static void philox_round(uint32_t c[4], const uint32_t k[2]) {
    uint64_t p0 = (uint64_t)PHILOX_M0 * c[0];
    uint64_t p1 = (uint64_t)PHILOX_M1 * c[2];
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    uint32_t n0 = hi1 ^ c[1] ^ k[0];
    uint32_t n2 = hi0 ^ c[3] ^ k[1];
    c[0] = n0; c[1] = lo1; c[2] = n2; c[3] = lo0;
}

void sd_philox(uint64_t seed, uint64_t counter_hi, uint64_t counter_lo, uint32_t out[4]) {
    uint32_t k[2] = { (uint32_t)seed, (uint32_t)(seed >> 32) };
    uint32_t c[4] = { (uint32_t)counter_lo, (uint32_t)(counter_lo >> 32),
                      (uint32_t)counter_hi, (uint32_t)(counter_hi >> 32) };
    for (int r = 0; r < 10; r++) {
        if (r > 0) { k[0] += PHILOX_W0; k[1] += PHILOX_W1; }
        philox_round(c, k);
    }
    out[0] = c[0]; out[1] = c[1]; out[2] = c[2]; out[3] = c[3];
}

uint64_t sd_rng_bits(uint64_t seed, int64_t pos, uint32_t stream, uint32_t index) {
    uint32_t o[4];
    sd_philox(seed, ((uint64_t)stream << 32) | (index >> 1), (uint64_t)pos, o);
    return (index & 1) ? ((((uint64_t)o[3] << 32) | o[2]) >> 12)
                       : ((((uint64_t)o[1] << 32) | o[0]) >> 12);
}

/* One Philox round on lane variables (the same arithmetic as philox_round), written out so
 * the pair loop below has no inner arrays and GCC can vectorize across pairs. */
#define PHILOX_ROUND_LANES(a0, a1, a2, a3, k0, k1) do {                      \
        uint64_t p0_ = (uint64_t)PHILOX_M0 * a0, p1_ = (uint64_t)PHILOX_M1 * a2; \
        uint32_t n0_ = (uint32_t)(p1_ >> 32) ^ a1 ^ (k0);                     \
        uint32_t n2_ = (uint32_t)(p0_ >> 32) ^ a3 ^ (k1);                     \
        a1 = (uint32_t)p1_; a3 = (uint32_t)p0_; a0 = n0_; a2 = n2_;           \
    } while (0)

void sd_rng_bits_pairs(uint64_t seed, int64_t pos, uint32_t stream, uint32_t first_pair,
                       int npairs, uint64_t *out) {
    uint32_t key0[10], key1[10];
    key0[0] = (uint32_t)seed; key1[0] = (uint32_t)(seed >> 32);
    for (int r = 1; r < 10; r++) { key0[r] = key0[r - 1] + PHILOX_W0; key1[r] = key1[r - 1] + PHILOX_W1; }
    const uint32_t c0 = (uint32_t)(uint64_t)pos, c1 = (uint32_t)((uint64_t)pos >> 32);
    for (int j = 0; j < npairs; j++) {
        uint32_t a0 = c0, a1 = c1, a2 = first_pair + (uint32_t)j, a3 = stream;
        PHILOX_ROUND_LANES(a0, a1, a2, a3, key0[0], key1[0]);
        PHILOX_ROUND_LANES(a0, a1, a2, a3, key0[1], key1[1]);
        PHILOX_ROUND_LANES(a0, a1, a2, a3, key0[2], key1[2]);
        PHILOX_ROUND_LANES(a0, a1, a2, a3, key0[3], key1[3]);
        PHILOX_ROUND_LANES(a0, a1, a2, a3, key0[4], key1[4]);
        PHILOX_ROUND_LANES(a0, a1, a2, a3, key0[5], key1[5]);
        PHILOX_ROUND_LANES(a0, a1, a2, a3, key0[6], key1[6]);
        PHILOX_ROUND_LANES(a0, a1, a2, a3, key0[7], key1[7]);
        PHILOX_ROUND_LANES(a0, a1, a2, a3, key0[8], key1[8]);
        PHILOX_ROUND_LANES(a0, a1, a2, a3, key0[9], key1[9]);
        out[2 * j] = (((uint64_t)a1 << 32) | a0) >> 12;
        out[2 * j + 1] = (((uint64_t)a3 << 32) | a2) >> 12;
    }
}

double sd_rng_uniform(uint64_t seed, int64_t pos, uint32_t stream, uint32_t index) {
    return sd_rng_uniform_of_bits(sd_rng_bits(seed, pos, stream, index));
}

double sd_rng_gumbel(uint64_t seed, int64_t pos, uint32_t stream, uint32_t index) {
    return sd_gumbel_of_bits(sd_rng_bits(seed, pos, stream, index));
}

/* ---- portable log and Gumbel ------------------------------------------------------ */

static inline double bits_to_double(uint64_t b) { double d; memcpy(&d, &b, sizeof d); return d; }
static inline uint64_t double_to_bits(double d) { uint64_t b; memcpy(&b, &d, sizeof b); return b; }

#define LN2_HI 0x1.62e42feep-1            /* ln 2 cut to 33 significant bits: k * LN2_HI exact */
#define LN2_LO 0x1.a39ef35793c76p-33      /* ln 2 - LN2_HI */
#define SQRT_HALF_BITS 0x3fe6a09e667f3bcdull   /* bits of sqrt(1/2) */
#define TWO52 4503599627370496.0

double sd_rng_log(double x) {
    /* Shift the bits so [sqrt(1/2), sqrt(2)) maps onto one binade: the exponent field of ix
     * is then k + 1023 and its mantissa field, rebased on sqrt(1/2), is m. */
    uint64_t ix = double_to_bits(x) + (0x3ff0000000000000ull - SQRT_HALF_BITS);
    double m = bits_to_double((ix & 0x000fffffffffffffull) + SQRT_HALF_BITS);
    /* k as a double without an int->double conversion: 2^52 + e has e in its low bits. */
    double k = bits_to_double(0x4330000000000000ull + (ix >> 52)) - (TWO52 + 1023.0);
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
    return k * LN2_HI + (lm + k * LN2_LO);
}

double sd_rng_uniform_of_bits(uint64_t bits) {
    /* (bits + 0.5) * 2^-52 is exact in double: the numerator 2*bits+1 has at most 53 bits. */
    return ((double)bits + 0.5) * (1.0 / TWO52);
}

double sd_gumbel_of_bits(uint64_t bits) {
    double u = bits_to_double(0x4330000000000000ull | bits) - TWO52;   /* (double)bits, exact */
    u = (u + 0.5) * (1.0 / TWO52);
    return -sd_rng_log(-sd_rng_log(u));
}
