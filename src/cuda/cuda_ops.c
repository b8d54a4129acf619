/* cuda_ops.c: the CUDA backend's ops (backend.h's semantics): each checks its arguments on the
 * host (a bad one is an error naming the op and the value, never a launch), turns the tensors
 * into its kernel family's parameter struct, takes op scratch reserved by reserve(), launches
 * on the backend's stream, and reports the launch status. Nothing here synchronizes or
 * allocates inside a recording. */
#include "cuda/cuda_be.h"
#include "cuda/argmax.h"
#include "cuda/attention.h"
#include "cuda/gather.h"
#include "cuda/matmul.h"
#include "cuda/pointwise.h"
#include "cuda/qkv.h"
#include "cuda/rmsnorm.h"
#include "cuda/sample.h"
#include "cuda/walk.h"
#include "util/err.h"
#include <math.h>
#include <stdint.h>

/* An argument error of an op: message in b->err, a recording in progress dropped. */
#define BAD(c, st, ...) (cu_abandon(c), cu_errf((c), &(c)->b.err, (st), __VA_ARGS__))
#define OP_BEGIN(c) SD_TRY(cu_op_begin(c))

static int fdt(specdec_dtype dt) {
    switch (dt) {
    case SPECDEC_DTYPE_F32: return SDC_F32;
    case SPECDEC_DTYPE_F16: return SDC_F16;
    case SPECDEC_DTYPE_BF16: return SDC_BF16;
    default: return -1;
    }
}

static int kvdt(sd_kv_dtype_e dt) {
    switch (dt) {
    case SD_KV_F32: return SDC_F32;
    case SD_KV_BF16: return SDC_BF16;
    case SD_KV_F16: return SDC_F16;
    default: return -1;
    }
}

static bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* W's kernel format and layout checks shared by matmul and lm_argmax. */
static specdec_status mm_params(cuda_be *c, const char *op, const sd_mat *W, const float *x, int ldx, int T,
                                sdc_mm_params *p) {
    if (!W || !W->w || !x) return BAD(c, SPECDEC_ERR_INVALID_ARG, "%s: NULL weight or input", op);
    if (W->rows <= 0 || W->cols <= 0 || T < 0 || ldx < W->cols)
        return BAD(c, SPECDEC_ERR_INVALID_ARG, "%s: bad shape (rows %d, cols %d, T %d, ldx %d)", op, W->rows, W->cols, T,
                   ldx);
    *p = (sdc_mm_params){0};
    p->w = W->w;
    p->rows = W->rows;
    p->cols = W->cols;
    p->x = x;
    p->ldx = ldx;
    p->xvec = aligned16(x) && ldx % 4 == 0;
    p->T = T;
    if (W->bits == 0) {
        int dt = fdt(W->dtype);
        if (dt < 0) return BAD(c, SPECDEC_ERR_UNSUPPORTED, "%s: dense weights of dtype %s", op, specdec_dtype_name(W->dtype));
        p->fmt = dt == SDC_F32 ? SDC_MM_F32 : dt == SDC_F16 ? SDC_MM_F16 : SDC_MM_BF16;
        size_t rowbytes = (size_t)W->cols * (dt == SDC_F32 ? 4u : 2u);
        p->wvec = aligned16(W->w) && rowbytes % 16 == 0;
        return SPECDEC_OK;
    }
    if (W->bits != 4 && W->bits != 8)
        return BAD(c, SPECDEC_ERR_UNSUPPORTED, "%s: %d-bit weights (4 and 8 are supported)", op, W->bits);
    if (W->group != 32 && W->group != 64 && W->group != 128)
        return BAD(c, SPECDEC_ERR_UNSUPPORTED, "%s: quantization group %d (32, 64 and 128 are supported)", op, W->group);
    if (W->cols % W->group)
        return BAD(c, SPECDEC_ERR_INVALID_ARG, "%s: cols %d is not a multiple of the group %d", op, W->cols, W->group);
    if (!W->scales || !W->biases) return BAD(c, SPECDEC_ERR_INVALID_ARG, "%s: quantized weights without scales/biases", op);
    p->sdt = fdt(W->dtype);
    if (p->sdt < 0) return BAD(c, SPECDEC_ERR_UNSUPPORTED, "%s: scales of dtype %s", op, specdec_dtype_name(W->dtype));
    if (c->i8 && sd_i8_applies(W)) p->fmt = W->bits == 4 ? SDC_MM_Q4I : SDC_MM_Q8I;
    else p->fmt = W->bits == 4 ? SDC_MM_Q4 : SDC_MM_Q8;
    p->scales = W->scales;
    p->biases = W->biases;
    p->group = W->group;
    p->wvec = aligned16(W->w);   /* rows are whole 16-byte chunks: cols is a multiple of 32 */
    if (((uintptr_t)W->w & 3u) != 0) return BAD(c, SPECDEC_ERR_INVALID_ARG, "%s: u32 codes not 4-byte aligned", op);
    return SPECDEC_OK;
}

