/* attention.h: causal GQA attention of T query rows over a KV cache (attention.cu), split over
 * fixed key chunks and fixed split slots (Flash-Decoding), then combined in a fixed order. */
#ifndef SD_CUDA_ATTENTION_H
#define SD_CUDA_ATTENTION_H
#include "cuda/dev.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SDC_ATTN_CHUNK 128    /* keys per chunk: chunk c holds keys [128c, 128c+128) */
#define SDC_ATTN_SPLITS 32    /* split slots: slot s merges chunks s, s+32, s+64, ... in order */
#define SDC_ATTN_MAX_HD 256

typedef struct sdc_attn_params {
    const float *q;           /* (T, nh*hd) */
    float *out;               /* (T, nh*hd) */
    const void *k, *v;        /* (n_ctx, nkv, hd) of kvdt */
    int kvdt;                 /* SDC_F32 / SDC_F16 / SDC_BF16 */
    int nh, nkv, hd, T;       /* hd a multiple of 16, at most SDC_ATTN_MAX_HD; nh % nkv == 0 */
    const int32_t *pos_base;  /* row t sits at *pos_base + pos_off + t and sees keys 0..that */
    int pos_off;
    float scale;              /* 1 / sqrt(hd) */
    float *part_o;            /* (T, nh, SDC_ATTN_SPLITS, hd) scratch */
    float *part_ml;           /* (T, nh, SDC_ATTN_SPLITS, 2) scratch: running max, sum of exp */
    int *count;               /* (T, nh) scratch, zeros between calls: finished slots per (row, head
                               * group), for attn_staged.cu (NULL: attention.cu's kernels only) */
} sdc_attn_params;

/* Scratch floats (part_o + part_ml) for calls of up to T rows (count: T * nh ints of its own). */
size_t sdc_attn_scratch_floats(int T, int nh, int hd);
cudaError_t sdc_attention(const sdc_attn_params *p, const sdc_dev *d);
/* attn_staged.cu: the same values, K and V of a chunk staged by cp.async and the slots merged in
 * the same launch (needs count and 16-byte aligned caches, which sdc_attention checks); sdc_attention calls it when
 * sd_cuda_attention_kernel(1) is in force, and falls back to its own kernels where it returns
 * cudaErrorNotSupported (its init failed). The init opts it in to its dynamic shared memory
 * (once per device; optin: the device's opt-in bytes per block). */
cudaError_t sdc_attn_staged(const sdc_attn_params *p, const sdc_dev *d);
cudaError_t sdc_attn_staged_init(int optin);

#ifdef __cplusplus
}
#endif
#endif
