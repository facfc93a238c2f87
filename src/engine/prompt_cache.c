/* prompt_cache.c — braid_prompt_cache (braid.h): prompts and replies already computed, shared by every
 * sequence of a context.
 *
 * An entry is one of the cache's own sequences of the context, holding a cached token list: its attention
 * cells are shared by reference with the sequence it was stored from (braid_seq_copy shares cells), and its
 * recurrent checkpoints are copies. The radix tree (radix.c) maps token lists to entries, so a lookup finds
 * the longest cached prefix and the entries holding it. Serving a prompt is then one memory operation on the
 * requesting sequence: a truncation of its own content or a copy of an entry's first L inputs, whichever
 * computes fewer tokens (the memory restores the recurrent state from the nearest checkpoint <= L and replays
 * the rest). Entries that are prefixes of a newer one are merged into it; eviction is least recently used,
 * against one byte budget that counts each cached cell once.
 *
 * The cache only holds what a fresh decode of the same tokens would give bit for bit: token inputs at the
 * default positions (index i at temporal position i) with an exact recurrent state. A sequence with images,
 * edited positions or removed inputs is not stored, and its own content counts only up to where it is exact. */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "base/status.h"
#include "engine/context.h"
#include "engine/radix.h"

typedef struct pc_logits {
    int32_t idx; /* logits of input idx - 1, i.e. what follows the prefix of length idx */
    float *v;    /* [n_vocab] */
} pc_logits;

typedef struct pc_entry {
    int used;
    braid_seq_id seq;
    int32_t len;
    braid_token *tok; /* [len] */
    uint64_t tick;    /* last use */
    pc_logits *lg;
    int32_t n_lg;
} pc_entry;

struct braid_prompt_cache {
    braid_context *ctx;
    braid_prompt_cache_params p;
    int32_t n_vocab;
    pc_entry *e; /* [p.n_seq] */
    bd_radix *tree;
    uint64_t tick;
    float *logits;     /* [n_vocab] handed out by braid_prompt_cache_logits */
    int logits_valid;
    uint8_t *seen;     /* [n_ctx] scratch for counting shared cells once */
    int32_t *ids;      /* [p.n_seq] scratch */
    int32_t *ck;       /* checkpoint indices scratch */
    int32_t cap_ck;
    braid_token *tok;  /* a sequence's tokens, scratch */
    int32_t cap_tok;
    size_t cell_bytes, block_bytes;
    braid_prompt_cache_stats st;
};

uint64_t braid_cache_block_hash(uint64_t prev, const braid_token *tokens, int32_t n) {
    uint8_t buf[8 + 4 * BRAID_CACHE_BLOCK];
    if (n < 0) n = 0;
    if (n > BRAID_CACHE_BLOCK) n = BRAID_CACHE_BLOCK;
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(prev >> (8 * i));
    for (int32_t t = 0; t < n; t++)
        for (int i = 0; i < 4; i++) buf[8 + 4 * t + i] = (uint8_t)((uint32_t)tokens[t] >> (8 * i));
    return bd_hash64(buf, 8 + 4 * (size_t)n, 0);
}

braid_prompt_cache_params braid_prompt_cache_default_params(void) {
    braid_prompt_cache_params p;
    memset(&p, 0, sizeof p);
    p.budget_bytes = 256ull << 20;
    p.first_seq = -1;
    p.n_seq = 0;
    return p;
}

static int own_seq(const braid_prompt_cache *pc, braid_seq_id s) {
    return s >= pc->p.first_seq && s < pc->p.first_seq + pc->p.n_seq;
}

static braid_status grow_i32(int32_t **v, int32_t *cap, int32_t n) {
    if (n <= *cap) return BRAID_OK;
    int32_t c = *cap ? *cap : 64;
    while (c < n) c = c > INT32_MAX / 2 ? n : 2 * c;
    int32_t *nv = bd_realloc(*v, (size_t)c * sizeof *nv);
    if (!nv) return bd_error(BRAID_E_NOMEM, "prompt cache: out of memory");
    *v = nv;
    *cap = c;
    return BRAID_OK;
}

