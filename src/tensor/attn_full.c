/* attn_full.c — bidirectional attention of a set of tokens over all of them (a ViT's: no mask, no cells list),
 * as dense products. bd_attention (attention.c) walks one (token, head) pair at a time over a list of cells,
 * which is right for a KV cache but does ~n_tokens² short dot products of one head each; here, for every head
 * and block of FA_QB queries, S = Q·Kᵀ is one register-blocked product, then each row's softmax, then O = P·V
 * another: the shape of ggml's non-flash graph (mul_mat, soft_max_ext, mul_mat) with far fewer memory passes.
 *
 * The products are "broadcast" GEMMs C = A·B with B row-major: each step loads a few vectors of one row of B
 * and multiplies them by one broadcast element of each of MR rows of A, so neither operand needs a horizontal
 * sum and any contraction length (the head size 72 of Qwen's ViT, not a multiple of 16) costs nothing extra.
 * Kᵀ is built once per head into scratch so that Q·Kᵀ has this form too, and V is copied to contiguous,
 * zero-padded rows per head, so the chunk of V a pass keeps in L1 is consecutive lines rather than pieces of
 * fused qkv rows 13.8 KB apart (Qwen). Column tails are masked. Float order differs from ggml's (as braid's
 * F16 prompt GEMM does); outputs do not depend on the thread count: each (head, query block) item is computed
 * the same way whoever takes it.
 *
 * The softmax is ggml's soft_max_ext with a scale and no mask: exp(scale·s − max) with the vector expf of the
 * level (vexp.h), summed, and the row of P·V divided by the sum at the end (one multiply per output instead
 * of one per score). */
#include <math.h>
#include <string.h>

#include "tensor/lanes_x86.h"
#include "tensor/ops.h"
#include "tensor/simd.h"
#include "tensor/vexp.h"

#if BD_HAVE_X86
#include <immintrin.h>
#endif

enum {
    FA_QB = 48,  /* queries per work item: S (FA_QB x T floats) stays in L2 next to Kᵀ of the head */
    FA_KC = 128, /* contraction steps per pass of a product: that many rows of B (V: 128 x 80 floats) stay in L1 */
    FA_ALIGN = 16,
};

static int64_t round_up(int64_t x) { return (x + FA_ALIGN - 1) / FA_ALIGN * FA_ALIGN; }

typedef struct fa_gemm {
    const float *A, *B;
    float *C;
    int64_t M, N, K, lda, ldb, ldc;
} fa_gemm;

/* ---- portable products and softmax ------------------------------------------------------------------------ */

static void gemm_c(const fa_gemm *g) {
    for (int64_t i = 0; i < g->M; i++) {
        float *c = g->C + i * g->ldc;
        for (int64_t j = 0; j < g->N; j++) c[j] = 0;
        for (int64_t k = 0; k < g->K; k++) {
            const float a = g->A[i * g->lda + k], *b = g->B + k * g->ldb;
            for (int64_t j = 0; j < g->N; j++) c[j] += a * b[j];
        }
    }
}

/* y[0..n) = exp(scale·y - scale·max) in place; returns 1 / their sum (summed in double, as ggml). */
static float softmax_row_c(float *y, int64_t n, float scale) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = y[i] > mx ? y[i] : mx;
    const float m = mx * scale;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        y[i] = bd_exp_ggml(y[i] * scale - m);
        sum += (double)y[i];
    }
    return (float)(1.0 / sum);
}

#if BD_HAVE_X86
#define FA_INLINE static inline __attribute__((always_inline))
/* The tiles' short loops over rows and vectors must be unrolled before GCC decides where the accumulator
 * arrays live, or they stay in memory (a load and a store around every FMA): forced here. */
#define FA_UNROLL _Pragma("GCC unroll 8")

/* ---- AVX-512: tiles of MR rows x NV vectors of 16 (MR·NV <= 24 accumulators) ------------------------------ */

