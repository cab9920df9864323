#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/formats/safetensors.h"
#include "test-util.h"

/* Expected values below were read independently of rlx with a throwaway
 * python3 script that used only `struct` and `json`:
 *     n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8+n])
 * then printed len(h) - 1 (79 tensors + __metadata__), h[name] for the names
 * used here, the metadata map, len(b) - 8 - n, and the first 8 data bytes of
 * one tensor as hex and as struct.unpack('<4e', ...). */
typedef struct {
    const char *name;
    uint32_t n_dims;
    uint64_t shape[4];
    uint64_t begin, end;
} want_tensor;

static const want_tensor enc_want[] = {
    {"0.weight", 4, {64, 3, 3, 3}, 0, 3456},
    {"0.bias", 1, {64}, 3456, 3584},
    {"1.conv.0.weight", 4, {64, 64, 3, 3}, 3584, 77312},
    {"11.pool.0.weight", 4, {256, 64, 1, 1}, 1997312, 2030080},
    {"11.pool.1.bias", 1, {256}, 2030592, 2031104},
    {"13.pool.3.weight", 4, {64, 256, 1, 1}, 2607360, 2640128},
    {"14.weight", 4, {32, 64, 3, 3}, 2640128, 2676992},
    {"14.bias", 1, {32}, 2676992, 2677056},
};

static const want_tensor dec_want[] = {
    {"1.weight", 4, {64, 32, 3, 3}, 0, 36864},
    {"1.bias", 1, {64}, 36864, 36992},
    {"3.pool.0.weight", 4, {256, 64, 1, 1}, 258560, 291328},
    {"3.pool.1.weight", 1, {256}, 291328, 291840},
    {"10.conv.2.weight", 4, {64, 64, 3, 3}, 1492096, 1565824},
    {"19.weight", 4, {3, 64, 3, 3}, 2673536, 2676992},
    {"19.bias", 1, {3}, 2676992, 2676998},
};

