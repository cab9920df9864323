/* Tokenizer: template text → data / tag / expression tokens, applying the
 * whitespace rules of jinja2 with trim_blocks and lstrip_blocks on. */
#include "engine/template/jinja-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct lexer {
    rlx_jctx *c;
    const char *s; /* normalized source */
    size_t n, pos;
    int line;
    rlx_jtok *toks;
    size_t n_toks, cap;
} lexer;

static void push(lexer *lx, rlx_jtok t)
{
    if (lx->n_toks == lx->cap) {
        size_t cap = lx->cap ? lx->cap * 2 : 64;
        rlx_jtok *nt = rlx_jinja_alloc(lx->c, cap * sizeof *nt);
        if (lx->n_toks)
            memcpy(nt, lx->toks, lx->n_toks * sizeof *nt);
        lx->toks = nt;
        lx->cap = cap;
    }
    lx->toks[lx->n_toks++] = t;
}

static void push_simple(lexer *lx, rlx_jtok_type t, int line)
{
    rlx_jtok tok = {.t = t, .line = line};
    push(lx, tok);
}

static bool is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v';
}

static int count_lines(const char *s, size_t n)
{
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += s[i] == '\n';
    return k;
}

static void emit_data(lexer *lx, const char *s, size_t n, int line)
{
    if (!n)
        return;
    rlx_jtok t = {.t = RLX_JT_DATA, .line = line, .s = s, .len = n};
    push(lx, t);
}

/* Skip whitespace after "-%}" / "-}}" / "-#}". */
static void skip_space(lexer *lx)
{
    while (lx->pos < lx->n && is_space(lx->s[lx->pos])) {
        if (lx->s[lx->pos] == '\n')
            lx->line++;
        lx->pos++;
    }
}

static bool at(lexer *lx, const char *lit)
{
    size_t k = strlen(lit);
    return lx->pos + k <= lx->n && !memcmp(lx->s + lx->pos, lit, k);
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 63));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 63));
        o[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 63));
    o[2] = (char)(0x80 | ((cp >> 6) & 63));
    o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

/* A quoted literal with Python's unicode-escape rules (what jinja2 applies). */
static void lex_string(lexer *lx)
{
    int line = lx->line;
    char q = lx->s[lx->pos++];
    size_t start = lx->pos;
    while (lx->pos < lx->n && lx->s[lx->pos] != q) {
        if (lx->s[lx->pos] == '\\' && lx->pos + 1 < lx->n)
            lx->pos++;
        lx->pos++;
    }
    if (lx->pos >= lx->n)
        rlx_jinja_fail(lx->c, RLX_ERR_FORMAT, line, "unterminated string");
    size_t end = lx->pos++;
    char *o = rlx_jinja_alloc(lx->c, end - start + 1);
    size_t k = 0;
    for (size_t i = start; i < end; i++) {
        char ch = lx->s[i];
        if (ch == '\n')
            lx->line++;
        if (ch != '\\') {
            o[k++] = ch;
            continue;
        }
        char e = lx->s[++i];
        int digits = 0;
        switch (e) {
        case 'n':
            o[k++] = '\n';
            break;
        case 't':
            o[k++] = '\t';
            break;
        case 'r':
            o[k++] = '\r';
            break;
        case 'a':
            o[k++] = '\a';
            break;
        case 'b':
            o[k++] = '\b';
            break;
        case 'f':
            o[k++] = '\f';
            break;
        case 'v':
            o[k++] = '\v';
            break;
        case '\\':
        case '\'':
        case '"':
            o[k++] = e;
            break;
        case '\n':
            lx->line++;
            break;
        case 'x':
            digits = 2;
            break;
        case 'u':
            digits = 4;
            break;
        case 'U':
            digits = 8;
            break;
        default:
            if (e >= '0' && e <= '7') {
                uint32_t cp = 0;
                int m = 0;
                while (m < 3 && i < end && lx->s[i] >= '0' && lx->s[i] <= '7') {
                    cp = cp * 8 + (uint32_t)(lx->s[i] - '0');
                    i++;
                    m++;
                }
                i--;
                k += put_utf8(o + k, cp);
            } else {
                o[k++] = '\\';
                o[k++] = e;
            }
        }
        if (digits) {
            uint32_t cp = 0;
            for (int m = 0; m < digits; m++) {
                int h = i + 1 < end ? hexval(lx->s[i + 1]) : -1;
                if (h < 0)
                    rlx_jinja_fail(lx->c, RLX_ERR_FORMAT, line, "truncated \\%c escape in a string",
                                   e);
                cp = cp * 16 + (uint32_t)h;
                i++;
            }
            if (cp > 0x10FFFF)
                rlx_jinja_fail(lx->c, RLX_ERR_FORMAT, line,
                               "illegal Unicode character in a string");
            k += put_utf8(o + k, cp);
        }
    }
    o[k] = 0;
    rlx_jtok t = {.t = RLX_JT_STRING, .line = line, .s = o, .len = k};
    push(lx, t);
}

