/* Tokenizer from a Hugging Face tokenizer.json (BPE models).
 *
 * What is read: model (type BPE: vocab, merges as "a b" strings or
 * ["a", "b"] pairs, byte_fallback, ignore_merges, unk_token), added_tokens
 * (special ones become control tokens, the others user-defined; lstrip /
 * rstrip kept), normalizer (NFC, Prepend, Replace with a string pattern, and
 * Sequence of those), pre_tokenizer (Split with a regex or string pattern
 * and any behavior, ByteLevel (with or without the GPT-2 regex and the
 * prefix space), Digits, Metaspace, Sequence), decoder (to
 * tell byte-level from "▁" decoding and whether a leading space is
 * stripped) and post_processor (TemplateProcessing: BOS / EOS). Anything
 * else is RLX_ERR_UNSUPPORTED with its name in the message, never ignored
 * silently. */
#include "engine/text/tokenizer-internal.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *jstr(json_object *o, const char *key)
{
    json_object *v;
    if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
        return NULL;
    return json_object_get_string(v);
}

static json_object *jget(json_object *o, const char *key)
{
    json_object *v;
    if (!o || !json_object_object_get_ex(o, key, &v))
        return NULL;
    return v;
}

static bool jbool(json_object *o, const char *key, bool dflt)
{
    json_object *v = jget(o, key);
    if (!v || !json_object_is_type(v, json_type_boolean))
        return dflt;
    return json_object_get_boolean(v);
}

typedef struct hf_flags {
    bool byte_level;    /* ByteLevel somewhere in pre_tokenizer or decoder */
    bool prefix_space;  /* a "▁" / " " is put before each fragment */
    bool strip_leading; /* the decoder drops one leading space */
    bool decode_spaces; /* the decoder turns "▁" into " " */
} hf_flags;

static rlx_status add_normalizer(rlx_tokenizer *t, json_object *n, hf_flags *f, rlx_error **err)
{
    if (!n || json_object_is_type(n, json_type_null))
        return RLX_OK;
    const char *type = jstr(n, "type");
    if (!type)
        return rlx_error_set(err, RLX_ERR_FORMAT, "normalizer without a type");
    if (!strcmp(type, "Sequence")) {
        json_object *list = jget(n, "normalizers");
        size_t k = list ? json_object_array_length(list) : 0;
        for (size_t i = 0; i < k; i++) {
            rlx_status s = add_normalizer(t, json_object_array_get_idx(list, i), f, err);
            if (s != RLX_OK)
                return s;
        }
        return RLX_OK;
    }
    if (!strcmp(type, "NFC"))
        return rlx_tok_add_norm(t, TOK_NORM_NFC, NULL, 0, NULL, 0, err);
    if (!strcmp(type, "Prepend")) {
        const char *p = jstr(n, "prepend");
        if (!p)
            return rlx_error_set(err, RLX_ERR_FORMAT, "Prepend normalizer without 'prepend'");
        f->prefix_space = true;
        return rlx_tok_add_norm(t, TOK_NORM_PREPEND, p, strlen(p), NULL, 0, err);
    }
    if (!strcmp(type, "Replace")) {
        const char *pat = jstr(jget(n, "pattern"), "String");
        const char *content = jstr(n, "content");
        if (!pat || !content)
            return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                                 "Replace normalizer: only string patterns are supported");
        return rlx_tok_add_norm(t, TOK_NORM_REPLACE, pat, strlen(pat), content, strlen(content),
                                err);
    }
    return rlx_error_set(err, RLX_ERR_UNSUPPORTED, "normalizer '%s' is not supported", type);
}

