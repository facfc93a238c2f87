/* test_types.c — braid's type traits against ggml's own (libggml-base, and the CPU backend for Q8_K).
 *
 * For every type braid supports: quantize the same rows with braid and with ggml and require identical bytes;
 * dequantize ggml's bytes with both and require identical floats. Rows come from several distributions
 * (normal, uniform, outliers, all zeros, tiny and huge magnitudes, constant, sparse, signed halves) and
 * lengths 256..4096. The fp16 / bf16 scalar conversions are compared on every half, and on a stride through
 * every float bit pattern. Prints, per type, the mismatching bytes and the max |braid - ggml| of the floats
 * (expected 0) and the round-trip error (information only). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "oracle_cpu.h"
#include "tensor/quant.h"
#include "tensor/types.h"
#include "test.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_next(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

static float rng_uniform(void) { return (float)((rng_next() >> 11) * 0x1p-53); } /* [0, 1) */

static float rng_normal(void) {
    const double u1 = ((rng_next() >> 11) + 1) * 0x1p-53, u2 = (rng_next() >> 11) * 0x1p-53;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

enum { DIST_NORMAL, DIST_UNIFORM, DIST_OUTLIERS, DIST_ZEROS, DIST_TINY, DIST_SUBNORMAL, DIST_HUGE, DIST_CONST,
       DIST_SPARSE, DIST_POSITIVE, DIST_HALFSIGNED, DIST_COUNT };
static const char *const dist_names[DIST_COUNT] = {"normal", "uniform", "outliers", "zeros", "tiny", "subnormal",
                                                   "huge", "constant", "sparse", "positive", "halfsigned"};

static void fill(float *x, int64_t n, int dist) {
    const float c = rng_normal();
    for (int64_t i = 0; i < n; i++) {
        float v = rng_normal();
        switch (dist) {
        case DIST_NORMAL: break;
        case DIST_UNIFORM: v = 2 * rng_uniform() - 1; break;
        case DIST_OUTLIERS: v = rng_uniform() < 0.01f ? v * 100 : v * 0.1f; break;
        case DIST_ZEROS: v = 0; break;
        case DIST_TINY: v *= 1e-6f; break;
        case DIST_SUBNORMAL: v *= 1e-39f; break;
        case DIST_HUGE: v *= 3e4f; break; /* around fp16's top, past it now and then */
        case DIST_CONST: v = c; break;
        case DIST_SPARSE: v = rng_uniform() < 0.9f ? 0 : v; break;
        case DIST_POSITIVE: v = fabsf(v) + 0.5f; break;
        case DIST_HALFSIGNED: v = (i / 64) % 2 ? fabsf(v) : -fabsf(v); break; /* sign flips per 64 */
        }
        x[i] = v;
    }
}

/* Bitwise-equal floats count as 0 difference (so equal infinities and NaNs do too). */
static double float_diff(float a, float b) {
    if (memcmp(&a, &b, sizeof a) == 0) return 0;
    const double d = fabs((double)a - (double)b);
    return isnan(d) ? INFINITY : d;
}

/* ggml's arm64 builds compile its reference quantizers with the compiler's default floating-point contraction:
 * a*b+c becomes one fused multiply-add where gcc chose to (aarch64 has FMA in its baseline; the x86 baseline
 * has not, which is why the x86 library is byte-identical to braid). The iterative searches of these types
 * (the K-quants' scale/min fits, IQ4's scale search) compare candidates whose errors now differ by an ulp
 * between the two roundings, now and then pick another one, and the choices of later sub-blocks follow. For
 * these types the pair is "another float order": bytes may differ (counted, reported), and each row braid
 * quantizes must reconstruct x about as well as ggml's bytes do: rmse(braid) <= (1 + FMA_REF_REL) * rmse(ggml)
 * + FMA_REF_ABS * rms(x), where rmse is the root mean square of x - dequant(q). A wrong scale, nibble order or
 * min gives errors of the order of rms(x) itself. Every other type, and every dequantizer, stays exact. */
#if defined(__aarch64__)
#define FMA_REF_BUILD 1
#else
#define FMA_REF_BUILD 0
#endif
#define FMA_REF_REL 0.25
#define FMA_REF_ABS 0.005

static int fma_ref_type(uint32_t type) {
    return FMA_REF_BUILD && (type == BD_TYPE_Q2_K || type == BD_TYPE_Q3_K || type == BD_TYPE_Q4_K ||
                             type == BD_TYPE_Q5_K || type == BD_TYPE_Q6_K || type == BD_TYPE_IQ4_NL ||
                             type == BD_TYPE_IQ4_XS);
}

/* Root mean square of x - dequant(q) over a row. */
static double row_rmse(const bd_type_traits *bt, const void *q, const float *x, float *tmp, int64_t n) {
    bt->to_float(q, tmp, n);
    double e = 0;
    for (int64_t i = 0; i < n; i++) e += ((double)x[i] - tmp[i]) * ((double)x[i] - tmp[i]);
    return sqrt(e / (double)n);
}

typedef struct {
    double worst_ratio; /* fma_ref types: max over differing rows of rmse(braid) / rmse(ggml) */
    double worst_excess; /* and of (rmse(braid) - rmse(ggml)) / rms(x) */
    long rows_differ;   /* fma_ref types: rows whose bytes differ */
    long bytes_differ;  /* quantized bytes that differ */
    long rows;          /* rows compared */
    double max_abs;     /* max |braid - ggml| after dequantization */
    double max_rt;      /* max |x - dequant(quant(x))| / max|x| over normal rows (information) */
} type_result;

static void check_type(uint32_t type, type_result *res, oracle_cpu_traits_fn cpu) {
    const bd_type_traits *bt = bd_type_traits_get(type);
    const struct ggml_type_traits *gt = ggml_get_type_traits((enum ggml_type)type);
    CHECK(bt != NULL, "type %u missing", type);
    if (bt == NULL) return;
    CHECK(strcmp(bt->name, gt->type_name) == 0, "name %s vs %s", bt->name, gt->type_name);
    CHECK(bt->blck_size == gt->blck_size, "%s block size", bt->name);
    CHECK(bt->type_size == gt->type_size, "%s type size %zu vs %zu", bt->name, bt->type_size, gt->type_size);
    CHECK(bt->is_quantized == (int)gt->is_quantized, "%s is_quantized", bt->name);

    /* ggml's quantizer: the base library's reference one, except Q8_K which only the CPU backend has. */
    ggml_from_float_t g_from = gt->from_float_ref;
    if (type == BD_TYPE_Q8_K) g_from = cpu ? cpu(GGML_TYPE_Q8_K)->from_float : NULL;
    CHECK(type == BD_TYPE_F32 || g_from != NULL, "%s: no ggml quantizer to compare with", bt->name);

    static const int64_t lens[] = {256, 512, 1024, 1280, 4096};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        const int64_t n = lens[li];
        const size_t rs = bd_row_size(type, n);
        float *x = malloc((size_t)n * sizeof(float));
        float *yb = malloc((size_t)n * sizeof(float)), *yg = malloc((size_t)n * sizeof(float));
        uint8_t *qb = calloc(rs, 1), *qg = calloc(rs, 1);
        for (int dist = 0; dist < DIST_COUNT; dist++) {
            for (int rep = 0; rep < 3; rep++) {
                fill(x, n, dist);
                memset(qb, 0, rs);
                memset(qg, 0, rs);
                bt->from_float(x, qb, n);
                if (type == BD_TYPE_IQ4_NL || type == BD_TYPE_IQ4_XS) {
                    /* what llama.cpp's quantizer writes (no importance matrix), which braid reproduces */
                    ggml_quantize_chunk((enum ggml_type)type, x, qg, 0, 1, n, NULL);
                } else if (g_from) {
                    g_from(x, qg, n);
                } else {
                    memcpy(qg, x, rs); /* F32: ggml stores the floats as they are */
                }
                long differ = 0;
                for (size_t b = 0; b < rs; b++) differ += qb[b] != qg[b];
                res->bytes_differ += differ;
                res->rows++;
                if (fma_ref_type(type)) {
                    if (differ) {
                        const double eb = row_rmse(bt, qb, x, yb, n), eg = row_rmse(bt, qg, x, yg, n);
                        double rms = 0;
                        for (int64_t i = 0; i < n; i++) rms += (double)x[i] * x[i];
                        rms = sqrt(rms / (double)n);
                        if (eg > 0 && eb / eg > res->worst_ratio) res->worst_ratio = eb / eg;
                        if ((eb - eg) / rms > res->worst_excess) res->worst_excess = (eb - eg) / rms;
                        res->rows_differ++;
                        CHECK(eb <= (1 + FMA_REF_REL) * eg + FMA_REF_ABS * rms, "%s n=%lld %s: %ld bytes differ; "
                              "rmse braid %.4g vs ggml %.4g (rms x %.4g)", bt->name, (long long)n, dist_names[dist],
                              differ, eb, eg, rms);
                    }
                } else {
                    CHECK(differ == 0, "%s n=%lld %s: %ld bytes differ", bt->name, (long long)n, dist_names[dist],
                          differ);
                }

                /* Dequantize ggml's bytes with both. Q8_K has no ggml dequantizer: d * q is its definition. */
                bt->to_float(qg, yb, n);
                if (gt->to_float) {
                    gt->to_float(qg, yg, n);
                } else if (type == BD_TYPE_Q8_K) {
                    const bd_block_q8_K *blk = (const bd_block_q8_K *)qg;
                    for (int64_t i = 0; i < n; i++) yg[i] = blk[i / BD_QK_K].d * blk[i / BD_QK_K].qs[i % BD_QK_K];
                } else if (type == BD_TYPE_Q8_1) {
                    const bd_block_q8_1 *blk = (const bd_block_q8_1 *)qg;
                    for (int64_t i = 0; i < n; i++)
                        yg[i] = blk[i / BD_QK32].qs[i % BD_QK32] * ggml_fp16_to_fp32(blk[i / BD_QK32].d);
                } else {
                    memcpy(yg, qg, rs);
                }
                for (int64_t i = 0; i < n; i++) {
                    const double d = float_diff(yb[i], yg[i]);
                    if (d > res->max_abs) res->max_abs = d;
                }
                if (dist == DIST_NORMAL) { /* round-trip error of braid's own bytes, for information */
                    bt->to_float(qb, yb, n);
                    double amax = 0, rt = 0;
                    for (int64_t i = 0; i < n; i++) {
                        if (fabs(x[i]) > amax) amax = fabs(x[i]);
                        if (fabs(x[i] - yb[i]) > rt) rt = fabs(x[i] - yb[i]);
                    }
                    if (rt / amax > res->max_rt) res->max_rt = rt / amax;
                }
            }
        }
        free(x);
        free(yb);
        free(yg);
        free(qb);
        free(qg);
    }
    CHECK(res->max_abs == 0, "%s: dequantized floats differ by up to %g", bt->name, res->max_abs);
}

