/* gemm_q8.c — Q8_0, Q4_0, Q5_0 and IQ4_NL weights against Q8_0 activations over many tokens, bit-identical per
 * output to the vec_dot (IQ4_NL: to llama.cpp's prompt kernel, below; see gemm_q.h for why and how it is used).
 *
 * The vec_dot's float chain (dot.h, ggml's x86 order): 8 float lanes per output; for each block of 32 in
 * order, lane l += (d_w * d_x) * float(sum of the 4 products at positions 4l..4l+3) as one fused multiply-add;
 * then the hsum_float_8 tree. Here one 512-bit vector holds two tokens' 8 lanes for one weight row, so a
 * block costs, per pair of outputs, one vpdpbusd (the 64 products), one conversion, one multiply (the scale
 * product, rounded as the vec_dot rounds it) and one FMA.
 *
 * vpdpbusd multiplies unsigned by signed bytes. The activations are stored offset by +128 (unsigned) and each
 * weight block carries its correction -128 * (sum of its 4 weights) per lane, which seeds the integer sum:
 * the result is exactly the signed sum the vec_dot computes.
 *
 * Layouts (built per call): packed activations, per pair of tokens and block, 128 bytes: the two tokens'
 * offset levels (32 + 32) then their scales (8 copies each). Prepared weights (per thread, for a block of
 * rows, on the stack), per row and block, 64 bytes: the 32 signed levels then the 8 corrections; the block
 * scales as floats after them. Q4_0 rows are decoded to levels - 8 there, Q5_0 rows to levels - 16 and IQ4_NL
 * rows to their table's levels, so the four types share the kernel. Q5_0's vec_dot has the same one chain per
 * output. IQ4_NL's has two (even and odd blocks), but llama.cpp runs llamafile's tinyBLAS for the prompts of
 * Q8_0, Q4_0, Q5_0 and IQ4_NL, one chain per output for all four: so braid's IQ4_NL prompts have llama.cpp's
 * prompt bits, and differ from braid's (and llama.cpp's) token-by-token ones by rounding, as llama.cpp's do. */
#include "tensor/gemm_q.h"

#include <string.h>

#include "tensor/dot_impl.h"
#include "tensor/gemm_impl.h"
#include "tensor/quant.h"
#include "tensor/types.h"

#if BD_HAVE_X86

enum {
    Q8_REC = BD_GEMMQ8_REC,
    Q8_WREC = BD_GEMMQ8_WREC,
    Q8_PREP = BD_GEMMQ8_PREP,
    Q8_TOK_BYTES = 1024 * 1024, /* packed activations per token block (stay in L2 while rows pass) */
    Q8_TR = BD_GEMMQ8_TR,      /* tile: weight rows */
    Q8_TP = 3,                 /* tile: pairs of tokens */
};

size_t bd_gemmq8_pack_size(int64_t K, int64_t T) {
    const int64_t groups = (T + BD_GEMMQ_GROUP - 1) / BD_GEMMQ_GROUP;
    return (size_t)groups * (BD_GEMMQ_GROUP / 2) * (size_t)(K / BD_QK8_0) * Q8_REC;
}

BD_TARGET_AVX2 void bd_gemmq8_pack(const uint8_t *xq, size_t xrow, int64_t K, int64_t T, int64_t g, void *packed) {
    const int64_t B = K / BD_QK8_0;
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    uint8_t *out = (uint8_t *)packed + (size_t)g * (BD_GEMMQ_GROUP / 2) * (size_t)B * Q8_REC;
    for (int p = 0; p < BD_GEMMQ_GROUP / 2; p++) {
        uint8_t *o = out + (size_t)p * (size_t)B * Q8_REC;
        for (int h = 0; h < 2; h++) {
            const int64_t t = g * BD_GEMMQ_GROUP + 2 * p + h;
            const bd_block_q8_0 *x = t < T ? (const bd_block_q8_0 *)(xq + (size_t)t * xrow) : NULL;
            for (int64_t b = 0; b < B; b++) {
                uint8_t *rec = o + (size_t)b * Q8_REC;
                const __m256i q = x ? _mm256_loadu_si256((const __m256i *)x[b].qs) : _mm256_setzero_si256();
                _mm256_storeu_si256((__m256i *)(rec + 32 * h), _mm256_xor_si256(q, flip));
                _mm256_storeu_ps((float *)(rec + 64) + 8 * h, _mm256_set1_ps(x ? _cvtsh_ss(x[b].d) : 0.0f));
            }
        }
    }
}

