/* gen_config.h: the sampling defaults a model directory ships in generation_config.json. */
#ifndef SD_GEN_CONFIG_H
#define SD_GEN_CONFIG_H
#include "specdec.h"

/* Parse generation_config.json text (`path` names it in messages) onto *g, which holds the
 * library's defaults on entry: each key present replaces its default and is flagged in g->from_file.
 * Keys: temperature (>= 0), top_k (>= 0), top_p (0, 1], min_p [0, 1], do_sample (false: greedy,
 * whatever the temperature; true with no temperature: 1.0, Hugging Face's default), eos_token_id
 * (an id or a list of ids below `vocab`). Unknown keys are ignored; a bad value fails with
 * SPECDEC_ERR_CONFIG naming the file and the key. */
specdec_status sd_gen_config_parse(const char *json, size_t len, const char *path, int vocab,
                                   specdec_generation_config *g, specdec_err *err);
/* DIR/generation_config.json when it exists (g->present); absent is not an error. */
specdec_status sd_gen_config_load_dir(const char *dir, int vocab, specdec_generation_config *g, specdec_err *err);

#endif
