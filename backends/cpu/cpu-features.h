/* What the host CPU can run, detected once with CPUID/XGETBV.
 *
 * Usage:
 *     const rlx_cpu_features *f = rlx_cpu_features_get();
 *     if (f->avx512_vnni) ...
 *     printf("%s, %d cores\n", f->model_name, f->physical_cores);
 *
 * A flag is set only when the instruction set is present AND the OS saves the
 * matching register state (XCR0), so a set flag means "safe to execute".
 * Thread safety: rlx_cpu_features_get() is safe from any thread (pthread_once);
 * the returned struct is immutable and lives for the process.
 */
#ifndef RLX_BACKENDS_CPU_CPU_FEATURES_H
#define RLX_BACKENDS_CPU_CPU_FEATURES_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rlx_cpu_features {
    bool sse42, avx, avx2, fma, f16c;
    bool avx512f, avx512bw, avx512dq, avx512vl, avx512vnni, avx512vbmi;
    bool os_avx;        /* XCR0 has XMM|YMM state */
    bool os_avx512;     /* XCR0 has opmask|ZMM_Hi256|Hi16_ZMM state */
    int physical_cores; /* >= 1 */
    int logical_cpus;   /* >= 1 */
    char vendor[16];
    char model_name[80];
} rlx_cpu_features;

const rlx_cpu_features *rlx_cpu_features_get(void);

/* How much of the machine this process may use, read anew on each call (the
 * affinity mask and the cgroup quota can change while it runs). */
typedef struct rlx_cpu_budget {
    int online_cpus;    /* logical CPUs online */
    int affinity_cpus;  /* logical CPUs of the process's affinity mask */
    int affinity_cores; /* physical cores (package, core) those CPUs belong to */
    double quota_cpus;  /* cgroup CPU quota (v2 cpu.max, v1 cfs quota) in CPUs; 0: none */
    int usable_cores;   /* rlx_cpu_budget_cores(affinity_cores, quota_cpus) */
} rlx_cpu_budget;

void rlx_cpu_budget_get(rlx_cpu_budget *out);
/* The default CPU thread count: physical cores of the affinity mask, at
 * most the quota rounded to the nearest whole CPU, at least 1. SMT siblings
 * share the vector units the kernels saturate, and threads beyond the quota
 * only get throttled. */
int rlx_cpu_usable_cores(void);
/* The policy: min(affinity_cores, quota_cpus rounded), >= 1 (quota 0: none). */
int rlx_cpu_budget_cores(int affinity_cores, double quota_cpus);
/* CPUs a cgroup v2 cpu.max line allows ("150000 100000" -> 1.5); 0 for
 * "max ..." (no limit); -1 when the text is not a cpu.max line. */
double rlx_cpu_quota_parse_cpu_max(const char *text);
/* CPUs of a cgroup v1 cfs quota and period in microseconds; 0 for no limit
 * (quota -1); -1 when they make no sense. */
double rlx_cpu_quota_from_cfs(long long quota_us, long long period_us);
/* "AVX2 FMA F16C AVX512F ..." into buf; returns buf. */
char *rlx_cpu_features_string(const rlx_cpu_features *f, char *buf, int size);

#ifdef __cplusplus
}
#endif
#endif
