/* Recursive-descent parser: tokens → AST, following jinja2's grammar and
 * operator precedence. Filters and tests are resolved here so an unknown one
 * is refused before anything renders, as jinja2 does at compile time. */
#include "engine/template/jinja-internal.h"

#include <stdio.h>
#include <string.h>

#define MAX_PARSE_DEPTH 200

typedef struct parser {
    rlx_jctx *c;
    const rlx_jtok *t;
    size_t n, pos;
    int depth;
} parser;

/* A growable array of node pointers (or names) in the arena. */
typedef struct vec {
    void **p;
    size_t n, cap;
} vec;

static void vec_push(rlx_jctx *c, vec *v, void *x)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        void **np = rlx_jinja_alloc(c, cap * sizeof *np);
        if (v->n)
            memcpy(np, v->p, v->n * sizeof *np);
        v->p = np;
        v->cap = cap;
    }
    v->p[v->n++] = x;
}

static const rlx_jtok *cur(parser *p)
{
    return &p->t[p->pos];
}

static const rlx_jtok *peek(parser *p, size_t k)
{
    size_t i = p->pos + k < p->n ? p->pos + k : p->n - 1;
    return &p->t[i];
}

static void advance(parser *p)
{
    if (p->pos + 1 < p->n)
        p->pos++;
}

static bool is_op(const rlx_jtok *t, const char *op)
{
    return t->t == RLX_JT_OP && !strcmp(t->s, op);
}

static bool is_name(const rlx_jtok *t, const char *name)
{
    return t->t == RLX_JT_NAME && !strcmp(t->s, name);
}

static const char *describe(const rlx_jtok *t)
{
    switch (t->t) {
    case RLX_JT_EOF:
        return "end of template";
    case RLX_JT_DATA:
        return "template data";
    case RLX_JT_VAR_BEGIN:
        return "'{{'";
    case RLX_JT_VAR_END:
        return "end of print statement '}}'";
    case RLX_JT_BLOCK_BEGIN:
        return "'{%'";
    case RLX_JT_BLOCK_END:
        return "end of statement block '%}'";
    case RLX_JT_STRING:
        return "string";
    case RLX_JT_INT:
        return "integer";
    case RLX_JT_FLOAT:
        return "float";
    default:
        return t->s;
    }
}

RLX_JNORETURN static void unexpected(parser *p, const char *wanted)
{
    const rlx_jtok *t = cur(p);
    if (wanted)
        rlx_jinja_fail(p->c, RLX_ERR_FORMAT, t->line, "expected %s, got %s", wanted, describe(t));
    rlx_jinja_fail(p->c, RLX_ERR_FORMAT, t->line, "unexpected %s", describe(t));
}

static void expect_op(parser *p, const char *op)
{
    if (!is_op(cur(p), op)) {
        char w[16];
        snprintf(w, sizeof w, "'%s'", op);
        unexpected(p, w);
    }
    advance(p);
}

static const char *expect_name(parser *p)
{
    if (cur(p)->t != RLX_JT_NAME)
        unexpected(p, "a name");
    const char *s = cur(p)->s;
    advance(p);
    return s;
}

static void expect_block_end(parser *p)
{
    if (cur(p)->t != RLX_JT_BLOCK_END)
        unexpected(p, "end of statement block '%}'");
    advance(p);
}

static rlx_jnode *node(parser *p, rlx_jnode_kind kind, int line)
{
    rlx_jnode *n = rlx_jinja_alloc(p->c, sizeof *n);
    n->kind = kind;
    n->line = line;
    return n;
}

static void enter(parser *p)
{
    if (++p->depth > MAX_PARSE_DEPTH)
        rlx_jinja_fail(p->c, RLX_ERR_BUDGET, cur(p)->line,
                       "expressions or blocks nested more than %d deep", MAX_PARSE_DEPTH);
}

static rlx_jnode *parse_expr(parser *p, bool condexpr);
static rlx_jnode *parse_or(parser *p);
static rlx_jnode *parse_unary(parser *p, bool with_filter);
static rlx_jnode *parse_tuple(parser *p, bool condexpr, bool explicit_only);

