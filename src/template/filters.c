/* filters.c — Jinja2's built-in filters and tests (filters.py, tests.py) as chat templates use them, plus the
 * tojson Hugging Face installs (json.dumps with ensure_ascii=False). Every Jinja2 filter and test name is
 * known (so a template compiles exactly when Jinja2 compiles it); the few no chat template needs (urlize,
 * pprint, random, ...) fail with a clear message when they are actually called.
 *
 * map/select/reject/selectattr/rejectattr/unique/items/reverse return one-shot iterators as Jinja2's
 * generators do: they have no length and no index, print as an error, and are always true. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "template/tpl.h"

static braid_status oom(void) { return bd_error(BRAID_E_NOMEM, "template: out of memory"); }

tv *tpl_arg(tpl_args *a, size_t pos, const char *name) {
    size_t len = strlen(name);
    for (size_t i = 0; i < a->nkw; i++)
        if (a->kwl[i] == len && memcmp(a->kwn[i], name, len) == 0) return &a->kwv[i];
    if (pos != (size_t)-1 && pos < a->npos) return &a->pos[pos];
    return NULL;
}

/* Rejects keyword arguments other than the listed ones and more than max_pos positional ones. */
static braid_status check_args(const tpl_node *at, const char *fname, tpl_args *a, size_t max_pos,
                               const char *const *names) {
    if (a->npos > max_pos)
        return tpl_fail(at, BRAID_E_INVALID, "TypeError: %s() takes at most %zu argument(s) (%zu given)", fname,
                        max_pos, a->npos);
    for (size_t i = 0; i < a->nkw; i++) {
        int ok = 0;
        for (size_t k = 0; names && names[k]; k++)
            if (strlen(names[k]) == a->kwl[i] && memcmp(names[k], a->kwn[i], a->kwl[i]) == 0) ok = 1;
        if (!ok)
            return tpl_fail(at, BRAID_E_INVALID, "TypeError: %s() got an unexpected keyword argument '%.*s'", fname,
                            (int)a->kwl[i], a->kwn[i]);
    }
    return BRAID_OK;
}

static braid_status new_iter(tpl_env *e, tv *out) {
    BD_TRY(tv_new_list(e->a, 0, out));
    out->f = TVF_ITER;
    return BRAID_OK;
}

static braid_status undefined_error(const tpl_node *at, tv v) {
    if (v.u.s.p) return tpl_fail(at, BRAID_E_INVALID, "UndefinedError: '%.*s' is undefined", (int)v.u.s.n, v.u.s.p);
    return tpl_fail(at, BRAID_E_INVALID, "UndefinedError: a value is undefined");
}

/* ---- attribute access ------------------------------------------------------------------------------------- */

/* Method tables: name -> id; ids >= 1000 are methods the immutable sandbox refuses. */
typedef struct mname { const char *name; int id; } mname;
static const mname STR_METHODS[] = {
    {"strip", M_S_STRIP}, {"lstrip", M_S_LSTRIP}, {"rstrip", M_S_RSTRIP}, {"split", M_S_SPLIT},
    {"rsplit", M_S_RSPLIT}, {"splitlines", M_S_SPLITLINES}, {"startswith", M_S_STARTSWITH},
    {"endswith", M_S_ENDSWITH}, {"replace", M_S_REPLACE}, {"upper", M_S_UPPER}, {"lower", M_S_LOWER},
    {"title", M_S_TITLE}, {"capitalize", M_S_CAPITALIZE}, {"find", M_S_FIND}, {"rfind", M_S_RFIND},
    {"index", M_S_INDEX}, {"rindex", M_S_RINDEX}, {"count", M_S_COUNT}, {"join", M_S_JOIN},
    {"format", M_S_FORMAT}, {"isdigit", M_S_ISDIGIT}, {"isalpha", M_S_ISALPHA}, {"isalnum", M_S_ISALNUM},
    {"isspace", M_S_ISSPACE}, {"isupper", M_S_ISUPPER}, {"islower", M_S_ISLOWER}, {"zfill", M_S_ZFILL},
    {"center", M_S_CENTER}, {"ljust", M_S_LJUST}, {"rjust", M_S_RJUST}, {"partition", M_S_PARTITION},
    {"rpartition", M_S_RPARTITION}, {"casefold", M_S_CASEFOLD}, {"swapcase", M_S_SWAPCASE},
    {"removeprefix", M_S_REMOVEPREFIX}, {"removesuffix", M_S_REMOVESUFFIX}, {"isnumeric", M_S_ISNUMERIC},
    {"isdecimal", M_S_ISDECIMAL}, {"istitle", M_S_ISTITLE},
    {"encode", M_UNSAFE + 1}, {"format_map", M_UNSAFE + 2}, {"translate", M_UNSAFE + 3}, {"expandtabs", M_UNSAFE + 4},
    {NULL, 0}};
static const mname DICT_METHODS[] = {
    {"get", M_D_GET}, {"items", M_D_ITEMS}, {"keys", M_D_KEYS}, {"values", M_D_VALUES}, {"copy", M_D_COPY},
    {"pop", M_UNSAFE}, {"popitem", M_UNSAFE}, {"setdefault", M_UNSAFE}, {"update", M_UNSAFE}, {"clear", M_UNSAFE},
    {"fromkeys", M_UNSAFE + 5},
    {NULL, 0}};
static const mname LIST_METHODS[] = {
    {"index", M_L_INDEX}, {"count", M_L_COUNT}, {"copy", M_L_COPY},
    {"append", M_UNSAFE}, {"extend", M_UNSAFE}, {"insert", M_UNSAFE}, {"pop", M_UNSAFE}, {"remove", M_UNSAFE},
    {"reverse", M_UNSAFE}, {"sort", M_UNSAFE}, {"clear", M_UNSAFE},
    {NULL, 0}};
static const mname TUPLE_METHODS[] = {{"index", M_L_INDEX}, {"count", M_L_COUNT}, {NULL, 0}};

static int find_method(const mname *t, const char *name, size_t n) {
    for (size_t i = 0; t[i].name; i++)
        if (strlen(t[i].name) == n && memcmp(t[i].name, name, n) == 0) return t[i].id;
    return 0;
}

static braid_status make_method(tpl_env *e, tv self, int id, const char *name, size_t n, tv *out) {
    if (id >= M_UNSAFE) {
        if (id == M_UNSAFE) { /* a method that changes a list or dict: the immutable sandbox refuses it */
            *out = tv_undef_named(name, n);
            out->f = TVF_UNSAFE;
            return BRAID_OK;
        }
        return tpl_fail(NULL, BRAID_E_UNSUPPORTED, "the method '%.*s' is not supported", (int)n, name);
    }
    tv *box = tpl_alloc(e->a, sizeof *box);
    if (!box) return oom();
    *box = self;
    *out = (tv){.k = TV_METHOD, .id = (uint16_t)id};
    out->u.self = box;
    return BRAID_OK;
}

