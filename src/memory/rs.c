/* rs.c — recurrent state blocks, rollback buffers, checkpoints and the checkpoint eviction policy (see rs.h).
 *
 * Eviction policy: when the checkpoints of all sequences exceed the budget, the one evicted is the one whose
 * removal leaves the smallest gap relative to its age: for a checkpoint at c between its neighbours p < c < q
 * (p = 0 when none: the zero state; q = the sequence length when none) the score is (q - p) / (len - c + 1),
 * the smallest score goes first. Near the end of a sequence ages are small, so checkpoints stay dense there;
 * far back the spacing grows in proportion to the age, so old checkpoints thin out geometrically and the
 * replay cost of a truncation stays about proportional to how far back it goes. */
#include "memory/rs.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"

braid_status rs_new(uint32_t n_seq, uint32_t n_layers, const uint64_t *n_conv, const uint64_t *n_ssm,
                    uint32_t n_rollback, uint32_t ck_interval, uint64_t ck_budget, rs_mem **out) {
    *out = NULL;
    rs_mem *rs = bd_calloc(1, sizeof *rs);
    if (!rs) return bd_error(BRAID_E_NOMEM, "rs: out of memory");
    rs->n_layers = n_layers;
    rs->n_seq = n_seq;
    rs->n_rollback = n_rollback;
    rs->ck_interval = ck_interval;
    rs->ck_budget = ck_budget;
    rs->pool_cap = n_seq + n_rollback + 2;
    int ok = (rs->n_conv = bd_mallocn(n_layers, sizeof(uint64_t))) &&
             (rs->n_ssm = bd_mallocn(n_layers, sizeof(uint64_t))) &&
             (rs->off_conv = bd_mallocn(n_layers, sizeof(size_t))) &&
             (rs->off_ssm = bd_mallocn(n_layers, sizeof(size_t))) &&
             (rs->seq = bd_calloc(n_seq, sizeof(rs_seq))) && (rs->pool = bd_mallocn(rs->pool_cap, sizeof(float *)));
    size_t off = 0;
    for (uint32_t l = 0; ok && l < n_layers; l++) {
        rs->n_conv[l] = n_conv[l];
        rs->n_ssm[l] = n_ssm[l];
        rs->off_conv[l] = off;
        off += n_conv[l];
        rs->off_ssm[l] = off;
        off += n_ssm[l];
    }
    rs->block_floats = off;
    rs->block_bytes = off * sizeof(float);
    rs->ck_max = rs->block_bytes ? ck_budget / rs->block_bytes : 0;
    if (ok) ok = (rs->zero = bd_aligned_alloc(64, rs->block_bytes)) != NULL;
    if (ok) memset(rs->zero, 0, rs->block_bytes);
    for (uint32_t s = 0; ok && s < n_seq; s++) ok = (rs->seq[s].rb = bd_calloc(n_rollback + 1, sizeof(float *))) != NULL;
    if (!ok) {
        rs_free(rs);
        return bd_error(BRAID_E_NOMEM, "rs: out of memory");
    }
    *out = rs;
    return BRAID_OK;
}

void rs_free(rs_mem *rs) {
    if (!rs) return;
    for (uint32_t s = 0; rs->seq && s < rs->n_seq; s++) {
        rs_seq *q = &rs->seq[s];
        bd_free(q->live);
        for (int32_t i = 0; q->rb && i < q->rb_n; i++) bd_free(q->rb[i]);
        bd_free(q->rb);
        for (int32_t i = 0; i < q->n_ck; i++) bd_free(q->ck[i].blk);
        bd_free(q->ck);
        bd_free(q->mark);
    }
    for (uint32_t i = 0; i < rs->n_pool; i++) bd_free(rs->pool[i]);
    bd_free(rs->pool);
    bd_free(rs->seq);
    bd_free(rs->zero);
    bd_free(rs->n_conv);
    bd_free(rs->n_ssm);
    bd_free(rs->off_conv);
    bd_free(rs->off_ssm);
    bd_free(rs);
}

