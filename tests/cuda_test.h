/* cuda_test.h: what the CUDA backend tests (test_cuda.c, test_cuda_kernels.c) share: the
 * backend under test (G, "cuda") and the scalar reference backend (R, "cpu" reference ops),
 * device buffers through the backend table, random data, host weight matrices in every layout,
 * and the bitwise / tolerance comparisons. Header-only: each test is its own executable. */
#ifndef SD_CUDA_TEST_H
#define SD_CUDA_TEST_H
#include "backend/backend.h"
#include "check.h"
#include "util/dtype.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static sd_backend *G, *R;
static specdec_err E;

static uint64_t rng_state = 0x1234567ull;
static inline uint64_t rnd(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline double runit(void) { return (double)(rnd() >> 11) * (1.0 / 9007199254740992.0); }
static inline float rnorm(void) {
    return (float)(sqrt(-2.0 * log(runit() + 1e-300)) * cos(6.283185307179586 * runit()));
}
static inline void fill_normal(float *v, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) v[i] = rnorm() * scale;
}

/* Creates G and R; false when this machine has no usable CUDA device (G stays NULL). */
static inline bool cuda_setup(void) {
    sd_backend_opts o;
    memset(&o, 0, sizeof o);
    o.reference = true;
    o.n_threads = 2;
    o.precision = SD_PRECISION_F32;   /* the f32 reference (the CPU's default precision may be int8) */
    CHECK(sd_backend_cpu_new(&o, &R, &E) == SPECDEC_OK, "reference backend: %s", E.msg);
    if (!sd_backend_cuda_available()) return false;
    memset(&o, 0, sizeof o);
    o.precision = SD_PRECISION_F32;   /* the reference arithmetic; int8 is tested on a backend of its own */
    specdec_status st = sd_backend_create("cuda", &o, &G, &E);
    CHECK(st == SPECDEC_OK, "cuda backend: %s", E.msg);
    return st == SPECDEC_OK;
}

static inline void cuda_teardown(void) {
    if (G) sd_backend_free(G);
    if (R) sd_backend_free(R);
    G = R = NULL;
}

/* A device copy of n host bytes (NULL on failure, recorded). */
static inline void *dput(const void *h, size_t n) {
    void *p = NULL;
    if (G->i->alloc(G, n, "test buffer", &p, &E) != SPECDEC_OK) {
        CHECK(0, "alloc: %s", E.msg);
        return NULL;
    }
    if (n && h) CHECK(G->i->write(G, p, h, n, &E) == SPECDEC_OK, "write: %s", E.msg);
    return p;
}
static inline void dget(void *h, const void *d, size_t n) {
    CHECK(G->i->read(G, h, d, n, &E) == SPECDEC_OK, "read: %s", E.msg);
}
static inline void dfree(void *p) { G->i->release(G, p); }
/* 0xFF over n bytes of device buffer d (a NaN in every float, -1 in every int32): a kernel that
 * skips a store then leaves it there instead of an earlier call's right answer. */
static inline void dpoison(void *d, size_t n) {
    unsigned char *h = malloc(n ? n : 1);
    if (!h) { CHECK(0, "out of host memory"); return; }
    memset(h, 0xFF, n);
    CHECK(G->i->write(G, d, h, n, &E) == SPECDEC_OK, "write: %s", E.msg);
    free(h);
}
static inline int32_t *dint(int32_t v) { return (int32_t *)dput(&v, sizeof v); }

/* Checks an op's status, with the backend's message. */
#define CHECK_OP(b, call, what) do { specdec_status st_ = (call); \
    CHECK(st_ == SPECDEC_OK, "%s: %s", (what), (b)->err.msg); } while (0)

/* A host weight matrix (rows, cols): dense of dtype, or bits-bit codes with scales/biases of
 * dtype per group; values ~ N(0, 0.1) (dense) or small scales and biases (quantized). */
typedef struct hmat {
    sd_mat m;      /* host pointers */
    sd_mat d;      /* the same matrix uploaded to G (when uploaded) */
} hmat;

static inline void to_dtype(specdec_dtype dt, float v, void *dst, size_t i) {
    if (dt == SPECDEC_DTYPE_F32) ((float *)dst)[i] = v;
    else if (dt == SPECDEC_DTYPE_BF16) ((uint16_t *)dst)[i] = sd_f32_to_bf16(v);
    else ((uint16_t *)dst)[i] = sd_f32_to_f16(v);
}

static inline hmat hmat_make(int rows, int cols, specdec_dtype dt, int bits, int group, bool upload) {
    hmat h;
    memset(&h, 0, sizeof h);
    h.m.rows = rows;
    h.m.cols = cols;
    h.m.dtype = dt;
    h.m.bits = bits;
    h.m.group = group;
    size_t es = sd_dtype_size(dt), n = (size_t)rows * cols;
    if (!bits) {
        void *w = malloc(n * es);
        for (size_t i = 0; i < n; i++) to_dtype(dt, 0.1f * rnorm(), w, i);
        h.m.w = w;
    } else {
        size_t words = n * (size_t)bits / 32, ng = n / (size_t)group;
        uint32_t *w = malloc(words * 4);
        void *s = malloc(ng * es), *b = malloc(ng * es);
        for (size_t i = 0; i < words; i++) w[i] = (uint32_t)rnd();
        float qmax = (float)((1u << bits) - 1u);
        for (size_t g = 0; g < ng; g++) {
            to_dtype(dt, (0.2f / qmax) * (1.0f + 0.2f * rnorm()), s, g);
            to_dtype(dt, -0.1f + 0.02f * rnorm(), b, g);
        }
        h.m.w = w;
        h.m.scales = s;
        h.m.biases = b;
    }
    if (upload) CHECK(sd_be_upload_mat(G, &h.m, "test weights", &h.d, &E) == SPECDEC_OK, "upload: %s", E.msg);
    return h;
}

static inline void hmat_free(hmat *h) {
    if (h->d.w) sd_be_unload_mat(G, &h->d);
    free((void *)h->m.w);
    free((void *)h->m.scales);
    free((void *)h->m.biases);
    memset(h, 0, sizeof *h);
}

static inline bool same_bits(const void *a, const void *b, size_t n) { return memcmp(a, b, n) == 0; }

#endif
