/* matmul.c — y = W·x for every weight type (see matmul.h).
 *
 * The paths:
 * - F32 weights: register-blocked kernels. A tile of R weight rows × C tokens keeps R·C vector accumulators in
 *   registers, so each weight vector loaded is used C times and each activation vector R times (AVX-512:
 *   4×6 of 16 lanes, AVX2: 4×3 of 8 lanes, NEON: 4×4 of 4 lanes). Each output is one accumulator over k in
 *   steps of the vector width, then hsum's fixed reduction, identical in every tile shape: llamafile's
 *   tinyBLAS order in the ggml build paired with the level (16 lanes for the AVX-512 builds, 8 for the AVX2
 *   builds, 4 for the arm64 ones), and a result
 *   that does not depend on the tiling or the thread count. Where ggml does not tile (one token, N not a
 *   multiple of 4, K not of the width: mm_f32_tiles) each output is the F32 vec_dot, as in ggml.
 * - Other types, few tokens (decode): each thread converts the activations to vec_dot_type itself, then runs
 *   the type's gemv kernel (gemv.h: several rows at once, prefetching, each output vec_dot's bits) over one
 *   contiguous share of the weight bytes; bd_matmul_multi does several products of one input in one dispatch.
 * - Quantized types, many tokens (prompt): the integer GEMMs of gemm_q.h (AVX-512 VNNI), each output
 *   bit-identical to the vec_dot; where they are not available, the vec_dot path.
 * - F16 and BF16, many tokens: the converted activations are widened back to float, weight tiles are
 *   dequantized per thread, and the F32 kernels do the arithmetic (see mm_deq_task).
 * Threads own disjoint, contiguous row ranges (bd_split_aligned), so outputs never race. */
#include "tensor/matmul.h"

#include <assert.h>
#include <stdatomic.h>
#include <string.h>

#include "base/alloc.h"

#include "tensor/dot.h"
#include "tensor/gemm_q.h"
#include "tensor/gemv.h"
#include "tensor/lanes_x86.h"
#include "tensor/quant.h"
#include "tensor/simd.h"
#include "tensor/types.h"

#if BD_HAVE_X86
#include <immintrin.h>
#endif
#if BD_HAVE_NEON
#include <arm_neon.h>
#endif

enum {
    MM_ROW_BLOCK = 128,  /* weight rows kept hot in L2 while the tokens pass (F32) */
};

/* ---- F32 kernels ------------------------------------------------------------------------------------------ */

typedef struct mm_f32 {
    const float *W; /* [N][K] */
    const float *x; /* [T][ldx] */
    float *y;       /* [T][ldy] */
    int64_t N, K, T, ldx, ldy;
    int vec; /* 1: each output is the F32 vec_dot (ggml's shapes without tinyBLAS, see mm_f32_tiles) */
} mm_f32;

/* Portable: one float accumulator per output, k in order. */
static void mm_f32_rows_scalar(const mm_f32 *a, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
        const float *w = a->W + r * a->K;
        for (int64_t t = 0; t < a->T; t++) {
            const float *x = a->x + t * a->ldx;
            float acc = 0.0f;
            for (int64_t k = 0; k < a->K; k++) acc += w[k] * x[k];
            a->y[t * a->ldy + r] = acc;
        }
    }
}

#define MM_INLINE static inline __attribute__((always_inline)) /* the tile kernels' shapes */

#if BD_HAVE_X86

/* Horizontal sums with one fixed tree for every lane set: s1[j] = v[j] + v[j+8], s2[i] = s1[i] + s1[i+4],
 * s3[i] = s2[i] + s2[i+2], sum = s3[0] + s3[1]. hsum512 does it for one vector, hsum512x16 for 16 at once
 * (transposing as it adds, about 3 instructions per sum instead of 8); both give the same bits, so a kernel
 * shape may use either without changing results. */
BD_TARGET_AVX512 static inline float hsum512(__m512 v) {
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b)); /* c[0] = b[0] + b[2], c[1] = b[1] + b[3] */
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}

BD_TARGET_AVX512 static inline void hsum512x16(const __m512 *v, float *out) {
    __m512 t[8], u[4], w[2];
    for (int p = 0; p < 8; p++)
        t[p] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0x44),
                             _mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0xEE));
    for (int p = 0; p < 4; p++)
        u[p] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * p], t[2 * p + 1], 0x88),
                             _mm512_shuffle_f32x4(t[2 * p], t[2 * p + 1], 0xDD));
    for (int p = 0; p < 2; p++)
        w[p] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * p], u[2 * p + 1], 0x44), _mm512_shuffle_ps(u[2 * p], u[2 * p + 1], 0xEE));
    __m512 x = _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], 0x88), _mm512_shuffle_ps(w[0], w[1], 0xDD));
    /* lane 4L+e holds the sum of vector L+4e */
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm512_storeu_ps(out, _mm512_permutexvar_ps(idx, x));
}

