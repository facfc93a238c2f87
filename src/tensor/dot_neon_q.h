/* dot_neon_q.h — the NEON dot products of the block types (and the F16 tail), written once for both aarch64
 * levels.
 *
 * Included by dot_neon.c (plain Advanced SIMD) and dot_neon_dot.c (with the dotprod extension) after each has
 * defined NEON_DOT4(acc, a, b): acc plus the products of the int8 vectors a and b, summed four at a time into
 * the four int32 lanes. What lands in which lane is the float order's business (each lane is converted to
 * float on its own), so each file's NEON_DOT4 must group the products as the ggml build it pairs with does:
 * SDOT puts elements 4k..4k+3 in lane k (armv8.2_2); ggml's armv8.0 build widens with SMULL and pairs with
 * SADDLP, so lane k gets elements 2k, 2k+1, 8+2k, 9+2k. NEON_SUFFIX names the functions.
 *
 * The float order of both (read off ggml's arm64 builds, clang, with fused multiply-adds):
 *   Q8_0, Q4_0, Q5_0 (x Q8_0), Q4_1, Q5_1 (x Q8_1): two chains of 4 float lanes, even blocks in one and odd
 *     blocks in the other; per block, lane k = the int32 lane sum over the block's two 16-byte halves,
 *     acc = fma(float(lane), d, acc) with d = fp32(x.d) * fp32(y.d) rounded. Result (a0 + a1) + (a2 + a3) of
 *     each chain (FADDP), even chain + odd chain. The min terms m * s (fp32(x.m) * fp32(y.s)) of Q4_1 go to
 *     one float per pair of blocks, summs = summs + fma(m0, s0, m1 * s1), added last: (even + odd) + summs;
 *     Q5_1 keeps one float per chain, summs_c = fma(m_c, s_c, summs_c), and ends ((even + odd) + summs_0) +
 *     summs_1. An odd last block is added after that as a scalar: Q8_0, Q5_0 fma(float(isum), d, sum); Q4_0
 *     fma(float(isum) * fp32(x.d), fp32(y.d), sum); Q4_1, Q5_1 sum + fma(d, float(isum), m * s).
 *   IQ4_NL, MXFP4 (x Q8_0, table levels; MXFP4's d = 2^(e - 128) from its E8M0 byte): one float; blocks in
 *     pairs, t = (d1 * fp32(y1.d)) * float(isum1) rounded, then t = fma(d0 * fp32(y0.d), float(isum0), t) (the
 *     compiler fused the first product of ggml's a*b + c*d), sum = sum + t; an odd last block:
 *     sum = fma(fp32(y.d) * d, float(isum), sum). */
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "tensor/neon_blocks.h"
#include "tensor/quant.h"

#define NEON_CAT2(a, b) a##b
#define NEON_CAT(a, b) NEON_CAT2(a, b)
#define NEON_FN(name) NEON_CAT(name, NEON_SUFFIX)

static inline float neon_hadd4(float32x4_t v) { return vaddvq_f32(v); } /* (a0 + a1) + (a2 + a3) */

/* The tail of ggml's F16 vec_dot at both levels: head (the vector part) plus x[i] * y[i] for i in [i0, n), each
 * product in float (exact for two halves), the sums in double, rounded to float once. */
static inline float neon_f16_tail(float head, const uint16_t *x, const uint16_t *y, int64_t i0, int64_t n) {
    double sum = head;
    for (int64_t i = i0; i < n; i++) sum += (double)(neon_h2f(x[i]) * neon_h2f(y[i]));
    return (float)sum;
}

/* ---- the block-of-32 types against Q8_0 / Q8_1: vec_dot and the decode gemv from one row kernel ---- */

/* The int32 lanes of one block against the activation halves y0, y1, grouped as vec_dot groups them. */
static inline int32x4_t NEON_FN(blk32_)(const uint8_t *blk, int kind, int8x16_t y0, int8x16_t y1) {
    int8x16_t lo, hi;
    neon_b32_levels(blk, kind, &lo, &hi);
    return NEON_DOT4(NEON_DOT4(vdupq_n_s32(0), lo, y0), hi, y1);
}

