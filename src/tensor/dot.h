/* dot.h — dot products between a weight row and an activation row, per weight type, as ggml computes them.
 *
 * A matrix product first converts the activations to the weight type's `vec_dot_type` (F32 stays F32; F16
 * weights take F16 activations; BF16 takes BF16; Q8_0 and Q4_0 take Q8_0; Q4_K, Q5_K, Q6_K take Q8_K), then
 * calls the type's vec_dot on each (weight row, activation row) pair. Matching ggml's conversion is what
 * makes braid's logits agree with llama.cpp's on quantized files: from_float gives the bytes ggml's CPU
 * backend gives (its quantize_row_q8_0 rounds differently from the reference quantizer in types.h; Q8_K is the
 * reference one). The functions are chosen once at start-up for the CPU (AVX-512, AVX2+FMA+F16C, or portable
 * C). The quantized dots give the same bits at every level; the float dots (F32, F16, BF16) follow the order
 * of the ggml build paired with the level (below), so they differ between levels by a few ulp. from_float
 * gives the same bytes at every level (one exception: for a NaN activation the F16C/AVX-512 conversion keeps
 * the payload, as ggml's backend does here, while the portable one gives 0x7e00).
 *
 * Float order: every vec_dot is bit-identical to ggml's x86 vec_dot in the CPU build llama.cpp loads on a CPU
 * of that level: the avx512 level (and the portable code) follows the AVX-512 builds (libggml-cpu-zen4.so,
 * -sapphirerapids.so, -icelake.so, ...), the avx2 level the AVX2 builds (-haswell.so, -alderlake.so);
 * conformance_dot asserts it (BRAID_GGML_CPU picks the build; testkit/oracle_cpu.h has the pairs).
 * Any other kernel claiming a type's vec_dot result at a level (multi-row decode and prompt kernels) must
 * reproduce exactly this, per output:
 *   Q8_0, Q4_0 (x Q8_0): one chain of 8 float lanes. Per block b in order: lane k's int32 sum over elements
 *     4k..4k+3 (Q4_0: levels q-8; element e<16 is the low nibble of byte e, e>=16 the high nibble of byte
 *     e-16), converted to float, acc[k] = fma(d_b, isum[k], acc[k]) with d_b = fp32(x.d) * fp32(y.d) rounded.
 *   Q4_K, Q5_K (x Q8_K): per block, 8 int32 lanes, lane k = sum over elements e with (e % 32) / 4 == k of
 *     sc[e / 32] * q(e) * y(e) (q unsigned: 0..15, 0..31); acc[k] = fma(d, float(lane k), acc[k]) with
 *     d = y.d * fp32(x.d). Mins with dm = -(y.d * fp32(x.dmin)): Q4_K keeps a 4-lane chain,
 *     macc[k] = fma(dm, float(m[2k]*(bs[4k]+bs[4k+1]) + m[2k+1]*(bs[4k+2]+bs[4k+3])), macc[k]) (bs: the
 *     Q8_K bsums); Q5_K one float, summ = fma(dm, float(sum_j m[j]*(bs[2j]+bs[2j+1])), summ).
 *     Result: hsum8(acc) + ((macc[0] + macc[2]) + (macc[1] + macc[3]))   (Q5_K: hsum8(acc) + summ).
 *   Q6_K (x Q8_K): per block, lane k = sum over elements e with (e % 32) / 4 == k of sc[e / 16] * q(e) * y(e)
 *     with q unsigned 0..63, minus 32 * (sc[2k] * bs[2k] + sc[2k+1] * bs[2k+1]) (the -32 offset, spread so);
 *     acc[k] = fma(y.d * fp32(x.d), float(lane k), acc[k]). Result hsum8(acc).
 *   hsum8(a) = ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)).
 *   F16, F32 at avx512 (and portable): 4 chains c of 16 lanes over the first np = n & ~63 elements: element
 *     i + 16c + l (i a multiple of 64) is fused into chain c, lane l, in order of i. Then
 *     v = (c0 + c2) + (c1 + c3) lane-wise, halved 16 -> 8 -> 4 -> 2 -> 1 (v[l] + v[l+8], then + [l+4], then
 *     (u0 + u2) + (u1 + u3)).
 *   F16, F32 at avx2: 4 chains c of 8 lanes over the first np = n & ~31 (element i + 8c + l into chain c lane
 *     l), v = (c0 + c2) + (c1 + c3), then u[l] = v[l] + v[l+4] and (u0 + u1) + (u2 + u3) (two hadds).
 *   Tail (the n - np last elements): F16 adds each exact product in double to that sum, rounded to float at
 *     the end; F32 adds them in float in order, the products of the first (n - np) & ~7 (avx2: & ~3) rounded,
 *     the rest fused (how the compiler built ggml's leftover loop; dot_impl.h's bd_dot_f32_tail).
 *   BF16 at avx2: 4 chains of 8 lanes over n & ~31 as F16's, v = (c0 + c2) + (c1 + c3), then hsum8, the tail
 *     in double. At avx512 and portable: not ggml's order (its AVX512_BF16 path rounds pair sums
 *     differently); within 1e-5.
 * Integer lane sums are exact, so only which elements land in which lane matters, not how they are summed.
 * On aarch64 the portable code keeps these (AVX-512) orders, while the neon and dotprod levels follow ggml's
 * armv8.0_1 and armv8.2_2 builds in every weight type's dot product (dot_neon.c, dot_neon_dot.c, dot_neon_q.h
 * have the orders; F16 at dotprod sums in half precision, as that build does), and the Q8_0 / Q8_1 activation
 * bytes are ggml's NEON converter's.
 *
 * Rows: n is a multiple of the weight type's block size (and so of vec_dot_type's: 32 for Q8_0, 256 for
 * Q8_K); rows need only their C types' natural alignment (4 bytes for F32 and Q8_K, 2 for the others: what
 * GGUF's 32-byte tensor alignment gives every row), not vector alignment. All functions are thread-safe. */
