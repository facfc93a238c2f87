/* fuzz_template.c — libFuzzer target for the chat-template interpreter: any bytes as a template (unbalanced
 * tags, bad literals, deep nesting, loops that never end, huge outputs) must lex, parse and render without a
 * crash or sanitizer report; failures must come back as a status with a message. Input: the template, then
 * optionally a NUL byte and a messages JSON document (else a fixed two-message conversation). The render
 * runs under small step and output limits so that each input stays fast. */
#include <stdint.h>
#include <string.h>

#include "base/status.h"
#include "template/tpl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *def_messages =
        "[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"user\",\"content\":\"hi \\u00e9\","
        "\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":{\"a\":[1,2.5,null,true]}}}]}]";
    const char *src = (const char *)data;
    size_t tl = size;
    const char *msgs = def_messages;
    size_t ml = strlen(def_messages);
    const uint8_t *nul = memchr(data, 0, size);
    if (nul) {
        tl = (size_t)(nul - data);
        msgs = (const char *)nul + 1;
        ml = size - tl - 1;
    }
    tpl_arena a = {.limit = (size_t)64 << 20};
    bd_strbuf out = {0};
    tpl_tok *toks;
    size_t ntok;
    tpl_template t;
    tv messages;
    if (tpl_lex(&a, src, tl, &toks, &ntok) == BRAID_OK && tpl_parse(&a, src, toks, ntok, &t) == BRAID_OK &&
        tpl_json_parse(&a, "messages", msgs, ml, &messages) == BRAID_OK) {
        tpl_env e = {.a = &a, .out = &out, .out_limit = 1 << 20, .step_limit = 200000, .depth_limit = 64,
                     .now = 1767225600, .src = src};
        if (tpl_frame_new(&e, NULL, &e.globals) == BRAID_OK &&
            tpl_frame_set(&e, e.globals, "messages", 8, messages) == BRAID_OK &&
            tpl_frame_set(&e, e.globals, "add_generation_prompt", 21, tv_bool(1)) == BRAID_OK &&
            tpl_frame_set(&e, e.globals, "bos_token", 9, tv_cstr("<s>")) == BRAID_OK) {
            braid_status s = tpl_render(&e, &t);
            if (s != BRAID_OK && braid_last_error()[0] == 0) __builtin_trap(); /* a failure without a reason */
        }
    }
    bd_strbuf_free(&out);
    tpl_arena_free(&a);
    return 0;
}
