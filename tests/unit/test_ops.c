/* test_ops.c — norms, activations, softmax and RoPE against straightforward double-precision references on
 * random data, at every SIMD level the CPU has, plus thread-count independence of the row variants.
 *
 * Tolerances (u = FLT_EPSILON = 2^-23):
 * - rmsnorm / l2norm: float mean, sqrt, division and two multiplies each add at most ~1 ulp: 4u·|ref|.
 * - silu, sigmoid, swiglu, gating: the vector expf is within ~2 ulp, then an add, a division and a multiply:
 *   8u·|ref| (+1e-37 where the true value underflows to a subnormal).
 * - softplus is ggml's formula log(1 + e^x) in float: rounding 1 + e^x costs up to u/2 absolute after the log,
 *   so 2u·max(1, |ref|) absolute.
 * - softmax: x - max is rounded in float (absolute error <= |x - max|·u/2, which becomes a relative error of
 *   exp), expf within ~2 ulp, the normalising sum in double: (8 + |x - max|)·u·|ref| + 1e-37.
 * - RoPE: ggml builds θ_k by k float multiplications, so θ itself is off from p·base^(-2k/n) by up to ~k ulp
 *   (radians!) — inherent, and what llama.cpp computes. The reference therefore rebuilds θ the same way and
 *   does the rest in double: 4u·max|x| per element. A second check against the exact formula for small
 *   positions (1e-4) proves the formula itself. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "base/threadpool.h"
#include "tensor/ops.h"
#include "tensor/simd.h"
#include "test.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

#define U ((double)FLT_EPSILON)

static void test_norms(bd_threadpool *tp, int lv) {
    const int64_t ns[] = {1, 7, 16, 64, 100, 1024, 1031};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        int64_t n = ns[i];
        float *x = bd_mallocn((size_t)n, 4), *w = bd_mallocn((size_t)n, 4), *y = bd_mallocn((size_t)n, 4);
        for (int64_t j = 0; j < n; j++) {
            x[j] = frand() * 3.0f;
            w[j] = 1.0f + frand() * 0.5f;
        }
        const float eps = 1e-6f;
        double ss = 0;
        for (int64_t j = 0; j < n; j++) ss += (double)x[j] * x[j];
        double rms = 1.0 / sqrt(ss / (double)n + eps), l2 = 1.0 / sqrt(ss + eps);
        double worst = 0, worst_nw = 0, worst_l2 = 0;
        bd_rmsnorm(y, x, w, n, eps);
        for (int64_t j = 0; j < n; j++) {
            double ref = x[j] * rms * w[j];
            worst = fmax(worst, fabs(y[j] - ref) / (4 * U * fabs(ref) + 1e-37));
        }
        bd_rmsnorm(y, x, NULL, n, eps);
        for (int64_t j = 0; j < n; j++) {
            double ref = x[j] * rms;
            worst_nw = fmax(worst_nw, fabs(y[j] - ref) / (4 * U * fabs(ref) + 1e-37));
        }
        bd_l2norm(y, x, n, eps);
        for (int64_t j = 0; j < n; j++) {
            double ref = x[j] * l2;
            worst_l2 = fmax(worst_l2, fabs(y[j] - ref) / (4 * U * fabs(ref) + 1e-37));
        }
        CHECK(worst <= 1, "rmsnorm level %d n=%lld: %.3g of tolerance", lv, (long long)n, worst);
        CHECK(worst_nw <= 1, "rmsnorm (no weight) level %d n=%lld: %.3g", lv, (long long)n, worst_nw);
        CHECK(worst_l2 <= 1, "l2norm level %d n=%lld: %.3g", lv, (long long)n, worst_l2);
        /* in place equals out of place */
        float *z = bd_mallocn((size_t)n, 4);
        memcpy(z, x, (size_t)n * 4);
        bd_rmsnorm(y, x, w, n, eps);
        bd_rmsnorm(z, z, w, n, eps);
        CHECK(!memcmp(y, z, (size_t)n * 4), "rmsnorm in place");
        bd_free(x);
        bd_free(w);
        bd_free(y);
        bd_free(z);
    }
    /* rows with strides, 1 vs N threads (big enough to be split) */
    const int64_t n = 128, rows = 300, ld = 160;
    float *x = bd_mallocn((size_t)(rows * ld), 4), *w = bd_mallocn((size_t)n, 4);
    float *y1 = bd_calloc((size_t)(rows * ld), 4), *yn = bd_calloc((size_t)(rows * ld), 4), *r = bd_mallocn((size_t)n, 4);
    for (int64_t j = 0; j < rows * ld; j++) x[j] = frand();
    for (int64_t j = 0; j < n; j++) w[j] = frand();
    bd_rmsnorm_rows(NULL, y1, ld, x, ld, w, n, rows, 1e-5f);
    bd_rmsnorm_rows(tp, yn, ld, x, ld, w, n, rows, 1e-5f);
    CHECK(!memcmp(y1, yn, (size_t)(rows * ld) * 4), "rmsnorm_rows: 1 vs N threads");
    int ok = 1;
    for (int64_t i = 0; i < rows; i++) {
        bd_rmsnorm(r, x + i * ld, w, n, 1e-5f);
        ok &= !memcmp(r, y1 + i * ld, (size_t)n * 4);
        for (int64_t j = n; j < ld; j++) ok &= y1[i * ld + j] == 0.0f;
    }
    CHECK(ok, "rmsnorm_rows = rmsnorm per row, padding untouched");
    bd_l2norm_rows(NULL, y1, ld, x, ld, n, rows, 1e-5f);
    bd_l2norm_rows(tp, yn, ld, x, ld, n, rows, 1e-5f);
    CHECK(!memcmp(y1, yn, (size_t)(rows * ld) * 4), "l2norm_rows: 1 vs N threads");
    bd_free(x);
    bd_free(w);
    bd_free(y1);
    bd_free(yn);
    bd_free(r);
}

