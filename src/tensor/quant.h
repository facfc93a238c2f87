/* quant.h — block layouts of the quantized formats and their reference (de)quantizers.
 *
 * The layouts are ggml's, byte for byte, because GGUF files store these blocks as they are. Every format
 * stores, per block, one or two fp16 scales and packed small integers; a value is scale * q (- min). The
 * K-quants group 256 values in a super-block holding 8 or 16 sub-block scales, themselves quantized against
 * the super-block's fp16 scale. The quantizers here reproduce ggml's *_ref functions bit for bit (same search
 * for the best scale, same float operation order), so a file braid writes equals one ggml would write.
 * Kernels read these structs directly; tensor/types.c exposes the functions through the traits table. */
#ifndef BRAID_TENSOR_QUANT_H
#define BRAID_TENSOR_QUANT_H

#include <stdint.h>
#include <string.h>

#define BD_QK4_0 32
#define BD_QK8_0 32
#define BD_QK32 32 /* the other block-of-32 formats: Q4_1, Q5_0, Q5_1, Q8_1, IQ4_NL, MXFP4 */
#define BD_QK_K 256      /* elements per K-quant super-block */
#define BD_K_SCALE_SIZE 12 /* bytes of packed 6-bit scales and mins in Q4_K / Q5_K */

typedef struct {
    uint16_t d;              /* fp16 scale */
    uint8_t qs[BD_QK4_0 / 2]; /* element j in the low nibble of byte j, element j+16 in the high nibble */
} bd_block_q4_0;             /* value = d * (q - 8) */

typedef struct {
    uint16_t d;          /* fp16 scale */
    int8_t qs[BD_QK8_0]; /* value = d * q */
} bd_block_q8_0;

typedef struct {
    uint16_t d;                       /* fp16 scale of the sub-block scales */
    uint16_t dmin;                    /* fp16 scale of the sub-block mins */
    uint8_t scales[BD_K_SCALE_SIZE];  /* 8 x (6-bit scale, 6-bit min), packed (see bd_get_scale_min_k4) */
    uint8_t qs[BD_QK_K / 2];          /* per 64 elements: 32 bytes, low nibbles first 32, high nibbles next 32 */
} bd_block_q4_K;                      /* value = d*sc[j] * q - dmin*m[j], sub-blocks of 32 */

typedef struct {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[BD_K_SCALE_SIZE];
    uint8_t qh[BD_QK_K / 8];  /* 5th bit: bit 2k (low nibbles) and 2k+1 (high nibbles) of byte l for chunk k */
    uint8_t qs[BD_QK_K / 2];  /* low 4 bits, laid out as in Q4_K */
} bd_block_q5_K;

typedef struct {
    uint8_t ql[BD_QK_K / 2];     /* low 4 bits */
    uint8_t qh[BD_QK_K / 4];     /* high 2 bits */
    int8_t scales[BD_QK_K / 16]; /* 16 sub-block scales of 16 elements, 8-bit */
    uint16_t d;                  /* fp16 super-block scale */
} bd_block_q6_K;                 /* value = d * scales[j] * (q - 32) */

typedef struct {
    float d;                     /* scale (fp32: activations only, never stored in files) */
    int8_t qs[BD_QK_K];
    int16_t bsums[BD_QK_K / 16]; /* sum of qs over each group of 16, for the K-quant min terms */
} bd_block_q8_K;

typedef struct {
    uint16_t d, m;           /* fp16 scale and minimum */
    uint8_t qs[BD_QK32 / 2]; /* nibbles as in Q4_0 */
} bd_block_q4_1;             /* value = d * q + m, q in 0..15 */

typedef struct {
    uint16_t d;
    uint8_t qh[4];           /* 5th bit of element j in bit j of this little-endian word */
    uint8_t qs[BD_QK32 / 2]; /* low 4 bits, as in Q4_0 */
} bd_block_q5_0;             /* value = d * (q - 16), q in 0..31 */

typedef struct {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[BD_QK32 / 2];
} bd_block_q5_1; /* value = d * q + m, q in 0..31 */

typedef struct {
    uint16_t d;          /* fp16 scale */
    uint16_t s;          /* fp16 of d * sum(qs): the min term of Q4_1 / Q5_1 dot products */
    int8_t qs[BD_QK32];
} bd_block_q8_1;         /* activations of Q4_1 and Q5_1 dot products */

typedef struct {
    uint16_t d;              /* fp16 scale */
    uint8_t qs[BD_QK32 / 2]; /* nibbles as in Q4_0, each an index into bd_kvalues_iq4nl */
} bd_block_iq4_nl;           /* value = d * kvalues[q] */

