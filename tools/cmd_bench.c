/* cmd_bench.c — `braid bench`: braid's prompt-processing and generation speed on one GGUF file, with the
 * memory bandwidth measured in the same run and the decode roofline it implies (see bench_util.h for how each
 * figure is taken). The comparison with llama.cpp on the same file is bench/llama_vs_braid.c (run by
 * scripts/bench.sh): the braid command itself does not link llama.cpp. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "commands.h"
#include "default_model.h"
#include "gguf/gguf.h"

static void bench_usage(FILE *f) {
    fprintf(f,
            "usage: braid bench [-m FILE] [-p N] [-n N] [-t N] [-r N] [--json]\n"
            "  -m, --model FILE   GGUF model (default: the built-in qwen35 model)\n"
            "  -p N               prompt tokens decoded as one batch (default 512; 0 skips the test)\n"
            "  -n N               tokens generated one at a time (default 128; 0 skips the test)\n"
            "  -t, --threads N    compute threads (default: all online cores)\n"
            "  -r N               repetitions of each test (default 3)\n"
            "  --bw-mib N         size of the bandwidth test buffer (default 1024 MiB)\n"
            "  --json             one JSON object instead of the table\n");
}

static int bench_int(const char *opt, const char *v, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "braid bench: %s wants an integer in [%d, %d], got '%s'\n", opt, lo, hi, v);
        return 0;
    }
    *out = (int)x;
    return 1;
}

/* A u32 key of the file's architecture (arch.key), 0 if absent: bench_weights_finish's reader. */
typedef struct {
    const gguf_file *f;
    char arch[64];
} bench_keys;

static uint64_t bench_arch_key(const char *key, void *user) {
    const bench_keys *k = user;
    char full[160];
    uint32_t v = 0;
    snprintf(full, sizeof full, "%s.%s", k->arch, key);
    return gguf_get_u32(k->f, full, 0, &v) == BRAID_OK ? v : 0;
}

static braid_status bench_weight_bytes(const char *path, bench_weights *out) {
    gguf_file *f = NULL;
    BD_TRY(gguf_open(path, &f));
    memset(out, 0, sizeof *out);
    int has_output = gguf_find_tensor(f, "output.weight") != NULL;
    for (size_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        uint64_t n_elems = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) n_elems *= (uint64_t)t->ne[d];
        bench_weight_add(out, t->name, t->nbytes, t->type, t->ne[1], has_output, n_elems, (int)t->n_dims);
    }
    bench_keys k = {f, ""};
    gguf_str arch = {0};
    if (gguf_get_str(f, "general.architecture", 0, &arch) == BRAID_OK && arch.ptr)
        snprintf(k.arch, sizeof k.arch, "%.*s", (int)arch.len, arch.ptr);
    bench_weights_finish(out, bench_arch_key, &k);
    gguf_close(f);
    return BRAID_OK;
}

