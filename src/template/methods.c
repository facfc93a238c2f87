/* methods.c — Python's methods on str, dict and list that templates call (.strip(), .split(), .get(),
 * .items(), .format(), ...), the loop object's cycle()/changed(), and the global functions of Hugging Face's
 * environment: range, dict, namespace, cycler, joiner, raise_exception, strftime_now. Results follow CPython
 * (split without a separator drops empty pieces, find counts characters, format applies the format
 * mini-language). Methods that change a list or dict never get here: the immutable sandbox refuses them
 * (filters.c makes them an "unsafe" Undefined that raises SecurityError when called). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/status.h"
#include "template/tpl.h"

static braid_status oom(void) { return bd_error(BRAID_E_NOMEM, "template: out of memory"); }

enum { F_RANGE = 1, F_DICT, F_NAMESPACE, F_RAISE, F_STRFTIME, F_CYCLER, F_JOINER, F_LIPSUM, F_JOINER_CALL };

int tpl_global_func(const char *name, size_t n) {
    static const struct { const char *name; int id; } G[] = {
        {"range", F_RANGE}, {"dict", F_DICT}, {"namespace", F_NAMESPACE}, {"raise_exception", F_RAISE},
        {"strftime_now", F_STRFTIME}, {"cycler", F_CYCLER}, {"joiner", F_JOINER}, {"lipsum", F_LIPSUM}};
    for (size_t i = 0; i < sizeof G / sizeof G[0]; i++)
        if (strlen(G[i].name) == n && memcmp(G[i].name, name, n) == 0) return G[i].id;
    return 0;
}

static braid_status need_str(const tpl_node *at, const char *what, tv v) {
    if (v.k == TV_STR) return BRAID_OK;
    return tpl_fail(at, BRAID_E_INVALID, "TypeError: %s must be str, not %s", what, tv_type_name(v));
}

static braid_status need_int(const tpl_node *at, const char *what, tv v, int64_t *out) {
    if (v.k == TV_INT || v.k == TV_BOOL) { *out = v.u.i; return BRAID_OK; }
    return tpl_fail(at, BRAID_E_INVALID, "TypeError: %s must be an integer, not %s", what, tv_type_name(v));
}

static braid_status nargs_between(const tpl_node *at, const char *name, tpl_args *a, size_t lo, size_t hi) {
    if (a->nkw) return tpl_fail(at, BRAID_E_INVALID, "TypeError: %s() takes no keyword arguments", name);
    if (a->npos < lo || a->npos > hi)
        return tpl_fail(at, BRAID_E_INVALID, "TypeError: %s() takes %zu to %zu arguments (%zu given)", name, lo, hi,
                        a->npos);
    return BRAID_OK;
}

static braid_status buf_value(tpl_env *e, bd_strbuf *b, uint8_t flags, tv *out) {
    braid_status s = tv_from_buf(e, b, out);
    bd_strbuf_free(b);
    if (s == BRAID_OK) out->f = flags;
    return s;
}

/* ---- strip, split ----------------------------------------------------------------------------------------- */

static int in_chars(uint32_t c, const tv *chars) {
    if (!chars) return tpl_py_isspace(c);
    for (size_t i = 0; i < chars->u.s.n;)
        if (tpl_utf8_next(chars->u.s.p, chars->u.s.n, &i) == c) return 1;
    return 0;
}

braid_status tpl_strip(tpl_env *e, tv s, tv *chars, int left, int right, tv *out) {
    (void)e;
    size_t a = 0, b = s.u.s.n;
    if (left)
        while (a < b) {
            size_t i = a;
            uint32_t c = tpl_utf8_next(s.u.s.p, b, &i);
            if (!in_chars(c, chars)) break;
            a = i;
        }
    if (right)
        while (b > a) {
            size_t k = b - 1;
            while (k > a && ((unsigned char)s.u.s.p[k] & 0xC0) == 0x80) k--;
            size_t i = k;
            uint32_t c = tpl_utf8_next(s.u.s.p, b, &i);
            if (!in_chars(c, chars)) break;
            b = k;
        }
    *out = tv_strn(s.u.s.p + a, b - a);
    out->f = s.f & TVF_MARKUP;
    return BRAID_OK;
}

static braid_status push_piece(tpl_env *e, tv list, tv s, size_t a, size_t b) {
    tv piece = tv_strn(s.u.s.p + a, b - a);
    piece.f = s.f & TVF_MARKUP;
    return tv_list_push(e->a, list.u.l, piece);
}

