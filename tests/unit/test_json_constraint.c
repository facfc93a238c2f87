/* test_json_constraint.c — constrained decoding (braid_json_constraint / braid_json_matcher and
 * braid_gen_params.json):
 *   - bytes: documents each schema feature must accept, and the byte where a wrong one must be refused;
 *     schemas that must be refused (unsupported keywords named in the message, bad JSON, impossible ones);
 *   - tokens: on the trained default model's vocabulary and on the qwen35 test vocabulary (~150k+ tokens),
 *     the full mask equals a token-by-token check, tokens that split a UTF-8 character are allowed only inside
 *     strings and must be finished, end-of-generation only on a complete document;
 *   - sampling: constrained draws follow the masked distribution (the mask before top-k / top-p / min-p),
 *     greedy picks the best allowed token; the cost of a check is printed;
 *   - generation: every braid_gen_run and braid_gen_step reply of a random-weights model under a schema
 *     parses (jansson) and validates (the small validator below) when it ends on "eog". */
#include <jansson.h>
#include <math.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "braid.h"
#include "engine/sampling.h"
#include "genmodel/genmodel.h"
#include "test.h"

/* ---- bytes ------------------------------------------------------------------------------------------------ */

/* Feeds doc byte by byte: the index of the first refused byte, or -1 if all were taken; *complete: whether
 * the document is complete at the end. */
static long feed_doc(const char *schema, const char *doc, int *complete) {
    braid_json_constraint *c = NULL;
    braid_json_matcher *m = NULL;
    *complete = 0;
    if (braid_json_constraint_new(schema, schema ? strlen(schema) : 0, &c) != BRAID_OK) {
        fprintf(stderr, "compile failed: %s\n", braid_last_error());
        return -2;
    }
    if (braid_json_matcher_new(c, &m) != BRAID_OK) return -2;
    long bad = -1;
    for (size_t i = 0; doc[i]; i++)
        if (braid_json_matcher_feed(m, doc + i, 1) != BRAID_OK) {
            bad = (long)i;
            break;
        }
    *complete = braid_json_matcher_complete(m);
    braid_json_matcher_free(m);
    braid_json_constraint_free(c);
    return bad;
}

#define ACCEPT(schema, doc)                                                                                    \
    do {                                                                                                       \
        int cpl_;                                                                                              \
        long r_ = feed_doc(schema, doc, &cpl_);                                                                \
        CHECK(r_ == -1 && cpl_, "%s must accept %s (refused at %ld, complete %d)", schema ? schema : "object", \
              doc, r_, cpl_);                                                                                  \
    } while (0)
/* refused at byte index at (counting from 0) */
#define REJECT_AT(schema, doc, at)                                                                             \
    do {                                                                                                       \
        int cpl_;                                                                                              \
        long r_ = feed_doc(schema, doc, &cpl_);                                                                \
        CHECK(r_ == (at), "%s must refuse %s at %d (got %ld)", schema ? schema : "object", doc, at, r_);       \
    } while (0)
/* taken, but not complete */
#define PREFIX(schema, doc)                                                                                    \
    do {                                                                                                       \
        int cpl_;                                                                                              \
        long r_ = feed_doc(schema, doc, &cpl_);                                                                \
        CHECK(r_ == -1 && !cpl_, "%s: %s must be an incomplete prefix (got %ld, complete %d)",                  \
              schema ? schema : "object", doc, r_, cpl_);                                                      \
    } while (0)

static void test_any_object(void) {
    ACCEPT(NULL, "{}");
    ACCEPT(NULL, " {\"a\" : [1, -2.5e+3, {\"b\": null}, true, false, \"\\u00e9\\n\"], \"c\": {}}\n");
    ACCEPT(NULL, "{\"k\":\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}");
    REJECT_AT(NULL, "[]", 0);
    REJECT_AT(NULL, "\"x\"", 0);
    REJECT_AT(NULL, "{\"a\":}", 5);
    REJECT_AT(NULL, "{,}", 1);
    REJECT_AT(NULL, "{\"a\":1,}", 7);
    REJECT_AT(NULL, "{\"a\":01}", 6);
    REJECT_AT(NULL, "{\"a\":1.}", 7);
    REJECT_AT(NULL, "{\"a\":tru}", 8);
    REJECT_AT(NULL, "{}x", 2);
    REJECT_AT(NULL, "{\"a\":\"\x01\"}", 6);         /* control character */
    REJECT_AT(NULL, "{\"a\":\"\xc0\x80\"}", 6);     /* overlong */
    REJECT_AT(NULL, "{\"a\":\"\xed\xa0\x80\"}", 7); /* surrogate in UTF-8 */
    REJECT_AT(NULL, "{\"a\":\"\\ud83d\"}", 9);      /* surrogate escape */
    REJECT_AT(NULL, "{\"a\":\"\\x\"}", 7);
    PREFIX(NULL, "{\"a\":[1,{\"b\":\"\xe2\x82");    /* inside a character */
    /* whitespace: one space, or a newline and at most 20 spaces or tabs */
    ACCEPT(NULL, "{\n                    }");
    ACCEPT(NULL, "{\n\t\t\"a\": 1\n}");
    REJECT_AT(NULL, "{\n                     }", 22);
    REJECT_AT(NULL, "{  }", 2);
    REJECT_AT(NULL, "{\"a\":1 \n}", 7);
    REJECT_AT(NULL, "\t{}", 0);
    ACCEPT(NULL, "{\n  \"a\": 1,\n  \"b\": [\n    2\n  ]\n}");
    /* numbers: at most 16 integer digits */
    ACCEPT(NULL, "{\"a\":1234567890123456}");
    REJECT_AT(NULL, "{\"a\":12345678901234567}", 21);
}

static void test_scalars(void) {
    const char *integer = "{\"type\":\"integer\"}", *number = "{\"type\":\"number\"}";
    ACCEPT(integer, "-120");
    ACCEPT(integer, "0");
    REJECT_AT(integer, "1.5", 1);
    REJECT_AT(integer, "1e3", 1);
    REJECT_AT(integer, "\"1\"", 0);
    ACCEPT(number, "1.5e-3");
    ACCEPT(number, "-0.25");
    REJECT_AT(number, "+1", 0);
    REJECT_AT(number, ".5", 0);
    PREFIX(number, "1e");
    const char *str = "{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}";
    ACCEPT(str, "\"ab\"");
    ACCEPT(str, "\"\xc3\xa9\xe2\x82\xac\"");  /* two characters, five bytes */
    ACCEPT(str, "\"\\n\\u0041\\\"\"");         /* three characters, escapes count one each */
    REJECT_AT(str, "\"a\"", 2);
    REJECT_AT(str, "\"abcd\"", 4);
    ACCEPT("{\"type\":\"boolean\"}", "false");
    REJECT_AT("{\"type\":\"boolean\"}", "null", 0);
    ACCEPT("{\"type\":\"null\"}", "null");
    REJECT_AT("{\"type\":\"null\"}", "nul ", 3);
}

static void test_enum_const(void) {
    const char *e = "{\"enum\":[\"red\",\"green\",1,12,null,{\"a\":[1,2]}]}";
    ACCEPT(e, "\"red\"");
    ACCEPT(e, "\"green\"");
    ACCEPT(e, "1");
    ACCEPT(e, "12");
    ACCEPT(e, "null");
    ACCEPT(e, "{\"a\":[1,2]}");
    REJECT_AT(e, "\"blue\"", 1);
    REJECT_AT(e, "13", 1);
    REJECT_AT(e, "\"re\"", 3);
    ACCEPT("{\"const\":\"x\\\"y\"}", "\"x\\\"y\"");
    REJECT_AT("{\"const\":\"x\"}", "\"y\"", 1);
    /* a sibling type filters the values */
    ACCEPT("{\"type\":\"string\",\"enum\":[\"a\",1]}", "\"a\"");
    REJECT_AT("{\"type\":\"string\",\"enum\":[\"a\",1]}", "1", 0);
}

static void test_objects(void) {
    const char *o = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"},"
                    "\"c\":{\"type\":\"boolean\"}},\"required\":[\"b\"]}";
    ACCEPT(o, "{\"b\":\"x\"}");
    ACCEPT(o, "{\"a\":1,\"b\":\"x\"}");
    ACCEPT(o, "{\"a\":1,\"b\":\"x\",\"c\":true}");
    ACCEPT(o, "{ \"b\" : \"x\" , \"c\" : false }");
    REJECT_AT(o, "{}", 1);                     /* b is required */
    REJECT_AT(o, "{\"a\":1}", 6);
    REJECT_AT(o, "{\"c\":true}", 2);           /* c cannot come before b */
    REJECT_AT(o, "{\"b\":\"x\",\"a\":1}", 10); /* listed order */
    REJECT_AT(o, "{\"b\":\"x\",\"d\":1}", 10); /* no additional properties */
    REJECT_AT(o, "{\"b\":\"x\",\"b\":\"y\"}", 10);
    REJECT_AT(o, "{\"a\":\"1\"}", 5);
    /* additionalProperties: a schema, after the declared ones, never a declared name again */
    const char *oa = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},"
                     "\"additionalProperties\":{\"type\":\"boolean\"}}";
    ACCEPT(oa, "{\"a\":1,\"ab\":true}");
    ACCEPT(oa, "{\"x\":true,\"y\":false}");
    REJECT_AT(oa, "{\"a\":1,\"a\":true}", 9);
    REJECT_AT(oa, "{\"x\":true,\"a\":1}", 12);
    REJECT_AT(oa, "{\"x\":1}", 5);
    REJECT_AT(oa, "{\"x\\n\":true}", 3); /* additional keys hold no escapes */
    ACCEPT("{\"type\":\"object\",\"additionalProperties\":true,\"properties\":{\"a\":{}}}", "{\"a\":[],\"z\":{\"q\":1}}");
    ACCEPT("{\"type\":\"object\"}", "{\"any\":[1,\"two\"]}");
    REJECT_AT("{\"type\":\"object\",\"additionalProperties\":false}", "{\"a\":1}", 1);
    /* a required name without a properties entry: any value */
    ACCEPT("{\"type\":\"object\",\"required\":[\"id\"]}", "{\"id\":[1]}");
    /* keys that need escaping */
    ACCEPT("{\"type\":\"object\",\"properties\":{\"a\\\"b\":{\"type\":\"null\"}},\"required\":[\"a\\\"b\"]}",
           "{\"a\\\"b\":null}");
}