/* The exact, cacheable prefix of s: token inputs at temporal position == index, up to the first input whose
 * recurrent state is inexact. Tokens into pc->tok; returns its length (or -1: out of memory). */
static int32_t seq_prefix(braid_prompt_cache *pc, braid_seq_id s) {
    const mem *m = pc->ctx->mem;
    int32_t len = mem_seq_len(m, s), ax = mem_seq_approx_from(m, s);
    if (len <= 0) return 0;
    if (grow_i32((int32_t **)&pc->tok, &pc->cap_tok, len) != BRAID_OK) return -1;
    int32_t n = 0;
    for (; n < len; n++) {
        braid_token t;
        const braid_pos *pos;
        if (mem_seq_input(m, s, n, &t, &pos, NULL) != BRAID_OK || t < 0 || pos[0] != n) break;
        pc->tok[n] = t;
    }
    /* States after index ax also summarize removed inputs or old positions: only a prefix up to ax is exact. */
    if (ax >= 0 && n > ax) n = ax;
    return n;
}

/* Tokens a sequence must recompute to have its state at index L: 0 if it is at hand (live, rollback buffer,
 * checkpoint), else L minus the nearest checkpoint below. -1: out of memory. */
static int32_t replay_cost(braid_prompt_cache *pc, braid_seq_id s, int32_t L) {
    const mem *m = pc->ctx->mem;
    if (L == 0 || L == mem_seq_len(m, s) || mem_rs_block_floats(m) == 0) return 0;
    int32_t lo, hi;
    mem_seq_rollback_range(m, s, &lo, &hi);
    if (lo >= 0 && L >= lo && L <= hi) return 0;
    int32_t n = mem_seq_checkpoints(m, s, NULL, 0);
    if (grow_i32(&pc->ck, &pc->cap_ck, n) != BRAID_OK) return -1;
    n = mem_seq_checkpoints(m, s, pc->ck, n);
    int32_t best = 0;
    for (int32_t i = 0; i < n; i++)
        if (pc->ck[i] <= L && pc->ck[i] > best) best = pc->ck[i];
    return L - best;
}

static const float *entry_logits(const pc_entry *e, int32_t idx) {
    for (int32_t i = 0; i < e->n_lg; i++)
        if (e->lg[i].idx == idx) return e->lg[i].v;
    return NULL;
}

static void entry_drop(braid_prompt_cache *pc, int32_t i) {
    pc_entry *e = &pc->e[i];
    if (!e->used) return;
    bd_radix_remove(pc->tree, e->tok, e->len, i);
    braid_seq_clear(pc->ctx, e->seq);
    for (int32_t k = 0; k < e->n_lg; k++) bd_free(e->lg[k].v);
    bd_free(e->lg);
    bd_free(e->tok);
    e->lg = NULL;
    e->tok = NULL;
    e->n_lg = e->len = 0;
    e->used = 0;
}

static void evict(braid_prompt_cache *pc, int32_t i) {
    entry_drop(pc, i);
    pc->st.evictions++;
}

/* The least recently used entry other than `except`, or -1. */
static int32_t lru(const braid_prompt_cache *pc, int32_t except) {
    int32_t best = -1;
    for (int32_t i = 0; i < pc->p.n_seq; i++)
        if (pc->e[i].used && i != except && (best < 0 || pc->e[i].tick < pc->e[best].tick)) best = i;
    return best;
}

/* Recounts what the cache holds: each cell held by some entry once, every entry's checkpoints and live state
 * block (a copy the entry owns), and the kept logits. */
