/* sim.c: the "cpu-sim" backend, a CPU backend that behaves like a device, for testing the code
 * above the interface on machines without a GPU. It wraps a CPU backend and:
 *   - says its memory is not host memory (host_visible = false), so every caller takes the paths a
 *     GPU takes: results come back through `read`, host arrays are never handed to ops;
 *   - records: seq_begin / seq_end capture the op calls of a bracket (their arguments by value,
 *     as a CUDA graph captures kernel parameters) and replays them on later seq_begin calls with
 *     the same key, without the caller issuing anything. A position, an id or a count that the
 *     caller changed on the host instead of in backend memory is then stale, exactly as on a GPU;
 *   - refuses what a recording may not contain: write, read, sync, alloc, reserve while recording.
 * Outputs equal the wrapped CPU backend's bit for bit (same kernels), so tests compare the two. */
#include "backend/backend.h"
#include "util/err.h"
#include <stdlib.h>
#include <string.h>

typedef enum { C_EMBED, C_MATMUL, C_RMSNORM, C_ROPE, C_SILU, C_ADD, C_KV, C_ATTN, C_ARGMAX, C_LMARG, C_SAMPLE,
               C_WALK, C_COPYROW, C_COPY, C_MARK } call_kind;

/* One recorded call: every argument by value. */
typedef struct call {
    call_kind k;
    sd_mat W;
    sd_attn_shape s;
    sd_kv_layer kv;
    specdec_sampling_params sp;
    sd_pos pos;
    const void *p[6];
    int i[6];
    float f;
    size_t z;
    sd_kv_dtype_e dt;
} call;

typedef struct rec { uint64_t key; call *calls; int n, cap; } rec;

typedef struct sim {
    sd_backend b;
    sd_backend *cpu;
    rec *recs; int n_recs, cap_recs;
    rec *cur;                    /* the recording in progress, or NULL */
    bool broken;                 /* a call a recording may not contain happened inside one */
    double marks[SD_BE_MARKS];   /* timer marks: the host clock when the mark ran (replays too) */
} sim;

double sd_now_ms(void);

static sim *S(sd_backend *b) { return (sim *)b->impl; }
static sd_backend *C(sd_backend *b) { return S(b)->cpu; }

static specdec_status run_call(sd_backend *b, const call *c) {
    sd_backend *u = C(b);
    const sd_backend_i *o = u->i;
    specdec_status st;
    switch (c->k) {
    case C_EMBED: st = o->embed(u, &c->W, c->p[0], c->i[0], (float *)c->p[1], c->i[1]); break;
    case C_MATMUL: st = o->matmul(u, &c->W, c->p[0], c->i[0], (float *)c->p[1], c->i[1], c->i[2]); break;
    case C_RMSNORM: st = o->rmsnorm(u, (float *)c->p[0], c->i[0], c->p[1], c->i[1], c->p[2], c->i[2], c->i[3], c->f); break;
    case C_ROPE: st = o->rope(u, (float *)c->p[0], c->i[0], c->i[1], c->i[2], c->pos, c->p[1], c->p[2]); break;
    case C_SILU: st = o->silu_mul(u, (float *)c->p[0], c->p[1], c->i[0], c->i[1]); break;
    case C_ADD: st = o->add(u, (float *)c->p[0], c->p[1], c->z); break;
    case C_KV: st = o->kv_store(u, c->dt, (void *)c->p[0], c->i[0], c->p[1], c->i[1], c->pos); break;
    case C_ATTN: st = o->attention(u, &c->s, &c->kv, c->p[0], (float *)c->p[1], c->i[0], c->pos); break;
    case C_ARGMAX: st = o->argmax(u, c->p[0], c->i[0], c->i[1], c->p[1], (int32_t *)c->p[2]); break;
    case C_LMARG: st = SPECDEC_ERR_UNSUPPORTED; break;
    case C_SAMPLE:
        st = o->sample(u, &c->sp, c->p[0], c->i[0], c->i[1], c->p[1], c->i[2], c->pos, (int32_t *)c->p[2]);
        break;
    case C_WALK:
        st = o->walk(u, (int32_t *)c->p[0], c->i[0], c->p[1], (int32_t *)c->p[2], (int32_t *)c->p[3], (int32_t *)c->p[4]);
        break;
    case C_COPYROW: st = o->copy_row(u, (float *)c->p[0], c->p[1], c->i[0], c->i[1], c->p[2], c->i[2]); break;
    case C_COPY: st = o->copy(u, (void *)c->p[0], c->p[1], c->z, NULL); break;
    case C_MARK: S(b)->marks[c->i[0]] = sd_now_ms(); st = SPECDEC_OK; break;
    default: st = SPECDEC_ERR_INTERNAL;
    }
    if (st != SPECDEC_OK) b->err = u->err;
    b->stats.ops++;
    return st;
}

