/* test_pool.c: sd_pool runs fn exactly once per thread index per run, with the right nth,
 * over many back-to-back runs, after idle periods (workers asleep), for sizes 1..4 and NULL. */
#include "check.h"
#include "cpu/pool.h"
#include <stdatomic.h>
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

    /* default size: online CPUs */
    sd_pool *p = sd_pool_create(0);
    CHECK(p != NULL && sd_pool_size(p) >= 1, "sd_pool_create(0)");
    if (p) {
        CHECK(run_many(p, sd_pool_size(p) < 8 ? sd_pool_size(p) : 8, 100) == 0 || sd_pool_size(p) > 8, "default pool");
        sd_pool_free(p);
    }
    /* create/free without any run */
    for (int n = 1; n <= 4; n++) sd_pool_free(sd_pool_create(n));
    CHECK(1, "create/free without runs");
    return check_finish("test_pool");
}
