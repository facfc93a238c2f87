/* gemm_avx2.c — the prompt GEMMs of gemm_q.h for CPUs without AVX-512: Q8_0, Q4_0, Q5_0, IQ4_NL (x Q8_0) and Q4_K, Q5_K,
 * Q6_K (x Q8_K) with AVX2 integer multiply-adds, and with AVX-VNNI (the 256-bit VEX vpdpbusd / vpdpwssd of
 * Alder Lake and later client CPUs, Zen 5) where CPUID has it. Every output is bit-identical to the type's
 * vec_dot (dot.h), as the AVX-512 kernels' are.
 *
 * They read the AVX-512 kernels' layouts (gemm_impl.h; plain AVX2 Q8_0 / Q4_0 its own wide one): activations
 * packed by pairs of tokens, weight rows prepared per block of rows, and their row loops; only the register
 * tiles differ. A 256-bit vector holds one
 * output's 8 float lanes (one token against one weight row), so a tile is up to 4 rows x 2 tokens (one packed
 * pair): 8 float chains, plus the integer sums of the block in flight, fit the 16 vector registers.
 *
 * Q8_0 / Q4_0, per block and output: the 8 int32 lane sums (each the 4 products of positions 4l..4l+3), then
 * acc = fma(d_w * d_x, float(sums), acc), the vec_dot's chain. Plain AVX2 reads its own layout (gemm_impl.h's
 * wide one: levels widened to int16 once per token and per prepared row) and forms the sums with two vpmaddwd
 * and an add, where ggml's sign trick (vpsignb, vpmaddubsw, vpmaddwd) spends three multiply-port uops and one
 * more vpsignb per row; the integers are exact either way, so the bits are vec_dot's. With AVX-VNNI, vpdpbusd
 * multiplies the offset activations by the signed levels directly, seeded with the row's -128 * (sum of
 * levels) correction.
 * K-quants, per run of 32 and output: levels x activations by vpmaddubsw (unsigned levels, signed
 * activations), times the run's scale into int32 by vpmaddwd (plus an add) or AVX-VNNI's vpdpwssd. */
#include "tensor/gemm_q.h"

#include <stdlib.h>
#include <string.h>

#include "tensor/cpu.h"
#include "tensor/dot_impl.h"
#include "tensor/gemm_impl.h"
#include "tensor/lanes_x86.h"
#include "tensor/quant.h"
#include "tensor/types.h"

#if BD_HAVE_X86

#define A2_TARGET __attribute__((target("avx2,fma,f16c")))
#define VN_TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
#define A2_INLINE static inline __attribute__((always_inline))

enum { A2_TP = 1 }; /* pairs of tokens per tile (rows: up to 4, the row loops' step) */

/* ---- Q8_0 / Q4_0 ---- */

/* AVX-VNNI: R prepared rows x the pair of tokens at ap (the AVX-512 kernels' layout, gemm_impl.h). vpdpbusd
 * multiplies the offset activations (a + 128) by the signed levels, seeded with the row's -128 x (sum of
 * levels) correction: exactly vec_dot's integer lane sums. */
