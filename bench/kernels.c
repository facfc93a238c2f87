/* kernels.c — speed of the compute kernels, for the roofline and for comparing SIMD levels.
 *
 * Prints: memory bandwidth (streaming read of a buffer far larger than the caches: the roofline's denominator),
 * F32 matmul GFLOP/s in the prompt-processing shape (T=512 tokens, 1024x1024 weights), and matrix-vector
 * (decode) GB/s of weight bytes per weight type. Usage: bench_kernels [-t threads] [-T tokens] [-n N] [-k K]
 * [-r seconds per figure] [-y only these types, comma-separated] [-m MiB of weights per matvec matrix, default 768]. Figures are medians of repeated runs; nothing is asserted. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/alloc.h"
#include "base/threadpool.h"
#include "tensor/dot.h"
#include "tensor/matmul.h"
#include "tensor/ops.h"
#include "tensor/simd.h"
#include "tensor/types.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds (all threads) of the median run of the last median_time call: on a shared machine, where wall
 * time depends on other processes, CPU time per run still compares kernels (spinning waits count too). */
static double last_cpu;

/* Runs fn until `budget` seconds passed (at least 3 times) and returns the median time of one run. */
typedef void (*bench_fn)(void *);
static double median_time(bench_fn fn, void *arg, double budget) {
    double t[201], c[201];
    int n = 0;
    double start = now();
    fn(arg); /* warm-up */
    while (n < 201 && (n < 3 || now() - start < budget)) {
        double t0 = now(), c0 = cpu_now();
        fn(arg);
        t[n] = now() - t0;
        c[n++] = cpu_now() - c0;
    }
    qsort(t, (size_t)n, sizeof t[0], cmp_d);
    qsort(c, (size_t)n, sizeof c[0], cmp_d);
    last_cpu = c[n / 2];
    return t[n / 2];
}

/* ---- memory bandwidth: each thread sums its share of a large buffer ---- */
typedef struct bw_arg {
    const double *buf;
    int64_t n;
    double sums[64];
    bd_threadpool *tp;
} bw_arg;

#if defined(__x86_64__)
#include <immintrin.h>
/* Vector loads and eight independent add chains, so the core is never the limit. */
__attribute__((target("avx2"))) static double sum_avx2(const double *p, int64_t n) {
    __m256d s[8];
    for (int j = 0; j < 8; j++) s[j] = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int j = 0; j < 8; j++) s[j] = _mm256_add_pd(s[j], _mm256_loadu_pd(p + i + 4 * j));
    double out[4], r = 0;
    for (int j = 1; j < 8; j++) s[0] = _mm256_add_pd(s[0], s[j]);
    _mm256_storeu_pd(out, s[0]);
    for (; i < n; i++) r += p[i];
    return r + out[0] + out[1] + out[2] + out[3];
}
#endif

static void bw_task(void *p, int ith, int nth) {
    bw_arg *a = p;
    int64_t b, e;
    bd_split(a->n, ith, nth, &b, &e);
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) {
        a->sums[ith & 63] = sum_avx2(a->buf + b, e - b);
        return;
    }
#endif
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = b;
    for (; i + 4 <= e; i += 4) {
        s0 += a->buf[i];
        s1 += a->buf[i + 1];
        s2 += a->buf[i + 2];
        s3 += a->buf[i + 3];
    }
    for (; i < e; i++) s0 += a->buf[i];
    a->sums[ith & 63] = s0 + s1 + s2 + s3;
}
static void bw_run(void *p) {
    bw_arg *a = p;
    bd_threadpool_run(a->tp, bw_task, a);
}

/* ---- matmul ---- */
typedef struct mm_arg {
    bd_threadpool *tp;
    uint32_t type;
    const void *W;
    int64_t N, K, T;
    const float *x;
    float *y;
    void *scratch;
    size_t ss;
    int failed;
} mm_arg;
static void mm_run(void *p) {
    mm_arg *a = p;
    if (bd_matmul(a->tp, a->type, a->W, a->N, a->K, a->x, a->K, a->T, a->y, a->N, a->scratch, a->ss) != BRAID_OK)
        a->failed = 1;
}

