/* test_hardening.c — regressions for what an adversarial review of the loaders, the state files and the C API
 * found (issue 19), through the public API on a tiny random-weight qwen35 (gen-model) unless a defect is
 * internal. Each check failed before its fix:
 *  - state files: a re-sealed state (checksums recomputed: they authenticate nothing) with a token id the model
 *    has no embedding row for, or with temporal positions that go backwards, is refused and changes nothing;
 *    a replay refuses such an id even if one got into a history.
 *  - context parameters: each one out of its stated bound is refused with BRAID_E_INVALID naming it and the
 *    bound (n_rollback 2^31 used to be accepted and crash the first state load); a replay longer than n_batch
 *    runs in ubatches of n_batch rows (the forward pass's scratch is sized for n_batch).
 *  - paths: a FIFO (or a directory) given as a model, vocabulary or state file is refused with BRAID_E_IO at
 *    once instead of blocking the thread in open() forever (API and the braid command; an alarm fails the test
 *    if anything blocks).
 *  - a state saved with another model of the same shape (another seed: same names, shapes, types) is refused
 *    with BRAID_E_MISMATCH naming both models (the fingerprint now covers a digest of the weights).
 *  - smaller: a shift by 0 or a division by 1 keeps the rollback buffer and the state exact; image positions
 *    that would overflow are refused (-1) instead of wrapping.
 * Float hyperparameters, ssm.state_size, NaN logits and the prefault of skipped tensors are in
 * test_qwen35_load.c, next to the other load checks. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/alloc.h"
#include "braid.h"
#include "memory/mem_impl.h"
#include "memory_toy.h"
#include "genmodel/genmodel.h"
#include "state_edit.h"
#include "test.h"

#define N_VOCAB 256

static char dir[] = "/tmp/braid_hardening_XXXXXX";

static braid_status write_model(const char *name, uint64_t seed, char *path, size_t cap) {
    snprintf(path, cap, "%s/%s", dir, name);
    gen_params gp;
    gen_params_default(&gp);
    gp.preset = "tiny";
    gp.vocab = "none";
    gp.n_vocab = N_VOCAB;
    gp.seed = seed;
    return gen_model_write(&gp, path, NULL);
}

static braid_context *new_ctx(const braid_model *m) {
    braid_context_params cp = braid_context_default_params();
    cp.n_ctx = 64;
    cp.n_seq_max = 2;
    cp.n_batch = 16;
    cp.n_threads = 1;
    cp.checkpoint_interval = 4;
    cp.n_rollback = 4;
    cp.kv_type = BRAID_TYPE_F32;
    braid_context *c = NULL;
    return braid_context_new(m, &cp, &c) == BRAID_OK ? c : NULL;
}

static braid_status decode_n(braid_context *c, braid_seq_id s, int32_t n, braid_token tok0) {
    braid_token t[32];
    braid_seq_id q[32];
    for (int32_t i = 0; i < n && i < 32; i++) t[i] = (tok0 + i) % N_VOCAB, q[i] = s;
    braid_batch b = {.n_tokens = n < 32 ? n : 32, .token = t, .seq = q};
    return braid_decode(c, &b);
}

/* The whole context's state, to prove a refused call changed nothing. */
static void *snapshot(braid_context *c, size_t *n) {
    void *d = NULL;
    if (braid_state_save(c, &d, n) != BRAID_OK) return NULL;
    return d;
}

static int unchanged(braid_context *c, const void *before, size_t nb) {
    size_t n;
    void *now = snapshot(c, &n);
    int same = now && n == nb && !memcmp(now, before, n);
    braid_free(now);
    return same;
}

/* ---- 1. state files: every field checked against the model and context ---------------------------------- */

