/* test_matmul.c — y = W·x against a double-precision loop, for F32 weights at every SIMD level and thread count,
 * and for every other weight type against dequantize(W)·(activations as converted for the dot product).
 *
 * Tolerance: a float sum of n products has |error| <= n·eps·Σ|w·x| (standard bound, eps = FLT_EPSILON covers the
 * product's and each addition's rounding); we allow (K + 16)·eps·Σ|w·x| + 1e-30. A wrong index or a lost tail
 * gives errors of the order of a whole term, far above that. Beyond accuracy the F32 kernel promises identical
 * bits whatever the tiling or the thread count, and whatever T within each of ggml's two shapes (tiled
 * batches, single vec_dot outputs), which is checked exactly. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "base/threadpool.h"
#include "tensor/dot.h"
#include "tensor/gemm_q.h"
#include "tensor/matmul.h"
#include "tensor/simd.h"
#include "tensor/types.h"
#include "test.h"

static uint64_t rng = 88172645463325252ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

/* Checks y against the double product of W (as floats, [N][K]) and x (floats [T][ldx]); returns max error ratio. */
static double check_against(const float *W, const float *x, int64_t ldx, const float *y, int64_t ldy, int64_t N,
                            int64_t K, int64_t T, double slack) {
    double worst = 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++) {
            double s = 0, a = 0;
            for (int64_t k = 0; k < K; k++) {
                double p = (double)W[n * K + k] * (double)x[t * ldx + k];
                s += p;
                a += fabs(p);
            }
            double tol = slack * (double)(K + 16) * FLT_EPSILON * a + 1e-30;
            double r = fabs((double)y[t * ldy + n] - s) / tol;
            if (r > worst) worst = r;
        }
    return worst;
}

static void test_f32(bd_threadpool *tp4) {
    const int64_t shapes[][3] = {{1, 1, 1}, {5, 17, 3}, {64, 64, 6}, {67, 100, 13}, {128, 1024, 1},
                                 {33, 31, 7}, {8, 16, 12}, {130, 257, 25}, {21, 2500, 13}};
    int levels = bd_simd_override(BD_SIMD_AVX512) + 1;
    for (int lv = 0; lv < levels; lv++) {
        bd_simd_override(lv);
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            int64_t N = shapes[si][0], K = shapes[si][1], T = shapes[si][2];
            int64_t ldx = K + 3, ldy = N + 5;
            float *W = bd_mallocn((size_t)(N * K), 4), *x = bd_mallocn((size_t)(T * ldx), 4);
            float *y = bd_calloc((size_t)(T * ldy), 4), *y1 = bd_calloc((size_t)(T * ldy), 4);
            float *yt = bd_calloc((size_t)(4 * ldy), 4); /* a sub-batch of up to 4 tokens */
            for (int64_t i = 0; i < N * K; i++) W[i] = frand();
            for (int64_t i = 0; i < T * ldx; i++) x[i] = frand();
            CHECK_STATUS(bd_matmul(NULL, BRAID_TYPE_F32, W, N, K, x, ldx, T, y1, ldy, NULL, 0), BRAID_OK);
            double r = check_against(W, x, ldx, y1, ldy, N, K, T, 1.0);
            CHECK(r <= 1.0, "f32 level %d N=%lld K=%lld T=%lld: error %.3g of bound", lv, (long long)N, (long long)K,
                  (long long)T, r);
            CHECK_STATUS(bd_matmul(tp4, BRAID_TYPE_F32, W, N, K, x, ldx, T, y, ldy, NULL, 0), BRAID_OK);
            CHECK(!memcmp(y, y1, (size_t)(T * ldy) * 4), "f32 level %d N=%lld K=%lld T=%lld: 1 vs 4 threads differ",
                  lv, (long long)N, (long long)K, (long long)T);
            /* A token's bits do not depend on the batch it is in, within ggml's two shapes: where ggml tiles a
             * batch (tinyBLAS: N % 4 == 0, K a multiple of the vector width; always in the portable code) every
             * pair of tokens gives the batch's bits (arm64: 4 lanes, from 4 tokens: every 4 tokens); elsewhere
             * each token alone does (vec_dot). */
            const int64_t width = BD_HAVE_NEON ? 4 : lv == BD_SIMD_AVX512 ? 16 : 8, min_t = BD_HAVE_NEON ? 4 : 2;
            const int tiled = T >= min_t && (lv == BD_SIMD_SCALAR || (N % 4 == 0 && K % width == 0));
            const int64_t sub = tiled && lv != BD_SIMD_SCALAR ? min_t : 1;
            int same = 1;
            for (int64_t t = 0; t < T; t += sub) {
                const int64_t t0 = t + sub <= T ? t : T - sub;
                CHECK_STATUS(bd_matmul(tp4, BRAID_TYPE_F32, W, N, K, x + t0 * ldx, ldx, sub, yt, ldy, NULL, 0),
                             BRAID_OK);
                for (int64_t u = 0; u < sub; u++) same &= !memcmp(yt + u * ldy, y1 + (t0 + u) * ldy, (size_t)N * 4);
            }
            CHECK(same, "f32 level %d N=%lld K=%lld T=%lld: tokens in sub-batches of %lld differ from the batch", lv,
                  (long long)N, (long long)K, (long long)T, (long long)sub);
            /* padding between rows untouched */
            int pad_ok = 1;
            for (int64_t t = 0; t < T; t++)
                for (int64_t n = N; n < ldy; n++) pad_ok &= y1[t * ldy + n] == 0.0f;
            CHECK(pad_ok, "f32 writes only N outputs per row");
            bd_free(W);
            bd_free(x);
            bd_free(y);
            bd_free(y1);
            bd_free(yt);
        }
    }
    bd_simd_override(BD_SIMD_AVX512);
}

