/* The safetensors reader on broken and hostile input: every case must come
 * back as a status with a message naming the field, never a crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/formats/safetensors.h"
#include "test-util.h"

/* 8-byte little-endian length, the header text, then `data_size` zero bytes. */
static uint8_t *image(const char *header, size_t data_size, size_t *out_size)
{
    size_t hlen = strlen(header);
    size_t size = 8 + hlen + data_size;
    uint8_t *img = calloc(1, size);
    assert_non_null(img);
    for (int i = 0; i < 8; i++)
        img[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    memcpy(img + 8, header, hlen);
    *out_size = size;
    return img;
}

static void expect_fail_bytes(const uint8_t *img, size_t size, rlx_status want, const char *sub1,
                              const char *sub2)
{
    rlx_safetensors *st = (rlx_safetensors *)&st; /* must come back NULL */
    rlx_error *err = NULL;
    rlx_status s = rlx_safetensors_open_memory(img, size, "bad.safetensors", &st, &err);
    const char *msg = rlx_error_message(err);
    if (s != want)
        fail_msg("status %s, wanted %s: %s", rlx_status_name(s), rlx_status_name(want), msg);
    assert_null(st);
    assert_int_equal(rlx_error_code(err), want);
    if (!strstr(msg, "bad.safetensors") || (sub1 && !strstr(msg, sub1)) ||
        (sub2 && !strstr(msg, sub2)))
        fail_msg("message \"%s\" lacks \"%s\" / \"%s\"", msg, sub1 ? sub1 : "", sub2 ? sub2 : "");
    rlx_error_free(err);
}

static void expect_fail(const char *header, size_t data_size, rlx_status want, const char *sub1,
                        const char *sub2)
{
    size_t size;
    uint8_t *img = image(header, data_size, &size);
    expect_fail_bytes(img, size, want, sub1, sub2);
    free(img);
}

static void expect_ok(const char *header, size_t data_size, uint64_t n_tensors)
{
    size_t size;
    uint8_t *img = image(header, data_size, &size);
    rlx_safetensors *st = NULL;
    rlx_error *err = NULL;
    if (rlx_safetensors_open_memory(img, size, "ok.safetensors", &st, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    assert_int_equal(rlx_safetensors_n_tensors(st), n_tensors);
    rlx_safetensors_close(st);
    free(img);
}

static void header_not_object(void **state)
{
    expect_fail("[1, 2]", 0, RLX_ERR_FORMAT, "header is an array, not a JSON object", NULL);
    expect_fail("\"text\"", 0, RLX_ERR_FORMAT, "header is a string", NULL);
    expect_fail("42", 0, RLX_ERR_FORMAT, "header is an integer", NULL);
    /* values of the header object must be objects */
    expect_fail("{\"w\": [1]}", 0, RLX_ERR_FORMAT, "tensor 'w' is an array, not an object", NULL);
    expect_fail("{\"w\": 3}", 0, RLX_ERR_FORMAT, "tensor 'w' is an integer", NULL);
    expect_fail("{\"__metadata__\": [\"a\"]}", 0, RLX_ERR_FORMAT,
                "__metadata__ is an array, not an object", NULL);
    expect_fail("{\"__metadata__\": {\"k\": 1}}", 0, RLX_ERR_FORMAT,
                "__metadata__ entry 'k' is an integer, not a string", NULL);
}

static void invalid_json(void **state)
{
    expect_fail("{\"a\":", 0, RLX_ERR_FORMAT, "header is not valid JSON", "ends before");
    expect_fail("{\"a\" 1}", 0, RLX_ERR_FORMAT, "header is not valid JSON", NULL);
    expect_fail("{} x", 0, RLX_ERR_FORMAT, "header has bytes after the JSON value", NULL);
    expect_fail("{}{}", 0, RLX_ERR_FORMAT, "header has bytes after the JSON value", NULL);
    expect_fail("{\"\xff\xfe\": {}}", 0, RLX_ERR_FORMAT, "header is not valid JSON", NULL);
    expect_fail("{", 0, RLX_ERR_FORMAT, "header length 1 is too small", NULL);
    expect_fail("", 0, RLX_ERR_FORMAT, "header length 0 is too small", NULL);
    /* a JSON value nested far deeper than any header needs */
    char deep[400];
    memset(deep, '[', sizeof deep - 1);
    deep[sizeof deep - 1] = '\0';
    expect_fail(deep, 0, RLX_ERR_FORMAT, "header is not valid JSON", NULL);
    /* space padding after the object is what writers emit, and is fine */
    expect_ok("{}      ", 0, 0);
}

static void header_length(void **state)
{
    uint8_t img[32] = {0};
    /* shorter than the length field */
    expect_fail_bytes(img, 0, RLX_ERR_FORMAT, "0 bytes, too short", NULL);
    expect_fail_bytes(img, 7, RLX_ERR_FORMAT, "7 bytes, too short", NULL);
    /* past the end of the file */
    img[0] = 25; /* 8 + 25 > 32 */
    memcpy(img + 8, "{}", 2);
    expect_fail_bytes(img, sizeof img, RLX_ERR_FORMAT, "header length 25 runs past the end",
                      "32-byte file");
    /* absurd: 2^63 and 2^64 - 1 */
    memset(img, 0, 8);
    img[7] = 0x80;
    expect_fail_bytes(img, sizeof img, RLX_ERR_FORMAT, "header length 9223372036854775808", NULL);
    memset(img, 0xff, 8);
    expect_fail_bytes(img, sizeof img, RLX_ERR_FORMAT, "header length 18446744073709551615", NULL);

    /* inside the file but over the sanity cap: a sparse anonymous mapping
     * stands in for a 101 MiB file without touching its pages */
    size_t big = (size_t)RLX_ST_MAX_HEADER_BYTES + (1u << 20) + 8;
    uint8_t *p = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    uint64_t hlen = (uint64_t)RLX_ST_MAX_HEADER_BYTES + 1;
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(hlen >> (8 * i));
    expect_fail_bytes(p, big, RLX_ERR_FORMAT, "header length 104857601 is over the", "limit");
    munmap(p, big);
}

static void unknown_dtype(void **state)
{
    expect_fail("{\"enc.w\":{\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[0,1]}}", 1,
                RLX_ERR_UNSUPPORTED, "tensor 'enc.w'", "dtype 'F4'");
    /* a GGUF block type is not a safetensors dtype */
    expect_fail("{\"q\":{\"dtype\":\"Q4_K\",\"shape\":[256],\"data_offsets\":[0,144]}}", 144,
                RLX_ERR_UNSUPPORTED, "tensor 'q'", "dtype 'Q4_K'");
    expect_fail("{\"x\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                RLX_ERR_UNSUPPORTED, "dtype 'f32'", NULL);
    expect_fail("{\"x\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, RLX_ERR_FORMAT,
                "tensor 'x' dtype is an integer, not a string", NULL);
    expect_fail("{\"x\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, RLX_ERR_FORMAT,
                "tensor 'x' has no dtype", NULL);
}

static void offsets(void **state)
{
    /* past the end of the data section */
    expect_fail("{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 12,
                RLX_ERR_FORMAT, "tensor 'x' data_offsets [0, 16] run past the end",
                "12-byte data section");
    expect_fail("{\"x\":{\"dtype\":\"U8\",\"shape\":[0],"
                "\"data_offsets\":[18446744073709551615,18446744073709551615]}}",
                0, RLX_ERR_FORMAT, "run past the end", NULL);
    /* begin > end */
    expect_fail("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 16,
                RLX_ERR_FORMAT, "tensor 'x' data_offsets [8, 4] end before they begin", NULL);
    /* malformed pairs */
    expect_fail("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, RLX_ERR_FORMAT,
                "tensor 'x' data_offsets [ 0 ] is not a pair", NULL);
    expect_fail("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8,
                RLX_ERR_FORMAT, "data_offsets", "not a pair");
    expect_fail("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4,
                RLX_ERR_FORMAT, "data_offsets", "not a pair");
    expect_fail("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0.0,4.0]}}", 4,
                RLX_ERR_FORMAT, "data_offsets", "not a pair");
    expect_fail("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":\"0-4\"}}", 4,
                RLX_ERR_FORMAT, "data_offsets", "not a pair");
    expect_fail("{\"x\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, RLX_ERR_FORMAT,
                "tensor 'x' has no data_offsets", NULL);
}

static void size_mismatch(void **state)
{
    expect_fail(
        "{\"x\":{\"dtype\":\"F16\",\"shape\":[3,4],\"data_offsets\":[10,20]}}", 32, RLX_ERR_FORMAT,
        "tensor 'x' data_offsets [10, 20] hold 10 bytes but shape [3, 4] in F16 needs 24", NULL);
    expect_fail("{\"x\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,4]}}", 8,
                RLX_ERR_FORMAT, "hold 4 bytes but shape [] in I64 needs 8", NULL);
    /* element count overflows 64 bits */
    expect_fail("{\"x\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],"
                "\"data_offsets\":[0,0]}}",
                0, RLX_ERR_FORMAT, "shape [4294967296, 4294967296] in U8 needs more than 2^64",
                NULL);
    /* element count fits, bytes do not */
    expect_fail("{\"x\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904],"
                "\"data_offsets\":[0,0]}}",
                0, RLX_ERR_FORMAT, "needs more than 2^64", NULL);
    /* a zero dim makes the tensor empty however large the others are */
    expect_ok("{\"x\":{\"dtype\":\"F64\",\"shape\":[18446744073709551615,0,"
              "18446744073709551615],\"data_offsets\":[0,0]}}",
              0, 1);
}

static void overlap(void **state)
{
    expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                12, RLX_ERR_FORMAT, "tensors 'a' data_offsets [0, 8] and 'b' [4, 12] overlap",
                NULL);
    /* same range twice, listed out of order */
    expect_fail("{\"c\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[9,10]},"
                "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                "\"b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}",
                12, RLX_ERR_FORMAT, "overlap", NULL);
    /* one inside another */
    expect_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[16],\"data_offsets\":[0,16]},"
                "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[6,8]}}",
                16, RLX_ERR_FORMAT, "overlap", NULL);
    /* touching is fine, and so are gaps and empty tensors anywhere */
    expect_ok("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
              "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
              "\"c\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[15,16]}}",
              16, 4);
}

static void bad_shapes(void **state)
{
    expect_fail("{\"x\":{\"dtype\":\"F32\",\"shape\":[2,-3],\"data_offsets\":[0,0]}}", 0,
                RLX_ERR_FORMAT, "tensor 'x' shape dim 1 is negative (-3)", NULL);
    expect_fail("{\"x\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,10]}}", 10,
                RLX_ERR_FORMAT, "tensor 'x' shape dim 0 is a non-integer number", NULL);
    expect_fail("{\"x\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8,
                RLX_ERR_FORMAT, "shape dim 0 is a non-integer number", NULL);
    expect_fail("{\"x\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 8,
                RLX_ERR_FORMAT, "shape dim 0 is a string", NULL);
    expect_fail("{\"x\":{\"dtype\":\"F32\",\"shape\":[null],\"data_offsets\":[0,8]}}", 8,
                RLX_ERR_FORMAT, "shape dim 0 is null", NULL);
    expect_fail("{\"x\":{\"dtype\":\"F32\",\"shape\":[[2]],\"data_offsets\":[0,8]}}", 8,
                RLX_ERR_FORMAT, "shape dim 0 is an array", NULL);
    expect_fail("{\"x\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", 8, RLX_ERR_FORMAT,
                "tensor 'x' shape is an integer, not an array", NULL);
    expect_fail("{\"x\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, RLX_ERR_FORMAT,
                "tensor 'x' has no shape", NULL);
    expect_fail("{\"x\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}",
                4, RLX_ERR_UNSUPPORTED, "tensor 'x' shape has 9 dims", "at most 8");
    expect_ok("{\"x\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
              1);
}

static void truncated_real_file(void **state)
{
    size_t size = 0;
    uint8_t *raw = rlx_test_read_file(rlx_test_data("vae/taef2_decoder.safetensors"), &size);
    assert_non_null(raw);
    for (int k = 0; k < 16; k++) {
        size_t cut = size * (size_t)k / 16;
        /* a fresh allocation of exactly `cut` bytes so ASan sees any overread */
        uint8_t *p = malloc(cut ? cut : 1);
        assert_non_null(p);
        memcpy(p, raw, cut);
        rlx_safetensors *st = NULL;
        rlx_error *err = NULL;
        assert_int_equal(rlx_safetensors_open_memory(p, cut, "cut.safetensors", &st, &err),
                         RLX_ERR_FORMAT);
        assert_null(st);
        const char *msg = rlx_error_message(err);
        if (k == 0) {
            assert_non_null(strstr(msg, "file is 0 bytes, too short"));
        } else { /* the header (6544 bytes) survives every cut from 1/16 on */
            assert_non_null(strstr(msg, "cut.safetensors: tensor '"));
            assert_non_null(strstr(msg, "data_offsets"));
            assert_non_null(strstr(msg, "run past the end"));
        }
        rlx_error_free(err);
        free(p);
    }
    /* also every byte inside the length field and header */
    for (size_t cut = 0; cut < 6544 + 8; cut += 97) {
        uint8_t *p = malloc(cut ? cut : 1);
        memcpy(p, raw, cut);
        rlx_safetensors *st = NULL;
        assert_int_equal(rlx_safetensors_open_memory(p, cut, "cut", &st, NULL), RLX_ERR_FORMAT);
        free(p);
    }
    free(raw);
}

/* ---- index files ------------------------------------------------------- */

static char dir[4096];

static char *in_dir(const char *name)
{
    static char buf[8192];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
}

static void put(const char *name, const void *p, size_t n)
{
    assert_int_equal(rlx_test_write_file(in_dir(name), p, n), 0);
}

static void put_st(const char *name, const char *header, size_t data_size)
{
    size_t size;
    uint8_t *img = image(header, data_size, &size);
    put(name, img, size);
    free(img);
}

static void expect_index_fail(const char *index_json, rlx_status want, const char *sub1,
                              const char *sub2)
{
    put("model.safetensors.index.json", index_json, strlen(index_json));
    rlx_safetensors *st = NULL;
    rlx_error *err = NULL;
    rlx_status s = rlx_safetensors_open(in_dir("model.safetensors.index.json"), &st, &err);
    const char *msg = rlx_error_message(err);
    if (s != want)
        fail_msg("status %s, wanted %s: %s", rlx_status_name(s), rlx_status_name(want), msg);
    assert_null(st);
    if ((sub1 && !strstr(msg, sub1)) || (sub2 && !strstr(msg, sub2)))
        fail_msg("message \"%s\" lacks \"%s\" / \"%s\"", msg, sub1 ? sub1 : "", sub2 ? sub2 : "");
    rlx_error_free(err);
    /* the folder route reports the same problem */
    err = NULL;
    assert_int_equal(rlx_safetensors_open(dir, &st, &err), want);
    rlx_error_free(err);
}

static void bad_index(void **state)
{
    snprintf(dir, sizeof dir, "%s", rlx_test_tmp("index"));
    mkdir(dir, 0700);
    put_st("a.safetensors",
           "{\"__metadata__\":{\"format\":\"pt\"},"
           "\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
           4);
    put_st("b.safetensors", "{\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    put_st("dup.safetensors", "{\"x\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
           4);
    put("broken.safetensors", "\x02\0\0\0\0\0\0\0[]", 10);

    /* the good case first, so failures below are the index's fault */
    const char *good = "{\"weight_map\":{\"x\":\"a.safetensors\",\"y\":\"b.safetensors\"}}";
    put("model.safetensors.index.json", good, strlen(good));
    rlx_safetensors *st = NULL;
    rlx_error *err = NULL;
    if (rlx_safetensors_open(dir, &st, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    assert_int_equal(rlx_safetensors_n_shards(st), 2);
    assert_int_equal(rlx_safetensors_n_tensors(st), 2);
    rlx_safetensors_close(st);

    expect_index_fail("{\"weight_map\":{\"x\":\"a.safetensors\",\"y\":\"missing.safetensors\"}}",
                      RLX_ERR_IO, "cannot open", "missing.safetensors");
    expect_index_fail("[\"a.safetensors\"]", RLX_ERR_FORMAT,
                      "model.safetensors.index.json: index is an array, not a JSON object", NULL);
    expect_index_fail("{\"weight_map\":", RLX_ERR_FORMAT, "index is not valid JSON", NULL);
    expect_index_fail("", RLX_ERR_FORMAT, "index is not valid JSON", NULL);
    expect_index_fail("{\"metadata\":{}}", RLX_ERR_FORMAT, "index has no weight_map", NULL);
    expect_index_fail("{\"weight_map\":[\"a.safetensors\"]}", RLX_ERR_FORMAT,
                      "weight_map is an array, not an object", NULL);
    expect_index_fail("{\"weight_map\":{}}", RLX_ERR_FORMAT, "weight_map is empty", NULL);
    expect_index_fail("{\"weight_map\":{\"x\":3}}", RLX_ERR_FORMAT, "weight_map entry 'x' is 3",
                      NULL);
    expect_index_fail("{\"weight_map\":{\"x\":\"../a.safetensors\"}}", RLX_ERR_FORMAT,
                      "weight_map entry 'x'", "not a file name");
    expect_index_fail("{\"weight_map\":{\"x\":\"/etc/passwd\"}}", RLX_ERR_FORMAT,
                      "weight_map entry 'x'", "not a file name");
    expect_index_fail("{\"weight_map\":{\"x\":\"\"}}", RLX_ERR_FORMAT, "not a file name", NULL);
    /* a tensor listed in the index must be in the shard it names */
    expect_index_fail("{\"weight_map\":{\"x\":\"a.safetensors\",\"z\":\"b.safetensors\"}}",
                      RLX_ERR_FORMAT, "tensor 'z' in b.safetensors, but no shard holds it", NULL);
    expect_index_fail("{\"weight_map\":{\"x\":\"b.safetensors\",\"y\":\"a.safetensors\"}}",
                      RLX_ERR_FORMAT, "tensor 'x' in b.safetensors, but it is in a.safetensors",
                      NULL);
    /* the same tensor in two shards */
    expect_index_fail("{\"weight_map\":{\"x\":\"a.safetensors\",\"y\":\"dup.safetensors\"}}",
                      RLX_ERR_FORMAT, "tensor 'x' appears in both a.safetensors and dup", NULL);
    /* a broken shard: the message says which shard */
    expect_index_fail("{\"weight_map\":{\"x\":\"a.safetensors\",\"y\":\"broken.safetensors\"}}",
                      RLX_ERR_FORMAT, "names shard broken.safetensors",
                      "broken.safetensors: header is an array");

    const char *files[] = {"a.safetensors", "b.safetensors", "dup.safetensors",
                           "broken.safetensors", "model.safetensors.index.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        unlink(in_dir(files[i]));
    rmdir(dir);
}

static void not_a_file(void **state)
{
    /* a folder named like a safetensors file */
    char d[4096];
    snprintf(d, sizeof d, "%s", rlx_test_tmp("folder.safetensors"));
    mkdir(d, 0700);
    rlx_safetensors *st = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_safetensors_open(d, &st, &err), RLX_ERR_IO);
    rlx_error_free(err);
    rmdir(d);
    /* an empty file on disk (mmap of 0 bytes would fail with EINVAL) */
    const char *p = rlx_test_tmp("empty.safetensors");
    assert_int_equal(rlx_test_write_file(p, "", 0), 0);
    err = NULL;
    assert_int_equal(rlx_safetensors_open(p, &st, &err), RLX_ERR_FORMAT);
    assert_non_null(strstr(rlx_error_message(err), "empty.safetensors: file is 0 bytes"));
    rlx_error_free(err);
    unlink(p);
    assert_int_equal(rlx_safetensors_open_memory(NULL, 5, "x", &st, NULL), RLX_ERR_INVALID_ARG);
}

int main(void)
{
    rlx_test_need_data("vae/taef2_decoder.safetensors", NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(header_not_object),
        cmocka_unit_test(invalid_json),
        cmocka_unit_test(header_length),
        cmocka_unit_test(unknown_dtype),
        cmocka_unit_test(offsets),
        cmocka_unit_test(size_mismatch),
        cmocka_unit_test(overlap),
        cmocka_unit_test(bad_shapes),
        cmocka_unit_test(truncated_real_file),
        cmocka_unit_test(bad_index),
        cmocka_unit_test(not_a_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
