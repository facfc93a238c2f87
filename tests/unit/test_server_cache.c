/* test_server_cache.c — `braid serve` with the prompt cache (--cache-ram) and slot files (--slot-save-path),
 * end to end on loopback, on a tiny generated qwen35 (the real qwen vocabulary and ChatML template):
 * - an identical chat request is served whole from the cache (cached_tokens = prompt_tokens, nothing
 *   replayed) and answers the same text; another conversation with the same system prompt reuses it, on
 *   whichever slot it lands;
 * - GET /cache lists entries and the block hashes of cached prefixes, one of which is braid_cache_block_hash
 *   of the first 64 tokens of the rendered prompt; /metrics has the cache's counters;
 * - POST /slots/{id}?action=save|restore|erase: a slot saved, the server restarted (cache empty), the slot
 *   restored: the next turn of that conversation reuses the whole saved prefix with no replay and gives the
 *   same answer as the first server; names that would leave --slot-save-path, bad ids, bad actions, a
 *   corrupt and a missing file get the right 4xx, and the server keeps serving;
 * - the server exits 0 on SIGTERM. */
#include <jansson.h>
#include <string.h>
#include <sys/stat.h>

#include "braid.h"
#include "genmodel/genmodel.h"
#include "server_harness.h"
#include "test.h"

static hs_server srv;

static json_t *req_json(const char *method, const char *path, const char *body, int *status) {
    hc_resp r;
    *status = 0;
    if (!hc_request(srv.port, method, path, "", body, &r)) return NULL;
    *status = r.status;
    json_t *j = json_loads(r.body, 0, NULL);
    hc_free(&r);
    return j;
}

static json_int_t jint(json_t *o, const char *a, const char *b, const char *c) {
    json_t *x = json_object_get(o, a);
    if (b) x = json_object_get(x, b);
    if (c) x = json_object_get(x, c);
    return json_integer_value(x);
}

static const char *SYS =
    "You are a careful assistant for a small library. You answer questions about opening hours, loans, "
    "renewals, fines, the reading room, the printers and the wireless network. Keep answers short, polite and "
    "exact; when you do not know, say so and suggest asking at the front desk on the ground floor.";

static char *chat_body(const char *user, const char *assistant, const char *user2) {
    json_t *msgs = json_array();
    json_t *m = json_pack("{s:s,s:s}", "role", "system", "content", SYS);
    json_array_append_new(msgs, m);
    json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "user", "content", user));
    if (assistant) {
        json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "assistant", "content", assistant));
        json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "user", "content", user2));
    }
    json_t *root = json_pack("{s:o,s:i,s:f}", "messages", msgs, "max_tokens", 8, "temperature", 0.0);
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}

/* One chat request: its content (malloc'd) and usage / timings. */
static char *chat(const char *body, json_int_t *prompt, json_int_t *cached, json_int_t *replayed, int *status) {
    json_t *j = req_json("POST", "/v1/chat/completions", body, status);
    json_t *choice = json_array_get(json_object_get(j, "choices"), 0);
    const char *txt = json_string_value(json_object_get(json_object_get(choice, "message"), "content"));
    char *out = txt ? strdup(txt) : NULL;
    *prompt = jint(j, "usage", "prompt_tokens", NULL);
    *cached = jint(j, "usage", "prompt_tokens_details", "cached_tokens");
    *replayed = jint(j, "timings", "replayed_n", NULL);
    json_decref(j);
    return out;
}

static void expect_status(const char *method, const char *path, const char *body, int want, const char *what) {
    int st = 0;
    json_t *j = req_json(method, path, body, &st);
    CHECK(st == want, "%s: status %d (want %d)", what, st, want);
    CHECK(json_is_string(json_object_get(json_object_get(j, "error"), "message")), "%s: OpenAI error shape", what);
    json_decref(j);
}

