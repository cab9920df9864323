/* Tokenizer core: vocabulary tables, special-token partition, the
 * normalizer and pre-tokenizer programs, both merge algorithms, decoding and
 * the streaming detokenizer. The loaders (tokenizer-gguf.c,
 * tokenizer-hf.c) only fill the tables.
 *
 * Both merge algorithms keep the word as a doubly linked list of symbols,
 * each a contiguous span of the word, and a binary heap of candidate pairs.
 * A popped pair whose symbols changed since it was pushed is stale and
 * skipped, so every merge costs O(log n) and a word of n characters
 * O(n log n), however long it is. */
#include "engine/text/tokenizer-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

/* ---- small helpers ------------------------------------------------------ */

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ull;
    }
    /* FNV's low bits are weak on short keys: mix before masking */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

static uint64_t hash_u64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    return k ^ (k >> 33);
}

/* Length of the UTF-8 sequence a lead byte announces; 1 for a byte that
 * cannot lead one (it then stands alone). */
static size_t utf8_len(uint8_t b)
{
    if (b < 0x80)
        return 1;
    if (b >= 0xC2 && b <= 0xDF)
        return 2;
    if (b >= 0xE0 && b <= 0xEF)
        return 3;
    if (b >= 0xF0 && b <= 0xF4)
        return 4;
    return 1;
}

/* Length of the character at s (at most n), cut short where it is invalid. */
static size_t utf8_char(const char *s, size_t n)
{
    size_t l = utf8_len((uint8_t)s[0]);
    if (l > n)
        return 1;
    for (size_t i = 1; i < l; i++)
        if (((uint8_t)s[i] & 0xC0) != 0x80)
            return 1;
    return l;
}

static size_t utf8_put(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* GPT-2's table: printable Latin-1 bytes map to themselves, the other 68 to
 * U+0100.. in byte order, so every byte is a visible character. */
uint32_t rlx_tok_byte_to_cp(uint8_t b)
{
    if (b <= 32)
        return 256u + b;
    if (b >= 127 && b <= 160)
        return 256u + 33u + (b - 127u);
    if (b == 173)
        return 256u + 33u + 34u;
    return b;
}

int rlx_tok_cp_to_byte(uint32_t cp)
{
    if (cp < 256)
        return (cp <= 32 || (cp >= 127 && cp <= 160) || cp == 173) ? -1 : (int)cp;
    if (cp < 256 + 33)
        return (int)(cp - 256);
    if (cp < 256 + 33 + 34)
        return (int)(cp - 256 - 33 + 127);
    if (cp == 256 + 33 + 34)
        return 173;
    return -1;
}

typedef struct tok_vec {
    rlx_token *v;
    size_t n, cap;
} tok_vec;

static bool vec_push(tok_vec *o, rlx_token id)
{
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        rlx_token *v = realloc(o->v, cap * sizeof *v);
        if (!v)
            return false;
        o->v = v;
        o->cap = cap;
    }
    o->v[o->n++] = id;
    return true;
}

typedef struct byte_buf {
    char *p;
    size_t n, cap;
} byte_buf;

static bool buf_reserve(byte_buf *b, size_t more)
{
    if (b->n + more <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + more)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p)
        return false;
    b->p = p;
    b->cap = cap;
    return true;
}

static bool buf_add(byte_buf *b, const char *s, size_t n)
{
    if (!buf_reserve(b, n + 1))
        return false;
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return true;
}

static const char *tok_str(const rlx_tokenizer *t, int32_t id)
{
    return t->pool + t->tok[id].off;
}

/* ---- vocabulary tables ---------------------------------------------------- */

rlx_tokenizer *rlx_tok_alloc(int32_t n_vocab)
{
    rlx_tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->tok = calloc(n_vocab > 0 ? (size_t)n_vocab : 1, sizeof *t->tok);
    if (!t->tok) {
        free(t);
        return NULL;
    }
    t->n_vocab = n_vocab;
    for (int32_t i = 0; i < n_vocab; i++) {
        t->tok[i].type = RLX_TOKEN_TYPE_NORMAL;
        t->tok[i].byte = -1;
    }
    for (int i = 0; i < 256; i++)
        t->byte_tok[i] = RLX_TOKEN_NULL;
    t->bos = t->eos = t->eot = t->eom = t->pad = t->unk = RLX_TOKEN_NULL;
    snprintf(t->pre_name, sizeof t->pre_name, "default");
    return t;
}

rlx_status rlx_tok_set_text(rlx_tokenizer *t, int32_t id, const char *s, size_t len,
                            rlx_error **err)
{
    if (id < 0 || id >= t->n_vocab)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "token id %d is outside the vocabulary",
                             (int)id);
    if (len > UINT32_MAX / 2 || t->pool_len + len + 1 > UINT32_MAX)
        return rlx_error_set(err, RLX_ERR_FORMAT, "the vocabulary's text is too large");
    if (t->pool_len + len + 1 > t->pool_cap) {
        size_t cap = t->pool_cap ? t->pool_cap : 1 << 16;
        while (cap < t->pool_len + len + 1)
            cap *= 2;
        char *p = realloc(t->pool, cap);
        if (!p)
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for the vocabulary");
        t->pool = p;
        t->pool_cap = cap;
    }
    if (len)
        memcpy(t->pool + t->pool_len, s, len);
    t->pool[t->pool_len + len] = '\0';
    t->tok[id].off = (uint32_t)t->pool_len;
    t->tok[id].len = (uint32_t)len;
    t->pool_len += len + 1;
    return RLX_OK;
}

static rlx_token find_span(const rlx_tokenizer *t, const char *s, size_t n)
{
    if (!t->slots || n == 0)
        return RLX_TOKEN_NULL;
    uint64_t h = hash_bytes(s, n), i = h & t->slot_mask;
    uint32_t tag = (uint32_t)(h >> 32);
    for (;;) {
        const tok_slot *sl = &t->slots[i];
        if (!sl->id1)
            return RLX_TOKEN_NULL;
        if (sl->tag == tag) {
            const tok_entry *e = &t->tok[sl->id1 - 1];
            if (e->len == n && memcmp(t->pool + e->off, s, n) == 0)
                return (rlx_token)(sl->id1 - 1);
        }
        i = (i + 1) & t->slot_mask;
    }
}

