/* rmsnorm.h: out = x / sqrt(mean(x^2) + eps) * w per row (rmsnorm.cu). */
#ifndef SD_CUDA_RMSNORM_H
#define SD_CUDA_RMSNORM_H
#include "cuda/dev.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out (T, ldo) = rmsnorm(x (T, ldx)) * w over n entries; out may alias x (same ld). */
cudaError_t sdc_rmsnorm(float *out, int ldo, const float *x, int ldx, const float *w, int n, int T, float eps,
                        const sdc_dev *d);

#ifdef __cplusplus
}
#endif
#endif
