/* test_speculative.c — speculative decoding in braid_gen on tiny generated models.
 *
 * Exactness: greedy speculative decoding (a draft model, quantized from the same weights so that most drafts
 * are accepted and some are not; a draft with other weights; prompt lookup; the model's own MTP head, random
 * here and trained in the built-in default model, where most of its drafts are accepted) gives exactly the
 * tokens of plain greedy decoding, on every architecture braid runs, and drops every rejected draft through
 * the rollback buffer (zero replayed tokens); so does a second turn on the same MTP generator.
 *
 * Distribution: with temperature 1 and top-k 3, the first three sampled tokens have 27 possible values whose
 * exact probabilities are computed here (after a prompt that holds every token once) by walking the tree of contexts. N independent runs (seeds 1..N) of
 * plain sampling, of rejection sampling with a draft model, with lookup drafts and with MTP drafts are each
 * compared with that
 * distribution by a chi-square goodness-of-fit test (cells with an expected count under 5 merged), rejected
 * at the 1e-4 upper quantile: each of the four comparisons fails by chance with probability 1e-4 over the
 * choice of seeds, so the test's false-failure rate is below 4e-4. As a check that the test has power, the
 * draft model's own samples (what uncorrected drafting would emit) must fail it. */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "braid.h"
#include "engine/sampling.h"
#include "genmodel/genmodel.h"
#include "test.h"

static char build_dir[2048];

/* nextn 1: with an MTP block (its trunk is the same as without: weights are a function of seed and name) */
static braid_model *make_model(const char *arch, uint64_t seed, uint32_t type, const char *tag, int nextn) {
    char path[2300];
    snprintf(path, sizeof path, "%s/test_spec_%s_%s.gguf", build_dir, arch, tag);
    gen_params gp;
    gen_params_default(&gp);
    gp.arch = arch;
    gp.seed = seed;
    gp.type = type;
    gp.vocab = "none";
    gp.n_vocab = 512;
    gp.over.nextn = nextn;
    gen_summary sum;
    braid_model *m = NULL;
    braid_model_params mp = braid_model_default_params();
    mp.use_mmap = 0; /* the file is removed at once */
    if (gen_model_write(&gp, path, &sum) == BRAID_OK) (void)!braid_model_load(path, &mp, &m);
    unlink(path);
    return m;
}

static braid_context *make_ctx(braid_model *m, uint32_t n_rollback) {
    braid_context_params cp = braid_context_default_params();
    cp.n_ctx = 1024;
    cp.n_batch = 64;
    cp.n_threads = 1;
    cp.n_rollback = n_rollback;
    braid_context *c = NULL;
    return braid_context_new(m, &cp, &c) == BRAID_OK ? c : NULL;
}

/* Generates n tokens after prompt into out; returns the count, fills the stats. */
static int generate(braid_context *c, braid_context *draft, int lookup, int mtp, const braid_sampler_params *sp,
                    const braid_token *prompt, int np, int n, braid_token *out, braid_gen_stats *st) {
    braid_gen_params gp = braid_gen_default_params();
    gp.sampler = *sp;
    gp.n_predict = n;
    gp.draft = draft;
    gp.lookup_n = lookup;
    gp.mtp = mtp;
    gp.draft_n = 4;
    braid_gen *g = NULL;
    if (braid_gen_new(c, &gp, &g) != BRAID_OK) return -1;
    int k = -1;
    if (braid_gen_prompt(g, prompt, np) == BRAID_OK && braid_gen_run(g) == BRAID_OK) {
        int32_t no = 0;
        const braid_token *o = braid_gen_tokens(g, &no);
        memcpy(out, o, (size_t)no * sizeof *o);
        k = no;
        *st = *braid_gen_get_stats(g);
    }
    braid_gen_free(g);
    return k;
}

