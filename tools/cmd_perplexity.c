/* cmd_perplexity.c — `braid perplexity`: the perplexity of a model on a text file, by llama-perplexity's
 * method, so the two figures can be compared on the same file and text.
 *
 * The text is tokenized whole (with the model's start token if it adds one, special-token text not parsed),
 * cut into n_chunk = n_tokens / ctx windows of ctx tokens, and each window is decoded from an empty memory;
 * the first token of a window becomes the start token when the model adds one. Only the second half of a
 * window is scored (its first half is context): the logits at positions ctx/2 .. ctx-2 predict the tokens
 * after them, each contributing -log softmax(logits)[next], with softmax computed as llama.cpp does it (a float
 * maximum, expf of the shifted logits summed in double). PPL = exp(mean), with llama.cpp's error estimate. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "braid.h"
#include "commands.h"
#include "default_model.h"
#include "tool_util.h"

static void ppl_usage(FILE *f) {
    fprintf(f, "usage: braid perplexity [-m FILE.gguf] -f TEXT [--ctx N] [--chunks N] [-t THREADS] [-b BATCH]\n"
               "  the perplexity of the text, llama-perplexity's way: windows of N tokens (default 512), the\n"
               "  second half of each scored; --chunks limits the number of windows. Without -m: the default\n"
               "  model.\n");
}

/* -log p(tok) under softmax(logits), as llama-perplexity computes it. */
static double token_nll(const float *logits, int32_t n_vocab, braid_token tok) {
    float max = logits[0];
    for (int32_t i = 1; i < n_vocab; i++) max = logits[i] > max ? logits[i] : max;
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) sum += expf(logits[i] - max);
    return -((double)(logits[tok] - max) - log(sum));
}

