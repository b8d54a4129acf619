/* backend_cpu.c: the CPU backend. It owns the thread pool and the op set of one SIMD level (or
 * the scalar reference set) and fills in the backend table (src/backend/backend.h). Backend
 * memory is host memory: uploads are zero-copy views of the mmapped weights, reads and writes are
 * copies, and every position is read straight from its int32. The seeded sampler and the argmax
 * are the host ones (src/sample/), so a CPU round chooses exactly as classic decoding always has. */
#include "backend/backend.h"
#include "backend/walk_step.h"
#include "cpu/ops.h"
#include "cpu/ops_internal.h"
#include "cpu/ops_i8.h"
#include <stdio.h>
#include "cpu/pool.h"
#include "sample/sample.h"
#include "util/err.h"
#include "util/mem.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct cpu_be {
    sd_backend b;
    const sd_ops *ops;
    int i8;                     /* int8 activations for the quantized matmuls that take them */
    char kname[48];             /* "avx512", "avx512 int8", ... */
    sd_pool *pool;
    float *attn_scratch;        /* grows to the largest attention call seen */
    size_t attn_cap;
    sd_sampler_ws ws;           /* the sampler's scratch, sized for the largest vocabulary seen */
    float *scatter;             /* (scatter_n) -inf except while a mapped row is being sampled */
    int scatter_n;
    float *lm_buf;              /* the fused LM head's logits and per-thread picks; grows */
    size_t lm_cap;
} cpu_be;

static cpu_be *CB(sd_backend *b) { return (cpu_be *)b->impl; }
static int pos_at(sd_pos p) { return p.base[0] + p.off; }

static void cpu_free(sd_backend *b) {
    cpu_be *c = CB(b);
    sd_pool_free(c->pool);
    free(c->attn_scratch);
    sd_sampler_ws_free(&c->ws);
    free(c->scatter);
    free(c->lm_buf);
    free(c);
}

static const char *cpu_kernels(const sd_backend *b) { return ((const cpu_be *)b->impl)->kname; }

static bool cpu_supports(const sd_backend *b, sd_op op, const sd_op_desc *d) {
    if (op == SD_OP_EMBED || op == SD_OP_MATMUL) {
        if (!d) return true;
        if (d->bits == 0) return d->dtype == SPECDEC_DTYPE_F32 || d->dtype == SPECDEC_DTYPE_F16 || d->dtype == SPECDEC_DTYPE_BF16;
        return (d->bits == 4 || d->bits == 8) && (d->group == 32 || d->group == 64 || d->group == 128);
    }
    return op >= 0 && op < SD_OP_COUNT;
}

/* ---- memory: host memory ---- */
static specdec_status cpu_alloc(sd_backend *b, size_t bytes, const char *what, void **out, specdec_err *err) {
    /* calloc: large buffers (the KV cache) come as untouched zero pages */
    *out = calloc(1, bytes ? bytes : 1);
    if (!*out) return sd_fail(err, SPECDEC_ERR_NOMEM, "%s: %zu MiB of memory: out of memory", what, bytes >> 20);
    return SPECDEC_OK;
}
static void cpu_release(sd_backend *b, void *p) { free(p); }
static specdec_status cpu_upload(sd_backend *b, const void *host, size_t bytes, const char *what, const void **out,
                                 specdec_err *err) {
    *out = host;   /* zero-copy: the mapping stays valid while the model is loaded */
    return SPECDEC_OK;
}
static void cpu_unload(sd_backend *b, const void *p) {}
/* The int8 path's packed tiles (ops_i8.h), made once per matrix it takes; the reference ops read
 * the matrix's own layout and need none. */
