/* See rlx-npy.h. The header is a Python dict literal; only the three keys
 * numpy writes are accepted, every number is bounds-checked, and the data
 * must be exactly as long as the shape says. */
#include "app/rlx-npy.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/formats/onnx.h"
#include "models/onnx/onnx-model.h"

#define FAILN(...)                            \
    do {                                      \
        snprintf(msg, msg_size, __VA_ARGS__); \
        goto fail;                            \
    } while (0)

static const struct {
    const char *descr;
    int32_t elem;
} descrs[] = {
    {"f4", RLX_ONNX_FLOAT},  {"f8", RLX_ONNX_DOUBLE}, {"f2", RLX_ONNX_FLOAT16},
    {"i8", RLX_ONNX_INT64},  {"i4", RLX_ONNX_INT32},  {"i2", RLX_ONNX_INT16},
    {"i1", RLX_ONNX_INT8},   {"u1", RLX_ONNX_UINT8},  {"b1", RLX_ONNX_BOOL},
    {"u2", RLX_ONNX_UINT16}, {"u4", RLX_ONNX_UINT32},
};

/* the value after 'key': in the header, or NULL */
static const char *find_key(const char *h, const char *key)
{
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(h, pat);
    if (!p)
        return NULL;
    p += strlen(pat);
    while (*p == ' ')
        p++;
    if (*p != ':')
        return NULL;
    p++;
    while (*p == ' ')
        p++;
    return p;
}

int rlx_npy_read(const char *path, rlx_npy *out, char *msg, size_t msg_size)
{
    memset(out, 0, sizeof *out);
    char *h = NULL;
    uint8_t *buf = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        FAILN("%s: cannot open: %s", path, strerror(errno));
    uint8_t pre[12];
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0)
        FAILN("%s: not a .npy file (no \\x93NUMPY magic)", path);
    uint32_t hl;
    if (pre[6] == 1) {
        hl = (uint32_t)pre[8] | (uint32_t)pre[9] << 8;
    } else if (pre[6] == 2 || pre[6] == 3) {
        if (fread(pre + 10, 1, 2, f) != 2)
            FAILN("%s: truncated header", path);
        hl = (uint32_t)pre[8] | (uint32_t)pre[9] << 8 | (uint32_t)pre[10] << 16 |
             (uint32_t)pre[11] << 24;
    } else
        FAILN("%s: .npy format version %d is not supported", path, pre[6]);
    if (hl > (1u << 20))
        FAILN("%s: the header claims %u bytes", path, hl);
    h = malloc(hl + 1);
    if (!h || fread(h, 1, hl, f) != hl)
        FAILN("%s: truncated header", path);
    h[hl] = '\0';
    if (strlen(h) != hl)
        FAILN("%s: the header has a NUL byte", path);
    const char *d = find_key(h, "descr");
    if (!d || (*d != '\'' && *d != '"'))
        FAILN("%s: the header has no 'descr'", path);
    char q = *d++;
    char descr[16];
    size_t dl = 0;
    while (*d && *d != q && dl + 1 < sizeof descr)
        descr[dl++] = *d++;
    descr[dl] = '\0';
    if (*d != q || dl < 2)
        FAILN("%s: a bad 'descr'", path);
    const char *code = descr;
    if (*code == '<' || *code == '|' || *code == '=')
        code++;
    else if (*code == '>')
        FAILN("%s: big-endian data (%s) is not supported; save it little-endian", path, descr);
    out->elem_type = 0;
    for (size_t i = 0; i < sizeof descrs / sizeof descrs[0]; i++)
        if (!strcmp(code, descrs[i].descr))
            out->elem_type = descrs[i].elem;
    if (!out->elem_type)
        FAILN("%s: element type '%s' is not supported", path, descr);
    const char *fo = find_key(h, "fortran_order");
    if (!fo || strncmp(fo, "False", 5) != 0)
        FAILN("%s: only C-order arrays are supported (fortran_order must be False)", path);
    const char *sh = find_key(h, "shape");
    if (!sh || *sh != '(')
        FAILN("%s: the header has no 'shape'", path);
    sh++;
    out->numel = 1;
    for (;;) {
        while (*sh == ' ' || *sh == ',')
            sh++;
        if (*sh == ')')
            break;
        if (*sh < '0' || *sh > '9')
            FAILN("%s: a bad 'shape'", path);
        if (out->rank == RLX_NPY_MAX_DIMS)
            FAILN("%s: more than %d dims", path, RLX_NPY_MAX_DIMS);
        int64_t v = 0;
        while (*sh >= '0' && *sh <= '9') {
            if (v > (INT64_MAX - 9) / 10)
                FAILN("%s: a dim is too large", path);
            v = v * 10 + (*sh++ - '0');
        }
        if (*sh == 'L')
            sh++;
        if (v && out->numel > INT64_MAX / 16 / v)
            FAILN("%s: more elements than can exist", path);
        out->dims[out->rank++] = v;
        out->numel *= v;
    }
    size_t es = rlx_onnx_elem_size(out->elem_type);
    long start = ftell(f);
    if (start < 0 || fseek(f, 0, SEEK_END) != 0)
        FAILN("%s: cannot seek", path);
    long end = ftell(f);
    if (end < start || (uint64_t)(end - start) != (uint64_t)out->numel * es)
        FAILN("%s: the shape needs %llu bytes of data, the file has %ld", path,
              (unsigned long long)((uint64_t)out->numel * es), end - start);
    if (fseek(f, start, SEEK_SET) != 0)
        FAILN("%s: cannot seek", path);
    out->n_bytes = (size_t)out->numel * es;
    buf = malloc(out->n_bytes ? out->n_bytes : 1);
    if (!buf || fread(buf, 1, out->n_bytes, f) != out->n_bytes)
        FAILN("%s: cannot read its data", path);
    out->data = buf;
    fclose(f);
    free(h);
    return 0;
