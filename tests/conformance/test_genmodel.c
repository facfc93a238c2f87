/* test_genmodel.c — every model `braid gen-model` writes loads in llama.cpp (through the oracle driver) and
 * runs, for every architecture: finite logits on every prompt row, and greedy continuations that are not a
 * repeat of the last input token (design.md §7). Also: the files are deterministic in the seed, keep 1-D
 * tensors and conv kernels F32, store the matrices in the requested type (every --type a quantization of
 * the same weights, so their logits stay close to the F32 model's), impossible shapes are rejected, and the
 * `braid gen-model` command works. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "genmodel/genmodel.h"
#include "oracle_client.h"
#include "oracle_cpu.h"
#include "tensor/types.h"
#include "test.h"

static char tmpdir[256];
static const char *prompt = "Hello world, this is a test of braid's model generator.";

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void tmp_path(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", tmpdir, name); }

static int files_equal(const char *a, const char *b) {
    size_t na, nb;
    unsigned char *x = (unsigned char *)test_read_file(a, &na), *y = (unsigned char *)test_read_file(b, &nb);
    int eq = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return eq;
}

/* Runs the braid command with args (a shell-free argv) and returns its exit status. */
static int run_braid(const char *const *args) {
    char bin[4096];
    snprintf(bin, sizeof bin, "%s/braid", test_env("BRAID_BUILD_DIR", "build"));
    const char *argv[32];
    int n = 0;
    argv[n++] = bin;
    for (; *args && n < 31; args++) argv[n++] = *args;
    argv[n] = NULL;
    pid_t pid;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0); /* the summary and the expected */
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0); /* usage errors are not news */
    int rc = posix_spawn(&pid, bin, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return -1;
    int st;
    if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

/* Every tensor: 1-D ones, norms, A/D, conv kernels and MoE routers F32; matrices `want` where their rows fit its blocks,
 * else the documented fallback (q8_0 when rows are a multiple of 32, else f16). strict: no fallback at all. */
static void check_types(const char *path, uint32_t want, int strict) {
    gguf_file *f;
    CHECK_STATUS(gguf_open(path, &f), BRAID_OK);
    if (!f) return;
    size_t n_want = 0, n_bad = 0;
    for (size_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        size_t len = strlen(t->name);
        int f32_only = t->n_dims == 1 || strstr(t->name, "conv1d") || strstr(t->name, ".conv.weight") ||
                       strstr(t->name, "norm") || strstr(t->name, "ffn_gate_inp") || /* MoE routers */
                       (len > 6 && (!strcmp(t->name + len - 6, ".ssm_a") || !strcmp(t->name + len - 6, ".ssm_d")));
        uint32_t expect = want;
        if (f32_only) expect = BRAID_TYPE_F32;
        else if (bd_row_size(want, t->ne[0]) == 0)
            expect = bd_row_size(BRAID_TYPE_Q8_0, t->ne[0]) ? BRAID_TYPE_Q8_0 : BRAID_TYPE_F16;
        if (t->type != expect || (strict && !f32_only && t->type != want)) {
            n_bad++;
            fprintf(stderr, "  %s {%lld}: type %u, want %u\n", t->name, (long long)t->ne[0], t->type, expect);
        }
        n_want += t->type == want;
    }
    CHECK(n_bad == 0, "%s: %zu tensors of the wrong type", path, n_bad);
    if (strict) CHECK(n_want >= 2, "%s: only %zu matrices of type %u", path, n_want, want);
    gguf_close(f);
}

typedef struct run_result {
    float *row; /* logits of the last prompt token [n_vocab] (bd_free) */
    int32_t n_vocab;
} run_result;

/* Loads path in llama.cpp, decodes the prompt (every row an output) and 8 greedy tokens, and checks that
 * the logits are finite and the continuation moves. */
static void run_oracle(const char *label, const char *path, int real_vocab, run_result *res) {
    memset(res, 0, sizeof *res);
    double t0 = now();
    oracle *o;
    CHECK_STATUS(oracle_start(path, "--ctx 256 --seq-max 2", &o), BRAID_OK);
    if (!o) return;
    int32_t *toks = NULL, n = 0;
    if (real_vocab) {
        CHECK_STATUS(oracle_tokenize(o, prompt, strlen(prompt), 0, 0, &toks, &n), BRAID_OK);
        CHECK(n > 8, "%s: prompt gave %d tokens", label, n);
    } else { /* a dummy vocabulary has no text: a fixed pattern of ids */
        n = 12;
        toks = bd_mallocn((size_t)n, sizeof *toks);
        for (int32_t i = 0; toks && i < n; i++) toks[i] = (i * 37 + 5) % o->n_vocab;
    }
    if (!toks || n == 0) {
        bd_free(toks);
        CHECK_STATUS(oracle_stop(o), BRAID_OK);
        return;
    }
    uint8_t *all = bd_calloc((size_t)n, 1);
    memset(all, 1, (size_t)n);
    float *logits = NULL;
    int32_t rows = 0;
    CHECK_STATUS(oracle_decode(o, n, toks, NULL, NULL, all, &logits, &rows), BRAID_OK);
    CHECK(rows == n, "%s: %d logits rows for %d tokens", label, rows, n);
    size_t bad = 0;
    float maxabs = 0;
    for (size_t i = 0; logits && i < (size_t)rows * (size_t)o->n_vocab; i++) {
        if (!isfinite(logits[i])) bad++;
        else if (fabsf(logits[i]) > maxabs) maxabs = fabsf(logits[i]);
    }
    CHECK(bad == 0, "%s: %zu non-finite logits", label, bad);
    CHECK(maxabs > 0.1f && maxabs < 1e4f, "%s: max |logit| %g", label, (double)maxabs);
    if (logits && rows == n) {
        res->row = bd_mallocn((size_t)o->n_vocab, sizeof(float));
        if (res->row)
            memcpy(res->row, logits + (size_t)(n - 1) * (size_t)o->n_vocab, (size_t)o->n_vocab * sizeof(float));
        res->n_vocab = o->n_vocab;
    }
    bd_free(logits);
    enum { G = 8 };
    int32_t g[G];
    CHECK_STATUS(oracle_greedy(o, G, 0, g, NULL), BRAID_OK);
    int repeats = 0, distinct = 0;
    for (int i = 0; i < G; i++) {
        repeats += g[i] == toks[n - 1];
        int seen = 0;
        for (int j = 0; j < i; j++) seen |= g[j] == g[i];
        distinct += !seen;
    }
    CHECK(repeats < G, "%s: greedy only repeats the last input token %d", label, toks[n - 1]);
    CHECK(distinct >= 3, "%s: greedy gives %d distinct tokens in %d", label, distinct, G);
    printf("  %-22s max|logit| %7.3f, greedy %d %d %d %d ..., %d distinct, %.2f s\n", label, (double)maxabs, g[0], g[1],
           g[2], g[3], distinct, now() - t0);
    bd_free(all);
    bd_free(toks);
    CHECK_STATUS(oracle_stop(o), BRAID_OK);
}

/* max |a - b| / max |a|, and the correlation of a and b */
static double rel_diff(const float *a, const float *b, int32_t n, double *corr) {
    double md = 0, mx = 0, sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
    for (int32_t i = 0; i < n; i++) {
        double x = a[i], y = b[i], d = fabs(x - y);
        if (d > md) md = d;
        if (fabs(x) > mx) mx = fabs(x);
        sa += x, sb += y, saa += x * x, sbb += y * y, sab += x * y;
    }
    double cov = sab - sa * sb / n, va = saa - sa * sa / n, vb = sbb - sb * sb / n;
    *corr = va > 0 && vb > 0 ? cov / sqrt(va * vb) : 0;
    return mx > 0 ? md / mx : INFINITY;
}

static void gen(gen_params *p, const char *name, char *path, size_t cap) {
    tmp_path(path, cap, name);
    gen_summary sum;
    CHECK_STATUS(gen_model_write(p, path, &sum), BRAID_OK);
}

static void test_shapes(void) {
    /* every architecture has every preset */
    for (const char *const *a = gen_arch_names(); *a; a++)
        for (const char *const *pr = gen_preset_names(); *pr; pr++) {
            gen_params q;
            gen_shape g;
            gen_params_default(&q);
            q.arch = *a;
            q.preset = *pr;
            CHECK_STATUS(gen_model_shape(&q, &g), BRAID_OK);
        }
    gen_params p;
    gen_shape s;
    gen_params_default(&p);
    CHECK_STATUS(gen_model_shape(&p, &s), BRAID_OK);
    CHECK(s.n_layer == 4 && s.n_embd == 64 && s.ssm_inner == 64 && s.n_rot == 16, "tiny preset shape");
    p.preset = "0.5b";
    CHECK_STATUS(gen_model_shape(&p, &s), BRAID_OK);
    CHECK(s.n_embd == 1024 && s.n_layer == 24 && s.interval == 4 && s.n_rot == 64 && s.ssm_inner == 2048, "0.5b shape");
    p.preset = "huge";
    CHECK_STATUS(gen_model_shape(&p, &s), BRAID_E_INVALID);
    gen_params_default(&p);
    p.arch = "gpt5";
    CHECK_STATUS(gen_model_shape(&p, &s), BRAID_E_INVALID);
    gen_params_default(&p);
    p.over.ssm_heads = 3; /* not a multiple of the 2 key heads */
    CHECK_STATUS(gen_model_shape(&p, &s), BRAID_E_INVALID);
    gen_params_default(&p);
    p.over.n_head = 3; /* not a multiple of the 2 KV heads */
    CHECK_STATUS(gen_model_shape(&p, &s), BRAID_E_INVALID);
    gen_params_default(&p);
    p.over.ssm_inner = 100; /* not state x v-heads */
    CHECK_STATUS(gen_model_shape(&p, &s), BRAID_E_INVALID);
    gen_params_default(&p);
    p.over.n_rot = 48; /* more than the head */
    CHECK_STATUS(gen_model_shape(&p, &s), BRAID_E_INVALID);
    gen_params_default(&p);
    p.over.ssm_state = 8; /* the inner size follows state x v-heads */
    p.over.n_layer = 3;
    CHECK_STATUS(gen_model_shape(&p, &s), BRAID_OK);
    CHECK(s.ssm_inner == 32 && s.n_layer == 3, "overrides: inner %lld layers %lld", (long long)s.ssm_inner,
          (long long)s.n_layer);
}

static void test_command_and_determinism(void) {
    char a[512], b[512], c[512];
    tmp_path(a, sizeof a, "cli-a.gguf");
    tmp_path(b, sizeof b, "cli-b.gguf");
    tmp_path(c, sizeof c, "lib-c.gguf");
    const char *args_a[] = {"gen-model", "--vocab", "none", "--seed", "7", "-o", a, NULL};
    const char *args_b[] = {"gen-model", "--vocab", "none", "--seed", "8", "-o", b, NULL};
    CHECK(run_braid(args_a) == 0, "braid gen-model -o %s failed", a);
    CHECK(run_braid(args_b) == 0, "braid gen-model --seed 8 failed");
    gen_params p;
    gen_params_default(&p);
    p.vocab = "none";
    p.seed = 7;
    gen_summary sum;
    CHECK_STATUS(gen_model_write(&p, c, &sum), BRAID_OK);
    CHECK(files_equal(a, c), "the same seed gives different files (command vs library)");
    CHECK(!files_equal(a, b), "seeds 7 and 8 give the same file");
    CHECK(sum.n_vocab == 1024 && sum.n_tensors == 53, "summary: vocab %lld, %zu tensors", (long long)sum.n_vocab,
          sum.n_tensors);
    const char *no_out[] = {"gen-model", "--preset", "tiny", NULL};
    CHECK(run_braid(no_out) == 2, "gen-model without -o must be a usage error");
    const char *bad_type[] = {"gen-model", "--type", "iq2_xxs", "-o", b, NULL};
    CHECK(run_braid(bad_type) == 2, "gen-model --type iq2_xxs must be a usage error");
    const char *act_type[] = {"gen-model", "--type", "q8_k", "-o", b, NULL};
    CHECK(run_braid(act_type) == 2, "gen-model --type q8_k (an activation format) must be a usage error");
    const char *bad_shape[] = {"gen-model", "--vocab", "none", "--v-heads", "3", "-o", b, NULL};
    CHECK(run_braid(bad_shape) == 1, "gen-model with v-heads 3 / k-heads 2 must fail");
    unlink(a);
    unlink(b);
    unlink(c);
}

int main(void) {
    oracle_pair pair; /* the oracle driver runs this ggml build */
    if (!oracle_pair_get(&pair)) TEST_SKIP("the requested pair cannot run on this CPU");
    snprintf(tmpdir, sizeof tmpdir, "%s/genmodel-XXXXXX", test_env("TMPDIR", "/tmp"));
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_shapes();
    test_command_and_determinism();

    /* tiny in every type, with the real qwen35 vocabulary; the same seed in all of them */
    /* (tiny's rows are 64 or 128 wide, so its K-quant matrices all take the q8_0 fallback; medium below
     * has every K-quant for real) */
    static const char *types[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k"};
    /* max |diff| / max |logit| allowed against the F32 model: per-weight error ~0.05% (f16), ~0.4% (bf16),
     * ~1% (q8_0 with q8_0 activations), ~10% (4 bits), amplified ~8x through the random layers */
    static const double tols[] = {0, 0.02, 0.1, 0.25, 1.5, 0.25};
    static const double min_corr[] = {0, 0.999, 0.99, 0.98, 0.5, 0.98};
    run_result ref = {0};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        gen_params p;
        gen_params_default(&p);
        p.type = (uint32_t)bd_type_from_name(types[i]);
        /* the real vocabulary costs ~1 s per llama.cpp start (151,936 tokens and merges): the type sweep
         * uses a dummy one of 2048 tokens; the real one is run below */
        p.vocab = "none";
        p.n_vocab = 2048;
        char path[512], label[64];
        snprintf(label, sizeof label, "tiny-%s-none.gguf", types[i]);
        gen(&p, label, path, sizeof path);
        check_types(path, p.type, 0);
        run_result r;
        run_oracle(label, path, 0, &r);
        if (i == 0) {
            ref = r;
        } else if (ref.row && r.row) {
            /* the same float weights, quantized: the logits stay near the F32 model's */
            double corr, d = rel_diff(ref.row, r.row, r.n_vocab, &corr);
            printf("  %-22s vs f32: max|diff|/max|logit| %.4f, correlation %.5f\n", label, d, corr);
            CHECK(d < tols[i], "%s: logits %.4f (relative) from the f32 model's, want < %.2f", label, d, tols[i]);
            CHECK(corr > min_corr[i], "%s: logits correlate %.5f with the f32 model's, want > %.3f", label, corr,
                  min_corr[i]);
        }
        if (i != 0) bd_free(r.row);
        unlink(path);
    }
    bd_free(ref.row);

    /* the real vocabulary (tokenized prompt), other presets, and K-quants on a shape whose rows all fit
     * 256-blocks */
    {
        gen_params p;
        gen_params_default(&p);
        char path[512];
        gen(&p, "tiny-f32.gguf", path, sizeof path);
        run_result r;
        run_oracle("tiny-f32.gguf", path, 1, &r);
        CHECK(r.n_vocab == 151936, "the qwen35 test vocabulary: llama.cpp sees %d tokens", r.n_vocab);
        bd_free(r.row);
        unlink(path);
    }
    {
        gen_params p;
        gen_params_default(&p);
        p.preset = "small";
        p.type = BRAID_TYPE_F16;
        char path[512];
        gen(&p, "small-f16.gguf", path, sizeof path);
        check_types(path, p.type, 1);
        run_result r;
        run_oracle("small-f16.gguf", path, 1, &r);
        bd_free(r.row);
        unlink(path);
    }
    static const char *kquants[] = {"q4_k", "q5_k", "q6_k"};
    for (size_t i = 0; i < sizeof kquants / sizeof kquants[0]; i++) {
        gen_params p;
        gen_params_default(&p);
        p.preset = "medium";
        p.type = (uint32_t)bd_type_from_name(kquants[i]);
        p.vocab = "none"; /* K-quant reference quantization is slow (~0.2 us a value): keep the vocab small */
        char path[512], label[64];
        snprintf(label, sizeof label, "medium-%s-none.gguf", kquants[i]);
        gen(&p, label, path, sizeof path);
        check_types(path, p.type, 1);
        run_result r;
        run_oracle(label, path, 0, &r);
        bd_free(r.row);
        unlink(path);
    }
    /* every other architecture: tiny F32, small F16 and medium Q4_K (dummy vocabulary: the architectures
     * are the subject here) */
    for (const char *const *a = gen_arch_names(); *a; a++) {
        if (!strcmp(*a, "qwen35")) continue;
        static const struct {
            const char *preset, *type;
        } cases[] = {{"tiny", "f32"}, {"small", "f16"}, {"medium", "q4_k"}};
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            gen_params p;
            gen_params_default(&p);
            p.arch = *a;
            p.preset = cases[i].preset;
            p.type = (uint32_t)bd_type_from_name(cases[i].type);
            p.vocab = "none";
            char path[512], label[64];
            snprintf(label, sizeof label, "%s-%s-%s.gguf", *a, cases[i].preset, cases[i].type);
            gen(&p, label, path, sizeof path);
            check_types(path, p.type, 1);
            run_result r;
            run_oracle(label, path, 0, &r);
            bd_free(r.row);
            unlink(path);
        }
    }
    rmdir(tmpdir);
    TEST_MAIN_END();
}
