/* dot_avx512.c — dot products for CPUs with AVX-512 F, BW, VL and VNNI (Ice Lake, Sapphire Rapids, Zen 4);
 * the BF16 dot also uses AVX512_BF16 when present.
 *
 * Each function carries its own target attribute (dot.c has checked CPUID first). Every result is bit-identical
 * to ggml's (the float order in dot.h): the integer work uses 512-bit vectors holding two 32-element sub-blocks
 * (or two Q8_0 blocks), VNNI's u8 x s8 -> s32 (vpdpbusd) for the blocks of 32 and u8 x s8 -> s16 pairs
 * (vpmaddubsw) followed by s16 x s16 -> s32 (vpdpwssd) with the sub-block scales for the K-quants; the 16 int32
 * lanes then fold to ggml's 8 (exact), and the float accumulation is ggml's 8-lane chain.
 *
 * On these CPUs 512-bit work issues on two ports only, and that, not memory, bounds a single thread here; so
 * the code spends few vector instructions per block: fp16 block scales are converted 8 at a time, K-quant
 * nibbles are split from one broadcast load with a per-half shift, and the multi-row versions (vec_dot_n)
 * decode a weight block once for up to 4 activation rows (independent chains, which also hides the latency
 * of the per-block fused multiply-add chain). */
#include <immintrin.h>
#include <string.h>

#include "tensor/cpu.h"
#include "tensor/dot_impl.h"
#include "tensor/lanes_x86.h"
#include "tensor/quant.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16,avx2,fma,f16c")))

AVX512 static inline __m512i load64(const void *p) { return _mm512_loadu_si512(p); }
/* Two 32-byte pieces as one 512-bit vector (lo in the low half). */

/* ---- float dots: ggml's order (dot.h): 4 chains of 16 lanes over the first n & ~63, a fixed tree, the tail ---- */

/* ggml's reduction of its 4 accumulators: (a0 + a2) + (a1 + a3), then the 16 lanes halved 16 -> 8 -> 4 -> 2 -> 1
 * (what _mm512_reduce_add_ps does). */
AVX512 static inline float reduce4x16(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3)));
}

/* The float dots differ in how 16 elements become fp32 (LOAD16) and how the tail of n % 64 elements is added
 * (TAIL, given the reduced float r and the index i where the tail starts, sets *s). A macro rather than a
 * shared function taking loaders, so that each loop is compiled with its loads inline. */
#define AVX512_FLOAT_DOT(name, T, LOAD16, TAIL)                                                                     \
    AVX512 static void name(int64_t n, float *s, const void *vx, const void *vy) {                                 \
        const T *x = vx, *y = vy;                                                                                  \
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                                                \
        const int64_t np = n & ~(int64_t)63;                                                                       \
        for (int64_t i = 0; i < np; i += 64) {                                                                     \
            a0 = _mm512_fmadd_ps(LOAD16(x + i), LOAD16(y + i), a0);                                                \
            a1 = _mm512_fmadd_ps(LOAD16(x + i + 16), LOAD16(y + i + 16), a1);                                      \
            a2 = _mm512_fmadd_ps(LOAD16(x + i + 32), LOAD16(y + i + 32), a2);                                      \
            a3 = _mm512_fmadd_ps(LOAD16(x + i + 48), LOAD16(y + i + 48), a3);                                      \
        }                                                                                                          \
        const float r = reduce4x16(a0, a1, a2, a3);                                                                \
        TAIL(r, np);                                                                                               \
    }

/* F32: the tail as the AVX-512 build's (dot_impl.h). */
#define F32_TAIL(r, i0) (*s = bd_dot_f32_tail(r, x, y, i0, n, 7))
/* F16: the tail is added in double (each product of two halves is exact in float), then rounded once. */
#define F16_TAIL(r, i0)                                                                                            \
    do {                                                                                                           \
        double sum = r;                                                                                            \
        for (int64_t i = i0; i < n; i++) sum += (double)(bd_h2f(x[i]) * bd_h2f(y[i]));                             \
        *s = (float)sum;                                                                                           \
    } while (0)
/* BF16 (only without AVX512_BF16; ggml's order there is not matched): the tail as F16's. */
#define BF16_TAIL(r, i0)                                                                                           \
    do {                                                                                                           \
        double sum = r;                                                                                            \
        for (int64_t i = i0; i < n; i++) sum += (double)(bd_bf16_to_fp32(x[i]) * bd_bf16_to_fp32(y[i]));          \
        *s = (float)sum;                                                                                           \
    } while (0)

