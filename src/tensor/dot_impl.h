/* dot_impl.h — internal to the dot products: how the per-ISA files plug into the dispatcher (dot.c).
 *
 * Each ISA file fills the entries of the dot traits table it implements; dot.c starts from the portable
 * table and lets the chosen level (and the levels under it) overwrite entries, so a type with no SIMD
 * version at some level silently keeps the best lower one. Activation converters are the same functions at
 * every level where that keeps the converted bytes identical (a matmul's result must not depend on the
 * SIMD level beyond float summation order). */
#ifndef BRAID_TENSOR_DOT_IMPL_H
#define BRAID_TENSOR_DOT_IMPL_H

#include "tensor/dot.h"
#include "tensor/simd.h"
#include "tensor/types.h"

void bd_dot_fill_scalar(bd_dot_traits table[BD_TYPE_COUNT]);
void bd_dot_fill_avx2(bd_dot_traits table[BD_TYPE_COUNT]);   /* needs AVX2, FMA, F16C */
void bd_dot_fill_avx512(bd_dot_traits table[BD_TYPE_COUNT]); /* needs AVX-512 F, BW, VL, VNNI (BF16 optional) */

/* Levels are simd.h's BD_SIMD_SCALAR..BD_SIMD_AVX512, each needing the CPU features of the one below and more;
 * the dispatcher and the tests that compare levels share these so that they agree on what a CPU supports. */
extern const char *const bd_dot_level_names[BD_SIMD_AVX512 + 1]; /* "scalar", "avx2", "avx512" (BRAID_SIMD's) */
/* The best level this CPU supports. */
int bd_dot_cpu_level(void);
/* Fills table for level: the portable table, overwritten by each level up to this one. */
void bd_dot_fill_level(bd_dot_traits table[BD_TYPE_COUNT], int level);

/* Q8_0 activations as ggml's CPU backend makes them (quantize_row_q8_0 on x86), which differs from the
 * reference quantizer: the multiplier is 127/amax instead of 1/(amax/127), and rounding is to nearest even
 * instead of half away from zero. */
void bd_quantize_row_q8_0_act(const float *x, void *dst, int64_t k);
/* F16 activations (F16C rounding, equal to bd_fp32_to_fp16 except that a NaN keeps its payload) and BF16. */
void bd_fp32_to_fp16_act(const float *x, void *dst, int64_t k);
void bd_fp32_to_bf16_act(const float *x, void *dst, int64_t k);
void bd_fp32_copy_act(const float *x, void *dst, int64_t k);

/* A vec_dot_n that calls vec_dot once per activation row: for the types and levels with no faster one. */
#define BD_DOT_N_LOOP(name, dot)                                                                               \
    static void name(int64_t n, float *s, size_t bs, const void *x, const void *y, size_t by, int ny) {         \
        for (int j = 0; j < ny; j++) dot(n, s + (size_t)j * bs, x, (const uint8_t *)y + (size_t)j * by);      \
    }

#endif
