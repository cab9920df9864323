/* torch.save's zip checkpoint format, written for tests (see torch-writer.h). */
#include "torch-writer.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#define ALIGN 64 /* torch's writer starts every entry's data at a multiple of this */

typedef struct {
    char *name;
    uint32_t crc, size, offset;
} tw_entry;

struct rlx_torch_writer {
    FILE *f;
    char *path, *prefix;
    uint64_t pos; /* bytes written so far */
    tw_entry *e;
    size_t n_e, cap_e;
    uint8_t *pkl;
    size_t n_pkl, cap_pkl;
    bool pkl_oom, failed;
    unsigned n_tensors;
};

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* ---- the pickle ---------------------------------------------------------- */

static void p_bytes(rlx_torch_writer *w, const void *p, size_t n)
{
    if (w->pkl_oom)
        return;
    if (w->cap_pkl - w->n_pkl < n) {
        size_t cap = w->cap_pkl ? w->cap_pkl : 4096;
        while (cap - w->n_pkl < n)
            cap *= 2;
        uint8_t *q = realloc(w->pkl, cap);
        if (!q) {
            w->pkl_oom = true;
            return;
        }
        w->pkl = q;
        w->cap_pkl = cap;
    }
    memcpy(w->pkl + w->n_pkl, p, n);
    w->n_pkl += n;
}

static void p_op(rlx_torch_writer *w, uint8_t op)
{
    p_bytes(w, &op, 1);
}

