/* Tree-walking evaluator and the two entry points (create, render). */
#include "engine/template/jinja-internal.h"

#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rlx_jinja_template {
    rlx_jctx parse; /* owns the tokens and the AST */
    rlx_jnode **body;
    size_t n_body;
};

typedef enum flow {
    FLOW_NORMAL,
    FLOW_BREAK,
    FLOW_CONTINUE,
} flow;

void rlx_jinja_rfail(rlx_jrender *r, rlx_status code, int line, const char *fmt, ...)
{
    char tmp[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    rlx_jinja_fail(r->c, code, line, "%s", tmp);
}

void rlx_jinja_count_iteration(rlx_jrender *r, int line)
{
    if (r->opts.max_loop_iterations && ++r->iterations > r->opts.max_loop_iterations)
        rlx_jinja_rfail(r, RLX_ERR_BUDGET, line,
                        "more than %llu loop iterations; the template loops without end or its "
                        "input is too large",
                        (unsigned long long)r->opts.max_loop_iterations);
}

/* ---- scopes --------------------------------------------------------------------------------- */

static rlx_jscope *scope_new(rlx_jrender *r, rlx_jscope *parent)
{
    rlx_jscope *s = rlx_jinja_alloc(r->c, sizeof *s);
    s->parent = parent;
    return s;
}

static void scope_set(rlx_jrender *r, rlx_jscope *s, const char *name, rlx_jv v)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->k[i], name)) {
            s->v[i] = v;
            return;
        }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4;
        const char **nk = rlx_jinja_alloc(r->c, cap * sizeof *nk);
        rlx_jv *nv = rlx_jinja_alloc(r->c, cap * sizeof *nv);
        if (s->n) {
            memcpy(nk, s->k, s->n * sizeof *nk);
            memcpy(nv, s->v, s->n * sizeof *nv);
        }
        s->k = nk;
        s->v = nv;
        s->cap = cap;
    }
    s->k[s->n] = name;
    s->v[s->n] = v;
    s->n++;
}

/* A closure keeps its scope chain alive: loops must not reuse any of it. */
static void capture(rlx_jscope *s)
{
    for (; s && !s->captured; s = s->parent)
        s->captured = true;
}

static bool scope_get(const rlx_jscope *s, const char *name, rlx_jv *out)
{
    for (; s; s = s->parent)
        for (size_t i = s->n; i-- > 0;)
            if (!strcmp(s->k[i], name)) {
                *out = s->v[i];
                return true;
            }
    return false;
}

/* ---- helpers -------------------------------------------------------------------------------- */

static const char *undef_reason(rlx_jv v)
{
    return v.u.undef ? v.u.undef : "value is undefined";
}

RLX_JNORETURN static void fail_undef(rlx_jrender *r, int line, rlx_jv v)
{
    rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "%s", undef_reason(v));
}

static rlx_jv eval(rlx_jrender *r, rlx_jscope *s, const rlx_jnode *n);
static flow exec_body(rlx_jrender *r, rlx_jscope *s, rlx_jnode *const *body, size_t n,
                      rlx_jbuf *out);

static bool is_intlike(rlx_jv v)
{
    return v.t == RLX_JV_INT || v.t == RLX_JV_BOOL;
}

static int64_t as_int(rlx_jv v)
{
    return v.t == RLX_JV_INT ? v.u.i : (int64_t)v.u.b;
}

static bool is_number(rlx_jv v)
{
    return is_intlike(v) || v.t == RLX_JV_FLOAT;
}

static double as_float(rlx_jv v)
{
    return v.t == RLX_JV_FLOAT ? v.u.f : (double)as_int(v);
}

/* Byte offsets of each code point of s (n+1 entries), or NULL when ASCII. */
static size_t *utf8_offsets(rlx_jrender *r, const rlx_jstr *s, size_t *count)
{
    bool ascii = true;
    for (size_t i = 0; i < s->len; i++)
        if ((unsigned char)s->s[i] >= 0x80) {
            ascii = false;
            break;
        }
    if (ascii) {
        *count = s->len;
        return NULL;
    }
    size_t n = rlx_jinja_utf8_len(s->s, s->len);
    size_t *off = rlx_jinja_alloc(r->c, (n + 1) * sizeof *off);
    size_t k = 0;
    for (size_t i = 0; i < s->len; i++)
        if (((unsigned char)s->s[i] & 0xC0) != 0x80)
            off[k++] = i;
    off[n] = s->len;
    *count = n;
    return off;
}

static rlx_jv loop_cycle(rlx_jrender *r, int line, rlx_jv self, const rlx_jargs *a)
{
    if (!a->npos)
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "no items for cycling given");
    return a->pos[self.u.loop->index0 % a->npos];
}

