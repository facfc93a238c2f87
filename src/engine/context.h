/* context.h — struct braid_context: the memory of up to n_seq_max sequences (attention cells, recurrent states,
 * checkpoints, rollback buffers, input histories), the scratch of the forward pass and the last logits.
 *
 * This is the engine's own, simplest-correct memory (design.md §2-§5), written while src/memory/ is built in
 * parallel; the forward pass sees it only through bd_fwd_memory (models/arch.h), so it can be swapped.
 *
 * - Attention cells: n_ctx cells with K/V rows per attention layer, RoPE positions, and the set of sequences
 *   sharing the cell (a bit mask; prefix sharing after a copy). Each sequence keeps its cells in input order,
 *   so visibility is a prefix of that list (causal by order, never by position).
 * - Recurrent state per sequence: `live` (after len inputs) and `prev` (the other buffer: a decode writes
 *   there and commits by swapping, so afterwards it holds the state before that decode).
 * - Rollback: the state after each input of the last decode of a sequence (if it had <= n_rollback inputs),
 *   valid until anything else changes the sequence.
 * - Checkpoints: copies of the recurrent state at an index, within a byte budget shared by all sequences.
 * - History: every input's token (or embedding row) and positions, for replays. */
#ifndef BRAID_ENGINE_CONTEXT_H
#define BRAID_ENGINE_CONTEXT_H

#include <stdint.h>

#include "braid.h"
#include "base/threadpool.h"
#include "engine/model.h"

#define BD_MAX_SEQ 64 /* sequence sets are 64-bit masks */

typedef struct bd_ckpt {
    int32_t index;  /* the state after this many inputs */
    float *state;   /* [state_floats] */
} bd_ckpt;

typedef struct bd_seq {
    int32_t len;          /* inputs */
    int32_t cap;          /* capacity of the arrays below */
    braid_token *token;   /* [cap] token id, or -1 - (embedding row) */
    braid_pos *pos;       /* [cap][4] RoPE positions (n_pos_per_token used) */
    int32_t *cell;        /* [cap] the attention cell of each input (attention models) */
    float *embd;          /* [n_embd_rows][n_embd] embedding rows referenced by token < 0 */
    int32_t n_embd_rows, cap_embd_rows;
    braid_pos next_pos;   /* position of the next text input */
    float *live;          /* [state_floats] recurrent state after len inputs */
    float *prev;          /* [state_floats] other buffer; the state at rb_base while the rollback is valid */
    float *rb;            /* [n_rollback][state_floats]: rb[i] = state after input rb_base + i + 1 */
    int32_t rb_base;      /* -1: no valid rollback */
    int32_t rb_n;
    bd_ckpt *ck;          /* sorted by index */
    int32_t n_ck, cap_ck;
    int32_t last_ck;      /* index of the newest automatic checkpoint */
} bd_seq;

struct braid_context {
    const braid_model *model;
    braid_context_params p;
    int32_t n_pos;          /* components per input position */
    int64_t state_floats;   /* per sequence: n_recr * (n_conv + n_ssm) */
    /* attention cells */
    void **k, **v;          /* [n_attn] -> [n_ctx][n_embd_k] of kv_type */
    uint64_t *cell_seqs;    /* [n_ctx] sequences using the cell (0: free) */
    braid_pos *cell_pos;    /* [n_ctx][4] */
    int32_t *free_cells;    /* stack of free cell ids */
    int32_t n_free;
    bd_seq seqs[BD_MAX_SEQ];
    uint64_t ck_bytes;      /* checkpoint bytes held */
    bd_threadpool *tp;      /* n_threads compute threads (the caller is one of them) */
    /* forward scratch, sized at creation (no allocation on the decode path) */
    void *scratch;
    int32_t n_threads;
    int32_t *ub_seq, *ub_out, *ub_nvis, *ub_dst; /* [n_batch] */
    const int32_t **ub_cells;                    /* [n_batch] per ubatch sequence slot */
    const float **conv_in, **ssm_in;             /* [n_recr * n_batch] */
    float **conv_out, **ssm_out, **conv_row, **ssm_row;
    braid_token *ub_tok;                         /* [n_batch] */
    float *ub_embd;                              /* [n_batch][n_embd] */
    braid_pos *ub_pos;                           /* [n_batch][4] */
    /* last decode's outputs */
    float *logits;          /* [n_out][n_vocab] */
    int32_t n_out, cap_out;
    int32_t *out_of_row;    /* [cap_rows] batch row -> logits row, or -1 */
    int32_t n_rows, cap_rows;
    braid_pos *pos_buf;     /* [cap_rows][4] resolved positions of the batch */
    int32_t *row_idx;       /* [cap_rows] index of the row in its sequence */
};

/* Recomputes the recurrent state of s from index c (its `live` holds the state at c) to n, from its history,
 * without logits. Cells [0, n) must hold K/V. Never fails. */
void bd_ctx_replay(braid_context *ctx, braid_seq_id s, int32_t c, int32_t n);
/* Makes `live` of s the state after n inputs (n <= len) by the cheapest route: live, rollback, checkpoint +
 * replay, replay from 0. Does not change len. Never fails. */
void bd_ctx_restore_state(braid_context *ctx, braid_seq_id s, int32_t n, const bd_seq *from);
/* Drops the cells of inputs [i0, i1) of s from s's set (freeing cells nobody uses). */
void bd_ctx_release_cells(braid_context *ctx, bd_seq *q, braid_seq_id s, int32_t i0, int32_t i1);
/* Recomputes next_pos from the history. */
void bd_ctx_update_next_pos(braid_context *ctx, bd_seq *q);
/* Adds a checkpoint of s's live state at len (evicting within the budget). BRAID_E_FULL / NOMEM on failure. */
BRAID_NODISCARD braid_status bd_ctx_checkpoint(braid_context *ctx, braid_seq_id s, int forced);
void bd_ctx_drop_checkpoints_after(braid_context *ctx, bd_seq *q, int32_t n);
/* Ensures the history arrays of q hold cap inputs / n_rows embedding rows (allocation only, nothing else). */
BRAID_NODISCARD braid_status bd_seq_reserve(braid_context *ctx, bd_seq *q, int32_t cap, int32_t n_rows);
braid_status bd_ctx_check_seq(const braid_context *ctx, braid_seq_id s);

#endif