VN_TARGET A2_INLINE void q8v_tile(const uint8_t *wp, size_t wps, const float *dw, int64_t B, const uint8_t *ap,
                                  float *y, int64_t ldy, int64_t t0, int64_t T, const int R) {
    __m256 acc[4][2];
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < B; b++) {
        const uint8_t *rec = ap + (size_t)b * BD_GEMMQ8_REC;
        const __m256i a0 = bd_load32(rec), a1 = bd_load32(rec + 32);
        const __m256 ds0 = _mm256_loadu_ps((const float *)(rec + 64)), ds1 = _mm256_loadu_ps((const float *)(rec + 96));
        for (int r = 0; r < R; r++) {
            const uint8_t *w = wp + (size_t)r * wps + (size_t)b * BD_GEMMQ8_WREC;
            const __m256i wv = bd_load32(w), cv = bd_load32(w + 32);
            const __m256 dv = _mm256_broadcast_ss(&dw[r * B + b]);
            const __m256i i0 = _mm256_dpbusd_avx_epi32(cv, a0, wv), i1 = _mm256_dpbusd_avx_epi32(cv, a1, wv);
            acc[r][0] = _mm256_fmadd_ps(_mm256_mul_ps(ds0, dv), _mm256_cvtepi32_ps(i0), acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(_mm256_mul_ps(ds1, dv), _mm256_cvtepi32_ps(i1), acc[r][1]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int h = 0; h < 2; h++)
            if (t0 + h < T) y[(t0 + h) * ldy + r] = bd_hsum8(acc[r][h]);
}

/* Plain AVX2, the wide layout (gemm_impl.h): per block, row and token, two vpmaddwd on int16 levels and an add
 * give the 8 lane sums (exact, so the same integers as vec_dot's sign trick: |levels| <= 128 x <= 127, the
 * activation quantizer's range), then the conversion and the fused multiply-add of vec_dot's chain.
 * Per output and block that is 6 vector uops (2 vpmaddwd, the add, the conversion, the FMA and one vpermilps
 * that spreads the output's scale product over its 8 lanes) and 3 loads (the row's levels, as memory operands
 * for each token, and a share of the activations and scales), against 4 vector pipes, 2 of which multiply,
 * and 2 loads of 256 bits per cycle on Zen 5: all three bound the loop near 1.5 cycles per output and block
 * (it runs at ~1.9 with the weights in L1). The scale products d_w * d_x (one float product each, as vec_dot
 * rounds them) take one vmulps per pair of rows and block: the prepared rows hold [d(r), d(r), d(r+1),
 * d(r+1)] per pair of rows and block and the packed tokens [d(t0), d(t1)] four times, so the product is the
 * record [d(r,0), d(r,1), d(r+1,0), d(r+1,1)] in both halves, which vpermilps selects from.
 * The accumulators are named variables, not an array: gcc stored an array's back to the stack every block. */
/* Row r of one block: its levels as memory operands for the two tokens (activations a00..a11 in registers),
 * D the row pair's products record, I0 / I1 the vpermilps selectors of token 0 / 1. */
#define Q8W_ROW(r, A0, A1, D, I0, I1)                                                                               \
    if (R > (r)) {                                                                                                 \
        const __m256i p0 = _mm256_add_epi32(_mm256_madd_epi16(a00, bd_load32(wr##r)), _mm256_madd_epi16(a01, bd_load32(wr##r + 32))); \
        A0 = _mm256_fmadd_ps(_mm256_permute_ps(D, I0), _mm256_cvtepi32_ps(p0), A0);                               \
        const __m256i p1 = _mm256_add_epi32(_mm256_madd_epi16(a10, bd_load32(wr##r)), _mm256_madd_epi16(a11, bd_load32(wr##r + 32))); \
        A1 = _mm256_fmadd_ps(_mm256_permute_ps(D, I1), _mm256_cvtepi32_ps(p1), A1);                               \
        wr##r += BD_GEMMQ8_WREC;                                                                                   \
    }
A2_TARGET A2_INLINE void q8w_tile(const uint8_t *wp, size_t wps, const float *dw, int64_t B, const uint8_t *ap,
                                  float *y, int64_t ldy, int64_t t0, int64_t T, const int R) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    const uint8_t *wr0 = wp, *wr1 = wp + wps, *wr2 = wp + 2 * wps, *wr3 = wp + 3 * wps, *a = ap;
    /* the tokens' scales record of block b at xs + 8 b; rows 0-1's scales record at dw + 4 b, rows 2-3's at
     * dw + 4 (B + b) (gemm_impl.h) */
    const float *xs = (const float *)(ap + (size_t)B * BD_GEMMQ8W_LEV), *dr = dw;
    _Pragma("GCC unroll 2") for (int64_t b = 0; b < B; b++) {
        const __m256i a00 = bd_load32(a), a01 = bd_load32(a + 32), a10 = bd_load32(a + 64), a11 = bd_load32(a + 96);
        {
            const __m256 D = _mm256_mul_ps(_mm256_broadcast_ps((const __m128 *)dr), _mm256_loadu_ps(xs));
            Q8W_ROW(0, c00, c01, D, 0x00, 0x55)
            Q8W_ROW(1, c10, c11, D, 0xAA, 0xFF)
        }
        if (R > 2) {
            const __m256 D = _mm256_mul_ps(_mm256_broadcast_ps((const __m128 *)(dr + 4 * B)), _mm256_loadu_ps(xs));
            Q8W_ROW(2, c20, c21, D, 0x00, 0x55)
            Q8W_ROW(3, c30, c31, D, 0xAA, 0xFF)
        }
        a += BD_GEMMQ8W_LEV;
        xs += 8;
        dr += 4;
    }
    const __m256 c[4][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}};
    for (int r = 0; r < R; r++)
        for (int h = 0; h < 2; h++)
            if (t0 + h < T) y[(t0 + h) * ldy + r] = bd_hsum8(c[r][h]);
}
#undef Q8W_ROW

/* Packs group g in the wide layout: levels widened once per token, shared by every weight row. Its size is
 * also enough for the AVX-VNNI layout (128 bytes per pair and block). */
_Static_assert((int)BD_GEMMQ8W_REC >= (int)BD_GEMMQ8_REC, "the packed buffer holds either layout");
static size_t q8w_pack_size(int64_t K, int64_t T) {
    const int64_t groups = (T + BD_GEMMQ_GROUP - 1) / BD_GEMMQ_GROUP;
    return (size_t)groups * (BD_GEMMQ_GROUP / 2) * (size_t)(K / BD_QK8_0) * BD_GEMMQ8W_REC;
}

A2_TARGET static void q8w_pack(const uint8_t *xq, size_t xrow, int64_t K, int64_t T, int64_t g, void *packed) {
    const int64_t B = K / BD_QK8_0;
    const size_t aps = (size_t)B * BD_GEMMQ8W_REC;
    uint8_t *out = (uint8_t *)packed + (size_t)g * (BD_GEMMQ_GROUP / 2) * aps;
    for (int p = 0; p < BD_GEMMQ_GROUP / 2; p++) {
        uint8_t *o = out + (size_t)p * aps;
        float *xs = (float *)(o + (size_t)B * BD_GEMMQ8W_LEV);
        for (int h = 0; h < 2; h++) {
            const int64_t t = g * BD_GEMMQ_GROUP + 2 * p + h;
            const bd_block_q8_0 *x = t < T ? (const bd_block_q8_0 *)(xq + (size_t)t * xrow) : NULL;
            for (int64_t b = 0; b < B; b++) {
                const __m256i q = x ? bd_load32(x[b].qs) : _mm256_setzero_si256();
                bd_gemmq8_widen(q, o + (size_t)b * BD_GEMMQ8W_LEV + 64 * h);
                const float d = x ? bd_h2f(x[b].d) : 0.0f;
                for (int k = 0; k < 4; k++) xs[8 * b + 2 * k + h] = d;
            }
        }
    }
}

#define Q8_TILE_FN(PFX, TGT, R)                                                                                     \
    TGT static void PFX##_tile_##R(const uint8_t *wp, size_t wps, const float *dw, int64_t B, const uint8_t *ap,    \
                                   size_t aps, float *y, int64_t ldy, int64_t t0, int64_t T) {                     \
        (void)aps;                                                                                                 \
        PFX##_tile(wp, wps, dw, B, ap, y, ldy, t0, T, R);                                                          \
    }
Q8_TILE_FN(q8w, A2_TARGET, 1)
Q8_TILE_FN(q8w, A2_TARGET, 2)
Q8_TILE_FN(q8w, A2_TARGET, 3)
Q8_TILE_FN(q8w, A2_TARGET, 4)
Q8_TILE_FN(q8v, VN_TARGET, 1)
Q8_TILE_FN(q8v, VN_TARGET, 2)
Q8_TILE_FN(q8v, VN_TARGET, 3)
Q8_TILE_FN(q8v, VN_TARGET, 4)
static const bd_gemmq8_tile_fn q8w_tiles[4] = {q8w_tile_1, q8w_tile_2, q8w_tile_3, q8w_tile_4};
static const bd_gemmq8_tile_fn q8v_tiles[4] = {q8v_tile_1, q8v_tile_2, q8v_tile_3, q8v_tile_4};

/* ---- K-quants ---- */

/* R prepared rows x one packed pair of tokens; KIND 4, 5, 6 for Q4_K, Q5_K, Q6_K, and 2, 3, 7 for Q2_K, Q3_K,
 * IQ4_XS (layouts in gemm_impl.h and gemm_k.c). Per super-block: the integer lanes of both tokens for each row (Q6_K seeded with its -32 offset),
 * the mins chain (Q4_K / Q5_K, both tokens in one vector: lanes 4h..4h+3 are token h's), then the main FMA.
 * The 8 integer accumulators are named variables that stay in registers through the 8 runs, with the two
 * activation runs, a row's levels and scale and a temporary (14 of the 16 vector registers); the float
 * chains live in memory (fm, mm: one load and store per super-block, exact). As arrays in registers, gcc
 * spilled the integer accumulators inside the run loop: 2.4 cycles per run and output where the vpmaddubsw +
 * vpmaddwd pair needs one. */
#define K_RUN_ROW(r, I0, I1, K_DPWSSD)                                                                             \
    if (R > (r)) {                                                                                                 \
        const uint8_t *w = wrec_i + (r) * wps;                                                                     \
        const __m256i lv = bd_load32(w + 32 * s);                                                                  \
        __m256i sc;                                                                                                \
        if (sc16) {                                                                                                \
            sc = bd_load32(w + 256 + 32 * s);                                                                      \
        } else {                                                                                                   \
            int32_t v;                                                                                             \
            memcpy(&v, w + 256 + 4 * s, 4);                                                                        \
            sc = _mm256_set1_epi32(v);                                                                             \
        }                                                                                                          \
        if (kind == 7) { /* signed levels: |q| times y with q's sign */                                            \
            const __m256i al = _mm256_sign_epi8(lv, lv);                                                           \
            I0 = K_DPWSSD(I0, _mm256_maddubs_epi16(al, _mm256_sign_epi8(a0, lv)), sc);                             \
            I1 = K_DPWSSD(I1, _mm256_maddubs_epi16(al, _mm256_sign_epi8(a1, lv)), sc);                             \
        } else if (kind == 3) { /* levels 0..7, the -4 offset per pair as the vec_dot takes it */                   \
            I0 = K_DPWSSD(I0, _mm256_sub_epi16(_mm256_maddubs_epi16(lv, a0), a40), sc);                            \
            I1 = K_DPWSSD(I1, _mm256_sub_epi16(_mm256_maddubs_epi16(lv, a1), a41), sc);                            \
        } else {                                                                                                   \
            I0 = K_DPWSSD(I0, _mm256_maddubs_epi16(lv, a0), sc);                                                   \
            I1 = K_DPWSSD(I1, _mm256_maddubs_epi16(lv, a1), sc);                                                   \
        }                                                                                                          \
    }
/* Row r's seeds (Q6_K: -32 x scales x bsums) or mins chain (Q4_K / Q5_K), before the runs. */
#define K_SEED_ROW(r, I0, I1)                                                                                      \
    if (R > (r)) {                                                                                                 \
        const uint8_t *w = wrec_i + (r) * wps;                                                                     \
        if (q6) {                                                                                                  \
            const __m256i m32 = bd_load32(w + 512);                                                                \
            I0 = _mm256_madd_epi16(bd_load32(arec + BD_GEMMK_REC_BS), m32);                                        \
            I1 = _mm256_madd_epi16(bd_load32(arec + BD_GEMMK_REC_BS + 32), m32);                                   \
        } else if (kx) {                                                                                           \
            I0 = I1 = _mm256_setzero_si256();                                                                      \
            if (kind == 2) { /* Q2_K's mins, fused into the chain before the levels: fnmadd with y.d * dmin */     \
                const __m256i mins = bd_load32(w + 512);                                                           \
                const __m256 dmin = _mm256_broadcast_ss((const float *)(w + 548));                                 \
                for (int h = 0; h < 2; h++) {                                                                      \
                    const __m256i ml = _mm256_madd_epi16(bd_load32(arec + BD_GEMMK_REC_BS + 32 * h), mins);        \
                    const __m256 ds = _mm256_loadu_ps((const float *)(arec + BD_GEMMK_REC_DS + 32 * h));           \
                    _mm256_store_ps(fm[r][h], _mm256_fnmadd_ps(_mm256_mul_ps(ds, dmin), _mm256_cvtepi32_ps(ml),    \
                                                               _mm256_load_ps(fm[r][h])));                         \
                }                                                                                                  \
            }                                                                                                      \
        } else {                                                                                                   \
            I0 = I1 = _mm256_setzero_si256();                                                                      \
            __m256i ii = _mm256_madd_epi16(bd_load32(arec + BD_GEMMK_REC_BS),                                      \
                                           _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(w + 288)))); \
            if (kind == 5) { /* one integer per output: the sum of its 4 lanes, in all 4 */                        \
                ii = _mm256_add_epi32(ii, _mm256_shuffle_epi32(ii, 0x4E));                                         \
                ii = _mm256_add_epi32(ii, _mm256_shuffle_epi32(ii, 0xB1));                                         \
            }                                                                                                      \
            const __m256 nd = _mm256_loadu_ps((const float *)(arec + BD_GEMMK_REC_BS + 32));                       \
            _mm256_store_ps(mm[r], _mm256_fmadd_ps(_mm256_mul_ps(nd, _mm256_broadcast_ss((const float *)(w + 308))), \
                                                   _mm256_cvtepi32_ps(ii), _mm256_load_ps(mm[r])));                \
        }                                                                                                          \
    }
/* Row r's main FMA after the runs. */
#define K_MAIN_ROW(r, I0, I1)                                                                                      \
    if (R > (r)) {                                                                                                 \
        const __m256 d = _mm256_broadcast_ss((const float *)(wrec_i + (r) * wps + (sc16 ? 544 : 304)));            \
        const __m256 ds0 = _mm256_loadu_ps((const float *)(arec + BD_GEMMK_REC_DS));                               \
        const __m256 ds1 = _mm256_loadu_ps((const float *)(arec + BD_GEMMK_REC_DS + 32));                          \
        _mm256_store_ps(fm[r][0], _mm256_fmadd_ps(_mm256_mul_ps(ds0, d), _mm256_cvtepi32_ps(I0), _mm256_load_ps(fm[r][0]))); \
        _mm256_store_ps(fm[r][1], _mm256_fmadd_ps(_mm256_mul_ps(ds1, d), _mm256_cvtepi32_ps(I1), _mm256_load_ps(fm[r][1]))); \
    }
#define K_TILE_BODY(K_DPWSSD)                                                                                      \
    const int q6 = kind == 6, kx = kind == 2 || kind == 3 || kind == 7, sc16 = q6 || kx;                           \
    _Alignas(32) float fm[4][2][8], mm[4][8];                                                                      \
    /* zeroed by vector stores of a zero gcc cannot see (the asm): it turned a memset, and plain stores of      \
     * zeros, into a rep stos, whose start-up was ~10% of a call at K = 1024 */                                   \
    __m256 z0 = _mm256_setzero_ps();                                                                               \
    __asm__("" : "+x"(z0));                                                                                        \
    for (int r = 0; r < 4; r++) {                                                                                  \
        _mm256_store_ps(fm[r][0], z0);                                                                             \
        _mm256_store_ps(fm[r][1], z0);                                                                             \
        _mm256_store_ps(mm[r], z0);                                                                                \
    }                                                                                                              \
    for (int64_t i = 0; i < NB; i++) {                                                                             \
        const uint8_t *arec = ap + (size_t)i * BD_GEMMK_REC, *wrec_i = wp + (size_t)i * wrec;                      \
        __m256i i00, i01, i10 = _mm256_setzero_si256(), i11 = i10, i20 = i10, i21 = i10, i30 = i10, i31 = i10;     \
        K_SEED_ROW(0, i00, i01)                                                                                    \
        K_SEED_ROW(1, i10, i11)                                                                                    \
        K_SEED_ROW(2, i20, i21)                                                                                    \
        K_SEED_ROW(3, i30, i31)                                                                                    \
        _Pragma("GCC unroll 8") for (int s = 0; s < 8; s++) {                                                      \
            const __m256i a0 = bd_load32(arec + 64 * s), a1 = bd_load32(arec + 64 * s + 32);                      \
            const __m256i a40 = kind == 3 ? _mm256_maddubs_epi16(_mm256_set1_epi8(4), a0) : a0;                    \
            const __m256i a41 = kind == 3 ? _mm256_maddubs_epi16(_mm256_set1_epi8(4), a1) : a1;                    \
            K_RUN_ROW(0, i00, i01, K_DPWSSD)                                                                       \
            K_RUN_ROW(1, i10, i11, K_DPWSSD)                                                                       \
            K_RUN_ROW(2, i20, i21, K_DPWSSD)                                                                       \
            K_RUN_ROW(3, i30, i31, K_DPWSSD)                                                                       \
            /* keeps each run's add in its chain: else gcc reassociates the 8 runs' sums into a tree whose      \
             * partial sums spill to the stack */                                                                  \
            __asm__("" : "+x"(i00), "+x"(i01), "+x"(i10), "+x"(i11), "+x"(i20), "+x"(i21), "+x"(i30), "+x"(i31));  \
        }                                                                                                          \
        K_MAIN_ROW(0, i00, i01)                                                                                    \
        K_MAIN_ROW(1, i10, i11)                                                                                    \
        K_MAIN_ROW(2, i20, i21)                                                                                    \
        K_MAIN_ROW(3, i30, i31)                                                                                    \
    }                                                                                                              \
    for (int r = 0; r < R; r++) {                                                                                  \
        for (int h = 0; h < 2; h++) {                                                                              \
            if (t0 + h >= T) continue;                                                                             \
            const float main = bd_hsum8(_mm256_load_ps(fm[r][h]));                                                 \
            const float *mh = mm[r] + 4 * h;                                                                       \
            y[(t0 + h) * ldy + r] = sc16 ? main : kind == 5 ? main + mh[0] : main + ((mh[0] + mh[2]) + (mh[1] + mh[3])); \
        }                                                                                                          \
    }

#define KA_DPWSSD(acc, p, sc) _mm256_add_epi32(acc, _mm256_madd_epi16(p, sc))
#define KV_DPWSSD(acc, p, sc) _mm256_dpwssd_avx_epi32(acc, p, sc)
A2_TARGET A2_INLINE void ka_tile(const uint8_t *wp, size_t wps, size_t wrec, int64_t NB, const uint8_t *ap, float *y,
                                 int64_t ldy, int64_t t0, int64_t T, const int kind, const int R) {
    K_TILE_BODY(KA_DPWSSD)
}
VN_TARGET A2_INLINE void kv_tile(const uint8_t *wp, size_t wps, size_t wrec, int64_t NB, const uint8_t *ap, float *y,
                                 int64_t ldy, int64_t t0, int64_t T, const int kind, const int R) {
    K_TILE_BODY(KV_DPWSSD)
}

#define K_TILE_FN(PFX, TGT, KIND, R)                                                                               \
    TGT static void PFX##KIND##_tile_##R(const uint8_t *wp, size_t wps, size_t wrec, int64_t NB, const uint8_t *ap, \
                                         size_t aps, float *y, int64_t ldy, int64_t t0, int64_t T) {               \
        (void)aps;                                                                                                 \
        PFX##_tile(wp, wps, wrec, NB, ap, y, ldy, t0, T, KIND, R);                                                 \
    }
#define K_TILES(PFX, TGT, KIND)                                                                                    \
    K_TILE_FN(PFX, TGT, KIND, 1) K_TILE_FN(PFX, TGT, KIND, 2) K_TILE_FN(PFX, TGT, KIND, 3)                         \
    K_TILE_FN(PFX, TGT, KIND, 4)                                                                                   \
    static const bd_gemmk_tile_fn PFX##KIND##_tiles[4] = {PFX##KIND##_tile_1, PFX##KIND##_tile_2,                  \
                                                          PFX##KIND##_tile_3, PFX##KIND##_tile_4};
K_TILES(ka, A2_TARGET, 4)
K_TILES(ka, A2_TARGET, 5)
K_TILES(ka, A2_TARGET, 6)
K_TILES(kv, VN_TARGET, 4)
K_TILES(kv, VN_TARGET, 5)
K_TILES(kv, VN_TARGET, 6)
/* Q2_K, Q3_K, IQ4_XS (gemm_k.c's kx kinds: 16 int16 scales per run as Q6_K, no seed; Q2_K's mins chain) */
K_TILES(ka, A2_TARGET, 2)
K_TILES(ka, A2_TARGET, 3)
K_TILES(ka, A2_TARGET, 7)
K_TILES(kv, VN_TARGET, 2)
K_TILES(kv, VN_TARGET, 3)
K_TILES(kv, VN_TARGET, 7)

/* ---- Q8_K activations ----
 * The same bytes as the reference quantizer (bd_quantize_row_q8_K_ref, which dot.h uses) on every input, NaN and
 * infinities included, 8 lanes at a time, as gemm_k.c's AVX-512 one: the scale from the first element of
 * largest magnitude (vmaxps returns its second operand for a NaN, so NaNs never win), levels rounded by the
 * same 1.5 * 2^23 addition and bit extraction, the cap at 127, the int8 truncation (bytes picked, not
 * saturated), then the sums of 16. The scalar loop it replaces cost ~10% of an AVX2 prompt. */
A2_TARGET static void a2_quantize_q8_K(const float *x, void *dst, int64_t k) {
    bd_block_q8_K *y = dst;
    const __m256 magic = _mm256_set1_ps(12582912.f), sign = _mm256_set1_ps(-0.0f);
    const __m256i mant = _mm256_set1_epi32(0x007fffff), half = _mm256_set1_epi32(0x00400000);
    const __m256i cap = _mm256_set1_epi32(127), flip = _mm256_set1_epi8((char)0x80);
    /* byte 0 of each int32 to the low 4 bytes of its 128-bit lane */
    const __m256i low_bytes = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8,
                                               12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t i = 0; i < k / BD_QK_K; i++, x += BD_QK_K) {
        __m256 am = _mm256_setzero_ps();
        for (int j = 0; j < BD_QK_K; j += 8) am = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)), am);
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(am), _mm256_extractf128_ps(am, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        if (!(amax > 0)) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float max = 0;
        for (int j = 0; j < BD_QK_K; j += 8) {
            const __m256 eq = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)), _mm256_set1_ps(amax), _CMP_EQ_OQ);
            const int m = _mm256_movemask_ps(eq);
            if (m) {
                max = x[j + __builtin_ctz((unsigned)m)];
                break;
            }
        }
        const float iscale = -127.f / max;
        const __m256 is = _mm256_set1_ps(iscale);
        for (int j = 0; j < BD_QK_K; j += 32) {
            __m256i b[4];
            for (int g = 0; g < 4; g++) {
                /* the product and the sum stay two roundings (-ffp-contract=off: no FMA) */
                const __m256 v = _mm256_add_ps(_mm256_mul_ps(is, _mm256_loadu_ps(x + j + 8 * g)), magic);
                const __m256i q = _mm256_min_epi32(_mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(v), mant), half), cap);
                b[g] = _mm256_shuffle_epi8(q, low_bytes);
            }
            const __m256i u = _mm256_unpacklo_epi32(b[0], b[1]), w = _mm256_unpacklo_epi32(b[2], b[3]);
            const __m256i q8 = _mm256_permutevar8x32_epi32(_mm256_unpacklo_epi64(u, w), order);
            _mm256_storeu_si256((__m256i *)(y[i].qs + j), q8);
            /* sums of 16: offset to unsigned, byte sums of 8 per 64-bit lane, pairs added, offset removed */
            int64_t s8[4];
            _mm256_storeu_si256((__m256i *)s8, _mm256_sad_epu8(_mm256_xor_si256(q8, flip), _mm256_setzero_si256()));
            y[i].bsums[j / 16] = (int16_t)(s8[0] + s8[1] - 16 * 128);
            y[i].bsums[j / 16 + 1] = (int16_t)(s8[2] + s8[3] - 16 * 128);
        }
        y[i].d = 1 / iscale;
    }
}

