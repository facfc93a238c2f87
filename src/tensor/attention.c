/* attention.c — softmax attention of query tokens over explicit lists of K/V cells (architectures.md §0.2).
 *
 * The memory layer decides which cells each query sees (order-based causal masking, sequences, shared
 * prefixes) and passes the list; this kernel only computes o = softmax(scale·q·Kᵀ)·V over it. Work items are
 * (query token, KV head) pairs split contiguously across threads; inside an item the n_head/n_head_kv query
 * heads that share the KV head are done together, so each K and V row is loaded once per item. Scores go to
 * per-thread scratch (two passes: scores, then softmax, then the weighted sum of V), as the non-flash path of
 * ggml computes it. K/V rows may be F32 or F16 (converted on the fly; Q stays F32). */
#include <math.h>
#include <string.h>

#include "tensor/dot.h"
#include "tensor/lanes_x86.h"
#include "tensor/ops.h"
#include "tensor/simd.h"
#include "tensor/types.h"
#include "tensor/vexp.h"

#if BD_HAVE_X86
#include <immintrin.h>
#endif

/* ---- F16 K/V rows: dot(q, k) and o += p·v for the G <= 4 query heads that share a row ----
 * Each head keeps one chain of the vector width over the row (its own order: F16 K/V are held to a tolerance,
 * llama.cpp's own paths disagree there); the row is converted once for all G heads, and the G chains run side
 * by side (one chain alone waits on its own fused multiply-adds). q_g = q + g·qstride, o_g = o + g·n. */

static void dot_f16_c_grp(const float *q, int64_t qstride, const uint16_t *b, int n, int G, float *out) {
    for (int g = 0; g < G; g++) {
        float s = 0;
        for (int i = 0; i < n; i++) s += q[g * qstride + i] * bd_fp16_to_fp32(b[i]);
        out[g] = s;
    }
}
static void axpy_f16_c_grp(float *o, const float *p, const uint16_t *v, int n, int G) {
    for (int g = 0; g < G; g++)
        for (int i = 0; i < n; i++) o[g * n + i] += p[g] * bd_fp16_to_fp32(v[i]);
}

#if BD_HAVE_X86
BD_TARGET_AVX512 static void dot_f16_512_grp(const float *q, int64_t qstride, const uint16_t *b, int n, int G, float *out) {
    __m512 s[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        const __m512 kb = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, b + i));
        for (int g = 0; g < G; g++) s[g] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + g * qstride + i), kb, s[g]);
    }
    for (int g = 0; g < G; g++) out[g] = _mm512_reduce_add_ps(s[g]);
}
BD_TARGET_AVX512 static void axpy_f16_512_grp(float *o, const float *p, const uint16_t *v, int n, int G) {
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        const __m512 vv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, v + i));
        for (int g = 0; g < G; g++)
            _mm512_mask_storeu_ps(o + g * n + i, m,
                                  _mm512_fmadd_ps(_mm512_set1_ps(p[g]), vv, _mm512_maskz_loadu_ps(m, o + g * n + i)));
    }
}

BD_TARGET_AVX2 static float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
BD_TARGET_AVX2 static void dot_f16_256_grp(const float *q, int64_t qstride, const uint16_t *b, int n, int G, float *out) {
    __m256 s[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 kb = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + i)));
        for (int g = 0; g < G; g++) s[g] = _mm256_fmadd_ps(_mm256_loadu_ps(q + g * qstride + i), kb, s[g]);
    }
    for (int g = 0; g < G; g++) {
        float r = hsum8(s[g]);
        for (int e = i; e < n; e++) r += q[g * qstride + e] * bd_fp16_to_fp32(b[e]);
        out[g] = r;
    }
}
BD_TARGET_AVX2 static void axpy_f16_256_grp(float *o, const float *p, const uint16_t *v, int n, int G) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 vv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + i)));
        for (int g = 0; g < G; g++)
            _mm256_storeu_ps(o + g * n + i, _mm256_fmadd_ps(_mm256_set1_ps(p[g]), vv, _mm256_loadu_ps(o + g * n + i)));
    }
    for (int g = 0; g < G; g++)
        for (int e = i; e < n; e++) o[g * n + e] += p[g] * bd_fp16_to_fp32(v[e]);
}
#endif

