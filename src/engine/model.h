/* model.h — struct braid_model: a loaded GGUF (mapped), its tokenizer, and the architecture's hyperparameters
 * and bound weights. Immutable after braid_model_load, so one model can serve many contexts and threads. */
#ifndef BRAID_ENGINE_MODEL_H
#define BRAID_ENGINE_MODEL_H

#include <stdint.h>

#include "braid.h"
#include "gguf/gguf.h"
#include "models/arch.h"

struct tok_vocab;

struct braid_model {
    gguf_file *gguf;         /* owned; weights point into its mapping (or into file_copy) */
    void *file_copy;         /* owned (bd_free): the whole file when loaded with use_mmap = 0, else NULL */
    struct tok_vocab *vocab; /* owned; NULL until the tokenizer loads it */
    char arch_name[32];      /* general.architecture */
    const bd_arch *arch;     /* NULL for a vocab-only load */
    void *arch_data;         /* the architecture's hparams and weights (arch->free_data) */
    bd_mem_layout layout;    /* what memory a context of this model needs */
    int32_t n_vocab;
    int32_t n_embd;
    uint64_t weights_digest; /* hash of a few KiB of every tensor's data (see model_fingerprint) */
    uint64_t fingerprint;    /* hash of arch, hparams, tensor names/shapes/types and weights_digest (state files
                              * check it) */
};

/* Vocabulary size from the GGUF: length of tokenizer.ggml.tokens, or <arch>.vocab_size for model "none". */
BRAID_NODISCARD braid_status bd_model_n_vocab_from_gguf(const gguf_file *f, const char *arch, int32_t *n_vocab);
/* Binds the architecture's weights and computes the fingerprint (called by braid_model_load). */
BRAID_NODISCARD braid_status bd_model_load_weights(braid_model *m);

#endif
