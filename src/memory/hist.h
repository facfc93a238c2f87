/* hist.h — one sequence's input history: token ids (or embedding rows) and positions of every input in order,
 * kept so that a truncation or copy can replay inputs from a checkpoint and a state can be saved. A leaf of
 * the memory like kv.h and rs.h: it knows nothing of cells or states, and only hist.c writes its fields.
 *
 * Capacity and content are separate: hist_reserve grows the arrays (the only call that can fail), the calls
 * that change the content assume the capacity is there, so the memory can check everything before it changes
 * anything (design.md §3). */
#ifndef BRAID_MEMORY_HIST_H
#define BRAID_MEMORY_HIST_H

#include <stddef.h>
#include <stdint.h>

#include "braid.h"

typedef struct mem_hist {
    uint32_t n_pos;   /* position components per input (1, or 4 for M-RoPE) */
    uint32_t n_embd;  /* floats of an embedding row (0: tokens only) */
    int32_t len, cap;
    braid_token *tok; /* [cap] token id, -1 for an embedding input */
    braid_pos *pos;   /* [cap][n_pos] */
    int32_t *erow;    /* [cap] row of embd for an embedding input, -1 for a token */
    float *embd;      /* [ecap][n_embd] embedding rows, in input order */
    int32_t n_erow, ecap;
} mem_hist;

/* An empty history for inputs of n_pos position components and n_embd-float embedding rows. */
void hist_init(mem_hist *h, uint32_t n_pos, uint32_t n_embd);
void hist_free(mem_hist *h); /* releases the arrays; h is empty again */

static inline braid_pos *hist_pos(const mem_hist *h, int32_t i) { return h->pos + (size_t)i * h->n_pos; }
static inline const float *hist_embd(const mem_hist *h, int32_t i) {
    return h->erow[i] >= 0 ? h->embd + (size_t)h->erow[i] * h->n_embd : NULL;
}
/* Embedding inputs among the first n. */
int32_t hist_count_erows(const mem_hist *h, int32_t n);
/* Position the next text input gets: 1 + max(t, y, x) of the last input (0 when empty). */
braid_pos hist_next_pos(const mem_hist *h);

/* Grows h to hold `len` inputs of which `n_erow` embedding rows (capacity only). */
braid_status hist_reserve(mem_hist *h, int32_t len, int32_t n_erow);
void hist_truncate(mem_hist *h, int32_t n);
void hist_remove(mem_hist *h, int32_t i0, int32_t i1);
/* Appends one input (capacity reserved). */
void hist_push(mem_hist *h, braid_token tok, const braid_pos *pos, const float *embd);
/* Copies the first n inputs of src into dst (capacity reserved), replacing dst's content. */
void hist_copy(mem_hist *dst, const mem_hist *src, int32_t n);
/* Adds d to (divides by k >= 1 when k != 0) the first nc position components of inputs [i0, i1). */
void hist_edit_pos(mem_hist *h, int32_t i0, int32_t i1, uint32_t nc, braid_pos d, int32_t k);

/* Replaces h's arrays by ones the caller allocated with bd_malloc (a state load): tok and pos hold len inputs,
 * embd n_erow rows; erow is rebuilt from tok (an embedding input has token -1). h owns them afterwards. */
void hist_adopt(mem_hist *h, braid_token *tok, braid_pos *pos, int32_t *erow, float *embd, int32_t len,
                int32_t n_erow);

/* Verifies h's invariants (lengths, token/embedding rows, temporal positions never decreasing); seq names h
 * in the reason. BRAID_E_INVALID on the first broken one. */
braid_status hist_check(const mem_hist *h, uint32_t seq);

#endif
