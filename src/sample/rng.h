/* rng.h: Philox4x32-10, a counter-based random generator (Salmon et al., "Parallel random
 * numbers: as easy as 1, 2, 3", SC'11), the keyed uniforms built on it, and a portable
 * (libm-free) Gumbel transform.
 *
 * Why counter-based: every random number specdec uses is a pure function of
 * (seed, position, stream, index), with no generator state carried between calls. A classic
 * seeded run and a speculative seeded run therefore draw the same numbers at the same position
 * whatever order they are computed in, and a verify pass can recompute them for any position.
 *
 * Why libm-free: seeded sampling must pick the same token on every machine and build. libm's
 * log may differ in the last bit across platforms and versions; sd_rng_log uses only IEEE
 * +, -, *, / and exact bit operations, which round identically everywhere. */
#ifndef SD_RNG_H
#define SD_RNG_H
#include <stdint.h>
#include "sample/rng_core.h"

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

/* 52 random bits keyed by (seed, pos, stream, index). One Philox block serves two indices:
 * counter_lo = pos, counter_hi = stream << 32 | index >> 1; an even index takes words
 * (w1 << 32 | w0) >> 12, an odd index (w3 << 32 | w2) >> 12. (Before the Gumbel speedup every
 * index had its own block with words 0, 1; index 0 of every stream is unchanged.) */
uint64_t sd_rng_bits(uint64_t seed, int64_t pos, uint32_t stream, uint32_t index);

/* The bits of indices 2*first_pair .. 2*(first_pair + npairs) - 1 into out[0 .. 2*npairs),
 * equal to sd_rng_bits of each; a loop GCC vectorizes (32x32->64 multiplies). */
void sd_rng_bits_pairs(uint64_t seed, int64_t pos, uint32_t stream, uint32_t first_pair,
                       int npairs, uint64_t *out);

/* A uniform double in the open interval (0, 1): (bits + 0.5) / 2^52 of sd_rng_bits, so the
 * extremes are 2^-53 and 1 - 2^-53 (log(u) and log(1 - u) are always finite). */
double sd_rng_uniform(uint64_t seed, int64_t pos, uint32_t stream, uint32_t index);
double sd_rng_uniform_of_bits(uint64_t bits);

/* Standard Gumbel noise -log(-log(u)) of the uniform above, computed with sd_rng_log (not
 * libm); finite, in about [-3.6, 36.8]. Accuracy against the exact value (tested against
 * libm over 2M uniforms and the extremes): |error| < 1e-13 * max(1, |g|). */
double sd_rng_gumbel(uint64_t seed, int64_t pos, uint32_t stream, uint32_t index);
double sd_gumbel_of_bits(uint64_t bits);

/* An upper bound of sd_gumbel_of_bits(bits) from the exponent of 1 - u alone (a few exact
 * operations): -floor(log2(1 - u)) ln2 + 1e-9. Seeded sampling skips a token when
 * z + bound < best-so-far, which can never change the argmax. */
static inline double sd_gumbel_bound_of_bits(uint64_t bits) { return sd_gumbel_bound_of(bits); }

/* Natural log for finite normal x > 0 (other inputs: unspecified finite or non-finite value,
 * never UB). Bitwise reproducible; relative error below 4e-16 (tested against libm). */
double sd_rng_log(double x);

#endif
