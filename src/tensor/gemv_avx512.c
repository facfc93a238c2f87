/* gemv_avx512.c — gemv kernels (gemv.h) for CPUs with AVX-512 F, BW, VL and VNNI (dot.h's avx512 level).
 *
 * Each kernel computes, per weight row, exactly the float operations of the type's vec_dot in dot_avx512.c
 * (same integer lane sums, same scale products, same fused multiply-add chain in block order, same final
 * reduction), so every s[r] has vec_dot's bits; what changes is that several rows advance together:
 *   - Q8_0: ggml's order is one 8-lane chain per row, so two rows share a 512-bit accumulator (row a in the
 *     low 8 lanes, row b in the high 8, lane-wise the same fused multiply-add as a 256-bit chain) and 4 rows
 *     run at once in 2 such accumulators; the activation block is loaded once for all of them and the
 *     per-block scale products are formed 8 blocks at a time.
 *   - F16: 4 rows at once, each with vec_dot's 4 chains of 16 lanes; the activations are widened once.
 *   - Q4_K, Q6_K: the integer work per row as in vec_dot (whole sub-blocks per 256-bit half), then two rows'
 *     folded lanes side by side in one 512-bit float chain; the activation side (Q4_K: regrouped to match
 *     the nibble planes, the bsums in pairs) is prepared once per block for all rows.
 * The weights a group ahead are prefetched, so the run streams at close to the memory bandwidth. */
#include <immintrin.h>
#include <string.h>

#include "tensor/dot_impl.h"
#include "tensor/lanes_x86.h"
#include "tensor/quant.h"
#include "tensor/types.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define INLINE __attribute__((always_inline)) inline