/* ---- selection ---- */

static int avx_vnni_forced = -1; /* bd_gemmq_avx_vnni_override; -1: CPUID and BRAID_AVX_VNNI decide */

/* Whether the AVX2 kernels use AVX-VNNI: the CPU has it, unless BRAID_AVX_VNNI=0 (to measure what a CPU without
 * it, Zen 3 or Haswell to Tiger Lake, would run) or a test forced it off. */
static int use_vnni(void) {
    if (avx_vnni_forced >= 0) return avx_vnni_forced && bd_cpu_get()->avx_vnni;
    static int env = -1;
    if (env < 0) {
        const char *e = getenv("BRAID_AVX_VNNI");
        env = !(e && !strcmp(e, "0"));
    }
    return env && bd_cpu_get()->avx_vnni;
}

int bd_gemmq_avx_vnni_override(int on) {
    avx_vnni_forced = on < 0 ? -1 : on != 0;
    return use_vnni();
}

int bd_gemmq_uses_avx_vnni(void) { return use_vnni(); }

/* The two layouts differ, so packing and rows follow the same choice (a test may switch AVX-VNNI between
 * calls, never within one). The packed size is the larger of the two. */
static void q8a_pack(const uint8_t *xq, size_t xrow, int64_t K, int64_t T, int64_t g, void *packed) {
    if (use_vnni()) bd_gemmq8_pack(xq, xrow, K, T, g, packed);
    else q8w_pack(xq, xrow, K, T, g, packed);
}

