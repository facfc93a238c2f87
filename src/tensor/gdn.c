/* gdn.c — the Gated DeltaNet recurrence of one sequence (architectures.md §1.7 step 7), the dominant cost of a
 * GDN layer in decode: every token reads and writes each head's S×S state.
 *
 * The state is stored transposed (rm[H_v][S(j)][S(i)]: row j holds column j of M), so all four steps of
 * ggml's order — decay, r_j = row_j·k, row_j += k·δ_j, o_j = row_j·q — work on one contiguous row. They only
 * involve row j, so doing the four steps row by row gives exactly the values of doing each step over the whole
 * state first (ggml's loop order). Better still, row j never needs any other row, across tokens too: the
 * AVX-512 path for S = 64 or 128 keeps a row in registers while a block of tokens passes over it (the AVX2
 * and NEON paths two rows in L1), so the state is read and written once per block of 32 tokens instead of four
 * times per token. Heads are independent and
 * split across threads. Every float operation is ggml's (ggml_compute_forward_gated_delta_net): decay by
 * expf(g), the two dot products in vec_dot_f32's order, the update fused, so the bits are llama.cpp's. */
#include <math.h>
#include <string.h>

#include "tensor/dot.h"
#include "tensor/lanes_x86.h"
#include "tensor/ops.h"
#include "tensor/types.h"
#include "tensor/simd.h"

#if BD_HAVE_X86
#include <immintrin.h>
#endif
#if BD_HAVE_NEON
#include <arm_neon.h>
#endif

typedef struct gdn_job {
    int64_t T;
    int H_k, H_v, S;
    const float *q, *k, *v, *g, *beta;
    int64_t ldq, ldk, ldv, ldo;
    const float *state_in; /* the state before the run: state itself, or a separate buffer read once */
    float *state, *o;
    float *const *snap;
} gdn_job;

/* One token, one head: M (S rows of S) updated in place, o[j] written. The two row dot products are ggml's
 * vec_dot_f32 (dot: the F32 vec_dot of dot.h, which follows its order), the update a fused multiply-add. */
static void gdn_head(float *M, int S, float eg, float beta, const float *k, const float *q, const float *v, float *o,
                     float scale, bd_vec_dot_fn dot) {
    for (int j = 0; j < S; j++) {
        float *row = M + (int64_t)j * S;
        for (int i = 0; i < S; i++) row[i] *= eg;
        float r;
        dot(S, &r, row, k);
        const float d = (v[j] - r) * beta;
        for (int i = 0; i < S; i++) row[i] = fmaf(k[i], d, row[i]);
        float s;
        dot(S, &s, row, q);
        o[j] = s * scale;
    }
}

#if BD_HAVE_X86
/* gdn_head with the decay and the update 8 lanes at a time (elementwise, so the same bits; the scalar loop's
 * fmaf is a libm call where the build does not target FMA: ~5% of an AVX2 prompt). The dot products stay the
 * level's vec_dot, whatever order it follows. */
BD_TARGET_AVX2 static void gdn_head_avx2(float *M, int S, float eg, float beta, const float *k, const float *q,
                                         const float *v, float *o, float scale, bd_vec_dot_fn dot) {
    const __m256 egv = _mm256_set1_ps(eg);
    for (int j = 0; j < S; j++) {
        float *row = M + (int64_t)j * S;
        int i = 0;
        for (; i + 8 <= S; i += 8) _mm256_storeu_ps(row + i, _mm256_mul_ps(_mm256_loadu_ps(row + i), egv));
        for (; i < S; i++) row[i] *= eg;
        float r;
        dot(S, &r, row, k);
        const float d = (v[j] - r) * beta;
        const __m256 dv = _mm256_set1_ps(d);
        for (i = 0; i + 8 <= S; i += 8)
            _mm256_storeu_ps(row + i, _mm256_fmadd_ps(_mm256_loadu_ps(k + i), dv, _mm256_loadu_ps(row + i)));
        for (; i < S; i++) row[i] = fmaf(k[i], d, row[i]);
        float s;
        dot(S, &s, row, q);
        o[j] = s * scale;
    }
}

BD_TARGET_AVX512 static inline float hsum16(__m512 v) {
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}

