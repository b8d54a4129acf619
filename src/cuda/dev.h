/* dev.h: what the CUDA host glue (C) and the kernel files (CUDA C++) share: the launch context,
 * the float dtype codes kernels take, and the (value, index) pair the argmax-like reductions
 * pass between their kernels. Each kernel family (one .cu file) has a tiny header of its own
 * with its parameter struct and launcher; every launcher queues its kernels on ctx->stream and
 * returns the launch status (cudaGetLastError), never synchronizing. */
#ifndef SD_CUDA_DEV_H
#define SD_CUDA_DEV_H
#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Float element types of weights, scales and KV caches as kernels see them. */
enum { SDC_F32 = 0, SDC_F16 = 1, SDC_BF16 = 2 };

/* Where and how kernels launch. */
typedef struct sdc_dev {
    cudaStream_t stream;   /* the backend's one stream */
    int n_sm;              /* multiprocessors (grid sizing) */
    int smem_budget;       /* bytes of dynamic shared memory a tiled matmul block may take (opted in) */
    int smem_optin;        /* bytes of dynamic shared memory any block may opt in to */
    int pdl;               /* 1: kernels launch programmatically dependent (common.cuh) */
} sdc_dev;

/* A candidate of an argmax: value and index (index -1 and value NaN: no candidate yet).
 * Larger value wins, ties go to the lower index, NaN never wins (sd_argmax's contract). */
typedef struct sdc_best {
    float v;
    int32_t i;
} sdc_best;

#ifdef __cplusplus
}
#endif
#endif
