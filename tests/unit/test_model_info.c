/* test_model_info.c — what a program can read back from braid: the GGUF metadata of a loaded model as text
 * (braid_model_n_meta / _meta_key / _meta_str: every key listed, values rendered, truncation reported, a missing
 * key refused), its size, and a sequence's history input by input (braid_seq_input: tokens and positions as
 * decoded, M-RoPE positions with all four components, out-of-range ids refused). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "braid.h"
#include "genmodel/genmodel.h"
#include "test.h"

static void check_meta(braid_model *m) {
    int32_t n = braid_model_n_meta(m);
    CHECK(n > 5, "a gen-model file has metadata (%d keys)", n);
    int found_arch = 0;
    for (int32_t i = 0; i < n; i++) {
        const char *key = NULL;
        CHECK_STATUS(braid_model_meta_key(m, i, &key), BRAID_OK);
        char val[64];
        size_t len = 0;
        CHECK_STATUS(braid_model_meta_str(m, key, val, sizeof val, &len), BRAID_OK);
        CHECK(strlen(val) == (len < sizeof val ? len : sizeof val - 1), "%s: value NUL-terminated within the buffer",
              key);
        if (!strcmp(key, "general.architecture")) {
            found_arch = 1;
            CHECK(!strcmp(val, braid_model_arch(m)), "general.architecture is %s, got %s", braid_model_arch(m), val);
        }
    }
    CHECK(found_arch, "general.architecture is among the keys");
    const char *key = NULL;
    CHECK_STATUS(braid_model_meta_key(m, n, &key), BRAID_E_RANGE);
    CHECK_STATUS(braid_model_meta_key(m, -1, &key), BRAID_E_RANGE);
    char small[4];
    size_t len = 0;
    CHECK_STATUS(braid_model_meta_str(m, "general.architecture", small, sizeof small, &len), BRAID_OK);
    CHECK(len == strlen(braid_model_arch(m)) && strlen(small) == 3 && !strncmp(small, braid_model_arch(m), 3),
          "a short buffer gets a truncated, terminated value and the full length (%zu, '%s')", len, small);
    char buf[64];
    CHECK_STATUS(braid_model_meta_str(m, "no.such.key", buf, sizeof buf, &len), BRAID_E_RANGE);
    /* The block count is a number: rendered in decimal, equal to what the model reports. */
    char key_blocks[96];
    snprintf(key_blocks, sizeof key_blocks, "%s.block_count", braid_model_arch(m));
    CHECK_STATUS(braid_model_meta_str(m, key_blocks, buf, sizeof buf, &len), BRAID_OK);
    CHECK(atoi(buf) == braid_model_n_layer(m), "%s = %s, the model has %d layers", key_blocks, buf,
          braid_model_n_layer(m));
    if (!strcmp(braid_model_arch(m), "qwen35")) { /* its M-RoPE sections are an array of 4 integers */
        CHECK_STATUS(braid_model_meta_str(m, "qwen35.rope.dimension_sections", buf, sizeof buf, &len), BRAID_OK);
        CHECK(!strcmp(buf, "[4 elements of i32]"), "an array is summarized: %s", buf);
    }
    CHECK(braid_model_n_params(m) > 1000 && braid_model_size(m) > 1000, "size and parameter count are counted");
}

static void check_history(braid_model *m) {
    braid_context_params p = braid_context_default_params();
    p.n_ctx = 64;
    p.n_seq_max = 2;
    p.n_threads = 1;
    braid_context *c = NULL;
    CHECK_STATUS(braid_context_new(m, &p, &c), BRAID_OK);
    if (!c) return;
    const int np = braid_model_n_pos_per_token(m);
    const braid_token t[5] = {7, 1, 9, 4, 200};
    braid_seq_id seq[5] = {1, 1, 1, 1, 1};
    braid_batch b = {.n_tokens = 5, .token = t, .seq = seq};
    CHECK_STATUS(braid_decode(c, &b), BRAID_OK);
    for (int i = 0; i < 5; i++) {
        braid_token got = -2;
        braid_pos pos[4] = {-1, -1, -1, -1};
        CHECK_STATUS(braid_seq_input(c, 1, i, &got, pos), BRAID_OK);
        CHECK(got == t[i] && pos[0] == i, "input %d: token %d at %d (want %d at %d)", i, got, pos[0], t[i], i);
        if (np == 4)
            CHECK(pos[1] == i && pos[2] == i && pos[3] == 0, "input %d: a text token is at (p, p, p, 0)", i);
    }
    braid_token tok;
    CHECK_STATUS(braid_seq_input(c, 1, 5, &tok, NULL), BRAID_E_RANGE);
    CHECK_STATUS(braid_seq_input(c, 1, -1, &tok, NULL), BRAID_E_RANGE);
    CHECK_STATUS(braid_seq_input(c, 0, 0, &tok, NULL), BRAID_E_RANGE);
    CHECK_STATUS(braid_seq_input(c, 9, 0, &tok, NULL), BRAID_E_RANGE);
    CHECK_STATUS(braid_seq_input(c, 1, 2, NULL, NULL), BRAID_OK);
    braid_context_free(c);
}

int main(void) {
    char dir[] = "/tmp/braid-model-info-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    const char *archs[] = {"qwen35", "nemotron_h"};
    for (int a = 0; a < 2; a++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s.gguf", dir, archs[a]);
        gen_params gp;
        gen_params_default(&gp);
        gp.arch = archs[a];
        gp.vocab = "none";
        gp.n_vocab = 256;
        gen_summary sum;
        CHECK_STATUS(gen_model_write(&gp, path, &sum), BRAID_OK);
        braid_model *m = NULL;
        CHECK_STATUS(braid_model_load(path, NULL, &m), BRAID_OK);
        if (m) {
            check_meta(m);
            check_history(m);
        }
        braid_model_free(m);
        unlink(path);
    }
    rmdir(dir);
    TEST_MAIN_END();
}
