/* Tokenizers against the reference vocabularies in shared/data/tokenizers.
 *
 * The .gguf.inp / .gguf.out pairs are the llama.cpp tokenizer test format,
 * produced by running the models' own Hugging Face tokenizers:
 *   - .inp holds the cases, each followed by the 21-byte separator
 *     "\n__ggml_vocab_test__\n". So the separator's leading newline is NOT
 *     part of the case: the case "\n" is written "\n" + separator, and the
 *     empty case is an empty line before "__ggml_vocab_test__". The last
 *     case of a file may lack its separator (ggml-vocab-gemma-4.gguf.inp
 *     ends without one, and without a newline): then it runs to the end.
 *   - .out holds one line per case, in the same order: the ids, each with a
 *     leading space (" 15496 995"), no BOS/EOS; the empty case is an empty
 *     line.
 * Every case must give exactly those ids, with add_bos/add_eos off and
 * special tokens not parsed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>

#include "engine/text/tokenizer.h"
#include "test-util.h"

#define SEP "\n__ggml_vocab_test__\n"

typedef struct vcase {
    const char *text;
    size_t len;
    rlx_token *ids;
    size_t n_ids;
} vcase;

typedef struct vcases {
    char *inp;
    vcase *c;
    size_t n;
} vcases;

static void free_cases(vcases *v)
{
    for (size_t i = 0; i < v->n; i++)
        free(v->c[i].ids);
    free(v->c);
    free(v->inp);
    memset(v, 0, sizeof *v);
}

static vcases load_cases(const char *gguf_rel)
{
    vcases v = {0};
    char rel[512];
    size_t inp_len = 0, out_len = 0;
    snprintf(rel, sizeof rel, "%s.inp", gguf_rel);
    v.inp = rlx_test_read_file(rlx_test_data(rel), &inp_len);
    snprintf(rel, sizeof rel, "%s.out", gguf_rel);
    char *out = rlx_test_read_file(rlx_test_data(rel), &out_len);
    if (!v.inp || !out)
        fail_msg("cannot read the cases of %s", gguf_rel);

    /* split .inp at every separator; an empty tail means the file ended
     * with one */
    size_t cap = 64;
    v.c = calloc(cap, sizeof *v.c);
    size_t pos = 0, sl = strlen(SEP);
    for (;;) {
        char *hit = NULL;
        for (size_t i = pos; i + sl <= inp_len; i++)
            if (memcmp(v.inp + i, SEP, sl) == 0) {
                hit = v.inp + i;
                break;
            }
        size_t end = hit ? (size_t)(hit - v.inp) : inp_len;
        if (!hit && end == pos)
            break;
        if (v.n == cap) {
            cap *= 2;
            v.c = realloc(v.c, cap * sizeof *v.c);
        }
        v.c[v.n].text = v.inp + pos;
        v.c[v.n].len = end - pos;
        v.c[v.n].ids = NULL;
        v.c[v.n].n_ids = 0;
        v.n++;
        if (!hit)
            break;
        pos = end + sl;
    }

    /* .out: line i holds case i's ids */
    size_t line = 0;
    char *p = out, *e = out + out_len;
    while (p < e && line < v.n) {
        char *nl = memchr(p, '\n', (size_t)(e - p));
        char *le = nl ? nl : e;
        size_t idcap = 16;
        vcase *c = &v.c[line];
        c->ids = malloc(idcap * sizeof *c->ids);
        for (char *q = p; q < le;) {
            while (q < le && *q == ' ')
                q++;
            if (q >= le)
                break;
            long x = strtol(q, &q, 10);
            if (c->n_ids == idcap) {
                idcap *= 2;
                c->ids = realloc(c->ids, idcap * sizeof *c->ids);
            }
            c->ids[c->n_ids++] = (rlx_token)x;
        }
        line++;
        p = nl ? nl + 1 : e;
    }
    if (line != v.n)
        fail_msg("%s: %zu cases but %zu result lines", gguf_rel, v.n, line);
    free(out);
    return v;
}

/* Loading the 262k-token Gemma vocabulary takes a while in sanitizer
 * builds, so each file is loaded once and shared by the tests (a loaded
 * tokenizer is immutable). Freed at the end of the group. */
static struct {
    char *rel;
    rlx_tokenizer *t;
} cache[16];

static const rlx_tokenizer *load_tok(const char *rel)
{
    size_t i = 0;
    for (; i < 16 && cache[i].rel; i++)
        if (!strcmp(cache[i].rel, rel))
            return cache[i].t;
    assert_true(i < 16);
    rlx_tokenizer *t = NULL;
    rlx_error *err = NULL;
    if (rlx_tokenizer_load(rlx_test_data(rel), &t, &err) != RLX_OK)
        fail_msg("%s: %s", rel, rlx_error_message(err));
    cache[i].rel = strdup(rel);
    cache[i].t = t;
    return t;
}

static int free_cache(void **state)
{
    (void)state;
    for (size_t i = 0; i < 16 && cache[i].rel; i++) {
        rlx_tokenizer_free(cache[i].t);
        free(cache[i].rel);
    }
    return 0;
}

