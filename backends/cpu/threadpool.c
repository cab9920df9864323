/* Persistent pool: workers wait on a generation counter (spin, yield, then
 * futex). The caller writes the job and every thread's task range, bumps
 * the generation, works through tasks itself and returns once the count of
 * finished tasks reaches the job's size.
 *
 * Why completion counts tasks, not workers: on a machine shared with other
 * programs (or with the app's own UI thread) a worker is often descheduled
 * when a job is published. Waiting for every worker to check in made each
 * such job last until the OS ran that worker again (milliseconds), and a
 * two-thread decode fell to a third of the one-thread speed beside a single
 * busy process. Now the threads that run take the absent one's tasks from
 * the back of its range, and the caller waits only for tasks that were
 * taken and are still running.
 *
 * Tasks are dealt out as one contiguous range per thread, each range in a
 * word of its own cache line: (generation tag 32 bits, next 16, end 16).
 * The owner takes tasks from the front, a thread whose range is empty takes
 * them one at a time from the back of the others'. Both are CAS on the word.
 * With one shared counter every task cost a cache-line transfer between
 * cores (about 250 ns each way on the development VM), which on a decode
 * step's 12-task matrix-vector products was a twentieth of the product.
 *
 * A worker that wakes late holds the generation it saw. Its CAS on a range
 * word succeeds only while the word still carries that generation's tag, and
 * the caller rewrites every word (new tag) before publishing the next job,
 * which it does only once every task of this one has finished. So a task
 * taken successfully belongs to the job still running, and its fn/ctx are
 * read after the take: a late worker never runs a task of the wrong job, and
 * the caller never writes a job's fields while a task of the previous one
 * can still read them. The tag only compares for equality; it would take
 * 2^32 jobs published while one worker sleeps between reading the
 * generation and its CAS for a stale tag to match.
 *
 * Jobs of more than 65535 tasks are dealt out in units of several
 * consecutive tasks.
 *
 * When the machine has fewer cores free than the pool has threads, a
 * worker is often descheduled in the middle of a task, and the caller then
 * waits for the OS to run it again (a scheduler slice, milliseconds). The
 * caller measures the time it spends waiting for tasks others have taken
 * against the time in jobs; over a window where the waits are more than
 * half of it, two threads do no better than one, and the pool runs its
 * jobs on the caller alone for a while (doubling while it stays so, up to a
 * second), then tries again. */
#include "backends/cpu/threadpool.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "backends/cpu/cpu-features.h"

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#define RLX_HAVE_FUTEX 1
#else
#define RLX_HAVE_FUTEX 0
#endif

/* Spin, then yield, then sleep. The spin (a few microseconds of pause
 * instructions) covers the gap between two kernels of one decode step on an
 * idle machine. The yields keep a waiter responsive while costing nothing
 * when no other thread wants its core (sched_yield returns at once), and
 * hand the core over when one does: the worker the caller waits for, the
 * caller a worker would compete with, or another program. The futex frees
 * the core for good once the pool is idle. */
#define SPIN_ITERS  1000
#define YIELD_ITERS 64

#define RANGE_MAX 0xFFFF

/* the contention window and the back-off (see the top of the file) */
#define WINDOW_NS      (20 * 1000 * 1000ull)
#define BACKOFF_MIN_NS (50 * 1000 * 1000ull)
#define BACKOFF_MAX_NS (1600 * 1000 * 1000ull)

typedef struct {
    _Alignas(64) atomic_uint_least64_t w; /* tag << 32 | next << 16 | end */
} task_range;

/* Three cache lines that cores hand to each other: the job (written by the
 * caller only, read by spinning workers, so a publish costs the workers one
 * transfer that brings every field at once), the finished count (written by
 * workers as they finish, read by the waiting caller) and the sleeper
 * count. */
struct rlx_threadpool {
    _Alignas(64) atomic_uint gen; /* bumped (seq_cst) to publish a job */
    atomic_bool stop;
    rlx_task_fn fn;
    void *ctx;
    int64_t n_tasks;
    int64_t unit; /* tasks per unit dealt out (1 up to RANGE_MAX tasks) */
    unsigned n_units;
    int n_threads;
    task_range *ranges; /* n_threads, cache-line aligned */
    pthread_t *threads;
    _Alignas(64) atomic_uint done; /* units of the current job finished */
    atomic_int main_waiting;
    _Alignas(64) atomic_int sleepers; /* workers blocked in futex on gen */
    /* the caller's alone: the contention window (see the top of the file) */
    _Alignas(64) uint64_t win_start, win_jobs_ns, win_wait_ns;
    uint64_t alone_until, backoff_ns;
    rlx_threadpool_stats stats;
};

