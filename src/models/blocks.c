/* blocks.c — the math blocks of blocks.h, written plainly. Matrix products dispatch on the weight type through
 * tensor/dot.h; everything else is float arithmetic as in ggml's CPU backend. */
#include "models/blocks.h"

#include <math.h>
#include <string.h>

#include "tensor/dot.h"
#include "tensor/types.h"

float bd_dot_f32(const float *a, const float *b, int64_t n) {
    /* Eight independent partial sums: lets the compiler vectorize without -ffast-math. */
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += a[i + j] * b[i + j];
    float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; i < n; i++) r += a[i] * b[i];
    return r;
}

size_t bd_matmul_wsize(uint32_t type, int64_t n_in, int32_t T) {
    if (type == BRAID_TYPE_F32) return 0;
    const bd_dot_traits *dt = bd_dot_traits_get(type);
    if (!dt) return 0;
    return bd_row_size(dt->vec_dot_type, n_in) * (size_t)T;
}

void bd_matmul(struct bd_threadpool *tp, const bd_weight *w, const float *x, int32_t T, float *y, void *wbuf) {
    (void)tp;
    const int64_t K = w->n_in, N = w->n_out;
    if (w->type == BRAID_TYPE_F32) {
        for (int64_t n = 0; n < N; n++) {
            const float *wr = (const float *)bd_weight_row(w, n);
            for (int32_t t = 0; t < T; t++) y[(size_t)t * N + n] = bd_dot_f32(wr, x + (size_t)t * K, K);
        }
        return;
    }
    const bd_dot_traits *dt = bd_dot_traits_get(w->type);
    size_t xrs = bd_row_size(dt->vec_dot_type, K);
    char *xq = wbuf;
    for (int32_t t = 0; t < T; t++) dt->from_float(x + (size_t)t * K, xq + (size_t)t * xrs, K);
    for (int64_t n = 0; n < N; n++) {
        const void *wr = bd_weight_row(w, n);
        for (int32_t t = 0; t < T; t++) dt->vec_dot(K, &y[(size_t)t * N + n], wr, xq + (size_t)t * xrs);
    }
}

void bd_get_row(const bd_weight *w, int64_t r, float *out) {
    if (w->type == BRAID_TYPE_F32) {
        memcpy(out, bd_weight_row(w, r), (size_t)w->n_in * sizeof(float));
        return;
    }
    bd_type_traits_get(w->type)->to_float(bd_weight_row(w, r), out, w->n_in);
}

void bd_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)x[i] * (double)x[i];
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale;
    if (w)
        for (int64_t i = 0; i < n; i++) y[i] *= w[i];
}

void bd_l2norm(float *x, int64_t n, float eps) {
    /* ggml: rms_norm(x, eps/n) * (1/sqrt(n)), i.e. x / sqrt(Σx² + eps) up to rounding. */
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)x[i] * (double)x[i];
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps / (float)n);
    const float inv_sqrt_n = 1.0f / sqrtf((float)n);
    for (int64_t i = 0; i < n; i++) x[i] = (x[i] * scale) * inv_sqrt_n;
}

float bd_silu(float x) { return x / (1.0f + expf(-x)); }
float bd_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
float bd_softplus(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }
