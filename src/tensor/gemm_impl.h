/* gemm_impl.h — internal to the integer GEMMs (gemm_q8.c, gemm_k.c: AVX-512 VNNI; gemm_avx2.c: AVX2 and
 * AVX-VNNI): their target attribute, the lane reduction, and the activation and weight layouts they share.
 *
 * Each output's float chain lives in 8 lanes (half of a 512-bit vector: two outputs per vector). At the end,
 * the 8 lanes are summed in the fixed tree of ggml's hsum_float_8, which the vec_dots reproduce (dot.h):
 * u[l] = v[l] + v[l+4], then (u[0] + u[2]) + (u[1] + u[3]). gemmq_hsum16 does it for 16 outputs at once by
 * transposing as it adds; every addition is the one of that tree, so the bits are those of a per-output sum. */
#ifndef BRAID_TENSOR_GEMM_IMPL_H
#define BRAID_TENSOR_GEMM_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/simd.h"

#if BD_HAVE_X86
#include <immintrin.h>

#define GEMMQ_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))
#define GEMMQ_INLINE GEMMQ_TARGET static inline __attribute__((always_inline))

/* v[j] holds output 2j in lanes 0..7 and output 2j+1 in lanes 8..15; out[o] = the 8-lane sum of output o. */
GEMMQ_INLINE void gemmq_hsum16(const __m512 v[8], float out[16]) {
    __m512 u[4], w[2];
    /* u[k], 128-bit quarter m: lanes l and l+4 of output 4k+m added */
    for (int k = 0; k < 4; k++)
        u[k] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0x88),
                             _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0xDD));
    /* w[h], quarter m: (u0 + u2, u1 + u3) of outputs 8h+m and 8h+4+m */
    for (int h = 0; h < 2; h++)
        w[h] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * h], u[2 * h + 1], 0x44),
                             _mm512_shuffle_ps(u[2 * h], u[2 * h + 1], 0xEE));
    /* element 4m+e: the sum of output m + 4e */
    const __m512 f = _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], 0x88), _mm512_shuffle_ps(w[0], w[1], 0xDD));
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm512_storeu_ps(out, _mm512_permutexvar_ps(idx, f));
}

/* The 8-lane sums of the n (<= 16) accumulators of one tile, v[0..n) (gemmq_hsum16's tree): sums[2i + h] is half
 * h of v[i] (the pair's token h). v[n..16) is overwritten with zeros. */
GEMMQ_INLINE void gemmq_hsum_tile(__m512 v[16], int n, float sums[32]) {
    for (int i = n; i < 16; i++) v[i] = _mm512_setzero_ps();
    gemmq_hsum16(v, sums);
    if (n > 8) gemmq_hsum16(v + 8, sums + 16);
}

/* Stores a tile's sums (gemmq_hsum_tile of R rows x P token pairs, row-major) to y: row r of token t0 + 2p + h
 * at y[t * ldy + r], tokens past T left out. */
GEMMQ_INLINE void gemmq_store_tile(const float sums[32], int R, int P, int64_t t0, int64_t T, float *y, int64_t ldy) {
    for (int r = 0, n = 0; r < R; r++)
        for (int p = 0; p < P; p++, n++)
            for (int h = 0; h < 2; h++) {
                const int64_t t = t0 + 2 * p + h;
                if (t < T) y[t * ldy + r] = sums[2 * n + h];
            }
}

/* Prefetches into L2 part i of n of the bytes [p, p + len). Called at each of the n steps of the loop over a
 * block of weight rows, with the next block's rows, it spreads that block's reads from memory over this
 * block's arithmetic (preparing a block otherwise stalls on them: ~4% of a prompt). */
static inline void gemmq_prefetch_part(const uint8_t *p, size_t len, int64_t i, int64_t n) {
    const size_t lo = len * (size_t)i / (size_t)n, hi = len * (size_t)(i + 1) / (size_t)n;
    for (size_t o = lo & ~(size_t)63; o < hi; o += 64) _mm_prefetch((const char *)(p + o), _MM_HINT_T1);
}

/* ---- Q8_0 / Q4_0 (gemm_q8.c's layouts; the AVX-VNNI kernels read the same ones, plain AVX2 the wide one) ----
 * Packed activations, per pair of tokens and block, BD_GEMMQ8_REC bytes: the two tokens' levels + 128 (32 + 32)
 * then their scales (8 floats each). Prepared weights, per row and block, BD_GEMMQ8_WREC bytes: 32 signed levels
 * (Q4_0: q - 8) then 8 int32 corrections -128 * (sum of the lane's 4 levels); the block scales as floats after
 * the rows' records. A tile computes R <= BD_GEMMQ8_TR rows x P pairs of tokens. */
enum { BD_GEMMQ8_REC = 128, BD_GEMMQ8_WREC = 64, BD_GEMMQ8_PREP = 256 * 1024, BD_GEMMQ8_TR = 4 };
#define BD_GEMMQ8_MAX_K ((int64_t)(BD_GEMMQ8_PREP / (4 * (BD_GEMMQ8_WREC + 4)) * 32))
typedef void (*bd_gemmq8_tile_fn)(const uint8_t *wp, size_t wps, const float *dw, int64_t B, const uint8_t *ap,
                                  size_t aps, float *y, int64_t ldy, int64_t t0, int64_t T);
