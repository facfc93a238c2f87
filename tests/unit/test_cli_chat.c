/* test_cli_chat.c — `braid chat` and the generation options of `braid run`, end to end on a tiny generated
 * qwen35 model, run as separate processes:
 * - chat with standard input from a pipe: one JSON object per line/turn; turn 2 and later reuse the previous
 *   turns (reused > 0, decoded = prompt - reused + replayed); /save then /load in a new process continues the
 *   conversation with its memory (the next turn reuses it);
 * - run --session: the second run with a prompt sharing a prefix reports session_reused_tokens; a corrupt
 *   session file is refused with the reason, the run goes on from scratch and the file is left as it was;
 * - run --ctx-shift generates 4x the context and reports context_shifts; --lookup / --draft-model report
 *   "speculative" and give plain greedy's tokens. */
#include <jansson.h>
#include <string.h>
#include <unistd.h>

#include "braid.h"
#include "genmodel/genmodel.h"
#include "test.h"

static char exe[2100], model[2100], dir[1024];

/* Splits JSON lines into objects; returns the count. */
static int json_lines(char *out, json_t **objs, int cap) {
    int n = 0;
    for (char *line = strtok(out, "\n"); line && n < cap; line = strtok(NULL, "\n")) {
        json_t *j = json_loads(line, 0, NULL);
        if (j) objs[n++] = j;
    }
    return n;
}

static json_int_t geti(json_t *o, const char *k) { return json_integer_value(json_object_get(o, k)); }

static void test_chat(void) {
    char cmd[16384], save[2200];
    snprintf(save, sizeof save, "%s/test_cli_chat_saved.json", dir);
    snprintf(cmd, sizeof cmd,
             "printf 'Hello there\\nTell me more\\nA third one\\n/save %s\\n' | '%s' chat -m '%s' --system 'Be brief.' "
             "-n 12 --temp 0 -t 1 --json 2>/dev/null",
             save, exe, model);
    int st = -1;
    char *out = test_run_cmd(cmd, &st);
    CHECK(st == 0 && out, "braid chat exits with 0 (%d)", st);
    json_t *t[8] = {0};
    int n = out ? json_lines(out, t, 8) : 0;
    CHECK(n == 3, "one JSON object per turn (%d)", n);
    for (int i = 0; i < n; i++) {
        CHECK(geti(t[i], "turn") == i + 1, "turn number %d", i + 1);
        CHECK(json_is_string(json_object_get(t[i], "text")) && json_is_number(json_object_get(t[i], "ttft_ms")),
              "turn %d has text and ttft_ms", i + 1);
        json_int_t p = geti(t[i], "prompt_tokens"), r = geti(t[i], "reused_tokens"), d = geti(t[i], "decoded_tokens"),
                   rp = geti(t[i], "replayed_tokens");
        CHECK(d == p - r + rp, "turn %d: decoded = prompt - reused + replayed (%lld %lld %lld %lld)", i + 1,
              (long long)d, (long long)p, (long long)r, (long long)rp);
        if (i > 0) CHECK(r >= geti(t[i - 1], "prompt_tokens"), "turn %d reuses the previous prompt (%lld of %lld)",
                         i + 1, (long long)r, (long long)p);
        else CHECK(r == 0, "the first turn starts empty");
    }
    json_int_t last_prompt = n == 3 ? geti(t[2], "prompt_tokens") : 0;
    for (int i = 0; i < n; i++) json_decref(t[i]);
    free(out);
    /* a new process loads the chat and its memory: the fourth turn reuses the three before */
    snprintf(cmd, sizeof cmd, "printf '/load %s\\nFourth\\n' | '%s' chat -m '%s' -n 4 --temp 0 -t 1 --json 2>/dev/null",
             save, exe, model);
    out = test_run_cmd(cmd, &st);
    n = out ? json_lines(out, t, 8) : 0;
    CHECK(st == 0 && n == 1 && geti(t[0], "turn") == 4 && geti(t[0], "reused_tokens") >= last_prompt,
          "after /load the next turn reuses the saved memory (%d objects, reused %lld of >= %lld)", n,
          n ? (long long)geti(t[0], "reused_tokens") : -1, (long long)last_prompt);
    for (int i = 0; i < n; i++) json_decref(t[i]);
    free(out);
    char state[2300];
    snprintf(state, sizeof state, "%s.state", save);
    unlink(save);
    unlink(state);
}

