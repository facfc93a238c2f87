/* gemm_b32.c — Q4_1, Q5_1 (x Q8_1) and MXFP4 (x Q8_0) weights over many tokens with AVX-512 VNNI (and, in the
 * section at the end, with AVX2 or AVX-VNNI on CPUs without AVX-512), every output bit-identical to the type's
 * vec_dot (dot_avx2_mix.c, ggml's order; see gemm_q.h for why and how it is used).
 *
 * The vec_dots' float chains, per output:
 *   Q4_1 / Q5_1: per block of 32, acc[l] = fma(d_w * d_x, float(sum of the 4 products at 4l..4l+3), acc[l]) with
 *     unsigned levels (0..15, 0..31), and a scalar chain of the minimum terms summs = fma(m_w, s_x, summs);
 *     result hsum_float_8(acc) + summs.
 *   MXFP4: the same 8-lane step, even blocks into one chain and odd blocks into another, the two added lane-wise
 *     before hsum_float_8; an odd last block is added alone, sum = fma(d_x * d_w, float(its integer total),
 *     sum). (d_w: the E8M0 scale, halved.)
 * These differ from gemm_q8.c's chain only by the min chain and the second chain, so the kernel is the same in
 * kind: the activations packed per pair of tokens, offset by +128 (unsigned for vpdpbusd); each weight block
 * prepared once per block of rows as 32 signed levels and the per-lane correction -128 * (sum of the lane's 4
 * levels), which seeds vpdpbusd so that it gives exactly the signed lane sums; one 512-bit vector holds two
 * tokens' 8 lanes. The min chain runs in the same shape: lane l of the pair's vector repeats the chain of one of
 * the two outputs (lanes 0 and 8 are read), each step one fused multiply-add, as the vec_dot's scalar one.
 *
 * Layouts (built per call): packed activations, per pair of tokens and block, B32_REC bytes: the two tokens'
 * levels + 128 (32 + 32), their scales (8 copies each), their s (Q8_1: fp32 of the block's s, 8 copies each).
 * Prepared weights (per thread, for a block of rows, on the stack), per row and block, 64 bytes: the 32 levels
 * then the 8 corrections; the block scales d and minimums m as floats after the records. */
#include "tensor/gemm_q.h"

#include <math.h>
#include <string.h>

#include "tensor/dot_impl.h"
#include "tensor/gemm_impl.h"
#include "tensor/lanes_x86.h"
#include "tensor/quant.h"
#include "tensor/types.h"

#if BD_HAVE_X86

enum {
    B32_REC = 192,               /* per pair of tokens and block */
    B32_WREC = 64,               /* per row and block */
    B32_PREP = 256 * 1024,       /* stack bytes for prepared rows */
    B32_TOK_BYTES = 1024 * 1024, /* packed activations per token block (stay in L2 while rows pass) */
    B32_TR = 4,                  /* tile: weight rows */
    B32_TP = 2,                  /* tile: pairs of tokens */
};
#define B32_MAX_K ((int64_t)(B32_PREP / (4 * (B32_WREC + 8)) * 32))

static size_t b32_pack_size(int64_t K, int64_t T) {
    const int64_t groups = (T + BD_GEMMQ_GROUP - 1) / BD_GEMMQ_GROUP;
    return (size_t)groups * (BD_GEMMQ_GROUP / 2) * (size_t)(K / BD_QK32) * B32_REC;
}

