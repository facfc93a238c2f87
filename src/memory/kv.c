/* kv.c — the attention memory's cells (see kv.h). Every function here either only reads or cannot fail: the
 * memory (memory.c) checks capacity and arguments before it calls a mutating one. */
#include "memory/kv.h"

#include <string.h>

#include "base/alloc.h"
#include "base/status.h"

static inline uint64_t *cell_seqs(const kv_cache *kv, int32_t c) { return kv->seqs + (size_t)c * kv->n_words; }
static inline int has_seq(const kv_cache *kv, int32_t c, int32_t s) {
    return (int)((cell_seqs(kv, c)[s >> 6] >> (s & 63)) & 1u);
}

braid_status kv_new(uint32_t n_cells, uint32_t n_pos, uint32_t n_seq, braid_type type, uint32_t n_layers,
                    const uint32_t *n_embd_k, const uint32_t *n_embd_v, kv_cache **out) {
    *out = NULL;
    if (type != BRAID_TYPE_F32 && type != BRAID_TYPE_F16)
        return bd_error(BRAID_E_UNSUPPORTED, "kv: storage type %d (only F32 and F16)", (int)type);
    kv_cache *kv = bd_calloc(1, sizeof *kv);
    if (!kv) return bd_error(BRAID_E_NOMEM, "kv: out of memory");
    kv->n_cells = n_cells;
    kv->n_pos = n_pos;
    kv->n_layers = n_layers;
    kv->n_seq = n_seq;
    kv->n_words = (n_seq + 63) / 64;
    kv->type = type;
    kv->elt = type == BRAID_TYPE_F32 ? 4 : 2;
    kv->next_order = 1;
    int ok = (kv->n_embd_k = bd_mallocn(n_layers ? n_layers : 1, sizeof(uint32_t))) &&
             (kv->n_embd_v = bd_mallocn(n_layers ? n_layers : 1, sizeof(uint32_t))) &&
             (kv->k = bd_calloc(n_layers ? n_layers : 1, sizeof(uint8_t *))) &&
             (kv->v = bd_calloc(n_layers ? n_layers : 1, sizeof(uint8_t *))) &&
             (kv->pos = bd_calloc((size_t)n_cells * n_pos, sizeof(braid_pos))) &&
             (kv->pos_rot = bd_calloc((size_t)n_cells * n_pos, sizeof(braid_pos))) &&
             (kv->order = bd_calloc(n_cells, sizeof(uint64_t))) &&
             (kv->seqs = bd_calloc((size_t)n_cells * kv->n_words, sizeof(uint64_t))) &&
             (kv->n_ref = bd_calloc(n_cells, sizeof(uint32_t))) &&
             (kv->free_stack = bd_mallocn(n_cells, sizeof(int32_t))) &&
             (kv->lists = bd_mallocn((size_t)n_seq * n_cells, sizeof(int32_t))) &&
             (kv->len = bd_calloc(n_seq, sizeof(uint32_t)));
    for (uint32_t l = 0; ok && l < n_layers; l++) {
        kv->n_embd_k[l] = n_embd_k[l];
        kv->n_embd_v[l] = n_embd_v[l];
        ok = (kv->k[l] = bd_calloc(n_cells, kv_k_row(kv, l))) && (kv->v[l] = bd_calloc(n_cells, kv_v_row(kv, l)));
    }
    if (!ok) {
        kv_free(kv);
        return bd_error(BRAID_E_NOMEM, "kv: out of memory for %u cells", n_cells);
    }
    /* Lowest ids on top of the stack, so a fresh memory fills cells 0, 1, 2, ... */
    for (uint32_t i = 0; i < n_cells; i++) kv->free_stack[i] = (int32_t)(n_cells - 1 - i);
    kv->n_free = n_cells;
    *out = kv;
    return BRAID_OK;
}

void kv_free(kv_cache *kv) {
    if (!kv) return;
    for (uint32_t l = 0; l < kv->n_layers; l++) {
        if (kv->k) bd_free(kv->k[l]);
        if (kv->v) bd_free(kv->v[l]);
    }
    bd_free(kv->k);
    bd_free(kv->v);
    bd_free(kv->n_embd_k);
    bd_free(kv->n_embd_v);
    bd_free(kv->pos);
    bd_free(kv->pos_rot);
    bd_free(kv->order);
    bd_free(kv->seqs);
    bd_free(kv->n_ref);
    bd_free(kv->free_stack);
    bd_free(kv->lists);
    bd_free(kv->len);
    bd_free(kv);
}

void kv_take(kv_cache *kv, uint32_t n, int32_t *cells) {
    for (uint32_t i = 0; i < n; i++) cells[i] = kv->free_stack[--kv->n_free];
}

void kv_untake(kv_cache *kv, uint32_t n, const int32_t *cells) {
    for (uint32_t i = n; i-- > 0;) kv->free_stack[kv->n_free++] = cells[i];
}

/* s takes a hold on cell c (the one place that sets a sequence bit). */
static void hold(kv_cache *kv, int32_t s, int32_t c) {
    cell_seqs(kv, c)[s >> 6] |= (uint64_t)1 << (s & 63);
    kv->n_ref[c]++;
}

