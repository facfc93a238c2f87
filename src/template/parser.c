/* parser.c — turns the token stream into the syntax tree, following Jinja2's grammar and precedence
 * (parser.py): condexpr < or < and < not < comparisons and `in` < + - < ~ < * / // % < ** < unary - + <
 * postfix (.attr, [item], call) < filters and tests. Statements: if/elif/else, for (with else, a filter
 * condition and `recursive`), set (also the block form with filters), macro, call, filter, with, print,
 * break/continue (loopcontrols) and Hugging Face's generation block.
 *
 * Jinja2 refuses at compile time a filter or test it does not know, except directly inside an if (its test
 * and bodies) or a conditional expression, where the error waits until the filter is actually called; the
 * parser records each unknown one with that "soft" flag and refuses the template for any hard one. */
#include <stdio.h>
#include <string.h>

#include "base/status.h"
#include "template/tpl.h"

typedef struct ps {
    tpl_arena *a;
    const tpl_tok *t;
    size_t n, i;
    int soft;          /* inside an if / conditional expression (see the top comment) */
    int loop_depth;    /* for bodies around the current statement (break/continue are legal) */
    int depth;         /* recursion guard */
    tpl_node **unknown; size_t nunknown, capunknown; /* filters/tests with unknown names */
} ps;

#define MAX_PARSE_DEPTH 200

static const tpl_tok *cur(const ps *p) { return &p->t[p->i]; }
static const tpl_tok *look(const ps *p) { return &p->t[p->i + 1 < p->n ? p->i + 1 : p->i]; }
static void advance(ps *p) { if (p->i + 1 < p->n) p->i++; }

static const char *tok_desc(const tpl_tok *t) {
    switch (t->type) {
    case TK_EOF: return "end of template";
    case TK_DATA: return "template data";
    case TK_VAR_BEGIN: return "'{{'";
    case TK_VAR_END: return "end of print statement";
    case TK_BLOCK_BEGIN: return "'{%'";
    case TK_BLOCK_END: return "end of statement block";
    case TK_NAME: return "a name";
    case TK_STRING: return "a string";
    case TK_INT: return "an integer";
    case TK_FLOAT: return "a float";
    default: return "an operator";
    }
}

static braid_status pfail(const ps *p, const tpl_tok *t, const char *fmt, const char *arg) {
    char msg[256];
    snprintf(msg, sizeof msg, fmt, arg ? arg : "");
    return bd_error(BRAID_E_FORMAT, "template:%u:%u: syntax error: %s", (unsigned)t->line, (unsigned)t->col, msg);
    (void)p;
}

static int is_name(const tpl_tok *t, const char *s) {
    return t->type == TK_NAME && t->n == strlen(s) && memcmp(t->p, s, t->n) == 0;
}
static int is_op(const tpl_tok *t, uint8_t op) { return t->type == TK_OP && t->op == op; }

static braid_status expect_op(ps *p, uint8_t op, const char *what) {
    if (!is_op(cur(p), op)) {
        char msg[96];
        snprintf(msg, sizeof msg, "expected '%s', got %s", what, tok_desc(cur(p)));
        return pfail(p, cur(p), "%s", msg);
    }
    advance(p);
    return BRAID_OK;
}

static braid_status expect_type(ps *p, uint8_t type) {
    if (cur(p)->type != type) {
        tpl_tok want = {.type = type};
        char msg[128];
        snprintf(msg, sizeof msg, "expected %s, got %s", tok_desc(&want), tok_desc(cur(p)));
        return pfail(p, cur(p), "%s", msg);
    }
    advance(p);
    return BRAID_OK;
}

static braid_status new_node(ps *p, uint8_t type, const tpl_tok *at, tpl_node **out) {
    tpl_node *n = tpl_alloc(p->a, sizeof *n);
    if (!n) return bd_error(BRAID_E_NOMEM, "template: out of memory");
    n->type = type;
    n->line = at->line;
    n->col = at->col;
    *out = n;
    return BRAID_OK;
}

static braid_status nodes_push(ps *p, tpl_nodes *l, tpl_node *x) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        tpl_node **v = tpl_alloc(p->a, cap * sizeof *v);
        if (!v) return bd_error(BRAID_E_NOMEM, "template: out of memory");
        if (l->n) memcpy(v, l->v, l->n * sizeof *v);
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
    return BRAID_OK;
}

static braid_status note_unknown(ps *p, tpl_node *n) {
    if (p->nunknown == p->capunknown) {
        size_t cap = p->capunknown ? p->capunknown * 2 : 8;
        tpl_node **v = tpl_alloc(p->a, cap * sizeof *v);
        if (!v) return bd_error(BRAID_E_NOMEM, "template: out of memory");
        if (p->nunknown) memcpy(v, p->unknown, p->nunknown * sizeof *v);
        p->unknown = v;
        p->capunknown = cap;
    }
    p->unknown[p->nunknown++] = n;
    n->flag |= p->soft ? 2 : 0;
    return BRAID_OK;
}

static braid_status parse_expression(ps *p, int with_condexpr, tpl_node **out);
static braid_status parse_tuple(ps *p, int simplified, int with_condexpr, const char *extra_end,
                                int explicit_parens, int with_namespace, tpl_node **out);
