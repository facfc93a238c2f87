/* bpe.c — byte-pair encoding of raw text fragments, as llama.cpp's BPE tokenizer does it: decode (invalid
 * bytes -> U+FFFD), pre-tokenize into words, then per word repeatedly merge the adjacent pair with the lowest
 * merge rank (ties: leftmost), and map the final symbols to ids (unknown ones fall back to single-byte tokens).
 *
 * Speed, without changing results:
 * - symbols are string ids and merges a hash of id pairs, so no strings are built while merging;
 * - in byte-level vocabularies a word's symbols are its raw bytes (each byte is one GPT-2 character);
 * - merging uses a doubly linked list and an indexed min-heap of (rank, position): O(m log m) per word;
 * - a word cache (per call, for long inputs) skips repeated words;
 * - long fragments are processed in ~256 KiB blocks cut right after a '\n' between two printable ASCII
 *   characters, where the pre-tokenizer is known to split anyway (all hand-written splitters and the regexes
 *   checked for it, see tok_pretok_newline_cuttable; other pre-tokenizers take the fragment whole), so
 *   working memory follows the longest line, not the input;
 * - a word longer than 1 MiB (only pathological input: a run of a million letters or spaces) is merged in
 *   1 MiB pieces. That bounds memory (~40 bytes per byte of word); it is the one place where braid's ids may
 *   differ from llama.cpp's, which merges the whole word (in O(n log n) time and far more memory). */
#include <string.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "base/status.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab_internal.h"

#define BLOCK_BYTES (256u * 1024u)
#define BPE_MAX_WORD (1u << 20) /* bytes: longer words are merged in pieces (see bpe_block) */
#define CACHE_MIN_TEXT 2048u    /* inputs shorter than this skip the word cache */
#define CACHE_MAX_WORD 64u      /* longer words are not cached */
#define CACHE_MAX_SLOTS (1u << 16) /* the cache has ~1 slot per 8 bytes of text, up to this */
#define CACHE_ARENA_MAX (8u << 20)

typedef struct cache_slot {
    uint64_t hash;
    uint32_t key_off, key_len;
    uint32_t tok_off, n_tok;
} cache_slot;

struct tok_bpe_session {
    const tok_vocab *v;
    tok_pretok_scratch ps;
    uint32_t *cp; /* [cp_cap] codepoints of the current block */
    size_t cp_cap;
    uint8_t *word; /* re-encoded bytes of the current word */
    size_t word_cap;
    uint8_t *esc; /* the fragment with spaces escaped (vocabularies that ask for it) */
    size_t esc_cap;
    /* merge state, [sym_cap] each: string id, list links, byte offset, heap position */
    int32_t *sid, *prev, *next, *hpos, *res, *rank;
    uint32_t *start;
    int32_t *heap;
    size_t sym_cap;
    /* word cache */
    cache_slot *cache;
    uint32_t cache_mask;
    uint8_t *ckeys;
    int32_t *ctoks;
    size_t ckeys_len, ckeys_cap, ctoks_len, ctoks_cap, c_used;
};

void tok_bpe_session_free(tok_bpe_session *s) {
    if (!s) return;
    tok_pretok_scratch_free(&s->ps);
    bd_free(s->cp);
    bd_free(s->word);
    bd_free(s->esc);
    bd_free(s->sid);
    bd_free(s->prev);
    bd_free(s->next);
    bd_free(s->hpos);
    bd_free(s->res);
    bd_free(s->rank);
    bd_free(s->start);
    bd_free(s->heap);
    bd_free(s->cache);
    bd_free(s->ckeys);
    bd_free(s->ctoks);
    bd_free(s);
}

