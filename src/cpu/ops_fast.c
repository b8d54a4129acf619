/* ops_fast.c: the fast operator set. Picks a SIMD level at run time (avx512 > avx2 > neon >
 * portable C), prepares the permuted activations for quantized matmul (layout in
 * ops_internal.h), and splits work over the pool:
 *   matmul    by output rows (each y[t][r] is computed whole by one thread),
 *   attention by (query, head) pairs (each output head computed whole by one thread),
 * so no result depends on the pool size. rmsnorm, rope and silu_mul run on the caller.
 * Also holds the portable kernels (the "portable" level) and the debug invariance breaker. */
#include "cpu/ops.h"
#include "cpu/ops_internal.h"
#include "cpu/ops_i8.h"
#include "cpu/calibrate.h"
#include "cpu/split.h"
#include <stdio.h>
#include "util/dtype.h"
#include "util/err.h"
#include "util/mem.h"
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#endif

/* sd_ops_debug_break_invariance: a process-wide flag, off by default. When on, the fast
 * matmul flips the last mantissa bit of y[0][0] whenever T > 1, so a block-vs-chain
 * exactness probe must fail. Set it only while no matmul is running. */
int sd_ops_dbg_break = 0;
void sd_ops_debug_break_invariance(int on) { sd_ops_dbg_break = on ? 1 : 0; }

/* ---------------------------------------------------------------- portable kernels */
/* Dense or quantized rows in plain C: dequantize a chunk of 256 columns once, apply it to
 * up to 8 tokens; column j goes to accumulator j % 8 of its token; fixed tree at the end. */
#define P_CH 256
#define P_NT 8
static void p_mm_rows(const sd_mm_args *a, int r0, int r1) {
    const sd_mat *W = a->W;
    const int cols = W->cols;
    float wbuf[P_CH];
    for (int t0 = 0; t0 < a->T; t0 += P_NT) {
        int nt = a->T - t0 < P_NT ? a->T - t0 : P_NT;
        for (int r = r0; r < r1; r++) {
            float acc[P_NT][8];
            memset(acc, 0, sizeof acc);
            for (int j0 = 0; j0 < cols; j0 += P_CH) {
                int n = cols - j0 < P_CH ? cols - j0 : P_CH;
                if (W->bits == 0) {
                    size_t es = sd_dtype_size(W->dtype);
                    sd_to_f32(W->dtype, (const char *)W->w + ((size_t)r * cols + j0) * es, wbuf, (size_t)n);
                } else {
                    const int per = 32 / W->bits, g = W->group;
                    const uint32_t mask = (1u << W->bits) - 1u;
                    const uint32_t *wr = (const uint32_t *)W->w + (size_t)r * (cols / per);
                    const size_t gr = (size_t)r * (cols / g);
                    for (int i = 0; i < n; i++) {
                        int j = j0 + i;
                        uint32_t qv = (wr[j / per] >> (W->bits * (j % per))) & mask;
                        float s = sd_ref_elem_f32(W->dtype, W->scales, gr + j / g);
                        float b = sd_ref_elem_f32(W->dtype, W->biases, gr + j / g);
                        wbuf[i] = s * (float)qv + b;
                    }
                }
                for (int t = 0; t < nt; t++) {
                    const float *xr = a->x + (size_t)(t0 + t) * a->ldx + j0;
                    for (int i = 0; i < n; i++) acc[t][(j0 + i) & 7] += wbuf[i] * xr[i];
                }
            }
            for (int t = 0; t < nt; t++) {
                float *c = acc[t];
                a->y[(size_t)(t0 + t) * a->ldy + r] = ((c[0] + c[1]) + (c[2] + c[3])) + ((c[4] + c[5]) + (c[6] + c[7]));
            }
        }
    }
}

static void p_rmsnorm_row(float *out, const float *x, const float *w, int n, float eps) {
    float s[8] = {0};
    for (int i = 0; i < n; i++) s[i & 7] += x[i] * x[i];
    float ss = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = 0; i < n; i++) out[i] = x[i] * inv * w[i];
}

