/* rlx_worker: one engine thread running jobs from a queue, in order.
 *
 * Usage:
 *     rlx_worker_callbacks cb = {.on_done = done, .on_progress = prog, .user = ui};
 *     rlx_worker *w = NULL;
 *     if (rlx_worker_create(session, &cb, &w, &err) != RLX_OK) ...
 *     uint64_t id = rlx_worker_submit(w, generate_job, job_data, free_job_data);
 *     ...
 *     rlx_worker_cancel(w, id);          // from any thread
 *     rlx_worker_free(w);                // cancels what is left, joins the thread
 *
 * A job is `rlx_status fn(rlx_worker *w, void *data, rlx_error **err)`. It runs
 * on the worker thread; it reports with rlx_worker_progress() (which returns
 * false once the job is cancelled) and rlx_worker_emit() (tokens, memory
 * figures, anything the caller defines), and returns its status. When the
 * worker was given a session, the session's cancel flag is the running job's
 * flag, so a cancelled job's program stops between instructions with
 * RLX_ERR_CANCELLED, and the session's progress reports reach on_progress.
 *
 * Callbacks run on the worker thread, in order: on_start, any on_progress /
 * on_event (with a session: an RLX_WORKER_EVENT_MEMORY event after each job
 * that ran), then exactly one on_done per submitted job (also for a job
 * cancelled before it started, with RLX_ERR_CANCELLED and no on_start). A
 * GUI turns them into main-loop events.
 *
 * Thread safety: submit, cancel, cancel_all and wait_idle may be called from
 * any thread except (for wait_idle and free) the worker thread itself.
 */
#ifndef RLX_ENGINE_RUNTIME_WORKER_H
#define RLX_ENGINE_RUNTIME_WORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/base/status.h"
#include "engine/runtime/session.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rlx_worker rlx_worker;

typedef rlx_status (*rlx_job_fn)(rlx_worker *w, void *data, rlx_error **err);

/* Event kinds for rlx_worker_emit; callers may define their own from
 * RLX_WORKER_EVENT_USER up. */
enum {
    RLX_WORKER_EVENT_TOKEN = 1,  /* data: UTF-8 text piece */
    RLX_WORKER_EVENT_MEMORY = 2, /* data: rlx_session_memory_info */
    RLX_WORKER_EVENT_USER = 256,
};

typedef struct rlx_worker_callbacks {
    void (*on_start)(void *user, uint64_t job);
    void (*on_progress)(void *user, uint64_t job, const char *stage, double fraction);
    void (*on_event)(void *user, uint64_t job, int kind, const void *data, size_t size);
    /* message is NULL on success; valid only during the call */
    void (*on_done)(void *user, uint64_t job, rlx_status status, const char *message);
    void *user;
} rlx_worker_callbacks;

/* session may be NULL; callbacks may be NULL. */
RLX_API rlx_status rlx_worker_create(rlx_session *session, const rlx_worker_callbacks *cb,
                                     rlx_worker **out, rlx_error **err);
/* Cancels the running job and drops the queued ones (each still gets its
 * on_done), joins the thread, frees. */
RLX_API void rlx_worker_free(rlx_worker *w);

/* Queue a job; returns its id (> 0), or 0 when the worker is shutting down
 * or out of memory (free_data is then called on data at once). free_data
 * (may be NULL) runs on the worker thread after the job's on_done. */
RLX_API uint64_t rlx_worker_submit(rlx_worker *w, rlx_job_fn fn, void *data,
                                   void (*free_data)(void *data));
/* Cancel a queued or running job; false when no such job is pending. */
RLX_API bool rlx_worker_cancel(rlx_worker *w, uint64_t job);
RLX_API void rlx_worker_cancel_all(rlx_worker *w);
/* Block until the queue is empty and no job runs. */
RLX_API void rlx_worker_wait_idle(rlx_worker *w);

/* From inside a job: */
RLX_API rlx_session *rlx_worker_session(rlx_worker *w);
/* The running job's cancel flag (nonzero once cancelled). */
RLX_API volatile int *rlx_worker_cancel_flag(rlx_worker *w);
RLX_API bool rlx_worker_cancelled(rlx_worker *w);
/* Reports progress; returns false when the job should stop. */
RLX_API bool rlx_worker_progress(rlx_worker *w, const char *stage, double fraction);
RLX_API void rlx_worker_emit(rlx_worker *w, int kind, const void *data, size_t size);

#ifdef __cplusplus
}
#endif
#endif
