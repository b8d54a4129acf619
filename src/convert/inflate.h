/* inflate.h: the inflation tool's plan (what every output tensor holds, element by element) and
 * the two halves that use it: inflate_plan.c builds it from the source model and the target
 * shape, inflate_fill.c writes the bytes it describes through a safetensors stream.
 *
 * An output tensor is described by two axes. Along each axis, output index i either copies
 * source index src[i] or is fill (src[i] = -1). An element (r, c) copies source (src_r, src_c)
 * when both are copied; otherwise it holds the fill of its row (when the row is not copied) or of
 * its column. Fill is ZERO where the value reaches the residual stream, RANDOM where it is only
 * ever multiplied by zeros or its result is discarded. */
#ifndef SD_INFLATE_H
#define SD_INFLATE_H
#include <stdint.h>
#include "specdec.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/weights.h"

typedef enum sd_fill { SD_FILL_ZERO = 0, SD_FILL_RANDOM } sd_fill;

/* One axis of an output tensor: n output indices, src[i] the source index or -1. */
typedef struct sd_axis {
    int n;
    int *src;
    const char *what;   /* the dimension it spans, for messages ("hidden_size", ...) */
} sd_axis;

typedef struct sd_infl_tensor {
    char name[128];           /* linear: base name ("model.layers.3.mlp.up_proj"); vector: full name */
    bool vector;              /* a norm weight (1-D) rather than a linear */
    /* source */
    const sd_mat *src;        /* linear: copied rows/columns and the magnitude of RANDOM fill */
    const float *vsrc;        /* vector: the source values (f32) */
    int vn;                   /* vector: their count */
    double vscale;            /* vector: copied values are multiplied by this (RMSNorm rescale) */
    /* layout */
    const sd_axis *rows, *cols;   /* cols is NULL for a vector */
    sd_fill row_fill, col_fill;
    /* output format */
    specdec_dtype dt;         /* dense dtype, or the dtype of scales and biases */
    int bits, group;          /* 0: dense */
    bool requant;             /* a dense source quantized on the way (sd_quant_row) */
    float amp;                /* dense RANDOM fill: uniform in [-amp, amp] (sqrt(3) x source RMS) */
    uint64_t key;             /* the pseudo-random stream of this tensor (seed and name) */
    int out[3];               /* writer indices: weight (or the vector), scales, biases */
} sd_infl_tensor;

typedef struct sd_infl_plan {
    sd_infl_tensor *t;        /* (n) in file order */
    int n, cap;
    sd_axis **axes;           /* (n_axes) owned */
    int n_axes, cap_axes;
    sd_st_writer *w;          /* the output tensors, planned (no buffers) */
    uint64_t total_bytes;
} sd_infl_plan;

/* What the plan needs besides the source: the target shape and the choices of the caller. */
typedef struct sd_infl_opts {
    const sd_config *src;     /* source config */
    const sd_config *dst;     /* target config (shape, tie, quantization of the output) */
    const sd_st_set *st;      /* source tensors (dtypes of norm weights) */
    const sd_weights *w;      /* source weights, bound with the mtp module */
    bool fill_zero;
    uint64_t seed;
    bool quantize_mtp;
} sd_infl_opts;

/* Build the plan; every layout the output format cannot hold (a quantization group that would
 * mix copied and padded columns) is refused here, naming the tensor and the dimension. */
specdec_status sd_inflate_plan(const sd_infl_opts *o, sd_infl_plan *plan, specdec_err *err);
void sd_inflate_plan_free(sd_infl_plan *plan);

/* Where the source attention heads go: q head i moves to qmap[i] (nh entries); target kv head m
 * holds a copy of source kv head kvsrc[m] (nkv2 entries, -1 = padded). Every q head lands in a
 * group whose kv head is a copy of its own: source kv head s (q heads s*g..s*g+g-1) gets
 * ceil(g/g2) consecutive target kv heads, filled g2 q heads at a time. */
specdec_status sd_inflate_map_heads(int nh, int nkv, int nh2, int nkv2, int *qmap, int *kvsrc, specdec_err *err);

/* Write every tensor of the plan into stream s with n_threads threads (deterministic bytes
 * whatever the thread count), reporting bytes written through progress (may be NULL; called
 * from the calling thread only; false cancels). */
specdec_status sd_inflate_fill(const sd_infl_plan *plan, sd_st_stream *s, int n_threads, specdec_progress_fn progress,
                               void *user, specdec_err *err);

#endif
