/* mtp.c — the MTP head's rows beside a generator (see mtp.h for the layout and why it is not a context).
 *
 * Every call runs the head through the architecture's mtp_forward on the target context's scratch and
 * threads (the generator drives that context, so nothing else uses them meanwhile), with a one-run memory
 * view whose cells are sequence indices: cell i holds the head's K/V rows for index i. */
#include "engine/mtp.h"

#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "engine/context.h"
#include "memory/memory.h"

struct bd_mtp {
    braid_context *ctx;
    braid_seq_id seq;
    int32_t E, V, nk, nv, np, nb; /* n_embd, n_vocab, K / V row floats, position components, rows per call */
    int32_t cap;                  /* indices the arrays below hold */
    float *k, *v;                 /* [cap][nk], [cap][nv] the head's K/V rows by index */
    float *h;                     /* [cap][E] the trunk's hidden state by index */
    int32_t *ident;               /* [cap] i -> i: the run's cell list */
    int32_t base, n_cells, n_h;   /* rows known: K/V for [base, n_cells), h for [base, n_h) */
    /* one call's rows, [nb] */
    braid_token *tok;
    braid_pos *pos;               /* [nb][np] */
    int32_t *seqv, *out, *dst, *nvis;
    float *hin;                   /* [nb][E] */
    float *logits;                /* [V] the last row's */
    float *hout;                  /* [nb][E] */
    float *zero;                  /* [E] the h before the first known one */
};

void bd_mtp_free(bd_mtp *t) {
    if (!t) return;
    bd_free(t->k);
    bd_free(t->v);
    bd_free(t->h);
    bd_free(t->ident);
    bd_free(t->tok);
    bd_free(t->pos);
    bd_free(t->seqv);
    bd_free(t->out);
    bd_free(t->dst);
    bd_free(t->nvis);
    bd_free(t->hin);
    bd_free(t->logits);
    bd_free(t->hout);
    bd_free(t->zero);
    bd_free(t);
}

braid_status bd_mtp_new(braid_context *ctx, braid_seq_id seq, bd_mtp **out) {
    *out = NULL;
    const braid_model *m = ctx->model;
    if (!m->arch->has_mtp || !m->arch->mtp_forward)
        return bd_error(BRAID_E_UNSUPPORTED,
                        "mtp: braid runs the MTP heads of qwen35, qwen35moe and qwen3next files, not of %s (for "
                        "nemotron_h_moe: its block of NoPE attention, a relu^2 MoE and a LayerNorm head is not "
                        "implemented)", m->arch->name);
    if (!m->arch->has_mtp(m->arch_data))
        return bd_error(BRAID_E_UNSUPPORTED,
                        "mtp: this %s file carries no usable MTP block (nextn_predict_layers 1 with "
                        "blk.N.nextn.eh_proj)", m->arch->name);
    if (m->layout.n_attn < 1)
        return bd_error(BRAID_E_UNSUPPORTED, "mtp: the model has no attention rows to size the head's rows by");
    bd_mtp *t = bd_calloc(1, sizeof *t);
    if (!t) return bd_error(BRAID_E_NOMEM, "mtp: out of memory");
    t->ctx = ctx;
    t->seq = seq;
    t->E = m->n_embd;
    t->V = m->n_vocab;
    t->nk = m->layout.n_embd_k;
    t->nv = m->layout.n_embd_v;
    t->np = m->layout.n_pos_per_token ? m->layout.n_pos_per_token : 1;
    t->nb = (int32_t)ctx->p.n_batch;
    const size_t nb = (size_t)t->nb;
    t->tok = bd_mallocn(nb, sizeof *t->tok);
    t->pos = bd_mallocn(nb * (size_t)t->np, sizeof *t->pos);
    t->seqv = bd_calloc(nb, sizeof *t->seqv);
    t->out = bd_mallocn(nb, sizeof *t->out);
    t->dst = bd_mallocn(nb, sizeof *t->dst);
    t->nvis = bd_mallocn(nb, sizeof *t->nvis);
    t->hin = bd_mallocn(nb * (size_t)t->E, sizeof(float));
    t->hout = bd_mallocn(nb * (size_t)t->E, sizeof(float));
    t->logits = bd_mallocn((size_t)t->V, sizeof(float));
    t->zero = bd_calloc((size_t)t->E, sizeof(float));
    braid_status st = BRAID_OK;
    if (!t->tok || !t->pos || !t->seqv || !t->out || !t->dst || !t->nvis || !t->hin || !t->hout || !t->logits ||
        !t->zero)
        st = bd_error(BRAID_E_NOMEM, "mtp: out of memory");
    if (st == BRAID_OK) st = bd_ctx_want_hidden(ctx);
    if (st != BRAID_OK) {
        bd_mtp_free(t);
        return st;
    }
    *out = t;
    return BRAID_OK;
}

