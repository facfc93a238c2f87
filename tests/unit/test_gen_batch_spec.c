/* test_gen_batch_spec.c — speculative generators in continuous batching (braid_gen_step), on a tiny generated
 * qwen35 with Q8_0 matrices (whose products compute each output row alone, so logits can be compared bit for
 * bit whatever shares the batch; see test_gen_batch.c) and a 64-token vocabulary (replies repeat earlier
 * tokens, so lookup has n-grams to draft from):
 * - four generators share one context with n_batch 12, so prompt chunks, plain decode rows and drafts are
 *   mixed and drafts are sometimes cut short by the rows left: lookup drafting (two settings; on random
 *   weights its drafts are rejected), a draft model (the same weights in Q4_0: accepted in part, so
 *   verification stops mid-draft) and a plain generator. Each one's tokens, and the logits of every token
 *   that has them (braid_gen_logits in the piece callback), equal braid_gen_run alone with the same
 *   settings and plain greedy alone, bit for bit; the rejected drafts were dropped through the rollback
 *   buffer (nothing replayed) and each sequence holds what it held alone;
 * - temperature 0.8 with lookup drafting (rejection sampling) on the first generator: the same seed gives the
 *   same tokens in the busy batch as alone with braid_gen_run (its draws do not depend on its neighbours). */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "braid.h"
#include "gen_record.h"
#include "genmodel/genmodel.h"
#include "test.h"

#define NG 4
#define NPRED 24

static braid_model *dm; /* the draft model */

typedef struct {
    int lookup, draft_n, use_draft;
    float temp;
} spec_cfg;

static braid_gen *make_gen(braid_context *c, braid_context *draft, braid_seq_id s, const spec_cfg *k, gen_rec *r,
                           int spec) {
    braid_gen_params gp = braid_gen_default_params();
    gp.seq = s;
    gp.n_predict = NPRED;
    gp.sampler.temperature = k->temp;
    gp.sampler.seed = 1234 + (uint64_t)s;
    gp.on_piece = gen_rec_on_piece;
    gp.piece_user = r;
    if (spec) {
        gp.lookup_n = k->lookup;
        gp.draft_n = k->draft_n;
        gp.draft = k->use_draft ? draft : NULL;
    }
    braid_gen *g = NULL;
    if (braid_gen_new(c, &gp, &g) != BRAID_OK) return NULL;
    r->g = g;
    gen_rec_reset(r);
    return g;
}

/* One generator alone in its own context(s) with braid_gen_prompt + braid_gen_run; its tokens into out. */
static int run_alone(braid_model *m, const spec_cfg *k, int spec, const braid_token *prompt, int np, gen_rec *r,
                     braid_token *out, braid_gen_stats *st, int32_t *seq_len) {
    braid_context *c = gen_test_ctx(m, 1, 512), *d = spec && k->use_draft ? gen_test_ctx(dm, 1, 512) : NULL;
    braid_gen *g = c ? make_gen(c, d, 0, k, r, spec) : NULL;
    int n = -1;
    if (g && braid_gen_prompt(g, prompt, np) == BRAID_OK && braid_gen_run(g) == BRAID_OK) {
        int32_t no = 0;
        const braid_token *t = braid_gen_tokens(g, &no);
        memcpy(out, t, (size_t)no * sizeof *t);
        n = no;
        *st = *braid_gen_get_stats(g);
        *seq_len = braid_seq_len(c, 0);
    }
    braid_gen_free(g);
    braid_context_free(d);
    braid_context_free(c);
    return n;
}

