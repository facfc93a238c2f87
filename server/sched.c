/* sched.c — slots, the bounded queue and the scheduler thread.
 *
 * One thread drives the context (braid contexts are driven by one thread at a time). Each round it admits
 * queued jobs into idle slots (srv_reuse_prepare picks the slot), begins their generators, and runs one
 * braid_gen_step over every active slot: each generating slot's next token and chunks of the prompts still
 * being read go through one decode, earlier admissions' prompts first, so a long prompt does not stall the
 * other streams (continuous batching). A job whose client went away is cancelled by its generator's abort
 * callback at the next step; braid_decode is whole or nothing, so nothing is half-applied.
 *
 * A prompt with images (encoded on its HTTP thread before it is queued) is begun by braid_gen_begin_parts and
 * decoded by braid_gen_prefill, one n_batch piece per round in a decode of its own (image rows cannot share a
 * token batch), before that round's step; so the other slots wait at most one piece per token. Then it
 * generates in the steps like any other. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "reuse.h"
#include "response.h"
#include "srv_impl.h"

double srv_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

srv_task *srv_task_new(srv *s, srv_request *req, braid_token *toks, int32_t n_toks, int32_t n_predict) {
    srv_task *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->jobs = calloc((size_t)req->n, sizeof *t->jobs);
    if (!t->jobs) {
        free(t);
        return NULL;
    }
    t->s = s;
    t->req = *req;
    memset(req, 0, sizeof *req);
    t->toks = toks;
    t->n_toks = n_toks;
    t->n_predict = n_predict;
    t->refs = 1;
    t->n_jobs = t->req.n;
    t->created = (int64_t)time(NULL);
    static atomic_uint_fast64_t counter;
    snprintf(t->id, sizeof t->id, "%llx%08llx", (unsigned long long)t->created,
             (unsigned long long)atomic_fetch_add(&counter, 1));
    for (int i = 0; i < t->n_jobs; i++) t->jobs[i].task = t, t->jobs[i].index = i, t->jobs[i].slot = -1;
    return t;
}

static void task_free(srv_task *t) {
    for (int i = 0; i < t->n_jobs; i++) {
        free(t->jobs[i].text);
        json_decref(t->jobs[i].logprobs);
    }
    free(t->jobs);
    free(t->toks);
    free(t->parts);
    for (int i = 0; i < SRV_MAX_IMAGES; i++) braid_free(t->rows[i]);
    braid_json_constraint_free(t->json);
    srv_request_free(&t->req);
    free(t);
}

void srv_task_release_locked(srv_task *t) {
    if (--t->refs == 0) task_free(t);
}

int srv_submit(srv *s, srv_task *t) {
    pthread_mutex_lock(&s->mu);
    if (s->stopping || s->q_len + t->n_jobs > s->cfg.queue_max) {
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    double now = srv_now_ms();
    for (int i = 0; i < t->n_jobs; i++) {
        srv_job *j = &t->jobs[i];
        j->t_queued = now;
        j->next = NULL;
        if (s->q_tail) s->q_tail->next = j;
        else s->q_head = j;
        s->q_tail = j;
        s->q_len++;
        t->refs++;
    }
    s->m.queued = s->q_len;
    pthread_cond_signal(&s->cv_work);
    pthread_mutex_unlock(&s->mu);
    return 1;
}

/* ---- the generator's callbacks (scheduler thread) ------------------------------------------------------------ */

static int job_abort(void *user) {
    srv_job *j = user;
    return atomic_load(&j->task->cancelled);
}