static void test_greedy(const char *arch, int has_mtp) {
    braid_model *t = make_model(arch, 21, 0, "t", has_mtp), *dq = make_model(arch, 21, 8 /* Q8_0 */, "q8", 0),
                *dx = make_model(arch, 22, 0, "x", 0);
    CHECK(t && dq && dx, "%s: models", arch);
    if (!t || !dq || !dx) return;
    enum { N0 = 8, NG = 16, NP = 2 * N0 + NG, N = 64 };
    braid_token prompt[NP], ref[N], got[N];
    braid_sampler_params sp = braid_sampler_default_params();
    sp.temperature = 0;
    braid_gen_stats st;
    braid_context *c = make_ctx(t, 8);
    /* prompt: P0, its greedy continuation, P0 again, so that lookup has n-grams worth drafting */
    for (int i = 0; i < N0; i++) prompt[i] = prompt[N0 + NG + i] = (braid_token)(i * 37 + 5);
    CHECK(generate(c, NULL, 0, 0, &sp, prompt, N0, NG, prompt + N0, &st) == NG, "%s: the prompt's middle", arch);
    braid_seq_clear(c, 0);
    int n_ref = generate(c, NULL, 0, 0, &sp, prompt, NP, N, ref, &st);
    CHECK(n_ref == N, "%s: plain greedy runs (%d)", arch, n_ref);
    braid_context_free(c);
    struct {
        const char *name;
        braid_model *draft;
        int lookup, mtp;
    } cases[] = {{"draft q8_0", dq, 0, 0}, {"lookup 2", NULL, 2, 0}, {"mtp (random head)", NULL, 0, 1},
                 {"draft other weights", dx, 0, 0}};
    for (int k = 0; k < (strcmp(arch, "qwen35") ? 3 : 4); k++) { /* nothing accepted: once is enough */
        if (cases[k].mtp && !has_mtp) continue; /* an architecture without an MTP head in braid */
        c = make_ctx(t, 8);
        braid_context *d = cases[k].draft ? make_ctx(cases[k].draft, 8) : NULL;
        memset(&st, 0, sizeof st);
        int n = generate(c, d, cases[k].lookup, cases[k].mtp, &sp, prompt, NP, N, got, &st);
        CHECK(n == n_ref && !memcmp(got, ref, (size_t)N * sizeof *got), "%s, %s: the tokens of plain greedy (%d)", arch,
              cases[k].name, n);
        CHECK(st.drafted > 0 && st.spec_replayed == 0, "%s, %s: drafted %d, accepted %d, replayed %d", arch,
              cases[k].name, st.drafted, st.accepted, st.spec_replayed);
        if (k == 0) CHECK(st.accepted > st.drafted / 4, "%s: the q8_0 draft is mostly accepted (%d of %d)", arch,
                          st.accepted, st.drafted);
        printf("%-14s %-20s drafted %3d accepted %3d decodes %2d (plain %d) replayed %d\n", arch, cases[k].name,
               st.drafted, st.accepted, st.n_decodes, N - 1, st.spec_replayed);
        braid_context_free(d);
        braid_context_free(c);
    }
    braid_model_free(t);
    braid_model_free(dq);
    braid_model_free(dx);
}

/* ---- distribution ------------------------------------------------------------------------------------------- */

enum { K = 3, DEPTH = 3, CELLS = 27 };

/* Exact probabilities of the 27 three-token continuations under top-k 3, temperature 1 (no penalties). */
static int exact_dist(braid_model *m, const braid_sampler_params *sp, const braid_token *prompt, int np,
                      braid_token top[CELLS][DEPTH], double prob[CELLS]) {
    const int V = braid_model_n_vocab(m);
    float *p = malloc((size_t)V * sizeof *p);
    braid_sampler *s = NULL;
    if (!p || braid_sampler_new(sp, &s) != BRAID_OK) return 0;
    braid_context *c = make_ctx(m, 8);
    int ok = c != NULL;
    braid_token seq[1024];
    memcpy(seq, prompt, (size_t)np * sizeof *seq);
    for (int cell = 0; ok && cell < CELLS; cell++) prob[cell] = 1.0;
    /* cell = d0 * 9 + d1 * 3 + d2 over the kept tokens of each step, in id order */
    for (int cell = 0; ok && cell < CELLS; cell++) {
        int digit[DEPTH] = {cell / 9, (cell / 3) % 3, cell % 3};
        braid_seq_clear(c, 0);
        braid_batch b = {.n_tokens = np, .token = seq};
        ok = braid_decode(c, &b) == BRAID_OK;
        int row = np - 1;
        for (int d = 0; ok && d < DEPTH; d++) {
            ok = bd_sampler_probs(s, braid_logits(c, row), V, p) == BRAID_OK;
            int seen = 0;
            braid_token pick = -1;
            for (int v = 0; ok && v < V; v++)
                if (p[v] > 0 && seen++ == digit[d]) pick = v;
            ok = ok && seen == K && pick >= 0;
            if (!ok) break;
            prob[cell] *= p[pick];
            top[cell][d] = pick;
            braid_batch one = {.n_tokens = 1, .token = &top[cell][d]};
            if (d + 1 < DEPTH) ok = braid_decode(c, &one) == BRAID_OK;
            row = 0;
        }
    }
    braid_context_free(c);
    braid_sampler_free(s);
    free(p);
    return ok;
}

