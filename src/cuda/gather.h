/* gather.h: rows gathered by device-resident indices (gather.cu): the embedding lookup and the
 * copy of one row of a (rows, ld) buffer. */
#ifndef SD_CUDA_GATHER_H
#define SD_CUDA_GATHER_H
#include "cuda/dev.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sdc_embed_params {
    const void *w;            /* dense (rows, cols) of dt, or u32 codes (rows, cols*bits/32) */
    const void *scales;       /* quantized: (rows, cols/group) of dt */
    const void *biases;
    int dt;                   /* SDC_F32 / SDC_F16 / SDC_BF16: the dense dtype or that of scales/biases */
    int bits, group;          /* bits 0: dense */
    int rows, cols;
    const int32_t *ids;       /* (T) row indices; one outside [0, rows) gives a row of zeros */
    int T;
    float *x;                 /* (T, ldx) */
    int ldx;
} sdc_embed_params;

cudaError_t sdc_embed(const sdc_embed_params *p, const sdc_dev *d);
/* dst (n) = row (*idx + off) of src (rows of ld floats) */
cudaError_t sdc_copy_row(float *dst, const float *src, int ld, int n, const int32_t *idx, int off, const sdc_dev *d);

#ifdef __cplusplus
}
#endif
#endif
