/* gdn.c — the Gated DeltaNet recurrence of one sequence (architectures.md §1.7 step 7), the dominant cost of a
 * GDN layer in decode: every token reads and writes each head's S×S state.
 *
 * The state is stored transposed (rm[H_v][S(j)][S(i)]: row j holds column j of M), so all four steps of
 * ggml's order — decay, r_j = row_j·k, row_j += k·δ_j, o_j = row_j·q — work on one contiguous row. They only
 * involve row j, so doing the four steps row by row gives exactly the values of doing each step over the whole
 * state first (ggml's loop order). Better still, row j never needs any other row, across tokens too: the
 * AVX-512 path for S = 64 or 128 keeps a row in registers while a block of tokens passes over it, so the state
 * is read and written once per block of 32 tokens instead of four times per token. Heads are independent and
 * split across threads. */
#include <math.h>
#include <string.h>

#include "tensor/ops.h"
#include "tensor/simd.h"

#if BD_HAVE_X86
#include <immintrin.h>
#endif

typedef struct gdn_job {
    int64_t T;
    int H_k, H_v, S;
    const float *q, *k, *v, *g, *beta;
    int64_t ldq, ldk, ldv, ldo;
    float *state, *o;
    float *const *snap;
} gdn_job;

/* One token, one head: M (S rows of S) updated in place, o[j] written. */
static void gdn_head_scalar(float *M, int S, float eg, float beta, const float *k, const float *q, const float *v,
                            float *o, float scale) {
    for (int j = 0; j < S; j++) {
        float *row = M + (int64_t)j * S;
        float r = 0.0f;
        for (int i = 0; i < S; i++) {
            row[i] *= eg;
            r += row[i] * k[i];
        }
        const float d = (v[j] - r) * beta;
        float s = 0.0f;
        for (int i = 0; i < S; i++) {
            row[i] += k[i] * d;
            s += row[i] * q[i];
        }
        o[j] = s * scale;
    }
}

#if BD_HAVE_X86
/* S a multiple of 16. */
BD_TARGET_AVX512 static void gdn_head_avx512(float *M, int S, float eg, float beta, const float *k, const float *q,
                                             const float *v, float *o, float scale) {
    const __m512 egv = _mm512_set1_ps(eg);
    for (int j = 0; j < S; j++) {
        float *row = M + (int64_t)j * S;
        __m512 r0 = _mm512_setzero_ps(), r1 = _mm512_setzero_ps();
        int i = 0;
        for (; i + 32 <= S; i += 32) {
            __m512 m0 = _mm512_mul_ps(_mm512_loadu_ps(row + i), egv);
            __m512 m1 = _mm512_mul_ps(_mm512_loadu_ps(row + i + 16), egv);
            _mm512_storeu_ps(row + i, m0);
            _mm512_storeu_ps(row + i + 16, m1);
            r0 = _mm512_fmadd_ps(m0, _mm512_loadu_ps(k + i), r0);
            r1 = _mm512_fmadd_ps(m1, _mm512_loadu_ps(k + i + 16), r1);
        }
        for (; i < S; i += 16) {
            __m512 m0 = _mm512_mul_ps(_mm512_loadu_ps(row + i), egv);
            _mm512_storeu_ps(row + i, m0);
            r0 = _mm512_fmadd_ps(m0, _mm512_loadu_ps(k + i), r0);
        }
        const float d = (v[j] - _mm512_reduce_add_ps(_mm512_add_ps(r0, r1))) * beta;
        const __m512 dv = _mm512_set1_ps(d);
        __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
        for (i = 0; i + 32 <= S; i += 32) {
            __m512 m0 = _mm512_fmadd_ps(_mm512_loadu_ps(k + i), dv, _mm512_loadu_ps(row + i));
            __m512 m1 = _mm512_fmadd_ps(_mm512_loadu_ps(k + i + 16), dv, _mm512_loadu_ps(row + i + 16));
            _mm512_storeu_ps(row + i, m0);
            _mm512_storeu_ps(row + i + 16, m1);
            s0 = _mm512_fmadd_ps(m0, _mm512_loadu_ps(q + i), s0);
            s1 = _mm512_fmadd_ps(m1, _mm512_loadu_ps(q + i + 16), s1);
        }
        for (; i < S; i += 16) {
            __m512 m0 = _mm512_fmadd_ps(_mm512_loadu_ps(k + i), dv, _mm512_loadu_ps(row + i));
            _mm512_storeu_ps(row + i, m0);
            s0 = _mm512_fmadd_ps(m0, _mm512_loadu_ps(q + i), s0);
        }
        o[j] = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)) * scale;
    }
}

