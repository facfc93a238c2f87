/* bench_util.h — the measurements shared by `braid bench` (tools/cmd_bench.c) and the two-engine benchmark
 * (bench/llama_vs_braid.c), so that both report the same figures the same way:
 *   - braid's prompt processing (one n_prompt-token batch from an empty context, logits for the last input
 *     only) and generation (n_gen single-token decodes from an empty context), in tokens per second, with
 *     random tokens as llama-bench uses, after one short warm-up;
 *   - the memory bandwidth: a streaming read of a buffer much larger than the last-level cache, split over the
 *     same number of threads as the inference, the best of a portable loop and the widest-vector loop with and
 *     without software prefetch;
 *   - the weight bytes one generated token reads: every weight tensor once, except the token embedding, of
 *     which one row is read (unless it doubles as the output matrix, i.e. there is no output.weight).
 *   - the recurrent state bytes one generated token moves (hybrid models: each recurrent layer reads its state
 *     and writes the new one), from the file's metadata (bench_state_bytes);
 *   - the multiply-adds of one token through the weight matrices, and the peak multiply-add rate of the SIMD
 *     level in use, measured by a loop that keeps everything in registers (bench_peak_macs).
 * The decode roofline is bandwidth / (weight + state bytes per token): the generation speed if nothing but the
 * weights and the recurrent state had to cross the memory bus (KV reads are small next to them at these
 * lengths). The prompt's compute roofline is peak multiply-adds per second / multiply-adds per token: the
 * prompt speed if every multiply-add ran at the rate of the register-only loop (attention and the recurrence
 * not counted; they are small at these lengths).
 *
 * Header-only (static functions) because the braid command and the bench executables are separate programs
 * that share no library beyond libbraid. */
#ifndef BRAID_TESTKIT_BENCH_UTIL_H
#define BRAID_TESTKIT_BENCH_UTIL_H

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/status.h"
#include "braid.h"

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Mean and sample standard deviation of v[0..n). */
typedef struct {
    double mean, sd;
} bench_stat;

static inline int bench_cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts v in place; 0 for n <= 0). */
static inline double bench_median(double *v, int n) {
    if (n <= 0) return 0.0;
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static inline bench_stat bench_stats(const double *v, int n) {
    bench_stat s = {0.0, 0.0};
    if (n <= 0) return s;
    for (int i = 0; i < n; i++) s.mean += v[i];
    s.mean /= n;
    if (n > 1) {
        for (int i = 0; i < n; i++) s.sd += (v[i] - s.mean) * (v[i] - s.mean);
        s.sd = sqrt(s.sd / (n - 1));
    }
    return s;
}

/* A deterministic token stream for benchmarks (the values do not matter, only that they vary). */
static inline braid_token bench_token(uint64_t *state, int32_t n_vocab) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (braid_token)((*state >> 33) % (uint64_t)n_vocab);
}

/* The 1-minute load average (from /proc/loadavg; -1 if unavailable). Printed with the figures: on a shared
 * machine a load above the core count makes every number here meaningless, llama.cpp's generation most of all
 * (its threads wait for each other at every operation). */
static inline double bench_loadavg(void) {
    double l = -1.0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1.0;
        fclose(f);
    }
    return l;
}

/* ---- memory bandwidth ------------------------------------------------------------------------------------ */

typedef struct {
    const uint64_t *p;
    size_t n;
    int loop; /* which read loop (bench_bw_read) */
    uint64_t sum;
} bench_bw_slice;

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define BENCH_BW_X86 1
/* 256 bytes per step in 4 independent 512-bit accumulators; with pf, a software prefetch 4 KiB ahead as well
 * (the decode kernels prefetch, so the roofline's read must be allowed to as well). */
