/* batch.c — the decode transaction (and the replay batches of truncate / copy, which are the same thing).
 *
 * mem_batch_begin reserves everything a batch can need before any forward pass runs: free cells for every new
 * input (taken off the free stack, invisible to every sequence), room in the histories, a work block per
 * sequence for the recurrent state, snapshot blocks for the rollback buffer, blocks for the checkpoints the
 * batch will create (after planning eviction, so at most the surviving ones are allocated). The committed
 * state is never written during the forward pass: new K/V rows go to reserved cells, the recurrent state goes
 * from the live block to the work block. So abort only gives the reservations back, and commit only moves
 * pointers, copies into pre-allocated blocks and sets metadata: it cannot fail. */
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "memory/mem_impl.h"

/* ---- the batch object: its arrays and views ---------------------------------------------------------- */

void mem_batch_free_arrays(mem_batch *b) {
    if (!b) return;
    bd_free(b->token);
    bd_free(b->embd);
    bd_free(b->pos);
    bd_free(b->seq);
    bd_free(b->idx);
    bd_free(b->batch_row);
    bd_free(b->logits);
    bd_free(b->kv_write);
    bd_free(b->rs_snap);
    bd_free(b->ub_row0);
    bd_free(b->runs);
    bd_free(b->ub_run0);
    for (int32_t i = 0; b->bs && i < b->n_bs; i++) {
        bd_free(b->bs[i].snap);
        bd_free(b->bs[i].ck);
    }
    bd_free(b->bs);
    bd_free(b->cells);
    bd_free(b->victims);
    bd_free(b);
}

braid_status mem_batch_ubatch(const mem *m, const mem_batch *b, int32_t u, mem_ubatch *out) {
    if (u < 0 || u >= b->n_ub) return bd_error(BRAID_E_RANGE, "memory: ubatch %d of %d", u, b->n_ub);
    if (m->kv && m->kv->maybe_stale && kv_count_stale(m->kv))
        return bd_error(BRAID_E_INVALID, "memory: K rows of shifted cells are not re-rotated yet (mem_kv_rotate)");
    int32_t r0 = b->ub_row0[u];
    size_t np = m->p.n_pos_per_token;
    out->n_rows = b->ub_row0[u + 1] - r0;
    out->token = b->token + r0;
    out->embd = b->embd + r0;
    out->pos = b->pos + (size_t)r0 * np;
    out->seq = b->seq + r0;
    out->idx = b->idx + r0;
    out->batch_row = b->batch_row + r0;
    out->logits = b->logits + r0;
    out->kv_write = b->kv_write + r0;
    out->rs_snap = b->rs_snap + r0;
    out->n_runs = b->ub_run0[u + 1] - b->ub_run0[u];
    out->runs = b->runs + b->ub_run0[u];
    return BRAID_OK;
}

int32_t mem_batch_n_ubatch(const mem_batch *b) { return b->n_ub; }
int32_t mem_batch_n_rows(const mem_batch *b) { return b->n_rows; }

/* ---- the transaction ------------------------------------------------------------------------------------- */

/* Gives back every block the batch holds (abort, or a failed begin). */
static void release_blocks(mem *m, mem_batch *b) {
    if (!m->rs) return;
    rs_ck_copy_release(m->rs, &b->ck_copy);
    for (int32_t i = 0; b->bs && i < b->n_bs; i++) {
        mem_bseq *q = &b->bs[i];
        rs_put(m->rs, q->work);
        q->work = NULL;
        for (int32_t k = 0; q->snap && k < q->n_snap; k++) rs_put(m->rs, q->snap[k]);
        q->n_snap = 0;
        for (int32_t k = 0; q->ck && k < q->n_ck; k++) rs_put(m->rs, q->ck[k].blk);
        q->n_ck = 0;
    }
}

/* Is input j of sequence s (0 <= j < len0 + n_new) an embedding input? Rows of the batch come from rowof. */
static int is_embd(const mem *m, const mem_batch *b, const mem_bseq *q, const int32_t *rowof, int32_t j) {
    if (j < q->len0) return m->hist[q->s].tok[j] < 0;
    return b->embd[rowof[j - q->len0]] != NULL;
}

