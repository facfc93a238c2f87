/* oracle_cpu.h — reaching ggml's CPU backend (libggml-cpu-<variant>.so) from a conformance test.
 *
 * The CPU backend is not linked: llama.cpp loads one variant at run time, chosen for the CPU. Its
 * ggml_get_type_traits_cpu() gives the activation converters (quantize_row_q8_0 / q8_K, fp32 -> fp16 ...) and
 * the vec_dot functions llama.cpp really runs, which is what braid's dot products must agree with. This
 * helper dlopens the variant llama.cpp would pick here (BRAID_GGML_CPU overrides, e.g. "haswell"), the most
 * capable one this CPU can run, trying from the top. Header-only, shared by the tests that need it. */
#ifndef BRAID_TESTS_ORACLE_CPU_H
#define BRAID_TESTS_ORACLE_CPU_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

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
    /* Most capable first, with the CPU features each needs (a rough filter; dlopen does not check). */
    static const char *const names[] = {"sapphirerapids", "icelake", "skylakex", "haswell", "x64"};
    const bd_cpu_features *f = bd_cpu_get();
    const int ok[5] = {f->avx512bf16 && f->avx512vnni, f->avx512vnni && f->avx512vbmi, f->avx512f && f->avx512bw,
                       f->avx2 && f->fma && f->f16c, 1};
    const char *dir = getenv("BRAID_ORACLE_DIR"); /* set by CTest; else the default cache of fetch-oracle.sh */
    char home_dir[2048];
    if (dir == NULL || *dir == 0) {
        snprintf(home_dir, sizeof home_dir, "%s/.cache/braid/oracle/3.22.1", getenv("HOME") ? getenv("HOME") : ".");
        dir = home_dir;
    }
    const char *force = getenv("BRAID_GGML_CPU");
    char path[4096];
    for (int i = 0; i < 5; i++) {
        const char *v = names[i];
        if (force && *force) {
            v = force;
        } else if (!ok[i]) {
            continue;
        }
        snprintf(path, sizeof path, "%s/lib/libggml-cpu-%s.so", dir, v);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h == NULL) {
            fprintf(stderr, "oracle_cpu: %s\n", dlerror());
            if (force && *force) return NULL;
            continue;
        }
        void (*init)(void) = (void (*)(void))dlsym(h, "ggml_cpu_init");
        fn = (oracle_cpu_traits_fn)dlsym(h, "ggml_get_type_traits_cpu");
        if (init == NULL || fn == NULL) {
            fprintf(stderr, "oracle_cpu: %s lacks ggml_cpu_init / ggml_get_type_traits_cpu\n", path);
            fn = NULL;
            return NULL;
        }
        init();
        name = v;
        if (variant) *variant = name;
        return fn;
    }
    return NULL;
}

#endif
