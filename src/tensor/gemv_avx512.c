/* gemv_avx512.c — gemv kernels (gemv.h) for CPUs with AVX-512 F, BW, VL and VNNI (dot.h's avx512 level).
 *
 * Each kernel computes, per weight row, exactly the float operations of the type's vec_dot in dot_avx512.c
 * (same integer lane sums, same scale products, same fused multiply-add chain in block order, same final
 * reduction), so every s[r] has vec_dot's bits; what changes is that several rows advance together:
 *   - Q8_0: ggml's order is one 8-lane chain per row, so two rows share a 512-bit accumulator (row a in the
 *     low 8 lanes, row b in the high 8, lane-wise the same fused multiply-add as a 256-bit chain) and 8 rows
 *     run at once in 4 such accumulators; the activation block is loaded once for all of them and the
 *     per-block scale products are formed 8 blocks at a time.
 *   - F16: 4 rows at once, each with vec_dot's 4 chains of 16 lanes; the activations are widened once.
 * The weights a group ahead are prefetched, so the run streams at close to the memory bandwidth. */
#include <immintrin.h>
#include <string.h>

#include "tensor/gemv_impl.h"
#include "tensor/quant.h"
#include "tensor/types.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define INLINE __attribute__((always_inline)) inline

AVX512 static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }
AVX512 static inline __m256i load32(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
AVX512 static inline __m512i join(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
AVX512 static inline __m512 join_ps(__m256 lo, __m256 hi) {
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}
AVX512 static inline __m256 hi8(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

/* vec_dot's 8-lane reduction: (lo128 + hi128), then the high pair onto the low pair, then lane 0 + lane 1. */
AVX512 static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The fp16 scales of 8 blocks (the first at p, the others stride bytes apart) as 8 floats. */
AVX512 static inline __m256 scales8(const uint8_t *p, size_t stride) {
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

/* Rows are walked in groups; while a group is computed, the same bytes of the group GEMV_PF_GROUPS ahead are
 * prefetched into L2 (a row group of a few KiB to a few tens of KiB: far enough to cover the memory latency,
 * near enough to stay in L2). Prefetches past the end of the matrix are harmless (they never fault). */
#define GEMV_PF_GROUPS 2

/* ---- Q8_0 ---------------------------------------------------------------------------------------------- */

/* 2P rows (rp[0..2P), rows may repeat) against the Q8_0 activations y (nb blocks); results to out[0..2P). */
AVX512 static INLINE void q8_0_rows(int64_t nb, const uint8_t *const *rp, const bd_block_q8_0 *y, float *const *out,
                                    size_t pf, const int P) {
    const __m512i zero = _mm512_setzero_si512(), one = _mm512_set1_epi32(1);
    const __m512i idx0 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 8, 8, 8, 8, 8, 8, 8, 8);
    __m512 acc[4];
    for (int p = 0; p < P; p++) acc[p] = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        const __m256 yd = scales8((const uint8_t *)&y[b].d, sizeof *y);
        __m512 dp[4]; /* lanes 0..7: row a's d products of the 8 blocks, lanes 8..15: row b's */
        for (int p = 0; p < P; p++) {
            const bd_block_q8_0 *wa = (const bd_block_q8_0 *)rp[2 * p] + b;
            const bd_block_q8_0 *wb = (const bd_block_q8_0 *)rp[2 * p + 1] + b;
            dp[p] = join_ps(_mm256_mul_ps(scales8((const uint8_t *)&wa->d, sizeof *wa), yd),
                            _mm256_mul_ps(scales8((const uint8_t *)&wb->d, sizeof *wb), yd));
            if (pf) {
                for (int l = 0; l < 5; l++) {
                    _mm_prefetch((const char *)wa + pf + 64 * l, _MM_HINT_T1);
                    _mm_prefetch((const char *)wb + pf + 64 * l, _MM_HINT_T1);
                }
            }
        }
        __m512i idx = idx0;
        for (int k = 0; k < 8; k++, idx = _mm512_add_epi32(idx, one)) {
            const __m512i yv = _mm512_broadcast_i64x4(load32(y[b + k].qs));
            for (int p = 0; p < P; p++) {
                const bd_block_q8_0 *wa = (const bd_block_q8_0 *)rp[2 * p] + b + k;
                const bd_block_q8_0 *wb = (const bd_block_q8_0 *)rp[2 * p + 1] + b + k;
                const __m512i wv = join(load32(wa->qs), load32(wb->qs));
                /* |w| (unsigned) times y carrying w's sign: 4 exact products per 32-bit lane, as vec_dot. */
                const __m512i sy = _mm512_mask_sub_epi8(yv, _mm512_movepi8_mask(wv), zero, yv);
                const __m512i prod = _mm512_dpbusd_epi32(zero, _mm512_abs_epi8(wv), sy);
                acc[p] = _mm512_fmadd_ps(_mm512_permutexvar_ps(idx, dp[p]), _mm512_cvtepi32_ps(prod), acc[p]);
            }
        }
    }
    for (; b < nb; b++) {
        const __m512i yv = _mm512_broadcast_i64x4(load32(y[b].qs));
        const float yd = h2f(y[b].d);
        for (int p = 0; p < P; p++) {
            const bd_block_q8_0 *wa = (const bd_block_q8_0 *)rp[2 * p] + b;
            const bd_block_q8_0 *wb = (const bd_block_q8_0 *)rp[2 * p + 1] + b;
            const __m512i wv = join(load32(wa->qs), load32(wb->qs));
            const __m512i sy = _mm512_mask_sub_epi8(yv, _mm512_movepi8_mask(wv), zero, yv);
            const __m512i prod = _mm512_dpbusd_epi32(zero, _mm512_abs_epi8(wv), sy);
            const __m512 d = join_ps(_mm256_set1_ps(h2f(wa->d) * yd), _mm256_set1_ps(h2f(wb->d) * yd));
            acc[p] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(prod), acc[p]);
        }
    }
    for (int p = 0; p < P; p++) {
        *out[2 * p] = hsum256(_mm512_castps512_ps256(acc[p]));
        *out[2 * p + 1] = hsum256(hi8(acc[p]));
    }
}

AVX512 static void gemv_q8_0(int64_t n, float *s, const void *w, size_t wrow, int64_t nrows, const void *xq) {
    const int64_t nb = n / BD_QK8_0;
    const uint8_t *W = w;
    const bd_block_q8_0 *y = xq;
    int64_t r = 0;
    for (; r + 8 <= nrows; r += 8) {
        const uint8_t *rp[8];
        float *out[8];
        for (int i = 0; i < 8; i++) rp[i] = W + (size_t)(r + i) * wrow, out[i] = s + r + i;
        q8_0_rows(nb, rp, y, out, GEMV_PF_GROUPS * 8 * wrow, 4);
    }
    /* the last 1..7 rows: pairs, the odd one paired with itself */
    for (; r < nrows; r += 2) {
        const int64_t rb = r + 1 < nrows ? r + 1 : r;
        const uint8_t *rp[2] = {W + (size_t)r * wrow, W + (size_t)rb * wrow};
        float *out[2] = {s + r, s + rb};
        q8_0_rows(nb, rp, y, out, 0, 1);
    }
}

/* ---- F16 ----------------------------------------------------------------------------------------------- */

/* R rows (rp[0..R)) against F16 activations y: per row vec_dot's 4 chains of 16 lanes over the first n & ~63
 * elements, its reduction, then its tail (added in double, rounded once). */
AVX512 static INLINE void f16_rows(int64_t n, const uint16_t *const *rp, const uint16_t *y, float *const *out, size_t pf,
                                   const int R) {
    __m512 a[4][4];
    for (int r = 0; r < R; r++)
        for (int j = 0; j < 4; j++) a[r][j] = _mm512_setzero_ps();
    const int64_t np = n & ~(int64_t)63;
    for (int64_t i = 0; i < np; i += 64) {
        __m512 yv[4];
        for (int j = 0; j < 4; j++) yv[j] = _mm512_cvtph_ps(load32(y + i + 16 * j));
        for (int r = 0; r < R; r++) {
            if (pf) {
                _mm_prefetch((const char *)(rp[r] + i) + pf, _MM_HINT_T1);
                _mm_prefetch((const char *)(rp[r] + i) + pf + 64, _MM_HINT_T1);
            }
            for (int j = 0; j < 4; j++) a[r][j] = _mm512_fmadd_ps(_mm512_cvtph_ps(load32(rp[r] + i + 16 * j)), yv[j], a[r][j]);
        }
    }
    for (int r = 0; r < R; r++) {
        const float red = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a[r][0], a[r][2]), _mm512_add_ps(a[r][1], a[r][3])));
        double sum = red;
        for (int64_t i = np; i < n; i++) sum += (double)(h2f(rp[r][i]) * h2f(y[i]));
        *out[r] = (float)sum;
    }
}

AVX512 static void gemv_f16(int64_t n, float *s, const void *w, size_t wrow, int64_t nrows, const void *xq) {
    const uint8_t *W = w;
    int64_t r = 0;
    for (; r + 4 <= nrows; r += 4) {
        const uint16_t *rp[4];
        float *out[4];
        for (int i = 0; i < 4; i++) rp[i] = (const uint16_t *)(const void *)(W + (size_t)(r + i) * wrow), out[i] = s + r + i;
        f16_rows(n, rp, xq, out, GEMV_PF_GROUPS * 4 * wrow, 4);
    }
    for (; r < nrows; r++) {
        const uint16_t *rp[1] = {(const uint16_t *)(const void *)(W + (size_t)r * wrow)};
        float *out[1] = {s + r};
        f16_rows(n, rp, xq, out, 0, 1);
    }
}

bd_gemv_fn bd_gemv_avx512(uint32_t type) {
    switch (type) {
    case BD_TYPE_Q8_0: return gemv_q8_0;
    case BD_TYPE_F16: return gemv_f16;
    default: return NULL;
    }
}
