/* lexer.c — splits a template into tokens the way Jinja2's lexer does with Hugging Face's settings
 * (trim_blocks, lstrip_blocks, keep_trailing_newline off): text between tags becomes TK_DATA, each tag its
 * begin/end tokens and the names, literals and operators in between.
 *
 * What has to match Jinja2 exactly, because it decides the bytes of every rendering:
 * - newlines: \r\n and \r become \n first; one final newline of the source is dropped;
 * - "{%-", "{{-", "{#-" strip all whitespace (Python's str.isspace set) before the tag; "-%}", "-}}", "-#}" all
 *   whitespace after it;
 * - trim_blocks: one "\n" right after "%}" or "#}" is dropped (not after "}}");
 * - lstrip_blocks: spaces/tabs between the start of a line and "{%" or "{#" are dropped (not before "{{"),
 *   unless the tag says "{%+";
 * - inside a tag, "}}" / "%}" only end it when brackets are balanced (so "{{ {'a': 1}}}" works);
 * - string literals decode Python's escapes (\n, \t, \xNN, \uNNNN, ...).
 * {% raw %}...{% endraw %} is handled here too: its content is one TK_DATA. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "template/tpl.h"
#include "tokenizer/unicode.h"

typedef struct lx {
    tpl_arena *a;
    const char *s;
    size_t n;
    size_t pos;
    uint32_t line;      /* line of `pos` */
    size_t line_start;  /* offset where that line starts */
    size_t scan_pos;    /* how far line counting has gone */
    tpl_tok *toks;
    size_t ntok, cap;
    char bal[256];
    int nbal;
} lx;

static void locate(lx *l, size_t at, uint32_t *line, uint32_t *col) {
    /* line numbers only move forward in the lexer, so count incrementally */
    if (at < l->scan_pos) { l->scan_pos = 0; l->line = 1; l->line_start = 0; }
    for (size_t i = l->scan_pos; i < at && i < l->n; i++)
        if (l->s[i] == '\n') { l->line++; l->line_start = i + 1; }
    l->scan_pos = at;
    *line = l->line;
    *col = (uint32_t)(at - l->line_start + 1);
}

static braid_status lfail(lx *l, size_t at, const char *msg) {
    uint32_t line, col;
    locate(l, at, &line, &col);
    return bd_error(BRAID_E_FORMAT, "template:%u:%u: syntax error: %s", (unsigned)line, (unsigned)col, msg);
}

static braid_status push(lx *l, uint8_t type, size_t at, const char *p, size_t n, tpl_tok **out) {
    if (l->ntok == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        tpl_tok *t = tpl_alloc(l->a, cap * sizeof(tpl_tok));
        if (!t) return bd_error(BRAID_E_NOMEM, "template: out of memory");
        if (l->ntok) memcpy(t, l->toks, l->ntok * sizeof(tpl_tok));
        l->toks = t;
        l->cap = cap;
    }
    tpl_tok *t = &l->toks[l->ntok++];
    memset(t, 0, sizeof *t);
    t->type = type;
    t->p = p;
    t->n = n;
    locate(l, at, &t->line, &t->col);
    if (out) *out = t;
    return BRAID_OK;
}

/* Python's \s at s[i] (one code point); returns its byte length or 0. */
static size_t ws_len(const char *s, size_t n, size_t i) {
    size_t j = i;
    uint32_t c = tpl_utf8_next(s, n, &j);
    return tpl_py_isspace(c) ? j - i : 0;
}

static size_t skip_ws(const char *s, size_t n, size_t i) {
    size_t w;
    while (i < n && (w = ws_len(s, n, i)) > 0) i += w;
    return i;
}

