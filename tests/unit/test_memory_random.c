/* test_memory_random.c — model-based randomized test of the memory (design.md §3).
 *
 * Random operations (decode mixes of sequences with tokens, embeddings and M-RoPE image positions, truncate,
 * remove, shift_pos, div_pos, copy, clear, checkpoint, save/load round trips of the whole memory and of one
 * sequence, corrupted loads, forced forward failures, checkpoint budget pressure) run on hybrid, attention-only
 * and recurrent-only layouts. After every operation the memory is compared with the reference
 * (memory_ref.h): lengths, history, the K/V rows of every input, the live state, every checkpoint and rollback
 * state, the approximation index, and that every state claimed exact equals a fresh recompute from the
 * history; mem_check verifies the internal invariants. Refused operations must leave everything unchanged.
 *
 * Usage: unit_memory_random [ops_per_layout] [seed]   (CTest runs a short run, and a long one labelled long). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "memory_ref.h"
#include "test.h"

static uint64_t rng_state;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}
static int32_t rnd_in(int32_t lo, int32_t hi) { return lo + (int32_t)(rnd() % (uint32_t)(hi - lo + 1)); } /* [lo, hi] */

enum { OP_DECODE, OP_DECODE_FAIL, OP_TRUNCATE, OP_TRUNCATE_REPLAY, OP_REMOVE, OP_REFUSED, OP_SHIFT, OP_DIV, OP_COPY,
       OP_COPY_REPLAY, OP_CLEAR, OP_CHECKPOINT, OP_SAVE_WHOLE, OP_SAVE_SEQ, OP_CORRUPT, OP_FULL, OP_TRUNC_RB, OP_N };
static const char *op_names[OP_N] = {"decode", "decode_fail", "truncate", "truncate_replay", "remove", "refused",
                                     "shift", "div", "copy", "copy_replay", "clear", "checkpoint", "save_whole",
                                     "save_seq", "corrupt_load", "full", "(via rollback)"};
static uint64_t op_count[OP_N];

typedef struct world {
    const toy_layout *t;
    mem *m;
    ref_mem r;
    uint64_t steps;
    int failed;
} world;

#define WCHECK(w, cond, ...)                                                                                       \
    do {                                                                                                           \
        CHECK(cond, __VA_ARGS__);                                                                                  \
        if (!(cond)) (w)->failed = 1;                                                                              \
    } while (0)

static int blocks_equal(const float *a, const float *b, size_t n) {
    static const float zero[1] = {0};
    for (size_t i = 0; i < n; i++)
        if ((a ? a[i] : zero[0]) != (b ? b[i] : zero[0])) return 0;
    return 1;
}

