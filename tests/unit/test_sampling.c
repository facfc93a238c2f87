/* test_sampling.c — the braid_sampler: greedy and its tie rule, the filters (top-k, top-p, min-p), the
 * temperature, the penalties, seeding, the distribution it draws from (chi-square against the softmax),
 * no allocation per call once sized, and refusal of bad parameters. */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "braid.h"
#include "engine/sampling.h"
#include "test.h"

/* Parameters with every filter off, at temperature t. */
static braid_sampler_params plain(float t, uint64_t seed) {
    braid_sampler_params p = braid_sampler_default_params();
    p.temperature = t;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.seed = seed;
    return p;
}

static braid_token sample1(braid_sampler *s, const float *logits, int32_t n) {
    braid_token t = -1;
    braid_status st = braid_sampler_sample(s, logits, n, &t);
    if (st != BRAID_OK) fprintf(stderr, "sample: %s\n", braid_last_error());
    return t;
}

/* Chi-square statistic of counts[0..n) over `draws` draws against the probabilities expected[0..n) (tokens
 * with expected 0 must never be drawn: returns +inf if one was). */
static double chi_square(const int *counts, const double *expected, int n, int draws) {
    double x2 = 0.0;
    for (int i = 0; i < n; i++) {
        double e = expected[i] * draws;
        if (e == 0.0) {
            if (counts[i]) return INFINITY;
            continue;
        }
        x2 += (counts[i] - e) * (counts[i] - e) / e;
    }
    return x2;
}

/* softmax(logits / t) restricted to the tokens with keep[i] != 0. */
static void softmax_ref(const float *logits, const int *keep, int n, double t, double *out) {
    double mx = -INFINITY, z = 0.0;
    for (int i = 0; i < n; i++)
        if (keep[i] && logits[i] > mx) mx = logits[i];
    for (int i = 0; i < n; i++) z += out[i] = keep[i] ? exp((logits[i] - mx) / t) : 0.0;
    for (int i = 0; i < n; i++) out[i] /= z;
}

static void test_greedy(void) {
    braid_sampler *s = NULL;
    braid_sampler_params p = plain(0.0f, 1);
    CHECK_STATUS(braid_sampler_new(&p, &s), BRAID_OK);
    float l[6] = {0.1f, 3.0f, -2.0f, 3.0f, 2.9f, -INFINITY};
    CHECK(sample1(s, l, 6) == 1, "greedy picks the argmax, lowest id on ties");
    float l2[4] = {-5.0f, -1.0f, -1.0f, -3.0f};
    CHECK(sample1(s, l2, 4) == 1, "greedy with negative logits and a tie");
    braid_sampler_free(s);

    /* top-k = 1 at a high temperature is greedy too. */
    p = plain(5.0f, 7);
    p.top_k = 1;
    CHECK_STATUS(braid_sampler_new(&p, &s), BRAID_OK);
    int ok = 1;
    for (int i = 0; i < 200; i++) ok &= sample1(s, l, 6) == 1;
    CHECK(ok, "top-k = 1 equals greedy");
    braid_sampler_free(s);

    /* A very small temperature is effectively greedy as well. */
    p = plain(1e-3f, 7);
    CHECK_STATUS(braid_sampler_new(&p, &s), BRAID_OK);
    float l3[5] = {0.0f, 1.0f, 2.0f, 1.5f, 0.5f};
    ok = 1;
    for (int i = 0; i < 200; i++) ok &= sample1(s, l3, 5) == 2;
    CHECK(ok, "temperature 1e-3 picks the argmax");
    braid_sampler_free(s);
}

static void test_seed(void) {
    enum { N = 50, DRAWS = 1000 };
    float l[N];
    for (int i = 0; i < N; i++) l[i] = (float)sin(i * 1.7) * 2.0f;
    braid_sampler_params p = plain(1.0f, 1234);
    p.top_k = 20;
    p.top_p = 0.9f;
    braid_sampler *a = NULL, *b = NULL, *c = NULL;
    CHECK_STATUS(braid_sampler_new(&p, &a), BRAID_OK);
    CHECK_STATUS(braid_sampler_new(&p, &b), BRAID_OK);
    p.seed = 1235;
    CHECK_STATUS(braid_sampler_new(&p, &c), BRAID_OK);
    int same = 1, differ = 0;
    for (int i = 0; i < DRAWS; i++) {
        braid_token x = sample1(a, l, N), y = sample1(b, l, N), z = sample1(c, l, N);
        same &= x == y;
        differ |= x != z;
    }
    CHECK(same, "the same seed reproduces the same draws");
    CHECK(differ, "another seed gives other draws");
    braid_sampler_free(a);
    braid_sampler_free(b);
    braid_sampler_free(c);
}

