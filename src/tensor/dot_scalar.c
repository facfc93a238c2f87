/* dot_scalar.c — portable C dot products for every weight type, and the activation converters.
 *
 * The reference every SIMD variant is tested against, and the fallback for CPUs without AVX2. Each function
 * emulates the float order of ggml's AVX-512 build (dot.h): the same lanes, chains and reduction trees, written
 * with plain arrays, so every level gives the same bits (BF16 excepted). Within a block the quantized sums are
 * exact integers; only how they are split into lanes matters. */
#include <math.h>
#include <string.h>

#include "tensor/dot_impl.h"
#include "tensor/quant.h"

/* ---- activation converters ---- */

#if !defined(__aarch64__)
/* One element of the CPU backend's conversion to 8 bits: ggml rounds with the SIMD round instruction (ties to
 * even) and converts with saturation; a non-finite or huge product gives x86's INT32_MIN. The int32 value and,
 * in *q, the byte the int16/int8 packs make of it. */
static int32_t act_level(float v, int8_t *q) {
    int32_t r;
    if (!(v > -2147483648.0f && v < 2147483648.0f)) r = INT32_MIN;
    else r = fabsf(v) < 4194304.f ? bd_nearest_int(v) : (int32_t)rintf(v); /* |v| <= 127 in practice */
    *q = (int8_t)(r > 127 ? 127 : r < -128 ? -128 : r);
    return r;
}

/* x86 builds multiply by 127 / amax. */
static float act_inv(float amax, float d) {
    (void)d;
    return amax != 0.0f ? 127.f / amax : 0.0f;
}

#else
/* ggml's arm64 builds convert with NEON: d = amax / 127, the multiplier is 1 / d (not 127 / amax), the
 * rounding is fcvtns (to nearest even, saturating; NaN gives 0), and the byte is the int32's low 8 bits. */
static int32_t act_level(float v, int8_t *q) {
    int32_t r;
    if (v != v) r = 0;
    else if (v >= 2147483648.0f) r = INT32_MAX;
    else if (v <= -2147483648.0f) r = INT32_MIN;
    else r = fabsf(v) < 4194304.f ? bd_nearest_int(v) : (int32_t)v; /* from 2^22 up, floats are integers */
    *q = (int8_t)(uint8_t)(uint32_t)r;
    return r;
}

static float act_inv(float amax, float d) {
    (void)amax;
    return d != 0.0f ? 1.0f / d : 0.0f;
}

#endif

/* The bytes of the CPU backend llama.cpp runs on this architecture (act_level and act_inv above): its x86
 * builds' or its arm64 builds'. */
void bd_quantize_row_q8_0_act(const float *x, void *dst, int64_t k) {
    bd_block_q8_0 *y = dst;
    for (int64_t i = 0; i < k / BD_QK8_0; i++, x += BD_QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < BD_QK8_0; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.f, id = act_inv(amax, d);
        y[i].d = bd_fp32_to_fp16(d);
        for (int j = 0; j < BD_QK8_0; j++) act_level(x[j] * id, &y[i].qs[j]);
    }
}