static braid_status split(tpl_env *e, const tpl_node *at, tv s, tpl_args *a, int from_right, tv *out) {
    tv *sep = tpl_arg(a, 0, "sep"), *maxv = tpl_arg(a, 1, "maxsplit");
    int64_t maxsplit = -1;
    if (maxv) BD_TRY(need_int(at, "maxsplit", *maxv, &maxsplit));
    BD_TRY(tv_new_list(e->a, 0, out));
    const char *p = s.u.s.p;
    size_t n = s.u.s.n;
    if (!sep || sep->k == TV_NONE) { /* runs of whitespace, no empty pieces */
        if (!from_right) {
            size_t i = 0;
            int64_t done = 0;
            for (;;) {
                while (i < n) { size_t j = i; if (!tpl_py_isspace(tpl_utf8_next(p, n, &j))) break; i = j; }
                if (i >= n) break;
                if (maxsplit >= 0 && done >= maxsplit) {
                    size_t end = n;
                    while (end > i) { /* the remainder keeps its text but not trailing whitespace */
                        size_t k = end - 1;
                        while (k > i && ((unsigned char)p[k] & 0xC0) == 0x80) k--;
                        size_t j = k;
                        if (!tpl_py_isspace(tpl_utf8_next(p, n, &j))) break;
                        end = k;
                    }
                    BD_TRY(push_piece(e, *out, s, i, end));
                    break;
                }
                size_t st = i;
                while (i < n) { size_t j = i; if (tpl_py_isspace(tpl_utf8_next(p, n, &j))) break; i = j; }
                BD_TRY(push_piece(e, *out, s, st, i));
                done++;
            }
            return BRAID_OK;
        }
        /* rsplit(None): collect from the right, then reverse */
        tv tmp;
        BD_TRY(tv_new_list(e->a, 0, &tmp));
        size_t i = n;
        int64_t done = 0;
        for (;;) {
            while (i > 0) {
                size_t k = i - 1;
                while (k > 0 && ((unsigned char)p[k] & 0xC0) == 0x80) k--;
                size_t j = k;
                if (!tpl_py_isspace(tpl_utf8_next(p, n, &j))) break;
                i = k;
            }
            if (i == 0) break;
            if (maxsplit >= 0 && done >= maxsplit) {
                size_t st = 0;
                while (st < i) { size_t j = st; if (!tpl_py_isspace(tpl_utf8_next(p, n, &j))) break; st = j; }
                BD_TRY(push_piece(e, tmp, s, st, i));
                break;
            }
            size_t end = i;
            while (i > 0) {
                size_t k = i - 1;
                while (k > 0 && ((unsigned char)p[k] & 0xC0) == 0x80) k--;
                size_t j = k;
                if (tpl_py_isspace(tpl_utf8_next(p, n, &j))) break;
                i = k;
            }
            BD_TRY(push_piece(e, tmp, s, i, end));
            done++;
        }
        for (size_t k = tmp.u.l->n; k > 0; k--) BD_TRY(tv_list_push(e->a, out->u.l, tmp.u.l->v[k - 1]));
        return BRAID_OK;
    }
    BD_TRY(need_str(at, "separator", *sep));
    size_t m = sep->u.s.n;
    if (m == 0) return tpl_fail(at, BRAID_E_INVALID, "ValueError: empty separator");
    if (!from_right) {
        size_t st = 0;
        int64_t done = 0;
        for (size_t i = 0; i + m <= n;) {
            if ((maxsplit < 0 || done < maxsplit) && memcmp(p + i, sep->u.s.p, m) == 0) {
                BD_TRY(push_piece(e, *out, s, st, i));
                i += m;
                st = i;
                done++;
            } else i++;
        }
        return push_piece(e, *out, s, st, n);
    }
    tv tmp;
    BD_TRY(tv_new_list(e->a, 0, &tmp));
    size_t end = n;
    int64_t done = 0;
    for (size_t i = n; i >= m && i > 0;) {
        if ((maxsplit < 0 || done < maxsplit) && memcmp(p + i - m, sep->u.s.p, m) == 0) {
            BD_TRY(push_piece(e, tmp, s, i, end));
            i -= m;
            end = i;
            done++;
        } else i--;
    }
    BD_TRY(push_piece(e, tmp, s, 0, end));
    for (size_t k = tmp.u.l->n; k > 0; k--) BD_TRY(tv_list_push(e->a, out->u.l, tmp.u.l->v[k - 1]));
    return BRAID_OK;
}

static braid_status replace(tpl_env *e, const tpl_node *at, tv s, tv old, tv nw, int64_t count, tv *out) {
    BD_TRY(need_str(at, "replace() argument 1", old));
    BD_TRY(need_str(at, "replace() argument 2", nw));
    bd_strbuf b = {0};
    int64_t done = 0;
    if (old.u.s.n == 0) { /* inserts between characters */
        size_t i = 0;
        if (count != 0) { bd_strbuf_put(&b, nw.u.s.p, nw.u.s.n); done++; }
        while (i < s.u.s.n) {
            size_t st = i;
            tpl_utf8_next(s.u.s.p, s.u.s.n, &i);
            bd_strbuf_put(&b, s.u.s.p + st, i - st);
            if (count < 0 || done < count) { bd_strbuf_put(&b, nw.u.s.p, nw.u.s.n); done++; }
            if (b.n > e->out_limit) { bd_strbuf_free(&b); return tpl_fail(at, BRAID_E_RANGE, "string larger than the output limit"); }
        }
        return buf_value(e, &b, s.f & TVF_MARKUP, out);
    }
    size_t st = 0;
    for (size_t i = 0; i + old.u.s.n <= s.u.s.n;) {
        if ((count < 0 || done < count) && memcmp(s.u.s.p + i, old.u.s.p, old.u.s.n) == 0) {
            bd_strbuf_put(&b, s.u.s.p + st, i - st);
            bd_strbuf_put(&b, nw.u.s.p, nw.u.s.n);
            i += old.u.s.n;
            st = i;
            done++;
            if (b.n > e->out_limit) { bd_strbuf_free(&b); return tpl_fail(at, BRAID_E_RANGE, "string larger than the output limit"); }
        } else i++;
    }
    bd_strbuf_put(&b, s.u.s.p + st, s.u.s.n - st);
    return buf_value(e, &b, s.f & TVF_MARKUP, out);
}

static braid_status map_case(tpl_env *e, tv s, int mode, tv *out) {
    /* mode 0 lower, 1 upper, 2 capitalize, 3 swapcase */
    bd_strbuf b = {0};
    int first = 1;
    for (size_t i = 0; i < s.u.s.n;) {
        uint32_t c = tpl_utf8_next(s.u.s.p, s.u.s.n, &i);
        uint32_t r = mode == 0 ? tpl_py_lower(c)
                   : mode == 1 ? tpl_py_upper(c)
                   : mode == 2 ? (first ? tpl_py_upper(c) : tpl_py_lower(c))
                   : (tpl_py_lower(c) != c ? tpl_py_lower(c) : tpl_py_upper(c));
        bd_strbuf_put_cp(&b, r);
        first = 0;
    }
    return buf_value(e, &b, s.f & TVF_MARKUP, out);
}

static int affix_match(tv s, tv affix, int suffix) {
    if (affix.u.s.n > s.u.s.n) return 0;
    return memcmp(s.u.s.p + (suffix ? s.u.s.n - affix.u.s.n : 0), affix.u.s.p, affix.u.s.n) == 0;
}

