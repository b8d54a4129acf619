/* selfcheck.cu: sd_cuda_selfcheck (cuda_backend.h), host code only. The kernels' bit-level
 * arithmetic lives in __host__ __device__ functions (common.cuh, rng.cuh, quant.cuh); this file
 * runs those same bodies on the CPU against the C implementations they must equal, so a build
 * without a GPU still verifies them:
 *   - Philox blocks and the keyed 52-bit draws, the libm-free log, the Gumbel transform and its
 *     bound (bitwise): sample/rng_core.h as the CUDA toolchain builds it against the C build;
 *   - the sampler's underflow boundary against this machine's libm exp;
 *   - the 16-bit float conversions against the CUDA headers' (bitwise, every f16, 2^24 f32
 *     patterns and the specials);
 *   - the in-place decoding of 4- and 8-bit codes (q * 2^p, and the fmaf identity with x * 2^-p);
 *   - a quantized row computed the way the matmul kernel does (lanes, chunks, granules, the xor
 *     butterfly) against a double-precision reference;
 *   - the order in which mma_i4.cu sums a row's 32 lane classes (mma_order.cuh) against the xor
 *     butterfly of the other kernels (bitwise, random chains of the contract's arithmetic);
 *   - the unfiltered sampler's decision (per-token step, reductions, degenerate rows, maps)
 *     against sd_sample over scattered rows. */
#include "cuda/cuda_backend.h"
#include "cuda/quant.cuh"
#include "cuda/mma_order.cuh"
#include "cuda/rng.cuh"
#include <cuda_bf16.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

extern "C" {
#include "sample/rng.h"
#include "sample/sample.h"
#include "util/dtype.h"
}

namespace {

struct Ctx {
    int bad = 0;
    char *msg;
    size_t cap;
    void fail(const char *fmt, ...) {
        if (bad++ == 0 && msg && cap) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(msg, cap, fmt, ap);
            va_end(ap);
        }
    }
};