/* ---- dispatch overhead, GDN and attention in decode shape ---- */
static void empty_task(void *p, int ith, int nth) {
    (void)p;
    (void)ith;
    (void)nth;
}
typedef struct disp_arg {
    bd_threadpool *tp;
} disp_arg;
static void disp_run(void *p) {
    disp_arg *a = p;
    for (int i = 0; i < 1000; i++) bd_threadpool_run(a->tp, empty_task, NULL);
}

typedef struct gdn_arg {
    bd_threadpool *tp;
    int64_t T;
    int H_k, H_v, S;
    float *q, *k, *v, *g, *beta, *state, *o;
} gdn_arg;
static void gdn_run(void *p) {
    gdn_arg *a = p;
    bd_gdn(a->tp, a->T, a->H_k, a->H_v, a->S, a->q, a->H_k * a->S, a->k, a->H_k * a->S, a->v, a->H_v * a->S, a->g,
           a->beta, a->state, a->o, a->H_v * a->S, NULL);
}

typedef struct att_arg {
    bd_threadpool *tp;
    bd_attn at;
    int64_t T;
    float *q, *o;
    const int32_t **vis;
    int32_t *nv;
    void *scratch;
    size_t ss;
} att_arg;
static void att_run(void *p) {
    att_arg *a = p;
    if (bd_attention(a->tp, &a->at, a->T, a->q, (int64_t)a->at.n_head * a->at.head_dim, a->at.head_dim,
                     (const int32_t *const *)a->vis, a->nv, a->o, (int64_t)a->at.n_head * a->at.head_dim, a->scratch,
                     a->ss) != BRAID_OK)
        fprintf(stderr, "attention: %s\n", braid_last_error());
}

static void bench_small_kernels(bd_threadpool *tp, int threads, double budget) {
    disp_arg d = {tp};
    double td = median_time(disp_run, &d, budget);
    printf("thread pool dispatch (empty task, %d threads): %.2f us\n", threads, td * 1e3);

    /* GDN in qwen35-0.8B-like shape: 16 value heads, 16 key heads, S = 128; decode and a 512-token prompt */
    for (int pass = 0; pass < 2; pass++) {
        gdn_arg g = {tp, pass ? 512 : 1, 16, 16, 128, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
        int64_t T = g.T;
        g.q = bd_calloc((size_t)(T * g.H_k * g.S), 4);
        g.k = bd_calloc((size_t)(T * g.H_k * g.S), 4);
        g.v = bd_calloc((size_t)(T * g.H_v * g.S), 4);
        g.g = bd_calloc((size_t)(T * g.H_v), 4);
        g.beta = bd_calloc((size_t)(T * g.H_v), 4);
        g.o = bd_calloc((size_t)(T * g.H_v * g.S), 4);
        g.state = bd_calloc((size_t)g.H_v * g.S * g.S, 4);
        double tg = median_time(gdn_run, &g, budget);
        double bytes = 2.0 * (double)g.H_v * g.S * g.S * 4 * (double)T; /* state read + written per token */
        printf("gdn T=%lld H_v=16 S=128: %.3f ms (%.1f us/token, state traffic %.1f GB/s)\n", (long long)T,
               tg * 1e3, tg * 1e6 / (double)T, bytes / tg / 1e9);
        bd_free(g.q);
        bd_free(g.k);
        bd_free(g.v);
        bd_free(g.g);
        bd_free(g.beta);
        bd_free(g.o);
        bd_free(g.state);
    }

    /* attention decode: 8 query heads, 2 KV heads, head size 256, over n cells (F32 and F16) */
    const int n_cells = 4096;
    for (int ty = 0; ty < 2; ty++) {
        size_t es = ty ? 2 : 4;
        att_arg a = {tp, {8, 2, 256, 1.0f / 16.0f, ty ? BD_TYPE_F16 : BD_TYPE_F32, NULL, NULL, 2 * 256 * es,
                          2 * 256 * es, 256 * es, 256 * es},
                     1, NULL, NULL, NULL, NULL, NULL, 0};
        void *K = bd_calloc((size_t)n_cells, a.at.k_cell_bytes), *V = bd_calloc((size_t)n_cells, a.at.v_cell_bytes);
        a.at.k = K;
        a.at.v = V;
        int32_t *cells = bd_mallocn((size_t)n_cells, 4);
        for (int i = 0; i < n_cells; i++) cells[i] = i;
        const int32_t *vis[1] = {cells};
        int32_t nv[1] = {n_cells};
        a.vis = vis;
        a.nv = nv;
        a.q = bd_calloc(8 * 256, 4);
        a.o = bd_calloc(8 * 256, 4);
        a.ss = bd_attention_scratch_size(&a.at, n_cells, threads);
        a.scratch = bd_malloc(a.ss);
        double ta = median_time(att_run, &a, budget);
        printf("attention decode %s 8/2 heads hd 256 over %d cells: %.3f ms (K+V %.1f GB/s)\n", ty ? "f16" : "f32",
               n_cells, ta * 1e3, 2.0 * n_cells * (double)a.at.k_cell_bytes / ta / 1e9);
        bd_free(K);
        bd_free(V);
        bd_free(cells);
        bd_free(a.q);
        bd_free(a.o);
        bd_free(a.scratch);
    }
}

/* Whether name is one of the comma-separated names of list (case-insensitive). */
static int listed(const char *list, const char *name) {
    const size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncasecmp(p, name, n)) return 1;
        p += len + (e != NULL);
    }
    return 0;
}

