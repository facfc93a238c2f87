/* gemv_avx512_mix.c — decode gemv kernels (gemv.h) at the AVX-512 level for the types of dot_avx2_mix.c: the
 * block-of-32 ones Q4_1, Q5_1 (x Q8_1), Q5_0, IQ4_NL, MXFP4 (x Q8_0), and Q2_K, Q3_K, IQ4_XS (x Q8_K; their
 * section below says how they differ).
 *
 * Every s[r] has the bits of the type's vec_dot (dot_avx2_mix.c: ggml's order, which its AVX-512 builds share):
 * per row an 8-lane chain (IQ4_NL / MXFP4: two, even and odd blocks, and an odd last block added alone after the
 * reduction), one fused multiply-add per block of float(lane sums) times the rounded product of the two scales;
 * Q4_1 / Q5_1 add a scalar chain of minimum terms. As gemv_avx512.c does for Q8_0, two rows share a 512-bit
 * accumulator (row a in lanes 0..7, row b in 8..15: lane-wise the same fused multiply-adds), 8 rows run at once,
 * the scale products of 8 blocks are formed together, and the next 8 rows are prefetched as they go.
 *
 * The integer lane sums are exact whatever their grouping, so they are formed the cheapest way: one vpdpbusd
 * per block and pair of rows, on unsigned levels (Q4_1 0..15, Q5_1 and Q5_0 0..31, the tables' values + 128)
 * against the signed activations; the offsets (Q5_0's 16, the tables' 128) times the activation sums of the
 * lane, formed once per block for all rows, are subtracted after. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "tensor/dot_impl.h"
#include "tensor/lanes_x86.h"
#include "tensor/quant.h"
#include "tensor/types.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define INLINE __attribute__((always_inline)) inline

enum { K_Q4_1, K_Q5_1, K_Q5_0, K_IQ4_NL, K_MXFP4 };

AVX512 static inline __m512 join_ps(__m256 lo, __m256 hi) {
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}
AVX512 static inline __m256 hi8(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

/* Weight block layout of a kind: bytes, offset of the nibbles, of the 5th-bit word (0: none). */
static INLINE size_t wsize(int kind) {
    return kind == K_Q4_1 ? sizeof(bd_block_q4_1) : kind == K_Q5_1 ? sizeof(bd_block_q5_1)
         : kind == K_Q5_0 ? sizeof(bd_block_q5_0) : kind == K_IQ4_NL ? sizeof(bd_block_iq4_nl)
                                                                      : sizeof(bd_block_mxfp4);
}
static INLINE size_t qs_off(int kind) {
    return kind == K_Q4_1 ? 4 : kind == K_Q5_1 ? 8 : kind == K_Q5_0 ? 6 : kind == K_IQ4_NL ? 2 : 1;
}
static INLINE size_t qh_off(int kind) { return kind == K_Q5_1 ? 4 : kind == K_Q5_0 ? 2 : 0; }

/* A weight block's scale as the vec_dot takes it. */
AVX512 static INLINE float wscale(const uint8_t *blk, int kind) {
    if (kind == K_MXFP4) return bd_e8m0_to_fp32_half(blk[0]);
    uint16_t h;
    memcpy(&h, blk, 2);
    return bd_h2f(h);
}

/* The E8M0 scales of 8 MXFP4 blocks (the first at p, the others stride bytes apart), halved, as 8 floats: the
 * bits of bd_e8m0_to_fp32_half, 8 lanes at a time. */
AVX512 static INLINE __m256 e8m0_scales8(const uint8_t *p, size_t stride) {
    uint64_t e = 0;
    for (int k = 0; k < 8; k++) e |= (uint64_t)p[k * stride] << (8 * k);
    const __m256i v = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)e));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(v, _mm256_set1_epi32(1)), 23);
    const __m256i tiny = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), v); /* e < 2: subnormal */
    const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), v);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, tiny, small));
}

