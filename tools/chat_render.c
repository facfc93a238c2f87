/* chat_render.c — see chat_render.h: the ChatML rendering. */
#include "chat_render.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int chat_render(const braid_model *model, const chat_msg *msgs, size_t n, int add_generation_prompt, char **out,
                size_t *len) {
    (void)model;
    size_t cap = 64;
    for (size_t i = 0; i < n; i++) cap += strlen(msgs[i].role) + strlen(msgs[i].content) + 32;
    char *buf = malloc(cap);
    if (!buf) {
        fprintf(stderr, "braid chat: out of memory rendering the conversation\n");
        return 0;
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i++)
        o += (size_t)snprintf(buf + o, cap - o, "<|im_start|>%s\n%s<|im_end|>\n", msgs[i].role, msgs[i].content);
    if (add_generation_prompt) o += (size_t)snprintf(buf + o, cap - o, "<|im_start|>assistant\n");
    *out = buf;
    *len = o;
    return 1;
}