static braid_status parse_unary(ps *p, int with_filter, tpl_node **out);
static braid_status parse_primary(ps *p, int with_namespace, tpl_node **out);
static braid_status parse_postfix(ps *p, tpl_node **node);
static braid_status parse_filter(ps *p, tpl_node **node, int start_inline);
static braid_status subparse(ps *p, const char *const *end, tpl_nodes *body);

/* ---- expressions ------------------------------------------------------------------------------------------ */

static braid_status parse_call_args(ps *p, tpl_node *n) {
    const tpl_tok *open = cur(p);
    BD_TRY(expect_op(p, OP_LPAREN, "("));
    int require_comma = 0;
    size_t kwcap = 0;
    while (!is_op(cur(p), OP_RPAREN)) {
        if (cur(p)->type == TK_EOF) return pfail(p, cur(p), "unexpected end of template in a call", NULL);
        if (require_comma) {
            BD_TRY(expect_op(p, OP_COMMA, ","));
            if (is_op(cur(p), OP_RPAREN)) break;
        }
        if (is_op(cur(p), OP_MUL)) {
            if (n->dyn_args || n->dyn_kwargs) return pfail(p, open, "invalid syntax for function call expression", NULL);
            advance(p);
            BD_TRY(parse_expression(p, 1, &n->dyn_args));
        } else if (is_op(cur(p), OP_POW)) {
            if (n->dyn_kwargs) return pfail(p, open, "invalid syntax for function call expression", NULL);
            advance(p);
            BD_TRY(parse_expression(p, 1, &n->dyn_kwargs));
        } else if (cur(p)->type == TK_NAME && is_op(look(p), OP_ASSIGN)) {
            if (n->dyn_kwargs) return pfail(p, open, "invalid syntax for function call expression", NULL);
            const tpl_tok *k = cur(p);
            advance(p);
            advance(p);
            tpl_node *v = NULL;
            BD_TRY(parse_expression(p, 1, &v));
            if (n->nkw == kwcap) {
                size_t cap = kwcap ? kwcap * 2 : 4;
                tpl_kwarg *kw = tpl_alloc(p->a, cap * sizeof *kw);
                if (!kw) return bd_error(BRAID_E_NOMEM, "template: out of memory");
                if (n->nkw) memcpy(kw, n->kw, n->nkw * sizeof *kw);
                n->kw = kw;
                kwcap = cap;
            }
            n->kw[n->nkw++] = (tpl_kwarg){k->p, k->n, v};
        } else {
            if (n->dyn_args || n->dyn_kwargs || n->nkw)
                return pfail(p, open, "invalid syntax for function call expression", NULL);
            tpl_node *v = NULL;
            BD_TRY(parse_expression(p, 1, &v));
            BD_TRY(nodes_push(p, &n->items, v));
        }
        require_comma = 1;
    }
    return expect_op(p, OP_RPAREN, ")");
}

static braid_status dotted_name(ps *p, tpl_node *n) {
    const tpl_tok *t = cur(p);
    if (t->type != TK_NAME) return pfail(p, t, "expected a name, got %s", tok_desc(t));
    advance(p);
    n->name = t->p;
    n->name_len = t->n;
    while (is_op(cur(p), OP_DOT)) {
        advance(p);
        const tpl_tok *u = cur(p);
        if (u->type != TK_NAME) return pfail(p, u, "expected a name, got %s", tok_desc(u));
        advance(p);
        char *s = tpl_alloc(p->a, n->name_len + 1 + u->n + 1);
        if (!s) return bd_error(BRAID_E_NOMEM, "template: out of memory");
        memcpy(s, n->name, n->name_len);
        s[n->name_len] = '.';
        memcpy(s + n->name_len + 1, u->p, u->n);
        n->name = s;
        n->name_len += 1 + u->n;
    }
    return BRAID_OK;
}

static braid_status parse_filter(ps *p, tpl_node **node, int start_inline) {
    while (is_op(cur(p), OP_PIPE) || start_inline) {
        if (!start_inline) advance(p);
        tpl_node *f = NULL;
        BD_TRY(new_node(p, N_FILTER, cur(p), &f));
        BD_TRY(dotted_name(p, f));
        if (is_op(cur(p), OP_LPAREN)) BD_TRY(parse_call_args(p, f));
        f->a = *node;
        if (!tpl_filter_exists(f->name, f->name_len)) BD_TRY(note_unknown(p, f));
        *node = f;
        start_inline = 0;
    }
    return BRAID_OK;
}

