/* ops_neon.c: AArch64 Advanced SIMD (NEON) kernels, 4 lanes, the same algorithms as
 * ops_avx2.c: matmul rows for every weight kind (dense f32/f16/bf16, MLX affine 4/8-bit with
 * f32/f16/bf16 scales), rmsnorm of a row, attention for one (query, head). Compiled only on
 * aarch64 (CMake, by suffix); tested on x86 under qemu by tests/cross/run_neon_tests.sh.
 *
 * Invariance: every reduction runs in an order fixed by its length alone (cols, n, hd):
 * 4-wide chunk c goes to accumulator c % 4, the accumulators are added in a fixed tree, and
 * every multiply-add is vfmaq_f32 (never a separate mul + add, never compiler contraction:
 * the library is built with -std=c11, so no implicit FMA). The matmul tiles tokens (NT <= 4
 * share one weight load) with separate accumulators per token, so each token's instruction
 * sequence is the one it gets with NT = 1. Partial chunks are copied into zeroed stack
 * buffers; the padding lanes add exact zeros.
 *
 * Quantized layout with L = 4 lanes: a block is 4 words = 32 elements (4-bit) or 16 (8-bit),
 * never more than one group (groups are >= 32), so one scale per block. Groups smaller than
 * a block fall back to the portable kernel. */
#include "cpu/ops_internal.h"
#include "util/dtype.h"
#include <arm_neon.h>
#include "cpu/ops_simd.h"
#include <math.h>
#include <string.h>


#define NT_MAX 4

/* Fixed tree: (v0 + v1) + (v2 + v3). */
SD_AINLINE float hsum4(float32x4_t v) {
    float32x4_t p = vpaddq_f32(v, v); /* [v0+v1, v2+v3, v0+v1, v2+v3] */
    return vgetq_lane_f32(p, 0) + vgetq_lane_f32(p, 1);
}

SD_AINLINE float32x4_t sum4acc(float32x4_t a0, float32x4_t a1, float32x4_t a2, float32x4_t a3) {
    return vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3));
}

/* 4 elements of dtype dt at p, all present. */
SD_AINLINE float32x4_t load4(specdec_dtype dt, const void *p) {
    if (dt == SPECDEC_DTYPE_BF16)
        return vreinterpretq_f32_u32(vshlq_n_u32(vmovl_u16(vld1_u16((const uint16_t *)p)), 16));
    if (dt == SPECDEC_DTYPE_F16) return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)p)));
    return vld1q_f32((const float *)p);
}

SD_PART_LOADERS(float32x4_t, 4, load4, vld1q_f32)

/* ---- dense rows: 4-wide chunk c into accumulator c % 4 ---- */
SD_AINLINE void dense_rows(const sd_mm_args *a, int r0, int r1, int t0, const int NT, specdec_dtype dt) {
    const sd_mat *W = a->W;
    const int cols = W->cols, nch = (cols + 3) / 4, nfull = cols / 4, nfull4 = cols / 16;
    const size_t es = dt == SPECDEC_DTYPE_F32 ? 4 : 2;
    const float *xt[NT_MAX];
    for (int t = 0; t < NT; t++) xt[t] = a->x + (size_t)(t0 + t) * a->ldx;
    for (int r = r0; r < r1; r++) {
        const char *wr = (const char *)W->w + (size_t)r * cols * es;
        float32x4_t acc[NT_MAX][4];
        for (int t = 0; t < NT; t++)
            for (int u = 0; u < 4; u++) acc[t][u] = vdupq_n_f32(0.0f);
        int c = 0;
        for (; c < nfull4 * 4; c += 4) {
            __builtin_prefetch(wr + (size_t)(c * 4 + 256) * es);
            for (int u = 0; u < 4; u++) {
                float32x4_t w = load4(dt, wr + (size_t)(c + u) * 4 * es);
                for (int t = 0; t < NT; t++)
                    acc[t][u] = vfmaq_f32(acc[t][u], w, vld1q_f32(xt[t] + (c + u) * 4));
            }
        }
        for (int u = 0; u < 4; u++) { /* tail chunks c = 4*nfull4 + u */
            int cc = c + u;
            if (cc >= nch) break;
            int full = cc < nfull;
            float32x4_t w = full ? load4(dt, wr + (size_t)cc * 4 * es) : load_part(dt, wr + (size_t)cc * 4 * es, cols - cc * 4);
            for (int t = 0; t < NT; t++) {
                float32x4_t xv = full ? vld1q_f32(xt[t] + cc * 4) : loadx_part(xt[t] + cc * 4, cols - cc * 4);
                acc[t][u] = vfmaq_f32(acc[t][u], w, xv);
            }
        }
        for (int t = 0; t < NT; t++)
            a->y[(size_t)(t0 + t) * a->ldy + r] = hsum4(sum4acc(acc[t][0], acc[t][1], acc[t][2], acc[t][3]));
    }
}