static braid_status starts_ends(tpl_env *e, const tpl_node *at, tv s, tpl_args *a, int suffix, tv *out) {
    BD_TRY(nargs_between(at, suffix ? "endswith" : "startswith", a, 1, 3));
    if (a->npos > 1) { /* start/end bounds: slice first */
        int64_t lo = 0, hi = (int64_t)tpl_utf8_count(s.u.s.p, s.u.s.n), len = hi;
        if (a->pos[1].k != TV_NONE) BD_TRY(need_int(at, "start", a->pos[1], &lo));
        if (a->npos > 2 && a->pos[2].k != TV_NONE) BD_TRY(need_int(at, "end", a->pos[2], &hi));
        if (lo < 0) lo = lo + len < 0 ? 0 : lo + len;
        if (hi < 0) hi = hi + len < 0 ? 0 : hi + len;
        if (hi > len) hi = len;
        if (lo > len) { *out = tv_bool(0); return BRAID_OK; }
        size_t pa = tpl_utf8_offset(s.u.s.p, s.u.s.n, lo), pb = hi > lo ? tpl_utf8_offset(s.u.s.p, s.u.s.n, hi) : pa;
        s = tv_strn(s.u.s.p + pa, pb - pa);
    }
    tv x = a->pos[0];
    if (x.k == TV_LIST && (x.f & TVF_TUPLE)) {
        for (size_t i = 0; i < x.u.l->n; i++) {
            BD_TRY(need_str(at, "tuple for startswith/endswith", x.u.l->v[i]));
            if (affix_match(s, x.u.l->v[i], suffix)) { *out = tv_bool(1); return BRAID_OK; }
        }
        *out = tv_bool(0);
        return BRAID_OK;
    }
    if (x.k != TV_STR)
        return tpl_fail(at, BRAID_E_INVALID, "TypeError: %s first arg must be str or a tuple of str, not %s",
                        suffix ? "endswith" : "startswith", tv_type_name(x));
    (void)e;
    *out = tv_bool(affix_match(s, x, suffix));
    return BRAID_OK;
}

static int64_t find_sub(tv s, tv sub, int from_right) {
    if (sub.u.s.n > s.u.s.n) return -1;
    if (!from_right) {
        for (size_t i = 0; i + sub.u.s.n <= s.u.s.n; i++)
            if (memcmp(s.u.s.p + i, sub.u.s.p, sub.u.s.n) == 0) return (int64_t)tpl_utf8_count(s.u.s.p, i);
        return -1;
    }
    for (size_t i = s.u.s.n - sub.u.s.n + 1; i > 0; i--)
        if (memcmp(s.u.s.p + i - 1, sub.u.s.p, sub.u.s.n) == 0) return (int64_t)tpl_utf8_count(s.u.s.p, i - 1);
    return -1;
}

static braid_status pad(tpl_env *e, const tpl_node *at, tv s, tpl_args *a, int mode, tv *out) {
    /* mode 0 center, 1 ljust, 2 rjust, 3 zfill */
    BD_TRY(nargs_between(at, "pad", a, 1, mode == 3 ? 1 : 2));
    int64_t width = 0;
    BD_TRY(need_int(at, "width", a->pos[0], &width));
    const char *fill = " ";
    size_t fill_len = 1;
    if (a->npos > 1) {
        BD_TRY(need_str(at, "fill character", a->pos[1]));
        if (tpl_utf8_count(a->pos[1].u.s.p, a->pos[1].u.s.n) != 1)
            return tpl_fail(at, BRAID_E_INVALID, "TypeError: The fill character must be exactly one character long");
        fill = a->pos[1].u.s.p;
        fill_len = a->pos[1].u.s.n;
    }
    int64_t len = (int64_t)tpl_utf8_count(s.u.s.p, s.u.s.n);
    if (width <= len) { *out = s; return BRAID_OK; }
    if (width > 1 << 20) return tpl_fail(at, BRAID_E_RANGE, "padding width too large");
    int64_t total = width - len, left = 0;
    if (mode == 0) left = total / 2 + (total & width & 1);
    else if (mode == 2 || mode == 3) left = total;
    bd_strbuf b = {0};
    size_t body = 0;
    if (mode == 3 && s.u.s.n && (s.u.s.p[0] == '+' || s.u.s.p[0] == '-')) { bd_strbuf_put(&b, s.u.s.p, 1); body = 1; }
    for (int64_t i = 0; i < left; i++) bd_strbuf_put(&b, mode == 3 ? "0" : fill, mode == 3 ? 1 : fill_len);
    bd_strbuf_put(&b, s.u.s.p + body, s.u.s.n - body);
    for (int64_t i = left; i < total; i++) bd_strbuf_put(&b, fill, fill_len);
    return buf_value(e, &b, s.f & TVF_MARKUP, out);
}

