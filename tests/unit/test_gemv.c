/* test_gemv.c — the decode path gives vec_dot's bits: for every weight type, every gemv kernel output (any run
 * of rows, odd counts and offsets included) and every bd_matmul / bd_matmul_multi output for a few tokens (any
 * thread count, several products in one dispatch, mixed types) equals the type's vec_dot (dot.h) on that
 * weight row and that converted activation row, bit for bit. */
#include <string.h>

#include "base/alloc.h"
#include "base/threadpool.h"
#include "tensor/dot.h"
#include "tensor/gemv.h"
#include "tensor/matmul.h"
#include "tensor/simd.h"
#include "tensor/types.h"
#include "test.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* uniform in [-1, 1), with an occasional large value (wide block ranges) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    float v = (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
    return (rng & 63) == 0 ? v * 50.0f : v;
}

static const uint32_t types[] = {BRAID_TYPE_F16,  BRAID_TYPE_BF16,   BRAID_TYPE_Q8_0,  BRAID_TYPE_Q4_0,
                                 BRAID_TYPE_Q4_K,  BRAID_TYPE_Q5_K,   BRAID_TYPE_Q6_K,  BRAID_TYPE_Q4_1,
                                 BRAID_TYPE_Q5_0,  BRAID_TYPE_Q5_1,   BRAID_TYPE_Q2_K,  BRAID_TYPE_Q3_K,
                                 BRAID_TYPE_IQ4_NL, BRAID_TYPE_IQ4_XS, BRAID_TYPE_MXFP4};

/* A random matrix of N rows of K elements of type wt (its reference quantizer); caller frees. */
static uint8_t *make_weights(uint32_t wt, int64_t N, int64_t K) {
    const bd_type_traits *tt = bd_type_traits_get(wt);
    const size_t wrow = bd_row_size(wt, K);
    uint8_t *W = bd_malloc(wrow * (size_t)N);
    float *row = bd_mallocn((size_t)K, sizeof(float));
    for (int64_t n = 0; n < N; n++) {
        for (int64_t k = 0; k < K; k++) row[k] = frand();
        tt->from_float(row, W + (size_t)n * wrow, K);
    }
    bd_free(row);
    return W;
}

/* The element counts tried for a type: around its block size, with tails that are not multiples of the
 * kernels' unrolling. */
static int row_lengths(uint32_t wt, int64_t *K) {
    const int64_t bs = bd_type_traits_get(wt)->blck_size;
    if (bs == 256) return K[0] = 256, K[1] = 1024, K[2] = 2304, 3;
    if (bs == 32) return K[0] = 32, K[1] = 96, K[2] = 256, K[3] = 1056, 4;
    return K[0] = 16, K[1] = 100, K[2] = 1024, K[3] = 1000, 4;
}

static void test_kernels(void) {
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const uint32_t wt = types[ti];
        const bd_dot_traits *dt = bd_dot_traits_get(wt);
        bd_gemv_fn gemv = bd_gemv_get(wt);
        if (!gemv) continue; /* no kernel at this level: the decode path loops over vec_dot itself */
        int64_t Ks[4];
        const int nk = row_lengths(wt, Ks);
        for (int ki = 0; ki < nk; ki++) {
            const int64_t K = Ks[ki], N = 45;
            const size_t wrow = bd_row_size(wt, K), xrow = bd_row_size(dt->vec_dot_type, K);
            uint8_t *W = make_weights(wt, N, K);
            uint8_t *xq = bd_malloc(xrow);
            float *x = bd_mallocn((size_t)K, sizeof(float)), ref[45], got[46];
            for (int64_t k = 0; k < K; k++) x[k] = frand();
            dt->from_float(x, xq, K);
            for (int64_t n = 0; n < N; n++) dt->vec_dot(K, &ref[n], W + (size_t)n * wrow, xq);
            int bad = 0;
            /* every run length 1..18 at a few offsets, and the whole matrix */
            for (int64_t nr = 1; nr <= 18; nr++)
                for (int64_t r0 = 0; r0 + nr <= N; r0 += 13) {
                    got[nr] = -7.0f;
                    gemv(K, got, W + (size_t)r0 * wrow, wrow, nr, xq);
                    bad += memcmp(got, ref + r0, (size_t)nr * sizeof(float)) != 0;
                    bad += got[nr] != -7.0f; /* nothing written past the run */
                }
            gemv(K, got, W, wrow, N, xq);
            bad += memcmp(got, ref, (size_t)N * sizeof(float)) != 0;
            CHECK(bad == 0, "gemv %s K=%lld: %d runs differ from vec_dot", bd_type_traits_get(wt)->name, (long long)K,
                  bad);
            bd_free(W);
            bd_free(xq);
            bd_free(x);
        }
    }
}

/* y [T][ldy] against vec_dot of every (row, token); returns the number of differing outputs. */
static int count_diff(uint32_t wt, const uint8_t *W, int64_t N, int64_t K, const float *x, int64_t T,
                      const float *y, int64_t ldy) {
    const bd_dot_traits *dt = bd_dot_traits_get(wt);
    const size_t wrow = bd_row_size(wt, K);
    uint8_t *xq = bd_malloc(bd_row_size(dt->vec_dot_type, K));
    int bad = 0;
    for (int64_t t = 0; t < T; t++) {
        dt->from_float(x + t * K, xq, K);
        for (int64_t n = 0; n < N; n++) {
            float r;
            dt->vec_dot(K, &r, W + (size_t)n * wrow, xq);
            bad += memcmp(&r, &y[t * ldy + n], sizeof r) != 0;
        }
    }
    bd_free(xq);
    return bad;
}

