/* CPUID/XGETBV probing. Physical cores come from sysfs topology (unique
 * (package, core) pairs among online CPUs), falling back to the logical count. */
#include "backends/cpu/cpu-features.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define RLX_X86 1
#else
#define RLX_X86 0
#endif

static rlx_cpu_features g_features;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

#if RLX_X86
static uint64_t read_xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static void detect_x86(rlx_cpu_features *f)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d))
        return;
    unsigned max_leaf = a;
    memcpy(f->vendor + 0, &b, 4);
    memcpy(f->vendor + 4, &d, 4);
    memcpy(f->vendor + 8, &c, 4);
    f->vendor[12] = 0;

    __cpuid(1, a, b, c, d);
    bool osxsave = (c >> 27) & 1;
    f->sse42 = (c >> 20) & 1;
    bool avx = (c >> 28) & 1;
    bool fma = (c >> 12) & 1;
    bool f16c = (c >> 29) & 1;
    uint64_t xcr0 = osxsave ? read_xcr0() : 0;
    f->os_avx = (xcr0 & 0x6) == 0x6;
    f->os_avx512 = f->os_avx && (xcr0 & 0xe0) == 0xe0;
    f->avx = avx && f->os_avx;
    f->fma = fma && f->os_avx;
    f->f16c = f16c && f->os_avx;
    if (max_leaf >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        f->avx2 = ((b >> 5) & 1) && f->os_avx;
        bool z = f->os_avx512;
        f->avx512f = ((b >> 16) & 1) && z;
        f->avx512dq = ((b >> 17) & 1) && z;
        f->avx512bw = ((b >> 30) & 1) && z;
        f->avx512vl = ((b >> 31) & 1) && z;
        f->avx512vbmi = ((c >> 1) & 1) && z;
        f->avx512vnni = ((c >> 11) & 1) && z;
    }
    __cpuid(0x80000000, a, b, c, d);
    if (a >= 0x80000004) {
        unsigned regs[12];
        for (unsigned i = 0; i < 3; i++)
            __cpuid(0x80000002 + i, regs[i * 4], regs[i * 4 + 1], regs[i * 4 + 2], regs[i * 4 + 3]);
        char brand[49];
        memcpy(brand, regs, 48);
        brand[48] = 0;
        const char *s = brand;
        while (*s == ' ')
            s++;
        snprintf(f->model_name, sizeof f->model_name, "%s", s);
    }
}
#endif

static void model_from_proc(rlx_cpu_features *f)
{
    FILE *fp = fopen("/proc/cpuinfo", "r");
    if (!fp)
        return;
    char line[512];
    while (fgets(line, sizeof line, fp)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *colon = strchr(line, ':');
            if (colon) {
                colon++;
                while (*colon == ' ' || *colon == '\t')
                    colon++;
                colon[strcspn(colon, "\n")] = 0;
                snprintf(f->model_name, sizeof f->model_name, "%s", colon);
            }
            break;
        }
    }
    fclose(fp);
}

static int read_int_file(const char *path, int *out)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        return -1;
    int ok = fscanf(fp, "%d", out) == 1 ? 0 : -1;
    fclose(fp);
    return ok;
}

static int count_physical_cores(int logical)
{
    /* unique (package, core) pairs; 4096 CPUs is plenty for a desktop app */
    enum { MAXC = 4096 };
    static int seen_pkg[MAXC], seen_core[MAXC];
    int n_seen = 0;
    for (int cpu = 0; cpu < MAXC; cpu++) {
        char path[128];
        int pkg, core;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
        if (read_int_file(path, &core) != 0) {
            if (cpu >= logical)
                break;
            continue;
        }
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id",
                 cpu);
        if (read_int_file(path, &pkg) != 0)
            pkg = 0;
        int dup = 0;
        for (int i = 0; i < n_seen; i++)
            if (seen_pkg[i] == pkg && seen_core[i] == core) {
                dup = 1;
                break;
            }
        if (!dup && n_seen < MAXC) {
            seen_pkg[n_seen] = pkg;
            seen_core[n_seen] = core;
            n_seen++;
        }
    }
    if (n_seen < 1 || n_seen > logical)
        return logical;
    return n_seen;
}

/* CPUID's brand string is padded to 48 bytes (leading spaces on some Intel
 * parts, runs of spaces inside on others) and /proc/cpuinfo copies it: one
 * space between words, none around, is what a person reads in a menu. */
static void tidy_name(char *s)
{
    char *w = s;
    bool space = false;
    for (const char *r = s; *r; r++) {
        if (*r == ' ' || *r == '\t') {
            space = w != s;
            continue;
        }
        if (space)
            *w++ = ' ';
        space = false;
        *w++ = *r;
    }
    *w = 0;
}

static void detect(void)
{
    rlx_cpu_features *f = &g_features;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    f->logical_cpus = n > 0 ? (int)n : 1;
#if RLX_X86
    detect_x86(f);
#endif
    if (!f->model_name[0])
        model_from_proc(f);
    tidy_name(f->model_name);
    if (!f->model_name[0])
        snprintf(f->model_name, sizeof f->model_name, "unknown CPU");
    f->physical_cores = count_physical_cores(f->logical_cpus);
}

const rlx_cpu_features *rlx_cpu_features_get(void)
{
    pthread_once(&g_once, detect);
    return &g_features;
}

char *rlx_cpu_features_string(const rlx_cpu_features *f, char *buf, int size)
{
    if (!buf || size <= 0)
        return buf;
    buf[0] = 0;
    struct {
        bool on;
        const char *name;
    } list[] = {
        {f->sse42, "SSE4.2"},
        {f->avx, "AVX"},
        {f->avx2, "AVX2"},
        {f->fma, "FMA"},
        {f->f16c, "F16C"},
        {f->avx512f, "AVX512F"},
        {f->avx512bw, "AVX512BW"},
        {f->avx512dq, "AVX512DQ"},
        {f->avx512vl, "AVX512VL"},
        {f->avx512vnni, "AVX512VNNI"},
        {f->avx512vbmi, "AVX512VBMI"},
    };
    int len = 0;
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
        if (!list[i].on)
            continue;
        int w = snprintf(buf + len, (size_t)(size - len), "%s%s", len ? " " : "", list[i].name);
        if (w < 0 || w >= size - len)
            break;
        len += w;
    }
    return buf;
}
