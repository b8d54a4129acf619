/* safetensors.c: the safetensors reader. Files are mmapped read-only (MAP_PRIVATE); the header
 * (8-byte little-endian length N, then N bytes of JSON) is validated in full before any tensor is
 * handed out. A set gathers one file or the shards named by model.safetensors.index.json; lookups
 * go through an array of tensor indices sorted by name (bsearch). The writer is in st_writer.c. */
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
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* A header beyond this is certainly not a model header (real ones are well under 1 MB). */
#define ST_MAX_HEADER (100ull << 20)
/* Largest element count / byte size we accept; keeps all products far from overflow. */
#define ST_MAX_BYTES (1ull << 50)

typedef struct name_ix { const char *name; int ix; } name_ix;

typedef struct st_file {
    char *path;
    void *map;                /* whole file */
    size_t map_len;
    const uint8_t *data;      /* data section: map + 8 + N */
    uint64_t data_len;
} st_file;

struct sd_st_set {
    st_file *files;
    int n_files;
    sd_st_tensor *t;          /* all tensors, file by file */
    int n, cap;
    name_ix *by_name;         /* (n) tensor names sorted, with their index into t */
    uint64_t total_bytes;
};

/* ---- small helpers ---- */

static char *st_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}


/* The lookup table keeps each name beside its index so sorting needs no global context. */
static int cmp_by_name(const void *a, const void *b) {
    return strcmp(((const name_ix *)a)->name, ((const name_ix *)b)->name);
}

typedef struct span { uint64_t begin, end; const char *name; } span;
static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : 0;
}

static specdec_status grow_tensors(sd_st_set *s, int extra, specdec_err *err) {
    if (s->n + extra <= s->cap) return SPECDEC_OK;
    int cap = s->cap ? s->cap : 64;
    while (cap < s->n + extra) cap *= 2;
    sd_st_tensor *t = realloc(s->t, (size_t)cap * sizeof *t);
    if (!t) return sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory for %d tensors", cap);
    s->t = t;
    s->cap = cap;
    return SPECDEC_OK;
}

/* ---- one file ---- */

/* Parse one tensor entry `name: {dtype, shape, data_offsets}` of file f into *t. */
static specdec_status parse_entry(const st_file *f, const char *name, json_t *v, sd_st_tensor *t,
                                  uint64_t *begin, specdec_err *err) {
    const char *path = f->path;
    if (!json_is_object(v))
        return sd_fail(err, SPECDEC_ERR_FORMAT, "%s: tensor '%s': header entry is not an object", path, name);
    json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"),
           *jo = json_object_get(v, "data_offsets");
    if (!json_is_string(jd))
        return sd_fail(err, SPECDEC_ERR_FORMAT, "%s: tensor '%s': missing or non-string \"dtype\"", path, name);
    int dt = sd_dtype_from_st(json_string_value(jd));
    if (dt < 0)
        return sd_fail(err, SPECDEC_ERR_DTYPE, "%s: tensor '%s': unsupported dtype \"%s\" (known: F32 F16 BF16 U32 I32 I64 U8)",
                       path, name, json_string_value(jd));
    if (!json_is_array(js))
        return sd_fail(err, SPECDEC_ERR_FORMAT, "%s: tensor '%s': missing or non-array \"shape\"", path, name);
    size_t nd = json_array_size(js);
    if (nd > SD_ST_MAX_DIMS)
        return sd_fail(err, SPECDEC_ERR_FORMAT, "%s: tensor '%s': %zu dims, at most %d supported", path, name, nd, SD_ST_MAX_DIMS);
    memset(t, 0, sizeof *t);
    t->dtype = (specdec_dtype)dt;
    t->ndim = (int)nd;
    uint64_t numel = 1;
    for (size_t i = 0; i < nd; i++) {
        json_t *e = json_array_get(js, i);
        if (!json_is_integer(e) || json_integer_value(e) < 0)
            return sd_fail(err, SPECDEC_ERR_FORMAT, "%s: tensor '%s': shape entry %zu is not a non-negative integer", path, name, i);
        uint64_t d = (uint64_t)json_integer_value(e);
        if (d > ST_MAX_BYTES || (d && numel > ST_MAX_BYTES / d))
            return sd_fail(err, SPECDEC_ERR_FORMAT, "%s: tensor '%s': shape too large (overflows)", path, name);
        numel *= d;
        t->shape[i] = (int64_t)d;
    }
    uint64_t nbytes = numel * sd_dtype_size(t->dtype);
    if (!json_is_array(jo) || json_array_size(jo) != 2 || !json_is_integer(json_array_get(jo, 0)) ||
        !json_is_integer(json_array_get(jo, 1)))
        return sd_fail(err, SPECDEC_ERR_FORMAT, "%s: tensor '%s': \"data_offsets\" must be [begin, end] integers", path, name);
    json_int_t b = json_integer_value(json_array_get(jo, 0)), e = json_integer_value(json_array_get(jo, 1));
    if (b < 0 || e < b)
        return sd_fail(err, SPECDEC_ERR_FORMAT, "%s: tensor '%s': data_offsets [%lld, %lld] are not 0 <= begin <= end",
                       path, name, (long long)b, (long long)e);
    if ((uint64_t)e > f->data_len)
        return sd_fail(err, SPECDEC_ERR_FORMAT, "%s: tensor '%s': data_offsets [%lld, %lld] exceed data section of %llu bytes",
                       path, name, (long long)b, (long long)e, (unsigned long long)f->data_len);
    if ((uint64_t)(e - b) != nbytes)
        return sd_fail(err, SPECDEC_ERR_FORMAT, "%s: tensor '%s': data_offsets [%lld, %lld] hold %llu bytes, shape x %s needs %llu",
                       path, name, (long long)b, (long long)e, (unsigned long long)(e - b),
                       specdec_dtype_name(t->dtype), (unsigned long long)nbytes);
    t->data = f->data + b;
    t->nbytes = nbytes;
    *begin = (uint64_t)b;
    return SPECDEC_OK;
}

