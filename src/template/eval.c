/* eval.c — runs the syntax tree: statements write to the current output buffer, expressions produce values.
 *
 * Scoping follows what Jinja2's compiler produces: a for loop (all of its iterations together), a macro call,
 * a {% call %} or {% generation %} body, a filter or set block and a with block each get their own frame;
 * if/elif/else do not; assignments go to the current frame and lookups walk outwards; only a namespace()
 * attribute set from an inner frame changes something outside it. Arithmetic, comparisons and `in` follow
 * Python (int/float/bool mixing, string and list concatenation, floor division and modulo signs), and
 * Markup (from |safe) escapes whatever plain string is added to it, as markupsafe does. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "base/status.h"
#include "template/tpl.h"

#define NO_NODE NULL

static braid_status oom(void) { return bd_error(BRAID_E_NOMEM, "template: out of memory"); }

braid_status tpl_step(tpl_env *e, const tpl_node *at) {
    if (++e->steps > e->step_limit)
        return tpl_fail(at, BRAID_E_RANGE, "the template ran more than %" PRIu64 " steps (limit)", e->step_limit);
    return BRAID_OK;
}

braid_status tpl_frame_new(tpl_env *e, tpl_frame *parent, tpl_frame **out) {
    tpl_frame *f = tpl_alloc(e->a, sizeof *f);
    if (!f) return oom();
    f->parent = parent;
    *out = f;
    return BRAID_OK;
}

braid_status tpl_frame_set(tpl_env *e, tpl_frame *f, const char *name, size_t n, tv v) {
    return tv_dict_set(e->a, &f->vars, tv_strn(name, n), v);
}

static tv *frame_find(tpl_frame *f, const char *name, size_t n) {
    for (; f; f = f->parent) {
        tv *v = tv_dict_gets(&f->vars, name, n);
        if (v) return v;
    }
    return NULL;
}

static braid_status out_put(tpl_env *e, const tpl_node *at, const char *p, size_t n) {
    if (e->out->n + n > e->out_limit)
        return tpl_fail(at, BRAID_E_RANGE, "the output would exceed %zu bytes (limit)", e->out_limit);
    bd_strbuf_put(e->out, p, n);
    return bd_strbuf_status(e->out);
}

/* ---- arithmetic ------------------------------------------------------------------------------------------- */

static braid_status undefined_error(const tpl_node *at, tv v) {
    if (v.u.s.p)
        return tpl_fail(at, BRAID_E_INVALID, "UndefinedError: '%.*s' is undefined", (int)v.u.s.n, v.u.s.p);
    return tpl_fail(at, BRAID_E_INVALID, "UndefinedError: a value is undefined");
}

static const char *op_symbol(int op) {
    switch (op) {
    case OP_ADD: return "+";
    case OP_SUB: return "-";
    case OP_MUL: return "*";
    case OP_DIV: return "/";
    case OP_FLOORDIV: return "//";
    case OP_MOD: return "%";
    case OP_POW: return "** or pow()";
    default: return "?";
    }
}

static braid_status type_error(const tpl_node *at, int op, tv a, tv b) {
    return tpl_fail(at, BRAID_E_INVALID, "TypeError: unsupported operand type(s) for %s: '%s' and '%s'",
                    op_symbol(op), tv_type_name(a), tv_type_name(b));
}

static braid_status concat_str(tpl_env *e, const tpl_node *at, tv a, tv b, tv *out) {
    int markup = (a.f | b.f) & TVF_MARKUP;
    bd_strbuf buf = {0};
    braid_status s = BRAID_OK;
    if (markup) {
        s = tv_escape(e, at, &buf, a);
        if (s == BRAID_OK) s = tv_escape(e, at, &buf, b);
    } else {
        bd_strbuf_put(&buf, a.u.s.p, a.u.s.n);
        bd_strbuf_put(&buf, b.u.s.p, b.u.s.n);
    }
    if (s == BRAID_OK) s = tv_from_buf(e, &buf, out);
    bd_strbuf_free(&buf);
    if (s == BRAID_OK && markup) out->f |= TVF_MARKUP;
    return s;
}

static braid_status repeat(tpl_env *e, const tpl_node *at, tv seq, int64_t times, tv *out) {
    if (times < 0) times = 0;
    if (seq.k == TV_STR) {
        if (seq.u.s.n && (uint64_t)times > e->out_limit / seq.u.s.n)
            return tpl_fail(at, BRAID_E_RANGE, "string repetition larger than the output limit");
        size_t n = seq.u.s.n * (size_t)times;
        char *p = tpl_alloc(e->a, n + 1);
        if (!p) return oom();
        for (int64_t i = 0; seq.u.s.n && i < times; i++) memcpy(p + (size_t)i * seq.u.s.n, seq.u.s.p, seq.u.s.n);
        *out = tv_strn(p, n);
        out->f = seq.f & TVF_MARKUP;
        return BRAID_OK;
    }
    if (seq.u.l->n && (uint64_t)times > 1000000 / seq.u.l->n)
        return tpl_fail(at, BRAID_E_RANGE, "list repetition too large");
    BD_TRY(tv_new_list(e->a, seq.u.l->n * (size_t)times, out));
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < seq.u.l->n; k++) out->u.l->v[out->u.l->n++] = seq.u.l->v[k];
    out->f = seq.f & TVF_TUPLE;
    return BRAID_OK;
}

static int plain_list(tv v) { return v.k == TV_LIST && !(v.f & (TVF_ITER | TVF_VIEW | TVF_RANGE)); }

static double py_fmod(double a, double b) {
    double m = fmod(a, b);
    if (m != 0 && ((m < 0) != (b < 0))) m += b;
    return m;
}

