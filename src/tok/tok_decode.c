/* tok_decode.c: ids -> bytes (specdec_detokenize), the streaming decoder, and the small
 * tokenizer accessors.
 *
 * Each id decodes to fixed raw bytes computed at load (ByteLevel characters mapped back to
 * bytes; added tokens to their content), so detokenizing is concatenation. The bytes of one
 * token may end in the middle of a UTF-8 character; the streaming decoder holds such a tail
 * back until the next token completes it, and renders invalid sequences as U+FFFD exactly as a
 * lossy decode of the whole byte string would (one U+FFFD per maximal invalid subpart). */
#include "tok/tok_internal.h"
#include "util/err.h"
#include <stdlib.h>
#include <string.h>

static bool id_ok(const specdec_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_ids && t->dec_len[id] != UINT32_MAX;
}

specdec_status specdec_detokenize(const specdec_tokenizer *t, const int32_t *ids, size_t n_ids,
                                  char **out, size_t *out_len, specdec_err *err) {
    if (!out || !out_len) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "detokenize: out or out_len is NULL");
    *out = NULL;
    *out_len = 0;
    if (!t || (!ids && n_ids)) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "detokenize: tokenizer or ids is NULL");
    size_t total = 0;
    for (size_t i = 0; i < n_ids; i++) {
        if (!id_ok(t, ids[i]))
            return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "detokenize: ids[%zu] = %d is not a token id (vocab size %d)",
                           i, (int)ids[i], (int)t->n_ids);
        total += t->dec_len[ids[i]];
    }
    char *p = malloc(total + 1);
    if (!p) return sd_fail(err, SPECDEC_ERR_NOMEM, "detokenize: %zu bytes", total + 1);
    size_t k = 0;
    for (size_t i = 0; i < n_ids; i++) {
        memcpy(p + k, t->dec_arena + t->dec_off[ids[i]], t->dec_len[ids[i]]);
        k += t->dec_len[ids[i]];
    }
    p[k] = 0;
    *out = p;
    *out_len = k;
    return SPECDEC_OK;
}

int specdec_tokenizer_vocab_size(const specdec_tokenizer *t) { return t ? (int)t->n_ids : 0; }

/* Added tokens are looked up by content first; otherwise `content` is a vocab string as
 * written in tokenizer.json (ByteLevel characters, e.g. "Ġthe"). */
int32_t specdec_tokenizer_token_id(const specdec_tokenizer *t, const char *content) {
    if (!t || !content) return -1;
    size_t n = strlen(content);
    int32_t id = sd_strmap_get(&t->added_map, content, n);
    return id >= 0 ? id : sd_strmap_get(&t->vocab, content, n);
}

const char *specdec_tokenizer_chat_template(const specdec_tokenizer *t) { return t ? t->chat_template : NULL; }

int specdec_tokenizer_eos_ids(const specdec_tokenizer *t, int32_t *ids, int max_ids) {
    if (!t) return 0;
    int n = t->n_eos < max_ids ? t->n_eos : (max_ids > 0 ? max_ids : 0);
    for (int i = 0; i < n; i++) ids[i] = t->eos_ids[i];
    return t->n_eos;
}

/* ---- streaming ---------------------------------------------------------------------- */

struct specdec_stream_decoder {
    const specdec_tokenizer *t;
    uint8_t pending[4];      /* a valid prefix of one character (at most 3 bytes) */
    size_t n_pending;
    sd_buf out;              /* what the last push / flush returned */
};

specdec_status specdec_stream_decoder_init(const specdec_tokenizer *t, specdec_stream_decoder **out,
                                           specdec_err *err) {
    if (!out) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "stream_decoder_init: out is NULL");
    *out = NULL;
    if (!t) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "stream_decoder_init: tokenizer is NULL");
    specdec_stream_decoder *d = calloc(1, sizeof *d);
    if (!d || !sd_buf_reserve(&d->out, 64)) {
        free(d);
        return sd_fail(err, SPECDEC_ERR_NOMEM, "stream decoder");
    }
    d->t = t;
    d->out.p[0] = 0;
    *out = d;
    return SPECDEC_OK;
}

specdec_status specdec_stream_decoder_push(specdec_stream_decoder *d, int32_t id, const char **text, size_t *len) {
    static const char empty[1] = "";
    if (text) *text = empty;
    if (len) *len = 0;
    if (!d || !text || !len) return SPECDEC_ERR_INVALID_ARG;
    if (!id_ok(d->t, id)) return SPECDEC_ERR_INVALID_ARG;
    const uint8_t *tok = (const uint8_t *)d->t->dec_arena + d->t->dec_off[id];
    size_t n = d->t->dec_len[id];
    d->out.n = 0;
    /* Complete the held-back character first: it needs at most 3 more bytes. Classify the
     * pending bytes joined with the token's first bytes; what is consumed from the token is
     * whatever the joined character takes beyond the pending part. */
    size_t used = 0;
    while (d->n_pending && used < n) {
        uint8_t joined[8];
        size_t take = n - used < 4 ? n - used : 4;
        memcpy(joined, d->pending, d->n_pending);
        memcpy(joined + d->n_pending, tok + used, take);
        size_t jn = d->n_pending + take;
        int k = sd_utf8_step(joined, jn);
        if (k == 0) {            /* still incomplete: the whole token joined the pending part */
            memcpy(d->pending + d->n_pending, tok + used, take);
            d->n_pending += take;
            used += take;
            break;
        }
        size_t consumed = (size_t)(k > 0 ? k : -k);
        if (k > 0) { if (!sd_buf_append(&d->out, joined, consumed)) return SPECDEC_ERR_NOMEM; }
        else if (!sd_buf_append(&d->out, "\xEF\xBF\xBD", 3)) return SPECDEC_ERR_NOMEM;
        /* consumed may end inside the pending part (an invalid lead); re-queue the rest */
        if (consumed < d->n_pending) {
            memmove(d->pending, d->pending + consumed, d->n_pending - consumed);
            d->n_pending -= consumed;
        } else {
            used += consumed - d->n_pending;
            d->n_pending = 0;
        }
    }
    if (used < n) {
        size_t hold = sd_utf8_lossy_append(&d->out, tok + used, n - used, true);
        if (hold == (size_t)-1) return SPECDEC_ERR_NOMEM;
        memcpy(d->pending, tok + n - hold, hold);
        d->n_pending = hold;
    }
    *text = d->out.p;
    *len = d->out.n;
    return SPECDEC_OK;
}

void specdec_stream_decoder_flush(specdec_stream_decoder *d, const char **text, size_t *len) {
    static const char empty[1] = "";
    if (text) *text = empty;
    if (len) *len = 0;
    if (!d || !text || !len) return;
    d->out.n = 0;
    d->out.p[0] = 0;
    if (d->n_pending) {
        /* a valid-but-incomplete prefix is one maximal subpart: one U+FFFD */
        if (!sd_buf_append(&d->out, "\xEF\xBF\xBD", 3)) return;
        d->n_pending = 0;
    }
    *text = d->out.p;
    *len = d->out.n;
}

void specdec_stream_decoder_free(specdec_stream_decoder *d) {
    if (!d) return;
    free(d->out.p);
    free(d);
}