/* Group g of Q8_0 (q8_1 = 0) or Q8_1 activation rows. */
BD_TARGET_AVX2 static inline void b32_pack(const uint8_t *xq, size_t xrow, int64_t K, int64_t T, int64_t g,
                                           void *packed, const int q8_1) {
    const int64_t B = K / BD_QK32;
    const size_t bsz = q8_1 ? sizeof(bd_block_q8_1) : sizeof(bd_block_q8_0), qoff = q8_1 ? 4 : 2;
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    uint8_t *out = (uint8_t *)packed + (size_t)g * (BD_GEMMQ_GROUP / 2) * (size_t)B * B32_REC;
    for (int p = 0; p < BD_GEMMQ_GROUP / 2; p++) {
        uint8_t *o = out + (size_t)p * (size_t)B * B32_REC;
        for (int h = 0; h < 2; h++) {
            const int64_t t = g * BD_GEMMQ_GROUP + 2 * p + h;
            const uint8_t *x = t < T ? xq + (size_t)t * xrow : NULL;
            for (int64_t b = 0; b < B; b++) {
                uint8_t *rec = o + (size_t)b * B32_REC;
                uint16_t d = 0, s = 0;
                __m256i q = _mm256_setzero_si256();
                if (x) {
                    memcpy(&d, x + (size_t)b * bsz, 2);
                    if (q8_1) memcpy(&s, x + (size_t)b * bsz + 2, 2);
                    q = _mm256_loadu_si256((const __m256i *)(x + (size_t)b * bsz + qoff));
                }
                _mm256_storeu_si256((__m256i *)(rec + 32 * h), _mm256_xor_si256(q, flip));
                _mm256_storeu_ps((float *)(rec + 64) + 8 * h, _mm256_set1_ps(_cvtsh_ss(d)));
                _mm256_storeu_ps((float *)(rec + 128) + 8 * h, _mm256_set1_ps(_cvtsh_ss(s)));
            }
        }
    }
}

static void b32_pack_q8_0(const uint8_t *xq, size_t xrow, int64_t K, int64_t T, int64_t g, void *packed) {
    b32_pack(xq, xrow, K, T, g, packed, 0);
}
static void b32_pack_q8_1(const uint8_t *xq, size_t xrow, int64_t K, int64_t T, int64_t g, void *packed) {
    b32_pack(xq, xrow, K, T, g, packed, 1);
}

/* 32 bytes from 32 nibbles: the low nibbles of the 16 bytes, then the high ones (ggml's element order). */
BD_TARGET_AVX2 static inline __m256i b32_nibbles(const uint8_t *qs) {
    const __m128i v = _mm_loadu_si128((const __m128i *)qs), low4 = _mm_set1_epi8(0x0F);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(v, low4)),
                                   _mm_and_si128(_mm_srli_epi16(v, 4), low4), 1);
}

/* Rows [0, nr) of W into wp (nr * B records), dw and mw (nr * B floats each; mw row-major, or with mins4 (the
 * AVX2 tiles) per group of 4 rows and block the 4 rows' minimums side by side, rows past nr as zeros). */
BD_TARGET_AVX2 static void b32_prep(uint32_t wtype, const uint8_t *W, size_t wrow, int64_t B, int64_t nr, uint8_t *wp,
                                    float *dw, float *mw, const int mins4) {
    const __m256i zero = _mm256_setzero_si256(), ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    const __m128i values = _mm_loadu_si128((const __m128i *)bd_kvalues_mxfp4), low4 = _mm_set1_epi8(0x0F);
    for (int64_t r = 0; r < nr; r++) {
        const uint8_t *row = W + (size_t)r * wrow;
        for (int64_t b = 0; b < B; b++) {
            __m256i q;
            float d, m = 0;
            if (wtype == BD_TYPE_MXFP4) {
                const bd_block_mxfp4 *blk = (const bd_block_mxfp4 *)row + b;
                const __m128i v = _mm_loadu_si128((const __m128i *)blk->qs);
                q = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_shuffle_epi8(values, _mm_and_si128(v, low4))),
                                            _mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16(v, 4), low4)), 1);
                d = bd_e8m0_to_fp32_half(blk->e);
            } else if (wtype == BD_TYPE_Q5_1) {
                const bd_block_q5_1 *blk = (const bd_block_q5_1 *)row + b;
                uint32_t qh;
                memcpy(&qh, blk->qh, 4);
                /* byte j: bit j of qh as 16, by a byte shuffle of the word and a per-byte bit test */
                const __m256i spread = _mm256_shuffle_epi8(
                    _mm256_set1_epi32((int)qh),
                    _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
                const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
                const __m256i h16 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit),
                                                     _mm256_set1_epi8(16));
                q = _mm256_or_si256(b32_nibbles(blk->qs), h16);
                d = _cvtsh_ss(blk->d), m = _cvtsh_ss(blk->m);
            } else {
                const bd_block_q4_1 *blk = (const bd_block_q4_1 *)row + b;
                q = b32_nibbles(blk->qs);
                d = _cvtsh_ss(blk->d), m = _cvtsh_ss(blk->m);
            }
            uint8_t *rec = wp + ((size_t)r * (size_t)B + (size_t)b) * B32_WREC;
            dw[r * B + b] = d;
            mw[mins4 ? (r & ~(int64_t)3) * B + 4 * b + (r & 3) : r * B + b] = m;
            _mm256_storeu_si256((__m256i *)rec, q);
            const __m256i sum4 = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q), ones16);
            _mm256_storeu_si256((__m256i *)(rec + 32), _mm256_sub_epi32(zero, _mm256_slli_epi32(sum4, 7)));
        }
    }
    if (mins4)
        for (int64_t r = nr; r & 3; r++)
            for (int64_t b = 0; b < B; b++) mw[(r & ~(int64_t)3) * B + 4 * b + (r & 3)] = 0;
}

