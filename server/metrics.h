/* metrics.h — the server's counters (under srv.mu) and their Prometheus text for GET /metrics. */
#ifndef BRAID_SERVER_METRICS_H
#define BRAID_SERVER_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "braid.h"

#define SRV_HIST_BUCKETS 12

typedef struct srv_hist {
    uint64_t count[SRV_HIST_BUCKETS + 1]; /* per bucket (the last: +Inf), not cumulative */
    double sum;
    uint64_t n;
} srv_hist;

typedef struct srv_metrics {
    uint64_t requests_ok, requests_4xx, requests_5xx, requests_429;
    uint64_t prompt_tokens, cached_tokens, decoded_prompt_tokens, replayed_tokens, generated_tokens;
    uint64_t decode_steps, cancelled;
    uint64_t drafted_tokens, accepted_tokens, spec_jobs; /* speculative decoding */
    double prompt_seconds, generate_seconds;
    srv_hist ttft, itl, queue;  /* milliseconds */
    int busy_slots, queued, n_slots;
    int cache_on;
    braid_prompt_cache_stats cache; /* the prompt cache's counters, as last published by the scheduler */
} srv_metrics;

void srv_hist_add(srv_hist *h, double ms);
/* The Prometheus text exposition (version 0.0.4) of m; malloc'd, NUL-terminated. NULL on no memory. */
char *srv_metrics_render(const srv_metrics *m, size_t *len);

#endif
