/* config.c: parse a Hugging Face Qwen3 config.json (see ../shared/docs/model-format.md) with
 * Jansson. Every required key is checked for presence, JSON type and range; messages name the
 * file and the key. Unknown keys are ignored. */
#include "model/config.h"
#include "util/err.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CFG_MAX_FILE (16u << 20) /* a config.json is a few KB */

/* Required integer key in [lo, hi]. */
static specdec_status get_int(json_t *root, const char *path, const char *key, long long lo, long long hi,
                              int *out, specdec_err *err) {
    json_t *v = json_object_get(root, key);
    if (!v) return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: missing required key \"%s\"", path, key);
    if (!json_is_integer(v)) return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"%s\" must be an integer", path, key);
    long long x = json_integer_value(v);
    if (x < lo || x > hi)
        return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"%s\" = %lld is out of range [%lld, %lld]", path, key, x, lo, hi);
    *out = (int)x;
    return SPECDEC_OK;
}

/* Required number (integer or real) key, finite. */
static specdec_status get_num(json_t *root, const char *path, const char *key, double *out, specdec_err *err) {
    json_t *v = json_object_get(root, key);
    if (!v) return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: missing required key \"%s\"", path, key);
    if (!json_is_number(v)) return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"%s\" must be a number", path, key);
    *out = json_number_value(v);
    if (!isfinite(*out)) return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"%s\" is not finite", path, key);
    return SPECDEC_OK;
}

/* One token id (bos/eos): an integer in [0, vocab). */
static specdec_status token_id(json_t *v, const char *path, const char *key, int vocab, int *out, specdec_err *err) {
    if (!json_is_integer(v)) return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"%s\" must be an integer token id", path, key);
    long long x = json_integer_value(v);
    if (x < 0 || x >= vocab)
        return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"%s\" = %lld is not a token id below vocab_size %d", path, key, x, vocab);
    *out = (int)x;
    return SPECDEC_OK;
}

/* "quantization" / "quantization_config" block (MLX layout). */
static specdec_status parse_quant(json_t *q, const char *path, const char *key, int *bits, int *group, specdec_err *err) {
    if (!json_is_object(q)) return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"%s\" must be an object", path, key);
    json_t *qm = json_object_get(q, "quant_method");
    if (qm) /* Hugging Face GPTQ/AWQ/... blocks share the key but not the layout */
        return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s: key \"%s\": quant_method \"%s\" is not supported (only MLX affine)",
                       path, key, json_is_string(qm) ? json_string_value(qm) : "?");
    json_t *mode = json_object_get(q, "mode");
    if (mode && (!json_is_string(mode) || strcmp(json_string_value(mode), "affine") != 0))
        return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s: key \"%s.mode\": only \"affine\" quantization is supported", path, key);
    char k2[64];
    snprintf(k2, sizeof k2, "%s.group_size", key);
    json_t *g = json_object_get(q, "group_size"), *b = json_object_get(q, "bits");
    if (!g) return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: missing required key \"%s\"", path, k2);
    if (!json_is_integer(g)) return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"%s\" must be an integer", path, k2);
    long long gv = json_integer_value(g);
    if (gv != 32 && gv != 64 && gv != 128)
        return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s: key \"%s\" = %lld is not supported (32, 64 or 128)", path, k2, gv);
    snprintf(k2, sizeof k2, "%s.bits", key);
    if (!b) return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: missing required key \"%s\"", path, k2);
    if (!json_is_integer(b)) return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"%s\" must be an integer", path, k2);
    long long bv = json_integer_value(b);
    if (bv != 4 && bv != 8)
        return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s: key \"%s\" = %lld is not supported (4 or 8)", path, k2, bv);
    /* mlx_lm writes per-layer overrides as objects keyed by module path (mixed precision):
     * we cannot honour them, so say so instead of misreading the weights. */
    const char *sub;
    json_t *sv;
    json_object_foreach(q, sub, sv) {
        if (json_is_object(sv))
            return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s: key \"%s\": per-layer quantization override \"%s\" is not supported",
                           path, key, sub);
    }
    *bits = (int)bv;
    *group = (int)gv;
    return SPECDEC_OK;
}

