/* The LLM runner end to end on the real stories260K (a trained tiny Llama):
 * greedy text from BOS + "Once upon a time", prefix reuse against a full
 * re-prefill, a prompt longer than the context, cancellation, stop strings,
 * and an unsupported architecture's error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backends/backend.h"
#include "engine/formats/gguf.h"
#include "models/llm/llm.h"
#include "test-util.h"

static const char expected[] =
    ", there was a little girl named Lily. She loved to play outside in the park. One day, "
    "she saw a big, red ball. She wanted to play with it, but it was too high.";

typedef struct {
    char text[4096];
    size_t len;
    int n_calls;
    rlx_llm *cancel_after_model;
    int cancel_after;
    /* with n_prompt set: each piece's figures are checked (without stop
     * strings every token's text comes at its own token) */
    int32_t n_prompt, n_ctx, last_generated;
    char bad[160];
} collected;

static bool collect(void *user, const rlx_llm_piece *p)
{
    collected *c = user;
    const char *piece = p->text;
    size_t len = p->len;
    if (c->len + len < sizeof c->text) {
        memcpy(c->text + c->len, piece, len);
        c->len += len;
        c->text[c->len] = 0;
    }
    if (++c->n_calls == c->cancel_after && c->cancel_after_model)
        rlx_llm_cancel(c->cancel_after_model);
    if (c->n_prompt && !c->bad[0]) {
        if (p->n_generated != c->last_generated + 1 ||
            p->n_past != c->n_prompt + p->n_generated - 1 || p->n_ctx != c->n_ctx ||
            !(p->tps >= 0) || (p->n_generated == 1 && p->tps != 0))
            snprintf(c->bad, sizeof c->bad, "piece %d: n_generated %d n_past %d n_ctx %d tps %g",
                     c->n_calls, p->n_generated, p->n_past, p->n_ctx, p->tps);
        c->last_generated = p->n_generated;
    }
    return true;
}

static rlx_llm *load_on(const char *device, int32_t n_ctx, rlx_dtype kv, int32_t n_batch)
{
    rlx_llm_params p = rlx_llm_default_params();
    p.device = device;
    p.n_ctx = n_ctx;
    p.kv_dtype = kv;
    p.n_batch = n_batch;
    p.n_threads = 1;
    rlx_llm *m = NULL;
    rlx_error *err = NULL;
    if (rlx_llm_load(rlx_test_data("llm/stories260K.gguf"), &p, &m, &err) != RLX_OK)
        fail_msg("load on %s: %s", device ? device : "cpu", rlx_error_message(err));
    return m;
}

static rlx_llm *load(int32_t n_ctx, rlx_dtype kv, int32_t n_batch)
{
    return load_on(NULL, n_ctx, kv, n_batch);
}

static void prompt_ids(rlx_llm *m, const char *text, rlx_token **ids, size_t *n)
{
    rlx_error *err = NULL;
    if (rlx_llm_tokenize(m, text, true, false, ids, n, &err) != RLX_OK)
        fail_msg("tokenize: %s", rlx_error_message(err));
}

static rlx_llm_generate_params greedy(int n)
{
    rlx_llm_generate_params gp = rlx_llm_generate_default_params();
    gp.sampler.temperature = 0;
    gp.max_tokens = n;
    return gp;
}