static rlx_jv loop_attr(rlx_jrender *r, rlx_jv obj, const char *name)
{
    const rlx_jloop *l = obj.u.loop;
    int64_t i = (int64_t)l->index0, n = (int64_t)l->length;
    if (!strcmp(name, "index"))
        return rlx_jv_int(i + 1);
    if (!strcmp(name, "index0"))
        return rlx_jv_int(i);
    if (!strcmp(name, "revindex"))
        return rlx_jv_int(n - i);
    if (!strcmp(name, "revindex0"))
        return rlx_jv_int(n - i - 1);
    if (!strcmp(name, "first"))
        return rlx_jv_bool(i == 0);
    if (!strcmp(name, "last"))
        return rlx_jv_bool(i + 1 == n);
    if (!strcmp(name, "length"))
        return rlx_jv_int(n);
    if (!strcmp(name, "depth"))
        return rlx_jv_int(1); /* only recursive loops (not supported) go deeper */
    if (!strcmp(name, "depth0"))
        return rlx_jv_int(0);
    if (!strcmp(name, "previtem"))
        return i > 0 ? l->items->v[i - 1] : rlx_jv_undef_msg(r->c, "there is no previous item");
    if (!strcmp(name, "nextitem"))
        return i + 1 < n ? l->items->v[i + 1] : rlx_jv_undef_msg(r->c, "there is no next item");
    if (!strcmp(name, "cycle")) {
        rlx_jfunc *f = rlx_jinja_alloc(r->c, sizeof *f);
        f->kind = RLX_JF_BUILTIN;
        f->name = "cycle";
        f->fn = loop_cycle;
        f->self = obj;
        rlx_jv v = {.t = RLX_JV_FUNC};
        v.u.fn = f;
        return v;
    }
    return rlx_jv_undef_msg(r->c, "'LoopContext object' has no attribute '%s'", name);
}

static rlx_jv getitem(rlx_jrender *r, int line, rlx_jv obj, rlx_jv key)
{
    switch (obj.t) {
    case RLX_JV_UNDEF:
        fail_undef(r, line, obj);
    case RLX_JV_DICT:
    case RLX_JV_NS: {
        rlx_jv *v = rlx_jdict_get(obj.u.d, key);
        if (v)
            return *v;
        break;
    }
    case RLX_JV_LIST:
        if (is_intlike(key)) {
            int64_t i = as_int(key), n = (int64_t)obj.u.l->n;
            if (i < 0)
                i += n;
            if (i >= 0 && i < n)
                return obj.u.l->v[i];
            return rlx_jv_undef_msg(r->c, "%s has no element %lld", rlx_jv_type_desc(obj),
                                    (long long)as_int(key));
        }
        break;
    case RLX_JV_STR:
        if (is_intlike(key)) {
            size_t count;
            size_t *off = utf8_offsets(r, obj.u.s, &count);
            int64_t i = as_int(key), n = (int64_t)count;
            if (i < 0)
                i += n;
            if (i >= 0 && i < n) {
                size_t a = off ? off[i] : (size_t)i, b = off ? off[i + 1] : (size_t)i + 1;
                return rlx_jv_strn(r->c, obj.u.s->s + a, b - a);
            }
            return rlx_jv_undef_msg(r->c, "str object has no element %lld", (long long)as_int(key));
        }
        break;
    default:
        break;
    }
    if (key.t == RLX_JV_STR)
        return rlx_jinja_getattr(r, line, obj, key.u.s->s);
    rlx_jbuf b = {0};
    rlx_jv_write_repr(r, &b, key);
    return rlx_jv_undef_msg(r->c, "%s has no element %s", rlx_jv_type_desc(obj), b.p ? b.p : "");
}

rlx_jv rlx_jinja_getattr(rlx_jrender *r, int line, rlx_jv obj, const char *name)
{
    if (obj.t == RLX_JV_UNDEF)
        fail_undef(r, line, obj);
    rlx_jfilter_fn fn = NULL;
    bool unsafe = false;
    if (name[0] != '_' && rlx_jinja_find_method(obj, name, &fn, &unsafe)) {
        rlx_jfunc *f = rlx_jinja_alloc(r->c, sizeof *f);
        f->kind = RLX_JF_BUILTIN;
        f->name = name;
        f->fn = unsafe ? NULL : fn;
        f->self = obj;
        rlx_jv v = {.t = RLX_JV_FUNC};
        v.u.fn = f;
        return v;
    }
    if (obj.t == RLX_JV_DICT || obj.t == RLX_JV_NS) {
        rlx_jv *v = rlx_jdict_gets(obj.u.d, name);
        if (v)
            return *v;
    }
    if (obj.t == RLX_JV_LOOP)
        return loop_attr(r, obj, name);
    if (obj.t == RLX_JV_NONE)
        return rlx_jv_undef_msg(r->c, "'None' has no attribute '%s'", name);
    return rlx_jv_undef_msg(r->c, "'%s' has no attribute '%s'", rlx_jv_type_desc(obj), name);
}

static int64_t clamp_index(int64_t i, int64_t n, bool neg_step)
{
    if (i < 0) {
        i += n;
        if (i < 0)
            i = neg_step ? -1 : 0;
    } else if (i >= n) {
        i = neg_step ? n - 1 : n;
    }
    return i;
}

