/* context.c — braid_context_new/free, braid_decode and braid_logits on braid's memory (src/memory).
 *
 * A decode is one memory transaction (memory.h): mem_batch_begin validates the batch, splits it into ubatches
 * and reserves everything (BRAID_E_FULL / NOMEM with nothing changed); stale K rows are re-rotated; each
 * ubatch runs through the architecture's forward pass, which fails only when the caller's abort callback
 * stops it (its scratch was sized here; the batch is then aborted: nothing changed); then mem_batch_commit
 * makes the new inputs, states, rollback buffers and checkpoints visible. */
#include "engine/context.h"

#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/status.h"
#include "tensor/types.h"

/* The public bounds are the memory's own. */
_Static_assert(BRAID_MAX_CTX == MEM_CTX_MAX && BRAID_MAX_SEQ == MEM_SEQ_MAX && BRAID_MAX_ROLLBACK == MEM_ROLLBACK_MAX &&
                   BRAID_MAX_CHECKPOINT_INTERVAL == MEM_INTERVAL_MAX && BRAID_MAX_BATCH == MEM_UBATCH_MAX,
               "braid.h bounds differ from src/memory's");

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

/* Every parameter against the bound braid.h states for it, named in the error: a value out of range is the
 * caller's mistake and must not reach a size computation or an int32 cast. */
static braid_status check_params(const braid_context_params *p, int has_attention) {
    const char *fn = "braid_context_new";
    if (p->n_ctx > BRAID_MAX_CTX || (has_attention && p->n_ctx < 1))
        return bd_error(BRAID_E_INVALID, "%s: n_ctx %u not in 1..%u", fn, p->n_ctx, BRAID_MAX_CTX);
    if (p->n_seq_max < 1 || p->n_seq_max > BRAID_MAX_SEQ)
        return bd_error(BRAID_E_INVALID, "%s: n_seq_max %u not in 1..%u", fn, p->n_seq_max, BRAID_MAX_SEQ);
    if (p->n_batch < 1 || p->n_batch > BRAID_MAX_BATCH)
        return bd_error(BRAID_E_INVALID, "%s: n_batch %u not in 1..%u", fn, p->n_batch, BRAID_MAX_BATCH);
    if (p->n_threads > BRAID_MAX_THREADS)
        return bd_error(BRAID_E_INVALID, "%s: n_threads %u not in 0..%u (0: online cores)", fn, p->n_threads,
                        BRAID_MAX_THREADS);
    if (p->checkpoint_interval > BRAID_MAX_CHECKPOINT_INTERVAL)
        return bd_error(BRAID_E_INVALID, "%s: checkpoint_interval %u not in 0..%u (0: off)", fn,
                        p->checkpoint_interval, BRAID_MAX_CHECKPOINT_INTERVAL);
    if (p->n_rollback > BRAID_MAX_ROLLBACK)
        return bd_error(BRAID_E_INVALID, "%s: n_rollback %u not in 0..%u", fn, p->n_rollback, BRAID_MAX_ROLLBACK);
    if (p->kv_type != BRAID_TYPE_F16 && p->kv_type != BRAID_TYPE_F32)
        return bd_error(BRAID_E_UNSUPPORTED, "%s: kv_type %d (BRAID_TYPE_F16 or BRAID_TYPE_F32)", fn, (int)p->kv_type);
    return BRAID_OK;
}

void braid_context_free(braid_context *ctx) {
    if (!ctx) return;
    mem_free(ctx->mem);
    bd_threadpool_free(ctx->tp);
    bd_free(ctx->scratch);
    bd_free((void *)ctx->zero_state);
    bd_free(ctx->ub_seq);
    bd_free(ctx->ub_out);
    bd_free(ctx->ub_nvis);
    bd_free(ctx->ub_runs);
    bd_free(ctx->ub_snap);
    bd_free(ctx->conv_off);
    bd_free(ctx->ssm_off);
    bd_free(ctx->ub_tok);
    bd_free(ctx->ub_embd);
    bd_free(ctx->logits);
    bd_free(ctx->logits_next);
    bd_free(ctx->out_of_row);
    bd_free(ctx->new_out);
    bd_free(ctx->ub_hidden);
    bd_free(ctx->hidden);
    bd_free(ctx);
}

