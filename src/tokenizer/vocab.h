/* vocab.h — the tokenizer of a model: a vocabulary loaded from a GGUF file's tokenizer.* keys and the
 * operations on it (text -> token ids, ids -> text), with llama.cpp's behaviour: same ids for the same text.
 *
 * Supported tokenizer.ggml.model values: "gpt2" (byte-level BPE with merges; pre-tokenizer chosen by
 * tokenizer.ggml.pre), "gemma4" (BPE over raw UTF-8 with spaces written as U+2581), "llama" (SentencePiece
 * BPE with scores and byte fallback), "bert" (WordPiece) and "none"/"no_vocab" (a dummy vocabulary of
 * <arch>.vocab_size ids that cannot tokenize). Others ("t5" Unigram, "rwkv", "plamo2", ...) give
 * BRAID_E_UNSUPPORTED.
 *
 * A tok_vocab is immutable after tok_vocab_load and may be used from several threads at once. It copies
 * what it needs, so the gguf_file may be closed afterwards. */
#ifndef BRAID_TOKENIZER_VOCAB_H
#define BRAID_TOKENIZER_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "braid.h"

struct gguf_file; /* gguf/gguf.h (not included here: tests that also include llama.cpp's gguf.h use this file) */

typedef struct tok_vocab tok_vocab;

/* Loads the vocabulary of f. On success *out owns it; release with tok_vocab_free. */
BRAID_NODISCARD braid_status tok_vocab_load(const struct gguf_file *f, tok_vocab **out);
/* The same from a file path (opened and closed here). */
BRAID_NODISCARD braid_status tok_vocab_load_file(const char *path, tok_vocab **out);
void tok_vocab_free(tok_vocab *v);

int32_t tok_n_tokens(const tok_vocab *v);
const char *tok_model_name(const tok_vocab *v); /* tokenizer.ggml.model, e.g. "gpt2" */
const char *tok_pre_name(const tok_vocab *v);   /* tokenizer.ggml.pre, "" if absent */

/* Text -> ids. add_special: add BOS/EOS (and what else the vocabulary asks for); parse_special: control
 * tokens written in the text (e.g. "<|im_start|>") become their ids, otherwise they are tokenized as text
 * (user-defined tokens are always matched, as in llama.cpp). Writes at most cap ids to out (out may be NULL
 * when cap is 0); *n_out always gets the full count. BRAID_E_RANGE if cap was too small. Invalid UTF-8 and
 * NUL bytes are tokenized (invalid bytes as U+FFFD or byte tokens, as llama.cpp does). */
BRAID_NODISCARD braid_status tok_tokenize(const tok_vocab *v, const char *text, size_t len, int add_special,
                                          int parse_special, int32_t *out, size_t cap, size_t *n_out);

/* The bytes of one token as llama.cpp's llama_token_to_piece(lstrip = 0) gives them: control and unknown
 * tokens are empty unless special != 0. *piece points into the vocabulary (not NUL-terminated). */
BRAID_NODISCARD braid_status tok_token_piece(const tok_vocab *v, int32_t id, int special, const char **piece,
                                             size_t *len);

/* ids -> text, as llama.cpp's llama_detokenize(remove_special = 0, unparse_special = special): pieces
 * concatenated, the SPM leading space removed, and the vocabulary's clean-up of spaces before punctuation
 * (clean_spaces) applied. *text is allocated (NUL-terminated, release with bd_free). */
BRAID_NODISCARD braid_status tok_detokenize(const tok_vocab *v, const int32_t *ids, size_t n, int special,
                                            char **text, size_t *len);

/* Special ids (-1 when the vocabulary has none). */
int32_t tok_bos(const tok_vocab *v);
int32_t tok_eos(const tok_vocab *v);
int32_t tok_eot(const tok_vocab *v);
int32_t tok_eom(const tok_vocab *v);
int32_t tok_unk(const tok_vocab *v);
int32_t tok_pad(const tok_vocab *v);
int32_t tok_nl(const tok_vocab *v);
int tok_is_eog(const tok_vocab *v, int32_t id);
int tok_add_bos(const tok_vocab *v);
int tok_add_eos(const tok_vocab *v);
/* Raw text of a token (as stored in the file, e.g. "Ġthe"), and its attribute bits (TOK_ATTR_*). */
const char *tok_token_text(const tok_vocab *v, int32_t id, size_t *len);
uint32_t tok_token_attr(const tok_vocab *v, int32_t id);

/* Token attributes, bit values as in llama.cpp's llama_token_attr. */
enum {
    TOK_ATTR_UNDEFINED = 0,
    TOK_ATTR_UNKNOWN = 1 << 0,
    TOK_ATTR_UNUSED = 1 << 1,
    TOK_ATTR_NORMAL = 1 << 2,
    TOK_ATTR_CONTROL = 1 << 3,
    TOK_ATTR_USER_DEFINED = 1 << 4,
    TOK_ATTR_BYTE = 1 << 5,
    TOK_ATTR_LSTRIP = 1 << 7,
    TOK_ATTR_RSTRIP = 1 << 8,
};

#endif