float *rs_get(rs_mem *rs) {
    if (rs->n_pool) return rs->pool[--rs->n_pool];
    float *b = bd_aligned_alloc(64, rs->block_bytes);
    if (!b) bd_error(BRAID_E_NOMEM, "rs: out of memory for a state block of %zu bytes", rs->block_bytes);
    return b;
}

void rs_put(rs_mem *rs, float *blk) {
    if (!blk) return;
    if (rs->n_pool < rs->pool_cap)
        rs->pool[rs->n_pool++] = blk;
    else
        bd_free(blk);
}

braid_status rs_ck_reserve(rs_mem *rs, int32_t s, int32_t extra) {
    rs_seq *q = &rs->seq[s];
    if (q->n_ck + extra <= q->ck_cap) return BRAID_OK;
    int32_t cap = q->ck_cap ? q->ck_cap : 4;
    while (cap < q->n_ck + extra) cap *= 2;
    rs_ckpt *ck = bd_realloc(q->ck, (size_t)cap * sizeof *ck);
    if (!ck) return bd_error(BRAID_E_NOMEM, "rs: out of memory for checkpoints of seq %d", s);
    q->ck = ck;
    q->ck_cap = cap;
    return BRAID_OK;
}

int32_t rs_ck_find(const rs_mem *rs, int32_t s, int32_t idx) {
    const rs_seq *q = &rs->seq[s];
    for (int32_t i = 0; i < q->n_ck; i++)
        if (q->ck[i].idx == idx) return i;
    return -1;
}

int32_t rs_ck_floor(const rs_mem *rs, int32_t s, int32_t idx) {
    const rs_seq *q = &rs->seq[s];
    int32_t best = -1;
    for (int32_t i = 0; i < q->n_ck && q->ck[i].idx <= idx; i++) best = i;
    return best;
}

void rs_ck_insert(rs_mem *rs, int32_t s, int32_t idx, float *blk) {
    rs_seq *q = &rs->seq[s];
    int32_t i = q->n_ck;
    while (i > 0 && q->ck[i - 1].idx > idx) {
        q->ck[i] = q->ck[i - 1];
        i--;
    }
    q->ck[i].idx = idx;
    q->ck[i].blk = blk;
    q->n_ck++;
    rs->n_ck_total++;
}

void rs_ck_drop(rs_mem *rs, int32_t s, int32_t i) {
    rs_seq *q = &rs->seq[s];
    rs_put(rs, q->ck[i].blk);
    memmove(q->ck + i, q->ck + i + 1, (size_t)(q->n_ck - i - 1) * sizeof *q->ck);
    q->n_ck--;
    rs->n_ck_total--;
}

void rs_ck_drop_after(rs_mem *rs, int32_t s, int32_t n) {
    rs_seq *q = &rs->seq[s];
    while (q->n_ck > 0 && q->ck[q->n_ck - 1].idx > n) rs_ck_drop(rs, s, q->n_ck - 1);
}

void rs_rb_drop_after(rs_mem *rs, int32_t s, int32_t n) {
    rs_seq *q = &rs->seq[s];
    while (q->rb_n > 0 && q->rb_lo + q->rb_n - 1 > n) {
        q->rb_n--;
        rs_put(rs, q->rb[q->rb_n]);
        q->rb[q->rb_n] = NULL;
    }
    if (q->rb_n == 0) q->rb_lo = 0;
}

void rs_set_live(rs_mem *rs, int32_t s, float *blk) {
    rs_put(rs, rs->seq[s].live);
    rs->seq[s].live = blk;
}

float *rs_rb_take(rs_mem *rs, int32_t s, int32_t idx) {
    rs_seq *q = &rs->seq[s];
    float *b = q->rb[idx - q->rb_lo];
    q->rb[idx - q->rb_lo] = NULL;
    return b;
}

