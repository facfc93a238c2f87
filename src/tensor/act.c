/* act.c — elementwise activations and arithmetic (architectures.md §0.2): silu, sigmoid, softplus, softmax,
 * SwiGLU, gating, residual add, each giving ggml's bits: silu / SwiGLU / softmax use ggml's vector expf
 * (vexp.h) where ggml does (whole vectors of 16 in its AVX-512 builds, of 8 in its AVX2 builds, of 4 in its
 * arm64 builds) and libm's expf elsewhere, as ggml does; sigmoid and softplus
 * are libm's expf / logf everywhere, as ggml's scalar unary ops. */
#include <math.h>

#include "tensor/ops.h"
#include "tensor/simd.h"
#include "tensor/lanes_x86.h"
#include "tensor/vexp.h"

static inline float silu1(float x) { return x / (1.0f + expf(-x)); }

/* ggml's split (vec.cpp): the AVX-512 builds take the first n & ~15 elements with their vector expf (vexp.h),
 * the rest with libm's expf; the portable code splits the same way. The AVX2 builds split at n & ~7. */
#if BD_HAVE_X86
BD_TARGET_AVX512 static void swiglu_avx512(float *y, const float *g, const float *u, int64_t n, int gate_only) {
    int64_t i = 0;
    const __m512 one = _mm512_set1_ps(1.0f);
    for (; i + 16 <= n; i += 16) {
        __m512 x = _mm512_loadu_ps(g + i);
        __m512 s = _mm512_div_ps(x, _mm512_add_ps(one, bd_exp512(_mm512_sub_ps(_mm512_setzero_ps(), x))));
        _mm512_storeu_ps(y + i, gate_only ? s : _mm512_mul_ps(s, _mm512_loadu_ps(u + i)));
    }
    for (; i < n; i++) y[i] = gate_only ? silu1(g[i]) : silu1(g[i]) * u[i];
}

/* ggml's AVX2 builds: vectors of 8 with their own vector expf, libm's expf for the last n % 8. */
BD_TARGET_AVX2 static void swiglu_avx2(float *y, const float *g, const float *u, int64_t n, int gate_only) {
    int64_t i = 0;
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i);
        __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, bd_exp256(_mm256_sub_ps(_mm256_setzero_ps(), x))));
        _mm256_storeu_ps(y + i, gate_only ? s : _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++) y[i] = gate_only ? silu1(g[i]) : silu1(g[i]) * u[i];
}
#endif

#if BD_HAVE_NEON
/* ggml's arm64 builds (both NEON levels): vectors of 4 with the NEON vector expf, libm's expf for the last n % 4. */
static void swiglu_neon(float *y, const float *g, const float *u, int64_t n, int gate_only) {
    int64_t i = 0;
    const float32x4_t one = vdupq_n_f32(1.0f), zero = vdupq_n_f32(0.0f);
    for (; i + 4 <= n; i += 4) {
        const float32x4_t x = vld1q_f32(g + i);
        const float32x4_t s = vdivq_f32(x, vaddq_f32(one, bd_exp_neon(vsubq_f32(zero, x))));
        vst1q_f32(y + i, gate_only ? s : vmulq_f32(s, vld1q_f32(u + i)));
    }
    for (; i < n; i++) y[i] = gate_only ? silu1(g[i]) : silu1(g[i]) * u[i];
}
#endif

static void swiglu_any(float *y, const float *g, const float *u, int64_t n, int gate_only) {
    switch (bd_simd()) {
#if BD_HAVE_X86
    case BD_SIMD_AVX512: swiglu_avx512(y, g, u, n, gate_only); return;
    case BD_SIMD_AVX2: swiglu_avx2(y, g, u, n, gate_only); return;
#elif BD_HAVE_NEON
    case BD_SIMD_NEON:
    case BD_SIMD_NEON_DOT: swiglu_neon(y, g, u, n, gate_only); return;
#endif
    default: break;
    }
    const int64_t nv = n & ~(int64_t)15;
    for (int64_t i = 0; i < n; i++) {
        const float s = i < nv ? g[i] / (1.0f + bd_exp_ggml(-g[i])) : silu1(g[i]);
        y[i] = gate_only ? s : s * u[i];
    }
}

void bd_silu(float *y, const float *x, int64_t n) { swiglu_any(y, x, NULL, n, 1); }
void bd_swiglu(float *y, const float *g, const float *u, int64_t n) { swiglu_any(y, g, u, n, 0); }

void bd_sigmoid(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = 1.0f / (1.0f + expf(-x[i]));
}

void bd_mul_sigmoid(float *y, const float *a, const float *g, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = a[i] * (1.0f / (1.0f + expf(-g[i])));
}