static braid_status parse_test(ps *p, tpl_node **node) {
    const tpl_tok *is = cur(p);
    advance(p);
    int negated = 0;
    if (is_name(cur(p), "not")) { advance(p); negated = 1; }
    tpl_node *t = NULL;
    BD_TRY(new_node(p, N_TEST, is, &t));
    BD_TRY(dotted_name(p, t));
    const tpl_tok *c = cur(p);
    if (is_op(c, OP_LPAREN)) BD_TRY(parse_call_args(p, t));
    else if ((c->type == TK_NAME || c->type == TK_STRING || c->type == TK_INT || c->type == TK_FLOAT ||
              is_op(c, OP_LPAREN) || is_op(c, OP_LBRACKET) || is_op(c, OP_LBRACE)) &&
             !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
        if (is_name(c, "is")) return pfail(p, c, "You cannot chain multiple tests with is", NULL);
        tpl_node *arg = NULL;
        BD_TRY(parse_primary(p, 0, &arg));
        BD_TRY(parse_postfix(p, &arg));
        BD_TRY(nodes_push(p, &t->items, arg));
    }
    t->a = *node;
    if (!tpl_test_exists(t->name, t->name_len)) BD_TRY(note_unknown(p, t));
    if (negated) {
        tpl_node *n = NULL;
        BD_TRY(new_node(p, N_UNARY, is, &n));
        n->op = OP_NOT;
        n->a = t;
        t = n;
    }
    *node = t;
    return BRAID_OK;
}

static braid_status parse_subscribed(ps *p, tpl_node **out) {
    const tpl_tok *start = cur(p);
    tpl_node *args[3] = {NULL, NULL, NULL};
    if (is_op(cur(p), OP_COLON)) {
        advance(p);
    } else {
        tpl_node *node = NULL;
        BD_TRY(parse_expression(p, 1, &node));
        if (!is_op(cur(p), OP_COLON)) { *out = node; return BRAID_OK; }
        advance(p);
        args[0] = node;
    }
    if (!is_op(cur(p), OP_COLON) && !is_op(cur(p), OP_RBRACKET) && !is_op(cur(p), OP_COMMA))
        BD_TRY(parse_expression(p, 1, &args[1]));
    if (is_op(cur(p), OP_COLON)) {
        advance(p);
        if (!is_op(cur(p), OP_RBRACKET) && !is_op(cur(p), OP_COMMA)) BD_TRY(parse_expression(p, 1, &args[2]));
    }
    tpl_node *s = NULL;
    BD_TRY(new_node(p, N_SLICE, start, &s));
    s->a = args[0];
    s->b = args[1];
    s->c = args[2];
    *out = s;
    return BRAID_OK;
}

static braid_status parse_postfix(ps *p, tpl_node **node) {
    for (;;) {
        const tpl_tok *t = cur(p);
        if (is_op(t, OP_DOT)) {
            advance(p);
            const tpl_tok *at = cur(p);
            tpl_node *n = NULL;
            if (at->type == TK_NAME) {
                advance(p);
                BD_TRY(new_node(p, N_GETATTR, t, &n));
                n->a = *node;
                n->name = at->p;
                n->name_len = at->n;
            } else if (at->type == TK_INT) {
                advance(p);
                tpl_node *k = NULL;
                BD_TRY(new_node(p, N_CONST, at, &k));
                k->value = tv_int(at->ival);
                BD_TRY(new_node(p, N_GETITEM, t, &n));
                n->a = *node;
                n->b = k;
            } else {
                return pfail(p, at, "expected name or number", NULL);
            }
            *node = n;
        } else if (is_op(t, OP_LBRACKET)) {
            advance(p);
            tpl_node *n = NULL, *tuple = NULL;
            BD_TRY(new_node(p, N_GETITEM, t, &n));
            size_t count = 0;
            tpl_node *first = NULL;
            while (!is_op(cur(p), OP_RBRACKET)) {
                if (cur(p)->type == TK_EOF) return pfail(p, cur(p), "unexpected end of template in a subscript", NULL);
                if (count) BD_TRY(expect_op(p, OP_COMMA, ","));
                tpl_node *arg = NULL;
                BD_TRY(parse_subscribed(p, &arg));
                if (count == 0) first = arg;
                else {
                    if (!tuple) {
                        BD_TRY(new_node(p, N_TUPLE, t, &tuple));
                        BD_TRY(nodes_push(p, &tuple->items, first));
                    }
                    BD_TRY(nodes_push(p, &tuple->items, arg));
                }
                count++;
            }
            advance(p);
            if (count == 0) return pfail(p, t, "expected a subscript expression", NULL);
            n->a = *node;
            n->b = tuple ? tuple : first;
            *node = n;
        } else if (is_op(t, OP_LPAREN)) {
            tpl_node *n = NULL;
            BD_TRY(new_node(p, N_CALL, t, &n));
            BD_TRY(parse_call_args(p, n));
            n->a = *node;
            *node = n;
        } else {
            return BRAID_OK;
        }
    }
}

static braid_status parse_filter_expr(ps *p, tpl_node **node) {
    for (;;) {
        const tpl_tok *t = cur(p);
        if (is_op(t, OP_PIPE)) BD_TRY(parse_filter(p, node, 0));
        else if (is_name(t, "is")) BD_TRY(parse_test(p, node));
        else if (is_op(t, OP_LPAREN)) {
            tpl_node *n = NULL;
            BD_TRY(new_node(p, N_CALL, t, &n));
            BD_TRY(parse_call_args(p, n));
            n->a = *node;
            *node = n;
        } else return BRAID_OK;
    }
}