braid_status bd_ctx_want_hidden(braid_context *ctx) {
    if (ctx->want_hidden) return BRAID_OK;
    ctx->ub_hidden = bd_mallocn((size_t)ctx->p.n_batch * (size_t)ctx->model->n_embd, sizeof(float));
    if (!ctx->ub_hidden) return bd_error(BRAID_E_NOMEM, "context: out of memory for hidden states");
    ctx->want_hidden = 1;
    return BRAID_OK;
}

braid_status braid_context_new(const braid_model *model, const braid_context_params *params, braid_context **out) {
    if (!model || !out) return bd_error(BRAID_E_INVALID, "braid_context_new: NULL argument");
    *out = NULL;
    if (!model->arch) return bd_error(BRAID_E_INVALID, "braid_context_new: the model was loaded vocab-only");
    braid_context_params p = params ? *params : braid_context_default_params();
    const bd_mem_layout *ly = &model->layout;
    BD_TRY(check_params(&p, ly->n_attn > 0));
    if (ly->n_attn > 64) return bd_error(BRAID_E_UNSUPPORTED, "more than 64 attention layers");

    /* the memory */
    uint32_t *nk = bd_calloc((size_t)ly->n_attn + 1, sizeof *nk), *nv = bd_calloc((size_t)ly->n_attn + 1, sizeof *nv);
    uint64_t *nc = bd_calloc((size_t)ly->n_recr + 1, sizeof *nc), *ns = bd_calloc((size_t)ly->n_recr + 1, sizeof *ns);
    braid_context *ctx = bd_calloc(1, sizeof *ctx);
    if (!nk || !nv || !nc || !ns || !ctx) {
        bd_free(nk), bd_free(nv), bd_free(nc), bd_free(ns), bd_free(ctx);
        return bd_error(BRAID_E_NOMEM, "context: out of memory");
    }
    for (int32_t i = 0; i < ly->n_attn; i++) nk[i] = (uint32_t)ly->n_embd_k, nv[i] = (uint32_t)ly->n_embd_v;
    for (int32_t i = 0; i < ly->n_recr; i++) nc[i] = (uint64_t)ly->n_conv, ns[i] = (uint64_t)ly->n_ssm;
    mem_params mp = {
        .n_seq_max = p.n_seq_max,
        .n_pos_per_token = (uint32_t)(ly->n_pos_per_token ? ly->n_pos_per_token : 1),
        .n_embd = (uint32_t)model->n_embd,
        .n_vocab = (uint32_t)model->n_vocab,
        .n_ctx = ly->n_attn ? p.n_ctx : 0,
        .kv_type = p.kv_type,
        .n_attn_layers = (uint32_t)ly->n_attn,
        .n_embd_k = nk,
        .n_embd_v = nv,
        .n_rs_layers = (uint32_t)ly->n_recr,
        .n_conv = nc,
        .n_ssm = ns,
        .checkpoint_interval = p.checkpoint_interval,
        .checkpoint_budget_bytes = p.checkpoint_budget_bytes,
        .n_rollback = p.n_rollback,
        .n_ubatch = p.n_batch, /* replays run through the same scratch as decodes: never wider than n_batch */
    };
    ctx->model = model;
    ctx->p = p;
    braid_status st = mem_new(&mp, &ctx->mem); /* copies the arrays */
    bd_free(nk), bd_free(nv), bd_free(nc), bd_free(ns);
    if (st != BRAID_OK) {
        braid_context_free(ctx);
        return st;
    }

    /* threads and scratch */
    long n_threads = p.n_threads;
    if (n_threads <= 0) n_threads = sysconf(_SC_NPROCESSORS_ONLN);
    if (n_threads < 1) n_threads = 1;
    if (n_threads > BRAID_MAX_THREADS) n_threads = BRAID_MAX_THREADS; /* online cores beyond the bound */
    ctx->n_threads = (int32_t)n_threads;
    const size_t nb = p.n_batch, E = (size_t)model->n_embd;
    const int32_t n_ctx = ly->n_attn ? (int32_t)p.n_ctx : 1;
    ctx->scratch = bd_malloc(model->arch->scratch_size(model->arch_data, (int32_t)nb, n_ctx, (int32_t)n_threads));
    ctx->zero_state = bd_calloc(mem_rs_block_floats(ctx->mem) + 1, sizeof(float));
    ctx->ub_seq = bd_mallocn(nb, sizeof(int32_t));
    ctx->ub_out = bd_mallocn(nb, sizeof(int32_t));
    ctx->ub_nvis = bd_mallocn(nb, sizeof(int32_t));
    ctx->ub_runs = bd_calloc(nb, sizeof(bd_fwd_run));
    ctx->ub_snap = bd_calloc(nb, sizeof(float *));
    ctx->conv_off = bd_calloc((size_t)ly->n_recr + 1, sizeof(int64_t));
    ctx->ssm_off = bd_calloc((size_t)ly->n_recr + 1, sizeof(int64_t));
    ctx->ub_tok = bd_mallocn(nb, sizeof(braid_token));
    ctx->ub_embd = bd_mallocn(nb * E, sizeof(float));
    int ok = ctx->scratch && ctx->zero_state && ctx->ub_seq && ctx->ub_out && ctx->ub_nvis && ctx->ub_runs &&
             ctx->ub_snap && ctx->conv_off && ctx->ssm_off && ctx->ub_tok && ctx->ub_embd;
    if (!ok) {
        braid_context_free(ctx);
        return bd_error(BRAID_E_NOMEM, "context: out of memory (n_ctx %u, n_batch %u)", p.n_ctx, p.n_batch);
    }
    for (int32_t r = 0; r < ly->n_recr; r++) {
        ctx->conv_off[r] = (int64_t)mem_rs_conv_off(ctx->mem, (uint32_t)r);
        ctx->ssm_off[r] = (int64_t)mem_rs_ssm_off(ctx->mem, (uint32_t)r);
    }
    st = bd_threadpool_new((int)n_threads, &ctx->tp);
    if (st != BRAID_OK) {
        braid_context_free(ctx);
        return st;
    }
    *out = ctx;
    return BRAID_OK;
}

