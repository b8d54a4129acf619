/* ops_i8.c: the integer-activation matmul (recipe and layout in ops_i8.h): the block
 * quantizer, the token preparation, the packing of a matrix into tiles, the canonical recipe in
 * plain C over the tiles (the portable level's kernel), the scalar reference straight from the
 * definition over the matrix's own layout, and the dispatcher that prepares the tokens once per
 * call and splits the tiles over the pool. */
#include "cpu/ops_i8.h"
#include "util/dtype.h"
#include "sample/sample.h"
#include "cpu/split.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

int sd_i8_avx2_novnni = 0;

int sd_i8_supported(const sd_mat *W) {
    if (W->bits != 4 && W->bits != 8) return 0;
    if (W->group < 64 || W->group % 64 != 0) return 0;
    /* cols a multiple of 128 (4-bit) / 64 (8-bit): sd_i8_applies's rule, shared with the CUDA
     * backend; the packed recipe itself needs only whole groups */
    const int step = W->bits == 4 ? 128 : 64;
    return W->cols > 0 && W->cols % step == 0 && W->cols % W->group == 0 && W->cols <= SD_I8_MAXCOLS;
}

float sd_i8_quant_block(const float *x, int n, int8_t *q) {
    float amax = 0.0f;
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a > amax) amax = a;
    }
    /* an infinite or NaN entry (amax never NaN: NaN > amax is false) gives a zero block rather than
     * garbage integers; the f32 path would have produced non-finite logits anyway */
    int finite = isfinite(amax);
    for (int i = 0; i < n; i++) finite &= isfinite(x[i]);
    if (amax == 0.0f || !finite) {
        memset(q, 0, (size_t)n);
        return 0.0f;
    }
    const float id = 127.0f / amax;
    for (int i = 0; i < n; i++) {
        float v = nearbyintf(x[i] * id);   /* |v| <= 127 up to rounding of id: clamp anyway */
        q[i] = (int8_t)(v > 127.0f ? 127 : v < -127.0f ? -127 : (int)v);
    }
    return amax / 127.0f;
}

/* sd_i8_quant_block's results with loops a compiler vectorizes (the preparation runs once per
 * token and matrix: 56 times a decode step on the embedded model, at 3.3 ns a column with the
 * definition's per-element nearbyintf call and branches). For finite values |x| orders as the
 * integer (bits & 0x7fffffff), and an exponent field of all ones marks inf / NaN, so the range and
 * the finiteness are integer maxima and ors. Rounding: with |v| < 2^22, (v + 1.5 * 2^23) - 1.5 * 2^23
 * is v rounded to nearest even in float arithmetic, which is nearbyintf's result in the default
 * rounding mode (the library's; ISO C builds do not contract the product into the add). The clamp
 * is the definition's, on the float. */
float sd_i8_quant_block_fast(const float *x, int n, int8_t *q) {
    uint32_t mx = 0, bad = 0;
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        u &= 0x7fffffffu;
        mx = u > mx ? u : mx;
        bad |= u >= 0x7f800000u;
    }
    if (mx == 0 || bad) {
        memset(q, 0, (size_t)n);
        return 0.0f;
    }
    float amax;
    memcpy(&amax, &mx, 4);
    const float id = 127.0f / amax, magic = 12582912.0f;   /* 1.5 * 2^23 */
    for (int i = 0; i < n; i++) {
        float v = x[i] * id;
        float r = (v + magic) - magic;
        q[i] = (int8_t)(r > 127.0f ? 127 : r < -127.0f ? -127 : (int)r);
    }
    return amax / 127.0f;
}

void sd_i8_prep(const float *x, int cols, int group, int8_t *xq, float *d, float *xg) {
    const int nkb = cols / SD_I8_BLOCK, bpg = group / SD_I8_BLOCK;
    for (int b = 0; b < nkb; b++) d[b] = sd_i8_quant_block_fast(x + b * SD_I8_BLOCK, SD_I8_BLOCK, xq + b * SD_I8_BLOCK);
    for (int g = 0; g < cols / group; g++) {
        float s = 0.0f;
        for (int b = g * bpg; b < (g + 1) * bpg; b++) {
            int X = 0;
            for (int i = 0; i < SD_I8_BLOCK; i++) X += xq[b * SD_I8_BLOCK + i];
            const float dx = d[b] * (float)X;   /* rounded, then added: no contraction in ISO C */
            s = s + dx;
        }
        xg[g] = s;
    }
}

