/* bench_decode.c: CPU decode step of the reference Qwen3 shape against the bandwidth floor.
 * In one run:
 *  1. builds a random-init model in a temp dir (vocab 151936, hidden 384, 8 layers, 6 q / 2 kv
 *     heads, head_dim 128, intermediate 768, tied embeddings, bf16) with the safetensors
 *     writer (tests/tiny_model.h), quantizes it with specdec_quantize (4-bit, group 64), loads
 *     the quantized copy;
 *  2. measures the streaming read bandwidth (2 threads by default, 1 GiB, best and median);
 *  3. decode: prefill 32 tokens, then `steps` single-token specdec_ctx_forward calls (logits
 *     of every step written, as generation needs them), for KV dtypes f32 / bf16 / f16
 *     interleaved, `reps` repeats after a warm-up; per-token median / min / max over all
 *     timed steps; bytes read per token = decode_bytes_per_token + the KV bytes attention
 *     reads at that position (averaged over the steps); floor = bytes / bandwidth;
 *  4. verify pass: from 32 past positions, one forward of T = 1, 2, 4, 8, 16 positions with
 *     logits for all T (what a speculative verify does), truncated back after each call; T
 *     values interleaved, median over `reps` x 3 samples, cost relative to T = 1.
 * Guard: every timed call must advance n_past by exactly its T (checked, else it aborts the
 * comparison). Usage: bench_decode [threads=2] [reps=5] [steps=64] */
#include "specdec.h"
#include "cpu/pool.h"
#include "../tests/tiny_model.h"
#include "bench_util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int fwd(specdec_ctx *c, const int32_t *tok, int T, float *logits) {
    specdec_err e = {0};
    int n0 = specdec_ctx_n_past(c);
    if (specdec_ctx_forward(c, tok, T, logits, NULL, &e) != SPECDEC_OK) { fprintf(stderr, "forward: %s\n", e.msg); return -1; }
    if (specdec_ctx_n_past(c) != n0 + T) { fprintf(stderr, "guard: n_past did not advance by %d\n", T); return -1; }
    return 0;
}

