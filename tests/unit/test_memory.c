/* test_memory.c — directed tests of the memory: the three seed bugs of design.md §1 as regressions, failure
 * injection (every allocation of every operation, short writes, truncated and corrupted state), batch
 * validation and splitting, free-cell reuse, and the checkpoint eviction shape. The randomized test is
 * test_memory_random.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "memory_ref.h"
#include "test.h"

#define FP 0x5EEDu

static const toy_layout HYB = {.name = "hybrid", .n_seq = 4, .n_pos = 4, .n_embd = 2, .n_ctx = 64, .n_attn = 2,
                               .n_rs = 2, .interval = 4, .rollback = 4, .n_ubatch = 3, .kv_type = BRAID_TYPE_F16,
                               .nk = {4, 3}, .nv = {3, 2}, .nconv = {3, 2}, .nssm = {5, 4}, .budget_blocks = 5};

static mem *new_mem(const toy_layout *t) {
    mem_params p = toy_params(t);
    mem *m = NULL;
    braid_status st = mem_new(&p, &m);
    CHECK(st == BRAID_OK, "mem_new: %s", braid_last_error());
    return m;
}

static void *save(const mem *m, int32_t s, size_t *n) {
    void *d = NULL;
    braid_status st = mem_state_save_alloc(m, s, FP, "toy model", &d, n);
    CHECK(st == BRAID_OK, "save: %s", braid_last_error());
    return d;
}

static int same_state(const mem *a, const mem *b) {
    size_t na, nb;
    void *x = save(a, -1, &na), *y = save(b, -1, &nb);
    int eq = x && y && na == nb && !memcmp(x, y, na);
    bd_free(x);
    bd_free(y);
    return eq;
}

/* Decodes n tokens (ids from tok0) into s with default positions; returns the status. */
static braid_status decode_tokens(const toy_layout *t, mem *m, int32_t s, int32_t n, int32_t tok0, int32_t n_ub) {
    braid_token tok[64];
    braid_seq_id sid[64];
    for (int32_t i = 0; i < n; i++) tok[i] = tok0 + i, sid[i] = s;
    braid_batch b = {.n_tokens = n, .token = tok, .seq = sid};
    mem_batch *mb;
    BD_TRY(mem_batch_begin(m, &b, n_ub, &mb));
    return toy_run(t, m, mb, -1);
}

/* The live state of s equals a fresh recompute of its history (by order). */
static int live_is_fresh(const toy_layout *t, const mem *m, int32_t s) {
    ref_mem r;
    ref_init(&r, t, mem_rs_block_floats(m));
    for (int32_t i = 0; i < mem_seq_len(m, s); i++) {
        braid_token tok;
        const braid_pos *pos;
        const float *e;
        if (mem_seq_input(m, s, i, &tok, &pos, &e) != BRAID_OK) return 0;
        ref_push(&r, m, 0, tok, e, pos);
    }
    const float *live = mem_rs_live(m, s);
    int eq = 1;
    for (size_t i = 0; i < r.bf; i++) eq &= (live ? live[i] : 0.0f) == ref_lin(&r, 0, r.seq[0].len)[i];
    ref_free(&r);
    return eq;
}

/* ---- seed bug (a): an M-RoPE image decodes with no warning; recurrent continuity follows order ---------- */
static void test_mrope_image(void) {
    const toy_layout *t = &HYB;
    mem *m = new_mem(t);
    unsigned long warn0 = bd_log_warn_count();
    CHECK_STATUS(decode_tokens(t, m, 0, 5, 10, 8), BRAID_OK);
    CHECK(mem_seq_next_pos(m, 0) == 5, "next pos after 5 tokens: %d", mem_seq_next_pos(m, 0));
    /* A 3 x 2 image at t0 = 5: one temporal position for all six rows, (y, x) row-major. */
    int32_t nx = 3, ny = 2, n = nx * ny;
    float embd[6 * 2];
    braid_pos pos[6 * 4];
    for (int32_t i = 0; i < n; i++) {
        embd[2 * i] = (float)(i * 3), embd[2 * i + 1] = 1;
        pos[4 * i] = 5, pos[4 * i + 1] = 5 + i / nx, pos[4 * i + 2] = 5 + i % nx, pos[4 * i + 3] = 0;
    }
    braid_batch img = {.n_tokens = n, .embd = embd, .pos = pos};
    mem_batch *mb;
    CHECK_STATUS(mem_batch_begin(m, &img, 4, &mb), BRAID_OK); /* two ubatches: continuity across them */
    CHECK(mem_batch_n_ubatch(mb) == 2, "image in %d ubatches", mem_batch_n_ubatch(mb));
    CHECK_STATUS(toy_run(t, m, mb, -1), BRAID_OK);
    CHECK(mem_seq_next_pos(m, 0) == 5 + 3, "text resumes at t0 + max(nx, ny): %d", mem_seq_next_pos(m, 0));
    CHECK_STATUS(decode_tokens(t, m, 0, 3, 50, 8), BRAID_OK);
    const braid_pos *p;
    CHECK_STATUS(mem_seq_input(m, 0, 11, NULL, &p, NULL), BRAID_OK);
    CHECK(p[0] == 8 && p[1] == 8 && p[2] == 8 && p[3] == 0, "first text position after the image: %d %d %d %d", p[0],
          p[1], p[2], p[3]);
    CHECK(mem_seq_len(m, 0) == 14, "length counts inputs, not positions: %d", mem_seq_len(m, 0));
    CHECK(bd_log_warn_count() == warn0, "no warnings (%lu)", bd_log_warn_count() - warn0);
    CHECK(live_is_fresh(t, m, 0), "recurrent state = fresh recompute in input order");
    CHECK(mem_rs_checkpoint(m, 0, 5) != NULL, "checkpoint before the image span");
    CHECK(mem_rs_checkpoint(m, 0, 11) != NULL, "checkpoint after the image span");
    /* The same inputs decoded in one ubatch give the same bits. */
    mem *m2 = new_mem(t);
    CHECK_STATUS(decode_tokens(t, m2, 0, 5, 10, 64), BRAID_OK);
    CHECK_STATUS(mem_batch_begin(m2, &img, 64, &mb), BRAID_OK);
    CHECK_STATUS(toy_run(t, m2, mb, -1), BRAID_OK);
    CHECK_STATUS(decode_tokens(t, m2, 0, 3, 50, 64), BRAID_OK);
    CHECK(mem_rs_live(m, 0) && mem_rs_live(m2, 0) &&
              !memcmp(mem_rs_live(m, 0), mem_rs_live(m2, 0), mem_rs_block_floats(m) * sizeof(float)),
          "ubatch shape does not change the state");
    mem_free(m2);
    mem_free(m);
}

