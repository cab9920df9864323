/* GGUF reader and writer on real files and on round trips.
 *
 * The expected facts about stories260K.gguf and the vocab files were read
 * with a separate 40-line Python struct-based reader, not with this code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/formats/gguf.h"
#include "test-util.h"

static bool str_eq(rlx_gguf_str s, const char *want)
{
    return s.len == strlen(want) && memcmp(s.ptr, want, s.len) == 0;
}

static void expect_u32(const rlx_gguf *g, const char *key, uint32_t want)
{
    uint32_t v = 0;
    rlx_error *err = NULL;
    rlx_status s = rlx_gguf_get_u32(g, key, &v, &err);
    if (s != RLX_OK)
        fail_msg("%s: %s", key, rlx_error_message(err));
    assert_int_equal(v, want);
}

static void expect_token(const rlx_gguf *g, const rlx_gguf_value *arr, uint64_t i, const char *want)
{
    rlx_gguf_value v;
    rlx_error *err = NULL;
    if (rlx_gguf_array_get(g, arr, i, &v, &err) != RLX_OK)
        fail_msg("token %llu: %s", (unsigned long long)i, rlx_error_message(err));
    assert_int_equal(v.type, RLX_GGUF_TYPE_STRING);
    if (!str_eq(v.v.str, want))
        fail_msg("token %llu is '%.*s', expected '%s'", (unsigned long long)i, (int)v.v.str.len,
                 v.v.str.ptr, want);
}

static void stories_metadata(void **state)
{
    rlx_gguf *g = NULL;
    rlx_error *err = NULL;
    if (rlx_gguf_open(rlx_test_data("llm/stories260K.gguf"), &g, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    assert_int_equal(rlx_gguf_version(g), 3);
    assert_int_equal(rlx_gguf_n_kv(g), 19);
    assert_int_equal(rlx_gguf_n_tensors(g), 48);
    assert_int_equal(rlx_gguf_alignment(g), 32);
    assert_int_equal(rlx_gguf_file_size(g), 1185376);
    assert_int_equal(rlx_gguf_data_offset(g), 14176);

    char buf[64];
    assert_int_equal(rlx_gguf_get_string(g, "general.architecture", buf, sizeof buf, &err), RLX_OK);
    assert_string_equal(buf, "llama");
    rlx_gguf_str s;
    assert_int_equal(rlx_gguf_get_str(g, "tokenizer.ggml.model", &s, &err), RLX_OK);
    assert_true(str_eq(s, "llama"));
    /* truncation to the buffer */
    assert_int_equal(rlx_gguf_get_string(g, "general.architecture", buf, 3, &err), RLX_OK);
    assert_string_equal(buf, "ll");

    expect_u32(g, "llama.embedding_length", 64);
    expect_u32(g, "llama.block_count", 5);
    expect_u32(g, "llama.attention.head_count", 8);
    expect_u32(g, "llama.attention.head_count_kv", 4);
    expect_u32(g, "llama.context_length", 2048);
    expect_u32(g, "llama.feed_forward_length", 172);
    expect_u32(g, "llama.rope.dimension_count", 8);
    expect_u32(g, "tokenizer.ggml.seperator_token_id", 4294967295u);
    uint64_t u64;
    int64_t i64;
    assert_int_equal(rlx_gguf_get_u64(g, "tokenizer.ggml.bos_token_id", &u64, &err), RLX_OK);
    assert_int_equal(u64, 1);
    assert_int_equal(rlx_gguf_get_i64(g, "tokenizer.ggml.eos_token_id", &i64, &err), RLX_OK);
    assert_int_equal(i64, 2);
    float eps;
    assert_int_equal(rlx_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &eps, &err),
                     RLX_OK);
    assert_true(eps == 9.999999747378752e-06f);

    const rlx_gguf_value *tok = NULL;
    assert_int_equal(rlx_gguf_get_arr(g, "tokenizer.ggml.tokens", RLX_GGUF_TYPE_STRING, &tok, &err),
                     RLX_OK);
    assert_int_equal(tok->v.arr.count, 512);
    /* random order first, then a sequential sweep */
    expect_token(g, tok, 511, "\xe2\x80\x8a");
    expect_token(g, tok, 300, "\xe2\x96\x81ha");
    expect_token(g, tok, 0, "<unk>");
    expect_token(g, tok, 1, "<s>");
    expect_token(g, tok, 2, "</s>");
    expect_token(g, tok, 3, "<0x00>");
    expect_token(g, tok, 100, "<0x61>");
    expect_token(g, tok, 259, "\xe2\x96\x81t");
    expect_token(g, tok, 400,
                 "\xe2\x96\x81"
                 "do");
    expect_token(g, tok, 510, "~");
    uint64_t total = 0;
    for (uint64_t i = 0; i < tok->v.arr.count; i++) {
        rlx_gguf_value v;
        assert_int_equal(rlx_gguf_array_get(g, tok, i, &v, &err), RLX_OK);
        total += v.v.str.len;
    }
    assert_true(total > 512);
    rlx_gguf_value v;
    assert_int_equal(rlx_gguf_array_get(g, tok, 512, &v, &err), RLX_ERR_INVALID_ARG);
    rlx_error_clear(&err);

    const rlx_gguf_value *scores = NULL, *types = NULL;
    assert_int_equal(
        rlx_gguf_get_arr(g, "tokenizer.ggml.scores", RLX_GGUF_TYPE_FLOAT32, &scores, &err), RLX_OK);
    assert_int_equal(rlx_gguf_array_get(g, scores, 300, &v, &err), RLX_OK);
    assert_int_equal(v.type, RLX_GGUF_TYPE_FLOAT32);
    assert_true(v.v.f64 == -41.0);
    assert_int_equal(
        rlx_gguf_get_arr(g, "tokenizer.ggml.token_type", RLX_GGUF_TYPE_COUNT, &types, &err),
        RLX_OK);
    assert_int_equal(types->v.arr.elem_type, RLX_GGUF_TYPE_INT32);
    static const int want_types[8] = {2, 3, 3, 6, 6, 6, 6, 6};
    for (int i = 0; i < 8; i++) {
        assert_int_equal(rlx_gguf_array_get(g, types, (uint64_t)i, &v, &err), RLX_OK);
        assert_int_equal(v.v.i64, want_types[i]);
    }

    /* key order and raw access */
    const rlx_gguf_kv *kv0 = rlx_gguf_kv_at(g, 0);
    assert_non_null(kv0);
    assert_true(str_eq(kv0->key, "tokenizer.ggml.tokens"));
    assert_null(rlx_gguf_kv_at(g, 19));
    assert_null(rlx_gguf_find(g, "tokenizer.ggml"));
    assert_null(rlx_gguf_find(g, "tokenizer.ggml.tokensx"));
    assert_non_null(rlx_gguf_find(g, "general.name"));
    assert_null(err);
    rlx_gguf_close(g);
}

