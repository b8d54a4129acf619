/* backend.c: the backends built into this binary, chosen by name, and the helpers every caller
 * of the interface shares (weight-matrix upload, host views of results). */
#include "backend/backend.h"
#include "util/err.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SPECDEC_HAVE_CUDA
#define NAMES "cpu, cuda, cpu-sim"
#else
#define NAMES "cpu, cpu-sim"
#endif

const char *sd_backend_names(void) { return NAMES; }
const char *specdec_backends(void) { return NAMES; }

#ifndef SPECDEC_HAVE_CUDA
specdec_status sd_backend_cuda_new(const sd_backend_opts *o, sd_backend **out, specdec_err *err) {
    (void)o;
    *out = NULL;
    return sd_fail(err, SPECDEC_ERR_UNSUPPORTED, "backend 'cuda': not built into this binary (backends: " NAMES ")");
}
bool sd_backend_cuda_available(void) { return false; }
#endif

specdec_status sd_backend_create(const char *name, const sd_backend_opts *o, sd_backend **out, specdec_err *err) {
    sd_backend_opts def;
    memset(&def, 0, sizeof def);
    if (!o) o = &def;
    if (!out) return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "sd_backend_create: NULL out");
    *out = NULL;
    if (!name || !*name || !strcmp(name, "auto")) {
        /* auto: the GPU when one is present (and not asked for the CPU reference ops) */
        if (!o->reference && sd_backend_cuda_available()) return sd_backend_cuda_new(o, out, err);
        return sd_backend_cpu_new(o, out, err);
    }
    if (!strcmp(name, "cpu")) return sd_backend_cpu_new(o, out, err);
    if (!strcmp(name, "cpu-sim")) return sd_backend_sim_new(o, out, err);
    if (!strcmp(name, "cuda")) {
        if (o->reference)
            return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "the scalar reference ops are a CPU backend mode (backend 'cpu')");
        return sd_backend_cuda_new(o, out, err);
    }
    return sd_fail(err, SPECDEC_ERR_INVALID_ARG, "unknown backend '%s' (backends: auto, " NAMES ")", name);
}

specdec_status specdec_backend_describe(const char *name, int n_threads, int device, char *buf, size_t n,
                                        specdec_err *err) {
    sd_backend_opts o = {.n_threads = n_threads, .device = device};
    sd_backend *b = NULL;
    SD_TRY(sd_backend_create(name, &o, &b, err));
    if (b->n_threads) snprintf(buf, n, "%s (%s, %d threads)", b->name, b->i->kernels(b), b->n_threads);
    else snprintf(buf, n, "%s (%s)", b->name, b->i->kernels(b));
    sd_backend_free(b);
    return SPECDEC_OK;
}

void sd_backend_free(sd_backend *b) {
    if (b && b->i && b->i->free) b->i->free(b);
}

uint64_t sd_be_key(const char *site, const uint64_t *vals, int n) {
    uint64_t h = 1469598103934665603ull;
    for (const char *c = site; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 8; k++) h = (h ^ ((vals[i] >> (8 * k)) & 0xff)) * 1099511628211ull;
    return h;
}

bool sd_be_seq_begin(sd_backend *b, uint64_t key) { return b->i->seq_begin && b->i->seq_begin(b, key); }

specdec_status sd_be_seq_end(sd_backend *b, uint64_t key, specdec_err *err) {
    return b->i->seq_end ? b->i->seq_end(b, key, err) : SPECDEC_OK;
}

void sd_be_key_sampling(const specdec_sampling_params *p, uint64_t out[4]) {
    uint32_t t, tp, mp;
    memcpy(&t, &p->temperature, 4); memcpy(&tp, &p->top_p, 4); memcpy(&mp, &p->min_p, 4);
    out[0] = t; out[1] = p->seed; out[2] = (uint64_t)(uint32_t)p->top_k << 32 | tp; out[3] = mp;
}

bool sd_i8_applies(const sd_mat *W) {
    if (W->bits != 4 && W->bits != 8) return false;
    if (W->group < 64 || W->group % 64 != 0) return false;
    const int step = W->bits == 4 ? 128 : 64;
    return W->cols > 0 && W->cols % step == 0 && W->cols <= 32768;
}

