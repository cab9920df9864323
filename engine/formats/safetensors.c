#include "engine/formats/safetensors.h"
#include "engine/formats/mapfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

/* One mapped (or caller-provided) safetensors image. */
typedef struct st_shard {
    char *path;        /* as opened, or the caller's name for a memory image */
    const char *label; /* basename of path: what error messages call the file */
    void *map;         /* our mmap, NULL for a memory image */
    size_t map_size;
    const uint8_t *data; /* start of the data section */
    uint64_t data_size;
} st_shard;

typedef struct st_meta {
    char *key;
    char *value;
} st_meta;

/* Open-addressing string set: slots hold index + 1 into some array, 0 = empty. */
typedef struct st_hash {
    size_t *slots;
    size_t cap; /* a power of two, or 0 */
} st_hash;

struct rlx_safetensors {
    st_shard *shards;
    uint32_t n_shards;
    rlx_st_tensor *tensors;
    uint64_t n_tensors, cap_tensors;
    st_meta *meta;
    uint64_t n_meta, cap_meta;
    st_hash tensor_index;
    st_hash meta_index;
};

/* Mapping of the safetensors dtype spelling. Only the scalar types the
 * format defines are accepted, so a header cannot name a GGUF block type. */
static const struct {
    const char *name;
    rlx_dtype dtype;
} st_dtypes[] = {
    {"F64", RLX_DTYPE_F64},   {"F32", RLX_DTYPE_F32},         {"F16", RLX_DTYPE_F16},
    {"BF16", RLX_DTYPE_BF16}, {"F8_E4M3", RLX_DTYPE_F8_E4M3}, {"F8_E5M2", RLX_DTYPE_F8_E5M2},
    {"I64", RLX_DTYPE_I64},   {"I32", RLX_DTYPE_I32},         {"I16", RLX_DTYPE_I16},
    {"I8", RLX_DTYPE_I8},     {"U8", RLX_DTYPE_U8},           {"BOOL", RLX_DTYPE_BOOL},
};

static rlx_dtype st_dtype_from_name(const char *s)
{
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (strcmp(st_dtypes[i].name, s) == 0)
            return st_dtypes[i].dtype;
    return RLX_DTYPE_INVALID;
}

static const char *path_basename(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static char *str_dup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static char *path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    size_t n = a;
    if (a > 0 && dir[a - 1] != '/')
        p[n++] = '/';
    memcpy(p + n, name, b + 1);
    return p;
}

static char *path_dirname(const char *path)
{
    const char *s = strrchr(path, '/');
    if (!s)
        return str_dup(".");
    if (s == path)
        return str_dup("/");
    size_t n = (size_t)(s - path);
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, path, n);
        d[n] = '\0';
    }
    return d;
}

static const char *json_type_label(struct json_object *o)
{
    switch (json_object_get_type(o)) {
    case json_type_null:
        return "null";
    case json_type_boolean:
        return "a boolean";
    case json_type_double:
        return "a non-integer number";
    case json_type_int:
        return "an integer";
    case json_type_object:
        return "an object";
    case json_type_array:
        return "an array";
    case json_type_string:
        return "a string";
    }
    return "an unknown JSON value";
}

/* ---- string hash ------------------------------------------------------- */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

static void hash_free(st_hash *h)
{
    free(h->slots);
    h->slots = NULL;
    h->cap = 0;
}

/* Sized once for `n` entries; the tables never grow after that. */
static bool hash_init(st_hash *h, uint64_t n)
{
    size_t cap = 16;
    while (cap < n * 2) {
        if (cap > SIZE_MAX / 4)
            return false;
        cap *= 2;
    }
    h->slots = calloc(cap, sizeof *h->slots);
    h->cap = h->slots ? cap : 0;
    return h->slots != NULL;
}

typedef const char *(*st_key_fn)(const void *base, size_t i);

/* Index of the entry named `key`, or SIZE_MAX; *slot_out gets the slot where
 * it is or would go. */