static void stories_tensors(void **state)
{
    rlx_gguf *g = NULL;
    rlx_error *err = NULL;
    if (rlx_gguf_open(rlx_test_data("llm/stories260K.gguf"), &g, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    static const struct {
        const char *name;
        uint32_t n_dims;
        uint64_t ne0, ne1, offset;
    } want[] = {
        {"token_embd.weight", 2, 64, 512, 0},          {"output_norm.weight", 1, 64, 1, 131072},
        {"output.weight", 2, 64, 512, 131328},         {"blk.0.attn_k.weight", 2, 64, 32, 278784},
        {"blk.0.ffn_down.weight", 2, 172, 64, 355840}, {"blk.3.ffn_up.weight", 2, 64, 172, 945152},
        {"blk.4.ffn_norm.weight", 1, 64, 1, 1170944},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const rlx_gguf_tensor *t = rlx_gguf_find_tensor(g, want[i].name);
        if (!t)
            fail_msg("tensor %s not found", want[i].name);
        assert_string_equal(t->name, want[i].name);
        assert_int_equal(t->n_dims, want[i].n_dims);
        assert_int_equal(t->ne[0], want[i].ne0);
        assert_int_equal(t->ne[1], want[i].ne1);
        assert_int_equal(t->ne[2], 1);
        assert_int_equal(t->ne[3], 1);
        assert_int_equal(t->ggml_type, 0);
        assert_int_equal(t->dtype, RLX_DTYPE_F32);
        assert_int_equal(t->offset, want[i].offset);
        assert_int_equal(t->n_elements, want[i].ne0 * want[i].ne1);
        assert_int_equal(t->n_bytes, 4 * want[i].ne0 * want[i].ne1);
    }
    assert_string_equal(rlx_gguf_tensor_at(g, 0)->name, "token_embd.weight");
    assert_string_equal(rlx_gguf_tensor_at(g, 47)->name, "blk.4.ffn_norm.weight");
    assert_null(rlx_gguf_tensor_at(g, 48));
    assert_null(rlx_gguf_find_tensor(g, "token_embd"));

    /* first floats, read independently */
    float f[4];
    memcpy(f, rlx_gguf_tensor_data(g, rlx_gguf_find_tensor(g, "token_embd.weight")), sizeof f);
    assert_true(f[0] == -0.29474878311157227f);
    assert_true(f[1] == 0.5618956089019775f);
    memcpy(f, rlx_gguf_tensor_data(g, rlx_gguf_find_tensor(g, "output_norm.weight")), sizeof f);
    assert_true(f[0] == 2.4583089351654053f);
    memcpy(f, rlx_gguf_tensor_data(g, rlx_gguf_find_tensor(g, "blk.4.ffn_norm.weight")), sizeof f);
    assert_true(f[3] == 1.097079873085022f);
    rlx_gguf_close(g);
}

static void vocab_files(void **state)
{
    static const struct {
        const char *file, *model, *first, *k1000, *last;
        uint64_t n_tokens, n_merges, n_kv;
    } want[] = {
        {"ggml-vocab-gemma-4.gguf", "gemma4", "<pad>", "put", "<unused6226>", 262144, 514906, 42},
        {"ggml-vocab-gpt-2.gguf", "gpt2", "!", "ale", "<|endoftext|>", 50257, 50000, 16},
        {"ggml-vocab-llama-bpe.gguf", "gpt2", "!", "indow", "<|reserved_special_token_250|>",
         128256, 280147, 20},
        {"ggml-vocab-llama-spm.gguf", "llama", "<unk>", "ied", "\xe7\xbb\x99", 32000, 0, 22},
        {"ggml-vocab-qwen2.gguf", "gpt2", "!", "atus", "[PAD151935]", 151936, 151387, 20},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "tokenizers/%s", want[i].file);
        rlx_gguf *g = NULL;
        rlx_error *err = NULL;
        if (rlx_gguf_open(rlx_test_data(rel), &g, &err) != RLX_OK)
            fail_msg("%s", rlx_error_message(err));
        assert_int_equal(rlx_gguf_n_tensors(g), 0);
        assert_int_equal(rlx_gguf_n_kv(g), want[i].n_kv);
        rlx_gguf_str model;
        assert_int_equal(rlx_gguf_get_str(g, "tokenizer.ggml.model", &model, &err), RLX_OK);
        assert_true(str_eq(model, want[i].model));
        const rlx_gguf_value *tok;
        assert_int_equal(
            rlx_gguf_get_arr(g, "tokenizer.ggml.tokens", RLX_GGUF_TYPE_STRING, &tok, &err), RLX_OK);
        assert_int_equal(tok->v.arr.count, want[i].n_tokens);
        expect_token(g, tok, want[i].n_tokens - 1, want[i].last);
        expect_token(g, tok, 1000, want[i].k1000);
        expect_token(g, tok, 0, want[i].first);
        /* a full sequential sweep stays cheap */
        for (uint64_t k = 0; k < tok->v.arr.count; k++) {
            rlx_gguf_value v;
            assert_int_equal(rlx_gguf_array_get(g, tok, k, &v, &err), RLX_OK);
        }
        const rlx_gguf_value *merges = rlx_gguf_find(g, "tokenizer.ggml.merges");
        if (want[i].n_merges) {
            assert_non_null(merges);
            assert_int_equal(merges->v.arr.count, want[i].n_merges);
        } else {
            assert_null(merges);
        }
        assert_null(err);
        rlx_gguf_close(g);
    }
}

/* Whatever else lands in the folder parses too: metadata only. */
static void every_vocab_file(void **state)
{
    DIR *d = opendir(rlx_test_data("tokenizers"));
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".gguf") != 0)
            continue;
        char rel[512];
        snprintf(rel, sizeof rel, "tokenizers/%s", e->d_name);
        rlx_gguf *g = NULL;
        rlx_error *err = NULL;
        if (rlx_gguf_open(rlx_test_data(rel), &g, &err) != RLX_OK)
            fail_msg("%s", rlx_error_message(err));
        assert_int_equal(rlx_gguf_n_tensors(g), 0);
        const rlx_gguf_value *tok = NULL;
        assert_int_equal(
            rlx_gguf_get_arr(g, "tokenizer.ggml.tokens", RLX_GGUF_TYPE_STRING, &tok, &err), RLX_OK);
        assert_true(tok->v.arr.count > 0);
        rlx_gguf_str model;
        assert_int_equal(rlx_gguf_get_str(g, "tokenizer.ggml.model", &model, &err), RLX_OK);
        rlx_gguf_close(g);
        n++;
    }
    closedir(d);
    assert_true(n >= 5);
}

