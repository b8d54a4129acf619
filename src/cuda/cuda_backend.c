/* cuda_backend.c: the CUDA backend object (src/backend/backend.h's table, the ops in
 * cuda_ops.c): device choice, device memory (plain cudaMalloc, zero-filled, out-of-memory named
 * with the free/total memory), uploads through a pinned double buffer, writes through a pinned
 * ring and reads through a pinned buffer on the backend's one non-blocking stream, op scratch
 * sized by reserve(), and recordings: seq_begin/seq_end capture the bracketed ops into a CUDA
 * graph (thread-local stream capture) that later calls with the same key replay.
 *
 * Rules that keep recordings valid: no op allocates or synchronizes while capturing (scratch
 * comes from reserve(); an op that would grow it fails instead), host transfers are refused
 * inside a recording, and anything that frees or moves device memory a graph may point at
 * (release, unload, a scratch growth) first drops every recording. Every CUDA call is checked;
 * the library never prints and never exits. */
#include "cuda/cuda_be.h"
#include "cuda/cuda_backend.h"
#include "cuda/argmax.h"
#include "cuda/matmul.h"
#include "cuda/sample.h"
#include "cuda/attention.h"
#include "util/err.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CU_RING_BYTES ((size_t)4 << 20)    /* write staging */
#define CU_RBUF_BYTES ((size_t)4 << 20)    /* read staging */
#define CU_UP_BYTES ((size_t)32 << 20)     /* each of the two upload buffers */
#define CU_MM_SMEM (96 << 10)              /* matmul x tile budget (opted in per kernel) */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

/* ---- errors ---- */

specdec_status cu_errf(cuda_be *c, specdec_err *err, specdec_status st, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sd_fail(err, st, "cuda device %d (%s): %s", c->device, c->dev_name, msg);
}

static specdec_status status_of(cudaError_t e) {
    if (e == cudaErrorMemoryAllocation) return SPECDEC_ERR_NOMEM;
    if (e == cudaErrorInvalidValue || e == cudaErrorInvalidConfiguration) return SPECDEC_ERR_INVALID_ARG;
    return SPECDEC_ERR_INTERNAL;
}

void cu_abandon(cuda_be *c) {
    if (!c->capturing) return;
    cudaGraph_t g = NULL;
    cudaStreamEndCapture(c->dev.stream, &g);
    if (g) cudaGraphDestroy(g);
    cudaGetLastError();
    c->capturing = false;
    c->abandoned = true;
    c->abandoned_key = c->cap_key;
}