/* Rows of one head for tokens [t0, t0+nt), each row held in NC registers (S = 16·NC) across the tokens. Two rows
 * advance together: one row's token-to-token chain (dot product, reduction, update) is latency-bound, and the
 * other row's work fills its gaps (512 tokens of 16 heads of 128 on one Zen 5 core: 19.5 ms of CPU with one
 * row at a time, 13.1 ms with two; four rows no longer fit the registers). */
BD_TARGET_AVX512 static inline __attribute__((always_inline)) void gdn_rows_reg(const gdn_job *jb, int64_t h,
                                                                               int64_t t0, int64_t nt,
                                                                               const float *eg, float scale,
                                                                               const int NC) {
    const int S = 16 * NC;
    const int64_t kh = h % jb->H_k;
    float *M = jb->state + (size_t)h * S * S;
    const float *Min = (t0 == 0 ? jb->state_in : jb->state) + (size_t)h * S * S;
    for (int j = 0; j < S; j += 2) {
        __m512 row[2][8];
        for (int r = 0; r < 2; r++)
            for (int c = 0; c < NC; c++) row[r][c] = _mm512_loadu_ps(Min + (int64_t)(j + r) * S + 16 * c);
        for (int64_t t = t0; t < t0 + nt; t++) {
            const float *k = jb->k + t * jb->ldk + kh * S, *q = jb->q + t * jb->ldq + kh * S;
            const __m512 egv = _mm512_set1_ps(eg[t - t0]);
            /* The dot products in ggml's vec_dot_f32 order (dot.h): chunk c of 16 goes to chain c % 4, the
             * first of each chain a plain product; then (a0 + a2) + (a1 + a3) and the 16-lane tree. */
            __m512 a[2][4];
            for (int c = 0; c < NC; c++) {
                const __m512 kc = _mm512_loadu_ps(k + 16 * c);
                for (int r = 0; r < 2; r++) {
                    row[r][c] = _mm512_mul_ps(row[r][c], egv);
                    a[r][c & 3] = c < 4 ? _mm512_mul_ps(row[r][c], kc) : _mm512_fmadd_ps(row[r][c], kc, a[r][c & 3]);
                }
            }
            __m512 dv[2];
            for (int r = 0; r < 2; r++) {
                const float rr = hsum16(_mm512_add_ps(_mm512_add_ps(a[r][0], a[r][2]), _mm512_add_ps(a[r][1], a[r][3])));
                dv[r] = _mm512_set1_ps((jb->v[t * jb->ldv + h * S + j + r] - rr) * jb->beta[t * jb->H_v + h]);
            }
            for (int c = 0; c < NC; c++) {
                const __m512 kc = _mm512_loadu_ps(k + 16 * c), qc = _mm512_loadu_ps(q + 16 * c);
                for (int r = 0; r < 2; r++) {
                    row[r][c] = _mm512_fmadd_ps(kc, dv[r], row[r][c]);
                    a[r][c & 3] = c < 4 ? _mm512_mul_ps(row[r][c], qc) : _mm512_fmadd_ps(row[r][c], qc, a[r][c & 3]);
                }
            }
            for (int r = 0; r < 2; r++) {
                const float sq = hsum16(_mm512_add_ps(_mm512_add_ps(a[r][0], a[r][2]), _mm512_add_ps(a[r][1], a[r][3])));
                jb->o[t * jb->ldo + h * S + j + r] = sq * scale;
            }
            if (jb->snap && jb->snap[t])
                for (int r = 0; r < 2; r++)
                    for (int c = 0; c < NC; c++)
                        _mm512_storeu_ps(jb->snap[t] + (size_t)h * S * S + (size_t)(j + r) * S + 16 * c, row[r][c]);
        }
        for (int r = 0; r < 2; r++)
            for (int c = 0; c < NC; c++) _mm512_storeu_ps(M + (int64_t)(j + r) * S + 16 * c, row[r][c]);
    }
}

/* The AVX2 level's blocked path: as gdn_rows_reg, with the F32 vec_dot order of ggml's AVX2 builds (dot_avx2.c:
 * 4 chains of 8 lanes, each fused from zero, (c0 + c2) + (c1 + c3), then the hadd tree). A row of S = 8·NC
 * floats does not fit the 16 registers, so the rows live in L1 while the block of tokens passes; two rows go
 * together because one row's token-to-token chain (dot, reduction, update) is latency-bound and the other
 * row's fills the gaps (four rows spill: slower). 512 tokens of 16 heads of 128 on one Zen 5 core: 17.4 ms of
 * CPU, against 40.7 ms for gdn_head_avx2. Per token the state is no longer walked four times from L2 (as gdn_head_avx2 does),
 * and the first block reads state_in directly (no copy of the state into place first). */
