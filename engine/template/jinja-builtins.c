/* Filters, tests, methods and globals, each written to match what jinja2
 * 3.1 (and Python's str/dict methods under its sandbox) returns. */
#include "engine/template/jinja-internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define UNUSED(x) (void)(x)

rlx_jv rlx_jinja_arg(const rlx_jargs *a, size_t i, const char *name, rlx_jv dflt)
{
    if (i < a->npos)
        return a->pos[i];
    for (size_t k = 0; name && k < a->nkw; k++)
        if (!strcmp(a->kwn[k], name))
            return a->kw[k];
    return dflt;
}

#define ARG(i, name, dflt) rlx_jinja_arg(a, (i), (name), (dflt))

static bool given(rlx_jv v)
{
    return v.t != RLX_JV_UNDEF && v.t != RLX_JV_NONE;
}

static bool is_int(rlx_jv v)
{
    return v.t == RLX_JV_INT || v.t == RLX_JV_BOOL;
}

static int64_t to_int(rlx_jv v)
{
    return v.t == RLX_JV_INT ? v.u.i : v.t == RLX_JV_BOOL ? (int64_t)v.u.b : 0;
}

static rlx_jv to_str(rlx_jrender *r, rlx_jv v)
{
    return rlx_jv_to_str(r, v);
}

static const rlx_jstr *need_str(rlx_jrender *r, int line, rlx_jv v, const char *what)
{
    if (v.t != RLX_JV_STR)
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "%s must be a string, not %s", what,
                        rlx_jv_type_desc(v));
    return v.u.s;
}

static int64_t need_int(rlx_jrender *r, int line, rlx_jv v, const char *what)
{
    if (!is_int(v))
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "%s must be an integer, not %s", what,
                        rlx_jv_type_desc(v));
    return to_int(v);
}

static rlx_jv tuple2(rlx_jrender *r, rlx_jv a, rlx_jv b)
{
    rlx_jv t = rlx_jv_list(r->c, 2);
    t.u.l->tuple = true;
    rlx_jlist_push(r->c, t.u.l, a);
    rlx_jlist_push(r->c, t.u.l, b);
    return t;
}

/* ---- Python whitespace and case ------------------------------------------------------------- */

/* Length of the whitespace character (str.isspace) starting at p, or 0. */
static size_t ws_len(const char *s, size_t avail)
{
    const unsigned char *p = (const unsigned char *)s;
    if (!avail)
        return 0;
    if (p[0] == ' ' || (p[0] >= 0x09 && p[0] <= 0x0d) || (p[0] >= 0x1c && p[0] <= 0x1f))
        return 1;
    if (avail >= 2 && p[0] == 0xC2 && (p[1] == 0x85 || p[1] == 0xA0))
        return 2;
    if (avail >= 3) {
        if (p[0] == 0xE1 && p[1] == 0x9A && p[2] == 0x80)
            return 3;
        if (p[0] == 0xE2 && p[1] == 0x80 &&
            ((p[2] >= 0x80 && p[2] <= 0x8A) || p[2] == 0xA8 || p[2] == 0xA9 || p[2] == 0xAF))
            return 3;
        if (p[0] == 0xE2 && p[1] == 0x81 && p[2] == 0x9F)
            return 3;
        if (p[0] == 0xE3 && p[1] == 0x80 && p[2] == 0x80)
            return 3;
    }
    return 0;
}

/* Length of the whitespace character ending at s[n-1], or 0. */
static size_t ws_len_back(const char *s, size_t n)
{
    for (size_t k = 1; k <= 3 && k <= n; k++)
        if (ws_len(s + n - k, k) == k)
            return k;
    return 0;
}

static size_t cp_len(const char *s, size_t avail)
{
    size_t k = 1;
    while (k < avail && ((unsigned char)s[k] & 0xC0) == 0x80)
        k++;
    return k;
}

/* strchr() for a set of characters, false for NUL (which strchr would find). */
static bool one_of(const char *set, char c)
{
    return c != 0 && strchr(set, c) != NULL;
}

/* Is the code point at s (len k) one of the code points in set? */
static bool in_set(const char *s, size_t k, const rlx_jstr *set)
{
    for (size_t i = 0; i < set->len;) {
        size_t m = cp_len(set->s + i, set->len - i);
        if (m == k && !memcmp(set->s + i, s, k))
            return true;
        i += m;
    }
    return false;
}

/* which: 1 left, 2 right, 3 both; chars NULL means whitespace. */
static rlx_jv strip(rlx_jrender *r, const rlx_jstr *s, const rlx_jstr *chars, int which)
{
    size_t a = 0, b = s->len;
    if (which & 1) {
        while (a < b) {
            size_t k = chars ? cp_len(s->s + a, b - a) : ws_len(s->s + a, b - a);
            if (!k || (chars && !in_set(s->s + a, k, chars)))
                break;
            a += k;
        }
    }
    if (which & 2) {
        while (b > a) {
            size_t k;
            if (chars) {
                k = 1;
                while (k < b - a && ((unsigned char)s->s[b - k] & 0xC0) == 0x80)
                    k++;
                if (!in_set(s->s + b - k, k, chars))
                    break;
            } else {
                k = ws_len_back(s->s + a, b - a);
                if (!k)
                    break;
            }
            b -= k;
        }
    }
    return rlx_jv_strn(r->c, s->s + a, b - a);
}

static char up(char ch)
{
    return ch >= 'a' && ch <= 'z' ? (char)(ch - 32) : ch;
}

static char low(char ch)
{
    return ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch;
}

static bool is_alpha(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

/* Decode one UTF-8 code point at s (avail bytes); *k gets its length. */
static uint32_t utf8_decode(const char *s, size_t avail, size_t *k)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = cp_len(s, avail);
    uint32_t cp = n == 1 ? p[0] : n == 2 ? p[0] & 31u : n == 3 ? p[0] & 15u : p[0] & 7u;
    for (size_t i = 1; i < n; i++)
        cp = (cp << 6) | (p[i] & 63u);
    *k = n;
    return cp;
}

static size_t utf8_encode(char *o, uint32_t cp)
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

/* Simple case mapping for Latin-1, Latin Extended-A, Greek and Cyrillic;
 * other scripts are left as they are (a documented gap). */
static uint32_t cp_upper(uint32_t c)
{
    if (c >= 'a' && c <= 'z')
        return c - 32;
    if (c == 0xB5)
        return 0x39C;
    if ((c >= 0xE0 && c <= 0xFE && c != 0xF7))
        return c - 32;
    if (c == 0xFF)
        return 0x178;
    if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 &&
        c != 0x17F) {
        bool odd_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
        if (odd_lower ? (c & 1) == 0 : (c & 1) == 1)
            return c - 1;
        return c;
    }
    if (c == 0x131)
        return 'I';
    if (c == 0x17F)
        return 'S';
    if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2)
        return c - 32;
    if (c == 0x3C2)
        return 0x3A3;
    if (c >= 0x3AC && c <= 0x3AF)
        return c == 0x3AC ? 0x386 : c - 37;
    if (c >= 0x430 && c <= 0x44F)
        return c - 32;
    if (c >= 0x450 && c <= 0x45F)
        return c - 80;
    return c;
}

static uint32_t cp_lower(uint32_t c)
{
    if (c >= 'A' && c <= 'Z')
        return c + 32;
    if ((c >= 0xC0 && c <= 0xDE && c != 0xD7))
        return c + 32;
    if (c == 0x178)
        return 0xFF;
    if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 &&
        c != 0x17F) {
        bool odd_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
        if (odd_lower ? (c & 1) == 1 : (c & 1) == 0)
            return c + 1;
        return c;
    }
    if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2)
        return c + 32;
    if (c == 0x386)
        return 0x3AC;
    if (c >= 0x388 && c <= 0x38A)
        return c + 37;
    if (c >= 0x410 && c <= 0x42F)
        return c + 32;
    if (c >= 0x400 && c <= 0x40F)
        return c + 80;
    return c;
}

static rlx_jv map_case(rlx_jrender *r, const rlx_jstr *s, char (*f)(char))
{
    bool to_upper = f == up;
    char *o = rlx_jinja_alloc(r->c, s->len * 2 + 1);
    size_t k = 0;
    for (size_t i = 0; i < s->len;) {
        if ((unsigned char)s->s[i] < 0x80) {
            o[k++] = f(s->s[i++]);
            continue;
        }
        size_t n;
        uint32_t cp = utf8_decode(s->s + i, s->len - i, &n);
        if (to_upper && cp == 0xDF) {
            o[k++] = 'S';
            o[k++] = 'S';
        } else {
            k += utf8_encode(o + k, to_upper ? cp_upper(cp) : cp_lower(cp));
        }
        i += n;
    }
    return rlx_jv_strn(r->c, o, k);
}

static rlx_jv capitalize(rlx_jrender *r, const rlx_jstr *s)
{
    char *o = rlx_jinja_alloc(r->c, s->len + 1);
    for (size_t i = 0; i < s->len; i++)
        o[i] = i ? low(s->s[i]) : up(s->s[i]);
    return rlx_jv_strn(r->c, o, s->len);
}

/* Python's str.title(): a cased letter after an uncased character starts a word. */
static rlx_jv py_title(rlx_jrender *r, const rlx_jstr *s)
{
    char *o = rlx_jinja_alloc(r->c, s->len + 1);
    bool prev_cased = false;
    for (size_t i = 0; i < s->len; i++) {
        char ch = s->s[i];
        bool nonascii = (unsigned char)ch >= 0x80;
        if (is_alpha(ch)) {
            o[i] = prev_cased ? low(ch) : up(ch);
            prev_cased = true;
        } else {
            o[i] = ch;
            prev_cased = nonascii;
        }
    }
    return rlx_jv_strn(r->c, o, s->len);
}

/* jinja2's title filter: words begin after runs of '-', whitespace, '(', '{', '[', '<'. */
static rlx_jv jinja_title(rlx_jrender *r, const rlx_jstr *s)
{
    char *o = rlx_jinja_alloc(r->c, s->len + 1);
    bool start = true;
    for (size_t i = 0; i < s->len;) {
        size_t w = ws_len(s->s + i, s->len - i);
        char ch = s->s[i];
        bool delim = w || ch == '-' || ch == '(' || ch == '{' || ch == '[' || ch == '<';
        if (!w)
            w = 1;
        if (delim) {
            memcpy(o + i, s->s + i, w);
            start = true;
        } else {
            o[i] = start ? up(ch) : low(ch);
            start = false;
        }
        i += w;
    }
    return rlx_jv_strn(r->c, o, s->len);
}