static void gemma_typed_arrays(void **state)
{
    rlx_gguf *g = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_gguf_open(rlx_test_data("tokenizers/ggml-vocab-gemma-4.gguf"), &g, &err),
                     RLX_OK);
    const rlx_gguf_value *kv = NULL, *swa = NULL;
    assert_int_equal(
        rlx_gguf_get_arr(g, "gemma4.attention.head_count_kv", RLX_GGUF_TYPE_INT32, &kv, &err),
        RLX_OK);
    assert_int_equal(kv->v.arr.count, 30);
    rlx_gguf_value v;
    assert_int_equal(rlx_gguf_array_get(g, kv, 0, &v, &err), RLX_OK);
    assert_int_equal(v.v.i64, 8);
    assert_int_equal(rlx_gguf_array_get(g, kv, 29, &v, &err), RLX_OK);
    assert_int_equal(v.v.i64, 2);
    assert_int_equal(rlx_gguf_get_arr(g, "gemma4.attention.sliding_window_pattern",
                                      RLX_GGUF_TYPE_BOOL, &swa, &err),
                     RLX_OK);
    assert_int_equal(rlx_gguf_array_get(g, swa, 0, &v, &err), RLX_OK);
    assert_int_equal(v.v.u64, 1);
    assert_int_equal(rlx_gguf_array_get(g, swa, 29, &v, &err), RLX_OK);
    assert_int_equal(v.v.u64, 0);
    bool b;
    assert_int_equal(rlx_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b, &err), RLX_OK);
    assert_true(b);
    assert_int_equal(rlx_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &b, &err), RLX_OK);
    assert_false(b);
    float f;
    assert_int_equal(rlx_gguf_get_f32(g, "gemma4.final_logit_softcapping", &f, &err), RLX_OK);
    assert_true(f == 30.0f);
    assert_null(err);
    rlx_gguf_close(g);
}

static void expect_error(rlx_status got, rlx_status want, rlx_error **err, const char *needle)
{
    if (got != want)
        fail_msg("status %s, expected %s (%s)", rlx_status_name(got), rlx_status_name(want),
                 rlx_error_message(*err));
    if (!strstr(rlx_error_message(*err), needle))
        fail_msg("message '%s' lacks '%s'", rlx_error_message(*err), needle);
    rlx_error_clear(err);
}

static void getter_errors(void **state)
{
    rlx_gguf *g = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_gguf_open(rlx_test_data("llm/stories260K.gguf"), &g, &err), RLX_OK);
    uint32_t u32 = 7;
    expect_error(rlx_gguf_get_u32(g, "llama.no_such_key", &u32, &err), RLX_ERR_NOT_FOUND, &err,
                 "stories260K.gguf: key 'llama.no_such_key' is missing");
    assert_int_equal(u32, 7);
    expect_error(rlx_gguf_get_u32(g, "general.architecture", &u32, &err), RLX_ERR_TYPE, &err,
                 "stories260K.gguf: key 'general.architecture' is a string, expected uint32");
    rlx_gguf_str s;
    expect_error(rlx_gguf_get_str(g, "llama.block_count", &s, &err), RLX_ERR_TYPE, &err,
                 "key 'llama.block_count' is a uint32, expected string");
    float f;
    expect_error(rlx_gguf_get_f32(g, "tokenizer.ggml.tokens", &f, &err), RLX_ERR_TYPE, &err,
                 "key 'tokenizer.ggml.tokens' is an array of string, expected float32");
    bool b;
    expect_error(rlx_gguf_get_bool(g, "llama.block_count", &b, &err), RLX_ERR_TYPE, &err,
                 "expected bool");
    const rlx_gguf_value *arr = (const rlx_gguf_value *)1;
    expect_error(rlx_gguf_get_arr(g, "tokenizer.ggml.tokens", RLX_GGUF_TYPE_INT32, &arr, &err),
                 RLX_ERR_TYPE, &err, "is an array of string, expected an array of int32");
    assert_null(arr);
    expect_error(rlx_gguf_get_arr(g, "llama.block_count", RLX_GGUF_TYPE_COUNT, &arr, &err),
                 RLX_ERR_TYPE, &err, "expected an array");
    char buf[8];
    expect_error(rlx_gguf_get_string(g, "missing.key", buf, sizeof buf, &err), RLX_ERR_NOT_FOUND,
                 &err, "missing.key");
    assert_string_equal(buf, "");
    /* NULL err is allowed */
    assert_int_equal(rlx_gguf_get_u32(g, "nope", &u32, NULL), RLX_ERR_NOT_FOUND);
    rlx_gguf_close(g);

    /* integer range checks between types */
    rlx_gguf_writer *w = rlx_gguf_writer_create();
    rlx_gguf_writer_set_u64(w, "big", 1ull << 40);
    rlx_gguf_writer_set_i32(w, "neg", -5);
    rlx_gguf_writer_set_u64(w, "huge", UINT64_MAX);
    void *mem;
    size_t n;
    assert_int_equal(rlx_gguf_writer_to_memory(w, &mem, &n, &err), RLX_OK);
    rlx_gguf_writer_free(w);
    assert_int_equal(rlx_gguf_open_memory(mem, n, "ints.gguf", &g, &err), RLX_OK);
    expect_error(rlx_gguf_get_u32(g, "big", &u32, &err), RLX_ERR_TYPE, &err,
                 "ints.gguf: key 'big' is a uint64 with value 1099511627776, which does not fit "
                 "uint32");
    uint64_t u64;
    expect_error(rlx_gguf_get_u64(g, "neg", &u64, &err), RLX_ERR_TYPE, &err,
                 "key 'neg' is an int32 with value -5");
    int64_t i64;
    expect_error(rlx_gguf_get_i64(g, "huge", &i64, &err), RLX_ERR_TYPE, &err, "does not fit int64");
    assert_int_equal(rlx_gguf_get_i64(g, "neg", &i64, &err), RLX_OK);
    assert_int_equal(i64, -5);
    assert_int_equal(rlx_gguf_get_u64(g, "big", &u64, &err), RLX_OK);
    assert_int_equal(u64, 1ull << 40);
    rlx_gguf_close(g);
    free(mem);
}

/* ---- writer round trips ------------------------------------------------- */

/* Minimal encoder for nested array values (the writer takes the file's
 * encoding for those). */
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
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_u32(bytes *b, uint32_t v)
{
    uint8_t le[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, le, 4);
}

