/* types.h — the tensor type table: one row per type braid knows (the float types, the block-of-32 formats
 * Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 IQ4_NL MXFP4, the K-quants Q2_K..Q6_K and IQ4_XS, and Q8_1 / Q8_K, activation
 * formats only), holding every level-independent fact of
 * the type: block geometry, the reference (de)quantizers, and which activation format its dot products take
 * and how activations are converted to it. Kernels (dot products, decode gemv, prompt GEMMs) are not here:
 * each SIMD level's file registers the ones it has into dot.h's kernel table (dot_impl.h), and the loader,
 * the matmul paths and `braid gguf` ask that table. Block layouts and rounding are bit-exact with ggml's
 * (checked by tests/conformance/test_types.c against libggml-base's own traits). The block structs are in
 * tensor/quant.h.
 *
 * Adding a weight type (a checklist; each step is one place):
 *  1. its id in enum bd_type below (ggml's id) and, if it is public, the same value in include/braid.h's
 *     braid_type (types.c checks the two agree);
 *  2. its block struct, reference quantizer and dequantizer in tensor/quant.h + quant_*.c (bytes equal to
 *     ggml's *_ref: tests/conformance/test_types.c);
 *  3. its row in types.c's table: name, block size, bytes, to_float / from_float, vec_dot_type and the portable
 *     activation converter (act_from_float; the activation type needs its own row too);
 *  4. its portable dot product in dot_scalar.c's bd_dot_fill_scalar, in ggml's float order (dot.h says which);
 *     that alone makes the type load and run everywhere (bd_type_supported);
 *  5. optionally, faster kernels per SIMD level, each registered in that level's fill (dot_avx2.c,
 *     dot_avx512.c, gemv_*.c, gemm_*.c): vec_dot, vec_dot_n, gemv, gemm, a faster converter with the same
 *     bytes. A level that registers nothing keeps the best lower one's;
 *  6. add it to the type lists of tests/unit/test_dot.c and tests/conformance/test_dot.c. */
#ifndef BRAID_TENSOR_TYPES_H
#define BRAID_TENSOR_TYPES_H

#include <stddef.h>
#include <stdint.h>

/* Type ids are ggml's (they are what GGUF files store). */
enum bd_type {
    BD_TYPE_F32 = 0,
    BD_TYPE_F16 = 1,
    BD_TYPE_Q4_0 = 2,
    BD_TYPE_Q4_1 = 3,
    BD_TYPE_Q5_0 = 6,
    BD_TYPE_Q5_1 = 7,
    BD_TYPE_Q8_0 = 8,
    BD_TYPE_Q8_1 = 9, /* activations only (of Q4_1 and Q5_1) */
    BD_TYPE_Q2_K = 10,
    BD_TYPE_Q3_K = 11,
    BD_TYPE_Q4_K = 12,
    BD_TYPE_Q5_K = 13,
    BD_TYPE_Q6_K = 14,
    BD_TYPE_Q8_K = 15, /* activations only, not a storage type for weights */
    BD_TYPE_IQ4_NL = 20,
    BD_TYPE_IQ4_XS = 23,
    BD_TYPE_BF16 = 30,
    BD_TYPE_MXFP4 = 39,
    BD_TYPE_COUNT = 40 /* one past the largest id braid knows */
};

typedef struct bd_type_traits {
    const char *name;   /* "f32", "q4_K", ... as ggml names them */
    int64_t blck_size;  /* elements per block (1 for plain floats) */
    size_t type_size;   /* bytes per block */
    int is_quantized;
    /* n is a multiple of blck_size. */
    void (*to_float)(const void *src, float *dst, int64_t n);
    void (*from_float)(const float *src, void *dst, int64_t n); /* reference quantization (ggml's *_ref) */
    /* Weight types: the type activations are converted to for a dot product (ggml's vec_dot_type), and the
     * portable converter giving the bytes ggml's CPU backend gives (for Q8_0 not the reference quantizer;
     * dot.h). NULL act_from_float: not a weight type braid computes with (Q8_K). */
    uint32_t vec_dot_type;
    void (*act_from_float)(const float *src, void *dst, int64_t n);
} bd_type_traits;

/* The row for a ggml type id, or NULL if braid does not support it. */
const bd_type_traits *bd_type_traits_get(uint32_t type);
/* Bytes of a row of n elements (0 if n is negative, not a multiple of the block size, or the type is
 * unknown). */
size_t bd_row_size(uint32_t type, int64_t n);
/* Parses a type's name as the table spells it ("f32", "q8_0", "q4_K", "iq4_xs", ...; case-insensitive); -1 if
 * unknown. */
int bd_type_from_name(const char *name);

/* Scalar conversions, exact as ggml's (round to nearest even, subnormals kept; fp16: a NaN becomes the quiet
 * NaN 0x7e00 with its sign, as ggml's portable conversion does; bf16: a NaN keeps its top payload bits and is
 * made quiet). */
uint16_t bd_fp32_to_fp16(float f);
float bd_fp16_to_fp32(uint16_t h);
uint16_t bd_fp32_to_bf16(float f);
float bd_bf16_to_fp32(uint16_t h);

/* Row conversions (portable; dot.h's converters are the fast ones). */
void bd_fp16_to_fp32_row(const uint16_t *src, float *dst, int64_t n);
void bd_fp32_to_fp16_row(const float *src, uint16_t *dst, int64_t n);
void bd_bf16_to_fp32_row(const uint16_t *src, float *dst, int64_t n);
void bd_fp32_to_bf16_row(const float *src, uint16_t *dst, int64_t n);

#endif