static size_t encode(const rlx_tokenizer *t, const char *s, size_t n, bool special, rlx_token **ids)
{
    rlx_tokenizer_encode_params p = rlx_tokenizer_encode_default_params();
    p.add_bos = 0;
    p.add_eos = 0;
    p.parse_special = special;
    size_t k = 0;
    rlx_error *err = NULL;
    if (rlx_tokenizer_encode(t, s, n, p, ids, &k, &err) != RLX_OK)
        fail_msg("encode: %s", rlx_error_message(err));
    return k;
}

static void print_ids(const char *what, const rlx_token *ids, size_t n)
{
    printf("    %s:", what);
    for (size_t i = 0; i < n; i++)
        printf(" %d", (int)ids[i]);
    printf("\n");
}

/* Number of cases whose ids differ from `want` (printing each). */
static int check_cases(const rlx_tokenizer *t, const vcases *v, const char *name)
{
    int bad = 0;
    for (size_t i = 0; i < v->n; i++) {
        rlx_token *ids = NULL;
        size_t n = encode(t, v->c[i].text, v->c[i].len, false, &ids);
        if (n != v->c[i].n_ids || (n && memcmp(ids, v->c[i].ids, n * sizeof *ids) != 0)) {
            bad++;
            printf("  %s case %zu '%.*s' differs\n", name, i, (int)v->c[i].len, v->c[i].text);
            print_ids("want", v->c[i].ids, v->c[i].n_ids);
            print_ids("got ", ids, n);
        }
        free(ids);
    }
    printf("%s: %zu/%zu cases pass\n", name, v->n - (size_t)bad, v->n);
    return bad;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void every_vocab(void **state)
{
    (void)state;
    DIR *d = opendir(rlx_test_data("tokenizers"));
    assert_non_null(d);
    char *names[64];
    size_t nn = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && nn < 64) {
        size_t l = strlen(de->d_name);
        if (strncmp(de->d_name, "ggml-vocab-", 11) == 0 && l > 5 &&
            strcmp(de->d_name + l - 5, ".gguf") == 0)
            names[nn++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, nn, sizeof names[0], cmp_names);
    assert_true(nn >= 5);
    int bad = 0;
    for (size_t i = 0; i < nn; i++) {
        char rel[512];
        snprintf(rel, sizeof rel, "tokenizers/%s", names[i]);
        const rlx_tokenizer *t = load_tok(rel);
        vcases v = load_cases(rel);
        assert_true(v.n >= 40);
        bad += check_cases(t, &v, names[i]);
        free_cases(&v);
        free(names[i]);
    }
    assert_int_equal(bad, 0);
}

/* The tokenizer.json of the same family must give the same ids. */
static void hf_json_agrees(void **state)
{
    (void)state;
    static const char *const pairs[][2] = {
        {"tokenizers/hf-qwen3/tokenizer.json", "tokenizers/ggml-vocab-qwen2.gguf"},
        {"tokenizers/hf-llama3.1", "tokenizers/ggml-vocab-llama-bpe.gguf"},
    };
    int bad = 0;
    for (size_t k = 0; k < 2; k++) {
        const rlx_tokenizer *hf = load_tok(pairs[k][0]);
        const rlx_tokenizer *gg = load_tok(pairs[k][1]);
        vcases v = load_cases(pairs[k][1]);
        bad += check_cases(hf, &v, pairs[k][0]);
        for (size_t i = 0; i < v.n; i++) {
            rlx_token *a = NULL, *b = NULL;
            size_t na = encode(hf, v.c[i].text, v.c[i].len, true, &a);
            size_t nb = encode(gg, v.c[i].text, v.c[i].len, true, &b);
            if (na != nb || (na && memcmp(a, b, na * sizeof *a) != 0))
                bad++;
            free(a);
            free(b);
        }
        free_cases(&v);
    }
    assert_int_equal(bad, 0);
}

static bool valid_utf8(const char *s, size_t n)
{
    const uint8_t *p = (const uint8_t *)s;
    for (size_t i = 0; i < n;) {
        uint8_t b = p[i];
        size_t l = b < 0x80                   ? 1
                   : (b >= 0xC2 && b <= 0xDF) ? 2
                   : (b >= 0xE0 && b <= 0xEF) ? 3
                   : (b >= 0xF0 && b <= 0xF4) ? 4
                                              : 0;
        if (!l || i + l > n)
            return false;
        for (size_t k = 1; k < l; k++)
            if ((p[i + k] & 0xC0) != 0x80)
                return false;
        if ((b == 0xE0 && p[i + 1] < 0xA0) || (b == 0xED && p[i + 1] > 0x9F) ||
            (b == 0xF0 && p[i + 1] < 0x90) || (b == 0xF4 && p[i + 1] > 0x8F))
            return false;
        i += l;
    }
    return true;
}

/* decode(encode(x)) == x for every case of every vocabulary, both in one
 * call and through the streaming detokenizer fed one token at a time, whose
 * every chunk must be whole UTF-8 characters. */
static void round_trip_and_stream(void **state)
{
    (void)state;
    static const char *const files[] = {
        "tokenizers/ggml-vocab-gpt-2.gguf",     "tokenizers/ggml-vocab-llama-bpe.gguf",
        "tokenizers/ggml-vocab-llama-spm.gguf", "tokenizers/ggml-vocab-qwen2.gguf",
        "tokenizers/ggml-vocab-gemma-4.gguf",
    };
    int bad = 0, split_chars = 0, multi_byte_tokens = 0;
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        const rlx_tokenizer *t = load_tok(files[f]);
        vcases v = load_cases(files[f]);
        rlx_tokenizer_decode_params dp = rlx_tokenizer_decode_default_params(t);
        rlx_detokenizer *d = NULL;
        assert_int_equal(rlx_detokenizer_create(t, dp, &d, NULL), RLX_OK);
        int ok = 0;
        for (size_t i = 0; i < v.n; i++) {
            rlx_token *ids = NULL;
            size_t n = encode(t, v.c[i].text, v.c[i].len, false, &ids);
            char *s = NULL;
            size_t sl = 0;
            assert_int_equal(rlx_tokenizer_decode(t, ids, n, dp, &s, &sl, NULL), RLX_OK);
            if (sl == v.c[i].len && memcmp(s, v.c[i].text, sl) == 0)
                ok++;
            else {
                bad++;
                printf("  %s case %zu: decode gives '%s'\n", files[f], i, s);
            }
            /* streaming */
            char *acc = malloc(v.c[i].len * 3 + 16);
            size_t al = 0;
            rlx_detokenizer_reset(d);
            for (size_t k = 0; k < n; k++) {
                const char *chunk;
                size_t cl;
                assert_int_equal(rlx_detokenizer_push(d, ids[k], &chunk, &cl, NULL), RLX_OK);
                if (!valid_utf8(chunk, cl))
                    split_chars++;
                char piece[64];
                if (rlx_tokenizer_token_to_piece(t, ids[k], false, piece, sizeof piece) == 1 &&
                    (uint8_t)piece[0] >= 0x80)
                    multi_byte_tokens++;
                memcpy(acc + al, chunk, cl);
                al += cl;
            }
            const char *tail;
            size_t tl;
            rlx_detokenizer_flush(d, &tail, &tl);
            memcpy(acc + al, tail, tl);
            al += tl;
            if (al != sl || memcmp(acc, s, sl) != 0) {
                bad++;
                printf("  %s case %zu: streaming gives '%.*s'\n", files[f], i, (int)al, acc);
            }
            free(acc);
            free(s);
            free(ids);
        }
        printf("%s: %d/%zu round trips\n", files[f], ok, v.n);
        rlx_detokenizer_free(d);
        free_cases(&v);
    }
    assert_int_equal(split_chars, 0);
    /* the cases do exercise byte tokens that hold part of a character */
    assert_true(multi_byte_tokens > 10);
    assert_int_equal(bad, 0);
}

