/* mma_i4.h: the tensor-core matmul for wide calls (mma_i4.cu): 4-bit weights against int8
 * activations (SDC_MM_Q4I), rows of a multiple of 1024 columns, T >= SDC_MQ_MIN_T (prefill
 * chunks, wide verifies). The integer sums of a chunk come from mma.sync; the float part and
 * its order are the contract's (matmul.cu), so the bits are the other kernels'. On by default
 * (sd_cuda_mma, cuda_backend.h). */
#ifndef SD_CUDA_MMA_I4_H
#define SD_CUDA_MMA_I4_H
#include "cuda/matmul.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SDC_MQ_MIN_T 16   /* narrower calls keep gemv_i4.cu's / gemv.cu's kernels */

typedef struct sdc_mq_plan {
    int nj;            /* chunks of a row in each of its 32 classes: cols / 1024 */
    int gx, gy;        /* blocks: row tiles x token tiles (mma_tile.cu: token tiles x row tiles) */
    int nt;            /* mma_tile.cu: 8-token groups of a block */
    int ws;            /* mma_tile.cu: the weights staged too (sd_cuda_mma mode 4) */
} sdc_mq_plan;

/* Fills *pl and returns 1 when the kernel takes the call (SDC_MM_Q4I, T >= SDC_MQ_MIN_T, not a
 * fused LM head, 16-byte aligned rows of a multiple of 1024 columns, a power-of-two group of 32
 * to 1024, f32 / f16 / bf16 scales, x prepared), else 0. */
int sdc_mq_plan_for(const sdc_mm_params *p, int lma, sdc_mq_plan *pl);
cudaError_t sdc_mq_launch(const sdc_mq_plan *pl, const sdc_mm_params *p, const sdc_dev *d);

/* mma_tile.cu: the same calls and bits with the operands staged (sd_cuda_mma modes 2 and 4).
 * init: its shared memory, once; plan_for: sdc_mq_plan_for's test, the tile for n_sm
 * multiprocessors, ws: the weights, scales and biases staged with the activations. */
cudaError_t sdc_mt_init(void);
int sdc_mt_plan_for(const sdc_mm_params *p, int lma, int n_sm, int ws, sdc_mq_plan *pl);
cudaError_t sdc_mt_launch(const sdc_mq_plan *pl, const sdc_mm_params *p, const sdc_dev *d);

#ifdef __cplusplus
}
#endif
#endif