/* Record (when recording) and run one call. */
static specdec_status issue(sd_backend *b, const call *c) {
    sim *s = S(b);
    if (s->cur) {
        rec *r = s->cur;
        if (r->n == r->cap) {
            int cap = r->cap ? 2 * r->cap : 64;
            call *nc = realloc(r->calls, sizeof *nc * (size_t)cap);
            if (!nc) return sd_fail(&b->err, SPECDEC_ERR_NOMEM, "recording: out of memory");
            r->calls = nc; r->cap = cap;
        }
        r->calls[r->n++] = *c;
    }
    return run_call(b, c);
}

static specdec_status refuse_in_rec(sd_backend *b, const char *what, specdec_err *err) {
    S(b)->broken = true;
    return sd_fail(err, SPECDEC_ERR_INTERNAL, "backend cpu-sim: %s inside a recorded sequence", what);
}

/* ---- the table ---- */
static void sim_free(sd_backend *b) {
    sim *s = S(b);
    for (int i = 0; i < s->n_recs; i++) free(s->recs[i].calls);
    free(s->recs);
    sd_backend_free(s->cpu);
    free(s);
}
static const char *sim_kernels(const sd_backend *b) { const sim *s = b->impl; return s->cpu->i->kernels(s->cpu); }
static bool sim_supports(const sd_backend *b, sd_op op, const sd_op_desc *d) {
    const sim *s = b->impl;
    return op != SD_OP_LM_ARGMAX && s->cpu->i->supports(s->cpu, op, d);
}
static specdec_status sim_alloc(sd_backend *b, size_t bytes, const char *what, void **out, specdec_err *err) {
    if (S(b)->cur) return refuse_in_rec(b, "alloc", err);
    return C(b)->i->alloc(C(b), bytes, what, out, err);
}
static void sim_seq_reset(sd_backend *b);
static void sim_release(sd_backend *b, void *p) {
    if (p && S(b)->n_recs) sim_seq_reset(b);   /* a recording may name this buffer */
    C(b)->i->release(C(b), p);
}
static specdec_status sim_upload(sd_backend *b, const void *host, size_t bytes, const char *what, const void **out,
                                 specdec_err *err) {
    /* a real copy, as on a device: nothing above may rely on weights staying host pointers */
    void *p = NULL;
    SD_TRY(C(b)->i->alloc(C(b), bytes, what, &p, err));
    memcpy(p, host, bytes);
    b->stats.upload_bytes += bytes;
    *out = p;
    return SPECDEC_OK;
}
static void sim_unload(sd_backend *b, const void *p) { sim_release(b, (void *)p); }
/* The wrapped CPU backend's own form of a matrix (its packed int8 tiles), made from the copy. */
static specdec_status sim_prepare_mat(sd_backend *b, sd_mat *m, const char *what, specdec_err *err) {
    sd_backend *u = C(b);
    return u->i->prepare_mat ? u->i->prepare_mat(u, m, what, err) : SPECDEC_OK;
}
static void sim_unprepare_mat(sd_backend *b, sd_mat *m) {
    sd_backend *u = C(b);
    if (u->i->unprepare_mat) u->i->unprepare_mat(u, m);
}
static specdec_status sim_write(sd_backend *b, void *dst, const void *src, size_t n, specdec_err *err) {
    if (S(b)->cur) return refuse_in_rec(b, "write", err);
    b->stats.write_calls++; b->stats.write_bytes += n;
    return C(b)->i->write(C(b), dst, src, n, err);
}
static specdec_status sim_read(sd_backend *b, void *dst, const void *src, size_t n, specdec_err *err) {
    if (S(b)->cur) return refuse_in_rec(b, "read", err);
    b->stats.read_calls++; b->stats.read_bytes += n;
    return C(b)->i->read(C(b), dst, src, n, err);
}
static specdec_status sim_copy(sd_backend *b, void *dst, const void *src, size_t n, specdec_err *err) {
    call c = {.k = C_COPY, .p = {dst, src}, .z = n};
    specdec_status st = issue(b, &c);
    if (st != SPECDEC_OK && err) *err = b->err;
    return st;
}
static specdec_status sim_sync(sd_backend *b, specdec_err *err) {
    if (S(b)->cur) return refuse_in_rec(b, "sync", err);
    return SPECDEC_OK;
}
static specdec_status sim_reserve(sd_backend *b, const sd_attn_shape *as, int max_T, int n_ctx, int vocab,
                                  specdec_err *err) {
    if (S(b)->cur) return refuse_in_rec(b, "reserve", err);
    return C(b)->i->reserve(C(b), as, max_T, n_ctx, vocab, err);
}

