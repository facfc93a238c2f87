/* json_schema.c — compiles a JSON Schema (or "any JSON object") into the node graph braid_json_matcher runs
 * (json_constraint.h). The schema is read with the library's own strict JSON reader (template/json.c: the
 * library does not link jansson).
 *
 * The subset is what structured-output users write: type (one or a list; a list is an anyOf of one node per
 * type), properties, required, additionalProperties (false / true / a schema), items, prefixItems,
 * minItems / maxItems, enum, const, anyOf / oneOf (both as anyOf: a document that matches two branches of a
 * oneOf is still produced), nullable (OpenAPI), $ref to #/$defs/... or #/definitions/... (recursion allowed),
 * minLength / maxLength, and the annotations (title, description, default, examples, $schema, $id, $comment,
 * deprecated, readOnly, writeOnly). Every other keyword (pattern, format, minimum, allOf, not, ...) is refused
 * with BRAID_E_UNSUPPORTED naming it: a constraint never ignores part of a schema silently.
 *
 * Choices that keep every produced document valid while keeping the model on a short leash:
 *   - properties are written in the order the schema lists them; required ones always, optional ones may be
 *     skipped; a required name without a properties entry is a property of any value;
 *   - additional properties are produced only when additionalProperties is true or a schema (not when it is
 *     absent while properties are given: they would be valid, but a model should fill the declared ones), and
 *     only after the declared ones, with keys that differ from every declared name and hold no escapes;
 *   - an object schema without properties and without additionalProperties: any keys (JSON Schema's default);
 *   - without "type", the keywords present decide (properties... -> object, items... -> array, minLength... ->
 *     string), else any value;
 *   - enum / const values are written compactly (no spaces), keys in the order given, as Python's json.dumps
 *     with separators (",", ":") would; a sibling "type" filters the values. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "base/strbuf.h"
#include "engine/json_constraint.h"
#include "template/tpl.h"

#define SCHEMA_MAX_DEPTH 64     /* nesting of schema objects */
#define SCHEMA_MAX_NODES 100000 /* compiled nodes */
#define SCHEMA_MAX_REFS 4096    /* distinct $ref targets */

typedef struct {
    const char *ref;
    size_t len;
    int32_t node;
} jref;

typedef struct {
    braid_json_constraint *c;
    tv doc; /* the whole schema ($ref targets are looked up in it) */
    jref *refs;
    int32_t n_refs, cap_refs;
} jcomp;

static void *aalloc(jcomp *j, size_t n) { return tpl_alloc(j->c->arena, n ? n : 1); }

static braid_status nomem(void) { return bd_error(BRAID_E_NOMEM, "json schema: out of memory"); }

/* A new node of kind k (zeroed, no limits); its index in *out. */
static braid_status new_node(braid_json_constraint *c, uint8_t k, int32_t *out) {
    if (c->n_nodes >= SCHEMA_MAX_NODES)
        return bd_error(BRAID_E_RANGE, "json schema: more than %d nodes", SCHEMA_MAX_NODES);
    if (c->n_nodes == c->cap_nodes) {
        int32_t cap = c->cap_nodes ? c->cap_nodes * 2 : 32;
        jnode *v = bd_realloc(c->nodes, (size_t)cap * sizeof *v);
        if (!v) return nomem();
        c->nodes = v;
        c->cap_nodes = cap;
    }
    jnode *n = &c->nodes[c->n_nodes];
    memset(n, 0, sizeof *n);
    n->kind = k;
    n->additional = -1;
    n->items = -1;
    n->max_items = -1;
    n->max_len = -1;
    *out = c->n_nodes++;
    return BRAID_OK;
}

/* ---- compact JSON writing (keys and enum values) ------------------------------------------------------------ */

static void put_string(bd_strbuf *b, const char *p, size_t n) {
    bd_strbuf_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        char esc[8];
        if (ch == '"') bd_strbuf_puts(b, "\\\"");
        else if (ch == '\\') bd_strbuf_puts(b, "\\\\");
        else if (ch == '\n') bd_strbuf_puts(b, "\\n");
        else if (ch == '\r') bd_strbuf_puts(b, "\\r");
        else if (ch == '\t') bd_strbuf_puts(b, "\\t");
        else if (ch == '\b') bd_strbuf_puts(b, "\\b");
        else if (ch == '\f') bd_strbuf_puts(b, "\\f");
        else if (ch < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", ch);
            bd_strbuf_puts(b, esc);
        } else bd_strbuf_put(b, p + i, 1);
    }
    bd_strbuf_put(b, "\"", 1);
}

