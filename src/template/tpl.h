/* tpl.h — the chat-template interpreter's internal types: an arena, values with Python's semantics, tokens,
 * the syntax tree, and the entry points of each stage (lexer.c, parser.c, eval.c, filters.c, methods.c,
 * value.c, json.c).
 *
 * The interpreter renders Hugging Face chat templates exactly as Python Jinja2 does in the environment
 * transformers builds (ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks, loopcontrols and the
 * {% generation %} tag, tojson = json.dumps(ensure_ascii=False)). Values therefore follow Python: str() and
 * repr() of numbers, lists and dicts, == between int, float and bool, truthiness, Undefined that prints as ""
 * but fails when used, Markup strings from |safe that escape what is added to them.
 *
 * Memory: everything a render creates (tokens, nodes, values) lives in one arena freed at the end, so values
 * are plain structs that share freely and nothing is reference counted. Limits (arena bytes, output bytes,
 * steps, recursion depth) turn a runaway template into a clear BRAID_E_RANGE instead of a hang. */
#ifndef BRAID_TEMPLATE_TPL_H
#define BRAID_TEMPLATE_TPL_H

#include <stddef.h>
#include <stdint.h>

#include "base/strbuf.h"
#include "braid.h"

/* ---- arena ------------------------------------------------------------------------------------------------ */

typedef struct tpl_chunk tpl_chunk;
typedef struct tpl_arena {
    tpl_chunk *head;
    size_t used, cap;  /* in head */
    size_t total;      /* bytes of all chunks */
    size_t limit;      /* total may not exceed this */
} tpl_arena;

void *tpl_alloc(tpl_arena *a, size_t n); /* 16-aligned, zeroed; NULL when out of memory or over the limit */
char *tpl_strndup(tpl_arena *a, const char *s, size_t n);
void tpl_arena_free(tpl_arena *a);

/* ---- values ----------------------------------------------------------------------------------------------- */

typedef enum tv_kind {
    TV_UNDEF,   /* Jinja's Undefined: prints "", is falsy, fails on attribute access, arithmetic, calls */
    TV_NONE,
    TV_BOOL,
    TV_INT,
    TV_FLOAT,
    TV_STR,
    TV_LIST,    /* list, tuple (TVF_TUPLE), or a one-shot iterator such as a generator (TVF_ITER) */
    TV_DICT,
    TV_NS,      /* namespace(): a mutable attribute bag */
    TV_MACRO,   /* a {% macro %}, or the caller of a {% call %} */
    TV_FUNC,    /* a global function (range, namespace, raise_exception, ...) */
    TV_METHOD,  /* a bound method such as "abc".strip or d.items */
    TV_LOOP,    /* the loop variable of a for */
    TV_CYCLER,
    TV_JOINER,
} tv_kind;

enum {
    TVF_MARKUP = 1,  /* TV_STR: markupsafe.Markup (from |safe): other strings added to it are escaped */
    TVF_TUPLE = 2,   /* TV_LIST: a tuple */
    TVF_ITER = 4,    /* TV_LIST: an iterator (map, select, |items, reversed, ...): no len, no index, one pass */
    TVF_RANGE = 8,   /* TV_LIST: a range object (prints as range(a, b)) */
    TVF_VIEW = 16,   /* TV_LIST: dict.items()/keys()/values() (len and iteration, no index) */
    TVF_UNSAFE = 32, /* TV_UNDEF: the sandbox refused an attribute (calling it raises SecurityError) */
};

typedef struct tlist tlist;
typedef struct tdict tdict;
typedef struct tloop tloop;
typedef struct tpl_node tpl_node;
typedef struct tpl_frame tpl_frame;

typedef struct tv {
    uint8_t k;     /* tv_kind */
    uint8_t f;     /* TVF_* */
    uint16_t id;   /* TV_FUNC / TV_METHOD: which function; TV_LIST views: which view */
    union {
        int64_t i; /* TV_INT, TV_BOOL */
        double d;  /* TV_FLOAT */
        struct { const char *p; size_t n; } s; /* TV_STR (UTF-8, not NUL-terminated); TV_UNDEF: the name */
        tlist *l;
        tdict *m;  /* TV_DICT, TV_NS, TV_CYCLER/TV_JOINER state */
        struct tv *self; /* TV_METHOD: the receiver */
        struct tpl_macro *mac;
        tloop *loop;
    } u;
} tv;

