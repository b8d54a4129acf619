/* mtp_q4.c: the MTP drafter's dense matrices quantized at load (specdec_drafter_weights Q4).
 * A host copy of the drafter's weights whose dense matrices (fc and every layer matrix) hold
 * 4-bit affine codes in groups of 64, scales and biases of the matrix's own dtype, made by the
 * quantizer `specdec quantize --quantize-mtp` uses (sd_quant_row over rows read as f32), so the
 * weights are the ones that tool writes. The drafts change; greedy and seeded output does not (the
 * target verifies every draft), and rejection sampling keeps its distribution. Why: on the CPU's int8 path the drafter's bf16 layer ran the dense
 * f32 kernels; at 4 bits it takes the int8 kernels on a quarter of the bytes
 * (docs/benchmarks/cpu-mtp-4bit-drafter-xeon-2026-12-05.md). */
#include "model/weights.h"
#include "quant/quant.h"
#include "util/err.h"
#include "util/mem.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { Q4_GROUP = 64 };

static bool takes(const sd_mat *m) { return m->w && m->bits == 0 && m->cols % Q4_GROUP == 0; }

/* one buffer more for q->owned */
static void *own(sd_mtp_w *q, size_t bytes) {
    void *p = sd_malloc_aligned(bytes ? bytes : 1);
    if (!p) return NULL;
    void **o = realloc(q->owned, sizeof *o * (size_t)(q->n_owned + 1));
    if (!o) { free(p); return NULL; }
    q->owned = o;
    q->owned[q->n_owned++] = p;
    return p;
}

static specdec_status q4_mat(const sd_mat *h, const char *name, sd_mtp_w *q, sd_mat *out, specdec_err *err) {
    *out = *h;
    if (!takes(h)) return SPECDEC_OK;
    const size_t R = (size_t)h->rows, C = (size_t)h->cols, ng = C / Q4_GROUP, es = h->dtype == SPECDEC_DTYPE_F32 ? 4 : 2;
    uint32_t *w = own(q, R * C / 2);   /* 8 codes a word: C / 8 words, C / 2 bytes a row */
    char *sc = own(q, R * ng * es), *bi = own(q, R * ng * es);
    float *row = malloc(sizeof(float) * C);
    if (!w || !sc || !bi || !row) {
        free(row);
        return sd_fail(err, SPECDEC_ERR_NOMEM, "%s: out of memory quantizing the drafter to 4 bits", name);
    }
    specdec_status st = SPECDEC_OK;
    for (size_t r = 0; r < R && st == SPECDEC_OK; r++) {
        sd_mat_row_f32(h, (int)r, row);
        st = sd_quant_row(row, C, 4, Q4_GROUP, h->dtype, w + r * (C / 8), sc + r * ng * es, bi + r * ng * es, NULL, name, r,
                          err);
    }
    free(row);
    out->w = w;
    out->scales = sc;
    out->biases = bi;
    out->bits = 4;
    out->group = Q4_GROUP;
    return st;
}

void sd_mtp_q4_free(sd_mtp_w *q) {
    if (!q) return;
    for (int i = 0; i < q->n_owned; i++) free(q->owned[i]);
    free(q->owned);
    free(q->layers);
    memset(q, 0, sizeof *q);
}

specdec_status sd_mtp_q4(const sd_mtp_w *h, sd_mtp_w *q, specdec_err *err) {
    *q = *h;
    q->owned = NULL;
    q->n_owned = 0;
    q->layers = calloc((size_t)h->n_layers, sizeof *q->layers);
    if (!q->layers) return sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory quantizing the drafter to 4 bits");
    specdec_status st = q4_mat(&h->fc, "mtp.fc.weight", q, &q->fc, err);
    for (int k = 0; k < h->n_layers && st == SPECDEC_OK; k++) {
        const sd_layer_w *L = &h->layers[k];
        sd_layer_w *D = &q->layers[k];
        *D = *L;
        char nm[96];
#define Q(f, n) (snprintf(nm, sizeof nm, "mtp.layers.%d.%s.weight", k, n), q4_mat(&L->f, nm, q, &D->f, err))
        if ((st = Q(q, "self_attn.q_proj")) || (st = Q(k, "self_attn.k_proj")) || (st = Q(v, "self_attn.v_proj")) ||
            (st = Q(o, "self_attn.o_proj")) || (st = Q(gate, "mlp.gate_proj")) || (st = Q(up, "mlp.up_proj")) ||
            (st = Q(down, "mlp.down_proj")))
            break;
#undef Q
    }
    if (st != SPECDEC_OK) sd_mtp_q4_free(q);
    return st;
}