/* fp16 / bf16 scalar conversions, on every half and bf16, and on a stride through every float pattern. */
static void check_scalar_conversions(void) {
    long bad16 = 0, badbf = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float a = bd_fp16_to_fp32((uint16_t)h), b = ggml_fp16_to_fp32((ggml_fp16_t)h);
        bad16 += memcmp(&a, &b, sizeof a) != 0;
        ggml_bf16_t gb = {(uint16_t)h};
        a = bd_bf16_to_fp32((uint16_t)h);
        b = ggml_bf16_to_fp32(gb);
        badbf += memcmp(&a, &b, sizeof a) != 0;
    }
    CHECK(bad16 == 0, "%ld halves convert differently to float", bad16);
    CHECK(badbf == 0, "%ld bf16 values convert differently to float", badbf);

    long bad_h = 0, bad_b = 0, n = 0;
    for (uint64_t u = 0; u <= 0xffffffffu; u += 251) { /* 251 is prime: every low-bit pattern gets visited */
        const uint32_t bits = (uint32_t)u;
        float f;
        memcpy(&f, &bits, sizeof f);
        bad_h += bd_fp32_to_fp16(f) != ggml_fp32_to_fp16(f);
        bad_b += bd_fp32_to_bf16(f) != ggml_fp32_to_bf16(f).bits;
        n++;
    }
    /* And every float near the fp16 rounding and range boundaries: all 2^13 low patterns around a few. */
    static const uint32_t centers[] = {0x477fe000, 0x477ff000, 0x38800000, 0x33000000, 0x387fc000, 0x3f800000};
    for (size_t c = 0; c < sizeof centers / sizeof centers[0]; c++) {
        for (uint32_t d = 0; d < 0x4000; d++) {
            for (int s = 0; s < 2; s++) {
                const uint32_t bits = (centers[c] - 0x2000 + d) | (s ? 0x80000000u : 0);
                float f;
                memcpy(&f, &bits, sizeof f);
                bad_h += bd_fp32_to_fp16(f) != ggml_fp32_to_fp16(f);
                bad_b += bd_fp32_to_bf16(f) != ggml_fp32_to_bf16(f).bits;
                n++;
            }
        }
    }
    CHECK(bad_h == 0, "%ld of %ld floats convert differently to fp16", bad_h, n);
    CHECK(bad_b == 0, "%ld of %ld floats convert differently to bf16", bad_b, n);
    printf("scalar conversions: 65536 halves, 65536 bf16, %ld floats -> fp16/bf16: %ld / %ld differ\n", n, bad_h,
           bad_b);
}