rlx_token rlx_tok_find_str(const rlx_tokenizer *t, const char *s)
{
    return find_span(t, s, strlen(s));
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

static int cmp_spec_ctx_len(const rlx_tokenizer *t, rlx_token a, rlx_token b)
{
    uint8_t fa = (uint8_t)tok_str(t, a)[0], fb = (uint8_t)tok_str(t, b)[0];
    if (fa != fb)
        return fa < fb ? -1 : 1;
    if (t->tok[a].len != t->tok[b].len)
        return t->tok[a].len > t->tok[b].len ? -1 : 1;
    return a < b ? -1 : a > b;
}

/* Specials are few (hundreds), so a plain insertion sort is enough and
 * needs no context-taking qsort. */
static void sort_specials(const rlx_tokenizer *t, rlx_token *v, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        rlx_token x = v[i];
        size_t j = i;
        while (j > 0 && cmp_spec_ctx_len(t, v[j - 1], x) > 0) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
}

static const char *const eog_names[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<turn|>",    "<|eom_id|>", "<EOT>",   "<|return|>",    "<|call|>",
};

rlx_status rlx_tok_finish(rlx_tokenizer *t, rlx_error **err)
{
    uint64_t cap = 16;
    while (cap < (uint64_t)t->n_vocab * 2)
        cap *= 2;
    free(t->slots);
    t->slots = calloc(cap, sizeof *t->slots);
    if (!t->slots)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for the vocabulary index");
    t->slot_mask = cap - 1;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const tok_entry *e = &t->tok[id];
        if (e->len == 0)
            continue;
        const char *s = t->pool + e->off;
        uint64_t h = hash_bytes(s, e->len), i = h & t->slot_mask;
        uint32_t tag = (uint32_t)(h >> 32);
        for (;;) {
            const tok_slot *sl = &t->slots[i];
            if (!sl->id1)
                break;
            const tok_entry *o = &t->tok[sl->id1 - 1];
            if (sl->tag == tag && o->len == e->len && memcmp(t->pool + o->off, s, e->len) == 0)
                break; /* same text: the later id wins, as in the reference */
            i = (i + 1) & t->slot_mask;
        }
        t->slots[i].id1 = (uint32_t)id + 1;
        t->slots[i].tag = tag;
    }

    /* byte tokens */
    for (int32_t id = 0; id < t->n_vocab; id++) {
        tok_entry *e = &t->tok[id];
        const char *s = t->pool + e->off;
        if (e->len == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && s[5] == '>' &&
            hexval(s[3]) >= 0 && hexval(s[4]) >= 0 &&
            (e->type == RLX_TOKEN_TYPE_BYTE ||
             (t->kind != RLX_TOKENIZER_BPE && e->type == RLX_TOKEN_TYPE_NORMAL))) {
            int b = hexval(s[3]) * 16 + hexval(s[4]);
            e->type = RLX_TOKEN_TYPE_BYTE;
            e->byte = (int16_t)b;
            if (t->byte_tok[b] == RLX_TOKEN_NULL)
                t->byte_tok[b] = id;
        }
    }
    if (t->kind == RLX_TOKENIZER_BPE) {
        for (int b = 0; b < 256; b++) {
            char u[4];
            size_t n = utf8_put(u, rlx_tok_byte_to_cp((uint8_t)b));
            t->byte_tok[b] = find_span(t, u, n);
        }
    }

    /* tokens recognised inside text */
    free(t->spec);
    t->n_spec = 0;
    t->spec = malloc(sizeof *t->spec * (size_t)(t->n_vocab > 0 ? t->n_vocab : 1));
    if (!t->spec)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for special tokens");
    for (int32_t id = 0; id < t->n_vocab; id++) {
        uint8_t ty = t->tok[id].type;
        if (t->tok[id].len > 0 && (ty == RLX_TOKEN_TYPE_CONTROL || ty == RLX_TOKEN_TYPE_UNKNOWN ||
                                   ty == RLX_TOKEN_TYPE_USER_DEFINED))
            t->spec[t->n_spec++] = id;
    }
    sort_specials(t, t->spec, t->n_spec);
    memset(t->spec_first, 0, sizeof t->spec_first);
    for (size_t i = 0; i < t->n_spec; i++)
        t->spec_first[(uint8_t)tok_str(t, t->spec[i])[0] + 1]++;
    for (int b = 0; b < 256; b++)
        t->spec_first[b + 1] += t->spec_first[b];

    /* end-of-generation set */
    if (t->eot == RLX_TOKEN_NULL) {
        static const char *const eot_names[] = {"<|eot_id|>", "<|im_end|>", "<end_of_turn>",
                                                "<|end|>",    "<turn|>",    "<EOT>"};
        for (size_t i = 0; i < sizeof eot_names / sizeof eot_names[0]; i++) {
            rlx_token id = rlx_tok_find_str(t, eot_names[i]);
            if (id != RLX_TOKEN_NULL && t->tok[id].type == RLX_TOKEN_TYPE_CONTROL) {
                t->eot = id;
                break;
            }
        }
    }
    free(t->eog);
    t->n_eog = 0;
    t->eog = malloc(sizeof *t->eog * (3 + sizeof eog_names / sizeof eog_names[0]));
    if (!t->eog)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    rlx_token fixed[3] = {t->eos, t->eot, t->eom};
    for (int i = 0; i < 3; i++)
        if (fixed[i] != RLX_TOKEN_NULL)
            t->eog[t->n_eog++] = fixed[i];
    for (size_t i = 0; i < sizeof eog_names / sizeof eog_names[0]; i++) {
        rlx_token id = rlx_tok_find_str(t, eog_names[i]);
        if (id != RLX_TOKEN_NULL && (t->tok[id].type == RLX_TOKEN_TYPE_CONTROL ||
                                     t->tok[id].type == RLX_TOKEN_TYPE_USER_DEFINED))
            t->eog[t->n_eog++] = id;
    }
    return RLX_OK;
}

