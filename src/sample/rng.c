/* rng.c: the keyed draws of rng.h on the CPU. The arithmetic (Philox4x32-10, the portable log,
 * the Gumbel transform) is sample/rng_core.h's, shared with the CUDA backend; this file adds the
 * vectorizable pair loop and the entry points. */
#include "sample/rng.h"

void sd_philox(uint64_t seed, uint64_t counter_hi, uint64_t counter_lo, uint32_t out[4]) {
    sd_philox_block(seed, counter_hi, counter_lo, out);
}

uint64_t sd_rng_bits(uint64_t seed, int64_t pos, uint32_t stream, uint32_t index) {
    return sd_rng_bits_of(seed, pos, stream, index);
}

/* One Philox round on lane variables (the same arithmetic as sd_philox_block's), written out so
 * the pair loop below has no inner arrays and GCC can vectorize across pairs. */
#define PHILOX_ROUND_LANES(a0, a1, a2, a3, k0, k1) do {                      \
        uint64_t p0_ = (uint64_t)SD_PHILOX_M0 * a0, p1_ = (uint64_t)SD_PHILOX_M1 * a2; \
        uint32_t n0_ = (uint32_t)(p1_ >> 32) ^ a1 ^ (k0);                     \
        uint32_t n2_ = (uint32_t)(p0_ >> 32) ^ a3 ^ (k1);                     \
        a1 = (uint32_t)p1_; a3 = (uint32_t)p0_; a0 = n0_; a2 = n2_;           \
    } while (0)

void sd_rng_bits_pairs(uint64_t seed, int64_t pos, uint32_t stream, uint32_t first_pair,
                       int npairs, uint64_t *out) {
    uint32_t key0[10], key1[10];
    key0[0] = (uint32_t)seed; key1[0] = (uint32_t)(seed >> 32);
    for (int r = 1; r < 10; r++) { key0[r] = key0[r - 1] + SD_PHILOX_W0; key1[r] = key1[r - 1] + SD_PHILOX_W1; }
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

double sd_rng_log(double x) { return sd_rng_log_of(x); }

double sd_rng_uniform_of_bits(uint64_t bits) {
    /* (bits + 0.5) * 2^-52 is exact in double: the numerator 2*bits+1 has at most 53 bits. */
    return ((double)bits + 0.5) * (1.0 / SD_RNG_TWO52);
}

double sd_gumbel_of_bits(uint64_t bits) { return sd_gumbel_of(bits); }