static void test_state_fields(const braid_model *m) {
    braid_context *c = new_ctx(m);
    CHECK(c != NULL, "context: %s", braid_last_error());
    if (!c) return;
    CHECK_STATUS(decode_n(c, 0, 10, 5), BRAID_OK);
    void *blob = NULL;
    size_t size = 0;
    CHECK_STATUS(braid_state_seq_save(c, 0, &blob, &size), BRAID_OK);
    if (!blob) goto out;
    size_t nb;
    void *before = snapshot(c, &nb);
    uint64_t hl = 0, cl = 0;
    const size_t hist = state_find_section(blob, size, STATE_SEC_HIST, 0, &hl);
    const size_t cells = state_find_section(blob, size, STATE_SEC_CELLS, 0, &cl);
    const int32_t np = braid_model_n_pos_per_token(m), len = 10;
    CHECK(hist && cells && hl == (uint64_t)len * (4 + 4 * (uint64_t)np), "history section (%llu bytes)", (unsigned long long)hl);
    uint8_t *bad = malloc(size);
    if (!hist || !cells || !bad || !before) goto out2;

    /* token ids the model has no embedding row for (n_vocab read the next tensor; larger ids faulted) */
    const int32_t ids[3] = {N_VOCAB, N_VOCAB + 1000, 1 << 30};
    for (int k = 0; k < 3; k++) {
        memcpy(bad, blob, size);
        memcpy(bad + hist + 4 * 3, &ids[k], 4);
        state_reseal(bad, size);
        CHECK_STATUS(braid_state_seq_load(c, 1, bad, size), BRAID_E_FORMAT);
        CHECK(strstr(braid_last_error(), "token") != NULL, "the reason names the token: %s", braid_last_error());
        CHECK(unchanged(c, before, nb), "a refused state with token %d changed the context", ids[k]);
    }
    /* a negative id other than -1 (an embedding input) */
    memcpy(bad, blob, size);
    memcpy(bad + hist + 4 * 3, &(int32_t){-7}, 4);
    state_reseal(bad, size);
    CHECK_STATUS(braid_state_seq_load(c, 1, bad, size), BRAID_E_FORMAT);

    /* temporal positions that go backwards (input 6 before input 5), with the cell's positions matching the
     * history so that only the order is wrong; one sequence without sharing: cell i is input i */
    memcpy(bad, blob, size);
    const int32_t back = 2;
    memcpy(bad + hist + 4 * (size_t)len + 4 * (size_t)(6 * np), &back, 4);
    memcpy(bad + cells + 8 * (size_t)(6 * np), &back, 4);
    state_reseal(bad, size);
    CHECK_STATUS(braid_state_seq_load(c, 1, bad, size), BRAID_E_FORMAT);
    CHECK(strstr(braid_last_error(), "position") != NULL, "the reason names the position: %s", braid_last_error());
    CHECK(unchanged(c, before, nb), "a refused state with positions going back changed the context");

    /* the untouched blob re-sealed still loads, and truncate / copy / decode on it work */
    memcpy(bad, blob, size);
    state_reseal(bad, size);
    CHECK_STATUS(braid_state_seq_load(c, 1, bad, size), BRAID_OK);
    CHECK_STATUS(braid_seq_truncate(c, 1, 3), BRAID_OK);
    CHECK_STATUS(braid_seq_copy(c, 0, 1, 7), BRAID_OK);
    CHECK_STATUS(decode_n(c, 1, 2, 9), BRAID_OK);
    /* an edit cannot make positions go backwards either (a state saved after it would be refused) */
    CHECK_STATUS(braid_seq_shift_pos(c, 0, 2, 5, 10), BRAID_E_RANGE);
    CHECK_STATUS(braid_seq_div_pos(c, 0, 5, 8, 3), BRAID_E_RANGE);
    CHECK_STATUS(braid_seq_shift_pos(c, 0, 2, 10, 10), BRAID_OK);
out2:
    free(bad);
    braid_free(before);
out:
    braid_free(blob);
    braid_context_free(c);
}

