/* GGUF reader: maps a file (or takes a buffer) and validates every byte of
 * the header before handing anything out. The layout, all little-endian:
 *
 *   "GGUF" u32 version, u64 n_tensors, u64 n_kv
 *   n_kv times:      string key, u32 type, value
 *   n_tensors times: string name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset
 *   padding to the alignment, then the tensor data section
 *
 * where a string is u64 length + bytes and an array value is u32 element
 * type + u64 count + elements. The parser never trusts a count or length:
 * each is compared with the bytes still left before it is used, so a hostile
 * file costs at most time and memory proportional to its own size.
 */
#include "engine/formats/gguf.h"
#include "engine/formats/gguf-internal.h"
#include "engine/formats/mapfile.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Arrays of strings / arrays get a remembered offset every CKPT_STRIDE
 * elements so that rlx_gguf_array_get() never walks more than that. */
#define CKPT_STRIDE 16

/* The smallest possible encodings, used to bound claimed counts. */
#define MIN_KV_BYTES     13u /* u64 key length + u32 type + 1-byte value */
#define MIN_TENSOR_BYTES 24u /* u64 name length + u32 n_dims + u32 type + u64 offset */
#define MIN_ARRAY_BYTES  12u /* u32 element type + u64 count */
#define HEADER_BYTES     24u

typedef struct var_array {
    const uint8_t *data;
    uint64_t count;
    uint64_t ckpt_first; /* index in rlx_gguf.ckpts of element 0's offset */
} var_array;

struct rlx_gguf {
    char *path;
    const char *fname; /* basename of path, for messages */
    const uint8_t *base;
    uint64_t size;
    void *map;
    size_t map_len;

    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset;

    uint64_t n_kv;
    rlx_gguf_kv *kvs;
    uint64_t n_tensors;
    rlx_gguf_tensor *tensors;
    uint64_t cap_tensors; /* allocated entries, each name freed on close */

    /* open-addressing tables of index + 1 (0 = empty) */
    uint64_t *kv_slots;
    uint64_t kv_mask;
    uint64_t *t_slots;
    uint64_t t_mask;

    var_array *vars;
    uint64_t n_vars, cap_vars;
    uint64_t *ckpts; /* offsets relative to the array's data */
    uint64_t n_ckpts, cap_ckpts;
};

/* ---- small helpers ------------------------------------------------------ */

static const char *const type_names[RLX_GGUF_TYPE_COUNT] = {
    "uint8", "int8",   "uint16", "int16",  "uint32", "int32",   "float32",
    "bool",  "string", "array",  "uint64", "int64",  "float64",
};