/* Draws `draws` tokens and returns the chi-square against the reference; fails if a token outside the
 * reference's support appears. */
static double run_chi(const braid_sampler_params *p, const float *l, const int *keep, int n, int draws) {
    braid_sampler *s = NULL;
    if (braid_sampler_new(p, &s) != BRAID_OK) return INFINITY;
    int counts[16] = {0};
    double ref[16];
    softmax_ref(l, keep, n, p->temperature, ref);
    for (int i = 0; i < draws; i++) {
        braid_token t = sample1(s, l, n);
        if (t < 0 || t >= n) {
            braid_sampler_free(s);
            return INFINITY;
        }
        counts[t]++;
    }
    braid_sampler_free(s);
    return chi_square(counts, ref, n, draws);
}

static void test_distribution(void) {
    /* 8 tokens; the critical values are chi-square quantiles at p = 0.001 (the draws are seeded, so the
     * statistic is fixed per seed; the bound says a correct sampler passes for all but 1 seed in 1000). */
    const float l[8] = {1.0f, 0.5f, 0.0f, -0.5f, 2.0f, -1.0f, 1.5f, 0.2f};
    const int all[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    const int draws = 20000;

    braid_sampler_params p = plain(1.0f, 42);
    double x2 = run_chi(&p, l, all, 8, draws);
    CHECK(x2 < 24.32, "temperature 1 matches softmax: chi2 = %.2f (df 7, bound 24.32)", x2);

    p = plain(0.5f, 43);
    x2 = run_chi(&p, l, all, 8, draws);
    CHECK(x2 < 24.32, "temperature 0.5 matches softmax(l / 0.5): chi2 = %.2f", x2);

    /* top-k = 3 keeps tokens 4 (2.0), 6 (1.5), 0 (1.0). */
    p = plain(0.7f, 44);
    p.top_k = 3;
    const int k3[8] = {1, 0, 0, 0, 1, 0, 1, 0};
    x2 = run_chi(&p, l, k3, 8, draws);
    CHECK(x2 < 13.82, "top-k 3 at temperature 0.7: chi2 = %.2f (df 2, bound 13.82)", x2);

    /* top-p: probabilities at temperature 1 sorted: 4, 6, 0, 1, 7, 2, 3, 5. Find the shortest prefix whose
     * mass reaches 0.8 from the reference, then check the sampler keeps exactly that. */
    double ref[8];
    softmax_ref(l, all, 8, 1.0, ref);
    const int order[8] = {4, 6, 0, 1, 7, 2, 3, 5};
    int kp[8] = {0};
    double cum = 0.0;
    for (int i = 0; i < 8 && cum < 0.8; i++) {
        kp[order[i]] = 1;
        cum += ref[order[i]];
    }
    p = plain(1.0f, 45);
    p.top_p = 0.8f;
    x2 = run_chi(&p, l, kp, 8, draws);
    CHECK(x2 < 20.52, "top-p 0.8: chi2 = %.2f (bound 20.52 for df <= 5)", x2);

    /* min-p 0.3: keep p >= 0.3 * p_max, i.e. logit >= 2.0 + ln 0.3 = 0.796: tokens 4, 6, 0. */
    p = plain(1.0f, 46);
    p.min_p = 0.3f;
    x2 = run_chi(&p, l, k3, 8, draws);
    CHECK(x2 < 13.82, "min-p 0.3: chi2 = %.2f (df 2, bound 13.82)", x2);

    /* Penalties move mass the way they must: token 4 seen 3 times with frequency 0.5 -> logit 0.5. */
    p = plain(1.0f, 47);
    p.frequency_penalty = 0.5f;
    braid_sampler *s = NULL;
    CHECK_STATUS(braid_sampler_new(&p, &s), BRAID_OK);
    for (int i = 0; i < 3; i++) braid_sampler_accept(s, 4);
    float lp[8];
    memcpy(lp, l, sizeof lp);
    lp[4] = 0.5f;
    softmax_ref(lp, all, 8, 1.0, ref);
    int counts[8] = {0};
    for (int i = 0; i < draws; i++) counts[sample1(s, l, 8) & 7]++;
    x2 = chi_square(counts, ref, 8, draws);
    CHECK(x2 < 24.32, "frequency penalty reshapes the distribution: chi2 = %.2f", x2);
    braid_sampler_free(s);
}

/* top-p without top-k on a large vocabulary goes through the binned cut (top_p_cut): make the kept set large
 * (hundreds of near-equal tokens spread over the vocabulary) and check every draw is inside the exact
 * reference set. */
static void test_top_p_large(void) {
    enum { N = 100000, HIGH = 1000 };
    static float l[N];
    for (int i = 0; i < N; i++) l[i] = 0.0f;
    /* HIGH tokens at logit 8 spread over the vocabulary, each a little above the next so the order is known. */
    for (int j = 0; j < HIGH; j++) l[(j * 97) % N] = 8.0f - (float)j * 1e-4f;
    double mx = 8.0, z = 0.0;
    for (int i = 0; i < N; i++) z += exp(l[i] - mx);
    /* The reference: the shortest prefix of the high tokens (in order j) reaching 0.7 of the mass. */
    double cum = 0.0;
    int kept = 0;
    while (cum < 0.7 * z) cum += exp(l[(kept++ * 97) % N] - mx);
    static unsigned char in_set[N];
    for (int j = 0; j < kept; j++) in_set[(j * 97) % N] = 1;
    CHECK(kept > 512 && kept < HIGH, "the reference set needs %d tokens (more than two rounds)", kept);

    braid_sampler_params p = plain(1.0f, 99);
    p.top_p = 0.7f;
    braid_sampler *s = NULL;
    CHECK_STATUS(braid_sampler_new(&p, &s), BRAID_OK);
    /* ~700 near-equal tokens and 400 draws: about 300 distinct ones are expected if all of them are live. */
    static unsigned char seen[N];
    int inside = 1, distinct = 0;
    for (int i = 0; i < 400; i++) {
        braid_token t = sample1(s, l, N);
        inside &= t >= 0 && t < N && in_set[t];
        if (t >= 0 && t < N && !seen[t]) distinct += seen[t] = 1;
    }
    CHECK(inside, "every top-p draw is inside the reference set");
    CHECK(distinct > 200, "the draws spread over the kept set (%d distinct)", distinct);

    /* Once sized, sampling allocates nothing. */
    bd_alloc_reset_count();
    braid_token t;
    for (int i = 0; i < 10; i++) CHECK_STATUS(braid_sampler_sample(s, l, N, &t), BRAID_OK);
    CHECK(bd_alloc_count() == 0, "sample calls allocated %llu times", (unsigned long long)bd_alloc_count());
    braid_sampler_free(s);
}

/* The kept set by the definition: sort everything, top-k, then the shortest prefix reaching top_p of the mass
 * of what top-k kept, then min-p relative to the best. Marks keep[i]; returns the count. */
static int cmp_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

static int reference_set(const float *l, int n, int top_k, float top_p, float min_p, unsigned char *keep) {
    float *sorted = malloc((size_t)n * sizeof *sorted);
    memcpy(sorted, l, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_desc); /* logits are distinct here, so values identify tokens */
    int m = top_k > 0 && top_k < n ? top_k : n;
    double z = 0.0, cum = 0.0;
    for (int i = 0; i < m; i++) z += exp(sorted[i] - sorted[0]);
    int cut = m;
    if (top_p < 1.0f)
        for (int i = 0; i < m; i++) {
            cum += exp(sorted[i] - sorted[0]);
            if (cum >= top_p * z) {
                cut = i + 1;
                break;
            }
        }
    float floor_l = cut > 0 ? sorted[cut - 1] : sorted[0];
    if (min_p > 0.0f && sorted[0] + logf(min_p) > floor_l) floor_l = sorted[0] + logf(min_p);
    int count = 0;
    for (int i = 0; i < n; i++) count += keep[i] = l[i] >= floor_l;
    free(sorted);
    return count;
}

/* Every combination of the filters against the definition, on a vocabulary large enough for the binned top-p
 * path: the kept set (bd_sampler_kept) must be exactly the reference set, and the draws must stay in it. */
static void test_filters_vs_reference(void) {
    enum { N = 5000 };
    static float l[N];
    static unsigned char keep[N];
    static braid_token ids[N];
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < N; i++) { /* distinct pseudo-Gaussian logits (sum of uniforms) */
        double acc = 0.0;
        for (int k = 0; k < 4; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            acc += (double)(x >> 11) * 0x1.0p-53;
        }
        l[i] = (float)((acc - 2.0) * 3.0) + (float)i * 1e-7f;
    }
    const int ks[] = {0, 50, 1000};
    const float ps[] = {1.0f, 0.95f, 0.5f, 0.0f}, mps[] = {0.0f, 0.002f, 0.2f};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 3; c++) {
                int want = reference_set(l, N, ks[a], ps[b], mps[c], keep);
                braid_sampler_params p = plain(1.0f, (uint64_t)(a * 12 + b * 3 + c + 1));
                p.top_k = ks[a];
                p.top_p = ps[b];
                p.min_p = mps[c];
                braid_sampler *s = NULL;
                CHECK_STATUS(braid_sampler_new(&p, &s), BRAID_OK);
                int32_t n = 0;
                CHECK_STATUS(bd_sampler_kept(s, l, N, ids, N, &n), BRAID_OK);
                int same = n == want;
                for (int32_t i = 0; same && i < n; i++) same = ids[i] >= 0 && ids[i] < N && keep[ids[i]];
                int inside = 1;
                for (int i = 0; i < 200; i++) {
                    braid_token t = sample1(s, l, N);
                    inside &= t >= 0 && t < N && keep[t];
                }
                braid_sampler_free(s);
                CHECK(same && inside,
                      "top_k %d top_p %.2f min_p %.3f: kept %d, reference %d, same set %d, draws inside %d", ks[a],
                      (double)ps[b], (double)mps[c], (int)n, want, same, inside);
            }
}