static void put_u64(bytes *b, uint64_t v)
{
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)(v >> (8 * i));
    put(b, le, 8);
}

static void put_str(bytes *b, const char *s)
{
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

static rlx_gguf_value array_value(rlx_gguf_type elem, uint64_t count, const bytes *b)
{
    rlx_gguf_value v = {.type = RLX_GGUF_TYPE_ARRAY};
    v.v.arr.elem_type = elem;
    v.v.arr.count = count;
    v.v.arr.data = b->p;
    v.v.arr.data_len = b->n;
    return v;
}

static void fill_writer(rlx_gguf_writer *w, float *f32, uint16_t *f16, uint8_t *q4, uint8_t *q8,
                        int32_t *i32, uint8_t *q4k)
{
    rlx_gguf_value v;
    v.type = RLX_GGUF_TYPE_UINT8;
    v.v.u64 = 200;
    assert_int_equal(rlx_gguf_writer_set_value(w, "t.u8", &v), RLX_OK);
    v.type = RLX_GGUF_TYPE_INT8;
    v.v.i64 = -100;
    assert_int_equal(rlx_gguf_writer_set_value(w, "t.i8", &v), RLX_OK);
    v.type = RLX_GGUF_TYPE_UINT16;
    v.v.u64 = 65000;
    assert_int_equal(rlx_gguf_writer_set_value(w, "t.u16", &v), RLX_OK);
    v.type = RLX_GGUF_TYPE_INT16;
    v.v.i64 = -32000;
    assert_int_equal(rlx_gguf_writer_set_value(w, "t.i16", &v), RLX_OK);
    assert_int_equal(rlx_gguf_writer_set_u32(w, "t.u32", 4000000000u), RLX_OK);
    assert_int_equal(rlx_gguf_writer_set_i32(w, "t.i32", -2000000000), RLX_OK);
    assert_int_equal(rlx_gguf_writer_set_f32(w, "t.f32", 1.5f), RLX_OK);
    assert_int_equal(rlx_gguf_writer_set_bool(w, "t.bool", true), RLX_OK);
    assert_int_equal(rlx_gguf_writer_set_str(w, "t.str", "h\xc3\xa9llo"), RLX_OK);
    assert_int_equal(rlx_gguf_writer_set_u64(w, "t.u64", UINT64_MAX - 1), RLX_OK);
    assert_int_equal(rlx_gguf_writer_set_i64(w, "t.i64", INT64_MIN + 1), RLX_OK);
    assert_int_equal(rlx_gguf_writer_set_f64(w, "t.f64", -0.125), RLX_OK);
    assert_int_equal(rlx_gguf_writer_set_str(w, "t.empty", ""), RLX_OK);
    /* replacing a key keeps one entry */
    assert_int_equal(rlx_gguf_writer_set_u32(w, "t.replaced", 1), RLX_OK);
    assert_int_equal(rlx_gguf_writer_set_str(w, "t.replaced", "now a string"), RLX_OK);

    static const int16_t a_i16[3] = {-1, 2, -3};
    static const float a_f32[2] = {0.5f, -8.0f};
    static const uint8_t a_bool[3] = {1, 0, 1};
    static const double a_f64[2] = {1e300, -2.5};
    assert_int_equal(rlx_gguf_writer_set_arr(w, "a.i16", RLX_GGUF_TYPE_INT16, a_i16, 3), RLX_OK);
    assert_int_equal(rlx_gguf_writer_set_arr(w, "a.f32", RLX_GGUF_TYPE_FLOAT32, a_f32, 2), RLX_OK);
    assert_int_equal(rlx_gguf_writer_set_arr(w, "a.bool", RLX_GGUF_TYPE_BOOL, a_bool, 3), RLX_OK);
    assert_int_equal(rlx_gguf_writer_set_arr(w, "a.f64", RLX_GGUF_TYPE_FLOAT64, a_f64, 2), RLX_OK);
    assert_int_equal(rlx_gguf_writer_set_arr(w, "a.empty", RLX_GGUF_TYPE_UINT64, NULL, 0), RLX_OK);
    static const char *const strs[] = {"alpha", "", "\xe2\x96\x81gamma", "delta"};
    assert_int_equal(rlx_gguf_writer_set_str_arr(w, "a.str", strs, 4), RLX_OK);

    /* [[1, 2, 3], [], [-4]] as int32 */
    bytes b = {0};
    put_u32(&b, RLX_GGUF_TYPE_INT32);
    put_u64(&b, 3);
    put_u32(&b, 1);
    put_u32(&b, 2);
    put_u32(&b, 3);
    put_u32(&b, RLX_GGUF_TYPE_INT32);
    put_u64(&b, 0);
    put_u32(&b, RLX_GGUF_TYPE_INT32);
    put_u64(&b, 1);
    put_u32(&b, (uint32_t)-4);
    v = array_value(RLX_GGUF_TYPE_ARRAY, 3, &b);
    assert_int_equal(rlx_gguf_writer_set_value(w, "n.ints", &v), RLX_OK);
    /* [["a b", "c"], ["d"]] */
    b.n = 0;
    put_u32(&b, RLX_GGUF_TYPE_STRING);
    put_u64(&b, 2);
    put_str(&b, "a b");
    put_str(&b, "c");
    put_u32(&b, RLX_GGUF_TYPE_STRING);
    put_u64(&b, 1);
    put_str(&b, "d");
    v = array_value(RLX_GGUF_TYPE_ARRAY, 2, &b);
    assert_int_equal(rlx_gguf_writer_set_value(w, "n.strs", &v), RLX_OK);
    /* [[[true]]] */
    b.n = 0;
    put_u32(&b, RLX_GGUF_TYPE_ARRAY);
    put_u64(&b, 1);
    put_u32(&b, RLX_GGUF_TYPE_BOOL);
    put_u64(&b, 1);
    put(&b, "\x01", 1);
    v = array_value(RLX_GGUF_TYPE_ARRAY, 1, &b);
    assert_int_equal(rlx_gguf_writer_set_value(w, "n.deep", &v), RLX_OK);
    /* a broken encoding is refused */
    v = array_value(RLX_GGUF_TYPE_ARRAY, 2, &b);
    rlx_gguf_writer *w2 = rlx_gguf_writer_create();
    assert_int_equal(rlx_gguf_writer_set_value(w2, "bad", &v), RLX_ERR_INVALID_ARG);
    assert_non_null(rlx_gguf_writer_error(w2));
    rlx_gguf_writer_free(w2);
    free(b.p);

    for (int i = 0; i < 64 * 3; i++)
        f32[i] = (float)i * 0.25f - 7.0f;
    for (int i = 0; i < 128; i++)
        f16[i] = (uint16_t)(0x3c00 + i);
    for (int i = 0; i < 2 * 18 * 2; i++)
        q4[i] = (uint8_t)(i * 7);
    for (int i = 0; i < 34; i++)
        q8[i] = (uint8_t)(255 - i);
    for (int i = 0; i < 5; i++)
        i32[i] = -i * 1000;
    for (int i = 0; i < 144; i++)
        q4k[i] = (uint8_t)(i ^ 0x5a);
    uint64_t ne_f32[2] = {64, 3}, ne_f16[3] = {8, 4, 4}, ne_q4[2] = {64, 2}, ne_q8[1] = {32},
             ne_i32[1] = {5}, ne_q4k[4] = {256, 1, 1, 1};
    assert_int_equal(rlx_gguf_writer_add_tensor(w, "w.f32", RLX_DTYPE_F32, 2, ne_f32, f32, 768),
                     RLX_OK);
    assert_int_equal(rlx_gguf_writer_add_tensor(w, "w.f16", RLX_DTYPE_F16, 3, ne_f16, f16, 256),
                     RLX_OK);
    assert_int_equal(rlx_gguf_writer_add_tensor(w, "w.q4_0", RLX_DTYPE_Q4_0, 2, ne_q4, q4, 72),
                     RLX_OK);
    assert_int_equal(rlx_gguf_writer_add_tensor(w, "w.q8_0", RLX_DTYPE_Q8_0, 1, ne_q8, q8, 34),
                     RLX_OK);
    assert_int_equal(rlx_gguf_writer_add_tensor(w, "w.i32", RLX_DTYPE_I32, 1, ne_i32, i32, 20),
                     RLX_OK);
    assert_int_equal(
        rlx_gguf_writer_add_tensor_ref(w, "w.q4_k", RLX_DTYPE_Q4_K, 4, ne_q4k, q4k, 144), RLX_OK);
}

static void expect_scalar(const rlx_gguf *g, const char *key, rlx_gguf_type t)
{
    const rlx_gguf_value *v = rlx_gguf_find(g, key);
    if (!v)
        fail_msg("key %s missing", key);
    assert_int_equal(v->type, t);
}

static void check_round_trip(const rlx_gguf *g, uint64_t alignment, const float *f32,
                             const uint16_t *f16, const uint8_t *q4, const uint8_t *q8,
                             const int32_t *i32, const uint8_t *q4k)
{
    rlx_error *err = NULL;
    const rlx_gguf_value *v;
    rlx_gguf_value e;
    assert_int_equal(rlx_gguf_version(g), 3);
    assert_int_equal(rlx_gguf_alignment(g), alignment);
    assert_int_equal(rlx_gguf_data_offset(g) % alignment, 0);

    expect_scalar(g, "t.u8", RLX_GGUF_TYPE_UINT8);
    assert_int_equal(rlx_gguf_find(g, "t.u8")->v.u64, 200);
    expect_scalar(g, "t.i8", RLX_GGUF_TYPE_INT8);
    assert_int_equal(rlx_gguf_find(g, "t.i8")->v.i64, -100);
    expect_scalar(g, "t.u16", RLX_GGUF_TYPE_UINT16);
    assert_int_equal(rlx_gguf_find(g, "t.u16")->v.u64, 65000);
    expect_scalar(g, "t.i16", RLX_GGUF_TYPE_INT16);
    assert_int_equal(rlx_gguf_find(g, "t.i16")->v.i64, -32000);
    expect_scalar(g, "t.u32", RLX_GGUF_TYPE_UINT32);
    assert_int_equal(rlx_gguf_find(g, "t.u32")->v.u64, 4000000000u);
    expect_scalar(g, "t.i32", RLX_GGUF_TYPE_INT32);
    assert_int_equal(rlx_gguf_find(g, "t.i32")->v.i64, -2000000000);
    expect_scalar(g, "t.f32", RLX_GGUF_TYPE_FLOAT32);
    assert_true(rlx_gguf_find(g, "t.f32")->v.f64 == 1.5);
    expect_scalar(g, "t.bool", RLX_GGUF_TYPE_BOOL);
    assert_int_equal(rlx_gguf_find(g, "t.bool")->v.u64, 1);
    expect_scalar(g, "t.str", RLX_GGUF_TYPE_STRING);
    assert_true(str_eq(rlx_gguf_find(g, "t.str")->v.str, "h\xc3\xa9llo"));
    expect_scalar(g, "t.u64", RLX_GGUF_TYPE_UINT64);
    assert_true(rlx_gguf_find(g, "t.u64")->v.u64 == UINT64_MAX - 1);
    expect_scalar(g, "t.i64", RLX_GGUF_TYPE_INT64);
    assert_true(rlx_gguf_find(g, "t.i64")->v.i64 == INT64_MIN + 1);
    expect_scalar(g, "t.f64", RLX_GGUF_TYPE_FLOAT64);
    assert_true(rlx_gguf_find(g, "t.f64")->v.f64 == -0.125);
    assert_int_equal(rlx_gguf_find(g, "t.empty")->v.str.len, 0);
    assert_true(str_eq(rlx_gguf_find(g, "t.replaced")->v.str, "now a string"));

    assert_int_equal(rlx_gguf_get_arr(g, "a.i16", RLX_GGUF_TYPE_INT16, &v, &err), RLX_OK);
    assert_int_equal(v->v.arr.count, 3);
    assert_int_equal(rlx_gguf_array_get(g, v, 2, &e, &err), RLX_OK);
    assert_int_equal(e.v.i64, -3);
    assert_int_equal(rlx_gguf_get_arr(g, "a.f32", RLX_GGUF_TYPE_FLOAT32, &v, &err), RLX_OK);
    assert_int_equal(rlx_gguf_array_get(g, v, 1, &e, &err), RLX_OK);
    assert_true(e.v.f64 == -8.0);
    assert_int_equal(rlx_gguf_get_arr(g, "a.bool", RLX_GGUF_TYPE_BOOL, &v, &err), RLX_OK);
    assert_int_equal(rlx_gguf_array_get(g, v, 1, &e, &err), RLX_OK);
    assert_int_equal(e.v.u64, 0);
    assert_int_equal(rlx_gguf_get_arr(g, "a.f64", RLX_GGUF_TYPE_FLOAT64, &v, &err), RLX_OK);
    assert_int_equal(rlx_gguf_array_get(g, v, 0, &e, &err), RLX_OK);
    assert_true(e.v.f64 == 1e300);
    assert_int_equal(rlx_gguf_get_arr(g, "a.empty", RLX_GGUF_TYPE_UINT64, &v, &err), RLX_OK);
    assert_int_equal(v->v.arr.count, 0);
    assert_int_equal(rlx_gguf_get_arr(g, "a.str", RLX_GGUF_TYPE_STRING, &v, &err), RLX_OK);
    assert_int_equal(v->v.arr.count, 4);
    expect_token(g, v, 3, "delta");
    expect_token(g, v, 1, "");
    expect_token(g, v, 2, "\xe2\x96\x81gamma");
    expect_token(g, v, 0, "alpha");

    /* nested: walk [[1, 2, 3], [], [-4]] */
    assert_int_equal(rlx_gguf_get_arr(g, "n.ints", RLX_GGUF_TYPE_ARRAY, &v, &err), RLX_OK);
    assert_int_equal(v->v.arr.count, 3);
    rlx_gguf_value inner, x;
    assert_int_equal(rlx_gguf_array_get(g, v, 0, &inner, &err), RLX_OK);
    assert_int_equal(inner.type, RLX_GGUF_TYPE_ARRAY);
    assert_int_equal(inner.v.arr.elem_type, RLX_GGUF_TYPE_INT32);
    assert_int_equal(inner.v.arr.count, 3);
    assert_int_equal(rlx_gguf_array_get(g, &inner, 2, &x, &err), RLX_OK);
    assert_int_equal(x.v.i64, 3);
    assert_int_equal(rlx_gguf_array_get(g, v, 1, &inner, &err), RLX_OK);
    assert_int_equal(inner.v.arr.count, 0);
    assert_int_equal(rlx_gguf_array_get(g, v, 2, &inner, &err), RLX_OK);
    assert_int_equal(rlx_gguf_array_get(g, &inner, 0, &x, &err), RLX_OK);
    assert_int_equal(x.v.i64, -4);
    assert_int_equal(rlx_gguf_get_arr(g, "n.strs", RLX_GGUF_TYPE_ARRAY, &v, &err), RLX_OK);
    assert_int_equal(rlx_gguf_array_get(g, v, 1, &inner, &err), RLX_OK);
    expect_token(g, &inner, 0, "d");
    assert_int_equal(rlx_gguf_array_get(g, v, 0, &inner, &err), RLX_OK);
    expect_token(g, &inner, 1, "c");
    expect_token(g, &inner, 0, "a b");
    assert_int_equal(rlx_gguf_get_arr(g, "n.deep", RLX_GGUF_TYPE_ARRAY, &v, &err), RLX_OK);
    assert_int_equal(rlx_gguf_array_get(g, v, 0, &inner, &err), RLX_OK);
    assert_int_equal(inner.v.arr.elem_type, RLX_GGUF_TYPE_ARRAY);
    assert_int_equal(rlx_gguf_array_get(g, &inner, 0, &x, &err), RLX_OK);
    assert_int_equal(x.v.arr.elem_type, RLX_GGUF_TYPE_BOOL);
    assert_int_equal(rlx_gguf_array_get(g, &x, 0, &inner, &err), RLX_OK);
    assert_int_equal(inner.type, RLX_GGUF_TYPE_BOOL);
    assert_int_equal(inner.v.u64, 1);

    static const struct {
        const char *name;
        rlx_dtype dtype;
        uint32_t n_dims;
        uint64_t n_bytes;
    } want[] = {
        {"w.f32", RLX_DTYPE_F32, 2, 768},  {"w.f16", RLX_DTYPE_F16, 3, 256},
        {"w.q4_0", RLX_DTYPE_Q4_0, 2, 72}, {"w.q8_0", RLX_DTYPE_Q8_0, 1, 34},
        {"w.i32", RLX_DTYPE_I32, 1, 20},   {"w.q4_k", RLX_DTYPE_Q4_K, 4, 144},
    };
    const void *src[] = {f32, f16, q4, q8, i32, q4k};
    assert_int_equal(rlx_gguf_n_tensors(g), 6);
    for (int i = 0; i < 6; i++) {
        const rlx_gguf_tensor *t = rlx_gguf_find_tensor(g, want[i].name);
        assert_non_null(t);
        assert_ptr_equal(t, rlx_gguf_tensor_at(g, (uint64_t)i));
        assert_int_equal(t->dtype, want[i].dtype);
        assert_int_equal(t->n_dims, want[i].n_dims);
        assert_int_equal(t->n_bytes, want[i].n_bytes);
        assert_int_equal(t->offset % alignment, 0);
        assert_memory_equal(rlx_gguf_tensor_data(g, t), src[i], want[i].n_bytes);
    }
    assert_int_equal(rlx_gguf_find_tensor(g, "w.f16")->ne[2], 4);
    assert_null(err);
}

static void writer_round_trip(void **state)
{
    static const uint32_t alignments[] = {32, 1, 8, 64, 4096};
    float f32[64 * 3];
    uint16_t f16[128];
    uint8_t q4[72], q8[34], q4k[144];
    int32_t i32[5];
    for (size_t k = 0; k < sizeof alignments / sizeof alignments[0]; k++) {
        rlx_gguf_writer *w = rlx_gguf_writer_create();
        assert_non_null(w);
        if (alignments[k] != 32)
            rlx_gguf_writer_set_alignment(w, alignments[k]);
        fill_writer(w, f32, f16, q4, q8, i32, q4k);
        rlx_error *err = NULL;
        void *mem = NULL;
        size_t size = 0;
        if (rlx_gguf_writer_to_memory(w, &mem, &size, &err) != RLX_OK)
            fail_msg("%s", rlx_error_message(err));
        assert_int_equal(size % alignments[k], 0);
        rlx_gguf *g = NULL;
        if (rlx_gguf_open_memory(mem, size, "round-trip.gguf", &g, &err) != RLX_OK)
            fail_msg("%s", rlx_error_message(err));
        check_round_trip(g, alignments[k], f32, f16, q4, q8, i32, q4k);
        if (alignments[k] != 32) {
            uint32_t a;
            assert_int_equal(rlx_gguf_get_u32(g, "general.alignment", &a, &err), RLX_OK);
            assert_int_equal(a, alignments[k]);
        } else {
            assert_null(rlx_gguf_find(g, "general.alignment"));
        }
        rlx_gguf_close(g);

        /* the file path gives the same bytes */
        const char *path = rlx_test_tmp("round-trip.gguf");
        if (rlx_gguf_writer_write(w, path, &err) != RLX_OK)
            fail_msg("%s", rlx_error_message(err));
        size_t fsize = 0;
        void *fbytes = rlx_test_read_file(path, &fsize);
        assert_non_null(fbytes);
        assert_int_equal(fsize, size);
        assert_memory_equal(fbytes, mem, size);
        free(fbytes);
        assert_int_equal(rlx_gguf_open(path, &g, &err), RLX_OK);
        check_round_trip(g, alignments[k], f32, f16, q4, q8, i32, q4k);

        /* copy_kv of the re-read file reproduces every key byte for byte */
        rlx_gguf_writer *w2 = rlx_gguf_writer_create();
        assert_int_equal(rlx_gguf_writer_copy_kv(w2, g, &err), RLX_OK);
        for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
            const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
            assert_int_equal(rlx_gguf_writer_add_tensor_ref(w2, t->name, t->dtype, t->n_dims, t->ne,
                                                            rlx_gguf_tensor_data(g, t), t->n_bytes),
                             RLX_OK);
        }
        void *mem2 = NULL;
        size_t size2 = 0;
        assert_int_equal(rlx_gguf_writer_to_memory(w2, &mem2, &size2, &err), RLX_OK);
        assert_int_equal(size2, size);
        assert_memory_equal(mem2, mem, size);
        free(mem2);
        rlx_gguf_writer_free(w2);
        rlx_gguf_close(g);
        unlink(path);
        free(mem);
        rlx_gguf_writer_free(w);
    }
}

