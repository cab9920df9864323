/* Whisper model files: the ggml .bin reader (engine/formats/ggml-whisper) and the
 * whisper-file layer (models/whisper/whisper-file) on the real vocabulary-only
 * for-tests-ggml-tiny.bin, on ggml files and HF folders this test writes, and on
 * broken and hostile files.
 *
 * Where the expected numbers come from (never from this code's output):
 * - hparams of whisper tiny: openai's published ModelDimensions for "tiny";
 * - token ids: openai's tokens for the jfk.wav transcript as whisper prints them
 *   (" And" 400, " so" 370, ..., " you" 291), GPT-2's byte order for ids 0-255;
 * - special ids: openai-whisper's tokenizer.py (get_encoding's specials list);
 * - the suppression list: openai/whisper-tiny's generation_config.json suppress_tokens on
 *   Hugging Face (which is openai's non_speech_tokens + its decoder's specials);
 * - the alignment heads: openai-whisper's _ALIGNMENT_HEADS["tiny"] decoded;
 * - the mel filterbank: the file's own (librosa, via openai's mel_filters.npz) checks our
 *   slaney formula. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/formats/ggml-whisper.h"
#include "engine/formats/safetensors.h"
#include "engine/ir/graph.h"
#include "engine/runtime/session.h"
#include "models/whisper/whisper-file.h"
#include "test-util.h"

#define TINY "whisper/for-tests-ggml-tiny.bin"

static uint8_t *g_real; /* the real file's bytes */
static size_t g_real_size;
static size_t g_vocab_end; /* where its vocabulary ends (= its size: no tensors) */

static int setup(void **state)
{
    (void)state;
    g_real = rlx_test_read_file(rlx_test_data(TINY), &g_real_size);
    g_vocab_end = g_real_size;
    return g_real ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    free(g_real);
    return 0;
}

static void expect_token(const rlx_whisper_file *f, int32_t id, const char *want)
{
    size_t len;
    const char *p = rlx_whisper_file_token(f, id, &len);
    assert_non_null(p);
    if (len != strlen(want) || memcmp(p, want, len))
        fail_msg("token %d is \"%.*s\", wanted \"%s\"", id, (int)len, p, want);
}

/* ---- the real vocabulary-only file -------------------------------------- */

