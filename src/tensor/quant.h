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

void bd_dequantize_row_q4_0(const void *src, float *y, int64_t k);
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
