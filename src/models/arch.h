/* arch.h — the interface every architecture implements (one file each: qwen35.c, later mamba2.c, lfm2.c, ...).
 *
 * An architecture reads its hyperparameters and binds its tensors from the GGUF (load), says what memory it
 * needs (layout: which layers keep attention K/V rows and how wide, which keep a recurrent state and how big),
 * and computes one ubatch (forward). The engine owns everything else: validation, splitting batches, the
 * memory and its transactions, replay, state files. The forward pass never allocates: it works in a scratch
 * arena the engine sized at context creation from scratch_size().
 *
 * Layers call downward only: engine -> models -> memory views / kernels -> base. The forward pass sees memory
 * through bd_fwd_memory, a set of plain pointers the engine fills for one ubatch, so it does not depend on
 * how the memory stores or shares cells. */
#ifndef BRAID_MODELS_ARCH_H
#define BRAID_MODELS_ARCH_H

#include <stddef.h>
#include <stdint.h>

#include "braid.h"
#include "gguf/gguf.h"

#include "base/threadpool.h"

/* What memory a model needs. Filled by load; arrays owned by the model's arch data. */
typedef struct bd_mem_layout {
    int32_t n_layer;        /* trunk layers run by the forward pass */
    int32_t n_pos_per_token;/* 1, or 4 for M-RoPE (t, y, x, e) */
    int32_t n_attn;         /* layers with K/V rows */
    int32_t n_recr;         /* layers with a recurrent state */
    const int32_t *attn_layer; /* [n_attn] layer index of each attention slot */
    const int32_t *recr_layer; /* [n_recr] layer index of each recurrent slot */
    int32_t n_embd_k;       /* floats of one K row per attention layer (all heads) */
    int32_t n_embd_v;       /* floats of one V row */
    int64_t n_conv;         /* floats of one recurrent layer's conv state */
    int64_t n_ssm;          /* floats of one recurrent layer's SSM / delta-rule state */
} bd_mem_layout;

/* One ubatch as the forward pass sees it. Rows of one run (one sequence) are consecutive and in order. */
typedef struct bd_fwd_batch {
    int32_t n;                  /* rows */
    const braid_token *token;   /* [n], or NULL when embd is given */
    const float *embd;          /* [n][n_embd], or NULL */
    const braid_pos *pos;       /* [n][n_pos_per_token] */
    const int32_t *seq;         /* [n] the run (bd_fwd_memory.runs) the row belongs to, 0 .. n_seq-1 */
    int32_t n_seq;              /* runs */
    const int32_t *out;         /* [n] logits row index to write for this row, or -1 for none */
    float *hidden;              /* NULL, or [n][n_embd]: receives every row's final hidden state after the output
                                 * norm (llama.cpp's h_nextn), the input of an MTP head (mtp_forward) */
} bd_fwd_batch;

/* One run: consecutive rows of one sequence, with that sequence's memory. A sequence may have several runs in
 * one ubatch (a later run continues from where the earlier one left its state). */
typedef struct bd_fwd_run {
    int32_t row0, n_rows;       /* rows [row0, row0 + n_rows) of the ubatch */
    const int32_t *cells;       /* attention: the sequence's cells in order, this run's own included */
    const float *state_in;      /* recurrent: the state block before row0 (zeros for a new sequence) */
    float *state_out;           /* the block that receives the state after the run's last row (may be state_in) */
} bd_fwd_run;

/* The memory of one ubatch. */
typedef struct bd_fwd_memory {
    /* attention: K and V rows per attention slot, cells [n_cells][n_embd_k] of kv_type (F32 or F16) */
    void *const *k;             /* [n_attn] */
    void *const *v;             /* [n_attn] */
    braid_type kv_type;
    const int32_t *dst_cell;    /* [n] the cell that receives row t's K/V, or -1 (a replay: already stored) */
    const int32_t *n_visible;   /* [n] row t attends to its run's cells[0 .. n_visible[t]) (itself last) */
    /* recurrent: a state block holds every recurrent slot's conv and SSM state, at these float offsets */
    const int64_t *conv_off;    /* [n_recr] */
    const int64_t *ssm_off;     /* [n_recr] */
    int32_t n_runs;
    const bd_fwd_run *runs;     /* [n_runs] */
    /* optional per-row snapshots (rollback buffer): snap[t] receives the block after row t, or is NULL;
     * snap itself NULL: none wanted in this ubatch */
    float *const *snap;
} bd_fwd_memory;