static void check_greedy_on(const char *device, rlx_dtype kv, int32_t n_batch)
{
    rlx_llm *m = load_on(device, 256, kv, n_batch);
    rlx_token *ids;
    size_t n;
    prompt_ids(m, "Once upon a time", &ids, &n);
    assert_int_equal(n, 5);
    assert_int_equal(ids[0], 1); /* BOS */
    rlx_llm_generate_params gp = greedy(60);
    collected c = {.n_prompt = 5, .n_ctx = 256};
    rlx_llm_stats st;
    rlx_error *err = NULL;
    if (rlx_llm_generate(m, ids, n, &gp, collect, &c, &st, NULL, NULL, &err) != RLX_OK)
        fail_msg("generate: %s", rlx_error_message(err));
    if (c.bad[0])
        fail_msg("streamed figures on %s: %s", device ? device : "cpu", c.bad);
    assert_int_equal(c.last_generated, 60);
    if (strncmp(c.text, expected, strlen(expected)))
        fail_msg("generated on %s:\n%s\nexpected it to start with:\n%s", device ? device : "cpu",
                 c.text, expected);
    assert_int_equal(st.n_prompt, 5);
    assert_int_equal(st.n_generated, 60);
    assert_int_equal(st.stop, RLX_LLM_STOP_LENGTH);
    /* the last sampled token is not evaluated */
    assert_int_equal(st.n_past, 5 + 59);
    free(ids);
    rlx_llm_free(m);
}

/* Every backend of the registry that has a device. */
static void check_greedy(rlx_dtype kv, int32_t n_batch)
{
    int n = 0;
    for (int b = 0; b < rlx_backend_count(); b++) {
        const rlx_backend_i *be = rlx_backend_at(b);
        if (!be || !be->device_count || be->device_count() < 1)
            continue;
        check_greedy_on(be->name, kv, n_batch);
        n++;
    }
    assert_true(n > 0);
}

static void test_greedy_f16(void **state)
{
    (void)state;
    check_greedy(RLX_DTYPE_F16, 0);
}

/* F32 cache, and a prefill chunk of 2 so the 5-token prompt takes three runs */
static void test_greedy_f32_chunked(void **state)
{
    (void)state;
    check_greedy(RLX_DTYPE_F32, 2);
}

/* A Q8_0 cache (token-major rows of 32 = 4 kv heads x 8 here, quantized by
 * the append, decoded per tile by attention) keeps the documented greedy
 * text, in one prefill and in chunks of 2, on the CPU and on every backend
 * that takes it (Vulkan: the append quantizes on the device). A backend
 * without the Q8_0 cache refuses it at load with a sentence naming it,
 * never a silent fallback. */
static void test_greedy_q8_0(void **state)
{
    (void)state;
    check_greedy_on(NULL, RLX_DTYPE_Q8_0, 0);
    check_greedy_on(NULL, RLX_DTYPE_Q8_0, 2);
    for (int b = 0; b < rlx_backend_count(); b++) {
        const rlx_backend_i *be = rlx_backend_at(b);
        if (!be || !strcmp(be->name, "cpu") || !be->device_count || be->device_count() < 1)
            continue;
        rlx_llm_params p = rlx_llm_default_params();
        p.device = be->name;
        p.n_ctx = 64;
        p.kv_dtype = RLX_DTYPE_Q8_0;
        rlx_llm *m = NULL;
        rlx_error *err = NULL;
        rlx_status st = rlx_llm_load(rlx_test_data("llm/stories260K.gguf"), &p, &m, &err);
        if (st == RLX_OK) { /* the backend supports it: the text must match */
            rlx_llm_free(m);
            check_greedy_on(be->name, RLX_DTYPE_Q8_0, 0);
            check_greedy_on(be->name, RLX_DTYPE_Q8_0, 2);
            continue;
        }
        assert_null(m);
        if (!strstr(rlx_error_message(err), "Q8_0 KV cache does not run on"))
            fail_msg("%s: %s", be->name, rlx_error_message(err));
        rlx_error_free(err);
    }
}

/* A second turn that extends the first reuses its cache and gives the same
 * tokens as a fresh prefill of the whole text. */
