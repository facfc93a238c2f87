/* json_match.c — braid_json_matcher: decides, one byte at a time, whether the bytes so far are a prefix of a
 * document the constraint accepts (json_schema.c compiles the constraint).
 *
 * The matcher is a pushdown automaton run on a small set of threads. A thread is a stack of frames, one per
 * JSON value being written (the document's root at the bottom); each frame knows its node and where inside
 * the value it is (phase, counters, the range of literals still possible). A byte is fed to every thread; a
 * thread that cannot take it dies; an anyOf forks a thread per alternative when its value starts (so the
 * first bytes decide the branch, and branches with the same prefix run side by side). Threads that end up
 * equal are merged. Because every frame only takes bytes that can still be completed (a required key is
 * always writable, a string can always close, a number can always stop), every live state has a completion:
 * a sampler that only emits bytes the matcher takes can always finish the document.
 *
 * Numbers and literals such as enum numbers have no closing byte: a frame that is complete but cannot take
 * the byte pops and hands the byte to its parent. JSON values are otherwise prefix-free, so this is never a
 * choice between two readings.
 *
 * Whitespace is allowed between tokens (after { [ , : and before } ] , :, and around the root): one space, or a
 * newline and at most JM_MAX_WS spaces or tabs; strings are well-formed UTF-8 (no overlongs, no surrogates, no control characters;
 * \u escapes of surrogates are refused, so a length counts characters as Python does). */
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "engine/json_constraint.h"

enum { R_OK, R_REJECT, R_POP, R_DONE, R_CHILD };

/* object phases */
enum { O_OPEN = 0, O_FIRST, O_NEXT, O_KEY, O_COLON, O_VAL, O_AFTER };
/* array phases */
enum { A_OPEN = 0, A_FIRST, A_NEXT, A_AFTER };
/* string phases */
enum { S_OPEN = 0, S_IN };
/* number phases: start, after '-', integer digits, after a leading 0, after '.', fraction digits, after e,
 * after the exponent's sign, exponent digits */
