/* ctx.c: the target context (ctx.h): create it on a backend (weights uploaded once, KV cache and
 * scratch allocated there), run the Qwen3 forward (embedding, the layers of runtime.c, the final
 * norm, the LM head), and the public specdec_ctx_* calls. Because every op is batch-invariant, a
 * position's values do not depend on T or on how a sequence was split into calls. */
#include "model/ctx.h"
#include "util/err.h"
#include "speculative/drafter.h"
#include "tp/tp_backend.h"
#include <stdlib.h>
#include <string.h>

specdec_ctx_params specdec_ctx_default_params(void) {
    specdec_ctx_params p;
    memset(&p, 0, sizeof p);
    p.kv_dtype = SPECDEC_KV_DEFAULT;
    p.backend = "auto";
    return p;
}

/* The CPU's int8 path: the backends on CPU threads (cpu, and cpu-sim, which must behave as cpu
 * does) at precision int8, not the reference kernels. */
static bool cpu_int8_path(const sd_backend *be, const specdec_ctx_params *p) {
    return be->n_threads > 0 && !be->tp_ranks && be->int8 && !p->reference_kernels;
}

/* A device backend (CUDA) at precision int8, not tensor-parallel, not the reference kernels. */
static bool device_int8_path(const sd_backend *be, const specdec_ctx_params *p) {
    return be->n_threads == 0 && !be->host_visible && !be->tp_ranks && be->int8 && !p->reference_kernels;
}

/* Drafter parameters from which a device backend quantizes the drafter by default: a draft step
 * there reads the drafter's weights near their floor once they are large, so a quarter of the
 * bytes is a quarter of its time, while a small drafter's step is launches and latency. */
#define SD_DEVICE_DRAFTER_Q4_MIN_PARAMS 100000000ull

/* The drafter's dense matrices as 4-bit codes: when asked, and by default
 *   - on the CPU's int8 path, that is on the backends that run on CPU threads (cpu, and cpu-sim,
 *     which must behave as cpu does) at precision int8 (measured: MTP 1.10x there,
 *     docs/benchmarks/cpu-mtp-4bit-drafter-xeon-2026-12-05.md);
 *   - on a device backend at precision int8 for drafters of SD_DEVICE_DRAFTER_Q4_MIN_PARAMS or
 *     more (measured on an H100, docs/benchmarks/cuda-drafter-q4-h100-2026-12-06.md: the 8B shape's
 *     226.5 M-parameter drafter MTP 1.06-1.08x; the embedded pair's 1.8 M-parameter one 0.90-1.05x,
 *     its drafts' acceptance moved and its step is launch-bound).
 * The reference kernels and precision f32 keep the stored drafter. */
static bool drafter_q4(const specdec_model *m, const sd_backend *be, const specdec_ctx_params *p) {
    if (p->drafter_weights == SPECDEC_DRAFTER_WEIGHTS_Q4) return true;
    if (p->drafter_weights != SPECDEC_DRAFTER_WEIGHTS_DEFAULT) return false;
    if (cpu_int8_path(be, p)) return true;
    if (!device_int8_path(be, p)) return false;
    specdec_model_info mi;
    specdec_model_get_info(m, &mi);
    return mi.n_params_mtp >= SD_DEVICE_DRAFTER_Q4_MIN_PARAMS;
}

/* The KV cache dtype: as asked, or by default bf16 on the CPU's int8 path (half the bytes each
 * attention reads: decode 1.03-1.12x at 512 tokens on this project's Xeon, top-1 agreement with
 * the f32 reference and its KL unchanged within noise, docs/benchmarks/cpu-kv-bf16-xeon-2026-12-05.md)
 * and f32 elsewhere: precision f32 and the reference kernels are the reference path, and on CUDA
 * bf16 measured 1.003-1.004x at 512 tokens on the 8B shape, and on the embedded pair three more
 * top-1 flips in 2048 against the f32 reference (docs/benchmarks/cuda-ldw-kv-h100-2026-12-07.md). */
static sd_kv_dtype_e kv_pick(const sd_backend *be, const specdec_ctx_params *p) {
    if (p->kv_dtype != SPECDEC_KV_DEFAULT) return (sd_kv_dtype_e)p->kv_dtype;
    return cpu_int8_path(be, p) ? SD_KV_BF16 : SD_KV_F32;
}

