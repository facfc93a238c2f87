/* ssm_scan.c — the Mamba2 selective scan of one sequence (architectures.md §2.1 steps 4-5), in ggml's order:
 * per token and head, Δ = softplus(dt + dt_bias), dA = expf(Δ·A); for each channel p the state row s[h][p][·]
 * becomes s·dA + B·(x_p·Δ) (a multiply and an add, as ggml's Mamba-2 branch) and y_p = Σ_n s·C. The
 * skip D·x is added afterwards (ggml adds it as a separate op). Heads are split across threads; each state
 * row (N floats) follows ggml's SIMD structure (scan_row_* below: x86 and NEON), so the bits match the variant
 * llama.cpp loads for the same SIMD level. */
#include <math.h>
#include <string.h>

#include "tensor/ops.h"
#include "tensor/simd.h"

#if BD_HAVE_X86
#include <immintrin.h>
#endif
#if BD_HAVE_NEON
#include <arm_neon.h>
#endif

typedef struct scan_job {
    int64_t T;
    int H, P, N, G;
    const float *x, *dt, *dt_bias, *A, *B, *C, *D;
    int64_t ldx, lddt, ldb, ldc, ldy;
    const float *state_in;
    float *state, *y;
    float *const *snap;
} scan_job;

/* One state row: s = s·dA + B·xdt, returns Σ s·C, in ggml's x86 order (ops.cpp, Mamba-2 branch of
 * ggml_compute_forward_ssm_scan_f32): the first N & ~(STEP-1) elements in SIMD steps of 4 vectors with one
 * accumulator each (sum[j] += s·C as one FMA), reduced pairwise (0+2, 1+3, then 0+1) and across lanes, then the
 * rest one by one into that float. In the scalar tail ggml's compiler fuses one product of each expression:
 * s = fma(s0, dA, B·xdt), sum = fma(s, C, sum). The portable path is that tail over the whole row. */
static float scan_tail(float *s, const float *si, const float *B, const float *C, int n0, int N, float dA, float xdt,
                       float sum) {
    for (int n = n0; n < N; n++) {
        const float v = fmaf(si[n], dA, B[n] * xdt);
        sum = fmaf(v, C[n], sum);
        s[n] = v;
    }
    return sum;
}

static float scan_row_scalar(float *s, const float *si, const float *B, const float *C, int N, float dA, float xdt) {
    return scan_tail(s, si, B, C, 0, N, dA, xdt, 0.0f);
}

#if BD_HAVE_X86
BD_TARGET_AVX512 static float scan_row_avx512(float *s, const float *si, const float *B, const float *C, int N, float dA,
                                              float xdt) {
    const int np = N & ~63; /* GGML_F32_STEP: 4 vectors of 16 */
    float sum = 0.0f;
    if (np) {
        const __m512 a = _mm512_set1_ps(dA), b = _mm512_set1_ps(xdt);
        __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
        for (int n = 0; n < np; n += 64)
            for (int j = 0; j < 4; j++) {
                const int k = n + 16 * j;
                const __m512 v = _mm512_fmadd_ps(_mm512_loadu_ps(si + k), a, _mm512_mul_ps(_mm512_loadu_ps(B + k), b));
                acc[j] = _mm512_fmadd_ps(v, _mm512_loadu_ps(C + k), acc[j]);
                _mm512_storeu_ps(s + k, v);
            }
        acc[0] = _mm512_add_ps(acc[0], acc[2]);
        acc[1] = _mm512_add_ps(acc[1], acc[3]);
        acc[0] = _mm512_add_ps(acc[0], acc[1]);
        sum = _mm512_reduce_add_ps(acc[0]);
    }
    return scan_tail(s, si, B, C, np, N, dA, xdt, sum);
}

BD_TARGET_AVX2 static float scan_row_avx2(float *s, const float *si, const float *B, const float *C, int N, float dA,
                                          float xdt) {
    const int np = N & ~31; /* GGML_F32_STEP: 4 vectors of 8 */
    float sum = 0.0f;
    if (np) {
        const __m256 a = _mm256_set1_ps(dA), b = _mm256_set1_ps(xdt);
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int n = 0; n < np; n += 32)
            for (int j = 0; j < 4; j++) {
                const int k = n + 8 * j;
                const __m256 v = _mm256_fmadd_ps(_mm256_loadu_ps(si + k), a, _mm256_mul_ps(_mm256_loadu_ps(B + k), b));
                acc[j] = _mm256_fmadd_ps(v, _mm256_loadu_ps(C + k), acc[j]);
                _mm256_storeu_ps(s + k, v);
            }
        acc[0] = _mm256_add_ps(acc[0], acc[2]);
        acc[1] = _mm256_add_ps(acc[1], acc[3]);
        acc[0] = _mm256_add_ps(acc[0], acc[1]);
        const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(acc[0]), _mm256_extractf128_ps(acc[0], 1));
        const __m128 t1 = _mm_hadd_ps(t0, t0);
        sum = _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
    }
    return scan_tail(s, si, B, C, np, N, dA, xdt, sum);
}
#endif

#if BD_HAVE_NEON
/* ggml's arm64 builds (both NEON levels; read off the machine code of ggml_compute_forward_ssm_scan in armv8.0_1
 * and armv8.2_2): steps of 4 vectors of 4 with one accumulator each, the new state (s·dA) + (B·xdt) as two
 * rounded products and an add (no fusion there), sum[j] += s·C fused; (0 + 2) + (1 + 3), then (l0 + l1) +
 * (l2 + l3). The scalar tail is scan_tail's, except where the compiler vectorized that loop: for the first
 * token of a call, whose old state is another buffer than the new one (for the later tokens the two are the
 * same buffer, and the vector loop's overlap check sends it to the scalar loop), the first (N - np) & ~7
 * elements are done 8 at a time with the products s·C rounded and added one by one. */