AVX512 static inline __m512 join_ps(__m256 lo, __m256 hi) {
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}
AVX512 static inline __m256 hi8(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

/* Rows are walked in groups; while a group is computed, the same bytes of the next group are prefetched into
 * L2 (a row group is a few KiB to a few tens of KiB: far enough to cover the memory latency, near enough to
 * stay in L2; two groups ahead measured the same on one thread and worse with both threads streaming). Prefetches past the end of the matrix are harmless (they never fault). */
#define GEMV_PF_GROUPS 1

/* ---- Q8_0 ---------------------------------------------------------------------------------------------- */

/* 2P rows (rp[0..2P), rows may repeat) against the Q8_0 activations y (nb blocks); results to out[0..2P). */
AVX512 static INLINE void q8_0_rows(int64_t nb, const uint8_t *const *rp, const bd_block_q8_0 *y, float *const *out,
                                    size_t pf, const int P) {
    const __m512i zero = _mm512_setzero_si512(), one = _mm512_set1_epi32(1);
    const __m512i idx0 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 8, 8, 8, 8, 8, 8, 8, 8);
    __m512 acc[2];
    for (int p = 0; p < P; p++) acc[p] = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        const __m256 yd = bd_scales8((const uint8_t *)&y[b].d, sizeof *y);
        __m512 dp[2]; /* lanes 0..7: row a's d products of the 8 blocks, lanes 8..15: row b's */
        for (int p = 0; p < P; p++) {
            const bd_block_q8_0 *wa = (const bd_block_q8_0 *)rp[2 * p] + b;
            const bd_block_q8_0 *wb = (const bd_block_q8_0 *)rp[2 * p + 1] + b;
            dp[p] = join_ps(_mm256_mul_ps(bd_scales8((const uint8_t *)&wa->d, sizeof *wa), yd),
                            _mm256_mul_ps(bd_scales8((const uint8_t *)&wb->d, sizeof *wb), yd));
            if (pf) {
                for (int l = 0; l < 5; l++) {
                    _mm_prefetch((const char *)wa + pf + 64 * l, _MM_HINT_T1);
                    _mm_prefetch((const char *)wb + pf + 64 * l, _MM_HINT_T1);
                }
            }
        }
        __m512i idx = idx0;
        for (int k = 0; k < 8; k++, idx = _mm512_add_epi32(idx, one)) {
            const __m512i yv = _mm512_broadcast_i64x4(bd_load32(y[b + k].qs));
            for (int p = 0; p < P; p++) {
                const bd_block_q8_0 *wa = (const bd_block_q8_0 *)rp[2 * p] + b + k;
                const bd_block_q8_0 *wb = (const bd_block_q8_0 *)rp[2 * p + 1] + b + k;
                const __m512i wv = bd_join256(bd_load32(wa->qs), bd_load32(wb->qs));
                /* |w| (unsigned) times y carrying w's sign: 4 exact products per 32-bit lane, as vec_dot. */
                const __m512i sy = _mm512_mask_sub_epi8(yv, _mm512_movepi8_mask(wv), zero, yv);
                const __m512i prod = _mm512_dpbusd_epi32(zero, _mm512_abs_epi8(wv), sy);
                acc[p] = _mm512_fmadd_ps(_mm512_permutexvar_ps(idx, dp[p]), _mm512_cvtepi32_ps(prod), acc[p]);
            }
        }
    }
    for (; b < nb; b++) {
        const __m512i yv = _mm512_broadcast_i64x4(bd_load32(y[b].qs));
        const float yd = bd_h2f(y[b].d);
        for (int p = 0; p < P; p++) {
            const bd_block_q8_0 *wa = (const bd_block_q8_0 *)rp[2 * p] + b;
            const bd_block_q8_0 *wb = (const bd_block_q8_0 *)rp[2 * p + 1] + b;
            const __m512i wv = bd_join256(bd_load32(wa->qs), bd_load32(wb->qs));
            const __m512i sy = _mm512_mask_sub_epi8(yv, _mm512_movepi8_mask(wv), zero, yv);
            const __m512i prod = _mm512_dpbusd_epi32(zero, _mm512_abs_epi8(wv), sy);
            const __m512 d = join_ps(_mm256_set1_ps(bd_h2f(wa->d) * yd), _mm256_set1_ps(bd_h2f(wb->d) * yd));
            acc[p] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(prod), acc[p]);
        }
    }
    for (int p = 0; p < P; p++) {
        *out[2 * p] = bd_hsum8(_mm512_castps512_ps256(acc[p]));
        *out[2 * p + 1] = bd_hsum8(hi8(acc[p]));
    }
}

AVX512 static void gemv_q8_0(int64_t n, float *s, const void *w, size_t wrow, int64_t nrows, const void *xq) {
    const int64_t nb = n / BD_QK8_0;
    const uint8_t *W = w;
    const bd_block_q8_0 *y = xq;
    int64_t r = 0;
    /* 4 rows at a time, not 8: the computation per byte is the same, but with 8 rows in flight (and the 8 rows
     * after them being prefetched) the loop streamed ~25% slower from memory on Zen 5 (one thread and two,
     * 165 MB of weights), slower than the AVX2 kernel's 4 rows */
    for (; r + 4 <= nrows; r += 4) {
        const uint8_t *rp[4];
        float *out[4];
        for (int i = 0; i < 4; i++) rp[i] = W + (size_t)(r + i) * wrow, out[i] = s + r + i;
        q8_0_rows(nb, rp, y, out, GEMV_PF_GROUPS * 4 * wrow, 2);
    }
    /* the last 1..3 rows: pairs, the odd one paired with itself */
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
        for (int j = 0; j < 4; j++) yv[j] = _mm512_cvtph_ps(bd_load32(y + i + 16 * j));
        for (int r = 0; r < R; r++) {
            if (pf) {
                _mm_prefetch((const char *)(rp[r] + i) + pf, _MM_HINT_T1);
                _mm_prefetch((const char *)(rp[r] + i) + pf + 64, _MM_HINT_T1);
            }
            for (int j = 0; j < 4; j++) a[r][j] = _mm512_fmadd_ps(_mm512_cvtph_ps(bd_load32(rp[r] + i + 16 * j)), yv[j], a[r][j]);
        }
    }
    for (int r = 0; r < R; r++) {
        const float red = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a[r][0], a[r][2]), _mm512_add_ps(a[r][1], a[r][3])));
        double sum = red;
        for (int64_t i = np; i < n; i++) sum += (double)(bd_h2f(rp[r][i]) * bd_h2f(y[i]));
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