specdec_status cu_cuda_fail(cuda_be *c, specdec_err *err, cudaError_t e, const char *what) {
    cu_abandon(c);
    cudaGetLastError();   /* clear a non-sticky error; a sticky one stays for every later call */
    return cu_errf(c, err, status_of(e), "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

/* Refuse a call that may not run inside a recording (it would synchronize or move host data). */
static specdec_status no_capture(cuda_be *c, specdec_err *err, const char *what) {
    if (!c->capturing) return SPECDEC_OK;
    uint64_t key = c->cap_key;
    cu_abandon(c);
    return cu_errf(c, err, SPECDEC_ERR_INVALID_ARG,
                   "%s inside the recording of key %#llx (host transfers, allocation and synchronization "
                   "must stay outside seq_begin/seq_end); the recording was dropped",
                   what, (unsigned long long)key);
}

static specdec_status nomem(cuda_be *c, specdec_err *err, const char *what, size_t bytes) {
    cudaGetLastError();
    size_t fr = 0, tot = 0;
    cudaMemGetInfo(&fr, &tot);
    return cu_errf(c, err, SPECDEC_ERR_NOMEM,
                   "out of device memory for %s: %zu bytes (%.1f MiB) asked, %zu MiB free of %zu MiB",
                   what ? what : "a buffer", bytes, (double)bytes / 1048576.0, fr >> 20, tot >> 20);
}

static specdec_status take_deferred(cuda_be *c, specdec_err *err) {
    if (c->deferred.status == SPECDEC_OK) return SPECDEC_OK;
    specdec_status st = c->deferred.status;
    if (err) *err = c->deferred;
    c->deferred.status = SPECDEC_OK;
    c->deferred.msg[0] = 0;
    return st;
}

specdec_status cu_op_begin(cuda_be *c) { return take_deferred(c, &c->b.err); }

specdec_status cu_op_end(cuda_be *c, cudaError_t e, const char *op) {
    if (e != cudaSuccess) return cu_cuda_fail(c, &c->b.err, e, op);
    c->b.stats.ops++;
    if (c->capturing) c->cap_ops++;
    return SPECDEC_OK;
}

/* ---- recordings ---- */

static void graphs_clear(cuda_be *c) {
    if (!c->n_graphs) return;
    cudaStreamSynchronize(c->dev.stream);   /* none may be running while destroyed */
    for (int i = 0; i < c->n_graphs; i++) cudaGraphExecDestroy(c->graphs[i].exec);
    c->n_graphs = 0;
    cudaGetLastError();
}

static bool cu_seq_begin(sd_backend *b, uint64_t key) {
    cuda_be *c = cu_of(b);
    if (c->capturing || c->deferred.status != SPECDEC_OK) return false;   /* nested: part of the outer one */
    for (int i = 0; i < c->n_graphs; i++) {
        cu_graph *g = &c->graphs[i];
        if (g->key != key) continue;
        cudaError_t e = cudaGraphLaunch(g->exec, c->dev.stream);
        if (e != cudaSuccess) {
            /* the ops did not run: the caller learns it from its next op, read or sync */
            cu_cuda_fail(c, &c->deferred, e, "replaying a recording");
            return true;
        }
        g->last = ++c->clock;
        b->stats.seq_replayed++;
        b->stats.ops += g->ops;
        b->stats.graph_kernels += g->kernels;
        return true;
    }
    if (cudaSetDevice(c->device) != cudaSuccess ||
        cudaStreamBeginCapture(c->dev.stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        cudaGetLastError();
        return false;   /* the ops run as they come */
    }
    c->capturing = true;
    c->cap_key = key;
    c->cap_ops = 0;
    c->abandoned = false;
    return false;
}

/* Kernel nodes of a captured graph (launches per replay; 0 when the runtime cannot list them). */
static uint64_t graph_kernels(cudaGraph_t graph) {
    size_t n = 0;
    if (cudaGraphGetNodes(graph, NULL, &n) != cudaSuccess || n == 0) {
        cudaGetLastError();
        return 0;
    }
    cudaGraphNode_t *nodes = malloc(n * sizeof *nodes);
    uint64_t k = 0;
    if (nodes && cudaGraphGetNodes(graph, nodes, &n) == cudaSuccess) {
        for (size_t i = 0; i < n; i++) {
            enum cudaGraphNodeType t;
            if (cudaGraphNodeGetType(nodes[i], &t) == cudaSuccess && t == cudaGraphNodeTypeKernel) k++;
        }
    }
    cudaGetLastError();
    free(nodes);
    return k;
}

static specdec_status cu_seq_end(sd_backend *b, uint64_t key, specdec_err *err) {
    cuda_be *c = cu_of(b);
    if (!c->capturing) {
        if (c->abandoned && c->abandoned_key == key) {
            c->abandoned = false;
            return cu_errf(c, err, SPECDEC_ERR_INTERNAL, "the recording of key %#llx was dropped after an op in it failed",
                           (unsigned long long)key);
        }
        return SPECDEC_OK;   /* capture never started: the ops already ran */
    }
    if (key != c->cap_key) return SPECDEC_OK;   /* a nested bracket */
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamEndCapture(c->dev.stream, &graph);
    c->capturing = false;
    if (e != cudaSuccess) {
        if (graph) cudaGraphDestroy(graph);
        return cu_cuda_fail(c, err, e, "ending a recording");
    }
    const uint64_t kernels = graph_kernels(graph);
    cudaGraphExec_t ex = NULL;
    e = cudaGraphInstantiate(&ex, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess) return cu_cuda_fail(c, err, e, "instantiating a recording");
    e = cudaGraphLaunch(ex, c->dev.stream);   /* capture queued nothing: run it now */
    if (e != cudaSuccess) {
        cudaGraphExecDestroy(ex);
        return cu_cuda_fail(c, err, e, "launching a new recording");
    }
    if (c->n_graphs == CU_MAX_GRAPHS) {
        int lru = 0;
        for (int i = 1; i < c->n_graphs; i++)
            if (c->graphs[i].last < c->graphs[lru].last) lru = i;
        cudaStreamSynchronize(c->dev.stream);
        cudaGraphExecDestroy(c->graphs[lru].exec);
        c->graphs[lru] = c->graphs[--c->n_graphs];
    }
    cu_graph *g = &c->graphs[c->n_graphs++];
    g->key = key;
    g->exec = ex;
    g->ops = c->cap_ops;
    g->kernels = kernels;
    b->stats.graph_kernels += kernels;   /* it ran once at its recording */
    g->last = ++c->clock;
    b->stats.seq_recorded++;
    return SPECDEC_OK;
}

static void cu_seq_reset(sd_backend *b) {
    cuda_be *c = cu_of(b);
    cu_abandon(c);
    graphs_clear(c);
}

/* ---- scratch ---- */

specdec_status cu_scratch(cuda_be *c, cu_buf *buf, size_t bytes, const char *what, specdec_err *err) {
    if (bytes <= buf->cap) return SPECDEC_OK;
    if (c->capturing) {
        uint64_t key = c->cap_key;
        cu_abandon(c);
        return cu_errf(c, err, SPECDEC_ERR_INVALID_ARG,
                       "%s scratch of %zu bytes needed inside the recording of key %#llx, %zu reserved "
                       "(reserve() with this many rows / this vocabulary before recording)",
                       what, bytes, (unsigned long long)key, buf->cap);
    }
    cudaSetDevice(c->device);
    graphs_clear(c);   /* they may point at the old buffer */
    cudaError_t e = cudaStreamSynchronize(c->dev.stream);
    if (e != cudaSuccess) return cu_cuda_fail(c, err, e, what);
    if (buf->p) cudaFree(buf->p);
    buf->p = NULL;
    buf->cap = 0;
    e = cudaMalloc(&buf->p, bytes);
    if (e != cudaSuccess) {
        buf->p = NULL;
        char w[96];
        snprintf(w, sizeof w, "%s scratch", what);
        return nomem(c, err, w, bytes);
    }
    /* zeros to start with: the attention's per-call counters rely on it */
    if ((e = cudaMemsetAsync(buf->p, 0, bytes, c->dev.stream)) != cudaSuccess ||
        (e = cudaStreamSynchronize(c->dev.stream)) != cudaSuccess)
        return cu_cuda_fail(c, err, e, what);
    buf->cap = bytes;
    return SPECDEC_OK;
}

size_t cu_rowpart_bytes(int T, int n) {
    size_t nb = (size_t)sdc_argmax_blocks(n), ns = (size_t)sdc_sample_blocks(n);
    size_t a = (size_t)T * nb * sizeof(sdc_best);
    size_t s = (size_t)T * ns * (sizeof(sdc_best) + sizeof(sdc_dbest)) + 16;
    return a > s ? a : s;
}

size_t cu_lma_bytes(int T) {
    if (T > SDC_LMA_MAX_T) T = SDC_LMA_MAX_T;
    return (size_t)T * SDC_LMA_MAX_GRID * sizeof(sdc_best);
}

static specdec_status cu_reserve(sd_backend *b, const sd_attn_shape *s, int max_T, int n_ctx, int vocab,
                                 specdec_err *err) {
    cuda_be *c = cu_of(b);
    (void)n_ctx;   /* the attention scratch does not grow with the context (fixed split slots) */
    SD_TRY(take_deferred(c, err));
    SD_TRY(no_capture(c, err, "reserve"));
    if (max_T < 1) max_T = 1;
    if (s && s->n_heads > 0 && s->head_dim > 0) {
        SD_TRY(cu_scratch(c, &c->attn, sdc_attn_scratch_floats(max_T, s->n_heads, s->head_dim) * sizeof(float),
                          "attention", err));
        SD_TRY(cu_scratch(c, &c->attn_cnt, (size_t)max_T * (size_t)s->n_heads * sizeof(int), "attention counters", err));
    }
    if (vocab > 0) SD_TRY(cu_scratch(c, &c->rowpart, cu_rowpart_bytes(max_T, vocab), "argmax/sampler", err));
    SD_TRY(cu_scratch(c, &c->lma, cu_lma_bytes(max_T), "fused LM head", err));
    if (c->i8) {   /* the widest row int8 takes (sd_i8_applies: 32768 columns), 4-bit's layout the larger */
        SD_TRY(cu_scratch(c, &c->i8x, sdc_mm_i8_xq_bytes(SDC_MM_Q4I, 32768, max_T), "int8 activations", err));
        SD_TRY(cu_scratch(c, &c->i8s, sdc_mm_i8_xsd_bytes(SDC_MM_Q8I, 32768, max_T), "int8 block scales", err));
        SD_TRY(cu_scratch(c, &c->i8x2, sdc_mm_i8_xq_bytes(SDC_MM_Q4I, 32768, 8), "int8 MLP activations", err));
        SD_TRY(cu_scratch(c, &c->i8s2, sdc_mm_i8_xsd_bytes(SDC_MM_Q4I, 32768, 8), "int8 MLP block scales", err));
    }
    return SPECDEC_OK;
}

/* ---- memory ---- */

/* Bytes actually allocated for a buffer of `bytes`: whole 16-byte units (at least one), so a
 * kernel may read the aligned word or vector holding a buffer's last element (matmul's scales). */
static size_t cu_alloc_size(size_t bytes) { return bytes ? (bytes + 15) & ~(size_t)15 : 16; }

static specdec_status cu_alloc(sd_backend *b, size_t bytes, const char *what, void **out, specdec_err *err) {
    cuda_be *c = cu_of(b);
    *out = NULL;
    SD_TRY(no_capture(c, err, "alloc"));
    cudaSetDevice(c->device);
    void *p = NULL;
    if (cudaMalloc(&p, cu_alloc_size(bytes)) != cudaSuccess) return nomem(c, err, what, bytes);
    cudaError_t e = bytes ? cudaMemsetAsync(p, 0, bytes, c->dev.stream) : cudaSuccess;
    if (e != cudaSuccess) {
        cudaFree(p);
        return cu_cuda_fail(c, err, e, "alloc (zero fill)");
    }
    *out = p;
    return SPECDEC_OK;
}

static void free_dev(cuda_be *c, const void *p) {
    if (!p) return;
    if (c->capturing) {
        cu_abandon(c);
        cu_errf(c, &c->deferred, SPECDEC_ERR_INVALID_ARG, "a buffer was released inside a recording (dropped)");
    }
    cudaSetDevice(c->device);
    graphs_clear(c);   /* a recording may point at p */
    cudaFree((void *)p);
    cudaGetLastError();
}

static void cu_release(sd_backend *b, void *p) { free_dev(cu_of(b), p); }
static void cu_unload(sd_backend *b, const void *p) { free_dev(cu_of(b), p); }

/* The pinned upload buffers, once; without them uploads fall back to pageable copies. */
static void upload_buffers(cuda_be *c) {
    if (c->up_tried) return;
    c->up_tried = true;
    for (int i = 0; i < 2; i++) {
        if (cudaHostAlloc((void **)&c->up[i], CU_UP_BYTES, cudaHostAllocDefault) != cudaSuccess ||
            cudaEventCreateWithFlags(&c->up_ev[i], cudaEventDisableTiming) != cudaSuccess) {
            cudaGetLastError();
            for (int j = 0; j <= i; j++) {
                if (c->up[j]) cudaFreeHost(c->up[j]);
                c->up[j] = NULL;
            }
            if (i == 1) cudaEventDestroy(c->up_ev[0]);
            return;
        }
    }
    c->up_cap = CU_UP_BYTES;
}

static specdec_status cu_upload(sd_backend *b, const void *host, size_t bytes, const char *what, const void **out,
                                specdec_err *err) {
    cuda_be *c = cu_of(b);
    *out = NULL;
    SD_TRY(take_deferred(c, err));
    SD_TRY(no_capture(c, err, "upload"));
    if (!host && bytes) return cu_errf(c, err, SPECDEC_ERR_INVALID_ARG, "upload of %s: NULL host pointer", what);
    cudaSetDevice(c->device);
    void *d = NULL;
    if (cudaMalloc(&d, cu_alloc_size(bytes)) != cudaSuccess) return nomem(c, err, what, bytes);
    upload_buffers(c);
    cudaError_t e = cudaSuccess;
    if (!c->up[0]) {
        e = cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice);   /* pageable: synchronous */
    } else {
        /* copy chunk k into pinned buffer k % 2 while the previous chunk is on its way */
        for (size_t off = 0, k = 0; off < bytes && e == cudaSuccess; off += c->up_cap, k++) {
            size_t n = bytes - off < c->up_cap ? bytes - off : c->up_cap;
            int i = (int)(k & 1);
            if ((e = cudaEventSynchronize(c->up_ev[i])) != cudaSuccess) break;
            memcpy(c->up[i], (const char *)host + off, n);
            e = cudaMemcpyAsync((char *)d + off, c->up[i], n, cudaMemcpyHostToDevice, c->dev.stream);
            if (e == cudaSuccess) e = cudaEventRecord(c->up_ev[i], c->dev.stream);
        }
        if (e == cudaSuccess) e = cudaStreamSynchronize(c->dev.stream);
    }
    if (e != cudaSuccess) {
        cudaFree(d);
        char w[128];
        snprintf(w, sizeof w, "upload of %s (%zu bytes)", what ? what : "weights", bytes);
        return cu_cuda_fail(c, err, e, w);
    }
    b->stats.upload_bytes += bytes;
    *out = d;
    return SPECDEC_OK;
}

/* One host <-> device transfer of n bytes that began at t0 (ms), into the backend's stats. */
static void count_transfer(uint64_t *calls, uint64_t *bytes, double *ms, size_t n, double t0) {
    (*calls)++;
    *bytes += n;
    *ms += now_ms() - t0;
}

static specdec_status cu_write(sd_backend *b, void *dst, const void *src, size_t n, specdec_err *err) {
    cuda_be *c = cu_of(b);
    SD_TRY(take_deferred(c, err));
    SD_TRY(no_capture(c, err, "write"));
    double t0 = now_ms();
    cudaError_t e = cudaSuccess;
    for (size_t off = 0; off < n && e == cudaSuccess;) {
        size_t k = n - off < c->ring_cap ? n - off : c->ring_cap;
        if (c->ring_off + k > c->ring_cap) {
            /* every copy out of the ring has finished once the stream is idle */
            if ((e = cudaStreamSynchronize(c->dev.stream)) != cudaSuccess) break;
            c->ring_off = 0;
        }
        unsigned char *s = c->ring + c->ring_off;
        memcpy(s, (const char *)src + off, k);
        e = cudaMemcpyAsync((char *)dst + off, s, k, cudaMemcpyHostToDevice, c->dev.stream);
        c->ring_off += (k + 255) & ~(size_t)255;
        off += k;
    }
    if (e != cudaSuccess) return cu_cuda_fail(c, err, e, "write");
    count_transfer(&b->stats.write_calls, &b->stats.write_bytes, &b->stats.write_ms, n, t0);
    return SPECDEC_OK;
}

static specdec_status cu_read(sd_backend *b, void *dst, const void *src, size_t n, specdec_err *err) {
    cuda_be *c = cu_of(b);
    SD_TRY(take_deferred(c, err));
    SD_TRY(no_capture(c, err, "read"));
    double t0 = now_ms();
    cudaError_t e = cudaSuccess;
    for (size_t off = 0; off < n && e == cudaSuccess; off += c->rbuf_cap) {
        size_t k = n - off < c->rbuf_cap ? n - off : c->rbuf_cap;
        e = cudaMemcpyAsync(c->rbuf, (const char *)src + off, k, cudaMemcpyDeviceToHost, c->dev.stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(c->dev.stream);
        if (e == cudaSuccess) memcpy((char *)dst + off, c->rbuf, k);
    }
    if (e != cudaSuccess) return cu_cuda_fail(c, err, e, "read (or a kernel queued before it)");
    count_transfer(&b->stats.read_calls, &b->stats.read_bytes, &b->stats.read_ms, n, t0);
    return SPECDEC_OK;
}

static specdec_status cu_copy(sd_backend *b, void *dst, const void *src, size_t n, specdec_err *err) {
    cuda_be *c = cu_of(b);
    SD_TRY(take_deferred(c, err));
    if (!n || dst == src) return SPECDEC_OK;
    cudaError_t e = cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, c->dev.stream);
    if (e != cudaSuccess) return cu_cuda_fail(c, err, e, "copy");
    return SPECDEC_OK;
}

static specdec_status cu_sync(sd_backend *b, specdec_err *err) {
    cuda_be *c = cu_of(b);
    SD_TRY(take_deferred(c, err));
    SD_TRY(no_capture(c, err, "sync"));
    cudaError_t e = cudaStreamSynchronize(c->dev.stream);
    if (e != cudaSuccess) return cu_cuda_fail(c, err, e, "sync (a kernel queued earlier failed)");
    return SPECDEC_OK;
}

/* ---- object ---- */

static void cu_free(sd_backend *b) {
    cuda_be *c = cu_of(b);
    cudaSetDevice(c->device);
    cu_abandon(c);
    cudaStreamSynchronize(c->dev.stream);
    graphs_clear(c);
    cudaFree(c->attn.p);
    cudaFree(c->attn_cnt.p);
    cudaFree(c->rowpart.p);
    cudaFree(c->lma.p);
    cudaFree(c->i8x.p);
    cudaFree(c->i8s.p);
    cudaFree(c->i8x2.p);
    cudaFree(c->i8s2.p);
    if (c->ring) cudaFreeHost(c->ring);
    if (c->rbuf) cudaFreeHost(c->rbuf);
    for (int i = 0; i < 2; i++)
        if (c->up[i]) {
            cudaFreeHost(c->up[i]);
            cudaEventDestroy(c->up_ev[i]);
        }
    if (c->marks_ok)
        for (int i = 0; i < SD_BE_MARKS; i++) cudaEventDestroy(c->marks[i]);
    if (c->dev.stream) cudaStreamDestroy(c->dev.stream);
    cudaGetLastError();
    free(c);
}

/* ---- device timers ---- */

static specdec_status cu_mark(sd_backend *b, int slot) {
    cuda_be *c = cu_of(b);
    if (!c->marks_ok || slot < 0 || slot >= SD_BE_MARKS) return SPECDEC_OK;
    /* inside a capture the record becomes a node of the graph (an "external" event record), so
     * every replay stamps it again */
    cudaError_t e = c->capturing ? cudaEventRecordWithFlags(c->marks[slot], c->dev.stream, cudaEventRecordExternal)
                                 : cudaEventRecord(c->marks[slot], c->dev.stream);
    if (e != cudaSuccess) return cu_cuda_fail(c, &b->err, e, "timer mark");
    return SPECDEC_OK;
}

static double cu_elapsed(sd_backend *b, int i, int j) {
    cuda_be *c = cu_of(b);
    float ms = 0;
    if (!c->marks_ok || i < 0 || j < 0 || i >= SD_BE_MARKS || j >= SD_BE_MARKS) return -1;
    if (cudaEventElapsedTime(&ms, c->marks[i], c->marks[j]) != cudaSuccess) {
        cudaGetLastError();   /* not recorded yet, or not completed: unknown */
        return -1;
    }
    return ms;
}

static const char *cu_kernels(const sd_backend *b) { return ((const cuda_be *)b->impl)->kernels; }

static bool float_dtype(specdec_dtype dt) {
    return dt == SPECDEC_DTYPE_F32 || dt == SPECDEC_DTYPE_F16 || dt == SPECDEC_DTYPE_BF16;
}

static bool cu_supports(const sd_backend *b, sd_op op, const sd_op_desc *d) {
    (void)b;
    switch (op) {
    case SD_OP_EMBED:
    case SD_OP_MATMUL:
    case SD_OP_LM_ARGMAX:
        if (!d) return true;
        if (d->bits == 0) return float_dtype(d->dtype);
        return (d->bits == 4 || d->bits == 8) && (d->group == 32 || d->group == 64 || d->group == 128) &&
               float_dtype(d->dtype);
    case SD_OP_KV_STORE:
    case SD_OP_ATTENTION:
        return !d || d->kv_dtype == SD_KV_F32 || d->kv_dtype == SD_KV_BF16 || d->kv_dtype == SD_KV_F16;
    case SD_OP_SAMPLE:
        return !d || !d->filtered;   /* filters run on the host over logits read back */
    default:
        return op >= 0 && op < SD_OP_COUNT;
    }
}

static const sd_backend_i cuda_i = {
    SD_BACKEND_MEMORY(cu), SD_BACKEND_RECORDING(cu), SD_BACKEND_OPS(cu), .matmul_n = cu_matmul_n, .lm_argmax = cu_lm_argmax,
    .norm_matmul_n = cu_norm_matmul_n, .matmul_add = cu_matmul_add, .swiglu_matmul_add = cu_swiglu_matmul_add,
    .norm_mlp_add = cu_norm_mlp_add,
    .qk_norm_rope_store = cu_qk_norm_rope_store,
    .qk_norm_rope_attention = cu_qk_norm_rope_attention,
};

bool sd_backend_cuda_available(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return n > 0;
}

specdec_status sd_backend_cuda_new(const sd_backend_opts *o, sd_backend **out, specdec_err *err) {
    *out = NULL;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        cudaGetLastError();
        return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "backend 'cuda': no usable CUDA device (%s)",
                       e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    }
    int dev = o ? o->device : 0;
    if (dev < 0 || dev >= n)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "backend 'cuda': device %d does not exist (%d CUDA device%s)", dev,
                       n, n == 1 ? "" : "s");
    struct cudaDeviceProp prop;
    if ((e = cudaSetDevice(dev)) != cudaSuccess || (e = cudaGetDeviceProperties(&prop, dev)) != cudaSuccess) {
        cudaGetLastError();
        return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "backend 'cuda': device %d: %s", dev, cudaGetErrorString(e));
    }
    if (prop.major < 9)
        return sd_fail(err, SPECDEC_ERR_UNSUPPORTED,
                       "backend 'cuda': device %d (%s) is sm_%d%d; this build carries sm_90 code and compute_90 PTX only",
                       dev, prop.name, prop.major, prop.minor);
    cuda_be *c = calloc(1, sizeof *c);
    if (!c) return sd_fail(err, SPECDEC_ERR_NOMEM, "backend 'cuda': out of host memory");
    c->device = dev;
    snprintf(c->dev_name, sizeof c->dev_name, "%.80s", prop.name);
    c->dev.n_sm = prop.multiProcessorCount;
    /* the x tile budget, leaving the fused LM head's bests and the static arrays room */
    int budget = CU_MM_SMEM, optin = (int)prop.sharedMemPerBlockOptin;
    if (budget > optin - (24 << 10)) budget = optin - (24 << 10);
    c->dev.smem_budget = budget;
    c->dev.smem_optin = optin;
    /* programmatic dependent launches (common.cuh) unless SPECDEC_CUDA_PDL=0: measured against
     * the plain stream order on an H200 (docs/benchmarks/cuda-fused-h200-2026-12-05.md), classic
     * decode 1.05x (8B shape) and 1.11x (embedded pair), speculative 0.97-1.11x, text identical */
    const char *pdl = getenv("SPECDEC_CUDA_PDL");
    c->dev.pdl = !(pdl && pdl[0] == '0' && !pdl[1]);
    /* kernel choices for A/B runs of one binary: the weight-streaming matmul (SPECDEC_CUDA_STREAM=1;
     * off by default: an H100 measured a decode step's matmuls 1.11x slower with it, the 8B
     * shape's MTP 0.92x) and the attention kernel (SPECDEC_CUDA_ATTN=split | staged; staged by
     * default, docs/benchmarks/cuda-h100-2026-12-05.md) */
    const char *stv = getenv("SPECDEC_CUDA_STREAM"), *atv = getenv("SPECDEC_CUDA_ATTN");
    if (stv && (!strcmp(stv, "1") || !strcmp(stv, "0"))) sd_cuda_matmul_kernels(stv[0] == '1' ? SD_CUDA_MM_STREAM : SD_CUDA_MM_GEMV);
    const char *giv = getenv("SPECDEC_CUDA_GI");   /* 0: without gemv_i4.cu's kernel (A/B runs) */
    if (giv && !strcmp(giv, "0")) sd_cuda_matmul_kernels(SD_CUDA_MM_GENERIC);
    const char *grv = getenv("SPECDEC_CUDA_GI_ROWS");
    if (grv && (!strcmp(grv, "2") || !strcmp(grv, "4"))) sd_cuda_gi_rows(grv[0] - '0');
    const char *gpv = getenv("SPECDEC_CUDA_GI_PRE");
    if (gpv && (gpv[0] == '0' || gpv[0] == '1') && !gpv[1]) sd_cuda_gi_preload(gpv[0] - '0');
    const char *gev = getenv("SPECDEC_CUDA_GI_EARLY");
    if (gev && (gev[0] == '0' || gev[0] == '1') && !gev[1]) sd_cuda_gi_early(gev[0] - '0');
    if (atv && (!strcmp(atv, "staged") || !strcmp(atv, "split"))) sd_cuda_attention_kernel(atv[1] == 't');
    const char *afv = getenv("SPECDEC_CUDA_ATTN_FUSE");   /* 0: q/k norm, RoPE, KV store in their own launch (A/B runs) */
    if (afv && (afv[0] == '0' || afv[0] == '1') && !afv[1]) sd_cuda_attention_fuse(afv[0] - '0');
    const char *arv = getenv("SPECDEC_CUDA_ATTN_ROWS");   /* rows a staged attention block serves, 0..64 (A/B runs) */
    if (arv && arv[0] >= '0' && arv[0] <= '9') {   /* the whole value a number, as every other switch here */
        char *end = NULL;
        const long rv = strtol(arv, &end, 10);
        if (*end == '\0' && rv <= 64) sd_cuda_attention_rows((int)rv);
    }
    const char *atm = getenv("SPECDEC_CUDA_ATTN_TEAMS");   /* 1: no teams form; 2, 4: at every T (A/B runs) */
    if (atm && atm[0] >= '0' && atm[0] <= '4' && !atm[1]) sd_cuda_attention_teams(atm[0] - '0');
    const char *nbv = getenv("SPECDEC_CUDA_NORM_BLOCKS");   /* 0: the int8 norm preparation in one block a token (A/B runs) */
    if (nbv && (!strcmp(nbv, "0") || !strcmp(nbv, "1"))) sd_cuda_norm_blocks(nbv[0] == '1');
    const char *mqv = getenv("SPECDEC_CUDA_MMA");   /* int8 calls of T >= 16: 0 no tensor-core kernel, 1 mma_i4.cu's, 2 mma_tile.cu's, 3 by shape, 4 mma_tile.cu's weights staged */
    if (mqv && mqv[0] >= '0' && mqv[0] <= '4' && !mqv[1]) sd_cuda_mma(mqv[0] - '0');
    const char *mlv = getenv("SPECDEC_CUDA_MLP");   /* 0: the MLP block as norm_matmul_n, swiglu_matmul_add (A/B runs) */
    if (mlv && mlv[0] >= '0' && mlv[0] <= '2' && !mlv[1]) sd_cuda_mlp_fuse(mlv[0] - '0');
    specdec_status st = SPECDEC_OK;
    if ((e = cudaStreamCreateWithFlags(&c->dev.stream, cudaStreamNonBlocking)) != cudaSuccess)
        st = cu_cuda_fail(c, err, e, "creating the stream");
    else if ((e = cudaHostAlloc((void **)&c->ring, CU_RING_BYTES, cudaHostAllocDefault)) != cudaSuccess ||
             (e = cudaHostAlloc((void **)&c->rbuf, CU_RBUF_BYTES, cudaHostAllocDefault)) != cudaSuccess)
        st = cu_errf(c, err, SPECDEC_ERR_NOMEM, "pinned staging buffers (2 x %zu MiB): %s", CU_RING_BYTES >> 20,
                     cudaGetErrorString(e));
    else if (budget < (40 << 10) || (e = sdc_mm_init(budget, optin)) != cudaSuccess)
        st = cu_errf(c, err, SPECDEC_ERR_UNSUPPORTED, "matmul kernels need %d KiB of shared memory per block (%d KiB opt-in): %s",
                     budget >> 10, optin >> 10, e != cudaSuccess ? cudaGetErrorString(e) : "too little");
    /* optional (the split kernel serves without it): a failure here only keeps it off */
    if (st == SPECDEC_OK && sdc_attn_staged_init(optin) != cudaSuccess) cudaGetLastError();
    c->ring_cap = CU_RING_BYTES;
    c->rbuf_cap = CU_RBUF_BYTES;
    if (st == SPECDEC_OK) {   /* timers are a diagnostic: without them the round times on the host */
        int made = 0;
        while (made < SD_BE_MARKS && cudaEventCreate(&c->marks[made]) == cudaSuccess) made++;
        if (made == SD_BE_MARKS) c->marks_ok = true;
        else {
            while (made > 0) cudaEventDestroy(c->marks[--made]);
            cudaGetLastError();
        }
    }
    c->i8 = o && (o->precision == SD_PRECISION_INT8 || (o->precision == SD_PRECISION_DEFAULT && CU_DEFAULT_INT8));
    snprintf(c->kernels, sizeof c->kernels, "sm_%d%d (%.80s, %d SMs%s)%s", prop.major, prop.minor, prop.name,
             prop.multiProcessorCount, c->dev.pdl ? ", programmatic launches" : "", c->i8 ? " int8" : "");
    c->b.i = &cuda_i;
    c->b.impl = c;
    c->b.name = "cuda";
    c->b.host_visible = false;
    c->b.int8 = c->i8;
    c->b.n_threads = 0;
    c->b.batch = CU_DEFAULT_BATCH;
    if (st != SPECDEC_OK) {
        cu_free(&c->b);
        return st;
    }
    *out = &c->b;
    return SPECDEC_OK;
}

