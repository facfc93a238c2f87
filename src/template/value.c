/* value.c — the template values' Python semantics: the arena they live in, lists and dicts, truthiness,
 * ==, <, len(), iter(), str() and repr() (Python's exact spelling of floats, strings, lists and dicts), and
 * markupsafe's escape. Strings are UTF-8 and measured in code points wherever Python measures characters. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "template/tpl.h"
#include "tokenizer/unicode.h"

/* ---- arena ------------------------------------------------------------------------------------------------ */

struct tpl_chunk {
    tpl_chunk *next;
    size_t cap;
    _Alignas(16) unsigned char data[];
};

void *tpl_alloc(tpl_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    if (!a->head || a->used + n > a->cap) {
        size_t cap = n > 65536 ? n : 65536;
        if (a->total + cap > a->limit) return NULL;
        tpl_chunk *c = bd_malloc(sizeof(tpl_chunk) + cap);
        if (!c) return NULL;
        c->next = a->head;
        c->cap = cap;
        a->head = c;
        a->used = 0;
        a->cap = cap;
        a->total += cap;
    }
    void *p = a->head->data + a->used;
    a->used += n;
    memset(p, 0, n);
    return p;
}

char *tpl_strndup(tpl_arena *a, const char *s, size_t n) {
    char *p = tpl_alloc(a, n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}

void tpl_arena_free(tpl_arena *a) {
    tpl_chunk *c = a->head;
    while (c) {
        tpl_chunk *next = c->next;
        bd_free(c);
        c = next;
    }
    a->head = NULL;
    a->used = a->cap = a->total = 0;
}

braid_status tpl_fail(const tpl_node *n, braid_status s, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n) return bd_error(s, "template:%u:%u: %s", (unsigned)n->line, (unsigned)n->col, msg);
    return bd_error(s, "template: %s", msg);
}

/* ---- constructors ----------------------------------------------------------------------------------------- */

tv tv_cstr(const char *s) { return tv_strn(s, strlen(s)); }

tv tv_undef_named(const char *p, size_t n) {
    tv v = tv_undef();
    v.u.s.p = p;
    v.u.s.n = n;
    return v;
}

static braid_status nomem(void) { return bd_error(BRAID_E_NOMEM, "template: out of memory (arena limit)"); }

braid_status tv_new_list(tpl_arena *a, size_t cap, tv *out) {
    tlist *l = tpl_alloc(a, sizeof *l);
    if (!l) return nomem();
    if (cap) {
        l->v = tpl_alloc(a, cap * sizeof(tv));
        if (!l->v) return nomem();
        l->cap = cap;
    }
    *out = (tv){.k = TV_LIST};
    out->u.l = l;
    return BRAID_OK;
}

braid_status tv_new_dict(tpl_arena *a, size_t cap, tv *out) {
    tdict *d = tpl_alloc(a, sizeof *d);
    if (!d) return nomem();
    if (cap) {
        d->k = tpl_alloc(a, cap * sizeof(tv));
        d->v = tpl_alloc(a, cap * sizeof(tv));
        if (!d->k || !d->v) return nomem();
        d->cap = cap;
    }
    *out = (tv){.k = TV_DICT};
    out->u.m = d;
    return BRAID_OK;
}

braid_status tv_list_push(tpl_arena *a, tlist *l, tv x) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        if (cap > ((size_t)1 << 40) / sizeof(tv)) return nomem();
        tv *v = tpl_alloc(a, cap * sizeof(tv));
        if (!v) return nomem();
        if (l->n) memcpy(v, l->v, l->n * sizeof(tv));
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
    return BRAID_OK;
}

braid_status tv_pair(tpl_arena *a, tv k, tv v, tv *out) {
    BD_TRY(tv_new_list(a, 2, out));
    out->f = TVF_TUPLE;
    out->u.l->v[0] = k;
    out->u.l->v[1] = v;
    out->u.l->n = 2;
    return BRAID_OK;
}

int tv_is_hashable(tv v) {
    switch (v.k) {
    case TV_NONE: case TV_BOOL: case TV_INT: case TV_FLOAT: case TV_STR: return 1;
    case TV_LIST:
        if (!(v.f & TVF_TUPLE)) return 0;
        for (size_t i = 0; i < v.u.l->n; i++)
            if (!tv_is_hashable(v.u.l->v[i])) return 0;
        return 1;
    default: return 0;
    }
}

