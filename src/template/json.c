/* json.c — the chat templates' own JSON: a strict reader (RFC 8259 and valid UTF-8 only; messages, tools and
 * extra variables arrive as JSON) and a writer whose output is Python's json.dumps byte for byte (what the
 * templates' tojson filter is in Hugging Face's environment). The library carries its own because the JSON
 * library (jansson) belongs to the server and tools only, and because json.dumps' exact spelling (", " and
 * ": " separators, float repr, which characters are escaped) is part of what has to match. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "template/tpl.h"
#include "tokenizer/unicode.h"

#define JSON_MAX_DEPTH 512

typedef struct jr {
    tpl_arena *a;
    const char *what;
    const char *p;
    size_t n, i;
} jr;

static braid_status jfail(const jr *r, const char *msg) {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < r->i && k < r->n; k++) {
        if (r->p[k] == '\n') { line++; col = 1; }
        else col++;
    }
    return bd_error(BRAID_E_FORMAT, "%s: invalid JSON at %zu:%zu: %s", r->what, line, col, msg);
}

static void skip_ws(jr *r) {
    while (r->i < r->n && (r->p[r->i] == ' ' || r->p[r->i] == '\t' || r->p[r->i] == '\n' || r->p[r->i] == '\r'))
        r->i++;
}

static int hex4(const char *p, uint32_t *v) {
    *v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p[k];
        int d = c >= '0' && c <= '9' ? c - '0' : (c | 32) >= 'a' && (c | 32) <= 'f' ? (c | 32) - 'a' + 10 : -1;
        if (d < 0) return 0;
        *v = *v * 16 + (uint32_t)d;
    }
    return 1;
}


/* Length of a well-formed UTF-8 sequence at p (no overlongs, no surrogates, <= U+10FFFF), 0 if malformed. */
static size_t utf8_valid(const unsigned char *p, size_t n) {
    unsigned char c = p[0];
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return n >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (n < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && p[1] < 0xA0) return 0;
        if (c == 0xED && p[1] >= 0xA0) return 0;
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (n < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) return 0;
        if (c == 0xF0 && p[1] < 0x90) return 0;
        if (c == 0xF4 && p[1] >= 0x90) return 0;
        return 4;
    }
    return 0;
}

static braid_status parse_string(jr *r, tv *out) {
    r->i++; /* opening quote */
    size_t start = r->i;
    /* the decoded string is never longer than the source span */
    size_t end = start;
    int escapes = 0;
    while (end < r->n && r->p[end] != '"') {
        if (r->p[end] == '\\') { escapes = 1; end += 2; }
        else end++;
    }
    if (end >= r->n) { r->i = r->n; return jfail(r, "unterminated string"); }
    char *o = tpl_alloc(r->a, end - start + 1);
    if (!o) return bd_error(BRAID_E_NOMEM, "%s: out of memory", r->what);
    size_t k = 0;
    while (r->i < end) {
        unsigned char c = (unsigned char)r->p[r->i];
        if (c < 0x20) return jfail(r, "control character in string");
        if (c == '\\') {
            char e = r->p[r->i + 1];
            r->i += 2;
            switch (e) {
            case '"': o[k++] = '"'; break;
            case '\\': o[k++] = '\\'; break;
            case '/': o[k++] = '/'; break;
            case 'b': o[k++] = '\b'; break;
            case 'f': o[k++] = '\f'; break;
            case 'n': o[k++] = '\n'; break;
            case 'r': o[k++] = '\r'; break;
            case 't': o[k++] = '\t'; break;
            case 'u': {
                uint32_t v, lo;
                if (r->i + 4 > end || !hex4(r->p + r->i, &v)) return jfail(r, "bad \\u escape");
                r->i += 4;
                if (v >= 0xD800 && v <= 0xDBFF) {
                    if (r->i + 6 > end || r->p[r->i] != '\\' || r->p[r->i + 1] != 'u' || !hex4(r->p + r->i + 2, &lo) ||
                        lo < 0xDC00 || lo > 0xDFFF)
                        return jfail(r, "unpaired surrogate in \\u escape");
                    r->i += 6;
                    v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
                } else if (v >= 0xDC00 && v <= 0xDFFF) {
                    return jfail(r, "unpaired surrogate in \\u escape");
                }
                k += tok_utf8_encode(v, (uint8_t *)o + k);
                break;
            }
            default: r->i -= 1; return jfail(r, "bad escape");
            }
            continue;
        }
        size_t len = utf8_valid((const unsigned char *)r->p + r->i, end - r->i);
        if (!len) return jfail(r, "invalid UTF-8");
        memcpy(o + k, r->p + r->i, len);
        k += len;
        r->i += len;
    }
    (void)escapes;
    r->i = end + 1;
    o[k] = 0;
    *out = tv_strn(o, k);
    return BRAID_OK;
}

