/* agent_cache.c — the prompt cache under agent-style traffic (testkit/agent_traffic.h): 8 conversations x 10
 * turns by default, each turn re-sending the whole history, some re-rendered (reasoning dropped), some
 * branched. For braid's prompt cache, no cache, and llama-server's policy simulated on braid's engine, it
 * prints tokens sent / new / computed, computed per new token, the hit rate and p50 / p95 time to first token,
 * and the ratios against braid. Times are this machine's; only the policy differs between the three runs.
 *
 *   bench_agent_cache [model.gguf] [--threads N] [--conv N] [--turns N] [--sys N] [--cache-ram MiB]
 * Without a model it writes a random-weight qwen35 ("small" preset, testkit/genmodel) to /tmp. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_traffic.h"
#include "braid.h"
#include "genmodel/genmodel.h"

static int dcmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(double *v, int n, double q) {
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, dcmp);
    int i = (int)(q * (n - 1) + 0.5);
    return v[i];
}

int main(int argc, char **argv) {
    const char *model_path = NULL;
    at_params p;
    at_params_default(&p);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            p.n_threads = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--conv") && i + 1 < argc)
            p.n_conv = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--turns") && i + 1 < argc)
            p.n_turns = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--sys") && i + 1 < argc)
            p.sys_len = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cache-ram") && i + 1 < argc)
            p.cache_bytes = (uint64_t)atoll(argv[++i]) << 20;
        else if (argv[i][0] != '-')
            model_path = argv[i];
        else {
            fprintf(stderr, "usage: %s [model.gguf] [--threads N] [--conv N] [--turns N] [--sys N] [--cache-ram MiB]\n",
                    argv[0]);
            return 2;
        }
    }
    char tmp[256] = "";
    if (!model_path) {
        snprintf(tmp, sizeof tmp, "/tmp/braid_bench_agent_%d.gguf", (int)getpid());
        gen_params gp;
        gen_params_default(&gp);
        gp.arch = "qwen35";
        gp.preset = "small";
        gp.vocab = "none";
        gp.n_vocab = 512;
        gen_summary sum;
        if (gen_model_write(&gp, tmp, &sum) != BRAID_OK) {
            fprintf(stderr, "gen-model: %s\n", braid_last_error());
            return 1;
        }
        model_path = tmp;
    }
    braid_model *m = NULL;
    braid_model_params mp = braid_model_default_params();
    if (braid_model_load(model_path, &mp, &m) != BRAID_OK) {
        fprintf(stderr, "%s: %s\n", model_path, braid_last_error());
        return 1;
    }
    if (braid_model_n_vocab(m) < 506) {
        fprintf(stderr, "%s: needs a vocabulary of at least 506 tokens\n", model_path);
        return 1;
    }
    printf("agent traffic: %d conversations x %d turns, system prompt %d tokens, %d slots, threads %u, model %s "
           "(%s)\n",
           p.n_conv, p.n_turns, p.sys_len, p.n_slots, p.n_threads, model_path, braid_model_arch(m));
    at_result res[3];
    at_policy pols[3] = {AT_BRAID, AT_OFF, AT_LLAMA};
    for (int k = 0; k < 3; k++) {
        braid_status st = at_run(m, &p, pols[k], &res[k]);
        if (st != BRAID_OK) {
            fprintf(stderr, "%s: %s (%s)\n", at_policy_name(pols[k]), braid_status_name(st), braid_last_error());
            return 1;
        }
    }
    double p50[3], p95[3];
    printf("%-34s %8s %8s %9s %9s %8s %8s %10s %10s\n", "policy", "sent", "new", "computed", "comp/new",
           "replay", "hits", "p50 TTFT", "p95 TTFT");
    for (int k = 0; k < 3; k++) {
        at_result *r = &res[k];
        p50[k] = pct(r->ttft_ms, r->requests, 0.50);
        p95[k] = pct(r->ttft_ms, r->requests, 0.95);
        printf("%-34s %8lld %8lld %9lld %9.3f %8lld %7.1f%% %8.2fms %8.2fms\n", at_policy_name(pols[k]),
               (long long)r->sent, (long long)r->new_tokens, (long long)r->computed,
               (double)r->computed / (double)r->new_tokens, (long long)r->replayed,
               100.0 * r->hits / (r->requests ? r->requests : 1), p50[k], p95[k]);
    }
    printf("ratios vs braid: computed tokens  cache off %.2fx  llama-server policy %.2fx;  p50 TTFT  cache off %.2fx  "
           "llama-server policy %.2fx;  p95 TTFT  cache off %.2fx  llama-server policy %.2fx\n",
           (double)res[1].computed / (double)res[0].computed, (double)res[2].computed / (double)res[0].computed,
           p50[1] / p50[0], p50[2] / p50[0], p95[1] / p95[0], p95[2] / p95[0]);
    const braid_prompt_cache_stats *cs = &res[0].cache;
    printf("braid cache at the end: %d entries, %d cells, %d checkpoints, %.1f MiB (cells %.1f, checkpoints %.1f, "
           "logits %.1f), %llu evictions, token hit rate %.1f%%\n",
           cs->entries, cs->cells, cs->checkpoints, cs->bytes / 1048576.0, cs->cell_bytes / 1048576.0,
           cs->checkpoint_bytes / 1048576.0, cs->logits_bytes / 1048576.0, (unsigned long long)cs->evictions,
           100.0 * (double)res[0].cached / (double)res[0].sent);
    for (int k = 0; k < 3; k++) free(res[k].ttft_ms);
    braid_model_free(m);
    if (tmp[0]) unlink(tmp);
    return 0;
}
