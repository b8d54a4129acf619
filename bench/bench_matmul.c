/* bench_matmul.c: fast CPU matmul against the memory-bandwidth floor.
 * Measures the streaming read bandwidth first (sum over a 1 GiB buffer on the pool, best of
 * 5), then times sd_ops_fast()->matmul for the decode shapes (rows x cols) and weight kinds
 * at T = 1, 4, 16: median / min / max ms over >= 7 samples after a warm-up, and the roofline
 * ratio = (weight bytes / bandwidth) / median time. Shapes whose weights fit in cache can
 * beat the DRAM floor (ratio > 1); that is reported, not hidden.
 * Also prints each T's cost relative to T = 1 of the same shape and kind (the verify-pass
 * amortization speculative decoding depends on).
 * A/B mode (5th argument "ab", x86 with AVX-512 only): every (shape, kind, T) is timed with the
 * short-row quantized kernel off (A = the row-at-a-time kernel) and on (B = 16-row tiles),
 * samples interleaved A B A B after a warm-up of each; the two arms must give bitwise the
 * same y (checked, else the comparison is refused); prints B/A of the medians.
 * "ab MA MB" picks the two arms' sd_avx512_qs_mode values instead (default 0 and 1; bits 1-2
 * select the 4-bit unpack, see ops_avx512.c), e.g. "ab 1 3" = shift+permute vs exponent trick.
 * Usage: bench_matmul [threads=2] [samples=9] [shape filter, e.g. 151936] [kind filter, e.g. q4] [ab [MA MB]] */
#include "bench_util.h"
#include "cpu/ops.h"
#include "cpu/ops_internal.h"
#include "util/dtype.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- matrices ---- */
static uint64_t rs = 0x12345678abcdefULL;
static uint32_t rnd32(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (uint32_t)(rs >> 11); }
static float rndf(void) { return ((float)(rnd32() & 0xFFFFFF) / 16777216.0f - 0.5f) * 0.1f; }

typedef struct { const char *name; int bits, group; specdec_dtype dt; } kind;

static sd_mat make(const kind *k, int rows, int cols, uint64_t *bytes) {
    sd_mat m;
    memset(&m, 0, sizeof m);
    m.rows = rows; m.cols = cols; m.bits = k->bits; m.group = k->group; m.dtype = k->dt;
    size_t es = sd_dtype_size(k->dt), n = (size_t)rows * cols;
    if (!k->bits) {
        void *w = malloc(n * es);
        for (size_t i = 0; i < n; i++) {
            float v = rndf();
            if (k->dt == SPECDEC_DTYPE_F32) ((float *)w)[i] = v;
            else if (k->dt == SPECDEC_DTYPE_BF16) ((uint16_t *)w)[i] = sd_f32_to_bf16(v);
            else ((uint16_t *)w)[i] = sd_f32_to_f16(v);
        }
        m.w = w;
        *bytes = n * es;
    } else {
        size_t nw = n * k->bits / 32, ng = n / k->group;
        uint32_t *w = (uint32_t *)malloc(nw * 4);
        for (size_t i = 0; i < nw; i++) w[i] = rnd32() ^ (rnd32() << 16);
        uint16_t *s = (uint16_t *)malloc(ng * 2), *b = (uint16_t *)malloc(ng * 2);
        for (size_t i = 0; i < ng; i++) { s[i] = sd_f32_to_bf16(0.01f + rndf() * 0.1f); b[i] = sd_f32_to_bf16(rndf()); }
        m.w = w; m.scales = s; m.biases = b;
        *bytes = nw * 4 + 2 * ng * es;
    }
    return m;
}

#if defined(__x86_64__) || defined(_M_X64)
static int arm_mode[2] = {0, 1};
static void set_arm(int on) { sd_avx512_qs_mode = arm_mode[on ? 1 : 0]; }
#else
static void set_arm(int on) { (void)on; }
#endif


