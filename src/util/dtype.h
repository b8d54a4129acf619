/* dtype.h: element sizes, dtype names, and conversions of arrays between f32 and the 16-bit float
 * formats (the scalar conversions are util/bits.h's). */
#ifndef SD_DTYPE_H
#define SD_DTYPE_H
#include <stdint.h>
#include <string.h>
#include "specdec.h"
#include "util/bits.h"

/* Bytes per element, 0 for an invalid dtype. */
size_t sd_dtype_size(specdec_dtype dt);
/* Parse a safetensors dtype string ("F32", "BF16", ...). Returns -1 if unknown. */
int sd_dtype_from_st(const char *s);

/* sd_bf16_to_f32, sd_f32_to_bf16, sd_f16_to_f32, sd_f32_to_f16: util/bits.h (shared with the
 * CUDA kernels). */

/* Element i of a float array of dtype dt (F32, F16 or BF16) as f32, read with memcpy: safe on the
 * unaligned pointers a mapping gives. The one scalar reader the engine's C code uses. */
static inline float sd_elem_f32(specdec_dtype dt, const void *p, size_t i) {
    if (dt == SPECDEC_DTYPE_F32) { float f; memcpy(&f, (const char *)p + 4 * i, 4); return f; }
    uint16_t h;
    memcpy(&h, (const char *)p + 2 * i, 2);
    return dt == SPECDEC_DTYPE_BF16 ? sd_bf16_to_f32(h) : sd_f16_to_f32(h);
}

/* Convert n elements of dtype `dt` at src to f32. dt must be F32, F16 or BF16. */
void sd_to_f32(specdec_dtype dt, const void *src, float *dst, size_t n);
/* Convert n f32 to dtype dt (F32, F16, BF16). */
void sd_from_f32(specdec_dtype dt, const float *src, void *dst, size_t n);

#endif
