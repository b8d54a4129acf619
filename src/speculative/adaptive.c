/* adaptive.c: online choice of the block width (block_size = auto), from a model of the round.
 *
 * A round of width w (w - 1 drafts, w = 1 classic decoding) emits 1 + the drafts accepted before
 * the first rejection, and costs about the same at a given width whatever the text. So the
 * controller keeps two kinds of facts, as exponentially decayed sums (the text changes, so old
 * rounds count less):
 *   - acceptance by depth: of the rounds that checked draft j (drafts 1 .. j - 1 accepted), the
 *     share that accepted it. Every round teaches every depth it reached, whatever its width,
 *     and a Beta prior (mean prior_p, weight prior_n) stands in where few rounds reached;
 *   - the cost of a round at each width it has run, in ms. The first round at a width is kept
 *     apart and used only while no width has run twice: a device backend may record and
 *     instantiate a graph for a new width in it, which later rounds do not pay. A width without
 *     a measured cost costs what the measured ones say linearly (between two: interpolated; past the
 *     widest or below the narrowest: extended with the slope of the two nearest, or with a
 *     slope of prior_slope of its cost where only one width has run).
 * The rate of a width is its expected tokens, 1 + sum over j < w of the product of the
 * acceptances of depths 1..j, over its cost. The controller runs the best rate under
 * acceptances drawn from their posteriors (Thompson sampling: depths few rounds reached keep
 * being tried, and a generation whose first rounds rejected recovers), and with probability eps
 * a neighbour of it (a width whose one measurement was slow is measured again). It starts with widths 4, 1, 4, 1
 * (classic's cost is the yardstick; the first round of a generation is slow on any backend), and
 * declines speculation (sd_auto_declines) once width 1 has the best rate with both it and a
 * speculative width measured past their first rounds. The randomness is a fixed xorshift: it only picks widths, and the output
 * does not depend on the width. */
#include "speculative/spec_internal.h"
#include <math.h>
#include <string.h>

void sd_auto_init(sd_auto *a) {
    memset(a, 0, sizeof *a);
    a->rng = 0x853c49e6748fea9bull;
    a->eps = 0.03;
    a->decay = 0.97;
    a->prior_p = 0.7;
    a->prior_n = 2.0;
    a->prior_slope = 0.1;
}

/* P(draft j accepted | drafts 1 .. j - 1 accepted), the posterior mean */
static double accept_p(const sd_auto *a, int j) {
    return (a->taken[j] + a->prior_p * a->prior_n) / (a->asked[j] + a->prior_n);
}

double sd_auto_expect(const sd_auto *a, int w) {
    double e = 1.0, run = 1.0;
    for (int j = 1; j < w; j++) {
        run *= accept_p(a, j);
        e += run;
    }
    return e;
}

/* The measured cost of width w (ms), or 0 when it has none: the mean of its rounds after the
 * first; while no width has run twice, the first rounds' (each may hold a graph's making, so
 * they are compared only among themselves). */
static double measured(const sd_auto *a, int w) {
    bool twice = false;
    for (int v = 1; v <= SD_AUTO_MAX_W && !twice; v++) twice = a->n_ms[v] > 0;
    if (twice) return a->n_ms[w] > 0 ? a->ms[w] / a->n_ms[w] : 0;
    return a->first_ms[w];
}

double sd_auto_cost(const sd_auto *a, int w) {
    const double c = measured(a, w);
    if (c > 0) return c;
    int lo = 0, hi = 0;   /* the nearest measured widths below and above */
    for (int v = w - 1; v >= 1 && !lo; v--)
        if (measured(a, v) > 0) lo = v;
    for (int v = w + 1; v <= SD_AUTO_MAX_W && !hi; v++)
        if (measured(a, v) > 0) hi = v;
    if (lo && hi) {
        const double cl = measured(a, lo), ch = measured(a, hi);
        return cl + (ch - cl) * (double)(w - lo) / (double)(hi - lo);
    }
    const int n = lo ? lo : hi;   /* one side: extend from the nearest and the next beyond it */
    if (!n) return 0;
    int m = 0;
    for (int v = lo ? n - 1 : n + 1; v >= 1 && v <= SD_AUTO_MAX_W && !m; v += lo ? -1 : 1)
        if (measured(a, v) > 0) m = v;
    const double cn = measured(a, n);
    double slope = m ? (cn - measured(a, m)) / (double)(n - m) : a->prior_slope * cn;
    if (slope < 0) slope = 0;   /* a wider round never costs less than a narrower one */
    double c2 = cn + slope * (double)(w - n);
    return c2 > 0 ? c2 : cn;
}