BD_TARGET_AVX512 MM_INLINE void mk512(const float *W, int64_t ldw, int64_t K, const float *x, int64_t ldx, float *y,
                                      int64_t ldy, int add, const int R, const int C) {
    __m512 acc[4][6];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
        __m512 w[4];
        for (int r = 0; r < R; r++) w[r] = _mm512_loadu_ps(W + r * ldw + k);
        for (int c = 0; c < C; c++) {
            __m512 xv = _mm512_loadu_ps(x + c * ldx + k);
            for (int r = 0; r < R; r++) acc[r][c] = _mm512_fmadd_ps(w[r], xv, acc[r][c]);
        }
    }
    if (k < K) {
        __mmask16 m = (__mmask16)((1u << (K - k)) - 1);
        __m512 w[4];
        for (int r = 0; r < R; r++) w[r] = _mm512_maskz_loadu_ps(m, W + r * ldw + k);
        for (int c = 0; c < C; c++) {
            __m512 xv = _mm512_maskz_loadu_ps(m, x + c * ldx + k);
            for (int r = 0; r < R; r++) acc[r][c] = _mm512_fmadd_ps(w[r], xv, acc[r][c]);
        }
    }
    if (R * C >= 8) {
        /* column-major list of the accumulators, padded to a multiple of 16 */
        __m512 v[32];
        float sums[32];
        int n = 0;
        for (int c = 0; c < C; c++)
            for (int r = 0; r < R; r++) v[n++] = acc[r][c];
        for (int i = n; i < 32; i++) v[i] = _mm512_setzero_ps();
        hsum512x16(v, sums);
        if (n > 16) hsum512x16(v + 16, sums + 16);
        n = 0;
        for (int c = 0; c < C; c++)
            for (int r = 0; r < R; r++, n++) y[c * ldy + r] = add ? y[c * ldy + r] + sums[n] : sums[n];
    } else {
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++) y[c * ldy + r] = add ? y[c * ldy + r] + hsum512(acc[r][c]) : hsum512(acc[r][c]);
    }
}

BD_TARGET_AVX512 static void mk512_4x6(const float *W, int64_t ldw, int64_t K, const float *x, int64_t ldx, float *y,
                               int64_t ldy, int add) {
    mk512(W, ldw, K, x, ldx, y, ldy, add, 4, 6);
}
BD_TARGET_AVX512 static void mk512_1x6(const float *W, int64_t ldw, int64_t K, const float *x, int64_t ldx, float *y,
                               int64_t ldy, int add) {
    mk512(W, ldw, K, x, ldx, y, ldy, add, 1, 6);
}
BD_TARGET_AVX512 static void mk512_4x1(const float *W, int64_t ldw, int64_t K, const float *x, int64_t ldx, float *y,
                               int64_t ldy, int add) {
    mk512(W, ldw, K, x, ldx, y, ldy, add, 4, 1);
}
BD_TARGET_AVX512 static void mk512_1x1(const float *W, int64_t ldw, int64_t K, const float *x, int64_t ldx, float *y,
                               int64_t ldy, int add) {
    mk512(W, ldw, K, x, ldx, y, ldy, add, 1, 1);
}

