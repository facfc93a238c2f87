/* gemm_impl.h — internal to the integer GEMMs (gemm_q8.c, gemm_k.c): their target attribute and the lane
 * reduction they share.
 *
 * Each output's float chain lives in 8 lanes (half of a 512-bit vector: two outputs per vector). At the end,
 * the 8 lanes are summed in the fixed tree of ggml's hsum_float_8, which the vec_dots reproduce (dot.h):
 * u[l] = v[l] + v[l+4], then (u[0] + u[2]) + (u[1] + u[3]). gemmq_hsum16 does it for 16 outputs at once by
 * transposing as it adds; every addition is the one of that tree, so the bits are those of a per-output sum. */
#ifndef BRAID_TENSOR_GEMM_IMPL_H
#define BRAID_TENSOR_GEMM_IMPL_H

#include "tensor/simd.h"

#if BD_HAVE_X86
#include <immintrin.h>

#define GEMMQ_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))
#define GEMMQ_INLINE GEMMQ_TARGET static inline __attribute__((always_inline))

/* v[j] holds output 2j in lanes 0..7 and output 2j+1 in lanes 8..15; out[o] = the 8-lane sum of output o. */
GEMMQ_INLINE void gemmq_hsum16(const __m512 v[8], float out[16]) {
    __m512 u[4], w[2];
    /* u[k], 128-bit quarter m: lanes l and l+4 of output 4k+m added */
    for (int k = 0; k < 4; k++)
        u[k] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0x88),
                             _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0xDD));
    /* w[h], quarter m: (u0 + u2, u1 + u3) of outputs 8h+m and 8h+4+m */
    for (int h = 0; h < 2; h++)
        w[h] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * h], u[2 * h + 1], 0x44),
                             _mm512_shuffle_ps(u[2 * h], u[2 * h + 1], 0xEE));
    /* element 4m+e: the sum of output m + 4e */
    const __m512 f = _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], 0x88), _mm512_shuffle_ps(w[0], w[1], 0xDD));
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm512_storeu_ps(out, _mm512_permutexvar_ps(idx, f));
}

/* Prefetches into L2 part i of n of the bytes [p, p + len). Called at each of the n steps of the loop over a
 * block of weight rows, with the next block's rows, it spreads that block's reads from memory over this
 * block's arithmetic (preparing a block otherwise stalls on them: ~4% of a prompt). */
static inline void gemmq_prefetch_part(const uint8_t *p, size_t len, int64_t i, int64_t n) {
    const size_t lo = len * (size_t)i / (size_t)n, hi = len * (size_t)(i + 1) / (size_t)n;
    for (size_t o = lo & ~(size_t)63; o < hi; o += 64) _mm_prefetch((const char *)(p + o), _MM_HINT_T1);
}
#endif

#endif