/* Start of the trailing whitespace of s[a, b) (str.rstrip()). */
static size_t rstrip_at(const char *s, size_t a, size_t b) {
    size_t e = b;
    while (e > a) {
        size_t k = e - 1;
        while (k > a && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
        if (!ws_len(s, e, k)) break;
        e = k;
    }
    return e;
}

static int starts(const lx *l, size_t at, const char *lit) {
    size_t m = strlen(lit);
    return at + m <= l->n && memcmp(l->s + at, lit, m) == 0;
}

/* The end of the data before a tag after whitespace control: sign is '-', '+' or 0; lstrip_ok says the tag is
 * a block or comment (lstrip_blocks applies). */
static size_t data_end(const lx *l, size_t a, size_t b, char sign, int lstrip_ok, int line_starting) {
    if (sign == '-') return rstrip_at(l->s, a, b);
    if (sign == '+' || !lstrip_ok) return b;
    size_t lpos = b;
    while (lpos > a && l->s[lpos - 1] != '\n') lpos--;
    if (lpos > a || line_starting) {
        if (lpos < b && skip_ws(l->s, b, lpos) == b) return lpos;
    }
    return b;
}

/* {%[-+]?\s*raw\s*(-%}\s*|%}) at `at`; *end = just after it, *sign = the opening sign. */
static int match_raw_begin(const lx *l, size_t at, const char *word, size_t *end, char *sign, int endtag) {
    size_t i = at + 2;
    *sign = 0;
    if (i < l->n && (l->s[i] == '-' || l->s[i] == '+')) *sign = l->s[i++];
    i = skip_ws(l->s, l->n, i);
    size_t wl = strlen(word);
    if (i + wl > l->n || memcmp(l->s + i, word, wl) != 0) return 0;
    i += wl;
    i = skip_ws(l->s, l->n, i);
    if (endtag && starts(l, i, "+%}")) { *end = i + 3; return 1; }
    if (starts(l, i, "-%}")) { *end = skip_ws(l->s, l->n, i + 3); return 1; }
    if (starts(l, i, "%}")) {
        i += 2;
        if (endtag && i < l->n && l->s[i] == '\n') i++; /* trim_blocks after endraw only */
        *end = i;
        return 1;
    }
    return 0;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    c = (char)(c | 32);
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}


/* Decodes a string literal body s[a, b) with Python's unicode-escape rules. */
static braid_status decode_string(lx *l, size_t a, size_t b, tpl_tok *t) {
    char *o = tpl_alloc(l->a, (b - a) + 1);
    if (!o) return bd_error(BRAID_E_NOMEM, "template: out of memory");
    size_t k = 0;
    for (size_t i = a; i < b;) {
        char c = l->s[i];
        if (c != '\\' || i + 1 >= b) { o[k++] = c; i++; continue; }
        char e = l->s[i + 1];
        i += 2;
        switch (e) {
        case '\n': break;
        case '\\': o[k++] = '\\'; break;
        case '\'': o[k++] = '\''; break;
        case '"': o[k++] = '"'; break;
        case 'a': o[k++] = '\a'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'n': o[k++] = '\n'; break;
        case 'r': o[k++] = '\r'; break;
        case 't': o[k++] = '\t'; break;
        case 'v': o[k++] = '\v'; break;
        case 'x': case 'u': case 'U': {
            int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t v = 0;
            for (int d = 0; d < digits; d++) {
                int h = i + (size_t)d < b ? hexval(l->s[i + (size_t)d]) : -1;
                if (h < 0) return lfail(l, i - 2, "truncated escape in a string literal");
                v = v * 16 + (uint32_t)h;
            }
            if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
                return lfail(l, i - 2, "escape out of range (or a surrogate) in a string literal");
            i += (size_t)digits;
            /* the output may be longer than the escape only for \xNN >= 0x80 (2 bytes for 4 chars): fits */
            k += tok_utf8_encode(v, (uint8_t *)o + k);
            break;
        }
        case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': {
            uint32_t v = (uint32_t)(e - '0');
            for (int d = 0; d < 2 && i < b && l->s[i] >= '0' && l->s[i] <= '7'; d++) v = v * 8 + (uint32_t)(l->s[i++] - '0');
            k += tok_utf8_encode(v, (uint8_t *)o + k);
            break;
        }
        case 'N': return lfail(l, i - 2, "\\N{...} escapes are not supported");
        default: o[k++] = '\\'; i--; break; /* unknown escapes stay as they are */
        }
    }
    o[k] = 0;
    t->p = o;
    t->n = k;
    return BRAID_OK;
}