/* The unsigned levels of one block of rows a and b: [a's 32 | b's 32], in element order. */
AVX512 static INLINE __m512i levels2(const uint8_t *a, const uint8_t *b, int kind, __m512i shift, __m512i low4,
                                     __m512i table) {
    const size_t o = qs_off(kind);
    const __m256i t = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)(b + o)), _mm_loadu_si128((const __m128i *)(a + o)));
    /* 128-bit quarters [a, a, b, b], the second of each pair shifted down by 4: low then high nibbles */
    const __m512i x = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3), _mm512_castsi256_si512(t));
    __m512i q = _mm512_and_si512(_mm512_srlv_epi16(x, shift), low4);
    if (kind == K_IQ4_NL || kind == K_MXFP4) return _mm512_shuffle_epi8(table, q);
    if (qh_off(kind)) {
        uint32_t ha, hb;
        memcpy(&ha, a + qh_off(kind), 4);
        memcpy(&hb, b + qh_off(kind), 4);
        q = _mm512_mask_add_epi8(q, (__mmask64)ha | (__mmask64)hb << 32, q, _mm512_set1_epi8(16));
    }
    return q;
}

/* 2P rows (rp[0..2P), rows may repeat) against the activations y (nb blocks); results to out[0..2P). */
AVX512 static INLINE void b32_rows(int64_t nb, const uint8_t *const *rp, const uint8_t *y, float *const *out,
                                   size_t pf, const int P, const int kind) {
    const int min = kind == K_Q4_1 || kind == K_Q5_1, two = kind == K_IQ4_NL || kind == K_MXFP4;
    const size_t ws = wsize(kind), ys = min ? sizeof(bd_block_q8_1) : sizeof(bd_block_q8_0), yq = min ? 4 : 2;
    const __m512i zero = _mm512_setzero_si512(), low4 = _mm512_set1_epi8(0x0F);
    const __m512i shift = _mm512_setr_epi64(0, 0, 0x0004000400040004, 0x0004000400040004, 0, 0, 0x0004000400040004,
                                            0x0004000400040004);
    /* the table's values + 128 (unsigned), in every 128-bit quarter */
    __m512i table = zero;
    if (two) {
        const int8_t *tv = kind == K_IQ4_NL ? bd_kvalues_iq4nl : bd_kvalues_mxfp4;
        table = _mm512_broadcast_i32x4(_mm_xor_si128(_mm_loadu_si128((const __m128i *)tv), _mm_set1_epi8((char)0x80)));
    }
    const __m512i offset = _mm512_set1_epi8((char)(kind == K_Q5_0 ? 16 : 0x80)); /* the levels' offset (two, Q5_0) */
    const __m512i one = _mm512_set1_epi32(1), idx0 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 8, 8, 8, 8, 8, 8, 8, 8);
    __m512 acc[2][4];
    float summs[8];
    for (int p = 0; p < P; p++) acc[0][p] = acc[1][p] = _mm512_setzero_ps();
    for (int r = 0; r < 2 * P; r++) summs[r] = 0;
    const int64_t npair = two ? nb & ~(int64_t)1 : nb; /* blocks in the chains (an odd last one: alone) */
    int64_t b = 0;
    for (; b + 8 <= npair; b += 8) {
        const __m256 yd = bd_scales8(y + (size_t)b * ys, ys);
        __m512 dp[4]; /* lanes 0..7: row a's scale products of the 8 blocks, lanes 8..15: row b's */
        for (int p = 0; p < P; p++) {
            const uint8_t *wa = rp[2 * p] + (size_t)b * ws, *wb = rp[2 * p + 1] + (size_t)b * ws;
            __m256 da, db;
            if (kind == K_MXFP4) {
                da = e8m0_scales8(wa, ws), db = e8m0_scales8(wb, ws);
            } else {
                da = bd_scales8(wa, ws), db = bd_scales8(wb, ws);
            }
            /* (the vec_dots' products: d_x * d_y for Q4_1, Q5_1, Q5_0; d_y * d_x for the tables: the same) */
            dp[p] = join_ps(_mm256_mul_ps(da, yd), _mm256_mul_ps(db, yd));
            if (pf)
                for (size_t o = 0; o < 8 * ws; o += 64) {
                    _mm_prefetch((const char *)wa + pf + o, _MM_HINT_T1);
                    _mm_prefetch((const char *)wb + pf + o, _MM_HINT_T1);
                }
        }
        __m512i idx = idx0;
        for (int k = 0; k < 8; k++, idx = _mm512_add_epi32(idx, one)) {
            const uint8_t *yb = y + (size_t)(b + k) * ys;
            const __m512i yv = _mm512_broadcast_i64x4(bd_load32(yb + yq));
            const __m512i corr = min ? zero : _mm512_dpbusd_epi32(zero, offset, yv);
            float ysum = 0;
            if (min) {
                uint16_t h;
                memcpy(&h, yb + 2, 2);
                ysum = bd_h2f(h);
            }
            for (int p = 0; p < P; p++) {
                const uint8_t *wa = rp[2 * p] + (size_t)(b + k) * ws, *wb = rp[2 * p + 1] + (size_t)(b + k) * ws;
                __m512i iv = _mm512_dpbusd_epi32(zero, levels2(wa, wb, kind, shift, low4, table), yv);
                if (!min) iv = _mm512_sub_epi32(iv, corr);
                const int c = two ? k & 1 : 0;
                acc[c][p] = _mm512_fmadd_ps(_mm512_permutexvar_ps(idx, dp[p]), _mm512_cvtepi32_ps(iv), acc[c][p]);
                if (min) {
                    uint16_t ma, mb;
                    memcpy(&ma, wa + 2, 2);
                    memcpy(&mb, wb + 2, 2);
                    summs[2 * p] = fmaf(bd_h2f(ma), ysum, summs[2 * p]);
                    summs[2 * p + 1] = fmaf(bd_h2f(mb), ysum, summs[2 * p + 1]);
                }
            }
        }
    }
    for (; b < npair; b++) {
        const uint8_t *yb = y + (size_t)b * ys;
        uint16_t yh;
        memcpy(&yh, yb, 2);
        const float yd = bd_h2f(yh);
        const __m512i yv = _mm512_broadcast_i64x4(bd_load32(yb + yq));
        const __m512i corr = min ? zero : _mm512_dpbusd_epi32(zero, offset, yv);
        float ysum = 0;
        if (min) {
            memcpy(&yh, yb + 2, 2);
            ysum = bd_h2f(yh);
        }
        for (int p = 0; p < P; p++) {
            const uint8_t *wa = rp[2 * p] + (size_t)b * ws, *wb = rp[2 * p + 1] + (size_t)b * ws;
            __m512i iv = _mm512_dpbusd_epi32(zero, levels2(wa, wb, kind, shift, low4, table), yv);
            if (!min) iv = _mm512_sub_epi32(iv, corr);
            const __m512 d = join_ps(_mm256_set1_ps(wscale(wa, kind) * yd), _mm256_set1_ps(wscale(wb, kind) * yd));
            const int c = two ? (int)(b & 1) : 0;
            acc[c][p] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(iv), acc[c][p]);
            if (min) {
                uint16_t ma, mb;
                memcpy(&ma, wa + 2, 2);
                memcpy(&mb, wb + 2, 2);
                summs[2 * p] = fmaf(bd_h2f(ma), ysum, summs[2 * p]);
                summs[2 * p + 1] = fmaf(bd_h2f(mb), ysum, summs[2 * p + 1]);
            }
        }
    }
    for (int p = 0; p < P; p++) {
        const __m512 v = two ? _mm512_add_ps(acc[0][p], acc[1][p]) : acc[0][p];
        float s[2] = {bd_hsum8(_mm512_castps512_ps256(v)), bd_hsum8(hi8(v))};
        for (int h = 0; h < 2; h++) {
            if (min) s[h] += summs[2 * p + h];
            if (two && npair < nb) { /* the odd last block, alone: its integer total, one fused multiply-add */
                const uint8_t *w = rp[2 * p + h] + (size_t)npair * ws, *yb = y + (size_t)npair * ys;
                /* (the lane sums as in the chains, then added: exact) */
                const __m512i yv = _mm512_broadcast_i64x4(bd_load32(yb + yq));
                const __m512i iv = _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, levels2(w, w, kind, shift, low4, table), yv),
                                                    _mm512_dpbusd_epi32(zero, offset, yv));
                int32_t l8[8];
                _mm256_storeu_si256((__m256i *)l8, _mm512_castsi512_si256(iv));
                int total = 0;
                for (int j = 0; j < 8; j++) total += l8[j];
                uint16_t yh;
                memcpy(&yh, yb, 2);
                s[h] = fmaf(bd_h2f(yh) * wscale(w, kind), (float)total, s[h]);
            }
            *out[2 * p + h] = s[h];
        }
    }
}

