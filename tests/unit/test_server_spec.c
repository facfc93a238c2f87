/* test_server_spec.c — speculative decoding in `braid serve`, together with the prompt cache and parallel
 * slots, end to end on loopback, on the built-in trained model (models/kjv-qwen35-q8_0.gguf: Q8_0, so a
 * row's logits do not depend on the batch) with its draft model as --draft-model, --parallel 3 and
 * --cache-ram 64:
 * - four repetitive prompts, each asked greedily with "speculative" off, lookup, draft, mtp (the model's own
 *   MTP head, in the same continuous batching) and the server's default, one request at a time: every mode answers the same text as off (the same tokens: greedy
 *   verification keeps exactly what plain greedy picks); speculative answers report timings.draft_n > 0
 *   and 0 <= draft_n_accepted <= draft_n, plain ones report neither; some drafts are accepted;
 * - the same twenty requests again, all at once from twenty threads (three slots decode together, the
 *   rest queue; prompts now come from the cache, whole or in part): the same texts;
 * - /metrics counts the speculative requests and the drafted and accepted tokens;
 * - bad "speculative" values are refused with 400 and the parameter's name; the server keeps serving and
 *   exits 0 on SIGTERM. */
#include <jansson.h>
#include <pthread.h>
#include <string.h>

#include "braid.h"
#include <unistd.h>
#include "server_harness.h"
#include "test.h"

enum { NPROMPT = 4, NMODE = 5, NREQ = NPROMPT * NMODE };
static hs_server srv;

static const char *const PROMPTS[NPROMPT] = {
    "And God said, Let there be light: and there was light. And God saw the light, that it was good. And God said,",
    "In the beginning was the Word, and the Word was with God, and the Word was God. The same was in the beginning",
    "The LORD is my shepherd; I shall not want. He maketh me to lie down in green pastures: he leadeth me",
    "And the evening and the morning were the first day. And the evening and the morning were the second day. And",
};
static const char *const MODES[NMODE] = {
    "{\"mode\":\"off\"}",
    "{\"mode\":\"lookup\",\"n\":4,\"ngram\":3}",
    "{\"mode\":\"draft\",\"n\":5}",
    "{\"mode\":\"mtp\"}", /* the model's own MTP head, one draft per step */
    NULL, /* the server's default: the draft model, --draft-n */
};

typedef struct {
    int k, mode;
    int status;
    char *text;
    json_int_t draft_n, draft_acc; /* -1: absent */
} result;

static void body_for(int k, int mode, char *out, size_t cap) {
    snprintf(out, cap, "{\"prompt\":\"%s\",\"max_tokens\":24,\"temperature\":0%s%s}", PROMPTS[k],
             MODES[mode] ? ",\"speculative\":" : "", MODES[mode] ? MODES[mode] : "");
}

static void ask(result *r) {
    char body[1024];
    body_for(r->k, r->mode, body, sizeof body);
    hc_resp h;
    r->status = 0;
    r->text = NULL;
    r->draft_n = r->draft_acc = -1;
    if (!hc_request(srv.port, "POST", "/v1/completions", "", body, &h)) return;
    r->status = h.status;
    json_t *j = json_loads(h.body ? h.body : "", 0, NULL);
    hc_free(&h);
    json_t *t = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "text");
    if (json_is_string(t)) r->text = strdup(json_string_value(t));
    json_t *tm = json_object_get(j, "timings");
    if (json_object_get(tm, "draft_n")) r->draft_n = json_integer_value(json_object_get(tm, "draft_n"));
    if (json_object_get(tm, "draft_n_accepted")) r->draft_acc = json_integer_value(json_object_get(tm, "draft_n_accepted"));
    json_decref(j);
}

static void *ask_thread(void *arg) {
    ask(arg);
    return NULL;
}

static void expect_400(const char *spec, const char *param) {
    char body[512];
    snprintf(body, sizeof body, "{\"prompt\":\"hi\",\"max_tokens\":2,\"speculative\":%s}", spec);
    hc_resp h;
    int ok = hc_request(srv.port, "POST", "/v1/completions", "", body, &h);
    json_t *j = ok ? json_loads(h.body ? h.body : "", 0, NULL) : NULL;
    const char *p = json_string_value(json_object_get(json_object_get(j, "error"), "param"));
    CHECK(ok && h.status == 400 && p && !strcmp(p, param), "speculative %s: 400 on %s (got %d, %s)", spec, param,
          ok ? h.status : -1, p ? p : "-");
    json_decref(j);
    if (ok) hc_free(&h);
}

static double metric(const char *text, const char *name) {
    const char *p = text;
    size_t n = strlen(name);
    while ((p = strstr(p, name))) {
        if ((p == text || p[-1] == '\n') && p[n] == ' ') return atof(p + n + 1);
        p += n;
    }
    return -1;
}

