/* seq.c — the sequence operations of design.md §3, each one memory operation (src/memory, whole or nothing).
 * Truncate and copy may hand back a replay batch (the inputs between the nearest stored state and the target
 * index, from the sequence's history): the engine runs it through the forward pass without logits and commits
 * it, which is when the operation takes effect. */
#include <string.h>

#include "base/status.h"
#include "engine/context.h"

int32_t braid_seq_len(const braid_context *ctx, braid_seq_id s) { return ctx ? mem_seq_len(ctx->mem, s) : -1; }

braid_pos braid_seq_next_pos(const braid_context *ctx, braid_seq_id s) {
    if (!ctx || mem_seq_len(ctx->mem, s) < 0) return -1;
    return mem_seq_next_pos(ctx->mem, s);
}

braid_status braid_seq_input(const braid_context *ctx, braid_seq_id s, int32_t i, braid_token *token,
                             braid_pos *pos) {
    if (!ctx) return bd_error(BRAID_E_INVALID, "braid_seq_input: NULL context");
    braid_token t;
    const braid_pos *p;
    const float *e;
    BD_TRY(mem_seq_input(ctx->mem, s, i, &t, &p, &e));
    if (token) *token = t;
    if (pos) memcpy(pos, p, sizeof *pos * (size_t)mem_get_params(ctx->mem)->n_pos_per_token);
    return BRAID_OK;
}

/* Runs a replay batch handed back by truncate / copy and commits it. */
static braid_status run_replay(braid_context *ctx, mem_batch *replay) {
    if (!replay) return BRAID_OK;
    braid_status st = bd_ctx_rotate(ctx);
    if (st != BRAID_OK) {
        mem_batch_abort(ctx->mem, replay);
        return st;
    }
    st = bd_ctx_run_batch(ctx, replay, 0, 0); /* not cancellable: it cannot fail */
    if (st != BRAID_OK) {
        mem_batch_abort(ctx->mem, replay);
        return st;
    }
    mem_batch_commit(ctx->mem, replay);
    return BRAID_OK;
}

braid_status bd_seq_truncate_counted(braid_context *ctx, braid_seq_id s, int32_t n, int32_t *replayed) {
    if (!ctx) return bd_error(BRAID_E_INVALID, "braid_seq_truncate: NULL context");
    mem_batch *replay = NULL;
    if (replayed) *replayed = 0;
    BD_TRY(mem_seq_truncate(ctx->mem, s, n, &replay));
    if (replay && replayed) {
        int32_t rs, from, to;
        mem_batch_replay_info(replay, &rs, &from, &to);
        *replayed = to - from;
    }
    return run_replay(ctx, replay);
}

braid_status braid_seq_truncate(braid_context *ctx, braid_seq_id s, int32_t n) {
    return bd_seq_truncate_counted(ctx, s, n, NULL);
}

braid_status braid_seq_remove(braid_context *ctx, braid_seq_id s, int32_t i0, int32_t i1) {
    if (!ctx) return bd_error(BRAID_E_INVALID, "braid_seq_remove: NULL context");
    return mem_seq_remove(ctx->mem, s, i0, i1);
}

braid_status braid_seq_shift_pos(braid_context *ctx, braid_seq_id s, int32_t i0, int32_t i1, braid_pos d) {
    if (!ctx) return bd_error(BRAID_E_INVALID, "braid_seq_shift_pos: NULL context");
    return mem_seq_shift_pos(ctx->mem, s, i0, i1, d);
}

braid_status braid_seq_div_pos(braid_context *ctx, braid_seq_id s, int32_t i0, int32_t i1, int32_t k) {
    if (!ctx) return bd_error(BRAID_E_INVALID, "braid_seq_div_pos: NULL context");
    return mem_seq_div_pos(ctx->mem, s, i0, i1, k);
}

braid_status bd_seq_copy_counted(braid_context *ctx, braid_seq_id src, braid_seq_id dst, int32_t n,
                                 int32_t *replayed) {
    if (!ctx) return bd_error(BRAID_E_INVALID, "braid_seq_copy: NULL context");
    if (src == dst) return bd_seq_truncate_counted(ctx, src, n, replayed);
    mem_batch *replay = NULL;
    if (replayed) *replayed = 0;
    BD_TRY(mem_seq_copy(ctx->mem, src, dst, n, &replay));
    if (replay && replayed) {
        int32_t rs, from, to;
        mem_batch_replay_info(replay, &rs, &from, &to);
        *replayed = to - from;
    }
    return run_replay(ctx, replay);
}

braid_status braid_seq_copy(braid_context *ctx, braid_seq_id src, braid_seq_id dst, int32_t n) {
    return bd_seq_copy_counted(ctx, src, dst, n, NULL);
}

void braid_seq_clear(braid_context *ctx, braid_seq_id s) {
    if (ctx) mem_seq_clear(ctx->mem, s);
}

braid_status braid_seq_checkpoint(braid_context *ctx, braid_seq_id s) {
    if (!ctx) return bd_error(BRAID_E_INVALID, "braid_seq_checkpoint: NULL context");
    return mem_seq_checkpoint(ctx->mem, s);
}

braid_status braid_seq_checkpoint_at(braid_context *ctx, braid_seq_id s, const int32_t *idx, int32_t n) {
    if (!ctx) return bd_error(BRAID_E_INVALID, "braid_seq_checkpoint_at: NULL context");
    return mem_seq_mark_checkpoints(ctx->mem, s, idx, n);
}

braid_pos braid_image_positions(const braid_model *model, braid_pos t0, int32_t nx, int32_t ny, braid_pos *out) {
    (void)model;
    /* t0 + max(nx, ny) must stay a valid position (it also keeps t0 + y and t0 + x from overflowing) */
    if (nx <= 0 || ny <= 0 || !out || t0 < 0 || t0 > MEM_POS_MAX || (nx > ny ? nx : ny) > MEM_POS_MAX - t0) return -1;
    for (int32_t y = 0; y < ny; y++)
        for (int32_t x = 0; x < nx; x++) {
            braid_pos *p = out + 4 * ((size_t)y * nx + x);
            p[0] = t0;
            p[1] = t0 + y;
            p[2] = t0 + x;
            p[3] = 0;
        }
    return t0 + (nx > ny ? nx : ny);
}
