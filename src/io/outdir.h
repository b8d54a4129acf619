/* outdir.h: writing a model directory without ever replacing good data. OUT must be absent or an
 * empty directory; the files are built in a sibling OUT.tmp-XXXXXX that is renamed into place only
 * when everything is written and synced, and removed on failure. Shared by the quantizer and the
 * inflation tool, with the side-file copy and the synced JSON write they both need. */
#ifndef SD_OUTDIR_H
#define SD_OUTDIR_H
#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>
#include "specdec.h"

typedef struct sd_outdir {
    char *out;   /* OUT without trailing slashes */
    char *tmp;   /* the temporary sibling, once made */
    bool made;   /* tmp exists and is ours to remove */
} sd_outdir;

/* Record OUT and check that it is absent or an empty directory (anything else is refused,
 * naming it). Call sd_outdir_end whatever the result. */
specdec_status sd_outdir_init(sd_outdir *o, const char *out_dir, specdec_err *err);
/* Create the temporary sibling o->tmp. */
specdec_status sd_outdir_mktemp(sd_outdir *o, specdec_err *err);
/* Rename o->tmp into place (world-readable, the rename made durable). */
specdec_status sd_outdir_commit(sd_outdir *o, specdec_err *err);
/* Remove the temporary sibling if it is still there; free the names. */
void sd_outdir_end(sd_outdir *o);

/* Write len bytes to path (created or truncated), fsync, close. */
specdec_status sd_write_file_synced(const char *path, const void *data, size_t len, specdec_err *err);
/* root serialized with 2-space indentation, keys in their order, and a final newline. */
specdec_status sd_write_json_synced(const char *path, const json_t *root, specdec_err *err);
/* Write out_dir/config.json: in_dir/config.json (keys in their order) after edit(root, user). */
specdec_status sd_rewrite_config(const char *in_dir, const char *out_dir, void (*edit)(json_t *root, void *user), void *user,
                                 specdec_err *err);
/* Copy the regular files of directory `in` (symlinks followed, as in an HF cache) whose name
 * `keep` accepts into `out`. */
specdec_status sd_copy_side_files(const char *in, const char *out, bool (*keep)(const char *name), specdec_err *err);

#endif
