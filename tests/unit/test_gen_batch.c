/* test_gen_batch.c — continuous batching (braid_gen_begin / braid_gen_step) on a tiny generated qwen35:
 * - batch invariance: four greedy prompts of different lengths run together, in steps whose n_batch (16) splits
 *   the prompts into chunks mixed with the others' decode rows, give the same tokens, the same text and the
 *   same logits bit for bit (every emitted token's row, read through braid_gen_logits) as each run alone with
 *   braid_gen_prompt + braid_gen_run. The model's matrices are Q8_0: quantized products compute every output
 *   as the type's vec_dot whatever the number of rows. With F32 (and F16/BF16) matrices the bits depend on the
 *   rows in the product (one row: vec_dot; several: tinyBLAS tiles, as in ggml), so there tokens agree but
 *   logits only to rounding (~3e-5 measured here);
 * - a generator cancelled by its abort callback stops with "cancelled" within one step and the others go on
 *   unchanged; its sequence holds what was decoded (prompt + emitted tokens but the last);
 * - refusals: two active generators on one sequence (speculative generators: test_gen_batch_spec.c). */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "braid.h"
#include "gen_record.h"
#include "genmodel/genmodel.h"
#include "test.h"

#define NP 4
#define NPRED 12

static braid_gen *make_gen(braid_context *c, braid_seq_id s, gen_rec *r) {
    braid_gen_params gp = braid_gen_default_params();
    gp.seq = s;
    gp.n_predict = NPRED;
    gp.sampler.temperature = 0;
    gp.on_piece = gen_rec_on_piece;
    gp.piece_user = r;
    gp.abort_cb = gen_rec_abort;
    gp.abort_user = r;
    braid_gen *g = NULL;
    if (braid_gen_new(c, &gp, &g) != BRAID_OK) return NULL;
    r->g = g;
    gen_rec_reset(r);
    return g;
}