/* ---- K re-rotation ----------------------------------------------------------------------------------------- */

static braid_status rotate_cell(void *user, mem *m, int32_t cell, const braid_pos *from, const braid_pos *to) {
    braid_context *ctx = user;
    const braid_model *model = ctx->model;
    const bd_mem_layout *ly = &model->layout;
    if (!model->arch->rerotate_k) return BRAID_OK; /* no RoPE: a K row does not depend on its position */
    braid_pos f[4] = {0}, t[4] = {0};
    const int np = ly->n_pos_per_token ? ly->n_pos_per_token : 1;
    for (int c = 0; c < np && c < 4; c++) f[c] = from[c], t[c] = to[c];
    if (np == 1) f[1] = f[2] = f[0], t[1] = t[2] = t[0]; /* a 1-component text position is (p, p, p, 0) */
    float *row = ctx->ub_embd; /* free between forward passes; n_batch * n_embd >= n_embd_k is checked below */
    for (int32_t a = 0; a < ly->n_attn; a++) {
        if (mem_kv_type(m) == BRAID_TYPE_F32) {
            float *k = (float *)((char *)mem_kv_k(m, (uint32_t)a) + (size_t)cell * mem_kv_k_row_bytes(m, (uint32_t)a));
            model->arch->rerotate_k(model->arch_data, k, f, t);
        } else {
            uint16_t *h =
                (uint16_t *)((char *)mem_kv_k(m, (uint32_t)a) + (size_t)cell * mem_kv_k_row_bytes(m, (uint32_t)a));
            for (int32_t e = 0; e < ly->n_embd_k; e++) row[e] = bd_fp16_to_fp32(h[e]);
            model->arch->rerotate_k(model->arch_data, row, f, t);
            for (int32_t e = 0; e < ly->n_embd_k; e++) h[e] = bd_fp32_to_fp16(row[e]);
        }
    }
    return BRAID_OK;
}

braid_status bd_ctx_rotate(braid_context *ctx) {
    if (!mem_kv_n_rotations_pending(ctx->mem)) return BRAID_OK;
    if ((size_t)ctx->model->layout.n_embd_k > (size_t)ctx->p.n_batch * (size_t)ctx->model->n_embd)
        return bd_error(BRAID_E_UNSUPPORTED, "K rows wider than the rotation buffer");
    return mem_kv_rotate(ctx->mem, rotate_cell, ctx);
}

/* ---- running a memory batch -------------------------------------------------------------------------------- */

