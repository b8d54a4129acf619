/* round.c: the decoding loop (design.md, "The round"), written once against the backend table.
 * Classic decoding is this loop with no drafter (every round has width K = 1). One round, with the
 * target's KV cache holding positions 0..P-1 and the bonus x_P chosen but not yet forwarded:
 *   draft     d_1..d_{K-1} for positions P+1..P+K-1, written by the drafter into blk[1..]
 *   verify    one target forward over blk = [x_P, d_1..d_{K-1}] (T = K rows) and its LM head: the
 *             target's choice after each row (or the logits, for a host walk)
 *   walk      the agreeing prefix, the emitted ids and the next bonus; the position advances to
 *             P + accepted + 1 (the KV rollback: no copy)
 *   finalize  one readback of the emitted ids; emit them through the shared emitter (EOS / stop
 *             strings / budget / cancel exactly as classic decoding)
 *   accept    one drafter call over the verified slice (its KV rollback + rebuild)
 * Where the backend can choose tokens itself (greedy; seeded when its sampler takes the filters in
 * use) the choice and the walk are backend ops and the ids stay in backend memory until the one
 * readback per round; otherwise (rejection sampling, or filters the backend cannot apply) the
 * logits are read back and the walk runs on the host (the CPU backend's reads cost nothing).
 * Every phase is timed with one clock; residual = round - phases (bookkeeping between them). */
#include "speculative/spec_internal.h"
#include "decode/emit.h"
#include "model/ctx.h"
#include "sample/rng.h"
#include "util/err.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LAG_CAP SD_LAG_CAP

specdec_spec_params specdec_spec_default_params(void) {
    specdec_spec_params p;
    memset(&p, 0, sizeof p);
    p.block_size = 0;
    /* seeded: the same seed gives the same text with or without a drafter (and from run, bench and
     * the server alike); rejection sampling stays selectable */
    p.sampling = SPECDEC_SPEC_SEEDED;
    p.probe_draws = 3;
    return p;
}

typedef struct rs {
    specdec_ctx *c;            /* the target */
    sd_backend *be;
    sd_target t;
    specdec_drafter *d;
    const specdec_gen_params *gp;
    const specdec_sampling_params *sp;
    specdec_spec_stats *s;
    sd_emitter em;
    sd_sampler_ws ws;
    sd_dist p, qone, q[SPECDEC_SPEC_MAX_DEPTH];
    int V, H, kmax, mb;
    bool rejection;
    bool dev_choice;           /* the backend chooses and walks (else the host does) */
    bool need_hidden;
    uint64_t samp_key[4];      /* the sampling parameters, in recording keys */
    /* backend memory: the context's round buffers (ctx.h) */
    int32_t *blk, *choice, *emit, *pos_prev, *sync_pos, *tok, *lag_tok;
    float *logits, *lag_hid;
    /* host memory */
    int32_t *h_emit;           /* (kmax + 1) */
    int32_t *h_tok;            /* (mb + kmax) */
    int32_t *h_lag;            /* (LAG_CAP + kmax) */
    int32_t *h_blk;            /* (kmax) drafts read back for a host walk */
    float *h_logits;           /* (kmax, V) staging of a host walk's logits (devices only) */
    int lag_n, synced;         /* the drafter has seen positions < synced */
    bool devt;                 /* the backend runs ops asynchronously and has device timers */
} rs;

/* Device timers. On a backend whose ops run asynchronously a phase's host time is only its
 * enqueue time, so the round stamps marks in stream order and takes each phase's device time
 * between them once the round's readback has waited for them. */
enum { M_START = 0, M_DRAFTED = 1, M_VERIFIED = 2, M_WALKED = 3, M_FLUSHED = 5, M_ACC0 = 6, M_ACC1 = 7 };
static specdec_status mark(rs *r, int slot, specdec_err *err) {
    if (!r->devt) return SPECDEC_OK;
    SD_BE(r->be, err, "timer mark", r->be->i->mark(r->be, slot));
    return SPECDEC_OK;
}
static double dev_ms(rs *r, int i, int j) {
    double ms = r->be->i->elapsed(r->be, i, j);
    return ms > 0 ? ms : 0;
}