static void q8a_rows(uint32_t wtype, const uint8_t *W, size_t wrow, int64_t K, const void *packed, int64_t T,
                     int64_t r0, int64_t r1, float *y, int64_t ldy) {
    if (use_vnni()) bd_gemmq8_rows_with(q8v_tiles, A2_TP, 0, wtype, W, wrow, K, packed, T, r0, r1, y, ldy);
    else bd_gemmq8_rows_with(q8w_tiles, A2_TP, 1, wtype, W, wrow, K, packed, T, r0, r1, y, ldy);
}

static void ka_rows(uint32_t wtype, const uint8_t *W, size_t wrow, int64_t K, const void *packed, int64_t T,
                    int64_t r0, int64_t r1, float *y, int64_t ldy) {
    const int v = use_vnni();
    const bd_gemmk_tile_fn *tiles = wtype == BD_TYPE_Q6_K     ? (v ? kv6_tiles : ka6_tiles)
                                    : wtype == BD_TYPE_Q5_K   ? (v ? kv5_tiles : ka5_tiles)
                                    : wtype == BD_TYPE_Q2_K   ? (v ? kv2_tiles : ka2_tiles)
                                    : wtype == BD_TYPE_Q3_K   ? (v ? kv3_tiles : ka3_tiles)
                                    : wtype == BD_TYPE_IQ4_XS ? (v ? kv7_tiles : ka7_tiles)
                                                              : (v ? kv4_tiles : ka4_tiles);
    bd_gemmk_rows_with(tiles, A2_TP, wtype, W, wrow, K, packed, T, r0, r1, y, ldy);
}

