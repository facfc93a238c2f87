/* test_memory_qwen35.c — src/memory driving a real forward pass: a tiny random-weight qwen35 (gen-model) runs
 * through the memory's transactions via a small adapter from mem_ubatch to the architecture interface
 * (models/arch.h: bd_fwd_batch + bd_fwd_memory). Checks: the logits equal braid_decode's (the engine's own
 * memory) bit for bit; truncation by replay, rollback, copy with shared cells and save/load give the logits of
 * a fresh decode of the resulting inputs (replays in other batch shapes agree to float rounding, design.md
 * §5; save/load is bit for bit). The adapter (fwd_*) is what an engine on top of src/memory needs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "engine/model.h"
#include "memory/memory.h"
#include "genmodel/genmodel.h"
#include "test.h"

/* ---- the adapter ------------------------------------------------------------------------------------------ */

typedef struct fwd {
    const braid_model *model;
    mem *m;
    int32_t n_batch, V, E;
    void *scratch;
    void **k, **v;                      /* [n_attn] */
    braid_pos *pos4;                    /* [n_batch][4] */
    float *embd;                        /* [n_batch][E] */
    int32_t *seq, *out, *nvis;          /* [n_batch] */
    bd_fwd_run *runs;                   /* [n_batch] */
    float **snap;                       /* [n_batch] */
    int64_t *conv_off, *ssm_off;        /* [n_recr] */
    float *logits;                      /* [n_batch][V] logits of the ubatch */
    float *row_logits;                  /* [n_batch][V] logits by caller batch row */
    uint8_t *has_logits;                /* [n_batch] */
} fwd;

static mem_params fwd_params(const braid_model *model, uint32_t n_ctx, uint32_t n_seq, uint32_t n_rollback,
                             uint32_t interval, uint32_t *nk, uint32_t *nv, uint64_t *nc, uint64_t *ns) {
    const bd_mem_layout *ly = &model->layout;
    for (int32_t a = 0; a < ly->n_attn; a++) nk[a] = (uint32_t)ly->n_embd_k, nv[a] = (uint32_t)ly->n_embd_v;
    for (int32_t r = 0; r < ly->n_recr; r++) nc[r] = (uint64_t)ly->n_conv, ns[r] = (uint64_t)ly->n_ssm;
    mem_params p = {.n_seq_max = n_seq, .n_pos_per_token = (uint32_t)ly->n_pos_per_token, .n_embd = (uint32_t)model->n_embd,
                    .n_ctx = n_ctx, .kv_type = BRAID_TYPE_F32, .n_attn_layers = (uint32_t)ly->n_attn, .n_embd_k = nk,
                    .n_embd_v = nv, .n_rs_layers = (uint32_t)ly->n_recr, .n_conv = nc, .n_ssm = ns,
                    .checkpoint_interval = interval, .checkpoint_budget_bytes = 64u << 20, .n_rollback = n_rollback,
                    .n_ubatch = 16};
    return p;
}

static int fwd_init(fwd *f, const braid_model *model, mem *m, int32_t n_batch) {
    const bd_mem_layout *ly = &model->layout;
    memset(f, 0, sizeof *f);
    f->model = model, f->m = m, f->n_batch = n_batch, f->V = model->n_vocab, f->E = model->n_embd;
    size_t nb = (size_t)n_batch;
    f->scratch = malloc(model->arch->scratch_size(model->arch_data, n_batch, (int32_t)mem_kv_n_cells(m), 1));
    f->k = calloc((size_t)ly->n_attn + 1, sizeof *f->k), f->v = calloc((size_t)ly->n_attn + 1, sizeof *f->v);
    for (int32_t a = 0; a < ly->n_attn; a++) f->k[a] = mem_kv_k(m, (uint32_t)a), f->v[a] = mem_kv_v(m, (uint32_t)a);
    f->pos4 = calloc(nb * 4, sizeof *f->pos4), f->embd = calloc(nb * (size_t)f->E, sizeof *f->embd);
    f->seq = calloc(nb, sizeof *f->seq), f->out = calloc(nb, sizeof *f->out), f->nvis = calloc(nb, sizeof *f->nvis);
    f->runs = calloc(nb, sizeof *f->runs), f->snap = calloc(nb, sizeof *f->snap);
    f->conv_off = calloc((size_t)ly->n_recr + 1, sizeof *f->conv_off);
    f->ssm_off = calloc((size_t)ly->n_recr + 1, sizeof *f->ssm_off);
    for (int32_t r = 0; r < ly->n_recr; r++)
        f->conv_off[r] = (int64_t)mem_rs_conv_off(m, (uint32_t)r), f->ssm_off[r] = (int64_t)mem_rs_ssm_off(m, (uint32_t)r);
    f->logits = calloc(nb * (size_t)f->V, sizeof *f->logits), f->row_logits = calloc(nb * (size_t)f->V, sizeof(float));
    f->has_logits = calloc(nb, 1);
    return f->scratch && f->k && f->embd && f->logits && f->row_logits && f->has_logits;
}

