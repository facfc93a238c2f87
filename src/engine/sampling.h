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

#endif
