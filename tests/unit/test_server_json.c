/* test_server_json.c — response_format through `braid serve` (constrained decoding), on loopback, on a tiny
 * generated qwen35 with the real qwen vocabulary (random weights: a model with no idea of JSON, so only the
 * constraint makes the replies valid):
 *   - json_schema (OpenAI's shape {type, json_schema: {name, schema, strict}}): every reply, streamed or not,
 *     parses and matches the schema, with finish_reason "stop" (the schema bounds the document, and max_tokens
 *     leaves room for the longest one);
 *   - json_object: the reply is a JSON object; two choices (n = 2) in the same batch steps both are;
 *   - a schema the constraint cannot honour is a 400 in OpenAI's error shape whose message names the keyword
 *     (pattern, format) or the problem (a $ref to nothing), with param response_format;
 *   - the server speculates by default (--lookup), which a constrained request turns off rather than fail on;
 *   - "speculative": {"mode": "mtp"} on this model without an MTP head is a 400 naming speculative.mode;
 *   - the server exits 0 on SIGTERM. */
#include <jansson.h>
#include <string.h>

#include "braid.h"
#include "genmodel/genmodel.h"
#include "server_harness.h"
#include "test.h"

static hs_server srv;

static json_t *post(const char *body, int *status, char **raw) {
    hc_resp r;
    *status = 0;
    if (raw) *raw = NULL;
    if (!hc_request(srv.port, "POST", "/v1/chat/completions", NULL, body, &r)) return NULL;
    *status = r.status;
    json_t *j = json_loads(r.body ? r.body : "", 0, NULL);
    if (raw && r.body) *raw = strdup(r.body);
    hc_free(&r);
    return j;
}

static json_t *at(json_t *o, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *cur = o;
    for (char *tok = strtok(buf, "."); tok && cur; tok = strtok(NULL, ".")) {
        if (json_is_array(cur)) cur = json_array_get(cur, (size_t)atoi(tok));
        else cur = json_object_get(cur, tok);
    }
    return cur;
}

