/* quant.cuh: how the matmul kernels turn a 4- or 8-bit code into a float without a shift per
 * code or an int-to-float conversion (see matmul.cu). Code k of a 32-bit word (element j with
 * j % (32/bits) == k) is read in place at bit position p(k): the word itself for the low codes,
 * the word shifted right by 12 (4-bit) or 16 (8-bit) for the rest, so every code sits below bit
 * 20. OR-ing the exponent of 2^23 makes the float 2^23 + q 2^p; subtracting 2^23 leaves q 2^p
 * exactly. The activation of that column is staged times 2^-p (exact), and since fmaf rounds
 * the exact product once, fmaf(q 2^p, x 2^-p, a) == fmaf(q, x, a) bit for bit. __host__
 * __device__, so selfcheck.cu checks these identities on the CPU. */
#pragma once
#include "cuda/common.cuh"

template <int BITS> SDC_HD int sdc_mm_qpos(int k) {
    return BITS == 4 ? (k < 5 ? 4 * k : 4 * k - 12) : (k < 2 ? 8 * k : 8 * k - 16);
}
/* q * 2^p for code k of word w */
template <int BITS> SDC_HD float sdc_mm_qval(uint32_t w, int k) {
    const uint32_t v = BITS == 4 ? (k < 5 ? w : (w >> 12)) : (k < 2 ? w : (w >> 16));
    const uint32_t mask = (BITS == 4 ? 0xFu : 0xFFu) << sdc_mm_qpos<BITS>(k);
    return sd_u2f((v & mask) | 0x4B000000u) - 8388608.0f;
}
/* The same value as sdc_mm_qval for code K, with the mask-or as one LOP3 on the device: magic
 * holds 0x4B000000 in a register (sdc_mm_magic). With both constants as immediates the compiler
 * splits (v & mask) | 0x4B000000 into an AND and an OR: a 32-code chunk's dq chain measured 168
 * instructions that way and 136 this way (cubin .text sizes). */
template <int BITS, int K> SDC_HD float sdc_mm_qval_r(uint32_t w, uint32_t magic) {
    constexpr int P = BITS == 4 ? (K < 5 ? 4 * K : 4 * K - 12) : (K < 2 ? 8 * K : 8 * K - 16);
    constexpr uint32_t MASK = (BITS == 4 ? 0xFu : 0xFFu) << P;
    const uint32_t v = BITS == 4 ? (K < 5 ? w : (w >> 12)) : (K < 2 ? w : (w >> 16));
#ifdef __CUDA_ARCH__
    uint32_t r;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(v), "n"(MASK), "r"(magic));   /* (a & b) | c */
    return __uint_as_float(r) - 8388608.0f;
#else
    float f;
    const uint32_t r = (v & MASK) | magic;
    memcpy(&f, &r, 4);
    return f - 8388608.0f;
#endif
}
template <int BITS> SDC_HD float sdc_mm_qval_rk(uint32_t w, int k, uint32_t magic) {
    switch (k) {   /* k is a constant wherever the kernels unroll */
    case 0: return sdc_mm_qval_r<BITS, 0>(w, magic);
    case 1: return sdc_mm_qval_r<BITS, 1>(w, magic);
    case 2: return sdc_mm_qval_r<BITS, 2>(w, magic);
    case 3: return sdc_mm_qval_r<BITS, 3>(w, magic);
    case 4: return sdc_mm_qval_r<BITS, BITS == 4 ? 4 : 0>(w, magic);
    case 5: return sdc_mm_qval_r<BITS, BITS == 4 ? 5 : 0>(w, magic);
    case 6: return sdc_mm_qval_r<BITS, BITS == 4 ? 6 : 0>(w, magic);
    default: return sdc_mm_qval_r<BITS, BITS == 4 ? 7 : 0>(w, magic);
    }
}
/* 0x4B000000 in a register the compiler will not fold back into an immediate */
SDC_HD uint32_t sdc_mm_magic(void) {
#ifdef __CUDA_ARCH__
    uint32_t m;
    asm volatile("mov.b32 %0, 0x4B000000;" : "=r"(m));
    return m;
#else
    return 0x4B000000u;
#endif
}
/* 2^-p for code k */
template <int BITS> SDC_HD float sdc_mm_xscale(int k) { return sd_u2f((uint32_t)(127 - sdc_mm_qpos<BITS>(k)) << 23); }
/* A 16-byte chunk (4 words) is read as float4 granules of 4 columns: granule m's codes are in
 * word sdc_mm_gword(m), codes sdc_mm_gcode(m) .. +3 (4-bit: 8 codes a word, two granules;
 * 8-bit: 4 codes, one granule). */
template <int BITS> SDC_HD int sdc_mm_gword(int m) { return BITS == 4 ? m >> 1 : m; }
template <int BITS> SDC_HD int sdc_mm_gcode(int m) { return BITS == 4 ? (m & 1) * 4 : 0; }