/* Every other weight type: quantize random rows with the type's reference quantizer, then compare bd_matmul
 * with the double product of the dequantized weights and the activations converted as the dot product sees
 * them (vec_dot_type round trip). */
static void test_types(bd_threadpool *tp) {
    const uint32_t types[] = {BRAID_TYPE_F16,  BRAID_TYPE_BF16, BRAID_TYPE_Q8_0,   BRAID_TYPE_Q4_0,   BRAID_TYPE_Q4_K,
                              BRAID_TYPE_Q5_K, BRAID_TYPE_Q6_K, BRAID_TYPE_Q4_1,   BRAID_TYPE_Q5_0,   BRAID_TYPE_Q5_1,
                              BRAID_TYPE_Q2_K, BRAID_TYPE_Q3_K, BRAID_TYPE_IQ4_NL, BRAID_TYPE_IQ4_XS, BRAID_TYPE_MXFP4};
    const int64_t N = 37, K = 512;
    for (size_t ti = 0; ti < 2 * sizeof types / sizeof types[0]; ti++) {
        /* first with few tokens (vec_dot path), then with a prompt's worth (dequantized tiles) */
        const int64_t T = ti < sizeof types / sizeof types[0] ? 9 : 40;
        uint32_t wt = types[ti % (sizeof types / sizeof types[0])];
        const bd_type_traits *tt = bd_type_traits_get(wt);
        const bd_dot_traits *dt = bd_dot_traits_get(wt);
        CHECK(tt && dt, "type %u has traits and a dot product", wt);
        if (!tt || !dt) continue;
        const bd_type_traits *vt = bd_type_traits_get(dt->vec_dot_type);
        CHECK(vt != NULL, "vec_dot_type %u of %s has traits", dt->vec_dot_type, tt->name);
        if (!vt) continue;
        size_t wrow = bd_row_size(wt, K), xrow = bd_row_size(dt->vec_dot_type, K);
        float *Wf = bd_mallocn((size_t)(N * K), 4), *Wd = bd_mallocn((size_t)(N * K), 4);
        float *x = bd_mallocn((size_t)(T * K), 4), *xd = bd_mallocn((size_t)(T * K), 4);
        float *y = bd_calloc((size_t)(T * N), 4), *y1 = bd_calloc((size_t)(T * N), 4);
        uint8_t *Wq = bd_malloc(wrow * (size_t)N), *xq = bd_malloc(xrow);
        size_t ss = bd_matmul_scratch_size(wt, K, T);
        void *scratch = bd_malloc(ss);
        for (int64_t i = 0; i < N * K; i++) Wf[i] = frand();
        for (int64_t i = 0; i < T * K; i++) x[i] = frand();
        for (int64_t n = 0; n < N; n++) {
            tt->from_float(Wf + n * K, Wq + (size_t)n * wrow, K);
            tt->to_float(Wq + (size_t)n * wrow, Wd + n * K, K);
        }
        for (int64_t t = 0; t < T; t++) {
            dt->from_float(x + t * K, xq, K);
            vt->to_float(xq, xd + t * K, K);
        }
        CHECK(ss >= xrow * (size_t)T, "%s scratch size %zu", tt->name, ss);
        CHECK_STATUS(bd_matmul(NULL, wt, Wq, N, K, x, K, T, y1, N, scratch, ss), BRAID_OK);
        /* Integer dot products of quantized blocks are exact; what is left is float rounding of block sums
         * (and for K-quants the per-sub-block scales), within a few times the F32 bound. */
        double r = check_against(Wd, xd, K, y1, N, N, K, T, 4.0);
        CHECK(r <= 1.0, "%s T=%lld: error %.3g of bound", tt->name, (long long)T, r);
        CHECK_STATUS(bd_matmul(tp, wt, Wq, N, K, x, K, T, y, N, scratch, ss), BRAID_OK);
        CHECK(!memcmp(y, y1, (size_t)(T * N) * 4), "%s: 1 vs N threads differ", tt->name);
        CHECK_STATUS(bd_matmul(NULL, wt, Wq, N, K, x, K, T, y1, N, scratch, ss - 1), BRAID_E_INVALID);
        if (tt->blck_size > 1) /* K not a multiple of the block */
            CHECK_STATUS(bd_matmul(NULL, wt, Wq, N, K - 1, x, K, T, y1, N, scratch, ss), BRAID_E_INVALID);
        bd_free(Wf);
        bd_free(Wd);
        bd_free(x);
        bd_free(xd);
        bd_free(y);
        bd_free(y1);
        bd_free(Wq);
        bd_free(xq);
        bd_free(scratch);
    }
}