static rlx_jv str_replace(rlx_jrender *r, int line, const rlx_jstr *s, const rlx_jstr *old,
                          const rlx_jstr *new_, int64_t count)
{
    rlx_jbuf b = {0};
    int64_t done = 0;
    if (!old->len) {
        for (size_t i = 0; i <= s->len;) {
            if (count < 0 || done < count) {
                rlx_jbuf_put(r, &b, new_->s, new_->len);
                done++;
            }
            if (i == s->len)
                break;
            size_t k = cp_len(s->s + i, s->len - i);
            rlx_jbuf_put(r, &b, s->s + i, k);
            i += k;
        }
        return rlx_jbuf_value(r, &b);
    }
    size_t i = 0;
    while (i < s->len) {
        const char *hit =
            (count < 0 || done < count) ? memmem(s->s + i, s->len - i, old->s, old->len) : NULL;
        if (!hit)
            break;
        size_t at = (size_t)(hit - s->s);
        rlx_jbuf_put(r, &b, s->s + i, at - i);
        rlx_jbuf_put(r, &b, new_->s, new_->len);
        i = at + old->len;
        done++;
    }
    rlx_jbuf_put(r, &b, s->s + i, s->len - i);
    UNUSED(line);
    return rlx_jbuf_value(r, &b);
}

/* ---- attribute paths ("a.b.0") as filters use them ------------------------------------------ */

static rlx_jv lookup_path(rlx_jrender *r, int line, rlx_jv v, const char *path)
{
    const char *p = path;
    while (*p) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        char part[256];
        if (len >= sizeof part)
            len = sizeof part - 1;
        memcpy(part, p, len);
        part[len] = 0;
        bool digits = len > 0;
        for (size_t i = 0; i < len; i++)
            if (part[i] < '0' || part[i] > '9')
                digits = false;
        if (v.t == RLX_JV_UNDEF)
            return v;
        if (digits && v.t == RLX_JV_LIST) {
            size_t idx = (size_t)strtoull(part, NULL, 10);
            v = idx < v.u.l->n ? v.u.l->v[idx] : rlx_jv_undef;
        } else if ((v.t == RLX_JV_DICT || v.t == RLX_JV_NS) && rlx_jdict_gets(v.u.d, part)) {
            v = *rlx_jdict_gets(v.u.d, part);
        } else {
            v = rlx_jinja_getattr(r, line, v, part);
        }
        p += len;
        if (*p == '.')
            p++;
    }
    return v;
}

static rlx_jv attr_of(rlx_jrender *r, int line, rlx_jv item, rlx_jv attribute)
{
    if (is_int(attribute)) {
        char tmp[32];
        snprintf(tmp, sizeof tmp, "%lld", (long long)to_int(attribute));
        return lookup_path(r, line, item, tmp);
    }
    return lookup_path(r, line, item, need_str(r, line, attribute, "attribute")->s);
}

/* ---- sorting -------------------------------------------------------------------------------- */

typedef struct sort_ctx {
    rlx_jrender *r;
    int line;
    bool case_sensitive;
} sort_ctx;

static rlx_jv sort_key(sort_ctx *sc, rlx_jv v)
{
    if (!sc->case_sensitive && v.t == RLX_JV_STR)
        return map_case(sc->r, v.u.s, low);
    return v;
}

/* Stable merge sort of keys[] carrying vals[] (both length n). */
static void merge_sort(sort_ctx *sc, rlx_jv *keys, rlx_jv *vals, size_t n, bool reverse)
{
    if (n < 2)
        return;
    size_t h = n / 2;
    merge_sort(sc, keys, vals, h, reverse);
    merge_sort(sc, keys + h, vals + h, n - h, reverse);
    rlx_jv *tk = rlx_jinja_alloc(sc->r->c, n * sizeof *tk);
    rlx_jv *tv = rlx_jinja_alloc(sc->r->c, n * sizeof *tv);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        int c = rlx_jv_compare(sc->r, sc->line, keys[j], keys[i], "<");
        bool take_right = reverse ? c > 0 : c < 0;
        if (take_right) {
            tk[k] = keys[j];
            tv[k++] = vals[j++];
        } else {
            tk[k] = keys[i];
            tv[k++] = vals[i++];
        }
    }
    while (i < h) {
        tk[k] = keys[i];
        tv[k++] = vals[i++];
    }
    while (j < n) {
        tk[k] = keys[j];
        tv[k++] = vals[j++];
    }
    memcpy(keys, tk, n * sizeof *tk);
    memcpy(vals, tv, n * sizeof *tv);
}

/* ---- printf-style formatting (Python's str % args) ------------------------------------------ */

static void pad_put(rlx_jrender *r, rlx_jbuf *b, const char *s, size_t n, int64_t width, bool left)
{
    int64_t len = (int64_t)rlx_jinja_utf8_len(s, n);
    if (!left)
        for (int64_t i = len; i < width; i++)
            rlx_jbuf_puts(r, b, " ");
    rlx_jbuf_put(r, b, s, n);
    if (left)
        for (int64_t i = len; i < width; i++)
            rlx_jbuf_puts(r, b, " ");
}

rlx_jv rlx_jinja_percent_format(rlx_jrender *r, int line, rlx_jv fmtv, rlx_jv args)
{
    const rlx_jstr *fmt = fmtv.u.s;
    bool mapping = args.t == RLX_JV_DICT;
    const rlx_jv *items = &args;
    size_t nitems = 1, next = 0;
    if (args.t == RLX_JV_LIST && args.u.l->tuple) {
        items = args.u.l->v;
        nitems = args.u.l->n;
    }
    rlx_jbuf b = {0};
    for (size_t i = 0; i < fmt->len; i++) {
        if (fmt->s[i] != '%') {
            rlx_jbuf_put(r, &b, fmt->s + i, 1);
            continue;
        }
        if (++i >= fmt->len)
            rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "incomplete format");
        rlx_jv arg = rlx_jv_undef;
        bool have_arg = false;
        if (fmt->s[i] == '(') {
            size_t e = i + 1;
            while (e < fmt->len && fmt->s[e] != ')')
                e++;
            if (e >= fmt->len || !mapping)
                rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "format requires a mapping");
            rlx_jv key = rlx_jv_strn(r->c, fmt->s + i + 1, e - i - 1);
            rlx_jv *v = rlx_jdict_get(args.u.d, key);
            if (!v)
                rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "format key '%s' is missing", key.u.s->s);
            arg = *v;
            have_arg = true;
            i = e + 1;
        }
        char flags[8] = {0};
        size_t nf = 0;
        while (i < fmt->len && one_of("-+ #0", fmt->s[i]) && nf < sizeof flags - 1)
            flags[nf++] = fmt->s[i++];
        int64_t width = -1, prec = -1;
        while (i < fmt->len && fmt->s[i] >= '0' && fmt->s[i] <= '9' && width < 100000)
            width = (width < 0 ? 0 : width * 10) + (fmt->s[i++] - '0');
        if (i < fmt->len && fmt->s[i] == '.') {
            prec = 0;
            i++;
            while (i < fmt->len && fmt->s[i] >= '0' && fmt->s[i] <= '9' && prec < 1000)
                prec = prec * 10 + (fmt->s[i++] - '0');
        }
        if (i >= fmt->len)
            rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "incomplete format");
        char conv = fmt->s[i];
        if (conv == '%') {
            rlx_jbuf_puts(r, &b, "%");
            continue;
        }
        if (!have_arg) {
            if (mapping && nitems == 1 && items == &args) {
                arg = args;
            } else {
                if (next >= nitems)
                    rlx_jinja_rfail(r, RLX_ERR_TYPE, line,
                                    "not enough arguments for format string");
                arg = items[next++];
            }
        }
        bool left = strchr(flags, '-') != NULL;
        char spec[32], tmp[512];
        if (conv == 's' || conv == 'r' || conv == 'a') {
            rlx_jbuf sb = {0};
            if (conv == 's')
                rlx_jv_write_str(r, &sb, arg);
            else
                rlx_jv_write_repr(r, &sb, arg);
            size_t n = sb.n;
            if (prec >= 0) {
                /* precision counts code points */
                size_t k = 0;
                int64_t cps = 0;
                while (k < n && cps < prec) {
                    k += cp_len(sb.p + k, n - k);
                    cps++;
                }
                n = k;
            }
            pad_put(r, &b, sb.p ? sb.p : "", n, width, left);
            continue;
        }
        if (!is_int(arg) && arg.t != RLX_JV_FLOAT)
            rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "%%%c format: a real number is required, not %s",
                            conv, rlx_jv_py_type(arg));
        if (one_of("diuxXoc", conv)) {
            int64_t v = is_int(arg) ? to_int(arg) : (int64_t)arg.u.f;
            if (conv == 'c') {
                char u[8];
                size_t k = 0;
                if (v < 0 || v > 0x10FFFF)
                    rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "%%c arg not in range(0x110000)");
                k = utf8_encode(u, (uint32_t)v);
                pad_put(r, &b, u, k, width, left);
                continue;
            }
            char c = conv == 'i' || conv == 'u' ? 'd' : conv;
            snprintf(spec, sizeof spec, "%%%s%s%sll%c", flags, width >= 0 ? "*" : "",
                     prec >= 0 ? ".*" : "", c);
            long long lv = (long long)v;
            if (width >= 0 && prec >= 0)
                snprintf(tmp, sizeof tmp, spec, (int)width, (int)prec, lv);
            else if (width >= 0)
                snprintf(tmp, sizeof tmp, spec, (int)width, lv);
            else if (prec >= 0)
                snprintf(tmp, sizeof tmp, spec, (int)prec, lv);
            else
                snprintf(tmp, sizeof tmp, spec, lv);
            rlx_jbuf_puts(r, &b, tmp);
            continue;
        }
        if (one_of("eEfFgG", conv)) {
            double v = is_int(arg) ? (double)to_int(arg) : arg.u.f;
            snprintf(spec, sizeof spec, "%%%s%s.*%c", flags, width >= 0 ? "*" : "", conv);
            int p = prec >= 0 ? (int)prec : 6;
            if (width >= 0)
                snprintf(tmp, sizeof tmp, spec, (int)width, p, v);
            else
                snprintf(tmp, sizeof tmp, spec, p, v);
            rlx_jbuf_puts(r, &b, tmp);
            continue;
        }
        rlx_jinja_rfail(r, RLX_ERR_UNSUPPORTED, line, "unsupported format character '%c'", conv);
    }
    if (!mapping && next < nitems)
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line,
                        "not all arguments converted during string formatting");
    return rlx_jbuf_value(r, &b);
}

