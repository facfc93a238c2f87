/* lanes_x86.h — the small x86 lane helpers that the dot products (dot_avx2.c, dot_avx512.c), the decode
 * kernels (gemv_avx512.c) and the F32 tiles (matmul.c) must share bit for bit.
 *
 * The reductions here are part of the numerics contract of dot.h: every vec_dot, gemv and GEMM output ends
 * with the same fixed tree, so keeping one copy is what keeps them equal. The functions carry the AVX2 + FMA +
 * F16C target, a subset of every caller's, so they inline into AVX2 and AVX-512 code alike; bd_join256 needs
 * AVX-512 and only AVX-512 code may call it. */
#ifndef BRAID_TENSOR_LANES_X86_H
#define BRAID_TENSOR_LANES_X86_H

#include "tensor/simd.h"

#if BD_HAVE_X86
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define BD_LANES_INLINE static inline __attribute__((always_inline))

BD_TARGET_AVX2 BD_LANES_INLINE float bd_h2f(uint16_t h) { return _cvtsh_ss(h); }
BD_TARGET_AVX2 BD_LANES_INLINE __m256i bd_load32(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* The sum of 8 lanes in ggml's hsum_float_8 order: (lo128 + hi128), then the high pair onto the low pair,
 * then lane 0 + lane 1. */
BD_TARGET_AVX2 BD_LANES_INLINE float bd_hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The sum of 8 lanes in GGML_F32x8_REDUCE's order (ggml's AVX2 vec_dot_f32 / _f16): (lo128 + hi128), then two
 * horizontal adds: (s0 + s1) + (s2 + s3). */
BD_TARGET_AVX2 BD_LANES_INLINE float bd_hsum8_hadd(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_hadd_ps(s, s);
    return _mm_cvtss_f32(_mm_hadd_ps(s, s));
}

/* The sum of 4 floats as ggml adds them: (v0 + v2) + (v1 + v3). */
BD_TARGET_AVX2 BD_LANES_INLINE float bd_hsum4(__m128 v) {
    v = _mm_add_ps(v, _mm_movehl_ps(v, v));
    return _mm_cvtss_f32(_mm_add_ss(v, _mm_movehdup_ps(v)));
}

/* The fp16 scales of 8 blocks (the first at p, the others stride bytes apart) as 8 floats: one conversion
 * instead of eight, the halves gathered in general registers. */
BD_TARGET_AVX2 BD_LANES_INLINE __m256 bd_scales8(const uint8_t *p, size_t stride) {
    uint64_t lo = 0, hi = 0;
    for (int k = 0; k < 4; k++) {
        uint16_t a, b;
        memcpy(&a, p + k * stride, 2);
        memcpy(&b, p + (k + 4) * stride, 2);
        lo |= (uint64_t)a << (16 * k);
        hi |= (uint64_t)b << (16 * k);
    }
    return _mm256_cvtph_ps(_mm_set_epi64x((long long)hi, (long long)lo));
}

/* Two 32-byte pieces as one 512-bit vector (lo in the low half). AVX-512 callers only. */
BD_TARGET_AVX512 BD_LANES_INLINE __m512i bd_join256(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
#endif

#endif