/* IQ4_NL's prompt order (gemm_q8.c: llamafile's tinyBLAS, which llama.cpp runs for its prompts): one chain of
 * 8 float lanes, per block lane l += (d_x * d_y) * float(sum of the products at 4l..4l+3), then hsum_float_8. */
static float iq4_nl_prompt_dot(int64_t K, const uint8_t *w, const uint8_t *xq) {
    static const int8_t values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    float acc[8] = {0};
    for (int64_t b = 0; b < K / 32; b++) {
        const uint8_t *wb = w + 18 * b, *xb = xq + 34 * b;
        uint16_t hw, hx;
        memcpy(&hw, wb, 2);
        memcpy(&hx, xb, 2);
        const float d = bd_fp16_to_fp32(hw) * bd_fp16_to_fp32(hx);
        for (int l = 0; l < 8; l++) {
            int32_t sum = 0;
            for (int e = 4 * l; e < 4 * l + 4; e++) {
                const int q = e < 16 ? wb[2 + e] & 0xF : wb[2 + e - 16] >> 4;
                sum += values[q] * (int8_t)xb[2 + e];
            }
            acc[l] = fmaf(d, (float)sum, acc[l]);
        }
    }
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

/* The contract shared with the decode path (dot.h, matmul.h): for quantized weights every output of a
 * many-token product equals the type's vec_dot on that weight row and that converted activation row, bit for
 * bit, whatever T, the tiling and the thread count (prefill and token-by-token decode give the same logits);
 * IQ4_NL's x86 prompts (16+ tokens, the GEMM) equal llama.cpp's prompt order instead (iq4_nl_prompt_dot).
 * Shapes are odd on purpose: N not a multiple of the row tile, T not a multiple of the token tile or group. */
static void test_vec_dot_equality(bd_threadpool *tp, bd_threadpool *tp3) {
    const uint32_t types[] = {BRAID_TYPE_Q8_0, BRAID_TYPE_Q4_0,   BRAID_TYPE_Q4_K,   BRAID_TYPE_Q5_K,
                              BRAID_TYPE_Q6_K, BRAID_TYPE_Q5_0,   BRAID_TYPE_IQ4_NL, BRAID_TYPE_Q2_K,
                              BRAID_TYPE_Q3_K, BRAID_TYPE_IQ4_XS, BRAID_TYPE_Q4_1,   BRAID_TYPE_Q5_1,
                              BRAID_TYPE_MXFP4};
    /* every type has an integer GEMM at the AVX2 and AVX-512 levels */
    const size_t n_gemm2 = 13, n_gemm512 = 13;
    /* the last three only for the block-32 types: {11, 1056, 19} has 33 blocks of 32 (an odd last block);
     * {9, 96, 5} and {11, 1120, 19} have K / 32 odd (the plain AVX2 tile's loop is unrolled by two blocks) and
     * not a multiple of 8, with odd row tails (an odd last row's scales record repeats it) */
    const int64_t shapes[][3] = {{37, 512, 16}, {5, 256, 17}, {70, 1024, 33}, {13, 768, 50}, {4, 2048, 23},
                                 {130, 256, 64}, {11, 1056, 19}, {9, 96, 5}, {11, 1120, 19}};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const uint32_t wt = types[ti];
        const bd_type_traits *tt = bd_type_traits_get(wt);
        const bd_dot_traits *dt = bd_dot_traits_get(wt);
        CHECK(tt && dt, "type %u has traits and a dot product", wt);
        if (!tt || !dt) continue;
        /* at the AVX2 and AVX-512 levels the prompt must take an integer GEMM, not the vec_dot loop; at the
         * aarch64 NEON levels every quantized type */
        if ((BD_HAVE_X86 &&
             ((bd_simd() >= BD_SIMD_AVX2 && ti < n_gemm2) || (bd_simd() >= BD_SIMD_AVX512 && ti < n_gemm512))) ||
            (BD_HAVE_NEON && bd_simd() >= BD_SIMD_NEON &&
             (wt == BRAID_TYPE_Q8_0 || wt == BRAID_TYPE_Q4_0 || wt == BRAID_TYPE_Q5_0 || wt == BRAID_TYPE_Q2_K ||
              wt == BRAID_TYPE_Q3_K || wt == BRAID_TYPE_Q4_K || wt == BRAID_TYPE_Q5_K || wt == BRAID_TYPE_Q6_K ||
              wt == BRAID_TYPE_IQ4_XS || wt == BRAID_TYPE_IQ4_NL || wt == BRAID_TYPE_MXFP4 || wt == BRAID_TYPE_Q4_1 ||
              wt == BRAID_TYPE_Q5_1)))
            CHECK(bd_gemmq_get(wt) != NULL, "%s: an integer GEMM at kernel level %d", tt->name, bd_simd());
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            const int64_t N = shapes[si][0], K = shapes[si][1], T = shapes[si][2], ldy = N + 3;
            if (K % tt->blck_size) continue;
            const size_t wrow = bd_row_size(wt, K), xrow = bd_row_size(dt->vec_dot_type, K);
            float *Wf = bd_mallocn((size_t)K, 4), *x = bd_mallocn((size_t)(T * K), 4);
            float *y1 = bd_calloc((size_t)(T * ldy), 4), *y2 = bd_calloc((size_t)(T * ldy), 4);
            float *y3 = bd_calloc((size_t)(T * ldy), 4);
            uint8_t *Wq = bd_malloc(wrow * (size_t)N), *xq = bd_malloc(xrow * (size_t)T);
            const size_t ss = bd_matmul_scratch_size(wt, K, T);
            void *scratch = bd_malloc(ss);
            for (int64_t n = 0; n < N; n++) {
                /* rows of different magnitudes, so block scales differ across rows and blocks */
                const float scale = (float)(1 + n % 7) * (n % 3 ? 1.0f : 0.01f);
                for (int64_t k = 0; k < K; k++) Wf[k] = frand() * scale * (k % 97 == 0 ? 8.0f : 1.0f);
                tt->from_float(Wf, Wq + (size_t)n * wrow, K);
            }
            for (int64_t i = 0; i < T * K; i++) x[i] = frand() * (float)(1 + (i / K) % 5) * (i % 61 == 0 ? 20.f : 1.f);
            for (int64_t t = 0; t < T; t++) dt->from_float(x + t * K, xq + (size_t)t * xrow, K);
            CHECK_STATUS(bd_matmul(NULL, wt, Wq, N, K, x, K, T, y1, ldy, scratch, ss), BRAID_OK);
            CHECK_STATUS(bd_matmul(tp, wt, Wq, N, K, x, K, T, y2, ldy, scratch, ss), BRAID_OK);
            CHECK_STATUS(bd_matmul(tp3, wt, Wq, N, K, x, K, T, y3, ldy, scratch, ss), BRAID_OK);
            int64_t bad1 = 0, bad2 = 0, bad3 = 0;
            for (int64_t t = 0; t < T; t++)
                for (int64_t n = 0; n < N; n++) {
                    float s;
                    if (BD_HAVE_X86 && wt == BRAID_TYPE_IQ4_NL && bd_gemmq_get(wt) && T >= 16) /* arm64: vec_dot */
                        s = iq4_nl_prompt_dot(K, Wq + (size_t)n * wrow, xq + (size_t)t * xrow);
                    else
                        dt->vec_dot(K, &s, Wq + (size_t)n * wrow, xq + (size_t)t * xrow);
                    bad1 += memcmp(&s, &y1[t * ldy + n], 4) != 0;
                    bad2 += memcmp(&s, &y2[t * ldy + n], 4) != 0;
                    bad3 += memcmp(&s, &y3[t * ldy + n], 4) != 0;
                }
            CHECK(bad1 == 0 && bad2 == 0 && bad3 == 0,
                  "%s level %d N=%lld K=%lld T=%lld: %lld / %lld / %lld (1 / 2 / 3 threads) of %lld outputs differ "
                  "from vec_dot", tt->name, bd_simd(), (long long)N, (long long)K, (long long)T, (long long)bad1,
                  (long long)bad2, (long long)bad3, (long long)(N * T));
            bd_free(Wf);
            bd_free(x);
            bd_free(y1);
            bd_free(y2);
            bd_free(y3);
            bd_free(Wq);
            bd_free(xq);
            bd_free(scratch);
        }
    }
}

