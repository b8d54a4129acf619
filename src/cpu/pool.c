/* pool.c: a persistent pthread pool for the CPU operators.
 *
 * One run = one generation. The caller publishes (fn, arg), bumps `gen` and runs thread 0's
 * share itself; workers see the new generation, run their share and decrement `pending`.
 * Waiting is two-phase: workers spin on `gen` for a short while (a decode step calls
 * sd_pool_run ~100 times with microseconds between calls, so a futex round trip per call
 * would dominate), then sleep on a condition variable. The wake-up handshake is Dekker
 * style on seq_cst atomics: a worker announces itself in `sleepers` before its last look at
 * `gen`, and the caller reads `sleepers` after bumping `gen`, so at least one of them sees
 * the other and no wake-up is lost. */
#include "cpu/pool.h"
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SD_CPU_RELAX() ((void)0)
#else
#define SD_CPU_RELAX() ((void)0)
#endif

/* Waiting: SD_POOL_SPIN pause iterations (a few microseconds), then up to SD_POOL_YIELD
 * sched_yield calls (lets other runnable threads in when the machine is oversubscribed),
 * then a worker sleeps on the condition variable; the caller keeps yielding. */
#define SD_POOL_SPIN 4000
#define SD_POOL_YIELD 200

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
    _Atomic int stop;
    sd_pool_fn fn;              /* written before the gen bump (release), read after (acquire) */
    void *arg;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static void *worker_main(void *vp) {
    sd_worker *w = (sd_worker *)vp;
    sd_pool *p = w->p;
    unsigned seen = 0; /* gen at creation: a run may be posted before this thread starts */
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen &&
               !atomic_load_explicit(&p->stop, memory_order_acquire) && spins < SD_POOL_SPIN + SD_POOL_YIELD) {
            if (spins < SD_POOL_SPIN) SD_CPU_RELAX();
            else sched_yield();
            spins++;
        }
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
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel);
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
    atomic_init(&p->stop, 0);
    if (pthread_mutex_init(&p->mu, NULL) != 0) { free(p); return NULL; }
    if (pthread_cond_init(&p->cv, NULL) != 0) { pthread_mutex_destroy(&p->mu); free(p); return NULL; }
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
    int spins = 0;
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) {
        if (++spins < SD_POOL_SPIN) SD_CPU_RELAX();
        else sched_yield();
    }
}
