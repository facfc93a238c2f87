/* dot_avx2_mix.c — AVX2 dot products of the types llama.cpp's quantizer mixes in beside the main ones: Q4_1,
 * Q5_0, Q5_1 (x Q8_0 / Q8_1), IQ4_NL, MXFP4 (x Q8_0), Q2_K, Q3_K, IQ4_XS (x Q8_K), and the Q8_1 activation
 * converter.
 *
 * Each keeps exactly the float steps of ggml's x86 vec_dot for the type, which its AVX2 and AVX-512 builds
 * share (dot_scalar.c spells them out): the integer part of a block is computed with the u8 x s8 multiply-add
 * (maddubs; signed weights through the sign trick), exact for these ranges, then converted and fused into the
 * 8-lane chain(s) as ggml does. So every result is bit-identical to the portable version and to ggml
 * (conformance_dot). The same code serves the AVX-512 level: ggml's AVX-512 builds run these 256-bit paths too. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "tensor/dot_impl.h"
#include "tensor/lanes_x86.h"
#include "tensor/quant.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))

/* 32 nibbles as 32 bytes: the low nibbles of the 16 bytes first, then the high ones (ggml's element order). */
AVX2 static inline __m256i nibbles32(const uint8_t *qs) {
    const __m128i b = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0F));
}

/* Byte j = 0xFF where bit j of the 32-bit word at p is set, else 0. */
AVX2 static inline __m256i bits32(const uint8_t *p) {
    uint32_t w;
    memcpy(&w, p, sizeof w);
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32((int)w), _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

/* int32 lane k = sum of x[4k..4k+3] * y[4k..4k+3], x unsigned (0..127), y signed. */
AVX2 static inline __m256i dot_us8(__m256i x, __m256i y) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), _mm256_set1_epi16(1));
}

/* The same for signed x (|x| <= 127): the sign of x moved onto y. */
AVX2 static inline __m256i dot_s8(__m256i x, __m256i y) { return dot_us8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x)); }

/* ---- block-of-32 formats ---- */

/* Q4_1 / Q5_1 (x Q8_1): acc = fma(d_x * d_y, lanes, acc); the minimum terms fused into one float. */
AVX2 static inline float dot_min32(int64_t nb, const uint8_t *xb, size_t stride, const bd_block_q8_1 *y, int q5) {
    __m256 acc = _mm256_setzero_ps();
    float summs = 0;
    for (int64_t i = 0; i < nb; i++, xb += stride) {
        uint16_t d, m;
        memcpy(&d, xb, 2);
        memcpy(&m, xb + 2, 2);
        summs = fmaf(bd_h2f(m), bd_h2f(y[i].s), summs);
        __m256i q = nibbles32(xb + (q5 ? 8 : 4));
        if (q5) q = _mm256_or_si256(q, _mm256_and_si256(bits32(xb + 4), _mm256_set1_epi8(0x10)));
        const __m256 isum = _mm256_cvtepi32_ps(dot_us8(q, bd_load32(y[i].qs)));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(bd_h2f(d) * bd_h2f(y[i].d)), isum, acc);
    }
    return bd_hsum8(acc) + summs;
}

AVX2 static void dot_q4_1_q8_1(int64_t n, float *s, const void *vx, const void *vy) {
    *s = dot_min32(n / BD_QK32, vx, sizeof(bd_block_q4_1), vy, 0);
}

AVX2 static void dot_q5_1_q8_1(int64_t n, float *s, const void *vx, const void *vy) {
    *s = dot_min32(n / BD_QK32, vx, sizeof(bd_block_q5_1), vy, 1);
}

AVX2 static void dot_q5_0_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q5_0 *x = vx;
    const bd_block_q8_0 *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / BD_QK32; i++) {
        /* levels q - 16 as signed bytes: 0xF0 ored in where the 5th bit is clear */
        const __m256i q = _mm256_or_si256(nibbles32(x[i].qs), _mm256_andnot_si256(bits32(x[i].qh), _mm256_set1_epi8((char)0xF0)));
        const __m256 isum = _mm256_cvtepi32_ps(dot_s8(q, bd_load32(y[i].qs)));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(bd_h2f(x[i].d) * bd_h2f(y[i].d)), isum, acc);
    }
    *s = bd_hsum8(acc);
}

/* 32 table values of nibble indices (IQ4_NL, MXFP4, an IQ4_XS sub-block). */
AVX2 static inline __m256i table32(const uint8_t *qs, __m128i values) {
    const __m128i b = _mm_loadu_si128((const __m128i *)qs), m4 = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16(b, 4), m4)),
                            _mm_shuffle_epi8(values, _mm_and_si128(b, m4)));
}

