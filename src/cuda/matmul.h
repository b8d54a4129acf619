/* matmul.h: y = x W^T for dense and affine-quantized W (matmul.cu), and the fused LM head +
 * argmax over its rows that never writes the logits. */
#ifndef SD_CUDA_MATMUL_H
#define SD_CUDA_MATMUL_H
#include "cuda/dev.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SDC_LMA_MAX_GRID 1024   /* blocks of a fused LM head call at most (its partials: T x this) */
#define SDC_LMA_MAX_T 256       /* tokens of one fused LM head launch at most (a call loops) */

/* Weight formats: dense f32 / f16 / bf16, or 4- / 8-bit codes with per-group scale and bias
 * against f32 activations (Q4, Q8) or against activations quantized to int8 in blocks of 32
 * columns (Q4I, Q8I: precision int8, mm_core.cuh). */
enum { SDC_MM_F32 = 0, SDC_MM_F16, SDC_MM_BF16, SDC_MM_Q4, SDC_MM_Q8, SDC_MM_Q4I, SDC_MM_Q8I, SDC_MM_NFMT };

/* Steps the int8 preparation may apply to x first (sdc_mm_params.pre). */
enum { SDC_PRE_NONE = 0, SDC_PRE_RMSNORM, SDC_PRE_SWIGLU };

/* Columns of one 16-byte chunk of a row. */
static inline int sdc_mm_chunk_cols(int fmt) {
    return fmt == SDC_MM_Q4 || fmt == SDC_MM_Q4I ? 32 : fmt == SDC_MM_Q8 || fmt == SDC_MM_Q8I ? 16 : fmt == SDC_MM_F32 ? 4 : 8;
}
/* Shared-memory bytes the staged x takes per chunk and token: f32 columns (16 bytes per 4) plus
 * a quantized format's per-chunk sum (4 bytes); int8: the codes plus the block scale and scaled
 * sum (8 bytes). */
static inline int sdc_mm_stage_bytes(int fmt) {
    switch (fmt) {
    case SDC_MM_Q4: case SDC_MM_Q8: return sdc_mm_chunk_cols(fmt) * 4 + 4;
    case SDC_MM_Q4I: case SDC_MM_Q8I: return sdc_mm_chunk_cols(fmt) + 8;
    default: return sdc_mm_chunk_cols(fmt) * 4;
    }
}
static inline int sdc_mm_quant(int fmt) { return fmt >= SDC_MM_Q4 && fmt < SDC_MM_NFMT; }
static inline int sdc_mm_i8(int fmt) { return fmt == SDC_MM_Q4I || fmt == SDC_MM_Q8I; }
/* ncp for a row of cols columns, and the scratch bytes of xq and xsd for T tokens. The bytes
 * cover T rounded up to 8: gemv.cu's kernel reads its token tile (up to 8 rows) whole from the
 * prepared rows, the rows past T included (their sums are never stored); sized for T alone, a
 * call of 3 tokens read a fourth row past the scratch (compute-sanitizer memcheck, H100). */
static inline int sdc_mm_ncp(int fmt, int cols) {
    const int e = sdc_mm_chunk_cols(fmt);
    return ((cols + e - 1) / e + 31) & ~31;
}
static inline size_t sdc_mm_i8_rows(int T) { return ((size_t)(T > 0 ? T : 1) + 7u) & ~(size_t)7u; }
static inline size_t sdc_mm_i8_xq_bytes(int fmt, int cols, int T) {
    return sdc_mm_i8_rows(T) * (size_t)sdc_mm_ncp(fmt, cols) * (fmt == SDC_MM_Q4I ? 32u : 16u);
}
static inline size_t sdc_mm_i8_xsd_bytes(int fmt, int cols, int T) {
    return sdc_mm_i8_rows(T) * (size_t)sdc_mm_ncp(fmt, cols) * 8u;
}

#define SDC_MM_SEGS 3   /* outputs of one sdc_matmul launch at most */

/* Output s >= 1 of a launch over matrices laid end to end (sdc_mm_params.seg): launch rows
 * [row0, the next output's row0 or rows) are stored into y (T, ldy) from its row 0. */
typedef struct sdc_mm_seg {
    float *y;
    int ldy, row0;
} sdc_mm_seg;