static rlx_status add_pre(rlx_tokenizer *t, json_object *p, hf_flags *f, rlx_error **err)
{
    if (!p || json_object_is_type(p, json_type_null))
        return RLX_OK;
    const char *type = jstr(p, "type");
    if (!type)
        return rlx_error_set(err, RLX_ERR_FORMAT, "pre_tokenizer without a type");
    if (!strcmp(type, "Sequence")) {
        json_object *list = jget(p, "pretokenizers");
        size_t k = list ? json_object_array_length(list) : 0;
        for (size_t i = 0; i < k; i++) {
            rlx_status s = add_pre(t, json_object_array_get_idx(list, i), f, err);
            if (s != RLX_OK)
                return s;
        }
        return RLX_OK;
    }
    if (!strcmp(type, "ByteLevel")) {
        f->byte_level = true;
        if (jbool(p, "add_prefix_space", false)) {
            rlx_status s = rlx_tok_add_norm(t, TOK_NORM_PREPEND, " ", 1, NULL, 0, err);
            if (s != RLX_OK)
                return s;
            t->norm[t->n_norm - 1].unless_space = true;
            f->prefix_space = true;
        }
        if (jbool(p, "use_regex", true))
            return rlx_tok_add_split(t, rlx_tok_gpt2_regex, strlen(rlx_tok_gpt2_regex),
                                     TOK_SPLIT_ISOLATED, false, err);
        return RLX_OK;
    }
    if (!strcmp(type, "Split")) {
        json_object *pat = jget(p, "pattern");
        const char *re = jstr(pat, "Regex");
        const char *lit = jstr(pat, "String");
        const char *beh = jstr(p, "behavior");
        tok_split_behavior b = TOK_SPLIT_ISOLATED;
        if (!beh || !strcmp(beh, "Isolated") || !strcmp(beh, "Contiguous"))
            b = TOK_SPLIT_ISOLATED;
        else if (!strcmp(beh, "Removed"))
            b = TOK_SPLIT_REMOVED;
        else if (!strcmp(beh, "MergedWithPrevious"))
            b = TOK_SPLIT_MERGED_PREV;
        else if (!strcmp(beh, "MergedWithNext"))
            b = TOK_SPLIT_MERGED_NEXT;
        else
            return rlx_error_set(err, RLX_ERR_UNSUPPORTED, "Split behavior '%s'", beh);
        bool invert = jbool(p, "invert", false);
        if (re)
            return rlx_tok_add_split(t, re, strlen(re), b, invert, err);
        if (lit) {
            /* \Q..\E quotes the string; a literal "\E" inside would end it */
            if (strstr(lit, "\\E"))
                return rlx_error_set(err, RLX_ERR_UNSUPPORTED, "Split on a string holding \\E");
            size_t n = strlen(lit);
            char *q = malloc(n + 5);
            if (!q)
                return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
            snprintf(q, n + 5, "\\Q%s\\E", lit);
            rlx_status s = rlx_tok_add_split(t, q, strlen(q), b, invert, err);
            free(q);
            return s;
        }
        return rlx_error_set(err, RLX_ERR_FORMAT, "Split pre-tokenizer without a pattern");
    }
    if (!strcmp(type, "Digits")) {
        const char *re = jbool(p, "individual_digits", false) ? "\\p{N}" : "\\p{N}+";
        return rlx_tok_add_split(t, re, strlen(re), TOK_SPLIT_ISOLATED, false, err);
    }
    if (!strcmp(type, "Metaspace")) {
        const char *rep = jstr(p, "replacement");
        if (!rep)
            rep = "\xE2\x96\x81";
        const char *scheme = jstr(p, "prepend_scheme");
        bool prepend = scheme ? strcmp(scheme, "never") != 0 : jbool(p, "add_prefix_space", true);
        rlx_status s = rlx_tok_add_norm(t, TOK_NORM_REPLACE, " ", 1, rep, strlen(rep), err);
        if (s == RLX_OK && prepend) {
            f->prefix_space = true;
            s = rlx_tok_add_norm(t, TOK_NORM_PREPEND, rep, strlen(rep), NULL, 0, err);
            /* "first": only where the text starts, not after special tokens */
            if (s == RLX_OK && scheme && !strcmp(scheme, "first"))
                t->norm[t->n_norm - 1].first_only = true;
        }
        if (s == RLX_OK && jbool(p, "split", true)) {
            char q[64];
            snprintf(q, sizeof q, "\\Q%s\\E", rep);
            s = rlx_tok_add_split(t, q, strlen(q), TOK_SPLIT_MERGED_NEXT, false, err);
        }
        f->decode_spaces = true;
        return s;
    }
    return rlx_error_set(err, RLX_ERR_UNSUPPORTED, "pre_tokenizer '%s' is not supported", type);
}

