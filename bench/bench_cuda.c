/* bench_cuda.c: micro-benchmark of the CUDA backend's kernels, run through the backend table
 * (the production entry points) and timed with CUDA events on the backend's stream. Every op
 * sequence is recorded once (a CUDA graph, as the round runs them) and replayed; weights rotate
 * over enough copies (>= 180 MB) that the 60 MB L2 cannot hold them. Everything is measured in
 * one run, and each ratio is against the floor of that run: bytes the op must read divided by
 * the device-to-device copy bandwidth measured first ((read + write bytes) / time of a 1 GiB
 * copy; benchmarking.md). Random weights of the Qwen3 shapes (never zeros).
 *
 *   ./build/bench_cuda [--quick | --profile | --attn | --matmul S:F ... [--wide]] [--arm-b generic|stream|mma|mma_tile|mma_tile_w|mma_w] [--device N]
 *
 * prints, as Markdown tables:
 *   - device, load average, copy bandwidth (median, min, max of 15 copies);
 *   - matmul per model shape (embedded pair, Qwen3 1.7B / 8B / 32B) and matrix (q, k = v, o,
 *     gate = up, down, LM head 151936 x H), for 4-bit g64, 8-bit g64 (bf16 scales) and bf16, at
 *     T = 1, 2, 4, 8, 16, 32, 64: median us (min-max) per call, GB/s, floor ratio, time / T=1;
 *     for T <= 8 both arms, the default pick and the second arm (--arm-b: generic, the picks
 *     without gemv_i4.cu's kernel, by default; stream, the streaming kernel of stream.cu; mma,
 *     the default picks with mma_i4.cu's tensor-core kernel against the same without it (the
 *     tiled kernel from T = 16 on), both arms at every T; mma_tile, mma_tile.cu's kernel against
 *     mma_i4.cu's, both arms at every T; mma_tile_w, mma_tile.cu's with its weights staged against
 *     without; mma_w, the same against mma_i4.cu's),
 *     recorded once each and their replays alternated, 15 of each; then per model and format
 *     the matmul time of one decode step (all layers + LM head, T = 1) against its floor, both arms;
 *   - the fused LM head + argmax against matmul + argmax (T = 1, 4), and on the second arm;
 *   - attention (8B shape, bf16 KV) at 128, 256, 512, 2048 and 8192 keys, T = 1 and 4, against the KV bytes, the
 *     split kernel (attention.cu) and the staged one (attn_staged.cu); then a prefill chunk's (T = 64,
 *     f32 KV, 64 to 8192 keys) in the staged kernel with 1 and 4 rows a block and its teams form
 *     with 2 and 4 teams;
 *   - the cost of one launch, eager and inside a replayed recording;
 *   - bitwise batch-invariance self-checks (a row alone vs the same row in T = 2..64 calls, the
 *     fused LM head vs argmax of the logits, attention rows alone vs T = 16), PASS / FAIL.
 * --wide (with --matmul): those tables at T = 1, 16, 32, 64 only, nothing after them.
 * --quick: the embedded and 8B shapes, 4-bit and bf16, T = 1, 2, 4, 8, 16 (a shorter run).
 * --matmul S:F (repeatable): only the matmul tables of shape S (0 embedded, 1 1.7B, 2 8B, 3 32B)
 * and format F (0 q4g64, 1 q8g64, 2 bf16, 3 q4g64 int8, 4 q8g64 int8), T = 1..6, 8, 16, 32, 64, then the fused
 * LM head's and the attention's tables. --attn: the attention table alone (after the copy bandwidth,
 * the self-checks and the launch cost). */
#ifdef SPECDEC_HAVE_CUDA
#include "backend/backend.h"
#include "cuda/cuda_backend.h"
#include "util/dtype.h"
#include <cuda_runtime_api.h>
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SPECDEC_HAVE_CUDA
int main(void) {
    fprintf(stderr, "bench_cuda: this build has no CUDA backend (nvcc was not found)\n");
    return 1;
}
#else

#define VOCAB 151936
#define ROTATE_BYTES ((size_t)180 << 20)
#define PATTERN_BYTES ((size_t)64 << 20)
#define SAMPLES 15

static sd_backend *G;
static specdec_err E;
static cudaStream_t S;
static void *pattern;    /* PATTERN_BYTES of valid bf16 values, copied into every weight */
static double bw;        /* copy bandwidth of this run, bytes/s */
static uint64_t next_key = 1;