struct worker_arg {
    rlx_threadpool *pool;
    int index;
};

static _Thread_local int tls_in_task;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

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

static inline uint64_t range_pack(unsigned tag, uint64_t next, uint64_t end)
{
    return (uint64_t)tag << 32 | next << 16 | end;
}

/* a unit from the front of thread i's range (own) or its back (steal), or
 * -1 when the range is empty or belongs to another job than `tag` */
static int64_t range_take(rlx_threadpool *pool, int i, unsigned tag, bool own)
{
    atomic_uint_least64_t *w = &pool->ranges[i].w;
    uint64_t v = atomic_load_explicit(w, memory_order_acquire);
    for (;;) {
        if ((unsigned)(v >> 32) != tag)
            return -1;
        uint64_t next = v >> 16 & RANGE_MAX, end = v & RANGE_MAX;
        if (next >= end)
            return -1;
        uint64_t to = own ? range_pack(tag, next + 1, end) : range_pack(tag, next, end - 1);
        if (atomic_compare_exchange_weak_explicit(w, &v, to, memory_order_acq_rel,
                                                  memory_order_acquire))
            return (int64_t)(own ? next : end - 1);
    }
}

/* Runs unit u of the job: fn and ctx are read after the unit was taken, when
 * they are known to be this job's (see the top of the file). */
static void run_unit(const rlx_threadpool *pool, int64_t u, int thread)
{
    rlx_task_fn fn = pool->fn;
    void *ctx = pool->ctx;
    int64_t t0 = u * pool->unit, t1 = t0 + pool->unit;
    if (t1 > pool->n_tasks)
        t1 = pool->n_tasks;
    for (int64_t t = t0; t < t1; t++)
        fn(ctx, t, thread);
}

/* Adds n finished units; wakes the caller if they were the last ones. The
 * job's size is read before the add: after it the job may be over. */
static void finish_units(rlx_threadpool *pool, unsigned n, unsigned n_units)
{
    unsigned d = atomic_fetch_add(&pool->done, n) + n;
    if (d == n_units && atomic_load(&pool->main_waiting))
        futex_wake(&pool->done, 1);
}

/* Takes and runs units of job `tag` until none is left: its own range first,
 * then the others' from the back. Returns nothing the caller needs; every
 * unit run is counted in pool->done. */
static void run_tasks(rlx_threadpool *pool, int thread, unsigned tag)
{
    tls_in_task = 1;
    unsigned mine = 0, n_units = 0;
    int64_t u;
    while ((u = range_take(pool, thread, tag, true)) >= 0) {
        n_units = pool->n_units;
        run_unit(pool, u, thread);
        mine++;
    }
    if (mine)
        finish_units(pool, mine, n_units);
    /* ranges only shrink: one pass that finds them all empty ends it */
    for (int k = 1; k < pool->n_threads; k++) {
        int victim = (thread + k) % pool->n_threads;
        while ((u = range_take(pool, victim, tag, false)) >= 0) {
            n_units = pool->n_units;
            run_unit(pool, u, thread);
            finish_units(pool, 1, n_units);
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
     * try a job published before it got here */
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&pool->gen, memory_order_acquire)) == seen) {
            if (spins < SPIN_ITERS) {
                rlx_cpu_relax();
                spins++;
            } else if (spins < SPIN_ITERS + YIELD_ITERS) {
                sched_yield();
                spins++;
            } else {
                atomic_fetch_add(&pool->sleepers, 1);
                /* re-check after announcing ourselves, the publisher reads
                 * `sleepers` after bumping gen (both seq_cst) */
                if (atomic_load(&pool->gen) == seen)
                    futex_wait(&pool->gen, seen);
                atomic_fetch_sub(&pool->sleepers, 1);
                spins = 0;
            }
        }
        seen = g;
        if (atomic_load_explicit(&pool->stop, memory_order_acquire))
            break;
        run_tasks(pool, index, g);
    }
    return NULL;
}

