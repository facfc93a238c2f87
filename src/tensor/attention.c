/* attention.c — softmax attention of query tokens over explicit lists of K/V cells (architectures.md §0.2).
 *
 * The memory layer decides which cells each query sees (order-based causal masking, sequences, shared
 * prefixes) and passes the list; this kernel only computes o = softmax(scale·q·Kᵀ)·V over it. Work items are
 * (query token, KV head) pairs split contiguously across threads; inside an item the n_head/n_head_kv query
 * heads that share the KV head are done together, so each K and V row is loaded once per item. Scores go to
 * per-thread scratch (two passes: scores, then softmax, then the weighted sum of V), as the non-flash path of
 * ggml computes it. K/V rows may be F32 or F16 (converted on the fly; Q stays F32). */
#include <string.h>

#include "tensor/ops.h"
#include "tensor/simd.h"
#include "tensor/types.h"

#if BD_HAVE_X86
#include <immintrin.h>
#endif

/* ---- row primitives: dot(q, k) and o += p·v for F32 and F16 rows ---- */

static float dot_f32_c(const float *a, const float *b, int n) {
    float s = 0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}
static float dot_f16_c(const float *a, const uint16_t *b, int n) {
    float s = 0;
    for (int i = 0; i < n; i++) s += a[i] * bd_fp16_to_fp32(b[i]);
    return s;
}
static void axpy_f32_c(float *o, float p, const float *v, int n) {
    for (int i = 0; i < n; i++) o[i] += p * v[i];
}
static void axpy_f16_c(float *o, float p, const uint16_t *v, int n) {
    for (int i = 0; i < n; i++) o[i] += p * bd_fp16_to_fp32(v[i]);
}

#if BD_HAVE_X86
BD_TARGET_AVX512 static float dot_f32_512(const float *a, const float *b, int n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    for (; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}
BD_TARGET_AVX512 static float dot_f16_512(const float *a, const uint16_t *b, int n) {
    __m512 s0 = _mm512_setzero_ps();
    int i = 0;
    for (; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 kb = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, b + i));
        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), kb, s0);
    }
    return _mm512_reduce_add_ps(s0);
}
BD_TARGET_AVX512 static void axpy_f32_512(float *o, float p, const float *v, int n) {
    __m512 pv = _mm512_set1_ps(p);
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 r = _mm512_fmadd_ps(pv, _mm512_maskz_loadu_ps(m, v + i), _mm512_maskz_loadu_ps(m, o + i));
        _mm512_mask_storeu_ps(o + i, m, r);
    }
}
BD_TARGET_AVX512 static void axpy_f16_512(float *o, float p, const uint16_t *v, int n) {
    __m512 pv = _mm512_set1_ps(p);
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 vv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, v + i));
        _mm512_mask_storeu_ps(o + i, m, _mm512_fmadd_ps(pv, vv, _mm512_maskz_loadu_ps(m, o + i)));
    }
}

BD_TARGET_AVX2 static float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
BD_TARGET_AVX2 static float dot_f32_256(const float *a, const float *b, int n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float s = hsum8(_mm256_add_ps(s0, s1));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}
BD_TARGET_AVX2 static float dot_f16_256(const float *a, const uint16_t *b, int n) {
    __m256 s0 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + i))), s0);
    float s = hsum8(s0);
    for (; i < n; i++) s += a[i] * bd_fp16_to_fp32(b[i]);
    return s;
}
BD_TARGET_AVX2 static void axpy_f32_256(float *o, float p, const float *v, int n) {
    __m256 pv = _mm256_set1_ps(p);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(o + i, _mm256_fmadd_ps(pv, _mm256_loadu_ps(v + i), _mm256_loadu_ps(o + i)));
    for (; i < n; i++) o[i] += p * v[i];
}
BD_TARGET_AVX2 static void axpy_f16_256(float *o, float p, const uint16_t *v, int n) {
    __m256 pv = _mm256_set1_ps(p);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 vv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + i)));
        _mm256_storeu_ps(o + i, _mm256_fmadd_ps(pv, vv, _mm256_loadu_ps(o + i)));
    }
    for (; i < n; i++) o[i] += p * bd_fp16_to_fp32(v[i]);
}
#endif

typedef struct attn_fns {
    float (*dot32)(const float *, const float *, int);
    float (*dot16)(const float *, const uint16_t *, int);
    void (*axpy32)(float *, float, const float *, int);
    void (*axpy16)(float *, float, const uint16_t *, int);
} attn_fns;

static attn_fns pick_fns(void) {
#if BD_HAVE_X86
    switch (bd_simd()) {
    case BD_SIMD_AVX512: return (attn_fns){dot_f32_512, dot_f16_512, axpy_f32_512, axpy_f16_512};
    case BD_SIMD_AVX2: return (attn_fns){dot_f32_256, dot_f16_256, axpy_f32_256, axpy_f16_256};
    default: break;
    }
#endif
    return (attn_fns){dot_f32_c, dot_f16_c, axpy_f32_c, axpy_f16_c};
}

typedef struct attn_job {
    const bd_attn *a;
    attn_fns f;
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
        for (int64_t i = 0; i < n; i++) {
            const void *kr = kbase + (size_t)cells[i] * a->k_cell_bytes;
            for (int g = 0; g < grp; g++) {
                const float *qh = q0 + g * j->q_head_stride;
                float d = f16 ? j->f.dot16(qh, kr, hd) : j->f.dot32(qh, kr, hd);
                sc[(int64_t)g * j->max_vis + i] = d * a->scale;
            }
        }
        for (int g = 0; g < grp; g++) bd_softmax(sc + (int64_t)g * j->max_vis, sc + (int64_t)g * j->max_vis, n);
        for (int64_t i = 0; i < n; i++) {
            const void *vr = vbase + (size_t)cells[i] * a->v_cell_bytes;
            for (int g = 0; g < grp; g++) {
                float pr = sc[(int64_t)g * j->max_vis + i];
                if (f16) j->f.axpy16(o0 + g * hd, pr, vr, hd);
                else j->f.axpy32(o0 + g * hd, pr, vr, hd);
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
    attn_job j = {a, pick_fns(), T, ldq, q_head_stride, ldo, q, vis, n_vis, o, scratch, max_vis};
    bd_threadpool_run(T * a->n_head_kv > 1 ? tp : NULL, attn_task, &j);
    return BRAID_OK;
}