static void test_acts(bd_threadpool *tp, int lv) {
    const int64_t n = 1000;
    float *x = bd_mallocn(n, 4), *u = bd_mallocn(n, 4), *y = bd_mallocn(n, 4);
    for (int64_t i = 0; i < n; i++) {
        x[i] = frand() * 30.0f;
        u[i] = frand() * 2.0f;
    }
    /* extremes: overflow of e^-x, underflow, zero, large */
    x[0] = -100.0f;
    x[1] = 100.0f;
    x[2] = 0.0f;
    x[3] = -88.0f;
    x[4] = 89.0f;
    x[5] = 1e-8f;
    double w_silu = 0, w_sig = 0, w_sp = 0, w_sw = 0, w_ms = 0;
    bd_silu(y, x, n);
    for (int64_t i = 0; i < n; i++) {
        double ref = x[i] / (1.0 + exp(-(double)x[i]));
        w_silu = fmax(w_silu, fabs(y[i] - ref) / (8 * U * fabs(ref) + 1e-37));
    }
    bd_sigmoid(y, x, n);
    for (int64_t i = 0; i < n; i++) {
        double ref = 1.0 / (1.0 + exp(-(double)x[i]));
        w_sig = fmax(w_sig, fabs(y[i] - ref) / (8 * U * fabs(ref) + 1e-37));
    }
    bd_softplus(y, x, n);
    for (int64_t i = 0; i < n; i++) {
        double ref = x[i] > 20 ? x[i] : log1p(exp((double)x[i]));
        w_sp = fmax(w_sp, fabs(y[i] - ref) / (2 * U * fmax(1.0, fabs(ref))));
    }
    bd_swiglu(y, x, u, n);
    for (int64_t i = 0; i < n; i++) {
        double ref = x[i] / (1.0 + exp(-(double)x[i])) * u[i];
        w_sw = fmax(w_sw, fabs(y[i] - ref) / (8 * U * fabs(ref) + 1e-37));
    }
    bd_mul_sigmoid(y, u, x, n);
    for (int64_t i = 0; i < n; i++) {
        double ref = u[i] / (1.0 + exp(-(double)x[i]));
        w_ms = fmax(w_ms, fabs(y[i] - ref) / (8 * U * fabs(ref) + 1e-37));
    }
    CHECK(w_silu <= 1, "silu level %d: %.3g of tolerance", lv, w_silu);
    CHECK(w_sig <= 1, "sigmoid level %d: %.3g", lv, w_sig);
    CHECK(w_sp <= 1, "softplus level %d: %.3g", lv, w_sp);
    CHECK(w_sw <= 1, "swiglu level %d: %.3g", lv, w_sw);
    CHECK(w_ms <= 1, "mul_sigmoid level %d: %.3g", lv, w_ms);
    y[0] = 0;
    bd_silu(y, (const float[]){NAN}, 1);
    CHECK(isnan(y[0]), "silu(NaN) is NaN");

    bd_add(y, x, u, n);
    int ok = 1;
    for (int64_t i = 0; i < n; i++) ok &= y[i] == x[i] + u[i];
    bd_mul(y, x, u, n);
    for (int64_t i = 0; i < n; i++) ok &= y[i] == x[i] * u[i];
    CHECK(ok, "add / mul exact");

    /* softmax, several lengths incl. a tail and a -inf entry (masked) */
    const int64_t lens[] = {1, 5, 16, 33, 1000};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        int64_t m = lens[li];
        for (int64_t i = 0; i < m; i++) x[i] = frand() * 20.0f;
        if (m > 3) x[2] = -INFINITY;
        double mx = -INFINITY, s = 0;
        for (int64_t i = 0; i < m; i++) mx = fmax(mx, x[i]);
        for (int64_t i = 0; i < m; i++) s += exp((double)x[i] - mx);
        bd_softmax(y, x, m);
        double worst = 0, tot = 0;
        for (int64_t i = 0; i < m; i++) {
            double ref = exp((double)x[i] - mx) / s;
            worst = fmax(worst, fabs(y[i] - ref) / ((8 + fabs(x[i] - mx)) * U * ref + 1e-37));
            tot += y[i];
        }
        CHECK(worst <= 1, "softmax level %d n=%lld: %.3g", lv, (long long)m, worst);
        CHECK(fabs(tot - 1) < 1e-5, "softmax sums to 1 (%.9f)", tot);
    }

    /* swiglu_rows: 1 vs N threads, = per row */
    const int64_t cols = 300, rows = 200, ld = 320;
    float *g = bd_mallocn((size_t)(rows * ld), 4), *uu = bd_mallocn((size_t)(rows * ld), 4);
    float *y1 = bd_calloc((size_t)(rows * ld), 4), *yn = bd_calloc((size_t)(rows * ld), 4);
    for (int64_t i = 0; i < rows * ld; i++) {
        g[i] = frand() * 8;
        uu[i] = frand();
    }
    bd_swiglu_rows(NULL, y1, ld, g, ld, uu, ld, cols, rows);
    bd_swiglu_rows(tp, yn, ld, g, ld, uu, ld, cols, rows);
    CHECK(!memcmp(y1, yn, (size_t)(rows * ld) * 4), "swiglu_rows: 1 vs N threads");
    bd_swiglu(y, g + 5 * ld, uu + 5 * ld, cols);
    CHECK(!memcmp(y, y1 + 5 * ld, (size_t)cols * 4), "swiglu_rows row = swiglu");
    bd_free(g);
    bd_free(uu);
    bd_free(y1);
    bd_free(yn);
    bd_free(x);
    bd_free(u);
    bd_free(y);
}