/* Compare the memory with the reference. */
static void check_world(world *w) {
    const toy_layout *t = w->t;
    mem *m = w->m;
    braid_status st = mem_kv_rotate(m, toy_rotate, (void *)t);
    WCHECK(w, st == BRAID_OK, "rotate");
    st = mem_check(m);
    WCHECK(w, st == BRAID_OK, "step %llu: invariant: %s", (unsigned long long)w->steps, braid_last_error());
    size_t bf = w->r.bf;
    float *fresh = bf ? malloc((REF_MAXLEN + 1) * bf * sizeof(float)) : NULL;
    static const float zeros[64];
    for (uint32_t s = 0; s < t->n_seq && !w->failed; s++) {
        ref_seq *q = &w->r.seq[s];
        WCHECK(w, mem_seq_len(m, (int32_t)s) == q->len, "step %llu seq %u: len %d, ref %d", (unsigned long long)w->steps, s,
               mem_seq_len(m, (int32_t)s), q->len);
        if (w->failed) break;
        WCHECK(w, mem_seq_next_pos(m, (int32_t)s) == ref_next_pos(&w->r, q), "seq %u next pos", s);
        const int32_t *cells = mem_kv_seq_cells(m, (int32_t)s);
        for (int32_t i = 0; i < q->len && !w->failed; i++) {
            braid_token tok;
            const braid_pos *pos;
            const float *embd;
            WCHECK(w, mem_seq_input(m, (int32_t)s, i, &tok, &pos, &embd) == BRAID_OK, "input");
            WCHECK(w, tok == q->tok[i] && !memcmp(pos, q->pos[i], t->n_pos * sizeof(braid_pos)) &&
                          (q->tok[i] >= 0 ? embd == NULL : embd && !memcmp(embd, q->embd[i], t->n_embd * sizeof(float))),
                   "step %llu seq %u input %d: history differs", (unsigned long long)w->steps, s, i);
            int32_t x = ref_x(q, i);
            for (uint32_t l = 0; l < t->n_attn && !w->failed; l++) {
                const uint8_t *k = (const uint8_t *)mem_kv_k(m, l) + (size_t)cells[i] * mem_kv_k_row_bytes(m, l);
                const uint8_t *v = (const uint8_t *)mem_kv_v(m, l) + (size_t)cells[i] * mem_kv_v_row_bytes(m, l);
                for (uint32_t e = 0; e < t->nk[l]; e++)
                    WCHECK(w, toy_load(t->kv_type, k, e) == toy_kval(l, x, e, q->pos[i], t->n_pos),
                           "step %llu seq %u input %d layer %u: K[%u] = %g, want %g", (unsigned long long)w->steps, s, i, l, e,
                           toy_load(t->kv_type, k, e), toy_kval(l, x, e, q->pos[i], t->n_pos));
                for (uint32_t e = 0; e < t->nv[l]; e++)
                    WCHECK(w, toy_load(t->kv_type, v, e) == toy_vval(l, x, e), "seq %u input %d: V differs", s, i);
            }
        }
        if (!bf || w->failed) continue;
        WCHECK(w, blocks_equal(mem_rs_live(m, (int32_t)s), ref_lin(&w->r, (int32_t)s, q->len), bf),
               "step %llu seq %u: live state differs (len %d)", (unsigned long long)w->steps, s, q->len);
        int32_t idx[256];
        int32_t nck = mem_seq_checkpoints(m, (int32_t)s, idx, 256);
        for (int32_t i = 0; i < nck && i < 256; i++)
            WCHECK(w, blocks_equal(mem_rs_checkpoint(m, (int32_t)s, idx[i]), ref_lin(&w->r, (int32_t)s, idx[i]), bf),
                   "step %llu seq %u: checkpoint at %d differs", (unsigned long long)w->steps, s, idx[i]);
        int32_t lo, hi;
        mem_seq_rollback_range(m, (int32_t)s, &lo, &hi);
        for (int32_t i = lo; lo >= 0 && i < hi; i++)
            WCHECK(w, blocks_equal(mem_rs_rollback(m, (int32_t)s, i), ref_lin(&w->r, (int32_t)s, i), bf),
                   "step %llu seq %u: rollback state %d differs", (unsigned long long)w->steps, s, i);
        WCHECK(w, mem_seq_approx_from(m, (int32_t)s) == q->approx, "step %llu seq %u: approx %d, ref %d",
               (unsigned long long)w->steps, s, mem_seq_approx_from(m, (int32_t)s), q->approx);
        /* Every state claimed exact equals a fresh recompute from the history. */
        int32_t exact_to = q->approx < 0 ? q->len : q->approx;
        ref_replay(&w->r, m, q, zeros, fresh, 0, exact_to);
        for (int32_t j = 0; j <= exact_to; j++)
            WCHECK(w, blocks_equal(fresh + (size_t)j * bf, ref_lin(&w->r, (int32_t)s, j), bf),
                   "step %llu seq %u: state %d claimed exact but differs from a fresh decode", (unsigned long long)w->steps, s, j);
    }
    free(fresh);
    WCHECK(w, mem_rs_checkpoint_bytes(m) <= toy_params(t).checkpoint_budget_bytes, "checkpoint budget exceeded");
}

