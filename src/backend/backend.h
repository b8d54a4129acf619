/* backend.h: the backend interface (design.md, "Backends"). A backend is an object that owns
 * memory and runs ops: it allocates buffers, uploads weights once, writes and reads small buffers,
 * synchronizes, says which op x dtype it supports, and runs the ops, each returning a status.
 * The model (src/model/), the round and the drafters (src/speculative/) are written once against
 * this table and never name a CPU or CUDA function; a backend is a folder (src/cpu/, src/cuda/)
 * that fills it in and registers a constructor in backend.c.
 *
 * Memory. Every pointer an op takes is backend memory (from `alloc` or `upload`) unless the
 * comment says "host". On a backend whose memory is host memory (`host_visible`: the CPU), host
 * pointers are backend pointers too, uploads are zero-copy views of the mmapped weights, and
 * reading a result back costs nothing. On a device, ops are queued in order on one stream; `read`
 * and `sync` wait for what was queued before them.
 *
 * Positions. Ops that depend on where rows sit in the sequence (RoPE, KV store, attention, the
 * seeded sampler) take an sd_pos whose base is an int32 in backend memory, so the position moves
 * on the device (the walk advances it) and one recorded launch sequence serves every round.
 *
 * Recording. `seq_begin(key)` / `seq_end(key)` bracket a sequence of op calls whose arguments
 * (pointers, sizes, position offsets) depend only on `key`: a device backend records the
 * sequence the first time (CUDA graph capture) and replays it afterwards, in which case
 * seq_begin returns true and the caller issues nothing. Host-side bookkeeping must therefore stay
 * outside the bracket. Backends without recording return false (the caller issues the ops).
 *
 * Errors. An op returns a status; its message is in the backend's `err` (the callers copy it into
 * theirs: sd_be_fail). On a device an asynchronous fault may surface at a later call or at sync.
 *
 * Exactness. Every op a backend runs is batch-invariant on that backend: the value computed for
 * one row never depends on T, on the other rows, or on how a sequence was split into calls. */
#ifndef SD_BACKEND_H
#define SD_BACKEND_H
#include <stdbool.h>
#include "specdec.h"
#include "backend/tensor.h"

typedef struct sd_backend sd_backend;

#define SD_BE_MARKS 8   /* device timer slots (mark / elapsed) */
#define SD_MATMUL_N_MAX 3   /* matrices of one matmul_n call at most */

typedef enum sd_op {
    SD_OP_EMBED = 0,   /* x[t] = row ids[t] of E, as f32 */
    SD_OP_MATMUL,      /* y = x W^T, dense or quantized W */
    SD_OP_RMSNORM,
    SD_OP_ROPE,
    SD_OP_SILU_MUL,
    SD_OP_ADD,
    SD_OP_KV_STORE,
    SD_OP_ATTENTION,
    SD_OP_ARGMAX,      /* per-row argmax of logits */
    SD_OP_LM_ARGMAX,   /* fused W x + argmax (optional: NULL slot) */
    SD_OP_SAMPLE,      /* seeded choice per row (desc->filtered: top-k/p, min-p in use) */
    SD_OP_WALK,
    SD_OP_COPY_ROW,
    SD_OP_COUNT
} sd_op;

/* What a supports() query asks about: the weight kind for EMBED / MATMUL / LM_ARGMAX, the KV dtype
 * for KV_STORE / ATTENTION, whether sampling filters are in use for SAMPLE. Zero = the default. */
typedef struct sd_op_desc {
    specdec_dtype dtype;
    int bits, group;
    sd_kv_dtype_e kv_dtype;
    bool filtered;
} sd_op_desc;

/* Counters a backend keeps (specdec.h's specdec_backend_stats). */
typedef specdec_backend_stats sd_backend_stats;

