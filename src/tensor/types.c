/* types.c — the one type traits table, plus the fp16 / bf16 scalar and row conversions it rests on.
 *
 * The conversions are written on integer bit patterns so that their rounding is explicit: round to nearest,
 * ties to even, subnormals kept, overflow to infinity. That is what ggml's portable conversions produce for
 * every input (test_types checks it against libggml-base), and what F16C / AVX-512 hardware produces for every
 * finite input, so the SIMD paths in dot_*.c may use the instructions. */
#include "tensor/types.h"

#include <ctype.h>
#include <string.h>

#include "braid.h"
#include "tensor/dot_impl.h"
#include "tensor/quant.h"

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t bd_fp32_to_fp16(float f) {
    const uint32_t x = f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    const uint32_t a = x & 0x7fffffff;
    if (a > 0x7f800000) return sign | 0x7e00; /* NaN: the canonical quiet NaN, payload dropped (as ggml) */
    if (a >= 0x477ff000) return sign | 0x7c00; /* >= 65520 rounds past the largest half, 65504: infinity */
    const uint32_t e = a >> 23;
    if (e < 113) {
        /* Result is a half subnormal (or zero): count units of 2^-24. The float is m * 2^(e-150), with the
         * implicit bit in m for a normal float; a float subnormal is far below 2^-25 and rounds to 0. */
        if (e < 102) return sign;
        const uint32_t m = (a & 0x7fffff) | 0x800000;
        const uint32_t shift = 126 - e; /* 14..24 */
        uint32_t q = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1);
        const uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return sign | (uint16_t)q; /* q may reach 0x400, the smallest normal: still the right bits */
    }
    uint32_t h = ((e - 112) << 10) | ((a >> 13) & 0x3ff);
    const uint32_t rem = a & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; /* a carry into the exponent is correct rounding */
    return sign | (uint16_t)h;
}

float bd_fp16_to_fp32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    const uint32_t e = (h >> 10) & 0x1f;
    const uint32_t m = h & 0x3ff;
    if (e == 0) {
        const float v = (float)m * 0x1p-24f; /* exact: zero or a subnormal */
        return f32_from_bits(f32_bits(v) | sign);
    }
    if (e == 31) {
        /* Infinity, or a NaN whose payload is kept and made quiet (ggml's conversion does it by a float
         * multiply, which quiets a signalling NaN). */
        return f32_from_bits(sign | 0x7f800000 | (m << 13) | (m ? 0x400000u : 0));
    }
    return f32_from_bits(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t bd_fp32_to_bf16(float f) {
    const uint32_t x = f32_bits(f);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40); /* NaN: keep top bits, quiet */
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16); /* ties to even; overflow carries to inf */
}

float bd_bf16_to_fp32(uint16_t h) { return f32_from_bits((uint32_t)h << 16); }

void bd_fp16_to_fp32_row(const uint16_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = bd_fp16_to_fp32(src[i]);
}

void bd_fp32_to_fp16_row(const float *src, uint16_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = bd_fp32_to_fp16(src[i]);
}

void bd_bf16_to_fp32_row(const uint16_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = bd_bf16_to_fp32(src[i]);
}

void bd_fp32_to_bf16_row(const float *src, uint16_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = bd_fp32_to_bf16(src[i]);
}

/* Adapters to the table's void-pointer signatures. */
static void f32_copy_to(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }
static void f32_copy_from(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }
static void f16_to(const void *src, float *dst, int64_t n) { bd_fp16_to_fp32_row(src, dst, n); }
static void f16_from(const float *src, void *dst, int64_t n) { bd_fp32_to_fp16_row(src, dst, n); }
static void bf16_to(const void *src, float *dst, int64_t n) { bd_bf16_to_fp32_row(src, dst, n); }
static void bf16_from(const float *src, void *dst, int64_t n) { bd_fp32_to_bf16_row(src, dst, n); }

/* Activation formats: F32 weights take F32 (a copy), F16 / BF16 their own type, the 32-element formats Q8_0
 * (as ggml's CPU backend rounds it), the K-quants Q8_K (its reference quantizer). */
#define ACT_F32 BD_TYPE_F32, bd_fp32_copy_act
#define ACT_F16 BD_TYPE_F16, bd_fp32_to_fp16_act
#define ACT_BF16 BD_TYPE_BF16, bd_fp32_to_bf16_act
#define ACT_Q8_0 BD_TYPE_Q8_0, bd_quantize_row_q8_0_act
#define ACT_Q8_1 BD_TYPE_Q8_1, bd_quantize_row_q8_1_act
#define ACT_Q8_K BD_TYPE_Q8_K, bd_quantize_row_q8_K_ref
#define ACT_NONE 0, NULL