static void test_arrays(void) {
    const char *a = "{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":2}";
    ACCEPT(a, "[1]");
    ACCEPT(a, "[ 1 , 2 ]");
    REJECT_AT(a, "[]", 1);
    REJECT_AT(a, "[1,2,3]", 4);
    REJECT_AT(a, "[\"1\"]", 1);
    const char *t = "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"}],\"items\":false}";
    ACCEPT(t, "[\"a\",1]");
    ACCEPT(t, "[\"a\"]");
    ACCEPT(t, "[]");
    REJECT_AT(t, "[1]", 1);
    REJECT_AT(t, "[\"a\",1,", 6);
    ACCEPT("{\"type\":\"array\",\"prefixItems\":[{\"const\":1}],\"items\":{\"type\":\"string\"}}", "[1,\"x\",\"y\"]");
    ACCEPT("{\"type\":\"array\"}", "[1,{\"a\":[]},null]");
}

static void test_combinators(void) {
    const char *any = "{\"anyOf\":[{\"type\":\"string\",\"maxLength\":2},{\"type\":\"array\",\"items\":{\"type\":\"integer\"},"
                      "\"maxItems\":2},{\"type\":\"string\",\"minLength\":4}]}";
    ACCEPT(any, "\"ab\"");
    ACCEPT(any, "\"abcd\"");
    REJECT_AT(any, "\"abc\"", 4);
    ACCEPT(any, "[1,2]");
    REJECT_AT(any, "[1,2,3]", 4);
    REJECT_AT(any, "true", 0);
    ACCEPT("{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"boolean\"}]}", "true");
    const char *tl = "{\"type\":[\"string\",\"null\"],\"maxLength\":1}";
    ACCEPT(tl, "null");
    ACCEPT(tl, "\"a\"");
    REJECT_AT(tl, "\"ab\"", 2);
    ACCEPT("{\"type\":\"integer\",\"nullable\":true}", "null");
    ACCEPT("{\"type\":\"integer\",\"nullable\":true}", "7");
    const char *rec = "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
                      "\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},"
                      "\"required\":[\"v\",\"next\"]}},\"$ref\":\"#/$defs/node\"}";
    ACCEPT(rec, "{\"v\":1,\"next\":{\"v\":2,\"next\":null}}");
    REJECT_AT(rec, "{\"v\":1,\"next\":{\"v\":2}}", 20);
    ACCEPT("{\"definitions\":{\"s\":{\"type\":\"string\"}},\"type\":\"object\",\"properties\":{\"x\":{\"$ref\":"
           "\"#/definitions/s\"}},\"required\":[\"x\"]}", "{\"x\":\"y\"}");
}

/* A schema must be refused with status want, and the message must name `name` when given. */
static void refused(const char *schema, braid_status want, const char *name) {
    braid_json_constraint *c = NULL;
    braid_status s = braid_json_constraint_new(schema, strlen(schema), &c);
    CHECK(s == want, "%s: got %s, want %s (%s)", schema, braid_status_name(s), braid_status_name(want),
          braid_last_error());
    if (name) CHECK(strstr(braid_last_error(), name) != NULL, "%s: message \"%s\" does not name %s", schema,
                    braid_last_error(), name);
    CHECK(c == NULL, "no constraint on failure");
    braid_json_constraint_free(c);
}

static void test_refused(void) {
    refused("{\"type\":\"string\",\"pattern\":\"^a+$\"}", BRAID_E_UNSUPPORTED, "pattern");
    refused("{\"type\":\"string\",\"format\":\"date-time\"}", BRAID_E_UNSUPPORTED, "format");
    refused("{\"type\":\"integer\",\"minimum\":3}", BRAID_E_UNSUPPORTED, "minimum");
    refused("{\"allOf\":[{\"type\":\"integer\"}]}", BRAID_E_UNSUPPORTED, "allOf");
    refused("{\"not\":{\"type\":\"integer\"}}", BRAID_E_UNSUPPORTED, "not");
    refused("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"format\":\"email\"}}}",
            BRAID_E_UNSUPPORTED, "format");
    refused("{\"$ref\":\"https://example.com/s.json\"}", BRAID_E_UNSUPPORTED, "$ref");
    refused("{\"$ref\":\"#/$defs/missing\"}", BRAID_E_INVALID, "missing");
    refused("{\"type\":\"strin\"}", BRAID_E_INVALID, "strin");
    refused("{\"type\":", BRAID_E_FORMAT, NULL);
    refused("[1]", BRAID_E_INVALID, NULL);
    refused("false", BRAID_E_INVALID, NULL);
    refused("{\"enum\":[]}", BRAID_E_INVALID, NULL);
    refused("{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", BRAID_E_INVALID, NULL);
    refused("{\"type\":\"array\",\"prefixItems\":[{}],\"items\":false,\"minItems\":2}", BRAID_E_INVALID, NULL);
    refused("{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}", BRAID_E_INVALID, NULL);
    refused("{\"type\":\"object\",\"properties\":{\"a\":false},\"required\":[\"a\"]}", BRAID_E_INVALID, NULL);
}

