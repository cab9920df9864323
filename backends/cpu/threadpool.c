/* Persistent pool: workers wait on a generation counter (spin, then futex).
 * The caller publishes fn/ctx/n_tasks, bumps the generation, works through
 * tasks itself and then waits until every worker has checked in for that
 * generation, so no worker can still be reading the previous job when the
 * next one is published. */
#include "backends/cpu/threadpool.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "backends/cpu/cpu-features.h"

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#define RLX_HAVE_FUTEX 1
#else
#define RLX_HAVE_FUTEX 0
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* About 50-100 us of pause instructions: long enough to cover the gap between
 * two kernels of one decode step, short enough not to burn a core when idle. */
#define SPIN_ITERS 4000

struct rlx_threadpool {
    int n_threads;
    pthread_t *threads;
    /* job, published before `gen` is bumped (release) */
    rlx_task_fn fn;
    void *ctx;
    int64_t n_tasks;
    _Alignas(64) atomic_int_least64_t next_task;
    _Alignas(64) atomic_uint gen;
    _Alignas(64) atomic_uint checked_in; /* workers done with this generation */
    atomic_int sleepers;                 /* workers blocked in futex on gen */
    atomic_int main_waiting;
    atomic_bool stop;
};

struct worker_arg {
    rlx_threadpool *pool;
    int index;
};

static _Thread_local int tls_in_task;

static void futex_wait(atomic_uint *addr, unsigned expected)
{
#if RLX_HAVE_FUTEX
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
#else
    (void)addr;
    (void)expected;
    sched_yield();
#endif
}

static void futex_wake(atomic_uint *addr, int n)
{
#if RLX_HAVE_FUTEX
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
#else
    (void)addr;
    (void)n;
#endif
}

static void run_tasks(rlx_threadpool *pool, int thread)
{
    rlx_task_fn fn = pool->fn;
    void *ctx = pool->ctx;
    int64_t n = pool->n_tasks;
    tls_in_task = 1;
    for (;;) {
        int64_t t = atomic_fetch_add_explicit(&pool->next_task, 1, memory_order_relaxed);
        if (t >= n)
            break;
        fn(ctx, t, thread);
    }
    tls_in_task = 0;
}

static void *worker_main(void *p)
{
    struct worker_arg *wa = p;
    rlx_threadpool *pool = wa->pool;
    int index = wa->index;
    free(wa);
    /* generation 0 is "no job yet": a worker that starts late must still
     * run a job published before it got here */
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&pool->gen, memory_order_acquire)) == seen) {
            if (++spins < SPIN_ITERS) {
                cpu_relax();
                continue;
            }
            atomic_fetch_add(&pool->sleepers, 1);
            /* re-check after announcing ourselves, the publisher reads
             * `sleepers` after bumping gen (both seq_cst) */
            if (atomic_load(&pool->gen) == seen)
                futex_wait(&pool->gen, seen);
            atomic_fetch_sub(&pool->sleepers, 1);
            spins = 0;
        }
        seen = g;
        if (atomic_load_explicit(&pool->stop, memory_order_acquire))
            break;
        run_tasks(pool, index);
        unsigned c = atomic_fetch_add(&pool->checked_in, 1) + 1;
        if (c == (unsigned)(pool->n_threads - 1) && atomic_load(&pool->main_waiting))
            futex_wake(&pool->checked_in, 1);
    }
    return NULL;
}

rlx_status rlx_threadpool_create(int n_threads, rlx_threadpool **out_pool)
{
    if (!out_pool)
        return RLX_ERR_INVALID_ARG;
    *out_pool = NULL;
    if (n_threads <= 0)
        n_threads = rlx_cpu_features_get()->physical_cores;
    if (n_threads < 1)
        n_threads = 1;
    if (n_threads > 1024)
        return RLX_ERR_INVALID_ARG;
    rlx_threadpool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return RLX_ERR_NO_MEMORY;
    pool->n_threads = n_threads;
    atomic_init(&pool->gen, 0);
    atomic_init(&pool->next_task, 0);
    atomic_init(&pool->checked_in, 0);
    atomic_init(&pool->sleepers, 0);
    atomic_init(&pool->main_waiting, 0);
    atomic_init(&pool->stop, false);
    if (n_threads > 1) {
        pool->threads = calloc((size_t)n_threads - 1, sizeof *pool->threads);
        if (!pool->threads) {
            free(pool);
            return RLX_ERR_NO_MEMORY;
        }
    }
    for (int i = 1; i < n_threads; i++) {
        struct worker_arg *wa = malloc(sizeof *wa);
        int rc = wa ? 0 : ENOMEM;
        if (wa) {
            wa->pool = pool;
            wa->index = i;
            rc = pthread_create(&pool->threads[i - 1], NULL, worker_main, wa);
            if (rc)
                free(wa);
        }
        if (rc) {
            pool->n_threads = i; /* shut down the ones that started */
            rlx_threadpool_free(pool);
            return RLX_ERR_NO_MEMORY;
        }
    }
    *out_pool = pool;
    return RLX_OK;
}

void rlx_threadpool_free(rlx_threadpool *pool)
{
    if (!pool)
        return;
    if (pool->n_threads > 1) {
        atomic_store(&pool->stop, true);
        atomic_fetch_add(&pool->gen, 1);
        futex_wake(&pool->gen, INT_MAX);
        for (int i = 0; i < pool->n_threads - 1; i++)
            pthread_join(pool->threads[i], NULL);
    }
    free(pool->threads);
    free(pool);
}

int rlx_threadpool_size(const rlx_threadpool *pool)
{
    return pool ? pool->n_threads : 1;
}

void rlx_parallel_for(rlx_threadpool *pool, int64_t n_tasks, rlx_task_fn fn, void *ctx)
{
    if (n_tasks <= 0)
        return;
    if (!pool || pool->n_threads == 1 || n_tasks == 1 || tls_in_task) {
        for (int64_t t = 0; t < n_tasks; t++)
            fn(ctx, t, 0);
        return;
    }
    pool->fn = fn;
    pool->ctx = ctx;
    pool->n_tasks = n_tasks;
    atomic_store_explicit(&pool->next_task, 0, memory_order_relaxed);
    atomic_store_explicit(&pool->checked_in, 0, memory_order_relaxed);
    atomic_fetch_add(&pool->gen, 1); /* seq_cst: publishes the job */
    if (atomic_load(&pool->sleepers) > 0)
        futex_wake(&pool->gen, INT_MAX);

    run_tasks(pool, 0);

    const unsigned want = (unsigned)(pool->n_threads - 1);
    int spins = 0;
    unsigned c;
    while ((c = atomic_load_explicit(&pool->checked_in, memory_order_acquire)) != want) {
        if (++spins < SPIN_ITERS * 4) {
            cpu_relax();
            continue;
        }
        atomic_store(&pool->main_waiting, 1);
        c = atomic_load(&pool->checked_in);
        if (c != want)
            futex_wait(&pool->checked_in, c);
        atomic_store(&pool->main_waiting, 0);
    }
}