/* ---------------------------------------------------------------- packing */
static inline uint32_t wq_at(const sd_mat *W, int r, int j) {
    const int per = 32 / W->bits;
    const uint32_t *wr = (const uint32_t *)W->w + (size_t)r * (W->cols / per);
    return (wr[j / per] >> (W->bits * (j % per))) & ((1u << W->bits) - 1u);
}

static size_t elem_size(specdec_dtype dt) { return dt == SPECDEC_DTYPE_F32 ? 4 : 2; }

/* Rows [r0, r1) (whole tiles) of W into o: their tiles zeroed (the padding rows stay zero), then
 * each row's codes unpacked once (wq_at per code took seconds on a 1.7B model) and dealt into the
 * quads, and its scales and biases into the tile's columns. */
static void pack_rows(const sd_mat *W, const sd_i8_packed *o, int r0, int r1) {
    const size_t es = elem_size(W->dtype);
    const int nq = SD_I8_QUADS(W->bits), per = 32 / W->bits;
    const uint32_t mask = (1u << W->bits) - 1u;
    memset(o->buf + (size_t)(r0 / SD_I8_TILE) * o->tile_bytes, 0,
           (size_t)((r1 + SD_I8_TILE - 1) / SD_I8_TILE - r0 / SD_I8_TILE) * o->tile_bytes);
    uint8_t q[SD_I8_MAXCOLS];
    for (int r = r0; r < r1; r++) {
        const uint32_t *wr = (const uint32_t *)W->w + (size_t)r * (W->cols / per);
        for (int j = 0; j < W->cols / per; j++)
            for (int k = 0; k < per; k++) q[j * per + k] = (uint8_t)((wr[j] >> (W->bits * k)) & mask);
        unsigned char *t = o->buf + (size_t)(r / SD_I8_TILE) * o->tile_bytes;
        const int rl = r % SD_I8_TILE;
        for (int b = 0; b < o->nkb; b++) {
            const uint8_t *c = q + b * SD_I8_BLOCK;
            for (int u = 0; u < nq; u++) {
                unsigned char *dst = (unsigned char *)sd_i8_block(o, t, b) + (size_t)u * 64 + 4 * rl;
                for (int i = 0; i < 4; i++)
                    dst[i] = W->bits == 4 ? (unsigned char)(c[8 * u + i] | c[8 * u + 4 + i] << 4) : c[4 * u + i];
            }
        }
        for (int g = 0; g < o->ng; g++) {
            const size_t e = (size_t)r * o->ng + g;
            memcpy((unsigned char *)sd_i8_scales(o, t, g) + (size_t)rl * es, (const char *)W->scales + e * es, es);
            memcpy((unsigned char *)sd_i8_biases(o, t, g) + (size_t)rl * es, (const char *)W->biases + e * es, es);
        }
    }
}

typedef struct pack_job { const sd_mat *W; const sd_i8_packed *o; } pack_job;

static void pack_task(void *arg, int ith, int nth) {
    const pack_job *j = (const pack_job *)arg;
    int r0, r1;
    sd_pool_rows(j->W->rows, ith, nth, SD_I8_TILE, &r0, &r1);
    if (r1 > r0) pack_rows(j->W, j->o, r0, r1);
}

