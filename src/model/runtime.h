/* runtime.h: what one Qwen3 forward needs on a backend besides the weights: the KV cache, the
 * RoPE tables and the activation scratch for up to max_batch rows. The same layer code runs the
 * target's layers, a draft model's, and the MTP drafter's (each with its own runtime and cache).
 * Every buffer here is backend memory. */
#ifndef SD_RUNTIME_H
#define SD_RUNTIME_H
#include "specdec.h"
#include "model/config.h"
#include "model/weights.h"
#include "backend/backend.h"

/* A KV cache of n_layers layers: per layer K and V of (n_ctx, row), row = nkv*hd, in `dtype`. */
typedef struct sd_kv_cache {
    sd_kv_dtype_e dtype;
    int n_layers, n_ctx, row;
    sd_kv_layer *layers;        /* host array of backend pointers */
    sd_backend *be;
} sd_kv_cache;

specdec_status sd_kv_init(sd_kv_cache *kv, sd_backend *be, int n_layers, int n_ctx, int row, sd_kv_dtype_e dt,
                          specdec_err *err);
void sd_kv_free(sd_kv_cache *kv);

typedef struct sd_runtime {
    sd_backend *be;                /* borrowed */
    const sd_config *cfg;
    int n_ctx;
    int max_batch;                 /* most rows per layer call */
    sd_kv_dtype_e kv_dtype;
    int nh, nkv, I;                /* heads, KV heads, MLP columns this runtime computes: the model's, or
                                    * one rank's share on a tensor-parallel backend (src/tp/plan.h) */
    float *rope_cos, *rope_sin;    /* (n_ctx, hd/2) */
    /* scratch, max_batch rows each */
    float *xn;     /* (B, H) normed input */
    float *q;      /* (B, nh*hd) */
    float *k;      /* (B, nkv*hd) */
    float *v;      /* (B, nkv*hd) */
    float *att;    /* (B, nh*hd) */
    float *tmp;    /* (B, max(H, nh*hd)) projection output */
    float *gate;   /* (B, I) */
    float *up;     /* (B, I) */
    float *red;    /* (n_ranks, B, H) all-reduce scratch (tensor-parallel backends only) */
} sd_runtime;

/* Allocate the scratch and RoPE tables on `be` and reserve the backend's op scratch for this
 * shape. On a tensor-parallel backend the shapes are one rank's (a config that does not split over
 * its ranks is SPECDEC_ERR_INVALID_ARG naming the shape). */
specdec_status sd_runtime_init(sd_runtime *rt, sd_backend *be, const sd_config *cfg, int n_ctx, int max_batch,
                               sd_kv_dtype_e kvdt, specdec_err *err);
void sd_runtime_free(sd_runtime *rt);

/* One pre-norm Qwen3 decoder layer over x (T, H) in place, rows at positions pos(t), T <= max_batch;
 * writes the rows' K/V into kv at those positions. With tensor parallelism each rank runs its heads
 * and MLP columns, and the backend's allreduce sums the o_proj and down_proj partials. */
specdec_status sd_layer_forward(sd_runtime *rt, const sd_layer_w *L, const sd_kv_layer *kv, float *x, int T,
                                sd_pos pos, specdec_err *err);

#endif