void bd_quantize_row_q8_1_act(const float *x, void *dst, int64_t k) {
    bd_block_q8_1 *y = dst;
    for (int64_t i = 0; i < k / BD_QK32; i++, x += BD_QK32) {
        float amax = 0.0f;
        for (int j = 0; j < BD_QK32; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.f, id = act_inv(amax, d);
        y[i].d = bd_fp32_to_fp16(d);
        uint32_t sum = 0; /* ggml sums the int32 levels before packing them (wrapping, for the INT32_MIN case) */
        for (int j = 0; j < BD_QK32; j++) sum += (uint32_t)act_level(x[j] * id, &y[i].qs[j]);
        y[i].s = bd_fp32_to_fp16(d * (float)(int32_t)sum);
    }
}

void bd_fp32_to_fp16_act(const float *x, void *dst, int64_t k) { bd_fp32_to_fp16_row(x, dst, k); }
void bd_fp32_to_bf16_act(const float *x, void *dst, int64_t k) { bd_fp32_to_bf16_row(x, dst, k); }
void bd_fp32_copy_act(const float *x, void *dst, int64_t k) { memcpy(dst, x, (size_t)k * sizeof(float)); }

/* ---- ggml's float order, emulated (dot.h) ---- */

/* The 16 lanes of a 512-bit register halved 16 -> 8 -> 4 -> 2 -> 1, as _mm512_reduce_add_ps adds them. */
static float reduce16(const float v[16]) {
    float w[8], u[4];
    for (int l = 0; l < 8; l++) w[l] = v[l] + v[l + 8];
    for (int l = 0; l < 4; l++) u[l] = w[l] + w[l + 4];
    return (u[0] + u[2]) + (u[1] + u[3]);
}

/* The 8 lanes of a 256-bit register as ggml's hsum_float_8 adds them. */
static float reduce8(const float v[8]) {
    float u[4];
    for (int l = 0; l < 4; l++) u[l] = v[l] + v[l + 4];
    return (u[0] + u[2]) + (u[1] + u[3]);
}

/* ---- float dots: 4 chains of 16 lanes over the first n & ~63 elements, the tail after ---- */

/* The float dots differ in how an element becomes fp32 (TO_F32) and in the tail (TAIL). A macro rather than a
 * function taking a converter, so the conversion stays inline. In the chains, acc += x * y is a fused
 * multiply-add in ggml; for F16 and BF16 the product is exact in float, so a plain multiply-add is the same. */
#define SCALAR_FLOAT_DOT(name, T, TO_F32, MADD, TAIL)                                                               \
    static void name(int64_t n, float *s, const void *vx, const void *vy) {                                        \
        const T *x = vx, *y = vy;                                                                                  \
        float acc[4][16] = {{0}};                                                                                  \
        const int64_t np = n & ~(int64_t)63;                                                                       \
        for (int64_t i = 0; i < np; i += 64)                                                                       \
            for (int c = 0; c < 4; c++)                                                                            \
                for (int l = 0; l < 16; l++)                                                                       \
                    acc[c][l] = MADD(TO_F32(x[i + 16 * c + l]), TO_F32(y[i + 16 * c + l]), acc[c][l]);             \
        float v[16];                                                                                               \
        for (int l = 0; l < 16; l++) v[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);                     \
        const float r = reduce16(v);                                                                               \
        TAIL                                                                                                       \
    }

static inline float f32_id(float v) { return v; }
static inline float madd_exact(float a, float b, float c) { return a * b + c; }

/* F32: the tail as the AVX-512 build's (dot_impl.h). */
#define F32_TAIL *s = bd_dot_f32_tail(r, x, y, np, n, 7);
/* F16, BF16: the tail in double, rounded once. */
#define WIDE_TAIL(TO_F32)                                                                                          \
    double sum = r;                                                                                                \
    for (int64_t i = np; i < n; i++) sum += (double)(TO_F32(x[i]) * TO_F32(y[i]));                                 \
    *s = (float)sum;

SCALAR_FLOAT_DOT(dot_f32, float, f32_id, fmaf, F32_TAIL)
SCALAR_FLOAT_DOT(dot_f16, uint16_t, bd_fp16_to_fp32, madd_exact, WIDE_TAIL(bd_fp16_to_fp32))
SCALAR_FLOAT_DOT(dot_bf16, uint16_t, bd_bf16_to_fp32, madd_exact, WIDE_TAIL(bd_bf16_to_fp32))

/* ---- block-of-32 dots against Q8_0: ggml's 8-lane chain ---- */

/* One block's integer sums (lane k: elements 4k..4k+3) scaled by d and fused into the 8-lane chain. */
static inline void chain8(float acc[8], float d, const int lane[8]) {
    for (int k = 0; k < 8; k++) acc[k] = fmaf(d, (float)lane[k], acc[k]);
}

static void dot_q8_0_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q8_0 *x = vx, *y = vy;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / BD_QK8_0; i++) {
        int lane[8] = {0};
        for (int j = 0; j < BD_QK8_0; j++) lane[j / 4] += x[i].qs[j] * y[i].qs[j];
        chain8(acc, bd_fp16_to_fp32(x[i].d) * bd_fp16_to_fp32(y[i].d), lane);
    }
    *s = reduce8(acc);
}

static void dot_q4_0_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q4_0 *x = vx;
    const bd_block_q8_0 *y = vy;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / BD_QK4_0; i++) {
        int lane[8] = {0};
        for (int j = 0; j < BD_QK4_0 / 2; j++) {
            lane[j / 4] += ((x[i].qs[j] & 0xF) - 8) * y[i].qs[j];
            lane[(j + BD_QK4_0 / 2) / 4] += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + BD_QK4_0 / 2];
        }
        chain8(acc, bd_fp16_to_fp32(x[i].d) * bd_fp16_to_fp32(y[i].d), lane);
    }
    *s = reduce8(acc);
}

/* The 32-element formats with a minimum (x Q8_1): the 8-lane chain of d_x * d_y, plus the minimum terms
 * m_x * s_y summed in one float (fused: ggml's compiler contracts `summs += m * s`). */
