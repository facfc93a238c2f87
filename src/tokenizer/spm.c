/* spm.c — SentencePiece-style BPE ("llama" vocabularies), as llama.cpp does it: the fragment (spaces written
 * as U+2581) is split into UTF-8 characters, then the adjacent pair whose concatenation is a token with the
 * highest score is merged (ties: leftmost) until no pair is a token; characters that are not tokens become
 * byte tokens (<0xXX>).
 *
 * Implementation: symbols in a linked list, candidate pairs in an indexed max-heap (one per left symbol), so
 * a fragment costs O(n log n). Long fragments are cut into chunks at "hard" boundaries: between two
 * characters that are adjacent inside no token of the vocabulary, no merge can ever cross, so the chunks
 * tokenize independently with identical results. Only a run longer than SPM_MAX_CHUNK characters without such
 * a boundary (e.g. 8 million identical letters) is cut elsewhere, to bound memory; that is the one place
 * where braid may differ from llama.cpp. */
#include <string.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "base/status.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab_internal.h"

#define SPM_MIN_CHUNK 1024u           /* bytes before looking for a hard boundary */
#define SPM_MAX_CHUNK (8u << 20)      /* characters: beyond this a chunk is cut even without a boundary */

static uint64_t char_pack(const uint8_t *s, size_t n) {
    uint64_t k = 0;
    for (size_t i = 0; i < n; i++) k |= (uint64_t)s[i] << (8 * i);
    return k | (uint64_t)n << 32;
}

static uint64_t pair_key(uint64_t a, uint64_t b) {
    uint64_t k = (a * 0x9E3779B97F4A7C15ull) ^ (b + 0x632BE59BD9B4E019ull + (a << 6));
    return k ? k : 1;
}

static int pair_has(const tok_vocab *v, uint64_t k) {
    for (uint64_t i = (k >> 7) & v->spm_pair_mask;; i = (i + 1) & v->spm_pair_mask) {
        if (v->spm_pairs[i] == k) return 1;
        if (!v->spm_pairs[i]) return 0;
    }
}

braid_status tok_spm_prepare(tok_vocab *v) {
    size_t total = 0;
    for (int32_t t = 0; t < v->n_tokens; t++) {
        size_t len;
        tok_str(&v->strs, t, &len);
        total += len;
    }
    uint64_t slots = 1024;
    while (slots < total * 2) slots <<= 1;
    v->spm_pairs = bd_calloc(slots, sizeof *v->spm_pairs);
    if (!v->spm_pairs) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory");
    v->spm_pair_mask = slots - 1;
    for (int32_t t = 0; t < v->n_tokens; t++) {
        size_t len;
        const uint8_t *s = (const uint8_t *)tok_str(&v->strs, t, &len);
        uint64_t prev = 0;
        for (size_t i = 0; i < len;) {
            size_t l = tok_utf8_len(s[i]);
            if (l > len - i) l = len - i;
            uint64_t c = char_pack(s + i, l);
            if (i > 0) {
                uint64_t k = pair_key(prev, c);
                uint64_t j = (k >> 7) & v->spm_pair_mask;
                while (v->spm_pairs[j] && v->spm_pairs[j] != k) j = (j + 1) & v->spm_pair_mask;
                v->spm_pairs[j] = k;
            }
            prev = c;
            i += l;
        }
    }
    return BRAID_OK;
}

/* Working memory for one chunk, [cap] each. */
typedef struct spm_work {
    uint32_t *start; /* [cap + 1] byte offset of each symbol */
    int32_t *prev, *next, *hpos, *heap, *tok;
    float *score;
    size_t cap;
} spm_work;

static void work_free(spm_work *w) {
    bd_free(w->start);
    bd_free(w->prev);
    bd_free(w->next);
    bd_free(w->hpos);
    bd_free(w->heap);
    bd_free(w->tok);
    bd_free(w->score);
}

static braid_status work_grow(spm_work *w, size_t m) {
    if (m <= w->cap) return BRAID_OK;
    size_t c = w->cap ? w->cap : 1024;
    while (c < m) c *= 2;
    int32_t **arrs[] = {&w->prev, &w->next, &w->hpos, &w->heap, &w->tok};
    for (size_t k = 0; k < sizeof arrs / sizeof arrs[0]; k++) {
        int32_t *n = bd_realloc(*arrs[k], c * sizeof(int32_t));
        if (!n) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory (%zu characters)", m);
        *arrs[k] = n;
    }
    float *sc = bd_realloc(w->score, c * sizeof *sc);
    if (!sc) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory (%zu characters)", m);
    w->score = sc;
    uint32_t *st = bd_realloc(w->start, (c + 1) * sizeof *st);
    if (!st) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory (%zu characters)", m);
    w->start = st;
    w->cap = c;
    return BRAID_OK;
}