rlx_status rlx_tok_reserve_merges(rlx_tokenizer *t, size_t n, rlx_error **err)
{
    uint64_t cap = 16;
    while (cap < (uint64_t)n * 2)
        cap *= 2;
    tok_merge *m = malloc(cap * sizeof *m);
    if (!m)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for %zu merges", n);
    for (uint64_t i = 0; i < cap; i++) {
        m[i].key = 0;
        m[i].rank = -1;
        m[i].result = -1;
    }
    free(t->merges);
    t->merges = m;
    t->merge_mask = cap - 1;
    t->n_merges = 0;
    return RLX_OK;
}

static const tok_merge *find_merge(const rlx_tokenizer *t, rlx_token l, rlx_token r)
{
    if (!t->merges)
        return NULL;
    uint64_t key = ((uint64_t)(uint32_t)l << 32) | (uint32_t)r;
    uint64_t i = hash_u64(key) & t->merge_mask;
    for (;;) {
        const tok_merge *m = &t->merges[i];
        if (m->rank < 0)
            return NULL;
        if (m->key == key)
            return m;
        i = (i + 1) & t->merge_mask;
    }
}

bool rlx_tok_add_merge(rlx_tokenizer *t, const char *l, size_t ll, const char *r, size_t rl,
                       int32_t rank)
{
    rlx_token a = find_span(t, l, ll), b = find_span(t, r, rl);
    if (a == RLX_TOKEN_NULL || b == RLX_TOKEN_NULL || ll + rl > 4096)
        return false;
    char joined[4096];
    memcpy(joined, l, ll);
    memcpy(joined + ll, r, rl);
    rlx_token c = find_span(t, joined, ll + rl);
    if (c == RLX_TOKEN_NULL)
        return false;
    if ((uint64_t)t->n_merges * 2 + 2 > t->merge_mask)
        return false; /* table full: the caller reserved too few */
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    uint64_t i = hash_u64(key) & t->merge_mask;
    for (;;) {
        tok_merge *m = &t->merges[i];
        if (m->rank < 0) {
            m->key = key;
            m->rank = rank;
            m->result = c;
            t->n_merges++;
            return true;
        }
        if (m->key == key)
            return true; /* the first (lowest) rank stays */
        i = (i + 1) & t->merge_mask;
    }
}

rlx_status rlx_tok_add_norm(rlx_tokenizer *t, tok_norm_op op, const char *a, size_t alen,
                            const char *b, size_t blen, rlx_error **err)
{
    tok_norm *n = realloc(t->norm, (t->n_norm + 1) * sizeof *n);
    if (!n)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    t->norm = n;
    tok_norm *x = &n[t->n_norm];
    memset(x, 0, sizeof *x);
    x->op = op;
    if (a) {
        x->a = malloc(alen + 1);
        if (!x->a)
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        memcpy(x->a, a, alen);
        x->a[alen] = 0;
        x->alen = alen;
    }
    if (b) {
        x->b = malloc(blen + 1);
        if (!x->b) {
            free(x->a);
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        }
        memcpy(x->b, b, blen);
        x->b[blen] = 0;
        x->blen = blen;
    }
    t->n_norm++;
    return RLX_OK;
}

rlx_status rlx_tok_add_split(rlx_tokenizer *t, const char *pattern, size_t len,
                             tok_split_behavior behavior, bool invert, rlx_error **err)
{
    int ec = 0;
    PCRE2_SIZE eoff = 0;
    pcre2_code *re =
        pcre2_compile((PCRE2_SPTR)pattern, len, PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF,
                      &ec, &eoff, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "pre-tokenizer regex '%.*s' does not compile at offset %zu: %s",
                             (int)(len > 200 ? 200 : len), pattern, (size_t)eoff, (char *)msg);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* an interpreter fallback is fine */
    tok_split *s = realloc(t->split, (t->n_split + 1) * sizeof *s);
    if (!s) {
        pcre2_code_free(re);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    }
    t->split = s;
    s[t->n_split].re = re;
    s[t->n_split].behavior = behavior;
    s[t->n_split].invert = invert;
    t->n_split++;
    return RLX_OK;
}

/* ---- pre-tokenizer regexes ------------------------------------------------ */

/* The patterns below are those the models' own tokenizer.json files use, in
 * PCRE2 syntax; a name that lists several splits the pieces of the previous
 * pattern again with the next. */
const char rlx_tok_gpt2_regex[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
static const char re_llama3[] = RE_CONTRACTIONS
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+"
    "|\\s+(?!\\S)|\\s+";
static const char re_qwen2[] = RE_CONTRACTIONS
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+"
    "|\\s+(?!\\S)|\\s+";
#define RE_UPPER "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
#define RE_LOWER "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
static const char re_tekken[] =
    "[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER "*" RE_LOWER "+|[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER "+" RE_LOWER
    "*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char re_gpt4o[] =
    "[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER "*" RE_LOWER "+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER "+" RE_LOWER "*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char re_gpt2_plain[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";

typedef struct pre_def {
    const char *names; /* '|'-separated */
    const char *re[5];
    bool ignore_merges;
    int add_bos; /* -1 keep */
} pre_def;

static const pre_def pre_defs[] = {
    {"llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|dbrx|smaug-bpe|chatglm-bpe",
     {re_llama3},
     true,
     1},
    {"qwen2|deepseek-r1-qwen|megrez|stablelm2|hunyuan", {re_qwen2}, false, -1},
    {"gpt-2|phi-2|mpt|olmo|jais|jina-es|jina-de|gigachat|roberta-bpe|trillion",
     {re_gpt2_plain},
     false,
     -1},
    {"starcoder|refact|command-r|smollm|codeshell|exaone|minerva-7b",
     {"\\p{N}", re_gpt2_plain},
     false,
     -1},
    {"default",
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", re_gpt2_plain, "\\p{N}+", "[0-9][0-9][0-9]"},
     false,
     -1},
    {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", re_gpt2_plain, "[0-9][0-9][0-9]"}, false, -1},
    {"tekken", {re_tekken}, true, 1},
    {"gpt-4o|llama4", {re_gpt4o}, false, -1},
    {"deepseek-llm",
     {"[\\r\\n]", "\\s?[A-Za-z\\p{L&}]+",
      "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
      "\\s+$", "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"},
     false,
     1},
    {"deepseek-coder",
     {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
      "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+", "\\p{N}"},
     false,
     1},
    {"deepseek-v3",
     {"\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}"
      "\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     false,
     1},
    {"poro-chat|bloom|gpt3-finnish",
     {" ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{0964}\\x{06D4}\\x{060C})]+"},
     false,
     -1},
    {"viking",
     {" ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{0964}\\x{06D4}\\x{060C})]+", "\\p{N}"},
     false,
     -1},
    {"gemma4", {"[^\\n]+|[\\n]+"}, false, 1},
};

static bool name_in(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, '|');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && memcmp(p, name, n) == 0)
            return true;
        if (!e)
            break;
        p = e + 1;
    }
    return false;
}

rlx_status rlx_tok_set_pre(rlx_tokenizer *t, const char *name, rlx_error **err)
{
    for (size_t i = 0; i < sizeof pre_defs / sizeof pre_defs[0]; i++) {
        const pre_def *d = &pre_defs[i];
        if (!name_in(d->names, name))
            continue;
        for (int k = 0; k < 5 && d->re[k]; k++) {
            rlx_status s =
                rlx_tok_add_split(t, d->re[k], strlen(d->re[k]), TOK_SPLIT_ISOLATED, false, err);
            if (s != RLX_OK)
                return s;
        }
        t->ignore_merges = d->ignore_merges;
        if (d->add_bos >= 0)
            t->add_bos = d->add_bos != 0;
        snprintf(t->pre_name, sizeof t->pre_name, "%s", name);
        return RLX_OK;
    }
    return rlx_error_set(err, RLX_ERR_UNSUPPORTED, "unknown pre-tokenizer '%s'", name);
}

void rlx_tokenizer_free(rlx_tokenizer *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n_norm; i++) {
        free(t->norm[i].a);
        free(t->norm[i].b);
    }
    for (size_t i = 0; i < t->n_split; i++)
        pcre2_code_free(t->split[i].re);
    free(t->norm);
    free(t->split);
    free(t->tok);
    free(t->pool);
    free(t->slots);
    free(t->merges);
    free(t->spec);
    free(t->eog);
    free(t);
}

