/* The GGUF reader on broken and hostile files: each must fail with the
 * right status and a message naming the field, never crash or over-read. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/formats/gguf.h"
#include "test-util.h"

/* ---- a byte builder for hand-made files ---------------------------------- */

typedef struct bytes {
    uint8_t *p;
    size_t n, cap;
} bytes;

static void put(bytes *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    if (n)
        memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void u32(bytes *b, uint32_t v)
{
    uint8_t le[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, le, 4);
}

static void u64(bytes *b, uint64_t v)
{
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)(v >> (8 * i));
    put(b, le, 8);
}

static void str(bytes *b, const char *s)
{
    u64(b, strlen(s));
    put(b, s, strlen(s));
}

static void header(bytes *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    b->n = 0;
    put(b, "GGUF", 4);
    u32(b, version);
    u64(b, n_tensors);
    u64(b, n_kv);
}

static void kv_u32(bytes *b, const char *key, uint32_t v)
{
    str(b, key);
    u32(b, RLX_GGUF_TYPE_UINT32);
    u32(b, v);
}

static void tensor(bytes *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                   uint64_t offset)
{
    str(b, name);
    u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++)
        u64(b, ne[i]);
    u32(b, type);
    u64(b, offset);
}

static void pad_zeros(bytes *b, size_t align, size_t extra)
{
    static const uint8_t z[4096];
    while (b->n % align)
        put(b, z, 1);
    while (extra) {
        size_t k = extra < sizeof z ? extra : sizeof z;
        put(b, z, k);
        extra -= k;
    }
}

/* Open the bytes as "bad.gguf" and check status and message. */
static void expect_fail(const bytes *b, rlx_status want, const char *needle)
{
    rlx_gguf *g = (rlx_gguf *)1;
    rlx_error *err = NULL;
    rlx_status s = rlx_gguf_open_memory(b->p, b->n, "bad.gguf", &g, &err);
    if (s != want)
        fail_msg("status %s, expected %s (%s)", rlx_status_name(s), rlx_status_name(want),
                 rlx_error_message(err));
    assert_null(g);
    const char *msg = rlx_error_message(err);
    if (strncmp(msg, "bad.gguf: ", 10) != 0 || !strstr(msg, needle))
        fail_msg("message '%s' should start with the file name and contain '%s'", msg, needle);
    rlx_error_free(err);
}

