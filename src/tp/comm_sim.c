/* comm_sim.c: the "sim" communicator: N ranks on the CPU, the collectives done by the host through
 * the ranks' read / write, in the same order of additions NCCL's ring would use (comm.h), so the
 * CPU simulation of tensor parallelism computes what the GPUs compute. Not a speed path. */
#include "tp/comm.h"
#include "util/err.h"
#include <stdlib.h>
#include <string.h>

typedef struct sim_comm {
    sd_comm c;
    float *tmp;     /* host: n_ranks * cap floats */
    size_t cap;
} sim_comm;

static specdec_status grow(sim_comm *s, size_t n, specdec_err *err) {
    if (n <= s->cap) return SPECDEC_OK;
    float *t = realloc(s->tmp, sizeof(float) * n * (size_t)s->c.n);
    if (!t) return sd_fail(err, SPECDEC_ERR_NOMEM, "tensor parallel (sim): out of memory for %zu floats", n);
    s->tmp = t;
    s->cap = n;
    return SPECDEC_OK;
}

static specdec_status rank_fail(sd_backend *b, specdec_err *err, specdec_status st, const char *what) {
    return sd_be_fail(b, err, st, what);
}

static specdec_status sim_allgather(sd_comm *c, const float *const *send, float *const *recv, size_t n,
                                    specdec_err *err) {
    sim_comm *s = c->impl;
    SD_TRY(grow(s, n, err));
    for (int r = 0; r < c->n; r++) {
        specdec_status st = c->ranks[r]->i->read(c->ranks[r], s->tmp + (size_t)r * n, send[r], sizeof(float) * n, err);
        if (st) return rank_fail(c->ranks[r], err, st, "all-gather read");
    }
    for (int r = 0; r < c->n; r++) {
        specdec_status st = c->ranks[r]->i->write(c->ranks[r], recv[r], s->tmp, sizeof(float) * n * (size_t)c->n, err);
        if (st) return rank_fail(c->ranks[r], err, st, "all-gather write");
    }
    return SPECDEC_OK;
}

/* NCCL's ring on one channel for a message shorter than one loop: chunkCount =
 * alignUp(divUp(n, nranks), 16 bytes / sizeof(float)) (src/device/all_reduce.h, runRing). */
void sd_comm_ring_chunk(size_t n, int ranks, int k, size_t *k0, size_t *k1) {
    size_t chunk = (n + (size_t)ranks - 1) / (size_t)ranks;
    chunk = (chunk + 3) / 4 * 4;
    *k0 = chunk * (size_t)k < n ? chunk * (size_t)k : n;
    *k1 = *k0 + chunk < n ? *k0 + chunk : n;
}

static specdec_status sim_ring(sd_comm *c, float *const *buf, size_t n, specdec_err *err) {
    sim_comm *s = c->impl;
    int N = c->n;
    SD_TRY(grow(s, n, err));
    for (int r = 0; r < N; r++) {
        specdec_status st = c->ranks[r]->i->read(c->ranks[r], s->tmp + (size_t)r * n, buf[r], sizeof(float) * n, err);
        if (st) return rank_fail(c->ranks[r], err, st, "all-reduce read");
    }
    /* Reduce-scatter: chunk k leaves rank (k+1) mod N, each next rank on the ring adds its own
     * values to what arrives (acc + own; IEEE addition commutes, so only the association matters),
     * ending at rank k, which then holds the sum; the all-gather copies it round unchanged. */
    float *out = s->tmp;   /* the sums overwrite rank 0's row once every chunk has read it */
    float *acc = malloc(sizeof(float) * (n ? n : 1));
    if (!acc) return sd_fail(err, SPECDEC_ERR_NOMEM, "tensor parallel (sim): out of memory");
    for (int k = 0; k < N; k++) {
        size_t k0, k1;
        sd_comm_ring_chunk(n, N, k, &k0, &k1);
        int first = (k + 1) % N;
        for (size_t e = k0; e < k1; e++) acc[e] = s->tmp[(size_t)first * n + e];
        for (int step = 2; step <= N; step++) {
            int r = (k + step) % N;
            for (size_t e = k0; e < k1; e++) acc[e] = acc[e] + s->tmp[(size_t)r * n + e];
        }
    }
    memcpy(out, acc, sizeof(float) * n);
    free(acc);
    for (int r = 0; r < N; r++) {
        specdec_status st = c->ranks[r]->i->write(c->ranks[r], buf[r], out, sizeof(float) * n, err);
        if (st) return rank_fail(c->ranks[r], err, st, "all-reduce write");
    }
    return SPECDEC_OK;
}

static void sim_free(sd_comm *c) {
    sim_comm *s = c->impl;
    free(s->tmp);
    free(s);
}

static const sd_comm_i sim_i = {.free = sim_free, .enter = NULL, .allgather = sim_allgather, .allreduce_ring = sim_ring};

specdec_status sd_comm_sim_new(sd_backend **ranks, int n, sd_comm **out, specdec_err *err) {
    *out = NULL;
    sim_comm *s = calloc(1, sizeof *s);
    if (!s) return sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory");
    s->c.i = &sim_i;
    s->c.impl = s;
    s->c.name = "sim";
    s->c.n = n;
    s->c.ranks = ranks;
    s->c.capture_safe = false;   /* host work between ops: nothing a recording could hold */
    *out = &s->c;
    return SPECDEC_OK;
}