static float dot_min32(int64_t nb, const uint8_t *xb, size_t stride, const bd_block_q8_1 *y, int q5) {
    float acc[8] = {0}, summs = 0;
    for (int64_t i = 0; i < nb; i++, xb += stride) {
        const uint16_t *dm = (const uint16_t *)(const void *)xb; /* d, m */
        const uint8_t *qs = xb + (q5 ? 8 : 4);
        uint32_t qh = 0;
        if (q5) memcpy(&qh, xb + 4, sizeof qh);
        summs = fmaf(bd_fp16_to_fp32(dm[1]), bd_fp16_to_fp32(y[i].s), summs);
        int lane[8] = {0};
        for (int j = 0; j < 16; j++) {
            lane[j / 4] += (int)((qs[j] & 0xF) | (((qh >> j) & 1) << 4)) * y[i].qs[j];
            lane[(j + 16) / 4] += (int)((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) * y[i].qs[j + 16];
        }
        chain8(acc, bd_fp16_to_fp32(dm[0]) * bd_fp16_to_fp32(y[i].d), lane);
    }
    return reduce8(acc) + summs;
}

static void dot_q4_1_q8_1(int64_t n, float *s, const void *vx, const void *vy) {
    *s = dot_min32(n / BD_QK32, vx, sizeof(bd_block_q4_1), vy, 0);
}

static void dot_q5_1_q8_1(int64_t n, float *s, const void *vx, const void *vy) {
    *s = dot_min32(n / BD_QK32, vx, sizeof(bd_block_q5_1), vy, 1);
}

static void dot_q5_0_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q5_0 *x = vx;
    const bd_block_q8_0 *y = vy;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / BD_QK32; i++) {
        uint32_t qh;
        memcpy(&qh, x[i].qh, sizeof qh);
        int lane[8] = {0};
        for (int j = 0; j < 16; j++) {
            lane[j / 4] += ((int)((x[i].qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - 16) * y[i].qs[j];
            lane[(j + 16) / 4] += ((int)((x[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16) * y[i].qs[j + 16];
        }
        chain8(acc, bd_fp16_to_fp32(x[i].d) * bd_fp16_to_fp32(y[i].d), lane);
    }
    *s = reduce8(acc);
}

/* IQ4_NL and MXFP4 (x Q8_0): table values; ggml keeps two chains, one for the even and one for the odd blocks
 * of each pair, adds them lane-wise before the reduction, and fuses an odd last block into the sum alone. */
static float dot_table32(int64_t nb, const uint8_t *xb, size_t stride, const bd_block_q8_0 *y, const int8_t *values,
                         int e8m0) {
    float acc[2][8] = {{0}};
    for (int64_t i = 0; i < nb; i++, xb += stride) {
        const uint8_t *qs = xb + (e8m0 ? 1 : 2);
        const float dx = e8m0 ? bd_e8m0_to_fp32_half(xb[0]) : bd_fp16_to_fp32(*(const uint16_t *)(const void *)xb);
        const float d = bd_fp16_to_fp32(y[i].d) * dx;
        int lane[8] = {0};
        for (int j = 0; j < 16; j++) {
            lane[j / 4] += values[qs[j] & 0xF] * y[i].qs[j];
            lane[(j + 16) / 4] += values[qs[j] >> 4] * y[i].qs[j + 16];
        }
        if (i + 1 < nb || i % 2 == 1) {
            chain8(acc[i % 2], d, lane);
        } else {
            float v[8];
            for (int k = 0; k < 8; k++) v[k] = acc[0][k] + acc[1][k];
            int total = 0;
            for (int k = 0; k < 8; k++) total += lane[k];
            return fmaf(d, (float)total, reduce8(v));
        }
    }
    float v[8];
    for (int k = 0; k < 8; k++) v[k] = acc[0][k] + acc[1][k];
    return reduce8(v);
}

static void dot_iq4_nl_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    *s = dot_table32(n / BD_QK32, vx, sizeof(bd_block_iq4_nl), vy, bd_kvalues_iq4nl, 0);
}

static void dot_mxfp4_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    *s = dot_table32(n / BD_QK32, vx, sizeof(bd_block_mxfp4), vy, bd_kvalues_mxfp4, 1);
}

/* ---- K-quant dots against Q8_K: ggml's 8-lane chain, lane k holding elements with (e % 32) / 4 == k ---- */

/* Q4_K / Q5_K: level q(e) of element e of block x (q5: with the 5th bit). */
static inline int k45_level(const uint8_t *qs, const uint8_t *qh, int e) {
    const int c = e / 64, l = e % 32, hi = (e % 64) >= 32;
    int q = hi ? qs[32 * c + l] >> 4 : qs[32 * c + l] & 0xF;
    if (qh) q |= ((qh[l] >> (2 * c + hi)) & 1) << 4;
    return q;
}

/* The shared body of Q4_K and Q5_K (qh: Q5_K's 5th-bit plane, or NULL). Mins: Q4_K keeps a 4-lane chain (lane
 * k: mins 2k and 2k+1), Q5_K one float; both add -dmin times the integer with a fused multiply-add. */
static float dot_k45(int64_t nb, const uint8_t *xb, size_t stride, const bd_block_q8_K *y, int q5) {
    float acc[8] = {0}, macc[4] = {0}, summ = 0;
    for (int64_t i = 0; i < nb; i++, xb += stride) {
        const uint16_t *dd = (const uint16_t *)(const void *)xb; /* d, dmin */
        const uint8_t *scales = xb + 4;
        const uint8_t *qh = q5 ? xb + 4 + BD_K_SCALE_SIZE : NULL;
        const uint8_t *qs = xb + 4 + BD_K_SCALE_SIZE + (q5 ? BD_QK_K / 8 : 0);
        uint8_t sc[8], m[8];
        for (int j = 0; j < 8; j++) bd_get_scale_min_k4(j, scales, &sc[j], &m[j]);
        int lane[8] = {0};
        for (int e = 0; e < BD_QK_K; e++) lane[(e % 32) / 4] += sc[e / 32] * k45_level(qs, qh, e) * y[i].qs[e];
        const float d = y[i].d * bd_fp16_to_fp32(dd[0]), dmin = -(y[i].d * bd_fp16_to_fp32(dd[1]));
        chain8(acc, d, lane);
        int mlane[4];
        for (int k = 0; k < 4; k++)
            mlane[k] = m[2 * k] * (y[i].bsums[4 * k] + y[i].bsums[4 * k + 1]) +
                       m[2 * k + 1] * (y[i].bsums[4 * k + 2] + y[i].bsums[4 * k + 3]);
        if (q5) {
            summ = fmaf(dmin, (float)(mlane[0] + mlane[1] + mlane[2] + mlane[3]), summ);
        } else {
            for (int k = 0; k < 4; k++) macc[k] = fmaf(dmin, (float)mlane[k], macc[k]);
        }
    }
    return reduce8(acc) + (q5 ? summ : (macc[0] + macc[2]) + (macc[1] + macc[3]));
}

static void dot_q4_K_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    *s = dot_k45(n / BD_QK_K, vx, sizeof(bd_block_q4_K), vy, 0);
}

static void dot_q5_K_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    *s = dot_k45(n / BD_QK_K, vx, sizeof(bd_block_q5_K), vy, 1);
}

