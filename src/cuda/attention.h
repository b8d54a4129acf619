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

/* The q/k head norms, the rotation and the KV stores (qkv.h's launch) fused into the staged
 * kernel: each block norms and rotates the q heads it serves, and the keys of this call that
 * fall in its chunks, itself from the projections, so the launch before attention is gone. The
 * caches and out get the bits qkv.h's launch then sdc_attention give; p.q holds q before its
 * norm and is left so, as is f.k (the rotated heads stay in shared memory). For calls of up to
 * SDC_ATTN_FUSE_T rows (each block norms up to that many keys itself). sdc_attention_fused
 * returns cudaErrorNotSupported where it does not apply (the staged kernel or the fusion off,
 * the staged kernel not set up, buffers not 16-byte aligned, more rows, K and V chunks not
 * fitting in shared memory together): the caller then queues the two launches. */
#define SDC_ATTN_FUSE_T 16
typedef struct sdc_attn_fuse {
    const float *k, *v;            /* (T, nkv*hd): this call's k before its norm, and v */
    const float *qw, *kw;          /* (hd) norm weights */
    const float *cos_t, *sin_t;    /* (n_ctx, hd/2) */
    float eps;
    void *kc, *vc;                 /* p.k and p.v, written: the keys of this call's rows */
} sdc_attn_fuse;
cudaError_t sdc_attention_fused(const sdc_attn_params *p, const sdc_attn_fuse *f, const sdc_dev *d);
/* attn_staged.cu's launch of it (sdc_attention_fused has checked the policy and alignment). */
cudaError_t sdc_attn_staged_fused(const sdc_attn_params *p, const sdc_attn_fuse *f, const sdc_dev *d);

#ifdef __cplusplus
}
#endif
#endif