/* ---- K-quants against Q8_K ------------------------------------------------------------------------------
 * vec_dot's order (dot.h): per block 8 int32 lanes, lane k summing the elements e with (e % 32) / 4 == k, one
 * fused multiply-add per block into an 8-lane chain (Q4_K: plus a 4-lane chain of the mins). Integer sums are
 * exact, so how they are formed is free: here each 32-byte half of a 512-bit vector holds one whole sub-block
 * (element e at byte e % 32 of its half), which gives the lane split after adding the two halves. Two rows
 * share the float work: their folded lanes sit side by side in one 512-bit vector [row a | row b]. */

/* Q4_K / Q8_K activations of one block as 4 vectors matching the nibble planes below: [sb0|sb2], [sb1|sb3],
 * [sb4|sb6], [sb5|sb7] (sbj = the 32 activations of sub-block j). */
AVX512 static inline void q4_K_act(const int8_t *a, __m512i *Y) {
    Y[0] = bd_join256(bd_load32(a), bd_load32(a + 64));
    Y[1] = bd_join256(bd_load32(a + 32), bd_load32(a + 96));
    Y[2] = bd_join256(bd_load32(a + 128), bd_load32(a + 192));
    Y[3] = bd_join256(bd_load32(a + 160), bd_load32(a + 224));
}

/* One Q4_K block's integer sums, 16 lanes (low half: sub-blocks 0, 2, 4, 6; high: 1... folded later):
 * Σ sc[j] * q * y per 4 elements, each half holding whole sub-blocks. qs: the block's 128 nibble bytes. */
AVX512 static inline __m512i q4_K_isum(const uint8_t *qs, uint64_t sc, const __m512i *Y, __m512i low4,
                                       const __m512i *ix) {
    const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc)));
    const __m512i v01 = _mm512_loadu_si512(qs), v23 = _mm512_loadu_si512(qs + 64);
    /* low nibbles of chunks 0|1 are sub-blocks 0|2, high nibbles 1|3; chunks 2|3 give 4|6 and 5|7 */
    const __m512i A = _mm512_and_si512(v01, low4), B = _mm512_and_si512(_mm512_srli_epi16(v01, 4), low4);
    const __m512i C = _mm512_and_si512(v23, low4), D = _mm512_and_si512(_mm512_srli_epi16(v23, 4), low4);
    __m512i t0 = _mm512_madd_epi16(_mm512_maddubs_epi16(A, Y[0]), _mm512_permutexvar_epi16(ix[0], sc16));
    __m512i t1 = _mm512_madd_epi16(_mm512_maddubs_epi16(B, Y[1]), _mm512_permutexvar_epi16(ix[1], sc16));
    t0 = _mm512_dpwssd_epi32(t0, _mm512_maddubs_epi16(C, Y[2]), _mm512_permutexvar_epi16(ix[2], sc16));
    t1 = _mm512_dpwssd_epi32(t1, _mm512_maddubs_epi16(D, Y[3]), _mm512_permutexvar_epi16(ix[3], sc16));
    return _mm512_add_epi32(t0, t1);
}

/* [a.lo + a.hi | b.lo + b.hi]: two rows' 16 lanes folded to vec_dot's 8 each. */
AVX512 static inline __m512i fold_pair(__m512i a, __m512i b) {
    return _mm512_add_epi32(_mm512_shuffle_i64x2(a, b, 0x44), _mm512_shuffle_i64x2(a, b, 0xEE));
}

