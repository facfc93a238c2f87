/* vit_rows.c — the ViT's row work between its products (vit.c): LayerNorm, bias + GELU through ggml's fp16
 * table, bias + residual add, and bias + 2-D vision RoPE on the fused qkv rows. Each is one dispatch on the
 * projector's pool with rows split over the threads, and the bias adds are fused into the op that follows
 * them (the same float operations in the same order as ggml's separate add ops, so the same bits). Once the
 * products and attention were fast, these single-threaded scalar loops were a tenth of an encode. */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "tensor/simd.h"
#include "tensor/types.h"
#include "vision/vision.h"

#if BD_HAVE_X86
#include <immintrin.h>
#endif

/* ---- GELU through ggml's fp16 table (GGML_GELU_FP16) ------------------------------------------------------ */

/* gelu_f32[h] = the fp16 table's value for the half h, widened: one gather per vector instead of two
 * conversions around the lookup. */
static float gelu_f32[1 << 16];
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void gelu_init(void) {
    for (uint32_t i = 0; i < (1u << 16); i++) {
        float x = bd_fp16_to_fp32((uint16_t)i);
        float y = 0.5f * x * (1.0f + tanhf(0.79788456080286535587989211986876f * x * (1.0f + 0.044715f * x * x)));
        gelu_f32[i] = bd_fp16_to_fp32(bd_fp32_to_fp16(y));
    }
}

/* x <= -10: 0; x < 10: the table at x rounded to fp16; else (x >= 10, NaN) x itself, as ggml. */
static void gelu_c(float *y, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float x = b ? y[i] + b[i] : y[i];
        y[i] = x <= -10.0f ? 0.0f : x < 10.0f ? gelu_f32[bd_fp32_to_fp16(x)] : x;
    }
}

#if BD_HAVE_X86
BD_TARGET_AVX512 static void gelu_512(float *y, const float *b, int64_t n) {
    const __m512 lo = _mm512_set1_ps(-10.0f), hi = _mm512_set1_ps(10.0f);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 x = _mm512_maskz_loadu_ps(m, y + i);
        if (b) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, b + i));
        const __m512i h = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
        const __m512 g = _mm512_i32gather_ps(h, gelu_f32, 4);
        const __mmask16 neg = _mm512_cmp_ps_mask(x, lo, _CMP_LE_OQ);
        const __mmask16 mid = _mm512_cmp_ps_mask(x, hi, _CMP_LT_OQ) & ~neg;
        _mm512_mask_storeu_ps(y + i, m, _mm512_maskz_mov_ps((__mmask16)~neg, _mm512_mask_blend_ps(mid, x, g)));
    }
}

BD_TARGET_AVX2 static void gelu_256(float *y, const float *b, int64_t n) {
    const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(y + i);
        if (b) x = _mm256_add_ps(x, _mm256_loadu_ps(b + i));
        const __m256i h = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
        const __m256 g = _mm256_i32gather_ps(gelu_f32, h, 4);
        const __m256 neg = _mm256_cmp_ps(x, lo, _CMP_LE_OQ);
        const __m256 mid = _mm256_andnot_ps(neg, _mm256_cmp_ps(x, hi, _CMP_LT_OQ));
        _mm256_storeu_ps(y + i, _mm256_andnot_ps(neg, _mm256_blendv_ps(x, g, mid)));
    }
    gelu_c(y + i, b ? b + i : NULL, n - i);
}
#endif

static void gelu_row(float *y, const float *b, int64_t n) {
#if BD_HAVE_X86
    switch (bd_simd()) {
    case BD_SIMD_AVX512: gelu_512(y, b, n); return;
    case BD_SIMD_AVX2: gelu_256(y, b, n); return;
    default: break;
    }
#endif
    gelu_c(y, b, n);
}

/* ---- LayerNorm -------------------------------------------------------------------------------------------- */

/* ggml_norm (mean, then the biased variance of x - mean, each summed in double), then * w + b. The double
 * sums run in four interleaved chains (rounding in double does not reach the float results in practice; one
 * chain is latency-bound). */
static void layernorm_row(float *y, const float *x, int64_t n, const float *w, const float *b, float eps) {
    double s[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int l = 0; l < 4; l++) s[l] += x[i + l];
    for (; i < n; i++) s[0] += x[i];
    const float mean = (float)(((s[0] + s[1]) + (s[2] + s[3])) / (double)n);
    double v[4] = {0, 0, 0, 0};
    for (i = 0; i + 4 <= n; i += 4)
        for (int l = 0; l < 4; l++) {
            const float d = x[i + l] - mean;
            y[i + l] = d;
            v[l] += (double)(d * d);
        }
    for (; i < n; i++) {
        const float d = x[i] - mean;
        y[i] = d;
        v[0] += (double)(d * d);
    }
    const float scale = 1.0f / sqrtf((float)(((v[0] + v[1]) + (v[2] + v[3])) / (double)n) + eps);
    for (i = 0; i < n; i++) y[i] = y[i] * scale * w[i] + b[i];
}