int main(void) {
    const char *build = test_env("BRAID_BUILD_DIR", "."), *src = test_env("BRAID_SOURCE_DIR", ".");
    char model[1100], draft[1100], exe[1100], logp[1100], args[4000];
    snprintf(model, sizeof model, "%s/models/kjv-qwen35-q8_0.gguf", src);
    snprintf(draft, sizeof draft, "%s/models/kjv-qwen35-draft-q8_0.gguf", src);
    snprintf(exe, sizeof exe, "%s/braid", build);
    snprintf(logp, sizeof logp, "%s/test_server_spec.log", build);
    if (access(model, R_OK) || access(draft, R_OK)) TEST_SKIP("the built-in model and its draft are not in %s/models", src);
    snprintf(args, sizeof args,
             "-m '%s' -c 256 -t 1 --parallel 3 --cache-ram 64 --cache-entries 6 --checkpoint-interval 32 "
             "--draft-model '%s' --draft-n 6",
             model, draft);
    CHECK(hs_start(&srv, exe, args, logp), "the server starts");
    if (!srv.port) TEST_MAIN_END();

    /* ---- one at a time ---- */
    result one[NREQ];
    for (int i = 0; i < NREQ; i++) {
        one[i] = (result){.k = i / NMODE, .mode = i % NMODE};
        ask(&one[i]);
        CHECK(one[i].status == 200 && one[i].text, "prompt %d, mode %d: 200 (%d)", one[i].k, one[i].mode, one[i].status);
    }
    json_int_t drafted = 0, accepted = 0;
    for (int i = 0; i < NREQ; i++) {
        const result *off = &one[i - i % NMODE], *r = &one[i];
        if (!r->text || !off->text) continue;
        CHECK(!strcmp(r->text, off->text), "prompt %d, mode %d: the text of plain greedy ('%s' vs '%s')", r->k, r->mode,
              r->text, off->text);
        if (r->mode == 0) {
            CHECK(r->draft_n < 0 && r->draft_acc < 0, "prompt %d off: no draft counts in timings", r->k);
        } else {
            CHECK(r->draft_n > 0 && r->draft_acc >= 0 && r->draft_acc <= r->draft_n,
                  "prompt %d, mode %d: timings draft_n %lld, draft_n_accepted %lld", r->k, r->mode,
                  (long long)r->draft_n, (long long)r->draft_acc);
            if (r->mode == 3)
                CHECK(r->draft_acc > 0, "prompt %d: the MTP head's drafts accepted (%lld of %lld)", r->k,
                      (long long)r->draft_acc, (long long)r->draft_n);
            drafted += r->draft_n > 0 ? r->draft_n : 0;
            accepted += r->draft_acc > 0 ? r->draft_acc : 0;
        }
        if (r->mode == 3)
            printf("prompt %d: draft model drafted %lld accepted %lld; lookup drafted %lld accepted %lld; mtp "
                   "drafted %lld accepted %lld\n",
                   r->k, (long long)one[i - 1].draft_n, (long long)one[i - 1].draft_acc,
                   (long long)one[i - 2].draft_n, (long long)one[i - 2].draft_acc, (long long)r->draft_n,
                   (long long)r->draft_acc);
    }
    CHECK(accepted > 0, "some drafts were accepted (%lld of %lld)", (long long)accepted, (long long)drafted);

    /* ---- all at once ---- */
    result many[NREQ];
    pthread_t th[NREQ];
    for (int i = 0; i < NREQ; i++) {
        many[i] = (result){.k = i / NMODE, .mode = i % NMODE};
        CHECK(pthread_create(&th[i], NULL, ask_thread, &many[i]) == 0, "thread %d", i);
    }
    for (int i = 0; i < NREQ; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < NREQ; i++) {
        const result *r = &many[i];
        CHECK(r->status == 200 && r->text && one[i].text && !strcmp(r->text, one[i].text),
              "concurrent: prompt %d, mode %d: the same text as alone (%d, '%s')", r->k, r->mode, r->status,
              r->text ? r->text : "-");
        if (r->mode) CHECK(r->draft_n > 0, "concurrent: prompt %d, mode %d drafted (%lld)", r->k, r->mode, (long long)r->draft_n);
    }

    /* ---- metrics ---- */
    hc_resp h;
    if (hc_request(srv.port, "GET", "/metrics", "", NULL, &h)) {
        double d = metric(h.body, "braid_spec_draft_tokens_total"), a = metric(h.body, "braid_spec_accepted_tokens_total"),
               n = metric(h.body, "braid_spec_requests_total");
        CHECK(d >= (double)drafted && a >= (double)accepted && a <= d && n == 2 * (NMODE - 1) * NPROMPT,
              "/metrics: drafted %g, accepted %g, speculative requests %g", d, a, n);
        hc_free(&h);
    } else {
        CHECK(0, "GET /metrics");
    }

    /* ---- refusals ---- */
    expect_400("3", "speculative");
    expect_400("{\"mode\":\"fast\"}", "speculative.mode");
    expect_400("{\"mode\":1}", "speculative.mode");
    expect_400("{\"n\":0}", "speculative.n");
    expect_400("{\"n\":65}", "speculative.n");
    expect_400("{\"n_max\":\"4\"}", "speculative.n_max");
    expect_400("{\"n\":2,\"n_max\":2}", "speculative.n");
    expect_400("{\"n\":40}", "speculative.n"); /* more than --draft-n's rollback room */
    expect_400("{\"mode\":\"off\",\"n\":2}", "speculative");
    expect_400("{\"mode\":\"draft\",\"ngram\":2}", "speculative.ngram");
    expect_400("{\"ngram\":0}", "speculative.ngram");
    result again = {.k = 2, .mode = 1};
    ask(&again);
    CHECK(again.status == 200 && again.text && one[2 * NMODE + 1].text && !strcmp(again.text, one[2 * NMODE + 1].text),
          "the server keeps serving after the refusals");
    free(again.text);
    CHECK(hs_stop(&srv) == 0, "the server exits 0 on SIGTERM");
    for (int i = 0; i < NREQ; i++) free(one[i].text), free(many[i].text);
    TEST_MAIN_END();
}
