/* blocks.h — what the architecture files need beyond tensor/ops.h: W·x on a bound weight (a thin shim over
 * tensor/matmul.h, which converts activations to the type's vec_dot_type as ggml does) and an embedding row
 * lookup. */
#ifndef BRAID_MODELS_BLOCKS_H
#define BRAID_MODELS_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

#include "base/threadpool.h"
#include "models/loader.h"

/* Bytes of work buffer blk_matmul needs for T rows of n_in activations against weight type `type`. */
size_t blk_matmul_wsize(uint32_t type, int64_t n_in, int32_t T);
/* y[t][n] = Σ_k W[n][k]·x[t][k]; x [T][w->n_in], y [T][w->n_out] (must not overlap x); wbuf of
 * blk_matmul_wsize bytes. Results do not depend on the thread count. */
void blk_matmul(bd_threadpool *tp, const bd_weight *w, const float *x, int32_t T, float *y, void *wbuf);
/* blk_matmul of n (1..8) weights with the same n_in on the same x, ys[i] [T][ws[i]->n_out]: one dispatch for a
 * decode step (tensor/matmul.h bd_matmul_multi), the same bits as n blk_matmul calls. */
void blk_matmul_multi(bd_threadpool *tp, const bd_weight *const *ws, float *const *ys, int n, const float *x,
                      int32_t T, void *wbuf);
/* Row r of an embedding matrix (any type) as floats. */
void blk_get_row(const bd_weight *w, int64_t r, float *out);
/* Σ a[i]·b[i] with float partial sums. */
float blk_dot_f32(const float *a, const float *b, int64_t n);

#endif
