/* pool.c: a persistent pthread pool for the CPU operators.
 *
 * One run = one generation. The caller publishes (fn, arg), bumps `gen` and runs thread 0's
 * share itself; workers see the new generation, run their share and decrement `pending`.
 * Waiting is three-phase on both sides, all bounded in time: spin (a decode step calls
 * sd_pool_run ~100 times with microseconds between calls, so a sleep/wake round trip per call
 * would dominate), then sched_yield (the awaited thread may be queued on this very core),
 * then sleep on a condition variable. Workers sleep on `cv` until `gen` moves; the caller sleeps on `cv_done` until
 * `pending` reaches 0. Both wake-up handshakes are Dekker style on seq_cst atomics: the
 * sleeper announces itself (`sleepers` / `caller_waiting`) before its last look at the
 * condition, the waker reads the announcement after changing the condition, so at least one
 * of them sees the other and no wake-up is lost.
 *
 * Why bounded: when the machine is oversubscribed (ctest -j2 runs two 2-thread processes on
 * 2 cores) a caller that spins or yields without bound competes with the other process's
 * threads for the core the whole time its workers are late. The
 * kernels also run inline when a call's work is tiny (ops_fast.c), which never changes a
 * result (work is split by output rows / heads, each computed whole by one thread). */
#include "cpu/pool.h"
#include <pthread.h>
#include <stdatomic.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
/* No pause instruction in the spin loops: on this project's virtual machines PAUSE in a
 * tight loop triggers the hypervisor's pause-loop exiting, which deschedules the vCPU and
 * made an empty run ~30x slower (measured: 2.2 us plain vs 65 us with _mm_pause). */
#define SD_CPU_RELAX() ((void)0)

/* A waiting thread spins for SD_POOL_SPIN_NS, then calls sched_yield until SD_POOL_YIELD_NS
 * have passed (when the awaited thread is runnable on the same core, yielding lets it run at
 * once; spinning would hold it off for a whole time slice), then sleeps. */
#define SD_POOL_SPIN_NS 4000LL
#define SD_POOL_YIELD_NS 60000LL

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

struct sd_pool;
typedef struct sd_worker {
    struct sd_pool *p;
    int ith;
    pthread_t th;
} sd_worker;

struct sd_pool {
    int n;                      /* threads including the caller */
    sd_worker *w;               /* (n-1) workers, ith = 1..n-1 */
    int n_started;
    _Atomic unsigned gen;       /* bumped once per run */
    _Atomic int pending;        /* workers still running the current generation */
    _Atomic int sleepers;       /* workers inside the sleep path */
    _Atomic int caller_waiting; /* the caller is inside its sleep path */
    _Atomic int stop;
    sd_pool_fn fn;              /* written before the gen bump (release), read after (acquire) */
    void *arg;
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* workers: gen moved (or stop) */
    pthread_cond_t cv_done;     /* caller: pending reached 0 */
};

/* Spin, then yield, until COND holds or SD_POOL_YIELD_NS passed (COND is then false). The
 * clock is read every 64 spins and at every yield. */
#define SPIN_UNTIL(COND)                                                    \
    do {                                                                    \
        long long t0_ = 0;                                                  \
        for (unsigned it_ = 0; !(COND); it_++) {                            \
            if (it_ < 4096u) {                                              \
                if ((it_ & 63u) != 63u) { SD_CPU_RELAX(); continue; }       \
                long long t_ = now_ns();                                    \
                if (!t0_) t0_ = t_;                                         \
                else if (t_ - t0_ > SD_POOL_SPIN_NS) it_ = 4096u;           \
            } else {                                                        \
                sched_yield();                                              \
                long long t_ = now_ns();                                    \
                if (!t0_) t0_ = t_;                                         \
                if (t_ - t0_ > SD_POOL_YIELD_NS) break;                     \
            }                                                               \
        }                                                                   \
    } while (0)

static void *worker_main(void *vp) {
    sd_worker *w = (sd_worker *)vp;
    sd_pool *p = w->p;
    unsigned seen = 0; /* gen at creation: a run may be posted before this thread starts */
    for (;;) {
        unsigned g;
        SPIN_UNTIL((g = atomic_load_explicit(&p->gen, memory_order_acquire)) != seen ||
                   atomic_load_explicit(&p->stop, memory_order_acquire));
        if (g == seen && !atomic_load(&p->stop)) {
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) break;
        seen = g;
        p->fn(p->arg, w->ith, p->n);
        if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->caller_waiting)) {
            /* last one out and the caller went to sleep: wake it (under the mutex, so the
             * signal cannot fall between its check of `pending` and its wait) */
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->cv_done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

sd_pool *sd_pool_create(int n_threads) {
    if (n_threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = c > 0 ? (int)c : 1;
    }
    if (n_threads > 1024) n_threads = 1024;
    sd_pool *p = (sd_pool *)calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    atomic_init(&p->gen, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->caller_waiting, 0);
    atomic_init(&p->stop, 0);
    if (pthread_mutex_init(&p->mu, NULL) != 0) { free(p); return NULL; }
    if (pthread_cond_init(&p->cv, NULL) != 0) { pthread_mutex_destroy(&p->mu); free(p); return NULL; }
    if (pthread_cond_init(&p->cv_done, NULL) != 0) {
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
        free(p);
        return NULL;
    }
    if (n_threads > 1) {
        p->w = (sd_worker *)calloc((size_t)(n_threads - 1), sizeof *p->w);
        if (!p->w) { sd_pool_free(p); return NULL; }
        for (int i = 1; i < n_threads; i++) {
            sd_worker *w = &p->w[i - 1];
            w->p = p;
            w->ith = i;
            if (pthread_create(&w->th, NULL, worker_main, w) != 0) { sd_pool_free(p); return NULL; }
            p->n_started++;
        }
    }
    return p;
}

void sd_pool_free(sd_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_started; i++) pthread_join(p->w[i].th, NULL);
    free(p->w);
    pthread_cond_destroy(&p->cv);
    pthread_cond_destroy(&p->cv_done);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

int sd_pool_size(const sd_pool *p) { return p ? p->n : 1; }

void sd_pool_run(sd_pool *p, sd_pool_fn fn, void *arg) {
    if (!p || p->n == 1) { fn(arg, 0, 1); return; }
    p->fn = fn;
    p->arg = arg;
    atomic_store_explicit(&p->pending, p->n - 1, memory_order_relaxed);
    atomic_fetch_add(&p->gen, 1); /* seq_cst: publishes fn/arg/pending */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    fn(arg, 0, p->n);
    SPIN_UNTIL(atomic_load_explicit(&p->pending, memory_order_acquire) == 0);
    if (atomic_load(&p->pending) > 0) {
        atomic_store(&p->caller_waiting, 1);
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->pending) > 0) pthread_cond_wait(&p->cv_done, &p->mu);
        pthread_mutex_unlock(&p->mu);
        atomic_store(&p->caller_waiting, 0);
    }
}