/* ---- accessors ------------------------------------------------------------ */

rlx_tokenizer_kind rlx_tokenizer_get_kind(const rlx_tokenizer *t)
{
    return t->kind;
}

const char *rlx_tokenizer_pre_name(const rlx_tokenizer *t)
{
    return t->pre_name;
}

int32_t rlx_tokenizer_n_vocab(const rlx_tokenizer *t)
{
    return t->n_vocab;
}

rlx_token rlx_tokenizer_bos(const rlx_tokenizer *t)
{
    return t->bos;
}

rlx_token rlx_tokenizer_eos(const rlx_tokenizer *t)
{
    return t->eos;
}

rlx_token rlx_tokenizer_eot(const rlx_tokenizer *t)
{
    return t->eot;
}

rlx_token rlx_tokenizer_pad(const rlx_tokenizer *t)
{
    return t->pad;
}

rlx_token rlx_tokenizer_unk(const rlx_tokenizer *t)
{
    return t->unk;
}

bool rlx_tokenizer_adds_bos(const rlx_tokenizer *t)
{
    return t->add_bos && t->bos != RLX_TOKEN_NULL;
}

bool rlx_tokenizer_adds_eos(const rlx_tokenizer *t)
{
    return t->add_eos && t->eos != RLX_TOKEN_NULL;
}

bool rlx_tokenizer_adds_space_prefix(const rlx_tokenizer *t)
{
    return t->space_prefix;
}

bool rlx_tokenizer_is_eog(const rlx_tokenizer *t, rlx_token id)
{
    if (id == RLX_TOKEN_NULL)
        return false;
    for (size_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id)
            return true;
    return false;
}

bool rlx_tokenizer_is_control(const rlx_tokenizer *t, rlx_token id)
{
    return id >= 0 && id < t->n_vocab && t->tok[id].type == RLX_TOKEN_TYPE_CONTROL;
}

const char *rlx_tokenizer_token_text(const rlx_tokenizer *t, rlx_token id, size_t *len)
{
    if (id < 0 || id >= t->n_vocab) {
        if (len)
            *len = 0;
        return NULL;
    }
    if (len)
        *len = t->tok[id].len;
    return tok_str(t, id);
}

rlx_token_type rlx_tokenizer_token_type(const rlx_tokenizer *t, rlx_token id)
{
    if (id < 0 || id >= t->n_vocab)
        return RLX_TOKEN_TYPE_UNDEFINED;
    return (rlx_token_type)t->tok[id].type;
}

rlx_token rlx_tokenizer_find(const rlx_tokenizer *t, const char *text, size_t len)
{
    return find_span(t, text, len);
}

/* ---- the merge engine ----------------------------------------------------- */

typedef struct sym {
    uint32_t start, len;
    int32_t prev, next;
    rlx_token id;
} sym;

typedef struct bigram {
    double prio; /* lower pops first: merge rank, or minus the piece score */
    int32_t left, right;
    rlx_token result;
    uint32_t size;
} bigram;

typedef struct merge_ctx {
    const rlx_tokenizer *t;
    sym *s;
    size_t s_cap;
    bigram *h;
    size_t h_n, h_cap;
    byte_buf enc; /* byte-level encoding of the current word */
    tok_vec *out;
} merge_ctx;

static bool bg_less(const bigram *a, const bigram *b)
{
    if (a->prio != b->prio)
        return a->prio < b->prio;
    return a->left < b->left;
}

static bool heap_push(merge_ctx *c, bigram b)
{
    if (c->h_n == c->h_cap) {
        size_t cap = c->h_cap ? c->h_cap * 2 : 64;
        bigram *h = realloc(c->h, cap * sizeof *h);
        if (!h)
            return false;
        c->h = h;
        c->h_cap = cap;
    }
    size_t i = c->h_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bg_less(&b, &c->h[p]))
            break;
        c->h[i] = c->h[p];
        i = p;
    }
    c->h[i] = b;
    return true;
}

static bigram heap_pop(merge_ctx *c)
{
    bigram top = c->h[0];
    bigram last = c->h[--c->h_n];
    size_t i = 0, n = c->h_n;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= n)
            break;
        size_t m = (l + 1 < n && bg_less(&c->h[l + 1], &c->h[l])) ? l + 1 : l;
        if (!bg_less(&c->h[m], &last))
            break;
        c->h[i] = c->h[m];
        i = m;
    }
    if (n)
        c->h[i] = last;
    return top;
}

