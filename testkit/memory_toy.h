/* memory_toy.h — a toy "model" for testing the memory without weights, and a reference that recomputes
 * every sequence from its input history.
 *
 * The toy forward pass does what a real one does with the memory: writes each row's K and V rows (per attention
 * layer) into kv_write, reads the visible cells of each query in order, and advances each recurrent layer's
 * state from rs_src to rs_dst row by row, copying it to rs_snap where asked. Its arithmetic is on small integers
 * held in floats (exact in F32 and F16), so the memory and the reference agree bit for bit:
 *   K[l][i] = (7x + 3i + l) % 13 + pos[i % n_pos]      (rotation adds the position delta: exact)
 *   V[l][i] = (5x + i + l) % 17
 *   a       = (sum over visible cells t = 0..idx of K[0][0] * (t + 1) + V[0][0]) % 1009   (0 without attention)
 *   conv    = shift left, last = (x + a) % 101
 *   ssm[i]  = (3 ssm[i] + conv[i % n_conv] + a + i + l) % 1009
 * where x is the token id, or 1000 + embd[0] for an embedding row. The recurrent update depends on positions
 * only through attention, as in a real hybrid. Header-only: used by tests/unit/test_memory*.c, fuzz/ and bench/. */
#ifndef BRAID_TESTS_MEMORY_TOY_H
#define BRAID_TESTS_MEMORY_TOY_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/status.h"
#include "memory/memory.h"
#include "tensor/types.h"

#define TOY_MAXL 8 /* layers of each kind at most */

typedef struct toy_layout {
    const char *name;
    uint32_t n_seq, n_pos, n_embd, n_ctx, n_attn, n_rs, interval, rollback, n_ubatch;
    braid_type kv_type;
    uint32_t nk[TOY_MAXL], nv[TOY_MAXL];
    uint64_t nconv[TOY_MAXL], nssm[TOY_MAXL];
    uint32_t budget_blocks; /* checkpoint budget in blocks */
} toy_layout;

static inline mem_params toy_params(const toy_layout *t) {
    mem_params p = {0};
    p.n_seq_max = t->n_seq;
    p.n_pos_per_token = t->n_pos;
    p.n_embd = t->n_embd;
    p.n_ctx = t->n_ctx;
    p.kv_type = t->kv_type;
    p.n_attn_layers = t->n_attn;
    p.n_embd_k = t->nk;
    p.n_embd_v = t->nv;
    p.n_rs_layers = t->n_rs;
    p.n_conv = t->nconv;
    p.n_ssm = t->nssm;
    p.checkpoint_interval = t->interval;
    uint64_t bf = 0;
    for (uint32_t l = 0; l < t->n_rs; l++) bf += t->nconv[l] + t->nssm[l];
    p.checkpoint_budget_bytes = (uint64_t)t->budget_blocks * bf * sizeof(float);
    p.n_rollback = t->rollback;
    p.n_ubatch = t->n_ubatch;
    return p;
}

static inline int32_t toy_x(braid_token tok, const float *embd) { return embd ? 1000 + (int32_t)embd[0] : tok; }
static inline float toy_kval(uint32_t l, int32_t x, uint32_t i, const braid_pos *pos, uint32_t np) {
    return (float)((7 * x + 3 * (int32_t)i + (int32_t)l) % 13 + pos[i % np]);
}
static inline float toy_vval(uint32_t l, int32_t x, uint32_t i) { return (float)((5 * x + (int32_t)i + (int32_t)l) % 17); }

static inline float toy_load(braid_type t, const void *row, uint32_t i) {
    return t == BRAID_TYPE_F32 ? ((const float *)row)[i] : bd_fp16_to_fp32(((const uint16_t *)row)[i]);
}
static inline void toy_store(braid_type t, void *row, uint32_t i, float v) {
    if (t == BRAID_TYPE_F32)
        ((float *)row)[i] = v;
    else
        ((uint16_t *)row)[i] = bd_fp32_to_fp16(v);
}