static float kv_f32(sd_kv_dtype_e dt, const void *c, size_t i) {
    if (dt == SD_KV_BF16) return sd_bf16_to_f32(((const uint16_t *)c)[i]);
    if (dt == SD_KV_F16) return sd_f16_to_f32(((const uint16_t *)c)[i]);
    return ((const float *)c)[i];
}

static void p_attn_one(const float *q, const void *k, const void *v, size_t stride, int hd,
                       sd_kv_dtype_e dt, int n, float scale, float *sc, float *out) {
    float mx = -INFINITY;
    for (int j = 0; j < n; j++) {
        float d[4] = {0};
        for (int i = 0; i < hd; i++) d[i & 3] += q[i] * kv_f32(dt, k, (size_t)j * stride + i);
        float s = ((d[0] + d[1]) + (d[2] + d[3])) * scale;
        sc[j] = s;
        if (s > mx) mx = s;
    }
    float sum = 0.0f;
    for (int j = 0; j < n; j++) { sc[j] = expf(sc[j] - mx); sum += sc[j]; }
    float inv = 1.0f / sum;
    for (int i = 0; i < hd; i++) out[i] = 0.0f;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < hd; i++) out[i] += sc[j] * kv_f32(dt, v, (size_t)j * stride + i);
    for (int i = 0; i < hd; i++) out[i] *= inv;
}

static const sd_isa portable_isa = {
    .name = "scalar", .lanes = 0, .mm_rows = p_mm_rows, .rmsnorm_row = p_rmsnorm_row, .attn_one = p_attn_one,
};
const sd_isa *sd_isa_portable(void) { return &portable_isa; }

#if !(defined(__x86_64__) || defined(_M_X64))
const sd_isa *sd_isa_avx512(void) { return NULL; }
const sd_isa *sd_isa_avx2(void) { return NULL; }
sd_i8_rows_fn sd_i8_rows_avx512(void) { return NULL; }
sd_i8_rows_fn sd_i8_rows_amx(void) { return NULL; }
int sd_i8_amx_always;
sd_i8_rows_fn sd_i8_rows_avx2(void) { return NULL; }
sd_i8_prep_fn sd_i8_prep_avx2(void) { return NULL; }
sd_i8_rows_fn sd_i8_rows_avx2_form(int vnni) { (void)vnni; return NULL; }
void sd_i8_avx2_prefer_vnni(int on) { (void)on; }
#endif
#if !(defined(__aarch64__) || defined(_M_ARM64))
const sd_isa *sd_isa_neon(void) { return NULL; }
sd_i8_rows_fn sd_i8_rows_neon(void) { return NULL; }
#endif

/* ---------------------------------------------------------------- matmul dispatch */
/* Per-thread scratch for the permuted activations (of the thread that calls matmul); grows,
 * never shrinks; freed when the thread exits (a pthread key's destructor), so a server worker
 * or any other caller thread that ends leaves nothing behind. */
static _Thread_local float *tl_buf;
static _Thread_local size_t tl_cap;
static pthread_key_t tl_key;
static pthread_once_t tl_once = PTHREAD_ONCE_INIT;
static int tl_key_ok;

static void tl_free(void *p) { free(p); }
static void tl_key_make(void) { tl_key_ok = pthread_key_create(&tl_key, tl_free) == 0; }

float *sd_ops_scratch(size_t n) {
    if (n > tl_cap) {
        /* aligned (util/mem.h): the kernels' full-vector loads of xp / xs never straddle a cache
         * line. The contents are rewritten by every call: no copy. */
        void *nb = sd_malloc_aligned(n * sizeof(float));
        if (!nb) return NULL;
        free(tl_buf);
        tl_buf = (float *)nb;
        tl_cap = n;
        pthread_once(&tl_once, tl_key_make);
        if (tl_key_ok) pthread_setspecific(tl_key, nb);
    }
    return tl_buf;
}

/* xp / xs for one token (layout in ops_internal.h); nb blocks of L words of E elements,
 * ng groups of g. */
