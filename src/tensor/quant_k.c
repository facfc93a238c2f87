/* quant_k.c — the K-quants (super-blocks of 256): Q4_K, Q5_K, Q6_K for weights and Q8_K for activations.
 *
 * The reference quantizers search, per sub-block, for the scale (and min) that minimise a weighted squared
 * error, then quantize the sub-block scales themselves against one fp16 super-block scale, then re-quantize
 * the values with the scales as stored. Each step reproduces ggml's *_ref function bit for bit: the same
 * candidate scales in the same order, the same float expressions with the same association (no FMA: this file
 * is built without an FMA target), the same tie-breaking. Where ggml leaves a sub-block's levels from the search
 * (its stored scale is 0), so does this code, since those bits land in the file. */
#include <math.h>
#include <string.h>

#include "tensor/quant.h"
#include "tensor/types.h"

#define GROUP_EPS 1e-15f /* below this a group's largest magnitude counts as all zero */

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Levels L[i] in [0, nmax] and (scale, min) with x ~ scale * L - min_out, min <= 0, minimising the weighted
 * squared error (use_mad: the weighted absolute error): start from the min/max range, then try nstep+1 stretched ranges (rmin + rdelta*is extra
 * levels) and keep the best least-squares fit. Returns the scale; *neg_min gets -min. */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min,
                           uint8_t *Laux, float rmin, float rdelta, int nstep, int use_mad) {
    float min = x[0], max = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; i++) L[i] = 0;
        *neg_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(bd_nearest_int(iscale * (x[i] - min)), 0, nmax);
        const float diff = scale * L[i] + min - x[i];
        best_error += w[i] * (use_mad ? fabsf(diff) : diff * diff);
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const int l = clampi(bd_nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; i++) {
                const float diff = this_scale * Laux[i] + this_min - x[i];
                cur_error += w[i] * (use_mad ? fabsf(diff) : diff * diff);
            }
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *neg_min = -min;
    return scale;
}

/* Symmetric levels L[i] = l + nmax, l in [-nmax, nmax-1], with x ~ scale * l, weighting each element by x^2:
 * the scale maps the largest magnitude to -nmax, then 18 nearby scales are tried and the best weighted
 * least-squares fit kept. Returns the scale (0 for an all-zero group, with L = 0). */
