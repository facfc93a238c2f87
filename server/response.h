/* response.h — the OpenAI response shapes: errors, chat completions and their stream chunks, text
 * completions, usage (with prompt_tokens_details.cached_tokens) and braid's timings, log-probabilities. */
#ifndef BRAID_SERVER_RESPONSE_H
#define BRAID_SERVER_RESPONSE_H

#include <jansson.h>

#include "srv_impl.h"

/* A JSON string of s[0..n) with every byte that is not well-formed UTF-8 replaced by U+FFFD (a model can
 * emit half characters; JSON strings must be valid). */
json_t *srv_json_text(const char *s, size_t n);
/* {"error": {"message", "type", "param", "code"}} as a malloc'd string. code NULL: the HTTP status. */
char *srv_error_json(int status, const char *type, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* The chat-shaped log-probability of token tok under logits (log-softmax, in double), with its top
 * alternatives: {"token", "logprob", "bytes", "top_logprobs": [...]}. */
json_t *srv_logprob_entry(const braid_model *model, const float *logits, int32_t n_vocab, braid_token tok, int top);

/* OpenAI's finish_reason for braid's stop reason ("eog"/"stop" -> stop, "length"/"context" -> length). */
const char *srv_finish_reason(const char *stop);
/* usage + timings of a finished task (under srv.mu). */
json_t *srv_usage(const srv_task *t);
json_t *srv_timings(const srv_task *t);
/* The whole non-streamed response of a finished task (under srv.mu). */
json_t *srv_response_full(const srv_task *t);
/* One streamed chunk: for choice idx, a delta (content text and/or role, tool_calls) and/or finish_reason;
 * logprobs entries if any. Chat: chat.completion.chunk; completion: text_completion. Any argument may be
 * NULL to leave it out; content, tool_calls and logprobs are borrowed (the caller keeps its reference). */
json_t *srv_chunk(const srv_task *t, int idx, const char *role, json_t *content, json_t *tool_calls,
                  const char *finish, json_t *logprobs);

#endif