/* ---- F32 K/V in ggml's float order (non-flash path, tensor dumps agree bit for bit) ----
 * ggml pads each query's row of cells to a multiple of 256 with masked (-inf) cells; in the single-sequence
 * case braid's list index of a cell is its row position there, so the order below is ggml's. With W the
 * vector width of the ggml build (16 lanes in the AVX-512 builds, paired with braid's avx512 level and the
 * portable code; 8 in the AVX2 builds, paired with the avx2 level; 4 in the arm64 builds, the NEON levels):
 *   scores: vec_dot_f32(q, k) (dot.h's F32 order of that level) times scale;
 *   softmax: every element with the vector expf, summed per W in float (the width's tree), each in double;
 *   p·V: per output element, lanes over the cells: cell i goes to accumulator i % K, fused, then combined
 *   as ggml combines them. K = W for a batch of several tokens (llamafile's tinyBLAS: one W-lane chain, then
 *   hsum's tree) and K = 4W for a single token (vec_dot_f32: 4 chains of W lanes, chain (i / W) % 4, combined
 *   (c0 + c2) + (c1 + c3), then vec_dot's tree: halving for 16 lanes; lo + hi then two pairwise adds for 8;
 *   (l0 + l1) + (l2 + l3) for 4, where tinyBLAS starts at 4 tokens: below that, vec_dot's K = 4W). */

static float exp_sum16(float *y, int m) { /* y[0..m) = exp in place; the padded 16-lane tree sum */
    float v[16] = {0}, w[8], u[4];
    for (int l = 0; l < m; l++) v[l] = y[l] = bd_exp_ggml(y[l]);
    for (int l = 0; l < 8; l++) w[l] = v[l] + v[l + 8];
    for (int l = 0; l < 4; l++) u[l] = w[l] + w[l + 4];
    return (u[0] + u[2]) + (u[1] + u[3]);
}

static float exp_sum4(float *y, int m) { /* the same for 4 lanes (arm64: vaddvq's (a0 + a1) + (a2 + a3)) */
    float v[4] = {0};
    for (int l = 0; l < m; l++) v[l] = y[l] = bd_exp_ggml(y[l]);
    return (v[0] + v[1]) + (v[2] + v[3]);
}

static void softmax_pad_c(float *y, int64_t n, int W) {
    float max = -INFINITY;
    for (int64_t i = 0; i < n; i++) max = y[i] > max ? y[i] : max;
    const int step = W == 4 ? 4 : 16;
    double sum = 0;
    for (int64_t i = 0; i < n; i += step) {
        const int m = n - i < step ? (int)(n - i) : step;
        for (int l = 0; l < m; l++) y[i + l] -= max;
        sum += (double)(step == 4 ? exp_sum4(y + i, m) : exp_sum16(y + i, m));
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) y[i] *= inv;
}

/* o[0..hd) = sum_i p[i] · v_i with K accumulators per output element, combined for width W (see above). */
static void pv_c(float *o, const float *p, const char *vbase, const int32_t *cells, int64_t n, size_t vstride,
                 int hd, int K, int W) {
    float acc[64];
    for (int d = 0; d < hd; d++) {
        for (int l = 0; l < K; l++) acc[l] = 0;
        for (int64_t i = 0; i < n; i++) {
            const float *v = (const float *)(const void *)(vbase + (size_t)cells[i] * vstride);
            acc[i % K] = fmaf(p[i], v[d], acc[i % K]);
        }
        float x[16], w[8], u[4];
        for (int l = 0; l < W; l++)
            x[l] = K == 4 * W ? (acc[l] + acc[2 * W + l]) + (acc[W + l] + acc[3 * W + l]) : acc[l];
        if (W == 16) {
            for (int l = 0; l < 8; l++) w[l] = x[l] + x[l + 8];
            for (int l = 0; l < 4; l++) u[l] = w[l] + w[l + 4];
            o[d] = (u[0] + u[2]) + (u[1] + u[3]);
        } else if (W == 4) {
            o[d] = (x[0] + x[1]) + (x[2] + x[3]);
        } else {
            for (int l = 0; l < 4; l++) u[l] = x[l] + x[l + 4];
            o[d] = K == 4 * W ? (u[0] + u[1]) + (u[2] + u[3]) : (u[0] + u[2]) + (u[1] + u[3]);
        }
    }
}