void bd_mtp_reset(bd_mtp *t) { t->base = t->n_cells = t->n_h = 0; }

/* Room for indices [0, need). */
static braid_status grow(bd_mtp *t, int32_t need) {
    if (need <= t->cap) return BRAID_OK;
    int64_t c = t->cap ? (int64_t)t->cap * 2 : 256;
    while (c < need) c *= 2;
    float *k = bd_realloc(t->k, (size_t)c * (size_t)t->nk * sizeof(float));
    if (k) t->k = k;
    float *v = k ? bd_realloc(t->v, (size_t)c * (size_t)t->nv * sizeof(float)) : NULL;
    if (v) t->v = v;
    float *h = v ? bd_realloc(t->h, (size_t)c * (size_t)t->E * sizeof(float)) : NULL;
    if (h) t->h = h;
    int32_t *id = h ? bd_realloc(t->ident, (size_t)c * sizeof(int32_t)) : NULL;
    if (!id) return bd_error(BRAID_E_NOMEM, "mtp: out of memory for %lld rows", (long long)c);
    t->ident = id;
    for (int64_t i = t->cap; i < c; i++) id[i] = (int32_t)i;
    t->cap = (int32_t)c;
    return BRAID_OK;
}

braid_status bd_mtp_after_decode(bd_mtp *t, int32_t i0, int32_t n, int32_t row0) {
    if (i0 > t->n_h || i0 < t->base) { /* a gap (or rows before base): what precedes i0 is unknown */
        t->base = i0;
        t->n_cells = i0;
    } else if (t->n_cells > i0) {
        t->n_cells = i0;
    }
    BD_TRY(grow(t, i0 + n + 1));
    const braid_context *c = t->ctx;
    if (!c->hidden || row0 < 0 || c->n_rows < row0 + n || c->cap_hidden < row0 + n)
        return bd_error(BRAID_E_INVALID, "mtp: internal: no hidden states kept");
    memcpy(t->h + (size_t)i0 * t->E, c->hidden + (size_t)row0 * t->E, (size_t)n * (size_t)t->E * sizeof(float));
    t->n_h = i0 + n;
    return BRAID_OK;
}

void bd_mtp_truncate(bd_mtp *t, int32_t n) {
    if (t->n_h > n) t->n_h = n;
    if (t->n_cells > n) t->n_cells = n;
    if (t->base > n) t->base = t->n_cells = t->n_h = n;
}

/* The hidden state row idx pairs with: h_{idx-1} if known, else zeros. */
static const float *h_before(const bd_mtp *t, int32_t idx) {
    return idx - 1 >= t->base && idx - 1 < t->n_h ? t->h + (size_t)(idx - 1) * t->E : t->zero;
}

/* Runs the head over rows tok/pos/hin [0, T) at indices [idx0, idx0 + T), K/V into their cells; logits of the
 * last row if want (into t->logits: one row), every row's h' into t->hout. */
