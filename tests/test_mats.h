/* test_mats.h: random weight matrices for the kernel tests (test_ops, test_ops_i8): a xorshift
 * generator seeded by the test (rng_s), and dense or affine-quantized sd_mat's with their buffers.
 * Quantized scales are small and biases centre the codes, so products stay in the range real
 * checkpoints give. Header-only: each test has its own generator state. */
#ifndef SPECDEC_TEST_MATS_H
#define SPECDEC_TEST_MATS_H
#include "backend/tensor.h"
#include "util/dtype.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_s;
static uint64_t rnd(void) {
    rng_s ^= rng_s >> 12; rng_s ^= rng_s << 25; rng_s ^= rng_s >> 27;
    return rng_s * 0x2545F4914F6CDD1DULL;
}
/* uniform in +-[lo, hi), never zero */
static float rndf(float lo, float hi) {
    float u = (float)((rnd() >> 40) * (1.0 / 16777216.0));
    float v = lo + (hi - lo) * u;
    return (rnd() & 1) ? v : -v;
}

typedef struct tmat {
    sd_mat m;
    void *w, *s, *b;
} tmat;

static void store_elem(specdec_dtype dt, void *p, size_t i, float v) {
    if (dt == SPECDEC_DTYPE_F32) ((float *)p)[i] = v;
    else if (dt == SPECDEC_DTYPE_F16) ((uint16_t *)p)[i] = sd_f32_to_f16(v);
    else ((uint16_t *)p)[i] = sd_f32_to_bf16(v);
}

static tmat make_mat(int rows, int cols, int bits, int group, specdec_dtype dt) {
    tmat t;
    memset(&t, 0, sizeof t);
    t.m.rows = rows; t.m.cols = cols; t.m.dtype = dt; t.m.bits = bits; t.m.group = bits ? group : 0;
    size_t es = sd_dtype_size(dt);
    if (!bits) {
        t.w = malloc((size_t)rows * cols * es);
        for (size_t i = 0; i < (size_t)rows * cols; i++) store_elem(dt, t.w, i, rndf(0.01f, 1.0f));
    } else {
        size_t nw = (size_t)rows * cols / (32 / bits), ng = (size_t)rows * cols / group;
        uint32_t *w = (uint32_t *)malloc(nw * 4);
        for (size_t i = 0; i < nw; i++) w[i] = (uint32_t)rnd();
        t.w = w;
        t.s = malloc(ng * es);
        t.b = malloc(ng * es);
        float qmid = (float)(1 << (bits - 1));
        for (size_t i = 0; i < ng; i++) {
            float s = rndf(0.002f, 0.05f);
            store_elem(dt, t.s, i, s);
            store_elem(dt, t.b, i, -s * qmid + rndf(0.0f, 0.01f));
        }
    }
    t.m.w = t.w; t.m.scales = t.s; t.m.biases = t.b;
    return t;
}
static void free_mat(tmat *t) { free(t->w); free(t->s); free(t->b); }

#endif
