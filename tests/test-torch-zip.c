#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/formats/torch-zip.h"
#include "test-util.h"

/* The checkpoints under tests/fixtures/torch/ were written by torch.save
 * (tests/reference/make-torch-fixtures.py), and torch-expected.json holds
 * what torch itself reports for them: names, dtypes, shapes, strides, storage
 * offsets, contiguity and every value. Values are compared exactly: F16 and
 * BF16 widen to float without rounding, and JSON carries the F32/F64 values
 * as Python floats (doubles), which hold them exactly. */

#define FIXTURE(name) RLX_TEST_SOURCE_DIR "/tests/fixtures/torch/" name

static json_object *expected_all;

static int setup(void **state)
{
    (void)state;
    expected_all = json_object_from_file(FIXTURE("torch-expected.json"));
    return expected_all ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    json_object_put(expected_all);
    return 0;
}

static double element(const uint8_t *p, rlx_dtype dt)
{
    switch (dt) {
    case RLX_DTYPE_F32: {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    case RLX_DTYPE_F64: {
        double d;
        memcpy(&d, p, 8);
        return d;
    }
    case RLX_DTYPE_F16:
    case RLX_DTYPE_BF16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return dt == RLX_DTYPE_F16 ? rlx_f16_to_f32(h) : rlx_bf16_to_f32(h);
    }
    case RLX_DTYPE_I32: {
        int32_t i;
        memcpy(&i, p, 4);
        return i;
    }
    case RLX_DTYPE_U8:
    case RLX_DTYPE_BOOL:
        return *p;
    default:
        fail_msg("unexpected dtype %s", rlx_dtype_name(dt));
    }
    return 0;
}

/* Element `flat` (row-major over the shape) through the recorded strides. */
static const uint8_t *element_at(const uint8_t *image, const rlx_torch_tensor *t, uint64_t flat)
{
    uint64_t es = 0;
    assert_int_equal(rlx_dtype_row_bytes(t->dtype, 1, &es), RLX_OK);
    uint64_t off = 0;
    for (uint32_t d = t->n_dims; d-- > 0;) {
        off += (flat % t->shape[d]) * t->stride[d];
        flat /= t->shape[d];
    }
    return image + t->file_offset + off * es;
}

static void check_against_expected(const rlx_torch_zip *tz, const uint8_t *image,
                                   const char *fixture)
{
    json_object *want = json_object_object_get(expected_all, fixture);
    assert_non_null(want);
    assert_string_equal(rlx_torch_zip_prefix(tz),
                        json_object_get_string(json_object_object_get(want, "prefix")));
    assert_string_equal(rlx_torch_zip_root(tz),
                        json_object_get_string(json_object_object_get(want, "root")));
    json_object *list = json_object_object_get(want, "tensors");
    size_t n = json_object_array_length(list);
    assert_int_equal(rlx_torch_zip_n_tensors(tz), n);
    for (size_t i = 0; i < n; i++) {
        json_object *w = json_object_array_get_idx(list, i);
        const char *name = json_object_get_string(json_object_object_get(w, "name"));
        const rlx_torch_tensor *t = rlx_torch_zip_tensor_at(tz, i);
        assert_non_null(t);
        assert_string_equal(t->name, name); /* pickle order */
        assert_ptr_equal(rlx_torch_zip_find(tz, name), t);
        assert_string_equal(rlx_dtype_name(t->dtype),
                            json_object_get_string(json_object_object_get(w, "dtype")));
        json_object *shape = json_object_object_get(w, "shape");
        json_object *stride = json_object_object_get(w, "stride");
        assert_int_equal(t->n_dims, json_object_array_length(shape));
        uint64_t numel = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            assert_int_equal(t->shape[d],
                             json_object_get_int64(json_object_array_get_idx(shape, d)));
            assert_int_equal(t->stride[d],
                             json_object_get_int64(json_object_array_get_idx(stride, d)));
            numel *= t->shape[d];
        }
        assert_int_equal(t->n_elements, numel);
        assert_int_equal(t->storage_offset,
                         json_object_get_int64(json_object_object_get(w, "storage_offset")));
        bool contig = json_object_get_boolean(json_object_object_get(w, "contiguous"));
        assert_int_equal(t->contiguous, contig);
        assert_int_equal(t->requires_grad,
                         json_object_get_boolean(json_object_object_get(w, "requires_grad")));
        const uint8_t *data = rlx_torch_zip_data(tz, t);
        if (contig)
            assert_ptr_equal(data, element_at(image, t, 0));
        else
            assert_null(data);
        json_object *vals = json_object_object_get(w, "values");
        assert_int_equal(json_object_array_length(vals), numel);
        for (uint64_t k = 0; k < numel; k++) {
            json_object *jv = json_object_array_get_idx(vals, k);
            const uint8_t *p = element_at(image, t, k);
            if (t->dtype == RLX_DTYPE_I64) {
                int64_t v;
                memcpy(&v, p, 8);
                assert_int_equal(v, json_object_get_int64(jv));
            } else {
                double got = element(p, t->dtype);
                if (got != json_object_get_double(jv))
                    fail_msg("%s %s[%llu]: %.17g, torch says %.17g", fixture, name,
                             (unsigned long long)k, got, json_object_get_double(jv));
            }
        }
    }
}

