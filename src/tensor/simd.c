/* simd.c — the kernels' SIMD level as a number (see simd.h), taken from dot.h's dispatcher so that the dot
 * products and the other kernels always agree on the level (and on the BRAID_SIMD override). */
#include "tensor/simd.h"

#include <stdatomic.h>
#include <string.h>

#include "tensor/dot.h"

/* -1 = not decided yet. Racing first calls compute the same value, so a relaxed store is enough. */
static _Atomic int level = -1;

static int detected(void) {
    const char *s = bd_simd_level();
    return !strcmp(s, "avx512") ? BD_SIMD_AVX512 : !strcmp(s, "avx2") ? BD_SIMD_AVX2 : BD_SIMD_SCALAR;
}

int bd_simd(void) {
    int v = atomic_load_explicit(&level, memory_order_relaxed);
    if (v >= 0) return v;
    v = detected();
    atomic_store_explicit(&level, v, memory_order_relaxed);
    return v;
}

int bd_simd_override(int want) {
    int max = detected();
    int v = want < BD_SIMD_SCALAR ? BD_SIMD_SCALAR : want > max ? max : want;
    atomic_store_explicit(&level, v, memory_order_relaxed);
    return v;
}