static const bd_type_traits type_table[BD_TYPE_COUNT] = {
    [BD_TYPE_F32] = {"f32", 1, sizeof(float), 0, f32_copy_to, f32_copy_from, ACT_F32},
    [BD_TYPE_F16] = {"f16", 1, sizeof(uint16_t), 0, f16_to, f16_from, ACT_F16},
    [BD_TYPE_BF16] = {"bf16", 1, sizeof(uint16_t), 0, bf16_to, bf16_from, ACT_BF16},
    [BD_TYPE_Q4_0] = {"q4_0", BD_QK4_0, sizeof(bd_block_q4_0), 1, bd_dequantize_row_q4_0, bd_quantize_row_q4_0_ref,
                      ACT_Q8_0},
    [BD_TYPE_Q8_0] = {"q8_0", BD_QK8_0, sizeof(bd_block_q8_0), 1, bd_dequantize_row_q8_0, bd_quantize_row_q8_0_ref,
                      ACT_Q8_0},
    [BD_TYPE_Q4_K] = {"q4_K", BD_QK_K, sizeof(bd_block_q4_K), 1, bd_dequantize_row_q4_K, bd_quantize_row_q4_K_ref,
                      ACT_Q8_K},
    [BD_TYPE_Q5_K] = {"q5_K", BD_QK_K, sizeof(bd_block_q5_K), 1, bd_dequantize_row_q5_K, bd_quantize_row_q5_K_ref,
                      ACT_Q8_K},
    [BD_TYPE_Q6_K] = {"q6_K", BD_QK_K, sizeof(bd_block_q6_K), 1, bd_dequantize_row_q6_K, bd_quantize_row_q6_K_ref,
                      ACT_Q8_K},
    [BD_TYPE_Q4_1] = {"q4_1", BD_QK32, sizeof(bd_block_q4_1), 1, bd_dequantize_row_q4_1, bd_quantize_row_q4_1_ref,
                      ACT_Q8_1},
    [BD_TYPE_Q5_0] = {"q5_0", BD_QK32, sizeof(bd_block_q5_0), 1, bd_dequantize_row_q5_0, bd_quantize_row_q5_0_ref,
                      ACT_Q8_0},
    [BD_TYPE_Q5_1] = {"q5_1", BD_QK32, sizeof(bd_block_q5_1), 1, bd_dequantize_row_q5_1, bd_quantize_row_q5_1_ref,
                      ACT_Q8_1},
    [BD_TYPE_IQ4_NL] = {"iq4_nl", BD_QK32, sizeof(bd_block_iq4_nl), 1, bd_dequantize_row_iq4_nl,
                        bd_quantize_row_iq4_nl, ACT_Q8_0},
    [BD_TYPE_MXFP4] = {"mxfp4", BD_QK32, sizeof(bd_block_mxfp4), 1, bd_dequantize_row_mxfp4, bd_quantize_row_mxfp4_ref,
                       ACT_Q8_0},
    [BD_TYPE_Q2_K] = {"q2_K", BD_QK_K, sizeof(bd_block_q2_K), 1, bd_dequantize_row_q2_K, bd_quantize_row_q2_K_ref,
                      ACT_Q8_K},
    [BD_TYPE_Q3_K] = {"q3_K", BD_QK_K, sizeof(bd_block_q3_K), 1, bd_dequantize_row_q3_K, bd_quantize_row_q3_K_ref,
                      ACT_Q8_K},
    [BD_TYPE_IQ4_XS] = {"iq4_xs", BD_QK_K, sizeof(bd_block_iq4_xs), 1, bd_dequantize_row_iq4_xs,
                        bd_quantize_row_iq4_xs, ACT_Q8_K},
    [BD_TYPE_Q8_1] = {"q8_1", BD_QK32, sizeof(bd_block_q8_1), 1, bd_dequantize_row_q8_1, bd_quantize_row_q8_1_ref,
                      ACT_NONE},
    [BD_TYPE_Q8_K] = {"q8_K", BD_QK_K, sizeof(bd_block_q8_K), 1, bd_dequantize_row_q8_K, bd_quantize_row_q8_K_ref,
                      ACT_NONE},
};

/* braid.h's public braid_type mirrors this enum. */
#define SAME_ID(t) ((int)BRAID_TYPE_##t == (int)BD_TYPE_##t)
_Static_assert(SAME_ID(F32) && SAME_ID(F16) && SAME_ID(BF16) && SAME_ID(Q4_0) && SAME_ID(Q8_0) && SAME_ID(Q4_K) &&
                   SAME_ID(Q5_K) && SAME_ID(Q6_K) && SAME_ID(Q4_1) && SAME_ID(Q5_0) && SAME_ID(Q5_1) &&
                   SAME_ID(Q2_K) && SAME_ID(Q3_K) && SAME_ID(IQ4_NL) && SAME_ID(IQ4_XS) && SAME_ID(MXFP4),
               "braid_type (include/braid.h) and bd_type (tensor/types.h) disagree");
#undef SAME_ID

const bd_type_traits *bd_type_traits_get(uint32_t type) {
    if (type >= BD_TYPE_COUNT || type_table[type].name == NULL) return NULL;
    return &type_table[type];
}

size_t bd_row_size(uint32_t type, int64_t n) {
    const bd_type_traits *t = bd_type_traits_get(type);
    if (t == NULL || n < 0 || n % t->blck_size != 0) return 0;
    size_t bytes;
    if (!__builtin_mul_overflow((size_t)(n / t->blck_size), t->type_size, &bytes)) return bytes;
    return 0;
}

int bd_type_from_name(const char *name) {
    if (name == NULL) return -1;
    for (int t = 0; t < BD_TYPE_COUNT; t++) {
        const char *a = type_table[t].name, *b = name;
        if (a == NULL) continue;
        while (*a && *b && tolower((unsigned char)*a) == tolower((unsigned char)*b)) a++, b++;
        if (*a == 0 && *b == 0) return t;
    }
    return -1;
}