static void test_matmul(bd_threadpool **pools, int n_pools) {
    const int64_t K = 512, Ts[] = {1, 2, 5, 15};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const uint32_t wt = types[ti];
        const int64_t N = 203;
        uint8_t *W = make_weights(wt, N, K);
        for (size_t tk = 0; tk < sizeof Ts / sizeof Ts[0]; tk++) {
            const int64_t T = Ts[tk], ldy = N + 3;
            float *x = bd_mallocn((size_t)(T * K), sizeof(float)), *y = bd_mallocn((size_t)(T * ldy), sizeof(float));
            for (int64_t i = 0; i < T * K; i++) x[i] = frand();
            const size_t ss = bd_matmul_scratch_size(wt, K, T);
            void *scratch = bd_malloc(ss);
            for (int p = 0; p < n_pools; p++) {
                CHECK_STATUS(bd_matmul(pools[p], wt, W, N, K, x, K, T, y, ldy, scratch, ss), BRAID_OK);
                int bad = count_diff(wt, W, N, K, x, T, y, ldy);
                CHECK(bad == 0, "matmul %s T=%lld threads=%d: %d outputs differ from vec_dot",
                      bd_type_traits_get(wt)->name, (long long)T, bd_threadpool_size(pools[p]), bad);
            }
            bd_free(scratch);
            bd_free(x);
            bd_free(y);
        }
        bd_free(W);
    }
}

/* Several products of one input in one dispatch, same type and mixed types (several conversions). */
static void test_multi(bd_threadpool **pools, int n_pools) {
    const int64_t K = 768;
    const uint32_t sets[][3] = {{BRAID_TYPE_Q8_0, BRAID_TYPE_Q8_0, BRAID_TYPE_Q8_0},
                                {BRAID_TYPE_Q4_K, BRAID_TYPE_Q6_K, BRAID_TYPE_Q4_K},
                                {BRAID_TYPE_F16, BRAID_TYPE_Q8_0, BRAID_TYPE_Q6_K}};
    const int64_t Ns[3] = {97, 1, 40};
    for (size_t si = 0; si < sizeof sets / sizeof sets[0]; si++)
        for (int64_t T = 1; T <= 3; T += 2) {
            uint8_t *W[3];
            float *y[3];
            bd_matmul_op ops[3];
            size_t ss = 0;
            float *x = bd_mallocn((size_t)(T * K), sizeof(float));
            for (int64_t i = 0; i < T * K; i++) x[i] = frand();
            for (int i = 0; i < 3; i++) {
                W[i] = make_weights(sets[si][i], Ns[i], K);
                y[i] = bd_mallocn((size_t)(T * Ns[i]), sizeof(float));
                ops[i] = (bd_matmul_op){sets[si][i], W[i], Ns[i], y[i], Ns[i]};
                size_t s = bd_matmul_scratch_size(sets[si][i], K, T);
                if (s > ss) ss = s;
            }
            void *scratch = bd_malloc(ss);
            for (int p = 0; p < n_pools; p++) {
                CHECK_STATUS(bd_matmul_multi(pools[p], ops, 3, K, x, K, T, scratch, ss), BRAID_OK);
                int bad = 0;
                for (int i = 0; i < 3; i++) bad += count_diff(sets[si][i], W[i], Ns[i], K, x, T, y[i], Ns[i]);
                CHECK(bad == 0, "matmul_multi set %zu T=%lld threads=%d: %d outputs differ from vec_dot", si,
                      (long long)T, bd_threadpool_size(pools[p]), bad);
            }
            CHECK_STATUS(bd_matmul_multi(pools[0], ops, 3, K - 1, x, K, T, scratch, ss), BRAID_E_INVALID);
            bd_free(scratch);
            bd_free(x);
            for (int i = 0; i < 3; i++) bd_free(W[i]), bd_free(y[i]);
        }
}

int main(void) {
    bd_threadpool *pools[3] = {NULL, NULL, NULL};
    CHECK_STATUS(bd_threadpool_new(2, &pools[1]), BRAID_OK);
    CHECK_STATUS(bd_threadpool_new(3, &pools[2]), BRAID_OK);
    /* every kernel level this CPU has (the dot products stay at dot.h's level: the quantized ones give the same
     * bits at every level, and the kernels that call the dispatcher's vec_dot give its bits by construction) */
    const int top = bd_simd_override(BD_SIMD_AVX512);
    for (int lv = 0; lv <= top; lv++) {
        bd_simd_override(lv);
        if (lv >= BD_SIMD_AVX2 && BD_HAVE_X86) /* the x86 levels have a kernel for every type (NEON: some) */
            for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
                CHECK(bd_gemv_get(types[ti]) != NULL, "%s: a gemv kernel at level %d", bd_type_traits_get(types[ti])->name,
                      lv);
        test_kernels();
        test_matmul(pools, 3);
        test_multi(pools, 3);
    }
    bd_simd_override(top);
    bd_threadpool_free(pools[1]);
    bd_threadpool_free(pools[2]);
    TEST_MAIN_END();
}
