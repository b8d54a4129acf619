/* ctx.h: the target context (runtime + KV cache + position) and the internal forward call the
 * generation and speculative loops use. */
#ifndef SD_CTX_H
#define SD_CTX_H
#include "model/model.h"

struct specdec_ctx {
    const specdec_model *model;
    sd_runtime rt;
    sd_kv_cache kv;
    int n_past;
    float *x;        /* (max_batch, H) residual stream */
};

/* Forward T tokens (any T: split into max_batch chunks). logits (T - logits_from, V) receives rows
 * for positions logits_from..T-1 (NULL: none); hidden (T, H) the final-normed hidden states (NULL:
 * none). */
specdec_status sd_ctx_forward(specdec_ctx *c, const int32_t *tokens, int T, float *logits,
                              int logits_from, float *hidden, specdec_err *err);

#endif
