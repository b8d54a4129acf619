/* walk_step.h: the round's walk (design.md step 3), written once for every backend: the CPU
 * backend calls it directly, the CUDA backend runs it as a single-thread kernel (cuda/walk.cu) so
 * the round's ids stay on the device.
 *   blk[0..nd]   the block the verify ran: blk[0] the last emitted token, blk[1..nd] the drafts
 *   choice[0..nd] the target's choice at each block position (argmax or sampled id)
 * Accepts the longest prefix of drafts equal to the target's choices, emits it plus the target's
 * choice after it (emit[0] = the count, emit[1..] the ids), puts that last choice in blk[0] for
 * the next round and advances *pos by the count (*pos_prev keeps the old position). The
 * statements' order matters only if a caller aliases the buffers; both backends share it. */
#ifndef SD_WALK_STEP_H
#define SD_WALK_STEP_H
#include <stdint.h>
#include "util/hostdev.h"

SD_HD_FN void sd_walk_step(int32_t *blk, int nd, const int32_t *choice, int32_t *emit, int32_t *pos,
                           int32_t *pos_prev) {
    int acc = 0;
    while (acc < nd && blk[1 + acc] == choice[acc]) acc++;
    emit[0] = acc + 1;
    for (int j = 0; j < acc; j++) emit[1 + j] = blk[1 + j];
    emit[1 + acc] = choice[acc];
    blk[0] = choice[acc];
    *pos_prev = *pos;
    *pos += acc + 1;
}

#endif