/* Serialization of the whole memory, for "unchanged" checks. */
static void *snapshot(world *w, size_t *n) {
    void *d = NULL;
    braid_status st = mem_state_save_alloc(w->m, -1, 42, "toy", &d, n);
    WCHECK(w, st == BRAID_OK, "save: %s", braid_last_error());
    return d;
}
static void check_unchanged(world *w, void *before, size_t nb, const char *what) {
    size_t na;
    void *after = snapshot(w, &na);
    WCHECK(w, after && na == nb && !memcmp(before, after, nb), "step %llu: %s changed the memory",
           (unsigned long long)w->steps, what);
    bd_free(after);
    bd_free(before);
}

static int32_t rnd_seq(world *w) { return rnd_in(0, (int32_t)w->t->n_seq - 1); }

/* Is cell c of s's list held by another sequence too? */
static int cell_shared(world *w, int32_t s, int32_t c) {
    for (uint32_t o = 0; o < w->t->n_seq; o++) {
        if ((int32_t)o == s) continue;
        const int32_t *l = mem_kv_seq_cells(w->m, (int32_t)o);
        for (int32_t i = 0; i < mem_seq_len(w->m, (int32_t)o); i++)
            if (l[i] == c) return 1;
    }
    return 0;
}

static void op_decode(world *w) {
    const toy_layout *t = w->t;
    int32_t nseq = rnd_in(1, t->n_seq < 3 ? (int32_t)t->n_seq : 3), seqs[3], cnt[3], total = 0;
    int use_embd = t->n_embd && rnd() % 5 == 0, explicit_pos = rnd() % 2;
    for (int32_t k = 0; k < nseq; k++) {
        seqs[k] = rnd_seq(w);
        for (int32_t j = 0; j < k; j++)
            if (seqs[j] == seqs[k]) seqs[k] = -1;
        int32_t room = REF_MAXLEN - 4 - (seqs[k] >= 0 ? w->r.seq[seqs[k]].len : 0);
        cnt[k] = seqs[k] < 0 || room <= 0 ? 0 : rnd_in(1, room < 6 ? room : 6);
        if (seqs[k] >= 0 && ref_next_pos(&w->r, &w->r.seq[seqs[k]]) > 1200) cnt[k] = 0; /* keep K exact in F16 */
        total += cnt[k];
    }
    if (!total) return;
    braid_token tok[24];
    float embd[24 * 4];
    braid_pos pos[24 * 4];
    braid_seq_id sid[24];
    int32_t left[3] = {cnt[0], nseq > 1 ? cnt[1] : 0, nseq > 2 ? cnt[2] : 0}, done[3] = {0, 0, 0};
    braid_pos p0[3];
    for (int32_t k = 0; k < nseq; k++) p0[k] = seqs[k] >= 0 ? ref_next_pos(&w->r, &w->r.seq[seqs[k]]) : 0;
    braid_pos prev1[3] = {p0[0], nseq > 1 ? p0[1] : 0, nseq > 2 ? p0[2] : 0};
    for (int32_t r = 0; r < total; r++) {
        int32_t k;
        do k = rnd_in(0, nseq - 1);
        while (!left[k]);
        left[k]--;
        int32_t j = done[k]++;
        sid[r] = seqs[k];
        tok[r] = rnd_in(0, 999);
        for (uint32_t e = 0; e < t->n_embd; e++) embd[r * t->n_embd + e] = (float)rnd_in(0, 50);
        braid_pos *p = pos + (size_t)r * t->n_pos;
        if (t->n_pos == 4) {
            if (use_embd) { /* an image, 2 columns wide, row-major, one temporal position */
                p[0] = p0[k], p[1] = p0[k] + j / 2, p[2] = p0[k] + j % 2, p[3] = 0;
            } else {
                p[0] = p[1] = p[2] = p0[k] + j, p[3] = 0;
            }
        } else {
            p[0] = prev1[k] + (j == 0 ? 0 : (rnd() % 3 ? 1 : 0)); /* repeats allowed */
            prev1[k] = p[0];
        }
    }
    braid_batch b = {.n_tokens = total, .token = use_embd ? NULL : tok, .embd = use_embd ? embd : NULL,
                     .pos = explicit_pos || use_embd ? pos : NULL, .seq = sid};
    size_t nb;
    void *before = snapshot(w, &nb);
    mem_batch *mb;
    uint32_t n_free = mem_kv_n_free(w->m);
    braid_status st = mem_batch_begin(w->m, &b, rnd_in(1, 7), &mb);
    if (t->n_attn && (uint32_t)total > n_free) {
        WCHECK(w, st == BRAID_E_FULL, "decode of %d rows with %u free cells: %s", total, n_free, braid_status_name(st));
        if (st == BRAID_OK) mem_batch_abort(w->m, mb);
        op_count[OP_FULL]++;
        check_unchanged(w, before, nb, "a refused decode");
        return;
    }
    WCHECK(w, st == BRAID_OK, "step %llu: begin: %s", (unsigned long long)w->steps, braid_last_error());
    if (st != BRAID_OK) {
        bd_free(before);
        return;
    }
    int fail = rnd() % 10 == 0;
    st = toy_run(t, w->m, mb, fail ? rnd_in(0, mem_batch_n_ubatch(mb) - 1) : -1);
    if (fail) {
        WCHECK(w, st == BRAID_E_CANCELLED, "forced failure");
        op_count[OP_DECODE_FAIL]++;
        check_unchanged(w, before, nb, "an aborted decode");
        return;
    }
    bd_free(before);
    WCHECK(w, st == BRAID_OK, "decode: %s", braid_last_error());
    op_count[OP_DECODE]++;
    /* Reference: rows in batch order. Default positions are each sequence's next text positions. */
    braid_pos nextp[8];
    for (uint32_t s = 0; s < t->n_seq; s++) nextp[s] = ref_next_pos(&w->r, &w->r.seq[s]);
    for (int32_t r = 0; r < total; r++) {
        braid_pos dp[4];
        const braid_pos *p = pos + (size_t)r * t->n_pos;
        if (!b.pos) {
            for (uint32_t c = 0; c < t->n_pos; c++) dp[c] = t->n_pos == 4 && c == 3 ? 0 : nextp[sid[r]];
            nextp[sid[r]]++;
            p = dp;
        }
        ref_push(&w->r, w->m, sid[r], tok[r], use_embd ? embd + (size_t)r * t->n_embd : NULL, p);
    }
}