/* One replacement field of str.format: value, conversion and format spec. */
static void format_field(rlx_jrender *r, int line, rlx_jbuf *b, rlx_jv v, char conv,
                         const char *spec, size_t slen)
{
    if (conv == 'r' || conv == 's' || conv == 'a') {
        rlx_jbuf t = {0};
        if (conv == 's')
            rlx_jv_write_str(r, &t, v);
        else
            rlx_jv_write_repr(r, &t, v);
        v = rlx_jbuf_value(r, &t);
    }
    if (v.t == RLX_JV_BOOL && slen)
        v = rlx_jv_int(v.u.b); /* bool.__format__ is int's once there is a spec */
    /* [[fill]align][sign][0][width][.precision][type] */
    size_t i = 0;
    char fill = ' ', align = 0, sign = 0, type = 0;
    bool explicit_fill = false;
    if (slen >= 2 && one_of("<>^=", spec[1])) {
        fill = spec[0];
        align = spec[1];
        explicit_fill = true;
        i = 2;
    } else if (slen >= 1 && one_of("<>^=", spec[0])) {
        align = spec[0];
        i = 1;
    }
    if (i < slen && one_of("+- ", spec[i]))
        sign = spec[i++];
    bool zero = false;
    if (i < slen && spec[i] == '0') {
        zero = true;
        if (!explicit_fill)
            fill = '0';
        i++;
    }
    int64_t width = 0, prec = -1;
    while (i < slen && spec[i] >= '0' && spec[i] <= '9' && width < 10000)
        width = width * 10 + (spec[i++] - '0');
    if (i < slen && spec[i] == '.') {
        prec = 0;
        i++;
        while (i < slen && spec[i] >= '0' && spec[i] <= '9' && prec < 1000)
            prec = prec * 10 + (spec[i++] - '0');
    }
    if (i < slen)
        type = spec[i++];
    if (i != slen || (slen && i == slen && type == 0 && spec[slen - 1] == 0))
        rlx_jinja_rfail(r, RLX_ERR_UNSUPPORTED, line, "format spec '%.*s' is not supported",
                        (int)slen, spec);
    rlx_jbuf body = {0};
    bool numeric = is_int(v) || v.t == RLX_JV_FLOAT;
    if (!type && numeric && v.t != RLX_JV_BOOL) {
        /* No type code: str(), or general format when a precision is given. */
        char out[512];
        if (v.t == RLX_JV_FLOAT && prec >= 0)
            snprintf(out, sizeof out, "%.*g", (int)(prec ? prec : 1), v.u.f);
        else
            out[0] = 0;
        rlx_jbuf t = {0};
        if (out[0])
            rlx_jbuf_puts(r, &t, out);
        else
            rlx_jv_write_str(r, &t, v);
        if (sign && sign != '-' && t.n && t.p[0] != '-')
            rlx_jbuf_put(r, &body, sign == '+' ? "+" : " ", 1);
        rlx_jbuf_put(r, &body, t.p, t.n);
    } else if (!type || type == 's') {
        if (type == 's' && v.t != RLX_JV_STR)
            rlx_jinja_rfail(r, RLX_ERR_TYPE, line,
                            "Unknown format code 's' for object of type '%s'", rlx_jv_py_type(v));
        rlx_jbuf t = {0};
        rlx_jv_write_str(r, &t, v);
        size_t n = t.n;
        if (prec >= 0) {
            size_t k = 0;
            for (int64_t c = 0; k < n && c < prec; c++)
                k += cp_len(t.p + k, n - k);
            n = k;
        }
        rlx_jbuf_put(r, &body, t.p ? t.p : "", n);
    } else if (numeric && one_of("dxXobcfFeEgG%", type)) {
        char pf[64], out[512];
        const char *sg = sign == '+' ? "+" : sign == ' ' ? " " : "";
        if (one_of("dxXoc", type)) {
            if (v.t == RLX_JV_FLOAT)
                rlx_jinja_rfail(r, RLX_ERR_TYPE, line,
                                "Unknown format code '%c' for object of type 'float'", type);
            if (type == 'c') {
                char u[8];
                rlx_jbuf_put(r, &body, u, utf8_encode(u, (uint32_t)to_int(v) & 0x1FFFFF));
            } else {
                snprintf(pf, sizeof pf, "%%%sll%c", sg, type);
                snprintf(out, sizeof out, pf, (long long)to_int(v));
                rlx_jbuf_puts(r, &body, out);
            }
        } else if (type == 'b') {
            uint64_t x = (uint64_t)to_int(v);
            char bits[66];
            int k = 65;
            bits[k] = 0;
            do {
                bits[--k] = (char)('0' + (x & 1));
                x >>= 1;
            } while (x && k > 0);
            rlx_jbuf_puts(r, &body, bits + k);
        } else {
            double d = v.t == RLX_JV_FLOAT ? v.u.f : (double)to_int(v);
            char t = type;
            if (type == '%') {
                d *= 100;
                t = 'f';
            }
            snprintf(pf, sizeof pf, "%%%s.*%c", sg, t);
            snprintf(out, sizeof out, pf, (int)(prec >= 0 ? prec : 6), d);
            rlx_jbuf_puts(r, &body, out);
            if (type == '%')
                rlx_jbuf_puts(r, &body, "%");
        }
    } else {
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "Unknown format code '%c' for object of type '%s'",
                        type ? type : '?', rlx_jv_py_type(v));
    }
    const char *bp = body.p ? body.p : "";
    int64_t len = (int64_t)rlx_jinja_utf8_len(bp, body.n);
    bool num_out = numeric && v.t != RLX_JV_BOOL && type != 's';
    if (!align)
        align = zero && num_out ? '=' : num_out ? '>' : '<';
    int64_t padn = width > len ? width - len : 0;
    int64_t left = align == '>' ? padn : align == '^' ? padn / 2 : 0;
    int64_t right = padn - left;
    if (align == '=') {
        /* sign first, then zeros */
        size_t k = 0;
        if (body.n && one_of("+- ", bp[0]))
            rlx_jbuf_put(r, b, bp, ++k);
        for (int64_t z = 0; z < padn; z++)
            rlx_jbuf_put(r, b, &fill, 1);
        rlx_jbuf_put(r, b, bp + k, body.n - k);
        return;
    }
    for (int64_t z = 0; z < left; z++)
        rlx_jbuf_put(r, b, &fill, 1);
    rlx_jbuf_put(r, b, bp, body.n);
    for (int64_t z = 0; z < right; z++)
        rlx_jbuf_put(r, b, &fill, 1);
}

/* Python's str.format: "{}", "{0}", "{name}", "{x!r}", "{:>8.2f}", "{{" and "}}". */
static rlx_jv m_format(rlx_jrender *r, int line, rlx_jv self, const rlx_jargs *a)
{
    const rlx_jstr *f = self.u.s;
    rlx_jbuf b = {0};
    size_t auto_idx = 0;
    for (size_t i = 0; i < f->len; i++) {
        char ch = f->s[i];
        if (ch == '}') {
            if (i + 1 < f->len && f->s[i + 1] == '}') {
                rlx_jbuf_puts(r, &b, "}");
                i++;
                continue;
            }
            rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "Single '}' encountered in format string");
        }
        if (ch != '{') {
            rlx_jbuf_put(r, &b, &ch, 1);
            continue;
        }
        if (i + 1 < f->len && f->s[i + 1] == '{') {
            rlx_jbuf_puts(r, &b, "{");
            i++;
            continue;
        }
        size_t e = i + 1;
        while (e < f->len && f->s[e] != '}')
            e++;
        if (e >= f->len)
            rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "Single '{' encountered in format string");
        const char *field = f->s + i + 1;
        size_t flen = e - i - 1, nlen = 0;
        while (nlen < flen && field[nlen] != '!' && field[nlen] != ':')
            nlen++;
        char conv = 0;
        const char *spec = "";
        size_t slen = 0;
        size_t k = nlen;
        if (k < flen && field[k] == '!') {
            conv = k + 1 < flen ? field[k + 1] : 0;
            k += 2;
        }
        if (k < flen && field[k] == ':') {
            spec = field + k + 1;
            slen = flen - k - 1;
        }
        rlx_jv v;
        if (nlen == 0) {
            if (auto_idx >= a->npos)
                rlx_jinja_rfail(r, RLX_ERR_TYPE, line,
                                "Replacement index %zu out of range for positional args tuple",
                                auto_idx);
            v = a->pos[auto_idx++];
        } else if (field[0] >= '0' && field[0] <= '9') {
            size_t idx = (size_t)strtoul(field, NULL, 10);
            if (idx >= a->npos)
                rlx_jinja_rfail(r, RLX_ERR_TYPE, line,
                                "Replacement index %zu out of range for positional args tuple",
                                idx);
            v = a->pos[idx];
        } else {
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)nlen, field);
            v = rlx_jinja_arg(a, SIZE_MAX, name, rlx_jv_undef);
            if (v.t == RLX_JV_UNDEF)
                rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "format: no argument named '%s'", name);
        }
        format_field(r, line, &b, v, conv, spec, slen);
        i = e;
    }
    return rlx_jbuf_value(r, &b);
}

static rlx_jv f_format(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    /* jinja2: str(value) % (kwargs or args) */
    rlx_jv fmt = to_str(r, v);
    if (a->nkw) {
        rlx_jv d = rlx_jv_dict(r->c, a->nkw);
        for (size_t k = 0; k < a->nkw; k++)
            rlx_jdict_set(r->c, d.u.d, rlx_jv_cstr(r->c, a->kwn[k]), a->kw[k]);
        return rlx_jinja_percent_format(r, line, fmt, d);
    }
    rlx_jv t = rlx_jv_list(r->c, a->npos);
    t.u.l->tuple = true;
    for (size_t i = 0; i < a->npos; i++)
        rlx_jlist_push(r->c, t.u.l, a->pos[i]);
    return rlx_jinja_percent_format(r, line, fmt, t);
}

/* ---- filters -------------------------------------------------------------------------------- */

static rlx_jv f_abs(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    UNUSED(a);
    if (v.t == RLX_JV_FLOAT)
        return rlx_jv_float(fabs(v.u.f));
    if (is_int(v)) {
        int64_t i = to_int(v);
        if (i == INT64_MIN)
            rlx_jinja_rfail(r, RLX_ERR_UNSUPPORTED, line, "integer overflow");
        return rlx_jv_int(i < 0 ? -i : i);
    }
    rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "bad operand type for abs(): '%s'", rlx_jv_type_desc(v));
}

static rlx_jv f_attr(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    const rlx_jstr *name = need_str(r, line, ARG(0, "name", rlx_jv_undef), "attr name");
    if (v.t == RLX_JV_DICT) {
        rlx_jfilter_fn fn;
        bool unsafe;
        if (rlx_jinja_find_method(v, name->s, &fn, &unsafe))
            return rlx_jinja_getattr(r, line, v, name->s);
        return rlx_jv_undef_msg(r->c, "'dict object' has no attribute '%s'", name->s);
    }
    if (v.t == RLX_JV_UNDEF)
        return v;
    return rlx_jinja_getattr(r, line, v, name->s);
}

static rlx_jv f_batch(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    int64_t count = need_int(r, line, ARG(0, "linecount", rlx_jv_undef), "batch size");
    rlx_jv fill = ARG(1, "fill_with", rlx_jv_none);
    if (count <= 0)
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "batch size must be positive");
    rlx_jlist *l = rlx_jv_iterate(r, line, v);
    rlx_jv out = rlx_jv_list(r->c, 0);
    rlx_jv cur = rlx_jv_undef;
    for (size_t i = 0; i < l->n; i++) {
        if (cur.t == RLX_JV_UNDEF || (int64_t)cur.u.l->n == count) {
            cur = rlx_jv_list(r->c, (size_t)count < 64 ? (size_t)count : 64);
            rlx_jlist_push(r->c, out.u.l, cur);
        }
        rlx_jlist_push(r->c, cur.u.l, l->v[i]);
    }
    if (fill.t != RLX_JV_NONE && cur.t == RLX_JV_LIST)
        while ((int64_t)cur.u.l->n < count)
            rlx_jlist_push(r->c, cur.u.l, fill);
    return out;
}

