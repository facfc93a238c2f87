/* session.c — save a conversation's state to a file and pick it up in another context (as a program would
 * across a restart): decode a prompt and a few tokens, save sequence 0 to FILE, load FILE into a new context
 * and continue there.
 *
 *   cc session.c $(pkg-config --cflags --libs braid) -o session && ./session MODEL.gguf "Hello" state.bin
 *
 * It checks what it claims: the continuation after the reload must equal the one the first context produces
 * without interruption, token for token (design.md §5: a restored state gives the same logits bit for bit).
 * It also shows that a damaged file is refused and leaves the context untouched. Exits 0 if all holds. */
#include <braid.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_GEN 12

static int fail(const char *what, braid_status st) {
    fprintf(stderr, "session: %s: %s: %s\n", what, braid_status_name(st), braid_last_error());
    exit(1);
}

static braid_token greedy_step(const braid_model *model, braid_context *ctx, braid_token t) {
    braid_batch one = {.n_tokens = 1, .token = &t};
    braid_status st = braid_decode(ctx, &one);
    if (st != BRAID_OK) fail("decode", st);
    const float *l = braid_logits(ctx, 0);
    braid_token best = 0;
    for (int32_t i = 1; i < braid_model_n_vocab(model); i++)
        if (l[i] > l[best]) best = i;
    return best;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: session MODEL.gguf PROMPT STATE_FILE\n");
        return 2;
    }
    braid_model_params mp = braid_model_default_params();
    braid_model *model = NULL;
    braid_status st = braid_model_load(argv[1], &mp, &model);
    if (st != BRAID_OK) fail("load", st);
    braid_context_params cp = braid_context_default_params();
    cp.n_ctx = 512;
    braid_context *a = NULL, *b = NULL;
    if ((st = braid_context_new(model, &cp, &a)) != BRAID_OK) fail("context", st);
    if ((st = braid_context_new(model, &cp, &b)) != BRAID_OK) fail("context", st);

    braid_token prompt[256];
    size_t n = 0;
    if ((st = braid_tokenize(model, argv[2], strlen(argv[2]), 1, 0, prompt, 256, &n)) != BRAID_OK)
        fail("tokenize", st);
    if (n == 0) return 2;
    braid_batch batch = {.n_tokens = (int32_t)n - 1, .token = prompt}; /* the last one is decoded below */
    if (n > 1 && (st = braid_decode(a, &batch)) != BRAID_OK) fail("decode", st);

    /* First half of the generation in context a, then save it. */
    braid_token t = prompt[n - 1], before[N_GEN], after[N_GEN];
    for (int i = 0; i < N_GEN / 2; i++) t = before[i] = greedy_step(model, a, t);
    if ((st = braid_state_seq_save_file(a, 0, argv[3])) != BRAID_OK) fail("save", st);
    braid_token resume = t;
    for (int i = N_GEN / 2; i < N_GEN; i++) t = before[i] = greedy_step(model, a, t);

    /* A damaged copy must be refused, with b left as it was (empty). */
    FILE *f = fopen(argv[3], "rb");
    if (!f) return 1;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    unsigned char *bytes = malloc((size_t)size);
    if (!bytes || fread(bytes, 1, (size_t)size, f) != (size_t)size) return 1;
    fclose(f);
    bytes[size / 2] ^= 0x5a;
    st = braid_state_seq_load(b, 0, bytes, (size_t)size);
    printf("damaged file: %s (%s), sequence length after: %d\n", braid_status_name(st), braid_last_error(),
           braid_seq_len(b, 0));
    int bad = st == BRAID_OK || braid_seq_len(b, 0) != 0;
    free(bytes);

    /* The real file, then the second half of the generation in context b. */
    if ((st = braid_state_seq_load_file(b, 0, argv[3])) != BRAID_OK) fail("load state", st);
    memcpy(after, before, sizeof after);
    t = resume;
    for (int i = N_GEN / 2; i < N_GEN; i++) t = after[i] = greedy_step(model, b, t);
    int same = memcmp(before, after, sizeof before) == 0;
    printf("continuation after reload: %s (%d inputs restored)\n", same ? "identical" : "DIFFERENT",
           (int)n - 1 + N_GEN / 2);
    bad |= !same;

    braid_context_free(a);
    braid_context_free(b);
    braid_model_free(model);
    return bad;
}