/* One RoPE parameter block: transformers 5's "rope_parameters" or 4.x's "rope_scaling" (key
 * names it in messages). The type comes as "rope_type" (or the older "type"); only "default"
 * (plain RoPE, no scaling) is implemented, so any other type, and any scaling key, is refused by
 * name rather than ignored (a scaled RoPE read as plain runs, and writes wrong text). A "rope_theta"
 * here goes to *theta (0 when absent). */
static specdec_status parse_rope_block(json_t *o, const char *path, const char *key, double *theta, specdec_err *err) {
    *theta = 0;
    if (!json_is_object(o)) return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"%s\" must be an object", path, key);
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        if (!strcmp(k, "rope_type") || !strcmp(k, "type")) {
            if (!json_is_string(v)) return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"%s.%s\" must be a string", path, key, k);
            if (strcmp(json_string_value(v), "default") != 0)
                return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s: key \"%s.%s\" = \"%s\" is not supported (only \"default\": plain RoPE)",
                               path, key, k, json_string_value(v));
        } else if (!strcmp(k, "rope_theta")) {
            if (!json_is_number(v) || !isfinite(json_number_value(v)))
                return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"%s.rope_theta\" must be a finite number", path, key);
            *theta = json_number_value(v);
        } else if (!strcmp(k, "partial_rotary_factor")) {
            /* 1 = RoPE over the whole head, which is what we do; anything else is not */
            if (!json_is_number(v) || json_number_value(v) != 1.0)
                return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s: key \"%s.partial_rotary_factor\" is not 1; partial RoPE is not supported",
                               path, key);
        } else if (json_is_object(v)) {
            return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s: key \"%s.%s\": per-layer-type RoPE parameters are not supported",
                           path, key, k);
        } else {
            return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s: key \"%s.%s\": RoPE scaling is not supported (only plain RoPE)",
                           path, key, k);
        }
    }
    return SPECDEC_OK;
}

/* rope_theta, from the top level (transformers 4.x) or from "rope_parameters" (transformers 5);
 * when both are given they must agree. Required: a wrong base silently ruins output. */
static specdec_status parse_rope(json_t *root, const char *path, double *out, specdec_err *err) {
    double top = 0, inner = 0;
    json_t *tv = json_object_get(root, "rope_theta");
    if (tv && !json_is_null(tv)) {
        SD_TRY(get_num(root, path, "rope_theta", &top, err));
        if (!(top > 1)) return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"rope_theta\" = %g must be > 1", path, top);
    }
    json_t *rs = json_object_get(root, "rope_scaling");
    if (rs && !json_is_null(rs)) {
        double t;
        SD_TRY(parse_rope_block(rs, path, "rope_scaling", &t, err));
        if (t) inner = t;
    }
    json_t *rp = json_object_get(root, "rope_parameters");
    if (rp && !json_is_null(rp)) {
        double t;
        SD_TRY(parse_rope_block(rp, path, "rope_parameters", &t, err));
        if (t) {
            if (!(t > 1)) return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"rope_parameters.rope_theta\" = %g must be > 1", path, t);
            if (inner && inner != t)
                return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: keys \"rope_scaling.rope_theta\" and \"rope_parameters.rope_theta\" disagree", path);
            inner = t;
        }
    }
    if (top && inner && top != inner)
        return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: keys \"rope_theta\" = %g and \"rope_parameters.rope_theta\" = %g disagree", path, top, inner);
    *out = top ? top : inner;
    if (!*out)
        return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: missing required key \"rope_theta\" (top level, or in \"rope_parameters\")", path);
    return SPECDEC_OK;
}