typedef struct sdc_mm_params {
    const void *w;        /* dense: (rows, cols) elements; quantized: u32 (rows, cols*bits/32) */
    const void *scales;   /* quantized: (rows, cols/group) of sdt */
    const void *biases;   /* quantized: (rows, cols/group) of sdt */
    int fmt;              /* SDC_MM_* */
    int sdt;              /* SDC_F32 / SDC_F16 / SDC_BF16: scales and biases */
    int rows, cols, group;
    int wvec;             /* 1: every row starts 16-byte aligned and holds whole 16-byte chunks */
    const float *x;       /* (T, ldx) activations */
    int ldx;
    int xvec;             /* 1: x is 16-byte aligned and ldx % 4 == 0 (float4 loads) */
    float *y;             /* matmul: (T, ldy) */
    int ldy;
    int T;
    /* int8 formats (Q4I, Q8I): scratch the call fills with the quantized x (mm_core.cuh): xq
     * T * ncp * 16 * (2 for Q4I, 1 for Q8I) bytes, xsd T * ncp float pairs; sdc_mm_i8_bytes */
    void *xq, *xsd;
    int ncp;              /* chunks per token in xq / xsd: the row's chunks rounded up to 32 */
    /* matrices laid end to end in memory (one w, scales and biases; rows the total) whose rows
     * go to nseg outputs (0 or 1: y, ldy above only): rows [0, seg[1].row0) to y, ldy, rows
     * [seg[s].row0, ...) to seg[s] (seg[0] unused). Only where a row is stored changes. */
    int nseg;
    sdc_mm_seg seg[SDC_MM_SEGS];
    /* 1: every stored value is added to what its output held (y + the row's value, one rounding:
     * what matmul into scratch and then add give); the residual adds of a layer */
    int acc;
    /* int8 formats only: a step the preparation kernel applies to x before quantizing it, its
     * result written to pre_out (T, pre_ld) as the op it stands for would write it.
     * SDC_PRE_RMSNORM: rmsnorm of x's cols entries by pre_w with pre_eps (rms_core.cuh's order);
     * SDC_PRE_SWIGLU: silu(x) * pre_u (pre_u: T rows of ldx), as pointwise.cu's silu_mul. */
    int pre;
    int early;            /* set by sdc_matmul: the preparation lets its matmul start before it waits (common.cuh) */
    const float *pre_w, *pre_u;
    float pre_eps;
    float *pre_out;
    int pre_ld;
    /* lm_argmax only */
    sdc_best *part;       /* (T, grid) scratch: each block's best row per token */
    const int32_t *map;   /* NULL or (rows): row index -> token id */
    int32_t *out;         /* (T) */
} sdc_mm_params;

/* Opt every matmul kernel in to its dynamic shared memory (once per device): the tiled kernel
 * `bytes` (its x tile budget), gemv.cu's kernel gv_bytes (the whole x of up to 8 tokens). */
cudaError_t sdc_mm_init(int bytes, int gv_bytes);
/* y (T, ldy) = x . W^T (for each matrix of p->seg when p->nseg > 1). */
cudaError_t sdc_matmul(const sdc_mm_params *p, const sdc_dev *d);
/* The MLP block at int8 in three launches: gu (gate and up joined, nseg 2, pre SDC_PRE_RMSNORM:
 * xn and its int8 form by the norm preparation), then gemv_i4.cu's gi_swq_kernel (g, u and
 * silu(g) * u into g as silu_mul leaves it, and its int8 form into xq2 / xsd2), then down (acc:
 * added to its y) over that form; every value the bits of norm_matmul_n then swiglu_matmul_add.
 * *taken 0 (nothing queued) where the shapes, T or the kernels in force do not allow it
 * (sdc_gi_swq_plan, sd_cuda_mlp_fuse); xq2 and xsd2 hold sdc_mm_i8_*_bytes(SDC_MM_Q4I,
 * down->cols, T). */
cudaError_t sdc_mlp(const sdc_mm_params *gu, const sdc_mm_params *down, void *xq2, void *xsd2, const sdc_dev *d,
                    int *taken);
/* Blocks the fused LM head + argmax will launch for these parameters (part needs T x that). */
int sdc_lm_argmax_grid(const sdc_mm_params *p, const sdc_dev *d);
/* out[t] = map[a] (a itself when map is NULL), a = argmax_r (W x_t)[r] with the logits computed
 * bit for bit as sdc_matmul computes them; p->part must hold T * sdc_lm_argmax_grid() entries. */
cudaError_t sdc_lm_argmax(const sdc_mm_params *p, const sdc_dev *d);

#ifdef __cplusplus
}
#endif
#endif
