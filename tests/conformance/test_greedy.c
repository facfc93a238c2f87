/* test_greedy.c — the acceptance test of greedy generation as a user runs it: `braid run --temp 0` (the command,
 * one thread) must print the tokens llama.cpp's greedy decoding gives on the same file and prompt tokens (the
 * oracle driver: llama.cpp's library, the ggml CPU build it loads here, argmax with the lowest id on ties, with
 * braid run's K/V cache type, F16).
 *
 * Files: a random-weight qwen35 F32 file with the real qwen35 vocabulary; the trained built-in model
 * (models/kjv-qwen35-q8_0.gguf: Q8_0 matrices, clear margins between its top tokens); a random qwen35 Q4_K file
 * and the Q4_K_M mix of a random F16 one (braid_model_quantize: llama-quantize's per-tensor types and bytes).
 * On random weights the top two logits are often within float rounding of each other, so a quantized random
 * file is only held to its first tokens where braid does not claim the whole pair bit-identical (oracle_cpu.h):
 * MIN_SAME_QUANT_RANDOM tokens (printed: how far the two agree; measured for Q4_K 8 of 24 on x86 at avx512 vs
 * zen4 and avx2 vs haswell, and on arm64 at dotprod vs armv8.2_2; for Q4_K_M 17 at avx512 vs zen4, 10 at
 * dotprod vs armv8.2_2; the medium Q4_K_M file makes this test ~2 minutes under qemu). F32 and the trained
 * Q8_0 file must agree on every token. Runs natively and under qemu-aarch64 (scripts/test-arm64.sh), where it
 * is the check that the emulated arm64 build generates llama.cpp's arm64 tokens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "braid.h"
#include "genmodel/genmodel.h"
#include "oracle_client.h"
#include "oracle_cpu.h"
#include "test.h"

enum { N_GEN = 24, MAX_TOK = 256, MIN_SAME_QUANT_RANDOM = 4 };

/* The integers of the JSON array after "key": in json (braid run --json's flat object); returns how many. */
static int json_int_array(const char *json, const char *key, int32_t *out, int cap) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":[", key);
    const char *p = json ? strstr(json, pat) : NULL;
    if (!p) return -1;
    p += strlen(pat);
    int n = 0;
    while (*p && *p != ']') {
        char *end;
        const long v = strtol(p, &end, 10);
        if (end == p) return -1;
        if (n < cap) out[n] = (int32_t)v;
        n++;
        p = end;
        if (*p == ',') p++;
    }
    return n;
}

/* Runs braid run greedy on path; fills the prompt tokens and the generated ones; returns the generated count
 * (-1 on failure). */
static int braid_greedy(const char *path, const char *prompt, int32_t *ptoks, int *np, int32_t *gen) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s/braid' run -m '%s' -p '%s' -n %d --temp 0 -t 1 --json 2>/dev/null",
             test_env("BRAID_BUILD_DIR", "."), path, prompt, N_GEN);
    int st = 0;
    char *out = test_run_cmd(cmd, &st);
    CHECK(out && st == 0, "braid run on %s exits 0 (%d)", path, st);
    *np = json_int_array(out, "prompt_tokens", ptoks, MAX_TOK);
    const int n = json_int_array(out, "tokens", gen, N_GEN);
    free(out);
    CHECK(*np > 0 && *np <= MAX_TOK && n > 0 && n <= N_GEN, "braid run's JSON has its tokens (%d, %d)", *np, n);
    return *np > 0 && *np <= MAX_TOK && n > 0 && n <= N_GEN ? n : -1;
}