/* (\d+_)*\d+ at i; returns the end (i if none). */
static size_t digits_us(const char *s, size_t n, size_t i) {
    size_t j = i;
    if (j >= n || s[j] < '0' || s[j] > '9') return i;
    for (;;) {
        while (j < n && s[j] >= '0' && s[j] <= '9') j++;
        if (j + 1 < n && s[j] == '_' && s[j + 1] >= '0' && s[j + 1] <= '9') { j++; continue; }
        return j;
    }
}

static size_t match_float(const lx *l, size_t i) {
    const char *s = l->s;
    size_t n = l->n;
    if (i > 0 && s[i - 1] == '.') return 0;
    size_t j = digits_us(s, n, i);
    if (j == i) return 0;
    size_t k = j;
    int frac = 0;
    if (k < n && s[k] == '.') {
        size_t f = digits_us(s, n, k + 1);
        if (f > k + 1) { k = f; frac = 1; }
    }
    if (k < n && (s[k] == 'e' || s[k] == 'E')) {
        size_t x = k + 1;
        if (x < n && (s[x] == '+' || s[x] == '-')) x++;
        size_t f = digits_us(s, n, x);
        if (f > x) return f - i;
    }
    return frac ? k - i : 0;
}

static size_t match_int(const lx *l, size_t i, int *base) {
    const char *s = l->s;
    size_t n = l->n;
    *base = 10;
    char kind = i + 1 < n ? (char)(s[i + 1] | 32) : 0;
    if (s[i] == '0' && (kind == 'b' || kind == 'o' || kind == 'x')) {
        int b = (s[i + 1] | 32) == 'b' ? 2 : (s[i + 1] | 32) == 'o' ? 8 : 16;
        size_t j = i + 2, last = 0;
        for (;;) {
            size_t k = j;
            if (k < n && s[k] == '_') k++;
            int h = k < n ? hexval(s[k]) : -1;
            if (h < 0 || h >= b) break;
            j = k + 1;
            last = j;
        }
        if (last) { *base = b; return last - i; }
    }
    if (i < n && s[i] >= '1' && s[i] <= '9') {
        size_t j = i + 1;
        for (;;) {
            size_t k = j;
            if (k < n && s[k] == '_') k++;
            if (k < n && s[k] >= '0' && s[k] <= '9') j = k + 1;
            else break;
        }
        return j - i;
    }
    if (i < n && s[i] == '0') {
        size_t j = i + 1;
        for (;;) {
            size_t k = j;
            if (k < n && s[k] == '_') k++;
            if (k < n && s[k] == '0') j = k + 1;
            else break;
        }
        return j - i;
    }
    return 0;
}

static const struct { const char *s; uint8_t op; } OPS[] = {
    {"//", OP_FLOORDIV}, {"**", OP_POW}, {"==", OP_EQ}, {"!=", OP_NE}, {">=", OP_GTEQ}, {"<=", OP_LTEQ},
    {"+", OP_ADD}, {"-", OP_SUB}, {"/", OP_DIV}, {"*", OP_MUL}, {"%", OP_MOD}, {"~", OP_TILDE},
    {"[", OP_LBRACKET}, {"]", OP_RBRACKET}, {"(", OP_LPAREN}, {")", OP_RPAREN}, {"{", OP_LBRACE},
    {"}", OP_RBRACE}, {">", OP_GT}, {"<", OP_LT}, {"=", OP_ASSIGN}, {".", OP_DOT}, {":", OP_COLON},
    {"|", OP_PIPE}, {",", OP_COMMA}, {";", OP_SEMICOLON},
};

static int is_name_start(unsigned char c) { return c == '_' || ((c | 32) >= 'a' && (c | 32) <= 'z') || c >= 0x80; }
static int is_name_char(unsigned char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }

/* Lexes the inside of a {{ }} or {% %} tag starting at l->pos; returns with l->pos after the end. */
static braid_status lex_tag(lx *l, int block, int *line_starting) {
    size_t tag_start = l->pos;
    l->nbal = 0;
    for (;;) {
        size_t i = l->pos;
        if (i >= l->n) return lfail(l, tag_start, block ? "unexpected end of template: '%}' missing" : "unexpected end of template: '}}' missing");
        if (l->nbal == 0) {
            size_t end = 0;
            if (block) {
                if (starts(l, i, "+%}")) end = i + 3;
                else if (starts(l, i, "-%}")) end = skip_ws(l->s, l->n, i + 3);
                else if (starts(l, i, "%}")) end = i + 2 + (i + 2 < l->n && l->s[i + 2] == '\n');
            } else {
                if (starts(l, i, "-}}")) end = skip_ws(l->s, l->n, i + 3);
                else if (starts(l, i, "}}")) end = i + 2;
            }
            if (end) {
                BD_TRY(push(l, block ? TK_BLOCK_END : TK_VAR_END, i, NULL, 0, NULL));
                *line_starting = l->s[end - 1] == '\n';
                l->pos = end;
                return BRAID_OK;
            }
        }
        size_t w = skip_ws(l->s, l->n, i);
        if (w > i) { l->pos = w; continue; }
        tpl_tok *t;
        size_t m = match_float(l, i);
        if (m) {
            char buf[128];
            size_t k = 0;
            for (size_t j = i; j < i + m && k + 1 < sizeof buf; j++)
                if (l->s[j] != '_') buf[k++] = l->s[j];
            buf[k] = 0;
            BD_TRY(push(l, TK_FLOAT, i, l->s + i, m, &t));
            t->fval = strtod(buf, NULL);
            l->pos = i + m;
            continue;
        }
        int base;
        m = match_int(l, i, &base);
        if (m) {
            char buf[128];
            size_t k = 0;
            for (size_t j = i + (base == 10 ? 0 : 2); j < i + m && k + 1 < sizeof buf; j++)
                if (l->s[j] != '_') buf[k++] = l->s[j];
            buf[k] = 0;
            BD_TRY(push(l, TK_INT, i, l->s + i, m, &t));
            errno = 0;
            unsigned long long v = strtoull(buf, NULL, base);
            if (errno == ERANGE || v > (unsigned long long)INT64_MAX || k + 1 >= sizeof buf)
                return lfail(l, i, "integer literal out of range (64 bits)");
            t->ival = (int64_t)v;
            l->pos = i + m;
            continue;
        }
        if (is_name_start((unsigned char)l->s[i])) {
            size_t j = i + 1;
            while (j < l->n && is_name_char((unsigned char)l->s[j])) j++;
            BD_TRY(push(l, TK_NAME, i, l->s + i, j - i, NULL));
            l->pos = j;
            continue;
        }
        if (l->s[i] == '\'' || l->s[i] == '"') {
            char q = l->s[i];
            size_t j = i + 1;
            while (j < l->n && l->s[j] != q) j += l->s[j] == '\\' ? 2 : 1;
            if (j >= l->n) return lfail(l, i, "unterminated string literal");
            BD_TRY(push(l, TK_STRING, i, NULL, 0, &t));
            BD_TRY(decode_string(l, i + 1, j, t));
            l->pos = j + 1;
            continue;
        }
        size_t k;
        for (k = 0; k < sizeof OPS / sizeof OPS[0]; k++)
            if (starts(l, i, OPS[k].s)) break;
        if (k == sizeof OPS / sizeof OPS[0]) return lfail(l, i, "unexpected character");
        uint8_t op = OPS[k].op;
        if (op == OP_LBRACE || op == OP_LPAREN || op == OP_LBRACKET) {
            if (l->nbal == (int)sizeof l->bal) return lfail(l, i, "brackets nested too deeply");
            l->bal[l->nbal++] = op == OP_LBRACE ? '}' : op == OP_LPAREN ? ')' : ']';
        } else if (op == OP_RBRACE || op == OP_RPAREN || op == OP_RBRACKET) {
            if (l->nbal == 0) return lfail(l, i, "unexpected closing bracket");
            if (l->bal[--l->nbal] != l->s[i]) return lfail(l, i, "mismatched closing bracket");
        }
        BD_TRY(push(l, TK_OP, i, l->s + i, strlen(OPS[k].s), &t));
        t->op = op;
        l->pos = i + strlen(OPS[k].s);
    }
}