static braid_status parse_primary(ps *p, int with_namespace, tpl_node **out) {
    const tpl_tok *t = cur(p);
    tpl_node *n = NULL;
    if (++p->depth > MAX_PARSE_DEPTH) return pfail(p, t, "expression nested too deeply", NULL);
    if (t->type == TK_NAME) {
        advance(p);
        if (is_name(t, "true") || is_name(t, "True") || is_name(t, "false") || is_name(t, "False")) {
            BD_TRY(new_node(p, N_CONST, t, &n));
            n->value = tv_bool(t->p[0] == 't' || t->p[0] == 'T');
        } else if (is_name(t, "none") || is_name(t, "None")) {
            BD_TRY(new_node(p, N_CONST, t, &n));
            n->value = tv_none();
        } else if (with_namespace && is_op(cur(p), OP_DOT)) {
            advance(p);
            const tpl_tok *attr = cur(p);
            if (attr->type != TK_NAME) return pfail(p, attr, "expected a name, got %s", tok_desc(attr));
            advance(p);
            BD_TRY(new_node(p, N_NSREF, t, &n));
            n->name = t->p;
            n->name_len = t->n;
            n->attr = attr->p;
            n->attr_len = attr->n;
        } else {
            BD_TRY(new_node(p, N_NAME, t, &n));
            n->name = t->p;
            n->name_len = t->n;
        }
    } else if (t->type == TK_STRING) {
        advance(p);
        BD_TRY(new_node(p, N_CONST, t, &n));
        if (cur(p)->type != TK_STRING) n->value = tv_strn(t->p, t->n);
        else {
            size_t len = t->n;
            for (size_t k = p->i; k < p->n && p->t[k].type == TK_STRING; k++) len += p->t[k].n;
            char *s = tpl_alloc(p->a, len + 1);
            if (!s) return bd_error(BRAID_E_NOMEM, "template: out of memory");
            memcpy(s, t->p, t->n);
            size_t o = t->n;
            while (cur(p)->type == TK_STRING) {
                memcpy(s + o, cur(p)->p, cur(p)->n);
                o += cur(p)->n;
                advance(p);
            }
            n->value = tv_strn(s, o);
        }
    } else if (t->type == TK_INT || t->type == TK_FLOAT) {
        advance(p);
        BD_TRY(new_node(p, N_CONST, t, &n));
        n->value = t->type == TK_INT ? tv_int(t->ival) : tv_float(t->fval);
    } else if (is_op(t, OP_LPAREN)) {
        advance(p);
        BD_TRY(parse_tuple(p, 0, 1, NULL, 1, 0, &n));
        BD_TRY(expect_op(p, OP_RPAREN, ")"));
    } else if (is_op(t, OP_LBRACKET)) {
        advance(p);
        BD_TRY(new_node(p, N_LIST, t, &n));
        while (!is_op(cur(p), OP_RBRACKET)) {
            if (n->items.n) BD_TRY(expect_op(p, OP_COMMA, ","));
            if (is_op(cur(p), OP_RBRACKET)) break;
            tpl_node *x = NULL;
            BD_TRY(parse_expression(p, 1, &x));
            BD_TRY(nodes_push(p, &n->items, x));
        }
        BD_TRY(expect_op(p, OP_RBRACKET, "]"));
    } else if (is_op(t, OP_LBRACE)) {
        advance(p);
        BD_TRY(new_node(p, N_DICT, t, &n));
        while (!is_op(cur(p), OP_RBRACE)) {
            if (n->items.n) BD_TRY(expect_op(p, OP_COMMA, ","));
            if (is_op(cur(p), OP_RBRACE)) break;
            tpl_node *k = NULL, *v = NULL;
            BD_TRY(parse_expression(p, 1, &k));
            BD_TRY(expect_op(p, OP_COLON, ":"));
            BD_TRY(parse_expression(p, 1, &v));
            BD_TRY(nodes_push(p, &n->items, k));
            BD_TRY(nodes_push(p, &n->items, v));
        }
        BD_TRY(expect_op(p, OP_RBRACE, "}"));
    } else {
        return pfail(p, t, "unexpected %s", tok_desc(t));
    }
    p->depth--;
    *out = n;
    return BRAID_OK;
}

static braid_status parse_unary(ps *p, int with_filter, tpl_node **out) {
    const tpl_tok *t = cur(p);
    tpl_node *n = NULL;
    if (++p->depth > MAX_PARSE_DEPTH) return pfail(p, t, "expression nested too deeply", NULL);
    if (is_op(t, OP_SUB) || is_op(t, OP_ADD)) {
        advance(p);
        BD_TRY(new_node(p, N_UNARY, t, &n));
        n->op = t->op == OP_SUB ? OP_NEG : OP_POS;
        BD_TRY(parse_unary(p, 0, &n->a));
    } else {
        BD_TRY(parse_primary(p, 0, &n));
    }
    BD_TRY(parse_postfix(p, &n));
    if (with_filter) BD_TRY(parse_filter_expr(p, &n));
    p->depth--;
    *out = n;
    return BRAID_OK;
}

static braid_status binop(ps *p, const tpl_tok *at, uint8_t op, tpl_node *l, tpl_node *r, tpl_node **out) {
    BD_TRY(new_node(p, N_BINOP, at, out));
    (*out)->op = op;
    (*out)->a = l;
    (*out)->b = r;
    return BRAID_OK;
}