/* Queue the pair (l, r) if it can merge. `w` is the word's text. */
static bool try_pair(merge_ctx *c, const char *w, int32_t l, int32_t r)
{
    if (l < 0 || r < 0)
        return true;
    const rlx_tokenizer *t = c->t;
    const sym *a = &c->s[l], *b = &c->s[r];
    bigram g = {.left = l, .right = r, .size = a->len + b->len};
    if (t->kind == RLX_TOKENIZER_SPM) {
        rlx_token id = find_span(t, w + a->start, a->len + b->len);
        if (id == RLX_TOKEN_NULL)
            return true;
        g.prio = -(double)t->tok[id].score;
        g.result = id;
    } else {
        if (a->id == RLX_TOKEN_NULL || b->id == RLX_TOKEN_NULL)
            return true;
        const tok_merge *m = find_merge(t, a->id, b->id);
        if (!m)
            return true;
        g.prio = (double)m->rank;
        g.result = m->result;
    }
    return heap_push(c, g);
}

static bool emit_bytes(merge_ctx *c, const char *p, size_t n)
{
    const rlx_tokenizer *t = c->t;
    for (size_t i = 0; i < n; i++) {
        rlx_token id = t->byte_tok[(uint8_t)p[i]];
        if (id == RLX_TOKEN_NULL)
            id = t->unk;
        if (id != RLX_TOKEN_NULL && !vec_push(c->out, id))
            return false;
    }
    return true;
}

/* Merge one word (already normalized / byte-encoded) and emit its tokens. */
static bool merge_word(merge_ctx *c, const char *w, size_t n)
{
    const rlx_tokenizer *t = c->t;
    if (n == 0)
        return true;
    if (t->ignore_merges || (t->newline_whole && w[0] == '\n')) {
        bool all_nl = true;
        if (!t->ignore_merges)
            for (size_t i = 0; i < n && all_nl; i++)
                all_nl = w[i] == '\n';
        rlx_token id = all_nl ? find_span(t, w, n) : RLX_TOKEN_NULL;
        if (id != RLX_TOKEN_NULL)
            return vec_push(c->out, id);
    }
    if (n > c->s_cap) {
        sym *s = realloc(c->s, n * sizeof *s);
        if (!s)
            return false;
        c->s = s;
        c->s_cap = n;
    }
    int32_t ns = 0;
    for (size_t i = 0; i < n;) {
        size_t l = utf8_char(w + i, n - i);
        sym *s = &c->s[ns];
        s->start = (uint32_t)i;
        s->len = (uint32_t)l;
        s->prev = ns - 1;
        s->next = ns + 1;
        s->id = t->kind == RLX_TOKENIZER_SPM ? RLX_TOKEN_NULL : find_span(t, w + i, l);
        ns++;
        i += l;
    }
    c->s[ns - 1].next = -1;
    c->h_n = 0;
    for (int32_t i = 0; i + 1 < ns; i++)
        if (!try_pair(c, w, i, i + 1))
            return false;
    while (c->h_n) {
        bigram g = heap_pop(c);
        sym *a = &c->s[g.left], *b = &c->s[g.right];
        if (a->len == 0 || b->len == 0 || a->next != g.right || a->len + b->len != g.size)
            continue;
        a->len += b->len;
        a->id = g.result;
        b->len = 0;
        a->next = b->next;
        if (b->next >= 0)
            c->s[b->next].prev = g.left;
        if (!try_pair(c, w, a->prev, g.left) || !try_pair(c, w, g.left, a->next))
            return false;
    }
    for (int32_t i = 0; i >= 0; i = c->s[i].next) {
        const sym *s = &c->s[i];
        rlx_token id = t->kind == RLX_TOKENIZER_SPM ? find_span(t, w + s->start, s->len) : s->id;
        if (id != RLX_TOKEN_NULL) {
            if (!vec_push(c->out, id))
                return false;
        } else if (t->byte_fallback) {
            if (!emit_bytes(c, w + s->start, s->len))
                return false;
        } else if (t->unk != RLX_TOKEN_NULL) {
            if (!vec_push(c->out, t->unk))
                return false;
        }
    }
    return true;
}

static bool encode_word(merge_ctx *c, const char *w, size_t n)
{
    if (!c->t->byte_encode)
        return merge_word(c, w, n);
    c->enc.n = 0;
    if (!buf_reserve(&c->enc, 2 * n + 1))
        return false;
    for (size_t i = 0; i < n; i++)
        c->enc.n += utf8_put(c->enc.p + c->enc.n, rlx_tok_byte_to_cp((uint8_t)w[i]));
    return merge_word(c, c->enc.p, c->enc.n);
}

/* ---- normalizer ------------------------------------------------------------ */