static void check_fixture(const char *fixture)
{
    char path[512];
    snprintf(path, sizeof path, "%s/tests/fixtures/torch/%s", RLX_TEST_SOURCE_DIR, fixture);
    rlx_error *err = NULL;
    rlx_torch_zip *tz = NULL;
    rlx_status s = rlx_torch_zip_open(path, &tz, &err);
    if (s != RLX_OK)
        fail_msg("%s: %s", fixture, rlx_error_message(err));
    /* the file's own mapping is the image its pointers point into */
    const rlx_torch_tensor *t0 = rlx_torch_zip_tensor_at(tz, 0);
    const uint8_t *image = NULL;
    for (uint64_t i = 0; i < rlx_torch_zip_n_tensors(tz) && !image; i++) {
        const rlx_torch_tensor *t = rlx_torch_zip_tensor_at(tz, i);
        if (t->contiguous)
            image = (const uint8_t *)rlx_torch_zip_data(tz, t) - t->file_offset;
    }
    assert_non_null(t0);
    assert_non_null(image);
    check_against_expected(tz, image, fixture);
    rlx_torch_zip_close(tz);

    /* the same bytes from memory */
    size_t size = 0;
    uint8_t *buf = rlx_test_read_file(path, &size);
    assert_non_null(buf);
    s = rlx_torch_zip_open_memory(buf, size, fixture, &tz, &err);
    if (s != RLX_OK)
        fail_msg("%s from memory: %s", fixture, rlx_error_message(err));
    check_against_expected(tz, buf, fixture);
    rlx_torch_zip_close(tz);
    free(buf);
}

static void test_basic(void **state)
{
    (void)state;
    check_fixture("torch-basic.pt");
    /* a view shares its base's storage */
    rlx_torch_zip *tz = NULL;
    assert_int_equal(rlx_torch_zip_open(FIXTURE("torch-basic.pt"), &tz, NULL), RLX_OK);
    const rlx_torch_tensor *base = rlx_torch_zip_find(tz, "base");
    const rlx_torch_tensor *view = rlx_torch_zip_find(tz, "view");
    assert_non_null(base);
    assert_non_null(view);
    assert_string_equal(base->storage_key, view->storage_key);
    assert_int_equal(view->file_offset, base->file_offset + 5 * 4);
    assert_null(rlx_torch_zip_find(tz, "step")); /* an int, not a tensor */
    assert_null(rlx_torch_zip_find(tz, "nope"));
    rlx_torch_zip_close(tz);
}

static void test_nested(void **state)
{
    (void)state;
    check_fixture("torch-nested.pt");
}