static void put_value(bd_strbuf *b, tv v) {
    char buf[64];
    switch (v.k) {
    case TV_NONE: bd_strbuf_puts(b, "null"); break;
    case TV_BOOL: bd_strbuf_puts(b, v.u.i ? "true" : "false"); break;
    case TV_INT: snprintf(buf, sizeof buf, "%" PRId64, v.u.i); bd_strbuf_puts(b, buf); break;
    case TV_FLOAT: tv_float_repr(v.u.d, buf, sizeof buf); bd_strbuf_puts(b, buf); break;
    case TV_STR: put_string(b, v.u.s.p, v.u.s.n); break;
    case TV_LIST:
        bd_strbuf_puts(b, "[");
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) bd_strbuf_puts(b, ",");
            put_value(b, v.u.l->v[i]);
        }
        bd_strbuf_puts(b, "]");
        break;
    case TV_DICT:
        bd_strbuf_puts(b, "{");
        for (size_t i = 0; i < v.u.m->n; i++) {
            if (i) bd_strbuf_puts(b, ",");
            put_string(b, v.u.m->k[i].u.s.p, v.u.m->k[i].u.s.n);
            bd_strbuf_puts(b, ":");
            put_value(b, v.u.m->v[i]);
        }
        bd_strbuf_puts(b, "}");
        break;
    default: break; /* the JSON reader makes nothing else */
    }
}

/* Copies b's bytes into the arena. */
static braid_status arena_bytes(jcomp *j, const bd_strbuf *b, const char **out, uint32_t *len) {
    BD_TRY(bd_strbuf_status(b));
    if (b->n > UINT32_MAX / 2) return bd_error(BRAID_E_RANGE, "json schema: value too long");
    char *p = aalloc(j, b->n + 1);
    if (!p) return nomem();
    if (b->n) memcpy(p, b->p, b->n);
    *out = p;
    *len = (uint32_t)b->n;
    return BRAID_OK;
}

static int bytes_cmp(const char *a, uint32_t na, const char *b, uint32_t nb) {
    uint32_t n = na < nb ? na : nb;
    int r = n ? memcmp(a, b, n) : 0;
    if (r) return r;
    return (na > nb) - (na < nb); /* a prefix sorts before its extensions */
}

/* ---- keyword helpers ------------------------------------------------------------------------------------------ */

static tv *get(tv s, const char *key) { return s.k == TV_DICT ? tv_dict_gets(s.u.m, key, strlen(key)) : NULL; }

static int is_annotation(const char *k, size_t n) {
    static const char *const ann[] = {"title",   "description", "default",    "examples",  "$schema",
                                      "$id",     "$comment",    "deprecated", "readOnly",  "writeOnly",
                                      "$defs",   "definitions", "strict",     "name"};
    for (size_t i = 0; i < sizeof ann / sizeof *ann; i++)
        if (strlen(ann[i]) == n && !memcmp(ann[i], k, n)) return 1;
    return 0;
}

static int is_supported(const char *k, size_t n) {
    static const char *const kw[] = {"type",     "properties", "required",  "additionalProperties",
                                     "items",    "prefixItems", "minItems", "maxItems",
                                     "enum",     "const",      "anyOf",     "oneOf",
                                     "nullable", "$ref",       "minLength", "maxLength"};
    for (size_t i = 0; i < sizeof kw / sizeof *kw; i++)
        if (strlen(kw[i]) == n && !memcmp(kw[i], k, n)) return 1;
    return is_annotation(k, n);
}

/* A non-negative integer keyword (absent: *out untouched). */
static braid_status get_count(tv s, const char *key, int32_t *out) {
    tv *v = get(s, key);
    if (!v) return BRAID_OK;
    double d = v->k == TV_INT ? (double)v->u.i : v->k == TV_FLOAT ? v->u.d : -1.0;
    if (v->k == TV_BOOL || !(d >= 0) || d != floor(d))
        return bd_error(BRAID_E_INVALID, "json schema: %s must be a non-negative integer", key);
    *out = d > 1e9 ? 1000000000 : (int32_t)d;
    return BRAID_OK;
}