static size_t hash_lookup(const st_hash *h, const char *key, st_key_fn key_of, const void *base,
                          size_t *slot_out)
{
    if (slot_out)
        *slot_out = 0;
    if (h->cap == 0)
        return SIZE_MAX;
    size_t mask = h->cap - 1;
    size_t s = (size_t)hash_str(key) & mask;
    while (h->slots[s] != 0) {
        size_t idx = h->slots[s] - 1;
        if (strcmp(key_of(base, idx), key) == 0) {
            if (slot_out)
                *slot_out = s;
            return idx;
        }
        s = (s + 1) & mask;
    }
    if (slot_out)
        *slot_out = s;
    return SIZE_MAX;
}

static const char *tensor_key(const void *base, size_t i)
{
    return ((const rlx_st_tensor *)base)[i].name;
}

static const char *meta_key(const void *base, size_t i)
{
    return ((const st_meta *)base)[i].key;
}

static const char *cstr_key(const void *base, size_t i)
{
    return ((char *const *)base)[i];
}

/* ---- growing arrays ---------------------------------------------------- */

static bool grow(void **arr, uint64_t *cap, uint64_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    uint64_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    if (c > SIZE_MAX / elem)
        return false;
    void *p = realloc(*arr, (size_t)(c * elem));
    if (!p)
        return false;
    *arr = p;
    *cap = c;
    return true;
}

static rlx_status oom(rlx_error **err, const char *label)
{
    return rlx_error_set(err, RLX_ERR_NO_MEMORY, "%s: out of memory while reading the header",
                         label);
}

/* ---- JSON -------------------------------------------------------------- */

/* Parse exactly `len` bytes of JSON; only whitespace may follow the value. */
static rlx_status parse_json(const char *text, size_t len, const char *label, const char *what,
                             struct json_object **out, rlx_error **err)
{
    *out = NULL;
    if (len > INT_MAX)
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s: %s is %zu bytes, too large to parse", label,
                             what, len);
    /* The deepest legitimate value is 3 levels (header > tensor > shape). */
    struct json_tokener *tok = json_tokener_new_ex(16);
    if (!tok)
        return oom(err, label);
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_ALLOW_TRAILING_CHARS |
                                    JSON_TOKENER_VALIDATE_UTF8);
    struct json_object *obj = json_tokener_parse_ex(tok, text, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    if (!obj && jerr == json_tokener_continue) {
        /* A bare number cannot know it ended; a NUL tells the tokener. */
        obj = json_tokener_parse_ex(tok, "", 1);
        jerr = json_tokener_get_error(tok);
        if (!obj && jerr != json_tokener_success)
            jerr = json_tokener_continue; /* report it as cut short */
        end = len;
    }
    json_tokener_free(tok);
    if (!obj || jerr != json_tokener_success) {
        json_object_put(obj);
        if (jerr == json_tokener_continue || jerr == json_tokener_success)
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s: %s is not valid JSON: it ends before the value is complete",
                                 label, what);
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s: %s is not valid JSON (%s at byte %zu)",
                             label, what, json_tokener_error_desc(jerr), end);
    }
    for (size_t i = end; i < len; i++) {
        char c = text[i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
            json_object_put(obj);
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s: %s has bytes after the JSON value (at byte %zu); only "
                                 "space padding may follow it",
                                 label, what, i);
        }
    }
    *out = obj;
    return RLX_OK;
}

/* A JSON integer >= 0, read without going through a double. */
static bool json_u64(struct json_object *o, uint64_t *v)
{
    if (!json_object_is_type(o, json_type_int))
        return false;
    if (json_object_get_int64(o) < 0)
        return false;
    *v = json_object_get_uint64(o);
    return true;
}

/* ---- one safetensors image -------------------------------------------- */