typedef struct {
    uint8_t e;               /* E8M0 shared exponent: the scale is 2^(e - 128) (half of 2^(e - 127)) */
    uint8_t qs[BD_QK32 / 2]; /* nibbles as in Q4_0, each an index into bd_kvalues_mxfp4 (E2M1 values, doubled) */
} bd_block_mxfp4;

typedef struct {
    uint8_t scales[BD_QK_K / 16]; /* per 16 elements: low nibble the scale, high nibble the min */
    uint8_t qs[BD_QK_K / 4];      /* 2-bit levels: element 128c + 32j + l in bits 2j of byte 32c + l */
    uint16_t d, dmin;             /* fp16 scales of the sub-block scales and mins */
} bd_block_q2_K;                  /* value = d * sc * q - dmin * m */

typedef struct {
    uint8_t hmask[BD_QK_K / 8]; /* 3rd bit of element e: bit e / 32 of byte e % 32 (set: level as is, clear: -4) */
    uint8_t qs[BD_QK_K / 4];    /* low 2 bits, laid out as in Q2_K */
    uint8_t scales[12];         /* 16 6-bit scales, offset by 32 (see bd_q3_K_scale) */
    uint16_t d;
} bd_block_q3_K; /* value = d * (sc - 32) * (q - 4 * !hbit) */

typedef struct {
    uint16_t d;
    uint16_t scales_h;            /* top 2 bits of the 8 sub-block scales, 2 per sub-block */
    uint8_t scales_l[BD_QK_K / 64]; /* low 4 bits of the sub-block scales, two per byte */
    uint8_t qs[BD_QK_K / 2];      /* per 32 elements: 16 bytes, nibbles as in Q4_0, kvalues indices */
} bd_block_iq4_xs;                /* value = d * (ls - 32) * kvalues[q], sub-blocks of 32 */