static void check_names_and_sizes(void) {
    CHECK(bd_type_from_name("Q4_K") == BD_TYPE_Q4_K, "q4_K by name");
    CHECK(bd_type_from_name("bf16") == BD_TYPE_BF16, "bf16 by name");
    CHECK(bd_type_from_name("f32") == BD_TYPE_F32, "f32 by name");
    CHECK(bd_type_from_name("q4") == -1, "q4 is not a type");
    CHECK(bd_type_from_name("q4_k_m") == -1, "q4_k_m is not a type");
    CHECK(bd_type_from_name("") == -1, "empty name");
    CHECK(bd_type_from_name(NULL) == -1, "NULL name");
    CHECK(bd_row_size(BD_TYPE_Q4_K, 4096) == 16 * 144, "q4_K row size");
    CHECK(bd_row_size(BD_TYPE_Q8_0, 4096) == ggml_row_size(GGML_TYPE_Q8_0, 4096), "q8_0 row size");
    CHECK(bd_row_size(BD_TYPE_F16, 3) == 6, "f16 row size");
    CHECK(bd_row_size(BD_TYPE_Q4_K, 100) == 0, "partial block");
    CHECK(bd_row_size(BD_TYPE_Q4_K, -256) == 0, "negative length");
    CHECK(bd_row_size(BD_TYPE_Q4_1, 32) == 20 && bd_row_size(BD_TYPE_MXFP4, 64) == 34, "q4_1 / mxfp4 row sizes");
    CHECK(bd_row_size(16, 256) == 0, "iq2_xxs is not supported");
    CHECK(bd_type_from_name("IQ4_XS") == BD_TYPE_IQ4_XS && bd_type_from_name("mxfp4") == BD_TYPE_MXFP4, "iq4_xs, mxfp4");
    CHECK(bd_type_traits_get(BD_TYPE_COUNT) == NULL && bd_type_traits_get(0xffffffffu) == NULL, "out of range ids");
}

