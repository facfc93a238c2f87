/* test_dot.c — every SIMD level's dot products and activation converters against the portable ones.
 *
 * For each weight type and each level this CPU supports: weight rows quantized from random data, activations
 * converted by the level's own from_float (must give the same bytes as the portable converter), then the dot
 * must be bit-identical to the portable one (the levels follow the float orders of their paired ggml builds,
 * dot.h: the float types at avx2 and BF16 at avx512 have other orders, so within 1e-5 of the sum of
 * |products|), and agree with a float64 dot of the dequantized rows within 1e-4 of that sum. Lengths cover
 * tails (odd lengths for the float types) and 1..16 blocks; rows start off the vector alignment. vec_dot_n
 * (several activation rows at once) must give exactly vec_dot's bits for every row. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "tensor/cpu.h"
#include "tensor/dot.h"
#include "tensor/dot_impl.h"
#include "tensor/types.h"
#include "test.h"

static uint64_t rng = 0x1234567887654321ull;

static float rnd_normal(void) {
    double u[2];
    for (int k = 0; k < 2; k++) {
        rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
        u[k] = ((rng * 0x2545f4914f6cdd1dull >> 11) + 1) * 0x1p-53;
    }
    return (float)(sqrt(-2 * log(u[0])) * cos(6.283185307179586 * u[1]));
}

static const uint32_t types[] = {BD_TYPE_F32,  BD_TYPE_F16,  BD_TYPE_BF16,   BD_TYPE_Q8_0,   BD_TYPE_Q4_0,
                                     BD_TYPE_Q4_1, BD_TYPE_Q5_0, BD_TYPE_Q5_1,   BD_TYPE_IQ4_NL, BD_TYPE_MXFP4,
                                     BD_TYPE_Q2_K, BD_TYPE_Q3_K, BD_TYPE_Q4_K,   BD_TYPE_Q5_K,   BD_TYPE_Q6_K,
                                     BD_TYPE_IQ4_XS};

int main(void) {
    static bd_dot_traits tab[3][BD_TYPE_COUNT];
    const int levels = bd_dot_cpu_level() + 1;
    for (int lv = 0; lv < levels; lv++) bd_dot_fill_level(tab[lv], lv);
    const char *const *level_names = bd_dot_level_names;
    printf("dispatcher chose %s; testing %d level(s)\n", bd_simd_level(), levels);
    CHECK(!strcmp(bd_simd_level(), level_names[levels - 1]) || getenv("BRAID_SIMD"), "dispatcher picked %s",
          bd_simd_level());

    /* The kernel table rests on the type rows: every weight type is supported at every level with its row's
     * activation type; a type without an activation converter (Q8_K) or an unknown id is not. */
    for (int ty = 0; ty < BD_TYPE_COUNT; ty++) {
        const bd_type_traits *row = bd_type_traits_get((uint32_t)ty);
        const int weight = row && row->act_from_float;
        CHECK(bd_type_supported((uint32_t)ty) == weight, "type %d: supported %d, row says %d", ty,
              bd_type_supported((uint32_t)ty), weight);
        for (int lv = 0; lv < levels; lv++) {
            CHECK((tab[lv][ty].vec_dot != NULL) == weight, "type %d level %d: vec_dot", ty, lv);
            if (weight) CHECK(tab[lv][ty].vec_dot_type == row->vec_dot_type, "type %d level %d: vec_dot_type", ty, lv);
        }
    }
    CHECK(!bd_type_supported(BD_TYPE_Q8_K) && !bd_type_supported(BD_TYPE_COUNT) && !bd_type_supported(4),
          "activation-only and unknown types are not weight types");

    enum { NMAX = 4096 + 64 };
    float *xf = malloc(NMAX * sizeof(float)), *yf = malloc(NMAX * sizeof(float));
    float *xd = malloc(NMAX * sizeof(float)), *yd = malloc(NMAX * sizeof(float));
    uint8_t *xq = malloc(NMAX * 4 + 64), *yq0 = malloc(NMAX * 4 + 64), *yq = malloc(NMAX * 4 + 64);

    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const uint32_t type = types[ti];
        const bd_type_traits *wt = bd_type_traits_get(type);
        const uint32_t at = tab[0][type].vec_dot_type;
        const bd_type_traits *att = bd_type_traits_get(at);
        CHECK(bd_dot_traits_get(type) != NULL, "%s has no dot", wt->name);
        double worst[3] = {0}, worst_exact = 0;
        static const int64_t float_lens[] = {1, 7, 16, 33, 100, 255, 1000, 1027, 4096};
        static const int64_t block_counts[] = {1, 3, 5, 8, 11, 16};
        const int nl = wt->blck_size == 1 ? 9 : 6;
        for (int li = 0; li < nl; li++) {
            const int64_t n = wt->blck_size == 1 ? float_lens[li] : block_counts[li] * wt->blck_size;
            for (int rep = 0; rep < 20; rep++) {
                const float scale_w = rep % 3 == 0 ? 0.02f : 1.0f, scale_a = rep % 4 == 0 ? 30.0f : 1.0f;
                for (int64_t i = 0; i < n; i++) {
                    xf[i] = scale_w * rnd_normal();
                    yf[i] = scale_a * rnd_normal() * (rep % 5 == 0 && i % 7 == 0 ? 10 : 1);
                    if (rep == 19) { /* extremes: every level at its end and products of one sign, the worst
                                        case for 16- and 32-bit integer sums */
                        xf[i] = (i & 1) ? 1.0f : -1.0f;
                        yf[i] = (i & 1) ? 3.0f : -3.0f;
                    } else if (rep == 17 && (i / 32) % 2) {
                        yf[i] *= 1e-39f; /* subnormal activation blocks: 127/amax overflows to infinity */
                    } else if (rep == 18) {
                        xf[i] = (i % 3) ? 2.0f : -2.0f;
                        yf[i] = -xf[i];
                    }
                }
                /* Rows off the vector alignment: dot.h promises only natural alignment (4 bytes suffices). */
                uint8_t *xb = xq + 4 * (rep % 7), *yb0 = yq0 + 4 * (rep % 5), *yb = yq + 4 * (rep % 3);
                wt->from_float(xf, xb, n);
                wt->to_float(xb, xd, n);
                tab[0][type].from_float(yf, yb0, n);
                att->to_float(yb0, yd, n);
                double exact = 0, mag = 0;
                for (int64_t i = 0; i < n; i++) {
                    exact += (double)xd[i] * yd[i];
                    mag += fabs((double)xd[i] * yd[i]);
                }
                if (mag == 0) mag = 1e-30;
                float s0;
                tab[0][type].vec_dot(n, &s0, xb, yb0);
                const double e0 = fabs(s0 - exact) / mag;
                if (e0 > worst_exact) worst_exact = e0;
                /* Q8_1 activations carry the block sum as an fp16 (s): the minimum terms of Q4_1 / Q5_1 are only
                 * that exact (relative 2^-11 of m * s per block). */
                const double tol = at == BD_TYPE_Q8_1 ? 4e-3 : 1e-4;
                CHECK(e0 < tol, "%s n=%lld scalar vs float64: %g of sum|xy|", wt->name, (long long)n, e0);
                for (int lv = 1; lv < levels; lv++) {
                    const size_t bytes = bd_row_size(at, n);
                    memset(yb, 0xAB, bytes);
                    tab[lv][type].from_float(yf, yb, n);
                    CHECK(memcmp(yb, yb0, bytes) == 0, "%s n=%lld: %s activation bytes differ from scalar",
                          wt->name, (long long)n, level_names[lv]);
                    CHECK(tab[lv][type].vec_dot_type == at, "%s vec_dot_type", wt->name);
                    float s;
                    tab[lv][type].vec_dot(n, &s, xb, yb0);
                    const double e = fabs((double)s - s0) / mag;
                    if (e > worst[lv]) worst[lv] = e;
                    /* Every level follows the float order of its paired ggml build (dot.h): the quantized
                     * dots one order everywhere, bit-identical; the float dots (F32, F16, BF16) 8 lanes at
                     * avx2 (the AVX2 builds) against 16 in the portable code, so only within 1e-5; BF16 at
                     * avx512 also (the AVX512_BF16 instruction rounds its pair sums differently). The
                     * conformance test (conformance_dot) checks each level against its ggml build. On aarch64 the
                     * NEON levels follow ggml's arm64 builds (two 4-lane chains, per-block sums) while the portable
                     * code keeps the x86 AVX-512 order: every type within 1e-5 there, but F16 at dotprod, which
                     * sums in half precision as ggml's armv8.2_2 build does: within 2e-3 (conformance_dot's bound). */
                    const int float_type = type == BD_TYPE_F32 || type == BD_TYPE_F16 || type == BD_TYPE_BF16;
                    if (type == BD_TYPE_BF16 || (float_type && lv == BD_SIMD_AVX2) || BD_HAVE_NEON) {
                        const double lim = BD_HAVE_NEON && type == BD_TYPE_F16 && lv == BD_SIMD_NEON_DOT ? 2e-3 : 1e-5;
                        CHECK(e < lim, "%s n=%lld rep %d: %s %.9g vs scalar %.9g (%g of sum|xy|)", wt->name,
                              (long long)n, rep, level_names[lv], s, s0, e);
                    } else {
                        CHECK(memcmp(&s, &s0, sizeof s) == 0, "%s n=%lld rep %d: %s %.9g vs scalar %.9g differ",
                              wt->name, (long long)n, rep, level_names[lv], s, s0);
                    }
                }
            }
        }
        /* vec_dot_n: ny activation rows at once, bit-identical to vec_dot on each (strided output, rows a
         * few bytes apart beyond their size). */
        long n_bad = 0, n_checked = 0;
        for (int li = 0; li < 3; li++) {
            const int64_t n = wt->blck_size == 1 ? float_lens[li * 3 + 2] : block_counts[li * 2 + 1] * wt->blck_size;
            const size_t by = bd_row_size(at, n) + 4;
            uint8_t *ys = malloc(by * BD_DOT_MAX_NY);
            for (int64_t i = 0; i < n; i++) xf[i] = rnd_normal();
            wt->from_float(xf, xq, n);
            for (int j = 0; j < BD_DOT_MAX_NY; j++) {
                for (int64_t i = 0; i < n; i++) yf[i] = rnd_normal() * (j + 1);
                tab[0][type].from_float(yf, ys + j * by, n);
            }
            for (int lv = 0; lv < levels; lv++) {
                for (int ny = 1; ny <= BD_DOT_MAX_NY; ny++) {
                    float out[3 * BD_DOT_MAX_NY], one;
                    bd_vec_dot_rows(&tab[lv][type], n, out, 3, xq, ys, by, ny);
                    for (int j = 0; j < ny; j++) {
                        tab[lv][type].vec_dot(n, &one, xq, ys + j * by);
                        n_checked++;
                        if (memcmp(&one, &out[3 * j], sizeof one) != 0) n_bad++;
                        CHECK(memcmp(&one, &out[3 * j], sizeof one) == 0, "%s %s n=%lld ny=%d row %d: %.9g vs %.9g",
                              wt->name, level_names[lv], (long long)n, ny, j, out[3 * j], one);
                    }
                }
            }
            free(ys);
        }
        CHECK(n_checked > 0 && n_bad == 0, "%s: vec_dot_n", wt->name);
        printf("%-5s scalar vs float64 %.2e", wt->name, worst_exact);
        for (int lv = 1; lv < levels; lv++) printf("  %s vs scalar %.2e", level_names[lv], worst[lv]);
        printf("  (of sum|x*y|)\n");
    }
    free(xf), free(yf), free(xd), free(yd), free(xq), free(yq0), free(yq);
    TEST_MAIN_END();
}
