/* quantize.c: specdec_quantize, dense model directory -> MLX-layout affine-quantized directory.
 *
 * Per group of G input elements of a row: bias = min, scale = (max - min) / (2^B - 1), stored in
 * the tensor's own float dtype (bf16 for a bf16 model). The stored values are rounded outward
 * (bias toward -inf, scale toward +inf) so the representable range [bias, bias + scale*(2^B-1)]
 * still covers [min, max]; q is then computed against the STORED scale and bias, so the only
 * error left is the rounding of q: |w - (scale*q + bias)| <= scale/2 (plus f32 rounding).
 * A constant group gets scale 0 and q = 0, which reproduces it exactly.
 * Packing: element j of a row sits at bits [B*(j % (32/B)), +B) of word j / (32/B).
 *
 * The output is built in a sibling OUT.tmp-XXXXXX and renamed into place at the end; an existing
 * non-empty OUT is never touched. */
#include "specdec.h"
#include "util/path.h"
#include "io/safetensors.h"
#include "io/outdir.h"
#include "quant/quant.h"
#include "model/config.h"
#include "model/weights.h"
#include "util/dtype.h"
#include "util/err.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

specdec_quantize_params specdec_quantize_default_params(void) {
    specdec_quantize_params p;
    memset(&p, 0, sizeof p);
    p.bits = 4;
    p.group_size = 64;
    p.quantize_embedding = true;
    p.quantize_mtp = false;
    p.max_shard_bytes = 0;
    return p;
}

/* ---- rounding of the stored scale / bias ---- */

static uint16_t step_up16(uint16_t h) { return (h & 0x8000u) ? (h == 0x8000u ? 1 : (uint16_t)(h - 1)) : (uint16_t)(h + 1); }
static uint16_t step_down16(uint16_t h) { return (h & 0x8000u) ? (uint16_t)(h + 1) : (h == 0 ? 0x8001u : (uint16_t)(h - 1)); }

/* Round x into dtype dt toward +inf (dir > 0) or -inf (dir < 0); store element i of dst and
 * return the stored value as f32. bf16 and f16 are sign-magnitude, so one step of the bit
 * pattern is one ulp in the chosen direction. */
static float store_rounded(specdec_dtype dt, double x, int dir, void *dst, size_t i) {
    float f = (float)x;
    if (dir > 0 && (double)f < x) f = nextafterf(f, INFINITY);
    if (dir < 0 && (double)f > x) f = nextafterf(f, -INFINITY);
    if (dt == SPECDEC_DTYPE_F32) { memcpy((char *)dst + 4 * i, &f, 4); return f; }
    bool bf = dt == SPECDEC_DTYPE_BF16;
    uint16_t h = bf ? sd_f32_to_bf16(f) : sd_f32_to_f16(f);
    float y = bf ? sd_bf16_to_f32(h) : sd_f16_to_f32(h);
    if (dir > 0 && y < f) h = step_up16(h);
    if (dir < 0 && y > f) h = step_down16(h);
    memcpy((char *)dst + 2 * i, &h, 2);
    return bf ? sd_bf16_to_f32(h) : sd_f16_to_f32(h);
}

