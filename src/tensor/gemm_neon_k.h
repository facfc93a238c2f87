/* gemm_neon_k.h — the prompt GEMM of Q2_K..Q6_K and IQ4_XS weights (x Q8_K activations) on aarch64
 * (gemm_q.h's interface), every output bit-identical to the vec_dot (dot_neon_q.h) on its row and token.
 * Written once for both levels: the includer defines NEON_DOT4 (SDOT or the armv8.0 stand-in; the lanes are
 * reduced whole here, so their grouping does not matter).
 *
 * Those vec_dots are exact integers per super-block until one or two float steps (dot_neon_q.h lists them):
 * isum = sum over groups of the group's scale times its level x activation products, imin = sum over groups
 * of a min (Q2_K, Q4_K, Q5_K) or the scale (Q6_K; Q3_K, IQ4_XS have none) times the activations' group sum (bsums). The
 * integers are the same however they are grouped, so a tile forms them its own way: each row's levels
 * unpacked once per block of rows into bytes in element order (the vec_dot unpacks them again for every token;
 * IQ4_XS: its table's signed levels), 16 scales per super-block (32-element scales twice), then per 16 or 32
 * elements and output one or two NEON_DOT4s and one multiply-accumulate by the scale into int32 lanes, reduced once
 * per super-block. Then each output takes its type's float steps exactly as the vec_dot does.
 *
 * Layouts (built per call): packed activations are the Q8_K rows themselves (d, levels, bsums), token after
 * token. Prepared rows (per thread, on the stack): per super-block a k_rec. A tile is up to 4 rows x 2
 * tokens. */
#ifndef BRAID_TENSOR_GEMM_NEON_K_H
#define BRAID_TENSOR_GEMM_NEON_K_H

#include "tensor/gemm_q.h"

#include <math.h>
#include <string.h>

#include "tensor/dot_impl.h"
#include "tensor/gemm_neon_rows.h"
#include "tensor/neon_blocks.h"
#include "tensor/quant.h"
#include "tensor/types.h"

#include <arm_neon.h>

/* One super-block of a prepared row: levels (element order; 0..63, Q3_K -4..3, IQ4_XS -127..113 as bytes), the scale of
 * each group of 16, the weight of each group's activation sum in imin, then d and dmin as floats. */
typedef struct {
    uint8_t lev[BD_QK_K];
    int8_t s16[16];
    int16_t m16[16];
    float d, dmin;
} k_rec;

#define K_MAX_K ((int64_t)(NG_PREP / (NG_TR * sizeof(k_rec))) * BD_QK_K)

static size_t k_pack_size(int64_t K, int64_t T) {
    const int64_t groups = (T + BD_GEMMQ_GROUP - 1) / BD_GEMMQ_GROUP;
    return (size_t)groups * BD_GEMMQ_GROUP * (size_t)(K / BD_QK_K) * sizeof(bd_block_q8_K);
}

static void k_pack(const uint8_t *xq, size_t xrow, int64_t K, int64_t T, int64_t g, void *packed) {
    const size_t aps = (size_t)(K / BD_QK_K) * sizeof(bd_block_q8_K);
    for (int64_t t = g * BD_GEMMQ_GROUP; t < (g + 1) * BD_GEMMQ_GROUP; t++) {
        uint8_t *o = (uint8_t *)packed + (size_t)t * aps;
        if (t < T) memcpy(o, xq + (size_t)t * xrow, aps);
        else memset(o, 0, aps); /* padding tokens: their outputs are not stored */
    }
}

/* The types' super-blocks as k_rec (the element orders of dot_neon_q.h's kernels). */
/* Q4_K / Q5_K: the 6-bit scale and min of each 32 elements, for both its groups of 16. */
static void k_scales45(const uint8_t *scales, k_rec *o) {
    uint64_t sc64, m64;
    bd_unpack_scales_k4(scales, &sc64, &m64);
    for (int j = 0; j < 8; j++) {
        o->s16[2 * j] = o->s16[2 * j + 1] = (int8_t)(sc64 >> (8 * j));
        o->m16[2 * j] = o->m16[2 * j + 1] = (int16_t)(uint8_t)(m64 >> (8 * j));
    }
}