void rs_advance(rs_mem *rs, int32_t s, float *work, int32_t rb_lo, int keep_live, float *const *snap, int32_t n_snap) {
    rs_seq *q = &rs->seq[s];
    rs_rb_drop_after(rs, s, -1);
    if (rb_lo >= 0) {
        int32_t n = 0;
        if (keep_live)
            q->rb[n++] = q->live;
        else
            rs_put(rs, q->live);
        for (int32_t k = 0; k < n_snap; k++) q->rb[n++] = snap[k];
        q->rb_lo = rb_lo;
        q->rb_n = n;
    } else {
        rs_put(rs, q->live);
    }
    q->live = work;
}

void rs_ck_remove_range(rs_mem *rs, int32_t s, int32_t i0, int32_t i1) {
    rs_seq *q = &rs->seq[s];
    for (int32_t i = q->n_ck; i-- > 0;) {
        if (q->ck[i].idx > i1)
            q->ck[i].idx -= i1 - i0;
        else if (q->ck[i].idx > i0)
            rs_ck_drop(rs, s, i);
    }
}

void rs_adopt_seq(rs_mem *rs, int32_t s, float *live, float **rb, int32_t rb_lo, int32_t rb_n, rs_ckpt *ck,
                  int32_t n_ck, int32_t ck_cap) {
    rs_seq *q = &rs->seq[s];
    q->live = live;
    bd_free(q->rb);
    q->rb = rb;
    q->rb_n = rb_n;
    q->rb_lo = rb_n ? rb_lo : 0;
    bd_free(q->ck);
    q->ck = ck;
    q->n_ck = n_ck;
    q->ck_cap = ck_cap;
    rs->n_ck_total += (uint64_t)n_ck;
}