static int cmd_bench(int argc, char **argv) {
    const char *path = NULL;
    bench_cfg c = {.n_prompt = 512, .n_gen = 128, .reps = 3, .n_threads = 0, .seed = 1234};
    int json = 0, bw_mib = 1024;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            bench_usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--json")) {
            json = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "braid bench: unknown option or missing value: '%s'\n", a);
            bench_usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        int ok = 1;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) path = v;
        else if (!strcmp(a, "-p")) ok = bench_int(a, v, 0, 1 << 20, &c.n_prompt);
        else if (!strcmp(a, "-n")) ok = bench_int(a, v, 0, 1 << 20, &c.n_gen);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) ok = bench_int(a, v, 1, 256, &c.n_threads);
        else if (!strcmp(a, "-r")) ok = bench_int(a, v, 1, 1000, &c.reps);
        else if (!strcmp(a, "--bw-mib")) ok = bench_int(a, v, 16, 1 << 20, &bw_mib);
        else {
            fprintf(stderr, "braid bench: unknown option '%s'\n", a);
            bench_usage(stderr);
            return 2;
        }
        if (!ok) return 2;
    }
    if (c.n_prompt + c.n_gen == 0) {
        fprintf(stderr, "braid bench: nothing to measure (-p 0 -n 0)\n");
        return 2;
    }
    char default_path[4096];
    if (!path) {
        if (!tool_default_model_path(default_path, sizeof default_path)) return 1;
        path = default_path;
    }

    bench_weights w;
    braid_status s = bench_weight_bytes(path, &w);
    if (s != BRAID_OK) {
        fprintf(stderr, "braid bench: %s: %s: %s\n", path, braid_status_name(s), braid_last_error());
        return 1;
    }
    double load = bench_loadavg();
    int n_threads = c.n_threads;
    if (n_threads <= 0) n_threads = (int)braid_context_default_params().n_threads;
    double bw = bench_bandwidth((size_t)bw_mib << 20, n_threads, 3);

    double *pp = calloc((size_t)c.reps, sizeof *pp), *tg = calloc((size_t)c.reps, sizeof *tg);
    if (!pp || !tg) {
        free(pp);
        free(tg);
        fprintf(stderr, "braid bench: out of memory\n");
        return 1;
    }
    s = bench_braid(path, &c, pp, tg);
    if (s != BRAID_OK) {
        fprintf(stderr, "braid bench: %s: %s\n", braid_status_name(s), braid_last_error());
        free(pp);
        free(tg);
        return 1;
    }
    bench_stat sp = bench_stats(pp, c.reps), sg = bench_stats(tg, c.reps);
    double roof = bw > 0 ? bw / (double)(w.per_token + w.state_per_token) : 0.0;

    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "model", json_string(path));
        json_object_set_new(o, "weight_type", json_string(bench_type_name(w.type)));
        json_object_set_new(o, "threads", json_integer(n_threads));
        json_object_set_new(o, "load_average", json_real(load));
        json_object_set_new(o, "weight_bytes", json_integer((json_int_t)w.total));
        json_object_set_new(o, "weight_bytes_per_token", json_integer((json_int_t)w.per_token));
        json_object_set_new(o, "state_bytes_per_token", json_integer((json_int_t)w.state_per_token));
        json_object_set_new(o, "bandwidth_bytes_per_second", json_real(bw));
        json_object_set_new(o, "roofline_tokens_per_second", json_real(roof));
        json_object_set_new(o, "n_prompt", json_integer(c.n_prompt));
        json_object_set_new(o, "n_gen", json_integer(c.n_gen));
        json_object_set_new(o, "pp_tokens_per_second", json_real(sp.mean));
        json_object_set_new(o, "pp_sd", json_real(sp.sd));
        json_object_set_new(o, "tg_tokens_per_second", json_real(sg.mean));
        json_object_set_new(o, "tg_sd", json_real(sg.sd));
        json_object_set_new(o, "tg_fraction_of_roofline", json_real(roof > 0 ? sg.mean / roof : 0.0));
        char *txt = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        if (txt) puts(txt);
        free(txt);
    } else {
        printf("model      %s (%s, %.1f MiB of weights)\n", path, bench_type_name(w.type), (double)w.total / 1048576.0);
        printf("threads    %d (load average %.1f at the start)\n", n_threads, load);
        printf("bandwidth  %.1f GB/s (streaming read of %d MiB)\n", bw / 1e9, bw_mib);
        printf("roofline   %.1f MiB of weights + %.1f MiB of recurrent state per generated token -> %.1f tok/s\n",
               (double)w.per_token / 1048576.0, (double)w.state_per_token / 1048576.0, roof);
        printf("\n%-8s %18s %12s\n", "test", "braid tok/s", "of roofline");
        if (c.n_prompt > 0) printf("pp%-6d %10.1f ± %5.1f %12s\n", c.n_prompt, sp.mean, sp.sd, "");
        if (c.n_gen > 0)
            printf("tg%-6d %10.2f ± %5.2f %11.0f%%\n", c.n_gen, sg.mean, sg.sd,
                   roof > 0 ? 100.0 * sg.mean / roof : 0.0);
    }
    free(pp);
    free(tg);
    return 0;
}

BRAID_COMMAND(bench, cmd_bench, "measure prompt and generation speed and the decode roofline")