/* One row: see quant.h. */
specdec_status sd_quant_row(const float *x, size_t cols, int bits, int G, specdec_dtype dt, uint32_t *w, void *scales,
                            void *biases, sd_qerr *acc, const char *what, size_t row, specdec_err *err) {
    const size_t ng = cols / (size_t)G;
    const int epw = 32 / bits;
    const uint32_t nb = (1u << bits) - 1u;
    memset(w, 0, cols / (size_t)epw * 4);
    for (size_t g = 0; g < ng; g++) {
        const float *xg = x + g * (size_t)G;
        float lo = xg[0], hi = xg[0];
        for (int j = 0; j < G; j++) {
            if (!isfinite(xg[j]))
                return sd_fail(err, SPECDEC_ERR_FORMAT, "%s: non-finite value at row %zu, column %zu", what, row, g * (size_t)G + (size_t)j);
            if (xg[j] < lo) lo = xg[j];
            if (xg[j] > hi) hi = xg[j];
        }
        const float b = store_rounded(dt, lo, -1, biases, g);
        const float s = store_rounded(dt, ((double)hi - (double)b) / nb, +1, scales, g);
        if (!isfinite(b) || !isfinite(s))
            return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s: row %zu exceeds the %s range of scales/biases", what, row, specdec_dtype_name(dt));
        for (int j = 0; j < G; j++) {
            uint32_t qi = 0;
            if (s > 0) { /* an all-equal (e.g. all-zero) group has s = 0: q = 0, no division */
                double v = floor(((double)xg[j] - (double)b) / (double)s + 0.5);
                qi = v <= 0 ? 0 : v >= nb ? nb : (uint32_t)v;
            }
            const size_t jj = g * (size_t)G + (size_t)j;
            w[jj / (size_t)epw] |= qi << (bits * (int)(jj % (size_t)epw));
            if (!acc) continue;
            const float deq = s * (float)qi + b; /* exactly what sd_mat_row_f32 computes */
            const double e = fabs((double)xg[j] - (double)deq);
            acc->se += e * e;
            acc->sw += (double)xg[j] * xg[j];
            if (e > acc->max_abs) acc->max_abs = e;
        }
    }
    return SPECDEC_OK;
}

typedef struct qtensor {
    uint32_t *w;     /* (rows, cols*B/32) */
    void *scales;    /* (rows, cols/G) of dt */
    void *biases;
} qtensor;

/* Quantize tensor t (2-D float [rows, cols]) into q; report errors. */
static specdec_status quant_one(const sd_st_tensor *t, int bits, int G, const char *path, qtensor *q, double *rel_rms,
                                double *max_abs, specdec_err *err) {
    const size_t rows = (size_t)t->shape[0], cols = (size_t)t->shape[1], ng = cols / (size_t)G;
    const specdec_dtype dt = t->dtype;
    const size_t es = sd_dtype_size(dt), wpr = cols * (size_t)bits / 32;
    q->w = calloc(rows * wpr, 4);
    q->scales = malloc(rows * ng * es);
    q->biases = malloc(rows * ng * es);
    float *row = malloc(cols * sizeof(float));
    void *raw = malloc(cols * es);
    char what[700];
    snprintf(what, sizeof what, "%s: tensor '%s'", path, t->name);
    if (!q->w || !q->scales || !q->biases || !row || !raw) {
        free(row); free(raw);
        return sd_fail(err, SPECDEC_ERR_NOMEM, "%s: out of memory quantizing", what);
    }
    sd_qerr acc = {0, 0, 0};
    specdec_status st = SPECDEC_OK;
    for (size_t r = 0; r < rows && st == SPECDEC_OK; r++) {
        memcpy(raw, (const char *)t->data + r * cols * es, cols * es); /* the mapping gives no alignment */
        sd_to_f32(dt, raw, row, cols);
        st = sd_quant_row(row, cols, bits, G, dt, q->w + r * wpr, (char *)q->scales + r * ng * es,
                          (char *)q->biases + r * ng * es, &acc, what, r, err);
    }
    free(row);
    free(raw);
    *rel_rms = acc.sw > 0 ? sqrt(acc.se / acc.sw) : 0.0;
    *max_abs = acc.max_abs;
    return st;
}

/* ---- files ---- */


static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}
static bool starts_with(const char *s, const char *pre) { return strncmp(s, pre, strlen(pre)) == 0; }

void sd_quant_config_set(json_t *root, int bits, int G) {
    json_t *q = json_object();
    json_object_set_new(q, "group_size", json_integer(G));
    json_object_set_new(q, "bits", json_integer(bits));
    json_object_set_new(root, "quantization_config", json_deep_copy(q));
    json_object_set_new(root, "quantization", q);
}

