/* dot.c (bench_dot) — how fast each weight type's vec_dot streams weight bytes, single thread.
 *
 * For each type: a 4096 x 4096 matrix times one activation row (converted once to the type's vec_dot_type),
 * i.e. the decode-time matrix-vector product. Two figures, in GB/s of weight bytes read:
 *   hot   the same matrix again and again (it stays in the last-level cache if it fits there);
 *   dram  a different 4096-row window of a >= 640 MiB weight set each time, so the bytes come from memory.
 * The same loop with ggml's CPU-backend vec_dot (the variant llama.cpp loads here) runs on the same bytes
 * when the oracle is available, and the ratios braid / ggml (speed) are printed. Each figure is the best of
 * 3 rounds (braid and ggml alternating), since other processes share the machine. "4 tok x": how much faster
 * vec_dot_n makes 4 activation rows (a prefill batch) than 4 vec_dot calls, hot. BRAID_SIMD selects braid's
 * level.
 * Usage: bench_dot [type ...]   (default: all) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tensor/dot.h"
#include "tensor/types.h"

#if __has_include(<ggml-cpu.h>) /* the build adds the oracle's headers when it has the oracle */
#define BRAID_BENCH_ORACLE 1
#include "oracle_cpu.h"
#endif

enum { N = 4096, ROWS = 4096 };

/* CPU time of this thread: other processes sharing the cores then do not count against the figure (they
 * still share caches and memory bandwidth). BENCH_WALL=1 measures wall time instead. */
static double now(void) {
    static int wall = -1;
    if (wall < 0) wall = getenv("BENCH_WALL") != NULL;
    struct timespec ts;
    clock_gettime(wall ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 88172645463325252ull;
static float rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) * 0x1p-24) * 2 - 1;
}

typedef void (*row_dot)(const void *ctx, int64_t n, float *s, const void *x, const void *y);
static void braid_dot(const void *ctx, int64_t n, float *s, const void *x, const void *y) {
    ((const bd_dot_traits *)ctx)->vec_dot(n, s, x, y);
}
#ifdef BRAID_BENCH_ORACLE
static void ggml_dot(const void *ctx, int64_t n, float *s, const void *x, const void *y) {
    ((const struct ggml_type_traits_cpu *)ctx)->vec_dot((int)n, s, 0, x, 0, y, 0, 1);
}
#endif

/* Seconds for the 4096 rows against 4 activation rows with vec_dot_n (weights decoded once), best of runs. */
static double time_matvec4(const bd_dot_traits *dt, const uint8_t *w, size_t row_bytes, const uint8_t *act4,
                           size_t act_bytes, float *out, int runs) {
    double best = 1e30;
    for (int r = 0; r < runs; r++) {
        const double t0 = now();
        for (int i = 0; i < ROWS; i++) bd_vec_dot_rows(dt, N, &out[i], ROWS, w + (size_t)i * row_bytes, act4, act_bytes, 4);
        const double t = now() - t0;
        if (t < best) best = t;
    }
    return best;
}

