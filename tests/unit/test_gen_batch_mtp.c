/* test_gen_batch_mtp.c — MTP drafting in continuous batching (braid_gen_step), on the built-in default model,
 * whose trained MTP head gets most single drafts accepted (a random head gets none, which would leave the
 * verification path untested):
 * - three generators share one context with n_batch 16 — two drafting with the MTP head (one and two tokens
 *   per step) and a plain one — on three prompts, so prompt chunks, plain rows and drafts mix in the steps.
 *   Each one's tokens equal plain greedy alone (braid_gen_run), its logits, where a token has them, equal
 *   braid_gen_run with the same MTP setting alone bit for bit, the MTP generators accepted drafts (so the
 *   head read the hidden states of its rows in the shared batch) and replayed nothing;
 * - the same in a second round on the same generators (a follow-up prompt extending each conversation). */
#include <string.h>

#include "braid.h"
#include "gen_record.h"
#include "test.h"

#define NG 3
#define NPRED 40

/* mtp_n 0: plain greedy */
static braid_gen *make_gen(braid_context *c, braid_seq_id s, int mtp_n, gen_rec *r) {
    braid_gen_params gp = braid_gen_default_params();
    gp.seq = s;
    gp.n_predict = NPRED;
    gp.sampler.temperature = 0;
    gp.on_piece = gen_rec_on_piece;
    gp.piece_user = r;
    if (mtp_n) gp.mtp = 1, gp.draft_n = mtp_n;
    braid_gen *g = NULL;
    if (braid_gen_new(c, &gp, &g) != BRAID_OK) return NULL;
    r->g = g;
    return g;
}

static int tokenize(const braid_model *m, const char *text, int add_special, braid_token *out, int cap) {
    size_t n = 0;
    return braid_tokenize(m, text, strlen(text), add_special, 0, out, (size_t)cap, &n) == BRAID_OK ? (int)n : -1;
}

int main(void) {
    char path[1100];
    snprintf(path, sizeof path, "%s/models/kjv-qwen35-q8_0.gguf", test_env("BRAID_SOURCE_DIR", "."));
    braid_model *m = NULL;
    if (braid_model_load(path, NULL, &m) != BRAID_OK) TEST_SKIP("no default model at %s", path);
    const int32_t V = braid_model_n_vocab(m);
    static const char *const round1[NG] = {"And God said", "In the beginning", "Blessed are the"};
    static const char *const round2[NG] = {" unto them", " and the earth", " meek"};
    static const int mtp_n[NG] = {1, 2, 0};

    /* the shared context: generators on sequences 0..2 */
    braid_context *c = gen_test_ctx(m, NG, 16);
    CHECK(c != NULL, "context: %s", braid_last_error());
    gen_rec rb[NG], ra[NG], rp[NG];
    braid_gen *g[NG] = {0};
    for (int i = 0; i < NG; i++) {
        gen_rec_init(&rb[i], V, NPRED), gen_rec_init(&ra[i], V, NPRED), gen_rec_init(&rp[i], V, NPRED);
        g[i] = c ? make_gen(c, (braid_seq_id)i, mtp_n[i], &rb[i]) : NULL;
        CHECK(g[i] != NULL, "generator %d: %s", i, braid_last_error());
    }
    /* alone: each generator in its own context, braid_gen_run, with its MTP setting and plain */
    braid_context *ca[NG], *cp[NG];
    braid_gen *ga[NG], *gpl[NG];
    for (int i = 0; i < NG; i++) {
        ca[i] = gen_test_ctx(m, 1, 512), cp[i] = gen_test_ctx(m, 1, 512);
        ga[i] = ca[i] ? make_gen(ca[i], 0, mtp_n[i], &ra[i]) : NULL;
        gpl[i] = cp[i] ? make_gen(cp[i], 0, 0, &rp[i]) : NULL;
        CHECK(ga[i] && gpl[i], "generators alone %d: %s", i, braid_last_error());
    }

    braid_token hist[NG][512];
    int nh[NG] = {0};
    for (int round = 0; round < 2 && c; round++) {
        for (int i = 0; i < NG; i++) {
            /* the conversation so far (round 2: the first prompt, its reply and the follow-up) */
            int k = tokenize(m, round ? round2[i] : round1[i], round == 0, hist[i] + nh[i], 512 - nh[i]);
            CHECK(k > 0, "tokenize %d", i);
            if (k <= 0) goto done;
            nh[i] += k;
            gen_rec_reset(&rb[i]), gen_rec_reset(&ra[i]), gen_rec_reset(&rp[i]);
            CHECK(braid_gen_begin(g[i], hist[i], nh[i]) == BRAID_OK, "begin %d: %s", i, braid_last_error());
        }
        int steps = 0, any = 1;
        while (any && steps < 4 * NPRED + 64) {
            braid_status s = braid_gen_step(g, NG);
            CHECK(s == BRAID_OK, "step %d: %s", steps, braid_last_error());
            if (s != BRAID_OK) goto done;
            steps++;
            any = 0;
            for (int i = 0; i < NG; i++) any |= braid_gen_active(g[i]);
        }
        for (int i = 0; i < NG; i++) {
            CHECK(braid_gen_prompt(ga[i], hist[i], nh[i]) == BRAID_OK && braid_gen_run(ga[i]) == BRAID_OK,
                  "alone %d: %s", i, braid_last_error());
            CHECK(braid_gen_prompt(gpl[i], hist[i], nh[i]) == BRAID_OK && braid_gen_run(gpl[i]) == BRAID_OK,
                  "plain %d: %s", i, braid_last_error());
            int32_t nb = 0, na = 0, np = 0;
            const braid_token *tb = braid_gen_tokens(g[i], &nb), *ta = braid_gen_tokens(ga[i], &na),
                              *tp = braid_gen_tokens(gpl[i], &np);
            CHECK(nb == np && nb > 0 && !memcmp(tb, tp, (size_t)nb * sizeof *tb),
                  "round %d gen %d (mtp %d): batched tokens (%d) = plain greedy alone (%d)", round, i, mtp_n[i], nb,
                  np);
            CHECK(na == np && !memcmp(ta, tp, (size_t)na * sizeof *ta), "round %d gen %d: MTP alone = plain greedy",
                  round, i);
            CHECK(gen_rec_same_logits(&rb[i], &ra[i], nb, 0), "round %d gen %d: logits batched = alone, bit for bit", round, i);
            const braid_gen_stats *st = braid_gen_get_stats(g[i]);
            if (mtp_n[i]) {
                CHECK(st->accepted > 0 && st->drafted >= st->accepted,
                      "round %d gen %d: MTP drafts accepted in the batch (%d of %d)", round, i, st->accepted,
                      st->drafted);
                CHECK(st->spec_replayed == 0, "round %d gen %d: nothing replayed (%d)", round, i, st->spec_replayed);
                printf("round %d gen %d (mtp, %d per step): %d of %d drafts accepted in the batch\n", round, i,
                       mtp_n[i], st->accepted, st->drafted);
            }
            /* the conversation goes on with the reply */
            for (int32_t t = 0; t < nb && nh[i] < 400; t++) hist[i][nh[i]++] = tb[t];
        }
    }
done:
    for (int i = 0; i < NG; i++) {
        braid_gen_free(g[i]), braid_gen_free(ga[i]), braid_gen_free(gpl[i]);
        braid_context_free(ca[i]), braid_context_free(cp[i]);
        gen_rec_free(&rb[i]), gen_rec_free(&ra[i]), gen_rec_free(&rp[i]);
    }
    braid_context_free(c);
    braid_model_free(m);
    TEST_MAIN_END();
}