typedef struct sd_backend_i {
    /* ---- object ---- */
    void (*free)(sd_backend *b);
    /* Kernel variant in use ("avx512", "avx2", "sm_90", ...) and why it was chosen. */
    const char *(*kernels)(const sd_backend *b);
    bool (*supports)(const sd_backend *b, sd_op op, const sd_op_desc *d);

    /* ---- memory ---- */
    /* A zero-filled buffer of `bytes`; `what` names it in the out-of-memory message. */
    specdec_status (*alloc)(sd_backend *b, size_t bytes, const char *what, void **out, specdec_err *err);
    void (*release)(sd_backend *b, void *p);                      /* p from alloc, may be NULL */
    /* Weights (host, immutable while the backend uses them): a zero-copy view on the CPU, a device
     * copy elsewhere. Released with `unload`. */
    specdec_status (*upload)(sd_backend *b, const void *host, size_t bytes, const char *what,
                             const void **out, specdec_err *err);
    void (*unload)(sd_backend *b, const void *p);
    /* Optional: after a matrix's upload, make the backend's own form of it (m->pk; the CPU's packed
     * int8 tiles), and release that form. sd_be_upload_mat / sd_be_unload_mat call them. */
    specdec_status (*prepare_mat)(sd_backend *b, sd_mat *m, const char *what, specdec_err *err);
    void (*unprepare_mat)(sd_backend *b, sd_mat *m);
    specdec_status (*write)(sd_backend *b, void *dst, const void *host_src, size_t n, specdec_err *err);
    specdec_status (*read)(sd_backend *b, void *host_dst, const void *src, size_t n, specdec_err *err);
    specdec_status (*copy)(sd_backend *b, void *dst, const void *src, size_t n, specdec_err *err);
    specdec_status (*sync)(sd_backend *b, specdec_err *err);
    /* Make room for the op scratch (attention partials, sampler rows) that calls of up to max_T rows
     * over contexts of up to n_ctx positions with this attention shape and a vocabulary of `vocab`
     * need, so no op allocates later (a recording may not allocate). Called by every context that
     * runs on the backend; sizes only grow. */
    specdec_status (*reserve)(sd_backend *b, const sd_attn_shape *s, int max_T, int n_ctx, int vocab,
                              specdec_err *err);
    /* Device timers (optional: NULL where host clocks tell the truth, as on the CPU). mark(i) records
     * timestamp slot i (0..SD_BE_MARKS-1) in stream order, inside a recording too (the replay
     * records it again); elapsed(i, j) is the time from mark i to mark j in ms, once j completed
     * (after a read or a sync), or a negative value when unknown. */
    specdec_status (*mark)(sd_backend *b, int slot);
    double (*elapsed)(sd_backend *b, int i, int j);
    /* Recording (optional: NULL = none). See the file comment. */
    bool (*seq_begin)(sd_backend *b, uint64_t key);
    specdec_status (*seq_end)(sd_backend *b, uint64_t key, specdec_err *err);
    /* Forget every recording. Backends call it themselves whenever a buffer is released (a
     * recording may name it); callers need it only when they reuse a key for other buffers. */
    void (*seq_reset)(sd_backend *b);

    /* ---- ops (shapes: T rows; x is (T, ldx) row-major, the first `cols` entries of a row used) ---- */
    /* x (T, ldx): row t = E[ids[t]] as f32 (E dense or quantized; ids in [0, E->rows)). */
    specdec_status (*embed)(sd_backend *b, const sd_mat *E, const int32_t *ids, int T, float *x, int ldx);
    /* y (T, ldy) = x (T, ldx) . W^T: y[t][r] = sum_j W[r][j] x[t][j]. */
    specdec_status (*matmul)(sd_backend *b, const sd_mat *W, const float *x, int ldx, float *y, int ldy, int T);
    /* Optional (NULL: one matmul per matrix; call it through sd_be_matmul_n): y[i] (T, ldy[i]) =
     * x . W[i]^T for n <= SD_MATMUL_N_MAX matrices over the same x (q, k, v; gate, up), every
     * value bit for bit what matmul gives it. A device reads x (and makes its int8 form) once
     * and runs one launch where matmul would run n. */
    specdec_status (*matmul_n)(sd_backend *b, int n, const sd_mat *const *W, const float *x, int ldx, float *const *y,
                               const int *ldy, int T);
    /* out (T, ldo) = rmsnorm(x (T, ldx)) * w over n entries; out may alias x (same ld). */
    specdec_status (*rmsnorm)(sd_backend *b, float *out, int ldo, const float *x, int ldx, const float *w,
                              int n, int T, float eps);
    /* in place on x (T, n_heads*hd): NeoX rotate_half RoPE of row t at position pos(t); cos/sin are
     * (n_ctx, hd/2) tables in backend memory. */
    specdec_status (*rope)(sd_backend *b, float *x, int T, int n_heads, int hd, sd_pos pos,
                           const float *cos_t, const float *sin_t);
    /* g (T, n) = silu(g) * u */
    specdec_status (*silu_mul)(sd_backend *b, float *g, const float *u, int n, int T);
    /* x (n) += y (n) */
    specdec_status (*add)(sd_backend *b, float *x, const float *y, size_t n);
    /* rows of src (T, row_elems) f32 into cache rows pos(t) (the cache's dtype). */
    specdec_status (*kv_store)(sd_backend *b, sd_kv_dtype_e dt, void *cache, int row_elems, const float *src,
                               int T, sd_pos pos);
    /* causal GQA attention of q (T, nh*hd) over cache entries 0..pos(t) (the new K/V already
     * stored) -> out (T, nh*hd). */
    specdec_status (*attention)(sd_backend *b, const sd_attn_shape *s, const sd_kv_layer *kv, const float *q,
                                float *out, int T, sd_pos pos);
    /* out[t] = map[a] (a itself when map is NULL) with a the index of the largest of logits row t
     * (n floats, ld n); the lowest index wins ties, NaN never wins (sd_argmax's contract). */
    specdec_status (*argmax)(sd_backend *b, const float *logits, int n, int T, const int32_t *map, int32_t *out);
    /* Optional fused LM head + argmax (NULL: matmul + argmax): out[t] = map[a] (a itself when map
     * is NULL) with a = argmax_r (W x_t)[r], the logits computed bit for bit as matmul would and
     * never written. */
    specdec_status (*lm_argmax)(sd_backend *b, const sd_mat *W, const float *x, int ldx, int T,
                                const int32_t *map, int32_t *out);
    /* out[t] = the token sd_sample (src/sample/sample.h) chooses for logits row t (n floats; host
     * `p`) at position pos(t). When map is non-NULL, row entry k stands for token map[k] and every
     * other token of the vocabulary (vocab ids) has logit -inf. */
    specdec_status (*sample)(sd_backend *b, const specdec_sampling_params *p, const float *logits, int n,
                             int vocab, const int32_t *map, int T, sd_pos pos, int32_t *out);
    /* The round's walk (design.md step 3) over nd drafts. blk (nd+1): [bonus, d_1..d_nd];
     * choice (nd+1): the target's token after each verify row. With acc the length of the
     * agreeing prefix (d_j == choice[j-1]): emit (1 + nd + 1) = [acc+1, d_1..d_acc, choice[acc]];
     * blk[0] = choice[acc] (the next bonus); *pos_prev = *pos; *pos += acc + 1. */
    specdec_status (*walk)(sd_backend *b, int32_t *blk, int nd, const int32_t *choice, int32_t *emit,
                           int32_t *pos, int32_t *pos_prev);
    /* dst (n) = row (*idx + off) of src (rows of ld floats). */
    specdec_status (*copy_row)(sd_backend *b, float *dst, const float *src, int ld, int n, const int32_t *idx,
                               int off);

    /* ---- fused ops (optional: NULL = the ops they stand for, one after another; call them
     * through the sd_be_* helpers below, which fall back). Each gives every value bit for bit
     * what those ops give; a device saves the launches between them. ---- */
    /* xn (T, ldxn) = rmsnorm(x (T, ldx)) * w over W[0]->cols entries, then matmul_n over xn. */
    specdec_status (*norm_matmul_n)(sd_backend *b, const float *w, float eps, const float *x, int ldx, float *xn,
                                    int ldxn, int n, const sd_mat *const *W, float *const *y, const int *ldy, int T);
    /* y (T, ldy) += x (T, ldx) . W^T: each value y + the matmul's value (matmul, then add). */
    specdec_status (*matmul_add)(sd_backend *b, const sd_mat *W, const float *x, int ldx, float *y, int ldy, int T);
    /* g (T, n) = silu(g) * u with n = W->cols (silu_mul), then y (T, ldy) += g . W^T (matmul_add). */
    specdec_status (*swiglu_matmul_add)(sd_backend *b, const sd_mat *W, float *g, const float *u, float *y, int ldy,
                                        int T);
    /* The MLP block: norm_matmul_n over gate and up (xn = rmsnorm(x) * w by gate->cols entries,
     * g = xn . gate^T, u = xn . up^T, both (T, gate->rows)), then swiglu_matmul_add over down
     * (g = silu(g) * u, x += g . down^T); xn, g, u and x bit for bit what those two ops leave. */
    specdec_status (*norm_mlp_add)(sd_backend *b, const float *w, float eps, float *x, int ldx, float *xn, int ldxn,
                                   const sd_mat *gate, const sd_mat *up, const sd_mat *down, float *g, float *u, int T);
    /* Qwen3's steps from the q/k/v projections to attention: q (T, nh*hd) and k (T, nkv*hd) normed
     * per head (rmsnorm by qw / kw over hd) and rotated (rope) in place, then k and v stored into
     * the layer's caches (kv_store) at pos(t). */
    specdec_status (*qk_norm_rope_store)(sd_backend *b, const sd_attn_shape *s, const sd_kv_layer *kv, float *q,
                                         float *k, const float *v, const float *qw, const float *kw, float eps, int T,
                                         sd_pos pos, const float *cos_t, const float *sin_t);
    /* qk_norm_rope_store, then attention of the normed, rotated q into out (T, nh*hd): the caches
     * and out bit for bit what those two ops leave; q and k are scratch afterwards (a device that
     * norms and rotates the heads where attention reads them leaves them as they were). */
    specdec_status (*qk_norm_rope_attention)(sd_backend *b, const sd_attn_shape *s, const sd_kv_layer *kv, float *q,
                                             float *k, const float *v, const float *qw, const float *kw, float eps,
                                             int T, sd_pos pos, const float *cos_t, const float *sin_t, float *out);

    /* ---- tensor parallelism (optional: NULL on a backend of one rank; src/tp/) ---- */
    /* x (n) = the sum over the ranks of each rank's x, bitwise identical on every rank and
     * independent of n (a row's sum never depends on T). scratch: n_ranks * n floats. */
    specdec_status (*allreduce)(sd_backend *b, float *x, size_t n, float *scratch);
    /* Like upload, but rank r gets host[r] (each `bytes` long): a sharded weight. */
    specdec_status (*upload_ranks)(sd_backend *b, const void *const *host, size_t bytes, const char *what,
                                   const void **out, specdec_err *err);
} sd_backend_i;

