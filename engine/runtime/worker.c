/* rlx_worker: a pthread draining a FIFO of jobs. */
#include <pthread.h>
#include <stdlib.h>

#include "engine/runtime/worker.h"

/* The cancel flag is read by running programs without the lock: relaxed
 * atomic accesses (the backend interface hands it out as volatile int). */
#define FLAG_SET(f, v) __atomic_store_n(&(f), (v), __ATOMIC_RELAXED)
#define FLAG_GET(f)    __atomic_load_n(&(f), __ATOMIC_RELAXED)

typedef struct job {
    uint64_t id;
    rlx_job_fn fn;
    void *data;
    void (*free_data)(void *);
    bool cancelled; /* before it started */
    struct job *next;
} job;

struct rlx_worker {
    rlx_session *session;
    rlx_worker_callbacks cb;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* a job arrived or shutdown */
    pthread_cond_t idle_cv; /* the worker went idle */
    job *head, *tail;
    uint64_t next_id;
    uint64_t running; /* id of the running job, 0 when idle */
    bool shutdown;
    volatile int cancel; /* the running job's flag */
};

static void finish(rlx_worker *w, job *j, rlx_status st, const char *msg)
{
    if (w->cb.on_done)
        w->cb.on_done(w->cb.user, j->id, st, msg);
    if (j->free_data)
        j->free_data(j->data);
    free(j);
}

static bool session_progress(void *user, const char *stage, double fraction)
{
    rlx_worker *w = user;
    return rlx_worker_progress(w, stage, fraction);
}

static void *worker_main(void *arg)
{
    rlx_worker *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->head && !w->shutdown)
            pthread_cond_wait(&w->cv, &w->mu);
        if (!w->head && w->shutdown)
            break;
        job *j = w->head;
        w->head = j->next;
        if (!w->head)
            w->tail = NULL;
        w->running = j->id;
        FLAG_SET(w->cancel, w->shutdown ? 1 : 0);
        pthread_mutex_unlock(&w->mu);

        if (FLAG_GET(w->cancel) || j->cancelled) {
            finish(w, j, RLX_ERR_CANCELLED, "cancelled");
        } else {
            if (w->cb.on_start)
                w->cb.on_start(w->cb.user, j->id);
            rlx_error *err = NULL;
            rlx_status st = j->fn(w, j->data, &err);
            if (st == RLX_OK && FLAG_GET(w->cancel))
                st = RLX_OK; /* finished before noticing: still a success */
            const char *msg = st == RLX_OK ? NULL
                              : err        ? rlx_error_message(err)
                                           : rlx_status_name(st);
            if (w->session && w->cb.on_event) {
                /* what the job left allocated, for a memory indicator */
                rlx_session_memory_info m = rlx_session_memory(w->session);
                w->cb.on_event(w->cb.user, j->id, RLX_WORKER_EVENT_MEMORY, &m, sizeof m);
            }
            finish(w, j, st, msg);
            rlx_error_free(err);
        }

        pthread_mutex_lock(&w->mu);
        w->running = 0;
        FLAG_SET(w->cancel, 0);
        if (!w->head)
            pthread_cond_broadcast(&w->idle_cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

rlx_status rlx_worker_create(rlx_session *session, const rlx_worker_callbacks *cb, rlx_worker **out,
                             rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_worker_create: no output given");
    rlx_worker *w = calloc(1, sizeof *w);
    if (!w)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory creating a worker");
    w->session = session;
    if (cb)
        w->cb = *cb;
    w->next_id = 1;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    pthread_cond_init(&w->idle_cv, NULL);
    if (session) {
        rlx_session_set_cancel_flag(session, (volatile int *)&w->cancel);
        rlx_session_set_progress(session, session_progress, w);
    }
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
        if (session) {
            rlx_session_set_cancel_flag(session, NULL);
            rlx_session_set_progress(session, NULL, NULL);
        }
        pthread_cond_destroy(&w->cv);
        pthread_cond_destroy(&w->idle_cv);
        pthread_mutex_destroy(&w->mu);
        free(w);
        return rlx_error_set(err, RLX_ERR_INTERNAL, "could not start the engine thread");
    }
    *out = w;
    return RLX_OK;
}