static braid_status parse_pow(ps *p, tpl_node **out) {
    BD_TRY(parse_unary(p, 1, out));
    while (is_op(cur(p), OP_POW)) {
        const tpl_tok *t = cur(p);
        advance(p);
        tpl_node *r = NULL;
        BD_TRY(parse_unary(p, 1, &r));
        BD_TRY(binop(p, t, OP_POW, *out, r, out));
    }
    return BRAID_OK;
}

static braid_status parse_math2(ps *p, tpl_node **out) {
    BD_TRY(parse_pow(p, out));
    while (is_op(cur(p), OP_MUL) || is_op(cur(p), OP_DIV) || is_op(cur(p), OP_FLOORDIV) || is_op(cur(p), OP_MOD)) {
        const tpl_tok *t = cur(p);
        advance(p);
        tpl_node *r = NULL;
        BD_TRY(parse_pow(p, &r));
        BD_TRY(binop(p, t, t->op, *out, r, out));
    }
    return BRAID_OK;
}

static braid_status parse_concat(ps *p, tpl_node **out) {
    const tpl_tok *start = cur(p);
    tpl_node *first = NULL;
    BD_TRY(parse_math2(p, &first));
    if (!is_op(cur(p), OP_TILDE)) { *out = first; return BRAID_OK; }
    tpl_node *n = NULL;
    BD_TRY(new_node(p, N_CONCAT, start, &n));
    BD_TRY(nodes_push(p, &n->items, first));
    while (is_op(cur(p), OP_TILDE)) {
        advance(p);
        tpl_node *x = NULL;
        BD_TRY(parse_math2(p, &x));
        BD_TRY(nodes_push(p, &n->items, x));
    }
    *out = n;
    return BRAID_OK;
}

static braid_status parse_math1(ps *p, tpl_node **out) {
    BD_TRY(parse_concat(p, out));
    while (is_op(cur(p), OP_ADD) || is_op(cur(p), OP_SUB)) {
        const tpl_tok *t = cur(p);
        advance(p);
        tpl_node *r = NULL;
        BD_TRY(parse_concat(p, &r));
        BD_TRY(binop(p, t, t->op, *out, r, out));
    }
    return BRAID_OK;
}

static braid_status parse_compare(ps *p, tpl_node **out) {
    const tpl_tok *start = cur(p);
    tpl_node *expr = NULL;
    BD_TRY(parse_math1(p, &expr));
    tpl_node *n = NULL;
    size_t cap = 0;
    for (;;) {
        const tpl_tok *t = cur(p);
        uint8_t op;
        if (t->type == TK_OP && (t->op == OP_EQ || t->op == OP_NE || t->op == OP_LT || t->op == OP_LTEQ ||
                                 t->op == OP_GT || t->op == OP_GTEQ)) {
            op = t->op;
            advance(p);
        } else if (is_name(t, "in")) {
            op = OP_IN;
            advance(p);
        } else if (is_name(t, "not") && is_name(look(p), "in")) {
            op = OP_NOTIN;
            advance(p);
            advance(p);
        } else break;
        if (!n) {
            BD_TRY(new_node(p, N_COMPARE, start, &n));
            BD_TRY(nodes_push(p, &n->items, expr));
        }
        tpl_node *r = NULL;
        BD_TRY(parse_math1(p, &r));
        BD_TRY(nodes_push(p, &n->items, r));
        if (n->items.n - 1 > cap) {
            size_t nc = cap ? cap * 2 : 4;
            uint8_t *ops = tpl_alloc(p->a, nc);
            if (!ops) return bd_error(BRAID_E_NOMEM, "template: out of memory");
            if (cap) memcpy(ops, n->cmp_ops, cap);
            n->cmp_ops = ops;
            cap = nc;
        }
        n->cmp_ops[n->items.n - 2] = op;
    }
    *out = n ? n : expr;
    return BRAID_OK;
}

static braid_status parse_not(ps *p, tpl_node **out) {
    if (is_name(cur(p), "not")) {
        const tpl_tok *t = cur(p);
        advance(p);
        if (++p->depth > MAX_PARSE_DEPTH) return pfail(p, t, "expression nested too deeply", NULL);
        tpl_node *n = NULL;
        BD_TRY(new_node(p, N_UNARY, t, &n));
        n->op = OP_NOT;
        BD_TRY(parse_not(p, &n->a));
        p->depth--;
        *out = n;
        return BRAID_OK;
    }
    return parse_compare(p, out);
}

static braid_status parse_and(ps *p, tpl_node **out) {
    BD_TRY(parse_not(p, out));
    while (is_name(cur(p), "and")) {
        const tpl_tok *t = cur(p);
        advance(p);
        tpl_node *r = NULL;
        BD_TRY(parse_not(p, &r));
        BD_TRY(binop(p, t, OP_AND, *out, r, out));
    }
    return BRAID_OK;
}