/* 2P Q4_K rows (rp, rows may repeat) against Q8_K activations y (nb blocks). */
/* The activation side of a Q4_K product, once per block for all rows: q4_K_act's 4 vectors, the bsums in pairs
 * as int16 (one per sub-block of 32, for vpmaddwd with the mins), and the scale. */
typedef struct {
    __m512i Y[4];
    __m128i bs2;
    float d;
} q4_K_prep;

AVX512 static inline void q4_K_prepare(const bd_block_q8_K *y, q4_K_prep *pp) {
    q4_K_act(y->qs, pp->Y);
    pp->bs2 = _mm256_cvtepi32_epi16(_mm256_madd_epi16(bd_load32(y->bsums), _mm256_set1_epi16(1)));
    pp->d = y->d;
}

/* 2P Q4_K rows against Q8_K activations y, or (prep not NULL) their prepared form. */
AVX512 static INLINE void q4_K_rows(int64_t nb, const uint8_t *const *rp, const bd_block_q8_K *y, const q4_K_prep *prep,
                                    float *const *out, size_t pf, const int P) {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    /* vpermw indices: the scales of the two sub-blocks each vector holds, 16 int16 lanes each */
    const __m512i lohi = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_setzero_si512(), _mm512_set1_epi16(2));
    const __m512i ix[4] = {lohi, _mm512_add_epi16(lohi, _mm512_set1_epi16(1)),
                           _mm512_add_epi16(lohi, _mm512_set1_epi16(4)), _mm512_add_epi16(lohi, _mm512_set1_epi16(5))};
    /* from [da, dma, db, dmb]: da in lanes 0..7 and db in 8..15; dma in 0..3, dmb in 4..7 */
    const __m512i d_idx = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2);
    const __m256i m_idx = _mm256_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3);
    __m512 acc[2];
    __m256 macc[2]; /* [row a's 4 min lanes | row b's] */
    for (int p = 0; p < P; p++) acc[p] = _mm512_setzero_ps(), macc[p] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        q4_K_prep local;
        const q4_K_prep *pp = prep ? prep + i : &local;
        if (!prep) q4_K_prepare(y + i, &local);
        const __m512i *Y = pp->Y;
        const __m128i bs2 = pp->bs2;
        const __m128 yd = _mm_set1_ps(pp->d);
        for (int p = 0; p < P; p++) {
            const uint8_t *xa = rp[2 * p] + (size_t)i * sizeof(bd_block_q4_K);
            const uint8_t *xb = rp[2 * p + 1] + (size_t)i * sizeof(bd_block_q4_K);
            if (pf) {
                for (int l = 0; l < 3; l++) {
                    _mm_prefetch((const char *)xa + pf + 64 * l, _MM_HINT_T1);
                    _mm_prefetch((const char *)xb + pf + 64 * l, _MM_HINT_T1);
                }
            }
            uint64_t sca, ma, scb, mb;
            bd_unpack_scales_k4(xa + 4, &sca, &ma);
            bd_unpack_scales_k4(xb + 4, &scb, &mb);
            uint32_t dda, ddb;
            memcpy(&dda, xa, 4);
            memcpy(&ddb, xb, 4);
            /* [d_a, dmin_a, d_b, dmin_b] * y.d: vec_dot's d and (before its sign) dm of each row */
            const __m128 dd = _mm_mul_ps(_mm_cvtph_ps(_mm_set_epi32(0, 0, (int)ddb, (int)dda)), yd);
            const __m512i F = fold_pair(q4_K_isum(xa + 16, sca, Y, low4, ix), q4_K_isum(xb + 16, scb, Y, low4, ix));
            acc[p] = _mm512_fmadd_ps(_mm512_permutexvar_ps(d_idx, _mm512_castps128_ps512(dd)), _mm512_cvtepi32_ps(F),
                                     acc[p]);
            /* lane k: m[2k] * bs2[2k] + m[2k+1] * bs2[2k+1]; fma with -dm == fnmadd with dm (exact negation) */
            const __m128i m4a = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)ma)), bs2);
            const __m128i m4b = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)mb)), bs2);
            macc[p] = _mm256_fnmadd_ps(_mm256_permutevar8x32_ps(_mm256_castps128_ps256(dd), m_idx),
                                       _mm256_cvtepi32_ps(_mm256_set_m128i(m4b, m4a)), macc[p]);
        }
    }
    for (int p = 0; p < P; p++) {
        const __m128 ma4 = _mm256_castps256_ps128(macc[p]), mb4 = _mm256_extractf128_ps(macc[p], 1);
        *out[2 * p] = bd_hsum8(_mm512_castps512_ps256(acc[p])) + bd_hsum4(ma4);
        *out[2 * p + 1] = bd_hsum8(hi8(acc[p])) + bd_hsum4(mb4);
    }
}

