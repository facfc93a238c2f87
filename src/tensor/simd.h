/* simd.h — which instruction-set level the kernels use, decided once per process.
 *
 * The rule is dot.c's (cpu.h's flags plus the BRAID_SIMD override), as a number the kernels can switch on
 * cheaply; the kernel table of dot.h is filled for the same level. Every kernel has a portable C version and, where
 * it matters, AVX2+FMA and AVX-512 versions compiled with __attribute__((target(...))), so the library itself
 * needs no -march flag. */
#ifndef BRAID_TENSOR_SIMD_H
#define BRAID_TENSOR_SIMD_H

enum { BD_SIMD_SCALAR = 0, BD_SIMD_AVX2 = 1, BD_SIMD_AVX512 = 2 };
/* On 64-bit ARM the two levels above the portable one are NEON levels, in the same slots (so "the best level"
 * and a loop over levels read the same on both): plain Advanced SIMD, paired with ggml's armv8.0 build, and
 * NEON with the dotprod and FP16 arithmetic extensions (ARMv8.2: Cortex-A76, Neoverse N1, Apple M1 and later),
 * paired with ggml's armv8.2_2 build. The x86 kernels' switches are compiled on x86-64 only. */
enum { BD_SIMD_NEON = 1, BD_SIMD_NEON_DOT = 2 };
#define BD_SIMD_TOP 2 /* the highest level number on any architecture */

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
#if defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#define BD_HAVE_NEON 1
#else
#define BD_HAVE_NEON 0
#endif

#endif
