/* cpu.h — which SIMD instruction sets this CPU and OS let braid use, read once (CPUID on x86-64, the kernel's
 * HWCAP bits on 64-bit ARM Linux).
 *
 * Kernels pick their variant from these flags at start-up. CPUID is read directly (not
 * __builtin_cpu_supports) because older compilers do not know the newer feature names (clang 14 has no
 * "avx512bf16"), and because the OS must also save the wide registers (XGETBV) for a feature to be usable. */
#ifndef BRAID_TENSOR_CPU_H
#define BRAID_TENSOR_CPU_H

typedef struct bd_cpu_features {
    int avx2, fma, f16c;               /* AVX2 level (with the OS saving YMM state) */
    int avx512f, avx512bw, avx512vl;   /* AVX-512 level (with the OS saving ZMM state) */
    int avx512vnni, avx512bf16, avx512vbmi;
    int avx_vnni;                      /* VEX-encoded VNNI (Alder Lake and later) */
    int amd;                           /* CPUID vendor "AuthenticAMD" (decode kernels tune their prefetch) */
    /* aarch64 (getauxval(AT_HWCAP)): Advanced SIMD (every aarch64 Linux CPU), the SDOT/UDOT dot products
     * (ARMv8.2 dotprod, "asimddp"), half-precision arithmetic (scalar "fphp" and vector "asimdhp"). */
    int neon, neon_dotprod, neon_fp16;
} bd_cpu_features;

/* The features of the CPU running this process (computed on first call; thread-safe). */
const bd_cpu_features *bd_cpu_get(void);

#endif