/* The types a schema allows, as a bit set over JK_* kinds (0: "type" absent). */
static braid_status get_types(tv s, unsigned *out) {
    *out = 0;
    tv *t = get(s, "type");
    if (!t) return BRAID_OK;
    tv one[1];
    const tv *v = one;
    size_t n = 1;
    if (t->k == TV_LIST) {
        v = t->u.l->v;
        n = t->u.l->n;
        if (n == 0) return bd_error(BRAID_E_INVALID, "json schema: \"type\" is an empty list");
    } else one[0] = *t;
    for (size_t i = 0; i < n; i++) {
        if (v[i].k != TV_STR) return bd_error(BRAID_E_INVALID, "json schema: \"type\" must be a string or a list of strings");
        static const struct { const char *name; unsigned bit; } names[] = {
            {"object", 1u << JK_OBJECT}, {"array", 1u << JK_ARRAY},   {"string", 1u << JK_STRING},
            {"number", 1u << JK_NUMBER}, {"integer", 1u << JK_INTEGER}, {"boolean", 1u << 16},
            {"null", 1u << 17}};
        unsigned bit = 0;
        for (size_t k = 0; k < sizeof names / sizeof *names; k++)
            if (strlen(names[k].name) == v[i].u.s.n && !memcmp(names[k].name, v[i].u.s.p, v[i].u.s.n)) bit = names[k].bit;
        if (!bit) return bd_error(BRAID_E_INVALID, "json schema: unknown type \"%.*s\"", (int)v[i].u.s.n, v[i].u.s.p);
        *out |= bit;
    }
    return BRAID_OK;
}

/* Whether value v has one of the types (for filtering enum values by a sibling "type"). */
static int value_has_type(tv v, unsigned types) {
    if (!types) return 1;
    switch (v.k) {
    case TV_NONE: return (types >> 17) & 1;
    case TV_BOOL: return (types >> 16) & 1;
    case TV_INT: return (types & ((1u << JK_INTEGER) | (1u << JK_NUMBER))) != 0;
    case TV_FLOAT: return (types & (1u << JK_NUMBER)) || ((types & (1u << JK_INTEGER)) && isfinite(v.u.d) && v.u.d == floor(v.u.d));
    case TV_STR: return (types >> JK_STRING) & 1;
    case TV_LIST: return (types >> JK_ARRAY) & 1;
    case TV_DICT: return (types >> JK_OBJECT) & 1;
    default: return 0;
    }
}

static braid_status compile(jcomp *j, tv s, int depth, int32_t *out);

/* ---- $ref -------------------------------------------------------------------------------------------------- */

/* Resolves "#/$defs/NAME" or "#/definitions/NAME" (JSON pointer escapes ~0 ~1 decoded; nested paths allowed). */
static braid_status resolve_ref(jcomp *j, const char *r, size_t n, tv *out) {
    if (n < 2 || r[0] != '#' || r[1] != '/')
        return bd_error(BRAID_E_UNSUPPORTED, "json schema: $ref \"%.*s\": only local references (#/$defs/..., "
                        "#/definitions/...) are supported", (int)(n > 200 ? 200 : n), r);
    tv cur = j->doc;
    size_t i = 2;
    int first = 1;
    while (i <= n) {
        size_t e = i;
        while (e < n && r[e] != '/') e++;
        char seg[512];
        size_t m = 0;
        for (size_t k = i; k < e; k++) {
            if (m + 1 >= sizeof seg) return bd_error(BRAID_E_RANGE, "json schema: $ref segment too long");
            if (r[k] == '~' && k + 1 < e && (r[k + 1] == '0' || r[k + 1] == '1')) {
                seg[m++] = r[k + 1] == '0' ? '~' : '/';
                k++;
            } else seg[m++] = r[k];
        }
        if (first && !((m == 5 && !memcmp(seg, "$defs", 5)) || (m == 11 && !memcmp(seg, "definitions", 11))))
            return bd_error(BRAID_E_UNSUPPORTED, "json schema: $ref \"%.*s\": only #/$defs/... and "
                            "#/definitions/... are supported", (int)(n > 200 ? 200 : n), r);
        first = 0;
        tv *next = cur.k == TV_DICT ? tv_dict_gets(cur.u.m, seg, m) : NULL;
        if (!next) return bd_error(BRAID_E_INVALID, "json schema: $ref \"%.*s\" points to nothing", (int)(n > 200 ? 200 : n), r);
        cur = *next;
        i = e + 1;
    }
    if (first) return bd_error(BRAID_E_INVALID, "json schema: $ref \"%.*s\" is empty", (int)n, r);
    *out = cur;
    return BRAID_OK;
}

