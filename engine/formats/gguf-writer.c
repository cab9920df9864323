/* GGUF v3 writer. Keys and tensor infos are kept in insertion order; the
 * header is serialized in one buffer and the tensor data follows, each
 * tensor starting at a multiple of the alignment. Writing to a path goes
 * through a temporary file in the same folder so a crash never leaves a
 * half-written model under the final name.
 */
#include "engine/formats/gguf.h"
#include "engine/formats/gguf-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* llama.cpp rejects tensor names of GGML_MAX_NAME (64) bytes or more. */
#define MAX_TENSOR_NAME 63

typedef struct wkv {
    char *key;
    size_t key_len;
    rlx_gguf_type type;
    uint8_t *enc; /* the value exactly as it follows the type field */
    size_t enc_len;
} wkv;

typedef struct wtensor {
    char *name;
    rlx_dtype dtype;
    uint32_t n_dims;
    uint64_t ne[RLX_GGUF_MAX_DIMS];
    const void *data;
    void *owned; /* the copy made by add_tensor, or NULL for a reference */
    uint64_t n_bytes;
    rlx_gguf_tensor_gen_fn gen; /* add_tensor_gen: data produced at write time */
    void *gen_user;
} wtensor;

struct rlx_gguf_writer {
    wkv *kvs;
    size_t n_kv, cap_kv;
    wtensor *tensors;
    size_t n_tensors, cap_tensors;
    uint32_t alignment;
    rlx_status bad;
    char *bad_msg;
};

static rlx_status wfail(rlx_gguf_writer *w, rlx_status code, const char *fmt, ...) RLX_PRINTF(3, 4);

static rlx_status wfail(rlx_gguf_writer *w, rlx_status code, const char *fmt, ...)
{
    if (!w || w->bad != RLX_OK)
        return code;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    w->bad = code;
    w->bad_msg = strdup(msg);
    return code;
}

static void put_le(uint8_t *p, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

rlx_gguf_writer *rlx_gguf_writer_create(void)
{
    rlx_gguf_writer *w = calloc(1, sizeof *w);
    if (w)
        w->alignment = RLX_GGUF_DEFAULT_ALIGNMENT;
    return w;
}

void rlx_gguf_writer_free(rlx_gguf_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kvs[i].key);
        free(w->kvs[i].enc);
    }
    for (size_t i = 0; i < w->n_tensors; i++) {
        free(w->tensors[i].name);
        free(w->tensors[i].owned);
    }
    free(w->kvs);
    free(w->tensors);
    free(w->bad_msg);
    free(w);
}

const char *rlx_gguf_writer_error(const rlx_gguf_writer *w)
{
    if (!w || w->bad == RLX_OK)
        return NULL;
    return w->bad_msg ? w->bad_msg : "out of memory";
}

static const char *key_for_msg(char *buf, size_t cap, const char *key, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 4 < cap; i++)
        buf[o++] = ((unsigned char)key[i] >= 0x20 && (unsigned char)key[i] < 0x7f) ? key[i] : '?';
    buf[o] = '\0';
    return buf;
}