AVX512 static inline __m512 load_f16(const uint16_t *p) { return _mm512_cvtph_ps(bd_load32(p)); }
AVX512 static inline __m512 bf16_widen(__m256i v) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}
AVX512 static inline __m512 load_bf16(const uint16_t *p) { return bf16_widen(bd_load32(p)); }

AVX512_FLOAT_DOT(dot_f32, float, _mm512_loadu_ps, F32_TAIL)
AVX512_FLOAT_DOT(dot_f16, uint16_t, load_f16, F16_TAIL)
AVX512_FLOAT_DOT(dot_bf16, uint16_t, load_bf16, BF16_TAIL)

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

/* ---- blocks of 32 against Q8_0: two blocks per vector, scales converted 8 at a time ---- */

/* One block (the tails): 8 int32 lanes of sums of signed byte products. */
AVX512 static inline __m256i dot_i8_block(__m256i x, __m256i y) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

#define INLINE __attribute__((always_inline)) inline

/* The high 8 lanes of v. */
AVX512 static inline __m256 hi8(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

/* Q8_0 weights against ny Q8_0 activation rows (y + j*by), in ggml's order (dot.h): per row one 8-lane chain,
 * a fused multiply-add per block in block order. Weight levels, their signs and scales are read once per 8
 * blocks and used for every row; two blocks' integer sums come from one 512-bit vpdpbusd, then feed the chain
 * one after the other. Each row's arithmetic is the same whatever ny. */
AVX512 static INLINE void dot_q8_0_n(int64_t n, const bd_block_q8_0 *x, const uint8_t *yb, size_t by, int ny, float *s,
                                     size_t bs) {
    const int64_t nb = n / BD_QK8_0;
    __m256 acc[BD_DOT_MAX_NY];
    for (int j = 0; j < ny; j++) acc[j] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= nb; i += 8) {
        const __m256 xd = bd_scales8((const uint8_t *)&x[i].d, sizeof *x);
        __m512i ax[4];
        __mmask64 neg[4];
        for (int p = 0; p < 4; p++) {
            const __m512i xv = bd_join256(bd_load32(x[i + 2 * p].qs), bd_load32(x[i + 2 * p + 1].qs));
            ax[p] = _mm512_abs_epi8(xv);
            neg[p] = _mm512_movepi8_mask(xv);
        }
        for (int j = 0; j < ny; j++) {
            const bd_block_q8_0 *y = (const bd_block_q8_0 *)(yb + (size_t)j * by);
            float d[8];
            _mm256_storeu_ps(d, _mm256_mul_ps(xd, bd_scales8((const uint8_t *)&y[i].d, sizeof *y)));
            __m256 a = acc[j];
            for (int p = 0; p < 4; p++) {
                const __m512i yv = bd_join256(bd_load32(y[i + 2 * p].qs), bd_load32(y[i + 2 * p + 1].qs));
                /* |x| (unsigned) times y carrying x's sign, 4 products per 32-bit lane. */
                const __m512i sy = _mm512_mask_sub_epi8(yv, neg[p], _mm512_setzero_si512(), yv);
                const __m512 prod = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ax[p], sy));
                a = _mm256_fmadd_ps(_mm256_broadcast_ss(&d[2 * p]), _mm512_castps512_ps256(prod), a);
                a = _mm256_fmadd_ps(_mm256_broadcast_ss(&d[2 * p + 1]), hi8(prod), a);
            }
            acc[j] = a;
        }
    }
    for (; i < nb; i++) {
        const __m256i xv = bd_load32(x[i].qs);
        const float xd = bd_h2f(x[i].d);
        for (int j = 0; j < ny; j++) {
            const bd_block_q8_0 *y = (const bd_block_q8_0 *)(yb + (size_t)j * by) + i;
            const __m256i p = dot_i8_block(xv, bd_load32(y->qs));
            acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(xd * bd_h2f(y->d)), _mm256_cvtepi32_ps(p), acc[j]);
        }
    }
    for (int j = 0; j < ny; j++) s[j * bs] = bd_hsum8(acc[j]);
}

AVX512 static void dot_q8_0_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    dot_q8_0_n(n, vx, vy, 0, 1, s, 0);
}