/* The replay guard inside the memory: a history that somehow holds an id >= n_vocab is never run. */
static void test_replay_guard(void) {
    static const toy_layout t = {.name = "guard", .n_seq = 1, .n_pos = 1, .n_ctx = 16, .n_attn = 1, .n_rs = 1,
                                 .interval = 0, .rollback = 0, .n_ubatch = 4, .kv_type = BRAID_TYPE_F32,
                                 .nk = {2}, .nv = {2}, .nconv = {2}, .nssm = {2}, .budget_blocks = 4};
    mem_params p = toy_params(&t);
    p.n_vocab = 50;
    mem *m = NULL;
    CHECK_STATUS(mem_new(&p, &m), BRAID_OK);
    if (!m) return;
    braid_token tok[2] = {10, 50};
    braid_batch b = {.n_tokens = 2, .token = tok};
    mem_batch *mb = NULL;
    CHECK_STATUS(mem_batch_begin(m, &b, 4, &mb), BRAID_E_RANGE); /* the memory checks ids itself too */
    CHECK_STATUS(toy_decode(&t, m, 0, 6, 1), BRAID_OK);
    m->hist[0].tok[2] = 4000; /* what a state load used to let in */
    mem_batch *rb = NULL;
    CHECK_STATUS(mem_seq_truncate(m, 0, 4, &rb), BRAID_E_FORMAT);
    CHECK(rb == NULL && mem_seq_len(m, 0) == 6, "a refused replay changed the sequence");
    m->hist[0].tok[2] = 3;
    CHECK_STATUS(mem_seq_truncate(m, 0, 4, &rb), BRAID_OK);
    if (rb) CHECK_STATUS(toy_run(&t, m, rb, -1), BRAID_OK);
    mem_free(m);
}

/* ---- 2. context parameters ------------------------------------------------------------------------------ */

static void expect_param(const braid_model *m, const char *name, braid_context_params cp, braid_status want,
                         const char *bound) {
    braid_context *c = NULL;
    braid_status st = braid_context_new(m, &cp, &c);
    CHECK(st == want && (st == BRAID_OK) == (c != NULL), "%s: got %s, want %s (%s)", name, braid_status_name(st),
          braid_status_name(want), braid_last_error());
    if (st != BRAID_OK) {
        CHECK(strstr(braid_last_error(), name) != NULL, "%s: the reason names it: %s", name, braid_last_error());
        if (bound) CHECK(strstr(braid_last_error(), bound) != NULL, "%s: the reason states the bound %s: %s", name,
                         bound, braid_last_error());
    }
    braid_context_free(c);
}

