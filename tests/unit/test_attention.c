/* test_attention.c — attention over explicit cell lists against a double-precision reference: GQA, F32 and F16
 * K/V storage, queries interleaved with other data (qwen35's gate), cells out of order and shared between
 * queries, a query with no visible cell, every SIMD level, and 1 vs N threads bit for bit.
 *
 * Tolerance, per query and head, derived from the float operations: each score is a float dot of hd products
 * times scale, so its error is at most E = 2·hd·u·scale·max_i Σ_d|q_d·k_id|; softmax turns score errors into
 * relative errors of the weights of at most 2E, plus (8 + range)·u for the expf of the float difference to the
 * max (range = max score − min score) and the normalisation; the weighted sum of V adds n·u relative. So
 * |o − ref| <= (2E + (8 + range + n)·u)·max_i |v_i| (+1e-30). F16 storage is exact in the reference (it reads the
 * same rounded values). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "base/threadpool.h"
#include "tensor/ops.h"
#include "tensor/simd.h"
#include "tensor/types.h"
#include "test.h"

#define U ((double)FLT_EPSILON)

static uint64_t rng = 0xD1B54A32D192ED03ull;
static uint32_t urand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
static float frand(void) { return (float)(urand() >> 8) * (1.0f / 8388608.0f) - 1.0f; }

static double kv_at(const bd_attn *a, const void *base, size_t cell_bytes, size_t head_bytes, int cell, int head,
                    int d) {
    const char *p = (const char *)base + (size_t)cell * cell_bytes + (size_t)head * head_bytes;
    return a->kv_type == BD_TYPE_F16 ? bd_fp16_to_fp32(((const uint16_t *)p)[d]) : ((const float *)p)[d];
}

static void run_case(bd_threadpool *tp, int lv, int n_head, int n_head_kv, int hd, uint32_t kv_type, int T,
                     int n_cells) {
    const size_t es = kv_type == BD_TYPE_F16 ? 2 : 4;
    /* cells hold K and V of every KV head plus some padding, like a kv cache row */
    const size_t cell_bytes = (size_t)n_head_kv * hd * es + 16;
    char *K = bd_malloc(cell_bytes * (size_t)n_cells), *V = bd_malloc(cell_bytes * (size_t)n_cells);
    for (size_t i = 0; i < cell_bytes * (size_t)n_cells / es; i++) {
        float a = frand() * 2, b = frand();
        if (kv_type == BD_TYPE_F16) {
            ((uint16_t *)K)[i] = bd_fp32_to_fp16(a);
            ((uint16_t *)V)[i] = bd_fp32_to_fp16(b);
        } else {
            ((float *)K)[i] = a;
            ((float *)V)[i] = b;
        }
    }
    bd_attn a = {n_head, n_head_kv, hd, 1.0f / sqrtf((float)hd), kv_type, K, V, cell_bytes, cell_bytes,
                 (size_t)hd * es, (size_t)hd * es};
    /* q interleaved with a gate: head h at h*2hd */
    const int64_t ldq = (int64_t)n_head * 2 * hd + 3, ldo = (int64_t)n_head * hd + 5;
    float *q = bd_mallocn((size_t)(T * ldq), 4), *o = bd_mallocn((size_t)(T * ldo), 4), *o2 = bd_mallocn((size_t)(T * ldo), 4);
    for (int64_t i = 0; i < T * ldq; i++) q[i] = frand() * 3;
    for (int64_t i = 0; i < T * ldo; i++) o[i] = o2[i] = 12345.0f;
    /* visibility: a shuffled cell order; query t sees a prefix of it (shared list), query 0 sees none */
    int32_t *order = bd_mallocn((size_t)n_cells, 4);
    for (int i = 0; i < n_cells; i++) order[i] = i;
    for (int i = n_cells - 1; i > 0; i--) {
        int j = (int)(urand() % (uint32_t)(i + 1));
        int32_t tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
    const int32_t **vis = bd_mallocn((size_t)T, sizeof *vis);
    int32_t *nv = bd_mallocn((size_t)T, 4);
    for (int t = 0; t < T; t++) {
        vis[t] = order;
        nv[t] = t == 0 ? 0 : (int32_t)(n_cells - (T - 1 - t) * (n_cells / (2 * T)));
    }
    int nth = bd_threadpool_size(tp);
    int64_t maxv = 0;
    for (int t = 0; t < T; t++) maxv = nv[t] > maxv ? nv[t] : maxv;
    size_t ss = bd_attention_scratch_size(&a, maxv, nth);
    void *scratch = bd_malloc(ss);
    CHECK_STATUS(bd_attention(NULL, &a, T, q, ldq, 2 * hd, (const int32_t *const *)vis, nv, o, ldo, scratch, ss), BRAID_OK);
    CHECK_STATUS(bd_attention(tp, &a, T, q, ldq, 2 * hd, (const int32_t *const *)vis, nv, o2, ldo, scratch, ss), BRAID_OK);
    CHECK(!memcmp(o, o2, (size_t)(T * ldo) * 4), "attention level %d: 1 vs %d threads", lv, nth);

    const int grp = n_head / n_head_kv;
    double worst = 0;
    int zeros_ok = 1, pad_ok = 1;
    double *s = bd_mallocn((size_t)n_cells, 8);
    for (int t = 0; t < T; t++) {
        for (int h = 0; h < n_head; h++) {
            const int j = h / grp, n = nv[t];
            const float *qh = q + t * ldq + h * 2 * hd;
            float *oh = o + t * ldo + h * hd;
            if (n == 0) {
                for (int d = 0; d < hd; d++) zeros_ok &= oh[d] == 0.0f;
                continue;
            }
            double mx = -INFINITY, mn = INFINITY, sum = 0, qkmax = 0, vmax = 0;
            for (int i = 0; i < n; i++) {
                double dot = 0, adot = 0;
                for (int d = 0; d < hd; d++) {
                    double kd = kv_at(&a, K, cell_bytes, a.k_head_bytes, order[i], j, d);
                    dot += qh[d] * kd;
                    adot += fabs(qh[d] * kd);
                    vmax = fmax(vmax, fabs(kv_at(&a, V, cell_bytes, a.v_head_bytes, order[i], j, d)));
                }
                s[i] = dot * a.scale;
                qkmax = fmax(qkmax, adot);
                mx = fmax(mx, s[i]);
                mn = fmin(mn, s[i]);
            }
            for (int i = 0; i < n; i++) sum += exp(s[i] - mx);
            const double E = 2 * hd * U * a.scale * qkmax;
            const double tol = (2 * E + (8 + (mx - mn) + n) * U) * vmax + 1e-30;
            for (int d = 0; d < hd; d++) {
                double ref = 0;
                for (int i = 0; i < n; i++)
                    ref += exp(s[i] - mx) / sum * kv_at(&a, V, cell_bytes, a.v_head_bytes, order[i], j, d);
                worst = fmax(worst, fabs(oh[d] - ref) / tol);
            }
        }
        for (int64_t d = (int64_t)n_head * hd; d < ldo; d++) pad_ok &= o[t * ldo + d] == 12345.0f;
    }
    CHECK(worst <= 1, "attention level %d heads %d/%d hd %d type %u T %d cells %d: %.3g of tolerance", lv, n_head,
          n_head_kv, hd, kv_type, T, n_cells, worst);
    CHECK(zeros_ok, "a query that sees nothing gets zeros");
    CHECK(pad_ok, "attention writes only n_head*head_dim outputs per token");
    CHECK_STATUS(bd_attention(tp, &a, T, q, ldq, 2 * hd, (const int32_t *const *)vis, nv, o2, ldo, scratch, ss - 4),
                 BRAID_E_INVALID);
    bd_free(K);
    bd_free(V);
    bd_free(q);
    bd_free(o);
    bd_free(o2);
    bd_free(order);
    bd_free(vis);
    bd_free(nv);
    bd_free(scratch);
    bd_free(s);
}