/* R (<= 4) rows rp against the activation row yb: per row exactly vec_dot's even and odd chains, min terms and
 * tail, or the table types' one float (the orders above); the activation blocks are loaded once for the R
 * rows, and pf_len bytes at pf (the next rows) prefetched along the way. With R = 1 and no prefetch this is the
 * vec_dot. */
static inline void NEON_FN(b32_rows_)(int64_t nb, int kind, const uint8_t *const *rp, const uint8_t *yb, float *out,
                                      const int R, const uint8_t *pf, size_t pf_len) {
    const size_t bsz = neon_b32_size(kind);
    const int has_min = neon_b32_has_min(kind);
    const size_t ysz = has_min ? sizeof(bd_block_q8_1) : sizeof(bd_block_q8_0), yqs = ysz - BD_QK32;
    float32x4_t a0[4], a1[4];
    float m0[4] = {0}, m1[4] = {0};
    for (int r = 0; r < R; r++) a0[r] = a1[r] = vdupq_n_f32(0);
    int64_t b = 0;
    const size_t pf_step = nb > 1 ? (pf_len + (size_t)nb / 2 - 1) / ((size_t)nb / 2) : pf_len;
    for (size_t o = 0; b + 1 < nb; b += 2, o += pf_step) {
        if (pf)
            for (size_t p = o & ~(size_t)63; p < o + pf_step && p < pf_len; p += 64) __builtin_prefetch(pf + p, 0, 2);
        const uint8_t *y0 = yb + (size_t)b * ysz, *y1 = y0 + ysz;
        const int8x16_t y00 = vld1q_s8((const int8_t *)y0 + yqs), y01 = vld1q_s8((const int8_t *)y0 + yqs + 16);
        const int8x16_t y10 = vld1q_s8((const int8_t *)y1 + yqs), y11 = vld1q_s8((const int8_t *)y1 + yqs + 16);
        const float yd0 = neon_ld_h2f(y0), yd1 = neon_ld_h2f(y1);
        for (int r = 0; r < R; r++) {
            const uint8_t *x0 = rp[r] + (size_t)b * bsz, *x1 = x0 + bsz;
            const int32x4_t p0 = NEON_FN(blk32_)(x0, kind, y00, y01), p1 = NEON_FN(blk32_)(x1, kind, y10, y11);
            if (neon_b32_is_table(kind)) { /* the sum in m0 */
                const float t = neon_b32_d(x1, kind) * yd1 * (float)vaddvq_s32(p1);
                m0[r] = m0[r] + fmaf(neon_b32_d(x0, kind) * yd0, (float)vaddvq_s32(p0), t);
                continue;
            }
            a0[r] = vfmaq_n_f32(a0[r], vcvtq_f32_s32(p0), neon_ld_h2f(x0) * yd0);
            a1[r] = vfmaq_n_f32(a1[r], vcvtq_f32_s32(p1), neon_ld_h2f(x1) * yd1);
            if (kind == NEON_Q4_1) {
                const float m1s1 = neon_ld_h2f(x1 + 2) * neon_ld_h2f(y1 + 2);
                m0[r] = m0[r] + fmaf(neon_ld_h2f(x0 + 2), neon_ld_h2f(y0 + 2), m1s1);
            } else if (kind == NEON_Q5_1) {
                m0[r] = fmaf(neon_ld_h2f(x0 + 2), neon_ld_h2f(y0 + 2), m0[r]);
                m1[r] = fmaf(neon_ld_h2f(x1 + 2), neon_ld_h2f(y1 + 2), m1[r]);
            }
        }
    }
    for (int r = 0; r < R; r++) {
        float sum = neon_b32_is_table(kind) ? m0[r] : neon_hadd4(a0[r]) + neon_hadd4(a1[r]);
        if (kind == NEON_Q4_1) sum = sum + m0[r];
        if (kind == NEON_Q5_1) sum = (sum + m0[r]) + m1[r];
        if (b < nb) { /* vec_dot's scalar last block */
            const uint8_t *x = rp[r] + (size_t)b * bsz, *y = yb + (size_t)b * ysz;
            const int32_t isum = vaddvq_s32(NEON_FN(blk32_)(x, kind, vld1q_s8((const int8_t *)y + yqs),
                                                            vld1q_s8((const int8_t *)y + yqs + 16)));
            const float xd = neon_b32_d(x, kind), yd = neon_ld_h2f(y);
            if (neon_b32_is_table(kind))
                sum = fmaf(yd * xd, (float)isum, sum);
            else if (has_min)
                sum = sum + fmaf(xd * yd, (float)isum, neon_ld_h2f(x + 2) * neon_ld_h2f(y + 2));
            else
                sum = kind == NEON_Q4_0 ? fmaf((float)isum * xd, yd, sum) : fmaf((float)isum, xd * yd, sum);
        }
        out[r] = sum;
    }
}

