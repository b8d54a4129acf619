/* walk.cu: the round's walk (design.md step 3) as one single-thread kernel, so the accepted
 * length, the emitted ids and the next position are computed where the drafts and the target's
 * choices already are; the host reads back emit once per round. Same statements in the same
 * order as the CPU backend's cpu_walk (which matters only if a caller aliases the buffers). */
#include "cuda/walk.h"
#include "cuda/common.cuh"

namespace {

__global__ void walk_k(int32_t *blk, int nd, const int32_t *choice, int32_t *emit, int32_t *pos, int32_t *pos_prev) {
    int acc = 0;
    while (acc < nd && blk[1 + acc] == choice[acc]) acc++;
    emit[0] = acc + 1;
    for (int j = 0; j < acc; j++) emit[1 + j] = blk[1 + j];
    emit[1 + acc] = choice[acc];
    blk[0] = choice[acc];
    *pos_prev = *pos;
    *pos += acc + 1;
}

} // namespace

extern "C" cudaError_t sdc_walk(int32_t *blk, int nd, const int32_t *choice, int32_t *emit, int32_t *pos,
                                int32_t *pos_prev, const sdc_dev *d) {
    walk_k<<<1, 1, 0, d->stream>>>(blk, nd, choice, emit, pos, pos_prev);
    return sdc_launched();
}