/* Store (or replace) a key whose encoded value is enc; takes ownership of enc. */
static rlx_status put_kv(rlx_gguf_writer *w, const char *key, size_t key_len, rlx_gguf_type type,
                         uint8_t *enc, size_t enc_len)
{
    char kb[96];
    static const char align_key[] = "general.alignment";
    if (key_len == sizeof align_key - 1 && memcmp(key, align_key, key_len) == 0) {
        uint32_t a = 0;
        if (type == RLX_GGUF_TYPE_UINT32)
            a = (uint32_t)enc[0] | (uint32_t)enc[1] << 8 | (uint32_t)enc[2] << 16 |
                (uint32_t)enc[3] << 24;
        if (type != RLX_GGUF_TYPE_UINT32 || a == 0 || (a & (a - 1)) != 0) {
            free(enc);
            return wfail(w, RLX_ERR_INVALID_ARG,
                         "general.alignment must be a uint32 power of two (got %s %" PRIu32 ")",
                         rlx_gguf_type_name(type), a);
        }
        w->alignment = a;
    }
    for (size_t i = 0; i < w->n_kv; i++) {
        wkv *kv = &w->kvs[i];
        if (kv->key_len == key_len && memcmp(kv->key, key, key_len) == 0) {
            free(kv->enc);
            kv->type = type;
            kv->enc = enc;
            kv->enc_len = enc_len;
            return RLX_OK;
        }
    }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? w->cap_kv * 2 : 16;
        wkv *p = realloc(w->kvs, cap * sizeof *p);
        if (!p) {
            free(enc);
            return wfail(w, RLX_ERR_NO_MEMORY, "out of memory storing key '%s'",
                         key_for_msg(kb, sizeof kb, key, key_len));
        }
        w->kvs = p;
        w->cap_kv = cap;
    }
    char *k = malloc(key_len + 1);
    if (!k) {
        free(enc);
        return wfail(w, RLX_ERR_NO_MEMORY, "out of memory");
    }
    memcpy(k, key, key_len);
    k[key_len] = '\0';
    w->kvs[w->n_kv++] = (wkv){k, key_len, type, enc, enc_len};
    return RLX_OK;
}

static rlx_status check_key(rlx_gguf_writer *w, const char *key)
{
    if (!w)
        return RLX_ERR_INVALID_ARG;
    if (!key || !key[0])
        return wfail(w, RLX_ERR_INVALID_ARG, "a key name is NULL or empty");
    return RLX_OK;
}

static rlx_status set_scalar(rlx_gguf_writer *w, const char *key, rlx_gguf_type t, uint64_t bits)
{
    rlx_status s = check_key(w, key);
    if (s != RLX_OK)
        return s;
    unsigned n = (unsigned)rlx_gguf_type_fixed_size(t);
    uint8_t *enc = malloc(n);
    if (!enc)
        return wfail(w, RLX_ERR_NO_MEMORY, "out of memory");
    put_le(enc, bits, n);
    return put_kv(w, key, strlen(key), t, enc, n);
}

void rlx_gguf_writer_set_alignment(rlx_gguf_writer *w, uint32_t alignment)
{
    if (!w)
        return;
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
        wfail(w, RLX_ERR_INVALID_ARG, "alignment %" PRIu32 " is not a power of two", alignment);
        return;
    }
    set_scalar(w, "general.alignment", RLX_GGUF_TYPE_UINT32, alignment);
}

rlx_status rlx_gguf_writer_set_u32(rlx_gguf_writer *w, const char *key, uint32_t v)
{
    return set_scalar(w, key, RLX_GGUF_TYPE_UINT32, v);
}

rlx_status rlx_gguf_writer_set_i32(rlx_gguf_writer *w, const char *key, int32_t v)
{
    return set_scalar(w, key, RLX_GGUF_TYPE_INT32, (uint32_t)v);
}

rlx_status rlx_gguf_writer_set_u64(rlx_gguf_writer *w, const char *key, uint64_t v)
{
    return set_scalar(w, key, RLX_GGUF_TYPE_UINT64, v);
}

rlx_status rlx_gguf_writer_set_i64(rlx_gguf_writer *w, const char *key, int64_t v)
{
    return set_scalar(w, key, RLX_GGUF_TYPE_INT64, (uint64_t)v);
}

rlx_status rlx_gguf_writer_set_f32(rlx_gguf_writer *w, const char *key, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, 4);
    return set_scalar(w, key, RLX_GGUF_TYPE_FLOAT32, bits);
}

rlx_status rlx_gguf_writer_set_f64(rlx_gguf_writer *w, const char *key, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, 8);
    return set_scalar(w, key, RLX_GGUF_TYPE_FLOAT64, bits);
}

rlx_status rlx_gguf_writer_set_bool(rlx_gguf_writer *w, const char *key, bool v)
{
    return set_scalar(w, key, RLX_GGUF_TYPE_BOOL, v ? 1 : 0);
}