/* ny in 1..BD_DOT_MAX_NY: each count is its own unrolled instance. */
#define DOT_N_SWITCH(call_with_ny)                                                                              \
    switch (ny) {                                                                                               \
    case 1: call_with_ny(1); break;                                                                             \
    case 2: call_with_ny(2); break;                                                                             \
    case 3: call_with_ny(3); break;                                                                             \
    default: call_with_ny(4); break;                                                                            \
    }

AVX512 static void dot_q8_0_q8_0_n(int64_t n, float *s, size_t bs, const void *vx, const void *vy, size_t by, int ny) {
#define CALL(k) dot_q8_0_n(n, vx, vy, by, k, s, bs)
    DOT_N_SWITCH(CALL)
#undef CALL
}

/* Q4_0 against Q8_0 in ggml's order (as Q8_0's): per block, 8 int32 lanes of (q - 8) * y over 4 consecutive
 * elements, then one fused multiply-add into an 8-lane chain. */
AVX512 static void dot_q4_0_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q4_0 *x = vx;
    const bd_block_q8_0 *y = vy;
    const int64_t nb = n / BD_QK4_0;
    const __m512i low4 = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
    /* vpermt2q indices: from 4 blocks' low nibbles (lo) and high nibbles (hi), 16 bytes per block each, make
     * two blocks in element order: lo0 hi0 lo1 hi1, then lo2 hi2 lo3 hi3. */
    const __m512i first = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
    const __m512i second = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= nb; i += 8) {
        float d[8];
        _mm256_storeu_ps(d, _mm256_mul_ps(bd_scales8((const uint8_t *)&x[i].d, sizeof *x),
                                          bd_scales8((const uint8_t *)&y[i].d, sizeof *y)));
        for (int g = 0; g < 8; g += 4) {
            __m512i b = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)x[i + g].qs));
            b = _mm512_inserti32x4(b, _mm_loadu_si128((const __m128i *)x[i + g + 1].qs), 1);
            b = _mm512_inserti32x4(b, _mm_loadu_si128((const __m128i *)x[i + g + 2].qs), 2);
            b = _mm512_inserti32x4(b, _mm_loadu_si128((const __m128i *)x[i + g + 3].qs), 3);
            const __m512i lo = _mm512_and_si512(b, low4), hi = _mm512_and_si512(_mm512_srli_epi16(b, 4), low4);
            for (int p = 0; p < 4; p += 2) {
                const __m512i q = _mm512_permutex2var_epi64(lo, p ? second : first, hi);
                const __m512i a = bd_join256(bd_load32(y[i + g + p].qs), bd_load32(y[i + g + p + 1].qs));
                /* sum (q - 8) * y = sum q * y - sum 8 * y: both unsigned x signed, exact in each lane. */
                const __m512i prod = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q, a),
                                                      _mm512_dpbusd_epi32(_mm512_setzero_si512(), eight, a));
                const __m512 pf = _mm512_cvtepi32_ps(prod);
                acc = _mm256_fmadd_ps(_mm256_broadcast_ss(&d[g + p]), _mm512_castps512_ps256(pf), acc);
                acc = _mm256_fmadd_ps(_mm256_broadcast_ss(&d[g + p + 1]), hi8(pf), acc);
            }
        }
    }
    for (; i < nb; i++) {
        const __m128i b = _mm_loadu_si128((const __m128i *)x[i].qs);
        const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0F));
        const __m256i p = dot_i8_block(_mm256_sub_epi8(q, _mm256_set1_epi8(8)), bd_load32(y[i].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(bd_h2f(x[i].d) * bd_h2f(y[i].d)), _mm256_cvtepi32_ps(p), acc);
    }
    *s = bd_hsum8(acc);
}

/* ---- K-quants against Q8_K ---- */

/* Per block, the 8 sub-block scales as int16 lanes (for vpermw). */
AVX512 static inline __m512i k_scales16(uint64_t sc) {
    return _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc)));
}

/* The 64 four-bit levels of chunk c (sub-blocks 2c and 2c+1) of a Q4_K / Q5_K block, in element order: the 32
 * bytes are loaded into both halves (a load-port broadcast) and the high half shifted down by 4. */
AVX512 static inline __m512i k_nibbles(const uint8_t *q, __m512i shift, __m512i low4) {
    return _mm512_and_si512(_mm512_srlv_epi16(_mm512_broadcast_i64x4(bd_load32(q)), shift), low4);
}