static size_t utf8_chars(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* The schema below, checked by hand: {answer: "yes"|"no", score: integer, note: string <= 8 chars,
 * tags?: array of <= 2 booleans}, nothing else. */
static const char *SCHEMA =
    "{\"type\":\"object\",\"properties\":{\"answer\":{\"enum\":[\"yes\",\"no\"]},\"score\":{\"type\":\"integer\"},"
    "\"note\":{\"type\":\"string\",\"maxLength\":8},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},"
    "\"maxItems\":2}},\"required\":[\"answer\",\"score\",\"note\"],\"additionalProperties\":false}";

static int matches(const char *text, const char *what) {
    json_error_t err;
    json_t *v = json_loads(text, 0, &err);
    CHECK(v != NULL, "%s: the content does not parse (%s): %s", what, err.text, text);
    if (!v) return 0;
    int ok = json_is_object(v);
    const char *ans = json_string_value(json_object_get(v, "answer"));
    ok = ok && ans && (!strcmp(ans, "yes") || !strcmp(ans, "no"));
    ok = ok && json_is_integer(json_object_get(v, "score"));
    const char *note = json_string_value(json_object_get(v, "note"));
    ok = ok && note && utf8_chars(note) <= 8;
    json_t *tags = json_object_get(v, "tags");
    if (tags) {
        ok = ok && json_is_array(tags) && json_array_size(tags) <= 2;
        for (size_t i = 0; ok && i < json_array_size(tags); i++) ok = json_is_boolean(json_array_get(tags, i));
    }
    ok = ok && json_object_size(v) == 3u + (tags != NULL);
    CHECK(ok, "%s: the content does not match the schema: %s", what, text);
    json_decref(v);
    return ok;
}

/* The content of a streamed chat reply: the deltas joined. */
static char *stream_content(const char *body) {
    size_t cap = strlen(body) + 1, n = 0;
    char *out = calloc(cap, 1);
    for (const char *p = strstr(body, "data: "); p && out; p = strstr(p + 1, "data: ")) {
        const char *e = strstr(p, "\n\n");
        size_t len = e ? (size_t)(e - p - 6) : strlen(p + 6);
        json_t *j = json_loadb(p + 6, len, 0, NULL);
        const char *d = json_string_value(at(j, "choices.0.delta.content"));
        if (d) {
            memcpy(out + n, d, strlen(d));
            n += strlen(d);
        }
        json_decref(j);
    }
    return out;
}

static void expect_400(const char *schema, const char *name) {
    char body[2048];
    snprintf(body, sizeof body,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":5,\"response_format\":{\"type\":"
             "\"json_schema\",\"json_schema\":{\"name\":\"t\",\"strict\":true,\"schema\":%s}}}",
             schema);
    int st;
    char *raw = NULL;
    json_t *j = post(body, &st, &raw);
    const char *msg = json_string_value(at(j, "error.message"));
    CHECK(st == 400, "%s: status %d, want 400: %s", name, st, raw ? raw : "");
    CHECK(msg && strstr(msg, name), "%s: the message names it: %s", name, msg ? msg : "(none)");
    CHECK(json_is_string(at(j, "error.type")), "%s: OpenAI error shape", name);
    const char *param = json_string_value(at(j, "error.param"));
    CHECK(param && !strcmp(param, "response_format"), "%s: param response_format", name);
    json_decref(j);
    free(raw);
}

int main(void) {
    const char *build = test_env("BRAID_BUILD_DIR", ".");
    char model[1100], exe[1100], logp[1100], args[4000];
    snprintf(model, sizeof model, "%s/test_server_json.gguf", build);
    snprintf(exe, sizeof exe, "%s/braid", build);
    snprintf(logp, sizeof logp, "%s/test_server_json.log", build);
    gen_params gp;
    gen_params_default(&gp);
    gp.type = BRAID_TYPE_Q8_0;
    gp.seed = 3;
    gen_summary sum;
    braid_status gs = gen_model_write(&gp, model, &sum);
    if (gs != BRAID_OK) TEST_SKIP("no vocabulary to build the model from (%s)", braid_last_error());
    snprintf(args, sizeof args, "-m '%s' -c 2048 -t 1 --parallel 2 --lookup 3", model);
    CHECK(hs_start(&srv, exe, args, logp), "the server starts");
    if (!srv.port) TEST_MAIN_END();

    /* json_schema, not streamed, greedy and sampled */
    for (int i = 0; i < 3; i++) {
        char body[4096], what[64];
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"Rate this: %d\"}],\"max_tokens\":600,"
                 "\"temperature\":%s,\"seed\":%d,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
                 "{\"name\":\"rating\",\"strict\":true,\"schema\":%s}}}",
                 i, i == 0 ? "0" : "1.0", 100 + i, SCHEMA);
        snprintf(what, sizeof what, "json_schema request %d", i);
        int st;
        char *raw = NULL;
        json_t *j = post(body, &st, &raw);
        CHECK(st == 200, "%s: status %d: %s", what, st, raw ? raw : "");
        const char *content = json_string_value(at(j, "choices.0.message.content"));
        const char *finish = json_string_value(at(j, "choices.0.finish_reason"));
        CHECK(content != NULL, "%s: content", what);
        CHECK(finish && !strcmp(finish, "stop"), "%s: finish_reason %s", what, finish ? finish : "(none)");
        if (content) {
            printf("%s: %s\n", what, content);
            matches(content, what);
        }
        json_decref(j);
        free(raw);
    }

    /* json_schema, streamed: the deltas join into a valid document */
    {
        char body[4096];
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"Stream it\"}],\"max_tokens\":600,\"stream\":true,"
                 "\"temperature\":0.8,\"seed\":7,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
                 "{\"name\":\"rating\",\"schema\":%s}}}",
                 SCHEMA);
        hc_resp r;
        CHECK(hc_request(srv.port, "POST", "/v1/chat/completions", NULL, body, &r) && r.status == 200, "stream: 200");
        char *content = r.body ? stream_content(r.body) : NULL;
        if (content) {
            printf("streamed: %s\n", content);
            matches(content, "streamed json_schema");
        }
        free(content);
        hc_free(&r);
    }

    /* json_object, two choices decoded together */
    {
        int st;
        char *raw = NULL;
        json_t *j = post("{\"messages\":[{\"role\":\"user\",\"content\":\"Any object\"}],\"max_tokens\":300,\"n\":2,"
                         "\"temperature\":1.0,\"seed\":11,\"response_format\":{\"type\":\"json_object\"}}",
                         &st, &raw);
        CHECK(st == 200, "json_object: status %d: %s", st, raw ? raw : "");
        for (int i = 0; i < 2; i++) {
            char path[64];
            snprintf(path, sizeof path, "choices.%d.message.content", i);
            const char *content = json_string_value(at(j, path));
            snprintf(path, sizeof path, "choices.%d.finish_reason", i);
            const char *finish = json_string_value(at(j, path));
            CHECK(content != NULL, "json_object choice %d: content", i);
            if (!content) continue;
            printf("json_object choice %d (%s): %.200s\n", i, finish ? finish : "?", content);
            if (finish && !strcmp(finish, "stop")) {
                json_t *v = json_loads(content, 0, NULL);
                CHECK(json_is_object(v), "json_object choice %d: an object: %s", i, content);
                json_decref(v);
            } else {
                /* cut by max_tokens: still the beginning of an object */
                CHECK(content[0] == '{' || content[0] == ' ' || content[0] == '\n', "json_object choice %d: %s", i,
                      content);
            }
        }
        json_decref(j);
        free(raw);
    }

    /* refused schemas name the problem */
    expect_400("{\"type\":\"string\",\"pattern\":\"^[a-z]+$\"}", "pattern");
    expect_400("{\"type\":\"object\",\"properties\":{\"d\":{\"type\":\"string\",\"format\":\"date\"}}}", "format");
    expect_400("{\"$ref\":\"#/$defs/nowhere\"}", "nowhere");
    expect_400("{\"type\":\"integer\",\"maximum\":5}", "maximum");

    /* this random model has no MTP head: a request asking to draft with one is a 400 that says so */
    {
        int st;
        char *raw = NULL;
        json_t *j = post("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":5,"
                         "\"speculative\":{\"mode\":\"mtp\"}}",
                         &st, &raw);
        const char *param = json_string_value(at(j, "error.param"));
        CHECK(st == 400 && param && !strcmp(param, "speculative.mode") && raw && strstr(raw, "MTP"),
              "mode mtp without an MTP head: %d %s", st, raw ? raw : "");
        json_decref(j);
        free(raw);
    }

    CHECK(hs_stop(&srv) == 0, "the server exits 0 on SIGTERM");
    unlink(model);
    TEST_MAIN_END();
}
