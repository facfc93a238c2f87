/* strtab.c — the string table behind token lookups: strings back to back in one arena, found by an
 * open-addressing hash (XXH3). Token texts take ids 0..n_tokens-1 (a repeated text maps to its last id, as
 * llama.cpp's token_to_id map does); the BPE loader interns merge parts and results after them. */
#include <string.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "base/status.h"
#include "tokenizer/vocab_internal.h"

braid_status tok_strtab_init(tok_strtab *t, uint32_t cap_strings, size_t arena_cap) {
    memset(t, 0, sizeof *t);
    if (cap_strings < 16) cap_strings = 16;
    if (arena_cap < 64) arena_cap = 64;
    t->off = bd_mallocn((size_t)cap_strings + 1, sizeof *t->off);
    t->arena = bd_malloc(arena_cap);
    uint64_t slots = 64;
    while (slots < (uint64_t)cap_strings * 2) slots <<= 1;
    t->slots = bd_mallocn(slots, sizeof *t->slots);
    if (!t->off || !t->arena || !t->slots) {
        tok_strtab_free(t);
        return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory for the string table");
    }
    memset(t->slots, 0xFF, slots * sizeof *t->slots);
    t->slot_mask = slots - 1;
    t->cap = cap_strings + 1;
    t->arena_cap = arena_cap;
    t->off[0] = 0;
    return BRAID_OK;
}

void tok_strtab_free(tok_strtab *t) {
    bd_free(t->off);
    bd_free(t->arena);
    bd_free(t->slots);
    memset(t, 0, sizeof *t);
}

static uint64_t str_hash(const char *s, size_t n) { return bd_hash64(s, n, 0x62726169u); }

int32_t tok_strtab_find(const tok_strtab *t, const char *s, size_t n) {
    for (uint64_t i = str_hash(s, n) & t->slot_mask;; i = (i + 1) & t->slot_mask) {
        int32_t id = t->slots[i];
        if (id < 0) return -1;
        size_t len;
        const char *p = tok_str(t, id, &len);
        if (len == n && !memcmp(p, s, n)) return id;
    }
}

static braid_status grow(tok_strtab *t, size_t n) {
    if (t->n + 2 > t->cap) {
        uint32_t cap = t->cap * 2;
        uint64_t *off = bd_realloc(t->off, (size_t)cap * sizeof *off);
        if (!off) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory for the string table");
        t->off = off;
        t->cap = cap;
    }
    if (t->arena_len + n > t->arena_cap) {
        size_t cap = t->arena_cap * 2;
        while (cap < t->arena_len + n) cap *= 2;
        char *a = bd_realloc(t->arena, cap);
        if (!a) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory for the string table");
        t->arena = a;
        t->arena_cap = cap;
    }
    /* Keep the hash at most half full. */
    if ((uint64_t)(t->n + 1) * 2 > t->slot_mask + 1) {
        uint64_t slots = (t->slot_mask + 1) * 2;
        int32_t *ns = bd_mallocn(slots, sizeof *ns);
        if (!ns) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory for the string table");
        memset(ns, 0xFF, slots * sizeof *ns);
        for (uint64_t i = 0; i <= t->slot_mask; i++) {
            int32_t id = t->slots[i];
            if (id < 0) continue;
            size_t len;
            const char *p = tok_str(t, id, &len);
            uint64_t j = str_hash(p, len) & (slots - 1);
            while (ns[j] >= 0) j = (j + 1) & (slots - 1);
            ns[j] = id;
        }
        bd_free(t->slots);
        t->slots = ns;
        t->slot_mask = slots - 1;
    }
    return BRAID_OK;
}

static void store(tok_strtab *t, const char *s, size_t n) {
    memcpy(t->arena + t->arena_len, s, n);
    t->arena_len += n;
    t->n++;
    t->off[t->n] = t->arena_len;
}

braid_status tok_strtab_append(tok_strtab *t, const char *s, size_t n, int32_t *id) {
    BD_TRY(grow(t, n));
    int32_t nid = (int32_t)t->n;
    store(t, s, n);
    /* Replace an existing entry for the same text (last id wins) or take a free slot. */
    for (uint64_t i = str_hash(s, n) & t->slot_mask;; i = (i + 1) & t->slot_mask) {
        int32_t cur = t->slots[i];
        if (cur < 0) {
            t->slots[i] = nid;
            break;
        }
        size_t len;
        const char *p = tok_str(t, cur, &len);
        if (len == n && !memcmp(p, s, n)) {
            t->slots[i] = nid;
            break;
        }
    }
    *id = nid;
    return BRAID_OK;
}

braid_status tok_strtab_intern(tok_strtab *t, const char *s, size_t n, int32_t *id) {
    int32_t f = tok_strtab_find(t, s, n);
    if (f >= 0) {
        *id = f;
        return BRAID_OK;
    }
    return tok_strtab_append(t, s, n, id);
}
