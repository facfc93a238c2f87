/* context.c — braid_context_new/free, braid_decode, braid_logits, and the replay the sequence operations use.
 *
 * braid_decode runs in four phases so that a failure changes nothing (design.md §3):
 *   1. validate the batch (ids, tokens, positions) and resolve positions and output rows;
 *   2. reserve: grow every buffer the decode needs and check capacity (cells, budget) — the only fallible part;
 *   3. assign cells and append the inputs to the histories, then run the forward pass ubatch by ubatch
 *      (which cannot fail: its scratch was sized at context creation);
 *   4. commit: swap the recurrent double buffers, set up the rollback buffers, keep checkpoints. */
#include "engine/context.h"

#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/status.h"

braid_context_params braid_context_default_params(void) {
    braid_context_params p = {
        .n_ctx = 4096,
        .n_seq_max = 1,
        .n_batch = 512,
        .n_threads = 0,
        .checkpoint_interval = 256,
        .checkpoint_budget_bytes = 256ull << 20,
        .n_rollback = 8,
        .kv_type = BRAID_TYPE_F16,
    };
    return p;
}

static size_t kv_elem_size(braid_type t) { return t == BRAID_TYPE_F32 ? 4 : 2; }

void braid_context_free(braid_context *ctx) {
    if (!ctx) return;
    const bd_mem_layout *ly = &ctx->model->layout;
    for (int32_t i = 0; ctx->k && i < ly->n_attn; i++) bd_free(ctx->k[i]);
    for (int32_t i = 0; ctx->v && i < ly->n_attn; i++) bd_free(ctx->v[i]);
    bd_free(ctx->k);
    bd_free(ctx->v);
    bd_free(ctx->cell_seqs);
    bd_free(ctx->cell_pos);
    bd_free(ctx->free_cells);
    for (int i = 0; i < BD_MAX_SEQ; i++) {
        bd_seq *q = &ctx->seqs[i];
        bd_free(q->token);
        bd_free(q->pos);
        bd_free(q->cell);
        bd_free(q->embd);
        bd_free(q->live);
        bd_free(q->prev);
        bd_free(q->rb);
        for (int32_t c = 0; c < q->n_ck; c++) bd_free(q->ck[c].state);
        bd_free(q->ck);
    }
    bd_threadpool_free(ctx->tp);
    bd_free(ctx->scratch);
    bd_free(ctx->ub_seq);
    bd_free(ctx->ub_out);
    bd_free(ctx->ub_nvis);
    bd_free(ctx->ub_dst);
    bd_free((void *)ctx->ub_cells);
    bd_free((void *)ctx->conv_in);
    bd_free((void *)ctx->ssm_in);
    bd_free(ctx->conv_out);
    bd_free(ctx->ssm_out);
    bd_free(ctx->conv_row);
    bd_free(ctx->ssm_row);
    bd_free(ctx->ub_tok);
    bd_free(ctx->ub_embd);
    bd_free(ctx->ub_pos);
    bd_free(ctx->logits);
    bd_free(ctx->out_of_row);
    bd_free(ctx->pos_buf);
    bd_free(ctx->row_idx);
    bd_free(ctx);
}