static void format_shape(char *buf, size_t size, const uint64_t *shape, uint32_t n)
{
    size_t pos = 0;
    pos += (size_t)snprintf(buf, size, "[");
    for (uint32_t i = 0; i < n && pos < size; i++)
        pos += (size_t)snprintf(buf + pos, size - pos, "%s%llu", i ? ", " : "",
                                (unsigned long long)shape[i]);
    if (pos < size)
        snprintf(buf + pos, size - pos, "]");
}

static rlx_status parse_tensor(const st_shard *sh, uint32_t shard_idx, const char *name,
                               struct json_object *val, rlx_st_tensor *t, rlx_error **err)
{
    const char *label = sh->label;
    memset(t, 0, sizeof *t);
    if (!json_object_is_type(val, json_type_object))
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s: tensor '%s' is %s, not an object", label,
                             name, json_type_label(val));

    struct json_object *jdtype, *jshape, *joffs;
    if (!json_object_object_get_ex(val, "dtype", &jdtype))
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s: tensor '%s' has no dtype", label, name);
    if (!json_object_is_type(jdtype, json_type_string))
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s: tensor '%s' dtype is %s, not a string",
                             label, name, json_type_label(jdtype));
    const char *dname = json_object_get_string(jdtype);
    t->dtype = st_dtype_from_name(dname);
    if (t->dtype == RLX_DTYPE_INVALID)
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "%s: tensor '%s' has dtype '%.40s', which rlx does not support", label,
                             name, dname);

    if (!json_object_object_get_ex(val, "shape", &jshape))
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s: tensor '%s' has no shape", label, name);
    if (!json_object_is_type(jshape, json_type_array))
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s: tensor '%s' shape is %s, not an array",
                             label, name, json_type_label(jshape));
    size_t nd = json_object_array_length(jshape);
    if (nd > RLX_ST_MAX_DIMS)
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "%s: tensor '%s' shape has %zu dims; rlx handles at most %d", label,
                             name, nd, RLX_ST_MAX_DIMS);
    t->n_dims = (uint32_t)nd;
    uint64_t n_el = 1;
    bool el_overflow = false;
    for (size_t i = 0; i < nd; i++) {
        struct json_object *d = json_object_array_get_idx(jshape, i);
        if (!json_u64(d, &t->shape[i]))
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s: tensor '%s' shape dim %zu is %s (%.40s); dims must be "
                                 "non-negative integers",
                                 label, name, i,
                                 json_object_is_type(d, json_type_int) ? "negative"
                                                                       : json_type_label(d),
                                 json_object_to_json_string(d));
        if (t->shape[i] != 0 && n_el > UINT64_MAX / t->shape[i])
            el_overflow = true;
        else
            n_el *= t->shape[i];
    }
    /* A zero dim makes the product 0 even if other dims would overflow. */
    for (size_t i = 0; i < nd; i++) {
        if (t->shape[i] == 0) {
            el_overflow = false;
            n_el = 0;
        }
    }
    char shape_s[256];
    format_shape(shape_s, sizeof shape_s, t->shape, t->n_dims);
    uint64_t need = 0;
    if (el_overflow || rlx_dtype_row_bytes(t->dtype, n_el, &need) != RLX_OK)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: tensor '%s' shape %s in %s needs more than 2^64 bytes", label,
                             name, shape_s, rlx_dtype_name(t->dtype));
    t->n_elements = n_el;

    if (!json_object_object_get_ex(val, "data_offsets", &joffs))
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s: tensor '%s' has no data_offsets", label,
                             name);
    uint64_t begin, end;
    if (!json_object_is_type(joffs, json_type_array) || json_object_array_length(joffs) != 2 ||
        !json_u64(json_object_array_get_idx(joffs, 0), &begin) ||
        !json_u64(json_object_array_get_idx(joffs, 1), &end))
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: tensor '%s' data_offsets %.60s is not a pair of non-negative "
                             "integers [begin, end]",
                             label, name, json_object_to_json_string(joffs));
    if (begin > end)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: tensor '%s' data_offsets [%llu, %llu] end before they begin",
                             label, name, (unsigned long long)begin, (unsigned long long)end);
    if (end > sh->data_size)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: tensor '%s' data_offsets [%llu, %llu] run past the end of the "
                             "%llu-byte data section (file truncated?)",
                             label, name, (unsigned long long)begin, (unsigned long long)end,
                             (unsigned long long)sh->data_size);
    if (end - begin != need)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: tensor '%s' data_offsets [%llu, %llu] hold %llu bytes but shape "
                             "%s in %s needs %llu",
                             label, name, (unsigned long long)begin, (unsigned long long)end,
                             (unsigned long long)(end - begin), shape_s, rlx_dtype_name(t->dtype),
                             (unsigned long long)need);
    t->n_bytes = need;
    t->offset = begin;
    t->shard = shard_idx;
    t->name = str_dup(name);
    if (!t->name)
        return oom(err, label);
    return RLX_OK;
}

