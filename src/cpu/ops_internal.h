/* ops_internal.h: what the fast dispatcher (ops_fast.c) and the per-ISA kernel files
 * (ops_avx512.c, ops_avx2.c, ops_neon.c) share. Not a public interface.
 *
 * Quantized matmul layout trick. A kernel with L lanes of u32 loads one "block" of L packed
 * words (L*E elements, E = 32/bits elements per word). Lane l then holds elements
 * l*E .. l*E+E-1 of the block; shifting by bits*k and masking gives element l*E+k in lane l.
 * So the activations are permuted once per call to match:
 *   xp[b*L*E + k*L + l] = x[b*L*E + l*E + k]        (zero padded to whole blocks)
 *   xs[gi]              = sum of x over group gi, j ascending   (zero padded to 16 groups)
 * A row's value is then
 *   sum over blocks of (sum_k q_k * xp_k) * scale_lane   +   sum over groups of bias * xs,
 * i.e. scale*q + bias with no horizontal sum per group: the scale term is accumulated per
 * lane, the bias term is a short dot product over the groups. The permutation and the order
 * of every sum depend only on cols (and L), never on T or the thread split. */
#ifndef SD_OPS_INTERNAL_H
#define SD_OPS_INTERNAL_H
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include "cpu/ops.h"

/* Scratch floats one attention thread uses for a context of n keys (scores, 16-aligned). */
static inline size_t sd_attn_scratch_stride(int n) { return ((size_t)(n > 0 ? n : 1) + 15u) / 16u * 16u + 16u; }

float sd_ref_elem_f32(specdec_dtype dt, const void *p, size_t e);

/* One matmul call as the kernels see it. */
typedef struct sd_mm_args {
    const sd_mat *W;
    const float *x;  int ldx;   /* (T, ldx) raw activations (dense kernels) */
    const float *xp; int ldxp;  /* (T, ldxp) permuted activations (quantized kernels) */
    const float *xs; int ldxs;  /* (T, ldxs) per-group sums of x (quantized kernels) */
    const int32_t *gidx;        /* (16*group/(L*E), L): lane -> group within a super-block of 16
                                   groups, per block of the super-block (quantized kernels) */
    float *y;        int ldy;   /* (T, ldy) */
    int T;
} sd_mm_args;

/* A SIMD level's kernels. mm_rows computes y[t][r] for all t < T and r0 <= r < r1; the
 * arithmetic for one (t, r) is the same whatever r0, r1 and T. */
typedef struct sd_isa {
    const char *name;
    int lanes;   /* L above: u32 lanes per quantized block */
    void (*mm_rows)(const sd_mm_args *a, int r0, int r1);
    /* rmsnorm of one row of n */
    void (*rmsnorm_row)(float *out, const float *x, const float *w, int n, float eps);
    /* one (query, head): scores over n keys, softmax, weighted sum of V -> out[hd].
     * k, v point at key 0 of this kv head; consecutive keys are `stride` elements apart. */
    void (*attn_one)(const float *q, const void *k, const void *v, size_t stride, int hd,
                     sd_kv_dtype_e dt, int n, float scale, float *scores, float *out);
    /* optional (NULL: the dispatcher calls attn_one per head): the g query heads q[i*hd..] that
     * share one kv head, in one pass over its K and V rows; out[i*hd..]; scores: g * sstride
     * floats. Each head's arithmetic must be exactly attn_one's (same bits). */
    void (*attn_group)(const float *q, int g, const void *k, const void *v, size_t stride, int hd,
                       sd_kv_dtype_e dt, int n, float scale, float *scores, size_t sstride, float *out);
} sd_isa;

/* Calls BODY(HD, DT) with head_dim 128 and the KV dtype as compile-time constants, so that an
 * always-inline attention body unrolls its chunk loops and keeps its accumulators in registers;
 * any other head_dim gets the run-time values (same operations, same order, same bits). */
#define SD_ATTN_SPECIALIZE(hd, dt, BODY)                                  \
    do {                                                                  \
        if ((hd) == 128 && (dt) == SD_KV_F32) BODY(128, SD_KV_F32);       \
        else if ((hd) == 128 && (dt) == SD_KV_BF16) BODY(128, SD_KV_BF16); \
        else if ((hd) == 128) BODY(128, SD_KV_F16);                       \
        else BODY((hd), (dt));                                            \
    } while (0)

/* Kernel sets; NULL when not compiled for this target. */
const sd_isa *sd_isa_avx512(void);
const sd_isa *sd_isa_avx2(void);
const sd_isa *sd_isa_neon(void);
const sd_isa *sd_isa_portable(void);

/* Fast ops for an explicit level ("avx512", "avx2", "neon", "portable"); NULL when this CPU
 * or build cannot run it. Tests use this to check every level the machine supports. */
const sd_ops *sd_ops_fast_level(const char *level);

/* bench_matmul's A/B switch for the AVX-512 short-row quantized kernel (ops_avx512.c; bit 0 on
 * by default). Both settings give bitwise the same results; only the speed differs. */
extern int sd_avx512_qs_mode;

/* Per-thread aligned scratch of n floats for the calling thread's matmul preparation (grows,
 * never shrinks, freed at thread exit); NULL when out of memory. */
float *sd_ops_scratch(size_t n);

/* The debug switch of sd_ops_debug_break_invariance (read by the dispatcher). */
extern int sd_ops_dbg_break;

/* The scalar element-wise references (ops_ref.c), shared by the fast levels that have no
 * SIMD version of them. */
void sd_ref_rope(float *x, int T, int n_heads, int hd, int pos0, const float *cos_t, const float *sin_t);
void sd_ref_silu_mul(float *g, const float *u, int n, int T);

/* Softmax numerators in key order, shared by every SIMD level so that the weights (and their
 * sum, accumulated in the same fixed order) are the same bits everywhere: sc[j] = exp(sc[j] - mx),
 * returns the sum. */
static inline float sd_softmax_exp(float *sc, int n, float mx) {
    float sum = 0.0f;
    for (int j = 0; j < n; j++) {
        float e = expf(sc[j] - mx);
        sc[j] = e;
        sum += e;
    }
    return sum;
}

#endif