static int job_piece(void *user, braid_token tok, const char *text, size_t len) {
    srv_job *j = user;
    srv *s = j->task->s;
    json_t *lp = NULL;
    if (tok >= 0 && j->task->req.logprobs) {
        const float *lg = braid_gen_logits(j->g);
        if (lg) lp = srv_logprob_entry(s->model, lg, s->n_vocab, tok, j->task->req.top_logprobs);
    }
    pthread_mutex_lock(&s->mu);
    if (tok >= 0) {
        j->n_tokens++;
        if (!j->t_first) j->t_first = srv_now_ms();
    }
    if (len && j->n_text + len + 1 > j->cap_text) {
        size_t nc = j->cap_text ? j->cap_text : 256;
        while (nc < j->n_text + len + 1) nc *= 2;
        char *nt = realloc(j->text, nc);
        if (nt) j->text = nt, j->cap_text = nc;
    }
    if (len && j->n_text + len + 1 <= j->cap_text) {
        memcpy(j->text + j->n_text, text, len);
        j->n_text += len;
        j->text[j->n_text] = 0;
    }
    if (lp) {
        if (!j->logprobs) j->logprobs = json_array();
        json_array_append_new(j->logprobs, lp);
    }
    pthread_cond_broadcast(&s->cv_out);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* ---- admission and retirement ------------------------------------------------------------------------------- */

/* Marks j done (with braid's stop reason or an error), frees its slot, drops the job's task reference. */
static void retire(srv *s, srv_job *j, const char *stop, const char *err) {
    srv_slot *sl = j->slot >= 0 ? &s->slots[j->slot] : NULL;
    srv_task *t = j->task;
    if (j->g) {
        j->st = *braid_gen_get_stats(j->g);
        /* cached = what reuse found and braid_gen_begin kept, less what reaching it recomputed (a replay from
         * a checkpoint is computed, not cached) */
        int32_t kept = j->cached_tokens < j->st.reused_tokens ? j->cached_tokens : j->st.reused_tokens;
        kept -= j->st.replayed_tokens;
        j->cached_tokens = kept > 0 ? kept : 0;
    }
    /* the slot's sequence now holds a prefix of prompt + reply: remember which */
    if (sl) {
        int32_t len = braid_seq_len(s->ctx, (braid_seq_id)sl->id), n_out = 0;
        const braid_token *out = j->g ? braid_gen_tokens(j->g, &n_out) : NULL;
        int32_t need = t->n_toks + n_out;
        if (need > sl->cap_toks) {
            braid_token *nt = realloc(sl->toks, (size_t)need * sizeof *nt);
            if (nt) sl->toks = nt, sl->cap_toks = need;
        }
        if (need <= sl->cap_toks && len >= 0 && len <= need) {
            memcpy(sl->toks, t->toks, (size_t)t->n_toks * sizeof *t->toks);
            if (n_out) memcpy(sl->toks + t->n_toks, out, (size_t)n_out * sizeof *out);
            sl->n_toks = len;
        } else {
            braid_seq_clear(s->ctx, (braid_seq_id)sl->id);
            sl->n_toks = 0;
        }
    }
    braid_gen_free(j->g);
    j->g = NULL;
    pthread_mutex_lock(&s->mu);
    j->stop = stop;
    if (err) snprintf(j->err, sizeof j->err, "%s", err);
    j->done = 1;
    if (sl) sl->job = NULL, s->m.busy_slots--;
    srv_metrics *m = &s->m;
    if (!strcmp(stop, "cancelled")) m->cancelled++;
    m->prompt_tokens += (uint64_t)t->n_toks;
    m->cached_tokens += (uint64_t)j->cached_tokens;
    m->decoded_prompt_tokens += (uint64_t)(j->st.decoded_tokens > 0 ? j->st.decoded_tokens : 0);
    m->replayed_tokens += (uint64_t)(j->st.replayed_tokens > 0 ? j->st.replayed_tokens : 0);
    m->generated_tokens += (uint64_t)j->n_tokens;
    m->drafted_tokens += (uint64_t)(j->st.drafted > 0 ? j->st.drafted : 0);
    m->accepted_tokens += (uint64_t)(j->st.accepted > 0 ? j->st.accepted : 0);
    if (j->spec) m->spec_jobs++;
    m->prompt_seconds += j->st.prompt_ms / 1e3;
    m->generate_seconds += j->st.gen_ms / 1e3;
    if (j->t_first) srv_hist_add(&m->ttft, j->t_first - j->t_queued);
    if (j->n_tokens > 1) srv_hist_add(&m->itl, j->st.gen_ms / (j->n_tokens - 1));
    pthread_cond_broadcast(&s->cv_out);
    srv_task_release_locked(t);
    pthread_mutex_unlock(&s->mu);
}

void srv_spec_settings(const srv *s, const srv_request *r, braid_gen_params *gp) {
    srv_spec_mode mode = r->spec_mode;
    if (mode == SRV_SPEC_DEFAULT)
        mode = s->cfg.draft_ctx ? SRV_SPEC_DRAFT
               : s->cfg.mtp     ? SRV_SPEC_MTP
               : s->cfg.lookup_n > 0 ? SRV_SPEC_LOOKUP
                                     : SRV_SPEC_OFF;
    /* Logprobs need the logits of every token; the token a verification ends on is emitted at the next step
     * without them (as braid_gen_run does), so such requests decode plainly. */
    if (r->logprobs || (mode == SRV_SPEC_DRAFT && !s->cfg.draft_ctx) || (mode == SRV_SPEC_MTP && !s->cfg.mtp_ok))
        mode = SRV_SPEC_OFF;
    gp->draft = NULL;
    gp->lookup_n = 0;
    gp->mtp = 0;
    if (mode == SRV_SPEC_OFF) return;
    int32_t n = r->spec_n ? r->spec_n : mode == SRV_SPEC_MTP ? s->cfg.mtp_n : s->cfg.draft_n;
    gp->draft_n = n < s->cfg.draft_n_max ? n : s->cfg.draft_n_max;
    if (gp->draft_n < 1) return;
    if (mode == SRV_SPEC_DRAFT) gp->draft = s->cfg.draft_ctx;
    else if (mode == SRV_SPEC_MTP) gp->mtp = 1;
    else gp->lookup_n = r->spec_ngram ? r->spec_ngram : s->cfg.lookup_n > 0 ? s->cfg.lookup_n : 3;
}

/* Creates and begins j's generator in its slot. 0: j was retired with the error. */
static int begin_job(srv *s, srv_job *j) {
    srv_task *t = j->task;
    const srv_request *r = &t->req;
    braid_gen_params gp = braid_gen_default_params();
    gp.seq = (braid_seq_id)j->slot;
    gp.n_predict = t->n_predict;
    gp.sampler = r->sampler;
    if (!r->has_seed) gp.sampler.seed = (uint64_t)time(NULL) * 2654435761u + (uint64_t)s->n_admitted;
    gp.sampler.seed += (uint64_t)j->index; /* n choices: n different draws */
    gp.stop = (const char *const *)r->stop;
    gp.n_stop = r->n_stop;
    gp.on_piece = job_piece;
    gp.piece_user = j;
    gp.abort_cb = job_abort;
    gp.abort_user = j;
    gp.cache = s->cache; /* NULL without --cache-ram: the slot's own prefix only */
    srv_spec_settings(s, r, &gp);
    /* a prompt with images: the cache's radix tree keys token ids, so such a prompt reuses the slot's own
     * sequence only (its rows compared by value), and neither it nor its reply is stored in the cache; nor
     * does it speculate (a draft model cannot see the image, and lookup's history holds no image rows) */
    if (t->n_parts) {
        gp.cache = NULL;
        gp.draft = NULL;
        gp.lookup_n = 0;
        gp.mtp = 0;
    }
    /* constrained decoding: every choice writes one document the constraint accepts (braid_gen_new refuses it
     * with drafting, so such a request does not speculate) */
    gp.json = t->json;
    if (gp.json) {
        gp.draft = NULL;
        gp.lookup_n = 0;
        gp.mtp = 0;
    }
    j->spec = gp.draft || gp.lookup_n > 0 || gp.mtp;
    braid_status st = braid_gen_new(s->ctx, &gp, &j->g);
    if (st == BRAID_OK && t->n_parts) st = braid_gen_begin_parts(j->g, t->parts, t->n_parts);
    else if (st == BRAID_OK) st = braid_gen_begin(j->g, t->toks, t->n_toks);
    j->prefill = st == BRAID_OK && t->n_parts > 0;
    if (st != BRAID_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s: %s", braid_status_name(st), braid_last_error());
        retire(s, j, "error", why);
        return 0;
    }
    return 1;
}

/* One piece (n_batch inputs) of the earliest admitted prompt with images, if any. Its decode replaces the
 * context's logits, so the generating slots keep theirs first; a prompt that is in joins this round's step. */
static void prefill_round(srv *s) {
    srv_job *pj = NULL;
    for (int i = 0; i < s->cfg.parallel; i++) {
        srv_job *j = s->slots[i].job;
        if (j && j->g && j->prefill && (!pj || j->admitted < pj->admitted)) pj = j;
    }
    if (!pj) return;
    for (int i = 0; i < s->cfg.parallel; i++) {
        srv_job *j = s->slots[i].job;
        if (j && j->g && !j->prefill && braid_gen_keep_logits(j->g) != BRAID_OK) return; /* out of memory: later */
    }
    int done = 0;
    braid_status st = braid_gen_prefill(pj->g, &done);
    if (done) pj->prefill = 0;
    if (!braid_gen_active(pj->g)) {
        char why[256] = "";
        if (st != BRAID_OK) snprintf(why, sizeof why, "%s: %s", braid_status_name(st), braid_last_error());
        const char *stop = braid_gen_get_stats(pj->g)->stop;
        retire(s, pj, stop, !strcmp(stop, "error") ? why : NULL);
    }
}

static void *sched_main(void *arg) {
    srv *s = arg;
    const int P = s->cfg.parallel;
    srv_job **admit = calloc((size_t)P, sizeof *admit);
    braid_gen **gens = calloc((size_t)P, sizeof *gens);
    srv_job **jobs = calloc((size_t)P, sizeof *jobs);
    int *free_slots = calloc((size_t)P, sizeof *free_slots);
    if (!admit || !gens || !jobs || !free_slots) {
        fprintf(stderr, "braid serve: out of memory in the scheduler\n");
        free(admit), free(gens), free(jobs), free(free_slots);
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(&s->mu);
        for (;;) {
            int busy = s->m.busy_slots;
            if (s->stopping || (s->q_head && busy < P) || busy > 0 || (s->op.pending && !s->op.done)) break;
            pthread_cond_wait(&s->cv_work, &s->mu);
        }
        if (s->stopping && !s->m.busy_slots) {
            /* what still waits is answered as cancelled */
            while (s->q_head) {
                srv_job *j = s->q_head;
                s->q_head = j->next;
                s->q_len--;
                pthread_mutex_unlock(&s->mu);
                retire(s, j, "cancelled", NULL);
                pthread_mutex_lock(&s->mu);
            }
            s->q_tail = NULL;
            pthread_mutex_unlock(&s->mu);
            break;
        }
        if (s->op.pending && !s->op.done) {
            pthread_mutex_unlock(&s->mu);
            srv_slot_op_poll(s);
            pthread_mutex_lock(&s->mu);
        }
        /* admit queued jobs into idle slots */
        int n_admit = 0;
        while (!s->stopping && s->q_head && s->m.busy_slots + n_admit < P) {
            srv_job *j = s->q_head;
            s->q_head = j->next;
            if (!s->q_head) s->q_tail = NULL;
            s->q_len--;
            admit[n_admit++] = j;
        }
        s->m.queued = s->q_len;
        pthread_mutex_unlock(&s->mu);
        for (int a = 0; a < n_admit; a++) {
            srv_job *j = admit[a];
            if (atomic_load(&j->task->cancelled)) {
                retire(s, j, "cancelled", NULL);
                continue;
            }
            int n_free = 0;
            for (int i = 0; i < P; i++)
                if (!s->slots[i].job) free_slots[n_free++] = i;
            srv_reuse_result rr = {-1, 0};
            braid_status st = srv_reuse_prepare(s, free_slots, n_free, j->task->toks, j->task->n_toks, &rr);
            if (st != BRAID_OK || rr.slot < 0) {
                retire(s, j, "error", "no slot could be prepared for the prompt");
                continue;
            }
            pthread_mutex_lock(&s->mu);
            j->slot = rr.slot;
            j->cached_tokens = rr.cached_tokens;
            j->admitted = s->n_admitted++;
            j->t_started = srv_now_ms();
            s->slots[rr.slot].job = j;
            s->slots[rr.slot].n_requests++;
            s->m.busy_slots++;
            srv_hist_add(&s->m.queue, j->t_started - j->t_queued);
            pthread_mutex_unlock(&s->mu);
            begin_job(s, j);
        }
        if (n_admit) srv_cache_publish(s);
        prefill_round(s);
        /* one step over every active slot (those not prefilling), earliest admission first */
        int n = 0;
        for (int i = 0; i < P; i++)
            if (s->slots[i].job && s->slots[i].job->g && !s->slots[i].job->prefill) jobs[n++] = s->slots[i].job;
        for (int a = 1; a < n; a++)
            for (int b = a; b > 0 && jobs[b]->admitted < jobs[b - 1]->admitted; b--) {
                srv_job *x = jobs[b];
                jobs[b] = jobs[b - 1];
                jobs[b - 1] = x;
            }
        for (int i = 0; i < n; i++) gens[i] = jobs[i]->g;
        if (n == 0) continue;
        braid_status st = braid_gen_step(gens, n);
        char why[256] = "";
        if (st != BRAID_OK) snprintf(why, sizeof why, "%s: %s", braid_status_name(st), braid_last_error());
        pthread_mutex_lock(&s->mu);
        s->m.decode_steps++;
        pthread_mutex_unlock(&s->mu);
        int retired = 0;
        for (int i = 0; i < n; i++) {
            if (braid_gen_active(gens[i])) continue;
            const char *stop = braid_gen_get_stats(gens[i])->stop;
            retire(s, jobs[i], stop, !strcmp(stop, "error") ? why : NULL);
            retired++;
        }
        if (retired) srv_cache_publish(s);
    }
    free(admit), free(gens), free(jobs), free(free_slots);
    return NULL;
}

int srv_sched_start(srv *s) {
    if (pthread_create(&s->sched, NULL, sched_main, s)) return 0;
    s->sched_started = 1;
    return 1;
}

void srv_sched_stop(srv *s) {
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    for (int i = 0; i < s->cfg.parallel; i++)
        if (s->slots[i].job) atomic_store(&s->slots[i].job->task->cancelled, 1);
    pthread_cond_broadcast(&s->cv_work);
    pthread_cond_broadcast(&s->cv_out); /* a slot operation waiting for the scheduler gives up */
    pthread_mutex_unlock(&s->mu);
    if (s->sched_started) pthread_join(s->sched, NULL);
    s->sched_started = 0;
}