/* R prepared rows (records from wp, stride wps; d and m from dw, mw, stride B) x P pairs of tokens (from ap,
 * stride aps; the first token is t0) -> y[t*ldy + row], tokens >= T not stored. two: MXFP4's two chains; min:
 * Q4_1 / Q5_1's min chain. */
GEMMQ_INLINE void b32_tile(const uint8_t *wp, size_t wps, const float *dw, const float *mw, int64_t B,
                           const uint8_t *ap, size_t aps, float *y, int64_t ldy, int64_t t0, int64_t T, const int two,
                           const int min, const int R, const int P) {
    __m512 acc[2][B32_TR][B32_TP], sm[B32_TR][B32_TP];
    for (int r = 0; r < R; r++)
        for (int p = 0; p < P; p++) acc[0][r][p] = acc[1][r][p] = sm[r][p] = _mm512_setzero_ps();
    const int64_t Bc = two ? B & ~(int64_t)1 : B; /* MXFP4: an odd last block is added alone, below */
#define B32_STEP(c, b)                                                                                            \
    do {                                                                                                          \
        __m512i a[B32_TP];                                                                                        \
        __m512 ds[B32_TP], ss[B32_TP];                                                                            \
        for (int p = 0; p < P; p++) {                                                                             \
            const uint8_t *rec = ap + (size_t)p * aps + (size_t)(b) * B32_REC;                                    \
            a[p] = _mm512_loadu_si512(rec);                                                                       \
            ds[p] = _mm512_loadu_ps(rec + 64);                                                                    \
            if (min) ss[p] = _mm512_loadu_ps(rec + 128);                                                          \
        }                                                                                                         \
        for (int r = 0; r < R; r++) {                                                                             \
            const uint8_t *w = wp + (size_t)r * wps + (size_t)(b) * B32_WREC;                                     \
            const __m512i wv = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)w));                    \
            const __m512i cv = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w + 32)));             \
            const __m512 dv = _mm512_set1_ps(dw[r * B + (b)]);                                                    \
            for (int p = 0; p < P; p++) {                                                                         \
                const __m512i iv = _mm512_dpbusd_epi32(cv, a[p], wv);                                             \
                acc[c][r][p] = _mm512_fmadd_ps(_mm512_mul_ps(ds[p], dv), _mm512_cvtepi32_ps(iv), acc[c][r][p]);   \
                if (min) sm[r][p] = _mm512_fmadd_ps(_mm512_set1_ps(mw[r * B + (b)]), ss[p], sm[r][p]);            \
            }                                                                                                     \
        }                                                                                                         \
    } while (0)
    if (two) {
        for (int64_t b = 0; b < Bc; b += 2) {
            B32_STEP(0, b);
            B32_STEP(1, b + 1);
        }
    } else {
        for (int64_t b = 0; b < B; b++) B32_STEP(0, b);
    }
