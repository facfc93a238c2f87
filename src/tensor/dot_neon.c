/* dot_neon.c — the plain NEON level on aarch64 (Advanced SIMD, in every aarch64 CPU): the dot products of every
 * weight type, decode gemv kernels and the Q8_0 activation converter, in the float orders of ggml's armv8.0
 * build (libggml-cpu-armv8.0_1.so), which llama.cpp loads on CPUs without dotprod (Cortex-A53/A72: Raspberry
 * Pi 3/4). conformance_dot checks them bit for bit against that build (BRAID_SIMD=neon BRAID_GGML_CPU=armv8.0_1).
 *
 * F32, BF16 and the Q8_0 converter are the same in every non-SVE arm64 build of ggml, so the dotprod level keeps
 * them (it has its own F16); the block dots come from dot_neon_q.h with this build's lane grouping. */
#include <arm_neon.h>
#include <math.h>

#include "tensor/dot_impl.h"
#include "tensor/neon_dot4.h"
#include "tensor/quant.h"

#define NEON_DOT4 bd_neon_dot4_pairs /* ggml's armv8.0 stand-in for SDOT */
#define NEON_SUFFIX neon
#include "tensor/dot_neon_q.h"

/* F32: ggml's NEON vec_dot_f32 (no SVE): 4 chains of 4 lanes over the first np = n & ~15 elements (element
 * i + 4c + l fused into chain c, lane l), v = (c0 + c2) + (c1 + c3), then (v0 + v1) + (v2 + v3); the tail as
 * the compiler built ggml's leftover loop: products of the first (n - np) & ~7 rounded, the rest fused
 * (dot_impl.h's bd_dot_f32_tail; read off the machine code of ggml_vec_dot_f32 in the armv8.0 / 8.2 builds). */
static void dot_f32_neon(int64_t n, float *s, const void *vx, const void *vy) {
    const float *x = vx, *y = vy;
    const int64_t np = n & ~(int64_t)15;
    float32x4_t c0 = vdupq_n_f32(0), c1 = vdupq_n_f32(0), c2 = vdupq_n_f32(0), c3 = vdupq_n_f32(0);
    for (int64_t i = 0; i < np; i += 16) {
        c0 = vfmaq_f32(c0, vld1q_f32(x + i), vld1q_f32(y + i));
        c1 = vfmaq_f32(c1, vld1q_f32(x + i + 4), vld1q_f32(y + i + 4));
        c2 = vfmaq_f32(c2, vld1q_f32(x + i + 8), vld1q_f32(y + i + 8));
        c3 = vfmaq_f32(c3, vld1q_f32(x + i + 12), vld1q_f32(y + i + 12));
    }
    const float sum = vaddvq_f32(vaddq_f32(vaddq_f32(c0, c2), vaddq_f32(c1, c3)));
    *s = bd_dot_f32_tail(sum, x, y, np, n, 7);
}

/* F16: ggml's armv8.0 build widens the halves to float (it has no FP16 arithmetic): F32's 4 chains of 4 lanes
 * over np = n & ~15 and its reduction, then neon_f16_tail (the products in double). */
static void dot_f16_neon(int64_t n, float *s, const void *vx, const void *vy) {
    const uint16_t *x = vx, *y = vy;
    const int64_t np = n & ~(int64_t)15;
    float32x4_t c[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
    for (int64_t i = 0; i < np; i += 16)
        for (int k = 0; k < 4; k++)
            c[k] = vfmaq_f32(c[k], vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x + i + 4 * k))),
                             vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(y + i + 4 * k))));
    const float head = vaddvq_f32(vaddq_f32(vaddq_f32(c[0], c[2]), vaddq_f32(c[1], c[3])));
    *s = np == n ? head : neon_f16_tail(head, x, y, np, n);
}

/* BF16: no arm64 build of ggml below armv8.6 has a vector path; its plain loop rounds each product to float
 * (exact, but for overflow and underflow) and adds them in double, in order, rounded to float once. The
 * products are made four at a time here; the sum stays the sequential one. */
static void dot_bf16_neon(int64_t n, float *s, const void *vx, const void *vy) {
    const uint16_t *x = vx, *y = vy;
    double sum = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float p[4];
        vst1q_f32(p, vmulq_f32(vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(x + i), 16)),
                               vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(y + i), 16))));
        sum = (((sum + p[0]) + p[1]) + p[2]) + p[3];
    }
    for (; i < n; i++) sum += (double)(bd_bf16_to_fp32(x[i]) * bd_bf16_to_fp32(y[i]));
    *s = (float)sum;
}

/* Q8_0 activations, the bytes of dot_scalar.c's aarch64 converter (ggml's NEON quantize_row_q8_0): d = amax /
 * 127, x * (1 / d) rounded to nearest even (FCVTNS), the int32's low byte. */
static void quantize_q8_0_neon(const float *x, void *dst, int64_t k) {
    bd_block_q8_0 *y = dst;
    for (int64_t i = 0; i < k / BD_QK8_0; i++, x += BD_QK8_0) {
        float32x4_t v[8], m = vdupq_n_f32(0);
        for (int j = 0; j < 8; j++) {
            v[j] = vld1q_f32(x + 4 * j);
            m = vmaxq_f32(m, vabsq_f32(v[j]));
        }
        const float amax = vmaxvq_f32(m);
        const float d = amax / 127.f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = bd_fp32_to_fp16(d);
        for (int j = 0; j < 8; j += 2) {
            const int32x4_t a = vcvtnq_s32_f32(vmulq_n_f32(v[j], id)), b = vcvtnq_s32_f32(vmulq_n_f32(v[j + 1], id));
            const int16x8_t h = vcombine_s16(vmovn_s32(a), vmovn_s32(b)); /* low halves: the low byte survives */
            vst1_s8(y[i].qs + 4 * j, vmovn_s16(h));
        }
    }
}

void bd_dot_fill_neon(bd_dot_traits t[BD_TYPE_COUNT]) {
    t[BD_TYPE_F32].vec_dot = dot_f32_neon;
    t[BD_TYPE_F16].vec_dot = dot_f16_neon;
    t[BD_TYPE_BF16].vec_dot = dot_bf16_neon;
    fill_q_neon(t);
    for (int ty = 0; ty < BD_TYPE_COUNT; ty++)
        if (t[ty].from_float && t[ty].vec_dot_type == BD_TYPE_Q8_0) t[ty].from_float = quantize_q8_0_neon;
}
