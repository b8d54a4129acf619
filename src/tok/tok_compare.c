/* tok_compare.c: do two tokenizer.json files give the same ids? A draft model must tokenize as the
 * target does, but models of one family often ship the same tokenizer formatted differently
 * (indentation, key order, merges as "a b" or ["a", "b"]). So compare what decides the ids, not
 * the bytes: the vocabulary (token -> id), the merges in rank order, the added tokens (content,
 * id, special and matching flags), and the normalizer, pre-tokenizer, post-processor, decoder and
 * the model's other settings as JSON values (key order does not matter). The first difference is
 * named. */
#include "tok/tok_compare.h"
#include "tok/tok_internal.h"
#include "util/err.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SHOW 48   /* bytes of a token shown in a message */

static specdec_status load_doc(const char *path, sd_tok_doc *d, specdec_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return sd_fail(err, SPECDEC_ERR_IO, "%s: cannot open", path);
    struct stat sb;
    char *p = NULL;
    size_t n = 0;
    if (fstat(fileno(f), &sb) == 0 && sb.st_size >= 0 && (p = malloc((size_t)sb.st_size + 1))) n = fread(p, 1, (size_t)sb.st_size, f);
    fclose(f);
    if (!p) return sd_fail(err, SPECDEC_ERR_NOMEM, "%s: cannot read", path);
    if (n != (size_t)sb.st_size) { free(p); return sd_fail(err, SPECDEC_ERR_IO, "%s: read error", path); }
    p[n] = 0;
    specdec_status st = sd_tok_doc_parse(p, n, d, err);
    free(p);
    if (st != SPECDEC_OK) return sd_err_prefix(err, "%s", path);
    return SPECDEC_OK;
}

/* vocab entry indices ordered by id: (id, index) pairs sorted, no state outside the array */
typedef struct { uint32_t id, i; } id_ix;
static int by_id(const void *a, const void *b) {
    uint32_t x = ((const id_ix *)a)->id, y = ((const id_ix *)b)->id;
    return x < y ? -1 : x > y;
}
static uint32_t *vocab_order(const sd_tok_doc *d) {
    id_ix *p = malloc(sizeof *p * (d->n_vocab ? d->n_vocab : 1));
    uint32_t *ix = malloc(sizeof *ix * (d->n_vocab ? d->n_vocab : 1));
    if (!p || !ix) { free(p); free(ix); return NULL; }
    for (size_t i = 0; i < d->n_vocab; i++) p[i] = (id_ix){d->vocab[3 * i + 2], (uint32_t)i};
    qsort(p, d->n_vocab, sizeof *p, by_id);
    for (size_t i = 0; i < d->n_vocab; i++) ix[i] = p[i].i;
    free(p);
    return ix;
}

static bool same_str(const char *a, size_t la, const char *b, size_t lb) { return la == lb && !memcmp(a, b, la); }

static specdec_status cmp_vocab(const sd_tok_doc *a, const sd_tok_doc *b, const char *what, specdec_err *err) {
    if (a->n_vocab != b->n_vocab)
        return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s: the vocabulary holds %zu tokens, the target's %zu", what, b->n_vocab, a->n_vocab);
    uint32_t *ia = vocab_order(a), *ib = vocab_order(b);
    specdec_status st = SPECDEC_OK;
    if (!ia || !ib) st = sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == SPECDEC_OK && i < a->n_vocab; i++) {
        const uint32_t *ea = a->vocab + 3 * ia[i], *eb = b->vocab + 3 * ib[i];
        const char *sa = a->vocab_strs.p + ea[0], *sb = b->vocab_strs.p + eb[0];
        if (ea[2] != eb[2] || !same_str(sa, ea[1], sb, eb[1])) {
            uint32_t id = ea[2] < eb[2] ? ea[2] : eb[2];
            st = sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s: vocabulary differs at id %u: the target has \"%.*s\"%s, the draft \"%.*s\"%s",
                         what, id, ea[2] == id ? (int)(ea[1] < SHOW ? ea[1] : SHOW) : 0, sa, ea[2] == id ? "" : " (no token)",
                         eb[2] == id ? (int)(eb[1] < SHOW ? eb[1] : SHOW) : 0, sb, eb[2] == id ? "" : " (no token)");
        }
    }
    free(ia); free(ib);
    return st;
}

