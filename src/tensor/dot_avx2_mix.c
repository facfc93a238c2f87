/* dot_avx2_mix.c — AVX2 dot products and decode gemv kernels (gemv.h) of the types llama.cpp's quantizer
 * mixes in beside the main ones: Q4_1, Q5_0, Q5_1 (x Q8_0 / Q8_1), IQ4_NL, MXFP4 (x Q8_0), Q2_K, Q3_K, IQ4_XS
 * (x Q8_K), and the Q8_1 activation converter.
 *
 * Each keeps exactly the float steps of ggml's x86 vec_dot for the type, which its AVX2 and AVX-512 builds
 * share (dot_scalar.c spells them out): the integer part of a block is computed with the u8 x s8 multiply-add
 * (maddubs; signed weights through the sign trick), exact for these ranges, then converted and fused into the
 * 8-lane chain(s) as ggml does. So every result is bit-identical to the portable version and to ggml
 * (conformance_dot). The vec_dots serve the AVX-512 level too (ggml's AVX-512 builds run these 256-bit paths);
 * its decode gemv kernels are gemv_avx512_mix.c's, two rows per 512-bit register in the same float order. */
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

/* ---- multi-row form ----
 * Each type's dot product is written once, for R weight rows (1..4) against one activation row: the rows
 * advance together block by block, each with exactly the chain(s) of its own vec_dot, the activation block
 * loaded once for all of them. vec_dot is the R = 1 instance and the decode gemv (gemv.h) runs the R = 4 one
 * over a run of rows, so the two give the same bits by construction. While a group of rows is computed the
 * same bytes of the next group (pf bytes further on; 0: none) are prefetched into L2: decode streams every
 * weight once, and the hardware prefetcher alone leaves the memory bandwidth unused (gemv_avx2.c). */

#define INLINE __attribute__((always_inline)) inline
enum { ROWS_MAX = 4 };

/* Prefetches the len bytes at p + pf (a group of rows further on) into L2, a line at a time. */
static INLINE void pf_next(const uint8_t *p, size_t pf, size_t len) {
    if (!pf) return;
    for (size_t o = 0; o < len; o += 64) _mm_prefetch((const char *)(p + pf + o), _MM_HINT_T1);
}

/* ---- block-of-32 formats ---- */

/* Q4_1 / Q5_1 (x Q8_1): acc = fma(d_x * d_y, lanes, acc); the minimum terms fused into one float. */
AVX2 static INLINE void min32_rows(int64_t nb, size_t stride, const uint8_t *const *rp, const bd_block_q8_1 *y,
                                   float *out, size_t pf, const int R, const int q5) {
    __m256 acc[ROWS_MAX];
    float summs[ROWS_MAX];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps(), summs[r] = 0;
    for (int64_t i = 0; i < nb; i++) {
        const __m256i yv = bd_load32(y[i].qs);
        const float yd = bd_h2f(y[i].d), ys = bd_h2f(y[i].s);
        for (int r = 0; r < R; r++) {
            const uint8_t *xb = rp[r] + (size_t)i * stride;
            if ((i & 3) == 0) pf_next(xb, pf, 4 * stride);
            uint16_t d, m;
            memcpy(&d, xb, 2);
            memcpy(&m, xb + 2, 2);
            summs[r] = fmaf(bd_h2f(m), ys, summs[r]);
            __m256i q = nibbles32(xb + (q5 ? 8 : 4));
            if (q5) q = _mm256_or_si256(q, _mm256_and_si256(bits32(xb + 4), _mm256_set1_epi8(0x10)));
            const __m256 isum = _mm256_cvtepi32_ps(dot_us8(q, yv));
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(bd_h2f(d) * yd), isum, acc[r]);
        }
    }
    for (int r = 0; r < R; r++) out[r] = bd_hsum8(acc[r]) + summs[r];
}

