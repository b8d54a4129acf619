/* test_pool.c: sd_pool runs fn exactly once per thread index per run, with the right nth,
 * over many back-to-back runs, after idle periods (workers asleep), for sizes 1..4 and NULL;
 * with a slow share on a worker (the caller must sleep and be woken) and on the caller; and
 * oversubscribed: three callers, each with its own 3-thread pool, at once (9 threads on a
 * 2-core machine) must all finish with every run correct. The dynamic split (cpu/split.h):
 * every unit claimed exactly once for 1..4 threads, odd shapes, a slow thread, and the static
 * fallback beyond SD_SPLIT_MAXSEG pairs. Prints (never asserts) the
 * empty-run overhead and the oversubscribed wall time. */
#include "check.h"
#include "cpu/pool.h"
#include "cpu/split.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef struct {
    _Atomic int hits[8];
    _Atomic int bad_nth;
    int expect_nth;
    long long payload; /* written by thread 0 before the run, read by all: publication check */
    _Atomic int bad_payload;
} job;

static void fn(void *arg, int ith, int nth) {
    job *j = (job *)arg;
    if (nth != j->expect_nth) atomic_fetch_add(&j->bad_nth, 1);
    if (ith >= 0 && ith < 8) atomic_fetch_add(&j->hits[ith], 1);
    if (j->payload != 12345) atomic_fetch_add(&j->bad_payload, 1);
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* one thread's share takes ~2 ms (longer than any spin), the others return at once */
typedef struct { _Atomic int hits[8]; int slow; } slow_job;
static void slow_fn(void *arg, int ith, int nth) {
    slow_job *j = (slow_job *)arg;
    (void)nth;
    if (ith == j->slow) sleep_ms(2);
    if (ith >= 0 && ith < 8) atomic_fetch_add(&j->hits[ith], 1);
}

typedef struct { int n, runs, errors; double secs; } over_arg;
static int run_many(sd_pool *p, int n, int runs);
static void *over_main(void *vp) {
    over_arg *o = (over_arg *)vp;
    sd_pool *p = sd_pool_create(o->n);
    if (!p) { o->errors = -1; return NULL; }
    double t0 = now_s();
    o->errors = run_many(p, o->n, o->runs);
    o->secs = now_s() - t0;
    sd_pool_free(p);
    return NULL;
}

static int run_many(sd_pool *p, int n, int runs) {
    int errors = 0;
    for (int r = 0; r < runs; r++) {
        job j;
        memset(&j, 0, sizeof j);
        j.expect_nth = n;
        j.payload = 12345;
        sd_pool_run(p, fn, &j);
        for (int i = 0; i < 8; i++) {
            int want = i < n ? 1 : 0;
            if (atomic_load(&j.hits[i]) != want) errors++;
        }
        if (atomic_load(&j.bad_nth) || atomic_load(&j.bad_payload)) errors++;
    }
    return errors;
}

/* cpu/split.h over a pool: every unit claimed exactly once, runs inside [0, units), at least `min`
 * long unless they end a segment; a thread's share of one pair is a front or a back walk. */
typedef struct {
    sd_split s;
    _Atomic int *hits;
    _Atomic int bad;
    int slow_ith;    /* this thread sleeps before each claim (a late or slow partner) */
} split_job;

static void split_fn(void *arg, int ith, int nth) {
    split_job *j = (split_job *)arg;
    (void)nth;
    int u0, u1;
    for (sd_split_it it = sd_split_begin(&j->s, ith); sd_split_next(&it, &u0, &u1);) {
        if (ith == j->slow_ith) { struct timespec ts = {0, 20000}; nanosleep(&ts, NULL); }
        if (u0 < 0 || u1 > j->s.units || u1 <= u0) { atomic_fetch_add(&j->bad, 1); break; }
        for (int u = u0; u < u1; u++) atomic_fetch_add(&j->hits[u], 1);
    }
}

static int split_case(sd_pool *p, int units, int min, int nth, int slow_ith) {
    split_job j;
    memset(&j, 0, sizeof j);
    j.hits = calloc((size_t)units + 1, sizeof *j.hits);
    j.slow_ith = slow_ith;
    sd_split_init(&j.s, units, min, nth);
    if (nth == sd_pool_size(p)) sd_pool_run(p, split_fn, &j);
    else for (int i = 0; i < nth; i++) split_fn(&j, i, nth);   /* more threads than the pool: in turn */
    int errors = atomic_load(&j.bad);
    for (int u = 0; u < units; u++) errors += atomic_load(&j.hits[u]) != 1;
    free(j.hits);
    return errors;
}

static void test_split(sd_pool **pools) {
    static const int units[] = {0, 1, 2, 3, 7, 64, 129, 1000, 9496};
    for (int n = 1; n <= 4; n++)
        for (size_t k = 0; k < sizeof units / sizeof units[0]; k++)
            for (int min = 1; min <= 3; min++)
                for (int slow = -1; slow < n; slow++) {
                    const int e = split_case(pools[n], units[k], min, n, units[k] <= 129 ? slow : -1);
                    CHECK(e == 0, "split: units %d min %d threads %d slow %d: %d units not claimed once", units[k], min, n,
                          slow, e);
                }
    /* more threads than the pairs it tracks: the static split, each thread its share once */
    CHECK(split_case(pools[1], 1000, 2, 2 * SD_SPLIT_MAXSEG + 3, -1) == 0, "split: static fallback");
}

int main(void) {
    /* NULL pool: inline, one thread */
    CHECK_EQ_INT(sd_pool_size(NULL), 1);
    CHECK_EQ_INT(run_many(NULL, 1, 10), 0);

    for (int n = 1; n <= 4; n++) {
        sd_pool *p = sd_pool_create(n);
        CHECK(p != NULL, "sd_pool_create(%d)", n);
        if (!p) continue;
        CHECK_EQ_INT(sd_pool_size(p), n);
        CHECK(run_many(p, n, n <= 2 ? 20000 : 2000) == 0, "size %d: back-to-back runs", n);
        /* let workers fall asleep, then wake them, several times */
        for (int k = 0; k < 5; k++) {
            sleep_ms(30);
            CHECK(run_many(p, n, 3) == 0, "size %d: run after idle %d", n, k);
        }
        sd_pool_free(p);
    }

    /* a slow share: on the last worker (the caller sleeps, the worker must wake it), then on
     * the caller (workers fall asleep, the next run wakes them) */
    for (int n = 2; n <= 4; n++) {
        sd_pool *p = sd_pool_create(n);
        CHECK(p != NULL, "sd_pool_create(%d)", n);
        if (!p) continue;
        int errors = 0;
        for (int slow = 0; slow < n; slow += n - 1)
            for (int r = 0; r < 20; r++) {
                slow_job j;
                memset(&j, 0, sizeof j);
                j.slow = slow;
                sd_pool_run(p, slow_fn, &j);
                for (int i = 0; i < n; i++) errors += atomic_load(&j.hits[i]) != 1;
                errors += run_many(p, n, 5);
            }
        CHECK(errors == 0, "size %d: slow shares (%d errors)", n, errors);
        sd_pool_free(p);
    }

    /* empty-run overhead (printed, not asserted: machines are shared) */
    {
        sd_pool *p = sd_pool_create(2);
        if (p) {
            run_many(p, 2, 1000);
            double t0 = now_s();
            int e = run_many(p, 2, 20000);
            fprintf(stderr, "test_pool: empty run, 2 threads: %.2f us\n", (now_s() - t0) / 20000 * 1e6);
            CHECK_EQ_INT(e, 0);
            sd_pool_free(p);
        }
    }

    /* oversubscribed: 3 callers x 3-thread pools at once */
    {
        over_arg oa[3];
        pthread_t th[3];
        int started = 0;
        for (int i = 0; i < 3; i++) {
            oa[i] = (over_arg){3, 3000, 0, 0};
            if (pthread_create(&th[i], NULL, over_main, &oa[i]) == 0) started++;
            else break;
        }
        CHECK_EQ_INT(started, 3);
        double worst = 0;
        for (int i = 0; i < started; i++) {
            pthread_join(th[i], NULL);
            CHECK(oa[i].errors == 0, "oversubscribed caller %d: %d errors", i, oa[i].errors);
            if (oa[i].secs > worst) worst = oa[i].secs;
        }
        fprintf(stderr, "test_pool: oversubscribed (3 x 3 threads), 3000 runs each: %.3f s worst caller\n", worst);
    }

    /* default size: online CPUs */
    sd_pool *p = sd_pool_create(0);
    CHECK(p != NULL && sd_pool_size(p) >= 1, "sd_pool_create(0)");
    if (p) {
        CHECK(run_many(p, sd_pool_size(p) < 8 ? sd_pool_size(p) : 8, 100) == 0 || sd_pool_size(p) > 8, "default pool");
        sd_pool_free(p);
    }
    {   /* the dynamic split of cpu/split.h on pools of 1..4 threads */
        sd_pool *ps[5] = {NULL};
        for (int n = 1; n <= 4; n++) ps[n] = sd_pool_create(n);
        if (ps[1] && ps[2] && ps[3] && ps[4]) test_split(ps);
        else CHECK(0, "pools for the split test");
        for (int n = 1; n <= 4; n++) sd_pool_free(ps[n]);
    }
    /* create/free without any run */
    for (int n = 1; n <= 4; n++) sd_pool_free(sd_pool_create(n));
    CHECK(1, "create/free without runs");
    return check_finish("test_pool");
}