static void fwd_free(fwd *f) {
    free(f->scratch), free(f->k), free(f->v), free(f->pos4), free(f->embd), free(f->seq), free(f->out), free(f->nvis);
    free(f->runs), free(f->snap), free(f->conv_off), free(f->ssm_off);
    free(f->logits), free(f->row_logits), free(f->has_logits);
}

static braid_status fwd_rotate(void *user, mem *m, int32_t cell, const braid_pos *from, const braid_pos *to) {
    const fwd *f = user;
    const bd_mem_layout *ly = &f->model->layout;
    braid_pos a[4] = {0}, b[4] = {0};
    memcpy(a, from, (size_t)ly->n_pos_per_token * sizeof *a);
    memcpy(b, to, (size_t)ly->n_pos_per_token * sizeof *b);
    for (int32_t l = 0; l < ly->n_attn; l++)
        f->model->arch->rerotate_k(f->model->arch_data, (float *)((uint8_t *)mem_kv_k(m, (uint32_t)l) + (size_t)cell * mem_kv_k_row_bytes(m, (uint32_t)l)), a, b);
    return BRAID_OK;
}

/* One ubatch through the architecture's forward pass. */
static void fwd_ubatch(fwd *f, const mem_ubatch *ub) {
    const bd_mem_layout *ly = &f->model->layout;
    const int32_t n = ub->n_rows, np = ly->n_pos_per_token;
    int32_t n_out = 0, any_snap = 0;
    for (int32_t t = 0; t < n; t++) {
        memset(f->pos4 + 4 * t, 0, 4 * sizeof(braid_pos));
        memcpy(f->pos4 + 4 * t, ub->pos + (size_t)t * np, (size_t)np * sizeof(braid_pos));
        if (ub->embd[t]) memcpy(f->embd + (size_t)t * f->E, ub->embd[t], (size_t)f->E * sizeof(float));
        f->out[t] = ub->logits[t] ? n_out++ : -1;
        f->nvis[t] = ub->idx[t] + 1;
        any_snap |= ub->rs_snap[t] != NULL;
        f->snap[t] = ub->rs_snap[t];
    }
    for (int32_t k = 0; k < ub->n_runs; k++) {
        const mem_run *ru = &ub->runs[k];
        for (int32_t j = 0; j < ru->n_rows; j++) f->seq[ru->row0 + j] = k;
        f->runs[k] = (bd_fwd_run){.row0 = ru->row0, .n_rows = ru->n_rows, .cells = ru->kv_cells,
                                  .state_in = ru->rs_src, .state_out = ru->rs_dst};
    }
    bd_fwd_batch b = {.n = n, .token = ub->embd[0] ? NULL : ub->token, .embd = ub->embd[0] ? f->embd : NULL,
                      .pos = f->pos4, .seq = f->seq, .n_seq = ub->n_runs, .out = f->out};
    bd_fwd_memory fm = {.k = f->k, .v = f->v, .kv_type = mem_kv_type(f->m), .dst_cell = ub->kv_write,
                        .n_visible = f->nvis, .conv_off = f->conv_off, .ssm_off = f->ssm_off,
                        .n_runs = ub->n_runs, .runs = f->runs, .snap = any_snap ? f->snap : NULL};
    const bd_fwd_scratch sc = {f->scratch, f->n_batch, (int32_t)mem_kv_n_cells(f->m), 1, NULL, NULL};
    braid_status st = f->model->arch->forward(f->model->arch_data, &sc, NULL, &b, &fm, f->logits);
    CHECK(st == BRAID_OK, "forward: %s", braid_last_error());
    for (int32_t t = 0; t < n; t++)
        if (f->out[t] >= 0 && ub->batch_row[t] >= 0) {
            memcpy(f->row_logits + (size_t)ub->batch_row[t] * f->V, f->logits + (size_t)f->out[t] * f->V, (size_t)f->V * sizeof(float));
            f->has_logits[ub->batch_row[t]] = 1;
        }
}

