/* ops_neon.c: the NEON kernel set for aarch64. Not written yet: it returns NULL, so the
 * dispatcher (ops_fast.c) falls back to the portable C kernels on ARM, which keep the same
 * batch- and thread-invariance contract. A real NEON port follows ops_avx2.c with L = 4. */
#include "cpu/ops_internal.h"

const sd_isa *sd_isa_neon(void) { return NULL; }