BD_TARGET_AVX2 MM_INLINE void mk256(const float *W, int64_t ldw, int64_t K, const float *x, int64_t ldx, float *y,
                                    int64_t ldy, int add, const int R, const int C) {
    __m256 acc[4][3];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
        __m256 w[4];
        for (int r = 0; r < R; r++) w[r] = _mm256_loadu_ps(W + r * ldw + k);
        for (int c = 0; c < C; c++) {
            __m256 xv = _mm256_loadu_ps(x + c * ldx + k);
            for (int r = 0; r < R; r++) acc[r][c] = _mm256_fmadd_ps(w[r], xv, acc[r][c]);
        }
    }
    if (k < K) {
        static const int32_t ones[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
        __m256i m = _mm256_loadu_si256((const __m256i *)(ones + 8 - (K - k)));
        __m256 w[4];
        for (int r = 0; r < R; r++) w[r] = _mm256_maskload_ps(W + r * ldw + k, m);
        for (int c = 0; c < C; c++) {
            __m256 xv = _mm256_maskload_ps(x + c * ldx + k, m);
            for (int r = 0; r < R; r++) acc[r][c] = _mm256_fmadd_ps(w[r], xv, acc[r][c]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) y[c * ldy + r] = add ? y[c * ldy + r] + bd_hsum8(acc[r][c]) : bd_hsum8(acc[r][c]);
}

BD_TARGET_AVX2 static void mk256_4x3(const float *W, int64_t ldw, int64_t K, const float *x, int64_t ldx, float *y,
                               int64_t ldy, int add) {
    mk256(W, ldw, K, x, ldx, y, ldy, add, 4, 3);
}
BD_TARGET_AVX2 static void mk256_1x3(const float *W, int64_t ldw, int64_t K, const float *x, int64_t ldx, float *y,
                               int64_t ldy, int add) {
    mk256(W, ldw, K, x, ldx, y, ldy, add, 1, 3);
}
BD_TARGET_AVX2 static void mk256_4x1(const float *W, int64_t ldw, int64_t K, const float *x, int64_t ldx, float *y,
                               int64_t ldy, int add) {
    mk256(W, ldw, K, x, ldx, y, ldy, add, 4, 1);
}
BD_TARGET_AVX2 static void mk256_1x1(const float *W, int64_t ldw, int64_t K, const float *x, int64_t ldx, float *y,
                               int64_t ldy, int add) {
    mk256(W, ldw, K, x, ldx, y, ldy, add, 1, 1);
}
#endif

#if BD_HAVE_NEON
/* NEON, 4 lanes: ggml's arm64 builds run llamafile's tinyBLAS<4> for F32 prompts from 4 tokens (and for F16
 * ones, with the activations as they are, in the builds without FP16 arithmetic): per output one float32x4
 * chain of fused multiply-adds over K (K % 4 == 0, mm_f32_tiles), then vaddvq's (a0 + a1) + (a2 + a3). Their
 * tile is 4 rows x 6 tokens in the 32 vector registers; braid's is 4 x 4 (the order per output is the same). */
MM_INLINE void mk128(const float *W, int64_t ldw, int64_t K, const float *x, int64_t ldx, float *y, int64_t ldy,
                     int add, const int R, const int C) {
    float32x4_t acc[4][4]; /* (the full 4 x 4 tile is mk128_4x4) */
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = vdupq_n_f32(0);
    for (int64_t k = 0; k + 4 <= K; k += 4) {
        float32x4_t w[4];
        for (int r = 0; r < R; r++) w[r] = vld1q_f32(W + r * ldw + k);
        for (int c = 0; c < C; c++) {
            const float32x4_t xv = vld1q_f32(x + c * ldx + k);
            for (int r = 0; r < R; r++) acc[r][c] = vfmaq_f32(acc[r][c], w[r], xv);
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            const float v = vaddvq_f32(acc[r][c]);
            y[c * ldy + r] = add ? y[c * ldy + r] + v : v;
        }
}
/* The full tile with named accumulators: gcc kept mk128's array in memory, storing it back every step. */
static void mk128_4x4(const float *W, int64_t ldw, int64_t K, const float *x, int64_t ldx, float *y, int64_t ldy,
                      int add) {
    float32x4_t c00 = vdupq_n_f32(0), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00, c12 = c00, c13 = c00;
    float32x4_t c20 = c00, c21 = c00, c22 = c00, c23 = c00, c30 = c00, c31 = c00, c32 = c00, c33 = c00;
    for (int64_t k = 0; k + 4 <= K; k += 4) {
        const float32x4_t w0 = vld1q_f32(W + k), w1 = vld1q_f32(W + ldw + k), w2 = vld1q_f32(W + 2 * ldw + k),
                          w3 = vld1q_f32(W + 3 * ldw + k);
#define MK128_COL(C)                                                                                            \
    {                                                                                                           \
        const float32x4_t xv = vld1q_f32(x + (C) * ldx + k);                                                   \
        c0##C = vfmaq_f32(c0##C, w0, xv), c1##C = vfmaq_f32(c1##C, w1, xv);                                     \
        c2##C = vfmaq_f32(c2##C, w2, xv), c3##C = vfmaq_f32(c3##C, w3, xv);                                     \
    }
        MK128_COL(0) MK128_COL(1) MK128_COL(2) MK128_COL(3)
#undef MK128_COL
    }
    const float32x4_t c[4][4] = {
        {c00, c01, c02, c03}, {c10, c11, c12, c13}, {c20, c21, c22, c23}, {c30, c31, c32, c33}};
    for (int r = 0; r < 4; r++)
        for (int t = 0; t < 4; t++) {
            const float v = vaddvq_f32(c[r][t]);
            y[t * ldy + r] = add ? y[t * ldy + r] + v : v;
        }
}
static void mk128_1x4(const float *W, int64_t ldw, int64_t K, const float *x, int64_t ldx, float *y, int64_t ldy,
                      int add) {
    mk128(W, ldw, K, x, ldx, y, ldy, add, 1, 4);
}
static void mk128_4x1(const float *W, int64_t ldw, int64_t K, const float *x, int64_t ldx, float *y, int64_t ldy,
                      int add) {
    mk128(W, ldw, K, x, ldx, y, ldy, add, 4, 1);
}
static void mk128_1x1(const float *W, int64_t ldw, int64_t K, const float *x, int64_t ldx, float *y, int64_t ldy,
                      int add) {
    mk128(W, ldw, K, x, ldx, y, ldy, add, 1, 1);
}
#endif

typedef void (*mk_fn)(const float *W, int64_t ldw, int64_t K, const float *x, int64_t ldx, float *y, int64_t ldy,
                      int add);

#if BD_HAVE_X86 || BD_HAVE_NEON
/* Tiles rows [r0, r1) × all tokens with the four kernel shapes of one SIMD level (RxC, 1xC, Rx1, 1x1).
 * Each output is one vector accumulator over the whole of K and one reduction, as in ggml's tiled F32 kernel
 * (llamafile's tinyBLAS), which is what llama.cpp runs for F32 and F16 prompts: cutting K into chunks (to keep
 * the activation tile in L1) would add the partial sums in another order once K passes the chunk. */
static void mm_f32_rows_tiled(const mm_f32 *a, int64_t r0, int64_t r1, int C, mk_fn k_rc, mk_fn k_1c, mk_fn k_r1,
                              mk_fn k_11) {
    const int64_t K = a->K, T = a->T, ldx = a->ldx, ldy = a->ldy;
    for (int64_t rb = r0; rb < r1; rb += MM_ROW_BLOCK) {
        int64_t rbe = rb + MM_ROW_BLOCK < r1 ? rb + MM_ROW_BLOCK : r1;
        const float *W = a->W;
        int64_t t = 0;
        for (; t + C <= T; t += C) {
            const float *x = a->x + t * ldx;
            float *y = a->y + t * ldy;
            int64_t r = rb;
            for (; r + 4 <= rbe; r += 4) k_rc(W + r * K, K, K, x, ldx, y + r, ldy, 0);
            for (; r < rbe; r++) k_1c(W + r * K, K, K, x, ldx, y + r, ldy, 0);
        }
        for (; t < T; t++) {
            const float *x = a->x + t * ldx;
            float *y = a->y + t * ldy;
            int64_t r = rb;
            for (; r + 4 <= rbe; r += 4) k_r1(W + r * K, K, K, x, ldx, y + r, ldy, 0);
            for (; r < rbe; r++) k_11(W + r * K, K, K, x, ldx, y + r, ldy, 0);
        }
    }
}
#endif

/* Whether an F32 product (or F16's dequantized one) of this shape takes the tiles: where llama.cpp's CPU
 * backend runs llamafile's tinyBLAS, whose per-output order the tiles have (one chain of the vector width W
 * over the whole of K, then hsum): at least 2 tokens, N a multiple of 4, K of W (16 lanes in the AVX-512
 * builds, 8 in the AVX2 builds; the arm64 builds: 4 lanes, from 4 tokens; braid's level follows its paired
 * build). Elsewhere ggml takes vec_dot_f32 per output, and so does braid. The portable level always tiles
 * (its own order; it claims no pair). */
static int mm_f32_tiles(int64_t N, int64_t K, int64_t T) {
    const int lv = bd_simd();
    if (lv == BD_SIMD_SCALAR) return 1;
#if BD_HAVE_NEON
    return T >= 4 && N % 4 == 0 && K % 4 == 0; /* the NEON builds' tinyBLAS: 4 lanes, from 4 tokens */
#else
    const int64_t w = lv == BD_SIMD_AVX512 ? 16 : 8;
    return T >= 2 && N % 4 == 0 && K % w == 0;
#endif
}

/* Rows [r0, r1) of an F32 product with the best kernel of the SIMD level. */
static void mm_f32_rows(const mm_f32 *a, int64_t r0, int64_t r1) {
    if (r0 >= r1) return;
    if (a->vec) {
        const bd_vec_dot_fn dot = bd_dot_traits_get(BD_TYPE_F32)->vec_dot;
        for (int64_t t = 0; t < a->T; t++)
            for (int64_t r = r0; r < r1; r++) dot(a->K, a->y + t * a->ldy + r, a->W + r * a->K, a->x + t * a->ldx);
        return;
    }
#if BD_HAVE_X86
    switch (bd_simd()) {
    case BD_SIMD_AVX512: mm_f32_rows_tiled(a, r0, r1, 6, mk512_4x6, mk512_1x6, mk512_4x1, mk512_1x1); return;
    case BD_SIMD_AVX2: mm_f32_rows_tiled(a, r0, r1, 3, mk256_4x3, mk256_1x3, mk256_4x1, mk256_1x1); return;
    default: break;
    }
#elif BD_HAVE_NEON
    if (bd_simd() != BD_SIMD_SCALAR) {
        mm_f32_rows_tiled(a, r0, r1, 4, mk128_4x4, mk128_1x4, mk128_4x1, mk128_1x1);
        return;
    }
#endif
    mm_f32_rows_scalar(a, r0, r1);
}

static void mm_f32_task(void *arg, int ith, int nth) {
    const mm_f32 *a = arg;
    int64_t r0, r1;
    bd_split_aligned(a->N, 4, ith, nth, &r0, &r1);
    mm_f32_rows(a, r0, r1);
}

/* ---- other types, few tokens (decode): gemv kernels over long row runs -----------------------------------
 * One dispatch computes one or several products that share their input (bd_matmul_multi). Each thread
 * converts the few activation rows itself, into a buffer on its stack (no barrier between the conversion and
 * the products; the conversion of a decode row costs far less than a barrier), then takes one contiguous
 * share of all the weight bytes of all the products and runs the type's gemv kernel (gemv.h) over it: one
 * long run of rows per product, streamed with prefetching. Larger inputs are converted once into the caller's
 * scratch by all threads, then a barrier. Every output is the type's vec_dot, so the split does not matter. */

enum {
    MM_QROW_BLOCK = 16,        /* weight rows per block when several tokens pass over them (L1) */
    MM_GEMV_STACK = 65536,     /* bytes of converted activations a thread may keep on its stack */
    MM_GEMV_LOCAL_ELEMS = 16384, /* up to T*K elements, each thread converts for itself */
    MM_GEMV_ROW_ALIGN = 8,     /* shares start at multiples of this many rows (the kernels' row group) */
    /* shares per thread, claimed in turn: a thread that runs slower (a busy sibling hyperthread, another
     * tenant of the host) leaves its last shares to the others instead of making them wait */
    MM_GEMV_CHUNKS = 8,
    MM_MULTI_MAX = 8,          /* products per bd_matmul_multi dispatch */
};

typedef struct mm_gemv {
    bd_threadpool *tp;
    int n_ops;
    const bd_matmul_op *ops;
    bd_gemv_fn gemv[MM_MULTI_MAX];    /* NULL: loop over vec_dot */
    bd_vec_dot_fn vec_dot[MM_MULTI_MAX];
    size_t wrow[MM_MULTI_MAX];
    uint64_t cum[MM_MULTI_MAX + 1];   /* weight bytes of the products before op i */
    int slot[MM_MULTI_MAX];           /* which converted copy of x op i reads */
    int n_slots;
    const bd_dot_traits *slot_dt[MM_MULTI_MAX];
    /* the slot's conversion: gemm_q.h's faster quantizer where there is one (same bytes), else from_float */
    void (*slot_q[MM_MULTI_MAX])(const float *x, void *dst, int64_t k);
    size_t slot_row[MM_MULTI_MAX];    /* bytes of one converted row */
    size_t slot_off[MM_MULTI_MAX];    /* offset of the slot's T rows in the conversion buffer */
    size_t xq_bytes;
    const float *x;
    int64_t K, T, ldx;
    uint8_t *shared; /* NULL: each thread converts into its own stack buffer */
    int n_chunks;    /* shares of the weight bytes (1 without a pool), claimed by the threads in turn */
    _Atomic int next_chunk;
} mm_gemv;

/* Where share `t` of nth starts: the row of the product holding byte B*t/nth of all the weights,
 * rounded down to the row group. Monotone in t, so the shares are disjoint and cover everything. */
static void mm_gemv_bound(const mm_gemv *a, int t, int nth, int *op, int64_t *row) {
    if (t >= nth) {
        *op = a->n_ops, *row = 0;
        return;
    }
    const uint64_t b = a->cum[a->n_ops] * (uint64_t)t / (uint64_t)nth;
    int i = 0;
    while (i + 1 < a->n_ops && a->cum[i + 1] <= b) i++;
    int64_t r = (int64_t)((b - a->cum[i]) / a->wrow[i]);
    r -= r % MM_GEMV_ROW_ALIGN;
    if (r > a->ops[i].N) r = a->ops[i].N;
    *op = i, *row = r;
}

/* Rows [r0, r1) of op i for every token. */
static void mm_gemv_rows(const mm_gemv *a, int i, int64_t r0, int64_t r1, const uint8_t *xq) {
    const bd_matmul_op *o = &a->ops[i];
    const uint8_t *W = o->W;
    const size_t wrow = a->wrow[i], xrow = a->slot_row[a->slot[i]];
    const int64_t step = a->T == 1 ? r1 - r0 : MM_QROW_BLOCK;
    for (int64_t rb = r0; rb < r1; rb += step) {
        const int64_t rn = r1 - rb < step ? r1 - rb : step;
        for (int64_t t = 0; t < a->T; t++) {
            const uint8_t *xt = xq + (size_t)t * xrow;
            float *y = o->y + t * o->ldy + rb;
            if (a->gemv[i]) {
                a->gemv[i](a->K, y, W + (size_t)rb * wrow, wrow, rn, xt);
            } else {
                for (int64_t r = 0; r < rn; r++) a->vec_dot[i](a->K, &y[r], W + (size_t)(rb + r) * wrow, xt);
            }
        }
    }
}

static void mm_gemv_task(void *arg, int ith, int nth) {
    mm_gemv *a = arg;
    _Alignas(64) uint8_t local[MM_GEMV_STACK];
    const uint8_t *xq;
    if (a->shared) {
        /* (slot, token) pairs split over the threads, then everyone waits for all of them */
        int64_t p0, p1;
        bd_split((int64_t)a->n_slots * a->T, ith, nth, &p0, &p1);
        for (int64_t p = p0; p < p1; p++) {
            const int sl = (int)(p / a->T);
            const int64_t t = p % a->T;
            a->slot_q[sl](a->x + t * a->ldx, a->shared + a->slot_off[sl] + (size_t)t * a->slot_row[sl], a->K);
        }
        bd_threadpool_barrier(a->tp);
        xq = a->shared;
    } else {
        for (int sl = 0; sl < a->n_slots; sl++)
            for (int64_t t = 0; t < a->T; t++)
                a->slot_q[sl](a->x + t * a->ldx, local + a->slot_off[sl] + (size_t)t * a->slot_row[sl], a->K);
        xq = local;
    }
    /* the shares in turn (each row's bits do not depend on which thread computes it) */
    for (int c; (c = atomic_fetch_add_explicit(&a->next_chunk, 1, memory_order_relaxed)) < a->n_chunks;) {
        int i0, i1;
        int64_t r0, r1;
        mm_gemv_bound(a, c, a->n_chunks, &i0, &r0);
        mm_gemv_bound(a, c + 1, a->n_chunks, &i1, &r1);
        for (int i = i0; i <= i1 && i < a->n_ops; i++) {
            const int64_t lo = i == i0 ? r0 : 0, hi = i == i1 ? r1 : a->ops[i].N;
            if (lo < hi) mm_gemv_rows(a, i, lo, hi, xq + a->slot_off[a->slot[i]]);
        }
    }
}

/* Prepares and runs the decode path for ops (all non-F32, validated, T < MM_DEQ_MIN_T). Returns 0 (nothing
 * done) when the conversions cannot be placed: too many distinct vec_dot types for the scratch. */
static int mm_gemv_run(bd_threadpool *tp, const bd_matmul_op *ops, int n_ops, int64_t K, const float *x,
                       int64_t ldx, int64_t T, void *scratch, size_t scratch_size) {
    mm_gemv a;
    memset(&a, 0, sizeof a);
    a.tp = tp, a.n_ops = n_ops, a.ops = ops, a.x = x, a.K = K, a.T = T, a.ldx = ldx;
    for (int i = 0; i < n_ops; i++) {
        const bd_dot_traits *dt = bd_dot_traits_get(ops[i].wtype);
        a.gemv[i] = bd_gemv_get(ops[i].wtype);
        a.vec_dot[i] = dt->vec_dot;
        a.wrow[i] = bd_row_size(ops[i].wtype, K);
        a.cum[i + 1] = a.cum[i] + (uint64_t)a.wrow[i] * (uint64_t)ops[i].N;
        int sl = 0;
        while (sl < a.n_slots && a.slot_dt[sl]->vec_dot_type != dt->vec_dot_type) sl++;
        if (sl == a.n_slots) {
            const bd_gemmq_ops *gq = bd_gemmq_get(ops[i].wtype);
            a.slot_dt[sl] = dt;
            a.slot_q[sl] = gq && gq->quantize ? gq->quantize : dt->from_float;
            a.slot_row[sl] = bd_row_size(dt->vec_dot_type, K);
            a.slot_off[sl] = (a.xq_bytes + 63) & ~(size_t)63;
            a.xq_bytes = a.slot_off[sl] + a.slot_row[sl] * (size_t)T;
            a.n_slots++;
        }
        a.slot[i] = sl;
    }
    if (a.xq_bytes > MM_GEMV_STACK || T * K > MM_GEMV_LOCAL_ELEMS) {
        if (a.xq_bytes > scratch_size) return 0;
        a.shared = scratch;
    }
    a.n_chunks = bd_threadpool_size(tp) == 1 ? 1 : bd_threadpool_size(tp) * MM_GEMV_CHUNKS;
    atomic_init(&a.next_chunk, 0);
    bd_threadpool_run(tp, mm_gemv_task, &a);
    return 1;
}

/* ---- F16 / BF16, many tokens: dequantize tiles of W, then the F32 kernels -----------------------------------
 * For a prompt the vec_dot path does one short dot product per (row, token) pair and is far from the
 * arithmetic peak. Instead the activations are converted to vec_dot_type and back to float (so they carry
 * exactly the rounding ggml's dot product sees), tiles of weight rows are dequantized into a per-thread
 * buffer, and the register-blocked F32 kernels run over a block of tokens that stays in L2. The products are
 * the same numbers ggml multiplies; only the float summation order differs (a few ulp; llama.cpp's own F16
 * prefill differs from its decode too). Quantized types do not come here: see the integer GEMMs above. */

enum {
    MM_DEQ_MIN_T = 16,          /* from this many tokens on, dequantizing a tile pays for itself */
    MM_DEQ_TILE = 65536,        /* floats of dequantized weights per thread (256 KiB, on the stack) */
    MM_DEQ_XBLOCK = 262144,     /* floats of activations per token block (1 MiB, L2) */
};

#if BD_HAVE_X86
/* F16 -> F32 rows with the hardware converter (exact, like the portable table, but ~10x faster: for F16
 * weights the tile dequantization would otherwise cost ~10% of the product). */
BD_TARGET_AVX512 static void f16_to_f32_avx512(const void *src, float *dst, int64_t n) {
    const uint16_t *h = src;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + i))));
    for (; i < n; i++) dst[i] = bd_fp16_to_fp32(h[i]);
}
BD_TARGET_AVX2 static void f16_to_f32_avx2(const void *src, float *dst, int64_t n) {
    const uint16_t *h = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++) dst[i] = bd_fp16_to_fp32(h[i]);
}
#endif
#if BD_HAVE_NEON
static void f16_to_f32_neon(const void *src, float *dst, int64_t n) {
    const uint16_t *h = src;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h + i))));
    for (; i < n; i++) dst[i] = bd_fp16_to_fp32(h[i]);
}
#endif

