/* chat_render.h — turns a conversation into the prompt text a chat model expects.
 *
 * This is the one place `braid chat` renders; until braid renders the GGUF's own tokenizer.chat_template it
 * writes ChatML (<|im_start|>role\ncontent<|im_end|>\n ..., the format of Qwen's models), which is what the
 * models braid runs were trained on. */
#ifndef BRAID_TOOLS_CHAT_RENDER_H
#define BRAID_TOOLS_CHAT_RENDER_H

#include <stddef.h>

#include "braid.h"

typedef struct chat_msg {
    char *role;    /* "system", "user", "assistant" */
    char *content;
} chat_msg;

/* The prompt for msgs[0..n) (and the opening of the assistant's reply if add_generation_prompt). *out is
 * malloc'd (caller frees). 0 on failure (reported on stderr). */
int chat_render(const braid_model *model, const chat_msg *msgs, size_t n, int add_generation_prompt, char **out,
                size_t *len);

#endif
