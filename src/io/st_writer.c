/* st_writer.c: the safetensors writer. Tensors are written in the order added, data offsets
 * contiguous, the JSON header padded with spaces to a multiple of 8 bytes (as the reference
 * implementation does). Every output file is written as `<file>.tmp`, fsynced and then renamed,
 * all renames happening after every file is complete, so a failure never leaves partial output
 * over good data. Sharded output uses the Hugging Face names model-0000i-of-0000n.safetensors plus
 * model.safetensors.index.json {"metadata": {"total_size": N}, "weight_map": {...}}. */
#include "io/safetensors.h"
#include "util/path.h"
#include "util/dtype.h"
#include "util/err.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct wt {
    char *name;
    specdec_dtype dt;
    int ndim;
    int64_t shape[SD_ST_MAX_DIMS];
    const void *data;
    uint64_t nbytes;
} wt;

struct sd_st_writer {
    wt *t;
    int n, cap;
};

sd_st_writer *sd_st_writer_new(void) { return calloc(1, sizeof(sd_st_writer)); }

void sd_st_writer_free(sd_st_writer *w) {
    if (!w) return;
    for (int i = 0; i < w->n; i++) free(w->t[i].name);
    free(w->t);
    free(w);
}

specdec_status sd_st_writer_add(sd_st_writer *w, const char *name, specdec_dtype dt, int ndim,
                                const int64_t *shape, const void *data, specdec_err *err) {
    if (!w || !name) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "sd_st_writer_add: NULL argument");
    if ((unsigned)dt >= SPECDEC_DTYPE_COUNT)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "writer: tensor '%s': invalid dtype %d", name, (int)dt);
    if (ndim < 0 || ndim > SD_ST_MAX_DIMS || (ndim > 0 && !shape))
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "writer: tensor '%s': invalid ndim %d", name, ndim);
    /* Linear scan for duplicates: the writer sees ~1000 tensors, quadratic cost is negligible. */
    for (int i = 0; i < w->n; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "writer: tensor '%s' added twice", name);
    uint64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (shape[i] > 0 && numel > (UINT64_C(1) << 50) / (uint64_t)shape[i]))
            return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "writer: tensor '%s': invalid shape entry %lld", name, (long long)shape[i]);
        numel *= (uint64_t)shape[i];
    }
    uint64_t nbytes = numel * sd_dtype_size(dt);
    if (nbytes && !data) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "writer: tensor '%s': NULL data", name);
    if (w->n == w->cap) {
        int cap = w->cap ? w->cap * 2 : 64;
        wt *t = realloc(w->t, (size_t)cap * sizeof *t);
        if (!t) return sd_fail(err, SPECDEC_ERR_NOMEM, "writer: out of memory");
        w->t = t;
        w->cap = cap;
    }
    wt *t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    size_t len = strlen(name) + 1;
    t->name = malloc(len);
    if (!t->name) return sd_fail(err, SPECDEC_ERR_NOMEM, "writer: out of memory");
    memcpy(t->name, name, len);
    t->dt = dt;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->data = data;
    t->nbytes = nbytes;
    w->n++;
    return SPECDEC_OK;
}


static specdec_status write_all(int fd, const void *buf, size_t n, const char *path, specdec_err *err) {
    const char *p = buf;
    while (n > 0) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : n;
        ssize_t r = write(fd, p, chunk);
        if (r < 0) {
            if (errno == EINTR) continue;
            return sd_fail(err, SPECDEC_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        }
        p += r;
        n -= (size_t)r;
    }
    return SPECDEC_OK;
}

