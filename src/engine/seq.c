/* seq.c — the sequence operations of design.md §3 on the engine's memory: truncate (rollback buffer, checkpoint
 * + replay, replay from 0), remove, position shift/divide (K rows re-rotated), copy (cells shared), clear,
 * checkpoint, and the M-RoPE image positions. Each checks everything it needs before changing anything. */
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/status.h"
#include "engine/context.h"
#include "tensor/types.h"

int32_t braid_seq_len(const braid_context *ctx, braid_seq_id s) {
    if (bd_ctx_check_seq(ctx, s) != BRAID_OK) return -1;
    return ctx->seqs[s].len;
}

braid_pos braid_seq_next_pos(const braid_context *ctx, braid_seq_id s) {
    if (bd_ctx_check_seq(ctx, s) != BRAID_OK) return -1;
    return ctx->seqs[s].next_pos;
}

static void invalidate_rollback(bd_seq *q) { q->rb_base = -1; }

braid_status braid_seq_truncate(braid_context *ctx, braid_seq_id s, int32_t n) {
    BD_TRY(bd_ctx_check_seq(ctx, s));
    bd_seq *q = &ctx->seqs[s];
    if (n < 0 || n > q->len) return bd_error(BRAID_E_RANGE, "truncate: n %d out of range 0..%d", n, q->len);
    if (n == q->len) return BRAID_OK;
    /* The recurrent state at n first (replay reads cells [0, n), which stay), then drop the rest. */
    bd_ctx_restore_state(ctx, s, n, q);
    bd_ctx_release_cells(ctx, q, s, n, q->len);
    q->len = n;
    int32_t rows = 0;
    for (int32_t i = 0; i < n; i++)
        if (q->token[i] < 0 && -q->token[i] > rows) rows = -q->token[i];
    q->n_embd_rows = rows;
    bd_ctx_drop_checkpoints_after(ctx, q, n);
    invalidate_rollback(q);
    bd_ctx_update_next_pos(ctx, q);
    return BRAID_OK;
}

braid_status braid_seq_remove(braid_context *ctx, braid_seq_id s, int32_t i0, int32_t i1) {
    BD_TRY(bd_ctx_check_seq(ctx, s));
    bd_seq *q = &ctx->seqs[s];
    if (i0 < 0 || i1 < i0 || i1 > q->len)
        return bd_error(BRAID_E_RANGE, "remove: [%d, %d) out of range of %d inputs", i0, i1, q->len);
    if (i0 == i1) return BRAID_OK;
    if (i1 == q->len) return braid_seq_truncate(ctx, s, i0);
    if (ctx->state_floats)
        bd_log(BD_LOG_INFO, "seq %d: removed inputs [%d, %d); the recurrent state still summarizes them", s, i0, i1);
    bd_ctx_release_cells(ctx, q, s, i0, i1);
    const int32_t k = i1 - i0, rest = q->len - i1;
    memmove(q->token + i0, q->token + i1, (size_t)rest * sizeof *q->token);
    memmove(q->pos + 4 * (size_t)i0, q->pos + 4 * (size_t)i1, (size_t)rest * 4 * sizeof *q->pos);
    memmove(q->cell + i0, q->cell + i1, (size_t)rest * sizeof *q->cell);
    q->len -= k;
    /* Checkpoints past i0 describe inputs that are gone from the history: drop them. The live state stays. */
    bd_ctx_drop_checkpoints_after(ctx, q, i0);
    invalidate_rollback(q);
    bd_ctx_update_next_pos(ctx, q);
    return BRAID_OK;
}

/* Applies new positions to inputs [i0, i1) of s: cells shared with other sequences are first copied (copy on
 * write), so the other sequences keep theirs; K rows are re-rotated at once. `op` 0 adds d, 1 divides by d. */