/* The int8 formats' scratch for T tokens (the quantized x; reserve() sizes it ahead of recordings). */
static specdec_status i8_scratch(cuda_be *c, sdc_mm_params *p, int T) {
    if (!sdc_mm_i8(p->fmt)) return SPECDEC_OK;
    p->ncp = sdc_mm_ncp(p->fmt, p->cols);
    SD_TRY(cu_scratch(c, &c->i8x, sdc_mm_i8_xq_bytes(p->fmt, p->cols, T), "int8 activations", &c->b.err));
    SD_TRY(cu_scratch(c, &c->i8s, sdc_mm_i8_xsd_bytes(p->fmt, p->cols, T), "int8 block scales", &c->b.err));
    p->xq = c->i8x.p;
    p->xsd = c->i8s.p;
    return SPECDEC_OK;
}

specdec_status cu_embed(sd_backend *b, const sd_mat *E, const int32_t *ids, int T, float *x, int ldx) {
    cuda_be *c = cu_of(b);
    OP_BEGIN(c);
    if (!E || !E->w || !ids || !x) return BAD(c, SPECDEC_ERR_INVALID_ARG, "embed: NULL argument");
    if (T < 0 || E->rows <= 0 || E->cols <= 0 || ldx < E->cols)
        return BAD(c, SPECDEC_ERR_INVALID_ARG, "embed: bad shape (rows %d, cols %d, T %d, ldx %d)", E->rows, E->cols, T, ldx);
    sdc_embed_params p = {0};
    p.w = E->w;
    p.dt = fdt(E->dtype);
    if (p.dt < 0) return BAD(c, SPECDEC_ERR_UNSUPPORTED, "embed: dtype %s", specdec_dtype_name(E->dtype));
    if (E->bits) {
        if ((E->bits != 4 && E->bits != 8) || (E->group != 32 && E->group != 64 && E->group != 128) ||
            E->cols % E->group || !E->scales || !E->biases)
            return BAD(c, SPECDEC_ERR_UNSUPPORTED, "embed: quantization %d-bit group %d over %d columns", E->bits, E->group,
                       E->cols);
        p.scales = E->scales;
        p.biases = E->biases;
        p.bits = E->bits;
        p.group = E->group;
    }
    p.rows = E->rows;
    p.cols = E->cols;
    p.ids = ids;
    p.T = T;
    p.x = x;
    p.ldx = ldx;
    return cu_op_end(c, sdc_embed(&p, &c->dev), "embed");
}

/* y = x W^T, or (acc) y += x W^T with each value y + the matmul's (matmul, then add). */
static specdec_status mm_one(sd_backend *b, const char *op, const sd_mat *W, const float *x, int ldx, float *y, int ldy,
                             int T, int acc) {
    cuda_be *c = cu_of(b);
    OP_BEGIN(c);
    sdc_mm_params p;
    SD_TRY(mm_params(c, op, W, x, ldx, T, &p));
    if (!y || ldy < W->rows) return BAD(c, SPECDEC_ERR_INVALID_ARG, "%s: NULL output or ldy %d < rows %d", op, ldy, W->rows);
    p.y = y;
    p.ldy = ldy;
    p.acc = acc;
    SD_TRY(i8_scratch(c, &p, T));
    return cu_op_end(c, sdc_matmul(&p, &c->dev), op);
}

specdec_status cu_matmul(sd_backend *b, const sd_mat *W, const float *x, int ldx, float *y, int ldy, int T) {
    return mm_one(b, "matmul", W, x, ldx, y, ldy, T, 0);
}

specdec_status cu_matmul_add(sd_backend *b, const sd_mat *W, const float *x, int ldx, float *y, int ldy, int T) {
    return mm_one(b, "matmul_add", W, x, ldx, y, ldy, T, 1);
}

/* Matrices over the same x as one launch's parameters: *joined when they lie end to end in
 * memory (sd_be_upload_mats) with the same format, columns, group and scale dtype (f, their rows
 * stored into their outputs), else p[i] one per matrix. A row's arithmetic is the same either way
 * (mm_core.cuh: it depends on the columns and the format only). */