static int cmd_perplexity(int argc, char **argv) {
    const char *model_path = NULL, *text_path = NULL;
    int32_t n_ctx = 512, n_chunks = -1, n_threads = 0, n_batch = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            ppl_usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "braid perplexity: unknown option or missing value: '%s'\n", a);
            ppl_usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        int ok = 1;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model_path = v;
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) text_path = v;
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) ok = tool_parse_i32("perplexity", a, v, 4, 1 << 20, &n_ctx);
        else if (!strcmp(a, "--chunks")) ok = tool_parse_i32("perplexity", a, v, 1, INT32_MAX, &n_chunks);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads"))
            ok = tool_parse_i32("perplexity", a, v, 1, 1024, &n_threads);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch"))
            ok = tool_parse_i32("perplexity", a, v, 1, 1 << 20, &n_batch);
        else {
            fprintf(stderr, "braid perplexity: unknown option '%s'\n", a);
            ppl_usage(stderr);
            return 2;
        }
        if (!ok) return 2;
    }
    if (!text_path) {
        fprintf(stderr, "braid perplexity: give the text with -f\n");
        ppl_usage(stderr);
        return 2;
    }

    char default_path[4096];
    if (!model_path) {
        if (!tool_default_model_path(default_path, sizeof default_path)) return 1;
        model_path = default_path;
    }
    char *text = NULL;
    size_t text_len = 0;
    if (!tool_read_file("perplexity", text_path, &text, &text_len)) return 1;

    int rc = 1;
    braid_model *model = NULL;
    braid_context *ctx = NULL;
    braid_token *tokens = NULL;
    uint8_t *want = NULL;
    braid_model_params mp = braid_model_default_params();
    braid_status s = braid_model_load(model_path, &mp, &model);
    if (s != BRAID_OK) {
        fprintf(stderr, "braid perplexity: cannot load %s: %s: %s\n", model_path, braid_status_name(s),
                braid_last_error());
        goto done;
    }

    /* add_special = 1 (the start token if the model adds one), parse_special = 0, as llama-perplexity. */
    size_t n_tok = 0;
    s = braid_tokenize(model, text, text_len, 1, 0, NULL, 0, &n_tok);
    if (s == BRAID_OK || s == BRAID_E_RANGE) {
        tokens = malloc((n_tok ? n_tok : 1) * sizeof *tokens);
        s = tokens ? braid_tokenize(model, text, text_len, 1, 0, tokens, n_tok, &n_tok) : BRAID_E_NOMEM;
    }
    if (s != BRAID_OK) {
        fprintf(stderr, "braid perplexity: cannot tokenize %s: %s: %s\n", text_path, braid_status_name(s),
                braid_last_error());
        goto done;
    }
    if (n_tok < 2 * (size_t)n_ctx) {
        fprintf(stderr, "braid perplexity: %s has %zu tokens; a context of %d needs at least %d\n", text_path, n_tok,
                n_ctx, 2 * n_ctx);
        goto done;
    }
    size_t n_chunk = n_tok / (size_t)n_ctx;
    if (n_chunks > 0 && (size_t)n_chunks < n_chunk) n_chunk = (size_t)n_chunks;

    braid_context_params cp = braid_context_default_params();
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = (uint32_t)(n_batch ? n_batch : n_ctx);
    if (n_threads) cp.n_threads = (uint32_t)n_threads;
    s = braid_context_new(model, &cp, &ctx);
    if (s != BRAID_OK) {
        fprintf(stderr, "braid perplexity: cannot create a context: %s: %s\n", braid_status_name(s),
                braid_last_error());
        goto done;
    }

    const int32_t n_vocab = braid_model_n_vocab(model);
    const int32_t first = n_ctx / 2;
    const braid_token bos = braid_token_bos(model);
    /* whether the tokenizer put a start token in front: then each window starts with one, as in llama.cpp */
    const int add_bos = n_tok > 0 && bos >= 0 && tokens[0] == bos;
    want = malloc((size_t)n_ctx);
    if (!want) {
        fprintf(stderr, "braid perplexity: out of memory\n");
        goto done;
    }
    for (int32_t k = 0; k < n_ctx; k++) want[k] = k >= first;

    fprintf(stderr, "braid perplexity: %zu tokens, %zu chunks of %d, scoring %d tokens per chunk\n", n_tok, n_chunk,
            n_ctx, n_ctx - first - 1);
    double nll = 0.0, nll2 = 0.0;
    size_t count = 0;
    for (size_t c = 0; c < n_chunk; c++) {
        braid_token *w = tokens + c * (size_t)n_ctx;
        braid_token saved = w[0];
        if (add_bos) w[0] = bos;
        braid_seq_clear(ctx, -1);
        braid_batch b = {.n_tokens = n_ctx, .token = w, .logits = want};
        s = braid_decode(ctx, &b);
        w[0] = saved;
        if (s != BRAID_OK) {
            fprintf(stderr, "braid perplexity: decode of chunk %zu failed: %s: %s\n", c, braid_status_name(s),
                    braid_last_error());
            goto done;
        }
        for (int32_t k = first; k < n_ctx - 1; k++) {
            const float *lg = braid_logits(ctx, k);
            if (!lg) {
                fprintf(stderr, "braid perplexity: no logits for row %d\n", k);
                goto done;
            }
            double v = token_nll(lg, n_vocab, w[k + 1]);
            nll += v;
            nll2 += v * v;
        }
        count += (size_t)(n_ctx - first - 1);
        fprintf(stderr, "[%zu]%.4f,", c + 1, exp(nll / (double)count));
    }
    fprintf(stderr, "\n");
    double mean = nll / (double)count;
    double var = nll2 / (double)count - mean * mean;
    double err = var > 0 && count > 1 ? sqrt(var / (double)(count - 1)) : 0.0;
    double ppl = exp(mean);
    printf("PPL = %.6f +/- %.6f (%zu chunks of %d tokens, %zu tokens scored)\n", ppl, err * ppl, n_chunk, n_ctx,
           count);
    rc = 0;

done:
    free(want);
    free(tokens);
    free(text);
    braid_context_free(ctx);
    braid_model_free(model);
    return rc;
}

BRAID_COMMAND(perplexity, cmd_perplexity, "perplexity of a text file (llama-perplexity's windows)");