tv *tv_dict_get(const tdict *d, tv k) {
    for (size_t i = 0; i < d->n; i++)
        if (tv_eq(d->k[i], k)) return &d->v[i];
    return NULL;
}

tv *tv_dict_gets(const tdict *d, const char *key, size_t n) {
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].k == TV_STR && d->k[i].u.s.n == n && memcmp(d->k[i].u.s.p, key, n) == 0) return &d->v[i];
    return NULL;
}

braid_status tv_dict_set(tpl_arena *a, tdict *d, tv k, tv x) {
    tv *slot = tv_dict_get(d, k);
    if (slot) {
        *slot = x;
        return BRAID_OK;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        tv *nk = tpl_alloc(a, cap * sizeof(tv)), *nv = tpl_alloc(a, cap * sizeof(tv));
        if (!nk || !nv) return nomem();
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof(tv));
            memcpy(nv, d->v, d->n * sizeof(tv));
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n] = x;
    d->n++;
    return BRAID_OK;
}

/* ---- semantics -------------------------------------------------------------------------------------------- */

int tv_truthy(tv v) {
    switch (v.k) {
    case TV_UNDEF: case TV_NONE: return 0;
    case TV_BOOL: case TV_INT: return v.u.i != 0;
    case TV_FLOAT: return v.u.d != 0.0;
    case TV_STR: return v.u.s.n != 0;
    case TV_LIST: return (v.f & TVF_ITER) ? 1 : v.u.l->n != 0;
    case TV_DICT: return v.u.m->n != 0;
    default: return 1;
    }
}

int tv_is_number(tv v) { return v.k == TV_INT || v.k == TV_FLOAT || v.k == TV_BOOL; }
double tv_num(tv v) { return v.k == TV_FLOAT ? v.u.d : (double)v.u.i; }

int tv_eq(tv a, tv b) {
    if (tv_is_number(a) && tv_is_number(b)) {
        if (a.k != TV_FLOAT && b.k != TV_FLOAT) return a.u.i == b.u.i;
        return tv_num(a) == tv_num(b);
    }
    if (a.k != b.k) return 0;
    switch (a.k) {
    case TV_UNDEF: case TV_NONE: return 1;
    case TV_STR: return a.u.s.n == b.u.s.n && memcmp(a.u.s.p, b.u.s.p, a.u.s.n) == 0;
    case TV_LIST:
        if ((a.f & (TVF_TUPLE | TVF_ITER | TVF_VIEW)) != (b.f & (TVF_TUPLE | TVF_ITER | TVF_VIEW))) return 0;
        if (a.f & TVF_ITER) return a.u.l == b.u.l;
        if (a.u.l->n != b.u.l->n) return 0;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!tv_eq(a.u.l->v[i], b.u.l->v[i])) return 0;
        return 1;
    case TV_DICT:
        if (a.u.m->n != b.u.m->n) return 0;
        for (size_t i = 0; i < a.u.m->n; i++) {
            tv *o = tv_dict_get(b.u.m, a.u.m->k[i]);
            if (!o || !tv_eq(a.u.m->v[i], *o)) return 0;
        }
        return 1;
    case TV_NS: case TV_CYCLER: case TV_JOINER: return a.u.m == b.u.m;
    case TV_MACRO: return a.u.mac == b.u.mac;
    case TV_LOOP: return a.u.loop == b.u.loop;
    case TV_FUNC: return a.id == b.id;
    case TV_METHOD: return a.id == b.id && a.u.self == b.u.self;
    default: return 0;
    }
}

