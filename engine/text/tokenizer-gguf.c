/* Tokenizer from GGUF metadata (the tokenizer.ggml.* keys written by the
 * llama.cpp converters). The defaults for keys a file leaves out are the
 * reference loader's: SentencePiece models add BOS and a space prefix,
 * BPE models add neither unless their pre-tokenizer asks for BOS. */
#include "engine/text/tokenizer-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool gstr_eq(rlx_gguf_str s, const char *want)
{
    return s.len == strlen(want) && memcmp(s.ptr, want, s.len) == 0;
}

/* An optional id key: missing, or a value outside the vocabulary (files
 * write 0xFFFFFFFF for "none"), leave *id as it was. */
static void read_id(const rlx_gguf *g, const char *key, int32_t n_vocab, rlx_token *id)
{
    const rlx_gguf_value *v = rlx_gguf_find(g, key);
    if (!v)
        return;
    int64_t x;
    if (v->type == RLX_GGUF_TYPE_INT8 || v->type == RLX_GGUF_TYPE_INT16 ||
        v->type == RLX_GGUF_TYPE_INT32 || v->type == RLX_GGUF_TYPE_INT64)
        x = v->v.i64;
    else if (v->type == RLX_GGUF_TYPE_UINT8 || v->type == RLX_GGUF_TYPE_UINT16 ||
             v->type == RLX_GGUF_TYPE_UINT32 || v->type == RLX_GGUF_TYPE_UINT64)
        x = v->v.u64 > (uint64_t)INT32_MAX ? -1 : (int64_t)v->v.u64;
    else
        return;
    *id = (x >= 0 && x < n_vocab) ? (rlx_token)x : RLX_TOKEN_NULL;
}

static void read_bool(const rlx_gguf *g, const char *key, bool *out)
{
    const rlx_gguf_value *v = rlx_gguf_find(g, key);
    if (v && v->type == RLX_GGUF_TYPE_BOOL)
        *out = v->v.u64 != 0;
}

static rlx_status read_numbers(const rlx_gguf *g, const char *key, rlx_tokenizer *t, bool scores,
                               rlx_error **err)
{
    const rlx_gguf_value *arr = NULL;
    if (!rlx_gguf_find(g, key))
        return RLX_OK;
    rlx_status s = rlx_gguf_get_arr(g, key, RLX_GGUF_TYPE_COUNT, &arr, err);
    if (s != RLX_OK)
        return s;
    if (arr->v.arr.count != (uint64_t)t->n_vocab)
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s: %s has %llu entries for %d tokens",
                             rlx_gguf_path(g), key, (unsigned long long)arr->v.arr.count,
                             (int)t->n_vocab);
    for (int32_t i = 0; i < t->n_vocab; i++) {
        rlx_gguf_value v;
        s = rlx_gguf_array_get(g, arr, (uint64_t)i, &v, err);
        if (s != RLX_OK)
            return s;
        double x;
        switch (v.type) {
        case RLX_GGUF_TYPE_FLOAT32:
        case RLX_GGUF_TYPE_FLOAT64:
            x = v.v.f64;
            break;
        case RLX_GGUF_TYPE_INT8:
        case RLX_GGUF_TYPE_INT16:
        case RLX_GGUF_TYPE_INT32:
        case RLX_GGUF_TYPE_INT64:
            x = (double)v.v.i64;
            break;
        case RLX_GGUF_TYPE_UINT8:
        case RLX_GGUF_TYPE_UINT16:
        case RLX_GGUF_TYPE_UINT32:
        case RLX_GGUF_TYPE_UINT64:
            x = (double)v.v.u64;
            break;
        default:
            return rlx_error_set(err, RLX_ERR_TYPE, "%s: %s holds %s values, not numbers",
                                 rlx_gguf_path(g), key, rlx_gguf_type_name(v.type));
        }
        if (scores) {
            /* clamped: a hostile value must not overflow the conversion */
            t->tok[i].score = x > 3e38 ? 3e38f : x < -3e38 ? -3e38f : x == x ? (float)x : 0.0f;
        } else {
            t->tok[i].type = (x >= RLX_TOKEN_TYPE_NORMAL && x <= RLX_TOKEN_TYPE_BYTE)
                                 ? (uint8_t)x
                                 : RLX_TOKEN_TYPE_NORMAL;
        }
    }
    return RLX_OK;
}