#if BD_HAVE_X86
/* The AVX2 builds' softmax over a row of n (the padding: exp(-inf) = 0 lanes). */
BD_TARGET_AVX2 static void softmax_pad_256(float *y, int64_t n) {
    float max = -INFINITY;
    for (int64_t i = 0; i < n; i++) max = y[i] > max ? y[i] : max;
    const __m256 mx = _mm256_set1_ps(max);
    double sum = 0;
    for (int64_t i = 0; i < n; i += 8) {
        const int m = n - i < 8 ? (int)(n - i) : 8;
        float buf[8] = {0};
        for (int l = 0; l < m; l++) buf[l] = y[i + l];
        const __m256 live = _mm256_cmp_ps(_mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_ps((float)m), _CMP_LT_OQ);
        const __m256 e = _mm256_and_ps(live, bd_exp256(_mm256_sub_ps(_mm256_loadu_ps(buf), mx)));
        _mm256_storeu_ps(buf, e);
        for (int l = 0; l < m; l++) y[i + l] = buf[l];
        sum += (double)bd_hsum8(e);
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) y[i] *= inv;
}

/* p·V in the AVX2 builds' order, hd a multiple of 8; K 8 (tinyBLAS) or 32 (vec_dot_f32). */
BD_TARGET_AVX2 static inline __attribute__((always_inline)) void pv_256_k(float *o, const float *p, const char *vbase,
                                                                         const int32_t *cells, int64_t n,
                                                                         size_t vstride, int hd, const int K) {
    for (int d = 0; d < hd; d += 8) {
        __m256 acc[32];
        for (int l = 0; l < K; l++) acc[l] = _mm256_setzero_ps();
        int64_t i = 0;
        for (; i + K <= n; i += K)
            for (int l = 0; l < K; l++) {
                const float *v = (const float *)(const void *)(vbase + (size_t)cells[i + l] * vstride);
                acc[l] = _mm256_fmadd_ps(_mm256_set1_ps(p[i + l]), _mm256_loadu_ps(v + d), acc[l]);
            }
        for (int l = 0; i + l < n; l++) {
            const float *v = (const float *)(const void *)(vbase + (size_t)cells[i + l] * vstride);
            acc[l] = _mm256_fmadd_ps(_mm256_set1_ps(p[i + l]), _mm256_loadu_ps(v + d), acc[l]);
        }
        __m256 x[8];
        for (int l = 0; l < 8; l++)
            x[l] = K == 32 ? _mm256_add_ps(_mm256_add_ps(acc[l], acc[16 + l]), _mm256_add_ps(acc[8 + l], acc[24 + l]))
                           : acc[l];
        for (int l = 0; l < 4; l++) x[l] = _mm256_add_ps(x[l], x[l + 4]);
        const __m256 r = K == 32 ? _mm256_add_ps(_mm256_add_ps(x[0], x[1]), _mm256_add_ps(x[2], x[3]))
                                 : _mm256_add_ps(_mm256_add_ps(x[0], x[2]), _mm256_add_ps(x[1], x[3]));
        _mm256_storeu_ps(o + d, r);
    }
}
BD_TARGET_AVX2 static void pv_256(float *o, const float *p, const char *vbase, const int32_t *cells, int64_t n,
                                  size_t vstride, int hd, int K) {
    if (K == 32) pv_256_k(o, p, vbase, cells, n, vstride, hd, 32);
    else pv_256_k(o, p, vbase, cells, n, vstride, hd, 8);
}
#endif

#if BD_HAVE_X86
BD_TARGET_AVX512 static void softmax_pad_512(float *y, int64_t n) {
    __m512 mx = _mm512_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        mx = _mm512_mask_max_ps(mx, m, mx, _mm512_maskz_loadu_ps(m, y + i));
    }
    const __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    double sum = 0;
    for (i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        const __m512 e = _mm512_maskz_mov_ps(m, bd_exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, y + i), max)));
        _mm512_mask_storeu_ps(y + i, m, e);
        sum += (double)_mm512_reduce_add_ps(e);
    }
    const __m512 inv = _mm512_set1_ps((float)(1.0 / sum));
    for (i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + i), inv));
    }
}