/* Call arguments after '(' up to and including ')'. */
static void parse_args(parser *p, rlx_jnode *n)
{
    vec pos = {0}, kwn = {0}, kw = {0};
    expect_op(p, "(");
    while (!is_op(cur(p), ")")) {
        if (pos.n + kw.n)
            expect_op(p, ",");
        if (is_op(cur(p), ")"))
            break;
        if (cur(p)->t == RLX_JT_NAME && is_op(peek(p, 1), "=")) {
            vec_push(p->c, &kwn, (void *)cur(p)->s);
            advance(p);
            advance(p);
            vec_push(p->c, &kw, parse_expr(p, true));
        } else {
            if (kw.n)
                rlx_jinja_fail(p->c, RLX_ERR_FORMAT, cur(p)->line,
                               "positional argument after a keyword argument");
            if (is_op(cur(p), "*"))
                rlx_jinja_fail(p->c, RLX_ERR_UNSUPPORTED, cur(p)->line,
                               "'*args' and '**kwargs' in calls are not supported");
            vec_push(p->c, &pos, parse_expr(p, true));
        }
    }
    advance(p);
    n->items = (rlx_jnode **)pos.p;
    n->n_items = pos.n;
    n->kwnames = (const char **)kwn.p;
    n->kw = (rlx_jnode **)kw.p;
    n->n_kw = kw.n;
}

static rlx_jnode *parse_primary(parser *p)
{
    const rlx_jtok *t = cur(p);
    rlx_jnode *n;
    switch (t->t) {
    case RLX_JT_NAME:
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True") || !strcmp(t->s, "false") ||
            !strcmp(t->s, "False")) {
            n = node(p, RLX_JN_CONST, t->line);
            n->value = rlx_jv_bool(t->s[0] == 't' || t->s[0] == 'T');
        } else if (!strcmp(t->s, "none") || !strcmp(t->s, "None")) {
            n = node(p, RLX_JN_CONST, t->line);
            n->value = rlx_jv_none;
        } else {
            n = node(p, RLX_JN_NAME, t->line);
            n->name = t->s;
        }
        advance(p);
        return n;
    case RLX_JT_STRING: {
        /* Adjacent literals concatenate. */
        size_t total = 0, k = p->pos;
        while (p->t[k].t == RLX_JT_STRING)
            total += p->t[k++].len;
        char *s = rlx_jinja_alloc(p->c, total + 1);
        size_t o = 0;
        while (cur(p)->t == RLX_JT_STRING) {
            memcpy(s + o, cur(p)->s, cur(p)->len);
            o += cur(p)->len;
            advance(p);
        }
        n = node(p, RLX_JN_CONST, t->line);
        n->value = rlx_jv_strn(p->c, s, total);
        return n;
    }
    case RLX_JT_INT:
        n = node(p, RLX_JN_CONST, t->line);
        n->value = rlx_jv_int(t->i);
        advance(p);
        return n;
    case RLX_JT_FLOAT:
        n = node(p, RLX_JN_CONST, t->line);
        n->value = rlx_jv_float(t->f);
        advance(p);
        return n;
    case RLX_JT_OP:
        if (is_op(t, "(")) {
            advance(p);
            n = parse_tuple(p, true, true);
            expect_op(p, ")");
            return n;
        }
        if (is_op(t, "[")) {
            advance(p);
            vec items = {0};
            while (!is_op(cur(p), "]")) {
                if (items.n)
                    expect_op(p, ",");
                if (is_op(cur(p), "]"))
                    break;
                vec_push(p->c, &items, parse_expr(p, true));
            }
            advance(p);
            n = node(p, RLX_JN_LIST, t->line);
            n->items = (rlx_jnode **)items.p;
            n->n_items = items.n;
            return n;
        }
        if (is_op(t, "{")) {
            advance(p);
            vec items = {0};
            while (!is_op(cur(p), "}")) {
                if (items.n)
                    expect_op(p, ",");
                if (is_op(cur(p), "}"))
                    break;
                vec_push(p->c, &items, parse_expr(p, true));
                expect_op(p, ":");
                vec_push(p->c, &items, parse_expr(p, true));
            }
            advance(p);
            n = node(p, RLX_JN_DICT, t->line);
            n->items = (rlx_jnode **)items.p;
            n->n_items = items.n;
            return n;
        }
        break;
    default:
        break;
    }
    unexpected(p, "an expression");
}

