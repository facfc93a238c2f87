/* ubatch.c — validating a caller's batch and splitting it into ubatches (the batch object itself is batch.c's).
 *
 * A batch may mix sequences in any order; what matters is that each sequence's inputs stay in batch order
 * (that order is their identity: they become indices len, len+1, ...). Rows are cut into ubatches of at most
 * n_ubatch rows in batch order; inside a ubatch the rows are grouped by sequence (stable), so the rows of one
 * sequence form one run that a recurrent kernel scans in order. Positions are RoPE coordinates only: they may
 * repeat (the tokens of an M-RoPE image share their temporal position), but the temporal component never goes
 * backwards within a sequence, which catches a caller who reuses positions after a truncation. */
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "memory/mem_impl.h"

braid_status ub_alloc_rows(const mem *m, mem_batch *b, int32_t n, int32_t n_ub) {
    size_t np = m->p.n_pos_per_token, nr = (size_t)n;
    b->n_rows = n;
    b->n_ub = n_ub;
    if (!(b->token = bd_mallocn(nr, sizeof *b->token)) || !(b->embd = bd_calloc(nr, sizeof *b->embd)) ||
        !(b->pos = bd_mallocn(nr * np, sizeof *b->pos)) || !(b->seq = bd_mallocn(nr, sizeof *b->seq)) ||
        !(b->idx = bd_mallocn(nr, sizeof *b->idx)) || !(b->batch_row = bd_mallocn(nr, sizeof *b->batch_row)) ||
        !(b->logits = bd_calloc(nr, 1)) || !(b->kv_write = bd_mallocn(nr, sizeof *b->kv_write)) ||
        !(b->rs_snap = bd_calloc(nr, sizeof *b->rs_snap)) || !(b->ub_row0 = bd_mallocn((size_t)n_ub + 1, sizeof(int32_t))) ||
        !(b->runs = bd_calloc(nr, sizeof *b->runs)) || !(b->ub_run0 = bd_mallocn((size_t)n_ub + 1, sizeof(int32_t))))
        return bd_error(BRAID_E_NOMEM, "memory: out of memory for a batch of %d rows", n);
    for (int32_t r = 0; r < n; r++) b->kv_write[r] = -1;
    return BRAID_OK;
}

