/* reuse.c — srv_reuse_prepare: the one function that decides what a request reuses (the prompt cache of
 * issue 12 replaces its body; the scheduler only calls it).
 *
 * Now: every slot keeps what its last request left in its sequence (prompt + reply). A request takes the
 * idle slot whose tokens share the longest prefix with its prompt (the least used one among equals, so fresh
 * conversations spread over the slots), and braid_gen_begin keeps that prefix: braid's memory truncates to
 * any index (rollback buffer, else the nearest checkpoint plus replay), so a follow-up turn or a branch of a
 * conversation recomputes only what changed, within this slot. */
#include "reuse.h"

static int32_t common_prefix(const braid_token *a, int32_t na, const braid_token *b, int32_t nb) {
    int32_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

braid_status srv_reuse_prepare(srv *s, const int *free_slots, int n_free, const braid_token *toks, int32_t n,
                               srv_reuse_result *out) {
    int best = -1;
    int32_t best_lcp = -1;
    for (int i = 0; i < n_free; i++) {
        const srv_slot *sl = &s->slots[free_slots[i]];
        int32_t l = common_prefix(sl->toks, sl->n_toks, toks, n);
        if (l > best_lcp || (l == best_lcp && sl->n_requests < s->slots[best].n_requests)) best = free_slots[i], best_lcp = l;
    }
    out->slot = best;
    /* the last prompt token is always decoded again: its logits start the reply */
    out->cached_tokens = best_lcp >= n ? n - 1 : best_lcp;
    return best >= 0 ? BRAID_OK : BRAID_E_INVALID;
}