static braid_status arith(tpl_env *e, const tpl_node *at, int op, tv a, tv b, tv *out) {
    if (a.k == TV_UNDEF) return undefined_error(at, a);
    if (b.k == TV_UNDEF) return undefined_error(at, b);
    if (tv_is_number(a) && tv_is_number(b)) {
        int ints = a.k != TV_FLOAT && b.k != TV_FLOAT;
        int64_t x = a.u.i, y = b.u.i, r;
        double fx = tv_num(a), fy = tv_num(b);
        switch (op) {
        case OP_ADD:
            if (ints) { if (__builtin_add_overflow(x, y, &r)) goto overflow; *out = tv_int(r); }
            else *out = tv_float(fx + fy);
            return BRAID_OK;
        case OP_SUB:
            if (ints) { if (__builtin_sub_overflow(x, y, &r)) goto overflow; *out = tv_int(r); }
            else *out = tv_float(fx - fy);
            return BRAID_OK;
        case OP_MUL:
            if (ints) { if (__builtin_mul_overflow(x, y, &r)) goto overflow; *out = tv_int(r); }
            else *out = tv_float(fx * fy);
            return BRAID_OK;
        case OP_DIV:
            if (fy == 0) return tpl_fail(at, BRAID_E_INVALID, "ZeroDivisionError: division by zero");
            *out = tv_float(fx / fy);
            return BRAID_OK;
        case OP_FLOORDIV:
            if (ints) {
                if (y == 0) return tpl_fail(at, BRAID_E_INVALID, "ZeroDivisionError: integer division or modulo by zero");
                if (x == INT64_MIN && y == -1) goto overflow;
                int64_t q = x / y;
                if ((x % y != 0) && ((x < 0) != (y < 0))) q--;
                *out = tv_int(q);
            } else {
                if (fy == 0) return tpl_fail(at, BRAID_E_INVALID, "ZeroDivisionError: float floor division by zero");
                *out = tv_float(floor(fx / fy));
            }
            return BRAID_OK;
        case OP_MOD:
            if (ints) {
                if (y == 0) return tpl_fail(at, BRAID_E_INVALID, "ZeroDivisionError: integer division or modulo by zero");
                if (y == -1) { *out = tv_int(0); return BRAID_OK; }
                int64_t m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) m += y;
                *out = tv_int(m);
            } else {
                if (fy == 0) return tpl_fail(at, BRAID_E_INVALID, "ZeroDivisionError: float modulo");
                *out = tv_float(py_fmod(fx, fy));
            }
            return BRAID_OK;
        case OP_POW:
            if (ints && y >= 0) {
                int64_t acc = 1, base = x;
                for (int64_t k = y; k > 0; k >>= 1) {
                    if (k & 1) { if (__builtin_mul_overflow(acc, base, &acc)) goto overflow; }
                    if (k > 1 && __builtin_mul_overflow(base, base, &base)) goto overflow;
                }
                *out = tv_int(acc);
            } else {
                if (fx == 0 && fy < 0) return tpl_fail(at, BRAID_E_INVALID, "ZeroDivisionError: 0.0 cannot be raised to a negative power");
                *out = tv_float(pow(fx, fy));
            }
            return BRAID_OK;
        default: break;
        }
    }
    if (op == OP_ADD && a.k == TV_STR && b.k == TV_STR) return concat_str(e, at, a, b, out);
    if (op == OP_ADD && plain_list(a) && plain_list(b) && (a.f & TVF_TUPLE) == (b.f & TVF_TUPLE)) {
        BD_TRY(tv_new_list(e->a, a.u.l->n + b.u.l->n, out));
        for (size_t k = 0; k < a.u.l->n; k++) out->u.l->v[out->u.l->n++] = a.u.l->v[k];
        for (size_t k = 0; k < b.u.l->n; k++) out->u.l->v[out->u.l->n++] = b.u.l->v[k];
        out->f = a.f & TVF_TUPLE;
        return BRAID_OK;
    }
    if (op == OP_MUL) {
        if ((a.k == TV_STR || plain_list(a)) && (b.k == TV_INT || b.k == TV_BOOL)) return repeat(e, at, a, b.u.i, out);
        if ((b.k == TV_STR || plain_list(b)) && (a.k == TV_INT || a.k == TV_BOOL)) return repeat(e, at, b, a.u.i, out);
    }
    if (op == OP_MOD && a.k == TV_STR)
        return tpl_fail(at, BRAID_E_UNSUPPORTED, "printf-style string formatting ('...' %% x) is not supported");
    if (op == OP_ADD && a.k == TV_STR)
        return tpl_fail(at, BRAID_E_INVALID, "TypeError: can only concatenate str (not \"%s\") to str", tv_type_name(b));
    return type_error(at, op, a, b);
overflow:
    return tpl_fail(at, BRAID_E_RANGE, "integer overflow (braid's integers are 64-bit)");
}

