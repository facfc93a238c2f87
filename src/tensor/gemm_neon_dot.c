/* gemm_neon_dot.c — the prompt GEMMs of the dotprod level on aarch64 (gemm_neon_q0.h: every block-of-32
 * type; gemm_neon_k.h: Q2_K..Q6_K, IQ4_XS) with SDOT, so that every output is the bits of this level's vec_dot
 * (dot_neon_dot.c). Built with -march=armv8.2-a+dotprod+fp16, as dot_neon_dot.c. */
#include <arm_neon.h>

#include "tensor/dot_impl.h"

#define NEON_DOT4 vdotq_s32
#include "tensor/gemm_neon_k.h"
#include "tensor/gemm_neon_q0.h"

void bd_gemm_fill_neon_dot(bd_dot_traits t[BD_TYPE_COUNT]) {
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
