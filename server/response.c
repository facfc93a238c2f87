/* response.c — see response.h. Shapes follow OpenAI's API reference (chat.completion,
 * chat.completion.chunk, text_completion); braid adds "timings" (as llama-server does) with the prompt's
 * reuse: cached, decoded and replayed tokens. */
#include "response.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/utf8.h"
#include "tool_calls.h"

json_t *srv_json_text(const char *s, size_t n) {
    if (!s) return json_string("");
    char *out = malloc(n * 3 + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t l = gguf_utf8_seq((const uint8_t *)s + i, n - i);
        if (l && !(l == 1 && s[i] == 0)) {
            memcpy(out + o, s + i, l), o += l, i += l;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3), o += 3, i++;
        }
    }
    json_t *j = json_stringn(out, o);
    free(out);
    return j;
}

char *srv_error_json(int status, const char *type, const char *param, const char *code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *e = json_object();
    json_object_set_new(e, "message", srv_json_text(msg, strlen(msg)));
    json_object_set_new(e, "type", json_string(type));
    json_object_set_new(e, "param", param && *param ? json_string(param) : json_null());
    json_object_set_new(e, "code", code ? json_string(code) : json_integer(status));
    json_t *root = json_object();
    json_object_set_new(root, "error", e);
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}

static json_t *token_json(const braid_model *model, braid_token t, double lp) {
    char piece[256];
    size_t len = 0;
    if (braid_token_to_piece(model, t, 1, piece, sizeof piece, &len) != BRAID_OK) len = 0;
    if (len > sizeof piece) len = sizeof piece;
    json_t *o = json_object();
    json_object_set_new(o, "token", srv_json_text(piece, len));
    json_object_set_new(o, "logprob", json_real(lp));
    json_t *bytes = json_array();
    for (size_t i = 0; i < len; i++) json_array_append_new(bytes, json_integer((unsigned char)piece[i]));
    json_object_set_new(o, "bytes", bytes);
    return o;
}

json_t *srv_logprob_entry(const braid_model *model, const float *lg, int32_t V, braid_token tok, int top) {
    float mx = lg[0];
    for (int32_t i = 1; i < V; i++)
        if (lg[i] > mx) mx = lg[i];
    double sum = 0;
    for (int32_t i = 0; i < V; i++) sum += exp((double)lg[i] - mx);
    const double lse = mx + log(sum);
    json_t *e = token_json(model, tok, (double)lg[tok] - lse);
    json_t *alts = json_array();
    /* the top alternatives by logit, ties to the lower id (the sampler's order) */
    int32_t ids[SRV_MAX_TOP_LOGPROBS];
    int k = 0;
    for (int32_t i = 0; i < V && top > 0; i++) {
        if (k == top && !(lg[i] > lg[ids[k - 1]])) continue;
        int p = k < top ? k++ : k - 1;
        while (p > 0 && lg[i] > lg[ids[p - 1]]) ids[p] = ids[p - 1], p--;
        ids[p] = i;
    }
    for (int i = 0; i < k; i++) json_array_append_new(alts, token_json(model, ids[i], (double)lg[ids[i]] - lse));
    json_object_set_new(e, "top_logprobs", alts);
    return e;
}

const char *srv_finish_reason(const char *stop) {
    if (!stop) return NULL;
    if (!strcmp(stop, "length") || !strcmp(stop, "context")) return "length";
    return "stop";
}

json_t *srv_usage(const srv_task *t) {
    int64_t completion = 0, cached = 0;
    for (int i = 0; i < t->n_jobs; i++) completion += t->jobs[i].n_tokens;
    cached = t->jobs[0].cached_tokens;
    json_t *u = json_object();
    json_object_set_new(u, "prompt_tokens", json_integer(t->n_toks));
    json_object_set_new(u, "completion_tokens", json_integer(completion));
    json_object_set_new(u, "total_tokens", json_integer(t->n_toks + completion));
    json_t *d = json_object();
    json_object_set_new(d, "cached_tokens", json_integer(cached));
    json_object_set_new(u, "prompt_tokens_details", d);
    return u;
}

json_t *srv_timings(const srv_task *t) {
    const srv_job *j = &t->jobs[0];
    json_t *o = json_object();
    json_object_set_new(o, "cache_n", json_integer(j->cached_tokens));
    json_object_set_new(o, "prompt_n", json_integer(j->st.decoded_tokens));
    json_object_set_new(o, "replayed_n", json_integer(j->st.replayed_tokens));
    json_object_set_new(o, "prompt_ms", json_real(j->st.prompt_ms));
    json_object_set_new(o, "queue_ms", json_real(j->t_started > 0 ? j->t_started - j->t_queued : 0));
    json_object_set_new(o, "ttft_ms", json_real(j->t_first > 0 ? j->t_first - j->t_queued : 0));
    json_object_set_new(o, "predicted_n", json_integer(j->n_tokens));
    json_object_set_new(o, "predicted_ms", json_real(j->st.gen_ms));
    json_object_set_new(o, "predicted_per_second",
                        json_real(j->st.gen_ms > 0 ? j->n_tokens * 1e3 / j->st.gen_ms : 0));
    if (j->spec) {
        /* llama-server's names; the totals of every choice */
        int64_t dn = 0, da = 0;
        for (int i = 0; i < t->n_jobs; i++) dn += t->jobs[i].st.drafted, da += t->jobs[i].st.accepted;
        json_object_set_new(o, "draft_n", json_integer(dn));
        json_object_set_new(o, "draft_n_accepted", json_integer(da));
    }
    return o;
}