specdec_status sd_be_upload_mat(sd_backend *b, const sd_mat *host, const char *name, sd_mat *dst, specdec_err *err) {
    *dst = *host;
    dst->w = dst->scales = dst->biases = NULL;
    dst->part = false;
    dst->pk = NULL;
    specdec_status st = b->i->upload(b, host->w, (size_t)sd_mat_wbytes(host), name, &dst->w, err);
    if (st == SPECDEC_OK && host->bits) {
        size_t sbytes = (size_t)sd_mat_sbytes(host);
        st = b->i->upload(b, host->scales, sbytes, name, &dst->scales, err);
        if (st == SPECDEC_OK) st = b->i->upload(b, host->biases, sbytes, name, &dst->biases, err);
    }
    if (st == SPECDEC_OK && b->i->prepare_mat) st = b->i->prepare_mat(b, dst, name, err);
    if (st != SPECDEC_OK) sd_be_unload_mat(b, dst);
    return st;
}

/* One tensor kind (0 codes, 1 scales, 2 biases) of n matrices concatenated into one upload. */
static specdec_status upload_joined(sd_backend *b, int n, const sd_mat *const *host, int kind, const char *name,
                                    const void **out, specdec_err *err) {
    size_t total = 0;
    for (int i = 0; i < n; i++) total += (size_t)(kind ? sd_mat_sbytes(host[i]) : sd_mat_wbytes(host[i]));
    unsigned char *buf = malloc(total ? total : 1);
    if (!buf) return sd_fail(err, SPECDEC_ERR_NOMEM, "out of host memory joining %s (%zu bytes)", name, total);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        const void *src = kind == 0 ? host[i]->w : kind == 1 ? host[i]->scales : host[i]->biases;
        size_t nb = (size_t)(kind ? sd_mat_sbytes(host[i]) : sd_mat_wbytes(host[i]));
        memcpy(buf + off, src, nb);
        off += nb;
    }
    specdec_status st = b->i->upload(b, buf, total, name, out, err);
    free(buf);
    return st;
}

specdec_status sd_be_upload_mats(sd_backend *b, int n, const sd_mat *const *host, const char *name, sd_mat *const *dst,
                                 specdec_err *err) {
    bool join = n > 1 && !b->host_visible;
    for (int i = 1; i < n && join; i++)
        join = host[i]->cols == host[0]->cols && host[i]->bits == host[0]->bits && host[i]->group == host[0]->group &&
               host[i]->dtype == host[0]->dtype;
    if (!join) {
        for (int i = 0; i < n; i++) {
            specdec_status st = sd_be_upload_mat(b, host[i], name, dst[i], err);
            if (st != SPECDEC_OK) {
                while (i-- > 0) sd_be_unload_mat(b, dst[i]);
                return st;
            }
        }
        return SPECDEC_OK;
    }
    const void *base[3] = {NULL, NULL, NULL};
    specdec_status st = SPECDEC_OK;
    for (int k = 0; k < (host[0]->bits ? 3 : 1) && st == SPECDEC_OK; k++)
        st = upload_joined(b, n, host, k, name, &base[k], err);
    if (st != SPECDEC_OK) {
        for (int k = 0; k < 3; k++)
            if (base[k]) b->i->unload(b, base[k]);
        for (int i = 0; i < n; i++) dst[i]->w = dst[i]->scales = dst[i]->biases = NULL;
        return st;
    }
    size_t ow = 0, os = 0;
    for (int i = 0; i < n; i++) {
        *dst[i] = *host[i];
        dst[i]->part = i > 0;
        dst[i]->pk = NULL;   /* joined uploads are for devices; no prepare_mat there */
        dst[i]->w = (const unsigned char *)base[0] + ow;
        dst[i]->scales = base[1] ? (const unsigned char *)base[1] + os : NULL;
        dst[i]->biases = base[2] ? (const unsigned char *)base[2] + os : NULL;
        ow += (size_t)sd_mat_wbytes(host[i]);
        os += (size_t)sd_mat_sbytes(host[i]);
    }
    for (int i = 0; i < n && b->i->prepare_mat; i++) {
        st = b->i->prepare_mat(b, dst[i], name, err);
        if (st != SPECDEC_OK) {
            for (int k = n; k-- > 0;) sd_be_unload_mat(b, dst[k]);   /* parts first, the owner last */
            return st;
        }
    }
    return SPECDEC_OK;
}