static rlx_jv slice(rlx_jrender *r, int line, rlx_jv obj, rlx_jv start, rlx_jv stop, rlx_jv step)
{
    if (obj.t == RLX_JV_UNDEF)
        fail_undef(r, line, obj);
    int64_t st = 1;
    if (step.t != RLX_JV_NONE && step.t != RLX_JV_UNDEF) {
        if (!is_intlike(step))
            rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "slice indices must be integers or None");
        st = as_int(step);
        if (st == 0)
            rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "slice step cannot be zero");
    }
    size_t count;
    size_t *off = NULL;
    if (obj.t == RLX_JV_STR)
        off = utf8_offsets(r, obj.u.s, &count);
    else if (obj.t == RLX_JV_LIST)
        count = obj.u.l->n;
    else
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "'%s' is not subscriptable with a slice",
                        rlx_jv_type_desc(obj));
    int64_t n = (int64_t)count;
    int64_t a, b;
    bool has_a = start.t != RLX_JV_NONE && start.t != RLX_JV_UNDEF;
    bool has_b = stop.t != RLX_JV_NONE && stop.t != RLX_JV_UNDEF;
    if ((has_a && !is_intlike(start)) || (has_b && !is_intlike(stop)))
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "slice indices must be integers or None");
    if (st > 0) {
        a = has_a ? clamp_index(as_int(start), n, false) : 0;
        b = has_b ? clamp_index(as_int(stop), n, false) : n;
    } else {
        a = has_a ? clamp_index(as_int(start), n, true) : n - 1;
        b = has_b ? clamp_index(as_int(stop), n, true) : -1;
    }
    if (obj.t == RLX_JV_LIST) {
        rlx_jv out = rlx_jv_list(r->c, 0);
        out.u.l->tuple = obj.u.l->tuple;
        for (int64_t i = a; st > 0 ? i < b : i > b; i += st)
            rlx_jlist_push(r->c, out.u.l, obj.u.l->v[i]);
        return out;
    }
    rlx_jbuf buf = {0};
    for (int64_t i = a; st > 0 ? i < b : i > b; i += st) {
        size_t x = off ? off[i] : (size_t)i, y = off ? off[i + 1] : (size_t)i + 1;
        rlx_jbuf_put(r, &buf, obj.u.s->s + x, y - x);
    }
    return rlx_jbuf_value(r, &buf);
}

static const char *binop_name(int op)
{
    switch (op) {
    case 'f':
        return "//";
    case 'p':
        return "**";
    case '+':
        return "+";
    case '-':
        return "-";
    case '*':
        return "*";
    case '/':
        return "/";
    case '%':
        return "%";
    }
    return "?";
}

static rlx_jv repeat(rlx_jrender *r, int line, rlx_jv seq, int64_t times)
{
    if (times < 0)
        times = 0;
    /* The output and memory limits bound these loops; an empty operand ends at once. */
    (void)line;
    if (seq.t == RLX_JV_STR) {
        rlx_jbuf b = {0};
        for (int64_t i = 0; i < times && seq.u.s->len; i++)
            rlx_jbuf_put(r, &b, seq.u.s->s, seq.u.s->len);
        return rlx_jbuf_value(r, &b);
    }
    rlx_jv out = rlx_jv_list(r->c, 0);
    for (int64_t i = 0; i < times && seq.u.l->n; i++) {
        for (size_t k = 0; k < seq.u.l->n; k++)
            rlx_jlist_push(r->c, out.u.l, seq.u.l->v[k]);
    }
    return out;
}

static rlx_jv arith(rlx_jrender *r, int line, int op, rlx_jv a, rlx_jv b)
{
    if (a.t == RLX_JV_UNDEF)
        fail_undef(r, line, a);
    if (b.t == RLX_JV_UNDEF)
        fail_undef(r, line, b);
    if (is_number(a) && is_number(b)) {
        bool ints = is_intlike(a) && is_intlike(b);
        if (ints && op != '/' && op != 'p') {
            int64_t x = as_int(a), y = as_int(b), z = 0;
            bool overflow = false;
            switch (op) {
            case '+':
                overflow = __builtin_add_overflow(x, y, &z);
                break;
            case '-':
                overflow = __builtin_sub_overflow(x, y, &z);
                break;
            case '*':
                overflow = __builtin_mul_overflow(x, y, &z);
                break;
            case 'f':
            case '%':
                if (y == 0)
                    rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "integer division or modulo by zero");
                if (x == INT64_MIN && y == -1) {
                    overflow = op == 'f';
                    z = 0;
                    break;
                }
                {
                    int64_t q = x / y, m = x % y;
                    if (m != 0 && ((m < 0) != (y < 0))) {
                        q--;
                        m += y;
                    }
                    z = op == 'f' ? q : m;
                }
                break;
            }
            if (overflow)
                rlx_jinja_rfail(r, RLX_ERR_UNSUPPORTED, line,
                                "integer overflow: results beyond 64 bits are not supported");
            return rlx_jv_int(z);
        }
        if (ints && op == 'p' && as_int(b) >= 0) {
            int64_t base = as_int(a), e = as_int(b), z = 1;
            for (int64_t i = 0; i < e; i++)
                if (__builtin_mul_overflow(z, base, &z))
                    rlx_jinja_rfail(r, RLX_ERR_UNSUPPORTED, line,
                                    "integer overflow: results beyond 64 bits are not supported");
                else if (z == 0 || z == 1)
                    break;
            return rlx_jv_int(z);
        }
        double x = as_float(a), y = as_float(b);
        switch (op) {
        case '+':
            return rlx_jv_float(x + y);
        case '-':
            return rlx_jv_float(x - y);
        case '*':
            return rlx_jv_float(x * y);
        case '/':
            if (y == 0)
                rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "division by zero");
            return rlx_jv_float(x / y);
        case 'f':
            if (y == 0)
                rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "float floor division by zero");
            return rlx_jv_float(floor(x / y));
        case '%': {
            if (y == 0)
                rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "float modulo");
            double m = fmod(x, y);
            if (m != 0 && ((m < 0) != (y < 0)))
                m += y;
            return rlx_jv_float(m);
        }
        case 'p':
            if (x == 0 && y < 0)
                rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "0.0 cannot be raised to a negative power");
            return rlx_jv_float(pow(x, y));
        }
    }
    if (op == '+' && a.t == RLX_JV_STR && b.t == RLX_JV_STR) {
        rlx_jbuf buf = {0};
        rlx_jbuf_put(r, &buf, a.u.s->s, a.u.s->len);
        rlx_jbuf_put(r, &buf, b.u.s->s, b.u.s->len);
        return rlx_jbuf_value(r, &buf);
    }
    if (op == '+' && a.t == RLX_JV_LIST && b.t == RLX_JV_LIST && a.u.l->tuple == b.u.l->tuple) {
        rlx_jv out = rlx_jv_list(r->c, a.u.l->n + b.u.l->n);
        out.u.l->tuple = a.u.l->tuple;
        for (size_t i = 0; i < a.u.l->n; i++)
            rlx_jlist_push(r->c, out.u.l, a.u.l->v[i]);
        for (size_t i = 0; i < b.u.l->n; i++)
            rlx_jlist_push(r->c, out.u.l, b.u.l->v[i]);
        return out;
    }
    if (op == '%' && a.t == RLX_JV_STR)
        return rlx_jinja_percent_format(r, line, a, b);
    if (op == '*' && (a.t == RLX_JV_STR || a.t == RLX_JV_LIST) && is_intlike(b))
        return repeat(r, line, a, as_int(b));
    if (op == '*' && (b.t == RLX_JV_STR || b.t == RLX_JV_LIST) && is_intlike(a))
        return repeat(r, line, b, as_int(a));
    if (op == '+' && (a.t == RLX_JV_STR || a.t == RLX_JV_LIST))
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "can only concatenate %s (not \"%s\") to %s",
                        rlx_jv_py_type(a), rlx_jv_py_type(b), rlx_jv_py_type(a));
    rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "unsupported operand type(s) for %s: '%s' and '%s'",
                    binop_name(op), rlx_jv_py_type(a), rlx_jv_py_type(b));
}

