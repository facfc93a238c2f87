/* memory.c — the memory as one object (memory.h): the attention half (kv.c), the recurrent half (rs.c) and each
 * sequence's input history (hist.c), under one rule: every operation checks both halves (ids, ranges, free
 * cells, allocations) before it changes either, so it is applied whole or not at all (design.md §3). The decode
 * and replay transactions are in batch.c, batch splitting in ubatch.c, the state format in state_io.c. Files
 * call downward only: memory.c -> batch.c -> ubatch.c -> {hist.c, kv.c, rs.c}; each of those three is the only
 * writer of its own fields. */
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/status.h"
#include "memory/mem_impl.h"

/* ---- life cycle ------------------------------------------------------------------------------------------ */

braid_status mem_new(const mem_params *p, mem **out) {
    *out = NULL;
    if (!p) return bd_error(BRAID_E_INVALID, "memory: no parameters");
    if (p->n_seq_max < 1 || p->n_seq_max > MEM_SEQ_MAX)
        return bd_error(BRAID_E_INVALID, "memory: n_seq_max %u not in 1..%d", p->n_seq_max, MEM_SEQ_MAX);
    if (p->n_pos_per_token != 1 && p->n_pos_per_token != 4)
        return bd_error(BRAID_E_INVALID, "memory: n_pos_per_token %u (1 or 4)", p->n_pos_per_token);
    if (p->n_attn_layers == 0 && p->n_rs_layers == 0)
        return bd_error(BRAID_E_INVALID, "memory: no attention and no recurrent layers");
    /* Stated bounds keep every count an int32 and every size computation in range. */
    if (p->n_rollback > MEM_ROLLBACK_MAX)
        return bd_error(BRAID_E_INVALID, "memory: n_rollback %u not in 0..%u", p->n_rollback, MEM_ROLLBACK_MAX);
    if (p->checkpoint_interval > MEM_INTERVAL_MAX)
        return bd_error(BRAID_E_INVALID, "memory: checkpoint_interval %u not in 0..%u", p->checkpoint_interval,
                        MEM_INTERVAL_MAX);
    if (p->n_ubatch > MEM_UBATCH_MAX)
        return bd_error(BRAID_E_INVALID, "memory: n_ubatch %u not in 0..%u", p->n_ubatch, MEM_UBATCH_MAX);
    if (p->n_attn_layers) {
        if (p->n_ctx < 1 || p->n_ctx > MEM_CTX_MAX)
            return bd_error(BRAID_E_INVALID, "memory: n_ctx %u not in 1..%u", p->n_ctx, MEM_CTX_MAX);
        if (!p->n_embd_k || !p->n_embd_v) return bd_error(BRAID_E_INVALID, "memory: K/V widths missing");
        if (p->kv_type != BRAID_TYPE_F32 && p->kv_type != BRAID_TYPE_F16)
            return bd_error(BRAID_E_UNSUPPORTED, "memory: kv type %d (F32 or F16)", (int)p->kv_type);
        for (uint32_t l = 0; l < p->n_attn_layers; l++)
            if (!p->n_embd_k[l] || !p->n_embd_v[l] || p->n_embd_k[l] > (1u << 20) || p->n_embd_v[l] > (1u << 20))
                return bd_error(BRAID_E_INVALID, "memory: attention layer %u: K/V widths %u/%u (each 1..%u)", l,
                                p->n_embd_k[l], p->n_embd_v[l], 1u << 20);
    }
    if (p->n_rs_layers) {
        if (!p->n_conv || !p->n_ssm) return bd_error(BRAID_E_INVALID, "memory: recurrent sizes missing");
        uint64_t total = 0;
        for (uint32_t l = 0; l < p->n_rs_layers; l++) {
            if (p->n_conv[l] > (1ull << 36) || p->n_ssm[l] > (1ull << 36))
                return bd_error(BRAID_E_INVALID, "memory: recurrent layer %u: state sizes %llu/%llu (each <= 2^36)", l,
                                (unsigned long long)p->n_conv[l], (unsigned long long)p->n_ssm[l]);
            total += p->n_conv[l] + p->n_ssm[l];
        }
        if (!total) return bd_error(BRAID_E_INVALID, "memory: recurrent layers with an empty state");
    }
    if (p->n_embd > (1u << 24)) return bd_error(BRAID_E_INVALID, "memory: n_embd %u not in 0..%u", p->n_embd, 1u << 24);
    if (p->n_vocab > (uint32_t)INT32_MAX)
        return bd_error(BRAID_E_INVALID, "memory: n_vocab %u not in 0..%d", p->n_vocab, INT32_MAX);

    mem *m = bd_calloc(1, sizeof *m);
    if (!m) return bd_error(BRAID_E_NOMEM, "memory: out of memory");
    m->p = *p;
    if (!m->p.n_ubatch) m->p.n_ubatch = 512;
    uint32_t na = p->n_attn_layers, nr = p->n_rs_layers;
    braid_status st = BRAID_OK;
    if (!(m->n_embd_k = bd_mallocn(na + 1, sizeof(uint32_t))) || !(m->n_embd_v = bd_mallocn(na + 1, sizeof(uint32_t))) ||
        !(m->n_conv = bd_mallocn(nr + 1, sizeof(uint64_t))) || !(m->n_ssm = bd_mallocn(nr + 1, sizeof(uint64_t))) ||
        !(m->hist = bd_calloc(p->n_seq_max, sizeof(mem_hist))) || !(m->approx = bd_mallocn(p->n_seq_max, sizeof(int32_t))))
        st = bd_error(BRAID_E_NOMEM, "memory: out of memory");
    if (st == BRAID_OK) {
        if (na) memcpy(m->n_embd_k, p->n_embd_k, na * sizeof(uint32_t));
        if (na) memcpy(m->n_embd_v, p->n_embd_v, na * sizeof(uint32_t));
        if (nr) memcpy(m->n_conv, p->n_conv, nr * sizeof(uint64_t));
        if (nr) memcpy(m->n_ssm, p->n_ssm, nr * sizeof(uint64_t));
        m->p.n_embd_k = na ? m->n_embd_k : NULL;
        m->p.n_embd_v = na ? m->n_embd_v : NULL;
        m->p.n_conv = nr ? m->n_conv : NULL;
        m->p.n_ssm = nr ? m->n_ssm : NULL;
        if (!na) m->p.n_ctx = 0;
        for (uint32_t s = 0; s < p->n_seq_max; s++) {
            m->approx[s] = -1;
            hist_init(&m->hist[s], p->n_pos_per_token, p->n_embd);
        }
    }
    if (st == BRAID_OK && na)
        st = kv_new(p->n_ctx, p->n_pos_per_token, p->n_seq_max, p->kv_type, na, p->n_embd_k, p->n_embd_v, &m->kv);
    if (st == BRAID_OK && nr)
        st = rs_new(p->n_seq_max, nr, p->n_conv, p->n_ssm, p->n_rollback, p->checkpoint_interval,
                    p->checkpoint_budget_bytes, &m->rs);
    if (st != BRAID_OK) {
        mem_free(m);
        return st;
    }
    *out = m;
    return BRAID_OK;
}