void bd_softplus(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] > 20.0f ? x[i] : logf(1.0f + expf(x[i]));
}

void bd_relu_sqr(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float r = x[i] > 0.0f ? x[i] : 0.0f;
        y[i] = r * r;
    }
}

void bd_add(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

void bd_mul(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = a[i] * b[i];
}

/* Every build's last elements: libm's expf, each added to sum in double. */
static double expsum_tail(float *y, const float *x, float max, int64_t i, int64_t n, double sum) {
    for (; i < n; i++) {
        y[i] = expf(x[i] - max);
        sum += (double)y[i];
    }
    return sum;
}

/* y = exp(x - max), returns the sum as ggml_vec_soft_max_f32 makes it. AVX-512 builds (and the portable code):
 * per 16 elements the vector expf, the 16 values summed in float by halving (16 -> 8 -> 4 -> 2 -> 1), each such
 * sum added in double; the last n % 16 with libm's expf, each added in double. AVX2 builds: the same per 8
 * elements, with their vector expf and hsum_float_8's tree (bd_hsum8); the last n % 8 with libm's. arm64
 * builds: per 4 (expsum_neon). */
#if BD_HAVE_X86
BD_TARGET_AVX512 static double expsum_avx512(float *y, const float *x, float max, int64_t n) {
    double sum = 0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = bd_exp512(_mm512_sub_ps(_mm512_loadu_ps(x + i), _mm512_set1_ps(max)));
        _mm512_storeu_ps(y + i, v);
        sum += (double)_mm512_reduce_add_ps(v);
    }
    return expsum_tail(y, x, max, i, n, sum);
}

BD_TARGET_AVX2 static double expsum_avx2(float *y, const float *x, float max, int64_t n) {
    double sum = 0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = bd_exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), _mm256_set1_ps(max)));
        _mm256_storeu_ps(y + i, v);
        sum += (double)bd_hsum8(v);
    }
    return expsum_tail(y, x, max, i, n, sum);
}
#endif

#if BD_HAVE_NEON
/* ggml's arm64 builds: per 4 elements the NEON vector expf, the 4 values summed pairwise in float
 * ((v0 + v1) + (v2 + v3), faddp) and added in double; the last n % 4 with libm's expf. */
static double expsum_neon(float *y, const float *x, float max, int64_t n) {
    double sum = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = bd_exp_neon(vsubq_f32(vld1q_f32(x + i), vdupq_n_f32(max)));
        vst1q_f32(y + i, v);
        sum += (double)vaddvq_f32(v);
    }
    return expsum_tail(y, x, max, i, n, sum);
}
#endif

static double expsum_scalar(float *y, const float *x, float max, int64_t n) {
    double sum = 0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        float w[8], q[4];
        for (int l = 0; l < 16; l++) y[i + l] = bd_exp_ggml(x[i + l] - max);
        for (int l = 0; l < 8; l++) w[l] = y[i + l] + y[i + l + 8];
        for (int l = 0; l < 4; l++) q[l] = w[l] + w[l + 4];
        sum += (double)((q[0] + q[2]) + (q[1] + q[3]));
    }
    return expsum_tail(y, x, max, i, n, sum);
}

void bd_softmax(float *y, const float *x, int64_t n) {
    if (n <= 0) return;
    float max = -INFINITY;
    for (int64_t i = 0; i < n; i++) max = x[i] > max ? x[i] : max;
    double sum;
    switch (bd_simd()) {
#if BD_HAVE_X86
    case BD_SIMD_AVX512: sum = expsum_avx512(y, x, max, n); break;
    case BD_SIMD_AVX2: sum = expsum_avx2(y, x, max, n); break;
#elif BD_HAVE_NEON
    case BD_SIMD_NEON:
    case BD_SIMD_NEON_DOT: sum = expsum_neon(y, x, max, n); break;
#endif
    default: sum = expsum_scalar(y, x, max, n); break;
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) y[i] *= inv;
}

typedef struct swiglu_rows {
    float *y;
    const float *g, *u;
    int64_t ldy, ldg, ldu, n, rows;
} swiglu_rows;

static void swiglu_rows_task(void *p, int ith, int nth) {
    const swiglu_rows *a = p;
    int64_t r0, r1;
    bd_split(a->rows, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) bd_swiglu(a->y + r * a->ldy, a->g + r * a->ldg, a->u + r * a->ldu, a->n);
}

void bd_swiglu_rows(bd_threadpool *tp, float *y, int64_t ldy, const float *g, int64_t ldg, const float *u,
                    int64_t ldu, int64_t n, int64_t rows) {
    swiglu_rows a = {y, g, u, ldy, ldg, ldu, n, rows};
    bd_threadpool_run(n * rows < 16384 ? NULL : tp, swiglu_rows_task, &a);
}
