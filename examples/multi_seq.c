/* multi_seq.c — several sequences in one context: a shared prompt decoded once into sequence 0, copied to
 * sequences 1..N-1 (attention cells are shared, not copied), then every sequence continued greedily from a
 * different first token in one batch per step.
 *
 *   cc multi_seq.c $(pkg-config --cflags --libs braid) -o multi_seq && ./multi_seq MODEL.gguf "Hello" 3 16
 *
 * It checks what it claims: each sequence's continuation must equal the same continuation decoded alone in a
 * fresh context (braid's kernels are exact per output, so batching must not change a sequence's tokens).
 * Exits 0 when they all match, 1 otherwise. */
#include <braid.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SEQ 8
#define MAX_GEN 64

static int fail(const char *what, braid_status st) {
    fprintf(stderr, "multi_seq: %s: %s: %s\n", what, braid_status_name(st), braid_last_error());
    exit(1);
}

static braid_token argmax(const float *logits, int32_t n) {
    braid_token best = 0;
    for (int32_t i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

/* The k-th best token of the prompt's last logits: sequence k starts from it, so the sequences diverge. */
static braid_token kth_best(const float *logits, int32_t n, int k) {
    braid_token taken[MAX_SEQ];
    for (int j = 0; j <= k; j++) {
        braid_token best = -1;
        for (int32_t i = 0; i < n; i++) {
            int used = 0;
            for (int u = 0; u < j; u++) used |= taken[u] == i;
            if (!used && (best < 0 || logits[i] > logits[best])) best = i;
        }
        taken[j] = best;
    }
    return taken[k];
}

/* Greedy continuation of prompt + first, alone in a fresh context. */
static void alone(const braid_model *model, const braid_token *prompt, int32_t n, braid_token first, int n_gen,
                  braid_token *out) {
    braid_context_params cp = braid_context_default_params();
    cp.n_ctx = 512;
    braid_context *ctx = NULL;
    braid_status st = braid_context_new(model, &cp, &ctx);
    if (st != BRAID_OK) fail("context", st);
    braid_batch b = {.n_tokens = n, .token = prompt};
    if ((st = braid_decode(ctx, &b)) != BRAID_OK) fail("decode", st);
    braid_token t = first;
    for (int i = 0; i < n_gen; i++) {
        braid_batch one = {.n_tokens = 1, .token = &t};
        if ((st = braid_decode(ctx, &one)) != BRAID_OK) fail("decode", st);
        t = out[i] = argmax(braid_logits(ctx, 0), braid_model_n_vocab(model));
    }
    braid_context_free(ctx);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: multi_seq MODEL.gguf PROMPT [N_SEQ] [N_GEN]\n");
        return 2;
    }
    int n_seq = argc > 3 ? atoi(argv[3]) : 3;
    int n_gen = argc > 4 ? atoi(argv[4]) : 16;
    if (n_seq < 1 || n_seq > MAX_SEQ || n_gen < 1 || n_gen > MAX_GEN) {
        fprintf(stderr, "multi_seq: N_SEQ must be 1..%d and N_GEN 1..%d\n", MAX_SEQ, MAX_GEN);
        return 2;
    }

    braid_model_params mp = braid_model_default_params();
    braid_model *model = NULL;
    braid_status st = braid_model_load(argv[1], &mp, &model);
    if (st != BRAID_OK) fail("load", st);
    int32_t n_vocab = braid_model_n_vocab(model);

    braid_context_params cp = braid_context_default_params();
    cp.n_ctx = 1024;
    cp.n_seq_max = (uint32_t)n_seq;
    braid_context *ctx = NULL;
    if ((st = braid_context_new(model, &cp, &ctx)) != BRAID_OK) fail("context", st);

    braid_token prompt[256];
    size_t n = 0;
    st = braid_tokenize(model, argv[2], strlen(argv[2]), 1, 0, prompt, 256, &n);
    if (st != BRAID_OK) fail("tokenize", st);
    braid_batch b = {.n_tokens = (int32_t)n, .token = prompt};
    if ((st = braid_decode(ctx, &b)) != BRAID_OK) fail("decode", st);

    braid_token cur[MAX_SEQ];
    braid_seq_id ids[MAX_SEQ];
    const float *last = braid_logits(ctx, (int32_t)n - 1);
    for (int s = 0; s < n_seq; s++) {
        cur[s] = kth_best(last, n_vocab, s);
        ids[s] = s;
    }
    for (int s = 1; s < n_seq; s++)
        if ((st = braid_seq_copy(ctx, 0, s, (int32_t)n)) != BRAID_OK) fail("seq_copy", st);

    braid_token firsts[MAX_SEQ], gen[MAX_SEQ][MAX_GEN];
    memcpy(firsts, cur, sizeof firsts);
    for (int i = 0; i < n_gen; i++) {
        braid_batch step = {.n_tokens = n_seq, .token = cur, .seq = ids}; /* one row per sequence */
        if ((st = braid_decode(ctx, &step)) != BRAID_OK) fail("decode", st);
        for (int s = 0; s < n_seq; s++) cur[s] = gen[s][i] = argmax(braid_logits(ctx, s), n_vocab);
    }

    int bad = 0;
    for (int s = 0; s < n_seq; s++) {
        braid_token ref[MAX_GEN];
        alone(model, prompt, (int32_t)n, firsts[s], n_gen, ref);
        int same = memcmp(ref, gen[s], (size_t)n_gen * sizeof ref[0]) == 0;
        bad |= !same;
        char *text = NULL;
        size_t len = 0;
        if ((st = braid_detokenize(model, gen[s], (size_t)n_gen, 0, &text, &len)) != BRAID_OK) fail("detok", st);
        printf("seq %d (%s alone): %s\n", s, same ? "same as" : "DIFFERS from", text);
        braid_free(text);
    }
    braid_context_free(ctx);
    braid_model_free(model);
    return bad;
}