static bool contains(rlx_jrender *r, int line, rlx_jv needle, rlx_jv hay)
{
    switch (hay.t) {
    case RLX_JV_STR:
        if (needle.t != RLX_JV_STR)
            rlx_jinja_rfail(r, RLX_ERR_TYPE, line,
                            "'in <string>' requires string as left operand, not %s",
                            rlx_jv_type_desc(needle));
        if (!needle.u.s->len)
            return true;
        return memmem(hay.u.s->s, hay.u.s->len, needle.u.s->s, needle.u.s->len) != NULL;
    case RLX_JV_LIST:
        for (size_t i = 0; i < hay.u.l->n; i++)
            if (rlx_jv_equal(hay.u.l->v[i], needle))
                return true;
        return false;
    case RLX_JV_DICT:
    case RLX_JV_NS:
        return rlx_jdict_get(hay.u.d, needle) != NULL;
    case RLX_JV_UNDEF:
        return false;
    default:
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "argument of type '%s' is not iterable",
                        rlx_jv_type_desc(hay));
    }
}

static void eval_args(rlx_jrender *r, rlx_jscope *s, const rlx_jnode *n, rlx_jargs *a, rlx_jv first,
                      bool has_first)
{
    size_t np = n->n_items + (has_first ? 1 : 0);
    rlx_jv *pos = rlx_jinja_alloc(r->c, (np ? np : 1) * sizeof *pos);
    size_t k = 0;
    if (has_first)
        pos[k++] = first;
    for (size_t i = 0; i < n->n_items; i++)
        pos[k++] = eval(r, s, n->items[i]);
    rlx_jv *kw = rlx_jinja_alloc(r->c, (n->n_kw ? n->n_kw : 1) * sizeof *kw);
    for (size_t i = 0; i < n->n_kw; i++)
        kw[i] = eval(r, s, n->kw[i]);
    a->npos = np;
    a->pos = pos;
    a->nkw = n->n_kw;
    a->kwn = n->kwnames;
    a->kw = kw;
}

static rlx_jv apply_filter(rlx_jrender *r, rlx_jscope *s, const rlx_jnode *f, rlx_jv operand)
{
    rlx_jargs a;
    eval_args(r, s, f, &a, rlx_jv_none, false);
    return f->filter(r, f->line, operand, &a);
}

/* Run a filter node chain on an already computed value (for {% filter %}
 * and {% set x | f %}): the innermost filter's operand is `v`. */
static rlx_jv apply_filter_chain(rlx_jrender *r, rlx_jscope *s, const rlx_jnode *f, rlx_jv v)
{
    if (!f)
        return v;
    v = apply_filter_chain(r, s, f->a, v);
    return apply_filter(r, s, f, v);
}

static void enter_depth(rlx_jrender *r, int line)
{
    if (++r->depth > r->opts.max_depth)
        rlx_jinja_rfail(r, RLX_ERR_BUDGET, line,
                        "nesting deeper than %d (macros calling themselves without end?)",
                        r->opts.max_depth);
}

/* ---- calls ---------------------------------------------------------------------------------- */

static rlx_jv call_macro(rlx_jrender *r, int line, const rlx_jfunc *f, const rlx_jargs *a,
                         rlx_jv caller)
{
    const rlx_jnode *m = f->node;
    enter_depth(r, line);
    rlx_jscope *s = scope_new(r, f->scope);
    if (a->npos > m->n_names)
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "macro '%s' takes not more than %zu argument(s)",
                        f->name, m->n_names);
    bool *given = rlx_jinja_alloc(r->c, (m->n_names ? m->n_names : 1) * sizeof *given);
    for (size_t i = 0; i < a->npos; i++) {
        scope_set(r, s, m->names[i], a->pos[i]);
        given[i] = true;
    }
    for (size_t k = 0; k < a->nkw; k++) {
        size_t i;
        for (i = 0; i < m->n_names; i++)
            if (!strcmp(m->names[i], a->kwn[k]))
                break;
        if (i == m->n_names)
            rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "macro '%s' takes no keyword argument '%s'",
                            f->name, a->kwn[k]);
        scope_set(r, s, m->names[i], a->kw[k]);
        given[i] = true;
    }
    for (size_t i = 0; i < m->n_names; i++) {
        if (given[i])
            continue;
        if (m->items[i])
            scope_set(r, s, m->names[i], eval(r, s, m->items[i]));
        else
            scope_set(r, s, m->names[i],
                      rlx_jv_undef_msg(r->c, "parameter '%s' was not provided", m->names[i]));
    }
    if (caller.t == RLX_JV_FUNC)
        scope_set(r, s, "caller", caller);
    rlx_jbuf out = {0};
    exec_body(r, s, m->body, m->n_body, &out);
    r->depth--;
    return rlx_jbuf_value(r, &out);
}

