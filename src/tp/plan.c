/* plan.c: the tensor-parallel split of a Qwen3 model (plan.h) and the host slices of its weight
 * matrices. Slices are contiguous ranges, so rank r's q heads [r*nh, (r+1)*nh) use exactly the KV
 * heads the unsharded model would give them (GQA groups never straddle ranks). */
#include "tp/plan.h"
#include "util/err.h"
#include <stdlib.h>
#include <string.h>

specdec_status sd_tp_plan_make(const sd_config *c, int n, int quant_group, const char *what, sd_tp_plan *out,
                               specdec_err *err) {
    memset(out, 0, sizeof *out);
    if (n < 1 || n > SD_TP_MAX)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "tensor parallel: %d ranks (1..%d supported)", n, SD_TP_MAX);
    int nh = c->n_heads, nkv = c->n_kv_heads, I = c->intermediate_size, hd = c->head_dim;
    if (n > nh || nh % n)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG,
                       "tensor parallel over %d ranks: the %s's %d attention heads (num_attention_heads) do not "
                       "split into %d equal parts", n, what, nh, n);
    if (nkv % n && n % nkv)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG,
                       "tensor parallel over %d ranks: the %s's %d KV heads (num_key_value_heads) neither split "
                       "into %d equal parts nor replicate evenly (%d ranks per KV head)", n, what, nkv, n, n);
    if (I % n)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG,
                       "tensor parallel over %d ranks: the %s's intermediate_size %d does not split into %d equal "
                       "parts", n, what, I, n);
    if (quant_group > 0) {
        /* o_proj and down_proj are sliced by columns, the quantized axis: a slice must hold whole groups */
        if ((nh / n * hd) % quant_group)
            return sd_fail(err, SPECDEC_ERR_INVALID_ARG,
                           "tensor parallel over %d ranks: the %s's o_proj column slice (%d heads x head_dim %d = %d) "
                           "is not a whole number of quantization groups of %d", n, what, nh / n, hd, nh / n * hd,
                           quant_group);
        if ((I / n) % quant_group)
            return sd_fail(err, SPECDEC_ERR_INVALID_ARG,
                           "tensor parallel over %d ranks: the %s's down_proj column slice (intermediate %d / %d = "
                           "%d) is not a whole number of quantization groups of %d", n, what, I, n, I / n,
                           quant_group);
    }
    out->n = n;
    out->nh = nh / n;
    out->nkv = nkv >= n ? nkv / n : 1;
    out->kv_groups = nkv >= n ? 1 : n / nkv;
    out->I = I / n;
    return SPECDEC_OK;
}

int sd_tp_kv0(const sd_tp_plan *p, const sd_config *c, int r) {
    (void)c;
    return r / p->kv_groups * p->nkv;   /* nkv >= n: r*nkv; nkv < n: ranks r..r+groups-1 share a head */
}

void sd_tp_range(const sd_tp_plan *p, const sd_config *c, sd_tp_split split, int r, int *axis, int *start,
                 int *count) {
    int hd = c->head_dim;
    *axis = 0;
    switch (split) {
    case SD_TP_ROWS_Q: *start = r * p->nh * hd; *count = p->nh * hd; break;
    case SD_TP_ROWS_KV: *start = sd_tp_kv0(p, c, r) * hd; *count = p->nkv * hd; break;
    case SD_TP_COLS_O: *axis = 1; *start = r * p->nh * hd; *count = p->nh * hd; break;
    case SD_TP_ROWS_I: *start = r * p->I; *count = p->I; break;
    case SD_TP_COLS_I: *axis = 1; *start = r * p->I; *count = p->I; break;
    default: *start = 0; *count = -1; break;   /* whole matrix */
    }
}

static size_t elem_size(specdec_dtype dt) { return dt == SPECDEC_DTYPE_F32 ? 4 : 2; }

/* Copy rows [r0, r0+nr) and, within each, bytes [b0, b0+nb) of a (rows, row_bytes) array. */
static void *copy_block(const void *src, size_t row_bytes, int r0, int nr, size_t b0, size_t nb) {
    size_t bytes = nb * (size_t)nr;
    unsigned char *d = malloc(bytes > 0 ? bytes : 1);
    if (!d) return NULL;
    for (int i = 0; i < nr; i++)
        memcpy(d + (size_t)i * nb, (const unsigned char *)src + (size_t)(r0 + i) * row_bytes + b0, nb);
    return d;
}

specdec_status sd_tp_slice(const sd_tp_plan *p, const sd_config *c, const sd_mat *m, sd_tp_split split, int r,
                           const char *name, sd_mat *out, specdec_err *err) {
    int axis, start, count;
    sd_tp_range(p, c, split, r, &axis, &start, &count);
    *out = *m;
    out->w = out->scales = out->biases = NULL;
    int rows = m->rows, cols = m->cols, r0 = 0, nr = rows, c0 = 0, nc = cols;
    if (count < 0) { /* replicated: the whole matrix */ }
    else if (axis == 0) { r0 = start; nr = count; }
    else { c0 = start; nc = count; }
    if (r0 + nr > rows || c0 + nc > cols)
        return sd_fail(err, SPECDEC_ERR_INTERNAL, "tensor parallel: %s (%d x %d) has no slice [%d, %d) on axis %d",
                       name, rows, cols, start, start + count, axis);
    if (m->bits && (c0 % m->group || nc % m->group))
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG,
                       "tensor parallel: %s: columns [%d, %d) of rank %d are not on quantization-group boundaries "
                       "(group %d)", name, c0, c0 + nc, r, m->group);
    out->rows = nr;
    out->cols = nc;
    size_t es = elem_size(m->dtype);
    if (m->bits) {
        size_t wrow = (size_t)cols * m->bits / 8, srow = (size_t)(cols / m->group) * es;
        out->w = copy_block(m->w, wrow, r0, nr, (size_t)c0 * m->bits / 8, (size_t)nc * m->bits / 8);
        out->scales = copy_block(m->scales, srow, r0, nr, (size_t)(c0 / m->group) * es, (size_t)(nc / m->group) * es);
        out->biases = copy_block(m->biases, srow, r0, nr, (size_t)(c0 / m->group) * es, (size_t)(nc / m->group) * es);
        if (!out->w || !out->scales || !out->biases) {
            sd_tp_slice_free(out);
            return sd_fail(err, SPECDEC_ERR_NOMEM, "tensor parallel: %s: out of memory for rank %d's slice", name, r);
        }
    } else {
        out->w = copy_block(m->w, (size_t)cols * es, r0, nr, (size_t)c0 * es, (size_t)nc * es);
        if (!out->w) return sd_fail(err, SPECDEC_ERR_NOMEM, "tensor parallel: %s: out of memory for rank %d's slice", name, r);
    }
    return SPECDEC_OK;
}

void sd_tp_slice_free(sd_mat *m) {
    free((void *)m->w);
    free((void *)m->scales);
    free((void *)m->biases);
    m->w = m->scales = m->biases = NULL;
}

uint64_t sd_tp_slice_bytes(const sd_tp_plan *p, const sd_config *c, const sd_mat *m, sd_tp_split split, int r) {
    int axis, start, count;
    sd_tp_range(p, c, split, r, &axis, &start, &count);
    sd_mat s = *m;
    if (count >= 0) {
        if (axis == 0) s.rows = count;
        else s.cols = count;
    }
    return sd_mat_bytes(&s);
}