static int cmp_by_offset(const void *a, const void *b)
{
    const rlx_st_tensor *x = *(rlx_st_tensor *const *)a, *y = *(rlx_st_tensor *const *)b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    if (x->n_bytes != y->n_bytes)
        return x->n_bytes < y->n_bytes ? -1 : 1;
    return 0;
}

static rlx_status check_overlap(rlx_st_tensor *ts, uint64_t n, const char *label, rlx_error **err)
{
    if (n < 2)
        return RLX_OK;
    rlx_st_tensor **v = malloc((size_t)n * sizeof *v);
    if (!v)
        return oom(err, label);
    size_t m = 0;
    for (uint64_t i = 0; i < n; i++)
        if (ts[i].n_bytes > 0) /* empty tensors occupy nothing */
            v[m++] = &ts[i];
    qsort(v, m, sizeof *v, cmp_by_offset);
    rlx_status s = RLX_OK;
    for (size_t i = 1; i < m; i++) {
        const rlx_st_tensor *a = v[i - 1], *b = v[i];
        if (b->offset < a->offset + a->n_bytes) {
            s = rlx_error_set(err, RLX_ERR_FORMAT,
                              "%s: tensors '%s' data_offsets [%llu, %llu] and '%s' [%llu, %llu] "
                              "overlap",
                              label, a->name, (unsigned long long)a->offset,
                              (unsigned long long)(a->offset + a->n_bytes), b->name,
                              (unsigned long long)b->offset,
                              (unsigned long long)(b->offset + b->n_bytes));
            break;
        }
    }
    free(v);
    return s;
}

static rlx_status add_metadata(rlx_safetensors *st, const char *label, struct json_object *jm,
                               rlx_error **err)
{
    if (!json_object_is_type(jm, json_type_object))
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s: __metadata__ is %s, not an object", label,
                             json_type_label(jm));
    json_object_object_foreach(jm, key, val)
    {
        if (!json_object_is_type(val, json_type_string))
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s: __metadata__ entry '%s' is %s, not a string", label, key,
                                 json_type_label(val));
        if (!grow((void **)&st->meta, &st->cap_meta, st->n_meta + 1, sizeof *st->meta))
            return oom(err, label);
        st_meta *m = &st->meta[st->n_meta];
        m->key = str_dup(key);
        m->value = str_dup(json_object_get_string(val));
        if (!m->key || !m->value) {
            free(m->key);
            free(m->value);
            return oom(err, label);
        }
        st->n_meta++;
    }
    return RLX_OK;
}

