/* tool_calls.c — see tool_calls.h. Each family is one function that scans for its opening marker and turns
 * what follows into (name, arguments object) pairs; the first family that finds a call wins. */
#include "tool_calls.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    json_t *calls;      /* [{name, arguments (object)}] */
    size_t first;       /* offset of the first call's marker */
} found;

static const char *find(const char *s, const char *end, const char *needle) {
    size_t l = strlen(needle);
    if ((size_t)(end - s) < l) return NULL;
    return memmem(s, (size_t)(end - s), needle, l);
}

static void add_call(found *f, const char *name, size_t nl, json_t *args) {
    if (!f->calls) f->calls = json_array();
    json_t *c = json_object();
    json_object_set_new(c, "name", json_stringn(name, nl));
    json_object_set_new(c, "arguments", args ? args : json_object());
    if (!json_string_value(json_object_get(c, "name"))) {
        json_decref(c);
        return;
    }
    json_array_append_new(f->calls, c);
}

/* {"name": ..., "arguments": ...} objects (one, or an array of them) in s[0..n). */
static int json_calls(found *f, const char *s, size_t n) {
    json_error_t je;
    json_t *v = json_loadb(s, n, JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK, &je);
    if (!v) return 0;
    int got = 0;
    json_t *arr = json_is_array(v) ? v : NULL;
    size_t cnt = arr ? json_array_size(arr) : 1;
    for (size_t i = 0; i < cnt; i++) {
        json_t *o = arr ? json_array_get(arr, i) : v;
        json_t *name = json_is_object(o) ? json_object_get(o, "name") : NULL;
        if (!json_is_string(name)) continue;
        json_t *a = json_object_get(o, "arguments");
        if (!a) a = json_object_get(o, "parameters");
        if (json_is_string(a)) {
            json_t *pa = json_loads(json_string_value(a), 0, NULL);
            a = pa && json_is_object(pa) ? pa : (json_decref(pa), NULL);
        } else if (a) {
            a = json_is_object(a) ? json_incref(a) : NULL;
        }
        add_call(f, json_string_value(name), json_string_length(name), a);
        got++;
    }
    json_decref(v);
    return got;
}

static void trim(const char **a, const char **b) {
    while (*a < *b && isspace((unsigned char)**a)) (*a)++;
    while (*b > *a && isspace((unsigned char)(*b)[-1])) (*b)--;
}

/* A parameter value: JSON if it parses as JSON (numbers, booleans, objects), else the text as a string. */
static json_t *xml_value(const char *a, const char *b) {
    trim(&a, &b);
    json_t *v = json_loadb(a, (size_t)(b - a), JSON_DECODE_ANY, NULL);
    return v ? v : json_stringn(a, (size_t)(b - a));
}

/* <function=NAME><parameter=P>V</parameter>...</function> */
static int xml_calls(found *f, const char *s, const char *e) {
    int got = 0;
    for (const char *p = find(s, e, "<function="); p; p = find(p, e, "<function=")) {
        const char *nm = p + 10, *gt = memchr(nm, '>', (size_t)(e - nm));
        if (!gt) break;
        const char *fe = find(gt, e, "</function>");
        if (!fe) fe = e;
        json_t *args = json_object();
        for (const char *q = find(gt, fe, "<parameter="); q; q = find(q, fe, "<parameter=")) {
            const char *pn = q + 11, *pg = memchr(pn, '>', (size_t)(fe - pn));
            if (!pg) break;
            const char *pe = find(pg, fe, "</parameter>");
            if (!pe) pe = fe;
            char key[256];
            size_t kl = (size_t)(pg - pn) < sizeof key - 1 ? (size_t)(pg - pn) : sizeof key - 1;
            memcpy(key, pn, kl);
            key[kl] = 0;
            json_t *v = xml_value(pg + 1, pe);
            if (v) json_object_set_new(args, key, v);
            q = pe;
        }
        const char *ne = gt;
        trim(&nm, &ne);
        add_call(f, nm, (size_t)(ne - nm), args);
        got++;
        p = fe;
    }
    return got;
}

/* Between open and close markers (close NULL or missing: to the end), JSON or XML calls. */
static int tagged(found *f, const char *text, size_t n, const char *open, const char *close) {
    const char *e = text + n;
    int got = 0;
    for (const char *p = find(text, e, open); p; p = find(p, e, open)) {
        const char *b = p + strlen(open), *c = close ? find(b, e, close) : NULL;
        const char *ce = c ? c : e;
        int k = json_calls(f, b, (size_t)(ce - b));
        if (!k) k = xml_calls(f, b, ce);
        if (k && !got) f->first = (size_t)(p - text);
        got += k;
        p = c ? c + strlen(close) : e;
    }
    return got;
}

