/* Persistent pool: workers wait on a generation counter (spin, then futex).
 * The caller publishes fn/ctx/n_tasks, bumps the generation, works through
 * tasks itself and then waits until every worker has checked in for that
 * generation, so no worker can still be reading the previous job when the
 * next one is published.
 *
 * Tasks are dealt out as one contiguous range per thread, each range in a
 * word of its own cache line: (generation tag 16 bits, next 24, end 24). The
 * owner takes tasks from the front, a thread whose range is empty takes them
 * one at a time from the back of the others'. Both are CAS on the word. With
 * one shared counter every task cost a cache-line transfer between cores
 * (about 250 ns each way on the development VM), which on a decode step's
 * 12-task matrix-vector products was a twentieth of the product. A range
 * word whose tag is not the current generation's has not been set up for
 * this job yet: whoever reaches it first (owner or thief) sets it, so the
 * publisher writes nothing into the other threads' lines. Jobs of more than
 * 2^24 - 1 tasks fall back to the shared counter. */
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

/* About 50-100 us of pause instructions: long enough to cover the gap between
 * two kernels of one decode step, short enough not to burn a core when idle. */
#define SPIN_ITERS 4000

#define RANGE_MAX ((1 << 24) - 1)

typedef struct {
    _Alignas(64) atomic_uint_least64_t w; /* tag << 48 | next << 24 | end */
} task_range;

/* Three cache lines that cores hand to each other: the job (written by the
 * caller only, read by spinning workers, so a publish costs the workers one
 * transfer that brings every field at once), the check-in count (written by
 * workers, read by the waiting caller) and the sleeper count. */
struct rlx_threadpool {
    _Alignas(64) atomic_uint gen; /* bumped (seq_cst) to publish a job */
    atomic_bool stop;
    rlx_task_fn fn;
    void *ctx;
    int64_t n_tasks;
    int n_threads;
    task_range *ranges; /* n_threads, cache-line aligned */
    pthread_t *threads;
    /* check-ins since the pool started: a job of generation g is done when
     * it reaches g * (n_threads - 1) (both counts wrap alike) */
    _Alignas(64) atomic_uint checked_in;
    atomic_int main_waiting;
    _Alignas(64) atomic_int sleepers;            /* workers blocked in futex on gen */
    _Alignas(64) atomic_int_least64_t next_task; /* jobs past RANGE_MAX tasks */
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

static inline uint64_t range_pack(unsigned tag, int64_t next, int64_t end)
{
    return (uint64_t)(tag & 0xFFFFu) << 48 | (uint64_t)next << 24 | (uint64_t)end;
}

/* the current word of thread i's range for generation `tag`, setting it up
 * when it still holds an earlier generation's */
static uint64_t range_load(rlx_threadpool *pool, int i, unsigned tag)
{
    atomic_uint_least64_t *w = &pool->ranges[i].w;
    uint64_t v = atomic_load_explicit(w, memory_order_acquire);
    while ((unsigned)(v >> 48) != (tag & 0xFFFFu)) {
        int64_t n = pool->n_tasks, nth = pool->n_threads;
        uint64_t fresh = range_pack(tag, n * i / nth, n * (i + 1) / nth);
        if (atomic_compare_exchange_weak_explicit(w, &v, fresh, memory_order_acq_rel,
                                                  memory_order_acquire))
            return fresh;
    }
    return v;
}

/* a task from the front of thread i's range (own) or its back (steal), or -1 */
static int64_t range_take(rlx_threadpool *pool, int i, unsigned tag, bool own)
{
    atomic_uint_least64_t *w = &pool->ranges[i].w;
    uint64_t v = range_load(pool, i, tag);
    for (;;) {
        int64_t next = (int64_t)(v >> 24 & RANGE_MAX), end = (int64_t)(v & RANGE_MAX);
        if (next >= end)
            return -1;
        uint64_t to = own ? range_pack(tag, next + 1, end) : range_pack(tag, next, end - 1);
        if (atomic_compare_exchange_weak_explicit(w, &v, to, memory_order_acq_rel,
                                                  memory_order_acquire))
            return own ? next : end - 1;
    }
}

static void run_tasks(rlx_threadpool *pool, int thread, unsigned tag)
{
    rlx_task_fn fn = pool->fn;
    void *ctx = pool->ctx;
    int64_t n = pool->n_tasks;
    tls_in_task = 1;
    if (n > RANGE_MAX) {
        for (;;) {
            int64_t t = atomic_fetch_add_explicit(&pool->next_task, 1, memory_order_relaxed);
            if (t >= n)
                break;
            fn(ctx, t, thread);
        }
    } else {
        int64_t t;
        while ((t = range_take(pool, thread, tag, true)) >= 0)
            fn(ctx, t, thread);
        /* ranges only shrink: one pass that finds them all empty ends it */
        for (int k = 1; k < pool->n_threads; k++) {
            int victim = (thread + k) % pool->n_threads;
            while ((t = range_take(pool, victim, tag, false)) >= 0)
                fn(ctx, t, thread);
        }
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
                rlx_cpu_relax();
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
        run_tasks(pool, index, g);
        unsigned c = atomic_fetch_add(&pool->checked_in, 1) + 1;
        if (c == g * (unsigned)(pool->n_threads - 1) && atomic_load(&pool->main_waiting))
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
    pool->ranges = aligned_alloc(64, (size_t)n_threads * sizeof *pool->ranges);
    if (!pool->ranges) {
        free(pool);
        return RLX_ERR_NO_MEMORY;
    }
    for (int i = 0; i < n_threads; i++)
        atomic_init(&pool->ranges[i].w, 0); /* tag 0: generation 0 is never a job */
    if (n_threads > 1) {
        pool->threads = calloc((size_t)n_threads - 1, sizeof *pool->threads);
        if (!pool->threads) {
            free(pool->ranges);
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
    free(pool->ranges);
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
    if (n_tasks > RANGE_MAX)
        atomic_store_explicit(&pool->next_task, 0, memory_order_relaxed);
    unsigned g = atomic_fetch_add(&pool->gen, 1) + 1; /* seq_cst: publishes the job */
    if (atomic_load(&pool->sleepers) > 0)
        futex_wake(&pool->gen, INT_MAX);

    run_tasks(pool, 0, g);

    const unsigned want = g * (unsigned)(pool->n_threads - 1);
    int spins = 0;
    unsigned c;
    while ((c = atomic_load_explicit(&pool->checked_in, memory_order_acquire)) != want) {
        if (++spins < SPIN_ITERS * 4) {
            rlx_cpu_relax();
            continue;
        }
        atomic_store(&pool->main_waiting, 1);
        c = atomic_load(&pool->checked_in);
        if (c != want)
            futex_wait(&pool->checked_in, c);
        atomic_store(&pool->main_waiting, 0);
    }
}
