/* simple.c — the smallest braid embedder: load a model, tokenize a prompt, decode it, then sample and decode
 * one token at a time, streaming each token's text to stdout.
 *
 *   cc simple.c $(pkg-config --cflags --libs braid) -o simple && ./simple MODEL.gguf "Hello" 32
 *
 * Exits 0 after printing the continuation; on any failure it prints braid's reason and exits 1. */
#include <braid.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, braid_status st) {
    fprintf(stderr, "simple: %s: %s: %s\n", what, braid_status_name(st), braid_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: simple MODEL.gguf PROMPT [N_PREDICT]\n");
        return 2;
    }
    int n_predict = argc > 3 ? atoi(argv[3]) : 32;

    braid_model_params mp = braid_model_default_params();
    braid_model *model = NULL;
    braid_status st = braid_model_load(argv[1], &mp, &model);
    if (st != BRAID_OK) return fail("load", st);

    braid_context_params cp = braid_context_default_params();
    cp.n_ctx = 512;
    braid_context *ctx = NULL;
    st = braid_context_new(model, &cp, &ctx);
    if (st != BRAID_OK) return fail("context", st);

    /* Ask for the count first (cap 0 gives BRAID_E_RANGE and the size needed), then tokenize for real. */
    size_t n = 0;
    st = braid_tokenize(model, argv[2], strlen(argv[2]), 1, 0, NULL, 0, &n);
    if (st != BRAID_OK && st != BRAID_E_RANGE) return fail("tokenize", st);
    braid_token *prompt = malloc((n ? n : 1) * sizeof *prompt);
    if (!prompt) return 1;
    st = braid_tokenize(model, argv[2], strlen(argv[2]), 1, 0, prompt, n, &n);
    if (st != BRAID_OK) return fail("tokenize", st);

    braid_batch batch = {.n_tokens = (int32_t)n, .token = prompt};
    st = braid_decode(ctx, &batch);
    if (st != BRAID_OK) return fail("decode", st);
    int32_t row = (int32_t)n - 1; /* logits are kept for the last input of the batch */

    braid_sampler_params sp = braid_sampler_default_params(); /* greedy */
    braid_sampler *smp = NULL;
    st = braid_sampler_new(&sp, &smp);
    if (st != BRAID_OK) return fail("sampler", st);

    int32_t n_vocab = braid_model_n_vocab(model);
    for (int i = 0; i < n_predict; i++) {
        braid_token t;
        st = braid_sampler_sample(smp, braid_logits(ctx, row), n_vocab, &t);
        if (st != BRAID_OK) return fail("sample", st);
        if (braid_token_is_eog(model, t)) break;
        braid_sampler_accept(smp, t);
        char piece[256];
        size_t len = 0;
        st = braid_token_to_piece(model, t, 0, piece, sizeof piece, &len);
        if (st != BRAID_OK) return fail("piece", st);
        fwrite(piece, 1, len < sizeof piece ? len : sizeof piece, stdout);
        fflush(stdout);
        braid_batch one = {.n_tokens = 1, .token = &t};
        st = braid_decode(ctx, &one);
        if (st != BRAID_OK) return fail("decode", st);
        row = 0;
    }
    printf("\n");

    braid_sampler_free(smp);
    free(prompt);
    braid_context_free(ctx);
    braid_model_free(model);
    return 0;
}
