/* tp_backend.c: the tensor-parallel backend (tp_backend.h). A buffer is N buffers, one per rank,
 * named by rank 0's pointer; `maps` (sorted by that pointer) gives the other ranks' buffers, so a
 * pointer into a buffer (an offset row, a slice) translates to the same offset on every rank. */
#include "tp/tp_backend.h"
#include "tp/comm.h"
#include "tp/plan.h"
#include "util/err.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double sd_now_ms(void);

enum { K_ALLOC, K_UPLOAD, K_RANKS };   /* how the rank buffers were made (how they go back) */

typedef struct tp_map {
    uintptr_t base;                  /* rank 0's pointer */
    size_t size;
    void *p[SD_TP_MAX];              /* each rank's */
    int kind;
    bool via_upload;                 /* K_RANKS: rank buffers from upload (devices), else alloc + write */
} tp_map;

typedef struct tp {
    sd_backend b;
    int n;
    sd_backend *r[SD_TP_MAX];
    sd_comm *comm;
    sd_tp_reduce reduce;
    bool rec;                        /* recordings forwarded to the ranks (capture-safe collectives) */
    bool mixed;                      /* the ranks disagreed on a seq_begin */
    tp_map *maps;
    int n_maps, cap_maps;
    const void *miss;                /* a pointer that is no buffer of this backend (a bug above) */
    double marks[SD_BE_MARKS];       /* host stamps when the ranks have no device timers */
    sd_tp_counters cnt;
    sd_backend_i tab;                /* tp_i, with lm_argmax only where the ranks have it */
    char name[48], kern[320];
} tp;

static tp *TP(sd_backend *b) { return (tp *)b->impl; }
static const tp *TPc(const sd_backend *b) { return (const tp *)b->impl; }

/* ---- the buffer map ---- */
static int map_find(const tp *t, uintptr_t a) {
    int lo = 0, hi = t->n_maps - 1, at = -1;
    while (lo <= hi) {   /* the last entry whose base <= a */
        int mid = (lo + hi) / 2;
        if (t->maps[mid].base <= a) { at = mid; lo = mid + 1; }
        else hi = mid - 1;
    }
    /* zero-copy uploads may repeat a host range: look a few entries back for one holding a */
    for (int i = at, k = 0; i >= 0 && k < 8; i--, k++)
        if (a < t->maps[i].base + (t->maps[i].size ? t->maps[i].size : 1)) return i;
    return -1;
}

static specdec_status map_add(tp *t, const tp_map *m, specdec_err *err) {
    if (t->n_maps == t->cap_maps) {
        int cap = t->cap_maps ? 2 * t->cap_maps : 256;
        tp_map *nm = realloc(t->maps, sizeof *nm * (size_t)cap);
        if (!nm) return sd_fail(err, SPECDEC_ERR_NOMEM, "tensor parallel: out of memory");
        t->maps = nm;
        t->cap_maps = cap;
    }
    int i = t->n_maps;
    while (i > 0 && t->maps[i - 1].base > m->base) { t->maps[i] = t->maps[i - 1]; i--; }
    t->maps[i] = *m;
    t->n_maps++;
    return SPECDEC_OK;
}

static int map_exact(const tp *t, const void *p) {
    int i = map_find(t, (uintptr_t)p);
    while (i >= 0 && t->maps[i].base != (uintptr_t)p) i--;
    return i >= 0 && t->maps[i].base == (uintptr_t)p ? i : -1;
}

static void map_del(tp *t, int i) {
    memmove(t->maps + i, t->maps + i + 1, sizeof *t->maps * (size_t)(t->n_maps - i - 1));
    t->n_maps--;
}

/* Rank r's pointer for p (NULL stays NULL). */
static void *X(tp *t, const void *p, int r) {
    if (!p) return NULL;
    if (r == 0) return (void *)p;
    int i = map_find(t, (uintptr_t)p);
    if (i < 0) { t->miss = p; return NULL; }
    return (char *)t->maps[i].p[r] + ((uintptr_t)p - t->maps[i].base);
}

/* The ranks' own forms of one matrix (prepare_mat: a CPU rank's packed int8 tiles); the
 * tensor-parallel matrix's pk points at this table, and Xmat hands each rank its own. */