/* The row loop of both families: ROWS(nb, rp, y, out, pf, P, kind) runs 2P rows (P = 4: 8 rows with the next 8
 * prefetched; P = 1: a pair, the odd last row paired with itself), nb blocks of QK. */
#define GEMV_PAIRS(name, QK, ROWS, KIND)                                                                         \
    AVX512 static void name(int64_t n, float *s, const void *w, size_t wrow, int64_t nrows, const void *xq) {     \
        const int64_t nb = n / (QK);                                                                             \
        const uint8_t *W = w;                                                                                    \
        int64_t r = 0;                                                                                           \
        for (; r + 8 <= nrows; r += 8) {                                                                         \
            const uint8_t *rp[8];                                                                                \
            float *out[8];                                                                                       \
            for (int i = 0; i < 8; i++) rp[i] = W + (size_t)(r + i) * wrow, out[i] = s + r + i;                  \
            ROWS(nb, rp, xq, out, 8 * wrow, 4, KIND);                                                            \
        }                                                                                                        \
        /* the last 1..7 rows: pairs, the odd one paired with itself */                                          \
        for (; r < nrows; r += 2) {                                                                              \
            const int64_t rb = r + 1 < nrows ? r + 1 : r;                                                        \
            const uint8_t *rp[2] = {W + (size_t)r * wrow, W + (size_t)rb * wrow};                                \
            float *out[2] = {s + r, s + rb};                                                                     \
            ROWS(nb, rp, xq, out, 0, 1, KIND);                                                                   \
        }                                                                                                        \
    }