/* ---- a validator for the generated documents (the subset, with jansson) --------------------------------------- */

static size_t utf8_chars(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static int validate(json_t *v, json_t *s, json_t *root);

static int type_ok(json_t *v, const char *t) {
    if (!strcmp(t, "object")) return json_is_object(v);
    if (!strcmp(t, "array")) return json_is_array(v);
    if (!strcmp(t, "string")) return json_is_string(v);
    if (!strcmp(t, "number")) return json_is_number(v);
    if (!strcmp(t, "integer")) return json_is_integer(v);
    if (!strcmp(t, "boolean")) return json_is_boolean(v);
    if (!strcmp(t, "null")) return json_is_null(v);
    return 0;
}

static int validate(json_t *v, json_t *s, json_t *root) {
    if (json_is_true(s)) return 1;
    if (json_is_false(s)) return 0;
    json_t *k;
    if ((k = json_object_get(s, "$ref"))) {
        const char *r = json_string_value(k);
        const char *name = strrchr(r, '/') + 1;
        json_t *defs = json_object_get(root, !strncmp(r, "#/$defs/", 8) ? "$defs" : "definitions");
        return validate(v, json_object_get(defs, name), root);
    }
    if (json_is_null(v) && json_is_true(json_object_get(s, "nullable"))) return 1;
    json_t *alts = json_object_get(s, "anyOf");
    if (!alts) alts = json_object_get(s, "oneOf");
    if (alts) {
        size_t i;
        json_t *a;
        json_array_foreach(alts, i, a) if (validate(v, a, root)) return 1;
        return 0;
    }
    if ((k = json_object_get(s, "type"))) {
        int ok = 0;
        if (json_is_string(k)) ok = type_ok(v, json_string_value(k));
        else {
            size_t i;
            json_t *t;
            json_array_foreach(k, i, t) ok |= type_ok(v, json_string_value(t));
        }
        if (!ok) return 0;
    }
    if ((k = json_object_get(s, "const")) && !json_equal(k, v)) return 0;
    if ((k = json_object_get(s, "enum"))) {
        int ok = 0;
        size_t i;
        json_t *e;
        json_array_foreach(k, i, e) ok |= json_equal(e, v);
        if (!ok) return 0;
    }
    if (json_is_string(v)) {
        size_t n = utf8_chars(json_string_value(v));
        if ((k = json_object_get(s, "minLength")) && (json_int_t)n < json_integer_value(k)) return 0;
        if ((k = json_object_get(s, "maxLength")) && (json_int_t)n > json_integer_value(k)) return 0;
    }
    if (json_is_array(v)) {
        size_t n = json_array_size(v);
        if ((k = json_object_get(s, "minItems")) && (json_int_t)n < json_integer_value(k)) return 0;
        if ((k = json_object_get(s, "maxItems")) && (json_int_t)n > json_integer_value(k)) return 0;
        json_t *pre = json_object_get(s, "prefixItems"), *items = json_object_get(s, "items");
        size_t np = pre ? json_array_size(pre) : 0;
        for (size_t i = 0; i < n; i++) {
            json_t *sub = i < np ? json_array_get(pre, i) : items;
            if (sub && !validate(json_array_get(v, i), sub, root)) return 0;
        }
    }
    if (json_is_object(v)) {
        json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
        json_t *add = json_object_get(s, "additionalProperties");
        size_t i;
        json_t *r;
        json_array_foreach(req, i, r) if (!json_object_get(v, json_string_value(r))) return 0;
        const char *key;
        json_t *x;
        json_object_foreach(v, key, x) {
            json_t *ps = props ? json_object_get(props, key) : NULL;
            if (ps) {
                if (!validate(x, ps, root)) return 0;
            } else if (add && !validate(x, add, root)) return 0;
        }
    }
    return 1;
}

/* ---- tokens ----------------------------------------------------------------------------------------------- */

static braid_model *load(const char *path) {
    braid_model *m = NULL;
    braid_model_params mp = braid_model_default_params();
    return braid_model_load(path, &mp, &m) == BRAID_OK ? m : NULL;
}

/* The full mask equals token-by-token checks, after each prefix of doc. */
static void mask_matches(braid_model *model, const char *schema, const char *doc, int32_t *n_allowed_out) {
    int32_t V = braid_model_n_vocab(model);
    braid_json_constraint *c = NULL;
    braid_json_matcher *m = NULL;
    CHECK_STATUS(braid_json_constraint_new(schema, schema ? strlen(schema) : 0, &c), BRAID_OK);
    CHECK_STATUS(braid_json_matcher_new(c, &m), BRAID_OK);
    uint8_t *mask = malloc((size_t)V);
    int bad = 0;
    for (size_t i = 0; m && doc[i] && !bad; i++) {
        CHECK_STATUS(braid_json_matcher_feed(m, doc + i, 1), BRAID_OK);
        if (i % 3) continue; /* every third prefix keeps the test short */
        CHECK_STATUS(braid_json_matcher_mask(m, model, mask), BRAID_OK);
        int32_t n_allowed = 0;
        for (braid_token t = 0; t < V && !bad; t++) {
            n_allowed += mask[t];
            if (mask[t] != braid_json_matcher_allows(m, model, t)) {
                bad = 1;
                CHECK(0, "mask and allows disagree on token %d after %.*s", t, (int)i + 1, doc);
            }
        }
        if (n_allowed_out) *n_allowed_out = n_allowed;
        CHECK(n_allowed > 0, "some token must be allowed after %.*s", (int)i + 1, doc);
    }
    free(mask);
    braid_json_matcher_free(m);
    braid_json_constraint_free(c);
}

/* A token whose piece starts a multi-byte UTF-8 character without finishing it, or -1. */
static braid_token split_token(braid_model *model, unsigned char *lead) {
    int32_t V = braid_model_n_vocab(model);
    for (braid_token t = 0; t < V; t++) {
        char p[64];
        size_t n = 0;
        if (braid_token_to_piece(model, t, 0, p, sizeof p, &n) != BRAID_OK || n != 1) continue;
        unsigned char b = (unsigned char)p[0];
        if (b == 0xE2) {
            *lead = b;
            return t;
        }
    }
    return -1;
}

static braid_token token_of(braid_model *model, const char *bytes, size_t len) {
    int32_t V = braid_model_n_vocab(model);
    for (braid_token t = 0; t < V; t++) {
        char p[64];
        size_t n = 0;
        if (braid_token_to_piece(model, t, 0, p, sizeof p, &n) == BRAID_OK && n == len && !memcmp(p, bytes, len))
            return t;
    }
    return -1;
}

static void test_tokens(braid_model *model, const char *what) {
    printf("tokens on %s (%d tokens)\n", what, braid_model_n_vocab(model));
    mask_matches(model, NULL, "{\"name\": \"caf\xc3\xa9\", \"list\": [1, 2.5, true, null, {\"x\": \"\xe2\x82\xac\"}]}", NULL);
    mask_matches(model, "{\"type\":\"object\",\"properties\":{\"color\":{\"enum\":[\"red\",\"green\"]},\"n\":"
                        "{\"type\":\"integer\"}},\"required\":[\"color\",\"n\"]}", "{\"color\": \"green\", \"n\": 42}", NULL);
    /* a token that ends inside a character: fine inside a string, never outside; the next must finish it */
    unsigned char lead = 0;
    braid_token split = split_token(model, &lead);
    braid_json_constraint *c = NULL;
    braid_json_matcher *m = NULL;
    CHECK_STATUS(braid_json_constraint_new(NULL, 0, &c), BRAID_OK);
    CHECK_STATUS(braid_json_matcher_new(c, &m), BRAID_OK);
    braid_token eog = braid_token_eos(model) >= 0 ? braid_token_eos(model) : braid_token_eot(model);
    if (eog >= 0) CHECK(!braid_json_matcher_allows(m, model, eog), "end of generation before the document");
    CHECK(!braid_json_matcher_allows(m, model, split), "a split character outside a string");
    CHECK_STATUS(braid_json_matcher_feed(m, "{\"a\":\"", 6), BRAID_OK);
    if (split >= 0) {
        CHECK(braid_json_matcher_allows(m, model, split), "a split character inside a string (token %d)", split);
        CHECK_STATUS(braid_json_matcher_accept(m, model, split), BRAID_OK);
        braid_token quote = token_of(model, "\"", 1);
        CHECK(quote >= 0 && !braid_json_matcher_allows(m, model, quote), "a quote inside an unfinished character");
        braid_token cont = token_of(model, "\x82", 1);
        if (cont >= 0) CHECK(braid_json_matcher_allows(m, model, cont), "the continuation byte");
        CHECK_STATUS(braid_json_matcher_feed(m, "\x82\xac", 2), BRAID_OK);
    } else {
        printf("  (no token holds a lone UTF-8 lead byte 0xE2 here)\n");
    }
    CHECK_STATUS(braid_json_matcher_feed(m, "\"}", 2), BRAID_OK);
    if (eog >= 0) CHECK(braid_json_matcher_allows(m, model, eog), "end of generation after the document");
    CHECK(braid_json_matcher_done(m), "done after the closing brace");
    braid_json_matcher_free(m);
    braid_json_constraint_free(c);
}

/* ---- sampling ------------------------------------------------------------------------------------------------ */

/* Constrained draws against the exact masked distribution (bd_sampler_probs on logits with -inf for refused
 * tokens), and the cost of the checks. */
static void test_sampling(braid_model *model, const char *what) {
    int32_t V = braid_model_n_vocab(model);
    float *logits = malloc((size_t)V * sizeof *logits), *masked = malloc((size_t)V * sizeof *masked);
    float *probs = malloc((size_t)V * sizeof *probs);
    double *count = calloc((size_t)V, sizeof *count);
    uint8_t *mask = malloc((size_t)V);
    /* logits that favour a few tokens strongly, so truncations matter */
    uint64_t x = 12345;
    for (int32_t i = 0; i < V; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        double u01 = (double)((x >> 40) % 100000) / 100000.0;
        logits[i] = (float)(24.0 * pow(u01, 16.0)); /* a few high logits, a long flat tail */
    }
    braid_json_constraint *c = NULL;
    braid_json_matcher *m = NULL;
    CHECK_STATUS(braid_json_constraint_new(NULL, 0, &c), BRAID_OK);
    CHECK_STATUS(braid_json_matcher_new(c, &m), BRAID_OK);
    /* states: inside a string (most tokens allowed) and after a value (few allowed) */
    const char *states[] = {"{\"a\":\"x", "{\"a\":1"};
    struct { float temp; int32_t top_k; float top_p, min_p; } cfg[] = {
        {1.0f, 40, 0.9f, 0.05f}, {0.7f, 0, 1.0f, 0.0f}, {1.0f, 0, 0.8f, 0.0f}, {1.0f, 0, 1.0f, 0.2f}, {1.0f, 5, 1.0f, 0.0f}};
    for (size_t si = 0; si < 2; si++) {
        braid_json_matcher_reset(m);
        CHECK_STATUS(braid_json_matcher_feed(m, states[si], strlen(states[si])), BRAID_OK);
        CHECK_STATUS(braid_json_matcher_mask(m, model, mask), BRAID_OK);
        for (int32_t i = 0; i < V; i++) masked[i] = mask[i] ? logits[i] : -INFINITY;
        for (size_t ci = 0; ci < sizeof cfg / sizeof *cfg; ci++) {
            braid_sampler_params sp = braid_sampler_default_params();
            sp.temperature = cfg[ci].temp;
            sp.top_k = cfg[ci].top_k;
            sp.top_p = cfg[ci].top_p;
            sp.min_p = cfg[ci].min_p;
            sp.seed = 7 + ci;
            braid_sampler *ref = NULL, *s = NULL;
            CHECK_STATUS(braid_sampler_new(&sp, &ref), BRAID_OK);
            CHECK_STATUS(braid_sampler_new(&sp, &s), BRAID_OK);
            CHECK_STATUS(bd_sampler_probs(ref, masked, V, probs), BRAID_OK);
            /* the reference: the plain sampler on the masked logits, N draws, its distance from probs */
            const int N = V > 100000 ? 100 : 4000; /* the full mask of 150k tokens costs ms */
            memset(count, 0, (size_t)V * sizeof *count);
            for (int k = 0; k < N; k++) {
                braid_token t = 0;
                CHECK_STATUS(braid_sampler_sample(ref, masked, V, &t), BRAID_OK);
                count[t] += 1.0;
            }
            double ref_tv = 0;
            for (int32_t i = 0; i < V; i++) ref_tv += fabs(count[i] / N - probs[i]);
            ref_tv /= 2;
            memset(count, 0, (size_t)V * sizeof *count);
            int refused_drawn = 0;
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            for (int k = 0; k < N; k++) {
                braid_token t = -1;
                CHECK_STATUS(braid_json_matcher_sample(m, s, model, logits, &t), BRAID_OK);
                if (t < 0 || t >= V) break;
                count[t] += 1.0;
                refused_drawn += !mask[t];
            }
            clock_gettime(CLOCK_MONOTONIC, &t1);
            double tv = 0;
            for (int32_t i = 0; i < V; i++) tv += fabs(count[i] / N - probs[i]);
            tv /= 2;
            double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3) / N;
            printf("  %s, state %-8s temp %.1f top_k %2d top_p %.2f min_p %.2f: TV distance %.4f (plain sampler "
                   "on masked logits: %.4f), %.1f us/sample\n",
                   what, states[si], (double)sp.temperature, sp.top_k, (double)sp.top_p, (double)sp.min_p, tv, ref_tv,
                   us);
            CHECK(refused_drawn == 0, "a refused token was drawn %d times", refused_drawn);
            /* N draws are never exactly the distribution: the plain sampler's own distance says how far N draws
             * land; a wrong distribution lands much farther */
            CHECK(tv < 1.5 * ref_tv + 0.03, "constrained draws differ from the masked distribution (TV %.4f, "
                  "reference %.4f)", tv, ref_tv);
            braid_sampler_free(ref);
            braid_sampler_free(s);
        }
        /* greedy: the best allowed token */
        braid_sampler_params gp = braid_sampler_default_params();
        gp.temperature = 0;
        braid_sampler *g = NULL;
        CHECK_STATUS(braid_sampler_new(&gp, &g), BRAID_OK);
        braid_token t = -1, best = -1;
        CHECK_STATUS(braid_json_matcher_sample(m, g, model, logits, &t), BRAID_OK);
        for (int32_t i = 0; i < V; i++)
            if (mask[i] && (best < 0 || logits[i] > logits[best])) best = i;
        CHECK(t == best, "greedy picked %d, the best allowed is %d", t, best);
        braid_sampler_free(g);
    }
    /* the cost of one full mask and of one check */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int r = 0; r < 3; r++) {
        braid_json_matcher_reset(m);
        CHECK_STATUS(braid_json_matcher_feed(m, states[r % 2], strlen(states[r % 2])), BRAID_OK);
        CHECK_STATUS(braid_json_matcher_mask(m, model, mask), BRAID_OK);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = ((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6) / 3;
    braid_json_matcher_reset(m);
    CHECK_STATUS(braid_json_matcher_feed(m, states[0], strlen(states[0])), BRAID_OK);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int acc = 0;
    for (int32_t i = 0; i < V; i++) acc += braid_json_matcher_allows(m, model, i);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / V;
    printf("  %s: full mask %.2f ms (%d tokens), one token check %.0f ns (inside a string, %d allowed)\n", what, ms, V,
           ns, acc);
    braid_json_matcher_free(m);
    braid_json_constraint_free(c);
    free(logits);
    free(masked);
    free(probs);
    free(count);
    free(mask);
}

/* ---- generation ------------------------------------------------------------------------------------------------ */

static const char *const gen_schemas[] = {
    NULL,
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},\"age\":{\"type\":\"integer\"},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\",\"c\"]},\"maxItems\":3},\"ok\":{\"type\":\"boolean\"}},"
    "\"required\":[\"name\",\"age\"],\"additionalProperties\":false}",
    "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"number\"},{\"type\":[\"string\",\"null\"],\"maxLength\":5}],"
    "\"items\":false,\"minItems\":2}",
    "{\"$defs\":{\"leaf\":{\"type\":\"object\",\"properties\":{\"v\":{\"anyOf\":[{\"type\":\"integer\"},{\"const\":\"x\"}]}},"
    "\"required\":[\"v\"]}},\"type\":\"object\",\"properties\":{\"items\":{\"type\":\"array\",\"items\":{\"$ref\":"
    "\"#/$defs/leaf\"},\"maxItems\":2},\"extra\":{\"type\":\"string\",\"maxLength\":4}},\"required\":[\"items\"],"
    "\"additionalProperties\":{\"type\":\"null\"}}",
};