static braid_status loop_attr(tpl_env *e, const tpl_node *at, tv x, const char *name, size_t n, tv *out) {
    tloop *l = x.u.loop;
#define IS(s) (n == sizeof(s) - 1 && memcmp(name, s, n) == 0)
    if (IS("index")) *out = tv_int((int64_t)l->index0 + 1);
    else if (IS("index0")) *out = tv_int((int64_t)l->index0);
    else if (IS("revindex")) *out = tv_int((int64_t)(l->length - l->index0));
    else if (IS("revindex0")) *out = tv_int((int64_t)(l->length - l->index0 - 1));
    else if (IS("first")) *out = tv_bool(l->index0 == 0);
    else if (IS("last")) *out = tv_bool(l->index0 + 1 == l->length);
    else if (IS("length")) *out = tv_int((int64_t)l->length);
    else if (IS("depth")) *out = tv_int(l->depth);
    else if (IS("depth0")) *out = tv_int(l->depth - 1);
    else if (IS("previtem")) *out = l->index0 > 0 ? l->items.u.l->v[l->index0 - 1] : tv_undef_named("previtem", 8);
    else if (IS("nextitem"))
        *out = l->index0 + 1 < l->length ? l->items.u.l->v[l->index0 + 1] : tv_undef_named("nextitem", 8);
    else if (IS("cycle")) return make_method(e, x, M_LOOP_CYCLE, name, n, out);
    else if (IS("changed")) return make_method(e, x, M_LOOP_CHANGED, name, n, out);
    else *out = tv_undef_named(name, n);
    (void)at;
    return BRAID_OK;
#undef IS
}

braid_status tpl_getattr(tpl_env *e, const tpl_node *at, tv x, const char *name, size_t n, tv *out) {
    int id;
    switch (x.k) {
    case TV_UNDEF:
        if (x.u.s.p)
            return tpl_fail(at, BRAID_E_INVALID, "UndefinedError: '%.*s' is undefined (reading its attribute '%.*s')",
                            (int)x.u.s.n, x.u.s.p, (int)n, name);
        return tpl_fail(at, BRAID_E_INVALID, "UndefinedError: reading attribute '%.*s' of an undefined value", (int)n, name);
    case TV_DICT:
        if ((id = find_method(DICT_METHODS, name, n))) return make_method(e, x, id, name, n, out);
        {
            tv *v = tv_dict_gets(x.u.m, name, n);
            *out = v ? *v : tv_undef_named(name, n);
        }
        return BRAID_OK;
    case TV_NS: {
        tv *v = tv_dict_gets(x.u.m, name, n);
        *out = v ? *v : tv_undef_named(name, n);
        return BRAID_OK;
    }
    case TV_STR:
        if ((id = find_method(STR_METHODS, name, n))) return make_method(e, x, id, name, n, out);
        break;
    case TV_LIST:
        if (x.f & (TVF_ITER | TVF_VIEW | TVF_RANGE)) break;
        if ((id = find_method((x.f & TVF_TUPLE) ? TUPLE_METHODS : LIST_METHODS, name, n)))
            return make_method(e, x, id, name, n, out);
        break;
    case TV_LOOP: return loop_attr(e, at, x, name, n, out);
    case TV_CYCLER:
        if (n == 4 && memcmp(name, "next", 4) == 0) return make_method(e, x, M_CYC_NEXT, name, n, out);
        if (n == 5 && memcmp(name, "reset", 5) == 0) return make_method(e, x, M_CYC_RESET, name, n, out);
        if (n == 7 && memcmp(name, "current", 7) == 0) {
            tv *items = tv_dict_gets(x.u.m, "items", 5), *pos = tv_dict_gets(x.u.m, "pos", 3);
            *out = items->u.l->v[pos->u.i];
            return BRAID_OK;
        }
        break;
    default: break;
    }
    *out = tv_undef_named(name, n);
    return BRAID_OK;
}

braid_status tpl_getitem(tpl_env *e, const tpl_node *at, tv x, tv key, tv *out) {
    switch (x.k) {
    case TV_UNDEF: return undefined_error(at, x);
    case TV_DICT:
        if (tv_is_hashable(key)) {
            tv *v = tv_dict_get(x.u.m, key);
            if (v) { *out = *v; return BRAID_OK; }
        }
        break;
    case TV_LIST:
        if (x.f & (TVF_ITER | TVF_VIEW)) break;
        if (key.k == TV_INT || key.k == TV_BOOL) {
            int64_t i = key.u.i, len = (int64_t)x.u.l->n;
            if (i < 0) i += len;
            if (i >= 0 && i < len) { *out = x.u.l->v[i]; return BRAID_OK; }
            *out = tv_undef();
            return BRAID_OK;
        }
        break;
    case TV_STR:
        if (key.k == TV_INT || key.k == TV_BOOL) {
            int64_t len = (int64_t)tpl_utf8_count(x.u.s.p, x.u.s.n), i = key.u.i;
            if (i < 0) i += len;
            if (i >= 0 && i < len) {
                size_t a = tpl_utf8_offset(x.u.s.p, x.u.s.n, i), b = tpl_utf8_offset(x.u.s.p, x.u.s.n, i + 1);
                *out = tv_strn(x.u.s.p + a, b - a);
                out->f = x.f & TVF_MARKUP;
                return BRAID_OK;
            }
            *out = tv_undef();
            return BRAID_OK;
        }
        break;
    default: break;
    }
    if (key.k == TV_STR) {
        if (x.k == TV_DICT) { /* the key was missing: only a method of that name remains */
            int id = find_method(DICT_METHODS, key.u.s.p, key.u.s.n);
            if (id) return make_method(e, x, id, key.u.s.p, key.u.s.n, out);
            *out = tv_undef_named(key.u.s.p, key.u.s.n);
            return BRAID_OK;
        }
        return tpl_getattr(e, at, x, key.u.s.p, key.u.s.n, out);
    }
    *out = tv_undef();
    return BRAID_OK;
}

/* ---- tests ------------------------------------------------------------------------------------------------ */

static const char *const TEST_NAMES[] = {
    "odd", "even", "divisibleby", "defined", "undefined", "filter", "test", "none", "boolean", "false", "true",
    "integer", "float", "lower", "upper", "string", "mapping", "number", "sequence", "iterable", "callable",
    "sameas", "escaped", "in", "==", "eq", "equalto", "!=", "ne", ">", "gt", "greaterthan", "ge", ">=", "<", "lt",
    "lessthan", "<=", "le", NULL};

static const char *const FILTER_NAMES[] = {
    "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape",
    "filesizeformat", "first", "float", "forceescape", "format", "groupby", "indent", "int", "join", "last",
    "length", "list", "lower", "items", "map", "min", "max", "pprint", "random", "reject", "rejectattr",
    "replace", "reverse", "round", "safe", "select", "selectattr", "slice", "sort", "string", "striptags", "sum",
    "title", "trim", "truncate", "unique", "upper", "urlencode", "urlize", "wordcount", "wordwrap", "xmlattr",
    "tojson", NULL};

static int in_names(const char *const *names, const char *name, size_t n) {
    for (size_t i = 0; names[i]; i++)
        if (strlen(names[i]) == n && memcmp(names[i], name, n) == 0) return 1;
    return 0;
}

int tpl_filter_exists(const char *name, size_t n) { return in_names(FILTER_NAMES, name, n); }
int tpl_test_exists(const char *name, size_t n) { return in_names(TEST_NAMES, name, n); }

static int str_is_case(tv s, int upper) {
    /* Python: at least one cased character and no cased character of the other case */
    int cased = 0;
    for (size_t i = 0; i < s.u.s.n;) {
        uint32_t c = tpl_utf8_next(s.u.s.p, s.u.s.n, &i);
        uint32_t lo = tpl_py_lower(c), up = tpl_py_upper(c);
        if (lo == up) continue;
        if (upper ? c != up : c != lo) return 0;
        cased = 1;
    }
    return cased;
}