void mem_free(mem *m) {
    if (!m) return;
    if (m->pending) mem_batch_abort(m, m->pending);
    kv_free(m->kv);
    rs_free(m->rs);
    for (uint32_t s = 0; m->hist && s < m->p.n_seq_max; s++) hist_free(&m->hist[s]);
    bd_free(m->hist);
    bd_free(m->approx);
    bd_free(m->n_embd_k);
    bd_free(m->n_embd_v);
    bd_free(m->n_conv);
    bd_free(m->n_ssm);
    bd_free(m);
}

const mem_params *mem_get_params(const mem *m) { return &m->p; }

/* ---- queries ----------------------------------------------------------------------------------------------- */

int32_t mem_seq_len(const mem *m, int32_t s) { return mem_seq_ok(m, s) ? m->hist[s].len : -1; }

braid_pos mem_seq_next_pos(const mem *m, int32_t s) { return mem_seq_ok(m, s) ? hist_next_pos(&m->hist[s]) : 0; }

braid_status mem_seq_input(const mem *m, int32_t s, int32_t i, braid_token *token, const braid_pos **pos,
                           const float **embd) {
    if (!mem_seq_ok(m, s)) return bd_error(BRAID_E_RANGE, "memory: sequence %d not in 0..%u", s, m->p.n_seq_max - 1);
    const mem_hist *h = &m->hist[s];
    if (i < 0 || i >= h->len) return bd_error(BRAID_E_RANGE, "memory: input %d of sequence %d (length %d)", i, s, h->len);
    if (token) *token = h->tok[i];
    if (pos) *pos = hist_pos(h, i);
    if (embd) *embd = hist_embd(h, i);
    return BRAID_OK;
}

