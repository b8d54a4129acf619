/* emit.h: turns generated token ids into streamed text, and decides when generation stops
 * (EOS, stop strings, the caller's cancel). Shared by classic and speculative decoding so both
 * arms stop at exactly the same token. */
#ifndef SD_EMIT_H
#define SD_EMIT_H
#include "specdec.h"

/* the public specdec_stop_reason values, by their internal names */
enum { SD_STOP_BUDGET = SPECDEC_STOP_LENGTH, SD_STOP_EOS = SPECDEC_STOP_EOS, SD_STOP_STRING = SPECDEC_STOP_STRING,
       SD_STOP_CANCEL = SPECDEC_STOP_CANCELLED, SD_STOP_CONTEXT = SPECDEC_STOP_CONTEXT };

typedef struct sd_emitter {
    specdec_stream_decoder *dec;      /* NULL when there is no tokenizer: no text, ids only */
    const char *const *stop; int n_stop;
    size_t max_stop_len;
    char *held; size_t held_len, held_cap;  /* text that may be the start of a stop string */
    specdec_text_fn on_text; void *user;
    volatile int *cancel;
    int32_t eos[16]; int n_eos;
    bool stopped; int reason;
    int32_t *ids; int n_ids, cap_ids;      /* every emitted id, in order (EOS excluded) */
} sd_emitter;

specdec_status sd_emitter_init(sd_emitter *e, const specdec_tokenizer *tok, const specdec_model *m,
                               const specdec_gen_params *p, specdec_err *err);
/* Emit one token. Returns true when generation must stop now (then e->reason says why). */
bool sd_emit_token(sd_emitter *e, int32_t id);
/* Flush held text at the end of generation (not after a stop string). */
void sd_emit_finish(sd_emitter *e);
void sd_emitter_free(sd_emitter *e);

#endif