/* The forward pass's arena (sized by scratch_size for these numbers) and the caller's abort callback. */
typedef struct bd_fwd_scratch {
    void *base;
    int32_t n_batch, n_ctx, n_threads;
    int (*abort_cb)(void *user); /* NULL, or asked between layers: nonzero stops the pass (BRAID_E_CANCELLED) */
    void *abort_user;
} bd_fwd_scratch;

/* Whether the caller asked to stop; a forward pass checks it once per layer. */
static inline int bd_fwd_cancelled(const bd_fwd_scratch *sc) { return sc->abort_cb && sc->abort_cb(sc->abort_user); }

typedef struct bd_arch {
    const char *name; /* general.architecture */
    /* Reads hparams, binds tensors (exact set), fills *layout. *data is the arch's private state, freed by
     * free_data. n_vocab is the tokenizer's size (the LM head must match). */
    braid_status (*load)(const gguf_file *f, int32_t n_vocab, void **data, bd_mem_layout *layout);
    void (*free_data)(void *data);
    int32_t (*n_embd)(const void *data);
    /* Feeds the hash of the model fingerprint (hparams; tensors are hashed by the engine). */
    void (*hparams_bytes)(const void *data, const void **bytes, size_t *len);
    /* Bytes of scratch for ubatches of up to n_batch rows, up to n_ctx visible cells, on n_threads threads. */
    size_t (*scratch_size)(const void *data, int32_t n_batch, int32_t n_ctx, int32_t n_threads);
    /* Computes the ubatch: writes K/V rows to memory, recurrent states to the runs' out blocks, logits rows
     * (n_vocab floats each) to logits[out[t]]. Never allocates; does not fail on validated input except
     * BRAID_E_CANCELLED when scratch->abort_cb asks (the outputs are then partial: the caller discards them). */
    braid_status (*forward)(const void *data, const bd_fwd_scratch *scratch, bd_threadpool *tp,
                            const bd_fwd_batch *b, const bd_fwd_memory *m, float *logits);
    /* Re-rotates a K row stored for old positions so that it is rotated for new ones (context shift); NULL for
     * an architecture without RoPE (a shift changes nothing stored). */
    void (*rerotate_k)(const void *data, float *k_row, const braid_pos *old_pos, const braid_pos *new_pos);
    /* The multi-token-prediction (MTP / NextN) head, for an architecture that has one (NULL otherwise), and
     * whether the loaded file carries it (has_mtp). Its one attention layer keeps its own K/V rows, in slot 0
     * of `m` (n_embd_k / n_embd_v wide, like the trunk's). Row t joins the embedding of b->token[t] with h[t]
     * ([n][n_embd]: the trunk's hidden state (bd_fwd_batch.hidden) of the input before it, or the previous
     * MTP step's h_out), runs the block, writes logits rows as forward does and, if h_out, every row's
     * hidden state after the head's norm ([n][n_embd], the h of a chained next step). b->hidden is ignored.
     * Fails only when the abort callback asks, as forward. */
    int (*has_mtp)(const void *data);
    braid_status (*mtp_forward)(const void *data, const bd_fwd_scratch *scratch, bd_threadpool *tp,
                                const bd_fwd_batch *b, const float *h, const bd_fwd_memory *m, float *logits,
                                float *h_out);
} bd_arch;

/* The architecture named by general.architecture, or NULL. */
const bd_arch *bd_arch_find(const char *name, size_t len);

extern const bd_arch bd_arch_qwen35, bd_arch_qwen35moe, bd_arch_qwen3next; /* qwen35.c: one family */
extern const bd_arch bd_arch_mamba2;     /* mamba2.c */
extern const bd_arch bd_arch_nemotron_h, bd_arch_nemotron_h_moe; /* nemotron_h.c: one family */
extern const bd_arch bd_arch_lfm2, bd_arch_lfm2moe; /* lfm2.c: one family */
extern const bd_arch bd_arch_granitehybrid; /* granitehybrid.c */
extern const bd_arch bd_arch_falcon_h1;  /* falcon_h1.c */

#endif