/* ---- the vision RoPE (GGML_ROPE_TYPE_VISION, sections d/4 x 4) --------------------------------------------- */

void bd_vit_rope_table(float *cs, int d, int row, int col, float theta_scale) {
    const int half = d / 2, quarter = d / 4;
    float th_r = (float)row, th_c = (float)col;
    for (int j = 0; j < half; j++) {
        if (j == quarter) th_c = (float)col; /* the second section starts over (indep_sects) */
        const float th = j < quarter ? th_r : th_c;
        cs[j] = cosf(th);
        cs[half + j] = sinf(th);
        th_r *= theta_scale;
        th_c *= theta_scale;
    }
}

/* Rotates pair j = (x_j, x_{j+d/2}) of each of n_head heads by the angles of cs (cos, then sin). */
static void rope_row(float *x, int n_head, int d, const float *cs) {
    const int half = d / 2;
    const float *sn = cs + half;
    for (int h = 0; h < n_head; h++) {
        float *v = x + (int64_t)h * d;
        for (int j = 0; j < half; j++) {
            const float x0 = v[j], x1 = v[j + half];
            v[j] = x0 * cs[j] - x1 * sn[j];
            v[j + half] = x0 * sn[j] + x1 * cs[j];
        }
    }
}

/* ---- dispatch ------------------------------------------------------------------------------------------------ */

enum { OP_NORM, OP_GELU, OP_ADD, OP_ROPE };

typedef struct rows_job {
    int op;
    float *y;
    const float *x;
    int64_t ldy, ldx, n, rows;
    const float *w, *b;
    float eps;
    int n_head, d;
    const float *cs;
} rows_job;

static void rows_task(void *arg, int ith, int nth) {
    const rows_job *j = arg;
    int64_t r0, r1;
    bd_split(j->rows, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        float *y = j->y + r * j->ldy;
        switch (j->op) {
        case OP_NORM: layernorm_row(y, j->x + r * j->ldx, j->n, j->w, j->b, j->eps); break;
        case OP_GELU: gelu_row(y, j->b, j->n); break;
        case OP_ADD: {
            const float *x = j->x + r * j->ldx;
            for (int64_t i = 0; i < j->n; i++) y[i] = (x[i] + j->b[i]) + y[i];
            break;
        }
        case OP_ROPE: {
            const int64_t E = (int64_t)j->n_head * j->d;
            for (int64_t i = 0; i < 3 * E; i++) y[i] += j->b[i];
            rope_row(y, j->n_head, j->d, j->cs + r * j->d);     /* q */
            rope_row(y + E, j->n_head, j->d, j->cs + r * j->d); /* k */
            break;
        }
        }
    }
}

static void run(bd_threadpool *tp, const rows_job *j) {
    if (j->op == OP_GELU) pthread_once(&gelu_once, gelu_init);
    bd_threadpool_run(j->rows > 1 ? tp : NULL, rows_task, (void *)j);
}

void bd_vit_layernorm(bd_threadpool *tp, float *y, int64_t ldy, const float *x, int64_t ldx, int64_t n, int64_t rows,
                      const float *w, const float *b, float eps) {
    const rows_job j = {OP_NORM, y, x, ldy, ldx, n, rows, w, b, eps, 0, 0, NULL};
    run(tp, &j);
}

void bd_vit_gelu(bd_threadpool *tp, float *y, int64_t n, int64_t rows, const float *b) {
    const rows_job j = {OP_GELU, y, NULL, n, 0, n, rows, NULL, b, 0, 0, 0, NULL};
    run(tp, &j);
}

void bd_vit_add(bd_threadpool *tp, float *h, const float *y, int64_t n, int64_t rows, const float *b) {
    const rows_job j = {OP_ADD, h, y, n, n, n, rows, NULL, b, 0, 0, 0, NULL};
    run(tp, &j);
}

void bd_vit_bias_rope(bd_threadpool *tp, float *qkv, int64_t rows, int n_head, int d, const float *b, const float *cs) {
    const rows_job j = {OP_ROPE, qkv, NULL, 3 * (int64_t)n_head * d, 0, 0, rows, NULL, b, 0, n_head, d, cs};
    run(tp, &j);
}
