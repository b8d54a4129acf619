/* round.c: the speculative decoding loop (design.md, "The round"), backend-neutral: the target
 * is reached only through sd_target (forward / truncate / n_past), the drafter through its
 * function table. One round, with the target's KV cache holding positions 0..P-1 and the bonus
 * x_P chosen but not yet forwarded:
 *   draft     d_1..d_{K-1} for positions P+1..P+K-1
 *   verify    one target forward over [x_P, d_1..d_{K-1}] (T = K): K logits rows (+ hidden)
 *   walk      accepted = agreeing prefix; the target's token after it is the next bonus
 *   finalize  emit through the shared emitter (EOS / stop strings / budget / cancel exactly as
 *             classic decoding), truncate the target to P + accepted + 1
 *   accept    one drafter call over the verified slice (its KV rollback + rebuild)
 * Every phase is timed with one clock; residual = round - phases (bookkeeping between them). */
#include "speculative/spec_internal.h"
#include "decode/emit.h"
#include "sample/rng.h"
#include "util/err.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LAG_CAP 64     /* verified positions buffered for the drafter during width-1 rounds */

specdec_spec_params specdec_spec_default_params(void) {
    specdec_spec_params p;
    memset(&p, 0, sizeof p);
    p.block_size = 0;
    p.sampling = SPECDEC_SPEC_REJECTION;
    p.probe_draws = 3;
    return p;
}

typedef struct rs {
    sd_target t;
    specdec_drafter *d;
    const specdec_gen_params *gp;
    const specdec_sampling_params *sp;
    specdec_spec_stats *s;
    sd_emitter em;
    sd_sampler_ws ws;
    sd_dist p, qone, q[SPECDEC_SPEC_MAX_DEPTH];
    int V, H, kmax;
    float *logits;      /* (kmax, V) */
    float *hidden;      /* (max(kmax, max_batch), H) */
    int32_t *tmp_tok;   /* (max_batch + kmax) */
    int32_t *lag_tok;   /* (LAG_CAP + kmax) tokens not yet given to the drafter */
    float *lag_hid;     /* (LAG_CAP + kmax, H) their hidden states (needs_hidden) */
    int lag_n, synced;  /* the drafter has seen positions < synced */
    bool need_hidden;
} rs;

static specdec_status flush_lag(rs *r, specdec_err *err) {
    if (r->lag_n == 0) return SPECDEC_OK;
    SD_TRY(r->d->vt->accept(r->d, r->synced, r->lag_tok, r->need_hidden ? r->lag_hid : NULL, r->lag_n, err));
    r->synced += r->lag_n;
    r->lag_n = 0;
    return SPECDEC_OK;
}

/* Chunked target prefill (the same max_batch chunks as classic decoding) feeding the drafter
 * each chunk's verified slice; returns the first generated token in *bonus. */
static specdec_status prefill(rs *r, const int32_t *prompt, int n, int32_t *bonus, specdec_err *err) {
    int mb = r->t.max_batch;
    for (int a = 0; a < n; a += mb) {
        int b = n - a < mb ? n : a + mb;
        bool last = b == n;
        SD_TRY(r->t.forward(r->t.impl, prompt + a, b - a, last ? r->logits : NULL, b - a - 1,
                            r->need_hidden && r->d ? r->hidden : NULL, err));
        if (last) *bonus = sd_sample(&r->ws, r->sp, r->logits, r->V, n);
        if (!r->d) continue;
        memcpy(r->tmp_tok, prompt + a + 1, sizeof(int32_t) * (size_t)(b - a - 1));
        r->tmp_tok[b - a - 1] = last ? *bonus : prompt[b];
        double t0 = sd_now_ms();
        SD_TRY(r->d->vt->accept(r->d, a, r->tmp_tok, r->need_hidden ? r->hidden : NULL, b - a, err));
        r->s->drafter_prefill_ms += sd_now_ms() - t0;
    }
    r->synced = n;
    return SPECDEC_OK;
}

