/* dot_avx2.c — dot products for CPUs with AVX2, FMA and F16C (Haswell and later, Zen).
 *
 * Every function carries its own target attribute, so the rest of the build needs no -march and the code is
 * only reached after dot.c has checked CPUID. The quantized dots use the u8 x s8 multiply-add (maddubs): the
 * weights' levels are unsigned (nibbles 0..15, Q5_K 0..31, Q6_K 0..63) and the activations are signed; the
 * constant offsets (Q4_0's -8, Q6_K's -32) come out of the activation sums. Pair sums stay far from int16
 * saturation (63 * 127 * 2 < 32767). Within a block the sums are integers, converted to float once per block.
 * Block scales are converted 8 at a time; there is no vec_dot_n at this level. Every result is
 * bit-identical to ggml's AVX2 builds (libggml-cpu-haswell.so, -alderlake.so; the float order in dot.h): the
 * quantized dots follow the one order every x86 build shares, the float dots the 8-lane one of the AVX2
 * builds. */
#include <immintrin.h>
#include <string.h>

#include "tensor/dot_impl.h"
#include "tensor/lanes_x86.h"
#include "tensor/quant.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))

/* ---- float dots: the order of ggml's AVX2 builds (dot.h) ---- */

/* F32 and F16 (ggml_vec_dot_f32 / _f16 in the AVX2 builds): 4 chains of 8 lanes over the first n & ~31
 * elements (element i + 8c + l, i a multiple of 32, fused into chain c lane l, in order of i), then
 * (c0 + c2) + (c1 + c3) lane-wise and GGML_F32x8_REDUCE's tree (bd_hsum8_hadd), then the tail (TAIL, given the
 * reduced float r and the start np of the tail, sets *s). A macro rather than a shared function taking loaders,
 * so that each loop is compiled with its loads inline. */
#define AVX2_FLOAT_DOT(name, T, LOAD8, TAIL)                                                                        \
    AVX2 static void name(int64_t n, float *s, const void *vx, const void *vy) {                                   \
        const T *x = vx, *y = vy;                                                                                  \
        __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;                                                \
        const int64_t np = n & ~(int64_t)31;                                                                       \
        for (int64_t i = 0; i < np; i += 32) {                                                                     \
            c0 = _mm256_fmadd_ps(LOAD8(x + i), LOAD8(y + i), c0);                                                  \
            c1 = _mm256_fmadd_ps(LOAD8(x + i + 8), LOAD8(y + i + 8), c1);                                          \
            c2 = _mm256_fmadd_ps(LOAD8(x + i + 16), LOAD8(y + i + 16), c2);                                        \
            c3 = _mm256_fmadd_ps(LOAD8(x + i + 24), LOAD8(y + i + 24), c3);                                        \
        }                                                                                                          \
        const float r = bd_hsum8_hadd(_mm256_add_ps(_mm256_add_ps(c0, c2), _mm256_add_ps(c1, c3)));                \
        TAIL(r, np);                                                                                               \
    }

/* F32: the tail as the AVX2 build's (dot_impl.h). */
#define F32_TAIL(r, i0) (*s = bd_dot_f32_tail(r, x, y, i0, n, 3))
/* F16, BF16: the tail in double (each product of two halves is exact in float), rounded once. */
#define WIDE_TAIL(r, i0, TO_F32)                                                                                   \
    do {                                                                                                           \
        double sum = r;                                                                                            \
        for (int64_t i = i0; i < n; i++) sum += (double)(TO_F32(x[i]) * TO_F32(y[i]));                             \
        *s = (float)sum;                                                                                           \
    } while (0)
#define F16_TAIL(r, i0) WIDE_TAIL(r, i0, bd_h2f)