__attribute__((target("avx512f"))) static uint64_t bench_bw_read512(const uint64_t *p, size_t n, int pf) {
    __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        if (pf) _mm_prefetch((const char *)(p + i) + 4096, _MM_HINT_T0);
        a = _mm512_add_epi64(a, _mm512_loadu_si512(p + i));
        b = _mm512_add_epi64(b, _mm512_loadu_si512(p + i + 8));
        c = _mm512_add_epi64(c, _mm512_loadu_si512(p + i + 16));
        d = _mm512_add_epi64(d, _mm512_loadu_si512(p + i + 24));
    }
    uint64_t s = (uint64_t)_mm512_reduce_add_epi64(_mm512_add_epi64(_mm512_add_epi64(a, b), _mm512_add_epi64(c, d)));
    for (; i < n; i++) s += p[i];
    return s;
}
__attribute__((target("avx2"))) static uint64_t bench_bw_read256(const uint64_t *p, size_t n, int pf) {
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        if (pf) _mm_prefetch((const char *)(p + i) + 4096, _MM_HINT_T0);
        a = _mm256_add_epi64(a, _mm256_loadu_si256((const __m256i *)(p + i)));
        b = _mm256_add_epi64(b, _mm256_loadu_si256((const __m256i *)(p + i + 4)));
        c = _mm256_add_epi64(c, _mm256_loadu_si256((const __m256i *)(p + i + 8)));
        d = _mm256_add_epi64(d, _mm256_loadu_si256((const __m256i *)(p + i + 12)));
    }
    uint64_t t[4];
    _mm256_storeu_si256((__m256i *)t, _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d)));
    uint64_t s = t[0] + t[1] + t[2] + t[3];
    for (; i < n; i++) s += p[i];
    return s;
}
#else
#define BENCH_BW_X86 0
#endif

/* Read loop `loop` over p[0..n): 0 portable (four accumulators, vectorized by the compiler to what the build
 * targets), 1 and 2 the widest vectors the CPU has without and with software prefetch. */
static uint64_t bench_bw_read(const uint64_t *p, size_t n, int loop) {
#if BENCH_BW_X86
    if (loop > 0) {
        /* forced to AVX2 (BRAID_SIMD=avx2, to measure what an AVX2-only CPU runs): what AVX2 code can read */
        const char *lv = getenv("BRAID_SIMD");
        const int avx2_only = lv && !strcmp(lv, "avx2");
        if (!avx2_only && __builtin_cpu_supports("avx512f")) return bench_bw_read512(p, n, loop == 2);
        if (__builtin_cpu_supports("avx2")) return bench_bw_read256(p, n, loop == 2);
    }
#else
    (void)loop;
#endif
    /* Four independent accumulators keep the loop load-bound rather than add-latency-bound. */
    uint64_t a = 0, b = 0, c = 0, d = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        a += p[i];
        b += p[i + 1];
        c += p[i + 2];
        d += p[i + 3];
    }
    for (; i < n; i++) a += p[i];
    return a + b + c + d;
}

enum { BENCH_BW_LOOPS = 3 };

static void *bench_bw_worker(void *arg) {
    bench_bw_slice *s = arg;
    s->sum = bench_bw_read(s->p, s->n, s->loop); /* kept, so the reads cannot be optimized away */
    return NULL;
}

/* Streaming-read bandwidth in bytes per second over `bytes` bytes with n_threads threads: the best pass of
 * reps passes of each read loop (the fastest way this machine can read memory is the honest roofline
 * denominator). Returns 0 if the buffer cannot be allocated. */
static inline double bench_bandwidth(size_t bytes, int n_threads, int reps) {
    if (n_threads < 1) n_threads = 1;
    if (n_threads > 256) n_threads = 256;
    size_t n = bytes / sizeof(uint64_t);
    uint64_t *buf = malloc(n * sizeof *buf);
    if (!buf) return 0.0;
    for (size_t i = 0; i < n; i++) buf[i] = i; /* touch every page so no fault is timed */
    pthread_t th[256];
    bench_bw_slice sl[256];
    double best = 0.0;
    uint64_t sink = 0;
    for (int r = 0; r < reps * BENCH_BW_LOOPS; r++) {
        double t0 = bench_now();
        int started[256] = {0};
        for (int t = 0; t < n_threads; t++) {
            size_t lo = n * (size_t)t / (size_t)n_threads, hi = n * (size_t)(t + 1) / (size_t)n_threads;
            sl[t] = (bench_bw_slice){buf + lo, hi - lo, r % BENCH_BW_LOOPS, 0};
        }
        for (int t = 1; t < n_threads; t++) started[t] = !pthread_create(&th[t], NULL, bench_bw_worker, &sl[t]);
        bench_bw_worker(&sl[0]);
        for (int t = 1; t < n_threads; t++) {
            if (started[t]) pthread_join(th[t], NULL);
            else bench_bw_worker(&sl[t]); /* could not start a thread: read that slice here */
        }
        double dt = bench_now() - t0;
        for (int t = 0; t < n_threads; t++) sink += sl[t].sum;
        double bw = (double)(n * sizeof *buf) / dt;
        if (bw > best) best = bw;
    }
    free(buf);
    if (sink == 1) fputc(' ', stderr); /* keeps the sums observable */
    return best;
}