/* Runs a decode or replay batch and commits it. */
static braid_status fwd_run(fwd *f, mem_batch *b) {
    BD_TRY(mem_kv_rotate(f->m, fwd_rotate, f));
    memset(f->has_logits, 0, (size_t)f->n_batch);
    for (int32_t u = 0; u < mem_batch_n_ubatch(b); u++) {
        mem_ubatch ub;
        braid_status st = mem_batch_ubatch(f->m, b, u, &ub);
        if (st != BRAID_OK) {
            mem_batch_abort(f->m, b);
            return st;
        }
        fwd_ubatch(f, &ub);
    }
    mem_batch_commit(f->m, b);
    return BRAID_OK;
}

static braid_status fwd_decode(fwd *f, const braid_batch *batch) {
    mem_batch *b;
    BD_TRY(mem_batch_begin(f->m, batch, f->n_batch, &b));
    return fwd_run(f, b);
}

/* ---- the checks ------------------------------------------------------------------------------------------- */

static double max_rel(const float *a, const float *b, int32_t n) {
    double num = 0, den = 0;
    for (int32_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        num = d > num ? d : num;
        den = fabs((double)b[i]) > den ? fabs((double)b[i]) : den;
    }
    return num / (den > 0 ? den : 1);
}

static const braid_token P0[12] = {5, 17, 300, 42, 7, 999, 123, 64, 8, 77, 501, 33};
static const braid_token P1[7] = {9, 250, 11, 600, 3, 3, 1000};

/* A fresh memory decoding toks (all in one batch) into sequence 0; returns the last row's logits (copied). */
static float *fresh_logits(const braid_model *model, const braid_token *toks, int32_t n) {
    uint32_t nk[8], nv[8];
    uint64_t nc[8], ns[8];
    mem_params p = fwd_params(model, 64, 1, 4, 4, nk, nv, nc, ns);
    mem *m;
    if (mem_new(&p, &m) != BRAID_OK) return NULL;
    fwd f;
    float *out = NULL;
    if (fwd_init(&f, model, m, 32) && fwd_decode(&f, &(braid_batch){.n_tokens = n, .token = toks}) == BRAID_OK &&
        f.has_logits[n - 1]) {
        out = malloc((size_t)f.V * sizeof *out);
        memcpy(out, f.row_logits + (size_t)(n - 1) * f.V, (size_t)f.V * sizeof *out);
    }
    fwd_free(&f);
    mem_free(m);
    return out;
}