static double rate(const sd_auto *a, int w) {
    const double c = sd_auto_cost(a, w);
    return c > 0 ? sd_auto_expect(a, w) / c : 0;
}

static double uniform01(sd_auto *a) {
    a->rng ^= a->rng << 13; a->rng ^= a->rng >> 7; a->rng ^= a->rng << 17;
    return ((double)(a->rng >> 11) + 0.5) / 9007199254740992.0;
}

/* An acceptance of depth j drawn from its posterior (a normal of the Beta's mean and variance,
 * clipped to [0, 1]): a depth that rejected in the few rounds that reached it keeps a chance to
 * be tried again, where its mean alone would settle on a narrow width that never asks it. */
static double accept_draw(sd_auto *a, int j) {
    const double m = accept_p(a, j), n = a->asked[j] + a->prior_n;
    const double z = sqrt(-2.0 * log(uniform01(a))) * cos(6.283185307179586 * uniform01(a));
    const double p = m + z * sqrt(m * (1.0 - m) / (n + 1.0));
    return p < 0 ? 0 : p > 1 ? 1 : p;
}

int sd_auto_best(const sd_auto *a) {
    int best = 1;
    for (int w = 2; w <= SD_AUTO_MAX_W; w++)
        if (rate(a, w) > rate(a, best)) best = w;
    return best;
}

bool sd_auto_declines(const sd_auto *a) {
    bool spec = false;   /* a speculative width's cost measured past its first round */
    for (int w = 2; w <= SD_AUTO_MAX_W; w++) spec = spec || a->n_ms[w] > 0;
    return spec && a->n_ms[1] > 0 && sd_auto_best(a) == 1;
}

int sd_auto_pick(sd_auto *a) {
    const int64_t n = a->n++;
    if (n < 4) return n % 2 ? 1 : 4;   /* 4, 1, 4, 1: each measured past its first round */
    /* Thompson sampling: the best width under acceptances drawn from their posteriors */
    int best = 1;
    double e = 1.0, run = 1.0, bestr = rate(a, 1);
    for (int w = 2; w <= SD_AUTO_MAX_W; w++) {
        run *= accept_draw(a, w - 1);
        e += run;
        const double c = sd_auto_cost(a, w);
        if (c > 0 && e / c > bestr) { bestr = e / c; best = w; }
    }
    if (uniform01(a) < a->eps) {   /* a neighbour, so its cost is measured again */
        const int w = (a->rng & 1) ? best + 1 : best - 1;
        if (w >= 1 && w <= SD_AUTO_MAX_W) return w;
        return best == 1 ? 2 : best - 1;
    }
    return best;
}

void sd_auto_update(sd_auto *a, int w, int drafted, int accepted, double ms) {
    if (w < 1 || w > SD_AUTO_MAX_W) return;
    a->rounds[w]++;
    for (int j = 1; j < SD_AUTO_MAX_W; j++) {
        a->asked[j] *= a->decay;
        a->taken[j] *= a->decay;
    }
    for (int j = 1; j <= drafted && j <= accepted + 1 && j < SD_AUTO_MAX_W; j++) {
        a->asked[j] += 1.0;
        if (j <= accepted) a->taken[j] += 1.0;
    }
    if (a->rounds[w] == 1) {   /* a width's first round: kept apart (a graph may be made in it) */
        a->first_ms[w] = ms;
        return;
    }
    a->ms[w] = a->ms[w] * a->decay + ms;
    a->n_ms[w] = a->n_ms[w] * a->decay + 1.0;
}