/* Rejection-mode walk over nd drafts; returns accepted count and the next bonus. */
static specdec_status walk_rejection(rs *r, int P, const int32_t *dr, int nd, bool has_q, int *acc,
                                     int32_t *nb, specdec_err *err) {
    uint64_t seed = r->sp->seed;
    for (int j = 0; j < nd; j++) {
        SD_TRY(sd_filter(&r->ws, r->sp, r->logits + (size_t)j * r->V, r->V, &r->p, err));
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
    SD_TRY(sd_filter(&r->ws, r->sp, r->logits + (size_t)nd * r->V, r->V, &r->p, err));
    *nb = sd_dist_sample(&r->p, sd_rng_uniform(seed, (int64_t)P + 1 + nd, SD_RNG_STREAM_RESIDUAL, 0));
    return SPECDEC_OK;
}

static double clock_cost_ms(void) {
    double t0 = sd_now_ms(), x = 0;
    for (int i = 0; i < 1000; i++) x += sd_now_ms();
    (void)x;
    return (sd_now_ms() - t0) / 1001.0;
}

/* The exactness probe, cached on the drafter per (model, ops, threads, kv dtype). Returns in
 * *use whether speculation may run. */
static specdec_status run_probe(rs *r, const specdec_spec_params *sp, int K, bool *use, specdec_err *err) {
    specdec_drafter *d = r->d;
    specdec_spec_stats *s = r->s;
    *use = true;
    if (d->probe_result >= 0 && d->probe_model == r->t.model && d->probe_ops == r->t.ops &&
        d->probe_threads == r->t.n_threads && d->probe_kv == (int)r->t.kv_dtype && d->probe_K >= K) {
        s->probe = d->probe_result;
        s->probe_cached = true;
    } else {
        int P = r->t.n_past(r->t.impl);
        int Kp = K < r->t.n_ctx - P ? K : r->t.n_ctx - P;
        if (Kp < 2) {
            s->probe = -1;
            snprintf(s->note, sizeof s->note, "exactness probe not run: no room in the context window");
        } else {
            int ok = 0;
            char where[160];
            double t0 = sd_now_ms();
            SD_TRY(sd_spec_probe(&r->t, Kp, sp->probe_draws > 0 ? sp->probe_draws : 1, 1, &ok, where,
                                 sizeof where, err));
            s->probe_ms = sd_now_ms() - t0;
            s->probe = ok;
            d->probe_model = r->t.model; d->probe_ops = r->t.ops; d->probe_threads = r->t.n_threads;
            d->probe_kv = (int)r->t.kv_dtype; d->probe_K = Kp; d->probe_result = ok;
            if (!ok) snprintf(s->note, sizeof s->note, "block-vs-chain exactness probe FAILED (%s)", where);
        }
    }
    if (s->probe == 0) {
        if (sp->allow_inexact) {
            s->inexact = true;
            size_t l = strlen(s->note);
            snprintf(s->note + l, sizeof s->note - l, "; allow_inexact: speculating ANYWAY, output may differ from classic");
        } else {
            *use = false;
            size_t l = strlen(s->note);
            snprintf(s->note + l, sizeof s->note - l, "; speculative decoding declined, classic decoding runs");
        }
        if (!sp->quiet) fprintf(stderr, "specdec: warning: %s\n", s->note);
    }
    return SPECDEC_OK;
}

static void rs_free(rs *r) {
    sd_emitter_free(&r->em);
    sd_sampler_ws_free(&r->ws);
    sd_dist_free(&r->p); sd_dist_free(&r->qone);
    for (int i = 0; i < SPECDEC_SPEC_MAX_DEPTH; i++) sd_dist_free(&r->q[i]);
    free(r->logits); free(r->hidden); free(r->tmp_tok); free(r->lag_tok); free(r->lag_hid);
}

static specdec_status rs_alloc(rs *r, specdec_err *err) {
    int V = r->V, H = r->H, mb = r->t.max_batch;
    int hrows = r->kmax > mb ? r->kmax : mb;
    SD_TRY(sd_sampler_ws_init(&r->ws, V, err));
    SD_TRY(sd_dist_init(&r->p, V, err));
    SD_TRY(sd_dist_init(&r->qone, V, err));
    r->logits = malloc(sizeof(float) * (size_t)r->kmax * V);
    r->hidden = malloc(sizeof(float) * (size_t)hrows * H);
    r->tmp_tok = malloc(sizeof(int32_t) * (size_t)(mb + r->kmax));
    r->lag_tok = malloc(sizeof(int32_t) * (LAG_CAP + (size_t)r->kmax));
    r->lag_hid = malloc(sizeof(float) * (LAG_CAP + (size_t)r->kmax) * H);
    if (!r->logits || !r->hidden || !r->tmp_tok || !r->lag_tok || !r->lag_hid)
        return sd_fail(err, SPECDEC_ERR_NOMEM, "speculative buffers: out of memory");
    return SPECDEC_OK;
}

specdec_status sd_spec_generate_target(const sd_target *tgt, const specdec_model *model, specdec_drafter *d,
                                       const specdec_tokenizer *tok, const int32_t *prompt, int n_prompt,
                                       const specdec_gen_params *gp, const specdec_spec_params *spp,
                                       int32_t **out_ids, int *n_out, specdec_spec_stats *stats, specdec_err *err) {
    specdec_spec_params spdef = specdec_spec_default_params();
    const specdec_spec_params *sp = spp ? spp : &spdef;
    if (out_ids) *out_ids = NULL;
    if (n_out) *n_out = 0;
    if (!tgt || !gp || (!prompt && n_prompt > 0))
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "specdec_spec_generate: NULL argument");
    if (n_prompt <= 0) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "the prompt is empty");
    if (gp->max_tokens < 0) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "max_tokens %d is negative", gp->max_tokens);
    if (n_prompt >= tgt->n_ctx)
        return sd_fail(err, SPECDEC_ERR_CONTEXT, "prompt of %d tokens does not fit the context of %d tokens",
                       n_prompt, tgt->n_ctx);
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
    r.d = d; r.gp = gp; r.sp = &gp->sampling; r.s = &s;
    r.t = *tgt;
    r.V = r.t.vocab; r.H = r.t.hidden;
    r.kmax = sp->block_size ? sp->block_size : SD_AUTO_MAX_W;
    if (r.kmax > r.t.max_batch) r.kmax = r.t.max_batch;
    if (r.kmax < 1) r.kmax = 1;
    r.need_hidden = d && d->vt->needs_hidden;
    bool greedy = !(gp->sampling.temperature > 0);
    bool rejection = !greedy && sp->sampling == SPECDEC_SPEC_REJECTION;
    sd_draft_mode mode = greedy ? SD_DRAFT_GREEDY : rejection ? SD_DRAFT_SAMPLE : SD_DRAFT_SEEDED;
    bool has_q = d && rejection && d->vt->supports_sampling;

    specdec_status st = sd_emitter_init(&r.em, tok, model, gp, err);
    if (st == SPECDEC_OK) st = rs_alloc(&r, err);
    for (int i = 0; st == SPECDEC_OK && has_q && i < r.kmax; i++) st = sd_dist_init(&r.q[i], r.V, err);
    if (st == SPECDEC_OK && d) {
        d->profile = sp->profile;
        if (d->vt->reset) d->vt->reset(d);
        st = d->vt->bind(d, &r.t, err);
    }
    double clock_ms = sp->profile ? clock_cost_ms() : 0;
    sd_drafter_prof prof0 = {0};
    if (st == SPECDEC_OK && d && d->vt->profile) d->vt->profile(d, &prof0);

    int32_t bonus = 0;
    int emitted = 0;
    s.gen.prompt_tokens = n_prompt;
    s.gen.stop_reason = SD_STOP_BUDGET;
    double t_pf = sd_now_ms(), t_dec = t_pf;
    if (st == SPECDEC_OK) {
        st = r.t.truncate(r.t.impl, 0, err);   /* a fresh sequence, as classic decoding starts */
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
    if (st == SPECDEC_OK && !stopped && d) st = run_probe(&r, sp, r.kmax, &spec_on, err);
    s.speculated = spec_on;
    sd_auto dummy_au, *au = &dummy_au;
    sd_auto_init(au);
    if (d) {   /* the controller's measurements carry over between requests on the same target */
        if (d->au_model != r.t.model || d->au_threads != r.t.n_threads) {
            sd_auto_init(&d->au);
            d->au_model = r.t.model; d->au_threads = r.t.n_threads;
        }
        au = &d->au;
    }
    int32_t *blk = r.tmp_tok;   /* [bonus, d_1..d_{K-1}] */
    bool auto_off = false;      /* auto: classic won; the drafter is no longer fed this generation */

    while (st == SPECDEC_OK && !stopped) {
        if (emitted >= gp->max_tokens) { s.gen.stop_reason = SD_STOP_BUDGET; break; }
        int P = r.t.n_past(r.t.impl);
        if (P >= r.t.n_ctx) { s.gen.stop_reason = SD_STOP_CONTEXT; break; }
        double t0 = sd_now_ms();
        int want = !spec_on || auto_off ? 1 : sp->block_size ? sp->block_size : sd_auto_pick(au);
        int K = want;
        if (K > r.kmax) K = r.kmax;
        if (K > r.t.n_ctx - P) K = r.t.n_ctx - P;
        if (K > gp->max_tokens - emitted) K = gp->max_tokens - emitted;
        int nd = 0;
        double t_acc0 = 0;
        blk[0] = bonus;
        if (K > 1) {
            st = flush_lag(&r, err);
            t_acc0 = sd_now_ms() - t0;
            if (st != SPECDEC_OK) break;
            sd_draft_req req = {.n = K - 1, .pos = P, .bonus = bonus, .mode = mode, .sp = r.sp,
                                .out = blk + 1, .q = has_q ? r.q : NULL};
            st = d->vt->draft(d, &req, &nd, err);
            if (st != SPECDEC_OK) break;
            if (nd < 0 || nd > K - 1) { st = sd_fail(err, SPECDEC_ERR_INTERNAL, "drafter returned %d of %d drafts", nd, K - 1); break; }
            for (int j = 0; j < nd; j++)
                if (blk[1 + j] < 0 || blk[1 + j] >= r.V) {
                    st = sd_fail(err, SPECDEC_ERR_INTERNAL, "drafter proposed token %d outside the vocabulary", blk[1 + j]);
                    break;
                }
            if (st != SPECDEC_OK) break;
        }
        int T = nd + 1;
        double t1 = sd_now_ms();
        st = r.t.forward(r.t.impl, blk, T, r.logits, 0, spec_on && r.need_hidden ? r.hidden : NULL, err);
        if (st != SPECDEC_OK) break;
        double t2 = sd_now_ms();
        int acc = 0;
        int32_t nb = 0;
        if (rejection) {
            st = walk_rejection(&r, P, blk + 1, nd, has_q, &acc, &nb, err);
            if (st != SPECDEC_OK) break;
        } else {
            for (int j = 0; j <= nd; j++) {
                int32_t tj = sd_sample(&r.ws, r.sp, r.logits + (size_t)j * r.V, r.V, (int64_t)P + 1 + j);
                if (j < nd && tj == blk[1 + j]) { acc++; continue; }
                nb = tj;
                break;
            }
        }
        double t3 = sd_now_ms();
        int em_round = 0;
        for (int j = 0; j <= acc && !stopped; j++) {
            int32_t id = j < acc ? blk[1 + j] : nb;
            em_round++;
            if (sd_emit_token(&r.em, id)) { stopped = true; s.gen.stop_reason = r.em.reason; }
        }
        emitted += em_round;
        if (!stopped) st = r.t.truncate(r.t.impl, P + acc + 1, err);
        double t4 = sd_now_ms();
        if (st == SPECDEC_OK && spec_on && !stopped && !auto_off) {
            /* the verified slice: positions P..P+acc, tokens x_{P+1}..x_{P+acc+1} */
            memcpy(r.lag_tok + r.lag_n, blk + 1, sizeof(int32_t) * (size_t)acc);
            r.lag_tok[r.lag_n + acc] = nb;
            if (r.need_hidden)
                memcpy(r.lag_hid + (size_t)r.lag_n * r.H, r.hidden, sizeof(float) * (size_t)(acc + 1) * r.H);
            r.lag_n += acc + 1;
            if (K == 1 && r.lag_n >= LAG_CAP && !sp->block_size && au->n >= (int64_t)au->explore_rounds * SD_AUTO_MAX_W &&
                sd_auto_best(au) == 1) {
                /* classic is measurably fastest: stop paying for the drafter's catch-up */
                auto_off = true;
                r.lag_n = 0;
                snprintf(s.note, sizeof s.note, "auto: classic decoding measured fastest; speculation declined after %lld rounds",
                         (long long)s.rounds + 1);
            } else if (K > 1 || r.lag_n >= LAG_CAP) st = flush_lag(&r, err);
        }
        bonus = nb;
        double t5 = sd_now_ms();
        if (spec_on) {
            s.rounds++;
            s.rounds_at_width[K]++;
            s.drafted += nd;
            s.accepted += acc;
            s.emitted += em_round;
            for (int j = 1; j <= nd; j++) s.drafted_at_depth[j]++;
            for (int j = 1; j <= acc; j++) s.accepted_at_depth[j]++;
            if (acc == 0) s.zero_accept_rounds++;
            else if (acc == nd) s.full_accept_rounds++;
            else s.partial_accept_rounds++;
            s.draft_ms += t1 - t0 - t_acc0;
            s.verify_ms += t2 - t1;
            s.walk_ms += t3 - t2;
            s.finalize_ms += t4 - t3;
            s.accept_ms += t5 - t4 + t_acc0;
            if (!sp->block_size) sd_auto_update(au, K, em_round, t5 - t0);
            double tend = sd_now_ms();
            s.round_ms += tend - t0;
        }
    }
    if (st == SPECDEC_OK) sd_emit_finish(&r.em);
    double t_end = sd_now_ms();
    /* decode time is the generation's own: the one-time exactness probe runs inside this span
     * (after the first token) but is reported apart (probe_ms), as classic decoding has none */
    s.gen.decode_ms = t_end - t_dec - s.probe_ms;
    s.gen.generated_tokens = r.em.n_ids;
    if (s.gen.prefill_ms > 0) s.gen.prefill_tok_s = s.gen.prompt_tokens / (s.gen.prefill_ms / 1e3);
    if (s.gen.decode_ms > 0 && s.gen.generated_tokens > 1)
        s.gen.decode_tok_s = (s.gen.generated_tokens - 1) / (s.gen.decode_ms / 1e3);
    s.residual_ms = s.round_ms - (s.draft_ms + s.verify_ms + s.walk_ms + s.finalize_ms + s.accept_ms);
    s.tau = s.rounds ? (double)s.emitted / (double)s.rounds : 0;
    if (!sp->block_size && spec_on) {
        int64_t best = -1;
        for (int w = 1; w <= SD_AUTO_MAX_W; w++)
            if (s.rounds_at_width[w] > best) { best = s.rounds_at_width[w]; s.auto_width = w; }
    }
    if (d && d->vt->profile && sp->profile) {
        sd_drafter_prof p1;
        d->vt->profile(d, &p1);
        s.profiled = true;
        s.profile_steps = p1.steps - prof0.steps;
        s.prof_upload_ms = p1.upload_ms - prof0.upload_ms;
        s.prof_embed_ms = p1.embed_ms - prof0.embed_ms;
        s.prof_layers_ms = p1.layers_ms - prof0.layers_ms;
        s.prof_head_ms = p1.head_ms - prof0.head_ms;
        s.prof_sample_ms = p1.sample_ms - prof0.sample_ms;
        s.prof_readback_ms = p1.readback_ms - prof0.readback_ms;
        s.prof_overhead_ms = (double)(p1.clock_reads - prof0.clock_reads) * clock_ms;
    }
    if (d) d->profile = false;
    if (stats) *stats = s;
    if (st == SPECDEC_OK && out_ids) { *out_ids = r.em.ids; r.em.ids = NULL; }
    if (st == SPECDEC_OK && n_out) *n_out = s.gen.generated_tokens;
    rs_free(&r);
    return st;
}