rlx_jv rlx_jinja_call(rlx_jrender *r, int line, rlx_jv fn, const rlx_jargs *a)
{
    if (fn.t == RLX_JV_UNDEF)
        fail_undef(r, line, fn);
    if (fn.t != RLX_JV_FUNC)
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "'%s' is not callable", rlx_jv_type_desc(fn));
    const rlx_jfunc *f = fn.u.fn;
    switch (f->kind) {
    case RLX_JF_BUILTIN:
        if (!f->fn)
            rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "access to attribute '%s' of '%s' is unsafe",
                            f->name, rlx_jv_type_desc(f->self));
        return f->fn(r, line, f->self, a);
    case RLX_JF_MACRO:
        return call_macro(r, line, f, a, rlx_jv_undef);
    case RLX_JF_CALLER: {
        const rlx_jnode *cb = f->node;
        enter_depth(r, line);
        rlx_jscope *s = scope_new(r, f->scope);
        for (size_t i = 0; i < cb->n_names; i++) {
            rlx_jv v = i < a->npos    ? a->pos[i]
                       : cb->items[i] ? eval(r, s, cb->items[i])
                                      : rlx_jv_undef_msg(r->c, "'%s' is undefined", cb->names[i]);
            scope_set(r, s, cb->names[i], v);
        }
        rlx_jbuf out = {0};
        exec_body(r, s, cb->body, cb->n_body, &out);
        r->depth--;
        return rlx_jbuf_value(r, &out);
    }
    }
    return rlx_jv_none;
}

/* ---- expressions ---------------------------------------------------------------------------- */