/* ---- seed bug (b): remove from the front, truncate via checkpoint + replay, refusals change nothing ----- */
static void test_remove_truncate_refuse(void) {
    const toy_layout *t = &HYB;
    mem *m = new_mem(t);
    CHECK_STATUS(decode_tokens(t, m, 0, 22, 100, 5), BRAID_OK);
    CHECK_STATUS(decode_tokens(t, m, 1, 6, 300, 5), BRAID_OK);
    CHECK_STATUS(decode_tokens(t, m, 1, 1, 306, 5), BRAID_OK); /* the rollback buffer now covers only [6, 7] */
    /* front removal of a hybrid sequence: attention drops cells, the recurrent state keeps its summary */
    CHECK_STATUS(mem_seq_remove(m, 0, 0, 4), BRAID_OK);
    CHECK(mem_seq_len(m, 0) == 18, "length after remove: %d", mem_seq_len(m, 0));
    CHECK(mem_seq_approx_from(m, 0) == 0, "approximation reported from index 0: %d", mem_seq_approx_from(m, 0));
    braid_token tok;
    CHECK_STATUS(mem_seq_input(m, 0, 0, &tok, NULL, NULL), BRAID_OK);
    CHECK(tok == 104, "first input after remove is old input 4: %d", tok);
    CHECK_STATUS(mem_check(m), BRAID_OK);
    /* truncation from the tail: no rollback or checkpoint at 9 -> replay from the checkpoint below */
    mem_batch *rb = NULL;
    CHECK_STATUS(mem_seq_truncate(m, 1, 3, &rb), BRAID_OK);
    CHECK(rb != NULL, "truncate to 3 of a 7-input sequence with checkpoint at 4 needs a replay");
    if (rb) {
        int32_t s, from, to;
        mem_batch_replay_info(rb, &s, &from, &to);
        CHECK(s == 1 && from == 0 && to == 3, "replay [%d, %d) of %d", from, to, s);
        mem_batch *other;
        CHECK_STATUS(mem_seq_truncate(m, 0, 1, &other), BRAID_E_INVALID); /* a batch is pending */
        CHECK_STATUS(toy_run(t, m, rb, -1), BRAID_OK);
    }
    CHECK(mem_seq_len(m, 1) == 3 && live_is_fresh(t, m, 1), "truncated sequence equals a fresh decode");
    int32_t ck[16], nck = mem_seq_checkpoints(m, 0, ck, 16);
    CHECK(nck > 0, "sequence 0 has checkpoints");
    CHECK_STATUS(mem_seq_truncate(m, 0, 2, &rb), BRAID_OK); /* below the removal point: exact again */
    if (rb) CHECK_STATUS(toy_run(t, m, rb, -1), BRAID_OK);
    CHECK(mem_seq_approx_from(m, 0) == -1 && live_is_fresh(t, m, 0), "truncation below the removal is exact");
    CHECK_STATUS(decode_tokens(t, m, 0, 10, 500, 4), BRAID_OK);
    /* refused operations report why and change nothing */
    size_t n0, n1;
    void *before = save(m, -1, &n0);
    CHECK_STATUS(mem_seq_remove(m, 0, 5, mem_seq_len(m, 0)), BRAID_E_RANGE);
    CHECK(strstr(braid_last_error(), "truncate") != NULL, "reason names the way out: %s", braid_last_error());
    CHECK_STATUS(mem_seq_shift_pos(m, 0, 0, 3, -100), BRAID_E_RANGE);
    CHECK_STATUS(mem_seq_div_pos(m, 0, 0, 3, 0), BRAID_E_RANGE);
    CHECK_STATUS(mem_seq_copy(m, 0, 0, 2, &rb), BRAID_E_INVALID);
    CHECK_STATUS(mem_seq_truncate(m, 7, 0, &rb), BRAID_E_RANGE);
    CHECK_STATUS(mem_seq_truncate(m, 0, 99, &rb), BRAID_E_RANGE);
    CHECK_STATUS(mem_seq_remove(m, 0, 3, 2), BRAID_E_RANGE);
    CHECK_STATUS(mem_seq_copy(m, 0, 1, 99, &rb), BRAID_E_RANGE);
    void *after = save(m, -1, &n1);
    CHECK(before && after && n0 == n1 && !memcmp(before, after, n0), "refusals changed nothing");
    bd_free(before);
    bd_free(after);
    mem_free(m);
}