/* Write `bytes` to tmp_path, fsync, close. */
static specdec_status write_tmp(const char *tmp_path, const void *head, size_t head_len, const wt *ts, int n,
                                const char *json_text, specdec_err *err) {
    int fd = open(tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return sd_fail(err, SPECDEC_ERR_IO, "%s: cannot create: %s", tmp_path, strerror(errno));
    specdec_status st = SPECDEC_OK;
    if (head_len) st = write_all(fd, head, head_len, tmp_path, err);
    if (st == SPECDEC_OK && json_text) st = write_all(fd, json_text, strlen(json_text), tmp_path, err);
    for (int i = 0; st == SPECDEC_OK && i < n; i++) st = write_all(fd, ts[i].data, (size_t)ts[i].nbytes, tmp_path, err);
    if (st == SPECDEC_OK && fsync(fd) != 0) st = sd_fail(err, SPECDEC_ERR_IO, "%s: fsync failed: %s", tmp_path, strerror(errno));
    if (close(fd) != 0 && st == SPECDEC_OK) st = sd_fail(err, SPECDEC_ERR_IO, "%s: close failed: %s", tmp_path, strerror(errno));
    return st;
}

/* Header bytes (length + JSON + space padding) for tensors ts[0..n). *out is malloc'ed. */
static specdec_status make_header(const wt *ts, int n, char **out, size_t *out_len, specdec_err *err) {
    json_t *root = json_object(), *meta = json_object();
    if (!root || !meta) { json_decref(root); json_decref(meta); return sd_fail(err, SPECDEC_ERR_NOMEM, "writer: out of memory"); }
    json_object_set_new(meta, "format", json_string("pt"));
    json_object_set_new(root, "__metadata__", meta);
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        json_t *e = json_object(), *sh = json_array(), *oo = json_array();
        for (int d = 0; d < ts[i].ndim; d++) json_array_append_new(sh, json_integer((json_int_t)ts[i].shape[d]));
        json_array_append_new(oo, json_integer((json_int_t)off));
        json_array_append_new(oo, json_integer((json_int_t)(off + ts[i].nbytes)));
        off += ts[i].nbytes;
        json_object_set_new(e, "dtype", json_string(specdec_dtype_name(ts[i].dt)));
        json_object_set_new(e, "shape", sh);
        json_object_set_new(e, "data_offsets", oo);
        if (json_object_set_new(root, ts[i].name, e) != 0) {
            json_decref(root);
            return sd_fail(err, SPECDEC_ERR_NOMEM, "writer: tensor '%s': cannot build header", ts[i].name);
        }
    }
    char *js = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!js) return sd_fail(err, SPECDEC_ERR_NOMEM, "writer: cannot serialize header");
    size_t jl = strlen(js), padded = (jl + 7) & ~(size_t)7;
    char *h = malloc(8 + padded);
    if (!h) { free(js); return sd_fail(err, SPECDEC_ERR_NOMEM, "writer: out of memory"); }
    for (int i = 0; i < 8; i++) h[i] = (char)(((uint64_t)padded >> (8 * i)) & 0xff);
    memcpy(h + 8, js, jl);
    memset(h + 8 + jl, ' ', padded - jl);
    free(js);
    *out = h;
    *out_len = 8 + padded;
    return SPECDEC_OK;
}