static specdec_status rs_alloc(rs *r, specdec_err *err) {
    size_t V = (size_t)r->V, H = (size_t)r->H, K = (size_t)r->kmax, mb = (size_t)r->mb;
    SD_TRY(sd_sampler_ws_init(&r->ws, r->V, err));
    SD_TRY(sd_dist_init(&r->p, r->V, err));
    SD_TRY(sd_dist_init(&r->qone, r->V, err));
    SD_TRY(sd_ctx_round_bufs(r->c, err));
    const sd_round_bufs *rb = &r->c->rb;
    r->blk = rb->blk; r->choice = rb->choice; r->emit = rb->emit; r->pos_prev = rb->pos_prev;
    r->sync_pos = rb->sync_pos; r->tok = rb->tok; r->logits = rb->logits; r->lag_tok = rb->lag_tok; r->lag_hid = rb->lag_hid;
    (void)H;
    r->h_emit = malloc(sizeof(int32_t) * (K + 1));
    r->h_tok = malloc(sizeof(int32_t) * (mb + K));
    r->h_lag = malloc(sizeof(int32_t) * (LAG_CAP + K));
    r->h_blk = malloc(sizeof(int32_t) * K);
    if (!r->be->host_visible) r->h_logits = malloc(sizeof(float) * K * V);
    if (!r->h_emit || !r->h_tok || !r->h_lag || !r->h_blk || (!r->be->host_visible && !r->h_logits))
        return sd_fail(err, SPECDEC_ERR_NOMEM, "round buffers: out of memory");
    return SPECDEC_OK;
}

static void rs_free(rs *r) {
    sd_emitter_free(&r->em);
    sd_sampler_ws_free(&r->ws);
    sd_dist_free(&r->p); sd_dist_free(&r->qone);
    for (int i = 0; i < SPECDEC_SPEC_MAX_DEPTH; i++) sd_dist_free(&r->q[i]);
    free(r->h_emit); free(r->h_tok); free(r->h_lag); free(r->h_blk); free(r->h_logits);
}

/* The target's token after rows row0..row0+T-1 of its last run (the choice for row t is at
 * position *c->pos + pos_off + t) into out (backend). Device-choice rounds only. */
static specdec_status choose_rows(rs *r, int row0, int T, int pos_off, int32_t *out, specdec_err *err) {
    sd_backend *b = r->be;
    specdec_ctx *c = r->c;
    if (!(r->sp->temperature > 0) && b->i->lm_argmax) {
        SD_BE(b, err, "LM head argmax", b->i->lm_argmax(b, &c->w.lm_head, c->x + (size_t)row0 * r->H, r->H, T, NULL, out));
        return SPECDEC_OK;
    }
    SD_TRY(sd_ctx_head(c, row0, T, r->logits, err));
    if (!(r->sp->temperature > 0)) SD_BE(b, err, "argmax", b->i->argmax(b, r->logits, r->V, T, NULL, out));
    else SD_BE(b, err, "sample", b->i->sample(b, r->sp, r->logits, r->V, r->V, NULL, T, (sd_pos){c->pos, pos_off}, out));
    return SPECDEC_OK;
}

/* Host view of n logits rows computed into r->logits. */
static const float *host_logits(rs *r, int n, specdec_err *err) {
    return sd_be_view(r->be, r->logits, r->h_logits, sizeof(float) * (size_t)n * r->V, err);
}

