/* outdir.c: the model-directory output protocol of outdir.h (temporary sibling, rename into place)
 * and the file helpers the writers of model directories share. */
#include "io/outdir.h"
#include "util/path.h"
#include "util/err.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

specdec_status sd_outdir_init(sd_outdir *o, const char *out_dir, specdec_err *err) {
    memset(o, 0, sizeof *o);
    if (!out_dir || !*out_dir) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "output directory: NULL or empty name");
    /* OUT without trailing slashes, so the temporary sibling is OUT.tmp-XXXXXX next to it. */
    size_t ol = strlen(out_dir);
    while (ol > 1 && out_dir[ol - 1] == '/') ol--;
    o->out = malloc(ol + 1);
    if (!o->out) return sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory");
    memcpy(o->out, out_dir, ol);
    o->out[ol] = 0;
    struct stat sb;
    if (stat(o->out, &sb) != 0) {
        if (errno == ENOENT) return SPECDEC_OK;
        return sd_fail(err, SPECDEC_ERR_IO, "%s: cannot stat: %s", o->out, strerror(errno));
    }
    if (!S_ISDIR(sb.st_mode)) return sd_fail(err, SPECDEC_ERR_IO, "%s: exists and is not a directory; refusing to overwrite it", o->out);
    DIR *d = opendir(o->out);
    if (!d) return sd_fail(err, SPECDEC_ERR_IO, "%s: cannot list: %s", o->out, strerror(errno));
    bool empty = true;
    for (struct dirent *de; empty && (de = readdir(d));)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) empty = false;
    closedir(d);
    if (!empty) return sd_fail(err, SPECDEC_ERR_IO, "%s: exists and is not empty; refusing to overwrite it", o->out);
    return SPECDEC_OK;
}

specdec_status sd_outdir_mktemp(sd_outdir *o, specdec_err *err) {
    size_t n = strlen(o->out) + 16;
    o->tmp = malloc(n);
    if (!o->tmp) return sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory");
    snprintf(o->tmp, n, "%s.tmp-XXXXXX", o->out);
    if (!mkdtemp(o->tmp)) return sd_fail(err, SPECDEC_ERR_IO, "%s: cannot create temporary directory: %s", o->tmp, strerror(errno));
    o->made = true;
    return SPECDEC_OK;
}

specdec_status sd_outdir_commit(sd_outdir *o, specdec_err *err) {
    (void)chmod(o->tmp, 0755); /* mkdtemp makes it 0700; a model directory is normally world-readable */
    if (rename(o->tmp, o->out) != 0)
        return sd_fail(err, SPECDEC_ERR_IO, "%s: cannot rename %s into place: %s", o->out, o->tmp, strerror(errno));
    o->made = false;
    /* make the rename durable: sync the parent directory */
    char *slash = strrchr(o->out, '/');
    if (slash) *slash = 0;
    int dfd = open(slash ? (*o->out ? o->out : "/") : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (slash) *slash = '/';
    if (dfd >= 0) { fsync(dfd); close(dfd); }
    return SPECDEC_OK;
}

/* Remove the files of our (flat) temporary directory, then the directory. */
void sd_outdir_end(sd_outdir *o) {
    if (o->made) {
        DIR *d = opendir(o->tmp);
        if (d) {
            for (struct dirent *de; (de = readdir(d));) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
                char *p = sd_path_join(o->tmp, de->d_name);
                if (p) unlink(p);
                free(p);
            }
            closedir(d);
        }
        rmdir(o->tmp);
    }
    free(o->out);
    free(o->tmp);
    memset(o, 0, sizeof *o);
}

specdec_status sd_write_file_synced(const char *path, const void *data, size_t len, specdec_err *err) {
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

specdec_status sd_write_json_synced(const char *path, const json_t *root, specdec_err *err) {
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!text) return sd_fail(err, SPECDEC_ERR_NOMEM, "%s: cannot serialize", path);
    size_t n = strlen(text);
    char *t2 = realloc(text, n + 2);
    if (!t2) { free(text); return sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory"); }
    t2[n] = '\n';
    t2[n + 1] = 0;
    specdec_status st = sd_write_file_synced(path, t2, n + 1, err);
    free(t2);
    return st;
}

specdec_status sd_rewrite_config(const char *in_dir, const char *out_dir, void (*edit)(json_t *root, void *user), void *user,
                                 specdec_err *err) {
    char *src = sd_path_join(in_dir, "config.json"), *dst = sd_path_join(out_dir, "config.json");
    json_error_t je;
    json_t *root = src ? json_load_file(src, JSON_REJECT_DUPLICATES, &je) : NULL;
    specdec_status st = SPECDEC_OK;
    if (!src || !dst) st = sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory");
    else if (!json_is_object(root)) st = sd_fail(err, SPECDEC_ERR_FORMAT, "%s: cannot re-read: %s", src, je.text);
    if (st == SPECDEC_OK) {
        edit(root, user);
        st = sd_write_json_synced(dst, root, err);
    }
    json_decref(root);
    free(src);
    free(dst);
    return st;
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

specdec_status sd_copy_side_files(const char *in, const char *out, bool (*keep)(const char *name), specdec_err *err) {
    DIR *d = opendir(in);
    if (!d) return sd_fail(err, SPECDEC_ERR_IO, "%s: cannot list: %s", in, strerror(errno));
    specdec_status st = SPECDEC_OK;
    for (struct dirent *de; st == SPECDEC_OK && (de = readdir(d));) {
        const char *n = de->d_name;
        if (!strcmp(n, ".") || !strcmp(n, "..") || !keep(n)) continue;
        char *src = sd_path_join(in, n), *dst = sd_path_join(out, n);
        struct stat sb;
        if (!src || !dst) st = sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory");
        else if (stat(src, &sb) == 0 && S_ISREG(sb.st_mode)) st = copy_file(src, dst, err);
        free(src);
        free(dst);
    }
    closedir(d);
    return st;
}