int main(void) {
    oracle_pair pair;
    if (!oracle_pair_get(&pair)) TEST_SKIP("the requested ggml build cannot run on this CPU");
    const char *variant = "none";
    oracle_cpu_traits_fn cpu = oracle_cpu_traits(&variant);
    CHECK(cpu != NULL, "cannot load ggml's CPU backend (needed for Q8_K)");
    printf("ggml CPU backend variant: %s\n", variant);

    check_names_and_sizes();
    check_scalar_conversions();

    static const uint32_t types[] = {BD_TYPE_F32,  BD_TYPE_F16,    BD_TYPE_BF16,   BD_TYPE_Q8_0, BD_TYPE_Q4_0,
                                     BD_TYPE_Q4_1, BD_TYPE_Q5_0,   BD_TYPE_Q5_1,   BD_TYPE_Q8_1, BD_TYPE_IQ4_NL,
                                     BD_TYPE_MXFP4, BD_TYPE_Q2_K,  BD_TYPE_Q3_K,   BD_TYPE_Q4_K, BD_TYPE_Q5_K,
                                     BD_TYPE_Q6_K, BD_TYPE_IQ4_XS, BD_TYPE_Q8_K};
    if (FMA_REF_BUILD)
        printf("another float order: ggml's arm64 reference quantizers of q2_K..q6_K, iq4_nl, iq4_xs (fused "
               "multiply-adds): bytes may differ; per row rmse(braid) <= %g x rmse(ggml) + %g x rms(x)\n",
               1 + FMA_REF_REL, FMA_REF_ABS);
    printf("%-6s %6s %14s %22s %14s %s\n", "type", "rows", "bytes differ", "max|braid-ggml| float", "roundtrip/max|x|",
           FMA_REF_BUILD ? "  rows differ, worst rmse braid/ggml, worst excess/rms(x)" : "");
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        type_result r = {0};
        check_type(types[i], &r, cpu);
        printf("%-6s %6ld %14ld %22g %14.3g", bd_type_traits_get(types[i])->name, r.rows, r.bytes_differ,
               r.max_abs, r.max_rt);
        if (fma_ref_type(types[i])) printf("  %ld, %.3g, %.3g", r.rows_differ, r.worst_ratio, r.worst_excess);
        printf("\n");
    }
    TEST_MAIN_END();
}