static void expect_ok(const bytes *b)
{
    rlx_gguf *g = NULL;
    rlx_error *err = NULL;
    if (rlx_gguf_open_memory(b->p, b->n, "good.gguf", &g, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    rlx_gguf_close(g);
}

/* ---- tests --------------------------------------------------------------- */

static void truncated_real_file(void **state)
{
    size_t size = 0;
    uint8_t *data = rlx_test_read_file(rlx_test_data("llm/stories260K.gguf"), &size);
    assert_non_null(data);
    /* every 1/16th, then every byte of the first part of the header */
    for (int k = 0; k < 16; k++) {
        size_t n = size / 16 * (size_t)k;
        /* a copy of exactly n bytes, so ASan sees any over-read */
        uint8_t *cut = malloc(n ? n : 1);
        memcpy(cut, data, n);
        rlx_gguf *g = (rlx_gguf *)1;
        rlx_error *err = NULL;
        rlx_status s = rlx_gguf_open_memory(cut, n, "stories260K.gguf", &g, &err);
        if (s != RLX_ERR_FORMAT)
            fail_msg("cut at %zu: %s (%s)", n, rlx_status_name(s), rlx_error_message(err));
        assert_null(g);
        const char *msg = rlx_error_message(err);
        assert_non_null(strstr(msg, "stories260K.gguf: "));
        if (n >= 4 && !strstr(msg, "past the end") && !strstr(msg, "bytes left"))
            fail_msg("cut at %zu: '%s' does not say the file is short", n, msg);
        /* past the header, the message names a tensor's data */
        if (n > 14176)
            assert_non_null(strstr(msg, "tensor '"));
        rlx_error_free(err);
        free(cut);
    }
    for (size_t n = 0; n < 2048; n++) {
        uint8_t *cut = malloc(n ? n : 1);
        memcpy(cut, data, n);
        rlx_gguf *g = NULL;
        rlx_error *err = NULL;
        assert_int_equal(rlx_gguf_open_memory(cut, n, "stories260K.gguf", &g, &err),
                         RLX_ERR_FORMAT);
        rlx_error_free(err);
        free(cut);
    }
    /* the whole file through the mapping path, truncated on disk */
    const char *path = rlx_test_tmp("cut.gguf");
    assert_int_equal(rlx_test_write_file(path, data, size - 100), 0);
    rlx_gguf *g = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_gguf_open(path, &g, &err), RLX_ERR_FORMAT);
    assert_non_null(strstr(rlx_error_message(err),
                           "cut.gguf: tensor 'blk.4.ffn_norm.weight' data (offset 1170944, 256 "
                           "bytes) runs past the end of the file (size 1185276"));
    rlx_error_clear(&err);
    assert_int_equal(rlx_test_write_file(path, data, 0), 0);
    assert_int_equal(rlx_gguf_open(path, &g, &err), RLX_ERR_FORMAT);
    rlx_error_clear(&err);
    remove(path);
    free(data);
}

/* Random byte corruption of the header: any status, no crash, no leak. */
static void corrupted_header_bytes(void **state)
{
    size_t size = 0;
    uint8_t *data = rlx_test_read_file(rlx_test_data("llm/stories260K.gguf"), &size);
    assert_non_null(data);
    uint8_t *copy = malloc(size);
    uint32_t seed = 12345;
    int ok = 0;
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(copy, data, size);
        for (int k = 0; k < 1 + iter % 4; k++) {
            seed = seed * 1664525u + 1013904223u;
            size_t at = (seed >> 8) % 14176;
            seed = seed * 1664525u + 1013904223u;
            copy[at] = (uint8_t)(seed >> 24);
        }
        rlx_gguf *g = NULL;
        rlx_error *err = NULL;
        rlx_status s = rlx_gguf_open_memory(copy, size, "flip.gguf", &g, &err);
        if (s == RLX_OK) {
            ok++;
            const rlx_gguf_value *tok = rlx_gguf_find(g, "tokenizer.ggml.tokens");
            if (tok && tok->type == RLX_GGUF_TYPE_ARRAY)
                for (uint64_t i = 0; i < tok->v.arr.count; i++) {
                    rlx_gguf_value v;
                    assert_int_equal(rlx_gguf_array_get(g, tok, i, &v, &err), RLX_OK);
                }
            rlx_gguf_close(g);
        } else {
            assert_non_null(strstr(rlx_error_message(err), "flip.gguf"));
        }
        rlx_error_free(err);
    }
    assert_true(ok > 0);
    free(copy);
    free(data);
}

static void bad_magic_and_version(void **state)
{
    bytes b = {0};
    header(&b, 3, 0, 0);
    expect_ok(&b);
    memcpy(b.p, "GGML", 4);
    expect_fail(&b, RLX_ERR_FORMAT, "not a GGUF file: the magic is 'GGML'");
    header(&b, 99, 0, 0);
    expect_fail(&b, RLX_ERR_UNSUPPORTED, "GGUF version 99 is not supported");
    header(&b, 1, 0, 0);
    expect_fail(&b, RLX_ERR_UNSUPPORTED, "GGUF version 1 is not supported");
    header(&b, 0x03000000u, 0, 0);
    expect_fail(&b, RLX_ERR_UNSUPPORTED, "big-endian");
    header(&b, 2, 0, 0);
    expect_ok(&b);
    b.n = 10;
    expect_fail(&b, RLX_ERR_FORMAT, "the tensor count");
    free(b.p);
}