/* ---- quantized rows, L = 4 (layout in ops_internal.h); needs group >= 4 * 32 / bits ---- */
SD_AINLINE void quant_rows(const sd_mm_args *a, int r0, int r1, int t0, const int NT, const int bits,
                           specdec_dtype dt) {
    const sd_mat *W = a->W;
    const int E = 32 / bits, BE = 4 * E, cols = W->cols, g = W->group;
    const int nw = cols / E, nb = (nw + 3) / 4, ng = cols / g;
    const size_t es = dt == SPECDEC_DTYPE_F32 ? 4 : 2;
    const uint32x4_t msk = vdupq_n_u32((1u << bits) - 1u);
    int32x4_t sh[8];
    for (int k = 0; k < E; k++) sh[k] = vdupq_n_s32(-bits * k); /* right shift by bits*k */
    const float *xp[NT_MAX], *xs[NT_MAX];
    for (int t = 0; t < NT; t++) {
        xp[t] = a->xp + (size_t)(t0 + t) * a->ldxp;
        xs[t] = a->xs + (size_t)(t0 + t) * a->ldxs;
    }
    int lg = 0;
    while ((1 << lg) < g) lg++;
    for (int r = r0; r < r1; r++) {
        const uint32_t *wr = (const uint32_t *)W->w + (size_t)r * nw;
        const size_t gr = (size_t)r * ng;
        float32x4_t acc[NT_MAX], bacc[NT_MAX];
        for (int t = 0; t < NT; t++) { acc[t] = vdupq_n_f32(0.0f); bacc[t] = vdupq_n_f32(0.0f); }
        /* bias term: 4 groups at a time against the group sums of x (xs zero padded to 16) */
        for (int gs = 0; gs < ng; gs += 4) {
            const char *bp = (const char *)W->biases + (gr + gs) * es;
            float32x4_t B = ng - gs >= 4 ? load4(dt, bp) : load_part(dt, bp, ng - gs);
            for (int t = 0; t < NT; t++) bacc[t] = vfmaq_f32(bacc[t], B, vld1q_f32(xs[t] + gs));
        }
        for (int b = 0; b < nb; b++) {
            int remw = nw - b * 4;
            uint32x4_t wv;
            if (remw >= 4) wv = vld1q_u32(wr + b * 4);
            else {
                uint32_t tmp[4] = {0};
                memcpy(tmp, wr + b * 4, (size_t)remw * 4);
                wv = vld1q_u32(tmp);
            }
            const float32x4_t sv = vdupq_n_f32(sd_elem(dt, W->scales, gr + (((size_t)b * BE) >> lg)));
            float32x4_t q[8];
            for (int k = 0; k < E; k++) q[k] = vcvtq_f32_u32(vandq_u32(vshlq_u32(wv, sh[k]), msk));
            for (int t = 0; t < NT; t++) {
                const float *xb = xp[t] + (size_t)b * BE;
                float32x4_t p = vmulq_f32(q[0], vld1q_f32(xb));
                for (int k = 1; k < E; k++) p = vfmaq_f32(p, q[k], vld1q_f32(xb + 4 * k));
                acc[t] = vfmaq_f32(acc[t], p, sv);
            }
        }
        for (int t = 0; t < NT; t++) a->y[(size_t)(t0 + t) * a->ldy + r] = hsum4(vaddq_f32(acc[t], bacc[t]));
    }
}

#include "cpu/ops_tiles.h"

static void mm_rows(const sd_mm_args *a, int r0, int r1) {
    const sd_mat *W = a->W;
    int d = W->dtype == SPECDEC_DTYPE_F16 ? 1 : W->dtype == SPECDEC_DTYPE_BF16 ? 2 : 0;
    static void (*const dense[3])(const sd_mm_args *, int, int) = {mm_f32, mm_f16, mm_bf16};
    static void (*const q4[3])(const sd_mm_args *, int, int) = {mm_q4_f32, mm_q4_f16, mm_q4_bf16};
    static void (*const q8[3])(const sd_mm_args *, int, int) = {mm_q8_f32, mm_q8_f16, mm_q8_bf16};
    if (W->bits && W->group < 4 * (32 / W->bits)) { /* a block would span groups: not laid out for that */
        sd_isa_portable()->mm_rows(a, r0, r1);
        return;
    }
    if (W->bits == 4) q4[d](a, r0, r1);
    else if (W->bits == 8) q8[d](a, r0, r1);
    else dense[d](a, r0, r1);
}