static void test_session(void) {
    char cmd[16384], ses[2200], err[2300];
    snprintf(ses, sizeof ses, "%s/test_cli_chat.session", dir);
    snprintf(err, sizeof err, "%s.err", ses);
    unlink(ses);
    const char *p1 = "A long shared prefix for the session test, with several words in it", *p2 = " and then more";
    int st = -1;
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p '%s' -n 6 --temp 0 -t 1 --session '%s' --json 2>/dev/null", exe,
             model, p1, ses);
    char *out = test_run_cmd(cmd, &st);
    json_t *j = out ? json_loads(out, 0, NULL) : NULL;
    CHECK(st == 0 && j && geti(j, "session_reused_tokens") == 0 && access(ses, R_OK) == 0,
          "the first run saves the session");
    json_int_t n1 = j ? (json_int_t)json_array_size(json_object_get(j, "prompt_tokens")) : 0;
    json_decref(j);
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p '%s%s' -n 6 --temp 0 -t 1 --session '%s' --json 2>/dev/null", exe,
             model, p1, p2, ses);
    out = test_run_cmd(cmd, &st);
    j = out ? json_loads(out, 0, NULL) : NULL;
    CHECK(st == 0 && j && geti(j, "session_reused_tokens") >= n1 - 2,
          "the second run reuses the shared prefix (%lld of %lld)", j ? (long long)geti(j, "session_reused_tokens") : -1,
          (long long)n1);
    json_decref(j);
    free(out);
    /* corrupt it: flip a byte in the middle */
    size_t len = 0;
    char *bytes = test_read_file(ses, &len);
    CHECK(bytes && len > 100, "the session file exists (%zu bytes)", len);
    if (bytes && len > 100) {
        bytes[len / 2] ^= 0x5a;
        FILE *f = fopen(ses, "wb");
        fwrite(bytes, 1, len, f);
        fclose(f);
        snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p '%s%s' -n 6 --temp 0 -t 1 --session '%s' --json 2>'%s'", exe,
                 model, p1, p2, ses, err);
        out = test_run_cmd(cmd, &st);
        j = out ? json_loads(out, 0, NULL) : NULL;
        size_t el = 0, l2 = 0;
        char *e = test_read_file(err, &el), *after = test_read_file(ses, &l2);
        CHECK(st == 0 && j && geti(j, "session_reused_tokens") == 0, "a corrupt session: the run goes on from scratch");
        CHECK(e && strstr(e, "refused") && strstr(e, "BRAID_E_FORMAT"), "the reason is given: %s", e ? e : "");
        CHECK(after && l2 == len && !memcmp(after, bytes, len), "the corrupt file is left as it was");
        free(e);
        free(after);
        json_decref(j);
        free(out);
    }
    free(bytes);
    unlink(ses);
    unlink(err);
}

static void test_run_options(void) {
    char cmd[16384];
    int st = -1;
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p 'Shift' -c 32 --ctx-shift --keep 2 -n 128 --temp 0.9 --seed 3 "
                              "-t 1 --json 2>/dev/null", exe, model);
    char *out = test_run_cmd(cmd, &st);
    json_t *j = out ? json_loads(out, 0, NULL) : NULL;
    int eog = j && !strcmp(json_string_value(json_object_get(j, "stop")), "eog");
    CHECK(st == 0 && j && (eog || (json_array_size(json_object_get(j, "tokens")) == 128 &&
                                   geti(j, "context_shifts") >= 4)),
          "run --ctx-shift generates 4x the context (%lld shifts)", j ? (long long)geti(j, "context_shifts") : -1);
    json_decref(j);
    free(out);
    const char *base = "one two three four one two three four one two";
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p '%s' -n 24 --temp 0 -t 1 --json 2>/dev/null", exe, model, base);
    char *plain = test_run_cmd(cmd, &st);
    json_t *pj = plain ? json_loads(plain, 0, NULL) : NULL;
    const char *spec[] = {"--lookup 2 --draft-n 4", "--draft-model MODEL --draft-n 3"};
    for (int k = 0; k < 2; k++) {
        char opt[4200];
        snprintf(opt, sizeof opt, "%s", spec[k]);
        char *m = strstr(opt, "MODEL");
        if (m) snprintf(m, sizeof opt - (size_t)(m - opt), "'%s' --draft-n 3", model);
        snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p '%s' -n 24 --temp 0 -t 1 %s --json 2>/dev/null", exe, model, base,
                 opt);
        out = test_run_cmd(cmd, &st);
        j = out ? json_loads(out, 0, NULL) : NULL;
        json_t *sp = j ? json_object_get(j, "speculative") : NULL;
        CHECK(st == 0 && j && pj && json_equal(json_object_get(j, "tokens"), json_object_get(pj, "tokens")),
              "run %s gives plain greedy's tokens", spec[k]);
        CHECK(json_is_integer(json_object_get(sp, "drafted")) && json_is_integer(json_object_get(sp, "accepted")),
              "run %s reports speculative.drafted / accepted", spec[k]);
        if (k == 1) CHECK(geti(sp, "accepted") > 0 && geti(sp, "accepted") == geti(sp, "drafted"),
                          "the model as its own draft: every draft accepted (%lld of %lld)",
                          (long long)geti(sp, "accepted"), (long long)geti(sp, "drafted"));
        json_decref(j);
        free(out);
    }
    json_decref(pj);
    free(plain);
    const char *bad[] = {"run -p hi --lookup 0", "run -p hi --self-extend 4 10", "run -p hi --draft-model x --lookup 2",
                         "chat --bogus"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(cmd, sizeof cmd, "'%s' %s </dev/null 2>/dev/null", exe, bad[i]);
        free(test_run_cmd(cmd, &st));
        CHECK(st == 2, "'braid %s' is a usage error (%d)", bad[i], st);
    }
}