static specdec_status mm_join(cuda_be *c, const char *op, int n, const sd_mat *const *W, const float *x, int ldx,
                              float *const *y, const int *ldy, int T, sdc_mm_params *p, sdc_mm_params *f,
                              bool *joined) {
    if (n < 1 || n > SDC_MM_SEGS || !W || !y || !ldy)
        return BAD(c, SPECDEC_ERR_INVALID_ARG, "%s: %d matrices (1..%d) or NULL lists", op, n, SDC_MM_SEGS);
    bool fuse = true;
    for (int i = 0; i < n; i++) {
        SD_TRY(mm_params(c, op, W[i], x, ldx, T, &p[i]));
        if (!y[i] || ldy[i] < W[i]->rows)
            return BAD(c, SPECDEC_ERR_INVALID_ARG, "%s (%d of %d): NULL output or ldy %d < rows %d", op, i + 1, n, ldy[i],
                       W[i]->rows);
        p[i].y = y[i];
        p[i].ldy = ldy[i];
        if (i == 0) continue;
        const sd_mat *A = W[i - 1], *B = W[i];
        if (p[i].fmt != p[0].fmt || p[i].cols != p[0].cols || p[i].group != p[0].group || p[i].sdt != p[0].sdt ||
            p[i].wvec != p[0].wvec || (const char *)B->w != (const char *)A->w + sd_mat_wbytes(A))
            fuse = false;
        else if (B->bits && ((const char *)B->scales != (const char *)A->scales + sd_mat_sbytes(A) ||
                             (const char *)B->biases != (const char *)A->biases + sd_mat_sbytes(A)))
            fuse = false;
    }
    *f = p[0];
    if (fuse && n > 1) {
        f->nseg = n;
        for (int i = 1; i < n; i++) {
            f->seg[i] = (sdc_mm_seg){p[i].y, p[i].ldy, f->rows};
            f->rows += p[i].rows;
        }
    }
    *joined = fuse;
    return SPECDEC_OK;
}

/* mm_join's result launched: one launch (and one int8 preparation) when joined, one each
 * otherwise. */
static specdec_status mm_run(cuda_be *c, int n, sdc_mm_params *p, sdc_mm_params *f, bool joined, int T) {
    if (!joined) {
        for (int i = 0; i < n; i++) {
            SD_TRY(i8_scratch(c, &p[i], T));
            SD_TRY(cu_op_end(c, sdc_matmul(&p[i], &c->dev), "matmul"));
        }
        return SPECDEC_OK;
    }
    SD_TRY(i8_scratch(c, f, T));
    return cu_op_end(c, sdc_matmul(f, &c->dev), "matmul");
}

/* A joined int8 launch's parameters f with the RMSNorm applied by its preparation kernel: x
 * (T, ldx) normed by w into xn (T, ldxn), then quantized. */
static void norm_pre(sdc_mm_params *f, const float *x, int ldx, const float *w, float eps, float *xn, int ldxn) {
    f->x = x;
    f->ldx = ldx;
    f->xvec = aligned16(x) && ldx % 4 == 0;
    f->pre = SDC_PRE_RMSNORM;
    f->pre_w = w;
    f->pre_eps = eps;
    f->pre_out = xn;
    f->pre_ld = ldxn;
}

/* Matrices over the same x: one launch when mm_join joins them, one launch each otherwise. */
specdec_status cu_matmul_n(sd_backend *b, int n, const sd_mat *const *W, const float *x, int ldx, float *const *y,
                           const int *ldy, int T) {
    cuda_be *c = cu_of(b);
    OP_BEGIN(c);
    sdc_mm_params p[SDC_MM_SEGS], f;
    bool joined;
    SD_TRY(mm_join(c, "matmul_n", n, W, x, ldx, y, ldy, T, p, &f, &joined));
    return mm_run(c, n, p, &f, joined, T);
}

/* rmsnorm then matmul_n. Where the matrices join into one int8 launch, its preparation kernel
 * norms x itself (rms_core.cuh: the bits rmsnorm.cu gives), writing xn as rmsnorm would and
 * quantizing it: one launch fewer. Else rmsnorm, then matmul_n. */
