/* CPUID/XGETBV probing. Physical cores come from sysfs topology (unique
 * (package, core) pairs among online CPUs), falling back to the logical count. */
#include "backends/cpu/cpu-features.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

/* ---- the cores this process may use ------------------------------------ */

/* (package, core) of each CPU as one key, -1 where sysfs does not say:
 * read once, the topology does not change while the process runs (CPUs
 * going offline leave the affinity mask, which is read on each call). */
enum { TOPO_MAX = 4096 };
static long g_core_key[TOPO_MAX];
static pthread_once_t g_topo_once = PTHREAD_ONCE_INIT;

static void read_topology(void)
{
    for (int cpu = 0; cpu < TOPO_MAX; cpu++) {
        char path[128];
        int pkg = 0, core;
        g_core_key[cpu] = -1;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
        if (read_int_file(path, &core) != 0 || core < 0)
            continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id",
                 cpu);
        if (read_int_file(path, &pkg) != 0 || pkg < 0)
            pkg = 0;
        g_core_key[cpu] = (long)pkg << 24 | core;
    }
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

/* logical CPUs and physical cores of the affinity mask; 0 when unreadable */
static void affinity_counts(int *cpus, int *cores)
{
    *cpus = *cores = 0;
    pthread_once(&g_topo_once, read_topology);
    for (int n = 1024; n <= 65536; n *= 4) {
        cpu_set_t *set = CPU_ALLOC((size_t)n);
        if (!set)
            return;
        size_t sz = CPU_ALLOC_SIZE((size_t)n);
        CPU_ZERO_S(sz, set);
        if (sched_getaffinity(0, sz, set) != 0) {
            CPU_FREE(set);
            continue; /* EINVAL: the kernel's mask is larger */
        }
        int count = CPU_COUNT_S(sz, set);
        long *keys = malloc((size_t)(count > 0 ? count : 1) * sizeof *keys);
        if (!keys) {
            CPU_FREE(set);
            return;
        }
        int k = 0;
        for (int cpu = 0; cpu < n && k < count; cpu++) {
            if (!CPU_ISSET_S((size_t)cpu, sz, set))
                continue;
            long key = cpu < TOPO_MAX ? g_core_key[cpu] : -1;
            /* unknown topology: the CPU is a core of its own */
            keys[k++] = key >= 0 ? key : -(long)cpu - 2;
        }
        qsort(keys, (size_t)k, sizeof *keys, cmp_long);
        int uniq = 0;
        for (int i = 0; i < k; i++)
            if (i == 0 || keys[i] != keys[i - 1])
                uniq++;
        free(keys);
        CPU_FREE(set);
        *cpus = count;
        *cores = uniq;
        return;
    }
}

double rlx_cpu_quota_parse_cpu_max(const char *text)
{
    if (!text)
        return -1;
    char q[32];
    long long period = 0;
    int n = sscanf(text, "%31s %lld", q, &period);
    if (n < 1)
        return -1;
    if (!strcmp(q, "max"))
        return 0;
    char *end;
    long long quota = strtoll(q, &end, 10);
    if (*end || n < 2)
        return -1;
    return rlx_cpu_quota_from_cfs(quota, period);
}

double rlx_cpu_quota_from_cfs(long long quota_us, long long period_us)
{
    if (quota_us == -1)
        return 0;
    if (quota_us <= 0 || period_us <= 0)
        return -1;
    return (double)quota_us / (double)period_us;
}

int rlx_cpu_budget_cores(int affinity_cores, double quota_cpus)
{
    int n = affinity_cores > 0 ? affinity_cores : 1;
    if (quota_cpus > 0) {
        double q = floor(quota_cpus + 0.5);
        if (q < 1)
            q = 1;
        if (q < n)
            n = (int)q;
    }
    return n;
}

/* The mount point and mount root of the cgroup hierarchy that has the CPU
 * controller (v2: the unified one; v1: the one whose options name "cpu"). */
