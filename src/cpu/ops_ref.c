/* ops_ref.c: the scalar reference operators. Plain loops, one element at a time, written to
 * be obviously right rather than fast; the fast set (ops_fast.c) is tested against these.
 * Reductions accumulate in double so the reference sits closer to the exact value than any
 * float kernel; results are rounded to f32 once at the end. Shapes as in ops.h. */
#include "cpu/ops.h"
#include "cpu/ops_i8.h"
#include "cpu/ops_internal.h"
#include "util/dtype.h"
#include <math.h>
#include <string.h>

/* Scalar element e of a 16/32-bit float array of dtype dt. */
float sd_ref_elem_f32(specdec_dtype dt, const void *p, size_t e) {
    switch (dt) {
    case SPECDEC_DTYPE_F16: return sd_f16_to_f32(((const uint16_t *)p)[e]);
    case SPECDEC_DTYPE_BF16: return sd_bf16_to_f32(((const uint16_t *)p)[e]);
    default: return ((const float *)p)[e];
    }
}

/* W[r][j] as f32: dense convert, or scale*q + bias (computed in f32, as the format defines). */
static float w_at(const sd_mat *W, int r, int j) {
    size_t idx = (size_t)r * (size_t)W->cols + (size_t)j;
    if (W->bits == 0) return sd_ref_elem_f32(W->dtype, W->w, idx);
    int per = 32 / W->bits;
    const uint32_t *row = (const uint32_t *)W->w + (size_t)r * (size_t)(W->cols / per);
    uint32_t word = row[j / per];
    uint32_t q = (word >> (W->bits * (j % per))) & ((1u << W->bits) - 1u);
    size_t gi = (size_t)r * (size_t)(W->cols / W->group) + (size_t)(j / W->group);
    float s = sd_ref_elem_f32(W->dtype, W->scales, gi);
    float b = sd_ref_elem_f32(W->dtype, W->biases, gi);
    return s * (float)q + b;
}

static void ref_matmul(const sd_mat *W, const float *x, int ldx, float *y, int ldy, int T, sd_pool *p) {
    (void)p;
    for (int t = 0; t < T; t++)
        for (int r = 0; r < W->rows; r++) {
            double acc = 0.0;
            for (int j = 0; j < W->cols; j++) acc += (double)w_at(W, r, j) * (double)x[(size_t)t * ldx + j];
            y[(size_t)t * ldy + r] = (float)acc;
        }
}

static void ref_rmsnorm(float *out, const float *x, const float *w, int n, int T, float eps) {
    for (int t = 0; t < T; t++) {
        const float *xr = x + (size_t)t * n;
        float *o = out + (size_t)t * n;
        double ss = 0.0;
        for (int i = 0; i < n; i++) ss += (double)xr[i] * (double)xr[i];
        float inv = (float)(1.0 / sqrt(ss / n + (double)eps));
        for (int i = 0; i < n; i++) o[i] = xr[i] * inv * w[i];
    }
}

void sd_ref_rope(float *x, int T, int n_heads, int hd, int pos0, const float *cos_t, const float *sin_t) {
    int half = hd / 2;
    for (int t = 0; t < T; t++) {
        const float *c = cos_t + (size_t)(pos0 + t) * half, *s = sin_t + (size_t)(pos0 + t) * half;
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (size_t)t * n_heads * hd + (size_t)h * hd;
            for (int i = 0; i < half; i++) {
                float x1 = v[i], x2 = v[i + half];
                v[i] = x1 * c[i] - x2 * s[i];
                v[i + half] = x2 * c[i] + x1 * s[i];
            }
        }
    }
}

void sd_ref_silu_mul(float *g, const float *u, int n, int T) {
    for (size_t i = 0; i < (size_t)n * T; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* K or V element (pos, kv head, d) of the cache as f32. */
static float kv_at(sd_kv_dtype_e dt, const void *c, size_t idx) {
    switch (dt) {
    case SD_KV_BF16: return sd_bf16_to_f32(((const uint16_t *)c)[idx]);
    case SD_KV_F16: return sd_f16_to_f32(((const uint16_t *)c)[idx]);
    default: return ((const float *)c)[idx];
    }
}

static void ref_attention(const sd_attn_shape *s, const sd_kv_layer *kv, const float *q, float *out,
                          int T, int pos0, float *scratch, sd_pool *p) {
    (void)p;
    int nh = s->n_heads, nkv = s->n_kv_heads, hd = s->head_dim, grp = nh / nkv;
    float scale = 1.0f / sqrtf((float)hd);
    for (int t = 0; t < T; t++) {
        int n = pos0 + t + 1;
        for (int h = 0; h < nh; h++) {
            const float *qh = q + (size_t)t * nh * hd + (size_t)h * hd;
            float *oh = out + (size_t)t * nh * hd + (size_t)h * hd;
            int kh = h / grp;
            float *sc = scratch;
            float m = -INFINITY;
            for (int j = 0; j < n; j++) {
                double d = 0.0;
                size_t base = ((size_t)j * nkv + kh) * hd;
                for (int i = 0; i < hd; i++) d += (double)qh[i] * (double)kv_at(s->kv_dtype, kv->k, base + i);
                sc[j] = (float)d * scale;
                if (sc[j] > m) m = sc[j];
            }
            double sum = 0.0;
            for (int j = 0; j < n; j++) { sc[j] = expf(sc[j] - m); sum += sc[j]; }
            for (int i = 0; i < hd; i++) {
                double a = 0.0;
                for (int j = 0; j < n; j++)
                    a += (double)sc[j] * (double)kv_at(s->kv_dtype, kv->v, ((size_t)j * nkv + kh) * hd + i);
                oh[i] = (float)(a / sum);
            }
        }
    }
}

size_t sd_attention_scratch_floats(const sd_attn_shape *s, int T, int n_ctx, int n_threads) {
    (void)T;
    if (n_threads < 1) n_threads = 1;
    /* a thread may hold the scores of a whole GQA group at once (sd_isa.attn_group) */
    size_t g = s && s->n_kv_heads > 0 && s->n_heads >= s->n_kv_heads ? (size_t)(s->n_heads / s->n_kv_heads) : 1;
    return (size_t)n_threads * g * sd_attn_scratch_stride(n_ctx);
}

void sd_kv_store(sd_kv_dtype_e dt, void *cache, int row_elems, int pos0, const float *src, int T) {
    size_t n = (size_t)row_elems * (size_t)T, off = (size_t)pos0 * (size_t)row_elems;
    switch (dt) {
    case SD_KV_BF16: {
        uint16_t *c = (uint16_t *)cache + off;
        for (size_t i = 0; i < n; i++) c[i] = sd_f32_to_bf16(src[i]);
        break;
    }
    case SD_KV_F16: {
        uint16_t *c = (uint16_t *)cache + off;
        for (size_t i = 0; i < n; i++) c[i] = sd_f32_to_f16(src[i]);
        break;
    }
    default: memcpy((float *)cache + off, src, n * sizeof(float)); break;
    }
}

static void ref_matmul_i8(const sd_mat *W, const float *x, int ldx, float *y, int ldy, int T, sd_pool *p) {
    sd_i8_matmul_ref(W, x, ldx, y, ldy, T);
}

static const sd_ops ref_ops = {
    .name = "ref",
    .matmul = ref_matmul,
    .rmsnorm = ref_rmsnorm,
    .rope = sd_ref_rope,
    .silu_mul = sd_ref_silu_mul,
    .attention = ref_attention,
    .matmul_i8 = ref_matmul_i8,
};

const sd_ops *sd_ops_ref(void) { return &ref_ops; }
