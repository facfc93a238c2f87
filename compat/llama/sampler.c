/* sampler.c — llama.h's sampler objects: the generic llama_sampler (an interface table plus state, so a
 * program's own samplers work), the chain, and the built-in samplers programs use most: greedy, dist,
 * top-k, top-p, min-p, temperature, penalties, logit bias. Each works on a llama_token_data_array as
 * llama.h describes (the facts: which tokens survive, ties to the lowest id); the random stream of dist is
 * braid's own (splitmix64 + a uniform draw), so seeded runs repeat but do not match llama.cpp's numbers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

struct llama_sampler *llama_sampler_init(struct llama_sampler_i *iface, llama_sampler_context_t ctx) {
    struct llama_sampler *s = malloc(sizeof *s);
    if (!s) return NULL;
    s->iface = iface;
    s->ctx = ctx;
    return s;
}

const char *llama_sampler_name(const struct llama_sampler *s) {
    return s && s->iface->name ? s->iface->name(s) : "(unnamed)";
}
void llama_sampler_accept(struct llama_sampler *s, llama_token t) {
    if (s && s->iface->accept) s->iface->accept(s, t);
}
void llama_sampler_apply(struct llama_sampler *s, llama_token_data_array *cur) {
    if (s && s->iface->apply) s->iface->apply(s, cur);
}
void llama_sampler_reset(struct llama_sampler *s) {
    if (s && s->iface->reset) s->iface->reset(s);
}
struct llama_sampler *llama_sampler_clone(const struct llama_sampler *s) {
    if (!s) return NULL;
    if (s->iface->clone) return s->iface->clone(s);
    return s->ctx ? NULL : llama_sampler_init(s->iface, NULL); /* stateless: share the table */
}
void llama_sampler_free(struct llama_sampler *s) {
    if (!s) return;
    if (s->iface->free) s->iface->free(s);
    free(s);
}

/* ---- helpers on the candidate array --------------------------------------------------------------------- */