static void test_prefix_reuse(void **state)
{
    (void)state;
    rlx_llm *m = load(256, RLX_DTYPE_F32, 0);
    rlx_error *err = NULL;
    rlx_token *ids, *gen1 = NULL, *gen2 = NULL, *gen3 = NULL;
    size_t n, n1, n2, n3;
    prompt_ids(m, "Once upon a time", &ids, &n);
    rlx_llm_generate_params gp = greedy(20);
    rlx_llm_stats st;
    assert_int_equal(rlx_llm_generate(m, ids, n, &gp, NULL, NULL, &st, &gen1, &n1, &err), RLX_OK);
    assert_int_equal(n1, 20);

    /* turn 2: the first text, 12 of its tokens, then a new word */
    size_t n_p2 = n + 12 + 1;
    rlx_token *p2 = malloc(sizeof *p2 * n_p2);
    memcpy(p2, ids, sizeof *ids * n);
    memcpy(p2 + n, gen1, sizeof *gen1 * 12);
    p2[n + 12] = 403; /* " Once" */
    assert_int_equal(rlx_llm_generate(m, p2, n_p2, &gp, NULL, NULL, &st, &gen2, &n2, &err), RLX_OK);
    assert_int_equal(st.n_reused, n + 12);

    rlx_llm_reset(m);
    assert_int_equal(rlx_llm_generate(m, p2, n_p2, &gp, NULL, NULL, &st, &gen3, &n3, &err), RLX_OK);
    assert_int_equal(st.n_reused, 0);
    assert_int_equal(n2, n3);
    assert_memory_equal(gen2, gen3, n2 * sizeof *gen2);

    /* the same prompt again: all but its last token come from the cache */
    assert_int_equal(rlx_llm_generate(m, p2, n_p2, &gp, NULL, NULL, &st, NULL, NULL, &err), RLX_OK);
    assert_int_equal(st.n_reused, n_p2 - 1);
    free(ids);
    free(p2);
    free(gen1);
    free(gen2);
    free(gen3);
    rlx_llm_free(m);
}

static void test_prompt_too_long(void **state)
{
    (void)state;
    rlx_llm *m = load(8, RLX_DTYPE_F16, 4);
    rlx_token *ids;
    size_t n;
    prompt_ids(m, "Once upon a time there was a little girl named Lily", &ids, &n);
    assert_true(n > 8);
    rlx_llm_generate_params gp = greedy(4);
    rlx_error *err = NULL;
    assert_int_equal(rlx_llm_generate(m, ids, n, &gp, NULL, NULL, NULL, NULL, NULL, &err),
                     RLX_ERR_INVALID_ARG);
    assert_non_null(strstr(rlx_error_message(err), "longer than the context of 8"));
    rlx_error_free(err);
    err = NULL;
    /* a prompt that fits: generation stops when the context is full */
    rlx_llm_stats st;
    assert_int_equal(rlx_llm_generate(m, ids, 5, &gp, NULL, NULL, &st, NULL, NULL, &err), RLX_OK);
    gp.max_tokens = 0;
    assert_int_equal(rlx_llm_generate(m, ids, 5, &gp, NULL, NULL, &st, NULL, NULL, &err), RLX_OK);
    assert_int_equal(st.stop, RLX_LLM_STOP_CONTEXT);
    assert_int_equal(st.n_past, 8);
    free(ids);
    rlx_llm_free(m);
}

/* stories260K rewritten by the GGUF writer: every key (or all but the
 * tokenizer's) and every tensor, token_embd cut to emb_rows rows. */
static const char *rewrite_stories(const char *name, bool tokenizer, uint64_t emb_rows)
{
    rlx_error *err = NULL;
    rlx_gguf *g = NULL;
    assert_int_equal(rlx_gguf_open(rlx_test_data("llm/stories260K.gguf"), &g, &err), RLX_OK);
    rlx_gguf_writer *w = rlx_gguf_writer_create();
    for (uint64_t i = 0; i < rlx_gguf_n_kv(g); i++) {
        const rlx_gguf_kv *kv = rlx_gguf_kv_at(g, i);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)kv->key.len, kv->key.ptr);
        if (!tokenizer && !strncmp(key, "tokenizer.", 10))
            continue;
        assert_int_equal(rlx_gguf_writer_set_value(w, key, &kv->value), RLX_OK);
    }
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
        const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
        uint64_t ne[RLX_GGUF_MAX_DIMS];
        memcpy(ne, t->ne, sizeof ne);
        uint64_t bytes = t->n_bytes;
        if (!strcmp(t->name, "token_embd.weight")) {
            bytes = bytes / ne[1] * emb_rows;
            ne[1] = emb_rows;
        }
        assert_int_equal(rlx_gguf_writer_add_tensor_ref(w, t->name, t->dtype, t->n_dims, ne,
                                                        rlx_gguf_tensor_data(g, t), bytes),
                         RLX_OK);
    }
    const char *path = rlx_test_tmp(name);
    assert_int_equal(rlx_gguf_writer_write(w, path, &err), RLX_OK);
    rlx_gguf_writer_free(w);
    rlx_gguf_close(g);
    return path;
}