/* ---- weight bytes per generated token ---------------------------------------------------------------------- */

typedef struct {
    uint64_t total;     /* all tensor bytes in the file */
    uint64_t per_token; /* bytes one decoded token reads */
    uint64_t state_per_token; /* recurrent state bytes one decoded token reads and writes (bench_state_bytes) */
    uint64_t macs_per_token;  /* multiply-adds of one token through the weight matrices */
    uint32_t type;      /* the most common weight type by bytes (for the table) */
    uint64_t by_type[64];
    /* filled by bench_weight_add, used by bench_weights_finish */
    uint64_t exp_bytes, exp_macs; /* routed expert tensors (*_exps.*), every expert */
    uint32_t n_ssm_layers;        /* layers with an ssm_conv1d tensor: GDN or Mamba2 state */
    uint32_t n_shortconv_layers;  /* layers with a shortconv.conv tensor: LFM2's conv window */
} bench_weights;

/* Counts one tensor of the model file (n_elems elements, n_dims dimensions). `has_output` says the file has an
 * output.weight, i.e. the token embedding is not also the output matrix; then a decoded token reads one row of
 * it (of n_rows) and multiplies nothing by it. Matrices (2 dimensions or more) count n_elems multiply-adds per
 * token. Routed expert tensors are set aside: bench_weights_finish counts the share of them a token uses. Each
 * program walks the file with its own GGUF reader (braid's and ggml's headers cannot be included together). */
static inline void bench_weight_add(bench_weights *w, const char *name, uint64_t nbytes, uint32_t type,
                                    int64_t n_rows, int has_output, uint64_t n_elems, int n_dims) {
    w->total += nbytes;
    if (type < 64) w->by_type[type] += nbytes;
    w->type = 0;
    for (uint32_t k = 1; k < 64; k++)
        if (w->by_type[k] > w->by_type[w->type]) w->type = k;
    if (strstr(name, ".ssm_conv1d.weight")) w->n_ssm_layers++;
    if (strstr(name, ".shortconv.conv.weight")) w->n_shortconv_layers++;
    if (strstr(name, "_exps.")) {
        w->exp_bytes += nbytes;
        w->exp_macs += n_elems;
        return;
    }
    const int embd_row = !strcmp(name, "token_embd.weight") && has_output && n_rows > 0;
    if (embd_row) nbytes /= (uint64_t)n_rows;
    else if (n_dims >= 2) w->macs_per_token += n_elems;
    w->per_token += nbytes;
}

/* Recurrent state bytes a decoded token moves, from the file's keys (get(key, user) -> the value, 0 if absent;
 * the caller's GGUF reader) and the layer counts bench_weight_add took from the tensor names:
 *  - a GDN (qwen35 family) or Mamba2 layer (every layer with an ssm_conv1d tensor) reads its ssm.inner_size x
 *    ssm.state_size state floats (GDN: S x S per head; Mamba2: head_dim x d_state per head, the same product)
 *    and its conv window ((ssm.conv_kernel - 1) x (ssm.inner_size + 2 * ssm.group_count * ssm.state_size)
 *    floats), and writes them back;
 *  - an LFM2 short-conv layer reads and writes its window of (shortconv.l_cache - 1) x embedding_length floats. */
static inline uint64_t bench_state_bytes(uint64_t (*get)(const char *key, void *user), void *user,
                                         const bench_weights *w) {
    uint64_t bytes = 0;
    const uint64_t inner = get("ssm.inner_size", user), S = get("ssm.state_size", user);
    const uint64_t conv = get("ssm.conv_kernel", user), groups = get("ssm.group_count", user);
    if (inner && S && conv)
        bytes += 2 * (uint64_t)w->n_ssm_layers * 4 * (inner * S + (conv - 1) * (2 * groups * S + inner));
    const uint64_t l_cache = get("shortconv.l_cache", user), E = get("embedding_length", user);
    if (l_cache > 1 && E) bytes += 2 * (uint64_t)w->n_shortconv_layers * 4 * (l_cache - 1) * E;
    return bytes;
}

/* Completes w once every tensor is added: the routed experts' share a token reads (expert_used_count of
 * expert_count; for the roofline the active experts' bytes, as if each were read once) and the state bytes. */
