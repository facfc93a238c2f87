/* dot_neon_dot.c — the dotprod level on aarch64 (ARMv8.2 SDOT with FP16 arithmetic: Cortex-A76, Neoverse N1,
 * Apple M1 and later), in the float orders of ggml's armv8.2_2 build, which llama.cpp loads on such CPUs.
 * CMake compiles this file alone with -march=armv8.2-a+dotprod+fp16; dot.c calls its fill only when HWCAP says
 * the CPU has both (cpu.c). conformance_dot checks it bit for bit against that build.
 *
 * The block dots come from dot_neon_q.h with SDOT's lane grouping (lane k = elements 4k..4k+3); F16 is this
 * file's (half-precision arithmetic); F32, BF16 and the Q8_0 converter are the plain NEON level's (the same code
 * in ggml's non-SVE builds). */
#include <arm_neon.h>

#include "tensor/dot_impl.h"

#define NEON_DOT4 vdotq_s32
#define NEON_SUFFIX dot
#include "tensor/dot_neon_q.h"

/* F16: ggml's armv8.2_2 build multiplies and adds in half precision: 4 chains c of 8 half lanes over np = n & ~31
 * (element i + 8c + l fused into chain c, lane l, each result rounded to half), (c0 + c2) + (c1 + c3) in half,
 * then widened to float: u[l] = v[l] + v[l+4], (u0 + u1) + (u2 + u3); the tail as the neon level's. */
static void dot_f16_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const uint16_t *x = vx, *y = vy;
    const int64_t np = n & ~(int64_t)31;
    float16x8_t c[4];
    for (int k = 0; k < 4; k++) c[k] = vreinterpretq_f16_u16(vdupq_n_u16(0));
    for (int64_t i = 0; i < np; i += 32)
        for (int k = 0; k < 4; k++)
            c[k] = vfmaq_f16(c[k], vreinterpretq_f16_u16(vld1q_u16(x + i + 8 * k)),
                             vreinterpretq_f16_u16(vld1q_u16(y + i + 8 * k)));
    const float16x8_t v = vaddq_f16(vaddq_f16(c[0], c[2]), vaddq_f16(c[1], c[3]));
    const float head = vaddvq_f32(vaddq_f32(vcvt_f32_f16(vget_low_f16(v)), vcvt_high_f32_f16(v)));
    *s = np == n ? head : neon_f16_tail(head, x, y, np, n);
}

void bd_dot_fill_neon_dot(bd_dot_traits t[BD_TYPE_COUNT]) {
    t[BD_TYPE_F16].vec_dot = dot_f16_dot;
    fill_q_dot(t);
}
