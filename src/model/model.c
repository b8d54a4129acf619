/* model.c: loading a model directory (config.json + safetensors) and describing it. */
#include "model/model.h"
#include "model/gen_config.h"
#include "model/model_dir.h"
#include "util/err.h"
#include "util/dtype.h"
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

specdec_model_params specdec_model_default_params(void) {
    specdec_model_params p;
    memset(&p, 0, sizeof p);
    p.load_mtp = true;
    return p;
}

specdec_status specdec_model_load(const char *dir, const specdec_model_params *params,
                                  specdec_model **out, specdec_err *err) {
    specdec_model_params def = specdec_model_default_params();
    if (!params) params = &def;
    if (!dir || !out) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "specdec_model_load: NULL argument");
    *out = NULL;
    specdec_model *m = calloc(1, sizeof *m);
    if (!m) return sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory");
    snprintf(m->dir, sizeof m->dir, "%s", dir);
    specdec_status st = sd_model_dir_check(dir, err);
    if (st == SPECDEC_OK) st = sd_config_load_dir(dir, &m->cfg, err);
    m->gen.sampling = specdec_sampling_default_params();
    if (st == SPECDEC_OK) st = sd_gen_config_load_dir(dir, m->cfg.vocab_size, &m->gen, err);
    if (st == SPECDEC_OK) st = sd_st_open_dir(dir, &m->st, err);
    if (st == SPECDEC_OK) st = sd_weights_bind(&m->cfg, m->st, params->load_mtp, &m->w, err);
    if (st == SPECDEC_OK && params->progress)
        st = sd_st_prefault(m->st, params->progress, params->progress_user, err);
    if (st != SPECDEC_OK) { specdec_model_free(m); return st; }
    *out = m;
    return SPECDEC_OK;
}

void specdec_model_generation_config(const specdec_model *m, specdec_generation_config *out) { *out = m->gen; }

specdec_gen_params specdec_model_gen_default_params(const specdec_model *m) {
    specdec_gen_params p = specdec_gen_default_params();
    if (m) p.sampling = m->gen.sampling;
    return p;
}

void specdec_model_free(specdec_model *m) {
    if (!m) return;
    sd_weights_free(&m->w);
    sd_st_close(m->st);
    free(m);
}

static uint64_t layer_params(const sd_config *c) {
    uint64_t H = c->hidden_size, I = c->intermediate_size, hd = c->head_dim;
    uint64_t qd = (uint64_t)c->n_heads * hd, kd = (uint64_t)c->n_kv_heads * hd;
    return H * qd + 2 * H * kd + qd * H + 3 * H * I + 2 * H + 2 * hd;
}

uint64_t sd_layer_bytes(const sd_layer_w *L, const sd_config *c) {
    return sd_mat_bytes(&L->q) + sd_mat_bytes(&L->k) + sd_mat_bytes(&L->v) + sd_mat_bytes(&L->o) +
           sd_mat_bytes(&L->gate) + sd_mat_bytes(&L->up) + sd_mat_bytes(&L->down) +
           4ull * (2 * c->hidden_size + 2 * c->head_dim);
}

void specdec_model_get_info(const specdec_model *m, specdec_model_info *o) {
    const sd_config *c = &m->cfg;
    memset(o, 0, sizeof *o);
    snprintf(o->model_type, sizeof o->model_type, "%s", c->model_type);
    o->vocab_size = c->vocab_size; o->hidden_size = c->hidden_size;
    o->intermediate_size = c->intermediate_size; o->n_layers = c->n_layers;
    o->n_heads = c->n_heads; o->n_kv_heads = c->n_kv_heads; o->head_dim = c->head_dim;
    o->max_position_embeddings = c->max_position_embeddings;
    o->rope_theta = c->rope_theta; o->rms_norm_eps = c->rms_norm_eps;
    o->tied_embeddings = c->tie_word_embeddings;
    o->quant_bits = c->quant_bits; o->quant_group = c->quant_group;
    o->weight_dtype = c->dtype;
    o->mtp_layers = m->w.mtp ? m->w.mtp->n_layers : 0;
    o->n_eos = c->n_eos;
    for (int i = 0; i < c->n_eos && i < 8; i++) o->eos_ids[i] = c->eos_token_id[i];
    uint64_t VH = (uint64_t)c->vocab_size * c->hidden_size;
    o->n_params = VH + (c->tie_word_embeddings ? 0 : VH) + (uint64_t)c->n_layers * layer_params(c) +
                  c->hidden_size;
    if (m->w.mtp)
        o->n_params_mtp = 2ull * c->hidden_size * c->hidden_size + 3ull * c->hidden_size +
                          (uint64_t)m->w.mtp->n_layers * layer_params(c);
    o->weight_bytes = sd_st_total_bytes(m->st);
    /* One decode step reads every layer's matrices, the LM head, one embedding row and the norms. */
    uint64_t b = sd_mat_bytes(&m->w.lm_head) + sd_mat_bytes(&m->w.embed) / c->vocab_size +
                 4ull * c->hidden_size;
    for (int l = 0; l < c->n_layers; l++) b += sd_layer_bytes(&m->w.layers[l], c);
    o->decode_bytes_per_token = b;
}