static void scan_decoder(json_object *d, hf_flags *f)
{
    if (!d || json_object_is_type(d, json_type_null))
        return;
    const char *type = jstr(d, "type");
    if (!type)
        return;
    if (!strcmp(type, "Sequence")) {
        json_object *list = jget(d, "decoders");
        size_t k = list ? json_object_array_length(list) : 0;
        for (size_t i = 0; i < k; i++)
            scan_decoder(json_object_array_get_idx(list, i), f);
    } else if (!strcmp(type, "ByteLevel")) {
        f->byte_level = true;
    } else if (!strcmp(type, "Replace") || !strcmp(type, "Metaspace")) {
        f->decode_spaces = true;
        if (!strcmp(type, "Metaspace") && f->prefix_space)
            f->strip_leading = true;
    } else if (!strcmp(type, "Strip")) {
        json_object *v = jget(d, "start");
        if (v && json_object_get_int(v) > 0)
            f->strip_leading = true;
    }
}

/* BOS / EOS from a TemplateProcessing "single" template. */
static void scan_post(rlx_tokenizer *t, json_object *p, bool *found)
{
    if (!p || json_object_is_type(p, json_type_null))
        return;
    const char *type = jstr(p, "type");
    if (!type)
        return;
    if (!strcmp(type, "Sequence")) {
        json_object *list = jget(p, "processors");
        size_t k = list ? json_object_array_length(list) : 0;
        for (size_t i = 0; i < k; i++)
            scan_post(t, json_object_array_get_idx(list, i), found);
        return;
    }
    if (strcmp(type, "TemplateProcessing") != 0)
        return;
    json_object *single = jget(p, "single");
    size_t k = single ? json_object_array_length(single) : 0;
    *found = true;
    t->add_bos = t->add_eos = false;
    for (size_t i = 0; i < k; i++) {
        json_object *st = jget(json_object_array_get_idx(single, i), "SpecialToken");
        if (!st)
            continue;
        const char *name = jstr(st, "id");
        rlx_token id = name ? rlx_tok_find_str(t, name) : RLX_TOKEN_NULL;
        if (id == RLX_TOKEN_NULL)
            continue;
        if (i == 0) {
            t->add_bos = true;
            t->bos = id;
        } else if (i + 1 == k) {
            t->add_eos = true;
            t->eos = id;
        }
    }
}

static const char *config_token(json_object *cfg, const char *key)
{
    json_object *v = jget(cfg, key);
    if (!v)
        return NULL;
    if (json_object_is_type(v, json_type_string))
        return json_object_get_string(v);
    return jstr(v, "content");
}