/* Runs a replay batch (or not) and updates the reference for the truncate/copy it completes. */
static void op_truncate(world *w) {
    int32_t s = rnd_seq(w);
    ref_seq *q = &w->r.seq[s];
    int32_t n = rnd() % 3 == 0 ? rnd_in(0, q->len) : rnd_in(q->len > 8 ? q->len - 8 : 0, q->len);
    int32_t lo, hi, ck[256], nck = mem_seq_checkpoints(w->m, s, ck, 256);
    mem_seq_rollback_range(w->m, s, &lo, &hi);
    if (lo >= 0 && rnd() % 2) n = rnd_in(lo, hi); /* a speculative verify */
    int32_t expect_from = 0, at_hand = n == q->len || n == 0 || (lo >= 0 && n >= lo && n <= hi);
    for (int32_t i = 0; i < nck; i++) {
        if (ck[i] == n) at_hand = 1;
        if (ck[i] < n) expect_from = ck[i];
    }
    mem_batch *rb;
    size_t nb;
    void *before = snapshot(w, &nb);
    braid_status st = mem_seq_truncate(w->m, s, n, &rb);
    WCHECK(w, st == BRAID_OK, "truncate %d to %d: %s", s, n, braid_last_error());
    if (st != BRAID_OK) {
        bd_free(before);
        return;
    }
    if (!w->r.bf || at_hand) {
        WCHECK(w, rb == NULL, "step %llu: truncate to %d replays although the state is at hand", (unsigned long long)w->steps, n);
        if (rb) mem_batch_abort(w->m, rb);
        bd_free(before);
        if (w->r.bf && lo >= 0 && n >= lo && n < hi) op_count[OP_TRUNC_RB]++;
        q->len = n;
        if (q->approx >= n) q->approx = -1;
        op_count[OP_TRUNCATE]++;
        return;
    }
    WCHECK(w, rb != NULL, "step %llu: truncate to %d needs a replay", (unsigned long long)w->steps, n);
    if (!rb) {
        bd_free(before);
        return;
    }
    int32_t rs_, from, to;
    mem_batch_replay_info(rb, &rs_, &from, &to);
    WCHECK(w, rs_ == s && from == expect_from && to == n, "replay info %d %d %d, want %d %d %d", rs_, from, to, s,
           expect_from, n);
    int fail = rnd() % 8 == 0;
    st = toy_run(w->t, w->m, rb, fail ? 0 : -1);
    if (fail) {
        op_count[OP_DECODE_FAIL]++;
        check_unchanged(w, before, nb, "an aborted replay");
        return;
    }
    bd_free(before);
    WCHECK(w, st == BRAID_OK, "replay: %s", braid_last_error());
    ref_replay(&w->r, w->m, q, ref_lin(&w->r, s, from), q->lin, from, n);
    q->len = n;
    if (q->approx >= 0 && (from <= q->approx || n <= q->approx)) q->approx = -1;
    op_count[OP_TRUNCATE_REPLAY]++;
}

