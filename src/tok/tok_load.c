/* tok_load.c: build a specdec_tokenizer from DIR/tokenizer.json (+ DIR/tokenizer_config.json).
 *
 * What is read: normalizer (null | NFC | Sequence of NFC), pre_tokenizer (Split{Regex|String,
 * Isolated, invert false} steps ending in ByteLevel, or a lone ByteLevel), model BPE (vocab,
 * merges as "a b" strings or [a, b] pairs, ignore_merges, unk_token), added_tokens, decoder
 * ByteLevel. Anything else is refused with SPECDEC_ERR_UNSUPPORTED naming the key and type, so
 * a tokenizer we would get wrong is never used silently. post_processor is ignored: it only adds
 * special tokens when asked to, and specdec_tokenize never adds any. */
#include "model/model_dir.h"
#include "tok/tok_internal.h"
#include "util/err.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* GPT-2's pre-tokenizer regex, used by ByteLevel when use_regex is true. */
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static const char *json_type_of(json_t *o) {
    json_t *ty = json_object_get(o, "type");
    return json_is_string(ty) ? json_string_value(ty) : "(no type)";
}

static bool json_flag(json_t *o, const char *key, bool dflt) {
    json_t *v = json_object_get(o, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

/* HF compiles these patterns with Oniguruma, whose Unicode \s is U+0009..U+000D, U+0085 and
 * the Z categories. PCRE2's \s also takes U+180E (no longer a space since Unicode 6.3), so \s
 * and \S are spelled out. Inside a class \s becomes the bare ranges; \S inside a class is
 * left alone (no pattern we know uses it). Returns a malloc'ed pattern, NULL on NOMEM. */
static char *spell_out_ws(const char *pat, size_t len, size_t *out_len) {
    static const char ws[] = "\\t-\\r\\x{85}\\p{Z}";
    char *o = malloc(len * 24 + 1), *w = o;
    if (!o) return NULL;
    bool in_class = false;
    for (size_t i = 0; i < len; i++) {
        char c = pat[i];
        if (c == '\\' && i + 1 < len) {
            char d = pat[++i];
            if (d == 's' && in_class) { memcpy(w, ws, sizeof ws - 1); w += sizeof ws - 1; }
            else if (d == 's' || d == 'S') {
                *w++ = '[';
                if (d == 'S') *w++ = '^';
                memcpy(w, ws, sizeof ws - 1); w += sizeof ws - 1;
                *w++ = ']';
            } else { *w++ = c; *w++ = d; }
            continue;
        }
        if (!in_class && c == '[') {
            in_class = true;
            *w++ = c;
            if (i + 1 < len && pat[i + 1] == '^') *w++ = pat[++i];
            if (i + 1 < len && pat[i + 1] == ']') *w++ = pat[++i];   /* a leading ']' is literal */
            continue;
        }
        if (in_class && c == '[' && i + 1 < len && pat[i + 1] == ':') {   /* [:alpha:] */
            const char *end = strstr(pat + i + 2, ":]");
            size_t n = end && (size_t)(end - pat) < len ? (size_t)(end - pat) + 2 - i : 1;
            memcpy(w, pat + i, n); w += n; i += n - 1;
            continue;
        }
        if (in_class && c == ']') in_class = false;
        *w++ = c;
    }
    *w = 0;
    *out_len = (size_t)(w - o);
    return o;
}

static specdec_status compile_re(const char *pat, size_t len, uint32_t extra, pcre2_code **out,
                                 specdec_err *err, const char *where) {
    int code;
    PCRE2_SIZE off;
    char *spelled = NULL;
    if (!(extra & PCRE2_LITERAL)) {
        if (!(spelled = spell_out_ws(pat, len, &len))) return sd_fail(err, SPECDEC_ERR_NOMEM, "%s", where);
        pat = spelled;
    }
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, len, PCRE2_UTF | PCRE2_UCP | extra, &code, &off, NULL);
    free(spelled);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s: regex does not compile at offset %zu: %s",
                       where, (size_t)off, (const char *)msg);
    }
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* the interpreter is the fallback */
    *out = re;
    return SPECDEC_OK;
}

/* ---- normalizer, pre_tokenizer, decoder --------------------------------------------- */

