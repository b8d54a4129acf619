/* bench_levels.c: per-kernel matmul time of every SIMD level this CPU runs, f32 and int8
 * activations, at the embedded model's decode shapes (4-bit, group 64, bf16 scales), T = 1.
 * Arms are interleaved sample by sample (level x precision in turn), so machine load hits them
 * alike; prints median / min / max microseconds over the samples and each arm's share of the
 * fastest. Then the per-call costs around the kernels: the int8 preparation of one token
 * (sd_i8_prep, and sd_i8_prep_avx2 where the CPU has AVX2) at each width, and the greedy pick over the vocabulary (sd_argmax), min / median
 * over the samples. Usage: bench_levels [threads=2] [samples=15] [T=1] */
#include "cpu/ops.h"
#include "cpu/ops_i8.h"
#include "util/dtype.h"
#include "sample/sample.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t rs = 0x9e3779b97f4a7c15ULL;
static uint32_t rnd32(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (uint32_t)(rs >> 11); }

static sd_mat make(int rows, int cols) {
    sd_mat m = {.rows = rows, .cols = cols, .dtype = SPECDEC_DTYPE_BF16, .bits = 4, .group = 64};
    size_t nw = (size_t)rows * cols / 8, ng = (size_t)rows * cols / 64;
    uint32_t *w = malloc(nw * 4);
    uint16_t *s = malloc(ng * 2), *b = malloc(ng * 2);
    for (size_t i = 0; i < nw; i++) w[i] = rnd32() ^ (rnd32() << 11);
    for (size_t i = 0; i < ng; i++) {
        s[i] = sd_f32_to_bf16(0.01f + (float)(rnd32() & 255) * 1e-4f);
        b[i] = sd_f32_to_bf16(-0.08f);
    }
    m.w = w; m.scales = s; m.biases = b;
    /* packed once, as the CPU backend does at upload (the int8 path reads the tiles) */
    sd_i8_packed *pk = malloc(sizeof *pk);
    if (pk && sd_i8_supported(&m) && sd_i8_pack(&m, pk) == 0) m.pk = pk;
    else free(pk);
    return m;
}

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}
static int cmpd(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2, samples = argc > 2 ? atoi(argv[2]) : 15, T = argc > 3 ? atoi(argv[3]) : 1;
    if (samples < 5) samples = 5;
    static const struct { const char *name; int rows, cols, reps; } shapes[] = {
        {"lm_head", 151936, 384, 1}, {"rows16k", 16384, 384, 10}, {"rows2k", 2048, 384, 50}, {"q", 768, 384, 200}, {"k/v", 256, 384, 400}, {"o", 384, 768, 200},
        {"gate/up", 640, 384, 200}, {"down", 384, 640, 200},
    };
    static const char *levels[] = {"avx512", "avx2", "neon", "scalar"};
    const sd_ops *ops[4];
    int nl = 0;
    const char *lname[4];
    for (int i = 0; i < 4; i++)
        if ((ops[nl] = sd_ops_fast_level(levels[i])) && strcmp(levels[i], "scalar") != 0) lname[nl++] = levels[i];
    sd_pool *pool = threads > 1 ? sd_pool_create(threads) : NULL;
    float *x = malloc(sizeof(float) * 768 * (size_t)T), *y = malloc(sizeof(float) * 151936 * (size_t)T);
    for (int i = 0; i < 768 * T; i++) x[i] = (float)((int)(rnd32() % 2001) - 1000) * 1e-3f;
    printf("threads %d, T %d, %d samples per arm (interleaved), time per call in us\n", threads, T, samples);
    printf("| shape | rows x cols | arm | median | min | max |\n| --- | --- | --- | --- | --- | --- |\n");
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        sd_mat W = make(shapes[si].rows, shapes[si].cols);
        const int na = nl * 2, reps = shapes[si].reps;
        double *t = malloc(sizeof(double) * (size_t)na * samples);
        for (int s = -1; s < samples; s++)   /* s = -1: warm-up */
            for (int a = 0; a < na; a++) {
                const sd_ops *o = ops[a / 2];
                double t0 = now_us();
                for (int r = 0; r < reps; r++) {
                    if (a & 1) o->matmul_i8(&W, x, W.cols, y, W.rows, T, pool);
                    else o->matmul(&W, x, W.cols, y, W.rows, T, pool);
                }
                if (s >= 0) t[a * samples + s] = (now_us() - t0) / reps;
            }
        for (int a = 0; a < na; a++) {
            double *v = t + a * samples;
            qsort(v, (size_t)samples, sizeof(double), cmpd);
            printf("| %s | %d x %d | %s %s | %.1f | %.1f | %.1f |\n", shapes[si].name, W.rows, W.cols, lname[a / 2],
                   a & 1 ? "int8" : "f32", v[samples / 2], v[0], v[samples - 1]);
        }
        free(t);
        free((void *)W.w); free((void *)W.scales); free((void *)W.biases);
        if (W.pk) { sd_i8_pack_free((sd_i8_packed *)W.pk); free((void *)W.pk); }
    }
    /* per-call costs: the int8 preparation of one token, the greedy pick over the vocabulary */
    {
        static int8_t xq[2048];
        static float dv[512], xv[512];   /* block scales, group sums */
        static const int pc[] = {384, 640, 768, 2048};
        double *t = malloc(sizeof(double) * (size_t)samples);
        printf("\n| per call | size | median us | min us |\n| --- | --- | --- | --- |\n");
        float *xx = malloc(sizeof(float) * 2048);
        for (int i = 0; i < 2048; i++) xx[i] = (float)((int)(rnd32() % 2001) - 1000) * 1e-3f;
        const sd_i8_prep_fn preps[2] = {sd_i8_prep, sd_i8_prep_avx2()};
        static const char *pname[2] = {"sd_i8_prep", "sd_i8_prep_avx2"};
        for (int c = 0; c < 4; c++)
            for (int k = 0; k < 2; k++) {
                if (!preps[k]) continue;
                for (int s = 0; s < samples; s++) {
                    double t0 = now_us();
                    for (int r = 0; r < 200; r++) preps[k](xx, pc[c], 64, xq, dv, xv);
                    t[s] = (now_us() - t0) / 200;
                }
                qsort(t, (size_t)samples, sizeof(double), cmpd);
                printf("| %s (group 64) | %d columns | %.2f | %.2f |\n", pname[k], pc[c], t[samples / 2], t[0]);
            }
        int32_t sink = 0;
        for (int s = 0; s < samples; s++) {
            double t0 = now_us();
            for (int r = 0; r < 20; r++) sink += sd_argmax(y, 151936);
            t[s] = (now_us() - t0) / 20;
        }
        qsort(t, (size_t)samples, sizeof(double), cmpd);
        printf("| sd_argmax | 151936 logits | %.1f | %.1f |\n", t[samples / 2], t[0]);
        if (sink == -1) printf("!\n");   /* keeps the calls */
        free(t); free(xx);
    }
    if (pool) sd_pool_free(pool);
    free(x); free(y);
    return 0;
}
