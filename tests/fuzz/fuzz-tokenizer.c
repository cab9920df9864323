/* libFuzzer target for the tokenizers, on small vocabularies built in
 * memory (no data files). The first byte picks what the rest is fed to:
 *   0, 1: a SentencePiece vocabulary with byte pieces (1: specials parsed);
 *   2, 3: a byte-level BPE vocabulary, llama3 pre-tokenizer (3: specials);
 *   4:    a character-level BPE vocabulary (the gemma4 model);
 *   5:    the GGUF loader, the input being a whole GGUF image; a tokenizer
 *         it accepts must then encode and decode a fixed text.
 * Without special tokens decode(encode(x)) must give x back byte for byte
 * (except, for the "▁" models, where x itself holds a "▁"). Every chunk the
 * streaming detokenizer hands out must be valid UTF-8. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/text/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static rlx_tokenizer *spm, *bpe, *cbpe;

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

static rlx_tokenizer *from_writer(rlx_gguf_writer *w)
{
    void *mem = NULL;
    size_t n = 0;
    rlx_tokenizer *t = NULL;
    rlx_gguf *g = NULL;
    if (rlx_gguf_writer_to_memory(w, &mem, &n, NULL) == RLX_OK &&
        rlx_gguf_open_memory(mem, n, "fuzz", &g, NULL) == RLX_OK)
        rlx_tokenizer_from_gguf(g, &t, NULL);
    rlx_gguf_close(g);
    free(mem);
    rlx_gguf_writer_free(w);
    if (!t)
        abort();
    return t;
}

/* <unk> <s> </s>, the 256 byte pieces, then a few words; model is "llama"
 * (scores) or "gemma4" (merges). */
static rlx_tokenizer *make_spm(const char *model)
{
    static char bytes[256][8];
    const char *ptrs[268];
    float scores[268];
    int32_t types[268];
    ptrs[0] = "<unk>";
    ptrs[1] = "<s>";
    ptrs[2] = "</s>";
    types[0] = 2;
    types[1] = types[2] = 3;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        ptrs[3 + b] = bytes[b];
        types[3 + b] = 6;
    }
    const char *words[9] = {"\xE2\x96\x81",
                            "a",
                            "b",
                            "\xE2\x96\x81"
                            "a",
                            "ab",
                            "\xE2\x96\x81"
                            "ab",
                            "\n",
                            "\n\n",
                            "\xE6\x88\x91"};
    for (int i = 0; i < 9; i++) {
        ptrs[259 + i] = words[i];
        types[259 + i] = 1;
    }
    for (int i = 0; i < 268; i++)
        scores[i] = i < 259 ? 0.0f : (float)-i;
    const char *merges[] = {"\xE2\x96\x81 a", "a b",
                            "\xE2\x96\x81"
                            "a b",
                            "\n \n"};
    rlx_gguf_writer *w = rlx_gguf_writer_create();
    rlx_gguf_writer_set_str(w, "tokenizer.ggml.model", model);
    rlx_gguf_writer_set_str_arr(w, "tokenizer.ggml.tokens", ptrs, 268);
    rlx_gguf_writer_set_arr(w, "tokenizer.ggml.scores", RLX_GGUF_TYPE_FLOAT32, scores, 268);
    rlx_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", RLX_GGUF_TYPE_INT32, types, 268);
    if (!strcmp(model, "gemma4"))
        rlx_gguf_writer_set_str_arr(w, "tokenizer.ggml.merges", merges, 4);
    return from_writer(w);
}

