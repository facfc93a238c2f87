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

static void dot_init(void) {
    const bd_cpu_features *f = bd_cpu_get();
    const int have_avx2 = f->avx2 && f->fma && f->f16c;
    const int have_avx512 = have_avx2 && f->avx512f && f->avx512bw && f->avx512vl && f->avx512vnni;
    int level = have_avx512 ? 2 : have_avx2 ? 1 : 0;
    const char *want = getenv("BRAID_SIMD");
    if (want && *want) {
        const int asked = !strcmp(want, "scalar") ? 0 : !strcmp(want, "avx2") ? 1 : !strcmp(want, "avx512") ? 2 : -1;
        if (asked < 0) {
            bd_log(BD_LOG_WARN, "BRAID_SIMD=%s is not one of scalar, avx2, avx512: ignored", want);
        } else if (asked > level) {
            bd_log(BD_LOG_WARN, "BRAID_SIMD=%s: this CPU lacks it, using the best level it has", want);
        } else {
            level = asked;
        }
    }
    bd_dot_fill_scalar(dot_table);
    if (level >= 1) bd_dot_fill_avx2(dot_table);
    if (level >= 2) bd_dot_fill_avx512(dot_table);
    dot_level = level == 2 ? "avx512" : level == 1 ? "avx2" : "scalar";
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
