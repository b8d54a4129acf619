/* pointwise.h: the element-wise ops (pointwise.cu): SwiGLU's silu(g) * u, a residual add, NeoX
 * RoPE at device-resident positions, and the KV store (f32 rows into the cache's dtype). */
#ifndef SD_CUDA_POINTWISE_H
#define SD_CUDA_POINTWISE_H
#include "cuda/dev.h"

#ifdef __cplusplus
extern "C" {
#endif

/* g (n) = silu(g) * u */
cudaError_t sdc_silu_mul(float *g, const float *u, size_t n, const sdc_dev *d);
/* x (n) += y (n) */
cudaError_t sdc_add(float *x, const float *y, size_t n, const sdc_dev *d);
/* in place on x (T, nh*hd): row t rotated at position *pos_base + pos_off + t; cos/sin (n_ctx, hd/2) */
cudaError_t sdc_rope(float *x, int T, int nh, int hd, const int32_t *pos_base, int pos_off, const float *cos_t,
                     const float *sin_t, const sdc_dev *d);
/* cache row pos(t) (row_elems of dt: SDC_F32 / SDC_F16 / SDC_BF16) = src row t (f32) */
cudaError_t sdc_kv_store(int dt, void *cache, int row_elems, const float *src, int T, const int32_t *pos_base,
                         int pos_off, const sdc_dev *d);

#ifdef __cplusplus
}
#endif
#endif
