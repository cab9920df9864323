/* How many CPU threads the engine takes and how its pool shares the CPU:
 * the default count from the affinity mask and the cgroup quota, the cap
 * on a count above it, the pool's correctness while a busy competitor
 * keeps taking its cores, and a small model's decode on one thread. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "backends/backend.h"
#include "backends/cpu/cpu-features.h"
#include "backends/cpu/threadpool.h"
#include "engine/runtime/session.h"
#include "models/llm/llm.h"
#include "test-util.h"

/* ---------------------------------------------------------------- counts */

static void quota_parsing(void **state)
{
    (void)state;
    /* cgroup v2 cpu.max: "$MAX $PERIOD", MAX "max" for no limit */
    assert_true(rlx_cpu_quota_parse_cpu_max("max 100000\n") == 0.0);
    assert_true(rlx_cpu_quota_parse_cpu_max("150000 100000\n") == 1.5);
    assert_true(rlx_cpu_quota_parse_cpu_max("50000 100000") == 0.5);
    assert_true(rlx_cpu_quota_parse_cpu_max("") < 0);
    assert_true(rlx_cpu_quota_parse_cpu_max("12abc 100000") < 0);
    assert_true(rlx_cpu_quota_parse_cpu_max("100000") < 0);
    /* cgroup v1: cfs_quota_us -1 is no limit */
    assert_true(rlx_cpu_quota_from_cfs(-1, 100000) == 0.0);
    assert_true(rlx_cpu_quota_from_cfs(400000, 100000) == 4.0);
    assert_true(rlx_cpu_quota_from_cfs(100000, 0) < 0);
    /* the policy: cores of the mask, at most the quota to the nearest CPU */
    assert_int_equal(rlx_cpu_budget_cores(8, 0), 8);
    assert_int_equal(rlx_cpu_budget_cores(8, 1.5), 2);
    assert_int_equal(rlx_cpu_budget_cores(8, 2.4), 2);
    assert_int_equal(rlx_cpu_budget_cores(8, 0.3), 1);
    assert_int_equal(rlx_cpu_budget_cores(2, 16), 2);
    assert_int_equal(rlx_cpu_budget_cores(0, 0), 1);
}

/* The mask's CPUs as the kernel reports them, independently of the code
 * under test's count. */
static int mask_cpus(cpu_set_t *set)
{
    CPU_ZERO(set);
    assert_int_equal(sched_getaffinity(0, sizeof *set, set), 0);
    return CPU_COUNT(set);
}

static void affinity_restricts_the_default(void **state)
{
    (void)state;
    cpu_set_t all;
    int n = mask_cpus(&all);
    rlx_cpu_budget b;
    rlx_cpu_budget_get(&b);
    assert_int_equal(b.affinity_cpus, n);
    assert_true(b.affinity_cores >= 1 && b.affinity_cores <= n);
    assert_true(b.usable_cores >= 1 && b.usable_cores <= b.affinity_cores);
    assert_int_equal(rlx_cpu_usable_cores(), b.usable_cores);

    /* one CPU of the mask: one core, one thread by default */
    int first = 0;
    while (!CPU_ISSET(first, &all))
        first++;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    rlx_cpu_budget_get(&b);
    int usable_one = rlx_cpu_usable_cores();
    rlx_threadpool *pool = NULL;
    rlx_status ps = rlx_threadpool_create(0, &pool);
    int pool_size = rlx_threadpool_size(pool);
    rlx_threadpool_free(pool);
    const rlx_backend_i *be = rlx_backend_find("cpu");
    rlx_device *dev = NULL;
    rlx_error *err = NULL;
    rlx_device_info info;
    rlx_status ds = be->device_open(0, NULL, &dev, &err);
    if (ds == RLX_OK)
        ds = be->device_query(dev, &info, &err);
    be->device_close(dev);
    dev = NULL;
    /* restore before asserting: a failure must not leave the rest pinned */
    assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
    assert_int_equal(b.affinity_cpus, 1);
    assert_int_equal(b.affinity_cores, 1);
    assert_int_equal(b.usable_cores, 1);
    assert_int_equal(usable_one, 1);
    assert_int_equal(ps, RLX_OK);
    assert_int_equal(pool_size, 1);
    assert_int_equal(ds, RLX_OK);
    assert_int_equal(info.n_threads, 1);

    /* the mask back: the count follows it (read on each call) */
    rlx_cpu_budget_get(&b);
    assert_int_equal(b.affinity_cpus, n);
    rlx_error_free(err);
}