static inline void NEON_FN(dot_b32_)(int kind, int64_t n, float *s, const void *vx, const void *vy) {
    const uint8_t *rp[1] = {vx};
    NEON_FN(b32_rows_)(n / BD_QK32, kind, rp, vy, s, 1, NULL, 0);
}

static inline void NEON_FN(gemv_b32_)(int kind, int64_t n, float *s, const void *w, size_t wrow, int64_t nrows,
                                      const void *xq) {
    const int64_t nb = n / BD_QK32;
    const uint8_t *W = w;
    int64_t r = 0;
    for (size_t o = 0; o < (size_t)(nrows < 4 ? nrows : 4) * wrow; o += 64) __builtin_prefetch(W + o, 0, 2);
    for (; r + 4 <= nrows; r += 4) {
        const uint8_t *rp[4] = {W + (size_t)r * wrow, W + (size_t)(r + 1) * wrow, W + (size_t)(r + 2) * wrow,
                                W + (size_t)(r + 3) * wrow};
        NEON_FN(b32_rows_)(nb, kind, rp, xq, s + r, 4, r + 8 <= nrows ? W + (size_t)(r + 4) * wrow : NULL, 4 * wrow);
    }
    for (; r < nrows; r++) {
        const uint8_t *rp[1] = {W + (size_t)r * wrow};
        NEON_FN(b32_rows_)(nb, kind, rp, xq, s + r, 1, NULL, 0);
    }
}

/* One vec_dot and one gemv per type: the kernels above with the type's layout. */
#define NEON_B32(type, kind, act)                                                                                   \
    static void NEON_FN(dot_##type##_##act##_)(int64_t n, float *s, const void *vx, const void *vy) {           \
        NEON_FN(dot_b32_)(kind, n, s, vx, vy);                                                                       \
    }                                                                                                                \
    static void NEON_FN(gemv_##type##_)(int64_t n, float *s, const void *w, size_t wrow, int64_t nrows,           \
                                        const void *xq) {                                                            \
        NEON_FN(gemv_b32_)(kind, n, s, w, wrow, nrows, xq);                                                          \
    }
NEON_B32(q8_0, NEON_Q8_0, q8_0)
NEON_B32(q4_0, NEON_Q4_0, q8_0)
NEON_B32(q5_0, NEON_Q5_0, q8_0)
NEON_B32(q4_1, NEON_Q4_1, q8_1)
NEON_B32(q5_1, NEON_Q5_1, q8_1)
NEON_B32(iq4_nl, NEON_IQ4_NL, q8_0)
NEON_B32(mxfp4, NEON_MXFP4, q8_0)
#undef NEON_B32

/* The K-quant dots are exact integers per block until one or two float steps per block, the same in every
 * arm64 build of ggml without SVE (the lane grouping does not matter: each block's sums are reduced whole):
 *   Q4_K (x Q8_K): isum = sum over sub-blocks j of sc[j] * (sum of its 32 q * y), imin = sum over j of
 *     m[j] * (bsums[2j] + bsums[2j+1]); per block, in order: sum = fma(-(fp32(x.dmin) * y.d), float(imin), sum),
 *     sum = fma(y.d * fp32(x.d), float(isum), sum).
 *   Q6_K (x Q8_K): isum = sum over 16-element sub-blocks k of scales[k] * (sum of q * y) with q unsigned
 *     (0..63), imin = sum over k of scales[k] * bsums[k]; sum = fma(fp32(x.d) * y.d, float(isum - 32 imin), sum). */
