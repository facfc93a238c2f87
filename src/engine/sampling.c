/* sampling.c — picks the next token from a row of logits (the braid_sampler API of braid.h).
 *
 * The stages run in the order llama.cpp's default chain uses, so that the same settings mean the same thing in
 * both engines:  penalties -> top-k -> top-p -> min-p -> temperature -> draw.
 *   penalties    over the last penalty_last_n accepted tokens: a token seen c > 0 times has its logit divided by
 *                repeat_penalty if positive (multiplied if <= 0), then lowered by c * frequency_penalty +
 *                presence_penalty.
 *   top-k        keep the k best tokens.
 *   top-p        keep the shortest prefix of the sorted survivors whose probability (at temperature 1,
 *                normalized over the survivors) reaches top_p; at least one token.
 *   min-p        keep tokens whose probability is at least min_p times the best one's.
 *   temperature  divide the survivors' logits by it; <= 0 means greedy (argmax after the penalties).
 * "Better" is a total order: higher logit, then lower id, so ties are broken the same way on every run and
 * greedy picks the lowest id among equal maxima.
 *
 * Randomness: xoshiro256** (Blackman & Vigna, 2018; public domain algorithm, written here from its
 * description), seeded by expanding the 64-bit seed with splitmix64 as its authors recommend. It is small,
 * fast, has a 2^256 period and passes BigCrush; a draw uses the top 53 bits as a double in [0, 1). The same
 * seed and the same logits give the same tokens on every machine.
 *
 * Memory: the history ring and its sort buffer are allocated by braid_sampler_new; the per-vocabulary buffers
 * (a penalized copy of the logits and the candidate list) on the first sample call with that n_vocab, and again
 * only if a later call brings a larger one. A sample call with the same n_vocab allocates nothing.
 *
 * Cost per call: O(n_vocab) for the copy, penalties and the softmax denominator; top-k adds O(n_vocab log k)
 * (a min-heap that rejects most tokens with one comparison); top-p without top-k bins the candidates by logit
 * and sorts only the bin where the mass crosses top_p (see top_p_cut), never the whole vocabulary. Exponentials
 * are single precision (expf is several times faster than exp) and summed in double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "braid.h"
#include "engine/sampling.h"

/* Constrained sampling walks at most this many of the best tokens for allowed ones before it checks the whole
 * vocabulary instead. */
#define WALK_BUDGET 4096

/* Penalty windows longer than this are refused (a sort of the window happens on every call). */
#define SAMPLER_MAX_LAST_N (1 << 20)

typedef struct {
    float logit;
    braid_token id;
} cand;

struct braid_sampler {
    braid_sampler_params p;
    uint64_t rng[4]; /* xoshiro256** state */

    braid_token *hist;      /* [penalty_last_n] ring of the last accepted tokens */
    braid_token *hist_sort; /* [penalty_last_n] scratch: a sorted copy, to count repeats */
    int32_t hist_len;       /* tokens in the ring (<= penalty_last_n) */
    int32_t hist_head;      /* index of the next write */

    int32_t cap_vocab; /* capacity of the two buffers below */
    float *work;       /* [cap_vocab] logits after the penalties */
    cand *cands;       /* [cap_vocab] candidate list */
    /* constrained sampling (bd_sampler_sample_allowed), allocated on its first call */
    cand *sel;          /* [WALK_BUDGET] the best tokens in order, walked for allowed ones */
    uint8_t *allowed;   /* [cap_allowed] a full mask */
    int32_t cap_allowed;
};

/* ---- xoshiro256** seeded with splitmix64 ----------------------------------------------------------------- */