static inline void bench_weights_finish(bench_weights *w, uint64_t (*get)(const char *key, void *user), void *user) {
    const uint64_t n_exp = get("expert_count", user), n_used = get("expert_used_count", user);
    if (w->exp_bytes && n_exp && n_used <= n_exp) {
        w->per_token += w->exp_bytes / n_exp * n_used;
        w->macs_per_token += w->exp_macs / n_exp * n_used;
    }
    w->state_per_token = bench_state_bytes(get, user, w);
}

/* ---- peak multiply-add rate ---------------------------------------------------------------------------------
 * A loop of independent multiply-add chains that never touches memory, on every thread at once: the most
 * multiply-adds per second this CPU does at a SIMD level. For float weights the FMA (8 or 16 lanes); for
 * quantized weights the int8 dot-product step of the level: AVX2 vpmaddubsw + vpmaddwd + vpaddd (32
 * multiply-adds), AVX-VNNI and AVX-512 VNNI vpdpbusd (32 and 64). Timed in thread CPU time, so that other
 * processes on a shared machine do not lower the peak. */
enum { BENCH_PEAK_ITERS = 1 << 22 };

typedef struct {
    int kind; /* bench_peak_loop */
    double macs_per_s;
} bench_peak_arg;

enum { BENCH_PEAK_FMA256, BENCH_PEAK_FMA512, BENCH_PEAK_I8_AVX2, BENCH_PEAK_I8_AVXVNNI, BENCH_PEAK_I8_VNNI512,
       BENCH_PEAK_SCALAR };

static inline double bench_thread_cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#if BENCH_BW_X86
/* 12 independent chains a_j = STEP(a_j) in named registers (an array of accumulators in the asm operands is
 * kept on the stack by gcc -O3, which then measures store-to-load forwarding), kept opaque every iteration;
 * 12 covers the latency of two ports for the 4-5 cycle instructions measured (8 chains, as before, measured
 * ~80% of vpdpbusd's rate). The sum of the chains is returned through *out so nothing is dead code. */
#define BENCH_CHAINS12(T, INIT, STEP, ADD)                                                                         \
    T a0 = INIT(0), a1 = INIT(1), a2 = INIT(2), a3 = INIT(3), a4 = INIT(4), a5 = INIT(5);                          \
    T a6 = INIT(6), a7 = INIT(7), a8 = INIT(8), a9 = INIT(9), a10 = INIT(10), a11 = INIT(11);                      \
    for (long i = 0; i < n; i++) {                                                                                 \
        a0 = STEP(a0), a1 = STEP(a1), a2 = STEP(a2), a3 = STEP(a3), a4 = STEP(a4), a5 = STEP(a5);                  \
        a6 = STEP(a6), a7 = STEP(a7), a8 = STEP(a8), a9 = STEP(a9), a10 = STEP(a10), a11 = STEP(a11);              \
        __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7),      \
                         "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11));                                                \
    }                                                                                                              \
    a0 = ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7)));                                        \
    *out = ADD(a0, ADD(ADD(a8, a9), ADD(a10, a11)));
/* One peak function: 12 chains a = STEP(a) with operands x, y, each step worth `per_step` multiply-adds;
 * FIRST(r) reads one lane of the chains' sum (compared with an impossible value so nothing is dead code). */
#define BENCH_PEAK_FN(name, tgt, T, X, Y, INIT, STEP, ADD, FIRST, per_step)                                       \
    __attribute__((target(tgt))) static double name(long n) {                                                      \
        const T x = X, y = Y;                                                                                      \
        T r, *out = &r;                                                                                            \
        BENCH_CHAINS12(T, INIT, STEP, ADD)                                                                         \
        return FIRST(r) == -1 ? 0.0 : (double)n * 12 * (per_step);                                                 \
    }
/* FMA: the chains stay finite (x * 0.999999 + 1e-7 converges to 0.1) */
#define BENCH_F256_INIT(j) _mm256_set1_ps((float)(j))
#define BENCH_F256_STEP(a) _mm256_fmadd_ps(a, x, y)
#define BENCH_F512_INIT(j) _mm512_set1_ps((float)(j))
#define BENCH_F512_STEP(a) _mm512_fmadd_ps(a, x, y)
BENCH_PEAK_FN(bench_peak_fma256, "avx2,fma", __m256, _mm256_set1_ps(0.999999f), _mm256_set1_ps(1e-7f), BENCH_F256_INIT,
              BENCH_F256_STEP, _mm256_add_ps, _mm256_cvtss_f32, 8)