/* Parse the header of shard `idx` (already mapped) and append its tensors. */
static rlx_status parse_shard(rlx_safetensors *st, uint32_t idx, const uint8_t *bytes, size_t size,
                              rlx_error **err)
{
    st_shard *sh = &st->shards[idx];
    const char *label = sh->label;
    if (size < 8)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: file is %zu bytes, too short for the 8-byte header length", label,
                             size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | bytes[i];
    if (hlen > size - 8)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: header length %llu runs past the end of the %zu-byte file "
                             "(truncated, or not a safetensors file)",
                             label, (unsigned long long)hlen, size);
    if (hlen > RLX_ST_MAX_HEADER_BYTES)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: header length %llu is over the %d-byte limit", label,
                             (unsigned long long)hlen, RLX_ST_MAX_HEADER_BYTES);
    if (hlen < 2)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: header length %llu is too small to hold a JSON object", label,
                             (unsigned long long)hlen);
    sh->data = bytes + 8 + hlen;
    sh->data_size = size - 8 - hlen;

    struct json_object *root = NULL;
    rlx_status s = parse_json((const char *)bytes + 8, (size_t)hlen, label, "header", &root, err);
    if (s != RLX_OK)
        return s;
    if (!json_object_is_type(root, json_type_object)) {
        s = rlx_error_set(err, RLX_ERR_FORMAT, "%s: header is %s, not a JSON object", label,
                          json_type_label(root));
        json_object_put(root);
        return s;
    }
    uint64_t first = st->n_tensors;
    json_object_object_foreach(root, key, val)
    {
        if (strcmp(key, "__metadata__") == 0) {
            s = add_metadata(st, label, val, err);
            if (s != RLX_OK)
                break;
            continue;
        }
        if (!grow((void **)&st->tensors, &st->cap_tensors, st->n_tensors + 1,
                  sizeof *st->tensors)) {
            s = oom(err, label);
            break;
        }
        s = parse_tensor(sh, idx, key, val, &st->tensors[st->n_tensors], err);
        if (s != RLX_OK)
            break;
        st->n_tensors++;
    }
    json_object_put(root);
    if (s == RLX_OK && st->n_tensors > first)
        s = check_overlap(st->tensors + first, st->n_tensors - first, label, err);
    return s;
}

/* Index every tensor by name; a name seen twice (across shards) is an error. */
static rlx_status build_index(rlx_safetensors *st, rlx_error **err)
{
    if (!hash_init(&st->tensor_index, st->n_tensors) || !hash_init(&st->meta_index, st->n_meta))
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory indexing %llu tensors",
                             (unsigned long long)st->n_tensors);
    for (uint64_t i = 0; i < st->n_tensors; i++) {
        size_t slot;
        size_t prev =
            hash_lookup(&st->tensor_index, st->tensors[i].name, tensor_key, st->tensors, &slot);
        if (prev != SIZE_MAX) {
            const rlx_st_tensor *a = &st->tensors[prev], *b = &st->tensors[i];
            return rlx_error_set(err, RLX_ERR_FORMAT, "tensor '%s' appears in both %s and %s",
                                 b->name, st->shards[a->shard].label, st->shards[b->shard].label);
        }
        st->tensor_index.slots[slot] = (size_t)i + 1;
    }
    /* Shards usually repeat the same metadata; keep the first shard's entry. */
    uint64_t kept = 0;
    for (uint64_t i = 0; i < st->n_meta; i++) {
        size_t slot;
        if (hash_lookup(&st->meta_index, st->meta[i].key, meta_key, st->meta, &slot) != SIZE_MAX) {
            free(st->meta[i].key);
            free(st->meta[i].value);
            continue;
        }
        st->meta[kept] = st->meta[i];
        st->meta_index.slots[slot] = (size_t)kept + 1;
        kept++;
    }
    st->n_meta = kept;
    return RLX_OK;
}

static rlx_safetensors *st_new(uint32_t n_shards)
{
    rlx_safetensors *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    st->shards = calloc(n_shards ? n_shards : 1, sizeof *st->shards);
    if (!st->shards) {
        free(st);
        return NULL;
    }
    st->n_shards = n_shards;
    return st;
}

static rlx_status shard_set_path(st_shard *sh, const char *path)
{
    sh->path = str_dup(path);
    if (!sh->path)
        return RLX_ERR_NO_MEMORY;
    sh->label = path_basename(sh->path);
    if (!*sh->label)
        sh->label = sh->path;
    return RLX_OK;
}

