/* adaptive.c: online choice of the block width (block_size = auto). Each width w in 1..8 (w = 1
 * is classic decoding: no draft) is scored by its measured rate, emitted tokens per ms of round
 * time, as exponentially decayed sums (the text changes, so old rounds count less). A sweep gives
 * every width a few rounds, then epsilon-greedy: the best width, with a small chance of another.
 * Speculation is declined whenever width 1 has the best rate. The randomness is a fixed xorshift:
 * it only picks widths, and the output does not depend on the width. */
#include "speculative/spec_internal.h"
#include <string.h>

void sd_auto_init(sd_auto *a) {
    memset(a, 0, sizeof *a);
    a->rng = 0x853c49e6748fea9bull;
    a->explore_rounds = 3;
    a->eps = 0.03;
    a->decay = 0.97;
}

static double rate(const sd_auto *a, int w) { return a->ms[w] > 0 ? a->tokens[w] / a->ms[w] : 0; }

int sd_auto_best(const sd_auto *a) {
    int best = 1;
    for (int w = 2; w <= SD_AUTO_MAX_W; w++)
        if (a->ms[w] > 0 && rate(a, w) > rate(a, best)) best = w;
    return best;
}

int sd_auto_pick(sd_auto *a) {
    int64_t sweep = (int64_t)a->explore_rounds * SD_AUTO_MAX_W;
    int64_t n = a->n++;
    if (n < sweep) return (int)(n % SD_AUTO_MAX_W) + 1;     /* 1, 2, .., 8, 1, 2, .. */
    a->rng ^= a->rng << 13; a->rng ^= a->rng >> 7; a->rng ^= a->rng << 17;
    double u = (double)(a->rng >> 11) / 9007199254740992.0;
    if (u < a->eps) return (int)(a->rng % SD_AUTO_MAX_W) + 1;
    return sd_auto_best(a);
}

void sd_auto_update(sd_auto *a, int w, int emitted, double ms) {
    if (w < 1 || w > SD_AUTO_MAX_W) return;
    a->rounds[w]++;
    a->tokens[w] = a->tokens[w] * a->decay + emitted;
    a->ms[w] = a->ms[w] * a->decay + ms;
}
