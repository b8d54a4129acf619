/* tensor.h: the small vocabulary every layer shares: a weight matrix (dense or affine-quantized),
 * the KV cache's dtype and per-layer buffers, the attention shape, and where a call's rows sit in
 * the sequence. The model, the backend interface and every backend's kernels include this header
 * and nothing of each other's. Pointers inside these structs are backend memory: host memory on
 * the CPU backend, device memory on a GPU backend. */
#ifndef SD_TENSOR_H
#define SD_TENSOR_H
#include <stddef.h>
#include <stdint.h>
#include "specdec.h"

/* A linear weight W (rows = out features, cols = in features); y = W x.
 * Dense (bits == 0): w is (rows, cols) of `dtype` (F32, F16 or BF16).
 * Quantized (bits 4 or 8, model-format.md's MLX layout): w is u32 (rows, cols*bits/32), element j
 * of a row at bits [bits*(j%(32/bits)), +bits) of word j/(32/bits); scales and biases are
 * (rows, cols/group) of `dtype`; value = scale * q + bias. */
typedef struct sd_mat {
    int rows, cols;
    specdec_dtype dtype;   /* dense dtype, or dtype of scales/biases when quantized */
    int bits;              /* 0 dense, 4 or 8 quantized */
    int group;             /* quantization group size (32/64/128) */
    const void *w;
    const void *scales;
    const void *biases;
    bool part;             /* its buffers lie inside another matrix's upload (sd_be_upload_mats) */
    const void *pk;        /* a backend's own form of it, made at upload (the CPU's packed int8
                            * tiles, cpu/ops_i8.h), or NULL; released by sd_be_unload_mat */
} sd_mat;

/* Bytes the matrix occupies (what a full pass must read). */
uint64_t sd_mat_bytes(const sd_mat *m);
/* Bytes of its weights (codes or dense elements), and of its scales (as many of biases; 0 dense). */
uint64_t sd_mat_wbytes(const sd_mat *m);
uint64_t sd_mat_sbytes(const sd_mat *m);
/* Row r of a host-memory matrix as f32 (dense converted, quantized dequantized) into out[cols]. */
void sd_mat_row_f32(const sd_mat *m, int r, float *out);

typedef enum sd_kv_dtype_e { SD_KV_F32 = 0, SD_KV_BF16 = 1, SD_KV_F16 = 2 } sd_kv_dtype_e;

static inline size_t sd_kv_elem_size(sd_kv_dtype_e dt) { return dt == SD_KV_F32 ? 4 : 2; }

/* One layer's KV cache: K and V are (n_ctx, nkv, hd) of the cache's dtype. */
typedef struct sd_kv_layer {
    void *k;
    void *v;
} sd_kv_layer;

typedef struct sd_attn_shape {
    int n_heads, n_kv_heads, head_dim;
    sd_kv_dtype_e kv_dtype;
} sd_attn_shape;

/* Where the rows of a call sit: row t is at sequence position *base + off + t. `base` is backend
 * memory (one int32), so a device backend can replay one recorded sequence of launches for every
 * round while the position moves on the device. */
typedef struct sd_pos {
    const int32_t *base;
    int off;
} sd_pos;

#endif
