/* rng.c: Philox4x32-10 (see rng.h). Written from the published round function: each round
 * multiplies counter words 0 and 2 by two constants into 64-bit products, mixes the high
 * halves with the other counter words and the key, and the key is bumped by two Weyl
 * constants between rounds. 10 rounds. */
#include "sample/rng.h"
#include <math.h>

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

double sd_rng_uniform(uint64_t seed, int64_t pos, uint32_t stream, uint32_t index) {
    uint32_t o[4];
    sd_philox(seed, ((uint64_t)stream << 32) | index, (uint64_t)pos, o);
    uint64_t bits = (((uint64_t)o[1] << 32) | o[0]) >> 12;     /* 52 bits */
    /* (bits + 0.5) * 2^-52 is exact in double: the numerator 2*bits+1 has at most 53 bits. */
    return ((double)bits + 0.5) * (1.0 / 4503599627370496.0);
}

double sd_rng_gumbel(uint64_t seed, int64_t pos, uint32_t stream, uint32_t index) {
    return -log(-log(sd_rng_uniform(seed, pos, stream, index)));
}