void rlx_worker_free(rlx_worker *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->shutdown = true;
    if (w->running)
        FLAG_SET(w->cancel, 1);
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    if (w->session) {
        rlx_session_set_cancel_flag(w->session, NULL);
        rlx_session_set_progress(w->session, NULL, NULL);
    }
    pthread_cond_destroy(&w->cv);
    pthread_cond_destroy(&w->idle_cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

uint64_t rlx_worker_submit(rlx_worker *w, rlx_job_fn fn, void *data, void (*free_data)(void *))
{
    job *j = w && fn ? calloc(1, sizeof *j) : NULL;
    if (!j) {
        if (free_data)
            free_data(data);
        return 0;
    }
    j->fn = fn;
    j->data = data;
    j->free_data = free_data;
    pthread_mutex_lock(&w->mu);
    if (w->shutdown) {
        pthread_mutex_unlock(&w->mu);
        free(j);
        if (free_data)
            free_data(data);
        return 0;
    }
    j->id = w->next_id++;
    if (w->tail)
        w->tail->next = j;
    else
        w->head = j;
    w->tail = j;
    uint64_t id = j->id;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return id;
}

/* Unlink queued jobs matching id (0 = all) into a list the caller finishes. */
static job *take_queued(rlx_worker *w, uint64_t id)
{
    job *taken = NULL, **tt = &taken;
    job **pp = &w->head;
    w->tail = NULL;
    while (*pp) {
        job *j = *pp;
        if (id == 0 || j->id == id) {
            *pp = j->next;
            j->next = NULL;
            *tt = j;
            tt = &j->next;
        } else {
            w->tail = j;
            pp = &j->next;
        }
    }
    return taken;
}

/* Jobs cancelled before they ran are finished on the worker thread so that
 * every callback comes from one thread: they go back to the front of the
 * queue marked cancelled. */
static void requeue_cancelled(rlx_worker *w, job *list)
{
    /* in front of the queue, in their original order */
    job *last = NULL;
    for (job *j = list; j; j = j->next) {
        j->cancelled = true;
        last = j;
    }
    if (!list)
        return;
    last->next = w->head;
    w->head = list;
    if (!w->tail)
        w->tail = last;
    pthread_cond_signal(&w->cv);
}

bool rlx_worker_cancel(rlx_worker *w, uint64_t id)
{
    if (!w || !id)
        return false;
    bool found = false;
    pthread_mutex_lock(&w->mu);
    if (w->running == id) {
        FLAG_SET(w->cancel, 1);
        found = true;
    } else {
        job *list = take_queued(w, id);
        found = list != NULL;
        requeue_cancelled(w, list);
    }
    pthread_mutex_unlock(&w->mu);
    return found;
}

void rlx_worker_cancel_all(rlx_worker *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    if (w->running)
        FLAG_SET(w->cancel, 1);
    requeue_cancelled(w, take_queued(w, 0));
    pthread_mutex_unlock(&w->mu);
}

void rlx_worker_wait_idle(rlx_worker *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    while (w->head || w->running)
        pthread_cond_wait(&w->idle_cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

rlx_session *rlx_worker_session(rlx_worker *w)
{
    return w ? w->session : NULL;
}

volatile int *rlx_worker_cancel_flag(rlx_worker *w)
{
    return w ? &w->cancel : NULL;
}

bool rlx_worker_cancelled(rlx_worker *w)
{
    return w && FLAG_GET(w->cancel);
}

bool rlx_worker_progress(rlx_worker *w, const char *stage, double fraction)
{
    if (!w)
        return true;
    if (w->cb.on_progress)
        w->cb.on_progress(w->cb.user, w->running, stage, fraction);
    return !FLAG_GET(w->cancel);
}

void rlx_worker_emit(rlx_worker *w, int kind, const void *data, size_t size)
{
    if (w && w->cb.on_event)
        w->cb.on_event(w->cb.user, w->running, kind, data, size);
}