/* Map a file read-only into shard `sh`. */
static rlx_status map_file(st_shard *sh, rlx_error **err)
{
    int fd = open(sh->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return rlx_error_set(err, RLX_ERR_IO, "cannot open %s: %s", sh->path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return rlx_error_set(err, RLX_ERR_IO, "cannot stat %s: %s", sh->path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return rlx_error_set(err, RLX_ERR_IO, "%s is not a regular file", sh->path);
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED, "%s is too large to map", sh->path);
    }
    size_t size = (size_t)sb.st_size;
    if (size < 8) {
        close(fd);
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: file is %zu bytes, too short for the 8-byte header length",
                             sh->label, size);
    }
    void *p = rlx_map_file(fd, size);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED)
        return rlx_error_set(err, RLX_ERR_IO, "cannot map %s: %s", sh->path, strerror(e));
    sh->map = p;
    sh->map_size = size;
    return RLX_OK;
}

rlx_status rlx_safetensors_open_memory(const void *data, size_t size, const char *name,
                                       rlx_safetensors **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!out || (!data && size > 0))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "rlx_safetensors_open_memory: data and out must not be NULL");
    rlx_safetensors *st = st_new(1);
    if (!st || shard_set_path(&st->shards[0], name ? name : "<memory>") != RLX_OK) {
        rlx_safetensors_close(st);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    }
    rlx_status s = parse_shard(st, 0, data, data ? size : 0, err);
    if (s == RLX_OK)
        s = build_index(st, err);
    if (s != RLX_OK) {
        rlx_safetensors_close(st);
        return s;
    }
    *out = st;
    return RLX_OK;
}

static rlx_status open_single(const char *path, rlx_safetensors **out, rlx_error **err)
{
    rlx_safetensors *st = st_new(1);
    if (!st || shard_set_path(&st->shards[0], path) != RLX_OK) {
        rlx_safetensors_close(st);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    }
    rlx_status s = map_file(&st->shards[0], err);
    if (s == RLX_OK)
        s = parse_shard(st, 0, st->shards[0].map, st->shards[0].map_size, err);
    if (s == RLX_OK)
        s = build_index(st, err);
    if (s != RLX_OK) {
        rlx_safetensors_close(st);
        return s;
    }
    *out = st;
    return RLX_OK;
}

/* Read a whole (small) file: the index json. */
static rlx_status read_small_file(const char *path, char **out, size_t *out_size, rlx_error **err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return rlx_error_set(err, RLX_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            if (cap >= RLX_ST_MAX_HEADER_BYTES) {
                free(buf);
                fclose(f);
                return rlx_error_set(err, RLX_ERR_FORMAT, "%s: index is over the %d-byte limit",
                                     path_basename(path), RLX_ST_MAX_HEADER_BYTES);
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0)
            break;
    }
    int failed = ferror(f);
    fclose(f);
    if (!buf)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory reading %s", path);
    if (failed) {
        free(buf);
        return rlx_error_set(err, RLX_ERR_IO, "cannot read %s", path);
    }
    *out = buf;
    *out_size = n;
    return RLX_OK;
}