static inline int32_t neon_sum32(int8x16_t a0, int8x16_t b0, int8x16_t a1, int8x16_t b1) {
    return vaddvq_s32(NEON_DOT4(NEON_DOT4(vdupq_n_s32(0), a0, b0), a1, b1));
}

/* Q4_K / Q5_K, one block: its 8 sub-block scales into sc, and the return value imin = Σ mins × (the
 * 32-element sums of the activations, pairs of bsums), the products widened to int32 first. */
static inline int32_t neon_k4_scales(const uint8_t *scales, const int16_t *bsums, uint8_t sc[8]) {
    uint64_t sc64, m64;
    bd_unpack_scales_k4(scales, &sc64, &m64);
    uint8_t mn[8];
    memcpy(sc, &sc64, 8);
    memcpy(mn, &m64, 8);
    const int16x8_t bs = vpaddq_s16(vld1q_s16(bsums), vld1q_s16(bsums + 8));
    const int16x8_t mins = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mn)));
    return vaddvq_s32(vaddq_s32(vmull_s16(vget_low_s16(bs), vget_low_s16(mins)),
                                vmull_s16(vget_high_s16(bs), vget_high_s16(mins))));
}

static void NEON_FN(dot_q4_K_q8_K_)(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q4_K *x = vx;
    const bd_block_q8_K *y = vy;
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    float sum = 0;
    for (int64_t b = 0; b < n / BD_QK_K; b++) {
        uint8_t sc[8];
        const int32_t imin = neon_k4_scales(x[b].scales, y[b].bsums, sc);
        const uint8_t *q4 = x[b].qs;
        const int8_t *q8 = y[b].qs;
        int32_t isum = 0;
        for (int j = 0; j < 4; j++, q4 += 32, q8 += 64) {
            const uint8x16_t v0 = vld1q_u8(q4), v1 = vld1q_u8(q4 + 16);
            isum += sc[2 * j] * neon_sum32(vreinterpretq_s8_u8(vandq_u8(v0, m4)), vld1q_s8(q8),
                                           vreinterpretq_s8_u8(vandq_u8(v1, m4)), vld1q_s8(q8 + 16));
            isum += sc[2 * j + 1] * neon_sum32(vreinterpretq_s8_u8(vshrq_n_u8(v0, 4)), vld1q_s8(q8 + 32),
                                               vreinterpretq_s8_u8(vshrq_n_u8(v1, 4)), vld1q_s8(q8 + 48));
        }
        sum = fmaf(-(neon_h2f(x[b].dmin) * y[b].d), (float)imin, sum);
        sum = fmaf(y[b].d * neon_h2f(x[b].d), (float)isum, sum);
    }
    *s = sum;
}

/* Q5_K (x Q8_K): isum and imin as Q4_K's, with q = low nibble + 16 * its qh bit (0..31); per block
 * t = -(float(imin) * (y.d * fp32(x.dmin))), t = fma(y.d * fp32(x.d), float(isum), t), sum = sum + t. */