static void op_copy(world *w) {
    int32_t src = rnd_seq(w), dst = rnd_seq(w);
    if (src == dst) return;
    ref_seq *q = &w->r.seq[src];
    int32_t n = rnd_in(q->len > 6 ? q->len - 6 : 0, q->len);
    int32_t lo, hi, ck[256], nck = mem_seq_checkpoints(w->m, src, ck, 256), from = 0;
    mem_seq_rollback_range(w->m, src, &lo, &hi);
    int at_hand = n == q->len || n == 0 || (lo >= 0 && n >= lo && n <= hi);
    for (int32_t i = 0; i < nck; i++) {
        if (ck[i] == n) at_hand = 1;
        if (ck[i] < n) from = ck[i];
    }
    mem_batch *rb;
    braid_status st = mem_seq_copy(w->m, src, dst, n, &rb);
    WCHECK(w, st == BRAID_OK, "copy: %s", braid_last_error());
    if (st != BRAID_OK) return;
    WCHECK(w, (rb == NULL) == (!w->r.bf || at_hand), "copy replay expectation");
    int32_t a = q->approx;
    if (rb) {
        int32_t rs_, f, to;
        mem_batch_replay_info(rb, &rs_, &f, &to);
        WCHECK(w, rs_ == dst && f == from && to == n, "copy replay info");
        st = toy_run(w->t, w->m, rb, -1);
        WCHECK(w, st == BRAID_OK, "copy replay: %s", braid_last_error());
        ref_copy(&w->r, src, dst, n);
        ref_replay(&w->r, w->m, &w->r.seq[dst], ref_lin(&w->r, src, f), w->r.seq[dst].lin, f, n);
        w->r.seq[dst].approx = a >= 0 && f > a ? a : -1;
        op_count[OP_COPY_REPLAY]++;
    } else {
        ref_copy(&w->r, src, dst, n);
        op_count[OP_COPY]++;
    }
}