static rlx_jv eval(rlx_jrender *r, rlx_jscope *s, const rlx_jnode *n)
{
    switch (n->kind) {
    case RLX_JN_CONST:
        return n->value;
    case RLX_JN_NAME: {
        rlx_jv v;
        if (scope_get(s, n->name, &v))
            return v;
        rlx_jfilter_fn fn;
        if (rlx_jinja_find_global(n->name, &fn)) {
            rlx_jfunc *f = rlx_jinja_alloc(r->c, sizeof *f);
            f->kind = RLX_JF_BUILTIN;
            f->name = n->name;
            f->fn = fn;
            f->self = rlx_jv_none;
            rlx_jv out = {.t = RLX_JV_FUNC};
            out.u.fn = f;
            return out;
        }
        return rlx_jv_undef_msg(r->c, "'%s' is undefined", n->name);
    }
    case RLX_JN_LIST:
    case RLX_JN_TUPLE: {
        rlx_jv out = rlx_jv_list(r->c, n->n_items);
        out.u.l->tuple = n->kind == RLX_JN_TUPLE;
        for (size_t i = 0; i < n->n_items; i++)
            rlx_jlist_push(r->c, out.u.l, eval(r, s, n->items[i]));
        return out;
    }
    case RLX_JN_DICT: {
        rlx_jv out = rlx_jv_dict(r->c, n->n_items / 2);
        for (size_t i = 0; i + 1 < n->n_items; i += 2) {
            rlx_jv k = eval(r, s, n->items[i]);
            if (k.t == RLX_JV_LIST && !k.u.l->tuple)
                rlx_jinja_rfail(r, RLX_ERR_TYPE, n->line, "unhashable type: 'list'");
            if (k.t == RLX_JV_DICT || k.t == RLX_JV_UNDEF)
                rlx_jinja_rfail(r, RLX_ERR_TYPE, n->line, "unhashable type: '%s'",
                                rlx_jv_type_desc(k));
            rlx_jdict_set(r->c, out.u.d, k, eval(r, s, n->items[i + 1]));
        }
        return out;
    }
    case RLX_JN_GETATTR:
        return rlx_jinja_getattr(r, n->line, eval(r, s, n->a), n->name);
    case RLX_JN_GETITEM:
        return getitem(r, n->line, eval(r, s, n->a), eval(r, s, n->b));
    case RLX_JN_SLICE: {
        rlx_jv obj = eval(r, s, n->a);
        rlx_jv a = n->b ? eval(r, s, n->b) : rlx_jv_none;
        rlx_jv b = n->c ? eval(r, s, n->c) : rlx_jv_none;
        rlx_jv c = n->d ? eval(r, s, n->d) : rlx_jv_none;
        return slice(r, n->line, obj, a, b, c);
    }
    case RLX_JN_CALL: {
        rlx_jv fn = eval(r, s, n->a);
        rlx_jargs a;
        eval_args(r, s, n, &a, rlx_jv_none, false);
        if (fn.t == RLX_JV_UNDEF && n->a->kind == RLX_JN_GETATTR) {
            rlx_jv obj = eval(r, s, n->a->a);
            rlx_jinja_rfail(r, RLX_ERR_UNSUPPORTED, n->line, "unknown method '%s' of %s",
                            n->a->name, rlx_jv_type_desc(obj));
        }
        if (fn.t == RLX_JV_UNDEF && n->a->kind == RLX_JN_NAME)
            rlx_jinja_rfail(r, RLX_ERR_UNSUPPORTED, n->line, "unknown function '%s'", n->a->name);
        return rlx_jinja_call(r, n->line, fn, &a);
    }
    case RLX_JN_FILTER:
        return apply_filter(r, s, n, eval(r, s, n->a));
    case RLX_JN_TEST: {
        rlx_jv v = eval(r, s, n->a);
        rlx_jargs a;
        eval_args(r, s, n, &a, rlx_jv_none, false);
        bool b = n->test(r, n->line, v, &a);
        return rlx_jv_bool(n->op ? !b : b);
    }
    case RLX_JN_NEG:
    case RLX_JN_POS: {
        rlx_jv v = eval(r, s, n->a);
        if (v.t == RLX_JV_UNDEF)
            fail_undef(r, n->line, v);
        if (n->kind == RLX_JN_POS && is_number(v))
            return v.t == RLX_JV_BOOL ? rlx_jv_int(v.u.b) : v;
        if (v.t == RLX_JV_FLOAT)
            return rlx_jv_float(-v.u.f);
        if (is_intlike(v)) {
            if (as_int(v) == INT64_MIN)
                rlx_jinja_rfail(r, RLX_ERR_UNSUPPORTED, n->line, "integer overflow");
            return rlx_jv_int(-as_int(v));
        }
        rlx_jinja_rfail(r, RLX_ERR_TYPE, n->line, "bad operand type for unary %c: '%s'",
                        n->kind == RLX_JN_NEG ? '-' : '+', rlx_jv_type_desc(v));
    }
    case RLX_JN_NOT:
        return rlx_jv_bool(!rlx_jv_truthy(eval(r, s, n->a)));
    case RLX_JN_AND: {
        rlx_jv a = eval(r, s, n->a);
        return rlx_jv_truthy(a) ? eval(r, s, n->b) : a;
    }
    case RLX_JN_OR: {
        rlx_jv a = eval(r, s, n->a);
        return rlx_jv_truthy(a) ? a : eval(r, s, n->b);
    }
    case RLX_JN_BINOP: {
        rlx_jv a = eval(r, s, n->a);
        rlx_jv b = eval(r, s, n->b);
        if (n->op == '~') {
            rlx_jbuf buf = {0};
            rlx_jv_write_str(r, &buf, a);
            rlx_jv_write_str(r, &buf, b);
            return rlx_jbuf_value(r, &buf);
        }
        return arith(r, n->line, n->op, a, b);
    }
    case RLX_JN_COMPARE: {
        rlx_jv left = eval(r, s, n->a);
        for (size_t i = 0; i < n->n_items; i++) {
            rlx_jv right = eval(r, s, n->items[i]);
            bool ok;
            switch (n->ops[i]) {
            case RLX_JC_EQ:
                ok = rlx_jv_equal(left, right);
                break;
            case RLX_JC_NE:
                ok = !rlx_jv_equal(left, right);
                break;
            case RLX_JC_LT:
                ok = rlx_jv_compare(r, n->line, left, right, "<") < 0;
                break;
            case RLX_JC_LE:
                ok = rlx_jv_compare(r, n->line, left, right, "<=") <= 0;
                break;
            case RLX_JC_GT:
                ok = rlx_jv_compare(r, n->line, left, right, ">") > 0;
                break;
            case RLX_JC_GE:
                ok = rlx_jv_compare(r, n->line, left, right, ">=") >= 0;
                break;
            case RLX_JC_IN:
                ok = contains(r, n->line, left, right);
                break;
            default:
                ok = !contains(r, n->line, left, right);
                break;
            }
            if (!ok)
                return rlx_jv_bool(false);
            left = right;
        }
        return rlx_jv_bool(true);
    }
    case RLX_JN_COND:
        if (rlx_jv_truthy(eval(r, s, n->b)))
            return eval(r, s, n->a);
        return n->c ? eval(r, s, n->c) : rlx_jv_undef_msg(r->c, "the inline if had no else");
    default:
        rlx_jinja_rfail(r, RLX_ERR_INTERNAL, n->line, "statement used as an expression");
    }
}

/* ---- statements ----------------------------------------------------------------------------- */

static void assign_targets(rlx_jrender *r, rlx_jscope *s, int line, const char *const *names,
                           size_t n, rlx_jv v)
{
    if (n == 1) {
        scope_set(r, s, names[0], v);
        return;
    }
    rlx_jlist *l = rlx_jv_iterate(r, line, v);
    if (l->n != n)
        rlx_jinja_rfail(r, RLX_ERR_TYPE, line, "%s values to unpack (expected %zu, got %zu)",
                        l->n < n ? "not enough" : "too many", n, l->n);
    for (size_t i = 0; i < n; i++)
        scope_set(r, s, names[i], l->v[i]);
}

/* A scope for the next iteration: the previous one is reused (emptied)
 * unless something captured it. */
static rlx_jscope *iteration_scope(rlx_jrender *r, rlx_jscope *prev, rlx_jscope *parent)
{
    if (prev && !prev->captured) {
        prev->n = 0;
        return prev;
    }
    return scope_new(r, parent);
}

