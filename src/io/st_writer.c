/* st_writer.c: the safetensors writer. Tensors are laid out in the order added, data offsets
 * contiguous, the JSON header padded with spaces to a multiple of 8 bytes (as the reference
 * implementation does). Every output file is written as `<file>.tmp`, fsynced and then renamed,
 * all renames happening after every file is complete, so a failure never leaves partial output
 * over good data. The layout is fixed before any data is written (a stream), so the bytes of a
 * tensor can come later, in pieces, from several threads (positioned writes): sd_st_writer_write
 * is the stream fed from the registered buffers. Sharded output uses the Hugging Face names model-0000i-of-0000n.safetensors plus
 * model.safetensors.index.json {"metadata": {"total_size": N}, "weight_map": {...}}. */
#include "io/safetensors.h"
#include "util/path.h"
#include "io/outdir.h"
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

static specdec_status add(sd_st_writer *w, const char *name, specdec_dtype dt, int ndim, const int64_t *shape,
                          const void *data, bool planned, specdec_err *err) {
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
    if (nbytes && !data && !planned) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "writer: tensor '%s': NULL data", name);
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


specdec_status sd_st_writer_add(sd_st_writer *w, const char *name, specdec_dtype dt, int ndim,
                                const int64_t *shape, const void *data, specdec_err *err) {
    return add(w, name, dt, ndim, shape, data, false, err);
}

specdec_status sd_st_writer_plan(sd_st_writer *w, const char *name, specdec_dtype dt, int ndim, const int64_t *shape,
                                 specdec_err *err) {
    return add(w, name, dt, ndim, shape, NULL, true, err);
}

int sd_st_writer_count(const sd_st_writer *w) { return w->n; }
uint64_t sd_st_writer_nbytes(const sd_st_writer *w, int i) { return w->t[i].nbytes; }

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

/* An open set of output files: shard k holds tensors start[k]..start[k+1]-1; tensor i's data
 * begins at byte at[i] of its shard. Files are written as <name>.tmp until finish. */
struct sd_st_stream {
    const sd_st_writer *w;
    char *dir;
    int n_sh;
    int *start;          /* (n_sh + 1) */
    int *shard_of;       /* (n) */
    uint64_t *at;        /* (n) */
    char **names, **final, **tmp;   /* (n_sh + 1): the last slot is the index when sharded */
    int *fd;             /* (n_sh) */
    int n_files;         /* tmp files created so far */
    uint64_t total;
};

static specdec_status pwrite_all(int fd, const void *buf, size_t n, uint64_t off, const char *path, specdec_err *err) {
    const char *p = buf;
    while (n > 0) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : n;
        ssize_t r = pwrite(fd, p, chunk, (off_t)off);
        if (r < 0) {
            if (errno == EINTR) continue;
            return sd_fail(err, SPECDEC_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        }
        p += r;
        off += (uint64_t)r;
        n -= (size_t)r;
    }
    return SPECDEC_OK;
}

static void stream_free(sd_st_stream *s) {
    if (!s) return;
    for (int k = 0; k < s->n_sh; k++) if (s->fd && s->fd[k] >= 0) close(s->fd[k]);
    for (int k = 0; k < s->n_files; k++) if (s->tmp[k]) unlink(s->tmp[k]);
    for (int k = 0; s->names && k <= s->n_sh; k++) { free(s->names[k]); free(s->final[k]); free(s->tmp[k]); }
    free(s->names); free(s->final); free(s->tmp); free(s->fd);
    free(s->start); free(s->shard_of); free(s->at); free(s->dir);
    free(s);
}

void sd_st_stream_abort(sd_st_stream *s) { stream_free(s); }

/* Names of file slot k: names[k], final[k] = dir/names[k], tmp[k] = final[k] + ".tmp". */
static specdec_status stream_names(sd_st_stream *s, int k, const char *nm, specdec_err *err) {
    s->names[k] = strdup(nm);
    s->final[k] = sd_path_join(s->dir, nm);
    size_t fl = s->final[k] ? strlen(s->final[k]) : 0;
    s->tmp[k] = s->final[k] ? malloc(fl + 5) : NULL;
    if (!s->names[k] || !s->tmp[k]) return sd_fail(err, SPECDEC_ERR_NOMEM, "writer: out of memory");
    memcpy(s->tmp[k], s->final[k], fl);
    memcpy(s->tmp[k] + fl, ".tmp", 5);
    return SPECDEC_OK;
}