/* Q6_K: levels 0..63 (the -32 offset comes out of the activation sums, spread over the lanes as ggml does:
 * lane k gets 32 * (sc[2k] * bsums[2k] + sc[2k+1] * bsums[2k+1])). */
static void dot_q6_K_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q6_K *x = vx;
    const bd_block_q8_K *y = vy;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / BD_QK_K; i++) {
        int lane[8] = {0};
        for (int e = 0; e < BD_QK_K; e++) {
            /* Halves of 128; in each, 4 runs of 32 share the ql bytes (low/high nibble) and the qh bytes. */
            const int h = e / 128, r = (e % 128) / 32, l = e % 32;
            const uint8_t qlb = x[i].ql[64 * h + 32 * (r & 1) + l], qhb = x[i].qh[32 * h + l];
            const int q = ((r < 2 ? qlb & 0xF : qlb >> 4)) | (((qhb >> (2 * r)) & 3) << 4);
            lane[l / 4] += x[i].scales[e / 16] * q * y[i].qs[e];
        }
        for (int k = 0; k < 8; k++)
            lane[k] -= 32 * (x[i].scales[2 * k] * y[i].bsums[2 * k] + x[i].scales[2 * k + 1] * y[i].bsums[2 * k + 1]);
        chain8(acc, y[i].d * bd_fp16_to_fp32(x[i].d), lane);
    }
    *s = reduce8(acc);
}


/* Q2_K / Q3_K: level of element e (128c + 32j + l: bits 2j of byte 32c + l). */
static inline int k23_low(const uint8_t *qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3; }

/* Q2_K: one 8-lane chain taking two fused steps per block, first the mins (lane k: m[2k] * bs[2k] +
 * m[2k+1] * bs[2k+1], times -y.d * dmin), then the levels (lane k: elements with (e % 32) / 4 == k, scale
 * sc[e / 16], times y.d * d). */