static rlx_jv f_capitalize(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    UNUSED(line);
    UNUSED(a);
    return capitalize(r, to_str(r, v).u.s);
}

static rlx_jv f_default(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    UNUSED(r);
    UNUSED(line);
    rlx_jv dflt = ARG(0, "default_value", rlx_jv_cstr(r->c, ""));
    bool boolean = rlx_jv_truthy(ARG(1, "boolean", rlx_jv_bool(false)));
    if (v.t == RLX_JV_UNDEF || (boolean && !rlx_jv_truthy(v)))
        return dflt;
    return v;
}

static rlx_jv f_dictsort(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    sort_ctx sc = {r, line, rlx_jv_truthy(ARG(0, "case_sensitive", rlx_jv_bool(false)))};
    rlx_jv by = ARG(1, "by", rlx_jv_cstr(r->c, "key"));
    bool reverse = rlx_jv_truthy(ARG(2, "reverse", rlx_jv_bool(false)));
    if (v.t != RLX_JV_DICT)
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "dictsort needs a mapping, not %s",
                        rlx_jv_type_desc(v));
    const rlx_jstr *bys = need_str(r, line, by, "dictsort 'by'");
    bool by_value = !strcmp(bys->s, "value");
    if (!by_value && strcmp(bys->s, "key"))
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "You can only sort by either \"key\" or \"value\"");
    size_t n = v.u.d->n;
    rlx_jv *keys = rlx_jinja_alloc(r->c, (n ? n : 1) * sizeof *keys);
    rlx_jv *vals = rlx_jinja_alloc(r->c, (n ? n : 1) * sizeof *vals);
    for (size_t i = 0; i < n; i++) {
        keys[i] = sort_key(&sc, by_value ? v.u.d->v[i] : v.u.d->k[i]);
        vals[i] = tuple2(r, v.u.d->k[i], v.u.d->v[i]);
    }
    merge_sort(&sc, keys, vals, n, reverse);
    rlx_jv out = rlx_jv_list(r->c, n);
    for (size_t i = 0; i < n; i++)
        rlx_jlist_push(r->c, out.u.l, vals[i]);
    return out;
}

static rlx_jv f_escape(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    UNUSED(line);
    UNUSED(a);
    const rlx_jstr *s = to_str(r, v).u.s;
    rlx_jbuf b = {0};
    for (size_t i = 0; i < s->len; i++) {
        switch (s->s[i]) {
        case '&':
            rlx_jbuf_puts(r, &b, "&amp;");
            break;
        case '<':
            rlx_jbuf_puts(r, &b, "&lt;");
            break;
        case '>':
            rlx_jbuf_puts(r, &b, "&gt;");
            break;
        case '"':
            rlx_jbuf_puts(r, &b, "&#34;");
            break;
        case '\'':
            rlx_jbuf_puts(r, &b, "&#39;");
            break;
        default:
            rlx_jbuf_put(r, &b, s->s + i, 1);
        }
    }
    return rlx_jbuf_value(r, &b);
}

static rlx_jv f_first(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    UNUSED(a);
    rlx_jlist *l = rlx_jv_iterate(r, line, v);
    if (!l->n)
        return rlx_jv_undef_msg(r->c, "No first item, sequence was empty.");
    return l->v[0];
}

static rlx_jv f_last(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    UNUSED(a);
    rlx_jlist *l = rlx_jv_iterate(r, line, v);
    if (!l->n)
        return rlx_jv_undef_msg(r->c, "No last item, sequence was empty.");
    return l->v[l->n - 1];
}

/* Python float(str): surrounding whitespace allowed, the whole rest must parse. */
static bool parse_float(const rlx_jstr *s, double *out)
{
    size_t a = 0, b = s->len;
    while (a < b && ws_len(s->s + a, b - a))
        a += ws_len(s->s + a, b - a);
    while (b > a && ws_len_back(s->s + a, b - a))
        b -= ws_len_back(s->s + a, b - a);
    if (a == b || b - a > 300)
        return false;
    char tmp[320];
    size_t k = 0;
    for (size_t i = a; i < b; i++) {
        char ch = s->s[i];
        if (ch == '_') {
            /* one underscore between digits */
            if (i == a || i + 1 == b || !(s->s[i - 1] >= '0' && s->s[i - 1] <= '9') ||
                !(s->s[i + 1] >= '0' && s->s[i + 1] <= '9'))
                return false;
            continue;
        }
        if (ch == 'x' || ch == 'X' || ch == 'p' || ch == 'P')
            return false; /* strtod would take hex floats; Python does not */
        tmp[k++] = ch;
    }
    tmp[k] = 0;
    char *end = NULL;
    double d = strtod(tmp, &end);
    if (end != tmp + k)
        return false;
    /* strtod takes "infinity"/"nan" like Python; it also takes "nan(...)" which Python does not */
    if (strchr(tmp, '('))
        return false;
    *out = d;
    return true;
}

static bool parse_int(const rlx_jstr *s, int64_t *out)
{
    size_t a = 0, b = s->len;
    while (a < b && ws_len(s->s + a, b - a))
        a += ws_len(s->s + a, b - a);
    while (b > a && ws_len_back(s->s + a, b - a))
        b -= ws_len_back(s->s + a, b - a);
    if (a == b)
        return false;
    bool neg = false;
    if (s->s[a] == '+' || s->s[a] == '-') {
        neg = s->s[a] == '-';
        a++;
    }
    if (a == b)
        return false;
    uint64_t v = 0;
    for (size_t i = a; i < b; i++) {
        char ch = s->s[i];
        if (ch == '_') {
            if (i == a || i + 1 == b || s->s[i + 1] == '_')
                return false;
            continue;
        }
        if (ch < '0' || ch > '9')
            return false;
        if (v > (UINT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (uint64_t)(ch - '0');
    }
    if (v > (uint64_t)INT64_MAX + (neg ? 1 : 0))
        return false;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

static rlx_jv f_float(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    UNUSED(r);
    UNUSED(line);
    rlx_jv dflt = ARG(0, "default", rlx_jv_float(0.0));
    double d;
    if (v.t == RLX_JV_FLOAT)
        return v;
    if (is_int(v))
        return rlx_jv_float((double)to_int(v));
    if (v.t == RLX_JV_STR && parse_float(v.u.s, &d))
        return rlx_jv_float(d);
    return dflt;
}

static rlx_jv f_int(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    UNUSED(r);
    UNUSED(line);
    rlx_jv dflt = ARG(0, "default", rlx_jv_int(0));
    if (is_int(v))
        return rlx_jv_int(to_int(v));
    if (v.t == RLX_JV_FLOAT) {
        if (!isfinite(v.u.f) || fabs(v.u.f) >= 9.2e18)
            return dflt;
        return rlx_jv_int((int64_t)v.u.f);
    }
    if (v.t == RLX_JV_STR) {
        int64_t i;
        double d;
        if (parse_int(v.u.s, &i))
            return rlx_jv_int(i);
        if (parse_float(v.u.s, &d) && isfinite(d) && fabs(d) < 9.2e18)
            return rlx_jv_int((int64_t)d);
    }
    return dflt;
}

static rlx_jv f_indent(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    rlx_jv width = ARG(0, "width", rlx_jv_int(4));
    bool first = rlx_jv_truthy(ARG(1, "first", rlx_jv_bool(false)));
    bool blank = rlx_jv_truthy(ARG(2, "blank", rlx_jv_bool(false)));
    rlx_jbuf ind = {0};
    if (width.t == RLX_JV_STR)
        rlx_jbuf_put(r, &ind, width.u.s->s, width.u.s->len);
    else
        for (int64_t i = need_int(r, line, width, "indent width"); i > 0; i--)
            rlx_jbuf_puts(r, &ind, " ");
    const rlx_jstr *s = to_str(r, v).u.s;
    /* jinja2 appends "\n" and then uses str.splitlines(). */
    rlx_jbuf src = {0};
    rlx_jbuf_put(r, &src, s->s, s->len);
    rlx_jbuf_puts(r, &src, "\n");
    rlx_jbuf out = {0};
    size_t nl = 0;
    for (size_t i = 0; i < src.n;) {
        size_t j = i;
        size_t brk = 0;
        while (j < src.n) {
            char ch = src.p[j];
            if (ch == '\r' && j + 1 < src.n && src.p[j + 1] == '\n')
                brk = 2;
            else if (ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f' || ch == 0x1c ||
                     ch == 0x1d || ch == 0x1e)
                brk = 1;
            else if ((unsigned char)ch == 0xC2 && j + 1 < src.n &&
                     (unsigned char)src.p[j + 1] == 0x85)
                brk = 2;
            else if ((unsigned char)ch == 0xE2 && j + 2 < src.n &&
                     (unsigned char)src.p[j + 1] == 0x80 &&
                     ((unsigned char)src.p[j + 2] == 0xA8 || (unsigned char)src.p[j + 2] == 0xA9))
                brk = 3;
            if (brk)
                break;
            j++;
        }
        size_t len = j - i;
        if (nl > 0) {
            rlx_jbuf_puts(r, &out, "\n");
            if (len || blank)
                rlx_jbuf_put(r, &out, ind.p, ind.n);
        }
        rlx_jbuf_put(r, &out, src.p + i, len);
        nl++;
        i = j + brk;
    }
    rlx_jbuf res = {0};
    if (first)
        rlx_jbuf_put(r, &res, ind.p, ind.n);
    rlx_jbuf_put(r, &res, out.p, out.n);
    return rlx_jbuf_value(r, &res);
}

static rlx_jv f_items(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    UNUSED(a);
    rlx_jv out = rlx_jv_list(r->c, 0);
    if (v.t == RLX_JV_UNDEF)
        return out;
    if (v.t != RLX_JV_DICT)
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "Can only get item pairs from a mapping.");
    for (size_t i = 0; i < v.u.d->n; i++)
        rlx_jlist_push(r->c, out.u.l, tuple2(r, v.u.d->k[i], v.u.d->v[i]));
    return out;
}

static rlx_jv f_join(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    rlx_jv sep = ARG(0, "d", rlx_jv_cstr(r->c, ""));
    rlx_jv attribute = ARG(1, "attribute", rlx_jv_none);
    rlx_jlist *l = rlx_jv_iterate(r, line, v);
    const rlx_jstr *ss = to_str(r, sep).u.s;
    rlx_jbuf b = {0};
    for (size_t i = 0; i < l->n; i++) {
        if (i)
            rlx_jbuf_put(r, &b, ss->s, ss->len);
        rlx_jv item = given(attribute) ? attr_of(r, line, l->v[i], attribute) : l->v[i];
        rlx_jv_write_str(r, &b, item);
    }
    return rlx_jbuf_value(r, &b);
}

static rlx_jv f_length(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    UNUSED(a);
    switch (v.t) {
    case RLX_JV_UNDEF:
        return rlx_jv_int(0);
    case RLX_JV_STR:
        return rlx_jv_int((int64_t)rlx_jinja_utf8_len(v.u.s->s, v.u.s->len));
    case RLX_JV_LIST:
        return rlx_jv_int((int64_t)v.u.l->n);
    case RLX_JV_DICT:
        return rlx_jv_int((int64_t)v.u.d->n);
    default:
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "object of type '%s' has no len()",
                        rlx_jv_type_desc(v));
    }
}

static rlx_jv f_list(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    UNUSED(a);
    rlx_jlist *l = rlx_jv_iterate(r, line, v);
    rlx_jv out = rlx_jv_list(r->c, l->n);
    for (size_t i = 0; i < l->n; i++)
        rlx_jlist_push(r->c, out.u.l, l->v[i]);
    return out;
}

static rlx_jv f_lower(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    UNUSED(line);
    UNUSED(a);
    return map_case(r, to_str(r, v).u.s, low);
}

static rlx_jv f_upper(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    UNUSED(line);
    UNUSED(a);
    return map_case(r, to_str(r, v).u.s, up);
}

static rlx_jv f_map(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    rlx_jlist *l = rlx_jv_iterate(r, line, v);
    rlx_jv out = rlx_jv_list(r->c, l->n);
    rlx_jv attribute = ARG(99, "attribute", rlx_jv_undef);
    if (attribute.t != RLX_JV_UNDEF) {
        rlx_jv dflt = ARG(99, "default", rlx_jv_undef);
        for (size_t i = 0; i < l->n; i++) {
            rlx_jv x = attr_of(r, line, l->v[i], attribute);
            if (x.t == RLX_JV_UNDEF && dflt.t != RLX_JV_UNDEF)
                x = dflt;
            rlx_jlist_push(r->c, out.u.l, x);
        }
        return out;
    }
    if (!a->npos)
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "map requires a filter argument");
    const rlx_jstr *name = need_str(r, line, a->pos[0], "map filter name");
    rlx_jfilter_fn fn = rlx_jinja_find_filter(name->s);
    if (!fn)
        rlx_jinja_rfail(r, RLX_ERR_UNSUPPORTED, line, "unknown filter '%s'", name->s);
    rlx_jargs rest = *a;
    rest.npos--;
    rest.pos++;
    for (size_t i = 0; i < l->n; i++)
        rlx_jlist_push(r->c, out.u.l, fn(r, line, l->v[i], &rest));
    return out;
}