static rlx_status set_string_n(rlx_gguf_writer *w, const char *key, size_t key_len, const char *str,
                               uint64_t len)
{
    if (len > SIZE_MAX - 8)
        return wfail(w, RLX_ERR_INVALID_ARG, "a string value is too long");
    uint8_t *enc = malloc(8 + (size_t)len);
    if (!enc)
        return wfail(w, RLX_ERR_NO_MEMORY, "out of memory");
    put_le(enc, len, 8);
    if (len)
        memcpy(enc + 8, str, (size_t)len);
    return put_kv(w, key, key_len, RLX_GGUF_TYPE_STRING, enc, 8 + (size_t)len);
}

rlx_status rlx_gguf_writer_set_str(rlx_gguf_writer *w, const char *key, const char *v)
{
    rlx_status s = check_key(w, key);
    if (s != RLX_OK)
        return s;
    if (!v)
        return wfail(w, RLX_ERR_INVALID_ARG, "key '%s': the string is NULL", key);
    return set_string_n(w, key, strlen(key), v, strlen(v));
}

/* An array value: u32 element type, u64 count, then `len` element bytes. */
static rlx_status set_array_n(rlx_gguf_writer *w, const char *key, size_t key_len,
                              rlx_gguf_type elem, uint64_t count, const void *data, uint64_t len)
{
    if (len > SIZE_MAX - 12)
        return wfail(w, RLX_ERR_INVALID_ARG, "an array value is too large");
    uint8_t *enc = malloc(12 + (size_t)len);
    if (!enc)
        return wfail(w, RLX_ERR_NO_MEMORY, "out of memory");
    put_le(enc, (uint64_t)elem, 4);
    put_le(enc + 4, count, 8);
    if (len)
        memcpy(enc + 12, data, (size_t)len);
    return put_kv(w, key, key_len, RLX_GGUF_TYPE_ARRAY, enc, 12 + (size_t)len);
}

rlx_status rlx_gguf_writer_set_arr(rlx_gguf_writer *w, const char *key, rlx_gguf_type elem_type,
                                   const void *data, uint64_t count)
{
    rlx_status s = check_key(w, key);
    if (s != RLX_OK)
        return s;
    uint64_t fs = rlx_gguf_type_fixed_size(elem_type);
    if (fs == 0)
        return wfail(w, RLX_ERR_INVALID_ARG,
                     "key '%s': set_arr takes scalar elements, not %s (use set_str_arr or "
                     "set_value)",
                     key, rlx_gguf_type_name(elem_type));
    if (count > UINT64_MAX / fs || (count && !data))
        return wfail(w, RLX_ERR_INVALID_ARG, "key '%s': bad array data or count", key);
    return set_array_n(w, key, strlen(key), elem_type, count, data, count * fs);
}

rlx_status rlx_gguf_writer_set_str_arr(rlx_gguf_writer *w, const char *key, const char *const *strs,
                                       uint64_t count)
{
    rlx_status s = check_key(w, key);
    if (s != RLX_OK)
        return s;
    if (count && !strs)
        return wfail(w, RLX_ERR_INVALID_ARG, "key '%s': the string array is NULL", key);
    uint64_t total = 0;
    for (uint64_t i = 0; i < count; i++) {
        if (!strs[i])
            return wfail(w, RLX_ERR_INVALID_ARG, "key '%s': string %" PRIu64 " is NULL", key, i);
        uint64_t n = strlen(strs[i]);
        if (total > SIZE_MAX - 12 - 8 - n)
            return wfail(w, RLX_ERR_INVALID_ARG, "key '%s': the strings are too large", key);
        total += 8 + n;
    }
    uint8_t *enc = malloc(12 + (size_t)total);
    if (!enc)
        return wfail(w, RLX_ERR_NO_MEMORY, "out of memory");
    put_le(enc, RLX_GGUF_TYPE_STRING, 4);
    put_le(enc + 4, count, 8);
    size_t o = 12;
    for (uint64_t i = 0; i < count; i++) {
        size_t n = strlen(strs[i]);
        put_le(enc + o, n, 8);
        memcpy(enc + o + 8, strs[i], n);
        o += 8 + n;
    }
    return put_kv(w, key, strlen(key), RLX_GGUF_TYPE_ARRAY, enc, o);
}