static void op_remove(world *w) {
    int32_t s = rnd_seq(w);
    ref_seq *q = &w->r.seq[s];
    if (!q->len) return;
    int32_t i0 = rnd_in(0, q->len - 1), i1 = rnd_in(i0, q->len);
    if (rnd() % 3 == 0) i0 = 0;
    size_t nb;
    void *before = snapshot(w, &nb);
    braid_status st = mem_seq_remove(w->m, s, i0, i1);
    if (w->t->n_rs && i1 == q->len && i0 < i1) {
        WCHECK(w, st == BRAID_E_RANGE && braid_last_error()[0], "remove reaching the end of a recurrent sequence: %s",
               braid_status_name(st));
        op_count[OP_REFUSED]++;
        check_unchanged(w, before, nb, "a refused remove");
        return;
    }
    bd_free(before);
    WCHECK(w, st == BRAID_OK, "remove: %s", braid_last_error());
    if (i0 < i1) ref_remove(&w->r, s, i0, i1);
    op_count[OP_REMOVE]++;
}

static void op_edit_pos(world *w, int div) {
    const toy_layout *t = w->t;
    int32_t s = rnd_seq(w);
    ref_seq *q = &w->r.seq[s];
    if (!q->len) return;
    int32_t i0 = rnd_in(0, q->len - 1), i1 = rnd_in(i0, q->len), d = rnd_in(-4, 4), k = rnd_in(1, 3);
    uint32_t nc = t->n_pos == 4 ? 3 : 1, need = 0;
    int bad = 0;
    for (int32_t i = i0; i < i1; i++) {
        for (uint32_t c = 0; c < nc; c++) bad |= !div && q->pos[i][c] + d < 0;
        if (t->n_attn && cell_shared(w, s, mem_kv_seq_cells(w->m, s)[i])) need++;
    }
    /* temporal positions must stay non-decreasing across the edges of the range */
    if (i0 < i1) {
        int64_t n0 = div ? q->pos[i0][0] / k : q->pos[i0][0] + d, n1 = div ? q->pos[i1 - 1][0] / k : q->pos[i1 - 1][0] + d;
        bad |= i0 > 0 && n0 < q->pos[i0 - 1][0];
        bad |= i1 < q->len && n1 > q->pos[i1][0];
    }
    const int noop = div ? k == 1 : d == 0; /* moves nothing: unshares nothing, keeps the state exact */
    if (noop) need = 0;
    size_t nb;
    void *before = snapshot(w, &nb);
    uint32_t n_free = mem_kv_n_free(w->m);
    braid_status st = div ? mem_seq_div_pos(w->m, s, i0, i1, k) : mem_seq_shift_pos(w->m, s, i0, i1, d);
    if (bad || need > n_free) {
        WCHECK(w, st == (bad ? BRAID_E_RANGE : BRAID_E_FULL), "edit_pos [%d,%d) of %d refusal (bad %d, need %u, free %u): %s",
               i0, i1, s, bad, need, n_free, braid_status_name(st));
        op_count[bad ? OP_REFUSED : OP_FULL]++;
        check_unchanged(w, before, nb, "a refused position edit");
        return;
    }
    bd_free(before);
    WCHECK(w, st == BRAID_OK, "edit_pos: %s", braid_last_error());
    for (int32_t i = i0; i < i1; i++)
        for (uint32_t c = 0; c < nc; c++) q->pos[i][c] = div ? q->pos[i][c] / k : q->pos[i][c] + d;
    if (t->n_attn && t->n_rs && i0 < i1 && !noop) ref_mark_approx(q, i0);
    op_count[div ? OP_DIV : OP_SHIFT]++;
}

static void op_checkpoint(world *w) {
    int32_t s = rnd_seq(w);
    braid_status st = mem_seq_checkpoint(w->m, s);
    WCHECK(w, st == BRAID_OK, "checkpoint: %s", braid_last_error());
    if (w->t->n_rs && w->r.seq[s].len)
        WCHECK(w, mem_rs_checkpoint(w->m, s, w->r.seq[s].len) != NULL, "no checkpoint at the end after a request");
    op_count[OP_CHECKPOINT]++;
}