static specdec_status load_normalizer(specdec_tokenizer *t, json_t *n, specdec_err *err) {
    if (!n || json_is_null(n)) return SPECDEC_OK;
    const char *ty = json_type_of(n);
    if (strcmp(ty, "NFC") == 0) { t->nfc = true; return SPECDEC_OK; }
    if (strcmp(ty, "Sequence") == 0) {
        json_t *list = json_object_get(n, "normalizers");
        size_t i; json_t *e;
        if (!json_is_array(list)) return sd_fail(err, SPECDEC_ERR_FORMAT, "normalizer Sequence lacks \"normalizers\"");
        json_array_foreach(list, i, e) SD_TRY(load_normalizer(t, e, err));
        return SPECDEC_OK;
    }
    return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "normalizer type \"%s\" is not supported (NFC or null only)", ty);
}

static specdec_status add_step(specdec_tokenizer *t, pcre2_code *re, bool prefix_space, specdec_err *err) {
    if (t->n_steps == SD_TOK_MAX_STEPS) {
        if (re) pcre2_code_free(re);
        return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "pre_tokenizer has more than %d steps", SD_TOK_MAX_STEPS);
    }
    t->steps[t->n_steps].re = re;
    t->steps[t->n_steps].prefix_space = prefix_space;
    t->n_steps++;
    return SPECDEC_OK;
}

/* One pre-tokenizer. *byte_level is set when a ByteLevel was seen; nothing may follow it. */
static specdec_status load_pretok(specdec_tokenizer *t, json_t *p, bool *byte_level, specdec_err *err) {
    const char *ty = json_type_of(p);
    if (*byte_level)
        return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "pre_tokenizer \"%s\" after ByteLevel is not supported", ty);
    if (strcmp(ty, "Sequence") == 0) {
        json_t *list = json_object_get(p, "pretokenizers");
        size_t i; json_t *e;
        if (!json_is_array(list)) return sd_fail(err, SPECDEC_ERR_FORMAT, "pre_tokenizer Sequence lacks \"pretokenizers\"");
        json_array_foreach(list, i, e) SD_TRY(load_pretok(t, e, byte_level, err));
        return SPECDEC_OK;
    }
    if (strcmp(ty, "Split") == 0) {
        json_t *beh = json_object_get(p, "behavior"), *pat = json_object_get(p, "pattern");
        const char *b = json_is_string(beh) ? json_string_value(beh) : "(missing)";
        if (strcmp(b, "Isolated") != 0)
            return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "pre_tokenizer Split behavior \"%s\" is not supported (Isolated only)", b);
        if (json_flag(p, "invert", false))
            return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "pre_tokenizer Split with invert true is not supported");
        json_t *rx = json_object_get(pat, "Regex"), *lit = json_object_get(pat, "String");
        pcre2_code *re = NULL;
        if (json_is_string(rx))
            SD_TRY(compile_re(json_string_value(rx), json_string_length(rx), 0, &re, err, "pre_tokenizer Split pattern"));
        else if (json_is_string(lit))
            SD_TRY(compile_re(json_string_value(lit), json_string_length(lit), PCRE2_LITERAL, &re, err, "pre_tokenizer Split pattern"));
        else
            return sd_fail(err, SPECDEC_ERR_FORMAT, "pre_tokenizer Split lacks pattern.Regex or pattern.String");
        return add_step(t, re, false, err);
    }
    if (strcmp(ty, "ByteLevel") == 0) {
        pcre2_code *re = NULL;
        if (json_flag(p, "use_regex", true))
            SD_TRY(compile_re(GPT2_PATTERN, sizeof GPT2_PATTERN - 1, 0, &re, err, "ByteLevel regex"));
        *byte_level = true;
        return add_step(t, re, json_flag(p, "add_prefix_space", true), err);
    }
    return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "pre_tokenizer type \"%s\" is not supported (Split, ByteLevel, Sequence)", ty);
}

static specdec_status check_decoder(json_t *d, specdec_err *err) {
    if (!d || json_is_null(d))
        return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "tokenizer has no decoder (ByteLevel required)");
    const char *ty = json_type_of(d);
    if (strcmp(ty, "ByteLevel") == 0) return SPECDEC_OK;
    return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "decoder type \"%s\" is not supported (ByteLevel only)", ty);
}

/* ---- model and added tokens --------------------------------------------------------- */