#undef B32_STEP
    __m512 v[16];
    float sums[32], mins[B32_TR][B32_TP][16];
    int n = 0;
    for (int r = 0; r < R; r++)
        for (int p = 0; p < P; p++) v[n++] = two ? _mm512_add_ps(acc[0][r][p], acc[1][r][p]) : acc[0][r][p];
    gemmq_hsum_tile(v, n, sums);
    if (min)
        for (int r = 0; r < R; r++)
            for (int p = 0; p < P; p++) _mm512_storeu_ps(mins[r][p], sm[r][p]);
    n = 0;
    for (int r = 0; r < R; r++)
        for (int p = 0; p < P; p++, n++)
            for (int h = 0; h < 2; h++) {
                const int64_t t = t0 + 2 * p + h;
                if (t >= T) continue;
                float out = sums[2 * n + h];
                if (min) out += mins[r][p][8 * h];
                if (two && Bc < B) { /* the odd last block: its integer total, one fused multiply-add */
                    const uint8_t *rec = ap + (size_t)p * aps + (size_t)Bc * B32_REC;
                    const uint8_t *wl = wp + (size_t)r * wps + (size_t)Bc * B32_WREC;
                    /* (with vpdpbusd and the row's correction, as in the chain: gcc 12 vectorizes the plain
                     * loop over int8 x (uint8 - 128) into wrong sums at this target) */
                    const __m256i lanes = _mm256_dpbusd_epi32(_mm256_loadu_si256((const __m256i *)(wl + 32)),
                                                              _mm256_loadu_si256((const __m256i *)(rec + 32 * h)),
                                                              _mm256_loadu_si256((const __m256i *)wl));
                    int32_t l8[8];
                    _mm256_storeu_si256((__m256i *)l8, lanes);
                    int total = 0;
                    for (int j = 0; j < 8; j++) total += l8[j];
                    float xd;
                    memcpy(&xd, rec + 64 + 32 * h, 4);
                    out = fmaf(xd * dw[r * B + Bc], (float)total, out);
                }
                y[t * ldy + r] = out;
            }
}

typedef void (*b32_tile_fn)(const uint8_t *wp, size_t wps, const float *dw, const float *mw, int64_t B,
                            const uint8_t *ap, size_t aps, float *y, int64_t ldy, int64_t t0, int64_t T);
#define B32_TILE(NAME, TWO, MIN, R, P)                                                                           \
    GEMMQ_TARGET static void NAME##_##R##_##P(const uint8_t *wp, size_t wps, const float *dw, const float *mw,      \
                                              int64_t B, const uint8_t *ap, size_t aps, float *y, int64_t ldy,     \
                                              int64_t t0, int64_t T) {                                             \
        b32_tile(wp, wps, dw, mw, B, ap, aps, y, ldy, t0, T, TWO, MIN, R, P);                                    \
    }
