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
/* "AVX2 FMA F16C AVX512F ..." into buf; returns buf. */
char *rlx_cpu_features_string(const rlx_cpu_features *f, char *buf, int size);

#ifdef __cplusplus
}
#endif
#endif
