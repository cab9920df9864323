/* libFuzzer target: the GGUF reader on arbitrary bytes, then every accessor
 * on whatever it accepts, then a writer round trip of the accepted file. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/formats/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

/* Decode elements of an array and recurse into nested ones, with a budget
 * so a huge valid array does not make one input slow. */
static void walk(const rlx_gguf *g, const rlx_gguf_value *arr, int depth, uint64_t *budget)
{
    if (depth > RLX_GGUF_MAX_ARRAY_DEPTH)
        __builtin_trap();
    uint64_t n = arr->v.arr.count;
    for (uint64_t i = 0; i<n && * budget> 0; i++, (*budget)--) {
        /* sequential, plus a jump backwards now and then */
        uint64_t k = (i % 7 == 3) ? n - 1 - i : i;
        rlx_gguf_value e;
        rlx_error *err = NULL;
        if (rlx_gguf_array_get(g, arr, k, &e, &err) != RLX_OK)
            __builtin_trap(); /* the reader validated this array at open */
        if (e.type != arr->v.arr.elem_type)
            __builtin_trap();
        if (e.type == RLX_GGUF_TYPE_STRING && e.v.str.len)
            sink ^= (uint8_t)e.v.str.ptr[e.v.str.len - 1];
        else if (e.type == RLX_GGUF_TYPE_ARRAY)
            walk(g, &e, depth + 1, budget);
        else
            sink ^= e.v.u64;
    }
    rlx_gguf_value e;
    rlx_error *err = NULL;
    if (rlx_gguf_array_get(g, arr, n, &e, &err) != RLX_ERR_INVALID_ARG)
        __builtin_trap();
    rlx_error_free(err);
}

static void getters(const rlx_gguf *g, const char *key)
{
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    float f;
    bool b;
    rlx_gguf_str s;
    char buf[16];
    const rlx_gguf_value *arr;
    rlx_error *err = NULL;
    rlx_gguf_get_u32(g, key, &u32, &err);
    rlx_error_clear(&err);
    rlx_gguf_get_u64(g, key, &u64, &err);
    rlx_error_clear(&err);
    rlx_gguf_get_i64(g, key, &i64, &err);
    rlx_error_clear(&err);
    rlx_gguf_get_f32(g, key, &f, &err);
    rlx_error_clear(&err);
    rlx_gguf_get_bool(g, key, &b, &err);
    rlx_error_clear(&err);
    rlx_gguf_get_str(g, key, &s, &err);
    rlx_error_clear(&err);
    rlx_gguf_get_string(g, key, buf, sizeof buf, &err);
    rlx_error_clear(&err);
    rlx_gguf_get_arr(g, key, RLX_GGUF_TYPE_COUNT, &arr, &err);
    rlx_error_clear(&err);
}

/* Copy what the writer accepts and read it back. */
static void round_trip(const rlx_gguf *g)
{
    /* a legal general.alignment of up to 2^31 makes the re-written file
     * that large: valid, but not what one fuzz input should cost */
    if (rlx_gguf_alignment(g) > 4096)
        return;
    rlx_gguf_writer *w = rlx_gguf_writer_create();
    rlx_error *err = NULL;
    if (!w)
        return;
    if (rlx_gguf_writer_copy_kv(w, g, &err) != RLX_OK)
        __builtin_trap(); /* every value the reader accepts must copy */
    uint64_t added = 0;
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
        const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
        /* the writer is stricter (names < 64 bytes, 1-4 dims): skip the rest */
        if (strlen(t->name) == 0 || strlen(t->name) > 63 || t->n_dims == 0 || t->n_bytes > 1 << 20)
            continue;
        if (rlx_gguf_writer_add_tensor_ref(w, t->name, t->dtype, t->n_dims, t->ne,
                                           rlx_gguf_tensor_data(g, t), t->n_bytes) != RLX_OK)
            __builtin_trap();
        added++;
    }
    void *mem = NULL;
    size_t n = 0;
    if (rlx_gguf_writer_to_memory(w, &mem, &n, &err) != RLX_OK)
        __builtin_trap();
    rlx_gguf *g2 = NULL;
    if (rlx_gguf_open_memory(mem, n, "round-trip.gguf", &g2, &err) != RLX_OK)
        __builtin_trap();
    if (rlx_gguf_n_tensors(g2) != added || rlx_gguf_n_kv(g2) > rlx_gguf_n_kv(g))
        __builtin_trap();
    rlx_gguf_close(g2);
    free(mem);
    rlx_gguf_writer_free(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rlx_gguf *g = NULL;
    rlx_error *err = NULL;
    if (rlx_gguf_open_memory(data, size, "fuzz.gguf", &g, &err) != RLX_OK) {
        if (!err || strncmp(rlx_error_message(err), "fuzz.gguf: ", 11) != 0)
            __builtin_trap();
        rlx_error_free(err);
        return 0;
    }
    uint64_t budget = 20000;
    char key[128];
    for (uint64_t i = 0; i < rlx_gguf_n_kv(g); i++) {
        const rlx_gguf_kv *kv = rlx_gguf_kv_at(g, i);
        if (kv->value.type == RLX_GGUF_TYPE_ARRAY)
            walk(g, &kv->value, 1, &budget);
        if (kv->key.len < sizeof key && !memchr(kv->key.ptr, '\0', kv->key.len)) {
            memcpy(key, kv->key.ptr, kv->key.len);
            key[kv->key.len] = '\0';
            if (rlx_gguf_find(g, key) != &kv->value)
                __builtin_trap();
            getters(g, key);
        }
    }
    getters(g, "no.such.key");
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
        const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
        if (rlx_gguf_find_tensor(g, t->name) != t)
            __builtin_trap();
        const uint8_t *p = rlx_gguf_tensor_data(g, t);
        if (t->n_bytes) {
            if (p < data || (size_t)(p - data) + t->n_bytes > size)
                __builtin_trap();
            sink ^= p[0] ^ p[t->n_bytes - 1];
        }
    }
    round_trip(g);
    rlx_gguf_close(g);
    return 0;
}