/* IQ4_NL / MXFP4 (x Q8_0): two chains over the pairs of blocks, added before the reduction; an odd last
 * block fused into the sum alone. */
AVX2 static inline float dot_table32(int64_t nb, const uint8_t *xb, size_t stride, const bd_block_q8_0 *y,
                                     const int8_t *table, int e8m0) {
    const __m128i values = _mm_loadu_si128((const __m128i *)table);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    const int off = e8m0 ? 1 : 2;
    int64_t i = 0;
    for (; i + 1 < nb; i += 2, xb += 2 * stride) {
        const __m256i p0 = dot_s8(table32(xb + off, values), bd_load32(y[i].qs));
        const __m256i p1 = dot_s8(table32(xb + stride + off, values), bd_load32(y[i + 1].qs));
        uint16_t h0 = 0, h1 = 0;
        if (!e8m0) memcpy(&h0, xb, 2), memcpy(&h1, xb + stride, 2);
        const float d0 = e8m0 ? bd_e8m0_to_fp32_half(xb[0]) : bd_h2f(h0);
        const float d1 = e8m0 ? bd_e8m0_to_fp32_half(xb[stride]) : bd_h2f(h1);
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(bd_h2f(y[i].d) * d0), _mm256_cvtepi32_ps(p0), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(bd_h2f(y[i + 1].d) * d1), _mm256_cvtepi32_ps(p1), acc1);
    }
    float sum = bd_hsum8(_mm256_add_ps(acc0, acc1));
    if (i < nb) {
        uint16_t h = 0;
        if (!e8m0) memcpy(&h, xb, 2);
        const float d = bd_h2f(y[i].d) * (e8m0 ? bd_e8m0_to_fp32_half(xb[0]) : bd_h2f(h));
        int total = 0;
        for (int j = 0; j < 16; j++)
            total += table[xb[off + j] & 0xF] * y[i].qs[j] + table[xb[off + j] >> 4] * y[i].qs[j + 16];
        sum = fmaf(d, (float)total, sum);
    }
    return sum;
}

AVX2 static void dot_iq4_nl_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    *s = dot_table32(n / BD_QK32, vx, sizeof(bd_block_iq4_nl), vy, bd_kvalues_iq4nl, 0);
}

AVX2 static void dot_mxfp4_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    *s = dot_table32(n / BD_QK32, vx, sizeof(bd_block_mxfp4), vy, bd_kvalues_mxfp4, 1);
}

/* ---- K-quants against Q8_K ---- */

/* int32 lane k of one 32-element run (lane k: elements 4k..4k+3) of levels q (unsigned bytes) times y, the
 * first 16 elements weighted by s0, the other 16 by s1. */
AVX2 static inline __m256i run32(__m256i q, __m256i y, int s0, int s1) {
    const __m256i sc = _mm256_set_m128i(_mm_set1_epi16((short)s1), _mm_set1_epi16((short)s0));
    return _mm256_madd_epi16(sc, _mm256_maddubs_epi16(q, y));
}