/* Q5_0 (x Q8_0): levels q - 16 as signed bytes (0xF0 ored in where the 5th bit is clear), one chain. */
AVX2 static INLINE void q5_0_rows(int64_t nb, const uint8_t *const *rp, const bd_block_q8_0 *y, float *out,
                                  size_t pf, const int R) {
    __m256 acc[ROWS_MAX];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m256i yv = bd_load32(y[i].qs);
        const float yd = bd_h2f(y[i].d);
        for (int r = 0; r < R; r++) {
            const bd_block_q5_0 *x = (const bd_block_q5_0 *)rp[r] + i;
            if ((i & 3) == 0) pf_next((const uint8_t *)x, pf, 4 * sizeof *x);
            const __m256i q = _mm256_or_si256(nibbles32(x->qs), _mm256_andnot_si256(bits32(x->qh), _mm256_set1_epi8((char)0xF0)));
            const __m256 isum = _mm256_cvtepi32_ps(dot_s8(q, yv));
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(bd_h2f(x->d) * yd), isum, acc[r]);
        }
    }
    for (int r = 0; r < R; r++) out[r] = bd_hsum8(acc[r]);
}

/* 32 table values of nibble indices (IQ4_NL, MXFP4, an IQ4_XS sub-block). */
AVX2 static inline __m256i table32(const uint8_t *qs, __m128i values) {
    const __m128i b = _mm_loadu_si128((const __m128i *)qs), m4 = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16(b, 4), m4)),
                            _mm_shuffle_epi8(values, _mm_and_si128(b, m4)));
}

/* The scale of an IQ4_NL (fp16) or MXFP4 (E8M0) block. */
AVX2 static INLINE float table32_d(const uint8_t *xb, int e8m0) {
    if (e8m0) return bd_e8m0_to_fp32_half(xb[0]);
    uint16_t h;
    memcpy(&h, xb, 2);
    return bd_h2f(h);
}

/* IQ4_NL / MXFP4 (x Q8_0): two chains over the pairs of blocks, added before the reduction; an odd last
 * block fused into the sum alone. */
AVX2 static INLINE void table32_rows(int64_t nb, size_t stride, const uint8_t *const *rp, const bd_block_q8_0 *y,
                                     float *out, size_t pf, const int8_t *table, const int R, const int e8m0) {
    const __m128i values = _mm_loadu_si128((const __m128i *)table);
    __m256 acc0[ROWS_MAX], acc1[ROWS_MAX];
    for (int r = 0; r < R; r++) acc0[r] = acc1[r] = _mm256_setzero_ps();
    const int off = e8m0 ? 1 : 2;
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        const __m256i y0 = bd_load32(y[i].qs), y1 = bd_load32(y[i + 1].qs);
        const float yd0 = bd_h2f(y[i].d), yd1 = bd_h2f(y[i + 1].d);
        for (int r = 0; r < R; r++) {
            const uint8_t *xb = rp[r] + (size_t)i * stride;
            if ((i & 3) == 0) pf_next(xb, pf, 4 * stride);
            const __m256i p0 = dot_s8(table32(xb + off, values), y0);
            const __m256i p1 = dot_s8(table32(xb + stride + off, values), y1);
            acc0[r] = _mm256_fmadd_ps(_mm256_set1_ps(yd0 * table32_d(xb, e8m0)), _mm256_cvtepi32_ps(p0), acc0[r]);
            acc1[r] = _mm256_fmadd_ps(_mm256_set1_ps(yd1 * table32_d(xb + stride, e8m0)), _mm256_cvtepi32_ps(p1), acc1[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        float sum = bd_hsum8(_mm256_add_ps(acc0[r], acc1[r]));
        if (i < nb) {
            const uint8_t *xb = rp[r] + (size_t)i * stride;
            const float d = bd_h2f(y[i].d) * table32_d(xb, e8m0);
            int total = 0;
            for (int j = 0; j < 16; j++)
                total += table[xb[off + j] & 0xF] * y[i].qs[j] + table[xb[off + j] >> 4] * y[i].qs[j + 16];
            sum = fmaf(d, (float)total, sum);
        }
        out[r] = sum;
    }
}

/* ---- K-quants against Q8_K ---- */

/* A block's 16 int16 scales, words 0..7 in both 128-bit halves of s[0] and words 8..15 in both of s[1], are
 * picked per 32-element run 4c + j by a byte shuffle of s[c] by run_pick(j): word 2j in the run's first 16
 * elements, 2j + 1 in its last 16. */
AVX2 static INLINE __m256i run_pick(int j) {
    const short lo = (short)(0x0100 + 0x0404 * j), hi = (short)(lo + 0x0202); /* bytes (4j, 4j + 1), (4j + 2, 4j + 3) */
    return _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo));
}
AVX2 static INLINE void split16(__m256i s16, __m256i s[2]) {
    s[0] = _mm256_permute4x64_epi64(s16, 0x44);
    s[1] = _mm256_permute4x64_epi64(s16, 0xEE);
}