static flow exec_for(rlx_jrender *r, rlx_jscope *s, const rlx_jnode *n, rlx_jbuf *out)
{
    rlx_jv seqv = eval(r, s, n->a);
    rlx_jlist *seq = rlx_jv_iterate(r, n->line, seqv);
    rlx_jlist *items = seq;
    rlx_jscope *ls = NULL;
    if (n->b) {
        /* Filtered loops: loop.* counts only the items that pass. */
        items = rlx_jv_list(r->c, seq->n).u.l;
        for (size_t i = 0; i < seq->n; i++) {
            rlx_jinja_count_iteration(r, n->line);
            ls = iteration_scope(r, ls, s);
            assign_targets(r, ls, n->line, n->names, n->n_names, seq->v[i]);
            if (rlx_jv_truthy(eval(r, ls, n->b)))
                rlx_jlist_push(r->c, items, seq->v[i]);
        }
    }
    rlx_jloop *lp = rlx_jinja_alloc(r->c, sizeof *lp);
    lp->length = items->n;
    lp->items = items;
    rlx_jv loop = {.t = RLX_JV_LOOP};
    loop.u.loop = lp;
    for (size_t i = 0; i < items->n; i++) {
        rlx_jinja_count_iteration(r, n->line);
        lp->index0 = i;
        ls = iteration_scope(r, ls, s);
        scope_set(r, ls, "loop", loop);
        assign_targets(r, ls, n->line, n->names, n->n_names, items->v[i]);
        flow f = exec_body(r, ls, n->body, n->n_body, out);
        if (f == FLOW_BREAK)
            break;
    }
    if (items->n == 0 && n->n_else)
        return exec_body(r, s, n->else_body, n->n_else, out);
    return FLOW_NORMAL;
}

static flow exec(rlx_jrender *r, rlx_jscope *s, const rlx_jnode *n, rlx_jbuf *out)
{
    switch (n->kind) {
    case RLX_JN_DATA:
        rlx_jbuf_put(r, out, n->value.u.s->s, n->value.u.s->len);
        return FLOW_NORMAL;
    case RLX_JN_OUTPUT:
        rlx_jv_write_str(r, out, eval(r, s, n->a));
        return FLOW_NORMAL;
    case RLX_JN_IF:
        if (rlx_jv_truthy(eval(r, s, n->a)))
            return exec_body(r, s, n->body, n->n_body, out);
        return exec_body(r, s, n->else_body, n->n_else, out);
    case RLX_JN_FOR:
        return exec_for(r, s, n, out);
    case RLX_JN_SET:
        if (n->op == 1) {
            rlx_jv ns = eval(r, s, n->a);
            if (ns.t != RLX_JV_NS)
                rlx_jinja_rfail(r, RLX_ERR_TYPE, n->line,
                                "cannot assign attribute on non-namespace object");
            rlx_jdict_set(r->c, ns.u.d, rlx_jv_cstr(r->c, n->name), eval(r, s, n->b));
        } else {
            assign_targets(r, s, n->line, n->names, n->n_names, eval(r, s, n->b));
        }
        return FLOW_NORMAL;
    case RLX_JN_SET_BLOCK: {
        rlx_jbuf b = {0};
        exec_body(r, s, n->body, n->n_body, &b);
        scope_set(r, s, n->names[0], apply_filter_chain(r, s, n->b, rlx_jbuf_value(r, &b)));
        return FLOW_NORMAL;
    }
    case RLX_JN_FILTER_BLOCK: {
        rlx_jbuf b = {0};
        exec_body(r, s, n->body, n->n_body, &b);
        rlx_jv_write_str(r, out, apply_filter_chain(r, s, n->b, rlx_jbuf_value(r, &b)));
        return FLOW_NORMAL;
    }
    case RLX_JN_MACRO: {
        rlx_jfunc *f = rlx_jinja_alloc(r->c, sizeof *f);
        f->kind = RLX_JF_MACRO;
        f->name = n->name;
        f->node = n;
        f->scope = s;
        capture(s);
        rlx_jv v = {.t = RLX_JV_FUNC};
        v.u.fn = f;
        scope_set(r, s, n->name, v);
        return FLOW_NORMAL;
    }
    case RLX_JN_CALL_BLOCK: {
        rlx_jfunc *cf = rlx_jinja_alloc(r->c, sizeof *cf);
        cf->kind = RLX_JF_CALLER;
        cf->name = "caller";
        cf->node = n;
        cf->scope = s;
        capture(s);
        rlx_jv caller = {.t = RLX_JV_FUNC};
        caller.u.fn = cf;
        const rlx_jnode *call = n->a;
        rlx_jv fn = eval(r, s, call->a);
        rlx_jargs a;
        eval_args(r, s, call, &a, rlx_jv_none, false);
        if (fn.t != RLX_JV_FUNC || fn.u.fn->kind != RLX_JF_MACRO)
            rlx_jinja_rfail(r, RLX_ERR_TYPE, n->line, "{%% call %%} needs a macro to call");
        rlx_jv_write_str(r, out, call_macro(r, n->line, fn.u.fn, &a, caller));
        return FLOW_NORMAL;
    }
    case RLX_JN_SCOPE: {
        rlx_jscope *ws = scope_new(r, s);
        for (size_t i = 0; i < n->n_names; i++)
            scope_set(r, ws, n->names[i], eval(r, ws, n->items[i]));
        return exec_body(r, ws, n->body, n->n_body, out);
    }
    case RLX_JN_BLOCKLIST:
        return exec_body(r, s, n->body, n->n_body, out);
    case RLX_JN_BREAK:
        return FLOW_BREAK;
    case RLX_JN_CONTINUE:
        return FLOW_CONTINUE;
    default:
        rlx_jinja_rfail(r, RLX_ERR_INTERNAL, n->line, "expression used as a statement");
    }
}

