/* matmul.h — y = W·x for a weight matrix of any storage type: the projections of every layer.
 *
 * Shapes (architectures.md §0.1): W is rm[N][K] (N rows of K elements, each row bd_row_size(wtype, K) bytes,
 * rows contiguous), x is T activation rows of K floats, y is T rows of N floats: y[t][n] = Σ_k W[n][k]·x[t][k].
 *
 * As ggml does, activations are first converted to the weight type's vec_dot_type (dot.h), once per call,
 * into a caller-provided scratch buffer (so decode allocates nothing), then every (weight row, activation row)
 * pair is a vec_dot. Rows of W are split across the pool's threads; for T > 1 a block of weight rows is reused
 * for every token while it is in cache, so each weight row is read from memory once per call. From 16 tokens
 * on (a prompt), quantized weights go through the integer GEMMs of gemm_q.h (AVX-512 VNNI), whose every output
 * is bit-identical to the vec_dot of that row and token (so prefill and decode agree exactly); F16/BF16 tiles
 * are dequantized and multiplied by the F32 kernels (another float order, like llama.cpp's own F16 prefill).
 * F32 weights take a register-blocked kernel of their own (AVX-512 / AVX2 / C) in which every output element
 * is accumulated in the same order whatever T and the thread count, so the F32 result for a token does not
 * depend on the batch it came in (bit for bit). */
#ifndef BRAID_TENSOR_MATMUL_H
#define BRAID_TENSOR_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "base/threadpool.h"

/* Bytes of scratch bd_matmul needs for T activation rows of K elements against weights of type wtype
 * (0 for F32 weights, which need no conversion; 0 also for an unknown type, which bd_matmul refuses). */
size_t bd_matmul_scratch_size(uint32_t wtype, int64_t K, int64_t T);

/* y[t*ldy + n] = Σ_k W[n][k] · x[t*ldx + k] for t < T, n < N.
 * wtype: ggml type id of W; K must be a multiple of its block size. ldx >= K, ldy >= N (in floats).
 * scratch: at least bd_matmul_scratch_size(wtype, K, T) bytes (may be NULL when that is 0); owned by the caller.
 * tp: the pool to split rows over (NULL = the calling thread only). y must not overlap x or W.
 * Errors: BRAID_E_UNSUPPORTED for a type without dot traits, BRAID_E_INVALID for bad shapes or a short scratch. */
braid_status bd_matmul(bd_threadpool *tp, uint32_t wtype, const void *W, int64_t N, int64_t K, const float *x,
                       int64_t ldx, int64_t T, float *y, int64_t ldy, void *scratch, size_t scratch_size);

/* One product of bd_matmul_multi: y[t*ldy + n] = Σ_k W[n][k] · x[t*ldx + k] for n < N (W of type wtype). */
typedef struct bd_matmul_op {
    uint32_t wtype;
    const void *W; /* N rows of K elements */
    int64_t N;
    float *y;      /* [T][ldy], ldy >= N; must not overlap x, W or another op's y */
    int64_t ldy;
} bd_matmul_op;

/* Several products of the same activations x (T rows of K, stride ldx): the projections that read one input
 * (Q, K, V; FFN gate and up). For a few tokens (decode) they run as one dispatch on the pool, the activations
 * converted once per vec_dot type and the rows of all products split over the threads by bytes; otherwise
 * (or when the conversions would not fit the scratch) each is a bd_matmul. Results are bd_matmul's bits.
 * scratch: at least the largest bd_matmul_scratch_size(ops[i].wtype, K, T), owned by the caller.
 * Errors: as bd_matmul, for the first product that has one. */
braid_status bd_matmul_multi(bd_threadpool *tp, const bd_matmul_op *ops, int n_ops, int64_t K, const float *x,
                             int64_t ldx, int64_t T, void *scratch, size_t scratch_size);

#endif
