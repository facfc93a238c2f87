/* chat_template.c — the model side of chat templates: the template text from the GGUF metadata
 * (tokenizer.chat_template or tokenizer.chat_template.NAME) and the bos/eos token texts the template gets,
 * handed to the renderer in src/template/. */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "engine/model.h"

braid_status braid_model_chat_template(const braid_model *model, const char *name, const char **tmpl,
                                       size_t *len) {
    if (!model || !tmpl || !len) return bd_error(BRAID_E_INVALID, "braid_model_chat_template: NULL argument");
    char key[256];
    if (name && snprintf(key, sizeof key, "tokenizer.chat_template.%s", name) >= (int)sizeof key)
        return bd_error(BRAID_E_INVALID, "braid_model_chat_template: template name too long");
    if (!name) snprintf(key, sizeof key, "tokenizer.chat_template");
    const gguf_value *v = gguf_find(model->gguf, key);
    if (!v) return bd_error(BRAID_E_RANGE, "the model has no chat template ('%s' is absent)", key);
    if (v->type != GGUF_TYPE_STRING) return bd_error(BRAID_E_FORMAT, "gguf: '%s' is not a string", key);
    *tmpl = v->str.ptr;
    *len = (size_t)v->str.len;
    return BRAID_OK;
}

/* The text of special token t ("" when the vocabulary has none); *out is allocated. */
static braid_status token_text(const braid_model *model, braid_token t, char **out) {
    *out = NULL;
    if (t < 0) {
        *out = bd_strdup("");
        return *out ? BRAID_OK : bd_error(BRAID_E_NOMEM, "out of memory");
    }
    size_t n = 0;
    braid_status s = braid_token_to_piece(model, t, 1, NULL, 0, &n);
    if (s != BRAID_OK && s != BRAID_E_RANGE) return s;
    char *buf = bd_malloc(n + 1);
    if (!buf) return bd_error(BRAID_E_NOMEM, "out of memory");
    s = braid_token_to_piece(model, t, 1, buf, n, &n);
    if (s != BRAID_OK) { bd_free(buf); return s; }
    buf[n] = 0;
    *out = buf;
    return BRAID_OK;
}

braid_status braid_chat_template_apply(const braid_model *model, const char *name, const char *messages_json,
                                       const braid_chat_params *params, char **out, size_t *out_len) {
    if (!model || !messages_json || !out || !out_len)
        return bd_error(BRAID_E_INVALID, "braid_chat_template_apply: NULL argument");
    const char *tmpl;
    size_t len;
    BD_TRY(braid_model_chat_template(model, name, &tmpl, &len));
    braid_chat_params p = params ? *params : braid_chat_default_params();
    char *bos = NULL, *eos = NULL;
    braid_status s = BRAID_OK;
    if (!p.bos_token) { s = token_text(model, braid_token_bos(model), &bos); p.bos_token = bos; }
    if (s == BRAID_OK && !p.eos_token) { s = token_text(model, braid_token_eos(model), &eos); p.eos_token = eos; }
    if (s == BRAID_OK) s = braid_chat_template_render(tmpl, len, messages_json, &p, out, out_len);
    bd_free(bos);
    bd_free(eos);
    return s;
}
