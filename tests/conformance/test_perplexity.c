/* test_perplexity.c — `braid perplexity` against llama.cpp on the default model and the held-out text the
 * training script kept out of training (models/heldout.txt): the same tokens (braid's tokenizer against
 * llama.cpp's), and llama-perplexity's windows computed here through the oracle driver (each window decoded
 * from an empty memory, the second half scored, softmax as llama-perplexity does it) give a perplexity within
 * 0.1% of the one the braid command prints. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "braid.h"
#include "oracle_client.h"
#include "test.h"

#define CTX 128
#define CHUNKS 24

static double token_nll(const float *logits, int32_t n_vocab, int32_t tok) {
    float max = logits[0];
    for (int32_t i = 1; i < n_vocab; i++) max = logits[i] > max ? logits[i] : max;
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) sum += expf(logits[i] - max);
    return -((double)(logits[tok] - max) - log(sum));
}

int main(void) {
    const char *src = test_env("BRAID_SOURCE_DIR", ".");
    const char *build = test_env("BRAID_BUILD_DIR", "build");
    char model[4096], text_path[4096], cmd[12288];
    snprintf(model, sizeof model, "%s/models/kjv-qwen35-q8_0.gguf", src);
    snprintf(text_path, sizeof text_path, "%s/models/heldout.txt", src);
    size_t len;
    char *text = test_read_file(text_path, &len);
    CHECK(text != NULL, "read %s", text_path);
    if (!text) TEST_MAIN_END();

    /* braid's figure, from the command */
    snprintf(cmd, sizeof cmd, "'%s/braid' perplexity -m '%s' -f '%s' --ctx %d --chunks %d -t 1 2>/dev/null", build,
             model, text_path, CTX, CHUNKS);
    int st;
    char *line = test_run_cmd(cmd, &st);
    double ppl_braid = 0;
    CHECK(st == 0 && line && sscanf(line, "PPL = %lf", &ppl_braid) == 1, "braid perplexity prints a PPL line: '%s'",
          line ? line : "");
    free(line);

    /* the same tokens on both sides */
    braid_model *m = NULL;
    braid_model_params mp = braid_model_default_params();
    mp.vocab_only = 1;
    CHECK_STATUS(braid_model_load(model, &mp, &m), BRAID_OK);
    oracle *o = NULL;
    CHECK_STATUS(oracle_start(model, "--ctx 128 --kv f16", &o), BRAID_OK);
    if (!m || !o) TEST_MAIN_END();
    int32_t *ot = NULL, n_ot = 0;
    CHECK_STATUS(oracle_tokenize(o, text, len, 1, 0, &ot, &n_ot), BRAID_OK);
    size_t n_bt = 0;
    braid_token *bt = malloc(((size_t)n_ot + 16) * sizeof *bt);
    CHECK_STATUS(braid_tokenize(m, text, len, 1, 0, bt, (size_t)n_ot + 16, &n_bt), BRAID_OK);
    CHECK(n_bt == (size_t)n_ot && !memcmp(bt, ot, n_bt * sizeof *bt), "braid and llama.cpp tokenize the held-out "
          "text the same (%zu vs %d tokens)", n_bt, n_ot);
    CHECK(n_ot >= CTX * CHUNKS, "the held-out text has %d tokens, enough for %d windows", n_ot, CHUNKS);

    /* llama-perplexity's windows through the oracle */
    int32_t n_vocab = braid_model_n_vocab(m);
    uint8_t out[CTX];
    for (int k = 0; k < CTX; k++) out[k] = k >= CTX / 2;
    double nll = 0;
    size_t count = 0;
    for (int c = 0; c < CHUNKS && n_ot >= CTX * CHUNKS; c++) {
        const int32_t *w = ot + (size_t)c * CTX;
        CHECK_STATUS(oracle_cmd(o, NULL, "clear"), BRAID_OK);
        float *logits = NULL;
        int32_t rows = 0;
        CHECK_STATUS(oracle_decode(o, CTX, w, NULL, NULL, out, &logits, &rows), BRAID_OK);
        CHECK(rows == CTX / 2, "window %d: %d logit rows", c, rows);
        for (int k = 0; logits && k + 1 < rows; k++) {
            nll += token_nll(logits + (size_t)k * n_vocab, n_vocab, w[CTX / 2 + k + 1]);
            count++;
        }
        bd_free(logits);
    }
    double ppl_llama = count ? exp(nll / (double)count) : 0;
    double rel = fabs(ppl_braid - ppl_llama) / ppl_llama;
    printf("held-out perplexity (ctx %d, %d windows, %zu tokens scored): braid %.6f, llama.cpp %.6f, rel diff "
           "%.2e\n", CTX, CHUNKS, count, ppl_braid, ppl_llama, rel);
    CHECK(rel < 1e-3, "braid %.6f vs llama.cpp %.6f (%.2e)", ppl_braid, ppl_llama, rel);
    CHECK(ppl_llama > 1 && ppl_llama < 200, "a trained model's perplexity (%.3f)", ppl_llama);

    CHECK_STATUS(oracle_stop(o), BRAID_OK);
    bd_free(ot);
    free(bt);
    braid_model_free(m);
    free(text);
    TEST_MAIN_END();
}