int main(void) {
    char path[1100];
    snprintf(path, sizeof path, "%s/test_gen_batch_spec.gguf", test_env("BRAID_BUILD_DIR", "."));
    gen_params gp;
    gen_params_default(&gp);
    gp.vocab = "none";
    gp.n_vocab = 64; /* small, so that the replies repeat earlier tokens and lookup finds n-grams */
    gp.type = BRAID_TYPE_Q8_0;
    gen_summary sum;
    CHECK_STATUS(gen_model_write(&gp, path, &sum), BRAID_OK);
    braid_model *m = NULL;
    braid_model_params mp = braid_model_default_params();
    CHECK_STATUS(braid_model_load(path, &mp, &m), BRAID_OK);
    if (!m) TEST_MAIN_END();
    /* the draft: the same weights in Q4_0, so it agrees with the target often but not always */
    char dpath[1100];
    snprintf(dpath, sizeof dpath, "%s/test_gen_batch_spec_draft.gguf", test_env("BRAID_BUILD_DIR", "."));
    gp.type = BRAID_TYPE_Q4_0;
    CHECK_STATUS(gen_model_write(&gp, dpath, &sum), BRAID_OK);
    CHECK_STATUS(braid_model_load(dpath, &mp, &dm), BRAID_OK);
    if (!dm) TEST_MAIN_END();
    const int32_t V = braid_model_n_vocab(m);
    /* repetitive prompts (a period of 7 or 5 tokens), so that lookup has n-grams to draft from */
    static const int32_t plen[NG] = {37, 5, 21, 50};
    braid_token prompts[NG][64];
    for (int p = 0; p < NG; p++)
        for (int i = 0; i < plen[p]; i++) prompts[p][i] = (braid_token)((p * 97 + (i % (p % 2 ? 5 : 7)) * 11 + 3) % V);

    for (int pass = 0; pass < 2; pass++) {
        const int sampled = pass == 1;
        /* generator p's settings: lookup 3 x4, plain, draft model x3, lookup 2 x6 (greedy); sampled: lookup
         * on the first (first in the batch: its drafts are never cut short, so its draws are those alone) */
        spec_cfg cfg[NG] = {{3, 4, 0, 0}, {0, 1, 0, 0}, {0, 3, 1, 0}, {2, 6, 0, 0}};
        if (sampled) cfg[0].temp = 0.8f;
        int spec[NG] = {1, 0, 1, 1};
        gen_rec alone[NG], plain[NG], both[NG];
        braid_token alone_tok[NG][NPRED], plain_tok[NG][NPRED];
        int alone_n[NG], plain_n[NG];
        int32_t alone_len[NG], plain_len;
        braid_gen_stats ast[NG], pst;
        for (int p = 0; p < NG; p++) {
            gen_rec_init(&alone[p], V, NPRED), gen_rec_init(&plain[p], V, NPRED), gen_rec_init(&both[p], V, NPRED);
            alone_n[p] = run_alone(m, &cfg[p], spec[p], prompts[p], plen[p], &alone[p], alone_tok[p], &ast[p], &alone_len[p]);
            plain_n[p] = run_alone(m, &cfg[p], 0, prompts[p], plen[p], &plain[p], plain_tok[p], &pst, &plain_len);
            CHECK(alone_n[p] == NPRED && plain_n[p] == NPRED, "pass %d, generator %d runs alone (%d, %d)", pass, p,
                  alone_n[p], plain_n[p]);
        }
        braid_context *c = gen_test_ctx(m, NG + 1, 12), *d = gen_test_ctx(dm, NG + 1, 12);
        CHECK(c && d, "the shared contexts");
        braid_gen *gs[NG] = {0};
        for (int p = 0; c && d && p < NG; p++) {
            gs[p] = make_gen(c, d, p, &cfg[p], &both[p], spec[p]);
            CHECK(gs[p] != NULL, "generator %d", p);
            if (gs[p]) CHECK_STATUS(braid_gen_begin(gs[p], prompts[p], plen[p]), BRAID_OK);
        }
        int steps = 0, active = c && d;
        while (active && steps < 1000) {
            CHECK_STATUS(braid_gen_step(gs, NG), BRAID_OK);
            steps++;
            active = 0;
            for (int p = 0; p < NG; p++) active |= braid_gen_active(gs[p]);
        }
        CHECK(!active, "pass %d: all generators end (%d steps)", pass, steps);
        for (int p = 0; c && d && p < NG; p++) {
            if (!gs[p]) continue;
            int32_t n = 0;
            const braid_token *t = braid_gen_tokens(gs[p], &n);
            const braid_gen_stats *st = braid_gen_get_stats(gs[p]);
            CHECK(n == alone_n[p] && !memcmp(t, alone_tok[p], (size_t)n * sizeof *t),
                  "pass %d, generator %d: the tokens of braid_gen_run alone (%d vs %d)", pass, p, n, alone_n[p]);
            if (!sampled || p != 0)
                CHECK(n == plain_n[p] && !memcmp(t, plain_tok[p], (size_t)n * sizeof *t),
                      "pass %d, generator %d: the tokens of plain greedy", pass, p);
            CHECK(both[p].n == alone[p].n && !memcmp(both[p].has, alone[p].has, (size_t)NPRED),
                  "pass %d, generator %d: the same tokens come with logits as alone", pass, p);
            CHECK(gen_rec_same_logits(&both[p], &alone[p], n, 0), "pass %d, generator %d: logits bit for bit as alone",
                  pass, p);
            if (!sampled)
                CHECK(gen_rec_same_logits(&both[p], &plain[p], n, 1), "pass %d, generator %d: logits of plain greedy",
                      pass, p);
            CHECK(!strcmp(st->stop, "length") && st->n_generated == NPRED, "pass %d, generator %d: stop %s, %d tokens",
                  pass, p, st->stop, st->n_generated);
            /* plain: prompt + reply but the last; speculative: the last too when it was an accepted draft */
            CHECK(braid_seq_len(c, p) == alone_len[p], "pass %d: sequence %d holds what it held alone (%d vs %d)", pass,
                  p, braid_seq_len(c, p), alone_len[p]);
            if (!spec[p]) CHECK(alone_len[p] == plen[p] + NPRED - 1, "pass %d: plain sequence %d: prompt + reply but the last", pass, p);
            if (spec[p]) {
                CHECK(st->drafted > 0 && st->accepted <= st->drafted && st->spec_replayed == 0,
                      "pass %d, generator %d: drafted %d, accepted %d, replayed %d", pass, p, st->drafted, st->accepted,
                      st->spec_replayed);
                CHECK(st->n_decodes <= NPRED, "pass %d, generator %d: %d decodes", pass, p, st->n_decodes);
                printf("pass %d gen %d: batch drafted %2d accepted %2d decodes %2d | alone drafted %2d accepted %2d "
                       "decodes %2d\n",
                       pass, p, st->drafted, st->accepted, st->n_decodes, ast[p].drafted, ast[p].accepted,
                       ast[p].n_decodes);
            }
            if (cfg[p].use_draft)
                CHECK(st->accepted > 0 && st->accepted < st->drafted,
                      "the Q4_0 draft of the same weights is accepted in part (%d of %d)", st->accepted, st->drafted);
        }
        for (int p = 0; p < NG; p++) braid_gen_free(gs[p]);
        for (int p = 0; p < NG; p++) gen_rec_free(&alone[p]), gen_rec_free(&plain[p]), gen_rec_free(&both[p]);
        braid_context_free(d);
        braid_context_free(c);
    }
    braid_model_free(m);
    braid_model_free(dm);
    unlink(path);
    unlink(dpath);
    TEST_MAIN_END();
}
