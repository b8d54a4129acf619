/* dtype.c: the dtype table and array conversions to and from f32. */
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
