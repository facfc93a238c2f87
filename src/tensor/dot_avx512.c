/* dot_avx512.c — dot products for CPUs with AVX-512 F, BW, VL and VNNI (Ice Lake, Sapphire Rapids, Zen 4);
 * the BF16 dot also uses AVX512_BF16 when present.
 *
 * Each function carries its own target attribute (dot.c has checked CPUID first). The quantized dots work on
 * 512-bit vectors holding two 32-element sub-blocks (or two Q8_0 blocks): VNNI's u8 x s8 -> s32 (vpdpbusd)
 * for the blocks of 32, and u8 x s8 -> s16 pairs (vpmaddubsw) followed by VNNI's s16 x s16 -> s32 (vpdpwssd)
 * with the sub-block scales for the K-quants, so no int32 multiply is needed. Constant offsets and K-quant
 * mins are taken from the activation sums and accumulated as vectors (no horizontal sum per block). */
#include <immintrin.h>

#include "tensor/cpu.h"
#include "tensor/dot_impl.h"
#include "tensor/quant.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16,avx2,fma,f16c")))

AVX512 static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

AVX512 static inline __m512i load64(const void *p) { return _mm512_loadu_si512(p); }
AVX512 static inline __m256i load32(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
/* Two 32-byte pieces as one 512-bit vector (lo in the low half). */
AVX512 static inline __m512i join(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

AVX512 static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* ---- float dots: 4 independent 16-wide FMA chains ---- */

AVX512 static void dot_f32(int64_t n, float *s, const void *vx, const void *vy) {
    const float *x = vx, *y = vy;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), a1);
        a2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 32), _mm512_loadu_ps(y + i + 32), a2);
        a3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 48), _mm512_loadu_ps(y + i + 48), a3);
    }
    for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), a0);
    if (i < n) { /* masked tail: the unused lanes load as 0 */
        const __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
        a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, x + i), _mm512_maskz_loadu_ps(k, y + i), a1);
    }
    *s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

AVX512 static inline __m512 load_f16(const uint16_t *p) { return _mm512_cvtph_ps(load32(p)); }

AVX512 static void dot_f16(int64_t n, float *s, const void *vx, const void *vy) {
    const uint16_t *x = vx, *y = vy;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = _mm512_fmadd_ps(load_f16(x + i), load_f16(y + i), a0);
        a1 = _mm512_fmadd_ps(load_f16(x + i + 16), load_f16(y + i + 16), a1);
        a2 = _mm512_fmadd_ps(load_f16(x + i + 32), load_f16(y + i + 32), a2);
        a3 = _mm512_fmadd_ps(load_f16(x + i + 48), load_f16(y + i + 48), a3);
    }
    for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(load_f16(x + i), load_f16(y + i), a0);
    if (i < n) {
        const __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
        a1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, x + i)),
                             _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, y + i)), a1);
    }
    *s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

AVX512 static inline __m512 bf16_widen(__m256i v) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

AVX512 static void dot_bf16(int64_t n, float *s, const void *vx, const void *vy) {
    const uint16_t *x = vx, *y = vy;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = _mm512_fmadd_ps(bf16_widen(load32(x + i)), bf16_widen(load32(y + i)), a0);
        a1 = _mm512_fmadd_ps(bf16_widen(load32(x + i + 16)), bf16_widen(load32(y + i + 16)), a1);
        a2 = _mm512_fmadd_ps(bf16_widen(load32(x + i + 32)), bf16_widen(load32(y + i + 32)), a2);
        a3 = _mm512_fmadd_ps(bf16_widen(load32(x + i + 48)), bf16_widen(load32(y + i + 48)), a3);
    }
    for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(bf16_widen(load32(x + i)), bf16_widen(load32(y + i)), a0);
    if (i < n) {
        const __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
        a1 = _mm512_fmadd_ps(bf16_widen(_mm256_maskz_loadu_epi16(k, x + i)),
                             bf16_widen(_mm256_maskz_loadu_epi16(k, y + i)), a1);
    }
    *s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

/* With AVX512_BF16: vdpbf16ps multiplies bf16 pairs exactly and adds them in fp32 (as ggml's backend does on
 * this CPU). It treats bf16 subnormals (< 1.2e-38) as zero, which the widening version above does not. */
