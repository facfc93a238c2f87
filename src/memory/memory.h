/* memory.h — braid's memory for one context: the attention cells (kv), the recurrent states (rs) and the input
 * history of every sequence, under one transaction (design.md §2-§5). This is the interface the engine and the
 * forward passes use; memory.c implements it over batch.c, ubatch.c, state_io.c and the leaves hist.c, kv.c, rs.c.
 *
 * Identity. An input of a sequence is named by its index (0, 1, 2, ...). Positions are only RoPE coordinates
 * (n_pos_per_token components: 1, or 4 for M-RoPE t, y, x, e) and may repeat (an image). Every operation takes
 * indices, returns a braid_status with a reason (bd_error), and is applied whole or not at all: whatever fails
 * (bad ids, no free cells, a failed allocation, a failed forward pass) leaves the memory as it was.
 *
 * How the engine drives a decode (mem_batch is one transaction):
 *
 *     mem_batch *b;
 *     BD_TRY(mem_batch_begin(m, &batch, n_ubatch, &b));     // validate, split, reserve EVERYTHING (cells, state
 *                                                           // buffers, checkpoint blocks); BRAID_E_FULL / NOMEM
 *                                                           // with nothing changed
 *     BD_TRY(mem_kv_rotate(m, model_rotate_k, model));       // K rows of shifted cells re-rotated (if any pending)
 *     for (int32_t u = 0; u < mem_batch_n_ubatch(b); u++) {
 *         mem_ubatch ub;
 *         mem_batch_ubatch(b, u, &ub);
 *         st = forward(model, m, &ub);                      // writes K/V rows, rs_dst, rs_snap; computes logits
 *         if (st != BRAID_OK) { mem_batch_abort(m, b); return st; }   // memory exactly as before begin
 *     }
 *     mem_batch_commit(m, b);                               // cannot fail; b is freed by commit and abort
 *
 * What a forward pass reads from a ubatch (see mem_ubatch below):
 *  - rows: input (token id, or an embedding row), positions, the caller's batch row (for logits).
 *  - attention layer a: K storage mem_kv_k(m, a) is [n_ctx][n_embd_k[a]] of mem_kv_type(m) (F32 or F16), V the
 *    same with n_embd_v[a]. Row r writes its K and V into cell kv_write[r] (-1: the row is a replay whose K/V
 *    rows are already stored; write nothing). Query row r (input idx of run q's sequence) attends to the cells
 *    q.kv_cells[0 .. idx] inclusive, in order (causal by order, never by position; it includes the row itself).
 *  - recurrent layer l: a state block holds every recurrent layer, layer l's conv state at mem_rs_conv_off(m, l)
 *    (n_conv[l] floats) and its SSM / delta state at mem_rs_ssm_off(m, l) (n_ssm[l] floats). For each run (the
 *    rows of one sequence, in order) read the state before the run from rs_src and leave the state after its
 *    last row in rs_dst. rs_src may equal rs_dst (a later ubatch of the same sequence continues in place), so a
 *    kernel must support in-place update. rs_snap[r], when not NULL, is a block that must receive the state of
 *    every recurrent layer after row r (rollback buffer, checkpoints): the memory chooses those rows.
 *
 * Truncate and copy may need a replay: the recurrent state at index n is rebuilt from a checkpoint c <= n by
 * running inputs [c, n) again. Then mem_seq_truncate / mem_seq_copy return BRAID_OK with *replay != NULL, a
 * batch of those inputs taken from the sequence's history (all rows kv_write = -1, no logits), which the engine
 * runs exactly like a decode batch; the operation itself happens at mem_batch_commit (abort: nothing happened).
 * A replay ubatch never mixes token and embedding inputs (its embedding rows are consecutive in memory); a decode
 * ubatch is all tokens or all embeddings since a braid_batch is.
 * While a batch is pending every other memory operation is refused with BRAID_E_INVALID.
 *
 * Position edits (shift_pos, div_pos) change cell positions at once and mark the K rows stale: the engine calls
 * mem_kv_rotate before the next forward pass; the callback rotates each stale cell's K rows (every attention
 * layer) from the positions they were rotated for to the current ones. mem_batch_ubatch refuses while rotations
 * are pending.
 *
 * After mem_seq_remove on a sequence with recurrent layers the live state still summarizes the removed inputs
 * (the accepted approximation); mem_seq_approx_from reports it. */