braid_status braid_context_new(const braid_model *model, const braid_context_params *params, braid_context **out) {
    if (!model || !out) return bd_error(BRAID_E_INVALID, "braid_context_new: NULL argument");
    *out = NULL;
    if (!model->arch) return bd_error(BRAID_E_INVALID, "braid_context_new: the model was loaded vocab-only");
    braid_context_params p = params ? *params : braid_context_default_params();
    if (p.n_ctx == 0 || p.n_ctx > (1u << 24)) return bd_error(BRAID_E_INVALID, "n_ctx %u out of range", p.n_ctx);
    if (p.n_seq_max == 0 || p.n_seq_max > BD_MAX_SEQ)
        return bd_error(BRAID_E_INVALID, "n_seq_max %u must be 1..%d", p.n_seq_max, BD_MAX_SEQ);
    if (p.n_batch == 0 || p.n_batch > 65536) return bd_error(BRAID_E_INVALID, "n_batch %u out of range", p.n_batch);
    if (p.kv_type != BRAID_TYPE_F32 && p.kv_type != BRAID_TYPE_F16)
        return bd_error(BRAID_E_UNSUPPORTED, "kv_type must be F32 or F16");
    if (p.n_rollback > 4096) return bd_error(BRAID_E_INVALID, "n_rollback %u out of range", p.n_rollback);
    if (p.checkpoint_interval == 0) p.checkpoint_interval = 256;

    braid_context *ctx = bd_calloc(1, sizeof *ctx);
    if (!ctx) return bd_error(BRAID_E_NOMEM, "context: out of memory");
    ctx->model = model;
    ctx->p = p;
    const bd_mem_layout *ly = &model->layout;
    ctx->n_pos = ly->n_pos_per_token ? ly->n_pos_per_token : 1;
    ctx->state_floats = (int64_t)ly->n_recr * (ly->n_conv + ly->n_ssm);
    const size_t n_ctx = p.n_ctx, nb = p.n_batch, E = (size_t)model->n_embd;
    int ok = 1;

    ctx->k = bd_calloc(ly->n_attn ? (size_t)ly->n_attn : 1, sizeof(void *));
    ctx->v = bd_calloc(ly->n_attn ? (size_t)ly->n_attn : 1, sizeof(void *));
    ok = ctx->k && ctx->v;
    for (int32_t i = 0; ok && i < ly->n_attn; i++) {
        ctx->k[i] = bd_calloc(n_ctx * (size_t)ly->n_embd_k, kv_elem_size(p.kv_type));
        ctx->v[i] = bd_calloc(n_ctx * (size_t)ly->n_embd_v, kv_elem_size(p.kv_type));
        ok = ctx->k[i] && ctx->v[i];
    }
    ctx->cell_seqs = bd_calloc(n_ctx, sizeof(uint64_t));
    ctx->cell_pos = bd_calloc(n_ctx * 4, sizeof(braid_pos));
    ctx->free_cells = bd_mallocn(n_ctx, sizeof(int32_t));
    ok = ok && ctx->cell_seqs && ctx->cell_pos && ctx->free_cells;
    if (ok) {
        /* Stack with cell 0 on top, so cells are used in order. */
        for (size_t i = 0; i < n_ctx; i++) ctx->free_cells[i] = (int32_t)(n_ctx - 1 - i);
        ctx->n_free = (int32_t)n_ctx;
    }
    for (uint32_t s = 0; ok && s < p.n_seq_max; s++) {
        bd_seq *q = &ctx->seqs[s];
        q->rb_base = -1;
        if (ctx->state_floats) {
            q->live = bd_calloc((size_t)ctx->state_floats, sizeof(float));
            q->prev = bd_calloc((size_t)ctx->state_floats, sizeof(float));
            ok = q->live && q->prev;
            if (ok && p.n_rollback) {
                q->rb = bd_calloc((size_t)ctx->state_floats * p.n_rollback, sizeof(float));
                ok = q->rb != NULL;
            }
        }
    }
    long n_threads = p.n_threads;
    if (n_threads <= 0) n_threads = sysconf(_SC_NPROCESSORS_ONLN);
    if (n_threads < 1) n_threads = 1;
    if (n_threads > 256) n_threads = 256;
    ctx->n_threads = (int32_t)n_threads;
    if (ok) {
        ctx->scratch = bd_malloc(
            model->arch->scratch_size(model->arch_data, (int32_t)nb, (int32_t)n_ctx, (int32_t)n_threads));
        const size_t nr = (size_t)(ly->n_recr ? ly->n_recr : 1) * nb;
        ctx->ub_seq = bd_mallocn(nb, sizeof(int32_t));
        ctx->ub_out = bd_mallocn(nb, sizeof(int32_t));
        ctx->ub_nvis = bd_mallocn(nb, sizeof(int32_t));
        ctx->ub_dst = bd_mallocn(nb, sizeof(int32_t));
        ctx->ub_cells = bd_calloc(nb, sizeof(int32_t *));
        ctx->conv_in = bd_calloc(nr, sizeof(float *));
        ctx->ssm_in = bd_calloc(nr, sizeof(float *));
        ctx->conv_out = bd_calloc(nr, sizeof(float *));
        ctx->ssm_out = bd_calloc(nr, sizeof(float *));
        ctx->conv_row = bd_calloc(nr, sizeof(float *));
        ctx->ssm_row = bd_calloc(nr, sizeof(float *));
        ctx->ub_tok = bd_mallocn(nb, sizeof(braid_token));
        ctx->ub_embd = bd_mallocn(nb * E, sizeof(float));
        ctx->ub_pos = bd_calloc(nb * 4, sizeof(braid_pos));
        ok = ctx->scratch && ctx->ub_seq && ctx->ub_out && ctx->ub_nvis && ctx->ub_dst && ctx->ub_cells &&
             ctx->conv_in && ctx->ssm_in && ctx->conv_out && ctx->ssm_out && ctx->conv_row && ctx->ssm_row &&
             ctx->ub_tok && ctx->ub_embd && ctx->ub_pos;
    }
    if (!ok) {
        braid_context_free(ctx);
        return bd_error(BRAID_E_NOMEM, "context: out of memory (n_ctx %u, n_seq_max %u, n_batch %u)", p.n_ctx,
                        p.n_seq_max, p.n_batch);
    }
    braid_status st = bd_threadpool_new((int)n_threads, &ctx->tp);
    if (st != BRAID_OK) {
        braid_context_free(ctx);
        return st;
    }
    *out = ctx;
    return BRAID_OK;
}

