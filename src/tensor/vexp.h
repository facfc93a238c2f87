/* vexp.h — vectorised expf for the kernels' activations and softmax, computing what ggml's vector expf
 * (ggml_v_expf) computes, bit for bit, so that silu / SwiGLU / softmax agree with llama.cpp's. ggml has two
 * x86 versions that round differently; braid's AVX-512 level uses the AVX-512 one (bd_exp512, and the
 * portable bd_exp_ggml), its AVX2 level the AVX2 one (bd_exp256), each paired with the ggml build of that
 * width (tensor/dot.h); the NEON levels ggml's NEON one (bd_exp_neon: the AVX2 algorithm on 4 lanes).
 *
 * The AVX-512 algorithm (facts of ggml's, re-expressed): n = round(x·log2 e) by adding and subtracting
 * 1.5·2^23 after a fused multiply-add; b = x − n·ln2 with ln2 in two parts (fused); with u = b², the
 * polynomial j = ((c5·b + c4)·u + (c3·b + c2))·u + (c1·b + 1), every step fused; result j·2^n (vscalefps:
 * exact, or one rounding into the subnormals), and for |n| > 192 inf (n > 0) or 0. About 1.5 ulp from the
 * true exp. The AVX2 one: see bd_exp256. */
#ifndef BRAID_TENSOR_VEXP_H
#define BRAID_TENSOR_VEXP_H

#include <math.h>

#include "tensor/simd.h"

#define BD_EXP_SHIFT 0x1.8p23f
#define BD_EXP_LOG2E 0x1.715476p+0f
#define BD_EXP_LN2_HI 0x1.62e4p-1f
#define BD_EXP_LN2_LO 0x1.7f7d1cp-20f
#define BD_EXP_C1 0x1.ffffecp-1f
#define BD_EXP_C2 0x1.fffdb6p-2f
#define BD_EXP_C3 0x1.555e66p-3f
#define BD_EXP_C4 0x1.573e2ep-5f
#define BD_EXP_C5 0x1.0e4020p-7f

#if BD_HAVE_X86
#include <immintrin.h>

BD_TARGET_AVX512 static inline __m512 bd_exp512(__m512 x) {
    const __m512 shift = _mm512_set1_ps(BD_EXP_SHIFT);
    const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(BD_EXP_LOG2E), shift);
    const __m512 n = _mm512_sub_ps(z, shift);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(BD_EXP_LN2_LO),
                                      _mm512_fnmadd_ps(n, _mm512_set1_ps(BD_EXP_LN2_HI), x));
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 hi = _mm512_fmadd_ps(_mm512_set1_ps(BD_EXP_C5), b, _mm512_set1_ps(BD_EXP_C4));
    const __m512 mid = _mm512_fmadd_ps(_mm512_set1_ps(BD_EXP_C3), b, _mm512_set1_ps(BD_EXP_C2));
    const __m512 lo = _mm512_fmadd_ps(_mm512_set1_ps(BD_EXP_C1), b, _mm512_set1_ps(1.0f));
    const __m512 j = _mm512_fmadd_ps(_mm512_fmadd_ps(hi, u, mid), u, lo);
    const __m512 res = _mm512_scalef_ps(j, n);
    /* |n| > 192: beyond what scalef of j can express: inf above, 0 below (NaN compares false: kept). */
    const __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
    if (!big) return res;
    const __m512 alt = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ),
                                            _mm512_set1_ps(__builtin_inff()), _mm512_setzero_ps());
    return _mm512_mask_blend_ps(big, res, alt);
}

/* ggml's AVX2 vector expf (the AVX2 builds, libggml-cpu-haswell.so), which rounds differently from the
 * AVX-512 one above: the same n and b, but the polynomial ends in c1·b without the 1 (j), and the result is
 * k + j·k with k = 2^n built from z's bits (one fused step), for |n| <= 126. Beyond, with s1 = 2^-125 (n <= 0)
 * or 2^127 (n > 0) and s2 = 2^n / s1 from z's bits: (s2 + j·s2)·s1, and for |n| > 192 s1·s1 (0 or inf). */