/* Q2_K: the mins step, then the levels step, in one chain. The rows of a group run one after the other within
 * a block (as Q3_K's below), their scales unpacked in vector registers. */
AVX2 static INLINE void q2_K_rows(int64_t nb, const uint8_t *const *rp, const bd_block_q8_K *y, float *out, size_t pf,
                                  const int R) {
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m256i pick[4] = {run_pick(0), run_pick(1), run_pick(2), run_pick(3)};
    __m256 acc[ROWS_MAX];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m256i bsums = bd_load32(y[i].bsums);
        for (int r = 0; r < R; r++) {
            const bd_block_q2_K *x = (const bd_block_q2_K *)rp[r] + i;
            pf_next((const uint8_t *)x, pf, sizeof *x);
            const __m128i sm = _mm_loadu_si128((const __m128i *)x->scales);
            const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), m4));
            const __m256i prod = _mm256_madd_epi16(mins, bsums);
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(-y[i].d * bd_h2f(x->dmin)), _mm256_cvtepi32_ps(prod), acc[r]);
            __m256i sc[2];
            split16(_mm256_cvtepu8_epi16(_mm_and_si128(sm, m4)), sc);
            __m256i sumi = _mm256_setzero_si256();
            for (int c = 0; c < 2; c++) {
                const __m256i bits = bd_load32(x->qs + 32 * c);
                for (int j = 0; j < 4; j++) {
                    const __m256i yv = bd_load32(y[i].qs + 128 * c + 32 * j);
                    const __m256i q = _mm256_and_si256(j ? _mm256_srli_epi16(bits, 2 * j) : bits, m3);
                    sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_shuffle_epi8(sc[c], pick[j]), _mm256_maddubs_epi16(q, yv)));
                }
            }
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * bd_h2f(x->d)), _mm256_cvtepi32_ps(sumi), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) out[r] = bd_hsum8(acc[r]);
}

/* Q3_K's 16 scales of a block (sc - 32) as int16 words, vectorised, in split16's layout. Byte j
 * of the low nibbles is scale j (j < 8: low nibble of byte j, else high nibble of byte j - 8); its top two bits
 * are bits 2 * (j / 4) of byte 8 + j % 4: the 32-bit word of bytes 8..11 shifted right by 0, 2, 4, 6 in its four
 * dword lanes puts them in place for j = 0..3, 4..7, 8..11, 12..15. */
AVX2 static inline void q3_K_scales(const uint8_t *sc, __m256i s[2]) {
    uint64_t lo;
    uint32_t hi;
    memcpy(&lo, sc, 8);
    memcpy(&hi, sc + 8, 4);
    const __m128i l = _mm_cvtsi64_si128((long long)lo), m4 = _mm_set1_epi8(0x0F);
    const __m128i low = _mm_unpacklo_epi64(_mm_and_si128(l, m4), _mm_and_si128(_mm_srli_epi16(l, 4), m4));
    const __m128i top = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)hi), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
    const __m128i s8 = _mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi16(top, 4)), _mm_set1_epi8(32));
    split16(_mm256_cvtepi8_epi16(s8), s);
}

/* 4 where bit b of the byte is set, else 0 (b a constant: one shift and one and). */
AVX2 static INLINE __m256i hbit4(__m256i hbits, int b) {
    const __m256i v = b < 2 ? _mm256_slli_epi16(hbits, 2 - b) : b == 2 ? hbits : _mm256_srli_epi16(hbits, b - 2);
    return _mm256_and_si256(v, _mm256_set1_epi8(4));
}

