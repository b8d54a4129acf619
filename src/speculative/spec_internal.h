/* spec_internal.h: pieces of the speculative round shared between round.c, probe.c,
 * adaptive.c and stats.c. */
#ifndef SD_SPEC_INTERNAL_H
#define SD_SPEC_INTERNAL_H
#include "speculative/drafter.h"

/* Block-vs-chain exactness probe from the target's current state (n_past = P): `draws` times,
 * forward K random tokens in one call and then one by one, compare the logits byte for byte,
 * and truncate back to P. *ok = 1 when every byte matched. On a mismatch, where says the first
 * differing (draw, row, column). */
specdec_status sd_spec_probe(specdec_ctx *c, int K, int draws, uint64_t seed, int *ok, char *where,
                             size_t where_n, specdec_err *err);

/* The probe with its cache on the drafter (keyed by model, backend and kernels, threads, KV dtype):
 * runs it when needed from the context's current state, fills the probe fields and note of s, and
 * says in *use whether speculation may run (fail closed unless allow_inexact). */
specdec_status sd_spec_probe_cached(specdec_ctx *c, specdec_drafter *d, const specdec_spec_params *sp, int K,
                                    specdec_spec_stats *s, bool *use, specdec_err *err);

/* stats.c: the cost of one clock read (ms); the derived fields of s once a generation ended; the
 * drafter profile's difference p1 - p0. */
double sd_clock_cost_ms(void);
void sd_spec_stats_finish(specdec_spec_stats *s, const specdec_spec_params *sp, bool spec_on);
void sd_spec_stats_profile(specdec_spec_stats *s, const sd_drafter_prof *p0, const sd_drafter_prof *p1, double clock_ms);

void sd_auto_init(sd_auto *a);
/* The width of the next round. */
int sd_auto_pick(sd_auto *a);
/* A round of that width ran: `drafted` drafts, `accepted` of them before the first rejection,
 * ms of round time. */
void sd_auto_update(sd_auto *a, int width, int drafted, int accepted, double ms);
/* The width with the best rate by the model (1 when nothing is measured), its expected tokens a
 * round and its cost (ms; 0 while no width has run). */
int sd_auto_best(const sd_auto *a);
double sd_auto_expect(const sd_auto *a, int width);
double sd_auto_cost(const sd_auto *a, int width);
/* Classic decoding (width 1) has the best rate on measured costs: speculation can stop. */
bool sd_auto_declines(const sd_auto *a);

/* The whole generation on context c with drafter d (NULL: classic decoding, the round with K = 1). */
specdec_status sd_round_generate(specdec_ctx *c, specdec_drafter *d, const specdec_tokenizer *tok,
                                 const int32_t *prompt, int n_prompt, const specdec_gen_params *gp,
                                 const specdec_spec_params *sp, int32_t **out_ids, int *n_out,
                                 specdec_spec_stats *stats, specdec_err *err);

#endif
