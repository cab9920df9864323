/* Internals shared by the tokenizer's files: the vocabulary tables, the
 * normalizer / pre-tokenizer programs, and the loaders' helpers. */
#ifndef RLX_ENGINE_TEXT_TOKENIZER_INTERNAL_H
#define RLX_ENGINE_TEXT_TOKENIZER_INTERNAL_H

#include "engine/text/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* Token flags beyond the type. */
#define TOK_LSTRIP 1u /* swallows whitespace on its left (HF added tokens) */
#define TOK_RSTRIP 2u /* swallows whitespace on its right */

typedef struct tok_entry {
    uint32_t off; /* into rlx_tokenizer.pool */
    uint32_t len;
    float score;
    uint8_t type;  /* rlx_token_type */
    uint8_t flags; /* TOK_* */
    int16_t byte;  /* the byte a BYTE token stands for, else -1 */
} tok_entry;

typedef struct tok_slot {
    uint32_t id1; /* id + 1; 0 = empty */
    uint32_t tag; /* high bits of the text's hash, to skip most entries unread */
} tok_slot;

typedef struct tok_merge {
    uint64_t key; /* (left id << 32) | right id; 0 with rank < 0 = empty slot */
    int32_t rank;
    int32_t result;
} tok_merge;

typedef enum tok_norm_op {
    TOK_NORM_NFC,
    TOK_NORM_PREPEND, /* a = text put before a non-empty fragment */
    TOK_NORM_REPLACE, /* every a becomes b */
} tok_norm_op;

typedef struct tok_norm {
    tok_norm_op op;
    char *a, *b;
    size_t alen, blen;
    bool first_only;   /* PREPEND only to the fragment that starts the text */
    bool unless_space; /* PREPEND only to a fragment not starting with ' ' */
} tok_norm;

/* How a regex split treats the matches (HF's SplitDelimiterBehavior). */
typedef enum tok_split_behavior {
    TOK_SPLIT_ISOLATED,
    TOK_SPLIT_REMOVED,
    TOK_SPLIT_MERGED_PREV,
    TOK_SPLIT_MERGED_NEXT,
} tok_split_behavior;

typedef struct tok_split {
    pcre2_code *re;
    tok_split_behavior behavior;
    bool invert;
} tok_split;

struct rlx_tokenizer {
    rlx_tokenizer_kind kind;
    char pre_name[48];

    int32_t n_vocab;
    tok_entry *tok;
    char *pool;
    size_t pool_len, pool_cap;

    /* text -> id: open addressing, later ids win */
    tok_slot *slots;
    uint64_t slot_mask;

    tok_merge *merges;
    uint64_t merge_mask;
    int32_t n_merges;

    /* token of each byte: "<0xNN>" for SPM/char BPE, the GPT-2 byte
     * character for byte-level BPE; -1 when absent */
    int32_t byte_tok[256];

    tok_norm *norm;
    size_t n_norm;
    tok_split *split;
    size_t n_split;

    bool byte_encode;   /* GPT-2 bytes_to_unicode before BPE */
    bool byte_fallback; /* unknown characters become <0xNN> tokens */
    bool ignore_merges; /* a whole pre-token found in the vocab is taken as is */
    bool newline_whole; /* a run of newlines found in the vocab is taken as is */
    bool space_prefix;  /* the model puts "▁"/" " before each text fragment */
    bool decode_spaces; /* "▁" decodes to " " */
    bool strip_leading; /* default of decode params' strip_leading_space */
    bool add_bos, add_eos;

    rlx_token bos, eos, eot, eom, pad, unk;
    rlx_token *eog;
    size_t n_eog;

    /* tokens recognised inside text, sorted by first byte then by length,
     * longest first; spec_first[b] .. spec_first[b + 1] start with byte b */
    rlx_token *spec;
    size_t n_spec;
    uint32_t spec_first[257];
};

/* ---- tokenizer.c: building blocks the loaders use ---------------------- */

rlx_tokenizer *rlx_tok_alloc(int32_t n_vocab);
/* Store token id's text; the pool grows as needed. */
rlx_status rlx_tok_set_text(rlx_tokenizer *t, int32_t id, const char *s, size_t len,
                            rlx_error **err);
/* After every text is set: hash the vocabulary, find byte tokens, specials. */
rlx_status rlx_tok_finish(rlx_tokenizer *t, rlx_error **err);
/* Add a merge "left right" by rank (first wins). Returns false when a part or
 * the joined text is not in the vocabulary (the merge can never apply). */
bool rlx_tok_add_merge(rlx_tokenizer *t, const char *l, size_t ll, const char *r, size_t rl,
                       int32_t rank);
rlx_status rlx_tok_reserve_merges(rlx_tokenizer *t, size_t n, rlx_error **err);
rlx_status rlx_tok_add_norm(rlx_tokenizer *t, tok_norm_op op, const char *a, size_t alen,
                            const char *b, size_t blen, rlx_error **err);
rlx_status rlx_tok_add_split(rlx_tokenizer *t, const char *pattern, size_t len,
                             tok_split_behavior behavior, bool invert, rlx_error **err);
/* The regexes of a llama.cpp pre-tokenizer name; RLX_ERR_UNSUPPORTED when
 * unknown. Sets ignore_merges where the reference tokenizer does. */
rlx_status rlx_tok_set_pre(rlx_tokenizer *t, const char *name, rlx_error **err);
/* The GPT-2 pre-tokenizer regex of HF's ByteLevel(use_regex=true). */
extern const char rlx_tok_gpt2_regex[];
rlx_token rlx_tok_find_str(const rlx_tokenizer *t, const char *s);

/* GPT-2 byte <-> character mapping. */
uint32_t rlx_tok_byte_to_cp(uint8_t b);
int rlx_tok_cp_to_byte(uint32_t cp);

#endif