/* Double reference of one head with θ rebuilt as ggml does (float running product). comp[k] picks the position
 * component of pair k (or -1 for the non-M-RoPE modes, which use pos[0]). */
static void rope_ref(const bd_rope *r, const int32_t *pos4, const float *x, double *y, int hd) {
    const int half = r->n_rot / 2;
    const float ts = powf(r->freq_base, -2.0f / (float)r->n_rot);
    float th[4] = {(float)pos4[0], (float)pos4[1], (float)pos4[2], (float)pos4[3]};
    for (int i = 0; i < hd; i++) y[i] = x[i];
    const int *s = r->sections;
    int sect = s[0] + s[1] + s[2] + s[3];
    for (int k = 0; k < half; k++) {
        int c = 0;
        if (r->mode == BD_ROPE_IMROPE) {
            int sec = k % sect;
            /* the rule of architectures.md §1.6, written as a table lookup order */
            if (sec % 3 == 1 && sec < 3 * s[1]) c = 1;
            else if (sec % 3 == 2 && sec < 3 * s[2]) c = 2;
            else if (sec % 3 == 0 && sec < 3 * s[0]) c = 0;
            else c = 3;
        } else if (r->mode == BD_ROPE_MROPE) {
            int sec = k % sect;
            c = sec < s[0] ? 0 : sec < s[0] + s[1] ? 1 : sec < s[0] + s[1] + s[2] ? 2 : 3;
        }
        double t = (double)(th[c] * r->freq_scale);
        int i0 = r->mode == BD_ROPE_NORM ? 2 * k : k, i1 = r->mode == BD_ROPE_NORM ? 2 * k + 1 : k + half;
        double cs = cos(t) * r->attn_factor, sn = sin(t) * r->attn_factor;
        y[i0] = x[i0] * cs - x[i1] * sn;
        y[i1] = x[i0] * sn + x[i1] * cs;
        for (int j = 0; j < 4; j++) th[j] *= ts;
    }
}