static braid_status str_method(tpl_env *e, const tpl_node *at, tv s, int id, tpl_args *a, tv *out) {
    switch (id) {
    case M_S_STRIP: case M_S_LSTRIP: case M_S_RSTRIP: {
        BD_TRY(nargs_between(at, "strip", a, 0, 1));
        tv *chars = a->npos && a->pos[0].k != TV_NONE ? &a->pos[0] : NULL;
        if (chars) BD_TRY(need_str(at, "strip arg", *chars));
        return tpl_strip(e, s, chars, id != M_S_RSTRIP, id != M_S_LSTRIP, out);
    }
    case M_S_SPLIT: case M_S_RSPLIT:
        if (a->npos > 2) return tpl_fail(at, BRAID_E_INVALID, "TypeError: split() takes at most 2 arguments");
        return split(e, at, s, a, id == M_S_RSPLIT, out);
    case M_S_SPLITLINES: {
        tv *ke = tpl_arg(a, 0, "keepends");
        return tpl_splitlines(e, s, ke && tv_truthy(*ke), out);
    }
    case M_S_STARTSWITH: return starts_ends(e, at, s, a, 0, out);
    case M_S_ENDSWITH: return starts_ends(e, at, s, a, 1, out);
    case M_S_REPLACE: {
        BD_TRY(nargs_between(at, "replace", a, 2, 3));
        int64_t count = -1;
        if (a->npos > 2) BD_TRY(need_int(at, "count", a->pos[2], &count));
        return replace(e, at, s, a->pos[0], a->pos[1], count, out);
    }
    case M_S_UPPER: case M_S_LOWER: case M_S_CAPITALIZE: case M_S_SWAPCASE: case M_S_CASEFOLD:
        BD_TRY(nargs_between(at, "case", a, 0, 0));
        return map_case(e, s, id == M_S_UPPER ? 1 : id == M_S_CAPITALIZE ? 2 : id == M_S_SWAPCASE ? 3 : 0, out);
    case M_S_TITLE: {
        BD_TRY(nargs_between(at, "title", a, 0, 0));
        bd_strbuf b = {0};
        int prev_cased = 0;
        for (size_t i = 0; i < s.u.s.n;) {
            uint32_t c = tpl_utf8_next(s.u.s.p, s.u.s.n, &i);
            int cased = tpl_py_lower(c) != tpl_py_upper(c);
            bd_strbuf_put_cp(&b, cased ? (prev_cased ? tpl_py_lower(c) : tpl_py_upper(c)) : c);
            prev_cased = cased;
        }
        return buf_value(e, &b, s.f & TVF_MARKUP, out);
    }
    case M_S_FIND: case M_S_RFIND: case M_S_INDEX: case M_S_RINDEX: case M_S_COUNT: {
        BD_TRY(nargs_between(at, "find", a, 1, 1));
        BD_TRY(need_str(at, "substring", a->pos[0]));
        if (id == M_S_COUNT) {
            tv sub = a->pos[0];
            int64_t c = 0;
            if (sub.u.s.n == 0) c = (int64_t)tpl_utf8_count(s.u.s.p, s.u.s.n) + 1;
            else
                for (size_t i = 0; i + sub.u.s.n <= s.u.s.n;) {
                    if (memcmp(s.u.s.p + i, sub.u.s.p, sub.u.s.n) == 0) { c++; i += sub.u.s.n; }
                    else i++;
                }
            *out = tv_int(c);
            return BRAID_OK;
        }
        int64_t r = find_sub(s, a->pos[0], id == M_S_RFIND || id == M_S_RINDEX);
        if (r < 0 && (id == M_S_INDEX || id == M_S_RINDEX)) return tpl_fail(at, BRAID_E_INVALID, "ValueError: substring not found");
        *out = tv_int(r);
        return BRAID_OK;
    }
    case M_S_JOIN: {
        BD_TRY(nargs_between(at, "join", a, 1, 1));
        tv items;
        BD_TRY(tv_iterate(e, at, a->pos[0], &items));
        bd_strbuf b = {0};
        for (size_t i = 0; i < items.u.l->n; i++) {
            tv it = items.u.l->v[i];
            if (it.k != TV_STR) {
                bd_strbuf_free(&b);
                return tpl_fail(at, BRAID_E_INVALID, "TypeError: sequence item %zu: expected str instance, %s found", i,
                                tv_type_name(it));
            }
            if (i) bd_strbuf_put(&b, s.u.s.p, s.u.s.n);
            bd_strbuf_put(&b, it.u.s.p, it.u.s.n);
            if (b.n > e->out_limit) { bd_strbuf_free(&b); return tpl_fail(at, BRAID_E_RANGE, "string larger than the output limit"); }
        }
        return buf_value(e, &b, 0, out);
    }
    case M_S_FORMAT: return tpl_str_format(e, at, s, a, out);
    case M_S_ISDIGIT: case M_S_ISALPHA: case M_S_ISALNUM: case M_S_ISSPACE: case M_S_ISNUMERIC: case M_S_ISDECIMAL: {
        int ok = s.u.s.n > 0;
        for (size_t i = 0; ok && i < s.u.s.n;) {
            uint32_t c = tpl_utf8_next(s.u.s.p, s.u.s.n, &i);
            int r = id == M_S_ISALPHA ? tpl_is_alpha(c)
                  : id == M_S_ISALNUM ? (tpl_is_alpha(c) || tpl_is_digit(c))
                  : id == M_S_ISSPACE ? tpl_py_isspace(c) : tpl_is_digit(c);
            ok = r;
        }
        *out = tv_bool(ok);
        return BRAID_OK;
    }
    case M_S_ISUPPER: case M_S_ISLOWER: {
        int cased = 0, ok = 1;
        for (size_t i = 0; i < s.u.s.n;) {
            uint32_t c = tpl_utf8_next(s.u.s.p, s.u.s.n, &i);
            if (tpl_py_lower(c) == tpl_py_upper(c)) continue;
            cased = 1;
            if (id == M_S_ISUPPER ? c != tpl_py_upper(c) : c != tpl_py_lower(c)) ok = 0;
        }
        *out = tv_bool(cased && ok);
        return BRAID_OK;
    }
    case M_S_ISTITLE: return tpl_fail(at, BRAID_E_UNSUPPORTED, "str.istitle is not supported");
    case M_S_CENTER: return pad(e, at, s, a, 0, out);
    case M_S_LJUST: return pad(e, at, s, a, 1, out);
    case M_S_RJUST: return pad(e, at, s, a, 2, out);
    case M_S_ZFILL: return pad(e, at, s, a, 3, out);
    case M_S_PARTITION: case M_S_RPARTITION: {
        BD_TRY(nargs_between(at, "partition", a, 1, 1));
        tv sep = a->pos[0];
        BD_TRY(need_str(at, "separator", sep));
        if (!sep.u.s.n) return tpl_fail(at, BRAID_E_INVALID, "ValueError: empty separator");
        BD_TRY(tv_new_list(e->a, 3, out));
        out->f = TVF_TUPLE;
        size_t pos = SIZE_MAX;
        if (sep.u.s.n <= s.u.s.n) {
            if (id == M_S_PARTITION) {
                for (size_t i = 0; i + sep.u.s.n <= s.u.s.n; i++)
                    if (memcmp(s.u.s.p + i, sep.u.s.p, sep.u.s.n) == 0) { pos = i; break; }
            } else {
                for (size_t i = s.u.s.n - sep.u.s.n + 1; i > 0; i--)
                    if (memcmp(s.u.s.p + i - 1, sep.u.s.p, sep.u.s.n) == 0) { pos = i - 1; break; }
            }
        }
        tv empty = tv_strn("", 0);
        if (pos == SIZE_MAX) {
            out->u.l->v[0] = id == M_S_PARTITION ? s : empty;
            out->u.l->v[1] = empty;
            out->u.l->v[2] = id == M_S_PARTITION ? empty : s;
        } else {
            out->u.l->v[0] = tv_strn(s.u.s.p, pos);
            out->u.l->v[1] = sep;
            out->u.l->v[2] = tv_strn(s.u.s.p + pos + sep.u.s.n, s.u.s.n - pos - sep.u.s.n);
        }
        out->u.l->n = 3;
        return BRAID_OK;
    }
    case M_S_REMOVEPREFIX: case M_S_REMOVESUFFIX: {
        BD_TRY(nargs_between(at, "removeprefix", a, 1, 1));
        BD_TRY(need_str(at, "affix", a->pos[0]));
        tv x = a->pos[0];
        *out = s;
        if (affix_match(s, x, id == M_S_REMOVESUFFIX)) {
            if (id == M_S_REMOVEPREFIX) out->u.s.p += x.u.s.n;
            out->u.s.n -= x.u.s.n;
        }
        return BRAID_OK;
    }
    default: return tpl_fail(at, BRAID_E_UNSUPPORTED, "this str method is not supported");
    }
}

