#include "test-util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *rlx_test_data(const char *rel)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", RLX_TEST_DATA_DIR, rel);
    return buf;
}

const char *rlx_test_tmp(const char *name)
{
    static char buf[4096];
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tmp-%ld", RLX_TEST_BUILD_DIR, (long)getpid());
    mkdir(dir, 0700);
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
