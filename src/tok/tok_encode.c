/* tok_encode.c: specdec_tokenize, text -> ids, in HF tokenizers' order:
 *   1. validate UTF-8 (before anything, so the error names the caller's byte offset);
 *   2. split the raw text on added tokens whose `normalized` is false (leftmost-longest);
 *   3. NFC-normalize each gap between them; split it on added tokens whose `normalized` is true;
 *   4. pre-tokenize each remaining gap: every Split step cuts each piece into regex matches and
 *      the gaps between them (Isolated), then ByteLevel (optional prefix space / GPT-2 regex);
 *   5. BPE each final piece (tok_bpe.c). */
#include "tok/tok_internal.h"
#include "util/err.h"
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

typedef struct enc {
    const specdec_tokenizer *t;
    int32_t *ids;
    size_t n, cap;
    pcre2_match_data *md[SD_TOK_MAX_STEPS];
    pcre2_match_context *mc;
    pcre2_jit_stack *js;
    specdec_err *err;
} enc;

char *sd_nfc(const char *s, size_t n, size_t *out_n) {
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &dst,
                                      UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (r < 0) { free(dst); return NULL; }
    *out_n = (size_t)r;
    return (char *)dst;
}

static bool all_ascii(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) if ((uint8_t)s[i] >= 0x80) return false;
    return true;
}

/* Rust's char::is_whitespace (Unicode White_Space), for lstrip / rstrip. */
static bool is_ws(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static bool is_word_cp(uint32_t c) {
    if (c == '_') return true;
    utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)c);
    return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
           (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}

/* Code point of the character ending just before s[i] (i > 0, s valid UTF-8). */
static uint32_t cp_before(const char *s, size_t i, size_t *start) {
    size_t j = i - 1;
    while (j > 0 && ((uint8_t)s[j] & 0xC0) == 0x80) j--;
    *start = j;
    return sd_utf8_cp((const uint8_t *)s + j, (int)(i - j));
}

static uint32_t cp_at(const char *s, size_t n, size_t i, int *len) {
    *len = sd_utf8_step((const uint8_t *)s + i, n - i);
    if (*len <= 0) *len = 1;
    return sd_utf8_cp((const uint8_t *)s + i, *len);
}

/* ---- pre-tokenizer + BPE ------------------------------------------------------------ */

static specdec_status split_step(enc *e, int k, const char *s, size_t n);

/* Cut s with step k's regex: matches and the gaps between them go on to step k + 1. */
static specdec_status run_regex(enc *e, int k, const char *s, size_t n) {
    const pcre2_code *re = e->t->steps[k].re;
    if (!re) return split_step(e, k + 1, s, n);
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md[k]);
    size_t off = 0, prev = 0;
    while (off < n) {
        int rc = pcre2_match(re, (PCRE2_SPTR)s, n, off, PCRE2_NO_UTF_CHECK, e->md[k], e->mc);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[128];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return sd_fail(e->err, SPECDEC_ERR_INTERNAL, "tokenize: pre_tokenizer regex %d failed in a %zu-byte piece: %s",
                           k, n, (const char *)msg);
        }
        size_t ms = ov[0], me = ov[1];
        if (me == ms) {               /* no empty pieces: step over one character */
            if (ms >= n) break;       /* an empty match at the very end: nothing left to read */
            int l; (void)cp_at(s, n, ms, &l); off = ms + (size_t)l; continue;
        }
        if (ms > prev) SD_TRY(split_step(e, k + 1, s + prev, ms - prev));
        SD_TRY(split_step(e, k + 1, s + ms, me - ms));
        prev = off = me;
    }
    if (prev < n) SD_TRY(split_step(e, k + 1, s + prev, n - prev));
    return SPECDEC_OK;
}

/* Pre-tokenizer step k on one piece; past the last step the piece goes to BPE. */
static specdec_status split_step(enc *e, int k, const char *s, size_t n) {
    if (n == 0) return SPECDEC_OK;
    const specdec_tokenizer *t = e->t;
    if (k == t->n_steps) {
        specdec_status st = sd_bpe_piece(t, (const uint8_t *)s, n, &e->ids, &e->n, &e->cap);
        return st == SPECDEC_OK ? st : sd_fail(e->err, st, "tokenize: out of memory");
    }
    if (!t->steps[k].prefix_space || s[0] == ' ') return run_regex(e, k, s, n);
    char *p = malloc(n + 1);
    if (!p) return sd_fail(e->err, SPECDEC_ERR_NOMEM, "tokenize: out of memory");
    p[0] = ' ';
    memcpy(p + 1, s, n);
    specdec_status st = run_regex(e, k, p, n + 1);
    free(p);
    return st;
}

/* ---- added tokens ------------------------------------------------------------------- */

static specdec_status raw_gap(enc *e, const char *s, size_t n);

static specdec_status push_id(enc *e, int32_t id) {
    if (e->n == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 64;
        int32_t *p = realloc(e->ids, cap * sizeof *p);
        if (!p) return sd_fail(e->err, SPECDEC_ERR_NOMEM, "tokenize: out of memory");
        e->ids = p;
        e->cap = cap;
    }
    e->ids[e->n++] = id;
    return SPECDEC_OK;
}

static specdec_status gap(enc *e, bool normalized_pass, const char *s, size_t n) {
    return normalized_pass ? split_step(e, 0, s, n) : raw_gap(e, s, n);
}