/* Emoji and CJK through byte-fallback tokens, one token at a time. */
static void stream_holds_partial_characters(void **state)
{
    (void)state;
    const rlx_tokenizer *t = load_tok("tokenizers/ggml-vocab-llama-spm.gguf");
    const char *text = "\xF0\x9F\xA6\x99 \xE6\x88\x91\xE6\x83\xB3 \xF0\x9F\x98\xB6\xE2\x80\x8D"
                       "\xF0\x9F\x8C\xAB\xEF\xB8\x8F ok";
    rlx_token *ids = NULL;
    size_t n = encode(t, text, strlen(text), false, &ids);
    rlx_detokenizer *d = NULL;
    assert_int_equal(rlx_detokenizer_create(t, rlx_tokenizer_decode_default_params(t), &d, NULL),
                     RLX_OK);
    char acc[256];
    size_t al = 0;
    int empty_pushes = 0;
    for (size_t k = 0; k < n; k++) {
        const char *c;
        size_t cl;
        assert_int_equal(rlx_detokenizer_push(d, ids[k], &c, &cl, NULL), RLX_OK);
        assert_true(valid_utf8(c, cl));
        empty_pushes += cl == 0;
        memcpy(acc + al, c, cl);
        al += cl;
    }
    assert_true(empty_pushes >= 3); /* the llama emoji is 4 byte tokens */
    assert_int_equal(al, strlen(text));
    assert_memory_equal(acc, text, al);

    /* a lone lead byte at the end comes out as U+FFFD on flush, and a stray
     * continuation byte at once */
    rlx_detokenizer_reset(d);
    rlx_token lead = rlx_tokenizer_find(t, "<0xE6>", 6);
    rlx_token cont = rlx_tokenizer_find(t, "<0x88>", 6);
    assert_true(lead >= 0 && cont >= 0);
    const char *c;
    size_t cl;
    assert_int_equal(rlx_detokenizer_push(d, cont, &c, &cl, NULL), RLX_OK);
    assert_int_equal(cl, 3);
    assert_memory_equal(c, "\xEF\xBF\xBD", 3);
    assert_int_equal(rlx_detokenizer_push(d, lead, &c, &cl, NULL), RLX_OK);
    assert_int_equal(cl, 0);
    rlx_detokenizer_flush(d, &c, &cl);
    assert_int_equal(cl, 3);
    rlx_detokenizer_free(d);
    free(ids);
}