/* Re-write stories260K from its own keys and tensors: the data must match
 * and the result must parse the same. */
static void writer_copies_real_file(void **state)
{
    rlx_gguf *g = NULL, *g2 = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_gguf_open(rlx_test_data("llm/stories260K.gguf"), &g, &err), RLX_OK);
    rlx_gguf_writer *w = rlx_gguf_writer_create();
    assert_int_equal(rlx_gguf_writer_copy_kv(w, g, &err), RLX_OK);
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
        const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
        assert_int_equal(rlx_gguf_writer_add_tensor_ref(w, t->name, t->dtype, t->n_dims, t->ne,
                                                        rlx_gguf_tensor_data(g, t), t->n_bytes),
                         RLX_OK);
    }
    const char *path = rlx_test_tmp("stories-copy.gguf");
    assert_int_equal(rlx_gguf_writer_write(w, path, &err), RLX_OK);
    rlx_gguf_writer_free(w);
    assert_int_equal(rlx_gguf_open(path, &g2, &err), RLX_OK);
    /* same layout as the original writer used: identical files */
    size_t a_size = 0, b_size = 0;
    void *a = rlx_test_read_file(rlx_test_data("llm/stories260K.gguf"), &a_size);
    void *b = rlx_test_read_file(path, &b_size);
    assert_int_equal(a_size, b_size);
    assert_memory_equal(a, b, a_size);
    free(a);
    free(b);
    assert_int_equal(rlx_gguf_n_kv(g2), rlx_gguf_n_kv(g));
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
        const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
        const rlx_gguf_tensor *t2 = rlx_gguf_find_tensor(g2, t->name);
        assert_non_null(t2);
        assert_memory_equal(rlx_gguf_tensor_data(g, t), rlx_gguf_tensor_data(g2, t2), t->n_bytes);
    }
    rlx_gguf_close(g2);
    rlx_gguf_close(g);
    unlink(path);
}