static void NEON_FN(dot_q5_K_q8_K_)(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q5_K *x = vx;
    const bd_block_q8_K *y = vy;
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m1 = vdupq_n_u8(1), m2 = vdupq_n_u8(2);
    float sum = 0;
    for (int64_t b = 0; b < n / BD_QK_K; b++) {
        uint8_t sc[8];
        const int32_t imin = neon_k4_scales(x[b].scales, y[b].bsums, sc);
        const uint8_t *q5 = x[b].qs;
        const int8_t *q8 = y[b].qs;
        uint8x16_t h0 = vld1q_u8(x[b].qh), h1 = vld1q_u8(x[b].qh + 16);
        int32_t isum = 0;
        for (int j = 0; j < 4; j++, q5 += 32, q8 += 64) {
            const uint8x16_t v0 = vld1q_u8(q5), v1 = vld1q_u8(q5 + 16);
            /* chunk j's fifth bits: bit 2j of qh (low nibbles), bit 2j+1 (high nibbles) */
            const uint8x16_t a0 = vorrq_u8(vandq_u8(v0, m4), vshlq_n_u8(vandq_u8(h0, m1), 4));
            const uint8x16_t a1 = vorrq_u8(vandq_u8(v1, m4), vshlq_n_u8(vandq_u8(h1, m1), 4));
            const uint8x16_t c0 = vorrq_u8(vshrq_n_u8(v0, 4), vshlq_n_u8(vandq_u8(h0, m2), 3));
            const uint8x16_t c1 = vorrq_u8(vshrq_n_u8(v1, 4), vshlq_n_u8(vandq_u8(h1, m2), 3));
            h0 = vshrq_n_u8(h0, 2);
            h1 = vshrq_n_u8(h1, 2);
            isum += sc[2 * j] *
                    neon_sum32(vreinterpretq_s8_u8(a0), vld1q_s8(q8), vreinterpretq_s8_u8(a1), vld1q_s8(q8 + 16));
            isum += sc[2 * j + 1] *
                    neon_sum32(vreinterpretq_s8_u8(c0), vld1q_s8(q8 + 32), vreinterpretq_s8_u8(c1), vld1q_s8(q8 + 48));
        }
        float t = -((float)imin * (y[b].d * neon_h2f(x[b].dmin)));
        t = fmaf(y[b].d * neon_h2f(x[b].d), (float)isum, t);
        sum = sum + t;
    }
    *s = sum;
}

/* Sum of 16 q * y products, as an int32. */
static inline int32_t neon_sum16(uint8x16_t q, const int8_t *y) {
    return vaddvq_s32(NEON_DOT4(vdupq_n_s32(0), vreinterpretq_s8_u8(q), vld1q_s8(y)));
}

static void NEON_FN(dot_q6_K_q8_K_)(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q6_K *x = vx;
    const bd_block_q8_K *y = vy;
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m3 = vdupq_n_u8(3);
    float sum = 0;
    for (int64_t b = 0; b < n / BD_QK_K; b++) {
        const int8x16_t scv = vld1q_s8(x[b].scales);
        const int16x8_t sl = vmovl_s8(vget_low_s8(scv)), sh = vmovl_s8(vget_high_s8(scv));
        const int16x8_t b0 = vld1q_s16(y[b].bsums), b1 = vld1q_s16(y[b].bsums + 8);
        const int32x4_t pm = vaddq_s32(vaddq_s32(vmull_s16(vget_low_s16(b0), vget_low_s16(sl)),
                                                 vmull_s16(vget_high_s16(b0), vget_high_s16(sl))),
                                       vaddq_s32(vmull_s16(vget_low_s16(b1), vget_low_s16(sh)),
                                                 vmull_s16(vget_high_s16(b1), vget_high_s16(sh))));
        const int32_t imin = vaddvq_s32(pm);
        const uint8_t *ql = x[b].ql, *qh = x[b].qh;
        const int8_t *sc = x[b].scales, *q8 = y[b].qs;
        int32_t isum = 0;
        for (int j = 0; j < 2; j++, ql += 64, qh += 32, q8 += 128, sc += 8) {
            const uint8x16_t h0 = vld1q_u8(qh), h1 = vld1q_u8(qh + 16);
            const uint8x16_t l0 = vld1q_u8(ql), l1 = vld1q_u8(ql + 16), l2 = vld1q_u8(ql + 32), l3 = vld1q_u8(ql + 48);
            /* elements 0..63 of the half: low nibbles with qh bits 0-1 (0..31) and 2-3 (32..63) */
            isum += sc[0] * neon_sum16(vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(h0, m3), 4)), q8);
            isum += sc[1] * neon_sum16(vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(h1, m3), 4)), q8 + 16);
            isum += sc[2] *
                    neon_sum16(vorrq_u8(vandq_u8(l2, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(h0, 2), m3), 4)), q8 + 32);
            isum += sc[3] *
                    neon_sum16(vorrq_u8(vandq_u8(l3, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(h1, 2), m3), 4)), q8 + 48);
            /* elements 64..127: high nibbles with qh bits 4-5 (64..95) and 6-7 (96..127) */
            isum += sc[4] *
                    neon_sum16(vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(h0, 4), m3), 4)), q8 + 64);
            isum += sc[5] *
                    neon_sum16(vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(h1, 4), m3), 4)), q8 + 80);
            isum += sc[6] * neon_sum16(vorrq_u8(vshrq_n_u8(l2, 4), vshlq_n_u8(vshrq_n_u8(h0, 6), 4)), q8 + 96);
            isum += sc[7] * neon_sum16(vorrq_u8(vshrq_n_u8(l3, 4), vshlq_n_u8(vshrq_n_u8(h1, 6), 4)), q8 + 112);
        }
        sum = fmaf(neon_h2f(x[b].d) * y[b].d, (float)(isum - 32 * imin), sum);
    }
    *s = sum;
}