BD_TARGET_AVX512 FA_INLINE void tile512(int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
                                       int64_t ldc, __mmask16 last, int acc, const int MR, const int NV) {
    __m512 c[6][5];
    FA_UNROLL for (int r = 0; r < MR; r++)
        FA_UNROLL for (int v = 0; v < NV; v++)
            c[r][v] = !acc ? _mm512_setzero_ps()
                           : v == NV - 1 ? _mm512_maskz_loadu_ps(last, C + r * ldc + 16 * v)
                                         : _mm512_loadu_ps(C + r * ldc + 16 * v);
    for (int64_t k = 0; k < K; k++) {
        const float *b = B + k * ldb;
        __m512 bv[5];
        FA_UNROLL for (int v = 0; v < NV; v++)
            bv[v] = v == NV - 1 ? _mm512_maskz_loadu_ps(last, b + 16 * v) : _mm512_loadu_ps(b + 16 * v);
        FA_UNROLL for (int r = 0; r < MR; r++) {
            const __m512 a = _mm512_set1_ps(A[r * lda + k]);
            FA_UNROLL for (int v = 0; v < NV; v++) c[r][v] = _mm512_fmadd_ps(a, bv[v], c[r][v]);
        }
    }
    FA_UNROLL for (int r = 0; r < MR; r++)
        FA_UNROLL for (int v = 0; v < NV; v++) {
            if (v == NV - 1) _mm512_mask_storeu_ps(C + r * ldc + 16 * v, last, c[r][v]);
            else _mm512_storeu_ps(C + r * ldc + 16 * v, c[r][v]);
        }
}

typedef void (*tile512_fn)(int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc,
                           __mmask16 last, int acc);
#define FA_T512(R, V)                                                                                              \
    BD_TARGET_AVX512 static void t512_##R##_##V(int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb, \
                                                float *C, int64_t ldc, __mmask16 last, int acc) {                  \
        tile512(K, A, lda, B, ldb, C, ldc, last, acc, R, V);                                                       \
    }
#define FA_T512_ROW(R) FA_T512(R, 1) FA_T512(R, 2) FA_T512(R, 3) FA_T512(R, 4) FA_T512(R, 5)
FA_T512_ROW(1) FA_T512_ROW(2) FA_T512_ROW(3) FA_T512_ROW(4) FA_T512_ROW(5) FA_T512_ROW(6)
#define FA_T512_FNS(R) {t512_##R##_1, t512_##R##_2, t512_##R##_3, t512_##R##_4, t512_##R##_5}
static const tile512_fn tiles512[6][5] = {FA_T512_FNS(1), FA_T512_FNS(2), FA_T512_FNS(3),
                                          FA_T512_FNS(4), FA_T512_FNS(5), FA_T512_FNS(6)};

/* C = A·B: column panels of NV vectors (5 when the whole of N fits, so that a head of 72 is one panel),
 * contraction in chunks of FA_KC (the panel's rows of B stay in L1 while every row tile passes), row tiles
 * of MR (6, or 4 beside 5 vectors). */
static void gemm512(const fa_gemm *g) {
    const int nvmax = g->N <= 80 ? 5 : 4, mr = nvmax == 5 ? 4 : 6;
    for (int64_t j0 = 0; j0 < g->N; j0 += 16 * nvmax) {
        const int64_t nj = g->N - j0 < 16 * nvmax ? g->N - j0 : 16 * nvmax;
        const int nv = (int)((nj + 15) / 16);
        const __mmask16 last = (__mmask16)(0xffffu >> (16 * nv - nj));
        for (int64_t k0 = 0; k0 < g->K; k0 += FA_KC) {
            const int64_t nk = g->K - k0 < FA_KC ? g->K - k0 : FA_KC;
            for (int64_t i0 = 0; i0 < g->M; i0 += mr) {
                const int r = g->M - i0 < mr ? (int)(g->M - i0) : mr;
                tiles512[r - 1][nv - 1](nk, g->A + i0 * g->lda + k0, g->lda, g->B + k0 * g->ldb + j0, g->ldb,
                                        g->C + i0 * g->ldc + j0, g->ldc, last, k0 > 0);
            }
        }
    }
}

BD_TARGET_AVX512 static float softmax_row_512(float *y, int64_t n, float scale) {
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        mx = _mm512_mask_max_ps(mx, m, mx, _mm512_maskz_loadu_ps(m, y + i));
    }
    const __m512 sc = _mm512_set1_ps(scale), top = _mm512_set1_ps(_mm512_reduce_max_ps(mx) * scale);
    __m512 sum = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        const __m512 e = _mm512_maskz_mov_ps(m, bd_exp512(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(m, y + i), sc, top)));
        _mm512_mask_storeu_ps(y + i, m, e);
        sum = _mm512_add_ps(sum, e);
    }
    return 1.0f / _mm512_reduce_add_ps(sum);
}

/* ---- AVX2: tiles of MR rows x NV vectors of 8 (MR·NV <= 12 accumulators, 16 registers) -------------------- */