/* LFM2's pythonic list: [name(a="x", b=2), other()] */
static int pythonic(found *f, const char *text, size_t n) {
    const char *e = text + n, *p = find(text, e, "<|tool_call_start|>");
    if (!p) return 0;
    const char *s = p + 19, *ce = find(s, e, "<|tool_call_end|>");
    if (!ce) ce = e;
    trim(&s, &ce);
    if (s < ce && *s == '[') s++;
    if (ce > s && ce[-1] == ']') ce--;
    int got = 0;
    while (s < ce) {
        while (s < ce && (isspace((unsigned char)*s) || *s == ',')) s++;
        const char *nm = s;
        while (s < ce && (isalnum((unsigned char)*s) || *s == '_' || *s == '.' || *s == '-')) s++;
        if (s == nm || s >= ce || *s != '(') break;
        size_t nl = (size_t)(s - nm);
        s++;
        json_t *args = json_object();
        while (s < ce && *s != ')') {
            while (s < ce && (isspace((unsigned char)*s) || *s == ',')) s++;
            const char *k = s;
            while (s < ce && *s != '=' && *s != ')') s++;
            if (s >= ce || *s != '=') break;
            const char *ke = s++;
            trim(&k, &ke);
            const char *v = s;
            if (s < ce && (*s == '"' || *s == '\'')) {
                char q = *s++;
                v = s;
                while (s < ce && *s != q) s += (*s == '\\' && s + 1 < ce) ? 2 : 1;
                char key[256];
                size_t kl = (size_t)(ke - k) < 255 ? (size_t)(ke - k) : 255;
                memcpy(key, k, kl), key[kl] = 0;
                json_object_set_new(args, key, json_stringn(v, (size_t)(s - v)));
                if (s < ce) s++;
            } else {
                int depth = 0;
                while (s < ce && (depth || (*s != ',' && *s != ')'))) {
                    if (*s == '[' || *s == '{' || *s == '(') depth++;
                    if (*s == ']' || *s == '}' || *s == ')') depth--;
                    s++;
                }
                char key[256];
                size_t kl = (size_t)(ke - k) < 255 ? (size_t)(ke - k) : 255;
                memcpy(key, k, kl), key[kl] = 0;
                const char *ve = s;
                trim(&v, &ve);
                if ((size_t)(ve - v) == 4 && !memcmp(v, "True", 4)) json_object_set_new(args, key, json_true());
                else if ((size_t)(ve - v) == 5 && !memcmp(v, "False", 5)) json_object_set_new(args, key, json_false());
                else if ((size_t)(ve - v) == 4 && !memcmp(v, "None", 4)) json_object_set_new(args, key, json_null());
                else {
                    json_t *jv = xml_value(v, ve);
                    if (jv) json_object_set_new(args, key, jv);
                }
            }
        }
        if (s < ce && *s == ')') s++;
        add_call(f, nm, nl, args);
        if (!got) f->first = (size_t)(p - text);
        got++;
    }
    return got;
}

json_t *srv_tool_calls_parse(const char *text, size_t n, const char *task_id, int choice, size_t *content_len) {
    found f = {NULL, 0};
    if (!text) return NULL;
    if (!tagged(&f, text, n, "<tool_call>", "</tool_call>") && !tagged(&f, text, n, "<TOOLCALL>", "</TOOLCALL>") &&
        !tagged(&f, text, n, "<|tool_call|>", NULL) && !pythonic(&f, text, n)) {
        json_decref(f.calls);
        return NULL;
    }
    if (!f.calls || json_array_size(f.calls) == 0) { /* markers without a usable call are text, not calls */
        json_decref(f.calls);
        return NULL;
    }
    /* content: the text before the first call, without trailing space */
    size_t cl = f.first;
    while (cl > 0 && isspace((unsigned char)text[cl - 1])) cl--;
    if (content_len) *content_len = cl;
    json_t *out = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(f.calls, i, c) {
        char id[96];
        snprintf(id, sizeof id, "call_%s_%d_%zu", task_id, choice, i);
        char *args = json_dumps(json_object_get(c, "arguments"), JSON_COMPACT);
        json_t *fn = json_object();
        json_object_set(fn, "name", json_object_get(c, "name"));
        json_object_set_new(fn, "arguments", json_string(args ? args : "{}"));
        free(args);
        json_t *tc = json_object();
        json_object_set_new(tc, "index", json_integer((json_int_t)i));
        json_object_set_new(tc, "id", json_string(id));
        json_object_set_new(tc, "type", json_string("function"));
        json_object_set_new(tc, "function", fn);
        json_array_append_new(out, tc);
    }
    json_decref(f.calls);
    return out;
}
