/* conv.c — causal depthwise conv1d over time with a rolling state (architectures.md §1.7 step 3, §2.1 step 2,
 * §3.3): GDN and Mamba2 on the in-projection (then silu), LFM2's short convolution (no activation).
 *
 * Each channel sums w[c][m]·in[t-(L-1)+m] for m = 0..L-1 in that order starting from 0 (ggml_ssm_conv), then
 * adds the bias and applies silu. Which products are fused is how the compiler built ggml's loop (vectors of
 * rounded products added one by one, then scalar fused multiply-adds; read off the machine code): the AVX2
 * builds round the first L & ~3 products (d_conv 4: all four), the AVX-512 and arm64 builds the first L & ~7
 * (none). The AVX-512 and NEON kernels below fuse every tap (L < 8 in every model; longer kernels take the
 * portable loop); silu uses ggml's vector expf for the first C & ~15 channels (AVX-512 builds and the portable
 * code; C & ~7 at AVX2, C & ~3 at NEON, as those builds) and libm's for the rest, as ggml_vec_silu_f32 over a
 * row of C. The vector paths do 16 (AVX-512), 8 (AVX2) or 4 (NEON) channels at a time, keeping the channels'
 * last L-1 inputs in a small window, so x is read row by row; threads take blocks of channels. */
#include <assert.h>
#include <math.h>

#include "tensor/ops.h"
#include "tensor/simd.h"
#include "tensor/vexp.h"

#define CONV_MAX_L 16

typedef struct conv_job {
    float *y;
    const float *x;
    float *state;
    const float *state_in; /* the state read before the first token (may be state itself) */
    const float *w, *bias;
    int64_t ldy, ldx, C, T;
    int L, silu;
    int unfused; /* taps [0, unfused) have their products rounded before the add (see the top) */
    float *const *snap;
} conv_job;

static inline float silu1(float v) { return v / (1.0f + expf(-v)); }

/* Channels [c0, c1), one at a time. */
static void conv_scalar(const conv_job *j, int64_t c0, int64_t c1) {
    const int L = j->L;
    for (int64_t c = c0; c < c1; c++) {
        float win[CONV_MAX_L];
        float *st = j->state + c * (L - 1);
        const float *w = j->w + c * L;
        for (int m = 0; m < L - 1; m++) win[m] = j->state_in[c * (L - 1) + m];
        for (int64_t t = 0; t < j->T; t++) {
            const float xv = j->x[t * j->ldx + c];
            float s = 0.0f;
            for (int m = 0; m < L - 1; m++) s = m < j->unfused ? s + w[m] * win[m] : fmaf(w[m], win[m], s);
            s = L - 1 < j->unfused ? s + w[L - 1] * xv : fmaf(w[L - 1], xv, s);
            if (j->bias) s += j->bias[c];
            j->y[t * j->ldy + c] = !j->silu ? s : c < (j->C & ~(int64_t)15) ? s / (1.0f + bd_exp_ggml(-s)) : silu1(s);
            for (int m = 0; m + 1 < L - 1; m++) win[m] = win[m + 1];
            if (L > 1) win[L - 2] = xv;
            if (j->snap && j->snap[t])
                for (int m = 0; m < L - 1; m++) j->snap[t][c * (L - 1) + m] = win[m];
        }
        for (int m = 0; m < L - 1; m++) st[m] = win[m];
    }
}

#if BD_HAVE_X86
/* The body, inlined twice: with L a constant 4 (every model's d_conv) the window and the kernel stay in
 * registers, which matters when a decode step runs it for a single token. */
