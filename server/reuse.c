/* reuse.c — srv_reuse_prepare: which idle slot a new request takes, and what it reuses.
 *
 * With the prompt cache (--cache-ram, braid_prompt_cache over the server's context): the slot's generator
 * serves the prompt through the cache (braid_gen_params.cache): the longest prefix held anywhere — the
 * slot's own sequence, or any cache entry (other slots' prompts and replies, shared cells, checkpoints) —
 * with at most one checkpoint interval replayed, and nothing for an identical prompt (kept logits). So the
 * slot matters little: the idle slot whose own tokens share the longest prefix (a follow-up turn then needs
 * no copy), else the least used one. Before the job starts, entries are evicted until the context has room
 * for the slot's whole context (its prompt and reply).
 *
 * Without the cache: the slot with the longest common prefix, and braid_gen_begin keeps it (truncation: the
 * rollback buffer, else the nearest checkpoint plus replay), within that slot. */
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
    if (best < 0) return BRAID_E_INVALID;
    if (s->cache) {
        /* what the generator will find: its own prefix or the cache's longest, whichever is longer */
        int32_t c = braid_prompt_cache_lookup(s->cache, toks, n);
        out->cached_tokens = c > best_lcp ? c : best_lcp;
        if (out->cached_tokens > n) out->cached_tokens = n;
        /* cells: the new job's whole context, and what the busy slots may still grow by */
        uint64_t need = (uint64_t)s->cfg.ctx_per_slot;
        for (int i = 0; i < s->cfg.parallel; i++) {
            int32_t len = braid_seq_len(s->ctx, (braid_seq_id)i);
            if (s->slots[i].job && len >= 0 && len < s->cfg.ctx_per_slot) need += (uint64_t)(s->cfg.ctx_per_slot - len);
        }
        braid_prompt_cache_make_room(s->cache, need > UINT32_MAX ? UINT32_MAX : (uint32_t)need);
        return BRAID_OK;
    }
    /* the last prompt token is always decoded again: its logits start the reply */
    out->cached_tokens = best_lcp >= n ? n - 1 : best_lcp;
    return BRAID_OK;
}