typedef struct tp_pk { const void *pk[SD_TP_MAX]; } tp_pk;

static sd_mat Xmat(tp *t, const sd_mat *m, int r) {
    sd_mat o = *m;
    o.w = X(t, m->w, r); o.scales = X(t, m->scales, r); o.biases = X(t, m->biases, r);
    o.pk = m->pk ? ((const tp_pk *)m->pk)->pk[r] : NULL;
    return o;
}
static sd_pos Xpos(tp *t, sd_pos p, int r) { p.base = X(t, p.base, r); return p; }

static void enter(tp *t, int r) { if (t->comm && t->comm->i->enter) t->comm->i->enter(t->comm, r); }

/* After a rank op: its message (naming the rank) into the backend's err. */
static specdec_status rank_st(tp *t, int r, specdec_status st) {
    if (st == SPECDEC_OK && !t->miss) return SPECDEC_OK;
    if (t->miss) {
        sd_fail(&t->b.err, SPECDEC_ERR_INTERNAL, "tensor parallel: %p is no buffer of this backend", t->miss);
        t->miss = NULL;
        return SPECDEC_ERR_INTERNAL;
    }
    sd_backend *rb = t->r[r];
    specdec_err e = rb->err;
    if (!e.msg[0]) snprintf(e.msg, sizeof e.msg, "%s", specdec_status_name(st));
    sd_fail(&t->b.err, st, "rank %d: %s", r, e.msg);
    rb->err.status = SPECDEC_OK; rb->err.msg[0] = 0;
    return st;
}
static specdec_status rank_err(tp *t, int r, specdec_status st, specdec_err *err) {
    if (st == SPECDEC_OK) return SPECDEC_OK;
    if (err) {
        specdec_err e = *err;
        sd_fail(err, st, "tensor parallel rank %d: %s", r, e.msg);
    }
    return st;
}

/* Inside a loop over ranks r of t: run a rank op unless a translation missed; on failure return
 * with the message in the backend's err. */
#define ON(call)                                                                   \
    do {                                                                           \
        specdec_status st_ = t->miss ? SPECDEC_ERR_INTERNAL : (call);              \
        if (st_ != SPECDEC_OK || t->miss) return rank_st(t, r, st_);               \
    } while (0)
#define RANKS(b) tp *t = TP(b); (b)->stats.ops++; for (int r = 0; r < t->n; r++) for (sd_backend *R = (enter(t, r), t->r[r]); R; R = NULL)

/* ---- object and memory ---- */
static void drop(tp *t, int i);
static void t_free(sd_backend *b) {
    tp *t = TP(b);
    while (t->n_maps) drop(t, t->n_maps - 1);   /* buffers the caller still held */
    for (int r = 0; r < t->n; r++) { enter(t, r); sd_backend_free(t->r[r]); }   /* enter needs the comm */
    if (t->comm) t->comm->i->free(t->comm);
    free(t->maps);
    free(t);
}
static const char *t_kernels(const sd_backend *b) { return TPc(b)->kern; }
static bool t_supports(const sd_backend *b, sd_op op, const sd_op_desc *d) {
    const tp *t = TPc(b);
    for (int r = 0; r < t->n; r++)
        if (!t->r[r]->i->supports(t->r[r], op, d)) return false;
    return op != SD_OP_LM_ARGMAX || t->r[0]->i->lm_argmax;
}

static specdec_status t_alloc(sd_backend *b, size_t bytes, const char *what, void **out, specdec_err *err) {
    tp *t = TP(b);
    tp_map m = {.size = bytes, .kind = K_ALLOC};
    *out = NULL;
    for (int r = 0; r < t->n; r++) {
        enter(t, r);
        specdec_status st = t->r[r]->i->alloc(t->r[r], bytes, what, &m.p[r], err);
        if (st) {
            for (int q = 0; q < r; q++) { enter(t, q); t->r[q]->i->release(t->r[q], m.p[q]); }
            return rank_err(t, r, st, err);
        }
    }
    m.base = (uintptr_t)m.p[0];
    specdec_status st = map_add(t, &m, err);
    if (st) { for (int q = 0; q < t->n; q++) { enter(t, q); t->r[q]->i->release(t->r[q], m.p[q]); } return st; }
    *out = m.p[0];
    return SPECDEC_OK;
}