specdec_status sd_st_writer_write(sd_st_writer *w, const char *dir, uint64_t max_shard_bytes, specdec_err *err) {
    if (!w || !dir) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "sd_st_writer_write: NULL argument");
    uint64_t total = 0;
    for (int i = 0; i < w->n; i++) total += w->t[i].nbytes;
    /* Shard boundaries: greedy, a new shard starts when the next tensor would overflow a
     * non-empty shard (a single tensor larger than the limit gets a shard of its own). */
    int *start = malloc((size_t)(w->n + 2) * sizeof *start), n_sh = 0;
    if (!start) return sd_fail(err, SPECDEC_ERR_NOMEM, "writer: out of memory");
    start[n_sh++] = 0;
    if (max_shard_bytes > 0 && total > max_shard_bytes) {
        uint64_t cur = 0;
        for (int i = 0; i < w->n; i++) {
            if (i > start[n_sh - 1] && cur + w->t[i].nbytes > max_shard_bytes) { start[n_sh++] = i; cur = 0; }
            cur += w->t[i].nbytes;
        }
    }
    start[n_sh] = w->n;
    bool sharded = n_sh > 1;
    specdec_status st = SPECDEC_OK;
    char **final = calloc((size_t)n_sh + 1, sizeof *final), **tmp = calloc((size_t)n_sh + 1, sizeof *tmp);
    char **names = calloc((size_t)n_sh, sizeof *names);
    json_t *wmap = NULL;
    int n_files = 0;
    if (!final || !tmp || !names) { st = sd_fail(err, SPECDEC_ERR_NOMEM, "writer: out of memory"); goto done; }
    for (int k = 0; k < n_sh; k++) {
        char nm[64];
        if (sharded) snprintf(nm, sizeof nm, "model-%05d-of-%05d.safetensors", k + 1, n_sh);
        else snprintf(nm, sizeof nm, "model.safetensors");
        names[k] = strdup(nm);
        final[k] = sd_path_join(dir, nm);
        size_t fl = final[k] ? strlen(final[k]) : 0;
        tmp[k] = final[k] ? malloc(fl + 5) : NULL;
        if (!names[k] || !tmp[k]) { st = sd_fail(err, SPECDEC_ERR_NOMEM, "writer: out of memory"); goto done; }
        memcpy(tmp[k], final[k], fl);
        memcpy(tmp[k] + fl, ".tmp", 5);
        n_files = k + 1;
        char *head = NULL;
        size_t hl = 0;
        if ((st = make_header(w->t + start[k], start[k + 1] - start[k], &head, &hl, err)) != SPECDEC_OK) goto done;
        st = write_tmp(tmp[k], head, hl, w->t + start[k], start[k + 1] - start[k], NULL, err);
        free(head);
        if (st != SPECDEC_OK) goto done;
    }
    if (sharded) {
        json_t *root = json_object(), *meta = json_object();
        wmap = json_object();
        json_object_set_new(meta, "total_size", json_integer((json_int_t)total));
        json_object_set_new(root, "metadata", meta);
        for (int k = 0; k < n_sh; k++)
            for (int i = start[k]; i < start[k + 1]; i++) json_object_set_new(wmap, w->t[i].name, json_string(names[k]));
        json_object_set(root, "weight_map", wmap);
        char *js = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(root);
        final[n_sh] = sd_path_join(dir, "model.safetensors.index.json");
        tmp[n_sh] = final[n_sh] ? malloc(strlen(final[n_sh]) + 5) : NULL;
        if (!js || !tmp[n_sh]) { free(js); st = sd_fail(err, SPECDEC_ERR_NOMEM, "writer: out of memory"); goto done; }
        sprintf(tmp[n_sh], "%s.tmp", final[n_sh]);
        n_files = n_sh + 1;
        st = write_tmp(tmp[n_sh], NULL, 0, NULL, 0, js, err);
        free(js);
        if (st != SPECDEC_OK) goto done;
    }
    /* Every file is complete: rename into place, the index last (readers prefer it). */
    for (int k = 0; k < n_files; k++)
        if (rename(tmp[k], final[k]) != 0) {
            st = sd_fail(err, SPECDEC_ERR_IO, "%s: rename from %s failed: %s", final[k], tmp[k], strerror(errno));
            goto done;
        }
    n_files = 0; /* nothing left to clean up */
    /* Make the renames durable. */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) { fsync(dfd); close(dfd); }
done:
    for (int k = 0; k < n_files; k++) if (tmp && tmp[k]) unlink(tmp[k]);
    for (int k = 0; k <= n_sh; k++) {
        if (final) free(final[k]);
        if (tmp) free(tmp[k]);
        if (names && k < n_sh) free(names[k]);
    }
    json_decref(wmap);
    free(final);
    free(tmp);
    free(names);
    free(start);
    return st;
}
