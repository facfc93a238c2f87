/* reuse.h — what a new request reuses of the memory, and which slot it runs in: one call,
 * srv_reuse_prepare, so a prompt cache can replace its body without touching the scheduler. */
#ifndef BRAID_SERVER_REUSE_H
#define BRAID_SERVER_REUSE_H

#include "srv_impl.h"

typedef struct srv_reuse_result {
    int slot;              /* the slot chosen (index into s->slots) */
    int32_t cached_tokens; /* prompt tokens the sequence holds before decoding (reported as cached_tokens) */
} srv_reuse_result;

/* Chooses one of the idle slots free[0..n_free) for prompt toks[0..n) and prepares its sequence so that it
 * holds a prefix of the prompt (or anything: braid_gen_begin then keeps the longest common prefix). Called on
 * the scheduler thread, with no lock held. BRAID_OK, or a failure that fails this request only. */
BRAID_NODISCARD braid_status srv_reuse_prepare(srv *s, const int *free_slots, int n_free, const braid_token *toks,
                                               int32_t n, srv_reuse_result *out);

#endif