BD_TARGET_AVX2 static float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* S a multiple of 8. */
BD_TARGET_AVX2 static void gdn_head_avx2(float *M, int S, float eg, float beta, const float *k, const float *q,
                                         const float *v, float *o, float scale) {
    const __m256 egv = _mm256_set1_ps(eg);
    for (int j = 0; j < S; j++) {
        float *row = M + (int64_t)j * S;
        __m256 r0 = _mm256_setzero_ps();
        for (int i = 0; i < S; i += 8) {
            __m256 m0 = _mm256_mul_ps(_mm256_loadu_ps(row + i), egv);
            _mm256_storeu_ps(row + i, m0);
            r0 = _mm256_fmadd_ps(m0, _mm256_loadu_ps(k + i), r0);
        }
        const __m256 dv = _mm256_set1_ps((v[j] - hsum8(r0)) * beta);
        __m256 s0 = _mm256_setzero_ps();
        for (int i = 0; i < S; i += 8) {
            __m256 m0 = _mm256_fmadd_ps(_mm256_loadu_ps(k + i), dv, _mm256_loadu_ps(row + i));
            _mm256_storeu_ps(row + i, m0);
            s0 = _mm256_fmadd_ps(m0, _mm256_loadu_ps(q + i), s0);
        }
        o[j] = hsum8(s0) * scale;
    }
}
#endif

#if BD_HAVE_X86
BD_TARGET_AVX512 static inline float hsum16(__m512 v) {
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}

enum { GDN_TB = 32 }; /* tokens per block: their k and q (2·32·S floats) stay in L1 */

/* Rows of one head for tokens [t0, t0+nt), each row held in NC registers (S = 16·NC) across the tokens. */
BD_TARGET_AVX512 static inline __attribute__((always_inline)) void gdn_rows_reg(const gdn_job *jb, int64_t h,
                                                                               int64_t t0, int64_t nt,
                                                                               const float *eg, float scale,
                                                                               const int NC) {
    const int S = 16 * NC;
    const int64_t kh = h % jb->H_k;
    float *M = jb->state + (size_t)h * S * S;
    for (int j = 0; j < S; j++) {
        __m512 row[8];
        for (int c = 0; c < NC; c++) row[c] = _mm512_loadu_ps(M + (int64_t)j * S + 16 * c);
        for (int64_t t = t0; t < t0 + nt; t++) {
            const float *k = jb->k + t * jb->ldk + kh * S, *q = jb->q + t * jb->ldq + kh * S;
            const __m512 egv = _mm512_set1_ps(eg[t - t0]);
            __m512 r0 = _mm512_setzero_ps(), r1 = _mm512_setzero_ps();
            for (int c = 0; c < NC; c++) {
                row[c] = _mm512_mul_ps(row[c], egv);
                if (c & 1) r1 = _mm512_fmadd_ps(row[c], _mm512_loadu_ps(k + 16 * c), r1);
                else r0 = _mm512_fmadd_ps(row[c], _mm512_loadu_ps(k + 16 * c), r0);
            }
            const float d = (jb->v[t * jb->ldv + h * S + j] - hsum16(_mm512_add_ps(r0, r1))) * jb->beta[t * jb->H_v + h];
            const __m512 dv = _mm512_set1_ps(d);
            __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
            for (int c = 0; c < NC; c++) {
                row[c] = _mm512_fmadd_ps(_mm512_loadu_ps(k + 16 * c), dv, row[c]);
                if (c & 1) s1 = _mm512_fmadd_ps(row[c], _mm512_loadu_ps(q + 16 * c), s1);
                else s0 = _mm512_fmadd_ps(row[c], _mm512_loadu_ps(q + 16 * c), s0);
            }
            jb->o[t * jb->ldo + h * S + j] = hsum16(_mm512_add_ps(s0, s1)) * scale;
            if (jb->snap && jb->snap[t])
                for (int c = 0; c < NC; c++)
                    _mm512_storeu_ps(jb->snap[t] + (size_t)h * S * S + (size_t)j * S + 16 * c, row[c]);
        }
        for (int c = 0; c < NC; c++) _mm512_storeu_ps(M + (int64_t)j * S + 16 * c, row[c]);
    }
}