/* Seconds per 4096-row matvec, best of a few runs; window w of the weight set per run (nwin windows). */
static double time_matvec(row_dot f, const void *ctx, const uint8_t *w, size_t row_bytes, int nwin,
                          const void *act, float *out, int runs) {
    double best = 1e30;
    int win = 0;
    for (int r = 0; r < runs; r++) {
        const uint8_t *m = w + (size_t)win * ROWS * row_bytes;
        win = (win + 1) % nwin;
        const double t0 = now();
        for (int i = 0; i < ROWS; i++) f(ctx, N, &out[i], m + (size_t)i * row_bytes, act);
        const double t = now() - t0;
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv) {
    static const uint32_t all[] = {BD_TYPE_F32,  BD_TYPE_F16,  BD_TYPE_BF16, BD_TYPE_Q8_0,
                                   BD_TYPE_Q4_0, BD_TYPE_Q4_K, BD_TYPE_Q5_K, BD_TYPE_Q6_K};
    const void *ggml_ctx[BD_TYPE_COUNT] = {0};
    const char *variant = NULL;
#ifdef BRAID_BENCH_ORACLE
    oracle_cpu_traits_fn cpu = oracle_cpu_traits(&variant);
    if (cpu)
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ggml_ctx[all[i]] = cpu((enum ggml_type)all[i]);
#endif
    printf("bench_dot: %d x %d matrix-vector product, 1 thread, braid SIMD level %s, ggml CPU backend %s, %s time\n",
           ROWS, N, bd_simd_level(), variant ? variant : "(not loaded)", getenv("BENCH_WALL") ? "wall" : "thread CPU");
    printf("%-5s %9s %12s %12s %12s %12s %8s %8s %10s\n", "type", "MiB", "hot GB/s", "dram GB/s", "ggml hot",
           "ggml dram", "hot x", "dram x", "4 tok x");
    float *x = malloc(N * sizeof(float)), *out = malloc(4 * ROWS * sizeof(float));
    uint8_t *act = malloc(N * 4), *act4 = malloc(4 * N * 4);
    for (int i = 0; i < N; i++) x[i] = rnd();
    for (size_t ti = 0; ti < sizeof all / sizeof all[0]; ti++) {
        const uint32_t type = all[ti];
        const bd_type_traits *tt = bd_type_traits_get(type);
        if (argc > 1) {
            int wanted = 0;
            for (int a = 1; a < argc; a++) wanted |= bd_type_from_name(argv[a]) == (int)type;
            if (!wanted) continue;
        }
        const bd_dot_traits *dt = bd_dot_traits_get(type);
        const size_t rb = bd_row_size(type, N), mat = rb * ROWS;
        const int nwin = (int)((640ull << 20) / mat) + 1;
        uint8_t *w = malloc(mat * nwin);
        if (w == NULL) {
            fprintf(stderr, "bench_dot: out of memory for %s\n", tt->name);
            return 1;
        }
        /* 64 distinct quantized rows, tiled over the whole set (the content does not change the speed). */
        float *row = malloc(N * sizeof(float));
        for (int r = 0; r < 64; r++) {
            for (int i = 0; i < N; i++) row[i] = rnd();
            tt->from_float(row, w + r * rb, N);
        }
        for (size_t r = 64; r < (size_t)ROWS * nwin; r++) memcpy(w + r * rb, w + (r % 64) * rb, rb);
        free(row);
        dt->from_float(x, act, N);
        const size_t ab = bd_row_size(dt->vec_dot_type, N);
        for (int j = 0; j < 4; j++) dt->from_float(x, act4 + j * ab, N);

        /* Best of several rounds, braid and ggml alternating, so that load from other processes on the
         * machine hits both alike. */
        double hot = 1e30, dram = 1e30, ghot = 1e30, gdram = 1e30;
        for (int round = 0; round < 3; round++) {
            double t = time_matvec(braid_dot, dt, w, rb, 1, act, out, 10);
            if (t < hot) hot = t;
            t = time_matvec(braid_dot, dt, w, rb, nwin, act, out, nwin);
            if (t < dram) dram = t;
#ifdef BRAID_BENCH_ORACLE
            if (ggml_ctx[type]) {
                t = time_matvec(ggml_dot, ggml_ctx[type], w, rb, 1, act, out, 10);
                if (t < ghot) ghot = t;
                t = time_matvec(ggml_dot, ggml_ctx[type], w, rb, nwin, act, out, nwin);
                if (t < gdram) gdram = t;
            }
#endif
        }
        if (!ggml_ctx[type]) ghot = gdram = 0;
        const double hot4 = time_matvec4(dt, w, rb, act4, ab, out, 10);
        printf("%-5s %9.1f %12.2f %12.2f %12.2f %12.2f %8.2f %8.2f %10.2f\n", tt->name, mat / 1048576.0,
               mat / hot * 1e-9, mat / dram * 1e-9, ghot ? mat / ghot * 1e-9 : 0, gdram ? mat / gdram * 1e-9 : 0,
               ghot ? ghot / hot : 0, gdram ? gdram / dram : 0, 4 * hot / hot4);
        fflush(stdout);
        free(w);
    }
    free(x), free(out), free(act), free(act4);
    return 0;
}