/* Append an empty file record named `path` to s (sd_st_close releases it from then on). */
static st_file *add_file(sd_st_set *s, const char *path, specdec_err *err) {
    st_file *files = realloc(s->files, (size_t)(s->n_files + 1) * sizeof *files);
    if (!files) { sd_fail(err, SPECDEC_ERR_NOMEM, "%s: out of memory", path); return NULL; }
    s->files = files;
    st_file *f = &s->files[s->n_files];
    memset(f, 0, sizeof *f);
    f->path = st_strdup(path);
    if (!f->path) { sd_fail(err, SPECDEC_ERR_NOMEM, "%s: out of memory", path); return NULL; }
    s->n_files++;
    return f;
}

static specdec_status parse_image(sd_st_set *s, st_file *f, const uint8_t *p, uint64_t size, specdec_err *err);

/* Map `path`, validate its header and append its tensors to s as file index s->n_files. */
static specdec_status load_file(sd_st_set *s, const char *path, specdec_err *err) {
    st_file *f = add_file(s, path, err);
    if (!f) return SPECDEC_ERR_NOMEM;

    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sd_fail(err, errno == ENOENT ? SPECDEC_ERR_MISSING : SPECDEC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno; close(fd);
        return sd_fail(err, SPECDEC_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) { close(fd); return sd_fail(err, SPECDEC_ERR_IO, "%s: not a regular file", path); }
    uint64_t size = (uint64_t)sb.st_size;
    if (size < 8) {
        close(fd);
        return sd_fail(err, SPECDEC_ERR_FORMAT, "%s: file is %llu bytes, shorter than the 8-byte header length",
                       path, (unsigned long long)size);
    }
    void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    close(fd); /* the mapping keeps the file alive */
    if (map == MAP_FAILED) return sd_fail(err, SPECDEC_ERR_IO, "%s: mmap failed: %s", path, strerror(map_errno));
    f->map = map;
    f->map_len = (size_t)size;
    return parse_image(s, f, map, size, err);
}

/* Validate the file image p[0..size) (length field, JSON header, every entry) and append its
 * tensors to s as file f (the last one added). Shared by mapped files and in-memory buffers. */
static specdec_status parse_image(sd_st_set *s, st_file *f, const uint8_t *p, uint64_t size, specdec_err *err) {
    const char *path = f->path;
    if (size < 8)
        return sd_fail(err, SPECDEC_ERR_FORMAT, "%s: file is %llu bytes, shorter than the 8-byte header length",
                       path, (unsigned long long)size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | p[i];
    if (n > size - 8)
        return sd_fail(err, SPECDEC_ERR_FORMAT, "%s: header length %llu exceeds the %llu bytes after the length field",
                       path, (unsigned long long)n, (unsigned long long)(size - 8));
    if (n > ST_MAX_HEADER)
        return sd_fail(err, SPECDEC_ERR_FORMAT, "%s: header length %llu exceeds the %llu-byte limit",
                       path, (unsigned long long)n, (unsigned long long)ST_MAX_HEADER);
    f->data = p + 8 + n;
    f->data_len = size - 8 - n;

    json_error_t je;
    json_t *root = json_loadb((const char *)p + 8, (size_t)n, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return sd_fail(err, SPECDEC_ERR_FORMAT, "%s: bad JSON header at line %d, column %d: %s", path, je.line, je.column, je.text);
    specdec_status st = SPECDEC_OK;
    span *spans = NULL;
    if (!json_is_object(root)) {
        st = sd_fail(err, SPECDEC_ERR_FORMAT, "%s: header is not a JSON object", path);
        goto done;
    }
    size_t cnt = json_object_size(root);
    if (cnt > (size_t)1 << 24) { st = sd_fail(err, SPECDEC_ERR_FORMAT, "%s: header lists too many tensors", path); goto done; }
    if ((st = grow_tensors(s, (int)cnt, err)) != SPECDEC_OK) goto done;
    spans = malloc((cnt + 1) * sizeof *spans);
    if (!spans) { st = sd_fail(err, SPECDEC_ERR_NOMEM, "%s: out of memory", path); goto done; }
    int ns = 0;
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) continue; /* free-form string map; ignored */
        sd_st_tensor *t = &s->t[s->n];
        uint64_t begin = 0;
        if ((st = parse_entry(f, key, val, t, &begin, err)) != SPECDEC_OK) goto done;
        t->file = s->n_files - 1;
        t->name = st_strdup(key);
        if (!t->name) { st = sd_fail(err, SPECDEC_ERR_NOMEM, "%s: out of memory", path); goto done; }
        s->n++;
        s->total_bytes += t->nbytes;
        if (t->nbytes) spans[ns++] = (span){begin, begin + t->nbytes, t->name};
    }
    /* Overlap check: after sorting by begin, each span must end before the next starts. */
    qsort(spans, (size_t)ns, sizeof *spans, cmp_span);
    for (int i = 1; i < ns; i++)
        if (spans[i].begin < spans[i - 1].end) {
            st = sd_fail(err, SPECDEC_ERR_FORMAT, "%s: tensors '%s' [%llu, %llu] and '%s' [%llu, %llu] overlap", path,
                         spans[i - 1].name, (unsigned long long)spans[i - 1].begin, (unsigned long long)spans[i - 1].end,
                         spans[i].name, (unsigned long long)spans[i].begin, (unsigned long long)spans[i].end);
            goto done;
        }
done:
    free(spans);
    json_decref(root);
    return st;
}

/* Build the sorted name index; a name seen twice (two shards) is an error. */
static specdec_status build_index(sd_st_set *s, specdec_err *err) {
    s->by_name = malloc((size_t)(s->n ? s->n : 1) * sizeof *s->by_name);
    if (!s->by_name) return sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory");
    for (int i = 0; i < s->n; i++) s->by_name[i] = (name_ix){s->t[i].name, i};
    qsort(s->by_name, (size_t)s->n, sizeof *s->by_name, cmp_by_name);
    for (int i = 1; i < s->n; i++) {
        const sd_st_tensor *a = &s->t[s->by_name[i - 1].ix], *b = &s->t[s->by_name[i].ix];
        if (strcmp(a->name, b->name) == 0)
            return sd_fail(err, SPECDEC_ERR_FORMAT, "tensor '%s' is present in both %s and %s", a->name,
                           s->files[a->file].path, s->files[b->file].path);
    }
    return SPECDEC_OK;
}

static sd_st_set *set_new(void) { return calloc(1, sizeof(sd_st_set)); }

specdec_status sd_st_open_file(const char *path, sd_st_set **out, specdec_err *err) {
    if (!path || !out) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "sd_st_open_file: NULL argument");
    *out = NULL;
    sd_st_set *s = set_new();
    if (!s) return sd_fail(err, SPECDEC_ERR_NOMEM, "%s: out of memory", path);
    specdec_status st = load_file(s, path, err);
    if (st == SPECDEC_OK) st = build_index(s, err);
    if (st != SPECDEC_OK) { sd_st_close(s); return st; }
    *out = s;
    return SPECDEC_OK;
}

