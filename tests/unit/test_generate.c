/* test_generate.c — braid_gen, the library's generation loop, on tiny generated hybrid models:
 * - greedy braid_gen equals a hand-written greedy loop over braid_decode (prompt over several n_batch chunks);
 * - stop strings: the text ends before the first one, the streamed pieces are whole UTF-8 characters that
 *   concatenate to the text, nothing of the stop string is ever streamed; the abort callback stops;
 * - multi-turn reuse: a scripted 10-turn chat whose prompt is re-rendered from the whole history every turn
 *   (ChatML, earlier replies re-tokenized from their text, and a "reasoning" span that the renderer drops
 *   from earlier turns, as real templates do): each turn decodes only the new tokens plus a replay shorter
 *   than one checkpoint interval, never from zero, and the last turn's logits equal a fresh decode of the
 *   whole rendered conversation;
 * - context shift: 4x the context generated on qwen35 and on nemotron_h (Mamba2 + NoPE attention) without
 *   error; after a shift (keep 0) the logits equal
 *   a fresh context that decoded the same inputs at the shifted positions and removed the same ones
 *   (same recurrent state: remove keeps it in both);
 * - Self-Extend keeps the positions under the window's reach. */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "braid.h"
#include "genmodel/genmodel.h"
#include "test.h"

static braid_model *make_model(const char *arch, uint64_t seed, const char *path, const char *vocab) {
    gen_params gp;
    gen_params_default(&gp);
    gp.arch = arch;
    gp.seed = seed;
    if (vocab) gp.vocab = vocab, gp.n_vocab = 512;
    gen_summary sum;
    if (gen_model_write(&gp, path, &sum) != BRAID_OK) return NULL;
    braid_model *m = NULL;
    braid_model_params mp = braid_model_default_params();
    if (braid_model_load(path, &mp, &m) != BRAID_OK) return NULL;
    return m;
}

static braid_context *make_ctx(braid_model *m, uint32_t n_ctx, uint32_t n_batch, uint32_t interval, braid_type kv) {
    braid_context_params cp = braid_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    cp.n_threads = 1;
    cp.checkpoint_interval = interval;
    cp.kv_type = kv;
    braid_context *c = NULL;
    return braid_context_new(m, &cp, &c) == BRAID_OK ? c : NULL;
}

static int argmax(const float *l, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

/* Largest |a - b| over n values; *max_b gets the largest |b|. */
static double max_diff(const float *a, const float *b, int n, double *max_b) {
    double md = 0;
    *max_b = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > md) md = d;
        if (fabs(b[i]) > *max_b) *max_b = fabs(b[i]);
    }
    return md;
}

/* ---- streaming -------------------------------------------------------------------------------------------- */

typedef struct {
    char buf[1 << 16];
    size_t n;
    int calls, bad_utf8, final_calls;
    int abort_after, polls;
} sink;

static int valid_utf8(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t l = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (!l || i + l > n) return 0;
        for (size_t k = 1; k < l; k++)
            if ((s[i + k] & 0xC0) != 0x80) return 0;
        i += l;
    }
    return 1;
}

static int on_piece(void *user, braid_token t, const char *text, size_t len) {
    sink *s = user;
    s->calls++;
    if (t < 0) s->final_calls++;
    /* a piece released before the end is whole characters (the random model emits stray bytes, which only
     * the final flush may carry) */
    else if (!valid_utf8((const unsigned char *)text, len)) s->bad_utf8++;
    if (s->n + len < sizeof s->buf) {
        memcpy(s->buf + s->n, text, len);
        s->n += len;
    }
    return 0;
}

static int on_abort(void *user) {
    sink *s = user;
    return ++s->polls > s->abort_after;
}