specdec_status cu_norm_matmul_n(sd_backend *b, const float *w, float eps, const float *x, int ldx, float *xn,
                                int ldxn, int n, const sd_mat *const *W, float *const *y, const int *ldy, int T) {
    cuda_be *c = cu_of(b);
    OP_BEGIN(c);
    if (!w || !x || !xn || n < 1 || !W || !W[0]) return BAD(c, SPECDEC_ERR_INVALID_ARG, "norm_matmul_n: NULL argument");
    const int cols = W[0]->cols;
    if (T < 0 || ldx < cols || ldxn < cols || (xn == x && ldxn != ldx))
        return BAD(c, SPECDEC_ERR_INVALID_ARG, "norm_matmul_n: bad shape (cols %d, T %d, ldx %d, ldxn %d)", cols, T, ldx,
                   ldxn);
    sdc_mm_params p[SDC_MM_SEGS], f;
    bool joined;
    SD_TRY(mm_join(c, "norm_matmul_n", n, W, xn, ldxn, y, ldy, T, p, &f, &joined));
    if (!joined || !sdc_mm_i8(f.fmt)) {   /* the parameters already read x from xn */
        SD_TRY(cu_op_end(c, sdc_rmsnorm(xn, ldxn, x, ldx, w, cols, T, eps, &c->dev), "rmsnorm"));
        return mm_run(c, n, p, &f, joined, T);
    }
    norm_pre(&f, x, ldx, w, eps, xn, ldxn);
    SD_TRY(i8_scratch(c, &f, T));
    return cu_op_end(c, sdc_matmul(&f, &c->dev), "norm_matmul_n");
}

/* silu_mul, then matmul_add over g; for an int8 W the preparation kernel applies silu(g) * u
 * itself (pointwise.cu's expression), writing g as silu_mul would: one launch fewer. */
specdec_status cu_swiglu_matmul_add(sd_backend *b, const sd_mat *W, float *g, const float *u, float *y, int ldy, int T) {
    cuda_be *c = cu_of(b);
    OP_BEGIN(c);
    if (!g || !u) return BAD(c, SPECDEC_ERR_INVALID_ARG, "swiglu_matmul_add: NULL argument");
    sdc_mm_params p;
    SD_TRY(mm_params(c, "swiglu_matmul_add", W, g, W ? W->cols : 0, T, &p));
    if (!y || ldy < W->rows)
        return BAD(c, SPECDEC_ERR_INVALID_ARG, "swiglu_matmul_add: NULL output or ldy %d < rows %d", ldy, W->rows);
    p.y = y;
    p.ldy = ldy;
    p.acc = 1;
    if (sdc_mm_i8(p.fmt)) {
        p.pre = SDC_PRE_SWIGLU;
        p.pre_u = u;
        p.pre_out = g;
        p.pre_ld = W->cols;
    } else {
        SD_TRY(cu_op_end(c, sdc_silu_mul(g, u, (size_t)W->cols * (size_t)T, &c->dev), "silu_mul"));
    }
    SD_TRY(i8_scratch(c, &p, T));
    return cu_op_end(c, sdc_matmul(&p, &c->dev), "swiglu_matmul_add");
}

/* norm_matmul_n over gate and up, then swiglu_matmul_add over down. At int8, where the shapes
 * allow (sdc_mlp), in three launches: the norm preparation, gate and up with the SwiGLU and
 * down's int8 preparation in their epilogue, and down; the same bits (matmul.h). Else the two
 * ops. */