void kv_commit_cell(kv_cache *kv, int32_t s, const braid_pos *pos) {
    int32_t c = kv_list(kv, s)[kv->len[s]++];
    memcpy(kv_pos(kv, c), pos, kv->n_pos * sizeof(braid_pos));
    memcpy(kv_pos_rot(kv, c), pos, kv->n_pos * sizeof(braid_pos));
    kv->order[c] = kv->next_order++;
    kv->n_ref[c] = 0;
    hold(kv, s, c);
}

/* s lets go of cell c; the cell becomes free when nobody holds it. */
static void release(kv_cache *kv, int32_t s, int32_t c) {
    cell_seqs(kv, c)[s >> 6] &= ~((uint64_t)1 << (s & 63));
    if (--kv->n_ref[c] == 0) {
        kv->order[c] = 0;
        kv->free_stack[kv->n_free++] = c;
    }
}

void kv_truncate(kv_cache *kv, int32_t s, uint32_t n) {
    int32_t *list = kv_list(kv, s);
    /* Release from the tail so that the free stack returns the most recent cells first. */
    for (uint32_t i = kv->len[s]; i-- > n;) release(kv, s, list[i]);
    if (n < kv->len[s]) kv->len[s] = n;
}

void kv_remove(kv_cache *kv, int32_t s, uint32_t i0, uint32_t i1) {
    int32_t *list = kv_list(kv, s);
    for (uint32_t i = i1; i-- > i0;) release(kv, s, list[i]);
    memmove(list + i0, list + i1, (kv->len[s] - i1) * sizeof(int32_t));
    kv->len[s] -= i1 - i0;
}

uint32_t kv_count_shared(const kv_cache *kv, int32_t s, uint32_t i0, uint32_t i1) {
    const int32_t *list = kv_list(kv, s);
    uint32_t n = 0;
    for (uint32_t i = i0; i < i1; i++) n += kv->n_ref[list[i]] > 1;
    return n;
}

void kv_unshare(kv_cache *kv, int32_t s, uint32_t i0, uint32_t i1) {
    int32_t *list = kv_list(kv, s);
    for (uint32_t i = i0; i < i1; i++) {
        int32_t c = list[i];
        if (kv->n_ref[c] == 1) continue;
        int32_t d = kv->free_stack[--kv->n_free];
        for (uint32_t l = 0; l < kv->n_layers; l++) {
            memcpy(kv->k[l] + (size_t)d * kv_k_row(kv, l), kv->k[l] + (size_t)c * kv_k_row(kv, l), kv_k_row(kv, l));
            memcpy(kv->v[l] + (size_t)d * kv_v_row(kv, l), kv->v[l] + (size_t)c * kv_v_row(kv, l), kv_v_row(kv, l));
        }
        memcpy(kv_pos(kv, d), kv_pos(kv, c), kv->n_pos * sizeof(braid_pos));
        memcpy(kv_pos_rot(kv, d), kv_pos_rot(kv, c), kv->n_pos * sizeof(braid_pos));
        /* The copy keeps the stamp: it stands for the same input, so order along every list is unchanged. */
        kv->order[d] = kv->order[c];
        kv->n_ref[d] = 0;
        hold(kv, s, d);
        release(kv, s, c);
        list[i] = d;
    }
}

void kv_copy(kv_cache *kv, int32_t src, int32_t dst, uint32_t n) {
    kv_truncate(kv, dst, 0);
    const int32_t *ls = kv_list(kv, src);
    int32_t *ld = kv_list(kv, dst);
    for (uint32_t i = 0; i < n; i++) {
        int32_t c = ls[i];
        ld[i] = c;
        hold(kv, dst, c);
    }
    kv->len[dst] = n;
}

void kv_set_pos(kv_cache *kv, int32_t s, uint32_t i0, uint32_t i1, const braid_pos *pos) {
    const int32_t *list = kv_list(kv, s);
    for (uint32_t i = i0; i < i1; i++)
        memcpy(kv_pos(kv, list[i]), pos + (size_t)(i - i0) * kv->n_pos, kv->n_pos * sizeof(braid_pos));
    if (i1 > i0) kv->maybe_stale = 1;
}

void kv_adopt_cells(kv_cache *kv, uint32_t n, const uint8_t *pos, const uint8_t *rows, int32_t *cells) {
    const size_t pb = kv->n_pos * sizeof(braid_pos);
    for (uint32_t c = 0; c < n; c++) {
        int32_t d = kv->free_stack[--kv->n_free];
        cells[c] = d;
        memcpy(kv_pos(kv, d), pos + (size_t)c * 2 * pb, pb);
        memcpy(kv_pos_rot(kv, d), pos + (size_t)c * 2 * pb + pb, pb);
        kv->order[d] = kv->next_order++;
        kv->n_ref[d] = 0;
    }
    if (n) kv->maybe_stale = 1; /* saved cells may carry positions their K rows are not rotated for yet */
    for (uint32_t l = 0; l < kv->n_layers; l++) {
        for (uint32_t c = 0; c < n; c++, rows += kv_k_row(kv, l))
            memcpy(kv->k[l] + (size_t)cells[c] * kv_k_row(kv, l), rows, kv_k_row(kv, l));
        for (uint32_t c = 0; c < n; c++, rows += kv_v_row(kv, l))
            memcpy(kv->v[l] + (size_t)cells[c] * kv_v_row(kv, l), rows, kv_v_row(kv, l));
    }
}