/* The non-linear 4-bit levels of IQ4_NL / IQ4_XS, and MXFP4's E2M1 values times two (ggml's tables). */
static const int8_t bd_kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
static const int8_t bd_kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* MXFP4's scale: 2^(e - 128) as a float (a subnormal for e < 2), exactly as ggml builds it. */
static inline float bd_e8m0_to_fp32_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Q3_K's 6-bit scale j (0..15) with its offset of 32 removed. */
static inline int bd_q3_K_scale(const uint8_t *sc, int j) {
    const int lo = j < 8 ? sc[j] & 0xF : sc[j - 8] >> 4;
    return (lo | (((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
}

/* IQ4_XS's scale of sub-block j (0..7) with its offset of 32 removed. */
static inline int bd_iq4_xs_scale(const bd_block_iq4_xs *b, int j) {
    return (((b->scales_l[j / 2] >> (4 * (j % 2))) & 0xF) | (((b->scales_h >> (2 * j)) & 3) << 4)) - 32;
}

/* float -> 8 bits as ggml's build for this CPU converts (truncation to a 32-bit integer, keeping the low byte),
 * with the out-of-range case defined as that CPU's instruction defines it. Out-of-range values occur when a
 * block's largest magnitude is so small (subnormal) that 1/d overflows to infinity. x86's cvttss2si gives
 * INT32_MIN (low byte 0) for NaN and anything out of range; aarch64's fcvtzs saturates (NaN 0, too large
 * INT32_MAX: low byte 0xff, too small INT32_MIN: 0). */
static inline uint8_t bd_trunc_low8(float v) {
#if defined(__aarch64__)
    if (v != v) return 0;
    if (v >= 2147483648.0f) return 0xff;
    if (v < -2147483648.0f) return 0;
#else
    if (!(v > -2147483648.0f && v < 2147483648.0f)) return 0;
#endif
    return (uint8_t)((uint32_t)(int32_t)v & 0xff);
}

_Static_assert(sizeof(bd_block_q4_1) == 20, "q4_1 block");
_Static_assert(sizeof(bd_block_q5_0) == 22, "q5_0 block");
_Static_assert(sizeof(bd_block_q5_1) == 24, "q5_1 block");
_Static_assert(sizeof(bd_block_q8_1) == 36, "q8_1 block");
_Static_assert(sizeof(bd_block_iq4_nl) == 18, "iq4_nl block");
_Static_assert(sizeof(bd_block_mxfp4) == 17, "mxfp4 block");
_Static_assert(sizeof(bd_block_q2_K) == 84, "q2_K block");
_Static_assert(sizeof(bd_block_q3_K) == 110, "q3_K block");
_Static_assert(sizeof(bd_block_iq4_xs) == 136, "iq4_xs block");
_Static_assert(sizeof(bd_block_q4_0) == 18, "q4_0 block");
_Static_assert(sizeof(bd_block_q8_0) == 34, "q8_0 block");
_Static_assert(sizeof(bd_block_q4_K) == 144, "q4_K block");
_Static_assert(sizeof(bd_block_q5_K) == 176, "q5_K block");
_Static_assert(sizeof(bd_block_q6_K) == 210, "q6_K block");
_Static_assert(sizeof(bd_block_q8_K) == 292, "q8_K block");

/* Sub-block j (0..7) scale and min of a Q4_K / Q5_K block: j < 4 keep 6 bits in bytes j and j+4; j >= 4
 * keep their low 4 bits in byte j+4 and their top 2 bits in the spare top bits of bytes j-4 and j. */
static inline void bd_get_scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* All 8 scales and 8 mins of a Q4_K / Q5_K block at once, one per byte of *sc / *m (sub-block j in byte j,
 * little-endian): the same unpacking as bd_get_scale_min_k4, on 32-bit words. */
static inline void bd_unpack_scales_k4(const uint8_t *q, uint64_t *sc, uint64_t *m) {
    uint32_t w[3];
    memcpy(w, q, sizeof w);
    const uint32_t low6 = 0x3f3f3f3f, low4 = 0x0f0f0f0f, low2 = 0x03030303;
    const uint32_t sc_hi = (w[2] & low4) | (((w[0] >> 6) & low2) << 4);
    const uint32_t m_hi = ((w[2] >> 4) & low4) | (((w[1] >> 6) & low2) << 4);
    *sc = (w[0] & low6) | (uint64_t)sc_hi << 32;
    *m = (w[1] & low6) | (uint64_t)m_hi << 32;
}

/* k (the element count) is a multiple of the block size. dst of a quantizer: k / blck_size blocks. */
void bd_quantize_row_q4_0_ref(const float *x, void *dst, int64_t k);
void bd_quantize_row_q8_0_ref(const float *x, void *dst, int64_t k);
void bd_quantize_row_q4_K_ref(const float *x, void *dst, int64_t k);
void bd_quantize_row_q5_K_ref(const float *x, void *dst, int64_t k);
void bd_quantize_row_q6_K_ref(const float *x, void *dst, int64_t k);
void bd_quantize_row_q8_K_ref(const float *x, void *dst, int64_t k);

void bd_quantize_row_q4_1_ref(const float *x, void *dst, int64_t k);
void bd_quantize_row_q5_0_ref(const float *x, void *dst, int64_t k);
void bd_quantize_row_q5_1_ref(const float *x, void *dst, int64_t k);
void bd_quantize_row_q8_1_ref(const float *x, void *dst, int64_t k);
void bd_quantize_row_mxfp4_ref(const float *x, void *dst, int64_t k);
void bd_quantize_row_q2_K_ref(const float *x, void *dst, int64_t k);
void bd_quantize_row_q3_K_ref(const float *x, void *dst, int64_t k);
/* IQ4_NL / IQ4_XS: what llama.cpp's quantizer writes without an importance matrix (ggml's quantize_iq4_nl /
 * quantize_iq4_xs with no weights: 7 scale refinements), not ggml's *_ref, which leaves an all-zero block's
 * levels undefined. */
void bd_quantize_row_iq4_nl(const float *x, void *dst, int64_t k);
void bd_quantize_row_iq4_xs(const float *x, void *dst, int64_t k);

void bd_dequantize_row_q4_0(const void *src, float *y, int64_t k);
void bd_dequantize_row_q4_1(const void *src, float *y, int64_t k);
void bd_dequantize_row_q5_0(const void *src, float *y, int64_t k);
void bd_dequantize_row_q5_1(const void *src, float *y, int64_t k);
void bd_dequantize_row_q8_1(const void *src, float *y, int64_t k);
void bd_dequantize_row_iq4_nl(const void *src, float *y, int64_t k);
void bd_dequantize_row_mxfp4(const void *src, float *y, int64_t k);
void bd_dequantize_row_q2_K(const void *src, float *y, int64_t k);
void bd_dequantize_row_q3_K(const void *src, float *y, int64_t k);
void bd_dequantize_row_iq4_xs(const void *src, float *y, int64_t k);
void bd_dequantize_row_q8_0(const void *src, float *y, int64_t k);
void bd_dequantize_row_q4_K(const void *src, float *y, int64_t k);
void bd_dequantize_row_q5_K(const void *src, float *y, int64_t k);
void bd_dequantize_row_q6_K(const void *src, float *y, int64_t k);
void bd_dequantize_row_q8_K(const void *src, float *y, int64_t k);

/* ggml's rounding helper for the K-quants: round to nearest, ties to even, for |x| < 2^22 (what the
 * float "add 1.5 * 2^23" trick gives). Shared by the quantizers and the activation converters. */
static inline int bd_nearest_int(float x) {
    union {
        float f;
        int32_t i;
    } u;
    u.f = x + 12582912.f; /* 1.5 * 2^23: the sum's low mantissa bits hold round(x) + 2^22 */
    return (u.i & 0x007fffff) - 0x00400000;
}

#endif