static void test_real_tiny(void **state)
{
    (void)state;
    rlx_whisper_file *f = NULL;
    rlx_error *err = NULL;
    if (rlx_whisper_file_open(rlx_test_data(TINY), &f, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    const rlx_whisper_hparams *h = rlx_whisper_file_hparams(f);
    int32_t want[] = {51865, 1500, 384, 6, 4, 448, 384, 6, 4, 80};
    int32_t got[] = {h->n_vocab,       h->n_audio_ctx, h->n_audio_state, h->n_audio_head,
                     h->n_audio_layer, h->n_text_ctx,  h->n_text_state,  h->n_text_head,
                     h->n_text_layer,  h->n_mels};
    for (int i = 0; i < 10; i++)
        assert_int_equal(got[i], want[i]);
    assert_string_equal(rlx_whisper_file_kind(f), "tiny");
    assert_string_equal(rlx_whisper_file_format(f), "ggml");
    assert_true(rlx_whisper_file_multilingual(f));
    assert_false(rlx_whisper_file_has_weights(f));
    assert_int_equal(rlx_whisper_file_n_tensors(f), 0);

    /* openai tokenizer.py: multilingual specials */
    const rlx_whisper_special *sp = rlx_whisper_file_special(f);
    assert_int_equal(sp->eot, 50257);
    assert_int_equal(sp->sot, 50258);
    assert_int_equal(sp->lang_first, 50259);
    assert_int_equal(sp->n_langs, 99);
    assert_int_equal(sp->translate, 50358);
    assert_int_equal(sp->transcribe, 50359);
    assert_int_equal(sp->solm, 50360);
    assert_int_equal(sp->prev, 50361);
    assert_int_equal(sp->no_speech, 50362);
    assert_int_equal(sp->no_timestamps, 50363);
    assert_int_equal(sp->timestamp_begin, 50364);

    /* filterbank: 80 x 201, non-negative, each filter a triangle with some weight; our slaney
     * formula reproduces librosa's numbers to float rounding (the values are below 0.03, so
     * 1e-6 absolute is ~3e-5 relative: float32 storage plus libm differences) */
    const float *fb = rlx_whisper_file_mel_filters(f);
    assert_non_null(fb);
    float *mine = malloc(80 * 201 * sizeof *mine);
    assert_int_equal(rlx_whisper_mel_filters_slaney(80, 400, 16000, mine, NULL), RLX_OK);
    double maxdiff = 0;
    for (int m = 0; m < 80; m++) {
        double sum = 0;
        for (int k = 0; k < 201; k++) {
            float v = fb[m * 201 + k];
            assert_true(v >= 0.0f && v < 0.05f);
            sum += v;
            double d = fabs((double)v - mine[m * 201 + k]);
            if (d > maxdiff)
                maxdiff = d;
        }
        assert_true(sum > 0);
    }
    free(mine);
    if (maxdiff > 1e-6)
        fail_msg("slaney filterbank differs from the file's by %g", maxdiff);

    /* vocabulary: GPT-2 byte order for the first 256 ids, and words of the jfk transcript.
     * (GPT-2's English vocabulary has "The" at 464; this multilingual one has " The" at 440.) */
    expect_token(f, 0, "!");
    expect_token(f, 220, " ");
    expect_token(f, 440, " The");
    expect_token(f, 264, " the");
    expect_token(f, 400, " And");
    expect_token(f, 7177, " fellow");
    expect_token(f, 6280, " Americans");
    expect_token(f, 50257, "<|endoftext|>");
    expect_token(f, 50258, "<|startoftranscript|>");
    expect_token(f, 50259, "<|en|>");
    expect_token(f, 50260, "<|zh|>");
    expect_token(f, 50357, "<|su|>");
    expect_token(f, 50359, "<|transcribe|>");
    expect_token(f, 50363, "<|notimestamps|>");
    expect_token(f, 50364, "<|0.00|>");
    expect_token(f, 50365, "<|0.02|>");
    expect_token(f, 51864, "<|30.00|>");
    size_t len;
    assert_null(rlx_whisper_file_token(f, 51865, &len));
    assert_int_equal(len, 0);
    assert_null(rlx_whisper_file_token(f, -1, NULL));

    /* greedy encoding of the jfk transcript gives openai's tokens */
    const char *text = " And so my fellow Americans, ask not what your country can do for you";
    int32_t want_ids[] = {400, 370, 452,  7177, 6280, 11,  1029, 406,
                          437, 428, 1941, 393,  360,  337, 291};
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(rlx_whisper_file_encode(f, text, strlen(text), &ids, &n, NULL), RLX_OK);
    assert_int_equal(n, sizeof want_ids / sizeof want_ids[0]);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(ids[i], want_ids[i]);
    free(ids);
    assert_int_equal(rlx_whisper_file_encode(f, "", 0, &ids, &n, NULL), RLX_OK);
    assert_null(ids);
    assert_int_equal(n, 0);
    /* invalid UTF-8 never fails */
    assert_int_equal(rlx_whisper_file_encode(f, "\xff\xfe a\x80", 5, &ids, &n, NULL), RLX_OK);
    free(ids);

    /* openai/whisper-tiny's generation_config suppress_tokens; the ggml vocabulary wrote the
     * partial-UTF-8 tokens 873 (" \xe2\x99") and 3268 ("\xe2\x99") as U+FFFD, so the
     * "miscellaneous" first tokens cannot be found there and are the two missing ids */
    static const int32_t hf_suppress[] = {
        1,     2,     7,     8,     9,     10,    14,    25,    26,    27,    28,    29,    31,
        58,    59,    60,    61,    62,    63,    90,    91,    92,    93,    359,   503,   522,
        542,   873,   893,   902,   918,   922,   931,   1350,  1853,  1982,  2460,  2627,  3246,
        3253,  3268,  3536,  3846,  3961,  4183,  4667,  6585,  6647,  7273,  9061,  9383,  10428,
        10929, 11938, 12033, 12331, 12562, 13793, 14157, 14635, 15265, 15618, 16553, 16604, 18362,
        18956, 20075, 21675, 22520, 26130, 26161, 26435, 28279, 29464, 31650, 32302, 32470, 36865,
        42863, 47425, 49870, 50254, 50258, 50358, 50359, 50360, 50361, 50362};
    size_t ns;
    const int32_t *sup = rlx_whisper_file_suppress_tokens(f, &ns);
    size_t k = 0;
    for (size_t i = 0; i < sizeof hf_suppress / sizeof hf_suppress[0]; i++) {
        if (hf_suppress[i] == 873 || hf_suppress[i] == 3268)
            continue;
        if (k >= ns || sup[k] != hf_suppress[i])
            fail_msg("suppress list item %zu is %d, wanted %d", k, k < ns ? sup[k] : -1,
                     hf_suppress[i]);
        k++;
    }
    assert_int_equal(k, ns);
    const int32_t *bs = rlx_whisper_file_begin_suppress_tokens(f, &ns);
    assert_int_equal(ns, 2);
    assert_int_equal(bs[0], 220);
    assert_int_equal(bs[1], 50257);

    size_t np;
    const int32_t *ah = rlx_whisper_file_alignment_heads(f, &np);
    static const int32_t tiny_heads[] = {2, 2, 3, 0, 3, 2, 3, 3, 3, 4, 3, 5};
    assert_int_equal(np, 6);
    assert_memory_equal(ah, tiny_heads, sizeof tiny_heads);

    /* no weights: refused with a sentence */
    rlx_session_params p = rlx_session_default_params();
    rlx_session *s = NULL;
    assert_int_equal(rlx_session_create(&p, &s, NULL), RLX_OK);
    rlx_error_clear(&err);
    assert_int_not_equal(rlx_whisper_file_add_to_session(f, s, &err), RLX_OK);
    assert_non_null(strstr(rlx_error_message(err), "no weights"));
    rlx_error_free(err);
    rlx_session_free(s);
    rlx_whisper_file_free(f);
}

static void test_languages(void **state)
{
    (void)state;
    assert_string_equal(rlx_whisper_language_code(0), "en");
    assert_string_equal(rlx_whisper_language_name(0), "english");
    assert_string_equal(rlx_whisper_language_code(1), "zh");
    assert_string_equal(rlx_whisper_language_code(98), "su");
    assert_string_equal(rlx_whisper_language_code(99), "yue");
    assert_string_equal(rlx_whisper_language_name(99), "cantonese");
    assert_null(rlx_whisper_language_code(100));
    assert_null(rlx_whisper_language_code(-1));
    assert_int_equal(rlx_whisper_language_find("de"), 2);
    assert_int_equal(rlx_whisper_language_find("German"), 2);
    assert_int_equal(rlx_whisper_language_find("mandarin"), 1);
    assert_int_equal(rlx_whisper_language_find("castilian"), 3);
    assert_int_equal(rlx_whisper_language_find("klingon"), -1);
    assert_int_equal(rlx_whisper_language_find(NULL), -1);
    size_t n;
    assert_non_null(rlx_whisper_alignment_heads_preset("large-v3-turbo", &n));
    assert_int_equal(n, 6);
    assert_null(rlx_whisper_alignment_heads_preset("large", &n));
    assert_int_equal(n, 0);
}

/* ---- a ggml file with tensors, written here ----------------------------- */

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void put_i32(buf *b, int32_t v)
{
    uint8_t le[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, le, 4);
}

/* A shrunken whisper: state 8, 2 heads, 1 layer each side, 8 audio / 4 text positions, the
 * real 80 mels and 51865 vocabulary (needed for the special ids). */
enum { S = 8, ACTX = 8, TCTX = 4, NV = 51865 };

/* ggml tensor: F32 (ttype 0) for vectors and the positional embeddings, F16 (1) for matrices,
 * as whisper.cpp's converter writes them; element i holds i % 251 (as F16 exact). */
static void put_tensor(buf *b, const char *name, int n_dims, const int32_t *ne_rowmajor, int ttype)
{
    put_i32(b, n_dims);
    put_i32(b, (int32_t)strlen(name));
    put_i32(b, ttype);
    size_t n = 1;
    for (int d = n_dims - 1; d >= 0; d--) { /* ggml order: fastest first */
        put_i32(b, ne_rowmajor[d]);
        n *= (size_t)ne_rowmajor[d];
    }
    put(b, name, strlen(name));
    for (size_t i = 0; i < n; i++) {
        float v = (float)(i % 251);
        if (ttype == 0) {
            put(b, &v, 4);
        } else {
            uint16_t h = rlx_f32_to_f16(v);
            put(b, &h, 2);
        }
    }
}

static void put_model_tensors(buf *b, int vocab_rows)
{
    char nm[128];
    int32_t d3[3], d2[2], d1[1];
#define T1(a)        (d1[0] = (a), put_tensor(b, nm, 1, d1, 0))
#define T2(a, c, ty) (d2[0] = (a), d2[1] = (c), put_tensor(b, nm, 2, d2, ty))
#define N(...)       snprintf(nm, sizeof nm, __VA_ARGS__)
    N("encoder.conv1.weight"), d3[0] = S, d3[1] = 80, d3[2] = 3, put_tensor(b, nm, 3, d3, 1);
    N("encoder.conv1.bias"), T2(S, 1, 0); /* whisper.cpp's [n, 1] */
    N("encoder.conv2.weight"), d3[0] = S, d3[1] = S, d3[2] = 3, put_tensor(b, nm, 3, d3, 1);
    N("encoder.conv2.bias"), T2(S, 1, 0);
    N("encoder.positional_embedding"), T2(ACTX, S, 0);
    for (int side = 0; side < 2; side++) {
        const char *pre = side ? "decoder" : "encoder";
        for (int a = 0; a < (side ? 2 : 1); a++) {
            const char *at = a ? "cross_attn" : "attn";
            N("%s.blocks.0.%s_ln.weight", pre, at), T1(S);
            N("%s.blocks.0.%s_ln.bias", pre, at), T1(S);
            const char *lin[] = {"query", "key", "value", "out"};
            for (int l = 0; l < 4; l++) {
                N("%s.blocks.0.%s.%s.weight", pre, at, lin[l]), T2(S, S, 1);
                if (l != 1)
                    N("%s.blocks.0.%s.%s.bias", pre, at, lin[l]), T1(S);
            }
        }
        N("%s.blocks.0.mlp_ln.weight", pre), T1(S);
        N("%s.blocks.0.mlp_ln.bias", pre), T1(S);
        N("%s.blocks.0.mlp.0.weight", pre), T2(4 * S, S, 1);
        N("%s.blocks.0.mlp.0.bias", pre), T1(4 * S);
        N("%s.blocks.0.mlp.2.weight", pre), T2(S, 4 * S, 1);
        N("%s.blocks.0.mlp.2.bias", pre), T1(S);
    }
    N("encoder.ln_post.weight"), T1(S);
    N("encoder.ln_post.bias"), T1(S);
    N("decoder.token_embedding.weight"), T2(vocab_rows, S, 1);
    N("decoder.positional_embedding"), T2(TCTX, S, 0);
    N("decoder.ln.weight"), T1(S);
    N("decoder.ln.bias"), T1(S);
#undef T1
#undef T2
#undef N
}

/* The real header, filterbank and vocabulary with shrunken hparams, then tensors. */
static buf small_ggml(int vocab_rows, int32_t n_vocab, int32_t n_mels)
{
    buf b = {0};
    put(&b, g_real, g_vocab_end);
    int32_t hp[11] = {n_vocab, ACTX, S, 2, 1, TCTX, S, 2, 1, n_mels, 1};
    for (int i = 0; i < 11; i++) {
        uint8_t *q = b.p + 4 + 4 * i;
        q[0] = (uint8_t)hp[i], q[1] = (uint8_t)(hp[i] >> 8), q[2] = (uint8_t)(hp[i] >> 16),
        q[3] = (uint8_t)(hp[i] >> 24);
    }
    put_model_tensors(&b, vocab_rows);
    return b;
}

static void test_ggml_roundtrip(void **state)
{
    (void)state;
    buf b = small_ggml(NV, NV, 80);
    const char *path = rlx_test_tmp("small-ggml.bin");
    assert_int_equal(rlx_test_write_file(path, b.p, b.n), 0);
    rlx_whisper_file *f = NULL;
    rlx_error *err = NULL;
    if (rlx_whisper_file_open(path, &f, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    assert_true(rlx_whisper_file_has_weights(f));
    assert_string_equal(rlx_whisper_file_kind(f), "custom");
    /* 5 + encoder block (2 + 7 + 2 + 4) + decoder block (2 + 7 + 2 + 7 + 2 + 4) + 2 + 4 */
    assert_int_equal(rlx_whisper_file_n_tensors(f), 5 + 15 + 24 + 2 + 4);
    rlx_dtype dt;
    rlx_shape sh;
    assert_true(rlx_whisper_file_tensor(f, "encoder.conv1.weight", &dt, &sh));
    assert_int_equal(dt, RLX_DTYPE_F16);
    assert_int_equal(sh.rank, 3);
    assert_int_equal(sh.d[0].k, S);
    assert_int_equal(sh.d[1].k, 80);
    assert_int_equal(sh.d[2].k, 3);
    assert_true(rlx_whisper_file_tensor(f, "encoder.conv1.bias", &dt, &sh));
    assert_int_equal(dt, RLX_DTYPE_F32);
    assert_int_equal(sh.rank, 1); /* [n, 1] presented as [n] */
    assert_int_equal(sh.d[0].k, S);
    assert_true(rlx_whisper_file_tensor(f, "decoder.blocks.0.mlp.0.weight", &dt, &sh));
    assert_int_equal(sh.rank, 2);
    assert_int_equal(sh.d[0].k, 4 * S);
    assert_int_equal(sh.d[1].k, S);
    assert_true(rlx_whisper_file_tensor(f, "decoder.token_embedding.weight", &dt, &sh));
    assert_int_equal(sh.d[0].k, NV);
    assert_false(rlx_whisper_file_tensor(f, "decoder.blocks.0.cross_attn.key.bias", NULL, NULL));
    assert_false(rlx_whisper_file_tensor(f, "nope", NULL, NULL));
    rlx_whisper_file_free(f);

    /* the engine reader: ggml order, offsets into the file, data bytes as written */
    rlx_ggml_whisper *w = NULL;
    assert_int_equal(rlx_ggml_whisper_open(path, &w, NULL), RLX_OK);
    const rlx_ggml_whisper_tensor *t = rlx_ggml_whisper_find(w, "encoder.conv1.bias");
    assert_non_null(t);
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->ne[0], 1);
    assert_int_equal(t->ne[1], S);
    float v;
    memcpy(&v, (const uint8_t *)rlx_ggml_whisper_data(w, t) + 4 * 5, 4);
    assert_true(v == 5.0f);
    t = rlx_ggml_whisper_find(w, "decoder.token_embedding.weight");
    uint16_t hv;
    memcpy(&hv, (const uint8_t *)rlx_ggml_whisper_data(w, t) + 2 * 300, 2);
    assert_true(rlx_f16_to_f32(hv) == (float)(300 % 251));
    assert_int_equal(rlx_ggml_whisper_n_words(w), 50257);
    rlx_ggml_whisper_close(w);

    /* into a CPU session; a second time every name is already provided */
    assert_int_equal(rlx_whisper_file_open(path, &f, NULL), RLX_OK);
    rlx_session_params p = rlx_session_default_params();
    rlx_session *s = NULL;
    assert_int_equal(rlx_session_create(&p, &s, NULL), RLX_OK);
    if (rlx_whisper_file_add_to_session(f, s, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    assert_int_not_equal(rlx_whisper_file_add_to_session(f, s, &err), RLX_OK);
    rlx_error_clear(&err);

    /* a program reads them: y = x @ query.weight^T (F16) and z = x + conv1.bias (F32, stored
     * [8, 1]); the format has no padding, so some of these sit at addresses the session copies
     * to align. With x = e0, y[r] = w[r][0] = 8 r and z = bias + e0 (element i holds i). */
    rlx_graph *g = rlx_graph_create();
    rlx_node x = rlx_graph_input(g, "x", RLX_DTYPE_F32, rlx_shape_make(2, (int64_t[]){1, S}));
    rlx_whisper_file_tensor(f, "decoder.blocks.0.attn.query.weight", &dt, &sh);
    rlx_node wq = rlx_graph_param(g, "decoder.blocks.0.attn.query.weight", dt, sh);
    rlx_whisper_file_tensor(f, "encoder.conv1.bias", &dt, &sh);
    rlx_node bias = rlx_graph_param(g, "encoder.conv1.bias", dt, sh);
    rlx_graph_output(g, "y", rlx_graph_matmul(g, "q", x, wq, false, true));
    rlx_graph_output(g, "z", rlx_graph_add(g, "b", x, bias));
    if (rlx_graph_status(g) != RLX_OK)
        fail_msg("%s", rlx_graph_error(g));
    rlx_session_program *prog = NULL;
    if (rlx_session_compile(s, g, &prog, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    float xin[S] = {1}, y[S], z[S];
    const void *in[] = {xin};
    void *outs[2];
    outs[rlx_session_program_output(prog, "y")] = y;
    outs[rlx_session_program_output(prog, "z")] = z;
    rlx_sym_values sv = {{0}};
    if (rlx_session_run(s, prog, &sv, in, outs, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    for (int r = 0; r < S; r++) {
        assert_true(y[r] == (float)(8 * r));
        assert_true(z[r] == (float)r + (r == 0));
    }
    rlx_graph_free(g);
    rlx_session_free(s);
    rlx_whisper_file_free(f);
    free(b.p);
}

/* ---- kinds and special ids by vocabulary size --------------------------- */

/* A vocabulary-only ggml file from scratch: header, a slaney filterbank, three words. */
static const char *vocab_only(const char *name, const int32_t hp[11])
{
    buf b = {0};
    put_i32(&b, (int32_t)0x67676d6c);
    for (int i = 0; i < 11; i++)
        put_i32(&b, hp[i]);
    int n_mel = hp[9];
    float *fb = malloc((size_t)n_mel * 201 * sizeof *fb);
    assert_int_equal(rlx_whisper_mel_filters_slaney(n_mel, 400, 16000, fb, NULL), RLX_OK);
    put_i32(&b, n_mel);
    put_i32(&b, 201);
    put(&b, fb, (size_t)n_mel * 201 * sizeof *fb);
    free(fb);
    const char *words[] = {"!", " ", " the"};
    put_i32(&b, 3);
    for (int i = 0; i < 3; i++) {
        put_i32(&b, (int32_t)strlen(words[i]));
        put(&b, words[i], strlen(words[i]));
    }
    const char *path = rlx_test_tmp(name);
    assert_int_equal(rlx_test_write_file(path, b.p, b.n), 0);
    free(b.p);
    return path;
}

static rlx_whisper_file *open_ok(const char *path)
{
    rlx_whisper_file *f = NULL;
    rlx_error *err = NULL;
    if (rlx_whisper_file_open(path, &f, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    return f;
}

static void test_kinds(void **state)
{
    (void)state;
    /* English-only: openai's gpt2 encoding has 50256 text tokens, so everything from
     * <|endoftext|> on sits one lower than in the multilingual layout */
    const int32_t tiny_en[11] = {51864, 1500, 384, 6, 4, 448, 384, 6, 4, 80, 1};
    rlx_whisper_file *f = open_ok(vocab_only("tiny.en.bin", tiny_en));
    assert_string_equal(rlx_whisper_file_kind(f), "tiny.en");
    assert_false(rlx_whisper_file_multilingual(f));
    const rlx_whisper_special *sp = rlx_whisper_file_special(f);
    assert_int_equal(sp->eot, 50256);
    assert_int_equal(sp->sot, 50257);
    assert_int_equal(sp->lang_first, 50258);
    assert_int_equal(sp->n_langs, 99);
    assert_int_equal(sp->translate, 50357);
    assert_int_equal(sp->transcribe, 50358);
    assert_int_equal(sp->no_speech, 50361);
    assert_int_equal(sp->no_timestamps, 50362);
    assert_int_equal(sp->timestamp_begin, 50363);
    expect_token(f, 50256, "<|endoftext|>");
    expect_token(f, 51863, "<|30.00|>");
    size_t np, n;
    rlx_whisper_file_alignment_heads(f, &np);
    assert_int_equal(np, 8);
    const int32_t *bs = rlx_whisper_file_begin_suppress_tokens(f, &n);
    assert_int_equal(n, 2);
    assert_int_equal(bs[0], 1); /* " " of this vocabulary */
    assert_int_equal(bs[1], 50256);
    rlx_whisper_file_free(f);

    /* large-v3: 128 mels and 100 languages ("yue" last), so the task ids move up by one */
    const int32_t v3[11] = {51866, 1500, 1280, 20, 32, 448, 1280, 20, 32, 128, 1};
    f = open_ok(vocab_only("large-v3.bin", v3));
    assert_string_equal(rlx_whisper_file_kind(f), "large-v3");
    sp = rlx_whisper_file_special(f);
    assert_int_equal(sp->eot, 50257);
    assert_int_equal(sp->n_langs, 100);
    assert_int_equal(sp->translate, 50359);
    assert_int_equal(sp->transcribe, 50360);
    assert_int_equal(sp->no_timestamps, 50364);
    assert_int_equal(sp->timestamp_begin, 50365);
    expect_token(f, 50358, "<|yue|>");
    rlx_whisper_file_alignment_heads(f, &np);
    assert_int_equal(np, 10);
    assert_int_equal(rlx_whisper_file_hparams(f)->n_mels, 128);
    rlx_whisper_file_free(f);

    const int32_t turbo[11] = {51866, 1500, 1280, 20, 32, 448, 1280, 20, 4, 128, 1};
    f = open_ok(vocab_only("turbo.bin", turbo));
    assert_string_equal(rlx_whisper_file_kind(f), "large-v3-turbo");
    rlx_whisper_file_alignment_heads(f, &np);
    assert_int_equal(np, 6);
    rlx_whisper_file_free(f);

    /* large v1 and v2 share their shapes: the file name decides, else no heads */
    const int32_t large[11] = {51865, 1500, 1280, 20, 32, 448, 1280, 20, 32, 80, 1};
    f = open_ok(vocab_only("ggml-large-v2.bin", large));
    assert_string_equal(rlx_whisper_file_kind(f), "large-v2");
    rlx_whisper_file_alignment_heads(f, &np);
    assert_int_equal(np, 23);
    rlx_whisper_file_free(f);
    f = open_ok(vocab_only("ggml-large.bin", large));
    assert_string_equal(rlx_whisper_file_kind(f), "large");
    assert_null(rlx_whisper_file_alignment_heads(f, &np));
    assert_int_equal(np, 0);
    rlx_whisper_file_free(f);

    const int32_t base_q[11] = {51865, 1500, 512, 8, 6, 448, 512, 8, 6, 80, 2 + 1000 * 2};
    f = open_ok(vocab_only("base-q4_0.bin", base_q));
    assert_string_equal(rlx_whisper_file_kind(f), "base");
    assert_int_equal(rlx_whisper_file_hparams(f)->ftype, 2); /* quantization version dropped */
    rlx_whisper_file_free(f);
}

/* ---- broken and hostile files ------------------------------------------- */

static void expect_open_fail(const uint8_t *p, size_t n, const char *sub)
{
    const char *path = rlx_test_tmp("bad.bin");
    assert_int_equal(rlx_test_write_file(path, p, n), 0);
    rlx_whisper_file *f = (rlx_whisper_file *)&f;
    rlx_error *err = NULL;
    rlx_status s = rlx_whisper_file_open(path, &f, &err);
    if (s == RLX_OK)
        fail_msg("a bad file (%zu bytes) opened; wanted \"%s\"", n, sub);
    assert_null(f);
    const char *msg = rlx_error_message(err);
    if (!msg[0] || (sub && !strstr(msg, sub)))
        fail_msg("message \"%s\" lacks \"%s\"", msg, sub ? sub : "");
    rlx_error_free(err);
}

static void set_i32(uint8_t *p, size_t off, int32_t v)
{
    p[off] = (uint8_t)v, p[off + 1] = (uint8_t)(v >> 8), p[off + 2] = (uint8_t)(v >> 16),
    p[off + 3] = (uint8_t)(v >> 24);
}

static void test_truncated(void **state)
{
    (void)state;
    buf b = small_ggml(NV, NV, 80);
    /* every cut in the header, filterbank and the start of the vocabulary; then a stride
     * through the vocabulary and the tensors; each on an exact-size heap copy so ASan sees
     * any read past the end */
    size_t filt_end = 48 + 8 + 80 * 201 * 4;
    for (size_t cut = 0; cut < b.n; cut += cut < filt_end + 200 ? (cut < 80 ? 1 : 13) : 997) {
        if (cut == g_vocab_end)
            continue; /* a vocabulary-only file is valid */
        uint8_t *img = malloc(cut ? cut : 1);
        memcpy(img, b.p, cut);
        rlx_ggml_whisper *w = (rlx_ggml_whisper *)&w;
        rlx_error *err = NULL;
        rlx_status s = rlx_ggml_whisper_open_memory(img, cut, "cut.bin", &w, &err);
        /* a cut exactly between two tensors is a well-formed file missing tensors: the
         * reader takes it and the whisper layer refuses it */
        if (s == RLX_OK) {
            rlx_ggml_whisper_close(w);
        } else {
            assert_null(w);
            assert_true(rlx_error_message(err)[0] != 0);
        }
        rlx_error_free(err);
        free(img);
    }
    /* the whisper layer on cuts at section boundaries */
    expect_open_fail(b.p, 3, "too short");
    expect_open_fail(b.p, 20, "hyper-parameters");
    expect_open_fail(b.p, 52, "filterbank");
    expect_open_fail(b.p, 1000, "filterbank");
    expect_open_fail(b.p, filt_end + 2, "vocabulary");
    expect_open_fail(b.p, filt_end + 4 + 10, "vocabulary");
    expect_open_fail(b.p, g_vocab_end + 5, "tensor header");
    expect_open_fail(b.p, g_vocab_end + 20, "tensor");
    expect_open_fail(b.p, b.n - 1, "decoder.ln.bias");
    free(b.p);
}

static void test_hostile(void **state)
{
    (void)state;
    buf b = small_ggml(NV, NV, 80);
    uint8_t *p = malloc(b.n);
    size_t filt_end = 48 + 8 + 80 * 201 * 4;
#define RESET() memcpy(p, b.p, b.n)
    RESET();
    set_i32(p, 0, 0x46554747); /* "GGUF" */
    expect_open_fail(p, b.n, "GGUF");
    RESET();
    set_i32(p, 0, 0x12345678);
    expect_open_fail(p, b.n, "not a whisper.cpp ggml file");
    RESET();
    set_i32(p, 4 + 4 * 9, 81); /* n_mels */
    expect_open_fail(p, b.n, "n_mels");
    RESET();
    set_i32(p, 4 + 4 * 2, -384); /* n_audio_state */
    expect_open_fail(p, b.n, "n_audio_state");
    RESET();
    set_i32(p, 48, 0x7fffffff); /* n_mel of the filterbank */
    expect_open_fail(p, b.n, "filterbank");
    RESET();
    set_i32(p, 52, -201);
    expect_open_fail(p, b.n, "negative");
    RESET();
    set_i32(p, filt_end, 0x7fffffff); /* vocabulary count */
    expect_open_fail(p, b.n, "vocabulary");
    RESET();
    set_i32(p, filt_end, -1);
    expect_open_fail(p, b.n, "vocabulary");
    RESET();
    set_i32(p, filt_end + 4, 0x7ffffff0); /* the first word's length */
    expect_open_fail(p, b.n, "word 0");
    RESET();
    set_i32(p, g_vocab_end, 7); /* the first tensor's n_dims */
    expect_open_fail(p, b.n, "dimensions");
    RESET();
    set_i32(p, g_vocab_end, -3);
    expect_open_fail(p, b.n, "dimensions");
    RESET();
    set_i32(p, g_vocab_end + 4, 0x7fffffff); /* name length */
    expect_open_fail(p, b.n, "name");
    RESET();
    set_i32(p, g_vocab_end + 8, 99); /* ggml type */
    expect_open_fail(p, b.n, "ggml type 99");
    RESET();
    set_i32(p, g_vocab_end + 8, 4); /* Q4_2, gone from ggml */
    expect_open_fail(p, b.n, "ggml type 4");
    RESET();
    set_i32(p, g_vocab_end + 12, -3); /* ne[0] */
    expect_open_fail(p, b.n, "dimension 0");
    RESET();
    set_i32(p, g_vocab_end + 12, 0x7fffffff); /* data past the end */
    expect_open_fail(p, b.n, "data");
    RESET();
    set_i32(p, g_vocab_end + 8, 8); /* Q8_0 with rows of 3 */
    expect_open_fail(p, b.n, "block");
    RESET();
    set_i32(p, g_vocab_end + 8, 8); /* Q8_0 rows of 32, in a file of quantization version 0 */
    set_i32(p, g_vocab_end + 12, 32);
    expect_open_fail(p, b.n, "quantization version 0");
    free(p);
    free(b.p);
#undef RESET

    /* n_vocab 51864 (an English-only size) against a 51865-row embedding */
    buf c = small_ggml(NV, 51864, 80);
    expect_open_fail(c.p, c.n, "token embedding has 51865 rows");
    free(c.p);
    /* a vocabulary size that is no whisper's */
    c = small_ggml(NV, 40000, 80);
    expect_open_fail(c.p, c.n, "not a whisper vocabulary");
    free(c.p);
    /* n_mels 128 with an 80-row filterbank */
    c = small_ggml(NV, NV, 128);
    expect_open_fail(c.p, c.n, "filterbank");
    free(c.p);
    /* a duplicated tensor */
    c = small_ggml(NV, NV, 80);
    int32_t d1[1] = {S};
    put_tensor(&c, "decoder.ln.bias", 1, d1, 0);
    expect_open_fail(c.p, c.n, "twice");
    free(c.p);
    /* an LLM GGUF */
    size_t gn;
    uint8_t *g = rlx_test_read_file(rlx_test_data("llm/stories260K.gguf"), &gn);
    if (g) {
        expect_open_fail(g, gn, "GGUF");
        free(g);
    }
}

/* ---- a Hugging Face folder written here --------------------------------- */

/* GPT-2's bytes_to_unicode: printable bytes map to themselves, the rest to 256 + n. */
static int byte_cp(int b)
{
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))
        return b;
    int n = 0;
    for (int x = 0; x < b; x++)
        if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255)))
            n++;
    return 256 + n;
}

static void put_utf8(buf *b, int cp)
{
    char u[4];
    if (cp < 0x80) {
        u[0] = (char)cp;
        put(b, u, 1);
    } else {
        u[0] = (char)(0xc0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 63));
        put(b, u, 2);
    }
}

static void put_s(buf *b, const char *s)
{
    put(b, s, strlen(s));
}

static void write_text(const char *dir, const char *name, const char *text)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    assert_int_equal(rlx_test_write_file(p, text, strlen(text)), 0);
}

/* model.safetensors with HF names for the shrunken model; F32 vectors, F16 matrices, BF16
 * for the token embedding. */
static void write_hf_weights(const char *dir, bool drop_one)
{
    typedef struct {
        char name[96];
        int rank;
        int64_t d[3];
        const char *dt;
    } ent;
    ent e[80];
    int n = 0;
#define ADD(nm_, rank_, a, b_, c_, dt_)                                                  \
    do {                                                                                 \
        snprintf(e[n].name, sizeof e[n].name, "%s", nm_);                                \
        e[n].rank = rank_, e[n].d[0] = a, e[n].d[1] = b_, e[n].d[2] = c_, e[n].dt = dt_; \
        n++;                                                                             \
    } while (0)
    char nm[96];
    ADD("model.encoder.conv1.weight", 3, S, 80, 3, "F16");
    ADD("model.encoder.conv1.bias", 1, S, 0, 0, "F32");
    ADD("model.encoder.conv2.weight", 3, S, S, 3, "F16");
    ADD("model.encoder.conv2.bias", 1, S, 0, 0, "F32");
    ADD("model.encoder.embed_positions.weight", 2, ACTX, S, 0, "F32");
    for (int side = 0; side < 2; side++) {
        const char *pre = side ? "model.decoder.layers.0" : "model.encoder.layers.0";
        for (int a = 0; a < (side ? 2 : 1); a++) {
            const char *at = a ? "encoder_attn" : "self_attn";
            snprintf(nm, sizeof nm, "%s.%s_layer_norm.weight", pre, at);
            ADD(nm, 1, S, 0, 0, "F32");
            snprintf(nm, sizeof nm, "%s.%s_layer_norm.bias", pre, at);
            ADD(nm, 1, S, 0, 0, "F32");
            const char *lin[] = {"q_proj", "k_proj", "v_proj", "out_proj"};
            for (int l = 0; l < 4; l++) {
                snprintf(nm, sizeof nm, "%s.%s.%s.weight", pre, at, lin[l]);
                ADD(nm, 2, S, S, 0, "F16");
                if (l != 1) {
                    snprintf(nm, sizeof nm, "%s.%s.%s.bias", pre, at, lin[l]);
                    ADD(nm, 1, S, 0, 0, "F32");
                }
            }
        }
        snprintf(nm, sizeof nm, "%s.final_layer_norm.weight", pre);
        ADD(nm, 1, S, 0, 0, "F32");
        snprintf(nm, sizeof nm, "%s.final_layer_norm.bias", pre);
        ADD(nm, 1, S, 0, 0, "F32");
        snprintf(nm, sizeof nm, "%s.fc1.weight", pre);
        ADD(nm, 2, 4 * S, S, 0, "F16");
        snprintf(nm, sizeof nm, "%s.fc1.bias", pre);
        ADD(nm, 1, 4 * S, 0, 0, "F32");
        snprintf(nm, sizeof nm, "%s.fc2.weight", pre);
        ADD(nm, 2, S, 4 * S, 0, "F16");
        snprintf(nm, sizeof nm, "%s.fc2.bias", pre);
        ADD(nm, 1, S, 0, 0, "F32");
    }
    ADD("model.encoder.layer_norm.weight", 1, S, 0, 0, "F32");
    ADD("model.encoder.layer_norm.bias", 1, S, 0, 0, "F32");
    ADD("model.decoder.embed_tokens.weight", 2, NV, S, 0, "BF16");
    ADD("model.decoder.embed_positions.weight", 2, TCTX, S, 0, "F32");
    ADD("model.decoder.layer_norm.weight", 1, S, 0, 0, "F32");
    if (!drop_one)
        ADD("model.decoder.layer_norm.bias", 1, S, 0, 0, "F32");
    ADD("proj_out.weight", 2, NV, S, 0, "BF16"); /* the tied head: ignored */
#undef ADD
    buf h = {0};
    put_s(&h, "{");
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        uint64_t el = 1;
        for (int d = 0; d < e[i].rank; d++)
            el *= (uint64_t)e[i].d[d];
        uint64_t bytes = el * (strcmp(e[i].dt, "F32") ? 2 : 4);
        char item[256];
        snprintf(item, sizeof item, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "",
                 e[i].name, e[i].dt);
        put_s(&h, item);
        for (int d = 0; d < e[i].rank; d++) {
            snprintf(item, sizeof item, "%s%lld", d ? "," : "", (long long)e[i].d[d]);
            put_s(&h, item);
        }
        snprintf(item, sizeof item, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                 (unsigned long long)(off + bytes));
        put_s(&h, item);
        off += bytes;
    }
    put_s(&h, "}");
    buf f = {0};
    uint64_t hl = h.n;
    for (int i = 0; i < 8; i++) {
        uint8_t c = (uint8_t)(hl >> (8 * i));
        put(&f, &c, 1);
    }
    put(&f, h.p, h.n);
    uint8_t *zeros = calloc(1, (size_t)off);
    put(&f, zeros, (size_t)off);
    free(zeros);
    char p[4096];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    assert_int_equal(rlx_test_write_file(p, f.p, f.n), 0);
    free(f.p);
    free(h.p);
}

/* config.json, generation_config.json, vocab.json (the 256 byte tokens in GPT-2's order
 * plus a few merged words), merges.txt, added_tokens.json. */
static const char *write_hf_folder(const char *name, bool with_weights, bool drop_one)
{
    static char dir[4096];
    snprintf(dir, sizeof dir, "%s", rlx_test_tmp(name));
    mkdir(dir, 0700);
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"model_type\":\"whisper\",\"num_mel_bins\":80,\"d_model\":%d,"
             "\"encoder_layers\":1,\"decoder_layers\":1,\"encoder_attention_heads\":2,"
             "\"decoder_attention_heads\":2,\"max_source_positions\":%d,"
             "\"max_target_positions\":%d,\"vocab_size\":%d}",
             S, ACTX, TCTX, NV);
    write_text(dir, "config.json", cfg);
    write_text(dir, "generation_config.json",
               "{\"suppress_tokens\":[1,2,7,50258],\"begin_suppress_tokens\":[220,50257],"
               "\"alignment_heads\":[[0,1],[0,0]],\"lang_to_id\":{\"<|en|>\":50259,"
               "\"<|de|>\":50261},\"task_to_id\":{\"translate\":50358,\"transcribe\":50359},"
               "\"no_timestamps_token_id\":50363,\"decoder_start_token_id\":50258,"
               "\"eos_token_id\":50257,\"is_multilingual\":true}");
    /* ids 0-255: byte tokens in GPT-2 order (printable bytes first), as its vocabulary */
    int order[256], k = 0;
    for (int b = 0; b < 256; b++)
        if (byte_cp(b) == b)
            order[k++] = b;
    for (int b = 0; b < 256; b++)
        if (byte_cp(b) != b)
            order[k++] = b;
    buf v = {0};
    put_s(&v, "{");
    for (int i = 0; i < 256; i++) {
        put_s(&v, i ? ",\"" : "\"");
        int cp = byte_cp(order[i]);
        if (cp == '"' || cp == '\\')
            put_s(&v, "\\");
        put_utf8(&v, cp);
        char id[16];
        snprintf(id, sizeof id, "\":%d", i);
        put_s(&v, id);
    }
    /* "Ġ" is U+0120 (the space byte) */
    put_s(&v, ",\"\xc4\xa0t\":256,\"he\":257,\"\xc4\xa0the\":258,\"\xc4\xa0th\":259}");
    v.p = realloc(v.p, v.n + 1);
    v.p[v.n] = 0;
    write_text(dir, "vocab.json", (char *)v.p);
    write_text(dir, "merges.txt", "#version: 0.2\n\xc4\xa0 t\nh e\n\xc4\xa0t he\n");
    /* the same vocabulary as a tokenizer.json, in a file the folder only uses without
     * vocab.json (a test renames it) */
    buf tj = {0};
    put_s(&tj, "{\"model\":{\"type\":\"BPE\",\"vocab\":");
    put(&tj, v.p, v.n);
    put_s(&tj, ",\"merges\":[\"\xc4\xa0 t\",\"h e\",\"\xc4\xa0t he\"]},"
               "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
               "\"use_regex\":true},\"decoder\":{\"type\":\"ByteLevel\"},"
               "\"added_tokens\":[{\"id\":50257,\"content\":\"<|endoftext|>\","
               "\"special\":true}]}");
    put(&tj, "", 1);
    write_text(dir, "tokenizer.json.off", (char *)tj.p);
    free(tj.p);
    free(v.p);
    write_text(dir, "added_tokens.json", "{\"<|endoftext|>\":50257}");
    if (with_weights)
        write_hf_weights(dir, drop_one);
    return dir;
}

static void test_hf_folder(void **state)
{
    (void)state;
    const char *dir = write_hf_folder("hf-whisper", true, false);
    rlx_whisper_file *f = NULL;
    rlx_error *err = NULL;
    if (rlx_whisper_file_open(dir, &f, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    assert_string_equal(rlx_whisper_file_format(f), "huggingface");
    const rlx_whisper_hparams *h = rlx_whisper_file_hparams(f);
    assert_int_equal(h->n_vocab, NV);
    assert_int_equal(h->n_audio_state, S);
    assert_int_equal(h->n_text_ctx, TCTX);
    assert_int_equal(h->ftype, 1);
    assert_int_equal(rlx_whisper_file_special(f)->sot, 50258);
    assert_true(rlx_whisper_file_has_weights(f));
    /* the HF names mapped to openai's; proj_out left out */
    assert_int_equal(rlx_whisper_file_n_tensors(f), 5 + 15 + 24 + 2 + 4);
    rlx_dtype dt;
    rlx_shape sh;
    assert_true(rlx_whisper_file_tensor(f, "decoder.token_embedding.weight", &dt, &sh));
    assert_int_equal(dt, RLX_DTYPE_BF16);
    assert_int_equal(sh.d[0].k, NV);
    assert_true(rlx_whisper_file_tensor(f, "decoder.blocks.0.cross_attn.key.weight", &dt, &sh));
    assert_int_equal(dt, RLX_DTYPE_F16);
    assert_true(rlx_whisper_file_tensor(f, "decoder.blocks.0.cross_attn_ln.bias", NULL, NULL));
    assert_true(rlx_whisper_file_tensor(f, "encoder.blocks.0.mlp.2.weight", NULL, &sh));
    assert_int_equal(sh.d[1].k, 4 * S);
    assert_true(rlx_whisper_file_tensor(f, "encoder.positional_embedding", NULL, NULL));
    assert_true(rlx_whisper_file_tensor(f, "encoder.ln_post.weight", NULL, NULL));
    assert_false(rlx_whisper_file_tensor(f, "proj_out.weight", NULL, NULL));

    /* the slaney filterbank is the one librosa gives (the ggml file's), see test_real_tiny */
    const float *fb = rlx_whisper_file_mel_filters(f);
    rlx_ggml_whisper *w = NULL;
    assert_int_equal(rlx_ggml_whisper_open(rlx_test_data(TINY), &w, NULL), RLX_OK);
    const float *ref = rlx_ggml_whisper_mel_filters(w, NULL, NULL);
    for (int i = 0; i < 80 * 201; i++)
        assert_true(fabsf(fb[i] - ref[i]) < 1e-6f);
    rlx_ggml_whisper_close(w);

    /* BPE by the merges: " the" is one token, " th" too; "he" merges; a stray byte is itself */
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(rlx_whisper_file_encode(f, " the he!", 8, &ids, &n, NULL), RLX_OK);
    assert_int_equal(n, 4);
    assert_int_equal(ids[0], 258);
    assert_int_equal(ids[1], 220); /* " " in GPT-2's byte order */
    assert_int_equal(ids[2], 257);
    assert_int_equal(ids[3], 0); /* "!" */
    free(ids);
    expect_token(f, 258, " the");
    expect_token(f, 220, " ");
    expect_token(f, 50257, "<|endoftext|>");
    expect_token(f, 50364, "<|0.00|>");

    /* generation_config: its suppress list merged in, its begin list, its heads */
    size_t ns;
    const int32_t *sup = rlx_whisper_file_suppress_tokens(f, &ns);
    bool has1 = false, has50258 = false, has50362 = false;
    for (size_t i = 0; i < ns; i++) {
        has1 |= sup[i] == 1;
        has50258 |= sup[i] == 50258;
        has50362 |= sup[i] == 50362;
        if (i)
            assert_true(sup[i] > sup[i - 1]);
    }
    assert_true(has1 && has50258 && has50362);
    const int32_t *bs = rlx_whisper_file_begin_suppress_tokens(f, &ns);
    assert_int_equal(ns, 2);
    assert_int_equal(bs[0], 220);
    size_t np;
    const int32_t *ah = rlx_whisper_file_alignment_heads(f, &np);
    assert_int_equal(np, 2);
    assert_int_equal(ah[0], 0);
    assert_int_equal(ah[1], 1);

    rlx_session_params p = rlx_session_default_params();
    rlx_session *s = NULL;
    assert_int_equal(rlx_session_create(&p, &s, NULL), RLX_OK);
    if (rlx_whisper_file_add_to_session(f, s, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    rlx_session_free(s);
    rlx_whisper_file_free(f);

    /* a folder with no weights opens; one with a tensor missing does not */
    dir = write_hf_folder("hf-noweights", false, false);
    assert_int_equal(rlx_whisper_file_open(dir, &f, NULL), RLX_OK);
    assert_false(rlx_whisper_file_has_weights(f));
    rlx_whisper_file_free(f);
    dir = write_hf_folder("hf-missing", true, true);
    f = (rlx_whisper_file *)&f;
    assert_int_not_equal(rlx_whisper_file_open(dir, &f, &err), RLX_OK);
    assert_null(f);
    assert_non_null(strstr(rlx_error_message(err), "decoder.ln.bias"));
    rlx_error_clear(&err);

    /* consistency: a folder without config.json, another model type, a wrong special id */
    dir = write_hf_folder("hf-bad", false, false);
    char cp[4200];
    snprintf(cp, sizeof cp, "%s/config.json", dir);
    write_text(dir, "config.json", "{\"model_type\":\"llama\"}");
    assert_int_not_equal(rlx_whisper_file_open(dir, &f, &err), RLX_OK);
    assert_non_null(strstr(rlx_error_message(err), "llama"));
    rlx_error_clear(&err);
    remove(cp);
    assert_int_not_equal(rlx_whisper_file_open(dir, &f, &err), RLX_OK);
    assert_non_null(strstr(rlx_error_message(err), "config.json"));
    rlx_error_clear(&err);
    dir = write_hf_folder("hf-bad2", false, false);
    write_text(dir, "generation_config.json", "{\"no_timestamps_token_id\":50362}");
    assert_int_not_equal(rlx_whisper_file_open(dir, &f, &err), RLX_OK);
    assert_non_null(strstr(rlx_error_message(err), "no_timestamps_token_id"));
    rlx_error_clear(&err);
    write_text(dir, "generation_config.json", "{\"alignment_heads\":[[5,0]]}");
    assert_int_not_equal(rlx_whisper_file_open(dir, &f, &err), RLX_OK);
    assert_non_null(strstr(rlx_error_message(err), "alignment head"));
    rlx_error_clear(&err);
    write_text(dir, "generation_config.json", "not json");
    assert_int_not_equal(rlx_whisper_file_open(dir, &f, &err), RLX_OK);
    rlx_error_clear(&err);
    write_text(dir, "generation_config.json", "{\"suppress_tokens\":[\"x\"]}");
    assert_int_not_equal(rlx_whisper_file_open(dir, &f, &err), RLX_OK);
    rlx_error_clear(&err);
}

/* tokenizer.json instead of vocab.json + merges.txt; sharded weights with an index */
static void test_hf_variants(void **state)
{
    (void)state;
    const char *dir = write_hf_folder("hf-tokjson", true, false);
    char a[4200], b[4200];
    snprintf(a, sizeof a, "%s/tokenizer.json.off", dir);
    snprintf(b, sizeof b, "%s/tokenizer.json", dir);
    assert_int_equal(rename(a, b), 0);
    snprintf(a, sizeof a, "%s/vocab.json", dir);
    remove(a);
    snprintf(a, sizeof a, "%s/merges.txt", dir);
    remove(a);
    /* one shard named as HF names them, and the index that lists its tensors */
    snprintf(a, sizeof a, "%s/model.safetensors", dir);
    snprintf(b, sizeof b, "%s/model-00001-of-00001.safetensors", dir);
    assert_int_equal(rename(a, b), 0);
    rlx_safetensors *st = NULL;
    assert_int_equal(rlx_safetensors_open(b, &st, NULL), RLX_OK);
    buf ix = {0};
    put_s(&ix, "{\"metadata\":{},\"weight_map\":{");
    for (uint64_t i = 0; i < rlx_safetensors_n_tensors(st); i++) {
        put_s(&ix, i ? ",\"" : "\"");
        put_s(&ix, rlx_safetensors_tensor_at(st, i)->name);
        put_s(&ix, "\":\"model-00001-of-00001.safetensors\"");
    }
    put_s(&ix, "}}");
    put(&ix, "", 1);
    rlx_safetensors_close(st);
    write_text(dir, "model.safetensors.index.json", (char *)ix.p);
    free(ix.p);

    rlx_whisper_file *f = open_ok(dir);
    assert_true(rlx_whisper_file_has_weights(f));
    assert_int_equal(rlx_whisper_file_n_tensors(f), 5 + 15 + 24 + 2 + 4);
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(rlx_whisper_file_encode(f, " the he!", 8, &ids, &n, NULL), RLX_OK);
    int32_t want[] = {258, 220, 257, 0};
    assert_int_equal(n, 4);
    assert_memory_equal(ids, want, sizeof want);
    free(ids);
    expect_token(f, 258, " the");
    expect_token(f, 50257, "<|endoftext|>");
    rlx_whisper_file_free(f);
}

int main(void)
{
    rlx_test_need_data(TINY, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_tiny), cmocka_unit_test(test_languages),
        cmocka_unit_test(test_kinds),     cmocka_unit_test(test_ggml_roundtrip),
        cmocka_unit_test(test_truncated), cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_hf_folder), cmocka_unit_test(test_hf_variants),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