static void absurd_counts(void **state)
{
    bytes b = {0};
    header(&b, 3, 1ull << 40, 0);
    expect_fail(&b, RLX_ERR_FORMAT, "the tensor count 1099511627776 is impossible");
    header(&b, 3, 0, 1ull << 60);
    expect_fail(&b, RLX_ERR_FORMAT, "the key/value count 1152921504606846976 is impossible");
    header(&b, 3, UINT64_MAX, UINT64_MAX);
    expect_fail(&b, RLX_ERR_FORMAT, "key/value count");
    /* a plausible count but not enough entries */
    header(&b, 3, 0, 2);
    kv_u32(&b, "a", 1);
    u64(&b, 5);
    put(&b, "ab", 2);
    expect_fail(&b, RLX_ERR_FORMAT, "key #1: the key name has string length 5 at offset 41");
    free(b.p);
}

static void absurd_lengths(void **state)
{
    bytes b = {0};
    /* key name length 2^62 */
    header(&b, 3, 0, 1);
    u64(&b, 1ull << 62);
    put(&b, "general.name\x08\0\0\0", 16);
    expect_fail(&b, RLX_ERR_FORMAT, "key #0: the key name has string length 4611686018427387904");
    /* string value length 2^62 */
    header(&b, 3, 0, 1);
    str(&b, "general.name");
    u32(&b, RLX_GGUF_TYPE_STRING);
    u64(&b, 1ull << 62);
    put(&b, "abc", 3);
    expect_fail(&b, RLX_ERR_FORMAT, "key 'general.name': the string value has string length");
    /* array of 2^61 uint32 */
    header(&b, 3, 0, 1);
    str(&b, "tokenizer.ggml.scores");
    u32(&b, RLX_GGUF_TYPE_ARRAY);
    u32(&b, RLX_GGUF_TYPE_UINT32);
    u64(&b, 1ull << 61);
    u32(&b, 0);
    expect_fail(&b, RLX_ERR_FORMAT,
                "key 'tokenizer.ggml.scores': array count 2305843009213693952 of uint32");
    /* array of UINT64_MAX strings */
    header(&b, 3, 0, 1);
    str(&b, "tokenizer.ggml.tokens");
    u32(&b, RLX_GGUF_TYPE_ARRAY);
    u32(&b, RLX_GGUF_TYPE_STRING);
    u64(&b, UINT64_MAX);
    str(&b, "a");
    expect_fail(&b, RLX_ERR_FORMAT, "key 'tokenizer.ggml.tokens': array count");
    /* a string element whose length runs past the end */
    header(&b, 3, 0, 1);
    str(&b, "tokenizer.ggml.tokens");
    u32(&b, RLX_GGUF_TYPE_ARRAY);
    u32(&b, RLX_GGUF_TYPE_STRING);
    u64(&b, 2);
    str(&b, "a");
    u64(&b, 1000);
    put(&b, "xyz", 3);
    expect_fail(&b, RLX_ERR_FORMAT,
                "key 'tokenizer.ggml.tokens': an array element has string "
                "length 1000");
    /* a tensor name length 2^62 */
    header(&b, 3, 1, 0);
    u64(&b, 1ull << 62);
    put(&b, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 24);
    expect_fail(&b, RLX_ERR_FORMAT, "tensor #0: the tensor name has string length");
    free(b.p);
}