/* Bad input gets a sentence, never a crash: token ids outside the
 * vocabulary, a tokenizer larger than the embedding, no tokenizer at all. */
static void test_bad_input(void **state)
{
    (void)state;
    rlx_llm *m = load(64, RLX_DTYPE_F16, 8);
    rlx_llm_generate_params gp = greedy(2);
    rlx_error *err = NULL;
    const rlx_token past_end[] = {1, 512}, negative[] = {1, -3};
    assert_int_equal(rlx_llm_generate(m, past_end, 2, &gp, NULL, NULL, NULL, NULL, NULL, &err),
                     RLX_ERR_INVALID_ARG);
    assert_non_null(strstr(rlx_error_message(err), "token 512 is outside the vocabulary of 512"));
    rlx_error_clear(&err);
    assert_int_equal(rlx_llm_generate(m, negative, 2, &gp, NULL, NULL, NULL, NULL, NULL, &err),
                     RLX_ERR_INVALID_ARG);
    assert_non_null(strstr(rlx_error_message(err), "token -3"));
    rlx_error_clear(&err);
    rlx_llm_free(m);

    /* 512 tokens, 500 embedding rows */
    const char *path = rewrite_stories("stories-short-embd.gguf", true, 500);
    m = NULL;
    assert_int_equal(rlx_llm_load(path, NULL, &m, &err), RLX_ERR_FORMAT);
    assert_null(m);
    assert_non_null(strstr(rlx_error_message(err), "the tokenizer has 512 tokens but the "
                                                   "embedding only 500 rows"));
    rlx_error_clear(&err);

    /* no tokenizer: it loads (token ids work), text does not */
    path = rewrite_stories("stories-no-tokenizer.gguf", false, 512);
    assert_int_equal(rlx_llm_load(path, NULL, &m, &err), RLX_OK);
    rlx_token *ids = NULL;
    size_t n = 0;
    assert_int_equal(rlx_llm_tokenize(m, "Once", true, false, &ids, &n, &err), RLX_ERR_NOT_FOUND);
    assert_null(ids);
    assert_non_null(strstr(rlx_error_message(err), "no tokenizer"));
    rlx_error_clear(&err);
    rlx_token *gen = NULL;
    size_t n_gen = 0;
    const rlx_token once[] = {1, 403};
    assert_int_equal(rlx_llm_generate(m, once, 2, &gp, NULL, NULL, NULL, &gen, &n_gen, &err),
                     RLX_OK);
    assert_int_equal(n_gen, 2);
    free(gen);
    rlx_llm_free(m);
}