static bool cgroup_mount(bool v2, char *point, size_t point_cap, char *root, size_t root_cap)
{
    FILE *f = fopen("/proc/self/mountinfo", "r");
    if (!f)
        return false;
    char line[1024];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        /* id parent major:minor root point options ... - fstype source superopts */
        char r[512], pt[512];
        if (sscanf(line, "%*s %*s %*s %511s %511s", r, pt) != 2)
            continue;
        const char *dash = strstr(line, " - ");
        if (!dash)
            continue;
        char fstype[32], src[256], opts[512] = "";
        if (sscanf(dash + 3, "%31s %255s %511s", fstype, src, opts) < 2)
            continue;
        if (v2) {
            if (strcmp(fstype, "cgroup2") != 0)
                continue;
        } else {
            if (strcmp(fstype, "cgroup") != 0)
                continue;
            bool cpu = false;
            for (char *tok = strtok(opts, ","); tok && !cpu; tok = strtok(NULL, ","))
                cpu = !strcmp(tok, "cpu");
            if (!cpu)
                continue;
        }
        snprintf(point, point_cap, "%s", pt);
        snprintf(root, root_cap, "%s", r);
        found = true;
    }
    fclose(f);
    return found;
}

/* The process's cgroup path in the v2 hierarchy or in the v1 one with the
 * CPU controller, from /proc/self/cgroup. */
static bool cgroup_path(bool v2, char *out, size_t cap)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return false;
    char line[1024];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = 0;
        const char *ctl = c1 + 1;
        if (v2) {
            found = !strncmp(line, "0:", 2) && ctl[0] == 0;
        } else {
            char tmp[256];
            snprintf(tmp, sizeof tmp, "%s", ctl);
            for (char *tok = strtok(tmp, ","); tok && !found; tok = strtok(NULL, ","))
                found = !strcmp(tok, "cpu");
        }
        if (found)
            snprintf(out, cap, "%s", c2 + 1);
    }
    fclose(f);
    return found;
}

/* The smallest quota on the way from the process's cgroup up to the
 * hierarchy's root (a parent's limit binds its children too); 0: none. */
static double cgroup_quota(bool v2)
{
    char point[512], root[512], path[1024];
    if (!cgroup_mount(v2, point, sizeof point, root, sizeof root) ||
        !cgroup_path(v2, path, sizeof path))
        return 0;
    /* inside a cgroup namespace or a container the mount's root is the
     * process's own cgroup or one above it: strip it */
    size_t rl = strlen(root);
    const char *rel = path;
    if (strcmp(root, "/") != 0 && !strncmp(path, root, rl) && (path[rl] == '/' || !path[rl]))
        rel = path + rl;
    else if (strcmp(root, "/") != 0)
        rel = "";
    char dir[2048];
    snprintf(dir, sizeof dir, "%s%s", point, rel);
    double best = 0;
    for (;;) {
        char file[2100], text[128];
        double q = -1;
        if (v2) {
            snprintf(file, sizeof file, "%s/cpu.max", dir);
            FILE *f = fopen(file, "r");
            if (f) {
                if (fgets(text, sizeof text, f))
                    q = rlx_cpu_quota_parse_cpu_max(text);
                fclose(f);
            }
        } else {
            long long quota = 0, period = 0;
            FILE *f;
            snprintf(file, sizeof file, "%s/cpu.cfs_quota_us", dir);
            if ((f = fopen(file, "r"))) {
                if (fscanf(f, "%lld", &quota) != 1)
                    quota = 0;
                fclose(f);
            }
            snprintf(file, sizeof file, "%s/cpu.cfs_period_us", dir);
            if ((f = fopen(file, "r"))) {
                if (fscanf(f, "%lld", &period) != 1)
                    period = 0;
                fclose(f);
            }
            q = rlx_cpu_quota_from_cfs(quota, period);
        }
        if (q > 0 && (best == 0 || q < best))
            best = q;
        if (strlen(dir) <= strlen(point))
            break;
        char *slash = strrchr(dir, '/');
        if (!slash || slash < dir + strlen(point))
            break;
        *slash = 0;
    }
    return best;
}

void rlx_cpu_budget_get(rlx_cpu_budget *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    const rlx_cpu_features *f = rlx_cpu_features_get();
    out->online_cpus = f->logical_cpus;
    affinity_counts(&out->affinity_cpus, &out->affinity_cores);
    if (out->affinity_cores < 1) { /* no mask: the machine's cores */
        out->affinity_cpus = f->logical_cpus;
        out->affinity_cores = f->physical_cores;
    }
    double q2 = cgroup_quota(true), q1 = cgroup_quota(false);
    out->quota_cpus = q2 > 0 && (q1 <= 0 || q2 < q1) ? q2 : q1;
    out->usable_cores = rlx_cpu_budget_cores(out->affinity_cores, out->quota_cpus);
}

int rlx_cpu_usable_cores(void)
{
    rlx_cpu_budget b;
    rlx_cpu_budget_get(&b);
    return b.usable_cores;
}