int main(int argc, char **argv) {
    int threads = 2;
    int64_t T = 512, N = 1024, K = 1024;
    double budget = 1.0;
    const char *only = NULL; /* -y TYPE[,TYPE...]: matvec/matmul figures for those types only */
    int64_t mib = 768;       /* -m MiB of weights per matvec matrix */
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-t")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-T")) T = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "-n")) N = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "-k")) K = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "-r")) budget = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "-y")) only = argv[i + 1];
        else if (!strcmp(argv[i], "-m")) mib = atoll(argv[i + 1]);
        else {
            fprintf(stderr, "usage: %s [-t threads] [-T tokens] [-n N] [-k K] [-r seconds] [-y type] [-m MiB]\n", argv[0]);
            return 2;
        }
    }
    bd_threadpool *tp = NULL;
    if (bd_threadpool_new(threads, &tp) != BRAID_OK) {
        fprintf(stderr, "%s\n", braid_last_error());
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("simd %s, %d threads\n", bd_simd_level(), threads);

    /* This CPU has a 260 MiB L3: the buffer must be far larger to measure DRAM (what decode streams from). */
    int64_t nbw = (int64_t)1024 << 20 >> 3;
    double *buf = bd_mallocn((size_t)nbw, sizeof(double));
    if (!buf) return 1;
    for (int64_t i = 0; i < nbw; i++) buf[i] = (double)(i & 1023);
    bw_arg bw = {buf, nbw, {0}, tp};
    double tbw = median_time(bw_run, &bw, budget);
    double gbs = (double)nbw * 8 / tbw / 1e9;
    printf("memory read bandwidth: %.2f GB/s (1 GiB streaming read)\n", gbs);
    bd_free(buf);

    bench_small_kernels(tp, threads, budget);

    /* F32 prefill-shaped matmul */
    float *W = bd_mallocn((size_t)(N * K), 4), *x = bd_mallocn((size_t)(T * K), 4), *y = bd_mallocn((size_t)(T * N), 4);
    if (!W || !x || !y) return 1;
    for (int64_t i = 0; i < N * K; i++) W[i] = (float)((i * 7) % 13) * 0.01f - 0.06f;
    for (int64_t i = 0; i < T * K; i++) x[i] = (float)((i * 5) % 11) * 0.01f - 0.05f;
    mm_arg m = {tp, BRAID_TYPE_F32, W, N, K, T, x, y, NULL, 0, 0};
    double tm = median_time(mm_run, &m, budget);
    printf("matmul f32 T=%lld N=%lld K=%lld: %.3f ms, %.1f GFLOP/s (%.1f GFLOP per CPU-second)\n", (long long)T,
           (long long)N, (long long)K, tm * 1e3, 2.0 * (double)T * (double)N * (double)K / tm / 1e9,
           2.0 * (double)T * (double)N * (double)K / last_cpu / 1e9);

    /* matvec (decode) per type: weight bytes per second; the matrix is bigger than the caches */
    const uint32_t types[] = {BRAID_TYPE_F32,  BRAID_TYPE_F16,  BRAID_TYPE_BF16,   BRAID_TYPE_Q8_0,   BRAID_TYPE_Q4_0,
                              BRAID_TYPE_Q4_K, BRAID_TYPE_Q5_K, BRAID_TYPE_Q6_K,   BRAID_TYPE_Q4_1,   BRAID_TYPE_Q5_0,
                              BRAID_TYPE_Q5_1, BRAID_TYPE_Q2_K, BRAID_TYPE_Q3_K,   BRAID_TYPE_IQ4_NL, BRAID_TYPE_IQ4_XS,
                              BRAID_TYPE_MXFP4};
    /* Each matrix holds ~768 MiB of weights, well beyond the L3, as a model's weights are. */
    int64_t Kv = 4096;
    float *xv = bd_mallocn((size_t)Kv, 4), *yv = bd_mallocn((size_t)1 << 20, 4), *rowf = bd_mallocn((size_t)Kv, 4);
    for (int64_t i = 0; i < Kv; i++) xv[i] = rowf[i] = (float)((i * 3) % 17) * 0.01f - 0.08f;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        uint32_t ty = types[ti];
        const bd_type_traits *tt = bd_type_traits_get(ty);
        if (only && tt && !listed(only, tt->name)) continue;
        if (!tt || (ty != BRAID_TYPE_F32 && !bd_dot_traits_get(ty))) {
            printf("matvec type %u: not available in this build\n", ty);
            continue;
        }
        size_t rs = bd_row_size(ty, Kv);
        int64_t Nv = (int64_t)(((size_t)mib << 20) / rs) & ~(int64_t)63;
        /* (at least the 1024 rows of the prompt-shaped product below: -m 1 keeps the matvec in L2, which on a
         * shared machine measures the kernel without other processes' memory traffic) */
        const int64_t Nw = Nv > 1024 ? Nv : 1024;
        uint8_t *Wq = bd_malloc(rs * (size_t)Nw);
        size_t ss = bd_matmul_scratch_size(ty, Kv, T);
        void *scratch = ss ? bd_malloc(ss) : NULL;
        float *xp = bd_mallocn((size_t)(T * Kv), 4), *yp = bd_mallocn((size_t)(T * Nw), 4);
        if (!Wq || (ss && !scratch) || !xp || !yp) return 1;
        /* quantize one row, copy it everywhere: the reference quantizers are too slow for 768 MiB */
        tt->from_float(rowf, Wq, Kv);
        for (int64_t n = 1; n < Nw; n++) memcpy(Wq + (size_t)n * rs, Wq, rs);
        for (int64_t i = 0; i < T * Kv; i++) xp[i] = (float)((i * 5) % 11) * 0.01f - 0.05f;
        mm_arg mv = {tp, ty, Wq, Nv, Kv, 1, xv, yv, scratch, ss, 0};
        double tv = median_time(mm_run, &mv, budget);
        double wbytes = (double)rs * (double)Nv;
        printf("matvec %-6s N=%lld K=%lld: %.3f ms, %.2f GB/s of weights (%.0f%% of measured bandwidth), %.2f GB per "
               "CPU-second\n", tt->name, (long long)Nv, (long long)Kv, tv * 1e3, wbytes / tv / 1e9,
               100.0 * wbytes / tv / 1e9 / gbs, wbytes / last_cpu / 1e9);
        /* prompt-shaped product on the same matrix, first 1024 rows x K=1024 slice is not contiguous per row,
         * so use the whole K and fewer rows */
        mm_arg mp = {tp, ty, Wq, 1024, Kv, T, xp, yp, scratch, ss, 0};
        double tp2 = median_time(mm_run, &mp, budget);
        printf("matmul %-6s T=%lld N=1024 K=%lld: %.1f GFLOP/s (%.1f GFLOP per CPU-second)\n", tt->name, (long long)T,
               (long long)Kv, 2.0 * (double)T * 1024.0 * (double)Kv / tp2 / 1e9,
               2.0 * (double)T * 1024.0 * (double)Kv / last_cpu / 1e9);
        if (mv.failed || mp.failed) printf("  (failed: %s)\n", braid_last_error());
        bd_free(Wq);
        bd_free(scratch);
        bd_free(xp);
        bd_free(yp);
    }
    bd_free(xv);
    bd_free(yv);
    bd_free(rowf);
    bd_free(W);
    bd_free(x);
    bd_free(y);
    bd_threadpool_free(tp);
    return m.failed;
}