static rlx_jv minmax(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a, bool want_max)
{
    sort_ctx sc = {r, line, rlx_jv_truthy(ARG(0, "case_sensitive", rlx_jv_bool(false)))};
    rlx_jv attribute = ARG(1, "attribute", rlx_jv_none);
    rlx_jlist *l = rlx_jv_iterate(r, line, v);
    if (!l->n)
        return rlx_jv_undef_msg(r->c, "No aggregated item, sequence was empty.");
    size_t best = 0;
    rlx_jv bk = sort_key(&sc, given(attribute) ? attr_of(r, line, l->v[0], attribute) : l->v[0]);
    for (size_t i = 1; i < l->n; i++) {
        rlx_jv k = sort_key(&sc, given(attribute) ? attr_of(r, line, l->v[i], attribute) : l->v[i]);
        int c = rlx_jv_compare(r, line, k, bk, want_max ? ">" : "<");
        if (want_max ? c > 0 : c < 0) {
            best = i;
            bk = k;
        }
    }
    return l->v[best];
}

static rlx_jv f_max(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    return minmax(r, line, v, a, true);
}

static rlx_jv f_min(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    return minmax(r, line, v, a, false);
}

static rlx_jv f_replace(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    rlx_jv old = ARG(0, "old", rlx_jv_undef), new_ = ARG(1, "new", rlx_jv_undef);
    rlx_jv count = ARG(2, "count", rlx_jv_none);
    return str_replace(r, line, to_str(r, v).u.s, to_str(r, old).u.s, to_str(r, new_).u.s,
                       given(count) ? need_int(r, line, count, "count") : -1);
}

static rlx_jv f_reverse(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    UNUSED(a);
    rlx_jlist *l = rlx_jv_iterate(r, line, v);
    if (v.t == RLX_JV_STR) {
        rlx_jbuf b = {0};
        for (size_t i = l->n; i-- > 0;)
            rlx_jbuf_put(r, &b, l->v[i].u.s->s, l->v[i].u.s->len);
        return rlx_jbuf_value(r, &b);
    }
    rlx_jv out = rlx_jv_list(r->c, l->n);
    for (size_t i = l->n; i-- > 0;)
        rlx_jlist_push(r->c, out.u.l, l->v[i]);
    return out;
}

static rlx_jv f_round(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    int64_t prec = need_int(r, line, ARG(0, "precision", rlx_jv_int(0)), "round precision");
    const rlx_jstr *method =
        need_str(r, line, ARG(1, "method", rlx_jv_cstr(r->c, "common")), "round method");
    if (!is_int(v) && v.t != RLX_JV_FLOAT)
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "round needs a number, not %s", rlx_jv_type_desc(v));
    if (prec < -300 || prec > 300)
        rlx_jinja_rfail(r, RLX_ERR_UNSUPPORTED, line, "round precision %lld is out of range",
                        (long long)prec);
    if (!strcmp(method->s, "common")) {
        if (is_int(v) && prec >= 0)
            return rlx_jv_int(to_int(v));
        double x = is_int(v) ? (double)to_int(v) : v.u.f;
        if (!isfinite(x) || prec < 0) {
            double p = pow(10.0, (double)-prec);
            double y = nearbyint(x / p) * p;
            return is_int(v) ? rlx_jv_int((int64_t)y) : rlx_jv_float(y);
        }
        /* glibc's printf rounds the exact binary value half-to-even, as Python's round does. */
        char buf[400];
        snprintf(buf, sizeof buf, "%.*f", (int)prec, x);
        return rlx_jv_float(strtod(buf, NULL));
    }
    bool ceil_ = !strcmp(method->s, "ceil");
    if (!ceil_ && strcmp(method->s, "floor"))
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "method must be common, ceil or floor");
    double x = is_int(v) ? (double)to_int(v) : v.u.f;
    double p = pow(10.0, (double)prec);
    return rlx_jv_float((ceil_ ? ceil(x * p) : floor(x * p)) / p);
}

static rlx_jv f_safe(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    UNUSED(line);
    UNUSED(a);
    return to_str(r, v);
}

static rlx_jv select_impl(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a, bool by_attr,
                          bool keep)
{
    rlx_jlist *l = rlx_jv_iterate(r, line, v);
    size_t k = 0;
    rlx_jv attribute = rlx_jv_undef;
    if (by_attr) {
        if (!a->npos)
            rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "missing attribute name");
        attribute = a->pos[k++];
    }
    rlx_jtest_fn test = NULL;
    if (k < a->npos) {
        const rlx_jstr *name = need_str(r, line, a->pos[k++], "test name");
        test = rlx_jinja_find_test(name->s);
        if (!test)
            rlx_jinja_rfail(r, RLX_ERR_UNSUPPORTED, line, "unknown test '%s'", name->s);
    }
    rlx_jargs rest = *a;
    rest.npos -= k;
    rest.pos += k;
    rlx_jv out = rlx_jv_list(r->c, 0);
    for (size_t i = 0; i < l->n; i++) {
        rlx_jv x = by_attr ? attr_of(r, line, l->v[i], attribute) : l->v[i];
        bool ok = test ? test(r, line, x, &rest) : rlx_jv_truthy(x);
        if (ok == keep)
            rlx_jlist_push(r->c, out.u.l, l->v[i]);
    }
    return out;
}

static rlx_jv f_select(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    return select_impl(r, line, v, a, false, true);
}

static rlx_jv f_reject(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    return select_impl(r, line, v, a, false, false);
}

static rlx_jv f_selectattr(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    return select_impl(r, line, v, a, true, true);
}

static rlx_jv f_rejectattr(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    return select_impl(r, line, v, a, true, false);
}

static rlx_jv f_sort(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    bool reverse = rlx_jv_truthy(ARG(0, "reverse", rlx_jv_bool(false)));
    sort_ctx sc = {r, line, rlx_jv_truthy(ARG(1, "case_sensitive", rlx_jv_bool(false)))};
    rlx_jv attribute = ARG(2, "attribute", rlx_jv_none);
    rlx_jlist *l = rlx_jv_iterate(r, line, v);
    size_t n = l->n;
    rlx_jv *keys = rlx_jinja_alloc(r->c, (n ? n : 1) * sizeof *keys);
    rlx_jv *vals = rlx_jinja_alloc(r->c, (n ? n : 1) * sizeof *vals);
    for (size_t i = 0; i < n; i++) {
        keys[i] = sort_key(&sc, given(attribute) ? attr_of(r, line, l->v[i], attribute) : l->v[i]);
        vals[i] = l->v[i];
    }
    merge_sort(&sc, keys, vals, n, reverse);
    rlx_jv out = rlx_jv_list(r->c, n);
    for (size_t i = 0; i < n; i++)
        rlx_jlist_push(r->c, out.u.l, vals[i]);
    return out;
}

static rlx_jv f_string(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    UNUSED(line);
    UNUSED(a);
    return to_str(r, v);
}

static rlx_jv f_sum(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    rlx_jv attribute = ARG(0, "attribute", rlx_jv_none);
    rlx_jv acc = ARG(1, "start", rlx_jv_int(0));
    rlx_jlist *l = rlx_jv_iterate(r, line, v);
    for (size_t i = 0; i < l->n; i++) {
        rlx_jv x = given(attribute) ? attr_of(r, line, l->v[i], attribute) : l->v[i];
        bool num_ok = (is_int(acc) || acc.t == RLX_JV_FLOAT) && (is_int(x) || x.t == RLX_JV_FLOAT);
        if (!num_ok && !(acc.t == RLX_JV_LIST && x.t == RLX_JV_LIST))
            rlx_jinja_rfail(r, RLX_ERR_TYPE, line,
                            "unsupported operand type(s) for +: '%s' and '%s'",
                            rlx_jv_type_desc(acc), rlx_jv_type_desc(x));
        if (acc.t == RLX_JV_LIST) {
            rlx_jv n = rlx_jv_list(r->c, acc.u.l->n + x.u.l->n);
            for (size_t k = 0; k < acc.u.l->n; k++)
                rlx_jlist_push(r->c, n.u.l, acc.u.l->v[k]);
            for (size_t k = 0; k < x.u.l->n; k++)
                rlx_jlist_push(r->c, n.u.l, x.u.l->v[k]);
            acc = n;
        } else if (is_int(acc) && is_int(x)) {
            int64_t z;
            if (__builtin_add_overflow(to_int(acc), to_int(x), &z))
                rlx_jinja_rfail(r, RLX_ERR_UNSUPPORTED, line, "integer overflow");
            acc = rlx_jv_int(z);
        } else {
            double p = acc.t == RLX_JV_FLOAT ? acc.u.f : (double)to_int(acc);
            double q = x.t == RLX_JV_FLOAT ? x.u.f : (double)to_int(x);
            acc = rlx_jv_float(p + q);
        }
    }
    return acc;
}