/* Recurrent reservations of a decode batch: work blocks, rollback snapshots, checkpoints (planned). */
static braid_status plan_rs(mem *m, mem_batch *b) {
    rs_mem *rs = m->rs;
    int32_t R = (int32_t)rs->n_rollback, I = (int32_t)rs->ck_interval;
    int32_t *rowof = bd_mallocn((size_t)b->n_rows, sizeof(int32_t)); /* [bs][t] -> row, packed by bs */
    int32_t *base = bd_mallocn((size_t)b->n_bs + 1, sizeof(int32_t));
    int32_t *fill = bd_calloc((size_t)b->n_bs, sizeof(int32_t));
    int32_t *bsof = bd_mallocn(m->p.n_seq_max, sizeof(int32_t));
    int32_t *lens = bd_mallocn(m->p.n_seq_max, sizeof(int32_t));
    int32_t cap = 3 * b->n_rows + 2 * b->n_bs;
    rs_cand *cand = bd_mallocn((size_t)cap, sizeof *cand);
    int32_t *cand_bs = bd_mallocn((size_t)cap, sizeof(int32_t));
    uint8_t *keep = bd_mallocn((size_t)cap, 1);
    b->victims = bd_mallocn(rs->n_ck_total + 1, sizeof(rs_cand));
    braid_status st = rowof && base && fill && bsof && lens && cand && cand_bs && keep && b->victims
                          ? BRAID_OK
                          : bd_error(BRAID_E_NOMEM, "memory: out of memory planning a batch");
    int32_t n_cand = 0;
    if (st == BRAID_OK) {
        for (uint32_t s = 0; s < m->p.n_seq_max; s++) {
            lens[s] = m->hist[s].len;
            bsof[s] = -1;
        }
        base[0] = 0;
        for (int32_t i = 0; i < b->n_bs; i++) {
            base[i + 1] = base[i] + b->bs[i].n_new;
            bsof[b->bs[i].s] = i;
            lens[b->bs[i].s] = b->bs[i].len0 + b->bs[i].n_new;
        }
        for (int32_t r = 0; r < b->n_rows; r++) {
            int32_t i = bsof[b->seq[r]];
            rowof[base[i] + fill[i]++] = r;
        }
    }
    for (int32_t i = 0; st == BRAID_OK && i < b->n_bs; i++) {
        mem_bseq *q = &b->bs[i];
        const int32_t *ro = rowof + base[i];
        int32_t len0 = q->len0, len1 = q->len0 + q->n_new;
        if (!(q->work = rs_get(rs))) {
            st = BRAID_E_NOMEM;
            break;
        }
        if (R > 0 && q->n_new <= R) { /* design.md §2: a decode of k <= n_rollback inputs */
            q->rb_lo = len1 - R > len0 ? len1 - R : len0;
            q->snap_lo = q->rb_lo > len0 + 1 ? q->rb_lo : len0 + 1;
            int32_t n_snap = len1 - q->snap_lo;
            if (n_snap > 0) {
                if (!(q->snap = bd_calloc((size_t)n_snap, sizeof(float *)))) {
                    st = bd_error(BRAID_E_NOMEM, "memory: out of memory for rollback snapshots");
                    break;
                }
                for (; q->n_snap < n_snap; q->n_snap++) {
                    if (!(q->snap[q->n_snap] = rs_get(rs))) {
                        st = BRAID_E_NOMEM;
                        break;
                    }
                    b->rs_snap[ro[q->snap_lo + q->n_snap - 1 - len0]] = q->snap[q->n_snap];
                }
                if (st != BRAID_OK) break;
            }
        }
        /* Checkpoint candidates: multiples of the interval, the marks, and both edges of every embedding span. */
        for (int32_t j = len0 > 0 ? len0 : 1; j <= len1; j++) {
            int want = j > len0 && ((I > 0 && j % I == 0) || rs_marked(rs, q->s, j));
            if (j < len1 && is_embd(m, b, q, ro, j) && !is_embd(m, b, q, ro, j - 1)) want = 1;
            if (j - 1 >= len0 && is_embd(m, b, q, ro, j - 1) && (j == len1 || !is_embd(m, b, q, ro, j))) want = 1;
            if (want && rs_ck_find(rs, q->s, j) < 0) {
                cand[n_cand] = (rs_cand){q->s, j};
                cand_bs[n_cand++] = i;
            }
        }
    }
    if (st == BRAID_OK && n_cand) st = rs_ck_plan(rs, lens, cand, n_cand, b->victims, &b->n_victims, keep);
    for (int32_t i = 0; st == BRAID_OK && i < b->n_bs; i++) {
        mem_bseq *q = &b->bs[i];
        int32_t nk = 0;
        for (int32_t j = 0; j < n_cand; j++) nk += cand_bs[j] == i && keep[j];
        if (!nk) continue;
        if (!(q->ck = bd_calloc((size_t)nk, sizeof *q->ck))) {
            st = bd_error(BRAID_E_NOMEM, "memory: out of memory for checkpoints");
            break;
        }
        if ((st = rs_ck_reserve(rs, q->s, nk + b->n_victims)) != BRAID_OK) break;
        int32_t len0 = q->len0, len1 = q->len0 + q->n_new;
        for (int32_t j = 0; j < n_cand && st == BRAID_OK; j++) {
            if (cand_bs[j] != i || !keep[j]) continue;
            mem_bck *c = &q->ck[q->n_ck];
            c->idx = cand[j].idx;
            if (!(c->blk = rs_get(rs))) {
                st = BRAID_E_NOMEM;
                break;
            }
            q->n_ck++;
            if (c->idx == len0) {
                c->src = CK_FROM_OLD_LIVE;
            } else if (c->idx == len1) {
                c->src = CK_FROM_WORK;
            } else if (q->n_snap && c->idx >= q->snap_lo) {
                c->src = CK_FROM_SNAP;
                c->snap = c->idx - q->snap_lo;
            } else {
                c->src = CK_DIRECT;
                b->rs_snap[rowof[base[i] + c->idx - 1 - len0]] = c->blk;
            }
        }
    }
    bd_free(rowof);
    bd_free(base);
    bd_free(fill);
    bd_free(bsof);
    bd_free(lens);
    bd_free(cand);
    bd_free(cand_bs);
    bd_free(keep);
    return st;
}