int main(int argc, char **argv) {
    int nth = argc > 1 ? atoi(argv[1]) : 2;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    int steps = argc > 3 ? atoi(argv[3]) : 64;
    if (reps < 5) reps = 5;
    if (steps < 64) steps = 64;
    const int prefill = 32;
    FILE *la = fopen("/proc/loadavg", "r");
    char load[128] = "?\n";
    if (la) { if (!fgets(load, sizeof load, la)) strcpy(load, "?\n"); fclose(la); }

    /* 1. model */
    char dir[256], qdir[300];
    if (!tm_mkdtemp(dir, sizeof dir)) { fprintf(stderr, "mkdtemp\n"); return 1; }
    snprintf(qdir, sizeof qdir, "%s/q4", dir);
    char src[300];
    snprintf(src, sizeof src, "%s/bf16", dir);
    if (mkdir(src, 0700) != 0) { fprintf(stderr, "mkdir %s\n", src); return 1; }
    tm_dims d = {151936, 384, 768, 8, 6, 2, 128, 0, true, SPECDEC_DTYPE_BF16};
    double t0 = now_s();
    if (tm_write_model(src, &d, 7, NULL, NULL, NULL, 0) != 0) { tm_rm_rf(dir); return 1; }
    specdec_quantize_params qp = specdec_quantize_default_params();
    qp.bits = 4;
    qp.group_size = 64;
    specdec_err e = {0};
    if (specdec_quantize(src, qdir, &qp, &e) != SPECDEC_OK) { fprintf(stderr, "quantize: %s\n", e.msg); tm_rm_rf(dir); return 1; }
    specdec_model *m = NULL;
    specdec_model_params mp = specdec_model_default_params();
    if (specdec_model_load(qdir, &mp, &m, &e) != SPECDEC_OK) { fprintf(stderr, "load: %s\n", e.msg); tm_rm_rf(dir); return 1; }
    specdec_model_info info;
    specdec_model_get_info(m, &info);
    double t_build = now_s() - t0;

    /* 2. bandwidth */
    double bw_best = 0, bw_med = 0;
    sd_pool *bwp = sd_pool_create(nth);
    if (bwp) measure_bw(bwp, 9, &bw_best, &bw_med);
    sd_pool_free(bwp);
    printf("bench_decode: threads=%d reps=%d steps=%d loadavg %s", nth, reps, steps, load);
    printf("model: vocab %d hidden %d layers %d heads %d/%d hd %d inter %d tied, q%d g%d %s (built+quantized+loaded in %.1f s)\n",
           info.vocab_size, info.hidden_size, info.n_layers, info.n_heads, info.n_kv_heads, info.head_dim,
           info.intermediate_size, info.quant_bits, info.quant_group, specdec_dtype_name(info.weight_dtype), t_build);
    printf("weights read per decode step: %.2f MB\n", info.decode_bytes_per_token / 1e6);
    printf("streaming read bandwidth (1 GiB, %d threads): best %.2f GB/s, median %.2f GB/s (floor uses the best)\n\n",
           nth, bw_best / 1e9, bw_med / 1e9);

    /* 3. decode, KV dtypes interleaved */
    static const specdec_kv_dtype kdt[3] = {SPECDEC_KV_F32, SPECDEC_KV_BF16, SPECDEC_KV_F16};
    static const char *kname[3] = {"f32", "bf16", "f16"};
    const int V = info.vocab_size, n_ctx = prefill + steps + 32;
    specdec_ctx *ctx[3] = {0};
    for (int k = 0; k < 3; k++) {
        specdec_ctx_params cp = specdec_ctx_default_params();
        cp.n_ctx = n_ctx;
        cp.n_threads = nth;
        cp.kv_dtype = kdt[k];
        if (specdec_ctx_init(m, &cp, &ctx[k], &e) != SPECDEC_OK) { fprintf(stderr, "ctx: %s\n", e.msg); return 1; }
    }
    int32_t *toks = (int32_t *)malloc(sizeof(int32_t) * (size_t)(prefill + steps + 32));
    uint64_t rs = 12345;
    for (int i = 0; i < prefill + steps + 32; i++) toks[i] = (int32_t)((tm_rand(&rs) * 0.5 + 0.5) * (V - 1));
    float *logits = (float *)malloc(sizeof(float) * (size_t)16 * V);
    double *tk[3];
    for (int k = 0; k < 3; k++) tk[k] = (double *)malloc(sizeof(double) * (size_t)reps * steps);
    int fail = 0;
    for (int r = -1; r < reps && !fail; r++) /* r = -1: warm-up, discarded */
        for (int k = 0; k < 3 && !fail; k++) {
            specdec_ctx *c = ctx[k];
            if (specdec_ctx_truncate(c, 0, &e) != SPECDEC_OK || fwd(c, toks, prefill, NULL)) { fail = 1; break; }
            for (int s = 0; s < steps; s++) {
                double a = now_s();
                if (fwd(c, toks + prefill + s, 1, logits)) { fail = 1; break; }
                if (r >= 0) tk[k][r * steps + s] = now_s() - a;
            }
        }
    if (fail) return 1;
    const double kvrow = (double)info.n_layers * 2.0 * info.n_kv_heads * info.head_dim; /* elements per position */
    double avg_ctx = prefill + (steps + 1) / 2.0; /* keys read per step, averaged over the steps */
    printf("decode (prefill %d, then %d single-token steps x %d repeats; per-token times over all steps)\n", prefill, steps, reps);
    printf("%-5s %9s %9s %9s %8s %10s %9s %8s\n", "kv", "med ms", "min ms", "max ms", "tok/s", "MB/token", "floor ms", "ratio");
    double med_k[3];
    for (int k = 0; k < 3; k++) {
        int n = reps * steps;
        double mn = 1e30, mx = 0;
        for (int i = 0; i < n; i++) { if (tk[k][i] < mn) mn = tk[k][i]; if (tk[k][i] > mx) mx = tk[k][i]; }
        double med = median(tk[k], n);
        med_k[k] = med;
        double bytes = (double)info.decode_bytes_per_token + kvrow * avg_ctx * (k == 0 ? 4.0 : 2.0);
        double floor_s = bytes / bw_best;
        printf("%-5s %9.3f %9.3f %9.3f %8.1f %10.3f %9.3f %8.2f\n", kname[k], med * 1e3, mn * 1e3, mx * 1e3, 1.0 / med,
               bytes / 1e6, floor_s * 1e3, floor_s / med);
    }
    int best = 0;
    for (int k = 1; k < 3; k++) if (med_k[k] < med_k[best] * 0.98) best = k; /* a change must win by > 2% */
    printf("fastest KV dtype by median (f32 unless another wins by > 2%%): %s\n\n", kname[best]);

    /* 4. verify pass cost vs T, on the f32-KV context (the default) */
    static const int Ts[5] = {1, 2, 4, 8, 16};
    const int ns = reps * 3;
    double *tv = (double *)malloc(sizeof(double) * 5 * (size_t)ns);
    specdec_ctx *c = ctx[0];
    if (specdec_ctx_truncate(c, 0, &e) != SPECDEC_OK || fwd(c, toks, prefill, NULL)) return 1;
    for (int s = -1; s < ns && !fail; s++)
        for (int ti = 0; ti < 5; ti++) {
            double a = now_s();
            if (fwd(c, toks + prefill, Ts[ti], logits)) { fail = 1; break; }
            double t = now_s() - a;
            if (s >= 0) tv[ti * ns + s] = t;
            if (specdec_ctx_truncate(c, prefill, &e) != SPECDEC_OK) { fail = 1; break; }
        }
    if (fail) return 1;
    printf("verify pass (one forward of T positions at n_past = %d, logits for all T; kv f32; median of %d)\n", prefill, ns);
    printf("%3s %9s %9s %9s %8s %11s\n", "T", "med ms", "min ms", "max ms", "xT1", "ms/position");
    double m1 = 0;
    for (int ti = 0; ti < 5; ti++) {
        double *v = tv + ti * ns;
        double med = median(v, ns);
        if (ti == 0) m1 = med;
        printf("%3d %9.3f %9.3f %9.3f %8.2f %11.3f\n", Ts[ti], med * 1e3, v[0] * 1e3, v[ns - 1] * 1e3, med / m1, med * 1e3 / Ts[ti]);
    }
    FILE *la2 = fopen("/proc/loadavg", "r");
    if (la2) { if (fgets(load, sizeof load, la2)) printf("\nloadavg at end %s", load); fclose(la2); }
    for (int k = 0; k < 3; k++) { specdec_ctx_free(ctx[k]); free(tk[k]); }
    free(tv); free(logits); free(toks);
    specdec_model_free(m);
    tm_rm_rf(dir);
    return 0;
}