static void op_save_whole(world *w) {
    size_t na, nb;
    void *a = snapshot(w, &na);
    mem_params p = toy_params(w->t);
    mem *m2;
    braid_status st = mem_new(&p, &m2);
    WCHECK(w, st == BRAID_OK, "mem_new");
    st = mem_state_load(m2, -1, 42, a, na);
    WCHECK(w, st == BRAID_OK, "step %llu: load whole: %s", (unsigned long long)w->steps, braid_last_error());
    mem_free(w->m);
    w->m = m2;
    void *b = snapshot(w, &nb);
    WCHECK(w, na == nb && !memcmp(a, b, na), "save / load / save differs");
    bd_free(a);
    bd_free(b);
    op_count[OP_SAVE_WHOLE]++;
}

static void op_save_seq(world *w) {
    int32_t s = rnd_seq(w), d = rnd_seq(w);
    void *blob;
    size_t n;
    braid_status st = mem_state_save_alloc(w->m, s, 42, "toy", &blob, &n);
    WCHECK(w, st == BRAID_OK, "save seq: %s", braid_last_error());
    if (st != BRAID_OK) return;
    uint32_t excl = 0;
    const int32_t *cl = mem_kv_seq_cells(w->m, d);
    for (int32_t i = 0; cl && i < mem_seq_len(w->m, d); i++) excl += !cell_shared(w, d, cl[i]);
    int full = w->t->n_attn && (uint32_t)w->r.seq[s].len > mem_kv_n_free(w->m) + excl;
    size_t nb;
    void *before = snapshot(w, &nb);
    int32_t ckbuf[256], nck_s = mem_seq_checkpoints(w->m, s, ckbuf, 256);
    st = mem_state_load(w->m, d, 42, blob, n);
    if (full) {
        WCHECK(w, st == BRAID_E_FULL, "seq load without room: %s", braid_status_name(st));
        op_count[OP_FULL]++;
        check_unchanged(w, before, nb, "a refused seq load");
    } else {
        bd_free(before);
        WCHECK(w, st == BRAID_OK, "step %llu: load seq %d into %d: %s", (unsigned long long)w->steps, s, d, braid_last_error());
        ref_copy(&w->r, s, d, w->r.seq[s].len);
        w->r.seq[d].approx = w->r.seq[s].approx;
        /* Saving the loaded sequence gives the same bytes (as the same sequence kind). */
        void *b2;
        size_t n2;
        if (mem_seq_checkpoints(w->m, d, ckbuf, 256) == nck_s && mem_state_save_alloc(w->m, d, 42, "toy", &b2, &n2) == BRAID_OK) {
            WCHECK(w, n2 == n && !memcmp(b2, blob, n), "seq save / load / save differs");
            bd_free(b2);
        }
        op_count[OP_SAVE_SEQ]++;
    }
    /* A corrupted copy must be refused without any change. */
    if (n > 0) {
        uint8_t *bad = (uint8_t *)blob;
        size_t at = rnd() % n;
        bad[at] ^= (uint8_t)(1u << (rnd() % 8));
        before = snapshot(w, &nb);
        st = mem_state_load(w->m, d, 42, bad, rnd() % 4 ? n : at);
        WCHECK(w, st == BRAID_E_FORMAT || st == BRAID_E_MISMATCH, "corrupted load (byte %zu) gave %s", at,
               braid_status_name(st));
        check_unchanged(w, before, nb, "a corrupted load");
        op_count[OP_CORRUPT]++;
    }
    bd_free(blob);
}