/* Points every run of a decode batch at its sequence's cells and state blocks: the first run of a sequence
 * reads the committed state, later ones continue in the work block. */
static void link_runs(mem *m, mem_batch *b) {
    for (int32_t k = 0; k < b->n_runs; k++) {
        mem_run *ru = &b->runs[k];
        ru->kv_cells = m->kv ? kv_list(m->kv, ru->seq) : NULL;
        if (!m->rs) continue;
        mem_bseq *q = b->bs;
        while (q->s != ru->seq) q++;
        ru->rs_src = !q->linked ? rs_or_zero(m->rs, m->rs->seq[q->s].live) : q->work;
        ru->rs_dst = q->work;
        q->linked = 1;
    }
}

braid_status mem_batch_begin(mem *m, const braid_batch *in, int32_t n_ubatch, mem_batch **out) {
    *out = NULL;
    if (m->pending) return bd_error(BRAID_E_INVALID, "memory: a batch is already pending");
    if (!in) return bd_error(BRAID_E_INVALID, "memory: no batch");
    mem_batch *b = bd_calloc(1, sizeof *b);
    if (!b) return bd_error(BRAID_E_NOMEM, "memory: out of memory for a batch");
    b->kind = MB_DECODE;
    b->source = b->target = b->from = b->to = -1;
    braid_status st = ub_split(m, in, n_ubatch, b);
    if (st == BRAID_OK && m->kv) {
        if ((uint32_t)b->n_rows > m->kv->n_free)
            st = bd_error(BRAID_E_FULL, "memory: the batch needs %d cells, %u are free (of %u)", b->n_rows,
                          m->kv->n_free, m->kv->n_cells);
        else if (!(b->cells = bd_mallocn((size_t)b->n_rows, sizeof(int32_t))))
            st = bd_error(BRAID_E_NOMEM, "memory: out of memory for a batch");
    }
    for (int32_t i = 0; st == BRAID_OK && i < b->n_bs; i++) {
        mem_bseq *q = &b->bs[i];
        int32_t ne = 0;
        for (int32_t r = 0; r < b->n_rows; r++) ne += b->seq[r] == q->s && b->embd[r];
        st = hist_reserve(&m->hist[q->s], q->len0 + q->n_new, m->hist[q->s].n_erow + ne);
    }
    if (st == BRAID_OK && m->rs) st = plan_rs(m, b);
    if (st != BRAID_OK) {
        release_blocks(m, b);
        mem_batch_free_arrays(b);
        return st;
    }
    if (m->kv) {
        kv_take(m->kv, (uint32_t)b->n_rows, b->cells);
        b->n_cells = b->n_rows;
        for (int32_t r = 0; r < b->n_rows; r++) {
            b->kv_write[r] = b->cells[r];
            kv_list(m->kv, b->seq[r])[b->idx[r]] = b->cells[r]; /* past the committed length: invisible */
        }
    }
    link_runs(m, b);
    m->pending = b;
    *out = b;
    return BRAID_OK;
}

