/* tool_calls.h — tool calls parsed out of a model's reply text, for the families braid runs:
 *   hermes / Qwen3:   <tool_call>{"name": ..., "arguments": {...}}</tool_call>
 *   Qwen3.5 / Qwen3-Coder XML: <tool_call><function=NAME><parameter=P>VALUE</parameter>...</function></tool_call>
 *   Nemotron:         <TOOLCALL>[{"name": ..., "arguments": {...}}, ...]</TOOLCALL>
 *   Granite:          <|tool_call|>[{"name": ..., "arguments": {...}}, ...]
 *   LFM2:             <|tool_call_start|>[name(arg="value", n=1), ...]<|tool_call_end|>
 * Markers that are special tokens reach the text only when the vocabulary does not mark them special (the
 * generation loop renders text without special tokens). */
#ifndef BRAID_SERVER_TOOL_CALLS_H
#define BRAID_SERVER_TOOL_CALLS_H

#include <jansson.h>
#include <stddef.h>

/* OpenAI tool_calls ([{id, type: "function", function: {name, arguments: JSON text}}]) found in text[0..n),
 * or NULL if it holds none that parse. *content_len (if not NULL) gets the length of the text before the
 * first call (the reply's content). Ids are "call_<task>_<choice>_<k>". */
json_t *srv_tool_calls_parse(const char *text, size_t n, const char *task_id, int choice, size_t *content_len);

#endif
