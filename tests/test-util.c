#include "test-util.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/backend.h"

const char *rlx_test_data(const char *rel)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", RLX_TEST_DATA_DIR, rel);
    return buf;
}

void rlx_test_need_data(const char *rel, ...)
{
    va_list ap;
    va_start(ap, rel);
    for (const char *r = rel; r; r = va_arg(ap, const char *)) {
        struct stat st;
        const char *path = rlx_test_data(r);
        if (stat(path, &st) == 0)
            continue;
        printf("%s %s is absent: this test reads the real files of ../shared/data beside the "
               "checkout (see its README.md), so it is skipped\n",
               RLX_TEST_DATA_MISSING, path);
        fflush(stdout);
        exit(77);
    }
    va_end(ap);
}

/* The per-process scratch folder and the process that made it: it is
 * removed with everything in it when that process exits (a forked child
 * that calls exit() leaves it alone). Tests write model files of hundreds
 * of megabytes there; left behind, two builds' runs filled CI's disk. */
static char tmp_dir[4096];
static pid_t tmp_owner;

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void remove_tmp_dir(void)
{
    if (tmp_owner == getpid() && tmp_dir[0])
        nftw(tmp_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

const char *rlx_test_tmp(const char *name)
{
    static char buf[4096];
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tmp-%ld", RLX_TEST_BUILD_DIR, (long)getpid());
    mkdir(dir, 0700);
    if (tmp_owner != getpid()) {
        snprintf(tmp_dir, sizeof tmp_dir, "%s", dir);
        if (!tmp_owner)
            atexit(remove_tmp_dir);
        tmp_owner = getpid();
    }
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
}

void *rlx_test_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc(n > 0 ? (size_t)n : 1);
    if (p && n > 0 && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    if (p)
        *size = (size_t)n;
    return p;
}

int rlx_test_write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = size ? fwrite(data, 1, size, f) : 0;
    int rc = fclose(f);
    return (w == size && rc == 0) ? 0 : -1;
}

rlx_lir_value rlx_test_val(rlx_dtype dt, int rank, const int64_t *ne, rlx_home home, int index,
                           uint64_t offset)
{
    rlx_lir_value v;
    memset(&v, 0, sizeof v);
    v.dtype = dt;
    v.shape.rank = rank;
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        v.shape.d[d] = rlx_dim_const(ne[d]);
        v.stride[d] = rlx_dim_const(s);
        s *= ne[d];
    }
    v.home = home;
    v.index = index;
    v.view_of = -1;
    v.offset = offset;
    v.max_bytes = (uint64_t)s * (dt == RLX_DTYPE_F32 ? 4 : 2);
    v.contiguous = true;
    return v;
}

rlx_lir_binding rlx_test_bind(const char *name, rlx_dtype dt, int rank, const int64_t *ne,
                              uint64_t bytes)
{
    rlx_lir_binding b;
    memset(&b, 0, sizeof b);
    b.name = name;
    b.dtype = dt;
    b.shape.rank = rank;
    for (int d = 0; d < rank; d++)
        b.shape.d[d] = rlx_dim_const(ne[d]);
    b.max_bytes = bytes;
    return b;
}

void rlx_test_make_acc(rlx_test_acc_prog *a, const char *state_name)
{
    memset(a, 0, sizeof *a);
    int64_t n[1] = {4};
    a->v[0] = rlx_test_val(RLX_DTYPE_F32, 1, n, RLX_HOME_STATE, 0, 0);
    a->v[1] = rlx_test_val(RLX_DTYPE_F32, 1, n, RLX_HOME_INPUT, 0, 0);
    a->v[2] = rlx_test_val(RLX_DTYPE_F32, 1, n, RLX_HOME_STATE, 0, 0); /* acc + x, in place */
    a->v[3] = rlx_test_val(RLX_DTYPE_F32, 1, n, RLX_HOME_PARAM, 0, 0);
    a->v[4] = rlx_test_val(RLX_DTYPE_F32, 1, n, RLX_HOME_OUTPUT, 0, 0);
    a->ins[0].op = RLX_OP_ADD;
    a->ins[0].n_in = 2;
    a->ins[0].in[0] = 0;
    a->ins[0].in[1] = 1;
    a->ins[0].out = 2;
    a->ins[0].in_place = true;
    a->ins[1].op = RLX_OP_MUL;
    a->ins[1].n_in = 2;
    a->ins[1].in[0] = 2;
    a->ins[1].in[1] = 3;
    a->ins[1].out = 4;
    a->pb = rlx_test_bind("w", RLX_DTYPE_F32, 1, n, 16);
    a->sb = rlx_test_bind(state_name, RLX_DTYPE_F32, 1, n, 16);
    a->ib = rlx_test_bind("x", RLX_DTYPE_F32, 1, n, 16);
    a->ob = rlx_test_bind("y", RLX_DTYPE_F32, 1, n, 16);
    a->lir.n_values = 5;
    a->lir.values = a->v;
    a->lir.n_instrs = 2;
    a->lir.instrs = a->ins;
    a->lir.n_params = a->lir.n_states = a->lir.n_inputs = a->lir.n_outputs = 1;
    a->lir.params = &a->pb;
    a->lir.states = &a->sb;
    a->lir.inputs = &a->ib;
    a->lir.outputs = &a->ob;
}

int rlx_test_write_safetensors(const char *path, const rlx_test_st_tensor *t, int n)
{
    /* a tensor's entry: its name, up to 4 dims of 20 digits, two offsets */
    size_t cap = 64, len = 0;
    for (int i = 0; i < n; i++)
        cap += strlen(t[i].name) + 200;
    char *hdr = malloc(cap);
    FILE *f = hdr ? fopen(path, "wb") : NULL;
    if (!f) {
        free(hdr);
        return -1;
    }
    uint64_t off = 0;
    len += (size_t)snprintf(hdr + len, cap - len, "{");
    for (int i = 0; i < n; i++) {
        uint64_t count = 1;
        len += (size_t)snprintf(hdr + len, cap - len, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[",
                                i ? "," : "", t[i].name);
        for (int d = 0; d < t[i].rank; d++) {
            len += (size_t)snprintf(hdr + len, cap - len, "%s%lld", d ? "," : "",
                                    (long long)t[i].dims[d]);
            count *= (uint64_t)t[i].dims[d];
        }
        len += (size_t)snprintf(hdr + len, cap - len, "],\"data_offsets\":[%llu,%llu]}",
                                (unsigned long long)off, (unsigned long long)(off + 4 * count));
        off += 4 * count;
    }
    len += (size_t)snprintf(hdr + len, cap - len, "}");
    while (len % 8)
        hdr[len++] = ' ';
    uint64_t hl = len;
    bool ok = len < cap && fwrite(&hl, 8, 1, f) == 1 && fwrite(hdr, 1, len, f) == len;
    for (int i = 0; i < n && ok; i++) {
        size_t count = 1;
        for (int d = 0; d < t[i].rank; d++)
            count *= (size_t)t[i].dims[d];
        ok = fwrite(t[i].data, 4, count, f) == count;
    }
    free(hdr);
    return fclose(f) == 0 && ok ? 0 : -1;
}

int rlx_test_other_devices(void)
{
    int other = 0;
    for (int b = 0; b < rlx_backend_count(); b++) {
        const rlx_backend_i *be = rlx_backend_at(b);
        if (be && strcmp(be->name, "cpu") && be->device_count && be->device_count() >= 1)
            other++;
    }
    return other;
}