#ifndef BRAID_MEMORY_MEMORY_H
#define BRAID_MEMORY_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "braid.h"

#define MEM_SEQ_MAX 256        /* largest n_seq_max */
#define MEM_POS_MAX (1 << 29)  /* positions are 0 .. MEM_POS_MAX */
#define MEM_CTX_MAX (1u << 26) /* largest n_ctx (cells) */
#define MEM_ROLLBACK_MAX 1024u /* largest n_rollback */
#define MEM_INTERVAL_MAX (1u << 30) /* largest checkpoint_interval */
#define MEM_UBATCH_MAX 65536u  /* largest n_ubatch */
#define MEM_FORMAT_VERSION 1u  /* state format version written and accepted */

typedef struct mem_params {
    uint32_t n_seq_max;       /* sequences 0 .. n_seq_max-1 (1 .. MEM_SEQ_MAX) */
    uint32_t n_pos_per_token; /* 1, or 4 for M-RoPE (t, y, x, e) */
    uint32_t n_embd;          /* floats of an embedding input row (kept in the history for replay); 0 = tokens only */
    uint32_t n_vocab;         /* token ids are 0 .. n_vocab-1 in batches, replays and loaded states (0: any id
                               * >= 0, for a memory without a vocabulary) */
    /* attention half (n_attn_layers == 0: none) */
    uint32_t n_ctx;           /* cells shared by all sequences */
    braid_type kv_type;       /* BRAID_TYPE_F32 or BRAID_TYPE_F16 */
    uint32_t n_attn_layers;
    const uint32_t *n_embd_k; /* [n_attn_layers] floats of a K row (n_head_kv * head_dim) */
    const uint32_t *n_embd_v; /* [n_attn_layers] floats of a V row */
    /* recurrent half (n_rs_layers == 0: none) */
    uint32_t n_rs_layers;
    const uint64_t *n_conv;           /* [n_rs_layers] floats of the conv window state */
    const uint64_t *n_ssm;            /* [n_rs_layers] floats of the SSM / delta-rule state */
    uint32_t checkpoint_interval;     /* automatic checkpoint at every multiple of this index (0: off) */
    uint64_t checkpoint_budget_bytes; /* checkpoint blocks of all sequences together */
    uint32_t n_rollback;              /* a decode of k <= n_rollback inputs of a sequence keeps the state before
                                       * each of them (truncation back into it needs no replay); 0: off */
    uint32_t n_ubatch;                /* rows per ubatch of the replay batches the memory builds (0: 512) */
} mem_params;

typedef struct mem mem;
typedef struct mem_batch mem_batch;

/* ---- life cycle -------------------------------------------------------------------------------------------- */

/* Validates p and allocates all fixed storage (K/V rows of every cell, cell metadata, per-sequence lists).
 * On success *out is owned by the caller; release with mem_free. The arrays in p are copied. */
braid_status mem_new(const mem_params *p, mem **out);
void mem_free(mem *m); /* NULL allowed; frees a pending batch too */
const mem_params *mem_get_params(const mem *m); /* the arrays point into m */

/* ---- sequences (queries) ----------------------------------------------------------------------------------- */

int32_t mem_seq_len(const mem *m, int32_t s); /* -1 if s is not a valid id */
/* Position the next text input gets: 1 + max(t, y, x) of the last input (0 when empty). After an M-RoPE image
 * laid out row-major at t0 this is t0 + max(nx, ny). */
braid_pos mem_seq_next_pos(const mem *m, int32_t s);
/* Input i of s from the history: token id (-1 for an embedding input), its positions (n_pos_per_token values,
 * pointer into m, valid until the next change) and its embedding row (n_embd floats, or NULL). */
