/* rng.h: Philox4x32-10, a counter-based random generator (Salmon et al., "Parallel random
 * numbers: as easy as 1, 2, 3", SC'11), and the keyed uniforms built on it.
 *
 * Why counter-based: every random number specdec uses is a pure function of
 * (seed, position, stream, index), with no generator state carried between calls. A classic
 * seeded run and a speculative seeded run therefore draw the same numbers at the same position
 * whatever order they are computed in, and a verify pass can recompute them for any position. */
#ifndef SD_RNG_H
#define SD_RNG_H
#include <stdint.h>

/* Streams: independent families of numbers at one position. */
enum {
    SD_RNG_STREAM_GUMBEL = 0,    /* index = token id: Gumbel noise of seeded sampling */
    SD_RNG_STREAM_ACCEPT = 1,    /* index = draft slot: acceptance draw u < p/q (rejection mode) */
    SD_RNG_STREAM_RESIDUAL = 2,  /* index = draft slot: draw for the residual / bonus token */
    SD_RNG_STREAM_DRAFT = 3      /* index = draft slot: the drafter's own sampling from q */
};

/* One Philox4x32-10 block. Key = {seed lo32, seed hi32}; counter words
 * {counter_lo lo32, counter_lo hi32, counter_hi lo32, counter_hi hi32}. Writes 4 words. */
void sd_philox(uint64_t seed, uint64_t counter_hi, uint64_t counter_lo, uint32_t out[4]);

/* A uniform double in the open interval (0, 1), keyed by (seed, pos, stream, index):
 * counter_lo = pos, counter_hi = stream << 32 | index. 52 random bits, value (k + 0.5) / 2^52,
 * so the extremes are 2^-53 and 1 - 2^-53 (log(u) and log(1 - u) are always finite). */
double sd_rng_uniform(uint64_t seed, int64_t pos, uint32_t stream, uint32_t index);

/* Standard Gumbel noise -log(-log(u)) from the uniform above; finite, in about [-3.6, 36.8]. */
double sd_rng_gumbel(uint64_t seed, int64_t pos, uint32_t stream, uint32_t index);

#endif
