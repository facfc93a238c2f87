/* dot.c — picks the dot-product implementations once, for the CPU in use.
 *
 * Level: the best of avx512 (F, BW, VL, VNNI), avx2 (with FMA and F16C) and scalar the CPU supports, or a
 * lower one forced by BRAID_SIMD=scalar|avx2|avx512 (tests compare the levels; asking for a level the CPU
 * lacks falls back to the best one it has, with a warning). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "tensor/cpu.h"
#include "tensor/dot_impl.h"

static bd_dot_traits dot_table[BD_TYPE_COUNT];
static const char *dot_level = "scalar";
static pthread_once_t dot_once = PTHREAD_ONCE_INIT;

const char *const bd_dot_level_names[BD_SIMD_AVX512 + 1] = {"scalar", "avx2", "avx512"};

int bd_dot_cpu_level(void) {
    const bd_cpu_features *f = bd_cpu_get();
    const int have_avx2 = f->avx2 && f->fma && f->f16c;
    const int have_avx512 = have_avx2 && f->avx512f && f->avx512bw && f->avx512vl && f->avx512vnni;
    return have_avx512 ? BD_SIMD_AVX512 : have_avx2 ? BD_SIMD_AVX2 : BD_SIMD_SCALAR;
}

void bd_dot_fill_level(bd_dot_traits table[BD_TYPE_COUNT], int level) {
    bd_dot_fill_scalar(table);
    if (level >= BD_SIMD_AVX2) bd_dot_fill_avx2(table);
    if (level >= BD_SIMD_AVX512) bd_dot_fill_avx512(table);
}

static void dot_init(void) {
    int level = bd_dot_cpu_level();
    const char *want = getenv("BRAID_SIMD");
    if (want && *want) {
        int asked = -1;
        for (int l = 0; l <= BD_SIMD_AVX512; l++)
            if (!strcmp(want, bd_dot_level_names[l])) asked = l;
        if (asked < 0) {
            bd_log(BD_LOG_WARN, "BRAID_SIMD=%s is not one of scalar, avx2, avx512: ignored", want);
        } else if (asked > level) {
            bd_log(BD_LOG_WARN, "BRAID_SIMD=%s: this CPU lacks it, using the best level it has", want);
        } else {
            level = asked;
        }
    }
    bd_dot_fill_level(dot_table, level);
    dot_level = bd_dot_level_names[level];
}

const bd_dot_traits *bd_dot_traits_get(uint32_t type) {
    pthread_once(&dot_once, dot_init);
    if (type >= BD_TYPE_COUNT || dot_table[type].vec_dot == NULL) return NULL;
    return &dot_table[type];
}

const char *bd_simd_level(void) {
    pthread_once(&dot_once, dot_init);
    return dot_level;
}
