/* gemm_neon_q0.h — the prompt GEMM of Q8_0, Q4_0, Q5_0, IQ4_NL, MXFP4 (x Q8_0) and Q4_1, Q5_1 (x Q8_1) weights on
 * aarch64 (gemm_q.h's interface), every output bit-identical to the vec_dot (dot_neon_q.h) on its row and
 * token. Written once for both levels, as dot_neon_q.h: the includer defines NEON_DOT4 (gemm_neon.c: the
 * armv8.0 lanes, gemm_neon_dot.c: SDOT's), which groups each block's products into the 4 lanes the vec_dot of
 * that level converts.
 *
 * The vec_dot's order: two chains of 4 float lanes per output, even blocks in one and odd ones in the other;
 * per block the NEON_DOT4 lanes of its two 16-byte halves, acc = fma(float(lanes), fp32(w.d) * fp32(x.d), acc);
 * the result vaddv(even) + vaddv(odd), then an odd last block as a scalar (Q8_0, Q5_0: fma(float(isum),
 * d_w * d_x, sum); Q4_0: fma(float(isum) * d_w, d_x, sum)).
 *
 * Not llama.cpp's prompt order: ggml's armv8.2 builds send products of 2 tokens or more with these types
 * through llamafile's tinyBLAS_Q0_ARM, ONE chain per output, so their prompts and token-by-token products
 * differ by rounding (this file reproduced that order bit for bit once, conformance_kernels, 0 differing
 * outputs). braid keeps the vec_dot's order at every batch size instead: a token's logits must not depend on
 * which other tokens share its batch (unit_gen_batch, unit_moe: generators decoding together give the bits
 * each gives alone), a guarantee llama.cpp does not make here.
 *
 * Layouts (built per call): packed activations, per token, its B blocks' 32 levels then their B scales as
 * floats (Q8_1: then the B sums s). Prepared weights (per thread, on the stack, a block of rows at a time), per
 * row its B blocks' 32 levels (Q4_0: nibble - 8; table types: the table's values) then the B scales (Q4_1,
 * Q5_1: then the B mins). A tile is up to 4 rows x 2 tokens: 16 float chains, one
 * block's level vectors of the rows (8) and tokens (4) and temporaries fit the 32 vector registers. */
#ifndef BRAID_TENSOR_GEMM_NEON_Q0_H
#define BRAID_TENSOR_GEMM_NEON_Q0_H

#include "tensor/gemm_q.h"

#include <math.h>
#include <string.h>

#include "tensor/dot_impl.h"
#include "tensor/gemm_neon_rows.h"
#include "tensor/neon_blocks.h"
#include "tensor/quant.h"
#include "tensor/types.h"

#include <arm_neon.h>

enum {
    Q0_REC = BD_QK8_0 + 4,       /* bytes per block of a packed token or a prepared row: levels + scale */
    Q1_REC = BD_QK8_0 + 8,       /* the same for Q4_1 / Q5_1: + the row's min m, the token's s (Q8_1) */
};
#define Q0_MAX_K ((int64_t)(NG_PREP / (NG_TR * Q0_REC)) * BD_QK8_0)
#define Q1_MAX_K ((int64_t)(NG_PREP / (NG_TR * Q1_REC)) * BD_QK8_0)

/* Packed activations, per token: B x 32 levels, B scales d, and for Q8_1 (Q4_1 / Q5_1) then B sums s
 * (stride B * Q0_REC or B * Q1_REC). */
static size_t q0_pack_size_rec(int64_t K, int64_t T, size_t rec) {
    const int64_t groups = (T + BD_GEMMQ_GROUP - 1) / BD_GEMMQ_GROUP;
    return (size_t)groups * BD_GEMMQ_GROUP * (size_t)(K / BD_QK8_0) * rec;
}
static size_t q0_pack_size(int64_t K, int64_t T) { return q0_pack_size_rec(K, T, Q0_REC); }
static size_t q1_pack_size(int64_t K, int64_t T) { return q0_pack_size_rec(K, T, Q1_REC); }