BD_TARGET_AVX512 static void gdn_rows_128(const gdn_job *jb, int64_t h, int64_t t0, int64_t nt, const float *eg,
                                          float scale) {
    gdn_rows_reg(jb, h, t0, nt, eg, scale, 8);
}
BD_TARGET_AVX512 static void gdn_rows_64(const gdn_job *jb, int64_t h, int64_t t0, int64_t nt, const float *eg,
                                         float scale) {
    gdn_rows_reg(jb, h, t0, nt, eg, scale, 4);
}
#endif

typedef void (*gdn_head_fn)(float *, int, float, float, const float *, const float *, const float *, float *, float);

static void gdn_task(void *p, int ith, int nth) {
    const gdn_job *j = p;
    const int S = j->S;
    gdn_head_fn fn = gdn_head_scalar;
#if BD_HAVE_X86
    int lv = bd_simd();
    if (lv == BD_SIMD_AVX512 && S % 16 == 0) fn = gdn_head_avx512;
    else if (lv >= BD_SIMD_AVX2 && S % 8 == 0) fn = gdn_head_avx2;
#endif
    const float scale = 1.0f / sqrtf((float)S);
    const size_t ss = (size_t)S * (size_t)S;
    int64_t h0, h1;
    bd_split(j->H_v, ith, nth, &h0, &h1);
#if BD_HAVE_X86
    if (lv == BD_SIMD_AVX512 && (S == 128 || S == 64)) {
        float eg[GDN_TB];
        for (int64_t h = h0; h < h1; h++)
            for (int64_t t0 = 0; t0 < j->T; t0 += GDN_TB) {
                const int64_t nt = j->T - t0 < GDN_TB ? j->T - t0 : GDN_TB;
                for (int64_t t = 0; t < nt; t++) eg[t] = expf(j->g[(t0 + t) * j->H_v + h]);
                if (S == 128) gdn_rows_128(j, h, t0, nt, eg, scale);
                else gdn_rows_64(j, h, t0, nt, eg, scale);
            }
        return;
    }
#endif
    for (int64_t h = h0; h < h1; h++) {
        const int64_t kh = h % j->H_k;
        float *M = j->state + (size_t)h * ss;
        for (int64_t t = 0; t < j->T; t++) {
            const float eg = expf(j->g[t * j->H_v + h]);
            fn(M, S, eg, j->beta[t * j->H_v + h], j->k + t * j->ldk + kh * S, j->q + t * j->ldq + kh * S,
               j->v + t * j->ldv + h * S, j->o + t * j->ldo + h * S, scale);
            if (j->snap && j->snap[t]) memcpy(j->snap[t] + (size_t)h * ss, M, ss * sizeof(float));
        }
    }
}

void bd_gdn(bd_threadpool *tp, int64_t T, int H_k, int H_v, int S, const float *q, int64_t ldq, const float *k,
            int64_t ldk, const float *v, int64_t ldv, const float *g, const float *beta, float *state, float *o,
            int64_t ldo, float *const *snap) {
    gdn_job j = {T, H_k, H_v, S, q, k, v, g, beta, ldq, ldk, ldv, ldo, state, o, snap};
    bd_threadpool_run(H_v > 1 ? tp : NULL, gdn_task, &j);
}
