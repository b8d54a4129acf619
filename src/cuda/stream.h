/* stream.h: the weight-streaming matmul kernel (stream.cu) for T = 1..8: the rows' bytes move
 * from memory into shared memory by bulk asynchronous copies (sm_90), several stages in flight,
 * while the block's warps compute on the stages already landed. matmul.cu picks it where it
 * applies and falls back to gemv.cu's or its own tiled kernel elsewhere; all of them give a row
 * the same bits (mm_core.cuh), so the choice never changes a value. */
#ifndef SD_CUDA_STREAM_H
#define SD_CUDA_STREAM_H
#include "cuda/matmul.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SDC_ST_MAX_T 8        /* tokens of one launch at most */
#define SDC_ST_MAX_STAGES 4   /* stages in flight per block at most: ~150 KB at T = 1, far above the
                               * ~40 KB an SM needs in flight at full bandwidth, and leaving room
                               * beside it for a block of the kernel before (programmatic launch) */

/* How one call launches (nothing in it changes a row's arithmetic). */
typedef struct sdc_st_plan {
    const void *fn;    /* the kernel */
    int nwc;           /* compute warps per block (the block has one more: the copier) */
    int rt;            /* rows per tile: R rows for each compute warp */
    int sc, nsl;       /* chunks per slice of a row (a multiple of 32), slices per row */
    int nst;           /* stages */
    int stw, sts;      /* bytes per row in a stage: codes (sc * 16), scales (and as many for biases) */
    int tile_ch;       /* chunks of x staged per token */
    int xoff, stoff;   /* byte offsets of the staged x and of stage 0 in dynamic shared memory */
    int smem, grid;
} sdc_st_plan;

/* Opts the streaming kernels in to `bytes` of dynamic shared memory per block. */
cudaError_t sdc_st_init(int bytes);
/* Fills *pl and returns 1 when the streaming kernel takes this call (T <= SDC_ST_MAX_T, rows of
 * at least 32 chunks, 16-byte aligned rows, scales and biases, and at least two stages beside x
 * in `bytes` of shared memory), 0 when not, -1 on a CUDA error (in *e). */
int sdc_st_plan_for(const sdc_mm_params *p, const sdc_dev *d, int lma, int bytes, sdc_st_plan *pl, cudaError_t *e);
/* Queues the kernel (matmul: y; lma: each block's best per token into p->part, T x grid). */
cudaError_t sdc_st_launch(const sdc_st_plan *pl, const sdc_mm_params *p, const sdc_dev *d);

#ifdef __cplusplus
}
#endif
#endif
