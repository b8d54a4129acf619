/* bench_util.h: what the micro-benchmarks share: a monotonic clock, medians, and the streaming
 * read bandwidth probe every roofline ratio is measured against (benchmarking.md: measured in
 * the same run). Header-only: each bench program is its own executable. */
#ifndef SD_BENCH_UTIL_H
#define SD_BENCH_UTIL_H
#include "cpu/pool.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
/* Sorts v in place. */
static double median(double *v, int n) { qsort(v, (size_t)n, sizeof *v, cmpd); return v[n / 2]; }

/* each thread sums its contiguous slice of the buffer */
typedef struct { const uint64_t *buf; size_t n; uint64_t sums[64]; } bw_job;
static void bw_task(void *arg, int ith, int nth) {
    bw_job *j = (bw_job *)arg;
    size_t a = j->n * ith / nth, b = j->n * (ith + 1) / nth;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = a; i + 4 <= b; i += 4) { s0 += j->buf[i]; s1 += j->buf[i + 1]; s2 += j->buf[i + 2]; s3 += j->buf[i + 3]; }
    j->sums[ith & 63] = s0 + s1 + s2 + s3;
}

/* Read bandwidth (bytes/s) of a 1 GiB buffer on pool p: one discarded pass, then `timed` passes
 * (at most 64); *best from the fastest, *med from the median. Both 0 when out of memory. */
static void measure_bw(sd_pool *p, int timed, double *best, double *med) {
    size_t bytes = (size_t)1 << 30, n = bytes / 8;
    uint64_t *buf = (uint64_t *)malloc(bytes);
    *best = *med = 0;
    if (!buf || timed < 1 || timed > 64) { free(buf); return; }
    for (size_t i = 0; i < n; i++) buf[i] = i * 0x9E3779B97F4A7C15ULL;
    bw_job j = {buf, n, {0}};
    double ts[64];
    for (int r = 0; r <= timed; r++) {
        double t0 = now_s();
        sd_pool_run(p, bw_task, &j);
        if (r > 0) ts[r - 1] = now_s() - t0;
    }
    uint64_t s = 0;
    for (int i = 0; i < 64; i++) s += j.sums[i];
    if (s == 42) printf("(checksum)\n");   /* keeps the sums alive */
    double m = median(ts, timed);
    *best = (double)bytes / ts[0];
    *med = (double)bytes / m;
    free(buf);
}

#endif