static void test_other_prefix(void **state)
{
    (void)state;
    check_fixture("sam_vit_b_tiny.pth");
}

/* nn.Module.state_dict(): _metadata set by BUILD, a 0-d I64 counter */
static void test_state_dict(void **state)
{
    (void)state;
    check_fixture("torch-state-dict.pt");
}

static void test_zip64(void **state)
{
    (void)state;
    check_fixture("torch-zip64.pt");
}

static void expect_failure(const char *path, rlx_status code, const char *needle)
{
    rlx_torch_zip *tz = (rlx_torch_zip *)1;
    rlx_error *err = NULL;
    rlx_status s = rlx_torch_zip_open(path, &tz, &err);
    assert_null(tz);
    if (s != code || !strstr(rlx_error_message(err), needle))
        fail_msg("%s: got %s '%s', wanted %s with '%s'", path, rlx_status_name(s),
                 rlx_error_message(err), rlx_status_name(code), needle);
    rlx_error_free(err);
}

static void test_evil(void **state)
{
    (void)state;
    expect_failure(FIXTURE("torch-evil.pt"), RLX_ERR_UNSUPPORTED, "'posix.system'");
    expect_failure(FIXTURE("torch-evil.pt"), RLX_ERR_UNSUPPORTED, "it was not run");
}

static void test_compressed(void **state)
{
    (void)state;
    expect_failure(FIXTURE("torch-compressed.pt"), RLX_ERR_UNSUPPORTED, "is compressed");
}

static void test_offset_past_storage(void **state)
{
    (void)state;
    expect_failure(FIXTURE("torch-offset.pt"), RLX_ERR_FORMAT,
                   "reaches element 5 of storage '0', which holds 4");
}

static void test_not_a_checkpoint(void **state)
{
    (void)state;
    expect_failure(FIXTURE("torch-expected.json"), RLX_ERR_FORMAT, "not a PyTorch checkpoint");
    expect_failure(FIXTURE("does-not-exist.pt"), RLX_ERR_IO, "cannot open");
    /* the pre-1.6 format starts with PROTO 2, LONG1 (its magic number) */
    static const uint8_t legacy[32] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46};
    rlx_error *err = NULL;
    rlx_torch_zip *tz = NULL;
    assert_int_equal(rlx_torch_zip_open_memory(legacy, sizeof legacy, "old.pt", &tz, &err),
                     RLX_ERR_UNSUPPORTED);
    assert_non_null(strstr(rlx_error_message(err), "legacy"));
    rlx_error_free(err);
    assert_true(rlx_torch_zip_sniff("PK\x03\x04", 4));
    assert_false(rlx_torch_zip_sniff("GGUF", 4));
}

/* Every prefix of a good file fails with a sentence, never a crash. */
static void cut_everywhere(const char *fixture)
{
    char path[512];
    snprintf(path, sizeof path, "%s/tests/fixtures/torch/%s", RLX_TEST_SOURCE_DIR, fixture);
    size_t size = 0;
    uint8_t *buf = rlx_test_read_file(path, &size);
    assert_non_null(buf);
    for (size_t cut = 0; cut < size; cut++) {
        /* a fresh, exact-size copy so ASan sees any read past the cut */
        uint8_t *part = malloc(cut ? cut : 1);
        memcpy(part, buf, cut);
        rlx_torch_zip *tz = NULL;
        rlx_error *err = NULL;
        rlx_status s = rlx_torch_zip_open_memory(part, cut, fixture, &tz, &err);
        if (s == RLX_OK)
            fail_msg("%s cut at %zu bytes of %zu opened", fixture, cut, size);
        assert_true(rlx_error_message(err)[0] != '\0');
        rlx_error_free(err);
        free(part);
    }
    free(buf);
}

static void test_truncated(void **state)
{
    (void)state;
    cut_everywhere("torch-basic.pt");
    cut_everywhere("torch-zip64.pt");
}

