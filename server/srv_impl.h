/* srv_impl.h — the server's inside, shared by its files (see server.h for the map): a request becomes a task
 * of n jobs (one per choice); jobs wait in a bounded FIFO queue, the scheduler thread gives each a slot (one
 * sequence of the context) and advances every slot's generator in one decode per step; the HTTP thread of the
 * request reads what the job produced, under the server's one mutex.
 *
 * Ownership: a task is owned by its references — one held by the HTTP side until it has answered (or the
 * client went away), one per job until the scheduler retired it; the last release frees it. */
#ifndef BRAID_SERVER_SRV_IMPL_H
#define BRAID_SERVER_SRV_IMPL_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>

#include "metrics.h"
#include "request.h"
#include "server.h"

typedef struct srv_task srv_task;

typedef struct srv_job {
    srv_task *task;
    int index;             /* the choice's index */
    braid_gen *g;          /* scheduler thread only */
    int slot;              /* -1 while queued */
    uint64_t admitted;     /* admission order: earlier jobs' prompts go first in a step */
    int prefill;           /* 1 while braid_gen_prefill decodes its prompt with images (scheduler thread) */
    /* output, under srv.mu */
    char *text;
    size_t n_text, cap_text;
    json_t *logprobs;      /* chat-shaped entries {token, logprob, bytes, top_logprobs}, or NULL */
    int done;
    const char *stop;      /* braid's stop reason once done ("eog", "length", "stop", "context", "cancelled", "error") */
    char err[256];         /* stop "error": why */
    braid_gen_stats st;
    int32_t cached_tokens; /* what srv_reuse_prepare reported; once done, of those the ones not recomputed */
    int32_t n_tokens;      /* tokens emitted */
    int spec;              /* 1: decoded speculatively (a draft model or lookup) */
    double t_queued, t_started, t_first;
    struct srv_job *next;  /* queue link */
} srv_job;

struct srv_task {
    srv *s;
    srv_request req;
    braid_token *toks;     /* the prompt; with images, each image row is an image token (srv_image_token) */
    int32_t n_toks;
    /* a prompt with images: its parts (text parts point into toks, image parts into rows), else n_parts 0.
     * Such a prompt is decoded by braid_gen_begin_parts (outside the shared batch) */
    braid_prompt_part *parts;
    int32_t n_parts;
    float *rows[SRV_MAX_IMAGES]; /* braid_free */
    int32_t n_predict;     /* most tokens per choice: max_tokens capped by the slot's context */
    int refs;              /* under srv.mu */
    atomic_int cancelled;  /* set by the HTTP side (client gone, timeout) or srv_stop */
    char id[48];
    int64_t created;
    int n_jobs;
    srv_job *jobs;
    braid_json_constraint *json; /* response_format json_object / json_schema (owned), or NULL */
};

/* A slot operation (POST /slots/{id}), run by the scheduler thread while the slot is idle (slot_ops.c). */
enum { SRV_OP_SAVE = 0, SRV_OP_RESTORE, SRV_OP_ERASE };
typedef struct srv_slot_op {
    int pending, done, busy; /* busy: the slot was processing a request (nothing done) */
    int slot, kind;
    char path[4096];
    braid_status st;
    char err[320];
    int32_t n_tokens;        /* saved / restored / erased */
    size_t bytes;
    double ms;
} srv_slot_op;

typedef struct srv_slot {
    int id;
    srv_job *job;          /* NULL: idle */
    braid_token *toks;     /* what the slot's sequence holds (scheduler thread) */
    int32_t n_toks, cap_toks;
    int64_t n_requests;
} srv_slot;

struct srv {
    srv_config cfg;
    braid_model *model;
    braid_context *ctx;
    int32_t n_vocab;
    struct MHD_Daemon *daemon;
    int port;
    pthread_t sched;
    int sched_started;
    pthread_mutex_t mu;
    pthread_cond_t cv_work; /* the scheduler waits here for jobs */
    pthread_cond_t cv_out;  /* HTTP threads wait here for output */
    int stopping;
    srv_job *q_head, *q_tail;
    int q_len;
    srv_slot *slots;
    uint64_t n_admitted;
    srv_metrics m;
    double t_start;
    braid_prompt_cache *cache;   /* NULL: --cache-ram 0 (scheduler thread only) */
    uint64_t *cache_hashes;      /* snapshot for GET /cache (under mu; braid_free) */
    size_t n_cache_hashes;
    srv_slot_op op;              /* one slot operation at a time (under mu) */
    /* cfg.mmproj encodes on the HTTP threads, one image at a time: the projector's scratch and its cache
     * of rows are not shared between threads */
    pthread_mutex_t mm_mu;
    char *keys[SRV_MAX_KEYS];
};

double srv_now_ms(void);

/* The token that stands for row `row` of an image with content hash h in the slots' token lists (what a slot
 * holds, compared to pick the slot of a follow-up turn): negative, so never a vocabulary token nor the -1
 * the generators use for rows; the same image gives the same run of tokens, another image (almost surely) a
 * different one. The memory compares the rows themselves before keeping any (braid_gen_prompt_parts). */
static inline braid_token srv_image_token(uint64_t h, int32_t row) {
    uint64_t x = (h ^ ((uint64_t)(uint32_t)row * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;
    uint32_t low = (uint32_t)(x >> 33);                   /* 31 bits */
    if (low == 0x7fffffffu) low = 0x7ffffffeu;             /* not -1 */
    return (braid_token)((int32_t)low - INT32_MAX - 1);    /* INT32_MIN .. -2 */
}

/* slot_ops.c */
/* 1 if name is a file name POST /slots accepts (stays inside --slot-save-path). */
int srv_slot_name_ok(const char *name);
/* Scheduler thread: runs a pending slot operation, if any. */
void srv_slot_op_poll(srv *s);
/* Scheduler thread: copies the cache's counters and block hashes for /metrics and /cache. */
void srv_cache_publish(srv *s);

/* sched.c */
/* The speculative settings of request r in gp (draft, draft_n, lookup_n): its own or the server's default. */
void srv_spec_settings(const srv *s, const srv_request *r, braid_gen_params *gp);
int srv_sched_start(srv *s);
void srv_sched_stop(srv *s);
/* Queues every job of t (t->refs counts them). 0 if the queue has no room for them (nothing queued). */
int srv_submit(srv *s, srv_task *t);
/* Drops one reference (under srv.mu). */
void srv_task_release_locked(srv_task *t);
/* A new task for a validated request (moved in) and its prompt tokens (moved in); refs = 1 (the caller). */
srv_task *srv_task_new(srv *s, srv_request *req, braid_token *toks, int32_t n_toks, int32_t n_predict);

#endif