static void unknown_types(void **state)
{
    bytes b = {0};
    header(&b, 3, 0, 1);
    str(&b, "general.weird");
    u32(&b, 13);
    u64(&b, 0);
    expect_fail(&b, RLX_ERR_FORMAT, "key 'general.weird': value type 13 is unknown");
    header(&b, 3, 0, 1);
    str(&b, "general.weird");
    u32(&b, RLX_GGUF_TYPE_ARRAY);
    u32(&b, 42);
    u64(&b, 1);
    u64(&b, 0);
    expect_fail(&b, RLX_ERR_FORMAT, "key 'general.weird': array element type 42 is unknown");

    uint64_t ne[2] = {32, 2};
    header(&b, 3, 1, 0);
    tensor(&b, "blk.0.attn_q.weight", 2, ne, 77, 0);
    pad_zeros(&b, 32, 256);
    expect_fail(&b, RLX_ERR_UNSUPPORTED,
                "tensor 'blk.0.attn_q.weight': unknown ggml tensor type "
                "id 77");
    /* a removed ggml id (4 was Q4_2) */
    header(&b, 3, 1, 0);
    tensor(&b, "old", 2, ne, 4, 0);
    pad_zeros(&b, 32, 256);
    expect_fail(&b, RLX_ERR_UNSUPPORTED, "tensor 'old': unknown ggml tensor type id 4");
    free(b.p);
}

static void tensor_shapes(void **state)
{
    bytes b = {0};
    uint64_t ne[9] = {2, 2, 2, 2, 2, 2, 2, 2, 2};
    header(&b, 3, 1, 0);
    tensor(&b, "too.many.dims", 9, ne, 0, 0);
    pad_zeros(&b, 32, 4096);
    expect_fail(&b, RLX_ERR_FORMAT, "tensor 'too.many.dims': n_dims is 9; at most 4 dimensions");

    /* four dims is the maximum and fine; zero dims is a scalar */
    header(&b, 3, 2, 0);
    tensor(&b, "four", 4, ne, 0, 0);
    tensor(&b, "scalar", 0, ne, 0, 64);
    pad_zeros(&b, 32, 128);
    expect_ok(&b);

    /* Q4_0 rows must be whole blocks */
    uint64_t q[2] = {33, 1};
    header(&b, 3, 1, 0);
    tensor(&b, "q", 2, q, 2, 0);
    pad_zeros(&b, 32, 64);
    expect_fail(&b, RLX_ERR_FORMAT,
                "tensor 'q': row length ne[0] = 33 is not a multiple of the "
                "Q4_0 block size 32");

    uint64_t big[2] = {1ull << 32, 1ull << 32};
    header(&b, 3, 1, 0);
    tensor(&b, "big", 2, big, 0, 0);
    pad_zeros(&b, 32, 64);
    expect_fail(&b, RLX_ERR_FORMAT, "tensor 'big': the element count of its shape overflows");

    uint64_t neg[1] = {UINT64_MAX};
    header(&b, 3, 1, 0);
    tensor(&b, "neg", 1, neg, 0, 0);
    pad_zeros(&b, 32, 64);
    expect_fail(&b, RLX_ERR_FORMAT, "tensor 'neg': dimension 0 is 18446744073709551615");

    uint64_t bytes_overflow[2] = {1ull << 40, 1ull << 22};
    header(&b, 3, 1, 0);
    tensor(&b, "huge", 2, bytes_overflow, 0, 0);
    pad_zeros(&b, 32, 64);
    expect_fail(&b, RLX_ERR_FORMAT, "tensor 'huge': its size in bytes overflows");

    /* a NUL inside the name */
    header(&b, 3, 1, 0);
    u64(&b, 3);
    put(&b, "a\0b", 3);
    u32(&b, 1);
    u64(&b, 8);
    u32(&b, 0);
    u64(&b, 0);
    pad_zeros(&b, 32, 32);
    expect_fail(&b, RLX_ERR_FORMAT, "the tensor name contains a NUL byte");
    free(b.p);
}

