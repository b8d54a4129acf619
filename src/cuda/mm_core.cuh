/* mm_core.cuh: the per-row arithmetic of every matmul kernel (matmul.cu's tiled kernel, gemv.cu's
 * kernel for T <= 8, and the fused LM head built on each): the weight formats, the loads of one
 * 16-byte chunk of R rows, the staging of x, and a chunk's contribution to the accumulators.
 * Both kernels call these very functions with lane l of a row's lane group owning chunks l,
 * l + 32, l + 64, ... of the row, so a row's value is the same bits from either kernel (matmul.cu
 * and gemv.cu give the argument). Only the number of rows R a warp carries differs, and rows
 * are independent register chains. */
#pragma once
#include "cuda/matmul.h"
#include "cuda/common.cuh"
#include "cuda/quant.cuh"

/* `return CALL(F);` for the format code fmt as the constant F, nullptr for an unknown code: the
 * kernel pickers of matmul.cu, gemv.cu and stream.cu (each with its own CALL) share it. */
#define SDC_MM_FMT_SWITCH(fmt, CALL)                   \
    switch (fmt) {                                     \
    case SDC_MM_F32: return CALL(SDC_MM_F32);          \
    case SDC_MM_F16: return CALL(SDC_MM_F16);          \
    case SDC_MM_BF16: return CALL(SDC_MM_BF16);        \
    case SDC_MM_Q4: return CALL(SDC_MM_Q4);            \
    case SDC_MM_Q8: return CALL(SDC_MM_Q8);            \
    case SDC_MM_Q4I: return CALL(SDC_MM_Q4I);          \
    case SDC_MM_Q8I: return CALL(SDC_MM_Q8I);          \
    default: return nullptr;                           \
    }