static specdec_status parse_root(json_t *root, const char *path, sd_config *c, specdec_err *err) {
    if (!json_is_object(root)) return sd_fail(err, SPECDEC_ERR_FORMAT, "%s: top level is not a JSON object", path);
    json_t *mt = json_object_get(root, "model_type");
    if (!mt) return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: missing required key \"model_type\"", path);
    if (!json_is_string(mt)) return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"model_type\" must be a string", path);
    if (strcmp(json_string_value(mt), "qwen3") != 0)
        return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s: model_type \"%s\" is not supported (only \"qwen3\")", path,
                       json_string_value(mt));
    snprintf(c->model_type, sizeof c->model_type, "%s", "qwen3");

    SD_TRY(get_int(root, path, "vocab_size", 1, 1 << 24, &c->vocab_size, err));
    SD_TRY(get_int(root, path, "hidden_size", 1, 1 << 16, &c->hidden_size, err));
    SD_TRY(get_int(root, path, "intermediate_size", 1, 1 << 20, &c->intermediate_size, err));
    SD_TRY(get_int(root, path, "num_hidden_layers", 1, 1024, &c->n_layers, err));
    SD_TRY(get_int(root, path, "num_attention_heads", 1, 1024, &c->n_heads, err));
    SD_TRY(get_int(root, path, "num_key_value_heads", 1, 1024, &c->n_kv_heads, err));
    if (c->n_heads % c->n_kv_heads != 0)
        return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"num_attention_heads\" = %d is not a multiple of \"num_key_value_heads\" = %d",
                       path, c->n_heads, c->n_kv_heads);
    if (json_object_get(root, "head_dim")) {
        SD_TRY(get_int(root, path, "head_dim", 2, 1024, &c->head_dim, err));
    } else {
        /* Qwen3 configs state head_dim (and it often differs from H/nh, e.g. Qwen3-0.6B: 1024/16 = 64
         * vs head_dim 128). Older exports omit it; transformers then uses H/nh, and so do we. */
        if (c->hidden_size % c->n_heads != 0)
            return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"head_dim\" is absent and hidden_size %d is not a multiple of num_attention_heads %d",
                           path, c->hidden_size, c->n_heads);
        c->head_dim = c->hidden_size / c->n_heads;
    }
    if (c->head_dim % 2 != 0)
        return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"head_dim\" = %d must be even (rotate_half RoPE)", path, c->head_dim);

    double eps = 0;
    SD_TRY(get_num(root, path, "rms_norm_eps", &eps, err));
    if (!(eps > 0 && eps < 1))
        return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"rms_norm_eps\" = %g is out of range (0, 1)", path, eps);
    c->rms_norm_eps = (float)eps;
    SD_TRY(parse_rope(root, path, &c->rope_theta, err));
    SD_TRY(get_int(root, path, "max_position_embeddings", 1, 1 << 26, &c->max_position_embeddings, err));
    /* Features that change the math and that we do not implement: refuse rather than run wrong. */
    json_t *sw = json_object_get(root, "use_sliding_window");
    if (sw && json_is_true(sw))
        return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s: key \"use_sliding_window\" is true; sliding-window attention is not supported", path);

    json_t *tie = json_object_get(root, "tie_word_embeddings");
    c->tie_word_embeddings = false;
    if (tie && !json_is_null(tie)) {
        if (!json_is_boolean(tie)) return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"tie_word_embeddings\" must be true or false", path);
        c->tie_word_embeddings = json_is_true(tie);
    }

    json_t *bos = json_object_get(root, "bos_token_id");
    c->bos_token_id = -1;
    if (bos && !json_is_null(bos)) SD_TRY(token_id(bos, path, "bos_token_id", c->vocab_size, &c->bos_token_id, err));

    json_t *eos = json_object_get(root, "eos_token_id");
    c->n_eos = 0;
    if (eos && !json_is_null(eos)) {
        if (json_is_array(eos)) {
            size_t n = json_array_size(eos);
            if (n > SD_MAX_EOS)
                return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"eos_token_id\" lists %zu ids, at most %d supported", path, n, SD_MAX_EOS);
            for (size_t i = 0; i < n; i++)
                SD_TRY(token_id(json_array_get(eos, i), path, "eos_token_id", c->vocab_size, &c->eos_token_id[c->n_eos++], err));
        } else {
            SD_TRY(token_id(eos, path, "eos_token_id", c->vocab_size, &c->eos_token_id[0], err));
            c->n_eos = 1;
        }
    }

    const char *dkey = json_object_get(root, "torch_dtype") ? "torch_dtype" : "dtype";
    json_t *dt = json_object_get(root, dkey);
    c->dtype = SPECDEC_DTYPE_F32;
    if (dt && !json_is_null(dt)) {
        if (!json_is_string(dt)) return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: key \"%s\" must be a string", path, dkey);
        const char *s = json_string_value(dt);
        if (strcmp(s, "float32") == 0) c->dtype = SPECDEC_DTYPE_F32;
        else if (strcmp(s, "bfloat16") == 0) c->dtype = SPECDEC_DTYPE_BF16;
        else if (strcmp(s, "float16") == 0) c->dtype = SPECDEC_DTYPE_F16;
        else return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s: key \"%s\" = \"%s\" is not supported (float32, bfloat16, float16)",
                            path, dkey, s);
    }

    c->quant_bits = c->quant_group = 0;
    json_t *q = json_object_get(root, "quantization"), *qc = json_object_get(root, "quantization_config");
    if (q && !json_is_null(q)) SD_TRY(parse_quant(q, path, "quantization", &c->quant_bits, &c->quant_group, err));
    if (qc && !json_is_null(qc)) {
        int b = 0, g = 0;
        SD_TRY(parse_quant(qc, path, "quantization_config", &b, &g, err));
        if (c->quant_bits && (b != c->quant_bits || g != c->quant_group))
            return sd_fail(err, SPECDEC_ERR_CONFIG, "%s: keys \"quantization\" and \"quantization_config\" disagree", path);
        c->quant_bits = b;
        c->quant_group = g;
    }

    c->mtp_n_layers = 0;
    if (json_object_get(root, "mtp_num_hidden_layers"))
        SD_TRY(get_int(root, path, "mtp_num_hidden_layers", 0, 64, &c->mtp_n_layers, err));
    return SPECDEC_OK;
}

