/* gen_record.h — what the generation-loop tests record of a generator's reply, shared by the continuous-batching
 * tests (test_gen_batch*.c): each emitted token's logits (braid_gen_logits in the piece callback, where the token
 * has them), an abort after a number of tokens, a test context, and the bit-for-bit comparison of two records. */
#ifndef BRAID_TESTS_GEN_RECORD_H
#define BRAID_TESTS_GEN_RECORD_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "braid.h"

typedef struct gen_rec {
    braid_gen *g;
    int32_t n_vocab;
    int n_max;        /* tokens whose logits are kept */
    float *logits;    /* [n_max][n_vocab] */
    uint8_t *has;     /* [n_max] 1: token i came with logits */
    int n;            /* tokens emitted so far */
    int cancel_after; /* > 0: gen_rec_abort asks to stop once this many tokens came */
} gen_rec;

/* 0 if out of memory. */
static inline int gen_rec_init(gen_rec *r, int32_t n_vocab, int n_max) {
    memset(r, 0, sizeof *r);
    r->n_vocab = n_vocab;
    r->n_max = n_max;
    r->logits = calloc((size_t)n_max * (size_t)n_vocab, sizeof(float));
    r->has = calloc((size_t)n_max, 1);
    return r->logits && r->has;
}

static inline void gen_rec_free(gen_rec *r) {
    free(r->logits);
    free(r->has);
    r->logits = NULL;
    r->has = NULL;
}

/* Forgets the recorded reply (before another run of the same generator). */
static inline void gen_rec_reset(gen_rec *r) {
    r->n = 0;
    if (r->has) memset(r->has, 0, (size_t)r->n_max);
}

/* braid_gen_params.on_piece with piece_user = the record (whose g must be set). */
static inline int gen_rec_on_piece(void *user, braid_token t, const char *text, size_t len) {
    (void)text, (void)len;
    gen_rec *r = user;
    if (t < 0) return 0;
    const float *lg = braid_gen_logits(r->g);
    if (r->n < r->n_max) {
        r->has[r->n] = lg != NULL;
        if (lg) memcpy(r->logits + (size_t)r->n * r->n_vocab, lg, (size_t)r->n_vocab * sizeof *lg);
    }
    r->n++;
    return 0;
}

/* braid_gen_params.abort_cb with abort_user = the record. */
static inline int gen_rec_abort(void *user) {
    const gen_rec *r = user;
    return r->cancel_after > 0 && r->n >= r->cancel_after;
}

/* 1 if the first n tokens' logits agree bit for bit wherever both records have them (need_all_b: and b has them
 * for every one of those tokens). */
static inline int gen_rec_same_logits(const gen_rec *a, const gen_rec *b, int n, int need_all_b) {
    for (int i = 0; i < n && i < a->n_max && i < b->n_max; i++) {
        if (need_all_b && !b->has[i]) return 0;
        if (!a->has[i] || !b->has[i]) continue;
        if (memcmp(a->logits + (size_t)i * a->n_vocab, b->logits + (size_t)i * b->n_vocab,
                   (size_t)a->n_vocab * sizeof(float)))
            return 0;
    }
    return 1;
}

/* A context of 1024 cells on one thread with n_seq sequences and batches of n_batch, or NULL. */
static inline braid_context *gen_test_ctx(braid_model *m, uint32_t n_seq, uint32_t n_batch) {
    braid_context_params cp = braid_context_default_params();
    cp.n_ctx = 1024;
    cp.n_seq_max = n_seq;
    cp.n_batch = n_batch;
    cp.n_threads = 1;
    braid_context *c = NULL;
    return braid_context_new(m, &cp, &c) == BRAID_OK ? c : NULL;
}

#endif
