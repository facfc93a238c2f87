/* render.c — braid_chat_template_render: parses the template and the JSON inputs, binds the variables Hugging
 * Face's apply_chat_template passes (messages, tools, documents, add_generation_prompt, bos_token, eos_token,
 * extra kwargs) and runs the template under the limits below. Everything lives in one arena that is freed
 * before returning; the caller gets one malloc'd copy of the output or nothing. */
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/status.h"
#include "template/tpl.h"

#define ARENA_LIMIT ((size_t)256 << 20) /* bytes of values, tokens and nodes per render */
#define DEFAULT_MAX_OUTPUT ((size_t)16 << 20)
#define STEP_LIMIT 10000000ull           /* statements and expressions evaluated */
#define DEPTH_LIMIT 256                  /* macro calls / recursive loops nested */

braid_chat_params braid_chat_default_params(void) {
    braid_chat_params p = {0};
    p.add_generation_prompt = 1;
    return p;
}

static int reserved(const char *p, size_t n) {
    static const char *const names[] = {"messages", "tools", "documents", "add_generation_prompt", NULL};
    for (size_t i = 0; names[i]; i++)
        if (strlen(names[i]) == n && memcmp(names[i], p, n) == 0) return 1;
    return 0;
}

static braid_status render(tpl_arena *a, const char *tmpl, size_t tmpl_len, const char *messages_json,
                           const braid_chat_params *p, bd_strbuf *out) {
    tpl_tok *toks;
    size_t ntok;
    tpl_template t;
    BD_TRY(tpl_lex(a, tmpl, tmpl_len, &toks, &ntok));
    BD_TRY(tpl_parse(a, tmpl, toks, ntok, &t));

    tv messages, tools = tv_none(), kwargs = tv_none();
    BD_TRY(tpl_json_parse(a, "messages", messages_json, strlen(messages_json), &messages));
    if (p->tools_json) BD_TRY(tpl_json_parse(a, "tools", p->tools_json, strlen(p->tools_json), &tools));
    if (p->kwargs_json) {
        BD_TRY(tpl_json_parse(a, "chat template kwargs", p->kwargs_json, strlen(p->kwargs_json), &kwargs));
        if (kwargs.k != TV_DICT) return bd_error(BRAID_E_INVALID, "chat template kwargs: expected a JSON object");
    }

    tpl_env e = {.a = a, .out = out, .step_limit = STEP_LIMIT, .depth_limit = DEPTH_LIMIT, .src = tmpl};
    e.out_limit = p->max_output ? p->max_output : DEFAULT_MAX_OUTPUT;
    e.now = p->now ? p->now : (int64_t)time(NULL);
    BD_TRY(tpl_frame_new(&e, NULL, &e.globals));
    tpl_frame *g = e.globals;
    const char *bos = p->bos_token ? p->bos_token : "", *eos = p->eos_token ? p->eos_token : "";
    BD_TRY(tpl_frame_set(&e, g, "messages", 8, messages));
    BD_TRY(tpl_frame_set(&e, g, "tools", 5, tools));
    BD_TRY(tpl_frame_set(&e, g, "documents", 9, tv_none()));
    BD_TRY(tpl_frame_set(&e, g, "add_generation_prompt", 21, tv_bool(p->add_generation_prompt)));
    BD_TRY(tpl_frame_set(&e, g, "bos_token", 9, tv_strn(bos, strlen(bos))));
    BD_TRY(tpl_frame_set(&e, g, "eos_token", 9, tv_strn(eos, strlen(eos))));
    if (kwargs.k == TV_DICT)
        for (size_t i = 0; i < kwargs.u.m->n; i++) {
            tv k = kwargs.u.m->k[i];
            if (reserved(k.u.s.p, k.u.s.n))
                return bd_error(BRAID_E_INVALID, "chat template kwargs: '%.*s' is set by braid itself (pass it "
                                "through its own parameter)", (int)k.u.s.n, k.u.s.p);
            BD_TRY(tpl_frame_set(&e, g, k.u.s.p, k.u.s.n, kwargs.u.m->v[i]));
        }
    return tpl_render(&e, &t);
}

braid_status braid_chat_template_render(const char *tmpl, size_t tmpl_len, const char *messages_json,
                                        const braid_chat_params *params, char **out, size_t *out_len) {
    if (!tmpl || !messages_json || !out || !out_len)
        return bd_error(BRAID_E_INVALID, "braid_chat_template_render: NULL argument");
    braid_chat_params p = params ? *params : braid_chat_default_params();
    *out = NULL;
    *out_len = 0;
    tpl_arena a = {.limit = ARENA_LIMIT};
    bd_strbuf b = {0};
    braid_status s = render(&a, tmpl, tmpl_len, messages_json, &p, &b);
    if (s == BRAID_OK) s = bd_strbuf_status(&b);
    if (s == BRAID_OK) {
        *out = bd_strndup(b.p ? b.p : "", b.n);
        if (!*out) s = bd_error(BRAID_E_NOMEM, "braid_chat_template_render: out of memory");
        else *out_len = b.n;
    }
    bd_strbuf_free(&b);
    tpl_arena_free(&a);
    return s;
}