static void prep_token(const float *x, int cols, int E, int L, int nb, int g, int ldxs, float *xp, float *xs) {
    const int BE = L * E;
    for (int b = 0; b < nb; b++)
        for (int l = 0; l < L; l++)
            for (int k = 0; k < E; k++) {
                int j = b * BE + l * E + k;
                xp[b * BE + k * L + l] = j < cols ? x[j] : 0.0f;
            }
    int ng = cols / g;
    for (int gi = 0; gi < ldxs; gi++) {
        float s = 0.0f;
        if (gi < ng)
            for (int j = gi * g; j < gi * g + g; j++) s += x[j];
        xs[gi] = s;
    }
}

/* Below this many multiply-adds a matmul / attention call runs on the caller alone. */
#define SD_INLINE_MACS 65536.0

typedef struct mm_job {
    const sd_isa *isa;
    sd_mm_args a;
    sd_split split;   /* blocks of 8 rows, shared out while the call runs (cpu/split.h) */
} mm_job;

static void mm_task(void *arg, int ith, int nth) {
    mm_job *j = (mm_job *)arg;
    (void)nth;
    const int rows = j->a.W->rows;
    int u0, u1;
    for (sd_split_it it = sd_split_begin(&j->split, ith); sd_split_next(&it, &u0, &u1);)
        j->isa->mm_rows(&j->a, u0 * 8, u1 * 8 < rows ? u1 * 8 : rows);
}

static void fast_matmul(const sd_isa *isa, const sd_mat *W, const float *x, int ldx, float *y, int ldy,
                        int T, sd_pool *p) {
    if (T <= 0 || W->rows <= 0) return;
    mm_job j = {.isa = isa, .a = {.W = W, .x = x, .ldx = ldx, .y = y, .ldy = ldy, .T = T}};
    int32_t gidx[32 * 16];
    if (W->bits && isa->lanes) {
        const int E = 32 / W->bits, L = isa->lanes, bps = 16 * W->group / (L * E);
        for (int pb = 0; pb < bps && pb < 32; pb++)
            for (int l = 0; l < L && l < 16; l++) gidx[pb * L + l] = (pb * L * E + l * E) / W->group;
        j.a.gidx = gidx;
    }
    if (W->bits && isa->lanes) {
        const int E = 32 / W->bits, L = isa->lanes, nw = W->cols / E, nb = (nw + L - 1) / L;
        const int ldxp = nb * L * E, ldxs = (W->cols / W->group + 15) / 16 * 16;
        float *buf = sd_ops_scratch((size_t)T * (size_t)(ldxp + ldxs));
        if (!buf) { /* out of memory: the portable kernel needs no scratch */
            j.isa = sd_isa_portable();
        } else {
            float *xp = buf, *xs = buf + (size_t)T * ldxp;
            for (int t = 0; t < T; t++)
                prep_token(x + (size_t)t * ldx, W->cols, E, L, nb, W->group, ldxs, xp + (size_t)t * ldxp, xs + (size_t)t * ldxs);
            j.a.xp = xp; j.a.ldxp = ldxp; j.a.xs = xs; j.a.ldxs = ldxs;
        }
    }
    /* tiny calls (< SD_INLINE_MACS multiply-adds) run on the caller: waking the pool costs more
     * than the work, and far more when the machine is oversubscribed. A result never depends
     * on this choice (each row is computed whole by one thread either way). */
    double macs = (double)W->rows * W->cols * T;
    const int in = !p || sd_pool_size(p) == 1 || macs < SD_INLINE_MACS;
    sd_split_init(&j.split, (W->rows + 7) / 8, 2, in ? 1 : sd_pool_size(p));
    if (in) mm_task(&j, 0, 1);
    else sd_pool_run(p, mm_task, &j);
    if (sd_ops_dbg_break && T > 1) {
        uint32_t u;
        memcpy(&u, &y[0], 4);
        u ^= 1u;
        memcpy(&y[0], &u, 4);
    }
}