static braid_status contains(tpl_env *e, const tpl_node *at, tv needle, tv hay, int *out) {
    (void)e;
    switch (hay.k) {
    case TV_STR:
        if (needle.k != TV_STR) {
            if (needle.k == TV_UNDEF) return undefined_error(at, needle);
            return tpl_fail(at, BRAID_E_INVALID, "TypeError: 'in <string>' requires string as left operand, not %s",
                            tv_type_name(needle));
        }
        if (needle.u.s.n == 0) { *out = 1; return BRAID_OK; }
        *out = needle.u.s.n <= hay.u.s.n && memmem(hay.u.s.p, hay.u.s.n, needle.u.s.p, needle.u.s.n) != NULL;
        return BRAID_OK;
    case TV_LIST:
        if (hay.f & TVF_VIEW && hay.id == 1) { /* keys view: like a dict */ }
        *out = 0;
        if ((hay.f & TVF_ITER) && hay.u.l->consumed) return BRAID_OK;
        for (size_t i = 0; i < hay.u.l->n; i++)
            if (tv_eq(hay.u.l->v[i], needle)) {
                if (hay.f & TVF_ITER) hay.u.l->consumed = 1;
                *out = 1;
                return BRAID_OK;
            }
        if (hay.f & TVF_ITER) hay.u.l->consumed = 1;
        return BRAID_OK;
    case TV_DICT:
        if (!tv_is_hashable(needle))
            return tpl_fail(at, BRAID_E_INVALID, "TypeError: unhashable type: '%s'", tv_type_name(needle));
        *out = tv_dict_get(hay.u.m, needle) != NULL;
        return BRAID_OK;
    case TV_UNDEF:
        *out = 0;
        return BRAID_OK;
    default:
        return tpl_fail(at, BRAID_E_INVALID, "TypeError: argument of type '%s' is not iterable", tv_type_name(hay));
    }
}

/* ---- slicing ---------------------------------------------------------------------------------------------- */

static braid_status slice_index(const tpl_node *at, tv v, int64_t *out, int *given) {
    *given = 0;
    if (v.k == TV_NONE || v.k == TV_UNDEF) return BRAID_OK;
    if (v.k != TV_INT && v.k != TV_BOOL)
        return tpl_fail(at, BRAID_E_INVALID, "TypeError: slice indices must be integers or None");
    *out = v.u.i;
    *given = 1;
    return BRAID_OK;
}

static braid_status do_slice(tpl_env *e, const tpl_node *at, tv obj, tv lo, tv hi, tv st, tv *out) {
    int64_t start = 0, stop = 0, step = 1;
    int gs, ge, gt;
    BD_TRY(slice_index(at, st, &step, &gt));
    if (gt && step == 0) return tpl_fail(at, BRAID_E_INVALID, "ValueError: slice step cannot be zero");
    BD_TRY(slice_index(at, lo, &start, &gs));
    BD_TRY(slice_index(at, hi, &stop, &ge));
    int is_str = obj.k == TV_STR;
    if (!is_str && !plain_list(obj)) { *out = tv_undef(); return BRAID_OK; }
    int64_t len = is_str ? (int64_t)tpl_utf8_count(obj.u.s.p, obj.u.s.n) : (int64_t)obj.u.l->n;
    /* Python's PySlice_AdjustIndices */
    if (!gs) start = step < 0 ? len - 1 : 0;
    else {
        if (start < 0) { start += len; if (start < 0) start = step < 0 ? -1 : 0; }
        else if (start >= len) start = step < 0 ? len - 1 : len;
    }
    if (!ge) stop = step < 0 ? -1 : len;
    else {
        if (stop < 0) { stop += len; if (stop < 0) stop = step < 0 ? -1 : 0; }
        else if (stop >= len) stop = step < 0 ? len - 1 : len;
    }
    if (is_str) {
        if (step == 1) {
            size_t a = tpl_utf8_offset(obj.u.s.p, obj.u.s.n, start);
            size_t b = stop > start ? tpl_utf8_offset(obj.u.s.p, obj.u.s.n, stop) : a;
            *out = tv_strn(obj.u.s.p + a, b - a);
            out->f = obj.f & TVF_MARKUP;
            return BRAID_OK;
        }
        tv chars;
        BD_TRY(tv_iterate(e, at, obj, &chars));
        bd_strbuf b = {0};
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            tv c = chars.u.l->v[i];
            bd_strbuf_put(&b, c.u.s.p, c.u.s.n);
        }
        braid_status s = tv_from_buf(e, &b, out);
        bd_strbuf_free(&b);
        if (s == BRAID_OK) out->f = obj.f & TVF_MARKUP;
        return s;
    }
    BD_TRY(tv_new_list(e->a, 0, out));
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) BD_TRY(tv_list_push(e->a, out->u.l, obj.u.l->v[i]));
    out->f = obj.f & TVF_TUPLE;
    return BRAID_OK;
}

/* ---- calls ------------------------------------------------------------------------------------------------ */

typedef struct callargs {
    tv *pos; size_t npos;
    const char **kwn; size_t *kwl; tv *kwv; size_t nkw;
} callargs;

static braid_status eval_args(tpl_env *e, const tpl_node *n, tpl_frame *f, callargs *ca) {
    size_t npos = n->items.n, nkw = n->nkw;
    tv dyn = tv_undef(), dynkw = tv_undef();
    if (n->dyn_args) {
        BD_TRY(tpl_eval(e, n->dyn_args, f, &dyn));
        BD_TRY(tv_iterate(e, n->dyn_args, dyn, &dyn));
        npos += dyn.u.l->n;
    }
    if (n->dyn_kwargs) {
        BD_TRY(tpl_eval(e, n->dyn_kwargs, f, &dynkw));
        if (dynkw.k != TV_DICT)
            return tpl_fail(n->dyn_kwargs, BRAID_E_INVALID, "TypeError: argument after ** must be a mapping");
        nkw += dynkw.u.m->n;
    }
    ca->pos = tpl_alloc(e->a, (npos + 1) * sizeof(tv));
    ca->kwn = tpl_alloc(e->a, (nkw + 1) * sizeof(char *));
    ca->kwl = tpl_alloc(e->a, (nkw + 1) * sizeof(size_t));
    ca->kwv = tpl_alloc(e->a, (nkw + 1) * sizeof(tv));
    if (!ca->pos || !ca->kwn || !ca->kwl || !ca->kwv) return oom();
    ca->npos = 0;
    for (size_t i = 0; i < n->items.n; i++) BD_TRY(tpl_eval(e, n->items.v[i], f, &ca->pos[ca->npos++]));
    if (n->dyn_args)
        for (size_t i = 0; i < dyn.u.l->n; i++) ca->pos[ca->npos++] = dyn.u.l->v[i];
    ca->nkw = 0;
    for (size_t i = 0; i < n->nkw; i++) {
        ca->kwn[ca->nkw] = n->kw[i].name;
        ca->kwl[ca->nkw] = n->kw[i].len;
        BD_TRY(tpl_eval(e, n->kw[i].value, f, &ca->kwv[ca->nkw]));
        ca->nkw++;
    }
    if (n->dyn_kwargs)
        for (size_t i = 0; i < dynkw.u.m->n; i++) {
            tv k = dynkw.u.m->k[i];
            if (k.k != TV_STR) return tpl_fail(n->dyn_kwargs, BRAID_E_INVALID, "TypeError: keywords must be strings");
            ca->kwn[ca->nkw] = k.u.s.p;
            ca->kwl[ca->nkw] = k.u.s.n;
            ca->kwv[ca->nkw] = dynkw.u.m->v[i];
            ca->nkw++;
        }
    return BRAID_OK;
}

