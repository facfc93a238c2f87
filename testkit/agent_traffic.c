/* agent_traffic.c — the agent-style traffic of agent_traffic.h and its three reuse policies. */
#include "agent_traffic.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { TK_SYS = 500, TK_USER, TK_ASSIST, TK_END, TK_THINK, TK_THINK_END, TK_MAX = 500 };
#define AT_MAX_TURNS 64
#define AT_LLAMA_UBATCH 512
#define AT_LLAMA_MAX_CK 32

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

void at_params_default(at_params *p) {
    memset(p, 0, sizeof *p);
    p->n_conv = 8;
    p->n_turns = 10;
    p->n_slots = 4;
    p->sys_len = 400;
    p->user_min = 20;
    p->user_max = 120;
    p->reason_len = 60;
    p->answer_len = 40;
    p->branch_every = 4;
    p->seed = 1;
    p->n_ctx = 65536;
    p->n_batch = 128;
    p->n_threads = 1;
    p->checkpoint_interval = 256;
    p->cache_bytes = 1ull << 30;
}

const char *at_policy_name(at_policy pol) {
    return pol == AT_BRAID ? "braid prompt cache" : pol == AT_OFF ? "cache off" : "llama-server policy (simulated)";
}

typedef struct tokv {
    braid_token *v;
    int32_t n, cap;
} tokv;

static int push(tokv *t, const braid_token *x, int32_t k) {
    if (t->n + k > t->cap) {
        int32_t c = t->cap ? t->cap : 1024;
        while (c < t->n + k) c *= 2;
        braid_token *nv = realloc(t->v, (size_t)c * sizeof *nv);
        if (!nv) return 0;
        t->v = nv;
        t->cap = c;
    }
    memcpy(t->v + t->n, x, (size_t)k * sizeof *x);
    t->n += k;
    return 1;
}
static int push1(tokv *t, braid_token x) { return push(t, &x, 1); }

/* Deterministic text tokens for (a, b, c, d). */
static void text(braid_token *out, int32_t n, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
    uint64_t x = ((uint64_t)a * 1000003u + b) * 1000033u + c * 7919u + d * 104729u + 12345;
    for (int32_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        out[i] = (braid_token)(x % TK_MAX);
    }
}

typedef struct conv {
    int32_t n_hist;                   /* past turns in the history */
    int32_t user_ver[AT_MAX_TURNS];   /* version of each turn's user text (a branch edits it) */
    int32_t turn_id[AT_MAX_TURNS];    /* which generated reply a history turn holds */
    tokv seen;                        /* streams sent or generated, concatenated with their lengths */
    int32_t *seen_len, n_seen;
    tokv state;                       /* AT_LLAMA: what the conversation's sequence holds */
    int32_t ck[AT_LLAMA_MAX_CK], n_ck;
} conv;

static int32_t user_len(const at_params *p, int32_t c, int32_t t, int32_t v) {
    uint32_t h = (uint32_t)(c * 31 + t * 7 + v * 13) * 2654435761u;
    return p->user_min + (int32_t)(h % (uint32_t)(p->user_max - p->user_min + 1));
}

/* Renders conversation c's prompt for its current turn (user message of turn t = n_hist) into out, with the
 * indices of every message start in marks. */
