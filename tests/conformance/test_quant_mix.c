/* test_quant_mix.c — the mixes llama.cpp's quantizer writes (issue 18's acceptance): an F16 gen-model file of
 * qwen35 and of qwen35moe, quantized inside this test by llama.cpp's own library (llama_model_quantize from the
 * prebuilt libllama, no importance matrix) to each preset, must load in braid and agree with llama.cpp on the
 * same file (the oracle driver's `quantize` command runs it, as llama-quantize does).
 *
 * The shapes have some row lengths that are not multiples of 256 (qwen35: the FFN's down projection, n_ff 704;
 * qwen35moe: the experts' down projections, 224), so the K-quant presets write their fallback types beside the
 * main one (Q5_0, Q5_1, Q8_0, IQ4_NL, ...); each file's type mix is printed. MXFP4 is what the MXFP4_MOE preset
 * writes for the MoE file's experts.
 *
 * For every preset, `braid quantize` on the same input must write the same file, byte for byte (its quantizers
 * and per-tensor rules are llama.cpp's), and presets that need an importance matrix must be refused.
 *
 * Checks per file: every tensor of the mix is a type braid supports and the model loads; on a prompt of 20
 * tokens, braid's prefill logits against llama.cpp's prefill: top-1 agreement >= 99%, relative max difference
 * < 0.05, and greedy continuations of 12 tokens identical (files with IQ4_XS tensors: see compare()). The dense
 * file gets every preset, the MoE file the ones whose mixes differ (to keep the runtime near a minute). Bit-identity: every quantized dot
 * product of these types is bit-identical to ggml's CPU backend at every level (conformance_dot); the logits
 * themselves also pass through braid's float kernels, which claim ggml's order for the pairs of
 * oracle_cpu.h (avx512 with an AVX-512 build, avx2 with an AVX2 build), so there every row must be
 * bit-identical too. Under another pair the count is printed, and the agreement is held to llama.cpp's own plus
 * logits_cmp.h's margin. Prints llama.cpp's agreement with itself (token by token vs prefill) beside it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/alloc.h"
#include "braid.h"
#include "gguf/gguf.h"
#include "genmodel/genmodel.h"
#include "oracle_client.h"
#include "oracle_cpu.h"
#include "tensor/dot.h"
#include "tensor/types.h"
#include "test.h"
#include "logits_cmp.h"

/* The type mix of a GGUF file: count and bytes per tensor type, printed on one line; returns how many tensors
 * have a type braid cannot compute with. */
static int print_mix(const char *path, const char *label, int *has_iq4_xs) {
    gguf_file *f = NULL;
    CHECK_STATUS(gguf_open(path, &f), BRAID_OK);
    if (!f) return 1;
    long count[64] = {0};
    double bytes[64] = {0};
    int unsupported = 0;
    for (size_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        if (t->type < 64) count[t->type]++, bytes[t->type] += (double)t->nbytes;
        if (t->type == BRAID_TYPE_IQ4_XS) *has_iq4_xs = 1;
        if (t->type != BRAID_TYPE_F32 && !bd_type_supported(t->type)) {
            unsupported++;
            printf("    unsupported: %s (%s)\n", t->name, gguf_type_name(t->type));
        }
    }
    printf("  %-24s", label);
    for (int ty = 0; ty < 64; ty++)
        if (count[ty]) printf(" %s:%ld (%.0f KiB)", gguf_type_name((uint32_t)ty), count[ty], bytes[ty] / 1024);
    printf("\n");
    gguf_close(f);
    return unsupported;
}