static specdec_status check_model_options(json_t *m, specdec_err *err) {
    json_t *ty = json_object_get(m, "type");
    if (ty && !(json_is_string(ty) && strcmp(json_string_value(ty), "BPE") == 0))
        return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "model type \"%s\" is not supported (BPE only)", json_type_of(m));
    json_t *drop = json_object_get(m, "dropout");
    if (drop && !json_is_null(drop) && json_number_value(drop) != 0.0)
        return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "model.dropout is not supported");
    static const char *empty_keys[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(m, empty_keys[i]);
        if (v && !json_is_null(v) && !(json_is_string(v) && json_string_length(v) == 0))
            return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "model.%s is not supported", empty_keys[i]);
    }
    if (json_flag(m, "byte_fallback", false))
        return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "model.byte_fallback is not supported");
    return SPECDEC_OK;
}

static specdec_status load_merges(specdec_tokenizer *t, const sd_tok_doc *d, specdec_err *err) {
    if (!d->have_merges) return sd_fail(err, SPECDEC_ERR_FORMAT, "model.merges is missing or not an array");
    size_t n = d->n_merges;
    if (n > (1u << 29)) return sd_fail(err, SPECDEC_ERR_FORMAT, "model.merges has %zu entries", n);
    if (!sd_pairmap_init(&t->merges, (uint32_t)n + 1)) return sd_fail(err, SPECDEC_ERR_NOMEM, "merges table");
    char stackbuf[512];
    for (size_t i = 0; i < n; i++) {
        const uint32_t *m = d->merges + 4 * i;
        const char *a = d->merge_strs.p + m[0], *b = d->merge_strs.p + m[2];
        size_t la = m[1], lb = m[3];
        int32_t ia = sd_strmap_get(&t->vocab, a, la), ib = sd_strmap_get(&t->vocab, b, lb);
        char *cat = la + lb <= sizeof stackbuf ? stackbuf : malloc(la + lb);
        if (!cat) return sd_fail(err, SPECDEC_ERR_NOMEM, "merges");
        memcpy(cat, a, la);
        memcpy(cat + la, b, lb);
        int32_t ic = sd_strmap_get(&t->vocab, cat, la + lb);
        if (cat != stackbuf) free(cat);
        if (ia < 0 || ib < 0 || ic < 0)
            return sd_fail(err, SPECDEC_ERR_FORMAT, "model.merges[%zu] (\"%.*s\" + \"%.*s\"): %s is not in the vocab",
                           i, (int)la, a, (int)lb, b, ia < 0 ? "the left part" : ib < 0 ? "the right part" : "the merged token");
        sd_pairmap_put(&t->merges, ia, ib, (int32_t)i, ic);
    }
    return SPECDEC_OK;
}

/* Raw bytes of a vocab token: each character mapped back through the ByteLevel alphabet; a
 * token holding a character outside the alphabet decodes to its own UTF-8 (as HF does). */
static size_t decode_vocab_token(const char *s, size_t n, char *out) {
    size_t k = 0, i = 0;
    while (i < n) {
        int len = sd_utf8_step((const uint8_t *)s + i, n - i);
        int b = len > 0 ? sd_cp_to_byte(sd_utf8_cp((const uint8_t *)s + i, len)) : -1;
        if (b < 0) { memcpy(out, s, n); return n; }
        out[k++] = (char)b;
        i += (size_t)len;
    }
    return k;
}