/* ---- hand-built archives around hand-written pickles ------------------- */

static uint32_t crc32_ref(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
    }
    return c ^ 0xffffffffu;
}

typedef struct {
    const char *name;
    const void *data;
    size_t size;
} zentry;

static void put16(uint8_t **p, uint16_t v)
{
    (*p)[0] = (uint8_t)v;
    (*p)[1] = (uint8_t)(v >> 8);
    *p += 2;
}

static void put32(uint8_t **p, uint32_t v)
{
    put16(p, (uint16_t)v);
    put16(p, (uint16_t)(v >> 16));
}

/* A minimal stored zip; malloc'd, *size set. */
static uint8_t *make_zip(const zentry *e, size_t n, size_t *size)
{
    uint8_t *buf = calloc(1, 65536), *p = buf;
    uint32_t offs[16];
    for (size_t i = 0; i < n; i++) {
        offs[i] = (uint32_t)(p - buf);
        size_t nl = strlen(e[i].name);
        put32(&p, 0x04034b50);
        put16(&p, 20);
        put16(&p, 0);
        put16(&p, 0);
        put32(&p, 0);
        put32(&p, crc32_ref(e[i].data, e[i].size));
        put32(&p, (uint32_t)e[i].size);
        put32(&p, (uint32_t)e[i].size);
        put16(&p, (uint16_t)nl);
        put16(&p, 0);
        memcpy(p, e[i].name, nl);
        p += nl;
        memcpy(p, e[i].data, e[i].size);
        p += e[i].size;
    }
    uint8_t *cd = p;
    for (size_t i = 0; i < n; i++) {
        size_t nl = strlen(e[i].name);
        put32(&p, 0x02014b50);
        put16(&p, 20);
        put16(&p, 20);
        put16(&p, 0);
        put16(&p, 0);
        put32(&p, 0);
        put32(&p, crc32_ref(e[i].data, e[i].size));
        put32(&p, (uint32_t)e[i].size);
        put32(&p, (uint32_t)e[i].size);
        put16(&p, (uint16_t)nl);
        put16(&p, 0);
        put16(&p, 0);
        put16(&p, 0);
        put16(&p, 0);
        put32(&p, 0);
        put32(&p, offs[i]);
        memcpy(p, e[i].name, nl);
        p += nl;
    }
    uint32_t cd_size = (uint32_t)(p - cd), cd_off = (uint32_t)(cd - buf);
    put32(&p, 0x06054b50);
    put16(&p, 0);
    put16(&p, 0);
    put16(&p, (uint16_t)n);
    put16(&p, (uint16_t)n);
    put32(&p, cd_size);
    put32(&p, cd_off);
    put16(&p, 0);
    *size = (size_t)(p - buf);
    return buf;
}

static const float four[4] = {1, 2, 3, 4};

/* Wraps a pickle as "a/data.pkl" beside a 16-byte storage "a/data/0" (and
 * "a/byteorder" when given) and opens it from an exact-size copy; on success
 * *out and *image are the caller's to free. */
static rlx_status open_pickle(const void *pkl, size_t n, const char *byteorder, rlx_error **err,
                              rlx_torch_zip **out, uint8_t **image)
{
    zentry e[3] = {{"a/data.pkl", pkl, n}, {"a/data/0", four, sizeof four}, {NULL, NULL, 0}};
    size_t ne = 2;
    if (byteorder)
        e[ne++] = (zentry){"a/byteorder", byteorder, strlen(byteorder)};
    size_t size;
    uint8_t *zip = make_zip(e, ne, &size);
    uint8_t *exact = malloc(size);
    memcpy(exact, zip, size);
    free(zip);
    rlx_torch_zip *tz = NULL;
    rlx_status s = rlx_torch_zip_open_memory(exact, size, "hand.pt", &tz, err);
    if (out && s == RLX_OK) {
        *out = tz;
        *image = exact;
        return s;
    }
    rlx_torch_zip_close(tz);
    free(exact);
    return s;
}