static const uint8_t fixed_sizes[RLX_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *rlx_gguf_type_name(rlx_gguf_type t)
{
    if ((unsigned)t >= RLX_GGUF_TYPE_COUNT)
        return "unknown";
    return type_names[t];
}

uint64_t rlx_gguf_type_fixed_size(rlx_gguf_type t)
{
    if ((unsigned)t >= RLX_GGUF_TYPE_COUNT)
        return 0;
    return fixed_sizes[t];
}

static bool type_is_unsigned(rlx_gguf_type t)
{
    return t == RLX_GGUF_TYPE_UINT8 || t == RLX_GGUF_TYPE_UINT16 || t == RLX_GGUF_TYPE_UINT32 ||
           t == RLX_GGUF_TYPE_UINT64;
}

static bool type_is_signed(rlx_gguf_type t)
{
    return t == RLX_GGUF_TYPE_INT8 || t == RLX_GGUF_TYPE_INT16 || t == RLX_GGUF_TYPE_INT32 ||
           t == RLX_GGUF_TYPE_INT64;
}

static uint64_t le_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint32_t le_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Copy a name from the file into buf for a message: printable ASCII only,
 * shortened when long, so a hostile name cannot garble the sentence. */
static const char *printable(char *buf, size_t cap, const char *p, uint64_t len)
{
    size_t o = 0;
    uint64_t i = 0;
    for (; i < len && o + 4 < cap; i++) {
        unsigned char ch = (unsigned char)p[i];
        buf[o++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
    }
    if (i < len) {
        o = o > cap - 4 ? cap - 4 : o;
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

static const char *type_with_article(rlx_gguf_type t)
{
    switch (t) {
    case RLX_GGUF_TYPE_INT8:
        return "an int8";
    case RLX_GGUF_TYPE_INT16:
        return "an int16";
    case RLX_GGUF_TYPE_INT32:
        return "an int32";
    case RLX_GGUF_TYPE_INT64:
        return "an int64";
    case RLX_GGUF_TYPE_ARRAY:
        return "an array";
    case RLX_GGUF_TYPE_UINT8:
        return "a uint8";
    case RLX_GGUF_TYPE_UINT16:
        return "a uint16";
    case RLX_GGUF_TYPE_UINT32:
        return "a uint32";
    case RLX_GGUF_TYPE_UINT64:
        return "a uint64";
    case RLX_GGUF_TYPE_FLOAT32:
        return "a float32";
    case RLX_GGUF_TYPE_FLOAT64:
        return "a float64";
    case RLX_GGUF_TYPE_BOOL:
        return "a bool";
    case RLX_GGUF_TYPE_STRING:
        return "a string";
    default:
        return "an unknown type";
    }
}

static uint64_t hash_bytes(const char *p, uint64_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (uint64_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* ---- the cursor --------------------------------------------------------- */

/* Reads from [base, base+size). `ctx` names what is being read ("key
 * 'general.name'"), `origin` is base's offset in the file for messages. */
typedef struct cursor {
    const uint8_t *base;
    uint64_t size;
    uint64_t pos;
    uint64_t origin;
    const char *fname;
    const char *ctx;
    rlx_error **err;
    rlx_gguf *index; /* where to record checkpoints, or NULL */
} cursor;

static rlx_status fail(const cursor *c, rlx_status code, const char *fmt, ...) RLX_PRINTF(3, 4);

static rlx_status fail(const cursor *c, rlx_status code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->ctx && c->ctx[0])
        return rlx_error_set(c->err, code, "%s: %s: %s", c->fname, c->ctx, msg);
    return rlx_error_set(c->err, code, "%s: %s", c->fname, msg);
}

static uint64_t left(const cursor *c)
{
    return c->size - c->pos;
}

static rlx_status take(cursor *c, uint64_t n, const char *field, const uint8_t **out)
{
    if (n > left(c))
        return fail(c, RLX_ERR_FORMAT,
                    "%s (%" PRIu64 " bytes at offset %" PRIu64 ") runs past the end of the file "
                    "(size %" PRIu64 "); the file is truncated or corrupt",
                    field, n, c->origin + c->pos, c->origin + c->size);
    *out = c->base + c->pos;
    c->pos += n;
    return RLX_OK;
}

static rlx_status take_u32(cursor *c, const char *field, uint32_t *v)
{
    const uint8_t *p = NULL;
    rlx_status s = take(c, 4, field, &p);
    if (s == RLX_OK)
        *v = le_u32(p);
    return s;
}

static rlx_status take_u64(cursor *c, const char *field, uint64_t *v)
{
    const uint8_t *p = NULL;
    rlx_status s = take(c, 8, field, &p);
    if (s == RLX_OK)
        *v = le_u64(p);
    return s;
}

static rlx_status take_str(cursor *c, const char *field, rlx_gguf_str *out)
{
    uint64_t len;
    rlx_status s = take_u64(c, field, &len);
    if (s != RLX_OK)
        return s;
    if (len > left(c))
        return fail(c, RLX_ERR_FORMAT,
                    "%s has string length %" PRIu64 " at offset %" PRIu64 ", more than the %" PRIu64
                    " bytes left in the file",
                    field, len, c->origin + c->pos - 8, left(c));
    out->ptr = (const char *)c->base + c->pos;
    out->len = len;
    c->pos += len;
    return RLX_OK;
}

static rlx_status push_ckpt(rlx_gguf *g, uint64_t off, rlx_error **err)
{
    if (g->n_ckpts == g->cap_ckpts) {
        uint64_t cap = g->cap_ckpts ? g->cap_ckpts * 2 : 64;
        uint64_t *p = realloc(g->ckpts, cap * sizeof *p);
        if (!p)
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "%s: out of memory indexing arrays",
                                 g->fname);
        g->ckpts = p;
        g->cap_ckpts = cap;
    }
    g->ckpts[g->n_ckpts++] = off;
    return RLX_OK;
}

/* Step over `count` elements of type elem starting at c->pos. `depth` is the
 * nesting level of the array holding them (1 for a key's own array). When
 * `ckpt` is set, the offset of every CKPT_STRIDE-th element is recorded. */
static rlx_status walk_array(cursor *c, rlx_gguf_type elem, uint64_t count, unsigned depth,
                             bool ckpt)
{
    if ((unsigned)elem >= RLX_GGUF_TYPE_COUNT)
        return fail(c, RLX_ERR_FORMAT, "array element type %u at offset %" PRIu64 " is unknown",
                    (unsigned)elem, c->origin + c->pos);
    uint64_t fs = fixed_sizes[elem];
    if (fs) {
        if (count > left(c) / fs)
            return fail(c, RLX_ERR_FORMAT,
                        "array count %" PRIu64 " of %s elements needs more than the %" PRIu64
                        " bytes left in the file",
                        count, type_names[elem], left(c));
        c->pos += count * fs;
        return RLX_OK;
    }
    uint64_t min = elem == RLX_GGUF_TYPE_STRING ? 8 : MIN_ARRAY_BYTES;
    if (count > left(c) / min)
        return fail(c, RLX_ERR_FORMAT,
                    "array count %" PRIu64 " of %s elements needs more than the %" PRIu64
                    " bytes left in the file",
                    count, type_names[elem], left(c));
    if (elem == RLX_GGUF_TYPE_ARRAY && depth >= RLX_GGUF_MAX_ARRAY_DEPTH)
        return fail(c, RLX_ERR_FORMAT, "arrays are nested more than %d deep",
                    RLX_GGUF_MAX_ARRAY_DEPTH);
    uint64_t start = c->pos;
    for (uint64_t i = 0; i < count; i++) {
        rlx_status s;
        if (ckpt && i % CKPT_STRIDE == 0) {
            s = push_ckpt(c->index, c->pos - start, c->err);
            if (s != RLX_OK)
                return s;
        }
        if (elem == RLX_GGUF_TYPE_STRING) {
            rlx_gguf_str str;
            s = take_str(c, "an array element", &str);
        } else {
            uint32_t t;
            uint64_t n;
            s = take_u32(c, "a nested array's element type", &t);
            if (s == RLX_OK)
                s = take_u64(c, "a nested array's count", &n);
            if (s == RLX_OK)
                s = walk_array(c, (rlx_gguf_type)t, n, depth + 1, false);
        }
        if (s != RLX_OK)
            return s;
    }
    return RLX_OK;
}

/* Decode one value of type t at the cursor (the type field already read). */
static rlx_status read_value(cursor *c, rlx_gguf_type t, unsigned depth, bool index,
                             rlx_gguf_value *out)
{
    const uint8_t *p = NULL;
    rlx_status s;
    memset(out, 0, sizeof *out);
    out->type = t;
    switch (t) {
    case RLX_GGUF_TYPE_UINT8:
    case RLX_GGUF_TYPE_BOOL:
        if ((s = take(c, 1, "the value", &p)) != RLX_OK)
            return s;
        out->v.u64 = t == RLX_GGUF_TYPE_BOOL ? (p[0] != 0) : p[0];
        return RLX_OK;
    case RLX_GGUF_TYPE_INT8:
        if ((s = take(c, 1, "the value", &p)) != RLX_OK)
            return s;
        out->v.i64 = (int8_t)p[0];
        return RLX_OK;
    case RLX_GGUF_TYPE_UINT16:
    case RLX_GGUF_TYPE_INT16:
        if ((s = take(c, 2, "the value", &p)) != RLX_OK)
            return s;
        {
            uint16_t u = (uint16_t)(p[0] | p[1] << 8);
            if (t == RLX_GGUF_TYPE_UINT16)
                out->v.u64 = u;
            else
                out->v.i64 = (int16_t)u;
        }
        return RLX_OK;
    case RLX_GGUF_TYPE_UINT32:
    case RLX_GGUF_TYPE_INT32:
    case RLX_GGUF_TYPE_FLOAT32: {
        uint32_t u;
        if ((s = take_u32(c, "the value", &u)) != RLX_OK)
            return s;
        if (t == RLX_GGUF_TYPE_UINT32) {
            out->v.u64 = u;
        } else if (t == RLX_GGUF_TYPE_INT32) {
            out->v.i64 = (int32_t)u;
        } else {
            float f;
            memcpy(&f, &u, 4);
            out->v.f64 = f;
        }
        return RLX_OK;
    }
    case RLX_GGUF_TYPE_UINT64:
    case RLX_GGUF_TYPE_INT64:
    case RLX_GGUF_TYPE_FLOAT64: {
        uint64_t u;
        if ((s = take_u64(c, "the value", &u)) != RLX_OK)
            return s;
        if (t == RLX_GGUF_TYPE_UINT64)
            out->v.u64 = u;
        else if (t == RLX_GGUF_TYPE_INT64)
            out->v.i64 = (int64_t)u;
        else
            memcpy(&out->v.f64, &u, 8);
        return RLX_OK;
    }
    case RLX_GGUF_TYPE_STRING:
        return take_str(c, "the string value", &out->v.str);
    case RLX_GGUF_TYPE_ARRAY: {
        uint32_t et;
        uint64_t count;
        if ((s = take_u32(c, "the array element type", &et)) != RLX_OK)
            return s;
        if ((s = take_u64(c, "the array count", &count)) != RLX_OK)
            return s;
        if (et >= RLX_GGUF_TYPE_COUNT)
            return fail(c, RLX_ERR_FORMAT, "array element type %" PRIu32 " is unknown", et);
        uint64_t start = c->pos;
        bool ckpt = index && count > 0 && fixed_sizes[et] == 0;
        if (ckpt) {
            rlx_gguf *g = c->index;
            if (g->n_vars == g->cap_vars) {
                uint64_t cap = g->cap_vars ? g->cap_vars * 2 : 16;
                var_array *v = realloc(g->vars, cap * sizeof *v);
                if (!v)
                    return fail(c, RLX_ERR_NO_MEMORY, "out of memory");
                g->vars = v;
                g->cap_vars = cap;
            }
            g->vars[g->n_vars++] =
                (var_array){.data = c->base + start, .count = count, .ckpt_first = g->n_ckpts};
        }
        if ((s = walk_array(c, (rlx_gguf_type)et, count, depth, ckpt)) != RLX_OK)
            return s;
        out->v.arr.elem_type = (rlx_gguf_type)et;
        out->v.arr.count = count;
        out->v.arr.data = c->base + start;
        out->v.arr.data_len = c->pos - start;
        return RLX_OK;
    }
    default:
        return fail(c, RLX_ERR_FORMAT, "value type %u is unknown", (unsigned)t);
    }
}

rlx_status rlx_gguf_check_array_bytes(rlx_gguf_type elem, uint64_t count, const void *data,
                                      uint64_t len, const char *what, rlx_error **err)
{
    cursor c = {.base = data, .size = len, .fname = "gguf", .ctx = what, .err = err};
    rlx_status s = walk_array(&c, elem, count, 1, false);
    if (s == RLX_OK && c.pos != len)
        return fail(&c, RLX_ERR_INVALID_ARG,
                    "%" PRIu64 " array elements use %" PRIu64 " of the %" PRIu64 " bytes given",
                    count, c.pos, len);
    return s;
}

/* ---- lookup tables ------------------------------------------------------ */

static void name_at(const rlx_gguf *g, bool tensors, uint64_t i, const char **p, uint64_t *n)
{
    if (tensors) {
        *p = g->tensors[i].name;
        *n = strlen(*p);
    } else {
        *p = g->kvs[i].key.ptr;
        *n = g->kvs[i].key.len;
    }
}

static uint64_t table_find(const rlx_gguf *g, bool tensors, const char *name, uint64_t len)
{
    const uint64_t *slots = tensors ? g->t_slots : g->kv_slots;
    uint64_t mask = tensors ? g->t_mask : g->kv_mask;
    if (!slots)
        return 0;
    for (uint64_t h = hash_bytes(name, len) & mask;; h = (h + 1) & mask) {
        uint64_t v = slots[h];
        if (v == 0)
            return 0;
        const char *p;
        uint64_t n;
        name_at(g, tensors, v - 1, &p, &n);
        if (n == len && memcmp(p, name, len) == 0)
            return v;
    }
}

/* Insert entry i; returns the index + 1 of an earlier entry with the same
 * name instead when there is one. */
static uint64_t table_insert(rlx_gguf *g, bool tensors, uint64_t i)
{
    uint64_t *slots = tensors ? g->t_slots : g->kv_slots;
    uint64_t mask = tensors ? g->t_mask : g->kv_mask;
    const char *name;
    uint64_t len;
    name_at(g, tensors, i, &name, &len);
    for (uint64_t h = hash_bytes(name, len) & mask;; h = (h + 1) & mask) {
        uint64_t v = slots[h];
        if (v == 0) {
            slots[h] = i + 1;
            return 0;
        }
        const char *p;
        uint64_t n;
        name_at(g, tensors, v - 1, &p, &n);
        if (n == len && memcmp(p, name, len) == 0)
            return v;
    }
}

static rlx_status table_alloc(rlx_gguf *g, bool tensors, uint64_t n, rlx_error **err)
{
    uint64_t cap = 8;
    while (cap < n * 2)
        cap *= 2;
    uint64_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "%s: out of memory", g->fname);
    if (tensors) {
        g->t_slots = slots;
        g->t_mask = cap - 1;
    } else {
        g->kv_slots = slots;
        g->kv_mask = cap - 1;
    }
    return RLX_OK;
}

/* ---- parsing ------------------------------------------------------------ */

static rlx_status parse_kvs(rlx_gguf *g, cursor *c)
{
    char ctx[160], name[96];
    rlx_status s;
    uint64_t n_kv = g->n_kv;
    g->n_kv = 0;
    if ((s = table_alloc(g, false, n_kv, c->err)) != RLX_OK)
        return s;
    for (uint64_t i = 0; i < n_kv; i++) {
        rlx_gguf_kv *kv = &g->kvs[i];
        snprintf(ctx, sizeof ctx, "key #%" PRIu64, i);
        c->ctx = ctx;
        if ((s = take_str(c, "the key name", &kv->key)) != RLX_OK)
            return s;
        snprintf(ctx, sizeof ctx, "key '%s'",
                 printable(name, sizeof name, kv->key.ptr, kv->key.len));
        uint32_t t;
        if ((s = take_u32(c, "the value type", &t)) != RLX_OK)
            return s;
        if (t >= RLX_GGUF_TYPE_COUNT)
            return fail(c, RLX_ERR_FORMAT, "value type %" PRIu32 " is unknown", t);
        if ((s = read_value(c, (rlx_gguf_type)t, 1, true, &kv->value)) != RLX_OK)
            return s;
        g->n_kv = i + 1; /* so that close() only frees what was filled */
        uint64_t dup = table_insert(g, false, i);
        if (dup)
            return fail(c, RLX_ERR_FORMAT,
                        "the key appears twice (entries #%" PRIu64 " and #%" PRIu64 ")", dup - 1,
                        i);
        static const char align_key[] = "general.alignment";
        if (kv->key.len == sizeof align_key - 1 &&
            memcmp(kv->key.ptr, align_key, kv->key.len) == 0) {
            if (kv->value.type != RLX_GGUF_TYPE_UINT32)
                return fail(c, RLX_ERR_FORMAT, "general.alignment is %s, expected uint32",
                            type_with_article(kv->value.type));
            uint64_t a = kv->value.v.u64;
            if (a == 0 || (a & (a - 1)) != 0)
                return fail(c, RLX_ERR_FORMAT,
                            "general.alignment is %" PRIu64 ", which is not a power of two", a);
            g->alignment = a;
        }
    }
    c->ctx = NULL;
    return RLX_OK;
}

static rlx_status parse_tensor(rlx_gguf *g, cursor *c, uint64_t i)
{
    char ctx[160], name[96];
    rlx_gguf_tensor *t = &g->tensors[i];
    rlx_status s;
    rlx_gguf_str str;

    snprintf(ctx, sizeof ctx, "tensor #%" PRIu64, i);
    c->ctx = ctx;
    if ((s = take_str(c, "the tensor name", &str)) != RLX_OK)
        return s;
    if (memchr(str.ptr, '\0', str.len))
        return fail(c, RLX_ERR_FORMAT, "the tensor name contains a NUL byte");
    t->name = malloc(str.len + 1);
    if (!t->name)
        return fail(c, RLX_ERR_NO_MEMORY, "out of memory");
    memcpy(t->name, str.ptr, str.len);
    t->name[str.len] = '\0';
    snprintf(ctx, sizeof ctx, "tensor '%s'", printable(name, sizeof name, str.ptr, str.len));

    if ((s = take_u32(c, "the number of dimensions", &t->n_dims)) != RLX_OK)
        return s;
    if (t->n_dims > RLX_GGUF_MAX_DIMS)
        return fail(c, RLX_ERR_FORMAT, "n_dims is %" PRIu32 "; at most %d dimensions are allowed",
                    t->n_dims, RLX_GGUF_MAX_DIMS);
    uint64_t n_el = 1;
    bool overflow = false, zero = false;
    for (uint32_t d = 0; d < RLX_GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d >= t->n_dims)
            continue;
        if ((s = take_u64(c, "a dimension", &t->ne[d])) != RLX_OK)
            return s;
        if (t->ne[d] > (uint64_t)INT64_MAX)
            return fail(c, RLX_ERR_FORMAT,
                        "dimension %" PRIu32 " is %" PRIu64 ", which is too large", d, t->ne[d]);
        if (t->ne[d] == 0)
            zero = true;
        else if (n_el > UINT64_MAX / t->ne[d])
            overflow = true;
        else
            n_el *= t->ne[d];
    }
    if (zero)
        n_el = 0;
    else if (overflow)
        return fail(c, RLX_ERR_FORMAT, "the element count of its shape overflows 64 bits");
    t->n_elements = n_el;

    if ((s = take_u32(c, "the tensor type", &t->ggml_type)) != RLX_OK)
        return s;
    t->dtype = rlx_dtype_from_ggml(t->ggml_type);
    if (t->dtype == RLX_DTYPE_INVALID)
        return fail(c, RLX_ERR_UNSUPPORTED, "unknown ggml tensor type id %" PRIu32, t->ggml_type);
    const rlx_dtype_info *ti = rlx_dtype_get(t->dtype);
    uint64_t row;
    if (rlx_dtype_row_bytes(t->dtype, t->ne[0], &row) != RLX_OK)
        return fail(c, RLX_ERR_FORMAT,
                    "row length ne[0] = %" PRIu64
                    " is not a multiple of the %s block size %" PRIu32,
                    t->ne[0], ti->name, ti->block_size);
    uint64_t rows = t->ne[0] ? n_el / t->ne[0] : 0;
    if (rows != 0 && row > UINT64_MAX / rows)
        return fail(c, RLX_ERR_FORMAT, "its size in bytes overflows 64 bits");
    t->n_bytes = row * rows;

    if ((s = take_u64(c, "the data offset", &t->offset)) != RLX_OK)
        return s;
    g->n_tensors = i + 1;
    uint64_t dup = table_insert(g, true, i);
    if (dup)
        return fail(c, RLX_ERR_FORMAT,
                    "the tensor name appears twice (tensors #%" PRIu64 " and #%" PRIu64 ")",
                    dup - 1, i);
    return RLX_OK;
}

typedef struct span {
    uint64_t offset, n_bytes, index;
} span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    return x->index < y->index ? -1 : (x->index > y->index);
}

/* Every tensor aligned, inside the file, and no two sharing a byte. */
static rlx_status check_tensor_data(rlx_gguf *g, cursor *c)
{
    char n1[96], n2[96];
    c->ctx = NULL;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const rlx_gguf_tensor *t = &g->tensors[i];
        printable(n1, sizeof n1, t->name, strlen(t->name));
        if (t->offset % g->alignment != 0)
            return fail(c, RLX_ERR_FORMAT,
                        "tensor '%s' data offset %" PRIu64
                        " is not a multiple of the alignment %" PRIu64,
                        n1, t->offset, g->alignment);
        uint64_t room = g->data_offset <= g->size ? g->size - g->data_offset : 0;
        if (g->data_offset > g->size || t->offset > room || t->n_bytes > room - t->offset)
            return fail(c, RLX_ERR_FORMAT,
                        "tensor '%s' data (offset %" PRIu64 ", %" PRIu64
                        " bytes) runs past the end of the file (size %" PRIu64
                        ", data section at %" PRIu64 ")",
                        n1, t->offset, t->n_bytes, g->size, g->data_offset);
    }
    if (g->n_tensors < 2)
        return RLX_OK;
    span *sp = malloc(g->n_tensors * sizeof *sp);
    if (!sp)
        return fail(c, RLX_ERR_NO_MEMORY, "out of memory");
    uint64_t n = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].n_bytes)
            sp[n++] = (span){g->tensors[i].offset, g->tensors[i].n_bytes, i};
    qsort(sp, n, sizeof *sp, span_cmp);
    rlx_status s = RLX_OK;
    for (uint64_t i = 1; i < n; i++) {
        const span *a = &sp[i - 1], *b = &sp[i];
        if (a->offset + a->n_bytes > b->offset) {
            const rlx_gguf_tensor *ta = &g->tensors[a->index], *tb = &g->tensors[b->index];
            s = fail(c, RLX_ERR_FORMAT,
                     "tensor '%s' data (offset %" PRIu64 ", %" PRIu64
                     " bytes) overlaps tensor '%s' (offset %" PRIu64 ")",
                     printable(n1, sizeof n1, ta->name, strlen(ta->name)), ta->offset, ta->n_bytes,
                     printable(n2, sizeof n2, tb->name, strlen(tb->name)), tb->offset);
            break;
        }
    }
    free(sp);
    return s;
}