static void test_loop(braid_model *m) {
    const char *prompt = "The quick brown fox jumps over the lazy dog. Ünïcödé → 漢字 🙂 and more words to read";
    braid_token pt[128];
    size_t np = 0;
    CHECK_STATUS(braid_tokenize(m, prompt, strlen(prompt), 1, 1, pt, 128, &np), BRAID_OK);
    enum { N = 40 };
    /* reference: hand-written greedy over braid_decode */
    braid_token ref[N];
    int n_ref = 0;
    {
        braid_context *c = make_ctx(m, 256, 512, 256, BRAID_TYPE_F16);
        braid_batch b = {.n_tokens = (int32_t)np, .token = pt};
        CHECK_STATUS(braid_decode(c, &b), BRAID_OK);
        int32_t row = (int32_t)np - 1;
        while (n_ref < N) {
            braid_token t = argmax(braid_logits(c, row), braid_model_n_vocab(m));
            if (braid_token_is_eog(m, t)) break;
            ref[n_ref++] = t;
            braid_batch one = {.n_tokens = 1, .token = &ref[n_ref - 1]};
            CHECK_STATUS(braid_decode(c, &one), BRAID_OK);
            row = 0;
        }
        braid_context_free(c);
    }
    braid_context *c = make_ctx(m, 256, 5, 256, BRAID_TYPE_F16); /* the prompt in chunks of 5 */
    braid_gen_params gp = braid_gen_default_params();
    gp.sampler.temperature = 0;
    gp.n_predict = N;
    sink sk;
    memset(&sk, 0, sizeof sk);
    gp.on_piece = on_piece;
    gp.piece_user = &sk;
    braid_gen *g = NULL;
    CHECK_STATUS(braid_gen_new(c, &gp, &g), BRAID_OK);
    CHECK_STATUS(braid_gen_prompt(g, pt, (int32_t)np), BRAID_OK);
    CHECK(braid_gen_get_stats(g)->decoded_tokens == (int32_t)np, "the whole prompt is decoded once");
    CHECK_STATUS(braid_gen_run(g), BRAID_OK);
    int32_t n_out = 0;
    const braid_token *out = braid_gen_tokens(g, &n_out);
    CHECK(n_out == n_ref && !memcmp(out, ref, (size_t)n_ref * sizeof *out), "greedy braid_gen = greedy loop (%d/%d)",
          n_out, n_ref);
    size_t tl = 0;
    const char *text = braid_gen_text(g, &tl);
    CHECK(sk.n == tl && !memcmp(sk.buf, text, tl), "the streamed pieces make the text (%zu vs %zu bytes)", sk.n, tl);
    CHECK(sk.final_calls == 1 && sk.bad_utf8 == 0, "whole characters until the final flush (%d bad)", sk.bad_utf8);
    CHECK(!strcmp(braid_gen_get_stats(g)->stop, "length"), "stop: length (%s)", braid_gen_get_stats(g)->stop);
    CHECK(braid_seq_len(c, 0) == (int32_t)np + n_out - 1, "the sequence holds prompt + reply but the last token");

    /* Stop string: the middle of that text. */
    if (tl > 12) {
        char stop[8];
        size_t at = tl / 2;
        while (at < tl && ((unsigned char)text[at] & 0xC0) == 0x80) at++;
        memcpy(stop, text + at, 3);
        stop[3] = 0;
        size_t first = (size_t)(strstr(text, stop) - text);
        char *text1 = strndup(text, first);
        braid_gen_free(g);
        gp.stop = (const char *const[]){stop};
        gp.n_stop = 1;
        memset(&sk, 0, sizeof sk);
        CHECK_STATUS(braid_gen_new(c, &gp, &g), BRAID_OK);
        CHECK_STATUS(braid_gen_prompt(g, pt, (int32_t)np), BRAID_OK);
        CHECK(braid_gen_get_stats(g)->reused_tokens == (int32_t)np - 1, "the same prompt again is reused (%d)",
              braid_gen_get_stats(g)->reused_tokens);
        CHECK_STATUS(braid_gen_run(g), BRAID_OK);
        size_t l2 = 0;
        const char *t2 = braid_gen_text(g, &l2);
        CHECK(!strcmp(braid_gen_get_stats(g)->stop, "stop") && l2 == first && !memcmp(t2, text1, first),
              "the text ends before the stop string (%zu vs %zu, %s)", l2, first, braid_gen_get_stats(g)->stop);
        CHECK(sk.n == l2 && !memcmp(sk.buf, t2, l2), "nothing of the stop string was streamed");
        free(text1);
    }
    braid_gen_free(g);

    /* Abort: after 3 polls of generation. */
    gp.stop = NULL;
    gp.n_stop = 0;
    gp.on_piece = NULL;
    memset(&sk, 0, sizeof sk);
    sk.abort_after = 3;
    gp.abort_cb = on_abort;
    gp.abort_user = &sk;
    CHECK_STATUS(braid_gen_new(c, &gp, &g), BRAID_OK);
    CHECK_STATUS(braid_gen_prompt(g, pt, (int32_t)np), BRAID_OK);
    sk.polls = 0;
    CHECK_STATUS(braid_gen_run(g), BRAID_OK);
    CHECK(!strcmp(braid_gen_get_stats(g)->stop, "cancelled") && braid_gen_get_stats(g)->n_generated == 3,
          "the abort callback stops (%s after %d)", braid_gen_get_stats(g)->stop, braid_gen_get_stats(g)->n_generated);
    braid_gen_free(g);
    /* Bad arguments. */
    gp = braid_gen_default_params();
    gp.seq = 5;
    CHECK_STATUS(braid_gen_new(c, &gp, &g), BRAID_E_RANGE);
    gp = braid_gen_default_params();
    gp.lookup_n = 2;
    gp.draft_n = 64;
    CHECK_STATUS(braid_gen_new(c, &gp, &g), BRAID_E_INVALID); /* n_rollback 8 cannot cover 65 */
    braid_context_free(c);
}

