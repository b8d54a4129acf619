/* mem.h: cache-line aligned allocation. malloc aligns to 16 bytes (and large blocks come from
 * mmap at a page offset of 16), so 64-byte vector loads from its blocks straddle cache lines.
 * Used for the quantized kernels' activation scratch, where it measured: AVX-512 verify 0.74-0.83x
 * (docs/benchmarks/cpu-scratch-align-2026-12-01.md). Aligning the runtime's activation buffers and
 * the KV cache as well measured no difference (0.97-1.01x, same record), so they stay on malloc.
 * Free with free(). */
#ifndef SD_MEM_H
#define SD_MEM_H
#include <stddef.h>

#define SD_ALIGN 64

/* n bytes aligned to SD_ALIGN (n = 0 gives a valid minimal block), or NULL. */
void *sd_malloc_aligned(size_t n);

#endif