static bool is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

static bool is_name_start(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_';
}

static size_t skip_digits(const lexer *lx, size_t p)
{
    while (p < lx->n && (is_digit(lx->s[p]) || lx->s[p] == '_'))
        p++;
    return p;
}

static void lex_number(lexer *lx)
{
    /* Find the literal's extent first: "12_3", "1.5", "2e-3", "1.5E+10". A
     * number right after '.' is an index ("x.0.1"), never a float. */
    size_t start = lx->pos;
    bool after_dot = start > 0 && lx->s[start - 1] == '.';
    bool is_float = false;
    size_t p = skip_digits(lx, start);
    if (!after_dot && p + 1 < lx->n && lx->s[p] == '.' && is_digit(lx->s[p + 1])) {
        is_float = true;
        p = skip_digits(lx, p + 1);
    }
    if (!after_dot && p < lx->n && (lx->s[p] == 'e' || lx->s[p] == 'E')) {
        size_t q = p + 1;
        if (q < lx->n && (lx->s[q] == '+' || lx->s[q] == '-'))
            q++;
        if (q < lx->n && is_digit(lx->s[q])) {
            is_float = true;
            p = skip_digits(lx, q);
        }
    }
    /* Copy without the underscores. */
    char *buf = rlx_jinja_alloc(lx->c, p - start + 1);
    size_t k = 0;
    for (size_t i = start; i < p; i++)
        if (lx->s[i] != '_')
            buf[k++] = lx->s[i];
    buf[k] = 0;
    lx->pos = p;
    rlx_jtok t = {.line = lx->line};
    if (is_float) {
        t.t = RLX_JT_FLOAT;
        t.f = strtod(buf, NULL);
    } else {
        t.t = RLX_JT_INT;
        size_t z = 0;
        while (buf[z] == '0' && buf[z + 1])
            z++; /* leading zeros do not make it larger */
        errno = 0;
        unsigned long long v = strtoull(buf + z, NULL, 10);
        if (errno == ERANGE || v > INT64_MAX)
            rlx_jinja_fail(lx->c, RLX_ERR_UNSUPPORTED, lx->line,
                           "integer literal %.40s%s is larger than 64 bits", buf + z,
                           strlen(buf + z) > 40 ? "..." : "");
        t.i = (int64_t)v;
    }
    push(lx, t);
}

static const char *const ops[] = {
    "//", "**", "==", "!=", "<=", ">=", "+", "-", "/", "*", "%", "~", "[",
    "]",  "(",  ")",  "{",  "}",  "<",  ">", "=", ".", ":", "|", ",", ";",
};