static int node_uses_name(const tpl_node *n, const char *name, int depth) {
    if (!n || depth > 400) return 0;
    size_t len = strlen(name);
    if (n->type == N_NAME && n->name_len == len && memcmp(n->name, name, len) == 0) return 1;
    if (node_uses_name(n->a, name, depth + 1) || node_uses_name(n->b, name, depth + 1) ||
        node_uses_name(n->c, name, depth + 1) || node_uses_name(n->dyn_args, name, depth + 1) ||
        node_uses_name(n->dyn_kwargs, name, depth + 1) || node_uses_name(n->filter, name, depth + 1))
        return 1;
    const tpl_nodes *lists[] = {&n->items, &n->body, &n->else_, &n->defaults};
    for (int k = 0; k < 4; k++)
        for (size_t i = 0; i < lists[k]->n; i++)
            if (node_uses_name(lists[k]->v[i], name, depth + 1)) return 1;
    for (size_t i = 0; i < n->nkw; i++)
        if (node_uses_name(n->kw[i].value, name, depth + 1)) return 1;
    return 0;
}

static braid_status exec_body(tpl_env *e, const tpl_nodes *body, tpl_frame *f);

static braid_status call_macro(tpl_env *e, const tpl_node *at, tpl_macro *m, tv *args, size_t nargs,
                               const char **kwn, const size_t *kwl, tv *kwv, size_t nkw, tv *out) {
    const tpl_node *def = m->def;
    if (++e->depth > e->depth_limit)
        return tpl_fail(at, BRAID_E_RANGE, "macro calls nested deeper than %d (limit)", e->depth_limit);
    tpl_frame *f = NULL;
    BD_TRY(tpl_frame_new(e, m->closure, &f));
    size_t np = def->items.n, nd = def->defaults.n;
    int catch_varargs = node_uses_name(def, "varargs", 0) && def->type == N_MACRO;
    int catch_kwargs = node_uses_name(def, "kwargs", 0) && def->type == N_MACRO;
    if (nargs > np && !catch_varargs)
        return tpl_fail(at, BRAID_E_INVALID, "TypeError: macro '%.*s' takes not more than %zu argument(s)",
                        (int)def->name_len, def->name ? def->name : "caller", np);
    tv *bound = tpl_alloc(e->a, (np + 1) * sizeof(tv));
    uint8_t *set = tpl_alloc(e->a, np + 1);
    if (!bound || !set) return oom();
    for (size_t i = 0; i < np && i < nargs; i++) { bound[i] = args[i]; set[i] = 1; }
    tv kwargs, varargs, caller = tv_undef();
    BD_TRY(tv_new_dict(e->a, 0, &kwargs));
    BD_TRY(tv_new_list(e->a, 0, &varargs));
    varargs.f = TVF_TUPLE;
    for (size_t i = np; i < nargs; i++) BD_TRY(tv_list_push(e->a, varargs.u.l, args[i]));
    for (size_t k = 0; k < nkw; k++) {
        size_t i;
        for (i = 0; i < np; i++) {
            const tpl_node *pn = def->items.v[i];
            if (pn->name_len == kwl[k] && memcmp(pn->name, kwn[k], kwl[k]) == 0) break;
        }
        if (i < np) {
            if (set[i])
                return tpl_fail(at, BRAID_E_INVALID, "TypeError: macro '%.*s' got multiple values for argument '%.*s'",
                                (int)def->name_len, def->name, (int)kwl[k], kwn[k]);
            bound[i] = kwv[k];
            set[i] = 1;
        } else if (kwl[k] == 6 && memcmp(kwn[k], "caller", 6) == 0) {
            caller = kwv[k];
        } else if (catch_kwargs) {
            BD_TRY(tv_dict_set(e->a, kwargs.u.m, tv_strn(kwn[k], kwl[k]), kwv[k]));
        } else {
            return tpl_fail(at, BRAID_E_INVALID, "TypeError: macro '%.*s' takes no keyword argument '%.*s'",
                            (int)def->name_len, def->name ? def->name : "caller", (int)kwl[k], kwn[k]);
        }
    }
    for (size_t i = 0; i < np; i++) {
        const tpl_node *pn = def->items.v[i];
        if (!set[i]) {
            if (i + nd >= np) BD_TRY(tpl_eval(e, def->defaults.v[i + nd - np], f, &bound[i]));
            else bound[i] = tv_undef_named(pn->name, pn->name_len);
        }
        BD_TRY(tpl_frame_set(e, f, pn->name, pn->name_len, bound[i]));
    }
    if (def->type == N_MACRO) {
        BD_TRY(tpl_frame_set(e, f, "varargs", 7, varargs));
        BD_TRY(tpl_frame_set(e, f, "kwargs", 6, kwargs));
        if (caller.k != TV_UNDEF || node_uses_name(def, "caller", 0))
            BD_TRY(tpl_frame_set(e, f, "caller", 6, caller));
    }
    bd_strbuf buf = {0}, *saved = e->out;
    e->out = &buf;
    int saved_brk = e->brk;
    braid_status s = exec_body(e, &def->body, f);
    e->out = saved;
    e->brk = saved_brk;
    if (s == BRAID_OK) s = tv_from_buf(e, &buf, out);
    bd_strbuf_free(&buf);
    e->depth--;
    return s;
}

