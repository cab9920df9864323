/* Arena, runtime values and their Python-compatible printing. */
#include "engine/template/jinja-internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rlx_jarena_chunk {
    rlx_jarena_chunk *next;
    size_t used, cap;
    max_align_t data[];
};

#define CHUNK_BYTES (64 * 1024)

void rlx_jinja_fail(rlx_jctx *c, rlx_status code, int line, const char *fmt, ...)
{
    char tmp[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (line > 0)
        snprintf(c->msg, sizeof c->msg, "chat template line %d: %s", line, tmp);
    else
        snprintf(c->msg, sizeof c->msg, "chat template: %s", tmp);
    c->code = code;
    longjmp(c->jmp, 1);
}

void *rlx_jinja_alloc(rlx_jctx *c, size_t size)
{
    size = (size + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    if (size == 0)
        size = sizeof(max_align_t);
    if (c->limit && (size > c->limit || c->used > c->limit - size))
        rlx_jinja_fail(c, RLX_ERR_BUDGET, 0,
                       "rendering needs more than %zu bytes of memory; the template is too "
                       "large for its input or loops without end",
                       c->limit);
    rlx_jarena_chunk *ch = c->chunks;
    if (!ch || ch->cap - ch->used < size) {
        size_t cap = size > CHUNK_BYTES / 2 ? size : CHUNK_BYTES;
        rlx_jarena_chunk *nc = malloc(sizeof *nc + cap);
        if (!nc)
            rlx_jinja_fail(c, RLX_ERR_NO_MEMORY, 0, "out of memory");
        nc->used = 0;
        nc->cap = cap;
        if (ch && cap != CHUNK_BYTES) {
            /* A big block goes behind the current chunk so its free tail stays usable. */
            nc->next = ch->next;
            ch->next = nc;
        } else {
            nc->next = ch;
            c->chunks = nc;
        }
        ch = nc;
    }
    void *p = (char *)ch->data + ch->used;
    ch->used += size;
    c->used += size;
    memset(p, 0, size);
    return p;
}

char *rlx_jinja_strndup(rlx_jctx *c, const char *s, size_t n)
{
    char *p = rlx_jinja_alloc(c, n + 1);
    if (n)
        memcpy(p, s, n);
    p[n] = 0;
    return p;
}

void rlx_jinja_arena_free(rlx_jctx *c)
{
    rlx_jarena_chunk *ch = c->chunks;
    while (ch) {
        rlx_jarena_chunk *next = ch->next;
        free(ch);
        ch = next;
    }
    c->chunks = NULL;
    c->used = 0;
}

/* ---- constructors --------------------------------------------------------------------------- */

const rlx_jv rlx_jv_none = {.t = RLX_JV_NONE};
const rlx_jv rlx_jv_undef = {.t = RLX_JV_UNDEF};

rlx_jv rlx_jv_bool(bool b)
{
    rlx_jv v = {.t = RLX_JV_BOOL};
    v.u.b = b;
    return v;
}

rlx_jv rlx_jv_int(int64_t i)
{
    rlx_jv v = {.t = RLX_JV_INT};
    v.u.i = i;
    return v;
}

rlx_jv rlx_jv_float(double f)
{
    rlx_jv v = {.t = RLX_JV_FLOAT};
    v.u.f = f;
    return v;
}

rlx_jv rlx_jv_undef_msg(rlx_jctx *c, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    rlx_jv v = {.t = RLX_JV_UNDEF};
    v.u.undef = rlx_jinja_strndup(c, tmp, strlen(tmp));
    return v;
}

rlx_jv rlx_jv_strn(rlx_jctx *c, const char *s, size_t n)
{
    rlx_jstr *js = rlx_jinja_alloc(c, sizeof *js + n + 1);
    js->len = n;
    if (n)
        memcpy(js->s, s, n);
    js->s[n] = 0;
    rlx_jv v = {.t = RLX_JV_STR};
    v.u.s = js;
    return v;
}

rlx_jv rlx_jv_cstr(rlx_jctx *c, const char *s)
{
    return rlx_jv_strn(c, s, strlen(s));
}

rlx_jv rlx_jv_list(rlx_jctx *c, size_t cap)
{
    rlx_jlist *l = rlx_jinja_alloc(c, sizeof *l);
    l->cap = cap ? cap : 4;
    l->v = rlx_jinja_alloc(c, l->cap * sizeof *l->v);
    rlx_jv v = {.t = RLX_JV_LIST};
    v.u.l = l;
    return v;
}

rlx_jv rlx_jv_dict(rlx_jctx *c, size_t cap)
{
    rlx_jdict *d = rlx_jinja_alloc(c, sizeof *d);
    d->cap = cap ? cap : 4;
    d->k = rlx_jinja_alloc(c, d->cap * sizeof *d->k);
    d->v = rlx_jinja_alloc(c, d->cap * sizeof *d->v);
    rlx_jv v = {.t = RLX_JV_DICT};
    v.u.d = d;
    return v;
}

void rlx_jlist_push(rlx_jctx *c, rlx_jlist *l, rlx_jv v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap * 2;
        rlx_jv *nv = rlx_jinja_alloc(c, cap * sizeof *nv);
        memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

rlx_jv *rlx_jdict_get(rlx_jdict *d, rlx_jv k)
{
    for (size_t i = 0; i < d->n; i++)
        if (rlx_jv_equal(d->k[i], k))
            return &d->v[i];
    return NULL;
}

rlx_jv *rlx_jdict_gets(rlx_jdict *d, const char *key)
{
    size_t len = strlen(key);
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == RLX_JV_STR && d->k[i].u.s->len == len && !memcmp(d->k[i].u.s->s, key, len))
            return &d->v[i];
    return NULL;
}

void rlx_jdict_set(rlx_jctx *c, rlx_jdict *d, rlx_jv k, rlx_jv v)
{
    rlx_jv *slot = rlx_jdict_get(d, k);
    if (slot) {
        *slot = v;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap * 2;
        rlx_jv *nk = rlx_jinja_alloc(c, cap * sizeof *nk);
        rlx_jv *nv = rlx_jinja_alloc(c, cap * sizeof *nv);
        memcpy(nk, d->k, d->n * sizeof *nk);
        memcpy(nv, d->v, d->n * sizeof *nv);
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n] = v;
    d->n++;
}

/* ---- buffers -------------------------------------------------------------------------------- */

void rlx_jbuf_put(rlx_jrender *r, rlx_jbuf *b, const char *s, size_t n)
{
    if (!n)
        return;
    size_t lim = r->opts.max_output_bytes;
    if (lim && (n > lim || b->n > lim - n))
        rlx_jinja_fail(r->c, RLX_ERR_BUDGET, 0,
                       "the rendered text would be longer than the limit of %zu bytes", lim);
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *np = rlx_jinja_alloc(r->c, cap);
        if (b->n)
            memcpy(np, b->p, b->n);
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void rlx_jbuf_puts(rlx_jrender *r, rlx_jbuf *b, const char *s)
{
    rlx_jbuf_put(r, b, s, strlen(s));
}

rlx_jv rlx_jbuf_value(rlx_jrender *r, rlx_jbuf *b)
{
    return rlx_jv_strn(r->c, b->p ? b->p : "", b->n);
}

/* ---- printing ------------------------------------------------------------------------------- */

void rlx_jinja_format_float(double f, char *out, size_t size)
{
    if (isnan(f)) {
        snprintf(out, size, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(out, size, f < 0 ? "-inf" : "inf");
        return;
    }
    if (f == 0) {
        snprintf(out, size, signbit(f) ? "-0.0" : "0.0");
        return;
    }
    /* Shortest digits that read back to the same double, as repr() picks. */
    char e[40];
    int prec;
    for (prec = 0; prec < 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec, f);
        if (strtod(e, NULL) == f)
            break;
    }
    /* e is "-d.ddde+XX": split into digits and exponent. */
    char digits[24];
    int nd = 0;
    const char *p = e;
    bool neg = false;
    if (*p == '-') {
        neg = true;
        p++;
    }
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9')
            digits[nd++] = *p;
    digits[nd] = 0;
    int exp = atoi(p + 1);
    char buf[64];
    size_t o = 0;
    if (neg)
        buf[o++] = '-';
    if (exp < -4 || exp >= 16) {
        buf[o++] = digits[0];
        if (nd > 1) {
            buf[o++] = '.';
            for (int i = 1; i < nd; i++)
                buf[o++] = digits[i];
        }
        snprintf(buf + o, sizeof buf - o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    } else if (exp < 0) {
        buf[o++] = '0';
        buf[o++] = '.';
        for (int i = 0; i < -exp - 1; i++)
            buf[o++] = '0';
        for (int i = 0; i < nd; i++)
            buf[o++] = digits[i];
        buf[o] = 0;
    } else {
        for (int i = 0; i <= exp; i++)
            buf[o++] = i < nd ? digits[i] : '0';
        buf[o++] = '.';
        if (nd > exp + 1)
            for (int i = exp + 1; i < nd; i++)
                buf[o++] = digits[i];
        else
            buf[o++] = '0';
        buf[o] = 0;
    }
    snprintf(out, size, "%s", buf);
}

size_t rlx_jinja_utf8_len(const char *s, size_t n)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            count++;
    return count;
}

const char *rlx_jv_type_desc(rlx_jv v)
{
    switch (v.t) {
    case RLX_JV_UNDEF:
        return "Undefined";
    case RLX_JV_NONE:
        return "None";
    case RLX_JV_BOOL:
        return "bool object";
    case RLX_JV_INT:
        return "int object";
    case RLX_JV_FLOAT:
        return "float object";
    case RLX_JV_STR:
        return "str object";
    case RLX_JV_LIST:
        return v.u.l->tuple ? "tuple object" : "list object";
    case RLX_JV_DICT:
        return "dict object";
    case RLX_JV_NS:
        return "jinja2.utils.Namespace object";
    case RLX_JV_FUNC:
        return "function object";
    case RLX_JV_LOOP:
        return "LoopContext object";
    }
    return "object";
}

static void write_str_repr(rlx_jrender *r, rlx_jbuf *b, const char *s, size_t n)
{
    bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    rlx_jbuf_put(r, b, &q, 1);
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        const char *esc = NULL;
        char hex[8];
        if (ch == '\\')
            esc = "\\\\";
        else if (ch == (unsigned char)q)
            esc = q == '\'' ? "\\'" : "\\\"";
        else if (ch == '\n')
            esc = "\\n";
        else if (ch == '\r')
            esc = "\\r";
        else if (ch == '\t')
            esc = "\\t";
        else if (ch < 0x20 || ch == 0x7f) {
            snprintf(hex, sizeof hex, "\\x%02x", ch);
            esc = hex;
        }
        if (esc) {
            rlx_jbuf_put(r, b, s + start, i - start);
            rlx_jbuf_puts(r, b, esc);
            start = i + 1;
        }
    }
    rlx_jbuf_put(r, b, s + start, n - start);
    rlx_jbuf_put(r, b, &q, 1);
}

/* Containers being printed, outermost first: a container met again prints as
 * Python does for a recursive one ("[...]", "{...}"). */
#define MAX_NESTING 256

typedef struct repr_stack {
    const void *open[MAX_NESTING];
    int n;
} repr_stack;

static void repr_value(rlx_jrender *r, rlx_jbuf *b, rlx_jv v, repr_stack *st);

static bool repr_enter(rlx_jrender *r, rlx_jbuf *b, const void *p, const char *again,
                       repr_stack *st)
{
    for (int i = 0; i < st->n; i++)
        if (st->open[i] == p) {
            rlx_jbuf_puts(r, b, again);
            return false;
        }
    if (st->n == MAX_NESTING)
        rlx_jinja_fail(r->c, RLX_ERR_BUDGET, 0,
                       "a value nested more than %d deep cannot be printed", MAX_NESTING);
    st->open[st->n++] = p;
    return true;
}

static void repr_value(rlx_jrender *r, rlx_jbuf *b, rlx_jv v, repr_stack *st)
{
    switch (v.t) {
    case RLX_JV_STR:
        write_str_repr(r, b, v.u.s->s, v.u.s->len);
        return;
    case RLX_JV_UNDEF:
        rlx_jbuf_puts(r, b, "Undefined");
        return;
    case RLX_JV_LIST: {
        rlx_jlist *l = v.u.l;
        if (!repr_enter(r, b, l, l->tuple ? "(...)" : "[...]", st))
            return;
        rlx_jbuf_puts(r, b, l->tuple ? "(" : "[");
        for (size_t i = 0; i < l->n; i++) {
            if (i)
                rlx_jbuf_puts(r, b, ", ");
            repr_value(r, b, l->v[i], st);
        }
        if (l->tuple && l->n == 1)
            rlx_jbuf_puts(r, b, ",");
        rlx_jbuf_puts(r, b, l->tuple ? ")" : "]");
        st->n--;
        return;
    }
    case RLX_JV_DICT:
    case RLX_JV_NS: {
        rlx_jdict *d = v.u.d;
        if (v.t == RLX_JV_NS)
            rlx_jbuf_puts(r, b, "<Namespace ");
        if (repr_enter(r, b, d, "{...}", st)) {
            rlx_jbuf_puts(r, b, "{");
            for (size_t i = 0; i < d->n; i++) {
                if (i)
                    rlx_jbuf_puts(r, b, ", ");
                repr_value(r, b, d->k[i], st);
                rlx_jbuf_puts(r, b, ": ");
                repr_value(r, b, d->v[i], st);
            }
            rlx_jbuf_puts(r, b, "}");
            st->n--;
        }
        if (v.t == RLX_JV_NS)
            rlx_jbuf_puts(r, b, ">");
        return;
    }
    default:
        rlx_jv_write_str(r, b, v);
    }
}

void rlx_jv_write_repr(rlx_jrender *r, rlx_jbuf *b, rlx_jv v)
{
    repr_stack *st = rlx_jinja_alloc(r->c, sizeof *st);
    repr_value(r, b, v, st);
}

void rlx_jv_write_str(rlx_jrender *r, rlx_jbuf *b, rlx_jv v)
{
    char tmp[64];
    switch (v.t) {
    case RLX_JV_UNDEF:
        return;
    case RLX_JV_NONE:
        rlx_jbuf_puts(r, b, "None");
        return;
    case RLX_JV_BOOL:
        rlx_jbuf_puts(r, b, v.u.b ? "True" : "False");
        return;
    case RLX_JV_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i);
        rlx_jbuf_puts(r, b, tmp);
        return;
    case RLX_JV_FLOAT:
        rlx_jinja_format_float(v.u.f, tmp, sizeof tmp);
        rlx_jbuf_puts(r, b, tmp);
        return;
    case RLX_JV_STR:
        rlx_jbuf_put(r, b, v.u.s->s, v.u.s->len);
        return;
    case RLX_JV_FUNC:
        snprintf(tmp, sizeof tmp, "<function %s>", v.u.fn->name ? v.u.fn->name : "?");
        rlx_jbuf_puts(r, b, tmp);
        return;
    case RLX_JV_LOOP:
        snprintf(tmp, sizeof tmp, "<LoopContext %zu/%zu>", v.u.loop->index0 + 1, v.u.loop->length);
        rlx_jbuf_puts(r, b, tmp);
        return;
    default:
        rlx_jv_write_repr(r, b, v);
    }
}

rlx_jv rlx_jv_to_str(rlx_jrender *r, rlx_jv v)
{
    if (v.t == RLX_JV_STR)
        return v;
    rlx_jbuf b = {0};
    rlx_jv_write_str(r, &b, v);
    return rlx_jbuf_value(r, &b);
}

/* ---- truth, equality, order ----------------------------------------------------------------- */

bool rlx_jv_truthy(rlx_jv v)
{
    switch (v.t) {
    case RLX_JV_UNDEF:
    case RLX_JV_NONE:
        return false;
    case RLX_JV_BOOL:
        return v.u.b;
    case RLX_JV_INT:
        return v.u.i != 0;
    case RLX_JV_FLOAT:
        return v.u.f != 0;
    case RLX_JV_STR:
        return v.u.s->len != 0;
    case RLX_JV_LIST:
        return v.u.l->n != 0;
    case RLX_JV_DICT:
        return v.u.d->n != 0;
    default:
        return true;
    }
}

static bool is_num(rlx_jv v)
{
    return v.t == RLX_JV_BOOL || v.t == RLX_JV_INT || v.t == RLX_JV_FLOAT;
}

static double num_f(rlx_jv v)
{
    return v.t == RLX_JV_FLOAT ? v.u.f : v.t == RLX_JV_INT ? (double)v.u.i : (double)v.u.b;
}

static int64_t num_i(rlx_jv v)
{
    return v.t == RLX_JV_INT ? v.u.i : (int64_t)v.u.b;
}

/* Deeper than this only a hostile template nests values; such values compare
 * unequal rather than exhaust the C stack. */
#define MAX_COMPARE_DEPTH 1000

static bool equal_depth(rlx_jv a, rlx_jv b, int depth)
{
    if (is_num(a) && is_num(b)) {
        if (a.t == RLX_JV_FLOAT || b.t == RLX_JV_FLOAT)
            return num_f(a) == num_f(b);
        return num_i(a) == num_i(b);
    }
    if (a.t != b.t)
        return false;
    switch (a.t) {
    case RLX_JV_UNDEF:
    case RLX_JV_NONE:
        return true;
    case RLX_JV_STR:
        return a.u.s->len == b.u.s->len && !memcmp(a.u.s->s, b.u.s->s, a.u.s->len);
    case RLX_JV_LIST:
        if (a.u.l == b.u.l)
            return true;
        if (a.u.l->n != b.u.l->n || a.u.l->tuple != b.u.l->tuple || depth > MAX_COMPARE_DEPTH)
            return false;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!equal_depth(a.u.l->v[i], b.u.l->v[i], depth + 1))
                return false;
        return true;
    case RLX_JV_DICT:
        if (a.u.d == b.u.d)
            return true;
        if (a.u.d->n != b.u.d->n || depth > MAX_COMPARE_DEPTH)
            return false;
        for (size_t i = 0; i < a.u.d->n; i++) {
            rlx_jv *o = NULL;
            for (size_t k = 0; k < b.u.d->n && !o; k++)
                if (equal_depth(b.u.d->k[k], a.u.d->k[i], depth + 1))
                    o = &b.u.d->v[k];
            if (!o || !equal_depth(a.u.d->v[i], *o, depth + 1))
                return false;
        }
        return true;
    case RLX_JV_NS:
        return a.u.d == b.u.d;
    case RLX_JV_FUNC:
        return a.u.fn == b.u.fn;
    case RLX_JV_LOOP:
        return a.u.loop == b.u.loop;
    default:
        return false;
    }
}

