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
#include "model/config.h"
#include "model/weights.h"
#include "util/dtype.h"
#include "util/err.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

typedef struct qtensor {
    uint32_t *w;     /* (rows, cols*B/32) */
    void *scales;    /* (rows, cols/G) of dt */
    void *biases;
} qtensor;

/* Quantize tensor t (2-D float [rows, cols]) into q; report errors. */
static specdec_status quant_one(const sd_st_tensor *t, int bits, int G, const char *path, qtensor *q, double *rel_rms,
                                double *max_abs, specdec_err *err) {
    const size_t rows = (size_t)t->shape[0], cols = (size_t)t->shape[1], ng = cols / (size_t)G;
    const int epw = 32 / bits;
    const uint32_t nb = (1u << bits) - 1u;
    const specdec_dtype dt = t->dtype;
    const size_t es = sd_dtype_size(dt), wpr = cols / (size_t)epw;
    q->w = calloc(rows * wpr, 4);
    q->scales = malloc(rows * ng * es);
    q->biases = malloc(rows * ng * es);
    float *row = malloc(cols * sizeof(float));
    void *raw = malloc(cols * es);
    if (!q->w || !q->scales || !q->biases || !row || !raw) {
        free(row); free(raw);
        return sd_fail(err, SPECDEC_ERR_NOMEM, "%s: tensor '%s': out of memory quantizing", path, t->name);
    }
    double se = 0, sw = 0, mx = 0;
    specdec_status st = SPECDEC_OK;
    for (size_t r = 0; r < rows && st == SPECDEC_OK; r++) {
        memcpy(raw, (const char *)t->data + r * cols * es, cols * es); /* the mapping gives no alignment */
        sd_to_f32(dt, raw, row, cols);
        uint32_t *wr = q->w + r * wpr;
        for (size_t g = 0; g < ng; g++) {
            const float *x = row + g * (size_t)G;
            float lo = x[0], hi = x[0];
            for (int j = 0; j < G; j++) {
                if (!isfinite(x[j])) {
                    st = sd_fail(err, SPECDEC_ERR_FORMAT, "%s: tensor '%s': non-finite value at row %zu, column %zu", path, t->name,
                                 r, g * (size_t)G + (size_t)j);
                    break;
                }
                if (x[j] < lo) lo = x[j];
                if (x[j] > hi) hi = x[j];
            }
            if (st != SPECDEC_OK) break;
            const float b = store_rounded(dt, lo, -1, q->biases, r * ng + g);
            const float s = store_rounded(dt, ((double)hi - (double)b) / nb, +1, q->scales, r * ng + g);
            if (!isfinite(b) || !isfinite(s)) {
                st = sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s: tensor '%s': row %zu exceeds the %s range of scales/biases", path,
                             t->name, r, specdec_dtype_name(dt));
                break;
            }
            for (int j = 0; j < G; j++) {
                uint32_t qi = 0;
                if (s > 0) {
                    double v = floor(((double)x[j] - (double)b) / (double)s + 0.5);
                    qi = v <= 0 ? 0 : v >= nb ? nb : (uint32_t)v;
                }
                const size_t jj = g * (size_t)G + (size_t)j;
                wr[jj / (size_t)epw] |= qi << (bits * (int)(jj % (size_t)epw));
                const float deq = s * (float)qi + b; /* exactly what sd_mat_row_f32 computes */
                const double e = fabs((double)x[j] - (double)deq);
                se += e * e;
                sw += (double)x[j] * x[j];
                if (e > mx) mx = e;
            }
        }
    }
    free(row);
    free(raw);
    *rel_rms = sw > 0 ? sqrt(se / sw) : 0.0;
    *max_abs = mx;
    return st;
}

/* ---- files ---- */


static specdec_status write_synced(const char *path, const void *data, size_t len, specdec_err *err) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return sd_fail(err, SPECDEC_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len > (1u << 30) ? (1u << 30) : len);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) { int e = errno; close(fd); return sd_fail(err, SPECDEC_ERR_IO, "%s: write failed: %s", path, strerror(e)); }
        p += w;
        len -= (size_t)w;
    }
    if (fsync(fd) != 0) { int e = errno; close(fd); return sd_fail(err, SPECDEC_ERR_IO, "%s: fsync failed: %s", path, strerror(e)); }
    if (close(fd) != 0) return sd_fail(err, SPECDEC_ERR_IO, "%s: close failed: %s", path, strerror(errno));
    return SPECDEC_OK;
}