/* One recurrent step of every layer on block st (in place). */
static inline void toy_rs_step(const toy_layout *t, const mem *m, float *st, int32_t x, double a) {
    for (uint32_t l = 0; l < t->n_rs; l++) {
        float *conv = st + mem_rs_conv_off(m, l), *ssm = st + mem_rs_ssm_off(m, l);
        uint64_t nc = t->nconv[l];
        if (nc) {
            memmove(conv, conv + 1, (nc - 1) * sizeof(float));
            conv[nc - 1] = (float)fmod((double)x + a, 101.0);
        }
        for (uint64_t i = 0; i < t->nssm[l]; i++)
            ssm[i] = (float)fmod(3.0 * ssm[i] + (nc ? conv[i % nc] : 0.0f) + a + (double)i + l, 1009.0);
    }
}

/* The toy forward pass over one ubatch. */
static inline braid_status toy_forward(const toy_layout *t, mem *m, const mem_ubatch *ub) {
    braid_type kt = mem_kv_type(m);
    size_t bf = mem_rs_block_floats(m);
    for (int32_t r = 1; r < ub->n_rows; r++) /* a ubatch is all tokens or all embeddings */
        if ((ub->embd[r] != NULL) != (ub->embd[0] != NULL) ||
            (ub->batch_row[0] < 0 && ub->embd[r] && ub->embd[r] != ub->embd[0] + (size_t)r * t->n_embd))
            return bd_error(BRAID_E_INVALID, "toy: ubatch row %d mixes input kinds or breaks the embedding block", r);
    for (int32_t k = 0; k < ub->n_runs; k++) {
        const mem_run *ru = &ub->runs[k];
        float *st = ru->rs_dst;
        if (st && st != ru->rs_src) memcpy(st, ru->rs_src, bf * sizeof(float));
        for (int32_t j = 0; j < ru->n_rows; j++) {
            int32_t r = ru->row0 + j, idx = ru->idx0 + j;
            int32_t x = toy_x(ub->token[r], ub->embd[r]);
            const braid_pos *pos = ub->pos + (size_t)r * t->n_pos;
            if (ub->idx[r] != idx || ub->seq[r] != ru->seq) return bd_error(BRAID_E_INVALID, "toy: row %d mislabelled", r);
            double a = 0;
            if (t->n_attn) {
                int32_t c = ub->kv_write[r];
                if (c >= 0) {
                    if (ru->kv_cells[idx] != c) return bd_error(BRAID_E_INVALID, "toy: row %d writes a cell it cannot see", r);
                    for (uint32_t l = 0; l < t->n_attn; l++) {
                        uint8_t *krow = (uint8_t *)mem_kv_k(m, l) + (size_t)c * mem_kv_k_row_bytes(m, l);
                        uint8_t *vrow = (uint8_t *)mem_kv_v(m, l) + (size_t)c * mem_kv_v_row_bytes(m, l);
                        for (uint32_t i = 0; i < t->nk[l]; i++) toy_store(kt, krow, i, toy_kval(l, x, i, pos, t->n_pos));
                        for (uint32_t i = 0; i < t->nv[l]; i++) toy_store(kt, vrow, i, toy_vval(l, x, i));
                    }
                }
                const uint8_t *K = mem_kv_k(m, 0), *V = mem_kv_v(m, 0);
                for (int32_t q = 0; q <= idx; q++) {
                    int32_t cell = ru->kv_cells[q];
                    a += (double)toy_load(kt, K + (size_t)cell * mem_kv_k_row_bytes(m, 0), 0) * (q + 1) +
                         toy_load(kt, V + (size_t)cell * mem_kv_v_row_bytes(m, 0), 0);
                }
                a = fmod(a, 1009.0);
            }
            if (st) {
                toy_rs_step(t, m, st, x, a);
                if (ub->rs_snap[r]) memcpy(ub->rs_snap[r], st, bf * sizeof(float));
            }
        }
    }
    return BRAID_OK;
}

