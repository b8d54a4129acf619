/* probe.c: the block-vs-chain exactness probe. Speculative decoding is exact at temperature 0
 * only if the verify pass (T = K positions in one call) produces, for each position, bitwise the
 * logits that K single-token steps would. The kernels are built for that (batch invariance);
 * this probe checks it on the live target, from the live state, on whatever backend the context
 * runs, before any speculation runs. */
#include "speculative/spec_internal.h"
#include "model/ctx.h"
#include "util/err.h"
#include "util/log.h"
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

specdec_status sd_spec_probe(specdec_ctx *c, int K, int draws, uint64_t seed, int *ok, char *where,
                             size_t where_n, specdec_err *err) {
    *ok = 1;
    if (where_n) where[0] = 0;
    int P = c->n_past, V = c->model->cfg.vocab_size;
    float *blk = malloc(sizeof(float) * (size_t)K * V), *one = malloc(sizeof(float) * (size_t)K * V);
    int32_t *tok = malloc(sizeof *tok * (size_t)K);
    specdec_status st = SPECDEC_OK;
    if (!blk || !one || !tok) st = sd_fail(err, SPECDEC_ERR_NOMEM, "probe buffers: out of memory");
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    for (int dr = 0; st == SPECDEC_OK && dr < draws && *ok; dr++) {
        for (int k = 0; k < K; k++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            tok[k] = (int32_t)(s % (uint64_t)V);
        }
        st = sd_ctx_forward(c, tok, K, blk, 0, NULL, err);
        if (st == SPECDEC_OK) st = sd_ctx_set_pos(c, P, err);
        for (int k = 0; st == SPECDEC_OK && k < K; k++)
            st = sd_ctx_forward(c, tok + k, 1, one + (size_t)k * V, 0, NULL, err);
        if (st == SPECDEC_OK) st = sd_ctx_set_pos(c, P, err);
        if (st == SPECDEC_OK && memcmp(blk, one, sizeof(float) * (size_t)K * V) != 0) {
            *ok = 0;
            for (size_t i = 0; i < (size_t)K * V; i++)
                if (memcmp(blk + i, one + i, sizeof(float)) != 0) {
                    snprintf(where, where_n, "draw %d, row %zu of %d, logit %zu: block %.9g vs chain %.9g",
                             dr, i / V, K, i % V, blk[i], one[i]);
                    break;
                }
        }
    }
    free(blk); free(one); free(tok);
    return st;
}

/* The probe's verdict depends on the kernels that ran, so the cache key names the model, the
 * backend and its kernel variant, the thread count and the KV dtype. */
specdec_status sd_spec_probe_cached(specdec_ctx *c, specdec_drafter *d, const specdec_spec_params *sp, int K,
                                    specdec_spec_stats *s, bool *use, specdec_err *err) {
    *use = true;
    char kern[96];
    snprintf(kern, sizeof kern, "%s/%s", c->be->name, c->be->i->kernels(c->be));
    int threads = c->be->n_threads, kv = (int)c->rt.kv_dtype;
    if (d->probe_result >= 0 && d->probe_model == c->model && !strcmp(d->probe_kernels, kern) &&
        d->probe_threads == threads && d->probe_kv == kv && d->probe_K >= K) {
        s->probe = d->probe_result;
        s->probe_cached = true;
    } else {
        int P = c->n_past;
        int Kp = K < c->rt.n_ctx - P ? K : c->rt.n_ctx - P;
        if (Kp < 2) {
            s->probe = -1;
            snprintf(s->note, sizeof s->note, "exactness probe not run: no room in the context window");
        } else {
            int ok = 0;
            char where[160];
            double t0 = sd_now_ms();
            SD_TRY(sd_spec_probe(c, Kp, sp->probe_draws > 0 ? sp->probe_draws : 1, 1, &ok, where, sizeof where, err));
            s->probe_ms = sd_now_ms() - t0;
            s->probe = ok;
            d->probe_model = c->model;
            snprintf(d->probe_kernels, sizeof d->probe_kernels, "%s", kern);
            d->probe_threads = threads; d->probe_kv = kv; d->probe_K = Kp; d->probe_result = ok;
            if (!ok) snprintf(s->note, sizeof s->note, "block-vs-chain exactness probe FAILED (%s)", where);
        }
    }
    if (s->probe == 0) {
        size_t l = strlen(s->note);
        if (sp->allow_inexact) {
            s->inexact = true;
            snprintf(s->note + l, sizeof s->note - l, "; allow_inexact: speculating ANYWAY, output may differ from classic");
        } else {
            *use = false;
            snprintf(s->note + l, sizeof s->note - l, "; speculative decoding declined, classic decoding runs");
        }
        if (!sp->quiet) sd_log(SPECDEC_LOG_WARN, "%s", s->note);
    }
    return SPECDEC_OK;
}