static rlx_status read_merges(const rlx_gguf *g, rlx_tokenizer *t, rlx_error **err)
{
    const rlx_gguf_value *arr = NULL;
    rlx_status s = rlx_gguf_get_arr(g, "tokenizer.ggml.merges", RLX_GGUF_TYPE_STRING, &arr, err);
    if (s != RLX_OK)
        return s;
    if (arr->v.arr.count > INT32_MAX)
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s: too many merges", rlx_gguf_path(g));
    s = rlx_tok_reserve_merges(t, (size_t)arr->v.arr.count, err);
    if (s != RLX_OK)
        return s;
    for (uint64_t i = 0; i < arr->v.arr.count; i++) {
        rlx_gguf_value v;
        s = rlx_gguf_array_get(g, arr, i, &v, err);
        if (s != RLX_OK)
            return s;
        const char *p = v.v.str.ptr;
        size_t n = (size_t)v.v.str.len;
        /* "left right"; the search starts at 1 so that a left part that is
         * itself a space stays whole */
        const char *sp = n > 1 ? memchr(p + 1, ' ', n - 1) : NULL;
        if (!sp)
            continue;
        size_t ll = (size_t)(sp - p);
        rlx_tok_add_merge(t, p, ll, sp + 1, n - ll - 1, (int32_t)i);
    }
    return RLX_OK;
}