braid_status bd_ctx_run_batch(braid_context *ctx, mem_batch *mb, int with_logits, int cancellable) {
    const braid_model *model = ctx->model;
    const bd_mem_layout *ly = &model->layout;
    const int32_t E = model->n_embd;
    int32_t n_out = 0;
    for (int32_t u = 0; u < mem_batch_n_ubatch(mb); u++) {
        mem_ubatch ub;
        braid_status st = mem_batch_ubatch(ctx->mem, mb, u, &ub);
        (void)st; /* rotations were applied before; a view of a begun batch cannot fail otherwise */
        const int32_t T = ub.n_rows;
        const int is_embd = T > 0 && ub.token[0] < 0;
        int any_snap = 0;
        for (int32_t t = 0; t < T; t++) {
            ctx->ub_nvis[t] = ub.idx[t] + 1;
            int32_t o = -1;
            if (with_logits && ub.batch_row && ub.batch_row[t] >= 0 && ub.logits && ub.logits[t]) {
                o = n_out++;
                ctx->new_out[ub.batch_row[t]] = o;
            }
            ctx->ub_out[t] = o;
            if (is_embd) memcpy(ctx->ub_embd + (size_t)t * E, ub.embd[t], (size_t)E * sizeof(float));
            else ctx->ub_tok[t] = ub.token[t];
            ctx->ub_snap[t] = ub.rs_snap ? ub.rs_snap[t] : NULL;
            any_snap |= ctx->ub_snap[t] != NULL;
        }
        for (int32_t k = 0; k < ub.n_runs; k++) {
            const mem_run *run = &ub.runs[k];
            for (int32_t t = run->row0; t < run->row0 + run->n_rows; t++) ctx->ub_seq[t] = k;
            ctx->ub_runs[k] = (bd_fwd_run){.row0 = run->row0, .n_rows = run->n_rows, .cells = run->kv_cells,
                                           .state_in = run->rs_src ? run->rs_src : ctx->zero_state,
                                           .state_out = run->rs_dst};
        }
        bd_fwd_batch b = {
            .n = T,
            .token = is_embd ? NULL : ctx->ub_tok,
            .embd = is_embd ? ctx->ub_embd : NULL,
            .pos = ub.pos,
            .seq = ctx->ub_seq,
            .n_seq = ub.n_runs,
            .out = ctx->ub_out,
            .hidden = with_logits && ctx->want_hidden ? ctx->ub_hidden : NULL,
        };
        void *k_tab[64], *v_tab[64];
        for (int32_t a = 0; a < ly->n_attn && a < 64; a++)
            k_tab[a] = mem_kv_k(ctx->mem, (uint32_t)a), v_tab[a] = mem_kv_v(ctx->mem, (uint32_t)a);
        bd_fwd_memory fm = {
            .k = k_tab,
            .v = v_tab,
            .kv_type = ly->n_attn ? mem_kv_type(ctx->mem) : BRAID_TYPE_F32,
            .dst_cell = ub.kv_write,
            .n_visible = ctx->ub_nvis,
            .conv_off = ctx->conv_off,
            .ssm_off = ctx->ssm_off,
            .n_runs = ub.n_runs,
            .runs = ctx->ub_runs,
            .snap = any_snap ? ctx->ub_snap : NULL,
        };
        const bd_fwd_scratch sc = {ctx->scratch, (int32_t)ctx->p.n_batch, ly->n_attn ? (int32_t)ctx->p.n_ctx : 1,
                                   ctx->n_threads, cancellable ? ctx->p.abort_callback : NULL, ctx->p.abort_user};
        BD_TRY(model->arch->forward(model->arch_data, &sc, ctx->tp, &b, &fm, ctx->logits_next));
        if (b.hidden && ub.batch_row) /* by batch row, as the logits */
            for (int32_t t = 0; t < T; t++)
                if (ub.batch_row[t] >= 0 && ub.batch_row[t] < ctx->cap_hidden)
                    memcpy(ctx->hidden + (size_t)ub.batch_row[t] * E, ctx->ub_hidden + (size_t)t * E,
                           (size_t)E * sizeof(float));
    }
    return BRAID_OK;
}

/* ---- decode -------------------------------------------------------------------------------------------------- */

