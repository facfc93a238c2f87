/* llama_vs_braid.c — braid and llama.cpp on the same GGUF file and the same number of threads, in one run:
 * prompt processing (one batch of -p tokens) and generation (-n single-token decodes), tokens per second for
 * each engine and their ratio, the decode roofline (weight and recurrent state bytes per generated token over
 * the memory bandwidth measured in this run) and the prompt's compute roofline (multiply-adds per token over
 * the peak multiply-add rate of braid's SIMD level), with each engine's share of both. BRAID_SIMD=avx2 with
 * BRAID_GGML_CPU=haswell runs the AVX2 pair on an AVX-512 machine (BRAID_AVX_VNNI=0: braid without AVX-VNNI,
 * as on a CPU that lacks it). llama.cpp runs with its default model and context settings (that is what
 * users run; on this CPU they repack weights for AMX), except the thread count and a context of -p + -n.
 * Both engines are loaded (and warmed up) first; then the repetitions alternate between them, and the ratio is
 * the median of the per-repetition ratios: on a shared host whose speed drifts, a ratio of two engines
 * measured minutes apart says more about the drift than about the engines.
 * See tools/bench_util.h for how braid's figures, the bandwidth and the bytes per token are taken;
 * scripts/bench.sh generates the models and runs this on each. */
#if !__has_include("llama.h")
/* Built without the oracle (scripts/fetch-oracle.sh was not run): nothing to compare against. */
#include <stdio.h>
int main(void) {
    fprintf(stderr, "bench_llama_vs_braid: built without llama.cpp (run scripts/fetch-oracle.sh and reconfigure)\n");
    return 1;
}
#else
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml_variant.h"
#include "bench_util.h"
#include "tensor/dot.h"
#include "tensor/gemm_q.h"
#include "ggml-backend.h"
#include "gguf.h"
#include "llama.h"