/* Parses and validates a generated document; returns 1 if it is valid. */
static int check_doc(const char *text, size_t len, const char *schema_text, const char *what) {
    json_error_t err;
    json_t *v = json_loadb(text, len, 0, &err);
    CHECK(v != NULL, "%s: the output does not parse: %s: %.*s", what, err.text, (int)len, text);
    if (!v) return 0;
    int ok = 1;
    if (schema_text) {
        json_t *s = json_loads(schema_text, 0, &err);
        ok = validate(v, s, s);
        CHECK(ok, "%s: the output does not match the schema: %.*s", what, (int)len, text);
        json_decref(s);
    } else {
        ok = json_is_object(v);
        CHECK(ok, "%s: not an object: %.*s", what, (int)len, text);
    }
    json_decref(v);
    return ok;
}

/* n_seeds runs of braid_gen_run per schema (the first greedy) and one pair of braid_gen_step generators. */
static void test_generation(braid_model *model, const char *what, int n_seeds) {
    braid_context_params cp = braid_context_default_params();
    cp.n_ctx = 2048;
    cp.n_batch = 64;
    cp.n_threads = 1;
    cp.n_seq_max = 2;
    braid_context *ctx = NULL;
    CHECK_STATUS(braid_context_new(model, &cp, &ctx), BRAID_OK);
    if (!ctx) return;
    braid_token prompt[64];
    size_t np = 0;
    CHECK_STATUS(braid_tokenize(model, "JSON:", 5, 0, 0, prompt, 64, &np), BRAID_OK);
    int complete = 0, runs = 0;
    for (size_t si = 0; si < sizeof gen_schemas / sizeof *gen_schemas; si++) {
        braid_json_constraint *c = NULL;
        const char *sch = gen_schemas[si];
        CHECK_STATUS(braid_json_constraint_new(sch, sch ? strlen(sch) : 0, &c), BRAID_OK);
        for (int seed = 0; seed < n_seeds; seed++) {
            braid_gen_params gp = braid_gen_default_params();
            gp.n_predict = 200;
            gp.json = c;
            gp.sampler.seed = (uint64_t)seed * 31 + si;
            gp.sampler.temperature = seed == 0 ? 0.0f : 1.0f;
            braid_gen *g = NULL;
            CHECK_STATUS(braid_gen_new(ctx, &gp, &g), BRAID_OK);
            if (!g) continue;
            CHECK_STATUS(braid_gen_prompt(g, prompt, (int32_t)np), BRAID_OK);
            CHECK_STATUS(braid_gen_run(g), BRAID_OK);
            size_t len = 0;
            const char *text = braid_gen_text(g, &len);
            const char *stop = braid_gen_get_stats(g)->stop;
            runs++;
            char name[96];
            snprintf(name, sizeof name, "%s schema %zu seed %d", what, si, seed);
            if (!strcmp(stop, "eog")) {
                complete += check_doc(text, len, sch, name);
            } else {
                CHECK(!strcmp(stop, "length"), "%s: stop %s", name, stop);
                /* a reply cut by the token limit is still a prefix the constraint takes */
                braid_json_matcher *m = NULL;
                CHECK_STATUS(braid_json_matcher_new(c, &m), BRAID_OK);
                CHECK_STATUS(braid_json_matcher_feed(m, text, len), BRAID_OK);
                braid_json_matcher_free(m);
            }
            if (seed == n_seeds - 1) printf("  %s: %s: %.*s\n", name, stop, (int)(len > 160 ? 160 : len), text);
            braid_gen_free(g);
        }
        /* continuous batching: two constrained replies in the same steps */
        braid_gen *gs[2] = {NULL, NULL};
        for (int i = 0; i < 2; i++) {
            braid_gen_params gp = braid_gen_default_params();
            gp.seq = i;
            gp.n_predict = 200;
            gp.json = c;
            gp.sampler.seed = 1000 + (uint64_t)i + si;
            gp.sampler.temperature = 1.0f;
            CHECK_STATUS(braid_gen_new(ctx, &gp, &gs[i]), BRAID_OK);
            if (gs[i]) CHECK_STATUS(braid_gen_begin(gs[i], prompt, (int32_t)np), BRAID_OK);
        }
        for (int step = 0; step < 400 && gs[0] && gs[1] && (braid_gen_active(gs[0]) || braid_gen_active(gs[1])); step++)
            CHECK_STATUS(braid_gen_step(gs, 2), BRAID_OK);
        for (int i = 0; i < 2 && gs[i]; i++) {
            size_t len = 0;
            const char *text = braid_gen_text(gs[i], &len);
            const char *stop = braid_gen_get_stats(gs[i])->stop;
            char name[96];
            snprintf(name, sizeof name, "%s schema %zu step gen %d", what, si, i);
            runs++;
            if (!strcmp(stop, "eog")) complete += check_doc(text, len, sch, name);
            else CHECK(!strcmp(stop, "length"), "%s: stop %s", name, stop);
            braid_gen_free(gs[i]);
        }
        braid_json_constraint_free(c);
    }
    printf("  %s: %d of %d constrained replies complete and valid (the rest hit the token limit)\n", what, complete,
           runs);
    /* a random or prose model may ramble inside a string until the limit; cut replies were checked as prefixes */
    CHECK(complete * 4 >= runs, "a quarter of the replies should complete within 200 tokens (%d of %d)", complete, runs);
    /* drafting is refused */
    braid_json_constraint *c = NULL;
    CHECK_STATUS(braid_json_constraint_new(NULL, 0, &c), BRAID_OK);
    braid_gen_params gp = braid_gen_default_params();
    gp.json = c;
    gp.lookup_n = 2;
    gp.draft_n = 1;
    braid_gen *g = NULL;
    CHECK_STATUS(braid_gen_new(ctx, &gp, &g), BRAID_E_UNSUPPORTED);
    braid_json_constraint_free(c);
    braid_context_free(ctx);
}