static float scan_row_neon_impl(float *s, const float *si, const float *B, const float *C, int N, float dA, float xdt,
                                int first) {
    const int np = N & ~15;
    float sum = 0.0f;
    if (np) {
        const float32x4_t a = vdupq_n_f32(dA), b = vdupq_n_f32(xdt);
        float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
        for (int n = 0; n < np; n += 16)
            for (int j = 0; j < 4; j++) {
                const int k = n + 4 * j;
                const float32x4_t v = vaddq_f32(vmulq_f32(vld1q_f32(si + k), a), vmulq_f32(vld1q_f32(B + k), b));
                acc[j] = vfmaq_f32(acc[j], v, vld1q_f32(C + k));
                vst1q_f32(s + k, v);
            }
        sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[2]), vaddq_f32(acc[1], acc[3])));
    }
    int n = np;
    if (first)
        for (const int nu = np + ((N - np) & ~7); n < nu; n++) {
            const float v = fmaf(si[n], dA, B[n] * xdt);
            sum += v * C[n];
            s[n] = v;
        }
    return scan_tail(s, si, B, C, n, N, dA, xdt, sum);
}
static float scan_row_neon(float *s, const float *si, const float *B, const float *C, int N, float dA, float xdt) {
    return scan_row_neon_impl(s, si, B, C, N, dA, xdt, 0);
}
static float scan_row_neon_first(float *s, const float *si, const float *B, const float *C, int N, float dA,
                                 float xdt) {
    return scan_row_neon_impl(s, si, B, C, N, dA, xdt, 1);
}
#endif

typedef float (*scan_row_fn)(float *, const float *, const float *, const float *, int, float, float);

static void scan_task(void *p, int ith, int nth) {
    const scan_job *j = p;
    const int P = j->P, N = j->N;
    scan_row_fn fn = scan_row_scalar, fn_first; /* fn_first: the first token of the call */
    switch (bd_simd()) {
#if BD_HAVE_X86
    case BD_SIMD_AVX512: fn = scan_row_avx512; break;
    case BD_SIMD_AVX2: fn = scan_row_avx2; break;
#elif BD_HAVE_NEON
    case BD_SIMD_NEON:
    case BD_SIMD_NEON_DOT: fn = scan_row_neon; break;
#endif
    default: break;
    }
    fn_first = fn;
#if BD_HAVE_NEON
    if (fn == scan_row_neon) fn_first = scan_row_neon_first;
#endif
    const size_t hs = (size_t)P * (size_t)N;
    const int heads_per_group = j->H / j->G;
    int64_t h0, h1;
    bd_split(j->H, ith, nth, &h0, &h1);
    for (int64_t h = h0; h < h1; h++) {
        const int64_t g = h / heads_per_group;
        float *s = j->state + (size_t)h * hs;
        /* the first token reads the run's in state, the rest the out state it has written */
        const float *si = j->state_in + (size_t)h * hs;
        for (int64_t t = 0; t < j->T; t++) {
            float dt = j->dt[t * j->lddt + h];
            if (j->dt_bias) dt += j->dt_bias[h];
            const float delta = dt > 20.0f ? dt : logf(1.0f + expf(dt));
            const float dA = expf(delta * j->A[h]);
            const float *x = j->x + t * j->ldx + h * P;
            const float *B = j->B + t * j->ldb + g * N, *C = j->C + t * j->ldc + g * N;
            float *y = j->y + t * j->ldy + h * P;
            for (int pi = 0; pi < P; pi++) {
                float v = (t ? fn : fn_first)(s + (size_t)pi * N, si + (size_t)pi * N, B, C, N, dA, x[pi] * delta);
                y[pi] = j->D ? v + x[pi] * j->D[h] : v;
            }
            if (j->snap && j->snap[t]) memcpy(j->snap[t] + (size_t)h * hs, s, hs * sizeof(float));
            si = s;
        }
    }
}

void bd_ssm_scan_from(bd_threadpool *tp, int64_t T, int H, int P, int N, int G, const float *x, int64_t ldx,
                      const float *dt, int64_t lddt, const float *dt_bias, const float *A, const float *B, int64_t ldb,
                      const float *C, int64_t ldc, const float *D, const float *state_in, float *state, float *y,
                      int64_t ldy, float *const *snap) {
    scan_job j = {T, H, P, N, G, x, dt, dt_bias, A, B, C, D, ldx, lddt, ldb, ldc, ldy, state_in, state, y, snap};
    bd_threadpool_run(H > 1 ? tp : NULL, scan_task, &j);
}

void bd_ssm_scan(bd_threadpool *tp, int64_t T, int H, int P, int N, int G, const float *x, int64_t ldx,
                 const float *dt, int64_t lddt, const float *dt_bias, const float *A, const float *B, int64_t ldb,
                 const float *C, int64_t ldc, const float *D, float *state, float *y, int64_t ldy,
                 float *const *snap) {
    bd_ssm_scan_from(tp, T, H, P, N, G, x, ldx, dt, lddt, dt_bias, A, B, ldb, C, ldc, D, state, state, y, ldy, snap);
}