void sd_be_unload_mat(sd_backend *b, sd_mat *m) {
    if (!b || !m) return;
    if (m->pk && b->i->unprepare_mat) b->i->unprepare_mat(b, m);
    m->pk = NULL;
    if (!m->part) {   /* a part's buffers go with the first matrix of its upload */
        if (m->w) b->i->unload(b, m->w);
        if (m->scales) b->i->unload(b, m->scales);
        if (m->biases) b->i->unload(b, m->biases);
    }
    m->w = m->scales = m->biases = NULL;
    m->part = false;
}

specdec_status sd_be_upload_f32(sd_backend *b, const float *host, size_t n, const char *what, const float **out,
                                specdec_err *err) {
    const void *p = NULL;
    SD_TRY(b->i->upload(b, host, n * sizeof(float), what, &p, err));
    *out = (const float *)p;
    return SPECDEC_OK;
}

const void *sd_be_view(sd_backend *b, const void *p, void *tmp, size_t n, specdec_err *err) {
    if (b->host_visible) return p;
    if (b->i->read(b, tmp, p, n, err) != SPECDEC_OK) return NULL;
    return tmp;
}

specdec_status sd_be_write_i32(sd_backend *b, int32_t *dst, int32_t v, specdec_err *err) {
    return b->i->write(b, dst, &v, sizeof v, err);
}

specdec_status sd_be_matmul_n(sd_backend *b, int n, const sd_mat *const *W, const float *x, int ldx, float *const *y,
                              const int *ldy, int T) {
    if (n < 1 || n > SD_MATMUL_N_MAX)
        return sd_fail(&b->err, SPECDEC_ERR_INVALID_ARG, "matmul_n: %d matrices (1..%d)", n, SD_MATMUL_N_MAX);
    if (b->i->matmul_n) return b->i->matmul_n(b, n, W, x, ldx, y, ldy, T);
    for (int i = 0; i < n; i++) SD_TRY(b->i->matmul(b, W[i], x, ldx, y[i], ldy[i], T));
    return SPECDEC_OK;
}

specdec_status sd_be_norm_matmul_n(sd_backend *b, const float *w, float eps, const float *x, int ldx, float *xn,
                                   int ldxn, int n, const sd_mat *const *W, float *const *y, const int *ldy, int T) {
    if (n < 1 || n > SD_MATMUL_N_MAX || !W || !W[0])
        return sd_fail(&b->err, SPECDEC_ERR_INVALID_ARG, "norm_matmul_n: %d matrices (1..%d)", n, SD_MATMUL_N_MAX);
    if (b->i->norm_matmul_n) return b->i->norm_matmul_n(b, w, eps, x, ldx, xn, ldxn, n, W, y, ldy, T);
    SD_TRY(b->i->rmsnorm(b, xn, ldxn, x, ldx, w, W[0]->cols, T, eps));
    return sd_be_matmul_n(b, n, W, xn, ldxn, y, ldy, T);
}

/* y += tmp row by row (one add over the whole block when the rows are contiguous) */
static specdec_status add_rows(sd_backend *b, float *y, int ldy, const float *tmp, int rows, int T) {
    if (ldy == rows) return b->i->add(b, y, tmp, (size_t)T * (size_t)rows);
    for (int t = 0; t < T; t++) SD_TRY(b->i->add(b, y + (size_t)t * ldy, tmp + (size_t)t * ldy, (size_t)rows));
    return SPECDEC_OK;
}

specdec_status sd_be_matmul_add(sd_backend *b, const sd_mat *W, const float *x, int ldx, float *y, int ldy, int T,
                                float *tmp) {
    if (b->i->matmul_add) return b->i->matmul_add(b, W, x, ldx, y, ldy, T);
    if (!W || !tmp) return sd_fail(&b->err, SPECDEC_ERR_INVALID_ARG, "matmul_add: NULL weight or scratch");
    SD_TRY(b->i->matmul(b, W, x, ldx, tmp, ldy, T));
    return add_rows(b, y, ldy, tmp, W->rows, T);
}