braid_status bd_ctx_check_seq(const braid_context *ctx, braid_seq_id s) {
    if (!ctx) return bd_error(BRAID_E_INVALID, "NULL context");
    if (s < 0 || (uint32_t)s >= ctx->p.n_seq_max)
        return bd_error(BRAID_E_RANGE, "sequence id %d out of range 0..%u", s, ctx->p.n_seq_max - 1);
    return BRAID_OK;
}

/* Grows an array of `size`-byte elements to hold at least `need` (doubling). On failure *p is unchanged. */
static braid_status grow(void **p, int32_t *cap, int32_t need, size_t size) {
    if (need <= *cap) return BRAID_OK;
    int32_t nc = *cap ? *cap : 16;
    while (nc < need) nc = nc > INT32_MAX / 2 ? need : nc * 2;
    void *np = bd_realloc(*p, (size_t)nc * size);
    if (!np) return bd_error(BRAID_E_NOMEM, "out of memory growing a buffer to %d entries", nc);
    *p = np;
    *cap = nc;
    return BRAID_OK;
}

braid_status bd_seq_reserve(braid_context *ctx, bd_seq *q, int32_t cap, int32_t n_rows) {
    if (cap > q->cap) {
        int32_t nc = q->cap ? q->cap : 64;
        while (nc < cap) nc = nc > INT32_MAX / 2 ? cap : nc * 2;
        braid_token *t = bd_realloc(q->token, (size_t)nc * sizeof *t);
        if (!t) return bd_error(BRAID_E_NOMEM, "out of memory for the input history");
        q->token = t;
        braid_pos *p = bd_realloc(q->pos, (size_t)nc * 4 * sizeof *p);
        if (!p) return bd_error(BRAID_E_NOMEM, "out of memory for the input history");
        q->pos = p;
        int32_t *c = bd_realloc(q->cell, (size_t)nc * sizeof *c);
        if (!c) return bd_error(BRAID_E_NOMEM, "out of memory for the input history");
        q->cell = c;
        q->cap = nc;
    }
    if (n_rows > q->cap_embd_rows) {
        int32_t cap_rows = q->cap_embd_rows;
        void *e = q->embd;
        BD_TRY(grow(&e, &cap_rows, n_rows, (size_t)ctx->model->n_embd * sizeof(float)));
        q->embd = e;
        q->cap_embd_rows = cap_rows;
    }
    return BRAID_OK;
}

void bd_ctx_release_cells(braid_context *ctx, bd_seq *q, braid_seq_id s, int32_t i0, int32_t i1) {
    if (!ctx->model->layout.n_attn) return;
    for (int32_t i = i0; i < i1; i++) {
        const int32_t c = q->cell[i];
        ctx->cell_seqs[c] &= ~(1ull << s);
        if (!ctx->cell_seqs[c]) ctx->free_cells[ctx->n_free++] = c;
    }
}

