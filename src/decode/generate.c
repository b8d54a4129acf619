/* generate.c: classic decoding (one target forward per token), the baseline every speculative
 * path must reproduce byte for byte at temperature 0. */
#include "decode/emit.h"
#include "model/ctx.h"
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

specdec_status specdec_generate(specdec_ctx *c, const specdec_tokenizer *tok,
                                const int32_t *prompt, int n_prompt, const specdec_gen_params *p,
                                int32_t **out_ids, int *n_out, specdec_gen_stats *stats,
                                specdec_err *err) {
    const sd_config *cf = &c->model->cfg;
    int V = cf->vocab_size;
    if (out_ids) *out_ids = NULL;
    if (n_out) *n_out = 0;
    if (n_prompt <= 0) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "the prompt is empty");
    if (p->max_tokens < 0) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "max_tokens %d is negative", p->max_tokens);
    if (n_prompt >= c->rt.n_ctx)
        return sd_fail(err, SPECDEC_ERR_CONTEXT, "prompt of %d tokens does not fit the context of %d tokens",
                       n_prompt, c->rt.n_ctx);
    sd_emitter em;
    specdec_status st = sd_emitter_init(&em, tok, c->model, p, err);
    float *logits = malloc(sizeof(float) * (size_t)V);
    if (st == SPECDEC_OK && !logits) st = sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory");
    specdec_gen_stats s;
    memset(&s, 0, sizeof s);
    s.prompt_tokens = n_prompt;
    if (st == SPECDEC_OK) {
        c->n_past = 0;
        double t0 = sd_now_ms();
        st = sd_ctx_forward(c, prompt, n_prompt, logits, n_prompt - 1, NULL, err);
        double t1 = sd_now_ms();
        s.prefill_ms = t1 - t0;
        s.stop_reason = SD_STOP_BUDGET;
        for (int i = 0; st == SPECDEC_OK && i < p->max_tokens; i++) {
            int32_t tk = specdec_sample(&p->sampling, logits, V, c->n_past);
            if (sd_emit_token(&em, tk)) { s.stop_reason = em.reason; break; }
            if (i + 1 == p->max_tokens) break;
            if (c->n_past >= c->rt.n_ctx) { s.stop_reason = SD_STOP_CONTEXT; break; }
            st = sd_ctx_forward(c, &tk, 1, logits, 0, NULL, err);
        }
        sd_emit_finish(&em);
        s.decode_ms = sd_now_ms() - t1;
        s.generated_tokens = em.n_ids;
    }
    if (s.prefill_ms > 0) s.prefill_tok_s = s.prompt_tokens / (s.prefill_ms / 1e3);
    if (s.decode_ms > 0 && s.generated_tokens > 1) s.decode_tok_s = (s.generated_tokens - 1) / (s.decode_ms / 1e3);
    if (stats) *stats = s;
    if (st == SPECDEC_OK && out_ids) { *out_ids = em.ids; em.ids = NULL; }
    if (st == SPECDEC_OK && n_out) *n_out = s.generated_tokens;
    free(logits);
    sd_emitter_free(&em);
    return st;
}