int32_t mem_seq_approx_from(const mem *m, int32_t s) { return mem_seq_ok(m, s) ? m->approx[s] : -1; }

int32_t mem_seq_checkpoints(const mem *m, int32_t s, int32_t *idx, int32_t cap) {
    if (!mem_seq_ok(m, s) || !m->rs) return 0;
    const rs_seq *q = &m->rs->seq[s];
    for (int32_t i = 0; i < q->n_ck && i < cap; i++) idx[i] = q->ck[i].idx;
    return q->n_ck;
}

void mem_seq_rollback_range(const mem *m, int32_t s, int32_t *lo, int32_t *hi) {
    *lo = -1;
    *hi = mem_seq_len(m, s);
    if (!mem_seq_ok(m, s) || !m->rs || m->rs->seq[s].rb_n == 0) return;
    *lo = m->rs->seq[s].rb_lo;
}

/* ---- attention / recurrent storage ------------------------------------------------------------------------- */

braid_type mem_kv_type(const mem *m) { return m->p.kv_type; }
uint32_t mem_kv_n_cells(const mem *m) { return m->kv ? m->kv->n_cells : 0; }
uint32_t mem_kv_n_free(const mem *m) { return m->kv ? m->kv->n_free : 0; }
void *mem_kv_k(mem *m, uint32_t layer) { return m->kv && layer < m->kv->n_layers ? m->kv->k[layer] : NULL; }
void *mem_kv_v(mem *m, uint32_t layer) { return m->kv && layer < m->kv->n_layers ? m->kv->v[layer] : NULL; }
size_t mem_kv_k_row_bytes(const mem *m, uint32_t layer) { return m->kv && layer < m->kv->n_layers ? kv_k_row(m->kv, layer) : 0; }
size_t mem_kv_v_row_bytes(const mem *m, uint32_t layer) { return m->kv && layer < m->kv->n_layers ? kv_v_row(m->kv, layer) : 0; }
const int32_t *mem_kv_seq_cells(const mem *m, int32_t s) { return m->kv && mem_seq_ok(m, s) ? kv_list(m->kv, s) : NULL; }
const braid_pos *mem_kv_cell_pos(const mem *m, int32_t cell) {
    return m->kv && cell >= 0 && (uint32_t)cell < m->kv->n_cells ? kv_pos(m->kv, cell) : NULL;
}

braid_status mem_kv_rotate(mem *m, mem_rotate_fn rotate, void *user) {
    kv_cache *kv = m->kv;
    if (!kv || !kv->maybe_stale) return BRAID_OK; /* nothing was shifted since the last rotation */
    for (int32_t c = kv_next_stale(kv, 0); c >= 0; c = kv_next_stale(kv, c + 1)) {
        BD_TRY(rotate(user, m, c, kv_pos_rot(kv, c), kv_pos(kv, c)));
        kv_mark_rotated(kv, c);
    }
    kv_all_rotated(kv);
    return BRAID_OK;
}

uint32_t mem_kv_n_rotations_pending(const mem *m) { return m->kv && m->kv->maybe_stale ? kv_count_stale(m->kv) : 0; }

size_t mem_rs_block_floats(const mem *m) { return m->rs ? m->rs->block_floats : 0; }
size_t mem_rs_conv_off(const mem *m, uint32_t layer) { return m->rs && layer < m->rs->n_layers ? m->rs->off_conv[layer] : 0; }
size_t mem_rs_ssm_off(const mem *m, uint32_t layer) { return m->rs && layer < m->rs->n_layers ? m->rs->off_ssm[layer] : 0; }
const float *mem_rs_live(const mem *m, int32_t s) { return m->rs && mem_seq_ok(m, s) ? m->rs->seq[s].live : NULL; }
const float *mem_rs_checkpoint(const mem *m, int32_t s, int32_t idx) {
    if (!m->rs || !mem_seq_ok(m, s)) return NULL;
    int32_t i = rs_ck_find(m->rs, s, idx);
    return i >= 0 ? m->rs->seq[s].ck[i].blk : NULL;
}
const float *mem_rs_rollback(const mem *m, int32_t s, int32_t idx) {
    if (!m->rs || !mem_seq_ok(m, s)) return NULL;
    const rs_seq *q = &m->rs->seq[s];
    if (q->rb_n == 0 || idx < q->rb_lo || idx >= q->rb_lo + q->rb_n) return NULL;
    return rs_or_zero(m->rs, q->rb[idx - q->rb_lo]);
}
uint64_t mem_rs_checkpoint_bytes(const mem *m) { return m->rs ? m->rs->n_ck_total * m->rs->block_bytes : 0; }