bool rlx_jv_equal(rlx_jv a, rlx_jv b)
{
    return equal_depth(a, b, 0);
}

const char *rlx_jv_py_type(rlx_jv v)
{
    switch (v.t) {
    case RLX_JV_UNDEF:
        return "Undefined";
    case RLX_JV_NONE:
        return "NoneType";
    case RLX_JV_BOOL:
        return "bool";
    case RLX_JV_INT:
        return "int";
    case RLX_JV_FLOAT:
        return "float";
    case RLX_JV_STR:
        return "str";
    case RLX_JV_LIST:
        return v.u.l->tuple ? "tuple" : "list";
    case RLX_JV_DICT:
        return "dict";
    case RLX_JV_NS:
        return "Namespace";
    case RLX_JV_FUNC:
        return "function";
    case RLX_JV_LOOP:
        return "LoopContext";
    }
    return "object";
}

static int compare_depth(rlx_jrender *r, int line, rlx_jv a, rlx_jv b, const char *op, int depth)
{
    if (depth > MAX_COMPARE_DEPTH)
        rlx_jinja_rfail(r, RLX_ERR_BUDGET, line,
                        "values nested more than %d deep cannot be ordered", MAX_COMPARE_DEPTH);
    if (a.t == RLX_JV_UNDEF || b.t == RLX_JV_UNDEF) {
        rlx_jv u = a.t == RLX_JV_UNDEF ? a : b;
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "%s", u.u.undef ? u.u.undef : "undefined value");
    }
    if (is_num(a) && is_num(b)) {
        if (a.t == RLX_JV_FLOAT || b.t == RLX_JV_FLOAT) {
            double x = num_f(a), y = num_f(b);
            return x < y ? -1 : x > y ? 1 : 0;
        }
        int64_t x = num_i(a), y = num_i(b);
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.t == RLX_JV_STR && b.t == RLX_JV_STR) {
        size_t n = a.u.s->len < b.u.s->len ? a.u.s->len : b.u.s->len;
        int c = memcmp(a.u.s->s, b.u.s->s, n);
        if (c)
            return c < 0 ? -1 : 1;
        return a.u.s->len < b.u.s->len ? -1 : a.u.s->len > b.u.s->len ? 1 : 0;
    }
    if (a.t == RLX_JV_LIST && b.t == RLX_JV_LIST && a.u.l->tuple == b.u.l->tuple) {
        for (size_t i = 0; i < a.u.l->n && i < b.u.l->n; i++) {
            if (equal_depth(a.u.l->v[i], b.u.l->v[i], depth + 1))
                continue;
            return compare_depth(r, line, a.u.l->v[i], b.u.l->v[i], op, depth + 1);
        }
        return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n ? 1 : 0;
    }
    rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "'%s' not supported between instances of '%s' and '%s'",
                    op, rlx_jv_py_type(a), rlx_jv_py_type(b));
}