static void writer_errors(void **state)
{
    rlx_error *err = NULL;
    void *mem = NULL;
    size_t n = 0;
    float data[64] = {0};
    uint64_t ne[2] = {64, 1};

    rlx_gguf_writer *w = rlx_gguf_writer_create();
    assert_int_equal(rlx_gguf_writer_add_tensor(w, "x", RLX_DTYPE_F32, 1, ne, data, 256), RLX_OK);
    assert_int_equal(rlx_gguf_writer_add_tensor(w, "x", RLX_DTYPE_F32, 1, ne, data, 256),
                     RLX_ERR_INVALID_ARG);
    expect_error(rlx_gguf_writer_to_memory(w, &mem, &n, &err), RLX_ERR_INVALID_ARG, &err,
                 "tensor 'x' is added twice");
    assert_null(mem);
    rlx_gguf_writer_free(w);

    w = rlx_gguf_writer_create();
    assert_int_equal(rlx_gguf_writer_add_tensor(w, "y", RLX_DTYPE_F32, 2, ne, data, 100),
                     RLX_ERR_INVALID_ARG);
    assert_non_null(strstr(rlx_gguf_writer_error(w), "100 bytes given"));
    rlx_gguf_writer_free(w);

    w = rlx_gguf_writer_create();
    ne[0] = 33;
    assert_int_equal(rlx_gguf_writer_add_tensor(w, "q", RLX_DTYPE_Q4_0, 1, ne, data, 18),
                     RLX_ERR_INVALID_ARG);
    rlx_gguf_writer_free(w);

    w = rlx_gguf_writer_create();
    rlx_gguf_writer_set_alignment(w, 48);
    expect_error(rlx_gguf_writer_write(w, rlx_test_tmp("never.gguf"), &err), RLX_ERR_INVALID_ARG,
                 &err, "alignment 48 is not a power of two");
    rlx_gguf_writer_free(w);

    w = rlx_gguf_writer_create();
    assert_int_equal(rlx_gguf_writer_set_str(w, "general.alignment", "64"), RLX_ERR_INVALID_ARG);
    rlx_gguf_writer_free(w);

    /* an unwritable destination leaves nothing behind */
    w = rlx_gguf_writer_create();
    rlx_gguf_writer_set_u32(w, "k", 1);
    expect_error(rlx_gguf_writer_write(w, "/nonexistent-dir-rlx/x.gguf", &err), RLX_ERR_IO, &err,
                 "/nonexistent-dir-rlx/x.gguf");
    rlx_gguf_writer_free(w);

    /* a zero dim makes an empty tensor even when the others are huge, as
     * the reader sees it (found by the fuzzer) */
    w = rlx_gguf_writer_create();
    uint64_t ne0[3] = {1ull << 40, 0, 1ull << 40};
    assert_int_equal(rlx_gguf_writer_add_tensor(w, "empty", RLX_DTYPE_F32, 3, ne0, NULL, 0),
                     RLX_OK);
    assert_int_equal(rlx_gguf_writer_to_memory(w, &mem, &n, &err), RLX_OK);
    rlx_gguf *ge = NULL;
    assert_int_equal(rlx_gguf_open_memory(mem, n, "zero.gguf", &ge, &err), RLX_OK);
    assert_int_equal(rlx_gguf_find_tensor(ge, "empty")->n_elements, 0);
    assert_int_equal(rlx_gguf_find_tensor(ge, "empty")->ne[2], 1ull << 40);
    rlx_gguf_close(ge);
    free(mem);
    rlx_gguf_writer_free(w);

    /* an empty writer is a valid file */
    w = rlx_gguf_writer_create();
    assert_int_equal(rlx_gguf_writer_to_memory(w, &mem, &n, &err), RLX_OK);
    rlx_gguf *g = NULL;
    assert_int_equal(rlx_gguf_open_memory(mem, n, "empty.gguf", &g, &err), RLX_OK);
    assert_int_equal(rlx_gguf_n_kv(g), 0);
    assert_int_equal(rlx_gguf_n_tensors(g), 0);
    rlx_gguf_close(g);
    free(mem);
    rlx_gguf_writer_free(w);
}