/* ---- operations -------------------------------------------------------------------------------------------- */

static braid_status check_seq(const mem *m, int32_t s, const char *op) {
    if (m->pending) return bd_error(BRAID_E_INVALID, "memory: %s while a batch is pending", op);
    if (!mem_seq_ok(m, s))
        return bd_error(BRAID_E_RANGE, "memory: %s: sequence %d not in 0..%u", op, s, m->p.n_seq_max - 1);
    return BRAID_OK;
}

/* The state of s at index n if it is at hand without a replay: *blk (NULL = zero state), *found = 1. */
static void state_at(const mem *m, int32_t s, int32_t n, const float **blk, int *found) {
    const rs_seq *q = &m->rs->seq[s];
    *found = 1;
    *blk = NULL;
    if (n == 0) return;
    if (n == m->hist[s].len) {
        *blk = q->live;
        return;
    }
    if (q->rb_n > 0 && n >= q->rb_lo && n < q->rb_lo + q->rb_n) {
        *blk = q->rb[n - q->rb_lo];
        return;
    }
    int32_t i = rs_ck_find(m->rs, s, n);
    if (i >= 0) {
        *blk = q->ck[i].blk;
        return;
    }
    *found = 0;
}

braid_status mem_seq_truncate(mem *m, int32_t s, int32_t n, mem_batch **replay) {
    *replay = NULL;
    BD_TRY(check_seq(m, s, "truncate"));
    int32_t len = m->hist[s].len;
    if (n < 0 || n > len) return bd_error(BRAID_E_RANGE, "memory: truncate sequence %d to %d (length %d)", s, n, len);
    if (n == len) return BRAID_OK;
    if (m->rs) {
        rs_mem *rs = m->rs;
        rs_seq *q = &rs->seq[s];
        float *live;
        if (q->rb_n > 0 && n >= q->rb_lo && n < q->rb_lo + q->rb_n) {
            /* The rollback buffer holds it: swap blocks, no copy. */
            live = rs_rb_take(rs, s, n);
        } else if (n == 0) {
            live = NULL;
        } else {
            int32_t i = rs_ck_find(rs, s, n);
            if (i < 0) {
                int32_t f = rs_ck_floor(rs, s, n);
                int32_t from = f >= 0 ? q->ck[f].idx : 0;
                BD_TRY(mem_replay_new(m, MB_REPLAY_TRUNCATE, s, s, from, n, f >= 0 ? q->ck[f].blk : NULL, replay));
                return BRAID_OK;
            }
            if (!(live = rs_get(rs))) return BRAID_E_NOMEM;
            memcpy(live, q->ck[i].blk, rs->block_bytes);
        }
        rs_set_live(rs, s, live);
        rs_rb_drop_after(rs, s, n - 1);
        rs_ck_drop_after(rs, s, n);
        if (m->approx[s] >= n) m->approx[s] = -1;
    }
    if (m->kv) kv_truncate(m->kv, s, (uint32_t)n);
    hist_truncate(&m->hist[s], n);
    MEM_ASSERT_OK(m);
    return BRAID_OK;
}

