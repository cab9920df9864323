/* Internals of the Jinja-subset interpreter shared by its lexer, parser,
 * evaluator and builtins. Not installed; nothing outside engine/template/
 * (and its tests) includes this.
 *
 * Memory: every token, AST node and runtime value lives in an arena. The
 * template owns the parse arena; each render owns a fresh arena that is freed
 * as a whole when the render ends, so values are plain structs with no
 * reference counts. Errors unwind with longjmp to the entry point
 * (rlx_jinja_template_create / _render), which is safe because nothing
 * between holds a resource outside the arena.
 */
#ifndef RLX_ENGINE_TEMPLATE_JINJA_INTERNAL_H
#define RLX_ENGINE_TEMPLATE_JINJA_INTERNAL_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/base/status.h"
#include "engine/template/jinja.h"

#if defined(__GNUC__)
#define RLX_JNORETURN __attribute__((noreturn))
#else
#define RLX_JNORETURN
#endif

/* ---- failure and arena ---------------------------------------------------------------------- */

typedef struct rlx_jarena_chunk rlx_jarena_chunk;

typedef struct rlx_jctx {
    jmp_buf jmp;
    rlx_jarena_chunk *chunks;
    size_t used;  /* bytes handed out, all chunks */
    size_t limit; /* 0: unlimited */
    rlx_status code;
    char msg[1024];
} rlx_jctx;

/* Record an error ("chat template line N: ...", or without the line when
 * line <= 0) and unwind to the entry point. */
RLX_JNORETURN void rlx_jinja_fail(rlx_jctx *c, rlx_status code, int line, const char *fmt, ...)
    RLX_PRINTF(4, 5);
void *rlx_jinja_alloc(rlx_jctx *c, size_t size);
char *rlx_jinja_strndup(rlx_jctx *c, const char *s, size_t n);
void rlx_jinja_arena_free(rlx_jctx *c);

/* ---- values --------------------------------------------------------------------------------- */

typedef enum rlx_jv_type {
    RLX_JV_UNDEF,
    RLX_JV_NONE,
    RLX_JV_BOOL,
    RLX_JV_INT,
    RLX_JV_FLOAT,
    RLX_JV_STR,
    RLX_JV_LIST, /* also tuples (list->tuple) */
    RLX_JV_DICT,
    RLX_JV_NS, /* namespace(): a dict whose attributes `set` may assign */
    RLX_JV_FUNC,
    RLX_JV_LOOP, /* the `loop` of a for loop; one object advanced in place, as in jinja2 */
} rlx_jv_type;

typedef struct rlx_jstr {
    size_t len;
    char s[]; /* NUL-terminated UTF-8 */
} rlx_jstr;

typedef struct rlx_jlist rlx_jlist;
typedef struct rlx_jdict rlx_jdict;
typedef struct rlx_jfunc rlx_jfunc;
typedef struct rlx_jloop rlx_jloop;

typedef struct rlx_jv {
    rlx_jv_type t;
    union {
        bool b;
        int64_t i;
        double f;
        const rlx_jstr *s;
        rlx_jlist *l;
        rlx_jdict *d;
        const rlx_jfunc *fn;
        rlx_jloop *loop;
        const char *undef; /* why it is undefined, e.g. "'x' is undefined" (may be NULL) */
    } u;
} rlx_jv;

struct rlx_jlist {
    size_t n, cap;
    rlx_jv *v;
    bool tuple;
};

struct rlx_jdict {
    size_t n, cap;
    rlx_jv *k;
    rlx_jv *v;
};

struct rlx_jloop {
    size_t index0, length;
    const rlx_jlist *items;
};

typedef struct rlx_jrender rlx_jrender;

typedef struct rlx_jargs {
    size_t npos;
    const rlx_jv *pos;
    size_t nkw;
    const char *const *kwn;
    const rlx_jv *kw;
} rlx_jargs;

typedef rlx_jv (*rlx_jfilter_fn)(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a);
typedef bool (*rlx_jtest_fn)(rlx_jrender *r, int line, rlx_jv v, const rlx_jargs *a);

typedef struct rlx_jnode rlx_jnode;
typedef struct rlx_jscope rlx_jscope;

typedef enum rlx_jfunc_kind {
    RLX_JF_BUILTIN, /* fn(self, args): globals and bound methods */
    RLX_JF_MACRO,
    RLX_JF_CALLER, /* the body of a {% call %} block, as `caller` inside the macro */
} rlx_jfunc_kind;

struct rlx_jfunc {
    rlx_jfunc_kind kind;
    const char *name;
    rlx_jfilter_fn fn;
    rlx_jv self;
    const rlx_jnode *node;
    rlx_jscope *scope;
};