static braid_status compile_ref(jcomp *j, tv ref, int depth, int32_t *out) {
    if (ref.k != TV_STR) return bd_error(BRAID_E_INVALID, "json schema: $ref must be a string");
    for (int32_t i = 0; i < j->n_refs; i++)
        if (j->refs[i].len == ref.u.s.n && !memcmp(j->refs[i].ref, ref.u.s.p, ref.u.s.n)) {
            *out = j->refs[i].node;
            return BRAID_OK;
        }
    if (j->n_refs >= SCHEMA_MAX_REFS) return bd_error(BRAID_E_RANGE, "json schema: too many $ref targets");
    tv target;
    BD_TRY(resolve_ref(j, ref.u.s.p, ref.u.s.n, &target));
    /* The reference gets its node before its body is compiled, so a recursive reference finds it: an anyOf of
     * one alternative, filled in once the body exists. */
    int32_t idx;
    BD_TRY(new_node(j->c, JK_ANYOF, &idx));
    if (j->n_refs == j->cap_refs) {
        int32_t cap = j->cap_refs ? j->cap_refs * 2 : 16;
        jref *v = bd_realloc(j->refs, (size_t)cap * sizeof *v);
        if (!v) return nomem();
        j->refs = v;
        j->cap_refs = cap;
    }
    j->refs[j->n_refs++] = (jref){ref.u.s.p, ref.u.s.n, idx};
    int32_t body;
    BD_TRY(compile(j, target, depth + 1, &body));
    int32_t *alt = aalloc(j, sizeof *alt);
    if (!alt) return nomem();
    *alt = body;
    j->c->nodes[idx].alts = alt;
    j->c->nodes[idx].n_alts = 1;
    *out = idx;
    return BRAID_OK;
}

/* ---- the kinds ------------------------------------------------------------------------------------------------- */

typedef struct {
    const char *p;
    uint32_t n;
    int32_t idx;
} bytes_item;

static int item_cmp(const void *a, const void *b) {
    const bytes_item *x = a, *y = b;
    int r = bytes_cmp(x->p, x->n, y->p, y->n);
    return r ? r : (x->idx > y->idx) - (x->idx < y->idx);
}

static braid_status compile_literals(jcomp *j, const tv *vals, size_t n, unsigned types, int32_t *out) {
    const char **lit = aalloc(j, n * sizeof *lit);
    uint32_t *len = aalloc(j, n * sizeof *len);
    bytes_item *it = aalloc(j, n * sizeof *it);
    if (!lit || !len || !it) return nomem();
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!value_has_type(vals[i], types)) continue;
        bd_strbuf b = {0};
        put_value(&b, vals[i]);
        braid_status s = arena_bytes(j, &b, &it[k].p, &it[k].n);
        bd_strbuf_free(&b);
        BD_TRY(s);
        it[k].idx = (int32_t)k;
        k++;
    }
    /* sorted by bytes (a prefix before its extensions), duplicates dropped */
    if (k) qsort(it, k, sizeof *it, item_cmp);
    int32_t m = 0;
    for (size_t i = 0; i < k; i++) {
        if (m > 0 && bytes_cmp(lit[m - 1], len[m - 1], it[i].p, it[i].n) == 0) continue;
        lit[m] = it[i].p;
        len[m] = it[i].n;
        m++;
    }
    if (m == 0) return bd_error(BRAID_E_INVALID, "json schema: enum/const leaves no value (none has the schema's type)");
    int32_t idx;
    BD_TRY(new_node(j->c, JK_LITERALS, &idx));
    jnode *nd = &j->c->nodes[idx];
    nd->lit = lit;
    nd->lit_len = len;
    nd->n_lit = m;
    *out = idx;
    return BRAID_OK;
}