static void tensor_placement(void **state)
{
    bytes b = {0};
    uint64_t ne8[1] = {8}, ne16[1] = {16};
    /* offset past the end */
    header(&b, 3, 1, 0);
    tensor(&b, "blk.0.attn_q.weight", 1, ne8, 0, 64);
    pad_zeros(&b, 32, 32);
    expect_fail(&b, RLX_ERR_FORMAT,
                "bad.gguf: tensor 'blk.0.attn_q.weight' data (offset 64, 32 "
                "bytes) runs past the end of the file (size 128");
    /* an offset near 2^64 must not wrap */
    header(&b, 3, 1, 0);
    tensor(&b, "wrap", 1, ne8, 0, UINT64_MAX - 31);
    pad_zeros(&b, 32, 32);
    expect_fail(&b, RLX_ERR_FORMAT, "tensor 'wrap' data (offset 18446744073709551584");
    /* data running exactly to the end is fine */
    header(&b, 3, 1, 0);
    tensor(&b, "exact", 1, ne8, 0, 0);
    pad_zeros(&b, 32, 32);
    expect_ok(&b);
    /* overlapping */
    header(&b, 3, 2, 0);
    tensor(&b, "first", 1, ne16, 0, 0);
    tensor(&b, "second", 1, ne16, 0, 32);
    pad_zeros(&b, 32, 128);
    expect_fail(&b, RLX_ERR_FORMAT,
                "tensor 'first' data (offset 0, 64 bytes) overlaps tensor 'second' (offset 32)");
    /* overlap detected whatever the order in the header */
    header(&b, 3, 3, 0);
    tensor(&b, "c", 1, ne8, 0, 128);
    tensor(&b, "a", 1, ne8, 0, 0);
    tensor(&b, "b", 1, ne16, 0, 96);
    pad_zeros(&b, 32, 256);
    expect_fail(&b, RLX_ERR_FORMAT, "tensor 'b' data (offset 96, 64 bytes) overlaps tensor 'c'");
    /* the same tensor twice */
    header(&b, 3, 2, 0);
    tensor(&b, "dup", 1, ne8, 0, 0);
    tensor(&b, "dup", 1, ne8, 0, 32);
    pad_zeros(&b, 32, 64);
    expect_fail(&b, RLX_ERR_FORMAT, "tensor 'dup': the tensor name appears twice");
    /* misaligned */
    header(&b, 3, 1, 0);
    tensor(&b, "mis", 1, ne8, 0, 4);
    pad_zeros(&b, 32, 64);
    expect_fail(&b, RLX_ERR_FORMAT,
                "tensor 'mis' data offset 4 is not a multiple of the alignment 32");
    free(b.p);
}

static void alignment_values(void **state)
{
    bytes b = {0};
    uint64_t ne8[1] = {8};
    static const uint32_t bad[] = {0, 3, 48, 0xffffffffu};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        header(&b, 3, 0, 1);
        kv_u32(&b, "general.alignment", bad[i]);
        expect_fail(&b, RLX_ERR_FORMAT, "general.alignment is ");
    }
    header(&b, 3, 0, 1);
    str(&b, "general.alignment");
    u32(&b, RLX_GGUF_TYPE_UINT64);
    u64(&b, 64);
    expect_fail(&b, RLX_ERR_FORMAT, "general.alignment is a uint64, expected uint32");
    /* alignment 16: offset 16 fine, data section at a multiple of 16 */
    header(&b, 3, 1, 1);
    kv_u32(&b, "general.alignment", 16);
    tensor(&b, "t", 1, ne8, 0, 16);
    pad_zeros(&b, 16, 48);
    rlx_gguf *g = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_gguf_open_memory(b.p, b.n, "a16.gguf", &g, &err), RLX_OK);
    assert_int_equal(rlx_gguf_alignment(g), 16);
    assert_int_equal(rlx_gguf_data_offset(g) % 16, 0);
    rlx_gguf_close(g);
    /* with alignment 64, offset 32 is misaligned */
    header(&b, 3, 1, 1);
    kv_u32(&b, "general.alignment", 64);
    tensor(&b, "t", 1, ne8, 0, 32);
    pad_zeros(&b, 64, 128);
    expect_fail(&b, RLX_ERR_FORMAT, "not a multiple of the alignment 64");
    free(b.p);
}