BD_TARGET_AVX2 static inline __attribute__((always_inline)) void gdn_rows_avx2(const gdn_job *jb, int64_t h,
                                                                              int64_t t0, int64_t nt,
                                                                              const float *eg, float scale,
                                                                              const int NC) {
    const int S = 8 * NC;
    const int64_t kh = h % jb->H_k;
    float *M = jb->state + (size_t)h * S * S;
    const float *Min = (t0 == 0 ? jb->state_in : jb->state) + (size_t)h * S * S;
    for (int j = 0; j < S; j += 2) {
        __m256 row[2][16];
        for (int r = 0; r < 2; r++)
            for (int c = 0; c < NC; c++) row[r][c] = _mm256_loadu_ps(Min + (int64_t)(j + r) * S + 8 * c);
        for (int64_t t = t0; t < t0 + nt; t++) {
            const float *k = jb->k + t * jb->ldk + kh * S, *q = jb->q + t * jb->ldq + kh * S;
            const __m256 egv = _mm256_set1_ps(eg[t - t0]);
            __m256 a[2][4];
            for (int r = 0; r < 2; r++)
                for (int c = 0; c < 4; c++) a[r][c] = _mm256_setzero_ps();
            for (int c = 0; c < NC; c++) {
                const __m256 kc = _mm256_loadu_ps(k + 8 * c);
                for (int r = 0; r < 2; r++) {
                    row[r][c] = _mm256_mul_ps(row[r][c], egv);
                    a[r][c & 3] = _mm256_fmadd_ps(row[r][c], kc, a[r][c & 3]);
                }
            }
            __m256 dv[2];
            for (int r = 0; r < 2; r++) {
                const float rr = bd_hsum8_hadd(_mm256_add_ps(_mm256_add_ps(a[r][0], a[r][2]), _mm256_add_ps(a[r][1], a[r][3])));
                dv[r] = _mm256_set1_ps((jb->v[t * jb->ldv + h * S + j + r] - rr) * jb->beta[t * jb->H_v + h]);
                for (int c = 0; c < 4; c++) a[r][c] = _mm256_setzero_ps();
            }
            for (int c = 0; c < NC; c++) {
                const __m256 kc = _mm256_loadu_ps(k + 8 * c), qc = _mm256_loadu_ps(q + 8 * c);
                for (int r = 0; r < 2; r++) {
                    row[r][c] = _mm256_fmadd_ps(kc, dv[r], row[r][c]);
                    a[r][c & 3] = _mm256_fmadd_ps(row[r][c], qc, a[r][c & 3]);
                }
            }
            for (int r = 0; r < 2; r++) {
                const float sq = bd_hsum8_hadd(_mm256_add_ps(_mm256_add_ps(a[r][0], a[r][2]), _mm256_add_ps(a[r][1], a[r][3])));
                jb->o[t * jb->ldo + h * S + j + r] = sq * scale;
            }
            if (jb->snap && jb->snap[t])
                for (int r = 0; r < 2; r++)
                    for (int c = 0; c < NC; c++)
                        _mm256_storeu_ps(jb->snap[t] + (size_t)h * S * S + (size_t)(j + r) * S + 8 * c, row[r][c]);
        }
        for (int r = 0; r < 2; r++)
            for (int c = 0; c < NC; c++) _mm256_storeu_ps(M + (int64_t)(j + r) * S + 8 * c, row[r][c]);
    }
}
BD_TARGET_AVX2 static void gdn_rows_avx2_128(const gdn_job *jb, int64_t h, int64_t t0, int64_t nt, const float *eg,
                                             float scale) {
    gdn_rows_avx2(jb, h, t0, nt, eg, scale, 16);
}
BD_TARGET_AVX2 static void gdn_rows_avx2_64(const gdn_job *jb, int64_t h, int64_t t0, int64_t nt, const float *eg,
                                            float scale) {
    gdn_rows_avx2(jb, h, t0, nt, eg, scale, 8);
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

#if BD_HAVE_NEON
/* Both NEON levels' blocked path: as gdn_rows_avx2, with the F32 vec_dot order of ggml's arm64 builds (the same
 * in armv8.0_1 and armv8.2_2; dot_neon.c): 4 chains of 4 lanes, chunk c of 4 floats fused into chain c % 4 from
 * zero, (c0 + c2) + (c1 + c3), then the pairwise across-lanes sum (faddp: (l0 + l1) + (l2 + l3)). ggml's decay
 * (vec_scale) is a plain product and its update (vec_mad) one fused step per element, as here. A row of
 * S = 4·NC floats takes 16 (S = 64) or 32 (S = 128) of the 32 registers, so two rows live in L1 while a block
 * of tokens passes, two at a time for the same reason as on AVX2 (the other row fills one row's latency gaps). */
static inline __attribute__((always_inline)) void gdn_rows_neon(const gdn_job *jb, int64_t h, int64_t t0, int64_t nt,
                                                               const float *eg, float scale, const int NC) {
    const int S = 4 * NC;
    const int64_t kh = h % jb->H_k;
    float *M = jb->state + (size_t)h * S * S;
    const float *Min = (t0 == 0 ? jb->state_in : jb->state) + (size_t)h * S * S;
    for (int j = 0; j < S; j += 2) {
        float32x4_t row[2][32];
        for (int r = 0; r < 2; r++)
            for (int c = 0; c < NC; c++) row[r][c] = vld1q_f32(Min + (int64_t)(j + r) * S + 4 * c);
        for (int64_t t = t0; t < t0 + nt; t++) {
            const float *k = jb->k + t * jb->ldk + kh * S, *q = jb->q + t * jb->ldq + kh * S;
            const float32x4_t zero = vdupq_n_f32(0.0f);
            float32x4_t a[2][4];
            for (int r = 0; r < 2; r++)
                for (int c = 0; c < 4; c++) a[r][c] = zero;
            for (int c = 0; c < NC; c++) {
                const float32x4_t kc = vld1q_f32(k + 4 * c);
                for (int r = 0; r < 2; r++) {
                    row[r][c] = vmulq_n_f32(row[r][c], eg[t - t0]);
                    a[r][c & 3] = vfmaq_f32(a[r][c & 3], row[r][c], kc);
                }
            }
            float d[2];
            for (int r = 0; r < 2; r++) {
                const float rr = vaddvq_f32(vaddq_f32(vaddq_f32(a[r][0], a[r][2]), vaddq_f32(a[r][1], a[r][3])));
                d[r] = (jb->v[t * jb->ldv + h * S + j + r] - rr) * jb->beta[t * jb->H_v + h];
                for (int c = 0; c < 4; c++) a[r][c] = zero;
            }
            for (int c = 0; c < NC; c++) {
                const float32x4_t kc = vld1q_f32(k + 4 * c), qc = vld1q_f32(q + 4 * c);
                for (int r = 0; r < 2; r++) {
                    row[r][c] = vfmaq_n_f32(row[r][c], kc, d[r]);
                    a[r][c & 3] = vfmaq_f32(a[r][c & 3], row[r][c], qc);
                }
            }
            for (int r = 0; r < 2; r++) {
                const float sq = vaddvq_f32(vaddq_f32(vaddq_f32(a[r][0], a[r][2]), vaddq_f32(a[r][1], a[r][3])));
                jb->o[t * jb->ldo + h * S + j + r] = sq * scale;
            }
            if (jb->snap && jb->snap[t])
                for (int r = 0; r < 2; r++)
                    for (int c = 0; c < NC; c++)
                        vst1q_f32(jb->snap[t] + (size_t)h * S * S + (size_t)(j + r) * S + 4 * c, row[r][c]);
        }
        for (int r = 0; r < 2; r++)
            for (int c = 0; c < NC; c++) vst1q_f32(M + (int64_t)(j + r) * S + 4 * c, row[r][c]);
    }
}
static void gdn_rows_neon_128(const gdn_job *jb, int64_t h, int64_t t0, int64_t nt, const float *eg, float scale) {
    gdn_rows_neon(jb, h, t0, nt, eg, scale, 32);
}
static void gdn_rows_neon_64(const gdn_job *jb, int64_t h, int64_t t0, int64_t nt, const float *eg, float scale) {
    gdn_rows_neon(jb, h, t0, nt, eg, scale, 16);
}
#endif

enum { GDN_TB = 32 }; /* tokens per block: their k and q (2·32·S floats) stay in L1 */

typedef void (*gdn_rows_fn)(const gdn_job *jb, int64_t h, int64_t t0, int64_t nt, const float *eg, float scale);

/* The blocked kernel of SIMD level lv for head size S, or NULL: then the heads go token by token (gdn_head). */
static gdn_rows_fn gdn_rows_for(int lv, int S) {
#if BD_HAVE_X86
    if (lv == BD_SIMD_AVX512) return S == 128 ? gdn_rows_128 : S == 64 ? gdn_rows_64 : NULL;
    if (lv == BD_SIMD_AVX2) return S == 128 ? gdn_rows_avx2_128 : S == 64 ? gdn_rows_avx2_64 : NULL;
#elif BD_HAVE_NEON
    if (lv == BD_SIMD_NEON || lv == BD_SIMD_NEON_DOT) return S == 128 ? gdn_rows_neon_128 : S == 64 ? gdn_rows_neon_64 : NULL;
#endif
    (void)lv;
    (void)S;
    return NULL;
}

static void gdn_task(void *p, int ith, int nth) {
    const gdn_job *j = p;
    const int S = j->S;
    const bd_vec_dot_fn dot = bd_dot_traits_get(BD_TYPE_F32)->vec_dot;
    const int lv = bd_simd();
    const gdn_rows_fn rows = gdn_rows_for(lv, S);
    const float scale = 1.0f / sqrtf((float)S);
    const size_t ss = (size_t)S * (size_t)S;
    int64_t h0, h1;
    bd_split(j->H_v, ith, nth, &h0, &h1);
    if (rows) {
        float eg[GDN_TB];
        for (int64_t h = h0; h < h1; h++)
            for (int64_t t0 = 0; t0 < j->T; t0 += GDN_TB) {
                const int64_t nt = j->T - t0 < GDN_TB ? j->T - t0 : GDN_TB;
                for (int64_t t = 0; t < nt; t++) eg[t] = expf(j->g[(t0 + t) * j->H_v + h]);
                rows(j, h, t0, nt, eg, scale);
            }
        return;
    }
    void (*head)(float *, int, float, float, const float *, const float *, const float *, float *, float,
                 bd_vec_dot_fn) = gdn_head;
#if BD_HAVE_X86
    if (lv >= BD_SIMD_AVX2) head = gdn_head_avx2;
#endif
    for (int64_t h = h0; h < h1; h++) {
        const int64_t kh = h % j->H_k;
        float *M = j->state + (size_t)h * ss;
        if (j->state_in != j->state) memcpy(M, j->state_in + (size_t)h * ss, ss * sizeof(float));
        for (int64_t t = 0; t < j->T; t++) {
            const float eg = expf(j->g[t * j->H_v + h]);
            head(M, S, eg, j->beta[t * j->H_v + h], j->k + t * j->ldk + kh * S, j->q + t * j->ldq + kh * S,
                     j->v + t * j->ldv + h * S, j->o + t * j->ldo + h * S, scale, dot);
            if (j->snap && j->snap[t]) memcpy(j->snap[t] + (size_t)h * ss, M, ss * sizeof(float));
        }
    }
}

void bd_gdn_from(bd_threadpool *tp, int64_t T, int H_k, int H_v, int S, const float *q, int64_t ldq, const float *k,
                 int64_t ldk, const float *v, int64_t ldv, const float *g, const float *beta, const float *state_in,
                 float *state, float *o, int64_t ldo, float *const *snap) {
    if (T <= 0) {
        if (state_in != state) memcpy(state, state_in, (size_t)H_v * S * S * sizeof(float));
        return;
    }
    gdn_job j = {T, H_k, H_v, S, q, k, v, g, beta, ldq, ldk, ldv, ldo, state_in, state, o, snap};
    bd_threadpool_run(H_v > 1 ? tp : NULL, gdn_task, &j);
}

void bd_gdn(bd_threadpool *tp, int64_t T, int H_k, int H_v, int S, const float *q, int64_t ldq, const float *k,
            int64_t ldk, const float *v, int64_t ldv, const float *g, const float *beta, float *state, float *o,
            int64_t ldo, float *const *snap) {
    bd_gdn_from(tp, T, H_k, H_v, S, q, ldq, k, ldk, v, ldv, g, beta, state, state, o, ldo, snap);
}