BD_TARGET_AVX2 static inline __m256 bd_exp256(__m256 x) {
    const __m256 shift = _mm256_set1_ps(BD_EXP_SHIFT);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(BD_EXP_LOG2E), shift);
    const __m256 n = _mm256_sub_ps(z, shift);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(BD_EXP_LN2_LO),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(BD_EXP_LN2_HI), x));
    const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23); /* n in the exponent field */
    const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1.0f))));
    const __m256 an = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    const __m256 wide = _mm256_cmp_ps(an, _mm256_set1_ps(126.0f), _CMP_GT_OQ);
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 hi = _mm256_fmadd_ps(_mm256_set1_ps(BD_EXP_C5), b, _mm256_set1_ps(BD_EXP_C4));
    const __m256 mid = _mm256_fmadd_ps(_mm256_set1_ps(BD_EXP_C3), b, _mm256_set1_ps(BD_EXP_C2));
    const __m256 j = _mm256_fmadd_ps(_mm256_fmadd_ps(hi, u, mid), u, _mm256_mul_ps(_mm256_set1_ps(BD_EXP_C1), b));
    const __m256 near = _mm256_fmadd_ps(j, k, k);
    if (!_mm256_movemask_ps(wide)) return near;
    const __m256i g = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                       _mm256_set1_epi32((int)0x82000000u));
    const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
    const __m256 huge = _mm256_cmp_ps(an, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    const __m256 far = _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1);
    return _mm256_blendv_ps(_mm256_blendv_ps(near, far, wide), _mm256_mul_ps(s1, s1), huge);
}
#endif

#if BD_HAVE_NEON
#include <arm_neon.h>

/* ggml's NEON vector expf (every non-SVE arm64 build): bd_exp256's steps on 4 lanes, the same roundings (k + j·k
 * near, (s2 + j·s2)·s1 beyond |n| > 126, s1·s1 beyond 192), so the arm pairs get ggml's bits as the AVX2 pair. */
static inline float32x4_t bd_exp_neon(float32x4_t x) {
    const float32x4_t shift = vdupq_n_f32(BD_EXP_SHIFT);
    const float32x4_t z = vfmaq_f32(shift, x, vdupq_n_f32(BD_EXP_LOG2E));
    const float32x4_t n = vsubq_f32(z, shift);
    const float32x4_t b = vfmsq_f32(vfmsq_f32(x, n, vdupq_n_f32(BD_EXP_LN2_HI)), n, vdupq_n_f32(BD_EXP_LN2_LO));
    const uint32x4_t e = vshlq_n_u32(vreinterpretq_u32_f32(z), 23); /* n in the exponent field */
    const float32x4_t k = vreinterpretq_f32_u32(vaddq_u32(e, vreinterpretq_u32_f32(vdupq_n_f32(1.0f))));
    const uint32x4_t wide = vcagtq_f32(n, vdupq_n_f32(126.0f));
    const float32x4_t u = vmulq_f32(b, b);
    const float32x4_t hi = vfmaq_f32(vdupq_n_f32(BD_EXP_C4), vdupq_n_f32(BD_EXP_C5), b);
    const float32x4_t mid = vfmaq_f32(vdupq_n_f32(BD_EXP_C2), vdupq_n_f32(BD_EXP_C3), b);
    const float32x4_t j = vfmaq_f32(vmulq_f32(vdupq_n_f32(BD_EXP_C1), b), vfmaq_f32(mid, hi, u), u);
    const float32x4_t near = vfmaq_f32(k, j, k);
    if (!vmaxvq_u32(wide)) return near;
    const uint32x4_t g = vandq_u32(vclezq_f32(n), vdupq_n_u32(0x82000000u));
    const float32x4_t s1 = vreinterpretq_f32_u32(vaddq_u32(g, vdupq_n_u32(0x7f000000u)));
    const float32x4_t s2 = vreinterpretq_f32_u32(vsubq_u32(e, g));
    const float32x4_t far = vmulq_f32(vfmaq_f32(s2, s2, j), s1);
    return vbslq_f32(vcagtq_f32(n, vdupq_n_f32(192.0f)), vmulq_f32(s1, s1), vbslq_f32(wide, far, near));
}
#endif

/* The same steps in portable C (fmaf, ldexpf: one rounding as vscalefps). */
static inline float bd_exp_ggml(float x) {
    const float n = fmaf(x, BD_EXP_LOG2E, BD_EXP_SHIFT) - BD_EXP_SHIFT;
    if (n != n) return x;
    if (fabsf(n) > 192.0f) return n > 0 ? __builtin_inff() : 0.0f;
    const float b = fmaf(-n, BD_EXP_LN2_LO, fmaf(-n, BD_EXP_LN2_HI, x));
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(BD_EXP_C5, b, BD_EXP_C4), u, fmaf(BD_EXP_C3, b, BD_EXP_C2)), u,
                         fmaf(BD_EXP_C1, b, 1.0f));
    return ldexpf(j, (int)n);
}

#endif
