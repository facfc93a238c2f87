/* simd.h — which instruction-set level the kernels use, decided once per process.
 *
 * The rule is dot.c's (cpu.h's flags plus the BRAID_SIMD override), as a number the kernels can switch on
 * cheaply; the kernel table of dot.h is filled for the same level. Every kernel has a portable C version and, where
 * it matters, AVX2+FMA and AVX-512 versions compiled with __attribute__((target(...))), so the library itself
 * needs no -march flag. */
#ifndef BRAID_TENSOR_SIMD_H
#define BRAID_TENSOR_SIMD_H

enum { BD_SIMD_SCALAR = 0, BD_SIMD_AVX2 = 1, BD_SIMD_AVX512 = 2 };

/* The level in use (cached after the first call; thread-safe). */
int bd_simd(void);
/* Tests only, with no kernel running: switches every kernel to `level` (capped at what the CPU has; dot.h's
 * table is refilled for it), so one process can compare the variants; returns the level now in use. */
int bd_simd_override(int level);

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define BD_HAVE_X86 1
#define BD_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define BD_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,fma,f16c")))
#else
#define BD_HAVE_X86 0
#endif

#endif