static void test_cancel_and_stop(void **state)
{
    (void)state;
    rlx_llm *m = load(256, RLX_DTYPE_F16, 0);
    rlx_token *ids;
    size_t n;
    prompt_ids(m, "Once upon a time", &ids, &n);
    rlx_llm_generate_params gp = greedy(60);
    rlx_llm_stats st;
    rlx_error *err = NULL;
    collected c = {.cancel_after_model = m, .cancel_after = 3};
    assert_int_equal(rlx_llm_generate(m, ids, n, &gp, collect, &c, &st, NULL, NULL, &err), RLX_OK);
    assert_int_equal(st.stop, RLX_LLM_STOP_CANCELLED);
    assert_int_equal(st.n_generated, 3);

    /* the next call starts afresh; a stop string ends it before the name */
    const char *stop[] = {"Lily"};
    gp.stop = stop;
    gp.n_stop = 1;
    collected c2 = {0};
    assert_int_equal(rlx_llm_generate(m, ids, n, &gp, collect, &c2, &st, NULL, NULL, &err), RLX_OK);
    assert_int_equal(st.stop, RLX_LLM_STOP_STRING);
    assert_string_equal(c2.text, ", there was a little girl named ");
    free(ids);
    rlx_llm_free(m);
}

static void test_unsupported_arch(void **state)
{
    (void)state;
    rlx_gguf_writer *w = rlx_gguf_writer_create();
    rlx_gguf_writer_set_str(w, "general.architecture", "gpt2");
    const char *path = rlx_test_tmp("gpt2.gguf");
    rlx_error *err = NULL;
    assert_int_equal(rlx_gguf_writer_write(w, path, &err), RLX_OK);
    rlx_gguf_writer_free(w);
    rlx_llm *m = NULL;
    assert_int_equal(rlx_llm_load(path, NULL, &m, &err), RLX_ERR_UNSUPPORTED);
    assert_null(m);
    const char *msg = rlx_error_message(err);
    assert_non_null(strstr(msg, "'gpt2'"));
    assert_non_null(strstr(msg, "llama, mistral, qwen2, qwen3, gemma2, gemma3, phi3"));
    rlx_error_free(err);
}

typedef struct {
    int calls, weights_done;
    int stop_after; /* 0 = never */
} progress_log;

static bool on_progress(void *user, const char *stage, double fraction)
{
    progress_log *l = user;
    l->calls++;
    if (!strcmp(stage, "weights") && fraction == 1.0)
        l->weights_done++;
    return !(l->stop_after && l->calls >= l->stop_after);
}

/* Loading reports progress, and a callback that says stop cancels it. */
static void test_load_progress(void **state)
{
    (void)state;
    rlx_llm_params p = rlx_llm_default_params();
    p.n_ctx = 64;
    progress_log l = {0};
    p.progress = on_progress;
    p.progress_user = &l;
    rlx_llm *m = NULL;
    rlx_error *err = NULL;
    if (rlx_llm_load(rlx_test_data("llm/stories260K.gguf"), &p, &m, &err) != RLX_OK)
        fail_msg("load: %s", rlx_error_message(err));
    assert_true(l.calls > 2);
    assert_true(l.weights_done >= 1);
    rlx_llm_free(m);
    progress_log stop = {.stop_after = 1};
    p.progress_user = &stop;
    assert_int_equal(rlx_llm_load(rlx_test_data("llm/stories260K.gguf"), &p, &m, &err),
                     RLX_ERR_CANCELLED);
    assert_null(m);
    rlx_error_free(err);
}

/* A tiny random-weight qwen2 on the real Qwen2 vocabulary and its ChatML
 * template: the chat prompt is rendered and tokenized with control tokens,
 * and the second turn reuses the first turn's cache. */
static void add_random(rlx_gguf_writer *w, const char *name, int64_t rows, int64_t cols,
                       float center, float spread, uint32_t *state)
{
    int64_t n = rows ? rows * cols : cols;
    uint16_t *h = malloc(sizeof *h * (size_t)n);
    float *f = malloc(sizeof *f * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        *state = *state * 1664525u + 1013904223u;
        f[i] = center + spread * ((float)(*state >> 8) / 16777216.f - 0.5f);
        h[i] = rlx_f32_to_f16(f[i]);
    }
    uint64_t ne[2] = {(uint64_t)cols, (uint64_t)rows};
    if (rows) /* matrices in F16, norms and biases in F32 */
        rlx_gguf_writer_add_tensor(w, name, RLX_DTYPE_F16, 2, ne, h, sizeof *h * (size_t)n);
    else
        rlx_gguf_writer_add_tensor(w, name, RLX_DTYPE_F32, 1, ne, f, sizeof *f * (size_t)n);
    free(h);
    free(f);
}