BENCH_PEAK_FN(bench_peak_fma512, "avx512f", __m512, _mm512_set1_ps(0.999999f), _mm512_set1_ps(1e-7f), BENCH_F512_INIT,
              BENCH_F512_STEP, _mm512_add_ps, _mm512_reduce_add_ps, 16)
/* The maddubs path's rate: per 32 byte products one vpmaddubsw and one vpmaddwd (both on the same two vector
 * multiply ports of current cores, so a pair per cycle is the peak, twice the FMA loop's multiply-adds), plus
 * the int32 add. The products do not depend on the chains, so the inputs are made opaque every step (else they
 * are hoisted). Named variables, not arrays: with arrays gcc -O3 kept the chains on the stack, and the loop
 * measured store-to-load forwarding instead (about half the rate: the roof of the non-VNNI AVX2 path was
 * computed ~1.8x too low). */
#define BENCH_I8_STEP(a, y) a = _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), one))
__attribute__((target("avx2"))) static double bench_peak_i8_avx2(long n) {
    __m256i a0 = _mm256_set1_epi32(0), a1 = _mm256_set1_epi32(1), a2 = _mm256_set1_epi32(2);
    __m256i a3 = _mm256_set1_epi32(3), a4 = _mm256_set1_epi32(4), a5 = _mm256_set1_epi32(5);
    __m256i y0 = _mm256_set1_epi8(-5), y1 = _mm256_set1_epi8(-4), y2 = _mm256_set1_epi8(-3);
    __m256i y3 = _mm256_set1_epi8(-2), y4 = _mm256_set1_epi8(-1), y5 = _mm256_set1_epi8(1);
    const __m256i x = _mm256_set1_epi8(3), one = _mm256_set1_epi16(1);
    for (long i = 0; i < n; i++) {
        __asm__ volatile("" : "+x"(y0), "+x"(y1), "+x"(y2), "+x"(y3), "+x"(y4), "+x"(y5));
        BENCH_I8_STEP(a0, y0);
        BENCH_I8_STEP(a1, y1);
        BENCH_I8_STEP(a2, y2);
        BENCH_I8_STEP(a3, y3);
        BENCH_I8_STEP(a4, y4);
        BENCH_I8_STEP(a5, y5);
        __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5));
    }
    a0 = _mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(_mm256_add_epi32(a2, a3), _mm256_add_epi32(a4, a5)));
    return _mm256_extract_epi32(a0, 0) == 7 ? 0.0 : (double)n * 6 * 32;
}
#undef BENCH_I8_STEP
/* AVX-VNNI / AVX-512 VNNI: the accumulators are the chains, so no opaque inputs are needed */
#define BENCH_V256_INIT(j) _mm256_set1_epi32(j)
#define BENCH_V256_STEP(a) _mm256_dpbusd_avx_epi32(a, x, y)
#define BENCH_V256_FIRST(r) _mm256_extract_epi32(r, 0)
#define BENCH_V512_INIT(j) _mm512_set1_epi32(j)
#define BENCH_V512_STEP(a) _mm512_dpbusd_epi32(a, x, y)
BENCH_PEAK_FN(bench_peak_i8_avxvnni, "avx2,avxvnni", __m256i, _mm256_set1_epi8(3), _mm256_set1_epi8(-5),
              BENCH_V256_INIT, BENCH_V256_STEP, _mm256_add_epi32, BENCH_V256_FIRST, 32)
BENCH_PEAK_FN(bench_peak_i8_vnni512, "avx512f,avx512vnni", __m512i, _mm512_set1_epi8(3), _mm512_set1_epi8(-5),
              BENCH_V512_INIT, BENCH_V512_STEP, _mm512_add_epi32, _mm512_reduce_add_epi32, 64)
#undef BENCH_CHAINS12
#undef BENCH_PEAK_FN
#undef BENCH_F256_INIT
#undef BENCH_F256_STEP
#undef BENCH_F512_INIT
#undef BENCH_F512_STEP
#undef BENCH_V256_INIT
#undef BENCH_V256_STEP
#undef BENCH_V256_FIRST
#undef BENCH_V512_INIT
#undef BENCH_V512_STEP
#endif

