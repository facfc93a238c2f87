/* cpu.c — SIMD feature detection: CPUID / XGETBV on x86-64, the kernel's HWCAP bits on aarch64 Linux (all flags
 * 0 elsewhere: the portable kernels). */
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
    if (__get_cpuid(0, &a, &b, &c, &d)) /* the vendor string is EBX, EDX, ECX */
        features.amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;
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
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>

/* The kernel's HWCAP bits (asm/hwcap.h), spelled out so that an old libc's headers do not matter. */
enum { HWCAP_BIT_ASIMD = 1, HWCAP_BIT_FPHP = 9, HWCAP_BIT_ASIMDHP = 10, HWCAP_BIT_ASIMDDP = 20 };

static void detect(void) {
    const unsigned long hw = getauxval(AT_HWCAP);
    features.neon = (hw >> HWCAP_BIT_ASIMD) & 1;
    features.neon_dotprod = features.neon && ((hw >> HWCAP_BIT_ASIMDDP) & 1);
    features.neon_fp16 = features.neon && ((hw >> HWCAP_BIT_FPHP) & 1) && ((hw >> HWCAP_BIT_ASIMDHP) & 1);
}
#elif defined(__aarch64__)
/* Other aarch64 systems (macOS would ask sysctl hw.optional.arm.FEAT_DotProd): Advanced SIMD is in every
 * aarch64 CPU; the optional extensions stay off until someone can test them there. */
static void detect(void) { features.neon = 1; }
#else
static void detect(void) {}
#endif

const bd_cpu_features *bd_cpu_get(void) {
    pthread_once(&features_once, detect);
    return &features;
}