AVX2 static inline __m256 load_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
AVX2 static inline __m256 load_bf16(const uint16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

AVX2_FLOAT_DOT(dot_f32, float, _mm256_loadu_ps, F32_TAIL)
AVX2_FLOAT_DOT(dot_f16, uint16_t, load_f16, F16_TAIL)

/* BF16 (ggml_vec_dot_bf16, AVX2 builds): 4 chains of 8 lanes over the first n & ~31 (products exact in float,
 * so ggml's multiply-then-add equals a fused one), reduced (c0 + c2) + (c1 + c3), then hsum_float_8's tree
 * (bd_hsum8), the tail in double. */
AVX2 static void dot_bf16(int64_t n, float *s, const void *vx, const void *vy) {
    const uint16_t *x = vx, *y = vy;
    __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
    const int64_t np = n & ~(int64_t)31;
    for (int64_t i = 0; i < np; i += 32) {
        c0 = _mm256_fmadd_ps(load_bf16(x + i), load_bf16(y + i), c0);
        c1 = _mm256_fmadd_ps(load_bf16(x + i + 8), load_bf16(y + i + 8), c1);
        c2 = _mm256_fmadd_ps(load_bf16(x + i + 16), load_bf16(y + i + 16), c2);
        c3 = _mm256_fmadd_ps(load_bf16(x + i + 24), load_bf16(y + i + 24), c3);
    }
    const float r = bd_hsum8(_mm256_add_ps(_mm256_add_ps(c0, c2), _mm256_add_ps(c1, c3)));
    WIDE_TAIL(r, np, bd_bf16_to_fp32);
}

/* F16 activations with the F16C instruction (round to nearest even, as ggml's CPU backend does). */
AVX2 static void to_fp16_act(const float *x, void *dst, int64_t k) {
    uint16_t *y = dst;
    int64_t i = 0;
    for (; i + 8 <= k; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < k; i++) y[i] = bd_fp32_to_fp16(x[i]);
}

/* Q8_0 activations, the same bytes as bd_quantize_row_q8_0_act (and ggml's x86 quantize_row_q8_0): multiplier
 * 127/amax, rounding to nearest even, and the int32 -> int8 packs saturate (a non-finite product becomes
 * INT32_MIN and so -128, as in the portable code). */
#define RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
AVX2 static void quantize_q8_0_act(const float *x, void *dst, int64_t k) {
    bd_block_q8_0 *y = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7); /* undo the packs' per-lane interleave */
    for (int64_t i = 0; i < k / BD_QK8_0; i++, x += BD_QK8_0) {
        __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8), v2 = _mm256_loadu_ps(x + 16);
        __m256 v3 = _mm256_loadu_ps(x + 24);
        __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                                 _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        y[i].d = bd_fp32_to_fp16(amax / 127.f);
        const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
        const __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, id), RNE));
        const __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, id), RNE));
        const __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, id), RNE));
        const __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, id), RNE));
        const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
        _mm256_storeu_si256((__m256i *)y[i].qs, _mm256_permutevar8x32_epi32(p, order));
    }
}

/* ---- block-of-32 dots against Q8_0: 8 blocks per step, their scales converted at once ---- */

/* 8 int32 sums of products of 32 signed bytes: |x| as unsigned times y with x's sign, pairwise, then to
 * int32. */
AVX2 static inline __m256i dot_i8(__m256i x, __m256i y) {
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

/* sum over a Q8_0 block of x * y, as 8 int32 lanes. */
AVX2 static inline __m256i q8_0_dot(const int8_t *qs, __m256i a) { return dot_i8(bd_load32(qs), a); }

/* sum over a Q4_0 block of (q - 8) * y, as 8 int32 lanes: levels 0..15 (unsigned) times y, minus 8 * y,
 * both as int16 pair sums (no saturation: 15 * 127 * 2 < 32767). */
AVX2 static inline __m256i q4_0_dot(const uint8_t *qs, __m256i a) {
    const __m128i b = _mm_loadu_si128((const __m128i *)qs);
    const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0F));
    const __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(q, a), _mm256_maddubs_epi16(_mm256_set1_epi8(8), a));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

/* The Q8_0 and Q4_0 dots differ only in the block type and its per-block integer dot (BLOCK_DOT: q8_0_dot or
 * q4_0_dot). ggml's order (dot.h): one 8-lane chain, a fused multiply-add per block in block order; 8 blocks'
 * scales are converted at once. A macro rather than a shared function taking BLOCK_DOT, so that each loop is
 * compiled with it inline. */
#define AVX2_BLOCK32_DOT(name, TX, BLOCK_DOT)                                                                       \
    AVX2 static void name(int64_t n, float *s, const void *vx, const void *vy) {                                   \
        const TX *x = vx;                                                                                          \
        const bd_block_q8_0 *y = vy;                                                                               \
        const int64_t nb = n / BD_QK8_0;                                                                           \
        __m256 acc = _mm256_setzero_ps();                                                                          \
        int64_t i = 0;                                                                                             \
        for (; i + 8 <= nb; i += 8) {                                                                              \
            float d[8];                                                                                            \
            _mm256_storeu_ps(d, _mm256_mul_ps(bd_scales8((const uint8_t *)&x[i].d, sizeof *x),                     \
                                              bd_scales8((const uint8_t *)&y[i].d, sizeof *y)));                   \
            for (int k = 0; k < 8; k++) {                                                                          \
                const __m256i p = BLOCK_DOT(x[i + k].qs, bd_load32(y[i + k].qs));                                  \
                acc = _mm256_fmadd_ps(_mm256_broadcast_ss(&d[k]), _mm256_cvtepi32_ps(p), acc);                     \
            }                                                                                                      \
        }                                                                                                          \
        for (; i < nb; i++) {                                                                                      \
            const __m256i p = BLOCK_DOT(x[i].qs, bd_load32(y[i].qs));                                              \
            acc = _mm256_fmadd_ps(_mm256_set1_ps(bd_h2f(x[i].d) * bd_h2f(y[i].d)), _mm256_cvtepi32_ps(p), acc);    \
        }                                                                                                          \
        *s = bd_hsum8(acc);                                                                                        \
    }