static specdec_status cpu_prepare_mat(sd_backend *b, sd_mat *m, const char *what, specdec_err *err) {
    cpu_be *c = CB(b);
    if (!c->i8 || c->ops == sd_ops_ref() || !sd_i8_supported(m)) return SPECDEC_OK;
    sd_i8_packed *p = malloc(sizeof *p);
    if (!p || sd_i8_pack_on(m, p, c->pool) != 0) {
        free(p);
        return sd_fail(err, SPECDEC_ERR_NOMEM, "%s: out of memory packing it for the int8 path (%llu MiB)", what,
                       (unsigned long long)(sd_mat_bytes(m) >> 20));
    }
    m->pk = p;
    return SPECDEC_OK;
}
static void cpu_unprepare_mat(sd_backend *b, sd_mat *m) {
    sd_i8_packed *p = (sd_i8_packed *)m->pk;
    sd_i8_pack_free(p);
    free(p);
    m->pk = NULL;
}
static specdec_status cpu_write(sd_backend *b, void *dst, const void *src, size_t n, specdec_err *err) {
    if (dst != src) memcpy(dst, src, n);
    b->stats.write_calls++; b->stats.write_bytes += n;
    return SPECDEC_OK;
}
static specdec_status cpu_read(sd_backend *b, void *dst, const void *src, size_t n, specdec_err *err) {
    if (dst != src) memcpy(dst, src, n);
    b->stats.read_calls++; b->stats.read_bytes += n;
    return SPECDEC_OK;
}
static specdec_status cpu_copy(sd_backend *b, void *dst, const void *src, size_t n, specdec_err *err) {
    if (dst != src) memmove(dst, src, n);
    return SPECDEC_OK;
}
static specdec_status cpu_sync(sd_backend *b, specdec_err *err) { return SPECDEC_OK; }

/* ---- ops ---- */
static specdec_status cpu_embed(sd_backend *b, const sd_mat *E, const int32_t *ids, int T, float *x, int ldx) {
    for (int t = 0; t < T; t++) sd_mat_row_f32(E, ids[t], x + (size_t)t * ldx);
    b->stats.ops++;
    return SPECDEC_OK;
}

static specdec_status cpu_matmul(sd_backend *b, const sd_mat *W, const float *x, int ldx, float *y, int ldy, int T) {
    cpu_be *c = CB(b);
    if (c->i8 && sd_i8_supported(W)) c->ops->matmul_i8(W, x, ldx, y, ldy, T, c->pool);
    else c->ops->matmul(W, x, ldx, y, ldy, T, c->pool);
    b->stats.ops++;
    return SPECDEC_OK;
}

/* q, k, v (gate, up) over one x: on the int8 path one preparation and one pool run for all of
 * them (the same bits as one call each); otherwise one matmul per matrix. */
static specdec_status cpu_matmul_n(sd_backend *b, int n, const sd_mat *const *W, const float *x, int ldx, float *const *y,
                                   const int *ldy, int T) {
    cpu_be *c = CB(b);
    if (c->i8 && c->ops->matmul_i8_n && c->ops->matmul_i8_n(n, W, x, ldx, y, ldy, T, c->pool) == 0) {
        b->stats.ops++;
        return SPECDEC_OK;
    }
    for (int i = 0; i < n; i++) SD_TRY(cpu_matmul(b, W[i], x, ldx, y[i], ldy[i], T));
    return SPECDEC_OK;
}

static specdec_status cpu_rmsnorm(sd_backend *b, float *out, int ldo, const float *x, int ldx, const float *w, int n,
                                  int T, float eps) {
    const sd_ops *o = CB(b)->ops;
    if (ldo == n && ldx == n) o->rmsnorm(out, x, w, n, T, eps);
    else
        for (int t = 0; t < T; t++) o->rmsnorm(out + (size_t)t * ldo, x + (size_t)t * ldx, w, n, 1, eps);
    b->stats.ops++;
    return SPECDEC_OK;
}

static specdec_status cpu_rope(sd_backend *b, float *x, int T, int n_heads, int hd, sd_pos pos, const float *cos_t,
                               const float *sin_t) {
    CB(b)->ops->rope(x, T, n_heads, hd, pos_at(pos), cos_t, sin_t);
    b->stats.ops++;
    return SPECDEC_OK;
}

static specdec_status cpu_silu_mul(sd_backend *b, float *g, const float *u, int n, int T) {
    CB(b)->ops->silu_mul(g, u, n, T);
    b->stats.ops++;
    return SPECDEC_OK;
}

static specdec_status cpu_add(sd_backend *b, float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] += y[i];
    b->stats.ops++;
    return SPECDEC_OK;
}

static specdec_status cpu_kv_store(sd_backend *b, sd_kv_dtype_e dt, void *cache, int row_elems, const float *src, int T,
                                   sd_pos pos) {
    sd_kv_store(dt, cache, row_elems, pos_at(pos), src, T);
    b->stats.ops++;
    return SPECDEC_OK;
}