/* Rejection-mode walk over nd drafts (host ids dr); returns accepted count and the next bonus. */
static specdec_status walk_rejection(rs *r, const float *lg, int P, const int32_t *dr, int nd, bool has_q, int *acc,
                                     int32_t *nb, specdec_err *err) {
    uint64_t seed = r->sp->seed;
    for (int j = 0; j < nd; j++) {
        SD_TRY(sd_filter(&r->ws, r->sp, lg + (size_t)j * r->V, r->V, &r->p, err));
        int64_t pos = (int64_t)P + 1 + j;
        double pd = sd_dist_prob(&r->p, dr[j]);
        double qd = has_q ? sd_dist_prob(&r->q[j], dr[j]) : 1.0;
        double u = sd_rng_uniform(seed, pos, SD_RNG_STREAM_ACCEPT, 0);
        if (pd >= qd || u * qd < pd) { (*acc)++; continue; }
        const sd_dist *q = &r->q[j];
        if (!has_q) { sd_dist_set_onehot(&r->qone, dr[j]); q = &r->qone; }
        *nb = sd_residual_sample(&r->p, q, sd_rng_uniform(seed, pos, SD_RNG_STREAM_RESIDUAL, 0));
        return SPECDEC_OK;
    }
    SD_TRY(sd_filter(&r->ws, r->sp, lg + (size_t)nd * r->V, r->V, &r->p, err));
    *nb = sd_dist_sample(&r->p, sd_rng_uniform(seed, (int64_t)P + 1 + nd, SD_RNG_STREAM_RESIDUAL, 0));
    return SPECDEC_OK;
}

/* The verify's LM head over the T rows in c->x: the target's choice per row (device choice), or
 * the logits (host walk). */
static specdec_status verify_head(rs *r, int T, specdec_err *err) {
    if (r->dev_choice) return choose_rows(r, 0, T, 1, r->choice, err);
    return sd_ctx_head(r->c, 0, T, r->logits, err);
}

/* The verify: the target over blk (T = nd + 1 rows) and its LM head over the first ndw + 1 of them
 * (ndw < nd only under specdec_spec_params.verify_rows: the walk then considers ndw drafts); when the
 * backend chooses, the walk too, as one recorded sequence per (widths, sampling parameters): every
 * argument of every op is fixed by those, positions and ids are read from backend memory. */
static specdec_status verify(rs *r, int nd, int ndw, specdec_err *err) {
    sd_backend *b = r->be;
    specdec_ctx *c = r->c;
    int T = nd + 1;
    if (!r->dev_choice) {
        SD_TRY(sd_ctx_run(c, r->blk, T, (sd_pos){c->pos, 0}, err));
        SD_TRY(verify_head(r, ndw + 1, err));
        return mark(r, M_VERIFIED, err);
    }
    uint64_t kv[7] = {(uint64_t)(uintptr_t)c, (uint64_t)nd, r->samp_key[0], r->samp_key[1], r->samp_key[2], r->samp_key[3],
                      (uint64_t)ndw};
    uint64_t key = sd_be_key("round verify+walk", kv, 7);
    if (sd_be_seq_begin(b, key)) return SPECDEC_OK;
    SD_TRY(sd_ctx_run(c, r->blk, T, (sd_pos){c->pos, 0}, err));
    SD_TRY(verify_head(r, ndw + 1, err));
    SD_TRY(mark(r, M_VERIFIED, err));
    SD_BE(b, err, "walk", b->i->walk(b, r->blk, ndw, r->choice, r->emit, c->pos, r->pos_prev));
    SD_TRY(mark(r, M_WALKED, err));
    return sd_be_seq_end(b, key, err);
}

/* The walk of a round over nd drafts after the verify, at position P: afterwards r->h_emit holds
 * [n, e_1..e_n] on the host, r->emit the same on the backend, blk[0] the next bonus and the
 * target's position P + n. */