braid_status tok_bpe_session_new(const tok_vocab *v, size_t text_len, tok_bpe_session **out) {
    tok_bpe_session *s = bd_calloc(1, sizeof *s);
    if (!s) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory");
    s->v = v;
    if (text_len >= CACHE_MIN_TEXT) {
        uint32_t slots = 256;
        while (slots < CACHE_MAX_SLOTS && slots < text_len / 8) slots <<= 1;
        s->cache_mask = slots - 1;
        s->cache = bd_calloc(slots, sizeof *s->cache);
        s->ckeys_cap = 1 << 12;
        s->ctoks_cap = 1 << 10;
        s->ckeys = bd_malloc(s->ckeys_cap);
        s->ctoks = bd_mallocn(s->ctoks_cap, sizeof *s->ctoks);
        if (!s->cache || !s->ckeys || !s->ctoks) {
            tok_bpe_session_free(s);
            return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory");
        }
    }
    *out = s;
    return BRAID_OK;
}

static braid_status grow_u8(uint8_t **p, size_t *cap, size_t need) {
    if (need <= *cap) return BRAID_OK;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    uint8_t *n = bd_realloc(*p, c);
    if (!n) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory (%zu bytes)", need);
    *p = n;
    *cap = c;
    return BRAID_OK;
}

static braid_status grow_syms(tok_bpe_session *s, size_t m) {
    if (m <= s->sym_cap) return BRAID_OK;
    size_t c = s->sym_cap ? s->sym_cap : 256;
    while (c < m) c *= 2;
    int32_t **arrs[] = {&s->sid, &s->prev, &s->next, &s->hpos, &s->res, &s->rank, &s->heap};
    for (size_t k = 0; k < sizeof arrs / sizeof arrs[0]; k++) {
        int32_t *n = bd_realloc(*arrs[k], c * sizeof(int32_t));
        if (!n) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory (word of %zu symbols)", m);
        *arrs[k] = n;
    }
    uint32_t *st = bd_realloc(s->start, (c + 1) * sizeof *st);
    if (!st) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory (word of %zu symbols)", m);
    s->start = st;
    s->sym_cap = c;
    return BRAID_OK;
}

/* ---- indexed min-heap of symbol positions keyed by (rank of the pair starting there, position) ---- */

static inline int heap_less(const tok_bpe_session *s, int32_t a, int32_t b) {
    return s->rank[a] < s->rank[b] || (s->rank[a] == s->rank[b] && a < b);
}

static void heap_up(tok_bpe_session *s, int32_t k) {
    int32_t x = s->heap[k];
    while (k > 0) {
        int32_t p = (k - 1) / 2;
        if (!heap_less(s, x, s->heap[p])) break;
        s->heap[k] = s->heap[p];
        s->hpos[s->heap[k]] = k;
        k = p;
    }
    s->heap[k] = x;
    s->hpos[x] = k;
}

static void heap_down(tok_bpe_session *s, int32_t k, int32_t n) {
    int32_t x = s->heap[k];
    for (;;) {
        int32_t c = 2 * k + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_less(s, s->heap[c + 1], s->heap[c])) c++;
        if (!heap_less(s, s->heap[c], x)) break;
        s->heap[k] = s->heap[c];
        s->hpos[s->heap[k]] = k;
        k = c;
    }
    s->heap[k] = x;
    s->hpos[x] = k;
}

/* Sets the pair starting at symbol i (with its current next) in or out of the heap. */
static void heap_set(tok_bpe_session *s, int32_t i, int32_t *hn) {
    int32_t j = s->next[i], r = -1, res = -1;
    if (j >= 0) r = tok_merge_find(s->v, s->sid[i], s->sid[j], &res);
    int32_t k = s->hpos[i];
    if (r < 0) {
        if (k >= 0) { /* remove */
            int32_t last = s->heap[--*hn];
            s->hpos[i] = -1;
            if (k < *hn) {
                s->heap[k] = last;
                s->hpos[last] = k;
                heap_up(s, k);
                heap_down(s, s->hpos[last], *hn);
            }
        }
        return;
    }
    s->res[i] = res;
    if (k < 0) {
        s->rank[i] = r;
        s->heap[*hn] = i;
        s->hpos[i] = *hn;
        (*hn)++;
        heap_up(s, *hn - 1);
    } else {
        s->rank[i] = r;
        heap_up(s, k);
        heap_down(s, s->hpos[i], *hn);
    }
}

