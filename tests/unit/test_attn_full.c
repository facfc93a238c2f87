/* test_attn_full.c — bd_attention_full (a vision encoder's unmasked attention) against a double-precision
 * reference: q, k and v interleaved in one fused row as the ViT keeps them, head sizes that are and are not
 * multiples of the vector widths (72 is Qwen's), one or several column panels of the head (over 80), token
 * counts that leave partial query blocks and partial column vectors, every SIMD level, and 1 vs N threads bit
 * for bit. Also: it writes only its n_head*head_dim outputs per token, and refuses a short scratch.
 *
 * Tolerance per query and head, from the float operations (as test_attention.c): each score is a float dot of
 * hd products times scale, error at most E = 2·hd·u·scale·max_i Σ_d|q_d·k_id|; the softmax turns that into
 * relative weight errors of at most 2E, plus (8 + range)·u for expf and the scaling; the weights and the
 * weighted sum of V are each sums of n floats (n·u relative each). So |o − ref| <= (2E + (8 + range + 2n)·u) ·
 * max_i |v_i|. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "base/threadpool.h"
#include "tensor/ops.h"
#include "tensor/simd.h"
#include "test.h"

#define U ((double)FLT_EPSILON)

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t urand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
static float frand(void) { return (float)(urand() >> 8) * (1.0f / 8388608.0f) - 1.0f; }

static void run_case(bd_threadpool *tp, int lv, int H, int hd, int T) {
    const int64_t E = (int64_t)H * hd, ld = 3 * E + 5, ldo = E + 3; /* fused rows q | k | v, then padding */
    float *qkv = bd_mallocn((size_t)(T * ld), 4), *o = bd_mallocn((size_t)(T * ldo), 4);
    float *o2 = bd_mallocn((size_t)(T * ldo), 4);
    for (int64_t i = 0; i < T * ld; i++) qkv[i] = frand() * 2;
    for (int64_t i = 0; i < T * ldo; i++) o[i] = o2[i] = 12345.0f;
    const float scale = 1.0f / sqrtf((float)hd);
    const float *q = qkv, *k = qkv + E, *v = qkv + 2 * E;
    size_t ss = bd_attention_full_scratch_size(T, H, hd, bd_threadpool_size(tp));
    void *scratch = bd_malloc(ss);
    CHECK_STATUS(bd_attention_full(NULL, T, H, hd, scale, q, ld, k, ld, v, ld, o, ldo, scratch, ss), BRAID_OK);
    CHECK_STATUS(bd_attention_full(tp, T, H, hd, scale, q, ld, k, ld, v, ld, o2, ldo, scratch, ss), BRAID_OK);
    CHECK(!memcmp(o, o2, (size_t)(T * ldo) * 4), "attention_full level %d: 1 vs %d threads", lv,
          bd_threadpool_size(tp));

    double worst = 0, *s = bd_mallocn((size_t)T, 8);
    int pad_ok = 1;
    for (int t = 0; t < T; t++) {
        for (int h = 0; h < H; h++) {
            const float *qh = q + t * ld + h * hd;
            double mx = -INFINITY, mn = INFINITY, sum = 0, qkmax = 0, vmax = 0;
            for (int i = 0; i < T; i++) {
                double dot = 0, adot = 0;
                for (int d = 0; d < hd; d++) {
                    const double kd = k[i * ld + h * hd + d];
                    dot += qh[d] * kd;
                    adot += fabs(qh[d] * kd);
                    vmax = fmax(vmax, fabs(v[i * ld + h * hd + d]));
                }
                s[i] = dot * scale;
                qkmax = fmax(qkmax, adot);
                mx = fmax(mx, s[i]);
                mn = fmin(mn, s[i]);
            }
            for (int i = 0; i < T; i++) sum += exp(s[i] - mx);
            const double Es = 2 * hd * U * scale * qkmax;
            const double tol = (2 * Es + (8 + (mx - mn) + 2 * T) * U) * vmax + 1e-30;
            for (int d = 0; d < hd; d++) {
                double ref = 0;
                for (int i = 0; i < T; i++) ref += exp(s[i] - mx) / sum * v[i * ld + h * hd + d];
                worst = fmax(worst, fabs(o[t * ldo + h * hd + d] - ref) / tol);
            }
        }
        for (int64_t d = E; d < ldo; d++) pad_ok &= o[t * ldo + d] == 12345.0f;
    }
    CHECK(worst <= 1, "attention_full level %d heads %d hd %d T %d: %.3g of tolerance", lv, H, hd, T, worst);
    CHECK(pad_ok, "attention_full writes only n_head*head_dim outputs per token");
    CHECK_STATUS(bd_attention_full(tp, T, H, hd, scale, q, ld, k, ld, v, ld, o2, ldo, scratch, ss - 4),
                 BRAID_E_INVALID);
    bd_free(qkv);
    bd_free(o);
    bd_free(o2);
    bd_free(s);
    bd_free(scratch);
}

int main(void) {
    bd_threadpool *tp = NULL;
    CHECK_STATUS(bd_threadpool_new(3, &tp), BRAID_OK);
    int top = bd_simd_override(BD_SIMD_AVX512);
    for (int lv = 0; lv <= top; lv++) {
        bd_simd_override(lv);
        run_case(tp, lv, 1, 8, 1);    /* one token */
        run_case(tp, lv, 3, 16, 5);   /* the test projectors' head size */
        run_case(tp, lv, 2, 72, 100); /* Qwen's head size; partial query block and column vectors */
        run_case(tp, lv, 1, 20, 49);
        run_case(tp, lv, 2, 96, 130); /* a head wider than one column panel */
    }
    float buf[64] = {0};
    CHECK_STATUS(bd_attention_full(NULL, 0, 1, 8, 1.0f, buf, 8, buf, 8, buf, 8, buf, 8, buf, sizeof buf),
                 BRAID_E_INVALID);
    CHECK_STATUS(bd_attention_full(NULL, 1, 2, 8, 1.0f, buf, 8, buf, 16, buf, 16, buf, 16, buf, sizeof buf),
                 BRAID_E_INVALID);
    bd_threadpool_free(tp);
    TEST_MAIN_END();
}
