/* i8_quality.c: how close int8 activations (precision int8) come to the f32 reference on a
 * prompt file. For each prompt: the f32 context decodes N tokens greedily; then both precisions
 * score that same sequence (prompt + continuation, teacher-forced) and, at every continuation
 * position, we compare the next-token distributions: top-1 agreement, KL(p_f32 || p_int8) in
 * nats (softmax at temperature 1), and where int8's own greedy decode first leaves f32's.
 * Usage: i8_quality MODEL_DIR PROMPTS.jsonl [N=32] [max_prompts=64] [threads=2] [backend=cpu] [kv=f32]
 * kv: the KV cache dtype of the int8 arm (f32, bf16, f16); the f32 reference keeps f32. */
#include "specdec.h"
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *g_backend = "cpu";

static specdec_ctx *mk(const specdec_model *m, specdec_precision p, int threads, specdec_kv_dtype kv) {
    specdec_ctx_params cp = specdec_ctx_default_params();
    cp.backend = g_backend;
    cp.kv_dtype = kv;
    cp.precision = p;
    cp.n_threads = threads;
    specdec_ctx *c = NULL;
    specdec_err err;
    if (specdec_ctx_init(m, &cp, &c, &err) != SPECDEC_OK) { fprintf(stderr, "ctx: %s\n", err.msg); exit(1); }
    return c;
}

static int argmax(const float *l, int n) {
    int a = 0;
    for (int i = 1; i < n; i++) if (l[i] > l[a]) a = i;
    return a;
}

/* logits (T, V) for ids[0..T) from an empty cache, in chunks of 64 */
static void score(specdec_ctx *c, const int32_t *ids, int T, float *logits, int V) {
    specdec_err err;
    specdec_ctx_truncate(c, 0, &err);
    for (int t = 0; t < T; t += 64) {
        int n = T - t < 64 ? T - t : 64;
        if (specdec_ctx_forward(c, ids + t, n, logits + (size_t)t * V, NULL, &err) != SPECDEC_OK) {
            fprintf(stderr, "forward: %s\n", err.msg); exit(1);
        }
    }
}

/* greedy: n tokens after ids[0..P) into ids[P..P+n) */
static void greedy(specdec_ctx *c, int32_t *ids, int P, int n, float *row, int V) {
    specdec_err err;
    specdec_ctx_truncate(c, 0, &err);
    float *tmp = malloc(sizeof(float) * (size_t)P * V);
    score(c, ids, P, tmp, V);
    memcpy(row, tmp + (size_t)(P - 1) * V, sizeof(float) * V);
    free(tmp);
    for (int i = 0; i < n; i++) {
        ids[P + i] = argmax(row, V);
        if (i + 1 < n && specdec_ctx_forward(c, ids + P + i, 1, row, NULL, &err) != SPECDEC_OK) exit(1);
    }
}