/* ---- multi-turn ------------------------------------------------------------------------------------------- */

typedef struct {
    char *user[10], *reply[10], *think[10];
} convo;

/* ChatML, the reasoning span of each reply shown only for the last one (as Qwen's templates do). */
static size_t render(const convo *cv, int turns, char *out, size_t cap) {
    size_t n = (size_t)snprintf(out, cap, "<|im_start|>system\nYou are a test.<|im_end|>\n");
    for (int t = 0; t < turns; t++) {
        n += (size_t)snprintf(out + n, cap - n, "<|im_start|>user\n%s<|im_end|>\n", cv->user[t]);
        if (t < turns - 1 || cv->reply[t])
            n += (size_t)snprintf(out + n, cap - n, "<|im_start|>assistant\n%s%s%s%s<|im_end|>\n",
                                  t == turns - 2 ? "<think>\n" : "", t == turns - 2 ? cv->think[t] : "",
                                  t == turns - 2 ? "\n</think>\n\n" : "", cv->reply[t]);
    }
    n += (size_t)snprintf(out + n, cap - n, "<|im_start|>assistant\n");
    return n;
}

static void test_multiturn(braid_model *m) {
    enum { INTERVAL = 32 };
    braid_context *c = make_ctx(m, 4096, 64, INTERVAL, BRAID_TYPE_F32);
    braid_gen_params gp = braid_gen_default_params();
    gp.sampler.temperature = 0;
    gp.n_predict = 12;
    braid_gen *g = NULL;
    CHECK_STATUS(braid_gen_new(c, &gp, &g), BRAID_OK);
    static const char *words[] = {"apple", "river", "stone", "cloud", "ember", "frost", "grain", "harbor", "ivory",
                                  "jungle"};
    convo cv;
    memset(&cv, 0, sizeof cv);
    static char text[1 << 16];
    static braid_token toks[8192];
    int ok_bound = 1, ok_never_zero = 1, max_replay = 0;
    int32_t first_reply = 0; /* the first turn's prompt: never decoded again */
    for (int t = 0; t < 10; t++) {
        char u[128];
        snprintf(u, sizeof u, "Turn %d: tell me about the %s, briefly please.", t + 1, words[t]);
        cv.user[t] = strdup(u);
        size_t n = render(&cv, t + 1, text, sizeof text);
        size_t nt = 0;
        CHECK_STATUS(braid_tokenize(m, text, n, 0, 1, toks, 8192, &nt), BRAID_OK);
        CHECK_STATUS(braid_gen_prompt(g, toks, (int32_t)nt), BRAID_OK);
        const braid_gen_stats *st = braid_gen_get_stats(g);
        int32_t fresh = st->prompt_tokens - st->reused_tokens;
        if (st->replayed_tokens > INTERVAL || st->decoded_tokens != fresh + st->replayed_tokens) ok_bound = 0;
        if (t > 0 && st->reused_tokens < first_reply) ok_never_zero = 0;
        if (st->replayed_tokens > max_replay) max_replay = st->replayed_tokens;
        printf("turn %2d: prompt %4d reused %4d decoded %3d (replay %2d)\n", t + 1, st->prompt_tokens,
               st->reused_tokens, st->decoded_tokens, st->replayed_tokens);
        if (t == 0) first_reply = st->prompt_tokens;
        if (t == 9) {
            /* the last turn's logits against a fresh decode of the whole conversation */
            braid_context *f = make_ctx(m, 4096, 64, INTERVAL, BRAID_TYPE_F32);
            braid_batch b = {.n_tokens = (int32_t)nt, .token = toks};
            CHECK_STATUS(braid_decode(f, &b), BRAID_OK);
            const float *lf = braid_logits(f, (int32_t)nt - 1);
            /* the generator's last decode put the next-token logits on its last row */
            const float *lg = NULL;
            for (int32_t r = 63; r >= 0 && !lg; r--) lg = braid_logits(c, r);
            double mx = 0, md = lf && lg ? max_diff(lf, lg, braid_model_n_vocab(m), &mx) : 0;
            printf("last turn vs fresh decode: max |diff| %.3g (max |logit| %.3g)\n", md, mx);
            CHECK(lf && lg && md <= 1e-4 * (mx > 1 ? mx : 1) && argmax(lf, braid_model_n_vocab(m)) ==
                                                                 argmax(lg, braid_model_n_vocab(m)),
                  "the last turn's logits equal a fresh decode of the whole conversation (max diff %g)", md);
            braid_context_free(f);
        }
        CHECK_STATUS(braid_gen_run(g), BRAID_OK);
        size_t rl = 0;
        const char *r = braid_gen_text(g, &rl);
        /* the reply as text; a stray byte would not survive JSON either, keep ASCII */
        char *rep = malloc(rl + 1);
        size_t k = 0;
        for (size_t i = 0; i < rl; i++)
            if ((unsigned char)r[i] >= 0x20 && (unsigned char)r[i] < 0x7f && r[i] != '<') rep[k++] = r[i];
        rep[k] = 0;
        cv.reply[t] = rep;
        char th[64];
        snprintf(th, sizeof th, "thinking about %s", words[t]);
        cv.think[t] = strdup(th);
    }
    CHECK(ok_bound, "every turn decodes the new tokens plus at most one checkpoint interval (max replay %d)",
          max_replay);
    CHECK(ok_never_zero, "no turn starts over");
    for (int t = 0; t < 10; t++) free(cv.user[t]), free(cv.reply[t]), free(cv.think[t]);
    braid_gen_free(g);
    braid_context_free(c);
}