static void q0_pack_any(const uint8_t *xq, size_t xrow, int64_t K, int64_t T, int64_t g, void *packed, int q81) {
    const int64_t B = K / BD_QK8_0;
    const size_t aps = (size_t)B * (q81 ? Q1_REC : Q0_REC), bsz = q81 ? sizeof(bd_block_q8_1) : sizeof(bd_block_q8_0);
    for (int64_t t = g * BD_GEMMQ_GROUP; t < (g + 1) * BD_GEMMQ_GROUP; t++) {
        int8_t *o = (int8_t *)packed + (size_t)t * aps;
        float *d = (float *)(o + (size_t)B * BD_QK8_0);
        if (t >= T) { /* padding tokens: zeros (their outputs are not stored) */
            memset(o, 0, aps);
            continue;
        }
        const uint8_t *x = xq + (size_t)t * xrow;
        for (int64_t b = 0; b < B; b++, x += bsz) {
            uint16_t h[2];
            memcpy(h, x, sizeof h);
            memcpy(o + b * BD_QK8_0, x + bsz - BD_QK8_0, BD_QK8_0);
            d[b] = neon_h2f(h[0]);
            if (q81) d[B + b] = neon_h2f(h[1]); /* Q8_1: d, s, levels */
        }
    }
}
static void q0_pack(const uint8_t *xq, size_t xrow, int64_t K, int64_t T, int64_t g, void *packed) {
    q0_pack_any(xq, xrow, K, T, g, packed, 0);
}
static void q1_pack(const uint8_t *xq, size_t xrow, int64_t K, int64_t T, int64_t g, void *packed) {
    q0_pack_any(xq, xrow, K, T, g, packed, 1);
}

/* Rows [0, nr) of W into wp: per row B x 32 levels (neon_b32_levels: Q4_0 nibble - 8, Q5_0 - 16, the table
 * types' values), then B scales, for Q4_1 / Q5_1 then B mins (row stride B * Q0_REC or B * Q1_REC). */
static void q0_prep(uint32_t wtype, const uint8_t *W, size_t wrow, int64_t B, int64_t nr, void *wpv) {
    const int kind = neon_b32_kind(wtype), has_min = neon_b32_has_min(kind);
    const size_t bsz = neon_b32_size(kind), rec = has_min ? Q1_REC : Q0_REC;
    for (int64_t r = 0; r < nr; r++) {
        int8_t *o = (int8_t *)wpv + (size_t)r * (size_t)B * rec;
        float *d = (float *)(o + (size_t)B * BD_QK8_0);
        const uint8_t *blk = W + (size_t)r * wrow;
        for (int64_t b = 0; b < B; b++, blk += bsz) {
            int8x16_t lo, hi;
            neon_b32_levels(blk, kind, &lo, &hi);
            vst1q_s8(o + b * BD_QK8_0, lo);
            vst1q_s8(o + b * BD_QK8_0 + 16, hi);
            d[b] = neon_b32_d(blk, kind);
            if (has_min) d[B + b] = neon_ld_h2f(blk + 2); /* Q4_1, Q5_1: m after d */
        }
    }
}

/* The int32 lanes of one block: its first 16 levels, then its last 16. */
static inline int32x4_t q0_lanes(int8x16_t wl, int8x16_t wh, int8x16_t xl, int8x16_t xh) {
    return NEON_DOT4(NEON_DOT4(vdupq_n_s32(0), wl, xl), wh, xh);
}