static void test_context_params(const braid_model *m) {
    const braid_context_params d = braid_context_default_params();
    braid_context_params p;
#define PARAM(field, value, want, bound)                                                                        \
    do {                                                                                                       \
        p = d;                                                                                                 \
        p.field = value;                                                                                       \
        expect_param(m, #field, p, want, bound);                                                               \
    } while (0)
    PARAM(n_rollback, 1u << 31, BRAID_E_INVALID, "1024");
    PARAM(n_rollback, UINT32_MAX, BRAID_E_INVALID, "1024");
    PARAM(n_rollback, BRAID_MAX_ROLLBACK, BRAID_OK, NULL);
    PARAM(checkpoint_interval, 1u << 31, BRAID_E_INVALID, "1073741824");
    PARAM(checkpoint_interval, UINT32_MAX, BRAID_E_INVALID, "1073741824");
    PARAM(n_ctx, BRAID_MAX_CTX + 1, BRAID_E_INVALID, "67108864");
    PARAM(n_ctx, 0, BRAID_E_INVALID, "67108864");
    PARAM(n_seq_max, 0, BRAID_E_INVALID, "256");
    PARAM(n_seq_max, 257, BRAID_E_INVALID, "256");
    PARAM(n_batch, 0, BRAID_E_INVALID, "65536");
    PARAM(n_batch, 65537, BRAID_E_INVALID, "65536");
    PARAM(n_threads, 257, BRAID_E_INVALID, "256");
    PARAM(n_threads, UINT32_MAX, BRAID_E_INVALID, "256");
    PARAM(kv_type, BRAID_TYPE_Q8_0, BRAID_E_UNSUPPORTED, NULL);
    PARAM(checkpoint_budget_bytes, UINT64_MAX, BRAID_OK, NULL);
#undef PARAM

    /* the largest n_rollback with a state load (2^31 crashed here) */
    p = d;
    p.n_ctx = 64;
    p.n_rollback = BRAID_MAX_ROLLBACK;
    p.n_threads = 1;
    braid_context *c = NULL;
    CHECK_STATUS(braid_context_new(m, &p, &c), BRAID_OK);
    if (c) {
        CHECK_STATUS(decode_n(c, 0, 6, 1), BRAID_OK);
        void *blob = NULL;
        size_t n = 0;
        CHECK_STATUS(braid_state_save(c, &blob, &n), BRAID_OK);
        if (blob) CHECK_STATUS(braid_state_load(c, blob, n), BRAID_OK);
        CHECK_STATUS(braid_seq_truncate(c, 0, 2), BRAID_OK);
        braid_free(blob);
        braid_context_free(c);
    }

    /* a replay of 40 inputs in a context with n_batch 8: the same logits (to rounding) as a fresh decode */
    p = d;
    p.n_ctx = 64;
    p.n_batch = 8;
    p.n_threads = 1;
    p.checkpoint_interval = 0;
    p.n_rollback = 0;
    p.kv_type = BRAID_TYPE_F32;
    braid_context *a = NULL, *b = NULL;
    CHECK_STATUS(braid_context_new(m, &p, &a), BRAID_OK);
    CHECK_STATUS(braid_context_new(m, &p, &b), BRAID_OK);
    if (a && b) {
        for (int i = 0; i < 6; i++) CHECK_STATUS(decode_n(a, 0, 8, 1 + 8 * i), BRAID_OK);
        CHECK_STATUS(braid_seq_truncate(a, 0, 40), BRAID_OK); /* replays inputs 0..39 from the zero state */
        for (int i = 0; i < 5; i++) CHECK_STATUS(decode_n(b, 0, 8, 1 + 8 * i), BRAID_OK);
        CHECK_STATUS(decode_n(a, 0, 1, 41), BRAID_OK);
        CHECK_STATUS(decode_n(b, 0, 1, 41), BRAID_OK);
        const float *la = braid_logits(a, 0), *lb = braid_logits(b, 0);
        double worst = la && lb ? 0 : INFINITY;
        for (int i = 0; la && lb && i < N_VOCAB; i++) {
            double e = fabs((double)la[i] - lb[i]) / (fabs((double)lb[i]) + 1e-3);
            if (!(e <= worst)) worst = e;
        }
        CHECK(worst < 1e-3, "logits after a replay longer than n_batch: worst relative error %.3e", worst);
    }
    braid_context_free(a);
    braid_context_free(b);
}

/* ---- 4. paths that are not regular files -------------------------------------------------------------- */

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "FAIL test_hardening: a call blocked on a FIFO (alarm)\n";
    if (write(2, msg, sizeof msg - 1) < 0) _exit(3);
    _exit(2);
}