/* Tokens of one tag until its end marker. `kind` is 'v' ({{), 'b' ({%). */
static void lex_tag(lexer *lx, char kind, int open_line)
{
    int balance = 0;
    for (;;) {
        while (lx->pos < lx->n && is_space(lx->s[lx->pos])) {
            if (lx->s[lx->pos] == '\n')
                lx->line++;
            lx->pos++;
        }
        if (lx->pos >= lx->n)
            rlx_jinja_fail(lx->c, RLX_ERR_FORMAT, open_line, "unexpected end of template, the %s",
                           kind == 'v' ? "'{{' is never closed with '}}'"
                                       : "'{%' is never closed with '%}'");
        if (balance == 0) {
            if (kind == 'v' && (at(lx, "-}}") || at(lx, "}}"))) {
                bool strip = lx->s[lx->pos] == '-';
                push_simple(lx, RLX_JT_VAR_END, lx->line);
                lx->pos += strip ? 3 : 2;
                if (strip)
                    skip_space(lx);
                return;
            }
            if (kind == 'b' && (at(lx, "-%}") || at(lx, "+%}") || at(lx, "%}"))) {
                char mod = lx->s[lx->pos] == '%' ? 0 : lx->s[lx->pos];
                push_simple(lx, RLX_JT_BLOCK_END, lx->line);
                lx->pos += mod ? 3 : 2;
                if (mod == '-')
                    skip_space(lx);
                else if (!mod && lx->pos < lx->n && lx->s[lx->pos] == '\n') {
                    lx->pos++; /* trim_blocks */
                    lx->line++;
                }
                return;
            }
        }
        char ch = lx->s[lx->pos];
        if (ch == '\'' || ch == '"') {
            lex_string(lx);
            continue;
        }
        if (is_digit(ch)) {
            lex_number(lx);
            continue;
        }
        if (is_name_start(ch)) {
            size_t start = lx->pos;
            while (lx->pos < lx->n && (is_name_start(lx->s[lx->pos]) || is_digit(lx->s[lx->pos])))
                lx->pos++;
            rlx_jtok t = {.t = RLX_JT_NAME, .line = lx->line};
            t.s = rlx_jinja_strndup(lx->c, lx->s + start, lx->pos - start);
            t.len = lx->pos - start;
            push(lx, t);
            continue;
        }
        const char *op = NULL;
        for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
            if (at(lx, ops[i])) {
                op = ops[i];
                break;
            }
        if (!op)
            rlx_jinja_fail(lx->c, RLX_ERR_FORMAT, lx->line, "unexpected character '%c'", ch);
        if (op[0] == '(' || op[0] == '[' || op[0] == '{')
            balance++;
        else if ((op[0] == ')' || op[0] == ']' || op[0] == '}') && !op[1]) {
            if (balance == 0)
                rlx_jinja_fail(lx->c, RLX_ERR_FORMAT, lx->line, "unexpected '%s'", op);
            balance--;
        }
        rlx_jtok t = {.t = RLX_JT_OP, .line = lx->line, .s = op, .len = strlen(op)};
        push(lx, t);
        lx->pos += t.len;
    }
}