static double kl(const float *p_logit, const float *q_logit, int V) {
    double mp = -INFINITY, mq = -INFINITY, zp = 0, zq = 0;
    for (int i = 0; i < V; i++) { if (p_logit[i] > mp) mp = p_logit[i]; if (q_logit[i] > mq) mq = q_logit[i]; }
    for (int i = 0; i < V; i++) { zp += exp(p_logit[i] - mp); zq += exp(q_logit[i] - mq); }
    double lzp = log(zp) + mp, lzq = log(zq) + mq, k = 0;
    for (int i = 0; i < V; i++) {
        double lp = p_logit[i] - lzp, lq = q_logit[i] - lzq;
        k += exp(lp) * (lp - lq);
    }
    return k;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: i8_quality MODEL_DIR PROMPTS.jsonl [N] [max_prompts] [threads] [backend] [kv]\n"); return 2; }
    if (argc > 6) g_backend = argv[6];
    specdec_kv_dtype kv = SPECDEC_KV_F32;
    if (argc > 7) {
        if (!strcmp(argv[7], "bf16")) kv = SPECDEC_KV_BF16;
        else if (!strcmp(argv[7], "f16")) kv = SPECDEC_KV_F16;
        else if (strcmp(argv[7], "f32")) { fprintf(stderr, "i8_quality: kv '%s' is not f32, bf16 or f16\n", argv[7]); return 2; }
    }
    int N = argc > 3 ? atoi(argv[3]) : 32, maxp = argc > 4 ? atoi(argv[4]) : 64, th = argc > 5 ? atoi(argv[5]) : 2;
    specdec_err err;
    specdec_model *m = NULL;
    specdec_model_params mp = specdec_model_default_params();
    if (specdec_model_load(argv[1], &mp, &m, &err) != SPECDEC_OK) { fprintf(stderr, "%s\n", err.msg); return 1; }
    specdec_tokenizer *tok = NULL;
    if (specdec_tokenizer_load(argv[1], &tok, &err) != SPECDEC_OK) { fprintf(stderr, "%s\n", err.msg); return 1; }
    specdec_model_info info;
    specdec_model_get_info(m, &info);
    const int V = info.vocab_size;
    specdec_ctx *cf = mk(m, SPECDEC_PRECISION_F32, th, SPECDEC_KV_F32), *ci = mk(m, SPECDEC_PRECISION_INT8, th, kv);
    FILE *f = fopen(argv[2], "r");
    if (!f) { perror(argv[2]); return 1; }
    char line[1 << 16];
    long n_pos = 0, n_top1 = 0, n_prompts = 0, greedy_same = 0, first_div_sum = 0;
    double kl_sum = 0, kl_max = 0;
    while (n_prompts < maxp && fgets(line, sizeof line, f)) {
        json_t *j = json_loads(line, 0, NULL);
        const char *text = j ? json_string_value(json_object_get(j, "prompt")) : NULL;
        if (!text) { json_decref(j); continue; }
        int32_t *pids = NULL;
        size_t np = 0;
        if (specdec_tokenize(tok, text, strlen(text), &pids, &np, &err) != SPECDEC_OK || np == 0 || np + N > 1000) {
            free(pids); json_decref(j); continue;
        }
        const int P = (int)np, T = P + N;
        int32_t *ids = malloc(sizeof(int32_t) * T), *idi = malloc(sizeof(int32_t) * T);
        memcpy(ids, pids, sizeof(int32_t) * P);
        memcpy(idi, pids, sizeof(int32_t) * P);
        float *row = malloc(sizeof(float) * V);
        greedy(cf, ids, P, N, row, V);
        greedy(ci, idi, P, N, row, V);
        int div = N;
        for (int i = 0; i < N; i++) if (ids[P + i] != idi[P + i]) { div = i; break; }
        greedy_same += div == N;
        first_div_sum += div;
        float *lf = malloc(sizeof(float) * (size_t)T * V), *li = malloc(sizeof(float) * (size_t)T * V);
        score(cf, ids, T, lf, V);
        score(ci, ids, T, li, V);
        for (int t = P - 1; t < T - 1; t++) {   /* the distributions that chose the continuation */
            const float *a = lf + (size_t)t * V, *b = li + (size_t)t * V;
            n_top1 += argmax(a, V) == argmax(b, V);
            double k = kl(a, b, V);
            kl_sum += k;
            if (k > kl_max) kl_max = k;
            n_pos++;
        }
        n_prompts++;
        free(lf); free(li); free(row); free(ids); free(idi); free(pids);
        json_decref(j);
    }
    fclose(f);
    printf("prompts %ld, continuation positions %ld (N = %d, teacher-forced on the f32 greedy text; int8 arm's KV %s)\n",
           n_prompts, n_pos, N, argc > 7 ? argv[7] : "f32");
    printf("top-1 agreement int8 vs f32: %.4f (%ld / %ld)\n", (double)n_top1 / n_pos, n_top1, n_pos);
    printf("KL(f32 || int8) nats: mean %.6f, max %.6f\n", kl_sum / n_pos, kl_max);
    printf("free-running greedy: %ld / %ld prompts identical for %d tokens; mean first divergence at token %.1f\n",
           greedy_same, n_prompts, N, (double)first_div_sum / n_prompts);
    specdec_ctx_free(cf); specdec_ctx_free(ci);
    specdec_tokenizer_free(tok);
    specdec_model_free(m);
    return 0;
}
