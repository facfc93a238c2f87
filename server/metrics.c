/* metrics.c — Prometheus text for the server's counters. Names are prefixed braid_; histograms are in
 * milliseconds with fixed buckets (TTFT, inter-token latency, time in the queue), which a dashboard can
 * aggregate across workers (llama-server has no histograms, serving.md §1.6). */
#include "metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static const double bucket_ms[SRV_HIST_BUCKETS] = {1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 10000};

void srv_hist_add(srv_hist *h, double ms) {
    int b = 0;
    while (b < SRV_HIST_BUCKETS && ms > bucket_ms[b]) b++;
    h->count[b]++;
    h->sum += ms;
    h->n++;
}

typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} buf;

static void put(buf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        size_t nc = b->cap * 2 + (size_t)k;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
}

static void counter(buf *b, const char *name, const char *help, double v) {
    put(b, "# HELP braid_%s %s\n# TYPE braid_%s counter\nbraid_%s %.17g\n", name, help, name, name, v);
}

static void gauge(buf *b, const char *name, const char *help, double v) {
    put(b, "# HELP braid_%s %s\n# TYPE braid_%s gauge\nbraid_%s %.17g\n", name, help, name, name, v);
}

static void hist(buf *b, const char *name, const char *help, const srv_hist *h) {
    put(b, "# HELP braid_%s %s\n# TYPE braid_%s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int i = 0; i < SRV_HIST_BUCKETS; i++) {
        cum += h->count[i];
        put(b, "braid_%s_bucket{le=\"%g\"} %llu\n", name, bucket_ms[i], (unsigned long long)cum);
    }
    cum += h->count[SRV_HIST_BUCKETS];
    put(b, "braid_%s_bucket{le=\"+Inf\"} %llu\nbraid_%s_sum %.17g\nbraid_%s_count %llu\n", name,
        (unsigned long long)cum, name, h->sum, name, (unsigned long long)h->n);
}

char *srv_metrics_render(const srv_metrics *m, size_t *len) {
    buf b = {malloc(4096), 0, 4096, 0};
    if (!b.p) return NULL;
    counter(&b, "requests_ok_total", "Requests answered with 2xx.", (double)m->requests_ok);
    counter(&b, "requests_client_error_total", "Requests answered with 4xx (429 included).", (double)m->requests_4xx);
    counter(&b, "requests_rejected_total", "Requests refused with 429 (queue full).", (double)m->requests_429);
    counter(&b, "requests_server_error_total", "Requests answered with 5xx.", (double)m->requests_5xx);
    counter(&b, "requests_cancelled_total", "Jobs cancelled (client gone, timeout).", (double)m->cancelled);
    counter(&b, "prompt_tokens_total", "Prompt tokens of finished jobs (cached included).", (double)m->prompt_tokens);
    counter(&b, "prompt_tokens_cached_total", "Prompt tokens the memory already held.", (double)m->cached_tokens);
    counter(&b, "prompt_tokens_decoded_total", "Prompt tokens computed (new plus replayed).",
            (double)m->decoded_prompt_tokens);
    counter(&b, "prompt_tokens_replayed_total", "Tokens replayed to reach a reused prefix.", (double)m->replayed_tokens);
    counter(&b, "tokens_generated_total", "Tokens generated.", (double)m->generated_tokens);
    counter(&b, "prompt_seconds_total", "Time spent on prompts.", m->prompt_seconds);
    counter(&b, "generate_seconds_total", "Time spent generating.", m->generate_seconds);
    counter(&b, "decode_steps_total", "Batched decode steps of the scheduler.", (double)m->decode_steps);
    counter(&b, "spec_requests_total", "Jobs decoded speculatively (draft model or lookup).", (double)m->spec_jobs);
    counter(&b, "spec_draft_tokens_total", "Tokens drafted for verification.", (double)m->drafted_tokens);
    counter(&b, "spec_accepted_tokens_total", "Of those, tokens the model accepted.", (double)m->accepted_tokens);
    gauge(&b, "slots", "Slots (parallel sequences).", m->n_slots);
    gauge(&b, "slots_busy", "Slots running a job.", m->busy_slots);
    gauge(&b, "queue_length", "Jobs waiting for a slot.", m->queued);
    if (m->cache_on) {
        const braid_prompt_cache_stats *c = &m->cache;
        counter(&b, "prompt_cache_lookups_total", "Prompts served through the prompt cache.", (double)c->lookups);
        counter(&b, "prompt_cache_hits_total", "Of those, prompts that reused a prefix.", (double)c->hits);
        counter(&b, "prompt_cache_reused_tokens_total", "Prompt tokens kept from the cache or the slot.",
                (double)c->cached_tokens);
        counter(&b, "prompt_cache_replayed_tokens_total", "Tokens recomputed from checkpoints to reach them.",
                (double)c->replayed_tokens);
        counter(&b, "prompt_cache_stores_total", "Prompts and replies stored.", (double)c->stores);
        counter(&b, "prompt_cache_evictions_total", "Entries evicted (budget, cells, entry count).",
                (double)c->evictions);
        gauge(&b, "prompt_cache_bytes", "Bytes held: cells (each once), checkpoints, logits.", (double)c->bytes);
        gauge(&b, "prompt_cache_entries", "Cached prompts and replies.", c->entries);
        gauge(&b, "prompt_cache_cells", "Attention cells held by the cache.", c->cells);
        gauge(&b, "prompt_cache_checkpoints", "Recurrent checkpoints held by the cache.", c->checkpoints);
    }
    hist(&b, "time_to_first_token_ms", "Time from arrival to the first token.", &m->ttft);
    hist(&b, "inter_token_ms", "Mean time between tokens of a job.", &m->itl);
    hist(&b, "queue_ms", "Time a job waited for a slot.", &m->queue);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *len = b.n;
    return b.p;
}
