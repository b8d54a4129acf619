/* ctx.h: the target context: a model on a backend with its KV cache, its position and the
 * buffers one forward call needs. specdec_ctx_forward (public) and the round (src/speculative/)
 * run the model through here; nothing in this file names a CPU or CUDA function. */
#ifndef SD_CTX_H
#define SD_CTX_H
#include "model/model.h"
#include "model/runtime.h"

#define SD_CTX_MAX_DRAFTERS 8
#define SD_LAG_CAP 64   /* verified positions buffered for a drafter during width-1 rounds */

/* The round's buffers (round.c) on the context's backend: allocated at the first generation for
 * the widest round (max_batch) and kept, so recorded launch sequences that name them stay valid. */
typedef struct sd_round_bufs {
    int32_t *blk;        /* (mb) [bonus, d_1..d_{K-1}] */
    int32_t *choice;     /* (mb) the target's token after each verify row */
    int32_t *emit;       /* (mb + 1) [n, e_1..e_n] */
    int32_t *pos_prev;   /* (1) P of the last walk */
    int32_t *sync_pos;   /* (1) where a prefill chunk's / backlog's rows start */
    int32_t *tok;        /* (2 mb) token ids of a prefill chunk's verified slice */
    float *logits;       /* (mb, V) */
    int32_t *lag_tok;    /* (SD_LAG_CAP + mb) tokens not yet given to the drafter */
    float *lag_hid;      /* (SD_LAG_CAP + mb, H) their hidden states */
} sd_round_bufs;

struct specdec_ctx {
    const specdec_model *model;
    sd_backend *be;
    bool be_owned;          /* false when the context runs on another context's backend */
    sd_weights w;           /* the model's weights on the backend */
    specdec_drafter_weights drafter_weights;   /* resolved (specdec_ctx_drafter_weights) */
    sd_runtime rt;
    sd_kv_cache kv;
    float *x;               /* (max_batch, H) residual stream; the final-normed hidden after a run */
    int32_t *pos;           /* (1) n_past on the backend: the position of the next row */
    int32_t *ids;           /* (max_batch) token ids of the rows being run */
    float *logits;          /* (max_batch, V) staging for specdec_ctx_forward's logits on a device (lazy) */
    int n_past;             /* the host's copy of *pos */
    sd_round_bufs rb;       /* NULL pointers until the first generation */
    /* drafters holding buffers on this context's backend (detached when the context is freed) */
    specdec_drafter *drafters[SD_CTX_MAX_DRAFTERS];
};

/* A context on an existing backend (a draft model next to its target shares the target's
 * backend, so they never compete for cores); it does not own `be`. */
specdec_status sd_ctx_init_on(const specdec_model *m, sd_backend *be, const specdec_ctx_params *p,
                              specdec_ctx **out, specdec_err *err);

/* Run the model over T ids (backend, T <= max_batch) at positions pos(t), appending them to the KV
 * cache; the final-normed hidden states are left in c->x (T, H). The position is not moved. */
specdec_status sd_ctx_run(specdec_ctx *c, const int32_t *ids, int T, sd_pos pos, specdec_err *err);
/* LM head over rows row0..row0+n-1 of c->x into logits (n, V) (backend). */
specdec_status sd_ctx_head(specdec_ctx *c, int row0, int n, float *logits, specdec_err *err);
/* The round's buffers, allocated on first use. */
specdec_status sd_ctx_round_bufs(specdec_ctx *c, specdec_err *err);
/* Set n_past (host and backend copies). */
specdec_status sd_ctx_set_pos(specdec_ctx *c, int n, specdec_err *err);

/* Forward T host tokens (any T: max_batch chunks) from n_past on, advancing n_past. logits
 * (T - logits_from, V) (host) receives rows logits_from..T-1 (NULL: none); hidden (T, H) (host) the
 * final-normed hidden states (NULL: none). */
specdec_status sd_ctx_forward(specdec_ctx *c, const int32_t *tokens, int T, float *logits, int logits_from,
                              float *hidden, specdec_err *err);

#endif
