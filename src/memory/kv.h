/* kv.h — the attention memory: cells that hold one input's K and V rows for every attention layer.
 *
 * A cell has RoPE positions (n_pos components), the positions its K rows are currently rotated for (they differ
 * after a shift/div until the engine re-rotates), an order stamp (a global counter at insertion: causal order,
 * never positions), and the set of sequences that hold it (more than one after a copy: shared prefixes). Each
 * sequence keeps its own list of cell ids in input order, so length, index -> cell and truncation are O(1)/O(k)
 * and a query's visible cells are a prefix of that list. Free cells form a stack: any free cell can take any
 * input, so placement never fails while a free cell exists (no fragmentation, no defrag).
 *
 * These functions do not validate arguments or check capacity: the memory (memory.c) checks everything
 * first and only then calls the ones that change state, which cannot fail. */
#ifndef BRAID_MEMORY_KV_H
#define BRAID_MEMORY_KV_H

#include <stddef.h>
#include <stdint.h>

#include "braid.h"

typedef struct kv_cache {
    uint32_t n_cells, n_pos, n_layers, n_seq, n_words;
    braid_type type;
    size_t elt;            /* bytes per element: 4 (F32) or 2 (F16) */
    uint32_t *n_embd_k;    /* [n_layers] */
    uint32_t *n_embd_v;    /* [n_layers] */
    uint8_t **k;           /* [n_layers] -> [n_cells][n_embd_k[l] * elt] */
    uint8_t **v;           /* [n_layers] -> [n_cells][n_embd_v[l] * elt] */
    braid_pos *pos;        /* [n_cells][n_pos] current positions */
    braid_pos *pos_rot;    /* [n_cells][n_pos] positions the K rows are rotated for */
    uint64_t *order;       /* [n_cells] order stamp; 0 = free cell */
    uint64_t *seqs;        /* [n_cells][n_words] bitset of sequences holding the cell */
    uint32_t *n_ref;       /* [n_cells] number of sequences holding the cell */
    int32_t *free_stack;   /* [n_cells] free cell ids; the top is free_stack[n_free - 1] */
    uint32_t n_free;
    int32_t *lists;        /* [n_seq][n_cells] each sequence's cell ids in input order */
    uint32_t *len;         /* [n_seq] committed length of each list */
    uint64_t next_order;   /* next stamp (starts at 1) */
    int maybe_stale;       /* set when positions may differ from pos_rot (edit, load); cleared by a full rotate */
} kv_cache;

/* Allocates every cell (K/V rows zeroed). Arrays are copied. Caller frees with kv_free. */
braid_status kv_new(uint32_t n_cells, uint32_t n_pos, uint32_t n_seq, braid_type type, uint32_t n_layers,
                    const uint32_t *n_embd_k, const uint32_t *n_embd_v, kv_cache **out);
void kv_free(kv_cache *kv);

static inline int32_t *kv_list(const kv_cache *kv, int32_t s) { return kv->lists + (size_t)s * kv->n_cells; }
static inline size_t kv_k_row(const kv_cache *kv, uint32_t l) { return (size_t)kv->n_embd_k[l] * kv->elt; }
static inline size_t kv_v_row(const kv_cache *kv, uint32_t l) { return (size_t)kv->n_embd_v[l] * kv->elt; }
static inline braid_pos *kv_pos(const kv_cache *kv, int32_t c) { return kv->pos + (size_t)c * kv->n_pos; }
static inline braid_pos *kv_pos_rot(const kv_cache *kv, int32_t c) { return kv->pos_rot + (size_t)c * kv->n_pos; }

/* Pops n free cells into cells[] (n <= n_free). They stay invisible (order 0, no sequence) until
 * kv_commit_cells; kv_untake gives them back in the reverse order so the stack is exactly as before. */
void kv_take(kv_cache *kv, uint32_t n, int32_t *cells);
void kv_untake(kv_cache *kv, uint32_t n, const int32_t *cells);
/* Appends one taken cell to s: list[s][len] must already hold it (written at reservation). Sets its positions
 * (pos: [n_pos]) as current and rotated-for, stamps it and adds s. */
void kv_commit_cell(kv_cache *kv, int32_t s, const braid_pos *pos);

/* Keeps the first n cells of s (the others lose s; a cell no sequence holds becomes free). */
void kv_truncate(kv_cache *kv, int32_t s, uint32_t n);
/* Drops list entries [i0, i1) of s. */
void kv_remove(kv_cache *kv, int32_t s, uint32_t i0, uint32_t i1);
/* Number of cells among s's entries [i0, i1) that another sequence also holds (each needs a free cell before
 * its positions can change for s alone). */
uint32_t kv_count_shared(const kv_cache *kv, int32_t s, uint32_t i0, uint32_t i1);
/* Gives s its own copy of every shared cell among entries [i0, i1) (same rows, positions and order stamp).
 * Needs kv_count_shared free cells. */
void kv_unshare(kv_cache *kv, int32_t s, uint32_t i0, uint32_t i1);
/* dst's list becomes src's first n entries (shared); dst's old cells are dropped first. */
void kv_copy(kv_cache *kv, int32_t src, int32_t dst, uint32_t n);
/* Sets the current positions of s's entries [i0, i1) from pos ([i1 - i0][n_pos]); the cells must be s's
 * alone (kv_unshare first). Their K rows become stale until re-rotated. */
void kv_set_pos(kv_cache *kv, int32_t s, uint32_t i0, uint32_t i1, const braid_pos *pos);
/* State load and cache restore: kv_adopt_cells takes n free cells (n <= n_free) into cells[] and fills each
 * from the saved form: pos holds, per cell, n_pos current positions then n_pos rotated-for positions (int32
 * little-endian, as braid_pos on the supported hosts); rows holds, layer by layer, the n K rows then the n V
 * rows. The cells get fresh order stamps in the given order and no holder yet. kv_adopt_seq then makes s
 * (empty) hold cells[0 .. n) in that order. */
void kv_adopt_cells(kv_cache *kv, uint32_t n, const uint8_t *pos, const uint8_t *rows, int32_t *cells);
void kv_adopt_seq(kv_cache *kv, int32_t s, const int32_t *cells, uint32_t n);
/* Number of cells that only s holds (they become free when s is cleared or replaced). */
uint32_t kv_count_exclusive(const kv_cache *kv, int32_t s);
/* Number of cells with pos != pos_rot. */
uint32_t kv_count_stale(const kv_cache *kv);

/* Re-rotation: the first stale cell (held, pos != pos_rot) at or after c, or -1; mark one cell's K rows as
 * rotated for its current positions; and, after every stale cell was marked, clear the "maybe stale" flag. */
int32_t kv_next_stale(const kv_cache *kv, int32_t c);
void kv_mark_rotated(kv_cache *kv, int32_t c);
void kv_all_rotated(kv_cache *kv);

/* Verifies every invariant; BRAID_E_INVALID with the reason. */
braid_status kv_check(const kv_cache *kv);

#endif