/* Q2_K and Q3_K (x Q8_K) share their layout: element 128h + 32g + l has its low 2 bits at bits 2g of byte
 * 32h + l of qs (Q3_K its third bit at bit 4h + g of hmask[l]), and 16-element sub-blocks k with a scale sc[k].
 * Returns isum = the sum over k of sc[k] times the int32 sum of q * y over sub-block k, with q = the 2 bits
 * (hmask NULL: Q2_K, 0..3) or the 3 bits minus 4 (Q3_K, -4..3). */
static inline int32_t NEON_FN(k23_isum_)(const uint8_t *qs, const uint8_t *hmask, const int8_t sc[16],
                                         const int8_t *q8) {
    const uint8x16_t m3 = vdupq_n_u8(3), one = vdupq_n_u8(1);
    const uint8x16_t hb0 = hmask ? vld1q_u8(hmask) : vdupq_n_u8(0), hb1 = hmask ? vld1q_u8(hmask + 16) : vdupq_n_u8(0);
    int32x4_t acc = vdupq_n_s32(0);
    for (int h = 0; h < 2; h++, qs += 32) {
        const uint8x16_t v0 = vld1q_u8(qs), v1 = vld1q_u8(qs + 16);
        for (int g = 0; g < 4; g++, q8 += 32) {
            const int8x16_t shift = vdupq_n_s8((int8_t)(-2 * g)), hshift = vdupq_n_s8((int8_t)(-(4 * h + g)));
            uint8x16_t l0 = vandq_u8(vshlq_u8(v0, shift), m3), l1 = vandq_u8(vshlq_u8(v1, shift), m3);
            int8x16_t q0 = vreinterpretq_s8_u8(l0), q1 = vreinterpretq_s8_u8(l1);
            if (hmask) {
                l0 = vorrq_u8(l0, vshlq_n_u8(vandq_u8(vshlq_u8(hb0, hshift), one), 2));
                l1 = vorrq_u8(l1, vshlq_n_u8(vandq_u8(vshlq_u8(hb1, hshift), one), 2));
                q0 = vsubq_s8(vreinterpretq_s8_u8(l0), vdupq_n_s8(4));
                q1 = vsubq_s8(vreinterpretq_s8_u8(l1), vdupq_n_s8(4));
            }
            const int k = 8 * h + 2 * g;
            acc = vmlaq_n_s32(acc, NEON_DOT4(vdupq_n_s32(0), q0, vld1q_s8(q8)), sc[k]);
            acc = vmlaq_n_s32(acc, NEON_DOT4(vdupq_n_s32(0), q1, vld1q_s8(q8 + 16)), sc[k + 1]);
        }
    }
    return vaddvq_s32(acc);
}

/* Q2_K (x Q8_K): sc[k] = scales[k] & 15, imin = the sum over k of (scales[k] >> 4) * bsums[k]; per block, in
 * order: sum = fma(-(y.d * fp32(x.dmin)), float(imin), sum), sum = fma(y.d * fp32(x.d), float(isum), sum). */