/* The members of a backend's table, each named after the backend's prefix P (P_free, P_matmul,
 * ...): the list is written once here, so a new op reaches every backend's table in one place.
 * Optional members (matmul_n, lm_argmax, the fused ops, the tensor-parallel hooks) are set beside these by the backends
 * that have them; a backend without recordings and device timers leaves SD_BACKEND_RECORDING out. */
#define SD_BACKEND_MEMORY(P)                                                                          \
    .free = P##_free, .kernels = P##_kernels, .supports = P##_supports, .alloc = P##_alloc,           \
    .release = P##_release, .upload = P##_upload, .unload = P##_unload, .write = P##_write,           \
    .read = P##_read, .copy = P##_copy, .sync = P##_sync, .reserve = P##_reserve
#define SD_BACKEND_RECORDING(P)                                                                       \
    .seq_begin = P##_seq_begin, .seq_end = P##_seq_end, .seq_reset = P##_seq_reset, .mark = P##_mark, \
    .elapsed = P##_elapsed
#define SD_BACKEND_OPS(P)                                                                             \
    .embed = P##_embed, .matmul = P##_matmul, .rmsnorm = P##_rmsnorm, .rope = P##_rope,               \
    .silu_mul = P##_silu_mul, .add = P##_add, .kv_store = P##_kv_store, .attention = P##_attention,   \
    .argmax = P##_argmax, .sample = P##_sample, .walk = P##_walk, .copy_row = P##_copy_row

