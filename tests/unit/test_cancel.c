/* test_cancel.c — cancelling a decode through braid_context_params.abort_callback: braid_decode returns
 * BRAID_E_CANCELLED and nothing changed. Checked per architecture on a gen-model file: the previous decode's
 * logits are still readable and equal, every sequence's length and saved state bytes are the same as before,
 * and decoding on afterwards gives the same logits bit for bit as a context that never saw the cancelled
 * batch. The callback is made to stop at each possible point (first layer of the first ubatch up to the last
 * layer of the last one). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "braid.h"
#include "genmodel/genmodel.h"
#include "test.h"

typedef struct stopper {
    int calls, stop_at; /* returns nonzero on call number stop_at (1-based); 0 = never */
} stopper;

static int stop_cb(void *user) {
    stopper *s = user;
    s->calls++;
    return s->stop_at > 0 && s->calls >= s->stop_at;
}

static braid_context *new_ctx(braid_model *m, stopper *st) {
    braid_context_params p = braid_context_default_params();
    p.n_ctx = 256;
    p.n_seq_max = 2;
    p.n_batch = 4; /* the 10-token batch below runs as several ubatches */
    p.n_threads = 2;
    p.kv_type = BRAID_TYPE_F32;
    p.abort_callback = st ? stop_cb : NULL;
    p.abort_user = st;
    braid_context *c = NULL;
    CHECK_STATUS(braid_context_new(m, &p, &c), BRAID_OK);
    return c;
}

static braid_status decode(braid_context *c, const braid_token *t, int n, braid_seq_id s) {
    braid_seq_id seq[16];
    for (int i = 0; i < n; i++) seq[i] = s;
    braid_batch b = {.n_tokens = n, .token = t, .seq = seq};
    return braid_decode(c, &b);
}

static void check_arch(const char *dir, const char *arch) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s.gguf", dir, arch);
    gen_params gp;
    gen_params_default(&gp);
    gp.arch = arch;
    gp.vocab = "none";
    gp.n_vocab = 256;
    gen_summary sum;
    CHECK_STATUS(gen_model_write(&gp, path, &sum), BRAID_OK);
    braid_model *m = NULL;
    CHECK_STATUS(braid_model_load(path, NULL, &m), BRAID_OK);
    if (!m) return;
    const int V = braid_model_n_vocab(m);
    const braid_token first[6] = {3, 14, 15, 92, 65, 35}, second[10] = {8, 97, 93, 23, 84, 62, 64, 33, 83, 27};
    const braid_token after[3] = {50, 28, 84};

    /* How many times one decode of `second` asks the callback. */
    stopper count = {0, 0};
    braid_context *c = new_ctx(m, &count);
    CHECK_STATUS(decode(c, first, 6, 0), BRAID_OK);
    count.calls = 0;
    CHECK_STATUS(decode(c, second, 10, 0), BRAID_OK);
    const int n_calls = count.calls;
    braid_context_free(c);
    CHECK(n_calls >= 3, "%s: the callback was asked %d times for a 3-ubatch decode", arch, n_calls);

    /* The reference: a context that never saw a cancelled decode. */
    float *want = bd_mallocn((size_t)V, sizeof(float)), *prev = bd_mallocn((size_t)V, sizeof(float));
    braid_context *ref = new_ctx(m, NULL);
    CHECK_STATUS(decode(ref, first, 6, 0), BRAID_OK);
    CHECK_STATUS(decode(ref, after, 3, 0), BRAID_OK);
    memcpy(want, braid_logits(ref, 2), (size_t)V * sizeof(float));
    braid_context_free(ref);

    int all_ok = 1;
    for (int stop = 1; stop <= n_calls; stop++) {
        stopper st = {0, 0};
        c = new_ctx(m, &st);
        if (!c) break;
        CHECK_STATUS(decode(c, first, 6, 0), BRAID_OK);
        CHECK_STATUS(decode(c, first, 2, 1), BRAID_OK);
        memcpy(prev, braid_logits(c, 1), (size_t)V * sizeof(float));
        void *s0 = NULL, *s1 = NULL;
        size_t n0 = 0, n1 = 0;
        CHECK_STATUS(braid_state_save(c, &s0, &n0), BRAID_OK);
        st.calls = 0, st.stop_at = stop;
        braid_status r = decode(c, second, 10, 0);
        CHECK(r == BRAID_E_CANCELLED, "%s: stop at call %d: got %s", arch, stop, braid_status_name(r));
        const float *lg = braid_logits(c, 1);
        CHECK(lg && !memcmp(lg, prev, (size_t)V * sizeof(float)), "%s: stop %d: previous logits changed", arch, stop);
        CHECK(braid_seq_len(c, 0) == 6 && braid_seq_len(c, 1) == 2, "%s: stop %d: lengths %d %d", arch, stop,
              braid_seq_len(c, 0), braid_seq_len(c, 1));
        CHECK_STATUS(braid_state_save(c, &s1, &n1), BRAID_OK);
        int same_state = s0 && s1 && n0 == n1 && !memcmp(s0, s1, n0);
        CHECK(same_state, "%s: stop %d: saved state differs after the cancelled decode", arch, stop);
        st.stop_at = 0;
        CHECK_STATUS(decode(c, after, 3, 0), BRAID_OK);
        lg = braid_logits(c, 2);
        int same = lg && !memcmp(lg, want, (size_t)V * sizeof(float));
        CHECK(same, "%s: stop %d: decoding on differs from a context without the cancelled decode", arch, stop);
        all_ok &= r == BRAID_E_CANCELLED && same_state && same;
        braid_free(s0);
        braid_free(s1);
        braid_context_free(c);
    }
    printf("%s: cancelled at each of %d callback points of a 3-ubatch decode: %s\n", arch, n_calls,
           all_ok ? "nothing changed, decoding on bit-identical" : "FAILED");
    bd_free(want);
    bd_free(prev);
    braid_model_free(m);
    unlink(path);
}

int main(void) {
    char dir[] = "/tmp/braid_cancel_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    const char *archs[] = {"qwen35", "mamba2", "nemotron_h", "nemotron_h_moe", "lfm2", "lfm2moe", "granitehybrid", "falcon-h1"};
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) check_arch(dir, archs[i]);
    rmdir(dir);
    TEST_MAIN_END();
}