static specdec_status ctx_setup(specdec_ctx *cx, const specdec_ctx_params *p, specdec_err *err) {
    const specdec_model *m = cx->model;
    const sd_config *c = &m->cfg;
    sd_backend *be = cx->be;
    int n_ctx = p->n_ctx > 0 ? p->n_ctx : c->max_position_embeddings;
    int mb = p->max_batch > 0 ? p->max_batch : be->batch > 0 ? be->batch : SD_DEFAULT_BATCH;
    sd_kv_dtype_e kvdt = kv_pick(be, p);
    /* progress only where bytes are copied: on a host-visible backend the upload is a view */
    const bool dq4 = drafter_q4(m, be, p);
    SD_TRY(sd_weights_upload(be, c, &m->w, &cx->w, dq4, be->host_visible ? NULL : p->progress, p->progress_user, err));
    cx->drafter_weights = !m->w.mtp ? SPECDEC_DRAFTER_WEIGHTS_DEFAULT
                        : dq4 ? SPECDEC_DRAFTER_WEIGHTS_Q4 : SPECDEC_DRAFTER_WEIGHTS_STORED;
    SD_TRY(sd_runtime_init(&cx->rt, be, c, n_ctx, mb, kvdt, err));
    SD_TRY(sd_kv_init(&cx->kv, be, c->n_layers, n_ctx, cx->rt.nkv * c->head_dim, kvdt, err));   /* a rank's KV heads */
    SD_TRY(be->i->alloc(be, sizeof(float) * (size_t)mb * c->hidden_size, "residual stream", (void **)&cx->x, err));
    SD_TRY(be->i->alloc(be, sizeof(int32_t), "position", (void **)&cx->pos, err));
    SD_TRY(be->i->alloc(be, sizeof(int32_t) * (size_t)mb, "token ids", (void **)&cx->ids, err));
    return SPECDEC_OK;
}

static specdec_status check_params(const specdec_model *m, const specdec_ctx_params *p, specdec_err *err) {
    const sd_config *c = &m->cfg;
    int n_ctx = p->n_ctx > 0 ? p->n_ctx : c->max_position_embeddings;
    if (n_ctx > c->max_position_embeddings)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "n_ctx %d exceeds the model's max_position_embeddings %d",
                       n_ctx, c->max_position_embeddings);
    if ((unsigned)p->kv_dtype > SPECDEC_KV_DEFAULT)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "unknown kv dtype %d (0 f32, 1 bf16, 2 f16, 3 default)",
                       (int)p->kv_dtype);
    if (p->max_batch < 0) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "max_batch %d is negative", p->max_batch);
    if ((unsigned)p->precision > SPECDEC_PRECISION_INT8)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "unknown precision %d (0 default, 1 f32, 2 int8)", (int)p->precision);
    if ((unsigned)p->drafter_weights > SPECDEC_DRAFTER_WEIGHTS_Q4)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "unknown drafter weights %d (0 default, 1 stored, 2 q4)",
                       (int)p->drafter_weights);
    if (p->tp < 0) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "tp %d is negative", p->tp);
    if ((unsigned)p->tp_reduce > SD_TP_REDUCE_NONE)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "unknown tp_reduce %d", p->tp_reduce);
    return SPECDEC_OK;
}

specdec_status sd_ctx_init_on(const specdec_model *m, sd_backend *be, const specdec_ctx_params *p,
                              specdec_ctx **out, specdec_err *err) {
    *out = NULL;
    SD_TRY(check_params(m, p, err));
    specdec_ctx *cx = calloc(1, sizeof *cx);
    if (!cx) return sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory");
    cx->model = m;
    cx->be = be;
    specdec_status st = ctx_setup(cx, p, err);
    if (st != SPECDEC_OK) { specdec_ctx_free(cx); return st; }
    *out = cx;
    return SPECDEC_OK;
}

specdec_status specdec_ctx_init(const specdec_model *m, const specdec_ctx_params *p,
                                specdec_ctx **out, specdec_err *err) {
    specdec_ctx_params def = specdec_ctx_default_params();
    if (!p) p = &def;
    if (!m || !out) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "specdec_ctx_init: NULL argument");
    *out = NULL;
    SD_TRY(check_params(m, p, err));
    sd_backend_opts o = {.n_threads = p->n_threads, .reference = p->reference_kernels, .device = p->device,
                         .precision = (int)p->precision};
    sd_backend *be = NULL;
    if (p->tp > 0) {
        sd_tp_opts to = {.n = p->tp, .rank_backend = p->backend, .reduce = (sd_tp_reduce)p->tp_reduce};
        SD_TRY(sd_backend_tp_new(&to, &o, &be, err));
    } else {
        SD_TRY(sd_backend_create(p->backend, &o, &be, err));
    }
    specdec_status st = sd_ctx_init_on(m, be, p, out, err);
    if (st != SPECDEC_OK) { sd_backend_free(be); return st; }
    (*out)->be_owned = true;
    return SPECDEC_OK;
}