/* llama.cpp: the same prompt tokens, then n greedy tokens. */
static int llama_greedy(const char *path, const int32_t *ptoks, int np, int n, int32_t *gen) {
    oracle *o = NULL;
    CHECK_STATUS(oracle_start(path, "--ctx 512 --seq-max 1 --threads 1 --kv f16", &o), BRAID_OK);
    if (!o) return 0;
    uint8_t out[MAX_TOK] = {0};
    out[np - 1] = 1;
    float *logits = NULL;
    int32_t rows = 0;
    braid_status s = oracle_decode(o, np, ptoks, NULL, NULL, out, &logits, &rows);
    CHECK_STATUS(s, BRAID_OK);
    free(logits);
    if (s == BRAID_OK) CHECK_STATUS(s = oracle_greedy(o, n, 0, gen, NULL), BRAID_OK);
    CHECK_STATUS(oracle_stop(o), BRAID_OK);
    return s == BRAID_OK;
}

/* Compares the two on one file; min_same: how many leading tokens must agree (N_GEN: all braid printed). */
static void check_file(const char *label, const char *path, const char *prompt, int all) {
    int32_t ptoks[MAX_TOK], gb[N_GEN], gl[N_GEN];
    int np = 0;
    const int n = braid_greedy(path, prompt, ptoks, &np, gb);
    if (n < 0 || !llama_greedy(path, ptoks, np, n, gl)) return;
    int same = 0;
    while (same < n && gb[same] == gl[same]) same++;
    printf("%-40s prompt %3d tokens, braid %2d tokens: identical for %d%s\n", label, np, n, same,
           all ? "" : " (random quantized weights: first tokens only)");
    if (all) {
        CHECK(same == n, "%s: braid's greedy token %d is %d, llama.cpp's %d", label, same, same < n ? gb[same] : -1,
              same < n ? gl[same] : -1);
    } else {
        const int want = n < MIN_SAME_QUANT_RANDOM ? n : MIN_SAME_QUANT_RANDOM;
        CHECK(same >= want, "%s: greedy tokens diverge at %d (< %d)", label, same, want);
    }
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    oracle_pair pair;
    if (!oracle_pair_get(&pair)) TEST_SKIP("the requested pair cannot run on this CPU");
    char dir[] = "/tmp/braid_greedy_XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char f32[600], q4k[600], f16[600], q4km[600], kjv[1200];
    snprintf(f32, sizeof f32, "%s/f32.gguf", dir);
    snprintf(q4k, sizeof q4k, "%s/q4_k.gguf", dir);
    snprintf(f16, sizeof f16, "%s/f16.gguf", dir);
    snprintf(q4km, sizeof q4km, "%s/q4_k_m.gguf", dir);
    snprintf(kjv, sizeof kjv, "%s/models/kjv-qwen35-q8_0.gguf", test_env("BRAID_SOURCE_DIR", "."));
    gen_params p;
    gen_params_default(&p);
    p.arch = "qwen35";
    p.preset = "tiny";
    p.seed = 11;
    CHECK_STATUS(gen_model_write(&p, f32, NULL), BRAID_OK);
    p.preset = "small";
    p.type = BRAID_TYPE_Q4_K;
    p.std = 0.5f; /* wider logit margins: fewer near-ties between the top two tokens */
    CHECK_STATUS(gen_model_write(&p, q4k, NULL), BRAID_OK);
    p.preset = "medium"; /* n_embd 256: K-quant rows (small's 128 fall back to Q5_0 / Q8_0) */
    p.type = BRAID_TYPE_F16;
    CHECK_STATUS(gen_model_write(&p, f16, NULL), BRAID_OK);
    CHECK_STATUS(braid_model_quantize(f16, q4km, "Q4_K_M"), BRAID_OK);

    check_file("qwen35 tiny F32 (random)", f32, "The quick brown fox", 1);
    check_file("kjv-qwen35 Q8_0 (trained)", kjv, "In the beginning God created", 1);
    check_file("kjv-qwen35 Q8_0 (trained), 2nd prompt", kjv, "And the LORD said unto Moses", 1);
    check_file("qwen35 small Q4_K (random)", q4k, "The quick brown fox", 0);
    check_file("qwen35 medium Q4_K_M (random)", q4km, "The quick brown fox", 0);
    unlink(f32);
    unlink(q4k);
    unlink(f16);
    unlink(q4km);
    rmdir(dir);
    TEST_MAIN_END();
}