static void nested_arrays(void **state)
{
    bytes b = {0};
    /* depth d: the key's array holds arrays d-1 levels down to a uint8 */
    for (int depth = 1; depth <= RLX_GGUF_MAX_ARRAY_DEPTH + 2; depth++) {
        header(&b, 3, 0, 1);
        str(&b, "deep");
        u32(&b, RLX_GGUF_TYPE_ARRAY);
        for (int d = 1; d < depth; d++) {
            u32(&b, RLX_GGUF_TYPE_ARRAY);
            u64(&b, 1);
        }
        u32(&b, RLX_GGUF_TYPE_UINT8);
        u64(&b, 1);
        put(&b, "\x07", 1);
        if (depth <= RLX_GGUF_MAX_ARRAY_DEPTH) {
            rlx_gguf *g = NULL;
            rlx_error *err = NULL;
            assert_int_equal(rlx_gguf_open_memory(b.p, b.n, "deep.gguf", &g, &err), RLX_OK);
            rlx_gguf_value v = *rlx_gguf_find(g, "deep"), e;
            for (int d = 1; d < depth; d++) {
                assert_int_equal(rlx_gguf_array_get(g, &v, 0, &e, &err), RLX_OK);
                v = e;
            }
            assert_int_equal(rlx_gguf_array_get(g, &v, 0, &e, &err), RLX_OK);
            assert_int_equal(e.type, RLX_GGUF_TYPE_UINT8);
            assert_int_equal(e.v.u64, 7);
            rlx_gguf_close(g);
        } else {
            expect_fail(&b, RLX_ERR_FORMAT, "key 'deep': arrays are nested more than 8 deep");
        }
    }
    /* a nested array whose count outruns the file */
    header(&b, 3, 0, 1);
    str(&b, "n");
    u32(&b, RLX_GGUF_TYPE_ARRAY);
    u32(&b, RLX_GGUF_TYPE_ARRAY);
    u64(&b, 1);
    u32(&b, RLX_GGUF_TYPE_INT64);
    u64(&b, 1ull << 50);
    expect_fail(&b, RLX_ERR_FORMAT, "key 'n': array count 1125899906842624 of int64");
    /* millions of empty nested arrays claimed in a few bytes */
    header(&b, 3, 0, 1);
    str(&b, "n");
    u32(&b, RLX_GGUF_TYPE_ARRAY);
    u32(&b, RLX_GGUF_TYPE_ARRAY);
    u64(&b, 5000000);
    u32(&b, RLX_GGUF_TYPE_UINT8);
    u64(&b, 0);
    expect_fail(&b, RLX_ERR_FORMAT, "array count 5000000 of array elements");
    free(b.p);
}

static void duplicate_keys(void **state)
{
    bytes b = {0};
    header(&b, 3, 0, 3);
    kv_u32(&b, "llama.block_count", 5);
    kv_u32(&b, "llama.block_countx", 5);
    kv_u32(&b, "llama.block_count", 6);
    expect_fail(&b, RLX_ERR_FORMAT,
                "key 'llama.block_count': the key appears twice (entries #0 and #2)");
    /* keys that differ only after a NUL are distinct (compared by length) */
    header(&b, 3, 0, 2);
    u64(&b, 3);
    put(&b, "a\0b", 3);
    u32(&b, RLX_GGUF_TYPE_UINT8);
    put(&b, "\x01", 1);
    u64(&b, 3);
    put(&b, "a\0c", 3);
    u32(&b, RLX_GGUF_TYPE_UINT8);
    put(&b, "\x02", 1);
    expect_ok(&b);
    free(b.p);
}

int main(void)
{
    rlx_test_need_data("llm/stories260K.gguf", NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(truncated_real_file),   cmocka_unit_test(corrupted_header_bytes),
        cmocka_unit_test(bad_magic_and_version), cmocka_unit_test(absurd_counts),
        cmocka_unit_test(absurd_lengths),        cmocka_unit_test(unknown_types),
        cmocka_unit_test(tensor_shapes),         cmocka_unit_test(tensor_placement),
        cmocka_unit_test(alignment_values),      cmocka_unit_test(nested_arrays),
        cmocka_unit_test(duplicate_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