static void die(const char *what, const char *msg) {
    fprintf(stderr, "bench_cuda: %s: %s\n", what, msg);
    exit(1);
}

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
    uint64_t z = (rs += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static float rnorm(void) {
    double u1 = (double)(rnd() >> 11) / 9007199254740992.0 + 1e-300, u2 = (double)(rnd() >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static void *dalloc(size_t n) {
    void *p = NULL;
    if (G->i->alloc(G, n, "bench buffer", &p, &E) != SPECDEC_OK) die("alloc", E.msg);
    return p;
}
static void dwrite(void *d, const void *h, size_t n) {
    if (G->i->write(G, d, h, n, &E) != SPECDEC_OK) die("write", E.msg);
}
static void dread(void *h, const void *d, size_t n) {
    if (G->i->read(G, h, d, n, &E) != SPECDEC_OK) die("read", E.msg);
}
static void dfill(void *d, size_t n) {
    for (size_t off = 0; off < n; off += PATTERN_BYTES) {
        size_t k = n - off < PATTERN_BYTES ? n - off : PATTERN_BYTES;
        if (G->i->copy(G, (char *)d + off, pattern, k, &E) != SPECDEC_OK) die("copy", E.msg);
    }
}
static float *drandom(size_t n, float scale) {
    float *h = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = rnorm() * scale;
    float *d = dalloc(n * sizeof(float));
    dwrite(d, h, n * sizeof(float));
    free(h);
    return d;
}

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct timing {
    double med, mn, mx;   /* seconds per op */
} timing;

/* Seconds per op of one run(ctx) that queues k ops (events around it). */
static double time_once(void (*run)(void *), void *ctx, int k) {
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaEventRecord(a, S);
    run(ctx);
    cudaEventRecord(b, S);
    if (cudaEventSynchronize(b) != cudaSuccess) die("timing", "event synchronize failed");
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return 1e-3 * ms / k;
}

/* Times run(ctx), which queues k ops, SAMPLES times after one warm-up, with events around each. */
static timing time_events(void (*run)(void *), void *ctx, int k) {
    double v[SAMPLES];
    for (int s = -1; s < SAMPLES; s++) {
        const double t = time_once(run, ctx, k);
        if (s >= 0) v[s] = t;
    }
    if (G->i->sync(G, &E) != SPECDEC_OK) die("sync", E.msg);
    qsort(v, SAMPLES, sizeof v[0], cmpd);
    return (timing){v[SAMPLES / 2], v[0], v[SAMPLES - 1]};
}

/* k ops issue(ctx, 0..k-1): eagerly, or as one recording replayed */
typedef struct batch {
    void (*issue)(void *, int);
    void *ctx;
    int k;
    uint64_t key;   /* 0: eager */
} batch;

static void run_batch(void *p) {
    batch *bt = p;
    if (bt->key && G->i->seq_begin(G, bt->key)) return;   /* replayed */
    for (int j = 0; j < bt->k; j++) bt->issue(bt->ctx, j);
    if (bt->key && G->i->seq_end(G, bt->key, &E) != SPECDEC_OK) die("seq_end", E.msg);
}

/* Records the k ops once (the warm-up) and times their replays. */
static timing time_seq(void (*issue)(void *, int), void *ctx, int k) {
    batch bt = {issue, ctx, k, next_key++};
    return time_events(run_batch, &bt, k);
}

/* ---- copy bandwidth ---- */

typedef struct copy_ctx { void *dst; const void *src; size_t n; } copy_ctx;
static void run_copy(void *p) {
    copy_ctx *c = p;
    if (G->i->copy(G, c->dst, c->src, c->n, &E) != SPECDEC_OK) die("copy", E.msg);
}

static void measure_bw(void) {
    copy_ctx c = {NULL, NULL, (size_t)1 << 30};
    c.dst = dalloc(c.n);
    c.src = dalloc(c.n);
    timing t = time_events(run_copy, &c, 1);
    bw = 2.0 * (double)c.n / t.med;
    printf("copy bandwidth (1 GiB device-to-device, read + write bytes / time, %d copies): median %.0f GB/s "
           "(min %.0f, max %.0f); floors below use the median\n\n", SAMPLES, 1e-9 * bw, 2e-9 * (double)c.n / t.mx,
           2e-9 * (double)c.n / t.mn);
    G->i->release(G, c.dst);
    G->i->release(G, (void *)c.src);
}

/* ---- weights ---- */

/* int8: the matmuls on int8 activations (precision int8) */
typedef struct fmt { const char *name; int bits, group, int8; } fmt;
static const fmt FMTS[] = {{"q4g64", 4, 64, 0}, {"q8g64", 8, 64, 0}, {"bf16", 0, 0, 0},
                           {"q4g64 int8", 4, 64, 1}, {"q8g64 int8", 8, 64, 1}};
enum { NFMTS = sizeof FMTS / sizeof FMTS[0] };

static sd_mat make_mat(int rows, int cols, const fmt *f) {
    sd_mat m;
    memset(&m, 0, sizeof m);
    m.rows = rows;
    m.cols = cols;
    m.dtype = SPECDEC_DTYPE_BF16;
    m.bits = f->bits;
    m.group = f->group;
    size_t wb = f->bits ? (size_t)rows * cols * f->bits / 8 : (size_t)rows * cols * 2;
    void *w = dalloc(wb);
    dfill(w, wb);
    m.w = w;
    if (f->bits) {
        size_t sb = (size_t)rows * (cols / f->group) * 2;
        void *s = dalloc(sb), *b = dalloc(sb);
        dfill(s, sb);
        dfill(b, sb);
        m.scales = s;
        m.biases = b;
    }
    return m;
}
static void free_mat(sd_mat *m) {
    G->i->release(G, (void *)m->w);
    G->i->release(G, (void *)m->scales);
    G->i->release(G, (void *)m->biases);
}

typedef struct mm_ctx {
    sd_mat *w;        /* ncopy copies */
    int ncopy;
    const float *x;
    float *y;
    int T, lma;
    int32_t *out;
} mm_ctx;

static void issue_mm(void *p, int j) {
    mm_ctx *c = p;
    const sd_mat *w = &c->w[j % c->ncopy];
    specdec_status st = c->lma ? G->i->lm_argmax(G, w, c->x, w->cols, c->T, NULL, c->out)
                               : G->i->matmul(G, w, c->x, w->cols, c->y, w->rows, c->T);
    if (st == SPECDEC_OK && c->lma == 2) st = G->i->argmax(G, c->y, w->rows, c->T, NULL, c->out);
    if (st != SPECDEC_OK) die("matmul", G->err.msg);
}

/* ---- matmul tables ---- */

typedef struct shape { const char *name; int H, I, nh, nkv, hd, layers; } shape;
static const shape SHAPES[] = {
    {"embedded (qwen3-kernel)", 384, 640, 6, 2, 128, 8},
    {"qwen3-1.7b", 2048, 6144, 16, 8, 128, 28},
    {"qwen3-8b", 4096, 12288, 32, 8, 128, 36},
    {"qwen3-32b", 5120, 25600, 64, 8, 128, 64},
};


/* The second arm of the matmul tables (--arm-b): the generic picks, without gemv_i4.cu's kernel
 * (SD_CUDA_MM_GENERIC, the default), or the streaming kernel where it applies (SD_CUDA_MM_STREAM). */
/* arm b: the default picks with the tensor-core kernels (sd_cuda_mma 3) for T >= 16 against
 * without them (ARM_MMA), or mma_tile.cu's kernel against mma_i4.cu's as arm a (ARM_MMA2) */
enum { ARM_MMA = -1, ARM_MMA2 = -2, ARM_MMA4 = -3, ARM_MMAW = -4 };   /* ARM_MMA4: mma_tile.cu with its weights staged against
                                                                     * without; ARM_MMAW: the same against mma_i4.cu */
static bool arm_mma(int a) { return a == ARM_MMA || a == ARM_MMA2 || a == ARM_MMA4 || a == ARM_MMAW; }
static int arm_b = SD_CUDA_MM_GENERIC;
static const char *arm_b_name(void) {
    return arm_b == SD_CUDA_MM_STREAM ? "streaming"
           : arm_b == ARM_MMA         ? "mma"
           : arm_b == ARM_MMA2        ? "mma_tile"
           : arm_b == ARM_MMA4        ? "mma_tile_w"
           : arm_b == ARM_MMAW        ? "mma_w"
                                      : "generic";
}

/* Both arms of one (matrix, T): the default pick (sd_cuda_matmul_kernels(SD_CUDA_MM_GEMV)) and
 * arm_b, each recorded once under its setting (the recording's first launch is the warm-up),
 * then SAMPLES replays of each, alternating A B A B ..., so load and clocks fall on both alike;
 * median, min and max per arm. */
static void time_arms(mm_ctx *c, int k, timing *dflt, timing *other) {
    batch a = {issue_mm, c, k, next_key++}, b = {issue_mm, c, k, next_key++};
    sd_cuda_matmul_kernels(SD_CUDA_MM_GEMV);
    /* arm a: the picks as set (without the mma kernel when it is arm b) */
    const int mq0 = sd_cuda_mma(arm_b == ARM_MMA2 || arm_b == ARM_MMAW ? 1 : arm_b == ARM_MMA4 ? 2 : 0);
    if (!arm_mma(arm_b)) sd_cuda_mma(mq0);
    run_batch(&a);
    if (arm_mma(arm_b)) sd_cuda_mma(arm_b == ARM_MMA2 ? 2 : arm_b == ARM_MMA4 || arm_b == ARM_MMAW ? 4 : 3);
    else sd_cuda_matmul_kernels(arm_b);
    run_batch(&b);
    sd_cuda_matmul_kernels(SD_CUDA_MM_GEMV);
    sd_cuda_mma(mq0);
    double va[SAMPLES], vb[SAMPLES];
    for (int s = 0; s < SAMPLES; s++) {
        va[s] = time_once(run_batch, &a, k);
        vb[s] = time_once(run_batch, &b, k);
    }
    if (G->i->sync(G, &E) != SPECDEC_OK) die("sync", E.msg);
    qsort(va, SAMPLES, sizeof va[0], cmpd);
    qsort(vb, SAMPLES, sizeof vb[0], cmpd);
    *dflt = (timing){va[SAMPLES / 2], va[0], va[SAMPLES - 1]};
    *other = (timing){vb[SAMPLES / 2], vb[0], vb[SAMPLES - 1]};
}

static void bench_matmul(const shape *sh, const fmt *f, const int *Ts, int nT) {
    const char *mname[6] = {"q", "k,v", "o", "gate,up", "down", "lm_head"};
    const int rows[6] = {sh->nh * sh->hd, sh->nkv * sh->hd, sh->H, sh->I, sh->H, VOCAB};
    const int cols[6] = {sh->H, sh->H, sh->nh * sh->hd, sh->H, sh->I, sh->H};
    const int per_layer[6] = {1, 2, 1, 2, 1, 0};
    double step_t = 0, step_old = 0, step_floor = 0;
    sd_cuda_set_int8(G, f->int8);
    const char *an = arm_b == ARM_MMA ? "without mma" : arm_b == ARM_MMA2 || arm_b == ARM_MMAW ? "mma_i4" : arm_b == ARM_MMA4 ? "mma_tile" : "default";
    printf("| %s %s | rows x cols | MB | T | %s us median (min-max) | %s us median (min-max) | GB/s | x floor | x T=1 | "
           "%s / %s |\n", sh->name, f->name, an, arm_b_name(), arm_b_name(), an);
    printf("|---|---|---|---|---|---|---|---|---|---|\n");
    float *x = drandom((size_t)64 * 25600, 1.0f), *y = dalloc((size_t)64 * VOCAB * sizeof(float));
    for (int m = 0; m < 6; m++) {
        sd_mat one = make_mat(rows[m], cols[m], f);
        const double bytes = (double)sd_mat_bytes(&one);
        int ncopy = (int)((double)ROTATE_BYTES / bytes) + 1;   /* tiny matrices: up to 4096 copies */
        if (ncopy > 4096) ncopy = 4096;
        sd_mat *w = malloc(sizeof(sd_mat) * (size_t)ncopy);
        w[0] = one;
        for (int c = 1; c < ncopy; c++) w[c] = make_mat(rows[m], cols[m], f);
        double t1 = 0;
        for (int k = 0; k < nT; k++) {
            mm_ctx c = {w, ncopy, x, y, Ts[k], 0, NULL};
            timing t, to = {0, 0, 0};   /* the default pick; arm_b */
            if (Ts[k] <= 8 || arm_mma(arm_b)) time_arms(&c, ncopy < 8 ? 8 : ncopy, &t, &to);
            else t = time_seq(issue_mm, &c, ncopy < 8 ? 8 : ncopy);   /* one kernel for both: the tiled one (T > 8) */
            if (Ts[k] == 1) t1 = t.med;
            const double floor = bytes / bw;
            char old[64] = "same kernel";
            if (to.med > 0) snprintf(old, sizeof old, "%.1f (%.1f-%.1f)", 1e6 * to.med, 1e6 * to.mn, 1e6 * to.mx);
            printf("| %s | %d x %d | %.1f | %d | %.1f (%.1f-%.1f) | %s | %.0f | %.2f | %s%.2f | %.2f |\n", mname[m], rows[m],
                   cols[m], bytes * 1e-6, Ts[k], 1e6 * t.med, 1e6 * t.mn, 1e6 * t.mx, old, 1e-9 * bytes / t.med,
                   t.med / floor, t1 > 0 ? "" : "-", t1 > 0 ? t.med / t1 : 0.0, to.med > 0 ? to.med / t.med : 1.0);
            if (Ts[k] == 1) {
                const int times = m == 5 ? 1 : per_layer[m] * sh->layers;
                step_t += times * t.med;
                step_old += times * to.med;
                step_floor += times * floor;
            }
        }
        for (int c = 0; c < ncopy; c++) free_mat(&w[c]);
        free(w);
    }
    printf("\n%s %s: matmuls of one decode step (T = 1, %d layers + LM head): default pick %.3f ms, %s %.3f ms, "
           "floor %.3f ms, x %.2f (%s x %.2f)\n\n", sh->name, f->name, sh->layers, 1e3 * step_t, arm_b_name(),
           1e3 * step_old, 1e3 * step_floor, step_t / step_floor, arm_b_name(), step_old / step_floor);
    sd_cuda_set_int8(G, 0);
    G->i->release(G, x);
    G->i->release(G, y);
}

/* ---- the fused LM head ---- */

static void bench_lm_argmax(void) {
    printf("| LM head %d x 4096 | T | matmul + argmax us | lm_argmax us | ratio | lm_argmax, %s us |\n"
           "|---|---|---|---|---|---|\n", VOCAB, arm_b_name());
    float *x = drandom((size_t)4 * 4096, 1.0f), *y = dalloc((size_t)4 * VOCAB * sizeof(float));
    int32_t *out = dalloc(64);
    const int fl[] = {0, 3, 2};   /* q4 f32, q4 int8, bf16 */
    for (int k = 0; k < 3; k++) {
        const int fi = fl[k];
        sd_cuda_set_int8(G, FMTS[fi].int8);
        sd_mat w = make_mat(VOCAB, 4096, &FMTS[fi]);
        for (int T = 1; T <= 4; T += 3) {
            mm_ctx a = {&w, 1, x, y, T, 2, out}, b = {&w, 1, x, y, T, 1, out};
            timing ta = time_seq(issue_mm, &a, 4), to, tb;
            time_arms(&b, 4, &tb, &to);   /* the default pick; arm_b */
            printf("| %s | %d | %.1f | %.1f | %.2f | %.1f |\n", FMTS[fi].name, T, 1e6 * ta.med, 1e6 * tb.med,
                   tb.med / ta.med, 1e6 * to.med);
        }
        free_mat(&w);
    }
    sd_cuda_set_int8(G, 0);
    printf("\n");
    G->i->release(G, x);
    G->i->release(G, y);
    G->i->release(G, out);
}

/* ---- attention ---- */

typedef struct at_ctx {
    sd_attn_shape s;
    sd_kv_layer kv;
    const float *q;
    float *o;
    int T;
    int32_t *pos;
} at_ctx;

static void issue_attn(void *p, int j) {
    at_ctx *c = p;
    (void)j;
    if (G->i->attention(G, &c->s, &c->kv, c->q, c->o, c->T, (sd_pos){c->pos, 0}) != SPECDEC_OK)
        die("attention", G->err.msg);
}

static void bench_attention(void) {
    const sd_attn_shape s = {32, 8, 128, SD_KV_BF16};
    const int nmax = 8192 + 64, row = s.n_kv_heads * s.head_dim;
    at_ctx c = {s, {dalloc((size_t)nmax * row * 2), dalloc((size_t)nmax * row * 2)}, NULL, NULL, 1, NULL};
    dfill(c.kv.k, (size_t)nmax * row * 2);
    dfill(c.kv.v, (size_t)nmax * row * 2);
    c.q = drandom((size_t)64 * 32 * 128, 1.0f);
    c.o = dalloc((size_t)64 * 32 * 128 * 4);
    c.pos = dalloc(4);
    printf("| attention 32/8 heads, hd 128, bf16 KV | keys | T | split kernel us median (min-max) | staged kernel us "
           "median (min-max) | KV MB | split x floor | staged x floor |\n|---|---|---|---|---|---|---|---|\n");
    const int keys[] = {128, 256, 512, 2048, 8192};
    for (size_t ki = 0; ki < sizeof keys / sizeof keys[0]; ki++)
        for (int T = 1; T <= 4; T += 3) {
            const int n = keys[ki];
            int32_t p0 = n - 1;   /* the first row sees n keys */
            dwrite(c.pos, &p0, 4);
            c.T = T;
            sd_cuda_attention_kernel(0);
            timing t = time_seq(issue_attn, &c, 8);
            sd_cuda_attention_kernel(1);   /* the default */
            timing ts = time_seq(issue_attn, &c, 8);
            double bytes = 2.0 * (double)(n + T - 1) * row * 2;
            printf("| | %d | %d | %.1f (%.1f-%.1f) | %.1f (%.1f-%.1f) | %.2f | %.2f | %.2f |\n", n, T, 1e6 * t.med, 1e6 * t.mn,
                   1e6 * t.mx, 1e6 * ts.med, 1e6 * ts.mn, 1e6 * ts.mx, 1e-6 * bytes, t.med / (bytes / bw),
                   ts.med / (bytes / bw));
        }
    printf("\n");
    G->i->release(G, c.kv.k);
    G->i->release(G, c.kv.v);

    /* a prefill chunk's attention: 64 rows at positions n - 64 .. n - 1 over an f32 cache (the
     * CUDA default), the staged kernel with a block serving 1 or 4 rows in turn, and its teams
     * form with 2 and 4 teams (rows at once) */
    c.s.kv_dtype = SD_KV_F32;
    c.kv = (sd_kv_layer){dalloc((size_t)nmax * row * 4), dalloc((size_t)nmax * row * 4)};
    dfill(c.kv.k, (size_t)nmax * row * 4);
    dfill(c.kv.v, (size_t)nmax * row * 4);
    c.T = 64;
    const int rv[4] = {1, 4, 0, 0}, tv[4] = {1, 1, 2, 4};
    printf("| attention 32/8 heads, hd 128, f32 KV, T = 64 | keys of the last row | rows a block 1: us median (min-max) | "
           "rows 4 | teams 2 | teams 4 | rows 4 / 1 | teams 2 / 1 | teams 4 / 1 |\n|---|---|---|---|---|---|---|---|---|\n");
    const int pkeys[] = {64, 128, 512, 1024, 2048, 4096, 8192};
    for (size_t ki = 0; ki < sizeof pkeys / sizeof pkeys[0]; ki++) {
        int32_t p0 = pkeys[ki] - 64;
        dwrite(c.pos, &p0, 4);
        timing tr[4];
        for (int i = 0; i < 4; i++) {
            const int was = sd_cuda_attention_rows(rv[i]), wt = sd_cuda_attention_teams(tv[i]);
            tr[i] = time_seq(issue_attn, &c, 8);
            sd_cuda_attention_rows(was);
            sd_cuda_attention_teams(wt);
        }
        printf("| | %d | %.1f (%.1f-%.1f) | %.1f (%.1f-%.1f) | %.1f (%.1f-%.1f) | %.1f (%.1f-%.1f) | %.2f | %.2f | %.2f |\n",
               pkeys[ki], 1e6 * tr[0].med, 1e6 * tr[0].mn, 1e6 * tr[0].mx, 1e6 * tr[1].med, 1e6 * tr[1].mn, 1e6 * tr[1].mx,
               1e6 * tr[2].med, 1e6 * tr[2].mn, 1e6 * tr[2].mx, 1e6 * tr[3].med, 1e6 * tr[3].mn, 1e6 * tr[3].mx,
               tr[1].med / tr[0].med, tr[2].med / tr[0].med, tr[3].med / tr[0].med);
    }
    printf("\n");
    G->i->release(G, c.kv.k);
    G->i->release(G, c.kv.v);
    G->i->release(G, (void *)c.q);
    G->i->release(G, c.o);
    G->i->release(G, c.pos);
}

/* ---- launch cost ---- */

typedef struct add_ctx { float *x; } add_ctx;
static void issue_add(void *p, int j) {
    (void)j;
    if (G->i->add(G, ((add_ctx *)p)->x, ((add_ctx *)p)->x + 1, 1) != SPECDEC_OK) die("add", G->err.msg);
}

static void bench_launch(void) {
    add_ctx c = {dalloc(64)};
    batch eager = {issue_add, &c, 100, 0};
    timing te = time_events(run_batch, &eager, 100), tg = time_seq(issue_add, &c, 100);
    printf("one tiny op (add of 1 float), 100 in a row: eager %.2f us per op, replayed recording %.2f us per op\n\n",
           1e6 * te.med, 1e6 * tg.med);
    G->i->release(G, c.x);
}

/* ---- batch invariance ---- */

static void check_invariance(void) {
    const int R = 4096, C = 4096;
    float *x = drandom((size_t)64 * C, 1.0f), *y = dalloc((size_t)64 * R * 4);
    float *one = malloc((size_t)64 * R * 4), *got = malloc((size_t)64 * R * 4);
    for (int fi = 0; fi < 3; fi++) {
        sd_mat w = make_mat(R, C, &FMTS[fi]);
        for (int t = 0; t < 64; t++) {
            if (G->i->matmul(G, &w, x + (size_t)t * C, C, y, R, 1) != SPECDEC_OK) die("matmul", G->err.msg);
            dread(one + (size_t)t * R, y, (size_t)R * 4);
        }
        int bad = 0;
        for (int T = 2; T <= 64; T++) {
            if (G->i->matmul(G, &w, x, C, y, R, T) != SPECDEC_OK) die("matmul", G->err.msg);
            dread(got, y, (size_t)T * R * 4);
            bad += memcmp(got, one, (size_t)T * R * 4) != 0;
        }
        printf("invariance matmul %d x %d %s, every row alone vs inside T = 2..64: %s (%d of 63 calls differ)\n", R, C,
               FMTS[fi].name, bad ? "FAIL" : "PASS", bad);
        free_mat(&w);
    }
    /* fused LM head vs argmax of the logits */
    sd_mat lm = make_mat(VOCAB, C, &FMTS[0]);
    float *logits = malloc((size_t)8 * VOCAB * 4), *dl = dalloc((size_t)8 * VOCAB * 4);
    int32_t *dout = dalloc(64), out[8];
    if (G->i->matmul(G, &lm, x, C, dl, VOCAB, 8) != SPECDEC_OK) die("matmul", G->err.msg);
    dread(logits, dl, (size_t)8 * VOCAB * 4);
    int bad = 0;
    for (int T = 1; T <= 8; T++) {
        if (G->i->lm_argmax(G, &lm, x, C, T, NULL, dout) != SPECDEC_OK) die("lm_argmax", G->err.msg);
        dread(out, dout, (size_t)T * 4);
        for (int t = 0; t < T; t++) {
            const float *r = logits + (size_t)t * VOCAB;
            int a = 0;
            for (int i = 1; i < VOCAB; i++)
                if (r[i] > r[a]) a = i;
            bad += out[t] != a;
        }
    }
    printf("invariance fused LM head %d x %d q4g64 vs argmax of the matmul logits, T = 1..8: %s (%d rows differ)\n", VOCAB, C,
           bad ? "FAIL" : "PASS", bad);
    free_mat(&lm);
    G->i->release(G, dl);
    G->i->release(G, dout);
    free(logits);
    /* attention rows alone vs T = 16 at 3000 keys */
    const sd_attn_shape s = {32, 8, 128, SD_KV_BF16};
    const int n = 3100, qn = 32 * 128;
    sd_kv_layer kv = {dalloc((size_t)n * 1024 * 2), dalloc((size_t)n * 1024 * 2)};
    dfill(kv.k, (size_t)n * 1024 * 2);
    dfill(kv.v, (size_t)n * 1024 * 2);
    int32_t p0 = 3000, *dp = dalloc(4);
    dwrite(dp, &p0, 4);
    for (int t = 0; t < 16; t++) {
        if (G->i->attention(G, &s, &kv, x + (size_t)t * qn, y, 1, (sd_pos){dp, t}) != SPECDEC_OK) die("attention", G->err.msg);
        dread(one + (size_t)t * qn, y, (size_t)qn * 4);
    }
    if (G->i->attention(G, &s, &kv, x, y, 16, (sd_pos){dp, 0}) != SPECDEC_OK) die("attention", G->err.msg);
    dread(got, y, (size_t)16 * qn * 4);
    bad = memcmp(got, one, (size_t)16 * qn * 4) != 0;
    printf("invariance attention 32/8 heads at 3000 keys, rows alone vs T = 16: %s\n\n", bad ? "FAIL" : "PASS");
    G->i->release(G, kv.k);
    G->i->release(G, kv.v);
    G->i->release(G, dp);
    G->i->release(G, x);
    G->i->release(G, y);
    free(one);
    free(got);
}

/* --profile: a few representative launches, each once after a warm-up, for a profiler (ncu -k ...)
 * to read the hardware counters of: the 8B shape's q, k, down and joined gate/up matrices and the LM head at 4-bit
 * (T = 1 and 4) at precision f32 and int8, the fused LM head, attention at 4096 keys. Prints nothing but what ran. */
static void profile_run(void) {
    enum { ND = 5 };
    static const int dims[ND][2] = {{4096, 4096}, {1024, 4096}, {4096, 12288}, {24576, 4096}, {VOCAB, 4096}};
    float *x = drandom((size_t)4 * 12288, 1.0f), *y = dalloc((size_t)4 * VOCAB * sizeof(float));
    int32_t *out = dalloc(64);
    for (int i = 0; i < 2 * ND; i++) {   /* 0..ND-1 precision f32, then int8 */
        const int d = i % ND;
        sd_cuda_set_int8(G, i >= ND);
        sd_mat w = make_mat(dims[d][0], dims[d][1], &FMTS[0]);
        for (int T = 1; T <= 4; T += 3)
            for (int rep = 0; rep < 2; rep++)
                if (G->i->matmul(G, &w, x, dims[d][1], y, dims[d][0], T) != SPECDEC_OK) die("matmul", G->err.msg);
        if (d == ND - 1)
            for (int rep = 0; rep < 2; rep++)
                if (G->i->lm_argmax(G, &w, x, 4096, 1, NULL, out) != SPECDEC_OK) die("lm_argmax", G->err.msg);
        printf("profile: matmul %d x %d q4g64%s T = 1, 4%s\n", dims[d][0], dims[d][1], i >= ND ? " int8" : "",
               d == ND - 1 ? ", lm_argmax T = 1" : "");
        free_mat(&w);
    }
    sd_cuda_set_int8(G, 0);
    const sd_attn_shape s = {32, 8, 128, SD_KV_BF16};
    sd_kv_layer kv = {dalloc((size_t)4200 * 1024 * 2), dalloc((size_t)4200 * 1024 * 2)};
    dfill(kv.k, (size_t)4200 * 1024 * 2);
    dfill(kv.v, (size_t)4200 * 1024 * 2);
    int32_t p0 = 4095, *dp = dalloc(4);
    dwrite(dp, &p0, 4);
    for (int rep = 0; rep < 2; rep++)
        if (G->i->attention(G, &s, &kv, x, y, 1, (sd_pos){dp, 0}) != SPECDEC_OK) die("attention", G->err.msg);
    printf("profile: attention 32/8 heads, 4096 keys, T = 1\n");
    if (G->i->sync(G, &E) != SPECDEC_OK) die("sync", E.msg);
}

int main(int argc, char **argv) {
    bool quick = false, profile = false, attn_only = false, wide = false;
    sd_backend_opts o;
    memset(&o, 0, sizeof o);
    int only[16][2], nonly = 0;   /* --matmul S:F: only these matmul tables */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--wide")) wide = true;
        else if (!strcmp(argv[i], "--profile")) profile = true;
        else if (!strcmp(argv[i], "--attn")) attn_only = true;
        else if (!strcmp(argv[i], "--device") && i + 1 < argc) o.device = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--arm-b") && i + 1 < argc &&
                 (!strcmp(argv[i + 1], "generic") || !strcmp(argv[i + 1], "stream") || !strcmp(argv[i + 1], "mma") ||
                  !strcmp(argv[i + 1], "mma_tile") || !strcmp(argv[i + 1], "mma_tile_w") || !strcmp(argv[i + 1], "mma_w"))) {
            i++;
            arm_b = !strcmp(argv[i], "stream")     ? SD_CUDA_MM_STREAM
                    : !strcmp(argv[i], "mma")      ? ARM_MMA
                    : !strcmp(argv[i], "mma_tile") ? ARM_MMA2
                    : !strcmp(argv[i], "mma_tile_w") ? ARM_MMA4
                    : !strcmp(argv[i], "mma_w") ? ARM_MMAW
                                                   : SD_CUDA_MM_GENERIC;
        }
        else if (!strcmp(argv[i], "--matmul") && i + 1 < argc && nonly < 16 &&
                 sscanf(argv[i + 1], "%d:%d", &only[nonly][0], &only[nonly][1]) == 2 && only[nonly][0] >= 0 &&
                 only[nonly][0] < 4 && only[nonly][1] >= 0 && only[nonly][1] < NFMTS) {
            nonly++;
            i++;
        } else die("usage", "bench_cuda [--quick | --profile | --attn | --matmul SHAPE:FORMAT ... [--wide]] [--arm-b generic|stream|mma|mma_tile|mma_tile_w|mma_w] [--device N]");
    }
    if (sd_backend_create("cuda", &o, &G, &E) != SPECDEC_OK) die("cuda backend", E.msg);
    S = sd_cuda_stream(G);
    FILE *la = fopen("/proc/loadavg", "r");
    char load[128] = "?";
    if (la) {
        if (!fgets(load, sizeof load, la)) strcpy(load, "?\n");
        fclose(la);
    }
    const char *gr = getenv("SPECDEC_CUDA_GI_ROWS");
    printf("# bench_cuda%s\n\ndevice: %s; load average: %s; gemv_i4 rows a warp from T = 4: %s\n", quick ? " --quick" : "",
           G->i->kernels(G), load, gr && (!strcmp(gr, "4") || !strcmp(gr, "2")) ? gr : "4 for LM heads, else 2");
    /* the fill pattern: valid bf16 values (scales, biases and dense weights stay finite) */
    uint16_t *h = malloc(PATTERN_BYTES);
    for (size_t i = 0; i < PATTERN_BYTES / 2; i++) h[i] = sd_f32_to_bf16(0.02f * rnorm());
    pattern = dalloc(PATTERN_BYTES);
    dwrite(pattern, h, PATTERN_BYTES);
    free(h);
    /* every op's scratch for up to 64 rows over the vocabulary and 8192-key contexts, before any
     * recording (a recording may not allocate) */
    const sd_attn_shape big = {64, 8, 128, SD_KV_F32};
    if (G->i->reserve(G, &big, 64, 8192, VOCAB, &E) != SPECDEC_OK) die("reserve", E.msg);
    if (profile) {
        profile_run();
        G->i->release(G, pattern);
        sd_backend_free(G);
        return 0;
    }
    measure_bw();
    check_invariance();
    bench_launch();
    const int Tall[] = {1, 2, 4, 8, 16, 32, 64}, Tq[] = {1, 2, 4, 8, 16};
    const int Tn[] = {1, 2, 3, 4, 5, 6, 8, 16, 32, 64};   /* --matmul: every verify width of K = 2..5, and beyond */
    if (attn_only) {
        bench_attention();
    } else if (nonly && wide) {   /* the named tables at T = 1, 16, 32, 64 only (the tensor-core kernels' widths) */
        const int Tw[] = {1, 16, 32, 64};
        for (int k = 0; k < nonly; k++) bench_matmul(&SHAPES[only[k][0]], &FMTS[only[k][1]], Tw, 4);
    } else if (nonly) {   /* the named tables at T = 1..6, 8, 16, 32, 64, the fused LM head's after them */
        for (int k = 0; k < nonly; k++) bench_matmul(&SHAPES[only[k][0]], &FMTS[only[k][1]], Tn, 10);
        bench_lm_argmax();
        bench_attention();
    } else if (quick) {   /* the short tables first, then the 8B shape before the embedded one */
        bench_attention();
        bench_lm_argmax();
        const int fq[] = {0, 3, 2};   /* q4 f32, q4 int8, bf16 */
        for (int k = 0; k < 2; k++)
            for (int fi = 0; fi < 3; fi++) bench_matmul(&SHAPES[k ? 0 : 2], &FMTS[fq[fi]], Tq, 5);
    } else {
        for (int si = 0; si < 4; si++)
            for (int fi = 0; fi < NFMTS; fi++) bench_matmul(&SHAPES[si], &FMTS[fi], Tall, 7);
        bench_lm_argmax();
        bench_attention();
    }
    G->i->release(G, pattern);
    sd_backend_free(G);
    return 0;
}
#endif