braid_status tpl_apply_test(tpl_env *e, const tpl_node *at, const char *name, size_t n, tv x, tpl_args *a,
                            int *out) {
#define IS(s) (n == sizeof(s) - 1 && memcmp(name, s, n) == 0)
    tv *arg = a->npos ? &a->pos[0] : NULL;
    if (IS("defined")) *out = x.k != TV_UNDEF;
    else if (IS("undefined")) *out = x.k == TV_UNDEF;
    else if (IS("none")) *out = x.k == TV_NONE;
    else if (IS("boolean")) *out = x.k == TV_BOOL;
    else if (IS("false")) *out = x.k == TV_BOOL && !x.u.i;
    else if (IS("true")) *out = x.k == TV_BOOL && x.u.i;
    else if (IS("integer")) *out = x.k == TV_INT;
    else if (IS("float")) *out = x.k == TV_FLOAT;
    else if (IS("number")) *out = tv_is_number(x);
    else if (IS("string")) *out = x.k == TV_STR;
    else if (IS("mapping")) *out = x.k == TV_DICT;
    else if (IS("iterable")) *out = x.k == TV_STR || x.k == TV_LIST || x.k == TV_DICT || x.k == TV_UNDEF;
    else if (IS("sequence"))
        *out = x.k == TV_STR || x.k == TV_DICT || x.k == TV_UNDEF || (x.k == TV_LIST && !(x.f & (TVF_ITER | TVF_VIEW)));
    else if (IS("callable"))
        *out = x.k == TV_MACRO || x.k == TV_FUNC || x.k == TV_METHOD || x.k == TV_LOOP || x.k == TV_UNDEF ||
               x.k == TV_JOINER;
    else if (IS("escaped")) *out = x.k == TV_STR && (x.f & TVF_MARKUP);
    else if (IS("lower") || IS("upper")) {
        tv s;
        BD_TRY(tv_to_str(e, at, x, &s));
        *out = str_is_case(s, IS("upper"));
    } else if (IS("odd") || IS("even") || IS("divisibleby")) {
        if (x.k == TV_UNDEF) return undefined_error(at, x);
        if (!tv_is_number(x)) return tpl_fail(at, BRAID_E_INVALID, "TypeError: not all arguments converted during string formatting");
        int64_t d = 2;
        if (IS("divisibleby")) {
            if (!arg || !tv_is_number(*arg)) return tpl_fail(at, BRAID_E_INVALID, "TypeError: divisibleby needs a number");
            if (arg->k == TV_FLOAT || x.k == TV_FLOAT) {
                double m = fmod(tv_num(x), tv_num(*arg));
                *out = m == 0;
                return BRAID_OK;
            }
            d = arg->u.i;
            if (d == 0) return tpl_fail(at, BRAID_E_INVALID, "ZeroDivisionError: integer division or modulo by zero");
        }
        if (x.k == TV_FLOAT) {
            double m = fmod(x.u.d, (double)d);
            *out = IS("odd") ? m != 0 : m == 0;
        } else {
            int64_t m = d == -1 ? 0 : x.u.i % d;
            *out = IS("odd") ? m != 0 : m == 0;
        }
    } else if (IS("sameas")) {
        if (!arg) return tpl_fail(at, BRAID_E_INVALID, "TypeError: sameas needs an argument");
        if (x.k != arg->k) *out = 0;
        else if (x.k == TV_NONE || x.k == TV_BOOL || x.k == TV_INT || x.k == TV_UNDEF) *out = tv_eq(x, *arg);
        else if (x.k == TV_LIST) *out = x.u.l == arg->u.l;
        else if (x.k == TV_DICT || x.k == TV_NS) *out = x.u.m == arg->u.m;
        else if (x.k == TV_STR) *out = x.u.s.p == arg->u.s.p && x.u.s.n == arg->u.s.n;
        else *out = tv_eq(x, *arg);
    } else if (IS("in")) {
        if (!arg) return tpl_fail(at, BRAID_E_INVALID, "TypeError: in needs an argument");
        tv r;
        /* reuse `in` through a one-step compare */
        if (arg->k == TV_STR) {
            if (x.k != TV_STR) return tpl_fail(at, BRAID_E_INVALID, "TypeError: 'in <string>' requires string as left operand");
            *out = x.u.s.n == 0 || memmem(arg->u.s.p, arg->u.s.n, x.u.s.p, x.u.s.n) != NULL;
        } else if (arg->k == TV_DICT) *out = tv_dict_get(arg->u.m, x) != NULL;
        else if (arg->k == TV_LIST) {
            *out = 0;
            for (size_t i = 0; i < arg->u.l->n; i++)
                if (tv_eq(arg->u.l->v[i], x)) *out = 1;
        } else if (arg->k == TV_UNDEF) *out = 0;
        else return tpl_fail(at, BRAID_E_INVALID, "TypeError: argument of type '%s' is not iterable", tv_type_name(*arg));
        (void)r;
    } else if (IS("==") || IS("eq") || IS("equalto")) {
        if (!arg) return tpl_fail(at, BRAID_E_INVALID, "TypeError: the test needs an argument");
        *out = tv_eq(x, *arg);
    } else if (IS("!=") || IS("ne")) {
        if (!arg) return tpl_fail(at, BRAID_E_INVALID, "TypeError: the test needs an argument");
        *out = !tv_eq(x, *arg);
    } else if (IS(">") || IS("gt") || IS("greaterthan") || IS("<") || IS("lt") || IS("lessthan") || IS(">=") ||
               IS("ge") || IS("<=") || IS("le")) {
        if (!arg) return tpl_fail(at, BRAID_E_INVALID, "TypeError: the test needs an argument");
        int lt;
        if (IS(">") || IS("gt") || IS("greaterthan")) { BD_TRY(tv_lt(at, *arg, x, &lt)); *out = lt; }
        else if (IS("<") || IS("lt") || IS("lessthan")) { BD_TRY(tv_lt(at, x, *arg, &lt)); *out = lt; }
        else if (IS(">=") || IS("ge")) { BD_TRY(tv_lt(at, x, *arg, &lt)); *out = !lt; }
        else { BD_TRY(tv_lt(at, *arg, x, &lt)); *out = !lt; }
    } else if (IS("filter") || IS("test")) {
        if (!arg || arg->k != TV_STR) *out = 0;
        else *out = IS("filter") ? tpl_filter_exists(arg->u.s.p, arg->u.s.n) : tpl_test_exists(arg->u.s.p, arg->u.s.n);
    } else {
        return tpl_fail(at, BRAID_E_INVALID, "TemplateRuntimeError: No test named '%.*s' found.", (int)n, name);
    }
    return BRAID_OK;
#undef IS
}

/* ---- filter helpers --------------------------------------------------------------------------------------- */

/* make_attrgetter: "a.b.0" looks up a, then b, then index 0 (digits become integers). */
static braid_status attr_path(tpl_env *e, const tpl_node *at, tv item, tv attr, tv *out) {
    if (attr.k != TV_STR) return tpl_getitem(e, at, item, attr, out);
    const char *p = attr.u.s.p;
    size_t n = attr.u.s.n, s = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != '.') continue;
        int digits = i > s;
        int64_t v = 0;
        for (size_t k = s; k < i; k++) {
            if (p[k] < '0' || p[k] > '9') { digits = 0; break; }
            v = v * 10 + (p[k] - '0');
            if (v > 1000000000) { digits = 0; break; }
        }
        tv key = digits ? tv_int(v) : tv_strn(p + s, i - s);
        BD_TRY(tpl_getitem(e, at, item, key, &item));
        s = i + 1;
    }
    *out = item;
    return BRAID_OK;
}