#define GEMV_B32(name, KIND) GEMV_PAIRS(name, BD_QK32, b32_rows, KIND)
GEMV_B32(gemv_q4_1, K_Q4_1)
GEMV_B32(gemv_q5_1, K_Q5_1)
GEMV_B32(gemv_q5_0, K_Q5_0)
GEMV_B32(gemv_iq4_nl, K_IQ4_NL)
GEMV_B32(gemv_mxfp4, K_MXFP4)

/* ---- K-quants against Q8_K: Q2_K, Q3_K, IQ4_XS ----
 * ggml's AVX-512 builds have no 512-bit vec_dot for these three and run the AVX2 one (dot_avx2_mix.c), so each
 * row keeps that kernel's single 8-lane chain: per block of 256, one fused multiply-add of float(lane sums) by
 * y.d * d (Q2_K: first one of the mins' lane sums by -y.d * dmin). Two rows share a 512-bit register as above
 * (row a in lanes 0..7, row b in 8..15), so every integer step serves two rows; the lane sums are exact in any
 * grouping, and vpdpwssd fuses each run's scale multiply with the add into the sums. Pairs run one after the
 * other within a block (a pair's scales and sums stay in registers, the activations are reread from L1). */

enum { K_Q2_K, K_Q3_K, K_IQ4_XS };

/* Row a's 32 bytes at pa in the low half, row b's at pb in the high half. */
AVX512 static INLINE __m512i pair32(const uint8_t *pa, const uint8_t *pb) { return bd_join256(bd_load32(pa), bd_load32(pb)); }

/* The 32-element runs of a 256 block each take two 16-element scales. From 16 int16 scales per row laid out
 * in 128-bit quarters [a 0..7, a 8..15, b 0..7, b 8..15], s[0] = [a 0..7, a 0..7, b 0..7, b 0..7] and s[1] the
 * same of words 8..15: a byte shuffle by run_pick(j) then gives run 4c + j its scales from s[c] (words 2j in the
 * run's first 16 elements, 2j + 1 in its last 16, for both rows). */
AVX512 static INLINE void split_scales(__m512i s16, __m512i s[2]) {
    s[0] = _mm512_shuffle_i64x2(s16, s16, 0xA0); /* quarters 0, 0, 2, 2 */
    s[1] = _mm512_shuffle_i64x2(s16, s16, 0xF5); /* quarters 1, 1, 3, 3 */
}
AVX512 static INLINE __m512i run_pick(int j) {
    const short lo = (short)(0x0100 + 0x0404 * j), hi = (short)(lo + 0x0202); /* bytes (4j, 4j + 1), (4j + 2, 4j + 3) */
    return _mm512_broadcast_i64x4(_mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo)));
}

