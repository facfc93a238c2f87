/* test_server_parse.c — the server's parsers without a server: request validation (server/request.c: the
 * fields it reads, its defaults, null as absent, the errors with the parameter named) and tool calls in
 * model output (server/tool_calls.c: each family's format, content before the call, arguments as JSON text). */
#include <jansson.h>
#include <string.h>

#include "request.h"
#include "test.h"
#include "tool_calls.h"

static int parse(const char *body, srv_req_kind k, srv_request *r, srv_req_error *e) {
    return srv_request_parse(body, strlen(body), k, r, e);
}

static void bad(const char *body, srv_req_kind k, const char *param) {
    srv_request r;
    srv_req_error e;
    int ok = parse(body, k, &r, &e);
    CHECK(!ok && e.status == 400 && !strcmp(e.param, param) && e.message[0], "refused with param '%s': %s (got '%s': %s)",
          param, body, ok ? "" : e.param, ok ? "accepted" : e.message);
    if (ok) srv_request_free(&r);
}

static json_t *calls_of(const char *text, size_t *pre) {
    return srv_tool_calls_parse(text, strlen(text), "t", 0, pre);
}

static const char *call_name(json_t *calls, size_t i) {
    return json_string_value(json_object_get(json_object_get(json_array_get(calls, i), "function"), "name"));
}

static json_t *call_args(json_t *calls, size_t i) {
    const char *a =
        json_string_value(json_object_get(json_object_get(json_array_get(calls, i), "function"), "arguments"));
    return a ? json_loads(a, 0, NULL) : NULL;
}