static void test_not_regular(const braid_model *m) {
    char fifo[700];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
    signal(SIGALRM, on_alarm);
    alarm(60);
    const char *paths[2] = {fifo, dir};
    for (int k = 0; k < 2; k++) {
        braid_model *x = NULL;
        braid_model_params mp = braid_model_default_params();
        CHECK_STATUS(braid_model_load(paths[k], &mp, &x), BRAID_E_IO);
        CHECK(x == NULL && strstr(braid_last_error(), "not a regular file"), "model from %s: %s", paths[k],
              braid_last_error());
        mp.use_mmap = 0;
        CHECK_STATUS(braid_model_load(paths[k], &mp, &x), BRAID_E_IO);
        mp.use_mmap = 1;
        mp.vocab_only = 1;
        CHECK_STATUS(braid_model_load(paths[k], &mp, &x), BRAID_E_IO);
        braid_context *c = new_ctx(m);
        if (c) {
            CHECK_STATUS(braid_state_load_file(c, paths[k]), BRAID_E_IO);
            CHECK_STATUS(braid_state_seq_load_file(c, 0, paths[k]), BRAID_E_IO);
            CHECK(strstr(braid_last_error(), "not a regular file"), "state from %s: %s", paths[k], braid_last_error());
        }
        braid_context_free(c);
    }
    /* the braid command: gguf, tokenize and run given the FIFO as their model */
    const char *build = test_env("BRAID_BUILD_DIR", ".");
    const char *cmds[3] = {"gguf %s", "tokenize -m %s -t hello", "run -m %s -p hello -n 1"};
    char exe[700];
    snprintf(exe, sizeof exe, "%s/braid", build);
    CHECK(access(exe, X_OK) == 0, "the braid command at %s (BRAID_BUILD_DIR)", exe);
    for (int k = 0; k < 3; k++) {
        char args[800], cmd[2048];
        snprintf(args, sizeof args, cmds[k], fifo);
        snprintf(cmd, sizeof cmd, "%s/braid %s >/dev/null 2>&1", build, args);
        int st = system(cmd);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) != 0 && WEXITSTATUS(st) < 126, "braid %s: exit status %d", args, st);
    }
    alarm(0);
    unlink(fifo);
}

/* ---- 5. a model of the same shape with other weights --------------------------------------------------- */

/* The description a state carries (header bytes 28 .. 28 + desc_len). */
static void blob_desc(const void *blob, size_t n, char *out, size_t cap) {
    uint32_t dl = 0;
    out[0] = 0;
    if (n < 28) return;
    memcpy(&dl, (const uint8_t *)blob + 24, 4);
    if (dl >= cap || 28 + (size_t)dl > n) return;
    memcpy(out, (const uint8_t *)blob + 28, dl);
    out[dl] = 0;
}

static void test_other_weights(const braid_model *a) {
    char path[600];
    CHECK_STATUS(write_model("b.gguf", 2, path, sizeof path), BRAID_OK);
    braid_model *b = NULL;
    CHECK_STATUS(braid_model_load(path, NULL, &b), BRAID_OK);
    unlink(path);
    braid_context *ca = new_ctx(a), *cb = b ? new_ctx(b) : NULL;
    CHECK(ca && cb, "contexts");
    if (ca && cb) {
        CHECK_STATUS(decode_n(ca, 0, 5, 3), BRAID_OK);
        CHECK_STATUS(decode_n(cb, 0, 2, 3), BRAID_OK);
        void *sa = NULL, *sb = NULL;
        size_t na = 0, nb = 0;
        CHECK_STATUS(braid_state_save(ca, &sa, &na), BRAID_OK);
        CHECK_STATUS(braid_state_save(cb, &sb, &nb), BRAID_OK);
        char da[256], db[256];
        blob_desc(sa, na, da, sizeof da);
        blob_desc(sb, nb, db, sizeof db);
        CHECK(strcmp(da, db) != 0, "the descriptions tell the models apart: '%s' / '%s'", da, db);
        CHECK_STATUS(braid_state_load(cb, sa, na), BRAID_E_MISMATCH);
        CHECK(*da && *db && strstr(braid_last_error(), da) && strstr(braid_last_error(), db),
              "the refusal names both models ('%s', '%s'): %s", da, db, braid_last_error());
        CHECK(braid_seq_len(cb, 0) == 2, "a refused state changed the context");
        void *seq = NULL;
        size_t ns = 0;
        CHECK_STATUS(braid_state_seq_save(ca, 0, &seq, &ns), BRAID_OK);
        CHECK_STATUS(braid_state_seq_load(cb, 1, seq, ns), BRAID_E_MISMATCH);
        CHECK_STATUS(braid_state_seq_load(ca, 1, seq, ns), BRAID_OK); /* its own model still takes it */
        braid_free(seq);
        braid_free(sa);
        braid_free(sb);
    }
    braid_context_free(ca);
    braid_context_free(cb);
    braid_model_free(b);
}