/* Rows [0, nr) of W into wp (nr * B records) and dw (nr * B block scales). The correction is computed without
 * VNNI (the sum of the 4 weights of a lane times -128), so the AVX-VNNI kernels can share this layout; wide: the
 * plain AVX2 layout instead (the levels as int16, the scales as records of row pairs: gemm_impl.h). */
BD_TARGET_AVX2 static void q8_prep(uint32_t wtype, const uint8_t *W, size_t wrow, int64_t B, int64_t nr, uint8_t *wp,
                                   float *dw, int wide) {
    const __m256i zero = _mm256_setzero_si256(), eight = _mm256_set1_epi8(8);
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    const __m128i low4 = _mm_set1_epi8(0x0F);
    for (int64_t r = 0; r < nr; r++) {
        const uint8_t *row = W + (size_t)r * wrow;
        for (int64_t b = 0; b < B; b++) {
            __m256i q;
            uint16_t d;
            if (wtype == BD_TYPE_Q8_0) {
                const uint8_t *blk = row + (size_t)b * sizeof(bd_block_q8_0);
                memcpy(&d, blk, 2);
                q = _mm256_loadu_si256((const __m256i *)(blk + 2));
            } else if (wtype == BD_TYPE_Q5_0) { /* Q4_0's nibbles, the 5th bit of element j in bit j of qh */
                const bd_block_q5_0 *blk = (const bd_block_q5_0 *)row + b;
                uint32_t qh;
                d = blk->d;
                memcpy(&qh, blk->qh, 4);
                const __m128i v = _mm_loadu_si128((const __m128i *)blk->qs);
                const __m128i lo = _mm_and_si128(v, low4), hi = _mm_and_si128(_mm_srli_epi16(v, 4), low4);
                /* byte j: bit j of qh, spread by a byte shuffle of the word and a per-byte bit test */
                const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh),
                                                           _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                                                             0x0101010101010101, 0));
                const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
                const __m256i h16 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit),
                                                     _mm256_set1_epi8(16));
                q = _mm256_sub_epi8(_mm256_or_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1), h16),
                                    _mm256_set1_epi8(16));
            } else if (wtype == BD_TYPE_IQ4_NL) { /* Q4_0's nibbles, each an index into the table of levels */
                const bd_block_iq4_nl *blk = (const bd_block_iq4_nl *)row + b;
                const __m128i values = _mm_loadu_si128((const __m128i *)bd_kvalues_iq4nl);
                d = blk->d;
                const __m128i v = _mm_loadu_si128((const __m128i *)blk->qs);
                const __m128i lo = _mm_shuffle_epi8(values, _mm_and_si128(v, low4));
                const __m128i hi = _mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16(v, 4), low4));
                q = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
            } else { /* Q4_0: element j in the low nibble of byte j, j+16 in the high one */
                const uint8_t *blk = row + (size_t)b * sizeof(bd_block_q4_0);
                memcpy(&d, blk, 2);
                const __m128i v = _mm_loadu_si128((const __m128i *)(blk + 2));
                const __m128i lo = _mm_and_si128(v, low4), hi = _mm_and_si128(_mm_srli_epi16(v, 4), low4);
                q = _mm256_sub_epi8(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1), eight);
            }
            uint8_t *rec = wp + ((size_t)r * (size_t)B + (size_t)b) * Q8_WREC;
            if (wide) { /* the scales record of the row pair (gemm_impl.h) */
                float *dr = dw + 4 * ((r / 2) * B + b) + 2 * (r % 2);
                dr[0] = dr[1] = _cvtsh_ss(d);
                if (r % 2 == 0 && r + 1 == nr) dr[2] = dr[3] = dr[0];
                bd_gemmq8_widen(q, rec);
                continue;
            }
            dw[r * B + b] = _cvtsh_ss(d);
            _mm256_storeu_si256((__m256i *)rec, q);
            const __m256i sum4 = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q), ones16);
            _mm256_storeu_si256((__m256i *)(rec + 32), _mm256_sub_epi32(zero, _mm256_slli_epi32(sum4, 7)));
        }
    }
}

