/* pool.h: a fixed pthread pool. sd_pool_run calls fn(arg, ith, nth) once on each of the nth
 * threads (the caller is thread 0) and returns when all are done. Work is split by the
 * callee from (ith, nth) alone, so a result never depends on scheduling. */
#ifndef SD_POOL_H
#define SD_POOL_H

typedef struct sd_pool sd_pool;
typedef void (*sd_pool_fn)(void *arg, int ith, int nth);

/* n_threads <= 0: number of online CPUs. Returns NULL on failure. */
sd_pool *sd_pool_create(int n_threads);
void sd_pool_free(sd_pool *p);
int sd_pool_size(const sd_pool *p);
/* p may be NULL: runs fn(arg, 0, 1) inline. Not reentrant. */
void sd_pool_run(sd_pool *p, sd_pool_fn fn, void *arg);

/* Thread ith's share [*r0, *r1) of `rows` rows: contiguous ranges whose inner boundaries fall on
 * multiples of align (a power of two: a kernel's row tile), the last thread taking the rest. */
static inline void sd_pool_rows(int rows, int ith, int nth, int align, int *r0, int *r1) {
    const long long mask = ~(long long)(align - 1);
    *r0 = (int)(((long long)rows * ith / nth) & mask);
    *r1 = ith == nth - 1 ? rows : (int)(((long long)rows * (ith + 1) / nth) & mask);
}

#endif