static specdec_status copy_file(const char *src, const char *dst, specdec_err *err) {
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) return sd_fail(err, SPECDEC_ERR_IO, "%s: cannot open: %s", src, strerror(errno));
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) { int e = errno; close(in); return sd_fail(err, SPECDEC_ERR_IO, "%s: cannot create: %s", dst, strerror(e)); }
    char buf[1 << 16];
    specdec_status st = SPECDEC_OK;
    for (;;) {
        ssize_t r = read(in, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) { st = sd_fail(err, SPECDEC_ERR_IO, "%s: read failed: %s", src, strerror(errno)); break; }
        if (r == 0) break;
        for (ssize_t o = 0; o < r;) {
            ssize_t w = write(out, buf + o, (size_t)(r - o));
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) { st = sd_fail(err, SPECDEC_ERR_IO, "%s: write failed: %s", dst, strerror(errno)); break; }
            o += w;
        }
        if (st != SPECDEC_OK) break;
    }
    if (st == SPECDEC_OK && fsync(out) != 0) st = sd_fail(err, SPECDEC_ERR_IO, "%s: fsync failed: %s", dst, strerror(errno));
    close(in);
    if (close(out) != 0 && st == SPECDEC_OK) st = sd_fail(err, SPECDEC_ERR_IO, "%s: close failed: %s", dst, strerror(errno));
    return st;
}

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}
static bool starts_with(const char *s, const char *pre) { return strncmp(s, pre, strlen(pre)) == 0; }

/* Copy every regular file of IN except the config and the weights (tokenizer files, README...). */
static specdec_status copy_side_files(const char *in, const char *out, specdec_err *err) {
    DIR *d = opendir(in);
    if (!d) return sd_fail(err, SPECDEC_ERR_IO, "%s: cannot list: %s", in, strerror(errno));
    specdec_status st = SPECDEC_OK;
    for (struct dirent *de; st == SPECDEC_OK && (de = readdir(d));) {
        const char *n = de->d_name;
        if (!strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, "config.json") || ends_with(n, ".safetensors") ||
            ends_with(n, ".safetensors.index.json") || ends_with(n, ".tmp"))
            continue;
        char *src = sd_path_join(in, n), *dst = sd_path_join(out, n);
        struct stat sb;
        if (!src || !dst) st = sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory");
        else if (stat(src, &sb) == 0 && S_ISREG(sb.st_mode)) st = copy_file(src, dst, err); /* follows HF-cache symlinks */
        free(src);
        free(dst);
    }
    closedir(d);
    return st;
}

/* IN's config.json with "quantization" and "quantization_config" = {"group_size", "bits"}. */
static specdec_status write_config(const char *in, const char *out, int bits, int G, specdec_err *err) {
    char *src = sd_path_join(in, "config.json"), *dst = sd_path_join(out, "config.json");
    specdec_status st = SPECDEC_OK;
    json_error_t je;
    json_t *root = src ? json_load_file(src, JSON_REJECT_DUPLICATES, &je) : NULL;
    char *text = NULL;
    if (!src || !dst) { st = sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory"); goto done; }
    if (!json_is_object(root)) { st = sd_fail(err, SPECDEC_ERR_FORMAT, "%s: cannot re-read: %s", src, je.text); goto done; }
    json_t *q = json_object();
    json_object_set_new(q, "group_size", json_integer(G));
    json_object_set_new(q, "bits", json_integer(bits));
    json_object_set_new(root, "quantization_config", json_deep_copy(q));
    json_object_set_new(root, "quantization", q);
    text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!text) { st = sd_fail(err, SPECDEC_ERR_NOMEM, "%s: cannot serialize", dst); goto done; }
    size_t n = strlen(text);
    char *t2 = realloc(text, n + 2);
    if (!t2) { st = sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory"); goto done; }
    text = t2;
    text[n] = '\n';
    text[n + 1] = 0;
    st = write_synced(dst, text, n + 1, err);
done:
    free(text);
    json_decref(root);
    free(src);
    free(dst);
    return st;
}

/* Remove the files of our (flat) temporary directory, then the directory. */
static void remove_tmp_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        for (struct dirent *de; (de = readdir(d));) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
            char *p = sd_path_join(dir, de->d_name);
            if (p) unlink(p);
            free(p);
        }
        closedir(d);
    }
    rmdir(dir);
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
    if (s == SPECDEC_OK) s = write_config(in, tmp, B, G, err);
    if (s == SPECDEC_OK) s = copy_side_files(in, tmp, err);
done:
    sd_st_writer_free(w);
    for (int i = 0; qs && i < n; i++) { free(qs[i].w); free(qs[i].scales); free(qs[i].biases); }
    free(qs);
    return s;
}

