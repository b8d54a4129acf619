/* bench_attn.c: the fast CPU attention (sd_ops_fast()->attention) at the reference pair's shape
 * (6 query heads, 2 KV heads, head_dim 128) against the context length: T = 1 (a decode step)
 * and T = 4 (a K = 4 verify) at n = 128 / 512 / 1024 keys, per KV dtype. Median / min / max ms
 * over `reps` samples after a warm-up, and the K and V bytes of the call counted per query head
 * (as the first kernel read them), over the time. The grouped kernel (sd_isa.attn_group) reads a kv
 * head once for its 3 query heads, so it moves a third of that column; the column keeps its first
 * definition so that records stay comparable.
 * Usage: bench_attn [threads=2] [reps=15] */
#include "specdec.h"
#include "cpu/ops.h"
#include "cpu/pool.h"
#include "bench_util.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rs = 0x9e3779b97f4a7c15ULL;
static float rndf(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (float)((rs >> 40) & 0xFFFF) / 65536.0f - 0.5f; }

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2, reps = argc > 2 ? atoi(argv[2]) : 15;
    if (threads < 1 || reps < 3 || reps > 101) { fprintf(stderr, "usage: bench_attn [threads>=1] [reps 3..101]\n"); return 2; }
    sd_pool *p = sd_pool_create(threads);
    if (!p) { fprintf(stderr, "bench_attn: no thread pool\n"); return 1; }
    const sd_ops *ops = sd_ops_fast();
    double bw_best, bw_med;
    measure_bw(p, 5, &bw_best, &bw_med);
    char la[128] = "";
    FILE *lf = fopen("/proc/loadavg", "r");
    if (lf) { if (!fgets(la, sizeof la, lf)) la[0] = 0; fclose(lf); la[strcspn(la, "\n")] = 0; }
    printf("bench_attn: simd=%s threads=%d reps=%d loadavg %s\n", sd_simd_name(), threads, reps, la);
    printf("streaming read bandwidth: best %.2f GB/s, median %.2f GB/s\n\n", bw_best / 1e9, bw_med / 1e9);
    printf("kv     T     n    med ms    min ms    max ms   KV MB read  GB/s eff\n");
    const int nh = 6, nkv = 2, hd = 128, NMAX = 1024;
    const int row = nkv * hd;
    float *src = malloc(sizeof(float) * (size_t)NMAX * row);
    float *q = malloc(sizeof(float) * 4 * nh * hd), *out = malloc(sizeof(float) * 4 * nh * hd);
    if (!src || !q || !out) { fprintf(stderr, "bench_attn: out of memory\n"); return 1; }
    for (size_t i = 0; i < (size_t)NMAX * row; i++) src[i] = rndf();
    for (int i = 0; i < 4 * nh * hd; i++) q[i] = rndf() * 4.0f;
    static const sd_kv_dtype_e dts[2] = {SD_KV_F32, SD_KV_BF16};
    static const char *dtn[2] = {"f32", "bf16"};
    for (int di = 0; di < 2; di++) {
        sd_attn_shape s = {nh, nkv, hd, dts[di]};
        size_t es = dts[di] == SD_KV_F32 ? 4 : 2;
        void *kc = malloc(es * (size_t)NMAX * row), *vc = malloc(es * (size_t)NMAX * row);
        float *scratch = malloc(sizeof(float) * sd_attention_scratch_floats(&s, 4, NMAX, threads));
        if (!kc || !vc || !scratch) { fprintf(stderr, "bench_attn: out of memory\n"); return 1; }
        sd_kv_store(dts[di], kc, row, 0, src, NMAX);
        for (size_t i = 0; i < (size_t)NMAX * row; i++) src[i] = -src[i];
        sd_kv_store(dts[di], vc, row, 0, src, NMAX);
        sd_kv_layer kv = {kc, vc};
        static const int ns[3] = {128, 512, 1024};
        for (int T = 1; T <= 4; T += 3)
            for (int ni = 0; ni < 3; ni++) {
                int n = ns[ni], pos0 = n - T;
                double t[101];
                ops->attention(&s, &kv, q, out, T, pos0, scratch, p);   /* warm-up */
                for (int r = 0; r < reps; r++) {
                    double t0 = now_s();
                    ops->attention(&s, &kv, q, out, T, pos0, scratch, p);
                    t[r] = (now_s() - t0) * 1e3;
                }
                double mn = t[0], mx = t[0];
                for (int r = 0; r < reps; r++) { if (t[r] < mn) mn = t[r]; if (t[r] > mx) mx = t[r]; }
                double med = median(t, reps);
                double mb = (double)T * nh * 2.0 * n * hd * es / 1e6;   /* each query head reads K and V rows */
                printf("%-5s %2d %5d %9.4f %9.4f %9.4f %11.2f %9.2f\n", dtn[di], T, n, med, mn, mx, mb, mb / med);
            }
        free(kc); free(vc); free(scratch);
    }
    volatile float sink = out[0];
    (void)sink;
    free(src); free(q); free(out);
    sd_pool_free(p);
    return 0;
}