specdec_status cu_norm_mlp_add(sd_backend *b, const float *w, float eps, float *x, int ldx, float *xn, int ldxn,
                               const sd_mat *gate, const sd_mat *up, const sd_mat *down, float *g, float *u, int T) {
    cuda_be *c = cu_of(b);
    OP_BEGIN(c);
    if (!w || !x || !xn || !gate || !up || !down || !g || !u) return BAD(c, SPECDEC_ERR_INVALID_ARG, "norm_mlp_add: NULL argument");
    const int I = gate->rows, cols = gate->cols;
    if (up->rows != I || up->cols != cols || down->cols != I || T < 0 || ldx < down->rows || ldx < cols || ldxn < cols ||
        (xn == x && ldxn != ldx))
        return BAD(c, SPECDEC_ERR_INVALID_ARG,
                   "norm_mlp_add: bad shape (gate %d x %d, up %d x %d, down %d x %d, T %d, ldx %d, ldxn %d)", I, cols,
                   up->rows, up->cols, down->rows, down->cols, T, ldx, ldxn);
    const sd_mat *W[2] = {gate, up};
    float *y[2] = {g, u};
    const int ld[2] = {I, I};
    if (c->i8 && T >= 1 && xn != x) {
        sdc_mm_params p[2], f, dp;
        bool joined;
        SD_TRY(mm_join(c, "norm_mlp_add", 2, W, xn, ldxn, y, ld, T, p, &f, &joined));
        SD_TRY(mm_params(c, "norm_mlp_add", down, g, I, T, &dp));
        const size_t xqb = sdc_mm_i8_xq_bytes(SDC_MM_Q4I, I, T), xsb = sdc_mm_i8_xsd_bytes(SDC_MM_Q4I, I, T);
        const bool q4 = joined && f.fmt == SDC_MM_Q4I && dp.fmt == SDC_MM_Q4I;
        if (q4 && T <= 8 && !c->capturing) {   /* reserve() sizes it ahead of recordings */
            SD_TRY(cu_scratch(c, &c->i8x2, xqb, "int8 MLP activations", &b->err));
            SD_TRY(cu_scratch(c, &c->i8s2, xsb, "int8 MLP block scales", &b->err));
        }
        if (q4 && c->i8x2.cap >= xqb && c->i8s2.cap >= xsb) {
            norm_pre(&f, x, ldx, w, eps, xn, ldxn);
            SD_TRY(i8_scratch(c, &f, T));
            dp.y = x;
            dp.ldy = ldx;
            dp.acc = 1;
            int taken = 0;
            const cudaError_t e = sdc_mlp(&f, &dp, c->i8x2.p, c->i8s2.p, &c->dev, &taken);
            if (e != cudaSuccess || taken) return cu_op_end(c, e, "norm_mlp_add");
        }
    }
    SD_TRY(cu_norm_matmul_n(b, w, eps, x, ldx, xn, ldxn, 2, W, y, ld, T));
    return cu_swiglu_matmul_add(b, down, g, u, x, ldx, T);
}

specdec_status cu_qk_norm_rope_store(sd_backend *b, const sd_attn_shape *s, const sd_kv_layer *kv, float *q, float *k,
                                     const float *v, const float *qw, const float *kw, float eps, int T, sd_pos pos,
                                     const float *cos_t, const float *sin_t) {
    cuda_be *c = cu_of(b);
    OP_BEGIN(c);
    if (!s || !kv || !kv->k || !kv->v || !q || !k || !v || !qw || !kw || !pos.base || !cos_t || !sin_t)
        return BAD(c, SPECDEC_ERR_INVALID_ARG, "qk_norm_rope_store: NULL argument");
    if (T < 0 || s->n_heads <= 0 || s->n_kv_heads <= 0 || s->head_dim < 2 || s->head_dim % 2 ||
        s->head_dim > SDC_QKV_MAX_HD)
        return BAD(c, SPECDEC_ERR_UNSUPPORTED, "qk_norm_rope_store: shape (heads %d, kv heads %d, head_dim %d; even, up to %d)",
                   s->n_heads, s->n_kv_heads, s->head_dim, SDC_QKV_MAX_HD);
    const int kd = kvdt(s->kv_dtype);
    if (kd < 0) return BAD(c, SPECDEC_ERR_UNSUPPORTED, "qk_norm_rope_store: KV dtype %d", (int)s->kv_dtype);
    sdc_qkv_params p = {.q = q, .k = k, .v = v, .qw = qw, .kw = kw, .eps = eps, .T = T, .nh = s->n_heads,
                        .nkv = s->n_kv_heads, .hd = s->head_dim, .pos_base = pos.base, .pos_off = pos.off,
                        .cos_t = cos_t, .sin_t = sin_t, .kv_dt = kd, .kc = kv->k, .vc = kv->v};
    return cu_op_end(c, sdc_qk_norm_rope_store(&p, &c->dev), "qk_norm_rope_store");
}