fail:
    if (f)
        fclose(f);
    free(h);
    free(buf);
    memset(out, 0, sizeof *out);
    return 1;
}

int rlx_npy_write(const char *path, int32_t elem_type, int rank, const int64_t *dims,
                  const void *data, char *msg, size_t msg_size)
{
    const char *descr = NULL;
    for (size_t i = 0; i < sizeof descrs / sizeof descrs[0]; i++)
        if (descrs[i].elem == elem_type)
            descr = descrs[i].descr;
    if (!descr) {
        snprintf(msg, msg_size, "%s: cannot write %s arrays", path,
                 rlx_onnx_elem_type_name(elem_type));
        return 1;
    }
    char shape[256] = "";
    size_t sl = 0;
    int64_t numel = 1;
    for (int i = 0; i < rank && sl < sizeof shape; i++) {
        sl += (size_t)snprintf(shape + sl, sizeof shape - sl, "%lld,%s", (long long)dims[i],
                               i + 1 < rank ? " " : "");
        numel *= dims[i];
    }
    if (rank > 1 && sl > 0)
        shape[--sl] = '\0'; /* (2, 3) not (2, 3,) */
    char h[512];
    int n = snprintf(h, sizeof h, "{'descr': '%c%s', 'fortran_order': False, 'shape': (%s), }",
                     rlx_onnx_elem_size(elem_type) == 1 ? '|' : '<', descr, shape);
    /* pad with spaces and a newline so that the data starts 64-aligned */
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f) {
        snprintf(msg, msg_size, "%s: cannot create: %s", path, strerror(errno));
        return 1;
    }
    uint16_t hl = (uint16_t)((size_t)n + pad + 1);
    uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)hl, (uint8_t)(hl >> 8)};
    bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(h, 1, (size_t)n, f) == (size_t)n;
    for (size_t i = 0; ok && i < pad; i++)
        ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF;
    size_t bytes = (size_t)numel * rlx_onnx_elem_size(elem_type);
    ok = ok && fwrite(data, 1, bytes, f) == bytes;
    ok = (fclose(f) == 0) && ok;
    if (!ok) {
        snprintf(msg, msg_size, "%s: write failed", path);
        return 1;
    }
    return 0;
}

void rlx_npy_free(rlx_npy *n)
{
    if (n) {
        free(n->data);
        n->data = NULL;
    }
}
