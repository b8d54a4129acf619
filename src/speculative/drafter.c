/* drafter.c: the public drafter handles (specdec_drafter_init_*), the CPU target wrapper (and
 * specdec_spec_generate, which runs the backend-neutral round of round.c on it) and the draft-token
 * choice shared by the drafters that have logits. */
#include "speculative/drafter.h"
#include "speculative/spec_internal.h"
#include "model/ctx.h"
#include "sample/rng.h"
#include "util/err.h"
#include <stdlib.h>
#include <string.h>

static int cpu_n_past(void *impl) { return ((specdec_ctx *)impl)->n_past; }
static specdec_status cpu_forward(void *impl, const int32_t *tokens, int T, float *logits, int from,
                                  float *hidden, specdec_err *err) {
    return sd_ctx_forward((specdec_ctx *)impl, tokens, T, logits, from, hidden, err);
}
static specdec_status cpu_truncate(void *impl, int n, specdec_err *err) {
    return specdec_ctx_truncate((specdec_ctx *)impl, n, err);
}

void sd_target_cpu(sd_target *t, specdec_ctx *c) {
    memset(t, 0, sizeof *t);
    t->impl = c;
    t->vocab = c->model->cfg.vocab_size;
    t->hidden = c->model->cfg.hidden_size;
    t->n_ctx = c->rt.n_ctx;
    t->max_batch = c->rt.max_batch;
    t->n_past = cpu_n_past;
    t->forward = cpu_forward;
    t->truncate = cpu_truncate;
    t->model = c->model;
    t->pool = c->rt.pool;
    t->ops = c->rt.ops;
    t->kv_dtype = c->rt.kv_dtype;
    t->n_threads = c->rt.n_threads;
}

int32_t sd_draft_choose(sd_sampler_ws *ws, const sd_draft_req *req, const float *logits, int V,
                        int64_t pos, sd_dist *q) {
    switch (req->mode) {
    case SD_DRAFT_SEEDED:
        return sd_sample(ws, req->sp, logits, V, pos);
    case SD_DRAFT_SAMPLE: {
        sd_dist *d = q ? q : &ws->dist;
        if (sd_filter(ws, req->sp, logits, V, d, NULL) != SPECDEC_OK) return sd_argmax(logits, V);
        int32_t t = sd_dist_sample(d, sd_rng_uniform(req->sp->seed, pos, SD_RNG_STREAM_DRAFT, 0));
        return t < 0 ? sd_argmax(logits, V) : t;
    }
    default:
        return sd_argmax(logits, V);
    }
}

specdec_status specdec_drafter_init_mtp(const specdec_model *target, specdec_drafter **out,
                                        specdec_err *err) {
    if (!target || !out) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "specdec_drafter_init_mtp: NULL argument");
    return sd_drafter_mtp_new(target, out, err);
}

specdec_status specdec_drafter_init_model(const specdec_model *target, const char *dir,
                                          specdec_drafter **out, specdec_err *err) {
    if (!target || !dir || !out)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "specdec_drafter_init_model: NULL argument");
    return sd_drafter_model_new(target, dir, out, err);
}

specdec_status specdec_drafter_init_ngram(int max_n, specdec_drafter **out, specdec_err *err) {
    if (!out) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "specdec_drafter_init_ngram: NULL argument");
    if (max_n < 0 || max_n > 64) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "ngram max_n %d not in 0..64", max_n);
    return sd_drafter_ngram_new(max_n ? max_n : 4, out, err);
}

specdec_status specdec_drafter_init(const specdec_model *target, const char *spec,
                                    specdec_drafter **out, specdec_err *err) {
    if (!spec || !out) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "specdec_drafter_init: NULL argument");
    if (!strcmp(spec, "mtp")) return specdec_drafter_init_mtp(target, out, err);
    if (!strcmp(spec, "ngram")) return specdec_drafter_init_ngram(0, out, err);
    if (!strncmp(spec, "ngram:", 6)) {
        char *end;
        long n = strtol(spec + 6, &end, 10);
        if (*end || end == spec + 6) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "drafter '%s': bad n", spec);
        return specdec_drafter_init_ngram((int)n, out, err);
    }
    if (!strncmp(spec, "model:", 6) && spec[6]) return specdec_drafter_init_model(target, spec + 6, out, err);
    return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "unknown drafter '%s' (want mtp, model:DIR or ngram)", spec);
}

void specdec_drafter_free(specdec_drafter *d) {
    if (!d) return;
    if (d->vt && d->vt->free) d->vt->free(d);
    free(d);
}

const char *specdec_drafter_name(const specdec_drafter *d) { return d && d->vt ? d->vt->name : "none"; }

/* The public entry: the round (round.c) on a CPU ctx. */
specdec_status specdec_spec_generate(specdec_ctx *c, specdec_drafter *d, const specdec_tokenizer *tok,
                                     const int32_t *prompt, int n_prompt, const specdec_gen_params *gp,
                                     const specdec_spec_params *spp, int32_t **out_ids, int *n_out,
                                     specdec_spec_stats *stats, specdec_err *err) {
    if (out_ids) *out_ids = NULL;
    if (n_out) *n_out = 0;
    if (!c) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "specdec_spec_generate: NULL ctx");
    sd_target t;
    sd_target_cpu(&t, c);
    return sd_spec_generate_target(&t, c->model, d, tok, prompt, n_prompt, gp, spp, out_ids, n_out, stats, err);
}