static rlx_jv f_title(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    UNUSED(line);
    UNUSED(a);
    return jinja_title(r, to_str(r, v).u.s);
}

/* transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None,
 * separators=None, sort_keys=False) -- not jinja2's HTML-safe one. */
static rlx_jv f_tojson(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    bool ascii = rlx_jv_truthy(ARG(0, "ensure_ascii", rlx_jv_bool(false)));
    rlx_jv indent = ARG(1, "indent", rlx_jv_none);
    rlx_jv seps = ARG(2, "separators", rlx_jv_none);
    bool sort = rlx_jv_truthy(ARG(3, "sort_keys", rlx_jv_bool(false)));
    int ind = -1;
    if (given(indent)) {
        int64_t i = need_int(r, line, indent, "tojson indent");
        ind = i < 0 ? 0 : i > 64 ? 64 : (int)i;
    }
    const char *isep = NULL, *ksep = NULL;
    if (given(seps)) {
        if (seps.t != RLX_JV_LIST || seps.u.l->n != 2 || seps.u.l->v[0].t != RLX_JV_STR ||
            seps.u.l->v[1].t != RLX_JV_STR)
            rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "tojson separators must be two strings");
        isep = seps.u.l->v[0].u.s->s;
        ksep = seps.u.l->v[1].u.s->s;
    }
    rlx_jbuf b = {0};
    rlx_jv_write_json(r, line, &b, v, ascii, ind, isep, ksep, sort);
    return rlx_jbuf_value(r, &b);
}

static rlx_jv f_trim(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    rlx_jv chars = ARG(0, "chars", rlx_jv_none);
    return strip(r, to_str(r, v).u.s, given(chars) ? need_str(r, line, chars, "trim chars") : NULL,
                 3);
}

static rlx_jv f_unique(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    sort_ctx sc = {r, line, rlx_jv_truthy(ARG(0, "case_sensitive", rlx_jv_bool(false)))};
    rlx_jv attribute = ARG(1, "attribute", rlx_jv_none);
    rlx_jlist *l = rlx_jv_iterate(r, line, v);
    rlx_jv out = rlx_jv_list(r->c, 0);
    rlx_jv seen = rlx_jv_list(r->c, 0);
    for (size_t i = 0; i < l->n; i++) {
        rlx_jv k = sort_key(&sc, given(attribute) ? attr_of(r, line, l->v[i], attribute) : l->v[i]);
        bool dup = false;
        for (size_t j = 0; j < seen.u.l->n && !dup; j++)
            dup = rlx_jv_equal(seen.u.l->v[j], k);
        if (!dup) {
            rlx_jlist_push(r->c, seen.u.l, k);
            rlx_jlist_push(r->c, out.u.l, l->v[i]);
        }
    }
    return out;
}

static rlx_jv f_wordcount(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)
{
    UNUSED(line);
    UNUSED(a);
    /* jinja2 counts \w+ matches; approximated with runs of ASCII alnum/_ and non-ASCII. */
    const rlx_jstr *s = to_str(r, v).u.s;
    int64_t n = 0;
    bool in = false;
    for (size_t i = 0; i < s->len; i++) {
        char ch = s->s[i];
        bool w = is_alpha(ch) || (ch >= '0' && ch <= '9') || ch == '_' ||
                 ((unsigned char)ch >= 0x80 && !ws_len(s->s + i, s->len - i));
        if (w && !in)
            n++;
        in = w;
    }
    return rlx_jv_int(n);
}

typedef struct named_filter {
    const char *name;
    rlx_jfilter_fn fn;
} named_filter;

static const named_filter filters[] = {
    {"abs", f_abs},
    {"attr", f_attr},
    {"batch", f_batch},
    {"capitalize", f_capitalize},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"e", f_escape},
    {"escape", f_escape},
    {"first", f_first},
    {"float", f_float},
    {"format", f_format},
    {"indent", f_indent},
    {"int", f_int},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_lower},
    {"map", f_map},
    {"max", f_max},
    {"min", f_min},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", f_round},
    {"safe", f_safe},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"sort", f_sort},
    {"string", f_string},
    {"sum", f_sum},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"unique", f_unique},
    {"upper", f_upper},
    {"wordcount", f_wordcount},
};

rlx_jfilter_fn rlx_jinja_find_filter(const char *name)
{
    for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++)
        if (!strcmp(filters[i].name, name))
            return filters[i].fn;
    return NULL;
}

/* ---- tests ---------------------------------------------------------------------------------- */

#define TEST_FN(name) static bool name(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a)

TEST_FN(t_defined)
{
    UNUSED(r), UNUSED(line), UNUSED(a);
    return v.t != RLX_JV_UNDEF;
}
TEST_FN(t_undefined)
{
    UNUSED(r), UNUSED(line), UNUSED(a);
    return v.t == RLX_JV_UNDEF;
}
TEST_FN(t_none)
{
    UNUSED(r), UNUSED(line), UNUSED(a);
    return v.t == RLX_JV_NONE;
}
TEST_FN(t_boolean)
{
    UNUSED(r), UNUSED(line), UNUSED(a);
    return v.t == RLX_JV_BOOL;
}
TEST_FN(t_true)
{
    UNUSED(r), UNUSED(line), UNUSED(a);
    return v.t == RLX_JV_BOOL && v.u.b;
}
TEST_FN(t_false)
{
    UNUSED(r), UNUSED(line), UNUSED(a);
    return v.t == RLX_JV_BOOL && !v.u.b;
}
TEST_FN(t_integer)
{
    UNUSED(r), UNUSED(line), UNUSED(a);
    return v.t == RLX_JV_INT;
}
TEST_FN(t_float)
{
    UNUSED(r), UNUSED(line), UNUSED(a);
    return v.t == RLX_JV_FLOAT;
}
TEST_FN(t_number)
{
    UNUSED(r), UNUSED(line), UNUSED(a);
    return v.t == RLX_JV_INT || v.t == RLX_JV_FLOAT || v.t == RLX_JV_BOOL;
}
TEST_FN(t_string)
{
    UNUSED(r), UNUSED(line), UNUSED(a);
    return v.t == RLX_JV_STR;
}
TEST_FN(t_mapping)
{
    UNUSED(r), UNUSED(line), UNUSED(a);
    return v.t == RLX_JV_DICT;
}
TEST_FN(t_iterable)
{
    UNUSED(r), UNUSED(line), UNUSED(a);
    return v.t == RLX_JV_STR || v.t == RLX_JV_LIST || v.t == RLX_JV_DICT || v.t == RLX_JV_UNDEF;
}
TEST_FN(t_sequence)
{
    UNUSED(r), UNUSED(line), UNUSED(a);
    return v.t == RLX_JV_STR || v.t == RLX_JV_LIST || v.t == RLX_JV_DICT || v.t == RLX_JV_UNDEF;
}
TEST_FN(t_callable)
{
    UNUSED(r), UNUSED(line), UNUSED(a);
    return v.t == RLX_JV_FUNC;
}
TEST_FN(t_odd)
{
    UNUSED(a);
    return (need_int(r, line, v, "odd test value") % 2) != 0;
}
TEST_FN(t_even)
{
    UNUSED(a);
    return (need_int(r, line, v, "even test value") % 2) == 0;
}
TEST_FN(t_divisibleby)
{
    int64_t d = need_int(r, line, ARG(0, "num", rlx_jv_undef), "divisibleby argument");
    if (d == 0)
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "integer division or modulo by zero");
    return need_int(r, line, v, "divisibleby value") % d == 0;
}
TEST_FN(t_sameas)
{
    UNUSED(r), UNUSED(line);
    rlx_jv o = ARG(0, "other", rlx_jv_undef);
    if (v.t != o.t)
        return false;
    switch (v.t) {
    case RLX_JV_NONE:
        return true;
    case RLX_JV_BOOL:
        return v.u.b == o.u.b;
    case RLX_JV_INT:
        return v.u.i == o.u.i && v.u.i >= -5 && v.u.i <= 256; /* CPython's cached ints */
    case RLX_JV_STR:
        return v.u.s == o.u.s;
    case RLX_JV_LIST:
        return v.u.l == o.u.l;
    case RLX_JV_DICT:
    case RLX_JV_NS:
        return v.u.d == o.u.d;
    case RLX_JV_FUNC:
        return v.u.fn == o.u.fn;
    default:
        return false;
    }
}
static bool str_is_case(const rlx_jstr *s, bool want_lower)
{
    bool cased = false;
    for (size_t i = 0; i < s->len; i++) {
        char ch = s->s[i];
        if (is_alpha(ch)) {
            cased = true;
            if (want_lower ? (ch >= 'A' && ch <= 'Z') : (ch >= 'a' && ch <= 'z'))
                return false;
        }
    }
    return cased;
}
TEST_FN(t_lower)
{
    UNUSED(line), UNUSED(a);
    return str_is_case(to_str(r, v).u.s, true);
}
TEST_FN(t_upper)
{
    UNUSED(line), UNUSED(a);
    return str_is_case(to_str(r, v).u.s, false);
}
TEST_FN(t_in)
{
    rlx_jv seq = ARG(0, "seq", rlx_jv_undef);
    switch (seq.t) {
    case RLX_JV_STR:
        if (v.t != RLX_JV_STR)
            rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "'in <string>' requires string as left operand");
        return !v.u.s->len || memmem(seq.u.s->s, seq.u.s->len, v.u.s->s, v.u.s->len);
    case RLX_JV_LIST:
        for (size_t i = 0; i < seq.u.l->n; i++)
            if (rlx_jv_equal(seq.u.l->v[i], v))
                return true;
        return false;
    case RLX_JV_DICT:
        return rlx_jdict_get(seq.u.d, v) != NULL;
    default:
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "argument of type '%s' is not iterable",
                        rlx_jv_type_desc(seq));
    }
}
TEST_FN(t_eq)
{
    UNUSED(r), UNUSED(line);
    return rlx_jv_equal(v, ARG(0, "b", rlx_jv_undef));
}
TEST_FN(t_ne)
{
    UNUSED(r), UNUSED(line);
    return !rlx_jv_equal(v, ARG(0, "b", rlx_jv_undef));
}
TEST_FN(t_lt)
{
    return rlx_jv_compare(r, line, v, ARG(0, "b", rlx_jv_undef), "<") < 0;
}
TEST_FN(t_le)
{
    return rlx_jv_compare(r, line, v, ARG(0, "b", rlx_jv_undef), "<=") <= 0;
}
TEST_FN(t_gt)
{
    return rlx_jv_compare(r, line, v, ARG(0, "b", rlx_jv_undef), ">") > 0;
}
TEST_FN(t_ge)
{
    return rlx_jv_compare(r, line, v, ARG(0, "b", rlx_jv_undef), ">=") >= 0;
}
TEST_FN(t_escaped)
{
    UNUSED(r), UNUSED(line), UNUSED(a), UNUSED(v);
    return false;
}
TEST_FN(t_filter)
{
    UNUSED(r), UNUSED(line), UNUSED(a);
    return v.t == RLX_JV_STR && rlx_jinja_find_filter(v.u.s->s);
}
TEST_FN(t_test)
{
    UNUSED(r), UNUSED(line), UNUSED(a);
    return v.t == RLX_JV_STR && rlx_jinja_find_test(v.u.s->s);
}

