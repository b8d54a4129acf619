/* target.h: the target as the round and the drafters see it: its backend, its weights there (the
 * MTP drafter borrows the embedding and the LM head), and its shape. Drafters reach the target only
 * through this view and the backend table; none of them names a CPU or CUDA function. */
#ifndef SD_SPEC_TARGET_H
#define SD_SPEC_TARGET_H
#include "specdec.h"
#include "backend/backend.h"
#include "model/weights.h"

typedef struct sd_target {
    sd_backend *be;
    const specdec_model *model;   /* config and host weights (gathers for the draft vocabulary) */
    const sd_weights *w;          /* the target's weights on `be` (embedding, LM head, mtp.*) */
    int vocab, hidden, n_ctx, max_batch;
    sd_kv_dtype_e kv_dtype;
} sd_target;

/* The view of a context. */
void sd_target_of(sd_target *t, specdec_ctx *c);

#endif