#define B32_TILES(NAME, TWO, MIN)                                                                                \
    B32_TILE(NAME, TWO, MIN, 1, 1) B32_TILE(NAME, TWO, MIN, 1, 2) B32_TILE(NAME, TWO, MIN, 2, 1)                  \
    B32_TILE(NAME, TWO, MIN, 2, 2) B32_TILE(NAME, TWO, MIN, 3, 1) B32_TILE(NAME, TWO, MIN, 3, 2)                  \
    B32_TILE(NAME, TWO, MIN, 4, 1) B32_TILE(NAME, TWO, MIN, 4, 2)                                                 \
    static const b32_tile_fn NAME[B32_TR][B32_TP] = {{NAME##_1_1, NAME##_1_2}, {NAME##_2_1, NAME##_2_2},         \
                                                     {NAME##_3_1, NAME##_3_2}, {NAME##_4_1, NAME##_4_2}};
B32_TILES(min_tiles, 0, 1)
B32_TILES(two_tiles, 1, 0)

/* Rows [r0, r1) for every token: blocks of rows prepared on the stack, token blocks that stay in L2 (as
 * gemm_q8.c's row loop). tiles[(R - 1) * tp + np - 1]: the tile of R <= tr rows and np <= tp pairs of tokens. */
static void b32_rows_with(const b32_tile_fn *tiles, int tr, int tp, int mins4, uint32_t wtype, const uint8_t *W,
                          size_t wrow, int64_t K, const void *packed, int64_t T, int64_t r0, int64_t r1, float *y,
                          int64_t ldy) {
    const int64_t B = K / BD_QK32, npairs = (T + 1) / 2;
    const size_t wps = (size_t)B * B32_WREC, aps = (size_t)B * B32_REC;
    int64_t rb = (B32_PREP / (int64_t)(wps + 2 * (size_t)B * sizeof(float))) & ~(int64_t)3;
    if (rb > 64) rb = 64;
    int64_t tb = (B32_TOK_BYTES / (int64_t)aps) / tp * tp;
    if (tb < tp) tb = tp;
    _Alignas(64) uint8_t wp[B32_PREP];
    float *dw = (float *)(wp + (size_t)rb * wps), *mw = dw + rb * B;
    for (int64_t p0 = 0; p0 < npairs; p0 += tb) {
        const int64_t p1 = p0 + tb < npairs ? p0 + tb : npairs;
        for (int64_t rs = r0; rs < r1; rs += rb) {
            const int64_t nr = r1 - rs < rb ? r1 - rs : rb;
            b32_prep(wtype, W + (size_t)rs * wrow, wrow, B, nr, wp, dw, mw, mins4);
            const int64_t next = r1 - (rs + nr) < rb ? r1 - (rs + nr) : rb;
            const int64_t steps = (p1 - p0 + tp - 1) / tp;
            for (int64_t p = p0; p < p1; p += tp) {
                const int np = (int)(p1 - p < tp ? p1 - p : tp);
                gemmq_prefetch_part(W + (size_t)(rs + nr) * wrow, (size_t)next * wrow, (p - p0) / tp, steps);
                const uint8_t *ap = (const uint8_t *)packed + (size_t)p * aps;
                for (int64_t r = 0; r < nr; r += tr) {
                    const int R = (int)(nr - r < tr ? nr - r : tr);
                    tiles[(R - 1) * tp + np - 1](wp + (size_t)r * wps, wps, dw + r * B, mw + r * B, B, ap, aps,
                                                 y + rs + r, ldy, 2 * p, T);
                }
            }
        }
    }
}

static void b32_rows(uint32_t wtype, const uint8_t *W, size_t wrow, int64_t K, const void *packed, int64_t T,
                     int64_t r0, int64_t r1, float *y, int64_t ldy) {
    const b32_tile_fn *tiles = wtype == BD_TYPE_MXFP4 ? &two_tiles[0][0] : &min_tiles[0][0];
    b32_rows_with(tiles, B32_TR, B32_TP, 0, wtype, W, wrow, K, packed, T, r0, r1, y, ldy);
}

/* ---- AVX2 and AVX-VNNI (CPUs without AVX-512) ----
 * The same packed activations, prepared weights and row loop; only the tile differs. A 256-bit vector holds one
 * output's 8 lanes (one row against one token), so a tile is R rows x one packed pair of tokens: Q4_1 / Q5_1 up
 * to 4 rows (8 chains, and their 8 scalar min chains side by side in one vector: lane 2r + h is output (r, h)'s
 * chain, each step one fused multiply-add as the vec_dot's fmaf; b32_prep's mins4 layout gives a row group's 4
 * minimums of a block in one load), MXFP4 up to 2 rows (two chains per output), so the chains stay in the 16
 * registers. The lane sums: AVX-VNNI's vpdpbusd seeded with the row's correction, as the AVX-512 tile; plain AVX2
 * vpmaddubsw of the offset activations (0..255) by the levels (|level| <= 31: no pair of products reaches the
 * int16 limit), vpmaddwd by ones, plus the correction. Exact either way, so every output has vec_dot's bits
 * (llama.cpp's haswell build computes these types' prompts with its vec_dot too: tinyBLAS has none of them). */

#define B32A_TARGET __attribute__((target("avx2,fma,f16c")))
#define B32V_TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
#define B32A_INLINE static inline __attribute__((always_inline))
#define B32A_LANES(c, a, w) _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(a, w), _mm256_set1_epi16(1)), c)
#define B32V_LANES(c, a, w) _mm256_dpbusd_avx_epi32(c, a, w)

/* Block b into chain c of every output of the tile (and the min chains). */
#define B32A_STEP(c, b, LANES)                                                                                  \
    do {                                                                                                       \
        const uint8_t *rec = ap + (size_t)(b) * B32_REC;                                                       \
        const __m256i a0 = bd_load32(rec), a1 = bd_load32(rec + 32);                                           \
        const __m256 ds0 = _mm256_loadu_ps((const float *)(rec + 64)), ds1 = _mm256_loadu_ps((const float *)(rec + 96)); \
        for (int r = 0; r < R; r++) {                                                                          \
            const uint8_t *w = wp + (size_t)r * wps + (size_t)(b) * B32_WREC;                                  \
            const __m256i wv = bd_load32(w), cv = bd_load32(w + 32);                                           \
            const __m256 dv = _mm256_broadcast_ss(&dw[r * B + (b)]);                                           \
            acc[c][r][0] = _mm256_fmadd_ps(_mm256_mul_ps(ds0, dv), _mm256_cvtepi32_ps(LANES(cv, a0, wv)), acc[c][r][0]); \
            acc[c][r][1] = _mm256_fmadd_ps(_mm256_mul_ps(ds1, dv), _mm256_cvtepi32_ps(LANES(cv, a1, wv)), acc[c][r][1]); \
        }                                                                                                      \
        if (min) {                                                                                             \
            const __m256 sx = _mm256_unpacklo_ps(_mm256_loadu_ps((const float *)(rec + 128)),                  \
                                                 _mm256_loadu_ps((const float *)(rec + 160))); /* s0 s1 s0 s1 */ \
            const __m256 mv = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(mw + 4 * (b))), spread); \
            sm = _mm256_fmadd_ps(mv, sx, sm);                                                                  \
        }                                                                                                      \
    } while (0)

#define B32A_TILE_BODY(LANES)                                                                                   \
    __m256 acc[2][4][2], sm = _mm256_setzero_ps();                                                             \
    const __m256i spread = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);                                           \
    for (int r = 0; r < R; r++) acc[0][r][0] = acc[0][r][1] = acc[1][r][0] = acc[1][r][1] = _mm256_setzero_ps(); \
    const int64_t Bc = two ? B & ~(int64_t)1 : B; /* MXFP4: an odd last block is added alone, below */           \
    if (two) {                                                                                                 \
        for (int64_t b = 0; b < Bc; b += 2) {                                                                  \
            B32A_STEP(0, b, LANES);                                                                            \
            B32A_STEP(1, b + 1, LANES);                                                                        \
        }                                                                                                      \
    } else {                                                                                                   \
        for (int64_t b = 0; b < B; b++) B32A_STEP(0, b, LANES);                                                \
    }                                                                                                          \
    _Alignas(32) float mins[8];                                                                                \
    _mm256_store_ps(mins, sm);                                                                                 \
    for (int r = 0; r < R; r++)                                                                                \
        for (int h = 0; h < 2; h++) {                                                                          \
            const int64_t t = t0 + h;                                                                          \
            if (t >= T) continue;                                                                              \
            float out = bd_hsum8(two ? _mm256_add_ps(acc[0][r][h], acc[1][r][h]) : acc[0][r][h]);              \
            if (min) out += mins[2 * r + h];                                                                   \
            if (two && Bc < B) { /* the odd last block: its integer total, one fused multiply-add */           \
                const uint8_t *rec = ap + (size_t)Bc * B32_REC, *wl = wp + (size_t)r * wps + (size_t)Bc * B32_WREC; \
                int32_t l8[8];                                                                                 \
                _mm256_storeu_si256((__m256i *)l8, LANES(bd_load32(wl + 32), bd_load32(rec + 32 * h), bd_load32(wl))); \
                int total = 0;                                                                                 \
                for (int j = 0; j < 8; j++) total += l8[j];                                                    \
                float xd;                                                                                      \
                memcpy(&xd, rec + 64 + 32 * h, 4);                                                             \
                out = fmaf(xd * dw[r * B + Bc], (float)total, out);                                            \
            }                                                                                                  \
            y[t * ldy + r] = out;                                                                              \
        }