static braid_status dict_view(tpl_env *e, tv d, int which, tv *out) {
    BD_TRY(tv_new_list(e->a, d.u.m->n, out));
    for (size_t i = 0; i < d.u.m->n; i++) {
        if (which == 1) out->u.l->v[i] = d.u.m->k[i];
        else if (which == 2) out->u.l->v[i] = d.u.m->v[i];
        else {
            BD_TRY(tv_pair(e->a, d.u.m->k[i], d.u.m->v[i], &out->u.l->v[i]));
        }
    }
    out->u.l->n = d.u.m->n;
    out->f = TVF_VIEW;
    out->id = (uint16_t)which;
    return BRAID_OK;
}

braid_status tpl_call_method(tpl_env *e, const tpl_node *at, tv self, int id, tpl_args *a, tv *out) {
    if (self.k == TV_STR) return str_method(e, at, self, id, a, out);
    switch (id) {
    case M_D_GET: {
        BD_TRY(nargs_between(at, "get", a, 1, 2));
        if (!tv_is_hashable(a->pos[0]))
            return tpl_fail(at, BRAID_E_INVALID, "TypeError: unhashable type: '%s'", tv_type_name(a->pos[0]));
        tv *v = tv_dict_get(self.u.m, a->pos[0]);
        *out = v ? *v : a->npos > 1 ? a->pos[1] : tv_none();
        return BRAID_OK;
    }
    case M_D_ITEMS: BD_TRY(nargs_between(at, "items", a, 0, 0)); return dict_view(e, self, 0, out);
    case M_D_KEYS: BD_TRY(nargs_between(at, "keys", a, 0, 0)); return dict_view(e, self, 1, out);
    case M_D_VALUES: BD_TRY(nargs_between(at, "values", a, 0, 0)); return dict_view(e, self, 2, out);
    case M_D_COPY: {
        BD_TRY(nargs_between(at, "copy", a, 0, 0));
        BD_TRY(tv_new_dict(e->a, self.u.m->n, out));
        for (size_t i = 0; i < self.u.m->n; i++) BD_TRY(tv_dict_set(e->a, out->u.m, self.u.m->k[i], self.u.m->v[i]));
        return BRAID_OK;
    }
    case M_L_INDEX: case M_L_COUNT: {
        BD_TRY(nargs_between(at, "index", a, 1, 1));
        int64_t c = 0;
        for (size_t i = 0; i < self.u.l->n; i++)
            if (tv_eq(self.u.l->v[i], a->pos[0])) {
                if (id == M_L_INDEX) { *out = tv_int((int64_t)i); return BRAID_OK; }
                c++;
            }
        if (id == M_L_INDEX) return tpl_fail(at, BRAID_E_INVALID, "ValueError: value is not in list");
        *out = tv_int(c);
        return BRAID_OK;
    }
    case M_L_COPY:
        BD_TRY(tv_new_list(e->a, self.u.l->n, out));
        if (self.u.l->n) memcpy(out->u.l->v, self.u.l->v, self.u.l->n * sizeof(tv));
        out->u.l->n = self.u.l->n;
        return BRAID_OK;
    case M_LOOP_CYCLE:
        if (a->npos == 0) return tpl_fail(at, BRAID_E_INVALID, "TypeError: no items for cycling given");
        *out = a->pos[self.u.loop->index0 % a->npos];
        return BRAID_OK;
    case M_LOOP_CHANGED: {
        tv now;
        BD_TRY(tv_new_list(e->a, a->npos, &now));
        if (a->npos) memcpy(now.u.l->v, a->pos, a->npos * sizeof(tv));
        now.u.l->n = a->npos;
        tloop *l = self.u.loop;
        int changed = !l->have_changed || !tv_eq(l->last_changed, now);
        l->last_changed = now;
        l->have_changed = 1;
        *out = tv_bool(changed);
        return BRAID_OK;
    }
    case M_CYC_NEXT: case M_CYC_RESET: {
        tv *items = tv_dict_gets(self.u.m, "items", 5), *pos = tv_dict_gets(self.u.m, "pos", 3);
        if (id == M_CYC_RESET) { pos->u.i = 0; *out = tv_none(); return BRAID_OK; }
        *out = items->u.l->v[pos->u.i];
        pos->u.i = (pos->u.i + 1) % (int64_t)items->u.l->n;
        return BRAID_OK;
    }
    case F_JOINER_CALL + 500: {
        tv *used = tv_dict_gets(self.u.m, "used", 4), *sep = tv_dict_gets(self.u.m, "sep", 3);
        *out = used->u.i ? *sep : tv_strn("", 0);
        used->u.i = 1;
        return BRAID_OK;
    }
    default: return tpl_fail(at, BRAID_E_UNSUPPORTED, "this method is not supported");
    }
}

/* ---- global functions ------------------------------------------------------------------------------------- */

/* dict(*args, **kwargs) semantics (also namespace()). */
static braid_status build_dict(tpl_env *e, const tpl_node *at, tpl_args *a, tv *out) {
    BD_TRY(tv_new_dict(e->a, 0, out));
    if (a->npos > 1)
        return tpl_fail(at, BRAID_E_INVALID, "TypeError: dict expected at most 1 argument, got %zu", a->npos);
    if (a->npos == 1) {
        tv src = a->pos[0];
        if (src.k == TV_DICT || src.k == TV_NS) {
            for (size_t i = 0; i < src.u.m->n; i++) BD_TRY(tv_dict_set(e->a, out->u.m, src.u.m->k[i], src.u.m->v[i]));
        } else {
            tv items;
            BD_TRY(tv_iterate(e, at, src, &items));
            for (size_t i = 0; i < items.u.l->n; i++) {
                tv pair = items.u.l->v[i], kv;
                if (pair.k != TV_LIST && pair.k != TV_STR)
                    return tpl_fail(at, BRAID_E_INVALID, "TypeError: cannot convert dictionary update sequence element #%zu to a sequence", i);
                BD_TRY(tv_iterate(e, at, pair, &kv));
                if (kv.u.l->n != 2)
                    return tpl_fail(at, BRAID_E_INVALID, "ValueError: dictionary update sequence element #%zu has length %zu; 2 is required", i, kv.u.l->n);
                if (!tv_is_hashable(kv.u.l->v[0]))
                    return tpl_fail(at, BRAID_E_INVALID, "TypeError: unhashable type: '%s'", tv_type_name(kv.u.l->v[0]));
                BD_TRY(tv_dict_set(e->a, out->u.m, kv.u.l->v[0], kv.u.l->v[1]));
            }
        }
    }
    for (size_t i = 0; i < a->nkw; i++) BD_TRY(tv_dict_set(e->a, out->u.m, tv_strn(a->kwn[i], a->kwl[i]), a->kwv[i]));
    return BRAID_OK;
}

