/* dot.c — the kernel table (dot.h) and the SIMD level (simd.h), decided once, for the CPU in use.
 *
 * Level: the best of avx512 (F, BW, VL, VNNI), avx2 (with FMA and F16C) and scalar the CPU supports (on aarch64:
 * dotprod (with FP16 arithmetic), neon, scalar), or a lower one forced by BRAID_SIMD=scalar|avx2|avx512
 * (|neon|dotprod) (tests compare the levels; asking for a level the CPU
 * lacks falls back to the best one it has, with a warning). This is the one dispatch: the dot products, the
 * gemv and GEMM kernels (all in the table) and every other kernel's bd_simd() switch follow the same level. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "tensor/cpu.h"
#include "tensor/dot_impl.h"

static bd_dot_traits dot_table[BD_TYPE_COUNT];
static _Atomic int dot_level = -1; /* BD_SIMD_*; -1 until dot_init ran */
static pthread_once_t dot_once = PTHREAD_ONCE_INIT;

#if BD_HAVE_NEON
const char *const bd_dot_level_names[BD_SIMD_TOP + 1] = {"scalar", "neon", "dotprod"};

/* dotprod needs the FP16 arithmetic too: its pair, ggml's armv8.2_2 build, computes F16 products in half
 * precision. A CPU with dotprod but no FP16 vectors (rare: some Cortex-A55 configurations) runs neon. */
int bd_dot_cpu_level(void) {
    const bd_cpu_features *f = bd_cpu_get();
    return f->neon_dotprod && f->neon_fp16 ? BD_SIMD_NEON_DOT : f->neon ? BD_SIMD_NEON : BD_SIMD_SCALAR;
}
#else
const char *const bd_dot_level_names[BD_SIMD_TOP + 1] = {"scalar", "avx2", "avx512"};

int bd_dot_cpu_level(void) {
    const bd_cpu_features *f = bd_cpu_get();
    const int have_avx2 = f->avx2 && f->fma && f->f16c;
    const int have_avx512 = have_avx2 && f->avx512f && f->avx512bw && f->avx512vl && f->avx512vnni;
    return have_avx512 ? BD_SIMD_AVX512 : have_avx2 ? BD_SIMD_AVX2 : BD_SIMD_SCALAR;
}
#endif

/* Runs one level's fills, then drops a lower level's vec_dot_n where this level replaced the vec_dot alone. */
static void fill_one(bd_dot_traits t[BD_TYPE_COUNT], void (*const fills[])(bd_dot_traits *), int n_fills) {
    bd_vec_dot_fn dot[BD_TYPE_COUNT];
    bd_vec_dot_n_fn dot_n[BD_TYPE_COUNT];
    for (int ty = 0; ty < BD_TYPE_COUNT; ty++) dot[ty] = t[ty].vec_dot, dot_n[ty] = t[ty].vec_dot_n;
    for (int i = 0; i < n_fills; i++) fills[i](t);
    for (int ty = 0; ty < BD_TYPE_COUNT; ty++)
        if (t[ty].vec_dot != dot[ty] && t[ty].vec_dot_n == dot_n[ty]) t[ty].vec_dot_n = NULL;
}