static braid_status compile_object(jcomp *j, tv s, int depth, int32_t *out) {
    tv *props = get(s, "properties"), *req = get(s, "required"), *add = get(s, "additionalProperties");
    if (props && props->k != TV_DICT) return bd_error(BRAID_E_INVALID, "json schema: properties must be an object");
    if (req && req->k != TV_LIST) return bd_error(BRAID_E_INVALID, "json schema: required must be a list");
    size_t np = props ? props->u.m->n : 0, nr = req ? req->u.l->n : 0;
    for (size_t i = 0; i < nr; i++)
        if (req->u.l->v[i].k != TV_STR) return bd_error(BRAID_E_INVALID, "json schema: required must list strings");
    /* additional: absent -> none when properties are given, any otherwise */
    int32_t additional = -1;
    if (add) {
        if (add->k == TV_BOOL) additional = add->u.i ? JN_ANY : -1;
        else BD_TRY(compile(j, *add, depth + 1, &additional));
        if (additional == JN_NEVER) additional = -1;
    } else if (!props && !req) {
        additional = JN_ANY;
    }
    jprop *pv = aalloc(j, (np + nr) * sizeof *pv);
    if (!pv) return nomem();
    int32_t n = 0;
    for (size_t i = 0; i < np; i++) {
        tv k = props->u.m->k[i];
        int32_t node;
        BD_TRY(compile(j, props->u.m->v[i], depth + 1, &node));
        int required = 0;
        for (size_t r = 0; r < nr; r++)
            if (req->u.l->v[r].u.s.n == k.u.s.n && !memcmp(req->u.l->v[r].u.s.p, k.u.s.p, k.u.s.n)) required = 1;
        if (node == JN_NEVER) {
            if (required)
                return bd_error(BRAID_E_INVALID, "json schema: required property \"%.*s\" can never be valid",
                                (int)k.u.s.n, k.u.s.p);
            continue;
        }
        bd_strbuf b = {0};
        put_string(&b, k.u.s.p, k.u.s.n);
        braid_status st = arena_bytes(j, &b, &pv[n].key, &pv[n].key_len);
        bd_strbuf_free(&b);
        BD_TRY(st);
        pv[n].node = node;
        pv[n].required = (uint8_t)required;
        n++;
    }
    /* required names without a properties entry: properties of any value, after the listed ones */
    for (size_t r = 0; r < nr; r++) {
        tv k = req->u.l->v[r];
        if (props && tv_dict_gets(props->u.m, k.u.s.p, k.u.s.n)) continue;
        bd_strbuf b = {0};
        put_string(&b, k.u.s.p, k.u.s.n);
        braid_status st = arena_bytes(j, &b, &pv[n].key, &pv[n].key_len);
        bd_strbuf_free(&b);
        BD_TRY(st);
        int dup = 0;
        for (int32_t q = 0; q < n; q++)
            if (pv[q].key_len == pv[n].key_len && !memcmp(pv[q].key, pv[n].key, pv[n].key_len)) dup = 1;
        if (dup) continue;
        pv[n].node = additional >= 0 ? additional : JN_ANY;
        pv[n].required = 1;
        n++;
    }
    int32_t *by_key = aalloc(j, (size_t)n * sizeof *by_key);
    bytes_item *it = aalloc(j, (size_t)n * sizeof *it);
    if (!by_key || !it) return nomem();
    for (int32_t i = 0; i < n; i++) it[i] = (bytes_item){pv[i].key, pv[i].key_len, i};
    if (n) qsort(it, (size_t)n, sizeof *it, item_cmp);
    for (int32_t i = 0; i < n; i++) by_key[i] = it[i].idx;
    int32_t idx;
    BD_TRY(new_node(j->c, JK_OBJECT, &idx));
    jnode *nd = &j->c->nodes[idx];
    nd->props = pv;
    nd->by_key = by_key;
    nd->n_props = n;
    nd->additional = additional;
    *out = idx;
    return BRAID_OK;
}