specdec_status sd_st_open_buffer(const void *buf, size_t len, const char *name, sd_st_set **out,
                                 specdec_err *err) {
    if (!buf || !name || !out) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "sd_st_open_buffer: NULL argument");
    *out = NULL;
    sd_st_set *s = set_new();
    if (!s) return sd_fail(err, SPECDEC_ERR_NOMEM, "%s: out of memory", name);
    st_file *f = add_file(s, name, err);
    specdec_status st = f ? parse_image(s, f, buf, len, err) : SPECDEC_ERR_NOMEM;
    if (st == SPECDEC_OK) st = build_index(s, err);
    if (st != SPECDEC_OK) { sd_st_close(s); return st; }
    *out = s;
    return SPECDEC_OK;
}

/* Read a whole small file (index.json) into a malloc'ed buffer. */
static specdec_status read_small(const char *path, char **buf, size_t *len, specdec_err *err) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return sd_fail(err, errno == ENOENT ? SPECDEC_ERR_MISSING : SPECDEC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    while (b) {
        size_t r = fread(b + n, 1, cap - n, fp);
        n += r;
        if (n < cap) break;
        if (cap >= ST_MAX_HEADER) { free(b); fclose(fp); return sd_fail(err, SPECDEC_ERR_FORMAT, "%s: file too large", path); }
        char *nb = realloc(b, cap * 2);
        if (!nb) { free(b); b = NULL; break; }
        b = nb;
        cap *= 2;
    }
    int bad = ferror(fp);
    fclose(fp);
    if (!b) return sd_fail(err, SPECDEC_ERR_NOMEM, "%s: out of memory", path);
    if (bad) { free(b); return sd_fail(err, SPECDEC_ERR_IO, "%s: read error", path); }
    *buf = b;
    *len = n;
    return SPECDEC_OK;
}