specdec_status cu_lm_argmax(sd_backend *b, const sd_mat *W, const float *x, int ldx, int T, const int32_t *map,
                            int32_t *out) {
    cuda_be *c = cu_of(b);
    OP_BEGIN(c);
    sdc_mm_params p;
    SD_TRY(mm_params(c, "lm_argmax", W, x, ldx, T, &p));
    if (!out) return BAD(c, SPECDEC_ERR_INVALID_ARG, "lm_argmax: NULL output");
    p.map = map;
    SD_TRY(i8_scratch(c, &p, T < SDC_LMA_MAX_T ? T : SDC_LMA_MAX_T));
    /* at most SDC_LMA_MAX_T tokens per launch (their per-warp bests live in shared memory) */
    for (int t0 = 0; t0 < T; t0 += SDC_LMA_MAX_T) {
        p.T = T - t0 < SDC_LMA_MAX_T ? T - t0 : SDC_LMA_MAX_T;
        p.x = x + (size_t)t0 * (size_t)ldx;
        p.xvec = aligned16(p.x) && ldx % 4 == 0;
        p.out = out + t0;
        int grid = sdc_lm_argmax_grid(&p, &c->dev);
        if (grid < 1) return BAD(c, SPECDEC_ERR_INTERNAL, "lm_argmax: no launch plan for %d x %d, T %d", W->rows, W->cols, p.T);
        SD_TRY(cu_scratch(c, &c->lma, (size_t)p.T * (size_t)grid * sizeof(sdc_best), "fused LM head", &b->err));
        p.part = (sdc_best *)c->lma.p;
        cudaError_t e = sdc_lm_argmax(&p, &c->dev);
        if (e != cudaSuccess) return cu_op_end(c, e, "lm_argmax");
    }
    return cu_op_end(c, cudaSuccess, "lm_argmax");
}

specdec_status cu_rmsnorm(sd_backend *b, float *out, int ldo, const float *x, int ldx, const float *w, int n, int T,
                          float eps) {
    cuda_be *c = cu_of(b);
    OP_BEGIN(c);
    if (!out || !x || !w) return BAD(c, SPECDEC_ERR_INVALID_ARG, "rmsnorm: NULL argument");
    if (n <= 0 || T < 0 || ldo < n || ldx < n || (out == x && ldo != ldx))
        return BAD(c, SPECDEC_ERR_INVALID_ARG, "rmsnorm: bad shape (n %d, T %d, ldo %d, ldx %d)", n, T, ldo, ldx);
    return cu_op_end(c, sdc_rmsnorm(out, ldo, x, ldx, w, n, T, eps, &c->dev), "rmsnorm");
}

specdec_status cu_rope(sd_backend *b, float *x, int T, int n_heads, int hd, sd_pos pos, const float *cos_t,
                       const float *sin_t) {
    cuda_be *c = cu_of(b);
    OP_BEGIN(c);
    if (!x || !pos.base || !cos_t || !sin_t) return BAD(c, SPECDEC_ERR_INVALID_ARG, "rope: NULL argument");
    if (T < 0 || n_heads <= 0 || hd <= 0 || hd % 2)
        return BAD(c, SPECDEC_ERR_INVALID_ARG, "rope: bad shape (T %d, heads %d, head_dim %d)", T, n_heads, hd);
    return cu_op_end(c, sdc_rope(x, T, n_heads, hd, pos.base, pos.off, cos_t, sin_t, &c->dev), "rope");
}

specdec_status cu_silu_mul(sd_backend *b, float *g, const float *u, int n, int T) {
    cuda_be *c = cu_of(b);
    OP_BEGIN(c);
    if (!g || !u || n < 0 || T < 0) return BAD(c, SPECDEC_ERR_INVALID_ARG, "silu_mul: bad argument (n %d, T %d)", n, T);
    return cu_op_end(c, sdc_silu_mul(g, u, (size_t)n * (size_t)T, &c->dev), "silu_mul");
}

specdec_status cu_add(sd_backend *b, float *x, const float *y, size_t n) {
    cuda_be *c = cu_of(b);
    OP_BEGIN(c);
    if (!x || !y) return BAD(c, SPECDEC_ERR_INVALID_ARG, "add: NULL argument");
    return cu_op_end(c, sdc_add(x, y, n, &c->dev), "add");
}

specdec_status cu_kv_store(sd_backend *b, sd_kv_dtype_e dt, void *cache, int row_elems, const float *src, int T,
                           sd_pos pos) {
    cuda_be *c = cu_of(b);
    OP_BEGIN(c);
    int kd = kvdt(dt);
    if (kd < 0) return BAD(c, SPECDEC_ERR_UNSUPPORTED, "kv_store: KV dtype %d", (int)dt);
    if (!cache || !src || !pos.base || row_elems <= 0 || T < 0)
        return BAD(c, SPECDEC_ERR_INVALID_ARG, "kv_store: bad argument (row_elems %d, T %d)", row_elems, T);
    return cu_op_end(c, sdc_kv_store(kd, cache, row_elems, src, T, pos.base, pos.off, &c->dev), "kv_store");
}

/* The attention parameters of a call, its scratch reserved; the shape checked (NULL argument:
 * the caller's). */
