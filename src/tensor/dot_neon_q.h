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
