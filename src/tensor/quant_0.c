/* quant_0.c — the block-of-32 formats with one fp16 scale per block: Q8_0 (8-bit) and Q4_0 (4-bit).
 *
 * Quantization follows ggml's reference functions exactly (same rounding rule per format, same float
 * operations), so braid-written blocks equal ggml-written ones. Note the two formats round differently: Q8_0
 * rounds half away from zero (roundf) after multiplying by 1/d, Q4_0 truncates x/d + 8.5. */
#include <math.h>

#include "tensor/quant.h"
#include "tensor/types.h"

static int8_t to_i8(float v) { return (int8_t)bd_trunc_low8(v); }

void bd_quantize_row_q8_0_ref(const float *x, void *dst, int64_t k) {
    bd_block_q8_0 *y = dst;
    const int64_t nb = k / BD_QK8_0;
    for (int64_t i = 0; i < nb; i++, x += BD_QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < BD_QK8_0; j++) {
            const float a = fabsf(x[j]);
            amax = amax > a ? amax : a; /* this order lets a NaN through, as ggml's MAX does */
        }
        const float d = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = bd_fp32_to_fp16(d);
        for (int j = 0; j < BD_QK8_0; j++) y[i].qs[j] = to_i8(roundf(x[j] * id));
    }
}

void bd_dequantize_row_q8_0(const void *src, float *y, int64_t k) {
    const bd_block_q8_0 *x = src;
    const int64_t nb = k / BD_QK8_0;
    for (int64_t i = 0; i < nb; i++) {
        const float d = bd_fp16_to_fp32(x[i].d);
        for (int j = 0; j < BD_QK8_0; j++) *y++ = x[i].qs[j] * d;
    }
}

void bd_quantize_row_q4_0_ref(const float *x, void *dst, int64_t k) {
    bd_block_q4_0 *y = dst;
    const int64_t nb = k / BD_QK4_0;
    for (int64_t i = 0; i < nb; i++, x += BD_QK4_0) {
        /* The scale maps the value of largest magnitude, with its sign, to -8: the one level the
         * asymmetric range [-8, 7] has no positive twin for. */
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < BD_QK4_0; j++) {
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        const float d = max / -8;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = bd_fp32_to_fp16(d);
        for (int j = 0; j < BD_QK4_0 / 2; j++) {
            /* Truncation of x/d + 8.5 is rounding half up to the offset level; the top clamps at 15. */
            int q0 = to_i8(x[j] * id + 8.5f);
            int q1 = to_i8(x[j + BD_QK4_0 / 2] * id + 8.5f);
            if (q0 > 15) q0 = 15;
            if (q1 > 15) q1 = 15;
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void bd_dequantize_row_q4_0(const void *src, float *y, int64_t k) {
    const bd_block_q4_0 *x = src;
    const int64_t nb = k / BD_QK4_0;
    for (int64_t i = 0; i < nb; i++, y += BD_QK4_0) {
        const float d = bd_fp16_to_fp32(x[i].d);
        for (int j = 0; j < BD_QK4_0 / 2; j++) {
            y[j] = ((x[i].qs[j] & 0x0F) - 8) * d;
            y[j + BD_QK4_0 / 2] = ((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}