/* Max-heap on (score, then lower position). */
static inline int before(const spm_work *w, int32_t a, int32_t b) {
    return w->score[a] > w->score[b] || (w->score[a] == w->score[b] && a < b);
}
static void up(spm_work *w, int32_t k) {
    int32_t x = w->heap[k];
    while (k > 0) {
        int32_t p = (k - 1) / 2;
        if (!before(w, x, w->heap[p])) break;
        w->heap[k] = w->heap[p];
        w->hpos[w->heap[k]] = k;
        k = p;
    }
    w->heap[k] = x;
    w->hpos[x] = k;
}
static void down(spm_work *w, int32_t k, int32_t n) {
    int32_t x = w->heap[k];
    for (;;) {
        int32_t c = 2 * k + 1;
        if (c >= n) break;
        if (c + 1 < n && before(w, w->heap[c + 1], w->heap[c])) c++;
        if (!before(w, w->heap[c], x)) break;
        w->heap[k] = w->heap[c];
        w->hpos[w->heap[k]] = k;
        k = c;
    }
    w->heap[k] = x;
    w->hpos[x] = k;
}
static void hremove(spm_work *w, int32_t i, int32_t *hn) {
    int32_t k = w->hpos[i];
    if (k < 0) return;
    int32_t last = w->heap[--*hn];
    w->hpos[i] = -1;
    if (k < *hn) {
        w->heap[k] = last;
        w->hpos[last] = k;
        up(w, k);
        down(w, w->hpos[last], *hn);
    }
}
/* The pair (i, next[i]) into the heap if its text is a token, else out. */
static void hset(const tok_vocab *v, spm_work *w, const uint8_t *text, size_t end, int32_t i, int32_t *hn) {
    int32_t j = w->next[i];
    int32_t t = -1;
    if (j >= 0) {
        size_t a = w->start[i], b = w->next[j] >= 0 ? w->start[w->next[j]] : end;
        t = tok_text_to_token(v, (const char *)text + a, b - a);
    }
    if (t < 0) {
        hremove(w, i, hn);
        return;
    }
    w->tok[i] = t;
    w->score[i] = v->score[t];
    if (w->hpos[i] < 0) {
        w->heap[*hn] = i;
        w->hpos[i] = *hn;
        (*hn)++;
        up(w, *hn - 1);
    } else {
        up(w, w->hpos[i]);
        down(w, w->hpos[i], *hn);
    }
}

static braid_status spm_chunk(const tok_vocab *v, spm_work *w, const uint8_t *text, size_t len, tok_out *out) {
    size_t m = 0;
    for (size_t i = 0; i < len;) {
        size_t l = tok_utf8_len(text[i]);
        if (l > len - i) l = len - i;
        i += l;
        m++;
    }
    BD_TRY(work_grow(w, m + 1));
    m = 0;
    for (size_t i = 0; i < len;) {
        size_t l = tok_utf8_len(text[i]);
        if (l > len - i) l = len - i;
        w->start[m] = (uint32_t)i;
        w->prev[m] = (int32_t)m - 1;
        w->next[m] = (int32_t)m + 1;
        w->hpos[m] = -1;
        i += l;
        m++;
    }
    if (!m) return BRAID_OK;
    w->next[m - 1] = -1;
    int32_t hn = 0;
    for (int32_t i = 0; i + 1 < (int32_t)m; i++) hset(v, w, text, len, i, &hn);
    while (hn > 0) {
        int32_t i = w->heap[0], j = w->next[i];
        hremove(w, j, &hn);
        w->next[i] = w->next[j];
        if (w->next[j] >= 0) w->prev[w->next[j]] = i;
        if (w->prev[i] >= 0) hset(v, w, text, len, w->prev[i], &hn);
        hset(v, w, text, len, i, &hn);
    }
    for (int32_t i = 0; i >= 0; i = w->next[i]) {
        size_t a = w->start[i], b = w->next[i] >= 0 ? w->start[w->next[i]] : len;
        int32_t t = tok_text_to_token(v, (const char *)text + a, b - a);
        if (t >= 0) {
            tok_out_push(out, t);
            continue;
        }
        /* Not a token: its bytes as byte tokens. llama.cpp throws when a byte has no token at all (it
         * cannot happen with a complete <0x00>..<0xFF> set); braid then uses the unknown token. */
        for (size_t k = a; k < b; k++) {
            int32_t bt = v->byte_tok[text[k]];
            tok_out_push(out, bt >= 0 ? bt : v->unk);
        }
    }
    return BRAID_OK;
}

braid_status tok_spm_fragment(const tok_vocab *v, const uint8_t *raw, size_t raw_len, int prefix_space,
                              tok_out *out) {
    /* Escape spaces: ' ' -> U+2581. */
    size_t n_sp = prefix_space ? 1 : 0;
    for (size_t i = 0; i < raw_len; i++) n_sp += raw[i] == ' ';
    uint8_t *text = bd_malloc(raw_len + 3 * n_sp + 1);
    if (!text) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory (%zu bytes of text)", raw_len);
    size_t len = 0;
    if (prefix_space) {
        text[len++] = 0xE2;
        text[len++] = 0x96;
        text[len++] = 0x81;
    }
    for (size_t i = 0; i < raw_len; i++) {
        if (raw[i] == ' ') {
            text[len++] = 0xE2;
            text[len++] = 0x96;
            text[len++] = 0x81;
        } else {
            text[len++] = raw[i];
        }
    }
    spm_work w = {0};
    braid_status st = BRAID_OK;
    size_t a = 0;
    while (a < len && st == BRAID_OK) {
        /* Find the chunk end: after SPM_MIN_CHUNK bytes, the first hard boundary. */
        size_t i = a, n_chars = 0, b = len;
        uint64_t prev = 0;
        while (i < len) {
            size_t l = tok_utf8_len(text[i]);
            if (l > len - i) l = len - i;
            uint64_t c = char_pack(text + i, l);
            if (i - a >= SPM_MIN_CHUNK && (n_chars >= SPM_MAX_CHUNK || !pair_has(v, pair_key(prev, c)))) {
                b = i;
                break;
            }
            prev = c;
            i += l;
            n_chars++;
        }
        st = spm_chunk(v, &w, text + a, b - a, out);
        a = b;
    }
    work_free(&w);
    bd_free(text);
    return st;
}