static braid_status lower_value(tpl_env *e, tv v, tv *out) {
    if (v.k != TV_STR) { *out = v; return BRAID_OK; }
    bd_strbuf b = {0};
    for (size_t i = 0; i < v.u.s.n;) {
        uint32_t c = tpl_utf8_next(v.u.s.p, v.u.s.n, &i);
        bd_strbuf_put_cp(&b, tpl_py_lower(c));
    }
    braid_status s = tv_from_buf(e, &b, out);
    bd_strbuf_free(&b);
    return s;
}

/* Stable merge sort of n values by key (Python's sorted is stable). */
static braid_status sort_values(tpl_env *e, const tpl_node *at, tv *vals, tv *keys, size_t n, int reverse) {
    if (n < 2) return BRAID_OK;
    tv *tv_tmp = tpl_alloc(e->a, n * sizeof(tv)), *tk_tmp = tpl_alloc(e->a, n * sizeof(tv));
    if (!tv_tmp || !tk_tmp) return oom();
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                int take_right;
                if (reverse) BD_TRY(tv_lt(at, keys[i], keys[j], &take_right)); /* right first if left < right */
                else BD_TRY(tv_lt(at, keys[j], keys[i], &take_right));
                if (take_right) { tv_tmp[k] = vals[j]; tk_tmp[k++] = keys[j++]; }
                else { tv_tmp[k] = vals[i]; tk_tmp[k++] = keys[i++]; }
            }
            while (i < mid) { tv_tmp[k] = vals[i]; tk_tmp[k++] = keys[i++]; }
            while (j < hi) { tv_tmp[k] = vals[j]; tk_tmp[k++] = keys[j++]; }
        }
        memcpy(vals, tv_tmp, n * sizeof(tv));
        memcpy(keys, tk_tmp, n * sizeof(tv));
    }
    return BRAID_OK;
}

static braid_status str_arg(tpl_env *e, const tpl_node *at, tv *v, tv def, tv *out) {
    if (!v) { *out = def; return BRAID_OK; }
    return tv_to_str(e, at, *v, out);
}

/* Python's str.splitlines() boundaries. */
static size_t line_break_len(const char *p, size_t n, size_t i) {
    unsigned char c = (unsigned char)p[i];
    if (c == '\r') return (i + 1 < n && p[i + 1] == '\n') ? 2 : 1;
    if (c == '\n' || c == '\v' || c == '\f' || c == 0x1c || c == 0x1d || c == 0x1e) return 1;
    if (c == 0xC2 && i + 1 < n && (unsigned char)p[i + 1] == 0x85) return 2;
    if (c == 0xE2 && i + 2 < n && (unsigned char)p[i + 1] == 0x80 &&
        ((unsigned char)p[i + 2] == 0xA8 || (unsigned char)p[i + 2] == 0xA9))
        return 3;
    return 0;
}

braid_status tpl_splitlines(tpl_env *e, tv s, int keepends, tv *out);
braid_status tpl_splitlines(tpl_env *e, tv s, int keepends, tv *out) {
    BD_TRY(tv_new_list(e->a, 0, out));
    size_t start = 0, i = 0;
    while (i < s.u.s.n) {
        size_t bl = line_break_len(s.u.s.p, s.u.s.n, i);
        if (!bl) { i++; continue; }
        tv line = tv_strn(s.u.s.p + start, (keepends ? i + bl : i) - start);
        line.f = s.f & TVF_MARKUP;
        BD_TRY(tv_list_push(e->a, out->u.l, line));
        i += bl;
        start = i;
    }
    if (start < s.u.s.n) {
        tv line = tv_strn(s.u.s.p + start, s.u.s.n - start);
        line.f = s.f & TVF_MARKUP;
        BD_TRY(tv_list_push(e->a, out->u.l, line));
    }
    return BRAID_OK;
}

braid_status tpl_strip(tpl_env *e, tv s, tv *chars, int left, int right, tv *out);

static braid_status do_indent(tpl_env *e, const tpl_node *at, tv x, tpl_args *a, tv *out) {
    static const char *const names[] = {"width", "first", "blank", NULL};
    BD_TRY(check_args(at, "indent", a, 3, names));
    tv s;
    BD_TRY(tv_to_str(e, at, x, &s));
    tv *w = tpl_arg(a, 0, "width"), *first = tpl_arg(a, 1, "first"), *blank = tpl_arg(a, 2, "blank");
    bd_strbuf ind = {0};
    if (w && w->k == TV_STR) bd_strbuf_put(&ind, w->u.s.p, w->u.s.n);
    else {
        int64_t width = 4;
        if (w) {
            if (w->k != TV_INT && w->k != TV_BOOL) { bd_strbuf_free(&ind); return tpl_fail(at, BRAID_E_INVALID, "TypeError: indent width must be an int or a str"); }
            width = w->u.i;
        }
        if (width > 4096) width = 4096;
        for (int64_t i = 0; i < width; i++) bd_strbuf_put(&ind, " ", 1);
    }
    braid_status st = bd_strbuf_status(&ind);
    /* s += "\n"; lines = s.splitlines() */
    bd_strbuf tmp = {0}, o = {0};
    bd_strbuf_put(&tmp, s.u.s.p, s.u.s.n);
    bd_strbuf_put(&tmp, "\n", 1);
    tv s2, lines;
    if (st == BRAID_OK) st = tv_from_buf(e, &tmp, &s2);
    if (st == BRAID_OK) st = tpl_splitlines(e, s2, 0, &lines);
    if (st == BRAID_OK) {
        int is_blank = blank && tv_truthy(*blank);
        for (size_t i = 0; i < lines.u.l->n; i++) {
            tv line = lines.u.l->v[i];
            if (i > 0) {
                bd_strbuf_put(&o, "\n", 1);
                if (is_blank || line.u.s.n) bd_strbuf_put(&o, ind.p ? ind.p : "", ind.n);
            }
            bd_strbuf_put(&o, line.u.s.p, line.u.s.n);
        }
        if (first && tv_truthy(*first)) {
            bd_strbuf f2 = {0};
            bd_strbuf_put(&f2, ind.p ? ind.p : "", ind.n);
            bd_strbuf_put(&f2, o.p ? o.p : "", o.n);
            st = tv_from_buf(e, &f2, out);
            bd_strbuf_free(&f2);
        } else st = tv_from_buf(e, &o, out);
        if (st == BRAID_OK) out->f = s.f & TVF_MARKUP;
    }
    bd_strbuf_free(&ind);
    bd_strbuf_free(&tmp);
    bd_strbuf_free(&o);
    return st;
}