/* The legacy completions logprobs object from chat-shaped entries. */
static json_t *completion_logprobs(json_t *entries) {
    json_t *o = json_object(), *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    size_t i, off = 0;
    json_t *e;
    json_array_foreach(entries, i, e) {
        json_t *tk = json_object_get(e, "token");
        json_array_append(toks, tk);
        json_array_append(lps, json_object_get(e, "logprob"));
        json_t *m = json_object();
        size_t k;
        json_t *a;
        json_array_foreach(json_object_get(e, "top_logprobs"), k, a)
            json_object_set(m, json_string_value(json_object_get(a, "token")), json_object_get(a, "logprob"));
        json_array_append_new(tops, m);
        json_array_append_new(offs, json_integer((json_int_t)off));
        off += json_string_length(tk);
    }
    json_object_set_new(o, "tokens", toks);
    json_object_set_new(o, "token_logprobs", lps);
    json_object_set_new(o, "top_logprobs", tops);
    json_object_set_new(o, "text_offset", offs);
    return o;
}

static json_t *envelope(const srv_task *t, const char *object) {
    json_t *r = json_object();
    char id[80];
    snprintf(id, sizeof id, "%s-%s", t->req.kind == SRV_REQ_CHAT ? "chatcmpl" : "cmpl", t->id);
    json_object_set_new(r, "id", json_string(id));
    json_object_set_new(r, "object", json_string(object));
    json_object_set_new(r, "created", json_integer(t->created));
    json_object_set_new(r, "model", json_string(t->s->cfg.model_id));
    json_object_set_new(r, "system_fingerprint", json_string("braid"));
    return r;
}

json_t *srv_response_full(const srv_task *t) {
    const int chat = t->req.kind == SRV_REQ_CHAT;
    json_t *r = envelope(t, chat ? "chat.completion" : "text_completion");
    json_t *choices = json_array();
    for (int i = 0; i < t->n_jobs; i++) {
        const srv_job *j = &t->jobs[i];
        json_t *c = json_object();
        json_object_set_new(c, "index", json_integer(i));
        const char *finish = srv_finish_reason(j->stop);
        if (chat) {
            json_t *m = json_object();
            json_object_set_new(m, "role", json_string("assistant"));
            json_t *calls = t->req.tools_json && t->req.tool_choice != SRV_TOOLS_NONE
                                ? srv_tool_calls_parse(j->text ? j->text : "", j->n_text, t->id, i, NULL)
                                : NULL;
            if (calls) {
                size_t pre = 0;
                srv_tool_calls_parse(j->text, j->n_text, t->id, i, &pre);
                json_object_set_new(m, "content", pre ? srv_json_text(j->text, pre) : json_null());
                json_object_set_new(m, "tool_calls", calls);
                finish = "tool_calls";
            } else {
                json_object_set_new(m, "content", srv_json_text(j->text, j->n_text));
            }
            json_object_set_new(c, "message", m);
            if (t->req.logprobs) {
                json_t *lp = json_object();
                json_object_set(lp, "content", j->logprobs ? j->logprobs : json_array());
                if (!j->logprobs) json_decref(json_object_get(lp, "content"));
                json_object_set_new(lp, "refusal", json_null());
                json_object_set_new(c, "logprobs", lp);
            } else {
                json_object_set_new(c, "logprobs", json_null());
            }
        } else {
            json_object_set_new(c, "text", srv_json_text(j->text, j->n_text));
            json_object_set_new(c, "logprobs", t->req.logprobs && j->logprobs ? completion_logprobs(j->logprobs)
                                                                                : json_null());
        }
        json_object_set_new(c, "finish_reason", json_string(finish ? finish : "stop"));
        json_array_append_new(choices, c);
    }
    json_object_set_new(r, "choices", choices);
    json_object_set_new(r, "usage", srv_usage(t));
    json_object_set_new(r, "timings", srv_timings(t));
    return r;
}

json_t *srv_chunk(const srv_task *t, int idx, const char *role, json_t *content, json_t *tool_calls,
                  const char *finish, json_t *logprobs) {
    const int chat = t->req.kind == SRV_REQ_CHAT;
    json_t *r = envelope(t, chat ? "chat.completion.chunk" : "text_completion");
    json_t *choices = json_array();
    if (idx >= 0) {
        json_t *c = json_object();
        json_object_set_new(c, "index", json_integer(idx));
        if (chat) {
            json_t *d = json_object();
            if (role) json_object_set_new(d, "role", json_string(role));
            if (content) json_object_set(d, "content", content);
            if (tool_calls) json_object_set(d, "tool_calls", tool_calls);
            json_object_set_new(c, "delta", d);
            if (logprobs) {
                json_t *lp = json_object();
                json_object_set(lp, "content", logprobs);
                json_object_set_new(lp, "refusal", json_null());
                json_object_set_new(c, "logprobs", lp);
            } else {
                json_object_set_new(c, "logprobs", json_null());
            }
        } else {
            json_object_set(c, "text", content ? content : json_string(""));
            if (!content) json_decref(json_object_get(c, "text"));
            json_object_set_new(c, "logprobs", logprobs ? completion_logprobs(logprobs) : json_null());
        }
        json_object_set_new(c, "finish_reason", finish ? json_string(finish) : json_null());
        json_array_append_new(choices, c);
    }
    json_object_set_new(r, "choices", choices);
    return r;
}