int rlx_jv_compare(rlx_jrender *r, int line, rlx_jv a, rlx_jv b, const char *op)
{
    return compare_depth(r, line, a, b, op, 0);
}

/* ---- iteration ------------------------------------------------------------------------------ */

rlx_jlist *rlx_jv_iterate(rlx_jrender *r, int line, rlx_jv v)
{
    rlx_jctx *c = r->c;
    switch (v.t) {
    case RLX_JV_UNDEF:
        return rlx_jv_list(c, 1).u.l;
    case RLX_JV_LIST:
        return v.u.l;
    case RLX_JV_DICT: {
        rlx_jlist *l = rlx_jv_list(c, v.u.d->n).u.l;
        for (size_t i = 0; i < v.u.d->n; i++)
            rlx_jlist_push(c, l, v.u.d->k[i]);
        return l;
    }
    case RLX_JV_STR: {
        const char *s = v.u.s->s;
        size_t n = v.u.s->len;
        rlx_jlist *l = rlx_jv_list(c, n).u.l;
        for (size_t i = 0; i < n;) {
            size_t j = i + 1;
            while (j < n && ((unsigned char)s[j] & 0xC0) == 0x80)
                j++;
            rlx_jlist_push(c, l, rlx_jv_strn(c, s + i, j - i));
            i = j;
        }
        return l;
    }
    default:
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "'%s' object is not iterable", rlx_jv_py_type(v));
    }
}

