/* test_server.c — `braid serve` end to end on loopback, on a tiny generated qwen35 (Q8_0 matrices, the real
 * qwen vocabulary and ChatML template):
 * - shapes: /health, /v1/models, /metrics (Prometheus text), /slots, chat and text completions (OpenAI
 *   fields, usage with prompt_tokens_details.cached_tokens, braid's timings), streams (role chunk first,
 *   content deltas that concatenate to the non-streamed text, finish chunk, the usage chunk with
 *   include_usage, data: [DONE] last), n = 2, logprobs + top_logprobs, /tokenize, /detokenize (round trip),
 *   /apply-template (the rendered ChatML);
 * - errors and their codes: malformed JSON, wrong types (param named), invalid UTF-8, top_logprobs without
 *   logprobs -> 400; unknown model -> 404 model_not_found; no / wrong API key -> 401 (health needs none);
 *   body over --max-body -> 413; full queue -> 429 with Retry-After; prompt over the slot's context -> 400
 *   with n_prompt_tokens and n_ctx; unknown route 404, wrong method 405;
 * - batch invariance: four greedy requests sent together give the same text and the same log-probabilities
 *   (top 5 per token, printed with 17 digits: the logits' bits) as the same requests one at a time;
 * - reuse: a follow-up turn that extends the previous conversation reports cached tokens;
 * - cancellation: a client that drops its stream frees the slot, and the server answers the same as before;
 * - the server exits 0 on SIGTERM. */
#include <jansson.h>
#include <pthread.h>
#include <string.h>

#include "braid.h"
#include "genmodel/genmodel.h"
#include "server_harness.h"
#include "test.h"

static hs_server srv;
static const char *KEY = "Authorization: Bearer sekret\r\n";

static json_t *post_json(const char *path, const char *body, int *status) {
    hc_resp r;
    *status = 0;
    if (!hc_request(srv.port, "POST", path, KEY, body, &r)) return NULL;
    *status = r.status;
    json_t *j = json_loads(r.body, 0, NULL);
    hc_free(&r);
    return j;
}

static const char *jstr(json_t *o, const char *path) {
    /* a dotted path: "choices.0.message.content" */
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *cur = o;
    for (char *tok = strtok(buf, "."); tok && cur; tok = strtok(NULL, ".")) {
        if (json_is_array(cur)) cur = json_array_get(cur, (size_t)atoi(tok));
        else cur = json_object_get(cur, tok);
    }
    return json_string_value(cur);
}

static json_t *jget(json_t *o, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *cur = o;
    for (char *tok = strtok(buf, "."); tok && cur; tok = strtok(NULL, ".")) {
        if (json_is_array(cur)) cur = json_array_get(cur, (size_t)atoi(tok));
        else cur = json_object_get(cur, tok);
    }
    return cur;
}

static void expect_error(const char *path, const char *body, const char *headers, int status, const char *what) {
    hc_resp r;
    int ok = hc_request(srv.port, "POST", path, headers, body, &r);
    json_t *j = ok ? json_loads(r.body, 0, NULL) : NULL;
    CHECK(ok && r.status == status, "%s: status %d (want %d): %s", what, r.status, status, ok ? r.body : "");
    CHECK(json_is_string(jget(j, "error.message")) && json_is_string(jget(j, "error.type")),
          "%s: OpenAI error shape", what);
    json_decref(j);
    hc_free(&r);
}

/* The text of a stream: content deltas joined; checks the event order. */
static char *stream_text(const char *body, int chat, int *n_events, int *saw_usage, int *done_last) {
    size_t cap = strlen(body) + 1, o = 0;
    char *out = calloc(cap, 1);
    *n_events = *saw_usage = *done_last = 0;
    const char *p = body;
    int first = 1;
    while ((p = strstr(p, "data: "))) {
        p += 6;
        const char *e = strstr(p, "\n\n");
        if (!e) break;
        *done_last = !strncmp(p, "[DONE]", 6);
        if (!*done_last) {
            json_t *j = json_loadb(p, (size_t)(e - p), 0, NULL);
            (*n_events)++;
            if (first && chat) CHECK(!strcmp(jstr(j, "choices.0.delta.role") ?: "", "assistant"), "first chunk: role");
            first = 0;
            if (json_object_get(j, "usage")) *saw_usage = 1;
            const char *c = chat ? jstr(j, "choices.0.delta.content") : jstr(j, "choices.0.text");
            if (c) {
                size_t l = strlen(c);
                memcpy(out + o, c, l);
                o += l;
            }
            json_decref(j);
        }
        p = e;
    }
    return out;
}

