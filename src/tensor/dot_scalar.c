/* dot_scalar.c — portable C dot products for every weight type, and the activation converters.
 *
 * The reference every SIMD variant is tested against, and the fallback for CPUs without AVX2. Within a block
 * the quantized dots are exact integer sums; only the per-block float terms are rounded, in block order.
 * Plain float dots keep 8 partial sums (a fixed, SIMD-like order the compiler can vectorize without
 * reassociating). */
#include <math.h>
#include <string.h>

#include "tensor/dot_impl.h"
#include "tensor/quant.h"

/* ---- activation converters ---- */

void bd_quantize_row_q8_0_act(const float *x, void *dst, int64_t k) {
    bd_block_q8_0 *y = dst;
    for (int64_t i = 0; i < k / BD_QK8_0; i++, x += BD_QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < BD_QK8_0; j++) amax = fmaxf(amax, fabsf(x[j]));
        y[i].d = bd_fp32_to_fp16(amax / 127.f);
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        for (int j = 0; j < BD_QK8_0; j++) {
            const float v = x[j] * id;
            /* ggml rounds with the SIMD round instruction (ties to even) and converts with saturation: a
             * non-finite product (1/amax overflowing for a subnormal block) gives -128, as its int32 pack. */
            if (!(v > -2147483648.0f && v < 2147483648.0f)) {
                y[i].qs[j] = -128;
            } else {
                const int r = fabsf(v) < 4194304.f ? bd_nearest_int(v) : (int)rintf(v); /* |v| <= 127 in practice */
                y[i].qs[j] = (int8_t)(r > 127 ? 127 : r < -128 ? -128 : r);
            }
        }
    }
}

void bd_fp32_to_fp16_act(const float *x, void *dst, int64_t k) { bd_fp32_to_fp16_row(x, dst, k); }
void bd_fp32_to_bf16_act(const float *x, void *dst, int64_t k) { bd_fp32_to_bf16_row(x, dst, k); }
void bd_fp32_copy_act(const float *x, void *dst, int64_t k) { memcpy(dst, x, (size_t)k * sizeof(float)); }

/* ---- float dots ---- */

/* The three float dots differ only in how an element becomes fp32 (TO_F32): 8 accumulators, summed in a fixed
 * tree, then the tail. A macro rather than a function taking a converter, so the conversion stays inline. */
#define SCALAR_FLOAT_DOT(name, T, TO_F32)                                                                           \
    static void name(int64_t n, float *s, const void *vx, const void *vy) {                                        \
        const T *x = vx, *y = vy;                                                                                  \
        float acc[8] = {0};                                                                                        \
        int64_t i = 0;                                                                                             \
        for (; i + 8 <= n; i += 8)                                                                                 \
            for (int k = 0; k < 8; k++) acc[k] += TO_F32(x[i + k]) * TO_F32(y[i + k]);                             \
        float sum = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));             \
        for (; i < n; i++) sum += TO_F32(x[i]) * TO_F32(y[i]);                                                     \
        *s = sum;                                                                                                  \
    }

static inline float f32_id(float v) { return v; }

SCALAR_FLOAT_DOT(dot_f32, float, f32_id)
SCALAR_FLOAT_DOT(dot_f16, uint16_t, bd_fp16_to_fp32)
SCALAR_FLOAT_DOT(dot_bf16, uint16_t, bd_bf16_to_fp32)

/* ---- block-of-32 dots against Q8_0 ---- */

static void dot_q8_0_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q8_0 *x = vx, *y = vy;
    float sum = 0;
    for (int64_t i = 0; i < n / BD_QK8_0; i++) {
        int isum = 0;
        for (int j = 0; j < BD_QK8_0; j++) isum += x[i].qs[j] * y[i].qs[j];
        sum += (float)isum * (bd_fp16_to_fp32(x[i].d) * bd_fp16_to_fp32(y[i].d));
    }
    *s = sum;
}

static void dot_q4_0_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q4_0 *x = vx;
    const bd_block_q8_0 *y = vy;
    float sum = 0;
    for (int64_t i = 0; i < n / BD_QK4_0; i++) {
        int isum = 0;
        for (int j = 0; j < BD_QK4_0 / 2; j++) {
            isum += ((x[i].qs[j] & 0xF) - 8) * y[i].qs[j];
            isum += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + BD_QK4_0 / 2];
        }
        sum += (float)isum * (bd_fp16_to_fp32(x[i].d) * bd_fp16_to_fp32(y[i].d));
    }
    *s = sum;
}

/* ---- K-quant dots against Q8_K ---- */

/* The min term of Q4_K / Q5_K: sum over the 8 sub-blocks of m[j] * (sum of the activations' levels), the
 * latter read from the Q8_K group sums (two groups of 16 per sub-block of 32). */
static int k_min_term(const uint8_t *scales, const int16_t *bsums) {
    int sum = 0;
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        bd_get_scale_min_k4(j, scales, &sc, &m);
        sum += m * (bsums[2 * j] + bsums[2 * j + 1]);
    }
    return sum;
}