/* ---- rmsnorm: 4-wide chunk c into accumulator c % 4 ---- */
static void rmsnorm_row(float *out, const float *x, const float *w, int n, float eps) {
    float32x4_t s[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    int nch = (n + 3) / 4;
    for (int c = 0; c < nch; c++) {
        float32x4_t v = n - c * 4 >= 4 ? vld1q_f32(x + c * 4) : loadx_part(x + c * 4, n - c * 4);
        s[c & 3] = vfmaq_f32(s[c & 3], v, v);
    }
    float ss = hsum4(sum4acc(s[0], s[1], s[2], s[3]));
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    int i = 0;
    float32x4_t vi = vdupq_n_f32(inv);
    for (; i + 4 <= n; i += 4) vst1q_f32(out + i, vmulq_f32(vmulq_f32(vld1q_f32(x + i), vi), vld1q_f32(w + i)));
    for (; i < n; i++) out[i] = x[i] * inv * w[i]; /* same two roundings as the vector lanes */
}

/* ---- attention for one (query, head) ---- */
SD_AINLINE float32x4_t kv4(sd_kv_dtype_e dt, const void *base, size_t e, int n) {
    specdec_dtype d = dt == SD_KV_BF16 ? SPECDEC_DTYPE_BF16 : dt == SD_KV_F16 ? SPECDEC_DTYPE_F16 : SPECDEC_DTYPE_F32;
    const char *p = (const char *)base + e * (dt == SD_KV_F32 ? 4 : 2);
    return n >= 4 ? load4(d, p) : load_part(d, p, n);
}

#define HD_CH 16 /* 4-wide chunks of the output kept in registers at once (64 dims) */

static void attn_one(const float *q, const void *k, const void *v, size_t stride, int hd,
                     sd_kv_dtype_e dt, int n, float scale, float *sc, float *out) {
    const int nch = (hd + 3) / 4;
    const size_t es = sd_kv_elem_size(dt);   /* the KV cache's prefetch: ops_simd.h */
    float mx = -INFINITY;
    sd_prefetch_first_rows(k, n, stride * es, (size_t)hd * es);
    /* scores: q . k_j, 4-wide chunk c into accumulator c % 4 */
    for (int j = 0; j < n; j++) {
        if (j + SD_ATT_PF < n) sd_prefetch_bytes(k, (size_t)(j + SD_ATT_PF) * stride * es, (size_t)hd * es);
        float32x4_t d[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
        for (int c = 0; c < nch; c++) {
            int rem = hd - c * 4;
            float32x4_t kvv = kv4(dt, k, (size_t)j * stride + c * 4, rem);
            float32x4_t qv = rem >= 4 ? vld1q_f32(q + c * 4) : loadx_part(q + c * 4, rem);
            d[c & 3] = vfmaq_f32(d[c & 3], qv, kvv);
        }
        float s = hsum4(sum4acc(d[0], d[1], d[2], d[3])) * scale;
        sc[j] = s;
        if (s > mx) mx = s;
    }
    sd_prefetch_first_rows(v, n, stride * es, (size_t)hd * es);
    float sum = sd_softmax_exp(sc, n, mx);
    float inv = 1.0f / sum;
    /* out = (sum_j p_j v_j) * inv, keys in order, HD_CH chunks of the output at a time */
    for (int c0 = 0; c0 < nch; c0 += HD_CH) {
        int cn = nch - c0 < HD_CH ? nch - c0 : HD_CH;
        float32x4_t acc[HD_CH];
        for (int c = 0; c < HD_CH; c++) acc[c] = vdupq_n_f32(0.0f);
        for (int j = 0; j < n; j++) {
            if (j + SD_ATT_PF < n) {   /* this pass's dims of the row ahead */
                const int nd = cn * 4 < hd - c0 * 4 ? cn * 4 : hd - c0 * 4;
                sd_prefetch_bytes(v, ((size_t)(j + SD_ATT_PF) * stride + (size_t)c0 * 4) * es, (size_t)nd * es);
            }
            float32x4_t pj = vdupq_n_f32(sc[j]);
            for (int c = 0; c < HD_CH; c++)
                if (c < cn) acc[c] = vfmaq_f32(acc[c], pj, kv4(dt, v, (size_t)j * stride + (c0 + c) * 4, hd - (c0 + c) * 4));
        }
        float32x4_t vi = vdupq_n_f32(inv);
        for (int c = 0; c < cn; c++) {
            float tmp[4];
            vst1q_f32(tmp, vmulq_f32(acc[c], vi));
            int rem = hd - (c0 + c) * 4;
            memcpy(out + (c0 + c) * 4, tmp, (size_t)(rem >= 4 ? 4 : rem) * sizeof(float));
        }
    }
}

/* ---- element-wise: rope and silu_mul (called by ops_fast.c's neon op set) ---- */
/* RoPE, NeoX rotate_half, shapes as in ops.h. Deliberately unfused (mul, mul, sub / add, as the
 * C in ops_fast.c under -std=c11), so every lane and the scalar tail give the portable bits. */
void sd_neon_rope(float *x, int T, int n_heads, int hd, int pos0, const float *cos_t, const float *sin_t) {
    const int half = hd / 2;
    for (int t = 0; t < T; t++) {
        const float *c = cos_t + (size_t)(pos0 + t) * half, *s = sin_t + (size_t)(pos0 + t) * half;
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (size_t)t * n_heads * hd + (size_t)h * hd;
            int i = 0;
            for (; i + 4 <= half; i += 4) {
                float32x4_t x1 = vld1q_f32(v + i), x2 = vld1q_f32(v + i + half);
                float32x4_t cv = vld1q_f32(c + i), sv = vld1q_f32(s + i);
                vst1q_f32(v + i, vsubq_f32(vmulq_f32(x1, cv), vmulq_f32(x2, sv)));
                vst1q_f32(v + i + half, vaddq_f32(vmulq_f32(x2, cv), vmulq_f32(x1, sv)));
            }
            for (; i < half; i++) {
                float x1 = v[i], x2 = v[i + half];
                v[i] = x1 * c[i] - x2 * s[i];
                v[i + half] = x2 * c[i] + x1 * s[i];
            }
        }
    }
}

/* e^x for 4 lanes: x = n ln2 + r (n = round(x / ln2), r by two fused steps with a split ln2),
 * e^r by its Taylor series to degree 7 (|r| <= ln2/2: truncation < 2^-27 relative), times
 * 2^n applied as 2^(n/2) * 2^(n - n/2) so that overflow gives inf and underflow 0 without a
 * special case. x is clamped to [-104, 89] first (beyond it e^x is 0 / inf in f32 anyway);
 * NaN propagates (FMAX/FMIN return NaN). Within ~2 ulp of expf. */
SD_AINLINE float32x4_t exp4(float32x4_t x) {
    x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-104.0f)), vdupq_n_f32(89.0f));
    const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693145751953125f)); /* ln2 high part, exact n*hi */
    r = vfmsq_f32(r, n, vdupq_n_f32(1.428606765330187e-06f));          /* ln2 - hi */
    float32x4_t p = vdupq_n_f32(1.0f / 5040.0f);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 720.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 120.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 24.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 6.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    int32x4_t ni = vcvtq_s32_f32(n);
    int32x4_t n1 = vshrq_n_s32(ni, 1), n2 = vsubq_s32(ni, n1);
    float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, vdupq_n_s32(127)), 23));
    float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, vdupq_n_s32(127)), 23));
    return vmulq_f32(vmulq_f32(p, s1), s2);
}