braid_status mem_seq_remove(mem *m, int32_t s, int32_t i0, int32_t i1) {
    BD_TRY(check_seq(m, s, "remove"));
    int32_t len = m->hist[s].len;
    if (i0 < 0 || i1 < i0 || i1 > len)
        return bd_error(BRAID_E_RANGE, "memory: remove [%d, %d) from sequence %d (length %d)", i0, i1, s, len);
    if (i0 == i1) return BRAID_OK;
    if (m->rs && i1 == len)
        return bd_error(BRAID_E_RANGE,
                        "memory: remove [%d, %d) from sequence %d reaches its end (length %d); a recurrent state "
                        "cannot forget its last inputs: use truncate",
                        i0, i1, s, len);
    if (m->kv) kv_remove(m->kv, s, (uint32_t)i0, (uint32_t)i1);
    hist_remove(&m->hist[s], i0, i1);
    if (m->rs) {
        rs_rb_drop_after(m->rs, s, -1); /* the rollback buffer ends at the live state: a gap would break it */
        rs_ck_remove_range(m->rs, s, i0, i1);
        m->approx[s] = m->approx[s] >= 0 && m->approx[s] < i0 ? m->approx[s] : i0;
    }
    MEM_ASSERT_OK(m);
    return BRAID_OK;
}

/* Shift (k == 0: add d) or divide (by k) the t, y, x components of inputs [i0, i1). */
static braid_status edit_pos(mem *m, int32_t s, int32_t i0, int32_t i1, braid_pos d, int32_t k, const char *op) {
    BD_TRY(check_seq(m, s, op));
    mem_hist *h = &m->hist[s];
    if (i0 < 0 || i1 < i0 || i1 > h->len)
        return bd_error(BRAID_E_RANGE, "memory: %s [%d, %d) of sequence %d (length %d)", op, i0, i1, s, h->len);
    if (k < 0) return bd_error(BRAID_E_RANGE, "memory: %s by %d", op, k);
    uint32_t np = m->p.n_pos_per_token, nc = np == 4 ? 3 : 1;
    for (int32_t i = i0; i < i1; i++) {
        const braid_pos *p = hist_pos(h, i);
        for (uint32_t c = 0; c < nc; c++) {
            int64_t v = k ? (int64_t)p[c] / k : (int64_t)p[c] + d;
            if (v < 0 || v > MEM_POS_MAX)
                return bd_error(BRAID_E_RANGE, "memory: %s of sequence %d: input %d would get position %lld (0..%d)",
                                op, s, i, (long long)v, MEM_POS_MAX);
        }
    }
    /* A sequence's temporal positions never decrease (decode refuses that, a state load too); an edit keeps
     * it so. Inside the range the order is kept (a shift and a floor division are monotone), so only the two
     * edges can break it. */
    if (i0 < i1) {
        const braid_pos t0 = hist_pos(h, i0)[0], t1 = hist_pos(h, i1 - 1)[0];
        const int64_t n0 = k ? (int64_t)t0 / k : (int64_t)t0 + d, n1 = k ? (int64_t)t1 / k : (int64_t)t1 + d;
        if (i0 > 0 && n0 < hist_pos(h, i0 - 1)[0])
            return bd_error(BRAID_E_RANGE,
                            "memory: %s of sequence %d: input %d would get temporal position %lld, before input %d's "
                            "%d (positions never decrease within a sequence)",
                            op, s, i0, (long long)n0, i0 - 1, hist_pos(h, i0 - 1)[0]);
        if (i1 < h->len && n1 > hist_pos(h, i1)[0])
            return bd_error(BRAID_E_RANGE,
                            "memory: %s of sequence %d: input %d would get temporal position %lld, after input %d's "
                            "%d (positions never decrease within a sequence)",
                            op, s, i1 - 1, (long long)n1, i1, hist_pos(h, i1)[0]);
    }
    /* An edit that moves nothing (an empty range, a shift by 0, a division by 1) must not cost the rollback
     * buffer or mark the state inexact. */
    if (i0 == i1 || (k == 0 && d == 0) || k == 1) return BRAID_OK;
    if (m->kv) {
        uint32_t need = kv_count_shared(m->kv, s, (uint32_t)i0, (uint32_t)i1);
        if (need > m->kv->n_free)
            return bd_error(BRAID_E_FULL, "memory: %s of sequence %d needs %u free cells to unshare cells (%u free)",
                            op, s, need, m->kv->n_free);
        kv_unshare(m->kv, s, (uint32_t)i0, (uint32_t)i1);
    }
    hist_edit_pos(h, i0, i1, nc, d, k);
    if (m->kv) kv_set_pos(m->kv, s, (uint32_t)i0, (uint32_t)i1, hist_pos(h, i0));
    if (m->rs) {
        rs_rb_drop_after(m->rs, s, -1);
        /* On a hybrid the later states came through attention at the old positions. */
        if (m->kv) m->approx[s] = m->approx[s] >= 0 && m->approx[s] < i0 ? m->approx[s] : i0;
    }
    MEM_ASSERT_OK(m);
    return BRAID_OK;
}