/* K re-rotation for the toy: add the position delta of each component. */
static inline braid_status toy_rotate(void *user, mem *m, int32_t cell, const braid_pos *from, const braid_pos *to) {
    const toy_layout *t = user;
    braid_type kt = mem_kv_type(m);
    for (uint32_t l = 0; l < t->n_attn; l++) {
        uint8_t *krow = (uint8_t *)mem_kv_k(m, l) + (size_t)cell * mem_kv_k_row_bytes(m, l);
        for (uint32_t i = 0; i < t->nk[l]; i++)
            toy_store(kt, krow, i, toy_load(kt, krow, i) + (float)(to[i % t->n_pos] - from[i % t->n_pos]));
    }
    return BRAID_OK;
}

/* Runs every ubatch of b with the toy (rotating stale K rows first); fail_at >= 0 makes that ubatch fail, and
 * the batch is aborted. Returns the forward status. */
static inline braid_status toy_run(const toy_layout *t, mem *m, mem_batch *b, int32_t fail_at) {
    braid_status st = mem_kv_rotate(m, toy_rotate, (void *)t);
    for (int32_t u = 0; st == BRAID_OK && u < mem_batch_n_ubatch(b); u++) {
        mem_ubatch ub;
        st = mem_batch_ubatch(m, b, u, &ub);
        if (st == BRAID_OK) st = u == fail_at ? bd_error(BRAID_E_CANCELLED, "toy: forced failure") : toy_forward(t, m, &ub);
    }
    if (st == BRAID_OK)
        mem_batch_commit(m, b);
    else
        mem_batch_abort(m, b);
    return st;
}

/* The memory the state fuzzer loads into, and the content its seeds are saved from (tests/unit/test_memory.c
 * writes the seeds with --corpus DIR; fuzz/fuzz_state.c rebuilds the same memory). */
#define TOY_FUZZ_FP 0xF0221u
static const toy_layout toy_fuzz_layout = {.name = "fuzz", .n_seq = 3, .n_pos = 4, .n_embd = 2, .n_ctx = 24,
                                           .n_attn = 1, .n_rs = 1, .interval = 3, .rollback = 2, .n_ubatch = 4,
                                           .kv_type = BRAID_TYPE_F16, .nk = {2}, .nv = {2}, .nconv = {2}, .nssm = {3},
                                           .budget_blocks = 4};

static inline braid_status toy_decode(const toy_layout *t, mem *m, int32_t s, int32_t n, int32_t tok0) {
    braid_token tok[32];
    braid_seq_id sid[32];
    for (int32_t i = 0; i < n && i < 32; i++) tok[i] = tok0 + i, sid[i] = s;
    braid_batch b = {.n_tokens = n < 32 ? n : 32, .token = tok, .seq = sid};
    mem_batch *mb;
    BD_TRY(mem_batch_begin(m, &b, 4, &mb));
    return toy_run(t, m, mb, -1);
}

/* Shared cells, checkpoints, a pending rollback, an embedding input and stale K rows. */
static inline braid_status toy_fuzz_fill(mem *m) {
    const toy_layout *t = &toy_fuzz_layout;
    BD_TRY(toy_decode(t, m, 0, 7, 3));
    mem_batch *rb;
    BD_TRY(mem_seq_copy(m, 0, 1, 4, &rb));
    if (rb) BD_TRY(toy_run(t, m, rb, -1));
    BD_TRY(toy_decode(t, m, 1, 2, 50));
    float e[2] = {5, 1};
    braid_batch b = {.n_tokens = 1, .embd = e, .seq = (braid_seq_id[]){2}};
    mem_batch *mb;
    BD_TRY(mem_batch_begin(m, &b, 4, &mb));
    BD_TRY(toy_run(t, m, mb, -1));
    BD_TRY(mem_seq_shift_pos(m, 0, 1, 7, 2));
    return BRAID_OK;
}

#endif