/* Replay ubatches hold at most n_ubatch rows and never mix token and embedding inputs, so a forward pass that
 * takes either token ids or a block of embedding rows can run each one as it is (the embedding rows of one
 * such ubatch are consecutive rows of the history). */
static int32_t replay_cut(const mem_hist *h, int32_t i, int32_t start, int32_t nb) {
    return i - start >= nb || (h->tok[i] < 0) != (h->tok[start] < 0);
}

braid_status mem_replay_new(mem *m, int kind, int32_t source, int32_t target, int32_t from, int32_t to,
                            const float *src_blk, mem_batch **out) {
    *out = NULL;
    const mem_hist *h = &m->hist[source];
    /* The history was checked when it was decoded or loaded; a replay still refuses an id the model has no
     * embedding row for, because running one would read outside the token embedding matrix. */
    for (int32_t i = from; i < to; i++)
        if (h->tok[i] < -1 || (m->p.n_vocab && h->tok[i] >= 0 && (uint32_t)h->tok[i] >= m->p.n_vocab))
            return bd_error(BRAID_E_FORMAT, "memory: replay of sequence %d: input %d holds token %d, not in 0..%u",
                            source, i, h->tok[i], m->p.n_vocab - 1);
    int32_t n = to - from, nb = (int32_t)m->p.n_ubatch, n_ub = 1;
    for (int32_t i = from + 1, start = from; i < to; i++)
        if (replay_cut(h, i, start, nb)) n_ub++, start = i;
    mem_batch *b = bd_calloc(1, sizeof *b);
    if (!b) return bd_error(BRAID_E_NOMEM, "memory: out of memory for a replay");
    b->kind = kind;
    b->source = source;
    b->target = target;
    b->from = from;
    b->to = to;
    braid_status st = ub_alloc_rows(m, b, n, n_ub);
    if (st == BRAID_OK && !(b->bs = bd_calloc(1, sizeof *b->bs)))
        st = bd_error(BRAID_E_NOMEM, "memory: out of memory for a replay");
    if (st == BRAID_OK) {
        b->n_bs = 1;
        b->bs[0] = (mem_bseq){.s = target, .len0 = from, .n_new = n, .rb_lo = -1};
        if (!(b->bs[0].work = rs_get(m->rs))) st = BRAID_E_NOMEM;
    }
    if (st != BRAID_OK) {
        release_blocks(m, b);
        mem_batch_free_arrays(b);
        return st;
    }
    size_t np = m->p.n_pos_per_token;
    for (int32_t k = 0; k < n; k++) {
        int32_t i = from + k;
        b->token[k] = h->tok[i];
        b->embd[k] = hist_embd(h, i);
        memcpy(b->pos + (size_t)k * np, hist_pos(h, i), np * sizeof(braid_pos));
        b->seq[k] = source;
        b->idx[k] = i;
        b->batch_row[k] = -1;
    }
    int32_t u = 0;
    for (int32_t i = from, start = from; i <= to; i++) {
        if (i < to && (i == start || !replay_cut(h, i, start, nb))) continue;
        b->ub_row0[u] = start - from;
        b->ub_run0[u] = u;
        b->runs[u] = (mem_run){.seq = source, .row0 = 0, .n_rows = i - start, .idx0 = start,
                               .rs_src = u == 0 ? rs_or_zero(m->rs, src_blk) : b->bs[0].work, .rs_dst = b->bs[0].work};
        b->runs[u].kv_cells = m->kv ? kv_list(m->kv, source) : NULL;
        u++;
        start = i;
    }
    assert(u == n_ub);
    b->ub_row0[n_ub] = n;
    b->ub_run0[n_ub] = n_ub;
    b->n_runs = n_ub;
    m->pending = b;
    *out = b;
    return BRAID_OK;
}

