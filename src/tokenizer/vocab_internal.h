/* vocab_internal.h — the inside of a tok_vocab, shared by the files of src/tokenizer (loading, pre-tokenizing,
 * BPE, SPM, special tokens, detokenizing). Nothing outside src/tokenizer includes it. */
#ifndef BRAID_TOKENIZER_VOCAB_INTERNAL_H
#define BRAID_TOKENIZER_VOCAB_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer/pretok.h"
#include "tokenizer/vocab.h"

typedef enum tok_type {
    TOK_TYPE_NONE = 0, /* dummy vocabulary: ids only */
    TOK_TYPE_SPM,      /* "llama" */
    TOK_TYPE_BPE,      /* "gpt2", "gemma4" */
    TOK_TYPE_WPM,      /* "bert" (WordPiece) */
} tok_type;

/* Strings known to the BPE merger: every token text (string id = token id) and, after them, the merge
 * parts and merge results that are not tokens (string id >= n_tokens). */
typedef struct tok_strtab {
    char *arena;        /* all strings, back to back */
    uint64_t *off;      /* [n + 1] start of string i in arena */
    uint32_t n;         /* strings */
    uint32_t cap;       /* capacity of off (n + 1 <= cap) */
    size_t arena_len, arena_cap;
    int32_t *slots;     /* open-addressing hash: string id or -1; size slot_mask + 1 */
    uint64_t slot_mask;
} tok_strtab;

/* BPE merge table: (left string id, right string id) -> (rank, merged string id). */
typedef struct tok_merge_slot {
    uint64_t key; /* left << 32 | right; UINT64_MAX = empty */
    int32_t rank;
    int32_t result;
} tok_merge_slot;

struct tok_vocab {
    tok_type type;
    char model_name[32];
    char pre_name[64];

    int32_t n_tokens;
    tok_strtab strs;  /* token texts first (ids 0 .. n_tokens-1), then BPE-only strings */
    float *score;     /* [n_tokens] */
    uint32_t *attr;   /* [n_tokens] TOK_ATTR_* */

    /* tokenizer flags, llama.cpp's defaults per type and pre-tokenizer, overridden by the file */
    int add_space_prefix, add_bos, add_eos, add_sep, ignore_merges, clean_spaces, escape_whitespaces;
    int byte_encode; /* BPE over GPT-2 byte-mapped text (1) or raw UTF-8 (0) */
    int wpm_lowercase, wpm_strip_accents; /* WordPiece normalizer */
    size_t max_token_len;                 /* longest token text in bytes */

    int32_t bos, eos, eot, eom, unk, sep, pad, mask, nl;
    int32_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    int32_t *eog;     /* sorted ids that end generation */
    size_t n_eog;

    int32_t *special; /* control / user-defined / unknown ids, longest text first (ties: lower id first) */
    size_t n_special;

    /* BPE */
    tok_merge_slot *merges; /* open addressing, size merge_mask + 1 */
    uint64_t merge_mask;
    size_t n_merges;
    int32_t byte_sid[256];      /* string id of the one-character string GPT-2 maps byte b to (-1: none) */
    int32_t single_byte_tok[256]; /* token whose text is the single byte b (-1: none), BPE byte fallback */
    int gemma4_nl;              /* a word of only newlines that is a token is taken whole (gemma4) */
    tok_pretok *pretok;

    /* SPM */
    int32_t byte_tok[256];      /* byte fallback: "<0xXX>" token (SPM: else the single-byte token), else -1 */
    uint64_t *spm_pairs;        /* hash set of (cp_a << 32 | cp_b) adjacent inside some token; 0 = empty */
    uint64_t spm_pair_mask;

    /* pieces (llama.cpp's token_to_piece with special = 1), computed at load */
    char *piece_arena;
    uint64_t *piece_off; /* [n_tokens + 1] */
};

/* String table (strtab.c). */
BRAID_NODISCARD braid_status tok_strtab_init(tok_strtab *t, uint32_t cap_strings, size_t arena_cap);
void tok_strtab_free(tok_strtab *t);
/* Id of string s (n bytes), or -1. limit: only ids < limit count (n_tokens for token lookups). */
int32_t tok_strtab_find(const tok_strtab *t, const char *s, size_t n);
/* Adds s if absent (the first id given to a string is kept); *id gets its id. */
BRAID_NODISCARD braid_status tok_strtab_intern(tok_strtab *t, const char *s, size_t n, int32_t *id);
/* Appends s as a new id even if the text exists (token lists may repeat a text; the hash then keeps the
 * last id, like llama.cpp's token_to_id map). */
BRAID_NODISCARD braid_status tok_strtab_append(tok_strtab *t, const char *s, size_t n, int32_t *id);
static inline const char *tok_str(const tok_strtab *t, int32_t id, size_t *len) {
    *len = (size_t)(t->off[id + 1] - t->off[id]);
    return t->arena + t->off[id];
}
/* Token id of a text (-1 if none). */
int32_t tok_text_to_token(const tok_vocab *v, const char *s, size_t n);

/* Merge lookup: rank (or -1) and merged string id of the pair (a, b). */
static inline int32_t tok_merge_find(const tok_vocab *v, int32_t a, int32_t b, int32_t *result) {
    if (a < 0 || b < 0 || !v->merges) return -1;
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    uint64_t h = (key * 0x9E3779B97F4A7C15ull) >> 17;
    for (uint64_t i = h & v->merge_mask;; i = (i + 1) & v->merge_mask) {
        const tok_merge_slot *s = &v->merges[i];
        if (s->key == key) {
            *result = s->result;
            return s->rank;
        }
        if (s->key == UINT64_MAX) return -1;
    }
}

/* Output sink: ids written while they fit, counted always. */
typedef struct tok_out {
    int32_t *buf;
    size_t cap;
    size_t n;
} tok_out;
static inline void tok_out_push(tok_out *o, int32_t id) {
    if (o->n < o->cap) o->buf[o->n] = id;
    o->n++;
}

/* Per-call working memory of the BPE tokenizer (bpe.c). */
typedef struct tok_bpe_session tok_bpe_session;
BRAID_NODISCARD braid_status tok_bpe_session_new(const tok_vocab *v, size_t text_len, tok_bpe_session **out);
void tok_bpe_session_free(tok_bpe_session *s);
/* Tokenizes one raw-text fragment (no special tokens in it). */
BRAID_NODISCARD braid_status tok_bpe_fragment(tok_bpe_session *s, const uint8_t *text, size_t len, tok_out *out);

/* SPM (spm.c): tokenizes one fragment (spaces not yet escaped), after a space if prefix_space. */
BRAID_NODISCARD braid_status tok_spm_fragment(const tok_vocab *v, const uint8_t *text, size_t len, int prefix_space,
                                              tok_out *out);
BRAID_NODISCARD braid_status tok_spm_prepare(tok_vocab *v);

/* WordPiece (wpm.c): tokenizes one fragment. */
BRAID_NODISCARD braid_status tok_wpm_fragment(const tok_vocab *v, const uint8_t *text, size_t len, tok_out *out);

#endif