static braid_status parse_number(jr *r, tv *out) {
    size_t s = r->i;
    int is_float = 0;
    if (r->p[r->i] == '-') r->i++;
    if (r->i >= r->n) return jfail(r, "bad number");
    if (r->p[r->i] == '0') r->i++;
    else if (r->p[r->i] >= '1' && r->p[r->i] <= '9') while (r->i < r->n && r->p[r->i] >= '0' && r->p[r->i] <= '9') r->i++;
    else return jfail(r, "bad number");
    if (r->i < r->n && r->p[r->i] == '.') {
        is_float = 1;
        r->i++;
        if (r->i >= r->n || r->p[r->i] < '0' || r->p[r->i] > '9') return jfail(r, "bad number");
        while (r->i < r->n && r->p[r->i] >= '0' && r->p[r->i] <= '9') r->i++;
    }
    if (r->i < r->n && (r->p[r->i] == 'e' || r->p[r->i] == 'E')) {
        is_float = 1;
        r->i++;
        if (r->i < r->n && (r->p[r->i] == '+' || r->p[r->i] == '-')) r->i++;
        if (r->i >= r->n || r->p[r->i] < '0' || r->p[r->i] > '9') return jfail(r, "bad number");
        while (r->i < r->n && r->p[r->i] >= '0' && r->p[r->i] <= '9') r->i++;
    }
    char buf[512];
    size_t len = r->i - s;
    if (len >= sizeof buf) return jfail(r, "number too long");
    memcpy(buf, r->p + s, len);
    buf[len] = 0;
    if (is_float) {
        *out = tv_float(strtod(buf, NULL));
        if (isinf(out->u.d)) return jfail(r, "number out of range");
        return BRAID_OK;
    }
    errno = 0;
    long long v = strtoll(buf, NULL, 10);
    if (errno == ERANGE) return jfail(r, "integer out of range (64 bits)");
    *out = tv_int(v);
    return BRAID_OK;
}

static braid_status parse_value(jr *r, int depth, tv *out) {
    skip_ws(r);
    if (r->i >= r->n) return jfail(r, "unexpected end of input");
    if (depth > JSON_MAX_DEPTH) return jfail(r, "nested too deeply");
    char c = r->p[r->i];
    if (c == '"') return parse_string(r, out);
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(r, out);
    if (c == '{') {
        r->i++;
        BD_TRY(tv_new_dict(r->a, 0, out));
        skip_ws(r);
        if (r->i < r->n && r->p[r->i] == '}') { r->i++; return BRAID_OK; }
        for (;;) {
            skip_ws(r);
            if (r->i >= r->n || r->p[r->i] != '"') return jfail(r, "expected a string key");
            tv k, v;
            BD_TRY(parse_string(r, &k));
            skip_ws(r);
            if (r->i >= r->n || r->p[r->i] != ':') return jfail(r, "expected ':'");
            r->i++;
            BD_TRY(parse_value(r, depth + 1, &v));
            BD_TRY(tv_dict_set(r->a, out->u.m, k, v));
            skip_ws(r);
            if (r->i < r->n && r->p[r->i] == ',') { r->i++; continue; }
            if (r->i < r->n && r->p[r->i] == '}') { r->i++; return BRAID_OK; }
            return jfail(r, "expected ',' or '}'");
        }
    }
    if (c == '[') {
        r->i++;
        BD_TRY(tv_new_list(r->a, 0, out));
        skip_ws(r);
        if (r->i < r->n && r->p[r->i] == ']') { r->i++; return BRAID_OK; }
        for (;;) {
            tv v;
            BD_TRY(parse_value(r, depth + 1, &v));
            BD_TRY(tv_list_push(r->a, out->u.l, v));
            skip_ws(r);
            if (r->i < r->n && r->p[r->i] == ',') { r->i++; continue; }
            if (r->i < r->n && r->p[r->i] == ']') { r->i++; return BRAID_OK; }
            return jfail(r, "expected ',' or ']'");
        }
    }
    if (r->n - r->i >= 4 && memcmp(r->p + r->i, "true", 4) == 0) { r->i += 4; *out = tv_bool(1); return BRAID_OK; }
    if (r->n - r->i >= 5 && memcmp(r->p + r->i, "false", 5) == 0) { r->i += 5; *out = tv_bool(0); return BRAID_OK; }
    if (r->n - r->i >= 4 && memcmp(r->p + r->i, "null", 4) == 0) { r->i += 4; *out = tv_none(); return BRAID_OK; }
    return jfail(r, "unexpected character");
}