/* ---------------------------------------------------------------- attention dispatch */
typedef struct attn_job {
    const sd_isa *isa;
    const sd_attn_shape *s;
    const sd_kv_layer *kv;
    const float *q;
    float *out;
    int T, pos0;
    float *scratch;
    size_t sstride;
} attn_job;

/* Key 0 of kv head kh in a cache whose rows hold n_kv_heads x hd elements of es bytes. */
static inline const void *kv_head(const void *cache, int kh, int hd, size_t es) {
    return (const char *)cache + (size_t)kh * hd * es;
}

static void attn_task(void *arg, int ith, int nth) {
    attn_job *j = (attn_job *)arg;
    const int nh = j->s->n_heads, nkv = j->s->n_kv_heads, hd = j->s->head_dim, grp = nh / nkv;
    const size_t es = j->s->kv_dtype == SD_KV_F32 ? 4 : 2;
    const size_t stride = (size_t)nkv * hd;
    const float scale = 1.0f / sqrtf((float)hd);
    float *sc = j->scratch + (size_t)ith * grp * j->sstride;
    /* Whole GQA groups when there are enough of them to keep every thread busy: one pass over a
     * kv head's rows serves its grp query heads (same bits as per head; only the split differs). */
    if (j->isa->attn_group && grp > 1 && (long long)j->T * nkv >= nth) {
        const long long G = (long long)j->T * nkv;
        for (long long gi = G * ith / nth; gi < G * (ith + 1) / nth; gi++) {
            int t = (int)(gi / nkv), kh = (int)(gi % nkv);
            size_t off = (size_t)t * nh * hd + (size_t)kh * grp * hd;
            j->isa->attn_group(j->q + off, grp, kv_head(j->kv->k, kh, hd, es), kv_head(j->kv->v, kh, hd, es), stride, hd,
                               j->s->kv_dtype, j->pos0 + t + 1, scale, sc, j->sstride, j->out + off);
        }
        return;
    }
    const long long P = (long long)j->T * nh;
    const long long p0 = P * ith / nth, p1 = P * (ith + 1) / nth;
    for (long long pi = p0; pi < p1; pi++) {
        int t = (int)(pi / nh), h = (int)(pi % nh), kh = h / grp;
        j->isa->attn_one(j->q + (size_t)t * nh * hd + (size_t)h * hd, kv_head(j->kv->k, kh, hd, es),
                         kv_head(j->kv->v, kh, hd, es), stride, hd, j->s->kv_dtype,
                         j->pos0 + t + 1, scale, sc, j->out + (size_t)t * nh * hd + (size_t)h * hd);
    }
}

/* scratch: at least sd_attention_scratch_floats(s, T, n_ctx, pool size) floats. */
static void fast_attention(const sd_isa *isa, const sd_attn_shape *s, const sd_kv_layer *kv, const float *q,
                           float *out, int T, int pos0, float *scratch, sd_pool *p) {
    if (T <= 0) return;
    attn_job j = {isa, s, kv, q, out, T, pos0, scratch, sd_attn_scratch_stride(pos0 + T)};
    /* multiply-adds: T queries x heads x (keys seen, on average) x (QK + PV) */
    double macs = (double)T * s->n_heads * ((double)pos0 + 0.5 * T + 1.0) * 2.0 * s->head_dim;
    if (!p || sd_pool_size(p) == 1 || macs < SD_INLINE_MACS) attn_task(&j, 0, 1);
    else sd_pool_run(p, attn_task, &j);
}

/* ---------------------------------------------------------------- element-wise ops */
/* rope: the x86 levels use the scalar reference itself (element-wise, exact, not worth a SIMD
 * copy yet); NEON has its own. silu_mul: the x86 SIMD levels use ops_avx2.c's (8 lanes, the
 * NEON form's bits), the scalar level the reference. */
#define fast_rope sd_ref_rope
#define fast_silu_mul sd_ref_silu_mul
#if defined(__x86_64__) || defined(_M_X64)
void sd_avx2_silu_mul(float *g, const float *u, int n, int T);
#define X86_SILU sd_avx2_silu_mul
#else
#define X86_SILU fast_silu_mul
#endif