static bool sim_seq_begin(sd_backend *b, uint64_t key) {
    sim *s = S(b);
    for (int i = 0; i < s->n_recs; i++)
        if (s->recs[i].key == key) {
            for (int j = 0; j < s->recs[i].n; j++)
                if (run_call(b, &s->recs[i].calls[j]) != SPECDEC_OK) { s->broken = true; break; }
            b->stats.seq_replayed++;
            return true;
        }
    if (s->n_recs == s->cap_recs) {
        int cap = s->cap_recs ? 2 * s->cap_recs : 16;
        rec *nr = realloc(s->recs, sizeof *nr * (size_t)cap);
        if (!nr) return false;   /* no recording: the caller issues, nothing is captured */
        s->recs = nr; s->cap_recs = cap;
    }
    s->cur = &s->recs[s->n_recs++];
    memset(s->cur, 0, sizeof *s->cur);
    s->cur->key = key;
    return false;
}
static specdec_status sim_seq_end(sd_backend *b, uint64_t key, specdec_err *err) {
    sim *s = S(b);
    if (!s->cur || s->cur->key != key)
        return sd_fail(err, SPECDEC_ERR_INTERNAL, "backend cpu-sim: seq_end(%llx) without its seq_begin", (unsigned long long)key);
    s->cur = NULL;
    b->stats.seq_recorded++;
    if (s->broken) return sd_fail(err, SPECDEC_ERR_INTERNAL, "backend cpu-sim: the recorded sequence failed");
    return SPECDEC_OK;
}
static void sim_seq_reset(sd_backend *b) {
    sim *s = S(b);
    for (int i = 0; i < s->n_recs; i++) free(s->recs[i].calls);
    s->n_recs = 0;
    s->cur = NULL;
}