typedef void (*to_float_fn)(const void *src, float *dst, int64_t n);

/* The fastest exact to_float for a type at the current SIMD level. */
static to_float_fn fast_to_float(const bd_type_traits *t, uint32_t type) {
#if BD_HAVE_X86
    if (type == BD_TYPE_F16) {
        if (bd_simd() == BD_SIMD_AVX512) return f16_to_f32_avx512;
        if (bd_simd() == BD_SIMD_AVX2) return f16_to_f32_avx2;
    }
#elif BD_HAVE_NEON
    if (type == BD_TYPE_F16 && bd_simd() != BD_SIMD_SCALAR) return f16_to_f32_neon;
#else
    (void)type;
#endif
    return t->to_float;
}

typedef struct mm_deq {
    bd_threadpool *tp;
    const bd_dot_traits *dt;
    to_float_fn w_to_float, x_to_float; /* of the weight type and of vec_dot_type */
    const uint8_t *W;
    size_t wrow;
    const float *x;
    uint8_t *xq; /* [T][xrow] */
    size_t xrow;
    float *xf; /* [T][K] activations as the dot product sees them */
    int raw;   /* xf: the activations as they are, not through vec_dot_type (deq_raw) */
    float *y;
    int64_t N, K, T, ldx, ldy;
} mm_deq;

