/* drafter.c: the public drafter handles (specdec_drafter_init_*), the target view, the draft-token
 * choice shared by the drafters that have logits (on the backend when it can, else on the host),
 * and specdec_spec_generate (the round of round.c). */
#include "speculative/drafter.h"
#include "speculative/spec_internal.h"
#include "model/ctx.h"
#include "sample/rng.h"
#include "util/err.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

void sd_target_of(sd_target *t, specdec_ctx *c) {
    memset(t, 0, sizeof *t);
    t->be = c->be;
    t->model = c->model;
    t->w = &c->w;
    t->vocab = c->model->cfg.vocab_size;
    t->hidden = c->model->cfg.hidden_size;
    t->n_ctx = c->rt.n_ctx;
    t->max_batch = c->rt.max_batch;
    t->kv_dtype = c->rt.kv_dtype;
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

bool sd_draft_on_backend(const sd_backend *b, const sd_draft_req *req) {
    if (req->mode == SD_DRAFT_GREEDY) return true;
    if (req->mode != SD_DRAFT_SEEDED) return false;
    sd_op_desc od;
    memset(&od, 0, sizeof od);
    od.filtered = sd_sampling_filtered(req->sp, 1 << 30);
    return b->i->supports(b, SD_OP_SAMPLE, &od);
}

specdec_status sd_draft_pick(sd_backend *b, const sd_draft_req *req, int j, const float *logits, int n, int vocab,
                             const int32_t *map_dev, const int32_t *map_host, sd_sampler_ws *ws, float *host_row,
                             float *host_sc, specdec_err *err) {
    if (sd_draft_on_backend(b, req)) {
        if (req->mode == SD_DRAFT_GREEDY)
            SD_BE(b, err, "argmax", b->i->argmax(b, logits, n, 1, map_dev, req->out + j));
        else
            SD_BE(b, err, "sample", b->i->sample(b, req->sp, logits, n, vocab, map_dev, 1, (sd_pos){req->pos_dev, 1 + j},
                                                 req->out + j));
        return SPECDEC_OK;
    }
    const float *row = sd_be_view(b, logits, host_row, sizeof(float) * (size_t)n, err);
    if (!row) return err ? err->status : SPECDEC_ERR_INTERNAL;
    if (map_host) {   /* the subset's logits in a vocabulary row that is -inf elsewhere */
        for (int k = 0; k < n; k++) host_sc[map_host[k]] = row[k];
        row = host_sc;
    }
    int32_t id = sd_draft_choose(ws, req, row, vocab, req->pos + 1 + j, req->q ? &req->q[j] : NULL);
    if (map_host)
        for (int k = 0; k < n; k++) host_sc[map_host[k]] = -INFINITY;
    return b->i->write(b, req->out + j, &id, sizeof id, err);
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
    if (!strncmp(spec, "mtp+ngram", 9) && (!spec[9] || spec[9] == ':')) {
        long n = SD_HYBRID_MIN_N_DEFAULT;
        if (spec[9]) {
            char *end;
            n = strtol(spec + 10, &end, 10);
            if (*end || end == spec + 10 || n < 1 || n > 64)
                return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "drafter '%s': the shortest match must be 1..64", spec);
        }
        if (!target) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "specdec_drafter_init: NULL model");
        return sd_drafter_hybrid_new(target, (int)n, out, err);
    }
    if (!strcmp(spec, "ngram")) return specdec_drafter_init_ngram(0, out, err);
    if (!strncmp(spec, "ngram:", 6)) {
        char *end;
        long n = strtol(spec + 6, &end, 10);
        if (*end || end == spec + 6) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "drafter '%s': bad n", spec);
        return specdec_drafter_init_ngram((int)n, out, err);
    }
    if (!strncmp(spec, "model:", 6) && spec[6]) return specdec_drafter_init_model(target, spec + 6, out, err);
    return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "unknown drafter '%s' (want mtp, mtp+ngram[:M], model:DIR or ngram[:N])", spec);
}

specdec_status sd_drafter_attach(specdec_drafter *d, specdec_ctx *c, const sd_target *t, specdec_err *err) {
    if (d->bound != c) {
        sd_drafter_detach(d);
        int slot = -1;
        for (int i = 0; i < SD_CTX_MAX_DRAFTERS && slot < 0; i++)
            if (!c->drafters[i]) slot = i;
        if (slot < 0) { sd_drafter_detach(c->drafters[0]); slot = 0; }   /* full: the first one makes room */
        c->drafters[slot] = d;
        d->bound = c;
    }
    specdec_status st = d->vt->bind(d, t, err);
    if (st != SPECDEC_OK) sd_drafter_detach(d);
    return st;
}

void sd_drafter_detach(specdec_drafter *d) {
    if (!d || !d->bound) return;
    if (d->vt->release) d->vt->release(d);
    for (int i = 0; i < SD_CTX_MAX_DRAFTERS; i++)
        if (d->bound->drafters[i] == d) d->bound->drafters[i] = NULL;
    d->bound = NULL;
}

void specdec_drafter_free(specdec_drafter *d) {
    if (!d) return;
    sd_drafter_detach(d);
    if (d->vt && d->vt->free) d->vt->free(d);
    free(d);
}

const char *specdec_drafter_name(const specdec_drafter *d) { return d && d->vt ? d->vt->name : "none"; }

/* The public entry: the round (round.c) on the context's backend. */
specdec_status specdec_spec_generate(specdec_ctx *c, specdec_drafter *d, const specdec_tokenizer *tok,
                                     const int32_t *prompt, int n_prompt, const specdec_gen_params *gp,
                                     const specdec_spec_params *spp, int32_t **out_ids, int *n_out,
                                     specdec_spec_stats *stats, specdec_err *err) {
    if (out_ids) *out_ids = NULL;
    if (n_out) *n_out = 0;
    if (!c) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "specdec_spec_generate: NULL ctx");
    return sd_round_generate(c, d, tok, prompt, n_prompt, gp, spp, out_ids, n_out, stats, err);
}