static bool contains(const rlx_token *ids, size_t n, rlx_token id)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

static void special_tokens_only_when_asked(void **state)
{
    (void)state;
    const rlx_tokenizer *q = load_tok("tokenizers/ggml-vocab-qwen2.gguf");
    const char *s = "<|im_start|>user\nhi<|im_end|>";
    rlx_token *ids = NULL;
    size_t n = encode(q, s, strlen(s), true, &ids);
    assert_int_equal(n, 5);
    assert_int_equal(ids[0], 151644);
    assert_int_equal(ids[n - 1], 151645);
    assert_true(rlx_tokenizer_is_eog(q, 151645));
    assert_true(rlx_tokenizer_is_control(q, 151644));
    /* decoding renders them only when asked */
    char *out = NULL;
    rlx_tokenizer_decode_params dp = rlx_tokenizer_decode_default_params(q);
    assert_int_equal(rlx_tokenizer_decode(q, ids, n, dp, &out, NULL, NULL), RLX_OK);
    assert_string_equal(out, "user\nhi");
    free(out);
    dp.render_special = true;
    assert_int_equal(rlx_tokenizer_decode(q, ids, n, dp, &out, NULL, NULL), RLX_OK);
    assert_string_equal(out, s);
    free(out);
    free(ids);
    n = encode(q, s, strlen(s), false, &ids);
    assert_true(n > 5);
    assert_false(contains(ids, n, 151644));
    assert_false(contains(ids, n, 151645));
    free(ids);

    const rlx_tokenizer *l = load_tok("tokenizers/ggml-vocab-llama-spm.gguf");
    n = encode(l, "<s>Hi", 5, true, &ids);
    assert_true(n >= 2);
    assert_int_equal(ids[0], 1);
    free(ids);
    n = encode(l, "<s>Hi", 5, false, &ids);
    assert_false(contains(ids, n, 1));
    free(ids);
    /* add_bos from metadata */
    rlx_tokenizer_encode_params p = rlx_tokenizer_encode_default_params();
    assert_int_equal(rlx_tokenizer_encode(l, "Hi", 2, p, &ids, &n, NULL), RLX_OK);
    assert_int_equal(ids[0], 1);
    free(ids);
    p.add_bos = 0;
    p.add_eos = 1;
    assert_int_equal(rlx_tokenizer_encode(l, "Hi", 2, p, &ids, &n, NULL), RLX_OK);
    assert_int_not_equal(ids[0], 1);
    assert_int_equal(ids[n - 1], 2);
    free(ids);
}

/* stories260K's 512-piece SentencePiece vocabulary. The expected ids were
 * computed by tests/reference/spm-tokenize.py, a separate Python
 * implementation of SentencePiece BPE (highest-score pair first, byte
 * fallback) that reads the vocabulary straight from the GGUF file:
 *     python3 tests/reference/spm-tokenize.py stories260K.gguf "Once upon a time"
 * and checked by hand: the pieces are "▁Once" "▁upon" "▁a" "▁time". The
 * script itself gives the expected ids of all 46 ggml-vocab-llama-spm cases
 * (checked when it was written), so it is a faithful SentencePiece. */
static void stories260k(void **state)
{
    (void)state;
    const rlx_tokenizer *t = load_tok("llm/stories260K.gguf");
    assert_int_equal(rlx_tokenizer_n_vocab(t), 512);
    assert_int_equal(rlx_tokenizer_get_kind(t), RLX_TOKENIZER_SPM);
    assert_int_equal(rlx_tokenizer_bos(t), 1);
    assert_int_equal(rlx_tokenizer_eos(t), 2);
    assert_int_equal(rlx_tokenizer_pad(t), RLX_TOKEN_NULL); /* 0xFFFFFFFF in the file */
    rlx_token *ids = NULL;
    size_t n = 0;
    rlx_tokenizer_encode_params p = rlx_tokenizer_encode_default_params();
    assert_int_equal(rlx_tokenizer_encode(t, "Once upon a time", 16, p, &ids, &n, NULL), RLX_OK);
    static const rlx_token want[] = {1, 403, 407, 261, 378};
    assert_int_equal(n, sizeof want / sizeof want[0]);
    assert_memory_equal(ids, want, sizeof want);
    char *s = NULL;
    assert_int_equal(
        rlx_tokenizer_decode(t, ids, n, rlx_tokenizer_decode_default_params(t), &s, NULL, NULL),
        RLX_OK);
    assert_string_equal(s, "Once upon a time");
    free(s);
    free(ids);
}

/* Every pre-tokenizer name we claim compiles and splits consistently: a
 * byte-level vocabulary of the 256 byte characters (no merges) must give
 * back any text byte for byte, whatever the regexes cut. */