braid_status ub_split(const mem *m, const braid_batch *in, int32_t n_ubatch, mem_batch *b) {
    int32_t n = in->n_tokens;
    uint32_t np = m->p.n_pos_per_token, nseq = m->p.n_seq_max;
    if (n <= 0) return bd_error(BRAID_E_INVALID, "memory: batch of %d inputs", n);
    if (n_ubatch <= 0) return bd_error(BRAID_E_INVALID, "memory: ubatch size %d", n_ubatch);
    if (!in->token == !in->embd)
        return bd_error(BRAID_E_INVALID, "memory: a batch needs either token ids or embedding rows (not both)");
    if (in->embd && m->p.n_embd == 0)
        return bd_error(BRAID_E_INVALID, "memory: embedding inputs given but the memory keeps no embedding width");
    /* Per-sequence scratch: rows seen so far, last temporal position, next default position. */
    int32_t *cnt = bd_calloc(nseq, sizeof(int32_t));
    braid_pos *last = bd_mallocn(nseq, sizeof(braid_pos));
    int32_t *last_row = bd_mallocn(nseq, sizeof(int32_t));
    int32_t *bsi = bd_mallocn(nseq, sizeof(int32_t));
    int32_t *seen = bd_calloc(nseq, sizeof(int32_t)); /* u + 1 once s's run of ubatch u is emitted */
    braid_status st = cnt && last && last_row && bsi && seen ? BRAID_OK : bd_error(BRAID_E_NOMEM, "memory: out of memory");
    for (uint32_t s = 0; st == BRAID_OK && s < nseq; s++) {
        last_row[s] = -1;
        bsi[s] = -1;
        const mem_hist *h = &m->hist[s];
        last[s] = h->len ? hist_pos(h, h->len - 1)[0] : -1;
    }
    /* Pass 1: validation. */
    for (int32_t r = 0; st == BRAID_OK && r < n; r++) {
        int32_t s = in->seq ? in->seq[r] : 0;
        if (s < 0 || (uint32_t)s >= nseq) {
            st = bd_error(BRAID_E_RANGE, "memory: batch row %d: sequence %d not in 0..%u", r, s, nseq - 1);
            break;
        }
        if (in->token && (in->token[r] < 0 || (m->p.n_vocab && (uint32_t)in->token[r] >= m->p.n_vocab))) {
            st = m->p.n_vocab ? bd_error(BRAID_E_RANGE, "memory: batch row %d: token id %d not in 0..%u", r,
                                         in->token[r], m->p.n_vocab - 1)
                              : bd_error(BRAID_E_RANGE, "memory: batch row %d: token id %d", r, in->token[r]);
            break;
        }
        if (in->pos) {
            const braid_pos *p = in->pos + (size_t)r * np;
            for (uint32_t c = 0; c < np && st == BRAID_OK; c++)
                if (p[c] < 0 || p[c] > MEM_POS_MAX)
                    st = bd_error(BRAID_E_RANGE, "memory: batch row %d: position component %u = %d not in 0..%d", r, c,
                                  p[c], MEM_POS_MAX);
            if (st == BRAID_OK && p[0] < last[s])
                st = bd_error(BRAID_E_RANGE,
                              "memory: batch row %d: sequence %d goes back from position %d to %d (positions may "
                              "repeat, never decrease)",
                              r, s, last[s], p[0]);
            if (st == BRAID_OK) last[s] = p[0];
        }
        cnt[s]++;
        last_row[s] = r;
        if (st == BRAID_OK && !in->pos && (int64_t)hist_next_pos(&m->hist[s]) + cnt[s] - 1 > MEM_POS_MAX)
            st = bd_error(BRAID_E_RANGE, "memory: batch row %d: sequence %d's next position passes %d", r, s, MEM_POS_MAX);
        if (st == BRAID_OK && (int64_t)m->hist[s].len + cnt[s] > INT32_MAX / 2)
            st = bd_error(BRAID_E_RANGE, "memory: sequence %d would exceed %d inputs", s, INT32_MAX / 2);
    }
    if (st == BRAID_OK) {
        int32_t n_ub = (n + n_ubatch - 1) / n_ubatch, n_bs = 0;
        for (uint32_t s = 0; s < nseq; s++) n_bs += cnt[s] > 0;
        st = ub_alloc_rows(m, b, n, n_ub);
        if (st == BRAID_OK && !(b->bs = bd_calloc((size_t)n_bs, sizeof *b->bs)))
            st = bd_error(BRAID_E_NOMEM, "memory: out of memory for a batch");
    }
    if (st == BRAID_OK) {
        /* Pass 2: rows in ubatch order; cnt[] now counts each sequence's rows emitted so far and nextp[] (the
         * storage of last[], no longer needed) its next default position. */
        braid_pos *nextp = last;
        for (uint32_t s = 0; s < nseq; s++) {
            nextp[s] = hist_next_pos(&m->hist[s]);
            cnt[s] = 0;
        }
        int32_t out = 0, run = 0;
        for (int32_t u = 0; u < b->n_ub; u++) {
            int32_t r0 = u * n_ubatch, r1 = r0 + n_ubatch < n ? r0 + n_ubatch : n;
            b->ub_row0[u] = out;
            b->ub_run0[u] = run;
            for (int32_t r = r0; r < r1; r++) {
                int32_t s = in->seq ? in->seq[r] : 0;
                if (seen[s] == u + 1) continue; /* already emitted in this ubatch */
                /* Emit every row of s in [r, r1) as one run. */
                mem_run *ru = &b->runs[run++];
                ru->seq = s;
                ru->row0 = out - b->ub_row0[u];
                ru->idx0 = m->hist[s].len + cnt[s];
                if (bsi[s] == -1) {
                    bsi[s] = b->n_bs;
                    b->bs[b->n_bs++] = (mem_bseq){.s = s, .len0 = m->hist[s].len, .rb_lo = -1};
                }
                for (int32_t q = r; q < r1; q++) {
                    if ((in->seq ? in->seq[q] : 0) != s) continue;
                    b->token[out] = in->token ? in->token[q] : -1;
                    b->embd[out] = in->embd ? in->embd + (size_t)q * m->p.n_embd : NULL;
                    braid_pos *p = b->pos + (size_t)out * np;
                    if (in->pos) {
                        memcpy(p, in->pos + (size_t)q * np, np * sizeof *p);
                    } else {
                        for (uint32_t c = 0; c < np; c++) p[c] = np == 4 && c == 3 ? 0 : nextp[s];
                        nextp[s]++;
                    }
                    b->seq[out] = s;
                    b->idx[out] = m->hist[s].len + cnt[s]++;
                    b->batch_row[out] = q;
                    b->logits[out] = in->logits ? in->logits[q] != 0 : q == last_row[s];
                    out++;
                }
                ru->n_rows = out - b->ub_row0[u] - ru->row0;
                b->bs[bsi[s]].n_new = cnt[s];
                seen[s] = u + 1;
            }
        }
        b->ub_row0[b->n_ub] = out;
        b->ub_run0[b->n_ub] = run;
        b->n_runs = run;
    }
    bd_free(cnt);
    bd_free(last);
    bd_free(last_row);
    bd_free(bsi);
    bd_free(seen);
    return st;
}