static specdec_status attn_room(sd_backend *b, const sd_attn_shape *s, int T, int n_keys) {
    cpu_be *c = CB(b);
    size_t need = sd_attention_scratch_floats(s, T, n_keys, b->n_threads) + 1;
    if (need <= c->attn_cap) return SPECDEC_OK;
    float *p = sd_malloc_aligned(need * sizeof(float));
    if (!p) return sd_fail(&b->err, SPECDEC_ERR_NOMEM, "attention scratch of %zu MiB: out of memory",
                           need * sizeof(float) >> 20);
    free(c->attn_scratch);
    c->attn_scratch = p;
    c->attn_cap = need;
    return SPECDEC_OK;
}

static specdec_status cpu_reserve(sd_backend *b, const sd_attn_shape *s, int max_T, int n_ctx, int vocab,
                                  specdec_err *err) {
    cpu_be *c = CB(b);
    specdec_status st = attn_room(b, s, max_T, n_ctx);
    if (st != SPECDEC_OK) return sd_be_fail(b, err, st, "reserve");
    if (c->ws.vocab != vocab) {
        sd_sampler_ws_free(&c->ws);
        SD_TRY(sd_sampler_ws_init(&c->ws, vocab, err));
    }
    return SPECDEC_OK;
}

static specdec_status cpu_attention(sd_backend *b, const sd_attn_shape *s, const sd_kv_layer *kv, const float *q,
                                    float *out, int T, sd_pos pos) {
    cpu_be *c = CB(b);
    int pos0 = pos_at(pos);
    SD_TRY(attn_room(b, s, T, pos0 + T));   /* only grows when a caller did not reserve */
    c->ops->attention(s, kv, q, out, T, pos0, c->attn_scratch, c->pool);
    b->stats.ops++;
    return SPECDEC_OK;
}

static specdec_status cpu_argmax(sd_backend *b, const float *logits, int n, int T, const int32_t *map, int32_t *out) {
    for (int t = 0; t < T; t++) {
        int32_t a = sd_argmax(logits + (size_t)t * n, n);
        out[t] = map ? map[a] : a;
    }
    b->stats.ops++;
    return SPECDEC_OK;
}

/* The greedy choice over the LM head: on the int8 path each thread picks over its own rows right
 * after computing them (sd_i8_matmul_argmax; the one-thread scan over 151936 logits took 27 us a
 * token); otherwise matmul, then argmax. The logits are matmul's either way. */
static specdec_status cpu_lm_argmax(sd_backend *b, const sd_mat *W, const float *x, int ldx, int T, const int32_t *map,
                                    int32_t *out) {
    cpu_be *c = CB(b);
    const size_t need = sd_i8_argmax_scratch(W->rows, T, b->n_threads);
    if (c->lm_cap < need) {
        float *nb = realloc(c->lm_buf, sizeof(float) * need);
        if (!nb) return sd_fail(&b->err, SPECDEC_ERR_NOMEM, "LM head of %d rows x %d tokens: out of memory", W->rows, T);
        c->lm_buf = nb;
        c->lm_cap = need;
    }
    if (c->i8 && c->ops->matmul_i8_argmax && c->ops->matmul_i8_argmax(W, x, ldx, T, c->pool, c->lm_buf, out) == 0) {
        if (map)
            for (int t = 0; t < T; t++) out[t] = map[out[t]];
        b->stats.ops++;
        return SPECDEC_OK;
    }
    SD_TRY(cpu_matmul(b, W, x, ldx, c->lm_buf, W->rows, T));
    return cpu_argmax(b, c->lm_buf, W->rows, T, map, out);
}