void specdec_ctx_free(specdec_ctx *c) {
    if (!c) return;
    for (int i = 0; i < SD_CTX_MAX_DRAFTERS; i++)
        if (c->drafters[i]) sd_drafter_detach(c->drafters[i]);
    sd_backend *be = c->be;
    if (be) {
        be->i->release(be, c->x);
        be->i->release(be, c->pos);
        be->i->release(be, c->ids);
        be->i->release(be, c->logits);
        sd_round_bufs *rb = &c->rb;
        void *bufs[] = {rb->blk, rb->choice, rb->emit, rb->pos_prev, rb->sync_pos, rb->tok, rb->logits, rb->lag_tok, rb->lag_hid};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) be->i->release(be, bufs[i]);
        sd_kv_free(&c->kv);
        sd_runtime_free(&c->rt);
        sd_weights_unload(be, &c->model->cfg, &c->w);
        if (c->be_owned) sd_backend_free(be);
    }
    free(c);
}

specdec_status sd_ctx_round_bufs(specdec_ctx *c, specdec_err *err) {
    sd_round_bufs *rb = &c->rb;
    if (rb->blk) return SPECDEC_OK;
    sd_backend *b = c->be;
    size_t mb = (size_t)c->rt.max_batch, V = (size_t)c->model->cfg.vocab_size, H = (size_t)c->model->cfg.hidden_size;
    size_t lag = SD_LAG_CAP + mb;
    struct { void **p; size_t bytes; } a[] = {
        {(void **)&rb->choice, 4 * mb}, {(void **)&rb->emit, 4 * (mb + 1)}, {(void **)&rb->pos_prev, 4},
        {(void **)&rb->sync_pos, 4}, {(void **)&rb->tok, 4 * 2 * mb}, {(void **)&rb->logits, 4 * mb * V},
        {(void **)&rb->lag_tok, 4 * lag}, {(void **)&rb->lag_hid, 4 * lag * H}, {(void **)&rb->blk, 4 * mb},
    };
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)   /* blk last: it marks the set complete */
        if (!*a[i].p) SD_TRY(b->i->alloc(b, a[i].bytes, "round buffers", a[i].p, err));
    return SPECDEC_OK;
}

int specdec_ctx_n_past(const specdec_ctx *c) { return c->n_past; }
int specdec_ctx_max_batch(const specdec_ctx *c) { return c ? c->rt.max_batch : 0; }

void specdec_ctx_backend_stats(const specdec_ctx *c, specdec_backend_stats *out) { *out = c->be->stats; }

const char *specdec_ctx_backend(const specdec_ctx *c) { return c ? c->be->name : NULL; }
const char *specdec_ctx_kernels(const specdec_ctx *c) { return c ? c->be->i->kernels(c->be) : NULL; }
specdec_kv_dtype specdec_ctx_kv_dtype(const specdec_ctx *c) { return c ? (specdec_kv_dtype)c->kv.dtype : SPECDEC_KV_DEFAULT; }
specdec_drafter_weights specdec_ctx_drafter_weights(const specdec_ctx *c) {
    return c ? c->drafter_weights : SPECDEC_DRAFTER_WEIGHTS_DEFAULT;
}

uint64_t specdec_ctx_drafter_step_bytes(const specdec_ctx *c, int head_rows) {
    if (!c || !c->w.mtp) return 0;
    const sd_config *cf = &c->model->cfg;
    const sd_mtp_w *d = c->w.mtp;
    const uint64_t V = (uint64_t)cf->vocab_size, H = (uint64_t)cf->hidden_size;
    const uint64_t rows = head_rows > 0 && (uint64_t)head_rows < V ? (uint64_t)head_rows : V;
    uint64_t b = sd_mat_bytes(&d->fc) + 4ull * 3 * H;   /* fc and the three module norms */
    for (int l = 0; l < d->n_layers; l++) b += sd_layer_bytes(&d->layers[l], cf);
    b += sd_mat_bytes(&c->w.embed) / V + sd_mat_bytes(&c->w.lm_head) / V * rows;
    return b;
}