struct tlist { tv *v; size_t n, cap; int consumed; /* TVF_ITER: iterated once already */ };
struct tdict { tv *k, *v; size_t n, cap; };

typedef struct tpl_macro {
    const tpl_node *def;    /* N_MACRO or N_CALLBLOCK */
    tpl_frame *closure;     /* frame the macro was defined in */
} tpl_macro;

struct tloop {
    tv items;       /* TV_LIST being iterated */
    size_t index0, length;
    int depth;      /* 1 for the outer loop, +1 per recursive loop(...) call */
    tv last_changed; int have_changed; /* loop.changed() */
    const tpl_node *node; /* the N_FOR (recursive loops call it again) */
    tpl_frame *frame;     /* the frame the loop runs in */
};

/* ---- the render environment ------------------------------------------------------------------------------- */

typedef struct tpl_env {
    tpl_arena *a;
    bd_strbuf *out;        /* where output goes now (swapped for {% set %} blocks, macro calls, filters) */
    size_t out_limit;
    uint64_t steps, step_limit;
    int depth, depth_limit;
    int brk;               /* 1: break, 2: continue pending */
    int64_t now;           /* strftime_now's time (seconds since the epoch, local time) */
    const char *src;       /* the template source (for line:col) */
    tpl_frame *globals;
} tpl_env;

