/* mtp.h — the memory and the forward calls of a model's MTP (multi-token prediction, NextN) head, for
 * braid_gen's MTP drafting (speculative.c proposes, generate.c verifies).
 *
 * The head (models/arch.h mtp_forward) predicts the input after next: its row for sequence index i joins
 * input x_i with h_{i-1}, the trunk's hidden state of the input before it (llama.cpp's h_nextn; zeros before
 * the first known one), and it attends over its own K/V rows, one per index. llama.cpp gives the head a
 * second context (LLAMA_CONTEXT_TYPE_MTP) and feeds it the target's rows shifted by one; braid keeps the
 * head's rows beside the generator instead, indexed like the target's sequence, so that a truncation of the
 * target is a truncation here and needs no replay:
 *
 *     h[i]     the trunk's h_i, captured from every target decode the generator makes (bd_mtp_after_decode)
 *     K/V[i]   the head's rows for index i, valid for [base, n_cells); computed (bd_mtp_first) once x_i and
 *              h_{i-1} are known, overwritten when index i is decoded again (a draft row is only provisional)
 *
 * base > 0 after the sequence changed in ways this file does not follow (context shift, a prompt from the
 * prompt cache): the head then sees the rows from base on, which changes what it proposes, never what the
 * generator emits (every proposal is verified by the target). */
#ifndef BRAID_ENGINE_MTP_H
#define BRAID_ENGINE_MTP_H

#include <stdint.h>

#include "braid.h"

typedef struct bd_mtp bd_mtp;

/* For generation on sequence seq of ctx; BRAID_E_UNSUPPORTED (with the reason) if the model has no MTP head.
 * Makes ctx keep its decodes' hidden states. */
BRAID_NODISCARD braid_status bd_mtp_new(braid_context *ctx, braid_seq_id seq, bd_mtp **out);
void bd_mtp_free(bd_mtp *t);
/* Forgets every row: the sequence changed outside the generator's view (context shift, a new prompt). */
void bd_mtp_reset(bd_mtp *t);
/* The target just decoded inputs [i0, i0 + n) of the sequence as rows row0 .. row0 + n - 1 of ctx's last decode
 * (each with logits, so with its hidden state): keeps their hidden states; rows from i0 on are stale. */
BRAID_NODISCARD braid_status bd_mtp_after_decode(bd_mtp *t, int32_t i0, int32_t n, int32_t row0);
/* The target's sequence was truncated to n inputs. */
void bd_mtp_truncate(bd_mtp *t, int32_t n);
/* The first draft step after the target's n_tok inputs (their tokens and positions come from the memory): the
 * head's rows for indices [n_cells, n_tok) that are not computed yet, and in the same call (one forward pass
 * for both when they fit in a batch) the row of `next` at index n_tok, text position next_pos, paired with
 * the trunk's h_{n_tok-1}. *ready: 0 if h_{n_tok-1} is unknown (nothing decoded since the sequence changed
 * outside the generator: no draft this step, *logits and *h_out NULL), else 1 with *logits (n_vocab) and
 * *h_out (n_embd) of that row, valid until the next call. */
BRAID_NODISCARD braid_status bd_mtp_first(bd_mtp *t, int32_t n_tok, braid_token next, braid_pos next_pos,
                                          int *ready, const float **logits, const float **h_out);
/* One draft step: the head's row for index idx >= n_tok with input `token` and hidden state h (NULL: the
 * trunk's h_{idx-1} if known, else zeros) at text position pos; the later steps of a chain pass the previous
 * step's h_out. *logits (n_vocab) and *h_out
 * (n_embd: the h of the next step) point into t, valid until the next call. */
BRAID_NODISCARD braid_status bd_mtp_step(bd_mtp *t, braid_token token, int32_t idx, braid_pos pos, const float *h,
                                         const float **logits, const float **h_out);

#endif