static void drop(tp *t, int i) {
    tp_map m = t->maps[i];
    map_del(t, i);
    for (int r = 0; r < t->n; r++) {
        enter(t, r);
        if (m.kind == K_UPLOAD || (m.kind == K_RANKS && m.via_upload)) t->r[r]->i->unload(t->r[r], m.p[r]);
        else t->r[r]->i->release(t->r[r], m.p[r]);
    }
}
static void t_release(sd_backend *b, void *p) {
    if (!p) return;
    int i = map_exact(TP(b), p);
    if (i >= 0) drop(TP(b), i);
}
static void t_unload(sd_backend *b, const void *p) { t_release(b, (void *)p); }

static void t_unprepare_mat(sd_backend *b, sd_mat *m) {
    tp *t = TP(b);
    tp_pk *k = (tp_pk *)m->pk;
    if (!k) return;
    for (int r = 0; r < t->n; r++) {
        if (!k->pk[r] || !t->r[r]->i->unprepare_mat) continue;
        enter(t, r);
        sd_mat w = Xmat(t, m, r);
        t->r[r]->i->unprepare_mat(t->r[r], &w);
    }
    t->miss = NULL;
    free(k);
    m->pk = NULL;
}

/* Each rank's own form of its part of the matrix, where the ranks make one. */
static specdec_status t_prepare_mat(sd_backend *b, sd_mat *m, const char *what, specdec_err *err) {
    tp *t = TP(b);
    if (!t->r[0]->i->prepare_mat) return SPECDEC_OK;
    tp_pk *k = calloc(1, sizeof *k);
    if (!k) return sd_fail(err, SPECDEC_ERR_NOMEM, "tensor parallel: out of memory");
    m->pk = NULL;
    bool any = false;
    for (int r = 0; r < t->n; r++) {
        enter(t, r);
        sd_mat w = Xmat(t, m, r);
        specdec_status st = t->miss ? SPECDEC_ERR_INTERNAL : t->r[r]->i->prepare_mat(t->r[r], &w, what, err);
        if (st != SPECDEC_OK) {
            t->miss = NULL;
            m->pk = k;
            t_unprepare_mat(b, m);
            return rank_err(t, r, st, err);
        }
        k->pk[r] = w.pk;
        any |= w.pk != NULL;
    }
    if (any) m->pk = k;
    else free(k);
    return SPECDEC_OK;
}

static specdec_status t_upload(sd_backend *b, const void *host, size_t bytes, const char *what, const void **out,
                               specdec_err *err) {
    tp *t = TP(b);
    tp_map m = {.size = bytes, .kind = K_UPLOAD};
    *out = NULL;
    for (int r = 0; r < t->n; r++) {
        enter(t, r);
        const void *p = NULL;
        specdec_status st = t->r[r]->i->upload(t->r[r], host, bytes, what, &p, err);
        if (st) {
            for (int q = 0; q < r; q++) { enter(t, q); t->r[q]->i->unload(t->r[q], m.p[q]); }
            return rank_err(t, r, st, err);
        }
        m.p[r] = (void *)p;
        b->stats.upload_bytes += t->r[r]->host_visible ? 0 : bytes;
    }
    m.base = (uintptr_t)m.p[0];
    SD_TRY(map_add(t, &m, err));
    *out = m.p[0];
    return SPECDEC_OK;
}

static specdec_status t_upload_ranks(sd_backend *b, const void *const *host, size_t bytes, const char *what,
                                     const void **out, specdec_err *err) {
    tp *t = TP(b);
    tp_map m = {.size = bytes, .kind = K_RANKS, .via_upload = !t->r[0]->host_visible};
    *out = NULL;
    for (int r = 0; r < t->n; r++) {
        sd_backend *R = t->r[r];
        enter(t, r);
        specdec_status st;
        if (m.via_upload) {
            const void *p = NULL;
            st = R->i->upload(R, host[r], bytes, what, &p, err);
            m.p[r] = (void *)p;
        } else {   /* a host-memory rank would keep a view of host[r], which the caller frees: copy */
            st = R->i->alloc(R, bytes, what, &m.p[r], err);
            if (st == SPECDEC_OK) st = R->i->write(R, m.p[r], host[r], bytes, err);
        }
        if (st) {
            m.base = 0;
            for (int q = 0; q <= r; q++) {
                enter(t, q);
                if (!m.p[q]) continue;
                if (m.via_upload) t->r[q]->i->unload(t->r[q], m.p[q]);
                else t->r[q]->i->release(t->r[q], m.p[q]);
            }
            return rank_err(t, r, st, err);
        }
        b->stats.upload_bytes += bytes;
    }
    m.base = (uintptr_t)m.p[0];
    SD_TRY(map_add(t, &m, err));
    *out = m.p[0];
    return SPECDEC_OK;
}