static void mm_deq_task(void *arg, int ith, int nth) {
    const mm_deq *a = arg;
    const int64_t K = a->K;
    int64_t t0, t1;
    bd_split(a->T, ith, nth, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        uint8_t *xq = a->xq + (size_t)t * a->xrow;
        if (a->raw) {
            memcpy(a->xf + t * K, a->x + t * a->ldx, (size_t)K * sizeof(float));
            continue;
        }
        a->dt->from_float(a->x + t * a->ldx, xq, K);
        a->x_to_float(xq, a->xf + t * K, K);
    }
    bd_threadpool_barrier(a->tp);

    float tile[MM_DEQ_TILE];
    int64_t rb_rows = (MM_DEQ_TILE / K) & ~(int64_t)3;
    if (rb_rows > 64) rb_rows = 64;
    int64_t tb = (MM_DEQ_XBLOCK / K) / 6 * 6;
    if (tb < 6) tb = 6;
    int64_t r0, r1;
    bd_split_aligned(a->N, 4, ith, nth, &r0, &r1);
    for (int64_t tt = 0; tt < a->T; tt += tb) {
        const int64_t nt = a->T - tt < tb ? a->T - tt : tb;
        for (int64_t rb = r0; rb < r1; rb += rb_rows) {
            const int64_t nr = r1 - rb < rb_rows ? r1 - rb : rb_rows;
            for (int64_t r = 0; r < nr; r++) a->w_to_float(a->W + (size_t)(rb + r) * a->wrow, tile + r * K, K);
            mm_f32 f = {tile, a->xf + tt * K, a->y + tt * a->ldy + rb, nr, K, nt, K, a->ldy, 0};
            mm_f32_rows(&f, 0, nr);
        }
    }
}

