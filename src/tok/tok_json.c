/* tok_json.c: a fast reader for tokenizer.json.
 *
 * Nearly all of an 11 MB tokenizer.json is model.vocab (~150k "token": id pairs) and
 * model.merges (~150k entries). Building a Jansson DOM for them costs ~0.3 s plus ~0.1 s to free;
 * this scanner instead walks the document once, streams vocab and merges into flat arrays, and
 * hands the text of every other value (small: normalizer, pre_tokenizer, added_tokens, ...) to
 * Jansson, so the loader keeps a DOM for the parts it inspects by key. */
#include "tok/tok_internal.h"
#include "util/err.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct scan {
    const char *p, *start, *end;
    specdec_err *err;
    specdec_status st;       /* first failure */
} scan;

static bool fail(scan *s, const char *what) {
    if (s->st == SPECDEC_OK)
        s->st = sd_fail(s->err, SPECDEC_ERR_FORMAT, "byte offset %zu: %s", (size_t)(s->p - s->start), what);
    return false;
}

static void ws(scan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t')) s->p++;
}

static bool expect(scan *s, char c) {
    ws(s);
    if (s->p >= s->end || *s->p != c) {
        char msg[32];
        snprintf(msg, sizeof msg, "expected '%c'", c);
        return fail(s, msg);
    }
    s->p++;
    return true;
}

static int hex4(const char *p) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else return -1;
    }
    return v;
}

/* A JSON string at s->p, decoded and appended to *out (NULL: only skipped). The document was
 * checked to be valid UTF-8 beforehand. */
static bool string(scan *s, sd_buf *out) {
    ws(s);
    if (s->p >= s->end || *s->p != '"') return fail(s, "expected a string");
    s->p++;
    for (;;) {
        const char *q = s->p;
        while (q < s->end && *q != '"' && *q != '\\' && (uint8_t)*q >= 0x20) q++;
        if (out && !sd_buf_append(out, s->p, (size_t)(q - s->p))) return fail(s, "out of memory");
        s->p = q;
        if (q >= s->end) return fail(s, "unterminated string");
        if (*q == '"') { s->p++; return true; }
        if ((uint8_t)*q < 0x20) return fail(s, "control character in a string");
        if (q + 1 >= s->end) return fail(s, "unterminated string");
        char c = q[1], ch = 0;
        s->p = q + 2;
        switch (c) {
        case '"': ch = '"'; break;
        case '\\': ch = '\\'; break;
        case '/': ch = '/'; break;
        case 'b': ch = '\b'; break;
        case 'f': ch = '\f'; break;
        case 'n': ch = '\n'; break;
        case 'r': ch = '\r'; break;
        case 't': ch = '\t'; break;
        case 'u': {
            if (s->end - s->p < 4) return fail(s, "short \\u escape");
            int cp = hex4(s->p);
            if (cp < 0) return fail(s, "bad \\u escape");
            s->p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                int lo = s->end - s->p >= 6 && s->p[0] == '\\' && s->p[1] == 'u' ? hex4(s->p + 2) : -1;
                if (lo < 0xDC00 || lo > 0xDFFF) return fail(s, "unpaired surrogate in \\u escape");
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                s->p += 6;
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) return fail(s, "unpaired surrogate in \\u escape");
            char u[4];
            int n = sd_utf8_put((uint32_t)cp, u);
            if (out && !sd_buf_append(out, u, (size_t)n)) return fail(s, "out of memory");
            continue;
        }
        default: return fail(s, "bad escape");
        }
        if (out && !sd_buf_append(out, &ch, 1)) return fail(s, "out of memory");
    }
}

/* Skip any JSON value (syntax of the skipped part is checked by Jansson when it is parsed). */
static bool skip_value(scan *s) {
    ws(s);
    if (s->p >= s->end) return fail(s, "expected a value");
    if (*s->p == '"') return string(s, NULL);
    if (*s->p == '{' || *s->p == '[') {
        int depth = 0;
        while (s->p < s->end) {
            char c = *s->p;
            if (c == '"') { if (!string(s, NULL)) return false; continue; }
            if (c == '{' || c == '[') depth++;
            else if (c == '}' || c == ']') { if (--depth == 0) { s->p++; return true; } }
            s->p++;
        }
        return fail(s, "unterminated object or array");
    }
    while (s->p < s->end && !strchr(",}] \t\r\n", *s->p)) s->p++;
    return true;
}