AVX512BF16 static void dot_bf16_native(int64_t n, float *s, const void *vx, const void *vy) {
    const uint16_t *x = vx, *y = vy;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 128 <= n; i += 128) {
        a0 = _mm512_dpbf16_ps(a0, (__m512bh)load64(x + i), (__m512bh)load64(y + i));
        a1 = _mm512_dpbf16_ps(a1, (__m512bh)load64(x + i + 32), (__m512bh)load64(y + i + 32));
        a2 = _mm512_dpbf16_ps(a2, (__m512bh)load64(x + i + 64), (__m512bh)load64(y + i + 64));
        a3 = _mm512_dpbf16_ps(a3, (__m512bh)load64(x + i + 96), (__m512bh)load64(y + i + 96));
    }
    for (; i + 32 <= n; i += 32) a0 = _mm512_dpbf16_ps(a0, (__m512bh)load64(x + i), (__m512bh)load64(y + i));
    if (i < n) {
        const __mmask32 k = (__mmask32)((1ull << (n - i)) - 1);
        a1 = _mm512_dpbf16_ps(a1, (__m512bh)_mm512_maskz_loadu_epi16(k, x + i),
                              (__m512bh)_mm512_maskz_loadu_epi16(k, y + i));
    }
    *s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

/* F16 activations with the hardware conversion (round to nearest even, as ggml's CPU backend). */
AVX512 static void to_fp16_act(const float *x, void *dst, int64_t k) {
    uint16_t *y = dst;
    int64_t i = 0;
    for (; i + 16 <= k; i += 16)
        _mm256_storeu_si256((__m256i *)(y + i), _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < k; i++) y[i] = bd_fp32_to_fp16(x[i]);
}

/* ---- blocks of 32 against Q8_0: two blocks per vector ---- */

/* Per 32-bit lane, the sum of 4 products of signed bytes: |x| (unsigned) times y carrying x's sign. */
AVX512 static inline __m512i dot_i8_pairs(__m512i x, __m512i y) {
    const __m512i sy = _mm512_mask_sub_epi8(y, _mm512_movepi8_mask(x), _mm512_setzero_si512(), y);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(x), sy);
}

/* The scale of block i in the low 8 lanes, block i+1 in the high 8. */
AVX512 static inline __m512 two_scales(float d0, float d1) {
    return _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(d0), _mm512_set1_ps(d1));
}

AVX512 static void dot_q8_0_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q8_0 *x = vx, *y = vy;
    const int64_t nb = n / BD_QK8_0;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        const __m512i p0 = dot_i8_pairs(join(load32(x[i].qs), load32(x[i + 1].qs)), join(load32(y[i].qs), load32(y[i + 1].qs)));
        const __m512i p1 = dot_i8_pairs(join(load32(x[i + 2].qs), load32(x[i + 3].qs)),
                                        join(load32(y[i + 2].qs), load32(y[i + 3].qs)));
        acc0 = _mm512_fmadd_ps(two_scales(h2f(x[i].d) * h2f(y[i].d), h2f(x[i + 1].d) * h2f(y[i + 1].d)),
                               _mm512_cvtepi32_ps(p0), acc0);
        acc1 = _mm512_fmadd_ps(two_scales(h2f(x[i + 2].d) * h2f(y[i + 2].d), h2f(x[i + 3].d) * h2f(y[i + 3].d)),
                               _mm512_cvtepi32_ps(p1), acc1);
    }
    __m256 tail = _mm256_setzero_ps();
    for (; i < nb; i++) {
        const __m256i xv = load32(x[i].qs), yv = load32(y[i].qs);
        const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(xv, xv), _mm256_sign_epi8(yv, xv));
        tail = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d)), _mm256_cvtepi32_ps(p), tail);
    }
    *s = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + hsum256(tail);
}

/* The 32 levels (0..15, unsigned) of a Q4_0 block in element order. */
AVX512 static inline __m256i q4_0_levels(const uint8_t *qs) {
    const __m128i b = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0F));
}