static specdec_status cpu_sample(sd_backend *b, const specdec_sampling_params *p, const float *logits, int n, int vocab,
                                 const int32_t *map, int T, sd_pos pos, int32_t *out) {
    cpu_be *c = CB(b);
    if (c->ws.vocab != vocab) {   /* the sampler's scratch is sized for exactly one vocabulary */
        sd_sampler_ws_free(&c->ws);
        SD_TRY(sd_sampler_ws_init(&c->ws, vocab, &b->err));
    }
    if (map && c->scatter_n < vocab) {
        float *s = malloc(sizeof(float) * (size_t)vocab);
        if (!s) return sd_fail(&b->err, SPECDEC_ERR_NOMEM, "sampler row of %d: out of memory", vocab);
        for (int i = 0; i < vocab; i++) s[i] = -INFINITY;
        free(c->scatter);
        c->scatter = s;
        c->scatter_n = vocab;
    }
    int p0 = pos_at(pos);
    for (int t = 0; t < T; t++) {
        const float *row = logits + (size_t)t * n;
        if (!map) { out[t] = sd_sample(&c->ws, p, row, n, (int64_t)p0 + t); continue; }
        /* a row over the token subset `map`: every other token is -inf, as the full row would be */
        for (int k = 0; k < n; k++) c->scatter[map[k]] = row[k];
        out[t] = sd_sample(&c->ws, p, c->scatter, vocab, (int64_t)p0 + t);
        for (int k = 0; k < n; k++) c->scatter[map[k]] = -INFINITY;
    }
    b->stats.ops++;
    for (int t = 0; t < T; t++)
        if (out[t] < 0) return sd_fail(&b->err, SPECDEC_ERR_NOMEM, "sampler of %d tokens: out of memory", vocab);
    return SPECDEC_OK;
}

static specdec_status cpu_walk(sd_backend *b, int32_t *blk, int nd, const int32_t *choice, int32_t *emit, int32_t *pos,
                               int32_t *pos_prev) {
    sd_walk_step(blk, nd, choice, emit, pos, pos_prev);
    b->stats.ops++;
    return SPECDEC_OK;
}

static specdec_status cpu_copy_row(sd_backend *b, float *dst, const float *src, int ld, int n, const int32_t *idx,
                                   int off) {
    memcpy(dst, src + (size_t)(idx[0] + off) * ld, sizeof(float) * (size_t)n);
    b->stats.ops++;
    return SPECDEC_OK;
}

static const sd_backend_i cpu_i = {   /* no recordings, no device timers: host clocks tell the truth */
    SD_BACKEND_MEMORY(cpu), SD_BACKEND_OPS(cpu),
    .prepare_mat = cpu_prepare_mat, .unprepare_mat = cpu_unprepare_mat, .matmul_n = cpu_matmul_n,
    .lm_argmax = cpu_lm_argmax,
};

specdec_status sd_backend_cpu_new(const sd_backend_opts *o, sd_backend **out, specdec_err *err) {
    *out = NULL;
    const int i8 = o->precision == SD_PRECISION_INT8 || (o->precision == SD_PRECISION_DEFAULT && sd_cpu_default_int8());
    const sd_ops *ops = o->reference ? sd_ops_ref() : o->cpu_level ? sd_ops_fast_level(o->cpu_level) : NULL;
    if (!o->reference && o->cpu_level && !ops)
        return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "CPU kernel level '%s': not one this machine runs", o->cpu_level);
    if (!ops) {
        SD_TRY(sd_simd_check(err));
        ops = sd_ops_fast_prec(i8);
    }
    cpu_be *c = calloc(1, sizeof *c);
    if (!c) return sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory");
    c->ops = ops;
    c->i8 = i8;
    /* the AVX-512 level's AMX form (several tokens through the tile unit) is named too */
    snprintf(c->kname, sizeof c->kname, "%s%s%s", ops->name, c->i8 ? " int8" : "",
             c->i8 && !strcmp(ops->name, "avx512") && sd_i8_avx512_amx_preferred() ? " amx" : "");
    c->pool = sd_pool_create(o->n_threads);
    if (!c->pool) {
        free(c);
        return sd_fail(err, SPECDEC_ERR_INTERNAL, "could not start %d threads", o->n_threads);
    }
    c->b.i = &cpu_i;
    c->b.impl = c;
    c->b.name = "cpu";
    c->b.host_visible = true;
    c->b.int8 = i8;
    c->b.n_threads = sd_pool_size(c->pool);
    /* 64-token chunks: the fastest prefill of 64..512 on a Zen 5 with AVX-512
     * (docs/benchmarks/cpu-prefill-batch-epyc-zen5-2026-12-07.md) */
    c->b.batch = 64;
    *out = &c->b;
    return SPECDEC_OK;
}