/* The prefill chunk of a backend that names none. */
#define SD_DEFAULT_BATCH 64

struct sd_backend {
    const sd_backend_i *i;
    void *impl;
    const char *name;          /* "cpu", "cuda" */
    bool host_visible;         /* backend memory is host memory (see the file comment) */
    int n_threads;             /* CPU threads the backend runs on (0 on devices) */
    sd_backend_stats stats;
    specdec_err err;           /* the message of the last op that failed */
    int tp_ranks;              /* ranks of a tensor-parallel backend (src/tp/); 0 on a plain one */
    bool int8;                 /* matmuls over quantized weights take int8 activations (the precision in use) */
    int batch;                 /* a context's max_batch where its params leave it 0: the prefill chunk measured
                                * fastest on this backend (0: SD_DEFAULT_BATCH) */
};

/* Backend options (from specdec_ctx_params). */
typedef struct sd_backend_opts {
    int n_threads;             /* CPU: 0 = online CPUs */
    bool reference;            /* CPU: the scalar reference ops */
    const char *cpu_level;     /* CPU: a SIMD level by name ("avx2", ...; NULL = the default choice) */
    int precision;             /* matmuls over quantized weights: 0 the backend's measured default,
                                * 1 f32 activations (the reference), 2 int8 activations (blocks of 32);
                                * SD_PRECISION_* */
    int device;                /* GPU index */
} sd_backend_opts;