static braid_status edit_pos(braid_context *ctx, braid_seq_id s, int32_t i0, int32_t i1, int32_t d, int op) {
    BD_TRY(bd_ctx_check_seq(ctx, s));
    bd_seq *q = &ctx->seqs[s];
    if (i0 < 0 || i1 < i0 || i1 > q->len)
        return bd_error(BRAID_E_RANGE, "position edit: [%d, %d) out of range of %d inputs", i0, i1, q->len);
    if (op == 1 && d < 1) return bd_error(BRAID_E_RANGE, "div_pos: divisor %d must be >= 1", d);
    const int nc = ctx->n_pos >= 3 ? 3 : 1; /* M-RoPE: t, y, x move together; e is an index, not a position */
    const bd_mem_layout *ly = &ctx->model->layout;
    int32_t shared = 0;
    for (int32_t i = i0; i < i1; i++) {
        for (int c = 0; c < nc && op == 0; c++)
            if ((int64_t)q->pos[4 * i + c] + d < 0 || (int64_t)q->pos[4 * i + c] + d > INT32_MAX)
                return bd_error(BRAID_E_RANGE, "shift_pos: input %d would get position %lld", i,
                                (long long)q->pos[4 * i + c] + d);
        if (ly->n_attn && (ctx->cell_seqs[q->cell[i]] & ~(1ull << s))) shared++;
    }
    if (shared > ctx->n_free)
        return bd_error(BRAID_E_FULL, "position edit: %d shared cells need copies, %d cells free", shared,
                        ctx->n_free);
    const size_t es = ctx->p.kv_type == BRAID_TYPE_F32 ? 4 : 2;
    float *row = NULL;
    if (ly->n_attn) {
        row = bd_mallocn((size_t)ly->n_embd_k, sizeof(float));
        if (!row) return bd_error(BRAID_E_NOMEM, "position edit: out of memory");
    }
    for (int32_t i = i0; i < i1; i++) {
        braid_pos old[4], nw[4];
        memcpy(old, q->pos + 4 * i, sizeof old);
        memcpy(nw, old, sizeof nw);
        for (int c = 0; c < nc; c++) nw[c] = op == 0 ? old[c] + d : old[c] / d;
        memcpy(q->pos + 4 * i, nw, sizeof nw);
        if (!ly->n_attn) continue;
        int32_t c = q->cell[i];
        if (ctx->cell_seqs[c] & ~(1ull << s)) { /* copy on write */
            const int32_t nc2 = ctx->free_cells[--ctx->n_free];
            for (int32_t a = 0; a < ly->n_attn; a++) {
                memcpy((char *)ctx->k[a] + (size_t)nc2 * ly->n_embd_k * es,
                       (char *)ctx->k[a] + (size_t)c * ly->n_embd_k * es, (size_t)ly->n_embd_k * es);
                memcpy((char *)ctx->v[a] + (size_t)nc2 * ly->n_embd_v * es,
                       (char *)ctx->v[a] + (size_t)c * ly->n_embd_v * es, (size_t)ly->n_embd_v * es);
            }
            ctx->cell_seqs[c] &= ~(1ull << s);
            ctx->cell_seqs[nc2] = 1ull << s;
            c = q->cell[i] = nc2;
        }
        memcpy(ctx->cell_pos + 4 * (size_t)c, nw, sizeof nw);
        if (!memcmp(old, nw, sizeof old)) continue;
        for (int32_t a = 0; a < ly->n_attn; a++) {
            if (ctx->p.kv_type == BRAID_TYPE_F32) {
                ctx->model->arch->rerotate_k(ctx->model->arch_data, (float *)ctx->k[a] + (size_t)c * ly->n_embd_k,
                                             old, nw);
            } else {
                uint16_t *h = (uint16_t *)ctx->k[a] + (size_t)c * ly->n_embd_k;
                for (int32_t e = 0; e < ly->n_embd_k; e++) row[e] = bd_fp16_to_fp32(h[e]);
                ctx->model->arch->rerotate_k(ctx->model->arch_data, row, old, nw);
                for (int32_t e = 0; e < ly->n_embd_k; e++) h[e] = bd_fp32_to_fp16(row[e]);
            }
        }
    }
    bd_free(row);
    /* The recurrent state does not depend on positions; checkpoints and rollback stay valid. */
    bd_ctx_update_next_pos(ctx, q);
    return BRAID_OK;
}

