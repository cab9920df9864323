/* A persistent worker pool for the CPU kernels.
 *
 * Usage:
 *     rlx_threadpool *pool = NULL;
 *     if (rlx_threadpool_create(0, &pool) != RLX_OK) ...   // 0: physical cores
 *     rlx_parallel_for(pool, n_rows, row_fn, &ctx);         // blocks until done
 *     rlx_threadpool_free(pool);
 *
 * rlx_parallel_for() runs fn(ctx, task, thread) for every task in [0, n_tasks)
 * on the pool's workers and the calling thread, which always takes part.
 * Thread i (the caller is 0) starts on the tasks [i*n/nth, (i+1)*n/nth) in
 * order, and a thread that runs out takes the others' remaining tasks one at
 * a time from the back of their ranges, so a caller can place its longest
 * tasks first in each thread's share. `thread` is in
 * [0, rlx_threadpool_size(pool)) and is stable for one call, so a kernel can
 * index per-thread scratch with it. A dispatch allocates nothing.
 *
 * Sharing the CPU: the call returns as soon as every task has run; it never
 * waits for a worker that has not started on the job (a worker the OS has
 * descheduled finds the job over when it runs again), only for tasks a
 * worker has taken and not finished. Every wait spins briefly, then yields,
 * then sleeps on a futex, so a waiting thread gives its core to the one it
 * waits for. Where those waits take more than half of the pool's time (the
 * machine has fewer cores free than the pool has threads), the pool runs
 * its jobs on the caller alone for a while, then tries its threads again.
 *
 * Thread safety: one rlx_parallel_for() at a time per pool (the engine gives
 * each session its own pool, or serializes). A nested call from inside a task
 * runs its tasks serially on the calling thread. A NULL pool means "run
 * serially on the caller": every kernel accepts NULL.
 */
#ifndef RLX_BACKENDS_CPU_THREADPOOL_H
#define RLX_BACKENDS_CPU_THREADPOOL_H

#include <stdint.h>

#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rlx_threadpool rlx_threadpool;

/* One step of a spin-wait: a pause where the CPU has one. */
static inline void rlx_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* fn(ctx, task, thread) */
typedef void (*rlx_task_fn)(void *ctx, int64_t task, int thread);

/* n_threads <= 0 picks rlx_cpu_usable_cores() (cpu-features.h). The pool
 * owns n_threads - 1 OS threads; the caller of rlx_parallel_for() is the
 * remaining one. */
rlx_status rlx_threadpool_create(int n_threads, rlx_threadpool **out_pool);
void rlx_threadpool_free(rlx_threadpool *pool);
/* 1 for a NULL pool. */
int rlx_threadpool_size(const rlx_threadpool *pool);
void rlx_parallel_for(rlx_threadpool *pool, int64_t n_tasks, rlx_task_fn fn, void *ctx);

/* What the pool has done since it was created (read from the thread that
 * calls rlx_parallel_for, or after it). */
typedef struct rlx_threadpool_stats {
    uint64_t jobs;          /* jobs run on the pool's threads */
    uint64_t jobs_alone;    /* jobs run on the caller alone while contended */
    uint64_t alone_periods; /* times the pool chose to run alone for a while */
    uint64_t wait_ns;       /* caller's time waiting for tasks others had taken */
} rlx_threadpool_stats;

void rlx_threadpool_get_stats(const rlx_threadpool *pool, rlx_threadpool_stats *out);

#ifdef __cplusplus
}
#endif
#endif
