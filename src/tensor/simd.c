/* simd.c — the kernels' SIMD level as a number (see simd.h).
 *
 * The rule is dot.h's (bd_simd_level): AVX-512 needs F, BW and VL; AVX2 needs AVX2, FMA and F16C; the
 * environment variable BRAID_SIMD=scalar|avx2 forces a lower level. It is applied here to cpu.h's flags so
 * that the kernels do not depend on which file implements the dot products. */
#include "tensor/simd.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/cpu.h"

/* -1 = not decided yet. Racing first calls compute the same value, so a relaxed store is enough. */
static _Atomic int level = -1;

static int detected(void) {
    const bd_cpu_features *f = bd_cpu_get();
    int v = BD_SIMD_SCALAR;
    if (f->avx2 && f->fma && f->f16c) v = BD_SIMD_AVX2;
    if (v == BD_SIMD_AVX2 && f->avx512f && f->avx512bw && f->avx512vl) v = BD_SIMD_AVX512;
    const char *e = getenv("BRAID_SIMD");
    if (e && !strcmp(e, "scalar")) v = BD_SIMD_SCALAR;
    else if (e && !strcmp(e, "avx2") && v > BD_SIMD_AVX2) v = BD_SIMD_AVX2;
    return v;
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