static rlx_jnode *parse_subscript(parser *p, rlx_jnode *obj, int line)
{
    /* after '[' */
    rlx_jnode *parts[3] = {NULL, NULL, NULL};
    int k = 0;
    bool slice = false;
    for (;;) {
        if (is_op(cur(p), ":")) {
            slice = true;
            if (++k > 2)
                unexpected(p, "']'");
            advance(p);
            continue;
        }
        if (is_op(cur(p), "]"))
            break;
        if (parts[k])
            unexpected(p, "']'");
        parts[k] = parse_expr(p, true);
    }
    advance(p);
    rlx_jnode *n;
    if (slice) {
        n = node(p, RLX_JN_SLICE, line);
        n->a = obj;
        n->b = parts[0];
        n->c = parts[1];
        n->d = parts[2];
    } else {
        if (!parts[0])
            unexpected(p, "an expression");
        n = node(p, RLX_JN_GETITEM, line);
        n->a = obj;
        n->b = parts[0];
    }
    return n;
}

static rlx_jnode *parse_postfix(parser *p, rlx_jnode *n)
{
    for (;;) {
        const rlx_jtok *t = cur(p);
        if (is_op(t, ".")) {
            advance(p);
            const rlx_jtok *a = cur(p);
            if (a->t == RLX_JT_NAME) {
                rlx_jnode *g = node(p, RLX_JN_GETATTR, t->line);
                g->a = n;
                g->name = a->s;
                advance(p);
                n = g;
            } else if (a->t == RLX_JT_INT) {
                rlx_jnode *g = node(p, RLX_JN_GETITEM, t->line);
                g->a = n;
                g->b = node(p, RLX_JN_CONST, t->line);
                g->b->value = rlx_jv_int(a->i);
                advance(p);
                n = g;
            } else {
                unexpected(p, "an attribute name");
            }
        } else if (is_op(t, "[")) {
            advance(p);
            n = parse_subscript(p, n, t->line);
        } else if (is_op(t, "(")) {
            rlx_jnode *call = node(p, RLX_JN_CALL, t->line);
            call->a = n;
            parse_args(p, call);
            n = call;
        } else {
            return n;
        }
    }
}

/* Filter or test arguments: "(...)" when present. */
static void parse_opt_args(parser *p, rlx_jnode *n)
{
    if (is_op(cur(p), "("))
        parse_args(p, n);
}

static const char *dotted_name(parser *p)
{
    const char *name = expect_name(p);
    while (is_op(cur(p), ".") && peek(p, 1)->t == RLX_JT_NAME) {
        advance(p);
        const char *more = cur(p)->s;
        size_t len = strlen(name) + strlen(more) + 2;
        char *s = rlx_jinja_alloc(p->c, len);
        snprintf(s, len, "%s.%s", name, more);
        name = s;
        advance(p);
    }
    return name;
}

static rlx_jnode *parse_filter(parser *p, rlx_jnode *operand)
{
    /* at '|' */
    int line = cur(p)->line;
    advance(p);
    const char *name = dotted_name(p);
    rlx_jnode *f = node(p, RLX_JN_FILTER, line);
    f->a = operand;
    f->name = name;
    f->filter = rlx_jinja_find_filter(name);
    if (!f->filter)
        rlx_jinja_fail(p->c, RLX_ERR_UNSUPPORTED, line, "unknown filter '%s'", name);
    parse_opt_args(p, f);
    return f;
}

