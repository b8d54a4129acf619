/* bench_i8.c: the int8-activation matmul kernels (src/cpu/ops_i8*.c) per kernel form, against the
 * streaming bandwidth of the same run. Arms: every SIMD level this CPU runs, and on a CPU with
 * AVX-VNNI the AVX2 level twice, with vpdpbusd ("avx2-vnni") and with maddubs ("avx2-maddubs",
 * sd_i8_avx2_novnni). Shapes are the embedded model's decode shapes (4-bit, group 64, bf16 scales)
 * plus one 8-bit matrix, at T = 1 and the speculative verify widths, and the layer matrices of the
 * Qwen3 1.7B shape (in a 1.1 GB model they come from DRAM; here, repeated, from L3).
 * Per (shape, T) the arms are interleaved sample by sample after a discarded warm-up; prints the
 * median / min / max us per call, ns per (row, token) of the median, and the roofline ratio
 * (weight bytes / bandwidth) / median (above 1 when the matrix sits in cache).
 * Guard: every arm must write the first arm's y bit for bit (the recipe is exact); a (shape, T)
 * whose arms differ prints DIFFERS instead of its rows, and the exit status is 1.
 * Usage: bench_i8 [threads=1] [samples=9] [Ts=1,2,4,8,16] [shape filter, e.g. lm_head] */
#include "bench_util.h"
#include "cpu/ops.h"
#include "cpu/ops_i8.h"
#include "cpu/ops_internal.h"
#include "util/dtype.h"
#include <string.h>

static uint64_t rs = 0x9e3779b97f4a7c15ULL;
static uint32_t rnd32(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (uint32_t)(rs >> 11); }

static sd_mat make(int rows, int cols, int bits, size_t *bytes) {
    sd_mat m = {.rows = rows, .cols = cols, .dtype = SPECDEC_DTYPE_BF16, .bits = bits, .group = 64};
    size_t nw = (size_t)rows * cols * bits / 32, ng = (size_t)rows * cols / 64;
    uint32_t *w = malloc(nw * 4);
    uint16_t *s = malloc(ng * 2), *b = malloc(ng * 2);
    for (size_t i = 0; i < nw; i++) w[i] = rnd32() ^ (rnd32() << 11);
    for (size_t i = 0; i < ng; i++) {
        s[i] = sd_f32_to_bf16(0.01f + (float)(rnd32() & 255) * 1e-4f);
        b[i] = sd_f32_to_bf16(-0.08f + (float)(rnd32() & 255) * 1e-5f);
    }
    m.w = w; m.scales = s; m.biases = b;
    /* packed once, as the CPU backend does at upload (the int8 path reads the tiles) */
    sd_i8_packed *pk = malloc(sizeof *pk);
    if (pk && sd_i8_supported(&m) && sd_i8_pack(&m, pk) == 0) m.pk = pk;
    else free(pk);
    *bytes = nw * 4 + ng * 4;
    return m;
}

typedef struct { const char *name; const sd_ops *o; int novnni, amx; } arm;