static braid_status do_tojson(tpl_env *e, const tpl_node *at, tv x, tpl_args *a, tv *out) {
    static const char *const names[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
    BD_TRY(check_args(at, "tojson", a, 4, names));
    tpl_json_opts o = {.indent = -1};
    tv *ea = tpl_arg(a, 0, "ensure_ascii"), *ind = tpl_arg(a, 1, "indent"), *sep = tpl_arg(a, 2, "separators"),
       *sk = tpl_arg(a, 3, "sort_keys");
    o.ensure_ascii = ea ? tv_truthy(*ea) : 0;
    o.sort_keys = sk ? tv_truthy(*sk) : 0;
    if (ind && ind->k != TV_NONE) {
        if (ind->k == TV_STR) { o.indent_str = ind->u.s.p; o.indent_len = ind->u.s.n; }
        else if (ind->k == TV_INT || ind->k == TV_BOOL) o.indent = ind->u.i < 0 ? 0 : ind->u.i > 1000 ? 1000 : (int)ind->u.i;
        else return tpl_fail(at, BRAID_E_INVALID, "TypeError: tojson indent must be an int or a str");
    }
    if (sep && sep->k != TV_NONE) {
        if (sep->k != TV_LIST || sep->u.l->n != 2 || sep->u.l->v[0].k != TV_STR || sep->u.l->v[1].k != TV_STR)
            return tpl_fail(at, BRAID_E_INVALID, "ValueError: tojson separators must be a pair of strings");
        o.item_sep = tpl_strndup(e->a, sep->u.l->v[0].u.s.p, sep->u.l->v[0].u.s.n);
        o.key_sep = tpl_strndup(e->a, sep->u.l->v[1].u.s.p, sep->u.l->v[1].u.s.n);
        if (!o.item_sep || !o.key_sep) return oom();
    }
    bd_strbuf b = {0};
    braid_status s = tpl_json_dump(e, at, &b, x, &o);
    if (s == BRAID_OK) s = tv_from_buf(e, &b, out);
    bd_strbuf_free(&b);
    return s;
}

/* Python int(str) / float(str) for |int and |float: *ok = 0 when the text is not a number. */
static int parse_py_int(tv s, int base, int64_t *v) {
    char buf[128];
    size_t k = 0, i = 0, n = s.u.s.n;
    const char *p = s.u.s.p;
    while (i < n && tpl_py_isspace((unsigned char)p[i])) i++;
    while (n > i && tpl_py_isspace((unsigned char)p[n - 1])) n--;
    if (i >= n || n - i >= sizeof buf) return 0;
    if (p[i] == '+' || p[i] == '-') buf[k++] = p[i++];
    if (i >= n) return 0;
    int prev_us = 1;
    for (; i < n; i++) {
        char c = p[i];
        if (c == '_') { if (prev_us) return 0; prev_us = 1; continue; }
        int d = c >= '0' && c <= '9' ? c - '0' : (c | 32) >= 'a' && (c | 32) <= 'z' ? (c | 32) - 'a' + 10 : 99;
        if (d >= base) return 0;
        buf[k++] = c;
        prev_us = 0;
    }
    if (prev_us) return 0;
    buf[k] = 0;
    char *end;
    long long r = strtoll(buf, &end, base);
    if (*end) return 0;
    *v = r;
    return 1;
}

static int parse_py_float(tv s, double *v) {
    char buf[256];
    size_t i = 0, n = s.u.s.n, k = 0;
    const char *p = s.u.s.p;
    while (i < n && tpl_py_isspace((unsigned char)p[i])) i++;
    while (n > i && tpl_py_isspace((unsigned char)p[n - 1])) n--;
    if (i >= n || n - i >= sizeof buf) return 0;
    for (; i < n; i++) {
        if (p[i] == '_') continue;
        buf[k++] = p[i];
    }
    buf[k] = 0;
    if (k > 1 && (buf[0] == '0') && (buf[1] == 'x' || buf[1] == 'X')) return 0;
    char *end;
    *v = strtod(buf, &end);
    return *end == 0 && k > 0;
}

static braid_status select_reject(tpl_env *e, const tpl_node *at, tv x, tpl_args *a, int reject, int by_attr, tv *out) {
    BD_TRY(new_iter(e, out));
    if (!tv_truthy(x)) return BRAID_OK;
    tv items;
    BD_TRY(tv_iterate(e, at, x, &items));
    size_t off = 0;
    tv attr = tv_none();
    if (by_attr) {
        if (a->npos < 1) return tpl_fail(at, BRAID_E_INVALID, "FilterArgumentError: Missing parameter for attribute name");
        attr = a->pos[0];
        off = 1;
    }
    tv *test = a->npos > off ? &a->pos[off] : NULL;
    if (test && test->k != TV_STR) return tpl_fail(at, BRAID_E_INVALID, "the test name must be a string");
    tpl_args targs = {a->pos + (a->npos > off + 1 ? off + 1 : a->npos), a->npos > off + 1 ? a->npos - off - 1 : 0,
                      a->kwn, a->kwl, a->kwv, a->nkw};
    for (size_t i = 0; i < items.u.l->n; i++) {
        tv item = items.u.l->v[i], probe = item;
        if (by_attr) BD_TRY(attr_path(e, at, item, attr, &probe));
        int r;
        if (test) {
            if (!tpl_test_exists(test->u.s.p, test->u.s.n))
                return tpl_fail(at, BRAID_E_INVALID, "TemplateRuntimeError: No test named '%.*s'.", (int)test->u.s.n,
                                test->u.s.p);
            BD_TRY(tpl_apply_test(e, at, test->u.s.p, test->u.s.n, probe, &targs, &r));
        } else r = tv_truthy(probe);
        if (r != reject) BD_TRY(tv_list_push(e->a, out->u.l, item));
    }
    return BRAID_OK;
}

static braid_status unsupported(const tpl_node *at, const char *name, size_t n) {
    return tpl_fail(at, BRAID_E_UNSUPPORTED, "the filter '%.*s' is not supported by braid", (int)n, name);
}

/* ---- the filters ------------------------------------------------------------------------------------------ */

braid_status tpl_apply_filter(tpl_env *e, const tpl_node *at, const char *name, size_t n, tv x, tpl_args *a,
                              tpl_frame *f, tv *out) {
#define IS(s) (n == sizeof(s) - 1 && memcmp(name, s, n) == 0)
    (void)f;
    if (IS("tojson")) return do_tojson(e, at, x, a, out);
    if (IS("safe")) {
        BD_TRY(tv_to_str(e, at, x, out));
        out->f |= TVF_MARKUP;
        return BRAID_OK;
    }
    if (IS("string")) {
        if (x.k == TV_STR) { *out = x; return BRAID_OK; }
        return tv_to_str(e, at, x, out);
    }
    if (IS("length") || IS("count")) {
        int64_t len;
        BD_TRY(tv_len(at, x, &len));
        *out = tv_int(len);
        return BRAID_OK;
    }
    if (IS("default") || IS("d")) {
        static const char *const names[] = {"default_value", "boolean", NULL};
        BD_TRY(check_args(at, "default", a, 2, names));
        tv *dv = tpl_arg(a, 0, "default_value"), *bo = tpl_arg(a, 1, "boolean");
        int use = x.k == TV_UNDEF || (bo && tv_truthy(*bo) && !tv_truthy(x));
        *out = use ? (dv ? *dv : tv_strn("", 0)) : x;
        return BRAID_OK;
    }
    if (IS("trim")) {
        static const char *const names[] = {"chars", NULL};
        BD_TRY(check_args(at, "trim", a, 1, names));
        tv s, *chars = tpl_arg(a, 0, "chars");
        BD_TRY(tv_to_str(e, at, x, &s));
        return tpl_strip(e, s, chars && chars->k != TV_NONE ? chars : NULL, 1, 1, out);
    }
    if (IS("upper") || IS("lower") || IS("capitalize") || IS("title")) {
        tv s;
        BD_TRY(tv_to_str(e, at, x, &s));
        tpl_args none = {0};
        int id = IS("upper") ? M_S_UPPER : IS("lower") ? M_S_LOWER : IS("capitalize") ? M_S_CAPITALIZE : M_S_TITLE;
        if (id == M_S_TITLE) { /* title: upper after - whitespace ( { [ < */
            bd_strbuf b = {0};
            int start = 1;
            for (size_t i = 0; i < s.u.s.n;) {
                uint32_t c = tpl_utf8_next(s.u.s.p, s.u.s.n, &i);
                int sep = tpl_py_isspace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
                bd_strbuf_put_cp(&b, sep ? c : start ? tpl_py_upper(c) : tpl_py_lower(c));
                start = sep;
            }
            braid_status st = tv_from_buf(e, &b, out);
            bd_strbuf_free(&b);
            return st;
        }
        return tpl_call_method(e, at, s, id, &none, out);
    }
    if (IS("replace")) {
        static const char *const names[] = {"old", "new", "count", NULL};
        BD_TRY(check_args(at, "replace", a, 3, names));
        tv s;
        BD_TRY(tv_to_str(e, at, x, &s));
        s.f = 0;
        tv *old = tpl_arg(a, 0, "old"), *nw = tpl_arg(a, 1, "new"), *cnt = tpl_arg(a, 2, "count");
        if (!old || !nw) return tpl_fail(at, BRAID_E_INVALID, "TypeError: replace() needs old and new");
        tv so, sn;
        BD_TRY(tv_to_str(e, at, *old, &so));
        BD_TRY(tv_to_str(e, at, *nw, &sn));
        tv args3[3] = {so, sn, cnt ? *cnt : tv_int(-1)};
        tpl_args ra = {args3, 3, NULL, NULL, NULL, 0};
        return tpl_call_method(e, at, s, M_S_REPLACE, &ra, out);
    }
    if (IS("join")) {
        static const char *const names[] = {"d", "attribute", NULL};
        BD_TRY(check_args(at, "join", a, 2, names));
        tv d, *dv = tpl_arg(a, 0, "d"), *attr = tpl_arg(a, 1, "attribute"), items;
        BD_TRY(str_arg(e, at, dv, tv_strn("", 0), &d));
        BD_TRY(tv_iterate(e, at, x, &items));
        bd_strbuf b = {0};
        braid_status st = BRAID_OK;
        for (size_t i = 0; st == BRAID_OK && i < items.u.l->n; i++) {
            tv item = items.u.l->v[i];
            if (attr && attr->k != TV_NONE) st = attr_path(e, at, item, *attr, &item);
            if (i) bd_strbuf_put(&b, d.u.s.p, d.u.s.n);
            if (st == BRAID_OK) st = tv_str(e, at, &b, item);
            if (st == BRAID_OK && b.n > e->out_limit) st = tpl_fail(at, BRAID_E_RANGE, "string larger than the output limit");
        }
        if (st == BRAID_OK) st = tv_from_buf(e, &b, out);
        bd_strbuf_free(&b);
        return st;
    }
    if (IS("first")) {
        tv items;
        if (x.k == TV_UNDEF) return undefined_error(at, x);
        BD_TRY(tv_iterate(e, at, x, &items));
        *out = items.u.l->n ? items.u.l->v[0] : tv_undef();
        return BRAID_OK;
    }
    if (IS("last")) {
        if (x.k == TV_LIST && (x.f & TVF_ITER))
            return tpl_fail(at, BRAID_E_INVALID, "TypeError: '%s' object is not reversible", tv_type_name(x));
        if (x.k == TV_UNDEF) return undefined_error(at, x);
        tv items;
        BD_TRY(tv_iterate(e, at, x, &items));
        *out = items.u.l->n ? items.u.l->v[items.u.l->n - 1] : tv_undef();
        return BRAID_OK;
    }
    if (IS("list")) {
        tv items;
        BD_TRY(tv_iterate(e, at, x, &items));
        BD_TRY(tv_new_list(e->a, items.u.l->n, out));
        if (items.u.l->n) memcpy(out->u.l->v, items.u.l->v, items.u.l->n * sizeof(tv));
        out->u.l->n = items.u.l->n;
        return BRAID_OK;
    }
    if (IS("items")) {
        BD_TRY(new_iter(e, out));
        if (x.k == TV_UNDEF) return BRAID_OK;
        if (x.k != TV_DICT) return tpl_fail(at, BRAID_E_INVALID, "TypeError: Can only get item pairs from a mapping.");
        for (size_t i = 0; i < x.u.m->n; i++) {
            tv pair;
            BD_TRY(tv_pair(e->a, x.u.m->k[i], x.u.m->v[i], &pair));
            BD_TRY(tv_list_push(e->a, out->u.l, pair));
        }
        return BRAID_OK;
    }
    if (IS("dictsort")) {
        static const char *const names[] = {"case_sensitive", "by", "reverse", NULL};
        BD_TRY(check_args(at, "dictsort", a, 3, names));
        if (x.k != TV_DICT) return tpl_fail(at, BRAID_E_INVALID, "AttributeError: '%s' object has no attribute 'items'", tv_type_name(x));
        tv *cs = tpl_arg(a, 0, "case_sensitive"), *by = tpl_arg(a, 1, "by"), *rev = tpl_arg(a, 2, "reverse");
        int pos = 0;
        if (by) {
            if (by->k == TV_STR && by->u.s.n == 5 && memcmp(by->u.s.p, "value", 5) == 0) pos = 1;
            else if (!(by->k == TV_STR && by->u.s.n == 3 && memcmp(by->u.s.p, "key", 3) == 0))
                return tpl_fail(at, BRAID_E_INVALID, "FilterArgumentError: You can only sort by either \"key\" or \"value\"");
        }
        size_t cnt = x.u.m->n;
        BD_TRY(tv_new_list(e->a, cnt, out));
        tv *keys = tpl_alloc(e->a, (cnt + 1) * sizeof(tv));
        if (!keys) return oom();
        for (size_t i = 0; i < cnt; i++) {
            tv pair;
            BD_TRY(tv_pair(e->a, x.u.m->k[i], x.u.m->v[i], &pair));
            out->u.l->v[i] = pair;
            keys[i] = pos ? x.u.m->v[i] : x.u.m->k[i];
            if (!(cs && tv_truthy(*cs))) BD_TRY(lower_value(e, keys[i], &keys[i]));
        }
        out->u.l->n = cnt;
        return sort_values(e, at, out->u.l->v, keys, cnt, rev && tv_truthy(*rev));
    }
    if (IS("sort")) {
        static const char *const names[] = {"reverse", "case_sensitive", "attribute", NULL};
        BD_TRY(check_args(at, "sort", a, 3, names));
        tv *rev = tpl_arg(a, 0, "reverse"), *cs = tpl_arg(a, 1, "case_sensitive"), *attr = tpl_arg(a, 2, "attribute");
        tv items;
        BD_TRY(tv_iterate(e, at, x, &items));
        size_t cnt = items.u.l->n;
        BD_TRY(tv_new_list(e->a, cnt, out));
        tv *keys = tpl_alloc(e->a, (cnt + 1) * sizeof(tv));
        if (!keys) return oom();
        for (size_t i = 0; i < cnt; i++) {
            out->u.l->v[i] = items.u.l->v[i];
            tv k = items.u.l->v[i];
            if (attr && attr->k != TV_NONE) {
                if (attr->k == TV_STR && memchr(attr->u.s.p, ',', attr->u.s.n))
                    return tpl_fail(at, BRAID_E_UNSUPPORTED, "sort by several attributes is not supported");
                BD_TRY(attr_path(e, at, k, *attr, &k));
            }
            if (!(cs && tv_truthy(*cs))) BD_TRY(lower_value(e, k, &k));
            keys[i] = k;
        }
        out->u.l->n = cnt;
        return sort_values(e, at, out->u.l->v, keys, cnt, rev && tv_truthy(*rev));
    }
    if (IS("unique")) {
        static const char *const names[] = {"case_sensitive", "attribute", NULL};
        BD_TRY(check_args(at, "unique", a, 2, names));
        tv *cs = tpl_arg(a, 0, "case_sensitive"), *attr = tpl_arg(a, 1, "attribute");
        tv items, seen;
        BD_TRY(tv_iterate(e, at, x, &items));
        BD_TRY(new_iter(e, out));
        BD_TRY(tv_new_dict(e->a, 0, &seen));
        for (size_t i = 0; i < items.u.l->n; i++) {
            tv k = items.u.l->v[i];
            if (attr && attr->k != TV_NONE) BD_TRY(attr_path(e, at, k, *attr, &k));
            if (!(cs && tv_truthy(*cs))) BD_TRY(lower_value(e, k, &k));
            if (!tv_is_hashable(k)) return tpl_fail(at, BRAID_E_INVALID, "TypeError: unhashable type: '%s'", tv_type_name(k));
            if (tv_dict_get(seen.u.m, k)) continue;
            BD_TRY(tv_dict_set(e->a, seen.u.m, k, tv_none()));
            BD_TRY(tv_list_push(e->a, out->u.l, items.u.l->v[i]));
        }
        return BRAID_OK;
    }
    if (IS("map")) {
        tv items;
        BD_TRY(tv_iterate(e, at, x, &items));
        BD_TRY(new_iter(e, out));
        tv *attr = a->npos == 0 ? tpl_arg(a, (size_t)-1, "attribute") : NULL;
        if (attr) {
            tv *def = tpl_arg(a, (size_t)-1, "default");
            for (size_t i = 0; i < a->nkw; i++)
                if (!((a->kwl[i] == 9 && memcmp(a->kwn[i], "attribute", 9) == 0) ||
                      (a->kwl[i] == 7 && memcmp(a->kwn[i], "default", 7) == 0)))
                    return tpl_fail(at, BRAID_E_INVALID, "FilterArgumentError: Unexpected keyword argument '%.*s'",
                                    (int)a->kwl[i], a->kwn[i]);
            for (size_t i = 0; i < items.u.l->n; i++) {
                tv v;
                BD_TRY(attr_path(e, at, items.u.l->v[i], *attr, &v));
                if (def && def->k != TV_NONE && v.k == TV_UNDEF) v = *def;
                BD_TRY(tv_list_push(e->a, out->u.l, v));
            }
            return BRAID_OK;
        }
        if (a->npos < 1 || a->pos[0].k != TV_STR)
            return tpl_fail(at, BRAID_E_INVALID, "FilterArgumentError: map requires a filter argument");
        tv fname = a->pos[0];
        if (!tpl_filter_exists(fname.u.s.p, fname.u.s.n))
            return tpl_fail(at, BRAID_E_INVALID, "TemplateRuntimeError: No filter named '%.*s'.", (int)fname.u.s.n, fname.u.s.p);
        tpl_args fa = {a->pos + 1, a->npos - 1, a->kwn, a->kwl, a->kwv, a->nkw};
        for (size_t i = 0; i < items.u.l->n; i++) {
            tv v;
            BD_TRY(tpl_apply_filter(e, at, fname.u.s.p, fname.u.s.n, items.u.l->v[i], &fa, f, &v));
            BD_TRY(tv_list_push(e->a, out->u.l, v));
        }
        return BRAID_OK;
    }
    if (IS("select")) return select_reject(e, at, x, a, 0, 0, out);
    if (IS("reject")) return select_reject(e, at, x, a, 1, 0, out);
    if (IS("selectattr")) return select_reject(e, at, x, a, 0, 1, out);
    if (IS("rejectattr")) return select_reject(e, at, x, a, 1, 1, out);
    if (IS("int")) {
        static const char *const names[] = {"default", "base", NULL};
        BD_TRY(check_args(at, "int", a, 2, names));
        tv *def = tpl_arg(a, 0, "default"), *base = tpl_arg(a, 1, "base");
        int b = base && (base->k == TV_INT) ? (int)base->u.i : 10;
        int64_t v;
        double d;
        if (x.k == TV_INT || x.k == TV_BOOL) { *out = tv_int(x.u.i); return BRAID_OK; }
        if (x.k == TV_FLOAT && isfinite(x.u.d) && fabs(x.u.d) < 9.2e18) { *out = tv_int((int64_t)x.u.d); return BRAID_OK; }
        if (x.k == TV_FLOAT) return tpl_fail(at, BRAID_E_INVALID, "OverflowError: cannot convert float to integer");
        if (x.k == TV_STR && b >= 2 && b <= 36 && parse_py_int(x, b, &v)) { *out = tv_int(v); return BRAID_OK; }
        if (x.k == TV_STR && parse_py_float(x, &d)) {
            if (!isfinite(d)) return tpl_fail(at, BRAID_E_INVALID, "OverflowError: cannot convert float infinity to integer");
            *out = tv_int((int64_t)d);
            return BRAID_OK;
        }
        *out = def ? *def : tv_int(0);
        return BRAID_OK;
    }
    if (IS("float")) {
        static const char *const names[] = {"default", NULL};
        BD_TRY(check_args(at, "float", a, 1, names));
        tv *def = tpl_arg(a, 0, "default");
        double d;
        if (tv_is_number(x)) { *out = tv_float(tv_num(x)); return BRAID_OK; }
        if (x.k == TV_STR && parse_py_float(x, &d)) { *out = tv_float(d); return BRAID_OK; }
        *out = def ? *def : tv_float(0.0);
        return BRAID_OK;
    }
    if (IS("abs")) {
        if (x.k == TV_INT || x.k == TV_BOOL) { *out = tv_int(x.u.i < 0 ? -x.u.i : x.u.i); return BRAID_OK; }
        if (x.k == TV_FLOAT) { *out = tv_float(fabs(x.u.d)); return BRAID_OK; }
        return tpl_fail(at, BRAID_E_INVALID, "TypeError: bad operand type for abs(): '%s'", tv_type_name(x));
    }
    if (IS("round")) {
        static const char *const names[] = {"precision", "method", NULL};
        BD_TRY(check_args(at, "round", a, 2, names));
        tv *pr = tpl_arg(a, 0, "precision"), *me = tpl_arg(a, 1, "method");
        int64_t prec = pr && (pr->k == TV_INT || pr->k == TV_BOOL) ? pr->u.i : 0;
        if (!tv_is_number(x)) return tpl_fail(at, BRAID_E_INVALID, "TypeError: type %s doesn't define __round__ method", tv_type_name(x));
        const char *m = "common";
        size_t ml = 6;
        if (me) {
            if (me->k != TV_STR) return tpl_fail(at, BRAID_E_INVALID, "FilterArgumentError: method must be common, ceil or floor");
            m = me->u.s.p;
            ml = me->u.s.n;
        }
        if (ml == 6 && memcmp(m, "common", 6) == 0) {
            if (x.k != TV_FLOAT) { *out = tv_int(x.u.i); return BRAID_OK; }
            if (prec > 300 || prec < -300 || !isfinite(x.u.d)) { *out = x; return BRAID_OK; }
            char buf[400];
            if (prec >= 0) {
                snprintf(buf, sizeof buf, "%.*f", (int)prec, x.u.d);
                *out = tv_float(strtod(buf, NULL));
            } else {
                double p10 = pow(10, (double)-prec);
                snprintf(buf, sizeof buf, "%.0f", x.u.d / p10);
                *out = tv_float(strtod(buf, NULL) * p10);
            }
            return BRAID_OK;
        }
        if ((ml == 4 && memcmp(m, "ceil", 4) == 0) || (ml == 5 && memcmp(m, "floor", 5) == 0)) {
            double p10 = pow(10, (double)prec), v = tv_num(x) * p10;
            *out = tv_float((m[0] == 'c' ? ceil(v) : floor(v)) / p10);
            return BRAID_OK;
        }
        return tpl_fail(at, BRAID_E_INVALID, "FilterArgumentError: method must be common, ceil or floor");
    }
    if (IS("indent")) return do_indent(e, at, x, a, out);
    if (IS("reverse")) {
        if (x.k == TV_STR) {
            tv chars;
            BD_TRY(tv_iterate(e, at, x, &chars));
            bd_strbuf b = {0};
            for (size_t i = chars.u.l->n; i > 0; i--) bd_strbuf_put(&b, chars.u.l->v[i - 1].u.s.p, chars.u.l->v[i - 1].u.s.n);
            braid_status st = tv_from_buf(e, &b, out);
            bd_strbuf_free(&b);
            return st;
        }
        tv items;
        int was_iter = x.k == TV_LIST && (x.f & TVF_ITER);
        BD_TRY(tv_iterate(e, at, x, &items));
        BD_TRY(tv_new_list(e->a, items.u.l->n, out));
        for (size_t i = items.u.l->n; i > 0; i--) out->u.l->v[out->u.l->n++] = items.u.l->v[i - 1];
        out->f = was_iter ? 0 : TVF_ITER; /* reversed() gives an iterator; a generator becomes a list */
        return BRAID_OK;
    }
    if (IS("min") || IS("max")) {
        static const char *const names[] = {"case_sensitive", "attribute", NULL};
        BD_TRY(check_args(at, n == 3 && name[1] == 'i' ? "min" : "max", a, 2, names));
        tv *cs = tpl_arg(a, 0, "case_sensitive"), *attr = tpl_arg(a, 1, "attribute");
        tv items;
        BD_TRY(tv_iterate(e, at, x, &items));
        if (!items.u.l->n) { *out = tv_undef(); return BRAID_OK; }
        int is_min = name[1] == 'i';
        size_t best = 0;
        tv bestk = tv_none();
        for (size_t i = 0; i < items.u.l->n; i++) {
            tv k = items.u.l->v[i];
            if (attr && attr->k != TV_NONE) BD_TRY(attr_path(e, at, k, *attr, &k));
            if (!(cs && tv_truthy(*cs))) BD_TRY(lower_value(e, k, &k));
            if (i == 0) { bestk = k; continue; }
            int lt;
            BD_TRY(is_min ? tv_lt(at, k, bestk, &lt) : tv_lt(at, bestk, k, &lt));
            if (lt) { best = i; bestk = k; }
        }
        *out = items.u.l->v[best];
        return BRAID_OK;
    }
    if (IS("sum")) {
        static const char *const names[] = {"attribute", "start", NULL};
        BD_TRY(check_args(at, "sum", a, 2, names));
        tv *attr = tpl_arg(a, 0, "attribute"), *start = tpl_arg(a, 1, "start");
        tv items, acc = start ? *start : tv_int(0);
        BD_TRY(tv_iterate(e, at, x, &items));
        for (size_t i = 0; i < items.u.l->n; i++) {
            tv v = items.u.l->v[i];
            if (attr && attr->k != TV_NONE) BD_TRY(attr_path(e, at, v, *attr, &v));
            if (!tv_is_number(acc) || !tv_is_number(v))
                return tpl_fail(at, BRAID_E_INVALID, "TypeError: unsupported operand type(s) for +: '%s' and '%s'",
                                tv_type_name(acc), tv_type_name(v));
            if (acc.k == TV_FLOAT || v.k == TV_FLOAT) acc = tv_float(tv_num(acc) + tv_num(v));
            else if (__builtin_add_overflow(acc.u.i, v.u.i, &acc.u.i)) return tpl_fail(at, BRAID_E_RANGE, "integer overflow");
            else acc.k = TV_INT;
        }
        *out = acc;
        return BRAID_OK;
    }
    if (IS("attr")) {
        if (a->npos < 1 || a->pos[0].k != TV_STR) return tpl_fail(at, BRAID_E_INVALID, "TypeError: attr needs a name");
        if (x.k == TV_DICT) { /* a dict's keys are not attributes */
            int dummy = 0;
            (void)dummy;
            return tpl_getattr(e, at, tv_none(), a->pos[0].u.s.p, a->pos[0].u.s.n, out);
        }
        return tpl_getattr(e, at, x, a->pos[0].u.s.p, a->pos[0].u.s.n, out);
    }
    if (IS("e") || IS("escape") || IS("forceescape")) {
        bd_strbuf b = {0};
        tv v = x;
        if (IS("forceescape")) v.f &= (uint8_t)~TVF_MARKUP;
        braid_status st = (x.k == TV_NONE && !IS("forceescape")) ? (bd_strbuf_puts(&b, "None"), BRAID_OK) : tv_escape(e, at, &b, v);
        if (st == BRAID_OK) st = tv_from_buf(e, &b, out);
        bd_strbuf_free(&b);
        if (st == BRAID_OK) out->f |= TVF_MARKUP;
        return st;
    }
    if (IS("center")) {
        tv s, w = a->npos ? a->pos[0] : tv_int(80);
        BD_TRY(tv_to_str(e, at, x, &s));
        tv args1[1] = {w};
        tpl_args ca = {args1, 1, NULL, NULL, NULL, 0};
        return tpl_call_method(e, at, s, M_S_CENTER, &ca, out);
    }
    if (IS("wordcount")) {
        tv s;
        BD_TRY(tv_to_str(e, at, x, &s));
        int64_t cnt = 0;
        int in_word = 0;
        for (size_t i = 0; i < s.u.s.n;) {
            uint32_t c = tpl_utf8_next(s.u.s.p, s.u.s.n, &i);
            int w = c == '_' || tpl_is_alpha(c) || tpl_is_digit(c);
            if (w && !in_word) cnt++;
            in_word = w;
        }
        *out = tv_int(cnt);
        return BRAID_OK;
    }
    if (IS("batch") || IS("slice") || IS("groupby") || IS("format") || IS("pprint") || IS("random") ||
        IS("striptags") || IS("truncate") || IS("urlencode") || IS("urlize") || IS("wordwrap") || IS("xmlattr") ||
        IS("filesizeformat"))
        return unsupported(at, name, n);
    return tpl_fail(at, BRAID_E_INVALID, "TemplateRuntimeError: No filter named '%.*s' found.", (int)n, name);
#undef IS
}
