/* The CLI's words on CPU threads (rlx-threads.h). */
#include "app/rlx-threads.h"

#include <stdio.h>
#include <string.h>

#include "backends/cpu/cpu-features.h"
#include "engine/runtime/session.h"

/* The CPU session of m (its own, or a split's CPU part), else NULL. */
static rlx_session *cpu_session(rlx_llm *m)
{
    rlx_session *s = rlx_llm_session(m);
    if (s && !strcmp(rlx_session_backend(s)->name, "cpu"))
        return s;
    return rlx_llm_cpu_session(m);
}

void rlx_cli_thread_note(const char *cmd, rlx_llm *m, int asked, bool verbose)
{
    rlx_session *s = m ? cpu_session(m) : NULL;
    rlx_device_info di;
    if (!s || rlx_session_device_info(s, &di, NULL) != RLX_OK)
        return;
    rlx_cpu_budget b;
    rlx_cpu_budget_get(&b);
    if (asked > di.n_threads)
        fprintf(stderr,
                "rlx: %s: -t %d is more than the %d core%s this process may use; using %d\n", cmd,
                asked, b.usable_cores, b.usable_cores == 1 ? "" : "s", di.n_threads);
    if (!verbose)
        return;
    char quota[48] = "no cgroup CPU quota";
    if (b.quota_cpus > 0)
        snprintf(quota, sizeof quota, "cgroup CPU quota %.2f", b.quota_cpus);
    fprintf(
        stderr, "cpu: %d thread%s (%s); usable cores %d: affinity %d of %d CPUs on %d core%s, %s\n",
        di.n_threads, di.n_threads == 1 ? "" : "s", asked > 0 ? "-t" : "default", b.usable_cores,
        b.affinity_cpus, b.online_cpus, b.affinity_cores, b.affinity_cores == 1 ? "" : "s", quota);
}

const char *rlx_cli_thread_label(int used, int device, char *buf, size_t cap)
{
    if (used > 0 && used < device)
        snprintf(buf, cap, "%d (of %d: small model)", used, device);
    else
        snprintf(buf, cap, "%d", used > 0 ? used : device);
    return buf;
}

void rlx_cli_thread_use(const rlx_llm *m)
{
    rlx_session *s = m ? cpu_session((rlx_llm *)m) : NULL;
    rlx_device_info di;
    if (!s || rlx_session_device_info(s, &di, NULL) != RLX_OK)
        return;
    int dec = 0, bat = 0;
    rlx_llm_threads(m, &dec, &bat);
    if (!dec && !bat)
        return;
    char a[48], d[48];
    fprintf(stderr, "cpu threads: prompt %s, decode %s",
            bat ? rlx_cli_thread_label(bat, di.n_threads, a, sizeof a) : "-",
            dec ? rlx_cli_thread_label(dec, di.n_threads, d, sizeof d) : "-");
    if ((dec && dec < di.n_threads) || (bat && bat < di.n_threads))
        fprintf(stderr, " (a run whose work per op is below what waking the thread pool costs "
                        "takes one thread)");
    fputc('\n', stderr);
}