specdec_status sd_be_swiglu_matmul_add(sd_backend *b, const sd_mat *W, float *g, const float *u, float *y, int ldy,
                                       int T, float *tmp) {
    if (b->i->swiglu_matmul_add) return b->i->swiglu_matmul_add(b, W, g, u, y, ldy, T);
    if (!W || !tmp) return sd_fail(&b->err, SPECDEC_ERR_INVALID_ARG, "swiglu_matmul_add: NULL weight or scratch");
    SD_TRY(b->i->silu_mul(b, g, u, W->cols, T));
    SD_TRY(b->i->matmul(b, W, g, W->cols, tmp, ldy, T));
    return add_rows(b, y, ldy, tmp, W->rows, T);
}

specdec_status sd_be_norm_mlp_add(sd_backend *b, const float *w, float eps, float *x, int ldx, float *xn, int ldxn,
                                  const sd_mat *gate, const sd_mat *up, const sd_mat *down, float *g, float *u, int T,
                                  float *tmp) {
    if (b->i->norm_mlp_add) return b->i->norm_mlp_add(b, w, eps, x, ldx, xn, ldxn, gate, up, down, g, u, T);
    if (!gate || !up || !down) return sd_fail(&b->err, SPECDEC_ERR_INVALID_ARG, "norm_mlp_add: NULL weight");
    const sd_mat *W[2] = {gate, up};
    float *y[2] = {g, u};
    const int ld[2] = {gate->rows, gate->rows};
    SD_TRY(sd_be_norm_matmul_n(b, w, eps, x, ldx, xn, ldxn, 2, W, y, ld, T));
    return sd_be_swiglu_matmul_add(b, down, g, u, x, ldx, T, tmp);
}

specdec_status sd_be_qk_norm_rope_store(sd_backend *b, const sd_attn_shape *s, const sd_kv_layer *kv, float *q,
                                        float *k, const float *v, const float *qw, const float *kw, float eps, int T,
                                        sd_pos pos, const float *cos_t, const float *sin_t) {
    if (b->i->qk_norm_rope_store) return b->i->qk_norm_rope_store(b, s, kv, q, k, v, qw, kw, eps, T, pos, cos_t, sin_t);
    if (!s || !kv) return sd_fail(&b->err, SPECDEC_ERR_INVALID_ARG, "qk_norm_rope_store: NULL shape or cache");
    const int hd = s->head_dim, nh = s->n_heads, nkv = s->n_kv_heads, kd = nkv * hd;
    SD_TRY(b->i->rmsnorm(b, q, hd, q, hd, qw, hd, T * nh, eps));
    SD_TRY(b->i->rmsnorm(b, k, hd, k, hd, kw, hd, T * nkv, eps));
    SD_TRY(b->i->rope(b, q, T, nh, hd, pos, cos_t, sin_t));
    SD_TRY(b->i->rope(b, k, T, nkv, hd, pos, cos_t, sin_t));
    SD_TRY(b->i->kv_store(b, s->kv_dtype, kv->k, kd, k, T, pos));
    return b->i->kv_store(b, s->kv_dtype, kv->v, kd, v, T, pos);
}

specdec_status sd_be_qk_norm_rope_attention(sd_backend *b, const sd_attn_shape *s, const sd_kv_layer *kv, float *q,
                                            float *k, const float *v, const float *qw, const float *kw, float eps, int T,
                                            sd_pos pos, const float *cos_t, const float *sin_t, float *out) {
    if (b->i->qk_norm_rope_attention)
        return b->i->qk_norm_rope_attention(b, s, kv, q, k, v, qw, kw, eps, T, pos, cos_t, sin_t, out);
    SD_TRY(sd_be_qk_norm_rope_store(b, s, kv, q, k, v, qw, kw, eps, T, pos, cos_t, sin_t));
    return b->i->attention(b, s, kv, q, out, T, pos);
}

specdec_status sd_be_fail(sd_backend *b, specdec_err *err, specdec_status st, const char *what) {
    if (b->err.status != SPECDEC_OK && b->err.msg[0]) {
        if (err) { *err = b->err; err->status = st; }
        b->err.status = SPECDEC_OK;
        b->err.msg[0] = 0;
        return st;
    }
    return sd_fail(err, st, "backend %s: %s failed (%s)", b->name, what, specdec_status_name(st));
}