static braid_status run_for(tpl_env *e, const tpl_node *n, tpl_frame *f, tv iterable, int depth, tv *captured);

braid_status tpl_call_value(tpl_env *e, const tpl_node *at, tv fn, tv *args, size_t nargs, const char **kwn,
                            const size_t *kwl, tv *kwv, size_t nkw, tv *out) {
    tpl_args a = {args, nargs, kwn, kwl, kwv, nkw};
    switch (fn.k) {
    case TV_MACRO: return call_macro(e, at, fn.u.mac, args, nargs, kwn, kwl, kwv, nkw, out);
    case TV_FUNC: return tpl_call_func(e, at, fn.id, &a, out);
    case TV_METHOD: return tpl_call_method(e, at, *fn.u.self, fn.id, &a, out);
    case TV_LOOP:
        if (fn.u.loop->node && (fn.u.loop->node->flag & 1)) {
            if (nargs != 1 || nkw) return tpl_fail(at, BRAID_E_INVALID, "TypeError: loop() takes one argument");
            return run_for(e, fn.u.loop->node, fn.u.loop->frame, args[0], fn.u.loop->depth + 1, out);
        }
        return tpl_fail(at, BRAID_E_INVALID,
                        "TypeError: Tried to call non recursive loop.  Maybe you forgot the 'recursive' modifier.");
    case TV_UNDEF:
        if (fn.f & TVF_UNSAFE)
            return tpl_fail(at, BRAID_E_INVALID, "SecurityError: access to attribute '%.*s' is unsafe (the sandbox is "
                            "immutable)", (int)fn.u.s.n, fn.u.s.p);
        return undefined_error(at, fn);
    default:
        return tpl_fail(at, BRAID_E_INVALID, "TypeError: '%s' object is not callable", tv_type_name(fn));
    }
}

/* ---- expressions ------------------------------------------------------------------------------------------ */

/* Applies filter node n to x (already evaluated): checks the name, evaluates the arguments. */
static braid_status apply_filter_node(tpl_env *e, const tpl_node *n, tpl_frame *f, tv x, tv *out) {
    if (!tpl_filter_exists(n->name, n->name_len))
        return tpl_fail(n, BRAID_E_INVALID, "TemplateRuntimeError: No filter named '%.*s' found.", (int)n->name_len,
                        n->name);
    callargs ca;
    BD_TRY(eval_args(e, n, f, &ca));
    tpl_args a = {ca.pos, ca.npos, ca.kwn, ca.kwl, ca.kwv, ca.nkw};
    return tpl_apply_filter(e, n, n->name, n->name_len, x, &a, f, out);
}

static braid_status eval_filter(tpl_env *e, const tpl_node *n, tpl_frame *f, tv x, tv *out) {
    if (n->a) BD_TRY(tpl_eval(e, n->a, f, &x));
    return apply_filter_node(e, n, f, x, out);
}

/* A filter chain whose innermost operand is the text x (filter blocks, set blocks). */
static braid_status eval_filter_chain(tpl_env *e, const tpl_node *n, tpl_frame *f, tv x, tv *out) {
    if (!n) { *out = x; return BRAID_OK; }
    tv inner = x;
    if (n->a) BD_TRY(eval_filter_chain(e, n->a, f, x, &inner));
    return apply_filter_node(e, n, f, inner, out);
}

static int cmp_result(int op, int lt, int eq) {
    switch (op) {
    case OP_LT: return lt;
    case OP_LTEQ: return lt || eq;
    case OP_GT: return !lt && !eq;
    case OP_GTEQ: return !lt;
    default: return 0;
    }
}

static braid_status compare(tpl_env *e, const tpl_node *at, int op, tv a, tv b, int *r) {
    switch (op) {
    case OP_EQ: *r = tv_eq(a, b); return BRAID_OK;
    case OP_NE: *r = !tv_eq(a, b); return BRAID_OK;
    case OP_IN: return contains(e, at, a, b, r);
    case OP_NOTIN: BD_TRY(contains(e, at, a, b, r)); *r = !*r; return BRAID_OK;
    default: {
        int lt, eq = 0;
        if (op == OP_GT || op == OP_LTEQ) { /* a > b is b < a; a <= b is not b < a */
            BD_TRY(tv_lt(at, b, a, &lt));
            *r = op == OP_GT ? lt : !lt;
            return BRAID_OK;
        }
        BD_TRY(tv_lt(at, a, b, &lt));
        (void)eq;
        *r = cmp_result(op, lt, 0);
        if (op == OP_GTEQ) *r = !lt;
        return BRAID_OK;
    }
    }
}

