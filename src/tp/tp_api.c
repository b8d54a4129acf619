/* tp_api.c: the public tensor-parallel calls of specdec.h: a context's all-reduce counters and the
 * plan of a model over N ranks as text (what `specdec info --tp N` prints). */
#include "tp/plan.h"
#include "tp/tp_backend.h"
#include "model/ctx.h"
#include "util/err.h"
#include <stdio.h>
#include <string.h>

void specdec_ctx_tp_stats(const specdec_ctx *c, specdec_tp_stats *out) {
    memset(out, 0, sizeof *out);
    if (!c || !c->be->tp_ranks) return;
    sd_tp_counters k;
    sd_backend_tp_counters(c->be, &k);
    out->ranks = c->be->tp_ranks;
    out->comm = sd_backend_tp_comm(c->be);
    out->allreduce_calls = k.calls;
    out->allreduce_floats = k.floats;
    out->allreduce_ms = k.ms;
}

static uint64_t layer_bytes(const sd_tp_plan *p, const sd_config *c, const sd_layer_w *L, int r) {
    return sd_tp_slice_bytes(p, c, &L->q, SD_TP_ROWS_Q, r) + sd_tp_slice_bytes(p, c, &L->k, SD_TP_ROWS_KV, r) +
           sd_tp_slice_bytes(p, c, &L->v, SD_TP_ROWS_KV, r) + sd_tp_slice_bytes(p, c, &L->o, SD_TP_COLS_O, r) +
           sd_tp_slice_bytes(p, c, &L->gate, SD_TP_ROWS_I, r) + sd_tp_slice_bytes(p, c, &L->up, SD_TP_ROWS_I, r) +
           sd_tp_slice_bytes(p, c, &L->down, SD_TP_COLS_I, r);
}

specdec_status specdec_tp_describe(const specdec_model *m, int n, char *buf, size_t len, specdec_err *err) {
    if (!m || !buf || !len) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "specdec_tp_describe: NULL argument");
    const sd_config *c = &m->cfg;
    const sd_weights *w = &m->w;
    sd_tp_plan p;
    SD_TRY(sd_tp_plan_make(c, n, c->quant_bits ? c->quant_group : 0, "model", &p, err));
    /* replicated on every rank: embedding, LM head (untied), the norm vectors, the MTP fc */
    uint64_t repl = sd_mat_bytes(&w->embed) + (w->lm_head.w != w->embed.w ? sd_mat_bytes(&w->lm_head) : 0) +
                    w->f32_pool_n * sizeof(float) + (w->mtp ? sd_mat_bytes(&w->mtp->fc) : 0);
    uint64_t sh = 0;
    for (int l = 0; l < c->n_layers; l++) sh += layer_bytes(&p, c, &w->layers[l], 0);
    if (w->mtp)
        for (int k = 0; k < w->mtp->n_layers; k++) sh += layer_bytes(&p, c, &w->mtp->layers[k], 0);
    size_t o = 0;
    o += (size_t)snprintf(buf + o, len - o,
                          "%d rank(s): per rank %d of %d heads, %d of %d KV heads%s, %d of %d MLP columns\n", n, p.nh,
                          c->n_heads, p.nkv, c->n_kv_heads, p.kv_groups > 1 ? " (each KV head on a group of ranks)" : "",
                          p.I, c->intermediate_size);
    if (o < len)
        o += (size_t)snprintf(buf + o, len - o,
                              "bytes per rank:    %llu (%.2f MiB): sharded layers %.2f MiB + replicated %.2f MiB "
                              "(embedding, LM head, norms)\n",
                              (unsigned long long)(sh + repl), (sh + repl) / 1048576.0, sh / 1048576.0, repl / 1048576.0);
    if (o < len)
        snprintf(buf + o, len - o, "all-reduces:       2 per layer (after o_proj, after down_proj), %d floats per row",
                 c->hidden_size);
    return SPECDEC_OK;
}