static void heap_remove(tok_bpe_session *s, int32_t i, int32_t *hn) {
    int32_t k = s->hpos[i];
    if (k < 0) return;
    int32_t last = s->heap[--*hn];
    s->hpos[i] = -1;
    if (k < *hn) {
        s->heap[k] = last;
        s->hpos[last] = k;
        heap_up(s, k);
        heap_down(s, s->hpos[last], *hn);
    }
}

/* ---- one word ---------------------------------------------------------------------------------------- */

/* Emits the fallback for a final symbol that is not a token: one token per byte where one exists. */
static void emit_fallback(const tok_vocab *v, const uint8_t *w, size_t a, size_t b, tok_out *out) {
    for (size_t k = a; k < b; k++) {
        if (v->byte_encode) {
            /* llama.cpp looks up each byte of the GPT-2 encoded text as a one-byte token. */
            uint8_t enc[4];
            size_t ne = tok_utf8_encode(tok_byte_to_cp(w[k]), enc);
            for (size_t e = 0; e < ne; e++)
                if (v->single_byte_tok[enc[e]] >= 0) tok_out_push(out, v->single_byte_tok[enc[e]]);
        } else if (v->byte_tok[w[k]] >= 0) {
            tok_out_push(out, v->byte_tok[w[k]]);
        }
    }
}

/* GPT-2 encoded text of raw bytes (for whole-word lookups). */
static size_t encode_bytes(const uint8_t *w, size_t n, uint8_t *dst) {
    size_t o = 0;
    for (size_t k = 0; k < n; k++) o += tok_utf8_encode(tok_byte_to_cp(w[k]), dst + o);
    return o;
}

static braid_status bpe_word(tok_bpe_session *s, const uint8_t *w, size_t n, tok_out *out) {
    const tok_vocab *v = s->v;
    if (v->ignore_merges || v->gemma4_nl) {
        int whole = v->ignore_merges;
        if (!whole) { /* gemma4: a word of newlines that is a token is taken whole */
            whole = 1;
            for (size_t k = 0; k < n; k++)
                if (w[k] != '\n') whole = 0;
        }
        if (whole) {
            int32_t id;
            if (v->byte_encode) {
                BD_TRY(grow_u8(&s->esc, &s->esc_cap, 2 * n));
                size_t ne = encode_bytes(w, n, s->esc);
                id = tok_text_to_token(v, (const char *)s->esc, ne);
            } else {
                id = tok_text_to_token(v, (const char *)w, n);
            }
            if (id >= 0) {
                tok_out_push(out, id);
                return BRAID_OK;
            }
        }
    }
    BD_TRY(grow_syms(s, n + 1));
    /* Initial symbols: bytes (byte-level) or UTF-8 characters. */
    int32_t m = 0;
    for (size_t k = 0; k < n;) {
        size_t l = 1;
        int32_t id;
        if (v->byte_encode) {
            id = v->byte_sid[w[k]];
        } else {
            l = tok_utf8_len(w[k]);
            if (l > n - k) l = n - k;
            id = tok_strtab_find(&v->strs, (const char *)w + k, l);
        }
        s->sid[m] = id;
        s->start[m] = (uint32_t)k;
        s->prev[m] = m - 1;
        s->next[m] = m + 1;
        s->hpos[m] = -1;
        m++;
        k += l;
    }
    s->next[m - 1] = -1;
    s->start[m] = (uint32_t)n;
    int32_t hn = 0;
    for (int32_t i = 0; i + 1 < m; i++) heap_set(s, i, &hn);
    while (hn > 0) {
        int32_t i = s->heap[0], j = s->next[i];
        s->sid[i] = s->res[i];
        heap_remove(s, j, &hn);
        s->next[i] = s->next[j];
        if (s->next[j] >= 0) s->prev[s->next[j]] = i;
        if (s->prev[i] >= 0) heap_set(s, s->prev[i], &hn);
        heap_set(s, i, &hn);
    }
    for (int32_t i = 0; i >= 0; i = s->next[i]) {
        int32_t id = s->sid[i];
        size_t a = s->start[i], b = s->next[i] >= 0 ? s->start[s->next[i]] : n;
        if (id >= 0 && id < v->n_tokens) tok_out_push(out, id);
        else emit_fallback(v, w, a, b, out);
    }
    return BRAID_OK;
}

