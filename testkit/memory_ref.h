/* memory_ref.h — the reference the randomized memory test compares against: for each sequence its inputs and
 * the "lineage" of recurrent states (the state after 0, 1, ..., len inputs as the memory should hold them),
 * maintained by recomputing from the history with the toy model (memory_toy.h). Operations on the reference
 * follow design.md §3 by definition; the memory must agree after every operation. */
#ifndef BRAID_TESTS_MEMORY_REF_H
#define BRAID_TESTS_MEMORY_REF_H

#include <stdlib.h>

#include "memory_toy.h"

#define REF_MAXLEN 72

typedef struct ref_seq {
    int32_t len, approx;
    braid_token tok[REF_MAXLEN];     /* -1 for embedding inputs */
    float embd[REF_MAXLEN][4];       /* embedding rows (n_embd <= 4) */
    braid_pos pos[REF_MAXLEN][4];
    float *lin;                      /* [REF_MAXLEN + 1][bf] lineage */
} ref_seq;

typedef struct ref_mem {
    const toy_layout *t;
    size_t bf;
    ref_seq seq[8];
} ref_mem;

static inline float *ref_lin(ref_mem *r, int32_t s, int32_t j) { return r->seq[s].lin + (size_t)j * r->bf; }

static inline void ref_init(ref_mem *r, const toy_layout *t, size_t bf) {
    memset(r, 0, sizeof *r);
    r->t = t;
    r->bf = bf;
    for (uint32_t s = 0; s < t->n_seq; s++) {
        r->seq[s].lin = calloc((REF_MAXLEN + 1) * (bf ? bf : 1), sizeof(float));
        r->seq[s].approx = -1;
    }
}
static inline void ref_free(ref_mem *r) {
    for (uint32_t s = 0; s < r->t->n_seq; s++) free(r->seq[s].lin);
}

static inline int32_t ref_x(const ref_seq *q, int32_t i) { return toy_x(q->tok[i], q->tok[i] < 0 ? q->embd[i] : NULL); }

/* The attention summary of input idx of q at current positions. */
static inline double ref_attn(const ref_mem *r, const ref_seq *q, int32_t idx) {
    if (!r->t->n_attn) return 0;
    double a = 0;
    for (int32_t j = 0; j <= idx; j++)
        a += (double)toy_kval(0, ref_x(q, j), 0, q->pos[j], r->t->n_pos) * (j + 1) + toy_vval(0, ref_x(q, j), 0);
    return fmod(a, 1009.0);
}

/* lineage[j + 1] = step(out_base[j], input j); writes into dst[j + 1] for j in [from, to). */
static inline void ref_replay(ref_mem *r, const mem *m, const ref_seq *q, const float *start, float *dst_lin,
                              int32_t from, int32_t to) {
    memcpy(dst_lin + (size_t)from * r->bf, start, r->bf * sizeof(float));
    for (int32_t j = from; j < to; j++) {
        float *st = dst_lin + (size_t)(j + 1) * r->bf;
        memcpy(st, dst_lin + (size_t)j * r->bf, r->bf * sizeof(float));
        toy_rs_step(r->t, m, st, ref_x(q, j), ref_attn(r, q, j));
    }
}

static inline braid_pos ref_next_pos(const ref_mem *r, const ref_seq *q) {
    if (!q->len) return 0;
    const braid_pos *p = q->pos[q->len - 1];
    braid_pos mx = p[0];
    if (r->t->n_pos == 4) {
        if (p[1] > mx) mx = p[1];
        if (p[2] > mx) mx = p[2];
    }
    return mx + 1;
}

static inline void ref_push(ref_mem *r, const mem *m, int32_t s, braid_token tok, const float *embd, const braid_pos *pos) {
    ref_seq *q = &r->seq[s];
    int32_t i = q->len++;
    q->tok[i] = embd ? -1 : tok;
    if (embd) memcpy(q->embd[i], embd, r->t->n_embd * sizeof(float));
    memcpy(q->pos[i], pos, r->t->n_pos * sizeof(braid_pos));
    if (r->bf) ref_replay(r, m, q, ref_lin(r, s, i), q->lin, i, i + 1);
}

static inline void ref_clear(ref_mem *r, int32_t s) {
    r->seq[s].len = 0;
    r->seq[s].approx = -1;
}

static inline void ref_mark_approx(ref_seq *q, int32_t i0) { q->approx = q->approx >= 0 && q->approx < i0 ? q->approx : i0; }

static inline void ref_remove(ref_mem *r, int32_t s, int32_t i0, int32_t i1) {
    ref_seq *q = &r->seq[s];
    int32_t d = i1 - i0;
    memmove(q->tok + i0, q->tok + i1, (size_t)(q->len - i1) * sizeof q->tok[0]);
    memmove(q->embd + i0, q->embd + i1, (size_t)(q->len - i1) * sizeof q->embd[0]);
    memmove(q->pos + i0, q->pos + i1, (size_t)(q->len - i1) * sizeof q->pos[0]);
    if (r->bf) {
        /* new[j] = old[j] for j <= i0, old[j + d] for j > i0 */
        memmove(ref_lin(r, s, i0 + 1), ref_lin(r, s, i1 + 1), (size_t)(q->len - i1) * r->bf * sizeof(float));
        if (r->t->n_rs) ref_mark_approx(q, i0);
    }
    q->len -= d;
}

/* Copy the whole content of s (inputs, lineage, approx) to d, keeping n inputs. */
static inline void ref_copy(ref_mem *r, int32_t s, int32_t d, int32_t n) {
    if (s == d) return;
    ref_seq *a = &r->seq[s], *b = &r->seq[d];
    memcpy(b->tok, a->tok, sizeof a->tok);
    memcpy(b->embd, a->embd, sizeof a->embd);
    memcpy(b->pos, a->pos, sizeof a->pos);
    if (r->bf) memcpy(b->lin, a->lin, (REF_MAXLEN + 1) * r->bf * sizeof(float));
    b->len = n;
    b->approx = a->approx >= 0 && a->approx < n ? a->approx : -1;
}

#endif
