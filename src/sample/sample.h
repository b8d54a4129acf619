/* sample.h: token selection from one logits row (V floats, V up to ~152k), internal API.
 *
 * Filtering (sd_filter), applied in this order, each on the output of the previous one:
 *   1. temperature: z_i = logit_i / T (in double). T <= 0 (or NaN) means greedy: the result is
 *      a one-hot distribution on sd_argmax(logits).
 *   2. top-k (k > 0 and k < V): keep the k largest logits; equal logits are ranked by lower id.
 *   3. top-p (0 <= top_p < 1): over the probabilities of the tokens still kept (softmax of z
 *      renormalized over them), sorted descending (ties: lower id first), keep the shortest
 *      prefix whose mass >= top_p; at least one token.
 *   4. min-p (0 < min_p): drop tokens with p_i < min_p * p_max (p_max: the most likely kept
 *      token, which is always kept). min_p > 1 acts as 1.
 *   5. renormalize over the kept tokens; tokens whose probability underflows to 0 are dropped.
 * Rows with no finite maximum (all -inf / NaN, or a +inf logit) give the one-hot of sd_argmax.
 * NaN logits are never chosen (they rank below -inf).
 *
 * Two ways to draw from a filtered distribution:
 * - seeded (Gumbel-max): argmax over kept tokens of z_i + g_i with
 *   g_i = sd_rng_gumbel(seed, pos, SD_RNG_STREAM_GUMBEL, i); a pure function of
 *   (params, logits row, pos). specdec_sample at T > 0 is exactly sd_sample(): classic and
 *   speculative seeded runs agree byte for byte.
 * - inverse CDF (sd_dist_sample / sd_residual_sample) with a caller-supplied uniform, for
 *   standard speculative (rejection) sampling.
 *
 * Nothing here allocates after init: sd_sampler_ws and sd_dist are sized for V once. */
#ifndef SD_SAMPLE_H
#define SD_SAMPLE_H
#include "specdec.h"

/* A filtered distribution over the vocabulary, stored sparse: the n kept tokens in ascending id
 * order (n == vocab means every token is kept, and then id[i] == i). */
typedef struct sd_dist {
    int vocab;       /* V this dist was built for */
    int n;           /* kept tokens, 1..cap once built */
    int cap;         /* capacity of the arrays below (V) */
    int32_t *id;     /* (cap) kept ids, strictly ascending */
    double *p;       /* (cap) probabilities, sum ~ 1 */
    double *z;       /* (cap) scaled logits logit/T (0 for a greedy one-hot), for Gumbel-max */
    double total;    /* sum of p[0..n) in id order, the exact mass inverse-CDF walks over */
} sd_dist;

specdec_status sd_dist_init(sd_dist *d, int vocab, specdec_err *err);
void sd_dist_free(sd_dist *d);
/* Make d the one-hot distribution on `id` (0 <= id < d->vocab). */
void sd_dist_set_onehot(sd_dist *d, int32_t id);
/* Probability of `id` (0 when not kept or out of range). O(1) when dense, O(log n) when sparse. */
double sd_dist_prob(const sd_dist *d, int32_t id);
/* Inverse CDF in ascending id order: the first kept id whose cumulative mass exceeds u * total.
 * u in [0, 1). Returns -1 for an empty dist. */
int32_t sd_dist_sample(const sd_dist *d, double u);
/* Sample from norm(max(0, p - q)) by inverse CDF in ascending id order (the residual of
 * speculative sampling after draft q was rejected). When the residual is all zero (p <= q
 * everywhere, e.g. p == q), samples from p. p and q must share a vocab. */
int32_t sd_residual_sample(const sd_dist *p, const sd_dist *q, double u);
/* Gumbel-max over the kept tokens: argmax of z_i + sd_rng_gumbel(seed, pos, GUMBEL, id_i);
 * ties go to the lower id. A one-hot dist returns its token without drawing. Batched
 * uniforms and exact pruning (tokens that provably cannot win skip the logs); always the
 * same token as sd_dist_gumbel_ref, the scalar reference that draws every kept token. */
int32_t sd_dist_gumbel(const sd_dist *d, uint64_t seed, int64_t pos);
int32_t sd_dist_gumbel_ref(const sd_dist *d, uint64_t seed, int64_t pos);

/* Reusable scratch for filtering a row of V logits. */
typedef struct sd_cand { double z, e; int32_t id; int32_t pad; } sd_cand;
typedef struct sd_sampler_ws {
    int vocab;
    sd_cand *cand;   /* (V) candidates: scaled logit, e = exp(z - z_max), id */
    int32_t *heap;   /* (V) top-k min-heap of ids */
    sd_dist dist;    /* the distribution sd_sample builds */
} sd_sampler_ws;

specdec_status sd_sampler_ws_init(sd_sampler_ws *ws, int vocab, specdec_err *err);
void sd_sampler_ws_free(sd_sampler_ws *ws);

/* Whether top-k, top-p or min-p filter a vocabulary of `vocab` under p (else a seeded choice is a
 * Gumbel-max over the whole temperature-scaled row). */
bool sd_sampling_filtered(const specdec_sampling_params *p, int vocab);

/* Index of the largest logit; the lowest index wins ties; NaN is never chosen; 0 when every
 * value is NaN. n >= 1. */
int32_t sd_argmax(const float *logits, int n);

/* Build the filtered distribution of `logits` (V = ws->vocab = out->vocab floats, not modified)
 * under p (order in the header comment) into *out. */
specdec_status sd_filter(sd_sampler_ws *ws, const specdec_sampling_params *p, const float *logits,
                         int vocab, sd_dist *out, specdec_err *err);

/* The token specdec_sample returns: greedy argmax at T <= 0, else sd_filter into ws->dist then
 * sd_dist_gumbel(ws->dist, p->seed, pos). With no top-k / top-p / min-p the same token is
 * computed straight from the logits (ws and ws->dist are not touched; ws may be NULL).
 * Returns -1 only for invalid arguments. */
int32_t sd_sample(sd_sampler_ws *ws, const specdec_sampling_params *p, const float *logits,
                  int vocab, int64_t pos);

#endif