static braid_status run(bd_mtp *t, int32_t T, int32_t idx0, int want) {
    braid_context *c = t->ctx;
    const braid_model *m = c->model;
    for (int32_t r = 0; r < T; r++) {
        t->dst[r] = idx0 + r;
        t->nvis[r] = idx0 + r - t->base + 1;
        t->out[r] = want && r == T - 1 ? 0 : -1;
    }
    bd_fwd_batch b = {.n = T, .token = t->tok, .pos = t->pos, .seq = t->seqv, .n_seq = 1, .out = t->out};
    bd_fwd_run r = {.row0 = 0, .n_rows = T, .cells = t->ident + t->base};
    void *kt[1] = {t->k}, *vt[1] = {t->v};
    bd_fwd_memory fm = {.k = kt, .v = vt, .kv_type = BRAID_TYPE_F32, .dst_cell = t->dst, .n_visible = t->nvis,
                        .n_runs = 1, .runs = &r};
    const bd_fwd_scratch sc = {c->scratch, (int32_t)c->p.n_batch, (int32_t)c->p.n_ctx, c->n_threads, NULL, NULL};
    return m->arch->mtp_forward(m->arch_data, &sc, c->tp, &b, t->hin, &fm, t->logits, t->hout);
}

static void text_pos(const bd_mtp *t, braid_pos *dst, braid_pos p) {
    for (int32_t c = 0; c < t->np; c++) dst[c] = t->np == 4 && c == 3 ? 0 : p;
}

braid_status bd_mtp_first(bd_mtp *t, int32_t n_tok, braid_token next, braid_pos next_pos, int *ready,
                          const float **logits, const float **h_out) {
    *ready = 0;
    *logits = *h_out = NULL;
    if (t->n_h > n_tok) t->n_h = n_tok;
    if (t->n_cells > n_tok) t->n_cells = n_tok;
    if (t->base > n_tok) t->base = t->n_cells = t->n_h = n_tok;
    if (t->n_cells < t->base) t->n_cells = t->base;
    if (n_tok < 1 || t->n_h < n_tok || n_tok - 1 < t->base) return BRAID_OK; /* h_{n_tok-1} unknown */
    if (n_tok - t->base + 1 > (int32_t)t->ctx->p.n_ctx) return BRAID_OK; /* no room for the draft row */
    BD_TRY(grow(t, n_tok + 1));
    const mem *mm = t->ctx->mem;
    for (;;) {
        /* rows [i0, i0 + T) of the catch-up, then (if it fits) the draft row */
        const int32_t i0 = t->n_cells;
        int32_t T = n_tok - i0 < t->nb ? n_tok - i0 : t->nb;
        int32_t r = 0;
        for (; r < T; r++) {
            braid_token x;
            const braid_pos *p;
            const float *e;
            BD_TRY(mem_seq_input(mm, t->seq, i0 + r, &x, &p, &e));
            if (x < 0) break; /* an embedding input (an image) has no token for the head: start after it */
            t->tok[r] = x;
            memcpy(t->pos + (size_t)r * t->np, p, (size_t)t->np * sizeof *p);
            memcpy(t->hin + (size_t)r * t->E, h_before(t, i0 + r), (size_t)t->E * sizeof(float));
        }
        if (r < T) {
            t->base = t->n_cells = i0 + r + 1;
            if (n_tok - 1 < t->base) return BRAID_OK;
            continue;
        }
        const int with_next = i0 + T == n_tok && T < t->nb;
        if (with_next) {
            t->tok[T] = next;
            text_pos(t, t->pos + (size_t)T * t->np, next_pos);
            memcpy(t->hin + (size_t)T * t->E, h_before(t, n_tok), (size_t)t->E * sizeof(float));
        }
        if (T + with_next > 0) BD_TRY(run(t, T + with_next, i0, with_next));
        t->n_cells = i0 + T;
        if (with_next) {
            *ready = 1;
            *logits = t->logits;
            *h_out = t->hout + (size_t)T * t->E;
            return BRAID_OK;
        }
    }
}

braid_status bd_mtp_step(bd_mtp *t, braid_token token, int32_t idx, braid_pos pos, const float *h,
                         const float **logits, const float **h_out) {
    if (idx < t->n_cells || idx - t->base + 1 > (int32_t)t->ctx->p.n_ctx)
        return bd_error(BRAID_E_FULL, "mtp: no room for a draft row at index %d", idx);
    BD_TRY(grow(t, idx + 1));
    t->tok[0] = token;
    text_pos(t, t->pos, pos);
    memmove(t->hin, h ? h : h_before(t, idx), (size_t)t->E * sizeof(float)); /* h may be t->hout */
    BD_TRY(run(t, 1, idx, 1));
    *logits = t->logits;
    *h_out = t->hout;
    return BRAID_OK;
}
