/* blocks.c — the matrix product (tensor/matmul.h's kernels) and row lookup of blocks.h. */
#include "models/blocks.h"

#include <assert.h>
#include <string.h>

#include "tensor/matmul.h"

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

size_t blk_matmul_wsize(uint32_t type, int64_t n_in, int32_t T) { return bd_matmul_scratch_size(type, n_in, T); }

void blk_matmul(bd_threadpool *tp, const bd_weight *w, const float *x, int32_t T, float *y, void *wbuf) {
    /* Shapes and types were validated by the loader and the scratch sized by blk_matmul_wsize, so this
     * cannot fail; an assert guards the invariant. */
    braid_status st = bd_matmul(tp, w->type, w->data, w->n_out, w->n_in, x, w->n_in, T, y, w->n_out, wbuf,
                                bd_matmul_scratch_size(w->type, w->n_in, T));
    assert(st == BRAID_OK);
    (void)st;
}

void blk_matmul_multi(bd_threadpool *tp, const bd_weight *const *ws, float *const *ys, int n, const float *x,
                      int32_t T, void *wbuf) {
    bd_matmul_op ops[8];
    size_t ss = 0;
    assert(n >= 1 && n <= 8);
    for (int i = 0; i < n; i++) {
        ops[i] = (bd_matmul_op){ws[i]->type, ws[i]->data, ws[i]->n_out, ys[i], ws[i]->n_out};
        size_t s = bd_matmul_scratch_size(ws[i]->type, ws[i]->n_in, T);
        if (s > ss) ss = s;
    }
    braid_status st = bd_matmul_multi(tp, ops, n, ws[0]->n_in, x, ws[0]->n_in, T, wbuf, ss);
    assert(st == BRAID_OK);
    (void)st;
}

void blk_get_row(const bd_weight *w, int64_t r, float *out) {
    if (w->type == BRAID_TYPE_F32) {
        memcpy(out, bd_weight_row(w, r), (size_t)w->n_in * sizeof(float));
        return;
    }
    bd_type_traits_get(w->type)->to_float(bd_weight_row(w, r), out, w->n_in);
}