braid_status braid_seq_shift_pos(braid_context *ctx, braid_seq_id s, int32_t i0, int32_t i1, braid_pos d) {
    return edit_pos(ctx, s, i0, i1, d, 0);
}

braid_status braid_seq_div_pos(braid_context *ctx, braid_seq_id s, int32_t i0, int32_t i1, int32_t k) {
    return edit_pos(ctx, s, i0, i1, k, 1);
}

static void seq_clear(braid_context *ctx, braid_seq_id s) {
    bd_seq *q = &ctx->seqs[s];
    bd_ctx_release_cells(ctx, q, s, 0, q->len);
    q->len = 0;
    q->n_embd_rows = 0;
    q->next_pos = 0;
    bd_ctx_drop_checkpoints_after(ctx, q, 0);
    q->last_ck = 0;
    invalidate_rollback(q);
    if (ctx->state_floats) memset(q->live, 0, (size_t)ctx->state_floats * sizeof(float));
}

void braid_seq_clear(braid_context *ctx, braid_seq_id s) {
    if (!ctx) return;
    if (s == -1) {
        for (uint32_t i = 0; i < ctx->p.n_seq_max; i++) seq_clear(ctx, (braid_seq_id)i);
        return;
    }
    if (bd_ctx_check_seq(ctx, s) != BRAID_OK) return;
    seq_clear(ctx, s);
}

braid_status braid_seq_copy(braid_context *ctx, braid_seq_id src, braid_seq_id dst, int32_t n) {
    BD_TRY(bd_ctx_check_seq(ctx, src));
    BD_TRY(bd_ctx_check_seq(ctx, dst));
    bd_seq *a = &ctx->seqs[src], *b = &ctx->seqs[dst];
    if (n < 0 || n > a->len) return bd_error(BRAID_E_RANGE, "copy: n %d out of range 0..%d", n, a->len);
    if (src == dst) return braid_seq_truncate(ctx, src, n);
    int32_t rows = 0;
    for (int32_t i = 0; i < n; i++)
        if (a->token[i] < 0 && -a->token[i] > rows) rows = -a->token[i];
    BD_TRY(bd_seq_reserve(ctx, b, n, rows));
    seq_clear(ctx, dst);
    const int32_t E = ctx->model->n_embd;
    memcpy(b->token, a->token, (size_t)n * sizeof *b->token);
    memcpy(b->pos, a->pos, (size_t)n * 4 * sizeof *b->pos);
    memcpy(b->cell, a->cell, (size_t)n * sizeof *b->cell);
    if (rows) memcpy(b->embd, a->embd, (size_t)rows * E * sizeof(float));
    b->n_embd_rows = rows;
    b->len = n;
    if (ctx->model->layout.n_attn)
        for (int32_t i = 0; i < n; i++) ctx->cell_seqs[b->cell[i]] |= 1ull << dst;
    bd_ctx_restore_state(ctx, dst, n, a);
    bd_ctx_update_next_pos(ctx, b);
    return BRAID_OK;
}

braid_status braid_seq_checkpoint(braid_context *ctx, braid_seq_id s) {
    BD_TRY(bd_ctx_check_seq(ctx, s));
    return bd_ctx_checkpoint(ctx, s, 1);
}

braid_pos braid_image_positions(const braid_model *model, braid_pos t0, int32_t nx, int32_t ny, braid_pos *out) {
    (void)model;
    if (nx <= 0 || ny <= 0 || !out) return t0;
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