/* The integer GEMMs may quantize activations with their own code: it must give dot.h's bytes exactly, ties,
 * NaN, infinities and all-zero blocks included. */
static void test_gemmq_quantize(void) {
    const uint32_t types[] = {BRAID_TYPE_Q8_0, BRAID_TYPE_Q4_K, BRAID_TYPE_Q6_K};
    const int64_t K = 256 * 6;
    float *x = bd_mallocn((size_t)K, 4);
    int n_checked = 0;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const bd_gemmq_ops *o = bd_gemmq_get(types[ti]);
        const bd_dot_traits *dt = bd_dot_traits_get(types[ti]);
        if (!o || !o->quantize || !dt) continue; /* this type or level quantizes with dot.h's function itself */
        const size_t xrow = bd_row_size(dt->vec_dot_type, K);
        uint8_t *a = bd_malloc(xrow), *b = bd_malloc(xrow);
        for (int64_t i = 0; i < K; i++) x[i] = frand() * 3.0f;
        for (int64_t i = 256; i < 512; i++) x[i] = 0.0f;                     /* all-zero block */
        x[520] = 5.0f, x[600] = -5.0f;                                        /* tie in magnitude: first wins */
        x[770] = -7.0f, x[900] = 7.0f;
        x[1030] = NAN, x[1100] = INFINITY;                                    /* NaN never wins; inf does */
        x[1300] = -0.0f, x[1301] = 1e-30f;
        o->quantize(x, a, K);
        dt->from_float(x, b, K);
        CHECK(!memcmp(a, b, xrow), "type %u level %d: the GEMM's activation quantizer gives dot.h's bytes", types[ti],
              bd_simd());
        n_checked++;
        bd_free(a);
        bd_free(b);
    }
    /* the AVX2 and AVX-512 GEMMs bring their own Q8_K quantizer: it must have been checked */
    if (BD_HAVE_X86 && bd_simd() >= BD_SIMD_AVX2) CHECK(n_checked >= 2, "level %d: %d GEMM quantizers checked", bd_simd(), n_checked);
    bd_free(x);
}