#define PKL(s) (const uint8_t *)(s), sizeof(s) - 1

static void expect_pickle(const uint8_t *pkl, size_t n, rlx_status code, const char *needle)
{
    rlx_error *err = NULL;
    rlx_status s = open_pickle(pkl, n, NULL, &err, NULL, NULL);
    if (s != code || !strstr(rlx_error_message(err), needle))
        fail_msg("got %s '%s', wanted %s with '%s'", rlx_status_name(s), rlx_error_message(err),
                 rlx_status_name(code), needle);
    rlx_error_free(err);
}

/* {"w": _rebuild_tensor_v2(storage "0" of 4 floats, ... : the test appends
 * offset, size, stride, False, {}, then "tRu." (strings are split after hex
 * escapes so that the next letter is not read as a hex digit) */
#define TENSOR_PREFIX                     \
    "\x80\x02}(X\x01\x00\x00\x00"         \
    "w"                                   \
    "ctorch._utils\n_rebuild_tensor_v2\n" \
    "((X\x07\x00\x00\x00"                 \
    "storage"                             \
    "ctorch\nFloatStorage\n"              \
    "X\x01\x00\x00\x00"                   \
    "0"                                   \
    "X\x03\x00\x00\x00"                   \
    "cpu"                                 \
    "K\x04tQ"