/* R weight rows (records from wp, stride wps bytes; scales from dw, stride B) x P pairs of tokens (from ap,
 * stride aps bytes; the first token is t0) -> y (y[t*ldy + row]), tokens >= T not stored. */
GEMMQ_INLINE void q8_tile(const uint8_t *wp, size_t wps, const float *dw, int64_t B, const uint8_t *ap, size_t aps,
                          float *y, int64_t ldy, int64_t t0, int64_t T, const int R, const int P) {
    __m512 acc[Q8_TR][Q8_TP];
    for (int r = 0; r < R; r++)
        for (int p = 0; p < P; p++) acc[r][p] = _mm512_setzero_ps();
    for (int64_t b = 0; b < B; b++) {
        __m512i a[Q8_TP];
        __m512 ds[Q8_TP];
        for (int p = 0; p < P; p++) {
            const uint8_t *rec = ap + (size_t)p * aps + (size_t)b * Q8_REC;
            a[p] = _mm512_loadu_si512(rec);
            ds[p] = _mm512_loadu_ps(rec + 64);
        }
        for (int r = 0; r < R; r++) {
            const uint8_t *w = wp + (size_t)r * wps + (size_t)b * Q8_WREC;
            const __m512i wv = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)w));
            const __m512 dv = _mm512_set1_ps(dw[r * B + b]);
            for (int p = 0; p < P; p++) {
                const __m512i cv = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w + 32)));
                const __m512i iv = _mm512_dpbusd_epi32(cv, a[p], wv);
                acc[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(ds[p], dv), _mm512_cvtepi32_ps(iv), acc[r][p]);
            }
        }
    }
    __m512 v[16];
    float sums[32];
    int n = 0;
    for (int r = 0; r < R; r++)
        for (int p = 0; p < P; p++) v[n++] = acc[r][p];
    gemmq_hsum_tile(v, n, sums);
    gemmq_store_tile(sums, R, P, t0, T, y, ldy);
}

#define Q8_TILE(R, P)                                                                                           \
    GEMMQ_TARGET static void q8_tile_##R##_##P(const uint8_t *wp, size_t wps, const float *dw, int64_t B,        \
                                               const uint8_t *ap, size_t aps, float *y, int64_t ldy, int64_t t0, \
                                               int64_t T) {                                                     \
        q8_tile(wp, wps, dw, B, ap, aps, y, ldy, t0, T, R, P);                                                   \
    }
Q8_TILE(1, 1)
Q8_TILE(1, 2)
Q8_TILE(1, 3)
Q8_TILE(2, 1)
Q8_TILE(2, 2)
Q8_TILE(2, 3)
Q8_TILE(3, 1)
Q8_TILE(3, 2)
Q8_TILE(3, 3)
Q8_TILE(4, 1)
Q8_TILE(4, 2)
Q8_TILE(4, 3)
static const bd_gemmq8_tile_fn q8_tiles[Q8_TR][Q8_TP] = {{q8_tile_1_1, q8_tile_1_2, q8_tile_1_3},
                                                  {q8_tile_2_1, q8_tile_2_2, q8_tile_2_3},
                                                  {q8_tile_3_1, q8_tile_3_2, q8_tile_3_3},
                                                  {q8_tile_4_1, q8_tile_4_2, q8_tile_4_3}};