/* ---- quantized types, many tokens: the integer GEMMs (gemm_q.h) ---------------------------------------------
 * Threads convert and pack disjoint groups of tokens, meet at a barrier, then compute disjoint row ranges. */

typedef struct mm_gq {
    bd_threadpool *tp;
    const bd_dot_traits *dt;
    const bd_gemmq_ops *ops;
    uint32_t wtype;
    const uint8_t *W;
    size_t wrow;
    const float *x;
    uint8_t *xq; /* [T][xrow] */
    size_t xrow;
    void *packed;
    float *y;
    int64_t N, K, T, ldx, ldy;
} mm_gq;

static void mm_gq_task(void *arg, int ith, int nth) {
    const mm_gq *a = arg;
    int64_t g0, g1;
    bd_split((a->T + BD_GEMMQ_GROUP - 1) / BD_GEMMQ_GROUP, ith, nth, &g0, &g1);
    void (*quantize)(const float *, void *, int64_t) = a->ops->quantize ? a->ops->quantize : a->dt->from_float;
    for (int64_t g = g0; g < g1; g++) {
        for (int64_t t = g * BD_GEMMQ_GROUP; t < (g + 1) * BD_GEMMQ_GROUP && t < a->T; t++)
            quantize(a->x + t * a->ldx, a->xq + (size_t)t * a->xrow, a->K);
        a->ops->pack(a->xq, a->xrow, a->K, a->T, g, a->packed);
    }
    bd_threadpool_barrier(a->tp);
    int64_t r0, r1;
    bd_split_aligned(a->N, 4, ith, nth, &r0, &r1);
    if (r0 < r1) a->ops->rows(a->wtype, a->W, a->wrow, a->K, a->packed, a->T, r0, r1, a->y, a->ldy);
}