/* A shard name from weight_map must be a plain file name inside DIR. */
static bool plain_file_name(const char *s) {
    return s[0] && !strchr(s, '/') && !strchr(s, '\\') && !strstr(s, "..");
}

static specdec_status open_index(const char *dir, const char *ipath, sd_st_set *s, specdec_err *err) {
    char *buf = NULL;
    size_t len = 0;
    SD_TRY(read_small(ipath, &buf, &len, err));
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    free(buf);
    if (!root) return sd_fail(err, SPECDEC_ERR_FORMAT, "%s: bad JSON at line %d, column %d: %s", ipath, je.line, je.column, je.text);
    specdec_status st = SPECDEC_OK;
    const char **shards = NULL;
    json_t *wm = json_is_object(root) ? json_object_get(root, "weight_map") : NULL;
    if (!json_is_object(wm)) { st = sd_fail(err, SPECDEC_ERR_FORMAT, "%s: missing \"weight_map\" object", ipath); goto done; }
    size_t cnt = json_object_size(wm);
    if (cnt == 0) { st = sd_fail(err, SPECDEC_ERR_FORMAT, "%s: \"weight_map\" is empty", ipath); goto done; }
    shards = calloc(cnt, sizeof *shards);
    if (!shards) { st = sd_fail(err, SPECDEC_ERR_NOMEM, "%s: out of memory", ipath); goto done; }
    int n_shards = 0;
    const char *key;
    json_t *val;
    /* Pass 1: collect the distinct shard names (first-seen order) and check each. */
    json_object_foreach(wm, key, val) {
        if (!json_is_string(val)) { st = sd_fail(err, SPECDEC_ERR_FORMAT, "%s: weight_map entry for tensor '%s' is not a string", ipath, key); goto done; }
        const char *sh = json_string_value(val);
        if (!plain_file_name(sh)) {
            st = sd_fail(err, SPECDEC_ERR_FORMAT, "%s: tensor '%s': shard name '%s' is not a plain file name", ipath, key, sh);
            goto done;
        }
        int k = 0;
        while (k < n_shards && strcmp(shards[k], sh) != 0) k++;
        if (k == n_shards) shards[n_shards++] = sh;
    }
    /* Open every shard once. */
    for (int k = 0; k < n_shards; k++) {
        char *sp = sd_path_join(dir, shards[k]);
        if (!sp) { st = sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory"); goto done; }
        st = load_file(s, sp, err);
        free(sp);
        if (st != SPECDEC_OK) { sd_err_prefix(err, "%s: shard '%s'", ipath, shards[k]); goto done; }
    }
    if ((st = build_index(s, err)) != SPECDEC_OK) goto done;
    /* Pass 2: every tensor named must be in the shard the map names. */
    json_object_foreach(wm, key, val) {
        const char *sh = json_string_value(val);
        const sd_st_tensor *t = sd_st_find(s, key);
        if (!t) {
            st = sd_fail(err, SPECDEC_ERR_MISSING, "%s: tensor '%s' listed for shard '%s' is not in that shard", ipath, key, sh);
            goto done;
        }
        const char *fp = s->files[t->file].path, *base = strrchr(fp, '/');
        base = base ? base + 1 : fp;
        if (strcmp(base, sh) != 0) {
            st = sd_fail(err, SPECDEC_ERR_FORMAT, "%s: tensor '%s' is listed for shard '%s' but stored in '%s'", ipath, key, sh, base);
            goto done;
        }
    }
done:
    free(shards);
    json_decref(root);
    return st;
}

specdec_status sd_st_open_dir(const char *dir, sd_st_set **out, specdec_err *err) {
    if (!dir || !out) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "sd_st_open_dir: NULL argument");
    *out = NULL;
    char *ipath = sd_path_join(dir, "model.safetensors.index.json");
    char *spath = sd_path_join(dir, "model.safetensors");
    sd_st_set *s = set_new();
    specdec_status st;
    if (!ipath || !spath || !s) { st = sd_fail(err, SPECDEC_ERR_NOMEM, "%s: out of memory", dir); goto done; }
    struct stat sb;
    if (stat(ipath, &sb) == 0) {
        st = open_index(dir, ipath, s, err);
    } else if (stat(spath, &sb) == 0) {
        st = load_file(s, spath, err);
        if (st == SPECDEC_OK) st = build_index(s, err);
    } else {
        st = sd_fail(err, SPECDEC_ERR_MISSING, "%s: neither model.safetensors.index.json nor model.safetensors found", dir);
    }
done:
    free(ipath);
    free(spath);
    if (st != SPECDEC_OK) { sd_st_close(s); return st; }
    *out = s;
    return SPECDEC_OK;
}