#ifndef BRAID_TENSOR_DOT_H
#define BRAID_TENSOR_DOT_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/gemv.h"

/* s = dot(x, y) over n elements; x is a row of the weight type, y a row of its vec_dot_type. */
typedef void (*bd_vec_dot_fn)(int64_t n, float *s, const void *x, const void *y);

/* One weight row against ny activation rows (1 <= ny <= BD_DOT_MAX_NY): s[j * bs] = dot(x, y + j * by bytes).
 * The weights are decoded once for all ny rows (the prefill case, where the same weight row meets several
 * tokens); each s[j] is bit-identical to what vec_dot gives for that row, so results never depend on how
 * tokens are grouped. */
#define BD_DOT_MAX_NY 4
typedef void (*bd_vec_dot_n_fn)(int64_t n, float *s, size_t bs, const void *x, const void *y, size_t by, int ny);

struct bd_gemmq_ops; /* gemm_q.h */

/* A weight type's kernels at the SIMD level in use: its types.c row's activation facts plus whatever the
 * per-level files registered (dot_impl.h). Every field but vec_dot_type, vec_dot and from_float may be NULL. */
typedef struct bd_dot_traits {
    uint32_t vec_dot_type; /* the type activations are converted to (ggml id): the type row's */
    bd_vec_dot_fn vec_dot;
    /* Converts n activations to vec_dot_type (for F32 weights: a copy): the type row's act_from_float, or a
     * faster one a level registered that gives the same bytes. */
    void (*from_float)(const float *src, void *dst, int64_t n);
    bd_vec_dot_n_fn vec_dot_n;        /* NULL: call vec_dot per row (bd_vec_dot_rows does) */
    bd_gemv_fn gemv;                  /* decode kernel (gemv.h); NULL: the caller loops over vec_dot */
    const struct bd_gemmq_ops *gemm;  /* prompt GEMM (gemm_q.h); NULL: the vec_dot path */
} bd_dot_traits;

/* vec_dot_n where the level has one, else vec_dot row by row (the same bits). */
static inline void bd_vec_dot_rows(const bd_dot_traits *dt, int64_t n, float *s, size_t bs, const void *x,
                                   const void *y, size_t by, int ny) {
    if (dt->vec_dot_n) {
        dt->vec_dot_n(n, s, bs, x, y, by, ny);
        return;
    }
    for (int j = 0; j < ny; j++) dt->vec_dot(n, s + (size_t)j * bs, x, (const uint8_t *)y + (size_t)j * by);
}

/* The kernels of a weight type for the CPU in use, or NULL if braid cannot compute with the type. */
const bd_dot_traits *bd_dot_traits_get(uint32_t type);
/* 1 if braid computes with weights of this type (at every level: each has a portable vec_dot), else 0. */
int bd_type_supported(uint32_t type);
/* Which SIMD level the dispatcher chose: "avx512", "avx2", or "scalar". BRAID_SIMD=scalar|avx2|avx512
 * forces a level (lower than the CPU's best: for tests and benchmarks that compare variants). */
const char *bd_simd_level(void);

#endif
