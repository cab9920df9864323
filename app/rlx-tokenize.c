/* rlx tokenize: show how a model's tokenizer splits a text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/text/tokenizer.h"
#include "rlx-cli.h"

static const char usage_text[] =
    "usage: rlx tokenize -m FILE [--ids|--pieces] [--special] [--no-bos] TEXT\n"
    "  FILE is a .gguf, a tokenizer.json or a folder holding one.\n"
    "  default output: one line per token, \"id<TAB>piece\"\n"
    "  --ids      the ids on one line, separated by spaces\n"
    "  --pieces   one piece per line\n"
    "  --special  recognise control tokens written in TEXT (\"<|im_start|>\")\n"
    "  --no-bos   do not add the BOS token the model would add\n"
    "Pieces are the bytes each token stands for, with \\\\, \\n, \\t, \\r, other\n"
    "control bytes and bytes of incomplete UTF-8 characters written as escapes.\n";

/* Length of the valid UTF-8 character at p, or 0. */
static size_t utf8_valid_len(const unsigned char *p, size_t n)
{
    size_t l = p[0] < 0x80                      ? 1
               : (p[0] >= 0xC2 && p[0] <= 0xDF) ? 2
               : (p[0] >= 0xE0 && p[0] <= 0xEF) ? 3
               : (p[0] >= 0xF0 && p[0] <= 0xF4) ? 4
                                                : 0;
    if (!l || l > n)
        return 0;
    for (size_t i = 1; i < l; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    if ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xED && p[1] > 0x9F) ||
        (p[0] == 0xF0 && p[1] < 0x90) || (p[0] == 0xF4 && p[1] > 0x8F))
        return 0;
    return l;
}

static void print_escaped(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        size_t l = utf8_valid_len(p + i, n - i);
        if (c == '\\')
            fputs("\\\\", stdout);
        else if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\t')
            fputs("\\t", stdout);
        else if (c == '\r')
            fputs("\\r", stdout);
        else if (c < 0x20 || c == 0x7F || l == 0)
            printf("\\x%02X", c);
        else {
            fwrite(p + i, 1, l, stdout);
            i += l;
            continue;
        }
        i++;
    }
}

int rlx_cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *text = NULL;
    enum { OUT_TABLE, OUT_IDS, OUT_PIECES } mode = OUT_TABLE;
    bool special = false, no_bos = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (++i >= argc)
                return rlx_cli_fail("tokenize: %s needs a value (see rlx tokenize --help)", a);
            model = argv[i];
        } else if (!strcmp(a, "--ids")) {
            mode = OUT_IDS;
        } else if (!strcmp(a, "--pieces")) {
            mode = OUT_PIECES;
        } else if (!strcmp(a, "--special")) {
            special = true;
        } else if (!strcmp(a, "--no-bos")) {
            no_bos = true;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage_text, stdout);
            return 0;
        } else if (!strcmp(a, "--")) {
            if (i + 1 < argc)
                text = argv[i + 1];
            if (i + 2 < argc)
                return rlx_cli_fail("tokenize: give the text as one argument (quote it)");
            break;
        } else if (a[0] == '-' && a[1] != '\0') {
            return rlx_cli_fail("tokenize: unknown option '%s' (see rlx tokenize --help)", a);
        } else if (text) {
            return rlx_cli_fail("tokenize: give the text as one argument (quote it)");
        } else {
            text = a;
        }
    }
    if (!model)
        return rlx_cli_fail("tokenize: no model given; use -m FILE (see rlx tokenize --help)");
    if (!text)
        return rlx_cli_fail("tokenize: no text given (see rlx tokenize --help)");

    rlx_tokenizer *tok = NULL;
    rlx_error *err = NULL;
    if (rlx_tokenizer_load(model, &tok, &err) != RLX_OK) {
        int rc = rlx_cli_fail("%s", rlx_error_message(err));
        rlx_error_free(err);
        return rc;
    }
    rlx_tokenizer_encode_params ep = rlx_tokenizer_encode_default_params();
    ep.parse_special = special;
    if (no_bos)
        ep.add_bos = 0;
    rlx_token *ids = NULL;
    size_t n = 0;
    if (rlx_tokenizer_encode(tok, text, strlen(text), ep, &ids, &n, &err) != RLX_OK) {
        int rc = rlx_cli_fail("%s", rlx_error_message(err));
        rlx_error_free(err);
        rlx_tokenizer_free(tok);
        return rc;
    }
    char stack[256];
    for (size_t i = 0; i < n; i++) {
        if (mode == OUT_IDS) {
            printf(i ? " %d" : "%d", (int)ids[i]);
            continue;
        }
        size_t len = rlx_tokenizer_token_to_piece(tok, ids[i], true, stack, sizeof stack);
        char *piece = stack;
        if (len > sizeof stack) {
            piece = malloc(len);
            if (!piece) {
                free(ids);
                rlx_tokenizer_free(tok);
                return rlx_cli_fail("out of memory");
            }
            rlx_tokenizer_token_to_piece(tok, ids[i], true, piece, len);
        }
        if (mode == OUT_TABLE)
            printf("%d\t", (int)ids[i]);
        print_escaped(piece, len);
        putchar('\n');
        if (piece != stack)
            free(piece);
    }
    if (mode == OUT_IDS)
        putchar('\n');
    free(ids);
    rlx_tokenizer_free(tok);
    return 0;
}
