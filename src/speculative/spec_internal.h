/* spec_internal.h: pieces of the speculative round shared between round.c, probe.c,
 * adaptive.c and stats.c. */
#ifndef SD_SPEC_INTERNAL_H
#define SD_SPEC_INTERNAL_H
#include "speculative/drafter.h"

/* Block-vs-chain exactness probe from the target's current state (n_past = P): `draws` times,
 * forward K random tokens in one call and then one by one, compare the logits byte for byte,
 * and truncate back to P. *ok = 1 when every byte matched. On a mismatch, where says the first
 * differing (draw, row, column). */
specdec_status sd_spec_probe(const sd_target *t, int K, int draws, uint64_t seed, int *ok, char *where,
                             size_t where_n, specdec_err *err);

void sd_auto_init(sd_auto *a);
int sd_auto_pick(sd_auto *a);
void sd_auto_update(sd_auto *a, int width, int emitted, double ms);
/* The width with the best measured rate (1 when nothing measured). */
int sd_auto_best(const sd_auto *a);

/* The whole speculative generation on any backend's target (specdec_spec_generate wraps a CPU
 * ctx into one). model supplies the EOS ids of config.json to the emitter (may be NULL). */
specdec_status sd_spec_generate_target(const sd_target *t, const specdec_model *model, specdec_drafter *d,
                                       const specdec_tokenizer *tok, const int32_t *prompt, int n_prompt,
                                       const specdec_gen_params *gp, const specdec_spec_params *sp,
                                       int32_t **out_ids, int *n_out, specdec_spec_stats *stats, specdec_err *err);

#endif