/* Q3_K: levels 0..7 (low two bits, plus 4 where the hmask bit is set) times y, minus 4 * y: q - 4. The
 * activation side of that subtraction (4 * y, pairs) is formed once per block for all rows. The rows of a
 * group run one after the other within a block (a row's scales, high bits and sums stay in registers; the
 * activations are reread from L1), the integer sums of a row being exact in any order. */
AVX2 static INLINE void q3_K_rows(int64_t nb, const uint8_t *const *rp, const bd_block_q8_K *y, float *out, size_t pf,
                                  const int R) {
    const __m256i m3 = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
    const __m256i pick[4] = {run_pick(0), run_pick(1), run_pick(2), run_pick(3)};
    __m256 acc[ROWS_MAX];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        __m256i y4[8];
        for (int k = 0; k < 8; k++) y4[k] = _mm256_maddubs_epi16(four, bd_load32(y[i].qs + 32 * k));
        for (int r = 0; r < R; r++) {
            const bd_block_q3_K *x = (const bd_block_q3_K *)rp[r] + i;
            pf_next((const uint8_t *)x, pf, sizeof *x);
            __m256i sc[2];
            q3_K_scales(x->scales, sc);
            const __m256i hbits = bd_load32(x->hmask);
            __m256i sumi = _mm256_setzero_si256();
            for (int c = 0; c < 2; c++) {
                const __m256i bits = bd_load32(x->qs + 32 * c);
                for (int j = 0; j < 4; j++) {
                    const int b = 4 * c + j;
                    const __m256i yv = bd_load32(y[i].qs + 32 * b);
                    const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * j), m3);
                    const __m256i q = _mm256_or_si256(lo, hbit4(hbits, b)); /* 0..7 */
                    const __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(q, yv), y4[b]);
                    sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_shuffle_epi8(sc[c], pick[j]), p16));
                }
            }
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * bd_h2f(x->d)), _mm256_cvtepi32_ps(sumi), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) out[r] = bd_hsum8(acc[r]);
}

/* IQ4_XS: table values, signed 6-bit scales per 32, one chain. */
AVX2 static INLINE void iq4_xs_rows(int64_t nb, const uint8_t *const *rp, const bd_block_q8_K *y, float *out,
                                    size_t pf, const int R) {
    const __m128i values = _mm_loadu_si128((const __m128i *)bd_kvalues_iq4nl);
    __m256 acc[ROWS_MAX];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        __m256i sumi[ROWS_MAX];
        for (int r = 0; r < R; r++) {
            pf_next(rp[r] + (size_t)i * sizeof(bd_block_iq4_xs), pf, sizeof(bd_block_iq4_xs));
            sumi[r] = _mm256_setzero_si256();
        }
        for (int ib = 0; ib < BD_QK_K / 32; ib++) {
            const __m256i yv = bd_load32(y[i].qs + 32 * ib);
            for (int r = 0; r < R; r++) {
                const bd_block_iq4_xs *x = (const bd_block_iq4_xs *)rp[r] + i;
                const __m256i q = table32(x->qs + 16 * ib, values);
                const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(yv, q));
                sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(p16, _mm256_set1_epi16((short)bd_iq4_xs_scale(x, ib))));
            }
        }
        for (int r = 0; r < R; r++) {
            const bd_block_iq4_xs *x = (const bd_block_iq4_xs *)rp[r] + i;
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(bd_h2f(x->d) * y[i].d), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) out[r] = bd_hsum8(acc[r]);
}

/* ---- the table's entry points: vec_dot (one row) and gemv (a run of rows, 4 at a time) ---- */