static braid_status compile_array(jcomp *j, tv s, int depth, int32_t *out) {
    tv *items = get(s, "items"), *prefix = get(s, "prefixItems");
    int32_t min = 0, max = -1;
    BD_TRY(get_count(s, "minItems", &min));
    BD_TRY(get_count(s, "maxItems", &max));
    if (prefix && prefix->k != TV_LIST) return bd_error(BRAID_E_INVALID, "json schema: prefixItems must be a list");
    if (items && items->k == TV_LIST)
        return bd_error(BRAID_E_UNSUPPORTED, "json schema: \"items\" as a list (draft 4 tuples) is not supported; "
                        "use prefixItems");
    size_t npre = prefix ? prefix->u.l->n : 0;
    int32_t *pre = aalloc(j, npre * sizeof *pre);
    if (!pre) return nomem();
    for (size_t i = 0; i < npre; i++) BD_TRY(compile(j, prefix->u.l->v[i], depth + 1, &pre[i]));
    int32_t it = JN_ANY;
    if (items) {
        if (items->k == TV_BOOL) it = items->u.i ? JN_ANY : -1;
        else BD_TRY(compile(j, *items, depth + 1, &it));
        if (it == JN_NEVER) it = -1;
    }
    /* the longest array the schema allows (prefix items that can never match cut it) */
    int64_t possible = it >= 0 ? INT64_MAX : (int64_t)npre;
    for (size_t i = 0; i < npre; i++)
        if (pre[i] == JN_NEVER) {
            possible = (int64_t)i;
            break;
        }
    if (max >= 0 && max < min)
        return bd_error(BRAID_E_INVALID, "json schema: maxItems %d < minItems %d", (int)max, (int)min);
    if ((int64_t)min > possible)
        return bd_error(BRAID_E_INVALID, "json schema: minItems %d but at most %" PRId64 " items can be valid", (int)min,
                        possible);
    int32_t idx;
    BD_TRY(new_node(j->c, JK_ARRAY, &idx));
    jnode *nd = &j->c->nodes[idx];
    nd->prefix = pre;
    nd->n_prefix = (int32_t)npre;
    nd->items = it;
    nd->min_items = min;
    nd->max_items = max >= 0 && (int64_t)max < possible ? max : possible < INT32_MAX ? (int32_t)possible : -1;
    *out = idx;
    return BRAID_OK;
}

static braid_status compile_string(jcomp *j, tv s, int32_t *out) {
    int32_t min = 0, max = -1;
    BD_TRY(get_count(s, "minLength", &min));
    BD_TRY(get_count(s, "maxLength", &max));
    if (max >= 0 && max < min) return bd_error(BRAID_E_INVALID, "json schema: maxLength %d < minLength %d", (int)max, (int)min);
    if (min == 0 && max < 0) {
        *out = JN_STR;
        return BRAID_OK;
    }
    int32_t idx;
    BD_TRY(new_node(j->c, JK_STRING, &idx));
    j->c->nodes[idx].min_len = min;
    j->c->nodes[idx].max_len = max;
    *out = idx;
    return BRAID_OK;
}

/* One node for one type bit (the schema's other keywords apply to the kind they belong to). */
static braid_status compile_type(jcomp *j, tv s, unsigned bit, int depth, int32_t *out) {
    switch (bit) {
    case 1u << JK_OBJECT: return compile_object(j, s, depth, out);
    case 1u << JK_ARRAY: return compile_array(j, s, depth, out);
    case 1u << JK_STRING: return compile_string(j, s, out);
    case 1u << JK_NUMBER: *out = JN_NUM; return BRAID_OK;
    case 1u << JK_INTEGER: return new_node(j->c, JK_INTEGER, out);
    case 1u << 16: *out = JN_BOOL; return BRAID_OK;
    default: *out = JN_NULL; return BRAID_OK;
    }
}

static braid_status compile_anyof(jcomp *j, const tv *alts, size_t n, int depth, int32_t *out) {
    if (n == 0) return bd_error(BRAID_E_INVALID, "json schema: anyOf/oneOf is an empty list");
    int32_t *a = aalloc(j, n * sizeof *a);
    if (!a) return nomem();
    int32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        BD_TRY(compile(j, alts[i], depth + 1, &a[m]));
        if (a[m] != JN_NEVER) m++;
    }
    if (m == 0) {
        *out = JN_NEVER;
        return BRAID_OK;
    }
    if (m == 1) {
        *out = a[0];
        return BRAID_OK;
    }
    int32_t idx;
    BD_TRY(new_node(j->c, JK_ANYOF, &idx));
    j->c->nodes[idx].alts = a;
    j->c->nodes[idx].n_alts = m;
    *out = idx;
    return BRAID_OK;
}