/* Records "template:LINE:COL: message" for node n (n may be NULL) and returns s. */
braid_status tpl_fail(const tpl_node *n, braid_status s, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ---- value helpers (value.c) ------------------------------------------------------------------------------ */

static inline tv tv_undef(void) { tv v = {0}; v.k = TV_UNDEF; return v; }
static inline tv tv_none(void) { tv v = {0}; v.k = TV_NONE; return v; }
static inline tv tv_bool(int b) { tv v = {0}; v.k = TV_BOOL; v.u.i = b != 0; return v; }
static inline tv tv_int(int64_t i) { tv v = {0}; v.k = TV_INT; v.u.i = i; return v; }
static inline tv tv_float(double d) { tv v = {0}; v.k = TV_FLOAT; v.u.d = d; return v; }
static inline tv tv_strn(const char *p, size_t n) { tv v = {0}; v.k = TV_STR; v.u.s.p = p; v.u.s.n = n; return v; }
tv tv_cstr(const char *s); /* a static string */
tv tv_undef_named(const char *p, size_t n);

braid_status tv_new_list(tpl_arena *a, size_t cap, tv *out);
braid_status tv_new_dict(tpl_arena *a, size_t cap, tv *out);
braid_status tv_list_push(tpl_arena *a, tlist *l, tv x);
/* The tuple (k, v), as dict.items() yields it. */
braid_status tv_pair(tpl_arena *a, tv k, tv v, tv *out);
/* Inserts or replaces key k (Python dict semantics: 1, 1.0 and True are one key). */
braid_status tv_dict_set(tpl_arena *a, tdict *d, tv k, tv x);
tv *tv_dict_get(const tdict *d, tv k);            /* NULL if absent */
tv *tv_dict_gets(const tdict *d, const char *key, size_t n);
int tv_is_hashable(tv v);

int tv_truthy(tv v);
int tv_eq(tv a, tv b);
/* Python's a < b (and friends through it): *lt = a < b; BRAID_E_INVALID (with a message) if unorderable. */
braid_status tv_lt(const tpl_node *at, tv a, tv b, int *lt);
const char *tv_type_name(tv v); /* Python's type name: "str", "int", "list", "dict", "NoneType", ... */
int tv_is_number(tv v);         /* int, float or bool */
double tv_num(tv v);

/* str(v) and repr(v) appended to b. */
braid_status tv_str(tpl_env *e, const tpl_node *at, bd_strbuf *b, tv v);
braid_status tv_repr(tpl_env *e, const tpl_node *at, bd_strbuf *b, tv v);
/* str(v) as a value (strings returned as they are). */
braid_status tv_to_str(tpl_env *e, const tpl_node *at, tv v, tv *out);
/* Python's repr of a float ("1.0", "1e-05", "inf", "nan"). */
void tv_float_repr(double d, char *buf, size_t cap);
/* A string value that owns a copy of b's bytes (in the arena). */
braid_status tv_from_buf(tpl_env *e, bd_strbuf *b, tv *out);
/* Iterates v as Python's iter() does into a list (strings by code point, dicts by key); marks one-shot
 * iterators consumed. BRAID_E_INVALID if v is not iterable. */
braid_status tv_iterate(tpl_env *e, const tpl_node *at, tv v, tv *out_list);
/* len(v); BRAID_E_INVALID if v has none. */
braid_status tv_len(const tpl_node *at, tv v, int64_t *n);
/* markupsafe.escape(str(v)) appended to b. */
braid_status tv_escape(tpl_env *e, const tpl_node *at, bd_strbuf *b, tv v);

/* ---- UTF-8 and Python's str helpers (value.c) --------------------------------------------------------------- */

size_t tpl_utf8_count(const char *p, size_t n);                /* code points */
size_t tpl_utf8_offset(const char *p, size_t n, int64_t cp);   /* byte offset of code point cp (clamped) */
uint32_t tpl_utf8_next(const char *p, size_t n, size_t *i);    /* decodes one code point at p[*i] */
int tpl_py_isspace(uint32_t cp);                               /* str.isspace() of one code point */
uint32_t tpl_py_lower(uint32_t cp);
uint32_t tpl_py_upper(uint32_t cp);
int tpl_is_alpha(uint32_t cp);
int tpl_is_digit(uint32_t cp);

/* ---- JSON (json.c) ----------------------------------------------------------------------------------------- */

/* Strict JSON (RFC 8259, valid UTF-8, no duplicate-key surprises: the last one wins as in Python) into values. */
braid_status tpl_json_parse(tpl_arena *a, const char *what, const char *p, size_t n, tv *out);
typedef struct tpl_json_opts {
    int indent;         /* < 0: none */
    const char *indent_str; size_t indent_len; /* when indent is given as a string */
    const char *item_sep, *key_sep;             /* NULL: Python's defaults for the indent */
    int sort_keys;
    int ensure_ascii;
} tpl_json_opts;
/* json.dumps(v, ...) appended to b. BRAID_E_INVALID for values JSON cannot hold (Undefined, macros...). */
braid_status tpl_json_dump(tpl_env *e, const tpl_node *at, bd_strbuf *b, tv v, const tpl_json_opts *o);

/* ---- tokens and syntax tree -------------------------------------------------------------------------------- */

typedef enum tpl_tok_type {
    TK_EOF, TK_DATA, TK_VAR_BEGIN, TK_VAR_END, TK_BLOCK_BEGIN, TK_BLOCK_END,
    TK_NAME, TK_STRING, TK_INT, TK_FLOAT, TK_OP,
} tpl_tok_type;

typedef enum tpl_op {
    OP_NONE, OP_ADD, OP_SUB, OP_DIV, OP_FLOORDIV, OP_MUL, OP_MOD, OP_POW, OP_TILDE, OP_LBRACKET, OP_RBRACKET,
    OP_LPAREN, OP_RPAREN, OP_LBRACE, OP_RBRACE, OP_EQ, OP_NE, OP_GT, OP_GTEQ, OP_LT, OP_LTEQ, OP_ASSIGN,
    OP_DOT, OP_COLON, OP_PIPE, OP_COMMA, OP_SEMICOLON,
    /* not tokens: node operators */
    OP_IN, OP_NOTIN, OP_AND, OP_OR, OP_NOT, OP_NEG, OP_POS,
} tpl_op;

typedef struct tpl_tok {
    uint8_t type, op;
    uint32_t line, col;
    const char *p; size_t n; /* TK_DATA, TK_NAME: the text; TK_STRING: the decoded value */
    int64_t ival; double fval;
} tpl_tok;

/* Splits the source into tokens (Jinja2's lexer with trim_blocks and lstrip_blocks). */
braid_status tpl_lex(tpl_arena *a, const char *src, size_t n, tpl_tok **toks, size_t *ntok);

typedef enum tpl_node_type {
    /* statements */
    N_OUTPUT_DATA, N_OUTPUT_EXPR, N_IF, N_FOR, N_SET, N_SET_BLOCK, N_MACRO, N_CALLBLOCK, N_FILTERBLOCK,
    N_GENERATION, N_BREAK, N_CONTINUE, N_WITH,
    /* expressions */
    N_CONST, N_NAME, N_NSREF, N_TUPLE, N_LIST, N_DICT, N_GETATTR, N_GETITEM, N_SLICE, N_CALL, N_FILTER, N_TEST,
    N_BINOP, N_UNARY, N_COMPARE, N_CONCAT, N_CONDEXPR,
} tpl_node_type;

typedef struct tpl_nodes { tpl_node **v; size_t n, cap; } tpl_nodes;

typedef struct tpl_kwarg { const char *name; size_t len; tpl_node *value; } tpl_kwarg;

struct tpl_node {
    uint8_t type;
    uint8_t op;          /* N_BINOP, N_UNARY: tpl_op */
    uint8_t flag;        /* N_FOR: recursive; N_TEST: negated; N_FILTER/N_TEST: unknown name allowed (soft) */
    uint32_t line, col;
    const char *name; size_t name_len; /* N_NAME, N_GETATTR attr, N_FILTER/N_TEST name, N_MACRO name, N_NSREF ns */
    const char *attr; size_t attr_len; /* N_NSREF attribute */
    tv value;            /* N_CONST, N_OUTPUT_DATA (TV_STR) */
    tpl_node *a, *b, *c; /* operands: N_GETATTR a; N_GETITEM a[b]; N_SLICE a:b:c; N_CONDEXPR b if a else c;
                            N_FOR target a, iter b, filter c; N_SET target a value b; N_IF test a;
                            N_CALL callee a; N_FILTER/N_TEST operand a (NULL in a filter block) */
    tpl_nodes items;     /* N_TUPLE/N_LIST elements; N_DICT keys, values alternating; N_CALL/N_FILTER/N_TEST
                            positional args; N_COMPARE operands; N_CONCAT parts; N_MACRO parameter names */
    tpl_nodes body, else_; /* statement bodies; N_IF: elif chain lives in else_ as a nested N_IF */
    tpl_nodes defaults;  /* N_MACRO/N_CALLBLOCK parameter defaults (aligned to the last params) */
    uint8_t *cmp_ops;    /* N_COMPARE: op before items[i+1] */
    tpl_kwarg *kw; size_t nkw;
    tpl_node *dyn_args, *dyn_kwargs;
    tpl_node *filter;    /* N_SET_BLOCK / N_FILTERBLOCK: the filter chain (N_FILTER with a == NULL at the root) */
};

typedef struct tpl_template {
    tpl_nodes body;
    const char *src;
} tpl_template;

/* Parses the token stream into a template; errors are BRAID_E_FORMAT with line:col. */
braid_status tpl_parse(tpl_arena *a, const char *src, const tpl_tok *toks, size_t ntok, tpl_template *out);

/* ---- evaluation (eval.c) ----------------------------------------------------------------------------------- */

struct tpl_frame {
    tpl_frame *parent;
    tdict vars;
};

braid_status tpl_frame_new(tpl_env *e, tpl_frame *parent, tpl_frame **out);
braid_status tpl_frame_set(tpl_env *e, tpl_frame *f, const char *name, size_t n, tv v);
braid_status tpl_render(tpl_env *e, const tpl_template *t);
braid_status tpl_eval(tpl_env *e, const tpl_node *n, tpl_frame *f, tv *out);
/* Calls a callable value with evaluated arguments. */
braid_status tpl_call_value(tpl_env *e, const tpl_node *at, tv fn, tv *args, size_t nargs, const char **kwn,
                            const size_t *kwl, tv *kwv, size_t nkw, tv *out);
braid_status tpl_step(tpl_env *e, const tpl_node *at);
/* Writes str(v) to the current output. */
braid_status exec_stmt_output(tpl_env *e, const tpl_node *n, tv v);

/* ---- filters, tests, methods, globals (filters.c, methods.c) ------------------------------------------------ */

typedef struct tpl_args {
    tv *pos; size_t npos;
    const char **kwn; const size_t *kwl; tv *kwv; size_t nkw;
} tpl_args;

int tpl_filter_exists(const char *name, size_t n);
int tpl_test_exists(const char *name, size_t n);
braid_status tpl_apply_filter(tpl_env *e, const tpl_node *at, const char *name, size_t n, tv x, tpl_args *a,
                              tpl_frame *f, tv *out);
braid_status tpl_apply_test(tpl_env *e, const tpl_node *at, const char *name, size_t n, tv x, tpl_args *a,
                            int *out);
/* x.name as Jinja's sandboxed getattr does (a method, a dict's key, ...); Undefined when absent. */
braid_status tpl_getattr(tpl_env *e, const tpl_node *at, tv x, const char *name, size_t n, tv *out);
/* x[key] as Jinja's getitem does (falls back to the attribute for string keys). */
braid_status tpl_getitem(tpl_env *e, const tpl_node *at, tv x, tv key, tv *out);
braid_status tpl_call_method(tpl_env *e, const tpl_node *at, tv self, int id, tpl_args *a, tv *out);
braid_status tpl_call_func(tpl_env *e, const tpl_node *at, int id, tpl_args *a, tv *out);
/* str.format (the sandbox's formatter has the same output). */
braid_status tpl_strip(tpl_env *e, tv s, tv *chars, int left, int right, tv *out);
braid_status tpl_splitlines(tpl_env *e, tv s, int keepends, tv *out);
braid_status tpl_str_format(tpl_env *e, const tpl_node *at, tv fmt, tpl_args *a, tv *out);
/* Looks up a global function by name (range, namespace, ...); 0 if none. */
int tpl_global_func(const char *name, size_t n);

/* Method ids (TV_METHOD.id); ids >= M_UNSAFE are attributes the immutable sandbox refuses or braid lacks. */
enum tpl_method_id {
    M_S_STRIP = 1, M_S_LSTRIP, M_S_RSTRIP, M_S_SPLIT, M_S_RSPLIT, M_S_SPLITLINES, M_S_STARTSWITH, M_S_ENDSWITH,
    M_S_REPLACE, M_S_UPPER, M_S_LOWER, M_S_TITLE, M_S_CAPITALIZE, M_S_FIND, M_S_RFIND, M_S_INDEX, M_S_RINDEX,
    M_S_COUNT, M_S_JOIN, M_S_FORMAT, M_S_ISDIGIT, M_S_ISALPHA, M_S_ISALNUM, M_S_ISSPACE, M_S_ISUPPER,
    M_S_ISLOWER, M_S_ZFILL, M_S_CENTER, M_S_LJUST, M_S_RJUST, M_S_PARTITION, M_S_RPARTITION, M_S_CASEFOLD,
    M_S_SWAPCASE, M_S_REMOVEPREFIX, M_S_REMOVESUFFIX, M_S_ISNUMERIC, M_S_ISDECIMAL, M_S_ISTITLE,
    M_D_GET = 100, M_D_ITEMS, M_D_KEYS, M_D_VALUES, M_D_COPY,
    M_L_INDEX = 200, M_L_COUNT, M_L_COPY,
    M_LOOP_CYCLE = 300, M_LOOP_CHANGED,
    M_CYC_NEXT = 400, M_CYC_RESET,
    M_UNSAFE = 1000,
};

/* A named argument (or the positional one at index pos) of a filter/method call; NULL when not given. */
tv *tpl_arg(tpl_args *a, size_t pos, const char *name);

#endif
