/* fuzz_state_model.c — libFuzzer target for state files loaded into a real model: a tiny random-weight qwen35
 * (gen-model, 256-token vocabulary) in a context with three sequences that share cells and hold checkpoints,
 * a rollback buffer, an embedding input and shifted positions. fuzz_state loads into a toy memory without a
 * vocabulary or weights; this one finds what only a model can turn into a fault (a token id without an
 * embedding row, a history that a replay runs through the forward pass).
 *
 * Every input is loaded as the whole context and as one sequence, as given and re-sealed (fingerprint set to
 * the model's, checksums recomputed: they authenticate nothing). A refused load must leave the context byte for
 * byte as it was. After an accepted one the memory's invariants must hold, and a truncation (replaying from a
 * checkpoint), a copy and a decode on every sequence must not fault; the pristine state is then restored.
 * Seeds: fuzz/corpus/state_model, written by BRAID_FUZZ_SEEDS=DIR ./fuzz_state_model. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "state_edit.h"
#include "braid.h"
#include "engine/context.h"
#include "genmodel/genmodel.h"

#define N_VOCAB 256
#define N_SEQ 3

static braid_model *M;
static braid_context *C;
static void *pristine;
static size_t n_pristine;

static void die(const char *what) {
    fprintf(stderr, "fuzz_state_model: %s: %s\n", what, braid_last_error());
    abort();
}

static braid_status decode_n(braid_seq_id s, int32_t n, braid_token tok0) {
    braid_token t[16];
    braid_seq_id q[16];
    for (int32_t i = 0; i < n && i < 16; i++) t[i] = (tok0 + 7 * i) % N_VOCAB, q[i] = s;
    braid_batch b = {.n_tokens = n < 16 ? n : 16, .token = t, .seq = q};
    return braid_decode(C, &b);
}

/* Shared cells, checkpoints, a rollback buffer, an embedding input and K rows waiting for re-rotation. */
static void fill(void) {
    if (decode_n(0, 9, 3) != BRAID_OK || braid_seq_copy(C, 0, 1, 5) != BRAID_OK || decode_n(1, 2, 40) != BRAID_OK ||
        decode_n(0, 3, 90) != BRAID_OK)
        die("fill");
    float e[64];
    for (int i = 0; i < 64; i++) e[i] = 0.01f * (float)(i - 32);
    braid_batch b = {.n_tokens = 1, .embd = e, .seq = (braid_seq_id[]){2}};
    if (braid_model_n_embd(M) != 64 || braid_decode(C, &b) != BRAID_OK || decode_n(2, 2, 7) != BRAID_OK) die("fill");
    if (braid_seq_shift_pos(C, 0, 0, braid_seq_len(C, 0), 2) != BRAID_OK) die("fill");
}

static void write_seeds(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/whole", dir);
    if (braid_state_save_file(C, path) != BRAID_OK) die("seed");
    for (int s = 0; s < N_SEQ; s++) {
        snprintf(path, sizeof path, "%s/seq%d", dir, s);
        if (braid_state_seq_save_file(C, s, path) != BRAID_OK) die("seed");
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    char dir[] = "/tmp/braid_fuzz_state_model_XXXXXX", path[64];
    if (!mkdtemp(dir)) abort();
    snprintf(path, sizeof path, "%s/tiny.gguf", dir);
    gen_params gp;
    gen_params_default(&gp);
    gp.preset = "tiny";
    gp.vocab = "none";
    gp.n_vocab = N_VOCAB;
    braid_model_params mp = braid_model_default_params();
    mp.use_mmap = 0; /* the file can go at once */
    if (gen_model_write(&gp, path, NULL) != BRAID_OK || braid_model_load(path, &mp, &M) != BRAID_OK) die("model");
    unlink(path);
    rmdir(dir);
    braid_context_params cp = braid_context_default_params();
    cp.n_ctx = 40;
    cp.n_seq_max = N_SEQ;
    cp.n_batch = 8;
    cp.n_threads = 1;
    cp.checkpoint_interval = 4;
    cp.n_rollback = 3;
    cp.checkpoint_budget_bytes = 1u << 20;
    if (braid_context_new(M, &cp, &C) != BRAID_OK) die("context");
    fill();
    const char *seeds = getenv("BRAID_FUZZ_SEEDS");
    if (seeds) {
        write_seeds(seeds);
        exit(0);
    }
    if (braid_state_save(C, &pristine, &n_pristine) != BRAID_OK) die("save");
    return 0;
}

static void check_unchanged(void) {
    void *now;
    size_t n;
    if (braid_state_save(C, &now, &n) != BRAID_OK) die("save");
    if (n != n_pristine || memcmp(now, pristine, n)) die("a refused load changed the context");
    braid_free(now);
}

static void check_memory(const char *after) {
    if (mem_check(C->mem) != BRAID_OK) {
        fprintf(stderr, "fuzz_state_model: broken invariant after %s\n", after);
        die("mem_check");
    }
}

/* What a program does next with a loaded state; refusals (FULL, RANGE) are fine, faults and broken
 * invariants are not. */
static void exercise(const uint8_t *data, size_t size) {
    uint8_t k = size ? data[size - 1] : 0;
    for (int s = 0; s < N_SEQ; s++) {
        int32_t len = braid_seq_len(C, s);
        if (len > 0) {
            (void)braid_seq_truncate(C, s, (int32_t)((k + s) % (uint32_t)(len + 1)));
            check_memory("truncate");
        }
        int32_t src = braid_seq_len(C, (s + 1) % N_SEQ);
        (void)braid_seq_copy(C, (s + 1) % N_SEQ, s, src > 0 ? (int32_t)((k >> 2) % (uint32_t)(src + 1)) : 0);
        check_memory("copy");
        (void)decode_n(s, 1 + (k & 1), (braid_token)(k + s));
        check_memory("decode");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    for (int pass = 0; pass < 2; pass++) {
        memcpy(buf, data, size);
        if (pass) {
            if (size >= 24) memcpy(buf + 16, &M->fingerprint, 8);
            state_reseal(buf, size);
        }
        int32_t targets[2] = {-1, (int32_t)(size % N_SEQ)};
        for (int t = 0; t < 2; t++) {
            braid_status st = targets[t] < 0 ? braid_state_load(C, buf, size) : braid_state_seq_load(C, targets[t], buf, size);
            if (st != BRAID_OK) {
                check_unchanged();
                continue;
            }
            check_memory("load");
            exercise(data, size);
            if (braid_state_load(C, pristine, n_pristine) != BRAID_OK) die("restore");
        }
    }
    free(buf);
    return 0;
}
