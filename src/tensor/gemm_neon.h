/* gemm_neon.h — the aarch64 prompt GEMMs of every quantized type (gemm_neon_q0.h: the block-of-32 types,
 * gemm_neon_k.h: Q2_K..Q6_K and IQ4_XS), for the includer's level: it defines NEON_DOT4 first (gemm_neon.c:
 * ggml's armv8.0 lanes; gemm_neon_dot.c: SDOT), so that every output is the bits of that level's vec_dot. */
#ifndef BRAID_TENSOR_GEMM_NEON_H
#define BRAID_TENSOR_GEMM_NEON_H

#include "tensor/gemm_neon_k.h"
#include "tensor/gemm_neon_q0.h"

static void gemm_neon_fill(bd_dot_traits t[BD_TYPE_COUNT]) {
    t[BD_TYPE_Q8_0].gemm = &q0_ops;
    t[BD_TYPE_Q4_0].gemm = &q0_ops;
    t[BD_TYPE_Q5_0].gemm = &q0_ops;
    t[BD_TYPE_IQ4_NL].gemm = &q0_ops;
    t[BD_TYPE_MXFP4].gemm = &q0_ops;
    t[BD_TYPE_Q4_1].gemm = &q1_ops;
    t[BD_TYPE_Q5_1].gemm = &q1_ops;
    t[BD_TYPE_Q2_K].gemm = &k_ops;
    t[BD_TYPE_Q3_K].gemm = &k_ops;
    t[BD_TYPE_Q4_K].gemm = &k_ops;
    t[BD_TYPE_Q5_K].gemm = &k_ops;
    t[BD_TYPE_Q6_K].gemm = &k_ops;
    t[BD_TYPE_IQ4_XS].gemm = &k_ops;
}

#endif
