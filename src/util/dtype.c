/* dtype.c: dtype table and f16 conversions (IEEE binary16, round to nearest even). */
#include "util/dtype.h"
#include <string.h>

size_t sd_dtype_size(specdec_dtype dt) {
    switch (dt) {
    case SPECDEC_DTYPE_F32: case SPECDEC_DTYPE_U32: case SPECDEC_DTYPE_I32: return 4;
    case SPECDEC_DTYPE_F16: case SPECDEC_DTYPE_BF16: return 2;
    case SPECDEC_DTYPE_I64: return 8;
    case SPECDEC_DTYPE_U8: return 1;
    default: return 0;
    }
}

const char *specdec_dtype_name(specdec_dtype dt) {
    static const char *names[] = {"F32", "F16", "BF16", "U32", "I32", "I64", "U8"};
    return (unsigned)dt < SPECDEC_DTYPE_COUNT ? names[dt] : "?";
}

int sd_dtype_from_st(const char *s) {
    for (int i = 0; i < SPECDEC_DTYPE_COUNT; i++)
        if (strcmp(s, specdec_dtype_name((specdec_dtype)i)) == 0) return i;
    return -1;
}

float sd_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu, u;
    if (exp == 0) {
        if (man == 0) u = sign;
        else { /* subnormal: renormalize */
            exp = 127 - 15 + 1;
            while (!(man & 0x400u)) { man <<= 1; exp--; }
            man &= 0x3ffu;
            u = sign | (exp << 23) | (man << 13);
        }
    } else if (exp == 31) u = sign | 0x7f800000u | (man << 13);
    else u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    float f; memcpy(&f, &u, 4); return f;
}

uint16_t sd_f32_to_f16(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* overflow -> inf */
    if (a < 0x38800000u) { /* subnormal or zero in f16 */
        if (a < 0x33000000u) return (uint16_t)sign;
        /* value = m * 2^(e-150); the f16 subnormal unit is 2^-24, so q = m * 2^(e-126) */
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        uint32_t sh = 126 - e; /* 14..24 here */
        uint32_t q = m >> (sh), rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - (0x70u << 23);
    return (uint16_t)(sign | (r >> 13));
}

void sd_to_f32(specdec_dtype dt, const void *src, float *dst, size_t n) {
    const uint16_t *h = (const uint16_t *)src;
    switch (dt) {
    case SPECDEC_DTYPE_F32: memcpy(dst, src, n * 4); break;
    case SPECDEC_DTYPE_BF16: for (size_t i = 0; i < n; i++) dst[i] = sd_bf16_to_f32(h[i]); break;
    case SPECDEC_DTYPE_F16: for (size_t i = 0; i < n; i++) dst[i] = sd_f16_to_f32(h[i]); break;
    default: break;
    }
}

void sd_from_f32(specdec_dtype dt, const float *src, void *dst, size_t n) {
    uint16_t *h = (uint16_t *)dst;
    switch (dt) {
    case SPECDEC_DTYPE_F32: memcpy(dst, src, n * 4); break;
    case SPECDEC_DTYPE_BF16: for (size_t i = 0; i < n; i++) h[i] = sd_f32_to_bf16(src[i]); break;
    case SPECDEC_DTYPE_F16: for (size_t i = 0; i < n; i++) h[i] = sd_f32_to_f16(src[i]); break;
    default: break;
    }
}