const char *tv_type_name(tv v) {
    switch (v.k) {
    case TV_UNDEF: return "Undefined";
    case TV_NONE: return "NoneType";
    case TV_BOOL: return "bool";
    case TV_INT: return "int";
    case TV_FLOAT: return "float";
    case TV_STR: return (v.f & TVF_MARKUP) ? "Markup" : "str";
    case TV_LIST:
        if (v.f & TVF_TUPLE) return "tuple";
        if (v.f & TVF_RANGE) return "range";
        if (v.f & TVF_VIEW) return "dict_items";
        if (v.f & TVF_ITER) return "generator";
        return "list";
    case TV_DICT: return "dict";
    case TV_NS: return "Namespace";
    case TV_MACRO: return "Macro";
    case TV_FUNC: return "builtin_function_or_method";
    case TV_METHOD: return "builtin_function_or_method";
    case TV_LOOP: return "LoopContext";
    case TV_CYCLER: return "Cycler";
    case TV_JOINER: return "Joiner";
    default: return "object";
    }
}

static int cmp_bytes(tv a, tv b) {
    size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
    int c = n ? memcmp(a.u.s.p, b.u.s.p, n) : 0;
    if (c) return c;
    return a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n;
}

braid_status tv_lt(const tpl_node *at, tv a, tv b, int *lt) {
    if (tv_is_number(a) && tv_is_number(b)) {
        if (a.k != TV_FLOAT && b.k != TV_FLOAT) *lt = a.u.i < b.u.i;
        else *lt = tv_num(a) < tv_num(b);
        return BRAID_OK;
    }
    if (a.k == TV_STR && b.k == TV_STR) { /* UTF-8 byte order is code point order */
        *lt = cmp_bytes(a, b) < 0;
        return BRAID_OK;
    }
    if (a.k == TV_LIST && b.k == TV_LIST && !((a.f | b.f) & (TVF_ITER | TVF_VIEW)) &&
        (a.f & TVF_TUPLE) == (b.f & TVF_TUPLE)) {
        size_t n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (size_t i = 0; i < n; i++) {
            if (tv_eq(a.u.l->v[i], b.u.l->v[i])) continue;
            return tv_lt(at, a.u.l->v[i], b.u.l->v[i], lt);
        }
        *lt = a.u.l->n < b.u.l->n;
        return BRAID_OK;
    }
    if (a.k == TV_UNDEF || b.k == TV_UNDEF)
        return tpl_fail(at, BRAID_E_INVALID, "UndefinedError: '%.*s' is undefined",
                        (int)(a.k == TV_UNDEF ? a.u.s.n : b.u.s.n), a.k == TV_UNDEF ? a.u.s.p : b.u.s.p);
    return tpl_fail(at, BRAID_E_INVALID, "TypeError: '<' not supported between instances of '%s' and '%s'",
                    tv_type_name(a), tv_type_name(b));
}

/* ---- UTF-8 ------------------------------------------------------------------------------------------------ */

uint32_t tpl_utf8_next(const char *p, size_t n, size_t *i) {
    const unsigned char *s = (const unsigned char *)p;
    unsigned char c = s[*i];
    if (c < 0x80 || *i + 1 >= n) { (*i)++; return c; }
    if (c < 0xE0 && *i + 1 < n) { uint32_t cp = ((uint32_t)(c & 0x1F) << 6) | (s[*i + 1] & 0x3F); *i += 2; return cp; }
    if (c < 0xF0 && *i + 2 < n) {
        uint32_t cp = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[*i + 1] & 0x3F) << 6) | (s[*i + 2] & 0x3F);
        *i += 3;
        return cp;
    }
    if (*i + 3 < n) {
        uint32_t cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[*i + 1] & 0x3F) << 12) |
                      ((uint32_t)(s[*i + 2] & 0x3F) << 6) | (s[*i + 3] & 0x3F);
        *i += 4;
        return cp;
    }
    (*i)++;
    return c;
}

/* Counting and offsets step exactly as tpl_utf8_next does, so that for any bytes (a template source or a
 * value need not be valid UTF-8) a count sizes the list an iteration fills and an offset lands where the
 * iteration would be. */
size_t tpl_utf8_count(const char *p, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; c++) tpl_utf8_next(p, n, &i);
    return c;
}

size_t tpl_utf8_offset(const char *p, size_t n, int64_t cp) {
    size_t i = 0;
    for (int64_t c = 0; i < n && c < cp; c++) tpl_utf8_next(p, n, &i);
    return i;
}