static void test_chat_prefix_reuse(void **state)
{
    (void)state;
    rlx_error *err = NULL;
    rlx_gguf *vocab = NULL;
    if (rlx_gguf_open(rlx_test_data("tokenizers/ggml-vocab-qwen2.gguf"), &vocab, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    rlx_gguf_writer *w = rlx_gguf_writer_create();
    assert_int_equal(rlx_gguf_writer_copy_kv(w, vocab, &err), RLX_OK);
    rlx_gguf_close(vocab);
    const int64_t D = 32, F = 64, V = 151936;
    rlx_gguf_writer_set_u32(w, "qwen2.block_count", 1);
    rlx_gguf_writer_set_u32(w, "qwen2.embedding_length", (uint32_t)D);
    rlx_gguf_writer_set_u32(w, "qwen2.feed_forward_length", (uint32_t)F);
    rlx_gguf_writer_set_u32(w, "qwen2.attention.head_count", 4);
    rlx_gguf_writer_set_u32(w, "qwen2.attention.head_count_kv", 2);
    rlx_gguf_writer_set_u32(w, "qwen2.context_length", 512);
    uint32_t rs = 7;
    add_random(w, "token_embd.weight", V, D, 0, 2, &rs);
    add_random(w, "output_norm.weight", 0, D, 1, 0.2f, &rs);
    const struct {
        const char *name;
        int64_t rows, cols;
    } t[] = {
        {"blk.0.attn_norm.weight", 0, D}, {"blk.0.attn_q.weight", D, D},
        {"blk.0.attn_k.weight", 16, D},   {"blk.0.attn_v.weight", 16, D},
        {"blk.0.attn_q.bias", 0, D},      {"blk.0.attn_k.bias", 0, 16},
        {"blk.0.attn_v.bias", 0, 16},     {"blk.0.attn_output.weight", D, D},
        {"blk.0.ffn_norm.weight", 0, D},  {"blk.0.ffn_gate.weight", F, D},
        {"blk.0.ffn_up.weight", F, D},    {"blk.0.ffn_down.weight", D, F},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        add_random(w, t[i].name, t[i].rows, t[i].cols, strstr(t[i].name, "norm") ? 1.f : 0.f,
                   strstr(t[i].name, "norm") ? 0.2f : 0.5f, &rs);
    const char *path = rlx_test_tmp("tiny-qwen2.gguf");
    if (rlx_gguf_writer_write(w, path, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    rlx_gguf_writer_free(w);

    rlx_llm_params p = rlx_llm_default_params();
    p.n_ctx = 256;
    p.n_threads = 1;
    rlx_llm *m = NULL;
    if (rlx_llm_load(path, &p, &m, &err) != RLX_OK)
        fail_msg("load: %s", rlx_error_message(err));
    assert_non_null(rlx_llm_chat_template(m));

    rlx_chat_message msgs[3] = {
        {.role = "user", .content = "Hello there"},
    };
    rlx_token *ids = NULL;
    size_t n = 0;
    if (rlx_llm_chat_prompt(m, msgs, 1, true, &ids, &n, &err) != RLX_OK)
        fail_msg("chat prompt: %s", rlx_error_message(err));
    /* ChatML: <|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n */
    const rlx_tokenizer *tok = rlx_llm_get_tokenizer(m);
    rlx_token im_start = rlx_tokenizer_find(tok, "<|im_start|>", 12);
    assert_true(im_start != RLX_TOKEN_NULL);
    assert_int_equal(ids[0], im_start);
    assert_int_equal(ids[n - 3], im_start);

    rlx_llm_generate_params gp = greedy(6);
    gp.ignore_eos = true;
    collected reply = {0};
    rlx_llm_stats st;
    assert_int_equal(rlx_llm_generate(m, ids, n, &gp, collect, &reply, &st, NULL, NULL, &err),
                     RLX_OK);
    assert_int_equal(st.n_reused, 0);
    size_t n1 = n;
    free(ids);

    msgs[1] = (rlx_chat_message){.role = "assistant", .content = reply.text};
    msgs[2] = (rlx_chat_message){.role = "user", .content = "And then?"};
    if (rlx_llm_chat_prompt(m, msgs, 3, true, &ids, &n, &err) != RLX_OK)
        fail_msg("chat prompt: %s", rlx_error_message(err));
    assert_true(n > n1);
    assert_int_equal(rlx_llm_generate(m, ids, n, &gp, NULL, NULL, &st, NULL, NULL, &err), RLX_OK);
    /* the whole first prompt came from the cache but maybe its last token:
     * the reply (random weights: it starts with "\n" here) can merge with
     * the "\n" that ends the generation prompt when the text is tokenized
     * again, as in any BPE chat */
    assert_true(st.n_reused >= (int32_t)n1 - 1);
    free(ids);
    rlx_llm_free(m);
}

/* Context shift: with a 32-token context, 40 greedy tokens need one shift.
 * It keeps BOS, drops the older half of the rest and re-prefills, so the
 * tokens after it are what a fresh runner gives for exactly the kept
 * tokens. Without the option, the same call stops at the full context. */
static void test_context_shift(void **state)
{
    (void)state;
    rlx_llm *m = load(32, RLX_DTYPE_F32, 8);
    rlx_token *ids, *gen = NULL, *gen2 = NULL;
    size_t n, n_gen, n_gen2;
    prompt_ids(m, "Once upon a time", &ids, &n);
    assert_int_equal(n, 5);
    rlx_llm_generate_params gp = greedy(40);
    rlx_llm_stats st;
    rlx_error *err = NULL;
    assert_int_equal(rlx_llm_generate(m, ids, n, &gp, NULL, NULL, &st, &gen, &n_gen, &err), RLX_OK);
    assert_int_equal(st.stop, RLX_LLM_STOP_CONTEXT);
    assert_int_equal(st.n_past, 32);
    free(gen);

    gp.context_shift = true;
    collected c = {0};
    assert_int_equal(rlx_llm_generate(m, ids, n, &gp, collect, &c, &st, &gen, &n_gen, &err),
                     RLX_OK);
    assert_int_equal(st.stop, RLX_LLM_STOP_LENGTH);
    assert_int_equal(n_gen, 40);
    assert_int_equal(st.n_shifts, 1);
    assert_int_equal(st.n_dropped, 16);
    assert_true(st.n_past <= 32);
    /* before the shift: the documented continuation */
    assert_int_equal(strncmp(c.text, expected, 60), 0);

    /* all tokens T = prompt + generated; the shift came when gen[27] was
     * sampled with T[0..32) cached: the cache became T[0] + T[17..33) */
    rlx_token all[45], kept[17];
    memcpy(all, ids, sizeof *ids * 5);
    memcpy(all + 5, gen, sizeof *gen * 40);
    kept[0] = all[0];
    memcpy(kept + 1, all + 17, sizeof *kept * 16);
    rlx_llm_reset(m);
    rlx_llm_generate_params gp2 = greedy(12);
    assert_int_equal(rlx_llm_generate(m, kept, 17, &gp2, NULL, NULL, &st, &gen2, &n_gen2, &err),
                     RLX_OK);
    assert_int_equal(n_gen2, 12);
    assert_memory_equal(gen2, all + 33, sizeof *gen2 * 12);
    free(gen);
    free(gen2);

    /* a prompt longer than the context: BOS and the newest tokens are kept */
    free(ids);
    prompt_ids(m,
               "Once upon a time there was a little girl named Lily. She loved to play "
               "outside in the park with her friends every day.",
               &ids, &n);
    assert_true(n > 32);
    gp.max_tokens = 8;
    assert_int_equal(rlx_llm_generate(m, ids, n, &gp, NULL, NULL, &st, NULL, NULL, &err), RLX_OK);
    assert_true(st.n_dropped > 0);
    assert_true(st.n_past <= 32);
    assert_int_equal(st.n_generated, 8);
    free(ids);
    rlx_llm_free(m);
}

/* DRY's breaker strings become token ids in the runner: the default list
 * holds the byte tokens of "\n", ":", "\"", "*" and every token containing
 * one; each listed token's text does contain one. In generation, "." as the
 * only breaker stops every match at a sentence end (the greedy text is the
 * one without DRY here), while a breaker no token contains leaves DRY free
 * to change it. */
static void test_dry_breakers(void **state)
{
    (void)state;
    rlx_llm *m = load(256, RLX_DTYPE_F16, 0);
    const rlx_tokenizer *tok = rlx_llm_get_tokenizer(m);
    int32_t *br = NULL;
    size_t nb = 0;
    rlx_error *err = NULL;
    assert_int_equal(rlx_llm_dry_breaker_ids(m, NULL, 0, &br, &nb, &err), RLX_OK);
    const char *bytes[] = {"<0x0A>", "<0x3A>", "<0x22>", "<0x2A>"};
    for (int i = 0; i < 4; i++) {
        rlx_token id = rlx_tokenizer_find(tok, bytes[i], strlen(bytes[i]));
        assert_true(id != RLX_TOKEN_NULL);
        bool found = false;
        for (size_t k = 0; k < nb; k++)
            found |= br[k] == id;
        if (!found)
            fail_msg("%s (id %d) is not a breaker", bytes[i], id);
    }
    for (size_t k = 0; k < nb; k++) {
        char piece[64];
        size_t L = rlx_tokenizer_token_to_piece(tok, br[k], false, piece, sizeof piece - 1);
        piece[L < sizeof piece ? L : sizeof piece - 1] = 0;
        assert_true(strpbrk(piece, "\n:\"*") != NULL);
    }
    free(br);

    rlx_token *ids;
    size_t n;
    prompt_ids(m, "Once upon a time", &ids, &n);
    rlx_llm_generate_params gp = greedy(120);
    collected plain = {0}, dot = {0}, none = {0};
    assert_int_equal(rlx_llm_generate(m, ids, n, &gp, collect, &plain, NULL, NULL, NULL, &err),
                     RLX_OK);
    gp.sampler.dry_multiplier = 0.8f;
    const char *b_dot[] = {"."}, *b_none[] = {"zzzz"};
    gp.dry_breakers = b_dot;
    gp.n_dry_breakers = 1;
    assert_int_equal(rlx_llm_generate(m, ids, n, &gp, collect, &dot, NULL, NULL, NULL, &err),
                     RLX_OK);
    gp.dry_breakers = b_none;
    assert_int_equal(rlx_llm_generate(m, ids, n, &gp, collect, &none, NULL, NULL, NULL, &err),
                     RLX_OK);
    assert_string_equal(dot.text, plain.text);
    assert_string_not_equal(none.text, plain.text);
    free(ids);
    rlx_llm_free(m);
}

int main(void)
{
    rlx_test_need_data("llm/stories260K.gguf", "tokenizers/ggml-vocab-qwen2.gguf", NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_f16),      cmocka_unit_test(test_greedy_f32_chunked),
        cmocka_unit_test(test_prefix_reuse),    cmocka_unit_test(test_prompt_too_long),
        cmocka_unit_test(test_cancel_and_stop), cmocka_unit_test(test_unsupported_arch),
        cmocka_unit_test(test_bad_input),       cmocka_unit_test(test_chat_prefix_reuse),
        cmocka_unit_test(test_load_progress),   cmocka_unit_test(test_context_shift),
        cmocka_unit_test(test_dry_breakers),    cmocka_unit_test(test_greedy_q8_0),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
