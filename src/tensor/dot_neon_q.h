/* dot_neon_q.h — the NEON dot products of the 32-element block types, written once for both aarch64 levels.
 *
 * Included by dot_neon.c (plain Advanced SIMD) and dot_neon_dot.c (with the dotprod extension) after each has
 * defined NEON_DOT4(acc, a, b): acc plus the products of the int8 vectors a and b, summed four at a time into
 * the four int32 lanes. What lands in which lane is the float order's business (each lane is converted to
 * float on its own), so each file's NEON_DOT4 must group the products as the ggml build it pairs with does:
 * SDOT puts elements 4k..4k+3 in lane k (armv8.2_2); ggml's armv8.0 build widens with SMULL and pairs with
 * SADDLP, so lane k gets elements 2k, 2k+1, 8+2k, 9+2k. NEON_SUFFIX names the functions.
 *
 * The float order of both (read off ggml's arm64 builds, clang, with fused multiply-adds):
 *   Q8_0, Q4_0 (x Q8_0): two chains of 4 float lanes, even blocks in one and odd blocks in the other; per block,
 *     lane k = the int32 lane sum over the block's two 16-byte halves, acc = fma(float(lane), d, acc) with
 *     d = fp32(x.d) * fp32(y.d) rounded. Result (a0 + a1) + (a2 + a3) of each chain (FADDP), even chain + odd
 *     chain. An odd last block is added after that as a scalar: Q8_0 fma(float(isum), d, sum); Q4_0
 *     fma(float(isum) * fp32(x.d), fp32(y.d), sum). */
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "tensor/quant.h"

#define NEON_CAT2(a, b) a##b
#define NEON_CAT(a, b) NEON_CAT2(a, b)
#define NEON_FN(name) NEON_CAT(name, NEON_SUFFIX)

static inline float neon_hadd4(float32x4_t v) { return vaddvq_f32(v); } /* (a0 + a1) + (a2 + a3) */

/* fp16 -> fp32 with the FCVT instruction (exact, as bd_fp16_to_fp32, without the call). */
static inline float neon_h2f(uint16_t h) {
    __fp16 f;
    memcpy(&f, &h, sizeof f);
    return (float)f;
}

static void NEON_FN(dot_q8_0_q8_0_)(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q8_0 *x = vx, *y = vy;
    const int64_t nb = n / BD_QK8_0;
    float32x4_t acc0 = vdupq_n_f32(0), acc1 = vdupq_n_f32(0);
    int64_t b = 0;
    for (; b + 1 < nb; b += 2) {
        const int32x4_t p0 = vaddq_s32(NEON_DOT4(vdupq_n_s32(0), vld1q_s8(x[b].qs), vld1q_s8(y[b].qs)),
                                       NEON_DOT4(vdupq_n_s32(0), vld1q_s8(x[b].qs + 16), vld1q_s8(y[b].qs + 16)));
        const int32x4_t p1 =
            vaddq_s32(NEON_DOT4(vdupq_n_s32(0), vld1q_s8(x[b + 1].qs), vld1q_s8(y[b + 1].qs)),
                      NEON_DOT4(vdupq_n_s32(0), vld1q_s8(x[b + 1].qs + 16), vld1q_s8(y[b + 1].qs + 16)));
        const float d0 = neon_h2f(x[b].d) * neon_h2f(y[b].d);
        const float d1 = neon_h2f(x[b + 1].d) * neon_h2f(y[b + 1].d);
        acc0 = vfmaq_n_f32(acc0, vcvtq_f32_s32(p0), d0);
        acc1 = vfmaq_n_f32(acc1, vcvtq_f32_s32(p1), d1);
    }
    float sum = neon_hadd4(acc0) + neon_hadd4(acc1);
    for (; b < nb; b++) {
        int32_t isum = 0;
        for (int j = 0; j < BD_QK8_0; j++) isum += x[b].qs[j] * y[b].qs[j];
        sum = fmaf((float)isum, neon_h2f(x[b].d) * neon_h2f(y[b].d), sum);
    }
    *s = sum;
}

