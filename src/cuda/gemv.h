/* gemv.h: the matmul kernel for few tokens (gemv.cu), T = 1..8 with the whole x in shared memory;
 * matmul.cu picks it where it applies and falls back to its tiled kernel elsewhere. Both give a
 * row the same bits (mm_core.cuh), so the choice never changes a value. */
#ifndef SD_CUDA_GEMV_H
#define SD_CUDA_GEMV_H
#include "cuda/matmul.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SDC_GV_MAX_T 8   /* tokens of one launch at most */

/* How one gemv call launches (nothing in it changes a row's arithmetic). */
typedef struct sdc_gv_plan {
    const void *fn;   /* the kernel */
    int lg;           /* log2 of the lanes that share a row: 3, 4 or 5 */
    int tile_ch;      /* chunks of x staged per token (the row's chunks, padded) */
    int nw, nrb;      /* warps per block; row blocks (nw warps' rows each) */
    int smem, grid;   /* dynamic shared bytes; blocks */
} sdc_gv_plan;

/* Opts the gemv kernels in to `bytes` of dynamic shared memory per block. */
cudaError_t sdc_gv_init(int bytes);
/* Fills *pl and returns 1 when the gemv kernel takes this call (T <= SDC_GV_MAX_T and x fits
 * in `bytes` of shared memory), 0 when not, -1 on a CUDA error (in *e). */
int sdc_gv_plan_for(const sdc_mm_params *p, const sdc_dev *d, int lma, int bytes, sdc_gv_plan *pl, cudaError_t *e);
/* Queues the kernel (matmul: y; lma: each block's best per token into p->part, T x grid). */
cudaError_t sdc_gv_launch(const sdc_gv_plan *pl, const sdc_mm_params *p, const sdc_dev *d);

#ifdef __cplusplus
}
#endif
#endif
