/* pretok.h — pre-tokenizers: split text (as codepoints) into the words that BPE then works on, exactly as
 * llama.cpp does for each tokenizer.ggml.pre. A pre-tokenizer is a list of steps; each step splits every
 * piece the previous steps produced. A step is a regex from llama.cpp's table for that pre-tokenizer: the
 * ones llama.cpp runs with a hand-written splitter (gpt-2, llama-3, qwen2, qwen3.5 patterns, newline runs,
 * AFMoE digit groups) have a hand-written splitter here too, with the same behaviour (which is not always the
 * pure regex's); the others run on PCRE2 (JIT) the way llama.cpp runs them on std::regex: \p{..} classes
 * are resolved with braid's Unicode 15.1 table by "collapsing" each non-ASCII codepoint to a byte standing
 * for its class (and the class to a byte set), non-ASCII whitespace becomes \v. */
#ifndef BRAID_TOKENIZER_PRETOK_H
#define BRAID_TOKENIZER_PRETOK_H

#include <stddef.h>
#include <stdint.h>

#include "braid.h"

/* Vocabulary flags a pre-tokenizer name implies (llama.cpp's load-time switch). */
enum {
    TOK_PRE_NO_CLEAN_SPACES = 1 << 0, /* clean_spaces = false */
    TOK_PRE_IGNORE_MERGES = 1 << 1,   /* a word that is a whole token is not merged */
    TOK_PRE_ADD_BOS = 1 << 2,
    TOK_PRE_ESCAPE_WS = 1 << 3,       /* spaces become U+2581 before BPE */
    TOK_PRE_RAW_UTF8 = 1 << 4,        /* BPE over raw UTF-8, byte tokens <0xXX> (no GPT-2 byte map) */
    TOK_PRE_ADD_SEP = 1 << 5,
    TOK_PRE_NO_BOS = 1 << 6,          /* the default BOS id is dropped (chatglm) */
};

/* Looks up a tokenizer.ggml.pre value ("" = llama.cpp's "default"). BRAID_E_UNSUPPORTED if unknown. */
BRAID_NODISCARD braid_status tok_pre_lookup(const char *name, unsigned *flags, const char *const **regex);

typedef struct tok_pretok tok_pretok;
/* Compiles the steps (regex: NULL-terminated list). *out is released with tok_pretok_free. */
BRAID_NODISCARD braid_status tok_pretok_new(const char *const *regex, tok_pretok **out);
void tok_pretok_free(tok_pretok *p);
/* 1 if text may be cut right after a '\n' that sits between two printable ASCII characters without
 * changing the split (true of every hand-written step and of the regexes checked for it). */
int tok_pretok_newline_cuttable(const tok_pretok *p);

/* Per-thread scratch memory for tok_pretok_split; zero-initialise, release with tok_pretok_scratch_free. */
typedef struct tok_pretok_scratch {
    uint32_t *lens[2];
    size_t lens_cap[2];
    uint32_t *xtext; /* collapsed or whitespace-mapped copy of the codepoints */
    size_t xtext_cap;
    void *match_data; /* pcre2_match_data_32 */
    void *match_ctx;  /* pcre2_match_context_32 */
    void *jit_stack;  /* pcre2_jit_stack_32 */
} tok_pretok_scratch;
void tok_pretok_scratch_free(tok_pretok_scratch *s);

/* Splits cp[0..n) into words; *lens gets the word lengths in codepoints (some may be 0, as in llama.cpp),
 * pointing into the scratch (valid until its next use). */
BRAID_NODISCARD braid_status tok_pretok_split(const tok_pretok *p, tok_pretok_scratch *s, const uint32_t *cp,
                                              size_t n, const uint32_t **lens, size_t *n_lens);

#endif