enum { Q4_K_PREP_MAX = 64 }; /* blocks prepared on the stack (K <= 16384; longer rows prepare per row pair) */

AVX512 static void gemv_q4_K(int64_t n, float *s, const void *w, size_t wrow, int64_t nrows, const void *xq) {
    const int64_t nb = n / BD_QK_K;
    const uint8_t *W = w;
    const bd_block_q8_K *y = xq;
    q4_K_prep prep_buf[Q4_K_PREP_MAX];
    const q4_K_prep *prep = NULL;
    if (nb <= Q4_K_PREP_MAX && nrows > 2) {
        for (int64_t i = 0; i < nb; i++) q4_K_prepare(y + i, &prep_buf[i]);
        prep = prep_buf;
    }
    int64_t r = 0;
    for (; r + 4 <= nrows; r += 4) {
        const uint8_t *rp[4];
        float *out[4];
        for (int i = 0; i < 4; i++) rp[i] = W + (size_t)(r + i) * wrow, out[i] = s + r + i;
        q4_K_rows(nb, rp, y, prep, out, GEMV_PF_GROUPS * 4 * wrow, 1);
        q4_K_rows(nb, rp + 2, y, prep, out + 2, GEMV_PF_GROUPS * 4 * wrow, 1);
    }
    for (; r < nrows; r += 2) {
        const int64_t rb = r + 1 < nrows ? r + 1 : r;
        const uint8_t *rp[2] = {W + (size_t)r * wrow, W + (size_t)rb * wrow};
        float *out[2] = {s + r, s + rb};
        q4_K_rows(nb, rp, y, prep, out, 0, 1);
    }
}

/* One Q6_K block's integer sums (16 lanes, each half whole sub-blocks of 32), minus nothing yet. */
AVX512 static inline __m512i q6_K_isum(const bd_block_q6_K *x, const int8_t *a, __m512i low4, __m512i top2,
                                       __m512i shift2, const __m512i *spread) {
    const __m512i scz = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales)));
    __m512i isum = _mm512_setzero_si512();
    for (int h = 0; h < 2; h++) {
        const __m512i l = _mm512_loadu_si512(x->ql + 64 * h);
        /* low half: qh bits 0-1 (levels 0..31 of this half of the block), high half: bits 2-3 (32..63); bits
         * 4-5 of the same vector are those of levels 64..95 and 96..127 */
        const __m512i hz = _mm512_srlv_epi16(_mm512_broadcast_i64x4(bd_load32(x->qh + 32 * h)), shift2);
        const __m512i l0 = _mm512_or_si512(_mm512_and_si512(l, low4), _mm512_and_si512(_mm512_slli_epi16(hz, 4), top2));
        const __m512i l1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), low4), _mm512_and_si512(hz, top2));
        isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(l0, _mm512_loadu_si512(a + 128 * h)),
                                   _mm512_permutexvar_epi16(spread[2 * h], scz));
        isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(l1, _mm512_loadu_si512(a + 128 * h + 64)),
                                   _mm512_permutexvar_epi16(spread[2 * h + 1], scz));
    }
    return isum;
}