typedef struct byfirst { uint8_t first; uint32_t len; int32_t idx; } byfirst;
static int byfirst_cmp(const void *pa, const void *pb) {
    const byfirst *a = pa, *b = pb;
    if (a->first != b->first) return a->first < b->first ? -1 : 1;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static specdec_status load_added(specdec_tokenizer *t, json_t *list, specdec_err *err) {
    if (!list || json_is_null(list)) list = NULL;
    else if (!json_is_array(list)) return sd_fail(err, SPECDEC_ERR_FORMAT, "added_tokens is not an array");
    size_t n = list ? json_array_size(list) : 0;
    t->added = calloc(n ? n : 1, sizeof *t->added);
    t->by_byte_idx = calloc(n ? n : 1, sizeof *t->by_byte_idx);
    byfirst *order = calloc(n ? n : 1, sizeof *order);
    if (!t->added || !t->by_byte_idx || !order || !sd_strmap_init(&t->added_map, (uint32_t)n + 1)) {
        free(order);
        return sd_fail(err, SPECDEC_ERR_NOMEM, "added_tokens");
    }
    size_t n_order = 0;
    specdec_status st = SPECDEC_OK;
    for (size_t i = 0; i < n && st == SPECDEC_OK; i++) {
        json_t *e = json_array_get(list, i), *id = json_object_get(e, "id"), *c = json_object_get(e, "content");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= (1 << 26) || !json_is_string(c)) {
            st = sd_fail(err, SPECDEC_ERR_FORMAT, "added_tokens[%zu] lacks a valid id or content", i);
            break;
        }
        sd_added_token *a = &t->added[t->n_added++];
        a->id = (int32_t)json_integer_value(id);
        a->len = (uint32_t)json_string_length(c);
        a->content = malloc(a->len + 1);
        if (!a->content) { st = sd_fail(err, SPECDEC_ERR_NOMEM, "added_tokens"); break; }
        memcpy(a->content, json_string_value(c), a->len + 1);
        if (sd_utf8_invalid_at((const uint8_t *)a->content, a->len) != (size_t)-1) {
            st = sd_fail(err, SPECDEC_ERR_FORMAT, "added_tokens[%zu] content is not valid UTF-8", i);
            break;
        }
        a->special = json_flag(e, "special", false);
        a->single_word = json_flag(e, "single_word", false);
        a->lstrip = json_flag(e, "lstrip", false);
        a->rstrip = json_flag(e, "rstrip", false);
        a->normalized = json_flag(e, "normalized", !a->special);
        a->match = a->content;
        a->match_len = a->len;
        if (a->normalized && t->nfc) {
            size_t m;
            a->match = sd_nfc(a->content, a->len, &m);
            if (!a->match) { st = sd_fail(err, SPECDEC_ERR_NOMEM, "added_tokens"); break; }
            a->match_len = (uint32_t)m;
        }
        if (a->normalized) t->any_normalized_added = true;
        if (!sd_strmap_put(&t->added_map, a->content, a->len, a->id)) { st = sd_fail(err, SPECDEC_ERR_NOMEM, "added_tokens"); break; }
        if (a->match_len) order[n_order++] = (byfirst){(uint8_t)a->match[0], a->match_len, (int32_t)(t->n_added - 1)};
    }
    if (st == SPECDEC_OK) {
        qsort(order, n_order, sizeof *order, byfirst_cmp);
        size_t k = 0;
        for (int b = 0; b < 256; b++) {
            t->by_byte_start[b] = (uint32_t)k;
            while (k < n_order && order[k].first == b) { t->by_byte_idx[k] = order[k].idx; k++; }
        }
        t->by_byte_start[256] = (uint32_t)k;
    }
    free(order);
    return st;
}

/* Vocab, per-id tables, merges. Added tokens must already be loaded (they extend the id range
 * and override the decoded text of their ids). */