braid_status tpl_lex(tpl_arena *a, const char *src, size_t n, tpl_tok **toks, size_t *ntok) {
    /* newlines normalized to \n, one trailing newline dropped (keep_trailing_newline=False) */
    char *s = tpl_alloc(a, n + 1);
    if (!s) return bd_error(BRAID_E_NOMEM, "template: out of memory");
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\r') {
            s[m++] = '\n';
            if (i + 1 < n && src[i + 1] == '\n') i++;
        } else s[m++] = src[i];
    }
    if (m > 0 && s[m - 1] == '\n') m--;
    s[m] = 0;

    lx l = {.a = a, .s = s, .n = m, .line = 1};
    int line_starting = 1;
    while (l.pos < l.n) {
        size_t t = l.pos;
        while (t + 1 < l.n && !(l.s[t] == '{' && (l.s[t + 1] == '{' || l.s[t + 1] == '%' || l.s[t + 1] == '#'))) t++;
        if (t + 1 >= l.n) {
            BD_TRY(push(&l, TK_DATA, l.pos, l.s + l.pos, l.n - l.pos, NULL));
            break;
        }
        char kind = l.s[t + 1];
        char sign = (t + 2 < l.n && (l.s[t + 2] == '-' || l.s[t + 2] == '+')) ? l.s[t + 2] : 0;
        size_t raw_end;
        char raw_sign;
        if (kind == '%' && match_raw_begin(&l, t, "raw", &raw_end, &raw_sign, 0)) {
            size_t de = data_end(&l, l.pos, t, raw_sign, 1, line_starting);
            if (de > l.pos) BD_TRY(push(&l, TK_DATA, l.pos, l.s + l.pos, de - l.pos, NULL));
            line_starting = l.s[raw_end - 1] == '\n';
            /* the raw text runs to the first {% endraw %} */
            size_t k = raw_end, end = 0;
            char esign = 0;
            for (; k + 1 < l.n; k++)
                if (l.s[k] == '{' && l.s[k + 1] == '%' && match_raw_begin(&l, k, "endraw", &end, &esign, 1)) break;
            if (k + 1 >= l.n) return lfail(&l, t, "missing end of raw directive");
            de = data_end(&l, raw_end, k, esign, 1, line_starting);
            if (de > raw_end) BD_TRY(push(&l, TK_DATA, raw_end, l.s + raw_end, de - raw_end, NULL));
            line_starting = l.s[end - 1] == '\n';
            l.pos = end;
            continue;
        }
        size_t de = data_end(&l, l.pos, t, sign, kind != '{', line_starting);
        if (de > l.pos) BD_TRY(push(&l, TK_DATA, l.pos, l.s + l.pos, de - l.pos, NULL));
        l.pos = t + 2 + (sign ? 1 : 0);
        line_starting = 0;
        if (kind == '#') {
            size_t k = l.pos, end = 0;
            for (; k < l.n; k++) {
                if (starts(&l, k, "+#}")) { end = k + 3; break; }
                if (starts(&l, k, "-#}")) { end = skip_ws(l.s, l.n, k + 3); break; }
                if (starts(&l, k, "#}")) { end = k + 2 + (k + 2 < l.n && l.s[k + 2] == '\n'); break; }
            }
            if (!end) return lfail(&l, t, "missing end of comment tag");
            line_starting = l.s[end - 1] == '\n';
            l.pos = end;
            continue;
        }
        BD_TRY(push(&l, kind == '{' ? TK_VAR_BEGIN : TK_BLOCK_BEGIN, t, NULL, 0, NULL));
        BD_TRY(lex_tag(&l, kind == '%', &line_starting));
    }
    BD_TRY(push(&l, TK_EOF, l.n, NULL, 0, NULL));
    *toks = l.toks;
    *ntok = l.ntok;
    return BRAID_OK;
}