static specdec_status t_write(sd_backend *b, void *dst, const void *src, size_t n, specdec_err *err) {
    tp *t = TP(b);
    b->stats.write_calls++; b->stats.write_bytes += n;
    for (int r = 0; r < t->n; r++) {
        void *d = X(t, dst, r);
        if (t->miss) { t->miss = NULL; return sd_fail(err, SPECDEC_ERR_INTERNAL, "tensor parallel: write to a pointer that is no buffer of this backend"); }
        enter(t, r);
        SD_TRY(rank_err(t, r, t->r[r]->i->write(t->r[r], d, src, n, err), err));
    }
    return SPECDEC_OK;
}
static specdec_status t_read(sd_backend *b, void *dst, const void *src, size_t n, specdec_err *err) {
    tp *t = TP(b);
    b->stats.read_calls++; b->stats.read_bytes += n;
    enter(t, 0);   /* every rank holds the same replicated values: rank 0 answers */
    return rank_err(t, 0, t->r[0]->i->read(t->r[0], dst, src, n, err), err);
}
static specdec_status t_copy(sd_backend *b, void *dst, const void *src, size_t n, specdec_err *err) {
    tp *t = TP(b);
    for (int r = 0; r < t->n; r++) {
        void *d = X(t, dst, r);
        const void *s = X(t, src, r);
        if (t->miss) { t->miss = NULL; return sd_fail(err, SPECDEC_ERR_INTERNAL, "tensor parallel: copy of a pointer that is no buffer of this backend"); }
        enter(t, r);
        SD_TRY(rank_err(t, r, t->r[r]->i->copy(t->r[r], d, s, n, err), err));
    }
    return SPECDEC_OK;
}
static specdec_status t_sync(sd_backend *b, specdec_err *err) {
    tp *t = TP(b);
    for (int r = 0; r < t->n; r++) { enter(t, r); SD_TRY(rank_err(t, r, t->r[r]->i->sync(t->r[r], err), err)); }
    return SPECDEC_OK;
}
static specdec_status t_reserve(sd_backend *b, const sd_attn_shape *s, int max_T, int n_ctx, int vocab,
                                specdec_err *err) {
    tp *t = TP(b);
    for (int r = 0; r < t->n; r++) {
        enter(t, r);
        SD_TRY(rank_err(t, r, t->r[r]->i->reserve(t->r[r], s, max_T, n_ctx, vocab, err), err));
    }
    return SPECDEC_OK;
}

/* ---- timers and recordings ---- */
static specdec_status t_mark(sd_backend *b, int slot) {
    tp *t = TP(b);
    if (slot < 0 || slot >= SD_BE_MARKS) return SPECDEC_OK;
    if (!t->r[0]->i->mark) { t->marks[slot] = sd_now_ms(); return SPECDEC_OK; }   /* synchronous ranks */
    enter(t, 0);
    return rank_st(t, 0, t->r[0]->i->mark(t->r[0], slot));
}
static double t_elapsed(sd_backend *b, int i, int j) {
    tp *t = TP(b);
    if (t->r[0]->i->elapsed) { enter(t, 0); return t->r[0]->i->elapsed(t->r[0], i, j); }
    if (i < 0 || j < 0 || i >= SD_BE_MARKS || j >= SD_BE_MARKS || !t->marks[i] || !t->marks[j]) return -1;
    return t->marks[j] - t->marks[i];
}
static bool t_seq_begin(sd_backend *b, uint64_t key) {
    tp *t = TP(b);
    if (!t->rec) return false;
    int replayed = 0;
    for (int r = 0; r < t->n; r++) { enter(t, r); replayed += t->r[r]->i->seq_begin(t->r[r], key); }
    if (replayed && replayed != t->n) t->mixed = true;
    if (replayed == t->n) b->stats.seq_replayed++;
    return replayed == t->n;
}
static specdec_status t_seq_end(sd_backend *b, uint64_t key, specdec_err *err) {
    tp *t = TP(b);
    if (!t->rec) return SPECDEC_OK;
    for (int r = 0; r < t->n; r++) { enter(t, r); SD_TRY(rank_err(t, r, t->r[r]->i->seq_end(t->r[r], key, err), err)); }
    b->stats.seq_recorded++;
    if (t->mixed) {
        t->mixed = false;
        return sd_fail(err, SPECDEC_ERR_INTERNAL, "tensor parallel: the ranks disagreed on replaying recording %llx",
                       (unsigned long long)key);
    }
    return SPECDEC_OK;
}
static void t_seq_reset(sd_backend *b) {
    tp *t = TP(b);
    for (int r = 0; r < t->n; r++)
        if (t->r[r]->i->seq_reset) { enter(t, r); t->r[r]->i->seq_reset(t->r[r]); }
}