static void k_prep_q4(const bd_block_q4_K *x, k_rec *o) {
    k_scales45(x->scales, o);
    for (int j = 0; j < 4; j++) /* chunk j of 64: low nibbles then high nibbles of 32 bytes */
        for (int h = 0; h < 2; h++) {
            const uint8x16_t v = vld1q_u8(x->qs + 32 * j + 16 * h);
            vst1q_u8(o->lev + 64 * j + 16 * h, vandq_u8(v, vdupq_n_u8(0x0f)));
            vst1q_u8(o->lev + 64 * j + 32 + 16 * h, vshrq_n_u8(v, 4));
        }
    o->d = neon_h2f(x->d);
    o->dmin = neon_h2f(x->dmin);
}

static void k_prep_q5(const bd_block_q5_K *x, k_rec *o) {
    k_scales45(x->scales, o);
    for (int j = 0; j < 4; j++) /* chunk j: the fifth bits are bit 2j (low nibbles) and 2j+1 of qh */
        for (int i = 0; i < 32; i++) {
            o->lev[64 * j + i] = (uint8_t)((x->qs[32 * j + i] & 0x0f) | (((x->qh[i] >> (2 * j)) & 1) << 4));
            o->lev[64 * j + 32 + i] = (uint8_t)((x->qs[32 * j + i] >> 4) | (((x->qh[i] >> (2 * j + 1)) & 1) << 4));
        }
    o->d = neon_h2f(x->d);
    o->dmin = neon_h2f(x->dmin);
}

static void k_prep_q6(const bd_block_q6_K *x, k_rec *o) {
    for (int k = 0; k < 16; k++) o->s16[k] = x->scales[k], o->m16[k] = x->scales[k];
    for (int j = 0; j < 2; j++) { /* halves of 128: ql 64 bytes, qh 32 bytes */
        const uint8_t *ql = x->ql + 64 * j, *qh = x->qh + 32 * j;
        uint8_t *l = o->lev + 128 * j;
        for (int i = 0; i < 32; i++) {
            l[i] = (uint8_t)((ql[i] & 0x0f) | ((qh[i] & 3) << 4));
            l[32 + i] = (uint8_t)((ql[32 + i] & 0x0f) | (((qh[i] >> 2) & 3) << 4));
            l[64 + i] = (uint8_t)((ql[i] >> 4) | (((qh[i] >> 4) & 3) << 4));
            l[96 + i] = (uint8_t)((ql[32 + i] >> 4) | (((qh[i] >> 6) & 3) << 4));
        }
    }
    o->d = neon_h2f(x->d);
    o->dmin = 0.0f;
}

static void k_prep_iq4xs(const bd_block_iq4_xs *x, k_rec *o) {
    const int8x16_t values = vld1q_s8(bd_kvalues_iq4nl);
    for (int j = 0; j < 8; j++) { /* sub-block j of 32: low nibbles elements 0..15, high ones 16..31 */
        o->s16[2 * j] = o->s16[2 * j + 1] = (int8_t)bd_iq4_xs_scale(x, j);
        const uint8x16_t v = vld1q_u8(x->qs + 16 * j);
        vst1q_s8((int8_t *)o->lev + 32 * j, vqtbl1q_s8(values, vandq_u8(v, vdupq_n_u8(0x0f))));
        vst1q_s8((int8_t *)o->lev + 32 * j + 16, vqtbl1q_s8(values, vshrq_n_u8(v, 4)));
    }
    memset(o->m16, 0, sizeof o->m16);
    o->d = neon_h2f(x->d);
    o->dmin = 0.0f;
}

/* Q2_K / Q3_K: element 128h + 32g + l has its low 2 bits at bits 2g of byte 32h + l of qs; Q3_K's third bit is
 * bit 4h + g of hmask[l] (clear: level - 4). */
static void k_prep_q23(const uint8_t *qs, const uint8_t *hmask, k_rec *o) {
    for (int h = 0; h < 2; h++)
        for (int g = 0; g < 4; g++)
            for (int l = 0; l < 32; l++) {
                int q = (qs[32 * h + l] >> (2 * g)) & 3;
                if (hmask) q -= ((hmask[l] >> (4 * h + g)) & 1) ? 0 : 4;
                o->lev[128 * h + 32 * g + l] = (uint8_t)(int8_t)q;
            }
}