static void thread_count_above_the_cores_is_capped(void **state)
{
    (void)state;
    const rlx_backend_i *be = rlx_backend_find("cpu");
    int usable = rlx_cpu_usable_cores();
    rlx_device *dev = NULL;
    rlx_error *err = NULL;
    rlx_device_info info;
    rlx_device_opts opts = {.n_threads = 1000};
    assert_int_equal(be->device_open(0, &opts, &dev, &err), RLX_OK);
    assert_int_equal(be->device_query(dev, &info, &err), RLX_OK);
    assert_int_equal(info.n_threads, usable);
    be->device_close(dev);
    /* a count within the cores is taken as asked */
    opts.n_threads = 1;
    assert_int_equal(be->device_open(0, &opts, &dev, &err), RLX_OK);
    assert_int_equal(be->device_query(dev, &info, &err), RLX_OK);
    assert_int_equal(info.n_threads, 1);
    assert_non_null(strstr(info.name, "(1 thread)"));
    be->device_close(dev);
    /* the default is the usable count */
    assert_int_equal(be->device_info(0, &info, &err), RLX_OK);
    assert_int_equal(info.n_threads, usable);
}

/* ---------------------------------------------------------------- pool */

/* A competitor that keeps its CPU busy until told to stop. */
static atomic_bool g_stop;

static void *busy(void *arg)
{
    (void)arg;
    volatile uint64_t x = 0;
    while (!atomic_load_explicit(&g_stop, memory_order_relaxed))
        x = x * 6364136223846793005ull + 1;
    return NULL;
}

/* one job: which job it is and how often each of its tasks ran */
typedef struct {
    int id;
    atomic_int *hits;
    atomic_int *current; /* the job the caller is in */
} job_ctx;

static atomic_int g_wrong; /* tasks run while the caller was in another job */

static void job_task(void *vc, int64_t t, int thread)
{
    job_ctx *c = vc;
    if (atomic_load(c->current) != c->id)
        atomic_fetch_add(&g_wrong, 1);
    /* a little work, so tasks overlap and workers get preempted in them */
    volatile double x = 1.0;
    for (int i = 0; i < (int)(t % 7) * 50; i++)
        x = x * 1.000001 + 1e-9;
    atomic_fetch_add(&c->hits[t], 1);
    (void)thread;
}

/* Four pool threads and two busy competitors share one CPU, so the OS
 * deschedules workers at any point: before they see a job, while they take
 * a task, inside one. Every task of every job must run exactly once, within
 * its own job (a worker that wakes late must not run an old job's task or
 * take a new job's with the old one's function), and every call must
 * return. */
static void pool_is_exact_under_a_busy_competitor(void **state)
{
    (void)state;
    cpu_set_t all;
    mask_cpus(&all);
    int first = 0;
    while (!CPU_ISSET(first, &all))
        first++;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    /* threads inherit the mask: the pool's workers and the competitors */
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    atomic_store(&g_stop, false);
    pthread_t comp[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&comp[i], NULL, busy, NULL), 0);
    rlx_threadpool *pool = NULL;
    rlx_status s = rlx_threadpool_create(4, &pool);

    enum { N = 40, JOBS = 3000 };
    static atomic_int hits[N];
    /* a context per job, so a task run with an old job's context is seen */
    static job_ctx ctxs[JOBS + 1];
    static atomic_int current;
    atomic_store(&current, 0);
    atomic_store(&g_wrong, 0);
    int bad_hits = 0;
    for (int j = 1; s == RLX_OK && j <= JOBS; j++) {
        int n = 2 + j % (N - 1);
        for (int i = 0; i < N; i++)
            atomic_store(&hits[i], 0);
        ctxs[j] = (job_ctx){.id = j, .hits = hits, .current = &current};
        atomic_store(&current, j);
        rlx_parallel_for(pool, n, job_task, &ctxs[j]);
        atomic_store(&current, -j); /* between jobs: no task may run now */
        for (int i = 0; i < n; i++)
            bad_hits += atomic_load(&hits[i]) != 1;
        for (int i = n; i < N; i++)
            bad_hits += atomic_load(&hits[i]) != 0;
    }
    rlx_threadpool_stats st;
    rlx_threadpool_get_stats(pool, &st);
    rlx_threadpool_free(pool);
    atomic_store(&g_stop, true);
    for (int i = 0; i < 2; i++)
        pthread_join(comp[i], NULL);
    assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
    assert_int_equal(s, RLX_OK);
    assert_int_equal(bad_hits, 0);
    assert_int_equal(atomic_load(&g_wrong), 0);
    /* every job counted once: on the threads, or on the caller alone */
    assert_int_equal(st.jobs + st.jobs_alone, JOBS);
}