static specdec_status attn_params(cuda_be *c, const sd_attn_shape *s, const sd_kv_layer *kv, const float *q, float *out,
                                 int T, sd_pos pos, sdc_attn_params *p) {
    sd_backend *b = &c->b;
    if (T < 0 || s->n_heads <= 0 || s->n_kv_heads <= 0 || s->n_heads % s->n_kv_heads)
        return BAD(c, SPECDEC_ERR_INVALID_ARG, "attention: %d heads over %d kv heads", s->n_heads, s->n_kv_heads);
    if (s->head_dim <= 0 || s->head_dim % 16 || s->head_dim > SDC_ATTN_MAX_HD)
        return BAD(c, SPECDEC_ERR_UNSUPPORTED, "attention: head_dim %d (a multiple of 16 up to %d)", s->head_dim,
                   SDC_ATTN_MAX_HD);
    int kd = kvdt(s->kv_dtype);
    if (kd < 0) return BAD(c, SPECDEC_ERR_UNSUPPORTED, "attention: KV dtype %d", (int)s->kv_dtype);
    *p = (sdc_attn_params){0};
    if (T == 0) return SPECDEC_OK;
    size_t floats = sdc_attn_scratch_floats(T, s->n_heads, s->head_dim);
    SD_TRY(cu_scratch(c, &c->attn, floats * sizeof(float), "attention", &b->err));
    SD_TRY(cu_scratch(c, &c->attn_cnt, (size_t)T * (size_t)s->n_heads * sizeof(int), "attention counters", &b->err));
    p->q = q;
    p->out = out;
    p->k = kv->k;
    p->v = kv->v;
    p->kvdt = kd;
    p->nh = s->n_heads;
    p->nkv = s->n_kv_heads;
    p->hd = s->head_dim;
    p->T = T;
    p->pos_base = pos.base;
    p->pos_off = pos.off;
    p->scale = 1.0f / sqrtf((float)s->head_dim);   /* as the CPU computes it */
    p->part_o = (float *)c->attn.p;
    p->part_ml = p->part_o + (size_t)T * (size_t)s->n_heads * SDC_ATTN_SPLITS * (size_t)s->head_dim;
    p->count = (int *)c->attn_cnt.p;   /* zeros: cu_scratch clears a new buffer, each staged call leaves them so */
    return SPECDEC_OK;
}

specdec_status cu_attention(sd_backend *b, const sd_attn_shape *s, const sd_kv_layer *kv, const float *q, float *out,
                            int T, sd_pos pos) {
    cuda_be *c = cu_of(b);
    OP_BEGIN(c);
    if (!s || !kv || !kv->k || !kv->v || !q || !out || !pos.base)
        return BAD(c, SPECDEC_ERR_INVALID_ARG, "attention: NULL argument");
    sdc_attn_params p;
    SD_TRY(attn_params(c, s, kv, q, out, T, pos, &p));
    if (T == 0) return SPECDEC_OK;
    return cu_op_end(c, sdc_attention(&p, &c->dev), "attention");
}

/* One launch where attention.h's fused form applies (the staged kernel norms and rotates the
 * heads itself), else qk_norm_rope_store's launch and attention's. */
specdec_status cu_qk_norm_rope_attention(sd_backend *b, const sd_attn_shape *s, const sd_kv_layer *kv, float *q,
                                         float *k, const float *v, const float *qw, const float *kw, float eps, int T,
                                         sd_pos pos, const float *cos_t, const float *sin_t, float *out) {
    cuda_be *c = cu_of(b);
    OP_BEGIN(c);
    if (!s || !kv || !kv->k || !kv->v || !q || !k || !v || !qw || !kw || !pos.base || !cos_t || !sin_t || !out)
        return BAD(c, SPECDEC_ERR_INVALID_ARG, "qk_norm_rope_attention: NULL argument");
    if (T > 0 && T <= SDC_ATTN_FUSE_T && s->head_dim <= SDC_QKV_MAX_HD) {
        sdc_attn_params p;
        SD_TRY(attn_params(c, s, kv, q, out, T, pos, &p));
        const sdc_attn_fuse f = {.k = k, .v = v, .qw = qw, .kw = kw, .cos_t = cos_t, .sin_t = sin_t, .eps = eps,
                                 .kc = kv->k, .vc = kv->v};
        const cudaError_t e = sdc_attention_fused(&p, &f, &c->dev);
        if (e != cudaErrorNotSupported) return cu_op_end(c, e, "qk_norm_rope_attention");
    }
    SD_TRY(cu_qk_norm_rope_store(b, s, kv, q, k, v, qw, kw, eps, T, pos, cos_t, sin_t));
    return cu_attention(b, s, kv, q, out, T, pos);
}