/* add_tensor_gen: a tensor produced chunk by chunk at write time (more than
 * one chunk, so the offsets and the short last chunk are exercised) reads
 * back equal to the same values added from memory, in a file and in memory;
 * a failing generator fails the write and leaves no file. */
typedef struct gen_user {
    uint64_t calls, next_off;
    bool fail;
} gen_user;

static uint32_t gen_value(uint64_t i)
{
    return (uint32_t)(i * 2654435761u) >> 9; /* exact in a float */
}

static rlx_status gen_fill(void *user, uint64_t off, void *buf, uint64_t n, rlx_error **err)
{
    gen_user *g = user;
    assert_int_equal(off, g->next_off);
    assert_true(n <= RLX_GGUF_GEN_CHUNK);
    g->next_off += n;
    g->calls++;
    if (g->fail && g->calls == 2)
        return rlx_error_set(err, RLX_ERR_IO, "generator failed on purpose");
    float *f = buf;
    for (uint64_t i = 0; i < n / 4; i++)
        f[i] = (float)gen_value(off / 4 + i);
    return RLX_OK;
}

static void writer_generated_tensor(void **state)
{
    (void)state;
    const uint64_t ne[2] = {1000, RLX_GGUF_GEN_CHUNK / 4000 * 2 + 3}; /* 2 chunks and a bit */
    const uint64_t n = ne[0] * ne[1];
    float *want = malloc(n * sizeof(float));
    assert_non_null(want);
    for (uint64_t i = 0; i < n; i++)
        want[i] = (float)gen_value(i);
    for (int to_file = 0; to_file < 2; to_file++) {
        gen_user g = {0};
        rlx_gguf_writer *w = rlx_gguf_writer_create();
        rlx_gguf_writer_set_str(w, "general.architecture", "llama");
        float small[4] = {1, 2, 3, 4};
        uint64_t ne4 = 4;
        rlx_gguf_writer_add_tensor(w, "a", RLX_DTYPE_F32, 1, &ne4, small, sizeof small);
        assert_int_equal(rlx_gguf_writer_add_tensor_gen(w, "big", RLX_DTYPE_F32, 2, ne,
                                                        n * sizeof(float), gen_fill, &g),
                         RLX_OK);
        rlx_error *err = NULL;
        rlx_gguf *r = NULL;
        void *mem = NULL;
        const char *path = rlx_test_tmp("generated.gguf");
        if (to_file) {
            assert_int_equal(rlx_gguf_writer_write(w, path, &err), RLX_OK);
            assert_int_equal(rlx_gguf_open(path, &r, &err), RLX_OK);
        } else {
            size_t size = 0;
            assert_int_equal(rlx_gguf_writer_to_memory(w, &mem, &size, &err), RLX_OK);
            assert_int_equal(rlx_gguf_open_memory(mem, size, "generated", &r, &err), RLX_OK);
        }
        assert_int_equal(g.calls, 3);
        const rlx_gguf_tensor *t = rlx_gguf_find_tensor(r, "big");
        assert_non_null(t);
        assert_int_equal(t->ne[1], ne[1]);
        assert_memory_equal(rlx_gguf_tensor_data(r, t), want, n * sizeof(float));
        t = rlx_gguf_find_tensor(r, "a");
        assert_memory_equal(rlx_gguf_tensor_data(r, t), small, sizeof small);
        rlx_gguf_close(r);
        free(mem);
        rlx_gguf_writer_free(w);
        unlink(path);
    }
    /* a failing generator: an error naming the cause, no file */
    gen_user g = {.fail = true};
    rlx_gguf_writer *w = rlx_gguf_writer_create();
    rlx_gguf_writer_add_tensor_gen(w, "big", RLX_DTYPE_F32, 2, ne, n * sizeof(float), gen_fill, &g);
    rlx_error *err = NULL;
    const char *path = rlx_test_tmp("generated-fail.gguf");
    expect_error(rlx_gguf_writer_write(w, path, &err), RLX_ERR_IO, &err, "on purpose");
    assert_int_equal(access(path, F_OK), -1);
    /* no generator is refused at add time */
    rlx_gguf_writer *w2 = rlx_gguf_writer_create();
    assert_int_equal(
        rlx_gguf_writer_add_tensor_gen(w2, "x", RLX_DTYPE_F32, 1, ne, 4000, NULL, NULL),
        RLX_ERR_INVALID_ARG);
    rlx_gguf_writer_free(w2);
    rlx_gguf_writer_free(w);
    free(want);
}