/* The row loop shared with the AVX2 kernels (gemm_impl.h): blocks of rows prepared on the stack, token blocks
 * that stay in L2, the tile of each level from its table. */
void bd_gemmq8_rows_with(const bd_gemmq8_tile_fn *tiles, int tp, int wide, uint32_t wtype, const uint8_t *W,
                         size_t wrow, int64_t K, const void *packed, int64_t T, int64_t r0, int64_t r1, float *y,
                         int64_t ldy) {
    const int64_t B = K / BD_QK8_0, npairs = (T + 1) / 2;
    const size_t wps = (size_t)B * Q8_WREC, aps = (size_t)B * (wide ? BD_GEMMQ8W_REC : Q8_REC);
    /* rows per prepared block: records and scales within Q8_PREP (rows_max guarantees at least 4) */
    const int64_t dws = wide ? BD_GEMMQ8W_DW : 1; /* floats of scales per row and block */
    int64_t rb = (Q8_PREP / (int64_t)(wps + (size_t)(B * dws) * sizeof(float))) & ~(int64_t)3;
    if (rb > 64) rb = 64;
    int64_t tb = (Q8_TOK_BYTES / (int64_t)aps) / tp * tp;
    if (tb < tp) tb = tp;
    _Alignas(64) uint8_t wp[Q8_PREP];
    float *dw = (float *)(wp + (size_t)rb * wps);
    for (int64_t p0 = 0; p0 < npairs; p0 += tb) {
        const int64_t p1 = p0 + tb < npairs ? p0 + tb : npairs;
        for (int64_t rs = r0; rs < r1; rs += rb) {
            const int64_t nr = r1 - rs < rb ? r1 - rs : rb;
            q8_prep(wtype, W + (size_t)rs * wrow, wrow, B, nr, wp, dw, wide);
            const int64_t next = r1 - (rs + nr) < rb ? r1 - (rs + nr) : rb, steps = (p1 - p0 + tp - 1) / tp;
            for (int64_t p = p0; p < p1; p += tp) {
                const int np = (int)(p1 - p < tp ? p1 - p : tp);
                gemmq_prefetch_part(W + (size_t)(rs + nr) * wrow, (size_t)next * wrow, (p - p0) / tp, steps);
                const uint8_t *ap = (const uint8_t *)packed + (size_t)p * aps;
                for (int64_t r = 0; r < nr; r += BD_GEMMQ8_TR) {
                    const int R = (int)(nr - r < BD_GEMMQ8_TR ? nr - r : BD_GEMMQ8_TR);
                    tiles[(R - 1) * tp + np - 1](wp + (size_t)r * wps, wps, dw + r * B * dws, B, ap, aps, y + rs + r,
                                                 ldy, 2 * p, T);
                }
            }
        }
    }
}

static void q8_rows(uint32_t wtype, const uint8_t *W, size_t wrow, int64_t K, const void *packed, int64_t T,
                    int64_t r0, int64_t r1, float *y, int64_t ldy) {
    bd_gemmq8_rows_with(&q8_tiles[0][0], Q8_TP, 0, wtype, W, wrow, K, packed, T, r0, r1, y, ldy);
}

static const bd_gemmq_ops q8_ops = {bd_gemmq8_pack_size, bd_gemmq8_pack, q8_rows, BD_GEMMQ8_MAX_K, NULL};

void bd_gemm_q8_fill_avx512(bd_dot_traits t[BD_TYPE_COUNT]) {
    t[BD_TYPE_Q8_0].gemm = &q8_ops;
    t[BD_TYPE_Q4_0].gemm = &q8_ops;
    t[BD_TYPE_Q5_0].gemm = &q8_ops;
    t[BD_TYPE_IQ4_NL].gemm = &q8_ops;
}

#else

void bd_gemm_q8_fill_avx512(bd_dot_traits t[BD_TYPE_COUNT]) { (void)t; }

#endif
