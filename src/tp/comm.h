/* comm.h: the collective a tensor-parallel backend (tp_backend.c) needs between its N ranks, with
 * two implementations: "nccl" (src/cuda/nccl_comm.c: one communicator per GPU from
 * ncclCommInitAll, collectives queued on each rank's CUDA stream, capture-safe) and "sim"
 * (comm_sim.c: ranks on the CPU, data moved through the ranks' read / write). Buffers are backend
 * memory of the rank named by the index. */
#ifndef SD_TP_COMM_H
#define SD_TP_COMM_H
#include <stdbool.h>
#include <stddef.h>
#include "specdec.h"
#include "backend/backend.h"

typedef struct sd_comm sd_comm;

typedef struct sd_comm_i {
    void (*free)(sd_comm *c);
    /* Make rank r's device current before ops are queued on it (NULL: nothing to do). */
    void (*enter)(sd_comm *c, int r);
    /* recv[r] (n_ranks * n floats) = send[0] | send[1] | ... | send[n_ranks-1] (n floats each), on
     * every rank: a pure copy, so the values cannot depend on the transport. */
    specdec_status (*allgather)(sd_comm *c, const float *const *send, float *const *recv, size_t n, specdec_err *err);
    /* buf[r] (n floats) = the sum over ranks, in place, in the order of a ring all-reduce
     * (docs/tensor-parallel.md: element chunk k starts at rank (k+1) mod N and goes round the ring). */
    specdec_status (*allreduce_ring)(sd_comm *c, float *const *buf, size_t n, specdec_err *err);
} sd_comm_i;

struct sd_comm {
    const sd_comm_i *i;
    void *impl;
    const char *name;        /* "nccl", "sim" */
    int n;                   /* ranks */
    sd_backend **ranks;      /* borrowed: the tensor-parallel backend's ranks */
    bool capture_safe;       /* its collectives may be queued inside a recording (CUDA graph capture) */
};

/* The simulation over ranks on the CPU (cpu or cpu-sim backends). */
specdec_status sd_comm_sim_new(sd_backend **ranks, int n, sd_comm **out, specdec_err *err);
/* NCCL over CUDA backends on devices[0..n-1] (one communicator per rank, ncclCommInitAll). Sets
 * NCCL_ALGO=Ring, NCCL_PROTO=Simple and NCCL_NVLS_ENABLE=0 before initialisation unless the user
 * set them. Without the CUDA backend built in, or without a device, SPECDEC_ERR_UNSUPPORTED. */
specdec_status sd_comm_nccl_new(sd_backend **ranks, int n, const int *devices, sd_comm **out, specdec_err *err);
/* CUDA devices visible to this process (0 without the CUDA backend or a driver). */
int sd_comm_cuda_devices(void);

/* The element range [*k0, *k1) of ring chunk k of n floats over `ranks` ranks (NCCL's chunking on
 * one channel within one loop; empty ranges at the end when n is small). */
void sd_comm_ring_chunk(size_t n, int ranks, int k, size_t *k0, size_t *k1);

#endif