enum { SD_PRECISION_DEFAULT = 0, SD_PRECISION_F32 = 1, SD_PRECISION_INT8 = 2 };

/* Whether precision int8 covers W: affine 4- or 8-bit codes, a group that is a multiple of 64,
 * cols a whole number of 128 (4-bit) or 64 (8-bit) columns and at most 32768. One rule for every
 * backend, so a model runs the same matrices on int8 activations on each (the others keep f32). */
bool sd_i8_applies(const sd_mat *W);

/* Create the backend called `name` ("auto", "cpu", "cuda", ...). An unknown or unavailable name is
 * SPECDEC_ERR_INVALID_ARG / SPECDEC_ERR_UNSUPPORTED with a message listing those built in. */
specdec_status sd_backend_create(const char *name, const sd_backend_opts *o, sd_backend **out, specdec_err *err);
void sd_backend_free(sd_backend *b);
/* Names built into this binary, comma separated ("cpu, cuda"). */
const char *sd_backend_names(void);

/* Constructors of the backends (one per folder); NULL-returning stubs where not built. */
specdec_status sd_backend_cpu_new(const sd_backend_opts *o, sd_backend **out, specdec_err *err);
specdec_status sd_backend_cuda_new(const sd_backend_opts *o, sd_backend **out, specdec_err *err);
/* "cpu-sim" (src/backend/sim.c): a CPU backend that behaves like a device (no host-visible memory,
 * recorded sequences replayed by key), for testing the code above the interface without a GPU. */
specdec_status sd_backend_sim_new(const sd_backend_opts *o, sd_backend **out, specdec_err *err);
/* True when this binary has the CUDA backend and a usable device is present. */
bool sd_backend_cuda_available(void);

/* ---- helpers over the table (backend.c) ------------------------------------------------ */

/* A recording key from a call site and the values its op arguments depend on (FNV-1a). */
uint64_t sd_be_key(const char *site, const uint64_t *vals, int n);
/* seq_begin / seq_end over the optional slots: begin is false (issue the ops) on a backend that
 * does not record; end is then a no-op. */
bool sd_be_seq_begin(sd_backend *b, uint64_t key);
specdec_status sd_be_seq_end(sd_backend *b, uint64_t key, specdec_err *err);
/* The sampling parameters as key values (4). */
void sd_be_key_sampling(const specdec_sampling_params *p, uint64_t out[4]);