/* Q2_K: the mins step, then the levels step, in one chain. */
AVX2 static void dot_q2_K_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q2_K *x = vx;
    const bd_block_q8_K *y = vy;
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / BD_QK_K; i++) {
        const __m128i sm = _mm_loadu_si128((const __m128i *)x[i].scales);
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), _mm_set1_epi8(0x0F)));
        const __m256i prod = _mm256_madd_epi16(mins, bd_load32(y[i].bsums));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(-y[i].d * bd_h2f(x[i].dmin)), _mm256_cvtepi32_ps(prod), acc);
        __m256i sumi = _mm256_setzero_si256();
        for (int c = 0; c < 2; c++) {
            const __m256i bits = bd_load32(x[i].qs + 32 * c);
            for (int j = 0; j < 4; j++) {
                const int g = 8 * c + 2 * j; /* the two 16-element groups of this run */
                const __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * j), m3);
                sumi = _mm256_add_epi32(sumi, run32(q, bd_load32(y[i].qs + 128 * c + 32 * j), x[i].scales[g] & 0xF,
                                                    x[i].scales[g + 1] & 0xF));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * bd_h2f(x[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = bd_hsum8(acc);
}

/* Q3_K: levels 0..7 (low two bits, plus 4 where the hmask bit is set) times y, minus 4 * y: q - 4. */
AVX2 static void dot_q3_K_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q3_K *x = vx;
    const bd_block_q8_K *y = vy;
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1), four = _mm256_set1_epi8(4);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / BD_QK_K; i++) {
        int sc[16];
        for (int j = 0; j < 16; j++) sc[j] = bd_q3_K_scale(x[i].scales, j);
        const __m256i hbits = bd_load32(x[i].hmask);
        __m256i sumi = _mm256_setzero_si256();
        for (int c = 0; c < 2; c++) {
            const __m256i bits = bd_load32(x[i].qs + 32 * c);
            for (int j = 0; j < 4; j++) {
                const int b = 4 * c + j, g = 8 * c + 2 * j;
                const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * j), m3);
                const __m256i h = _mm256_and_si256(_mm256_srli_epi16(hbits, b), one);
                const __m256i q = _mm256_or_si256(lo, _mm256_slli_epi16(h, 2)); /* 0..7 */
                const __m256i yv = bd_load32(y[i].qs + 128 * c + 32 * j);
                const __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(q, yv), _mm256_maddubs_epi16(four, yv));
                const __m256i scv = _mm256_set_m128i(_mm_set1_epi16((short)sc[g + 1]), _mm_set1_epi16((short)sc[g]));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(scv, p16));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * bd_h2f(x[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = bd_hsum8(acc);
}

/* IQ4_XS: table values, signed 6-bit scales per 32, one chain. */
AVX2 static void dot_iq4_xs_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_iq4_xs *x = vx;
    const bd_block_q8_K *y = vy;
    const __m128i values = _mm_loadu_si128((const __m128i *)bd_kvalues_iq4nl);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / BD_QK_K; i++) {
        __m256i sumi = _mm256_setzero_si256();
        for (int ib = 0; ib < BD_QK_K / 32; ib++) {
            const __m256i q = table32(x[i].qs + 16 * ib, values), yv = bd_load32(y[i].qs + 32 * ib);
            const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(yv, q));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, _mm256_set1_epi16((short)bd_iq4_xs_scale(&x[i], ib))));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(bd_h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = bd_hsum8(acc);
}

/* ---- Q8_1 activations, as ggml's x86 backend makes them ---- */

AVX2 static void quantize_q8_1_act(const float *x, void *dst, int64_t k) {
    bd_block_q8_1 *y = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < k / BD_QK32; i++, x += BD_QK32) {
        __m256 v[4];
        for (int j = 0; j < 4; j++) v[j] = _mm256_loadu_ps(x + 8 * j);
        __m256 amax = _mm256_andnot_ps(sign, v[0]);
        for (int j = 1; j < 4; j++) amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[j]));
        __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(amax, 1), _mm256_castps256_ps128(amax));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float max = _mm_cvtss_f32(m4);
        const float d = max / 127.f;
        y[i].d = bd_fp32_to_fp16(d);
        const __m256 mul = _mm256_set1_ps(max != 0.0f ? 127.f / max : 0.0f);
        __m256i q[4];
        for (int j = 0; j < 4; j++)
            q[j] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[j], mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
        s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1));
        y[i].s = bd_fp32_to_fp16(d * (float)_mm_cvtsi128_si32(s4));
        const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        _mm256_storeu_si256((__m256i *)y[i].qs, _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    }
}

void bd_dot_fill_avx2_mix(bd_dot_traits t[BD_TYPE_COUNT]) {
    /* the faster converters dot_avx2.c registered for Q8_0 (same bytes) serve the other Q8_0 users too */
    t[BD_TYPE_Q5_0].from_float = t[BD_TYPE_IQ4_NL].from_float = t[BD_TYPE_MXFP4].from_float = t[BD_TYPE_Q8_0].from_float;
    t[BD_TYPE_Q4_1].vec_dot = dot_q4_1_q8_1;
    t[BD_TYPE_Q4_1].from_float = quantize_q8_1_act;
    t[BD_TYPE_Q5_1].vec_dot = dot_q5_1_q8_1;
    t[BD_TYPE_Q5_1].from_float = quantize_q8_1_act;
    t[BD_TYPE_Q5_0].vec_dot = dot_q5_0_q8_0;
    t[BD_TYPE_IQ4_NL].vec_dot = dot_iq4_nl_q8_0;
    t[BD_TYPE_MXFP4].vec_dot = dot_mxfp4_q8_0;
    t[BD_TYPE_Q2_K].vec_dot = dot_q2_K_q8_K;
    t[BD_TYPE_Q3_K].vec_dot = dot_q3_K_q8_K;
    t[BD_TYPE_IQ4_XS].vec_dot = dot_iq4_xs_q8_K;
}