static rlx_status set_value_n(rlx_gguf_writer *w, const char *key, size_t key_len,
                              const rlx_gguf_value *v)
{
    char kb[96];
    const char *kn = key_for_msg(kb, sizeof kb, key, key_len);
    if (!v)
        return wfail(w, RLX_ERR_INVALID_ARG, "key '%s': the value is NULL", kn);
    uint64_t bits = 0;
    bool fits = true;
    switch (v->type) {
    case RLX_GGUF_TYPE_UINT8:
        fits = v->v.u64 <= UINT8_MAX;
        bits = v->v.u64;
        break;
    case RLX_GGUF_TYPE_UINT16:
        fits = v->v.u64 <= UINT16_MAX;
        bits = v->v.u64;
        break;
    case RLX_GGUF_TYPE_UINT32:
        fits = v->v.u64 <= UINT32_MAX;
        bits = v->v.u64;
        break;
    case RLX_GGUF_TYPE_UINT64:
        bits = v->v.u64;
        break;
    case RLX_GGUF_TYPE_BOOL:
        bits = v->v.u64 != 0;
        break;
    case RLX_GGUF_TYPE_INT8:
        fits = v->v.i64 >= INT8_MIN && v->v.i64 <= INT8_MAX;
        bits = (uint64_t)v->v.i64;
        break;
    case RLX_GGUF_TYPE_INT16:
        fits = v->v.i64 >= INT16_MIN && v->v.i64 <= INT16_MAX;
        bits = (uint64_t)v->v.i64;
        break;
    case RLX_GGUF_TYPE_INT32:
        fits = v->v.i64 >= INT32_MIN && v->v.i64 <= INT32_MAX;
        bits = (uint64_t)v->v.i64;
        break;
    case RLX_GGUF_TYPE_INT64:
        bits = (uint64_t)v->v.i64;
        break;
    case RLX_GGUF_TYPE_FLOAT32: {
        float f = (float)v->v.f64;
        uint32_t b;
        memcpy(&b, &f, 4);
        bits = b;
        break;
    }
    case RLX_GGUF_TYPE_FLOAT64:
        memcpy(&bits, &v->v.f64, 8);
        break;
    case RLX_GGUF_TYPE_STRING:
        if (v->v.str.len && !v->v.str.ptr)
            return wfail(w, RLX_ERR_INVALID_ARG, "key '%s': the string is NULL", kn);
        return set_string_n(w, key, key_len, v->v.str.ptr, v->v.str.len);
    case RLX_GGUF_TYPE_ARRAY: {
        rlx_error *e = NULL;
        if (v->v.arr.data_len && !v->v.arr.data)
            return wfail(w, RLX_ERR_INVALID_ARG, "key '%s': the array data is NULL", kn);
        char what[128];
        snprintf(what, sizeof what, "key '%s'", kn);
        if (rlx_gguf_check_array_bytes(v->v.arr.elem_type, v->v.arr.count, v->v.arr.data,
                                       v->v.arr.data_len, what, &e) != RLX_OK) {
            rlx_status s = wfail(w, RLX_ERR_INVALID_ARG, "%s", rlx_error_message(e));
            rlx_error_free(e);
            return s;
        }
        return set_array_n(w, key, key_len, v->v.arr.elem_type, v->v.arr.count, v->v.arr.data,
                           v->v.arr.data_len);
    }
    default:
        return wfail(w, RLX_ERR_INVALID_ARG, "key '%s': value type %u is unknown", kn,
                     (unsigned)v->type);
    }
    if (!fits)
        return wfail(w, RLX_ERR_INVALID_ARG, "key '%s': the value does not fit %s", kn,
                     rlx_gguf_type_name(v->type));
    unsigned n = (unsigned)rlx_gguf_type_fixed_size(v->type);
    uint8_t *enc = malloc(n);
    if (!enc)
        return wfail(w, RLX_ERR_NO_MEMORY, "out of memory");
    put_le(enc, bits, n);
    return put_kv(w, key, key_len, v->type, enc, n);
}