int tpl_py_isspace(uint32_t cp) {
    if (cp <= 0x20) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
    switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000: return 1;
    default: return cp >= 0x2000 && cp <= 0x200A;
    }
}

uint32_t tpl_py_lower(uint32_t cp) {
    if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    return tok_uc_map_get(tok_uc_lower, tok_uc_n_lower, cp);
}

uint32_t tpl_py_upper(uint32_t cp) {
    if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
    /* the inverse of the simple lowercase map (one linear scan; upper() of non-ASCII text is rare here) */
    for (unsigned i = 0; i < tok_uc_n_lower; i++)
        if (tok_uc_lower[i].to == cp && tok_uc_lower[i].from != cp) return tok_uc_lower[i].from;
    return cp;
}

int tpl_is_alpha(uint32_t cp) {
    if (cp < 0x80) return (cp | 32) >= 'a' && (cp | 32) <= 'z';
    tok_unicode_init();
    return tok_uc_cat(cp) == TOK_UC_LETTER;
}

int tpl_is_digit(uint32_t cp) { return cp >= '0' && cp <= '9'; }

/* ---- str() and repr() ------------------------------------------------------------------------------------- */

void tv_float_repr(double d, char *buf, size_t cap) {
    if (isnan(d)) { snprintf(buf, cap, "nan"); return; }
    if (isinf(d)) { snprintf(buf, cap, d < 0 ? "-inf" : "inf"); return; }
    if (d == 0) { snprintf(buf, cap, signbit(d) ? "-0.0" : "0.0"); return; }
    /* shortest digits that round-trip, then Python's layout: exponent form when exp < -4 or exp >= 16 */
    char tmp[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, d);
        if (strtod(tmp, NULL) == d) break;
    }
    /* tmp = [-]D.DDDDe[+-]XX */
    char digits[24];
    int nd = 0, neg = tmp[0] == '-';
    const char *q = tmp + neg;
    for (; *q && *q != 'e'; q++)
        if (*q != '.') digits[nd++] = *q;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    int exp = atoi(q + 1);
    char *o = buf;
    size_t left = cap;
#define PUT(...) do { int w_ = snprintf(o, left, __VA_ARGS__); if (w_ < 0 || (size_t)w_ >= left) return; o += w_; left -= (size_t)w_; } while (0)
    if (neg) PUT("-");
    if (exp < -4 || exp >= 16) {
        PUT("%c", digits[0]);
        if (nd > 1) PUT(".%s", digits + 1);
        PUT("e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    } else if (exp < 0) {
        PUT("0.");
        for (int i = 0; i < -exp - 1; i++) PUT("0");
        PUT("%s", digits);
    } else {
        for (int i = 0; i <= exp; i++) PUT("%c", i < nd ? digits[i] : '0');
        PUT(".");
        if (nd > exp + 1) PUT("%s", digits + exp + 1);
        else PUT("0");
    }
#undef PUT
}

static void repr_string(bd_strbuf *b, const char *p, size_t n) {
    int has_sq = memchr(p, '\'', n) != NULL, has_dq = memchr(p, '"', n) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    bd_strbuf_put(b, &q, 1);
    tok_unicode_init();
    for (size_t i = 0; i < n;) {
        size_t s = i;
        uint32_t c = tpl_utf8_next(p, n, &i);
        char esc[16];
        if (c == (uint32_t)q || c == '\\') { esc[0] = '\\'; esc[1] = (char)c; bd_strbuf_put(b, esc, 2); }
        else if (c == '\n') bd_strbuf_puts(b, "\\n");
        else if (c == '\r') bd_strbuf_puts(b, "\\r");
        else if (c == '\t') bd_strbuf_puts(b, "\\t");
        else if (c < 0x20 || c == 0x7F) { snprintf(esc, sizeof esc, "\\x%02x", c); bd_strbuf_puts(b, esc); }
        else if (c >= 0x80) {
            int cat = tok_uc_cat(c);
            int printable = !(cat == TOK_UC_CONTROL || cat == TOK_UC_UNDEF || cat == TOK_UC_SEPARATOR);
            if (printable) bd_strbuf_put(b, p + s, i - s);
            else {
                if (c <= 0xFF) snprintf(esc, sizeof esc, "\\x%02x", c);
                else if (c <= 0xFFFF) snprintf(esc, sizeof esc, "\\u%04x", c);
                else snprintf(esc, sizeof esc, "\\U%08x", c);
                bd_strbuf_puts(b, esc);
            }
        } else bd_strbuf_put(b, p + s, i - s);
    }
    bd_strbuf_put(b, &q, 1);
}