braid_status tpl_eval(tpl_env *e, const tpl_node *n, tpl_frame *f, tv *out) {
    BD_TRY(tpl_step(e, n));
    if (++e->depth > e->depth_limit + 200)
        return tpl_fail(n, BRAID_E_RANGE, "expression nested too deeply (limit)");
    braid_status s = BRAID_OK;
    switch (n->type) {
    case N_CONST: *out = n->value; break;
    case N_NAME: {
        tv *v = frame_find(f, n->name, n->name_len);
        if (v) *out = *v;
        else {
            int id = tpl_global_func(n->name, n->name_len);
            if (id) { *out = (tv){.k = TV_FUNC, .id = (uint16_t)id}; }
            else *out = tv_undef_named(n->name, n->name_len);
        }
        break;
    }
    case N_TUPLE: case N_LIST: {
        s = tv_new_list(e->a, n->items.n, out);
        for (size_t i = 0; s == BRAID_OK && i < n->items.n; i++) {
            s = tpl_eval(e, n->items.v[i], f, &out->u.l->v[i]);
            out->u.l->n = i + 1;
        }
        if (n->type == N_TUPLE) out->f = TVF_TUPLE;
        break;
    }
    case N_DICT: {
        s = tv_new_dict(e->a, n->items.n / 2, out);
        for (size_t i = 0; s == BRAID_OK && i + 1 < n->items.n; i += 2) {
            tv k, v;
            s = tpl_eval(e, n->items.v[i], f, &k);
            if (s == BRAID_OK) s = tpl_eval(e, n->items.v[i + 1], f, &v);
            if (s == BRAID_OK && !tv_is_hashable(k))
                s = tpl_fail(n->items.v[i], BRAID_E_INVALID, "TypeError: unhashable type: '%s'", tv_type_name(k));
            if (s == BRAID_OK) s = tv_dict_set(e->a, out->u.m, k, v);
        }
        break;
    }
    case N_GETATTR: {
        tv obj;
        s = tpl_eval(e, n->a, f, &obj);
        if (s == BRAID_OK) s = tpl_getattr(e, n, obj, n->name, n->name_len, out);
        break;
    }
    case N_GETITEM: {
        tv obj;
        s = tpl_eval(e, n->a, f, &obj);
        if (s != BRAID_OK) break;
        if (n->b->type == N_SLICE) {
            if (obj.k == TV_UNDEF) { s = undefined_error(n, obj); break; }
            tv lo = tv_none(), hi = tv_none(), st = tv_none();
            if (n->b->a) s = tpl_eval(e, n->b->a, f, &lo);
            if (s == BRAID_OK && n->b->b) s = tpl_eval(e, n->b->b, f, &hi);
            if (s == BRAID_OK && n->b->c) s = tpl_eval(e, n->b->c, f, &st);
            if (s == BRAID_OK) s = do_slice(e, n, obj, lo, hi, st, out);
            break;
        }
        tv key;
        s = tpl_eval(e, n->b, f, &key);
        if (s == BRAID_OK) s = tpl_getitem(e, n, obj, key, out);
        break;
    }
    case N_SLICE: s = tpl_fail(n, BRAID_E_INVALID, "a slice outside a subscript"); break;
    case N_CALL: {
        tv fn;
        s = tpl_eval(e, n->a, f, &fn);
        if (s != BRAID_OK) break;
        callargs ca;
        s = eval_args(e, n, f, &ca);
        if (s == BRAID_OK) s = tpl_call_value(e, n, fn, ca.pos, ca.npos, ca.kwn, ca.kwl, ca.kwv, ca.nkw, out);
        break;
    }
    case N_FILTER: s = eval_filter(e, n, f, tv_undef(), out); break;
    case N_TEST: {
        tv x;
        s = tpl_eval(e, n->a, f, &x);
        if (s != BRAID_OK) break;
        if (!tpl_test_exists(n->name, n->name_len)) {
            s = tpl_fail(n, BRAID_E_INVALID, "TemplateRuntimeError: No test named '%.*s' found.", (int)n->name_len,
                         n->name);
            break;
        }
        callargs ca;
        s = eval_args(e, n, f, &ca);
        tpl_args a = {ca.pos, ca.npos, ca.kwn, ca.kwl, ca.kwv, ca.nkw};
        int r = 0;
        if (s == BRAID_OK) s = tpl_apply_test(e, n, n->name, n->name_len, x, &a, &r);
        *out = tv_bool(r);
        break;
    }
    case N_BINOP: {
        tv a, b;
        s = tpl_eval(e, n->a, f, &a);
        if (s != BRAID_OK) break;
        if (n->op == OP_AND) {
            if (!tv_truthy(a)) *out = a;
            else s = tpl_eval(e, n->b, f, out);
            break;
        }
        if (n->op == OP_OR) {
            if (tv_truthy(a)) *out = a;
            else s = tpl_eval(e, n->b, f, out);
            break;
        }
        s = tpl_eval(e, n->b, f, &b);
        if (s == BRAID_OK) s = arith(e, n, n->op, a, b, out);
        break;
    }
    case N_UNARY: {
        tv a;
        s = tpl_eval(e, n->a, f, &a);
        if (s != BRAID_OK) break;
        if (n->op == OP_NOT) *out = tv_bool(!tv_truthy(a));
        else if (a.k == TV_UNDEF) s = undefined_error(n, a);
        else if (a.k == TV_INT || a.k == TV_BOOL) {
            if (n->op == OP_NEG && a.u.i == INT64_MIN) s = tpl_fail(n, BRAID_E_RANGE, "integer overflow");
            else *out = tv_int(n->op == OP_NEG ? -a.u.i : a.u.i);
        } else if (a.k == TV_FLOAT) *out = tv_float(n->op == OP_NEG ? -a.u.d : a.u.d);
        else s = tpl_fail(n, BRAID_E_INVALID, "TypeError: bad operand type for unary %s: '%s'",
                          n->op == OP_NEG ? "-" : "+", tv_type_name(a));
        break;
    }
    case N_COMPARE: {
        tv a;
        s = tpl_eval(e, n->items.v[0], f, &a);
        int r = 1;
        for (size_t i = 1; s == BRAID_OK && i < n->items.n; i++) {
            tv b;
            s = tpl_eval(e, n->items.v[i], f, &b);
            if (s != BRAID_OK) break;
            s = compare(e, n, n->cmp_ops[i - 1], a, b, &r);
            if (s != BRAID_OK || !r) break;
            a = b;
        }
        *out = tv_bool(r);
        break;
    }
    case N_CONCAT: {
        bd_strbuf b = {0};
        for (size_t i = 0; s == BRAID_OK && i < n->items.n; i++) {
            tv x;
            s = tpl_eval(e, n->items.v[i], f, &x);
            if (s == BRAID_OK) s = tv_str(e, n->items.v[i], &b, x);
            if (s == BRAID_OK && b.n > e->out_limit) s = tpl_fail(n, BRAID_E_RANGE, "string larger than the output limit");
        }
        if (s == BRAID_OK) s = tv_from_buf(e, &b, out);
        bd_strbuf_free(&b);
        break;
    }
    case N_CONDEXPR: {
        tv c;
        s = tpl_eval(e, n->a, f, &c);
        if (s != BRAID_OK) break;
        if (tv_truthy(c)) s = tpl_eval(e, n->b, f, out);
        else if (n->c) s = tpl_eval(e, n->c, f, out);
        else *out = tv_undef();
        break;
    }
    case N_NSREF: s = tpl_fail(n, BRAID_E_INVALID, "a namespace reference outside an assignment"); break;
    default: s = tpl_fail(n, BRAID_E_INVALID, "not an expression"); break;
    }
    e->depth--;
    return s;
}