static specdec_status walk(rs *r, int P, int nd, bool has_q, specdec_err *err) {
    sd_backend *b = r->be;
    specdec_ctx *c = r->c;
    int T = nd + 1;
    if (r->dev_choice) {   /* the walk ran inside the verify's sequence: read its result */
        SD_TRY(b->i->read(b, r->h_emit, r->emit, sizeof(int32_t) * (size_t)(T + 1), err));
    } else {
        const float *lg = host_logits(r, T, err);
        if (!lg) return err ? err->status : SPECDEC_ERR_INTERNAL;
        const int32_t *dr = sd_be_view(b, r->blk + 1, r->h_blk, sizeof(int32_t) * (size_t)nd, err);
        if (!dr && nd) return err ? err->status : SPECDEC_ERR_INTERNAL;
        int acc = 0;
        int32_t nb = 0;
        if (r->rejection) SD_TRY(walk_rejection(r, lg, P, dr, nd, has_q, &acc, &nb, err));
        else
            for (int j = 0; j <= nd; j++) {   /* seeded with filters the backend cannot apply */
                int32_t tj = sd_sample(&r->ws, r->sp, lg + (size_t)j * r->V, r->V, (int64_t)P + 1 + j);
                if (j < nd && tj == dr[j]) { acc++; continue; }
                nb = tj;
                break;
            }
        r->h_emit[0] = acc + 1;
        memcpy(r->h_emit + 1, dr, sizeof(int32_t) * (size_t)acc);
        r->h_emit[1 + acc] = nb;
        SD_TRY(b->i->write(b, r->emit, r->h_emit, sizeof(int32_t) * (size_t)(acc + 2), err));
        SD_TRY(b->i->write(b, r->blk, &nb, sizeof nb, err));
        SD_TRY(sd_be_write_i32(b, r->pos_prev, P, err));
        SD_TRY(sd_be_write_i32(b, c->pos, P + acc + 1, err));
        SD_TRY(mark(r, M_WALKED, err));
    }
    c->n_past = P + r->h_emit[0];
    return SPECDEC_OK;
}

static specdec_status drafter_accept(rs *r, int pos0, sd_pos pos, const int32_t *tok, const int32_t *tok_host,
                                     const float *hid, int T, int own, specdec_err *err) {
    sd_accept a = {.pos0 = pos0, .T = T, .pos = pos, .tokens = tok, .tokens_host = tok_host,
                   .hidden = r->need_hidden ? hid : NULL, .own = own};
    return r->d->vt->accept(r->d, &a, err);
}

static specdec_status flush_lag(rs *r, specdec_err *err) {
    if (r->lag_n == 0) return SPECDEC_OK;
    SD_TRY(sd_be_write_i32(r->be, r->sync_pos, r->synced, err));
    SD_TRY(drafter_accept(r, r->synced, (sd_pos){r->sync_pos, 0}, r->lag_tok, r->h_lag, r->lag_hid, r->lag_n, 0, err));
    r->synced += r->lag_n;
    r->lag_n = 0;
    return SPECDEC_OK;
}

/* Chunked target prefill (max_batch chunks, the same for every drafter and for classic decoding)
 * feeding the drafter each chunk's verified slice; the first generated token goes to *bonus (host)
 * and blk[0] (backend). */
static specdec_status prefill(rs *r, const int32_t *prompt, int n, int32_t *bonus, specdec_err *err) {
    specdec_ctx *c = r->c;
    sd_backend *b = r->be;
    int mb = r->mb;
    for (int a = 0; a < n; a += mb) {
        int m = n - a < mb ? n - a : mb;
        bool last = a + m == n;
        SD_TRY(b->i->write(b, c->ids, prompt + a, sizeof(int32_t) * (size_t)m, err));
        SD_TRY(sd_ctx_run(c, c->ids, m, (sd_pos){c->pos, 0}, err));
        if (last) {
            if (r->dev_choice) {
                SD_TRY(choose_rows(r, m - 1, 1, m, r->blk, err));
                SD_TRY(b->i->read(b, bonus, r->blk, sizeof *bonus, err));
            } else {
                SD_TRY(sd_ctx_head(c, m - 1, 1, r->logits, err));
                const float *lg = host_logits(r, 1, err);
                if (!lg) return err ? err->status : SPECDEC_ERR_INTERNAL;
                *bonus = sd_sample(&r->ws, r->sp, lg, r->V, n);
                SD_TRY(b->i->write(b, r->blk, bonus, sizeof *bonus, err));
            }
        }
        if (r->d) {
            memcpy(r->h_tok, prompt + a + 1, sizeof(int32_t) * (size_t)(m - 1));
            r->h_tok[m - 1] = last ? *bonus : prompt[a + m];
            SD_TRY(b->i->write(b, r->tok, r->h_tok, sizeof(int32_t) * (size_t)m, err));
            double t0 = sd_now_ms();
            SD_TRY(drafter_accept(r, a, (sd_pos){c->pos, 0}, r->tok, r->h_tok, c->x, m, 0, err));
            r->s->drafter_prefill_ms += sd_now_ms() - t0;
        }
        SD_TRY(sd_ctx_set_pos(c, a + m, err));
    }
    r->synced = n;
    return SPECDEC_OK;
}