/* [x x 8 | y x 8] as floats. */
AVX512 static INLINE __m512 pair_ps(float x, float y) { return join_ps(_mm256_set1_ps(x), _mm256_set1_ps(y)); }

/* Q2_K, rows a and b, block yb: the mins term, then the levels term, as the AVX2 kernel fuses them. */
AVX512 static INLINE __m512 q2_K_pair(const bd_block_q2_K *a, const bd_block_q2_K *b, const bd_block_q8_K *yb,
                                      __m512 acc, const __m512i *pick) {
    const __m256i sc = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)b->scales), _mm_loadu_si128((const __m128i *)a->scales));
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m512i mins = _mm512_cvtepu8_epi16(_mm256_and_si256(_mm256_srli_epi16(sc, 4), m4));
    const __m512i prod = _mm512_madd_epi16(mins, _mm512_broadcast_i64x4(bd_load32(yb->bsums)));
    acc = _mm512_fmadd_ps(pair_ps(-yb->d * bd_h2f(a->dmin), -yb->d * bd_h2f(b->dmin)), _mm512_cvtepi32_ps(prod), acc);
    __m512i s[2];
    split_scales(_mm512_cvtepu8_epi16(_mm256_and_si256(sc, m4)), s);
    const __m512i m3 = _mm512_set1_epi8(3);
    __m512i sumi = _mm512_setzero_si512();
    for (int c = 0; c < 2; c++) {
        const __m512i bits = pair32(a->qs + 32 * c, b->qs + 32 * c);
        for (int j = 0; j < 4; j++) {
            const __m512i yv = _mm512_broadcast_i64x4(bd_load32(yb->qs + 128 * c + 32 * j));
            const __m512i q = _mm512_and_si512(j ? _mm512_srli_epi16(bits, 2 * j) : bits, m3);
            sumi = _mm512_dpwssd_epi32(sumi, _mm512_shuffle_epi8(s[c], pick[j]), _mm512_maddubs_epi16(q, yv));
        }
    }
    return _mm512_fmadd_ps(pair_ps(yb->d * bd_h2f(a->d), yb->d * bd_h2f(b->d)), _mm512_cvtepi32_ps(sumi), acc);
}

/* Q3_K's scales of rows a and b (dot_avx2_mix.c's q3_K_scales, both rows in one 256-bit register). */
AVX512 static INLINE void q3_K_scales2(const uint8_t *a, const uint8_t *b, __m512i s[2]) {
    uint64_t la, lb;
    uint32_t ha, hb;
    memcpy(&la, a, 8), memcpy(&lb, b, 8), memcpy(&ha, a + 8, 4), memcpy(&hb, b + 8, 4);
    const __m256i l = _mm256_setr_epi64x((long long)la, 0, (long long)lb, 0), m4 = _mm256_set1_epi8(0x0F);
    const __m256i low = _mm256_unpacklo_epi64(_mm256_and_si256(l, m4), _mm256_and_si256(_mm256_srli_epi16(l, 4), m4));
    const __m256i h = _mm256_setr_epi32((int)ha, (int)ha, (int)ha, (int)ha, (int)hb, (int)hb, (int)hb, (int)hb);
    const __m256i top = _mm256_and_si256(_mm256_srlv_epi32(h, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)), _mm256_set1_epi8(3));
    const __m256i s8 = _mm256_sub_epi8(_mm256_or_si256(low, _mm256_slli_epi16(top, 4)), _mm256_set1_epi8(32));
    split_scales(_mm512_cvtepi8_epi16(s8), s);
}

