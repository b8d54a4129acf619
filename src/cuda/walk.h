/* walk.h: the round's walk over the drafts (walk.cu), backend.h's semantics. */
#ifndef SD_CUDA_WALK_H
#define SD_CUDA_WALK_H
#include "cuda/dev.h"

#ifdef __cplusplus
extern "C" {
#endif

/* blk (nd+1) = [bonus, d_1..d_nd], choice (nd+1). acc = agreeing prefix length; emit (nd+2) =
 * [acc+1, d_1..d_acc, choice[acc]]; blk[0] = choice[acc]; *pos_prev = *pos; *pos += acc + 1. */
cudaError_t sdc_walk(int32_t *blk, int nd, const int32_t *choice, int32_t *emit, int32_t *pos, int32_t *pos_prev,
                     const sdc_dev *d);

#ifdef __cplusplus
}
#endif
#endif