static void every_pre_tokenizer(void **state)
{
    (void)state;
    static const char *const names[] = {
        "default",        "llama3",      "llama-bpe", "qwen2",     "gpt-2",       "mpt",
        "olmo",           "starcoder",   "refact",    "command-r", "smollm",      "codeshell",
        "exaone",         "falcon",      "tekken",    "gpt-4o",    "llama4",      "deepseek-llm",
        "deepseek-coder", "deepseek-v3", "dbrx",      "smaug-bpe", "chatglm-bpe", "stablelm2",
        "poro-chat",      "bloom",       "viking",    "jais",      "megrez",      "minerva-7b",
    };
    char *toks[256];
    for (int b = 0; b < 256; b++) {
        unsigned cp = b <= 32                  ? 256u + b
                      : (b >= 127 && b <= 160) ? 289u + (b - 127)
                      : b == 173               ? 323u
                                               : (unsigned)b;
        toks[b] = malloc(4);
        if (cp < 0x80) {
            toks[b][0] = (char)cp;
            toks[b][1] = 0;
        } else {
            toks[b][0] = (char)(0xC0 | (cp >> 6));
            toks[b][1] = (char)(0x80 | (cp & 0x3F));
            toks[b][2] = 0;
        }
    }
    const char *text =
        "Hello, y'all! It's 2024: 12345 apples\n\n  cost $3.50 \xE6\x88\x91\xE6\x83\xB3 "
        "caf\xC3\xA9 \xF0\x9F\xA6\x99 CamelCase\tend  ";
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        rlx_gguf_writer *w = rlx_gguf_writer_create();
        rlx_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
        rlx_gguf_writer_set_str(w, "tokenizer.ggml.pre", names[i]);
        rlx_gguf_writer_set_str_arr(w, "tokenizer.ggml.tokens", (const char *const *)toks, 256);
        const char *merges[] = {"H e"};
        rlx_gguf_writer_set_str_arr(w, "tokenizer.ggml.merges", merges, 0);
        const char *path = rlx_test_tmp("pre.gguf");
        assert_int_equal(rlx_gguf_writer_write(w, path, NULL), RLX_OK);
        rlx_gguf_writer_free(w);
        rlx_tokenizer *t = NULL;
        rlx_error *err = NULL;
        if (rlx_tokenizer_load(path, &t, &err) != RLX_OK)
            fail_msg("pre '%s': %s", names[i], rlx_error_message(err));
        assert_string_equal(rlx_tokenizer_pre_name(t), names[i]);
        rlx_token *ids = NULL;
        size_t n = encode(t, text, strlen(text), false, &ids);
        assert_int_equal(n, strlen(text));
        char *s = NULL;
        assert_int_equal(
            rlx_tokenizer_decode(t, ids, n, rlx_tokenizer_decode_default_params(t), &s, NULL, NULL),
            RLX_OK);
        assert_string_equal(s, text);
        free(s);
        free(ids);
        rlx_tokenizer_free(t);
    }
    for (int b = 0; b < 256; b++)
        free(toks[b]);
}

/* A SentencePiece-style tokenizer.json (the Llama 2 / Mistral / Gemma
 * layout): Prepend + Replace normalizers, byte fallback, merges in both
 * forms, a BOS template, a Strip decoder, and a non-special added token
 * with lstrip/rstrip. */
/* A tiny SentencePiece-style tokenizer.json: ids 0-2 <unk> <s> </s>,
 * 3..258 the byte pieces, then "▁" "h" "i" "hi" "▁hi", merges in both forms,
 * and the added token "<tool>" (264, not special, lstrip/rstrip).
 * `norm_pre` is its normalizer and pre_tokenizer entries. */
