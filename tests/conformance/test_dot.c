/* test_dot.c — braid's dot products and activation converters against ggml's CPU backend (the variant
 * llama.cpp loads on this machine, reached with dlopen: see oracle_cpu.h).
 *
 * Per weight type: the activation converter must give the bytes ggml's from_float gives (Q8_0 through the
 * CPU backend's quantize_row_q8_0, Q8_K, F16, BF16), vec_dot_type must be ggml's, and braid's vec_dot (every
 * SIMD level this CPU has) must agree with ggml's vec_dot on the same bytes. Bit-identical where braid
 * follows this variant's float order (dot.h; oracle_cpu.h's pairs): the quantized dots at every level (one
 * float order in every x86 build of ggml with AVX2; the integer sums are exact), F32 / F16 at the level whose
 * lane width is the variant's (avx512 and the portable code: the AVX-512 builds; avx2: the AVX2 builds);
 * BF16 at avx2 against the AVX2 builds; elsewhere (and BF16 against the AVX-512 builds, whose AVX512_BF16
 * order is not reproduced) within 1e-5 of the sum of |products|.
 * Prints the worst relative difference per level, and how often ggml's run-time Q8_0 conversion differs from
 * its reference quantizer (why braid matches the former). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "oracle_cpu.h"
#include "tensor/cpu.h"
#include "tensor/dot.h"
#include "tensor/dot_impl.h"
#include "tensor/types.h"
#include "test.h"

static uint64_t rng = 0xfeedfacecafebeefull;

static float rnd_normal(void) {
    double u[2];
    for (int k = 0; k < 2; k++) {
        rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
        u[k] = ((rng * 0x2545f4914f6cdd1dull >> 11) + 1) * 0x1p-53;
    }
    return (float)(sqrt(-2 * log(u[0])) * cos(6.283185307179586 * u[1]));
}

int main(void) {
    oracle_pair pair;
    if (!oracle_pair_get(&pair)) TEST_SKIP("the requested pair cannot run on this CPU");
    const char *variant = "none";
    oracle_cpu_traits_fn cpu = oracle_cpu_traits(&variant);
    CHECK(cpu != NULL, "cannot load ggml's CPU backend");
    if (cpu == NULL) TEST_MAIN_END();
    printf("ggml CPU backend: %s; braid SIMD level: %s\n", variant, bd_simd_level());
    const int vwidth = ggml_variant_width(variant), conv_exact = ggml_variant_avx(variant);

    static bd_dot_traits tab[BD_SIMD_TOP + 1][BD_TYPE_COUNT];
    const char *const *level_names = bd_dot_level_names;
    const int levels = bd_dot_cpu_level() + 1;
    for (int lv = 0; lv < levels; lv++) bd_dot_fill_level(tab[lv], lv);
    long ref_blocks = 0, ref_differ = 0; /* ggml's Q8_0: run-time conversion vs reference quantizer */

    static const uint32_t types[] = {BD_TYPE_F32,  BD_TYPE_F16,  BD_TYPE_BF16,   BD_TYPE_Q8_0,   BD_TYPE_Q4_0,
                                     BD_TYPE_Q4_1, BD_TYPE_Q5_0, BD_TYPE_Q5_1,   BD_TYPE_IQ4_NL, BD_TYPE_MXFP4,
                                     BD_TYPE_Q2_K, BD_TYPE_Q3_K, BD_TYPE_Q4_K,   BD_TYPE_Q5_K,   BD_TYPE_Q6_K,
                                     BD_TYPE_IQ4_XS};
    enum { NMAX = 4096 };
    float *xf = malloc(NMAX * sizeof(float)), *yf = malloc(NMAX * sizeof(float));
    float *xd = malloc(NMAX * sizeof(float)), *yd = malloc(NMAX * sizeof(float));
    uint8_t *xq = malloc(NMAX * 4), *yb = malloc(NMAX * 4), *yg = malloc(NMAX * 4), *yl = malloc(NMAX * 4);

    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const uint32_t type = types[ti];
        const bd_type_traits *wt = bd_type_traits_get(type);
        const bd_dot_traits *bt = bd_dot_traits_get(type);
        const struct ggml_type_traits_cpu *gc = cpu((enum ggml_type)type);
        CHECK(bt->vec_dot_type == (uint32_t)gc->vec_dot_type, "%s: vec_dot_type %u vs ggml %d", wt->name,
              bt->vec_dot_type, (int)gc->vec_dot_type);
        const struct ggml_type_traits_cpu *gca = cpu(gc->vec_dot_type);
        const bd_type_traits *att = bd_type_traits_get(bt->vec_dot_type);
        double worst[BD_SIMD_TOP + 1] = {0};
        long differ[BD_SIMD_TOP + 1] = {0}, dots = 0;
        long conv_rows = 0, conv_bad = 0;
        /* then, for the float types only, 1..127 and a few more: every tail after the 32- and 64-element steps */
        static const int64_t lens[] = {256, 512, 768, 2048, 4096, 2080, 2090, 4072};
        enum { NL = sizeof lens / sizeof lens[0] };
        for (int li = 0; li < NL + 127; li++) {
            const int64_t n = li < NL ? lens[li] : li - NL + 1;
            if ((li >= 6 && wt->blck_size > 1) || !bd_row_size(type, n) || !bd_row_size(bt->vec_dot_type, n)) continue;
            const size_t abytes = bd_row_size(bt->vec_dot_type, n);
            for (int rep = 0; rep < 20; rep++) {
                const float sw = rep % 3 ? 1.0f : 0.03f, sa = rep % 4 ? 1.0f : 50.0f;
                for (int64_t i = 0; i < n; i++) {
                    xf[i] = sw * rnd_normal();
                    yf[i] = sa * rnd_normal() * (rep % 5 == 0 && i % 11 == 0 ? 20 : 1);
                    if (rep == 7 && i % 64 < 32) yf[i] = 0; /* all-zero activation blocks */
                    /* Exact ties: with amax 127 both Q8_0 multipliers are 1, and x.5 rounds to even at run time
                     * but away from zero in ggml's reference quantizer. */
                    if (rep == 9) yf[i] = i % 32 == 0 ? 127.0f : (float)(i % 9) - 4.5f;
                    if (rep == 11 && (i / 32) % 2) yf[i] *= 1e-39f; /* subnormal blocks: 127/amax is infinite */
                }
                wt->from_float(xf, xq, n);
                wt->to_float(xq, xd, n);
                memset(yb, 0, abytes);
                memset(yg, 0, abytes);
                bt->from_float(yf, yb, n);
                if (gca->from_float) {
                    gca->from_float(yf, yg, n);
                } else {
                    memcpy(yg, yf, abytes); /* F32 activations: ggml uses them as they are */
                }
                conv_rows++;
                if (memcmp(yb, yg, abytes) != 0) conv_bad++;
                /* braid converts as ggml's AVX builds do; the SSE4.2 / x64 builds quantize Q8_0 with the
                 * reference rounding (printed, not checked: the dots below use ggml's own bytes) */
                CHECK(!conv_exact || memcmp(yb, yg, abytes) == 0, "%s n=%lld rep %d: activation bytes differ from ggml's",
                      wt->name, (long long)n, rep);
                for (int lv = 1; lv < levels; lv++) { /* every level converts to the same bytes */
                    memset(yl, 0, abytes);
                    tab[lv][type].from_float(yf, yl, n);
                    CHECK(memcmp(yl, yb, abytes) == 0, "%s n=%lld: %s activation bytes differ from the portable ones",
                          wt->name, (long long)n, level_names[lv]);
                }
                if (type == BD_TYPE_Q8_0) {
                    ggml_get_type_traits(GGML_TYPE_Q8_0)->from_float_ref(yf, yb, n);
                    for (int64_t blk = 0; blk < n / 32; blk++, ref_blocks++)
                        ref_differ += memcmp(yb + blk * 34, yg + blk * 34, 34) != 0;
                }
                att->to_float(yg, yd, n);
                double mag = 0;
                for (int64_t i = 0; i < n; i++) mag += fabs((double)xd[i] * yd[i]);
                if (mag == 0) mag = 1e-30;
                float sg = 0;
                gc->vec_dot((int)n, &sg, 0, xq, 0, yg, 0, 1);
                dots++;
                for (int lv = 0; lv < levels; lv++) {
                    float sb = 0;
                    tab[lv][type].vec_dot(n, &sb, xq, yg);
                    const double e = fabs((double)sb - sg) / mag;
                    if (e > worst[lv]) worst[lv] = e;
                    if (memcmp(&sb, &sg, sizeof sb) != 0) differ[lv]++;
                    const int float_type = type == BD_TYPE_F16 || type == BD_TYPE_F32;
                    const int lwidth = lv == BD_SIMD_SCALAR ? 512 : oracle_level_width(lv);
                    /* BF16: the AVX2 builds' order is reproduced, the AVX512_BF16 one is not */
                    /* aarch64: the NEON levels' kernels against their paired build (oracle_cpu.h) */
                    const int exact = (vwidth != 0 && (type == BD_TYPE_BF16 ? lv == BD_SIMD_AVX2 && vwidth == 256
                                                                            : !float_type || lwidth == vwidth)) ||
                                      oracle_arm_exact_dot(lv, variant, type);
                    /* ggml's arm64 builds with FP16 arithmetic sum F16 products in half precision (ggml_variant.h),
                     * and so does braid's dotprod level (their pair): where only one side does, another precision,
                     * held to 2e-3 of sum|x*y| (measured 5.3e-4) */
                    const int braid_half = BD_HAVE_NEON && lv == BD_SIMD_NEON_DOT;
                    const double tol = type == BD_TYPE_F16 && (ggml_variant_f16_half_acc(variant) || braid_half) ? 2e-3
                                                                                                               : 1e-5;
                    if (!exact) {
                        CHECK(e < tol, "%s n=%lld rep %d: braid %s %.9g vs ggml %.9g (%g of sum|xy|)", wt->name,
                              (long long)n, rep, level_names[lv], sb, sg, e);
                    } else {
                        CHECK(memcmp(&sb, &sg, sizeof sb) == 0,
                              "%s n=%lld rep %d: braid %s %.9g vs ggml %.9g (%g of sum|xy|): not bit-identical",
                              wt->name, (long long)n, rep, level_names[lv], sb, sg, e);
                    }
                }
            }
        }
        printf("%-5s activations as %-4s: %ld/%ld rows differ from ggml; max |dot - ggml| / sum|x*y|:", wt->name,
               att->name, conv_bad, conv_rows);
        for (int lv = 0; lv < levels; lv++)
            printf(" %s %.2e (%ld/%ld not bit-identical)", level_names[lv], worst[lv], differ[lv], dots);
        printf("\n");
    }
    printf("ggml's run-time Q8_0 conversion differs from its reference quantizer in %ld of %ld blocks\n", ref_differ,
           ref_blocks);
    free(xf), free(yf), free(xd), free(yd), free(xq), free(yb), free(yg), free(yl);
    TEST_MAIN_END();
}
