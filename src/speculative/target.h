/* target.h: the target model as the speculative round sees it: forward T tokens (logits and
 * final hidden states), truncate, and its position. The round's bookkeeping only goes through
 * this small interface, so a CUDA backend can reuse the loop by filling in its own functions.
 * The CPU fields at the end let CPU drafters run their layers on the target's thread pool. */
#ifndef SD_SPEC_TARGET_H
#define SD_SPEC_TARGET_H
#include "specdec.h"
#include "cpu/ops.h"
#include "cpu/pool.h"

typedef struct sd_target {
    void *impl;
    int vocab, hidden, n_ctx, max_batch;
    int (*n_past)(void *impl);
    /* Forward T tokens at positions n_past..n_past+T-1. logits (T - logits_from, V) receives the
     * rows from logits_from on (NULL: none); hidden (T, H) the states after model.norm (NULL: none). */
    specdec_status (*forward)(void *impl, const int32_t *tokens, int T, float *logits, int logits_from,
                              float *hidden, specdec_err *err);
    /* Drop positions >= n (n <= n_past). */
    specdec_status (*truncate)(void *impl, int n, specdec_err *err);

    /* CPU backend only (NULL / 0 elsewhere) */
    const specdec_model *model;
    sd_pool *pool;
    const sd_ops *ops;
    sd_kv_dtype_e kv_dtype;
    int n_threads;
} sd_target;

/* Wrap a CPU context. */
void sd_target_cpu(sd_target *t, specdec_ctx *c);

#endif
