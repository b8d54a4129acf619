/* walk.cu: the round's walk (design.md step 3) as one single-thread kernel, so the accepted
 * length, the emitted ids and the next position are computed where the drafts and the target's
 * choices already are; the host reads back emit once per round. The statements are
 * backend/walk_step.h's, the CPU backend's own. */
#include "cuda/walk.h"
#include "cuda/common.cuh"
#include "backend/walk_step.h"

namespace {

__global__ void walk_k(int32_t *blk, int nd, const int32_t *choice, int32_t *emit, int32_t *pos, int32_t *pos_prev) {
    sdc_grid_enter();
    sd_walk_step(blk, nd, choice, emit, pos, pos_prev);
}

} // namespace

extern "C" cudaError_t sdc_walk(int32_t *blk, int nd, const int32_t *choice, int32_t *emit, int32_t *pos,
                                int32_t *pos_prev, const sdc_dev *d) {
    return sdc_launch(d, walk_k, 1, 1, 0, blk, nd, choice, emit, pos, pos_prev);
}