specdec_status cu_argmax(sd_backend *b, const float *logits, int n, int T, const int32_t *map, int32_t *out) {
    cuda_be *c = cu_of(b);
    OP_BEGIN(c);
    if (!logits || !out || n <= 0 || T < 0)
        return BAD(c, SPECDEC_ERR_INVALID_ARG, "argmax: bad argument (n %d, T %d)", n, T);
    if (T == 0) return SPECDEC_OK;
    if (sdc_argmax_blocks(n) > 1) SD_TRY(cu_scratch(c, &c->rowpart, cu_rowpart_bytes(T, n), "argmax/sampler", &b->err));
    return cu_op_end(c, sdc_argmax(logits, n, T, map, (sdc_best *)c->rowpart.p, out, &c->dev), "argmax");
}

specdec_status cu_sample(sd_backend *b, const specdec_sampling_params *sp, const float *logits, int n, int vocab,
                         const int32_t *map, int T, sd_pos pos, int32_t *out) {
    cuda_be *c = cu_of(b);
    OP_BEGIN(c);
    if (!sp || !logits || !out || !pos.base || n <= 0 || T < 0)
        return BAD(c, SPECDEC_ERR_INVALID_ARG, "sample: bad argument (n %d, T %d)", n, T);
    const int V = map ? vocab : n;   /* the row sd_sample sees: scattered over the vocabulary, or as is */
    if (map && (vocab < n || vocab > sdc_sample_max_mapped_vocab()))
        return BAD(c, SPECDEC_ERR_UNSUPPORTED, "sample: %d mapped entries over a vocabulary of %d (at most %d)", n, vocab,
                   sdc_sample_max_mapped_vocab());
    const bool greedy = !(sp->temperature > 0);
    const bool filtered = (sp->top_k > 0 && sp->top_k < V) || sp->top_p < 1.0f || sp->min_p > 0;
    if (!greedy && filtered)
        return BAD(c, SPECDEC_ERR_UNSUPPORTED,
                   "sample: top-k / top-p / min-p run on the host (supports(SD_OP_SAMPLE, filtered) is false)");
    if (T == 0) return SPECDEC_OK;
    SD_TRY(cu_scratch(c, &c->rowpart, cu_rowpart_bytes(T, n), "argmax/sampler", &b->err));
    const size_t nb = (size_t)sdc_sample_blocks(n);
    sdc_sample_params p = {0};
    p.logits = logits;
    p.n = n;
    p.vocab = V;
    p.map = map;
    p.T = T;
    p.pos_base = pos.base;
    p.pos_off = pos.off;
    p.temp = (double)sp->temperature;
    p.greedy = greedy;
    p.seed = sp->seed;
    p.part_a = (sdc_best *)c->rowpart.p;
    /* part_b after part_a, 16-byte aligned */
    uintptr_t pb = (uintptr_t)(p.part_a + (size_t)T * nb);
    p.part_b = (sdc_dbest *)((pb + 15u) & ~(uintptr_t)15u);
    p.out = out;
    return cu_op_end(c, sdc_sample(&p, &c->dev), "sample");
}

specdec_status cu_walk(sd_backend *b, int32_t *blk, int nd, const int32_t *choice, int32_t *emit, int32_t *pos,
                       int32_t *pos_prev) {
    cuda_be *c = cu_of(b);
    OP_BEGIN(c);
    if (!blk || !choice || !emit || !pos || !pos_prev || nd < 0)
        return BAD(c, SPECDEC_ERR_INVALID_ARG, "walk: bad argument (nd %d)", nd);
    return cu_op_end(c, sdc_walk(blk, nd, choice, emit, pos, pos_prev, &c->dev), "walk");
}

specdec_status cu_copy_row(sd_backend *b, float *dst, const float *src, int ld, int n, const int32_t *idx, int off) {
    cuda_be *c = cu_of(b);
    OP_BEGIN(c);
    if (!dst || !src || !idx || n < 0 || ld < n)
        return BAD(c, SPECDEC_ERR_INVALID_ARG, "copy_row: bad argument (n %d, ld %d)", n, ld);
    return cu_op_end(c, sdc_copy_row(dst, src, ld, n, idx, off, &c->dev), "copy_row");
}