int main(void) {
    bd_threadpool *tp = NULL;
    CHECK_STATUS(bd_threadpool_new(3, &tp), BRAID_OK);
    int top = bd_simd_override(BD_SIMD_AVX512);
    for (int lv = 0; lv <= top; lv++) {
        bd_simd_override(lv);
        for (int ty = 0; ty < 2; ty++) {
            uint32_t kt = ty ? BD_TYPE_F16 : BD_TYPE_F32;
            run_case(tp, lv, 4, 4, 16, kt, 5, 9);
            run_case(tp, lv, 8, 2, 64, kt, 7, 40);
            run_case(tp, lv, 6, 2, 20, kt, 4, 13);  /* head size not a multiple of the vector width */
            run_case(tp, lv, 16, 4, 256, kt, 3, 70); /* qwen35-like head size */
            run_case(tp, lv, 2, 1, 128, kt, 1, 600);  /* decode over a long context */
        }
    }
    bd_attn bad = {4, 3, 16, 1.0f, BD_TYPE_F32, NULL, NULL, 0, 0, 0, 0};
    float qq[64] = {0}, oo[64];
    int32_t n0 = 0;
    const int32_t *v0[1] = {&n0};
    CHECK_STATUS(bd_attention(NULL, &bad, 1, qq, 64, 16, v0, &n0, oo, 64, oo, sizeof oo), BRAID_E_INVALID);
    bad.n_head_kv = 4;
    bad.kv_type = BD_TYPE_Q8_0;
    CHECK_STATUS(bd_attention(NULL, &bad, 1, qq, 64, 16, v0, &n0, oo, 64, oo, sizeof oo), BRAID_E_INVALID);
    bd_threadpool_free(tp);
    TEST_MAIN_END();
}