static rlx_status parse(rlx_gguf *g, rlx_error **err)
{
    cursor c = {.base = g->base, .size = g->size, .fname = g->fname, .err = err, .index = g};
    rlx_status s;

    if (g->size < 4 || memcmp(g->base, "GGUF", 4) != 0) {
        char magic[16];
        return fail(
            &c, RLX_ERR_FORMAT, "not a GGUF file: the magic is '%s', expected 'GGUF'",
            printable(magic, sizeof magic, (const char *)g->base, g->size < 4 ? g->size : 4));
    }
    c.pos = 4;
    if ((s = take_u32(&c, "the version", &g->version)) != RLX_OK)
        return s;
    if (g->version == 1)
        return fail(&c, RLX_ERR_UNSUPPORTED,
                    "GGUF version 1 is not supported (only versions 2 and 3); convert the file "
                    "again with a current llama.cpp");
    if (g->version != 2 && g->version != 3) {
        if ((g->version & 0xffff) == 0 && (g->version >> 16) != 0)
            return fail(&c, RLX_ERR_UNSUPPORTED,
                        "the version field reads %" PRIu32 ", which looks like a big-endian GGUF; "
                        "only little-endian files are supported",
                        g->version);
        return fail(&c, RLX_ERR_UNSUPPORTED,
                    "GGUF version %" PRIu32 " is not supported (only versions 2 and 3)",
                    g->version);
    }
    uint64_t n_tensors, n_kv;
    if ((s = take_u64(&c, "the tensor count", &n_tensors)) != RLX_OK)
        return s;
    if ((s = take_u64(&c, "the key/value count", &n_kv)) != RLX_OK)
        return s;
    if (n_kv > left(&c) / MIN_KV_BYTES)
        return fail(&c, RLX_ERR_FORMAT,
                    "the key/value count %" PRIu64 " is impossible: the %" PRIu64
                    " bytes left in the file hold at most %" PRIu64,
                    n_kv, left(&c), left(&c) / MIN_KV_BYTES);
    if (n_tensors > (left(&c) - n_kv * MIN_KV_BYTES) / MIN_TENSOR_BYTES)
        return fail(&c, RLX_ERR_FORMAT,
                    "the tensor count %" PRIu64 " is impossible: the %" PRIu64
                    " bytes left in the file hold at most %" PRIu64,
                    n_tensors, left(&c), (left(&c) - n_kv * MIN_KV_BYTES) / MIN_TENSOR_BYTES);

    g->alignment = RLX_GGUF_DEFAULT_ALIGNMENT;
    if (n_kv) {
        g->kvs = calloc(n_kv, sizeof *g->kvs);
        if (!g->kvs)
            return fail(&c, RLX_ERR_NO_MEMORY, "out of memory for %" PRIu64 " keys", n_kv);
    }
    g->n_kv = n_kv;
    if ((s = parse_kvs(g, &c)) != RLX_OK)
        return s;

    if (n_tensors) {
        g->tensors = calloc(n_tensors, sizeof *g->tensors);
        if (!g->tensors)
            return fail(&c, RLX_ERR_NO_MEMORY, "out of memory for %" PRIu64 " tensors", n_tensors);
        g->cap_tensors = n_tensors;
    }
    if ((s = table_alloc(g, true, n_tensors, err)) != RLX_OK)
        return s;
    for (uint64_t i = 0; i < n_tensors; i++)
        if ((s = parse_tensor(g, &c, i)) != RLX_OK)
            return s;
    c.ctx = NULL;

    uint64_t pad = (g->alignment - c.pos % g->alignment) % g->alignment;
    g->data_offset = c.pos + pad; /* c.pos <= size < 2^63, no overflow */
    return check_tensor_data(g, &c);
}