braid_status mem_seq_shift_pos(mem *m, int32_t s, int32_t i0, int32_t i1, braid_pos d) {
    return edit_pos(m, s, i0, i1, d, 0, "shift_pos");
}

braid_status mem_seq_div_pos(mem *m, int32_t s, int32_t i0, int32_t i1, int32_t k) {
    if (k < 1) return bd_error(BRAID_E_RANGE, "memory: div_pos by %d (must be >= 1)", k);
    return edit_pos(m, s, i0, i1, 0, k, "div_pos");
}

/* Plans copies of src's checkpoints up to n for dst (see rs_ck_copy_plan), with the lengths after the copy. */
static braid_status plan_ck_copy(mem *m, int32_t src, int32_t dst, int32_t n, rs_ck_copy *c) {
    int32_t *lens = bd_mallocn(m->p.n_seq_max, sizeof(int32_t));
    if (!lens) return bd_error(BRAID_E_NOMEM, "memory: out of memory copying checkpoints");
    for (uint32_t t = 0; t < m->p.n_seq_max; t++) lens[t] = m->hist[t].len;
    lens[dst] = n;
    braid_status st = rs_ck_copy_plan(m->rs, lens, src, dst, n, c);
    bd_free(lens);
    return st;
}

braid_status mem_seq_copy(mem *m, int32_t src, int32_t dst, int32_t n, mem_batch **replay) {
    *replay = NULL;
    BD_TRY(check_seq(m, src, "copy"));
    BD_TRY(check_seq(m, dst, "copy"));
    if (src == dst) return bd_error(BRAID_E_INVALID, "memory: copy of sequence %d onto itself (use truncate)", src);
    const mem_hist *hs = &m->hist[src];
    if (n < 0 || n > hs->len)
        return bd_error(BRAID_E_RANGE, "memory: copy the first %d inputs of sequence %d (length %d)", n, src, hs->len);
    BD_TRY(hist_reserve(&m->hist[dst], n, hist_count_erows(hs, n)));
    float *live = NULL;
    if (m->rs) {
        /* The copy takes src's checkpoints too (as far as the budget allows): otherwise truncating the copy
         * below the copy point, the usual next step when a cached prefix is reused, would replay from 0. */
        const float *blk;
        int found;
        state_at(m, src, n, &blk, &found);
        if (!found) {
            int32_t f = rs_ck_floor(m->rs, src, n);
            int32_t from = f >= 0 ? m->rs->seq[src].ck[f].idx : 0;
            BD_TRY(mem_replay_new(m, MB_REPLAY_COPY, src, dst, from, n, f >= 0 ? m->rs->seq[src].ck[f].blk : NULL,
                                  replay));
            braid_status st = plan_ck_copy(m, src, dst, n, &(*replay)->ck_copy);
            if (st != BRAID_OK) {
                mem_batch_abort(m, *replay);
                *replay = NULL;
            }
            return st;
        }
        rs_ck_copy cc;
        BD_TRY(plan_ck_copy(m, src, dst, n, &cc));
        if (blk) {
            if (!(live = rs_get(m->rs))) {
                rs_ck_copy_release(m->rs, &cc);
                return BRAID_E_NOMEM;
            }
            memcpy(live, blk, m->rs->block_bytes);
        }
        rs_clear(m->rs, dst);
        rs_ck_copy_apply(m->rs, dst, &cc);
        rs_set_live(m->rs, dst, live);
        m->approx[dst] = m->approx[src] >= 0 && m->approx[src] < n ? m->approx[src] : -1;
    }
    if (m->kv) kv_copy(m->kv, src, dst, (uint32_t)n);
    hist_copy(&m->hist[dst], hs, n);
    MEM_ASSERT_OK(m);
    return BRAID_OK;
}