extern const rlx_jv rlx_jv_none;
extern const rlx_jv rlx_jv_undef;
rlx_jv rlx_jv_bool(bool b);
rlx_jv rlx_jv_int(int64_t i);
rlx_jv rlx_jv_float(double f);
rlx_jv rlx_jv_undef_msg(rlx_jctx *c, const char *fmt, ...) RLX_PRINTF(2, 3);
rlx_jv rlx_jv_strn(rlx_jctx *c, const char *s, size_t n);
rlx_jv rlx_jv_cstr(rlx_jctx *c, const char *s);
rlx_jv rlx_jv_list(rlx_jctx *c, size_t cap);
rlx_jv rlx_jv_dict(rlx_jctx *c, size_t cap);
void rlx_jlist_push(rlx_jctx *c, rlx_jlist *l, rlx_jv v);
/* Insert or replace. */
void rlx_jdict_set(rlx_jctx *c, rlx_jdict *d, rlx_jv k, rlx_jv v);
/* NULL when absent. */
rlx_jv *rlx_jdict_get(rlx_jdict *d, rlx_jv k);
rlx_jv *rlx_jdict_gets(rlx_jdict *d, const char *key);

/* A growable output buffer in the arena; `limit` (0: none) fails the render. */
typedef struct rlx_jbuf {
    char *p;
    size_t n, cap;
} rlx_jbuf;
void rlx_jbuf_put(rlx_jrender *r, rlx_jbuf *b, const char *s, size_t n);
void rlx_jbuf_puts(rlx_jrender *r, rlx_jbuf *b, const char *s);
rlx_jv rlx_jbuf_value(rlx_jrender *r, rlx_jbuf *b);

/* Python's str() / repr() of a value, appended to b. */
void rlx_jv_write_str(rlx_jrender *r, rlx_jbuf *b, rlx_jv v);
void rlx_jv_write_repr(rlx_jrender *r, rlx_jbuf *b, rlx_jv v);
rlx_jv rlx_jv_to_str(rlx_jrender *r, rlx_jv v);
/* "str object", "dict object", "None", ... as jinja2 names types in messages. */
const char *rlx_jv_type_desc(rlx_jv v);
/* Python's name of the value's type: "str", "int", "NoneType", ... */
const char *rlx_jv_py_type(rlx_jv v);
/* Python's truthiness. */
bool rlx_jv_truthy(rlx_jv v);
bool rlx_jv_equal(rlx_jv a, rlx_jv b);
/* -1/0/1, or fails with a TypeError-like message naming `op`. */
int rlx_jv_compare(rlx_jrender *r, int line, rlx_jv a, rlx_jv b, const char *op);
/* repr(float) exactly as Python prints it. */
void rlx_jinja_format_float(double f, char *out, size_t size);
/* Number of code points in UTF-8. */
size_t rlx_jinja_utf8_len(const char *s, size_t n);
/* Iterable → list (strings to code points, dicts to keys, undefined to empty). */
rlx_jlist *rlx_jv_iterate(rlx_jrender *r, int line, rlx_jv v);
/* Python's json.dumps(v, ensure_ascii, indent, separators, sort_keys). indent < 0: none. */
void rlx_jv_write_json(rlx_jrender *r, int line, rlx_jbuf *b, rlx_jv v, bool ensure_ascii,
                       int indent, const char *item_sep, const char *key_sep, bool sort_keys);

/* ---- lexer ---------------------------------------------------------------------------------- */

typedef enum rlx_jtok_type {
    RLX_JT_EOF,
    RLX_JT_DATA,
    RLX_JT_VAR_BEGIN,
    RLX_JT_VAR_END,
    RLX_JT_BLOCK_BEGIN,
    RLX_JT_BLOCK_END,
    RLX_JT_NAME,
    RLX_JT_STRING,
    RLX_JT_INT,
    RLX_JT_FLOAT,
    RLX_JT_OP,
} rlx_jtok_type;

typedef struct rlx_jtok {
    rlx_jtok_type t;
    int line;
    const char *s; /* data, name, decoded string or operator text */
    size_t len;
    int64_t i;
    double f;
} rlx_jtok;

/* Tokenize with jinja2's trim_blocks + lstrip_blocks rules (as HF configures
 * it) and without keeping a trailing newline. */
void rlx_jinja_lex(rlx_jctx *c, const char *src, size_t len, rlx_jtok **out, size_t *n_out);

/* ---- AST ------------------------------------------------------------------------------------ */