/* Word cache: words seen earlier in this call give their ids without merging. */
static braid_status cached_word(tok_bpe_session *s, const uint8_t *w, size_t n, tok_out *out) {
    if (!s->cache || n > CACHE_MAX_WORD) return bpe_word(s, w, n, out);
    uint64_t h = bd_hash64(w, n, 7);
    uint32_t i = (uint32_t)h & s->cache_mask;
    for (;; i = (i + 1) & s->cache_mask) {
        cache_slot *c = &s->cache[i];
        if (!c->key_len) break;
        if (c->hash == h && c->key_len == n && !memcmp(s->ckeys + c->key_off, w, n)) {
            for (uint32_t k = 0; k < c->n_tok; k++) tok_out_push(out, s->ctoks[c->tok_off + k]);
            return BRAID_OK;
        }
    }
    /* Not cached: tokenize into a private sink, then copy out and remember. */
    if (s->c_used * 2 >= (size_t)s->cache_mask + 1 || s->ckeys_len + n > CACHE_ARENA_MAX ||
        s->ctoks_len + n + 8 > CACHE_ARENA_MAX) {
        memset(s->cache, 0, ((size_t)s->cache_mask + 1) * sizeof *s->cache);
        s->c_used = s->ckeys_len = s->ctoks_len = 0;
        i = (uint32_t)h & s->cache_mask;
    }
    /* A word gives at most 3 ids per byte (byte fallback of a 2-byte GPT-2 character is 2 ids). */
    size_t need = s->ctoks_len + 3 * n + 8;
    if (need > s->ctoks_cap) {
        size_t c = s->ctoks_cap * 2;
        while (c < need) c *= 2;
        int32_t *nt = bd_realloc(s->ctoks, c * sizeof *nt);
        if (!nt) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory");
        s->ctoks = nt;
        s->ctoks_cap = c;
    }
    BD_TRY(grow_u8(&s->ckeys, &s->ckeys_cap, s->ckeys_len + n));
    tok_out tmp = {s->ctoks + s->ctoks_len, 3 * n + 8, 0};
    BD_TRY(bpe_word(s, w, n, &tmp));
    if (tmp.n > tmp.cap) return bd_error(BRAID_E_INVALID, "tokenizer: internal error (word cache overflow)");
    for (size_t k = 0; k < tmp.n; k++) tok_out_push(out, tmp.buf[k]);
    while (s->cache[i].key_len) i = (i + 1) & s->cache_mask;
    cache_slot *c = &s->cache[i];
    memcpy(s->ckeys + s->ckeys_len, w, n);
    c->hash = h;
    c->key_off = (uint32_t)s->ckeys_len;
    c->key_len = (uint32_t)n;
    c->tok_off = (uint32_t)s->ctoks_len;
    c->n_tok = (uint32_t)tmp.n;
    s->ckeys_len += n;
    s->ctoks_len += tmp.n;
    s->c_used++;
    return BRAID_OK;
}

/* ---- fragments --------------------------------------------------------------------------------------- */