void sd_st_close(sd_st_set *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) free((char *)s->t[i].name);
    for (int i = 0; i < s->n_files; i++) {
        if (s->files[i].map) munmap(s->files[i].map, s->files[i].map_len);
        free(s->files[i].path);
    }
    free(s->files);
    free(s->t);
    free(s->by_name);
    free(s);
}

int sd_st_count(const sd_st_set *s) { return s ? s->n : 0; }

const sd_st_tensor *sd_st_at(const sd_st_set *s, int i) {
    return (s && i >= 0 && i < s->n) ? &s->t[i] : NULL;
}

const sd_st_tensor *sd_st_find(const sd_st_set *s, const char *name) {
    if (!s || !name || !s->by_name) return NULL;
    int lo = 0, hi = s->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const sd_st_tensor *t = &s->t[s->by_name[mid].ix];
        int c = strcmp(name, t->name);
        if (c == 0) return t;
        if (c < 0) hi = mid - 1; else lo = mid + 1;
    }
    return NULL;
}

const char *sd_st_file_path(const sd_st_set *s, int i) {
    return (s && i >= 0 && i < s->n_files) ? s->files[i].path : NULL;
}

uint64_t sd_st_total_bytes(const sd_st_set *s) { return s ? s->total_bytes : 0; }

specdec_status sd_st_prefault(const sd_st_set *s, specdec_progress_fn fn, void *user, specdec_err *err) {
    if (!s) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "sd_st_prefault: NULL set");
    const uint64_t page = 4096, report_every = 64ull << 20;
    uint64_t total = 0, done = 0, next_report = report_every;
    for (int i = 0; i < s->n_files; i++) total += s->files[i].map_len;
    volatile uint8_t sink = 0;
    for (int i = 0; i < s->n_files; i++) {
        const volatile uint8_t *p = s->files[i].map;
        size_t len = s->files[i].map_len;
        for (size_t off = 0; off < len; off += page) {
            sink ^= p[off];
            done += (len - off < page) ? len - off : page;
            if (fn && done >= next_report) {
                next_report = done + report_every;
                if (!fn(done, total, user)) return sd_fail(err, SPECDEC_ERR_CANCELLED, "loading cancelled at %llu of %llu bytes",
                                                        (unsigned long long)done, (unsigned long long)total);
            }
        }
    }
    (void)sink;
    if (fn && !fn(total, total, user)) return sd_fail(err, SPECDEC_ERR_CANCELLED, "loading cancelled at the end");
    return SPECDEC_OK;
}