static void test_penalties(void) {
    braid_sampler *s = NULL;
    braid_sampler_params p = plain(0.0f, 1);
    p.repeat_penalty = 1.5f;
    CHECK_STATUS(braid_sampler_new(&p, &s), BRAID_OK);
    float l[4] = {2.0f, 1.9f, 0.0f, -1.0f};
    CHECK(sample1(s, l, 4) == 0, "no history: argmax");
    braid_sampler_accept(s, 0);
    CHECK(sample1(s, l, 4) == 1, "repeat penalty divides a positive logit (2.0 / 1.5 < 1.9)");
    braid_sampler_free(s);

    /* Negative logits are multiplied, so the penalty still lowers them. */
    p = plain(0.0f, 1);
    p.repeat_penalty = 1.2f;
    CHECK_STATUS(braid_sampler_new(&p, &s), BRAID_OK);
    float ln[3] = {-1.0f, -1.1f, -5.0f};
    braid_sampler_accept(s, 0);
    CHECK(sample1(s, ln, 3) == 1, "repeat penalty multiplies a negative logit (-1.2 < -1.1)");
    braid_sampler_free(s);

    /* Frequency scales with the count; presence does not. */
    p = plain(0.0f, 1);
    p.frequency_penalty = 0.06f;
    CHECK_STATUS(braid_sampler_new(&p, &s), BRAID_OK);
    braid_sampler_accept(s, 0);
    CHECK(sample1(s, l, 4) == 0, "one occurrence: 2.0 - 0.06 > 1.9");
    braid_sampler_accept(s, 0);
    CHECK(sample1(s, l, 4) == 1, "two occurrences: 2.0 - 0.12 < 1.9");
    braid_sampler_free(s);

    p = plain(0.0f, 1);
    p.presence_penalty = 0.08f;
    CHECK_STATUS(braid_sampler_new(&p, &s), BRAID_OK);
    for (int i = 0; i < 5; i++) braid_sampler_accept(s, 0);
    CHECK(sample1(s, l, 4) == 0, "presence does not grow with the count: 2.0 - 0.08 > 1.9");
    braid_sampler_free(s);

    /* The window: only the last penalty_last_n tokens count. */
    p = plain(0.0f, 1);
    p.repeat_penalty = 1.5f;
    p.penalty_last_n = 2;
    CHECK_STATUS(braid_sampler_new(&p, &s), BRAID_OK);
    braid_sampler_accept(s, 0);
    CHECK(sample1(s, l, 4) == 1, "token 0 inside the window is penalized");
    braid_sampler_accept(s, 2);
    braid_sampler_accept(s, 3);
    CHECK(sample1(s, l, 4) == 0, "token 0 out of the window is not");
    braid_sampler_accept(s, 12345); /* outside this vocabulary: ignored, no crash */
    CHECK(sample1(s, l, 4) == 0, "an out-of-vocabulary history token is ignored");
    braid_sampler_free(s);

    /* penalty_last_n = 0 turns the penalties off. */
    p = plain(0.0f, 1);
    p.repeat_penalty = 3.0f;
    p.penalty_last_n = 0;
    CHECK_STATUS(braid_sampler_new(&p, &s), BRAID_OK);
    braid_sampler_accept(s, 0);
    CHECK(sample1(s, l, 4) == 0, "penalty_last_n 0: no penalty");
    braid_sampler_free(s);
}