static specdec_status cmp_merges(const sd_tok_doc *a, const sd_tok_doc *b, const char *what, specdec_err *err) {
    size_t n = a->n_merges < b->n_merges ? a->n_merges : b->n_merges;
    for (size_t i = 0; i < n; i++) {
        const uint32_t *ma = a->merges + 4 * i, *mb = b->merges + 4 * i;
        const char *pa = a->merge_strs.p, *pb = b->merge_strs.p;
        if (!same_str(pa + ma[0], ma[1], pb + mb[0], mb[1]) || !same_str(pa + ma[2], ma[3], pb + mb[2], mb[3]))
            return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s: merges differ at rank %zu: the target has \"%.*s %.*s\", the draft \"%.*s %.*s\"",
                           what, i, (int)(ma[1] < SHOW ? ma[1] : SHOW), pa + ma[0], (int)(ma[3] < SHOW ? ma[3] : SHOW), pa + ma[2],
                           (int)(mb[1] < SHOW ? mb[1] : SHOW), pb + mb[0], (int)(mb[3] < SHOW ? mb[3] : SHOW), pb + mb[2]);
    }
    if (a->n_merges != b->n_merges)
        return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s: %zu merges, the target's %zu", what, b->n_merges, a->n_merges);
    return SPECDEC_OK;
}

/* added_tokens as an object keyed by id, so the file's order does not matter */
static json_t *added_by_id(json_t *root) {
    json_t *out = json_object(), *arr = json_object_get(root, "added_tokens"), *e;
    size_t i;
    if (!json_is_array(arr)) return out;
    json_array_foreach(arr, i, e) {
        json_t *id = json_object_get(e, "id");
        char k[32];
        if (json_is_integer(id)) snprintf(k, sizeof k, "%lld", (long long)json_integer_value(id));
        else snprintf(k, sizeof k, "index %zu", i);
        json_object_set(out, k, e);
    }
    return out;
}

static specdec_status cmp_added(json_t *ra, json_t *rb, const char *what, specdec_err *err) {
    json_t *a = added_by_id(ra), *b = added_by_id(rb);
    specdec_status st = SPECDEC_OK;
    const char *k;
    json_t *va;
    /* the lowest id that differs, for a stable message */
    long long worst = -1;
    char worst_k[32] = "";
    json_object_foreach(a, k, va) {
        json_t *vb = json_object_get(b, k);
        if (vb && json_equal(va, vb)) continue;
        long long id = strtoll(k, NULL, 10);
        if (worst < 0 || id < worst) { worst = id; snprintf(worst_k, sizeof worst_k, "%s", k); }
    }
    json_object_foreach(b, k, va) {
        if (json_object_get(a, k)) continue;
        long long id = strtoll(k, NULL, 10);
        if (worst < 0 || id < worst) { worst = id; snprintf(worst_k, sizeof worst_k, "%s", k); }
    }
    if (worst_k[0]) {
        json_t *ea = json_object_get(a, worst_k), *eb = json_object_get(b, worst_k);
        char *sa = ea ? json_dumps(ea, JSON_COMPACT | JSON_SORT_KEYS) : NULL, *sb = eb ? json_dumps(eb, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        st = sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s: added token id %s differs: the target has %.200s, the draft %.200s", what, worst_k,
                     sa ? sa : "none", sb ? sb : "none");
        free(sa); free(sb);
    }
    json_decref(a); json_decref(b);
    return st;
}

specdec_status sd_tok_file_compare(const char *target_path, const char *draft_path, specdec_err *err) {
    sd_tok_doc a, b;
    memset(&a, 0, sizeof a); memset(&b, 0, sizeof b);
    specdec_status st = load_doc(target_path, &a, err);
    if (st == SPECDEC_OK) st = load_doc(draft_path, &b, err);
    char what[1200];
    snprintf(what, sizeof what, "draft tokenizer %s does not match the target's (%s)", draft_path, target_path);
    if (st == SPECDEC_OK) st = cmp_vocab(&a, &b, what, err);
    if (st == SPECDEC_OK) st = cmp_merges(&a, &b, what, err);
    if (st == SPECDEC_OK) st = cmp_added(a.root, b.root, what, err);
    /* everything else that shapes the ids: compared as JSON values (absent == null) */
    static const char *keys[] = {"normalizer", "pre_tokenizer", "post_processor", "decoder", "model"};
    for (size_t i = 0; st == SPECDEC_OK && i < sizeof keys / sizeof *keys; i++) {
        json_t *va = json_object_get(a.root, keys[i]), *vb = json_object_get(b.root, keys[i]);
        bool na = !va || json_is_null(va), nb = !vb || json_is_null(vb);
        if (na && nb) continue;
        if (na != nb || !json_equal(va, vb))
            st = sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s: \"%s\" differs%s", what, keys[i],
                         !strcmp(keys[i], "model") ? " (its settings besides vocab and merges)" : "");
    }
    sd_tok_doc_free(&a);
    sd_tok_doc_free(&b);
    return st;
}