int main(void) {
    srv_request r;
    srv_req_error e;
    /* defaults and a full request */
    CHECK(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", SRV_REQ_CHAT, &r, &e), "minimal chat");
    CHECK(r.n == 1 && r.max_tokens == -1 && !r.stream && r.sampler.temperature == 1.0f && r.n_stop == 0 &&
              r.tool_choice == SRV_TOOLS_NONE,
          "defaults");
    srv_request_free(&r);
    CHECK(parse("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\","
                "\"text\":\"b\"}]},{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"1\",\"type\":"
                "\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"x\\\":1}\"}}]}],\"max_tokens\":3,"
                "\"max_completion_tokens\":7,\"temperature\":null,\"stop\":[\"a\",\"\",\"b\"],\"seed\":5,\"logprobs\":"
                "true,\"top_logprobs\":4,\"n\":2,\"unknown_field\":{\"x\":1},\"tools\":[{\"type\":\"function\","
                "\"function\":{\"name\":\"f\"}}],\"tool_choice\":\"required\"}",
                SRV_REQ_CHAT, &r, &e),
          "full chat: %s", e.message);
    CHECK(r.max_tokens == 7 && r.sampler.temperature == 1.0f && r.n_stop == 2 && r.has_seed && r.sampler.seed == 5 &&
              r.logprobs && r.top_logprobs == 4 && r.n == 2 && r.tool_choice == SRV_TOOLS_REQUIRED && r.tools_json,
          "fields read (max_completion_tokens wins, null = default, empty stop dropped, unknown ignored)");
    json_t *m = json_loads(r.messages_json ? r.messages_json : "", 0, NULL);
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(m, 0), "content")) ?: "", "ab"), "parts joined");
    json_t *args = json_object_get(json_object_get(json_array_get(json_object_get(json_array_get(m, 1), "tool_calls"), 0),
                                                   "function"),
                                   "arguments");
    CHECK(json_is_object(args) && json_integer_value(json_object_get(args, "x")) == 1,
          "tool-call arguments parsed into an object for the template");
    json_decref(m);
    srv_request_free(&r);
    CHECK(parse("{\"prompt\":[\"text\"],\"logprobs\":2}", SRV_REQ_COMPLETION, &r, &e) && !strcmp(r.prompt, "text") &&
              r.logprobs && r.top_logprobs == 2,
          "completion: a one-string array, logprobs as a count");
    srv_request_free(&r);
    CHECK(parse("{\"prompt\":[5,6,7]}", SRV_REQ_COMPLETION, &r, &e) && r.n_prompt_tokens == 3 && r.prompt_tokens[2] == 7,
          "completion: token ids");
    srv_request_free(&r);
    /* refusals name the parameter */
    bad("{}", SRV_REQ_CHAT, "messages");
    bad("{\"messages\":[]}", SRV_REQ_CHAT, "messages");
    bad("{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}", SRV_REQ_CHAT, "messages[0].role");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":5}]}", SRV_REQ_CHAT, "messages[0].content");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", SRV_REQ_CHAT, "messages[0].content");
    /* images: base64 data: URLs become bytes and a marker in the text, in order; anything else is refused */
    CHECK(parse("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":"
                "\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,aGk=\"}},{\"type\":\"image_url\","
                "\"image_url\":{\"url\":\"data:image/jpeg;base64,YWJj\\nZA\"}}]}]}",
                SRV_REQ_CHAT, &r, &e) &&
              r.n_images == 2 && r.images[0].size == 2 && !memcmp(r.images[0].data, "hi", 2) && r.images[1].size == 4 &&
              !memcmp(r.images[1].data, "abcd", 4) && strstr(r.messages_json, "a" SRV_IMAGE_MARKER SRV_IMAGE_MARKER),
          "chat: two image parts decoded (%s)", e.message);
    srv_request_free(&r);
    const char *urls[] = {"https://example.com/a.png", "http://x/y.png", "file:///etc/passwd", "data:image/png,abc",
                          "data:image/png;base64,a$b=", "data:image/png;base64,YQ=x", "data:image/png;base64,Y",
                          "data:image/png;base64,"};
    for (size_t i = 0; i < sizeof urls / sizeof *urls; i++) {
        char body[512];
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":"
                 "\"%s\"}}]}]}",
                 urls[i]);
        bad(body, SRV_REQ_CHAT, "messages[0].content");
    }
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":1}", SRV_REQ_CHAT, "stream");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":-1}", SRV_REQ_CHAT, "max_tokens");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":1.5}", SRV_REQ_CHAT, "max_tokens");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_p\":\"1\"}", SRV_REQ_CHAT, "top_p");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[1]}", SRV_REQ_CHAT, "stop");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"seed\":\"1\"}", SRV_REQ_CHAT, "seed");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":0}", SRV_REQ_CHAT, "n");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":21,\"logprobs\":true}", SRV_REQ_CHAT,
        "top_logprobs");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":{}}", SRV_REQ_CHAT, "tools");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"sometimes\"}", SRV_REQ_CHAT, "tool_choice");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"required\"}", SRV_REQ_CHAT, "tool_choice");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"xml\"}}", SRV_REQ_CHAT,
        "response_format");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream_options\":[]}", SRV_REQ_CHAT, "stream_options");
    bad("{\"prompt\":\"x\",\"echo\":true}", SRV_REQ_COMPLETION, "echo");
    bad("{\"prompt\":\"x\",\"best_of\":3}", SRV_REQ_COMPLETION, "best_of");
    bad("{\"prompt\":[1,-2]}", SRV_REQ_COMPLETION, "prompt");
    bad("{\"prompt\":\"\"}", SRV_REQ_COMPLETION, "prompt");
    bad("{\"prompt\":\"a\",\"prompt\":\"b\"}", SRV_REQ_COMPLETION, "");
    bad("not json", SRV_REQ_COMPLETION, "");
    bad("{\"prompt\":\"\xc3\x28\"}", SRV_REQ_COMPLETION, "");
    /* "speculative": a mode, n (or n_max) and ngram, each named when wrong; null and absent are the default */
    CHECK(parse("{\"prompt\":\"a\",\"speculative\":{\"mode\":\"lookup\",\"n\":4,\"ngram\":2,\"p_min\":0.5}}",
                SRV_REQ_COMPLETION, &r, &e),
          "speculative lookup: %s", e.message);
    CHECK(r.spec_mode == SRV_SPEC_LOOKUP && r.spec_n == 4 && r.spec_ngram == 2, "speculative fields read");
    srv_request_free(&r);
    CHECK(parse("{\"prompt\":\"a\",\"speculative\":{\"mode\":\"draft\",\"n_max\":3}}", SRV_REQ_COMPLETION, &r, &e) &&
              r.spec_mode == SRV_SPEC_DRAFT && r.spec_n == 3,
          "n_max is n");
    srv_request_free(&r);
    CHECK(parse("{\"prompt\":\"a\",\"speculative\":null}", SRV_REQ_COMPLETION, &r, &e) && r.spec_mode == SRV_SPEC_DEFAULT &&
              r.spec_n == 0 && r.spec_ngram == 0,
          "speculative null: the server's default");
    srv_request_free(&r);
    bad("{\"prompt\":\"a\",\"speculative\":true}", SRV_REQ_COMPLETION, "speculative");
    bad("{\"prompt\":\"a\",\"speculative\":{\"mode\":\"eagle\"}}", SRV_REQ_COMPLETION, "speculative.mode");
    bad("{\"prompt\":\"a\",\"speculative\":{\"n\":0}}", SRV_REQ_COMPLETION, "speculative.n");
    bad("{\"prompt\":\"a\",\"speculative\":{\"n\":1.5}}", SRV_REQ_COMPLETION, "speculative.n");
    bad("{\"prompt\":\"a\",\"speculative\":{\"n_max\":99}}", SRV_REQ_COMPLETION, "speculative.n_max");
    bad("{\"prompt\":\"a\",\"speculative\":{\"ngram\":65}}", SRV_REQ_COMPLETION, "speculative.ngram");
    bad("{\"prompt\":\"a\",\"speculative\":{\"mode\":\"off\",\"ngram\":2}}", SRV_REQ_COMPLETION, "speculative");

    /* tool calls */
    size_t pre = 99;
    json_t *c = calls_of("Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                         "</tool_call>\n<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 2}\"}\n</tool_call>",
                         &pre);
    CHECK(json_array_size(c) == 2 && !strcmp(call_name(c, 0) ?: "", "get_weather") && !strcmp(call_name(c, 1) ?: "", "f"),
          "hermes: two calls");
    json_t *a = call_args(c, 0);
    CHECK(!strcmp(json_string_value(json_object_get(a, "city")) ?: "", "Paris") && pre == strlen("Let me look."),
          "hermes: arguments and the content before");
    json_decref(a);
    a = call_args(c, 1);
    CHECK(json_integer_value(json_object_get(a, "a")) == 2, "hermes: string arguments parsed");
    CHECK(!strncmp(json_string_value(json_object_get(json_array_get(c, 0), "id")) ?: "", "call_", 5) &&
              !strcmp(json_string_value(json_object_get(json_array_get(c, 0), "type")) ?: "", "function"),
          "ids and type");
    json_decref(a);
    json_decref(c);
    c = calls_of("<tool_call>\n<function=search>\n<parameter=query>\nbraid runtime\n</parameter>\n<parameter=limit>\n5\n"
                 "</parameter>\n</function>\n</tool_call>",
                 &pre);
    a = call_args(c, 0);
    CHECK(json_array_size(c) == 1 && !strcmp(call_name(c, 0) ?: "", "search") &&
              !strcmp(json_string_value(json_object_get(a, "query")) ?: "", "braid runtime") &&
              json_integer_value(json_object_get(a, "limit")) == 5 && pre == 0,
          "Qwen3.5 / Qwen3-Coder XML");
    json_decref(a);
    json_decref(c);
    c = calls_of("<TOOLCALL>[{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {\"k\": true}}]</TOOLCALL>",
                 NULL);
    CHECK(json_array_size(c) == 2 && !strcmp(call_name(c, 1) ?: "", "b"), "Nemotron");
    json_decref(c);
    c = calls_of("<|tool_call|>[{\"name\": \"g\", \"arguments\": {\"x\": [1, 2]}}]", NULL);
    CHECK(json_array_size(c) == 1 && !strcmp(call_name(c, 0) ?: "", "g"), "Granite");
    json_decref(c);
    c = calls_of("ok <|tool_call_start|>[lookup(city=\"Oslo\", days=3, metric=True), ping()]<|tool_call_end|>", &pre);
    a = call_args(c, 0);
    CHECK(json_array_size(c) == 2 && !strcmp(call_name(c, 0) ?: "", "lookup") &&
              !strcmp(json_string_value(json_object_get(a, "city")) ?: "", "Oslo") &&
              json_integer_value(json_object_get(a, "days")) == 3 && json_is_true(json_object_get(a, "metric")) &&
              !strcmp(call_name(c, 1) ?: "", "ping") && pre == 2,
          "LFM2 pythonic");
    json_decref(a);
    json_decref(c);
    CHECK(!calls_of("just text, no call", NULL), "plain text: no calls");
    CHECK(!calls_of("<tool_call>not json at all</tool_call>", NULL), "a broken call is not a call");
    TEST_MAIN_END();
}