typedef enum rlx_jnode_kind {
    /* expressions */
    RLX_JN_CONST,
    RLX_JN_NAME,
    RLX_JN_LIST,
    RLX_JN_TUPLE,
    RLX_JN_DICT, /* items: key, value, key, value ... */
    RLX_JN_GETATTR,
    RLX_JN_GETITEM,
    RLX_JN_SLICE, /* a[b:c:d], each bound may be NULL */
    RLX_JN_CALL,
    RLX_JN_FILTER, /* a may be NULL inside {% filter %} */
    RLX_JN_TEST,   /* op: 1 when negated */
    RLX_JN_NEG,
    RLX_JN_POS,
    RLX_JN_NOT,
    RLX_JN_BINOP, /* op: '+', '-', '*', '/', 'f' (//), '%', 'p' (**), '~' */
    RLX_JN_AND,
    RLX_JN_OR,
    RLX_JN_COMPARE, /* a, then items[i] with ops[i] */
    RLX_JN_COND,    /* a if b else c */
    /* statements */
    RLX_JN_DATA,
    RLX_JN_OUTPUT,
    RLX_JN_IF,
    RLX_JN_FOR,
    RLX_JN_SET,       /* names (targets) or a.name (namespace attr, op=1) = b */
    RLX_JN_SET_BLOCK, /* names[0] = body, through filter chain b (may be NULL) */
    RLX_JN_MACRO,
    RLX_JN_CALL_BLOCK,
    RLX_JN_FILTER_BLOCK,
    RLX_JN_BREAK,
    RLX_JN_CONTINUE,
    RLX_JN_SCOPE, /* {% with %}: names = items; body */
    RLX_JN_BLOCKLIST,
} rlx_jnode_kind;

typedef enum rlx_jcmp {
    RLX_JC_EQ,
    RLX_JC_NE,
    RLX_JC_LT,
    RLX_JC_LE,
    RLX_JC_GT,
    RLX_JC_GE,
    RLX_JC_IN,
    RLX_JC_NOTIN,
} rlx_jcmp;

struct rlx_jnode {
    rlx_jnode_kind kind;
    int line;
    int op;
    const char *name;
    rlx_jnode *a, *b, *c, *d;
    rlx_jnode **items; /* positional args, list items, defaults, compare operands */
    size_t n_items;
    const char **names; /* targets, parameters */
    size_t n_names;
    const char **kwnames; /* keyword arguments */
    rlx_jnode **kw;
    size_t n_kw;
    rlx_jnode **body;
    size_t n_body;
    rlx_jnode **else_body;
    size_t n_else;
    int *ops;
    rlx_jfilter_fn filter;
    rlx_jtest_fn test;
    rlx_jv value;
};

/* Parse tokens into a statement list. */
void rlx_jinja_parse(rlx_jctx *c, const rlx_jtok *toks, size_t n, rlx_jnode ***body,
                     size_t *n_body);

/* ---- builtins ------------------------------------------------------------------------------- */

rlx_jfilter_fn rlx_jinja_find_filter(const char *name);
rlx_jtest_fn rlx_jinja_find_test(const char *name);
/* The global callables: range, namespace, dict, raise_exception, strftime_now. */
bool rlx_jinja_find_global(const char *name, rlx_jfilter_fn *fn);
/* `obj.name` where obj is a str, dict or list and name a method; false when none. */
bool rlx_jinja_find_method(rlx_jv obj, const char *name, rlx_jfilter_fn *fn, bool *unsafe);
/* Python's `fmt % args` (a tuple, a mapping or one value). */
rlx_jv rlx_jinja_percent_format(rlx_jrender *r, int line, rlx_jv fmt, rlx_jv args);
/* Positional index `i` or keyword `name`, else `dflt`. */
rlx_jv rlx_jinja_arg(const rlx_jargs *a, size_t i, const char *name, rlx_jv dflt);

/* ---- evaluator ------------------------------------------------------------------------------ */

struct rlx_jscope {
    rlx_jscope *parent;
    bool captured; /* a macro or caller refers to it: a loop may not reuse it */
    size_t n, cap;
    const char **k;
    rlx_jv *v;
};

struct rlx_jrender {
    rlx_jctx *c;
    rlx_jinja_render_opts opts;
    rlx_jscope *globals;
    rlx_jbuf *out;
    int depth;
    uint64_t iterations;
};

RLX_JNORETURN void rlx_jinja_rfail(rlx_jrender *r, rlx_status code, int line, const char *fmt, ...)
    RLX_PRINTF(4, 5);
/* Call any callable value (macro, caller, builtin). */
rlx_jv rlx_jinja_call(rlx_jrender *r, int line, rlx_jv fn, const rlx_jargs *a);
/* Attribute access as jinja2's sandbox does it (`obj.name`). */
rlx_jv rlx_jinja_getattr(rlx_jrender *r, int line, rlx_jv obj, const char *name);
/* Count one loop iteration against the limit. */
void rlx_jinja_count_iteration(rlx_jrender *r, int line);

#endif