/* ---- JSON (Python json.dumps) --------------------------------------------------------------- */

static void json_string(rlx_jrender *r, rlx_jbuf *b, const char *s, size_t n, bool ascii)
{
    rlx_jbuf_puts(r, b, "\"");
    size_t start = 0;
    for (size_t i = 0; i < n;) {
        unsigned char ch = (unsigned char)s[i];
        char esc[16];
        const char *e = NULL;
        size_t adv = 1;
        if (ch == '"')
            e = "\\\"";
        else if (ch == '\\')
            e = "\\\\";
        else if (ch == '\n')
            e = "\\n";
        else if (ch == '\r')
            e = "\\r";
        else if (ch == '\t')
            e = "\\t";
        else if (ch == '\b')
            e = "\\b";
        else if (ch == '\f')
            e = "\\f";
        else if (ch < 0x20 || (ascii && ch == 0x7f)) {
            snprintf(esc, sizeof esc, "\\u%04x", ch);
            e = esc;
        } else if (ascii && ch >= 0x80) {
            uint32_t cp = 0;
            int extra = ch >= 0xF0 ? 3 : ch >= 0xE0 ? 2 : ch >= 0xC0 ? 1 : 0;
            cp = extra == 3 ? ch & 7 : extra == 2 ? ch & 15 : extra == 1 ? ch & 31 : ch;
            for (int k = 1; k <= extra && i + (size_t)k < n; k++)
                cp = (cp << 6) | ((unsigned char)s[i + (size_t)k] & 63);
            adv = 1 + (size_t)extra;
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xD800 + (cp >> 10),
                         0xDC00 + (cp & 0x3FF));
            } else {
                snprintf(esc, sizeof esc, "\\u%04x", cp);
            }
            e = esc;
        }
        if (e) {
            rlx_jbuf_put(r, b, s + start, i - start);
            rlx_jbuf_puts(r, b, e);
            start = i + adv;
        }
        i += adv;
    }
    if (start < n)
        rlx_jbuf_put(r, b, s + start, n - start);
    rlx_jbuf_puts(r, b, "\"");
}