static void p_le(rlx_torch_writer *w, uint64_t v, int n)
{
    uint8_t b[8];
    for (int i = 0; i < n; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    p_bytes(w, b, (size_t)n);
}

/* GLOBAL: "module\nname\n" */
static void p_global(rlx_torch_writer *w, const char *module, const char *name)
{
    p_op(w, 'c');
    p_bytes(w, module, strlen(module));
    p_op(w, '\n');
    p_bytes(w, name, strlen(name));
    p_op(w, '\n');
}

/* BINUNICODE: a 4-byte length, UTF-8 */
static void p_str(rlx_torch_writer *w, const char *s)
{
    size_t n = strlen(s);
    p_op(w, 'X');
    p_le(w, n, 4);
    p_bytes(w, s, n);
}

/* The shortest of pickle's integer opcodes, as Python's pickler picks. */
static void p_int(rlx_torch_writer *w, int64_t v)
{
    if (v >= 0 && v < 256) {
        p_op(w, 'K'); /* BININT1 */
        p_le(w, (uint64_t)v, 1);
    } else if (v >= 0 && v < 65536) {
        p_op(w, 'M'); /* BININT2 */
        p_le(w, (uint64_t)v, 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        p_op(w, 'J'); /* BININT */
        p_le(w, (uint64_t)v, 4);
    } else {
        p_op(w, 0x8a); /* LONG1: 8 bytes of two's complement always suffice */
        p_op(w, 8);
        p_le(w, (uint64_t)v, 8);
    }
}

static void p_int_tuple(rlx_torch_writer *w, const int64_t *v, int n)
{
    if (n == 0) {
        p_op(w, ')'); /* EMPTY_TUPLE */
        return;
    }
    if (n > 3)
        p_op(w, '('); /* MARK */
    for (int i = 0; i < n; i++)
        p_int(w, v[i]);
    p_op(w, n > 3 ? 't' : (uint8_t)(0x85 + n - 1)); /* TUPLE or TUPLE1..3 */
}

/* ---- the zip --------------------------------------------------------------- */

static void put_le(uint8_t *b, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

/* One STORED entry: local header (padded so the data starts at a multiple
 * of ALIGN), then the bytes. */
static rlx_status write_entry(rlx_torch_writer *w, const char *name, const void *data,
                              uint64_t size, rlx_error **err)
{
    size_t nl = strlen(name);
    if (nl > 0xffff)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "%s: the entry name '%.60s...' is too long",
                             w->path, name);
    uint64_t start = w->pos + 30 + nl + 4;
    uint64_t pad = (ALIGN - start % ALIGN) % ALIGN;
    if (w->pos + 30 + nl + 4 + pad + size + 46 + nl + 22 > 0xffffffffu)
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "%s: the checkpoint would pass 4 GiB, which needs zip64 records "
                             "this test writer does not write",
                             w->path);
    if (w->n_e == w->cap_e) {
        size_t cap = w->cap_e ? 2 * w->cap_e : 64;
        tw_entry *q = realloc(w->e, cap * sizeof *q);
        if (!q)
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        w->e = q;
        w->cap_e = cap;
    }
    tw_entry *e = &w->e[w->n_e];
    e->name = dup_str(name);
    if (!e->name)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    w->n_e++;
    uLong crc = crc32(0L, Z_NULL, 0);
    const uint8_t *p = data;
    for (uint64_t done = 0; done < size;) { /* zlib takes uInt lengths */
        uInt chunk = size - done > (1u << 30) ? (1u << 30) : (uInt)(size - done);
        crc = crc32(crc, p + done, chunk);
        done += chunk;
    }
    e->crc = (uint32_t)crc;
    e->size = (uint32_t)size;
    e->offset = (uint32_t)w->pos;

    uint8_t h[30];
    put_le(h, 0x04034b50, 4); /* local file header */
    put_le(h + 4, 20, 2);     /* version needed: 2.0 */
    put_le(h + 6, 0, 2);      /* flags: sizes and CRC here, no data descriptor */
    put_le(h + 8, 0, 2);      /* STORED */
    put_le(h + 10, 0, 2);     /* time */
    put_le(h + 12, 0x21, 2);  /* date: 1980-01-01 */
    put_le(h + 14, e->crc, 4);
    put_le(h + 18, size, 4);
    put_le(h + 22, size, 4);
    put_le(h + 26, nl, 2);
    put_le(h + 28, 4 + pad, 2);
    uint8_t x[4 + ALIGN];
    put_le(x, 0x4246, 2); /* "FB", torch's padding field, filled with 'Z' */
    put_le(x + 2, pad, 2);
    memset(x + 4, 'Z', (size_t)pad);
    fwrite(h, 1, sizeof h, w->f);
    fwrite(name, 1, nl, w->f);
    fwrite(x, 1, (size_t)(4 + pad), w->f);
    if (size)
        fwrite(data, 1, (size_t)size, w->f);
    w->pos += 30 + nl + 4 + pad + size;
    if (ferror(w->f))
        return rlx_error_set(err, RLX_ERR_IO, "cannot write %s", w->path);
    return RLX_OK;
}

static rlx_status write_directory(rlx_torch_writer *w, rlx_error **err)
{
    uint64_t cd_off = w->pos, cd_size = 0;
    for (size_t i = 0; i < w->n_e; i++) {
        const tw_entry *e = &w->e[i];
        size_t nl = strlen(e->name);
        uint8_t h[46];
        put_le(h, 0x02014b50, 4); /* central directory header */
        put_le(h + 4, 20, 2);     /* made by: 2.0 */
        put_le(h + 6, 20, 2);     /* needed: 2.0 */
        put_le(h + 8, 0, 2);
        put_le(h + 10, 0, 2);
        put_le(h + 12, 0, 2);
        put_le(h + 14, 0x21, 2);
        put_le(h + 16, e->crc, 4);
        put_le(h + 20, e->size, 4);
        put_le(h + 24, e->size, 4);
        put_le(h + 28, nl, 2);
        put_le(h + 30, 0, 2); /* extra: the padding lives in the local header only */
        put_le(h + 32, 0, 2); /* comment */
        put_le(h + 34, 0, 2); /* disk */
        put_le(h + 36, 0, 2); /* internal attributes */
        put_le(h + 38, 0, 4); /* external attributes */
        put_le(h + 42, e->offset, 4);
        fwrite(h, 1, sizeof h, w->f);
        fwrite(e->name, 1, nl, w->f);
        cd_size += 46 + nl;
    }
    if (w->n_e > 0xffff)
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "%s: %zu zip entries need zip64 records, which this test writer "
                             "does not write",
                             w->path, w->n_e);
    uint8_t end[22];
    put_le(end, 0x06054b50, 4); /* end of central directory */
    put_le(end + 4, 0, 2);
    put_le(end + 6, 0, 2);
    put_le(end + 8, w->n_e, 2);
    put_le(end + 10, w->n_e, 2);
    put_le(end + 12, cd_size, 4);
    put_le(end + 16, cd_off, 4);
    put_le(end + 20, 0, 2);
    fwrite(end, 1, sizeof end, w->f);
    w->pos += cd_size + sizeof end;
    if (ferror(w->f))
        return rlx_error_set(err, RLX_ERR_IO, "cannot write %s", w->path);
    return RLX_OK;
}

/* ---- the API ----------------------------------------------------------------- */

void rlx_torch_writer_free(rlx_torch_writer *w)
{
    if (!w)
        return;
    if (w->f)
        fclose(w->f);
    for (size_t i = 0; i < w->n_e; i++)
        free(w->e[i].name);
    free(w->e);
    free(w->pkl);
    free(w->path);
    free(w->prefix);
    free(w);
}

rlx_status rlx_torch_writer_create(const char *path, const char *prefix, rlx_torch_writer **out,
                                   rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!path || !prefix || !out || !*prefix || strchr(prefix, '/') || strlen(prefix) > 4000)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "a torch checkpoint needs a path and a folder name without '/', "
                             "under 4000 bytes");
    rlx_torch_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->path = dup_str(path)) || !(w->prefix = dup_str(prefix))) {
        rlx_torch_writer_free(w);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    }
    w->f = fopen(path, "wb");
    if (!w->f) {
        rlx_torch_writer_free(w);
        return rlx_error_set(err, RLX_ERR_IO, "cannot write %s", path);
    }
    /* protocol 2; collections.OrderedDict(), then MARK for the items */
    p_op(w, 0x80);
    p_op(w, 2);
    p_global(w, "collections", "OrderedDict");
    p_op(w, ')'); /* EMPTY_TUPLE */
    p_op(w, 'R'); /* REDUCE */
    p_op(w, '('); /* MARK */
    *out = w;
    return RLX_OK;
}