static void dot_q4_K_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q4_K *x = vx;
    const bd_block_q8_K *y = vy;
    float sum = 0;
    for (int64_t i = 0; i < n / BD_QK_K; i++) {
        const uint8_t *q = x[i].qs;
        const int8_t *a = y[i].qs;
        int isum = 0;
        for (int j = 0; j < 8; j += 2, q += 32, a += 64) {
            uint8_t sc0, sc1, m;
            bd_get_scale_min_k4(j, x[i].scales, &sc0, &m);
            bd_get_scale_min_k4(j + 1, x[i].scales, &sc1, &m);
            int s0 = 0, s1 = 0;
            for (int l = 0; l < 32; l++) {
                s0 += (q[l] & 0xF) * a[l];
                s1 += (q[l] >> 4) * a[l + 32];
            }
            isum += sc0 * s0 + sc1 * s1;
        }
        const float d = bd_fp16_to_fp32(x[i].d) * y[i].d, dmin = bd_fp16_to_fp32(x[i].dmin) * y[i].d;
        sum += d * (float)isum - dmin * (float)k_min_term(x[i].scales, y[i].bsums);
    }
    *s = sum;
}

static void dot_q5_K_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q5_K *x = vx;
    const bd_block_q8_K *y = vy;
    float sum = 0;
    for (int64_t i = 0; i < n / BD_QK_K; i++) {
        const uint8_t *q = x[i].qs, *qh = x[i].qh;
        const int8_t *a = y[i].qs;
        int isum = 0;
        for (int j = 0; j < 8; j += 2, q += 32, a += 64) {
            uint8_t sc0, sc1, m;
            bd_get_scale_min_k4(j, x[i].scales, &sc0, &m);
            bd_get_scale_min_k4(j + 1, x[i].scales, &sc1, &m);
            int s0 = 0, s1 = 0;
            for (int l = 0; l < 32; l++) {
                s0 += ((q[l] & 0xF) | (((qh[l] >> j) & 1) << 4)) * a[l];
                s1 += ((q[l] >> 4) | (((qh[l] >> (j + 1)) & 1) << 4)) * a[l + 32];
            }
            isum += sc0 * s0 + sc1 * s1;
        }
        const float d = bd_fp16_to_fp32(x[i].d) * y[i].d, dmin = bd_fp16_to_fp32(x[i].dmin) * y[i].d;
        sum += d * (float)isum - dmin * (float)k_min_term(x[i].scales, y[i].bsums);
    }
    *s = sum;
}

static void dot_q6_K_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q6_K *x = vx;
    const bd_block_q8_K *y = vy;
    float sum = 0;
    for (int64_t i = 0; i < n / BD_QK_K; i++) {
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *a = y[i].qs, *sc = x[i].scales;
        int isum = 0;
        /* Two halves of 128; in each, 4 rows of 32 share the ql / qh bytes (nibble and 2-bit field). */
        for (int h = 0; h < 2; h++, ql += 64, qh += 32, a += 128, sc += 8) {
            int part[8] = {0}; /* per sub-block of 16 */
            for (int l = 0; l < 32; l++) {
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                const int is = l / 16;
                part[is + 0] += q1 * a[l];
                part[is + 2] += q2 * a[l + 32];
                part[is + 4] += q3 * a[l + 64];
                part[is + 6] += q4 * a[l + 96];
            }
            for (int k = 0; k < 8; k++) isum += sc[k] * part[k];
        }
        sum += (bd_fp16_to_fp32(x[i].d) * y[i].d) * (float)isum;
    }
    *s = sum;
}

BD_DOT_N_LOOP(dot_f32_n, dot_f32)
BD_DOT_N_LOOP(dot_f16_n, dot_f16)
BD_DOT_N_LOOP(dot_bf16_n, dot_bf16)
BD_DOT_N_LOOP(dot_q8_0_q8_0_n, dot_q8_0_q8_0)
BD_DOT_N_LOOP(dot_q4_0_q8_0_n, dot_q4_0_q8_0)
BD_DOT_N_LOOP(dot_q4_K_q8_K_n, dot_q4_K_q8_K)
BD_DOT_N_LOOP(dot_q5_K_q8_K_n, dot_q5_K_q8_K)
BD_DOT_N_LOOP(dot_q6_K_q8_K_n, dot_q6_K_q8_K)

void bd_dot_fill_scalar(bd_dot_traits t[BD_TYPE_COUNT]) {
    t[BD_TYPE_F32] = (bd_dot_traits){BD_TYPE_F32, dot_f32, bd_fp32_copy_act, dot_f32_n};
    t[BD_TYPE_F16] = (bd_dot_traits){BD_TYPE_F16, dot_f16, bd_fp32_to_fp16_act, dot_f16_n};
    t[BD_TYPE_BF16] = (bd_dot_traits){BD_TYPE_BF16, dot_bf16, bd_fp32_to_bf16_act, dot_bf16_n};
    t[BD_TYPE_Q8_0] = (bd_dot_traits){BD_TYPE_Q8_0, dot_q8_0_q8_0, bd_quantize_row_q8_0_act, dot_q8_0_q8_0_n};
    t[BD_TYPE_Q4_0] = (bd_dot_traits){BD_TYPE_Q8_0, dot_q4_0_q8_0, bd_quantize_row_q8_0_act, dot_q4_0_q8_0_n};
    t[BD_TYPE_Q4_K] = (bd_dot_traits){BD_TYPE_Q8_K, dot_q4_K_q8_K, bd_quantize_row_q8_K_ref, dot_q4_K_q8_K_n};
    t[BD_TYPE_Q5_K] = (bd_dot_traits){BD_TYPE_Q8_K, dot_q5_K_q8_K, bd_quantize_row_q8_K_ref, dot_q5_K_q8_K_n};
    t[BD_TYPE_Q6_K] = (bd_dot_traits){BD_TYPE_Q8_K, dot_q6_K_q8_K, bd_quantize_row_q8_K_ref, dot_q6_K_q8_K_n};
}