int main(void) {
    const char *path = "memory_qwen35_tiny.gguf";
    gen_params gp;
    gen_params_default(&gp);
    gp.vocab = "none";
    gp.seed = 11;
    gen_summary sum;
    CHECK_STATUS(gen_model_write(&gp, path, &sum), BRAID_OK);
    braid_model_params mp = braid_model_default_params();
    braid_model *model = NULL;
    CHECK_STATUS(braid_model_load(path, &mp, &model), BRAID_OK);
    if (!model) TEST_MAIN_END();
    const int32_t V = model->n_vocab;

    /* The engine's decode of a two-sequence batch. */
    braid_context_params cp = braid_context_default_params();
    cp.n_ctx = 64, cp.n_seq_max = 2, cp.n_batch = 32, cp.kv_type = BRAID_TYPE_F32, cp.n_rollback = 4;
    braid_context *ctx = NULL;
    CHECK_STATUS(braid_context_new(model, &cp, &ctx), BRAID_OK);
    braid_token tok[19];
    braid_seq_id sid[19];
    for (int i = 0, a = 0, b = 0; i < 19; i++) {
        int use0 = a < 12 && (b >= 7 || i % 3 != 2);
        tok[i] = use0 ? P0[a++] : P1[b++];
        sid[i] = use0 ? 0 : 1;
    }
    braid_batch batch = {.n_tokens = 19, .token = tok, .seq = sid};
    CHECK_STATUS(braid_decode(ctx, &batch), BRAID_OK);

    uint32_t nk[8], nv[8];
    uint64_t nc[8], ns[8];
    mem_params p = fwd_params(model, 64, 4, 4, 4, nk, nv, nc, ns);
    mem *m = NULL;
    CHECK_STATUS(mem_new(&p, &m), BRAID_OK);
    fwd f;
    CHECK(fwd_init(&f, model, m, 32), "adapter buffers");
    CHECK_STATUS(fwd_decode(&f, &batch), BRAID_OK);
    int32_t rows[2] = {-1, -1};
    for (int i = 0; i < 19; i++) rows[sid[i]] = i;
    for (int k = 0; k < 2; k++) {
        const float *e = braid_logits(ctx, rows[k]);
        CHECK(e && f.has_logits[rows[k]], "logits of row %d", rows[k]);
        if (e) CHECK(!memcmp(e, f.row_logits + (size_t)rows[k] * V, (size_t)V * sizeof(float)),
                     "seq %d: memory + qwen35 forward = braid_decode bit for bit (max rel %.3g)", k,
                     max_rel(f.row_logits + (size_t)rows[k] * V, e, V));
    }
    braid_context_free(ctx);

    /* Truncation by replay: seq 0 back to 7 inputs (checkpoint at 4, replay [4, 7)), then one more token. */
    mem_batch *rb;
    CHECK_STATUS(mem_seq_truncate(m, 0, 7, &rb), BRAID_OK);
    CHECK(rb != NULL, "truncate 12 -> 7 replays");
    if (rb) {
        int32_t s, from, to;
        mem_batch_replay_info(rb, &s, &from, &to);
        CHECK(from == 4 && to == 7, "replay [%d, %d)", from, to);
        CHECK_STATUS(fwd_run(&f, rb), BRAID_OK);
    }
    braid_token x = 444, seq_a[8];
    memcpy(seq_a, P0, 7 * sizeof *seq_a);
    seq_a[7] = x;
    CHECK_STATUS(fwd_decode(&f, &(braid_batch){.n_tokens = 1, .token = &x}), BRAID_OK);
    float *ref = fresh_logits(model, seq_a, 8);
    double e1 = ref ? max_rel(f.row_logits, ref, V) : 1;
    printf("truncate by replay then decode: max rel error vs a fresh decode %.3g\n", e1);
    CHECK(ref && e1 < 1e-4, "truncate by replay: %.3g", e1);
    free(ref);
    /* The comparison can fail: other inputs give other logits, and the logits are not flat. */
    seq_a[3] = 43;
    ref = fresh_logits(model, seq_a, 8);
    double lo = 1e30, hi = -1e30;
    for (int32_t i = 0; i < V; i++) lo = f.row_logits[i] < lo ? f.row_logits[i] : lo, hi = f.row_logits[i] > hi ? f.row_logits[i] : hi;
    CHECK(ref && max_rel(f.row_logits, ref, V) > 1e-3, "a different input 3 changes the logits (%.3g)", ref ? max_rel(f.row_logits, ref, V) : 0);
    CHECK(hi - lo > 0.1, "logits spread %.3g .. %.3g", lo, hi);
    printf("logits spread %.3f .. %.3f; a changed input moves them by %.3g (relative)\n", lo, hi, ref ? max_rel(f.row_logits, ref, V) : 0);
    free(ref);

    /* Rollback: 3 drafts on seq 1, keep 1, decode another token. */
    braid_token drafts[3] = {70, 71, 72};
    braid_seq_id s1[3] = {1, 1, 1};
    CHECK_STATUS(fwd_decode(&f, &(braid_batch){.n_tokens = 3, .token = drafts, .seq = s1}), BRAID_OK);
    CHECK_STATUS(mem_seq_truncate(m, 1, 8, &rb), BRAID_OK);
    CHECK(rb == NULL, "keeping 1 of 3 drafts needs no replay");
    braid_token y = 880, seq_b[9];
    memcpy(seq_b, P1, 7 * sizeof *seq_b);
    seq_b[7] = 70, seq_b[8] = y;
    CHECK_STATUS(fwd_decode(&f, &(braid_batch){.n_tokens = 1, .token = &y, .seq = s1}), BRAID_OK);
    ref = fresh_logits(model, seq_b, 9);
    double e2 = ref ? max_rel(f.row_logits, ref, V) : 1;
    printf("rollback then decode:           max rel error vs a fresh decode %.3g\n", e2);
    CHECK(ref && e2 < 1e-4, "rollback: %.3g", e2);
    free(ref);

    /* Copy with shared cells (replay from the checkpoint at 4 to 6), then a token on the copy. */
    CHECK_STATUS(mem_seq_copy(m, 0, 2, 6, &rb), BRAID_OK);
    if (rb) CHECK_STATUS(fwd_run(&f, rb), BRAID_OK);
    braid_token z = 12, seq_c[7];
    memcpy(seq_c, P0, 6 * sizeof *seq_c);
    seq_c[6] = z;
    CHECK_STATUS(fwd_decode(&f, &(braid_batch){.n_tokens = 1, .token = &z, .seq = (braid_seq_id[]){2}}), BRAID_OK);
    ref = fresh_logits(model, seq_c, 7);
    double e3 = ref ? max_rel(f.row_logits, ref, V) : 1;
    printf("copy (shared cells) then decode: max rel error vs a fresh decode %.3g\n", e3);
    CHECK(ref && e3 < 1e-4, "copy: %.3g", e3);
    free(ref);

    /* Save / load into a fresh memory: the next token's logits are identical. */
    void *blob;
    size_t n;
    CHECK_STATUS(mem_state_save_alloc(m, -1, model->fingerprint, "qwen35 tiny", &blob, &n), BRAID_OK);
    mem *m2 = NULL;
    CHECK_STATUS(mem_new(&p, &m2), BRAID_OK);
    CHECK_STATUS(mem_state_load(m2, -1, model->fingerprint, blob, n), BRAID_OK);
    fwd f2;
    CHECK(fwd_init(&f2, model, m2, 32), "adapter 2");
    braid_token w = 321;
    CHECK_STATUS(fwd_decode(&f, &(braid_batch){.n_tokens = 1, .token = &w}), BRAID_OK);
    CHECK_STATUS(fwd_decode(&f2, &(braid_batch){.n_tokens = 1, .token = &w}), BRAID_OK);
    CHECK(!memcmp(f.row_logits, f2.row_logits, (size_t)V * sizeof(float)), "save/load: logits bit for bit");
    bd_free(blob);
    fwd_free(&f2);
    mem_free(m2);

    fwd_free(&f);
    mem_free(m);

    /* An M-RoPE image (embedding rows sharing a temporal position, (y, x) row-major) between text, with
     * default positions after it: same logits as braid_decode, no warning. */
    {
        const int32_t E = model->n_embd, nx = 3, ny = 2;
        float *img = calloc((size_t)nx * ny * E, sizeof(float));
        braid_pos ipos[6 * 4];
        for (int32_t i = 0; i < nx * ny; i++) {
            for (int32_t e = 0; e < E; e++) img[(size_t)i * E + e] = 0.05f * (float)((i * 7 + e * 3) % 11) - 0.25f;
            ipos[4 * i] = 3, ipos[4 * i + 1] = 3 + i / nx, ipos[4 * i + 2] = 3 + i % nx, ipos[4 * i + 3] = 0;
        }
        braid_batch text = {.n_tokens = 3, .token = P0}, image = {.n_tokens = nx * ny, .embd = img, .pos = ipos},
                    after = {.n_tokens = 2, .token = P1};
        unsigned long warn0 = bd_log_warn_count();
        braid_context *c2 = NULL;
        CHECK_STATUS(braid_context_new(model, &cp, &c2), BRAID_OK);
        CHECK_STATUS(braid_decode(c2, &text), BRAID_OK);
        CHECK_STATUS(braid_decode(c2, &image), BRAID_OK);
        CHECK_STATUS(braid_decode(c2, &after), BRAID_OK);
        mem *m3 = NULL;
        CHECK_STATUS(mem_new(&p, &m3), BRAID_OK);
        fwd f3;
        CHECK(fwd_init(&f3, model, m3, 32), "adapter 3");
        CHECK_STATUS(fwd_decode(&f3, &text), BRAID_OK);
        CHECK_STATUS(fwd_decode(&f3, &image), BRAID_OK);
        CHECK(mem_seq_next_pos(m3, 0) == 3 + 3, "text after the image at t0 + max(nx, ny): %d", mem_seq_next_pos(m3, 0));
        CHECK_STATUS(fwd_decode(&f3, &after), BRAID_OK);
        const float *e = braid_logits(c2, 1);
        CHECK(e && f3.has_logits[1] && !memcmp(e, f3.row_logits + (size_t)V, (size_t)V * sizeof(float)),
              "image span: memory + forward = braid_decode bit for bit (max rel %.3g)", e ? max_rel(f3.row_logits + V, e, V) : 1);
        CHECK(bd_log_warn_count() == warn0, "no warnings");
        /* Truncating into the middle of the image replays embedding rows from the history. */
        mem_batch *rb3;
        CHECK_STATUS(mem_seq_truncate(m3, 0, 7, &rb3), BRAID_OK);
        if (rb3) CHECK_STATUS(fwd_run(&f3, rb3), BRAID_OK);
        CHECK(mem_seq_len(m3, 0) == 7, "truncated into the image");
        braid_context_free(c2);
        fwd_free(&f3);
        mem_free(m3);
        free(img);
    }
    braid_model_free(model);
    remove(path);
    TEST_MAIN_END();
}