static void recount(braid_prompt_cache *pc) {
    const mem *m = pc->ctx->mem;
    braid_prompt_cache_stats *st = &pc->st;
    uint32_t nc = mem_kv_n_cells(m);
    if (nc) memset(pc->seen, 0, nc);
    uint64_t cells = 0, blocks = 0, lg = 0;
    int32_t entries = 0;
    for (int32_t i = 0; i < pc->p.n_seq; i++) {
        const pc_entry *e = &pc->e[i];
        if (!e->used) continue;
        entries++;
        const int32_t *list = mem_kv_seq_cells(m, e->seq);
        int32_t len = mem_seq_len(m, e->seq);
        for (int32_t k = 0; list && k < len; k++)
            if (!pc->seen[list[k]]) {
                pc->seen[list[k]] = 1;
                cells++;
            }
        if (pc->block_bytes) blocks += (uint64_t)mem_seq_checkpoints(m, e->seq, NULL, 0) + (mem_rs_live(m, e->seq) != NULL);
        lg += (uint64_t)e->n_lg;
    }
    st->entries = entries;
    st->cells = (int32_t)cells;
    st->checkpoints = 0;
    for (int32_t i = 0; i < pc->p.n_seq; i++)
        if (pc->e[i].used) st->checkpoints += mem_seq_checkpoints(m, pc->e[i].seq, NULL, 0);
    st->cell_bytes = cells * pc->cell_bytes;
    st->checkpoint_bytes = blocks * pc->block_bytes;
    st->logits_bytes = lg * (uint64_t)pc->n_vocab * sizeof(float);
    st->bytes = st->cell_bytes + st->checkpoint_bytes + st->logits_bytes;
}

/* Evicts least recently used entries until the budget holds (`keep` last of all). */
static void fit_budget(braid_prompt_cache *pc, int32_t keep) {
    recount(pc);
    while (pc->st.bytes > pc->p.budget_bytes && pc->st.entries > 0) {
        int32_t v = lru(pc, keep);
        evict(pc, v >= 0 ? v : keep);
        recount(pc);
    }
}

braid_status braid_prompt_cache_new(braid_context *ctx, const braid_prompt_cache_params *params,
                                    braid_prompt_cache **out) {
    if (!out) return bd_error(BRAID_E_INVALID, "braid_prompt_cache_new: NULL out");
    *out = NULL;
    if (!ctx || !params) return bd_error(BRAID_E_INVALID, "braid_prompt_cache_new: NULL context or params");
    const mem_params *mp = mem_get_params(ctx->mem);
    if (params->n_seq < 1 || params->first_seq < 0 || (uint32_t)params->first_seq + (uint32_t)params->n_seq > mp->n_seq_max)
        return bd_error(BRAID_E_INVALID,
                        "braid_prompt_cache_new: sequences %d .. %d for the cache, the context has 0 .. %u (create it "
                        "with n_seq_max covering the cache's sequences)",
                        params->first_seq, params->first_seq + params->n_seq - 1, mp->n_seq_max - 1);
    braid_prompt_cache *pc = bd_calloc(1, sizeof *pc);
    if (!pc) return bd_error(BRAID_E_NOMEM, "prompt cache: out of memory");
    pc->ctx = ctx;
    pc->p = *params;
    pc->n_vocab = braid_model_n_vocab(ctx->model);
    for (uint32_t l = 0; l < mp->n_attn_layers; l++)
        pc->cell_bytes += mem_kv_k_row_bytes(ctx->mem, l) + mem_kv_v_row_bytes(ctx->mem, l);
    pc->block_bytes = mem_rs_block_floats(ctx->mem) * sizeof(float);
    braid_status st = BRAID_OK;
    if (!(pc->e = bd_calloc((size_t)params->n_seq, sizeof *pc->e)) ||
        !(pc->logits = bd_mallocn((size_t)pc->n_vocab, sizeof(float))) ||
        !(pc->seen = bd_calloc(mem_kv_n_cells(ctx->mem) + 1, 1)) ||
        !(pc->ids = bd_mallocn((size_t)params->n_seq, sizeof(int32_t))))
        st = bd_error(BRAID_E_NOMEM, "prompt cache: out of memory");
    if (st == BRAID_OK) st = bd_radix_new(&pc->tree);
    if (st != BRAID_OK) {
        braid_prompt_cache_free(pc);
        return st;
    }
    for (int32_t i = 0; i < params->n_seq; i++) {
        pc->e[i].seq = params->first_seq + i;
        braid_seq_clear(ctx, pc->e[i].seq);
    }
    *out = pc;
    return BRAID_OK;
}