specdec_status sd_st_stream_open(const sd_st_writer *w, const char *dir, uint64_t max_shard_bytes, sd_st_stream **out,
                                 specdec_err *err) {
    if (!w || !dir || !out) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "sd_st_stream_open: NULL argument");
    *out = NULL;
    sd_st_stream *s = calloc(1, sizeof *s);
    if (!s) return sd_fail(err, SPECDEC_ERR_NOMEM, "writer: out of memory");
    s->w = w;
    for (int i = 0; i < w->n; i++) s->total += w->t[i].nbytes;
    /* Shard boundaries: greedy, a new shard starts when the next tensor would overflow a
     * non-empty shard (a single tensor larger than the limit gets a shard of its own). */
    s->start = malloc((size_t)(w->n + 2) * sizeof *s->start);
    s->shard_of = malloc((size_t)(w->n + 1) * sizeof *s->shard_of);
    s->at = malloc((size_t)(w->n + 1) * sizeof *s->at);
    s->dir = strdup(dir);
    specdec_status st = SPECDEC_OK;
    if (!s->start || !s->shard_of || !s->at || !s->dir) { st = sd_fail(err, SPECDEC_ERR_NOMEM, "writer: out of memory"); goto fail; }
    s->start[s->n_sh++] = 0;
    if (max_shard_bytes > 0 && s->total > max_shard_bytes) {
        uint64_t cur = 0;
        for (int i = 0; i < w->n; i++) {
            if (i > s->start[s->n_sh - 1] && cur + w->t[i].nbytes > max_shard_bytes) { s->start[s->n_sh++] = i; cur = 0; }
            cur += w->t[i].nbytes;
        }
    }
    s->start[s->n_sh] = w->n;
    const int n_sh = s->n_sh;
    s->names = calloc((size_t)n_sh + 1, sizeof *s->names);
    s->final = calloc((size_t)n_sh + 1, sizeof *s->final);
    s->tmp = calloc((size_t)n_sh + 1, sizeof *s->tmp);
    s->fd = malloc((size_t)n_sh * sizeof *s->fd);
    if (!s->names || !s->final || !s->tmp || !s->fd) { st = sd_fail(err, SPECDEC_ERR_NOMEM, "writer: out of memory"); goto fail; }
    for (int k = 0; k < n_sh; k++) s->fd[k] = -1;
    for (int k = 0; k < n_sh; k++) {
        char nm[64];
        if (n_sh > 1) snprintf(nm, sizeof nm, "model-%05d-of-%05d.safetensors", k + 1, n_sh);
        else snprintf(nm, sizeof nm, "model.safetensors");
        if ((st = stream_names(s, k, nm, err)) != SPECDEC_OK) goto fail;
        char *head = NULL;
        size_t hl = 0;
        if ((st = make_header(w->t + s->start[k], s->start[k + 1] - s->start[k], &head, &hl, err)) != SPECDEC_OK) goto fail;
        uint64_t off = hl;
        for (int i = s->start[k]; i < s->start[k + 1]; i++) { s->shard_of[i] = k; s->at[i] = off; off += w->t[i].nbytes; }
        s->fd[k] = open(s->tmp[k], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (s->fd[k] < 0) { free(head); st = sd_fail(err, SPECDEC_ERR_IO, "%s: cannot create: %s", s->tmp[k], strerror(errno)); goto fail; }
        s->n_files = k + 1;
        /* Reserve the whole file now: a full disk fails here, before any time is spent. */
        int e = off > hl ? posix_fallocate(s->fd[k], 0, (off_t)off) : 0;
        if (e != 0 && e != EINVAL && e != EOPNOTSUPP) {
            free(head);
            st = sd_fail(err, SPECDEC_ERR_IO, "%s: cannot reserve %llu bytes: %s", s->tmp[k], (unsigned long long)off, strerror(e));
            goto fail;
        }
        st = pwrite_all(s->fd[k], head, hl, 0, s->tmp[k], err);
        free(head);
        if (st != SPECDEC_OK) goto fail;
    }
    *out = s;
    return SPECDEC_OK;
fail:
    stream_free(s);
    return st;
}