rlx_status rlx_tokenizer_from_gguf(const rlx_gguf *g, rlx_tokenizer **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!g || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_tokenizer_from_gguf: NULL argument");
    const char *path = rlx_gguf_path(g);
    rlx_gguf_str model;
    if (rlx_gguf_get_str(g, "tokenizer.ggml.model", &model, NULL) != RLX_OK)
        return rlx_error_set(err, RLX_ERR_NOT_FOUND,
                             "%s has no tokenizer (no tokenizer.ggml.model key)", path);
    rlx_tokenizer_kind kind;
    if (gstr_eq(model, "llama"))
        kind = RLX_TOKENIZER_SPM;
    else if (gstr_eq(model, "gpt2"))
        kind = RLX_TOKENIZER_BPE;
    else if (gstr_eq(model, "gemma4"))
        kind = RLX_TOKENIZER_CHAR_BPE;
    else
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "%s: tokenizer model '%.*s' is not supported (llama, gpt2 and gemma4 "
                             "are)",
                             path, (int)(model.len > 64 ? 64 : model.len), model.ptr);

    const rlx_gguf_value *toks = NULL;
    rlx_status s = rlx_gguf_get_arr(g, "tokenizer.ggml.tokens", RLX_GGUF_TYPE_STRING, &toks, err);
    if (s != RLX_OK)
        return s;
    if (toks->v.arr.count == 0 || toks->v.arr.count > INT32_MAX / 2)
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %llu entries",
                             path, (unsigned long long)toks->v.arr.count);
    int32_t n_vocab = (int32_t)toks->v.arr.count;
    rlx_tokenizer *t = rlx_tok_alloc(n_vocab);
    if (!t)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for %d tokens", (int)n_vocab);
    t->kind = kind;
    for (int32_t i = 0; i < n_vocab; i++) {
        rlx_gguf_value v;
        s = rlx_gguf_array_get(g, toks, (uint64_t)i, &v, err);
        if (s == RLX_OK)
            s = rlx_tok_set_text(t, i, v.v.str.ptr, (size_t)v.v.str.len, err);
        if (s != RLX_OK)
            goto fail;
    }
    if ((s = read_numbers(g, "tokenizer.ggml.scores", t, true, err)) != RLX_OK ||
        (s = read_numbers(g, "tokenizer.ggml.token_type", t, false, err)) != RLX_OK)
        goto fail;

    char pre[64] = "default";
    if (rlx_gguf_find(g, "tokenizer.ggml.pre"))
        rlx_gguf_get_string(g, "tokenizer.ggml.pre", pre, sizeof pre, NULL);

    bool space_prefix = false;
    switch (kind) {
    case RLX_TOKENIZER_SPM:
        t->bos = 1 < n_vocab ? 1 : RLX_TOKEN_NULL;
        t->eos = 2 < n_vocab ? 2 : RLX_TOKEN_NULL;
        t->unk = 0;
        t->add_bos = true;
        t->byte_fallback = true;
        t->decode_spaces = true;
        space_prefix = true;
        snprintf(t->pre_name, sizeof t->pre_name, "%s", pre);
        break;
    case RLX_TOKENIZER_BPE:
        t->byte_encode = true;
        if ((s = rlx_tok_set_pre(t, pre, err)) != RLX_OK) {
            rlx_error_prefix(err, "%s: ", path);
            goto fail;
        }
        break;
    case RLX_TOKENIZER_CHAR_BPE:
        /* the reference ignores the file's pre name for this model */
        if ((s = rlx_tok_set_pre(t, "gemma4", err)) != RLX_OK)
            goto fail;
        t->byte_fallback = true;
        t->newline_whole = true;
        t->decode_spaces = true;
        break;
    }
    read_bool(g, "tokenizer.ggml.add_space_prefix", &space_prefix);
    read_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos);
    read_bool(g, "tokenizer.ggml.add_eos_token", &t->add_eos);
    read_id(g, "tokenizer.ggml.bos_token_id", n_vocab, &t->bos);
    read_id(g, "tokenizer.ggml.eos_token_id", n_vocab, &t->eos);
    read_id(g, "tokenizer.ggml.eot_token_id", n_vocab, &t->eot);
    read_id(g, "tokenizer.ggml.eom_token_id", n_vocab, &t->eom);
    read_id(g, "tokenizer.ggml.unknown_token_id", n_vocab, &t->unk);
    read_id(g, "tokenizer.ggml.padding_token_id", n_vocab, &t->pad);

    if (kind != RLX_TOKENIZER_BPE) {
        t->space_prefix = space_prefix;
        t->strip_leading = space_prefix;
        if ((space_prefix &&
             (s = rlx_tok_add_norm(t, TOK_NORM_PREPEND, " ", 1, NULL, 0, err)) != RLX_OK) ||
            (s = rlx_tok_add_norm(t, TOK_NORM_REPLACE, " ", 1, "\xE2\x96\x81", 3, err)) != RLX_OK)
            goto fail;
    }

    if ((s = rlx_tok_finish(t, err)) != RLX_OK)
        goto fail;
    if (kind != RLX_TOKENIZER_SPM) {
        if (!rlx_gguf_find(g, "tokenizer.ggml.merges")) {
            s = rlx_error_set(err, RLX_ERR_FORMAT, "%s: a BPE tokenizer without merges", path);
            goto fail;
        }
        if ((s = read_merges(g, t, err)) != RLX_OK)
            goto fail;
    }
    *out = t;
    return RLX_OK;
fail:
    rlx_tokenizer_free(t);
    return s;
}

rlx_status rlx_tokenizer_load(const char *path, rlx_tokenizer **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!path || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_tokenizer_load: NULL argument");
    /* a GGUF file by its magic, whatever its name */
    char magic[4] = {0};
    FILE *f = fopen(path, "rb");
    bool is_gguf = false;
    if (f) {
        is_gguf = fread(magic, 1, 4, f) == 4 && memcmp(magic, "GGUF", 4) == 0;
        fclose(f);
    }
    size_t n = strlen(path);
    if (is_gguf || (n >= 5 && strcmp(path + n - 5, ".gguf") == 0)) {
        rlx_gguf *g = NULL;
        rlx_status s = rlx_gguf_open(path, &g, err);
        if (s != RLX_OK)
            return s;
        s = rlx_tokenizer_from_gguf(g, out, err);
        rlx_gguf_close(g);
        return s;
    }
    return rlx_tokenizer_from_hf_json(path, out, err);
}