/* The shared loop of Q4_K and Q5_K (q5: the block has the 5th-bit plane qh before qs), for ny activation
 * rows (y + j*by) at once: the weights are decoded once per block and used ny times. Each row's arithmetic is
 * the same whatever ny, so the results are bit-identical to ny single calls. ggml's order (dot.h): the 16
 * int32 lanes of a block fold to 8 (lane k: elements with (e % 32) / 4 == k), one fused multiply-add per block
 * into an 8-lane chain; the mins go to a 4-lane chain (Q4_K) or a scalar one (Q5_K) with -dmin. */
AVX512 static INLINE void dot_k45_n(int64_t nb, const uint8_t *xb, size_t xstride, const uint8_t *yb, size_t by,
                                    int ny, float *s, size_t bs, int q5) {
    const __m512i low4 = _mm512_set1_epi8(0x0F), sixteen = _mm512_set1_epi8(16);
    const __m512i shift = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_setzero_si512(), _mm512_set1_epi16(4));
    /* vpermw indices: scale 2c in lanes 0..15, 2c+1 in lanes 16..31, for the 4 chunks c of 64 levels. */
    const __m512i idx0 = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_setzero_si512(), _mm512_set1_epi16(1));
    const __m512i idx1 = _mm512_add_epi16(idx0, _mm512_set1_epi16(2));
    const __m512i idx2 = _mm512_add_epi16(idx0, _mm512_set1_epi16(4));
    const __m512i idx3 = _mm512_add_epi16(idx0, _mm512_set1_epi16(6));
    const __m512i bit0 = _mm512_mask_blend_epi8(0xFFFFFFFF00000000ull, _mm512_set1_epi8(1), _mm512_set1_epi8(2));
    __m256 acc[BD_DOT_MAX_NY];
    __m128 macc[BD_DOT_MAX_NY]; /* Q4_K */
    float summ[BD_DOT_MAX_NY];  /* Q5_K */
    for (int j = 0; j < ny; j++) acc[j] = _mm256_setzero_ps(), macc[j] = _mm_setzero_ps(), summ[j] = 0;
    for (int64_t i = 0; i < nb; i++, xb += xstride) {
        /* Both layouts start with d, dmin, scales[12]; Q5_K then has qh[32] before qs. */
        const uint8_t *q = xb + 4 + BD_K_SCALE_SIZE + (q5 ? BD_QK_K / 8 : 0);
        uint64_t sc, m;
        bd_unpack_scales_k4(xb + 4, &sc, &m);
        const __m512i sc16 = k_scales16(sc);
        const __m512i s0 = _mm512_permutexvar_epi16(idx0, sc16), s1 = _mm512_permutexvar_epi16(idx1, sc16);
        const __m512i s2 = _mm512_permutexvar_epi16(idx2, sc16), s3 = _mm512_permutexvar_epi16(idx3, sc16);
        __m512i l0 = k_nibbles(q, shift, low4), l1 = k_nibbles(q + 32, shift, low4);
        __m512i l2 = k_nibbles(q + 64, shift, low4), l3 = k_nibbles(q + 96, shift, low4);
        if (q5) {
            /* The 5th bit of sub-block j is bit j of the qh byte at the level's position. */
            const __m512i hh = _mm512_broadcast_i64x4(bd_load32(xb + 4 + BD_K_SCALE_SIZE));
            const __m512i bit1 = _mm512_slli_epi16(bit0, 2), bit2 = _mm512_slli_epi16(bit0, 4);
            const __m512i bit3 = _mm512_slli_epi16(bit0, 6);
            l0 = _mm512_mask_add_epi8(l0, _mm512_test_epi8_mask(hh, bit0), l0, sixteen);
            l1 = _mm512_mask_add_epi8(l1, _mm512_test_epi8_mask(hh, bit1), l1, sixteen);
            l2 = _mm512_mask_add_epi8(l2, _mm512_test_epi8_mask(hh, bit2), l2, sixteen);
            l3 = _mm512_mask_add_epi8(l3, _mm512_test_epi8_mask(hh, bit3), l3, sixteen);
        }
        uint32_t d_dmin;
        memcpy(&d_dmin, xb, sizeof d_dmin);
        const __m128 xdd = _mm_cvtph_ps(_mm_cvtsi32_si128((int)d_dmin)); /* d and dmin are adjacent halves */
        const __m128i m8 = _mm_cvtsi64_si128((long long)m);
        const __m256i m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8)); /* each min twice: 2 groups of 16 */
        for (int j = 0; j < ny; j++) {
            const bd_block_q8_K *y = (const bd_block_q8_K *)(yb + (size_t)j * by) + i;
            const int8_t *a = y->qs;
            /* Two accumulation chains, to halve the dependency on vpdpwssd's latency. */
            __m512i t0 = _mm512_madd_epi16(_mm512_maddubs_epi16(l0, load64(a)), s0);
            __m512i t1 = _mm512_madd_epi16(_mm512_maddubs_epi16(l1, load64(a + 64)), s1);
            t0 = _mm512_dpwssd_epi32(t0, _mm512_maddubs_epi16(l2, load64(a + 128)), s2);
            t1 = _mm512_dpwssd_epi32(t1, _mm512_maddubs_epi16(l3, load64(a + 192)), s3);
            const __m512i t = _mm512_add_epi32(t0, t1);
            const __m256i t8 = _mm256_add_epi32(_mm512_castsi512_si256(t), _mm512_extracti64x4_epi64(t, 1));
            /* d * y.d and -(dmin * y.d) */
            const __m128 dd = _mm_xor_ps(_mm_mul_ps(xdd, _mm_set1_ps(y->d)), _mm_setr_ps(0.0f, -0.0f, 0.0f, 0.0f));
            acc[j] = _mm256_fmadd_ps(_mm256_broadcastss_ps(dd), _mm256_cvtepi32_ps(t8), acc[j]);
            const __m256i mm = _mm256_madd_epi16(bd_load32(y->bsums), m16); /* lane k: min k times its 32 levels */
            const __m128i m4 = _mm_hadd_epi32(_mm256_castsi256_si128(mm), _mm256_extracti128_si256(mm, 1));
            if (q5) {
                const __m128i m2 = _mm_add_epi32(m4, _mm_unpackhi_epi64(m4, m4));
                const int msum = _mm_cvtsi128_si32(_mm_add_epi32(m2, _mm_shuffle_epi32(m2, 1)));
                summ[j] = _mm_cvtss_f32(_mm_fmadd_ss(_mm_movehdup_ps(dd), _mm_cvtsi32_ss(dd, msum), _mm_set_ss(summ[j])));
            } else {
                macc[j] = _mm_fmadd_ps(_mm_permute_ps(dd, 0x55), _mm_cvtepi32_ps(m4), macc[j]);
            }
        }
    }
    for (int j = 0; j < ny; j++) s[j * bs] = bd_hsum8(acc[j]) + (q5 ? summ[j] : bd_hsum4(macc[j]));
}