rlx_status rlx_gguf_writer_set_value(rlx_gguf_writer *w, const char *key, const rlx_gguf_value *v)
{
    rlx_status s = check_key(w, key);
    if (s != RLX_OK)
        return s;
    return set_value_n(w, key, strlen(key), v);
}

rlx_status rlx_gguf_writer_copy_kv(rlx_gguf_writer *w, const rlx_gguf *src, rlx_error **err)
{
    if (!w || !src)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_gguf_writer_copy_kv: NULL argument");
    for (uint64_t i = 0; i < rlx_gguf_n_kv(src); i++) {
        const rlx_gguf_kv *kv = rlx_gguf_kv_at(src, i);
        if (kv->key.len == 0 || kv->key.len > SIZE_MAX / 2)
            continue; /* an empty key cannot be set again; it carries nothing */
        rlx_status s = set_value_n(w, kv->key.ptr, (size_t)kv->key.len, &kv->value);
        if (s != RLX_OK)
            return rlx_error_set(err, s, "copying keys from %s: %s", rlx_gguf_path(src),
                                 rlx_gguf_writer_error(w));
    }
    return RLX_OK;
}

static rlx_status add_tensor(rlx_gguf_writer *w, const char *name, rlx_dtype dtype, uint32_t n_dims,
                             const uint64_t *ne, const void *data, uint64_t n_bytes, bool copy,
                             rlx_gguf_tensor_gen_fn gen, void *gen_user)
{
    if (!w)
        return RLX_ERR_INVALID_ARG;
    if (!name || !name[0])
        return wfail(w, RLX_ERR_INVALID_ARG, "a tensor name is NULL or empty");
    size_t name_len = strlen(name);
    if (name_len > MAX_TENSOR_NAME)
        return wfail(w, RLX_ERR_INVALID_ARG,
                     "tensor name '%s' is %zu bytes long; GGUF readers accept at most %d", name,
                     name_len, MAX_TENSOR_NAME);
    if (rlx_dtype_to_ggml(dtype) < 0)
        return wfail(w, RLX_ERR_INVALID_ARG, "tensor '%s': dtype %s has no GGUF type id", name,
                     rlx_dtype_name(dtype));
    if (n_dims < 1 || n_dims > RLX_GGUF_MAX_DIMS || !ne)
        return wfail(w, RLX_ERR_INVALID_ARG, "tensor '%s': n_dims %" PRIu32 " is not 1 to %d", name,
                     n_dims, RLX_GGUF_MAX_DIMS);
    /* as in the reader: a zero anywhere makes an empty tensor, however
     * large the other dims */
    uint64_t rows = 1;
    bool zero = false, overflow = false;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] > (uint64_t)INT64_MAX)
            return wfail(w, RLX_ERR_INVALID_ARG, "tensor '%s': dimension %" PRIu32 " is too large",
                         name, d);
        if (ne[d] == 0)
            zero = true;
        else if (d > 0 && rows > UINT64_MAX / ne[d])
            overflow = true;
        else if (d > 0)
            rows *= ne[d];
    }
    if (zero)
        rows = 0;
    else if (overflow)
        return wfail(w, RLX_ERR_INVALID_ARG, "tensor '%s': the shape overflows", name);
    uint64_t row;
    if (rlx_dtype_row_bytes(dtype, ne[0], &row) != RLX_OK)
        return wfail(w, RLX_ERR_INVALID_ARG,
                     "tensor '%s': ne[0] = %" PRIu64 " is not a multiple of the %s block size",
                     name, ne[0], rlx_dtype_name(dtype));
    if (rows && row > UINT64_MAX / rows)
        return wfail(w, RLX_ERR_INVALID_ARG, "tensor '%s': the size overflows", name);
    if (row * rows != n_bytes)
        return wfail(w, RLX_ERR_INVALID_ARG,
                     "tensor '%s': %" PRIu64 " bytes given, but its shape and dtype need %" PRIu64,
                     name, n_bytes, row * rows);
    if (n_bytes && !data && !gen)
        return wfail(w, RLX_ERR_INVALID_ARG, "tensor '%s': the data is NULL", name);
    if (n_bytes > SIZE_MAX)
        return wfail(w, RLX_ERR_INVALID_ARG, "tensor '%s' is too large", name);
    for (size_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return wfail(w, RLX_ERR_INVALID_ARG, "tensor '%s' is added twice", name);
    if (w->n_tensors == w->cap_tensors) {
        size_t cap = w->cap_tensors ? w->cap_tensors * 2 : 16;
        wtensor *p = realloc(w->tensors, cap * sizeof *p);
        if (!p)
            return wfail(w, RLX_ERR_NO_MEMORY, "out of memory");
        w->tensors = p;
        w->cap_tensors = cap;
    }
    wtensor t = {.dtype = dtype,
                 .n_dims = n_dims,
                 .data = data,
                 .n_bytes = n_bytes,
                 .gen = gen,
                 .gen_user = gen_user};
    for (uint32_t d = 0; d < RLX_GGUF_MAX_DIMS; d++)
        t.ne[d] = d < n_dims ? ne[d] : 1;
    t.name = strdup(name);
    if (copy && n_bytes) {
        t.owned = malloc((size_t)n_bytes);
        if (t.owned)
            memcpy(t.owned, data, (size_t)n_bytes);
        t.data = t.owned;
    }
    if (!t.name || (copy && n_bytes && !t.owned)) {
        free(t.name);
        free(t.owned);
        return wfail(w, RLX_ERR_NO_MEMORY, "out of memory copying tensor '%s'", name);
    }
    w->tensors[w->n_tensors++] = t;
    return RLX_OK;
}

