/* test_oracle.c — the oracle driver (tests/oracle/oracle.c) and its client (oracle_client.h) do what the
 * conformance tests rely on: several sequences in one batch give each the logits of a batch of its own;
 * seq_cp and state save/load carry a sequence over; embedding rows equal to the token embeddings (with
 * text positions, one component or all four) give the token decode's logits; a failing llama_decode is an
 * "err" reply the driver survives; a model that does not load is a loud failure. On a tiny qwen35 model
 * (hybrid, M-RoPE) with F32 weights. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "genmodel/genmodel.h"
#include "oracle_client.h"
#include "oracle_cpu.h"
#include "test.h"

enum { N = 12, G = 6 };

/* max |a - b| / max |a| over n values */
static double rel(const float *a, const float *b, int32_t n) {
    double md = 0, mx = 0;
    for (int32_t i = 0; i < n; i++) {
        if (fabs((double)a[i] - (double)b[i]) > md) md = fabs((double)a[i] - (double)b[i]);
        if (fabs((double)a[i]) > mx) mx = fabs((double)a[i]);
    }
    return mx > 0 ? md / mx : INFINITY;
}

int main(void) {
    oracle_pair pair; /* the oracle driver runs this ggml build */
    if (!oracle_pair_get(&pair)) TEST_SKIP("the requested pair cannot run on this CPU");
    char dir[256], model[300], state[300];
    snprintf(dir, sizeof dir, "%s/oracle-XXXXXX", test_env("TMPDIR", "/tmp"));
    if (!mkdtemp(dir)) return 1;
    snprintf(model, sizeof model, "%s/tiny.gguf", dir);
    snprintf(state, sizeof state, "%s/seq.state", dir);
    gen_params gp;
    gen_params_default(&gp);
    gp.vocab = "none";
    CHECK_STATUS(gen_model_write(&gp, model, NULL), BRAID_OK);

    oracle *o;
    CHECK_STATUS(oracle_start(model, "--ctx 256 --seq-max 2", &o), BRAID_OK);
    if (!o) TEST_MAIN_END();
    const int32_t V = o->n_vocab;
    CHECK(V == 1024 && o->n_embd == 64 && o->n_pos == 4 && o->n_seq_max == 2, "info: vocab %d embd %d pos %d seqs %d",
          V, o->n_embd, o->n_pos, o->n_seq_max);
    int32_t prompt[N];
    for (int i = 0; i < N; i++) prompt[i] = (i * 131 + 7) % V;

    /* the reference: the prompt alone in sequence 0, then a greedy continuation */
    float *ref = NULL, *gref_rows = NULL;
    int32_t rows, gref[G];
    CHECK_STATUS(oracle_decode(o, N, prompt, NULL, NULL, NULL, &ref, &rows), BRAID_OK);
    CHECK(rows == 1, "one output row by default, got %d", rows);
    CHECK_STATUS(oracle_greedy(o, G, 0, gref, &gref_rows), BRAID_OK);
    CHECK(ref && gref_rows && rel(ref, gref_rows, V) == 0, "greedy's first row is the prompt's last logits");
    const char *r;
    CHECK_STATUS(oracle_cmd(o, &r, "pos_range 0"), BRAID_OK);
    CHECK(!strcmp(r, "17 17"), "after %d + %d tokens the hybrid memory holds position 17 only, got '%s'", N, G, r);

    /* both sequences in one batch, interleaved */
    CHECK_STATUS(oracle_cmd(o, NULL, "clear"), BRAID_OK);
    int32_t tok2[2 * N], seq2[2 * N];
    for (int i = 0; i < N; i++) {
        tok2[2 * i] = tok2[2 * i + 1] = prompt[i];
        seq2[2 * i] = 0;
        seq2[2 * i + 1] = 1;
    }
    float *two = NULL;
    CHECK_STATUS(oracle_decode(o, 2 * N, tok2, NULL, seq2, NULL, &two, &rows), BRAID_OK);
    CHECK(rows == 2, "two sequences give two rows, got %d", rows);
    if (two && ref && rows == 2) {
        double d0 = rel(ref, two, V), d1 = rel(ref, two + V, V);
        printf("two sequences in one batch vs alone: %.2e, %.2e\n", d0, d1);
        CHECK(d0 < 1e-5 && d1 < 1e-5, "multi-sequence batch differs from a batch of its own: %.2e %.2e", d0, d1);
    }
    int32_t g0[G], g1[G];
    CHECK_STATUS(oracle_greedy(o, G, 0, g0, NULL), BRAID_OK);
    CHECK_STATUS(oracle_greedy(o, G, 1, g1, NULL), BRAID_OK);
    CHECK(!memcmp(g0, gref, sizeof g0) && !memcmp(g1, gref, sizeof g1), "greedy continuations differ by sequence");

    /* seq_cp: sequence 1 continues where sequence 0 is */
    CHECK_STATUS(oracle_cmd(o, NULL, "clear"), BRAID_OK);
    bd_free(two);
    CHECK_STATUS(oracle_decode(o, N, prompt, NULL, NULL, NULL, &two, &rows), BRAID_OK);
    CHECK_STATUS(oracle_cmd(o, NULL, "seq_cp 0 1 -1 -1"), BRAID_OK);
    CHECK_STATUS(oracle_greedy_at(o, G, 1, N, g1, NULL), BRAID_OK); /* explicit positions: the same as implied */
    CHECK(!memcmp(g1, gref, sizeof g1), "greedy after seq_cp differs");

    /* a recurrent state cannot drop its tail: llama.cpp says so with 0 */
    CHECK_STATUS(oracle_cmd(o, &r, "seq_rm 0 4 -1"), BRAID_OK);
    CHECK(!strcmp(r, "0"), "partial seq_rm on a hybrid: got '%s', want 0", r);

    /* state save in sequence 0, load into sequence 1 of an empty context, continue */
    CHECK_STATUS(oracle_cmd(o, NULL, "clear"), BRAID_OK);
    bd_free(two);
    CHECK_STATUS(oracle_decode(o, N, prompt, NULL, NULL, NULL, &two, &rows), BRAID_OK);
    CHECK_STATUS(oracle_cmd(o, &r, "state_seq_save 0 %s", state), BRAID_OK);
    CHECK(atol(r) > 0, "state_seq_save wrote '%s' bytes", r);
    CHECK_STATUS(oracle_cmd(o, NULL, "clear"), BRAID_OK);
    CHECK_STATUS(oracle_cmd(o, &r, "state_seq_load 1 %s", state), BRAID_OK);
    CHECK(atol(r) > 0, "state_seq_load read '%s' bytes", r);
    float *after = NULL;
    int32_t seq1 = 1;
    CHECK_STATUS(oracle_decode(o, 1, &gref[0], NULL, &seq1, NULL, &after, &rows), BRAID_OK);
    if (after && gref_rows) {
        double d = rel(gref_rows + V, after, V);
        printf("after state save/load vs straight through: %.2e\n", d);
        CHECK(d < 1e-5, "logits after a state round trip differ: %.2e", d);
    }

    /* the prompt as embedding rows (token_embd rows, F32), text positions given as 1 and as 4 components */
    gguf_file *f = NULL;
    CHECK_STATUS(gguf_open(model, &f), BRAID_OK);
    const gguf_tensor *te = f ? gguf_find_tensor(f, "token_embd.weight") : NULL;
    CHECK(te && te->type == BRAID_TYPE_F32 && te->ne[0] == o->n_embd, "token_embd.weight F32 [%d, V]", o->n_embd);
    if (te) {
        float *embd = bd_mallocn((size_t)N * (size_t)o->n_embd, sizeof(float));
        int32_t pos1[N], pos4[4 * N];
        for (int i = 0; i < N; i++) {
            memcpy(embd + (size_t)i * (size_t)o->n_embd, (const float *)te->data + (size_t)prompt[i] * (size_t)o->n_embd,
                   (size_t)o->n_embd * sizeof(float));
            pos1[i] = i;
            pos4[4 * i] = pos4[4 * i + 1] = pos4[4 * i + 2] = i;
            pos4[4 * i + 3] = 0;
        }
        for (int k = 0; k < 2; k++) {
            CHECK_STATUS(oracle_cmd(o, NULL, "clear"), BRAID_OK);
            float *e = NULL;
            CHECK_STATUS(oracle_decode_embd(o, N, embd, k ? pos4 : pos1, k ? 4 : 1, NULL, NULL, &e, &rows), BRAID_OK);
            if (e && ref) {
                double d = rel(ref, e, V);
                printf("embedding rows (%d position components) vs tokens: %.2e\n", k ? 4 : 1, d);
                CHECK(d < 1e-6, "embedding input differs from token input: %.2e", d);
            }
            bd_free(e);
        }
        bd_free(embd);
    }
    gguf_close(f);

    /* a decode llama.cpp refuses (M-RoPE positions must move forward) is an error reply, not the end */
    float *bad = NULL;
    int32_t p0 = 0;
    CHECK_STATUS(oracle_decode(o, 1, prompt, &p0, NULL, NULL, &bad, &rows), BRAID_E_INVALID);
    CHECK(strstr(braid_last_error(), "llama_decode returned") != NULL, "error names llama_decode: %s", braid_last_error());
    CHECK_STATUS(oracle_cmd(o, &r, "pos_range 0"), BRAID_OK);
    CHECK(!strcmp(r, "11 11"), "the refused decode changed nothing: '%s'", r);
    CHECK_STATUS(oracle_stop(o), BRAID_OK);

    /* a model that does not load: a failure with a reason, not a hang */
    oracle *none = NULL;
    snprintf(state, sizeof state, "%s/missing.gguf", dir);
    CHECK_STATUS(oracle_start(state, NULL, &none), BRAID_E_IO);
    CHECK(none == NULL, "no handle for a model that did not load");

    bd_free(ref);
    bd_free(gref_rows);
    bd_free(two);
    bd_free(after);
    unlink(model);
    snprintf(state, sizeof state, "%s/seq.state", dir);
    unlink(state);
    rmdir(dir);
    TEST_MAIN_END();
}