/* The 32 levels of a Q4_0 block minus 8, elements 0..15 (low nibbles) and 16..31 (high nibbles). */
static inline void neon_q4_0_levels(const bd_block_q4_0 *x, int8x16_t *lo, int8x16_t *hi) {
    const uint8x16_t v = vld1q_u8(x->qs);
    *lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0f))), vdupq_n_s8(8));
    *hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), vdupq_n_s8(8));
}

static void NEON_FN(dot_q4_0_q8_0_)(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q4_0 *x = vx;
    const bd_block_q8_0 *y = vy;
    const int64_t nb = n / BD_QK4_0;
    float32x4_t acc0 = vdupq_n_f32(0), acc1 = vdupq_n_f32(0);
    int64_t b = 0;
    for (; b + 1 < nb; b += 2) {
        int8x16_t l0, h0, l1, h1;
        neon_q4_0_levels(&x[b], &l0, &h0);
        neon_q4_0_levels(&x[b + 1], &l1, &h1);
        const int32x4_t p0 = NEON_DOT4(NEON_DOT4(vdupq_n_s32(0), l0, vld1q_s8(y[b].qs)), h0, vld1q_s8(y[b].qs + 16));
        const int32x4_t p1 =
            NEON_DOT4(NEON_DOT4(vdupq_n_s32(0), l1, vld1q_s8(y[b + 1].qs)), h1, vld1q_s8(y[b + 1].qs + 16));
        acc0 = vfmaq_n_f32(acc0, vcvtq_f32_s32(p0), neon_h2f(x[b].d) * neon_h2f(y[b].d));
        acc1 = vfmaq_n_f32(acc1, vcvtq_f32_s32(p1), neon_h2f(x[b + 1].d) * neon_h2f(y[b + 1].d));
    }
    float sum = neon_hadd4(acc0) + neon_hadd4(acc1);
    for (; b < nb; b++) {
        int32_t isum = 0;
        for (int j = 0; j < BD_QK4_0 / 2; j++)
            isum += ((x[b].qs[j] & 0x0f) - 8) * y[b].qs[j] + ((x[b].qs[j] >> 4) - 8) * y[b].qs[j + 16];
        sum = fmaf((float)isum * neon_h2f(x[b].d), neon_h2f(y[b].d), sum);
    }
    *s = sum;
}

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

/* The IQ4 levels of 16 nibble indices (TBL into the non-linear table). */
static inline int8x16_t neon_iq4_levels(uint8x16_t idx) { return vqtbl1q_s8(vld1q_s8(bd_kvalues_iq4nl), idx); }

/* The int32 sum over a 32-element IQ4 block (16 bytes of nibbles: low ones elements 0..15) against y. */
static inline int32_t NEON_FN(iq4_sum32_)(const uint8_t *qs, const int8_t *y) {
    const uint8x16_t v = vld1q_u8(qs);
    return vaddvq_s32(NEON_DOT4(NEON_DOT4(vdupq_n_s32(0), neon_iq4_levels(vandq_u8(v, vdupq_n_u8(0x0f))), vld1q_s8(y)),
                                neon_iq4_levels(vshrq_n_u8(v, 4)), vld1q_s8(y + 16)));
}

/* IQ4_NL (x Q8_0): blocks in pairs, t = (fp32(x1.d) * fp32(y1.d)) * float(isum1) rounded, then
 * t = fma(fp32(x0.d) * fp32(y0.d), float(isum0), t) (the compiler fused the first product of ggml's
 * a*b + c*d), sum = sum + t; an odd last block: sum = fma(fp32(y.d) * fp32(x.d), float(isum), sum). */
static void NEON_FN(dot_iq4_nl_q8_0_)(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_iq4_nl *x = vx;
    const bd_block_q8_0 *y = vy;
    const int64_t nb = n / BD_QK32;
    float sum = 0;
    int64_t b = 0;
    for (; b + 1 < nb; b += 2) {
        const int32_t i0 = NEON_FN(iq4_sum32_)(x[b].qs, y[b].qs), i1 = NEON_FN(iq4_sum32_)(x[b + 1].qs, y[b + 1].qs);
        float t = neon_h2f(x[b + 1].d) * neon_h2f(y[b + 1].d) * (float)i1;
        t = fmaf(neon_h2f(x[b].d) * neon_h2f(y[b].d), (float)i0, t);
        sum = sum + t;
    }
    for (; b < nb; b++)
        sum = fmaf(neon_h2f(y[b].d) * neon_h2f(x[b].d), (float)NEON_FN(iq4_sum32_)(x[b].qs, y[b].qs), sum);
    *s = sum;
}

