/* test_cli_run.c — `braid run` end to end on a tiny generated qwen35 model, run as a separate process:
 * --json reports the prompt's token ids as braid_tokenize gives them and, at temperature 0, the greedy
 * continuation computed here through the API (with the prompt split over several batches by -b, which also
 * exercises the progress display); the streamed text equals the detokenized JSON tokens; a seed reproduces a
 * sampled run; bad arguments are usage errors (exit code 2). */
#include <jansson.h>
#include <string.h>
#include <unistd.h>

#include "braid.h"
#include "genmodel/genmodel.h"
#include "test.h"

static char braid_exe[2048], model_path[2048];

/* The greedy continuation of prompt (n_gen tokens, stopping at an end-of-generation token) via the API. */
static int greedy_ref(braid_model *m, const braid_token *prompt, int n_prompt, int n_gen, braid_token *out) {
    braid_context *ctx = NULL;
    braid_context_params cp = braid_context_default_params();
    cp.n_ctx = (uint32_t)(n_prompt + n_gen + 8);
    cp.n_threads = 1;
    if (braid_context_new(m, &cp, &ctx) != BRAID_OK) return -1;
    braid_batch b = {.n_tokens = n_prompt, .token = prompt};
    int n = 0;
    if (braid_decode(ctx, &b) != BRAID_OK) goto fail;
    int32_t row = n_prompt - 1, nv = braid_model_n_vocab(m);
    while (n < n_gen) {
        const float *l = braid_logits(ctx, row);
        if (!l) goto fail;
        braid_token best = 0;
        for (int32_t i = 1; i < nv; i++)
            if (l[i] > l[best]) best = i;
        if (braid_token_is_eog(m, best)) break;
        out[n++] = best;
        braid_batch one = {.n_tokens = 1, .token = &out[n - 1]};
        if (braid_decode(ctx, &one) != BRAID_OK) goto fail;
        row = 0;
    }
    braid_context_free(ctx);
    return n;
fail:
    braid_context_free(ctx);
    return -1;
}

static int json_ids(json_t *arr, braid_token *out, int cap) {
    if (!json_is_array(arr)) return -1;
    int n = (int)json_array_size(arr);
    for (int i = 0; i < n && i < cap; i++) out[i] = (braid_token)json_integer_value(json_array_get(arr, i));
    return n;
}