static void check_real_file(const char *rel, const char *source, const want_tensor *want,
                            size_t n_want, const char *first_name, uint64_t data_size,
                            const uint8_t first_bytes[8])
{
    const char *path = rlx_test_data(rel);
    size_t fsize = 0;
    uint8_t *raw = rlx_test_read_file(path, &fsize);
    assert_non_null(raw);

    rlx_safetensors *st = NULL;
    rlx_error *err = NULL;
    rlx_status s = rlx_safetensors_open(path, &st, &err);
    if (s != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    assert_int_equal(rlx_safetensors_n_shards(st), 1);
    assert_string_equal(rlx_safetensors_shard_path(st, 0), path);
    assert_null(rlx_safetensors_shard_path(st, 1));
    assert_int_equal(rlx_safetensors_n_tensors(st), 79);
    assert_null(rlx_safetensors_tensor_at(st, 79));

    /* Header order is kept. */
    assert_string_equal(rlx_safetensors_tensor_at(st, 0)->name, first_name);

    uint64_t total = 0;
    for (uint64_t i = 0; i < 79; i++) {
        const rlx_st_tensor *t = rlx_safetensors_tensor_at(st, i);
        assert_int_equal(t->dtype, RLX_DTYPE_F16);
        assert_int_equal(t->n_bytes, t->n_elements * 2);
        assert_ptr_equal(rlx_safetensors_find(st, t->name), t);
        total += t->n_bytes;
    }
    /* These files pack their tensors back to back with no gaps. */
    assert_int_equal(total, data_size);
    const uint8_t *data0 = raw + (fsize - data_size);

    for (size_t i = 0; i < n_want; i++) {
        const rlx_st_tensor *t = rlx_safetensors_find(st, want[i].name);
        assert_non_null(t);
        assert_string_equal(t->name, want[i].name);
        assert_int_equal(t->n_dims, want[i].n_dims);
        uint64_t n = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            assert_int_equal(t->shape[d], want[i].shape[d]);
            n *= want[i].shape[d];
        }
        assert_int_equal(t->n_elements, n);
        assert_int_equal(t->offset, want[i].begin);
        assert_int_equal(t->n_bytes, want[i].end - want[i].begin);
        assert_int_equal(t->shard, 0);
        const uint8_t *p = rlx_safetensors_data(st, t);
        assert_memory_equal(p, data0 + want[i].begin, want[i].end - want[i].begin);
    }
    assert_memory_equal(rlx_safetensors_data(st, rlx_safetensors_find(st, first_name)), first_bytes,
                        8);

    assert_null(rlx_safetensors_find(st, "no.such.tensor"));
    assert_null(rlx_safetensors_find(st, "__metadata__"));
    assert_null(rlx_safetensors_find(st, ""));

    assert_int_equal(rlx_safetensors_n_metadata(st), 2);
    assert_string_equal(rlx_safetensors_metadata(st, "source"), source);
    assert_string_equal(rlx_safetensors_metadata(st, "license"), "MIT");
    assert_null(rlx_safetensors_metadata(st, "format"));
    const char *k, *v;
    rlx_safetensors_metadata_at(st, 0, &k, &v);
    assert_non_null(k);
    assert_string_equal(rlx_safetensors_metadata(st, k), v);
    rlx_safetensors_metadata_at(st, 2, &k, &v);
    assert_null(k);
    assert_null(v);

    rlx_safetensors_close(st);

    /* The same bytes through the in-memory entry point. */
    s = rlx_safetensors_open_memory(raw, fsize, "copy", &st, &err);
    if (s != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    assert_int_equal(rlx_safetensors_n_tensors(st), 79);
    assert_string_equal(rlx_safetensors_shard_path(st, 0), "copy");
    const rlx_st_tensor *t = rlx_safetensors_find(st, want[0].name);
    assert_ptr_equal(rlx_safetensors_data(st, t), data0 + want[0].begin);
    rlx_safetensors_close(st);
    free(raw);
}

static void real_encoder(void **state)
{
    /* 0.weight starts with f16 -0.1405029296875, -0.06121826171875, ... */
    static const uint8_t first[8] = {0x7f, 0xb0, 0xd6, 0xab, 0xdc, 0x2d, 0xfa, 0xaa};
    check_real_file("vae/taef2_encoder.safetensors", "madebyollin/taesd taef2_encoder.pth",
                    enc_want, sizeof enc_want / sizeof enc_want[0], "0.weight", 2677056, first);
    assert_true(rlx_f16_to_f32(0xb07f) == -0.1405029296875f);
}

static void real_decoder(void **state)
{
    static const uint8_t first[8] = {0x7e, 0x9a, 0x63, 0x9a, 0x0b, 0xa4, 0x65, 0x16};
    check_real_file("vae/taef2_decoder.safetensors", "madebyollin/taesd taef2_decoder.pth",
                    dec_want, sizeof dec_want / sizeof dec_want[0], "1.weight", 2676998, first);
}

/* ---- a tiny writer for test files ------------------------------------- */

typedef struct {
    char *json;
    size_t len, cap;
    uint8_t *data;
    size_t data_len, data_cap;
} st_writer;

static void w_append(st_writer *w, const char *s)
{
    size_t n = strlen(s);
    if (w->len + n + 1 > w->cap) {
        w->cap = (w->len + n + 1) * 2;
        w->json = realloc(w->json, w->cap);
        assert_non_null(w->json);
    }
    memcpy(w->json + w->len, s, n + 1);
    w->len += n;
}

static void w_begin(st_writer *w, const char *metadata_json)
{
    memset(w, 0, sizeof *w);
    w_append(w, "{");
    if (metadata_json) {
        w_append(w, "\"__metadata__\":");
        w_append(w, metadata_json);
    }
}

static void w_tensor(st_writer *w, const char *name, const char *dtype, uint32_t n_dims,
                     const uint64_t *shape, const void *bytes, size_t n_bytes)
{
    char buf[512];
    if (w->len > 1)
        w_append(w, ",");
    snprintf(buf, sizeof buf, "\"%s\":{\"dtype\":\"%s\",\"shape\":[", name, dtype);
    w_append(w, buf);
    for (uint32_t i = 0; i < n_dims; i++) {
        snprintf(buf, sizeof buf, "%s%llu", i ? "," : "", (unsigned long long)shape[i]);
        w_append(w, buf);
    }
    snprintf(buf, sizeof buf, "],\"data_offsets\":[%zu,%zu]}", w->data_len, w->data_len + n_bytes);
    w_append(w, buf);
    if (w->data_len + n_bytes > w->data_cap) {
        w->data_cap = (w->data_len + n_bytes) * 2 + 1;
        w->data = realloc(w->data, w->data_cap);
        assert_non_null(w->data);
    }
    if (n_bytes)
        memcpy(w->data + w->data_len, bytes, n_bytes);
    w->data_len += n_bytes;
}

/* Finish as the reference writer does: header padded with spaces to 8 bytes. */
static uint8_t *w_finish(st_writer *w, size_t *out_size)
{
    w_append(w, "}");
    while (w->len % 8 != 0)
        w_append(w, " ");
    size_t size = 8 + w->len + w->data_len;
    uint8_t *img = malloc(size);
    assert_non_null(img);
    uint64_t n = w->len;
    for (int i = 0; i < 8; i++)
        img[i] = (uint8_t)(n >> (8 * i));
    memcpy(img + 8, w->json, w->len);
    if (w->data_len)
        memcpy(img + 8 + w->len, w->data, w->data_len);
    free(w->json);
    free(w->data);
    *out_size = size;
    return img;
}

static void write_or_fail(const char *path, const void *p, size_t n)
{
    assert_int_equal(rlx_test_write_file(path, p, n), 0);
}

/* ---- sharded checkpoints ---------------------------------------------- */

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    assert_non_null(p);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static const char *shard_names[2] = {"model-00001-of-00002.safetensors",
                                     "model-00002-of-00002.safetensors"};

/* Split the decoder's tensors over two shards (even/odd positions) and write
 * an index; the folder is `dir`. */
static void write_sharded_decoder(const char *dir, const rlx_safetensors *src)
{
    st_writer w[2];
    w_begin(&w[0], "{\"format\":\"pt\",\"part\":\"one\"}");
    w_begin(&w[1], "{\"format\":\"pt\",\"part\":\"two\"}");
    st_writer idx;
    w_begin(&idx, NULL);
    w_append(&idx, "\"metadata\":{\"total_size\":2676998},\"weight_map\":{");
    uint64_t n = rlx_safetensors_n_tensors(src);
    for (uint64_t i = 0; i < n; i++) {
        const rlx_st_tensor *t = rlx_safetensors_tensor_at(src, i);
        int k = (int)(i % 2);
        w_tensor(&w[k], t->name, rlx_dtype_name(t->dtype), t->n_dims, t->shape,
                 rlx_safetensors_data(src, t), t->n_bytes);
        char buf[256];
        snprintf(buf, sizeof buf, "%s\"%s\":\"%s\"", i ? "," : "", t->name, shard_names[k]);
        w_append(&idx, buf);
    }
    w_append(&idx, "}}");
    for (int k = 0; k < 2; k++) {
        size_t size;
        uint8_t *img = w_finish(&w[k], &size);
        char *p = join(dir, shard_names[k]);
        write_or_fail(p, img, size);
        free(p);
        free(img);
    }
    char *p = join(dir, "model.safetensors.index.json");
    write_or_fail(p, idx.json, idx.len);
    free(p);
    free(idx.json);
}

static void check_same_tensors(const rlx_safetensors *a, const rlx_safetensors *b)
{
    assert_int_equal(rlx_safetensors_n_tensors(a), rlx_safetensors_n_tensors(b));
    for (uint64_t i = 0; i < rlx_safetensors_n_tensors(a); i++) {
        const rlx_st_tensor *ta = rlx_safetensors_tensor_at(a, i);
        const rlx_st_tensor *tb = rlx_safetensors_find(b, ta->name);
        assert_non_null(tb);
        assert_int_equal(ta->dtype, tb->dtype);
        assert_int_equal(ta->n_dims, tb->n_dims);
        assert_memory_equal(ta->shape, tb->shape, sizeof ta->shape);
        assert_int_equal(ta->n_bytes, tb->n_bytes);
        assert_memory_equal(rlx_safetensors_data(a, ta), rlx_safetensors_data(b, tb), ta->n_bytes);
    }
}

static void remove_sharded(const char *dir)
{
    const char *files[] = {shard_names[0], shard_names[1], "model.safetensors.index.json",
                           "model.safetensors"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char *p = join(dir, files[i]);
        unlink(p);
        free(p);
    }
    rmdir(dir);
}

static void sharded(void **state)
{
    rlx_error *err = NULL;
    rlx_safetensors *orig = NULL, *st = NULL;
    assert_int_equal(
        rlx_safetensors_open(rlx_test_data("vae/taef2_decoder.safetensors"), &orig, &err), RLX_OK);

    char dir[4096];
    snprintf(dir, sizeof dir, "%s", rlx_test_tmp("sharded"));
    mkdir(dir, 0700);
    write_sharded_decoder(dir, orig);

    /* Through the index file. */
    char *index = join(dir, "model.safetensors.index.json");
    rlx_status s = rlx_safetensors_open(index, &st, &err);
    if (s != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    assert_int_equal(rlx_safetensors_n_shards(st), 2);
    for (uint32_t k = 0; k < 2; k++) {
        char *p = join(dir, shard_names[k]);
        assert_string_equal(rlx_safetensors_shard_path(st, k), p);
        free(p);
    }
    check_same_tensors(orig, st);
    const rlx_st_tensor *t0 = rlx_safetensors_find(st, "1.weight");
    const rlx_st_tensor *t1 = rlx_safetensors_find(st, "1.bias");
    assert_int_equal(t0->shard, 0);
    assert_int_equal(t1->shard, 1);
    assert_int_equal(t1->offset, 0);
    /* Metadata merged over shards; the first shard wins on a shared key. */
    assert_int_equal(rlx_safetensors_n_metadata(st), 2);
    assert_string_equal(rlx_safetensors_metadata(st, "format"), "pt");
    assert_string_equal(rlx_safetensors_metadata(st, "part"), "one");
    rlx_safetensors_close(st);

    /* Through the folder. */
    st = NULL;
    s = rlx_safetensors_open(dir, &st, &err);
    if (s != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    assert_int_equal(rlx_safetensors_n_shards(st), 2);
    check_same_tensors(orig, st);
    check_same_tensors(st, orig);
    rlx_safetensors_close(st);

    /* A folder with model.safetensors prefers it over the index. */
    size_t fsize;
    void *raw = rlx_test_read_file(rlx_test_data("vae/taef2_decoder.safetensors"), &fsize);
    assert_non_null(raw);
    char *single = join(dir, "model.safetensors");
    write_or_fail(single, raw, fsize);
    free(raw);
    st = NULL;
    assert_int_equal(rlx_safetensors_open(dir, &st, &err), RLX_OK);
    assert_int_equal(rlx_safetensors_n_shards(st), 1);
    assert_string_equal(rlx_safetensors_shard_path(st, 0), single);
    check_same_tensors(orig, st);
    rlx_safetensors_close(st);
    free(single);

    /* A trailing slash on the folder works too. */
    char slash[4200];
    snprintf(slash, sizeof slash, "%s/", dir);
    st = NULL;
    assert_int_equal(rlx_safetensors_open(slash, &st, &err), RLX_OK);
    rlx_safetensors_close(st);

    free(index);
    remove_sharded(dir);
    rlx_safetensors_close(orig);
    assert_null(err);
}

static void empty_folder(void **state)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", rlx_test_tmp("empty-folder"));
    mkdir(dir, 0700);
    rlx_safetensors *st = (rlx_safetensors *)&st; /* must be reset to NULL */
    rlx_error *err = NULL;
    assert_int_equal(rlx_safetensors_open(dir, &st, &err), RLX_ERR_IO);
    assert_null(st);
    assert_non_null(strstr(rlx_error_message(err), "neither model.safetensors"));
    rlx_error_free(err);
    err = NULL;
    rmdir(dir);
    assert_int_equal(rlx_safetensors_open(dir, &st, &err), RLX_ERR_IO);
    assert_non_null(strstr(rlx_error_message(err), "cannot open"));
    rlx_error_free(err);
    assert_int_equal(rlx_safetensors_open(NULL, &st, NULL), RLX_ERR_INVALID_ARG);
}

/* ---- every dtype -------------------------------------------------------- */

static void all_dtypes(void **state)
{
    const float f32[6] = {1.5f, -2.0f, 0.25f, 3.0f, -0.0f, 1e10f};
    const double f64[2] = {3.141592653589793, -1e300};
    const int64_t i64[4] = {INT64_MIN, -1, 0, INT64_MAX};
    const int32_t i32[3] = {INT32_MIN, 7, INT32_MAX};
    const int16_t i16[2] = {-32768, 12345};
    const int8_t i8[3] = {-128, 0, 127};
    const uint8_t u8[2] = {0, 255};
    const uint8_t boolv[5] = {1, 0, 0, 1, 1};
    const uint16_t f16[1] = {0x3c00};          /* 1.0 */
    const uint16_t bf16[2] = {0x3f80, 0xc000}; /* 1.0, -2.0 */
    const uint8_t f8a[3] = {0x38, 0xb8, 0x00};
    const uint8_t f8b[1] = {0x3c};
    const uint64_t s_f32[] = {2, 3}, s_f64[] = {2}, s_i64[] = {4}, s_i32[] = {1, 3, 1},
                   s_i16[] = {2}, s_i8[] = {3}, s_u8[] = {2}, s_bool[] = {5}, s_bf16[] = {2},
                   s_f8a[] = {3}, s_f8b[] = {1, 1, 1, 1, 1, 1, 1, 1}, s_empty[] = {0, 7};

    st_writer w;
    w_begin(&w, "{\"format\":\"pt\"}");
    w_tensor(&w, "f32", "F32", 2, s_f32, f32, sizeof f32);
    w_tensor(&w, "f64", "F64", 1, s_f64, f64, sizeof f64);
    w_tensor(&w, "i64", "I64", 1, s_i64, i64, sizeof i64);
    w_tensor(&w, "i32", "I32", 3, s_i32, i32, sizeof i32);
    w_tensor(&w, "i16", "I16", 1, s_i16, i16, sizeof i16);
    w_tensor(&w, "i8", "I8", 1, s_i8, i8, sizeof i8);
    w_tensor(&w, "u8", "U8", 1, s_u8, u8, sizeof u8);
    w_tensor(&w, "mask", "BOOL", 1, s_bool, boolv, sizeof boolv);
    w_tensor(&w, "scalar", "F16", 0, NULL, f16, sizeof f16);
    w_tensor(&w, "bf16", "BF16", 1, s_bf16, bf16, sizeof bf16);
    w_tensor(&w, "f8a", "F8_E4M3", 1, s_f8a, f8a, sizeof f8a);
    w_tensor(&w, "f8b", "F8_E5M2", 8, s_f8b, f8b, sizeof f8b);
    w_tensor(&w, "empty", "F32", 2, s_empty, NULL, 0);
    w_tensor(&w, "empty2", "I64", 1, s_empty, NULL, 0); /* same offset as "empty": fine */
    size_t size;
    uint8_t *img = w_finish(&w, &size);

    /* Written to disk so the mmap path sees it too. */
    const char *path = rlx_test_tmp("dtypes.safetensors");
    write_or_fail(path, img, size);
    rlx_safetensors *st = NULL;
    rlx_error *err = NULL;
    rlx_status s = rlx_safetensors_open(path, &st, &err);
    if (s != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    assert_int_equal(rlx_safetensors_n_tensors(st), 14);
    assert_string_equal(rlx_safetensors_metadata(st, "format"), "pt");

    static const struct {
        const char *name;
        rlx_dtype dtype;
        uint32_t n_dims;
        uint64_t n_el, n_bytes;
    } want[] = {
        {"f32", RLX_DTYPE_F32, 2, 6, 24},    {"f64", RLX_DTYPE_F64, 1, 2, 16},
        {"i64", RLX_DTYPE_I64, 1, 4, 32},    {"i32", RLX_DTYPE_I32, 3, 3, 12},
        {"i16", RLX_DTYPE_I16, 1, 2, 4},     {"i8", RLX_DTYPE_I8, 1, 3, 3},
        {"u8", RLX_DTYPE_U8, 1, 2, 2},       {"mask", RLX_DTYPE_BOOL, 1, 5, 5},
        {"scalar", RLX_DTYPE_F16, 0, 1, 2},  {"bf16", RLX_DTYPE_BF16, 1, 2, 4},
        {"f8a", RLX_DTYPE_F8_E4M3, 1, 3, 3}, {"f8b", RLX_DTYPE_F8_E5M2, 8, 1, 1},
        {"empty", RLX_DTYPE_F32, 2, 0, 0},   {"empty2", RLX_DTYPE_I64, 1, 0, 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const rlx_st_tensor *t = rlx_safetensors_find(st, want[i].name);
        assert_non_null(t);
        assert_ptr_equal(t, rlx_safetensors_tensor_at(st, i));
        assert_int_equal(t->dtype, want[i].dtype);
        assert_int_equal(t->n_dims, want[i].n_dims);
        assert_int_equal(t->n_elements, want[i].n_el);
        assert_int_equal(t->n_bytes, want[i].n_bytes);
    }
    const rlx_st_tensor *t = rlx_safetensors_find(st, "f32");
    assert_int_equal(t->shape[0], 2);
    assert_int_equal(t->shape[1], 3);
    assert_memory_equal(rlx_safetensors_data(st, t), f32, sizeof f32);
    t = rlx_safetensors_find(st, "i64");
    int64_t got64[4];
    memcpy(got64, rlx_safetensors_data(st, t), sizeof got64);
    assert_true(got64[0] == INT64_MIN && got64[3] == INT64_MAX);
    t = rlx_safetensors_find(st, "mask");
    assert_memory_equal(rlx_safetensors_data(st, t), boolv, sizeof boolv);
    t = rlx_safetensors_find(st, "f64");
    double gotd[2];
    memcpy(gotd, rlx_safetensors_data(st, t), sizeof gotd);
    assert_true(gotd[0] == f64[0] && gotd[1] == f64[1]);
    t = rlx_safetensors_find(st, "bf16");
    uint16_t gotb[2];
    memcpy(gotb, rlx_safetensors_data(st, t), sizeof gotb);
    assert_true(rlx_bf16_to_f32(gotb[1]) == -2.0f);
    t = rlx_safetensors_find(st, "f8b");
    for (uint32_t d = 0; d < 8; d++)
        assert_int_equal(t->shape[d], 1);
    rlx_safetensors_close(st);
    unlink(path);
    free(img);
}

/* No __metadata__, no tensors: a valid (if useless) file. */
static void empty_header(void **state)
{
    static const uint8_t img[] = {2, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    rlx_safetensors *st = NULL;
    assert_int_equal(rlx_safetensors_open_memory(img, sizeof img, "e", &st, NULL), RLX_OK);
    assert_int_equal(rlx_safetensors_n_tensors(st), 0);
    assert_int_equal(rlx_safetensors_n_metadata(st), 0);
    assert_null(rlx_safetensors_find(st, "x"));
    assert_null(rlx_safetensors_metadata(st, "x"));
    rlx_safetensors_close(st);
    rlx_safetensors_close(NULL);
}

int main(void)
{
    rlx_test_need_data("vae/taef2_encoder.safetensors", "vae/taef2_decoder.safetensors", NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(real_encoder), cmocka_unit_test(real_decoder),
        cmocka_unit_test(sharded),      cmocka_unit_test(empty_folder),
        cmocka_unit_test(all_dtypes),   cmocka_unit_test(empty_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