/* IQ4_XS (x Q8_K): isum = sum over sub-blocks j of (ls_j - 32) * (its 32 kvalue * y); per block
 * sum = fma(fp32(x.d) * y.d, float(isum), sum). */
static void NEON_FN(dot_iq4_xs_q8_K_)(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_iq4_xs *x = vx;
    const bd_block_q8_K *y = vy;
    float sum = 0;
    for (int64_t b = 0; b < n / BD_QK_K; b++) {
        int32_t isum = 0;
        for (int j = 0; j < 8; j++)
            isum += bd_iq4_xs_scale(&x[b], j) * NEON_FN(iq4_sum32_)(x[b].qs + 16 * j, y[b].qs + 32 * j);
        sum = fmaf(neon_h2f(x[b].d) * y[b].d, (float)isum, sum);
    }
    *s = sum;
}

/* ---- decode gemv (gemv.h): Q8_0 and Q4_0, 4 rows at once ---- */

/* The int32 lanes of one 32-element block of row bytes qs (Q8_0 levels, or Q4_0 nibbles minus 8) against the
 * activation halves y0, y1, grouped as vec_dot groups them. */
static inline int32x4_t NEON_FN(blk32_)(const uint8_t *qs, int8x16_t y0, int8x16_t y1, int q4) {
    if (q4) {
        const uint8x16_t v = vld1q_u8(qs);
        const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0f))), vdupq_n_s8(8));
        const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), vdupq_n_s8(8));
        return NEON_DOT4(NEON_DOT4(vdupq_n_s32(0), lo, y0), hi, y1);
    }
    const int8_t *q = (const int8_t *)qs;
    return vaddq_s32(NEON_DOT4(vdupq_n_s32(0), vld1q_s8(q), y0), NEON_DOT4(vdupq_n_s32(0), vld1q_s8(q + 16), y1));
}

/* R (<= 4) rows rp against y: per row exactly vec_dot's even and odd chains and its tail; the activation
 * blocks are loaded once for the R rows, and pf_len bytes at pf (the next rows) prefetched along the way. */
static inline void NEON_FN(b32_rows_)(int64_t nb, size_t bsz, const uint8_t *const *rp, const bd_block_q8_0 *y,
                                      float *out, const int R, const int q4, const uint8_t *pf, size_t pf_len) {
    float32x4_t a0[4], a1[4];
    for (int r = 0; r < R; r++) a0[r] = a1[r] = vdupq_n_f32(0);
    int64_t b = 0;
    const size_t pf_step = nb > 1 ? (pf_len + (size_t)nb / 2 - 1) / ((size_t)nb / 2) : pf_len;
    for (size_t o = 0; b + 1 < nb; b += 2, o += pf_step) {
        if (pf)
            for (size_t p = o & ~(size_t)63; p < o + pf_step && p < pf_len; p += 64) __builtin_prefetch(pf + p, 0, 2);
        const int8x16_t y00 = vld1q_s8(y[b].qs), y01 = vld1q_s8(y[b].qs + 16);
        const int8x16_t y10 = vld1q_s8(y[b + 1].qs), y11 = vld1q_s8(y[b + 1].qs + 16);
        const float yd0 = neon_h2f(y[b].d), yd1 = neon_h2f(y[b + 1].d);
        for (int r = 0; r < R; r++) {
            const uint8_t *x0 = rp[r] + (size_t)b * bsz, *x1 = x0 + bsz;
            uint16_t h0, h1;
            memcpy(&h0, x0, 2);
            memcpy(&h1, x1, 2);
            const int32x4_t p0 = NEON_FN(blk32_)(x0 + 2, y00, y01, q4), p1 = NEON_FN(blk32_)(x1 + 2, y10, y11, q4);
            a0[r] = vfmaq_n_f32(a0[r], vcvtq_f32_s32(p0), neon_h2f(h0) * yd0);
            a1[r] = vfmaq_n_f32(a1[r], vcvtq_f32_s32(p1), neon_h2f(h1) * yd1);
        }
    }
    for (int r = 0; r < R; r++) {
        float sum = neon_hadd4(a0[r]) + neon_hadd4(a1[r]);
        if (b < nb) { /* vec_dot's scalar last block */
            const uint8_t *x = rp[r] + (size_t)b * bsz;
            uint16_t h;
            memcpy(&h, x, 2);
            const int32_t isum = vaddvq_s32(NEON_FN(blk32_)(x + 2, vld1q_s8(y[b].qs), vld1q_s8(y[b].qs + 16), q4));
            sum = q4 ? fmaf((float)isum * neon_h2f(h), neon_h2f(y[b].d), sum)
                     : fmaf((float)isum, neon_h2f(h) * neon_h2f(y[b].d), sum);
        }
        out[r] = sum;
    }
}