rlx_status rlx_torch_writer_add(rlx_torch_writer *w, const char *name, rlx_dtype dtype, int rank,
                                const int64_t *shape, const void *data, rlx_error **err)
{
    if (!w)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "no torch writer");
    if (w->failed)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "%s: an earlier tensor could not be written",
                             w->path);
    rlx_status st = RLX_OK;
    if (!name || !data || rank < 0 || rank > RLX_TORCH_WRITER_MAX_DIMS || (rank && !shape))
        st = rlx_error_set(err, RLX_ERR_INVALID_ARG,
                           "%s: a tensor needs a name, data and 0 to %d dims", w->path,
                           RLX_TORCH_WRITER_MAX_DIMS);
    else if (dtype != RLX_DTYPE_F32 && dtype != RLX_DTYPE_F16 && dtype != RLX_DTYPE_I64)
        st = rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                           "%s: tensor %s: the test writer writes f32, f16 and i64 only", w->path,
                           name);
    uint64_t esize = dtype == RLX_DTYPE_I64 ? 8 : dtype == RLX_DTYPE_F32 ? 4 : 2, numel = 1;
    for (int d = 0; st == RLX_OK && d < rank; d++) {
        if (shape[d] < 0 || (shape[d] && numel > (UINT32_MAX / esize) / (uint64_t)shape[d]))
            st = rlx_error_set(err, RLX_ERR_INVALID_ARG,
                               "%s: tensor %s: dim %d (%lld) is negative or too large", w->path,
                               name, d, (long long)shape[d]);
        else
            numel *= (uint64_t)shape[d];
    }
    char key[16], entry[4096 + 32];
    if (st == RLX_OK) {
        snprintf(key, sizeof key, "%u", w->n_tensors);
        if ((size_t)snprintf(entry, sizeof entry, "%s/data/%s", w->prefix, key) >= sizeof entry)
            st =
                rlx_error_set(err, RLX_ERR_INVALID_ARG, "%s: the folder name is too long", w->path);
    }
    if (st == RLX_OK)
        st = write_entry(w, entry, data, numel * esize, err);
    if (st != RLX_OK) {
        w->failed = true;
        return st;
    }
    w->n_tensors++;

    /* name, then _rebuild_tensor_v2(storage, 0, size, stride, False, OrderedDict()) */
    int64_t stride[RLX_TORCH_WRITER_MAX_DIMS];
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        stride[d] = s;
        s *= shape[d] ? shape[d] : 1; /* as torch's contiguous strides */
    }
    p_str(w, name);
    p_global(w, "torch._utils", "_rebuild_tensor_v2");
    p_op(w, '(');
    p_op(w, '('); /* the persistent id: ('storage', type, key, location, numel) */
    p_str(w, "storage");
    p_global(w, "torch",
             dtype == RLX_DTYPE_I64   ? "LongStorage"
             : dtype == RLX_DTYPE_F32 ? "FloatStorage"
                                      : "HalfStorage");
    p_str(w, key);
    p_str(w, "cpu");
    p_int(w, (int64_t)numel);
    p_op(w, 't');
    p_op(w, 'Q'); /* BINPERSID */
    p_int(w, 0);  /* storage offset */
    p_int_tuple(w, shape, rank);
    p_int_tuple(w, stride, rank);
    p_op(w, 0x89); /* NEWFALSE: requires_grad */
    p_global(w, "collections", "OrderedDict");
    p_op(w, ')');
    p_op(w, 'R'); /* backward hooks: empty */
    p_op(w, 't');
    p_op(w, 'R');
    return RLX_OK;
}

rlx_status rlx_torch_writer_finish(rlx_torch_writer *w, rlx_error **err)
{
    if (!w)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "no torch writer");
    rlx_status st = RLX_OK;
    if (w->failed)
        st = rlx_error_set(err, RLX_ERR_INVALID_ARG, "%s: an earlier tensor could not be written",
                           w->path);
    p_op(w, 'u'); /* SETITEMS */
    p_op(w, '.'); /* STOP */
    if (st == RLX_OK && w->pkl_oom)
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    char name[4096 + 32];
    static const struct {
        const char *entry, *text;
    } small[] = {{"version", "3\n"}, {"byteorder", "little"}};
    if (st == RLX_OK) {
        snprintf(name, sizeof name, "%s/data.pkl", w->prefix);
        st = write_entry(w, name, w->pkl, w->n_pkl, err);
    }
    for (size_t i = 0; st == RLX_OK && i < sizeof small / sizeof small[0]; i++) {
        snprintf(name, sizeof name, "%s/%s", w->prefix, small[i].entry);
        st = write_entry(w, name, small[i].text, strlen(small[i].text), err);
    }
    if (st == RLX_OK)
        st = write_directory(w, err);
    FILE *f = w->f;
    w->f = NULL;
    if (fclose(f) != 0 && st == RLX_OK)
        st = rlx_error_set(err, RLX_ERR_IO, "cannot write %s", w->path);
    rlx_torch_writer_free(w);
    return st;
}