/* g (T, n) = silu(g) * u = g / (1 + e^-g) * u. Every element, the tail included, goes through
 * exp4 (the tail via a zero-padded copy), so a value never depends on its position or T. */
SD_AINLINE float32x4_t silu_mul4(float32x4_t g, float32x4_t u) {
    float32x4_t e = exp4(vnegq_f32(g));
    return vmulq_f32(vdivq_f32(g, vaddq_f32(vdupq_n_f32(1.0f), e)), u);
}
void sd_neon_silu_mul(float *g, const float *u, int n, int T) {
    const size_t N = (size_t)n * (size_t)T;
    size_t i = 0;
    for (; i + 4 <= N; i += 4) vst1q_f32(g + i, silu_mul4(vld1q_f32(g + i), vld1q_f32(u + i)));
    if (i < N) {
        int rem = (int)(N - i);
        float tmp[4];
        vst1q_f32(tmp, silu_mul4(loadx_part(g + i, rem), loadx_part(u + i, rem)));
        memcpy(g + i, tmp, (size_t)rem * sizeof(float));
    }
}

static const sd_isa isa = {
    .name = "neon",
    .lanes = 4,
    .mm_rows = mm_rows,
    .rmsnorm_row = rmsnorm_row,
    .attn_one = attn_one,
};

const sd_isa *sd_isa_neon(void) { return &isa; }
