/* plan.h: how a Qwen3 model splits over N tensor-parallel ranks (docs/tensor-parallel.md).
 * Rank r holds a contiguous slice of the attention heads, of the KV heads and of the MLP columns:
 *   q_proj, gate_proj, up_proj   rows    (out features)   sliced: each rank computes its heads / columns
 *   k_proj, v_proj               rows    sliced by KV head (replicated per rank group when nkv < N)
 *   o_proj, down_proj            columns (in features)    sliced: each rank produces a partial sum
 *   embeddings, LM head, norms   replicated
 * so one decoder layer needs two all-reduces (after o_proj and after down_proj). The same plan
 * serves the target, its MTP layers and a draft model (each from its own config). */
#ifndef SD_TP_PLAN_H
#define SD_TP_PLAN_H
#include <stdbool.h>
#include <stdint.h>
#include "specdec.h"
#include "model/config.h"
#include "backend/tensor.h"

#define SD_TP_MAX 8   /* most ranks (GPUs of one host) */

typedef struct sd_tp_plan {
    int n;             /* ranks (1 = unsharded shapes) */
    int nh, nkv, I;    /* per rank: attention heads, KV heads, MLP intermediate columns */
    int kv_groups;     /* ranks sharing one KV head (1 unless n_kv_heads < n: KV heads replicated) */
} sd_tp_plan;

/* How a weight matrix splits. */
typedef enum sd_tp_split {
    SD_TP_REPL = 0,    /* every rank holds the whole matrix */
    SD_TP_ROWS_Q,      /* q_proj: rows of heads [r*nh, (r+1)*nh) (per-rank nh) */
    SD_TP_ROWS_KV,     /* k_proj / v_proj: rows of KV heads [kv0(r), kv0(r)+nkv) */
    SD_TP_COLS_O,      /* o_proj: columns of the rank's heads */
    SD_TP_ROWS_I,      /* gate_proj / up_proj: rows [r*I, (r+1)*I) */
    SD_TP_COLS_I,      /* down_proj: columns [r*I, (r+1)*I) */
} sd_tp_split;

/* The plan for n ranks, or SPECDEC_ERR_INVALID_ARG naming the shape that does not split: heads
 * not divisible by n (n > heads included), KV heads neither divisible by n nor dividing it,
 * intermediate not divisible by n, or (quant_group > 0) a column slice of o_proj / down_proj not
 * on a quantization-group boundary. `what` names the model in messages ("target", "draft model"). */
specdec_status sd_tp_plan_make(const sd_config *c, int n, int quant_group, const char *what, sd_tp_plan *out,
                               specdec_err *err);

/* First KV head of rank r. */
int sd_tp_kv0(const sd_tp_plan *p, const sd_config *c, int r);

/* Rows (axis 0) or columns (axis 1) of matrix `split` that rank r holds: [*start, *start + *count). */
void sd_tp_range(const sd_tp_plan *p, const sd_config *c, sd_tp_split split, int r, int *axis, int *start,
                 int *count);

/* A host copy of rank r's slice of host matrix m (w, scales and biases malloc'ed into out; free
 * with sd_tp_slice_free). A column slice of a quantized matrix off a group boundary is
 * SPECDEC_ERR_INVALID_ARG naming `name`. */
specdec_status sd_tp_slice(const sd_tp_plan *p, const sd_config *c, const sd_mat *m, sd_tp_split split, int r,
                           const char *name, sd_mat *out, specdec_err *err);
void sd_tp_slice_free(sd_mat *m);

/* Bytes of the matrix slice rank r holds. */
uint64_t sd_tp_slice_bytes(const sd_tp_plan *p, const sd_config *c, const sd_mat *m, sd_tp_split split, int r);

#endif
