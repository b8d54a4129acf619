/* bench_tp.c: what the tensor-parallel layer costs on the CPU, where it is a correctness tool
 * (docs/tensor-parallel.md). One run, arms interleaved after a discarded warm-up:
 *   plain   the model on the cpu backend
 *   tp1     --tp 1: the tp backend over one cpu rank (pointer translation, the 1-rank all-gather
 *           and copy after o_proj and down_proj)
 *   tp2     --tp 2: two cpu ranks run one after the other, the sim all-gather + sum
 * Each: prefill of 32 tokens, then `steps` single-token specdec_ctx_forward calls with logits;
 * per-token median / min / max over reps. Bytes per token: the model's decode bytes (plain, tp1),
 * plus, for tp2, the replicated LM head and embedding row read by the second rank; floor = bytes /
 * the streaming read bandwidth measured here. Guards: n_past advances by 1 per call; the tp arms
 * must move the all-reduce counter (2 per layer per call) and the plain arm must not; greedy ids of
 * the arms are compared. Usage: bench_tp [MODEL_DIR=models/qwen3-kernel] [threads=2] [reps=5] [steps=32] */
#include "specdec.h"
#include "cpu/pool.h"
#include "bench_util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ARMS = 3, PRE = 32 };

static int argmax(const float *v, int n) { int a = 0; for (int i = 1; i < n; i++) if (v[i] > v[a]) a = i; return a; }

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "models/qwen3-kernel";
    int nth = argc > 2 ? atoi(argv[2]) : 2, reps = argc > 3 ? atoi(argv[3]) : 5, steps = argc > 4 ? atoi(argv[4]) : 32;
    if (reps < 5) reps = 5;
    FILE *la = fopen("/proc/loadavg", "r");
    char load[128] = "?\n";
    if (la) { if (!fgets(load, sizeof load, la)) strcpy(load, "?\n"); fclose(la); }
    specdec_err e = {0};
    specdec_model *m = NULL;
    if (specdec_model_load(dir, NULL, &m, &e) != SPECDEC_OK) { fprintf(stderr, "load: %s\n", e.msg); return 1; }
    specdec_model_info in;
    specdec_model_get_info(m, &in);
    const char *names[ARMS] = {"plain", "tp1", "tp2"};
    int tps[ARMS] = {0, 1, 2};
    specdec_ctx *c[ARMS] = {0};
    for (int a = 0; a < ARMS; a++) {
        specdec_ctx_params cp = specdec_ctx_default_params();
        cp.backend = "cpu"; cp.n_threads = nth; cp.n_ctx = PRE + steps + 8; cp.tp = tps[a];
        if (specdec_ctx_init(m, &cp, &c[a], &e) != SPECDEC_OK) { fprintf(stderr, "%s: %s\n", names[a], e.msg); return 1; }
    }
    double bw_best = 0, bw_med = 0;
    sd_pool *bwp = sd_pool_create(nth);
    if (bwp) measure_bw(bwp, 9, &bw_best, &bw_med);
    sd_pool_free(bwp);
    /* the second rank of tp2 reads the replicated LM head again (tied: the embedding) */
    double head = (double)in.vocab_size * in.hidden_size * (in.quant_bits ? in.quant_bits / 8.0 + 4.0 / in.quant_group : 2.0);
    double bytes[ARMS] = {(double)in.decode_bytes_per_token, (double)in.decode_bytes_per_token,
                          (double)in.decode_bytes_per_token + head};
    int V = in.vocab_size;
    float *lg = malloc(sizeof(float) * (size_t)V * PRE);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(steps + 1) * ARMS * 2);
    int32_t pre[PRE];
    for (int i = 0; i < PRE; i++) pre[i] = (int32_t)(1000 + 37 * i);
    double *ms = malloc(sizeof(double) * (size_t)reps * steps * ARMS);
    int nms[ARMS] = {0};
    uint64_t calls[ARMS] = {0};
    for (int r = -1; r < reps; r++)   /* r = -1: the warm-up, discarded */
        for (int a = 0; a < ARMS; a++) {
            specdec_tp_stats t0, t1;
            specdec_ctx_tp_stats(c[a], &t0);
            if (specdec_ctx_truncate(c[a], 0, &e) || specdec_ctx_forward(c[a], pre, PRE, lg, NULL, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
            int32_t tok = argmax(lg + (size_t)(PRE - 1) * V, V);
            for (int s = 0; s < steps; s++) {
                int n0 = specdec_ctx_n_past(c[a]);
                double ts = now_s();
                if (specdec_ctx_forward(c[a], &tok, 1, lg, NULL, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
                double dt = now_s() - ts;
                if (specdec_ctx_n_past(c[a]) != n0 + 1) { fprintf(stderr, "guard: n_past\n"); return 1; }
                if (r >= 0) ms[(size_t)a * reps * steps + nms[a]++] = 1e3 * dt;
                if (r == 0) ids[a * (steps + 1) + s] = tok;
                tok = argmax(lg, V);
            }
            specdec_ctx_tp_stats(c[a], &t1);
            if (r >= 0) calls[a] += t1.allreduce_calls - t0.allreduce_calls;
        }
    printf("bench_tp: %s, threads=%d reps=%d steps=%d, loadavg %s", dir, nth, reps, steps, load);
    printf("streaming read bandwidth (1 GiB, %d threads): best %.2f GB/s, median %.2f GB/s (floor uses the best)\n\n",
           nth, bw_best / 1e9, bw_med / 1e9);
    printf("| arm | ms/token median | min | max | all-reduces / forward call | MB read / token | floor ms | x floor |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    int bad = 0;
    for (int a = 0; a < ARMS; a++) {
        double *v = ms + (size_t)a * reps * steps;
        double med = median(v, nms[a]), lo = v[0], hi = v[nms[a] - 1];
        double floor_ms = bw_best > 0 ? 1e3 * bytes[a] / bw_best : 0;
        printf("| %s | %.3f | %.3f | %.3f | %.1f | %.2f | %.3f | %.2f |\n", names[a], med, lo, hi,
               (double)calls[a] / (double)(reps * (steps + 1)), bytes[a] / 1e6, floor_ms, floor_ms > 0 ? med / floor_ms : 0);
        if ((a == 0) != (calls[a] == 0)) { printf("guard: arm %s all-reduce counter %llu\n", names[a], (unsigned long long)calls[a]); bad = 1; }
    }
    for (int a = 1; a < ARMS; a++)
        printf("greedy ids of %s vs plain over %d steps: %s\n", names[a], steps,
               memcmp(ids, ids + a * (steps + 1), sizeof(int32_t) * (size_t)steps) ? "DIFFER" : "identical");
    for (int a = 0; a < ARMS; a++) specdec_ctx_free(c[a]);
    specdec_model_free(m);
    free(lg); free(ids); free(ms);
    return bad;
}