void bd_ctx_update_next_pos(braid_context *ctx, bd_seq *q) {
    braid_pos np = 0;
    const int nc = ctx->n_pos >= 3 ? 3 : 1; /* M-RoPE: t, y, x; text resumes after the largest */
    for (int32_t i = 0; i < q->len; i++)
        for (int c = 0; c < nc; c++)
            if (q->pos[4 * i + c] + 1 > np) np = q->pos[4 * i + c] + 1;
    q->next_pos = np;
}

/* ---- checkpoints ---------------------------------------------------------------------------------------- */

static uint64_t state_bytes(const braid_context *ctx) { return (uint64_t)ctx->state_floats * sizeof(float); }

static void ck_remove(braid_context *ctx, bd_seq *q, int32_t i) {
    bd_free(q->ck[i].state);
    memmove(&q->ck[i], &q->ck[i + 1], (size_t)(q->n_ck - i - 1) * sizeof *q->ck);
    q->n_ck--;
    ctx->ck_bytes -= state_bytes(ctx);
}

void bd_ctx_drop_checkpoints_after(braid_context *ctx, bd_seq *q, int32_t n) {
    while (q->n_ck && q->ck[q->n_ck - 1].index > n) ck_remove(ctx, q, q->n_ck - 1);
    if (q->last_ck > n) q->last_ck = q->n_ck ? q->ck[q->n_ck - 1].index : 0;
}

/* Evicts one checkpoint: within the sequence that has most, the one whose removal leaves the smallest gap
 * between its neighbours (so recent checkpoints, close together, thin out first to a spacing that grows with
 * age); the newest of each sequence is kept while others exist. Returns 0 if nothing can be evicted. */
static int ck_evict_one(braid_context *ctx) {
    bd_seq *best_q = NULL;
    int32_t best_i = -1, best_gap = INT32_MAX;
    for (uint32_t s = 0; s < ctx->p.n_seq_max; s++) {
        bd_seq *q = &ctx->seqs[s];
        if (q->n_ck == 0) continue;
        if (q->n_ck == 1) {
            if (!best_q) best_q = q, best_i = 0, best_gap = INT32_MAX - 1;
            continue;
        }
        for (int32_t i = 0; i + 1 < q->n_ck; i++) {
            const int32_t lo = i ? q->ck[i - 1].index : 0;
            const int32_t gap = q->ck[i + 1].index - lo;
            if (gap < best_gap) best_gap = gap, best_q = q, best_i = i;
        }
    }
    if (!best_q) return 0;
    ck_remove(ctx, best_q, best_i);
    return 1;
}

/* Inserts a checkpoint of `state` at `index` into q (state copied). */
static braid_status ck_add(braid_context *ctx, bd_seq *q, int32_t index, const float *state, int forced) {
    if (!ctx->state_floats || index == 0) return BRAID_OK; /* index 0 is the zero state, always available */
    int32_t at = q->n_ck;
    while (at > 0 && q->ck[at - 1].index > index) at--;
    if (at > 0 && q->ck[at - 1].index == index) return BRAID_OK;
    const uint64_t sb = state_bytes(ctx);
    if (sb > ctx->p.checkpoint_budget_bytes)
        return bd_error(BRAID_E_FULL, "a checkpoint (%llu bytes) exceeds the budget of %llu bytes",
                        (unsigned long long)sb, (unsigned long long)ctx->p.checkpoint_budget_bytes);
    if (ctx->ck_bytes + sb > ctx->p.checkpoint_budget_bytes && !forced)
        return bd_error(BRAID_E_FULL, "checkpoint budget full");
    void *arr = q->ck;
    int32_t cap = q->cap_ck;
    BD_TRY(grow(&arr, &cap, q->n_ck + 1, sizeof *q->ck));
    q->ck = arr;
    q->cap_ck = cap;
    float *copy = bd_mallocn((size_t)ctx->state_floats, sizeof(float));
    if (!copy) return bd_error(BRAID_E_NOMEM, "out of memory for a checkpoint");
    while (ctx->ck_bytes + sb > ctx->p.checkpoint_budget_bytes)
        if (!ck_evict_one(ctx)) break;
    /* eviction may have removed entries of q before `at` */
    at = q->n_ck;
    while (at > 0 && q->ck[at - 1].index > index) at--;
    memcpy(copy, state, (size_t)sb);
    memmove(&q->ck[at + 1], &q->ck[at], (size_t)(q->n_ck - at) * sizeof *q->ck);
    q->ck[at].index = index;
    q->ck[at].state = copy;
    q->n_ck++;
    ctx->ck_bytes += sb;
    return BRAID_OK;
}