BD_TARGET_AVX512 static inline __attribute__((always_inline)) void conv_avx512_L(const conv_job *j, int64_t c0,
                                                                                  int64_t c1, const int L) {
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int64_t cb = c0; cb < c1; cb += 16) {
        const int nc = c1 - cb >= 16 ? 16 : (int)(c1 - cb);
        const __mmask16 mk = nc == 16 ? (__mmask16)0xffff : (__mmask16)((1u << nc) - 1);
        /* the kernel and the state of these channels transposed to [m][lane] by masked gathers (lanes past nc
         * read nothing and stay 0); only L and L-1 rows, so a decode step (T = 1) is not dominated by it */
        float *stb = j->state + cb * (L - 1);
        const __m512i iw = _mm512_mullo_epi32(iota, _mm512_set1_epi32(L));
        const __m512i is = _mm512_mullo_epi32(iota, _mm512_set1_epi32(L - 1));
        __m512 win[CONV_MAX_L], wv[CONV_MAX_L];
        for (int m = 0; m < L; m++) wv[m] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mk, iw, j->w + cb * L + m, 4);
        const float *sti = j->state_in + cb * (L - 1);
        for (int m = 0; m < L - 1; m++) win[m] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mk, is, sti + m, 4);
        const __m512 bv = j->bias ? _mm512_maskz_loadu_ps(mk, j->bias + cb) : _mm512_setzero_ps();
        for (int64_t t = 0; t < j->T; t++) {
            const __m512 xv = _mm512_maskz_loadu_ps(mk, j->x + t * j->ldx + cb);
            __m512 s = _mm512_setzero_ps();
            for (int m = 0; m < L - 1; m++) s = _mm512_fmadd_ps(wv[m], win[m], s);
            s = _mm512_fmadd_ps(wv[L - 1], xv, s);
            if (j->bias) s = _mm512_add_ps(s, bv);
            if (j->silu && nc == 16) s = _mm512_div_ps(s, _mm512_add_ps(one, bd_exp512(_mm512_sub_ps(_mm512_setzero_ps(), s))));
            _mm512_mask_storeu_ps(j->y + t * j->ldy + cb, mk, s);
            if (j->silu && nc < 16) /* the last C % 16 channels: libm's expf, as ggml's vec_silu tail */
                for (int l = 0; l < nc; l++) j->y[t * j->ldy + cb + l] = silu1(j->y[t * j->ldy + cb + l]);
            for (int m = 0; m + 1 < L - 1; m++) win[m] = win[m + 1];
            if (L > 1) win[L - 2] = xv;
            if (j->snap && j->snap[t]) {
                float tmp[CONV_MAX_L][16];
                for (int m = 0; m < L - 1; m++) _mm512_storeu_ps(tmp[m], win[m]);
                for (int l = 0; l < nc; l++)
                    for (int m = 0; m < L - 1; m++) j->snap[t][(cb + l) * (L - 1) + m] = tmp[m][l];
            }
        }
        for (int m = 0; m < L - 1; m++) _mm512_mask_i32scatter_ps(stb + m, mk, is, win[m], 4);
    }
}

BD_TARGET_AVX512 static void conv_avx512(const conv_job *j, int64_t c0, int64_t c1) {
    if (j->L == 4) conv_avx512_L(j, c0, c1, 4);
    else conv_avx512_L(j, c0, c1, j->L);
}

BD_TARGET_AVX2 static void conv_avx2(const conv_job *j, int64_t c0, int64_t c1) {
    const int L = j->L;
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t cb = c0;
    for (; cb + 8 <= c1; cb += 8) {
        float wt[CONV_MAX_L][8], st[CONV_MAX_L][8], bs[8] = {0};
        for (int l = 0; l < 8; l++) {
            for (int m = 0; m < L; m++) wt[m][l] = j->w[(cb + l) * L + m];
            for (int m = 0; m < L - 1; m++) st[m][l] = j->state_in[(cb + l) * (L - 1) + m];
            if (j->bias) bs[l] = j->bias[cb + l];
        }
        __m256 win[CONV_MAX_L], wv[CONV_MAX_L];
        for (int m = 0; m < L; m++) wv[m] = _mm256_loadu_ps(wt[m]);
        for (int m = 0; m < L - 1; m++) win[m] = _mm256_loadu_ps(st[m]);
        const __m256 bv = _mm256_loadu_ps(bs);
        for (int64_t t = 0; t < j->T; t++) {
            const __m256 xv = _mm256_loadu_ps(j->x + t * j->ldx + cb);
            __m256 s = _mm256_setzero_ps();
            for (int m = 0; m < L - 1; m++)
                s = m < j->unfused ? _mm256_add_ps(s, _mm256_mul_ps(wv[m], win[m])) : _mm256_fmadd_ps(wv[m], win[m], s);
            s = L - 1 < j->unfused ? _mm256_add_ps(s, _mm256_mul_ps(wv[L - 1], xv)) : _mm256_fmadd_ps(wv[L - 1], xv, s);
            if (j->bias) s = _mm256_add_ps(s, bv);
            /* ggml's AVX2 builds: the vector expf for whole vectors of 8 channels (this block), libm's for the
             * last C % 8 (conv_scalar below) */
            if (j->silu) s = _mm256_div_ps(s, _mm256_add_ps(one, bd_exp256(_mm256_sub_ps(_mm256_setzero_ps(), s))));
            _mm256_storeu_ps(j->y + t * j->ldy + cb, s);
            for (int m = 0; m + 1 < L - 1; m++) win[m] = win[m + 1];
            if (L > 1) win[L - 2] = xv;
            if (j->snap && j->snap[t]) {
                float tmp[CONV_MAX_L][8];
                for (int m = 0; m < L - 1; m++) _mm256_storeu_ps(tmp[m], win[m]);
                for (int l = 0; l < 8; l++)
                    for (int m = 0; m < L - 1; m++) j->snap[t][(cb + l) * (L - 1) + m] = tmp[m][l];
            }
        }
        for (int m = 0; m < L - 1; m++) _mm256_storeu_ps(st[m], win[m]);
        for (int l = 0; l < 8; l++)
            for (int m = 0; m < L - 1; m++) j->state[(cb + l) * (L - 1) + m] = st[m][l];
    }
    if (cb < c1) conv_scalar(j, cb, c1);
}
#endif