void braid_prompt_cache_clear(braid_prompt_cache *pc) {
    if (!pc) return;
    for (int32_t i = 0; pc->e && i < pc->p.n_seq; i++) entry_drop(pc, i);
    pc->logits_valid = 0;
}

void braid_prompt_cache_free(braid_prompt_cache *pc) {
    if (!pc) return;
    braid_prompt_cache_clear(pc);
    bd_radix_free(pc->tree);
    bd_free(pc->e);
    bd_free(pc->logits);
    bd_free(pc->seen);
    bd_free(pc->ids);
    bd_free(pc->ck);
    bd_free(pc->tok);
    bd_free(pc);
}

void braid_prompt_cache_make_room(braid_prompt_cache *pc, uint32_t n_cells) {
    if (!pc || mem_kv_n_cells(pc->ctx->mem) == 0) return;
    while (mem_kv_n_free(pc->ctx->mem) < n_cells) {
        int32_t v = lru(pc, -1);
        if (v < 0) break;
        evict(pc, v);
    }
}

int32_t braid_prompt_cache_lookup(const braid_prompt_cache *pc, const braid_token *tokens, int32_t n) {
    if (!pc || !tokens || n < 1) return 0;
    int32_t n_ids = 0;
    return bd_radix_match(pc->tree, tokens, n, pc->ids, 0, &n_ids);
}

const float *braid_prompt_cache_logits(const braid_prompt_cache *pc) {
    return pc && pc->logits_valid ? pc->logits : NULL;
}

braid_status braid_prompt_cache_prepare(braid_prompt_cache *pc, braid_seq_id seq, const braid_token *tokens,
                                        int32_t n, braid_cache_reuse *out) {
    if (!pc || !out) return bd_error(BRAID_E_INVALID, "braid_prompt_cache_prepare: NULL cache or out");
    memset(out, 0, sizeof *out);
    pc->logits_valid = 0;
    if (n < 1 || !tokens) return bd_error(BRAID_E_INVALID, "braid_prompt_cache_prepare: empty prompt");
    if (mem_seq_len(pc->ctx->mem, seq) < 0 || own_seq(pc, seq))
        return bd_error(BRAID_E_RANGE, "braid_prompt_cache_prepare: sequence %d is not a caller's sequence", seq);
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= pc->n_vocab)
            return bd_error(BRAID_E_RANGE, "braid_prompt_cache_prepare: token %d at %d out of range 0..%d", tokens[i],
                            i, pc->n_vocab - 1);
    pc->st.lookups++;
    pc->st.prompt_tokens += (uint64_t)n;
    /* Kept logits for exactly this prompt, from any entry whose first n tokens are it. */
    int32_t n_ids = 0;
    int32_t d = bd_radix_match(pc->tree, tokens, n, pc->ids, pc->p.n_seq, &n_ids);
    const float *kept = NULL;
    for (int32_t k = 0; d == n && k < n_ids && !kept; k++) kept = entry_logits(&pc->e[pc->ids[k]], n);

    /* Candidates: the sequence itself, and every entry sharing the longest cached prefix. Cost = tokens
     * computed (replay + decode); the last token is decoded again unless its logits are kept. */
    int32_t own = seq_prefix(pc, seq);
    if (own < 0) return BRAID_E_NOMEM;
    int32_t l_own = 0;
    while (l_own < own && l_own < n && pc->tok[l_own] == tokens[l_own]) l_own++;
    int32_t best_src = -1, best_L = l_own == n && !kept ? n - 1 : l_own;
    int32_t c = replay_cost(pc, seq, best_L);
    if (c < 0) return BRAID_E_NOMEM;
    int64_t best_cost = (int64_t)c + (n - best_L);
    for (int32_t k = 0; k < n_ids && k < pc->p.n_seq; k++) {
        const pc_entry *e = &pc->e[pc->ids[k]];
        int32_t L = d == n && !kept ? n - 1 : d;
        if ((c = replay_cost(pc, e->seq, L)) < 0) return BRAID_E_NOMEM;
        int64_t cost = (int64_t)c + (n - L);
        if (cost < best_cost || (cost == best_cost && best_src >= 0 && e->tick > pc->e[best_src].tick)) {
            best_cost = cost;
            best_src = pc->ids[k];
            best_L = L;
        }
    }
    int32_t replayed = 0, src_len;
    if (best_src < 0) {
        src_len = mem_seq_len(pc->ctx->mem, seq);
        BD_TRY(bd_seq_truncate_counted(pc->ctx, seq, best_L, &replayed));
    } else {
        pc_entry *e = &pc->e[best_src];
        src_len = e->len;
        BD_TRY(bd_seq_copy_counted(pc->ctx, e->seq, seq, best_L, &replayed));
        e->tick = ++pc->tick;
    }
    /* A branch point: the prompt leaves the source inside it. A checkpoint here makes the next prompt that
     * comes this way (or this one, re-sent) free of replay; when it does not fit the budget, it is skipped. */
    if (best_L > 0 && best_L < n && (best_L < src_len || replayed > 0)) {
        braid_status s = braid_seq_checkpoint(pc->ctx, seq);
        if (s != BRAID_OK && s != BRAID_E_FULL) return s;
    }
    out->cached_tokens = best_L;
    out->replayed_tokens = replayed;
    out->from_entry = best_src >= 0;
    if (best_L == n && kept) {
        memcpy(pc->logits, kept, (size_t)pc->n_vocab * sizeof(float));
        pc->logits_valid = out->logits_ready = 1;
    }
    if (best_L > 0) pc->st.hits++;
    pc->st.cached_tokens += (uint64_t)best_L;
    pc->st.replayed_tokens += (uint64_t)replayed;
    braid_prompt_cache_make_room(pc, (uint32_t)(n - best_L));
    return BRAID_OK;
}