static rlx_jnode *parse_filter_expr(parser *p, rlx_jnode *n)
{
    for (;;) {
        const rlx_jtok *t = cur(p);
        if (is_op(t, "|")) {
            n = parse_filter(p, n);
        } else if (is_name(t, "is")) {
            int line = t->line;
            advance(p);
            rlx_jnode *test = node(p, RLX_JN_TEST, line);
            test->a = n;
            if (is_name(cur(p), "not")) {
                test->op = 1;
                advance(p);
            }
            const char *name = dotted_name(p);
            test->name = name;
            test->test = rlx_jinja_find_test(name);
            if (!test->test)
                rlx_jinja_fail(p->c, RLX_ERR_UNSUPPORTED, line, "unknown test '%s'", name);
            const rlx_jtok *a = cur(p);
            if (is_op(a, "(")) {
                parse_args(p, test);
            } else if ((a->t == RLX_JT_NAME && strcmp(a->s, "else") && strcmp(a->s, "or") &&
                        strcmp(a->s, "and") && strcmp(a->s, "is") && strcmp(a->s, "if") &&
                        strcmp(a->s, "in") && strcmp(a->s, "not")) ||
                       a->t == RLX_JT_STRING || a->t == RLX_JT_INT || a->t == RLX_JT_FLOAT ||
                       is_op(a, "[") || is_op(a, "{")) {
                /* "x is divisibleby 3": one bare argument */
                rlx_jnode *arg = parse_primary(p);
                arg = parse_postfix(p, arg);
                test->items = rlx_jinja_alloc(p->c, sizeof *test->items);
                test->items[0] = arg;
                test->n_items = 1;
            }
            n = test;
        } else if (is_op(t, "(")) {
            rlx_jnode *call = node(p, RLX_JN_CALL, t->line);
            call->a = n;
            parse_args(p, call);
            n = call;
        } else {
            return n;
        }
    }
}

static rlx_jnode *parse_unary(parser *p, bool with_filter)
{
    enter(p);
    const rlx_jtok *t = cur(p);
    rlx_jnode *n;
    if (is_op(t, "-") || is_op(t, "+")) {
        advance(p);
        n = node(p, t->s[0] == '-' ? RLX_JN_NEG : RLX_JN_POS, t->line);
        n->a = parse_unary(p, false);
    } else {
        n = parse_primary(p);
    }
    n = parse_postfix(p, n);
    if (with_filter)
        n = parse_filter_expr(p, n);
    p->depth--;
    return n;
}