static void test_hostile_pickles(void **state)
{
    (void)state;
    /* a good one first, so the failures below fail for their own reason */
    rlx_error *err = NULL;
    rlx_torch_zip *tz = NULL;
    uint8_t *image = NULL;
    static const char good[] = TENSOR_PREFIX "K\x01K\x02\x85K\x01\x85\x89}tRu.";
    assert_int_equal(open_pickle(PKL(good), NULL, &err, &tz, &image), RLX_OK);
    const rlx_torch_tensor *t = rlx_torch_zip_find(tz, "w");
    assert_non_null(t);
    assert_int_equal(t->n_elements, 2);
    float first; /* the hand-built zip does not align its storages */
    memcpy(&first, rlx_torch_zip_data(tz, t), sizeof first);
    assert_true(first == 2.0f);
    assert_string_equal(rlx_torch_zip_prefix(tz), "a/");
    rlx_torch_zip_close(tz);
    free(image);

    assert_int_equal(open_pickle(PKL(good), "big", &err, NULL, NULL), RLX_ERR_UNSUPPORTED);
    assert_non_null(strstr(rlx_error_message(err), "big-endian"));
    rlx_error_clear(&err);
    assert_int_equal(open_pickle(PKL(good), "little", &err, NULL, NULL), RLX_OK);

    expect_pickle(PKL("\x80\x02"
                      "cbuiltins\neval\n."),
                  RLX_ERR_UNSUPPORTED, "'builtins.eval'");
    expect_pickle(PKL("\x80\x02X\x02\x00\x00\x00"
                      "os"
                      "X\x06\x00\x00\x00"
                      "system\x93."),
                  RLX_ERR_UNSUPPORTED, "'os.system'");
    expect_pickle(PKL("\x80\x02"
                      "ctorch\nComplexFloatStorage\n."),
                  RLX_ERR_UNSUPPORTED, "ComplexFloatStorage");
    expect_pickle(PKL("\x80\x02."), RLX_ERR_FORMAT, "pops an empty stack");
    expect_pickle(PKL("\x80\x02}"), RLX_ERR_FORMAT, "without STOP");
    expect_pickle(PKL("\x80\x02X\xff\x00\x00\x00"
                      "ab."),
                  RLX_ERR_FORMAT, "runs past the end");
    expect_pickle(PKL("\x80\x02}h\x05."), RLX_ERR_FORMAT, "read before it is written");
    expect_pickle(PKL("\x80\x02}q\x07."), RLX_ERR_FORMAT, "skips past");
    expect_pickle(PKL("\x80\x02]."), RLX_ERR_UNSUPPORTED, "not a dict");
    expect_pickle(PKL("\x80\x02\xff."), RLX_ERR_FORMAT, "opcode 0xff");
    expect_pickle(PKL("\x80\x02\x8a\x09\x01\x01\x01\x01\x01\x01\x01\x01\x01."), RLX_ERR_UNSUPPORTED,
                  "does not fit 64 bits");
    expect_pickle(PKL("\x80\x02}K\x01s."), RLX_ERR_FORMAT, "too few items");
    expect_pickle(PKL("\x80\x02]K\x01u."), RLX_ERR_FORMAT, "without a MARK");
    expect_pickle(PKL("\x80\x02](K\x01K\x02u."), RLX_ERR_FORMAT, "not a dict");
    /* a dict holding itself: flattening must stop */
    expect_pickle(PKL("\x80\x02}q\x00(X\x01\x00\x00\x00"
                      "ah\x00u."),
                  RLX_ERR_FORMAT, "nests deeper");
    /* a storage the archive lacks, and one its entry is too small for */
    expect_pickle(PKL("\x80\x02}(X\x01\x00\x00\x00"
                      "w(X\x07\x00\x00\x00"
                      "storagectorch\nFloatStorage\nX\x01\x00\x00\x00"
                      "9X\x03\x00\x00\x00"
                      "cpuK\x04tQu."),
                  RLX_ERR_FORMAT, "has no entry a/data/9");
    expect_pickle(PKL("\x80\x02}(X\x01\x00\x00\x00"
                      "w(X\x07\x00\x00\x00"
                      "storagectorch\nFloatStorage\nX\x01\x00\x00\x00"
                      "0X\x03\x00\x00\x00"
                      "cpuK\x05tQu."),
                  RLX_ERR_FORMAT, "has only 16 bytes");
    /* past the storage through a stride; nine dims; a negative size */
    expect_pickle(PKL(TENSOR_PREFIX "K\x00K\x02\x85K\x04\x85\x89}tRu."), RLX_ERR_FORMAT,
                  "reaches element 4");
    expect_pickle(PKL(TENSOR_PREFIX "K\x00(K\x01K\x01K\x01K\x01K\x01K\x01K\x01K\x01K\x01t"
                                    "(K\x01K\x01K\x01K\x01K\x01K\x01K\x01K\x01K\x01t\x89}tRu."),
                  RLX_ERR_UNSUPPORTED, "9 dims");
    expect_pickle(PKL(TENSOR_PREFIX "K\x00J\xff\xff\xff\xff\x85K\x01\x85\x89}tRu."), RLX_ERR_FORMAT,
                  "not a non-negative int");
    /* calling a storage type */
    expect_pickle(PKL("\x80\x02"
                      "ctorch\nFloatStorage\n)R."),
                  RLX_ERR_FORMAT, "never does");
    /* two tensors under one name */
    expect_pickle(PKL(TENSOR_PREFIX "K\x00K\x01\x85K\x01\x85\x89}tRq\x00X\x01\x00\x00\x00"
                                    "wh\x00u."),
                  RLX_ERR_FORMAT, "two tensors are named 'w'");
    /* MARKs nested past the limit */
    size_t n = RLX_TORCH_MAX_MARKS + 10;
    uint8_t *p = malloc(n + 3);
    p[0] = 0x80;
    p[1] = 2;
    memset(p + 2, '(', n);
    p[n + 2] = '.';
    expect_pickle(p, n + 3, RLX_ERR_FORMAT, "MARKs nest deeper");
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_nested),
        cmocka_unit_test(test_other_prefix),
        cmocka_unit_test(test_state_dict),
        cmocka_unit_test(test_zip64),
        cmocka_unit_test(test_evil),
        cmocka_unit_test(test_compressed),
        cmocka_unit_test(test_offset_past_storage),
        cmocka_unit_test(test_not_a_checkpoint),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_hostile_pickles),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
