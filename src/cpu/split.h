/* split.h: a pool call's units of work (row tiles) shared out while the call runs.
 *
 * Why: with a static split (sd_pool_rows) the whole call waits for the slowest share: a worker
 * takes microseconds to notice a new run, and a core the host lends to another process for a
 * moment holds back its half of every call it was in. Measured on a 2-vCPU Zen 5
 * (docs/benchmarks/cpu-zen5-vs-llamacpp-2026-12-05.md, section 7): the caller's waits fell 2-4x;
 * end to end 1.034x (geometric mean of 8 rows) on the embedded pair, 4-5% at the 1.7B shape beside a process
 * taking 20% of a core, and no change measurable at that shape on a quiet machine, where the two
 * cores share one memory bandwidth and what the caller's share gains the worker's loses.
 *
 * How: threads pair up (2i, 2i + 1; an odd last thread alone) and each pair owns a contiguous
 * segment of the units, sized by its thread count. The even thread walks the segment from its
 * front, the odd one from its back, each claiming a run of units at a time from one shared word
 * holding the segment's (front, back); a run is a quarter of what is left, at least `min` units
 * (a kernel's natural grain), so a call makes few claims and the two meet within about one
 * grain of each other. The front walker's claims are contiguous, so its weight stream (and its
 * software prefetch) runs on unbroken.
 *
 * Which thread computes a row never changes its bits (every row is computed whole, by the same
 * kernel, wherever it lands), so results stay independent of timing. */
#ifndef SD_CPU_SPLIT_H
#define SD_CPU_SPLIT_H
#include <stdatomic.h>
#include <stdint.h>
#include "cpu/pool.h"

#define SD_SPLIT_MAXSEG 32   /* pairs; more threads than 2x this fall back to a static split */

typedef struct sd_split_seg {
    _Alignas(64) _Atomic uint64_t fb;   /* front in the low 32 bits, back (exclusive) in the high */
} sd_split_seg;

typedef struct sd_split {
    int units, min, nth, nseg;          /* nseg 0: static split */
    sd_split_seg seg[SD_SPLIT_MAXSEG];
} sd_split;

/* Before the pool run: `units` units over nth threads, claims of at least `min` units. */
static inline void sd_split_init(sd_split *s, int units, int min, int nth) {
    s->units = units;
    s->min = min > 0 ? min : 1;
    s->nth = nth > 0 ? nth : 1;
    s->nseg = (s->nth + 1) / 2;
    if (s->nseg > SD_SPLIT_MAXSEG) s->nseg = 0;
    for (int i = 0; i < s->nseg; i++) {
        const int t0 = 2 * i, t1 = 2 * i + 2 < s->nth ? 2 * i + 2 : s->nth;
        const uint64_t a = (uint64_t)((long long)units * t0 / s->nth), b = (uint64_t)((long long)units * t1 / s->nth);
        atomic_store_explicit(&s->seg[i].fb, a | (b << 32), memory_order_relaxed);
    }
}

/* One thread's walk: call sd_split_next until it returns 0. */
typedef struct sd_split_it {
    sd_split *s;
    int ith, done;
} sd_split_it;

static inline sd_split_it sd_split_begin(sd_split *s, int ith) { return (sd_split_it){s, ith, 0}; }

/* The next run [*u0, *u1) for this thread; 0 when its segment is used up. */
static inline int sd_split_next(sd_split_it *it, int *u0, int *u1) {
    const sd_split *s = it->s;
    if (it->done) return 0;
    if (s->nseg == 0) {   /* static: this thread's contiguous share, once */
        it->done = 1;
        sd_pool_rows(s->units, it->ith, s->nth, 1, u0, u1);
        return *u1 > *u0;
    }
    sd_split_seg *g = (sd_split_seg *)&s->seg[it->ith / 2];
    const int back = it->ith & 1, alone = !back && it->ith + 1 == s->nth;
    uint64_t v = atomic_load_explicit(&g->fb, memory_order_relaxed);
    for (;;) {
        const uint32_t f = (uint32_t)v, b = (uint32_t)(v >> 32);
        if (f >= b) { it->done = 1; return 0; }
        uint32_t c = alone ? b - f : (b - f) / 4;
        if (c < (uint32_t)s->min) c = (uint32_t)s->min;
        if (c > b - f) c = b - f;
        const uint64_t nv = back ? (uint64_t)f | ((uint64_t)(b - c) << 32) : (uint64_t)(f + c) | ((uint64_t)b << 32);
        /* relaxed: the claim needs only atomicity; the rows' results reach the caller through
         * the pool's own completion handshake */
        if (atomic_compare_exchange_weak_explicit(&g->fb, &v, nv, memory_order_relaxed, memory_order_relaxed)) {
            *u0 = (int)(back ? b - c : f);
            *u1 = (int)(back ? b : f + c);
            return 1;
        }
    }
}

#endif
