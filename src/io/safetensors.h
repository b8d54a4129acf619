/* safetensors.h: read-only access to safetensors files (mmapped) and a writer.
 *
 * A set gathers one file (model.safetensors) or the shards named by
 * model.safetensors.index.json. Everything is validated before any tensor is handed out:
 * header length within the file, JSON well-formed, dtype known, byte size equal to
 * shape x dtype, offsets inside the data section and not overlapping, and (for shards) every
 * tensor of the weight_map present in the shard that the map names. */
#ifndef SD_SAFETENSORS_H
#define SD_SAFETENSORS_H
#include <stddef.h>
#include <stdint.h>
#include "specdec.h"

#define SD_ST_MAX_DIMS 8

typedef struct sd_st_tensor {
    const char *name;
    specdec_dtype dtype;
    int ndim;
    int64_t shape[SD_ST_MAX_DIMS];
    const void *data;        /* points into the mapping */
    uint64_t nbytes;
    int file;                /* index into the set's files */
} sd_st_tensor;

typedef struct sd_st_set sd_st_set;

/* Open `path` (one .safetensors file). */
specdec_status sd_st_open_file(const char *path, sd_st_set **out, specdec_err *err);
/* Open a model directory: DIR/model.safetensors.index.json if present, else DIR/model.safetensors. */
specdec_status sd_st_open_dir(const char *dir, sd_st_set **out, specdec_err *err);
/* Validate an in-memory safetensors image (the bytes of one file) exactly as a mapped file is
 * validated; `name` stands for the file in messages. The set borrows buf: it must outlive the set.
 * (The parser's fuzz target calls this; files go through the same code on their mapping.) */
specdec_status sd_st_open_buffer(const void *buf, size_t len, const char *name, sd_st_set **out,
                                 specdec_err *err);
void sd_st_close(sd_st_set *s);

int sd_st_count(const sd_st_set *s);
const sd_st_tensor *sd_st_at(const sd_st_set *s, int i);
/* NULL when absent. */
const sd_st_tensor *sd_st_find(const sd_st_set *s, const char *name);
/* Path of file i (for messages). */
const char *sd_st_file_path(const sd_st_set *s, int i);
/* Sum of tensor bytes. */
uint64_t sd_st_total_bytes(const sd_st_set *s);
/* Touch every page of the mapping in order, reporting progress (for "Loading..." bars and to
 * fault the weights in before timing). Returns SPECDEC_ERR_CANCELLED if progress says stop. */
specdec_status sd_st_prefault(const sd_st_set *s, specdec_progress_fn fn, void *user, specdec_err *err);

/* ---- writer ---- */
typedef struct sd_st_writer sd_st_writer;
sd_st_writer *sd_st_writer_new(void);
/* Register a tensor; `data` must stay valid until sd_st_writer_write. The writer copies name. */
specdec_status sd_st_writer_add(sd_st_writer *w, const char *name, specdec_dtype dt, int ndim,
                                const int64_t *shape, const void *data, specdec_err *err);
/* Write into directory `dir` as model.safetensors, or, when max_shard_bytes > 0 and the data
 * exceed it, as model-0000i-of-0000n.safetensors shards plus model.safetensors.index.json.
 * Tensors are written in the order added. */
specdec_status sd_st_writer_write(sd_st_writer *w, const char *dir, uint64_t max_shard_bytes,
                                  specdec_err *err);
void sd_st_writer_free(sd_st_writer *w);
/* Register a tensor whose bytes are written later through a stream (no buffer now). */
specdec_status sd_st_writer_plan(sd_st_writer *w, const char *name, specdec_dtype dt, int ndim,
                                 const int64_t *shape, specdec_err *err);
int sd_st_writer_count(const sd_st_writer *w);
/* Bytes of tensor i (in the order added). */
uint64_t sd_st_writer_nbytes(const sd_st_writer *w, int i);

/* ---- streaming writer: the layout of w's tensors fixed first, their bytes written later ---- */
typedef struct sd_st_stream sd_st_stream;
/* Create DIR's files for the tensors of w (sharded as sd_st_writer_write does), as .tmp files of
 * their full size with their headers written. w must stay alive and unchanged until finish/abort. */
specdec_status sd_st_stream_open(const sd_st_writer *w, const char *dir, uint64_t max_shard_bytes,
                                 sd_st_stream **out, specdec_err *err);
int sd_st_stream_shards(const sd_st_stream *s);
/* Write n bytes at byte `off` of tensor i's data. Positioned writes: threads may write different
 * ranges at once. */
specdec_status sd_st_stream_pwrite(sd_st_stream *s, int i, uint64_t off, const void *buf, size_t n,
                                   specdec_err *err);
/* fsync the files, write the index when sharded, rename everything into place (index last); frees s. */
specdec_status sd_st_stream_finish(sd_st_stream *s, specdec_err *err);
/* Remove the temporary files; frees s (NULL accepted). */
void sd_st_stream_abort(sd_st_stream *s);

#endif