rlx_status rlx_threadpool_create(int n_threads, rlx_threadpool **out_pool)
{
    if (!out_pool)
        return RLX_ERR_INVALID_ARG;
    *out_pool = NULL;
    if (n_threads <= 0)
        n_threads = rlx_cpu_usable_cores();
    if (n_threads < 1)
        n_threads = 1;
    if (n_threads > 1024)
        return RLX_ERR_INVALID_ARG;
    rlx_threadpool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return RLX_ERR_NO_MEMORY;
    pool->n_threads = n_threads;
    atomic_init(&pool->gen, 0);
    atomic_init(&pool->done, 0);
    atomic_init(&pool->sleepers, 0);
    atomic_init(&pool->main_waiting, 0);
    atomic_init(&pool->stop, false);
    pool->win_start = now_ns();
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
    uint64_t t0 = now_ns();
    if (t0 < pool->alone_until) {
        pool->stats.jobs_alone++;
        tls_in_task = 1;
        for (int64_t t = 0; t < n_tasks; t++)
            fn(ctx, t, 0);
        tls_in_task = 0;
        return;
    }
    const int nth = pool->n_threads;
    int64_t unit = (n_tasks + RANGE_MAX - 1) / RANGE_MAX;
    unsigned n_units = (unsigned)((n_tasks + unit - 1) / unit);
    pool->fn = fn;
    pool->ctx = ctx;
    pool->n_tasks = n_tasks;
    pool->unit = unit;
    pool->n_units = n_units;
    atomic_store_explicit(&pool->done, 0, memory_order_relaxed);
    /* only this thread bumps gen: the next value is known before the bump */
    unsigned g = atomic_load_explicit(&pool->gen, memory_order_relaxed) + 1;
    if (g == 0)
        g = 1;
    for (int i = 0; i < nth; i++)
        atomic_store_explicit(&pool->ranges[i].w,
                              range_pack(g, (uint64_t)n_units * (uint64_t)i / (uint64_t)nth,
                                         (uint64_t)n_units * (uint64_t)(i + 1) / (uint64_t)nth),
                              memory_order_release);
    atomic_store(&pool->gen, g); /* seq_cst: publishes the job */
    int sleeping = atomic_load(&pool->sleepers);
    if (sleeping > 0) {
        /* no more than there are other tasks for */
        int want = (int)(n_units - 1 < (unsigned)sleeping ? n_units - 1 : (unsigned)sleeping);
        futex_wake(&pool->gen, want);
    }

    run_tasks(pool, 0, g);

    int spins = 0;
    unsigned d;
    uint64_t wait_from = 0;
    while ((d = atomic_load_explicit(&pool->done, memory_order_acquire)) != n_units) {
        if (spins < SPIN_ITERS) {
            rlx_cpu_relax();
            spins++;
        } else if (spins < SPIN_ITERS + YIELD_ITERS) {
            if (spins == SPIN_ITERS)
                wait_from = now_ns();
            sched_yield();
            spins++;
        } else {
            atomic_store(&pool->main_waiting, 1);
            d = atomic_load(&pool->done);
            if (d != n_units)
                futex_wait(&pool->done, d);
            atomic_store(&pool->main_waiting, 0);
        }
    }
    uint64_t t1 = now_ns();
    pool->stats.jobs++;
    pool->win_jobs_ns += t1 - t0;
    if (wait_from) {
        pool->win_wait_ns += t1 - wait_from;
        pool->stats.wait_ns += t1 - wait_from;
    }
    if (t1 - pool->win_start < WINDOW_NS)
        return;
    if (pool->win_wait_ns * 2 > pool->win_jobs_ns) {
        /* the other threads' tasks kept the caller waiting for more than
         * half of the window: run alone, longer each time in a row */
        pool->backoff_ns = pool->backoff_ns ? pool->backoff_ns * 2 : BACKOFF_MIN_NS;
        if (pool->backoff_ns > BACKOFF_MAX_NS)
            pool->backoff_ns = BACKOFF_MAX_NS;
        pool->alone_until = t1 + pool->backoff_ns;
        pool->stats.alone_periods++;
    } else {
        pool->backoff_ns /= 2;
        if (pool->backoff_ns < BACKOFF_MIN_NS)
            pool->backoff_ns = 0;
    }
    pool->win_start = t1;
    pool->win_jobs_ns = pool->win_wait_ns = 0;
}

void rlx_threadpool_get_stats(const rlx_threadpool *pool, rlx_threadpool_stats *out)
{
    if (!out)
        return;
    *out = pool ? pool->stats : (rlx_threadpool_stats){0};
}