rlx_status rlx_gguf_writer_add_tensor(rlx_gguf_writer *w, const char *name, rlx_dtype dtype,
                                      uint32_t n_dims, const uint64_t *ne, const void *data,
                                      uint64_t n_bytes)
{
    return add_tensor(w, name, dtype, n_dims, ne, data, n_bytes, true, NULL, NULL);
}

rlx_status rlx_gguf_writer_add_tensor_ref(rlx_gguf_writer *w, const char *name, rlx_dtype dtype,
                                          uint32_t n_dims, const uint64_t *ne, const void *data,
                                          uint64_t n_bytes)
{
    return add_tensor(w, name, dtype, n_dims, ne, data, n_bytes, false, NULL, NULL);
}

rlx_status rlx_gguf_writer_add_tensor_gen(rlx_gguf_writer *w, const char *name, rlx_dtype dtype,
                                          uint32_t n_dims, const uint64_t *ne, uint64_t n_bytes,
                                          rlx_gguf_tensor_gen_fn gen, void *user)
{
    if (w && !gen)
        return wfail(w, RLX_ERR_INVALID_ARG, "tensor '%s': no generator", name ? name : "");
    return add_tensor(w, name, dtype, n_dims, ne, NULL, n_bytes, false, gen, user);
}

/* Produce a generated tensor's bytes [off, off + n) into buf. */
static rlx_status gen_chunk(const wtensor *t, uint64_t off, void *buf, uint64_t n, rlx_error **err)
{
    rlx_status s = t->gen(t->gen_user, off, buf, n, err);
    if (s != RLX_OK && err && !*err)
        rlx_error_set(err, s, "gguf writer: cannot produce tensor '%s'", t->name);
    return s;
}

/* ---- serialization ------------------------------------------------------ */

static uint64_t pad_to(uint64_t n, uint64_t a)
{
    return (a - n % a) % a;
}

/* Serialize the header (padded to the alignment) into a new buffer and
 * report where the data section ends. */