braid_status braid_decode(braid_context *ctx, const braid_batch *batch) {
    if (!ctx || !batch) return bd_error(BRAID_E_INVALID, "braid_decode: NULL argument");
    const braid_model *model = ctx->model;
    const int32_t n = batch->n_tokens, V = model->n_vocab;
    if (n <= 0) return bd_error(BRAID_E_INVALID, "braid_decode: n_tokens is %d", n);
    if (batch->token)
        for (int32_t i = 0; i < n; i++)
            if (batch->token[i] < 0 || batch->token[i] >= V)
                return bd_error(BRAID_E_RANGE, "braid_decode: row %d: token %d out of range 0..%d", i,
                                batch->token[i], V - 1);
    /* output rows and the row maps, before the transaction */
    if (n > ctx->cap_rows) {
        int32_t *a = bd_realloc(ctx->out_of_row, (size_t)n * sizeof *a);
        if (!a) return bd_error(BRAID_E_NOMEM, "braid_decode: out of memory");
        ctx->out_of_row = a;
        int32_t *b = bd_realloc(ctx->new_out, (size_t)n * sizeof *b);
        if (!b) return bd_error(BRAID_E_NOMEM, "braid_decode: out of memory");
        ctx->new_out = b;
        ctx->cap_rows = n;
    }
    if (ctx->want_hidden && n > ctx->cap_hidden) {
        float *h = bd_realloc(ctx->hidden, (size_t)n * (size_t)model->n_embd * sizeof(float));
        if (!h) return bd_error(BRAID_E_NOMEM, "braid_decode: out of memory for hidden states");
        ctx->hidden = h;
        ctx->cap_hidden = n;
    }
    BD_TRY(bd_ctx_rotate(ctx));
    mem_batch *mb;
    BD_TRY(mem_batch_begin(ctx->mem, batch, (int32_t)ctx->p.n_batch, &mb));
    int32_t n_out = 0;
    for (int32_t u = 0; u < mem_batch_n_ubatch(mb); u++) {
        mem_ubatch ub;
        braid_status st = mem_batch_ubatch(ctx->mem, mb, u, &ub);
        if (st != BRAID_OK) {
            mem_batch_abort(ctx->mem, mb);
            return st;
        }
        for (int32_t t = 0; t < ub.n_rows; t++) n_out += ub.logits[t] != 0;
    }
    if (n_out > ctx->cap_next) {
        float *lg = bd_realloc(ctx->logits_next, (size_t)n_out * (size_t)V * sizeof(float));
        if (!lg) {
            mem_batch_abort(ctx->mem, mb);
            return bd_error(BRAID_E_NOMEM, "braid_decode: out of memory for %d rows of logits", n_out);
        }
        ctx->logits_next = lg;
        ctx->cap_next = n_out;
    }
    for (int32_t i = 0; i < n; i++) ctx->new_out[i] = -1;
    braid_status st = bd_ctx_run_batch(ctx, mb, 1, 1);
    if (st != BRAID_OK) { /* cancelled: the batch's cells and blocks go back, the previous logits stay */
        mem_batch_abort(ctx->mem, mb);
        return st;
    }
    /* NaN logits mean the model itself is broken (NaN or overflowing weights): say so here, naming the row,
     * rather than let a sampler fail later on "logit 0 is nan", and keep none of this decode (this decode's
     * logits are in logits_next; the previous decode's stay valid). */
    for (int32_t i = 0; i < n; i++) {
        if (ctx->new_out[i] < 0) continue;
        const float *lg = ctx->logits_next + (size_t)ctx->new_out[i] * (size_t)V;
        int32_t bad = -1;
        for (int32_t v = 0; v < V && bad < 0; v++)
            if (lg[v] != lg[v]) bad = v;
        if (bad >= 0) {
            mem_batch_abort(ctx->mem, mb);
            return bd_error(BRAID_E_FORMAT, "braid_decode: decode produced NaN logits at row %d (logit %d): the "
                            "model's weights or hyperparameters are broken", i, bad);
        }
    }
    mem_batch_commit(ctx->mem, mb);
    int32_t *tmp = ctx->out_of_row;
    ctx->out_of_row = ctx->new_out;
    ctx->new_out = tmp;
    float *lt = ctx->logits;
    ctx->logits = ctx->logits_next;
    ctx->logits_next = lt;
    const int32_t ct = ctx->cap_out;
    ctx->cap_out = ctx->cap_next;
    ctx->cap_next = ct;
    ctx->n_rows = n;
    ctx->n_out = n_out;
    bd_error_clear();
    return BRAID_OK;
}

const float *braid_logits(const braid_context *ctx, int32_t i) {
    if (!ctx || i < 0 || i >= ctx->n_rows || ctx->out_of_row[i] < 0) return NULL;
    return ctx->logits + (size_t)ctx->out_of_row[i] * ctx->model->n_vocab;
}