static const bd_gemmq_ops q8a_ops = {q8w_pack_size, q8a_pack, q8a_rows, BD_GEMMQ8W_MAX_K, NULL};
static const bd_gemmq_ops k45a_ops = {bd_gemmk_pack_size, bd_gemmk45_pack, ka_rows, BD_GEMMK45_MAX_K,
                                      a2_quantize_q8_K};
static const bd_gemmq_ops k6a_ops = {bd_gemmk_pack_size, bd_gemmk6_pack, ka_rows, BD_GEMMK6_MAX_K, a2_quantize_q8_K};

void bd_gemm_fill_avx2(bd_dot_traits t[BD_TYPE_COUNT]) {
    t[BD_TYPE_Q8_0].gemm = &q8a_ops;
    t[BD_TYPE_Q4_0].gemm = &q8a_ops;
    t[BD_TYPE_Q5_0].gemm = &q8a_ops; /* q8_prep decodes these two to signed levels: Q4_0's path */
    t[BD_TYPE_IQ4_NL].gemm = &q8a_ops; /* (tinyBLAS's order, which llama.cpp's prompts have: gemm_q8.c) */
    t[BD_TYPE_Q4_K].gemm = &k45a_ops;
    t[BD_TYPE_Q5_K].gemm = &k45a_ops;
    t[BD_TYPE_Q6_K].gemm = &k6a_ops;
    t[BD_TYPE_Q2_K].gemm = &k6a_ops; /* Q6_K's packing and record size (gemm_k.c's kx kinds) */
    t[BD_TYPE_Q3_K].gemm = &k6a_ops;
    t[BD_TYPE_IQ4_XS].gemm = &k6a_ops;
}

#else

void bd_gemm_fill_avx2(bd_dot_traits t[BD_TYPE_COUNT]) { (void)t; }
int bd_gemmq_avx_vnni_override(int on) {
    (void)on;
    return 0;
}
int bd_gemmq_uses_avx_vnni(void) { return 0; }

#endif