/* ---- ops: the same call on every rank ---- */
static specdec_status t_embed(sd_backend *b, const sd_mat *E, const int32_t *ids, int T, float *x, int ldx) {
    RANKS(b) { sd_mat e = Xmat(t, E, r); ON(R->i->embed(R, &e, X(t, ids, r), T, X(t, x, r), ldx)); }
    return SPECDEC_OK;
}
static specdec_status t_matmul(sd_backend *b, const sd_mat *W, const float *x, int ldx, float *y, int ldy, int T) {
    RANKS(b) { sd_mat w = Xmat(t, W, r); ON(R->i->matmul(R, &w, X(t, x, r), ldx, X(t, y, r), ldy, T)); }
    return SPECDEC_OK;
}
static specdec_status t_rmsnorm(sd_backend *b, float *out, int ldo, const float *x, int ldx, const float *w, int n,
                                int T, float eps) {
    RANKS(b) ON(R->i->rmsnorm(R, X(t, out, r), ldo, X(t, x, r), ldx, X(t, w, r), n, T, eps));
    return SPECDEC_OK;
}
static specdec_status t_rope(sd_backend *b, float *x, int T, int nh, int hd, sd_pos pos, const float *ct,
                             const float *st) {
    RANKS(b) ON(R->i->rope(R, X(t, x, r), T, nh, hd, Xpos(t, pos, r), X(t, ct, r), X(t, st, r)));
    return SPECDEC_OK;
}
static specdec_status t_silu_mul(sd_backend *b, float *g, const float *u, int n, int T) {
    RANKS(b) ON(R->i->silu_mul(R, X(t, g, r), X(t, u, r), n, T));
    return SPECDEC_OK;
}
static specdec_status t_add(sd_backend *b, float *x, const float *y, size_t n) {
    RANKS(b) ON(R->i->add(R, X(t, x, r), X(t, y, r), n));
    return SPECDEC_OK;
}
static specdec_status t_kv_store(sd_backend *b, sd_kv_dtype_e dt, void *cache, int row, const float *src, int T, sd_pos pos) {
    RANKS(b) ON(R->i->kv_store(R, dt, X(t, cache, r), row, X(t, src, r), T, Xpos(t, pos, r)));
    return SPECDEC_OK;
}
static specdec_status t_attention(sd_backend *b, const sd_attn_shape *as, const sd_kv_layer *kv, const float *q, float *out,
                             int T, sd_pos pos) {
    RANKS(b) {
        sd_kv_layer k = {X(t, kv->k, r), X(t, kv->v, r)};
        ON(R->i->attention(R, as, &k, X(t, q, r), X(t, out, r), T, Xpos(t, pos, r)));
    }
    return SPECDEC_OK;
}
static specdec_status t_argmax(sd_backend *b, const float *lg, int n, int T, const int32_t *map, int32_t *out) {
    RANKS(b) ON(R->i->argmax(R, X(t, lg, r), n, T, X(t, map, r), X(t, out, r)));
    return SPECDEC_OK;
}
static specdec_status t_lm_argmax(sd_backend *b, const sd_mat *W, const float *x, int ldx, int T, const int32_t *map,
                                  int32_t *out) {
    RANKS(b) {
        if (!R->i->lm_argmax) return sd_fail(&b->err, SPECDEC_ERR_UNSUPPORTED, "tensor parallel: rank %d has no fused LM head", r);
        sd_mat w = Xmat(t, W, r);
        ON(R->i->lm_argmax(R, &w, X(t, x, r), ldx, T, X(t, map, r), X(t, out, r)));
    }
    return SPECDEC_OK;
}
static specdec_status t_sample(sd_backend *b, const specdec_sampling_params *p, const float *lg, int n, int vocab,
                               const int32_t *map, int T, sd_pos pos, int32_t *out) {
    RANKS(b) ON(R->i->sample(R, p, X(t, lg, r), n, vocab, X(t, map, r), T, Xpos(t, pos, r), X(t, out, r)));
    return SPECDEC_OK;
}
static specdec_status t_walk(sd_backend *b, int32_t *blk, int nd, const int32_t *choice, int32_t *emit, int32_t *pos,
                             int32_t *pos_prev) {
    RANKS(b) ON(R->i->walk(R, X(t, blk, r), nd, X(t, choice, r), X(t, emit, r), X(t, pos, r), X(t, pos_prev, r)));
    return SPECDEC_OK;
}
static specdec_status t_copy_row(sd_backend *b, float *dst, const float *src, int ld, int n, const int32_t *idx, int off) {
    RANKS(b) ON(R->i->copy_row(R, X(t, dst, r), X(t, src, r), ld, n, X(t, idx, r), off));
    return SPECDEC_OK;
}