static braid_status parse_or(ps *p, tpl_node **out) {
    BD_TRY(parse_and(p, out));
    while (is_name(cur(p), "or")) {
        const tpl_tok *t = cur(p);
        advance(p);
        tpl_node *r = NULL;
        BD_TRY(parse_and(p, &r));
        BD_TRY(binop(p, t, OP_OR, *out, r, out));
    }
    return BRAID_OK;
}

static braid_status parse_condexpr(ps *p, tpl_node **out) {
    size_t unknown_mark = p->nunknown;
    const tpl_tok *start = cur(p);
    BD_TRY(parse_or(p, out));
    while (is_name(cur(p), "if")) {
        advance(p);
        int soft = p->soft;
        p->soft = 1;
        tpl_node *n = NULL;
        BD_TRY(new_node(p, N_CONDEXPR, start, &n));
        n->b = *out;
        BD_TRY(parse_or(p, &n->a));
        if (is_name(cur(p), "else")) {
            advance(p);
            BD_TRY(parse_condexpr(p, &n->c));
        }
        p->soft = soft;
        for (size_t k = unknown_mark; k < p->nunknown; k++) p->unknown[k]->flag |= 2;
        *out = n;
    }
    return BRAID_OK;
}

static braid_status parse_expression(ps *p, int with_condexpr, tpl_node **out) {
    if (++p->depth > MAX_PARSE_DEPTH) return pfail(p, cur(p), "expression nested too deeply", NULL);
    braid_status s = with_condexpr ? parse_condexpr(p, out) : parse_or(p, out);
    p->depth--;
    return s;
}

static int is_tuple_end(const ps *p, const char *extra_end) {
    const tpl_tok *t = cur(p);
    if (t->type == TK_VAR_END || t->type == TK_BLOCK_END || is_op(t, OP_RPAREN) || t->type == TK_EOF) return 1;
    return extra_end && is_name(t, extra_end);
}

static braid_status parse_tuple(ps *p, int simplified, int with_condexpr, const char *extra_end,
                                int explicit_parens, int with_namespace, tpl_node **out) {
    const tpl_tok *start = cur(p);
    tpl_node *first = NULL, *tuple = NULL;
    size_t count = 0;
    int is_tuple = 0;
    for (;;) {
        if (count) BD_TRY(expect_op(p, OP_COMMA, ","));
        if (is_tuple_end(p, extra_end)) break;
        tpl_node *x = NULL;
        if (simplified) BD_TRY(parse_primary(p, with_namespace, &x));
        else BD_TRY(parse_expression(p, with_condexpr, &x));
        if (count == 0) first = x;
        if (!tuple && is_op(cur(p), OP_COMMA)) {
            BD_TRY(new_node(p, N_TUPLE, start, &tuple));
            BD_TRY(nodes_push(p, &tuple->items, first));
        } else if (tuple && count) {
            BD_TRY(nodes_push(p, &tuple->items, x));
        }
        count++;
        if (is_op(cur(p), OP_COMMA)) is_tuple = 1;
        else break;
    }
    if (!is_tuple) {
        if (first) { *out = first; return BRAID_OK; }
        if (!explicit_parens) return pfail(p, cur(p), "expected an expression, got %s", tok_desc(cur(p)));
    }
    if (!tuple) BD_TRY(new_node(p, N_TUPLE, start, &tuple));
    *out = tuple;
    return BRAID_OK;
}

/* ---- statements ------------------------------------------------------------------------------------------- */

static braid_status check_target(ps *p, const tpl_node *t) {
    if (t->type == N_NAME || t->type == N_NSREF) return BRAID_OK;
    if (t->type == N_TUPLE) {
        for (size_t i = 0; i < t->items.n; i++) BD_TRY(check_target(p, t->items.v[i]));
        return BRAID_OK;
    }
    tpl_tok at = {.line = t->line, .col = t->col};
    return pfail(p, &at, "can't assign to this expression", NULL);
}

static braid_status parse_assign_target(ps *p, int name_only, const char *extra_end, int with_namespace,
                                        tpl_node **out) {
    if (name_only) {
        const tpl_tok *t = cur(p);
        if (t->type != TK_NAME) return pfail(p, t, "expected a name, got %s", tok_desc(t));
        advance(p);
        BD_TRY(new_node(p, N_NAME, t, out));
        (*out)->name = t->p;
        (*out)->name_len = t->n;
    } else {
        BD_TRY(parse_tuple(p, 1, 1, extra_end, 0, with_namespace, out));
    }
    return check_target(p, *out);
}

static braid_status parse_statements(ps *p, const char *const *end, int drop_needle, tpl_nodes *body) {
    if (is_op(cur(p), OP_COLON)) advance(p);
    BD_TRY(expect_type(p, TK_BLOCK_END));
    BD_TRY(subparse(p, end, body));
    if (cur(p)->type == TK_EOF) {
        char msg[96];
        snprintf(msg, sizeof msg, "unexpected end of template, expected '%s'", end[0]);
        return pfail(p, cur(p), "%s", msg);
    }
    if (drop_needle) advance(p);
    return BRAID_OK;
}