static int render(const at_params *p, int32_t c, const conv *cv, tokv *out, int32_t *marks, int32_t *n_marks,
                  int32_t *last_user) {
    braid_token buf[4096];
    out->n = 0;
    *n_marks = 0;
    int keep_reasoning = c % 2 == 1;
    if (!push1(out, TK_SYS)) return 0;
    text(buf, p->sys_len, 0, 0, 0, p->seed);
    if (!push(out, buf, p->sys_len) || !push1(out, TK_END)) return 0;
    for (int32_t j = 0; j <= cv->n_hist; j++) {
        marks[(*n_marks)++] = out->n;
        *last_user = out->n;
        int32_t ul = user_len(p, c, j, cv->user_ver[j]);
        text(buf, ul, (uint32_t)c + 1, (uint32_t)j, 1, (uint32_t)cv->user_ver[j] + p->seed);
        if (!push1(out, TK_USER) || !push(out, buf, ul) || !push1(out, TK_END)) return 0;
        marks[(*n_marks)++] = out->n;
        if (!push1(out, TK_ASSIST)) return 0;
        if (j == cv->n_hist) break;
        if (keep_reasoning) {
            text(buf, p->reason_len, (uint32_t)c + 1, (uint32_t)cv->turn_id[j], 2, p->seed);
            if (!push1(out, TK_THINK) || !push(out, buf, p->reason_len) || !push1(out, TK_THINK_END)) return 0;
        }
        text(buf, p->answer_len, (uint32_t)c + 1, (uint32_t)cv->turn_id[j], 3, p->seed);
        if (!push(out, buf, p->answer_len) || !push1(out, TK_END)) return 0;
    }
    return 1;
}

/* The reply generated at turn id for conversation c: reasoning span, answer, end. */
static void reply(const at_params *p, int32_t c, int32_t id, tokv *out) {
    braid_token buf[4096];
    out->n = 0;
    push1(out, TK_THINK);
    text(buf, p->reason_len, (uint32_t)c + 1, (uint32_t)id, 2, p->seed);
    push(out, buf, p->reason_len);
    push1(out, TK_THINK_END);
    text(buf, p->answer_len, (uint32_t)c + 1, (uint32_t)id, 3, p->seed);
    push(out, buf, p->answer_len);
    push1(out, TK_END);
}