static void k_prep_q2(const bd_block_q2_K *x, k_rec *o) {
    k_prep_q23(x->qs, NULL, o);
    for (int k = 0; k < 16; k++) o->s16[k] = (int8_t)(x->scales[k] & 15), o->m16[k] = (int16_t)(x->scales[k] >> 4);
    o->d = neon_h2f(x->d);
    o->dmin = neon_h2f(x->dmin);
}

static void k_prep_q3(const bd_block_q3_K *x, k_rec *o) {
    k_prep_q23(x->qs, x->hmask, o);
    for (int k = 0; k < 16; k++) o->s16[k] = (int8_t)bd_q3_K_scale(x->scales, k), o->m16[k] = 0;
    o->d = neon_h2f(x->d);
    o->dmin = 0.0f;
}

/* Rows [0, nr) of W into wp: per row NB records. */
static void k_prep(uint32_t wtype, const uint8_t *W, size_t wrow, int64_t NB, int64_t nr, void *wpv) {
    k_rec *wp = wpv;
    for (int64_t r = 0; r < nr; r++) {
        const uint8_t *row = W + (size_t)r * wrow;
        k_rec *o = wp + r * NB;
        for (int64_t b = 0; b < NB; b++) {
            if (wtype == BD_TYPE_Q4_K) k_prep_q4((const bd_block_q4_K *)row + b, o + b);
            else if (wtype == BD_TYPE_Q5_K) k_prep_q5((const bd_block_q5_K *)row + b, o + b);
            else if (wtype == BD_TYPE_Q6_K) k_prep_q6((const bd_block_q6_K *)row + b, o + b);
            else if (wtype == BD_TYPE_Q2_K) k_prep_q2((const bd_block_q2_K *)row + b, o + b);
            else if (wtype == BD_TYPE_Q3_K) k_prep_q3((const bd_block_q3_K *)row + b, o + b);
            else k_prep_iq4xs((const bd_block_iq4_xs *)row + b, o + b);
        }
    }
}

/* R prepared rows (wp, NB records each) x C tokens (ap, stride aps bytes; the first is t0) -> y; KIND 2..6, 7
 * for Q2_K..Q6_K, IQ4_XS. Q2_K, Q3_K and Q6_K have a scale per 16, the others per 32; Q2_K's float steps are
 * Q4_K's, Q3_K's IQ4_XS's.
 * Per super-block and output: the int32 lanes of isum, then imin from the 16 bsums, then the float steps. */