braid_status bd_ctx_checkpoint(braid_context *ctx, braid_seq_id s, int forced) {
    bd_seq *q = &ctx->seqs[s];
    return ck_add(ctx, q, q->len, q->live, forced);
}

/* ---- replay --------------------------------------------------------------------------------------------- */

static void set_state_ptrs(braid_context *ctx, int32_t slot, int32_t n_seq, const float *in, float *out) {
    const bd_mem_layout *ly = &ctx->model->layout;
    const int64_t per = ly->n_conv + ly->n_ssm;
    for (int32_t r = 0; r < ly->n_recr; r++) {
        const size_t i = (size_t)r * n_seq + slot;
        ctx->conv_in[i] = in + r * per;
        ctx->ssm_in[i] = in + r * per + ly->n_conv;
        ctx->conv_out[i] = out + r * per;
        ctx->ssm_out[i] = out + r * per + ly->n_conv;
    }
}

static void run_forward(braid_context *ctx, const bd_fwd_batch *b, int want_rows) {
    const bd_mem_layout *ly = &ctx->model->layout;
    bd_fwd_memory mem = {
        .k = ctx->k,
        .v = ctx->v,
        .kv_type = ctx->p.kv_type,
        .dst_cell = ctx->ub_dst,
        .seq_cells = ctx->ub_cells,
        .n_visible = ctx->ub_nvis,
        .conv_in = ctx->conv_in,
        .ssm_in = ctx->ssm_in,
        .conv_out = ctx->conv_out,
        .ssm_out = ctx->ssm_out,
        .conv_row = want_rows && ly->n_recr ? ctx->conv_row : NULL,
        .ssm_row = want_rows && ly->n_recr ? ctx->ssm_row : NULL,
    };
    const bd_fwd_scratch sc = {ctx->scratch, (int32_t)ctx->p.n_batch, (int32_t)ctx->p.n_ctx, ctx->n_threads};
    ctx->model->arch->forward(ctx->model->arch_data, &sc, ctx->tp, b, &mem, ctx->logits);
}

void bd_ctx_replay(braid_context *ctx, braid_seq_id s, int32_t c, int32_t n) {
    bd_seq *q = &ctx->seqs[s];
    const int32_t E = ctx->model->n_embd;
    int32_t i = c;
    while (i < n) {
        /* one run of token rows or of embedding rows, at most n_batch long */
        const int is_embd = q->token[i] < 0;
        int32_t T = 0;
        while (i + T < n && T < (int32_t)ctx->p.n_batch && (q->token[i + T] < 0) == is_embd) T++;
        for (int32_t t = 0; t < T; t++) {
            const int32_t idx = i + t;
            ctx->ub_seq[t] = 0;
            ctx->ub_out[t] = -1;
            ctx->ub_nvis[t] = idx + 1;
            ctx->ub_dst[t] = -1;
            memcpy(ctx->ub_pos + 4 * t, q->pos + 4 * idx, 4 * sizeof(braid_pos));
            if (is_embd) memcpy(ctx->ub_embd + (size_t)t * E, q->embd + (size_t)(-1 - q->token[idx]) * E, E * sizeof(float));
            else ctx->ub_tok[t] = q->token[idx];
        }
        ctx->ub_cells[0] = q->cell;
        set_state_ptrs(ctx, 0, 1, q->live, q->live);
        bd_fwd_batch b = {
            .n = T,
            .token = is_embd ? NULL : ctx->ub_tok,
            .embd = is_embd ? ctx->ub_embd : NULL,
            .pos = ctx->ub_pos,
            .seq = ctx->ub_seq,
            .n_seq = 1,
            .out = ctx->ub_out,
        };
        run_forward(ctx, &b, 0);
        i += T;
    }
}