/* ---- 7. edits that move nothing; image positions at the limit ------------------------------------------- */

static void test_noop_edits(void) {
    static const toy_layout t = {.name = "noop", .n_seq = 1, .n_pos = 1, .n_ctx = 32, .n_attn = 1, .n_rs = 1,
                                 .interval = 0, .rollback = 4, .n_ubatch = 8, .kv_type = BRAID_TYPE_F32,
                                 .nk = {2}, .nv = {2}, .nconv = {2}, .nssm = {2}, .budget_blocks = 4};
    mem_params p = toy_params(&t);
    mem *m = NULL;
    CHECK_STATUS(mem_new(&p, &m), BRAID_OK);
    if (!m) return;
    CHECK_STATUS(toy_decode(&t, m, 0, 6, 1), BRAID_OK);
    CHECK_STATUS(toy_decode(&t, m, 0, 3, 20), BRAID_OK); /* a decode of 3 <= n_rollback: a rollback buffer */
    int32_t lo, hi;
    mem_seq_rollback_range(m, 0, &lo, &hi);
    CHECK(lo == 6 && hi == 9, "rollback [%d, %d]", lo, hi);
    CHECK_STATUS(mem_seq_shift_pos(m, 0, 0, 9, 0), BRAID_OK);
    CHECK_STATUS(mem_seq_div_pos(m, 0, 0, 9, 1), BRAID_OK);
    mem_seq_rollback_range(m, 0, &lo, &hi);
    CHECK(lo == 6 && hi == 9, "a shift by 0 / division by 1 dropped the rollback buffer: [%d, %d]", lo, hi);
    CHECK(mem_seq_approx_from(m, 0) == -1, "a shift by 0 marked the state inexact (%d)", mem_seq_approx_from(m, 0));
    CHECK(mem_kv_n_rotations_pending(m) == 0, "a shift by 0 left K rows to re-rotate");
    mem_batch *rb = NULL;
    CHECK_STATUS(mem_seq_truncate(m, 0, 7, &rb), BRAID_OK);
    CHECK(rb == NULL, "truncation into the rollback buffer needed a replay");
    if (rb) mem_batch_abort(m, rb);
    mem_free(m);

    braid_pos out[4 * 6];
    CHECK(braid_image_positions(NULL, 10, 3, 2, out) == 13 && out[4 * 5 + 1] == 11 && out[4 * 5 + 2] == 12,
          "a 3x2 image at 10");
    CHECK(braid_image_positions(NULL, INT32_MAX - 1, 3, 2, out) == -1, "an image at INT32_MAX - 1 wrapped");
    CHECK(braid_image_positions(NULL, (1 << 29) - 1, 3, 2, out) == -1, "an image past the last position");
    CHECK(braid_image_positions(NULL, -5, 3, 2, out) == -1, "an image at a negative position");
    CHECK(braid_image_positions(NULL, 0, 0, 2, out) == -1 && braid_image_positions(NULL, 0, 2, 2, NULL) == -1,
          "an empty image or no output");
    /* accessors on a NULL model answer instead of faulting */
    CHECK(!strcmp(braid_model_arch(NULL), "") && braid_model_n_vocab(NULL) == 0 && braid_model_n_embd(NULL) == 0 &&
              braid_model_n_layer(NULL) == 0 && !braid_model_has_attention(NULL) && !braid_model_has_recurrent(NULL),
          "accessors on NULL");
}

int main(void) {
    if (!mkdtemp(dir)) return 1;
    char path[600];
    CHECK_STATUS(write_model("a.gguf", 1, path, sizeof path), BRAID_OK);
    braid_model *m = NULL;
    CHECK_STATUS(braid_model_load(path, NULL, &m), BRAID_OK);
    if (m) test_state_fields(m);
    if (m) test_context_params(m);
    if (m) test_not_regular(m);
    if (m) test_other_weights(m);
    test_replay_guard();
    test_noop_edits();
    braid_model_free(m);
    unlink(path);
    rmdir(dir);
    TEST_MAIN_END();
}