static rlx_tokenizer *spm_style_json(const char *name, const char *norm_pre)
{
    static char json[16384];
    size_t o = 0;
    o += (size_t)snprintf(json + o, sizeof json - o,
                          "{\"added_tokens\":["
                          "{\"id\":0,\"content\":\"<unk>\",\"special\":true},"
                          "{\"id\":1,\"content\":\"<s>\",\"special\":true},"
                          "{\"id\":2,\"content\":\"</s>\",\"special\":true},"
                          "{\"id\":264,\"content\":\"<tool>\",\"special\":false,"
                          "\"lstrip\":true,\"rstrip\":true}],"
                          "%s,"
                          "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":["
                          "{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},"
                          "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}]},"
                          "\"decoder\":{\"type\":\"Sequence\",\"decoders\":["
                          "{\"type\":\"Replace\",\"pattern\":{\"String\":\"\\u2581\"},"
                          "\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},"
                          "{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}]},"
                          "\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,"
                          "\"unk_token\":\"<unk>\",\"vocab\":{\"<unk>\":0,\"<s>\":1,\"</s>\":2",
                          norm_pre);
    for (int b = 0; b < 256; b++)
        o += (size_t)snprintf(json + o, sizeof json - o, ",\"<0x%02X>\":%d", b, 3 + b);
    o += (size_t)snprintf(json + o, sizeof json - o,
                          ",\"\\u2581\":259,\"h\":260,\"i\":261,\"hi\":262,\"\\u2581hi\":263},"
                          "\"merges\":[[\"h\",\"i\"],\"\\u2581 hi\"]}}");
    const char *path = rlx_test_tmp(name);
    assert_int_equal(rlx_test_write_file(path, json, o), 0);
    rlx_tokenizer *t = NULL;
    rlx_error *err = NULL;
    if (rlx_tokenizer_from_hf_json(path, &t, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    return t;
}

static void hf_json_spm_style(void **state)
{
    (void)state;
    rlx_tokenizer *t =
        spm_style_json("spm-style.json", "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":["
                                         "{\"type\":\"Prepend\",\"prepend\":\"\\u2581\"},"
                                         "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},"
                                         "\"content\":\"\\u2581\"}]},\"pre_tokenizer\":null");
    assert_int_equal(rlx_tokenizer_get_kind(t), RLX_TOKENIZER_CHAR_BPE);
    assert_true(rlx_tokenizer_adds_bos(t));
    assert_int_equal(rlx_tokenizer_bos(t), 1);

    rlx_tokenizer_encode_params p = rlx_tokenizer_encode_default_params();
    rlx_token *ids = NULL;
    size_t n = 0;
    assert_int_equal(rlx_tokenizer_encode(t, "hi hi", 5, p, &ids, &n, NULL), RLX_OK);
    static const rlx_token want1[] = {1, 263, 263};
    assert_int_equal(n, 3);
    assert_memory_equal(ids, want1, sizeof want1);
    free(ids);

    /* é is no piece: its two bytes */
    assert_int_equal(rlx_tokenizer_encode(t, "h\xC3\xA9", 3, p, &ids, &n, NULL), RLX_OK);
    static const rlx_token want2[] = {1, 259, 260, 3 + 0xC3, 3 + 0xA9};
    assert_int_equal(n, 5);
    assert_memory_equal(ids, want2, sizeof want2);
    char *s = NULL;
    assert_int_equal(
        rlx_tokenizer_decode(t, ids, n, rlx_tokenizer_decode_default_params(t), &s, NULL, NULL),
        RLX_OK);
    assert_string_equal(s, "h\xC3\xA9");
    free(s);
    free(ids);

    /* the added token takes the spaces around it, even without parse_special */
    assert_int_equal(rlx_tokenizer_encode(t, "hi <tool> hi", 12, p, &ids, &n, NULL), RLX_OK);
    static const rlx_token want3[] = {1, 263, 264, 263};
    assert_int_equal(n, 4);
    assert_memory_equal(ids, want3, sizeof want3);
    free(ids);
    rlx_tokenizer_free(t);
}

/* Metaspace with prepend_scheme "first": no "▁" after a special token. */
static void hf_json_metaspace_first(void **state)
{
    (void)state;
    rlx_tokenizer *t = spm_style_json(
        "metaspace.json", "\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"Metaspace\","
                          "\"replacement\":\"\\u2581\",\"prepend_scheme\":\"first\","
                          "\"split\":true}");
    rlx_token *ids = NULL;
    size_t n = encode(t, "hi hi</s>hi", 11, true, &ids);
    static const rlx_token want[] = {263, 263, 2, 262};
    assert_int_equal(n, 4);
    assert_memory_equal(ids, want, sizeof want);
    free(ids);
    rlx_tokenizer_free(t);
}

typedef struct thread_job {
    const rlx_tokenizer *t;
    const char *text;
    rlx_token *ids;
    size_t n;
} thread_job;

static void *encode_thread(void *arg)
{
    thread_job *j = arg;
    for (int k = 0; k < 20; k++) {
        rlx_token *ids = NULL;
        size_t n = 0;
        rlx_tokenizer_encode_params p = rlx_tokenizer_encode_default_params();
        p.parse_special = true;
        if (rlx_tokenizer_encode(j->t, j->text, strlen(j->text), p, &ids, &n, NULL) != RLX_OK)
            return NULL;
        free(j->ids);
        j->ids = ids;
        j->n = n;
    }
    return j;
}

/* One loaded tokenizer, several threads encoding at once (the regex JIT
 * and the NFC normalizer are shared): every thread gets the same ids. */
static void concurrent_encoding(void **state)
{
    (void)state;
    const rlx_tokenizer *t = load_tok("tokenizers/hf-qwen3/tokenizer.json");
    const char *text = "<|im_start|>user\nCafe\xCC\x81 costs 3.50 \xE2\x82\xAC, "
                       "\xE6\x88\x91\xE6\x83\xB3 \xF0\x9F\xA6\x99<|im_end|>";
    thread_job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (thread_job){.t = t, .text = text};
        assert_int_equal(pthread_create(&th[i], NULL, encode_thread, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        void *r = NULL;
        pthread_join(th[i], &r);
        assert_non_null(r);
    }
    rlx_token *ids = NULL;
    size_t n = encode(t, text, strlen(text), true, &ids);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(jobs[i].n, n);
        assert_memory_equal(jobs[i].ids, ids, n * sizeof *ids);
        free(jobs[i].ids);
    }
    /* NFC composed e + U+0301 into U+00E9: "Café" decodes composed */
    char *s = NULL;
    assert_int_equal(
        rlx_tokenizer_decode(t, ids, n, rlx_tokenizer_decode_default_params(t), &s, NULL, NULL),
        RLX_OK);
    assert_non_null(strstr(s, "Caf\xC3\xA9 costs"));
    free(s);
    free(ids);
}

/* A byte-level tokenizer.json whose pre_tokenizer is Split(" ", BEHAVIOR)
 * then ByteLevel: the vocabulary is the 256 byte characters (id = byte)
 * plus "aĠ" (256) and "Ġb" (257), so which merge happens shows where the
 * split put the space. */
static rlx_tokenizer *split_json(const char *behavior, bool prefix_space)
{
    static char json[8192];
    size_t o = (size_t)snprintf(json, sizeof json, "{\"model\":{\"type\":\"BPE\",\"vocab\":{");
    for (int b = 0; b < 256; b++) {
        unsigned cp = b <= 32                  ? 256u + (unsigned)b
                      : (b >= 127 && b <= 160) ? 289u + (unsigned)(b - 127)
                      : b == 173               ? 323u
                                               : (unsigned)b;
        char u[8];
        if (cp == '"' || cp == '\\')
            snprintf(u, sizeof u, "\\%c", (char)cp);
        else if (cp < 0x80)
            snprintf(u, sizeof u, "%c", (char)cp);
        else
            snprintf(u, sizeof u, "%c%c", (char)(0xC0 | (cp >> 6)), (char)(0x80 | (cp & 0x3F)));
        o += (size_t)snprintf(json + o, sizeof json - o, "%s\"%s\":%d", b ? "," : "", u, b);
    }
    o += (size_t)snprintf(
        json + o, sizeof json - o,
        ",\"a\xC4\xA0\":256,\"\xC4\xA0"
        "b\":257},\"merges\":[\"a \xC4\xA0\",\"\xC4\xA0 b\"]},"
        "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
        "{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},\"behavior\":\"%s\",\"invert\":false},"
        "{\"type\":\"ByteLevel\",\"add_prefix_space\":%s,\"use_regex\":false}]},"
        "\"decoder\":{\"type\":\"ByteLevel\"}}",
        behavior, prefix_space ? "true" : "false");
    const char *path = rlx_test_tmp("split.json");
    assert_int_equal(rlx_test_write_file(path, json, o), 0);
    rlx_tokenizer *t = NULL;
    rlx_error *err = NULL;
    if (rlx_tokenizer_from_hf_json(path, &t, &err) != RLX_OK)
        fail_msg("%s: %s", behavior, rlx_error_message(err));
    return t;
}

static void hf_json_split_behaviors(void **state)
{
    (void)state;
    static const struct {
        const char *behavior;
        bool prefix;
        rlx_token want[4];
        size_t n;
    } cases[] = {
        {"Isolated", false, {97, 32, 98}, 3},    {"MergedWithPrevious", false, {256, 98}, 2},
        {"MergedWithNext", false, {97, 257}, 2}, {"Removed", false, {97, 98}, 2},
        {"Isolated", true, {32, 97, 32, 98}, 4}, {"MergedWithNext", true, {32, 97, 257}, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rlx_tokenizer *t = split_json(cases[i].behavior, cases[i].prefix);
        assert_int_equal(rlx_tokenizer_get_kind(t), RLX_TOKENIZER_BPE);
        rlx_token *ids = NULL;
        size_t n = encode(t, "a b", 3, false, &ids);
        if (n != cases[i].n || memcmp(ids, cases[i].want, n * sizeof *ids) != 0) {
            print_ids("want", cases[i].want, cases[i].n);
            print_ids("got ", ids, n);
            fail_msg("Split %s (prefix %d)", cases[i].behavior, cases[i].prefix);
        }
        free(ids);
        rlx_tokenizer_free(t);
    }
}

static void errors(void **state)
{
    (void)state;
    rlx_tokenizer *t = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_tokenizer_load("/nonexistent/model.gguf", &t, &err), RLX_ERR_IO);
    assert_null(t);
    rlx_error_clear(&err);
    assert_int_equal(rlx_tokenizer_load("/nonexistent-folder", &t, &err), RLX_ERR_IO);
    rlx_error_clear(&err);
    /* a GGUF with no tokenizer */
    rlx_gguf_writer *w = rlx_gguf_writer_create();
    rlx_gguf_writer_set_str(w, "general.architecture", "llama");
    const char *path = rlx_test_tmp("no-tokenizer.gguf");
    assert_int_equal(rlx_gguf_writer_write(w, path, NULL), RLX_OK);
    rlx_gguf_writer_free(w);
    assert_int_equal(rlx_tokenizer_load(path, &t, &err), RLX_ERR_NOT_FOUND);
    assert_non_null(strstr(rlx_error_message(err), "tokenizer"));
    rlx_error_clear(&err);
    /* an unknown model */
    w = rlx_gguf_writer_create();
    rlx_gguf_writer_set_str(w, "tokenizer.ggml.model", "wordpiece-from-mars");
    const char *toks[] = {"a", "b"};
    rlx_gguf_writer_set_str_arr(w, "tokenizer.ggml.tokens", toks, 2);
    path = rlx_test_tmp("odd-tokenizer.gguf");
    assert_int_equal(rlx_gguf_writer_write(w, path, NULL), RLX_OK);
    rlx_gguf_writer_free(w);
    assert_int_equal(rlx_tokenizer_load(path, &t, &err), RLX_ERR_UNSUPPORTED);
    assert_non_null(strstr(rlx_error_message(err), "wordpiece-from-mars"));
    rlx_error_clear(&err);
    /* an unknown pre-tokenizer */
    w = rlx_gguf_writer_create();
    rlx_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    rlx_gguf_writer_set_str(w, "tokenizer.ggml.pre", "klingon");
    rlx_gguf_writer_set_str_arr(w, "tokenizer.ggml.tokens", toks, 2);
    const char *merges[] = {"a b"};
    rlx_gguf_writer_set_str_arr(w, "tokenizer.ggml.merges", merges, 1);
    path = rlx_test_tmp("odd-pre.gguf");
    assert_int_equal(rlx_gguf_writer_write(w, path, NULL), RLX_OK);
    rlx_gguf_writer_free(w);
    assert_int_equal(rlx_tokenizer_load(path, &t, &err), RLX_ERR_UNSUPPORTED);
    assert_non_null(strstr(rlx_error_message(err), "klingon"));
    rlx_error_clear(&err);

    /* invalid UTF-8 and NUL bytes go through the byte tokens */
    const rlx_tokenizer *bpe = load_tok("tokenizers/ggml-vocab-llama-bpe.gguf");
    const char bad[] = "a\xFF\xC3(b\0c\xE2\x82";
    rlx_token *ids = NULL;
    size_t n = encode(bpe, bad, sizeof bad - 1, false, &ids);
    char *s = NULL;
    size_t sl = 0;
    assert_int_equal(
        rlx_tokenizer_decode(bpe, ids, n, rlx_tokenizer_decode_default_params(bpe), &s, &sl, NULL),
        RLX_OK);
    assert_int_equal(sl, sizeof bad - 1);
    assert_memory_equal(s, bad, sl);
    free(s);
    rlx_token oob = 1 << 30;
    assert_int_equal(
        rlx_tokenizer_decode(bpe, &oob, 1, rlx_tokenizer_decode_default_params(bpe), &s, &sl, &err),
        RLX_ERR_INVALID_ARG);
    rlx_error_clear(&err);
    free(ids);
}

/* 100 KB of English prose in well under a second (timed, not just run). */
static void speed(void **state)
{
    (void)state;
    static const char para[] =
        "It was the best of times, it was the worst of times, it was the age of wisdom, it was "
        "the age of foolishness, it was the epoch of belief, it was the epoch of incredulity, "
        "it was the season of Light, it was the season of Darkness. We had everything before "
        "us, we had nothing before us; in short, the period was so far like the present one.\n";
    size_t total = 100 * 1024, pl = strlen(para);
    char *text = malloc(total + 1);
    for (size_t i = 0; i < total; i += pl)
        memcpy(text + i, para, i + pl <= total ? pl : total - i);
    text[total] = 0;
    static const char *const files[] = {"tokenizers/ggml-vocab-llama-bpe.gguf",
                                        "tokenizers/ggml-vocab-llama-spm.gguf",
                                        "tokenizers/ggml-vocab-gemma-4.gguf"};
    for (size_t f = 0; f < 3; f++) {
        const rlx_tokenizer *t = load_tok(files[f]);
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        rlx_token *ids = NULL;
        size_t n = encode(t, text, total, false, &ids);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double sec = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
        printf("%s: 100 KB -> %zu tokens in %.3f s\n", files[f], n, sec);
        assert_true(n > 15000);
        /* generous, so that sanitizer and debug builds pass too */
        assert_true(sec < 5.0);
        free(ids);
    }
    free(text);
}

int main(void)
{
    rlx_test_need_data("llm/stories260K.gguf", "tokenizers/hf-qwen3/tokenizer.json",
                       "tokenizers/hf-llama3.1", "tokenizers/ggml-vocab-gemma-4.gguf",
                       "tokenizers/ggml-vocab-gpt-2.gguf", "tokenizers/ggml-vocab-llama-bpe.gguf",
                       "tokenizers/ggml-vocab-llama-spm.gguf", "tokenizers/ggml-vocab-qwen2.gguf",
                       NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_vocab),
        cmocka_unit_test(hf_json_agrees),
        cmocka_unit_test(round_trip_and_stream),
        cmocka_unit_test(stream_holds_partial_characters),
        cmocka_unit_test(special_tokens_only_when_asked),
        cmocka_unit_test(stories260k),
        cmocka_unit_test(every_pre_tokenizer),
        cmocka_unit_test(hf_json_spm_style),
        cmocka_unit_test(hf_json_metaspace_first),
        cmocka_unit_test(hf_json_split_behaviors),
        cmocka_unit_test(concurrent_encoding),
        cmocka_unit_test(errors),
        cmocka_unit_test(speed),
    };
    return cmocka_run_group_tests(tests, NULL, free_cache);
}