/* CALL(rp, out, pf, R) runs the rows kernel (nb blocks of QK elements, activations vy). */
#define MIX_KERNELS(dot_name, gemv_name, QK, CALL)                                                              \
    AVX2 static void dot_name(int64_t n, float *s, const void *vx, const void *vy) {                            \
        const int64_t nb = n / (QK);                                                                            \
        const uint8_t *rp[1] = {vx};                                                                            \
        (void)vy;                                                                                               \
        CALL(rp, s, 0, 1);                                                                                      \
    }                                                                                                           \
    AVX2 static void gemv_name(int64_t n, float *s, const void *w, size_t wrow, int64_t nrows, const void *vy) { \
        const int64_t nb = n / (QK);                                                                            \
        const uint8_t *W = w;                                                                                   \
        int64_t r = 0;                                                                                          \
        for (; r + ROWS_MAX <= nrows; r += ROWS_MAX) {                                                          \
            const uint8_t *rp[ROWS_MAX];                                                                        \
            for (int k = 0; k < ROWS_MAX; k++) rp[k] = W + (size_t)(r + k) * wrow;                              \
            CALL(rp, s + r, ROWS_MAX * wrow, ROWS_MAX);                                                         \
        }                                                                                                       \
        for (; r < nrows; r++) {                                                                                \
            const uint8_t *rp[1] = {W + (size_t)r * wrow};                                                      \
            CALL(rp, s + r, 0, 1);                                                                              \
        }                                                                                                       \
    }

#define CALL_Q4_1(rp, out, pf, R) min32_rows(nb, sizeof(bd_block_q4_1), rp, vy, out, pf, R, 0)
#define CALL_Q5_1(rp, out, pf, R) min32_rows(nb, sizeof(bd_block_q5_1), rp, vy, out, pf, R, 1)
#define CALL_Q5_0(rp, out, pf, R) q5_0_rows(nb, rp, vy, out, pf, R)
#define CALL_IQ4_NL(rp, out, pf, R) table32_rows(nb, sizeof(bd_block_iq4_nl), rp, vy, out, pf, bd_kvalues_iq4nl, R, 0)
#define CALL_MXFP4(rp, out, pf, R) table32_rows(nb, sizeof(bd_block_mxfp4), rp, vy, out, pf, bd_kvalues_mxfp4, R, 1)
#define CALL_Q2_K(rp, out, pf, R) q2_K_rows(nb, rp, vy, out, pf, R)
#define CALL_Q3_K(rp, out, pf, R) q3_K_rows(nb, rp, vy, out, pf, R)
#define CALL_IQ4_XS(rp, out, pf, R) iq4_xs_rows(nb, rp, vy, out, pf, R)
MIX_KERNELS(dot_q4_1_q8_1, gemv_q4_1, BD_QK32, CALL_Q4_1)
MIX_KERNELS(dot_q5_1_q8_1, gemv_q5_1, BD_QK32, CALL_Q5_1)
MIX_KERNELS(dot_q5_0_q8_0, gemv_q5_0, BD_QK32, CALL_Q5_0)
MIX_KERNELS(dot_iq4_nl_q8_0, gemv_iq4_nl, BD_QK32, CALL_IQ4_NL)
MIX_KERNELS(dot_mxfp4_q8_0, gemv_mxfp4, BD_QK32, CALL_MXFP4)
MIX_KERNELS(dot_q2_K_q8_K, gemv_q2_K, BD_QK_K, CALL_Q2_K)
MIX_KERNELS(dot_q3_K_q8_K, gemv_q3_K, BD_QK_K, CALL_Q3_K)
MIX_KERNELS(dot_iq4_xs_q8_K, gemv_iq4_xs, BD_QK_K, CALL_IQ4_XS)

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
    t[BD_TYPE_Q4_1].gemv = gemv_q4_1;
    t[BD_TYPE_Q5_1].gemv = gemv_q5_1;
    t[BD_TYPE_Q5_0].gemv = gemv_q5_0;
    t[BD_TYPE_IQ4_NL].gemv = gemv_iq4_nl;
    t[BD_TYPE_MXFP4].gemv = gemv_mxfp4;
    t[BD_TYPE_Q2_K].gemv = gemv_q2_K;
    t[BD_TYPE_Q3_K].gemv = gemv_q3_K;
    t[BD_TYPE_IQ4_XS].gemv = gemv_iq4_xs;
}