static void *bench_peak_worker(void *arg) {
    bench_peak_arg *a = arg;
    double best = 0.0;
    for (int rep = 0; rep < 3; rep++) {
        const double t0 = bench_thread_cpu();
        double macs = 0.0;
        switch (a->kind) {
#if BENCH_BW_X86
        case BENCH_PEAK_FMA256: macs = bench_peak_fma256(BENCH_PEAK_ITERS); break;
        case BENCH_PEAK_FMA512: macs = bench_peak_fma512(BENCH_PEAK_ITERS); break;
        case BENCH_PEAK_I8_AVX2: macs = bench_peak_i8_avx2(BENCH_PEAK_ITERS); break;
        case BENCH_PEAK_I8_AVXVNNI: macs = bench_peak_i8_avxvnni(BENCH_PEAK_ITERS); break;
        case BENCH_PEAK_I8_VNNI512: macs = bench_peak_i8_vnni512(BENCH_PEAK_ITERS); break;
#endif
        default: {
            volatile float v = 1.0f;
            float acc = 0.0f;
            for (long i = 0; i < BENCH_PEAK_ITERS; i++) acc = acc * 0.999f + v;
            macs = acc == -1.0f ? 0.0 : (double)BENCH_PEAK_ITERS;
        }
        }
        const double dt = bench_thread_cpu() - t0;
        if (dt > 0 && macs / dt > best) best = macs / dt;
    }
    a->macs_per_s = best;
    return NULL;
}

static inline const char *bench_peak_name(int kind) {
    static const char *const names[] = {"FMA 8 lanes", "FMA 16 lanes", "int8 vpmaddubsw+vpmaddwd", "int8 AVX-VNNI vpdpbusd",
                                        "int8 AVX-512 vpdpbusd", "scalar"};
    return names[kind];
}

/* Which loop stands for the level in use: simd is bd_simd_level()'s name, avx_vnni whether braid's AVX2 kernels
 * use AVX-VNNI, int8 whether the weights are quantized. */
static inline int bench_peak_kind(const char *simd, int avx_vnni, int int8) {
    if (!strcmp(simd, "avx512")) return int8 ? BENCH_PEAK_I8_VNNI512 : BENCH_PEAK_FMA512;
    if (!strcmp(simd, "avx2")) return int8 ? (avx_vnni ? BENCH_PEAK_I8_AVXVNNI : BENCH_PEAK_I8_AVX2) : BENCH_PEAK_FMA256;
    return BENCH_PEAK_SCALAR;
}

/* Multiply-adds per second of loop `kind` on n_threads threads at once (the sum of their rates). */
static inline double bench_peak_macs(int kind, int n_threads) {
    if (n_threads < 1) n_threads = 1;
    if (n_threads > 256) n_threads = 256;
    pthread_t th[256];
    bench_peak_arg a[256];
    int started[256] = {0};
    for (int t = 0; t < n_threads; t++) a[t] = (bench_peak_arg){kind, 0.0};
    for (int t = 1; t < n_threads; t++) started[t] = !pthread_create(&th[t], NULL, bench_peak_worker, &a[t]);
    bench_peak_worker(&a[0]);
    double sum = a[0].macs_per_s;
    for (int t = 1; t < n_threads; t++) {
        if (started[t]) pthread_join(th[t], NULL);
        sum += started[t] ? a[t].macs_per_s : a[0].macs_per_s;
    }
    return sum;
}

static inline const char *bench_type_name(uint32_t t) {
    switch (t) {
    case 0: return "F32";
    case 1: return "F16";
    case 2: return "Q4_0";
    case 3: return "Q4_1";
    case 6: return "Q5_0";
    case 7: return "Q5_1";
    case 8: return "Q8_0";
    case 10: return "Q2_K";
    case 11: return "Q3_K";
    case 12: return "Q4_K";
    case 13: return "Q5_K";
    case 14: return "Q6_K";
    case 20: return "IQ4_NL";
    case 23: return "IQ4_XS";
    case 30: return "BF16";
    case 39: return "MXFP4";
    default: return "?";
    }
}

/* ---- braid -------------------------------------------------------------------------------------------------- */

typedef struct {
    int n_prompt, n_gen, reps, n_threads;
    uint64_t seed;
} bench_cfg;

/* Decodes n tokens as one batch from position 0 (after clearing), logits for the last one only; *dt gets the
 * time of the decode. */
