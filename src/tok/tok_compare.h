/* tok_compare.h: whether two tokenizer.json files tokenize alike (a draft model's and its target's). */
#ifndef SD_TOK_COMPARE_H
#define SD_TOK_COMPARE_H
#include "specdec.h"

/* SPECDEC_OK when the two tokenizer.json files give the same ids (tok_compare.c): same vocabulary,
 * merges in rank order, added tokens, normalizer, pre-tokenizer, post-processor, decoder and model
 * settings, whatever the formatting and key order; else SPECDEC_ERR_UNSUPPORTED naming the first
 * difference (the token, the merge rank, the added token or the section). */
specdec_status sd_tok_file_compare(const char *target_path, const char *draft_path, specdec_err *err);

#endif