void mem_seq_clear(mem *m, int32_t s) {
    if (m->pending) {
        bd_log(BD_LOG_ERROR, "memory: clear of sequence %d while a batch is pending: ignored", s);
        return;
    }
    if (s != -1 && !mem_seq_ok(m, s)) return;
    for (int32_t t = s < 0 ? 0 : s; t < (s < 0 ? (int32_t)m->p.n_seq_max : s + 1); t++) {
        if (m->kv) kv_truncate(m->kv, t, 0);
        if (m->rs) rs_clear(m->rs, t);
        hist_truncate(&m->hist[t], 0);
        m->approx[t] = -1;
    }
    MEM_ASSERT_OK(m);
}

braid_status mem_seq_checkpoint(mem *m, int32_t s) {
    BD_TRY(check_seq(m, s, "checkpoint"));
    rs_mem *rs = m->rs;
    int32_t len = m->hist[s].len;
    if (!rs || len == 0 || rs_ck_find(rs, s, len) >= 0) return BRAID_OK;
    if (rs->ck_max == 0)
        return bd_error(BRAID_E_FULL, "memory: a checkpoint of %zu bytes does not fit the budget of %llu bytes",
                        rs->block_bytes, (unsigned long long)rs->ck_budget);
    int32_t *lens = bd_mallocn(m->p.n_seq_max, sizeof(int32_t));
    rs_cand *victims = bd_mallocn(rs->n_ck_total + 1, sizeof(rs_cand));
    braid_status st = lens && victims ? BRAID_OK : bd_error(BRAID_E_NOMEM, "memory: out of memory for a checkpoint");
    int32_t n_victims = 0;
    uint8_t keep = 1;
    rs_cand cand = {s, len};
    float *blk = NULL;
    if (st == BRAID_OK) {
        for (uint32_t t = 0; t < m->p.n_seq_max; t++) lens[t] = m->hist[t].len;
        st = rs_ck_plan(rs, lens, &cand, 1, victims, &n_victims, &keep);
    }
    if (st == BRAID_OK) st = rs_ck_reserve(rs, s, 1);
    if (st == BRAID_OK && keep && !(blk = rs_get(rs))) st = BRAID_E_NOMEM;
    if (st == BRAID_OK) {
        for (int32_t i = 0; i < n_victims; i++) rs_ck_drop(rs, victims[i].seq, rs_ck_find(rs, victims[i].seq, victims[i].idx));
        if (keep) {
            memcpy(blk, rs_or_zero(rs, rs->seq[s].live), rs->block_bytes);
            rs_ck_insert(rs, s, len, blk);
        }
        MEM_ASSERT_OK(m);
    }
    bd_free(lens);
    bd_free(victims);
    return st;
}

braid_status mem_seq_mark_checkpoints(mem *m, int32_t s, const int32_t *idx, int32_t n) {
    BD_TRY(check_seq(m, s, "mark checkpoints"));
    if (n < 0 || (n > 0 && !idx)) return bd_error(BRAID_E_INVALID, "memory: %d checkpoint marks", n);
    return m->rs ? rs_mark_set(m->rs, s, idx, n) : BRAID_OK;
}

/* ---- invariants -------------------------------------------------------------------------------------------- */

braid_status mem_check(const mem *m) {
    for (uint32_t s = 0; s < m->p.n_seq_max; s++) {
        const mem_hist *h = &m->hist[s];
        BD_TRY(hist_check(h, s));
        if (m->kv) {
            if ((int32_t)m->kv->len[s] != h->len)
                return bd_error(BRAID_E_INVALID, "memory: seq %u: %u cells for %d inputs", s, m->kv->len[s], h->len);
            const int32_t *list = kv_list(m->kv, (int32_t)s);
            for (int32_t i = 0; i < h->len; i++)
                if (memcmp(kv_pos(m->kv, list[i]), hist_pos(h, i), m->p.n_pos_per_token * sizeof(braid_pos)))
                    return bd_error(BRAID_E_INVALID, "memory: seq %u input %d: cell positions differ from history", s, i);
        }
        if (m->approx[s] >= h->len && h->len > 0)
            return bd_error(BRAID_E_INVALID, "memory: seq %u: approx_from %d >= length %d", s, m->approx[s], h->len);
    }
    if (m->kv) BD_TRY(kv_check(m->kv));
    if (m->rs) {
        for (uint32_t s = 0; s < m->p.n_seq_max; s++) BD_TRY(rs_check_seq(m->rs, (int32_t)s, m->hist[s].len));
        BD_TRY(rs_check_total(m->rs));
    }
    return BRAID_OK;
}
