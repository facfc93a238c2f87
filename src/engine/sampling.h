/* sampling.h — internal side of the sampler (the public API is braid_sampler_* in braid.h). */
#ifndef BRAID_ENGINE_SAMPLING_H
#define BRAID_ENGINE_SAMPLING_H

#include "braid.h"

/* The tokens the sampler would draw from for these logits after the penalties and the filters (top-k, top-p,
 * min-p), in no particular order, written to ids (cap entries); *n_out gets the count. A greedy sampler keeps
 * one token. Draws no random number, so it does not disturb a seeded sequence. For tests and diagnostics.
 * BRAID_E_RANGE if cap is too small. */
BRAID_NODISCARD braid_status bd_sampler_kept(braid_sampler *s, const float *logits, int32_t n_vocab, braid_token *ids,
                                             int32_t cap, int32_t *n_out);

/* The distribution the next braid_sampler_sample would draw from, dense: probs[i] for every token id of
 * n_vocab (zero for filtered tokens; greedy puts 1 on the argmax). Draws nothing. Speculative rejection
 * sampling compares the target's and the draft's distributions through this. */
BRAID_NODISCARD braid_status bd_sampler_probs(braid_sampler *s, const float *logits, int32_t n_vocab, float *probs);
/* A draw from the sampler's generator: uniform in [0, 1). */
double bd_sampler_uniform(braid_sampler *s);
/* The token that weights w[0..n) (>= 0, not all zero) pick for a uniform draw u: the first id whose running sum
 * exceeds u x total; the last positive one if rounding leaves u at the very top. */
braid_token bd_pick_weighted(const float *w, int32_t n, double u);
/* 1 if the sampler is greedy (temperature <= 0 or top_k == 1). */
int bd_sampler_is_greedy(const braid_sampler *s);

/* Constrained sampling: allow(user, t) says whether token t may come next; mask(user, allowed, n_vocab) fills
 * allowed[0..n_vocab) with the same answers for every token at once (it may be much faster than n_vocab calls
 * of allow). Draws from the distribution braid_sampler_sample would draw from if the refused tokens' logits
 * were -inf (see sampling.c for how it stays exact with few checks). BRAID_E_INVALID if no token is allowed. */
typedef int (*bd_allow_fn)(void *user, braid_token t);
typedef braid_status (*bd_mask_fn)(void *user, uint8_t *allowed, int32_t n_vocab);
BRAID_NODISCARD braid_status bd_sampler_sample_allowed(braid_sampler *s, const float *logits, int32_t n_vocab,
                                                       bd_allow_fn allow, bd_mask_fn mask, void *user,
                                                       braid_token *out);

#endif