/* ---- open / close ------------------------------------------------------- */

static rlx_gguf *new_gguf(const char *name)
{
    rlx_gguf *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->path = strdup(name ? name : "(memory)");
    if (!g->path) {
        free(g);
        return NULL;
    }
    const char *slash = strrchr(g->path, '/');
    g->fname = slash && slash[1] ? slash + 1 : g->path;
    return g;
}

void rlx_gguf_close(rlx_gguf *g)
{
    if (!g)
        return;
    if (g->tensors)
        for (uint64_t i = 0; i < g->cap_tensors; i++)
            free(g->tensors[i].name);
    free(g->tensors);
    free(g->kvs);
    free(g->kv_slots);
    free(g->t_slots);
    free(g->vars);
    free(g->ckpts);
    if (g->map)
        munmap(g->map, g->map_len);
    free(g->path);
    free(g);
}

static rlx_status finish_open(rlx_gguf *g, rlx_gguf **out, rlx_error **err)
{
    rlx_status s = parse(g, err);
    if (s != RLX_OK) {
        rlx_gguf_close(g);
        return s;
    }
    *out = g;
    return RLX_OK;
}

rlx_status rlx_gguf_open_memory(const void *data, size_t size, const char *name, rlx_gguf **out,
                                rlx_error **err)
{
    if (!out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_gguf_open_memory: out is NULL");
    *out = NULL;
    if (!data && size)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_gguf_open_memory: data is NULL");
    if ((uint64_t)size > (uint64_t)INT64_MAX)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_gguf_open_memory: size too large");
    rlx_gguf *g = new_gguf(name);
    if (!g)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    static const uint8_t empty[1];
    g->base = data ? data : empty;
    g->size = size;
    return finish_open(g, out, err);
}

rlx_status rlx_gguf_open(const char *path, rlx_gguf **out, rlx_error **err)
{
    if (!out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_gguf_open: out is NULL");
    *out = NULL;
    if (!path)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_gguf_open: path is NULL");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return rlx_error_set(err, RLX_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return rlx_error_set(err, RLX_ERR_IO, "cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return rlx_error_set(err, RLX_ERR_IO, "'%s' is not a regular file", path);
    }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED, "'%s' is too large to map", path);
    }
    rlx_gguf *g = new_gguf(path);
    if (!g) {
        close(fd);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    }
    static const uint8_t empty[1];
    g->base = empty;
    g->size = (uint64_t)st.st_size;
    if (st.st_size > 0) {
        void *m = rlx_map_file(fd, (size_t)st.st_size);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            rlx_gguf_close(g);
            return rlx_error_set(err, RLX_ERR_IO, "cannot map '%s': %s", path, strerror(e));
        }
        g->map = m;
        g->map_len = (size_t)st.st_size;
        g->base = m;
    }
    close(fd);
    return finish_open(g, out, err);
}