static braid_status str_or_repr(tpl_env *e, const tpl_node *at, bd_strbuf *b, tv v, int repr, int depth) {
    char buf[64];
    if (depth > 200) return tpl_fail(at, BRAID_E_RANGE, "RecursionError: value nested too deeply to print");
    switch (v.k) {
    case TV_UNDEF:
        if (repr) bd_strbuf_puts(b, "Undefined");
        return BRAID_OK;
    case TV_NONE: bd_strbuf_puts(b, "None"); return BRAID_OK;
    case TV_BOOL: bd_strbuf_puts(b, v.u.i ? "True" : "False"); return BRAID_OK;
    case TV_INT: snprintf(buf, sizeof buf, "%" PRId64, v.u.i); bd_strbuf_puts(b, buf); return BRAID_OK;
    case TV_FLOAT: tv_float_repr(v.u.d, buf, sizeof buf); bd_strbuf_puts(b, buf); return BRAID_OK;
    case TV_STR:
        if (!repr) bd_strbuf_put(b, v.u.s.p, v.u.s.n);
        else {
            if (v.f & TVF_MARKUP) bd_strbuf_puts(b, "Markup(");
            repr_string(b, v.u.s.p, v.u.s.n);
            if (v.f & TVF_MARKUP) bd_strbuf_puts(b, ")");
        }
        return BRAID_OK;
    case TV_LIST: {
        if (v.f & (TVF_ITER | TVF_RANGE))
            return tpl_fail(at, BRAID_E_UNSUPPORTED, "printing a %s object (Python prints its address)",
                            tv_type_name(v));
        int tuple = (v.f & TVF_TUPLE) != 0;
        if (v.f & TVF_VIEW) bd_strbuf_puts(b, v.id == 1 ? "dict_keys(" : v.id == 2 ? "dict_values(" : "dict_items(");
        bd_strbuf_puts(b, tuple ? "(" : "[");
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) bd_strbuf_puts(b, ", ");
            BD_TRY(str_or_repr(e, at, b, v.u.l->v[i], 1, depth + 1));
        }
        if (tuple && v.u.l->n == 1) bd_strbuf_puts(b, ",");
        bd_strbuf_puts(b, tuple ? ")" : "]");
        if (v.f & TVF_VIEW) bd_strbuf_puts(b, ")");
        return bd_strbuf_status(b);
    }
    case TV_DICT:
        bd_strbuf_puts(b, "{");
        for (size_t i = 0; i < v.u.m->n; i++) {
            if (i) bd_strbuf_puts(b, ", ");
            BD_TRY(str_or_repr(e, at, b, v.u.m->k[i], 1, depth + 1));
            bd_strbuf_puts(b, ": ");
            BD_TRY(str_or_repr(e, at, b, v.u.m->v[i], 1, depth + 1));
        }
        bd_strbuf_puts(b, "}");
        return bd_strbuf_status(b);
    case TV_NS:
        bd_strbuf_puts(b, "<Namespace {");
        for (size_t i = 0; i < v.u.m->n; i++) {
            if (i) bd_strbuf_puts(b, ", ");
            BD_TRY(str_or_repr(e, at, b, v.u.m->k[i], 1, depth + 1));
            bd_strbuf_puts(b, ": ");
            BD_TRY(str_or_repr(e, at, b, v.u.m->v[i], 1, depth + 1));
        }
        bd_strbuf_puts(b, "}>");
        return bd_strbuf_status(b);
    default:
        return tpl_fail(at, BRAID_E_UNSUPPORTED, "printing a %s object (Python prints its address)",
                        tv_type_name(v));
    }
}

braid_status tv_str(tpl_env *e, const tpl_node *at, bd_strbuf *b, tv v) { return str_or_repr(e, at, b, v, 0, 0); }
braid_status tv_repr(tpl_env *e, const tpl_node *at, bd_strbuf *b, tv v) { return str_or_repr(e, at, b, v, 1, 0); }

