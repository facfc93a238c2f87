/* wpm.c — WordPiece ("bert" vocabularies) as llama.cpp does it: normalize (lowercase and strip accents through
 * the first codepoint of the NFD decomposition when the vocabulary asks, drop NUL, U+FFFD and control
 * characters), split into words at whitespace and around punctuation, ASCII symbols and CJK ideographs, then
 * for each word with a U+2581 prefix take the longest token at each position; a word that cannot be covered
 * becomes the unknown token. */
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab_internal.h"

/* The CJK ranges llama.cpp treats as single-character words (its 0x2B920 start follows the HF code). */
static int is_chinese(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* Greedy longest match of "\u2581" + word; the unknown token if some position has no token. */
static void wpm_word(const tok_vocab *v, const uint8_t *w, size_t n, tok_out *out) {
    size_t start = out->n;
    for (size_t i = 0; i < n; i++) {
        int match = 0;
        size_t j = i + v->max_token_len + 1 < n ? i + v->max_token_len + 1 : n;
        for (; j > i; j--) {
            int32_t id = tok_text_to_token(v, (const char *)w + i, j - i);
            if (id >= 0) {
                tok_out_push(out, id);
                match = 1;
                i = j - 1;
                break;
            }
        }
        if (!match) {
            out->n = start; /* discard the word's tokens (a sink only counts past its capacity) */
            break;
        }
    }
    if (out->n == start) tok_out_push(out, v->unk);
}

braid_status tok_wpm_fragment(const tok_vocab *v, const uint8_t *text, size_t len, tok_out *out) {
    /* words are built one at a time in a buffer: "\u2581" + normalized UTF-8 */
    size_t cap = 3 + 4 * len + 4;
    uint8_t *w = bd_malloc(cap);
    if (!w) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory (%zu bytes of text)", len);
    memcpy(w, "\xE2\x96\x81", 3);
    size_t wl = 3;
#define FLUSH()                                                                                                 \
    do {                                                                                                        \
        if (wl > 3) wpm_word(v, w, wl, out);                                                                    \
        wl = 3;                                                                                                 \
    } while (0)
    for (size_t i = 0; i < len;) {
        uint32_t c = tok_utf8_decode(text, len, &i);
        if (v->wpm_strip_accents) c = tok_uc_map_get(tok_uc_nfd_first, tok_uc_n_nfd_first, c);
        uint8_t k = tok_uc_class(c);
        int cat = k & TOK_UC_CAT_MASK;
        if (k & TOK_UC_WS) {
            FLUSH();
            continue;
        }
        if (c == 0 || c == 0xFFFD || cat == TOK_UC_CONTROL) continue;
        if (v->wpm_strip_accents && cat == TOK_UC_MARK) continue;
        uint32_t o = v->wpm_lowercase ? tok_uc_map_get(tok_uc_lower, tok_uc_n_lower, c) : c;
        if (cat == TOK_UC_PUNCT || (c < 0x7F && cat == TOK_UC_SYMBOL) || is_chinese(c)) {
            FLUSH();
            wl += tok_utf8_encode(o, w + wl);
            FLUSH();
        } else {
            wl += tok_utf8_encode(o, w + wl);
        }
    }
    FLUSH();
#undef FLUSH
    bd_free(w);
    return BRAID_OK;
}