/* splitmix64 */
struct Rng {
    uint64_t s;
    uint64_t next() {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    double unit() { return (double)(next() >> 11) * (1.0 / 9007199254740992.0); }
    float normal() {
        double u1 = unit() + 1e-300, u2 = unit();
        return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
};

void check_rng(Ctx &c, Rng &r) {
    for (int i = 0; i < 20000; i++) {
        uint64_t seed = r.next(), chi = r.next(), clo = r.next();
        uint32_t a[4], b[4];
        sd_philox_block(seed, chi, clo, a);
        sd_philox(seed, chi, clo, b);
        if (memcmp(a, b, sizeof a)) { c.fail("philox differs at seed %llu", (unsigned long long)seed); return; }
        int64_t pos = (int64_t)(r.next() % 100000);
        uint32_t stream = (uint32_t)(r.next() % 4), index = (uint32_t)r.next();
        if (sd_rng_bits_of(seed, pos, stream, index) != sd_rng_bits(seed, pos, stream, index)) {
            c.fail("rng bits differ at index %u", index);
            return;
        }
    }
}

bool same_double(double a, double b) { return sd_d2u(a) == sd_d2u(b); }

void check_log_gumbel(Ctx &c, Rng &r) {
    for (int i = 0; i < 400000; i++) {
        /* positive normal doubles of every exponent, and uniforms in (0, 1) */
        double x = i & 1 ? sd_u2d((r.next() & 0x000fffffffffffffull) | ((1 + r.next() % 2045) << 52))
                         : (double)(r.next() >> 12) * (1.0 / 4503599627370496.0) + 1e-300;
        if (!same_double(sd_rng_log_of(x), sd_rng_log(x))) { c.fail("log differs at %a", x); return; }
    }
    const uint64_t edges[] = {0ull, 1ull, 2ull, 0x000fffffffffffffull, 0x000ffffffffffffeull, 1ull << 51, (1ull << 51) - 1};
    for (int i = 0; i < 1000000 + 7; i++) {
        uint64_t bits = i < 7 ? edges[i] : r.next() >> 12;
        if (!same_double(sd_gumbel_of(bits), sd_gumbel_of_bits(bits))) {
            c.fail("gumbel differs at bits %#llx", (unsigned long long)bits);
            return;
        }
        /* the bound's contract (one inline body serves host and device, so it is checked by what
         * it must hold, not against itself) */
        if (!(sd_gumbel_bound_of(bits) >= sd_gumbel_of_bits(bits))) {
            c.fail("gumbel bound below the gumbel value at bits %#llx", (unsigned long long)bits);
            return;
        }
    }
}

/* exp(d) > 0 <=> d >= SDC_EXP_POS_MIN, for this libm, at the boundary and around it */
void check_underflow(Ctx &c, Rng &r) {
    double b = SDC_EXP_POS_MIN, below = nextafter(b, -INFINITY);
    if (!(exp(b) > 0) || exp(below) != 0.0) {
        c.fail("libm exp underflow boundary is not at %a", b);
        return;
    }
    for (int i = 0; i < 200000; i++) {
        double d = i & 1 ? -800.0 * r.unit() : sd_u2d(sd_d2u(b) + (r.next() % 64) - 32);
        if ((exp(d) > 0) != sdc_prob_positive(d)) { c.fail("underflow test differs at %a", d); return; }
    }
}

/* util/bits.h's conversions, built by the CUDA toolchain, against the CUDA headers' own
 * round-to-nearest-even conversions (host-callable), NaNs compared as NaN */
void check_halves(Ctx &c, Rng &r) {
    for (uint32_t h = 0; h < 65536; h++) {
        float a = sd_f16_to_f32((uint16_t)h), b = __half2float(__ushort_as_half((unsigned short)h));
        if (a != a ? b == b : sd_f2u(a) != sd_f2u(b)) { c.fail("f16->f32 differs at %#x", h); return; }
    }
    const uint32_t specials[] = {0u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0xffffffffu,
                                 0x477ff000u, 0x477fefffu, 0x33000000u, 0x33000001u, 0x38800000u, 0x387fffffu, 1u};
    for (uint32_t i = 0; i < (1u << 24) + 14u; i++) {
        uint32_t u = i < 14u ? specials[i] : (i << 8) ^ (uint32_t)(r.next() & 0xffu);
        float f = sd_u2f(u);
        uint16_t h = sd_f32_to_f16(f), hw = __half_as_ushort(__float2half_rn(f));
        uint16_t b = sd_f32_to_bf16(f), bw = __bfloat16_as_ushort(__float2bfloat16_rn(f));
        bool nan = f != f;
        if (nan ? (h & 0x7fffu) <= 0x7c00u : h != hw) { c.fail("f32->f16 differs at %#x", u); return; }
        if (nan ? (b & 0x7fffu) <= 0x7f80u : b != bw) { c.fail("f32->bf16 differs at %#x", u); return; }
    }
}

template <int BITS> void check_codes(Ctx &c, Rng &r) {
    const int per = 32 / BITS;
    const uint32_t mask = (1u << BITS) - 1u;
    for (int i = 0; i < 200000; i++) {
        uint32_t w = (uint32_t)r.next();
        int k = i % per;
        float q = (float)((w >> (BITS * k)) & mask);
        float qv = sdc_mm_qval<BITS>(w, k), xs = sdc_mm_xscale<BITS>(k);
        if (qv * xs != q) { c.fail("%d-bit code %d of %#x decodes to %g", BITS, k, w, (double)(qv * xs)); return; }
        if (sd_f2u(sdc_mm_qval_rk<BITS>(w, k, sdc_mm_magic())) != sd_f2u(qv)) {
            c.fail("%d-bit code %d of %#x: the register-magic decode differs", BITS, k, w);
            return;
        }
        float x = r.normal() * (float)ldexp(1.0, (int)(r.next() % 40) - 20), a = r.normal();
        if (sd_f2u(fmaf(qv, x * xs, a)) != sd_f2u(fmaf(q, x, a))) {
            c.fail("%d-bit fmaf identity fails for code %d of %#x", BITS, k, w);
            return;
        }
    }
}

/* One quantized row (cols, group, bf16 scales) as the matmul kernel computes it. */
template <int BITS> void check_mm_row(Ctx &c, Rng &r, int cols, int group) {
    const int E = BITS == 4 ? 32 : 16, Q = E / 4, per = 32 / BITS, nch = cols / E;
    std::vector<uint32_t> w(cols / per);
    std::vector<uint16_t> sc(cols / group), bi(cols / group);
    std::vector<float> x(cols);
    for (auto &v : w) v = (uint32_t)r.next();
    for (size_t g = 0; g < sc.size(); g++) {
        sc[g] = sd_f32_to_bf16(0.01f * (1.0f + r.normal() * 0.1f));
        bi[g] = sd_f32_to_bf16(-0.05f * r.normal());
    }
    for (auto &v : x) v = r.normal();
    float lane_acc[32];
    for (int l = 0; l < 32; l++) {
        float acc = 0.0f;
        for (int ch = l; ch < nch; ch += 32) {
            float dq = 0.0f, sx = 0.0f;
            for (int e = 0; e < E; e++) sx += x[ch * E + e];
            for (int m = 0; m < Q; m++) {
                uint32_t wd = w[ch * 4 + sdc_mm_gword<BITS>(m)];
                int kb = sdc_mm_gcode<BITS>(m);
                for (int e = 0; e < 4; e++) {
                    float xs = x[ch * E + 4 * m + e] * sdc_mm_xscale<BITS>(kb + e);
                    dq = fmaf(sdc_mm_qval<BITS>(wd, kb + e), xs, dq);
                }
            }
            int g = ch * E / group;
            acc = fmaf(sd_bf16_to_f32(sc[g]), dq, acc);
            acc = fmaf(sd_bf16_to_f32(bi[g]), sx, acc);
        }
        lane_acc[l] = acc;
    }
    for (int m = 16; m >= 1; m >>= 1) {
        float nxt[32];
        for (int l = 0; l < 32; l++) nxt[l] = lane_acc[l] + lane_acc[l ^ m];
        memcpy(lane_acc, nxt, sizeof nxt);
    }
    for (int l = 1; l < 32; l++)
        if (sd_f2u(lane_acc[l]) != sd_f2u(lane_acc[0])) { c.fail("butterfly lanes disagree"); return; }
    double ref = 0.0, mag = 0.0;
    for (int j = 0; j < cols; j++) {
        uint32_t q = (w[j / per] >> (BITS * (j % per))) & ((1u << BITS) - 1u);
        float wv = sd_bf16_to_f32(sc[j / group]) * (float)q + sd_bf16_to_f32(bi[j / group]);
        ref += (double)wv * x[j];
        mag += fabs((double)wv * x[j]);
    }
    if (fabs((double)lane_acc[0] - ref) > 1e-5 * mag + 1e-30)
        c.fail("%d-bit row of %d (group %d): %.9g vs reference %.9g", BITS, cols, group, (double)lane_acc[0], ref);
}

/* The device sampler's answer for one row, the three kernels' logic in sequence (entries taken
 * in reverse order, to show the reductions do not care). */
int32_t emu_sample(const float *row, int n, int vocab, const int32_t *map, double temp, bool greedy, uint64_t seed,
                   int64_t pos) {
    sdc_best am = sdc_best_none();
    for (int k = n - 1; k >= 0; k--) sdc_best_offer(&am, row[k], map ? map[k] : k);
    if (!greedy && am.i >= 0 && isfinite(am.v)) {
        const double zmax = (double)am.v / temp;
        const double thr = zmax + sd_gumbel_of(sd_rng_bits_of(seed, pos, 0u, (uint32_t)am.i));
        double bv = 0.0;
        int32_t bi = -1;
        for (int k = n - 1; k >= 0; k--) {
            double v;
            int32_t id = map ? map[k] : k;
            if (sdc_gumbel_cand(row[k], temp, zmax, thr, seed, pos, id, &v) && sdc_dbeats(v, id, bv, bi)) {
                bv = v;
                bi = id;
            }
        }
        return bi;
    }
    int32_t unmapped = -1;
    if (map && (am.i < 0 || am.v == -INFINITY)) {
        std::vector<char> in(vocab, 0);
        for (int k = 0; k < n; k++)
            if (map[k] >= 0 && map[k] < vocab) in[map[k]] = 1;
        for (int i = 0; i < vocab; i++)
            if (!in[i]) { unmapped = i; break; }
    }
    return sdc_sample_argmax_answer(am.v, am.i, unmapped);
}

void check_sampler(Ctx &c, Rng &r) {
    /* the per-token value, bit for bit sample.c's z + g (z = (double)logit / (double)temperature) */
    for (int i = 0; i < 100000; i++) {
        const float x = r.normal() * 5.0f, temp = (float)(0.05 + 3.0 * r.unit());
        const uint64_t seed = r.next();
        const int64_t pos = (int64_t)(r.next() % 100000);
        const int32_t id = (int32_t)(r.next() % 200000);
        const double z = (double)x / (double)temp;
        const double want = z + sd_gumbel_of_bits(sd_rng_bits(seed, pos, SD_RNG_STREAM_GUMBEL, (uint32_t)id));
        double got = 0.0;
        if (!sdc_gumbel_cand(x, (double)temp, z, -INFINITY, seed, pos, id, &got) || !same_double(got, want)) {
            c.fail("sampler: token %d at position %lld: %a, sample.c %a", id, (long long)pos, got, want);
            return;
        }
    }
    const int vocab = 3000;
    std::vector<float> row(vocab), full(vocab);
    std::vector<int32_t> map(vocab);
    for (int it = 0; it < 600 && !c.bad; it++) {
        const int kind = it % 10;
        const bool mapped = (it / 10) % 2;
        const int n = mapped ? 1 + (int)(r.next() % (vocab - 1)) : vocab - (int)(r.next() % 100);
        const double temps[] = {0.7, 1.0, 1.3, 0.0, 0.05, 4.0};
        specdec_sampling_params sp = specdec_sampling_default_params();
        sp.temperature = (float)temps[it % 6];
        sp.seed = r.next();
        const int64_t pos = (int64_t)(r.next() % 5000);
        for (int k = 0; k < n; k++) {
            float v = r.normal() * 3.0f;
            if (kind == 1 && r.next() % 7 == 0) v = -INFINITY;
            if (kind == 2 && r.next() % 7 == 0) v = NAN;
            if (kind == 3) v = (float)(int)(v);               /* many ties */
            if (kind == 4) v = -(float)(r.unit() * 1500.0);   /* probabilities underflow */
            if (kind == 5) v = -INFINITY;                     /* all -inf */
            if (kind == 6) v = r.next() % 2 ? NAN : -INFINITY;
            if (kind == 7) v = NAN;                           /* all NaN */
            if (kind == 8 && k % 97 == 3) v = INFINITY;
            row[k] = v;
        }
        if (kind == 9 && n > 2) row[n - 1] = row[1] = 50.0f;   /* tied maximum */
        /* a map: distinct ids, in an order unrelated to the ids (ties go to the lower id) */
        for (int i = 0; i < vocab; i++) map[i] = i;
        for (int i = vocab - 1; i > 0; i--) {
            int j = (int)(r.next() % (uint64_t)(i + 1));
            int32_t t = map[i];
            map[i] = map[j];
            map[j] = t;
        }
        const int V = mapped ? vocab : n;
        for (int i = 0; i < V; i++) full[i] = mapped ? -INFINITY : row[i];
        if (mapped)
            for (int k = 0; k < n; k++) full[map[k]] = row[k];
        const int32_t want = sd_sample(NULL, &sp, full.data(), V, pos);
        const int32_t got = emu_sample(row.data(), n, V, mapped ? map.data() : NULL, (double)sp.temperature,
                                       !(sp.temperature > 0), sp.seed, pos);
        if (got != want)
            c.fail("sampler: row kind %d (%s, n %d, temperature %g): device logic picks %d, sd_sample %d", kind,
                   mapped ? "mapped" : "plain", n, (double)sp.temperature, got, want);
    }
}

/* mma_i4.cu's class order: every class once, and the four warps' subtrees summed as the xor
 * butterfly sums 32 lanes, bit for bit, over chains of the contract's per-chunk arithmetic with
 * values of widely spread magnitudes (so that a different order rounds differently). */
void check_mq_order(Ctx &c, Rng &r) {
    int seen[32] = {0};
    for (int w = 0; w < 4; w++)
        for (int i = 0; i < 8; i++) seen[sdc_mq_class(w, i)]++;
    for (int l = 0; l < 32; l++)
        if (seen[l] != 1) { c.fail("mma order: class %d taken %d times", l, seen[l]); return; }
    for (int trial = 0; trial < 4000; trial++) {
        const int nj = 1 + (int)(r.next() % 12);
        float chain[32];
        for (int l = 0; l < 32; l++) {
            float acc = 0.0f;
            for (int j = 0; j < nj; j++) {
                const float s = ldexpf(r.normal(), (int)(r.next() % 21) - 10), d = (float)r.unit() * 0.01f;
                const float b = r.normal(), dy = r.normal() * 4.0f;
                const int32_t I = (int32_t)(r.next() % 60001) - 30000;
                acc = fmaf(s, (float)I * d, acc);
                acc = fmaf(b, dy, acc);
            }
            chain[l] = acc;
        }
        float v[32], t[32];
        memcpy(v, chain, sizeof v);
        for (int m = 16; m >= 1; m >>= 1) {
            for (int l = 0; l < 32; l++) t[l] = v[l] + v[l ^ m];
            memcpy(v, t, sizeof v);
        }
        float sub[4];
        for (int w = 0; w < 4; w++) {
            float x[1], st[3][1] = {{0.0f}, {0.0f}, {0.0f}};
            for (int i = 0; i < 8; i++) {
                x[0] = chain[sdc_mq_class(w, i)];
                sdc_mq_push<1>(i, x, st);
            }
            sub[w] = x[0];
        }
        const float y = sdc_mq_top(sub[0], sub[1], sub[2], sub[3]);
        if (sd_f2u(y) != sd_f2u(v[0])) {
            c.fail("mma order: %.9g against the butterfly's %.9g (%d chunks a class)", (double)y, (double)v[0], nj);
            return;
        }
    }
}

} // namespace

extern "C" int sd_cuda_selfcheck(char *msg, size_t cap) {
    Ctx c;
    c.msg = msg;
    c.cap = cap;
    if (msg && cap) msg[0] = 0;
    Rng r{0x5EED5EEDull};
    check_rng(c, r);
    check_log_gumbel(c, r);
    check_underflow(c, r);
    check_halves(c, r);
    check_codes<4>(c, r);
    check_codes<8>(c, r);
    check_mm_row<4>(c, r, 4096, 64);
    check_mm_row<4>(c, r, 384, 32);
    check_mm_row<4>(c, r, 1024, 128);
    check_mm_row<8>(c, r, 4096, 64);
    check_mm_row<8>(c, r, 96, 32);
    check_sampler(c, r);
    check_mq_order(c, r);
    return c.bad;
}
