/* oracle_cpu.h — the ggml CPU backend llama.cpp runs here, reached from a conformance test, and the pair a
 * comparison runs: that ggml variant against braid's SIMD level.
 *
 * The CPU backend is not linked: llama.cpp loads one variant at run time (ggml_variant.h picks it as
 * ggml does; BRAID_GGML_CPU forces one, e.g. "haswell"). Its ggml_get_type_traits_cpu() gives the activation
 * converters (quantize_row_q8_0 / q8_K, fp32 -> fp16 ...) and the vec_dot functions llama.cpp really runs,
 * which is what braid's dot products must agree with.
 *
 * The pair. braid reproduces the float order of one family of ggml builds per SIMD level: its avx512 level
 * that of the AVX-512 builds (zen4, sapphirerapids, icelake, ...), its avx2 level that of the AVX2 builds
 * (haswell, alderlake); tensor/dot.h has the orders. For such a pair a comparison asserts bit-identity where
 * braid claims it; for any other pair (an AVX-512 CPU without VNNI, where braid runs avx2 and ggml skylakex; a
 * CPU without AVX2; BRAID_SIMD=scalar) only agreement within llama.cpp's own agreement with itself plus a
 * stated margin. A comparison that cannot run here (BRAID_SIMD asks for a level this CPU lacks,
 * BRAID_GGML_CPU for a build it cannot run) is skipped: oracle_pair_get prints why, and the test exits with
 * TEST_SKIP_CODE, which CTest reports as skipped. Header-only, shared by the tests that need it. */
#ifndef BRAID_TESTS_ORACLE_CPU_H
#define BRAID_TESTS_ORACLE_CPU_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ggml-cpu.h>
#include <ggml.h>

#include "ggml_variant.h"
#include "tensor/dot.h"
#include "tensor/simd.h"
#include "tensor/types.h"

typedef const struct ggml_type_traits_cpu *(*oracle_cpu_traits_fn)(enum ggml_type);

/* The oracle's library directory: BRAID_ORACLE_DIR/lib (set by CTest), else the default cache of
 * fetch-oracle.sh. Static storage. */
static inline const char *oracle_cpu_libdir(void) {
    static char dir[2048];
    const char *root = getenv("BRAID_ORACLE_DIR");
    if (root && *root) snprintf(dir, sizeof dir, "%s/lib", root);
    else snprintf(dir, sizeof dir, "%s/.cache/braid/oracle/3.22.1/lib", getenv("HOME") ? getenv("HOME") : ".");
    return dir;
}

/* Which variant llama.cpp runs here (static storage; "" if none): the result of ggml_variant_pick, cached.
 * *status (if given) gets ggml_variant_pick's return, *path its file. */
static inline const char *oracle_cpu_variant(int *status, const char **path) {
    static char name[128], file[4096], why[512];
    static int st = 2;
    if (st == 2) {
        st = ggml_variant_pick(oracle_cpu_libdir(), file, sizeof file, name, sizeof name, why, sizeof why);
        if (st != GGML_VARIANT_OK) {
            fprintf(stderr, "oracle_cpu: %s\n", why);
            name[0] = file[0] = 0;
        }
    }
    if (status) *status = st;
    if (path) *path = file;
    return name;
}

/* Loads the CPU backend once; returns its traits function, or NULL (with a message on stderr). *variant gets
 * the variant's name. */
static inline oracle_cpu_traits_fn oracle_cpu_traits(const char **variant) {
    static oracle_cpu_traits_fn fn;
    const char *path = NULL;
    int st = 0;
    const char *name = oracle_cpu_variant(&st, &path);
    if (variant) *variant = name;
    if (fn || st != GGML_VARIANT_OK) return fn;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    void (*init)(void) = h ? (void (*)(void))dlsym(h, "ggml_cpu_init") : NULL;
    oracle_cpu_traits_fn f = h ? (oracle_cpu_traits_fn)dlsym(h, "ggml_get_type_traits_cpu") : NULL;
    if (init == NULL || f == NULL) {
        fprintf(stderr, "oracle_cpu: %s: %s\n", path, h ? "lacks ggml_cpu_init / ggml_get_type_traits_cpu" : dlerror());
        return NULL;
    }
    init();
    fn = f;
    return fn;
}

/* braid's level and the ggml variant of this run, and whether braid claims bit-identity for them. */
typedef struct oracle_pair {
    const char *level;   /* bd_simd_level(): "avx512", "avx2", "scalar" */
    const char *variant; /* "zen4", "haswell", ... */
    int exact;           /* 1: braid follows this variant's float order (see the top of this file) */
} oracle_pair;