typedef struct named_test {
    const char *name;
    rlx_jtest_fn fn;
} named_test;

static const named_test tests[] = {
    {"!=", t_ne},
    {"<", t_lt},
    {"<=", t_le},
    {"==", t_eq},
    {">", t_gt},
    {">=", t_ge},
    {"boolean", t_boolean},
    {"callable", t_callable},
    {"defined", t_defined},
    {"divisibleby", t_divisibleby},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"escaped", t_escaped},
    {"even", t_even},
    {"false", t_false},
    {"filter", t_filter},
    {"float", t_float},
    {"ge", t_ge},
    {"greaterthan", t_gt},
    {"gt", t_gt},
    {"in", t_in},
    {"integer", t_integer},
    {"iterable", t_iterable},
    {"le", t_le},
    {"lessthan", t_lt},
    {"lower", t_lower},
    {"lt", t_lt},
    {"mapping", t_mapping},
    {"ne", t_ne},
    {"none", t_none},
    {"number", t_number},
    {"odd", t_odd},
    {"sameas", t_sameas},
    {"sequence", t_sequence},
    {"string", t_string},
    {"test", t_test},
    {"true", t_true},
    {"undefined", t_undefined},
    {"upper", t_upper},
};

rlx_jtest_fn rlx_jinja_find_test(const char *name)
{
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
        if (!strcmp(tests[i].name, name))
            return tests[i].fn;
    return NULL;
}

/* ---- string methods ------------------------------------------------------------------------- */

#define METHOD(name) static rlx_jv name(rlx_jrender *r, int line, rlx_jv self, const rlx_jargs *a)

static const rlx_jstr *opt_chars(rlx_jrender *r, int line, const rlx_jargs *a)
{
    rlx_jv chars = ARG(0, "chars", rlx_jv_none);
    return given(chars) ? need_str(r, line, chars, "strip chars") : NULL;
}

METHOD(m_strip)
{
    return strip(r, self.u.s, opt_chars(r, line, a), 3);
}
METHOD(m_lstrip)
{
    return strip(r, self.u.s, opt_chars(r, line, a), 1);
}
METHOD(m_rstrip)
{
    return strip(r, self.u.s, opt_chars(r, line, a), 2);
}
METHOD(m_upper)
{
    UNUSED(line), UNUSED(a);
    return map_case(r, self.u.s, up);
}
METHOD(m_lower)
{
    UNUSED(line), UNUSED(a);
    return map_case(r, self.u.s, low);
}
METHOD(m_title)
{
    UNUSED(line), UNUSED(a);
    return py_title(r, self.u.s);
}
METHOD(m_capitalize)
{
    UNUSED(line), UNUSED(a);
    return capitalize(r, self.u.s);
}

METHOD(m_split)
{
    rlx_jv sep = ARG(0, "sep", rlx_jv_none);
    int64_t maxsplit = need_int(r, line, ARG(1, "maxsplit", rlx_jv_int(-1)), "maxsplit");
    const rlx_jstr *s = self.u.s;
    rlx_jv out = rlx_jv_list(r->c, 0);
    int64_t splits = 0;
    if (!given(sep)) {
        size_t i = 0;
        for (;;) {
            while (i < s->len && ws_len(s->s + i, s->len - i))
                i += ws_len(s->s + i, s->len - i);
            if (i >= s->len)
                break;
            if (maxsplit >= 0 && splits >= maxsplit) {
                rlx_jlist_push(r->c, out.u.l, rlx_jv_strn(r->c, s->s + i, s->len - i));
                break;
            }
            size_t j = i;
            while (j < s->len && !ws_len(s->s + j, s->len - j))
                j++;
            rlx_jlist_push(r->c, out.u.l, rlx_jv_strn(r->c, s->s + i, j - i));
            splits++;
            i = j;
        }
        return out;
    }
    const rlx_jstr *p = need_str(r, line, sep, "split separator");
    if (!p->len)
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "empty separator");
    size_t i = 0;
    for (;;) {
        const char *hit =
            (maxsplit < 0 || splits < maxsplit) ? memmem(s->s + i, s->len - i, p->s, p->len) : NULL;
        if (!hit) {
            rlx_jlist_push(r->c, out.u.l, rlx_jv_strn(r->c, s->s + i, s->len - i));
            break;
        }
        size_t at = (size_t)(hit - s->s);
        rlx_jlist_push(r->c, out.u.l, rlx_jv_strn(r->c, s->s + i, at - i));
        i = at + p->len;
        splits++;
    }
    return out;
}

METHOD(m_rsplit)
{
    rlx_jv sep = ARG(0, "sep", rlx_jv_none);
    int64_t maxsplit = need_int(r, line, ARG(1, "maxsplit", rlx_jv_int(-1)), "maxsplit");
    if (!given(sep) || maxsplit < 0)
        return m_split(r, line, self, a);
    const rlx_jstr *s = self.u.s, *p = need_str(r, line, sep, "rsplit separator");
    if (!p->len)
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "empty separator");
    /* Collect from the right, then reverse. */
    rlx_jv rev = rlx_jv_list(r->c, 0);
    size_t end = s->len;
    int64_t splits = 0;
    while (splits < maxsplit && end >= p->len) {
        size_t at = end - p->len;
        bool found = false;
        for (;;) {
            if (!memcmp(s->s + at, p->s, p->len)) {
                found = true;
                break;
            }
            if (at == 0)
                break;
            at--;
        }
        if (!found)
            break;
        rlx_jlist_push(r->c, rev.u.l, rlx_jv_strn(r->c, s->s + at + p->len, end - at - p->len));
        end = at;
        splits++;
    }
    rlx_jlist_push(r->c, rev.u.l, rlx_jv_strn(r->c, s->s, end));
    rlx_jv out = rlx_jv_list(r->c, rev.u.l->n);
    for (size_t i = rev.u.l->n; i-- > 0;)
        rlx_jlist_push(r->c, out.u.l, rev.u.l->v[i]);
    return out;
}

METHOD(m_splitlines)
{
    bool keep = rlx_jv_truthy(ARG(0, "keepends", rlx_jv_bool(false)));
    const rlx_jstr *s = self.u.s;
    rlx_jv out = rlx_jv_list(r->c, 0);
    UNUSED(line);
    size_t i = 0;
    while (i < s->len) {
        size_t j = i, brk = 0;
        while (j < s->len) {
            char ch = s->s[j];
            if (ch == '\r' && j + 1 < s->len && s->s[j + 1] == '\n')
                brk = 2;
            else if (ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f' || ch == 0x1c ||
                     ch == 0x1d || ch == 0x1e)
                brk = 1;
            if (brk)
                break;
            j++;
        }
        rlx_jlist_push(r->c, out.u.l, rlx_jv_strn(r->c, s->s + i, j - i + (keep ? brk : 0)));
        i = j + brk;
    }
    return out;
}

static bool affix_match(rlx_jrender *r, int line, const rlx_jstr *s, rlx_jv affix, bool prefix)
{
    if (affix.t == RLX_JV_LIST && affix.u.l->tuple) {
        for (size_t i = 0; i < affix.u.l->n; i++)
            if (affix_match(r, line, s, affix.u.l->v[i], prefix))
                return true;
        return false;
    }
    if (affix.t != RLX_JV_STR)
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "%s first arg must be str or a tuple of str, not %s",
                        prefix ? "startswith" : "endswith", rlx_jv_type_desc(affix));
    const rlx_jstr *x = affix.u.s;
    if (x->len > s->len)
        return false;
    return !memcmp(prefix ? s->s : s->s + s->len - x->len, x->s, x->len);
}

METHOD(m_startswith)
{
    return rlx_jv_bool(affix_match(r, line, self.u.s, ARG(0, "prefix", rlx_jv_undef), true));
}
METHOD(m_endswith)
{
    return rlx_jv_bool(affix_match(r, line, self.u.s, ARG(0, "suffix", rlx_jv_undef), false));
}
METHOD(m_replace)
{
    rlx_jv count = ARG(2, "count", rlx_jv_int(-1));
    return str_replace(r, line, self.u.s, need_str(r, line, ARG(0, "old", rlx_jv_undef), "old"),
                       need_str(r, line, ARG(1, "new", rlx_jv_undef), "new"),
                       need_int(r, line, count, "count"));
}

static rlx_jv find_impl(rlx_jrender *r, int line, rlx_jv self, const rlx_jargs *a, bool right)
{
    const rlx_jstr *s = self.u.s, *x = need_str(r, line, ARG(0, "sub", rlx_jv_undef), "find");
    const char *hit = NULL;
    if (!right) {
        hit = x->len ? memmem(s->s, s->len, x->s, x->len) : s->s;
    } else if (x->len <= s->len) {
        for (size_t at = s->len - x->len + 1; at-- > 0;)
            if (!memcmp(s->s + at, x->s, x->len)) {
                hit = s->s + at;
                break;
            }
    }
    if (!hit)
        return rlx_jv_int(-1);
    return rlx_jv_int((int64_t)rlx_jinja_utf8_len(s->s, (size_t)(hit - s->s)));
}

METHOD(m_find)
{
    return find_impl(r, line, self, a, false);
}
METHOD(m_rfind)
{
    return find_impl(r, line, self, a, true);
}
METHOD(m_count)
{
    const rlx_jstr *s = self.u.s, *x = need_str(r, line, ARG(0, "sub", rlx_jv_undef), "count");
    if (!x->len)
        return rlx_jv_int((int64_t)rlx_jinja_utf8_len(s->s, s->len) + 1);
    int64_t n = 0;
    for (size_t i = 0; i + x->len <= s->len;) {
        const char *hit = memmem(s->s + i, s->len - i, x->s, x->len);
        if (!hit)
            break;
        n++;
        i = (size_t)(hit - s->s) + x->len;
    }
    return rlx_jv_int(n);
}
METHOD(m_join)
{
    rlx_jlist *l = rlx_jv_iterate(r, line, ARG(0, "iterable", rlx_jv_undef));
    rlx_jbuf b = {0};
    for (size_t i = 0; i < l->n; i++) {
        if (l->v[i].t != RLX_JV_STR)
            rlx_jinja_rfail(r, RLX_ERR_TYPE, line,
                            "sequence item %zu: expected str instance, %s found", i,
                            rlx_jv_type_desc(l->v[i]));
        if (i)
            rlx_jbuf_put(r, &b, self.u.s->s, self.u.s->len);
        rlx_jbuf_put(r, &b, l->v[i].u.s->s, l->v[i].u.s->len);
    }
    return rlx_jbuf_value(r, &b);
}

