/* quant_1.c — the other block-of-32 formats: Q4_1, Q5_1 (scale and minimum), Q5_0 (5-bit symmetric), Q8_1
 * (the activations of Q4_1 / Q5_1 dot products), IQ4_NL (4-bit indices into a non-linear table) and MXFP4
 * (E2M1 values under a power-of-two scale).
 *
 * Quantization reproduces ggml's functions exactly (same float expressions in the same order, same
 * truncations: `(int8_t)(v + 0.5f)` is x86's cvttss2si keeping the low byte), so braid-written blocks equal
 * ggml-written ones; tests/conformance/test_types.c compares them with libggml-base's. */
#include <float.h>
#include <math.h>

#include "tensor/quant.h"
#include "tensor/types.h"

/* The min/max range of a block, as ggml's Q4_1 / Q5_1 quantizers scan it. */
static void block_range(const float *x, float *min, float *max) {
    *min = FLT_MAX, *max = -FLT_MAX;
    for (int j = 0; j < BD_QK32; j++) {
        if (x[j] < *min) *min = x[j];
        if (x[j] > *max) *max = x[j];
    }
}

void bd_quantize_row_q4_1_ref(const float *x, void *dst, int64_t k) {
    bd_block_q4_1 *y = dst;
    for (int64_t i = 0; i < k / BD_QK32; i++, x += BD_QK32) {
        float min, max;
        block_range(x, &min, &max);
        const float d = (max - min) / 15;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = bd_fp32_to_fp16(d);
        y[i].m = bd_fp32_to_fp16(min);
        for (int j = 0; j < BD_QK32 / 2; j++) {
            int q0 = (int8_t)bd_trunc_low8((x[j] - min) * id + 0.5f);
            int q1 = (int8_t)bd_trunc_low8((x[j + 16] - min) * id + 0.5f);
            q0 = q0 < 15 ? q0 : 15, q1 = q1 < 15 ? q1 : 15; /* MIN(15, int8): a negative one stays, then its byte */
            y[i].qs[j] = (uint8_t)((uint8_t)q0 | (uint8_t)(q1 << 4));
        }
    }
}

void bd_dequantize_row_q4_1(const void *src, float *y, int64_t k) {
    const bd_block_q4_1 *x = src;
    for (int64_t i = 0; i < k / BD_QK32; i++, y += BD_QK32) {
        const float d = bd_fp16_to_fp32(x[i].d), m = bd_fp16_to_fp32(x[i].m);
        for (int j = 0; j < BD_QK32 / 2; j++) {
            y[j] = (x[i].qs[j] & 0xF) * d + m;
            y[j + 16] = (x[i].qs[j] >> 4) * d + m;
        }
    }
}

void bd_quantize_row_q5_0_ref(const float *x, void *dst, int64_t k) {
    bd_block_q5_0 *y = dst;
    for (int64_t i = 0; i < k / BD_QK32; i++, x += BD_QK32) {
        /* as Q4_0: the value of largest magnitude, with its sign, maps to level -16 */
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < BD_QK32; j++)
            if (amax < fabsf(x[j])) amax = fabsf(x[j]), max = x[j];
        const float d = max / -16;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = bd_fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < BD_QK32 / 2; j++) {
            int q0 = (int8_t)bd_trunc_low8(x[j] * id + 16.5f), q1 = (int8_t)bd_trunc_low8(x[j + 16] * id + 16.5f);
            const uint8_t b0 = (uint8_t)(q0 < 31 ? q0 : 31), b1 = (uint8_t)(q1 < 31 ? q1 : 31);
            y[i].qs[j] = (uint8_t)((b0 & 0xF) | ((b1 & 0xF) << 4));
            qh |= (uint32_t)((b0 & 0x10) >> 4) << j;
            qh |= (uint32_t)((b1 & 0x10) >> 4) << (j + 16);
        }
        memcpy(y[i].qh, &qh, sizeof qh);
    }
}