static rlx_tokenizer *make_bpe(void)
{
    /* the 256 GPT-2 byte characters, a few merges and two specials */
    static char toks[262][8];
    const char *ptrs[262];
    for (int b = 0; b < 256; b++) {
        unsigned cp = b <= 32                  ? 256u + (unsigned)b
                      : (b >= 127 && b <= 160) ? 289u + (unsigned)(b - 127)
                      : b == 173               ? 323u
                                               : (unsigned)b;
        if (cp < 0x80) {
            toks[b][0] = (char)cp;
        } else {
            toks[b][0] = (char)(0xC0 | (cp >> 6));
            toks[b][1] = (char)(0x80 | (cp & 0x3F));
        }
        ptrs[b] = toks[b];
    }
    const char *extra[6] = {"he", "ll", "hell", "\xC4\xA0h", "<|end|>", "<|user|>"};
    for (int i = 0; i < 6; i++)
        ptrs[256 + i] = extra[i];
    const char *merges[] = {"h e", "l l", "he ll", "\xC4\xA0 h"};
    int32_t types[262];
    for (int i = 0; i < 262; i++)
        types[i] = i >= 260 ? 3 : 1;
    rlx_gguf_writer *w = rlx_gguf_writer_create();
    rlx_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    rlx_gguf_writer_set_str(w, "tokenizer.ggml.pre", "llama3");
    rlx_gguf_writer_set_str_arr(w, "tokenizer.ggml.tokens", ptrs, 262);
    rlx_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", RLX_GGUF_TYPE_INT32, types, 262);
    rlx_gguf_writer_set_str_arr(w, "tokenizer.ggml.merges", merges, 4);
    rlx_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 260);
    return from_writer(w);
}

static void init(void)
{
    if (spm)
        return;
    spm = make_spm("llama");
    cbpe = make_spm("gemma4");
    bpe = make_bpe();
}

static void run(const rlx_tokenizer *t, const char *text, size_t len, bool special,
                bool must_round_trip)
{
    rlx_tokenizer_encode_params ep = rlx_tokenizer_encode_default_params();
    ep.parse_special = special;
    ep.add_bos = 0;
    rlx_token *ids = NULL;
    size_t n = 0;
    if (rlx_tokenizer_encode(t, text, len, ep, &ids, &n, NULL) != RLX_OK)
        abort();
    char *s = NULL;
    size_t sl = 0;
    rlx_tokenizer_decode_params dp = rlx_tokenizer_decode_default_params(t);
    if (rlx_tokenizer_decode(t, ids, n, dp, &s, &sl, NULL) != RLX_OK)
        abort();
    if (must_round_trip && (sl != len || memcmp(s, text, len) != 0))
        abort();
    rlx_detokenizer *d = NULL;
    if (rlx_detokenizer_create(t, dp, &d, NULL) != RLX_OK)
        abort();
    for (size_t i = 0; i < n; i++) {
        const char *c;
        size_t cl;
        if (rlx_detokenizer_push(d, ids[i], &c, &cl, NULL) != RLX_OK || !valid_utf8(c, cl))
            abort();
    }
    const char *c;
    size_t cl;
    rlx_detokenizer_flush(d, &c, &cl);
    if (!valid_utf8(c, cl))
        abort();
    rlx_detokenizer_free(d);
    free(s);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    init();
    if (size < 1)
        return 0;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    bool has_meta = memmem(text, len, "\xE2\x96\x81", 3) != NULL;
    switch (data[0] % 6) {
    case 0:
    case 1:
        run(spm, text, len, data[0] % 6 == 1, data[0] % 6 == 0 && !has_meta);
        break;
    case 2:
    case 3:
        run(bpe, text, len, data[0] % 6 == 3, data[0] % 6 == 2);
        break;
    case 4:
        run(cbpe, text, len, false, !has_meta);
        break;
    case 5: {
        rlx_gguf *g = NULL;
        rlx_tokenizer *t = NULL;
        if (rlx_gguf_open_memory(data, size, "fuzz", &g, NULL) == RLX_OK &&
            rlx_tokenizer_from_gguf(g, &t, NULL) == RLX_OK) {
            rlx_gguf_close(g);
            g = NULL;
            static const char probe[] = "Hello, world! \xE6\x88\x91 <|end|>";
            run(t, probe, sizeof probe - 1, true, false);
        }
        rlx_tokenizer_free(t);
        rlx_gguf_close(g);
        break;
    }
    }
    return 0;
}