/* ---- accessors ---------------------------------------------------------- */

const char *rlx_gguf_path(const rlx_gguf *g)
{
    return g ? g->path : NULL;
}

uint32_t rlx_gguf_version(const rlx_gguf *g)
{
    return g ? g->version : 0;
}

uint64_t rlx_gguf_alignment(const rlx_gguf *g)
{
    return g ? g->alignment : 0;
}

uint64_t rlx_gguf_file_size(const rlx_gguf *g)
{
    return g ? g->size : 0;
}

uint64_t rlx_gguf_data_offset(const rlx_gguf *g)
{
    return g ? g->data_offset : 0;
}

uint64_t rlx_gguf_n_kv(const rlx_gguf *g)
{
    return g ? g->n_kv : 0;
}

const rlx_gguf_kv *rlx_gguf_kv_at(const rlx_gguf *g, uint64_t i)
{
    return g && i < g->n_kv ? &g->kvs[i] : NULL;
}

const rlx_gguf_value *rlx_gguf_find(const rlx_gguf *g, const char *key)
{
    if (!g || !key)
        return NULL;
    uint64_t v = table_find(g, false, key, strlen(key));
    return v ? &g->kvs[v - 1].value : NULL;
}

uint64_t rlx_gguf_n_tensors(const rlx_gguf *g)
{
    return g ? g->n_tensors : 0;
}

