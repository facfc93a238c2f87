/* norm.c — RMSNorm and GDN's L2 norm (architectures.md §0.2), as ggml computes them: the squares are float
 * products summed in double, the mean is rounded to float, the scale is 1/sqrtf(mean + eps), and the weight
 * multiplies afterwards ((x·scale)·w). The AVX-512 and NEON sums keep 8 double lanes; with float products
 * summed in double the order almost never changes the float mean. */
#include <assert.h>
#include <math.h>

#include "tensor/ops.h"
#include "tensor/simd.h"

#if BD_HAVE_X86
#include <immintrin.h>

BD_TARGET_AVX512 static double sumsq_avx512(const float *x, int64_t n) {
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        __m512 sq = _mm512_mul_ps(v, v);
        a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm512_castps512_ps256(sq)));
        a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(sq), 1))));
    }
    double s = _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
    for (; i < n; i++) s += (double)(x[i] * x[i]);
    return s;
}
#endif

#if BD_HAVE_NEON
#include <arm_neon.h>

/* Both NEON levels: the float squares widened and summed in 8 double lanes (4 accumulators of 2), as
 * sumsq_avx512; ggml's arm64 builds sum them one by one, so this is the same "almost never" as there. */
static double sumsq_neon(const float *x, int64_t n) {
    float64x2_t a[4] = {vdupq_n_f64(0), vdupq_n_f64(0), vdupq_n_f64(0), vdupq_n_f64(0)};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int h = 0; h < 2; h++) {
            const float32x4_t v = vld1q_f32(x + i + 4 * h), sq = vmulq_f32(v, v);
            a[2 * h] = vaddq_f64(a[2 * h], vcvt_f64_f32(vget_low_f32(sq)));
            a[2 * h + 1] = vaddq_f64(a[2 * h + 1], vcvt_high_f64_f32(sq));
        }
    double s = vaddvq_f64(vaddq_f64(vaddq_f64(a[0], a[2]), vaddq_f64(a[1], a[3])));
    for (; i < n; i++) s += (double)(x[i] * x[i]);
    return s;
}
#endif

static double sumsq(const float *x, int64_t n) {
    switch (bd_simd()) {
#if BD_HAVE_X86
    case BD_SIMD_AVX512: return sumsq_avx512(x, n);
#elif BD_HAVE_NEON
    case BD_SIMD_NEON:
    case BD_SIMD_NEON_DOT: return sumsq_neon(x, n);
#endif
    default: break;
    }
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)(x[i] * x[i]);
    return s;
}

void bd_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) {
    assert(n > 0);
    const float mean = (float)(sumsq(x, n) / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    if (w)
        for (int64_t i = 0; i < n; i++) y[i] = (x[i] * scale) * w[i];
    else
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale;
}

void bd_l2norm(float *y, const float *x, int64_t n, float eps) {
    /* llama.cpp: ggml_scale(ggml_rms_norm(x, eps/n), 1/sqrtf(n)) */
    const float nf = (float)n;
    const float mean = (float)(sumsq(x, n) / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps / nf);
    const float s2 = 1.0f / sqrtf(nf);
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] * scale) * s2;
}

typedef struct norm_rows {
    float *y;
    const float *x, *w;
    int64_t ldy, ldx, n, rows;
    float eps;
    int l2;
} norm_rows;

static void norm_rows_task(void *p, int ith, int nth) {
    const norm_rows *a = p;
    int64_t r0, r1;
    bd_split(a->rows, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        if (a->l2) bd_l2norm(a->y + r * a->ldy, a->x + r * a->ldx, a->n, a->eps);
        else bd_rmsnorm(a->y + r * a->ldy, a->x + r * a->ldx, a->w, a->n, a->eps);
    }
}

/* Small jobs are not worth waking the workers for. */
static bd_threadpool *pool_for(bd_threadpool *tp, int64_t elems) { return elems < 16384 ? NULL : tp; }

void bd_rmsnorm_rows(bd_threadpool *tp, float *y, int64_t ldy, const float *x, int64_t ldx, const float *w,
                     int64_t n, int64_t rows, float eps) {
    norm_rows a = {y, x, w, ldy, ldx, n, rows, eps, 0};
    bd_threadpool_run(pool_for(tp, n * rows), norm_rows_task, &a);
}

void bd_l2norm_rows(bd_threadpool *tp, float *y, int64_t ldy, const float *x, int64_t ldx, int64_t n,
                    int64_t rows, float eps) {
    norm_rows a = {y, x, NULL, ldy, ldx, n, rows, eps, 1};
    bd_threadpool_run(pool_for(tp, n * rows), norm_rows_task, &a);
}