BD_TARGET_AVX2 FA_INLINE void tile256(int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
                                     int64_t ldc, __m256i last, int acc, const int MR, const int NV) {
    __m256 c[4][3];
    FA_UNROLL for (int r = 0; r < MR; r++)
        FA_UNROLL for (int v = 0; v < NV; v++)
            c[r][v] = !acc ? _mm256_setzero_ps()
                           : v == NV - 1 ? _mm256_maskload_ps(C + r * ldc + 8 * v, last)
                                         : _mm256_loadu_ps(C + r * ldc + 8 * v);
    for (int64_t k = 0; k < K; k++) {
        const float *b = B + k * ldb;
        __m256 bv[3];
        FA_UNROLL for (int v = 0; v < NV; v++)
            bv[v] = v == NV - 1 ? _mm256_maskload_ps(b + 8 * v, last) : _mm256_loadu_ps(b + 8 * v);
        FA_UNROLL for (int r = 0; r < MR; r++) {
            const __m256 a = _mm256_broadcast_ss(A + r * lda + k);
            FA_UNROLL for (int v = 0; v < NV; v++) c[r][v] = _mm256_fmadd_ps(a, bv[v], c[r][v]);
        }
    }
    FA_UNROLL for (int r = 0; r < MR; r++)
        FA_UNROLL for (int v = 0; v < NV; v++) {
            if (v == NV - 1) _mm256_maskstore_ps(C + r * ldc + 8 * v, last, c[r][v]);
            else _mm256_storeu_ps(C + r * ldc + 8 * v, c[r][v]);
        }
}

typedef void (*tile256_fn)(int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc,
                           __m256i last, int acc);
#define FA_T256(R, V)                                                                                              \
    BD_TARGET_AVX2 static void t256_##R##_##V(int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,   \
                                              float *C, int64_t ldc, __m256i last, int acc) {                      \
        tile256(K, A, lda, B, ldb, C, ldc, last, acc, R, V);                                                       \
    }
#define FA_T256_ROW(R) FA_T256(R, 1) FA_T256(R, 2) FA_T256(R, 3)
FA_T256_ROW(1) FA_T256_ROW(2) FA_T256_ROW(3) FA_T256_ROW(4)
#define FA_T256_FNS(R) {t256_##R##_1, t256_##R##_2, t256_##R##_3}
static const tile256_fn tiles256[4][3] = {FA_T256_FNS(1), FA_T256_FNS(2), FA_T256_FNS(3), FA_T256_FNS(4)};

BD_TARGET_AVX2 static void gemm256(const fa_gemm *g) {
    static const int32_t ones[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t j0 = 0; j0 < g->N; j0 += 24) {
        const int64_t nj = g->N - j0 < 24 ? g->N - j0 : 24;
        const int nv = (int)((nj + 7) / 8);
        const __m256i last = _mm256_loadu_si256((const __m256i *)(ones + 8 - (nj - 8 * (nv - 1))));
        for (int64_t k0 = 0; k0 < g->K; k0 += FA_KC) {
            const int64_t nk = g->K - k0 < FA_KC ? g->K - k0 : FA_KC;
            for (int64_t i0 = 0; i0 < g->M; i0 += 4) {
                const int r = g->M - i0 < 4 ? (int)(g->M - i0) : 4;
                tiles256[r - 1][nv - 1](nk, g->A + i0 * g->lda + k0, g->lda, g->B + k0 * g->ldb + j0, g->ldb,
                                        g->C + i0 * g->ldc + j0, g->ldc, last, k0 > 0);
            }
        }
    }
}

BD_TARGET_AVX2 static float softmax_row_256(float *y, int64_t n, float scale) {
    static const int32_t ones[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = y[i] > mx ? y[i] : mx;
    const __m256 sc = _mm256_set1_ps(scale), top = _mm256_set1_ps(mx * scale);
    __m256 sum = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 8) {
        const __m256i m = _mm256_loadu_si256((const __m256i *)(ones + 8 - (n - i < 8 ? n - i : 8)));
        const __m256 e = _mm256_and_ps(_mm256_castsi256_ps(m),
                                       bd_exp256(_mm256_fmsub_ps(_mm256_maskload_ps(y + i, m), sc, top)));
        _mm256_maskstore_ps(y + i, m, e);
        sum = _mm256_add_ps(sum, e);
    }
    return 1.0f / bd_hsum8(sum);
}
#endif

static void gemm(const fa_gemm *g) {
#if BD_HAVE_X86
    switch (bd_simd()) {
    case BD_SIMD_AVX512: gemm512(g); return;
    case BD_SIMD_AVX2: gemm256(g); return;
    default: break;
    }
#endif
    gemm_c(g);
}

static float softmax_row(float *y, int64_t n, float scale) {
#if BD_HAVE_X86
    switch (bd_simd()) {
    case BD_SIMD_AVX512: return softmax_row_512(y, n, scale);
    case BD_SIMD_AVX2: return softmax_row_256(y, n, scale);
    default: break;
    }
#endif
    return softmax_row_c(y, n, scale);
}

/* ---- the task ----------------------------------------------------------------------------------------------- */

