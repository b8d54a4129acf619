/* gemv_i4.h: the lean matmul kernel for the common decode case (gemv_i4.cu): 4-bit weights
 * against int8 activations (SDC_MM_Q4I), rows of a multiple of 1024 columns, T = 1..8.
 * matmul.cu picks it first where it applies and falls back to gemv.cu's or its tiled kernel
 * elsewhere; all of them give a row the same bits (mm_core.cuh), so the choice never changes a
 * value. */
#ifndef SD_CUDA_GEMV_I4_H
#define SD_CUDA_GEMV_I4_H
#include "cuda/matmul.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SDC_GI_MAX_T 8   /* tokens of one launch at most */

/* How one call launches (nothing in it changes a row's arithmetic). */
typedef struct sdc_gi_plan {
    const void *fn;   /* the kernel */
    int nj;           /* chunks per lane in a row: cols / 1024 */
    int pre;          /* 1: the first batch loaded before the wait where the kernel may (gemv_i4.cu's gi_pre) */
    int nw, nrb;      /* warps per block; row blocks (nw warps' rows each) */
    int smem, grid;   /* dynamic shared bytes (the fused LM head's per-warp bests); blocks */
} sdc_gi_plan;

/* Fills *pl and returns 1 when this kernel takes the call (SDC_MM_Q4I; T <= SDC_GI_MAX_T;
 * 16-byte aligned rows of a multiple of 1024 columns; a power-of-two group of 32 to 1024
 * columns; f32, f16 or bf16 scales), 0 when not, -1 on a CUDA error (in *e). */
int sdc_gi_plan_for(const sdc_mm_params *p, const sdc_dev *d, int lma, sdc_gi_plan *pl, cudaError_t *e);
/* The MLP's gate and up projections with SwiGLU and the down projection's int8 preparation in
 * their epilogue (gi_swq_kernel): where the outputs go. */
typedef struct sdc_swq_out {
    float *g, *u;     /* (T, ld): silu(g) * u as silu_mul leaves it in g, and u */
    int ld;
    void *xq, *xsd;   /* the down projection's int8 x (mm_core.cuh's 4-bit layout), ncp chunks a token */
    int ncp;
} sdc_swq_out;

/* Plans gi_swq_kernel for p: a joined gate + up launch (nseg 2, gate's rows then as many of up's,
 * a multiple of 32 each) that gemv_i4.cu's kernel takes, x prepared (pre none), T <= 2, every
 * 32-row group a block of its own in one wave, and (full) the groups 90% of that wave
 * (gemv_i4.cu says why). 1 planned, 0 not taken, -1 on a CUDA error. */
int sdc_gi_swq_plan(const sdc_mm_params *p, const sdc_dev *d, int full, sdc_gi_plan *pl, cudaError_t *e);
cudaError_t sdc_gi_swq_launch(const sdc_gi_plan *pl, const sdc_mm_params *p, const sdc_swq_out *o, const sdc_dev *d);

/* Queues the kernel (matmul: y; lma: each block's best per token into p->part, T x grid). */
cudaError_t sdc_gi_launch(const sdc_gi_plan *pl, const sdc_mm_params *p, const sdc_dev *d);

#ifdef __cplusplus
}
#endif
#endif