/* 2P Q6_K rows against Q8_K activations y. */
AVX512 static INLINE void q6_K_rows(int64_t nb, const uint8_t *const *rp, const bd_block_q8_K *y, float *const *out,
                                    size_t pf, const int P) {
    const __m512i low4 = _mm512_set1_epi8(0x0F), top2 = _mm512_set1_epi8(0x30);
    const __m512i shift2 = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_setzero_si512(), _mm512_set1_epi16(2));
    /* vpermw indices spreading 4 scales over 32 int16 lanes, 8 each (the sub-blocks of 16 of 64 levels) */
    const __m512i s0 = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0,
                                        0, 0, 0, 0, 0, 0);
    const __m512i four = _mm512_set1_epi16(4);
    const __m512i spread[4] = {s0, _mm512_add_epi16(s0, four), _mm512_add_epi16(s0, _mm512_set1_epi16(8)),
                               _mm512_add_epi16(s0, _mm512_set1_epi16(12))};
    __m512 acc[2];
    for (int p = 0; p < P; p++) acc[p] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m256i bs = bd_load32(y[i].bsums);
        for (int p = 0; p < P; p++) {
            const bd_block_q6_K *xa = (const bd_block_q6_K *)rp[2 * p] + i, *xb = (const bd_block_q6_K *)rp[2 * p + 1] + i;
            if (pf) {
                for (int l = 0; l < 4; l++) {
                    _mm_prefetch((const char *)xa + pf + 64 * l, _MM_HINT_T1);
                    _mm_prefetch((const char *)xb + pf + 64 * l, _MM_HINT_T1);
                }
            }
            __m512i F = fold_pair(q6_K_isum(xa, y[i].qs, low4, top2, shift2, spread),
                                  q6_K_isum(xb, y[i].qs, low4, top2, shift2, spread));
            /* the -32 offset as vec_dot spreads it: lane k gets 32 * (sc[2k] * bs[2k] + sc[2k+1] * bs[2k+1]) */
            const __m256i oa = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)xa->scales)), bs);
            const __m256i ob = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)xb->scales)), bs);
            F = _mm512_sub_epi32(F, _mm512_slli_epi32(bd_join256(oa, ob), 5));
            const __m512 d = join_ps(_mm256_set1_ps(bd_h2f(xa->d) * y[i].d), _mm256_set1_ps(bd_h2f(xb->d) * y[i].d));
            acc[p] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(F), acc[p]);
        }
    }
    for (int p = 0; p < P; p++) {
        *out[2 * p] = bd_hsum8(_mm512_castps512_ps256(acc[p]));
        *out[2 * p + 1] = bd_hsum8(hi8(acc[p]));
    }
}

AVX512 static void gemv_q6_K(int64_t n, float *s, const void *w, size_t wrow, int64_t nrows, const void *xq) {
    const int64_t nb = n / BD_QK_K;
    const uint8_t *W = w;
    int64_t r = 0;
    for (; r + 4 <= nrows; r += 4) {
        const uint8_t *rp[4];
        float *out[4];
        for (int i = 0; i < 4; i++) rp[i] = W + (size_t)(r + i) * wrow, out[i] = s + r + i;
        q6_K_rows(nb, rp, xq, out, GEMV_PF_GROUPS * 4 * wrow, 2);
    }
    for (; r < nrows; r += 2) {
        const int64_t rb = r + 1 < nrows ? r + 1 : r;
        const uint8_t *rp[2] = {W + (size_t)r * wrow, W + (size_t)rb * wrow};
        float *out[2] = {s + r, s + rb};
        q6_K_rows(nb, rp, xq, out, 0, 1);
    }
}

void bd_gemv_fill_avx512(bd_dot_traits t[BD_TYPE_COUNT]) {
    t[BD_TYPE_Q8_0].gemv = gemv_q8_0;
    t[BD_TYPE_F16].gemv = gemv_f16;
    t[BD_TYPE_Q4_K].gemv = gemv_q4_K;
    t[BD_TYPE_Q6_K].gemv = gemv_q6_K;
}