specdec_status sd_config_parse(const char *json, size_t len, const char *path, sd_config *c, specdec_err *err) {
    if (!path) path = "config.json";
    if (!json || !c) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "%s: NULL argument", path);
    memset(c, 0, sizeof *c);
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) return sd_fail(err, SPECDEC_ERR_FORMAT, "%s: bad JSON at line %d, column %d: %s", path, je.line, je.column, je.text);
    specdec_status st = parse_root(root, path, c, err);
    json_decref(root);
    return st;
}

specdec_status sd_config_load_dir(const char *dir, sd_config *c, specdec_err *err) {
    if (!dir || !c) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "sd_config_load_dir: NULL argument");
    size_t dl = strlen(dir);
    char *path = malloc(dl + 16);
    if (!path) return sd_fail(err, SPECDEC_ERR_NOMEM, "%s: out of memory", dir);
    snprintf(path, dl + 16, "%s%sconfig.json", dir, (dl && dir[dl - 1] == '/') ? "" : "/");
    specdec_status st;
    FILE *fp = fopen(path, "rb");
    char *buf = NULL;
    if (!fp) {
        st = sd_fail(err, errno == ENOENT ? SPECDEC_ERR_MISSING : SPECDEC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        goto done;
    }
    buf = malloc(CFG_MAX_FILE + 1);
    if (!buf) { fclose(fp); st = sd_fail(err, SPECDEC_ERR_NOMEM, "%s: out of memory", path); goto done; }
    size_t n = fread(buf, 1, CFG_MAX_FILE + 1, fp);
    int bad = ferror(fp);
    fclose(fp);
    if (bad) { st = sd_fail(err, SPECDEC_ERR_IO, "%s: read error", path); goto done; }
    if (n > CFG_MAX_FILE) { st = sd_fail(err, SPECDEC_ERR_FORMAT, "%s: larger than %u bytes", path, CFG_MAX_FILE); goto done; }
    st = sd_config_parse(buf, n, path, c, err);
done:
    free(buf);
    free(path);
    return st;
}
