/* generate.c: classic decoding (one target forward per token), the baseline every speculative
 * path must reproduce byte for byte at temperature 0, and the generation defaults. */
#include "decode/emit.h"
#include "speculative/spec_internal.h"
#include "util/err.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

double sd_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

specdec_gen_params specdec_gen_default_params(void) {
    specdec_gen_params p;
    memset(&p, 0, sizeof p);
    p.max_tokens = 128;
    p.sampling = specdec_sampling_default_params();
    return p;
}

/* Classic decoding is the round with no drafter (round.c): every round forwards the last token
 * alone (K = 1) and the backend chooses the next one, so classic and speculative decoding run one
 * code path and stop at exactly the same token. */
specdec_status specdec_generate(specdec_ctx *c, const specdec_tokenizer *tok,
                                const int32_t *prompt, int n_prompt, const specdec_gen_params *p,
                                int32_t **out_ids, int *n_out, specdec_gen_stats *stats,
                                specdec_err *err) {
    if (out_ids) *out_ids = NULL;
    if (n_out) *n_out = 0;
    if (!c || !p) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "specdec_generate: NULL argument");
    specdec_spec_stats s;
    specdec_status st = sd_round_generate(c, NULL, tok, prompt, n_prompt, p, NULL, out_ids, n_out, &s, err);
    if (stats) *stats = s.gen;
    return st;
}