int main(int argc, char **argv) {
    const int threads = argc > 1 ? atoi(argv[1]) : 1;
    int samples = argc > 2 ? atoi(argv[2]) : 9;
    const char *tlist = argc > 3 ? argv[3] : "1,2,4,8,16", *filter = argc > 4 ? argv[4] : NULL;
    if (samples < 5) samples = 5;
    int Ts[16], nT = 0;
    for (const char *c = tlist; *c && nT < 16;) {
        Ts[nT] = atoi(c);
        if (Ts[nT] >= 1 && Ts[nT] <= 64) nT++;
        c = strchr(c, ',');
        if (!c) break;
        c++;
    }
    static const struct { const char *name; int rows, cols, bits, tmax; } shapes[] = {
        {"rows2k", 2048, 384, 4, 64}, {"q", 768, 384, 4, 64},      {"k/v", 256, 384, 4, 64},
        {"o", 384, 768, 4, 64},       {"gate/up", 640, 384, 4, 64}, {"down", 384, 640, 4, 64},
        {"q8 rows2k", 2048, 384, 8, 64}, {"lm_head", 151936, 384, 4, 16},
        /* the Qwen3 1.7B shape's layer matrices (from DRAM in a 1.1 GB model) */
        {"1.7b q/o", 2048, 2048, 4, 4},  {"1.7b k/v", 1024, 2048, 4, 4},
        {"1.7b gate/up", 6144, 2048, 4, 4}, {"1.7b down", 2048, 6144, 4, 4},
    };
    arm arms[5];
    int na = 0;
    if (sd_ops_fast_level("avx512")) {
        const int amx = sd_i8_rows_amx() != NULL;   /* two forms where the CPU gives AMX */
        arms[na++] = (arm){amx ? "avx512-vnni" : "avx512", sd_ops_fast_level("avx512"), 0, 0};
        if (amx) arms[na++] = (arm){"avx512-amx", sd_ops_fast_level("avx512"), 0, 1};
    }
    if (sd_ops_fast_level("avx2")) {
        /* two forms only where the rows function changes with the switch */
        sd_i8_avx2_novnni = 1;
        sd_i8_rows_fn mad = sd_i8_rows_avx2();
        sd_i8_avx2_novnni = 0;
        const int two = mad != sd_i8_rows_avx2();
        arms[na++] = (arm){two ? "avx2-vnni" : "avx2", sd_ops_fast_level("avx2"), 0, 0};
        if (two) arms[na++] = (arm){"avx2-maddubs", sd_ops_fast_level("avx2"), 1, 0};
    }
    if (sd_ops_fast_level("neon")) arms[na++] = (arm){"neon", sd_ops_fast_level("neon"), 0, 0};
    sd_pool *pool = sd_pool_create(threads > 0 ? threads : 1);
    double bw = 0, bwmed = 0;
    measure_bw(pool, 5, &bw, &bwmed);
    printf("threads %d, %d samples per arm (interleaved), bandwidth %.1f GB/s (best of 5; median %.1f), loadavg ",
           threads, samples, bw / 1e9, bwmed / 1e9);
    FILE *la = fopen("/proc/loadavg", "r");
    char lb[128] = "?";
    if (la) { if (!fgets(lb, sizeof lb, la)) lb[0] = 0; fclose(la); }
    printf("%s", lb);
    printf("| shape | rows x cols | bits | T | arm | median us | min | max | ns per row-token | roofline |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    int bad = 0;
    float *x = malloc(sizeof(float) * 768 * 64), *y = malloc(sizeof(float) * 151936 * 16);
    float *y0 = malloc(sizeof(float) * 151936 * 16);
    double *t = malloc(sizeof(double) * 5 * (size_t)samples);
    for (int i = 0; i < 768 * 64; i++) x[i] = (float)((int)(rnd32() % 2001) - 1000) * 1e-3f;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        if (filter && !strstr(shapes[si].name, filter)) continue;
        size_t bytes;
        sd_mat W = make(shapes[si].rows, shapes[si].cols, shapes[si].bits, &bytes);
        for (int ti = 0; ti < nT; ti++) {
            const int T = Ts[ti];
            if (T > shapes[si].tmax) continue;
            /* about 2 ms of work per sample at 2 ns per row-token */
            int reps = (int)(1e6 / ((double)W.rows * T * 2.0));
            if (reps < 1) reps = 1;
            int differ = 0;
            for (int s = -1; s < samples; s++)   /* s = -1: warm-up, and the guard */
                for (int a = 0; a < na; a++) {
                    sd_i8_avx2_novnni = arms[a].novnni;
                    sd_i8_avx512_prefer_amx(arms[a].amx);
                    double t0 = now_s();
                    for (int r = 0; r < reps; r++) arms[a].o->matmul_i8(&W, x, W.cols, y, W.rows, T, pool);
                    double dt = now_s() - t0;
                    sd_i8_avx2_novnni = 0;
                    sd_i8_avx512_prefer_amx(0);
                    if (s >= 0) t[a * samples + s] = dt / reps * 1e6;
                    else if (a == 0) memcpy(y0, y, sizeof(float) * (size_t)W.rows * T);
                    else if (memcmp(y0, y, sizeof(float) * (size_t)W.rows * T) != 0) differ = 1;
                }
            if (differ) {
                printf("| %s | %d x %d | %d | %d | DIFFERS: the arms wrote different y | | | | | |\n", shapes[si].name,
                       W.rows, W.cols, W.bits, T);
                bad = 1;
                continue;
            }
            for (int a = 0; a < na; a++) {
                double *v = t + a * samples, m = median(v, samples);
                printf("| %s | %d x %d | %d | %d | %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n", shapes[si].name, W.rows,
                       W.cols, W.bits, T, arms[a].name, m, v[0], v[samples - 1], m * 1e3 / ((double)W.rows * T),
                       bw > 0 ? (double)bytes / bw * 1e6 / m : 0.0);
            }
        }
        free((void *)W.w); free((void *)W.scales); free((void *)W.biases);
        if (W.pk) { sd_i8_pack_free((sd_i8_packed *)W.pk); free((void *)W.pk); }
    }
    free(x); free(y); free(y0); free(t);
    sd_pool_free(pool);
    return bad;
}