/* NEON element-wise kernels (ops_neon.c, aarch64 builds only); elsewhere the neon set is
 * never handed out (level_supported), so the portable ones just fill its slots. */
#if defined(__aarch64__) || defined(_M_ARM64)
void sd_neon_rope(float *x, int T, int n_heads, int hd, int pos0, const float *cos_t, const float *sin_t);
void sd_neon_silu_mul(float *g, const float *u, int n, int T);
#define NEON_ROPE sd_neon_rope
#define NEON_SILU sd_neon_silu_mul
#else
#define NEON_ROPE fast_rope
#define NEON_SILU fast_silu_mul
#endif

/* ---------------------------------------------------------------- op sets per level */
#define LEVEL_OPS(L, ISAFN, I8FN, PREPFN, ROPE, SILU) \
    static void mi8_##L(const sd_mat *W, const float *x, int ldx, float *y, int ldy, int T, sd_pool *p) { \
        sd_i8_matmul(I8FN(), PREPFN(), W, x, ldx, y, ldy, T, p); } \
    static int mi8n_##L(int n, const sd_mat *const *W, const float *x, int ldx, float *const *y, const int *ldy, \
                        int T, sd_pool *p) { \
        return sd_i8_matmul_n(I8FN(), PREPFN(), n, W, x, ldx, y, ldy, T, p); } \
    static int mi8a_##L(const sd_mat *W, const float *x, int ldx, int T, sd_pool *p, float *scratch, int32_t *out) { \
        return sd_i8_matmul_argmax(I8FN(), PREPFN(), W, x, ldx, T, p, scratch, out); } \
    static void mm_##L(const sd_mat *W, const float *x, int ldx, float *y, int ldy, int T, sd_pool *p) { \
        fast_matmul(ISAFN(), W, x, ldx, y, ldy, T, p); } \
    static void rms_##L(float *out, const float *x, const float *w, int n, int T, float eps) { \
        const sd_isa *is = ISAFN(); \
        for (int t = 0; t < T; t++) is->rmsnorm_row(out + (size_t)t * n, x + (size_t)t * n, w, n, eps); } \
    static void attn_##L(const sd_attn_shape *s, const sd_kv_layer *kv, const float *q, float *out, int T, \
                         int pos0, float *scratch, sd_pool *p) { \
        fast_attention(ISAFN(), s, kv, q, out, T, pos0, scratch, p); } \
    static const sd_ops ops_##L = {#L, mm_##L, rms_##L, ROPE, SILU, attn_##L, mi8_##L, mi8n_##L, mi8a_##L};

/* int8 kernels per level: AVX-512 without VNNI takes the 256-bit ones, with AMX preferred (by
 * calibration) the AMX form; the portable level (and a level without its own) the plain C recipe
 * (NULL). */
static int g_prefer_amx;
void sd_i8_avx512_prefer_amx(int on) { g_prefer_amx = on; }
int sd_i8_avx512_amx_preferred(void) { return g_prefer_amx && sd_i8_rows_amx() != NULL; }
static sd_i8_rows_fn i8_avx512(void) {
    if (g_prefer_amx) {
        sd_i8_rows_fn f = sd_i8_rows_amx();
        if (f) return f;
    }
    return sd_i8_rows_avx512() ? sd_i8_rows_avx512() : sd_i8_rows_avx2();
}
static sd_i8_rows_fn i8_none(void) { return (sd_i8_rows_fn)0; }
/* the token preparation: the x86 levels the AVX2 one (the same bits, 5x faster), the others C */
static sd_i8_prep_fn prep_c(void) { return (sd_i8_prep_fn)0; }

