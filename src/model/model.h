/* model.h: the loaded model (config + mmapped weights) and the runtime a forward pass needs:
 * ops table, thread pool, RoPE tables, scratch, and KV caches. The same layer code serves the
 * target and the MTP drafter's layers (each with its own KV cache). */
#ifndef SD_MODEL_H
#define SD_MODEL_H
#include "specdec.h"
#include "model/config.h"
#include "model/weights.h"
#include "io/safetensors.h"
#include "cpu/ops.h"
#include "cpu/pool.h"

struct specdec_model {
    sd_config cfg;
    sd_st_set *st;
    sd_weights w;
    char dir[1024];
};

/* A KV cache for n_layers layers: per layer K and V of (n_ctx, row) where row = nkv*hd. */
typedef struct sd_kv_cache {
    sd_kv_dtype_e dtype;
    int n_layers, n_ctx, row;
    sd_kv_layer *layers;
    void *mem;
} sd_kv_cache;

specdec_status sd_kv_init(sd_kv_cache *kv, int n_layers, int n_ctx, int row, sd_kv_dtype_e dt,
                          specdec_err *err);
void sd_kv_free(sd_kv_cache *kv);

/* Everything one forward call needs besides weights and KV: shared by target and drafters. */
typedef struct sd_runtime {
    const sd_config *cfg;
    const sd_ops *ops;
    sd_pool *pool;
    bool pool_borrowed;       /* pool belongs to another runtime (sd_runtime_init_shared) */
    int n_threads;
    int n_ctx;
    int max_batch;            /* most positions per layer call */
    sd_kv_dtype_e kv_dtype;
    float *rope_cos, *rope_sin;   /* (n_ctx, hd/2) */
    /* scratch, sized for max_batch positions */
    float *xn;     /* (B, H) normed input */
    float *q;      /* (B, nh*hd) */
    float *k;      /* (B, nkv*hd) */
    float *v;      /* (B, nkv*hd) */
    float *att;    /* (B, nh*hd) */
    float *tmp;    /* (B, H) projection output */
    float *gate;   /* (B, I) */
    float *up;     /* (B, I) */
    float *attn_scratch;
} sd_runtime;

specdec_status sd_runtime_init(sd_runtime *rt, const sd_config *cfg, int n_ctx, int max_batch,
                               int n_threads, sd_kv_dtype_e kvdt, bool reference, specdec_err *err);
/* The same, but running on an existing thread pool (e.g. the target's, so a drafter and the
 * target never compete for cores) with the given ops table; sd_runtime_free leaves the pool. */
specdec_status sd_runtime_init_shared(sd_runtime *rt, const sd_config *cfg, int n_ctx, int max_batch,
                                      sd_pool *pool, const sd_ops *ops, sd_kv_dtype_e kvdt,
                                      specdec_err *err);
void sd_runtime_free(sd_runtime *rt);

/* One pre-norm Qwen3 decoder layer over x (T, H) in place, positions pos0..pos0+T-1, T <= max_batch.
 * Writes the new K/V into kv at those positions. */
void sd_layer_forward(sd_runtime *rt, const sd_layer_w *L, sd_kv_layer *kv, float *x, int T, int pos0);

/* Embedding rows for T tokens into x (T, H). */
void sd_embed(const sd_mat *embed, const int32_t *tokens, int T, float *x);

#endif