static void run_layout(const toy_layout *t, uint64_t n_ops, uint64_t seed) {
    world w = {.t = t};
    mem_params p = toy_params(t);
    braid_status st = mem_new(&p, &w.m);
    CHECK(st == BRAID_OK, "mem_new %s: %s", t->name, braid_last_error());
    if (st != BRAID_OK) return;
    ref_init(&w.r, t, mem_rs_block_floats(w.m));
    rng_state = seed * 0x9E3779B97F4A7C15ull + 1;
    for (w.steps = 0; w.steps < n_ops && !w.failed; w.steps++) {
        uint32_t k = rnd() % 100;
        if (k < 40) op_decode(&w);
        else if (k < 52) op_truncate(&w);
        else if (k < 58) op_remove(&w);
        else if (k < 63) op_edit_pos(&w, 0);
        else if (k < 66) op_edit_pos(&w, 1);
        else if (k < 74) op_copy(&w);
        else if (k < 77) {
            int32_t s = rnd() % 5 ? rnd_seq(&w) : -1;
            mem_seq_clear(w.m, s);
            for (uint32_t i = 0; i < t->n_seq; i++)
                if (s < 0 || (int32_t)i == s) ref_clear(&w.r, (int32_t)i);
            op_count[OP_CLEAR]++;
        } else if (k < 84) op_checkpoint(&w);
        else if (k < 88) op_save_whole(&w);
        else if (k < 93) op_save_seq(&w);
        else {
            /* keep sequences short: truncate the longest */
            int32_t s = rnd_seq(&w);
            if (w.r.seq[s].len > 40) {
                mem_batch *rb;
                if (mem_seq_truncate(w.m, s, 0, &rb) == BRAID_OK && !rb) ref_clear(&w.r, s);
            }
        }
        check_world(&w);
    }
    printf("%-16s %llu steps%s\n", t->name, (unsigned long long)w.steps, w.failed ? " (STOPPED AT A FAILURE)" : "");
    ref_free(&w.r);
    mem_free(w.m);
}

int main(int argc, char **argv) {
    uint64_t n_ops = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000;
    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
    const toy_layout layouts[] = {
        {.name = "hybrid-mrope-f16", .n_seq = 4, .n_pos = 4, .n_embd = 2, .n_ctx = 96, .n_attn = 2, .n_rs = 2,
         .interval = 4, .rollback = 3, .n_ubatch = 3, .kv_type = BRAID_TYPE_F16, .nk = {4, 5}, .nv = {3, 2},
         .nconv = {3, 2}, .nssm = {5, 4}, .budget_blocks = 6},
        {.name = "hybrid-f32", .n_seq = 3, .n_pos = 1, .n_embd = 2, .n_ctx = 60, .n_attn = 1, .n_rs = 1, .interval = 5,
         .rollback = 4, .n_ubatch = 4, .kv_type = BRAID_TYPE_F32, .nk = {4}, .nv = {4}, .nconv = {3}, .nssm = {6},
         .budget_blocks = 3},
        {.name = "attention-only", .n_seq = 3, .n_pos = 1, .n_embd = 2, .n_ctx = 64, .n_attn = 2, .n_rs = 0,
         .n_ubatch = 5, .kv_type = BRAID_TYPE_F32, .nk = {3, 4}, .nv = {2, 3}},
        {.name = "recurrent-only", .n_seq = 3, .n_pos = 1, .n_embd = 2, .n_rs = 2, .interval = 3, .rollback = 2,
         .n_ubatch = 2, .nconv = {2, 3}, .nssm = {4, 3}, .budget_blocks = 4},
        {.name = "hybrid-tiny-budget", .n_seq = 2, .n_pos = 4, .n_embd = 1, .n_ctx = 40, .n_attn = 1, .n_rs = 1,
         .interval = 2, .rollback = 0, .n_ubatch = 2, .kv_type = BRAID_TYPE_F16, .nk = {2}, .nv = {2}, .nconv = {2},
         .nssm = {2}, .budget_blocks = 1},
    };
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) run_layout(&layouts[i], n_ops, seed + i);
    uint64_t total = 0;
    for (int i = 0; i < OP_N; i++) {
        printf("  %-16s %llu\n", op_names[i], (unsigned long long)op_count[i]);
        total += op_count[i];
    }
    printf("  %-16s %llu\n", "total", (unsigned long long)total);
    TEST_MAIN_END();
}