typedef struct fa_job {
    bd_threadpool *tp;
    int64_t T, Tp; /* tokens; Tp: T rounded up to FA_ALIGN (row stride of Kᵀ and S) */
    int n_head, d;
    float scale;
    const float *q, *k, *v;
    int64_t ldq, ldk, ldv, ldo;
    float *o;
    float *kt; /* [n_head][d][Tp] */
    float *vp; /* [n_head][T][dp], dp = d rounded up to FA_ALIGN (zero padded) */
    float *s;  /* [nth][FA_QB][Tp] */
} fa_job;

static void fa_task(void *arg, int ith, int nth) {
    const fa_job *j = arg;
    const int64_t T = j->T, Tp = j->Tp, d = j->d;
    const int64_t dp = round_up(d);
    /* Kᵀ of every head (rows (h, c)) and V per head (rows (h, t)), split over the threads */
    int64_t r0, r1;
    bd_split((int64_t)j->n_head * d, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const float *src = j->k + (r / d) * d + r % d;
        float *dst = j->kt + r * Tp;
        for (int64_t t = 0; t < T; t++) dst[t] = src[t * j->ldk];
    }
    bd_split((int64_t)j->n_head * T, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        float *dst = j->vp + r * dp;
        memcpy(dst, j->v + (r % T) * j->ldv + (r / T) * d, (size_t)d * sizeof(float));
        memset(dst + d, 0, (size_t)(dp - d) * sizeof(float));
    }
    bd_threadpool_barrier(j->tp);

    float *s = j->s + (size_t)ith * FA_QB * (size_t)Tp;
    float inv[FA_QB];
    const int64_t nqb = (T + FA_QB - 1) / FA_QB;
    int64_t i0, i1;
    bd_split(nqb * j->n_head, ith, nth, &i0, &i1);
    for (int64_t it = i0; it < i1; it++) {
        const int64_t h = it / nqb, t0 = it % nqb * FA_QB, nq = T - t0 < FA_QB ? T - t0 : FA_QB;
        const fa_gemm qk = {j->q + t0 * j->ldq + h * d, j->kt + h * d * Tp, s, nq, T, d, j->ldq, Tp, Tp};
        gemm(&qk);
        for (int64_t i = 0; i < nq; i++) inv[i] = softmax_row(s + i * Tp, T, j->scale);
        float *o = j->o + t0 * j->ldo + h * d;
        const fa_gemm pv = {s, j->vp + h * T * dp, o, nq, d, T, Tp, dp, j->ldo};
        gemm(&pv);
        for (int64_t i = 0; i < nq; i++)
            for (int64_t c = 0; c < d; c++) o[i * j->ldo + c] *= inv[i];
    }
}

size_t bd_attention_full_scratch_size(int64_t T, int n_head, int head_dim, int n_threads) {
    if (T <= 0 || n_head <= 0 || head_dim <= 0 || n_threads < 1) return 0;
    const int64_t Tp = round_up(T);
    return ((size_t)n_head * (size_t)(head_dim + round_up(head_dim)) + (size_t)n_threads * FA_QB) * (size_t)Tp *
               sizeof(float) +
           64;
}

braid_status bd_attention_full(bd_threadpool *tp, int64_t T, int n_head, int head_dim, float scale, const float *q,
                               int64_t ldq, const float *k, int64_t ldk, const float *v, int64_t ldv, float *o,
                               int64_t ldo, void *scratch, size_t scratch_size) {
    const int64_t width = (int64_t)n_head * head_dim;
    if (T <= 0 || n_head <= 0 || head_dim <= 0 || ldq < width || ldk < width || ldv < width || ldo < width)
        return bd_error(BRAID_E_INVALID, "attention_full: %lld tokens, %d heads of %d, ld %lld/%lld/%lld/%lld",
                        (long long)T, n_head, head_dim, (long long)ldq, (long long)ldk, (long long)ldv,
                        (long long)ldo);
    const int nth = bd_threadpool_size(tp);
    const size_t need = bd_attention_full_scratch_size(T, n_head, head_dim, nth);
    if (!scratch || scratch_size < need)
        return bd_error(BRAID_E_INVALID, "attention_full: scratch of %zu bytes, %zu needed", scratch_size, need);
    const int64_t Tp = round_up(T);
    float *base = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    float *vp = base + (size_t)n_head * (size_t)head_dim * (size_t)Tp;
    fa_job j = {tp, T, Tp, n_head, head_dim, scale, q, k, v, ldq, ldk, ldv, ldo, o, base, vp,
                vp + (size_t)n_head * (size_t)round_up(head_dim) * (size_t)Tp};
    bd_threadpool_run(tp, fa_task, &j);
    return BRAID_OK;
}