/* Upper 1e-4 quantile of chi-square with df degrees of freedom (Wilson-Hilferty; within 1% for df >= 3). */
static double chi2_crit(int df) {
    const double z = 3.7190; /* standard normal upper 1e-4 quantile */
    double a = 2.0 / (9.0 * df);
    double x = 1.0 - a + z * sqrt(a);
    return df * x * x * x;
}

/* Chi-square statistic of counts against prob (N draws), cells with expected < 5 merged; *df gets the degrees
 * of freedom. */
static double chi2(const int counts[CELLS], const double prob[CELLS], int N, int *df) {
    double stat = 0, e_small = 0, o_small = 0;
    int cells = 0;
    for (int i = 0; i < CELLS; i++) {
        double e = prob[i] * N;
        if (e < 5) {
            e_small += e;
            o_small += counts[i];
            continue;
        }
        stat += (counts[i] - e) * (counts[i] - e) / e;
        cells++;
    }
    if (e_small >= 1) {
        stat += (o_small - e_small) * (o_small - e_small) / e_small;
        cells++;
    }
    *df = cells - 1;
    return stat;
}

static int cell_of(braid_token top[CELLS][DEPTH], const braid_token *t) {
    for (int i = 0; i < CELLS; i++)
        if (!memcmp(top[i], t, DEPTH * sizeof *t)) return i;
    return -1;
}

static void test_distribution(void) {
    braid_model *t = make_model("qwen35", 31, 0, "dt", 1), *d = make_model("qwen35", 31, 8 /* Q8_0 */, "dq", 0);
    CHECK(t && d, "distribution: models");
    if (!t || !d) return;
    /* The prompt holds every token id once (then a short tail), so that lookup always finds the sampled token
     * in the history and drafts what followed it (nearly always rejected: it tests the draw from p - q with a
     * point-mass q; the draft model's case has both branches). */
    enum { V = 512, NP = V + 6, N = 1200 };
    braid_token prompt[NP];
    for (int i = 0; i < V; i++) prompt[i] = (braid_token)((i * 101 + 7) % V);
    for (int i = 0; i < 6; i++) prompt[V + i] = (braid_token)(i * 11 + 3);
    braid_sampler_params sp = braid_sampler_default_params();
    sp.temperature = 1.0f;
    sp.top_k = K;
    sp.top_p = 1.0f;
    sp.min_p = 0.0f;
    braid_token top[CELLS][DEPTH];
    double prob[CELLS];
    CHECK(exact_dist(t, &sp, prompt, NP, top, prob), "the exact distribution is computed");
    double total = 0;
    for (int i = 0; i < CELLS; i++) total += prob[i];
    CHECK(fabs(total - 1) < 1e-4, "it sums to 1 (%g)", total);
    struct {
        const char *name;
        braid_model *target;
        int draft, lookup, mtp, expect_pass;
    } modes[] = {{"plain", t, 0, 0, 0, 1}, {"draft", t, 1, 0, 0, 1}, {"lookup", t, 0, 1, 0, 1}, {"mtp", t, 0, 0, 1, 1},
                 {"draft alone", d, 0, 0, 0, 0}};
    for (int mi = 0; mi < 5; mi++) {
        braid_context *c = make_ctx(modes[mi].target, 8), *dc = modes[mi].draft ? make_ctx(d, 8) : NULL;
        int counts[CELLS] = {0}, outside = 0, fails = 0;
        int32_t drafted = 0, accepted = 0, replayed = 0;
        for (int r = 0; r < N; r++) {
            sp.seed = (uint64_t)r + 1;
            braid_token out[DEPTH];
            braid_gen_stats st;
            memset(&st, 0, sizeof st);
            int n = generate(c, dc, modes[mi].lookup, modes[mi].mtp, &sp, prompt, NP, DEPTH, out, &st);
            if (n != DEPTH) {
                fails++;
                continue;
            }
            drafted += st.drafted, accepted += st.accepted, replayed += st.spec_replayed;
            int cell = cell_of(top, out);
            if (cell < 0) outside++;
            else counts[cell]++;
        }
        int df = 0;
        double stat = chi2(counts, prob, N - fails - outside, &df), crit = chi2_crit(df);
        printf("%-12s chi2 %7.1f (df %d, 1e-4 critical %.1f) drafted %d accepted %d replayed %d\n", modes[mi].name,
               stat, df, crit, drafted, accepted, replayed);
        CHECK(fails == 0, "%s: every run generates", modes[mi].name);
        if (modes[mi].expect_pass) {
            CHECK(outside == 0, "%s: every sample is one of the 27 continuations (%d outside)", modes[mi].name, outside);
            CHECK(stat < crit, "%s: the samples follow the exact distribution (chi2 %.1f, critical %.1f)",
                  modes[mi].name, stat, crit);
            CHECK(replayed == 0, "%s: rejected drafts are dropped without replay", modes[mi].name);
            if (modes[mi].mtp) CHECK(drafted > 0, "mtp: drafts were made (%d)", drafted);
            if (modes[mi].draft) /* lookup's drafts here are nearly always rejected: the p - q branch */
                CHECK(drafted > 0 && accepted > 0 && accepted < drafted, "%s: some drafts accepted, some rejected "
                      "(%d of %d)", modes[mi].name, accepted, drafted);
        } else {
            CHECK(stat > crit || outside > 0, "the test has power: the draft's own samples fail it (chi2 %.1f)", stat);
        }
        braid_context_free(dc);
        braid_context_free(c);
    }
    braid_model_free(t);
    braid_model_free(d);
}