#define ISSUE(...) do { call c_ = {__VA_ARGS__}; return issue(b, &c_); } while (0)
static specdec_status sim_embed(sd_backend *b, const sd_mat *E, const int32_t *ids, int T, float *x, int ldx) {
    ISSUE(.k = C_EMBED, .W = *E, .p = {ids, x}, .i = {T, ldx});
}
static specdec_status sim_matmul(sd_backend *b, const sd_mat *W, const float *x, int ldx, float *y, int ldy, int T) {
    ISSUE(.k = C_MATMUL, .W = *W, .p = {x, y}, .i = {ldx, ldy, T});
}
static specdec_status sim_rmsnorm(sd_backend *b, float *out, int ldo, const float *x, int ldx, const float *w, int n, int T,
                                float eps) {
    ISSUE(.k = C_RMSNORM, .p = {out, x, w}, .i = {ldo, ldx, n, T}, .f = eps);
}
static specdec_status sim_rope(sd_backend *b, float *x, int T, int nh, int hd, sd_pos pos, const float *ct, const float *st) {
    ISSUE(.k = C_ROPE, .p = {x, ct, st}, .i = {T, nh, hd}, .pos = pos);
}
static specdec_status sim_silu_mul(sd_backend *b, float *g, const float *u, int n, int T) {
    ISSUE(.k = C_SILU, .p = {g, u}, .i = {n, T});
}
static specdec_status sim_add(sd_backend *b, float *x, const float *y, size_t n) { ISSUE(.k = C_ADD, .p = {x, y}, .z = n); }
static specdec_status sim_kv_store(sd_backend *b, sd_kv_dtype_e dt, void *cache, int row, const float *src, int T, sd_pos pos) {
    ISSUE(.k = C_KV, .dt = dt, .p = {cache, src}, .i = {row, T}, .pos = pos);
}
static specdec_status sim_attention(sd_backend *b, const sd_attn_shape *as, const sd_kv_layer *kv, const float *q, float *out,
                             int T, sd_pos pos) {
    ISSUE(.k = C_ATTN, .s = *as, .kv = *kv, .p = {q, out}, .i = {T}, .pos = pos);
}
static specdec_status sim_argmax(sd_backend *b, const float *lg, int n, int T, const int32_t *map, int32_t *out) {
    ISSUE(.k = C_ARGMAX, .p = {lg, map, out}, .i = {n, T});
}
static specdec_status sim_sample(sd_backend *b, const specdec_sampling_params *p, const float *lg, int n, int vocab,
                               const int32_t *map, int T, sd_pos pos, int32_t *out) {
    ISSUE(.k = C_SAMPLE, .sp = *p, .p = {lg, map, out}, .i = {n, vocab, T}, .pos = pos);
}
static specdec_status sim_walk(sd_backend *b, int32_t *blk, int nd, const int32_t *choice, int32_t *emit, int32_t *pos,
                             int32_t *pos_prev) {
    ISSUE(.k = C_WALK, .p = {blk, choice, emit, pos, pos_prev}, .i = {nd});
}
static specdec_status sim_copy_row(sd_backend *b, float *dst, const float *src, int ld, int n, const int32_t *idx, int off) {
    ISSUE(.k = C_COPYROW, .p = {dst, src, idx}, .i = {ld, n, off});
}

static specdec_status sim_mark(sd_backend *b, int slot) {
    if (slot < 0 || slot >= SD_BE_MARKS) return SPECDEC_OK;
    call c = {.k = C_MARK, .i = {slot}};
    return issue(b, &c);
}
static double sim_elapsed(sd_backend *b, int i, int j) {
    const sim *s = S(b);
    if (i < 0 || j < 0 || i >= SD_BE_MARKS || j >= SD_BE_MARKS || !s->marks[i] || !s->marks[j]) return -1;
    return s->marks[j] - s->marks[i];
}

static const sd_backend_i sim_i = {
    SD_BACKEND_MEMORY(sim), SD_BACKEND_RECORDING(sim), SD_BACKEND_OPS(sim), .lm_argmax = NULL,
    .prepare_mat = sim_prepare_mat, .unprepare_mat = sim_unprepare_mat,
};

specdec_status sd_backend_sim_new(const sd_backend_opts *o, sd_backend **out, specdec_err *err) {
    *out = NULL;
    sim *s = calloc(1, sizeof *s);
    if (!s) return sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory");
    specdec_status st = sd_backend_cpu_new(o, &s->cpu, err);
    if (st != SPECDEC_OK) { free(s); return st; }
    s->b.i = &sim_i;
    s->b.impl = s;
    s->b.name = "cpu-sim";
    s->b.host_visible = false;
    s->b.n_threads = s->cpu->n_threads;
    s->b.batch = s->cpu->batch;
    s->b.int8 = s->cpu->int8;
    *out = &s->b;
    return SPECDEC_OK;
}