static rlx_status load_vocab(rlx_tokenizer **tp, json_object *root, json_object *model,
                             const char *path, rlx_error **err)
{
    json_object *vocab = jget(model, "vocab");
    json_object *added = jget(root, "added_tokens");
    if (!vocab || !json_object_is_type(vocab, json_type_object))
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s: model.vocab is not an object", path);
    int64_t max_id = -1;
    json_object_object_foreach(vocab, k0, v0)
    {
        (void)k0;
        int64_t id = json_object_get_int64(v0);
        if (id < 0 || id > INT32_MAX / 2)
            return rlx_error_set(err, RLX_ERR_FORMAT, "%s: vocab id %lld out of range", path,
                                 (long long)id);
        if (id > max_id)
            max_id = id;
    }
    size_t n_added =
        added && json_object_is_type(added, json_type_array) ? json_object_array_length(added) : 0;
    for (size_t i = 0; i < n_added; i++) {
        int64_t id = json_object_get_int64(jget(json_object_array_get_idx(added, i), "id"));
        if (id < 0 || id > INT32_MAX / 2)
            return rlx_error_set(err, RLX_ERR_FORMAT, "%s: added token id %lld out of range", path,
                                 (long long)id);
        if (id > max_id)
            max_id = id;
    }
    if (max_id < 0)
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s: empty vocabulary", path);
    rlx_tokenizer *t = rlx_tok_alloc((int32_t)(max_id + 1));
    if (!t)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    *tp = t;
    for (int32_t i = 0; i < t->n_vocab; i++)
        t->tok[i].type = RLX_TOKEN_TYPE_UNUSED; /* ids nothing names */
    json_object_object_foreach(vocab, k, v)
    {
        int32_t id = (int32_t)json_object_get_int64(v);
        rlx_status s = rlx_tok_set_text(t, id, k, strlen(k), err);
        if (s != RLX_OK)
            return s;
        t->tok[id].type = RLX_TOKEN_TYPE_NORMAL;
    }
    for (size_t i = 0; i < n_added; i++) {
        json_object *a = json_object_array_get_idx(added, i);
        const char *content = jstr(a, "content");
        if (!content)
            return rlx_error_set(err, RLX_ERR_FORMAT, "%s: added token without content", path);
        int32_t id = (int32_t)json_object_get_int64(jget(a, "id"));
        rlx_status s = rlx_tok_set_text(t, id, content, strlen(content), err);
        if (s != RLX_OK)
            return s;
        t->tok[id].type =
            jbool(a, "special", false) ? RLX_TOKEN_TYPE_CONTROL : RLX_TOKEN_TYPE_USER_DEFINED;
        t->tok[id].flags = (uint8_t)((jbool(a, "lstrip", false) ? TOK_LSTRIP : 0) |
                                     (jbool(a, "rstrip", false) ? TOK_RSTRIP : 0));
    }
    return RLX_OK;
}

static rlx_status load_merges(rlx_tokenizer *t, json_object *model, const char *path,
                              rlx_error **err)
{
    json_object *merges = jget(model, "merges");
    size_t n = merges && json_object_is_type(merges, json_type_array)
                   ? json_object_array_length(merges)
                   : 0;
    rlx_status s = rlx_tok_reserve_merges(t, n, err);
    if (s != RLX_OK)
        return s;
    for (size_t i = 0; i < n; i++) {
        json_object *m = json_object_array_get_idx(merges, i);
        if (json_object_is_type(m, json_type_string)) {
            const char *p = json_object_get_string(m);
            size_t len = (size_t)json_object_get_string_len(m);
            const char *sp = len > 1 ? memchr(p + 1, ' ', len - 1) : NULL;
            if (!sp)
                return rlx_error_set(err, RLX_ERR_FORMAT, "%s: merge %zu has no space", path, i);
            rlx_tok_add_merge(t, p, (size_t)(sp - p), sp + 1, len - (size_t)(sp - p) - 1,
                              (int32_t)i);
        } else if (json_object_is_type(m, json_type_array) && json_object_array_length(m) == 2) {
            json_object *a = json_object_array_get_idx(m, 0), *b = json_object_array_get_idx(m, 1);
            if (!json_object_is_type(a, json_type_string) ||
                !json_object_is_type(b, json_type_string))
                return rlx_error_set(err, RLX_ERR_FORMAT, "%s: merge %zu is not two strings", path,
                                     i);
            rlx_tok_add_merge(t, json_object_get_string(a), (size_t)json_object_get_string_len(a),
                              json_object_get_string(b), (size_t)json_object_get_string_len(b),
                              (int32_t)i);
        } else {
            return rlx_error_set(err, RLX_ERR_FORMAT, "%s: merge %zu is malformed", path, i);
        }
    }
    return RLX_OK;
}

static json_object *read_json(const char *path, rlx_error **err)
{
    json_object *root = json_object_from_file(path);
    if (!root) {
        /* json-c's message ends with a newline; errors are one line */
        char why[256];
        const char *e = json_util_get_last_err();
        snprintf(why, sizeof why, "%s", e ? e : "unknown error");
        for (char *p = why; *p; p++)
            if (*p == '\n' || *p == '\r')
                *p = ' ';
        size_t n = strlen(why);
        while (n > 0 && why[n - 1] == ' ')
            why[--n] = 0;
        rlx_error_set(err, RLX_ERR_FORMAT, "%s: not a tokenizer.json (%s)", path, why);
    }
    return root;
}

