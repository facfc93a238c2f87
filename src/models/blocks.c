/* blocks.c — the matrix product and row lookup of blocks.h. Weight rows are split across threads; each output
 * element is one vec_dot of a weight row with a converted activation row, identical for any split. */
#include "models/blocks.h"

#include <string.h>

#include "tensor/dot.h"
#include "tensor/types.h"

float blk_dot_f32(const float *a, const float *b, int64_t n) {
    /* Eight independent partial sums let the compiler vectorize without -ffast-math. */
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += a[i + j] * b[i + j];
    float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; i < n; i++) r += a[i] * b[i];
    return r;
}

size_t blk_matmul_wsize(uint32_t type, int64_t n_in, int32_t T) {
    const bd_dot_traits *dt = bd_dot_traits_get(type);
    if (!dt) return 0;
    return bd_row_size(dt->vec_dot_type, n_in) * (size_t)T;
}

typedef struct mm_task {
    const bd_weight *w;
    const bd_dot_traits *dt;
    const char *xq; /* T converted activation rows */
    size_t xrs;
    int32_t T;
    float *y;
    int phase; /* 0: convert activations, 1: dot products */
    const float *x;
} mm_task;

static void mm_run(void *arg, int ith, int nth) {
    const mm_task *a = arg;
    const int64_t K = a->w->n_in, N = a->w->n_out;
    if (a->phase == 0) {
        int64_t t0, t1;
        bd_split(a->T, ith, nth, &t0, &t1);
        for (int64_t t = t0; t < t1; t++) a->dt->from_float(a->x + t * K, (char *)a->xq + t * a->xrs, K);
        return;
    }
    int64_t n0, n1;
    bd_split(N, ith, nth, &n0, &n1);
    for (int64_t n = n0; n < n1; n++) {
        const void *wr = bd_weight_row(a->w, n);
        for (int32_t t = 0; t < a->T; t++) a->dt->vec_dot(K, &a->y[(size_t)t * N + n], wr, a->xq + t * a->xrs);
    }
}

void blk_matmul(bd_threadpool *tp, const bd_weight *w, const float *x, int32_t T, float *y, void *wbuf) {
    const bd_dot_traits *dt = bd_dot_traits_get(w->type);
    mm_task a = {.w = w, .dt = dt, .xq = wbuf, .xrs = bd_row_size(dt->vec_dot_type, w->n_in), .T = T, .y = y,
                 .x = x};
    /* Small products are not worth waking the workers for. */
    bd_threadpool *pool = (int64_t)T * w->n_in * w->n_out < 32768 ? NULL : tp;
    a.phase = 0;
    bd_threadpool_run(pool, mm_run, &a);
    a.phase = 1;
    bd_threadpool_run(pool, mm_run, &a);
}

void blk_get_row(const bd_weight *w, int64_t r, float *out) {
    if (w->type == BRAID_TYPE_F32) {
        memcpy(out, bd_weight_row(w, r), (size_t)w->n_in * sizeof(float));
        return;
    }
    bd_type_traits_get(w->type)->to_float(bd_weight_row(w, r), out, w->n_in);
}
