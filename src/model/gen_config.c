/* gen_config.c: generation_config.json, the sampling defaults and end-of-sequence ids a model's
 * authors chose (Hugging Face GenerationConfig). Values are checked for type and range; a bad one
 * is a load error naming the file and the key, never a silent fallback. */
#include "model/gen_config.h"
#include "util/err.h"
#include "util/path.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GEN_MAX_FILE (1u << 20)

/* An optional number key in [lo, hi] ((lo, hi] when lo_open); *found says whether it was there. */
static specdec_status num_key(json_t *root, const char *path, const char *key, double lo, bool lo_open, double hi,
                              bool *found, double *out, specdec_err *err) {
    json_t *v = json_object_get(root, key);
    *found = false;
    if (!v || json_is_null(v)) return SPECDEC_OK;
    if (!json_is_number(v)) return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"%s\" must be a number", path, key);
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || (lo_open && x == lo) || x > hi)
        return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"%s\" = %g is out of range %c%g, %g]", path, key, x,
                       lo_open ? '(' : '[', lo, hi);
    *found = true;
    *out = x;
    return SPECDEC_OK;
}

static specdec_status eos_id(json_t *v, const char *path, int vocab, int32_t *out, specdec_err *err) {
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= vocab)
        return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"eos_token_id\" must be a token id (or a list of them) below vocab_size %d",
                       path, vocab);
    *out = (int32_t)json_integer_value(v);
    return SPECDEC_OK;
}

static specdec_status parse_root(json_t *root, const char *path, int vocab, specdec_generation_config *g, specdec_err *err) {
    if (!json_is_object(root)) return sd_fail(err, SPECDEC_ERR_FORMAT, "%s: top level is not a JSON object", path);
    bool f;
    double x;
    SD_TRY(num_key(root, path, "temperature", 0, false, 100, &f, &x, err));
    if (f) { g->sampling.temperature = (float)x; g->from_file[SPECDEC_GEN_TEMPERATURE] = true; }
    json_t *k = json_object_get(root, "top_k");
    if (k && !json_is_null(k)) {
        if (!json_is_integer(k) || json_integer_value(k) < 0 || json_integer_value(k) > (1 << 24))
            return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"top_k\" must be an integer in [0, %d]", path, 1 << 24);
        g->sampling.top_k = (int)json_integer_value(k);
        g->from_file[SPECDEC_GEN_TOP_K] = true;
    }
    SD_TRY(num_key(root, path, "top_p", 0, true, 1, &f, &x, err));
    if (f) { g->sampling.top_p = (float)x; g->from_file[SPECDEC_GEN_TOP_P] = true; }
    SD_TRY(num_key(root, path, "min_p", 0, false, 1, &f, &x, err));
    if (f) { g->sampling.min_p = (float)x; g->from_file[SPECDEC_GEN_MIN_P] = true; }

    json_t *ds = json_object_get(root, "do_sample");
    if (ds && !json_is_null(ds)) {
        if (!json_is_boolean(ds)) return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"do_sample\" must be true or false", path);
        if (json_is_false(ds)) {
            /* greedy, as transformers generates with it: the file's temperature only applies when sampling */
            g->sampling.temperature = 0;
            g->from_file[SPECDEC_GEN_TEMPERATURE] = true;
            g->greedy_by_do_sample = true;
        } else if (!g->from_file[SPECDEC_GEN_TEMPERATURE]) {
            g->sampling.temperature = 1.0f;
            g->from_file[SPECDEC_GEN_TEMPERATURE] = true;
        }
    }

    json_t *eos = json_object_get(root, "eos_token_id");
    if (eos && !json_is_null(eos)) {
        if (json_is_array(eos)) {
            size_t n = json_array_size(eos);
            if (n > 8) return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"eos_token_id\" lists %zu ids, at most 8 supported", path, n);
            for (size_t i = 0; i < n; i++) SD_TRY(eos_id(json_array_get(eos, i), path, vocab, &g->eos_ids[i], err));
            g->n_eos = (int)n;
        } else {
            SD_TRY(eos_id(eos, path, vocab, &g->eos_ids[0], err));
            g->n_eos = 1;
        }
    }
    return SPECDEC_OK;
}

specdec_status sd_gen_config_parse(const char *json, size_t len, const char *path, int vocab,
                                   specdec_generation_config *g, specdec_err *err) {
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) return sd_fail(err, SPECDEC_ERR_FORMAT, "%s: bad JSON at line %d, column %d: %s", path, je.line, je.column, je.text);
    specdec_status st = parse_root(root, path, vocab, g, err);
    json_decref(root);
    return st;
}

specdec_status sd_gen_config_load_dir(const char *dir, int vocab, specdec_generation_config *g, specdec_err *err) {
    char *path = sd_path_join(dir, "generation_config.json");
    if (!path) return sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory");
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        specdec_status st = errno == ENOENT ? SPECDEC_OK : sd_fail(err, SPECDEC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        free(path);
        return st;
    }
    char *buf = malloc(GEN_MAX_FILE + 1);
    specdec_status st = SPECDEC_OK;
    size_t n = buf ? fread(buf, 1, GEN_MAX_FILE + 1, fp) : 0;
    if (!buf) st = sd_fail(err, SPECDEC_ERR_NOMEM, "%s: out of memory", path);
    else if (ferror(fp)) st = sd_fail(err, SPECDEC_ERR_IO, "%s: read error", path);
    else if (n > GEN_MAX_FILE) st = sd_fail(err, SPECDEC_ERR_FORMAT, "%s: larger than %u bytes", path, GEN_MAX_FILE);
    fclose(fp);
    if (st == SPECDEC_OK) {
        g->present = true;
        st = sd_gen_config_parse(buf, n, path, vocab, g, err);
    }
    free(buf);
    free(path);
    return st;
}