void kv_adopt_seq(kv_cache *kv, int32_t s, const int32_t *cells, uint32_t n) {
    int32_t *list = kv_list(kv, s);
    for (uint32_t i = 0; i < n; i++) {
        list[i] = cells[i];
        hold(kv, s, cells[i]);
    }
    kv->len[s] = n;
}

uint32_t kv_count_exclusive(const kv_cache *kv, int32_t s) {
    const int32_t *list = kv_list(kv, s);
    uint32_t n = 0;
    for (uint32_t i = 0; i < kv->len[s]; i++) n += kv->n_ref[list[i]] == 1;
    return n;
}

uint32_t kv_count_stale(const kv_cache *kv) {
    uint32_t n = 0;
    for (uint32_t c = 0; c < kv->n_cells; c++)
        if (kv->order[c] && memcmp(kv_pos(kv, (int32_t)c), kv_pos_rot(kv, (int32_t)c), kv->n_pos * sizeof(braid_pos)))
            n++;
    return n;
}

int32_t kv_next_stale(const kv_cache *kv, int32_t c) {
    for (; (uint32_t)c < kv->n_cells; c++)
        if (kv->order[c] && memcmp(kv_pos(kv, c), kv_pos_rot(kv, c), kv->n_pos * sizeof(braid_pos))) return c;
    return -1;
}

void kv_mark_rotated(kv_cache *kv, int32_t c) { memcpy(kv_pos_rot(kv, c), kv_pos(kv, c), kv->n_pos * sizeof(braid_pos)); }

void kv_all_rotated(kv_cache *kv) { kv->maybe_stale = 0; }

braid_status kv_check(const kv_cache *kv) {
    /* No allocation here: debug builds run this after every operation, failure injection included. Each list
     * entry must be a used cell marked for its sequence, stamps strictly increase along a list (so a list has
     * no repeats), and the marks add up to the list entries (so every mark has its entry). */
    uint64_t entries = 0, marks = 0, used = 0;
    for (uint32_t s = 0; s < kv->n_seq; s++) {
        const int32_t *list = kv_list(kv, (int32_t)s);
        for (uint32_t i = 0; i < kv->len[s]; i++) {
            int32_t c = list[i];
            if (c < 0 || (uint32_t)c >= kv->n_cells)
                return bd_error(BRAID_E_INVALID, "kv: seq %u entry %u: bad cell %d", s, i, c);
            if (!kv->order[c] || !has_seq(kv, c, (int32_t)s))
                return bd_error(BRAID_E_INVALID, "kv: seq %u entry %u: cell %d free or not marked", s, i, c);
            if (i > 0 && kv->order[list[i - 1]] >= kv->order[c])
                return bd_error(BRAID_E_INVALID, "kv: seq %u entry %u: order stamps do not increase", s, i);
        }
        entries += kv->len[s];
    }
    for (uint32_t c = 0; c < kv->n_cells; c++) {
        uint32_t bits = 0;
        for (uint32_t w = 0; w < kv->n_words; w++) bits += (uint32_t)__builtin_popcountll(cell_seqs(kv, (int32_t)c)[w]);
        if (bits != kv->n_ref[c] || (bits == 0) != (kv->order[c] == 0))
            return bd_error(BRAID_E_INVALID, "kv: cell %u: %u seq marks, n_ref %u, order %llu", c, bits, kv->n_ref[c],
                            (unsigned long long)kv->order[c]);
        if (kv->order[c] >= kv->next_order) return bd_error(BRAID_E_INVALID, "kv: cell %u: stamp from the future", c);
        marks += bits;
        used += bits > 0;
    }
    if (marks != entries) return bd_error(BRAID_E_INVALID, "kv: %llu seq marks for %llu list entries",
                                          (unsigned long long)marks, (unsigned long long)entries);
    if (used + kv->n_free != kv->n_cells)
        return bd_error(BRAID_E_INVALID, "kv: %llu used + %u free != %u cells", (unsigned long long)used, kv->n_free, kv->n_cells);
    for (uint32_t i = 0; i < kv->n_free; i++) {
        int32_t c = kv->free_stack[i];
        if (c < 0 || (uint32_t)c >= kv->n_cells || kv->order[c])
            return bd_error(BRAID_E_INVALID, "kv: free stack entry %u: cell %d is not free", i, c);
    }
    if (!kv->maybe_stale && kv_count_stale(kv))
        return bd_error(BRAID_E_INVALID, "kv: %u stale cells but no rotation pending", kv_count_stale(kv));
    return BRAID_OK;
}