/* ---- seed bug (c): save with a pending rollback and after a truncation; load fresh: same bytes ---------- */
static void test_save_pending_rollback(void) {
    const toy_layout *t = &HYB;
    mem *m = new_mem(t);
    CHECK_STATUS(decode_tokens(t, m, 0, 10, 1, 16), BRAID_OK);
    CHECK_STATUS(decode_tokens(t, m, 2, 7, 40, 16), BRAID_OK);
    mem_batch *rb;
    CHECK_STATUS(mem_seq_copy(m, 0, 1, 6, &rb), BRAID_OK); /* shared cells */
    if (rb) CHECK_STATUS(toy_run(t, m, rb, -1), BRAID_OK);
    CHECK_STATUS(decode_tokens(t, m, 0, 4, 900, 16), BRAID_OK);            /* 4 speculative drafts */
    int32_t lo, hi;
    mem_seq_rollback_range(m, 0, &lo, &hi);
    CHECK(lo == 10 && hi == 14, "rollback covers [10, 14]: [%d, %d]", lo, hi);
    CHECK_STATUS(mem_seq_shift_pos(m, 2, 2, 7, 3), BRAID_OK); /* stale K rows pending rotation */
    size_t na, nb;
    void *a = save(m, -1, &na);
    mem *m2 = new_mem(t);
    CHECK_STATUS(mem_state_load(m2, -1, FP, a, na), BRAID_OK);
    void *b = save(m2, -1, &nb);
    CHECK(a && b && na == nb && !memcmp(a, b, na), "save during a pending rollback: same bytes after load");
    bd_free(a);
    bd_free(b);
    mem_seq_rollback_range(m2, 0, &lo, &hi);
    CHECK(lo == 10 && hi == 14, "rollback survives save/load: [%d, %d]", lo, hi);
    /* verify keeps 2 drafts on both: a rollback (no replay), identical results */
    CHECK_STATUS(mem_seq_truncate(m, 0, 12, &rb), BRAID_OK);
    CHECK(rb == NULL, "rollback, no replay");
    CHECK_STATUS(mem_seq_truncate(m2, 0, 12, &rb), BRAID_OK);
    CHECK(rb == NULL, "rollback after load, no replay");
    CHECK(same_state(m, m2), "same state after rollback on the original and the loaded copy");
    /* after a truncation with replay */
    CHECK_STATUS(mem_seq_truncate(m, 0, 7, &rb), BRAID_OK);
    if (rb) CHECK_STATUS(toy_run(t, m, rb, -1), BRAID_OK);
    a = save(m, -1, &na);
    mem *m3 = new_mem(t);
    CHECK_STATUS(mem_state_load(m3, -1, FP, a, na), BRAID_OK);
    b = save(m3, -1, &nb);
    CHECK(a && b && na == nb && !memcmp(a, b, na), "save after a truncation: same bytes after load");
    bd_free(a);
    bd_free(b);
    /* a sequence state moves to another sequence and back */
    a = save(m, 0, &na);
    CHECK_STATUS(mem_state_load(m3, 3, FP, a, na), BRAID_OK);
    b = save(m3, 3, &nb);
    CHECK(a && b && na == nb && !memcmp(a, b, na), "sequence state loaded into another sequence: same bytes");
    bd_free(a);
    bd_free(b);
    {
        toy_layout t2 = HYB;
        t2.rollback = 2;
        mem *m4 = new_mem(&t2);
        mem *m5 = new_mem(t);
        CHECK_STATUS(decode_tokens(t, m5, 0, 6, 1, 16), BRAID_OK);
        CHECK_STATUS(decode_tokens(t, m5, 0, 4, 20, 16), BRAID_OK); /* rollback [6, 10] */
        a = save(m5, 0, &na);
        CHECK_STATUS(mem_state_load(m4, 1, FP, a, na), BRAID_OK);
        mem_seq_rollback_range(m4, 1, &lo, &hi);
        CHECK(lo == 8 && hi == 10, "a longer rollback buffer is cut to the last 2 states: [%d, %d]", lo, hi);
        CHECK(mem_rs_rollback(m4, 1, 8) && !memcmp(mem_rs_rollback(m4, 1, 8), mem_rs_rollback(m5, 0, 8),
                                                   mem_rs_block_floats(m4) * sizeof(float)), "the kept states are the right ones");
        bd_free(a);
        mem_free(m4);
        mem_free(m5);
    }
    CHECK_STATUS(mem_state_load(m3, -1, FP ^ 1, "x", 1), BRAID_E_FORMAT);
    a = save(m, -1, &na);
    CHECK_STATUS(mem_state_load(m3, -1, FP ^ 1, a, na), BRAID_E_MISMATCH);
    CHECK(strstr(braid_last_error(), "toy model") != NULL, "mismatch names the saved model: %s", braid_last_error());
    CHECK_STATUS(mem_state_load(m3, 0, FP, a, na), BRAID_E_MISMATCH); /* whole state into a sequence */
    bd_free(a);
    mem_free(m3);
    mem_free(m2);
    mem_free(m);
}