static int idx_cmp(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

braid_status rs_mark_set(rs_mem *rs, int32_t s, const int32_t *idx, int32_t n) {
    rs_seq *q = &rs->seq[s];
    int32_t *mk = NULL;
    if (n > 0) {
        if (!(mk = bd_mallocn((size_t)n, sizeof *mk))) return bd_error(BRAID_E_NOMEM, "memory: out of memory for marks");
        memcpy(mk, idx, (size_t)n * sizeof *mk);
        qsort(mk, (size_t)n, sizeof *mk, idx_cmp);
        int32_t k = 0;
        for (int32_t i = 0; i < n; i++)
            if (mk[i] > 0 && (k == 0 || mk[i] != mk[k - 1])) mk[k++] = mk[i];
        n = k;
    }
    bd_free(q->mark);
    q->mark = mk;
    q->n_mark = n > 0 ? n : 0;
    return BRAID_OK;
}

int rs_marked(const rs_mem *rs, int32_t s, int32_t idx) {
    const rs_seq *q = &rs->seq[s];
    int32_t lo = 0, hi = q->n_mark;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (q->mark[mid] < idx)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < q->n_mark && q->mark[lo] == idx;
}

void rs_clear(rs_mem *rs, int32_t s) {
    rs_seq *q = &rs->seq[s];
    rs_put(rs, q->live);
    q->live = NULL;
    rs_rb_drop_after(rs, s, -1);
    while (q->n_ck) rs_ck_drop(rs, s, q->n_ck - 1);
    bd_free(q->mark);
    q->mark = NULL;
    q->n_mark = 0;
}

/* ---- eviction planning ---------------------------------------------------------------------------------- */

typedef struct plan_item {
    int32_t seq, idx;
    int32_t cand;       /* candidate number, or -1 for an existing checkpoint */
    int32_t prev, next; /* neighbours in the same sequence among the alive items (-1: none) */
    uint8_t alive;
} plan_item;

static int item_cmp(const void *a, const void *b) {
    const plan_item *x = a, *y = b;
    if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

braid_status rs_ck_plan(const rs_mem *rs, const int32_t *lens, const rs_cand *cand, int32_t n_cand,
                        rs_cand *victims, int32_t *n_victims, uint8_t *keep) {
    return rs_ck_plan_ex(rs, lens, cand, n_cand, -1, victims, n_victims, keep);
}

braid_status rs_ck_plan_ex(const rs_mem *rs, const int32_t *lens, const rs_cand *cand, int32_t n_cand, int32_t gone,
                           rs_cand *victims, int32_t *n_victims, uint8_t *keep) {
    *n_victims = 0;
    for (int32_t j = 0; j < n_cand; j++) keep[j] = 1;
    uint64_t existing = 0;
    for (uint32_t s = 0; s < rs->n_seq; s++)
        if (gone != -2 && (int32_t)s != gone) existing += (uint64_t)rs->seq[s].n_ck;
    uint64_t total = existing + (uint64_t)n_cand;
    if (total <= rs->ck_max) return BRAID_OK;
    plan_item *it = bd_mallocn(total, sizeof *it);
    if (!it) return bd_error(BRAID_E_NOMEM, "rs: out of memory planning checkpoint eviction");
    size_t n = 0;
    for (uint32_t s = 0; s < rs->n_seq; s++)
        for (int32_t i = 0; gone != -2 && (int32_t)s != gone && i < rs->seq[s].n_ck; i++)
            it[n++] = (plan_item){.seq = (int32_t)s, .idx = rs->seq[s].ck[i].idx, .cand = -1, .alive = 1};
    for (int32_t j = 0; j < n_cand; j++) it[n++] = (plan_item){.seq = cand[j].seq, .idx = cand[j].idx, .cand = j, .alive = 1};
    qsort(it, n, sizeof *it, item_cmp);
    for (size_t i = 0; i < n; i++) {
        it[i].prev = i > 0 && it[i - 1].seq == it[i].seq ? (int32_t)i - 1 : -1;
        it[i].next = i + 1 < n && it[i + 1].seq == it[i].seq ? (int32_t)i + 1 : -1;
    }
    while (total > rs->ck_max) {
        /* Find the alive item with the smallest (q - p) / (len - c + 1); ties: older index, lower sequence. A
         * new checkpoint at the very end of its sequence is only taken when nothing else is left. */
        int32_t best = -1;
        uint64_t bg = 0, ba = 0;
        for (int pass = 0; pass < 2 && best < 0; pass++)
            for (size_t i = 0; i < n; i++) {
                if (!it[i].alive) continue;
                int32_t L = lens[it[i].seq];
                if (pass == 0 && it[i].cand >= 0 && it[i].idx >= L) continue;
                int32_t p = it[i].prev >= 0 ? it[it[i].prev].idx : 0;
                int32_t q = it[i].next >= 0 ? it[it[i].next].idx : (L > it[i].idx ? L : it[i].idx);
                uint64_t g = (uint64_t)(q - p), a = (uint64_t)(L > it[i].idx ? L - it[i].idx : 0) + 1;
                if (best < 0 || g * ba < bg * a ||
                    (g * ba == bg * a &&
                     (it[i].idx < it[best].idx || (it[i].idx == it[best].idx && it[i].seq < it[best].seq)))) {
                    best = (int32_t)i;
                    bg = g;
                    ba = a;
                }
            }
        plan_item *b = &it[best];
        b->alive = 0;
        if (b->prev >= 0) it[b->prev].next = b->next;
        if (b->next >= 0) it[b->next].prev = b->prev;
        if (b->cand >= 0)
            keep[b->cand] = 0;
        else
            victims[(*n_victims)++] = (rs_cand){b->seq, b->idx};
        total--;
    }
    bd_free(it);
    return BRAID_OK;
}

braid_status rs_ck_copy_plan(rs_mem *rs, const int32_t *lens, int32_t src, int32_t dst, int32_t n, rs_ck_copy *out) {
    memset(out, 0, sizeof *out);
    const rs_seq *q = &rs->seq[src];
    int32_t nc = 0;
    while (nc < q->n_ck && q->ck[nc].idx <= n) nc++; /* ascending: the first nc are the ones to copy */
    if (nc == 0 || rs->ck_max == 0) return BRAID_OK;
    rs_cand *cand = bd_mallocn((size_t)nc, sizeof *cand);
    uint8_t *keep = bd_mallocn((size_t)nc, 1);
    out->victims = bd_mallocn(rs->n_ck_total + 1, sizeof *out->victims);
    out->ck = bd_mallocn((size_t)nc, sizeof *out->ck);
    braid_status st = cand && keep && out->victims && out->ck
                          ? BRAID_OK
                          : bd_error(BRAID_E_NOMEM, "rs: out of memory copying checkpoints");
    for (int32_t j = 0; st == BRAID_OK && j < nc; j++) cand[j] = (rs_cand){dst, q->ck[j].idx};
    if (st == BRAID_OK) st = rs_ck_plan_ex(rs, lens, cand, nc, dst, out->victims, &out->n_victims, keep);
    int32_t nk = 0;
    for (int32_t j = 0; st == BRAID_OK && j < nc; j++) nk += keep[j];
    if (st == BRAID_OK) st = rs_ck_reserve(rs, dst, nk);
    for (int32_t j = 0; st == BRAID_OK && j < nc; j++) {
        if (!keep[j]) continue;
        float *blk = rs_get(rs);
        if (!blk) {
            st = BRAID_E_NOMEM;
            break;
        }
        memcpy(blk, q->ck[j].blk, rs->block_bytes);
        out->ck[out->n++] = (rs_ckpt){q->ck[j].idx, blk};
    }
    bd_free(cand);
    bd_free(keep);
    if (st != BRAID_OK) rs_ck_copy_release(rs, out);
    return st;
}

void rs_ck_copy_apply(rs_mem *rs, int32_t dst, rs_ck_copy *c) {
    for (int32_t v = 0; v < c->n_victims; v++)
        rs_ck_drop(rs, c->victims[v].seq, rs_ck_find(rs, c->victims[v].seq, c->victims[v].idx));
    for (int32_t i = 0; i < c->n; i++) rs_ck_insert(rs, dst, c->ck[i].idx, c->ck[i].blk);
    c->n = 0;
    rs_ck_copy_release(rs, c);
}

void rs_ck_copy_release(rs_mem *rs, rs_ck_copy *c) {
    for (int32_t i = 0; i < c->n; i++) rs_put(rs, c->ck[i].blk);
    bd_free(c->ck);
    bd_free(c->victims);
    memset(c, 0, sizeof *c);
}

braid_status rs_check_seq(const rs_mem *rs, int32_t s, int32_t L) {
    const rs_seq *q = &rs->seq[s];
    if (L > 0 && !q->live) return bd_error(BRAID_E_INVALID, "rs: seq %d has %d inputs but no live state", s, L);
    if (q->rb_n < 0 || (uint32_t)q->rb_n > rs->n_rollback + 1)
        return bd_error(BRAID_E_INVALID, "rs: seq %d: %d rollback states", s, q->rb_n);
    if (q->rb_n > 0 && (q->rb_lo < 0 || q->rb_lo + q->rb_n != L))
        return bd_error(BRAID_E_INVALID, "rs: seq %d: rollback [%d, %d) does not end at the length %d", s, q->rb_lo,
                        q->rb_lo + q->rb_n, L);
    for (int32_t i = 0; i < q->n_ck; i++) {
        if (q->ck[i].idx <= 0 || q->ck[i].idx > L || !q->ck[i].blk)
            return bd_error(BRAID_E_INVALID, "rs: seq %d: checkpoint %d at index %d (length %d)", s, i, q->ck[i].idx, L);
        if (i > 0 && q->ck[i - 1].idx >= q->ck[i].idx)
            return bd_error(BRAID_E_INVALID, "rs: seq %d: checkpoints not ascending", s);
    }
    return BRAID_OK;
}

braid_status rs_check_total(const rs_mem *rs) {
    uint64_t total = 0;
    for (uint32_t s = 0; s < rs->n_seq; s++) total += (uint64_t)rs->seq[s].n_ck;
    if (total != rs->n_ck_total) return bd_error(BRAID_E_INVALID, "rs: checkpoint count %llu != %llu",
                                                 (unsigned long long)total, (unsigned long long)rs->n_ck_total);
    if (total > rs->ck_max) return bd_error(BRAID_E_INVALID, "rs: %llu checkpoints over the budget of %llu",
                                            (unsigned long long)total, (unsigned long long)rs->ck_max);
    return BRAID_OK;
}