static inline braid_status bench_braid_pp(braid_context *ctx, const braid_token *toks, int n, double *dt) {
    braid_seq_clear(ctx, -1);
    double t0 = bench_now();
    braid_batch b = {.n_tokens = n, .token = toks};
    BD_TRY(braid_decode(ctx, &b));
    *dt = bench_now() - t0;
    return BRAID_OK;
}

/* Decodes n tokens one at a time from an empty context; *dt gets the total time. */
static inline braid_status bench_braid_tg(braid_context *ctx, const braid_token *toks, int n, double *dt) {
    braid_seq_clear(ctx, -1);
    double t0 = bench_now();
    for (int i = 0; i < n; i++) {
        braid_batch b = {.n_tokens = 1, .token = &toks[i]};
        BD_TRY(braid_decode(ctx, &b));
    }
    *dt = bench_now() - t0;
    return BRAID_OK;
}

/* braid loaded for a benchmark: bench_braid_open loads the model, makes a context for -p + -n tokens and runs
 * the warm-up; bench_braid_rep measures one repetition; bench_braid_close frees what open made (also after a
 * failed open). Split so that a comparison can interleave engines repetition by repetition. */
typedef struct {
    braid_model *model;
    braid_context *ctx;
    braid_token *toks;
} bench_braid_state;

static inline braid_status bench_braid_rep(bench_braid_state *b, const bench_cfg *c, double *pp_tps, double *tg_tps) {
    double dt;
    if (c->n_prompt > 0) {
        BD_TRY(bench_braid_pp(b->ctx, b->toks, c->n_prompt, &dt));
        *pp_tps = c->n_prompt / dt;
    }
    if (c->n_gen > 0) {
        BD_TRY(bench_braid_tg(b->ctx, b->toks, c->n_gen, &dt));
        *tg_tps = c->n_gen / dt;
    }
    return BRAID_OK;
}

static inline void bench_braid_close(bench_braid_state *b) {
    free(b->toks);
    braid_context_free(b->ctx);
    braid_model_free(b->model);
    memset(b, 0, sizeof *b);
}

static inline braid_status bench_braid_open(const char *path, const bench_cfg *c, bench_braid_state *b) {
    memset(b, 0, sizeof *b);
    braid_model_params mp = braid_model_default_params();
    braid_status s = braid_model_load(path, &mp, &b->model);
    if (s != BRAID_OK) return s;
    braid_context_params cp = braid_context_default_params();
    int n_max = c->n_prompt > c->n_gen ? c->n_prompt : c->n_gen;
    cp.n_ctx = (uint32_t)(c->n_prompt + c->n_gen);
    cp.n_batch = (uint32_t)(c->n_prompt > 0 ? c->n_prompt : 1);
    if (c->n_threads > 0) cp.n_threads = (uint32_t)c->n_threads;
    if ((s = braid_context_new(b->model, &cp, &b->ctx)) != BRAID_OK) return s;
    b->toks = malloc((size_t)(n_max > 0 ? n_max : 1) * sizeof *b->toks);
    if (!b->toks) return BRAID_E_NOMEM;
    uint64_t rng = c->seed;
    int32_t n_vocab = braid_model_n_vocab(b->model);
    for (int i = 0; i < n_max; i++) b->toks[i] = bench_token(&rng, n_vocab);
    double dt;
    /* Warm-up: page the weights in, let the thread pool start, and touch the buffers of a full-size batch once
     * (as llama-bench's warm-up run does: the first batch of a size pays its page faults). */
    if (c->n_prompt > 0) BD_TRY(bench_braid_pp(b->ctx, b->toks, c->n_prompt, &dt));
    if (c->n_gen > 0) BD_TRY(bench_braid_tg(b->ctx, b->toks, c->n_gen < 4 ? c->n_gen : 4, &dt));
    return BRAID_OK;
}

/* Runs braid's pp and tg tests: pp_tps[reps], tg_tps[reps] in tokens per second. */
static inline braid_status bench_braid(const char *path, const bench_cfg *c, double *pp_tps, double *tg_tps) {
    bench_braid_state b;
    braid_status s = bench_braid_open(path, c, &b);
    for (int r = 0; s == BRAID_OK && r < c->reps; r++) s = bench_braid_rep(&b, c, &pp_tps[r], &tg_tps[r]);
    bench_braid_close(&b);
    return s;
}

#endif
