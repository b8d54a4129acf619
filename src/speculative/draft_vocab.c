/* draft_vocab.c: loading draft_vocab.json and gathering LM-head rows (see draft_vocab.h). */
#include "speculative/draft_vocab.h"
#include "util/dtype.h"
#include "util/err.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

void sd_draft_vocab_free(sd_draft_vocab *dv) {
    if (!dv) return;
    free(dv->d2t);
    memset(dv, 0, sizeof *dv);
}

specdec_status sd_draft_vocab_load(const char *path, int n_want, int vocab, sd_draft_vocab *out,
                                   specdec_err *err) {
    memset(out, 0, sizeof *out);
    if (!path) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "draft vocabulary: NULL path");
    if (n_want < 0 && n_want != SPECDEC_DRAFT_VOCAB_FILE_DEFAULT)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "%s: draft vocabulary size %d is negative", path, n_want);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        FILE *f = fopen(path, "rb");
        if (!f) return sd_fail(err, SPECDEC_ERR_IO, "%s: cannot open the draft vocabulary", path);
        fclose(f);
        return sd_fail(err, SPECDEC_ERR_FORMAT, "%s: line %d column %d: %s", path, je.line, je.column, je.text);
    }
    specdec_status st = SPECDEC_OK;
    json_t *d2t = json_object_get(root, "d2t"), *src = json_object_get(root, "source"), *jn = json_object_get(root, "n");
    size_t nf = json_is_array(d2t) ? json_array_size(d2t) : 0;
    bool *seen = NULL;
    if (!json_is_array(d2t)) { st = sd_fail(err, SPECDEC_ERR_FORMAT, "%s: no \"d2t\" array of target ids", path); goto done; }
    if (nf == 0 || nf > (size_t)vocab) {
        st = sd_fail(err, SPECDEC_ERR_FORMAT, "%s: \"d2t\" holds %zu ids, want 1..%d (the vocabulary)", path, nf, vocab);
        goto done;
    }
    if (jn && (!json_is_integer(jn) || json_integer_value(jn) != (json_int_t)nf)) {
        st = sd_fail(err, SPECDEC_ERR_FORMAT, "%s: \"n\" does not match the %zu ids of \"d2t\"", path, nf);
        goto done;
    }
    json_t *jd = json_object_get(root, "default_n");
    if (jd && (!json_is_integer(jd) || json_integer_value(jd) < 1 || json_integer_value(jd) > (json_int_t)nf)) {
        st = sd_fail(err, SPECDEC_ERR_FORMAT, "%s: \"default_n\" must be an integer in 1..%zu (the ids of \"d2t\")", path, nf);
        goto done;
    }
    if (n_want == SPECDEC_DRAFT_VOCAB_FILE_DEFAULT) n_want = jd ? (int)json_integer_value(jd) : 0;
    if (n_want > (int)nf) {
        st = sd_fail(err, SPECDEC_ERR_INVALID_ARG, "%s: %d ids asked for, the file lists %zu", path, n_want, nf);
        goto done;
    }
    int n = n_want ? n_want : (int)nf;
    out->d2t = malloc(sizeof(int32_t) * (size_t)n);
    seen = calloc((size_t)vocab, 1);
    if (!out->d2t || !seen) { st = sd_fail(err, SPECDEC_ERR_NOMEM, "%s: out of memory", path); goto done; }
    for (int j = 0; j < n; j++) {
        json_t *v = json_array_get(d2t, (size_t)j);
        json_int_t id = json_is_integer(v) ? json_integer_value(v) : -1;
        if (id < 0 || id >= vocab) {
            st = sd_fail(err, SPECDEC_ERR_FORMAT, "%s: d2t[%d] is not a target id in 0..%d", path, j, vocab - 1);
            goto done;
        }
        if (seen[id]) { st = sd_fail(err, SPECDEC_ERR_FORMAT, "%s: d2t[%d] = %d appears twice", path, j, (int)id); goto done; }
        seen[id] = true;
        out->d2t[j] = (int32_t)id;
    }
    out->n = n;
    out->n_file = (int)nf;
    snprintf(out->source, sizeof out->source, "%s", json_is_string(src) ? json_string_value(src) : "");
    snprintf(out->path, sizeof out->path, "%s", path);
done:
    free(seen);
    json_decref(root);
    if (st != SPECDEC_OK) sd_draft_vocab_free(out);
    return st;
}

static size_t round64(size_t x) { return (x + 63) & ~(size_t)63; }

specdec_status sd_mat_gather_rows(const sd_mat *src, const int32_t *rows, int n, sd_mat *dst, void **buf,
                                  specdec_err *err) {
    *buf = NULL;
    memset(dst, 0, sizeof *dst);
    if (n < 1) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "gather of %d rows", n);
    size_t wrow, srow = 0;   /* bytes per row of w, and of scales (= of biases) */
    if (src->bits) {
        if (src->bits != 4 && src->bits != 8)
            return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "gather: %d-bit matrix", src->bits);
        wrow = (size_t)src->cols * (size_t)src->bits / 8;
        srow = (size_t)(src->cols / src->group) * sd_dtype_size(src->dtype);
    } else wrow = (size_t)src->cols * sd_dtype_size(src->dtype);
    size_t ow = round64(wrow * (size_t)n), os = round64(srow * (size_t)n);
    size_t total = ow + (src->bits ? 2 * os : 0);
    char *b = aligned_alloc(64, total);
    if (!b) return sd_fail(err, SPECDEC_ERR_NOMEM, "gather of %d rows (%zu bytes): out of memory", n, total);
    char *w = b, *sc = b + ow, *bi = b + ow + os;
    for (int j = 0; j < n; j++) {
        int r = rows[j];
        if (r < 0 || r >= src->rows) {
            free(b);
            return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "gather: row %d (index %d) not in 0..%d", r, j, src->rows - 1);
        }
        memcpy(w + (size_t)j * wrow, (const char *)src->w + (size_t)r * wrow, wrow);
        if (src->bits) {
            memcpy(sc + (size_t)j * srow, (const char *)src->scales + (size_t)r * srow, srow);
            if (src->biases) memcpy(bi + (size_t)j * srow, (const char *)src->biases + (size_t)r * srow, srow);
        }
    }
    *dst = *src;
    dst->rows = n;
    dst->w = w;
    dst->scales = src->bits ? sc : NULL;
    dst->biases = src->bits && src->biases ? bi : NULL;
    *buf = b;
    return SPECDEC_OK;
}