/* The prompt is the model's chat template rendered (or --chat-template-file's): prompt_tokens of a one-line
 * chat equals the token count of that rendering, tokenized in-process; a missing template file is a failure
 * and a template that does not parse is reported, not replaced. */
static int count_tokens(braid_model *m, const char *text) {
    braid_token toks[512];
    size_t n = 0;
    return braid_tokenize(m, text, strlen(text), 0, 1, toks, 512, &n) == BRAID_OK ? (int)n : -1;
}

static void test_chat_template(void) {
    braid_model_params mp = braid_model_default_params();
    mp.vocab_only = 1;
    braid_model *m = NULL;
    CHECK_STATUS(braid_model_load(model, &mp, &m), BRAID_OK);
    if (!m) return;
    char tf[2200], cmd[8192];
    snprintf(tf, sizeof tf, "%s/test_cli_chat_template.jinja", dir);
    FILE *f = fopen(tf, "w");
    CHECK(f != NULL, "write a template file");
    if (!f) return;
    fputs("{% for m in messages %}<<{{ m.role }}>>{{ m.content }}\n{% endfor %}"
          "{% if add_generation_prompt %}<<assistant>>{% endif %}", f);
    fclose(f);
    int st;
    snprintf(cmd, sizeof cmd, "printf 'Hello there\\n' | '%s' chat -m '%s' -n 2 --temp 0 -t 1 --json "
                              "--chat-template-file '%s' 2>/dev/null", exe, model, tf);
    char *out = test_run_cmd(cmd, &st);
    json_t *t[4];
    int n = out ? json_lines(out, t, 4) : 0;
    int want = count_tokens(m, "<<user>>Hello there\n<<assistant>>");
    CHECK(st == 0 && n == 1 && geti(t[0], "prompt_tokens") == want,
          "--chat-template-file renders the prompt (%lld tokens, want %d)", n ? geti(t[0], "prompt_tokens") : -1LL,
          want);
    for (int i = 0; i < n; i++) json_decref(t[i]);
    free(out);

    /* Without the option: the model's own template, as braid_chat_template_apply renders it. */
    char *text = NULL;
    size_t len = 0;
    braid_chat_params cp = braid_chat_default_params();
    braid_status s = braid_chat_template_apply(m, NULL, "[{\"role\":\"user\",\"content\":\"Hello there\"}]", &cp,
                                               &text, &len);
    CHECK(s == BRAID_OK, "the test model carries a chat template (%s)", braid_last_error());
    snprintf(cmd, sizeof cmd, "printf 'Hello there\\n' | '%s' chat -m '%s' -n 2 --temp 0 -t 1 --json 2>/dev/null", exe,
             model);
    out = test_run_cmd(cmd, &st);
    n = out ? json_lines(out, t, 4) : 0;
    want = text ? count_tokens(m, text) : -1;
    CHECK(st == 0 && n == 1 && geti(t[0], "prompt_tokens") == want,
          "the model's template renders the prompt (%lld tokens, want %d)", n ? geti(t[0], "prompt_tokens") : -1LL,
          want);
    for (int i = 0; i < n; i++) json_decref(t[i]);
    free(out);
    braid_free(text);

    snprintf(cmd, sizeof cmd, "printf 'Hi\\n' | '%s' chat -m '%s' -n 2 -t 1 --chat-template-file '%s.missing' "
                              "2>/dev/null", exe, model, tf);
    free(test_run_cmd(cmd, &st));
    CHECK(st == 1, "a missing template file is a failure (%d)", st);
    f = fopen(tf, "w");
    if (f) {
        fputs("{% for m in messages %}unclosed", f);
        fclose(f);
    }
    snprintf(cmd, sizeof cmd, "printf 'Hi\\n' | '%s' chat -m '%s' -n 2 -t 1 --chat-template-file '%s' 2>&1 "
                              ">/dev/null", exe, model, tf);
    out = test_run_cmd(cmd, &st);
    CHECK(out && strstr(out, "chat template failed"), "a broken template is reported: %s", out ? out : "");
    free(out);
    unlink(tf);
    braid_model_free(m);
}

int main(void) {
    snprintf(dir, sizeof dir, "%s", test_env("BRAID_BUILD_DIR", "."));
    snprintf(exe, sizeof exe, "%s/braid", dir);
    snprintf(model, sizeof model, "%s/test_cli_chat_tiny.gguf", dir);
    gen_params gp;
    gen_params_default(&gp);
    gp.seed = 9;
    gen_summary sum;
    CHECK_STATUS(gen_model_write(&gp, model, &sum), BRAID_OK);
    test_chat();
    test_chat_template();
    test_session();
    test_run_options();
    unlink(model);
    TEST_MAIN_END();
}