static void NEON_FN(dot_q2_K_q8_K_)(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q2_K *x = vx;
    const bd_block_q8_K *y = vy;
    float sum = 0;
    for (int64_t b = 0; b < n / BD_QK_K; b++) {
        const uint8x16_t scm = vld1q_u8(x[b].scales);
        int8_t sc[16];
        vst1q_s8(sc, vreinterpretq_s8_u8(vandq_u8(scm, vdupq_n_u8(15))));
        const uint8x16_t mn = vshrq_n_u8(scm, 4);
        const int16x8_t m_lo = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mn)));
        const int16x8_t m_hi = vreinterpretq_s16_u16(vmovl_u8(vget_high_u8(mn)));
        const int16x8_t b_lo = vld1q_s16(y[b].bsums), b_hi = vld1q_s16(y[b].bsums + 8);
        int32x4_t pm = vmull_s16(vget_low_s16(m_lo), vget_low_s16(b_lo));
        pm = vmlal_s16(pm, vget_high_s16(m_lo), vget_high_s16(b_lo));
        pm = vmlal_s16(pm, vget_low_s16(m_hi), vget_low_s16(b_hi));
        pm = vmlal_s16(pm, vget_high_s16(m_hi), vget_high_s16(b_hi));
        const int32_t isum = NEON_FN(k23_isum_)(x[b].qs, NULL, sc, y[b].qs);
        sum = fmaf(-(y[b].d * neon_h2f(x[b].dmin)), (float)vaddvq_s32(pm), sum);
        sum = fmaf(y[b].d * neon_h2f(x[b].d), (float)isum, sum);
    }
    *s = sum;
}

/* Q3_K (x Q8_K): sc[k] the 6-bit scales minus 32; per block sum = fma(y.d * fp32(x.d), float(isum), sum). */
static void NEON_FN(dot_q3_K_q8_K_)(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q3_K *x = vx;
    const bd_block_q8_K *y = vy;
    float sum = 0;
    for (int64_t b = 0; b < n / BD_QK_K; b++) {
        int8_t sc[16];
        for (int k = 0; k < 16; k++) sc[k] = (int8_t)bd_q3_K_scale(x[b].scales, k);
        const int32_t isum = NEON_FN(k23_isum_)(x[b].qs, x[b].hmask, sc, y[b].qs);
        sum = fmaf(y[b].d * neon_h2f(x[b].d), (float)isum, sum);
    }
    *s = sum;
}

/* IQ4_XS (x Q8_K): isum = sum over sub-blocks j of (ls_j - 32) * (its 32 kvalue * y); per block
 * sum = fma(fp32(x.d) * y.d, float(isum), sum). */
static void NEON_FN(dot_iq4_xs_q8_K_)(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_iq4_xs *x = vx;
    const bd_block_q8_K *y = vy;
    const int8x16_t values = vld1q_s8(bd_kvalues_iq4nl);
    float sum = 0;
    for (int64_t b = 0; b < n / BD_QK_K; b++) {
        int32_t isum = 0;
        for (int j = 0; j < 8; j++) {
            const int8_t *q8 = y[b].qs + 32 * j;
            int8x16_t lo, hi;
            neon_table_levels(values, x[b].qs + 16 * j, &lo, &hi);
            isum += bd_iq4_xs_scale(&x[b], j) * neon_sum32(lo, vld1q_s8(q8), hi, vld1q_s8(q8 + 16));
        }
        sum = fmaf(neon_h2f(x[b].d) * y[b].d, (float)isum, sum);
    }
    *s = sum;
}

/* The K-quants: vec_dot row by row (its bits by construction), the rows 2 KiB ahead prefetched first (the
 * distance gemv_avx2.c measured best for them). */
static inline void NEON_FN(gemv_rows_)(bd_vec_dot_fn dot, int64_t n, float *s, const void *w, size_t wrow,
                                       int64_t nrows, const void *xq) {
    const uint8_t *W = w;
    const int64_t ahead = wrow >= 2048 ? 1 : (int64_t)(2048 / wrow);
    for (int64_t r = 0; r < nrows; r++) {
        if (r + ahead < nrows)
            for (size_t o = 0; o < wrow; o += 64) __builtin_prefetch(W + (size_t)(r + ahead) * wrow + o, 0, 2);
        dot(n, &s[r], W + (size_t)r * wrow, xq);
    }
}
static void NEON_FN(gemv_q4_K_)(int64_t n, float *s, const void *w, size_t wrow, int64_t nrows, const void *xq) {
    NEON_FN(gemv_rows_)(NEON_FN(dot_q4_K_q8_K_), n, s, w, wrow, nrows, xq);
}
static void NEON_FN(gemv_q5_K_)(int64_t n, float *s, const void *w, size_t wrow, int64_t nrows, const void *xq) {
    NEON_FN(gemv_rows_)(NEON_FN(dot_q5_K_q8_K_), n, s, w, wrow, nrows, xq);
}
static void NEON_FN(gemv_q6_K_)(int64_t n, float *s, const void *w, size_t wrow, int64_t nrows, const void *xq) {
    NEON_FN(gemv_rows_)(NEON_FN(dot_q6_K_q8_K_), n, s, w, wrow, nrows, xq);
}