int main(void) {
    test_any_object();
    test_scalars();
    test_enum_const();
    test_objects();
    test_arrays();
    test_combinators();
    test_refused();

    /* the trained default model: a real 4096-token byte-level BPE vocabulary */
    const char *src = getenv("BRAID_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/models/kjv-qwen35-q8_0.gguf", src ? src : ".");
    braid_model *kjv = load(path);
    CHECK(kjv != NULL, "the default model %s loads", path);
    if (kjv) {
        test_tokens(kjv, "the default model");
        test_sampling(kjv, "default model");
        test_generation(kjv, "default model", 3);
        braid_model_free(kjv);
    }

    /* a random-weights qwen35 with the qwen35 test vocabulary (the oracle cache's) */
    const char *vocab = gen_default_vocab();
    if (!vocab || access(vocab, R_OK) != 0) {
        TEST_SKIP("no qwen35 test vocabulary (run scripts/fetch-oracle.sh) for the large-vocabulary checks");
    }
    char gpath[] = "/tmp/braid_json_XXXXXX";
    int fd = mkstemp(gpath);
    CHECK(fd >= 0, "temp file");
    if (fd >= 0) close(fd);
    gen_params gp;
    gen_params_default(&gp);
    gp.arch = "qwen35";
    gp.seed = 5;
    gen_summary sum;
    CHECK_STATUS(gen_model_write(&gp, gpath, &sum), BRAID_OK);
    braid_model *big = load(gpath);
    CHECK(big != NULL, "the generated model loads");
    if (big) {
        test_tokens(big, "the qwen35 vocabulary");
        test_sampling(big, "qwen35 vocabulary");
        test_generation(big, "random qwen35", 1); /* a full mask of 150k tokens is slow under the sanitizers */
        braid_model_free(big);
    }
    unlink(gpath);
    TEST_MAIN_END();
}