AVX2_BLOCK32_DOT(dot_q8_0_q8_0, bd_block_q8_0, q8_0_dot)
AVX2_BLOCK32_DOT(dot_q4_0_q8_0, bd_block_q4_0, q4_0_dot)

/* ---- K-quant dots against Q8_K ---- */

/* Q4_K / Q5_K min term as 8 int32 lanes: bsums (16 groups of 16) times each sub-block's min (two groups). */
AVX2 static inline __m256i k_min_lanes(uint64_t m, const int16_t *bsums) {
    const __m128i m8 = _mm_cvtsi64_si128((long long)m);
    return _mm256_madd_epi16(bd_load32(bsums), _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8)));
}

/* d * y.d and dmin * y.d of a Q4_K / Q5_K block (adjacent halves: one conversion). */
AVX2 static inline __m128 k_d_dmin(const void *d_dmin, float yd) {
    uint32_t both;
    memcpy(&both, d_dmin, sizeof both);
    return _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)both)), _mm_set1_ps(yd));
}

/* pshufb patterns: int16 lanes all equal to byte j of a broadcast 8-byte scale vector (scales <= 63, so zero
 * extension is right). */
AVX2 static inline __m256i scale_of(__m256i sc8, int j) {
    return _mm256_shuffle_epi8(sc8, _mm256_set1_epi16((short)(0x8000 | j)));
}

/* The shared loop of Q4_K and Q5_K (q5: the block has the 5th-bit plane qh before qs), in ggml's order (dot.h):
 * an 8-lane chain for the scaled levels; the mins in a 4-lane chain (Q4_K, lane k: mins 2k and 2k+1) or a
 * scalar one (Q5_K), fused with -dmin. */
AVX2 static inline float dot_k45(int64_t nb, const uint8_t *xb, size_t xstride, const bd_block_q8_K *y, int q5) {
    const __m256i low4 = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
    __m256 acc = _mm256_setzero_ps();
    __m128 macc = _mm_setzero_ps(); /* Q4_K's 4-lane min chain */
    float summ = 0;                 /* Q5_K's scalar one */
    for (int64_t i = 0; i < nb; i++, xb += xstride) {
        const uint8_t *q = xb + 4 + BD_K_SCALE_SIZE + (q5 ? BD_QK_K / 8 : 0);
        const int8_t *a = y[i].qs;
        uint64_t sc, m;
        bd_unpack_scales_k4(xb + 4, &sc, &m);
        const __m256i sc8 = _mm256_set1_epi64x((long long)sc);
        __m256i hb = q5 ? bd_load32(xb + 4 + BD_K_SCALE_SIZE) : _mm256_setzero_si256(); /* bits 2c, 2c+1: chunk c */
        __m256i isum0 = _mm256_setzero_si256(), isum1 = isum0;
        for (int j = 0; j < 8; j += 2, q += 32, a += 64) {
            const __m256i b = bd_load32(q);
            __m256i lo = _mm256_and_si256(b, low4), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), low4);
            if (q5) {
                lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(hb, 4), bit4));
                hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(hb, 3), bit4));
                hb = _mm256_srli_epi16(hb, 2);
            }
            isum0 = _mm256_add_epi32(isum0, _mm256_madd_epi16(_mm256_maddubs_epi16(lo, bd_load32(a)), scale_of(sc8, j)));
            isum1 = _mm256_add_epi32(isum1,
                                     _mm256_madd_epi16(_mm256_maddubs_epi16(hi, bd_load32(a + 32)), scale_of(sc8, j + 1)));
        }
        /* d * y.d and -(dmin * y.d) */
        const __m128 dd = _mm_xor_ps(k_d_dmin(xb, y[i].d), _mm_setr_ps(0.0f, -0.0f, 0.0f, 0.0f));
        acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(dd), _mm256_cvtepi32_ps(_mm256_add_epi32(isum0, isum1)), acc);
        const __m256i mm = k_min_lanes(m, y[i].bsums);
        const __m128i m4 = _mm_hadd_epi32(_mm256_castsi256_si128(mm), _mm256_extracti128_si256(mm, 1));
        if (q5) {
            const __m128i m2 = _mm_add_epi32(m4, _mm_unpackhi_epi64(m4, m4));
            const int msum = _mm_cvtsi128_si32(_mm_add_epi32(m2, _mm_shuffle_epi32(m2, 1)));
            summ = _mm_cvtss_f32(_mm_fmadd_ss(_mm_movehdup_ps(dd), _mm_cvtsi32_ss(dd, msum), _mm_set_ss(summ)));
        } else {
            macc = _mm_fmadd_ps(_mm_permute_ps(dd, 0x55), _mm_cvtepi32_ps(m4), macc);
        }
    }
    if (q5) return bd_hsum8(acc) + summ;
    macc = _mm_add_ps(macc, _mm_movehl_ps(macc, macc));
    return bd_hsum8(acc) + _mm_cvtss_f32(_mm_add_ss(macc, _mm_movehdup_ps(macc)));
}

