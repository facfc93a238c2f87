/* gemv.h — decode-path kernels: one converted activation row against many consecutive weight rows.
 *
 * Generating a token multiplies each weight matrix by a single activation row, so the time is the time to
 * stream the weights from memory. A vec_dot call per weight row (dot.h) leaves bandwidth unused: one row is
 * one short dependency chain ending in a horizontal reduction, and the call, the reduction and the scale
 * decoding come back every few hundred bytes. A gemv kernel walks a run of rows instead: several rows are
 * interleaved so their independent chains hide the FMA latency, the activation block is loaded and prepared
 * once for all of them, and the weights further down the run are prefetched.
 *
 * Numerics: s[r] is bit-identical to the type's vec_dot(n, &s[r], w + r * wrow, xq) (dot.h) at the same SIMD
 * level: each row keeps exactly its own sequential chain in vec_dot's float order, rows are only interleaved,
 * never split across accumulators. So a token's result does not depend on how rows are grouped or split
 * across threads. */
#ifndef BRAID_TENSOR_GEMV_H
#define BRAID_TENSOR_GEMV_H

#include <stddef.h>
#include <stdint.h>

/* s[r] = dot(w + r * wrow bytes, xq) for r in [0, nrows): n elements per row (a multiple of the weight type's
 * block size), xq one row of the type's vec_dot_type (dot.h), wrow the weight row stride in bytes. */
typedef void (*bd_gemv_fn)(int64_t n, float *s, const void *w, size_t wrow, int64_t nrows, const void *xq);

/* The gemv kernel of a weight type at the SIMD level in use (dot.h's table: each level's file registers its
 * kernels there), or NULL where there is none (then the caller loops over the type's vec_dot, which gives the
 * same bits). */
bd_gemv_fn bd_gemv_get(uint32_t type);

#endif