braid_status tpl_json_parse(tpl_arena *a, const char *what, const char *p, size_t n, tv *out) {
    jr r = {.a = a, .what = what, .p = p, .n = n};
    BD_TRY(parse_value(&r, 0, out));
    skip_ws(&r);
    if (r.i != r.n) return jfail(&r, "extra data after the value");
    return BRAID_OK;
}

/* ---- writer ----------------------------------------------------------------------------------------------- */

static void dump_string(bd_strbuf *b, const char *p, size_t n, int ensure_ascii) {
    bd_strbuf_put(b, "\"", 1);
    size_t start = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)p[i];
        char esc[16];
        const char *r = NULL;
        size_t s = i;
        if (c == '"') r = "\\\"";
        else if (c == '\\') r = "\\\\";
        else if (c == '\n') r = "\\n";
        else if (c == '\r') r = "\\r";
        else if (c == '\t') r = "\\t";
        else if (c == '\b') r = "\\b";
        else if (c == '\f') r = "\\f";
        else if (c < 0x20) { snprintf(esc, sizeof esc, "\\u%04x", c); r = esc; }
        if (r) {
            bd_strbuf_put(b, p + start, s - start);
            bd_strbuf_puts(b, r);
            i++;
            start = i;
            continue;
        }
        if (c >= 0x80 && ensure_ascii) {
            uint32_t cp = tpl_utf8_next(p, n, &i);
            bd_strbuf_put(b, p + start, s - start);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            } else snprintf(esc, sizeof esc, "\\u%04x", cp);
            bd_strbuf_puts(b, esc);
            start = i;
            continue;
        }
        i++;
    }
    bd_strbuf_put(b, p + start, n - start);
    bd_strbuf_put(b, "\"", 1);
}

static void newline_indent(bd_strbuf *b, const tpl_json_opts *o, int level) {
    bd_strbuf_put(b, "\n", 1);
    for (int i = 0; i < level; i++) {
        if (o->indent_str) bd_strbuf_put(b, o->indent_str, o->indent_len);
        else for (int k = 0; k < o->indent; k++) bd_strbuf_put(b, " ", 1);
    }
}

static int has_indent(const tpl_json_opts *o) { return o->indent_str != NULL || o->indent >= 0; }

/* A dict key as json.dumps converts it (str as is; int, float, bool, None spelled out). */
static braid_status key_string(tpl_env *e, const tpl_node *at, tv k, tv *out) {
    char buf[64];
    switch (k.k) {
    case TV_STR: *out = k; return BRAID_OK;
    case TV_BOOL: *out = tv_cstr(k.u.i ? "true" : "false"); return BRAID_OK;
    case TV_NONE: *out = tv_cstr("null"); return BRAID_OK;
    case TV_INT: snprintf(buf, sizeof buf, "%" PRId64, k.u.i); break;
    case TV_FLOAT:
        if (isnan(k.u.d)) snprintf(buf, sizeof buf, "NaN");
        else if (isinf(k.u.d)) snprintf(buf, sizeof buf, k.u.d < 0 ? "-Infinity" : "Infinity");
        else tv_float_repr(k.u.d, buf, sizeof buf);
        break;
    default:
        return tpl_fail(at, BRAID_E_INVALID, "TypeError: keys must be str, int, float, bool or None, not %s",
                        tv_type_name(k));
    }
    char *p = tpl_strndup(e->a, buf, strlen(buf));
    if (!p) return bd_error(BRAID_E_NOMEM, "template: out of memory");
    *out = tv_strn(p, strlen(buf));
    return BRAID_OK;
}