/* Adds logits after the prefix of length idx to entry i (replacing any there). */
static braid_status entry_add_logits(braid_prompt_cache *pc, int32_t i, int32_t idx, const float *v, float *owned) {
    pc_entry *e = &pc->e[i];
    for (int32_t k = 0; k < e->n_lg; k++)
        if (e->lg[k].idx == idx) {
            if (owned) {
                bd_free(e->lg[k].v);
                e->lg[k].v = owned;
            } else {
                memcpy(e->lg[k].v, v, (size_t)pc->n_vocab * sizeof(float));
            }
            return BRAID_OK;
        }
    pc_logits *lg = bd_realloc(e->lg, (size_t)(e->n_lg + 1) * sizeof *lg);
    if (!lg) return bd_error(BRAID_E_NOMEM, "prompt cache: out of memory for logits");
    e->lg = lg;
    float *copy = owned;
    if (!copy) {
        if (!(copy = bd_mallocn((size_t)pc->n_vocab, sizeof(float))))
            return bd_error(BRAID_E_NOMEM, "prompt cache: out of memory for logits");
        memcpy(copy, v, (size_t)pc->n_vocab * sizeof(float));
    }
    e->lg[e->n_lg++] = (pc_logits){idx, copy};
    return BRAID_OK;
}

braid_status braid_prompt_cache_store(braid_prompt_cache *pc, braid_seq_id seq, const float *logits) {
    if (!pc) return bd_error(BRAID_E_INVALID, "braid_prompt_cache_store: NULL cache");
    const mem *m = pc->ctx->mem;
    if (mem_seq_len(m, seq) < 0 || own_seq(pc, seq))
        return bd_error(BRAID_E_RANGE, "braid_prompt_cache_store: sequence %d is not a caller's sequence", seq);
    int32_t len = seq_prefix(pc, seq);
    if (len < 0) return BRAID_E_NOMEM;
    /* Only a sequence that is exact as a whole is stored (a shorter prefix would need its state rebuilt). */
    if (len == 0 || len != mem_seq_len(m, seq)) return BRAID_OK;
    braid_status s = braid_seq_checkpoint(pc->ctx, seq);
    if (s != BRAID_OK && s != BRAID_E_FULL) return s;
    int32_t have = bd_radix_find(pc->tree, pc->tok, len);
    if (have >= 0) {
        pc->e[have].tick = ++pc->tick;
        if (logits) BD_TRY(entry_add_logits(pc, have, len, logits, NULL));
        fit_budget(pc, have);
        return BRAID_OK;
    }
    int32_t slot = -1;
    for (int32_t i = 0; i < pc->p.n_seq && slot < 0; i++)
        if (!pc->e[i].used) slot = i;
    if (slot < 0) {
        slot = lru(pc, -1);
        evict(pc, slot);
    }
    pc_entry *e = &pc->e[slot];
    braid_token *tok = bd_mallocn((size_t)len, sizeof *tok);
    if (!tok) return bd_error(BRAID_E_NOMEM, "prompt cache: out of memory");
    memcpy(tok, pc->tok, (size_t)len * sizeof *tok);
    if ((s = bd_radix_insert(pc->tree, tok, len, slot)) != BRAID_OK) {
        bd_free(tok);
        return s;
    }
    if ((s = braid_seq_copy(pc->ctx, seq, e->seq, len)) != BRAID_OK) {
        bd_radix_remove(pc->tree, tok, len, slot);
        bd_free(tok);
        return s;
    }
    e->used = 1;
    e->tok = tok;
    e->len = len;
    e->tick = ++pc->tick;
    pc->st.stores++;
    if (logits && (s = entry_add_logits(pc, slot, len, logits, NULL)) != BRAID_OK) {
        entry_drop(pc, slot);
        return s;
    }
    /* Entries that are prefixes of this one add nothing but their kept logits: merge them in. */
    for (int32_t i = 0; i < pc->p.n_seq; i++) {
        pc_entry *q = &pc->e[i];
        if (i == slot || !q->used || q->len >= len || memcmp(q->tok, tok, (size_t)q->len * sizeof *tok)) continue;
        int ok = 1;
        for (int32_t k = 0; k < q->n_lg && ok; k++) {
            if (entry_add_logits(pc, slot, q->lg[k].idx, NULL, q->lg[k].v) != BRAID_OK) {
                ok = 0;
                break;
            }
            q->lg[k].v = NULL; /* moved */
        }
        if (!ok) continue; /* out of memory: keep it as it is */
        entry_drop(pc, i);
    }
    fit_budget(pc, slot);
    return BRAID_OK;
}