static void quiet_log(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

/* The directory libllama was loaded from: the CPU backends (libggml-cpu-*.so) sit next to it. */
static int oracle_lib_dir(char *buf, size_t cap) {
    const char *env = getenv("BRAID_ORACLE_DIR");
    if (env && *env) {
        snprintf(buf, cap, "%s/lib", env);
        return 1;
    }
    Dl_info info;
    if (!dladdr((void *)llama_backend_init, &info) || !info.dli_fname) return 0;
    snprintf(buf, cap, "%s", info.dli_fname);
    char *slash = strrchr(buf, '/');
    if (!slash) return 0;
    *slash = 0;
    return 1;
}

/* A u32 key of the model's architecture (arch.key), 0 if absent. */
typedef struct {
    struct gguf_context *g;
    char arch[64];
} arch_keys;

static uint64_t arch_key(const char *key, void *user) {
    const arch_keys *a = user;
    char full[160];
    snprintf(full, sizeof full, "%s.%s", a->arch, key);
    const int64_t id = gguf_find_key(a->g, full);
    if (id < 0) return 0;
    switch (gguf_get_kv_type(a->g, id)) {
    case GGUF_TYPE_UINT32: return gguf_get_val_u32(a->g, id);
    case GGUF_TYPE_INT32: return gguf_get_val_i32(a->g, id) > 0 ? (uint64_t)gguf_get_val_i32(a->g, id) : 0;
    default: return 0;
    }
}

/* The same count as `braid bench`, read with ggml's GGUF reader. */
static braid_status weight_bytes(const char *path, bench_weights *out) {
    struct ggml_context *meta = NULL; /* tensor shapes, no data */
    struct gguf_init_params gp = {.no_alloc = true, .ctx = &meta};
    struct gguf_context *g = gguf_init_from_file(path, gp);
    if (!g) return bd_error(BRAID_E_FORMAT, "ggml's gguf reader cannot open %s", path);
    memset(out, 0, sizeof *out);
    /* (Not gguf_find_tensor: braid's GGUF reader has a function of that name, and the static library's
     * would be the one linked here.) */
    int has_output = 0;
    for (int64_t i = 0; i < gguf_get_n_tensors(g); i++)
        has_output |= !strcmp(gguf_get_tensor_name(g, i), "output.weight");
    for (int64_t i = 0; i < gguf_get_n_tensors(g); i++) {
        const char *name = gguf_get_tensor_name(g, i);
        struct ggml_tensor *t = meta ? ggml_get_tensor(meta, name) : NULL;
        bench_weight_add(out, name, gguf_get_tensor_size(g, i), (uint32_t)gguf_get_tensor_type(g, i),
                         t ? t->ne[1] : 0, has_output, t ? (uint64_t)ggml_nelements(t) : 0, t ? ggml_n_dims(t) : 0);
    }
    arch_keys ak = {g, ""};
    const int64_t arch_id = gguf_find_key(g, "general.architecture");
    if (arch_id >= 0 && gguf_get_kv_type(g, arch_id) == GGUF_TYPE_STRING)
        snprintf(ak.arch, sizeof ak.arch, "%s", gguf_get_val_str(g, arch_id));
    bench_weights_finish(out, arch_key, &ak);
    gguf_free(g);
    if (meta) ggml_free(meta);
    return BRAID_OK;
}

/* llama.cpp loaded for a benchmark, as bench_braid_state is for braid (bench_util.h): open loads the model,
 * makes the context and runs the same warm-up (a full-size batch and a few tokens), rep measures one
 * repetition, close frees what open made. */
typedef struct {
    struct llama_model *model;
    struct llama_context *ctx;
    llama_token *toks;
} llama_state;

static int llama_rep(llama_state *l, const bench_cfg *c, int n_gen, double *pp_tps, double *tg_tps) {
    llama_memory_t mem = llama_get_memory(l->ctx);
    if (c->n_prompt > 0) {
        llama_memory_clear(mem, true);
        double t0 = bench_now();
        if (llama_decode(l->ctx, llama_batch_get_one(l->toks, c->n_prompt)) != 0) return 0;
        llama_synchronize(l->ctx);
        *pp_tps = c->n_prompt / (bench_now() - t0);
    }
    if (n_gen > 0) {
        llama_memory_clear(mem, true);
        double t0 = bench_now();
        for (int i = 0; i < n_gen; i++)
            if (llama_decode(l->ctx, llama_batch_get_one(&l->toks[i], 1)) != 0) return 0;
        llama_synchronize(l->ctx);
        *tg_tps = n_gen / (bench_now() - t0);
    }
    return 1;
}

static void llama_close(llama_state *l) {
    free(l->toks);
    if (l->ctx) llama_free(l->ctx);
    if (l->model) llama_model_free(l->model);
    memset(l, 0, sizeof *l);
}

static int llama_open(const char *path, const bench_cfg *c, llama_state *l) {
    memset(l, 0, sizeof *l);
    struct llama_model_params mp = llama_model_default_params();
    if (!(l->model = llama_model_load_from_file(path, mp))) {
        fprintf(stderr, "llama.cpp cannot load %s\n", path);
        return 0;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(c->n_prompt + c->n_gen);
    cp.n_threads = c->n_threads;
    cp.n_threads_batch = c->n_threads;
    if (!(l->ctx = llama_init_from_model(l->model, cp))) {
        fprintf(stderr, "llama.cpp cannot create a context\n");
        return 0;
    }
    int n_max = c->n_prompt > c->n_gen ? c->n_prompt : c->n_gen;
    if (!(l->toks = malloc((size_t)(n_max > 0 ? n_max : 1) * sizeof *l->toks))) return 0;
    uint64_t rng = c->seed;
    int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(l->model));
    for (int i = 0; i < n_max; i++) l->toks[i] = bench_token(&rng, n_vocab);
    double pp, tg;
    if (!llama_rep(l, c, c->n_gen < 4 ? c->n_gen : 4, &pp, &tg)) {
        fprintf(stderr, "llama.cpp: decode failed\n");
        return 0;
    }
    return 1;
}

/* The median of the per-repetition ratios a[r] / b[r] (0 where b[r] is 0): each ratio compares runs made
 * seconds apart, so it holds when the machine's speed drifts between repetitions, which a ratio of means
 * does not. */
static double paired_ratio(const double *a, const double *b, int n) {
    double v[100];
    int m = 0;
    for (int i = 0; i < n; i++)
        if (b[i] > 0) v[m++] = a[i] / b[i];
    return bench_median(v, m);
}

static void usage(FILE *f) {
    fprintf(f, "usage: bench_llama_vs_braid -m FILE [-t THREADS (2)] [-p N (512)] [-n N (128)] [-r REPS (3)]\n"
               "                            [--bw-mib N (1024)] [--only braid|llama]\n");
}

int main(int argc, char **argv) {
    const char *path = NULL, *only = NULL;
    bench_cfg c = {.n_prompt = 512, .n_gen = 128, .reps = 3, .n_threads = 2, .seed = 1234};
    int bw_mib = 1024;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            usage(stderr);
            return 2;
        }
        const char *a = argv[i], *v = argv[++i];
        if (!strcmp(a, "-m")) path = v;
        else if (!strcmp(a, "-t")) c.n_threads = atoi(v);
        else if (!strcmp(a, "-p")) c.n_prompt = atoi(v);
        else if (!strcmp(a, "-n")) c.n_gen = atoi(v);
        else if (!strcmp(a, "-r")) c.reps = atoi(v);
        else if (!strcmp(a, "--bw-mib")) bw_mib = atoi(v);
        else if (!strcmp(a, "--only")) only = v;
        else {
            usage(stderr);
            return 2;
        }
    }
    if (!path || c.n_threads < 1 || c.n_prompt < 0 || c.n_gen < 0 || c.reps < 1 || c.reps > 100 || bw_mib < 16) {
        usage(stderr);
        return 2;
    }
    int run_braid = !only || !strcmp(only, "braid"), run_llama = !only || !strcmp(only, "llama");

    bench_weights w;
    braid_status s = weight_bytes(path, &w);
    if (s != BRAID_OK) {
        fprintf(stderr, "%s: %s: %s\n", path, braid_status_name(s), braid_last_error());
        return 1;
    }
    double load = bench_loadavg();
    double bw = bench_bandwidth((size_t)bw_mib << 20, c.n_threads, 3);
    double roof = bw > 0 ? bw / (double)(w.per_token + w.state_per_token) : 0.0;
    /* the prompt's compute roofline at braid's SIMD level (BRAID_SIMD included) */
    const int quantized = w.type != 0 && w.type != 1 && w.type != 30;
    const int peak_kind = bench_peak_kind(bd_simd_level(), bd_gemmq_uses_avx_vnni(), quantized);
    const double peak = bench_peak_macs(peak_kind, c.n_threads);
    const double pp_roof = w.macs_per_token ? peak / (double)w.macs_per_token : 0.0;

    double bpp[100] = {0}, btg[100] = {0}, lpp[100] = {0}, ltg[100] = {0};
    int failed = 0; /* an engine that fails is reported with zeros and makes the exit code 1 */
    bench_braid_state bs = {0};
    llama_state ls = {0};
    if (run_braid && (s = bench_braid_open(path, &c, &bs)) != BRAID_OK) {
        fprintf(stderr, "braid: %s: %s\n", braid_status_name(s), braid_last_error());
        failed = 1;
        run_braid = 0;
    }
    if (run_llama) {
        char dir[4096];
        if (!oracle_lib_dir(dir, sizeof dir)) {
            fprintf(stderr, "cannot find llama.cpp's library directory (set BRAID_ORACLE_DIR)\n");
            bench_braid_close(&bs);
            return 1;
        }
        llama_log_set(quiet_log, NULL);
        /* the CPU build ggml would pick here, or BRAID_GGML_CPU's (the tests' choice: ggml_variant.h) */
        char cpu[4096] = "", cpu_name[128], why[512] = "ggml could not load its CPU backend";
        if (ggml_variant_pick(dir, cpu, sizeof cpu, cpu_name, sizeof cpu_name, why, sizeof why) != GGML_VARIANT_OK ||
            !ggml_backend_load(cpu)) {
            fprintf(stderr, "llama.cpp: %s\n", why);
            bench_braid_close(&bs);
            return 1;
        }
        fprintf(stderr, "llama.cpp: ggml CPU backend %s\n", cpu_name);
        llama_backend_init();
        if (!llama_open(path, &c, &ls)) {
            failed = 1;
            run_llama = 0;
        }
    }
    /* Repetitions alternate between the engines (braid first in even ones, llama.cpp first in odd ones), so
     * that a change in the machine's speed over the run (other tenants of a shared host) reaches both; the
     * pools of both sleep while the other engine runs (braid's after a few hundred microseconds of spinning). */
    for (int r = 0; r < c.reps; r++)
        for (int k = 0; k < 2; k++) {
            if ((k == 0) == (r % 2 == 0)) {
                if (run_braid && (s = bench_braid_rep(&bs, &c, &bpp[r], &btg[r])) != BRAID_OK) {
                    fprintf(stderr, "braid: %s: %s\n", braid_status_name(s), braid_last_error());
                    failed = 1;
                    run_braid = 0;
                }
            } else if (run_llama && !llama_rep(&ls, &c, c.n_gen, &lpp[r], &ltg[r])) {
                fprintf(stderr, "llama.cpp: decode failed\n");
                failed = 1;
                run_llama = 0;
            }
        }
    bench_braid_close(&bs);
    llama_close(&ls);
    bench_stat bp = bench_stats(bpp, c.reps), bg = bench_stats(btg, c.reps);
    bench_stat lp = bench_stats(lpp, c.reps), lg = bench_stats(ltg, c.reps);
    const double rpp = paired_ratio(bpp, lpp, c.reps), rtg = paired_ratio(btg, ltg, c.reps);

    const char *type = bench_type_name(w.type);
    printf("model      %s (%s, %.1f MiB of weights)\n", path, type, (double)w.total / 1048576.0);
    printf("threads    %d, %d repetitions after a warm-up (load average %.1f at the start, %.1f at the end)\n",
           c.n_threads, c.reps, load, bench_loadavg());
    printf("bandwidth  %.1f GB/s (streaming read of %d MiB, %d threads)\n", bw / 1e9, bw_mib, c.n_threads);
    printf("roofline   decode: %.1f MiB of weights + %.1f MiB of recurrent state (read and written) per generated "
           "token -> %.1f tok/s\n", (double)w.per_token / 1048576.0, (double)w.state_per_token / 1048576.0, roof);
    printf("           prompt: %.3f G multiply-adds per token over %.1f G/s (%s, %s, %d threads, register-only "
           "loop) -> %.1f tok/s\n", (double)w.macs_per_token / 1e9, peak / 1e9, bd_simd_level(),
           bench_peak_name(peak_kind), c.n_threads, pp_roof);
    printf("engines    braid at SIMD level %s%s; llama.cpp's CPU variant %s\n\n", bd_simd_level(),
           bd_gemmq_uses_avx_vnni() && !strcmp(bd_simd_level(), "avx2") ? " with AVX-VNNI" : "",
           getenv("BRAID_GGML_CPU") && *getenv("BRAID_GGML_CPU") ? getenv("BRAID_GGML_CPU") : "(ggml's best for this CPU)");
    printf("%-8s %20s %20s %12s\n", "test", "braid tok/s", "llama.cpp tok/s", "braid/llama*");
    if (c.n_prompt > 0) {
        printf("pp%-6d %12.1f ± %5.1f %12.1f ± %5.1f %12.2f\n", c.n_prompt, bp.mean, bp.sd, lp.mean, lp.sd,
               rpp);
        printf("pp%-6d %11.0f%% roof %11.0f%% roof\n", c.n_prompt, pp_roof > 0 ? 100 * bp.mean / pp_roof : 0.0,
               pp_roof > 0 ? 100 * lp.mean / pp_roof : 0.0);
    }
    if (c.n_gen > 0) {
        printf("tg%-6d %12.2f ± %5.2f %12.2f ± %5.2f %12.2f\n", c.n_gen, bg.mean, bg.sd, lg.mean, lg.sd,
               rtg);
        printf("tg%-6d %11.0f%% roof %11.0f%% roof\n", c.n_gen, roof > 0 ? 100 * bg.mean / roof : 0.0,
               roof > 0 ? 100 * lg.mean / roof : 0.0);
    }
    printf("* the median of the ratios of the repetitions, each pair of runs made seconds apart\n");
    /* One line for scripts/bench.sh to gather into its summary table. */
    printf("SUMMARY %s %.1f %.1f %.2f %.2f %.2f %.2f %.1f %.1f %.0f %.0f %.1f %.0f %.0f\n", type, bp.mean, lp.mean,
           rpp, bg.mean, lg.mean, rtg,
           bw / 1e9, roof, roof > 0 ? 100 * bg.mean / roof : 0.0, roof > 0 ? 100 * lg.mean / roof : 0.0, pp_roof,
           pp_roof > 0 ? 100 * bp.mean / pp_roof : 0.0, pp_roof > 0 ? 100 * lp.mean / pp_roof : 0.0);
    return failed;
}
#endif
