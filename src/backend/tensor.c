/* tensor.c: what every layer needs to know about a weight matrix on the host: its size in bytes
 * and one row as f32 (the embedding lookup, the draft vocabulary's gathered rows, tests). */
#include "backend/tensor.h"
#include "util/dtype.h"
#include <string.h>

uint64_t sd_mat_wbytes(const sd_mat *m) {
    uint64_t es = sd_dtype_size(m->dtype), r = (uint64_t)m->rows, c = (uint64_t)m->cols;
    return m->bits ? r * (c * (uint64_t)m->bits / 8) : r * c * es;
}

uint64_t sd_mat_sbytes(const sd_mat *m) {
    return m->bits ? (uint64_t)m->rows * ((uint64_t)m->cols / (uint64_t)m->group) * sd_dtype_size(m->dtype) : 0;
}

uint64_t sd_mat_bytes(const sd_mat *m) { return sd_mat_wbytes(m) + 2 * sd_mat_sbytes(m); }

void sd_mat_row_f32(const sd_mat *m, int r, float *out) {
    const size_t cols = (size_t)m->cols;
    if (!m->bits) {
        for (size_t j = 0; j < cols; j++) out[j] = sd_elem_f32(m->dtype, m->w, (size_t)r * cols + j);
        return;
    }
    /* Quantized: row r holds cols*bits/32 words; element j sits in word j/epw at bit bits*(j%epw). */
    const int bits = m->bits, epw = 32 / bits;
    const uint32_t mask = (1u << bits) - 1u;
    const size_t wpr = cols / (size_t)epw, ng = cols / (size_t)m->group;
    const char *wrow = (const char *)m->w + (size_t)r * wpr * 4;
    for (size_t g = 0; g < ng; g++) {
        const float s = sd_elem_f32(m->dtype, m->scales, (size_t)r * ng + g);
        const float b = sd_elem_f32(m->dtype, m->biases, (size_t)r * ng + g);
        for (size_t j = g * (size_t)m->group; j < (g + 1) * (size_t)m->group; j++) {
            uint32_t word;
            memcpy(&word, wrow + (j / (size_t)epw) * 4, 4);
            uint32_t q = (word >> (bits * (int)(j % (size_t)epw))) & mask;
            out[j] = s * (float)q + b;
        }
    }
}