/* More tasks than a range word holds (65535) are dealt out in units. */
static void pool_runs_a_huge_job_once(void **state)
{
    (void)state;
    rlx_threadpool *pool = NULL;
    assert_int_equal(rlx_threadpool_create(3, &pool), RLX_OK);
    enum { N = 200003 };
    atomic_int *hits = calloc(N, sizeof *hits);
    assert_non_null(hits);
    static atomic_int current;
    atomic_store(&current, 1);
    atomic_store(&g_wrong, 0);
    job_ctx c = {.id = 1, .hits = hits, .current = &current};
    rlx_parallel_for(pool, N, job_task, &c);
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += atomic_load(&hits[i]) != 1;
    free(hits);
    rlx_threadpool_free(pool);
    assert_int_equal(bad, 0);
    assert_int_equal(atomic_load(&g_wrong), 0);
}

/* ---------------------------------------------------------------- models */

/* stories260K's decode step is a few microseconds of work per instruction:
 * it runs on one thread whatever the device has; its 64-token prompt is
 * not, and takes the device's threads. */
static void small_model_decodes_on_one_thread(void **state)
{
    (void)state;
    const char *path = rlx_test_data("llm/stories260K.gguf");
    int usable = rlx_cpu_usable_cores();
    rlx_llm_params p = rlx_llm_default_params();
    p.n_ctx = 128;
    p.n_batch = 64;
    rlx_llm *m = NULL;
    rlx_error *err = NULL;
    if (rlx_llm_load(path, &p, &m, &err) != RLX_OK)
        fail_msg("load: %s", rlx_error_message(err));
    int dec = -1, bat = -1;
    rlx_llm_threads(m, &dec, &bat);
    assert_int_equal(dec, 0); /* nothing run yet */
    assert_int_equal(bat, 0);
    rlx_token toks[64];
    for (int i = 0; i < 64; i++)
        toks[i] = (rlx_token)(1 + i * 7 % 500);
    float *logits = malloc((size_t)rlx_llm_get_config(m)->n_vocab * sizeof *logits);
    assert_non_null(logits);
    assert_int_equal(rlx_llm_eval(m, toks, 64, logits, &err), RLX_OK);
    assert_int_equal(rlx_llm_eval(m, toks, 1, logits, &err), RLX_OK);
    rlx_llm_threads(m, &dec, &bat);
    assert_int_equal(dec, 1);
    assert_int_equal(bat, usable);
    free(logits);
    rlx_llm_free(m);
}

/* The app's UI thread: one core fewer by default where two threads stay,
 * both cores of a two-core machine, and an explicit count as asked. */
static void busy_threads_leave_a_core(void **state)
{
    (void)state;
    const char *path = rlx_test_data("llm/stories260K.gguf");
    int usable = rlx_cpu_usable_cores();
    int want = usable <= 2 ? usable : usable - 1;
    for (int asked = 0; asked <= 1; asked++) {
        rlx_llm_params p = rlx_llm_default_params();
        p.n_ctx = 32;
        p.busy_threads = 1;
        p.n_threads = asked;
        rlx_llm *m = NULL;
        rlx_error *err = NULL;
        if (rlx_llm_load(path, &p, &m, &err) != RLX_OK)
            fail_msg("load: %s", rlx_error_message(err));
        rlx_device_info di;
        assert_int_equal(rlx_session_device_info(rlx_llm_session(m), &di, &err), RLX_OK);
        assert_int_equal(di.n_threads, asked ? asked : want);
        rlx_llm_free(m);
    }
}

int main(void)
{
    /* two of the tests read stories260K: without it, the whole program skips
     * and says so (CI has the data, and fails on such a skip) */
    rlx_test_need_data("llm/stories260K.gguf", NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(quota_parsing),
        cmocka_unit_test(affinity_restricts_the_default),
        cmocka_unit_test(thread_count_above_the_cores_is_capped),
        cmocka_unit_test(pool_is_exact_under_a_busy_competitor),
        cmocka_unit_test(pool_runs_a_huge_job_once),
        cmocka_unit_test(small_model_decodes_on_one_thread),
        cmocka_unit_test(busy_threads_leave_a_core),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
