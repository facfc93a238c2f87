/* gemv_avx2.c — gemv kernels (gemv.h) for CPUs with AVX2, FMA and F16C but no AVX-512 (dot.h's avx2 level).
 *
 * Decode streams every weight once per token, so what matters is keeping enough of the stream in flight: the
 * hardware prefetcher alone leaves a core well short of the memory bandwidth (on the AVX-512 kernels software
 * prefetch gave nearly all of their gain). Two kinds of kernel:
 *   - Q8_0, Q4_0: 4 rows advance together block by block (each its own 8-lane chain in vec_dot's order:
 *     |w| x (y with w's sign) by vpmaddubsw, pairs to int32, one fused multiply-add of the block's scale
 *     product), the activation block loaded once for the 4, the next 4 rows prefetched as they go.
 *   - every other type: the dot product the dispatcher chose (dot.h), called row by row, with the rows a
 *     group ahead prefetched first (not on AMD CPUs, where that measured slower: sw_prefetch). Its bits are
 *     vec_dot's by construction, whatever order dot_avx2.c's float dots follow.
 * Prefetches past the end of the matrix are harmless (they never fault). */
#include <immintrin.h>
#include <string.h>

#include "tensor/cpu.h"
#include "tensor/dot.h"
#include "tensor/dot_impl.h"
#include "tensor/lanes_x86.h"
#include "tensor/quant.h"
#include "tensor/types.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define INLINE __attribute__((always_inline)) inline

/* Rows further than this many bytes ahead are not prefetched yet: more than the memory latency's worth of
 * reading, and little enough not to evict what is being computed. Measured on one thread streaming 128 MiB
 * (K = 1024, forced AVX2 on an AVX-512 Xeon, best of 4, several rounds): the K-quants ran 10-25% faster
 * 2 KiB ahead (3-4 rows) than 8 KiB ahead, F16 (2 KiB rows) was best at 8 KiB. */
enum { PF_AHEAD = 8192, PF_AHEAD_K = 2048 };

/* Prefetches [p, p + len) into L2. */
static inline void pf_bytes(const uint8_t *p, size_t len) {
    for (size_t o = 0; o < len; o += 64) _mm_prefetch((const char *)(p + o), _MM_HINT_T1);
}

/* The rows ahead to prefetch: at least one, as many as fit `ahead` bytes. */
static int64_t pf_rows(size_t wrow, size_t ahead) { return wrow >= ahead ? 1 : (int64_t)(ahead / wrow); }

/* ---- any type: vec_dot per row, prefetching ahead where that helps ---- */

/* Whether to prefetch ahead of the row-by-row dots. Measured with both threads streaming, forced AVX2, qwen35
 * 0.5b decode (bench_llama_vs_braid -t 2): on an AMD Zen 5 EPYC the hardware prefetcher alone did better
 * (F16 tg 22-24 -> 26-30 tok/s, Q4_K 73 -> 88, Q6_K 62 -> 65; bench_kernels' F16 matvec 28-35 -> 42-48 GB/s):
 * there the extra requests only compete with its own. On the Intel Xeon of the distances above, prefetching
 * is what brought the kernels near the bandwidth. So AMD CPUs leave it to the hardware. What hurts there is
 * the burst of a whole row's prefetches before each dot: the 4-row kernels (here and dot_avx2_mix.c), which
 * spread theirs over the blocks, lost 30-55% of their decode speed without them on the same CPU. */
static int sw_prefetch(void) { return !bd_cpu_get()->amd; }

static void gemv_rows_vec_dot(uint32_t type, int64_t n, float *s, const void *w, size_t wrow, int64_t nrows,
                              const void *xq, size_t pf_ahead) {
    const bd_vec_dot_fn dot = bd_dot_traits_get(type)->vec_dot;
    const uint8_t *W = w;
    if (!sw_prefetch()) {
        for (int64_t r = 0; r < nrows; r++) dot(n, &s[r], W + (size_t)r * wrow, xq);
        return;
    }
    const int64_t ahead = pf_rows(wrow, pf_ahead);
    pf_bytes(W, (size_t)(ahead < nrows ? ahead : nrows) * wrow);
    for (int64_t r = 0; r < nrows; r++) {
        if (r + ahead < nrows) pf_bytes(W + (size_t)(r + ahead) * wrow, wrow);
        dot(n, &s[r], W + (size_t)r * wrow, xq);
    }
}

#define GEMV_VIA_DOT(name, type, ahead)                                                                         \
    static void name(int64_t n, float *s, const void *w, size_t wrow, int64_t nrows, const void *xq) {          \
        gemv_rows_vec_dot(type, n, s, w, wrow, nrows, xq, ahead);                                               \
    }
GEMV_VIA_DOT(gemv_f16, BD_TYPE_F16, PF_AHEAD)
GEMV_VIA_DOT(gemv_bf16, BD_TYPE_BF16, PF_AHEAD)
GEMV_VIA_DOT(gemv_q4_K, BD_TYPE_Q4_K, PF_AHEAD_K)
GEMV_VIA_DOT(gemv_q5_K, BD_TYPE_Q5_K, PF_AHEAD_K)
GEMV_VIA_DOT(gemv_q6_K, BD_TYPE_Q6_K, PF_AHEAD_K)