static flow exec_body(rlx_jrender *r, rlx_jscope *s, rlx_jnode *const *body, size_t n,
                      rlx_jbuf *out)
{
    if (n)
        enter_depth(r, body[0]->line);
    flow f = FLOW_NORMAL;
    for (size_t i = 0; i < n && f == FLOW_NORMAL; i++)
        f = exec(r, s, body[i], out);
    if (n)
        r->depth--;
    return f;
}

/* ---- JSON context → values ------------------------------------------------------------------ */

static rlx_jv from_json(rlx_jrender *r, const json_object *o, int depth)
{
    if (depth > 256)
        rlx_jinja_rfail(r, RLX_ERR_BUDGET, 0, "context JSON nested more than 256 deep");
    switch (json_object_get_type(o)) {
    case json_type_null:
        return rlx_jv_none;
    case json_type_boolean:
        return rlx_jv_bool(json_object_get_boolean(o));
    case json_type_int:
        return rlx_jv_int(json_object_get_int64(o));
    case json_type_double:
        return rlx_jv_float(json_object_get_double(o));
    case json_type_string:
        return rlx_jv_strn(r->c, json_object_get_string((json_object *)o),
                           (size_t)json_object_get_string_len(o));
    case json_type_array: {
        size_t n = json_object_array_length(o);
        rlx_jv l = rlx_jv_list(r->c, n);
        for (size_t i = 0; i < n; i++)
            rlx_jlist_push(r->c, l.u.l, from_json(r, json_object_array_get_idx(o, i), depth + 1));
        return l;
    }
    case json_type_object: {
        rlx_jv d = rlx_jv_dict(r->c, (size_t)json_object_object_length(o));
        json_object_object_foreach((json_object *)o, key, val)
        {
            rlx_jdict_set(r->c, d.u.d, rlx_jv_cstr(r->c, key), from_json(r, val, depth + 1));
        }
        return d;
    }
    }
    return rlx_jv_none;
}

/* ---- entry points --------------------------------------------------------------------------- */

rlx_jinja_render_opts rlx_jinja_default_render_opts(void)
{
    rlx_jinja_render_opts o = {
        .now = NULL,
        .max_output_bytes = 8u << 20,
        .max_memory_bytes = 256u << 20,
        .max_loop_iterations = 1000000,
        .max_depth = 64,
    };
    return o;
}

rlx_status rlx_jinja_template_create(const char *source, size_t len, rlx_jinja_template **out,
                                     rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!source || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "chat template: no source given");
    rlx_jinja_template *t = calloc(1, sizeof *t);
    if (!t)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "chat template: out of memory");
    t->parse.limit = 64u << 20;
    if (setjmp(t->parse.jmp)) {
        rlx_status code = t->parse.code;
        rlx_error_set(err, code, "%s", t->parse.msg);
        rlx_jinja_arena_free(&t->parse);
        free(t);
        return code;
    }
    rlx_jtok *toks = NULL;
    size_t n = 0;
    rlx_jinja_lex(&t->parse, source, len, &toks, &n);
    rlx_jinja_parse(&t->parse, toks, n, &t->body, &t->n_body);
    *out = t;
    return RLX_OK;
}

void rlx_jinja_template_free(rlx_jinja_template *t)
{
    if (!t)
        return;
    rlx_jinja_arena_free(&t->parse);
    free(t);
}

rlx_status rlx_jinja_template_render(const rlx_jinja_template *t, const json_object *context,
                                     const rlx_jinja_render_opts *opts, char **out, size_t *out_len,
                                     rlx_error **err)
{
    if (out)
        *out = NULL;
    if (out_len)
        *out_len = 0;
    if (!t || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "chat template: nothing to render");
    if (context && !json_object_is_type(context, json_type_object))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "chat template: the context must be a JSON object");
    rlx_jctx *c = calloc(1, sizeof *c);
    rlx_jrender *r = calloc(1, sizeof *r);
    if (!c || !r) {
        free(c);
        free(r);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "chat template: out of memory");
    }
    r->c = c;
    r->opts = opts ? *opts : rlx_jinja_default_render_opts();
    if (r->opts.max_depth <= 0)
        r->opts.max_depth = 64;
    c->limit = r->opts.max_memory_bytes;
    if (setjmp(c->jmp)) {
        rlx_status code = c->code;
        rlx_error_set(err, code, "%s", c->msg);
        rlx_jinja_arena_free(c);
        free(c);
        free(r);
        return code;
    }
    r->globals = scope_new(r, NULL);
    if (context) {
        json_object_object_foreach((json_object *)context, key, val)
        {
            scope_set(r, r->globals, rlx_jinja_strndup(c, key, strlen(key)), from_json(r, val, 0));
        }
    }
    rlx_jscope *top = scope_new(r, r->globals);
    rlx_jbuf buf = {0};
    r->out = &buf;
    exec_body(r, top, t->body, t->n_body, &buf);
    char *s = malloc(buf.n + 1);
    if (!s)
        rlx_jinja_fail(c, RLX_ERR_NO_MEMORY, 0, "out of memory");
    if (buf.n)
        memcpy(s, buf.p, buf.n);
    s[buf.n] = 0;
    if (out_len)
        *out_len = buf.n;
    *out = s;
    rlx_jinja_arena_free(c);
    free(c);
    free(r);
    return RLX_OK;
}