/* OUT may be absent or an empty directory; anything else is good data we must not replace. */
static specdec_status check_out(const char *out, specdec_err *err) {
    struct stat sb;
    if (stat(out, &sb) != 0) {
        if (errno == ENOENT) return SPECDEC_OK;
        return sd_fail(err, SPECDEC_ERR_IO, "%s: cannot stat: %s", out, strerror(errno));
    }
    if (!S_ISDIR(sb.st_mode)) return sd_fail(err, SPECDEC_ERR_IO, "%s: exists and is not a directory; refusing to overwrite it", out);
    DIR *d = opendir(out);
    if (!d) return sd_fail(err, SPECDEC_ERR_IO, "%s: cannot list: %s", out, strerror(errno));
    bool empty = true;
    for (struct dirent *de; empty && (de = readdir(d));)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) empty = false;
    closedir(d);
    if (!empty) return sd_fail(err, SPECDEC_ERR_IO, "%s: exists and is not empty; refusing to overwrite it", out);
    return SPECDEC_OK;
}

specdec_status specdec_quantize(const char *in_dir, const char *out_dir, const specdec_quantize_params *params,
                                specdec_err *err) {
    if (!in_dir || !out_dir || !*out_dir) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "specdec_quantize: NULL or empty directory");
    specdec_quantize_params p = params ? *params : specdec_quantize_default_params();
    if (p.bits != 4 && p.bits != 8) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "quantize: bits %d not supported (4 or 8)", p.bits);
    if (p.group_size != 32 && p.group_size != 64 && p.group_size != 128)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "quantize: group size %d not supported (32, 64 or 128)", p.group_size);

    /* OUT without trailing slashes, so the temporary sibling is OUT.tmp-XXXXXX next to it. */
    size_t ol = strlen(out_dir);
    while (ol > 1 && out_dir[ol - 1] == '/') ol--;
    char *out = malloc(ol + 1), *tmp = malloc(ol + 16);
    sd_config c;
    sd_st_set *st = NULL;
    sd_weights w;
    memset(&w, 0, sizeof w);
    specdec_status s = SPECDEC_OK;
    bool made_tmp = false;
    if (!out || !tmp) { s = sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory"); goto done; }
    memcpy(out, out_dir, ol);
    out[ol] = 0;
    if ((s = check_out(out, err)) != SPECDEC_OK) goto done;

    /* Validate the input fully before writing anything. */
    if ((s = sd_config_load_dir(in_dir, &c, err)) != SPECDEC_OK) goto done;
    if (c.quant_bits) {
        s = sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s: config.json already has a quantization block (%d-bit, group %d); "
                    "quantize from dense weights", in_dir, c.quant_bits, c.quant_group);
        goto done;
    }
    if ((s = sd_st_open_dir(in_dir, &st, err)) != SPECDEC_OK) goto done;
    for (int i = 0; i < sd_st_count(st); i++)
        if (ends_with(sd_st_at(st, i)->name, ".scales")) {
            s = sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "%s: tensor '%s': input is already quantized", in_dir, sd_st_at(st, i)->name);
            goto done;
        }
    if ((s = sd_weights_bind(&c, st, true, &w, err)) != SPECDEC_OK) { sd_err_prefix(err, "%s", in_dir); goto done; }
    sd_weights_free(&w); /* validation only: quantization walks the tensor set */

    snprintf(tmp, ol + 16, "%s.tmp-XXXXXX", out);
    if (!mkdtemp(tmp)) { s = sd_fail(err, SPECDEC_ERR_IO, "%s: cannot create temporary directory: %s", tmp, strerror(errno)); goto done; }
    made_tmp = true;
    if ((s = quantize_into(in_dir, tmp, &c, st, &p, err)) != SPECDEC_OK) goto done;
    (void)chmod(tmp, 0755); /* mkdtemp makes it 0700; a model directory is normally world-readable */
    if (rename(tmp, out) != 0) {
        s = sd_fail(err, SPECDEC_ERR_IO, "%s: cannot rename %s into place: %s", out, tmp, strerror(errno));
        goto done;
    }
    made_tmp = false;
    /* make the rename durable */
    char *slash = strrchr(out, '/');
    if (slash) *slash = 0;
    int dfd = open(slash ? (*out ? out : "/") : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) { fsync(dfd); close(dfd); }
done:
    if (made_tmp) remove_tmp_dir(tmp);
    sd_weights_free(&w);
    sd_st_close(st);
    free(out);
    free(tmp);
    return s;
}