static void test_invalid(void) {
    braid_sampler *s = NULL;
    braid_sampler_params p = plain(1.0f, 1);
    CHECK_STATUS(braid_sampler_new(NULL, &s), BRAID_E_INVALID);
    CHECK_STATUS(braid_sampler_new(&p, NULL), BRAID_E_INVALID);
    p.temperature = NAN;
    CHECK_STATUS(braid_sampler_new(&p, &s), BRAID_E_INVALID);
    CHECK(s == NULL, "nothing is returned on failure");
    p = plain(1.0f, 1);
    p.top_p = -0.1f;
    CHECK_STATUS(braid_sampler_new(&p, &s), BRAID_E_INVALID);
    p = plain(1.0f, 1);
    p.top_p = NAN;
    CHECK_STATUS(braid_sampler_new(&p, &s), BRAID_E_INVALID);
    p = plain(1.0f, 1);
    p.min_p = 1.5f;
    CHECK_STATUS(braid_sampler_new(&p, &s), BRAID_E_INVALID);
    p = plain(1.0f, 1);
    p.repeat_penalty = 0.0f;
    CHECK_STATUS(braid_sampler_new(&p, &s), BRAID_E_INVALID);
    p = plain(1.0f, 1);
    p.frequency_penalty = INFINITY;
    CHECK_STATUS(braid_sampler_new(&p, &s), BRAID_E_INVALID);
    p = plain(1.0f, 1);
    p.penalty_last_n = -1;
    CHECK_STATUS(braid_sampler_new(&p, &s), BRAID_E_INVALID);

    p = plain(1.0f, 1);
    CHECK_STATUS(braid_sampler_new(&p, &s), BRAID_OK);
    float l[3] = {0.0f, 1.0f, 2.0f};
    braid_token t = -1;
    CHECK_STATUS(braid_sampler_sample(s, l, 0, &t), BRAID_E_INVALID);
    CHECK_STATUS(braid_sampler_sample(s, l, -3, &t), BRAID_E_INVALID);
    CHECK_STATUS(braid_sampler_sample(s, NULL, 3, &t), BRAID_E_INVALID);
    CHECK_STATUS(braid_sampler_sample(s, l, 3, NULL), BRAID_E_INVALID);
    CHECK_STATUS(braid_sampler_sample(NULL, l, 3, &t), BRAID_E_INVALID);
    float bad[3] = {0.0f, NAN, 1.0f};
    CHECK_STATUS(braid_sampler_sample(s, bad, 3, &t), BRAID_E_INVALID);
    float masked[3] = {-INFINITY, -INFINITY, -INFINITY};
    CHECK_STATUS(braid_sampler_sample(s, masked, 3, &t), BRAID_E_INVALID);
    float one[3] = {-INFINITY, 0.5f, -INFINITY};
    CHECK_STATUS(braid_sampler_sample(s, one, 3, &t), BRAID_OK);
    CHECK(t == 1, "masked tokens are never drawn");
    braid_sampler_accept(NULL, 1); /* harmless */
    braid_sampler_free(s);
    braid_sampler_free(NULL);
}