int sd_i8_pack_on(const sd_mat *W, sd_i8_packed *o, sd_pool *p) {
    memset(o, 0, sizeof *o);
    o->rows = W->rows; o->cols = W->cols; o->bits = W->bits; o->group = W->group; o->dtype = W->dtype;
    o->tiles = (W->rows + SD_I8_TILE - 1) / SD_I8_TILE;
    o->nkb = W->cols / SD_I8_BLOCK;
    o->ng = W->cols / W->group;
    const size_t sg = (size_t)SD_I8_TILE * elem_size(W->dtype);   /* 16 scales (biases): 32 or 64 bytes */
    const size_t cg = (size_t)(W->group / SD_I8_BLOCK) * SD_I8_QUADS(W->bits) * 64;   /* a group's codes */
    const size_t runs = ((size_t)o->ng * (cg + 2 * sg) + 63) / 64 * 64;   /* a tile in runs */
    o->grouped = runs >= SD_I8_GROUPED_MIN;
    if (o->grouped) {   /* 2 sg is 64 or 128: every group starts on a line */
        o->s_off = 0; o->b_off = sg; o->c_off = 2 * sg;
        o->g_sb = o->g_c = 2 * sg + cg;
        o->tile_bytes = (size_t)o->ng * o->g_c;
    } else {
        o->c_off = 0; o->g_c = cg;
        o->s_off = (size_t)o->ng * cg; o->b_off = o->s_off + (size_t)o->ng * sg; o->g_sb = sg;
        o->tile_bytes = runs;
    }
    const size_t total = (size_t)o->tiles * o->tile_bytes;
    o->buf = aligned_alloc(64, total ? total : 64);
    if (!o->buf) return -1;
    pack_job j = {W, o};
    if (!p || sd_pool_size(p) == 1 || total < ((size_t)1 << 20)) pack_task(&j, 0, 1);
    else sd_pool_run(p, pack_task, &j);
    return 0;
}

int sd_i8_pack(const sd_mat *W, sd_i8_packed *o) { return sd_i8_pack_on(W, o, NULL); }

void sd_i8_pack_free(sd_i8_packed *p) {
    if (!p) return;
    free(p->buf);
    p->buf = NULL;
}

/* ---------------------------------------------------------------- the recipe in plain C */
/* I_b of one row (lane rl of a tile) against one token's codes, from the packed quads. */
static int32_t packed_block_dot(const sd_i8_packed *P, const unsigned char *tile, int rl, int b, const int8_t *xq) {
    const int nq = SD_I8_QUADS(P->bits);
    int32_t s = 0;
    for (int u = 0; u < nq; u++) {
        const unsigned char *w = sd_i8_block(P, tile, b) + (size_t)u * 64 + 4 * rl;
        for (int i = 0; i < 4; i++) {
            if (P->bits == 4) {
                s += (int32_t)(w[i] & 15) * xq[b * SD_I8_BLOCK + 8 * u + i];
                s += (int32_t)(w[i] >> 4) * xq[b * SD_I8_BLOCK + 8 * u + 4 + i];
            } else {
                s += (int32_t)w[i] * xq[b * SD_I8_BLOCK + 4 * u + i];
            }
        }
    }
    return s;
}

void sd_i8_rows_c(const sd_i8_args *a, int r0, int r1) {
    const sd_i8_packed *P = a->P;
    const int bpg = P->group / SD_I8_BLOCK;
    for (int r = r0; r < r1; r++) {
        const unsigned char *tile = sd_i8_tile(P, r / SD_I8_TILE);
        const int rl = r % SD_I8_TILE;
        for (int t = 0; t < a->T; t++) {
            const int8_t *xq;
            const float *d, *xg;
            sd_i8_tokens(a, t, 1, &xq, &d, &xg);
            float accS = 0.0f, accB = 0.0f;
            for (int b = 0; b < P->nkb; b++) {
                const float S = sd_ref_elem_f32(P->dtype, sd_i8_scales(P, tile, b / bpg), (size_t)rl);
                accS = fmaf(S, (float)packed_block_dot(P, tile, rl, b, xq) * d[b], accS);
            }
            for (int g = 0; g < P->ng; g++) {
                const float B = sd_ref_elem_f32(P->dtype, sd_i8_biases(P, tile, g), (size_t)rl);
                accB = fmaf(B, xg[g], accB);
            }
            a->y[(size_t)t * a->ldy + r] = accS + accB;
        }
    }
}