/* 1 if the two files hold the same bytes. */
static int same_bytes(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        const int ca = fgetc(fa), cb = fgetc(fb);
        same = ca == cb;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

/* Runs `braid quantize IN OUT PRESET`; its exit code. */
static int braid_quantize(const char *in, const char *out, const char *preset) {
    char cmd[6000];
    snprintf(cmd, sizeof cmd, "'%s/braid' quantize '%s' '%s' %s 2> /dev/null", test_env("BRAID_BUILD_DIR", "build"), in,
             out, preset);
    const int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void compare(const char *path, const char *label, int exact_claimed, int has_iq4_xs) {
    braid_model *m = NULL;
    CHECK_STATUS(braid_model_load(path, NULL, &m), BRAID_OK);
    if (!m) return;
    oracle *o = NULL;
    CHECK_STATUS(oracle_start(path, "--ctx 256 --seq-max 1 --kv f32 --fa off --threads 1", &o), BRAID_OK);
    if (!o) {
        braid_model_free(m);
        return;
    }
    enum { N = 20, P = 1, G = 12 };
    cmp ct = {0}, cself = {0};
    int exact = 0, all_same = 1;
    for (int pr = 0; pr < P; pr++) {
        braid_token toks[N];
        rand_tokens(toks, N, braid_model_n_vocab(m), 500 + pr);
        const int same = cmp_quant_prompt(m, o, 256, toks, N, G, &ct, &cself, &exact);
        all_same &= same == G;
    }
    printf("  %-24s top-1 %d/%d, max rel %.3e, bit-identical rows %d/%d, greedy %s | llama.cpp vs itself: top-1 "
           "%d/%d, max rel %.3e\n",
           label, ct.top1_equal, ct.rows, ct.max_rel, exact, ct.rows, all_same ? "identical" : "DIFFERS",
           cself.top1_equal, cself.rows, cself.max_rel);
    if (has_iq4_xs) {
        /* llama.cpp's prompt of 8+ tokens runs IQ4_XS through ggml's "IQ panel" kernel, its decode through
         * vec_dot, and braid follows vec_dot in both: so its prefill agrees with llama.cpp token by token, and
         * against llama.cpp's prefill it must do no worse than llama.cpp itself (25% margin on the relative
         * difference). The greedy continuations start from different prefills: printed only. (IQ4_NL's prompts
         * take llamafile's tinyBLAS in llama.cpp, and braid's prompt GEMM has its order: gemm_q8.c.) */
        CHECK(ct.top1_equal >= cself.top1_equal, "%s: top-1 %d/%d, llama.cpp itself %d", label, ct.top1_equal,
              ct.rows, cself.top1_equal);
        CHECK(ct.max_rel <= 1.25 * cself.max_rel + 1e-6, "%s: max rel %.3e, llama.cpp itself %.3e", label, ct.max_rel,
              cself.max_rel);
    } else if (exact_claimed) {
        CHECK(ct.top1_equal * 100 >= ct.rows * 99, "%s: top-1 agreement %d/%d", label, ct.top1_equal, ct.rows);
        CHECK(ct.max_rel < 0.05, "%s: max rel %.3e", label, ct.max_rel);
        CHECK(all_same, "%s: greedy continuations differ", label);
        CHECK(exact == ct.rows, "%s: %d of %d rows not bit-identical", label, ct.rows - exact, ct.rows);
    } else {
        cmp_quant_verdict(label, 0, &ct, &cself, N * P, exact, all_same, P); /* llama.cpp's own + the margin */
    }
    CHECK_STATUS(oracle_stop(o), BRAID_OK);
    braid_model_free(m);
}

int main(void) {
    oracle_pair pair; /* which float order braid is held to here (oracle_cpu.h) */
    if (!oracle_pair_get(&pair)) TEST_SKIP("the requested pair cannot run on this CPU");
    const int exact_claimed = pair.exact;
    printf("braid SIMD level %s; bit-identical logits %s\n", bd_simd_level(),
           exact_claimed ? "claimed (asserted)" : "not claimed for this pair (printed)");
    char dir[] = "/tmp/braid_quant_mix_XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    static const struct {
        const char *name;
        int ftype; /* llama_ftype */
        int moe_only; /* 1: the MoE file only; -1: the dense file only (keeps the runtime near a minute) */
    } presets[] = {
        {"Q4_0", 2, -1},     {"Q4_1", 3, 0},
        {"Q5_0", 8, 0},     {"Q5_1", 9, -1},
        {"Q8_0", 7, -1},     {"Q2_K", 10, -1},
        {"Q3_K_M", 12, 0}, {"Q4_K_M", 15, 0},
        {"Q5_K_M", 17, 0}, {"Q6_K", 18, -1},
        {"IQ4_NL", 25, -1}, {"IQ4_XS", 30, 0},
        {"MXFP4_MOE", 38, 1},
    };
    static const struct {
        const char *arch;
        int64_t n_ff, n_ff_exp;
    } archs[] = {{"qwen35", 704, 0}, {"qwen35moe", 0, 224}};
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++) {
        char f16[600];
        snprintf(f16, sizeof f16, "%s/%s-f16.gguf", dir, archs[a].arch);
        gen_params p;
        gen_params_default(&p);
        p.arch = archs[a].arch;
        p.preset = "medium";
        p.type = BRAID_TYPE_F16;
        p.seed = 70 + a;
        p.vocab = "none";
        p.n_vocab = 1024;
        if (archs[a].n_ff) p.over.n_ff = archs[a].n_ff;
        if (archs[a].n_ff_exp) p.over.n_ff_exp = archs[a].n_ff_exp;
        CHECK_STATUS(gen_model_write(&p, f16, NULL), BRAID_OK);
        const int moe = archs[a].n_ff_exp > 0;
        for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
            if ((presets[i].moe_only == 1 && !moe) || (presets[i].moe_only == -1 && moe)) continue;
            char out[600], label[64];
            snprintf(out, sizeof out, "%s/%s-%s.gguf", dir, archs[a].arch, presets[i].name);
            snprintf(label, sizeof label, "%s %s", archs[a].arch, presets[i].name);
            char cmd[6000];
            snprintf(cmd, sizeof cmd, "'%s' quantize '%s' '%s' %d > /dev/null", oracle_binary(), f16, out,
                     presets[i].ftype);
            const int rc = system(cmd);
            CHECK(rc == 0, "%s: llama.cpp's quantizer failed (%d): %s", label, rc, cmd);
            if (rc != 0) continue;
            /* braid's own quantizer on the same input: the same file, byte for byte */
            char mine[600];
            snprintf(mine, sizeof mine, "%s/%s-%s-braid.gguf", dir, archs[a].arch, presets[i].name);
            CHECK(braid_quantize(f16, mine, presets[i].name) == 0, "%s: braid quantize failed", label);
            CHECK(same_bytes(out, mine), "%s: braid quantize's file differs from llama.cpp's", label);
            unlink(mine);
            int has_iq4_xs = 0;
            CHECK(print_mix(out, label, &has_iq4_xs) == 0, "%s: tensors of types braid does not support", label);
            compare(out, label, exact_claimed, has_iq4_xs);
            unlink(out);
        }
        if (a == 0) { /* presets that need an importance matrix: a usage error, and no file left behind */
            char out[600];
            snprintf(out, sizeof out, "%s/refused.gguf", dir);
            CHECK(braid_quantize(f16, out, "IQ2_XXS") == 2 && access(out, F_OK) != 0, "IQ2_XXS must be refused");
            CHECK(braid_quantize(f16, out, "Q4_K_X") == 2, "an unknown preset must be a usage error");
        }
        unlink(f16);
    }
    rmdir(dir);
    TEST_MAIN_END();
}