static rlx_jv str_class(rlx_jrender *r, rlx_jv self, int cls)
{
    UNUSED(r);
    const rlx_jstr *s = self.u.s;
    if (!s->len)
        return rlx_jv_bool(false);
    for (size_t i = 0; i < s->len; i++) {
        char ch = s->s[i];
        bool ok = cls == 'd'   ? (ch >= '0' && ch <= '9')
                  : cls == 'a' ? is_alpha(ch)
                  : cls == 'n' ? (is_alpha(ch) || (ch >= '0' && ch <= '9'))
                               : ws_len(s->s + i, s->len - i) > 0;
        if (!ok)
            return rlx_jv_bool(false);
    }
    return rlx_jv_bool(true);
}
METHOD(m_isdigit)
{
    UNUSED(line), UNUSED(a);
    return str_class(r, self, 'd');
}
METHOD(m_isalpha)
{
    UNUSED(line), UNUSED(a);
    return str_class(r, self, 'a');
}
METHOD(m_isalnum)
{
    UNUSED(line), UNUSED(a);
    return str_class(r, self, 'n');
}
METHOD(m_isspace)
{
    UNUSED(line), UNUSED(a);
    return str_class(r, self, 's');
}
METHOD(m_islower)
{
    UNUSED(r), UNUSED(line), UNUSED(a);
    return rlx_jv_bool(str_is_case(self.u.s, true));
}
METHOD(m_isupper)
{
    UNUSED(r), UNUSED(line), UNUSED(a);
    return rlx_jv_bool(str_is_case(self.u.s, false));
}

/* ---- dict and list methods ------------------------------------------------------------------ */

METHOD(m_get)
{
    UNUSED(line);
    rlx_jv *v = rlx_jdict_get(self.u.d, ARG(0, "key", rlx_jv_undef));
    UNUSED(r);
    return v ? *v : ARG(1, "default", rlx_jv_none);
}
METHOD(m_items)
{
    return f_items(r, line, self, a);
}
METHOD(m_keys)
{
    UNUSED(line), UNUSED(a);
    rlx_jv out = rlx_jv_list(r->c, self.u.d->n);
    for (size_t i = 0; i < self.u.d->n; i++)
        rlx_jlist_push(r->c, out.u.l, self.u.d->k[i]);
    return out;
}
METHOD(m_values)
{
    UNUSED(line), UNUSED(a);
    rlx_jv out = rlx_jv_list(r->c, self.u.d->n);
    for (size_t i = 0; i < self.u.d->n; i++)
        rlx_jlist_push(r->c, out.u.l, self.u.d->v[i]);
    return out;
}
METHOD(m_list_index)
{
    rlx_jv x = ARG(0, "value", rlx_jv_undef);
    for (size_t i = 0; i < self.u.l->n; i++)
        if (rlx_jv_equal(self.u.l->v[i], x))
            return rlx_jv_int((int64_t)i);
    rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "value is not in list");
}
METHOD(m_list_count)
{
    UNUSED(r), UNUSED(line);
    rlx_jv x = ARG(0, "value", rlx_jv_undef);
    int64_t n = 0;
    for (size_t i = 0; i < self.u.l->n; i++)
        n += rlx_jv_equal(self.u.l->v[i], x);
    return rlx_jv_int(n);
}

typedef struct named_method {
    rlx_jv_type type;
    const char *name;
    rlx_jfilter_fn fn; /* NULL: exists but the sandbox forbids it */
} named_method;

static const named_method methods[] = {
    {RLX_JV_STR, "strip", m_strip},
    {RLX_JV_STR, "lstrip", m_lstrip},
    {RLX_JV_STR, "rstrip", m_rstrip},
    {RLX_JV_STR, "split", m_split},
    {RLX_JV_STR, "rsplit", m_rsplit},
    {RLX_JV_STR, "splitlines", m_splitlines},
    {RLX_JV_STR, "startswith", m_startswith},
    {RLX_JV_STR, "endswith", m_endswith},
    {RLX_JV_STR, "upper", m_upper},
    {RLX_JV_STR, "lower", m_lower},
    {RLX_JV_STR, "title", m_title},
    {RLX_JV_STR, "capitalize", m_capitalize},
    {RLX_JV_STR, "replace", m_replace},
    {RLX_JV_STR, "find", m_find},
    {RLX_JV_STR, "rfind", m_rfind},
    {RLX_JV_STR, "count", m_count},
    {RLX_JV_STR, "join", m_join},
    {RLX_JV_STR, "format", m_format},
    {RLX_JV_STR, "isdigit", m_isdigit},
    {RLX_JV_STR, "isalpha", m_isalpha},
    {RLX_JV_STR, "isalnum", m_isalnum},
    {RLX_JV_STR, "isspace", m_isspace},
    {RLX_JV_STR, "islower", m_islower},
    {RLX_JV_STR, "isupper", m_isupper},
    {RLX_JV_DICT, "get", m_get},
    {RLX_JV_DICT, "items", m_items},
    {RLX_JV_DICT, "keys", m_keys},
    {RLX_JV_DICT, "values", m_values},
    {RLX_JV_DICT, "pop", NULL},
    {RLX_JV_DICT, "popitem", NULL},
    {RLX_JV_DICT, "setdefault", NULL},
    {RLX_JV_DICT, "update", NULL},
    {RLX_JV_DICT, "clear", NULL},
    {RLX_JV_LIST, "index", m_list_index},
    {RLX_JV_LIST, "count", m_list_count},
    {RLX_JV_LIST, "append", NULL},
    {RLX_JV_LIST, "extend", NULL},
    {RLX_JV_LIST, "insert", NULL},
    {RLX_JV_LIST, "pop", NULL},
    {RLX_JV_LIST, "remove", NULL},
    {RLX_JV_LIST, "clear", NULL},
    {RLX_JV_LIST, "sort", NULL},
    {RLX_JV_LIST, "reverse", NULL},
};

bool rlx_jinja_find_method(rlx_jv obj, const char *name, rlx_jfilter_fn *fn, bool *unsafe)
{
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        const named_method *m = &methods[i];
        if (m->type != obj.t || strcmp(m->name, name))
            continue;
        if (obj.t == RLX_JV_LIST && obj.u.l->tuple && !m->fn)
            return false; /* tuples have no mutating methods at all */
        *fn = m->fn;
        *unsafe = m->fn == NULL;
        return true;
    }
    return false;
}

/* ---- globals -------------------------------------------------------------------------------- */

METHOD(g_range)
{
    UNUSED(self);
    int64_t start = 0, stop, step = 1;
    if (a->npos == 1) {
        stop = need_int(r, line, a->pos[0], "range stop");
    } else if (a->npos == 2 || a->npos == 3) {
        start = need_int(r, line, a->pos[0], "range start");
        stop = need_int(r, line, a->pos[1], "range stop");
        if (a->npos == 3)
            step = need_int(r, line, a->pos[2], "range step");
    } else {
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "range expected 1 to 3 arguments, got %zu", a->npos);
    }
    if (step == 0)
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "range() arg 3 must not be zero");
    double count = step > 0 ? ceil(((double)stop - (double)start) / (double)step)
                            : ceil(((double)start - (double)stop) / (double)-step);
    if (count < 0)
        count = 0;
    /* jinja2's sandbox refuses ranges longer than this. */
    if (count > 100000)
        rlx_jinja_rfail(r, RLX_ERR_BUDGET, line,
                        "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    rlx_jv out = rlx_jv_list(r->c, (size_t)count);
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
        rlx_jlist_push(r->c, out.u.l, rlx_jv_int(i));
    return out;
}

static rlx_jv make_dict(rlx_jrender *r, int line, const rlx_jargs *a, rlx_jv_type t)
{
    rlx_jv d = rlx_jv_dict(r->c, 0);
    d.t = t;
    if (a->npos > 1)
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "expected at most 1 positional argument");
    if (a->npos == 1) {
        rlx_jv src = a->pos[0];
        if (src.t == RLX_JV_DICT || src.t == RLX_JV_NS) {
            for (size_t i = 0; i < src.u.d->n; i++)
                rlx_jdict_set(r->c, d.u.d, src.u.d->k[i], src.u.d->v[i]);
        } else {
            rlx_jlist *l = rlx_jv_iterate(r, line, src);
            for (size_t i = 0; i < l->n; i++) {
                rlx_jlist *pair = rlx_jv_iterate(r, line, l->v[i]);
                if (pair->n != 2)
                    rlx_jinja_rfail(r, RLX_ERR_TYPE, line,
                                    "dictionary update sequence element #%zu has length %zu; 2 "
                                    "is required",
                                    i, pair->n);
                rlx_jdict_set(r->c, d.u.d, pair->v[0], pair->v[1]);
            }
        }
    }
    for (size_t k = 0; k < a->nkw; k++)
        rlx_jdict_set(r->c, d.u.d, rlx_jv_cstr(r->c, a->kwn[k]), a->kw[k]);
    return d;
}

METHOD(g_namespace)
{
    UNUSED(self);
    return make_dict(r, line, a, RLX_JV_NS);
}

METHOD(g_dict)
{
    UNUSED(self);
    return make_dict(r, line, a, RLX_JV_DICT);
}

METHOD(g_raise_exception)
{
    UNUSED(self);
    rlx_jv msg = ARG(0, "message", rlx_jv_undef);
    rlx_jbuf b = {0};
    rlx_jv_write_str(r, &b, msg);
    rlx_jinja_rfail(r, RLX_ERR_INVALID_ARG, line, "%s", b.p ? b.p : "");
}

METHOD(g_strftime_now)
{
    UNUSED(self);
    const rlx_jstr *fmt = need_str(r, line, ARG(0, "format", rlx_jv_undef), "strftime format");
    struct tm now;
    if (r->opts.now) {
        /* Fill in the weekday and day of the year the caller may have left out. */
        now = *r->opts.now;
        struct tm norm = now;
        if (timegm(&norm) != (time_t)-1) {
            now.tm_wday = norm.tm_wday;
            now.tm_yday = norm.tm_yday;
        }
    } else {
        time_t t = time(NULL);
        localtime_r(&t, &now);
    }
    if (!fmt->len)
        return rlx_jv_cstr(r->c, "");
    char buf[512];
    size_t n = strftime(buf, sizeof buf, fmt->s, &now);
    if (!n)
        rlx_jinja_rfail(r, RLX_ERR_UNSUPPORTED, line,
                        "strftime_now: the format gives no text or "
                        "more than 511 bytes");
    return rlx_jv_strn(r->c, buf, n);
}

typedef struct named_global {
    const char *name;
    rlx_jfilter_fn fn;
} named_global;

static const named_global globals[] = {
    {"range", g_range},
    {"namespace", g_namespace},
    {"dict", g_dict},
    {"raise_exception", g_raise_exception},
    {"strftime_now", g_strftime_now},
};

bool rlx_jinja_find_global(const char *name, rlx_jfilter_fn *fn)
{
    for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++)
        if (!strcmp(globals[i].name, name)) {
            *fn = globals[i].fn;
            return true;
        }
    return false;
}