static inline void NEON_FN(gemv_b32_)(int64_t n, float *s, const void *w, size_t wrow, int64_t nrows,
                                      const void *xq, size_t bsz, int q4) {
    const int64_t nb = n / BD_QK8_0;
    const uint8_t *W = w;
    int64_t r = 0;
    for (size_t o = 0; o < (size_t)(nrows < 4 ? nrows : 4) * wrow; o += 64) __builtin_prefetch(W + o, 0, 2);
    for (; r + 4 <= nrows; r += 4) {
        const uint8_t *rp[4] = {W + (size_t)r * wrow, W + (size_t)(r + 1) * wrow, W + (size_t)(r + 2) * wrow,
                                W + (size_t)(r + 3) * wrow};
        NEON_FN(b32_rows_)(nb, bsz, rp, xq, s + r, 4, q4, r + 8 <= nrows ? W + (size_t)(r + 4) * wrow : NULL,
                           4 * wrow);
    }
    for (; r < nrows; r++) {
        const uint8_t *rp[1] = {W + (size_t)r * wrow};
        NEON_FN(b32_rows_)(nb, bsz, rp, xq, s + r, 1, q4, NULL, 0);
    }
}

static void NEON_FN(gemv_q8_0_)(int64_t n, float *s, const void *w, size_t wrow, int64_t nrows, const void *xq) {
    NEON_FN(gemv_b32_)(n, s, w, wrow, nrows, xq, sizeof(bd_block_q8_0), 0);
}
static void NEON_FN(gemv_q4_0_)(int64_t n, float *s, const void *w, size_t wrow, int64_t nrows, const void *xq) {
    NEON_FN(gemv_b32_)(n, s, w, wrow, nrows, xq, sizeof(bd_block_q4_0), 1);
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

/* Registers this level's kernels (each file's fill calls it). */
static void NEON_FN(fill_q_)(bd_dot_traits t[BD_TYPE_COUNT]) {
    t[BD_TYPE_Q8_0].vec_dot = NEON_FN(dot_q8_0_q8_0_);
    t[BD_TYPE_Q4_0].vec_dot = NEON_FN(dot_q4_0_q8_0_);
    t[BD_TYPE_Q4_K].vec_dot = NEON_FN(dot_q4_K_q8_K_);
    t[BD_TYPE_Q5_K].vec_dot = NEON_FN(dot_q5_K_q8_K_);
    t[BD_TYPE_Q6_K].vec_dot = NEON_FN(dot_q6_K_q8_K_);
    t[BD_TYPE_IQ4_NL].vec_dot = NEON_FN(dot_iq4_nl_q8_0_);
    t[BD_TYPE_IQ4_XS].vec_dot = NEON_FN(dot_iq4_xs_q8_K_);
    t[BD_TYPE_Q8_0].gemv = NEON_FN(gemv_q8_0_);
    t[BD_TYPE_Q4_0].gemv = NEON_FN(gemv_q4_0_);
    t[BD_TYPE_Q4_K].gemv = NEON_FN(gemv_q4_K_);
    t[BD_TYPE_Q5_K].gemv = NEON_FN(gemv_q5_K_);
    t[BD_TYPE_Q6_K].gemv = NEON_FN(gemv_q6_K_);
}