/* ---- statements ------------------------------------------------------------------------------------------- */

static braid_status assign(tpl_env *e, const tpl_node *target, tpl_frame *f, tv v) {
    if (target->type == N_NAME) return tpl_frame_set(e, f, target->name, target->name_len, v);
    if (target->type == N_NSREF) {
        tv *ns = frame_find(f, target->name, target->name_len);
        if (!ns || ns->k != TV_NS)
            return tpl_fail(target, BRAID_E_INVALID, "TemplateRuntimeError: cannot assign attribute on non-namespace object");
        return tv_dict_set(e->a, ns->u.m, tv_strn(target->attr, target->attr_len), v);
    }
    /* tuple unpacking */
    tv items;
    BD_TRY(tv_iterate(e, target, v, &items));
    if (items.u.l->n != target->items.n)
        return tpl_fail(target, BRAID_E_INVALID, "ValueError: %s values to unpack (expected %zu, got %zu)",
                        items.u.l->n > target->items.n ? "too many" : "not enough", target->items.n, items.u.l->n);
    for (size_t i = 0; i < target->items.n; i++) BD_TRY(assign(e, target->items.v[i], f, items.u.l->v[i]));
    return BRAID_OK;
}

static braid_status render_to_string(tpl_env *e, const tpl_nodes *body, tpl_frame *f, tv *out) {
    bd_strbuf buf = {0}, *saved = e->out;
    e->out = &buf;
    braid_status s = exec_body(e, body, f);
    e->out = saved;
    if (s == BRAID_OK) s = tv_from_buf(e, &buf, out);
    bd_strbuf_free(&buf);
    return s;
}

/* Runs a for loop over `iterable`; with captured != NULL (a recursive loop(...) call) the output is returned
 * as a string instead of written. */
static braid_status run_for(tpl_env *e, const tpl_node *n, tpl_frame *outer, tv iterable, int depth, tv *captured) {
    if (depth > e->depth_limit) return tpl_fail(n, BRAID_E_RANGE, "recursive loop nested too deeply (limit)");
    bd_strbuf buf = {0}, *saved = e->out;
    if (captured) e->out = &buf;
    tpl_frame *f = NULL;
    braid_status s = tpl_frame_new(e, outer, &f);
    tv items;
    if (s == BRAID_OK) {
        if (iterable.k == TV_NONE || iterable.k == TV_BOOL || iterable.k == TV_INT || iterable.k == TV_FLOAT)
            s = tpl_fail(n->b, BRAID_E_INVALID, "TypeError: '%s' object is not iterable", tv_type_name(iterable));
        else s = tv_iterate(e, n->b, iterable, &items);
    }
    if (s == BRAID_OK && n->c) { /* the loop filter: the target is bound while the condition is evaluated */
        tv kept;
        s = tv_new_list(e->a, items.u.l->n, &kept);
        for (size_t i = 0; s == BRAID_OK && i < items.u.l->n; i++) {
            tv c;
            s = assign(e, n->a, f, items.u.l->v[i]);
            if (s == BRAID_OK) s = tpl_eval(e, n->c, f, &c);
            if (s == BRAID_OK && tv_truthy(c)) kept.u.l->v[kept.u.l->n++] = items.u.l->v[i];
        }
        items = kept;
    }
    if (s == BRAID_OK) {
        tloop *lp = tpl_alloc(e->a, sizeof *lp);
        if (!lp) s = oom();
        else {
            lp->items = items;
            lp->length = items.u.l->n;
            lp->depth = depth;
            lp->node = n;
            lp->frame = outer;
            tv lv = {.k = TV_LOOP};
            lv.u.loop = lp;
            for (size_t i = 0; s == BRAID_OK && i < items.u.l->n; i++) {
                lp->index0 = i;
                s = tpl_step(e, n); /* an empty body still costs a step per iteration */
                if (s == BRAID_OK) s = assign(e, n->a, f, items.u.l->v[i]);
                if (s == BRAID_OK) s = tpl_frame_set(e, f, "loop", 4, lv);
                if (s == BRAID_OK) s = exec_body(e, &n->body, f);
                if (e->brk == 1) { e->brk = 0; break; }
                e->brk = 0;
            }
            if (s == BRAID_OK && items.u.l->n == 0 && n->else_.n) s = exec_body(e, &n->else_, f);
        }
    }
    if (captured) {
        e->out = saved;
        if (s == BRAID_OK) s = tv_from_buf(e, &buf, captured);
        bd_strbuf_free(&buf);
    }
    return s;
}