static bool integer(scan *s, int64_t *v) {
    ws(s);
    const char *q = s->p;
    int64_t x = 0;
    while (q < s->end && *q >= '0' && *q <= '9' && x < ((int64_t)1 << 40)) x = x * 10 + (*q++ - '0');
    if (q == s->p || (q < s->end && strchr(".eE-+0123456789", *q))) return fail(s, "expected a non-negative integer id");
    s->p = q;
    *v = x;
    return true;
}

/* Iterate an object: returns true with *more = false at '}', else leaves the key in key_buf. */
static bool next_key(scan *s, bool first, sd_buf *key, bool *more) {
    ws(s);
    if (s->p < s->end && *s->p == '}') { s->p++; *more = false; return true; }
    if (!first && !expect(s, ',')) return false;
    key->n = 0;
    if (!string(s, key) || !expect(s, ':')) return false;
    *more = true;
    return true;
}

static bool next_elem(scan *s, bool first, bool *more) {
    ws(s);
    if (s->p < s->end && *s->p == ']') { s->p++; *more = false; return true; }
    if (!first && !expect(s, ',')) return false;
    *more = true;
    return true;
}

static bool push_u32(uint32_t **a, size_t *n, size_t *cap, uint32_t v) {
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 1024;
        uint32_t *p = realloc(*a, c * sizeof *p);
        if (!p) return false;
        *a = p;
        *cap = c;
    }
    (*a)[(*n)++] = v;
    return true;
}

static bool vocab(scan *s, sd_tok_doc *d) {
    /* A second "vocab" would append to arrays whose count was already divided: refuse it, as
     * HF's loader refuses a duplicate field. */
    if (d->have_vocab) return fail(s, "duplicate key \"vocab\"");
    if (!expect(s, '{')) return false;
    sd_buf key = {0};
    size_t cap = 0;
    bool more = true, ok = true;
    d->have_vocab = true;
    for (bool first = true; ok; first = false) {
        size_t off = d->vocab_strs.n;
        int64_t id;
        ok = next_key(s, first, &key, &more);
        if (!ok || !more) break;
        ok = sd_buf_append(&d->vocab_strs, key.p, key.n) && integer(s, &id);
        if (ok && id >= (1 << 26)) ok = fail(s, "vocab id out of range");
        /* three u32 per entry: string offset, length, id */
        ok = ok && push_u32(&d->vocab, &d->n_vocab, &cap, (uint32_t)off) &&
             push_u32(&d->vocab, &d->n_vocab, &cap, (uint32_t)key.n) && push_u32(&d->vocab, &d->n_vocab, &cap, (uint32_t)id);
    }
    d->n_vocab /= 3;
    free(key.p);
    return ok || fail(s, "vocab");
}

static bool merges(scan *s, sd_tok_doc *d) {
    if (d->have_merges) return fail(s, "duplicate key \"merges\"");
    if (!expect(s, '[')) return false;
    size_t cap = 0;
    bool more = true, ok = true;
    d->have_merges = true;
    for (bool first = true; ok; first = false) {
        ok = next_elem(s, first, &more);
        if (!ok || !more) break;
        ws(s);
        size_t a = d->merge_strs.n, la, lb;
        if (s->p < s->end && *s->p == '"') {
            /* "left right": split at the first space */
            ok = string(s, &d->merge_strs);
            const char *sp = ok ? memchr(d->merge_strs.p + a, ' ', d->merge_strs.n - a) : NULL;
            if (ok && !sp) {
                char msg[64];
                snprintf(msg, sizeof msg, "model.merges[%zu] is not \"left right\"", d->n_merges / 4);
                ok = fail(s, msg);
            }
            if (!ok) break;
            la = (size_t)(sp - (d->merge_strs.p + a));
            lb = d->merge_strs.n - a - la - 1;
            ok = push_u32(&d->merges, &d->n_merges, &cap, (uint32_t)a) && push_u32(&d->merges, &d->n_merges, &cap, (uint32_t)la) &&
                 push_u32(&d->merges, &d->n_merges, &cap, (uint32_t)(a + la + 1)) && push_u32(&d->merges, &d->n_merges, &cap, (uint32_t)lb);
        } else {
            ok = expect(s, '[') && string(s, &d->merge_strs);
            size_t b = d->merge_strs.n;
            ok = ok && expect(s, ',') && string(s, &d->merge_strs) && expect(s, ']');
            if (!ok) {
                char msg[64];
                snprintf(msg, sizeof msg, "model.merges[%zu] is neither \"a b\" nor [a, b]", d->n_merges / 4);
                fail(s, msg);
                break;
            }
            ok = push_u32(&d->merges, &d->n_merges, &cap, (uint32_t)a) && push_u32(&d->merges, &d->n_merges, &cap, (uint32_t)(b - a)) &&
                 push_u32(&d->merges, &d->n_merges, &cap, (uint32_t)b) && push_u32(&d->merges, &d->n_merges, &cap, (uint32_t)(d->merge_strs.n - b));
        }
    }
    d->n_merges /= 4;
    return ok || fail(s, "merges");
}