/* Every regular file of IN except the config and the weights (tokenizer files, README...). */
static bool is_side_file(const char *n) {
    return strcmp(n, "config.json") && !ends_with(n, ".safetensors") && !ends_with(n, ".safetensors.index.json") &&
           !ends_with(n, ".tmp");
}

/* IN's config.json with "quantization" and "quantization_config" = {"group_size", "bits"}. */
static void set_quant(json_t *root, void *user) {
    const int *bg = user;
    sd_quant_config_set(root, bg[0], bg[1]);
}

/* Which tensors become quantized. Norms never; mtp.* linears only on request. */
static bool wants_quant(const char *name, const sd_config *c, const specdec_quantize_params *p) {
    if (!strcmp(name, "model.embed_tokens.weight")) return p->quantize_embedding;
    if (!strcmp(name, "lm_head.weight")) return !c->tie_word_embeddings; /* tied: ignored by the loader, kept as is */
    if (starts_with(name, "model.layers.")) return ends_with(name, "_proj.weight");
    if (starts_with(name, "mtp.")) return p->quantize_mtp && (ends_with(name, "_proj.weight") || !strcmp(name, "mtp.fc.weight"));
    return false;
}

static specdec_status quantize_into(const char *in, const char *tmp, const sd_config *c, const sd_st_set *st,
                                    const specdec_quantize_params *p, specdec_err *err) {
    const int n = sd_st_count(st), B = p->bits, G = p->group_size;
    qtensor *qs = calloc((size_t)(n ? n : 1), sizeof *qs);
    sd_st_writer *w = sd_st_writer_new();
    specdec_status s = SPECDEC_OK;
    if (!qs || !w) { s = sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory"); goto done; }
    for (int i = 0; i < n && s == SPECDEC_OK; i++) {
        const sd_st_tensor *t = sd_st_at(st, i);
        const char *path = sd_st_file_path(st, t->file);
        bool fl = t->dtype == SPECDEC_DTYPE_F32 || t->dtype == SPECDEC_DTYPE_F16 || t->dtype == SPECDEC_DTYPE_BF16;
        if (!wants_quant(t->name, c, p) || t->ndim != 2 || !fl) {
            s = sd_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, err); /* copied as stored */
            continue;
        }
        const int64_t rows = t->shape[0], cols = t->shape[1];
        if (cols % G != 0) {
            s = sd_fail(err, SPECDEC_ERR_SHAPE, "%s: tensor '%s': %lld input columns are not a multiple of group size %d", path,
                        t->name, (long long)cols, G);
            break;
        }
        if (strlen(t->name) >= 500) {   /* base[512] below must hold the name: never rename silently */
            s = sd_fail(err, SPECDEC_ERR_FORMAT, "%s: tensor name of %zu bytes is too long to quantize", path, strlen(t->name));
            break;
        }
        double rel = 0, mx = 0;
        if ((s = quant_one(t, B, G, path, &qs[i], &rel, &mx, err)) != SPECDEC_OK) break;
        if (p->report) p->report(t->name, rel, mx, p->report_user);
        char base[512], nm[600];
        snprintf(base, sizeof base, "%.*s", (int)(strlen(t->name) - strlen(".weight")), t->name);
        int64_t wsh[2] = {rows, cols * B / 32}, ssh[2] = {rows, cols / G};
        snprintf(nm, sizeof nm, "%s.weight", base);
        if ((s = sd_st_writer_add(w, nm, SPECDEC_DTYPE_U32, 2, wsh, qs[i].w, err)) != SPECDEC_OK) break;
        snprintf(nm, sizeof nm, "%s.scales", base);
        if ((s = sd_st_writer_add(w, nm, t->dtype, 2, ssh, qs[i].scales, err)) != SPECDEC_OK) break;
        snprintf(nm, sizeof nm, "%s.biases", base);
        s = sd_st_writer_add(w, nm, t->dtype, 2, ssh, qs[i].biases, err);
    }
    if (s == SPECDEC_OK) s = sd_st_writer_write(w, tmp, p->max_shard_bytes, err);
    const int bg[2] = {B, G};
    if (s == SPECDEC_OK) s = sd_rewrite_config(in, tmp, set_quant, (void *)bg, err);
    if (s == SPECDEC_OK) s = sd_copy_side_files(in, tmp, is_side_file, err);
done:
    sd_st_writer_free(w);
    for (int i = 0; qs && i < n; i++) { free(qs[i].w); free(qs[i].scales); free(qs[i].biases); }
    free(qs);
    return s;
}