static void test_rope(bd_threadpool *tp) {
    enum { hd = 64, nh = 3, T = 40 };
    const int64_t ldx = nh * hd * 2; /* heads interleaved with something else (like qwen35's gate) */
    float *x = bd_mallocn((size_t)(T * ldx), 4), *x0 = bd_mallocn((size_t)(T * ldx), 4);
    float *xn = bd_mallocn((size_t)(T * ldx), 4);
    double y[64];
    int32_t pos[T * 4], pos4[4];
    const bd_rope modes[] = {
        {BD_ROPE_NORM, 64, 10000.0f, 1.0f, 1.0f, {0}},
        {BD_ROPE_NEOX, 48, 1000000.0f, 0.5f, 1.0f, {0}},
        {BD_ROPE_IMROPE, 64, 10000000.0f, 1.0f, 1.0f, {11, 11, 10, 0}},
        {BD_ROPE_IMROPE, 32, 10000.0f, 1.0f, 1.0f, {2, 2, 1, 1}},
        {BD_ROPE_MROPE, 32, 10000.0f, 1.0f, 1.0f, {4, 6, 4, 2}},
    };
    for (size_t mi = 0; mi < sizeof modes / sizeof modes[0]; mi++) {
        const bd_rope *r = &modes[mi];
        int mrope = r->mode == BD_ROPE_IMROPE || r->mode == BD_ROPE_MROPE;
        int npp = mrope && mi != 2 ? 4 : 1;
        for (int i = 0; i < T * ldx; i++) x0[i] = x[i] = frand();
        for (int t = 0; t < T; t++)
            for (int c = 0; c < npp; c++) pos[t * npp + c] = c == 3 ? t % 3 : (t * 37 + c * 11) % 5000;
        bd_rope_rows(NULL, r, x, T, ldx, nh, 2 * hd, pos, npp);
        double worst = 0;
        int untouched = 1;
        for (int t = 0; t < T; t++) {
            for (int c = 0; c < 4; c++) pos4[c] = npp == 4 ? pos[t * 4 + c] : c < 3 ? pos[t] : 0;
            for (int h = 0; h < nh; h++) {
                const float *in = x0 + t * ldx + h * 2 * hd;
                const float *out = x + t * ldx + h * 2 * hd;
                rope_ref(r, pos4, in, y, hd);
                for (int i = 0; i < hd; i++) worst = fmax(worst, fabs(out[i] - y[i]) / (4 * U));
                for (int i = hd; i < 2 * hd; i++) untouched &= out[i] == in[i];
            }
        }
        CHECK(worst <= 1, "rope mode %d n_rot %d: %.3g of tolerance", r->mode, r->n_rot, worst);
        CHECK(untouched, "rope mode %d leaves the space between heads alone", r->mode);
        memcpy(xn, x0, (size_t)(T * ldx) * 4);
        bd_rope_rows(tp, r, xn, T, ldx, nh, 2 * hd, pos, npp);
        CHECK(!memcmp(x, xn, (size_t)(T * ldx) * 4), "rope mode %d: 1 vs N threads", r->mode);
    }
    /* The formula itself: exact angles for small positions. */
    {
        const bd_rope r = {BD_ROPE_NEOX, 64, 10000.0f, 1.0f, 1.0f, {0}};
        float cache[64];
        int32_t p = 3;
        bd_rope_cache(&r, &p, 1, cache);
        double worst = 0;
        for (int k = 0; k < 32; k++) {
            double th = 3.0 * pow(10000.0, -2.0 * k / 64.0);
            worst = fmax(worst, fabs(cache[2 * k] - cos(th)) + fabs(cache[2 * k + 1] - sin(th)));
        }
        CHECK(worst < 1e-4, "rope angles follow p·base^(-2k/n): %.3g", worst);
    }
    /* IMROPE of a text token with sections covering every sector is NEOX exactly (§1.6). */
    {
        const bd_rope im = {BD_ROPE_IMROPE, 64, 10000000.0f, 1.0f, 1.0f, {11, 11, 10, 0}};
        const bd_rope nx = {BD_ROPE_NEOX, 64, 10000000.0f, 1.0f, 1.0f, {0}};
        float c1[64], c2[64];
        int32_t p = 1234, p4[4] = {1234, 1234, 1234, 0};
        bd_rope_cache(&im, &p, 1, c1);
        bd_rope_cache(&nx, &p, 1, c2);
        CHECK(!memcmp(c1, c2, sizeof c1), "imrope text == neox");
        bd_rope_cache(&im, p4, 4, c2);
        CHECK(!memcmp(c1, c2, sizeof c1), "imrope 1 component == (p, p, p, 0)");
    }
    bd_free(x);
    bd_free(x0);
    bd_free(xn);
}

int main(void) {
    bd_threadpool *tp = NULL;
    CHECK_STATUS(bd_threadpool_new(3, &tp), BRAID_OK);
    int top = bd_simd_override(BD_SIMD_AVX512);
    for (int lv = 0; lv <= top; lv++) {
        bd_simd_override(lv);
        test_norms(tp, lv);
        test_acts(tp, lv);
    }
    bd_simd_override(top);
    test_rope(tp);
    bd_threadpool_free(tp);
    TEST_MAIN_END();
}