size_t bd_gemmq8_pack_size(int64_t K, int64_t T);
void bd_gemmq8_pack(const uint8_t *xq, size_t xrow, int64_t K, int64_t T, int64_t g, void *packed);
/* Rows [r0, r1) with tiles[(R - 1) * tp + P - 1] for R rows x P pairs (P <= tp); wide: the layout below. */
void bd_gemmq8_rows_with(const bd_gemmq8_tile_fn *tiles, int tp, int wide, uint32_t wtype, const uint8_t *W,
                         size_t wrow, int64_t K, const void *packed, int64_t T, int64_t r0, int64_t r1, float *y,
                         int64_t ldy);

/* The wide layout, for plain AVX2 (no VNNI; gemm_avx2.c): levels as int16, so that one vpmaddwd forms two of a
 * lane's four products and a second one the other two (two multiply uops per 32 products, where the sign
 * trick of ggml's vec_dot takes three). Per pair of tokens: B records of BD_GEMMQ8W_LEV bytes (token 0's then
 * token 1's 32 levels, 64 bytes each, as bd_gemmq8_widen orders them), then per block the scales record
 * [d(t0), d(t1)] four times (8 floats). Prepared weight rows: BD_GEMMQ8_WREC = 64 bytes per block, the widened
 * levels; the scales as records per pair of rows and block, [d(r), d(r), d(r+1), d(r+1)] (row r + 1 past the
 * last row repeats row r), pair q's B records at dw + 4 q B: BD_GEMMQ8W_DW floats per row and block. */
enum { BD_GEMMQ8W_LEV = 128, BD_GEMMQ8W_REC = BD_GEMMQ8W_LEV + 32, BD_GEMMQ8W_DW = 2 };
/* the largest K whose 4 prepared rows (levels and scales records) fit BD_GEMMQ8_PREP */
#define BD_GEMMQ8W_MAX_K ((int64_t)(BD_GEMMQ8_PREP / (4 * (BD_GEMMQ8_WREC + 4 * BD_GEMMQ8W_DW)) * 32))
/* The 32 int8 levels q (element j in byte j) as 32 int16 at out: first the pairs (4l, 4l + 1) of l = 0..7,
 * then the pairs (4l + 2, 4l + 3), so vpmaddwd on each half leaves in int32 lane l a partial sum of lane l of
 * the vec_dot (elements 4l..4l+3). */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void bd_gemmq8_widen(__m256i q,
                                                                                                   uint8_t *out) {
    const __m256i even_odd = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    /* int32 lane d of lo / hi: elements (2d, 2d + 1) / (16 + 2d, 17 + 2d), then even lanes before odd ones */
    const __m256i lo = _mm256_permutevar8x32_epi32(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(q)), even_odd);
    const __m256i hi = _mm256_permutevar8x32_epi32(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(q, 1)), even_odd);
    _mm256_storeu_si256((__m256i *)out, _mm256_permute2x128_si256(lo, hi, 0x20));
    _mm256_storeu_si256((__m256i *)(out + 32), _mm256_permute2x128_si256(lo, hi, 0x31));
}

/* ---- K-quants against Q8_K (gemm_k.c's layouts, which its top comment describes; the AVX2 kernels read the
 * same ones). A packed pair of tokens per super-block is BD_GEMMK_REC bytes: runs of 32 at 64 * s + 32 * h
 * (token h), the scales at BD_GEMMK_REC_DS (8 copies per token), then at BD_GEMMK_REC_BS the bsums (Q6_K) or
 * the run-sum pairs and -d (Q4_K / Q5_K). Prepared rows: BD_GEMMK45_WREC / BD_GEMMK6_WREC bytes per
 * super-block. */
enum {
    BD_GEMMK_REC = 640, BD_GEMMK_REC_DS = 512, BD_GEMMK_REC_BS = 576,
    BD_GEMMK45_WREC = 320, /* levels 256, run scales 8 x int32 @256, min pairs 4 x int32 @288, d @304, dmin @308 */
    BD_GEMMK6_WREC = 576,  /* levels 256, run scales 8 x 32 bytes @256, -32 * scales 16 x int16 @512, d @544 */
    BD_GEMMK_PREP = 256 * 1024, /* stack bytes for prepared weights */
    BD_GEMMK_TR = 4,
};
#define BD_GEMMK45_MAX_K ((int64_t)(BD_GEMMK_PREP / (4 * BD_GEMMK45_WREC) * 256))
#define BD_GEMMK6_MAX_K ((int64_t)(BD_GEMMK_PREP / (4 * BD_GEMMK6_WREC) * 256))
typedef void (*bd_gemmk_tile_fn)(const uint8_t *wp, size_t wps, size_t wrec, int64_t NB, const uint8_t *ap,
                                 size_t aps, float *y, int64_t ldy, int64_t t0, int64_t T);
size_t bd_gemmk_pack_size(int64_t K, int64_t T);
void bd_gemmk45_pack(const uint8_t *xq, size_t xrow, int64_t K, int64_t T, int64_t g, void *packed);
void bd_gemmk6_pack(const uint8_t *xq, size_t xrow, int64_t K, int64_t T, int64_t g, void *packed);
void bd_gemmk_rows_with(const bd_gemmk_tile_fn *tiles, int tp, uint32_t wtype, const uint8_t *W, size_t wrow,
                        int64_t K, const void *packed, int64_t T, int64_t r0, int64_t r1, float *y, int64_t ldy);
#endif

#endif
