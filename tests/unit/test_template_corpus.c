/* test_template_corpus.c — the chat-template acceptance test: every real template in the oracle source tree's
 * models/templates/ (llama.cpp's collection: Qwen3.5, Nemotron-3 Nano, LFM2, Granite 4, Llama 3, ...) times
 * every conversation in tests/template/conversations/ (system prompts, multi-turn, tool definitions, tool
 * calls with object and string arguments, tool results, reasoning content, content parts, thinking on/off,
 * no generation prompt), rendered by braid and by Python Jinja2 (Debian's python3-jinja2, configured as
 * Hugging Face does, tests/template/hf_render.py). Byte-identical output is required. When Jinja2 refuses a
 * template or raises for a conversation, braid must refuse it too; those cases are listed, never skipped.
 *
 * BRAID_TEMPLATE_FILTER=substring limits the run to matching template names (for debugging). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "braid.h"
#include "test.h"

#define NOW 1767225600 /* 2026-01-01 00:00:00 UTC: strftime_now's time in both engines */

static char *dump(json_t *v) { return v ? json_dumps(v, JSON_PRESERVE_ORDER | JSON_ENCODE_ANY) : NULL; }

/* Prints where two renderings first differ. */
static void show_diff(const char *want, size_t wn, const char *got, size_t gn) {
    size_t i = 0;
    while (i < wn && i < gn && want[i] == got[i]) i++;
    size_t from = i > 60 ? i - 60 : 0;
    fprintf(stderr, "    first difference at byte %zu (want %zu bytes, got %zu)\n    want: ...", i, wn, gn);
    fwrite(want + from, 1, (wn - from) < 140 ? wn - from : 140, stderr);
    fprintf(stderr, "\n    got:  ...");
    fwrite(got + from, 1, (gn - from) < 140 ? gn - from : 140, stderr);
    fprintf(stderr, "\n");
}

int main(void) {
    const char *src = test_env("BRAID_SOURCE_DIR", ".");
    const char *oracle = test_env("BRAID_ORACLE_DIR", "");
    const char *filter = getenv("BRAID_TEMPLATE_FILTER");
    char tdir[2048], cdir[2048], out[4096], cmd[16384];
    snprintf(tdir, sizeof tdir, "%s/src/models/templates", oracle);
    snprintf(cdir, sizeof cdir, "%s/tests/template/conversations", src);
    snprintf(out, sizeof out, "%s/template_corpus_reference.txt", test_env("BRAID_BUILD_DIR", "."));
    snprintf(cmd, sizeof cmd, "BRAID_TEMPLATE_NOW=%d /usr/bin/python3 '%s/tests/template/hf_render.py' '%s' '%s' '%s'",
             NOW, src, tdir, cdir, out);
    int rc = system(cmd);
    CHECK(rc == 0, "the reference renderer failed (%s): is python3-jinja2 installed (scripts/setup.sh) and the "
          "oracle source tree in %s?", cmd, tdir);
    size_t ref_len;
    char *ref = rc == 0 ? test_read_file(out, &ref_len) : NULL;
    CHECK(ref != NULL, "cannot read %s", out);
    if (!ref) TEST_MAIN_END();

    int total = 0, same = 0, both_refuse = 0, mismatched = 0, templates = 0;
    char last_template[512] = "";
    char *p = ref, *end = ref + ref_len;
    while (p < end) {
        char tname[512], cname[512], kind[8];
        size_t n;
        int used = 0;
        if (sscanf(p, "CASE %511s %511s %7s %zu\n%n", tname, cname, kind, &n, &used) != 4 || used == 0 ||
            (size_t)(end - p) < (size_t)used + n + 1) {
            CHECK(0, "malformed reference file at offset %zu", (size_t)(p - ref));
            break;
        }
        const char *want = p + used;
        p += used + n + 1;
        if (filter && !strstr(tname, filter)) continue;
        if (strcmp(tname, last_template) != 0) {
            templates++;
            snprintf(last_template, sizeof last_template, "%s", tname);
        }
        total++;

        char path[8192];
        size_t tl, cl;
        snprintf(path, sizeof path, "%s/%s", tdir, tname);
        char *tmpl = test_read_file(path, &tl);
        snprintf(path, sizeof path, "%s/%s.json", cdir, cname);
        char *conv_text = test_read_file(path, &cl);
        json_error_t jerr;
        json_t *conv = conv_text ? json_loads(conv_text, 0, &jerr) : NULL;
        CHECK(tmpl && conv, "cannot read %s or %s", tname, cname);
        if (!tmpl || !conv) { free(tmpl); free(conv_text); json_decref(conv); continue; }
        char *messages = dump(json_object_get(conv, "messages"));
        char *tools = dump(json_object_get(conv, "tools"));
        char *kwargs = dump(json_object_get(conv, "kwargs"));
        braid_chat_params prm = braid_chat_default_params();
        json_t *agp = json_object_get(conv, "add_generation_prompt");
        if (agp) prm.add_generation_prompt = json_is_true(agp);
        prm.bos_token = json_string_value(json_object_get(conv, "bos_token"));
        prm.eos_token = json_string_value(json_object_get(conv, "eos_token"));
        if (!prm.bos_token) prm.bos_token = "";
        if (!prm.eos_token) prm.eos_token = "";
        prm.tools_json = tools;
        prm.kwargs_json = kwargs;
        prm.now = NOW;
        char *got = NULL;
        size_t gn = 0;
        braid_status s = braid_chat_template_render(tmpl, tl, messages, &prm, &got, &gn);
        if (strcmp(kind, "OK") == 0) {
            int ok = s == BRAID_OK && gn == n && memcmp(got, want, n) == 0;
            if (ok) same++;
            else {
                mismatched++;
                if (s != BRAID_OK)
                    fprintf(stderr, "MISMATCH %s x %s: Jinja2 renders, braid refuses: %s: %s\n", tname, cname,
                            braid_status_name(s), braid_last_error());
                else {
                    fprintf(stderr, "MISMATCH %s x %s: different bytes\n", tname, cname);
                    show_diff(want, n, got, gn);
                }
            }
        } else {
            if (s != BRAID_OK) {
                both_refuse++;
                same++;
                printf("refused by both: %s x %s\n    Jinja2: %.*s\n    braid:  %s\n", tname, cname,
                       (int)(n > 300 ? 300 : n), want, braid_last_error());
            } else {
                mismatched++;
                fprintf(stderr, "MISMATCH %s x %s: Jinja2 refuses (%.*s), braid renders %zu bytes\n", tname, cname,
                        (int)(n > 200 ? 200 : n), want, gn);
            }
        }
        braid_free(got);
        free(messages);
        free(tools);
        free(kwargs);
        json_decref(conv);
        free(conv_text);
        free(tmpl);
    }
    printf("chat templates: %d/%d renderings agree with Jinja2 (%d templates; %d of them refused by both)\n", same,
           total, templates, both_refuse);
    CHECK(total > 0, "no template x conversation cases ran");
    CHECK(mismatched == 0, "%d of %d renderings differ from Jinja2", mismatched, total);
    free(ref);
    TEST_MAIN_END();
}