int sd_st_stream_shards(const sd_st_stream *s) { return s->n_sh; }

specdec_status sd_st_stream_pwrite(sd_st_stream *s, int i, uint64_t off, const void *buf, size_t n, specdec_err *err) {
    if (i < 0 || i >= s->w->n || off > s->w->t[i].nbytes || n > s->w->t[i].nbytes - off)
        return sd_fail(err, SPECDEC_ERR_INTERNAL, "writer: write of %zu bytes at %llu is outside tensor %d", n, (unsigned long long)off, i);
    const int k = s->shard_of[i];
    return pwrite_all(s->fd[k], buf, n, s->at[i] + off, s->tmp[k], err);
}

specdec_status sd_st_stream_finish(sd_st_stream *s, specdec_err *err) {
    specdec_status st = SPECDEC_OK;
    const int n_sh = s->n_sh;
    for (int k = 0; k < n_sh && st == SPECDEC_OK; k++) {
        if (fsync(s->fd[k]) != 0) st = sd_fail(err, SPECDEC_ERR_IO, "%s: fsync failed: %s", s->tmp[k], strerror(errno));
        int c = close(s->fd[k]);
        s->fd[k] = -1;
        if (c != 0 && st == SPECDEC_OK) st = sd_fail(err, SPECDEC_ERR_IO, "%s: close failed: %s", s->tmp[k], strerror(errno));
    }
    if (st == SPECDEC_OK && n_sh > 1) {
        json_t *root = json_object(), *meta = json_object(), *wmap = json_object();
        json_object_set_new(meta, "total_size", json_integer((json_int_t)s->total));
        json_object_set_new(root, "metadata", meta);
        for (int i = 0; i < s->w->n; i++) json_object_set_new(wmap, s->w->t[i].name, json_string(s->names[s->shard_of[i]]));
        json_object_set_new(root, "weight_map", wmap);
        char *js = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(root);
        if (!js) st = sd_fail(err, SPECDEC_ERR_NOMEM, "writer: out of memory");
        if (st == SPECDEC_OK) st = stream_names(s, n_sh, "model.safetensors.index.json", err);
        if (st == SPECDEC_OK) s->n_files = n_sh + 1;
        if (st == SPECDEC_OK) st = sd_write_file_synced(s->tmp[n_sh], js, strlen(js), err);
        free(js);
    }
    /* Every file is complete: rename into place, the index last (readers prefer it). */
    for (int k = 0; st == SPECDEC_OK && k < s->n_files; k++)
        if (rename(s->tmp[k], s->final[k]) != 0)
            st = sd_fail(err, SPECDEC_ERR_IO, "%s: rename from %s failed: %s", s->final[k], s->tmp[k], strerror(errno));
    if (st == SPECDEC_OK) {
        s->n_files = 0; /* nothing left to clean up */
        /* Make the renames durable. */
        int dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) { fsync(dfd); close(dfd); }
    }
    stream_free(s);
    return st;
}

specdec_status sd_st_writer_write(sd_st_writer *w, const char *dir, uint64_t max_shard_bytes, specdec_err *err) {
    if (!w || !dir) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "sd_st_writer_write: NULL argument");
    sd_st_stream *s = NULL;
    specdec_status st = sd_st_stream_open(w, dir, max_shard_bytes, &s, err);
    for (int i = 0; st == SPECDEC_OK && i < w->n; i++)
        if (w->t[i].nbytes) st = sd_st_stream_pwrite(s, i, 0, w->t[i].data, (size_t)w->t[i].nbytes, err);
    if (st != SPECDEC_OK) { sd_st_stream_abort(s); return st; }
    return sd_st_stream_finish(s, err);
}