/* ---- failure injection -------------------------------------------------------------------------------- */

typedef braid_status (*inj_op)(mem *m, const void *arg);
/* A copy takes the source's checkpoints, so truncating the copy below the copy point restores from one instead
 * of replaying from 0; the restored state is the one a fresh decode of those inputs gives. Also through a
 * copy that itself needs a replay. */
static void test_copy_keeps_checkpoints(void) {
    const toy_layout *t = &HYB;
    mem *m = new_mem(t), *fresh = new_mem(t);
    if (!m || !fresh) return;
    CHECK_STATUS(decode_tokens(t, m, 0, 10, 100, 3), BRAID_OK);
    int32_t ck[16], n_ck = mem_seq_checkpoints(m, 0, ck, 16);
    CHECK(n_ck == 2 && ck[0] == 4 && ck[1] == 8, "source checkpoints: %d", n_ck);
    mem_batch *rb = NULL;
    CHECK_STATUS(mem_seq_copy(m, 0, 1, 10, &rb), BRAID_OK);
    CHECK(rb == NULL, "copy of the whole sequence needs no replay");
    int32_t ck1[16], n_ck1 = mem_seq_checkpoints(m, 1, ck1, 16);
    CHECK(n_ck1 == 2 && ck1[0] == 4 && ck1[1] == 8, "the copy has the source's checkpoints (%d)", n_ck1);
    CHECK_STATUS(mem_seq_truncate(m, 1, 8, &rb), BRAID_OK);
    CHECK(rb == NULL, "truncating the copy to a checkpoint needs no replay");
    if (rb) mem_batch_abort(m, rb);
    CHECK_STATUS(decode_tokens(t, fresh, 0, 8, 100, 3), BRAID_OK);
    size_t nb = mem_rs_block_floats(m) * sizeof(float);
    CHECK(!memcmp(mem_rs_live(m, 1), mem_rs_live(fresh, 0), nb), "restored state equals a fresh decode");
    /* A copy to index 6 replays from the checkpoint at 4 and takes that checkpoint along. */
    CHECK_STATUS(mem_seq_copy(m, 0, 2, 6, &rb), BRAID_OK);
    CHECK(rb != NULL, "copy to 6 replays");
    if (rb) {
        int32_t rs_, from, to;
        mem_batch_replay_info(rb, &rs_, &from, &to);
        CHECK(rs_ == 2 && from == 4 && to == 6, "replay from the checkpoint: %d..%d", from, to);
        CHECK_STATUS(toy_run(t, m, rb, -1), BRAID_OK);
    }
    int32_t ck2[16], n_ck2 = mem_seq_checkpoints(m, 2, ck2, 16);
    CHECK(n_ck2 == 1 && ck2[0] == 4, "the replayed copy has the checkpoint at 4 (%d)", n_ck2);
    /* An aborted copy replay changes nothing. */
    size_t n0;
    void *before = save(m, -1, &n0);
    CHECK_STATUS(mem_seq_copy(m, 0, 3, 7, &rb), BRAID_OK);
    CHECK(rb != NULL, "copy to 7 replays");
    if (rb) CHECK_STATUS(toy_run(t, m, rb, 0), BRAID_E_CANCELLED);
    size_t n1;
    void *after = save(m, -1, &n1);
    CHECK(before && after && n0 == n1 && !memcmp(before, after, n0), "aborted copy replay left the memory as it was");
    bd_free(before);
    bd_free(after);
    mem_free(m);
    mem_free(fresh);
}

static uint64_t inj_sites, inj_ops;