int main(int argc, char **argv) {
    int nth = argc > 1 ? atoi(argv[1]) : 2;
    int samples = argc > 2 ? atoi(argv[2]) : 9;
    const char *sfilt = argc > 3 && strcmp(argv[3], "-") ? argv[3] : NULL;
    const char *kfilt = argc > 4 && strcmp(argv[4], "-") ? argv[4] : NULL;
    const int ab = argc > 5 && strcmp(argv[5], "ab") == 0;
#if defined(__x86_64__) || defined(_M_X64)
    if (ab && argc > 7) { arm_mode[0] = atoi(argv[6]); arm_mode[1] = atoi(argv[7]); }
#endif
    if (samples < 7) samples = 7;
    sd_pool *p = sd_pool_create(nth);
    if (!p) { fprintf(stderr, "pool\n"); return 1; }
    FILE *la = fopen("/proc/loadavg", "r");
    char load[128] = "?";
    if (la) { if (!fgets(load, sizeof load, la)) strcpy(load, "?\n"); fclose(la); }
    double bw, bw_med;
    measure_bw(p, 5, &bw, &bw_med);   /* best of 5 timed passes */
    (void)bw_med;
    const sd_ops *F = sd_ops_fast();
    printf("bench_matmul: simd=%s threads=%d samples=%d loadavg %s", sd_simd_name(), nth, samples, load);
    printf("streaming read bandwidth (1 GiB, %d threads, best of 5): %.2f GB/s\n\n", nth, bw / 1e9);
    printf("%-16s %-14s %3s %10s %9s %9s %9s %8s %9s %7s\n", "shape", "kind", "T", "MB", "med ms", "min ms", "max ms",
           "GB/s", "roofline", "xT1");

    static const int shapes[6][2] = {{151936, 384}, {1024, 384}, {384, 1024}, {768, 384}, {384, 768}, {4096, 4096}};
    static const kind kinds[5] = {
        {"q4 g64 bf16", 4, 64, SPECDEC_DTYPE_BF16},
        {"q8 g64 bf16", 8, 64, SPECDEC_DTYPE_BF16},
        {"bf16", 0, 0, SPECDEC_DTYPE_BF16},
        {"f32", 0, 0, SPECDEC_DTYPE_F32},
        {"q4 g32 f16", 4, 32, SPECDEC_DTYPE_F16},
    };
    static const int Ts[6] = {1, 2, 4, 8, 16};
    for (int si = 0; si < 6; si++)
        for (int ki = 0; ki < 5; ki++) {
            int rows = shapes[si][0], cols = shapes[si][1];
            char shp[32];
            snprintf(shp, sizeof shp, "%dx%d", rows, cols);
            if (sfilt && !strstr(shp, sfilt)) continue;
            if (kfilt && !strstr(kinds[ki].name, kfilt)) continue;
            uint64_t bytes;
            sd_mat m = make(&kinds[ki], rows, cols, &bytes);
            float *x = (float *)malloc((size_t)16 * cols * 4), *y = (float *)malloc((size_t)16 * rows * 4);
            for (int i = 0; i < 16 * cols; i++) x[i] = rndf();
            double med1 = 0;
            for (int ti = 0; ti < 5 && ab; ti++) {
                int T = Ts[ti];
                if (!kinds[ki].bits) break; /* the switch only changes quantized kernels */
                float *y2 = (float *)malloc((size_t)16 * rows * 4);
                set_arm(0);
                F->matmul(&m, x, cols, y, rows, T, p);
                double t0 = now_s();
                F->matmul(&m, x, cols, y, rows, T, p);
                double one = now_s() - t0;
                set_arm(1);
                F->matmul(&m, x, cols, y2, rows, T, p);
                if (memcmp(y, y2, (size_t)T * rows * 4)) {
                    printf("%-16s %-14s %3d  arms differ bitwise: comparison refused\n", shp, kinds[ki].name, T);
                    free(y2);
                    continue;
                }
                int reps = one > 2e-3 ? 1 : (int)(2e-3 / (one > 1e-7 ? one : 1e-7)) + 1;
                double *ts = (double *)malloc((size_t)2 * samples * sizeof(double));
                for (int s = 0; s < samples; s++)
                    for (int arm = 0; arm < 2; arm++) {
                        set_arm(arm);
                        double a = now_s();
                        for (int r = 0; r < reps; r++) F->matmul(&m, x, cols, y, rows, T, p);
                        ts[arm * samples + s] = (now_s() - a) / reps;
                    }
                set_arm(1);
                double med[2];
                for (int arm = 0; arm < 2; arm++) {
                    double *v = ts + arm * samples;
                    qsort(v, (size_t)samples, sizeof(double), cmpd);
                    med[arm] = v[samples / 2];
                    printf("%-16s %-14s %3d %10.2f %9.4f %9.4f %9.4f %8.2f %9.2f %7s %s\n", shp, kinds[ki].name, T,
                           bytes / 1e6, med[arm] * 1e3, v[0] * 1e3, v[samples - 1] * 1e3, bytes / med[arm] / 1e9,
                           (bytes / bw) / med[arm], "", arm ? "B" : "A");
                }
                if (T == 1) med1 = med[1];
                printf("%-16s %-14s %3d   B/A %.3f   B xT1 %.2f\n", shp, kinds[ki].name, T, med[1] / med[0], med[1] / med1);
                free(ts);
                free(y2);
            }
            for (int ti = 0; ti < 5 && !ab; ti++) {
                int T = Ts[ti];
                /* warm-up, and calls per sample so a sample lasts >= ~2 ms */
                double t0 = now_s();
                F->matmul(&m, x, cols, y, rows, T, p);
                double one = now_s() - t0;
                int reps = one > 2e-3 ? 1 : (int)(2e-3 / (one > 1e-7 ? one : 1e-7)) + 1;
                double *ts = (double *)malloc((size_t)samples * sizeof(double));
                for (int s = 0; s < samples; s++) {
                    double a = now_s();
                    for (int r = 0; r < reps; r++) F->matmul(&m, x, cols, y, rows, T, p);
                    ts[s] = (now_s() - a) / reps;
                }
                qsort(ts, (size_t)samples, sizeof(double), cmpd);
                double med = ts[samples / 2];
                if (T == 1) med1 = med;
                printf("%-16s %-14s %3d %10.2f %9.4f %9.4f %9.4f %8.2f %9.2f %7.2f\n", shp, kinds[ki].name, T, bytes / 1e6,
                       med * 1e3, ts[0] * 1e3, ts[samples - 1] * 1e3, bytes / med / 1e9, (bytes / bw) / med, med / med1);
                free(ts);
            }
            free(x); free(y);
            free((void *)m.w); free((void *)m.scales); free((void *)m.biases);
        }
    sd_pool_free(p);
    return 0;
}
