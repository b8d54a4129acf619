/* tp_backend.h: the tensor-parallel backend: N rank backends (cuda over NCCL, or cpu / cpu-sim over
 * the CPU simulation) behind the one backend table, so the model, the round and the drafters run
 * unchanged (docs/tensor-parallel.md). Every buffer exists once per rank; the pointers handed out
 * are rank 0's, and each op runs on every rank with its pointers translated to that rank's buffer
 * (offsets preserved). Replicated work (embedding, norms, LM head, the walk, the sampler) runs on
 * every rank on identical data, so every rank keeps the same positions and ids without traffic;
 * results are read back from rank 0. Sharded weights come through upload_ranks, partial sums are
 * combined by allreduce. */
#ifndef SD_TP_BACKEND_H
#define SD_TP_BACKEND_H
#include "backend/backend.h"

typedef enum sd_tp_reduce {
    SD_TP_REDUCE_GATHER = 0,   /* all-gather of the partials, then x = ((p0 + p1) + p2) + ... on every rank */
    SD_TP_REDUCE_RING = 1,     /* the ring all-reduce (NCCL's, or its simulation): not batch-invariant at N >= 3 */
    SD_TP_REDUCE_NONE = 2,     /* no reduction: wrong outputs, for timing what the reduction costs */
} sd_tp_reduce;

typedef struct sd_tp_opts {
    int n;                     /* ranks, 1..SD_TP_MAX */
    const char *rank_backend;  /* "cpu", "cpu-sim", "cuda" or "auto" */
    sd_tp_reduce reduce;
} sd_tp_opts;

/* Counters of the all-reduces (specdec.h's specdec_tp_stats). */
typedef struct sd_tp_counters {
    uint64_t calls, floats;    /* all-reduces run, floats reduced per rank */
    double ms;                 /* host time inside them (on a device: the time to queue them) */
} sd_tp_counters;

/* Create the backend: ranks of o->rank_backend (cuda: devices o->device .. o->device+n-1, each
 * needing a GPU: fewer visible is SPECDEC_ERR_UNSUPPORTED saying how many were found). */
specdec_status sd_backend_tp_new(const sd_tp_opts *t, const sd_backend_opts *o, sd_backend **out, specdec_err *err);
/* The counters of a tensor-parallel backend (zeros for another backend). */
void sd_backend_tp_counters(const sd_backend *b, sd_tp_counters *out);
/* "nccl" or "sim" (NULL for another backend). */
const char *sd_backend_tp_comm(const sd_backend *b);

#endif
