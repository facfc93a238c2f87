/* ggml_variant.h — which build of ggml's CPU backend (lib/libggml-cpu-<variant>.so) llama.cpp runs here.
 *
 * The prebuilt llama.cpp ships one CPU backend per x86 feature level (haswell, alderlake, zen4, ...) and loads
 * the one whose ggml_backend_score() is highest on this CPU (ggml_backend_load_best: every file of the backend
 * directory is opened and scored, the first with the strictly highest score wins; 0 means it cannot run
 * here). The variants differ in float summation order (8- or 16-lane vectors, another vector expf), so every
 * comparison with llama.cpp must know which one it talks to. This header makes that choice once, the way
 * ggml does, and lets BRAID_GGML_CPU=<variant> force one (e.g. "haswell" on an AVX-512 machine, to check
 * braid's AVX2 path against llama.cpp's AVX2 build). The oracle driver (oracle.c) loads exactly the file this
 * picks, and the in-process helpers (testkit/oracle_cpu.h, test_kernels.c) pick the same, so a test and
 * its llama.cpp subprocess always run the same variant. Header-only; needs -ldl on old glibc. */
#ifndef BRAID_TESTS_GGML_VARIANT_H
#define BRAID_TESTS_GGML_VARIANT_H

#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { GGML_VARIANT_OK = 1, GGML_VARIANT_CANNOT_RUN = 0, GGML_VARIANT_MISSING = -1 };

/* Picks the variant in libdir: BRAID_GGML_CPU's if set, else the best-scoring one. Writes its file to path
 * and its name ("zen4") to name. Returns GGML_VARIANT_OK; GGML_VARIANT_CANNOT_RUN if the forced variant
 * scores 0 on this CPU (a test should then skip); GGML_VARIANT_MISSING if there is no such file or none runs
 * here. why gets a human reason on failure. */
static inline int ggml_variant_pick(const char *libdir, char *path, size_t path_cap, char *name, size_t name_cap,
                                    char *why, size_t why_cap) {
    static const char prefix[] = "libggml-cpu-", suffix[] = ".so";
    const char *force = getenv("BRAID_GGML_CPU");
    if (force && !*force) force = NULL;
    DIR *d = opendir(libdir);
    if (d == NULL) {
        snprintf(why, why_cap, "cannot open the ggml backend directory %.300s", libdir);
        return GGML_VARIANT_MISSING;
    }
    int best = 0, found_forced = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const size_t n = strlen(e->d_name), np = sizeof prefix - 1, ns = sizeof suffix - 1;
        if (n <= np + ns || strncmp(e->d_name, prefix, np) || strcmp(e->d_name + n - ns, suffix)) continue;
        char v[128];
        if (n - np - ns >= sizeof v) continue;
        memcpy(v, e->d_name + np, n - np - ns);
        v[n - np - ns] = 0;
        if (force && strcmp(force, v)) continue;
        char p[4096];
        if ((size_t)snprintf(p, sizeof p, "%.3800s/%.255s", libdir, e->d_name) >= sizeof p) continue;
        void *h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
        if (h == NULL) continue;
        int (*score_fn)(void) = (int (*)(void))dlsym(h, "ggml_backend_score");
        const int s = score_fn ? score_fn() : 0;
        dlclose(h);
        if (force) found_forced = 1;
        if (s > best) {
            best = s;
            snprintf(path, path_cap, "%s", p);
            snprintf(name, name_cap, "%s", v);
        }
    }
    closedir(d);
    if (best > 0) return GGML_VARIANT_OK;
    if (force && found_forced) {
        snprintf(why, why_cap, "BRAID_GGML_CPU=%.60s: that ggml build cannot run on this CPU (score 0)", force);
        return GGML_VARIANT_CANNOT_RUN;
    }
    if (force) snprintf(why, why_cap, "BRAID_GGML_CPU=%.60s: no %.300s/%s%.60s%s", force, libdir, prefix, force, suffix);
    else snprintf(why, why_cap, "no %s*%s under %.300s runs on this CPU", prefix, suffix, libdir);
    return GGML_VARIANT_MISSING;
}

/* The x86 variants by float-order family: every AVX-512 build compiles the float kernels (vec_dot_f32/f16,
 * vector expf, softmax, tinyBLAS tiles) for 16 lanes, the AVX2 builds for 8 lanes; within a family they differ
 * only in integer instructions (VNNI, VBMI: exact sums) and BF16 / AMX paths. One corner: alderlake's AVX-VNNI
 * sums a Q8_0 block where haswell's maddubs saturates a pair sum, which needs a weight byte of -128 against
 * an activation of -128 (neither ggml's quantizers nor braid's produce a -128 weight). Returns 512, 256, or 0
 * (another family: the SSE / AVX1 builds, x64). */
static inline int ggml_variant_width(const char *v) {
    static const char *const w512[] = {"skylakex", "cannonlake", "cascadelake", "icelake",
                                       "cooperlake", "zen4", "sapphirerapids"};
    static const char *const w256[] = {"haswell", "alderlake"};
    for (size_t i = 0; i < sizeof w512 / sizeof w512[0]; i++)
        if (!strcmp(v, w512[i])) return 512;
    for (size_t i = 0; i < sizeof w256 / sizeof w256[0]; i++)
        if (!strcmp(v, w256[i])) return 256;
    return 0;
}

/* Whether the variant converts Q8_0 activations with its SIMD code (quantize_row_q8_0's rounding to nearest
 * even, which braid reproduces at every level): every x86 build from sandybridge up (the SSE4.2 and x64 builds
 * use ggml's reference quantizer instead) and every arm64 build (NEON's, with a multiplier of 1 / d, which
 * braid's aarch64 build reproduces). */
static inline int ggml_variant_avx(const char *v) {
    return ggml_variant_width(v) != 0 || !strncmp(v, "armv", 4) || /* arm64: NEON's rounding, braid's there */ !strcmp(v, "sandybridge") || !strcmp(v, "ivybridge") ||
           !strcmp(v, "piledriver");
}

/* The arm64 builds with FP16_VECTOR_ARITHMETIC (armv8.2_2 and up: CPUs with fphp/asimdhp): ggml's F16 vec_dot
 * (and with it every F16 matrix product) multiplies and accumulates in half precision, 8 fp16 lanes in 4
 * chains, converted to float only at the end. Its results are then about 2^-11 * sqrt(K / 32) off the exact
 * ones, far from braid's float accumulation: a comparison with such a build is "another precision" for F16. */
static inline int ggml_variant_f16_half_acc(const char *v) {
    return !strncmp(v, "armv8.2_2", 9) || !strncmp(v, "armv8.2_3", 9) || !strncmp(v, "armv8.6", 7) ||
           !strncmp(v, "armv9", 5);
}

#endif
