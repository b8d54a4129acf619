/* ops.h: the CPU operators of the forward pass. Each has a scalar reference (`_ref`,
 * plain C, obviously right) and a fast version (SIMD + threads) picked at run time.
 *
 * Batch invariance: every value an op produces for one position is computed by a reduction
 * whose order depends only on the reduction length (never on T, the thread count or the
 * tile chosen for T). The fast versions therefore give bitwise the same row whether called
 * with T = 1 or inside a block of T positions, and whatever the pool size. They may differ
 * from the `_ref` versions by rounding only.
 *
 * Shapes: T positions, x is (T, ldx) row-major with the first `cols` entries used. */
#ifndef SD_OPS_H
#define SD_OPS_H
#include <stdint.h>
#include "backend/tensor.h"
#include "cpu/pool.h"

typedef struct sd_ops {
    const char *name;
    /* y (T, ldy) = x (T, ldx) . W^T ; y[t][r] = sum_j W[r][j] x[t][j] over j < W->cols */
    void (*matmul)(const sd_mat *W, const float *x, int ldx, float *y, int ldy, int T, sd_pool *p);
    /* out (T, n) = rmsnorm(x (T, n)) * w ; out may alias x */
    void (*rmsnorm)(float *out, const float *x, const float *w, int n, int T, float eps);
    /* in place on x (T, n_heads*hd): per head NeoX rotate_half RoPE at position pos0 + t;
     * cos/sin tables are (n_ctx, hd/2) */
    void (*rope)(float *x, int T, int n_heads, int hd, int pos0, const float *cos_t, const float *sin_t);
    /* g (T, n) = silu(g) * u */
    void (*silu_mul)(float *g, const float *u, int n, int T);
    /* Causal GQA attention of T queries at positions pos0..pos0+T-1 over cache entries
     * 0..pos0+t (the new K/V already stored). q (T, nh*hd), out (T, nh*hd). */
    void (*attention)(const sd_attn_shape *s, const sd_kv_layer *kv, const float *q, float *out,
                      int T, int pos0, float *scratch, sd_pool *p);
    /* matmul with int8 activations (src/cpu/ops_i8.h) over a quantized W that sd_i8_supported
     * takes: the same bits at every level, the reference set included */
    void (*matmul_i8)(const sd_mat *W, const float *x, int ldx, float *y, int ldy, int T, sd_pool *p);
    /* optional: matmul_i8 of n packed matrices over one x in one pass (sd_i8_matmul_n); -1 when
     * it did nothing (the caller then calls matmul_i8 per matrix) */
    int (*matmul_i8_n)(int n, const sd_mat *const *W, const float *x, int ldx, float *const *y, const int *ldy, int T,
                       sd_pool *p);
    /* optional: the greedy choice over W x_t without a separate pass (sd_i8_matmul_argmax); -1
     * when it did nothing */
    int (*matmul_i8_argmax)(const sd_mat *W, const float *x, int ldx, int T, sd_pool *p, float *scratch, int32_t *out);
} sd_ops;

/* The scalar reference set and the fastest set this CPU supports. */
const sd_ops *sd_ops_ref(void);
const sd_ops *sd_ops_fast(void);
/* Scratch floats `attention` needs for T queries at context length n_ctx. */
size_t sd_attention_scratch_floats(const sd_attn_shape *s, int T, int n_ctx, int n_threads);

/* Store T rows of K or V (T, nkv*hd) f32 at positions pos0.. into a cache buffer. */
void sd_kv_store(sd_kv_dtype_e dt, void *cache, int row_elems, int pos0, const float *src, int T);

/* The fastest level for f32 (int8 = 0) or int8 activations (calibrate.c), SPECDEC_SIMD first. */
const sd_ops *sd_ops_fast_prec(int int8);
/* Whether precision 0 (the default) means int8 activations on the CPU. Measured: classic decode
 * 1.8x f32's tok/s on the embedded model, 2 threads, Zen 5 AVX-512 (and faster at the AVX2 level
 * too), quality top-1 99.5% / KL 0.0003 nats against f32
 * (docs/benchmarks/cpu-decode-vs-llamacpp-epyc-zen5-2026-12-02-b.md); --precision f32 keeps the
 * path held to HF transformers' greedy text. */
#define SD_CPU_DEFAULT_INT8 1
int sd_cpu_default_int8(void);

/* Name of the SIMD level in use ("avx512", "avx2", "neon", "scalar"). */
const char *sd_simd_name(void);
/* SPECDEC_SIMD (environment) picks the level by hand. Returns its value when it is set but names
 * no level this machine runs (the runtime then refuses to start), else NULL. */
const char *sd_simd_env_rejected(void);
/* SPECDEC_OK, or SPECDEC_ERR_INVALID_ARG with the one message for a rejected SPECDEC_SIMD
 * (the runtime and `specdec info` both report it). */
specdec_status sd_simd_check(specdec_err *err);

/* Test switch: perturb one reduction of the fast matmul when T > 1 so that block and chain
 * results differ in the last bit. Used only by the exactness-probe tests. */
void sd_ops_debug_break_invariance(int on);

#endif