/* ---- the all-reduce ---- */
static specdec_status t_allreduce(sd_backend *b, float *x, size_t n, float *scratch) {
    tp *t = TP(b);
    if (!n) return SPECDEC_OK;
    double t0 = sd_now_ms();
    t->cnt.calls++;
    t->cnt.floats += n;
    if (t->reduce == SD_TP_REDUCE_NONE) return SPECDEC_OK;
    float *xr[SD_TP_MAX], *gr[SD_TP_MAX];
    const float *sr[SD_TP_MAX];
    for (int r = 0; r < t->n; r++) { xr[r] = X(t, x, r); sr[r] = xr[r]; gr[r] = X(t, scratch, r); }
    if (t->miss || (t->reduce == SD_TP_REDUCE_GATHER && !scratch)) return rank_st(t, 0, SPECDEC_ERR_INTERNAL);
    specdec_status st;
    if (t->reduce == SD_TP_REDUCE_RING) {
        st = t->comm->i->allreduce_ring(t->comm, xr, n, &b->err);
    } else {
        /* every rank: the N partials side by side, then summed in rank order 0, 1, ..., N-1 */
        st = t->comm->i->allgather(t->comm, sr, gr, n, &b->err);
        for (int r = 0; r < t->n && st == SPECDEC_OK; r++) {
            sd_backend *R = t->r[r];
            enter(t, r);
            st = R->i->copy(R, xr[r], gr[r], sizeof(float) * n, &b->err);
            for (int k = 1; k < t->n && st == SPECDEC_OK; k++)
                if ((st = R->i->add(R, xr[r], gr[r] + (size_t)k * n, n)) != SPECDEC_OK) rank_st(t, r, st);
        }
    }
    t->cnt.ms += sd_now_ms() - t0;
    return st;
}

static const sd_backend_i tp_i = {
    SD_BACKEND_MEMORY(t), SD_BACKEND_RECORDING(t), SD_BACKEND_OPS(t), .lm_argmax = t_lm_argmax,
    .allreduce = t_allreduce, .upload_ranks = t_upload_ranks,
    .prepare_mat = t_prepare_mat, .unprepare_mat = t_unprepare_mat,
};

static const char *reduce_name(sd_tp_reduce r) {
    return r == SD_TP_REDUCE_RING ? "ring all-reduce" : r == SD_TP_REDUCE_NONE ? "no reduction (timing only)"
                                                                             : "all-gather + sum in rank order";
}