/* ---- Q8_0 / Q4_0: 4 rows at once ---- */

/* The 8 int32 lane sums of one block: Q8_0 levels x, or Q4_0 nibbles (levels q - 8), against y. */
AVX2 static INLINE __m256i blk_q8_0(const uint8_t *qs, __m256i y) {
    const __m256i x = bd_load32(qs);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x)),
                             _mm256_set1_epi16(1));
}
AVX2 static INLINE __m256i blk_q4_0(const uint8_t *qs, __m256i y) {
    const __m128i b = _mm_loadu_si128((const __m128i *)qs);
    const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0F));
    const __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(q, y), _mm256_maddubs_epi16(_mm256_set1_epi8(8), y));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

/* R rows (rp) against the Q8_0 activations y, nb blocks of bsz bytes (the weight block), q4: Q4_0 weights.
 * Per row vec_dot's chain; the block scale products of 8 blocks formed at once, as vec_dot forms them. */
AVX2 static INLINE void b32_rows(int64_t nb, size_t bsz, const uint8_t *const *rp, const bd_block_q8_0 *y,
                                 float *out, const uint8_t *pf, size_t pf_len, const int R, const int q4) {
    __m256 acc[4];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    int64_t b = 0;
    const int64_t groups = (nb + 7) / 8;
    for (int64_t g = 0; b + 8 <= nb; b += 8, g++) {
        /* this step's share of the next rows' bytes */
        if (pf)
            for (size_t o = (pf_len * (size_t)g / (size_t)groups) & ~(size_t)63;
                 o < pf_len * (size_t)(g + 1) / (size_t)groups; o += 64)
                _mm_prefetch((const char *)(pf + o), _MM_HINT_T1);
        const __m256 yd = bd_scales8((const uint8_t *)&y[b].d, sizeof *y);
        float d[4][8];
        for (int r = 0; r < R; r++) _mm256_storeu_ps(d[r], _mm256_mul_ps(bd_scales8(rp[r] + (size_t)b * bsz, bsz), yd));
        for (int k = 0; k < 8; k++) {
            const __m256i yv = bd_load32(y[b + k].qs);
            for (int r = 0; r < R; r++) {
                const uint8_t *qs = rp[r] + (size_t)(b + k) * bsz + 2;
                const __m256i p = q4 ? blk_q4_0(qs, yv) : blk_q8_0(qs, yv);
                acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(&d[r][k]), _mm256_cvtepi32_ps(p), acc[r]);
            }
        }
    }
    for (; b < nb; b++) {
        const __m256i yv = bd_load32(y[b].qs);
        const float yd = bd_h2f(y[b].d);
        for (int r = 0; r < R; r++) {
            const uint8_t *blk = rp[r] + (size_t)b * bsz;
            uint16_t h;
            memcpy(&h, blk, 2);
            const __m256i p = q4 ? blk_q4_0(blk + 2, yv) : blk_q8_0(blk + 2, yv);
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(bd_h2f(h) * yd), _mm256_cvtepi32_ps(p), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) out[r] = bd_hsum8(acc[r]);
}

#define GEMV_B32(name, BLOCK, Q4)                                                                                 \
    AVX2 static void name(int64_t n, float *s, const void *w, size_t wrow, int64_t nrows, const void *xq) {      \
        const int64_t nb = n / BD_QK8_0;                                                                          \
        const uint8_t *W = w;                                                                                     \
        int64_t r = 0;                                                                                            \
        pf_bytes(W, (size_t)(nrows < 4 ? nrows : 4) * wrow);                                                      \
        for (; r + 4 <= nrows; r += 4) {                                                                          \
            const uint8_t *rp[4] = {W + (size_t)r * wrow, W + (size_t)(r + 1) * wrow, W + (size_t)(r + 2) * wrow, \
                                    W + (size_t)(r + 3) * wrow};                                                  \
            b32_rows(nb, sizeof(BLOCK), rp, xq, s + r, W + (size_t)(r + 4) * wrow, 4 * wrow, 4, Q4);              \
        }                                                                                                         \
        for (; r < nrows; r++) {                                                                                  \
            const uint8_t *rp[1] = {W + (size_t)r * wrow};                                                        \
            b32_rows(nb, sizeof(BLOCK), rp, xq, s + r, NULL, 0, 1, Q4);                                           \
        }                                                                                                         \
    }
GEMV_B32(gemv_q8_0, bd_block_q8_0, 0)
GEMV_B32(gemv_q4_0, bd_block_q4_0, 1)

void bd_gemv_fill_avx2(bd_dot_traits t[BD_TYPE_COUNT]) {
    t[BD_TYPE_F16].gemv = gemv_f16;
    t[BD_TYPE_BF16].gemv = gemv_bf16;
    t[BD_TYPE_Q8_0].gemv = gemv_q8_0;
    t[BD_TYPE_Q4_0].gemv = gemv_q4_0;
    t[BD_TYPE_Q4_K].gemv = gemv_q4_K;
    t[BD_TYPE_Q5_K].gemv = gemv_q5_K;
    t[BD_TYPE_Q6_K].gemv = gemv_q6_K;
}