/* Split s on the added tokens of one pass (normalized == normalized_pass), as HF's
 * AddedVocabulary::find_matches: leftmost-longest, non-overlapping; a single_word token
 * touching a word character is skipped; lstrip / rstrip swallow adjacent whitespace. */
static specdec_status scan_added(enc *e, const char *s, size_t n, bool normalized_pass) {
    const specdec_tokenizer *t = e->t;
    size_t start_offset = 0, i = 0;
    while (i < n) {
        uint8_t b = (uint8_t)s[i];
        const sd_added_token *hit = NULL;
        for (uint32_t k = t->by_byte_start[b]; k < t->by_byte_start[b + 1]; k++) {
            const sd_added_token *a = &t->added[t->by_byte_idx[k]];
            if (a->normalized != normalized_pass) continue;
            if (a->match_len <= n - i && memcmp(s + i, a->match, a->match_len) == 0) { hit = a; break; }
        }
        if (!hit) { i++; continue; }
        size_t start = i, stop = i + hit->match_len;
        if (hit->single_word) {
            size_t js;
            int l;
            bool left_ok = start == 0 || !is_word_cp(cp_before(s, start, &js));
            bool right_ok = stop == n || !is_word_cp(cp_at(s, n, stop, &l));
            if (!left_ok || !right_ok) { i = stop; continue; }
        }
        if (hit->lstrip) {
            while (start > start_offset) {
                size_t js;
                if (!is_ws(cp_before(s, start, &js)) || js < start_offset) break;
                start = js;
            }
        }
        if (hit->rstrip) {
            while (stop < n) {
                int l;
                if (!is_ws(cp_at(s, n, stop, &l))) break;
                stop += (size_t)l;
            }
        }
        if (start > start_offset) SD_TRY(gap(e, normalized_pass, s + start_offset, start - start_offset));
        SD_TRY(push_id(e, hit->id));
        start_offset = i = stop;
    }
    if (start_offset < n) SD_TRY(gap(e, normalized_pass, s + start_offset, n - start_offset));
    return SPECDEC_OK;
}

/* A gap of the raw text between non-normalized added tokens: normalize, then the rest. */
static specdec_status raw_gap(enc *e, const char *s, size_t n) {
    const specdec_tokenizer *t = e->t;
    const char *norm = s;
    char *owned = NULL;
    size_t nn = n;
    if (t->nfc && !all_ascii(s, n)) {
        owned = sd_nfc(s, n, &nn);
        if (!owned) return sd_fail(e->err, SPECDEC_ERR_NOMEM, "tokenize: NFC normalization failed");
        norm = owned;
    }
    specdec_status st = t->any_normalized_added ? scan_added(e, norm, nn, true) : split_step(e, 0, norm, nn);
    free(owned);
    return st;
}

specdec_status specdec_tokenize(const specdec_tokenizer *t, const char *text, size_t len,
                                int32_t **ids, size_t *n_ids, specdec_err *err) {
    if (!ids || !n_ids) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "tokenize: ids or n_ids is NULL");
    *ids = NULL;
    *n_ids = 0;
    if (!t || (!text && len)) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "tokenize: tokenizer or text is NULL");
    size_t bad = sd_utf8_invalid_at((const uint8_t *)text, len);
    if (bad != (size_t)-1) {
        int k = sd_utf8_step((const uint8_t *)text + bad, len - bad);
        return sd_fail(err, SPECDEC_ERR_UTF8, "tokenize: invalid UTF-8 at byte offset %zu (byte 0x%02X %s)", bad,
                       (unsigned)(uint8_t)text[bad], k == 0 ? "starts a sequence cut short by the end of the text" :
                       "starts an invalid sequence");
    }
    enc e = {.t = t, .err = err};
    specdec_status st = SPECDEC_OK;
    for (int k = 0; k < t->n_steps && st == SPECDEC_OK; k++)
        if (t->steps[k].re && !(e.md[k] = pcre2_match_data_create_from_pattern(t->steps[k].re, NULL)))
            st = sd_fail(err, SPECDEC_ERR_NOMEM, "tokenize: out of memory");
    if (st == SPECDEC_OK) {
        /* a private JIT stack: long whitespace runs backtrack deeper than the default 32 KiB */
        e.mc = pcre2_match_context_create(NULL);
        e.js = pcre2_jit_stack_create(32 * 1024, 16 * 1024 * 1024, NULL);
        if (!e.mc || !e.js) st = sd_fail(err, SPECDEC_ERR_NOMEM, "tokenize: out of memory");
        else pcre2_jit_stack_assign(e.mc, NULL, e.js);
    }
    if (st == SPECDEC_OK && len) st = scan_added(&e, text, len, false);
    if (st == SPECDEC_OK && !e.ids) {
        e.ids = malloc(sizeof *e.ids);
        if (!e.ids) st = sd_fail(err, SPECDEC_ERR_NOMEM, "tokenize: out of memory");
    }
    for (int k = 0; k < t->n_steps; k++) pcre2_match_data_free(e.md[k]);
    pcre2_match_context_free(e.mc);
    pcre2_jit_stack_free(e.js);
    if (st != SPECDEC_OK) { free(e.ids); return st; }
    *ids = e.ids;
    *n_ids = e.n;
    return SPECDEC_OK;
}