/* Upload the tensors of a weight matrix (w, scales, biases) named `name`; dst gets the backend
 * pointers. Release with sd_be_unload_mat. */
specdec_status sd_be_upload_mat(sd_backend *b, const sd_mat *host, const char *name, sd_mat *dst, specdec_err *err);
void sd_be_unload_mat(sd_backend *b, sd_mat *m);
/* Upload n matrices of one kind (same cols, bits, group and dtype; rows may differ) laid end to
 * end: one buffer each for their codes, scales and biases, so a backend may run them as one
 * matrix of their summed rows (matmul_n). dst[0] owns the buffers (unloading it frees them), the
 * others are parts of them (sd_mat.part: unloading one only forgets it). A host-visible backend, or matrices of different
 * kinds, get one upload each. `name` names them all in an out-of-memory message. */
specdec_status sd_be_upload_mats(sd_backend *b, int n, const sd_mat *const *host, const char *name, sd_mat *const *dst,
                                 specdec_err *err);
/* Upload n floats (host) into a new backend buffer (norm vectors, tables). */
specdec_status sd_be_upload_f32(sd_backend *b, const float *host, size_t n, const char *what, const float **out,
                                specdec_err *err);
/* A host-readable view of n bytes at backend pointer p: p itself when host_visible, else `tmp`
 * (host, n bytes) filled by a read. NULL (with err set) when the read fails. */
const void *sd_be_view(sd_backend *b, const void *p, void *tmp, size_t n, specdec_err *err);
/* Return st with the backend's last op message copied into err (a generic one naming `what` when
 * the backend left none). */
specdec_status sd_be_fail(sd_backend *b, specdec_err *err, specdec_status st, const char *what);
/* Call an op; on failure return from the calling function with the op's message in err. */
#define SD_BE(b, err, what, call)                                                          \
    do {                                                                                   \
        specdec_status sd_be_st_ = (call);                                                 \
        if (sd_be_st_ != SPECDEC_OK) return sd_be_fail((b), (err), sd_be_st_, (what));     \
    } while (0)
/* matmul_n where the backend has it, else one matmul per matrix (backend.h's matmul_n). */
specdec_status sd_be_matmul_n(sd_backend *b, int n, const sd_mat *const *W, const float *x, int ldx, float *const *y,
                              const int *ldy, int T);
/* The fused ops (backend.h) where the backend has them, else the ops they stand for. tmp: scratch
 * of T x ldy floats for the fallback of the two that add into y. */
specdec_status sd_be_norm_matmul_n(sd_backend *b, const float *w, float eps, const float *x, int ldx, float *xn,
                                   int ldxn, int n, const sd_mat *const *W, float *const *y, const int *ldy, int T);
specdec_status sd_be_matmul_add(sd_backend *b, const sd_mat *W, const float *x, int ldx, float *y, int ldy, int T,
                                float *tmp);
specdec_status sd_be_swiglu_matmul_add(sd_backend *b, const sd_mat *W, float *g, const float *u, float *y, int ldy,
                                       int T, float *tmp);
specdec_status sd_be_norm_mlp_add(sd_backend *b, const float *w, float eps, float *x, int ldx, float *xn, int ldxn,
                                  const sd_mat *gate, const sd_mat *up, const sd_mat *down, float *g, float *u, int T,
                                  float *tmp);
specdec_status sd_be_qk_norm_rope_store(sd_backend *b, const sd_attn_shape *s, const sd_kv_layer *kv, float *q,
                                        float *k, const float *v, const float *qw, const float *kw, float eps, int T,
                                        sd_pos pos, const float *cos_t, const float *sin_t);
specdec_status sd_be_qk_norm_rope_attention(sd_backend *b, const sd_attn_shape *s, const sd_kv_layer *kv, float *q,
                                            float *k, const float *v, const float *qw, const float *kw, float eps, int T,
                                            sd_pos pos, const float *cos_t, const float *sin_t, float *out);
/* Write one int32 (host value) into backend memory. */
specdec_status sd_be_write_i32(sd_backend *b, int32_t *dst, int32_t v, specdec_err *err);

#endif