static braid_status dump(tpl_env *e, const tpl_node *at, bd_strbuf *b, tv v, const tpl_json_opts *o, int level) {
    char buf[64];
    const char *isep = o->item_sep ? o->item_sep : has_indent(o) ? "," : ", ";
    const char *ksep = o->key_sep ? o->key_sep : ": ";
    if (level > JSON_MAX_DEPTH) return tpl_fail(at, BRAID_E_RANGE, "ValueError: value nested too deeply for tojson");
    if (b->n > e->out_limit) return tpl_fail(at, BRAID_E_RANGE, "output larger than the limit");
    switch (v.k) {
    case TV_NONE: bd_strbuf_puts(b, "null"); break;
    case TV_BOOL: bd_strbuf_puts(b, v.u.i ? "true" : "false"); break;
    case TV_INT: snprintf(buf, sizeof buf, "%" PRId64, v.u.i); bd_strbuf_puts(b, buf); break;
    case TV_FLOAT:
        if (isnan(v.u.d)) bd_strbuf_puts(b, "NaN");
        else if (isinf(v.u.d)) bd_strbuf_puts(b, v.u.d < 0 ? "-Infinity" : "Infinity");
        else { tv_float_repr(v.u.d, buf, sizeof buf); bd_strbuf_puts(b, buf); }
        break;
    case TV_STR: dump_string(b, v.u.s.p, v.u.s.n, o->ensure_ascii); break;
    case TV_LIST:
        if (v.f & (TVF_ITER | TVF_VIEW | TVF_RANGE)) goto unserializable;
        if (v.u.l->n == 0) { bd_strbuf_puts(b, "[]"); break; }
        bd_strbuf_puts(b, "[");
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) bd_strbuf_puts(b, isep);
            if (has_indent(o)) newline_indent(b, o, level + 1);
            BD_TRY(dump(e, at, b, v.u.l->v[i], o, level + 1));
        }
        if (has_indent(o)) newline_indent(b, o, level);
        bd_strbuf_puts(b, "]");
        break;
    case TV_DICT: {
        tdict *d = v.u.m;
        if (d->n == 0) { bd_strbuf_puts(b, "{}"); break; }
        size_t *order = tpl_alloc(e->a, d->n * sizeof(size_t));
        if (!order) return bd_error(BRAID_E_NOMEM, "template: out of memory");
        for (size_t i = 0; i < d->n; i++) order[i] = i;
        if (o->sort_keys) { /* insertion sort by Python's < on the keys (stable, as sorted() is) */
            for (size_t i = 1; i < d->n; i++) {
                size_t x = order[i], j = i;
                while (j > 0) {
                    int lt;
                    BD_TRY(tv_lt(at, d->k[x], d->k[order[j - 1]], &lt));
                    if (!lt) break;
                    order[j] = order[j - 1];
                    j--;
                }
                order[j] = x;
            }
        }
        bd_strbuf_puts(b, "{");
        for (size_t i = 0; i < d->n; i++) {
            tv ks = tv_none();
            BD_TRY(key_string(e, at, d->k[order[i]], &ks));
            if (i) bd_strbuf_puts(b, isep);
            if (has_indent(o)) newline_indent(b, o, level + 1);
            dump_string(b, ks.u.s.p, ks.u.s.n, o->ensure_ascii);
            bd_strbuf_puts(b, ksep);
            BD_TRY(dump(e, at, b, d->v[order[i]], o, level + 1));
        }
        if (has_indent(o)) newline_indent(b, o, level);
        bd_strbuf_puts(b, "}");
        break;
    }
    default:
    unserializable:
        return tpl_fail(at, BRAID_E_INVALID, "TypeError: Object of type %s is not JSON serializable",
                        tv_type_name(v));
    }
    return bd_strbuf_status(b);
}

braid_status tpl_json_dump(tpl_env *e, const tpl_node *at, bd_strbuf *b, tv v, const tpl_json_opts *o) {
    return dump(e, at, b, v, o, 0);
}
