/* cpu.c — CPUID / XGETBV feature detection for x86-64 (all flags 0 on other architectures). */
#include "tensor/cpu.h"

#include <pthread.h>

static bd_cpu_features features;
static pthread_once_t features_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static unsigned long long read_xcr0(void) {
    unsigned int lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

static void detect(void) {
    unsigned int a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    const int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
    const int fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
    if (!osxsave || !avx) return;
    const unsigned long long xcr0 = read_xcr0();
    const int ymm_ok = (xcr0 & 0x6) == 0x6;           /* XMM and YMM state */
    const int zmm_ok = ymm_ok && (xcr0 & 0xe0) == 0xe0; /* opmask, ZMM upper halves, ZMM16-31 */
    if (!ymm_ok || __get_cpuid_max(0, 0) < 7) return;
    __cpuid_count(7, 0, a, b, c, d);
    const unsigned int b7 = b, c7 = c, max_sub = a;
    features.avx2 = (b7 >> 5) & 1;
    features.fma = fma;
    features.f16c = f16c;
    if (zmm_ok) {
        features.avx512f = (b7 >> 16) & 1;
        features.avx512bw = (b7 >> 30) & 1;
        features.avx512vl = (b7 >> 31) & 1;
        features.avx512vbmi = (c7 >> 1) & 1;
        features.avx512vnni = (c7 >> 11) & 1;
    }
    if (max_sub >= 1) {
        __cpuid_count(7, 1, a, b, c, d);
        features.avx_vnni = (a >> 4) & 1;
        if (zmm_ok) features.avx512bf16 = (a >> 5) & 1;
    }
}
#else
static void detect(void) {}
#endif

const bd_cpu_features *bd_cpu_get(void) {
    pthread_once(&features_once, detect);
    return &features;
}
