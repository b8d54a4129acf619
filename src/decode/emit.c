/* emit.c: streamed text with stop-string hold-back. Text that could still become a stop string is
 * held back until it either completes one (then it is dropped and generation stops) or cannot. */
#include "decode/emit.h"
#include "model/model.h"
#include "util/err.h"
#include <stdlib.h>
#include <string.h>

specdec_status sd_emitter_init(sd_emitter *e, const specdec_tokenizer *tok, const specdec_model *m,
                               const specdec_gen_params *p, specdec_err *err) {
    memset(e, 0, sizeof *e);
    e->stop = p->stop; e->n_stop = p->stop ? p->n_stop : 0;
    for (int i = 0; i < e->n_stop; i++) {
        if (!e->stop[i] || !e->stop[i][0])
            return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "stop string %d is empty", i);
        size_t l = strlen(e->stop[i]);
        if (l > e->max_stop_len) e->max_stop_len = l;
    }
    e->on_text = p->on_text; e->user = p->user; e->cancel = p->cancel;
    if (!p->ignore_eos) {
        if (m) for (int i = 0; i < m->cfg.n_eos && e->n_eos < 16; i++) e->eos[e->n_eos++] = m->cfg.eos_token_id[i];
        if (m) for (int i = 0; i < m->gen.n_eos && e->n_eos < 16; i++) e->eos[e->n_eos++] = m->gen.eos_ids[i];
        if (tok) {
            int32_t ids[8];
            int n = specdec_tokenizer_eos_ids(tok, ids, 8);
            for (int i = 0; i < n && e->n_eos < 16; i++) e->eos[e->n_eos++] = ids[i];
        }
    }
    if (tok) SD_TRY(specdec_stream_decoder_init(tok, &e->dec, err));
    return SPECDEC_OK;
}

static bool out_text(sd_emitter *e, const char *s, size_t n) {
    if (n == 0 || !e->on_text) return true;
    return e->on_text(s, n, e->user);
}

/* Longest suffix of held that is a proper prefix of some stop string. */
static size_t hold_len(const sd_emitter *e) {
    size_t best = 0;
    for (int i = 0; i < e->n_stop; i++) {
        size_t L = strlen(e->stop[i]);
        for (size_t k = L - 1; k > best; k--)
            if (k <= e->held_len && memcmp(e->held + e->held_len - k, e->stop[i], k) == 0) { best = k; break; }
    }
    return best;
}

static bool push_text(sd_emitter *e, const char *s, size_t n) {
    if (e->n_stop == 0) return out_text(e, s, n);
    if (e->held_len + n + 1 > e->held_cap) {
        size_t cap = (e->held_len + n + 1) * 2;
        char *h = realloc(e->held, cap);
        if (!h) return false;
        e->held = h; e->held_cap = cap;
    }
    memcpy(e->held + e->held_len, s, n);
    e->held_len += n;
    e->held[e->held_len] = 0;
    size_t first = (size_t)-1;
    for (int i = 0; i < e->n_stop; i++) {
        char *f = strstr(e->held, e->stop[i]);   /* text never holds NUL bytes from tokens we emit */
        if (f && (size_t)(f - e->held) < first) first = (size_t)(f - e->held);
    }
    if (first != (size_t)-1) {
        out_text(e, e->held, first);
        e->held_len = 0;
        e->stopped = true; e->reason = SD_STOP_STRING;
        return false;
    }
    size_t keep = hold_len(e);
    bool ok = out_text(e, e->held, e->held_len - keep);
    memmove(e->held, e->held + e->held_len - keep, keep);
    e->held_len = keep;
    return ok;
}

bool sd_emit_token(sd_emitter *e, int32_t id) {
    if (e->stopped) return true;
    for (int i = 0; i < e->n_eos; i++)
        if (id == e->eos[i]) { e->stopped = true; e->reason = SD_STOP_EOS; return true; }
    if (e->n_ids == e->cap_ids) {
        int cap = e->cap_ids ? e->cap_ids * 2 : 256;
        int32_t *n = realloc(e->ids, sizeof *n * (size_t)cap);
        if (!n) { e->stopped = true; e->reason = SD_STOP_CANCEL; return true; }
        e->ids = n; e->cap_ids = cap;
    }
    e->ids[e->n_ids++] = id;
    if (e->dec) {
        const char *s; size_t n;
        specdec_stream_decoder_push(e->dec, id, &s, &n);
        if (!push_text(e, s, n)) {
            if (!e->stopped) { e->stopped = true; e->reason = SD_STOP_CANCEL; }
            return true;
        }
    }
    if (e->cancel && *e->cancel) { e->stopped = true; e->reason = SD_STOP_CANCEL; return true; }
    return false;
}

void sd_emit_finish(sd_emitter *e) {
    if (!e->dec || (e->stopped && e->reason == SD_STOP_STRING)) return;
    const char *s; size_t n;
    specdec_stream_decoder_flush(e->dec, &s, &n);
    if (e->n_stop) {
        if (n) push_text(e, s, n);   /* the flushed tail may still complete a stop string */
        if (!e->stopped && e->held_len) { out_text(e, e->held, e->held_len); e->held_len = 0; }
    } else out_text(e, s, n);
}

void sd_emitter_free(sd_emitter *e) {
    specdec_stream_decoder_free(e->dec);
    free(e->held); free(e->ids);
    memset(e, 0, sizeof *e);
}

const char *specdec_stop_reason_name(int reason) {
    switch (reason) {
    case SPECDEC_STOP_LENGTH: return "length";
    case SPECDEC_STOP_EOS: return "eos";
    case SPECDEC_STOP_STRING: return "stop";
    case SPECDEC_STOP_CANCELLED: return "cancelled";
    case SPECDEC_STOP_CONTEXT: return "context_full";
    }
    return "unknown";
}