braid_status tv_from_buf(tpl_env *e, bd_strbuf *b, tv *out) {
    BD_TRY(bd_strbuf_status(b));
    char *p = tpl_strndup(e->a, b->p ? b->p : "", b->n);
    if (!p) return nomem();
    *out = tv_strn(p, b->n);
    return BRAID_OK;
}

braid_status tv_to_str(tpl_env *e, const tpl_node *at, tv v, tv *out) {
    if (v.k == TV_STR) { *out = v; return BRAID_OK; }
    bd_strbuf b = {0};
    braid_status s = tv_str(e, at, &b, v);
    if (s == BRAID_OK) s = tv_from_buf(e, &b, out);
    bd_strbuf_free(&b);
    return s;
}

braid_status tv_escape(tpl_env *e, const tpl_node *at, bd_strbuf *b, tv v) {
    if (v.k == TV_STR && (v.f & TVF_MARKUP)) {
        bd_strbuf_put(b, v.u.s.p, v.u.s.n);
        return bd_strbuf_status(b);
    }
    tv s;
    BD_TRY(tv_to_str(e, at, v, &s));
    size_t start = 0;
    for (size_t i = 0; i < s.u.s.n; i++) {
        const char *r = NULL;
        switch (s.u.s.p[i]) {
        case '&': r = "&amp;"; break;
        case '<': r = "&lt;"; break;
        case '>': r = "&gt;"; break;
        case '"': r = "&#34;"; break;
        case '\'': r = "&#39;"; break;
        default: continue;
        }
        bd_strbuf_put(b, s.u.s.p + start, i - start);
        bd_strbuf_puts(b, r);
        start = i + 1;
    }
    bd_strbuf_put(b, s.u.s.p + start, s.u.s.n - start);
    return bd_strbuf_status(b);
}

/* ---- len() and iter() ------------------------------------------------------------------------------------- */

braid_status tv_len(const tpl_node *at, tv v, int64_t *n) {
    switch (v.k) {
    case TV_STR: *n = (int64_t)tpl_utf8_count(v.u.s.p, v.u.s.n); return BRAID_OK;
    case TV_LIST:
        if (v.f & TVF_ITER) break;
        *n = (int64_t)v.u.l->n;
        return BRAID_OK;
    case TV_DICT: *n = (int64_t)v.u.m->n; return BRAID_OK;
    case TV_UNDEF: *n = 0; return BRAID_OK;
    default: break;
    }
    return tpl_fail(at, BRAID_E_INVALID, "TypeError: object of type '%s' has no len()", tv_type_name(v));
}

braid_status tv_iterate(tpl_env *e, const tpl_node *at, tv v, tv *out) {
    switch (v.k) {
    case TV_UNDEF:
        return tv_new_list(e->a, 0, out);
    case TV_LIST:
        if (v.f & TVF_ITER) {
            if (v.u.l->consumed) return tv_new_list(e->a, 0, out);
            v.u.l->consumed = 1;
        }
        *out = v;
        out->f = 0;
        return BRAID_OK;
    case TV_DICT: {
        BD_TRY(tv_new_list(e->a, v.u.m->n, out));
        for (size_t i = 0; i < v.u.m->n; i++) out->u.l->v[i] = v.u.m->k[i];
        out->u.l->n = v.u.m->n;
        return BRAID_OK;
    }
    case TV_STR: {
        size_t n = tpl_utf8_count(v.u.s.p, v.u.s.n);
        BD_TRY(tv_new_list(e->a, n, out));
        size_t i = 0;
        while (i < v.u.s.n) {
            size_t s = i;
            tpl_utf8_next(v.u.s.p, v.u.s.n, &i);
            tv c = tv_strn(v.u.s.p + s, i - s);
            c.f = v.f & TVF_MARKUP;
            out->u.l->v[out->u.l->n++] = c;
        }
        return BRAID_OK;
    }
    default:
        return tpl_fail(at, BRAID_E_INVALID, "TypeError: '%s' object is not iterable", tv_type_name(v));
    }
}