static specdec_status load_model(specdec_tokenizer *t, json_t *m, const sd_tok_doc *d, specdec_err *err) {
    if (!json_is_object(m)) return sd_fail(err, SPECDEC_ERR_FORMAT, "tokenizer.json lacks \"model\"");
    SD_TRY(check_model_options(m, err));
    t->ignore_merges = json_flag(m, "ignore_merges", false);
    if (!d->have_vocab) return sd_fail(err, SPECDEC_ERR_FORMAT, "model.vocab is missing or not an object");
    size_t total = d->vocab_strs.n;
    int64_t max_id = -1;
    for (size_t i = 0; i < d->n_vocab; i++)
        if ((int64_t)d->vocab[3 * i + 2] > max_id) max_id = d->vocab[3 * i + 2];
    for (int i = 0; i < t->n_added; i++) {
        if (t->added[i].id > max_id) max_id = t->added[i].id;
        total += t->added[i].len;
    }
    t->n_ids = (int32_t)(max_id + 1);
    size_t nid = (size_t)t->n_ids ? (size_t)t->n_ids : 1;
    t->str_off = malloc(nid * sizeof *t->str_off);
    t->str_len = malloc(nid * sizeof *t->str_len);
    t->dec_off = malloc(nid * sizeof *t->dec_off);
    t->dec_len = malloc(nid * sizeof *t->dec_len);
    t->is_added = calloc(nid, sizeof *t->is_added);
    t->str_arena = malloc(total + 1);
    t->dec_arena = malloc(total + 1);
    if (!t->str_off || !t->str_len || !t->dec_off || !t->dec_len || !t->is_added || !t->str_arena ||
        !t->dec_arena || !sd_strmap_init(&t->vocab, (uint32_t)d->n_vocab))
        return sd_fail(err, SPECDEC_ERR_NOMEM, "vocab of %zu tokens", d->n_vocab);
    for (size_t i = 0; i < nid; i++) t->str_len[i] = t->dec_len[i] = UINT32_MAX;
    size_t so = 0, dn = 0;
    for (size_t i = 0; i < d->n_vocab; i++) {
        const char *key = d->vocab_strs.p + d->vocab[3 * i];
        size_t len = d->vocab[3 * i + 1];
        int32_t id = (int32_t)d->vocab[3 * i + 2];
        if (t->str_len[id] != UINT32_MAX)
            return sd_fail(err, SPECDEC_ERR_FORMAT, "model.vocab: id %d is used by two tokens", (int)id);
        memcpy(t->str_arena + so, key, len);
        t->str_off[id] = (uint32_t)so;
        t->str_len[id] = (uint32_t)len;
        if (!sd_strmap_put(&t->vocab, t->str_arena + so, (uint32_t)len, id)) return sd_fail(err, SPECDEC_ERR_NOMEM, "vocab");
        so += len;
        t->dec_off[id] = (uint32_t)dn;
        t->dec_len[id] = (uint32_t)decode_vocab_token(key, len, t->dec_arena + dn);
        dn += t->dec_len[id];
    }
    for (int i = 0; i < t->n_added; i++) {
        const sd_added_token *a = &t->added[i];
        memcpy(t->dec_arena + dn, a->content, a->len);
        t->dec_off[a->id] = (uint32_t)dn;
        t->dec_len[a->id] = a->len;
        t->is_added[a->id] = true;
        dn += a->len;
    }
    for (int b = 0; b < 256; b++) {
        char s[4];
        int n = sd_utf8_put(sd_byte_to_cp((uint8_t)b), s);
        t->byte_id[b] = sd_strmap_get(&t->vocab, s, (size_t)n);
    }
    t->unk_id = -1;
    json_t *unk = json_object_get(m, "unk_token");
    if (json_is_string(unk)) {
        t->unk_id = sd_strmap_get(&t->vocab, json_string_value(unk), json_string_length(unk));
        if (t->unk_id < 0)
            return sd_fail(err, SPECDEC_ERR_FORMAT, "model.unk_token \"%s\" is not in the vocab", json_string_value(unk));
    }
    return load_merges(t, d, err);
}

/* ---- tokenizer_config.json ---------------------------------------------------------- */

/* Whole file, NUL-terminated; NULL when it cannot be read. */
static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    struct stat sb;
    char *p = NULL;
    if (fstat(fileno(f), &sb) == 0 && sb.st_size >= 0 && (p = malloc((size_t)sb.st_size + 1))) {
        size_t n = fread(p, 1, (size_t)sb.st_size, f);
        if (n != (size_t)sb.st_size) { free(p); p = NULL; }
        else { p[n] = 0; if (len) *len = n; }
    }
    fclose(f);
    return p;
}

static specdec_status load_config(specdec_tokenizer *t, const char *dir, specdec_err *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    struct stat sb;
    json_t *cfg = NULL;
    if (stat(path, &sb) == 0) {
        json_error_t je;
        cfg = json_load_file(path, 0, &je);
        if (!cfg) return sd_fail(err, SPECDEC_ERR_FORMAT, "%s: line %d column %d: %s", path, je.line, je.column, je.text);
    }
    specdec_status st = SPECDEC_OK;
    json_t *eos = cfg ? json_object_get(cfg, "eos_token") : NULL;
    if (json_is_object(eos)) eos = json_object_get(eos, "content");
    if (json_is_string(eos)) {
        int32_t id = specdec_tokenizer_token_id(t, json_string_value(eos));
        if (id < 0) st = sd_fail(err, SPECDEC_ERR_CONFIG, "%s: eos_token \"%s\" is not a token", path, json_string_value(eos));
        else t->eos_ids[t->n_eos++] = id;
    }
    json_t *tpl = cfg ? json_object_get(cfg, "chat_template") : NULL;
    if (json_is_array(tpl)) {
        /* a list of named templates: take "default", else the first */
        size_t i; json_t *e; json_t *pick = NULL;
        json_array_foreach(tpl, i, e) {
            json_t *nm = json_object_get(e, "name");
            if (!pick || (json_is_string(nm) && strcmp(json_string_value(nm), "default") == 0)) pick = json_object_get(e, "template");
        }
        tpl = pick;
    }
    if (st == SPECDEC_OK && json_is_string(tpl)) {
        t->chat_template = strdup(json_string_value(tpl));
        if (!t->chat_template) st = sd_fail(err, SPECDEC_ERR_NOMEM, "chat_template");
    } else if (st == SPECDEC_OK) {
        /* newer checkpoints keep the template in its own file */
        snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
        t->chat_template = read_file(path, NULL);
    }
    json_decref(cfg);
    return st;
}