/* The float-order family (512 / 256, as ggml_variant_width) braid's level follows; 0 for scalar (the portable
 * code follows the AVX-512 order in the dot products but is not claimed exact as a whole). */
static inline int oracle_level_width(int level) {
    return level == BD_SIMD_AVX512 ? 512 : level == BD_SIMD_AVX2 ? 256 : 0;
}

/* aarch64: braid's neon level follows ggml's armv8.0_1 build, its dotprod level the armv8.2_2 build, in the
 * kernels dot_neon.c / dot_neon_dot.c / dot_neon_q.h have: the dot products of every weight type (and the Q8_0
 * / Q8_1 activation bytes), and the other kernels (oracle_arm_exact_ops). Returns the paired variant's name for a
 * level, or NULL. */
static inline const char *oracle_arm_variant(int level) {
#if defined(__aarch64__)
    return level == BD_SIMD_NEON ? "armv8.0_1" : level == BD_SIMD_NEON_DOT ? "armv8.2_2" : NULL;
#else
    (void)level;
    return NULL;
#endif
}
/* The weight types whose vec_dot the NEON levels claim bit-identical to their paired build's, as printed by
 * oracle_pair_get. */
#define ORACLE_ARM_EXACT_TYPES "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, mxfp4, q2_K..q6_K, iq4_xs"
static inline int oracle_arm_exact_dot(int level, const char *v, uint32_t type) {
    static const uint32_t exact[] = {BD_TYPE_F32,  BD_TYPE_F16,  BD_TYPE_BF16,   BD_TYPE_Q8_0,  BD_TYPE_Q4_0,
                                     BD_TYPE_Q4_1, BD_TYPE_Q5_0, BD_TYPE_Q5_1,   BD_TYPE_IQ4_NL, BD_TYPE_MXFP4,
                                     BD_TYPE_Q2_K, BD_TYPE_Q3_K, BD_TYPE_Q4_K,   BD_TYPE_Q5_K,  BD_TYPE_Q6_K,
                                     BD_TYPE_IQ4_XS};
    const char *want = oracle_arm_variant(level);
    if (!want || strcmp(want, v)) return 0;
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (exact[i] == type) return 1;
    return 0;
}

/* Whether braid's kernels other than the matrix products (RMS norm, RoPE, softmax, silu / SwiGLU, ssm_conv,
 * Gated DeltaNet, the Mamba2 scan) at level are claimed bit-identical to ggml variant v's on aarch64: at the
 * pairs of oracle_arm_variant, where they follow ggml's NEON code (act.c, vexp.h, gdn.c, ssm_scan.c) or have no
 * order to follow (norm.c, rope.c, conv.c: the same scalar sums in every build). */
static inline int oracle_arm_exact_ops(int level, const char *v) {
    const char *want = oracle_arm_variant(level);
    return want && !strcmp(want, v);
}

/* Fills *p and prints it; returns 0 if the comparison cannot run here (the reason printed: the caller skips
 * with TEST_SKIP), 1 otherwise. */
static inline int oracle_pair_get(oracle_pair *p) {
    int st = 0;
    p->variant = oracle_cpu_variant(&st, NULL);
    p->level = bd_simd_level();
    p->exact = 0;
    const char *want = getenv("BRAID_SIMD");
    if (want && *want && strcmp(want, p->level)) {
        printf("SKIP: BRAID_SIMD=%s, but this CPU runs braid at %s\n", want, p->level);
        return 0;
    }
    if (st == GGML_VARIANT_CANNOT_RUN) {
        printf("SKIP: BRAID_GGML_CPU=%s cannot run on this CPU\n", getenv("BRAID_GGML_CPU"));
        return 0;
    }
    if (st != GGML_VARIANT_OK) return 1; /* no oracle at all: the test's own checks fail on it */
    const int w = oracle_level_width(bd_simd());
    p->exact = w != 0 && w == ggml_variant_width(p->variant);
    const char *arm = oracle_arm_variant(bd_simd());
    if (arm && !strcmp(arm, p->variant)) {
        /* not exact as a whole: the NEON dot products (oracle_arm_exact_dot) and the other kernels
         * (oracle_arm_exact_ops) are ggml's order */
        printf("pair: braid %s vs ggml %s: bit-identical in the NEON dot products (" ORACLE_ARM_EXACT_TYPES
               ") and the other kernels (norms, rope, softmax, silu, conv, gdn, scan); another float order "
               "elsewhere\n",
               p->level, p->variant);
        return 1;
    }
    printf("pair: braid %s vs ggml %s: %s\n", p->level, p->variant,
           p->exact ? "bit-identical where braid claims it" : "another float order: within llama.cpp's self-agreement + margin");
    return 1;
}

#endif