AVX512 static void dot_q4_0_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q4_0 *x = vx;
    const bd_block_q8_0 *y = vy;
    const int64_t nb = n / BD_QK4_0;
    const __m512i eight = _mm512_set1_epi8(8);
    __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
    int64_t i = 0;
    /* sum (q - 8) * y = sum q * y - sum 8 * y: both unsigned x signed, so plain vpdpbusd. */
    for (; i + 2 <= nb; i += 2) {
        const __m512i q = join(q4_0_levels(x[i].qs), q4_0_levels(x[i + 1].qs));
        const __m512i a = join(load32(y[i].qs), load32(y[i + 1].qs));
        const __m512i p = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q, a),
                                           _mm512_dpbusd_epi32(_mm512_setzero_si512(), eight, a));
        const __m512 d = two_scales(h2f(x[i].d) * h2f(y[i].d), h2f(x[i + 1].d) * h2f(y[i + 1].d));
        if (i & 2) {
            acc1 = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(p), acc1);
        } else {
            acc0 = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(p), acc0);
        }
    }
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
    for (; i < nb; i++) {
        int isum = 0;
        for (int j = 0; j < BD_QK4_0 / 2; j++)
            isum += ((x[i].qs[j] & 0xF) - 8) * y[i].qs[j] + ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + BD_QK4_0 / 2];
        sum += (float)isum * (h2f(x[i].d) * h2f(y[i].d));
    }
    *s = sum;
}

/* ---- K-quants against Q8_K ---- */

/* Q4_K / Q5_K min term, as 8 int32 lanes: bsums (16 groups of 16) times each sub-block's min (two groups). */
AVX512 static inline __m256i k_min_lanes(uint64_t m, const int16_t *bsums) {
    const __m128i m8 = _mm_cvtsi64_si128((long long)m);
    const __m256i m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
    return _mm256_madd_epi16(load32(bsums), m16);
}

/* Per block, the sub-block scales as int16 lanes, and the vpermw indices that put scale 2c in lanes 0..15 and
 * 2c+1 in lanes 16..31 (c: the chunk of 64 levels). */
AVX512 static inline __m512i k_scales16(uint64_t sc) {
    return _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc)));
}

AVX512 static void dot_q4_K_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q4_K *x = vx;
    const bd_block_q8_K *y = vy;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const __m512i idx0 = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_setzero_si512(), _mm512_set1_epi16(1));
    const __m512i two = _mm512_set1_epi16(2);
    __m512 acc = _mm512_setzero_ps();
    __m256 macc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / BD_QK_K; i++) {
        uint64_t sc, m;
        bd_unpack_scales_k4(x[i].scales, &sc, &m);
        const __m512i sc16 = k_scales16(sc);
        const uint8_t *q = x[i].qs;
        const int8_t *a = y[i].qs;
        __m512i isum = _mm512_setzero_si512(), idx = idx0;
        for (int c = 0; c < 4; c++, q += 32, a += 64, idx = _mm512_add_epi16(idx, two)) {
            /* 32 bytes hold sub-block 2c in the low nibbles and 2c+1 in the high: one vector of 64 levels. */
            const __m256i b = load32(q);
            const __m512i lv = join(_mm256_and_si256(b, low4), _mm256_and_si256(_mm256_srli_epi16(b, 4), low4));
            isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(lv, load64(a)), _mm512_permutexvar_epi16(idx, sc16));
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(h2f(x[i].d) * y[i].d), _mm512_cvtepi32_ps(isum), acc);
        macc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].dmin) * y[i].d), _mm256_cvtepi32_ps(k_min_lanes(m, y[i].bsums)),
                               macc);
    }
    *s = _mm512_reduce_add_ps(acc) - hsum256(macc);
}

