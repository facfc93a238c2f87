/* dot_impl.h — internal to the kernel table: how the per-level files register their kernels (dot.c).
 *
 * dot.c starts every weight type's entry from its types.c row (vec_dot_type, the portable activation
 * converter), then calls the fills of the chosen level and of every level under it, lowest first. A fill only
 * registers kernels: it sets the fields of dot.h's bd_dot_traits it has a faster version of, and leaves the
 * rest, so a type with nothing at some level keeps the best lower one. One rule keeps vec_dot_n honest: a
 * level that registers a vec_dot without a vec_dot_n clears the lower level's vec_dot_n (the two must give the
 * same bits). A faster activation converter must give the row's converter's bytes (a matmul's result must not
 * depend on the SIMD level beyond float summation order). */
#ifndef BRAID_TENSOR_DOT_IMPL_H
#define BRAID_TENSOR_DOT_IMPL_H

#include <math.h>

#include "tensor/dot.h"
#include "tensor/simd.h"
#include "tensor/types.h"

void bd_dot_fill_scalar(bd_dot_traits table[BD_TYPE_COUNT]); /* dot_scalar.c: a vec_dot for every weight type */
/* AVX2 + FMA + F16C: the dot products (dot_avx2.c; the mix types' in dot_avx2_mix.c, which the AVX-512 level
 * keeps: ggml's AVX-512 builds run the same 256-bit code for them; with their decode gemv kernels), the decode
 * gemv kernels (gemv_avx2.c; the AVX-512 level keeps them for the types it has none for), the prompt GEMMs (gemm_avx2.c, with AVX-VNNI where
 * the CPU has it). */
void bd_dot_fill_avx2(bd_dot_traits table[BD_TYPE_COUNT]);
void bd_dot_fill_avx2_mix(bd_dot_traits table[BD_TYPE_COUNT]);
void bd_gemv_fill_avx2(bd_dot_traits table[BD_TYPE_COUNT]);
void bd_gemm_fill_avx2(bd_dot_traits table[BD_TYPE_COUNT]);
void bd_gemm_b32_fill_avx2(bd_dot_traits table[BD_TYPE_COUNT]); /* gemm_b32.c: Q4_1, Q5_1, MXFP4 */
/* AVX-512 F, BW, VL, VNNI (BF16 optional): the dot products (dot_avx512.c), the decode gemv kernels
 * (gemv_avx512.c), the prompt GEMMs (gemm_q8.c, gemm_k.c, gemm_b32.c). */
void bd_dot_fill_avx512(bd_dot_traits table[BD_TYPE_COUNT]);
void bd_gemv_fill_avx512(bd_dot_traits table[BD_TYPE_COUNT]);
void bd_gemv_fill_avx512_mix(bd_dot_traits table[BD_TYPE_COUNT]); /* gemv_avx512_mix.c: the block-of-32 mix types */
void bd_gemm_q8_fill_avx512(bd_dot_traits table[BD_TYPE_COUNT]);
void bd_gemm_k_fill_avx512(bd_dot_traits table[BD_TYPE_COUNT]);
void bd_gemm_b32_fill_avx512(bd_dot_traits table[BD_TYPE_COUNT]); /* gemm_b32.c: Q4_1, Q5_1, MXFP4 */

/* aarch64 (dot_neon.c): the plain NEON level's kernels (ggml's armv8.0 build's orders), then the dotprod + FP16
 * level's (its armv8.2_2 build's). */
void bd_dot_fill_neon(bd_dot_traits table[BD_TYPE_COUNT]);
void bd_dot_fill_neon_dot(bd_dot_traits table[BD_TYPE_COUNT]);
/* The prompt GEMMs of every quantized type at each level (gemm_neon.c, gemm_neon_dot.c). */
void bd_gemm_fill_neon(bd_dot_traits table[BD_TYPE_COUNT]);
void bd_gemm_fill_neon_dot(bd_dot_traits table[BD_TYPE_COUNT]);

/* Levels are simd.h's BD_SIMD_SCALAR..BD_SIMD_AVX512, each needing the CPU features of the one below and more;
 * the dispatcher and the tests that compare levels share these so that they agree on what a CPU supports. */
/* "scalar", "avx2", "avx512" on x86-64; "scalar", "neon", "dotprod" on aarch64 (BRAID_SIMD's names) */
extern const char *const bd_dot_level_names[BD_SIMD_TOP + 1];
/* The best level this CPU supports. */
int bd_dot_cpu_level(void);
/* Fills table for level: the types.c rows, then each level's kernels up to this one. */
void bd_dot_fill_level(bd_dot_traits table[BD_TYPE_COUNT], int level);

/* Q8_0 activations as ggml's CPU backend makes them (quantize_row_q8_0 on x86), which differs from the
 * reference quantizer: the multiplier is 127/amax instead of 1/(amax/127), and rounding is to nearest even
 * instead of half away from zero. */
void bd_quantize_row_q8_0_act(const float *x, void *dst, int64_t k);
/* Q8_1 the same way (quantize_row_q8_1 on x86), plus s = fp16(d * the sum of the int32 levels). */
void bd_quantize_row_q8_1_act(const float *x, void *dst, int64_t k);
/* F16 activations (F16C rounding, equal to bd_fp32_to_fp16 except that a NaN keeps its payload) and BF16. */
void bd_fp32_to_fp16_act(const float *x, void *dst, int64_t k);
void bd_fp32_to_bf16_act(const float *x, void *dst, int64_t k);
void bd_fp32_copy_act(const float *x, void *dst, int64_t k);

/* The tail of ggml's F32 vec_dot (the elements after its vector chains, from i0 to n), added to sum as the
 * compiler built ggml's leftover loop (sum += x[i]*y[i] in float): vectors of products, each rounded and
 * added one by one, then the last few elements as scalar fused multiply-adds. The AVX-512 builds round the
 * products of the first (n - i0) & ~7 elements (vectors of 16, then 8), the AVX2 builds (n - i0) & ~3 (vectors
 * of 8, then 4): unfused_mask is 7 or 3. Read off the machine code of ggml_vec_dot_f32 in the prebuilt
 * libggml-cpu-zen4.so and -haswell.so; conformance_dot checks it at tail lengths 1..63. */
static inline float bd_dot_f32_tail(float sum, const float *x, const float *y, int64_t i0, int64_t n,
                                    int64_t unfused_mask) {
    const int64_t u = i0 + ((n - i0) & ~unfused_mask);
    for (int64_t i = i0; i < u; i++) sum += x[i] * y[i]; /* the library builds with -ffp-contract=off */
    for (int64_t i = u; i < n; i++) sum = fmaf(x[i], y[i], sum);
    return sum;
}

#endif