/* R prepared rows (from wp, stride wps) x C packed tokens (from ap, stride aps; the first is t0) -> y
 * (y[t * ldy + row]), tokens >= T not stored. mode Q0_LANES (Q8_0, Q5_0), Q0_Q4 (Q4_0's last-block rounding):
 * block b of row r, token c goes to chain acc[b & 1][r][c]; the loop takes blocks two at a time so that the
 * parity is fixed per statement. Q0_TABLE (IQ4_NL, MXFP4): one float per output, blocks in pairs
 * t = (d_w1 * d_x1) * float(isum1), m = m + fma(d_w0 * d_x0, float(isum0), t). Q0_MIN4 / Q0_MIN5 (Q4_1 / Q5_1):
 * the lanes' chains plus the min terms m_w * s_x: Q4_1 one float per pair of blocks, mm0 = mm0 + fma(m0, s0,
 * m1 * s1), Q5_1 one per chain, mm_h = fma(m_h, s_h, mm_h); the last block sum + fma(d, float(isum), m * s)
 * (dot_neon_q.h's orders). */
enum { Q0_LANES, Q0_Q4, Q0_TABLE, Q0_MIN4, Q0_MIN5 };
static inline __attribute__((always_inline)) void q0_tile(const int8_t *wp, size_t wps, int64_t B, const int8_t *ap,
                                                          size_t aps, float *y, int64_t ldy, int64_t t0, int64_t T,
                                                          const int R, const int C, const int mode) {
    float m[NG_TR][NG_TC] = {{0}}, m1[NG_TR][NG_TC] = {{0}};
    int32_t i0[NG_TR][NG_TC] = {{0}}; /* Q0_TABLE: the even block's sums */
    float32x4_t acc[2][NG_TR][NG_TC];
    for (int h = 0; h < 2; h++)
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++) acc[h][r][c] = vdupq_n_f32(0);
    const float *wd[NG_TR], *xd[NG_TC];
    for (int r = 0; r < R; r++) wd[r] = (const float *)(wp + (size_t)r * wps + (size_t)B * BD_QK8_0);
    for (int c = 0; c < C; c++) xd[c] = (const float *)(ap + (size_t)c * aps + (size_t)B * BD_QK8_0);
    int64_t b = 0;
    for (; b + 1 < B; b += 2) {
        for (int h = 0; h < 2; h++) {
            const int64_t o = (b + h) * BD_QK8_0;
            int8x16_t xl[NG_TC], xh[NG_TC];
            for (int c = 0; c < C; c++) {
                xl[c] = vld1q_s8(ap + (size_t)c * aps + o);
                xh[c] = vld1q_s8(ap + (size_t)c * aps + o + 16);
            }
            for (int r = 0; r < R; r++) {
                const int8x16_t wl = vld1q_s8(wp + (size_t)r * wps + o), wh = vld1q_s8(wp + (size_t)r * wps + o + 16);
                for (int c = 0; c < C; c++) {
                    const int32x4_t lanes = q0_lanes(wl, wh, xl[c], xh[c]);
                    if (mode != Q0_TABLE)
                        acc[h][r][c] = vfmaq_n_f32(acc[h][r][c], vcvtq_f32_s32(lanes), wd[r][b + h] * xd[c][b + h]);
                    if (mode == Q0_MIN5 && h == 0)
                        m[r][c] = fmaf(wd[r][B + b], xd[c][B + b], m[r][c]);
                    else if (mode == Q0_MIN5)
                        m1[r][c] = fmaf(wd[r][B + b + 1], xd[c][B + b + 1], m1[r][c]);
                    else if (mode == Q0_MIN4 && h == 1)
                        m[r][c] = m[r][c] + fmaf(wd[r][B + b], xd[c][B + b], wd[r][B + b + 1] * xd[c][B + b + 1]);
                    if (mode != Q0_TABLE) continue;
                    if (h == 0)
                        i0[r][c] = vaddvq_s32(lanes);
                    else
                        m[r][c] = m[r][c] + fmaf(wd[r][b] * xd[c][b], (float)i0[r][c],
                                                 wd[r][b + 1] * xd[c][b + 1] * (float)vaddvq_s32(lanes));
                }
            }
        }
    }
    for (int c = 0; c < C; c++) {
        if (t0 + c >= T) continue;
        for (int r = 0; r < R; r++) {
            float sum = mode == Q0_TABLE ? m[r][c] : vaddvq_f32(acc[0][r][c]) + vaddvq_f32(acc[1][r][c]);
            if (mode == Q0_MIN4) sum = sum + m[r][c];
            if (mode == Q0_MIN5) sum = (sum + m[r][c]) + m1[r][c];
            if (b < B) { /* the vec_dot's scalar last block (the integer sum is the same however grouped) */
                const int64_t o = b * BD_QK8_0;
                const int8_t *w = wp + (size_t)r * wps + o, *x = ap + (size_t)c * aps + o;
                const float isum =
                    (float)vaddvq_s32(q0_lanes(vld1q_s8(w), vld1q_s8(w + 16), vld1q_s8(x), vld1q_s8(x + 16)));
                if (mode == Q0_MIN4 || mode == Q0_MIN5)
                    sum = sum + fmaf(wd[r][b] * xd[c][b], isum, wd[r][B + b] * xd[c][B + b]);
                else
                    sum = mode == Q0_Q4 ? fmaf(isum * wd[r][b], xd[c][b], sum) : fmaf(isum, wd[r][b] * xd[c][b], sum);
            }
            y[(t0 + c) * ldy + r] = sum;
        }
    }
}