static uint64_t splitmix64_next(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl64(uint64_t v, int k) { return (v << k) | (v >> (64 - k)); }

static uint64_t xoshiro_next(uint64_t s[4]) {
    const uint64_t result = rotl64(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

static void rng_seed(uint64_t s[4], uint64_t seed) {
    /* splitmix64 never yields four zero words in a row, so the xoshiro state is never all zero. */
    for (int i = 0; i < 4; i++) s[i] = splitmix64_next(&seed);
}

/* Uniform double in [0, 1). */
static double rng_uniform(uint64_t s[4]) { return (double)(xoshiro_next(s) >> 11) * 0x1.0p-53; }

/* ---- parameters --------------------------------------------------------------------------------------------- */

braid_sampler_params braid_sampler_default_params(void) {
    braid_sampler_params p;
    memset(&p, 0, sizeof p);
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.repeat_penalty = 1.0f;
    p.frequency_penalty = 0.0f;
    p.presence_penalty = 0.0f;
    p.penalty_last_n = 64;
    p.seed = 0x5eed;
    return p;
}

static braid_status sampler_check_params(const braid_sampler_params *p) {
    if (isnan(p->temperature) || isinf(p->temperature))
        return bd_error(BRAID_E_INVALID, "sampler: temperature must be a finite number (got %g)",
                        (double)p->temperature);
    if (isnan(p->top_p) || p->top_p < 0.0f)
        return bd_error(BRAID_E_INVALID, "sampler: top_p must be >= 0 (got %g)", (double)p->top_p);
    if (isnan(p->min_p) || p->min_p > 1.0f)
        return bd_error(BRAID_E_INVALID, "sampler: min_p must be <= 1 (got %g)", (double)p->min_p);
    if (!(p->repeat_penalty > 0.0f) || isinf(p->repeat_penalty))
        return bd_error(BRAID_E_INVALID, "sampler: repeat_penalty must be finite and > 0 (got %g)",
                        (double)p->repeat_penalty);
    if (!isfinite(p->frequency_penalty) || !isfinite(p->presence_penalty))
        return bd_error(BRAID_E_INVALID, "sampler: frequency and presence penalties must be finite");
    if (p->penalty_last_n < 0 || p->penalty_last_n > SAMPLER_MAX_LAST_N)
        return bd_error(BRAID_E_INVALID, "sampler: penalty_last_n must be in [0, %d] (got %d)", SAMPLER_MAX_LAST_N,
                        (int)p->penalty_last_n);
    return BRAID_OK;
}

/* ---- life cycle --------------------------------------------------------------------------------------------- */

/* On success *out owns a sampler; release with braid_sampler_free. */
braid_status braid_sampler_new(const braid_sampler_params *params, braid_sampler **out) {
    if (!params || !out) return bd_error(BRAID_E_INVALID, "sampler: NULL params or out");
    BD_TRY(sampler_check_params(params));
    braid_sampler *s = bd_calloc(1, sizeof *s);
    if (!s) return bd_error(BRAID_E_NOMEM, "sampler: out of memory");
    s->p = *params;
    rng_seed(s->rng, params->seed);
    if (params->penalty_last_n > 0) {
        s->hist = bd_mallocn((size_t)params->penalty_last_n, sizeof *s->hist);
        s->hist_sort = bd_mallocn((size_t)params->penalty_last_n, sizeof *s->hist_sort);
        if (!s->hist || !s->hist_sort) {
            braid_sampler_free(s);
            return bd_error(BRAID_E_NOMEM, "sampler: out of memory for a history of %d tokens",
                            (int)params->penalty_last_n);
        }
    }
    *out = s;
    return BRAID_OK;
}

void braid_sampler_free(braid_sampler *s) {
    if (!s) return;
    bd_free(s->hist);
    bd_free(s->hist_sort);
    bd_free(s->work);
    bd_free(s->cands);
    bd_free(s->sel);
    bd_free(s->allowed);
    bd_free(s);
}

void braid_sampler_accept(braid_sampler *s, braid_token t) {
    if (!s || s->p.penalty_last_n <= 0) return;
    s->hist[s->hist_head] = t;
    s->hist_head = (s->hist_head + 1) % s->p.penalty_last_n;
    if (s->hist_len < s->p.penalty_last_n) s->hist_len++;
}

/* Grows the per-vocabulary buffers to n entries; nothing changes on failure. */
static braid_status sampler_reserve(braid_sampler *s, int32_t n) {
    if (n <= s->cap_vocab) return BRAID_OK;
    float *work = bd_mallocn((size_t)n, sizeof *work);
    cand *cands = bd_mallocn((size_t)n, sizeof *cands);
    if (!work || !cands) {
        bd_free(work);
        bd_free(cands);
        return bd_error(BRAID_E_NOMEM, "sampler: out of memory for a vocabulary of %d", (int)n);
    }
    bd_free(s->work);
    bd_free(s->cands);
    s->work = work;
    s->cands = cands;
    s->cap_vocab = n;
    return BRAID_OK;
}

/* ---- stages ------------------------------------------------------------------------------------------------- */

static int cmp_token(const void *a, const void *b) {
    braid_token x = *(const braid_token *)a, y = *(const braid_token *)b;
    return (x > y) - (x < y);
}

/* Applies the repetition, frequency and presence penalties to work[0..n) for the tokens in the history. */
static void apply_penalties(braid_sampler *s, float *work, int32_t n) {
    const braid_sampler_params *p = &s->p;
    if (s->hist_len == 0) return;
    if (p->repeat_penalty == 1.0f && p->frequency_penalty == 0.0f && p->presence_penalty == 0.0f) return;
    /* Sorting a copy of the window groups each token's occurrences into one run: its count. */
    memcpy(s->hist_sort, s->hist, (size_t)s->hist_len * sizeof *s->hist);
    qsort(s->hist_sort, (size_t)s->hist_len, sizeof *s->hist_sort, cmp_token);
    for (int32_t i = 0; i < s->hist_len;) {
        braid_token t = s->hist_sort[i];
        int32_t j = i;
        while (j < s->hist_len && s->hist_sort[j] == t) j++;
        int32_t count = j - i;
        i = j;
        if (t < 0 || t >= n) continue; /* a token of another vocabulary cannot be penalized here */
        float l = work[t];
        l = l <= 0.0f ? l * p->repeat_penalty : l / p->repeat_penalty;
        work[t] = l - (float)count * p->frequency_penalty - p->presence_penalty;
    }
}

/* a ranks before b: higher logit, then lower id. */
static inline int cand_better(const cand *a, const cand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

/* Min-heap on "better" (the root is the worst of the heap) over h[0..k). */
static void heap_sift_down(cand *h, int32_t k, int32_t i) {
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < k && cand_better(&h[w], &h[l])) w = l;
        if (r < k && cand_better(&h[w], &h[r])) w = r;
        if (w == i) return;
        cand t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

/* Moves the k best of c[0..n) to c[0..k), sorted best first. O(n log k), in place. */
static void select_top(cand *c, int32_t n, int32_t k) {
    if (k > n) k = n;
    if (k <= 0) return;
    for (int32_t i = k / 2 - 1; i >= 0; i--) heap_sift_down(c, k, i);
    for (int32_t i = k; i < n; i++) {
        if (cand_better(&c[i], &c[0])) {
            cand t = c[0];
            c[0] = c[i];
            c[i] = t;
            heap_sift_down(c, k, 0);
        }
    }
    /* Heap sort: repeatedly move the worst to the end, which leaves the array sorted best first. */
    for (int32_t end = k - 1; end > 0; end--) {
        cand t = c[0];
        c[0] = c[end];
        c[end] = t;
        heap_sift_down(c, end, 0);
    }
}

/* The k best finite tokens of work[0..n) into c, sorted best first, without first listing every token (the
 * heap rejects most tokens with one comparison). Returns how many (fewer than k if fewer are finite). */
static int32_t select_top_from(const float *work, int32_t n, int32_t k, cand *c) {
    int32_t m = 0, i = 0;
    for (; i < n && m < k; i++)
        if (work[i] != -INFINITY) c[m++] = (cand){work[i], i};
    for (int32_t j = m / 2 - 1; j >= 0; j--) heap_sift_down(c, m, j);
    for (; i < n; i++) {
        cand x = {work[i], i};
        if (cand_better(&x, &c[0])) { /* -inf never beats the heap's worst, which is finite */
            c[0] = x;
            heap_sift_down(c, m, 0);
        }
    }
    for (int32_t end = m - 1; end > 0; end--) {
        cand t = c[0];
        c[0] = c[end];
        c[end] = t;
        heap_sift_down(c, end, 0);
    }
    return m;
}

/* The largest value of w[0..n) (none NaN). Eight independent lanes let the compiler use vector max. */
static float max_of(const float *w, int32_t n) {
    float m[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    int32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) m[j] = w[i + j] > m[j] ? w[i + j] : m[j];
    for (; i < n; i++) m[0] = w[i] > m[0] ? w[i] : m[0];
    for (int j = 1; j < 8; j++) m[0] = m[j] > m[0] ? m[j] : m[0];
    return m[0];
}

/* top-p buckets: (max - logit) in [0, TOP_P_RANGE) split into TOP_P_BUCKETS; everything lower shares the last
 * bucket (each such token weighs less than e^-32 of the best one). */
#define TOP_P_BUCKETS 1024
#define TOP_P_RANGE 32.0f

static inline int top_p_bucket(float l, float max_l) {
    float d = (max_l - l) * (TOP_P_BUCKETS / TOP_P_RANGE);
    return d < (float)(TOP_P_BUCKETS - 1) ? (int)d : TOP_P_BUCKETS - 1;
}

/* Keeps in c[0..*n) the shortest best-first prefix whose mass reaches target (masses are exp(l - max_l); the
 * caller's target is top_p times the denominator over the tokens before min-p). c need not be sorted and is
 * left unsorted: tokens are binned by logit, the bins are summed best first to find the one where the mass
 * crosses the target, and only that bin is sorted to find the exact cut. O(n) plus the sort of one bin, where
 * sorting everything would cost O(n log n) on a flat distribution of a 250k vocabulary. */
static void top_p_cut(cand *c, int32_t *n, float max_l, double target) {
    int32_t m = *n;
    double cum = 0.0;
    if (m <= 256) { /* small: sort it all */
        select_top(c, m, m);
        for (int32_t i = 0; i < m; i++) {
            cum += exp((double)c[i].logit - (double)max_l);
            if (cum >= target) {
                *n = i + 1;
                return;
            }
        }
        return; /* rounding kept the sum just under the target: keep everything */
    }
    double mass[TOP_P_BUCKETS];
    memset(mass, 0, sizeof mass);
    for (int32_t i = 0; i < m; i++) mass[top_p_bucket(c[i].logit, max_l)] += expf(c[i].logit - max_l);
    int b = 0;
    while (b < TOP_P_BUCKETS && cum + mass[b] < target) cum += mass[b++];
    if (b == TOP_P_BUCKETS) return;
    /* Partition: bins before b (all kept), then bin b, then the rest (dropped). */
    int32_t a = 0;
    for (int32_t i = 0; i < m; i++)
        if (top_p_bucket(c[i].logit, max_l) < b) {
            cand t = c[a];
            c[a++] = c[i];
            c[i] = t;
        }
    int32_t e = a;
    for (int32_t i = a; i < m; i++)
        if (top_p_bucket(c[i].logit, max_l) == b) {
            cand t = c[e];
            c[e++] = c[i];
            c[i] = t;
        }
    select_top(c + a, e - a, e - a);
    for (int32_t i = a; i < e; i++) {
        cum += expf(c[i].logit - max_l);
        if (cum >= target) {
            *n = i + 1;
            return;
        }
    }
    *n = e;
}

/* ---- sampling ----------------------------------------------------------------------------------------------- */

/* Every stage but the draw: leaves the kept tokens in s->cands[0..*n) with their (penalized) logits, and the
 * best token's logit in *max_l. When the choice is greedy, *n is 0 and *greedy is the answer. */
/* The copy of the logits the stages work on: s->work[0..n_vocab) after the penalties. */
static braid_status sampler_prepare(braid_sampler *s, const float *logits, int32_t n_vocab) {
    if (!s || !logits) return bd_error(BRAID_E_INVALID, "sampler: NULL sampler or logits");
    if (n_vocab <= 0) return bd_error(BRAID_E_INVALID, "sampler: n_vocab must be > 0 (got %d)", (int)n_vocab);
    BD_TRY(sampler_reserve(s, n_vocab));

    /* Copy and check in one pass: -inf is a legitimate mask; NaN and +inf mean the forward pass went wrong
     * (!(x < inf) catches both, and the loop stays branch-free so it vectorizes). */
    float *work = s->work; /* [n_vocab] */
    int bad = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        float x = logits[i];
        work[i] = x;
        bad |= !(x < INFINITY);
    }
    if (bad) {
        for (int32_t i = 0; i < n_vocab; i++)
            if (!(logits[i] < INFINITY))
                return bd_error(BRAID_E_INVALID, "sampler: logit %d is %g", (int)i, (double)logits[i]);
    }
    apply_penalties(s, work, n_vocab);
    return BRAID_OK;
}

/* The stages after the penalties over s->work (see sampler_filter). */
static braid_status sampler_stages(braid_sampler *s, int32_t n_vocab, int32_t *n_out, float *max_out,
                                   braid_token *greedy) {
    const braid_sampler_params *p = &s->p;
    float *work = s->work; /* [n_vocab] */

    /* The best token after the penalties (lowest id among equals): the answer when greedy, and the reference
     * for min-p and for the exponentials otherwise. */
    float max_l = max_of(work, n_vocab);
    if (max_l == -INFINITY) return bd_error(BRAID_E_INVALID, "sampler: every logit is -inf");
    int32_t best = 0;
    while (work[best] != max_l) best++;
    *max_out = max_l;
    *greedy = best;
    *n_out = 0;
    if (p->temperature <= 0.0f || p->top_k == 1) return BRAID_OK;

    /* Candidates: the top-k (sorted best first), or every finite token. */
    cand *c = s->cands; /* [n_vocab] */
    int32_t n = 0;
    int sorted = 0;
    double z = 0.0; /* softmax denominator at temperature 1 over the tokens top-p sees */
    if (p->top_k > 0 && p->top_k < n_vocab) {
        n = select_top_from(work, n_vocab, p->top_k, c);
        sorted = 1;
        if (p->top_p < 1.0f)
            for (int32_t i = 0; i < n; i++) z += expf(c[i].logit - max_l);
    } else if (p->min_p > 0.0f) {
        /* Only the tokens min-p keeps are listed; top-p still needs the mass of all of them. */
        float thresh = max_l + logf(p->min_p);
        for (int32_t i = 0; i < n_vocab; i++) {
            if (p->top_p < 1.0f) z += expf(work[i] - max_l);
            if (work[i] >= thresh) c[n++] = (cand){work[i], i};
        }
    } else {
        for (int32_t i = 0; i < n_vocab; i++) {
            if (work[i] == -INFINITY) continue;
            if (p->top_p < 1.0f) z += expf(work[i] - max_l);
            c[n++] = (cand){work[i], i};
        }
    }

    /* min-p keeps logit >= max + log(min_p): a prefix of the sorted order, as top-p keeps, so applying it
     * after top-p (llama.cpp's order) is keeping the shorter of the two prefixes; top-p's masses are
     * normalized over the tokens before min-p (z above). */
    if (sorted && p->min_p > 0.0f) {
        float thresh = max_l + logf(p->min_p);
        while (n > 1 && c[n - 1].logit < thresh) n--;
    }
    if (p->top_p < 1.0f) {
        double target = (double)p->top_p * z;
        if (sorted) {
            double cum = 0.0;
            for (int32_t i = 0; i < n; i++) {
                cum += expf(c[i].logit - max_l);
                if (cum >= target) {
                    n = i + 1;
                    break;
                }
            }
        } else {
            top_p_cut(c, &n, max_l, target);
        }
    }

    *n_out = n;
    return BRAID_OK;
}

static braid_status sampler_filter(braid_sampler *s, const float *logits, int32_t n_vocab, int32_t *n_out,
                                   float *max_out, braid_token *greedy) {
    BD_TRY(sampler_prepare(s, logits, n_vocab));
    return sampler_stages(s, n_vocab, n_out, max_out, greedy);
}

braid_status bd_sampler_kept(braid_sampler *s, const float *logits, int32_t n_vocab, braid_token *ids, int32_t cap,
                             int32_t *n_out) {
    if (!ids || !n_out) return bd_error(BRAID_E_INVALID, "sampler: NULL ids or n_out");
    int32_t n;
    float max_l;
    braid_token best;
    BD_TRY(sampler_filter(s, logits, n_vocab, &n, &max_l, &best));
    if (n == 0) {
        if (cap < 1) return bd_error(BRAID_E_RANGE, "sampler: no room for the kept token");
        ids[0] = best;
        *n_out = 1;
        return BRAID_OK;
    }
    if (n > cap) return bd_error(BRAID_E_RANGE, "sampler: %d kept tokens, room for %d", (int)n, (int)cap);
    for (int32_t i = 0; i < n; i++) ids[i] = s->cands[i].id;
    *n_out = n;
    return BRAID_OK;
}

/* Replaces the logits of the n kept candidates by their weights at the sampler's temperature (the logit is not
 * needed after this) and returns the weights' sum. */
static double temper(braid_sampler *s, int32_t n, float max_l) {
    cand *c = s->cands;
    float inv_t = 1.0f / s->p.temperature;
    double total = 0.0;
    for (int32_t i = 0; i < n; i++) {
        c[i].logit = expf((c[i].logit - max_l) * inv_t);
        total += c[i].logit;
    }
    return total;
}

/* Temperature over the n candidates left, then a draw from their softmax. */
static braid_token draw_tempered(braid_sampler *s, int32_t n, float max_l) {
    const cand *c = s->cands;
    double total = temper(s, n, max_l);
    double u = rng_uniform(s->rng) * total, acc = 0.0;
    for (int32_t i = 0; i < n; i++) {
        acc += c[i].logit;
        if (u < acc) return c[i].id;
    }
    return c[n - 1].id; /* u landed in the rounding gap at the very top */
}

braid_status braid_sampler_sample(braid_sampler *s, const float *logits, int32_t n_vocab, braid_token *out) {
    if (!out) return bd_error(BRAID_E_INVALID, "sampler: NULL out");
    int32_t n;
    float max_l;
    braid_token best;
    BD_TRY(sampler_filter(s, logits, n_vocab, &n, &max_l, &best));
    if (n == 0) {
        *out = best;
        return BRAID_OK;
    }
    *out = draw_tempered(s, n, max_l);
    return BRAID_OK;
}

braid_status bd_sampler_probs(braid_sampler *s, const float *logits, int32_t n_vocab, float *probs) {
    if (!probs) return bd_error(BRAID_E_INVALID, "sampler: NULL probs");
    int32_t n;
    float max_l;
    braid_token best;
    BD_TRY(sampler_filter(s, logits, n_vocab, &n, &max_l, &best));
    memset(probs, 0, (size_t)n_vocab * sizeof *probs);
    if (n == 0) {
        probs[best] = 1.0f;
        return BRAID_OK;
    }
    /* The same weights braid_sampler_sample draws from, normalized. */
    double total = temper(s, n, max_l);
    for (int32_t i = 0; i < n; i++) probs[s->cands[i].id] = (float)(s->cands[i].logit / total);
    return BRAID_OK;
}

double bd_sampler_uniform(braid_sampler *s) { return rng_uniform(s->rng); }

braid_token bd_pick_weighted(const float *w, int32_t n, double u) {
    double total = 0.0;
    for (int32_t i = 0; i < n; i++) total += w[i];
    double target = u * total, acc = 0.0;
    braid_token last = 0;
    for (int32_t i = 0; i < n; i++) {
        if (w[i] <= 0.0f) continue;
        acc += w[i];
        last = i;
        if (target < acc) return i;
    }
    return last;
}

int bd_sampler_is_greedy(const braid_sampler *s) { return s->p.temperature <= 0.0f || s->p.top_k == 1; }

/* ---- constrained sampling -------------------------------------------------------------------------------------
 *
 * The distribution is the one the sampler would draw from if every token the constraint refuses had logit
 * -inf before the stages run: penalties -> mask -> top-k -> top-p -> min-p -> temperature -> draw (the mask
 * comes before the truncations, as llama.cpp's grammar sampler does, so top-k means the k best *allowed*
 * tokens and top-p's masses are normalized over allowed tokens). Penalties act on each token alone, so they
 * commute with the mask. Building the whole mask costs a check of every token; exactness needs far less:
 *   greedy       the best allowed token: walk the tokens best first until one is allowed (usually the first);
 *   top-k = k    the k best allowed tokens are all the later stages look at: walk best first until k allowed
 *                ones are found (k checks when the model's favourites are allowed), then run min-p, top-p and
 *                temperature on them exactly as the unconstrained sampler runs them on its top k;
 *   no top-k, no top-p, no min-p (temperature only): draw from the unmasked distribution and keep the token
 *                if it is allowed, else draw from the fully masked one. P(t) = p(t) + (1 - p(A)) p(t)/p(A) =
 *                p(t)/p(A) for allowed t: exactly the masked distribution (one check in the common case);
 *   otherwise (top-p or min-p without top-k: their cuts depend on the mass of every allowed token), and when a
 *                walk passes WALK_BUDGET tokens: the full mask.
 * The walk lists the best tokens with the same total order as the stages (higher logit, then lower id). */
braid_status bd_sampler_sample_allowed(braid_sampler *s, const float *logits, int32_t n_vocab, bd_allow_fn allow,
                                       bd_mask_fn mask, void *user, braid_token *out) {
    if (!out || !allow || !mask) return bd_error(BRAID_E_INVALID, "sampler: NULL argument");
    BD_TRY(sampler_prepare(s, logits, n_vocab));
    const braid_sampler_params *p = &s->p;
    const int greedy = p->temperature <= 0.0f || p->top_k == 1;
    float *work = s->work;
    if (greedy || (p->top_k > 0 && p->top_k < n_vocab)) {
        if (!s->sel) {
            s->sel = bd_mallocn(WALK_BUDGET, sizeof *s->sel);
            if (!s->sel) return bd_error(BRAID_E_NOMEM, "sampler: out of memory");
        }
        const int32_t k = greedy ? 1 : p->top_k;
        int32_t found = 0, checked = 0, exhausted = 0;
        for (int32_t want = 64;; want *= 8) {
            if (want > WALK_BUDGET) want = WALK_BUDGET;
            if (want > n_vocab) want = n_vocab;
            int32_t m = select_top_from(work, n_vocab, want, s->sel);
            for (; checked < m && found < k; checked++)
                if (allow(user, s->sel[checked].id)) s->cands[found++] = s->sel[checked];
            exhausted = m < want || m == n_vocab; /* every finite token was listed */
            if (found == k || exhausted || want == WALK_BUDGET) break;
        }
        if (found == k || exhausted) {
            if (found == 0) return bd_error(BRAID_E_INVALID, "sampler: the constraint allows no token of the vocabulary");
            if (greedy) {
                *out = s->cands[0].id;
                return BRAID_OK;
            }
            /* min-p and top-p on the sorted allowed top-k, as sampler_stages does on the unmasked top-k */
            cand *c = s->cands;
            int32_t n = found;
            float max_l = c[0].logit;
            if (p->min_p > 0.0f) {
                float thresh = max_l + logf(p->min_p);
                while (n > 1 && c[n - 1].logit < thresh) n--;
            }
            if (p->top_p < 1.0f) {
                double z = 0.0, cum = 0.0;
                for (int32_t i = 0; i < found; i++) z += expf(c[i].logit - max_l);
                double target = (double)p->top_p * z;
                for (int32_t i = 0; i < n; i++) {
                    cum += expf(c[i].logit - max_l);
                    if (cum >= target) {
                        n = i + 1;
                        break;
                    }
                }
            }
            *out = draw_tempered(s, n, max_l);
            return BRAID_OK;
        }
    } else if (p->top_p >= 1.0f && p->min_p <= 0.0f) {
        int32_t n;
        float max_l;
        braid_token best;
        BD_TRY(sampler_stages(s, n_vocab, &n, &max_l, &best));
        double total = temper(s, n, max_l);
        double u = rng_uniform(s->rng) * total, acc = 0.0;
        braid_token t = s->cands[n - 1].id;
        for (int32_t i = 0; i < n; i++) {
            acc += s->cands[i].logit;
            if (u < acc) {
                t = s->cands[i].id;
                break;
            }
        }
        if (allow(user, t)) {
            *out = t;
            return BRAID_OK;
        }
    }
    /* the full mask */
    if (s->cap_allowed < n_vocab) {
        uint8_t *a = bd_malloc((size_t)n_vocab);
        if (!a) return bd_error(BRAID_E_NOMEM, "sampler: out of memory");
        bd_free(s->allowed);
        s->allowed = a;
        s->cap_allowed = n_vocab;
    }
    BD_TRY(mask(user, s->allowed, n_vocab));
    int any = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        if (!s->allowed[i]) work[i] = -INFINITY;
        else any |= work[i] != -INFINITY;
    }
    if (!any) return bd_error(BRAID_E_INVALID, "sampler: the constraint allows no token of the vocabulary");
    int32_t n;
    float max_l;
    braid_token best;
    BD_TRY(sampler_stages(s, n_vocab, &n, &max_l, &best));
    if (n == 0) {
        *out = best;
        return BRAID_OK;
    }
    double total = temper(s, n, max_l);
    double u = rng_uniform(s->rng) * total, acc = 0.0;
    for (int32_t i = 0; i < n; i++) {
        acc += s->cands[i].logit;
        if (u < acc) {
            *out = s->cands[i].id;
            return BRAID_OK;
        }
    }
    *out = s->cands[n - 1].id;
    return BRAID_OK;
}