/* Q3_K, rows a and b, block yb; y4[k] = 4 * y (pairs) of run k, formed once per block. */
AVX512 static INLINE __m512 q3_K_pair(const bd_block_q3_K *a, const bd_block_q3_K *b, const bd_block_q8_K *yb,
                                      __m512 acc, const __m512i *pick, const __m512i *y4) {
    __m512i s[2];
    q3_K_scales2(a->scales, b->scales, s);
    const __m512i m3 = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4), hbits = pair32(a->hmask, b->hmask);
    __m512i sumi = _mm512_setzero_si512();
    for (int c = 0; c < 2; c++) {
        const __m512i bits = pair32(a->qs + 32 * c, b->qs + 32 * c);
        for (int j = 0; j < 4; j++) {
            const int r = 4 * c + j;
            const __m512i yv = _mm512_broadcast_i64x4(bd_load32(yb->qs + 32 * r));
            const __m512i lo = _mm512_and_si512(j ? _mm512_srli_epi16(bits, 2 * j) : bits, m3);
            /* the run's hmask bit moved to bit 2: 4 where set */
            const __m512i hv = r < 2 ? _mm512_slli_epi16(hbits, 2 - r) : r == 2 ? hbits : _mm512_srli_epi16(hbits, r - 2);
            const __m512i q = _mm512_ternarylogic_epi32(lo, hv, four, 0xF8); /* lo | (hv & four) */
            const __m512i p16 = _mm512_sub_epi16(_mm512_maddubs_epi16(q, yv), y4[r]);
            sumi = _mm512_dpwssd_epi32(sumi, _mm512_shuffle_epi8(s[c], pick[j]), p16);
        }
    }
    return _mm512_fmadd_ps(pair_ps(yb->d * bd_h2f(a->d), yb->d * bd_h2f(b->d)), _mm512_cvtepi32_ps(sumi), acc);
}

/* IQ4_XS, rows a and b, block yb. Levels are table values of either sign: |value| (a second table) times y
 * with the value's sign moved onto y, as the AVX2 kernel's sign trick (a negated -128 wraps to -128 there as
 * here; the table has no zero). The values of indices 0..7 are the negative ones. */
AVX512 static INLINE __m512 iq4_xs_pair(const bd_block_iq4_xs *a, const bd_block_iq4_xs *b, const bd_block_q8_K *yb,
                                        __m512 acc, __m512i absv) {
    /* the 8 scales of each row, int16, in quarters [a, a, b, b] */
    const __m256i sh = _mm256_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14, 0, 2, 4, 6, 8, 10, 12, 14);
    uint32_t la, lb;
    memcpy(&la, a->scales_l, 4), memcpy(&lb, b->scales_l, 4);
    const __m128i l = _mm_setr_epi32((int)la, (int)lb, 0, 0), m4 = _mm_set1_epi8(0x0F);
    const __m128i lo8 = _mm_unpacklo_epi8(_mm_and_si128(l, m4), _mm_and_si128(_mm_srli_epi16(l, 4), m4)); /* a's 8, b's 8 */
    const __m256i hh = _mm256_set_m128i(_mm_set1_epi16((short)b->scales_h), _mm_set1_epi16((short)a->scales_h));
    const __m256i top = _mm256_and_si256(_mm256_srlv_epi16(hh, sh), _mm256_set1_epi16(3));
    const __m256i s16 = _mm256_sub_epi16(_mm256_or_si256(_mm256_cvtepu8_epi16(lo8), _mm256_slli_epi16(top, 4)),
                                         _mm256_set1_epi16(32));
    const __m512i s = _mm512_shuffle_i64x2(_mm512_castsi256_si512(s16), _mm512_castsi256_si512(s16), 0x50);
    const __m512i low4 = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
    const __m512i shift = _mm512_setr_epi64(0, 0, 0x0004000400040004, 0x0004000400040004, 0, 0, 0x0004000400040004,
                                            0x0004000400040004);
    __m512i sumi = _mm512_setzero_si512();
    for (int ib = 0; ib < BD_QK_K / 32; ib++) {
        const __m256i t = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)(b->qs + 16 * ib)),
                                           _mm_loadu_si128((const __m128i *)(a->qs + 16 * ib)));
        const __m512i x = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3), _mm512_castsi256_si512(t));
        const __m512i idx = _mm512_and_si512(_mm512_srlv_epi16(x, shift), low4);
        const __m512i yv = _mm512_broadcast_i64x4(bd_load32(yb->qs + 32 * ib));
        const __m512i ys = _mm512_mask_sub_epi8(yv, _mm512_testn_epi8_mask(idx, eight), _mm512_setzero_si512(), yv);
        const __m512i p16 = _mm512_maddubs_epi16(_mm512_shuffle_epi8(absv, idx), ys);
        const __m512i sc = _mm512_shuffle_epi8(s, _mm512_set1_epi16((short)(0x0100 + 0x0202 * ib)));
        sumi = _mm512_dpwssd_epi32(sumi, sc, p16);
    }
    return _mm512_fmadd_ps(pair_ps(bd_h2f(a->d) * yb->d, bd_h2f(b->d) * yb->d), _mm512_cvtepi32_ps(sumi), acc);
}