AVX512 static void dot_q4_K_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    dot_k45_n(n / BD_QK_K, vx, sizeof(bd_block_q4_K), vy, 0, 1, s, 0, 0);
}

AVX512 static void dot_q5_K_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    dot_k45_n(n / BD_QK_K, vx, sizeof(bd_block_q5_K), vy, 0, 1, s, 0, 1);
}

AVX512 static void dot_q4_K_q8_K_n(int64_t n, float *s, size_t bs, const void *vx, const void *vy, size_t by, int ny) {
#define CALL(k) dot_k45_n(n / BD_QK_K, vx, sizeof(bd_block_q4_K), vy, by, k, s, bs, 0)
    DOT_N_SWITCH(CALL)
#undef CALL
}

AVX512 static void dot_q5_K_q8_K_n(int64_t n, float *s, size_t bs, const void *vx, const void *vy, size_t by, int ny) {
#define CALL(k) dot_k45_n(n / BD_QK_K, vx, sizeof(bd_block_q5_K), vy, by, k, s, bs, 1)
    DOT_N_SWITCH(CALL)
#undef CALL
}

AVX512 static INLINE void dot_q6_K_n(int64_t n, const bd_block_q6_K *x, const uint8_t *yb, size_t by, int ny, float *s,
                                     size_t bs) {
    const __m512i low4 = _mm512_set1_epi8(0x0F), top2 = _mm512_set1_epi8(0x30);
    /* vpermw indices spreading 4 scales over 32 int16 lanes, 8 each (the sub-blocks of 16 of 64 levels). */
    const __m512i spread0 = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1,
                                             0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i four = _mm512_set1_epi16(4);
    const __m512i shift2 = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_setzero_si512(), _mm512_set1_epi16(2));
    __m256 acc[BD_DOT_MAX_NY];
    for (int j = 0; j < ny; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / BD_QK_K; i++) {
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[i].scales));
        const __m512i scz = _mm512_castsi256_si512(sc16);
        __m512i lv[4], sv[4]; /* levels 0..63 and scale lanes for the 4 runs of 64 levels */
        __m512i idx = spread0;
        for (int h = 0; h < 2; h++, ql += 64, qh += 32) {
            const __m512i l = load64(ql);
            /* Low half: qh bits 0-1 (levels 0..31 of this half); high half: bits 2-3 (levels 32..63). Bits 4-5
             * of the same vector are those of levels 64..95 and 96..127. */
            const __m512i hz = _mm512_srlv_epi16(_mm512_broadcast_i64x4(bd_load32(qh)), shift2);
            lv[2 * h] = _mm512_or_si512(_mm512_and_si512(l, low4), _mm512_and_si512(_mm512_slli_epi16(hz, 4), top2));
            lv[2 * h + 1] =
                _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), low4), _mm512_and_si512(hz, top2));
            sv[2 * h] = _mm512_permutexvar_epi16(idx, scz);
            idx = _mm512_add_epi16(idx, four);
            sv[2 * h + 1] = _mm512_permutexvar_epi16(idx, scz);
            idx = _mm512_add_epi16(idx, four);
        }
        const float xd = bd_h2f(x[i].d);
        for (int j = 0; j < ny; j++) {
            const bd_block_q8_K *y = (const bd_block_q8_K *)(yb + (size_t)j * by) + i;
            const int8_t *a = y->qs;
            __m512i isum = _mm512_setzero_si512();
            for (int r = 0; r < 4; r++)
                isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(lv[r], load64(a + 64 * r)), sv[r]);
            /* Fold to ggml's 8 lanes (k: elements with (e % 32) / 4 == k), minus the -32 offset of every level
             * as ggml spreads it: lane k gets 32 * (sc[2k] * bsums[2k] + sc[2k+1] * bsums[2k+1]). */
            __m256i i8 = _mm256_add_epi32(_mm512_castsi512_si256(isum), _mm512_extracti64x4_epi64(isum, 1));
            i8 = _mm256_sub_epi32(i8, _mm256_slli_epi32(_mm256_madd_epi16(sc16, bd_load32(y->bsums)), 5));
            acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(xd * y->d), _mm256_cvtepi32_ps(i8), acc[j]);
        }
    }
    for (int j = 0; j < ny; j++) s[j * bs] = bd_hsum8(acc[j]);
}