int main(void) {
    const char *build = test_env("BRAID_BUILD_DIR", ".");
    snprintf(braid_exe, sizeof braid_exe, "%s/braid", build);
    snprintf(model_path, sizeof model_path, "%s/test_cli_run_tiny.gguf", build);

    gen_params gp;
    gen_params_default(&gp);
    gp.arch = "qwen35";
    gp.preset = "tiny";
    gp.seed = 7;
    gen_summary sum;
    CHECK_STATUS(gen_model_write(&gp, model_path, &sum), BRAID_OK);

    braid_model *m = NULL;
    braid_model_params mp = braid_model_default_params();
    CHECK_STATUS(braid_model_load(model_path, &mp, &m), BRAID_OK);
    if (!m) TEST_MAIN_END();

    const char *prompt = "The quick brown fox jumps over the lazy dog. Ünïcödé → 漢字 🙂";
    braid_token ptoks[256];
    size_t n_ptoks = 0;
    CHECK_STATUS(braid_tokenize(m, prompt, strlen(prompt), 1, 1, ptoks, 256, &n_ptoks), BRAID_OK);
    CHECK(n_ptoks > 6, "the prompt has several tokens (%zu)", n_ptoks);

    /* Greedy, prompt in batches of 3 tokens. */
    enum { N_GEN = 24 };
    char cmd[16384];
    char err_path[2100];
    snprintf(err_path, sizeof err_path, "%s.stderr", model_path);
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p '%s' -n %d --temp 0 -b 3 -t 1 --json 2>'%s'", braid_exe,
             model_path, prompt, N_GEN, err_path);
    int st = -1;
    char *out = test_run_cmd(cmd, &st);
    CHECK(st == 0 && out, "braid run --json exits with 0 (got %d)", st);
    json_error_t jerr;
    json_t *j = out ? json_loads(out, 0, &jerr) : NULL;
    CHECK(j != NULL, "the output is one JSON object: %s", out ? jerr.text : "(none)");
    /* stderr: progress lines (the prompt took several batches) and the timings line. */
    char errbuf[8192] = {0};
    FILE *ef = fopen(err_path, "rb");
    if (ef) {
        size_t got = fread(errbuf, 1, sizeof errbuf - 1, ef);
        errbuf[got] = 0;
        fclose(ef);
    }
    unlink(err_path);
    char progress_last[64];
    snprintf(progress_last, sizeof progress_last, "prompt: %zu/%zu tokens", n_ptoks, n_ptoks);
    CHECK(strstr(errbuf, "prompt: 3/") && strstr(errbuf, progress_last), "progress is shown: %s", errbuf);
    CHECK(strstr(errbuf, "tok/s") && strstr(errbuf, "generation: "), "the timings line is printed");
    braid_token got_p[256], got_g[N_GEN + 8], ref_g[N_GEN];
    int n_ref = greedy_ref(m, ptoks, (int)n_ptoks, N_GEN, ref_g);
    CHECK(n_ref > 0, "the reference continuation runs");
    if (j) {
        int np = json_ids(json_object_get(j, "prompt_tokens"), got_p, 256);
        CHECK(np == (int)n_ptoks && !memcmp(got_p, ptoks, n_ptoks * sizeof *ptoks),
              "prompt_tokens are braid_tokenize's ids (%d vs %zu)", np, n_ptoks);
        int ng = json_ids(json_object_get(j, "tokens"), got_g, N_GEN + 8);
        CHECK(ng == n_ref && !memcmp(got_g, ref_g, (size_t)(ng > 0 ? ng : 0) * sizeof *got_g),
              "tokens are the greedy continuation (%d vs %d)", ng, n_ref);
        json_t *tm = json_object_get(j, "timings");
        CHECK(json_is_number(json_object_get(tm, "prompt_per_second")) &&
                  json_real_value(json_object_get(tm, "prompt_per_second")) > 0,
              "timings.prompt_per_second is a positive number");
        CHECK(json_is_number(json_object_get(tm, "predicted_per_second")), "timings.predicted_per_second");
        CHECK(json_is_string(json_object_get(j, "text")), "text is a string");

        /* The streamed text is the detokenized continuation, whatever the UTF-8 splits between tokens. */
        char *ref_text = NULL;
        size_t ref_len = 0;
        CHECK_STATUS(braid_detokenize(m, got_g, (size_t)(ng > 0 ? ng : 0), 0, &ref_text, &ref_len), BRAID_OK);
        snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p '%s' -n %d --temp 0 -t 1 2>/dev/null", braid_exe,
                 model_path, prompt, N_GEN);
        char *text = test_run_cmd(cmd, &st);
        CHECK(st == 0 && text, "braid run exits with 0");
        if (text && ref_text) {
            size_t tl = strlen(text);
            CHECK(tl == ref_len + 1 && !memcmp(text, ref_text, ref_len) && text[tl - 1] == '\n',
                  "streamed text (%zu bytes) equals the detokenized tokens (%zu bytes) plus a newline", tl,
                  ref_len);
        }
        free(text);
        braid_free(ref_text);
        json_decref(j);
    }
    free(out);

    /* Sampling with a seed reproduces; another seed differs (at temperature 1.5 over the whole vocabulary). */
    char *runs[3];
    for (int r = 0; r < 3; r++) {
        snprintf(cmd, sizeof cmd,
                 "'%s' run -m '%s' -p 'Once upon a time' -n 16 --temp 1.5 --top-k 0 --top-p 1 --min-p 0 "
                 "--seed %d -t 1 --json 2>/dev/null",
                 braid_exe, model_path, r < 2 ? 11 : 12);
        runs[r] = test_run_cmd(cmd, &st);
        CHECK(st == 0 && runs[r], "sampled run %d exits with 0", r);
    }
    if (runs[0] && runs[1] && runs[2]) {
        json_t *a = json_loads(runs[0], 0, NULL), *b = json_loads(runs[1], 0, NULL), *c = json_loads(runs[2], 0, NULL);
        CHECK(a && b && c && json_equal(json_object_get(a, "tokens"), json_object_get(b, "tokens")),
              "the same seed gives the same tokens");
        CHECK(a && c && !json_equal(json_object_get(a, "tokens"), json_object_get(c, "tokens")),
              "another seed gives other tokens");
        json_decref(a);
        json_decref(b);
        json_decref(c);
    }
    for (int r = 0; r < 3; r++) free(runs[r]);

    /* --mtp on the default model (it carries a trained MTP block): the tokens of plain greedy, and --json's
     * speculative object counts the head's drafts. */
    {
        char kjv[2300];
        snprintf(kjv, sizeof kjv, "%s/models/kjv-qwen35-q8_0.gguf", test_env("BRAID_SOURCE_DIR", "."));
        char *o2[2];
        for (int r = 0; r < 2; r++) {
            snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p 'And God said' -n 32 --temp 0 -t 1 --json %s 2>/dev/null",
                     braid_exe, kjv, r ? "--mtp" : "");
            o2[r] = test_run_cmd(cmd, &st);
            CHECK(st == 0 && o2[r], "braid run%s exits with 0 (got %d)", r ? " --mtp" : "", st);
        }
        json_t *a = o2[0] ? json_loads(o2[0], 0, NULL) : NULL, *b = o2[1] ? json_loads(o2[1], 0, NULL) : NULL;
        CHECK(a && b && json_equal(json_object_get(a, "tokens"), json_object_get(b, "tokens")),
              "--mtp gives the tokens of plain greedy");
        json_t *sp = b ? json_object_get(b, "speculative") : NULL;
        json_int_t drafted = json_integer_value(json_object_get(sp, "drafted"));
        json_int_t accepted = json_integer_value(json_object_get(sp, "accepted"));
        CHECK(sp && !(a && json_object_get(a, "speculative")), "speculative is reported with --mtp only");
        CHECK(drafted > 0 && accepted > 0 && accepted <= drafted, "--mtp drafted %lld, accepted %lld",
              (long long)drafted, (long long)accepted);
        json_decref(a);
        json_decref(b);
        free(o2[0]);
        free(o2[1]);
        snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p hi --mtp 2>/dev/null", braid_exe, model_path);
        free(test_run_cmd(cmd, &st));
        CHECK(st == 1, "--mtp on a file without an MTP block fails with the reason (exit %d)", st);
    }

    /* Usage errors. */
    const char *bad[] = {"run", "run -m x.gguf", "run -p hi --temp abc", "run -p hi -n -1", "run -p hi --bogus 1",
                         "run -p hi -f also.txt", "run -p hi --mtp --lookup 2", "run -p hi --lookup 2 --mtp"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(cmd, sizeof cmd, "'%s' %s 2>/dev/null", braid_exe, bad[i]);
        char *o = test_run_cmd(cmd, &st);
        CHECK(st == 2, "'braid %s' is a usage error (exit %d)", bad[i], st);
        free(o);
    }
    snprintf(cmd, sizeof cmd, "'%s' run -m /nonexistent.gguf -p hi 2>/dev/null", braid_exe);
    free(test_run_cmd(cmd, &st));
    CHECK(st == 1, "a missing model file is a failure (exit %d)", st);

    /* Without -m: the default model is looked up (tools/default_model.c); $BRAID_MODELS_DIR, when set, is the
     * only place looked at. A directory holding this test's generated file under the default name gives the
     * same greedy text as -m on that file; an empty directory is a clear failure, not a silent fallback. */
    char cache[2100], linked[2200];
    snprintf(cache, sizeof cache, "%s/test_cli_run_models", build);
    snprintf(linked, sizeof linked, "%s/kjv-qwen35-q8_0.gguf", cache);
    unlink(linked);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", cache);
    free(test_run_cmd(cmd, &st));
    snprintf(cmd, sizeof cmd, "BRAID_MODELS_DIR='%s' '%s' run -p 'Hi' -n 4 --temp 0 -t 1 2>/dev/null", cache,
             braid_exe);
    free(test_run_cmd(cmd, &st));
    CHECK(st == 1, "no default model in $BRAID_MODELS_DIR is a failure (exit %d)", st);
    CHECK(symlink(model_path, linked) == 0, "link the test model under the default name");
    snprintf(cmd, sizeof cmd, "BRAID_MODELS_DIR='%s' '%s' run -p 'Hi' -n 4 --temp 0 -t 1 2>/dev/null", cache,
             braid_exe);
    char *dflt = test_run_cmd(cmd, &st);
    CHECK(st == 0 && dflt, "run with the default model exits with 0 (%d)", st);
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p 'Hi' -n 4 --temp 0 -t 1 2>/dev/null", braid_exe, model_path);
    char *expl = test_run_cmd(cmd, &st);
    CHECK(st == 0 && expl && dflt && !strcmp(dflt, expl), "without -m the default file is the one used");
    free(dflt);
    free(expl);
    unlink(linked);
    rmdir(cache);

    /* braid bench on the same file: a JSON object with positive speeds and a roofline. */
    snprintf(cmd, sizeof cmd, "'%s' bench -m '%s' -p 16 -n 4 -r 1 -t 1 --bw-mib 32 --json 2>/dev/null", braid_exe,
             model_path);
    char *bo = test_run_cmd(cmd, &st);
    CHECK(st == 0 && bo, "braid bench exits with 0 (%d)", st);
    json_t *bj = bo ? json_loads(bo, 0, NULL) : NULL;
    CHECK(bj && json_real_value(json_object_get(bj, "pp_tokens_per_second")) > 0 &&
              json_real_value(json_object_get(bj, "tg_tokens_per_second")) > 0 &&
              json_real_value(json_object_get(bj, "bandwidth_bytes_per_second")) > 0 &&
              json_integer_value(json_object_get(bj, "weight_bytes_per_token")) > 0 &&
              json_integer_value(json_object_get(bj, "weight_bytes_per_token")) <
                  json_integer_value(json_object_get(bj, "weight_bytes")),
          "bench reports speeds, bandwidth and bytes per token (less than the file: one embedding row)");
    json_decref(bj);
    free(bo);

    braid_model_free(m);
    unlink(model_path);
    TEST_MAIN_END();
}
