/* server.h — `braid serve`, the OpenAI-compatible HTTP server: its configuration and the calls the braid
 * command makes. The server is built apart from libbraid (it alone links libmicrohttpd and jansson); it uses
 * only braid.h. Its files, one job each:
 *   http.c       libmicrohttpd plumbing: routes, bodies and their limit, the API key, SSE, error replies
 *   handlers.c   what each endpoint does with a validated request
 *   request.c    JSON body -> validated request (the fuzz target)
 *   response.c   the OpenAI response shapes (completions, chunks, errors, usage, logprobs)
 *   sched.c      slots, the bounded queue and the scheduler thread (continuous batching on braid_gen_step)
 *   reuse.c      what a new request reuses of the memory (the prompt cache), and which slot it takes
 *   slot_ops.c   POST /slots/{id}?action=save|restore|erase and GET /cache
 *   tool_calls.c tool calls parsed out of the model's text
 *   metrics.c    counters and /metrics (Prometheus text)
 *   webui.c      the chat page at / (server/webui/, compiled in by cmake/embed.cmake) */
#ifndef BRAID_SERVER_SERVER_H
#define BRAID_SERVER_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "braid.h"

#define SRV_MAX_KEYS 16
#define SRV_MAX_ALIAS 8

typedef struct srv_config {
    const char *host;          /* default 127.0.0.1 */
    int port;                  /* default 8080; 0: any free port (srv_port tells which) */
    const char *api_keys[SRV_MAX_KEYS];
    int n_keys;                /* 0: no key needed */
    int timeout_s;             /* idle connection timeout (default 600) */
    int parallel;              /* slots (default 4) */
    int32_t ctx_per_slot;      /* tokens a slot's sequence may hold (prompt + reply) */
    int queue_max;             /* requests waiting for a slot before 429 (default 64) */
    size_t body_max;           /* bytes (default 8 MiB) */
    const char *model_id;      /* the id /v1/models lists */
    const char *aliases[SRV_MAX_ALIAS];
    int n_alias;
    int verbose;
    /* prompt cache (--cache-ram): one byte budget for cached cells, checkpoints and logits; 0: off. Its
     * entries live in sequences parallel .. parallel + cache_entries - 1 of the context. */
    uint64_t cache_ram;
    int cache_entries;
    const char *slot_save_path; /* directory of POST /slots/{id}?action=save|restore files; NULL: off */
    /* speculative decoding: the default of requests that do not say (a draft model if draft_ctx, else n-gram
     * lookup if lookup_n > 0, else none), each request may choose its own ("speculative" in request.h).
     * draft_ctx (not owned) holds one sequence per slot: slot i drafts in its sequence i. */
    braid_context *draft_ctx;
    int32_t draft_n;            /* tokens drafted per step by default (--draft-n) */
    int32_t draft_n_max;        /* the most a request may ask: the context's n_rollback - 1 */
    int32_t lookup_n;           /* --lookup: the longest n-gram lookup matches; 0: lookup is not the default */
    int mtp_ok;                 /* the model has an MTP head: requests may ask for mode "mtp" */
    int mtp;                    /* --mtp: MTP drafting is the default (one draft per step unless --draft-n) */
    int32_t mtp_n;              /* tokens the MTP head drafts per step by default */
    /* a vision projector checked against the model (not owned), or NULL: chat requests with image_url parts
     * are refused */
    braid_mmproj *mmproj;
} srv_config;

void srv_config_default(srv_config *c);

typedef struct srv srv;

/* Starts the server over model and ctx (ctx has parallel sequences of ctx_per_slot tokens each, plus
 * cache_entries more for the prompt cache when cache_ram > 0; neither is owned). 0 on failure (reported on stderr). */
int srv_start(const srv_config *cfg, braid_model *model, braid_context *ctx, srv **out);
/* The port it listens on (the one chosen when cfg->port was 0). */
int srv_port(const srv *s);
/* Stops accepting, cancels what runs, joins the threads and frees everything. */
void srv_stop(srv *s);

#endif