AVX512 static void dot_q5_K_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q5_K *x = vx;
    const bd_block_q8_K *y = vy;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const __m512i sixteen = _mm512_set1_epi8(16);
    const __m512i idx0 = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_setzero_si512(), _mm512_set1_epi16(1));
    const __m512i two = _mm512_set1_epi16(2);
    const __m512i bit0 = _mm512_mask_blend_epi8(0xFFFFFFFF00000000ull, _mm512_set1_epi8(1), _mm512_set1_epi8(2));
    __m512 acc = _mm512_setzero_ps();
    __m256 macc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / BD_QK_K; i++) {
        uint64_t sc, m;
        bd_unpack_scales_k4(x[i].scales, &sc, &m);
        const __m512i sc16 = k_scales16(sc);
        const uint8_t *q = x[i].qs;
        const int8_t *a = y[i].qs;
        const __m256i h = load32(x[i].qh);
        const __m512i hh = join(h, h);
        __m512i isum = _mm512_setzero_si512(), idx = idx0, bit = bit0;
        for (int c = 0; c < 4; c++, q += 32, a += 64, idx = _mm512_add_epi16(idx, two)) {
            const __m256i b = load32(q);
            __m512i lv = join(_mm256_and_si256(b, low4), _mm256_and_si256(_mm256_srli_epi16(b, 4), low4));
            /* The 5th bit of sub-block 2c is bit 2c of qh, of 2c+1 bit 2c+1. */
            lv = _mm512_mask_add_epi8(lv, _mm512_test_epi8_mask(hh, bit), lv, sixteen);
            bit = _mm512_slli_epi16(bit, 2); /* no bit crosses a byte: they stay below 0x80 */
            isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(lv, load64(a)), _mm512_permutexvar_epi16(idx, sc16));
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(h2f(x[i].d) * y[i].d), _mm512_cvtepi32_ps(isum), acc);
        macc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].dmin) * y[i].d), _mm256_cvtepi32_ps(k_min_lanes(m, y[i].bsums)),
                               macc);
    }
    *s = _mm512_reduce_add_ps(acc) - hsum256(macc);
}

AVX512 static void dot_q6_K_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q6_K *x = vx;
    const bd_block_q8_K *y = vy;
    const __m512i low4 = _mm512_set1_epi8(0x0F), top2 = _mm512_set1_epi8(0x30);
    /* vpermw indices spreading 4 scales over 32 int16 lanes, 8 each (the sub-blocks of 16 of 64 levels). */
    const __m512i spread0 = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1,
                                             0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i four = _mm512_set1_epi16(4);
    __m512 acc = _mm512_setzero_ps();
    __m256 oacc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / BD_QK_K; i++) {
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *a = y[i].qs;
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[i].scales));
        const __m512i scz = _mm512_castsi256_si512(sc16);
        __m512i idx = spread0;
        __m512i isum = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++, ql += 64, qh += 32, a += 128) {
            const __m512i l = load64(ql);
            const __m256i hb = load32(qh);
            /* Low half: qh bits 0-1 (levels 0..31 of this half); high half: bits 2-3 (levels 32..63). Shifted
             * right by 4 more, the same vector gives bits 4-5 and 6-7 for levels 64..127. */
            const __m512i hz = join(hb, _mm256_srli_epi16(hb, 2));
            const __m512i q12 = _mm512_or_si512(_mm512_and_si512(l, low4), _mm512_and_si512(_mm512_slli_epi16(hz, 4), top2));
            const __m512i q34 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), low4), _mm512_and_si512(hz, top2));
            isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(q12, load64(a)), _mm512_permutexvar_epi16(idx, scz));
            idx = _mm512_add_epi16(idx, four);
            isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(q34, load64(a + 64)), _mm512_permutexvar_epi16(idx, scz));
            idx = _mm512_add_epi16(idx, four);
        }
        const float d = h2f(x[i].d) * y[i].d;
        acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(isum), acc);
        /* The -32 offset of every level: 32 * sum_j sc[j] * bsums[j]. */
        oacc = _mm256_fmadd_ps(_mm256_set1_ps(32 * d), _mm256_cvtepi32_ps(_mm256_madd_epi16(sc16, load32(y[i].bsums))),
                               oacc);
    }
    *s = _mm512_reduce_add_ps(acc) - hsum256(oacc);
}

void bd_dot_fill_avx512(bd_dot_traits t[BD_TYPE_COUNT]) {
    t[BD_TYPE_F32].vec_dot = dot_f32;
    t[BD_TYPE_F16].vec_dot = dot_f16;
    t[BD_TYPE_F16].from_float = to_fp16_act;
    t[BD_TYPE_BF16].vec_dot = bd_cpu_get()->avx512bf16 ? dot_bf16_native : dot_bf16;
    t[BD_TYPE_Q8_0].vec_dot = dot_q8_0_q8_0;
    t[BD_TYPE_Q4_0].vec_dot = dot_q4_0_q8_0;
    t[BD_TYPE_Q4_K].vec_dot = dot_q4_K_q8_K;
    t[BD_TYPE_Q5_K].vec_dot = dot_q5_K_q8_K;
    t[BD_TYPE_Q6_K].vec_dot = dot_q6_K_q8_K;
}
