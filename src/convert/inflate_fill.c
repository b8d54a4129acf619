/* inflate_fill.c: writes the tensors an inflation plan describes (inflate.h), block of rows by
 * block of rows, on a thread pool, through positioned writes into the output stream: the model
 * is never held in memory (each thread holds one block of a few MB).
 *
 * Every value is a pure function of (seed, tensor name, element index): RANDOM fill comes from a
 * counter-based hash (splitmix64's finalizer), so the bytes do not depend on the thread count or
 * on the block size. Dense RANDOM values are uniform in [-amp, amp] (the source tensor's RMS);
 * quantized RANDOM groups are random packed words with the scale and bias of a pseudo-randomly
 * chosen group of the source tensor (the source's magnitudes, never an inf or NaN). ZERO groups
 * are q = 0, scale 0, bias 0. Copied quantized groups move as stored (words, scale, bias): no
 * re-quantization, so the output computes exactly what the source's dequantized weights do. */
#include "convert/inflate.h"
#include "cpu/pool.h"
#include "quant/quant.h"
#include "util/dtype.h"
#include "util/err.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCK_BYTES (4u << 20)   /* output bytes per work item (per output tensor) */

static inline uint64_t rnd64(uint64_t key, uint64_t i) {
    uint64_t z = key + (i + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* uniform in [-1, 1) from the top 24 bits */
static inline float rnd_unit(uint64_t key, uint64_t i) {
    return ((float)(uint32_t)(rnd64(key, i) >> 40) - 8388608.0f) * (1.0f / 8388608.0f);
}

typedef struct item { int t, r0, r1; } item;

typedef struct fill_ctx {
    const sd_infl_plan *plan;
    sd_st_stream *s;
    item *items;
    int n_items;
    size_t max_cols, max_src_cols, max_block[3];
    _Atomic int next;
    _Atomic int stop;
    _Atomic uint64_t done;
    specdec_status *sts;     /* (nth) */
    specdec_err *errs;       /* (nth) */
    specdec_progress_fn progress;
    void *user;
    double t_last;
    bool cancelled;
} fill_ctx;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Output row r of a linear as f32 (cols values); srow is scratch for a source row. */
static void dense_row(const sd_infl_tensor *t, int r, float *out, float *srow) {
    const int C = t->cols->n, sr = t->rows->src[r];
    const uint64_t base = (uint64_t)r * (uint64_t)C;
    if (sr < 0) {
        if (t->row_fill == SD_FILL_ZERO) memset(out, 0, (size_t)C * sizeof *out);
        else for (int c = 0; c < C; c++) out[c] = t->amp * rnd_unit(t->key, base + (uint64_t)c);
        return;
    }
    sd_mat_row_f32(t->src, sr, srow);
    for (int c = 0; c < C; c++) {
        const int sc = t->cols->src[c];
        out[c] = sc >= 0 ? srow[sc] : t->col_fill == SD_FILL_ZERO ? 0.0f : t->amp * rnd_unit(t->key, base + (uint64_t)c);
    }
}

/* Output row r of a linear inflated in the quantized domain: packed words w, scales s, biases b. */
static void quant_row(const sd_infl_tensor *t, int r, uint32_t *w, char *s, char *b) {
    const sd_mat *m = t->src;
    const int G = t->group, B = t->bits, wpg = G * B / 32, ng = t->cols->n / G, sng = m->cols / G;
    const size_t es = sd_dtype_size(t->dt), swpr = (size_t)m->cols * (size_t)B / 32;
    const int sr = t->rows->src[r];
    const uint64_t donors = (uint64_t)m->rows * (uint64_t)sng;
    for (int gi = 0; gi < ng; gi++) {
        const int sc0 = sr < 0 ? -1 : t->cols->src[gi * G];
        const sd_fill f = sr < 0 ? t->row_fill : t->col_fill;
        uint32_t *wg = w + (size_t)gi * (size_t)wpg;
        if (sc0 >= 0) {
            memcpy(wg, (const char *)m->w + ((size_t)sr * swpr + (size_t)sc0 * (size_t)B / 32) * 4, (size_t)wpg * 4);
            memcpy(s + (size_t)gi * es, (const char *)m->scales + ((size_t)sr * (size_t)sng + (size_t)(sc0 / G)) * es, es);
            memcpy(b + (size_t)gi * es, (const char *)m->biases + ((size_t)sr * (size_t)sng + (size_t)(sc0 / G)) * es, es);
        } else if (f == SD_FILL_ZERO || donors == 0) {
            memset(wg, 0, (size_t)wpg * 4);
            memset(s + (size_t)gi * es, 0, es);
            memset(b + (size_t)gi * es, 0, es);
        } else {
            const uint64_t gidx = (uint64_t)r * (uint64_t)ng + (uint64_t)gi;
            for (int k = 0; k < wpg; k++) wg[k] = (uint32_t)rnd64(t->key, gidx * (uint64_t)wpg + (uint64_t)k);
            const uint64_t dg = rnd64(t->key ^ 0x5ca1ab1eull, gidx) % donors;
            memcpy(s + (size_t)gi * es, (const char *)m->scales + dg * es, es);
            memcpy(b + (size_t)gi * es, (const char *)m->biases + dg * es, es);
        }
    }
}

/* Rows it0.r0..r1 of tensor `it` into the buffers, then to the stream. */
static specdec_status do_item(fill_ctx *fc, const item *it, float *row, float *srow, char **buf, specdec_err *err) {
    const sd_infl_tensor *t = &fc->plan->t[it->t];
    const size_t es = sd_dtype_size(t->dt);
    size_t rb[3] = {0, 0, 0};   /* bytes per row of each output */
    if (t->vector) {
        const int n = t->rows->n;
        for (int i = 0; i < n; i++) {
            const int si = t->rows->src[i];
            const double v = si >= 0 ? t->vsrc[si] : t->row_fill == SD_FILL_ZERO ? 0.0 : t->vsrc[i % t->vn];
            row[i] = (float)(v * t->vscale);
        }
        sd_from_f32(t->dt, row, buf[0], (size_t)n);
        rb[0] = (size_t)n * es;
    } else {
        const size_t C = (size_t)t->cols->n;
        const size_t ng = t->bits ? C / (size_t)t->group : 0, wpr = t->bits ? C * (size_t)t->bits / 32 : 0;
        rb[0] = t->bits ? wpr * 4 : C * es;
        rb[1] = rb[2] = ng * es;
        char what[200];
        snprintf(what, sizeof what, "inflate: tensor '%s'", t->name);
        for (int r = it->r0; r < it->r1; r++) {
            const size_t k = (size_t)(r - it->r0);
            if (t->bits && !t->requant) {
                quant_row(t, r, (uint32_t *)(buf[0] + k * rb[0]), buf[1] + k * rb[1], buf[2] + k * rb[2]);
                continue;
            }
            dense_row(t, r, row, srow);
            if (!t->bits) { sd_from_f32(t->dt, row, buf[0] + k * rb[0], C); continue; }
            SD_TRY(sd_quant_row(row, C, t->bits, t->group, t->dt, (uint32_t *)(buf[0] + k * rb[0]), buf[1] + k * rb[1],
                                buf[2] + k * rb[2], NULL, what, (size_t)r, err));
        }
    }
    const size_t nr = t->vector ? 1 : (size_t)(it->r1 - it->r0);
    for (int o = 0; o < (t->bits ? 3 : 1); o++) {
        SD_TRY(sd_st_stream_pwrite(fc->s, t->out[o], (uint64_t)it->r0 * rb[o], buf[o], nr * rb[o], err));
        atomic_fetch_add(&fc->done, (uint64_t)(nr * rb[o]));
    }
    return SPECDEC_OK;
}

static void worker(void *arg, int ith, int nth) {
    (void)nth;
    fill_ctx *fc = arg;
    float *row = malloc((fc->max_cols + 1) * sizeof *row), *srow = malloc((fc->max_src_cols + 1) * sizeof *srow);
    char *buf[3];
    for (int o = 0; o < 3; o++) buf[o] = malloc(fc->max_block[o] + 1);
    specdec_status st = (!row || !srow || !buf[0] || !buf[1] || !buf[2])
                            ? sd_fail(&fc->errs[ith], SPECDEC_ERR_NOMEM, "inflate: out of memory for a block of rows")
                            : SPECDEC_OK;
    while (st == SPECDEC_OK && !atomic_load(&fc->stop)) {
        const int i = atomic_fetch_add(&fc->next, 1);
        if (i >= fc->n_items) break;
        st = do_item(fc, &fc->items[i], row, srow, buf, &fc->errs[ith]);
        if (ith == 0 && fc->progress && now_s() - fc->t_last >= 0.25) {
            fc->t_last = now_s();
            if (!fc->progress(atomic_load(&fc->done), fc->plan->total_bytes, fc->user)) {
                fc->cancelled = true;
                atomic_store(&fc->stop, 1);
            }
        }
    }
    if (st != SPECDEC_OK) atomic_store(&fc->stop, 1);
    fc->sts[ith] = st;
    free(row);
    free(srow);
    for (int o = 0; o < 3; o++) free(buf[o]);
}

/* Split every tensor into blocks of rows of about BLOCK_BYTES per output; size the buffers. */
static specdec_status make_items(fill_ctx *fc, specdec_err *err) {
    const sd_infl_plan *p = fc->plan;
    int cap = 0;
    for (int pass = 0; pass < 2; pass++) {
        int n = 0;
        for (int ti = 0; ti < p->n; ti++) {
            const sd_infl_tensor *t = &p->t[ti];
            const size_t es = sd_dtype_size(t->dt);
            if (t->vector) {
                if (pass) {
                    fc->items[n] = (item){ti, 0, 1};
                    if ((size_t)t->rows->n > fc->max_cols) fc->max_cols = (size_t)t->rows->n;
                    if ((size_t)t->rows->n * es > fc->max_block[0]) fc->max_block[0] = (size_t)t->rows->n * es;
                }
                n++;
                continue;
            }
            const size_t C = (size_t)t->cols->n;
            const size_t rb0 = t->bits ? C * (size_t)t->bits / 8 : C * es, rb1 = t->bits ? C / (size_t)t->group * es : 0;
            const int rows = t->rows->n, per = rb0 >= BLOCK_BYTES ? 1 : (int)(BLOCK_BYTES / rb0);
            for (int r0 = 0; r0 < rows; r0 += per) {
                const int r1 = r0 + per < rows ? r0 + per : rows;
                if (pass) {
                    fc->items[n] = (item){ti, r0, r1};
                    const size_t nr = (size_t)(r1 - r0);
                    if (nr * rb0 > fc->max_block[0]) fc->max_block[0] = nr * rb0;
                    if (nr * rb1 > fc->max_block[1]) fc->max_block[1] = fc->max_block[2] = nr * rb1;
                }
                n++;
            }
            if (pass && C > fc->max_cols) fc->max_cols = C;
            if (pass && (size_t)t->src->cols > fc->max_src_cols) fc->max_src_cols = (size_t)t->src->cols;
        }
        if (!pass) {
            cap = n;
            fc->items = malloc((size_t)(cap ? cap : 1) * sizeof *fc->items);
            if (!fc->items) return sd_fail(err, SPECDEC_ERR_NOMEM, "inflate: out of memory");
        }
        fc->n_items = n;
    }
    return SPECDEC_OK;
}

specdec_status sd_inflate_fill(const sd_infl_plan *plan, sd_st_stream *s, int n_threads, specdec_progress_fn progress,
                               void *user, specdec_err *err) {
    fill_ctx fc;
    memset(&fc, 0, sizeof fc);
    fc.plan = plan;
    fc.s = s;
    fc.progress = progress;
    fc.user = user;
    fc.t_last = now_s();
    atomic_init(&fc.next, 0);
    atomic_init(&fc.stop, 0);
    atomic_init(&fc.done, 0);
    SD_TRY(make_items(&fc, err));
    sd_pool *pool = sd_pool_create(n_threads);
    const int nth = pool ? sd_pool_size(pool) : 1;
    fc.sts = calloc((size_t)nth, sizeof *fc.sts);
    fc.errs = calloc((size_t)nth, sizeof *fc.errs);
    specdec_status st = SPECDEC_OK;
    if (!pool || !fc.sts || !fc.errs) st = sd_fail(err, SPECDEC_ERR_NOMEM, "inflate: cannot start %d threads", n_threads);
    if (st == SPECDEC_OK && progress && !progress(0, plan->total_bytes, user)) fc.cancelled = true;
    if (st == SPECDEC_OK && !fc.cancelled) sd_pool_run(pool, worker, &fc);
    for (int i = 0; st == SPECDEC_OK && i < nth; i++)
        if (fc.sts[i] != SPECDEC_OK) {
            st = fc.sts[i];
            if (err) *err = fc.errs[i];
        }
    if (st == SPECDEC_OK && fc.cancelled) st = sd_fail(err, SPECDEC_ERR_CANCELLED, "inflate: cancelled by the progress callback");
    if (st == SPECDEC_OK && progress) progress(atomic_load(&fc.done), plan->total_bytes, user);
    sd_pool_free(pool);
    free(fc.sts);
    free(fc.errs);
    free(fc.items);
    return st;
}
