/* cuda_be.h: the CUDA backend's object and what its two host files share: cuda_backend.c (the
 * table, memory, staging, scratch, recordings) and cuda_ops.c (the ops: argument checks,
 * parameter structs, launches). Host C only; the kernels are in the .cu files. */
#ifndef SD_CUDA_BE_H
#define SD_CUDA_BE_H
#include <stdbool.h>
#include <cuda_runtime_api.h>
#include "backend/backend.h"
#include "cuda/dev.h"

/* precision default (SD_PRECISION_DEFAULT): int8 activations, measured on an H200
 * (docs/benchmarks/cuda-int8-h200-2026-12-02.md): the 8B shape's decode-step matmuls 2.5 ms
 * against f32's 4.2, top-1 agreement with f32 0.996 and mean KL 0.00028 nats on held-out prompts */
#define CU_DEFAULT_INT8 1
/* max_batch default (a context's prefill chunk): 256 tokens. On an H100, 8B shape, 513-token
 * prompt (docs/benchmarks/cuda-prefill-batch-h100-2026-12-07.md): 64 -> 128 -> 256 -> 512 went
 * 3504 -> 3965 -> 4126 tok/s, then 3670 -> 4573 -> 4672 in a later build; 512 gains 2% more for
 * twice the logits staging (2 x 311 MB at a 152k vocabulary). Decode unchanged (classic 1.003x,
 * MTP 0.987x within the spread against 64). */
#define CU_DEFAULT_BATCH 256
#define CU_MAX_GRAPHS 64   /* recordings kept; the least recently replayed one is dropped */

/* A device buffer that only grows. */
typedef struct cu_buf {
    void *p;
    size_t cap;
} cu_buf;

/* One recording: the key the caller bracketed it with and its instantiated graph. */
typedef struct cu_graph {
    uint64_t key;
    cudaGraphExec_t exec;
    uint64_t ops;    /* op calls it holds (stats.ops grows by this per replay) */
    uint64_t kernels;   /* its kernel nodes (stats.graph_kernels grows by this per run) */
    uint64_t last;   /* clock of its last use */
} cu_graph;

typedef struct cuda_be {
    sd_backend b;
    int device;
    char dev_name[96];
    char kernels[160];
    sdc_dev dev;                  /* stream, SM count, matmul shared-memory budget */
    bool i8;                      /* precision int8: the matrices sd_i8_applies takes use int8 activations */
    /* pinned host staging */
    unsigned char *ring;          /* write: a ring, reused from its start after a stream sync */
    size_t ring_cap, ring_off;
    unsigned char *rbuf;          /* read */
    size_t rbuf_cap;
    unsigned char *up[2];         /* upload double buffer (lazily allocated; NULL: pageable copies) */
    cudaEvent_t up_ev[2];
    size_t up_cap;
    bool up_tried;
    /* op scratch, sized by reserve() */
    cu_buf attn;                  /* attention split partials */
    cu_buf attn_cnt;              /* the staged attention's counters: zeros between calls, apart from
                                   * the partials (whose layout moves with T and the shape) */
    cu_buf rowpart;               /* argmax / sampler per-block partials */
    cu_buf lma;                   /* fused LM head per-block partials */
    cu_buf i8x, i8s;              /* precision int8: the quantized x of a matmul (codes, block scales) */
    cu_buf i8x2, i8s2;            /* the same for the down projection, made by the gate/up launch (norm_mlp_add) */
    /* recordings */
    bool capturing;
    uint64_t cap_key, cap_ops;
    bool abandoned;               /* a recording was dropped because something inside it failed */
    uint64_t abandoned_key;
    cu_graph graphs[CU_MAX_GRAPHS];
    int n_graphs;
    uint64_t clock;
    specdec_err deferred;         /* a failure no call could return yet (a replay that did not launch) */
    cudaEvent_t marks[SD_BE_MARKS];   /* device timers (mark / elapsed) */
    bool marks_ok;
} cuda_be;

static inline cuda_be *cu_of(sd_backend *b) { return (cuda_be *)b->impl; }

