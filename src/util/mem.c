/* mem.c: see mem.h. */
#include "util/mem.h"
#include <stdlib.h>

void *sd_malloc_aligned(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, SD_ALIGN, n ? n : SD_ALIGN) != 0) return NULL;
    return p;
}