/* The mode dispatched to the constant variants of q0_tile, for NG_TILES. */
static inline __attribute__((always_inline)) void q0_kernel(const void *wp, size_t wps, int64_t B, const uint8_t *ap,
                                                            size_t aps, float *y, int64_t ldy, int64_t t0, int64_t T,
                                                            const int R, const int C, int mode) {
    const int8_t *w = wp, *a = (const int8_t *)ap;
    if (mode == Q0_Q4) q0_tile(w, wps, B, a, aps, y, ldy, t0, T, R, C, Q0_Q4);
    else if (mode == Q0_TABLE) q0_tile(w, wps, B, a, aps, y, ldy, t0, T, R, C, Q0_TABLE);
    else if (mode == Q0_MIN4) q0_tile(w, wps, B, a, aps, y, ldy, t0, T, R, C, Q0_MIN4);
    else if (mode == Q0_MIN5) q0_tile(w, wps, B, a, aps, y, ldy, t0, T, R, C, Q0_MIN5);
    else q0_tile(w, wps, B, a, aps, y, ldy, t0, T, R, C, Q0_LANES);
}
NG_TILES(q0_kernel, q0_tiles)

static void q0_rows(uint32_t wtype, const uint8_t *W, size_t wrow, int64_t K, const void *packed, int64_t T, int64_t r0,
                    int64_t r1, float *y, int64_t ldy) {
    const int64_t B = K / BD_QK8_0;
    const int kind = neon_b32_kind(wtype);
    const size_t rec = neon_b32_has_min(kind) ? Q1_REC : Q0_REC;
    const int mode = kind == NEON_Q4_0               ? Q0_Q4
                     : neon_b32_is_table(kind)      ? Q0_TABLE
                     : kind == NEON_Q4_1            ? Q0_MIN4
                     : kind == NEON_Q5_1            ? Q0_MIN5
                                                    : Q0_LANES;
    ng_rows(q0_prep, q0_tiles, mode, wtype, W, wrow, B, (size_t)B * rec, (size_t)B * rec, packed, T, r0, r1, y, ldy);
}

static const bd_gemmq_ops q0_ops = {q0_pack_size, q0_pack, q0_rows, Q0_MAX_K, NULL};
static const bd_gemmq_ops q1_ops = {q1_pack_size, q1_pack, q0_rows, Q1_MAX_K, NULL}; /* Q4_1, Q5_1 (x Q8_1) */

#endif
