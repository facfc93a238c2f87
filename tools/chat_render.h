/* chat_render.h — turns a conversation into the prompt text a chat model expects: the one place `braid chat`
 * renders. The template is the GGUF's tokenizer.chat_template (or --chat-template-file), rendered by braid's
 * Jinja engine exactly as Python Jinja2 renders it; a file without a template gets ChatML
 * (<|im_start|>role\ncontent<|im_end|>\n ...), the format of Qwen's models, with a note on stderr. */
#ifndef BRAID_TOOLS_CHAT_RENDER_H
#define BRAID_TOOLS_CHAT_RENDER_H

#include <stddef.h>

#include "braid.h"

typedef struct chat_msg {
    char *role;    /* "system", "user", "assistant" */
    char *content;
} chat_msg;

typedef struct chat_template {
    char *file_text;    /* --chat-template-file's contents (owned), or NULL: the model's template */
    size_t file_len;
    int chatml;         /* 1: neither given nor in the model: ChatML */
    const char *kwargs; /* --chat-template-kwargs: a JSON object of extra template variables, or NULL */
} chat_template;

/* Picks the template: the file if path is not NULL, else the model's, else ChatML. 0 on failure (reported). */
int chat_template_init(chat_template *t, const braid_model *model, const char *path, const char *kwargs);
void chat_template_free(chat_template *t);

/* The prompt for msgs[0..n) (and the opening of the assistant's reply if add_generation_prompt). *out is
 * malloc'd (caller frees). 0 on failure (the template's reason on stderr). */
int chat_render(const chat_template *t, const braid_model *model, const chat_msg *msgs, size_t n,
                int add_generation_prompt, char **out, size_t *len);

#endif
