/* rng.cuh: the seeded sampler's per-token step on the device. The randomness itself (Philox4x32-10
 * keyed by (seed, position, stream, index), the libm-free log, the Gumbel transform and its bound)
 * is sample/rng_core.h, compiled here for host and device from the same source as the CPU's. Only
 * integer operations and IEEE double +, -, *, / appear; the kernels are compiled with
 * --fmad=false, so nothing is contracted into a multiply-add and every double operation rounds
 * exactly as the CPU's. The functions are __host__ __device__: selfcheck.cu runs them, built by
 * the CUDA toolchain, on the CPU against the C build for many bit patterns. */
#pragma once
#include "cuda/common.cuh"

/* Philox, the log, the Gumbel transform and its bound: sample/rng_core.h, the CPU's own source
 * (sd_philox_block, sd_rng_bits_of, sd_rng_log_of, sd_gumbel_of, sd_gumbel_bound_of). */
#include "sample/rng_core.h"

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
    const uint64_t bits = sd_rng_bits_of(seed, pos, 0u, (uint32_t)id);
    if (!(z + sd_gumbel_bound_of(bits) >= thr)) return false;
    *v = z + sd_gumbel_of(bits);
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
