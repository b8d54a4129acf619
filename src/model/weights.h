/* weights.h: the Qwen3 weights as plain structs of pointers into the mmapped safetensors.
 * Shapes use H = hidden, I = intermediate, V = vocab, nh/nkv = heads, hd = head_dim. */
#ifndef SD_WEIGHTS_H
#define SD_WEIGHTS_H
#include <stdint.h>
#include "specdec.h"
#include "model/config.h"
#include "io/safetensors.h"
#include "backend/tensor.h"

typedef struct sd_layer_w {
    const float *attn_norm;   /* (H) input_layernorm, converted to f32 at load */
    const float *mlp_norm;    /* (H) post_attention_layernorm */
    const float *q_norm;      /* (hd) */
    const float *k_norm;      /* (hd) */
    sd_mat q;                 /* (nh*hd, H) */
    sd_mat k;                 /* (nkv*hd, H) */
    sd_mat v;                 /* (nkv*hd, H) */
    sd_mat o;                 /* (H, nh*hd) */
    sd_mat gate;              /* (I, H) */
    sd_mat up;                /* (I, H) */
    sd_mat down;              /* (H, I) */
} sd_layer_w;

typedef struct sd_mtp_w {
    int n_layers;
    const float *pre_fc_norm_embedding; /* (H) */
    const float *pre_fc_norm_hidden;    /* (H) */
    const float *norm;                  /* (H) */
    sd_mat fc;                          /* (H, 2H): input is concat(e, g) */
    sd_layer_w *layers;                 /* (n_layers) */
    void **owned;                       /* host buffers this copy owns (sd_mtp_q4), n_owned of them */
    int n_owned;
} sd_mtp_w;

typedef struct sd_weights {
    sd_mat embed;             /* (V, H) */
    sd_mat lm_head;           /* (V, H); a copy of `embed` when tied */
    const float *final_norm;  /* (H) */
    sd_layer_w *layers;       /* (L) */
    sd_mtp_w *mtp;            /* NULL when absent or not requested */
    float *f32_pool;          /* host: owns the converted norm vectors */
    size_t f32_pool_n;        /* floats in f32_pool */
    const float *norm_pool;   /* uploaded copies only: the backend buffer of the norm vectors */
    bool lm_head_shared;      /* uploaded copies only: lm_head is the embedding's upload (tied) */
} sd_weights;

/* Bind every tensor named by model-format.md, checking presence, dtype and the shape the
 * config implies. Messages name the tensor. */
specdec_status sd_weights_bind(const sd_config *c, const sd_st_set *st, bool want_mtp,
                               sd_weights *w, specdec_err *err);
void sd_weights_free(sd_weights *w);

struct sd_backend;
/* Put the host weights h (from sd_weights_bind) on backend b: d receives the same structure with
 * backend pointers (zero-copy views on the CPU). Messages name the tensor that did not fit.
 * progress (may be NULL) hears the matrix bytes done after each tensor; false cancels. */
/* mtp_q4: put the drafter's dense matrices up as 4-bit codes (sd_mtp_q4); d then owns the host copy. */
specdec_status sd_weights_upload(struct sd_backend *b, const sd_config *c, const sd_weights *h, sd_weights *d,
                                 bool mtp_q4, specdec_progress_fn progress, void *progress_user, specdec_err *err);
void sd_weights_unload(struct sd_backend *b, const sd_config *c, sd_weights *d);

/* A host copy q of the drafter h whose dense matrices are 4-bit affine codes in groups of 64
 * (mtp_q4.c); q owns them and its layer array (sd_mtp_q4_free). Norm pointers are h's. */
specdec_status sd_mtp_q4(const sd_mtp_w *h, sd_mtp_w *q, specdec_err *err);
void sd_mtp_q4_free(sd_mtp_w *q);

#endif