static braid_status parse_signature(ps *p, tpl_node *n) {
    BD_TRY(expect_op(p, OP_LPAREN, "("));
    while (!is_op(cur(p), OP_RPAREN)) {
        if (n->items.n) BD_TRY(expect_op(p, OP_COMMA, ","));
        tpl_node *arg = NULL;
        BD_TRY(parse_assign_target(p, 1, NULL, 0, &arg));
        if (is_op(cur(p), OP_ASSIGN)) {
            advance(p);
            tpl_node *d = NULL;
            BD_TRY(parse_expression(p, 1, &d));
            BD_TRY(nodes_push(p, &n->defaults, d));
        } else if (n->defaults.n) {
            return pfail(p, cur(p), "non-default argument follows default argument", NULL);
        }
        BD_TRY(nodes_push(p, &n->items, arg));
    }
    return expect_op(p, OP_RPAREN, ")");
}

static braid_status parse_statement(ps *p, tpl_node **out) {
    const tpl_tok *t = cur(p);
    if (t->type != TK_NAME) return pfail(p, t, "tag name expected", NULL);
    if (++p->depth > MAX_PARSE_DEPTH) return pfail(p, t, "statements nested too deeply", NULL);
    tpl_node *n = NULL;
    int soft = p->soft, loops = p->loop_depth;
    if (is_name(t, "if")) {
        advance(p);
        BD_TRY(new_node(p, N_IF, t, &n));
        p->soft = 1;
        tpl_node *node = n;
        for (;;) {
            BD_TRY(parse_tuple(p, 0, 0, NULL, 0, 0, &node->a));
            static const char *const ends[] = {"elif", "else", "endif", NULL};
            BD_TRY(parse_statements(p, ends, 0, &node->body));
            const tpl_tok *k = cur(p);
            advance(p);
            if (is_name(k, "elif")) {
                tpl_node *e = NULL;
                BD_TRY(new_node(p, N_IF, k, &e));
                BD_TRY(nodes_push(p, &node->else_, e));
                node = e;
                continue;
            }
            if (is_name(k, "else")) {
                static const char *const endif[] = {"endif", NULL};
                BD_TRY(parse_statements(p, endif, 1, &node->else_));
            }
            break;
        }
    } else if (is_name(t, "for")) {
        advance(p);
        BD_TRY(new_node(p, N_FOR, t, &n));
        BD_TRY(parse_assign_target(p, 0, "in", 0, &n->a));
        if (!is_name(cur(p), "in")) return pfail(p, cur(p), "expected 'in', got %s", tok_desc(cur(p)));
        advance(p);
        BD_TRY(parse_tuple(p, 0, 0, "recursive", 0, 0, &n->b));
        p->soft = 0;
        if (is_name(cur(p), "if")) {
            advance(p);
            BD_TRY(parse_expression(p, 1, &n->c));
        }
        if (is_name(cur(p), "recursive")) { advance(p); n->flag |= 1; }
        p->loop_depth++;
        static const char *const ends[] = {"endfor", "else", NULL};
        BD_TRY(parse_statements(p, ends, 0, &n->body));
        p->loop_depth--;
        const tpl_tok *k = cur(p);
        advance(p);
        if (is_name(k, "else")) {
            static const char *const endfor[] = {"endfor", NULL};
            BD_TRY(parse_statements(p, endfor, 1, &n->else_));
        }
    } else if (is_name(t, "set")) {
        advance(p);
        tpl_node *target = NULL;
        BD_TRY(parse_assign_target(p, 0, NULL, 1, &target));
        if (is_op(cur(p), OP_ASSIGN)) {
            advance(p);
            BD_TRY(new_node(p, N_SET, t, &n));
            n->a = target;
            BD_TRY(parse_tuple(p, 0, 1, NULL, 0, 0, &n->b));
        } else {
            BD_TRY(new_node(p, N_SET_BLOCK, t, &n));
            n->a = target;
            p->soft = 0;
            BD_TRY(parse_filter(p, &n->filter, 0));
            static const char *const ends[] = {"endset", NULL};
            BD_TRY(parse_statements(p, ends, 1, &n->body));
        }
    } else if (is_name(t, "macro")) {
        advance(p);
        BD_TRY(new_node(p, N_MACRO, t, &n));
        tpl_node *name = NULL;
        BD_TRY(parse_assign_target(p, 1, NULL, 0, &name));
        n->name = name->name;
        n->name_len = name->name_len;
        BD_TRY(parse_signature(p, n));
        p->soft = 0;
        p->loop_depth = 0;
        static const char *const ends[] = {"endmacro", NULL};
        BD_TRY(parse_statements(p, ends, 1, &n->body));
    } else if (is_name(t, "call")) {
        advance(p);
        BD_TRY(new_node(p, N_CALLBLOCK, t, &n));
        if (is_op(cur(p), OP_LPAREN)) BD_TRY(parse_signature(p, n));
        BD_TRY(parse_expression(p, 1, &n->a));
        if (n->a->type != N_CALL) return pfail(p, t, "expected call", NULL);
        p->soft = 0;
        p->loop_depth = 0;
        static const char *const ends[] = {"endcall", NULL};
        BD_TRY(parse_statements(p, ends, 1, &n->body));
    } else if (is_name(t, "filter")) {
        advance(p);
        BD_TRY(new_node(p, N_FILTERBLOCK, t, &n));
        p->soft = 0;
        BD_TRY(parse_filter(p, &n->filter, 1));
        static const char *const ends[] = {"endfilter", NULL};
        BD_TRY(parse_statements(p, ends, 1, &n->body));
    } else if (is_name(t, "generation")) {
        advance(p);
        BD_TRY(new_node(p, N_GENERATION, t, &n));
        p->soft = 0;
        p->loop_depth = 0;
        static const char *const ends[] = {"endgeneration", NULL};
        BD_TRY(parse_statements(p, ends, 1, &n->body));
    } else if (is_name(t, "with")) {
        advance(p);
        BD_TRY(new_node(p, N_WITH, t, &n));
        while (cur(p)->type != TK_BLOCK_END) {
            if (n->items.n) BD_TRY(expect_op(p, OP_COMMA, ","));
            tpl_node *target = NULL, *value = NULL;
            BD_TRY(parse_assign_target(p, 0, NULL, 0, &target));
            BD_TRY(expect_op(p, OP_ASSIGN, "="));
            BD_TRY(parse_expression(p, 1, &value));
            BD_TRY(nodes_push(p, &n->items, target));
            BD_TRY(nodes_push(p, &n->defaults, value));
        }
        p->soft = 0;
        static const char *const ends[] = {"endwith", NULL};
        BD_TRY(parse_statements(p, ends, 1, &n->body));
    } else if (is_name(t, "print")) {
        advance(p);
        BD_TRY(new_node(p, N_OUTPUT_EXPR, t, &n));
        BD_TRY(parse_tuple(p, 0, 1, NULL, 0, 0, &n->a));
    } else if (is_name(t, "break") || is_name(t, "continue")) {
        advance(p);
        if (p->loop_depth == 0) return pfail(p, t, "'%s' outside a loop", t->p[0] == 'b' ? "break" : "continue");
        BD_TRY(new_node(p, t->p[0] == 'b' ? N_BREAK : N_CONTINUE, t, &n));
    } else {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(t->n < 60 ? t->n : 60), t->p);
        if (is_name(t, "block") || is_name(t, "extends") || is_name(t, "include") || is_name(t, "import") ||
            is_name(t, "from") || is_name(t, "autoescape"))
            return bd_error(BRAID_E_UNSUPPORTED, "template:%u:%u: the '%s' tag is not supported (chat templates "
                            "have no loader)", (unsigned)t->line, (unsigned)t->col, name);
        return pfail(p, t, "Encountered unknown tag '%s'", name);
    }
    p->soft = soft;
    p->loop_depth = loops;
    p->depth--;
    *out = n;
    return BRAID_OK;
}