/* The integer GEMM for this call, or NULL. */
static const bd_gemmq_ops *use_gemmq(uint32_t wtype, int64_t K, int64_t T) {
    if (T < MM_DEQ_MIN_T) return NULL;
    const bd_gemmq_ops *o = bd_gemmq_get(wtype);
    return o && K <= o->max_k ? o : NULL;
}

/* Whether bd_matmul may take the dequantize path for this K and T (the scratch is sized for it): float weight
 * types only (for quantized ones it would break the equality with vec_dot). */
static int deq_fits(uint32_t wtype, int64_t K, int64_t T) {
    return (wtype == BRAID_TYPE_F16 || wtype == BRAID_TYPE_BF16) && T >= MM_DEQ_MIN_T && K * 4 <= MM_DEQ_TILE;
}
/* Whether the tiles take the activations as they are: ggml's arm64 builds without FP16 arithmetic (armv8.0_1,
 * paired with braid's neon level) run F16 prompts through tinyBLAS<4> on the F32 activations (its call before
 * the conversion to F16 succeeds there); every other build rounds them to F16 first. */
static int deq_raw(uint32_t wtype) {
#if BD_HAVE_NEON
    return wtype == BD_TYPE_F16 && bd_simd() == BD_SIMD_NEON;
#else
    (void)wtype;
    return 0;
#endif
}

/* Whether it does, for this shape: where llama.cpp tiles too (mm_f32_tiles). */
static int use_deq(uint32_t wtype, int64_t N, int64_t K, int64_t T) {
    return deq_fits(wtype, K, T) && mm_f32_tiles(N, K, T);
}

/* ---- entry points ------------------------------------------------------------------------------------------ */