/* The best stored state of q at or below n: *c gets its index; NULL means the zero state at 0. */
static const float *best_state(const braid_context *ctx, const bd_seq *q, int32_t n, int32_t *c) {
    if (n == q->len) {
        *c = n;
        return q->live;
    }
    if (q->rb_base >= 0 && n >= q->rb_base && n <= q->rb_base + q->rb_n) {
        *c = n;
        return n == q->rb_base ? q->prev : q->rb + (size_t)(n - q->rb_base - 1) * ctx->state_floats;
    }
    for (int32_t i = q->n_ck - 1; i >= 0; i--)
        if (q->ck[i].index <= n) {
            *c = q->ck[i].index;
            return q->ck[i].state;
        }
    *c = 0;
    return NULL;
}

void bd_ctx_restore_state(braid_context *ctx, braid_seq_id s, int32_t n, const bd_seq *from) {
    bd_seq *q = &ctx->seqs[s];
    if (!ctx->state_floats) return;
    int32_t c;
    const float *st = best_state(ctx, from, n, &c);
    if (st == q->live) return;
    if (st) memcpy(q->live, st, (size_t)ctx->state_floats * sizeof(float));
    else memset(q->live, 0, (size_t)ctx->state_floats * sizeof(float));
    if (c < n) bd_ctx_replay(ctx, s, c, n);
}

/* ---- decode --------------------------------------------------------------------------------------------- */