/* Parse the value at s->p with Jansson and store it under key in obj. */
static bool small_value(scan *s, json_t *obj, const char *key) {
    ws(s);
    const char *v0 = s->p;
    if (!skip_value(s)) return false;
    json_error_t je;
    json_t *v = json_loadb(v0, (size_t)(s->p - v0), JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!v) {
        s->p = v0 + (je.position > 0 ? je.position : 0);
        char msg[200];
        snprintf(msg, sizeof msg, "in \"%s\": %s", key, je.text);
        return fail(s, msg);
    }
    json_object_set_new(obj, key, v);
    return true;
}

specdec_status sd_tok_doc_parse(const char *text, size_t len, sd_tok_doc *d, specdec_err *err) {
    memset(d, 0, sizeof *d);
    scan s = {text, text, text + len, err, SPECDEC_OK};
    size_t bad = sd_utf8_invalid_at((const uint8_t *)text, len);
    if (bad != (size_t)-1) return sd_fail(err, SPECDEC_ERR_FORMAT, "byte offset %zu: invalid UTF-8", bad);
    d->root = json_object();
    json_t *model = json_object();
    sd_buf key = {0};
    bool more = true, ok = d->root && model && expect(&s, '{');
    for (bool first = true; ok; first = false) {
        ok = next_key(&s, first, &key, &more);
        if (!ok || !more) break;
        char *k = strndup(key.p ? key.p : "", key.n);
        if (!k) { ok = fail(&s, "out of memory"); break; }
        if (strcmp(k, "model") == 0) {
            ws(&s);
            if (s.p < s.end && *s.p == '{') {
                s.p++;
                bool mmore = true;
                for (bool mfirst = true; ok; mfirst = false) {
                    ok = next_key(&s, mfirst, &key, &mmore);
                    if (!ok || !mmore) break;
                    char *mk = strndup(key.p ? key.p : "", key.n);
                    if (!mk) { ok = fail(&s, "out of memory"); break; }
                    if (strcmp(mk, "vocab") == 0) { ws(&s); ok = s.p < s.end && *s.p == '{' ? vocab(&s, d) : small_value(&s, model, mk); }
                    else if (strcmp(mk, "merges") == 0) { ws(&s); ok = s.p < s.end && *s.p == '[' ? merges(&s, d) : small_value(&s, model, mk); }
                    else ok = small_value(&s, model, mk);
                    free(mk);
                }
                if (ok) json_object_set(d->root, "model", model);
            } else ok = small_value(&s, d->root, k);
        } else ok = small_value(&s, d->root, k);
        free(k);
    }
    if (ok) { ws(&s); if (s.p != s.end) ok = fail(&s, "trailing characters after the document"); }
    free(key.p);
    json_decref(model);
    if (!ok) {
        specdec_status st = s.st != SPECDEC_OK ? s.st : sd_fail(err, SPECDEC_ERR_NOMEM, "tokenizer.json");
        sd_tok_doc_free(d);
        return st;
    }
    return SPECDEC_OK;
}

void sd_tok_doc_free(sd_tok_doc *d) {
    json_decref(d->root);
    free(d->vocab); free(d->merges);
    free(d->vocab_strs.p); free(d->merge_strs.p);
    memset(d, 0, sizeof *d);
}