/* The verified slice of the round just walked, to the drafter: now (width > 1), or buffered
 * (width 1: the drafter catches up in one batched call before it next drafts). */
static specdec_status feed_drafter(rs *r, int K, int n, specdec_err *err) {
    sd_backend *b = r->be;
    if (K > 1) {   /* the backlog was flushed before drafting: this slice is all there is */
        SD_TRY(drafter_accept(r, r->synced, (sd_pos){r->pos_prev, 0}, r->emit + 1, r->h_emit + 1, r->c->x, n, n - 1, err));
        r->synced += n;
        return SPECDEC_OK;
    }
    SD_TRY(b->i->copy(b, r->lag_tok + r->lag_n, r->emit + 1, sizeof(int32_t), err));
    r->h_lag[r->lag_n] = r->h_emit[1];
    if (r->need_hidden)
        SD_TRY(b->i->copy(b, r->lag_hid + (size_t)r->lag_n * r->H, r->c->x, sizeof(float) * (size_t)r->H, err));
    r->lag_n++;
    return SPECDEC_OK;
}

specdec_status sd_round_generate(specdec_ctx *c, specdec_drafter *d, const specdec_tokenizer *tok,
                                 const int32_t *prompt, int n_prompt, const specdec_gen_params *gp,
                                 const specdec_spec_params *spp, int32_t **out_ids, int *n_out,
                                 specdec_spec_stats *stats, specdec_err *err) {
    specdec_spec_params spdef = specdec_spec_default_params();
    const specdec_spec_params *sp = spp ? spp : &spdef;
    if (out_ids) *out_ids = NULL;
    if (n_out) *n_out = 0;
    if (!c || !gp || (!prompt && n_prompt > 0))
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "specdec_spec_generate: NULL argument");
    if (n_prompt <= 0) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "the prompt is empty");
    if (gp->max_tokens < 0) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "max_tokens %d is negative", gp->max_tokens);
    if (n_prompt >= c->rt.n_ctx)
        return sd_fail(err, SPECDEC_ERR_CONTEXT, "prompt of %d tokens does not fit the context of %d tokens",
                       n_prompt, c->rt.n_ctx);
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= c->model->cfg.vocab_size)
            return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "token id %d at index %d is outside the vocabulary (%d)",
                           prompt[i], i, c->model->cfg.vocab_size);
    if (sp->block_size != 0 && (sp->block_size < 2 || sp->block_size > SPECDEC_SPEC_MAX_DEPTH))
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "block size %d not in 2..%d (or 0 = auto)", sp->block_size,
                       SPECDEC_SPEC_MAX_DEPTH);
    if (d && (!d->vt || !d->vt->draft || !d->vt->accept))
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "specdec_spec_generate: drafter is not initialized");

    specdec_spec_stats s;
    memset(&s, 0, sizeof s);
    s.probe = -1;
    s.block_size = sp->block_size;
    rs r;
    memset(&r, 0, sizeof r);
    r.c = c; r.be = c->be; r.d = d; r.gp = gp; r.sp = &gp->sampling; r.s = &s;
    sd_target_of(&r.t, c);
    r.V = r.t.vocab; r.H = r.t.hidden; r.mb = r.t.max_batch;
    r.kmax = !d ? 1 : sp->block_size ? sp->block_size : SD_AUTO_MAX_W;
    if (r.kmax > r.mb) r.kmax = r.mb;
    if (r.kmax < 1) r.kmax = 1;
    r.need_hidden = d && d->vt->needs_hidden;
    bool greedy = !(gp->sampling.temperature > 0);
    r.rejection = !greedy && d && sp->sampling == SPECDEC_SPEC_REJECTION;
    sd_op_desc od;
    memset(&od, 0, sizeof od);
    od.filtered = sd_sampling_filtered(r.sp, r.V);
    r.dev_choice = greedy || (!r.rejection && r.be->i->supports(r.be, SD_OP_SAMPLE, &od));
    sd_draft_mode mode = greedy ? SD_DRAFT_GREEDY : r.rejection ? SD_DRAFT_SAMPLE : SD_DRAFT_SEEDED;
    bool has_q = d && r.rejection && d->vt->supports_sampling;
    sd_be_key_sampling(r.sp, r.samp_key);
    r.devt = !r.be->host_visible && r.be->i->mark && r.be->i->elapsed;

    specdec_status st = sd_emitter_init(&r.em, tok, c->model, gp, err);
    if (st == SPECDEC_OK) st = rs_alloc(&r, err);
    for (int i = 0; st == SPECDEC_OK && has_q && i < r.kmax; i++) st = sd_dist_init(&r.q[i], r.V, err);
    if (st == SPECDEC_OK && d) {
        d->profile = sp->profile;
        if (d->vt->reset) d->vt->reset(d);
        st = sd_drafter_attach(d, c, &r.t, err);
    }
    double clock_ms = sp->profile ? sd_clock_cost_ms() : 0;
    sd_drafter_prof prof0 = {0};
    if (st == SPECDEC_OK && d && d->vt->profile) d->vt->profile(d, &prof0);

    int32_t bonus = 0;
    int emitted = 0;
    s.gen.prompt_tokens = n_prompt;
    s.gen.stop_reason = SD_STOP_BUDGET;
    s.gen.seed = gp->sampling.seed;
    double t_pf = sd_now_ms(), t_dec = t_pf;
    if (st == SPECDEC_OK) {
        st = sd_ctx_set_pos(c, 0, err);   /* a fresh sequence */
        if (st == SPECDEC_OK && d) {
            double t0 = sd_now_ms();
            st = d->vt->prefill(d, prompt, n_prompt, err);
            s.drafter_prefill_ms += sd_now_ms() - t0;
        }
        if (st == SPECDEC_OK) st = prefill(&r, prompt, n_prompt, &bonus, err);
        t_dec = sd_now_ms();
        s.gen.prefill_ms = t_dec - t_pf;
        s.prefill_ms = s.gen.prefill_ms;
    }
    bool stopped = false;
    if (st == SPECDEC_OK && gp->max_tokens > 0) {
        emitted = 1;
        if (sd_emit_token(&r.em, bonus)) { stopped = true; s.gen.stop_reason = r.em.reason; }
    } else stopped = true;

    bool spec_on = d != NULL;
    if (st == SPECDEC_OK && !stopped && d) st = sd_spec_probe_cached(c, d, sp, r.kmax, &s, &spec_on, err);
    int64_t lookup0 = 0;   /* the probe's drafts are not the generation's rounds */
    if (d && d->vt->profile) {
        sd_drafter_prof pp;
        d->vt->profile(d, &pp);
        lookup0 = pp.lookup_rounds;
    }
    s.speculated = spec_on;
    sd_auto dummy_au, *au = &dummy_au;
    sd_auto_init(au);
    if (d) {   /* the controller's measurements carry over between requests on the same target */
        if (d->au_model != c->model || d->au_threads != r.be->n_threads) {
            sd_auto_init(&d->au);
            d->au_model = c->model; d->au_threads = r.be->n_threads;
        }
        au = &d->au;
    }
    bool auto_off = false;      /* auto: classic won; the drafter is no longer fed this generation */
    bool acc_pending = false;   /* device timers: the last accept's time is not read yet */
    double dev_busy = 0;        /* device timers: the rounds' device time (specdec_gen_stats.device_ms) */

    while (st == SPECDEC_OK && !stopped) {
        if (emitted >= gp->max_tokens) { s.gen.stop_reason = SD_STOP_BUDGET; break; }
        int P = c->n_past;
        if (P >= c->rt.n_ctx) { s.gen.stop_reason = SD_STOP_CONTEXT; break; }
        double t0 = sd_now_ms();
        int want = !spec_on || auto_off ? 1 : sp->block_size ? sp->block_size : sd_auto_pick(au);
        int K = want;
        if (K > r.kmax) K = r.kmax;
        if (K > c->rt.n_ctx - P) K = c->rt.n_ctx - P;
        if (K > gp->max_tokens - emitted) K = gp->max_tokens - emitted;
        int nd = 0;
        double t_acc0 = 0;
        st = mark(&r, M_START, err);
        if (st == SPECDEC_OK && K > 1) {
            st = flush_lag(&r, err);
            t_acc0 = sd_now_ms() - t0;
            if (st == SPECDEC_OK) st = mark(&r, M_FLUSHED, err);
            if (st != SPECDEC_OK) break;
            sd_draft_req req = {.n = K - 1, .pos = P, .bonus = bonus, .mode = mode, .sp = r.sp,
                                .out = r.blk + 1, .pos_dev = c->pos, .q = has_q ? r.q : NULL};
            st = d->vt->draft(d, &req, &nd, err);
            if (st != SPECDEC_OK) break;
            if (nd < 0 || nd > K - 1) { st = sd_fail(err, SPECDEC_ERR_INTERNAL, "drafter returned %d of %d drafts", nd, K - 1); break; }
        }
        /* classic decoding reads only the round's whole span (M_START to M_WALKED): its empty
         * flush and draft phases get no marks, two event records fewer in the gap where the
         * device waits for the round's launch */
        if (st == SPECDEC_OK && K == 1 && spec_on) st = mark(&r, M_FLUSHED, err);
        if (st == SPECDEC_OK && spec_on) st = mark(&r, M_DRAFTED, err);
        if (st != SPECDEC_OK) break;
        /* verify_rows caps the rows the LM head projects (the experiment of a verify that stops
         * early): the walk then sees only the drafts of projected rows; the output is unchanged */
        int ndw = sp->verify_rows > 0 && nd + 1 > sp->verify_rows ? sp->verify_rows - 1 : nd;
        double t1 = sd_now_ms();
        st = verify(&r, nd, ndw, err);
        if (st != SPECDEC_OK) break;
        double t2 = sd_now_ms();
        st = walk(&r, P, ndw, has_q, err);
        if (st != SPECDEC_OK) break;
        int n = r.h_emit[0];
        if (n < 1 || n > ndw + 1) { st = sd_fail(err, SPECDEC_ERR_INTERNAL, "walk emitted %d of %d tokens", n, ndw + 1); break; }
        for (int j = 1; j <= n; j++)
            if (r.h_emit[j] < 0 || r.h_emit[j] >= r.V) {
                st = sd_fail(err, SPECDEC_ERR_INTERNAL, "round emitted token %d outside the vocabulary", r.h_emit[j]);
                break;
            }
        if (st != SPECDEC_OK) break;
        int acc = n - 1;
        double t3 = sd_now_ms();
        int em_round = 0;
        for (int j = 1; j <= n && !stopped; j++) {
            em_round++;
            if (sd_emit_token(&r.em, r.h_emit[j])) { stopped = true; s.gen.stop_reason = r.em.reason; }
        }
        emitted += em_round;
        bonus = r.h_emit[n];
        double t4 = sd_now_ms();
        /* device time of the phases, now that the readback waited for them (the previous round's
         * accept included: it ran before this round's first mark) */
        double dv_fl = 0, dv_dr = 0, dv_vf = 0, dv_wk = 0, dv_acc = 0;
        if (r.devt && spec_on) {   /* the phases' sum is the round's span, M_START to M_WALKED */
            dv_fl = dev_ms(&r, M_START, M_FLUSHED); dv_dr = dev_ms(&r, M_FLUSHED, M_DRAFTED);
            dv_vf = dev_ms(&r, M_DRAFTED, M_VERIFIED); dv_wk = dev_ms(&r, M_VERIFIED, M_WALKED);
            if (acc_pending) dv_acc = dev_ms(&r, M_ACC0, M_ACC1);
            acc_pending = false;
            dev_busy += dv_fl + dv_dr + dv_vf + dv_wk + dv_acc;
        } else if (r.devt) {   /* classic: one query, the span (its phases are not reported) */
            dev_busy += dev_ms(&r, M_START, M_WALKED);
        }
        if (st == SPECDEC_OK && spec_on && !stopped && !auto_off) {
            st = mark(&r, M_ACC0, err);
            if (st == SPECDEC_OK) st = feed_drafter(&r, K, n, err);
            if (st == SPECDEC_OK) st = mark(&r, M_ACC1, err);
            acc_pending = r.devt;
            if (st == SPECDEC_OK && K == 1 && r.lag_n >= LAG_CAP && !sp->block_size &&
                sd_auto_declines(au)) {
                /* classic is measurably fastest: stop paying for the drafter's catch-up */
                auto_off = true;
                r.lag_n = 0;
                snprintf(s.note, sizeof s.note, "auto: classic decoding measured fastest; speculation declined after %lld rounds",
                         (long long)s.rounds + 1);
            } else if (st == SPECDEC_OK && K == 1 && r.lag_n >= LAG_CAP) st = flush_lag(&r, err);
        }
        double t5 = sd_now_ms();
        if (spec_on) {
            s.rounds++;
            s.rounds_at_width[K]++;
            s.drafted += nd;
            s.projected += ndw + 1;
            s.accepted += acc;
            s.emitted += em_round;
            for (int j = 1; j <= nd; j++) s.drafted_at_depth[j]++;
            for (int j = 1; j <= acc; j++) s.accepted_at_depth[j]++;
            if (acc == 0) s.zero_accept_rounds++;
            else if (acc == nd) s.full_accept_rounds++;
            else s.partial_accept_rounds++;
            if (r.devt) {   /* device times; the queueing and the readback's latency stay in the residual */
                s.draft_ms += dv_dr;
                s.verify_ms += dv_vf;
                s.walk_ms += dv_wk;
                s.accept_ms += dv_fl + dv_acc;
            } else {
                s.draft_ms += t1 - t0 - t_acc0;
                s.verify_ms += t2 - t1;
                s.walk_ms += t3 - t2;
                s.accept_ms += t5 - t4 + t_acc0;
            }
            s.finalize_ms += t4 - t3;
            /* the controller's cost of a width leaves out the drafter's catch-up on the tokens of
             * earlier classic rounds (flush_lag): a cost of switching widths, not of this one */
            if (!sp->block_size) sd_auto_update(au, K, ndw, acc, t5 - t0 - (r.devt ? dv_fl : t_acc0));
            double tend = sd_now_ms();
            s.round_ms += tend - t0;
            s.ms_at_width[K] += tend - t0;
            s.emitted_at_width[K] += em_round;
        }
    }
    if (st == SPECDEC_OK && acc_pending && r.be->i->sync(r.be, err) == SPECDEC_OK) {
        double a = dev_ms(&r, M_ACC0, M_ACC1);
        s.accept_ms += a;
        s.round_ms += a;   /* the last accept ran after its round's host clock stopped */
        dev_busy += a;
    }
    if (st == SPECDEC_OK) sd_emit_finish(&r.em);
    double t_end = sd_now_ms();
    /* decode time is the generation's own: the one-time exactness probe runs inside this span
     * (after the first token) but is reported apart (probe_ms), as classic decoding has none */
    s.gen.decode_ms = t_end - t_dec - s.probe_ms;
    s.gen.generated_tokens = r.em.n_ids;
    s.gen.device_ms = dev_busy;
    sd_spec_stats_finish(&s, sp, spec_on);
    if (d && d->vt->profile) {
        sd_drafter_prof p1;
        d->vt->profile(d, &p1);
        s.lookup_rounds = p1.lookup_rounds - lookup0;
        if (sp->profile) sd_spec_stats_profile(&s, &prof0, &p1, clock_ms);
    }
    if (d) d->profile = false;
    if (stats) *stats = s;
    if (st == SPECDEC_OK && out_ids) { *out_ids = r.em.ids; r.em.ids = NULL; }
    if (st == SPECDEC_OK && n_out) *n_out = s.gen.generated_tokens;
    rs_free(&r);
    return st;
}
