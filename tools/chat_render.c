/* chat_render.c — see chat_render.h: the conversation as JSON for the template engine, and the rendering. */
#include "chat_render.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool_util.h"

static const char chatml[] =
    "{%- for message in messages -%}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>\\n' }}{%- endfor -%}{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}";

int chat_template_init(chat_template *t, const braid_model *model, const char *path, const char *kwargs) {
    memset(t, 0, sizeof *t);
    t->kwargs = kwargs;
    if (path) return tool_read_file("chat", path, &t->file_text, &t->file_len);
    const char *tmpl;
    size_t len;
    if (braid_model_chat_template(model, NULL, &tmpl, &len) != BRAID_OK) {
        t->chatml = 1;
        fprintf(stderr, "braid chat: the model has no chat template; using ChatML\n");
    }
    return 1;
}

void chat_template_free(chat_template *t) {
    free(t->file_text);
    memset(t, 0, sizeof *t);
}

/* The text of token t with special tokens rendered, or "" (for bos_token / eos_token). */
static void token_text(const braid_model *model, braid_token t, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    if (t >= 0 && braid_token_to_piece(model, t, 1, buf, cap - 1, &n) == BRAID_OK) buf[n < cap - 1 ? n : cap - 1] = 0;
}

int chat_render(const chat_template *t, const braid_model *model, const chat_msg *msgs, size_t n,
                int add_generation_prompt, char **out, size_t *len) {
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        /* JSON strings are UTF-8: a random-weight model's reply may hold half characters (U+FFFD here). */
        char *content = tool_utf8_sanitize(msgs[i].content, strlen(msgs[i].content));
        json_t *m = content ? json_pack("{s:s, s:s}", "role", msgs[i].role, "content", content) : NULL;
        free(content);
        if (!m || json_array_append_new(arr, m) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    char *messages = arr ? json_dumps(arr, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    json_decref(arr);
    if (!messages) {
        fprintf(stderr, "braid chat: out of memory rendering the conversation\n");
        return 0;
    }
    braid_chat_params p = braid_chat_default_params();
    p.add_generation_prompt = add_generation_prompt;
    p.kwargs_json = t->kwargs;
    char bos[256], eos[256];
    char *text = NULL;
    size_t text_len = 0;
    braid_status s;
    if (t->file_text || t->chatml) {
        token_text(model, braid_token_bos(model), bos, sizeof bos);
        token_text(model, braid_token_eos(model), eos, sizeof eos);
        p.bos_token = bos;
        p.eos_token = eos;
        s = t->chatml ? braid_chat_template_render(chatml, sizeof chatml - 1, messages, &p, &text, &text_len)
                      : braid_chat_template_render(t->file_text, t->file_len, messages, &p, &text, &text_len);
    } else {
        s = braid_chat_template_apply(model, NULL, messages, &p, &text, &text_len);
    }
    free(messages);
    if (s != BRAID_OK) {
        fprintf(stderr, "braid chat: the chat template failed: %s: %s\n", braid_status_name(s), braid_last_error());
        return 0;
    }
    /* braid_free releases braid's buffers; the caller frees with free(), so hand over a malloc'd copy. */
    *out = malloc(text_len + 1);
    if (*out) {
        memcpy(*out, text, text_len + 1);
        *len = text_len;
    }
    braid_free(text);
    return *out != NULL;
}
