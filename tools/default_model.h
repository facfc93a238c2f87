/* default_model.h — the built-in models the braid commands use when no -m is given: the small qwen35 hybrid
 * trained by train/train.py and committed in models/, and its draft model. One lookup for every command (run,
 * perplexity, bench, and chat / serve when they come), so they all agree on what "the default" is. */
#ifndef BRAID_TOOLS_DEFAULT_MODEL_H
#define BRAID_TOOLS_DEFAULT_MODEL_H

#include <stddef.h>

#define BRAID_DEFAULT_MODEL_FILE "kjv-qwen35-q8_0.gguf"
#define BRAID_DEFAULT_DRAFT_FILE "kjv-qwen35-draft-q8_0.gguf"

/* Writes the path of the default model into buf (cap bytes). Looks in $BRAID_MODELS_DIR, then the source
 * tree's models/ the command was built from, then models/ and share/braid/models/ beside the executable's
 * directory. Returns 1 on success, 0 after reporting on stderr where it looked. */
int tool_default_model_path(char *buf, size_t cap);

/* The same for the default model's draft (same vocabulary, ~10x smaller), for speculative decoding. */
int tool_default_draft_path(char *buf, size_t cap);

#endif
