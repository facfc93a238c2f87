/* gemm_q.h — integer GEMM for quantized weights over many tokens (the prompt path of matmul.c), with every
 * output bit-identical to the weight type's vec_dot (dot.h) on that weight row and activation row (one
 * exception, IQ4_NL: bit-identical to llama.cpp's prompt kernel for it instead, gemm_q8.c says why).
 *
 * Why bit-identical: ggml computes a prompt's quantized products in its vec_dot order, so llama.cpp's prefill
 * and token-by-token logits agree exactly; braid must too (design contract). In a quantized dot the integer
 * part of each block is exact whatever the grouping; only the float chain (per block, per 8-lane group: one
 * fused multiply-add of the block scale product, then a fixed lane reduction) fixes the bits. These kernels
 * compute the integers with AVX-512 VNNI over a register tile (several weight rows x several tokens, two
 * tokens per 512-bit vector, 8 lanes each) and then run exactly that float chain per output.
 *
 * Use: per call, the activations (already converted to vec_dot_type) are packed in groups of
 * BD_GEMMQ_GROUP tokens (threads pack disjoint groups), then threads compute disjoint row ranges. */
#ifndef BRAID_TENSOR_GEMM_Q_H
#define BRAID_TENSOR_GEMM_Q_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/dot.h"

enum { BD_GEMMQ_GROUP = 16 }; /* tokens per packing group (padding tokens beyond T are zeros) */

typedef struct bd_gemmq_ops {
    /* Bytes of packed activations for T tokens of K elements. */
    size_t (*pack_size)(int64_t K, int64_t T);
    /* Packs group g (tokens 16g..16g+15) of xq (T rows of xrow bytes of vec_dot_type) into packed. */
    void (*pack)(const uint8_t *xq, size_t xrow, int64_t K, int64_t T, int64_t g, void *packed);
    /* y[t*ldy + r] for rows [r0, r1) of W (rows of wrow bytes of type wtype) and every token t < T. */
    void (*rows)(uint32_t wtype, const uint8_t *W, size_t wrow, int64_t K, const void *packed, int64_t T, int64_t r0,
                 int64_t r1, float *y, int64_t ldy);
    int64_t max_k; /* rows longer than this do not fit the per-thread weight buffer: use another path */
    /* A faster from_float of vec_dot_type giving the same bytes as dot.h's (NULL: use dot.h's). */
    void (*quantize)(const float *x, void *dst, int64_t k);
} bd_gemmq_ops;

/* The prompt GEMM of a weight type at the SIMD level in use (dot.h's table), or NULL. At the AVX-512 VNNI level
 * gemm_q8.c registers Q8_0, Q4_0, Q5_0 and IQ4_NL (x Q8_0), gemm_k.c the K-quants and IQ4_XS (x Q8_K),
 * gemm_b32.c Q4_1, Q5_1 (x Q8_1) and MXFP4 (x Q8_0); at the AVX2 level gemm_avx2.c all but the last three,
 * gemm_b32.c those three; on aarch64 gemm_neon.c / gemm_neon_dot.c every quantized type. */
static inline const bd_gemmq_ops *bd_gemmq_get(uint32_t wtype) {
    const bd_dot_traits *dt = bd_dot_traits_get(wtype);
    return dt ? dt->gemm : NULL;
}

/* Tests only: the AVX2 kernels use AVX-VNNI if on (and the CPU has it), plain AVX2 if 0, CPUID and
 * BRAID_AVX_VNNI (=0: off) if -1. Returns whether they now use it. */
int bd_gemmq_avx_vnni_override(int on);
/* Whether the AVX2 kernels use AVX-VNNI (the CPU has it and BRAID_AVX_VNNI is not 0, or a test's override). */
int bd_gemmq_uses_avx_vnni(void);

#endif