static braid_status compile(jcomp *j, tv s, int depth, int32_t *out) {
    if (depth > SCHEMA_MAX_DEPTH) return bd_error(BRAID_E_RANGE, "json schema: nested deeper than %d", SCHEMA_MAX_DEPTH);
    if (s.k == TV_BOOL) {
        *out = s.u.i ? JN_ANY : JN_NEVER;
        return BRAID_OK;
    }
    if (s.k != TV_DICT) return bd_error(BRAID_E_INVALID, "json schema: a schema must be an object or a boolean");
    tdict *d = s.u.m;
    int validating = 0; /* keywords other than annotations, $ref and the combinators */
    for (size_t i = 0; i < d->n; i++) {
        const char *k = d->k[i].u.s.p;
        size_t n = d->k[i].u.s.n;
        if (!is_supported(k, n))
            return bd_error(BRAID_E_UNSUPPORTED, "json schema: keyword \"%.*s\" is not supported by constrained "
                            "decoding", (int)(n > 100 ? 100 : n), k);
        if (!is_annotation(k, n) && !(n == 4 && !memcmp(k, "$ref", 4)) && !(n == 5 && !memcmp(k, "anyOf", 5)) &&
            !(n == 5 && !memcmp(k, "oneOf", 5)) && !(n == 8 && !memcmp(k, "nullable", 8)))
            validating = 1;
    }
    tv *nullable = get(s, "nullable");
    if (nullable && nullable->k != TV_BOOL) return bd_error(BRAID_E_INVALID, "json schema: nullable must be a boolean");
    int32_t node = JN_NEVER;
    tv *ref = get(s, "$ref"), *any = get(s, "anyOf"), *one = get(s, "oneOf");
    if ((ref != NULL) + (any != NULL) + (one != NULL) > 1 || ((ref || any || one) && validating))
        return bd_error(BRAID_E_UNSUPPORTED, "json schema: $ref / anyOf / oneOf combined with other validation "
                        "keywords (an intersection) is not supported");
    if (ref) {
        BD_TRY(compile_ref(j, *ref, depth, &node));
    } else if (any || one) {
        tv *l = any ? any : one;
        if (l->k != TV_LIST) return bd_error(BRAID_E_INVALID, "json schema: anyOf/oneOf must be a list");
        BD_TRY(compile_anyof(j, l->u.l->v, l->u.l->n, depth, &node));
    } else {
        unsigned types;
        BD_TRY(get_types(s, &types));
        tv *en = get(s, "enum"), *cn = get(s, "const");
        if (en && en->k != TV_LIST) return bd_error(BRAID_E_INVALID, "json schema: enum must be a list");
        if (cn) {
            BD_TRY(compile_literals(j, cn, 1, types, &node));
        } else if (en) {
            BD_TRY(compile_literals(j, en->u.l->v, en->u.l->n, types, &node));
        } else {
            if (!types) { /* the keywords present say which kind is meant */
                if (get(s, "properties") || get(s, "required") || get(s, "additionalProperties")) types = 1u << JK_OBJECT;
                else if (get(s, "items") || get(s, "prefixItems") || get(s, "minItems") || get(s, "maxItems"))
                    types = 1u << JK_ARRAY;
                else if (get(s, "minLength") || get(s, "maxLength")) types = 1u << JK_STRING;
            }
            if (!types) {
                node = JN_ANY;
            } else {
                /* "integer" inside "number" adds nothing */
                if ((types & (1u << JK_NUMBER)) && (types & (1u << JK_INTEGER))) types &= ~(1u << JK_INTEGER);
                int32_t alts[8], m = 0;
                for (unsigned b = 0; b < 18; b++)
                    if (types & (1u << b)) BD_TRY(compile_type(j, s, 1u << b, depth, &alts[m++]));
                if (m == 1) {
                    node = alts[0];
                } else {
                    int32_t *a = aalloc(j, (size_t)m * sizeof *a);
                    if (!a) return nomem();
                    memcpy(a, alts, (size_t)m * sizeof *a);
                    BD_TRY(new_node(j->c, JK_ANYOF, &node));
                    j->c->nodes[node].alts = a;
                    j->c->nodes[node].n_alts = m;
                }
            }
        }
    }
    if (nullable && nullable->u.i && node != JN_NULL) {
        int32_t *a = aalloc(j, 2 * sizeof *a);
        if (!a) return nomem();
        a[0] = node;
        a[1] = JN_NULL;
        int32_t idx;
        BD_TRY(new_node(j->c, JK_ANYOF, &idx));
        j->c->nodes[idx].alts = a;
        j->c->nodes[idx].n_alts = 2;
        node = idx;
    }
    *out = node;
    return BRAID_OK;
}