typedef struct {
    const char *body;
    char *answer;
} par_req;

static void *par_run(void *arg) {
    par_req *q = arg;
    hc_resp r;
    if (hc_request(srv.port, "POST", "/v1/chat/completions", KEY, q->body, &r) && r.status == 200) {
        json_t *j = json_loads(r.body, 0, NULL);
        json_t *c = jget(j, "choices.0");
        q->answer = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
        json_decref(j);
    }
    hc_free(&r);
    return NULL;
}

int main(void) {
    const char *build = test_env("BRAID_BUILD_DIR", ".");
    char model[1100], exe[1100], logp[1100], args[4000];
    snprintf(model, sizeof model, "%s/test_server.gguf", build);
    snprintf(exe, sizeof exe, "%s/braid", build);
    snprintf(logp, sizeof logp, "%s/test_server.log", build);
    gen_params gp;
    gen_params_default(&gp);
    gp.type = BRAID_TYPE_Q8_0;
    gen_summary sum;
    braid_status gs = gen_model_write(&gp, model, &sum);
    if (gs != BRAID_OK) TEST_SKIP("no vocabulary to build the model from (%s)", braid_last_error());
    snprintf(args, sizeof args, "-m '%s' -c 256 -t 1 --parallel 4 --api-key sekret --max-body 65536 --alias tiny",
             model);
    CHECK(hs_start(&srv, exe, args, logp), "the server starts");
    if (!srv.port) TEST_MAIN_END();

    /* ---- shapes ---- */
    hc_resp r;
    CHECK(hc_request(srv.port, "GET", "/health", NULL, NULL, &r) && r.status == 200 && strstr(r.body, "\"ok\""),
          "/health without a key: 200 ok");
    hc_free(&r);
    CHECK(hc_request(srv.port, "GET", "/v1/models", KEY, NULL, &r) && r.status == 200, "/v1/models");
    json_t *j = json_loads(r.body ? r.body : "", 0, NULL);
    CHECK(!strcmp(jstr(j, "object") ?: "", "list") && !strcmp(jstr(j, "data.0.id") ?: "", "test_server.gguf") &&
              !strcmp(jstr(j, "data.1.id") ?: "", "tiny"),
          "models: the file's name and the alias");
    json_decref(j);
    hc_free(&r);

    const char *chat1 = "{\"model\":\"test_server.gguf\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                        "{\"role\":\"user\",\"content\":\"Hello there\"}],\"max_tokens\":10,\"temperature\":0}";
    int st;
    j = post_json("/v1/chat/completions", chat1, &st);
    CHECK(st == 200, "chat: 200 (%d)", st);
    CHECK(!strcmp(jstr(j, "object") ?: "", "chat.completion") && !strcmp(jstr(j, "choices.0.message.role") ?: "", "assistant"),
          "chat: object and role");
    const char *text1 = jstr(j, "choices.0.message.content");
    char *chat_text = text1 ? strdup(text1) : NULL;
    CHECK(chat_text && *chat_text, "chat: content");
    CHECK(!strcmp(jstr(j, "choices.0.finish_reason") ?: "", "length"), "chat: finish_reason length at max_tokens");
    json_int_t pt = json_integer_value(jget(j, "usage.prompt_tokens"));
    CHECK(pt > 5 && json_integer_value(jget(j, "usage.completion_tokens")) == 10 &&
              json_integer_value(jget(j, "usage.total_tokens")) == pt + 10 &&
              json_is_integer(jget(j, "usage.prompt_tokens_details.cached_tokens")),
          "chat: usage");
    CHECK(json_is_integer(jget(j, "timings.prompt_n")) && json_is_number(jget(j, "timings.predicted_ms")), "timings");
    json_decref(j);

    /* the alias and no model both work */
    j = post_json("/v1/chat/completions",
                  "{\"model\":\"tiny\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\","
                  "\"content\":\"Hello there\"}],\"max_tokens\":10,\"temperature\":0}",
                  &st);
    CHECK(st == 200 && chat_text && !strcmp(jstr(j, "choices.0.message.content") ?: "", chat_text),
          "the alias answers the same (greedy)");
    json_decref(j);

    /* streaming gives the same text */
    hc_request(srv.port, "POST", "/v1/chat/completions", KEY,
               "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hello "
               "there\"}],\"max_tokens\":10,\"temperature\":0,\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
               &r);
    char ct[256];
    CHECK(r.status == 200 && strstr(hc_header(&r, "Content-Type", ct, sizeof ct), "text/event-stream"),
          "stream: 200 text/event-stream");
    int nev, usage, done_last;
    char *stxt = stream_text(r.body ? r.body : "", 1, &nev, &usage, &done_last);
    CHECK(chat_text && !strcmp(stxt, chat_text), "stream: the deltas join to the same text ('%s' vs '%s')", stxt,
          chat_text ? chat_text : "");
    CHECK(usage && done_last && nev >= 3, "stream: usage chunk, [DONE] last (%d events)", nev);
    free(stxt);
    hc_free(&r);

    /* text completions: string and token prompts */
    j = post_json("/v1/completions", "{\"prompt\":\"In the beginning\",\"max_tokens\":6,\"temperature\":0}", &st);
    CHECK(st == 200 && !strcmp(jstr(j, "object") ?: "", "text_completion") && jstr(j, "choices.0.text"),
          "completion: shape");
    char *comp_text = jstr(j, "choices.0.text") ? strdup(jstr(j, "choices.0.text")) : NULL;
    json_decref(j);
    hc_request(srv.port, "POST", "/v1/completions", KEY,
               "{\"prompt\":\"In the beginning\",\"max_tokens\":6,\"temperature\":0,\"stream\":true}", &r);
    stxt = stream_text(r.body ? r.body : "", 0, &nev, &usage, &done_last);
    CHECK(comp_text && !strcmp(stxt, comp_text) && done_last && !usage, "completion stream: same text, no usage");
    free(stxt);
    hc_free(&r);
    j = post_json("/tokenize", "{\"content\":\"In the beginning\"}", &st);
    json_t *toks = json_object_get(j, "tokens");
    CHECK(st == 200 && json_array_size(toks) >= 2, "tokenize");
    char *toks_txt = json_dumps(toks, JSON_COMPACT);
    char body[4096];
    snprintf(body, sizeof body, "{\"tokens\":%s}", toks_txt ? toks_txt : "[]");
    json_decref(j);
    j = post_json("/detokenize", body, &st);
    CHECK(st == 200 && !strcmp(jstr(j, "content") ?: "", "In the beginning"), "detokenize round trip");
    json_decref(j);
    snprintf(body, sizeof body, "{\"prompt\":%s,\"max_tokens\":6,\"temperature\":0}", toks_txt ? toks_txt : "[]");
    free(toks_txt);
    j = post_json("/v1/completions", body, &st);
    CHECK(st == 200 && jstr(j, "choices.0.text"), "completion from token ids");
    json_decref(j);
    j = post_json("/apply-template", "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}", &st);
    CHECK(st == 200 && strstr(jstr(j, "prompt") ?: "", "<|im_start|>user\nHi<|im_end|>"), "apply-template");
    json_decref(j);

    /* n = 2 and logprobs */
    j = post_json("/v1/chat/completions",
                  "{\"messages\":[{\"role\":\"user\",\"content\":\"Count\"}],\"max_tokens\":5,\"n\":2,\"seed\":7,"
                  "\"logprobs\":true,\"top_logprobs\":3}",
                  &st);
    CHECK(st == 200 && json_array_size(json_object_get(j, "choices")) == 2, "n = 2: two choices");
    json_t *lp = jget(j, "choices.0.logprobs.content");
    CHECK(json_array_size(lp) == 5, "logprobs: one entry per token (%zu)", json_array_size(lp));
    for (size_t i = 0; i < json_array_size(lp); i++) {
        json_t *e = json_array_get(lp, i), *top = json_object_get(e, "top_logprobs");
        CHECK(json_array_size(top) == 3 && json_real_value(json_object_get(e, "logprob")) <= 0, "entry %zu", i);
        for (size_t k = 1; k < json_array_size(top); k++)
            CHECK(json_real_value(json_object_get(json_array_get(top, k - 1), "logprob")) >=
                      json_real_value(json_object_get(json_array_get(top, k), "logprob")),
                  "top_logprobs sorted");
    }
    json_decref(j);
    j = post_json("/v1/chat/completions",
                  "{\"messages\":[{\"role\":\"user\",\"content\":\"Count\"}],\"max_tokens\":5,\"temperature\":0,"
                  "\"logprobs\":true,\"top_logprobs\":2}",
                  &st);
    lp = jget(j, "choices.0.logprobs.content");
    int greedy_top = json_array_size(lp) > 0;
    for (size_t i = 0; i < json_array_size(lp); i++)
        greedy_top &= json_real_value(jget(json_array_get(lp, i), "logprob")) ==
                      json_real_value(jget(json_array_get(lp, i), "top_logprobs.0.logprob"));
    CHECK(greedy_top, "greedy: every chosen token is the top alternative");
    json_decref(j);

    /* ---- errors ---- */
    const char *C = "/v1/chat/completions";
    expect_error(C, "{\"messages\": [", KEY, 400, "malformed JSON");
    expect_error(C, "[1,2]", KEY, 400, "not an object");
    expect_error(C, "{\"messages\":\"hi\"}", KEY, 400, "messages as a string");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":\"ten\"}", KEY, 400,
                 "max_tokens as a string");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":5}", KEY, 400,
                 "temperature out of range");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}", KEY, 400, "invalid UTF-8");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}", KEY, 400,
                 "top_logprobs without logprobs");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":9}", KEY, 400, "n over the slots");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\","
                    "\"function\":{\"name\":\"f\"}}],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"g\"}}}",
                 KEY, 400, "tool_choice naming an unknown tool");
    hc_request(srv.port, "POST", C, KEY, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":\"ten\"}",
               &r);
    j = json_loads(r.body ? r.body : "", 0, NULL);
    CHECK(!strcmp(jstr(j, "error.param") ?: "", "max_tokens"), "the error names the parameter");
    json_decref(j);
    hc_free(&r);
    hc_request(srv.port, "POST", C, KEY, "{\"model\":\"gpt-9\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", &r);
    j = json_loads(r.body ? r.body : "", 0, NULL);
    CHECK(r.status == 404 && !strcmp(jstr(j, "error.code") ?: "", "model_not_found"), "unknown model: 404 model_not_found");
    json_decref(j);
    hc_free(&r);
    expect_error(C, chat1, NULL, 401, "no API key");
    expect_error(C, chat1, "Authorization: Bearer wrong\r\n", 401, "wrong API key");
    CHECK(hc_request(srv.port, "GET", "/v1/models", "X-Api-Key: sekret\r\n", NULL, &r) && r.status == 200,
          "X-Api-Key works too");
    hc_free(&r);
    char *huge = malloc(100000);
    memset(huge, ' ', 99999);
    huge[0] = '{', huge[99998] = '}', huge[99999] = 0;
    expect_error(C, huge, KEY, 413, "body over --max-body");
    free(huge);
    {
        /* a prompt longer than the slot's 256 tokens */
        char *big = malloc(20000);
        int o = snprintf(big, 20000, "{\"messages\":[{\"role\":\"user\",\"content\":\"");
        for (int i = 0; i < 400; i++) o += snprintf(big + o, 20000 - o, "word%d ", i);
        snprintf(big + o, 20000 - o, "\"}]}");
        hc_request(srv.port, "POST", C, KEY, big, &r);
        j = json_loads(r.body ? r.body : "", 0, NULL);
        CHECK(r.status == 400 && json_integer_value(jget(j, "error.n_ctx")) == 256 &&
                  json_integer_value(jget(j, "error.n_prompt_tokens")) > 256,
              "prompt over the context: 400 with the sizes (%d)", r.status);
        json_decref(j);
        hc_free(&r);
        free(big);
    }
    CHECK(hc_request(srv.port, "GET", "/nope", KEY, NULL, &r) && r.status == 404, "unknown route: 404");
    hc_free(&r);
    CHECK(hc_request(srv.port, "GET", C, KEY, NULL, &r) && r.status == 405, "GET on a POST route: 405");
    hc_free(&r);

    /* ---- batch invariance: together = one at a time ---- */
    enum { NB = 4 };
    static const char *const prompts[NB] = {"Tell me a story", "Why", "List three colours of the rainbow please",
                                            "A"};
    par_req alone[NB], together[NB];
    char bodies[NB][512];
    for (int i = 0; i < NB; i++) {
        snprintf(bodies[i], sizeof bodies[i],
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}],\"max_tokens\":%d,\"temperature\":0,"
                 "\"logprobs\":true,\"top_logprobs\":5}",
                 prompts[i], 8 + 3 * i);
        alone[i] = (par_req){bodies[i], NULL};
        together[i] = (par_req){bodies[i], NULL};
        /* a new conversation on a clean slot both times: the first run fills the slots, so both runs reuse */
        par_run(&alone[i]);
    }
    for (int i = 0; i < NB; i++) free(alone[i].answer), alone[i].answer = NULL;
    for (int i = 0; i < NB; i++) par_run(&alone[i]);
    pthread_t th[NB];
    for (int i = 0; i < NB; i++) pthread_create(&th[i], NULL, par_run, &together[i]);
    for (int i = 0; i < NB; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < NB; i++)
        CHECK(alone[i].answer && together[i].answer && !strcmp(alone[i].answer, together[i].answer),
              "request %d: the same text and log-probabilities together as alone", i);
    for (int i = 0; i < NB; i++) free(alone[i].answer), free(together[i].answer);

    /* ---- reuse across turns ---- */
    j = post_json(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"First question\"}],\"max_tokens\":6,\"temperature\":0}",
                  &st);
    const char *a1 = jstr(j, "choices.0.message.content");
    char turn2[2048];
    json_t *msgs = json_pack("[{s:s,s:s},{s:s,s:s},{s:s,s:s}]", "role", "user", "content", "First question", "role",
                             "assistant", "content", a1 ? a1 : "", "role", "user", "content", "And a second one");
    char *mtxt = json_dumps(msgs, JSON_COMPACT);
    snprintf(turn2, sizeof turn2, "{\"messages\":%s,\"max_tokens\":6,\"temperature\":0}", mtxt);
    free(mtxt);
    json_decref(msgs);
    json_int_t p1 = json_integer_value(jget(j, "usage.prompt_tokens"));
    json_decref(j);
    j = post_json(C, turn2, &st);
    json_int_t cached = json_integer_value(jget(j, "usage.prompt_tokens_details.cached_tokens"));
    CHECK(st == 200 && cached >= p1, "turn 2 reuses turn 1's prompt (%lld cached, turn 1 had %lld)", (long long)cached,
          (long long)p1);
    json_decref(j);

    /* ---- a client that leaves mid-stream ---- */
    int fd = hc_send(srv.port, "POST", C, KEY,
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"Go on forever\"}],\"max_tokens\":200,\"stream\":true}",
                     strlen("{\"messages\":[{\"role\":\"user\",\"content\":\"Go on forever\"}],\"max_tokens\":200,"
                            "\"stream\":true}"));
    char buf[512];
    ssize_t got = fd >= 0 ? recv(fd, buf, sizeof buf, 0) : -1;
    CHECK(got > 0, "the stream starts");
    if (fd >= 0) close(fd);
    /* the job may still be queued when the client leaves (it is then dropped at admission): wait until it is
     * counted as cancelled, then every slot must be idle */
    int counted = 0, idle = 0;
    for (int i = 0; i < 1000 && !counted; i++) {
        hc_request(srv.port, "GET", "/metrics", KEY, NULL, &r);
        counted = r.status == 200 && strstr(r.body, "# TYPE braid_requests_cancelled_total counter") &&
                  !strstr(r.body, "braid_requests_cancelled_total 0\n");
        hc_free(&r);
        if (!counted) usleep(10000);
    }
    CHECK(counted, "metrics: Prometheus text, the cancellation counted");
    hc_request(srv.port, "GET", "/slots", KEY, NULL, &r);
    idle = r.body && !strstr(r.body, "\"is_processing\":true");
    hc_free(&r);
    CHECK(idle, "the dropped stream's slot is free again");
    j = post_json(C, chat1, &st);
    CHECK(st == 200 && chat_text && !strcmp(jstr(j, "choices.0.message.content") ?: "", chat_text),
          "after all that the server answers as before");
    json_decref(j);

    CHECK(hs_stop(&srv) == 0, "the server exits 0 on SIGTERM");

    /* ---- a full queue: --queue 0 ---- */
    snprintf(args, sizeof args, "-m '%s' -c 64 -t 1 --parallel 1 --queue 0", model);
    snprintf(logp, sizeof logp, "%s/test_server_q.log", build);
    CHECK(hs_start(&srv, exe, args, logp), "the second server starts");
    hc_request(srv.port, "POST", C, NULL, chat1, &r);
    char ra[64];
    CHECK(r.status == 429 && atoi(hc_header(&r, "Retry-After", ra, sizeof ra)) >= 1, "queue full: 429 with Retry-After");
    hc_free(&r);
    CHECK(hs_stop(&srv) == 0, "the second server exits 0");
    free(chat_text);
    free(comp_text);
    unlink(model);
    TEST_MAIN_END();
}