braid_status tpl_call_func(tpl_env *e, const tpl_node *at, int id, tpl_args *a, tv *out) {
    switch (id) {
    case F_RANGE: {
        BD_TRY(nargs_between(at, "range", a, 1, 3));
        int64_t v[3] = {0, 0, 1};
        for (size_t i = 0; i < a->npos; i++) BD_TRY(need_int(at, "range() argument", a->pos[i], &v[i]));
        int64_t start = a->npos == 1 ? 0 : v[0], stop = a->npos == 1 ? v[0] : v[1], step = a->npos == 3 ? v[2] : 1;
        if (step == 0) return tpl_fail(at, BRAID_E_INVALID, "ValueError: range() arg 3 must not be zero");
        int64_t count = 0;
        if (step > 0 && stop > start) count = (stop - start - 1) / step + 1;
        if (step < 0 && stop < start) count = (start - stop - 1) / (-step) + 1;
        if (count > 100000)
            return tpl_fail(at, BRAID_E_RANGE, "OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
        BD_TRY(tv_new_list(e->a, (size_t)count, out));
        for (int64_t i = 0; i < count; i++) out->u.l->v[i] = tv_int(start + i * step);
        out->u.l->n = (size_t)count;
        out->f = TVF_RANGE;
        return BRAID_OK;
    }
    case F_DICT: return build_dict(e, at, a, out);
    case F_NAMESPACE: {
        tv d;
        BD_TRY(build_dict(e, at, a, &d));
        *out = (tv){.k = TV_NS};
        out->u.m = d.u.m;
        return BRAID_OK;
    }
    case F_RAISE: {
        tv msg = a->npos ? a->pos[0] : tv_strn("", 0);
        tv s;
        BD_TRY(tv_to_str(e, at, msg, &s));
        return tpl_fail(at, BRAID_E_INVALID, "TemplateError (raise_exception): %.*s", (int)(s.u.s.n > 600 ? 600 : s.u.s.n),
                        s.u.s.p);
    }
    case F_STRFTIME: {
        BD_TRY(nargs_between(at, "strftime_now", a, 1, 1));
        BD_TRY(need_str(at, "format", a->pos[0]));
        time_t t = (time_t)e->now;
        struct tm tm;
        if (!localtime_r(&t, &tm)) return tpl_fail(at, BRAID_E_INVALID, "strftime_now: bad time");
        char fmt[256], buf[1024];
        if (a->pos[0].u.s.n >= sizeof fmt) return tpl_fail(at, BRAID_E_RANGE, "strftime_now: format too long");
        if (a->pos[0].u.s.n) memcpy(fmt, a->pos[0].u.s.p, a->pos[0].u.s.n);
        fmt[a->pos[0].u.s.n] = 0;
        size_t n = a->pos[0].u.s.n ? strftime(buf, sizeof buf, fmt, &tm) : 0;
        char *p = tpl_strndup(e->a, buf, n);
        if (!p) return oom();
        *out = tv_strn(p, n);
        return BRAID_OK;
    }
    case F_CYCLER: {
        if (a->npos == 0) return tpl_fail(at, BRAID_E_INVALID, "TypeError: cycler needs at least one item");
        tv d, items;
        BD_TRY(tv_new_dict(e->a, 2, &d));
        BD_TRY(tv_new_list(e->a, a->npos, &items));
        memcpy(items.u.l->v, a->pos, a->npos * sizeof(tv));
        items.u.l->n = a->npos;
        BD_TRY(tv_dict_set(e->a, d.u.m, tv_cstr("items"), items));
        BD_TRY(tv_dict_set(e->a, d.u.m, tv_cstr("pos"), tv_int(0)));
        *out = (tv){.k = TV_CYCLER};
        out->u.m = d.u.m;
        return BRAID_OK;
    }
    case F_JOINER: {
        tv *sep = tpl_arg(a, 0, "sep");
        tv d;
        BD_TRY(tv_new_dict(e->a, 2, &d));
        BD_TRY(tv_dict_set(e->a, d.u.m, tv_cstr("sep"), sep ? *sep : tv_cstr(", ")));
        BD_TRY(tv_dict_set(e->a, d.u.m, tv_cstr("used"), tv_bool(0)));
        tv *box = tpl_alloc(e->a, sizeof *box);
        if (!box) return oom();
        *box = (tv){.k = TV_JOINER};
        box->u.m = d.u.m;
        *out = (tv){.k = TV_METHOD, .id = F_JOINER_CALL + 500};
        out->u.self = box;
        return BRAID_OK;
    }
    case F_LIPSUM: return tpl_fail(at, BRAID_E_UNSUPPORTED, "lipsum() is not supported");
    default: return tpl_fail(at, BRAID_E_INVALID, "unknown function");
    }
}

/* ---- str.format ------------------------------------------------------------------------------------------- */

typedef struct fspec {
    uint32_t fill; int align; /* '<' '>' '^' '=' or 0 */
    char sign; int alt, zero; int64_t width; int grouping; int64_t prec; char type;
} fspec;

static braid_status parse_spec(const tpl_node *at, const char *p, size_t n, fspec *f) {
    memset(f, 0, sizeof *f);
    f->fill = ' ';
    f->prec = -1;
    size_t i = 0;
    /* [[fill]align] */
    size_t j = 0;
    uint32_t c0 = n ? tpl_utf8_next(p, n, &j) : 0;
    if (j < n && (p[j] == '<' || p[j] == '>' || p[j] == '^' || p[j] == '=')) { f->fill = c0; f->align = p[j]; i = j + 1; }
    else if (n && (p[0] == '<' || p[0] == '>' || p[0] == '^' || p[0] == '=')) { f->align = p[0]; i = 1; }
    if (i < n && (p[i] == '+' || p[i] == '-' || p[i] == ' ')) f->sign = p[i++];
    if (i < n && p[i] == '#') { f->alt = 1; i++; }
    if (i < n && p[i] == '0') { f->zero = 1; i++; }
    while (i < n && p[i] >= '0' && p[i] <= '9') { f->width = f->width * 10 + (p[i++] - '0'); if (f->width > 100000) return tpl_fail(at, BRAID_E_RANGE, "format width too large"); }
    if (i < n && (p[i] == ',' || p[i] == '_')) { f->grouping = p[i++]; }
    if (i < n && p[i] == '.') {
        i++;
        f->prec = 0;
        if (i >= n || p[i] < '0' || p[i] > '9') return tpl_fail(at, BRAID_E_INVALID, "ValueError: Format specifier missing precision");
        while (i < n && p[i] >= '0' && p[i] <= '9') { f->prec = f->prec * 10 + (p[i++] - '0'); if (f->prec > 1000) return tpl_fail(at, BRAID_E_RANGE, "format precision too large"); }
    }
    if (i < n) f->type = p[i++];
    if (i != n) return tpl_fail(at, BRAID_E_INVALID, "ValueError: Invalid format specifier");
    return BRAID_OK;
}

static void put_padded(bd_strbuf *b, const fspec *f, const char *s, size_t n, int default_right, size_t sign_len) {
    int64_t len = (int64_t)tpl_utf8_count(s, n);
    int64_t padn = f->width > len ? f->width - len : 0;
    int align = f->align ? f->align : (f->zero ? '=' : default_right ? '>' : '<');
    uint32_t fill = f->align ? f->fill : (f->zero ? '0' : ' ');
    int64_t left = align == '>' ? padn : align == '^' ? padn / 2 : align == '=' ? padn : 0;
    if (align == '=') {
        bd_strbuf_put(b, s, sign_len);
        for (int64_t i = 0; i < left; i++) bd_strbuf_put_cp(b, fill);
        bd_strbuf_put(b, s + sign_len, n - sign_len);
        return;
    }
    for (int64_t i = 0; i < left; i++) bd_strbuf_put_cp(b, fill);
    bd_strbuf_put(b, s, n);
    for (int64_t i = left; i < padn; i++) bd_strbuf_put_cp(b, fill);
}

static braid_status format_value(tpl_env *e, const tpl_node *at, bd_strbuf *b, tv v, const char *spec, size_t sn) {
    if (sn == 0) return tv_str(e, at, b, v);
    fspec f;
    BD_TRY(parse_spec(at, spec, sn, &f));
    char buf[1200];
    if (v.k == TV_STR) {
        if (f.type && f.type != 's') return tpl_fail(at, BRAID_E_INVALID, "ValueError: Unknown format code '%c' for object of type 'str'", f.type);
        size_t n = v.u.s.n;
        if (f.prec >= 0) n = tpl_utf8_offset(v.u.s.p, v.u.s.n, f.prec);
        put_padded(b, &f, v.u.s.p, n, 0, 0);
        return bd_strbuf_status(b);
    }
    if (v.k == TV_INT || v.k == TV_BOOL) {
        char t = f.type ? f.type : 'd';
        if (t == 'd' || t == 'x' || t == 'X' || t == 'o' || t == 'b' || t == 'n') {
            if (f.prec >= 0) return tpl_fail(at, BRAID_E_INVALID, "ValueError: Precision not allowed in integer format specifier");
            uint64_t mag = v.u.i < 0 ? (uint64_t)0 - (uint64_t)v.u.i : (uint64_t)v.u.i;
            char digits[80];
            int nd = 0;
            int base = t == 'x' || t == 'X' ? 16 : t == 'o' ? 8 : t == 'b' ? 2 : 10;
            do { int d = (int)(mag % (uint64_t)base); digits[nd++] = (char)(d < 10 ? '0' + d : (t == 'X' ? 'A' : 'a') + d - 10); mag /= (uint64_t)base; } while (mag);
            size_t k = 0;
            if (v.u.i < 0) buf[k++] = '-';
            else if (f.sign == '+' || f.sign == ' ') buf[k++] = f.sign;
            size_t sign_len = k;
            if (f.alt && base != 10) { buf[k++] = '0'; buf[k++] = t == 'X' ? 'X' : t == 'x' ? 'x' : t == 'o' ? 'o' : 'b'; sign_len = k; }
            for (int i = nd - 1; i >= 0; i--) {
                buf[k++] = digits[i];
                if (f.grouping && i > 0 && i % (base == 10 ? 3 : 4) == 0) buf[k++] = (char)f.grouping;
            }
            put_padded(b, &f, buf, k, 1, sign_len);
            return bd_strbuf_status(b);
        }
        if (t == 'c') {
            if (v.u.i < 0 || v.u.i > 0x10FFFF) return tpl_fail(at, BRAID_E_INVALID, "OverflowError: %%c arg not in range(0x110000)");
            bd_strbuf tmp = {0};
            bd_strbuf_put_cp(&tmp, (uint32_t)v.u.i);
            put_padded(b, &f, tmp.p, tmp.n, 0, 0);
            bd_strbuf_free(&tmp);
            return bd_strbuf_status(b);
        }
        v = tv_float((double)v.u.i);
    }
    if (v.k == TV_FLOAT) {
        char t = f.type;
        double d = v.u.d;
        int prec = f.prec >= 0 ? (int)f.prec : 6;
        size_t k;
        if (t == 'f' || t == 'F' || t == 'e' || t == 'E' || t == '%' || t == 'g' || t == 'G') {
            double x = t == '%' ? d * 100 : d;
            char ct = t == '%' ? 'f' : t;
            if (f.grouping) return tpl_fail(at, BRAID_E_UNSUPPORTED, "grouping in float formats is not supported");
            if ((t == 'g' || t == 'G') && f.prec == 0) prec = 1;
            char fmtbuf[16];
            snprintf(fmtbuf, sizeof fmtbuf, "%%%s%s.*%c", f.sign == '+' ? "+" : f.sign == ' ' ? " " : "", f.alt ? "#" : "", ct);
            snprintf(buf, sizeof buf - 2, fmtbuf, prec, x);
            k = strlen(buf);
            if (t == '%') buf[k++] = '%';
        } else if (t == 0) {
            if (f.prec >= 0) {
                snprintf(buf, sizeof buf, "%.*g", prec ? prec : 1, d);
                if (!strchr(buf, '.') && !strchr(buf, 'e') && !strchr(buf, 'n') && !strchr(buf, 'i')) strcat(buf, ".0");
            } else tv_float_repr(d, buf, sizeof buf);
            if (f.sign == '+' && d >= 0) { memmove(buf + 1, buf, strlen(buf) + 1); buf[0] = '+'; }
            k = strlen(buf);
        } else {
            return tpl_fail(at, BRAID_E_INVALID, "ValueError: Unknown format code '%c' for object of type 'float'", t);
        }
        size_t sign_len = (buf[0] == '-' || buf[0] == '+' || buf[0] == ' ') ? 1 : 0;
        put_padded(b, &f, buf, k, 1, sign_len);
        return bd_strbuf_status(b);
    }
    return tpl_fail(at, BRAID_E_INVALID, "TypeError: unsupported format string passed to %s.__format__", tv_type_name(v));
}

braid_status tpl_str_format(tpl_env *e, const tpl_node *at, tv fmt, tpl_args *a, tv *out) {
    bd_strbuf b = {0};
    const char *p = fmt.u.s.p;
    size_t n = fmt.u.s.n, auto_idx = 0;
    int mode = 0; /* 1 automatic, 2 manual numbering */
    braid_status s = BRAID_OK;
    for (size_t i = 0; s == BRAID_OK && i < n;) {
        if (p[i] == '{' && i + 1 < n && p[i + 1] == '{') { bd_strbuf_put(&b, "{", 1); i += 2; continue; }
        if (p[i] == '}' && i + 1 < n && p[i + 1] == '}') { bd_strbuf_put(&b, "}", 1); i += 2; continue; }
        if (p[i] == '}') { s = tpl_fail(at, BRAID_E_INVALID, "ValueError: Single '}' encountered in format string"); break; }
        if (p[i] != '{') { bd_strbuf_put(&b, p + i, 1); i++; continue; }
        /* a replacement field: {name[.attr|[key]]...[!conv][:spec]} (nested {} in the spec unsupported) */
        size_t j = i + 1, depth = 1;
        while (j < n && depth) { if (p[j] == '{') depth++; else if (p[j] == '}') depth--; if (depth) j++; }
        if (j >= n) { s = tpl_fail(at, BRAID_E_INVALID, "ValueError: expected '}' before end of string"); break; }
        const char *fld = p + i + 1;
        size_t fl = j - i - 1, name_end = 0;
        while (name_end < fl && fld[name_end] != '.' && fld[name_end] != '[' && fld[name_end] != '!' && fld[name_end] != ':') name_end++;
        tv v;
        if (name_end == 0) {
            if (mode == 2) { s = tpl_fail(at, BRAID_E_INVALID, "ValueError: cannot switch from manual field specification to automatic field numbering"); break; }
            mode = 1;
            if (auto_idx >= a->npos) { s = tpl_fail(at, BRAID_E_INVALID, "IndexError: Replacement index %zu out of range for positional args tuple", auto_idx); break; }
            v = a->pos[auto_idx++];
        } else if (fld[0] >= '0' && fld[0] <= '9') {
            if (mode == 1) { s = tpl_fail(at, BRAID_E_INVALID, "ValueError: cannot switch from automatic field numbering to manual field specification"); break; }
            mode = 2;
            size_t idx = 0;
            for (size_t k = 0; k < name_end; k++) idx = idx * 10 + (size_t)(fld[k] - '0');
            if (idx >= a->npos) { s = tpl_fail(at, BRAID_E_INVALID, "IndexError: Replacement index %zu out of range for positional args tuple", idx); break; }
            v = a->pos[idx];
        } else {
            tv *kv = NULL;
            for (size_t k = 0; k < a->nkw; k++)
                if (a->kwl[k] == name_end && memcmp(a->kwn[k], fld, name_end) == 0) kv = &a->kwv[k];
            if (!kv) { s = tpl_fail(at, BRAID_E_INVALID, "KeyError: '%.*s'", (int)name_end, fld); break; }
            v = *kv;
        }
        size_t k = name_end;
        while (s == BRAID_OK && k < fl && (fld[k] == '.' || fld[k] == '[')) {
            if (fld[k] == '.') {
                size_t st = ++k;
                while (k < fl && fld[k] != '.' && fld[k] != '[' && fld[k] != '!' && fld[k] != ':') k++;
                s = tpl_getattr(e, at, v, fld + st, k - st, &v);
            } else {
                size_t st = ++k;
                while (k < fl && fld[k] != ']') k++;
                tv key = tv_strn(fld + st, k - st);
                int digits = k > st;
                int64_t iv = 0;
                /* A numeric index longer than int64 stays a string key (and finds nothing) instead of overflowing. */
                for (size_t q = st; q < k; q++) {
                    if (fld[q] < '0' || fld[q] > '9' || iv > (INT64_MAX - 9) / 10) digits = 0;
                    else iv = iv * 10 + (fld[q] - '0');
                }
                if (digits) key = tv_int(iv);
                s = tpl_getitem(e, at, v, key, &v);
                k++;
            }
        }
        if (s != BRAID_OK) break;
        char conv = 0;
        if (k < fl && fld[k] == '!') { conv = k + 1 < fl ? fld[k + 1] : 0; k += 2; }
        const char *spec = "";
        size_t sn = 0;
        if (k < fl && fld[k] == ':') { spec = fld + k + 1; sn = fl - k - 1; }
        if (conv == 'r' || conv == 'a') {
            bd_strbuf r = {0};
            s = tv_repr(e, at, &r, v);
            if (s == BRAID_OK) s = tv_from_buf(e, &r, &v);
            bd_strbuf_free(&r);
        } else if (conv == 's') {
            s = tv_to_str(e, at, v, &v);
        } else if (conv) {
            s = tpl_fail(at, BRAID_E_INVALID, "ValueError: Unknown conversion specifier %c", conv);
        }
        if (s == BRAID_OK) {
            if (v.k == TV_UNDEF && sn == 0) { /* format(Undefined) is "" */ }
            else s = format_value(e, at, &b, v, spec, sn);
        }
        if (b.n > e->out_limit) s = tpl_fail(at, BRAID_E_RANGE, "string larger than the output limit");
        i = j + 1;
    }
    if (s != BRAID_OK) { bd_strbuf_free(&b); return s; }
    return buf_value(e, &b, fmt.f & TVF_MARKUP, out);
}
