/* gemm_neon.c — the prompt GEMMs of the plain NEON level on aarch64 (gemm_neon_q0.h: every block-of-32
 * type; gemm_neon_k.h: Q2_K..Q6_K, IQ4_XS) with ggml's armv8.0 lanes, so that every output is the bits of this
 * level's vec_dot (dot_neon.c). */
#include "tensor/dot_impl.h"
#include "tensor/neon_dot4.h"

#define NEON_DOT4 bd_neon_dot4_pairs
#include "tensor/gemm_neon_k.h"
#include "tensor/gemm_neon_q0.h"

void bd_gemm_fill_neon(bd_dot_traits t[BD_TYPE_COUNT]) {
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