braid_status mem_seq_input(const mem *m, int32_t s, int32_t i, braid_token *token, const braid_pos **pos,
                           const float **embd);
/* Smallest index after which s's recurrent states are not what a fresh decode of its history would give (they
 * also summarize inputs removed by mem_seq_remove, or, on a hybrid, were computed before a shift_pos/div_pos
 * changed positions), or -1 if the state is exact. A truncation to at most this index, or a replay from a state
 * at most this index, makes it exact again. */
int32_t mem_seq_approx_from(const mem *m, int32_t s);
/* Indices of s's checkpoints, ascending (index 0, the zero state, is implicit and not listed). Returns the
 * count; writes at most cap of them. */
int32_t mem_seq_checkpoints(const mem *m, int32_t s, int32_t *idx, int32_t cap);
/* Range of indices [*lo, *hi] that truncation can reach through the rollback buffer (hi = len), or *lo = -1
 * when the buffer holds nothing valid. */
void mem_seq_rollback_range(const mem *m, int32_t s, int32_t *lo, int32_t *hi);

/* ---- sequences (operations, design.md §3; all whole or nothing) ------------------------------------------ */

/* Keep the first n inputs. Recurrent state: rollback buffer if it covers n, else a checkpoint at n, else a
 * replay from the nearest checkpoint c < n (or from 0): *replay gets the batch to run (see top); otherwise
 * *replay = NULL and the truncation is done. */
braid_status mem_seq_truncate(mem *m, int32_t s, int32_t n, mem_batch **replay);
/* Drop inputs [i0, i1). A sequence with recurrent layers needs i1 < len (removing the tail is a truncate);
 * its state keeps summarizing the dropped inputs (see mem_seq_approx_from). */
braid_status mem_seq_remove(mem *m, int32_t s, int32_t i0, int32_t i1);
/* Add d to (divide by k >= 1) the t, y, x position components of inputs [i0, i1); the e component is left. A
 * cell shared with another sequence is first copied (BRAID_E_FULL if no free cell). K rows become stale.
 * BRAID_E_RANGE if a position would leave 0..MEM_POS_MAX or the temporal positions of s would decrease
 * somewhere (they never do: decode, edits and state loads all keep them non-decreasing). */
braid_status mem_seq_shift_pos(mem *m, int32_t s, int32_t i0, int32_t i1, braid_pos d);
braid_status mem_seq_div_pos(mem *m, int32_t s, int32_t i0, int32_t i1, int32_t k);
/* dst (!= src) becomes the first n inputs of src: cells shared, history copied, recurrent state at n (live,
 * rollback buffer, checkpoint, or a replay batch in *replay as for truncate). dst's previous content is dropped. */
braid_status mem_seq_copy(mem *m, int32_t src, int32_t dst, int32_t n, mem_batch **replay);
/* Empty s (s = -1: every sequence). Not allowed while a batch is pending (logged and ignored). */
void mem_seq_clear(mem *m, int32_t s);
/* Checkpoint s's recurrent state at its current length (no-op if one exists there or s has no recurrent
 * layers). BRAID_E_FULL if one checkpoint is larger than the whole budget. May evict older checkpoints. */
braid_status mem_seq_checkpoint(mem *m, int32_t s);

/* From now on a decode of s that reaches index idx[i] (0 < idx[i]) checkpoints the state there, within the
 * budget like the interval checkpoints (message boundaries of a prompt, so that a later prompt diverging
 * inside a message replays from its start at most). Replaces s's earlier marks; n = 0 drops them; they are
 * dropped with s's content too (clear, load, being the target of a copy). */
braid_status mem_seq_mark_checkpoints(mem *m, int32_t s, const int32_t *idx, int32_t n);

/* ---- decode transaction ------------------------------------------------------------------------------------ */

/* A run: the rows of one sequence inside a ubatch, consecutive and in input order. */
typedef struct mem_run {
    int32_t seq;             /* sequence id */
    int32_t row0, n_rows;    /* rows [row0, row0 + n_rows) of the ubatch */
    int32_t idx0;            /* index in the sequence of row row0 (row row0 + k is input idx0 + k) */
    const int32_t *kv_cells; /* [idx0 + n_rows] the sequence's cells in order; NULL without attention */
    const float *rs_src;     /* state block before row row0; NULL without recurrent layers */
    float *rs_dst;           /* state block to hold the state after the last row (may equal rs_src) */
} mem_run;