static rlx_status build_header(rlx_gguf_writer *w, uint8_t **out, size_t *out_len, uint64_t *total,
                               rlx_error **err)
{
    *out = NULL;
    if (!w)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_gguf_writer: NULL writer");
    if (w->bad != RLX_OK)
        return rlx_error_set(err, w->bad, "gguf writer: %s", rlx_gguf_writer_error(w));
    const uint64_t a = w->alignment;
    uint64_t n = 24;
    for (size_t i = 0; i < w->n_kv; i++)
        n += 8 + w->kvs[i].key_len + 4 + w->kvs[i].enc_len;
    for (size_t i = 0; i < w->n_tensors; i++)
        n += 8 + strlen(w->tensors[i].name) + 4 + 8 * w->tensors[i].n_dims + 4 + 8;
    n += pad_to(n, a);
    if (n > SIZE_MAX)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "gguf writer: the header is too large");
    uint64_t data_len = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        uint64_t sz = w->tensors[i].n_bytes;
        if (sz > UINT64_MAX - a || data_len > UINT64_MAX - a - sz)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG, "gguf writer: the data is too large");
        data_len += sz + pad_to(sz, a);
    }
    uint8_t *h = calloc(1, (size_t)n);
    if (!h)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "gguf writer: out of memory");
    size_t o = 0;
    memcpy(h, "GGUF", 4);
    put_le(h + 4, 3, 4);
    put_le(h + 8, w->n_tensors, 8);
    put_le(h + 16, w->n_kv, 8);
    o = 24;
    for (size_t i = 0; i < w->n_kv; i++) {
        const wkv *kv = &w->kvs[i];
        put_le(h + o, kv->key_len, 8);
        memcpy(h + o + 8, kv->key, kv->key_len);
        o += 8 + kv->key_len;
        put_le(h + o, (uint64_t)kv->type, 4);
        memcpy(h + o + 4, kv->enc, kv->enc_len);
        o += 4 + kv->enc_len;
    }
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        const wtensor *t = &w->tensors[i];
        size_t nl = strlen(t->name);
        put_le(h + o, nl, 8);
        memcpy(h + o + 8, t->name, nl);
        o += 8 + nl;
        put_le(h + o, t->n_dims, 4);
        o += 4;
        for (uint32_t d = 0; d < t->n_dims; d++, o += 8)
            put_le(h + o, t->ne[d], 8);
        put_le(h + o, (uint64_t)rlx_dtype_to_ggml(t->dtype), 4);
        put_le(h + o + 4, off, 8);
        o += 12;
        off += t->n_bytes + pad_to(t->n_bytes, a);
    }
    *out = h;
    *out_len = (size_t)n;
    *total = n + data_len;
    return RLX_OK;
}

rlx_status rlx_gguf_writer_to_memory(rlx_gguf_writer *w, void **out, size_t *out_size,
                                     rlx_error **err)
{
    if (!out || !out_size)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_gguf_writer_to_memory: NULL output");
    *out = NULL;
    *out_size = 0;
    uint8_t *h;
    size_t hl;
    uint64_t total;
    rlx_status s = build_header(w, &h, &hl, &total, err);
    if (s != RLX_OK)
        return s;
    if (total > SIZE_MAX) {
        free(h);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "gguf writer: the file is too large");
    }
    uint8_t *buf = realloc(h, (size_t)total ? (size_t)total : 1);
    if (!buf) {
        free(h);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY,
                             "gguf writer: out of memory for %" PRIu64 " bytes", total);
    }
    size_t o = hl;
    for (size_t i = 0; i < w->n_tensors; i++) {
        const wtensor *t = &w->tensors[i];
        size_t n = (size_t)t->n_bytes, p = (size_t)pad_to(t->n_bytes, w->alignment);
        if (n && t->gen) {
            for (uint64_t c = 0; c < n; c += RLX_GGUF_GEN_CHUNK) {
                uint64_t k = n - c < RLX_GGUF_GEN_CHUNK ? n - c : RLX_GGUF_GEN_CHUNK;
                s = gen_chunk(t, c, buf + o + c, k, err);
                if (s != RLX_OK) {
                    free(buf);
                    return s;
                }
            }
        } else if (n)
            memcpy(buf + o, t->data, n);
        memset(buf + o + n, 0, p);
        o += n + p;
    }
    *out = buf;
    *out_size = (size_t)total;
    return RLX_OK;
}