specdec_status sd_ctx_set_pos(specdec_ctx *c, int n, specdec_err *err) {
    SD_TRY(sd_be_write_i32(c->be, c->pos, n, err));
    c->n_past = n;   /* entries past n are simply overwritten later */
    return SPECDEC_OK;
}

specdec_status specdec_ctx_truncate(specdec_ctx *c, int n, specdec_err *err) {
    if (n < 0 || n > c->n_past)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "truncate to %d: context holds %d positions", n, c->n_past);
    return sd_ctx_set_pos(c, n, err);
}

specdec_status sd_ctx_run(specdec_ctx *c, const int32_t *ids, int T, sd_pos pos, specdec_err *err) {
    const sd_config *cf = &c->model->cfg;
    sd_backend *b = c->be;
    int H = cf->hidden_size;
    SD_BE(b, err, "embed", b->i->embed(b, &c->w.embed, ids, T, c->x, H));
    for (int l = 0; l < cf->n_layers; l++)
        SD_TRY(sd_layer_forward(&c->rt, &c->w.layers[l], &c->kv.layers[l], c->x, T, pos, err));
    SD_BE(b, err, "final norm", b->i->rmsnorm(b, c->x, H, c->x, H, c->w.final_norm, H, T, cf->rms_norm_eps));
    return SPECDEC_OK;
}

specdec_status sd_ctx_head(specdec_ctx *c, int row0, int n, float *logits, specdec_err *err) {
    const sd_config *cf = &c->model->cfg;
    sd_backend *b = c->be;
    int H = cf->hidden_size;
    SD_BE(b, err, "LM head", b->i->matmul(b, &c->w.lm_head, c->x + (size_t)row0 * H, H, logits, cf->vocab_size, n));
    return SPECDEC_OK;
}

specdec_status sd_ctx_forward(specdec_ctx *c, const int32_t *tokens, int T, float *logits, int logits_from,
                              float *hidden, specdec_err *err) {
    const sd_config *cf = &c->model->cfg;
    sd_backend *b = c->be;
    int H = cf->hidden_size, V = cf->vocab_size, mb = c->rt.max_batch;
    if (T <= 0) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "forward of %d tokens", T);
    if (c->n_past + T > c->rt.n_ctx)
        return sd_fail(err, SPECDEC_ERR_CONTEXT, "%d positions do not fit the context window: %d held, n_ctx %d",
                       T, c->n_past, c->rt.n_ctx);
    for (int t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= V)
            return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "token id %d at index %d is outside the vocabulary (%d)",
                           tokens[t], t, V);
    for (int t0 = 0; t0 < T; t0 += mb) {
        int n = T - t0 < mb ? T - t0 : mb;
        SD_TRY(b->i->write(b, c->ids, tokens + t0, sizeof(int32_t) * (size_t)n, err));
        SD_TRY(sd_ctx_run(c, c->ids, n, (sd_pos){c->pos, 0}, err));
        if (hidden) SD_TRY(b->i->read(b, hidden + (size_t)t0 * H, c->x, sizeof(float) * (size_t)n * H, err));
        int from = logits_from - t0;   /* first row of this chunk that wants logits */
        if (from < 0) from = 0;
        if (logits && from < n) {
            float *dst = logits + (size_t)(t0 + from - logits_from) * V;
            /* on a host-memory backend the LM head writes straight into the caller's array */
            if (!b->host_visible && !c->logits)
                SD_TRY(b->i->alloc(b, sizeof(float) * (size_t)mb * V, "logits", (void **)&c->logits, err));
            SD_TRY(sd_ctx_head(c, from, n - from, b->host_visible ? dst : c->logits, err));
            if (!b->host_visible)
                SD_TRY(b->i->read(b, dst, c->logits, sizeof(float) * (size_t)(n - from) * V, err));
        }
        SD_TRY(sd_ctx_set_pos(c, c->n_past + n, err));
    }
    return SPECDEC_OK;
}

specdec_status specdec_ctx_forward(specdec_ctx *c, const int32_t *tokens, int T, float *logits,
                                   float *hidden, specdec_err *err) {
    return sd_ctx_forward(c, tokens, T, logits, 0, hidden, err);
}