typedef struct mem_ubatch {
    int32_t n_rows;
    const braid_token *token;  /* [n_rows] token id, or -1 for an embedding row */
    const float *const *embd;  /* [n_rows] n_embd floats for embedding rows, NULL for token rows */
    const braid_pos *pos;      /* [n_rows][n_pos_per_token] */
    const int32_t *seq;        /* [n_rows] sequence id */
    const int32_t *idx;        /* [n_rows] index of the row's input in its sequence */
    const int32_t *batch_row;  /* [n_rows] row of the caller's batch (-1 in a replay) */
    const uint8_t *logits;     /* [n_rows] 1: the caller wants logits of this row */
    const int32_t *kv_write;   /* [n_rows] cell for this row's K and V rows, or -1 (already stored) */
    float *const *rs_snap;     /* [n_rows] NULL, or a block for the state after this row (every rs layer) */
    int32_t n_runs;
    const mem_run *runs;       /* [n_runs] */
} mem_ubatch;

/* Validates the batch (ids, token xor embd, positions in 0..MEM_POS_MAX, temporal position never decreasing
 * within a sequence; repeats are allowed), fills default positions (pos == NULL: each sequence's next text
 * positions) and logits flags (NULL: the last row of each sequence), splits the rows into ubatches of at most
 * n_ubatch rows (any mix of sequences, each sequence's inputs in order) and reserves every resource. The
 * batch's arrays (token, embd, ...) must stay valid until commit or abort. *out is freed by commit / abort. */
braid_status mem_batch_begin(mem *m, const braid_batch *batch, int32_t n_ubatch, mem_batch **out);
int32_t mem_batch_n_ubatch(const mem_batch *b);
int32_t mem_batch_n_rows(const mem_batch *b);
/* View of ubatch u (pointers into b, valid until commit / abort). BRAID_E_INVALID while K rotations are
 * pending (call mem_kv_rotate first). */
braid_status mem_batch_ubatch(const mem *m, const mem_batch *b, int32_t u, mem_ubatch *out);
/* For a replay batch: the sequence replayed, the index its state starts from and the index it reaches (the
 * caller's n). A decode batch gives -1, -1, -1. */
void mem_batch_replay_info(const mem_batch *b, int32_t *seq, int32_t *from, int32_t *to);
/* Makes the batch's effect visible: new cells, history, live states, rollback buffers, checkpoints (with
 * eviction). Cannot fail. Frees b. */
void mem_batch_commit(mem *m, mem_batch *b);
/* Drops the batch: the memory is exactly as before mem_batch_begin. Frees b. */
void mem_batch_abort(mem *m, mem_batch *b);

/* ---- attention storage ------------------------------------------------------------------------------------- */

braid_type mem_kv_type(const mem *m);           /* F32 or F16 */
uint32_t mem_kv_n_cells(const mem *m);          /* n_ctx, or 0 without attention */
uint32_t mem_kv_n_free(const mem *m);           /* cells no sequence holds */
void *mem_kv_k(mem *m, uint32_t layer);         /* [n_ctx][n_embd_k[layer]] of mem_kv_type */
void *mem_kv_v(mem *m, uint32_t layer);         /* [n_ctx][n_embd_v[layer]] */
size_t mem_kv_k_row_bytes(const mem *m, uint32_t layer);
size_t mem_kv_v_row_bytes(const mem *m, uint32_t layer);
const braid_pos *mem_kv_cell_pos(const mem *m, int32_t cell); /* [n_pos_per_token] current positions */
/* s's cells in input order ([mem_seq_len] ids; valid until the next change), NULL without attention. */
const int32_t *mem_kv_seq_cells(const mem *m, int32_t s);