AVX512 static void dot_q6_K_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    dot_q6_K_n(n, vx, vy, 0, 1, s, 0);
}

AVX512 static void dot_q6_K_q8_K_n(int64_t n, float *s, size_t bs, const void *vx, const void *vy, size_t by, int ny) {
#define CALL(k) dot_q6_K_n(n, vx, vy, by, k, s, bs)
    DOT_N_SWITCH(CALL)
#undef CALL
}

void bd_dot_fill_avx512(bd_dot_traits t[BD_TYPE_COUNT]) {
    t[BD_TYPE_F32].vec_dot = dot_f32;
    t[BD_TYPE_F16].vec_dot = dot_f16;
    t[BD_TYPE_F16].from_float = to_fp16_act;
    t[BD_TYPE_BF16].vec_dot = bd_cpu_get()->avx512bf16 ? dot_bf16_native : dot_bf16;
    t[BD_TYPE_Q8_0].vec_dot_n = dot_q8_0_q8_0_n;
    t[BD_TYPE_Q8_0].vec_dot = dot_q8_0_q8_0;
    t[BD_TYPE_Q4_0].vec_dot = dot_q4_0_q8_0;
    t[BD_TYPE_Q4_K].vec_dot = dot_q4_K_q8_K;
    t[BD_TYPE_Q5_K].vec_dot = dot_q5_K_q8_K;
    t[BD_TYPE_Q6_K].vec_dot = dot_q6_K_q8_K;
    t[BD_TYPE_Q4_K].vec_dot_n = dot_q4_K_q8_K_n;
    t[BD_TYPE_Q5_K].vec_dot_n = dot_q5_K_q8_K_n;
    t[BD_TYPE_Q6_K].vec_dot_n = dot_q6_K_q8_K_n;
}