static rlx_status normalize_icu(const char *s, size_t n, byte_buf *out, rlx_error **err)
{
    UErrorCode ue = U_ZERO_ERROR;
    const UNormalizer2 *nfc = unorm2_getNFCInstance(&ue);
    if (U_FAILURE(ue))
        return rlx_error_set(err, RLX_ERR_INTERNAL, "ICU NFC is unavailable: %s", u_errorName(ue));
    if (n > INT32_MAX / 2)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "text too long to normalize");
    int32_t ulen = 0;
    UChar *u = malloc(sizeof(UChar) * (n + 1));
    UChar *v = NULL;
    rlx_status st = RLX_OK;
    if (!u)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    /* invalid UTF-8 becomes U+FFFD here, as in the reference (which takes
     * Rust strings, valid by construction) */
    u_strFromUTF8WithSub(u, (int32_t)n + 1, &ulen, s, (int32_t)n, 0xFFFD, NULL, &ue);
    if (U_FAILURE(ue)) {
        st = rlx_error_set(err, RLX_ERR_INVALID_ARG, "text is not UTF-8: %s", u_errorName(ue));
        goto done;
    }
    int32_t cap = ulen * 3 + 16, vlen;
    v = malloc(sizeof(UChar) * (size_t)cap);
    if (!v) {
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    vlen = unorm2_normalize(nfc, u, ulen, v, cap, &ue);
    if (U_FAILURE(ue)) {
        st = rlx_error_set(err, RLX_ERR_INTERNAL, "NFC failed: %s", u_errorName(ue));
        goto done;
    }
    int32_t blen = 0;
    if (!buf_reserve(out, (size_t)vlen * 3 + 1)) {
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    u_strToUTF8(out->p, (int32_t)(out->cap), &blen, v, vlen, &ue);
    if (U_FAILURE(ue)) {
        st = rlx_error_set(err, RLX_ERR_INTERNAL, "NFC failed: %s", u_errorName(ue));
        goto done;
    }
    out->n = (size_t)blen;
done:
    free(u);
    free(v);
    return st;
}

/* Apply the normalizer program to one fragment; the result is in *a. */
static rlx_status normalize(const rlx_tokenizer *t, const char *s, size_t n, bool at_start,
                            byte_buf *a, byte_buf *b, rlx_error **err)
{
    a->n = 0;
    if (!buf_add(a, s, n))
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    for (size_t k = 0; k < t->n_norm; k++) {
        const tok_norm *op = &t->norm[k];
        b->n = 0;
        switch (op->op) {
        case TOK_NORM_NFC: {
            bool ascii = true;
            for (size_t i = 0; i < a->n && ascii; i++)
                ascii = (uint8_t)a->p[i] < 0x80;
            if (ascii)
                continue;
            rlx_status st = normalize_icu(a->p, a->n, b, err);
            if (st != RLX_OK)
                return st;
            break;
        }
        case TOK_NORM_PREPEND:
            if (a->n == 0 || (op->first_only && !at_start) || (op->unless_space && a->p[0] == ' '))
                continue;
            if (!buf_add(b, op->a, op->alen) || !buf_add(b, a->p, a->n))
                return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
            break;
        case TOK_NORM_REPLACE:
            if (op->alen == 0)
                continue;
            for (size_t i = 0; i < a->n;) {
                if (i + op->alen <= a->n && memcmp(a->p + i, op->a, op->alen) == 0) {
                    if (!buf_add(b, op->b, op->blen))
                        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
                    i += op->alen;
                } else {
                    size_t j = i + 1;
                    while (j < a->n && (uint8_t)a->p[j] != (uint8_t)op->a[0])
                        j++;
                    if (!buf_add(b, a->p + i, j - i))
                        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
                    i = j;
                }
            }
            break;
        }
        byte_buf x = *a;
        *a = *b;
        *b = x;
    }
    return RLX_OK;
}

/* ---- pre-tokenizer --------------------------------------------------------- */

typedef struct span {
    size_t off, len;
} span;

typedef struct span_vec {
    span *v;
    size_t n, cap;
} span_vec;

static bool span_push(span_vec *s, size_t off, size_t len)
{
    if (len == 0)
        return true;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        span *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return false;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n].off = off;
    s->v[s->n].len = len;
    s->n++;
    return true;
}

typedef struct split_state {
    const tok_split *sp;
    span_vec *out;
    bool prev_match; /* within the current fragment */
    bool have_last;
} split_state;

/* Hand one piece (a match or the gap between matches) to the behavior. */
static bool split_piece(split_state *st, size_t off, size_t len, bool is_match)
{
    if (len == 0)
        return true;
    if (st->sp->invert)
        is_match = !is_match;
    span_vec *o = st->out;
    bool ok = true;
    switch (st->sp->behavior) {
    case TOK_SPLIT_ISOLATED:
        ok = span_push(o, off, len);
        break;
    case TOK_SPLIT_REMOVED:
        if (!is_match)
            ok = span_push(o, off, len);
        break;
    case TOK_SPLIT_MERGED_PREV:
        if (is_match && !st->prev_match && st->have_last)
            o->v[o->n - 1].len = off + len - o->v[o->n - 1].off;
        else
            ok = span_push(o, off, len);
        break;
    case TOK_SPLIT_MERGED_NEXT:
        if (st->prev_match && st->have_last)
            o->v[o->n - 1].len = off + len - o->v[o->n - 1].off;
        else
            ok = span_push(o, off, len);
        break;
    }
    if (st->sp->behavior != TOK_SPLIT_REMOVED || !is_match)
        st->have_last = true;
    st->prev_match = is_match;
    return ok;
}

static rlx_status split_all(const rlx_tokenizer *t, const char *text, span_vec *cur, span_vec *nxt,
                            pcre2_match_data *md, rlx_error **err)
{
    for (size_t k = 0; k < t->n_split; k++) {
        const tok_split *sp = &t->split[k];
        nxt->n = 0;
        for (size_t f = 0; f < cur->n; f++) {
            const char *subj = text + cur->v[f].off;
            size_t n = cur->v[f].len, base = cur->v[f].off;
            split_state st = {.sp = sp, .out = nxt};
            size_t pos = 0, last = 0;
            while (pos < n) {
                int rc = pcre2_match(sp->re, (PCRE2_SPTR)subj, n, pos, 0, md, NULL);
                if (rc == PCRE2_ERROR_NOMATCH)
                    break;
                if (rc < 0) {
                    PCRE2_UCHAR msg[256];
                    pcre2_get_error_message(rc, msg, sizeof msg);
                    return rlx_error_set(err, RLX_ERR_INTERNAL, "pre-tokenizer regex failed: %s",
                                         (char *)msg);
                }
                PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
                size_t ms = ov[0], me = ov[1];
                if (me <= ms) { /* empty match: step over one character */
                    pos = ms + utf8_char(subj + ms, n - ms);
                    continue;
                }
                if (!split_piece(&st, base + last, ms - last, false) ||
                    !split_piece(&st, base + ms, me - ms, true))
                    return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
                last = pos = me;
            }
            if (!split_piece(&st, base + last, n - last, false))
                return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        }
        span_vec x = *cur;
        *cur = *nxt;
        *nxt = x;
    }
    return RLX_OK;
}

/* ---- encoding -------------------------------------------------------------- */

