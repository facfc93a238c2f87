/* agent_traffic.h — agent-style chat traffic against one context, for the prompt cache's test (a count) and
 * its benchmark (bench/agent_cache.c: counts and times).
 *
 * n_conv conversations share one system prompt; each of n_turns turns re-sends the whole rendered history
 * plus a new user message, then "generates" a reply (reasoning span + answer, fixed pseudo-random tokens,
 * decoded one token at a time as a real generation would). Conversations use n_slots sequences round-robin,
 * so a slot usually last held another conversation. Even conversations are re-rendered the way chat templates
 * do it (earlier replies lose their reasoning span, so each prompt leaves the previous reply at its start);
 * odd ones keep it (the history is a pure extension). Every branch_every-th turn of conversations 1, 5, ...
 * the user edits an earlier message (the history returns to that turn with a new text): a branch point deep
 * inside the cached history.
 *
 * Policies, all on braid's engine so that only the reuse policy differs:
 *   AT_BRAID     braid_prompt_cache: longest prefix across all conversations, checkpoints at message starts,
 *                prompt and reply ends, branch points and every checkpoint_interval;
 *   AT_OFF       no reuse: every prompt is computed from token 0;
 *   AT_LLAMA     llama-server's policy as serving.md §2.3-2.4 describes it, given an unlimited RAM cache
 *                (every conversation's slot state kept with its checkpoints): reuse of the conversation's own
 *                previous state only; checkpoints at the last user message start and at end-4 and
 *                end-(4+n_ubatch) of each prompt, none during generation, no rollback buffer; a prompt that
 *                leaves the cached state restores the newest checkpoint at or before the divergence, or
 *                recomputes from 0.
 * "New" tokens of a request: its length minus the longest prefix it shares with anything any conversation
 * sent or decoded before (what no policy can avoid computing). */
#ifndef BRAID_TESTKIT_AGENT_TRAFFIC_H
#define BRAID_TESTKIT_AGENT_TRAFFIC_H

#include <stdint.h>

#include "braid.h"

typedef enum { AT_BRAID = 0, AT_OFF, AT_LLAMA } at_policy;

typedef struct at_params {
    int32_t n_conv, n_turns, n_slots;
    int32_t sys_len;                 /* shared system prompt */
    int32_t user_min, user_max;      /* user message length range */
    int32_t reason_len, answer_len;  /* reply = reasoning span + answer */
    int32_t branch_every;            /* 0: no branches */
    uint32_t seed;
    uint32_t n_ctx, n_batch, n_threads, checkpoint_interval;
    uint64_t cache_bytes;            /* AT_BRAID's budget */
} at_params;

typedef struct at_result {
    int32_t requests, hits;          /* hits: requests that reused > 0 tokens */
    int64_t sent, computed, new_tokens, cached, replayed;
    double *ttft_ms;                 /* [requests], malloc'd; the caller frees */
    braid_prompt_cache_stats cache;  /* AT_BRAID: the cache's counters at the end */
} at_result;

void at_params_default(at_params *p);
/* Runs the traffic on model m with policy pol; r is filled (r->ttft_ms allocated). */
braid_status at_run(braid_model *m, const at_params *p, at_policy pol, at_result *r);
const char *at_policy_name(at_policy pol);

#endif
