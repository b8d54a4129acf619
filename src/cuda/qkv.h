/* qkv.h: Qwen3's steps between the q/k/v projections and attention in one launch (qkv.cu): each
 * q and k head normed (RMSNorm by its weights) then rotated (NeoX RoPE), k and v stored into the
 * layer's caches. Every value is bit for bit what rmsnorm.cu, sdc_rope and sdc_kv_store give. */
#ifndef SD_CUDA_QKV_H
#define SD_CUDA_QKV_H
#include "cuda/dev.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SDC_QKV_MAX_HD 256   /* head_dim at most (a warp's row in shared memory) */

typedef struct sdc_qkv_params {
    float *q, *k;             /* (T, nh*hd), (T, nkv*hd): normed and rotated in place */
    const float *v;           /* (T, nkv*hd) */
    const float *qw, *kw;     /* (hd) norm weights */
    float eps;
    int T, nh, nkv, hd;
    const int32_t *pos_base;  /* row t at *pos_base + pos_off + t */
    int pos_off;
    const float *cos_t, *sin_t;   /* (n_ctx, hd/2) */
    int kv_dt;                /* SDC_F32 / SDC_F16 / SDC_BF16 */
    void *kc, *vc;            /* caches: rows of nkv*hd */
} sdc_qkv_params;

cudaError_t sdc_qk_norm_rope_store(const sdc_qkv_params *p, const sdc_dev *d);

#ifdef __cplusplus
}
#endif
#endif