#if BD_HAVE_NEON
/* Both NEON levels, 4 channels at a time as conv_avx2 does 8, every tap fused (ggml's arm64 builds, for L < 8:
 * the compiler vectorized the tap loop by 8 only). silu: ggml's NEON one (vectors of 4 channels with the NEON
 * vector expf), libm's expf for the last C % 4 (conv_scalar below, as ggml_vec_silu_f32 over a row of C). */
static void conv_neon(const conv_job *j, int64_t c0, int64_t c1) {
    const int L = j->L;
    const float32x4_t one = vdupq_n_f32(1.0f), zero = vdupq_n_f32(0.0f);
    int64_t cb = c0;
    for (; cb + 4 <= c1; cb += 4) {
        float32x4_t win[CONV_MAX_L], wv[CONV_MAX_L];
        for (int m = 0; m < L; m++) {
            float wt[4];
            for (int l = 0; l < 4; l++) wt[l] = j->w[(cb + l) * L + m];
            wv[m] = vld1q_f32(wt);
        }
        for (int m = 0; m < L - 1; m++) {
            float st[4];
            for (int l = 0; l < 4; l++) st[l] = j->state_in[(cb + l) * (L - 1) + m];
            win[m] = vld1q_f32(st);
        }
        const float32x4_t bv = j->bias ? vld1q_f32(j->bias + cb) : zero;
        for (int64_t t = 0; t < j->T; t++) {
            const float32x4_t xv = vld1q_f32(j->x + t * j->ldx + cb);
            float32x4_t s = zero;
            for (int m = 0; m < L - 1; m++) s = vfmaq_f32(s, wv[m], win[m]);
            s = vfmaq_f32(s, wv[L - 1], xv);
            if (j->bias) s = vaddq_f32(s, bv);
            if (j->silu) s = vdivq_f32(s, vaddq_f32(one, bd_exp_neon(vsubq_f32(zero, s))));
            vst1q_f32(j->y + t * j->ldy + cb, s);
            for (int m = 0; m + 1 < L - 1; m++) win[m] = win[m + 1];
            if (L > 1) win[L - 2] = xv;
            if (j->snap && j->snap[t])
                for (int m = 0; m < L - 1; m++) {
                    float tmp[4];
                    vst1q_f32(tmp, win[m]);
                    for (int l = 0; l < 4; l++) j->snap[t][(cb + l) * (L - 1) + m] = tmp[l];
                }
        }
        for (int m = 0; m < L - 1; m++) {
            float tmp[4];
            vst1q_f32(tmp, win[m]);
            for (int l = 0; l < 4; l++) j->state[(cb + l) * (L - 1) + m] = tmp[l];
        }
    }
    if (cb < c1) conv_scalar(j, cb, c1);
}
#endif

static void conv_task(void *p, int ith, int nth) {
    const conv_job *j = p;
    int64_t c0, c1;
    bd_split_aligned(j->C, 16, ith, nth, &c0, &c1);
    if (c0 >= c1) return;
    switch (bd_simd()) {
#if BD_HAVE_X86
    case BD_SIMD_AVX512:
        if (j->unfused == 0) { /* it fuses every tap */
            conv_avx512(j, c0, c1);
            return;
        }
        break;
    case BD_SIMD_AVX2: conv_avx2(j, c0, c1); return;
#elif BD_HAVE_NEON
    case BD_SIMD_NEON:
    case BD_SIMD_NEON_DOT:
        if (j->unfused == 0) { /* it fuses every tap */
            conv_neon(j, c0, c1);
            return;
        }
        break;
#endif
    default: break;
    }
    conv_scalar(j, c0, c1);
}

void bd_conv1d_causal(bd_threadpool *tp, float *y, int64_t ldy, const float *x, int64_t ldx, float *state,
                      const float *w, const float *bias, int64_t C, int L, int64_t T, int silu, float *const *snap) {
    bd_conv1d_causal_from(tp, y, ldy, x, ldx, state, state, w, bias, C, L, T, silu, snap);
}

void bd_conv1d_causal_from(bd_threadpool *tp, float *y, int64_t ldy, const float *x, int64_t ldx,
                           const float *state_in, float *state, const float *w, const float *bias, int64_t C, int L,
                           int64_t T, int silu, float *const *snap) {
    assert(L >= 1 && L <= CONV_MAX_L);
    /* ggml's build: the AVX2 builds round the products of the first L & ~3 taps, the AVX-512 and arm64 ones
     * (and the portable code) of the first L & ~7 */
    const int unfused = BD_HAVE_X86 && bd_simd() == BD_SIMD_AVX2 ? L & ~3 : L & ~7;
    conv_job j = {y, x, state, state_in, w, bias, ldy, ldx, C, T, L, silu, unfused, snap};
    bd_threadpool_run(C * T < 8192 ? NULL : tp, conv_task, &j);
}