void rlx_jinja_lex(rlx_jctx *c, const char *src, size_t len, rlx_jtok **out, size_t *n_out)
{
    /* jinja2 turns \r\n and \r into \n and drops one trailing newline. */
    char *s = rlx_jinja_alloc(c, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n')
                i++;
        } else {
            s[n++] = src[i];
        }
    }
    if (n && s[n - 1] == '\n')
        n--;
    s[n] = 0;

    lexer lx = {.c = c, .s = s, .n = n, .line = 1};
    while (lx.pos < lx.n) {
        /* Find the next tag opener. */
        size_t p = lx.pos;
        const char *open = NULL;
        while (p + 1 < lx.n) {
            if (s[p] == '{' && (s[p + 1] == '{' || s[p + 1] == '%' || s[p + 1] == '#')) {
                open = s + p;
                break;
            }
            p++;
        }
        if (!open) {
            emit_data(&lx, s + lx.pos, lx.n - lx.pos, lx.line);
            lx.line += count_lines(s + lx.pos, lx.n - lx.pos);
            lx.pos = lx.n;
            break;
        }
        char kind = open[1] == '{' ? 'v' : open[1] == '%' ? 'b' : 'c';
        char mod = p + 2 < lx.n && (s[p + 2] == '-' || s[p + 2] == '+') ? s[p + 2] : 0;
        if (kind == 'v' && mod == '+')
            mod = 0; /* "{{+" is not a marker: the '+' is a unary plus */
        bool line_starting = lx.pos == 0 || s[lx.pos - 1] == '\n';
        const char *text = s + lx.pos;
        size_t tlen = p - lx.pos;
        int text_line = lx.line;
        lx.line += count_lines(text, tlen);
        if (mod == '-') {
            while (tlen && is_space(text[tlen - 1]))
                tlen--;
        } else if (mod != '+' && kind != 'v') {
            /* lstrip_blocks: blank space from the line start up to the tag goes. */
            size_t lpos = tlen;
            while (lpos && text[lpos - 1] != '\n')
                lpos--;
            if (lpos > 0 || line_starting) {
                bool blank = lpos < tlen;
                for (size_t i = lpos; i < tlen; i++)
                    if (!is_space(text[i]))
                        blank = false;
                if (blank)
                    tlen = lpos;
            }
        }
        emit_data(&lx, text, tlen, text_line);
        lx.pos = p + 2 + (mod ? 1 : 0);
        int open_line = lx.line;
        if (kind == 'c') {
            /* Comments end at the first "#}", "-#}" or "+#}". */
            size_t q = lx.pos;
            while (q + 1 < lx.n && !(s[q] == '#' && s[q + 1] == '}'))
                q++;
            if (q + 1 >= lx.n)
                rlx_jinja_fail(c, RLX_ERR_FORMAT, open_line,
                               "unexpected end of template, the comment is never closed");
            char emod = q > lx.pos && (s[q - 1] == '-' || s[q - 1] == '+') ? s[q - 1] : 0;
            lx.line += count_lines(s + lx.pos, q - lx.pos);
            lx.pos = q + 2;
            if (emod == '-')
                skip_space(&lx);
            else if (!emod && lx.pos < lx.n && s[lx.pos] == '\n') {
                lx.pos++;
                lx.line++;
            }
            continue;
        }
        if (kind == 'b') {
            /* {% raw %} ... {% endraw %}: body copied as data. */
            size_t q = lx.pos;
            while (q < lx.n && is_space(s[q]))
                q++;
            if (q + 3 <= lx.n && !memcmp(s + q, "raw", 3)) {
                size_t e = q + 3;
                while (e < lx.n && is_space(s[e]))
                    e++;
                char rm = e < lx.n && (s[e] == '-' || s[e] == '+') ? s[e] : 0;
                if (e + (rm ? 1 : 0) + 2 <= lx.n && !memcmp(s + e + (rm ? 1 : 0), "%}", 2)) {
                    size_t body = e + (rm ? 1 : 0) + 2;
                    if (rm == '-')
                        while (body < lx.n && is_space(s[body]))
                            body++;
                    else if (!rm && body < lx.n && s[body] == '\n')
                        body++;
                    /* find {%[-+]? endraw [-+]?%} */
                    for (size_t k = body; k + 1 < lx.n; k++) {
                        if (s[k] != '{' || s[k + 1] != '%')
                            continue;
                        size_t m = k + 2;
                        char bm = m < lx.n && (s[m] == '-' || s[m] == '+') ? s[m] : 0;
                        if (bm)
                            m++;
                        while (m < lx.n && is_space(s[m]))
                            m++;
                        if (m + 6 > lx.n || memcmp(s + m, "endraw", 6))
                            continue;
                        m += 6;
                        while (m < lx.n && is_space(s[m]))
                            m++;
                        char em = m < lx.n && (s[m] == '-' || s[m] == '+') ? s[m] : 0;
                        if (em)
                            m++;
                        if (m + 2 > lx.n || memcmp(s + m, "%}", 2))
                            continue;
                        size_t blen = k - body;
                        if (bm == '-')
                            while (blen && is_space(s[body + blen - 1]))
                                blen--;
                        emit_data(&lx, s + body, blen, lx.line);
                        lx.line += count_lines(s + lx.pos, m + 2 - lx.pos);
                        lx.pos = m + 2;
                        if (em == '-')
                            skip_space(&lx);
                        else if (!em && lx.pos < lx.n && s[lx.pos] == '\n') {
                            lx.pos++;
                            lx.line++;
                        }
                        goto next;
                    }
                    rlx_jinja_fail(c, RLX_ERR_FORMAT, open_line,
                                   "'raw' block is never closed with 'endraw'");
                }
            }
        }
        push_simple(&lx, kind == 'v' ? RLX_JT_VAR_BEGIN : RLX_JT_BLOCK_BEGIN, open_line);
        lex_tag(&lx, kind, open_line);
    next:;
    }
    push_simple(&lx, RLX_JT_EOF, lx.line);
    *out = lx.toks;
    *n_out = lx.n_toks;
}