/* ---- MTP on the trained default model ---------------------------------------------------------------------- */

/* One braid_gen over c: prompt a, run n; then (if b) prompt a ‖ its output ‖ b on the same generator, run n.
 * out gets both runs' tokens; returns their count (-1 on an error). */
static int two_turns(braid_context *c, int mtp, int draft_n, const braid_token *a, int na, const braid_token *b, int nb, int n,
                     braid_token *out, braid_gen_stats *st) {
    braid_gen_params gp = braid_gen_default_params();
    gp.sampler = braid_sampler_default_params();
    gp.sampler.temperature = 0;
    gp.n_predict = n;
    gp.mtp = mtp;
    gp.draft_n = draft_n;
    braid_gen *g = NULL;
    if (braid_gen_new(c, &gp, &g) != BRAID_OK) return -1;
    int k = -1;
    braid_token p2[256];
    int32_t n1 = 0;
    if (braid_gen_prompt(g, a, na) == BRAID_OK && braid_gen_run(g) == BRAID_OK) {
        const braid_token *o = braid_gen_tokens(g, &n1);
        memcpy(out, o, (size_t)n1 * sizeof *o);
        k = n1;
        st[0] = *braid_gen_get_stats(g);
    }
    if (k >= 0 && b && na + n1 + nb <= 256) {
        memcpy(p2, a, (size_t)na * sizeof *a);
        memcpy(p2 + na, out, (size_t)n1 * sizeof *out);
        memcpy(p2 + na + n1, b, (size_t)nb * sizeof *b);
        k = -1;
        if (braid_gen_prompt(g, p2, na + n1 + nb) == BRAID_OK && braid_gen_run(g) == BRAID_OK) {
            int32_t n2 = 0;
            const braid_token *o = braid_gen_tokens(g, &n2);
            memcpy(out + n1, o, (size_t)n2 * sizeof *o);
            k = n1 + n2;
            st[1] = *braid_gen_get_stats(g);
        }
    }
    braid_gen_free(g);
    return k;
}