/* Re-rotation of stale K rows: for every cell whose K rows were rotated for positions `from` but whose current
 * positions are `to`, calls rotate(user, cell, from, to) (the callback rotates that cell's K rows in every
 * attention layer, by section for M-RoPE), then marks it current. Returns the callback's first failure (cells
 * done so far stay marked). */
typedef braid_status (*mem_rotate_fn)(void *user, mem *m, int32_t cell, const braid_pos *from, const braid_pos *to);
braid_status mem_kv_rotate(mem *m, mem_rotate_fn rotate, void *user);
uint32_t mem_kv_n_rotations_pending(const mem *m);

/* ---- recurrent storage ------------------------------------------------------------------------------------- */

size_t mem_rs_block_floats(const mem *m); /* floats of a state block (every recurrent layer), 0 without rs */
size_t mem_rs_conv_off(const mem *m, uint32_t layer); /* offset (floats) of layer's conv state in a block */
size_t mem_rs_ssm_off(const mem *m, uint32_t layer);  /* offset (floats) of layer's ssm state in a block */
/* s's committed state (NULL = zero state, or no recurrent layers). For tests and tools; the forward pass uses
 * mem_run.rs_src. */
const float *mem_rs_live(const mem *m, int32_t s);
/* s's checkpoint at index idx or a rollback state (state after idx inputs); NULL if none. For tests. */
const float *mem_rs_checkpoint(const mem *m, int32_t s, int32_t idx);
const float *mem_rs_rollback(const mem *m, int32_t s, int32_t idx);
uint64_t mem_rs_checkpoint_bytes(const mem *m); /* bytes of checkpoint blocks held now */

/* ---- state (design.md §5) ---------------------------------------------------------------------------------- */

/* Where a saved state goes: write returns BRAID_OK or a failure (BRAID_E_IO for a short write). */
typedef struct mem_writer {
    braid_status (*write)(void *user, const void *data, size_t n);
    void *user;
} mem_writer;

/* Saves sequence s, or the whole memory for s = -1, tagged with the model's fingerprint and a description
 * (e.g. "qwen35 9B q4_K"). Works in every state (pending rollback, stale K rows, ...) but not while a batch is
 * pending. The memory is never changed. */
braid_status mem_state_save(const mem *m, int32_t s, uint64_t fingerprint, const char *desc, mem_writer *w);
/* Same into a buffer allocated with bd_malloc (*data is owned by the caller; release with bd_free). */
braid_status mem_state_save_alloc(const mem *m, int32_t s, uint64_t fingerprint, const char *desc, void **data,
                                  size_t *size);
/* Same into a file (state_file.c). The bytes go to a temporary file beside `path` that is flushed to disk and
 * then renamed over it, so a failed save (full disk, I/O error, out of memory) leaves any previous file at
 * `path` as it was and no temporary behind. */
braid_status mem_state_save_file(const mem *m, int32_t s, uint64_t fingerprint, const char *desc,
                                 const char *path);
/* Loads a state saved with the same s-kind (sequence: into sequence s, replacing its content; whole memory:
 * s = -1, replacing everything). Everything is verified first (magic, version, fingerprint, layout, section
 * lengths and checksums, ids, ranges, free cells); on any failure (BRAID_E_FORMAT, _MISMATCH, _FULL, _NOMEM,
 * _IO) the memory is unchanged. */
braid_status mem_state_load(mem *m, int32_t s, uint64_t fingerprint, const void *data, size_t size);
/* Same from a file, mapped read-only rather than copied (a state can be gigabytes); the mapping is verified
 * like a buffer before anything changes. */
braid_status mem_state_load_file(mem *m, int32_t s, uint64_t fingerprint, const char *path);

/* ---- checks ------------------------------------------------------------------------------------------------ */

/* Verifies every invariant (cell reference counts and sequence sets match the lists, order stamps increase
 * along each list, history lengths match, free list complete, checkpoint budget, rollback ranges). Returns
 * BRAID_E_INVALID with the first broken invariant. Allocates nothing. Tests call it after every operation;
 * debug builds assert it after each operation. */
braid_status mem_check(const mem *m);

#endif