static void test_alloc_failure(void) {
    braid_sampler *s = NULL;
    braid_sampler_params p = plain(1.0f, 1);
    for (uint64_t n = 1; n <= 3; n++) {
        bd_alloc_fail_at(n, 0);
        braid_status st = braid_sampler_new(&p, &s);
        bd_alloc_fail_at(0, 0);
        CHECK(st == BRAID_E_NOMEM || st == BRAID_OK, "alloc %llu failing gives NOMEM or OK",
              (unsigned long long)n);
        if (st == BRAID_OK) braid_sampler_free(s);
        s = NULL;
    }
    CHECK_STATUS(braid_sampler_new(&p, &s), BRAID_OK);
    float l[3] = {0.0f, 1.0f, 2.0f};
    braid_token t = -1;
    bd_alloc_fail_at(1, 1);
    CHECK_STATUS(braid_sampler_sample(s, l, 3, &t), BRAID_E_NOMEM);
    bd_alloc_fail_at(0, 0);
    CHECK_STATUS(braid_sampler_sample(s, l, 3, &t), BRAID_OK);
    CHECK(t >= 0 && t < 3, "works after the failure");
    braid_sampler_free(s);
}

int main(void) {
    test_greedy();
    test_seed();
    test_distribution();
    test_top_p_large();
    test_filters_vs_reference();
    test_penalties();
    test_invalid();
    test_alloc_failure();
    TEST_MAIN_END();
}