static rlx_jnode *binop(parser *p, int op, int line, rlx_jnode *a, rlx_jnode *b)
{
    rlx_jnode *n = node(p, RLX_JN_BINOP, line);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static rlx_jnode *parse_pow(parser *p)
{
    rlx_jnode *n = parse_unary(p, true);
    while (is_op(cur(p), "**")) {
        int line = cur(p)->line;
        advance(p);
        n = binop(p, 'p', line, n, parse_unary(p, true));
    }
    return n;
}

static rlx_jnode *parse_math2(parser *p)
{
    rlx_jnode *n = parse_pow(p);
    for (;;) {
        const rlx_jtok *t = cur(p);
        int op = is_op(t, "*")    ? '*'
                 : is_op(t, "/")  ? '/'
                 : is_op(t, "//") ? 'f'
                 : is_op(t, "%")  ? '%'
                                  : 0;
        if (!op)
            return n;
        advance(p);
        n = binop(p, op, t->line, n, parse_pow(p));
    }
}

static rlx_jnode *parse_concat(parser *p)
{
    rlx_jnode *n = parse_math2(p);
    while (is_op(cur(p), "~")) {
        int line = cur(p)->line;
        advance(p);
        n = binop(p, '~', line, n, parse_math2(p));
    }
    return n;
}

static rlx_jnode *parse_math1(parser *p)
{
    rlx_jnode *n = parse_concat(p);
    for (;;) {
        const rlx_jtok *t = cur(p);
        int op = is_op(t, "+") ? '+' : is_op(t, "-") ? '-' : 0;
        if (!op)
            return n;
        advance(p);
        n = binop(p, op, t->line, n, parse_concat(p));
    }
}

static rlx_jnode *parse_compare(parser *p)
{
    int line = cur(p)->line;
    rlx_jnode *first = parse_math1(p);
    vec operands = {0};
    int ops[64];
    size_t nops = 0;
    for (;;) {
        const rlx_jtok *t = cur(p);
        int op = -1;
        if (is_op(t, "=="))
            op = RLX_JC_EQ;
        else if (is_op(t, "!="))
            op = RLX_JC_NE;
        else if (is_op(t, "<"))
            op = RLX_JC_LT;
        else if (is_op(t, "<="))
            op = RLX_JC_LE;
        else if (is_op(t, ">"))
            op = RLX_JC_GT;
        else if (is_op(t, ">="))
            op = RLX_JC_GE;
        else if (is_name(t, "in"))
            op = RLX_JC_IN;
        else if (is_name(t, "not") && is_name(peek(p, 1), "in")) {
            op = RLX_JC_NOTIN;
            advance(p);
        }
        if (op < 0)
            break;
        advance(p);
        if (nops == sizeof ops / sizeof ops[0])
            rlx_jinja_fail(p->c, RLX_ERR_BUDGET, t->line, "too many chained comparisons");
        ops[nops++] = op;
        vec_push(p->c, &operands, parse_math1(p));
    }
    if (!nops)
        return first;
    rlx_jnode *n = node(p, RLX_JN_COMPARE, line);
    n->a = first;
    n->items = (rlx_jnode **)operands.p;
    n->n_items = operands.n;
    n->ops = rlx_jinja_alloc(p->c, nops * sizeof *n->ops);
    memcpy(n->ops, ops, nops * sizeof *ops);
    return n;
}

static rlx_jnode *parse_not(parser *p)
{
    if (is_name(cur(p), "not")) {
        enter(p);
        rlx_jnode *n = node(p, RLX_JN_NOT, cur(p)->line);
        advance(p);
        n->a = parse_not(p);
        p->depth--;
        return n;
    }
    return parse_compare(p);
}

static rlx_jnode *parse_and(parser *p)
{
    rlx_jnode *n = parse_not(p);
    while (is_name(cur(p), "and")) {
        rlx_jnode *a = node(p, RLX_JN_AND, cur(p)->line);
        advance(p);
        a->a = n;
        a->b = parse_not(p);
        n = a;
    }
    return n;
}

static rlx_jnode *parse_or(parser *p)
{
    rlx_jnode *n = parse_and(p);
    while (is_name(cur(p), "or")) {
        rlx_jnode *o = node(p, RLX_JN_OR, cur(p)->line);
        advance(p);
        o->a = n;
        o->b = parse_and(p);
        n = o;
    }
    return n;
}

static rlx_jnode *parse_expr(parser *p, bool condexpr)
{
    enter(p);
    rlx_jnode *n = parse_or(p);
    if (condexpr) {
        while (is_name(cur(p), "if")) {
            rlx_jnode *c = node(p, RLX_JN_COND, cur(p)->line);
            advance(p);
            c->a = n;
            c->b = parse_or(p);
            if (is_name(cur(p), "else")) {
                advance(p);
                c->c = parse_expr(p, true);
            }
            n = c;
        }
    }
    p->depth--;
    return n;
}

static bool tuple_end(parser *p)
{
    const rlx_jtok *t = cur(p);
    return t->t == RLX_JT_VAR_END || t->t == RLX_JT_BLOCK_END || t->t == RLX_JT_EOF ||
           is_op(t, ")") || is_name(t, "if") || is_name(t, "recursive");
}

/* "a, b, c" as a tuple; a single expression without a comma stays itself
 * (unless explicit_only: inside parentheses "()" is the empty tuple). */
static rlx_jnode *parse_tuple(parser *p, bool condexpr, bool explicit_only)
{
    int line = cur(p)->line;
    vec items = {0};
    bool comma = false;
    for (;;) {
        if (items.n) {
            if (!is_op(cur(p), ","))
                break;
            advance(p);
            comma = true;
        }
        if (tuple_end(p))
            break;
        vec_push(p->c, &items, parse_expr(p, condexpr));
    }
    if (items.n == 1 && !comma)
        return items.p[0];
    if (!items.n && !explicit_only)
        unexpected(p, "an expression");
    rlx_jnode *n = node(p, RLX_JN_TUPLE, line);
    n->items = (rlx_jnode **)items.p;
    n->n_items = items.n;
    return n;
}

/* Assignment targets: "x", "a, b" or "(a, b)". */
static void parse_targets(parser *p, vec *names)
{
    bool paren = is_op(cur(p), "(");
    if (paren)
        advance(p);
    for (;;) {
        vec_push(p->c, names, (void *)expect_name(p));
        if (!is_op(cur(p), ","))
            break;
        advance(p);
        if (cur(p)->t != RLX_JT_NAME)
            break;
    }
    if (paren)
        expect_op(p, ")");
}

/* ---- statements ----------------------------------------------------------------------------- */

static void parse_body(parser *p, vec *out, const char *const *ends, const char **which);

static bool is_end(const rlx_jtok *t, const char *const *ends)
{
    if (t->t != RLX_JT_NAME)
        return false;
    for (size_t i = 0; ends && ends[i]; i++)
        if (!strcmp(t->s, ends[i]))
            return true;
    return false;
}

static void set_body(rlx_jnode *n, vec *v)
{
    n->body = (rlx_jnode **)v->p;
    n->n_body = v->n;
}

static void parse_params(parser *p, rlx_jnode *n)
{
    vec names = {0}, defs = {0};
    expect_op(p, "(");
    while (!is_op(cur(p), ")")) {
        if (names.n)
            expect_op(p, ",");
        if (is_op(cur(p), ")"))
            break;
        vec_push(p->c, &names, (void *)expect_name(p));
        if (is_op(cur(p), "=")) {
            advance(p);
            vec_push(p->c, &defs, parse_expr(p, true));
        } else {
            if (defs.n && defs.p[defs.n - 1])
                rlx_jinja_fail(p->c, RLX_ERR_FORMAT, cur(p)->line,
                               "parameter without a default after one with a default");
            vec_push(p->c, &defs, NULL);
        }
    }
    advance(p);
    n->names = (const char **)names.p;
    n->n_names = names.n;
    n->items = (rlx_jnode **)defs.p;
    n->n_items = defs.n;
}

static rlx_jnode *parse_statement(parser *p)
{
    /* after '{%' */
    const rlx_jtok *t = cur(p);
    int line = t->line;
    if (t->t != RLX_JT_NAME)
        unexpected(p, "a statement name");
    const char *tag = t->s;
    advance(p);
    rlx_jnode *n;
    if (!strcmp(tag, "if")) {
        n = node(p, RLX_JN_IF, line);
        n->a = parse_tuple(p, false, false);
        expect_block_end(p);
        rlx_jnode *cur_if = n;
        for (;;) {
            static const char *const ends[] = {"elif", "else", "endif", NULL};
            vec body = {0};
            const char *which = NULL;
            parse_body(p, &body, ends, &which);
            set_body(cur_if, &body);
            if (!strcmp(which, "elif")) {
                rlx_jnode *e = node(p, RLX_JN_IF, cur(p)->line);
                e->a = parse_tuple(p, false, false);
                expect_block_end(p);
                cur_if->else_body = rlx_jinja_alloc(p->c, sizeof(rlx_jnode *));
                cur_if->else_body[0] = e;
                cur_if->n_else = 1;
                cur_if = e;
                continue;
            }
            if (!strcmp(which, "else")) {
                static const char *const ends2[] = {"endif", NULL};
                expect_block_end(p);
                vec eb = {0};
                parse_body(p, &eb, ends2, &which);
                cur_if->else_body = (rlx_jnode **)eb.p;
                cur_if->n_else = eb.n;
            }
            expect_block_end(p);
            return n;
        }
    }
    if (!strcmp(tag, "for")) {
        n = node(p, RLX_JN_FOR, line);
        vec names = {0};
        parse_targets(p, &names);
        n->names = (const char **)names.p;
        n->n_names = names.n;
        if (!is_name(cur(p), "in"))
            unexpected(p, "'in'");
        advance(p);
        n->a = parse_tuple(p, false, false);
        if (is_name(cur(p), "if")) {
            advance(p);
            n->b = parse_expr(p, true);
        }
        if (is_name(cur(p), "recursive"))
            rlx_jinja_fail(p->c, RLX_ERR_UNSUPPORTED, cur(p)->line,
                           "recursive for loops are not supported");
        expect_block_end(p);
        static const char *const ends[] = {"endfor", "else", NULL};
        vec body = {0};
        const char *which = NULL;
        parse_body(p, &body, ends, &which);
        set_body(n, &body);
        if (!strcmp(which, "else")) {
            static const char *const ends2[] = {"endfor", NULL};
            expect_block_end(p);
            vec eb = {0};
            parse_body(p, &eb, ends2, &which);
            n->else_body = (rlx_jnode **)eb.p;
            n->n_else = eb.n;
        }
        expect_block_end(p);
        return n;
    }
    if (!strcmp(tag, "set")) {
        vec names = {0};
        if (cur(p)->t == RLX_JT_NAME && is_op(peek(p, 1), ".") && peek(p, 2)->t == RLX_JT_NAME) {
            n = node(p, RLX_JN_SET, line);
            n->op = 1;
            n->a = node(p, RLX_JN_NAME, line);
            n->a->name = cur(p)->s;
            n->name = peek(p, 2)->s;
            advance(p);
            advance(p);
            advance(p);
            expect_op(p, "=");
            n->b = parse_tuple(p, true, false);
            expect_block_end(p);
            return n;
        }
        parse_targets(p, &names);
        if (is_op(cur(p), "=")) {
            advance(p);
            n = node(p, RLX_JN_SET, line);
            n->names = (const char **)names.p;
            n->n_names = names.n;
            n->b = parse_tuple(p, true, false);
            expect_block_end(p);
            return n;
        }
        if (names.n != 1)
            unexpected(p, "'='");
        n = node(p, RLX_JN_SET_BLOCK, line);
        n->names = (const char **)names.p;
        n->n_names = 1;
        while (is_op(cur(p), "|"))
            n->b = parse_filter(p, n->b);
        expect_block_end(p);
        static const char *const ends[] = {"endset", NULL};
        vec body = {0};
        const char *which = NULL;
        parse_body(p, &body, ends, &which);
        set_body(n, &body);
        expect_block_end(p);
        return n;
    }
    if (!strcmp(tag, "macro")) {
        n = node(p, RLX_JN_MACRO, line);
        n->name = expect_name(p);
        parse_params(p, n);
        expect_block_end(p);
        static const char *const ends[] = {"endmacro", NULL};
        vec body = {0};
        const char *which = NULL;
        parse_body(p, &body, ends, &which);
        set_body(n, &body);
        if (cur(p)->t == RLX_JT_NAME)
            advance(p); /* optional macro name after endmacro */
        expect_block_end(p);
        return n;
    }
    if (!strcmp(tag, "call")) {
        n = node(p, RLX_JN_CALL_BLOCK, line);
        if (is_op(cur(p), "("))
            parse_params(p, n);
        n->a = parse_expr(p, true);
        if (n->a->kind != RLX_JN_CALL)
            rlx_jinja_fail(p->c, RLX_ERR_FORMAT, line, "expected a call after 'call'");
        expect_block_end(p);
        static const char *const ends[] = {"endcall", NULL};
        vec body = {0};
        const char *which = NULL;
        parse_body(p, &body, ends, &which);
        set_body(n, &body);
        expect_block_end(p);
        return n;
    }
    if (!strcmp(tag, "filter")) {
        n = node(p, RLX_JN_FILTER_BLOCK, line);
        /* The first filter has no '|' in front of it. */
        rlx_jnode *f = node(p, RLX_JN_FILTER, line);
        f->name = dotted_name(p);
        f->filter = rlx_jinja_find_filter(f->name);
        if (!f->filter)
            rlx_jinja_fail(p->c, RLX_ERR_UNSUPPORTED, line, "unknown filter '%s'", f->name);
        parse_opt_args(p, f);
        while (is_op(cur(p), "|"))
            f = parse_filter(p, f);
        n->b = f;
        expect_block_end(p);
        static const char *const ends[] = {"endfilter", NULL};
        vec body = {0};
        const char *which = NULL;
        parse_body(p, &body, ends, &which);
        set_body(n, &body);
        expect_block_end(p);
        return n;
    }
    if (!strcmp(tag, "with")) {
        n = node(p, RLX_JN_SCOPE, line);
        vec names = {0}, vals = {0};
        while (cur(p)->t != RLX_JT_BLOCK_END) {
            if (names.n)
                expect_op(p, ",");
            vec_push(p->c, &names, (void *)expect_name(p));
            expect_op(p, "=");
            vec_push(p->c, &vals, parse_expr(p, true));
        }
        n->names = (const char **)names.p;
        n->n_names = names.n;
        n->items = (rlx_jnode **)vals.p;
        n->n_items = vals.n;
        expect_block_end(p);
        static const char *const ends[] = {"endwith", NULL};
        vec body = {0};
        const char *which = NULL;
        parse_body(p, &body, ends, &which);
        set_body(n, &body);
        expect_block_end(p);
        return n;
    }
    if (!strcmp(tag, "generation")) {
        /* transformers' AssistantTracker: marks assistant text, renders it as is. */
        n = node(p, RLX_JN_BLOCKLIST, line);
        expect_block_end(p);
        static const char *const ends[] = {"endgeneration", NULL};
        vec body = {0};
        const char *which = NULL;
        parse_body(p, &body, ends, &which);
        set_body(n, &body);
        expect_block_end(p);
        return n;
    }
    if (!strcmp(tag, "break") || !strcmp(tag, "continue")) {
        n = node(p, tag[0] == 'b' ? RLX_JN_BREAK : RLX_JN_CONTINUE, line);
        expect_block_end(p);
        return n;
    }
    static const char *const known[] = {"include",    "import", "from",  "extends",
                                        "block",      "raw",    "print", "do",
                                        "autoescape", "trans",  NULL};
    for (size_t i = 0; known[i]; i++)
        if (!strcmp(tag, known[i]))
            rlx_jinja_fail(p->c, RLX_ERR_UNSUPPORTED, line, "unsupported tag '%s'", tag);
    rlx_jinja_fail(p->c, RLX_ERR_UNSUPPORTED, line, "unknown tag '%s'", tag);
}

/* Statements until a block tag named in `ends` (left at that name; *which
 * is set to it) or the end of the template (only when ends is NULL). */
static void parse_body(parser *p, vec *out, const char *const *ends, const char **which)
{
    enter(p);
    int start_line = cur(p)->line;
    for (;;) {
        const rlx_jtok *t = cur(p);
        switch (t->t) {
        case RLX_JT_EOF:
            if (ends) {
                const char *want = ends[0];
                for (size_t i = 0; ends[i]; i++)
                    if (!strncmp(ends[i], "end", 3))
                        want = ends[i];
                rlx_jinja_fail(p->c, RLX_ERR_FORMAT, t->line,
                               "unexpected end of template: a block opened near line %d needs "
                               "'%s'",
                               start_line, want);
            }
            p->depth--;
            return;
        case RLX_JT_DATA: {
            rlx_jnode *n = node(p, RLX_JN_DATA, t->line);
            n->value = rlx_jv_strn(p->c, t->s, t->len);
            vec_push(p->c, out, n);
            advance(p);
            break;
        }
        case RLX_JT_VAR_BEGIN: {
            advance(p);
            rlx_jnode *n = node(p, RLX_JN_OUTPUT, t->line);
            n->a = parse_tuple(p, true, false);
            if (cur(p)->t != RLX_JT_VAR_END)
                unexpected(p, "end of print statement '}}'");
            advance(p);
            vec_push(p->c, out, n);
            break;
        }
        case RLX_JT_BLOCK_BEGIN: {
            advance(p);
            if (is_end(cur(p), ends)) {
                *which = cur(p)->s;
                advance(p);
                p->depth--;
                return;
            }
            const rlx_jtok *nt = cur(p);
            if (nt->t == RLX_JT_NAME &&
                (!strncmp(nt->s, "end", 3) || !strcmp(nt->s, "else") || !strcmp(nt->s, "elif")))
                rlx_jinja_fail(p->c, RLX_ERR_FORMAT, nt->line, "unexpected '%s'%s", nt->s,
                               ends ? "" : " outside of any block");
            vec_push(p->c, out, parse_statement(p));
            break;
        }
        default:
            unexpected(p, NULL);
        }
    }
}

void rlx_jinja_parse(rlx_jctx *c, const rlx_jtok *toks, size_t n, rlx_jnode ***body, size_t *n_body)
{
    parser p = {.c = c, .t = toks, .n = n};
    vec out = {0};
    parse_body(&p, &out, NULL, NULL);
    *body = (rlx_jnode **)out.p;
    *n_body = out.n;
}
