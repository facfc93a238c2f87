/* test_vision_chat.c — 50 alternating text and image turns in one chat on a hybrid model (qwen35: Gated
 * DeltaNet + attention, M-RoPE), through braid_gen_prompt_parts and braid_gen_run as `braid chat` drives them:
 * every turn keeps the whole conversation so far (images included) and decodes only what is new, with no
 * replay; the images are encoded once (the projector's cache serves them again); the sequence and the memory
 * stay within the context; and the logits after the 50th prompt equal those of a fresh decode of the whole
 * conversation in another context (float rounding of other batch shapes: max rel <= 1e-4). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "braid.h"
#include "genmodel/gen_mmproj.h"
#include "genmodel/genmodel.h"
#include "test.h"

#define TURNS 50
#define MAX_PARTS (3 * TURNS + 1)

static char dir[] = "/tmp/braid_vision_chat_XXXXXX";

static const char *in_dir(const char *name) {
    static char p[2][4096];
    static int k;
    k ^= 1;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static braid_context *new_ctx(const braid_model *m) {
    braid_context_params cp = braid_context_default_params();
    cp.n_ctx = 8192;
    cp.n_threads = 2;
    cp.kv_type = BRAID_TYPE_F32;
    braid_context *c = NULL;
    CHECK_STATUS(braid_context_new(m, &cp, &c), BRAID_OK);
    return c;
}

int main(void) {
    if (!mkdtemp(dir)) TEST_SKIP("no temporary directory");
    gen_params tp;
    gen_params_default(&tp);
    tp.vocab = "none";
    tp.n_vocab = 512;
    tp.over.n_embd = 256;
    CHECK_STATUS(gen_model_write(&tp, in_dir("text.gguf"), NULL), BRAID_OK);
    gen_mmproj_params pp;
    gen_mmproj_default(&pp);
    pp.type = BRAID_TYPE_F32;
    CHECK_STATUS(gen_mmproj_write(&pp, in_dir("mm.gguf"), NULL), BRAID_OK);
    braid_model *m = NULL;
    braid_model_params mp = braid_model_default_params();
    CHECK_STATUS(braid_model_load(in_dir("text.gguf"), &mp, &m), BRAID_OK);
    braid_mmproj_params mpp = braid_mmproj_default_params();
    mpp.n_threads = 2;
    braid_mmproj *mm = NULL;
    CHECK_STATUS(braid_mmproj_load(in_dir("mm.gguf"), &mpp, &mm), BRAID_OK);
    if (!m || !mm) TEST_MAIN_END();
    CHECK(braid_model_has_recurrent(m) && braid_model_has_attention(m), "qwen35 is hybrid");

    /* three images of other sizes and shapes, shown in turn */
    braid_image *img[3] = {NULL, NULL, NULL};
    const int wh[3][2] = {{64, 48}, {100, 37}, {48, 96}};
    for (int i = 0; i < 3; i++) {
        uint8_t *rgb = malloc((size_t)wh[i][0] * wh[i][1] * 3);
        for (int k = 0; rgb && k < wh[i][0] * wh[i][1] * 3; k++) rgb[k] = (uint8_t)(k * (7 + i) ^ (k >> 5));
        if (rgb) CHECK_STATUS(braid_image_from_rgb(wh[i][0], wh[i][1], rgb, &img[i]), BRAID_OK);
        free(rgb);
    }

    braid_context *c = new_ctx(m);
    braid_gen_params gp = braid_gen_default_params();
    gp.n_predict = 3;
    gp.sampler.temperature = 0;
    braid_gen *g = NULL;
    if (c) CHECK_STATUS(braid_gen_new(c, &gp, &g), BRAID_OK);
    if (!g) TEST_MAIN_END();

    braid_prompt_part parts[MAX_PARTS];
    braid_token *own_tok[MAX_PARTS];
    float *own_rows[MAX_PARTS];
    memset(own_tok, 0, sizeof own_tok);
    memset(own_rows, 0, sizeof own_rows);
    int np = 0, ok = 1, reuse_ok = 1, replay = 0;
    int32_t held = 0; /* inputs the sequence holds after the last turn */
    uint64_t seed = 12345;
    for (int turn = 0; turn < TURNS && ok; turn++) {
        if (turn % 2 == 1) { /* an image turn: the image before the text, as braid chat puts it */
            float *rows = NULL;
            int32_t nx = 0, ny = 0;
            braid_status s = braid_mmproj_encode(mm, img[(turn / 2) % 3], &rows, &nx, &ny);
            CHECK_STATUS(s, BRAID_OK);
            if (s != BRAID_OK) break;
            own_rows[np] = rows;
            parts[np++] = (braid_prompt_part){.embd = rows, .nx = nx, .ny = ny};
        }
        int n = 3 + turn % 5;
        braid_token *t = malloc((size_t)n * sizeof *t);
        for (int i = 0; t && i < n; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            t[i] = (braid_token)((seed >> 33) % 512);
        }
        own_tok[np] = t;
        parts[np++] = (braid_prompt_part){.tokens = t, .n_tokens = n};
        braid_status s = braid_gen_prompt_parts(g, parts, np);
        CHECK_STATUS(s, BRAID_OK);
        if (s != BRAID_OK) break;
        const braid_gen_stats *st = braid_gen_get_stats(g);
        if (turn > 0 && st->reused_tokens < held) reuse_ok = 0;
        replay += st->replayed_tokens;
        if (turn == TURNS - 1) break; /* the final prompt: compare its logits below */
        s = braid_gen_run(g);
        CHECK_STATUS(s, BRAID_OK);
        int32_t ng = 0;
        const braid_token *gt = braid_gen_tokens(g, &ng);
        braid_token *copy = malloc(((size_t)ng + 1) * sizeof *copy);
        if (copy && ng) memcpy(copy, gt, (size_t)ng * sizeof *copy);
        own_tok[np] = copy;
        if (ng) parts[np++] = (braid_prompt_part){.tokens = copy, .n_tokens = ng};
        held = braid_seq_len(c, 0);
        ok = s == BRAID_OK && copy != NULL;
    }
    int32_t total = 0;
    for (int i = 0; i < np; i++) total += parts[i].embd ? parts[i].nx * parts[i].ny : parts[i].n_tokens;
    CHECK(braid_seq_len(c, 0) == total, "sequence holds %d inputs, the conversation has %d", braid_seq_len(c, 0), total);
    CHECK(reuse_ok, "a turn did not keep the whole conversation before it");
    CHECK(replay == 0, "%d inputs replayed over the turns", replay);
    uint64_t hits = 0, misses = 0;
    braid_mmproj_cache_stats(mm, &hits, &misses);
    CHECK(misses == 3 && hits == TURNS / 2 - 3, "projector cache: %llu hits, %llu encodes", (unsigned long long)hits,
          (unsigned long long)misses);

    /* the logits after the last prompt vs a fresh decode of the whole conversation */
    const int V = braid_model_n_vocab(m);
    const float *chat_lg = braid_logits(c, parts[np - 1].n_tokens - 1);
    braid_context *fresh = new_ctx(m);
    braid_gen *g2 = NULL;
    if (fresh) CHECK_STATUS(braid_gen_new(fresh, &gp, &g2), BRAID_OK);
    if (g2) CHECK_STATUS(braid_gen_prompt_parts(g2, parts, np), BRAID_OK);
    const float *fresh_lg = fresh ? braid_logits(fresh, parts[np - 1].n_tokens - 1) : NULL;
    CHECK(chat_lg && fresh_lg, "logits missing");
    if (chat_lg && fresh_lg) {
        double d = 0, mag = 0;
        int am1 = 0, am2 = 0;
        for (int i = 0; i < V; i++) {
            double e = fabs((double)chat_lg[i] - fresh_lg[i]);
            if (e > d || isnan(e)) d = isnan(e) ? INFINITY : e;
            if (fabs(fresh_lg[i]) > mag) mag = fabs(fresh_lg[i]);
            if (chat_lg[i] > chat_lg[am1]) am1 = i;
            if (fresh_lg[i] > fresh_lg[am2]) am2 = i;
        }
        printf("50 turns, %d inputs (%d image turns): chat vs fresh max|diff| %.3e rel %.3e\n", total, TURNS / 2,
               d, d / mag);
        CHECK(d / (mag > 0 ? mag : 1) <= 1e-4 && am1 == am2, "chat vs fresh: rel %.3e, argmax %d vs %d", d / mag, am1,
              am2);
    }
    braid_gen_free(g2);
    braid_context_free(fresh);
    braid_gen_free(g);
    braid_context_free(c);
    for (int i = 0; i < np; i++) {
        free(own_tok[i]);
        braid_free(own_rows[i]);
    }
    for (int i = 0; i < 3; i++) braid_image_free(img[i]);
    braid_mmproj_free(mm);
    braid_model_free(m);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    int st;
    free(test_run_cmd(cmd, &st));
    TEST_MAIN_END();
}