specdec_status sd_backend_tp_new(const sd_tp_opts *to, const sd_backend_opts *o, sd_backend **out, specdec_err *err) {
    *out = NULL;
    int n = to->n;
    if (n < 1 || n > SD_TP_MAX)
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "tensor parallel: %d ranks (1..%d supported)", n, SD_TP_MAX);
    const char *name = to->rank_backend;
    if (!name || !*name || !strcmp(name, "auto")) name = !o->reference && sd_backend_cuda_available() ? "cuda" : "cpu";
    bool cuda = !strcmp(name, "cuda");
    int devs[SD_TP_MAX];
    if (cuda) {
        int found = sd_comm_cuda_devices();
        if (o->device + n > found)
            return sd_fail(err, SPECDEC_ERR_UNSUPPORTED,
                           "tensor parallel over %d rank(s) needs %d CUDA device(s) (devices %d..%d); this process sees %d",
                           n, n, o->device, o->device + n - 1, found);
    } else if (strcmp(name, "cpu") && strcmp(name, "cpu-sim")) {
        return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "tensor parallel: no ranks of backend '%s' (cuda, cpu, cpu-sim)", name);
    }
    tp *t = calloc(1, sizeof *t);
    if (!t) return sd_fail(err, SPECDEC_ERR_NOMEM, "out of memory");
    t->n = n;
    t->reduce = to->reduce;
    t->tab = tp_i;
    t->b.i = &t->tab;
    t->b.impl = t;
    t->b.host_visible = false;   /* a write must reach every rank: never hand out host pointers */
    t->b.tp_ranks = n;
    specdec_status st = SPECDEC_OK;
    for (int r = 0; r < n && st == SPECDEC_OK; r++) {
        sd_backend_opts ro = *o;
        ro.device = o->device + r;
        devs[r] = ro.device;
        st = sd_backend_create(name, &ro, &t->r[r], err);
        if (st) rank_err(t, r, st, err);
    }
    if (st == SPECDEC_OK)
        st = cuda ? sd_comm_nccl_new(t->r, n, devs, &t->comm, err) : sd_comm_sim_new(t->r, n, &t->comm, err);
    if (st != SPECDEC_OK) { t_free(&t->b); return st; }
    /* one collective of each kind now, then a sync: NCCL connects its rings at a communicator's
     * first collectives, which must not happen inside a recording (a CUDA graph capture) */
    float *w = NULL;
    st = t_alloc(&t->b, sizeof(float) * (size_t)n * 2, "tensor-parallel warm-up", (void **)&w, err);
    if (st == SPECDEC_OK) {
        float *wr[SD_TP_MAX], *gr[SD_TP_MAX];
        const float *sr[SD_TP_MAX];
        for (int r = 0; r < n; r++) { wr[r] = X(t, w, r); sr[r] = wr[r]; gr[r] = wr[r] + n; }
        st = t->comm->i->allgather(t->comm, sr, gr, 1, err);
        if (st == SPECDEC_OK && t->reduce == SD_TP_REDUCE_RING) st = t->comm->i->allreduce_ring(t->comm, wr, 1, err);
        if (st == SPECDEC_OK) st = t_sync(&t->b, err);
        t_release(&t->b, w);
    }
    if (st != SPECDEC_OK) { t_free(&t->b); return st; }
    t->rec = t->comm->capture_safe && t->r[0]->i->seq_begin;
    if (!t->r[0]->i->lm_argmax) t->tab.lm_argmax = NULL;
    t->b.n_threads = t->r[0]->n_threads;
    t->b.batch = t->r[0]->batch;
    snprintf(t->name, sizeof t->name, "tp%d-%s", n, t->r[0]->name);
    t->b.name = t->name;
    snprintf(t->kern, sizeof t->kern, "%s x %d ranks over %s, %s", t->r[0]->i->kernels(t->r[0]), n, t->comm->name,
             reduce_name(t->reduce));
    *out = &t->b;
    return SPECDEC_OK;
}

void sd_backend_tp_counters(const sd_backend *b, sd_tp_counters *out) {
    memset(out, 0, sizeof *out);
    if (b && b->tp_ranks && b->i->allreduce == t_allreduce) *out = TPc(b)->cnt;
}
const char *sd_backend_tp_comm(const sd_backend *b) {
    return b && b->tp_ranks && b->i->allreduce == t_allreduce ? TPc(b)->comm->name : NULL;
}