static inline __attribute__((always_inline)) void k_tile(const k_rec *wp, int64_t NB, const uint8_t *ap, size_t aps,
                                                         float *y, int64_t ldy, int64_t t0, int64_t T, const int R,
                                                         const int C, const int KIND) {
    float sum[NG_TR][NG_TC];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) sum[r][c] = 0.0f;
    for (int64_t b = 0; b < NB; b++) {
        const bd_block_q8_K *x[NG_TC];
        for (int c = 0; c < C; c++) x[c] = (const bd_block_q8_K *)(ap + (size_t)c * aps) + b;
        int32x4_t ai[NG_TR][NG_TC];
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++) ai[r][c] = vdupq_n_s32(0);
        for (int g = 0; g < 16; g += 2) {
            int8x16_t y0[NG_TC], y1[NG_TC];
            for (int c = 0; c < C; c++) {
                y0[c] = vld1q_s8(x[c]->qs + 16 * g);
                y1[c] = vld1q_s8(x[c]->qs + 16 * g + 16);
            }
            for (int r = 0; r < R; r++) {
                const k_rec *w = wp + r * NB + b;
                const int8x16_t q0 = vreinterpretq_s8_u8(vld1q_u8(w->lev + 16 * g));
                const int8x16_t q1 = vreinterpretq_s8_u8(vld1q_u8(w->lev + 16 * g + 16));
                for (int c = 0; c < C; c++) {
                    if (KIND == 6 || KIND == 2 || KIND == 3) { /* a scale per 16 */
                        ai[r][c] = vmlaq_n_s32(ai[r][c], NEON_DOT4(vdupq_n_s32(0), q0, y0[c]), w->s16[g]);
                        ai[r][c] = vmlaq_n_s32(ai[r][c], NEON_DOT4(vdupq_n_s32(0), q1, y1[c]), w->s16[g + 1]);
                    } else { /* one per 32 */
                        const int32x4_t p = NEON_DOT4(NEON_DOT4(vdupq_n_s32(0), q0, y0[c]), q1, y1[c]);
                        ai[r][c] = vmlaq_n_s32(ai[r][c], p, w->s16[g]);
                    }
                }
            }
        }
        for (int r = 0; r < R; r++) {
            const k_rec *w = wp + r * NB + b;
            if (KIND == 7 || KIND == 3) { /* no mins: sum = fma(d * y.d, isum, sum) */
                for (int c = 0; c < C; c++)
                    sum[r][c] = fmaf(w->d * x[c]->d, (float)vaddvq_s32(ai[r][c]), sum[r][c]);
                continue;
            }
            const int16x8_t m0 = vld1q_s16(w->m16), m1 = vld1q_s16(w->m16 + 8);
            for (int c = 0; c < C; c++) {
                const int16x8_t b0 = vld1q_s16(x[c]->bsums), b1 = vld1q_s16(x[c]->bsums + 8);
                int32x4_t mi = vmull_s16(vget_low_s16(m0), vget_low_s16(b0));
                mi = vmlal_s16(mi, vget_high_s16(m0), vget_high_s16(b0));
                mi = vmlal_s16(mi, vget_low_s16(m1), vget_low_s16(b1));
                mi = vmlal_s16(mi, vget_high_s16(m1), vget_high_s16(b1));
                const int32_t isum = vaddvq_s32(ai[r][c]), imin = vaddvq_s32(mi);
                const float yd = x[c]->d;
                if (KIND == 4 || KIND == 2) {
                    sum[r][c] = fmaf(-(w->dmin * yd), (float)imin, sum[r][c]);
                    sum[r][c] = fmaf(yd * w->d, (float)isum, sum[r][c]);
                } else if (KIND == 5) {
                    float t = -((float)imin * (yd * w->dmin));
                    t = fmaf(yd * w->d, (float)isum, t);
                    sum[r][c] = sum[r][c] + t;
                } else {
                    sum[r][c] = fmaf(w->d * yd, (float)(isum - 32 * imin), sum[r][c]);
                }
            }
        }
    }
    for (int c = 0; c < C; c++)
        if (t0 + c < T)
            for (int r = 0; r < R; r++) y[(t0 + c) * ldy + r] = sum[r][c];
}

/* mode (the KIND) dispatched to the constant variants of k_tile, for NG_TILES. */
static inline __attribute__((always_inline)) void k_kernel(const void *wp, size_t wps, int64_t NB, const uint8_t *ap,
                                                           size_t aps, float *y, int64_t ldy, int64_t t0, int64_t T,
                                                           const int R, const int C, int mode) {
    (void)wps; /* rows are NB records apart */
    if (mode == 2) k_tile(wp, NB, ap, aps, y, ldy, t0, T, R, C, 2);
    else if (mode == 3) k_tile(wp, NB, ap, aps, y, ldy, t0, T, R, C, 3);
    else if (mode == 4) k_tile(wp, NB, ap, aps, y, ldy, t0, T, R, C, 4);
    else if (mode == 5) k_tile(wp, NB, ap, aps, y, ldy, t0, T, R, C, 5);
    else if (mode == 6) k_tile(wp, NB, ap, aps, y, ldy, t0, T, R, C, 6);
    else k_tile(wp, NB, ap, aps, y, ldy, t0, T, R, C, 7);
}
NG_TILES(k_kernel, k_tiles)

static void k_rows(uint32_t wtype, const uint8_t *W, size_t wrow, int64_t K, const void *packed, int64_t T, int64_t r0,
                   int64_t r1, float *y, int64_t ldy) {
    const int64_t NB = K / BD_QK_K;
    const int kind = wtype == BD_TYPE_Q2_K   ? 2
                     : wtype == BD_TYPE_Q3_K ? 3
                     : wtype == BD_TYPE_Q4_K ? 4
                     : wtype == BD_TYPE_Q5_K ? 5
                     : wtype == BD_TYPE_Q6_K ? 6
                                             : 7;
    ng_rows(k_prep, k_tiles, kind, wtype, W, wrow, NB, (size_t)NB * sizeof(k_rec), (size_t)NB * sizeof(bd_block_q8_K),
            packed, T, r0, r1, y, ldy);
}

static const bd_gemmq_ops k_ops = {k_pack_size, k_pack, k_rows, K_MAX_K, NULL};

#endif
