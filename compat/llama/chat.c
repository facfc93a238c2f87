/* chat.c — llama_chat_apply_template over braid's Jinja engine. llama.cpp matches the template text against
 * a list of known formats and formats by hand; braid renders the template itself, exactly as Python Jinja2
 * would (braid_chat_template_render), so a template llama.cpp does not know works too. A NULL template or the
 * name "chatml" means ChatML, as in llama.cpp. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

static const char chatml[] =
    "{%- for message in messages -%}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>\\n' }}{%- endfor -%}{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}";

/* Appends s as a JSON string (quoted, escaped) to *buf; returns 0 on allocation failure. */
static int put_json_string(char **buf, size_t *len, size_t *cap, const char *s) {
    size_t need = *len + strlen(s) * 6 + 3;
    if (need > *cap) {
        size_t c = need * 2;
        char *p = realloc(*buf, c);
        if (!p) return 0;
        *buf = p;
        *cap = c;
    }
    char *o = *buf + *len;
    *o++ = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            *o++ = '\\';
            *o++ = (char)*p;
        } else if (*p < 0x20) {
            o += sprintf(o, "\\u%04x", *p);
        } else {
            *o++ = (char)*p;
        }
    }
    *o++ = '"';
    *len = (size_t)(o - *buf);
    return 1;
}

static int put_raw(char **buf, size_t *len, size_t *cap, const char *s) {
    size_t n = strlen(s);
    if (*len + n + 1 > *cap) {
        size_t c = (*len + n + 1) * 2;
        char *p = realloc(*buf, c);
        if (!p) return 0;
        *buf = p;
        *cap = c;
    }
    memcpy(*buf + *len, s, n + 1);
    *len += n;
    return 1;
}

int32_t llama_chat_apply_template(const char *tmpl, const struct llama_chat_message *chat, size_t n_msg, bool add_ass,
                                  char *buf, int32_t length) {
    if (!tmpl || !strcmp(tmpl, "chatml")) tmpl = chatml;
    char *json = NULL;
    size_t len = 0, cap = 0;
    int ok = put_raw(&json, &len, &cap, "[");
    for (size_t i = 0; ok && i < n_msg; i++) {
        ok = put_raw(&json, &len, &cap, i ? ",{\"role\":" : "{\"role\":") &&
             put_json_string(&json, &len, &cap, chat[i].role ? chat[i].role : "") &&
             put_raw(&json, &len, &cap, ",\"content\":") &&
             put_json_string(&json, &len, &cap, chat[i].content ? chat[i].content : "") &&
             put_raw(&json, &len, &cap, "}");
    }
    ok = ok && put_raw(&json, &len, &cap, "]");
    if (!ok) {
        free(json);
        return -1;
    }
    braid_chat_params p = braid_chat_default_params();
    p.add_generation_prompt = add_ass;
    char *out = NULL;
    size_t out_len = 0;
    braid_status st = braid_chat_template_render(tmpl, strlen(tmpl), json, &p, &out, &out_len);
    free(json);
    if (st != BRAID_OK) {
        shim_log_braid("llama_chat_apply_template", st);
        return -1;
    }
    if (out_len > (size_t)INT32_MAX) {
        braid_free(out);
        return -1;
    }
    if (buf && length > 0) memcpy(buf, out, out_len < (size_t)length ? out_len : (size_t)length);
    braid_free(out);
    return (int32_t)out_len;
}

int32_t llama_chat_builtin_templates(const char **output, size_t len) {
    if (output && len > 0) output[0] = "chatml";
    return 1;
}