static void NEON_FN(gemv_q2_K_)(int64_t n, float *s, const void *w, size_t wrow, int64_t nrows, const void *xq) {
    NEON_FN(gemv_rows_)(NEON_FN(dot_q2_K_q8_K_), n, s, w, wrow, nrows, xq);
}
static void NEON_FN(gemv_q3_K_)(int64_t n, float *s, const void *w, size_t wrow, int64_t nrows, const void *xq) {
    NEON_FN(gemv_rows_)(NEON_FN(dot_q3_K_q8_K_), n, s, w, wrow, nrows, xq);
}

/* Registers this level's kernels (each file's fill calls it). */
static void NEON_FN(fill_q_)(bd_dot_traits t[BD_TYPE_COUNT]) {
    t[BD_TYPE_Q8_0].vec_dot = NEON_FN(dot_q8_0_q8_0_);
    t[BD_TYPE_Q4_0].vec_dot = NEON_FN(dot_q4_0_q8_0_);
    t[BD_TYPE_Q5_0].vec_dot = NEON_FN(dot_q5_0_q8_0_);
    t[BD_TYPE_Q4_1].vec_dot = NEON_FN(dot_q4_1_q8_1_);
    t[BD_TYPE_Q5_1].vec_dot = NEON_FN(dot_q5_1_q8_1_);
    t[BD_TYPE_Q2_K].vec_dot = NEON_FN(dot_q2_K_q8_K_);
    t[BD_TYPE_Q3_K].vec_dot = NEON_FN(dot_q3_K_q8_K_);
    t[BD_TYPE_Q4_K].vec_dot = NEON_FN(dot_q4_K_q8_K_);
    t[BD_TYPE_Q5_K].vec_dot = NEON_FN(dot_q5_K_q8_K_);
    t[BD_TYPE_Q6_K].vec_dot = NEON_FN(dot_q6_K_q8_K_);
    t[BD_TYPE_IQ4_NL].vec_dot = NEON_FN(dot_iq4_nl_q8_0_);
    t[BD_TYPE_MXFP4].vec_dot = NEON_FN(dot_mxfp4_q8_0_);
    t[BD_TYPE_IQ4_XS].vec_dot = NEON_FN(dot_iq4_xs_q8_K_);
    t[BD_TYPE_Q8_0].gemv = NEON_FN(gemv_q8_0_);
    t[BD_TYPE_Q4_0].gemv = NEON_FN(gemv_q4_0_);
    t[BD_TYPE_Q5_0].gemv = NEON_FN(gemv_q5_0_);
    t[BD_TYPE_Q4_1].gemv = NEON_FN(gemv_q4_1_);
    t[BD_TYPE_Q5_1].gemv = NEON_FN(gemv_q5_1_);
    t[BD_TYPE_IQ4_NL].gemv = NEON_FN(gemv_iq4_nl_);
    t[BD_TYPE_MXFP4].gemv = NEON_FN(gemv_mxfp4_);
    t[BD_TYPE_Q2_K].gemv = NEON_FN(gemv_q2_K_);
    t[BD_TYPE_Q3_K].gemv = NEON_FN(gemv_q3_K_);
    t[BD_TYPE_Q4_K].gemv = NEON_FN(gemv_q4_K_);
    t[BD_TYPE_Q5_K].gemv = NEON_FN(gemv_q5_K_);
    t[BD_TYPE_Q6_K].gemv = NEON_FN(gemv_q6_K_);
}