static void json_newline(rlx_jrender *r, rlx_jbuf *b, int indent, int level)
{
    rlx_jbuf_puts(r, b, "\n");
    for (int i = 0; i < indent * level; i++)
        rlx_jbuf_puts(r, b, " ");
}

typedef struct json_opts {
    bool ascii, sort;
    int indent;
    const char *isep, *ksep;
} json_opts;

static void json_value(rlx_jrender *r, int line, rlx_jbuf *b, rlx_jv v, const json_opts *o,
                       int level)
{
    char tmp[64];
    if (level > r->opts.max_depth + 64)
        rlx_jinja_rfail(r, RLX_ERR_BUDGET, line, "tojson: value nested too deeply");
    switch (v.t) {
    case RLX_JV_NONE:
        rlx_jbuf_puts(r, b, "null");
        return;
    case RLX_JV_BOOL:
        rlx_jbuf_puts(r, b, v.u.b ? "true" : "false");
        return;
    case RLX_JV_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i);
        rlx_jbuf_puts(r, b, tmp);
        return;
    case RLX_JV_FLOAT:
        if (isnan(v.u.f))
            rlx_jbuf_puts(r, b, "NaN");
        else if (isinf(v.u.f))
            rlx_jbuf_puts(r, b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else {
            rlx_jinja_format_float(v.u.f, tmp, sizeof tmp);
            rlx_jbuf_puts(r, b, tmp);
        }
        return;
    case RLX_JV_STR:
        json_string(r, b, v.u.s->s, v.u.s->len, o->ascii);
        return;
    case RLX_JV_LIST: {
        rlx_jlist *l = v.u.l;
        if (!l->n) {
            rlx_jbuf_puts(r, b, "[]");
            return;
        }
        rlx_jbuf_puts(r, b, "[");
        for (size_t i = 0; i < l->n; i++) {
            if (i)
                rlx_jbuf_puts(r, b, o->isep);
            if (o->indent >= 0)
                json_newline(r, b, o->indent, level + 1);
            json_value(r, line, b, l->v[i], o, level + 1);
        }
        if (o->indent >= 0)
            json_newline(r, b, o->indent, level);
        rlx_jbuf_puts(r, b, "]");
        return;
    }
    case RLX_JV_DICT: {
        rlx_jdict *d = v.u.d;
        if (!d->n) {
            rlx_jbuf_puts(r, b, "{}");
            return;
        }
        size_t *order = rlx_jinja_alloc(r->c, d->n * sizeof *order);
        for (size_t i = 0; i < d->n; i++)
            order[i] = i;
        if (o->sort) {
            /* Insertion sort: dicts in templates are small. */
            for (size_t i = 1; i < d->n; i++) {
                size_t x = order[i], j = i;
                while (j > 0 && rlx_jv_compare(r, line, d->k[order[j - 1]], d->k[x], "<") > 0) {
                    order[j] = order[j - 1];
                    j--;
                }
                order[j] = x;
            }
        }
        rlx_jbuf_puts(r, b, "{");
        for (size_t j = 0; j < d->n; j++) {
            size_t i = order[j];
            if (j)
                rlx_jbuf_puts(r, b, o->isep);
            if (o->indent >= 0)
                json_newline(r, b, o->indent, level + 1);
            rlx_jv k = d->k[i];
            if (k.t == RLX_JV_STR) {
                json_string(r, b, k.u.s->s, k.u.s->len, o->ascii);
            } else if (k.t == RLX_JV_INT || k.t == RLX_JV_FLOAT || k.t == RLX_JV_BOOL ||
                       k.t == RLX_JV_NONE) {
                rlx_jbuf tb = {0};
                json_value(r, line, &tb, k, o, level + 1);
                json_string(r, b, tb.p, tb.n, o->ascii);
            } else {
                rlx_jinja_rfail(r, RLX_ERR_TYPE, line,
                                "tojson: keys must be str, int, float, bool or None, not %s",
                                rlx_jv_py_type(k));
            }
            rlx_jbuf_puts(r, b, o->ksep);
            json_value(r, line, b, d->v[i], o, level + 1);
        }
        if (o->indent >= 0)
            json_newline(r, b, o->indent, level);
        rlx_jbuf_puts(r, b, "}");
        return;
    }
    default:
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "tojson: Object of type %s is not JSON serializable",
                        rlx_jv_py_type(v));
    }
}

void rlx_jv_write_json(rlx_jrender *r, int line, rlx_jbuf *b, rlx_jv v, bool ensure_ascii,
                       int indent, const char *item_sep, const char *key_sep, bool sort_keys)
{
    json_opts o = {
        .ascii = ensure_ascii,
        .sort = sort_keys,
        .indent = indent,
        .isep = item_sep ? item_sep : (indent >= 0 ? "," : ", "),
        .ksep = key_sep ? key_sep : ": ",
    };
    json_value(r, line, b, v, &o, 0);
}