int main(void) {
    bd_threadpool *tp = NULL;
    CHECK_STATUS(bd_threadpool_new(4, &tp), BRAID_OK);
    test_f32(tp);
    /* every level of braid's kernels (dequantization, F32 tiles, and the dot products with them: one dispatch) */
    int top = bd_simd_override(BD_SIMD_AVX512);
    for (int lv = 0; lv <= top; lv++) {
        bd_simd_override(lv);
        test_types(tp);
    }
    bd_simd_override(top);
    /* the equality, at every kernel level (the integer GEMMs at the top one, vec_dot under it) */
    bd_threadpool *tp2 = NULL, *tp3 = NULL;
    CHECK_STATUS(bd_threadpool_new(2, &tp2), BRAID_OK);
    CHECK_STATUS(bd_threadpool_new(3, &tp3), BRAID_OK);
    for (int lv = 0; lv <= top; lv++) {
        bd_simd_override(lv);
        test_vec_dot_equality(tp2, tp3);
        /* the AVX2 kernels without and (where the CPU has it) with AVX-VNNI */
        if (lv == BD_SIMD_AVX2)
            for (int v = 0; v <= 1; v++)
                if (bd_gemmq_avx_vnni_override(v) == v) test_vec_dot_equality(tp2, tp3);
        bd_gemmq_avx_vnni_override(-1);
    }
    bd_simd_override(top);
    bd_threadpool_free(tp2);
    bd_threadpool_free(tp3);
    for (int lv = 0; lv <= top; lv++) {
        bd_simd_override(lv);
        test_gemmq_quantize();
    }
    bd_simd_override(top);

    float w[4] = {1, 2, 3, 4}, xx[2] = {1, 1}, yy[2];
    CHECK_STATUS(bd_matmul(NULL, 99, w, 2, 2, xx, 2, 1, yy, 2, NULL, 0), BRAID_E_UNSUPPORTED);
    CHECK_STATUS(bd_matmul(NULL, BRAID_TYPE_F32, w, 2, 2, xx, 1, 1, yy, 2, NULL, 0), BRAID_E_INVALID);
    CHECK_STATUS(bd_matmul(NULL, BRAID_TYPE_F32, w, 0, 2, xx, 2, 1, yy, 2, NULL, 0), BRAID_E_INVALID);
    CHECK_STATUS(bd_matmul(NULL, BRAID_TYPE_F32, w, 2, 2, xx, 2, 0, yy, 2, NULL, 0), BRAID_OK);
    bd_threadpool_free(tp);
    TEST_MAIN_END();
}