static int at_end_tag(const ps *p, const char *const *end) {
    if (!end) return 0;
    const tpl_tok *t = look(p);
    for (size_t k = 0; end[k]; k++)
        if (is_name(t, end[k])) return 1;
    return 0;
}

static braid_status subparse(ps *p, const char *const *end, tpl_nodes *body) {
    for (;;) {
        const tpl_tok *t = cur(p);
        if (t->type == TK_EOF) return BRAID_OK;
        if (t->type == TK_DATA) {
            tpl_node *n = NULL;
            BD_TRY(new_node(p, N_OUTPUT_DATA, t, &n));
            n->value = tv_strn(t->p, t->n);
            BD_TRY(nodes_push(p, body, n));
            advance(p);
        } else if (t->type == TK_VAR_BEGIN) {
            advance(p);
            tpl_node *n = NULL;
            BD_TRY(new_node(p, N_OUTPUT_EXPR, t, &n));
            BD_TRY(parse_tuple(p, 0, 1, NULL, 0, 0, &n->a));
            BD_TRY(expect_type(p, TK_VAR_END));
            BD_TRY(nodes_push(p, body, n));
        } else if (t->type == TK_BLOCK_BEGIN) {
            if (at_end_tag(p, end)) { advance(p); return BRAID_OK; }
            advance(p);
            tpl_node *n = NULL;
            BD_TRY(parse_statement(p, &n));
            BD_TRY(expect_type(p, TK_BLOCK_END));
            BD_TRY(nodes_push(p, body, n));
        } else {
            return pfail(p, t, "unexpected %s", tok_desc(t));
        }
    }
}

braid_status tpl_parse(tpl_arena *a, const char *src, const tpl_tok *toks, size_t ntok, tpl_template *out) {
    ps p = {.a = a, .t = toks, .n = ntok};
    memset(out, 0, sizeof *out);
    out->src = src;
    BD_TRY(subparse(&p, NULL, &out->body));
    if (cur(&p)->type != TK_EOF) return pfail(&p, cur(&p), "unexpected %s", tok_desc(cur(&p)));
    for (size_t k = 0; k < p.nunknown; k++) {
        tpl_node *n = p.unknown[k];
        if (n->flag & 2) continue;
        return bd_error(BRAID_E_FORMAT, "template:%u:%u: No %s named '%.*s'", (unsigned)n->line, (unsigned)n->col,
                        n->type == N_FILTER ? "filter" : "test", (int)n->name_len, n->name);
    }
    return BRAID_OK;
}