rlx_tokenizer_encode_params rlx_tokenizer_encode_default_params(void)
{
    rlx_tokenizer_encode_params p = {.add_bos = -1, .add_eos = -1, .parse_special = false};
    return p;
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

typedef struct enc_state {
    merge_ctx mc;
    byte_buf na, nb;
    span_vec sa, sb;
    pcre2_match_data *md;
} enc_state;

static rlx_status encode_text(const rlx_tokenizer *t, enc_state *es, const char *s, size_t n,
                              bool at_start, rlx_error **err)
{
    if (n == 0)
        return RLX_OK;
    rlx_status st = normalize(t, s, n, at_start, &es->na, &es->nb, err);
    if (st != RLX_OK)
        return st;
    es->sa.n = 0;
    if (!span_push(&es->sa, 0, es->na.n))
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    if (t->n_split) {
        st = split_all(t, es->na.p, &es->sa, &es->sb, es->md, err);
        if (st != RLX_OK)
            return st;
    }
    for (size_t i = 0; i < es->sa.n; i++)
        if (!encode_word(&es->mc, es->na.p + es->sa.v[i].off, es->sa.v[i].len))
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory while tokenizing");
    return RLX_OK;
}

/* The longest recognised token starting at p, or RLX_TOKEN_NULL. */
static rlx_token match_special(const rlx_tokenizer *t, const char *p, size_t n, bool parse_special)
{
    uint8_t b = (uint8_t)p[0];
    for (uint32_t i = t->spec_first[b]; i < t->spec_first[b + 1]; i++) {
        rlx_token id = t->spec[i];
        const tok_entry *e = &t->tok[id];
        if (!parse_special && e->type != RLX_TOKEN_TYPE_USER_DEFINED)
            continue;
        if (e->len <= n && memcmp(t->pool + e->off, p, e->len) == 0)
            return id;
    }
    return RLX_TOKEN_NULL;
}

rlx_status rlx_tokenizer_encode(const rlx_tokenizer *t, const char *text, size_t len,
                                rlx_tokenizer_encode_params params, rlx_token **out, size_t *n_out,
                                rlx_error **err)
{
    if (out)
        *out = NULL;
    if (n_out)
        *n_out = 0;
    if (!t || !out || !n_out || (!text && len))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_tokenizer_encode: NULL argument");
    tok_vec v = {0};
    enc_state es = {0};
    es.mc.t = t;
    es.mc.out = &v;
    rlx_status st = RLX_OK;
    if (t->n_split) {
        es.md = pcre2_match_data_create(1, NULL);
        if (!es.md) {
            st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
            goto done;
        }
    }
    bool add_bos = params.add_bos < 0 ? t->add_bos : params.add_bos != 0;
    bool add_eos = params.add_eos < 0 ? t->add_eos : params.add_eos != 0;
    if (add_bos && t->bos != RLX_TOKEN_NULL && !vec_push(&v, t->bos))
        goto oom;

    size_t start = 0, i = 0;
    while (i < len) {
        rlx_token id =
            t->n_spec ? match_special(t, text + i, len - i, params.parse_special) : RLX_TOKEN_NULL;
        if (id == RLX_TOKEN_NULL) {
            i++;
            continue;
        }
        size_t end = i;
        if (t->tok[id].flags & TOK_LSTRIP)
            while (end > start && is_ws(text[end - 1]))
                end--;
        st = encode_text(t, &es, text + start, end - start, start == 0, err);
        if (st != RLX_OK)
            goto done;
        if (!vec_push(&v, id))
            goto oom;
        i += t->tok[id].len;
        if (t->tok[id].flags & TOK_RSTRIP)
            while (i < len && is_ws(text[i]))
                i++;
        start = i;
    }
    st = encode_text(t, &es, text + start, len - start, start == 0, err);
    if (st != RLX_OK)
        goto done;
    if (add_eos && t->eos != RLX_TOKEN_NULL && !vec_push(&v, t->eos))
        goto oom;
    goto done;
oom:
    st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory while tokenizing");
done:
    free(es.mc.s);
    free(es.mc.h);
    free(es.mc.enc.p);
    free(es.na.p);
    free(es.nb.p);
    free(es.sa.v);
    free(es.sb.v);
    if (es.md)
        pcre2_match_data_free(es.md);
    if (st != RLX_OK || v.n == 0) {
        free(v.v);
        return st;
    }
    *out = v.v;
    *n_out = v.n;
    return RLX_OK;
}

/* ---- decoding -------------------------------------------------------------- */

rlx_tokenizer_decode_params rlx_tokenizer_decode_default_params(const rlx_tokenizer *t)
{
    rlx_tokenizer_decode_params p = {.render_special = false,
                                     .strip_leading_space = t ? t->strip_leading : false};
    return p;
}

/* Writes a piece into a growable buffer (keeps snprintf semantics simple for
 * the public wrapper). */
static bool piece_into(const rlx_tokenizer *t, rlx_token id, bool render_special, byte_buf *o)
{
    const tok_entry *e = &t->tok[id];
    const char *s = t->pool + e->off;
    switch (e->type) {
    case RLX_TOKEN_TYPE_CONTROL:
    case RLX_TOKEN_TYPE_UNKNOWN:
        return render_special ? buf_add(o, s, e->len) : true;
    case RLX_TOKEN_TYPE_UNUSED:
        return true;
    case RLX_TOKEN_TYPE_BYTE:
        if (e->byte >= 0) {
            char c = (char)e->byte;
            return buf_add(o, &c, 1);
        }
        break;
    case RLX_TOKEN_TYPE_USER_DEFINED:
        if (t->kind == RLX_TOKENIZER_BPE)
            return buf_add(o, s, e->len);
        break;
    default:
        break;
    }
    if (t->byte_encode) {
        if (!buf_reserve(o, e->len + 1))
            return false;
        for (size_t i = 0; i < e->len;) {
            size_t l = utf8_char(s + i, e->len - i);
            uint32_t cp = (uint8_t)s[i];
            if (l == 2)
                cp = ((cp & 0x1F) << 6) | ((uint8_t)s[i + 1] & 0x3F);
            int b = (l <= 2) ? rlx_tok_cp_to_byte(cp) : -1;
            if (b >= 0)
                o->p[o->n++] = (char)b;
            else {
                memcpy(o->p + o->n, s + i, l);
                o->n += l;
            }
            i += l;
        }
        o->p[o->n] = 0;
        return true;
    }
    if (t->decode_spaces) {
        for (size_t i = 0; i < e->len;) {
            if (i + 3 <= e->len && memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
                if (!buf_add(o, " ", 1))
                    return false;
                i += 3;
            } else {
                size_t j = i + 1;
                while (j < e->len && (uint8_t)s[j] != 0xE2)
                    j++;
                if (!buf_add(o, s + i, j - i))
                    return false;
                i = j;
            }
        }
        return true;
    }
    return buf_add(o, s, e->len);
}

size_t rlx_tokenizer_token_to_piece(const rlx_tokenizer *t, rlx_token id, bool render_special,
                                    char *buf, size_t cap)
{
    if (!t || id < 0 || id >= t->n_vocab)
        return 0;
    byte_buf o = {0};
    if (!piece_into(t, id, render_special, &o)) {
        free(o.p);
        return 0;
    }
    if (buf && cap && o.n) /* an empty piece has no buffer at all */
        memcpy(buf, o.p, o.n < cap ? o.n : cap);
    size_t n = o.n;
    free(o.p);
    return n;
}

rlx_status rlx_tokenizer_decode(const rlx_tokenizer *t, const rlx_token *ids, size_t n,
                                rlx_tokenizer_decode_params params, char **out, size_t *out_len,
                                rlx_error **err)
{
    if (out)
        *out = NULL;
    if (out_len)
        *out_len = 0;
    if (!t || !out || (!ids && n))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_tokenizer_decode: NULL argument");
    byte_buf o = {0};
    if (!buf_add(&o, "", 0))
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab) {
            free(o.p);
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "token id %d is outside the vocabulary (%d tokens)", (int)ids[i],
                                 (int)t->n_vocab);
        }
        size_t before = o.n;
        if (!piece_into(t, ids[i], params.render_special, &o)) {
            free(o.p);
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        }
        if (first && o.n > before) {
            first = false;
            if (params.strip_leading_space && o.p[before] == ' ') {
                memmove(o.p + before, o.p + before + 1, o.n - before - 1);
                o.n--;
                o.p[o.n] = 0;
            }
        }
    }
    *out = o.p;
    if (out_len)
        *out_len = o.n;
    return RLX_OK;
}