/* ---------------------------------------------------------------- the scalar reference */
void sd_i8_matmul_ref(const sd_mat *W, const float *x, int ldx, float *y, int ldy, int T) {
    const int cols = W->cols, nkb = cols / SD_I8_BLOCK, ng = cols / W->group, bpg = W->group / SD_I8_BLOCK;
    int8_t q[SD_I8_MAXCOLS];
    float d[SD_I8_MAXCOLS / SD_I8_BLOCK], xg[SD_I8_MAXCOLS / 64];
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * ldx;
        for (int b = 0; b < nkb; b++) d[b] = sd_i8_quant_block(xt + b * SD_I8_BLOCK, SD_I8_BLOCK, q + b * SD_I8_BLOCK);
        for (int g = 0; g < ng; g++) {
            float s = 0.0f;
            for (int b = g * bpg; b < (g + 1) * bpg; b++) {
                int X = 0;
                for (int i = 0; i < SD_I8_BLOCK; i++) X += q[b * SD_I8_BLOCK + i];
                const float dx = d[b] * (float)X;
                s = s + dx;
            }
            xg[g] = s;
        }
        for (int r = 0; r < W->rows; r++) {
            const size_t gr = (size_t)r * ng;
            float accS = 0.0f, accB = 0.0f;
            for (int b = 0; b < nkb; b++) {
                int32_t I = 0;
                for (int i = 0; i < SD_I8_BLOCK; i++) I += (int32_t)wq_at(W, r, b * SD_I8_BLOCK + i) * q[b * SD_I8_BLOCK + i];
                accS = fmaf(sd_ref_elem_f32(W->dtype, W->scales, gr + (size_t)(b / bpg)), (float)I * d[b], accS);
            }
            for (int g = 0; g < ng; g++) accB = fmaf(sd_ref_elem_f32(W->dtype, W->biases, gr + (size_t)g), xg[g], accB);
            y[(size_t)t * ldy + r] = accS + accB;
        }
    }
}

/* ---------------------------------------------------------------- dispatch */
typedef struct i8_job {
    sd_i8_rows_fn rows;
    sd_i8_args a;
    float *bv; int32_t *bi;       /* argmax per thread and token (NULL: a plain matmul) */
    sd_split split;               /* the tiles, shared out while the call runs */
} i8_job;

/* The largest value of y[r0 .. r1) and its lowest index, NaN skipped (index -1: none), by
 * sd_argmax (vectorized; a plain compare loop took 1 ns a logit), which gives 0 when all are NaN. */
static void slice_max(const float *y, int r0, int r1, float *bv, int32_t *bi) {
    const int32_t a = sd_argmax(y + r0, r1 - r0);
    const float v = y[r0 + a];
    *bv = v;
    *bi = v == v ? r0 + a : -1;
}

/* This thread's best so far (*bv, *bi) updated with slice [r0, r1)'s: the larger value wins, a tie
 * the lower index (the runs of a dynamic split come in no fixed order), NaN never. */
static void slice_max_into(const float *y, int r0, int r1, float *bv, int32_t *bi) {
    float v;
    int32_t k;
    slice_max(y, r0, r1, &v, &k);
    if (k >= 0 && (*bi < 0 || v > *bv || (v == *bv && k < *bi))) { *bv = v; *bi = k; }
}

static void i8_task(void *arg, int ith, int nth) {
    i8_job *j = (i8_job *)arg;
    (void)nth;
    const int rows = j->a.P->rows;
    int u0, u1;   /* runs of whole tiles; each row is computed whole by one thread */
    for (sd_split_it it = sd_split_begin(&j->split, ith); sd_split_next(&it, &u0, &u1);) {
        const int r0 = u0 * SD_I8_TILE, r1 = u1 * SD_I8_TILE < rows ? u1 * SD_I8_TILE : rows;
        j->rows(&j->a, r0, r1);
        if (j->bi)   /* this run's rows while they are in this thread's cache */
            for (int t = 0; t < j->a.T; t++)
                slice_max_into(j->a.y + (size_t)t * j->a.ldy, r0, r1, &j->bv[(size_t)ith * j->a.T + t],
                               &j->bi[(size_t)ith * j->a.T + t]);
    }
}

/* Claims of this many tiles at least: a pair of tiles for one token (the kernels' grain), one
 * tile otherwise. */