static void test_default_mtp(void) {
    char path[2300];
    snprintf(path, sizeof path, "%s/models/kjv-qwen35-q8_0.gguf", test_env("BRAID_SOURCE_DIR", "."));
    braid_model *m = NULL;
    CHECK_STATUS(braid_model_load(path, NULL, &m), BRAID_OK);
    if (!m) return;
    braid_token a[64], b[64];
    size_t na = 0, nb = 0;
    CHECK_STATUS(braid_tokenize(m, "And God said", 12, 1, 0, a, 64, &na), BRAID_OK);
    CHECK_STATUS(braid_tokenize(m, " And the LORD spake unto Moses", 30, 0, 0, b, 64, &nb), BRAID_OK);
    enum { N = 48 };
    braid_token ref[2 * N], got[2 * N];
    braid_gen_stats sr[2], sm[2];
    memset(sm, 0, sizeof sm);
    braid_context *c = make_ctx(m, 8);
    int n_ref = c ? two_turns(c, 0, 1, a, (int)na, b, (int)nb, N, ref, sr) : -1;
    braid_context_free(c);
    CHECK(n_ref == 2 * N, "default model: plain greedy runs two turns (%d)", n_ref);
    /* one draft per step: what the head was trained for (the token after next), so mostly accepted; three:
     * chained on its own hidden state, later ones are accepted less often (measured: about a third) */
    for (int dn = 1; dn <= 3; dn += 2) {
        c = make_ctx(m, 8);
        int n = c ? two_turns(c, 1, dn, a, (int)na, b, (int)nb, N, got, sm) : -1;
        braid_context_free(c);
        CHECK(n == n_ref && !memcmp(got, ref, (size_t)n * sizeof *got),
              "default model, mtp %d: two turns give the tokens of plain greedy (%d, %d)", dn, n, n_ref);
        for (int t = 0; t < 2; t++) {
            printf("default model, mtp draft_n %d, turn %d: drafted %d accepted %d decodes %d (plain %d) replayed "
                   "%d\n", dn, t + 1, sm[t].drafted, sm[t].accepted, sm[t].n_decodes, sr[t].n_decodes,
                   sm[t].spec_replayed);
            CHECK(sm[t].drafted > 0 && sm[t].spec_replayed == 0, "turn %d: drafted %d, replayed %d", t + 1,
                  sm[t].drafted, sm[t].spec_replayed);
            if (dn == 1)
                CHECK(sm[t].accepted * 4 > sm[t].drafted * 3,
                      "default model turn %d: the trained head's drafts are mostly accepted (%d of %d)", t + 1,
                      sm[t].accepted, sm[t].drafted);
            CHECK(sm[t].n_decodes * 3 < sr[t].n_decodes * 2, "turn %d: fewer target decodes than plain (%d vs %d)",
                  t + 1, sm[t].n_decodes, sr[t].n_decodes);
        }
    }
    /* a model without an MTP block is refused, with the reason */
    braid_model *plain = make_model("qwen35", 21, 0, "nomtp", 0);
    braid_context *pc = plain ? make_ctx(plain, 8) : NULL;
    braid_gen_params gp = braid_gen_default_params();
    gp.mtp = 1;
    gp.draft_n = 4;
    braid_gen *g = NULL;
    if (pc) CHECK_STATUS(braid_gen_new(pc, &gp, &g), BRAID_E_UNSUPPORTED);
    gp.lookup_n = 2;
    if (pc) CHECK_STATUS(braid_gen_new(pc, &gp, &g), BRAID_E_INVALID);
    braid_context_free(pc);
    braid_model_free(plain);
    braid_model_free(m);
}

int main(void) {
    snprintf(build_dir, sizeof build_dir, "%s", test_env("BRAID_BUILD_DIR", "."));
    /* the qwen35 family with an MTP head, and the other hybrids (draft model and lookup) */
    static const struct {
        const char *arch;
        int mtp;
    } archs[] = {{"qwen35", 1},        {"qwen35moe", 1}, {"qwen3next", 1},     {"mamba2", 0},
                 {"nemotron_h", 0},    {"nemotron_h_moe", 0}, {"lfm2", 0},     {"lfm2moe", 0},
                 {"granitehybrid", 0}, {"falcon-h1", 0}};
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) test_greedy(archs[i].arch, archs[i].mtp);
    test_default_mtp();
    test_distribution();
    TEST_MAIN_END();
}
