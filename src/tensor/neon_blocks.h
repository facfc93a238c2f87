/* neon_blocks.h — what the aarch64 kernels know of the block-of-32 weight layouts, shared by the NEON dot
 * products (dot_neon_q.h) and the prompt GEMMs (gemm_neon_q0.h): the fp16 loads, each type's block size, scale
 * and minimum, and its 32 levels as two int8 vectors. No float order lives here. */
#ifndef BRAID_TENSOR_NEON_BLOCKS_H
#define BRAID_TENSOR_NEON_BLOCKS_H

#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "tensor/quant.h"
#include "tensor/types.h"

/* fp16 -> fp32 with the FCVT instruction (exact, as bd_fp16_to_fp32, without the call). */
static inline float neon_h2f(uint16_t h) {
    __fp16 f;
    memcpy(&f, &h, sizeof f);
    return (float)f;
}

/* The fp16 at p (2-byte aligned or not) as fp32. */
static inline float neon_ld_h2f(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return neon_h2f(h);
}

/* The block-of-32 weight layouts: each block starts with its scale d (fp16; MXFP4: one E8M0 byte). */
enum { NEON_Q8_0, NEON_Q4_0, NEON_Q5_0, NEON_Q4_1, NEON_Q5_1, NEON_IQ4_NL, NEON_MXFP4 };

static inline size_t neon_b32_size(int kind) {
    static const size_t size[] = {sizeof(bd_block_q8_0),  sizeof(bd_block_q4_0),  sizeof(bd_block_q5_0),
                                  sizeof(bd_block_q4_1),  sizeof(bd_block_q5_1),  sizeof(bd_block_iq4_nl),
                                  sizeof(bd_block_mxfp4)};
    return size[kind];
}

/* IQ4_NL and MXFP4: nibbles that index a table of levels; their dots keep one float, not lanes. */
static inline int neon_b32_is_table(int kind) { return kind == NEON_IQ4_NL || kind == NEON_MXFP4; }

static inline float neon_b32_d(const uint8_t *blk, int kind) {
    return kind == NEON_MXFP4 ? bd_e8m0_to_fp32_half(blk[0]) : neon_ld_h2f(blk);
}

/* The levels of 16 bytes of nibble indices into values: low nibbles into *lo, high ones into *hi. */
static inline void neon_table_levels(int8x16_t values, const uint8_t *qs, int8x16_t *lo, int8x16_t *hi) {
    const uint8x16_t v = vld1q_u8(qs);
    *lo = vqtbl1q_s8(values, vandq_u8(v, vdupq_n_u8(0x0f)));
    *hi = vqtbl1q_s8(values, vshrq_n_u8(v, 4));
}

/* Q4_1 and Q5_1 carry a minimum m (fp16, after d) and take Q8_1 activations, whose s (after d) it multiplies. */
static inline int neon_b32_has_min(int kind) { return kind == NEON_Q4_1 || kind == NEON_Q5_1; }

/* The fifth bits of a Q5 block as bytes 0x10 or 0: element e's is bit e of the little-endian word at qh;
 * elements 0..15 into *lo, 16..31 into *hi. */
static inline void neon_q5_bits(const uint8_t *qh, uint8x16_t *lo, uint8x16_t *hi) {
    uint32_t w;
    memcpy(&w, qh, sizeof w);
    const uint8x16_t bytes = vreinterpretq_u8_u32(vdupq_n_u32(w));
    const uint8x16_t bit = vreinterpretq_u8_u64(vdupq_n_u64(0x8040201008040201ull)); /* 1 << (e % 8) */
    const uint8x16_t pick_lo = vcombine_u8(vdup_n_u8(0), vdup_n_u8(1)); /* byte e / 8 for lane e */
    const uint8x16_t pick_hi = vcombine_u8(vdup_n_u8(2), vdup_n_u8(3));
    *lo = vandq_u8(vtstq_u8(vqtbl1q_u8(bytes, pick_lo), bit), vdupq_n_u8(0x10));
    *hi = vandq_u8(vtstq_u8(vqtbl1q_u8(bytes, pick_hi), bit), vdupq_n_u8(0x10));
}

/* The 32 int8 levels of the block at blk: elements 0..15 into *lo, 16..31 into *hi (the nibble formats: low
 * nibbles of the 16 bytes, then high nibbles). Q4_0 minus 8, Q5_0 minus 16, Q4_1 and Q5_1 unsigned, IQ4_NL and
 * MXFP4 from their tables. */
static inline void neon_b32_levels(const uint8_t *blk, int kind, int8x16_t *lo, int8x16_t *hi) {
    if (neon_b32_is_table(kind)) {
        const int8_t *values = kind == NEON_MXFP4 ? bd_kvalues_mxfp4 : bd_kvalues_iq4nl;
        neon_table_levels(vld1q_s8(values), blk + (kind == NEON_MXFP4 ? 1 : 2), lo, hi);
        return;
    }
    if (kind == NEON_Q8_0) {
        *lo = vld1q_s8((const int8_t *)blk + 2);
        *hi = vld1q_s8((const int8_t *)blk + 18);
        return;
    }
    const size_t qs = kind == NEON_Q4_0 ? 2 : kind == NEON_Q5_0 ? 6 : kind == NEON_Q4_1 ? 4 : 8;
    const uint8x16_t v = vld1q_u8(blk + qs);
    uint8x16_t l = vandq_u8(v, vdupq_n_u8(0x0f)), h = vshrq_n_u8(v, 4);
    if (kind == NEON_Q5_0 || kind == NEON_Q5_1) { /* qh: the 4 bytes before qs */
        uint8x16_t bl, bh;
        neon_q5_bits(blk + qs - 4, &bl, &bh);
        l = vorrq_u8(l, bl);
        h = vorrq_u8(h, bh);
    }
    const int8x16_t off = vdupq_n_s8(kind == NEON_Q4_0 ? 8 : kind == NEON_Q5_0 ? 16 : 0);
    *lo = vsubq_s8(vreinterpretq_s8_u8(l), off);
    *hi = vsubq_s8(vreinterpretq_s8_u8(h), off);
}

/* The kind of a block-of-32 weight type (callers pass only these seven: the GEMMs are registered for them). */
static inline int neon_b32_kind(uint32_t wtype) {
    switch (wtype) {
    case BD_TYPE_Q4_0: return NEON_Q4_0;
    case BD_TYPE_Q5_0: return NEON_Q5_0;
    case BD_TYPE_Q4_1: return NEON_Q4_1;
    case BD_TYPE_Q5_1: return NEON_Q5_1;
    case BD_TYPE_IQ4_NL: return NEON_IQ4_NL;
    case BD_TYPE_MXFP4: return NEON_MXFP4;
    default: return NEON_Q8_0;
    }
}

#endif
