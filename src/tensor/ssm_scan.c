/* ssm_scan.c — the Mamba2 selective scan of one sequence (architectures.md §2.1 steps 4-5), in ggml's order:
 * per token and head, Δ = softplus(dt + dt_bias), dA = expf(Δ·A); for each channel p the state row s[h][p][·]
 * becomes s·dA + B·(x_p·Δ) (a multiply and an add, as ggml's Mamba-2 branch) and y_p = Σ_n s·C. The
 * skip D·x is added afterwards (ggml adds it as a separate op). Heads are split across threads; each state
 * row (N floats) is vectorised on AVX-512 / AVX2 when N allows. */
#include <math.h>
#include <string.h>

#include "tensor/ops.h"
#include "tensor/simd.h"

#if BD_HAVE_X86
#include <immintrin.h>
#endif

typedef struct scan_job {
    int64_t T;
    int H, P, N, G;
    const float *x, *dt, *dt_bias, *A, *B, *C, *D;
    int64_t ldx, lddt, ldb, ldc, ldy;
    float *state, *y;
    float *const *snap;
} scan_job;

/* One state row: s = s·dA + B·xdt, returns Σ s·C. */
static float scan_row_scalar(float *s, const float *B, const float *C, int N, float dA, float xdt) {
    float sum = 0.0f;
    for (int n = 0; n < N; n++) {
        const float v = (s[n] * dA) + (B[n] * xdt);
        sum += v * C[n];
        s[n] = v;
    }
    return sum;
}

#if BD_HAVE_X86
BD_TARGET_AVX512 static float scan_row_avx512(float *s, const float *B, const float *C, int N, float dA, float xdt) {
    const __m512 a = _mm512_set1_ps(dA), b = _mm512_set1_ps(xdt);
    __m512 acc = _mm512_setzero_ps();
    for (int n = 0; n < N; n += 16) {
        __m512 v = _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(s + n), a), _mm512_mul_ps(_mm512_loadu_ps(B + n), b));
        acc = _mm512_fmadd_ps(v, _mm512_loadu_ps(C + n), acc);
        _mm512_storeu_ps(s + n, v);
    }
    return _mm512_reduce_add_ps(acc);
}

BD_TARGET_AVX2 static float scan_row_avx2(float *s, const float *B, const float *C, int N, float dA, float xdt) {
    const __m256 a = _mm256_set1_ps(dA), b = _mm256_set1_ps(xdt);
    __m256 acc = _mm256_setzero_ps();
    for (int n = 0; n < N; n += 8) {
        __m256 v = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(s + n), a), _mm256_mul_ps(_mm256_loadu_ps(B + n), b));
        acc = _mm256_fmadd_ps(v, _mm256_loadu_ps(C + n), acc);
        _mm256_storeu_ps(s + n, v);
    }
    __m128 r = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}
#endif

typedef float (*scan_row_fn)(float *, const float *, const float *, int, float, float);

static void scan_task(void *p, int ith, int nth) {
    const scan_job *j = p;
    const int P = j->P, N = j->N;
    scan_row_fn fn = scan_row_scalar;
#if BD_HAVE_X86
    int lv = bd_simd();
    if (lv == BD_SIMD_AVX512 && N % 16 == 0) fn = scan_row_avx512;
    else if (lv >= BD_SIMD_AVX2 && N % 8 == 0) fn = scan_row_avx2;
#endif
    const size_t hs = (size_t)P * (size_t)N;
    const int heads_per_group = j->H / j->G;
    int64_t h0, h1;
    bd_split(j->H, ith, nth, &h0, &h1);
    for (int64_t h = h0; h < h1; h++) {
        const int64_t g = h / heads_per_group;
        float *s = j->state + (size_t)h * hs;
        for (int64_t t = 0; t < j->T; t++) {
            float dt = j->dt[t * j->lddt + h];
            if (j->dt_bias) dt += j->dt_bias[h];
            const float delta = dt > 20.0f ? dt : logf(1.0f + expf(dt));
            const float dA = expf(delta * j->A[h]);
            const float *x = j->x + t * j->ldx + h * P;
            const float *B = j->B + t * j->ldb + g * N, *C = j->C + t * j->ldc + g * N;
            float *y = j->y + t * j->ldy + h * P;
            for (int pi = 0; pi < P; pi++) {
                float v = fn(s + (size_t)pi * N, B, C, N, dA, x[pi] * delta);
                y[pi] = j->D ? v + x[pi] * j->D[h] : v;
            }
            if (j->snap && j->snap[t]) memcpy(j->snap[t] + (size_t)h * hs, s, hs * sizeof(float));
        }
    }
}

void bd_ssm_scan(bd_threadpool *tp, int64_t T, int H, int P, int N, int G, const float *x, int64_t ldx,
                 const float *dt, int64_t lddt, const float *dt_bias, const float *A, const float *B, int64_t ldb,
                 const float *C, int64_t ldc, const float *D, float *state, float *y, int64_t ldy,
                 float *const *snap) {
    scan_job j = {T, H, P, N, G, x, dt, dt_bias, A, B, C, D, ldx, lddt, ldb, ldc, ldy, state, y, snap};
    bd_threadpool_run(H > 1 ? tp : NULL, scan_task, &j);
}