int main(void) {
    const char *build = test_env("BRAID_BUILD_DIR", ".");
    char model[1100], exe[1100], logp[1100], dir[1100], args[4000], path[1300];
    snprintf(model, sizeof model, "%s/test_server_cache.gguf", build);
    snprintf(exe, sizeof exe, "%s/braid", build);
    snprintf(logp, sizeof logp, "%s/test_server_cache.log", build);
    snprintf(dir, sizeof dir, "%s/test_server_cache_slots", build);
    mkdir(dir, 0755);
    gen_params gp;
    gen_params_default(&gp);
    gp.type = BRAID_TYPE_Q8_0;
    gen_summary sum;
    braid_status gs = gen_model_write(&gp, model, &sum);
    if (gs != BRAID_OK) TEST_SKIP("no vocabulary to build the model from (%s)", braid_last_error());
    snprintf(args, sizeof args,
             "-m '%s' -c 512 -t 1 --parallel 2 --cache-ram 64 --cache-entries 6 --checkpoint-interval 32 "
             "--slot-save-path '%s'",
             model, dir);
    CHECK(hs_start(&srv, exe, args, logp), "the server starts");
    if (!srv.port) TEST_MAIN_END();

    /* ---- an identical request is served from the cache ---- */
    int st = 0;
    json_int_t p1, c1, r1, p2, c2, r2;
    char *b1 = chat_body("When does the library open on Saturdays?", NULL, NULL);
    char *a1 = chat(b1, &p1, &c1, &r1, &st);
    CHECK(st == 200 && a1 && p1 > 64, "first request: %d, %lld prompt tokens", st, (long long)p1);
    char *a2 = chat(b1, &p2, &c2, &r2, &st);
    CHECK(st == 200 && a2 && a1 && !strcmp(a1, a2), "identical request: same answer (%s / %s)", a1 ? a1 : "-",
          a2 ? a2 : "-");
    CHECK(c2 == p2 && r2 == 0, "identical request: %lld of %lld cached, %lld replayed", (long long)c2, (long long)p2,
          (long long)r2);
    /* other conversations with the same system prompt, more than the slots: each reuses the system prompt */
    const char *qs[3] = {"Can I renew a loan online?", "How much is the fine for a late book?",
                         "Is there a printer in the reading room?"};
    for (int i = 0; i < 3; i++) {
        char *b = chat_body(qs[i], NULL, NULL);
        json_int_t p, c, r;
        char *a = chat(b, &p, &c, &r, &st);
        CHECK(st == 200 && c >= 40 && c < p, "conversation %d reuses the system prompt (%lld of %lld cached)", i,
              (long long)c, (long long)p);
        free(a);
        free(b);
    }

    /* ---- GET /cache and /metrics ---- */
    json_t *cj = req_json("GET", "/cache", NULL, &st);
    json_t *hashes = json_object_get(json_object_get(cj, "block_hashes"), "hashes");
    CHECK(st == 200 && jint(cj, "entries", NULL, NULL) >= 2 && json_array_size(hashes) >= 1,
          "/cache: %d, %lld entries, %zu hashes", st, (long long)jint(cj, "entries", NULL, NULL),
          json_array_size(hashes));
    CHECK(jint(cj, "bytes", NULL, NULL) > 0 && jint(cj, "bytes", NULL, NULL) <= 64ll << 20, "/cache: bytes %lld",
          (long long)jint(cj, "bytes", NULL, NULL));
    /* the first block of the rendered prompt, hashed here, is one of them */
    {
        json_t *tj = req_json("POST", "/apply-template", b1, &st);
        const char *prompt = json_string_value(json_object_get(tj, "prompt"));
        json_t *tk = prompt ? json_pack("{s:s}", "content", prompt) : NULL;
        char *tb = tk ? json_dumps(tk, JSON_COMPACT) : NULL;
        json_t *toks = tb ? req_json("POST", "/tokenize", tb, &st) : NULL;
        json_t *arr = json_object_get(toks, "tokens");
        braid_token first[BRAID_CACHE_BLOCK];
        int have = json_array_size(arr) >= BRAID_CACHE_BLOCK;
        for (int i = 0; have && i < BRAID_CACHE_BLOCK; i++) first[i] = (braid_token)json_integer_value(json_array_get(arr, (size_t)i));
        char want[24] = "";
        if (have) snprintf(want, sizeof want, "%016llx", (unsigned long long)braid_cache_block_hash(0, first, BRAID_CACHE_BLOCK));
        int found = 0;
        for (size_t i = 0; i < json_array_size(hashes); i++)
            found |= !strcmp(json_string_value(json_array_get(hashes, i)), want);
        CHECK(have && found, "/cache lists the first block's hash %s", want);
        json_decref(toks);
        free(tb);
        json_decref(tk);
        json_decref(tj);
    }
    json_decref(cj);
    hc_resp mr;
    CHECK(hc_request(srv.port, "GET", "/metrics", "", NULL, &mr) && mr.status == 200, "/metrics");
    const char *hits = mr.body ? strstr(mr.body, "\nbraid_prompt_cache_hits_total ") : NULL;
    CHECK(hits && atof(hits + strlen("\nbraid_prompt_cache_hits_total ")) >= 4, "/metrics: cache hits");
    CHECK(mr.body && strstr(mr.body, "braid_prompt_cache_bytes") && strstr(mr.body, "braid_prompt_cache_evictions_total"),
          "/metrics: cache bytes and evictions");
    hc_free(&mr);

    /* ---- slot files ---- */
    expect_status("POST", "/slots/0?action=save", "{\"filename\":\"../escape.bin\"}", 400, "a name with ..");
    expect_status("POST", "/slots/0?action=save", "{\"filename\":\"a/b.bin\"}", 400, "a name with /");
    expect_status("POST", "/slots/0?action=save", "{\"filename\":\".hidden\"}", 400, "a name starting with .");
    expect_status("POST", "/slots/0?action=save", "{\"filename\":\"\"}", 400, "an empty name");
    expect_status("POST", "/slots/0?action=save", "{\"filename\":\"%2e%2e\"}", 400, "an escaped name");
    expect_status("POST", "/slots/0?action=save", "{\"name\":\"x\"}", 400, "no filename");
    expect_status("POST", "/slots/0?action=save", "not json", 400, "malformed body");
    expect_status("POST", "/slots/0?action=burn", "{\"filename\":\"x\"}", 400, "an unknown action");
    expect_status("POST", "/slots/0", "{\"filename\":\"x\"}", 400, "no action");
    expect_status("POST", "/slots/x?action=erase", NULL, 400, "a slot id that is no number");
    expect_status("POST", "/slots/7?action=erase", NULL, 404, "a slot that does not exist");
    expect_status("GET", "/slots/0?action=erase", NULL, 405, "GET on a slot action");
    expect_status("POST", "/slots/0?action=restore", "{\"filename\":\"missing.bin\"}", 404, "a missing file");
    snprintf(path, sizeof path, "%s/garbage.bin", dir);
    FILE *f = fopen(path, "wb");
    if (f) fputs("BRAID? certainly not a state file, just some bytes to be refused", f), fclose(f);
    expect_status("POST", "/slots/0?action=restore", "{\"filename\":\"garbage.bin\"}", 400, "a corrupt file");
    struct stat sb;
    snprintf(path, sizeof path, "%s/../escape.bin", dir);
    CHECK(stat(path, &sb) != 0, "nothing was written outside --slot-save-path");

    /* empty both slots (erase), then b1 again: exactly one slot holds it afterwards; save that one */
    for (int i = 0; i < 2; i++) {
        char eu[64];
        snprintf(eu, sizeof eu, "/slots/%d?action=erase", i);
        json_t *ej = req_json("POST", eu, NULL, &st);
        CHECK(st == 200 && json_is_integer(json_object_get(ej, "n_erased")), "erase slot %d: %d", i, st);
        json_decref(ej);
    }
    free(chat(b1, &p2, &c2, &r2, &st));
    CHECK(st == 200 && c2 == p2, "b1 after the erase still comes from the cache (%lld of %lld)", (long long)c2,
          (long long)p2);
    int slot = -1;
    {
        json_t *sl = req_json("GET", "/slots", NULL, &st);
        for (size_t i = 0; i < json_array_size(sl); i++)
            if (jint(json_array_get(sl, i), "n_tokens_held", NULL, NULL) > 0) slot = (int)i;
        json_decref(sl);
    }
    CHECK(slot >= 0, "a slot holds b1's conversation");
    if (slot < 0) slot = 0;
    char url[64], body[128];
    snprintf(url, sizeof url, "/slots/%d?action=save", slot);
    json_t *sj = req_json("POST", url, "{\"filename\":\"conv.bin\"}", &st);
    json_int_t n_saved = jint(sj, "n_saved", NULL, NULL);
    CHECK(st == 200 && n_saved >= p1 && jint(sj, "n_written", NULL, NULL) > 0, "save slot %d: %d, %lld tokens", slot,
          st, (long long)n_saved);
    json_decref(sj);
    CHECK(hs_stop(&srv) == 0, "the server exits 0 on SIGTERM");

    /* ---- a fresh server: restore, then the next turn reuses the saved prefix at once ---- */
    CHECK(hs_start(&srv, exe, args, logp), "the second server starts");
    if (!srv.port) TEST_MAIN_END();
    snprintf(url, sizeof url, "/slots/%d?action=restore", slot);
    snprintf(body, sizeof body, "{\"filename\":\"conv.bin\"}");
    sj = req_json("POST", url, body, &st);
    CHECK(st == 200 && jint(sj, "n_restored", NULL, NULL) == n_saved, "restore: %d, %lld tokens", st,
          (long long)jint(sj, "n_restored", NULL, NULL));
    json_decref(sj);
    char *b3 = chat_body("When does the library open on Saturdays?", "It opens at nine.", "And on Sundays?");
    json_int_t p3, c3, r3;
    char *a3 = chat(b3, &p3, &c3, &r3, &st);
    CHECK(st == 200 && a3, "follow-up after restore: %d", st);
    /* the saved prefix up to where the rendered history leaves it: the whole prompt of the first turn */
    printf("follow-up after restore: %lld of %lld prompt tokens cached, %lld replayed (first prompt %lld)\n",
           (long long)c3, (long long)p3, (long long)r3, (long long)p1);
    CHECK(c3 >= p1 && r3 <= 32, "follow-up after restore: %lld cached (first prompt %lld), %lld replayed",
          (long long)c3, (long long)p1, (long long)r3);
    CHECK(hs_stop(&srv) == 0, "the second server exits 0");
    /* the same follow-up on a server that never saw the conversation: the same answer */
    CHECK(hs_start(&srv, exe, args, logp), "the third server starts");
    json_int_t p4, c4, r4;
    char *a4 = srv.port ? chat(b3, &p4, &c4, &r4, &st) : NULL;
    CHECK(a3 && a4 && !strcmp(a3, a4), "a restored slot answers as a fresh server (%s / %s)", a3 ? a3 : "-",
          a4 ? a4 : "-");
    CHECK(hs_stop(&srv) == 0, "the third server exits 0");
    free(a1), free(a2), free(a3), free(a4), free(b1), free(b3);
    snprintf(path, sizeof path, "%s/conv.bin", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/garbage.bin", dir);
    unlink(path);
    rmdir(dir);
    unlink(model);
    TEST_MAIN_END();
}