const rlx_gguf_tensor *rlx_gguf_tensor_at(const rlx_gguf *g, uint64_t i)
{
    return g && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const rlx_gguf_tensor *rlx_gguf_find_tensor(const rlx_gguf *g, const char *name)
{
    if (!g || !name)
        return NULL;
    uint64_t v = table_find(g, true, name, strlen(name));
    return v ? &g->tensors[v - 1] : NULL;
}

const void *rlx_gguf_tensor_data(const rlx_gguf *g, const rlx_gguf_tensor *t)
{
    if (!g || !t)
        return NULL;
    return g->base + g->data_offset + t->offset;
}

/* ---- typed getters ------------------------------------------------------ */

static const char *gname(const rlx_gguf *g)
{
    return g ? g->fname : "(null gguf)";
}

static rlx_status lookup(const rlx_gguf *g, const char *key, const rlx_gguf_value **v,
                         rlx_error **err)
{
    *v = NULL;
    if (!g || !key)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "%s: NULL file or key", gname(g));
    *v = rlx_gguf_find(g, key);
    if (!*v)
        return rlx_error_set(err, RLX_ERR_NOT_FOUND, "%s: key '%s' is missing", g->fname, key);
    return RLX_OK;
}

static rlx_status wrong_type(const rlx_gguf *g, const char *key, const rlx_gguf_value *v,
                             const char *want, rlx_error **err)
{
    if (v->type == RLX_GGUF_TYPE_ARRAY)
        return rlx_error_set(err, RLX_ERR_TYPE, "%s: key '%s' is an array of %s, expected %s",
                             g->fname, key, rlx_gguf_type_name(v->v.arr.elem_type), want);
    return rlx_error_set(err, RLX_ERR_TYPE, "%s: key '%s' is %s, expected %s", g->fname, key,
                         type_with_article(v->type), want);
}