enum { N_START = 0, N_MINUS, N_INT, N_ZERO, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

#define MAX_ANYOF_NEST 16

static int is_ws(uint8_t ch) { return ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r'; }
static int is_digit(uint8_t ch) { return ch >= '0' && ch <= '9'; }
static int is_hex(uint8_t ch) { return is_digit(ch) || ((ch | 32) >= 'a' && (ch | 32) <= 'f'); }

/* A whitespace byte in a phase that allows it. A run is one space, or a newline and at most JM_MAX_WS spaces
 * or tabs of indentation (llama.cpp's JSON grammar bounds it the same way): enough for compact and pretty
 * printed JSON, too little to loop in. f->ws: 0 nothing yet, 1 + the indentation after a newline, WS_CLOSED
 * after a space. */
#define WS_CLOSED 255
static int take_ws(jframe *f, uint8_t ch) {
    if (f->ws == 0) {
        if (ch == ' ') f->ws = WS_CLOSED;
        else if (ch == '\n') f->ws = 1;
        else return R_REJECT;
        return R_OK;
    }
    if (f->ws == WS_CLOSED || f->ws > JM_MAX_WS || (ch != ' ' && ch != '\t')) return R_REJECT;
    f->ws++;
    return R_OK;
}

/* ---- strings ------------------------------------------------------------------------------------------------ */

/* One byte of string content (not the closing quote) for frame f. Counts characters in f->pos (at their first
 * byte); max < 0: no limit. escapes: whether backslash escapes are allowed. */
static int str_byte(jframe *f, uint8_t ch, int32_t max, int escapes) {
    if (f->u8) {
        if (ch < f->u8lo || ch > f->u8hi) return R_REJECT;
        f->u8--;
        f->u8lo = 0x80;
        f->u8hi = 0xBF;
        return R_OK;
    }
    if (f->esc == 1) {
        if (ch == 'u') {
            f->esc = 2;
            return R_OK;
        }
        if (ch == '"' || ch == '\\' || ch == '/' || ch == 'b' || ch == 'f' || ch == 'n' || ch == 'r' || ch == 't') {
            f->esc = 0;
            return R_OK;
        }
        return R_REJECT;
    }
    if (f->esc >= 2) {
        if (!is_hex(ch)) return R_REJECT;
        if (f->esc == 2) f->hexd = (ch | 32) == 'd';
        else if (f->esc == 3 && f->hexd && ((ch >= '8' && ch <= '9') || ((ch | 32) >= 'a' && (ch | 32) <= 'f')))
            return R_REJECT; /* \uD800-\uDFFF: a surrogate */
        f->esc = f->esc == 5 ? 0 : f->esc + 1;
        return R_OK;
    }
    if (ch < 0x20 || ch == '"') return R_REJECT;
    if (max >= 0 && f->pos >= max) return R_REJECT;
    if (ch == '\\') {
        if (!escapes) return R_REJECT;
        f->esc = 1;
    } else if (ch >= 0x80) {
        if (ch >= 0xC2 && ch <= 0xDF) f->u8 = 1, f->u8lo = 0x80, f->u8hi = 0xBF;
        else if (ch == 0xE0) f->u8 = 2, f->u8lo = 0xA0, f->u8hi = 0xBF;
        else if (ch == 0xED) f->u8 = 2, f->u8lo = 0x80, f->u8hi = 0x9F;
        else if (ch >= 0xE1 && ch <= 0xEF) f->u8 = 2, f->u8lo = 0x80, f->u8hi = 0xBF;
        else if (ch == 0xF0) f->u8 = 3, f->u8lo = 0x90, f->u8hi = 0xBF;
        else if (ch >= 0xF1 && ch <= 0xF3) f->u8 = 3, f->u8lo = 0x80, f->u8hi = 0xBF;
        else if (ch == 0xF4) f->u8 = 3, f->u8lo = 0x80, f->u8hi = 0x8F;
        else return R_REJECT;
    }
    f->pos++;
    return R_OK;
}

static int step_string(const jnode *nd, jframe *f, uint8_t ch) {
    if (f->phase == S_OPEN) {
        if (ch != '"') return R_REJECT;
        f->phase = S_IN;
        return R_OK;
    }
    if (ch == '"' && !f->u8 && !f->esc) return f->pos >= nd->min_len ? R_DONE : R_REJECT;
    return str_byte(f, ch, nd->max_len, 1);
}

/* ---- numbers ------------------------------------------------------------------------------------------------ */

static int num_complete(const jframe *f) {
    return f->phase == N_INT || f->phase == N_ZERO || f->phase == N_FRAC || f->phase == N_EXP;
}

static int step_number(int integer, jframe *f, uint8_t ch) {
    switch (f->phase) {
    case N_START:
    case N_MINUS:
        if (ch == '-' && f->phase == N_START) {
            f->phase = N_MINUS;
            return R_OK;
        }
        if (ch == '0') f->phase = N_ZERO;
        else if (ch >= '1' && ch <= '9') f->phase = N_INT, f->i = 1;
        else return R_REJECT;
        return R_OK;
    case N_INT:
    case N_ZERO:
        if (f->phase == N_INT && is_digit(ch)) {
            if (f->i >= JM_MAX_DIGITS) return R_POP; /* the parent then refuses the digit */
            f->i++;
            return R_OK;
        }
        if (!integer && ch == '.') {
            f->phase = N_DOT;
            return R_OK;
        }
        if (!integer && (ch == 'e' || ch == 'E')) {
            f->phase = N_E;
            return R_OK;
        }
        return R_POP;
    case N_DOT:
        if (!is_digit(ch)) return R_REJECT;
        f->phase = N_FRAC;
        f->i = 1;
        return R_OK;
    case N_FRAC:
        if (is_digit(ch)) {
            if (f->i >= JM_MAX_DIGITS) return R_POP;
            f->i++;
            return R_OK;
        }
        if (ch == 'e' || ch == 'E') {
            f->phase = N_E;
            return R_OK;
        }
        return R_POP;
    case N_E:
    case N_ESIGN:
        if (f->phase == N_E && (ch == '+' || ch == '-')) {
            f->phase = N_ESIGN;
            return R_OK;
        }
        if (!is_digit(ch)) return R_REJECT;
        f->phase = N_EXP;
        f->i = 1;
        return R_OK;
    case N_EXP:
        if (is_digit(ch)) {
            if (f->i >= JM_MAX_EXP_DIGITS) return R_POP;
            f->i++;
            return R_OK;
        }
        return R_POP;
    }
    return R_REJECT;
}

/* ---- literals ----------------------------------------------------------------------------------------------- */

/* The literal in [lo, hi) that ends exactly at pos, or -1 (sorted: a complete one comes first). */
static int32_t lit_complete(const jnode *nd, const jframe *f) {
    return f->lo < f->hi && nd->lit_len[f->lo] == (uint32_t)f->pos ? f->lo : -1;
}

/* The byte of literal i at pos, as a key that sorts like the literals: -1 when it ends there. */
static int lit_byte(const jnode *nd, int32_t i, int32_t pos) {
    return nd->lit_len[i] > (uint32_t)pos ? (uint8_t)nd->lit[i][pos] : -1;
}

static int step_literal(const jnode *nd, jframe *f, uint8_t ch) {
    /* The literals of [lo, hi) share their first pos bytes and are sorted, so their bytes at pos ascend: the
     * ones that continue with ch are a sub-range, found by two binary searches (an enum may be long). */
    int32_t a = f->lo, b = f->hi;
    while (a < b) {
        int32_t mid = a + (b - a) / 2;
        if (lit_byte(nd, mid, f->pos) < (int)ch) a = mid + 1;
        else b = mid;
    }
    int32_t lo = a;
    b = f->hi;
    while (a < b) {
        int32_t mid = a + (b - a) / 2;
        if (lit_byte(nd, mid, f->pos) <= (int)ch) a = mid + 1;
        else b = mid;
    }
    int32_t hi = a;
    if (lo >= hi) return lit_complete(nd, f) >= 0 ? R_POP : R_REJECT;
    f->lo = lo;
    f->hi = hi;
    f->pos++;
    /* one literal left and it is complete: nothing can extend it */
    if (hi - lo == 1 && nd->lit_len[lo] == (uint32_t)f->pos) return R_DONE;
    return R_OK;
}

/* ---- objects ------------------------------------------------------------------------------------------------ */

/* The first required property at or after from (n_props if none). */
static int32_t first_required(const jnode *nd, int32_t from) {
    while (from < nd->n_props && !nd->props[from].required) from++;
    return from;
}

/* Property j may come next: no required one is skipped. */
static int selectable(const jnode *nd, const jframe *f, int32_t j) { return j >= f->i && j <= first_required(nd, f->i); }

static int obj_can_close(const jnode *nd, const jframe *f) { return first_required(nd, f->i) == nd->n_props; }

static int obj_more_keys(const jnode *nd, const jframe *f) {
    return f->i < nd->n_props || (nd->additional >= 0 && obj_can_close(nd, f));
}

static int step_key(const jnode *nd, jframe *f, uint8_t ch) {
    /* declared keys: narrow the range of keys (sorted by bytes) that begin with the bytes so far */
    int32_t lo = f->hi, hi = f->lo, exact = -1, lit_alive = 0;
    for (int32_t r = f->lo; r < f->hi; r++) {
        const jprop *p = &nd->props[nd->by_key[r]];
        if (p->key_len <= (uint32_t)f->pos || (uint8_t)p->key[f->pos] != ch) continue;
        if (lo > r) lo = r;
        hi = r + 1;
        if (p->key_len == (uint32_t)f->pos + 1) exact = nd->by_key[r];
        else if (selectable(nd, f, nd->by_key[r])) lit_alive = 1;
    }
    if (exact >= 0) { /* the byte closes a declared key: that property, if it may come now */
        if (!selectable(nd, f, exact)) return R_REJECT;
        f->key = exact;
        f->i = exact + 1;
        f->phase = O_COLON;
        f->ws = 0;
        return R_OK;
    }
    /* an additional key: any string without escapes that is none of the declared ones */
    int gen_alive = 0;
    if (f->gen) {
        if (ch == '"' && !f->u8) {
            f->key = -1;
            f->i = nd->n_props; /* additional properties come last */
            f->phase = O_COLON;
            f->ws = 0;
            return R_OK;
        }
        int32_t pos = f->pos; /* str_byte counts characters in pos; here pos counts bytes */
        gen_alive = str_byte(f, ch, -1, 0) == R_OK;
        f->pos = pos;
    }
    if (!lit_alive && !gen_alive) return R_REJECT;
    f->lo = lo;
    f->hi = hi;
    f->gen = (uint8_t)gen_alive;
    f->pos++;
    return R_OK;
}

static int step_object(const jnode *nd, jframe *f, uint8_t ch, int32_t *child) {
    switch (f->phase) {
    case O_OPEN:
        if (ch != '{') return R_REJECT;
        f->phase = O_FIRST;
        return R_OK;
    case O_FIRST:
    case O_NEXT:
        if (is_ws(ch)) return take_ws(f, ch);
        if (ch == '}' && f->phase == O_FIRST) return obj_can_close(nd, f) ? R_DONE : R_REJECT;
        if (ch != '"' || !obj_more_keys(nd, f)) return R_REJECT;
        f->phase = O_KEY;
        f->ws = 0;
        f->pos = 1;
        f->lo = 0;
        f->hi = nd->n_props;
        f->gen = nd->additional >= 0 && obj_can_close(nd, f);
        f->u8 = f->esc = 0;
        return R_OK;
    case O_KEY:
        return step_key(nd, f, ch);
    case O_COLON:
        if (is_ws(ch)) return take_ws(f, ch);
        if (ch != ':') return R_REJECT;
        f->phase = O_VAL;
        f->ws = 0;
        return R_OK;
    case O_VAL:
        if (is_ws(ch)) return take_ws(f, ch);
        *child = f->key >= 0 ? nd->props[f->key].node : nd->additional;
        f->phase = O_AFTER;
        f->ws = 0;
        return R_CHILD;
    case O_AFTER:
        if (is_ws(ch)) return take_ws(f, ch);
        if (ch == ',' && obj_more_keys(nd, f)) {
            f->phase = O_NEXT;
            f->ws = 0;
            return R_OK;
        }
        if (ch == '}' && obj_can_close(nd, f)) return R_DONE;
        return R_REJECT;
    }
    return R_REJECT;
}

/* ---- arrays ------------------------------------------------------------------------------------------------- */

static int32_t item_node(const jnode *nd, int32_t i) {
    if (nd->max_items >= 0 && i >= nd->max_items) return -1;
    return i < nd->n_prefix ? nd->prefix[i] : nd->items;
}

static int step_array(const jnode *nd, jframe *f, uint8_t ch, int32_t *child) {
    switch (f->phase) {
    case A_OPEN:
        if (ch != '[') return R_REJECT;
        f->phase = A_FIRST;
        return R_OK;
    case A_FIRST:
    case A_NEXT:
        if (is_ws(ch)) return take_ws(f, ch);
        if (ch == ']' && f->phase == A_FIRST) return nd->min_items == 0 ? R_DONE : R_REJECT;
        *child = item_node(nd, f->i);
        if (*child < 0) return R_REJECT;
        f->i++;
        f->phase = A_AFTER;
        f->ws = 0;
        return R_CHILD;
    case A_AFTER:
        if (is_ws(ch)) return take_ws(f, ch);
        if (ch == ',' && item_node(nd, f->i) >= 0) {
            f->phase = A_NEXT;
            f->ws = 0;
            return R_OK;
        }
        if (ch == ']' && f->i >= nd->min_items) return R_DONE;
        return R_REJECT;
    }
    return R_REJECT;
}

/* ---- threads ------------------------------------------------------------------------------------------------ */

static void frame_init(const braid_json_constraint *c, jframe *f, int32_t node) {
    memset(f, 0, sizeof *f);
    f->node = node;
    f->key = -1;
    f->hi = c->nodes[node].kind == JK_LITERALS ? c->nodes[node].n_lit : 0;
}

static void thread_copy(jthread *dst, const jthread *src) {
    dst->depth = src->depth;
    memcpy(dst->f, src->f, (size_t)src->depth * sizeof *src->f);
}

/* One step of the top frame of t. */
static int step_frame(const braid_json_constraint *c, jthread *t, uint8_t ch, int32_t *child) {
    jframe *f = &t->f[t->depth - 1];
    if (t->depth == 1) { /* the root: whitespace, the value, whitespace */
        if (is_ws(ch)) return take_ws(f, ch);
        if (f->phase != 0) return R_REJECT;
        f->phase = 1;
        f->ws = 0;
        *child = f->node;
        return R_CHILD;
    }
    const jnode *nd = &c->nodes[f->node];
    switch (nd->kind) {
    case JK_ANY: {
        int32_t n;
        if (ch == '{') n = JN_ANYOBJ;
        else if (ch == '[') n = JN_ANYARR;
        else if (ch == '"') n = JN_STR;
        else if (ch == '-' || is_digit(ch)) n = JN_NUM;
        else if (ch == 't' || ch == 'f') n = JN_BOOL;
        else if (ch == 'n') n = JN_NULL;
        else return R_REJECT;
        frame_init(c, f, n);
        return step_frame(c, t, ch, child);
    }
    case JK_OBJECT: return step_object(nd, f, ch, child);
    case JK_ARRAY: return step_array(nd, f, ch, child);
    case JK_STRING: return step_string(nd, f, ch);
    case JK_NUMBER: return step_number(0, f, ch);
    case JK_INTEGER: return step_number(1, f, ch);
    case JK_LITERALS: return step_literal(nd, f, ch);
    default: return R_REJECT; /* JK_NEVER; JK_ANYOF never sits in a frame */
    }
}

static void feed_thread(const braid_json_constraint *c, jlist *l, int32_t k, uint8_t ch);

/* Pushes the value of node on thread k of l and feeds it ch; an anyOf forks a thread per alternative. */
static void start_value(const braid_json_constraint *c, jlist *l, int32_t k, int32_t node, uint8_t ch, int nest) {
    const jnode *nd = &c->nodes[node];
    if (nd->kind == JK_ANYOF) {
        if (nest >= MAX_ANYOF_NEST) {
            l->t[k].depth = 0;
            return;
        }
        for (int32_t a = 1; a < nd->n_alts; a++) {
            if (l->n >= JM_MAX_THREADS) break; /* no room: that alternative is not followed */
            int32_t m = l->n++;
            thread_copy(&l->t[m], &l->t[k]);
            start_value(c, l, m, nd->alts[a], ch, nest + 1);
        }
        start_value(c, l, k, nd->alts[0], ch, nest + 1);
        return;
    }
    jthread *t = &l->t[k];
    if (nd->kind == JK_NEVER || t->depth >= JM_MAX_DEPTH) {
        t->depth = 0;
        return;
    }
    frame_init(c, &t->f[t->depth++], node);
    feed_thread(c, l, k, ch);
}

/* Feeds ch to thread k of l (depth 0 afterwards: it died). */
static void feed_thread(const braid_json_constraint *c, jlist *l, int32_t k, uint8_t ch) {
    for (;;) {
        jthread *t = &l->t[k];
        int32_t child = -1;
        switch (step_frame(c, t, ch, &child)) {
        case R_OK: return;
        case R_REJECT: t->depth = 0; return;
        case R_DONE: t->depth--; return; /* the parent already waits in its after-value phase */
        case R_POP:
            t->depth--;
            if (t->depth == 0) return;
            continue;
        case R_CHILD: start_value(c, l, k, child, ch, 0); return;
        }
    }
}

static int thread_eq(const jthread *a, const jthread *b) {
    return a->depth == b->depth && !memcmp(a->f, b->f, (size_t)a->depth * sizeof *a->f);
}

/* Feeds ch to every thread of l in place (a fork appends a thread already fed): dead threads dropped, equal
 * ones merged. In place, so a trial feed of a token copies the state once, not once per byte. */
static void feed_list(const braid_json_constraint *c, jlist *dst, uint8_t ch) {
    const int32_t n0 = dst->n;
    for (int32_t i = 0; i < n0; i++) feed_thread(c, dst, i, ch);
    int32_t n = 0;
    for (int32_t i = 0; i < dst->n; i++) {
        if (dst->t[i].depth == 0) continue;
        int dup = 0;
        for (int32_t j = 0; j < n && !dup; j++) dup = thread_eq(&dst->t[j], &dst->t[i]);
        if (dup) continue;
        if (n != i) thread_copy(&dst->t[n], &dst->t[i]);
        n++;
    }
    dst->n = n;
}

static void list_copy(jlist *dst, const jlist *src) {
    dst->n = src->n;
    for (int32_t i = 0; i < src->n; i++) thread_copy(&dst->t[i], &src->t[i]);
}

int bd_jm_try(braid_json_matcher *m, const uint8_t *p, size_t n, jlist **out) {
    jlist *a = m->a;
    list_copy(a, &m->cur);
    for (size_t i = 0; i < n && a->n > 0; i++) feed_list(m->c, a, p[i]);
    *out = a;
    return a->n > 0;
}

int bd_jm_list_complete(const braid_json_constraint *c, const jlist *l) {
    for (int32_t i = 0; i < l->n; i++) {
        const jthread *t = &l->t[i];
        int32_t d = t->depth;
        while (d > 1) { /* a number or a literal that can stop here pops on the end */
            const jframe *f = &t->f[d - 1];
            const jnode *nd = &c->nodes[f->node];
            int can_end = ((nd->kind == JK_NUMBER || nd->kind == JK_INTEGER) && num_complete(f)) ||
                          (nd->kind == JK_LITERALS && lit_complete(nd, f) >= 0);
            if (!can_end) break;
            d--;
        }
        if (d == 1 && t->f[0].phase == 1) return 1;
    }
    return 0;
}

int bd_jm_closed(const braid_json_matcher *m) {
    if (m->cur.n == 0) return 0;
    for (int32_t i = 0; i < m->cur.n; i++)
        if (m->cur.t[i].depth != 1 || m->cur.t[i].f[0].phase != 1) return 0;
    return 1;
}

/* ---- public calls -------------------------------------------------------------------------------------------- */

void braid_json_matcher_reset(braid_json_matcher *m) {
    if (!m) return;
    m->cur.n = 1;
    m->cur.t[0].depth = 1;
    frame_init(m->c, &m->cur.t[0].f[0], m->c->root);
    m->version++;
}

braid_status braid_json_matcher_new(const braid_json_constraint *c, braid_json_matcher **out) {
    if (!c || !out) return bd_error(BRAID_E_INVALID, "braid_json_matcher_new: NULL argument");
    *out = NULL;
    braid_json_matcher *m = bd_calloc(1, sizeof *m);
    jlist *a = bd_malloc(sizeof *a);
    if (!m || !a) {
        bd_free(m);
        bd_free(a);
        return bd_error(BRAID_E_NOMEM, "braid_json_matcher_new: out of memory");
    }
    m->c = c;
    m->a = a;
    m->first_version = (uint64_t)-1;
    braid_json_matcher_reset(m);
    *out = m;
    return BRAID_OK;
}

void braid_json_matcher_free(braid_json_matcher *m) {
    if (!m) return;
    bd_free(m->a);
    bd_free(m->mask);
    bd_free(m);
}

braid_status braid_json_matcher_feed(braid_json_matcher *m, const char *bytes, size_t len) {
    if (!m || (!bytes && len)) return bd_error(BRAID_E_INVALID, "braid_json_matcher_feed: NULL argument");
    jlist *l;
    if (!bd_jm_try(m, (const uint8_t *)bytes, len, &l))
        return bd_error(BRAID_E_INVALID, "json constraint: the bytes do not continue a valid document");
    if (len) {
        list_copy(&m->cur, l);
        m->version++;
    }
    return BRAID_OK;
}

int braid_json_matcher_complete(const braid_json_matcher *m) { return m && bd_jm_list_complete(m->c, &m->cur); }