static braid_status op_decode_mix(mem *m, const void *arg) {
    (void)arg;
    braid_token tok[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    braid_seq_id sid[12] = {0, 1, 0, 2, 0, 1, 0, 3, 0, 0, 1, 0};
    braid_batch b = {.n_tokens = 12, .token = tok, .seq = sid};
    mem_batch *mb;
    BD_TRY(mem_batch_begin(m, &b, 5, &mb));
    return toy_run(&HYB, m, mb, -1);
}
static braid_status op_decode_embd(mem *m, const void *arg) {
    (void)arg;
    float e[6 * 2] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    braid_seq_id sid[6] = {1, 1, 1, 2, 2, 2};
    braid_batch b = {.n_tokens = 6, .embd = e, .seq = sid};
    mem_batch *mb;
    BD_TRY(mem_batch_begin(m, &b, 4, &mb));
    return toy_run(&HYB, m, mb, -1);
}
static braid_status op_truncate(mem *m, const void *arg) {
    const int32_t *a = arg;
    mem_batch *rb;
    BD_TRY(mem_seq_truncate(m, a[0], a[1], &rb));
    return rb ? toy_run(&HYB, m, rb, -1) : BRAID_OK;
}
static braid_status op_copy(mem *m, const void *arg) {
    const int32_t *a = arg;
    mem_batch *rb;
    BD_TRY(mem_seq_copy(m, a[0], a[1], a[2], &rb));
    return rb ? toy_run(&HYB, m, rb, -1) : BRAID_OK;
}
static braid_status op_checkpoint(mem *m, const void *arg) { return mem_seq_checkpoint(m, *(const int32_t *)arg); }
static braid_status op_shift(mem *m, const void *arg) {
    (void)arg;
    return mem_seq_shift_pos(m, 0, 0, mem_seq_len(m, 0), 2); /* positions never decrease: a whole suffix */
}
static braid_status op_remove(mem *m, const void *arg) {
    (void)arg;
    return mem_seq_remove(m, 0, 1, 3);
}
typedef struct blob {
    const void *d;
    size_t n;
    int32_t s;
} blob;
static braid_status op_load(mem *m, const void *arg) {
    const blob *b = arg;
    return mem_state_load(m, b->s, FP, b->d, b->n);
}
static braid_status op_save(mem *m, const void *arg) {
    (void)arg;
    void *d;
    size_t n;
    BD_TRY(mem_state_save_alloc(m, -1, FP, "x", &d, &n));
    bd_free(d);
    return BRAID_OK;
}

/* Runs op on a memory loaded from `state`, failing allocation k (then k and all later ones), for every k
 * until the op no longer reaches k. Every failure must be BRAID_E_NOMEM with the memory unchanged. */
static void inject(const char *name, const void *state, size_t n, inj_op op, const void *arg) {
    uint64_t sites = 0;
    for (int sticky = 0; sticky < 2; sticky++)
        for (uint64_t k = 1;; k++) {
            mem *m = new_mem(&HYB);
            if (!m || mem_state_load(m, -1, FP, state, n) != BRAID_OK) {
                CHECK(0, "%s: setup", name);
                mem_free(m);
                return;
            }
            size_t nb;
            void *before = save(m, -1, &nb);
            bd_alloc_fail_at(k, sticky);
            braid_status st = op(m, arg);
            uint64_t used = bd_alloc_count();
            bd_alloc_fail_at(0, 0);
            inj_ops++;
            if (used < k) {
                CHECK(st == BRAID_OK, "%s: without failure: %s (%s)", name, braid_status_name(st), braid_last_error());
                bd_free(before);
                mem_free(m);
                break;
            }
            CHECK(st == BRAID_E_NOMEM, "%s: allocation %llu%s failed but the op returned %s", name, (unsigned long long)k,
                  sticky ? "+" : "", braid_status_name(st));
            if (!sticky) sites++;
            size_t na;
            void *after = save(m, -1, &na);
            CHECK(after && na == nb && !memcmp(before, after, nb), "%s: allocation %llu%s failed and the memory changed",
                  name, (unsigned long long)k, sticky ? "+" : "");
            CHECK_STATUS(mem_check(m), BRAID_OK);
            bd_free(before);
            bd_free(after);
            mem_free(m);
        }
    printf("  inject %-22s %llu allocation sites\n", name, (unsigned long long)sites);
    inj_sites += sites;
}

typedef struct short_writer {
    size_t left, wrote;
} short_writer;
static braid_status short_write(void *user, const void *data, size_t n) {
    short_writer *w = user;
    (void)data;
    if (n > w->left) {
        w->wrote += w->left;
        w->left = 0;
        return bd_error(BRAID_E_IO, "test: short write");
    }
    w->left -= n;
    w->wrote += n;
    return BRAID_OK;
}

static void test_failure_injection(void) {
    const toy_layout *t = &HYB;
    mem *m = new_mem(t);
    /* A state with a bit of everything: shared cells, checkpoints near the budget, rollback, stale K rows. */
    CHECK_STATUS(decode_tokens(t, m, 0, 13, 1, 4), BRAID_OK);
    CHECK_STATUS(decode_tokens(t, m, 0, 3, 60, 4), BRAID_OK);
    mem_batch *rb;
    CHECK_STATUS(mem_seq_copy(m, 0, 1, 9, &rb), BRAID_OK);
    if (rb) CHECK_STATUS(toy_run(t, m, rb, -1), BRAID_OK);
    CHECK_STATUS(decode_tokens(t, m, 2, 5, 70, 4), BRAID_OK);
    CHECK_STATUS(mem_seq_shift_pos(m, 2, 1, 5, 1), BRAID_OK);
    size_t n;
    void *st0 = save(m, -1, &n);
    size_t ns;
    void *seq0 = save(m, 0, &ns);

    int32_t tr_rb[2] = {0, 14}, tr_replay[2] = {0, 6}, tr_ck[2] = {0, 12};
    int32_t cp_live[3] = {0, 3, 16}, cp_replay[3] = {0, 3, 10}, cp_ck[3] = {0, 2, 8}, ck0 = 2;
    blob whole = {st0, n, -1}, one = {seq0, ns, 3}, onto = {seq0, ns, 0};
    inject("decode (3 sequences)", st0, n, op_decode_mix, NULL);
    inject("decode (embeddings)", st0, n, op_decode_embd, NULL);
    inject("truncate (rollback)", st0, n, op_truncate, tr_rb);
    inject("truncate (checkpoint)", st0, n, op_truncate, tr_ck);
    inject("truncate (replay)", st0, n, op_truncate, tr_replay);
    inject("copy (live)", st0, n, op_copy, cp_live);
    inject("copy (checkpoint)", st0, n, op_copy, cp_ck);
    inject("copy (replay)", st0, n, op_copy, cp_replay);
    inject("checkpoint", st0, n, op_checkpoint, &ck0);
    inject("shift_pos (unshare)", st0, n, op_shift, NULL);
    inject("remove", st0, n, op_remove, NULL);
    inject("load whole", st0, n, op_load, &whole);
    inject("load sequence", st0, n, op_load, &one);
    inject("load onto a sequence", st0, n, op_load, &onto);
    inject("save", st0, n, op_save, NULL);
    /* mem_new itself */
    for (uint64_t k = 1;; k++) {
        mem_params p = toy_params(t);
        mem *x = NULL;
        bd_alloc_fail_at(k, 0);
        braid_status st = mem_new(&p, &x);
        uint64_t used = bd_alloc_count();
        bd_alloc_fail_at(0, 0);
        mem_free(x);
        if (used < k) break;
        CHECK(st == BRAID_E_NOMEM && !x, "mem_new with allocation %llu failing: %s", (unsigned long long)k, braid_status_name(st));
        inj_sites++;
    }
    /* Short writes: every cut point gives BRAID_E_IO. */
    size_t cuts = 0;
    for (size_t cut = 0; cut < n; cut += cut < 256 ? 1 : 97) {
        short_writer sw = {cut, 0};
        mem_writer w = {short_write, &sw};
        braid_status st = mem_state_save(m, -1, FP, "toy model", &w);
        CHECK(st == BRAID_E_IO && sw.wrote == cut, "short write at %zu: %s", cut, braid_status_name(st));
        cuts++;
    }
    /* Truncated states (short reads), through a file, and every single-bit flip of a sequence state. */
    mem *d = new_mem(t);
    CHECK_STATUS(mem_state_load(d, -1, FP, st0, n), BRAID_OK);
    const char *path = "memory_state_cut.bin";
    size_t reads = 0;
    for (size_t cut = 0; cut < n; cut += cut < 300 ? 1 : 131) {
        FILE *f = fopen(path, "wb");
        if (!f) break;
        fwrite(st0, 1, cut, f);
        fclose(f);
        braid_status st = mem_state_load_file(d, -1, FP, path);
        CHECK(st == BRAID_E_FORMAT, "truncated at %zu: %s", cut, braid_status_name(st));
        reads++;
    }
    remove(path);
    CHECK_STATUS(mem_state_save_file(m, -1, FP, "toy model", path), BRAID_OK);
    CHECK_STATUS(mem_state_load_file(d, -1, FP, path), BRAID_OK);
    remove(path);
    CHECK_STATUS(mem_state_load_file(d, -1, FP, "/nonexistent/state"), BRAID_E_IO);
    CHECK_STATUS(mem_state_save_file(m, -1, FP, "x", "/nonexistent/state"), BRAID_E_IO);
    uint8_t *bad = malloc(ns);
    size_t flips = 0;
    for (size_t i = 0; bad && i < ns; i++) {
        memcpy(bad, seq0, ns);
        bad[i] ^= (uint8_t)(1u << (i % 8));
        braid_status st = mem_state_load(d, 1, FP, bad, ns);
        CHECK(st == BRAID_E_FORMAT || st == BRAID_E_MISMATCH, "bit flip at %zu accepted: %s", i, braid_status_name(st));
        flips++;
    }
    free(bad);
    CHECK(same_state(m, d), "failed loads left the memory as it was");
    printf("  %zu short writes, %zu truncated reads, %zu corrupted loads refused\n", cuts, reads, flips);
    mem_free(d);
    bd_free(st0);
    bd_free(seq0);
    mem_free(m);
}

/* ---- validation and splitting --------------------------------------------------------------------------- */
static void test_batch_validation(void) {
    const toy_layout *t = &HYB;
    mem *m = new_mem(t);
    CHECK_STATUS(decode_tokens(t, m, 0, 4, 1, 8), BRAID_OK);
    size_t n0;
    void *before = save(m, -1, &n0);
    braid_token tok[4] = {1, 2, 3, 4};
    float e[8] = {0};
    braid_seq_id bad_seq[4] = {0, 9, 0, 0};
    braid_pos back[16] = {9, 9, 9, 0, 2, 2, 2, 0, 10, 10, 10, 0, 11, 11, 11, 0};
    braid_pos neg[16] = {-1, 0, 0, 0};
    mem_batch *mb;
    CHECK_STATUS(mem_batch_begin(m, &(braid_batch){.n_tokens = 0, .token = tok}, 4, &mb), BRAID_E_INVALID);
    CHECK_STATUS(mem_batch_begin(m, &(braid_batch){.n_tokens = 4}, 4, &mb), BRAID_E_INVALID);
    CHECK_STATUS(mem_batch_begin(m, &(braid_batch){.n_tokens = 4, .token = tok, .embd = e}, 4, &mb), BRAID_E_INVALID);
    CHECK_STATUS(mem_batch_begin(m, &(braid_batch){.n_tokens = 4, .token = tok, .seq = bad_seq}, 4, &mb), BRAID_E_RANGE);
    CHECK_STATUS(mem_batch_begin(m, &(braid_batch){.n_tokens = 4, .token = tok, .pos = back}, 4, &mb), BRAID_E_RANGE);
    CHECK(strstr(braid_last_error(), "never decrease") != NULL, "reason: %s", braid_last_error());
    CHECK_STATUS(mem_batch_begin(m, &(braid_batch){.n_tokens = 1, .token = tok, .pos = neg}, 4, &mb), BRAID_E_RANGE);
    CHECK_STATUS(mem_batch_begin(m, &(braid_batch){.n_tokens = 1, .token = (braid_token[]){-5}}, 4, &mb), BRAID_E_RANGE);
    CHECK_STATUS(mem_batch_begin(m, &(braid_batch){.n_tokens = 4, .token = tok}, 0, &mb), BRAID_E_INVALID);
    braid_pos top[4] = {MEM_POS_MAX, MEM_POS_MAX, MEM_POS_MAX, 0};
    CHECK_STATUS(mem_batch_begin(m, &(braid_batch){.n_tokens = 1, .token = tok, .seq = (braid_seq_id[]){3}, .pos = top},
                                 4, &mb), BRAID_OK);
    mem_batch_abort(m, mb);
    size_t n1;
    void *after = save(m, -1, &n1);
    CHECK(n0 == n1 && !memcmp(before, after, n0), "refused batches changed nothing");
    bd_free(before);
    bd_free(after);

    CHECK_STATUS(decode_tokens(t, m, 3, 0, 0, 1), BRAID_E_INVALID);
    {
        braid_batch b1 = {.n_tokens = 1, .token = tok, .seq = (braid_seq_id[]){3}, .pos = top};
        CHECK_STATUS(mem_batch_begin(m, &b1, 4, &mb), BRAID_OK);
        CHECK_STATUS(toy_run(t, m, mb, -1), BRAID_OK);
        CHECK_STATUS(decode_tokens(t, m, 3, 1, 1, 4), BRAID_E_RANGE); /* the next default position passes the maximum */
        mem_seq_clear(m, 3);
    }
    /* Splitting: any mix of sequences; runs group each sequence's rows in order. */
    braid_token t12[12];
    braid_seq_id s12[12] = {0, 1, 0, 2, 1, 0, 3, 3, 2, 0, 1, 0};
    for (int i = 0; i < 12; i++) t12[i] = 100 + i;
    CHECK_STATUS(mem_batch_begin(m, &(braid_batch){.n_tokens = 12, .token = t12, .seq = s12}, 5, &mb), BRAID_OK);
    CHECK(mem_batch_n_ubatch(mb) == 3 && mem_batch_n_rows(mb) == 12, "3 ubatches of 12 rows");
    int32_t next_idx[4] = {4, 0, 0, 0}, rows = 0;
    int ok = 1;
    for (int32_t u = 0; u < mem_batch_n_ubatch(mb); u++) {
        mem_ubatch ub;
        CHECK_STATUS(mem_batch_ubatch(m, mb, u, &ub), BRAID_OK);
        CHECK(ub.n_rows <= 5, "ubatch size %d", ub.n_rows);
        for (int32_t k = 0; k < ub.n_runs; k++) {
            const mem_run *ru = &ub.runs[k];
            ok &= ru->idx0 == next_idx[ru->seq] && (k == 0 ? ru->row0 == 0 : ru->row0 == ub.runs[k - 1].row0 + ub.runs[k - 1].n_rows);
            for (int32_t j = 0; j < ru->n_rows; j++) {
                int32_t r = ru->row0 + j;
                ok &= ub.seq[r] == ru->seq && ub.idx[r] == next_idx[ru->seq]++ && s12[ub.batch_row[r]] == ru->seq &&
                      ub.token[r] == t12[ub.batch_row[r]] && ub.kv_write[r] == ru->kv_cells[ub.idx[r]];
            }
            rows += ru->n_rows;
        }
    }
    CHECK(ok && rows == 12, "runs cover the rows, each sequence in order");
    CHECK(next_idx[0] == 9 && next_idx[1] == 3 && next_idx[2] == 2 && next_idx[3] == 2, "indices per sequence");
    mem_batch_abort(m, mb);
    mem_free(m);
}

/* ---- free-cell reuse: no fragmentation failure while free cells exist ----------------------------------- */
static void test_free_cells(void) {
    toy_layout t = HYB;
    t.n_ctx = 16;
    mem *m = new_mem(&t);
    for (int r = 0; r < 4; r++)
        for (int32_t s = 0; s < 4; s++) CHECK_STATUS(decode_tokens(&t, m, s, 1, 10 * s + r, 4), BRAID_OK);
    CHECK(mem_kv_n_free(m) == 0, "full");
    CHECK_STATUS(decode_tokens(&t, m, 0, 1, 1, 4), BRAID_E_FULL);
    mem_seq_clear(m, 1);
    mem_seq_clear(m, 3);
    CHECK(mem_kv_n_free(m) == 8, "8 scattered free cells");
    CHECK_STATUS(decode_tokens(&t, m, 0, 8, 200, 3), BRAID_OK); /* scattered cells are fine */
    CHECK(live_is_fresh(&t, m, 0), "state after decoding into scattered cells");
    CHECK_STATUS(decode_tokens(&t, m, 2, 1, 1, 4), BRAID_E_FULL);
    CHECK(strstr(braid_last_error(), "free") != NULL, "reason: %s", braid_last_error());
    mem_free(m);
}

/* ---- checkpoint eviction: recent dense, old sparse -------------------------------------------------------- */
static void test_eviction_shape(void) {
    toy_layout t = {.name = "rs", .n_seq = 1, .n_pos = 1, .n_rs = 1, .interval = 8, .rollback = 0, .n_ubatch = 64,
                    .nconv = {2}, .nssm = {2}, .budget_blocks = 10};
    mem *m = new_mem(&t);
    for (int i = 0; i < 100; i++) CHECK_STATUS(decode_tokens(&t, m, 0, 8, i, 64), BRAID_OK);
    int32_t ck[32], n = mem_seq_checkpoints(m, 0, ck, 32);
    printf("  checkpoints after 800 inputs (interval 8, budget 10):");
    for (int32_t i = 0; i < n; i++) printf(" %d", ck[i]);
    printf("\n");
    CHECK(n == 10, "the budget is used: %d", n);
    CHECK(ck[n - 1] == 800 && ck[n - 2] == 792, "the newest are dense: %d %d", ck[n - 2], ck[n - 1]);
    int mono = 1;
    for (int32_t i = 1; i + 1 < n; i++) mono &= ck[i] - ck[i - 1] >= ck[i + 1] - ck[i];
    CHECK(mono, "gaps shrink toward the end");
    CHECK(ck[0] < 400, "old history still has a checkpoint (%d)", ck[0]);
    /* Replay cost of a truncation is bounded by the gap below the target. */
    mem_batch *rb;
    CHECK_STATUS(mem_seq_truncate(m, 0, 797, &rb), BRAID_OK);
    int32_t s, from, to;
    if (rb) {
        mem_batch_replay_info(rb, &s, &from, &to);
        CHECK(from == 792, "replay from the checkpoint just below: %d", from);
        mem_batch_abort(m, rb);
    }
    CHECK_STATUS(mem_seq_checkpoint(m, 0), BRAID_OK);
    CHECK(mem_rs_checkpoint(m, 0, 800) != NULL, "explicit checkpoint kept");
    toy_layout tiny = t;
    tiny.budget_blocks = 0;
    mem *m2 = new_mem(&tiny);
    CHECK_STATUS(decode_tokens(&tiny, m2, 0, 20, 0, 64), BRAID_OK);
    CHECK_STATUS(mem_seq_checkpoint(m2, 0), BRAID_E_FULL);
    mem_free(m2);
    mem_free(m);
}

static void test_params(void) {
    mem_params p = toy_params(&HYB);
    mem *m = NULL;
    p.n_seq_max = 0;
    CHECK_STATUS(mem_new(&p, &m), BRAID_E_INVALID);
    p = toy_params(&HYB);
    p.n_pos_per_token = 3;
    CHECK_STATUS(mem_new(&p, &m), BRAID_E_INVALID);
    p = toy_params(&HYB);
    p.kv_type = BRAID_TYPE_Q8_0;
    CHECK_STATUS(mem_new(&p, &m), BRAID_E_UNSUPPORTED);
    p = toy_params(&HYB);
    p.n_attn_layers = 0;
    p.n_rs_layers = 0;
    CHECK_STATUS(mem_new(&p, &m), BRAID_E_INVALID);
    CHECK(m == NULL, "no memory on failure");
}

/* --corpus DIR: writes the state fuzzer's seeds. */
static int write_corpus(const char *dir) {
    const toy_layout *t = &toy_fuzz_layout;
    mem *m = new_mem(t), *e = new_mem(t);
    if (!m || !e || toy_fuzz_fill(m) != BRAID_OK) return 1;
    struct {
        const mem *m;
        int32_t s;
        const char *name;
    } seeds[] = {{m, -1, "whole"}, {m, 0, "seq0"}, {m, 1, "seq1_shared"}, {m, 2, "seq2_embd"}, {e, -1, "empty"}};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, seeds[i].name);
        if (mem_state_save_file(seeds[i].m, seeds[i].s, TOY_FUZZ_FP, "fuzz", path) != BRAID_OK) {
            fprintf(stderr, "%s: %s\n", path, braid_last_error());
            return 1;
        }
    }
    mem_free(m);
    mem_free(e);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--corpus")) return write_corpus(argv[2]);
    test_params();
    test_mrope_image();
    test_remove_truncate_refuse();
    test_save_pending_rollback();
    test_batch_validation();
    test_free_cells();
    test_eviction_shape();
    test_copy_keeps_checkpoints();
    test_failure_injection();
    printf("failure injection: %llu allocation sites, %llu injected runs\n", (unsigned long long)inj_sites,
           (unsigned long long)inj_ops);
    TEST_MAIN_END();
}
