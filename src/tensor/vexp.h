/* vexp.h — vectorised expf for the kernels' activations and softmax (AVX-512 and AVX2 variants).
 *
 * exp(x) = 2^n · e^r with n = round(x·log2 e) and r = x − n·ln 2 (ln 2 split in two constants so r is exact
 * enough), e^r by Cephes' degree-6 polynomial on |r| <= ln2/2: about 1 ulp, like ggml's own vector expf (the
 * two differ in the last bit at times, as two libms do). AVX-512 scales with vscalefps, which gives inf above
 * ~88.7 and 0/subnormals below; the AVX2 version clamps and returns inf / 0 outside [-87.3, 88.7]. */
#ifndef BRAID_TENSOR_VEXP_H
#define BRAID_TENSOR_VEXP_H

#include "tensor/simd.h"

#if BD_HAVE_X86
#include <immintrin.h>

#define BD_EXP_P0 1.9875691500E-4f
#define BD_EXP_P1 1.3981999507E-3f
#define BD_EXP_P2 8.3334519073E-3f
#define BD_EXP_P3 4.1665795894E-2f
#define BD_EXP_P4 1.6666665459E-1f
#define BD_EXP_P5 5.0000001201E-1f

BD_TARGET_AVX512 static inline __m512 bd_exp512(__m512 x) {
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 z = _mm512_mul_ps(r, r);
    __m512 p = _mm512_set1_ps(BD_EXP_P0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(BD_EXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(BD_EXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(BD_EXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(BD_EXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(BD_EXP_P5));
    p = _mm512_fmadd_ps(p, z, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    /* scalef handles |n| beyond the exponent range (inf / 0); NaN in x gives NaN in n and p. */
    return _mm512_scalef_ps(p, n);
}

BD_TARGET_AVX2 static inline __m256 bd_exp256(__m256 x) {
    const __m256 hi = _mm256_set1_ps(88.7228390f), lo = _mm256_set1_ps(-87.3365448f);
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 z = _mm256_mul_ps(r, r);
    __m256 p = _mm256_set1_ps(BD_EXP_P0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(BD_EXP_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(BD_EXP_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(BD_EXP_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(BD_EXP_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(BD_EXP_P5));
    p = _mm256_fmadd_ps(p, z, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* 2^n for n in [-126, 128]: n = 128 only at the clamp, where the result must be inf anyway. */
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    __m256 res = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    res = _mm256_blendv_ps(res, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
    res = _mm256_blendv_ps(res, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
    /* NaN in: the clamps dropped it, put it back */
    return _mm256_blendv_ps(res, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}
#endif

#endif