/* ---- public ------------------------------------------------------------------------- */

specdec_status specdec_tokenizer_load(const char *dir, specdec_tokenizer **out, specdec_err *err) {
    if (!out) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "specdec_tokenizer_load: out is NULL");
    *out = NULL;
    if (!dir) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "specdec_tokenizer_load: dir is NULL");
    SD_TRY(sd_model_dir_check(dir, err));   /* a GGUF file named as the model: say what is read instead */
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    struct stat sb;
    if (stat(path, &sb) != 0) return sd_fail(err, SPECDEC_ERR_MISSING, "%s: no such file", path);
    size_t text_len = 0;
    char *text = read_file(path, &text_len);
    if (!text) return sd_fail(err, SPECDEC_ERR_IO, "%s: cannot read", path);
    sd_tok_doc doc;
    specdec_status dst = sd_tok_doc_parse(text, text_len, &doc, err);
    free(text);
    if (dst != SPECDEC_OK) return sd_err_prefix(err, "%s", path);
    json_t *root = doc.root;
    specdec_tokenizer *t = calloc(1, sizeof *t);
    specdec_status st = SPECDEC_OK;
    bool byte_level = false;
    if (!t || !sd_bpe_cache_init(&t->cache)) st = sd_fail(err, SPECDEC_ERR_NOMEM, "tokenizer");
    if (st == SPECDEC_OK) st = load_normalizer(t, json_object_get(root, "normalizer"), err);
    if (st == SPECDEC_OK) {
        json_t *p = json_object_get(root, "pre_tokenizer");
        if (!p || json_is_null(p)) st = sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "pre_tokenizer is null (ByteLevel required)");
        else st = load_pretok(t, p, &byte_level, err);
        if (st == SPECDEC_OK && !byte_level)
            st = sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "pre_tokenizer has no ByteLevel step (byte-level BPE only)");
    }
    if (st == SPECDEC_OK) st = check_decoder(json_object_get(root, "decoder"), err);
    if (st == SPECDEC_OK) st = load_added(t, json_object_get(root, "added_tokens"), err);
    if (st == SPECDEC_OK) st = load_model(t, json_object_get(root, "model"), &doc, err);
    sd_tok_doc_free(&doc);
    if (st == SPECDEC_OK) st = load_config(t, dir, err);
    if (st != SPECDEC_OK) {
        if (err && st != SPECDEC_ERR_NOMEM && strncmp(err->msg, dir, strlen(dir)) != 0) sd_err_prefix(err, "%s", path);
        specdec_tokenizer_free(t);
        return st;
    }
    *out = t;
    return SPECDEC_OK;
}

void specdec_tokenizer_free(specdec_tokenizer *t) {
    if (!t) return;
    free(t->str_off); free(t->str_len); free(t->dec_off); free(t->dec_len); free(t->is_added);
    free(t->str_arena); free(t->dec_arena);
    sd_strmap_free(&t->vocab);
    sd_pairmap_free(&t->merges);
    for (int i = 0; i < t->n_steps; i++) pcre2_code_free(t->steps[i].re);
    for (int i = 0; i < t->n_added; i++) {
        if (t->added[i].match != t->added[i].content) free(t->added[i].match);
        free(t->added[i].content);
    }
    free(t->added);
    free(t->by_byte_idx);
    sd_strmap_free(&t->added_map);
    free(t->chat_template);
    sd_bpe_cache_free(&t->cache);
    free(t);
}