/* hd a multiple of 16; K 16 or 64 (constant after inlining). */
BD_TARGET_AVX512 static inline __attribute__((always_inline)) void pv_512_k(float *o, const float *p, const char *vbase,
                                                                           const int32_t *cells, int64_t n,
                                                                           size_t vstride, int hd, const int K) {
    for (int d = 0; d < hd; d += 16) {
        __m512 acc[64];
        for (int l = 0; l < K; l++) acc[l] = _mm512_setzero_ps();
        int64_t i = 0;
        for (; i + K <= n; i += K)
            for (int l = 0; l < K; l++) {
                const float *v = (const float *)(const void *)(vbase + (size_t)cells[i + l] * vstride);
                acc[l] = _mm512_fmadd_ps(_mm512_set1_ps(p[i + l]), _mm512_loadu_ps(v + d), acc[l]);
            }
        for (int l = 0; i + l < n; l++) {
            const float *v = (const float *)(const void *)(vbase + (size_t)cells[i + l] * vstride);
            acc[l] = _mm512_fmadd_ps(_mm512_set1_ps(p[i + l]), _mm512_loadu_ps(v + d), acc[l]);
        }
        __m512 x[16];
        for (int l = 0; l < 16; l++)
            x[l] = K == 64 ? _mm512_add_ps(_mm512_add_ps(acc[l], acc[32 + l]), _mm512_add_ps(acc[16 + l], acc[48 + l]))
                           : acc[l];
        for (int l = 0; l < 8; l++) x[l] = _mm512_add_ps(x[l], x[l + 8]);
        for (int l = 0; l < 4; l++) x[l] = _mm512_add_ps(x[l], x[l + 4]);
        _mm512_storeu_ps(o + d, _mm512_add_ps(_mm512_add_ps(x[0], x[2]), _mm512_add_ps(x[1], x[3])));
    }
}
BD_TARGET_AVX512 static void pv_512(float *o, const float *p, const char *vbase, const int32_t *cells, int64_t n,
                                    size_t vstride, int hd, int K) {
    if (K == 64) pv_512_k(o, p, vbase, cells, n, vstride, hd, 64);
    else pv_512_k(o, p, vbase, cells, n, vstride, hd, 16);
}
#endif

typedef struct attn_fns { /* the F16 row primitives of the SIMD level */
    void (*dot16g)(const float *, int64_t, const uint16_t *, int, int, float *);
    void (*axpy16g)(float *, const float *, const uint16_t *, int, int);
} attn_fns;

static attn_fns pick_fns(void) {
#if BD_HAVE_X86
    switch (bd_simd()) {
    case BD_SIMD_AVX512: return (attn_fns){dot_f16_512_grp, axpy_f16_512_grp};
    case BD_SIMD_AVX2: return (attn_fns){dot_f16_256_grp, axpy_f16_256_grp};
    default: break;
    }
#endif
    return (attn_fns){dot_f16_c_grp, axpy_f16_c_grp};
}

typedef struct attn_job {
    const bd_attn *a;
    attn_fns f;
    bd_vec_dot_fn dot; /* F32 vec_dot (ggml's order) */
    int64_t T, ldq, q_head_stride, ldo;
    const float *q;
    const int32_t *const *vis;
    const int32_t *n_vis;
    float *o;
    float *scores; /* [nth][grp][max_vis] */
    int64_t max_vis;
} attn_job;