/* Integer getters share this: any integer type whose value lies in [lo, hi]. */
static rlx_status get_int(const rlx_gguf *g, const char *key, int64_t lo, uint64_t hi,
                          const char *want, uint64_t *out_u, int64_t *out_i, rlx_error **err)
{
    const rlx_gguf_value *v;
    rlx_status s = lookup(g, key, &v, err);
    if (s != RLX_OK)
        return s;
    bool fits;
    if (type_is_unsigned(v->type)) {
        fits = v->v.u64 <= hi;
        if (fits) {
            *out_u = v->v.u64;
            *out_i = (int64_t)v->v.u64;
        }
        if (!fits)
            return rlx_error_set(err, RLX_ERR_TYPE,
                                 "%s: key '%s' is %s with value %" PRIu64 ", which does not fit %s",
                                 g->fname, key, type_with_article(v->type), v->v.u64, want);
    } else if (type_is_signed(v->type)) {
        fits = v->v.i64 >= lo && (v->v.i64 < 0 || (uint64_t)v->v.i64 <= hi);
        if (!fits)
            return rlx_error_set(err, RLX_ERR_TYPE,
                                 "%s: key '%s' is %s with value %" PRId64 ", which does not fit %s",
                                 g->fname, key, type_with_article(v->type), v->v.i64, want);
        *out_i = v->v.i64;
        *out_u = (uint64_t)v->v.i64;
    } else {
        return wrong_type(g, key, v, want, err);
    }
    return RLX_OK;
}

rlx_status rlx_gguf_get_u32(const rlx_gguf *g, const char *key, uint32_t *out, rlx_error **err)
{
    uint64_t u = 0;
    int64_t i = 0;
    rlx_status s = get_int(g, key, 0, UINT32_MAX, "uint32", &u, &i, err);
    if (s == RLX_OK)
        *out = (uint32_t)u;
    return s;
}

rlx_status rlx_gguf_get_u64(const rlx_gguf *g, const char *key, uint64_t *out, rlx_error **err)
{
    uint64_t u = 0;
    int64_t i = 0;
    rlx_status s = get_int(g, key, 0, UINT64_MAX, "uint64", &u, &i, err);
    if (s == RLX_OK)
        *out = u;
    return s;
}