static braid_status exec_stmt(tpl_env *e, const tpl_node *n, tpl_frame *f) {
    BD_TRY(tpl_step(e, n));
    switch (n->type) {
    case N_OUTPUT_DATA: return out_put(e, n, n->value.u.s.p, n->value.u.s.n);
    case N_OUTPUT_EXPR: {
        tv v;
        BD_TRY(tpl_eval(e, n->a, f, &v));
        if (v.k == TV_STR) return out_put(e, n, v.u.s.p, v.u.s.n);
        bd_strbuf b = {0};
        braid_status s = tv_str(e, n, &b, v);
        if (s == BRAID_OK) s = out_put(e, n, b.p ? b.p : "", b.n);
        bd_strbuf_free(&b);
        return s;
    }
    case N_IF: {
        tv c;
        BD_TRY(tpl_eval(e, n->a, f, &c));
        return exec_body(e, tv_truthy(c) ? &n->body : &n->else_, f);
    }
    case N_FOR: {
        tv it;
        BD_TRY(tpl_eval(e, n->b, f, &it));
        return run_for(e, n, f, it, 1, NULL);
    }
    case N_SET: {
        tv v;
        BD_TRY(tpl_eval(e, n->b, f, &v));
        return assign(e, n->a, f, v);
    }
    case N_SET_BLOCK: {
        tpl_frame *inner = NULL;
        BD_TRY(tpl_frame_new(e, f, &inner));
        tv text, v;
        BD_TRY(render_to_string(e, &n->body, inner, &text));
        BD_TRY(eval_filter_chain(e, n->filter, inner, text, &v));
        return assign(e, n->a, f, v);
    }
    case N_MACRO: {
        tpl_macro *m = tpl_alloc(e->a, sizeof *m);
        if (!m) return oom();
        m->def = n;
        m->closure = f;
        tv v = {.k = TV_MACRO};
        v.u.mac = m;
        return tpl_frame_set(e, f, n->name, n->name_len, v);
    }
    case N_CALLBLOCK: {
        tpl_macro *m = tpl_alloc(e->a, sizeof *m);
        if (!m) return oom();
        m->def = n;
        m->closure = f;
        tv caller = {.k = TV_MACRO};
        caller.u.mac = m;
        const tpl_node *call = n->a;
        tv fn, r;
        BD_TRY(tpl_eval(e, call->a, f, &fn));
        callargs ca;
        BD_TRY(eval_args(e, call, f, &ca));
        ca.kwn[ca.nkw] = "caller";
        ca.kwl[ca.nkw] = 6;
        ca.kwv[ca.nkw] = caller;
        BD_TRY(tpl_call_value(e, n, fn, ca.pos, ca.npos, ca.kwn, ca.kwl, ca.kwv, ca.nkw + 1, &r));
        return exec_stmt_output(e, n, r);
    }
    case N_FILTERBLOCK: {
        tpl_frame *inner = NULL;
        BD_TRY(tpl_frame_new(e, f, &inner));
        tv text, v;
        BD_TRY(render_to_string(e, &n->body, inner, &text));
        BD_TRY(eval_filter_chain(e, n->filter, inner, text, &v));
        return exec_stmt_output(e, n, v);
    }
    case N_GENERATION: {
        tpl_frame *inner = NULL;
        BD_TRY(tpl_frame_new(e, f, &inner));
        int saved_brk = e->brk;
        braid_status s = exec_body(e, &n->body, inner);
        e->brk = saved_brk;
        return s;
    }
    case N_WITH: {
        tpl_frame *inner = NULL;
        BD_TRY(tpl_frame_new(e, f, &inner));
        for (size_t i = 0; i < n->items.n; i++) {
            tv v;
            BD_TRY(tpl_eval(e, n->defaults.v[i], f, &v));
            BD_TRY(assign(e, n->items.v[i], inner, v));
        }
        return exec_body(e, &n->body, inner);
    }
    case N_BREAK: e->brk = 1; return BRAID_OK;
    case N_CONTINUE: e->brk = 2; return BRAID_OK;
    default: return tpl_fail(n, BRAID_E_INVALID, "not a statement");
    }
}

braid_status exec_stmt_output(tpl_env *e, const tpl_node *n, tv v) {
    if (v.k == TV_STR) return out_put(e, n, v.u.s.p, v.u.s.n);
    bd_strbuf b = {0};
    braid_status s = tv_str(e, n, &b, v);
    if (s == BRAID_OK) s = out_put(e, n, b.p ? b.p : "", b.n);
    bd_strbuf_free(&b);
    return s;
}

static braid_status exec_body(tpl_env *e, const tpl_nodes *body, tpl_frame *f) {
    for (size_t i = 0; i < body->n; i++) {
        BD_TRY(exec_stmt(e, body->v[i], f));
        if (e->brk) return BRAID_OK;
    }
    return BRAID_OK;
}

braid_status tpl_render(tpl_env *e, const tpl_template *t) {
    tpl_frame *f = NULL;
    BD_TRY(tpl_frame_new(e, e->globals, &f));
    return exec_body(e, &t->body, f);
}