specdec_status specdec_quantize(const char *in_dir, const char *out_dir, const specdec_quantize_params *params,
                                specdec_err *err) {
    if (!in_dir || !out_dir || !*out_dir) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "specdec_quantize: NULL or empty directory");
    specdec_quantize_params p = params ? *params : specdec_quantize_default_params();
    if (p.bits != 4 && p.bits != 8) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "quantize: bits %d not supported (4 or 8)", p.bits);
    if (p.group_size != 32 && p.group_size != 64 && p.group_size != 128)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "quantize: group size %d not supported (32, 64 or 128)", p.group_size);

    sd_outdir od;
    sd_config c;
    sd_st_set *st = NULL;
    sd_weights w;
    memset(&w, 0, sizeof w);
    specdec_status s = sd_outdir_init(&od, out_dir, err);
    if (s != SPECDEC_OK) goto done;

    /* Validate the input fully before writing anything. */
    if ((s = sd_config_load_dir(in_dir, &c, err)) != SPECDEC_OK) goto done;
    /* An already quantized model may be quantized further (its dense mtp.* linears, with
     * --quantize-mtp): one model holds one quantization, so bits and group must match its own;
     * its quantized tensors are copied as stored. */
    if (c.quant_bits && (c.quant_bits != p.bits || c.quant_group != p.group_size)) {
        s = sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s: config.json already has a quantization block (%d-bit, group %d); "
                    "quantize from dense weights, or ask for the same bits and group", in_dir, c.quant_bits, c.quant_group);
        goto done;
    }
    if ((s = sd_st_open_dir(in_dir, &st, err)) != SPECDEC_OK) goto done;
    int todo = 0;
    for (int i = 0; i < sd_st_count(st); i++) {
        const sd_st_tensor *t = sd_st_at(st, i);
        if (!c.quant_bits && ends_with(t->name, ".scales")) {
            s = sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s: tensor '%s': input is already quantized", in_dir, t->name);
            goto done;
        }
        bool fl = t->dtype == SPECDEC_DTYPE_F32 || t->dtype == SPECDEC_DTYPE_F16 || t->dtype == SPECDEC_DTYPE_BF16;
        todo += fl && t->ndim == 2 && wants_quant(t->name, &c, &p);
    }
    if (c.quant_bits && todo == 0) {
        s = sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s: already %d-bit and no dense tensor is left to quantize%s", in_dir,
                    c.quant_bits, p.quantize_mtp ? "" : " (the mtp.* drafter needs --quantize-mtp)");
        goto done;
    }
    if ((s = sd_weights_bind(&c, st, true, &w, err)) != SPECDEC_OK) { sd_err_prefix(err, "%s", in_dir); goto done; }
    sd_weights_free(&w); /* validation only: quantization walks the tensor set */

    if ((s = sd_outdir_mktemp(&od, err)) != SPECDEC_OK) goto done;
    if ((s = quantize_into(in_dir, od.tmp, &c, st, &p, err)) != SPECDEC_OK) goto done;
    s = sd_outdir_commit(&od, err);
done:
    sd_outdir_end(&od);
    sd_weights_free(&w);
    sd_st_close(st);
    return s;
}