B32A_TARGET B32A_INLINE void b32a_tile(const uint8_t *wp, size_t wps, const float *dw, const float *mw, int64_t B,
                                       const uint8_t *ap, float *y, int64_t ldy, int64_t t0, int64_t T, const int two,
                                       const int min, const int R) {
    B32A_TILE_BODY(B32A_LANES)
}
B32V_TARGET B32A_INLINE void b32v_tile(const uint8_t *wp, size_t wps, const float *dw, const float *mw, int64_t B,
                                       const uint8_t *ap, float *y, int64_t ldy, int64_t t0, int64_t T, const int two,
                                       const int min, const int R) {
    B32A_TILE_BODY(B32V_LANES)
}

#define B32A_TILE(PFX, TGT, NAME, TWO, MIN, R)                                                                   \
    TGT static void PFX##NAME##_##R(const uint8_t *wp, size_t wps, const float *dw, const float *mw, int64_t B,  \
                                    const uint8_t *ap, size_t aps, float *y, int64_t ldy, int64_t t0, int64_t T) { \
        (void)aps;                                                                                               \
        PFX##_tile(wp, wps, dw, mw, B, ap, y, ldy, t0, T, TWO, MIN, R);                                          \
    }
#define B32A_TILES(PFX, TGT)                                                                                     \
    B32A_TILE(PFX, TGT, _min, 0, 1, 1) B32A_TILE(PFX, TGT, _min, 0, 1, 2) B32A_TILE(PFX, TGT, _min, 0, 1, 3)     \
    B32A_TILE(PFX, TGT, _min, 0, 1, 4) B32A_TILE(PFX, TGT, _two, 1, 0, 1) B32A_TILE(PFX, TGT, _two, 1, 0, 2)     \
    static const b32_tile_fn PFX##_min_tiles[4] = {PFX##_min_1, PFX##_min_2, PFX##_min_3, PFX##_min_4};          \
    static const b32_tile_fn PFX##_two_tiles[2] = {PFX##_two_1, PFX##_two_2};
