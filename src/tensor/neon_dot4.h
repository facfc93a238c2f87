/* neon_dot4.h — ggml's armv8.0 stand-in for SDOT, shared by the plain NEON level's kernels (dot_neon.c and the
 * prompt GEMMs of gemm_neon.c): SMULL of each 8-byte half, pairwise widening adds (SADDLP), the two halves'
 * pairs added lane by lane; lane k = a[2k]b[2k] + a[2k+1]b[2k+1] + a[8+2k]b[8+2k] + a[9+2k]b[9+2k]. Exact (the
 * int16 products cannot overflow). */
#ifndef BRAID_TENSOR_NEON_DOT4_H
#define BRAID_TENSOR_NEON_DOT4_H

#include <arm_neon.h>

static inline int32x4_t bd_neon_dot4_pairs(int32x4_t acc, int8x16_t a, int8x16_t b) {
    const int16x8_t lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    const int16x8_t hi = vmull_s8(vget_high_s8(a), vget_high_s8(b));
    return vaddq_s32(acc, vaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi)));
}

#endif