/* ---- context shift -------------------------------------------------------------------------------------- */

static void test_ctx_shift(braid_model *m) {
    braid_context *c = make_ctx(m, 64, 64, 16, BRAID_TYPE_F16);
    braid_gen_params gp = braid_gen_default_params();
    gp.sampler.temperature = 0.8f;
    gp.sampler.seed = 5;
    gp.n_predict = 256;
    gp.ctx_shift = 1;
    gp.n_keep = 4;
    braid_gen *g = NULL;
    CHECK_STATUS(braid_gen_new(c, &gp, &g), BRAID_OK);
    braid_token pt[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    CHECK_STATUS(braid_gen_prompt(g, pt, 8), BRAID_OK);
    CHECK_STATUS(braid_gen_run(g), BRAID_OK);
    const braid_gen_stats *st = braid_gen_get_stats(g);
    int eog = !strcmp(st->stop, "eog");
    CHECK(eog || (st->n_generated == 256 && st->context_shifts >= 4), "4x the context with shifts (%d tokens, %d shifts, %s)",
          st->n_generated, st->context_shifts, st->stop);
    CHECK(braid_seq_len(c, 0) <= 64, "the sequence stays in the context");
    braid_gen_free(g);
    /* without shift the context stops it */
    gp.ctx_shift = 0;
    CHECK_STATUS(braid_gen_new(c, &gp, &g), BRAID_OK);
    CHECK_STATUS(braid_gen_prompt(g, pt, 8), BRAID_OK);
    CHECK_STATUS(braid_gen_run(g), BRAID_OK);
    CHECK(!strcmp(braid_gen_get_stats(g)->stop, "context") || !strcmp(braid_gen_get_stats(g)->stop, "eog"),
          "without --ctx-shift: stop at the context (%s)", braid_gen_get_stats(g)->stop);
    braid_gen_free(g);
    braid_context_free(c);

    /* After a shift (keep 0: drop the first half, move the rest back) the logits equal a fresh context that
     * decoded the same inputs at the positions they have after the shift and dropped the same ones. */
    enum { L = 40, D = 20 };
    braid_token x[L + 1];
    for (int i = 0; i <= L; i++) x[i] = (braid_token)(7 + 13 * i % 400);
    braid_pos pa[4 * L], pb[4 * L];
    const int npt = braid_model_n_pos_per_token(m);
    for (int i = 0; i < L; i++) /* A starts at D, so after -D its rest sits where B's is */
        for (int k = 0; k < npt; k++) pa[npt * i + k] = k == 3 ? 0 : i + D, pb[npt * i + k] = k == 3 ? 0 : i;
    braid_context *a = make_ctx(m, 128, 64, 16, BRAID_TYPE_F32), *b = make_ctx(m, 128, 64, 16, BRAID_TYPE_F32);
    braid_batch ba = {.n_tokens = L, .token = x, .pos = pa}, bb = {.n_tokens = L, .token = x, .pos = pb};
    CHECK_STATUS(braid_decode(a, &ba), BRAID_OK);
    CHECK_STATUS(braid_decode(b, &bb), BRAID_OK);
    CHECK_STATUS(braid_seq_remove(a, 0, 0, D), BRAID_OK);
    CHECK_STATUS(braid_seq_shift_pos(a, 0, 0, L - D, -D), BRAID_OK);
    CHECK_STATUS(braid_seq_remove(b, 0, 0, D), BRAID_OK);
    CHECK(braid_seq_next_pos(a, 0) == braid_seq_next_pos(b, 0), "the same next position (%d, %d)",
          braid_seq_next_pos(a, 0), braid_seq_next_pos(b, 0));
    braid_batch one = {.n_tokens = 1, .token = &x[L]};
    CHECK_STATUS(braid_decode(a, &one), BRAID_OK);
    CHECK_STATUS(braid_decode(b, &one), BRAID_OK);
    const float *la = braid_logits(a, 0), *lb = braid_logits(b, 0);
    double mx = 0, md = la && lb ? max_diff(la, lb, braid_model_n_vocab(m), &mx) : 0;
    printf("after a shift vs fresh: max |diff| %.3g (max |logit| %.3g)\n", md, mx);
    CHECK(la && lb && md <= 1e-3 * (mx > 1 ? mx : 1), "logits after a shift equal the fresh context's (%g)", md);
    braid_context_free(a);
    braid_context_free(b);

    /* Self-Extend: 200 tokens through a 64-position window with groups of 4 stay under 64 + 200 / 4. */
    c = make_ctx(m, 256, 64, 16, BRAID_TYPE_F16);
    gp = braid_gen_default_params();
    gp.sampler.temperature = 0.8f;
    gp.sampler.seed = 3;
    gp.n_predict = 200;
    gp.self_extend_n = 4;
    gp.self_extend_w = 64;
    CHECK_STATUS(braid_gen_new(c, &gp, &g), BRAID_OK);
    CHECK_STATUS(braid_gen_prompt(g, pt, 8), BRAID_OK);
    CHECK_STATUS(braid_gen_run(g), BRAID_OK);
    int32_t len = braid_seq_len(c, 0);
    braid_pos np = braid_seq_next_pos(c, 0);
    CHECK(len > 150 && np < 64 + len / 4 + 16, "Self-Extend compresses positions (%d inputs, next position %d)", len, np);
    braid_gen_free(g);
    braid_context_free(c);
}

int main(void) {
    const char *build = test_env("BRAID_BUILD_DIR", ".");
    char path[2048];
    snprintf(path, sizeof path, "%s/test_generate_qwen35.gguf", build);
    braid_model *m = make_model("qwen35", 11, path, NULL);
    CHECK(m != NULL, "tiny qwen35 model");
    if (!m) TEST_MAIN_END();
    test_loop(m);
    test_multiturn(m);
    test_ctx_shift(m);
    braid_model_free(m);
    unlink(path);
    /* the same context shift on a Mamba2 hybrid */
    snprintf(path, sizeof path, "%s/test_generate_nemotron_h.gguf", build);
    m = make_model("nemotron_h", 12, path, NULL);
    CHECK(m != NULL, "tiny nemotron_h model");
    if (m) test_ctx_shift(m);
    braid_model_free(m);
    unlink(path);
    TEST_MAIN_END();
}