LEVEL_OPS(avx512, sd_isa_avx512, i8_avx512, sd_i8_prep_avx2, fast_rope, X86_SILU)
LEVEL_OPS(avx2, sd_isa_avx2, sd_i8_rows_avx2, sd_i8_prep_avx2, fast_rope, X86_SILU)
LEVEL_OPS(neon, sd_isa_neon, sd_i8_rows_neon, prep_c, NEON_ROPE, NEON_SILU)
LEVEL_OPS(scalar, sd_isa_portable, i8_none, prep_c, fast_rope, fast_silu_mul)

#if defined(__x86_64__) || defined(_M_X64)
/* F16C is CPUID.1:ECX bit 29; asked directly because clang (14) has no "f16c" for
 * __builtin_cpu_supports, and the library must also build with clang (the fuzz targets). */
static int has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#endif

static int level_supported(const char *level) {
    if (strcmp(level, "scalar") == 0 || strcmp(level, "portable") == 0) return 1;
#if defined(__x86_64__) || defined(_M_X64)
    if (strcmp(level, "avx512") == 0)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl");
    if (strcmp(level, "avx2") == 0)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
#endif
#if defined(__aarch64__) || defined(_M_ARM64)
    if (strcmp(level, "neon") == 0) return sd_isa_neon() != NULL; /* Advanced SIMD is baseline on AArch64 */
#endif
    return 0;
}

const sd_ops *sd_ops_fast_level(const char *level) {
    if (!level_supported(level)) return NULL;
    if (strcmp(level, "avx512") == 0) return &ops_avx512;
    if (strcmp(level, "avx2") == 0) return &ops_avx2;
    if (strcmp(level, "neon") == 0) return &ops_neon;
    return &ops_scalar;
}

/* SPECDEC_SIMD=avx512|avx2|neon|portable|scalar picks a level by hand (to compare levels, or to
 * run the code a smaller machine would run); a level this machine cannot run is refused by
 * the runtime (sd_simd_env_rejected), so sd_ops_fast never silently substitutes one. */
static const char *sd_ops_fast_env(void) {
    const char *e = getenv("SPECDEC_SIMD");
    return e && *e ? e : NULL;
}

const char *sd_simd_env_rejected(void) {
    const char *e = sd_ops_fast_env();
    return e && !sd_ops_fast_level(e) ? e : NULL;
}

specdec_status sd_simd_check(specdec_err *err) {
    const char *want = sd_simd_env_rejected();
    if (!want) return SPECDEC_OK;
    return sd_fail(err, SPECDEC_ERR_INVALID_ARG,
                   "SPECDEC_SIMD=%s: not a SIMD level this machine runs (levels: avx512, avx2, neon, portable, scalar)", want);
}

/* The level for f32 or int8 activations: SPECDEC_SIMD when set, else the fastest one measured on
 * this CPU (calibrate.c). */
const sd_ops *sd_ops_fast_prec(int int8) {
    const char *want = sd_ops_fast_env();
    if (want) {
        const sd_ops *o = sd_ops_fast_level(want);
        if (o) return o;
    }
    const sd_calib *c = sd_cpu_calibration();
    const sd_ops *o = sd_ops_fast_level(int8 ? c->i8_level : c->f32_level);
    return o ? o : &ops_scalar;
}

/* Measured (tests/data, docs/benchmarks/cpu-int8-vs-llamacpp-*.md): what precision 0 means. */
int sd_cpu_default_int8(void) { return SD_CPU_DEFAULT_INT8; }

const sd_ops *sd_ops_fast(void) { return sd_ops_fast_prec(sd_cpu_default_int8()); }

const char *sd_simd_name(void) { return sd_ops_fast()->name; }

const char *specdec_cpu_kernels(void) { return sd_simd_env_rejected() ? NULL : sd_simd_name(); }

void specdec_cpu_kernels_why(char *buf, size_t n) {
    if (sd_ops_fast_env()) {
        snprintf(buf, n, "forced by SPECDEC_SIMD=%s", sd_ops_fast_env());
        return;
    }
    sd_calib_describe(sd_cpu_calibration(), buf, n);
}

specdec_status specdec_cpu_kernels_check(specdec_err *err) { return sd_simd_check(err); }