static int split_grain(int T) { return T == 1 ? 2 : 1; }

/* Below this many multiply-adds a call runs on the caller alone (as the f32 path). */
#define I8_INLINE_MACS 65536.0

/* The tokens' preparation into the ops scratch; NULL when out of memory. */
static int8_t *prep_tokens(sd_i8_prep_fn prep, const sd_mat *W, const float *x, int ldx, int T, float **d, float **xg) {
    const int cols = W->cols, nkb = cols / SD_I8_BLOCK, ng = cols / W->group;
    /* one scratch: per token nkb floats of d and ng of xg, then cols bytes of codes */
    float *buf = sd_ops_scratch((size_t)T * (nkb + ng) + (size_t)T * cols / 4);
    if (!buf) return NULL;
    *d = buf;
    *xg = buf + (size_t)T * nkb;
    int8_t *xq = (int8_t *)(buf + (size_t)T * (nkb + ng));
    if (!prep) prep = sd_i8_prep;
    for (int t = 0; t < T; t++)
        prep(x + (size_t)t * ldx, cols, W->group, xq + (size_t)t * cols, *d + (size_t)t * nkb, *xg + (size_t)t * ng);
    return xq;
}

/* Whether a call of this many multiply-adds runs on the caller alone. */
static int run_inline(const sd_pool *p, double macs) { return !p || sd_pool_size(p) == 1 || macs < I8_INLINE_MACS; }

/* One matrix's call as the kernels see it, over the tokens prep_tokens made. */
static sd_i8_args call_args(const sd_i8_packed *P, const int8_t *xq, const float *d, const float *xg, float *y, int ldy,
                            int T) {
    return (sd_i8_args){.P = P, .xq = xq, .ldq = P->cols, .d = d, .ldd = P->nkb, .xg = xg, .ldg = P->ng, .y = y,
                        .ldy = ldy, .T = T};
}

static void run_job(i8_job *j, const sd_mat *W, sd_pool *p) {
    const int in = run_inline(p, (double)W->rows * W->cols * j->a.T);
    sd_split_init(&j->split, j->a.P->tiles, split_grain(j->a.T), in ? 1 : sd_pool_size(p));
    if (in) i8_task(j, 0, 1);
    else sd_pool_run(p, i8_task, j);
}

void sd_i8_matmul(sd_i8_rows_fn rows, sd_i8_prep_fn prep, const sd_mat *W, const float *x, int ldx, float *y, int ldy,
                  int T, sd_pool *p) {
    if (T <= 0 || W->rows <= 0) return;
    sd_i8_packed own;
    const sd_i8_packed *P = (const sd_i8_packed *)W->pk;
    if (!P) {   /* not packed at upload (tests, tools): pack for this call */
        if (sd_i8_pack(W, &own) != 0) {
            sd_i8_matmul_ref(W, x, ldx, y, ldy, T);   /* out of memory: the reference needs only its stack */
            return;
        }
        P = &own;
    }
    float *d, *xg;
    int8_t *xq = prep_tokens(prep, W, x, ldx, T, &d, &xg);
    if (!xq) {
        if (P == &own) sd_i8_pack_free(&own);
        sd_i8_matmul_ref(W, x, ldx, y, ldy, T);
        return;
    }
    i8_job j = {.rows = rows ? rows : sd_i8_rows_c, .a = call_args(P, xq, d, xg, y, ldy, T)};
    run_job(&j, W, p);
    if (P == &own) sd_i8_pack_free(&own);
}