braid_status braid_decode(braid_context *ctx, const braid_batch *batch) {
    if (!ctx || !batch) return bd_error(BRAID_E_INVALID, "braid_decode: NULL argument");
    const braid_model *model = ctx->model;
    const bd_mem_layout *ly = &model->layout;
    const int32_t n = batch->n_tokens, E = model->n_embd, V = model->n_vocab;
    if (n <= 0) return bd_error(BRAID_E_INVALID, "braid_decode: n_tokens is %d", n);
    if (!batch->token == !batch->embd)
        return bd_error(BRAID_E_INVALID, "braid_decode: give exactly one of token and embd");

    /* 1. validate and resolve positions / outputs */
    int32_t rows_of[BD_MAX_SEQ] = {0}, last_row[BD_MAX_SEQ];
    braid_pos np[BD_MAX_SEQ];
    for (int32_t i = 0; i < n; i++) {
        const braid_seq_id s = batch->seq ? batch->seq[i] : 0;
        if (s < 0 || (uint32_t)s >= ctx->p.n_seq_max)
            return bd_error(BRAID_E_RANGE, "braid_decode: row %d: sequence id %d out of range 0..%u", i, s,
                            ctx->p.n_seq_max - 1);
        if (batch->token && (batch->token[i] < 0 || batch->token[i] >= V))
            return bd_error(BRAID_E_RANGE, "braid_decode: row %d: token %d out of range 0..%d", i, batch->token[i],
                            V - 1);
        if (batch->pos)
            for (int c = 0; c < ctx->n_pos; c++)
                if (batch->pos[(size_t)i * ctx->n_pos + c] < 0)
                    return bd_error(BRAID_E_RANGE, "braid_decode: row %d: negative position", i);
        rows_of[s]++;
        last_row[s] = i;
    }
    for (uint32_t s = 0; s < ctx->p.n_seq_max; s++) {
        const bd_seq *q = &ctx->seqs[s];
        np[s] = q->next_pos;
        if (rows_of[s] && (int64_t)q->len + rows_of[s] > (ly->n_attn ? (int64_t)ctx->p.n_ctx : INT32_MAX / 2))
            return bd_error(BRAID_E_FULL, "braid_decode: sequence %u would exceed %u inputs", s, ctx->p.n_ctx);
    }
    if (ly->n_attn && n > ctx->n_free)
        return bd_error(BRAID_E_FULL, "braid_decode: %d inputs need cells, %d free of %u", n, ctx->n_free,
                        ctx->p.n_ctx);

    /* 2. reserve (allocation only; on failure nothing observable changed) */
    {
        int32_t cap = ctx->cap_rows;
        void *a = ctx->pos_buf, *b = ctx->row_idx, *c = ctx->out_of_row;
        int32_t c1 = cap, c2 = cap, c3 = cap;
        BD_TRY(grow(&a, &c1, n, 4 * sizeof(braid_pos)));
        ctx->pos_buf = a;
        BD_TRY(grow(&b, &c2, n, sizeof(int32_t)));
        ctx->row_idx = b;
        BD_TRY(grow(&c, &c3, 2 * n, sizeof(int32_t))); /* two halves: committed map | new map */
        ctx->out_of_row = c;
        int32_t m = c1 < c2 ? c1 : c2;
        ctx->cap_rows = m < c3 / 2 ? m : c3 / 2;
    }
    int32_t *new_out = ctx->out_of_row + ctx->cap_rows; /* second half: the map of this decode */
    if (ctx->n_rows > 0 && ctx->out_of_row != NULL) {
        /* keep the committed map in the first half (it already is) */
    }
    int32_t n_out = 0;
    for (int32_t i = 0; i < n; i++) {
        const braid_seq_id s = batch->seq ? batch->seq[i] : 0;
        const int want = batch->logits ? batch->logits[i] != 0 : last_row[s] == i;
        new_out[i] = want ? n_out++ : -1;
        braid_pos *p = ctx->pos_buf + 4 * (size_t)i;
        memset(p, 0, 4 * sizeof *p);
        if (batch->pos) {
            for (int c = 0; c < ctx->n_pos; c++) p[c] = batch->pos[(size_t)i * ctx->n_pos + c];
        } else {
            for (int c = 0; c < ctx->n_pos && c < 3; c++) p[c] = np[s];
        }
        const int nc = ctx->n_pos >= 3 ? 3 : 1;
        for (int c = 0; c < nc; c++)
            if (p[c] + 1 > np[s]) np[s] = p[c] + 1;
    }
    if (n_out > ctx->cap_out) {
        float *lg = bd_realloc(ctx->logits, (size_t)n_out * (size_t)V * sizeof(float));
        if (!lg) return bd_error(BRAID_E_NOMEM, "braid_decode: out of memory for %d rows of logits", n_out);
        ctx->logits = lg;
        ctx->cap_out = n_out;
    }
    int32_t embd_rows_of[BD_MAX_SEQ] = {0};
    for (uint32_t s = 0; s < ctx->p.n_seq_max; s++) {
        if (!rows_of[s]) continue;
        bd_seq *q = &ctx->seqs[s];
        if (batch->embd) embd_rows_of[s] = rows_of[s];
        BD_TRY(bd_seq_reserve(ctx, q, q->len + rows_of[s], q->n_embd_rows + embd_rows_of[s]));
    }

    /* 3. assign cells, append to the histories (point of no return: nothing below fails) */
    int32_t old_len[BD_MAX_SEQ];
    for (uint32_t s = 0; s < ctx->p.n_seq_max; s++) old_len[s] = ctx->seqs[s].len;
    for (int32_t i = 0; i < n; i++) {
        const braid_seq_id s = batch->seq ? batch->seq[i] : 0;
        bd_seq *q = &ctx->seqs[s];
        const int32_t idx = q->len++;
        ctx->row_idx[i] = idx;
        memcpy(q->pos + 4 * (size_t)idx, ctx->pos_buf + 4 * (size_t)i, 4 * sizeof(braid_pos));
        if (batch->embd) {
            memcpy(q->embd + (size_t)q->n_embd_rows * E, batch->embd + (size_t)i * E, (size_t)E * sizeof(float));
            q->token[idx] = -1 - q->n_embd_rows++;
        } else {
            q->token[idx] = batch->token[i];
        }
        if (ly->n_attn) {
            const int32_t c = ctx->free_cells[--ctx->n_free];
            q->cell[idx] = c;
            ctx->cell_seqs[c] = 1ull << s;
            memcpy(ctx->cell_pos + 4 * (size_t)c, ctx->pos_buf + 4 * (size_t)i, 4 * sizeof(braid_pos));
        } else {
            q->cell[idx] = 0;
        }
    }

    /* forward, ubatch by ubatch */
    int touched[BD_MAX_SEQ] = {0};
    const int64_t per = ly->n_conv + ly->n_ssm;
    for (int32_t start = 0; start < n; start += (int32_t)ctx->p.n_batch) {
        const int32_t T = n - start < (int32_t)ctx->p.n_batch ? n - start : (int32_t)ctx->p.n_batch;
        int32_t slot_of[BD_MAX_SEQ], seq_of_slot[BD_MAX_SEQ], n_seq = 0;
        for (int s = 0; s < BD_MAX_SEQ; s++) slot_of[s] = -1;
        for (int32_t t = 0; t < T; t++) {
            const braid_seq_id s = batch->seq ? batch->seq[start + t] : 0;
            if (slot_of[s] < 0) seq_of_slot[n_seq] = s, slot_of[s] = n_seq++;
        }
        int any_rows = 0;
        for (int32_t t = 0; t < T; t++) {
            const int32_t i = start + t;
            const braid_seq_id s = batch->seq ? batch->seq[i] : 0;
            bd_seq *q = &ctx->seqs[s];
            ctx->ub_seq[t] = slot_of[s];
            ctx->ub_out[t] = new_out[i];
            ctx->ub_nvis[t] = ctx->row_idx[i] + 1;
            ctx->ub_dst[t] = q->cell[ctx->row_idx[i]];
            /* rollback snapshots for sequences whose whole decode fits in the buffer */
            for (int32_t r = 0; r < ly->n_recr; r++) {
                float *dst = NULL;
                if (rows_of[s] <= (int32_t)ctx->p.n_rollback) {
                    dst = q->rb + (size_t)(ctx->row_idx[i] - old_len[s]) * ctx->state_floats + r * per;
                    any_rows = 1;
                }
                ctx->conv_row[(size_t)r * T + t] = dst;
                ctx->ssm_row[(size_t)r * T + t] = dst ? dst + ly->n_conv : NULL;
            }
        }
        for (int32_t k = 0; k < n_seq; k++) {
            bd_seq *q = &ctx->seqs[seq_of_slot[k]];
            ctx->ub_cells[k] = q->cell;
            if (ly->n_recr) set_state_ptrs(ctx, k, n_seq, touched[seq_of_slot[k]] ? q->prev : q->live, q->prev);
            touched[seq_of_slot[k]] = 1;
        }
        bd_fwd_batch b = {
            .n = T,
            .token = batch->token ? batch->token + start : NULL,
            .embd = batch->embd ? batch->embd + (size_t)start * E : NULL,
            .pos = ctx->pos_buf + 4 * (size_t)start,
            .seq = ctx->ub_seq,
            .n_seq = n_seq,
            .out = ctx->ub_out,
        };
        run_forward(ctx, &b, any_rows);
    }

    /* 4. commit */
    memcpy(ctx->out_of_row, new_out, (size_t)n * sizeof(int32_t));
    ctx->n_rows = n;
    ctx->n_out = n_out;
    for (uint32_t s = 0; s < ctx->p.n_seq_max; s++) {
        if (!rows_of[s]) continue;
        bd_seq *q = &ctx->seqs[s];
        q->next_pos = np[s];
        if (!ly->n_recr) continue;
        float *tmp = q->live;
        q->live = q->prev;
        q->prev = tmp;
        if (rows_of[s] <= (int32_t)ctx->p.n_rollback) q->rb_base = old_len[s], q->rb_n = rows_of[s];
        else q->rb_base = -1;
        /* Automatic checkpoints (best effort: a full budget skips them): before and after an embedding span,
         * and every checkpoint_interval inputs. */
        if (embd_rows_of[s]) {
            if (ck_add(ctx, q, old_len[s], q->prev, 0) == BRAID_OK) q->last_ck = old_len[s];
            if (ck_add(ctx, q, q->len, q->live, 0) == BRAID_OK) q->last_ck = q->len;
        } else if (q->len - q->last_ck >= (int32_t)ctx->p.checkpoint_interval) {
            if (ck_add(ctx, q, q->len, q->live, 0) == BRAID_OK) q->last_ck = q->len;
        }
    }
    bd_error_clear();
    return BRAID_OK;
}

const float *braid_logits(const braid_context *ctx, int32_t i) {
    if (!ctx || i < 0 || i >= ctx->n_rows || ctx->out_of_row[i] < 0) return NULL;
    return ctx->logits + (size_t)ctx->out_of_row[i] * ctx->model->n_vocab;
}