void bd_dequantize_row_q5_0(const void *src, float *y, int64_t k) {
    const bd_block_q5_0 *x = src;
    for (int64_t i = 0; i < k / BD_QK32; i++, y += BD_QK32) {
        const float d = bd_fp16_to_fp32(x[i].d);
        uint32_t qh;
        memcpy(&qh, x[i].qh, sizeof qh);
        for (int j = 0; j < BD_QK32 / 2; j++) {
            y[j] = ((int)((x[i].qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - 16) * d;
            y[j + 16] = ((int)((x[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16) * d;
        }
    }
}

void bd_quantize_row_q5_1_ref(const float *x, void *dst, int64_t k) {
    bd_block_q5_1 *y = dst;
    for (int64_t i = 0; i < k / BD_QK32; i++, x += BD_QK32) {
        float min, max;
        block_range(x, &min, &max);
        const float d = (max - min) / 31;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = bd_fp32_to_fp16(d);
        y[i].m = bd_fp32_to_fp16(min);
        uint32_t qh = 0;
        for (int j = 0; j < BD_QK32 / 2; j++) {
            const uint8_t b0 = bd_trunc_low8((x[j] - min) * id + 0.5f), b1 = bd_trunc_low8((x[j + 16] - min) * id + 0.5f);
            y[i].qs[j] = (uint8_t)((b0 & 0xF) | ((b1 & 0xF) << 4));
            qh |= (uint32_t)((b0 & 0x10) >> 4) << j;
            qh |= (uint32_t)((b1 & 0x10) >> 4) << (j + 16);
        }
        memcpy(y[i].qh, &qh, sizeof qh);
    }
}

void bd_dequantize_row_q5_1(const void *src, float *y, int64_t k) {
    const bd_block_q5_1 *x = src;
    for (int64_t i = 0; i < k / BD_QK32; i++, y += BD_QK32) {
        const float d = bd_fp16_to_fp32(x[i].d), m = bd_fp16_to_fp32(x[i].m);
        uint32_t qh;
        memcpy(&qh, x[i].qh, sizeof qh);
        for (int j = 0; j < BD_QK32 / 2; j++) {
            y[j] = ((x[i].qs[j] & 0xF) | (((qh >> j) & 1) << 4)) * d + m;
            y[j + 16] = ((x[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) * d + m;
        }
    }
}

void bd_quantize_row_q8_1_ref(const float *x, void *dst, int64_t k) {
    bd_block_q8_1 *y = dst;
    for (int64_t i = 0; i < k / BD_QK32; i++, x += BD_QK32) {
        float amax = 0.0f;
        for (int j = 0; j < BD_QK32; j++) {
            const float a = fabsf(x[j]);
            amax = amax > a ? amax : a;
        }
        const float d = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = bd_fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < BD_QK32 / 2; j++) { /* roundf, then the low byte (x86's conversion) */
            y[i].qs[j] = (int8_t)bd_trunc_low8(roundf(x[j] * id));
            y[i].qs[j + 16] = (int8_t)bd_trunc_low8(roundf(x[j + 16] * id));
            sum += y[i].qs[j] + y[i].qs[j + 16];
        }
        y[i].s = bd_fp32_to_fp16((float)sum * d);
    }
}

void bd_dequantize_row_q8_1(const void *src, float *y, int64_t k) {
    const bd_block_q8_1 *x = src;
    for (int64_t i = 0; i < k / BD_QK32; i++) {
        const float d = bd_fp16_to_fp32(x[i].d);
        for (int j = 0; j < BD_QK32; j++) *y++ = x[i].qs[j] * d;
    }
}

/* ---- table formats ---- */

/* The index of the table entry nearest x in a sorted table of 16 (ties to the lower one), as ggml finds it. */
static int nearest_level(const int8_t *val, float x) {
    if (x <= val[0]) return 0;
    if (x >= val[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < val[mid]) hi = mid;
        else lo = mid;
    }
    return x - val[hi - 1] < val[hi] - x ? hi - 1 : hi;
}

/* One IQ4_NL-style fit of nb sub-blocks of 32 (nb = 1: IQ4_NL's block; nb = 8: IQ4_XS's super-block): per
 * sub-block, the scale mapping the largest magnitude to the table's end, refined over 15 nearby scales by
 * weighted least squares (weights x^2); for IQ4_XS the sub-block scales are then quantized to 6 bits against
 * one fp16 scale and the levels picked again. Writes *dh, qs (nb * 16 bytes) and, for nb > 1, the scales. */
static void fit_iq4(const float *x, int nb, uint16_t *dh, uint8_t *qs, uint16_t *scales_h, uint8_t *scales_l) {
    const int8_t *values = bd_kvalues_iq4nl;
    const int ntry = 7;
    uint8_t L[BD_QK_K];
    float scales[BD_QK_K / 32], weight[32];
    memset(qs, 0, (size_t)nb * 16);
    *dh = bd_fp32_to_fp16(0.f);
    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < nb; ib++) {
        const float *xb = x + 32 * ib;
        uint8_t *Lb = L + 32 * ib;
        for (int j = 0; j < 32; j++) weight[j] = xb[j] * xb[j];
        float amax = 0, max = 0;
        for (int j = 0; j < 32; j++)
            if (fabsf(xb[j]) > amax) amax = fabsf(xb[j]), max = xb[j];
        if (amax < 1e-15f) {
            scales[ib] = 0;
            for (int j = 0; j < 32; j++) Lb[j] = 0; /* always replaced below: a zero scale picks level 0.0's */
            continue;
        }
        float d = -max / values[0];
        float id = 1 / d;
        float sumqx = 0, sumq2 = 0;
        for (int j = 0; j < 32; j++) {
            const int l = nearest_level(values, id * xb[j]);
            Lb[j] = (uint8_t)l;
            const float q = values[l], w = weight[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
        float best = d * sumqx;
        for (int itry = -ntry; itry <= ntry; itry++) {
            id = (itry + values[0]) / max;
            sumqx = sumq2 = 0;
            for (int j = 0; j < 32; j++) {
                const float q = values[nearest_level(values, id * xb[j])], w = weight[j];
                sumqx += w * q * xb[j];
                sumq2 += w * q * q;
            }
            if (sumq2 > 0 && sumqx * sumqx > best * sumq2) d = sumqx / sumq2, best = d * sumqx;
        }
        scales[ib] = d;
        if (fabsf(d) > amax_scale) amax_scale = fabsf(d), max_scale = d;
    }
    if (nb > 1) {
        *scales_h = 0;
        const float d = -max_scale / 32;
        *dh = bd_fp32_to_fp16(d);
        const float id = d != 0.0f ? 1 / d : 0.f;
        for (int ib = 0; ib < nb; ib++) {
            int l = bd_nearest_int(id * scales[ib]);
            l = l < -32 ? -32 : l > 31 ? 31 : l;
            const float dl = d * l;
            const float idl = dl != 0.0f ? 1 / dl : 0.f;
            for (int j = 0; j < 32; j++) L[32 * ib + j] = (uint8_t)nearest_level(values, idl * x[32 * ib + j]);
            l += 32;
            if (ib % 2 == 0) scales_l[ib / 2] = (uint8_t)(l & 0xF);
            else scales_l[ib / 2] |= (uint8_t)((l & 0xF) << 4);
            *scales_h |= (uint16_t)((l >> 4) << (2 * ib));
        }
    } else {
        *dh = bd_fp32_to_fp16(scales[0]);
        const float id = scales[0] != 0.0f ? 1 / scales[0] : 0;
        for (int j = 0; j < 32; j++) L[j] = (uint8_t)nearest_level(values, id * x[j]);
    }
    for (int i = 0; i < nb; i++)
        for (int j = 0; j < 16; j++) qs[16 * i + j] = (uint8_t)(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

void bd_quantize_row_iq4_nl(const float *x, void *dst, int64_t k) {
    bd_block_iq4_nl *y = dst;
    for (int64_t i = 0; i < k / BD_QK32; i++) fit_iq4(x + 32 * i, 1, &y[i].d, y[i].qs, NULL, NULL);
}

void bd_quantize_row_iq4_xs(const float *x, void *dst, int64_t k) {
    bd_block_iq4_xs *y = dst;
    for (int64_t i = 0; i < k / BD_QK_K; i++)
        fit_iq4(x + BD_QK_K * i, BD_QK_K / 32, &y[i].d, y[i].qs, &y[i].scales_h, y[i].scales_l);
}

/* 32 elements from nibble indices into a table, times d (IQ4_NL, MXFP4, an IQ4_XS sub-block). */
static void dequant_table32(const uint8_t *qs, const int8_t *values, float d, float *y) {
    for (int j = 0; j < 16; j++) {
        y[j] = values[qs[j] & 0xF] * d;
        y[j + 16] = values[qs[j] >> 4] * d;
    }
}

void bd_dequantize_row_iq4_nl(const void *src, float *y, int64_t k) {
    const bd_block_iq4_nl *x = src;
    for (int64_t i = 0; i < k / BD_QK32; i++) dequant_table32(x[i].qs, bd_kvalues_iq4nl, bd_fp16_to_fp32(x[i].d), y + 32 * i);
}

void bd_dequantize_row_iq4_xs(const void *src, float *y, int64_t k) {
    const bd_block_iq4_xs *x = src;
    for (int64_t i = 0; i < k / BD_QK_K; i++) {
        const float d = bd_fp16_to_fp32(x[i].d);
        for (int ib = 0; ib < BD_QK_K / 32; ib++)
            dequant_table32(x[i].qs + 16 * ib, bd_kvalues_iq4nl, d * (float)bd_iq4_xs_scale(&x[i], ib),
                            y + BD_QK_K * i + 32 * ib);
    }
}

/* MXFP4: the best of the 16 values for x under scale e (first of equal errors), as ggml searches. */
static int nearest_fp4(float x, float e) {
    int best = 0;
    float best_err = fabsf(bd_kvalues_mxfp4[0] * e - x);
    for (int i = 1; i < 16; i++) {
        const float err = fabsf(bd_kvalues_mxfp4[i] * e - x);
        if (err < best_err) best = i, best_err = err;
    }
    return best;
}

void bd_quantize_row_mxfp4_ref(const float *x, void *dst, int64_t k) {
    bd_block_mxfp4 *y = dst;
    for (int64_t i = 0; i < k / BD_QK32; i++, x += BD_QK32) {
        float amax = 0.0f;
        for (int j = 0; j < BD_QK32; j++)
            if (amax < fabsf(x[j])) amax = fabsf(x[j]);
        /* the exponent that puts the largest magnitude in the top binade of E2M1 (6 = 1.5 * 2^2) */
        const uint8_t e = amax > 0.0f ? bd_trunc_low8(floorf(log2f(amax)) - 2 + 127) : 0;
        const float d = bd_e8m0_to_fp32_half(e);
        y[i].e = e;
        for (int j = 0; j < BD_QK32 / 2; j++)
            y[i].qs[j] = (uint8_t)(nearest_fp4(x[j], d) | (nearest_fp4(x[j + 16], d) << 4));
    }
}

void bd_dequantize_row_mxfp4(const void *src, float *y, int64_t k) {
    const bd_block_mxfp4 *x = src;
    for (int64_t i = 0; i < k / BD_QK32; i++)
        dequant_table32(x[i].qs, bd_kvalues_mxfp4, bd_e8m0_to_fp32_half(x[i].e), y + 32 * i);
}
