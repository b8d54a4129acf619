/* nccl_comm.c: the "nccl" communicator (comm.h): one NCCL communicator per GPU of this process
 * (ncclCommInitAll), collectives queued in one group on each rank's CUDA stream (so a CUDA graph
 * capture of those streams records them). Compiled whenever the CUDA backend is built and NCCL
 * (nccl.h, libnccl) is found; otherwise the calls answer that it is not built in.
 *
 * Determinism. The default reduction (tp_backend.c) uses only ncclAllGather, a copy: the sum is
 * then taken by the ranks' own add kernels in rank order, so it is bitwise the same on every rank
 * and for every message size. The ring all-reduce is pinned (NCCL_ALGO=Ring, NCCL_PROTO=Simple,
 * set before ncclCommInitAll unless the user set them) so that its order is the ring's: repeatable
 * from run to run at one size, but its chunk boundaries move with the message size, so at N >= 3 a
 * row's sum depends on T (docs/tensor-parallel.md). NVLink SHARP / multicast stays off
 * (NCCL_NVLS_ENABLE=0): it reduces in the switch, in an order of its own. */
#include "tp/comm.h"
#include "util/err.h"
#include <stdlib.h>

#if defined(SPECDEC_HAVE_CUDA) && defined(SPECDEC_HAVE_NCCL)
#include <cuda_runtime_api.h>
#include <nccl.h>
#include "cuda/cuda_backend.h"

typedef struct nccl_comm {
    sd_comm c;
    ncclComm_t comms[8];
    int dev[8];
} nccl_comm;

int sd_comm_cuda_devices(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) { cudaGetLastError(); return 0; }
    return n;
}

static specdec_status nccl_fail(specdec_err *err, ncclResult_t r, const char *what) {
    return sd_fail(err, SPECDEC_ERR_INTERNAL, "tensor parallel (nccl): %s: %s", what, ncclGetErrorString(r));
}

static void n_enter(sd_comm *c, int r) { cudaSetDevice(((nccl_comm *)c->impl)->dev[r]); }

static specdec_status n_allgather(sd_comm *c, const float *const *send, float *const *recv, size_t n, specdec_err *err) {
    nccl_comm *k = c->impl;
    ncclResult_t r = ncclGroupStart();
    for (int i = 0; i < c->n && r == ncclSuccess; i++) {
        cudaSetDevice(k->dev[i]);
        r = ncclAllGather(send[i], recv[i], n, ncclFloat, k->comms[i], sd_cuda_stream(c->ranks[i]));
    }
    ncclResult_t e = ncclGroupEnd();
    if (r != ncclSuccess) return nccl_fail(err, r, "ncclAllGather");
    if (e != ncclSuccess) return nccl_fail(err, e, "ncclGroupEnd (all-gather)");
    return SPECDEC_OK;
}

static specdec_status n_ring(sd_comm *c, float *const *buf, size_t n, specdec_err *err) {
    nccl_comm *k = c->impl;
    ncclResult_t r = ncclGroupStart();
    for (int i = 0; i < c->n && r == ncclSuccess; i++) {
        cudaSetDevice(k->dev[i]);
        r = ncclAllReduce(buf[i], buf[i], n, ncclFloat, ncclSum, k->comms[i], sd_cuda_stream(c->ranks[i]));
    }
    ncclResult_t e = ncclGroupEnd();
    if (r != ncclSuccess) return nccl_fail(err, r, "ncclAllReduce");
    if (e != ncclSuccess) return nccl_fail(err, e, "ncclGroupEnd (all-reduce)");
    return SPECDEC_OK;
}

static void n_free(sd_comm *c) {
    nccl_comm *k = c->impl;
    for (int i = 0; i < c->n; i++)
        if (k->comms[i]) { cudaSetDevice(k->dev[i]); ncclCommDestroy(k->comms[i]); }
    free(k);
}

static const sd_comm_i nccl_i = {.free = n_free, .enter = n_enter, .allgather = n_allgather, .allreduce_ring = n_ring};

specdec_status sd_comm_nccl_new(sd_backend **ranks, int n, const int *devices, sd_comm **out, specdec_err *err) {
    *out = NULL;
    if (n < 1 || n > 8) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "tensor parallel (nccl): %d ranks (1..8)", n);
    int found = 0;
    cudaError_t ce = cudaGetDeviceCount(&found);
    if (ce != cudaSuccess || found == 0) {
        cudaGetLastError();
        return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "tensor parallel (nccl): no CUDA device (%s)",
                       ce != cudaSuccess ? cudaGetErrorString(ce) : "none visible");
    }
    for (int i = 0; i < n; i++)
        if (devices[i] < 0 || devices[i] >= found)
            return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "tensor parallel (nccl): rank %d wants CUDA device %d; %d visible",
                           i, devices[i], found);
    /* the algorithm and protocol pinned, multicast off: only where the user has not chosen */
    setenv("NCCL_ALGO", "Ring", 0);
    setenv("NCCL_PROTO", "Simple", 0);
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    setenv("NCCL_RUNTIME_CONNECT", "0", 0);   /* connect at init, never inside a graph capture */
    nccl_comm *k = calloc(1, sizeof *k);
    if (!k) return sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) k->dev[i] = devices[i];
    ncclResult_t r = ncclCommInitAll(k->comms, n, devices);
    if (r != ncclSuccess) {
        free(k);
        return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "tensor parallel (nccl): ncclCommInitAll over %d device(s): %s", n,
                       ncclGetErrorString(r));
    }
    k->c.i = &nccl_i;
    k->c.impl = k;
    k->c.name = "nccl";
    k->c.n = n;
    k->c.ranks = ranks;
    k->c.capture_safe = true;
    *out = &k->c;
    return SPECDEC_OK;
}

#elif defined(SPECDEC_HAVE_CUDA)
#include <cuda_runtime_api.h>
int sd_comm_cuda_devices(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) { cudaGetLastError(); return 0; }
    return n;
}
specdec_status sd_comm_nccl_new(sd_backend **ranks, int n, const int *devices, sd_comm **out, specdec_err *err) {
    (void)ranks; (void)n; (void)devices;
    *out = NULL;
    return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "tensor parallel: this binary was built without NCCL (nccl.h / libnccl "
                   "not found at configure time)");
}
#else
int sd_comm_cuda_devices(void) { return 0; }
specdec_status sd_comm_nccl_new(sd_backend **ranks, int n, const int *devices, sd_comm **out, specdec_err *err) {
    (void)ranks; (void)n; (void)devices;
    *out = NULL;
    return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "tensor parallel: the nccl communicator needs the CUDA backend, "
                   "which is not built into this binary");
}
#endif