static void dot_q2_K_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q2_K *x = vx;
    const bd_block_q8_K *y = vy;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / BD_QK_K; i++) {
        int mlane[8], lane[8] = {0};
        for (int k = 0; k < 8; k++)
            mlane[k] = (x[i].scales[2 * k] >> 4) * y[i].bsums[2 * k] + (x[i].scales[2 * k + 1] >> 4) * y[i].bsums[2 * k + 1];
        chain8(acc, -y[i].d * bd_fp16_to_fp32(x[i].dmin), mlane);
        for (int e = 0; e < BD_QK_K; e++) lane[(e % 32) / 4] += (x[i].scales[e / 16] & 0xF) * k23_low(x[i].qs, e) * y[i].qs[e];
        chain8(acc, y[i].d * bd_fp16_to_fp32(x[i].d), lane);
    }
    *s = reduce8(acc);
}

/* Q3_K: levels -4..3 (low two bits, minus 4 where the hmask bit is clear), signed 6-bit scales. */
static void dot_q3_K_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_q3_K *x = vx;
    const bd_block_q8_K *y = vy;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / BD_QK_K; i++) {
        int sc[16], lane[8] = {0};
        for (int j = 0; j < 16; j++) sc[j] = bd_q3_K_scale(x[i].scales, j);
        for (int e = 0; e < BD_QK_K; e++) {
            const int q = k23_low(x[i].qs, e) - (((x[i].hmask[e % 32] >> (e / 32)) & 1) ? 0 : 4);
            lane[(e % 32) / 4] += sc[e / 16] * q * y[i].qs[e];
        }
        chain8(acc, y[i].d * bd_fp16_to_fp32(x[i].d), lane);
    }
    *s = reduce8(acc);
}

/* IQ4_XS: table values, signed 6-bit scales per 32; one chain, d = fp32(x.d) * y.d. */
static void dot_iq4_xs_q8_K(int64_t n, float *s, const void *vx, const void *vy) {
    const bd_block_iq4_xs *x = vx;
    const bd_block_q8_K *y = vy;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / BD_QK_K; i++) {
        int lane[8] = {0};
        for (int ib = 0; ib < BD_QK_K / 32; ib++) {
            const int ls = bd_iq4_xs_scale(&x[i], ib);
            const uint8_t *qs = x[i].qs + 16 * ib;
            const int8_t *q8 = y[i].qs + 32 * ib;
            for (int j = 0; j < 16; j++) {
                lane[j / 4] += ls * bd_kvalues_iq4nl[qs[j] & 0xF] * q8[j];
                lane[(j + 16) / 4] += ls * bd_kvalues_iq4nl[qs[j] >> 4] * q8[j + 16];
            }
        }
        chain8(acc, bd_fp16_to_fp32(x[i].d) * y[i].d, lane);
    }
    *s = reduce8(acc);
}

/* The portable kernels: a vec_dot for every weight type (the activation side is each type's types.c row). */
void bd_dot_fill_scalar(bd_dot_traits t[BD_TYPE_COUNT]) {
    t[BD_TYPE_F32].vec_dot = dot_f32;
    t[BD_TYPE_F16].vec_dot = dot_f16;
    t[BD_TYPE_BF16].vec_dot = dot_bf16;
    t[BD_TYPE_Q8_0].vec_dot = dot_q8_0_q8_0;
    t[BD_TYPE_Q4_0].vec_dot = dot_q4_0_q8_0;
    t[BD_TYPE_Q4_K].vec_dot = dot_q4_K_q8_K;
    t[BD_TYPE_Q5_K].vec_dot = dot_q5_K_q8_K;
    t[BD_TYPE_Q6_K].vec_dot = dot_q6_K_q8_K;
    t[BD_TYPE_Q4_1].vec_dot = dot_q4_1_q8_1;
    t[BD_TYPE_Q5_0].vec_dot = dot_q5_0_q8_0;
    t[BD_TYPE_Q5_1].vec_dot = dot_q5_1_q8_1;
    t[BD_TYPE_Q2_K].vec_dot = dot_q2_K_q8_K;
    t[BD_TYPE_Q3_K].vec_dot = dot_q3_K_q8_K;
    t[BD_TYPE_IQ4_NL].vec_dot = dot_iq4_nl_q8_0;
    t[BD_TYPE_IQ4_XS].vec_dot = dot_iq4_xs_q8_K;
    t[BD_TYPE_MXFP4].vec_dot = dot_mxfp4_q8_0;
}