/* ---- streaming detokenizer ------------------------------------------------- */

struct rlx_detokenizer {
    const rlx_tokenizer *t;
    rlx_tokenizer_decode_params p;
    bool started;
    uint8_t hold[4];
    size_t n_hold;
    byte_buf piece;
    byte_buf out;
};

rlx_status rlx_detokenizer_create(const rlx_tokenizer *t, rlx_tokenizer_decode_params params,
                                  rlx_detokenizer **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!t || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_detokenizer_create: NULL argument");
    rlx_detokenizer *d = calloc(1, sizeof *d);
    if (!d)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    d->t = t;
    d->p = params;
    *out = d;
    return RLX_OK;
}

void rlx_detokenizer_reset(rlx_detokenizer *d)
{
    if (!d)
        return;
    d->started = false;
    d->n_hold = 0;
}

void rlx_detokenizer_free(rlx_detokenizer *d)
{
    if (!d)
        return;
    free(d->piece.p);
    free(d->out.p);
    free(d);
}

/* The allowed range of a sequence's second byte, by lead byte. */
static bool second_ok(uint8_t lead, uint8_t b)
{
    switch (lead) {
    case 0xE0:
        return b >= 0xA0 && b <= 0xBF;
    case 0xED:
        return b >= 0x80 && b <= 0x9F;
    case 0xF0:
        return b >= 0x90 && b <= 0xBF;
    case 0xF4:
        return b >= 0x80 && b <= 0x8F;
    default:
        return b >= 0x80 && b <= 0xBF;
    }
}

/* Length of the valid prefix of a sequence at p (n bytes available), and
 * whether it is complete. */
static size_t utf8_prefix(const uint8_t *p, size_t n, bool *complete)
{
    size_t need = utf8_len(p[0]);
    *complete = false;
    if (p[0] >= 0x80 && need == 1)
        return 0; /* cannot start a character */
    size_t i = 1;
    for (; i < need && i < n; i++) {
        bool ok = i == 1 ? second_ok(p[0], p[1]) : (p[i] & 0xC0) == 0x80;
        if (!ok)
            return 0;
    }
    *complete = i == need;
    return i;
}

rlx_status rlx_detokenizer_push(rlx_detokenizer *d, rlx_token id, const char **text, size_t *len,
                                rlx_error **err)
{
    *text = "";
    *len = 0;
    if (id < 0 || id >= d->t->n_vocab)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "token id %d is outside the vocabulary (%d tokens)", (int)id,
                             (int)d->t->n_vocab);
    d->piece.n = 0;
    if (!buf_add(&d->piece, (const char *)d->hold, d->n_hold))
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    size_t before = d->piece.n;
    if (!piece_into(d->t, id, d->p.render_special, &d->piece))
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    if (!d->started && d->piece.n > before) {
        d->started = true;
        if (d->p.strip_leading_space && d->piece.p[before] == ' ') {
            memmove(d->piece.p + before, d->piece.p + before + 1, d->piece.n - before - 1);
            d->piece.n--;
        }
    }
    d->n_hold = 0;
    d->out.n = 0;
    if (!buf_reserve(&d->out, d->piece.n * 3 + 1))
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    const uint8_t *p = (const uint8_t *)d->piece.p;
    size_t n = d->piece.n;
    for (size_t i = 0; i < n;) {
        bool complete;
        size_t k = utf8_prefix(p + i, n - i, &complete);
        if (complete) {
            memcpy(d->out.p + d->out.n, p + i, k);
            d->out.n += k;
            i += k;
        } else if (k > 0 && i + k == n) {
            memcpy(d->hold, p + i, k); /* wait for the rest of this character */
            d->n_hold = k;
            break;
        } else {
            d->out.n += utf8_put(d->out.p + d->out.n, 0xFFFD);
            i += k ? k : 1;
        }
    }
    d->out.p[d->out.n] = 0;
    *text = d->out.p;
    *len = d->out.n;
    return RLX_OK;
}

void rlx_detokenizer_flush(rlx_detokenizer *d, const char **text, size_t *len)
{
    static const char fffd[] = "\xEF\xBF\xBD";
    *text = d->n_hold ? fffd : "";
    *len = d->n_hold ? 3 : 0;
    d->n_hold = 0;
}