void bd_dot_fill_level(bd_dot_traits t[BD_TYPE_COUNT], int level) {
    memset(t, 0, sizeof(bd_dot_traits) * BD_TYPE_COUNT);
    for (uint32_t ty = 0; ty < BD_TYPE_COUNT; ty++) {
        const bd_type_traits *row = bd_type_traits_get(ty);
        if (row && row->act_from_float) t[ty].vec_dot_type = row->vec_dot_type, t[ty].from_float = row->act_from_float;
    }
    static void (*const scalar[])(bd_dot_traits *) = {bd_dot_fill_scalar};
    fill_one(t, scalar, 1);
#if BD_HAVE_X86 /* the *_avx2 / *_avx512 files are built on x86-64 only */
    static void (*const avx2[])(bd_dot_traits *) = {bd_dot_fill_avx2, bd_dot_fill_avx2_mix, bd_gemv_fill_avx2,
                                                    bd_gemm_fill_avx2, bd_gemm_b32_fill_avx2};
    static void (*const avx512[])(bd_dot_traits *) = {bd_dot_fill_avx512, bd_gemv_fill_avx512, bd_gemv_fill_avx512_mix,
                                                      bd_gemm_q8_fill_avx512, bd_gemm_k_fill_avx512,
                                                      bd_gemm_b32_fill_avx512};
    if (level >= BD_SIMD_AVX2) fill_one(t, avx2, (int)(sizeof avx2 / sizeof avx2[0]));
    if (level >= BD_SIMD_AVX512) fill_one(t, avx512, (int)(sizeof avx512 / sizeof avx512[0]));
#elif BD_HAVE_NEON /* dot_neon.c and dot_neon_dot.c are built on aarch64 only */
    static void (*const neon[])(bd_dot_traits *) = {bd_dot_fill_neon, bd_gemm_fill_neon};
    static void (*const neon_dot[])(bd_dot_traits *) = {bd_dot_fill_neon_dot, bd_gemm_fill_neon_dot};
    if (level >= BD_SIMD_NEON) fill_one(t, neon, (int)(sizeof neon / sizeof neon[0]));
    if (level >= BD_SIMD_NEON_DOT) fill_one(t, neon_dot, (int)(sizeof neon_dot / sizeof neon_dot[0]));
#else
    (void)level;
#endif
    /* a kernel without the portable activation side would be unusable: not a supported type */
    for (int ty = 0; ty < BD_TYPE_COUNT; ty++)
        if (!t[ty].from_float) memset(&t[ty], 0, sizeof t[ty]);
}

static void dot_init(void) {
    int level = bd_dot_cpu_level();
    const char *want = getenv("BRAID_SIMD");
    if (want && *want) {
        int asked = -1;
        for (int l = 0; l <= BD_SIMD_TOP; l++)
            if (!strcmp(want, bd_dot_level_names[l])) asked = l;
        if (asked < 0) {
            bd_log(BD_LOG_WARN, "BRAID_SIMD=%s is not one of %s, %s, %s: ignored", want, bd_dot_level_names[0],
                   bd_dot_level_names[1], bd_dot_level_names[2]);
        } else if (asked > level) {
            bd_log(BD_LOG_WARN, "BRAID_SIMD=%s: this CPU lacks it, using the best level it has", want);
        } else {
            level = asked;
        }
    }
    bd_dot_fill_level(dot_table, level);
    atomic_store_explicit(&dot_level, level, memory_order_release);
}

const bd_dot_traits *bd_dot_traits_get(uint32_t type) {
    pthread_once(&dot_once, dot_init);
    if (type >= BD_TYPE_COUNT || dot_table[type].vec_dot == NULL) return NULL;
    return &dot_table[type];
}

int bd_type_supported(uint32_t type) { return bd_dot_traits_get(type) != NULL; }

bd_gemv_fn bd_gemv_get(uint32_t type) {
    const bd_dot_traits *dt = bd_dot_traits_get(type);
    return dt ? dt->gemv : NULL;
}

int bd_simd(void) {
    const int v = atomic_load_explicit(&dot_level, memory_order_acquire);
    if (v >= 0) return v;
    pthread_once(&dot_once, dot_init);
    return atomic_load_explicit(&dot_level, memory_order_acquire);
}

const char *bd_simd_level(void) { return bd_dot_level_names[bd_simd()]; }

int bd_simd_override(int want) {
    pthread_once(&dot_once, dot_init);
    const int max = bd_dot_cpu_level();
    const int v = want < BD_SIMD_SCALAR ? BD_SIMD_SCALAR : want > max ? max : want;
    bd_dot_fill_level(dot_table, v);
    atomic_store_explicit(&dot_level, v, memory_order_release);
    return v;
}