int main(void) {
    char path[1100];
    snprintf(path, sizeof path, "%s/test_gen_batch.gguf", test_env("BRAID_BUILD_DIR", "."));
    gen_params gp;
    gen_params_default(&gp);
    gp.vocab = "none";
    gp.n_vocab = 512;
    gp.type = BRAID_TYPE_Q8_0;
    gen_summary sum;
    CHECK_STATUS(gen_model_write(&gp, path, &sum), BRAID_OK);
    braid_model *m = NULL;
    braid_model_params mp = braid_model_default_params();
    CHECK_STATUS(braid_model_load(path, &mp, &m), BRAID_OK);
    if (!m) TEST_MAIN_END();
    const int32_t V = braid_model_n_vocab(m);
    static const int32_t plen[NP] = {37, 5, 21, 50};
    braid_token prompts[NP][64];
    for (int p = 0; p < NP; p++)
        for (int i = 0; i < plen[p]; i++) prompts[p][i] = (braid_token)((p * 97 + i * 31 + 7) % V);

    /* alone: one context per prompt, braid_gen_prompt + braid_gen_run */
    gen_rec alone[NP], both[NP];
    braid_token alone_tok[NP][NPRED];
    int32_t alone_n[NP];
    for (int p = 0; p < NP; p++) {
        gen_rec_init(&alone[p], V, NPRED);
        braid_context *c = gen_test_ctx(m, 1, 512);
        braid_gen *g = c ? make_gen(c, 0, &alone[p]) : NULL;
        CHECK(g != NULL, "generator %d", p);
        if (!g) continue;
        CHECK_STATUS(braid_gen_prompt(g, prompts[p], plen[p]), BRAID_OK);
        CHECK_STATUS(braid_gen_run(g), BRAID_OK);
        const braid_token *t = braid_gen_tokens(g, &alone_n[p]);
        memcpy(alone_tok[p], t, (size_t)alone_n[p] * sizeof *t);
        braid_gen_free(g);
        braid_context_free(c);
    }

    /* together: one context, four sequences, n_batch 16 */
    braid_context *c = gen_test_ctx(m, NP + 1, 16);
    CHECK(c != NULL, "the shared context");
    braid_gen *gs[NP];
    for (int p = 0; c && p < NP; p++) {
        gen_rec_init(&both[p], V, NPRED);
        gs[p] = make_gen(c, p, &both[p]);
        CHECK_STATUS(braid_gen_begin(gs[p], prompts[p], plen[p]), BRAID_OK);
    }
    int steps = 0, active = 1;
    while (c && active && steps < 1000) {
        CHECK_STATUS(braid_gen_step(gs, NP), BRAID_OK);
        steps++;
        active = 0;
        for (int p = 0; p < NP; p++) active |= braid_gen_active(gs[p]);
    }
    CHECK(!active, "all generators end (%d steps)", steps);
    for (int p = 0; c && p < NP; p++) {
        int32_t n = 0;
        const braid_token *t = braid_gen_tokens(gs[p], &n);
        CHECK(n == alone_n[p] && !memcmp(t, alone_tok[p], (size_t)n * sizeof *t),
              "prompt %d: the same tokens together as alone (%d vs %d)", p, n, alone_n[p]);
        CHECK(both[p].n == alone[p].n && both[p].n > 0, "prompt %d: as many pieces (%d vs %d)", p, both[p].n,
              alone[p].n);
        int nl = both[p].n < NPRED ? both[p].n : NPRED;
        double md = 0;
        int first_bad = -1;
        for (size_t q = 0; q < (size_t)nl * V; q++) {
            double d = fabs((double)both[p].logits[q] - alone[p].logits[q]);
            if (d > md) md = d;
            if (d > 0 && first_bad < 0) first_bad = (int)(q / V);
        }
        CHECK(!memcmp(both[p].logits, alone[p].logits, (size_t)nl * V * sizeof(float)),
              "prompt %d: logits bit for bit (max diff %g, first differing token %d)", p, md, first_bad);
        const braid_gen_stats *st = braid_gen_get_stats(gs[p]);
        CHECK(!strcmp(st->stop, "length") && st->decoded_tokens == plen[p] && st->n_generated == NPRED,
              "prompt %d stats: stop %s decoded %d generated %d", p, st->stop, st->decoded_tokens, st->n_generated);
        CHECK(braid_seq_len(c, p) == plen[p] + NPRED - 1, "sequence %d holds prompt + reply but the last (%d)", p,
              braid_seq_len(c, p));
    }

    /* cancellation: generator 1 aborts after 3 tokens, the others are unchanged */
    for (int p = 0; c && p < NP; p++) {
        braid_seq_clear(c, p);
        both[p].n = 0;
        both[p].cancel_after = p == 1 ? 3 : 0;
        CHECK_STATUS(braid_gen_begin(gs[p], prompts[p], plen[p]), BRAID_OK);
    }
    active = 1;
    for (steps = 0; c && active && steps < 1000; steps++) {
        CHECK_STATUS(braid_gen_step(gs, NP), BRAID_OK);
        if (both[1].n >= 3 && braid_gen_active(gs[1])) {
            CHECK_STATUS(braid_gen_step(gs, NP), BRAID_OK);
            CHECK(!braid_gen_active(gs[1]), "the cancelled generator stops within one step");
        }
        active = 0;
        for (int p = 0; p < NP; p++) active |= braid_gen_active(gs[p]);
    }
    for (int p = 0; c && p < NP; p++) {
        int32_t n = 0;
        const braid_token *t = braid_gen_tokens(gs[p], &n);
        const braid_gen_stats *st = braid_gen_get_stats(gs[p]);
        if (p == 1) {
            CHECK(!strcmp(st->stop, "cancelled") && n == 3, "cancelled after 3 (%s, %d)", st->stop, n);
            CHECK(braid_seq_len(c, 1) == plen[1] + 3, "its sequence holds what was decoded (%d)",
                  braid_seq_len(c, 1));
        } else {
            CHECK(n == alone_n[p] && !memcmp(t, alone_tok[p], (size_t)n * sizeof *t), "prompt %d unchanged", p);
        }
    }

    /* refusals */
    if (c) {
        gen_rec r2;
        gen_rec_init(&r2, V, NPRED);
        braid_gen *dup = make_gen(c, 0, &r2);
        braid_seq_clear(c, -1);
        CHECK_STATUS(braid_gen_begin(gs[0], prompts[0], plen[0]), BRAID_OK);
        CHECK_STATUS(braid_gen_begin(dup, prompts[1], plen[1]), BRAID_OK);
        braid_gen *pair[2] = {gs[0], dup};
        CHECK_STATUS(braid_gen_step(pair, 2), BRAID_E_INVALID);
        braid_gen_free(dup);
        gen_rec_free(&r2);
    }
    for (int p = 0; c && p < NP; p++) braid_gen_free(gs[p]);
    for (int p = 0; p < NP; p++) gen_rec_free(&alone[p]), gen_rec_free(&both[p]);
    braid_context_free(c);
    braid_model_free(m);
    unlink(path);
    TEST_MAIN_END();
}