void mem_batch_replay_info(const mem_batch *b, int32_t *seq, int32_t *from, int32_t *to) {
    *seq = b->kind == MB_DECODE ? -1 : b->target;
    *from = b->kind == MB_DECODE ? -1 : b->from;
    *to = b->kind == MB_DECODE ? -1 : b->to;
}

static void commit_decode(mem *m, mem_batch *b) {
    size_t np = m->p.n_pos_per_token;
    for (int32_t r = 0; r < b->n_rows; r++) {
        const braid_pos *p = b->pos + (size_t)r * np;
        if (m->kv) kv_commit_cell(m->kv, b->seq[r], p);
        hist_push(&m->hist[b->seq[r]], b->token[r], p, b->embd[r]);
    }
    rs_mem *rs = m->rs;
    if (!rs) return;
    /* Fill the new checkpoints while every source block is still in place. */
    for (int32_t i = 0; i < b->n_bs; i++) {
        mem_bseq *q = &b->bs[i];
        for (int32_t k = 0; k < q->n_ck; k++) {
            mem_bck *c = &q->ck[k];
            const float *from = c->src == CK_FROM_OLD_LIVE ? rs_or_zero(rs, rs->seq[q->s].live)
                                : c->src == CK_FROM_WORK   ? q->work
                                : c->src == CK_FROM_SNAP   ? q->snap[c->snap]
                                                           : NULL;
            if (from) memcpy(c->blk, from, rs->block_bytes);
        }
    }
    for (int32_t v = 0; v < b->n_victims; v++)
        rs_ck_drop(rs, b->victims[v].seq, rs_ck_find(rs, b->victims[v].seq, b->victims[v].idx));
    for (int32_t i = 0; i < b->n_bs; i++) {
        mem_bseq *q = &b->bs[i];
        for (int32_t k = 0; k < q->n_ck; k++) rs_ck_insert(rs, q->s, q->ck[k].idx, q->ck[k].blk);
        q->n_ck = 0;
        /* New rollback buffer: states rb_lo .. len1 - 1; the one at len0 is the old live block. */
        rs_advance(rs, q->s, q->work, q->rb_lo, q->rb_lo == q->len0, q->snap, q->n_snap);
        q->work = NULL;
        q->n_snap = 0;
    }
}

static void commit_replay(mem *m, mem_batch *b) {
    rs_mem *rs = m->rs;
    mem_bseq *q = &b->bs[0];
    int32_t s = b->target, n = b->to;
    if (b->kind == MB_REPLAY_TRUNCATE) {
        if (m->kv) kv_truncate(m->kv, s, (uint32_t)n);
        hist_truncate(&m->hist[s], n);
        rs_rb_drop_after(rs, s, n - 1);
        rs_ck_drop_after(rs, s, n);
        /* Replayed from an exact state (at or before the first removal) means exact again. */
        if (m->approx[s] >= 0 && (b->from <= m->approx[s] || n <= m->approx[s])) m->approx[s] = -1;
    } else {
        int32_t src = b->source;
        if (m->kv) kv_copy(m->kv, src, s, (uint32_t)n);
        hist_copy(&m->hist[s], &m->hist[src], n);
        rs_clear(rs, s);
        rs_ck_copy_apply(rs, s, &b->ck_copy);
        m->approx[s] = m->approx[src] >= 0 && b->from > m->approx[src] ? m->approx[src] : -1;
    }
    rs_set_live(rs, s, q->work);
    q->work = NULL;
}

void mem_batch_commit(mem *m, mem_batch *b) {
    assert(m->pending == b);
    if (b->kind == MB_DECODE)
        commit_decode(m, b);
    else
        commit_replay(m, b);
    m->pending = NULL;
    mem_batch_free_arrays(b);
    MEM_ASSERT_OK(m);
}

void mem_batch_abort(mem *m, mem_batch *b) {
    assert(m->pending == b);
    if (m->kv && b->n_cells) kv_untake(m->kv, (uint32_t)b->n_cells, b->cells);
    release_blocks(m, b);
    m->pending = NULL;
    mem_batch_free_arrays(b);
    MEM_ASSERT_OK(m);
}