namespace {

/* E: columns of a 16-byte chunk; XG: 16-byte granules of staged x per chunk and token; SF: floats
 * of per-chunk sums staged beside them (quantized: sum x; int8: the block scale d and d * sum q). */
template <int FMT> struct Fmt;
template <> struct Fmt<SDC_MM_F32> { static constexpr int E = 4, BITS = 0, ES = 4, XG = 1, SF = 0; static constexpr bool QUANT = false, I8 = false; };
template <> struct Fmt<SDC_MM_F16> { static constexpr int E = 8, BITS = 0, ES = 2, XG = 2, SF = 0; static constexpr bool QUANT = false, I8 = false; };
template <> struct Fmt<SDC_MM_BF16> { static constexpr int E = 8, BITS = 0, ES = 2, XG = 2, SF = 0; static constexpr bool QUANT = false, I8 = false; };
template <> struct Fmt<SDC_MM_Q4> { static constexpr int E = 32, BITS = 4, ES = 0, XG = 8, SF = 1; static constexpr bool QUANT = true, I8 = false; };
template <> struct Fmt<SDC_MM_Q8> { static constexpr int E = 16, BITS = 8, ES = 0, XG = 4, SF = 1; static constexpr bool QUANT = true, I8 = false; };
template <> struct Fmt<SDC_MM_Q4I> { static constexpr int E = 32, BITS = 4, ES = 0, XG = 2, SF = 2; static constexpr bool QUANT = true, I8 = true; };
template <> struct Fmt<SDC_MM_Q8I> { static constexpr int E = 16, BITS = 8, ES = 0, XG = 1, SF = 2; static constexpr bool QUANT = true, I8 = true; };

SDC_HD int mm_swz(int f) { return f ^ ((f >> 3) & 7); }
SDC_HD uint32_t u4at(const uint4 &v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

/* One chunk of R rows: the 16 bytes of each row and, quantized, its group's scale and bias. */
template <int R> struct Chunk {
    uint4 w[R];
    float s[R], b[R];
};

/* Where token t of launch row `row` is stored (sdc_mm_params.nseg): selects on constant
 * indices, so nothing of the parameter block goes to local memory. */
SDC_D float *mm_out(const sdc_mm_params &p, int row, int t) {
    float *y = p.y;
    int ldy = p.ldy, row0 = 0;
#pragma unroll
    for (int s = 1; s < SDC_MM_SEGS; s++)
        if (s < p.nseg && row >= p.seg[s].row0) y = p.seg[s].y, ldy = p.seg[s].ldy, row0 = p.seg[s].row0;
    return y + (size_t)t * (size_t)ldy + (size_t)(row - row0);
}

/* Store token t's value v of launch row `row`: into its output, or added to it (p.acc). */
SDC_D void mm_store(const sdc_mm_params &p, int row, int t, float v) {
    float *o = mm_out(p, row, t);
    *o = p.acc ? *o + v : v;
}

/* A weight word loaded without a place in L1 (ld.global.nc.L1::no_allocate): each is read
 * once a launch, and allocated in L1 they evicted x, which every warp of the SM reads again for
 * every row (gemv_i4.cu at T = 4: five times the bytes of the weights a warp reads; Nsight
 * Compute on an H100 put its L1 hit rate at 78%, its largest stall on L1TEX loads). */
SDC_D uint4 mm_ldw(const uint4 *p) {
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
}
SDC_D uint32_t mm_ldw(const uint32_t *p) {
    uint32_t v;
    asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}
SDC_D unsigned short mm_ldw(const unsigned short *p) {
    unsigned short v;
    asm("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(v) : "l"(p));
    return v;
}
SDC_D float mm_ldw(const float *p) {
    float v;
    asm("ld.global.nc.L1::no_allocate.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}

/* A weight word as the kernel reads it: ONCE (gemv.cu, each word used by one warp) without a
 * place in L1; else through L1 (matmul.cu's token tiles read a chunk again in the next tile:
 * there L1::no_allocate took the embedded LM head at T = 64 from 1541 to 1602 us on an H100,
 * docs/benchmarks/cuda-ldw-kv-h100-2026-12-07.md). */
template <bool ONCE, typename V> SDC_D V mm_ldg(const V *a) {
    if constexpr (ONCE) return mm_ldw(a);
    else return __ldg(a);
}

template <int FMT, bool ONCE>
SDC_D uint4 mm_load16(const sdc_mm_params &p, size_t rowbytes, int row, int c) {
    using F = Fmt<FMT>;
    const char *base = (const char *)p.w + (size_t)row * rowbytes;
    if (p.wvec) return mm_ldg<ONCE>((const uint4 *)base + c);
    uint32_t wd[4] = {0u, 0u, 0u, 0u};
    if constexpr (F::QUANT) {
#pragma unroll
        for (int i = 0; i < 4; i++) wd[i] = mm_ldg<ONCE>((const uint32_t *)base + 4 * c + i);
    } else if constexpr (F::ES == 4) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int col = c * 4 + e;
            if (col < p.cols) wd[e] = mm_ldg<ONCE>((const uint32_t *)base + col);
        }
    } else {
#pragma unroll
        for (int e = 0; e < 8; e++) {
            const int col = c * 8 + e;
            if (col < p.cols) wd[e >> 1] |= (uint32_t)mm_ldg<ONCE>((const unsigned short *)base + col) << (16 * (e & 1));
        }
    }
    return make_uint4(wd[0], wd[1], wd[2], wd[3]);
}

template <int FMT, bool ONCE, int R>
SDC_D void mm_load(const sdc_mm_params &p, size_t rowbytes, int ngroups, const int (&row)[R], int c, Chunk<R> &k) {
    using F = Fmt<FMT>;
#pragma unroll
    for (int r = 0; r < R; r++) k.w[r] = mm_load16<FMT, ONCE>(p, rowbytes, row[r], c);
    if constexpr (F::QUANT) {
        /* the scales and biases as the aligned 32-bit words holding them, every load of the
         * chunk issued before any is used (a load per dtype behind a branch kept them apart, and
         * the quantized kernels waited on memory several times per chunk where dense ones wait
         * once); the backend's allocations are whole 16-byte units, so a word never leaves them */
        const int g = (c * F::E) / p.group;
        const int es = p.sdt == SDC_F32 ? 4 : 2;
        uint32_t ws[R], wb[R];
        int hi[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const size_t off = ((size_t)row[r] * (size_t)ngroups + (size_t)g) * (size_t)es;
            const uintptr_t as = (uintptr_t)p.scales + off, ab = (uintptr_t)p.biases + off;
            ws[r] = mm_ldg<ONCE>((const uint32_t *)(as & ~(uintptr_t)3));
            wb[r] = mm_ldg<ONCE>((const uint32_t *)(ab & ~(uintptr_t)3));
            hi[r] = (int)((as >> 1) & 1) | (int)((ab >> 1) & 1) << 1;
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            k.s[r] = sdc_wordf(ws[r], hi[r] & 1, p.sdt);
            k.b[r] = sdc_wordf(wb[r], hi[r] >> 1, p.sdt);
        }
    }
}

/* The fused LM head's result of a block: per token, the best of its nw warps' bests wb (nw, T)
 * into p.part (T, grid). After the barrier that completes wb, by the threads 0 .. nthreads - 1
 * (an argmax is exact: the warps' order does not matter). */
SDC_D void mm_lma_part(const sdc_mm_params &p, const sdc_best *wb, int nw, int nthreads) {
    for (int t = threadIdx.x; t < p.T; t += nthreads) {
        sdc_best b = wb[t];
        for (int w = 1; w < nw; w++) sdc_best_offer(&b, wb[w * p.T + t].v, wb[w * p.T + t].i);
        p.part[(size_t)t * gridDim.x + blockIdx.x] = b;
    }
}

/* Dense granule m (4 columns) of a chunk as f32. */
template <int FMT>
SDC_D void mm_dense4(const uint4 &w, int m, float f[4]) {
    if constexpr (FMT == SDC_MM_F32) {
        f[0] = __uint_as_float(w.x); f[1] = __uint_as_float(w.y);
        f[2] = __uint_as_float(w.z); f[3] = __uint_as_float(w.w);
    } else {
        const uint32_t a = u4at(w, 2 * m), b = u4at(w, 2 * m + 1);
        if constexpr (FMT == SDC_MM_BF16) {
            f[0] = __uint_as_float(a << 16); f[1] = __uint_as_float(a & 0xffff0000u);
            f[2] = __uint_as_float(b << 16); f[3] = __uint_as_float(b & 0xffff0000u);
        } else {
            f[0] = __half2float(__ushort_as_half((unsigned short)(a & 0xffffu)));
            f[1] = __half2float(__ushort_as_half((unsigned short)(a >> 16)));
            f[2] = __half2float(__ushort_as_half((unsigned short)(b & 0xffffu)));
            f[3] = __half2float(__ushort_as_half((unsigned short)(b >> 16)));
        }
    }
}

/* Columns col .. col + 3 of the activation row xr, zeros past cols. */
SDC_D float4 mm_x4(const sdc_mm_params &p, const float *xr, int col) {
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (p.xvec && col + 4 <= p.cols) return __ldg((const float4 *)(xr + col));
    if (col + 0 < p.cols) v.x = __ldg(xr + col + 0);
    if (col + 1 < p.cols) v.y = __ldg(xr + col + 1);
    if (col + 2 < p.cols) v.z = __ldg(xr + col + 2);
    if (col + 3 < p.cols) v.w = __ldg(xr + col + 3);
    return v;
}

/* Granule i of the staging (token i / xt4, granule i % xt4 of the tile) from global memory:
 * zeros past T, past cols or past the end. */
template <int TT>
SDC_D float4 mm_xgran(const sdc_mm_params &p, int tb, int col0, int xt4, int i) {
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (i >= TT * xt4) return v;
    const int t = i / xt4, col = col0 + 4 * (i - t * xt4);
    if (tb + t >= p.T) return v;
    return mm_x4(p, p.x + (size_t)(tb + t) * (size_t)p.ldx, col);
}

/* u32 dot product of 4 unsigned bytes (a: weight codes) with 4 signed bytes (b: activations),
 * added to c: exact in int32 for every chunk (|sum| <= 32 * 255 * 127 < 2^31). */
SDC_D int32_t mm_dp4a_us(uint32_t a, uint32_t b, int32_t c) {
    int32_t d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

/* A chunk's integer sum I as a float without I2F (a quarter-rate conversion on sm_80 / sm_90;
 * mma_tile.cu): the sum starts from MM_I8_BIAS, the bits of the float 1.5 * 2^23, instead of 0,
 * so it ends as the bits of the float 1.5 * 2^23 + I (|I| <= 16 * 255 * 127 < 2^22 for either
 * format keeps the exponent), and one exact subtraction leaves I: the value (float) I has, at
 * full rate. */
#define MM_I8_BIAS 0x4B400000
SDC_D float mm_i8_float(int32_t biased) { return __fsub_rn(__int_as_float(biased), 12582912.0f); }

/* The int8 form of x (precision int8), made once per call by matmul.cu's preparation kernel
 * into scratch (p.xq, p.xsd; p.ncp chunks per token, a multiple of 32) and read from there: by
 * gemv.cu's kernel straight from global memory, by the tiled kernel through its shared tile.
 * Each block of 32 columns is quantized exactly as the CPU's sd_i8_quant_block does it: amax =
 * max |x|, q = rint(x * (127 / amax)) clamped to [-127, 127], d = amax / 127 (IEEE division, no
 * contraction), a block holding a non-finite value or only zeros giving q = 0 and d = 0; so both
 * backends see the same codes. Per token:
 *   xq: the codes in the order the weights' nibbles come out of a word. 4-bit: chunk c (32
 *       columns, one block) is two 16-byte granules, 2c holding the columns that pair with the
 *       low nibbles (byte 4m + e: column 8m + 2e) and 2c + 1 those of the high nibbles (8m + 2e
 *       + 1); 8-bit: chunk c (16 columns) is one granule in column order. Granule f is stored at
 *       mm_swz(f) (a permutation inside each run of 8, which tiles of whole 8-granule runs keep),
 *       so shared-memory copies read without bank conflicts.
 *   xsd: per chunk (d, d * X), X the sum of the chunk's codes.
 * One warp quantizes 128 columns (quad qd of a token): lane l holds columns 4l .. 4l + 3 in v, 8
 * lanes a block. xb: the token's granules as bytes; sd: the token's chunk pairs. */
template <int BITS>
SDC_D void mm_i8_quad(const float4 v, int lane, unsigned char *xb, float2 *sd, int qd) {
    const float f[4] = {v.x, v.y, v.z, v.w};
    uint32_t a = 0u;   /* |x| as bits: ordered like the values, NaN and inf above every finite */
#pragma unroll
    for (int k = 0; k < 4; k++) a = max(a, __float_as_uint(f[k]) & 0x7fffffffu);
#pragma unroll
    for (int m = 1; m <= 4; m <<= 1) a = max(a, __shfl_xor_sync(0xffffffffu, a, m));
    int q[4] = {0, 0, 0, 0};
    float d = 0.0f;
    if (a != 0u && a < 0x7f800000u) {
        const float amax = __uint_as_float(a), id = __fdiv_rn(127.0f, amax);
#pragma unroll
        for (int k = 0; k < 4; k++) q[k] = (int)fminf(fmaxf(rintf(__fmul_rn(f[k], id)), -127.0f), 127.0f);
        d = __fdiv_rn(amax, 127.0f);
    }
    int X = q[0] + q[1] + q[2] + q[3];
    if constexpr (BITS == 4) {
        const int cl = qd * 4 + (lane >> 3), m = (lane & 7) >> 1, e = 2 * (lane & 1);
        *(unsigned short *)(xb + 16 * mm_swz(2 * cl) + 4 * m + e) = (unsigned short)((q[0] & 0xff) | (q[2] & 0xff) << 8);
        *(unsigned short *)(xb + 16 * mm_swz(2 * cl + 1) + 4 * m + e) = (unsigned short)((q[1] & 0xff) | (q[3] & 0xff) << 8);
#pragma unroll
        for (int m2 = 1; m2 <= 4; m2 <<= 1) X += __shfl_xor_sync(0xffffffffu, X, m2);
        if ((lane & 7) == 0) sd[cl] = make_float2(d, __fmul_rn(d, (float)X));
    } else {
        const int cl = qd * 8 + (lane >> 2);
        *(uint32_t *)(xb + 16 * mm_swz(cl) + 4 * (lane & 3)) =
            (uint32_t)(q[0] & 0xff) | (uint32_t)(q[1] & 0xff) << 8 | (uint32_t)(q[2] & 0xff) << 16 | (uint32_t)(q[3] & 0xff) << 24;
#pragma unroll
        for (int m2 = 1; m2 <= 2; m2 <<= 1) X += __shfl_xor_sync(0xffffffffu, X, m2);
        if ((lane & 3) == 0) sd[cl] = make_float2(d, __fmul_rn(d, (float)X));
    }
}

/* One 32-column block of the int8 form of x for 4-bit rows, lane l holding column l of chunk c:
 * mm_i8_quad's quantization and layout for one block where its warp does four (the same amax,
 * codes, d and X, so the same bytes), for kernels that hold a block's 32 values one a lane (the
 * MLP's gate/up epilogue, gemv_i4.cu; the attention's output, attn_core.cuh): the codes into xb
 * (a token's granules), (d, d X) into sd[c]. Every lane of the warp calls it. */
SDC_D void mm_i8_block32(float v, int lane, unsigned char *xb, float2 *sd, int c) {
    uint32_t a = __float_as_uint(v) & 0x7fffffffu;
#pragma unroll
    for (int m = 1; m <= 16; m <<= 1) a = max(a, __shfl_xor_sync(0xffffffffu, a, m));
    int q = 0;
    float d = 0.0f;
    if (a != 0u && a < 0x7f800000u) {
        const float amax = __uint_as_float(a), id = __fdiv_rn(127.0f, amax);
        q = (int)fminf(fmaxf(rintf(__fmul_rn(v, id)), -127.0f), 127.0f);
        d = __fdiv_rn(amax, 127.0f);
    }
    int X = q;
#pragma unroll
    for (int m = 1; m <= 16; m <<= 1) X += __shfl_xor_sync(0xffffffffu, X, m);
    /* column j of a chunk: the low nibbles' granule for even j, the high ones' for odd, byte
     * 4 (j >> 3) + ((j & 7) >> 1) */
    xb[16 * mm_swz(2 * c + (lane & 1)) + 4 * (lane >> 3) + ((lane & 7) >> 1)] = (unsigned char)(q & 0xff);
    if (lane == 0) sd[c] = make_float2(d, __fmul_rn(d, (float)X));
}

/* The tiled kernel's int8 tile: tokens tb .., chunks [c_lo, c_lo + tile_ch) of the prepared x
 * copied into shared memory (zeros past T and past the prepared chunks), each granule moved from
 * its place in the row's swizzle to its place in the tile's. */
template <int FMT, int TT>
SDC_D void mm_stage_i8(const sdc_mm_params &p, uint4 *xs, float2 *sd, int tb, int c_lo, int tile_ch) {
    using F = Fmt<FMT>;
    const int xt4 = tile_ch * F::XG, n4 = TT * xt4, nsd = TT * tile_ch, pld = p.ncp * F::XG;
    const uint4 *gx = (const uint4 *)p.xq;
    const float2 *gs = (const float2 *)p.xsd;
    for (int i = threadIdx.x; i < n4; i += blockDim.x) {   /* logical granule f of the tile, in both swizzles */
        const int t = i / xt4, f = i - t * xt4, gf = c_lo * F::XG + f;
        xs[t * xt4 + mm_swz(f)] =
            tb + t < p.T && gf < pld ? __ldg(gx + (size_t)(tb + t) * pld + mm_swz(gf)) : make_uint4(0u, 0u, 0u, 0u);
    }
    for (int i = threadIdx.x; i < nsd; i += blockDim.x) {
        const int t = i / tile_ch, c = c_lo + (i - t * tile_ch);
        sd[i] = tb + t < p.T && c < p.ncp ? __ldg(gs + (size_t)(tb + t) * p.ncp + c) : make_float2(0.f, 0.f);
    }
}

/* Stage x rows tb .. tb+TT-1, columns of chunks [c_lo, c_lo + tile_ch), into xs (TT, tile_ch*Q
 * float4, swizzled); quantized: x scaled per column by 2^-p, and sx (TT, tile_ch) the chunk sums
 * of the unscaled x in column order. Rows past T and columns past cols are zeros. Three steps
 * with a barrier between each (every thread of the block calls it): x lands unscaled, each
 * chunk sum is read back from shared memory by one thread (its granules in column order, the
 * swizzle keeping a warp's 16-byte reads conflict-free; global loads of 32 consecutive floats
 * per thread were a scatter of 32 cache lines per instruction), then the granules are scaled in
 * place. */
template <int FMT, int TT>
SDC_D void mm_stage(const sdc_mm_params &p, float4 *xs, float *sx, int tb, int c_lo, int tile_ch) {
    using F = Fmt<FMT>;
    if constexpr (F::I8) {
        mm_stage_i8<FMT, TT>(p, (uint4 *)xs, (float2 *)sx, tb, c_lo, tile_ch);
        return;
    }
    constexpr int E = F::E, Q = E / 4, U = 4;
    const int xt4 = tile_ch * Q, col0 = c_lo * E, bd = blockDim.x, n4 = TT * xt4;
    for (int i0 = threadIdx.x; i0 < n4; i0 += U * bd) {
        float4 v[U];
#pragma unroll
        for (int u = 0; u < U; u++) v[u] = mm_xgran<TT>(p, tb, col0, xt4, i0 + u * bd);   /* the loads first */
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int i = i0 + u * bd;
            if (i >= n4) break;
            const int t = i / xt4, f = i - t * xt4;
            xs[t * xt4 + mm_swz(f)] = v[u];
        }
    }
    if constexpr (F::QUANT) {
        __syncthreads();
        for (int i = threadIdx.x; i < TT * tile_ch; i += bd) {
            const int t = i / tile_ch, cl = i - t * tile_ch;
            float s = 0.0f;
#pragma unroll
            for (int m = 0; m < Q; m++) {
                const float4 v = xs[t * xt4 + mm_swz(cl * Q + m)];
                s += v.x;
                s += v.y;
                s += v.z;
                s += v.w;
            }
            sx[i] = s;
        }
        __syncthreads();
        for (int i = threadIdx.x; i < n4; i += bd) {
            const int t = i / xt4, f = i - t * xt4;
            const int kb = sdc_mm_gcode<F::BITS>(f % Q);   /* the tile starts at a chunk */
            float4 v = xs[t * xt4 + mm_swz(f)];
            v.x *= sdc_mm_xscale<F::BITS>(kb + 0);
            v.y *= sdc_mm_xscale<F::BITS>(kb + 1);
            v.z *= sdc_mm_xscale<F::BITS>(kb + 2);
            v.w *= sdc_mm_xscale<F::BITS>(kb + 3);
            xs[t * xt4 + mm_swz(f)] = v;
        }
    }
}

/* The chunk's contribution to acc[r][t] (chunk index cl within the staged tile). */
template <int FMT, int TT, int R>
SDC_D void mm_chunk(const Chunk<R> &k, int cl, const float4 *xs, const float *sx, int xt4, int tile_ch,
                    float (&acc)[R][TT]) {
    using F = Fmt<FMT>;
    constexpr int Q = F::E / 4;
    if constexpr (F::I8) {
        /* per (row, token): I = sum q_w q_x over the chunk (exact integers), then
         * acc = fma(s, I * d, acc); acc = fma(b, d * X, acc). (mm_i8_float's biased sum in place
         * of (float) I changes ptxas's spills of gemv_i4.cu's verify forms both ways, 8 -> 40
         * bytes at T = 6 among them; not taken here until measured.) */
        const uint4 *xq = (const uint4 *)xs;
        const float2 *sd = (const float2 *)sx;
        uint32_t lo[R][4], hi[R][4];
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int m = 0; m < 4; m++) {
                const uint32_t w = u4at(k.w[r], m);
                if constexpr (F::BITS == 4) {
                    lo[r][m] = w & 0x0F0F0F0Fu;
                    hi[r][m] = (w >> 4) & 0x0F0F0F0Fu;
                } else {
                    lo[r][m] = w;
                    hi[r][m] = 0u;
                }
            }
#pragma unroll
        for (int t = 0; t < TT; t++) {
            const float2 dd = sd[t * tile_ch + cl];
            uint4 xl, xh = make_uint4(0u, 0u, 0u, 0u);
            if constexpr (F::BITS == 4) {
                xl = xq[t * xt4 + mm_swz(2 * cl)];
                xh = xq[t * xt4 + mm_swz(2 * cl + 1)];
            } else {
                xl = xq[t * xt4 + mm_swz(cl)];
            }
#pragma unroll
            for (int r = 0; r < R; r++) {
                int32_t I = 0;
#pragma unroll
                for (int m = 0; m < 4; m++) {
                    I = mm_dp4a_us(lo[r][m], u4at(xl, m), I);
                    if constexpr (F::BITS == 4) I = mm_dp4a_us(hi[r][m], u4at(xh, m), I);
                }
                acc[r][t] = fmaf(k.s[r], __fmul_rn((float)I, dd.x), acc[r][t]);
                acc[r][t] = fmaf(k.b[r], dd.y, acc[r][t]);
            }
        }
    } else if constexpr (F::QUANT) {
        const uint32_t magic = sdc_mm_magic();
        float dq[R][TT];
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int t = 0; t < TT; t++) dq[r][t] = 0.0f;
#pragma unroll
        for (int m = 0; m < Q; m++) {
            float q[R][4];
#pragma unroll
            for (int r = 0; r < R; r++) {
                const uint32_t wd = u4at(k.w[r], sdc_mm_gword<F::BITS>(m));
                const int kb = sdc_mm_gcode<F::BITS>(m);
#pragma unroll
                for (int e = 0; e < 4; e++) q[r][e] = sdc_mm_qval_rk<F::BITS>(wd, kb + e, magic);
            }
#pragma unroll
            for (int t = 0; t < TT; t++) {
                const float4 xv = xs[t * xt4 + mm_swz(cl * Q + m)];
#pragma unroll
                for (int r = 0; r < R; r++) {
                    dq[r][t] = fmaf(q[r][0], xv.x, dq[r][t]);
                    dq[r][t] = fmaf(q[r][1], xv.y, dq[r][t]);
                    dq[r][t] = fmaf(q[r][2], xv.z, dq[r][t]);
                    dq[r][t] = fmaf(q[r][3], xv.w, dq[r][t]);
                }
            }
        }
#pragma unroll
        for (int t = 0; t < TT; t++) {
            const float st = sx[t * tile_ch + cl];
#pragma unroll
            for (int r = 0; r < R; r++) {
                acc[r][t] = fmaf(k.s[r], dq[r][t], acc[r][t]);
                acc[r][t] = fmaf(k.b[r], st, acc[r][t]);
            }
        }
    } else {
#pragma unroll
        for (int m = 0; m < Q; m++) {
            float f[R][4];
#pragma unroll
            for (int r = 0; r < R; r++) mm_dense4<FMT>(k.w[r], m, f[r]);
#pragma unroll
            for (int t = 0; t < TT; t++) {
                const float4 xv = xs[t * xt4 + mm_swz(cl * Q + m)];
#pragma unroll
                for (int r = 0; r < R; r++) {
                    acc[r][t] = fmaf(f[r][0], xv.x, acc[r][t]);
                    acc[r][t] = fmaf(f[r][1], xv.y, acc[r][t]);
                    acc[r][t] = fmaf(f[r][2], xv.z, acc[r][t]);
                    acc[r][t] = fmaf(f[r][3], xv.w, acc[r][t]);
                }
            }
        }
    }
}

/* The token tile of a gemv.cu or gemv_i4.cu launch of T tokens (1..8): T itself up to 6, 8 for
 * 7 and 8. A tile is never padded to a power of two, so a verify of 3, 5 or 6 tokens does that
 * many tokens' work, not 4's or 8's. */
inline int mm_gemv_tile(int T) { return T <= 6 ? T : 8; }

/* The launch shape of gemv.cu's and gemv_i4.cu's kernels, whose warps walk `units` units of
 * rows grid-stride: blocks of 8 or 4 warps, whichever keeps more warps resident (ties: 4,
 * spreading the rows over more SMs). A block's shared memory is smem0 plus, for the fused LM head
 * (lma), its warps' bests (nw x T); block sizes needing more than cap bytes are left out. Fills
 * *nw, *nrb (row blocks), *smem and *grid; returns 1, 0 when no block size fits, -1 on a CUDA
 * error (in *e). Nothing here changes a row's arithmetic. */
inline int mm_launch_shape(const void *fn, long units, long smem0, bool lma, int T, long cap, const sdc_dev *d, int *nw,
                           int *nrb, int *smem, int *grid, cudaError_t *e) {
    long best = -1;
    for (int w = 8; w >= 4; w >>= 1) {
        const long rb = (units + w - 1) / w;
        const long sm = smem0 + (lma ? (long)w * T * (long)sizeof(sdc_best) : 0);
        if (sm > cap) continue;
        int per_sm = 0;
        *e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, w * 32, (size_t)sm);
        if (*e != cudaSuccess) return -1;
        if (per_sm < 1) continue;
        long g = (long)per_sm * d->n_sm;
        if (g > rb) g = rb;
        if (lma && g > SDC_LMA_MAX_GRID) g = SDC_LMA_MAX_GRID;
        if (g * w < best) continue;
        best = g * w;
        *nw = w;
        *nrb = (int)rb;
        *smem = (int)sm;
        *grid = (int)g;
    }
    return best < 0 ? 0 : 1;
}

} // namespace