static void open_errors(void **state)
{
    rlx_gguf *g = (rlx_gguf *)1;
    rlx_error *err = NULL;
    expect_error(rlx_gguf_open("/nonexistent/model.gguf", &g, &err), RLX_ERR_IO, &err,
                 "/nonexistent/model.gguf");
    assert_null(g);
    expect_error(rlx_gguf_open(rlx_test_data("llm"), &g, &err), RLX_ERR_IO, &err,
                 "not a regular file");
    /* a text file */
    expect_error(rlx_gguf_open(rlx_test_data("README.md"), &g, &err), RLX_ERR_FORMAT, &err,
                 "README.md: not a GGUF file");
}

int main(void)
{
    rlx_test_need_data("llm/stories260K.gguf", "README.md", "tokenizers/ggml-vocab-gemma-4.gguf",
                       "tokenizers/ggml-vocab-gpt-2.gguf", "tokenizers/ggml-vocab-llama-bpe.gguf",
                       "tokenizers/ggml-vocab-llama-spm.gguf", "tokenizers/ggml-vocab-qwen2.gguf",
                       NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stories_metadata),
        cmocka_unit_test(stories_tensors),
        cmocka_unit_test(vocab_files),
        cmocka_unit_test(every_vocab_file),
        cmocka_unit_test(gemma_typed_arrays),
        cmocka_unit_test(getter_errors),
        cmocka_unit_test(writer_round_trip),
        cmocka_unit_test(writer_copies_real_file),
        cmocka_unit_test(writer_errors),
        cmocka_unit_test(open_errors),
        cmocka_unit_test(writer_generated_tensor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