static int write_all(int fd, const void *p, uint64_t n)
{
    const uint8_t *b = p;
    while (n > 0) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : (size_t)n;
        ssize_t k = write(fd, b, chunk);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        b += k;
        n -= (uint64_t)k;
    }
    return 0;
}

rlx_status rlx_gguf_writer_write(rlx_gguf_writer *w, const char *path, rlx_error **err)
{
    if (!path || !path[0])
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_gguf_writer_write: no path");
    uint8_t *h;
    size_t hl;
    uint64_t total;
    rlx_status s = build_header(w, &h, &hl, &total, err);
    if (s != RLX_OK)
        return s;
    size_t pl = strlen(path);
    char *tmp = malloc(pl + 16);
    if (!tmp) {
        free(h);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    }
    memcpy(tmp, path, pl);
    memcpy(tmp + pl, ".tmp-XXXXXX", 12);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        free(h);
        free(tmp);
        return rlx_error_set(err, RLX_ERR_IO, "cannot create a temporary file beside '%s': %s",
                             path, strerror(e));
    }
    static const uint8_t zeros[4096];
    const char *step = "write";
    int rc = write_all(fd, h, hl);
    uint8_t *chunk = NULL; /* for generated tensors: one chunk at a time */
    rlx_status gs = RLX_OK;
    for (size_t i = 0; rc == 0 && i < w->n_tensors; i++) {
        const wtensor *t = &w->tensors[i];
        if (t->gen && t->n_bytes) {
            if (!chunk && !(chunk = malloc((size_t)RLX_GGUF_GEN_CHUNK))) {
                gs = rlx_error_set(err, RLX_ERR_NO_MEMORY, "gguf writer: out of memory");
                break;
            }
            for (uint64_t c = 0; rc == 0 && c < t->n_bytes; c += RLX_GGUF_GEN_CHUNK) {
                uint64_t k =
                    t->n_bytes - c < RLX_GGUF_GEN_CHUNK ? t->n_bytes - c : RLX_GGUF_GEN_CHUNK;
                gs = gen_chunk(t, c, chunk, k, err);
                if (gs != RLX_OK)
                    break;
                rc = write_all(fd, chunk, k);
            }
            if (gs != RLX_OK)
                break;
        } else
            rc = write_all(fd, t->data, t->n_bytes);
        for (uint64_t p = pad_to(t->n_bytes, w->alignment); rc == 0 && p > 0;) {
            uint64_t k = p < sizeof zeros ? p : sizeof zeros;
            rc = write_all(fd, zeros, k);
            p -= k;
        }
    }
    free(chunk);
    if (gs != RLX_OK) {
        close(fd);
        unlink(tmp);
        free(tmp);
        free(h);
        return gs;
    }
    if (rc == 0) {
        step = "set permissions of";
        rc = fchmod(fd, 0644);
    }
    if (rc == 0) {
        step = "fsync";
        rc = fsync(fd);
    }
    int e = errno;
    if (close(fd) != 0 && rc == 0) {
        e = errno;
        step = "close";
        rc = -1;
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        e = errno;
        step = "rename the temporary file to";
        rc = -1;
    }
    free(h);
    if (rc != 0) {
        unlink(tmp);
        free(tmp);
        return rlx_error_set(err, RLX_ERR_IO, "cannot %s '%s': %s", step, path, strerror(e));
    }
    free(tmp);
    /* Make the rename itself durable; failure here loses nothing written. */
    char *dir = strdup(path);
    if (dir) {
        char *slash = strrchr(dir, '/');
        const char *d = ".";
        if (slash) {
            *(slash == dir ? slash + 1 : slash) = '\0';
            d = dir;
        }
        int dfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
        free(dir);
    }
    return RLX_OK;
}