rlx_status rlx_gguf_get_i64(const rlx_gguf *g, const char *key, int64_t *out, rlx_error **err)
{
    uint64_t u = 0;
    int64_t i = 0;
    rlx_status s = get_int(g, key, INT64_MIN, INT64_MAX, "int64", &u, &i, err);
    if (s == RLX_OK)
        *out = i;
    return s;
}

rlx_status rlx_gguf_get_f32(const rlx_gguf *g, const char *key, float *out, rlx_error **err)
{
    const rlx_gguf_value *v;
    rlx_status s = lookup(g, key, &v, err);
    if (s != RLX_OK)
        return s;
    if (v->type != RLX_GGUF_TYPE_FLOAT32 && v->type != RLX_GGUF_TYPE_FLOAT64)
        return wrong_type(g, key, v, "float32", err);
    *out = (float)v->v.f64;
    return RLX_OK;
}

rlx_status rlx_gguf_get_bool(const rlx_gguf *g, const char *key, bool *out, rlx_error **err)
{
    const rlx_gguf_value *v;
    rlx_status s = lookup(g, key, &v, err);
    if (s != RLX_OK)
        return s;
    if (v->type != RLX_GGUF_TYPE_BOOL)
        return wrong_type(g, key, v, "bool", err);
    *out = v->v.u64 != 0;
    return RLX_OK;
}

rlx_status rlx_gguf_get_str(const rlx_gguf *g, const char *key, rlx_gguf_str *out, rlx_error **err)
{
    const rlx_gguf_value *v;
    rlx_status s = lookup(g, key, &v, err);
    if (s != RLX_OK)
        return s;
    if (v->type != RLX_GGUF_TYPE_STRING)
        return wrong_type(g, key, v, "string", err);
    *out = v->v.str;
    return RLX_OK;
}

rlx_status rlx_gguf_get_string(const rlx_gguf *g, const char *key, char *buf, size_t cap,
                               rlx_error **err)
{
    if (!buf || cap == 0)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "%s: no buffer for key '%s'", gname(g),
                             key ? key : "(null)");
    buf[0] = '\0';
    rlx_gguf_str str;
    rlx_status s = rlx_gguf_get_str(g, key, &str, err);
    if (s != RLX_OK)
        return s;
    size_t n = str.len < cap - 1 ? (size_t)str.len : cap - 1;
    memcpy(buf, str.ptr, n);
    buf[n] = '\0';
    return RLX_OK;
}

rlx_status rlx_gguf_get_arr(const rlx_gguf *g, const char *key, rlx_gguf_type elem_type,
                            const rlx_gguf_value **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    const rlx_gguf_value *v;
    rlx_status s = lookup(g, key, &v, err);
    if (s != RLX_OK)
        return s;
    char want[48];
    if (elem_type == RLX_GGUF_TYPE_COUNT)
        snprintf(want, sizeof want, "an array");
    else
        snprintf(want, sizeof want, "an array of %s", rlx_gguf_type_name(elem_type));
    if (v->type != RLX_GGUF_TYPE_ARRAY ||
        (elem_type != RLX_GGUF_TYPE_COUNT && v->v.arr.elem_type != elem_type))
        return wrong_type(g, key, v, want, err);
    if (out)
        *out = v;
    return RLX_OK;
}

/* ---- array elements ----------------------------------------------------- */

static const var_array *find_var(const rlx_gguf *g, const uint8_t *data)
{
    uint64_t lo = 0, hi = g ? g->n_vars : 0;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (g->vars[mid].data == data)
            return &g->vars[mid];
        if ((uintptr_t)g->vars[mid].data < (uintptr_t)data)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

rlx_status rlx_gguf_array_get(const rlx_gguf *g, const rlx_gguf_value *arr, uint64_t i,
                              rlx_gguf_value *out, rlx_error **err)
{
    if (!arr || !out || arr->type != RLX_GGUF_TYPE_ARRAY)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "%s: rlx_gguf_array_get needs an array value", gname(g));
    if (i >= arr->v.arr.count)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "%s: array index %" PRIu64 " is out of range (%" PRIu64 " elements)",
                             gname(g), i, arr->v.arr.count);
    rlx_gguf_type et = arr->v.arr.elem_type;
    cursor c = {.base = arr->v.arr.data,
                .size = arr->v.arr.data_len,
                .fname = gname(g),
                .ctx = "array element",
                .err = err};
    if (g && arr->v.arr.data >= g->base && arr->v.arr.data <= g->base + g->size)
        c.origin = (uint64_t)(arr->v.arr.data - g->base);
    if ((unsigned)et >= RLX_GGUF_TYPE_COUNT)
        return fail(&c, RLX_ERR_FORMAT, "element type %u is unknown", (unsigned)et);
    uint64_t fs = fixed_sizes[et];
    if (fs) {
        if (i >= c.size / fs)
            return fail(&c, RLX_ERR_FORMAT, "element %" PRIu64 " lies outside the array data", i);
        c.pos = i * fs;
    } else {
        uint64_t k = 0;
        const var_array *va = find_var(g, arr->v.arr.data);
        if (va && va->count == arr->v.arr.count) {
            k = i / CKPT_STRIDE;
            c.pos = g->ckpts[va->ckpt_first + k];
            k *= CKPT_STRIDE;
        }
        if (k < i) {
            rlx_status s = walk_array(&c, et, i - k, 1, false);
            if (s != RLX_OK)
                return s;
        }
    }
    return read_value(&c, et, 1, false, out);
}