void braid_prompt_cache_get_stats(const braid_prompt_cache *pc, braid_prompt_cache_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!pc) return;
    recount((braid_prompt_cache *)pc);
    *out = pc->st;
}

static int u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

braid_status braid_prompt_cache_block_hashes(const braid_prompt_cache *pc, uint64_t **hashes, size_t *n) {
    if (!pc || !hashes || !n) return bd_error(BRAID_E_INVALID, "braid_prompt_cache_block_hashes: NULL argument");
    *hashes = NULL;
    *n = 0;
    size_t total = 0;
    for (int32_t i = 0; i < pc->p.n_seq; i++)
        if (pc->e[i].used) total += (size_t)(pc->e[i].len / BRAID_CACHE_BLOCK);
    if (!total) return BRAID_OK;
    uint64_t *h = bd_mallocn(total, sizeof *h);
    if (!h) return bd_error(BRAID_E_NOMEM, "prompt cache: out of memory for %zu hashes", total);
    size_t k = 0;
    for (int32_t i = 0; i < pc->p.n_seq; i++) {
        const pc_entry *e = &pc->e[i];
        uint64_t prev = 0;
        for (int32_t b = 0; e->used && (b + 1) * BRAID_CACHE_BLOCK <= e->len; b++)
            h[k++] = prev = braid_cache_block_hash(prev, e->tok + (size_t)b * BRAID_CACHE_BLOCK, BRAID_CACHE_BLOCK);
    }
    qsort(h, k, sizeof *h, u64_cmp);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (u == 0 || h[i] != h[u - 1]) h[u++] = h[i];
    *hashes = h;
    *n = u;
    return BRAID_OK;
}