/* ---- built-ins and the public calls --------------------------------------------------------------------------- */

static braid_status add_builtins(jcomp *j) {
    int32_t idx;
    BD_TRY(new_node(j->c, JK_NEVER, &idx));
    BD_TRY(new_node(j->c, JK_ANY, &idx));
    BD_TRY(new_node(j->c, JK_OBJECT, &idx)); /* JN_ANYOBJ: any keys, any values */
    j->c->nodes[idx].additional = JN_ANY;
    BD_TRY(new_node(j->c, JK_ARRAY, &idx)); /* JN_ANYARR */
    j->c->nodes[idx].items = JN_ANY;
    BD_TRY(new_node(j->c, JK_STRING, &idx));
    BD_TRY(new_node(j->c, JK_NUMBER, &idx));
    static const char *const tf[] = {"false", "true"}, *const nul[] = {"null"};
    static uint32_t tf_len[] = {5, 4}, nul_len[] = {4};
    BD_TRY(new_node(j->c, JK_LITERALS, &idx)); /* JN_BOOL */
    j->c->nodes[idx].lit = (const char **)tf;
    j->c->nodes[idx].lit_len = tf_len;
    j->c->nodes[idx].n_lit = 2;
    BD_TRY(new_node(j->c, JK_LITERALS, &idx)); /* JN_NULL */
    j->c->nodes[idx].lit = (const char **)nul;
    j->c->nodes[idx].lit_len = nul_len;
    j->c->nodes[idx].n_lit = 1;
    return BRAID_OK;
}

void braid_json_constraint_free(braid_json_constraint *c) {
    if (!c) return;
    if (c->arena) {
        tpl_arena_free(c->arena);
        bd_free(c->arena);
    }
    bd_free(c->nodes);
    bd_free(c);
}

braid_status braid_json_constraint_new(const char *schema, size_t len, braid_json_constraint **out) {
    if (!out) return bd_error(BRAID_E_INVALID, "braid_json_constraint_new: NULL out");
    *out = NULL;
    braid_json_constraint *c = bd_calloc(1, sizeof *c);
    if (!c) return nomem();
    c->arena = bd_calloc(1, sizeof *c->arena);
    braid_status s = c->arena ? BRAID_OK : nomem();
    if (s == BRAID_OK) c->arena->limit = (size_t)256 << 20;
    jcomp j = {.c = c};
    if (s == BRAID_OK) s = add_builtins(&j);
    if (s == BRAID_OK && !schema) {
        c->root = JN_ANYOBJ;
    } else if (s == BRAID_OK) {
        s = tpl_json_parse(c->arena, "json schema", schema, len, &j.doc);
        if (s == BRAID_OK) s = compile(&j, j.doc, 0, &c->root);
        if (s == BRAID_OK && c->root == JN_NEVER)
            s = bd_error(BRAID_E_INVALID, "json schema: no document can match the schema");
    }
    if (s == BRAID_OK) { /* a schema that only refers to itself (a $ref cycle with no value) matches nothing */
        braid_json_matcher *m = NULL;
        s = braid_json_matcher_new(c, &m);
        int any = 0;
        for (int b = 0; s == BRAID_OK && b < 256 && !any; b++) {
            char ch = (char)b;
            jlist *l;
            if (ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r') continue; /* leading whitespace proves nothing */
            any = bd_jm_try(m, (const uint8_t *)&ch, 1, &l);
        }
        braid_json_matcher_free(m);
        if (s == BRAID_OK && !any) s = bd_error(BRAID_E_INVALID, "json schema: no document can match the schema");
    }
    bd_free(j.refs);
    if (s != BRAID_OK) {
        braid_json_constraint_free(c);
        return s;
    }
    *out = c;
    return BRAID_OK;
}