static int by_logit_desc(const void *a, const void *b) {
    const llama_token_data *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static void sort_desc(llama_token_data_array *cur) {
    if (!cur->sorted) qsort(cur->data, cur->size, sizeof *cur->data, by_logit_desc);
    cur->sorted = true;
}

/* p = softmax(logit) over the array (the max subtracted first). */
static void softmax(llama_token_data_array *cur) {
    if (!cur->size) return;
    float max = cur->data[0].logit;
    for (size_t i = 1; i < cur->size; i++)
        if (cur->data[i].logit > max) max = cur->data[i].logit;
    double sum = 0;
    for (size_t i = 0; i < cur->size; i++) {
        cur->data[i].p = expf(cur->data[i].logit - max);
        sum += cur->data[i].p;
    }
    for (size_t i = 0; i < cur->size; i++) cur->data[i].p = (float)(cur->data[i].p / sum);
}

/* ---- the chain ------------------------------------------------------------------------------------------ */

typedef struct chain {
    struct llama_sampler **items;
    int32_t n, cap;
    int no_perf;
    int64_t t_sample_us;
    int32_t n_sample;
} chain;

static const char *chain_name(const struct llama_sampler *s) { (void)s; return "chain"; }
static void chain_accept(struct llama_sampler *s, llama_token t) {
    chain *c = s->ctx;
    for (int32_t i = 0; i < c->n; i++) llama_sampler_accept(c->items[i], t);
    c->n_sample++;
}
static void chain_apply(struct llama_sampler *s, llama_token_data_array *cur) {
    chain *c = s->ctx;
    int64_t t0 = shim_time_us();
    for (int32_t i = 0; i < c->n; i++) llama_sampler_apply(c->items[i], cur);
    c->t_sample_us += shim_time_us() - t0;
}
static void chain_reset(struct llama_sampler *s) {
    chain *c = s->ctx;
    for (int32_t i = 0; i < c->n; i++) llama_sampler_reset(c->items[i]);
}
static void chain_free(struct llama_sampler *s) {
    chain *c = s->ctx;
    for (int32_t i = 0; i < c->n; i++) llama_sampler_free(c->items[i]);
    free(c->items);
    free(c);
}
static struct llama_sampler *chain_clone(const struct llama_sampler *s);

static struct llama_sampler_i chain_iface = {
    .name = chain_name, .accept = chain_accept, .apply = chain_apply, .reset = chain_reset,
    .clone = chain_clone, .free = chain_free,
};

struct llama_sampler_chain_params llama_sampler_chain_default_params(void) {
    struct llama_sampler_chain_params p = {.no_perf = true};
    return p;
}

struct llama_sampler *llama_sampler_chain_init(struct llama_sampler_chain_params params) {
    chain *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->no_perf = params.no_perf;
    struct llama_sampler *s = llama_sampler_init(&chain_iface, c);
    if (!s) free(c);
    return s;
}

void llama_sampler_chain_add(struct llama_sampler *s, struct llama_sampler *item) {
    chain *c = s->ctx;
    if (!item) return;
    if (c->n == c->cap) {
        int32_t cap = c->cap ? c->cap * 2 : 8;
        struct llama_sampler **p = realloc(c->items, sizeof *p * (size_t)cap);
        if (!p) {
            shim_log(GGML_LOG_LEVEL_ERROR, "llama_sampler_chain_add: out of memory\n");
            llama_sampler_free(item);
            return;
        }
        c->items = p;
        c->cap = cap;
    }
    c->items[c->n++] = item;
}

static struct llama_sampler *chain_clone(const struct llama_sampler *s) {
    const chain *c = s->ctx;
    struct llama_sampler_chain_params p = {.no_perf = c->no_perf != 0};
    struct llama_sampler *r = llama_sampler_chain_init(p);
    for (int32_t i = 0; r && i < c->n; i++) {
        struct llama_sampler *item = llama_sampler_clone(c->items[i]);
        if (!item) {
            llama_sampler_free(r);
            return NULL;
        }
        llama_sampler_chain_add(r, item);
    }
    return r;
}

struct llama_sampler *llama_sampler_chain_get(struct llama_sampler *s, int32_t i) {
    chain *c = s->ctx;
    if (i == -1) return s; /* llama.h: -1 is the chain itself */
    return i >= 0 && i < c->n ? c->items[i] : NULL;
}

int32_t llama_sampler_chain_n(const struct llama_sampler *s) { return ((const chain *)s->ctx)->n; }

struct llama_sampler *llama_sampler_chain_remove(struct llama_sampler *s, int32_t i) {
    chain *c = s->ctx;
    if (i < 0 || i >= c->n) return NULL;
    struct llama_sampler *r = c->items[i];
    memmove(c->items + i, c->items + i + 1, sizeof *c->items * (size_t)(c->n - i - 1));
    c->n--;
    return r;
}

struct llama_perf_sampler_data llama_perf_sampler(const struct llama_sampler *s) {
    struct llama_perf_sampler_data d = {0};
    if (s && s->iface == &chain_iface) {
        const chain *c = s->ctx;
        d.t_sample_ms = (double)c->t_sample_us / 1000.0;
        d.n_sample = c->n_sample;
    }
    return d;
}

void llama_perf_sampler_print(const struct llama_sampler *s) {
    struct llama_perf_sampler_data d = llama_perf_sampler(s);
    shim_log(GGML_LOG_LEVEL_NONE, "braid_perf_sampler_print:    sampling time = %10.2f ms / %5d runs   (%8.2f ms per token)\n",
             d.t_sample_ms, d.n_sample, d.n_sample ? d.t_sample_ms / d.n_sample : 0.0);
}

void llama_perf_sampler_reset(struct llama_sampler *s) {
    if (s && s->iface == &chain_iface) {
        chain *c = s->ctx;
        c->t_sample_us = 0;
        c->n_sample = 0;
    }
}

/* ---- sampling from the context -------------------------------------------------------------------------- */

llama_token llama_sampler_sample(struct llama_sampler *s, struct llama_context *ctx, int32_t idx) {
    const float *logits = llama_get_logits_ith(ctx, idx);
    if (!logits) return LLAMA_TOKEN_NULL;
    size_t n = (size_t)ctx->n_vocab;
    llama_token_data *data = malloc(sizeof *data * n);
    if (!data) return LLAMA_TOKEN_NULL;
    for (size_t i = 0; i < n; i++) data[i] = (llama_token_data){(llama_token)i, logits[i], 0.0f};
    llama_token_data_array cur = {data, n, -1, false};
    llama_sampler_apply(s, &cur);
    llama_token t = LLAMA_TOKEN_NULL;
    if (cur.selected >= 0 && (size_t)cur.selected < cur.size) {
        t = cur.data[cur.selected].id;
        llama_sampler_accept(s, t);
    } else {
        shim_log(GGML_LOG_LEVEL_ERROR, "llama_sampler_sample: the samplers selected no token (end the chain with "
                                       "greedy or dist)\n");
    }
    free(data);
    return t;
}

/* ---- built-in samplers ---------------------------------------------------------------------------------- */

static const char *greedy_name(const struct llama_sampler *s) { (void)s; return "greedy"; }
static void greedy_apply(struct llama_sampler *s, llama_token_data_array *cur) {
    (void)s;
    if (!cur->size) return;
    size_t best = 0;
    for (size_t i = 1; i < cur->size; i++) /* the first maximum: the lowest id on ties in an unsorted array */
        if (cur->data[i].logit > cur->data[best].logit) best = i;
    cur->selected = (int64_t)best;
}
static struct llama_sampler_i greedy_iface = {.name = greedy_name, .apply = greedy_apply};
struct llama_sampler *llama_sampler_init_greedy(void) { return llama_sampler_init(&greedy_iface, NULL); }

typedef struct dist {
    uint32_t seed, seed_cur;
    uint64_t state;
} dist;

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint32_t pick_seed(uint32_t seed) {
    if (seed != LLAMA_DEFAULT_SEED) return seed;
    return (uint32_t)(shim_time_us() ^ (uintptr_t)&seed);
}

static const char *dist_name(const struct llama_sampler *s) { (void)s; return "dist"; }
static void dist_apply(struct llama_sampler *s, llama_token_data_array *cur) {
    dist *d = s->ctx;
    if (!cur->size) return;
    softmax(cur);
    double u = (double)(splitmix64(&d->state) >> 11) * (1.0 / 9007199254740992.0), acc = 0;
    cur->selected = (int64_t)cur->size - 1;
    for (size_t i = 0; i < cur->size; i++) {
        acc += cur->data[i].p;
        if (u < acc) {
            cur->selected = (int64_t)i;
            break;
        }
    }
}
static void dist_reset(struct llama_sampler *s) {
    dist *d = s->ctx;
    d->seed_cur = pick_seed(d->seed);
    d->state = d->seed_cur;
}
static struct llama_sampler *dist_clone(const struct llama_sampler *s);
static void dist_free(struct llama_sampler *s) { free(s->ctx); }
static struct llama_sampler_i dist_iface = {
    .name = dist_name, .apply = dist_apply, .reset = dist_reset, .clone = dist_clone, .free = dist_free,
};
struct llama_sampler *llama_sampler_init_dist(uint32_t seed) {
    dist *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->seed = seed;
    d->seed_cur = pick_seed(seed);
    d->state = d->seed_cur;
    struct llama_sampler *s = llama_sampler_init(&dist_iface, d);
    if (!s) free(d);
    return s;
}
static struct llama_sampler *dist_clone(const struct llama_sampler *s) {
    const dist *d = s->ctx;
    struct llama_sampler *r = llama_sampler_init_dist(d->seed);
    if (r) *(dist *)r->ctx = *d;
    return r;
}

uint32_t llama_sampler_get_seed(const struct llama_sampler *s) {
    if (!s) return LLAMA_DEFAULT_SEED;
    if (s->iface == &dist_iface) return ((const dist *)s->ctx)->seed_cur;
    if (s->iface == &chain_iface) {
        const chain *c = s->ctx;
        for (int32_t i = c->n - 1; i >= 0; i--) {
            uint32_t v = llama_sampler_get_seed(c->items[i]);
            if (v != LLAMA_DEFAULT_SEED) return v;
        }
    }
    return LLAMA_DEFAULT_SEED;
}

/* Samplers with one or two numbers of state and no history share one context layout. */
typedef struct params2 {
    float f;
    int32_t i;
} params2;

static struct llama_sampler *init_params(struct llama_sampler_i *iface, float f, int32_t i) {
    params2 *p = malloc(sizeof *p);
    if (!p) return NULL;
    p->f = f;
    p->i = i;
    struct llama_sampler *s = llama_sampler_init(iface, p);
    if (!s) free(p);
    return s;
}
static void params_free(struct llama_sampler *s) { free(s->ctx); }
static struct llama_sampler *params_clone(const struct llama_sampler *s) {
    const params2 *p = s->ctx;
    return init_params(s->iface, p->f, p->i);
}

static const char *top_k_name(const struct llama_sampler *s) { (void)s; return "top-k"; }
static void top_k_apply(struct llama_sampler *s, llama_token_data_array *cur) {
    int32_t k = ((params2 *)s->ctx)->i;
    if (k <= 0) return;
    sort_desc(cur);
    if ((size_t)k < cur->size) cur->size = (size_t)k;
}
static struct llama_sampler_i top_k_iface = {
    .name = top_k_name, .apply = top_k_apply, .clone = params_clone, .free = params_free,
};
struct llama_sampler *llama_sampler_init_top_k(int32_t k) { return init_params(&top_k_iface, 0, k); }

static const char *top_p_name(const struct llama_sampler *s) { (void)s; return "top-p"; }
static void top_p_apply(struct llama_sampler *s, llama_token_data_array *cur) {
    const params2 *p = s->ctx;
    if (p->f >= 1.0f || !cur->size) return;
    sort_desc(cur);
    softmax(cur);
    double cum = 0;
    size_t keep = cur->size;
    for (size_t i = 0; i < cur->size; i++) {
        cum += cur->data[i].p;
        if (cum >= p->f && i + 1 >= (size_t)p->i) {
            keep = i + 1;
            break;
        }
    }
    cur->size = keep;
}
static struct llama_sampler_i top_p_iface = {
    .name = top_p_name, .apply = top_p_apply, .clone = params_clone, .free = params_free,
};
struct llama_sampler *llama_sampler_init_top_p(float p, size_t min_keep) {
    return init_params(&top_p_iface, p, (int32_t)min_keep);
}

static const char *min_p_name(const struct llama_sampler *s) { (void)s; return "min-p"; }
static void min_p_apply(struct llama_sampler *s, llama_token_data_array *cur) {
    const params2 *p = s->ctx;
    if (p->f <= 0.0f || !cur->size) return;
    sort_desc(cur);
    /* p_i >= p * p_max  <=>  logit_i >= logit_max + log(p) */
    float floor = cur->data[0].logit + logf(p->f);
    size_t keep = 1;
    while (keep < cur->size && cur->data[keep].logit >= floor) keep++;
    if (keep < (size_t)p->i) keep = (size_t)p->i < cur->size ? (size_t)p->i : cur->size;
    cur->size = keep;
}
static struct llama_sampler_i min_p_iface = {
    .name = min_p_name, .apply = min_p_apply, .clone = params_clone, .free = params_free,
};
struct llama_sampler *llama_sampler_init_min_p(float p, size_t min_keep) {
    return init_params(&min_p_iface, p, (int32_t)min_keep);
}

static const char *temp_name(const struct llama_sampler *s) { (void)s; return "temp"; }
static void temp_apply(struct llama_sampler *s, llama_token_data_array *cur) {
    float t = ((params2 *)s->ctx)->f;
    if (!cur->size) return;
    if (t <= 0.0f) { /* only the most likely token stays possible */
        size_t best = 0;
        for (size_t i = 1; i < cur->size; i++)
            if (cur->data[i].logit > cur->data[best].logit) best = i;
        for (size_t i = 0; i < cur->size; i++)
            if (i != best) cur->data[i].logit = -INFINITY;
        return;
    }
    for (size_t i = 0; i < cur->size; i++) cur->data[i].logit /= t;
}
static struct llama_sampler_i temp_iface = {
    .name = temp_name, .apply = temp_apply, .clone = params_clone, .free = params_free,
};
struct llama_sampler *llama_sampler_init_temp(float t) { return init_params(&temp_iface, t, 0); }

typedef struct penalties {
    int32_t last_n;
    float repeat, freq, present;
    llama_token *ring; /* the last last_n accepted tokens */
    int32_t n, head;
} penalties;

static const char *penalties_name(const struct llama_sampler *s) { (void)s; return "penalties"; }
static void penalties_accept(struct llama_sampler *s, llama_token t) {
    penalties *p = s->ctx;
    if (p->last_n <= 0) return;
    p->ring[p->head] = t;
    p->head = (p->head + 1) % p->last_n;
    if (p->n < p->last_n) p->n++;
}
static void penalties_apply(struct llama_sampler *s, llama_token_data_array *cur) {
    penalties *p = s->ctx;
    if (p->n == 0 || (p->repeat == 1.0f && p->freq == 0.0f && p->present == 0.0f)) return;
    for (size_t i = 0; i < cur->size; i++) {
        int32_t count = 0;
        for (int32_t j = 0; j < p->n; j++) count += p->ring[j] == cur->data[i].id;
        if (!count) continue;
        float *l = &cur->data[i].logit;
        *l = *l <= 0 ? *l * p->repeat : *l / p->repeat;
        *l -= (float)count * p->freq + p->present;
    }
    cur->sorted = false;
}
static void penalties_reset(struct llama_sampler *s) {
    penalties *p = s->ctx;
    p->n = p->head = 0;
}
static void penalties_free(struct llama_sampler *s) {
    penalties *p = s->ctx;
    free(p->ring);
    free(p);
}
static struct llama_sampler *penalties_clone(const struct llama_sampler *s);
static struct llama_sampler_i penalties_iface = {
    .name = penalties_name, .accept = penalties_accept, .apply = penalties_apply, .reset = penalties_reset,
    .clone = penalties_clone, .free = penalties_free,
};
struct llama_sampler *llama_sampler_init_penalties(int32_t n_vocab, int32_t last_n, float repeat, float freq,
                                                   float present) {
    (void)n_vocab;
    penalties *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->last_n = last_n > 0 ? last_n : 0;
    p->repeat = repeat;
    p->freq = freq;
    p->present = present;
    p->ring = p->last_n ? calloc((size_t)p->last_n, sizeof *p->ring) : NULL;
    struct llama_sampler *s = (p->last_n && !p->ring) ? NULL : llama_sampler_init(&penalties_iface, p);
    if (!s) {
        free(p->ring);
        free(p);
    }
    return s;
}
static struct llama_sampler *penalties_clone(const struct llama_sampler *s) {
    const penalties *p = s->ctx;
    struct llama_sampler *r = llama_sampler_init_penalties(0, p->last_n, p->repeat, p->freq, p->present);
    if (r && p->last_n) {
        penalties *q = r->ctx;
        memcpy(q->ring, p->ring, sizeof *q->ring * (size_t)p->last_n);
        q->n = p->n;
        q->head = p->head;
    }
    return r;
}

typedef struct bias {
    int32_t n;
    llama_logit_bias *items;
} bias;

static const char *bias_name(const struct llama_sampler *s) { (void)s; return "logit-bias"; }
static void bias_apply(struct llama_sampler *s, llama_token_data_array *cur) {
    const bias *b = s->ctx;
    for (int32_t k = 0; k < b->n; k++)
        for (size_t i = 0; i < cur->size; i++)
            if (cur->data[i].id == b->items[k].token) cur->data[i].logit += b->items[k].bias;
    cur->sorted = false;
}
static void bias_free(struct llama_sampler *s) {
    bias *b = s->ctx;
    free(b->items);
    free(b);
}
static struct llama_sampler *bias_clone(const struct llama_sampler *s);
static struct llama_sampler_i bias_iface = {
    .name = bias_name, .apply = bias_apply, .clone = bias_clone, .free = bias_free,
};
struct llama_sampler *llama_sampler_init_logit_bias(int32_t n_vocab, int32_t n, const llama_logit_bias *items) {
    (void)n_vocab;
    bias *b = calloc(1, sizeof *b);
    if (!b || n < 0) {
        free(b);
        return NULL;
    }
    b->n = n;
    b->items = n ? malloc(sizeof *b->items * (size_t)n) : NULL;
    if (n && !b->items) {
        free(b);
        return NULL;
    }
    if (n) memcpy(b->items, items, sizeof *b->items * (size_t)n);
    struct llama_sampler *s = llama_sampler_init(&bias_iface, b);
    if (!s) bias_free(&(struct llama_sampler){&bias_iface, b});
    return s;
}
static struct llama_sampler *bias_clone(const struct llama_sampler *s) {
    const bias *b = s->ctx;
    return llama_sampler_init_logit_bias(0, b->n, b->items);
}