/* 2P rows (rp[0..2P), rows may repeat) against the Q8_K activations y (nb blocks); results to out[0..2P). */
AVX512 static INLINE void k_rows(int64_t nb, const uint8_t *const *rp, const bd_block_q8_K *y, float *const *out,
                                 size_t pf, const int P, const int kind) {
    const size_t ws = kind == K_Q2_K ? sizeof(bd_block_q2_K) : kind == K_Q3_K ? sizeof(bd_block_q3_K)
                                                                               : sizeof(bd_block_iq4_xs);
    const __m512i pick[4] = {run_pick(0), run_pick(1), run_pick(2), run_pick(3)};
    __m512i absv = _mm512_setzero_si512();
    if (kind == K_IQ4_XS) absv = _mm512_broadcast_i32x4(_mm_abs_epi8(_mm_loadu_si128((const __m128i *)bd_kvalues_iq4nl)));
    __m512 acc[4];
    for (int p = 0; p < P; p++) acc[p] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        __m512i y4[8];
        if (kind == K_Q3_K)
            for (int k = 0; k < 8; k++)
                y4[k] = _mm512_maddubs_epi16(_mm512_set1_epi8(4), _mm512_broadcast_i64x4(bd_load32(y[i].qs + 32 * k)));
        for (int p = 0; p < P; p++) {
            const uint8_t *a = rp[2 * p] + (size_t)i * ws, *b = rp[2 * p + 1] + (size_t)i * ws;
            if (pf)
                for (size_t o = 0; o < ws; o += 64) {
                    _mm_prefetch((const char *)a + pf + o, _MM_HINT_T1);
                    _mm_prefetch((const char *)b + pf + o, _MM_HINT_T1);
                }
            if (kind == K_Q2_K)
                acc[p] = q2_K_pair((const bd_block_q2_K *)a, (const bd_block_q2_K *)b, y + i, acc[p], pick);
            else if (kind == K_Q3_K)
                acc[p] = q3_K_pair((const bd_block_q3_K *)a, (const bd_block_q3_K *)b, y + i, acc[p], pick, y4);
            else
                acc[p] = iq4_xs_pair((const bd_block_iq4_xs *)a, (const bd_block_iq4_xs *)b, y + i, acc[p], absv);
        }
    }
    for (int p = 0; p < P; p++) {
        *out[2 * p] = bd_hsum8(_mm512_castps512_ps256(acc[p]));
        *out[2 * p + 1] = bd_hsum8(hi8(acc[p]));
    }
}

#define GEMV_K(name, KIND) GEMV_PAIRS(name, BD_QK_K, k_rows, KIND)
GEMV_K(gemv_q2_K, K_Q2_K)
GEMV_K(gemv_q3_K, K_Q3_K)
GEMV_K(gemv_iq4_xs, K_IQ4_XS)

void bd_gemv_fill_avx512_mix(bd_dot_traits t[BD_TYPE_COUNT]) {
    t[BD_TYPE_Q4_1].gemv = gemv_q4_1;
    t[BD_TYPE_Q5_1].gemv = gemv_q5_1;
    t[BD_TYPE_Q5_0].gemv = gemv_q5_0;
    t[BD_TYPE_IQ4_NL].gemv = gemv_iq4_nl;
    t[BD_TYPE_MXFP4].gemv = gemv_mxfp4;
    t[BD_TYPE_Q2_K].gemv = gemv_q2_K;
    t[BD_TYPE_Q3_K].gemv = gemv_q3_K;
    t[BD_TYPE_IQ4_XS].gemv = gemv_iq4_xs;
}