B32A_TILES(b32a, B32A_TARGET)
B32A_TILES(b32v, B32V_TARGET)

/* The AVX-VNNI choice is gemm_avx2.c's (bd_gemmq_uses_avx_vnni); the packed layout is the same for both. */
static void b32a_rows(uint32_t wtype, const uint8_t *W, size_t wrow, int64_t K, const void *packed, int64_t T,
                      int64_t r0, int64_t r1, float *y, int64_t ldy) {
    const int v = bd_gemmq_uses_avx_vnni(), two = wtype == BD_TYPE_MXFP4;
    const b32_tile_fn *tiles = two ? (v ? b32v_two_tiles : b32a_two_tiles) : (v ? b32v_min_tiles : b32a_min_tiles);
    b32_rows_with(tiles, two ? 2 : 4, 1, !two, wtype, W, wrow, K, packed, T, r0, r1, y, ldy);
}

static const bd_gemmq_ops b32a_q8_0_ops = {b32_pack_size, b32_pack_q8_0, b32a_rows, B32_MAX_K, NULL};
static const bd_gemmq_ops b32a_q8_1_ops = {b32_pack_size, b32_pack_q8_1, b32a_rows, B32_MAX_K, NULL};

void bd_gemm_b32_fill_avx2(bd_dot_traits t[BD_TYPE_COUNT]) {
    t[BD_TYPE_Q4_1].gemm = &b32a_q8_1_ops;
    t[BD_TYPE_Q5_1].gemm = &b32a_q8_1_ops;
    t[BD_TYPE_MXFP4].gemm = &b32a_q8_0_ops;
}

static const bd_gemmq_ops b32_q8_0_ops = {b32_pack_size, b32_pack_q8_0, b32_rows, B32_MAX_K, NULL};
static const bd_gemmq_ops b32_q8_1_ops = {b32_pack_size, b32_pack_q8_1, b32_rows, B32_MAX_K, NULL};

void bd_gemm_b32_fill_avx512(bd_dot_traits t[BD_TYPE_COUNT]) {
    t[BD_TYPE_Q4_1].gemm = &b32_q8_1_ops;
    t[BD_TYPE_Q5_1].gemm = &b32_q8_1_ops;
    t[BD_TYPE_MXFP4].gemm = &b32_q8_0_ops;
}

#else

void bd_gemm_b32_fill_avx2(bd_dot_traits t[BD_TYPE_COUNT]) { (void)t; }
void bd_gemm_b32_fill_avx512(bd_dot_traits t[BD_TYPE_COUNT]) { (void)t; }

#endif