AVX2 static void dot_q4_K_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    *s = dot_k45(n / BD_QK_K, vx, sizeof(bd_block_q4_K), vy, 0);
}

AVX2 static void dot_q5_K_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    *s = dot_k45(n / BD_QK_K, vx, sizeof(bd_block_q5_K), vy, 1);
}

AVX2 static void dot_q6_K_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q6_K *x = vx;
    const bd_block_q8_K *y = vy;
    const __m256i low4 = _mm256_set1_epi8(0x0F), two = _mm256_set1_epi8(0x30);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / BD_QK_K; i++) {
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *a = y[i].qs;
        /* The 16 signed scales in both 128-bit lanes; SC2(k) makes int16 lanes of scale k (low lane) and k+1
         * (high lane): pshufb copies the byte into both halves of each int16, the arithmetic shift sign-extends. */
        const __m256i scb = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)x[i].scales));
#define SC2(k)                                                                                                 \
    _mm256_srai_epi16(_mm256_shuffle_epi8(scb, _mm256_set_m128i(_mm_set1_epi8((k) + 1), _mm_set1_epi8(k))), 8)
        __m256i isum0 = _mm256_setzero_si256(), isum1 = isum0;
        for (int h = 0; h < 2; h++, ql += 64, qh += 32, a += 128) {
            const __m256i l0 = bd_load32(ql), l1 = bd_load32(ql + 32), hb = bd_load32(qh);
            /* Levels 0..63: a nibble from ql and two bits from qh moved to bits 4-5. */
            const __m256i q1 =
                _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), two));
            const __m256i q2 =
                _mm256_or_si256(_mm256_and_si256(l1, low4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), two));
            const __m256i q3 =
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), _mm256_and_si256(hb, two));
            const __m256i q4 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                                               _mm256_and_si256(_mm256_srli_epi16(hb, 2), two));
            /* Each 128-bit half of a product vector is one sub-block of 16. */
            const int k = 8 * h;
            isum0 = _mm256_add_epi32(isum0, _mm256_madd_epi16(_mm256_maddubs_epi16(q1, bd_load32(a)), SC2(k)));
            isum1 = _mm256_add_epi32(isum1, _mm256_madd_epi16(_mm256_maddubs_epi16(q2, bd_load32(a + 32)), SC2(k + 2)));
            isum0 = _mm256_add_epi32(isum0, _mm256_madd_epi16(_mm256_maddubs_epi16(q3, bd_load32(a + 64)), SC2(k + 4)));
            isum1 = _mm256_add_epi32(isum1, _mm256_madd_epi16(_mm256_maddubs_epi16(q4, bd_load32(a + 96)), SC2(k + 6)));
        }
#undef SC2
        /* The -32 offset of every level, spread over the lanes as ggml does: lane k gets
         * 32 * (sc[2k] * bsums[2k] + sc[2k+1] * bsums[2k+1]). */
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[i].scales));
        const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(sc16, bd_load32(y[i].bsums)), 5);
        const __m256i isum = _mm256_sub_epi32(_mm256_add_epi32(isum0, isum1), off);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(bd_h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(isum), acc);
    }
    *s = bd_hsum8(acc);
}

void bd_dot_fill_avx2(bd_dot_traits t[BD_TYPE_COUNT]) {
    t[BD_TYPE_F32].vec_dot = dot_f32;
    t[BD_TYPE_F16].vec_dot = dot_f16;
    t[BD_TYPE_F16].from_float = to_fp16_act;
    t[BD_TYPE_BF16].vec_dot = dot_bf16;
    t[BD_TYPE_Q8_0].vec_dot = dot_q8_0_q8_0;
    t[BD_TYPE_Q8_0].from_float = quantize_q8_0_act;
    t[BD_TYPE_Q4_0].vec_dot = dot_q4_0_q8_0;
    t[BD_TYPE_Q4_0].from_float = quantize_q8_0_act;
    t[BD_TYPE_Q4_K].vec_dot = dot_q4_K_q8_K;
    t[BD_TYPE_Q5_K].vec_dot = dot_q5_K_q8_K;
    t[BD_TYPE_Q6_K].vec_dot = dot_q6_K_q8_K;
}