size_t bd_matmul_scratch_size(uint32_t wtype, int64_t K, int64_t T) {
    if (wtype == BRAID_TYPE_F32 || K <= 0 || T <= 0) return 0;
    const bd_dot_traits *dt = bd_dot_traits_get(wtype);
    if (!dt) return 0;
    size_t row = bd_row_size(dt->vec_dot_type, K), total, xf;
    if (!bd_mul_size(row, (size_t)T, &total)) return 0;
    const bd_gemmq_ops *gq = use_gemmq(wtype, K, T);
    if (gq) {
        total = (total + 63) & ~(size_t)63;
        if (!bd_add_size(total, gq->pack_size(K, T), &total)) return 0;
    } else if (deq_fits(wtype, K, T)) {
        total = (total + 63) & ~(size_t)63;
        if (!bd_mul_size((size_t)T * sizeof(float), (size_t)K, &xf) || !bd_add_size(total, xf, &total)) return 0;
    }
    return total;
}

braid_status bd_matmul(bd_threadpool *tp, uint32_t wtype, const void *W, int64_t N, int64_t K, const float *x,
                       int64_t ldx, int64_t T, float *y, int64_t ldy, void *scratch, size_t scratch_size) {
    if (N <= 0 || K <= 0 || T < 0 || ldx < K || ldy < N || !W || (T > 0 && (!x || !y)))
        return bd_error(BRAID_E_INVALID, "matmul: bad shape N=%lld K=%lld T=%lld ldx=%lld ldy=%lld", (long long)N,
                        (long long)K, (long long)T, (long long)ldx, (long long)ldy);
    if (T == 0) return BRAID_OK;
    if (wtype == BRAID_TYPE_F32) {
        mm_f32 a = {W, x, y, N, K, T, ldx, ldy, !mm_f32_tiles(N, K, T)};
        bd_threadpool_run(tp, mm_f32_task, &a);
        return BRAID_OK;
    }
    const bd_dot_traits *dt = bd_dot_traits_get(wtype);
    const bd_type_traits *tt = bd_type_traits_get(wtype);
    if (!dt || !tt) return bd_error(BRAID_E_UNSUPPORTED, "matmul: no dot product for weight type %u", wtype);
    size_t wrow = bd_row_size(wtype, K), xrow = bd_row_size(dt->vec_dot_type, K);
    if (!wrow || !xrow)
        return bd_error(BRAID_E_INVALID, "matmul: K=%lld is not a multiple of the block size of %s", (long long)K,
                        tt->name);
    size_t need = bd_matmul_scratch_size(wtype, K, T);
    if (!need || !scratch || scratch_size < need)
        return bd_error(BRAID_E_INVALID, "matmul: scratch of %zu bytes, %zu needed", scratch_size, need);
    const bd_gemmq_ops *gq = use_gemmq(wtype, K, T);
    if (gq) {
        size_t xq_bytes = ((xrow * (size_t)T) + 63) & ~(size_t)63;
        mm_gq a = {tp, dt, gq, wtype, W, wrow, x, scratch, xrow, (uint8_t *)scratch + xq_bytes, y, N, K, T, ldx, ldy};
        bd_threadpool_run(tp, mm_gq_task, &a);
        return BRAID_OK;
    }
    if (use_deq(wtype, N, K, T)) {
        const bd_type_traits *vt = bd_type_traits_get(dt->vec_dot_type);
        if (!vt) return bd_error(BRAID_E_UNSUPPORTED, "matmul: no traits for vec_dot_type %u", dt->vec_dot_type);
        size_t xq_bytes = ((xrow * (size_t)T) + 63) & ~(size_t)63;
        mm_deq a = {tp, dt, fast_to_float(tt, wtype), fast_to_float(vt, dt->vec_dot_type), W, wrow, x, scratch,
                    xrow, (float *)((uint8_t *)scratch + xq_bytes), deq_raw(wtype), y, N, K, T, ldx, ldy};
        bd_threadpool_run(tp, mm_deq_task, &a);
        return BRAID_OK;
    }
    const bd_matmul_op op = {wtype, W, N, y, ldy};
    int done = mm_gemv_run(tp, &op, 1, K, x, ldx, T, scratch, scratch_size);
    assert(done); /* one product: its conversion fits the scratch checked above */
    (void)done;
    return BRAID_OK;
}

braid_status bd_matmul_multi(bd_threadpool *tp, const bd_matmul_op *ops, int n_ops, int64_t K, const float *x,
                             int64_t ldx, int64_t T, void *scratch, size_t scratch_size) {
    if (n_ops < 0 || (n_ops > 0 && !ops)) return bd_error(BRAID_E_INVALID, "matmul_multi: %d products", n_ops);
    int fused = T > 0 && T < MM_DEQ_MIN_T && n_ops <= MM_MULTI_MAX;
    for (int i = 0; i < n_ops && fused; i++) {
        const bd_matmul_op *o = &ops[i];
        if (o->wtype == BRAID_TYPE_F32 || !bd_dot_traits_get(o->wtype) || o->N <= 0 || K <= 0 || ldx < K ||
            o->ldy < o->N || !o->W || !o->y || !x || !bd_row_size(o->wtype, K) ||
            bd_matmul_scratch_size(o->wtype, K, T) > scratch_size || !scratch)
            fused = 0; /* let bd_matmul take it (and report what is wrong, if anything) */
    }
    if (fused && mm_gemv_run(tp, ops, n_ops, K, x, ldx, T, scratch, scratch_size)) return BRAID_OK;
    for (int i = 0; i < n_ops; i++)
        BD_TRY(bd_matmul(tp, ops[i].wtype, ops[i].W, ops[i].N, K, x, ldx, T, ops[i].y, ops[i].ldy, scratch,
                         scratch_size));
    return BRAID_OK;
}
