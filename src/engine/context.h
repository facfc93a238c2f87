/* context.h — struct braid_context: a model, its memory (src/memory: attention cells, recurrent states,
 * checkpoints, rollback buffers, input histories under one transaction), the forward pass's scratch and
 * threads, and the logits of the last decode. The engine drives the memory as memory.h describes; the
 * forward pass sees one ubatch through bd_fwd_batch / bd_fwd_memory (models/arch.h). */
#ifndef BRAID_ENGINE_CONTEXT_H
#define BRAID_ENGINE_CONTEXT_H

#include <stdint.h>

#include "base/threadpool.h"
#include "braid.h"
#include "engine/model.h"
#include "memory/memory.h"
#include "models/arch.h"

struct braid_context {
    const braid_model *model;
    braid_context_params p;
    mem *mem;
    bd_threadpool *tp;
    int32_t n_threads;
    /* forward scratch and ubatch views, sized at creation (no allocation on the decode path) */
    void *scratch;
    const float *zero_state;   /* a zeroed recurrent block (never written) */
    int32_t *ub_seq, *ub_out, *ub_nvis; /* [n_batch] */
    bd_fwd_run *ub_runs;                /* [n_batch] */
    float **ub_snap;                    /* [n_batch] */
    int64_t *conv_off, *ssm_off;        /* [n_recr] where each recurrent slot's states sit in a state block */
    braid_token *ub_tok;                /* [n_batch] */
    float *ub_embd;                     /* [n_batch][n_embd] */
    /* last decode's outputs; a decode writes into logits_next and swaps on success, so a cancelled or failed
     * decode leaves the previous logits readable */
    float *logits;          /* [n_out][n_vocab] */
    int32_t n_out, cap_out;
    float *logits_next;     /* [cap_next][n_vocab] */
    int32_t cap_next;
    int32_t *out_of_row;    /* [cap_rows] batch row -> logits row, or -1 */
    int32_t *new_out;       /* [cap_rows] the same for the decode in progress */
    int32_t n_rows, cap_rows;
    /* the trunk's hidden state of every row of the last decode (llama.cpp's h_nextn), kept only while a
     * generator drafts with the model's MTP head (engine/mtp.c): written during a decode, so valid only after
     * one that succeeded */
    int want_hidden;
    float *ub_hidden;       /* [n_batch][n_embd] one ubatch's rows */
    float *hidden;          /* [cap_hidden][n_embd] by batch row */
    int32_t cap_hidden;
};

/* Runs every ubatch of a memory batch (a decode or a replay) through the forward pass, logits (if asked) into
 * ctx->logits_next. cancellable: the context's abort callback may stop it (BRAID_E_CANCELLED; the caller
 * aborts the batch); a replay is not cancellable and cannot fail. */
BRAID_NODISCARD braid_status bd_ctx_run_batch(braid_context *ctx, mem_batch *b, int with_logits, int cancellable);
/* Makes every later decode keep its rows' hidden states in ctx->hidden (the MTP head's input). */
BRAID_NODISCARD braid_status bd_ctx_want_hidden(braid_context *ctx);
/* Brings stale K rows up to date (after position edits); before any forward pass. */
BRAID_NODISCARD braid_status bd_ctx_rotate(braid_context *ctx);

/* braid_seq_truncate that also tells how many inputs were replayed to reach n (0: rollback buffer or a
 * checkpoint at n, or nothing to do). */
BRAID_NODISCARD braid_status bd_seq_truncate_counted(braid_context *ctx, braid_seq_id s, int32_t n,
                                                     int32_t *replayed);

/* braid_seq_copy that also tells how many inputs were replayed to reach n. */
BRAID_NODISCARD braid_status bd_seq_copy_counted(braid_context *ctx, braid_seq_id src, braid_seq_id dst, int32_t n,
                                                 int32_t *replayed);

#endif