/* A shard name from an index must be a plain file name in the index's folder. */
static bool valid_shard_name(const char *s)
{
    return *s && strchr(s, '/') == NULL && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static rlx_status open_index(const char *path, rlx_safetensors **out, rlx_error **err)
{
    const char *label = path_basename(path);
    char *text = NULL;
    size_t len = 0;
    rlx_status s = read_small_file(path, &text, &len, err);
    if (s != RLX_OK)
        return s;
    struct json_object *root = NULL;
    s = parse_json(text, len, label, "index", &root, err);
    free(text);
    if (s != RLX_OK)
        return s;

    char *dir = NULL;
    char **names = NULL; /* distinct shard file names, in order of first use */
    uint64_t n_names = 0, cap_names = 0;
    st_hash name_set = {0};
    rlx_safetensors *st = NULL;
    struct json_object *wm = NULL;

    if (!json_object_is_type(root, json_type_object)) {
        s = rlx_error_set(err, RLX_ERR_FORMAT, "%s: index is %s, not a JSON object", label,
                          json_type_label(root));
        goto done;
    }
    if (!json_object_object_get_ex(root, "weight_map", &wm)) {
        s = rlx_error_set(err, RLX_ERR_FORMAT, "%s: index has no weight_map", label);
        goto done;
    }
    if (!json_object_is_type(wm, json_type_object)) {
        s = rlx_error_set(err, RLX_ERR_FORMAT, "%s: weight_map is %s, not an object", label,
                          json_type_label(wm));
        goto done;
    }
    int n_entries = json_object_object_length(wm);
    if (n_entries == 0) {
        s = rlx_error_set(err, RLX_ERR_FORMAT, "%s: weight_map is empty", label);
        goto done;
    }
    if (!hash_init(&name_set, (uint64_t)n_entries)) {
        s = oom(err, label);
        goto done;
    }
    json_object_object_foreach(wm, tname, jfile)
    {
        if (!json_object_is_type(jfile, json_type_string) ||
            !valid_shard_name(json_object_get_string(jfile))) {
            s = rlx_error_set(err, RLX_ERR_FORMAT,
                              "%s: weight_map entry '%s' is %.80s, not a file name in the index's "
                              "folder",
                              label, tname, json_object_to_json_string(jfile));
            goto done;
        }
        const char *file = json_object_get_string(jfile);
        size_t slot;
        if (hash_lookup(&name_set, file, cstr_key, names, &slot) != SIZE_MAX)
            continue;
        if (!grow((void **)&names, &cap_names, n_names + 1, sizeof *names) ||
            !(names[n_names] = str_dup(file))) {
            s = oom(err, label);
            goto done;
        }
        name_set.slots[slot] = (size_t)n_names + 1;
        n_names++;
    }
    if (n_names > UINT32_MAX) {
        s = rlx_error_set(err, RLX_ERR_UNSUPPORTED, "%s: index names too many shards", label);
        goto done;
    }

    dir = path_dirname(path);
    st = st_new((uint32_t)n_names);
    if (!dir || !st) {
        s = oom(err, label);
        goto done;
    }
    for (uint32_t i = 0; i < st->n_shards; i++) {
        char *p = path_join(dir, names[i]);
        if (!p || shard_set_path(&st->shards[i], p) != RLX_OK) {
            free(p);
            s = oom(err, label);
            goto done;
        }
        free(p);
        s = map_file(&st->shards[i], err);
        if (s == RLX_OK)
            s = parse_shard(st, i, st->shards[i].map, st->shards[i].map_size, err);
        if (s != RLX_OK) {
            rlx_error_prefix(err, "%s names shard %s: ", label, names[i]);
            goto done;
        }
    }
    s = build_index(st, err);
    if (s != RLX_OK)
        goto done;
    /* Every tensor the index lists must be where the index says it is. */
    json_object_object_foreach(wm, tname2, jfile2)
    {
        const char *file = json_object_get_string(jfile2);
        const rlx_st_tensor *t = rlx_safetensors_find(st, tname2);
        if (!t) {
            s = rlx_error_set(err, RLX_ERR_FORMAT,
                              "%s: weight_map puts tensor '%s' in %s, but no shard holds it", label,
                              tname2, file);
            goto done;
        }
        /* Shard labels are the names from the index (no '/' allowed in them). */
        if (strcmp(file, st->shards[t->shard].label) != 0) {
            s = rlx_error_set(err, RLX_ERR_FORMAT,
                              "%s: weight_map puts tensor '%s' in %s, but it is in %s", label,
                              tname2, file, st->shards[t->shard].label);
            goto done;
        }
    }

done:
    json_object_put(root);
    for (uint64_t i = 0; i < n_names; i++)
        free(names[i]);
    free(names);
    hash_free(&name_set);
    free(dir);
    if (s != RLX_OK) {
        rlx_safetensors_close(st);
        return s;
    }
    *out = st;
    return RLX_OK;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static bool is_regular(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

rlx_status rlx_safetensors_open(const char *path, rlx_safetensors **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!path || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "rlx_safetensors_open: path and out must not be NULL");
    struct stat sb;
    if (stat(path, &sb) != 0)
        return rlx_error_set(err, RLX_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return ends_with(path, ".json") ? open_index(path, out, err) : open_single(path, out, err);

    /* A folder: a single-file checkpoint wins over an index, as in transformers. */
    char *single = path_join(path, "model.safetensors");
    char *index = path_join(path, "model.safetensors.index.json");
    rlx_status s;
    if (!single || !index)
        s = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    else if (is_regular(single))
        s = open_single(single, out, err);
    else if (is_regular(index))
        s = open_index(index, out, err);
    else
        s = rlx_error_set(err, RLX_ERR_IO,
                          "%s holds neither model.safetensors nor model.safetensors.index.json",
                          path);
    free(single);
    free(index);
    return s;
}

void rlx_safetensors_close(rlx_safetensors *st)
{
    if (!st)
        return;
    for (uint32_t i = 0; i < st->n_shards; i++) {
        if (st->shards[i].map)
            munmap(st->shards[i].map, st->shards[i].map_size);
        free(st->shards[i].path);
    }
    free(st->shards);
    for (uint64_t i = 0; i < st->n_tensors; i++)
        free(st->tensors[i].name);
    free(st->tensors);
    for (uint64_t i = 0; i < st->n_meta; i++) {
        free(st->meta[i].key);
        free(st->meta[i].value);
    }
    free(st->meta);
    hash_free(&st->tensor_index);
    hash_free(&st->meta_index);
    free(st);
}

uint32_t rlx_safetensors_n_shards(const rlx_safetensors *st)
{
    return st ? st->n_shards : 0;
}

const char *rlx_safetensors_shard_path(const rlx_safetensors *st, uint32_t i)
{
    return st && i < st->n_shards ? st->shards[i].path : NULL;
}

uint64_t rlx_safetensors_n_tensors(const rlx_safetensors *st)
{
    return st ? st->n_tensors : 0;
}

const rlx_st_tensor *rlx_safetensors_tensor_at(const rlx_safetensors *st, uint64_t i)
{
    return st && i < st->n_tensors ? &st->tensors[i] : NULL;
}

const rlx_st_tensor *rlx_safetensors_find(const rlx_safetensors *st, const char *name)
{
    if (!st || !name)
        return NULL;
    size_t i = hash_lookup(&st->tensor_index, name, tensor_key, st->tensors, NULL);
    return i == SIZE_MAX ? NULL : &st->tensors[i];
}

const void *rlx_safetensors_data(const rlx_safetensors *st, const rlx_st_tensor *t)
{
    if (!st || !t || t->shard >= st->n_shards)
        return NULL;
    return st->shards[t->shard].data + t->offset;
}

uint64_t rlx_safetensors_n_metadata(const rlx_safetensors *st)
{
    return st ? st->n_meta : 0;
}

void rlx_safetensors_metadata_at(const rlx_safetensors *st, uint64_t i, const char **key,
                                 const char **value)
{
    bool ok = st && i < st->n_meta;
    if (key)
        *key = ok ? st->meta[i].key : NULL;
    if (value)
        *value = ok ? st->meta[i].value : NULL;
}

const char *rlx_safetensors_metadata(const rlx_safetensors *st, const char *key)
{
    if (!st || !key)
        return NULL;
    size_t i = hash_lookup(&st->meta_index, key, meta_key, st->meta, NULL);
    return i == SIZE_MAX ? NULL : st->meta[i].value;
}