static braid_status bpe_block(tok_bpe_session *s, const uint8_t *text, size_t len, tok_out *out) {
    const tok_vocab *v = s->v;
    if (len + 1 > s->cp_cap) {
        size_t c = len + 1;
        uint32_t *cp = bd_mallocn(c, sizeof *cp);
        if (!cp) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory (%zu bytes of text)", len);
        bd_free(s->cp);
        s->cp = cp;
        s->cp_cap = c;
    }
    size_t n = 0;
    for (size_t i = 0; i < len;) s->cp[n++] = tok_utf8_decode(text, len, &i);
    const uint32_t *lens;
    size_t n_lens;
    BD_TRY(tok_pretok_split(v->pretok, &s->ps, s->cp, n, &lens, &n_lens));
    size_t at = 0;
    for (size_t k = 0; k < n_lens; k++) {
        size_t wl = lens[k];
        if (!wl) continue;
        BD_TRY(grow_u8(&s->word, &s->word_cap, wl * 4));
        size_t nb = 0;
        for (size_t c = at; c < at + wl; c++) nb += tok_utf8_encode(s->cp[c], s->word + nb);
        at += wl;
        /* A word longer than BPE_MAX_WORD (a run of millions of letters or spaces) is merged in pieces to bound
         * memory; llama.cpp merges it whole, so this is the one input where the two may differ. */
        for (size_t a = 0; a < nb;) {
            size_t b = nb - a > BPE_MAX_WORD ? a + BPE_MAX_WORD : nb;
            while (b < nb && (s->word[b] & 0xC0) == 0x80) b++;
            BD_TRY(cached_word(s, s->word + a, b - a, out));
            a = b;
        }
    }
    return BRAID_OK;
}

braid_status tok_bpe_fragment(tok_bpe_session *s, const uint8_t *text, size_t len, tok_out *out) {
    const tok_vocab *v = s->v;
    if (v->escape_whitespaces) {
        size_t n_sp = 0;
        for (size_t i = 0; i < len; i++) n_sp += text[i] == ' ';
        uint8_t *e = bd_malloc(len + 2 * n_sp + 1);
        if (!e) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory (%zu bytes of text)", len);
        size_t o = 0;
        for (size_t i = 0; i < len; i++) {
            if (text[i] == ' ') {
                e[o++] = 0xE2;
                e[o++] = 0x96;
                e[o++] = 0x81;
            } else {
                e[o++] = text[i];
            }
        }
        braid_status st = BRAID_OK;
        /* escaping only happens for vocabularies whose pre-tokenizer splits on newlines (safe to cut) */
        size_t a = 0;
        while (a < o && st == BRAID_OK) {
            size_t b = o;
            if (o - a > BLOCK_BYTES && tok_pretok_newline_cuttable(v->pretok)) {
                b = a + BLOCK_BYTES;
                while (b < o && !(e[b - 1] == '\n' && e[b - 2] > 0x20 && e[b - 2] < 0x7F && e[b] > 0x20 && e[b] < 0x7F)) b++;
            }
            st = bpe_block(s, e + a, b - a, out);
            a = b;
        }
        bd_free(e);
        return st;
    }
    if (len <= BLOCK_BYTES || !tok_pretok_newline_cuttable(v->pretok)) return bpe_block(s, text, len, out);
    size_t a = 0;
    while (a < len) {
        size_t b = len;
        if (len - a > BLOCK_BYTES) {
            b = a + BLOCK_BYTES;
            /* find '\n' at b-1 with printable ASCII on both sides */
            for (;;) {
                const uint8_t *nl = memchr(text + b - 1, '\n', len - (b - 1));
                if (!nl) {
                    b = len;
                    break;
                }
                b = (size_t)(nl - text) + 1;
                if (b >= len) {
                    b = len;
                    break;
                }
                if (text[b - 2] > 0x20 && text[b - 2] < 0x7F && text[b] > 0x20 && text[b] < 0x7F) break;
                b++;
            }
        }
        BD_TRY(bpe_block(s, text + a, b - a, out));
        a = b;
    }
    return BRAID_OK;
}