static void attn_task(void *p, int ith, int nth) {
    const attn_job *j = p;
    const bd_attn *a = j->a;
    const int grp = a->n_head / a->n_head_kv, hd = a->head_dim;
    const int f16 = a->kv_type == BD_TYPE_F16;
    float *sc = j->scores + (size_t)ith * (size_t)grp * (size_t)j->max_vis;
    int64_t i0, i1;
    bd_split(j->T * a->n_head_kv, ith, nth, &i0, &i1);
    for (int64_t it = i0; it < i1; it++) {
        const int64_t t = it / a->n_head_kv;
        const int kvh = (int)(it % a->n_head_kv);
        const int32_t *cells = j->vis[t];
        const int64_t n = j->n_vis[t];
        float *o0 = j->o + t * j->ldo + (int64_t)kvh * grp * hd;
        memset(o0, 0, (size_t)grp * (size_t)hd * sizeof(float));
        if (n <= 0) continue;
        const float *q0 = j->q + t * j->ldq + (int64_t)kvh * grp * j->q_head_stride;
        const char *kbase = (const char *)a->k + (size_t)kvh * a->k_head_bytes;
        const char *vbase = (const char *)a->v + (size_t)kvh * a->v_head_bytes;
        if (!f16) { /* ggml's order (above) */
            for (int64_t i = 0; i < n; i++) {
                const float *kr = (const float *)(const void *)(kbase + (size_t)cells[i] * a->k_cell_bytes);
                for (int g = 0; g < grp; g++) {
                    float d;
                    j->dot(hd, &d, q0 + g * j->q_head_stride, kr);
                    sc[(int64_t)g * j->max_vis + i] = d * a->scale;
                }
            }
#if BD_HAVE_NEON /* arm64: 4 lanes; ggml's NEON tinyBLAS takes F32 products from 4 tokens */
            const int W = bd_simd() == BD_SIMD_SCALAR ? 16 : 4, K = j->T < (W == 4 ? 4 : 2) ? 4 * W : W;
#else
            const int W = bd_simd() == BD_SIMD_AVX2 ? 8 : 16; /* the paired ggml build's vector width */
            const int K = j->T == 1 ? 4 * W : W;
#endif
            for (int g = 0; g < grp; g++) {
                float *pg = sc + (int64_t)g * j->max_vis;
#if BD_HAVE_X86
                if (bd_simd() == BD_SIMD_AVX512 && hd % 16 == 0) {
                    softmax_pad_512(pg, n);
                    pv_512(o0 + g * hd, pg, vbase, cells, n, a->v_cell_bytes, hd, K);
                    continue;
                }
                if (W == 8) {
                    softmax_pad_256(pg, n);
                    if (hd % 8 == 0) pv_256(o0 + g * hd, pg, vbase, cells, n, a->v_cell_bytes, hd, K);
                    else pv_c(o0 + g * hd, pg, vbase, cells, n, a->v_cell_bytes, hd, K, W);
                    continue;
                }
#endif
                softmax_pad_c(pg, n, W);
                pv_c(o0 + g * hd, pg, vbase, cells, n, a->v_cell_bytes, hd, K, W);
            }
            continue;
        }
        /* F16 K/V: each row is converted once for up to 4 of the heads that share it */
        for (int64_t i = 0; i < n; i++) {
            const uint16_t *kr = (const uint16_t *)(const void *)(kbase + (size_t)cells[i] * a->k_cell_bytes);
            for (int g0 = 0; g0 < grp; g0 += 4) {
                const int G = grp - g0 < 4 ? grp - g0 : 4;
                float d[4];
                j->f.dot16g(q0 + g0 * j->q_head_stride, j->q_head_stride, kr, hd, G, d);
                for (int g = 0; g < G; g++) sc[(int64_t)(g0 + g) * j->max_vis + i] = d[g] * a->scale;
            }
        }
        for (int g = 0; g < grp; g++) bd_softmax(sc + (int64_t)g * j->max_vis, sc + (int64_t)g * j->max_vis, n);
        for (int64_t i = 0; i < n; i++) {
            const uint16_t *vr = (const uint16_t *)(const void *)(vbase + (size_t)cells[i] * a->v_cell_bytes);
            for (int g0 = 0; g0 < grp; g0 += 4) {
                const int G = grp - g0 < 4 ? grp - g0 : 4;
                float pr[4];
                for (int g = 0; g < G; g++) pr[g] = sc[(int64_t)(g0 + g) * j->max_vis + i];
                j->f.axpy16g(o0 + g0 * hd, pr, vr, hd, G);
            }
        }
    }
}

size_t bd_attention_scratch_size(const bd_attn *a, int64_t max_visible, int n_threads) {
    if (a->n_head_kv <= 0 || max_visible < 0 || n_threads < 1) return 0;
    return (size_t)n_threads * (size_t)(a->n_head / a->n_head_kv) * (size_t)(max_visible > 0 ? max_visible : 1) *
           sizeof(float);
}

braid_status bd_attention(bd_threadpool *tp, const bd_attn *a, int64_t T, const float *q, int64_t ldq,
                          int64_t q_head_stride, const int32_t *const *vis, const int32_t *n_vis, float *o,
                          int64_t ldo, void *scratch, size_t scratch_size) {
    if (a->n_head <= 0 || a->n_head_kv <= 0 || a->n_head % a->n_head_kv || a->head_dim <= 0)
        return bd_error(BRAID_E_INVALID, "attention: %d heads, %d kv heads, head size %d", a->n_head, a->n_head_kv,
                        a->head_dim);
    if (a->kv_type != BD_TYPE_F32 && a->kv_type != BD_TYPE_F16)
        return bd_error(BRAID_E_INVALID, "attention: K/V type %u (F32 or F16 only)", a->kv_type);
    int64_t max_vis = 1;
    for (int64_t t = 0; t < T; t++) max_vis = n_vis[t] > max_vis ? n_vis[t] : max_vis;
    const int nth = bd_threadpool_size(tp);
    size_t need = bd_attention_scratch_size(a, max_vis, nth);
    if (!scratch || scratch_size < need)
        return bd_error(BRAID_E_INVALID, "attention: scratch of %zu bytes, %zu needed", scratch_size, need);
    attn_job j = {a,  pick_fns(), bd_dot_traits_get(BD_TYPE_F32)->vec_dot, T, ldq, q_head_stride, ldo, q, vis, n_vis, o,
                  scratch, max_vis};
    bd_threadpool_run(T * a->n_head_kv > 1 ? tp : NULL, attn_task, &j);
    return BRAID_OK;
}