/* Fill err (when non-NULL) with "cuda device N (name): <message>" and return st. */
specdec_status cu_errf(cuda_be *c, specdec_err *err, specdec_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* A failed CUDA call of `what`: its status and message into err (an earlier asynchronous fault
 * surfaces here too); inside a recording the capture is abandoned first. */
specdec_status cu_cuda_fail(cuda_be *c, specdec_err *err, cudaError_t e, const char *what);
/* End the capture in progress, dropping what it held (after a failure inside it). */
void cu_abandon(cuda_be *c);
/* Make buf hold at least `bytes` (a growth synchronizes and drops the recordings, which may
 * point at the old buffer; inside a recording it is an error: reserve() first). */
specdec_status cu_scratch(cuda_be *c, cu_buf *buf, size_t bytes, const char *what, specdec_err *err);

/* Every op: a deferred failure first, then argument checks, the launch, and cu_op_end. */
specdec_status cu_op_begin(cuda_be *c);
specdec_status cu_op_end(cuda_be *c, cudaError_t e, const char *op);

/* The ops (cuda_ops.c), in backend.h's order. */
specdec_status cu_embed(sd_backend *b, const sd_mat *E, const int32_t *ids, int T, float *x, int ldx);
specdec_status cu_matmul(sd_backend *b, const sd_mat *W, const float *x, int ldx, float *y, int ldy, int T);
specdec_status cu_matmul_n(sd_backend *b, int n, const sd_mat *const *W, const float *x, int ldx, float *const *y,
                           const int *ldy, int T);
specdec_status cu_rmsnorm(sd_backend *b, float *out, int ldo, const float *x, int ldx, const float *w, int n, int T,
                          float eps);
specdec_status cu_rope(sd_backend *b, float *x, int T, int n_heads, int hd, sd_pos pos, const float *cos_t,
                       const float *sin_t);
specdec_status cu_silu_mul(sd_backend *b, float *g, const float *u, int n, int T);
specdec_status cu_add(sd_backend *b, float *x, const float *y, size_t n);
specdec_status cu_kv_store(sd_backend *b, sd_kv_dtype_e dt, void *cache, int row_elems, const float *src, int T,
                           sd_pos pos);
specdec_status cu_attention(sd_backend *b, const sd_attn_shape *s, const sd_kv_layer *kv, const float *q, float *out,
                            int T, sd_pos pos);
specdec_status cu_argmax(sd_backend *b, const float *logits, int n, int T, const int32_t *map, int32_t *out);
specdec_status cu_norm_matmul_n(sd_backend *b, const float *w, float eps, const float *x, int ldx, float *xn,
                                int ldxn, int n, const sd_mat *const *W, float *const *y, const int *ldy, int T);
specdec_status cu_matmul_add(sd_backend *b, const sd_mat *W, const float *x, int ldx, float *y, int ldy, int T);
specdec_status cu_swiglu_matmul_add(sd_backend *b, const sd_mat *W, float *g, const float *u, float *y, int ldy, int T);
specdec_status cu_norm_mlp_add(sd_backend *b, const float *w, float eps, float *x, int ldx, float *xn, int ldxn,
                               const sd_mat *gate, const sd_mat *up, const sd_mat *down, float *g, float *u, int T);
specdec_status cu_qk_norm_rope_store(sd_backend *b, const sd_attn_shape *s, const sd_kv_layer *kv, float *q, float *k,
                                     const float *v, const float *qw, const float *kw, float eps, int T, sd_pos pos,
                                     const float *cos_t, const float *sin_t);
specdec_status cu_qk_norm_rope_attention(sd_backend *b, const sd_attn_shape *s, const sd_kv_layer *kv, float *q,
                                         float *k, const float *v, const float *qw, const float *kw, float eps, int T,
                                         sd_pos pos, const float *cos_t, const float *sin_t, float *out);
specdec_status cu_lm_argmax(sd_backend *b, const sd_mat *W, const float *x, int ldx, int T, const int32_t *map,
                            int32_t *out);
specdec_status cu_sample(sd_backend *b, const specdec_sampling_params *p, const float *logits, int n, int vocab,
                         const int32_t *map, int T, sd_pos pos, int32_t *out);
specdec_status cu_walk(sd_backend *b, int32_t *blk, int nd, const int32_t *choice, int32_t *emit, int32_t *pos,
                       int32_t *pos_prev);
specdec_status cu_copy_row(sd_backend *b, float *dst, const float *src, int ld, int n, const int32_t *idx, int off);

/* Scratch bytes the per-row partials need for rows of n logits, T at a time. */
size_t cu_rowpart_bytes(int T, int n);
/* Scratch bytes of the fused LM head's partials, T tokens at a time. */
size_t cu_lma_bytes(int T);   /* T: tokens, at most SDC_LMA_MAX_T count at once */

#endif