int sd_i8_matmul_argmax(sd_i8_rows_fn rows, sd_i8_prep_fn prep, const sd_mat *W, const float *x, int ldx, int T,
                        sd_pool *p, float *scratch, int32_t *out) {
    if (T <= 0 || W->rows <= 0 || !W->pk || !sd_i8_supported(W)) return -1;
    float *d, *xg;
    int8_t *xq = prep_tokens(prep, W, x, ldx, T, &d, &xg);
    if (!xq) return -1;
    const int nth = p ? sd_pool_size(p) : 1;
    float *y = scratch, *bv = scratch + (size_t)T * W->rows;
    int32_t *bi = (int32_t *)(bv + (size_t)nth * T);
    for (size_t i = 0; i < (size_t)nth * T; i++) bi[i] = -1;   /* threads that get no rows report none */
    i8_job j = {.rows = rows ? rows : sd_i8_rows_c, .a = call_args((const sd_i8_packed *)W->pk, xq, d, xg, y, W->rows, T),
                .bv = bv, .bi = bi};
    run_job(&j, W, p);
    /* the larger value wins, a tie the lower index, as sd_argmax's contract says (a thread's rows
     * are runs in no fixed order); all NaN gives 0 as there */
    for (int t = 0; t < T; t++) {
        int32_t at = -1;
        float best = -INFINITY;
        for (int i = 0; i < nth; i++) {
            const int32_t k = bi[(size_t)i * T + t];
            const float v = bv[(size_t)i * T + t];
            if (k >= 0 && (at < 0 || v > best || (v == best && k < at))) { best = v; at = k; }
        }
        out[t] = at < 0 ? 0 : at;
    }
    return 0;
}

size_t sd_i8_argmax_scratch(int rows, int T, int threads) {
    return (size_t)T * (size_t)rows + 2 * (size_t)(threads > 0 ? threads : 1) * (size_t)T;
}

/* ---------------------------------------------------------------- several matrices, one x */
typedef struct i8n_job {
    sd_i8_rows_fn rows;
    int n, tiles;                 /* matrices, their tiles in all */
    sd_i8_args a[SD_I8_N_MAX];
    int t0[SD_I8_N_MAX + 1];      /* matrix m's tiles are [t0[m], t0[m + 1]) of the joint list */
    sd_split split;
} i8n_job;

static void i8n_task(void *arg, int ith, int nth) {
    i8n_job *j = (i8n_job *)arg;
    (void)nth;
    int a0, a1;   /* runs of the joint tile list, whole tiles */
    for (sd_split_it it = sd_split_begin(&j->split, ith); sd_split_next(&it, &a0, &a1);)
        for (int m = 0; m < j->n; m++) {
            const int lo = a0 > j->t0[m] ? a0 : j->t0[m], hi = a1 < j->t0[m + 1] ? a1 : j->t0[m + 1];
            if (hi <= lo) continue;
            const int rows = j->a[m].P->rows, r0 = (lo - j->t0[m]) * SD_I8_TILE;
            const int r1 = (hi - j->t0[m]) * SD_I8_TILE < rows ? (hi - j->t0[m]) * SD_I8_TILE : rows;
            j->rows(&j->a[m], r0, r1);
        }
}

int sd_i8_matmul_n(sd_i8_rows_fn rows, sd_i8_prep_fn prep, int n, const sd_mat *const *W, const float *x, int ldx,
                   float *const *y, const int *ldy, int T, sd_pool *p) {
    if (n < 1 || n > SD_I8_N_MAX || T <= 0) return -1;
    for (int m = 0; m < n; m++)
        if (!W[m]->pk || !sd_i8_supported(W[m]) || W[m]->cols != W[0]->cols || W[m]->group != W[0]->group) return -1;
    float *d, *xg;
    int8_t *xq = prep_tokens(prep, W[0], x, ldx, T, &d, &xg);   /* one width and group: one preparation */
    if (!xq) return -1;
    i8n_job j = {.rows = rows ? rows : sd_i8_rows_c, .n = n};
    double macs = 0;
    for (int m = 0; m < n; m++) {
        j.a[m] = call_args((const sd_i8_packed *)W[m]->pk, xq, d, xg, y[m], ldy[m], T);
        j.t0[m] = j.tiles;
        j.tiles += j.a[m].P->tiles;
        macs += (double)W[m]->rows * W[m]->cols * T;
    }
    j.t0[n] = j.tiles;
    const int in = run_inline(p, macs);
    sd_split_init(&j.split, j.tiles, split_grain(T), in ? 1 : sd_pool_size(p));
    if (in) i8n_task(&j, 0, 1);
    else sd_pool_run(p, i8n_task, &j);
    return 0;
}
