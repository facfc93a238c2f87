/* blocks.h — the small blocks of math the architecture files are written in (llama2.c style: one function per
 * block, named after the math). Each is defined exactly as llama.cpp's CPU backend computes it
 * (architectures.md §0.2, §5), since logits are compared against it.
 *
 * Matrix products go through the per-type dot products of tensor/dot.h: activations are first converted to the
 * weight type's vec_dot_type (as ggml does), which is what makes quantized files agree with llama.cpp. */
#ifndef BRAID_MODELS_BLOCKS_H
#define BRAID_MODELS_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

#include "models/loader.h"

struct bd_threadpool;

/* Bytes of work buffer bd_matmul needs for T rows of n_in activations against weight type `type`. */
size_t bd_matmul_wsize(uint32_t type, int64_t n_in, int32_t T);
/* y[t][n] = sum_k W[n][k] * x[t][k]; x [T][w->n_in], y [T][w->n_out]; wbuf of bd_matmul_wsize bytes. */
void bd_matmul(struct bd_threadpool *tp, const bd_weight *w, const float *x, int32_t T, float *y, void *wbuf);
/* Row r of an embedding matrix (any type) as floats. */
void bd_get_row(const bd_weight *w, int64_t r, float *out);

/* y = x / sqrt(mean(x²) + eps) * w over n (Σx² in double, as ggml). y may equal x. w may be NULL. */
void bd_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);
/* x / sqrt(Σx² + eps), in place (the Gated DeltaNet L2 norm). */
void bd_l2norm(float *x, int64_t n, float eps);
float bd_silu(float x);
float bd_sigmoid(float x);
float bd_softplus(float x);
/* Dot product of two float vectors (float partial sums). */
float bd_dot_f32(const float *a, const float *b, int64_t n);

#endif
