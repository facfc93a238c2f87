/* dot.h — dot products between a weight row and an activation row, per weight type, as ggml computes them.
 *
 * A matrix product first converts the activations to the weight type's `vec_dot_type` (F32 stays F32; F16
 * weights take F16 activations; BF16 takes BF16; Q8_0 and Q4_0 take Q8_0; Q4_K, Q5_K, Q6_K take Q8_K), then
 * calls the type's vec_dot on each (weight row, activation row) pair. Matching ggml's conversion is what
 * makes braid's logits agree with llama.cpp's on quantized files: from_float gives the bytes ggml's CPU
 * backend gives (its quantize_row_q8_0 rounds differently from the reference quantizer in types.h; Q8_K is the
 * reference one). The functions are chosen once at start-up for the CPU (AVX-512, AVX2+FMA+F16C, or portable
 * C); every variant gives the same result up to float summation order (quantized dots are exact integer
 * sums within a block), and from_float gives the same bytes at every level (one exception: for a NaN
 * activation the F16C/AVX-512 conversion keeps the payload, as ggml's backend does here, while the portable
 * one gives 0x7e00).
 *
 * Rows: n is a multiple of the weight type's block size (and so of vec_dot_type's: 32 for Q8_0, 256 for
 * Q8_K); rows need only their C types' natural alignment (4 bytes for F32 and Q8_K, 2 for the others: what
 * GGUF's 32-byte tensor alignment gives every row), not vector alignment. All functions are thread-safe. */
#ifndef BRAID_TENSOR_DOT_H
#define BRAID_TENSOR_DOT_H

#include <stddef.h>
#include <stdint.h>

/* s = dot(x, y) over n elements; x is a row of the weight type, y a row of its vec_dot_type. */
typedef void (*bd_vec_dot_fn)(int64_t n, float *s, const void *x, const void *y);

/* One weight row against ny activation rows (1 <= ny <= BD_DOT_MAX_NY): s[j * bs] = dot(x, y + j * by bytes).
 * The weights are decoded once for all ny rows (the prefill case, where the same weight row meets several
 * tokens); each s[j] is bit-identical to what vec_dot gives for that row, so results never depend on how
 * tokens are grouped. */
#define BD_DOT_MAX_NY 4
typedef void (*bd_vec_dot_n_fn)(int64_t n, float *s, size_t bs, const void *x, const void *y, size_t by, int ny);

typedef struct bd_dot_traits {
    uint32_t vec_dot_type; /* the type activations are converted to (ggml id) */
    bd_vec_dot_fn vec_dot;
    /* Converts n activations to vec_dot_type (for F32 weights: a copy). */
    void (*from_float)(const float *src, void *dst, int64_t n);
    bd_vec_dot_n_fn vec_dot_n; /* never NULL: a loop over vec_dot where no faster version exists */
} bd_dot_traits;

/* The dot traits of a weight type for the CPU in use, or NULL if unsupported. */
const bd_dot_traits *bd_dot_traits_get(uint32_t type);
/* Which SIMD level the dispatcher chose: "avx512", "avx2", or "scalar". BRAID_SIMD=scalar|avx2|avx512
 * forces a level (lower than the CPU's best: for tests and benchmarks that compare variants). */
const char *bd_simd_level(void);

#endif
