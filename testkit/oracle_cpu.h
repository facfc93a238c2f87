/* oracle_cpu.h — reaching ggml's CPU backend (libggml-cpu-<variant>.so) from a conformance test.
 *
 * The CPU backend is not linked: llama.cpp loads one variant at run time, chosen for the CPU. Its
 * ggml_get_type_traits_cpu() gives the activation converters (quantize_row_q8_0 / q8_K, fp32 -> fp16 ...) and
 * the vec_dot functions llama.cpp really runs, which is what braid's dot products must agree with. This
 * helper dlopens the variant llama.cpp would pick here (BRAID_GGML_CPU overrides, e.g. "haswell"): the one
 * whose ggml_backend_score() is highest, as ggml_backend_load_best does (on an AVX-512 CPU without AMX: zen4). Header-only, shared by the tests that need it. */
#ifndef BRAID_TESTS_ORACLE_CPU_H
#define BRAID_TESTS_ORACLE_CPU_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ggml-cpu.h>
#include <ggml.h>

#include "tensor/cpu.h"

typedef const struct ggml_type_traits_cpu *(*oracle_cpu_traits_fn)(enum ggml_type);

/* Loads the CPU backend once; returns its traits function, or NULL (with a message on stderr). *variant gets
 * the variant's name. */
static oracle_cpu_traits_fn oracle_cpu_traits(const char **variant) {
    static oracle_cpu_traits_fn fn;
    static const char *name;
    if (fn) {
        if (variant) *variant = name;
        return fn;
    }
    /* ggml_backend_load_best: every variant reports a score for this CPU (0: cannot run here); the highest
     * wins. BRAID_GGML_CPU forces one (e.g. "haswell"). */
    static const char *const names[] = {"sapphirerapids", "zen4",  "cooperlake", "icelake",     "cannonlake",
                                        "cascadelake",    "skylakex", "alderlake", "haswell",    "sandybridge",
                                        "ivybridge",      "piledriver", "sse42",   "x64"};
    const char *dir = getenv("BRAID_ORACLE_DIR"); /* set by CTest; else the default cache of fetch-oracle.sh */
    char home_dir[2048];
    if (dir == NULL || *dir == 0) {
        snprintf(home_dir, sizeof home_dir, "%s/.cache/braid/oracle/3.22.1", getenv("HOME") ? getenv("HOME") : ".");
        dir = home_dir;
    }
    const char *force = getenv("BRAID_GGML_CPU");
    char path[4096];
    void *best = NULL;
    const char *best_name = NULL;
    int best_score = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = names[i];
        if (force && *force && strcmp(force, v) != 0) continue;
        snprintf(path, sizeof path, "%s/lib/libggml-cpu-%s.so", dir, v);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h == NULL) continue;
        int (*score)(void) = (int (*)(void))dlsym(h, "ggml_backend_score");
        const int sc = score ? score() : 0;
        if (sc > best_score || (force && *force)) {
            if (best) dlclose(best);
            best = h, best_name = v, best_score = sc;
        } else {
            dlclose(h);
        }
    }
    if (best == NULL) {
        fprintf(stderr, "oracle_cpu: no libggml-cpu-*.so under %s/lib runs here\n", dir);
        return NULL;
    }
    void (*init)(void) = (void (*)(void))dlsym(best, "ggml_cpu_init");
    fn = (oracle_cpu_traits_fn)dlsym(best, "ggml_get_type_traits_cpu");
    if (init == NULL || fn == NULL) {
        fprintf(stderr, "oracle_cpu: %s lacks ggml_cpu_init / ggml_get_type_traits_cpu\n", best_name);
        fn = NULL;
        return NULL;
    }
    init();
    name = best_name;
    if (variant) *variant = name;
    return fn;
}

#endif