rlx_status rlx_tokenizer_from_hf_json(const char *path, rlx_tokenizer **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!path || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_tokenizer_from_hf_json: NULL argument");
    char file[4096], dir[4096];
    struct stat sb;
    if (stat(path, &sb) != 0)
        return rlx_error_set(err, RLX_ERR_IO, "%s: no such file or folder", path);
    if (S_ISDIR(sb.st_mode)) {
        snprintf(dir, sizeof dir, "%s", path);
        snprintf(file, sizeof file, "%s/tokenizer.json", path);
    } else {
        snprintf(file, sizeof file, "%s", path);
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = 0;
        else
            snprintf(dir, sizeof dir, ".");
    }
    if (stat(file, &sb) != 0)
        return rlx_error_set(err, RLX_ERR_NOT_FOUND, "%s: no tokenizer.json", path);

    json_object *root = read_json(file, err);
    if (!root)
        return RLX_ERR_FORMAT;
    rlx_tokenizer *t = NULL;
    json_object *cfg = NULL;
    rlx_status s = RLX_OK;
    json_object *model = jget(root, "model");
    const char *mtype = jstr(model, "type");
    if (!model || (mtype && strcmp(mtype, "BPE") != 0)) {
        s = rlx_error_set(err, RLX_ERR_UNSUPPORTED, "%s: tokenizer model '%s' is not supported",
                          file, mtype ? mtype : "(none)");
        goto done;
    }
    if ((s = load_vocab(&t, root, model, file, err)) != RLX_OK)
        goto done;

    hf_flags f = {0};
    if ((s = add_normalizer(t, jget(root, "normalizer"), &f, err)) != RLX_OK ||
        (s = add_pre(t, jget(root, "pre_tokenizer"), &f, err)) != RLX_OK) {
        rlx_error_prefix(err, "%s: ", file);
        goto done;
    }
    scan_decoder(jget(root, "decoder"), &f);
    t->kind = f.byte_level ? RLX_TOKENIZER_BPE : RLX_TOKENIZER_CHAR_BPE;
    t->byte_encode = f.byte_level;
    t->byte_fallback = jbool(model, "byte_fallback", false);
    t->ignore_merges = jbool(model, "ignore_merges", false);
    t->space_prefix = f.prefix_space;
    t->decode_spaces = !f.byte_level && f.decode_spaces;
    t->strip_leading = f.strip_leading;
    snprintf(t->pre_name, sizeof t->pre_name, "hf");

    if ((s = rlx_tok_finish(t, err)) != RLX_OK || (s = load_merges(t, model, file, err)) != RLX_OK)
        goto done;
    const char *unk = jstr(model, "unk_token");
    if (unk)
        t->unk = rlx_tok_find_str(t, unk);

    bool found = false;
    scan_post(t, jget(root, "post_processor"), &found);

    char cfg_path[4200];
    snprintf(cfg_path, sizeof cfg_path, "%s/tokenizer_config.json", dir);
    if (stat(cfg_path, &sb) == 0 && (cfg = json_object_from_file(cfg_path)) != NULL) {
        const char *names[4] = {config_token(cfg, "bos_token"), config_token(cfg, "eos_token"),
                                config_token(cfg, "pad_token"), config_token(cfg, "unk_token")};
        rlx_token *slots[4] = {&t->bos, &t->eos, &t->pad, &t->unk};
        for (int i = 0; i < 4; i++) {
            rlx_token id = names[i] ? rlx_tok_find_str(t, names[i]) : RLX_TOKEN_NULL;
            if (id != RLX_TOKEN_NULL)
                *slots[i] = id;
        }
        if (!found) {
            t->add_bos = jbool(cfg, "add_bos_token", false);
            t->add_eos = jbool(cfg, "add_eos_token", false);
        }
    }
    /* the EOG set depends on eos: finish again now that it is known */
    s = rlx_tok_finish(t, err);
done:
    if (cfg)
        json_object_put(cfg);
    json_object_put(root);
    if (s != RLX_OK) {
        rlx_tokenizer_free(t);
        return s;
    }
    *out = t;
    return RLX_OK;
}