static float fit_scale_sym(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = clampi(bd_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            const int l = clampi(bd_nearest_int(iscale * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) L[i] = (int8_t)(nmax + clampi(bd_nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* The common first half of Q4_K and Q5_K: fit the 8 sub-blocks of 32, quantize their scales and mins to
 * 6 bits against the super-block's d and dmin, and pick the final levels L (0..nmax) with the stored
 * scales. */
static void quantize_k_scales_mins(const float *x, int nmax, float rmin, int nstep, uint16_t *d_out,
                                   uint16_t *dmin_out, uint8_t scales_out[BD_K_SCALE_SIZE], uint8_t L[BD_QK_K]) {
    float mins[BD_QK_K / 32], scales[BD_QK_K / 32], weights[32];
    uint8_t Laux[32];
    float max_scale = 0, max_min = 0; /* the min is subtracted, so scales are never negative */
    for (int j = 0; j < BD_QK_K / 32; j++) {
        /* Weights favour large values relative to the sub-block's RMS. */
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = fit_scale_min(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, 0);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    memset(scales_out, 0, BD_K_SCALE_SIZE);
    for (int j = 0; j < BD_QK_K / 32; j++) {
        uint8_t ls = (uint8_t)bd_nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)bd_nearest_int(inv_min * mins[j]);
        if (ls > 63) ls = 63;
        if (lm > 63) lm = 63;
        if (j < 4) {
            scales_out[j] = ls;
            scales_out[j + 4] = lm;
        } else {
            scales_out[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            scales_out[j - 4] |= (uint8_t)((ls >> 4) << 6);
            scales_out[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d_out = bd_fp32_to_fp16(max_scale / 63.f);
    *dmin_out = bd_fp32_to_fp16(max_min / 63.f);
    for (int j = 0; j < BD_QK_K / 32; j++) {
        uint8_t sc, m;
        bd_get_scale_min_k4(j, scales_out, &sc, &m);
        const float d = bd_fp16_to_fp32(*d_out) * sc;
        if (d == 0) continue; /* keep the levels from the fit, as ggml does */
        const float dm = bd_fp16_to_fp32(*dmin_out) * m;
        for (int i = 0; i < 32; i++) L[32 * j + i] = (uint8_t)clampi(bd_nearest_int((x[32 * j + i] + dm) / d), 0, nmax);
    }
}

void bd_quantize_row_q4_K_ref(const float *x, void *dst, int64_t k) {
    bd_block_q4_K *y = dst;
    uint8_t L[BD_QK_K];
    for (int64_t i = 0; i < k / BD_QK_K; i++, x += BD_QK_K) {
        quantize_k_scales_mins(x, 15, -1.f, 20, &y[i].d, &y[i].dmin, y[i].scales, L);
        uint8_t *q = y[i].qs;
        for (int j = 0; j < BD_QK_K; j += 64, q += 32)
            for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

void bd_dequantize_row_q4_K(const void *src, float *y, int64_t k) {
    const bd_block_q4_K *x = src;
    for (int64_t i = 0; i < k / BD_QK_K; i++) {
        const uint8_t *q = x[i].qs;
        const float d = bd_fp16_to_fp32(x[i].d), min = bd_fp16_to_fp32(x[i].dmin);
        for (int j = 0; j < 8; j += 2, q += 32) {
            uint8_t sc, m;
            bd_get_scale_min_k4(j, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            bd_get_scale_min_k4(j + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

void bd_quantize_row_q5_K_ref(const float *x, void *dst, int64_t k) {
    bd_block_q5_K *y = dst;
    uint8_t L[BD_QK_K];
    for (int64_t i = 0; i < k / BD_QK_K; i++, x += BD_QK_K) {
        quantize_k_scales_mins(x, 31, -0.5f, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
        uint8_t *qh = y[i].qh, *ql = y[i].qs;
        memset(qh, 0, BD_QK_K / 8);
        uint8_t m1 = 1, m2 = 2;
        for (int n = 0; n < BD_QK_K; n += 64, ql += 32, m1 <<= 2, m2 <<= 2) {
            for (int j = 0; j < 32; j++) {
                int l1 = L[n + j], l2 = L[n + j + 32];
                if (l1 > 15) {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                if (l2 > 15) {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
        }
    }
}

void bd_dequantize_row_q5_K(const void *src, float *y, int64_t k) {
    const bd_block_q5_K *x = src;
    for (int64_t i = 0; i < k / BD_QK_K; i++) {
        const uint8_t *ql = x[i].qs, *qh = x[i].qh;
        const float d = bd_fp16_to_fp32(x[i].d), min = bd_fp16_to_fp32(x[i].dmin);
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0; j < 8; j += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
            uint8_t sc, m;
            bd_get_scale_min_k4(j, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            bd_get_scale_min_k4(j + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

void bd_quantize_row_q6_K_ref(const float *x, void *dst, int64_t k) {
    bd_block_q6_K *y = dst;
    int8_t L[BD_QK_K];
    float scales[BD_QK_K / 16];
    for (int64_t i = 0; i < k / BD_QK_K; i++, x += BD_QK_K) {
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < BD_QK_K / 16; ib++) {
            scales[ib] = fit_scale_sym(16, 32, x + 16 * ib, L + 16 * ib);
            if (fabsf(scales[ib]) > max_abs_scale) {
                max_abs_scale = fabsf(scales[ib]);
                max_scale = scales[ib];
            }
        }
        if (max_abs_scale < GROUP_EPS) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = -128.f / max_scale;
        y[i].d = bd_fp32_to_fp16(1 / iscale);
        for (int ib = 0; ib < BD_QK_K / 16; ib++) {
            const int s = bd_nearest_int(iscale * scales[ib]);
            y[i].scales[ib] = (int8_t)(s < 127 ? s : 127);
        }
        for (int j = 0; j < BD_QK_K / 16; j++) {
            const float d = bd_fp16_to_fp32(y[i].d) * y[i].scales[j];
            if (d == 0) continue; /* keep the levels from the fit, as ggml does */
            for (int ii = 0; ii < 16; ii++)
                L[16 * j + ii] = (int8_t)(clampi(bd_nearest_int(x[16 * j + ii] / d), -32, 31) + 32);
        }
        uint8_t *ql = y[i].ql, *qh = y[i].qh;
        for (int j = 0; j < BD_QK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; l++) {
                const uint8_t q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF;
                const uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
                ql[l] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                  ((L[j + l + 96] >> 4) << 6));
            }
        }
    }
}

void bd_dequantize_row_q6_K(const void *src, float *y, int64_t k) {
    const bd_block_q6_K *x = src;
    for (int64_t i = 0; i < k / BD_QK_K; i++) {
        const float d = bd_fp16_to_fp32(x[i].d);
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int n = 0; n < BD_QK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * sc[is] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}

void bd_quantize_row_q8_K_ref(const float *x, void *dst, int64_t k) {
    bd_block_q8_K *y = dst;
    for (int64_t i = 0; i < k / BD_QK_K; i++, x += BD_QK_K) {
        float max = 0, amax = 0;
        for (int j = 0; j < BD_QK_K; j++) {
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        if (amax == 0) {
            /* ggml leaves bsums unwritten here; braid writes zeros, the true sums. */
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        /* -127 rather than -128 keeps the range symmetric, as ggml chose for its SIMD paths. */
        const float iscale = -127.f / max;
        for (int j = 0; j < BD_QK_K; j++) {
            const int v = bd_nearest_int(iscale * x[j]);
            y[i].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int j = 0; j < BD_QK_K / 16; j++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += y[i].qs[16 * j + l];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}

void bd_dequantize_row_q8_K(const void *src, float *y, int64_t k) {
    const bd_block_q8_K *x = src;
    for (int64_t i = 0; i < k / BD_QK_K; i++)
        for (int j = 0; j < BD_QK_K; j++) *y++ = x[i].d * x[i].qs[j];
}

/* ---- Q2_K and Q3_K: 16 sub-blocks of 16 ---- */

/* Stores 2-bit levels L (256, each 0..3) as Q2_K / Q3_K lay them out: element 128c + 32j + l in bits 2j of
 * byte 32c + l. */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < BD_QK_K; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

void bd_quantize_row_q2_K_ref(const float *x, void *dst, int64_t k) {
    bd_block_q2_K *y = dst;
    uint8_t L[BD_QK_K], Laux[16];
    float weights[16], mins[BD_QK_K / 16], scales[BD_QK_K / 16];
    for (int64_t i = 0; i < k / BD_QK_K; i++, x += BD_QK_K) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < BD_QK_K / 16; j++) {
            for (int l = 0; l < 16; l++) weights[l] = fabsf(x[16 * j + l]);
            scales[j] = fit_scale_min(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, 1);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        /* 4-bit sub-block scales and mins against the fp16 d and dmin */
        if (max_scale > 0) {
            const float iscale = 15.f / max_scale;
            for (int j = 0; j < BD_QK_K / 16; j++) y[i].scales[j] = (uint8_t)bd_nearest_int(iscale * scales[j]);
            y[i].d = bd_fp32_to_fp16(max_scale / 15.f);
        } else {
            memset(y[i].scales, 0, sizeof y[i].scales);
            y[i].d = bd_fp32_to_fp16(0.f);
        }
        if (max_min > 0) {
            const float iscale = 15.f / max_min;
            /* (shifted as unsigned: a non-finite min gives a negative integer, whose low bits ggml keeps) */
            for (int j = 0; j < BD_QK_K / 16; j++)
                y[i].scales[j] |= (uint8_t)((uint32_t)bd_nearest_int(iscale * mins[j]) << 4);
            y[i].dmin = bd_fp32_to_fp16(max_min / 15.f);
        } else {
            y[i].dmin = bd_fp32_to_fp16(0.f);
        }
        for (int j = 0; j < BD_QK_K / 16; j++) {
            const float d = bd_fp16_to_fp32(y[i].d) * (y[i].scales[j] & 0xF);
            if (d == 0) continue; /* keep the levels from the fit, as ggml does */
            const float dm = bd_fp16_to_fp32(y[i].dmin) * (y[i].scales[j] >> 4);
            for (int ii = 0; ii < 16; ii++) L[16 * j + ii] = (uint8_t)clampi(bd_nearest_int((x[16 * j + ii] + dm) / d), 0, 3);
        }
        pack_2bit(L, y[i].qs);
    }
}

void bd_dequantize_row_q2_K(const void *src, float *y, int64_t k) {
    const bd_block_q2_K *x = src;
    for (int64_t i = 0; i < k / BD_QK_K; i++) {
        const float d = bd_fp16_to_fp32(x[i].d), min = bd_fp16_to_fp32(x[i].dmin);
        for (int e = 0; e < BD_QK_K; e++) {
            const uint8_t sc = x[i].scales[e / 16];
            const int q = (x[i].qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            *y++ = d * (sc & 0xF) * q - min * (sc >> 4);
        }
    }
}

/* Q3_K's per-group fit: symmetric levels in [-nmax, nmax-1] with x^2 weights, the start scale from the value
 * of largest magnitude, then up to 5 passes moving single levels while that improves the weighted fit (ggml's
 * make_q3_quants with rmse on). L gets level + nmax; returns the scale. */
static float fit_scale_q3(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]), max = x[i];
    if (amax < GROUP_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.f;
    }
    const float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = clampi(bd_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                const int new_l = clampi(bd_nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (new_l != L[i]) {
                    slx += w * x[i] * new_l;
                    sl2 += w * new_l * new_l;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)new_l, sumlx = slx, suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

void bd_quantize_row_q3_K_ref(const float *x, void *dst, int64_t k) {
    bd_block_q3_K *y = dst;
    int8_t L[BD_QK_K];
    float scales[BD_QK_K / 16];
    for (int64_t i = 0; i < k / BD_QK_K; i++, x += BD_QK_K) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < BD_QK_K / 16; j++) {
            scales[j] = fit_scale_q3(16, 4, x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > amax) amax = fabsf(scales[j]), max_scale = scales[j];
        }
        memset(y[i].scales, 0, sizeof y[i].scales);
        if (max_scale != 0) {
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < BD_QK_K / 16; j++) {
                int8_t l = (int8_t)bd_nearest_int(iscale * scales[j]);
                l = (int8_t)((l < -32 ? -32 : l > 31 ? 31 : l) + 32);
                if (j < 8) y[i].scales[j] = (uint8_t)(l & 0xF);
                else y[i].scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
                y[i].scales[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
            }
            y[i].d = bd_fp32_to_fp16(1 / iscale);
        } else {
            y[i].d = bd_fp32_to_fp16(0.f);
        }
        for (int j = 0; j < BD_QK_K / 16; j++) {
            const float d = bd_fp16_to_fp32(y[i].d) * bd_q3_K_scale(y[i].scales, j);
            if (d == 0) continue; /* keep the levels from the fit, as ggml does */
            for (int ii = 0; ii < 16; ii++) L[16 * j + ii] = (int8_t)(clampi(bd_nearest_int(x[16 * j + ii] / d), -4, 3) + 4);
        }
        /* the third bit of each level into hmask (set: the level is 4..7), the low two bits packed */
        memset(y[i].hmask, 0, sizeof y[i].hmask);
        uint8_t L2[BD_QK_K];
        for (int e = 0; e < BD_QK_K; e++) {
            if (L[e] > 3) y[i].hmask[e % 32] |= (uint8_t)(1u << (e / 32));
            L2[e] = (uint8_t)(L[e] > 3 ? L[e] - 4 : L[e]);
        }
        pack_2bit(L2, y[i].qs);
    }
}

void bd_dequantize_row_q3_K(const void *src, float *y, int64_t k) {
    const bd_block_q3_K *x = src;
    for (int64_t i = 0; i < k / BD_QK_K; i++) {
        const float d = bd_fp16_to_fp32(x[i].d);
        for (int e = 0; e < BD_QK_K; e++) {
            const int q = (x[i].qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            const int h = (x[i].hmask[e % 32] >> (e / 32)) & 1;
            *y++ = d * (float)bd_q3_K_scale(x[i].scales, e / 16) * (q - (h ? 0 : 4));
        }
    }
}