static int32_t lcp(const braid_token *a, int32_t na, const braid_token *b, int32_t nb) {
    int32_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

static int32_t seen_lcp(const conv *cv, const braid_token *t, int32_t n) {
    int32_t best = 0, off = 0;
    for (int32_t k = 0; k < cv->n_seen; k++) {
        int32_t l = lcp(cv->seen.v + off, cv->seen_len[k], t, n);
        if (l > best) best = l;
        off += cv->seen_len[k];
    }
    return best;
}

static braid_status decode(braid_context *ctx, braid_seq_id s, const braid_token *t, int32_t n, uint32_t n_batch) {
    braid_seq_id seqs[4096];
    for (int32_t i = 0; i < n;) {
        int32_t k = n - i < (int32_t)n_batch ? n - i : (int32_t)n_batch;
        if (k > 4096) k = 4096;
        for (int32_t j = 0; j < k; j++) seqs[j] = s;
        braid_batch b = {.n_tokens = k, .token = t + i, .seq = seqs};
        braid_status st = braid_decode(ctx, &b);
        if (st != BRAID_OK) return st;
        i += k;
    }
    return BRAID_OK;
}

/* The last row's logits after decode() of n tokens. */
static const float *last_logits(braid_context *ctx, int32_t n, uint32_t n_batch) {
    int32_t r = n % (int32_t)n_batch;
    return braid_logits(ctx, (r ? r : (int32_t)n_batch) - 1);
}

/* AT_LLAMA's prefill of prompt[from .. n) on s: cut at the checkpoint points, checkpoint there. */
static braid_status llama_prefill(braid_context *ctx, conv *cv, braid_seq_id s, const tokv *pr, int32_t from,
                                  int32_t last_user, uint32_t n_batch) {
    int32_t n = pr->n;
    int32_t cuts[4], nc = 0;
    int32_t pts[3] = {last_user, n - 4 - AT_LLAMA_UBATCH, n - 4};
    for (int k = 0; k < 3; k++)
        if (pts[k] > from && pts[k] < n && (nc == 0 || pts[k] > cuts[nc - 1])) cuts[nc++] = pts[k];
    cuts[nc++] = n;
    int32_t at = from;
    for (int k = 0; k < nc; k++) {
        braid_status st = decode(ctx, s, pr->v + at, cuts[k] - at, n_batch);
        if (st != BRAID_OK) return st;
        at = cuts[k];
        if (k + 1 == nc) break;
        st = braid_seq_checkpoint(ctx, s);
        if (st != BRAID_OK) return st;
        if (cv->n_ck == AT_LLAMA_MAX_CK) {
            memmove(cv->ck, cv->ck + 1, (AT_LLAMA_MAX_CK - 1) * sizeof cv->ck[0]);
            cv->n_ck--;
        }
        cv->ck[cv->n_ck++] = at;
    }
    return BRAID_OK;
}

braid_status at_run(braid_model *m, const at_params *p, at_policy pol, at_result *r) {
    memset(r, 0, sizeof *r);
    if (p->n_turns > AT_MAX_TURNS || p->n_conv < 1 || p->n_slots < 1) return BRAID_E_INVALID;
    int32_t n_cache = pol == AT_BRAID ? 2 * p->n_conv + 2 : 0;
    int32_t n_user = pol == AT_LLAMA ? p->n_conv : p->n_slots;
    braid_context_params cp = braid_context_default_params();
    cp.n_ctx = p->n_ctx;
    cp.n_seq_max = (uint32_t)(n_user + n_cache);
    cp.n_batch = p->n_batch;
    cp.n_threads = p->n_threads;
    cp.checkpoint_interval = pol == AT_BRAID ? p->checkpoint_interval : 0;
    cp.checkpoint_budget_bytes = 8ull << 30;
    if (pol == AT_LLAMA) cp.n_rollback = 0;
    braid_context *ctx = NULL;
    braid_status st = braid_context_new(m, &cp, &ctx);
    if (st != BRAID_OK) return st;
    braid_prompt_cache *pc = NULL;
    if (pol == AT_BRAID) {
        braid_prompt_cache_params pp = braid_prompt_cache_default_params();
        pp.first_seq = n_user;
        pp.n_seq = n_cache;
        pp.budget_bytes = p->cache_bytes;
        st = braid_prompt_cache_new(ctx, &pp, &pc);
    }
    conv *cv = calloc((size_t)p->n_conv, sizeof *cv);
    r->ttft_ms = calloc((size_t)p->n_conv * (size_t)p->n_turns + 1, sizeof(double));
    tokv pr = {0}, rp = {0};
    int32_t *marks = malloc(sizeof(int32_t) * (2 * AT_MAX_TURNS + 4));
    if (st == BRAID_OK && (!cv || !r->ttft_ms || !marks)) st = BRAID_E_NOMEM;
    int32_t next_id = 0;
    for (int32_t t = 0; st == BRAID_OK && t < p->n_turns; t++) {
        for (int32_t c = 0; st == BRAID_OK && c < p->n_conv; c++) {
            conv *q = &cv[c];
            /* A branch: the user edits an earlier message; the history goes back to that turn. */
            if (p->branch_every > 0 && c % 4 == 1 && t > 0 && t % p->branch_every == 0 && q->n_hist >= 2) {
                q->n_hist = q->n_hist / 2;
                q->user_ver[q->n_hist]++;
            }
            int32_t nm = 0, last_user = 0;
            if (!render(p, c, q, &pr, marks, &nm, &last_user)) st = BRAID_E_NOMEM;
            if (st != BRAID_OK) break;
            int32_t n = pr.n;
            int32_t seen = 0;
            for (int32_t k = 0; k < p->n_conv; k++) {
                int32_t l = seen_lcp(&cv[k], pr.v, n);
                if (l > seen) seen = l;
            }
            int32_t fresh = n - seen;
            braid_seq_id s = pol == AT_LLAMA ? c : c % p->n_slots;
            double t0 = now_ms();
            int32_t cached = 0, replayed = 0;
            const float *lg = NULL;
            if (pol == AT_BRAID) {
                braid_cache_reuse ru;
                st = braid_prompt_cache_prepare(pc, s, pr.v, n, &ru);
                if (st == BRAID_OK) st = braid_seq_checkpoint_at(ctx, s, marks, nm);
                cached = ru.cached_tokens;
                replayed = ru.replayed_tokens;
                if (st == BRAID_OK && !ru.logits_ready) {
                    st = decode(ctx, s, pr.v + cached, n - cached, p->n_batch);
                    lg = last_logits(ctx, n - cached, p->n_batch);
                } else {
                    lg = braid_prompt_cache_logits(pc);
                }
                if (st == BRAID_OK) st = braid_prompt_cache_store(pc, s, lg);
            } else if (pol == AT_OFF) {
                braid_seq_clear(ctx, s);
                st = decode(ctx, s, pr.v, n, p->n_batch);
                lg = last_logits(ctx, n, p->n_batch);
            } else {
                int32_t L = lcp(q->state.v, q->state.n, pr.v, n);
                if (L == n) L = n - 1; /* the last token is evaluated again for its logits */
                if (L < q->state.n) {
                    /* leaves the cached state: newest checkpoint at or before L, else from 0 */
                    int32_t from = 0;
                    for (int32_t k = 0; k < q->n_ck; k++)
                        if (q->ck[k] <= L && q->ck[k] > from) from = q->ck[k];
                    int32_t keep = 0;
                    for (int32_t k = 0; k < q->n_ck; k++)
                        if (q->ck[k] <= from) q->ck[keep++] = q->ck[k];
                    q->n_ck = keep;
                    L = from;
                    st = from ? braid_seq_truncate(ctx, s, from) : BRAID_OK;
                    if (!from) braid_seq_clear(ctx, s);
                }
                cached = L;
                if (st == BRAID_OK) st = llama_prefill(ctx, q, s, &pr, L, last_user, p->n_batch);
            }
            if (st != BRAID_OK) break;
            r->ttft_ms[r->requests] = now_ms() - t0;
            r->requests++;
            r->hits += cached > 0;
            r->sent += n;
            r->cached += cached;
            r->replayed += replayed;
            r->computed += (n - cached) + replayed;
            r->new_tokens += fresh;
            /* The reply, decoded one token at a time; its last token is sampled but not decoded. */
            int32_t id = next_id++;
            reply(p, c, id, &rp);
            for (int32_t k = 0; st == BRAID_OK && k + 1 < rp.n; k++) st = decode(ctx, s, rp.v + k, 1, p->n_batch);
            if (st == BRAID_OK && pol == AT_BRAID) st = braid_prompt_cache_store(pc, s, NULL);
            /* What the conversation has computed at best: this prompt plus the reply as decoded (its last
             * token was sampled, never decoded). */
            int32_t before = q->seen.n;
            if (!push(&q->seen, pr.v, n) || !push(&q->seen, rp.v, rp.n - 1)) st = BRAID_E_NOMEM;
            int32_t *sl = realloc(q->seen_len, (size_t)(q->n_seen + 1) * sizeof *sl);
            if (!sl) st = BRAID_E_NOMEM;
            if (st != BRAID_OK) break;
            q->seen_len = sl;
            q->seen_len[q->n_seen++] = q->seen.n - before;
            if (pol == AT_LLAMA) {
                q->state.n = 0;
                if (!push(&q->state, pr.v, n) || !push(&q->state, rp.v, rp.n - 1)) st = BRAID_E_NOMEM;
            }
            q->turn_id[q->n_hist] = id;
            q->n_hist++;
            q->user_ver[q->n_hist] = 0;
        }
    }
    if (pc) braid_prompt_cache_get_stats(pc, &r->cache);
    for (int32_t c = 0; cv && c < p->n_conv; c++) {
        free(cv[c].seen.v);
        free(cv[c].seen_len);
        free(cv[c].state.v);
    }
    free(cv);
    free(pr.v);
    free(rp.v);
    free(marks);
    braid_prompt_cache_free(pc);
    braid_context_free(ctx);
    return st;
}