cudaStream_t sd_cuda_stream(sd_backend *b) { return cu_of(b)->dev.stream; }

void sd_cuda_set_int8(sd_backend *b, int on) {
    cuda_be *c = cu_of(b);
    c->i8 = on != 0;
    b->int8 = c->i8;
    if (c->i8) {   /* scratch for 64 tokens of the widest row, ahead of any recording (a failure shows at the op) */
        specdec_err e;
        if (cu_scratch(c, &c->i8x, sdc_mm_i8_xq_bytes(SDC_MM_Q4I, 32768, 64), "int8 activations", &e) == SPECDEC_OK &&
            cu_scratch(c, &c->i8s, sdc_mm_i8_xsd_bytes(SDC_MM_Q8I, 32768, 64), "int8 block scales", &e) == SPECDEC_OK &&
            cu_scratch(c, &c->i8x2, sdc_mm_i8_xq_bytes(SDC_MM_Q4I, 32768, 8), "int8 MLP activations", &e) == SPECDEC_OK)
            cu_scratch(c, &c->i8s2, sdc_mm_i8_xsd_bytes(SDC_MM_Q4I, 32768, 8), "int8 MLP block scales", &e);
    }
    snprintf(c->kernels + strcspn(c->kernels, ")") + 1, sizeof c->kernels - strcspn(c->kernels, ")") - 1, "%s",
             c->i8 ? " int8" : "");
}
