/* cmd_gen_model.c — `braid gen-model`: writes a random-weight GGUF of a supported architecture and size
 * (testkit/genmodel/genmodel.h), for tests and benchmarks that must not download models. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "braid.h"
#include "commands.h"
#include "genmodel/gen_mmproj.h"
#include "genmodel/genmodel.h"
#include "tensor/dot.h"
#include "tensor/types.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: braid gen-model -o FILE [--arch ARCH] [--preset PRESET] [--type TYPE] [--seed N] [--std X]\n"
            "                       [--vocab FILE|none] [--n-vocab N] [shape overrides]\n"
            "  --arch       architecture (default qwen35):");
    for (const char *const *a = gen_arch_names(); *a; a++) fprintf(f, " %s", *a);
    fprintf(f, " qwen3vl-mmproj (a vision projector; see below)");
    fprintf(f, "\n  --preset     size (default tiny):");
    for (const char *const *p = gen_preset_names(); *p; p++) fprintf(f, " %s", *p);
    fprintf(f,
            "\n"
            "  --type       matrix type: f32 (default) f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl mxfp4 q2_k q3_k q4_k\n"
            "               q5_k q6_k iq4_xs; 1-D tensors and conv\n"
            "               kernels stay f32; matrices whose rows do not fit the type's blocks fall back to q8_0/f16\n"
            "  --seed N     weights are a function of (seed, tensor name) (default 1)\n"
            "  --std X      std of the matrices (default 0.1)\n"
            "  --vocab F    copy tokenizer.* from this GGUF (default: the qwen35 vocab test file of the oracle\n"
            "               cache); 'none': a dummy vocabulary of --n-vocab tokens (default 1024)\n"
            "  overrides:   --ctx --layers --embd --ff --heads --heads-kv --head-dim --rot --conv --state\n"
            "               --k-heads --v-heads --inner --interval N, --rope-base X, --eps X, --pattern S\n"
            "               MoE (qwen35moe, qwen3next): --experts --experts-used --ff-exp --ff-shexp N,\n"
            "               --gate-up 1 (merged ffn_gate_up_exps) or 2, --qkvz 1 (attn_qkv + attn_gate) or 2 (ssm_in)\n"
            "               --nextn 1: one MTP block after the trunk (qwen35, qwen35moe, qwen3next; braid run --mtp)\n"
            "  qwen3vl-mmproj (Qwen3-VL / Qwen3.5 vision projector, for --mmproj): --type f16 (default) or f32,\n"
            "               --embd E (64) --heads N (4) --ff F (128) --layers L (2) --pos-side S (16)\n"
            "               --n-text T (the text model's n_embd, 256) --deepstack 0,2 --seed N --std X --eps X\n");
}

static int parse_i64(const char *opt, const char *v, int64_t *out) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < 0) {
        fprintf(stderr, "braid gen-model: %s wants a non-negative integer, got '%s'\n", opt, v);
        return 0;
    }
    *out = x;
    return 1;
}

static int parse_float(const char *opt, const char *v, float *out) {
    char *end;
    errno = 0;
    float x = strtof(v, &end);
    if (errno || end == v || *end) {
        fprintf(stderr, "braid gen-model: %s wants a number, got '%s'\n", opt, v);
        return 0;
    }
    *out = x;
    return 1;
}

/* --arch qwen3vl-mmproj: its own shape options (testkit/genmodel/gen_mmproj.h). */
static int gen_mmproj_cmd(int argc, char **argv) {
    gen_mmproj_params p;
    gen_mmproj_default(&p);
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) {
            fprintf(stderr, "braid gen-model: %s needs a value\n", a);
            return 2;
        }
        const char *v = argv[++i];
        int ok = 1;
        int64_t x = 0;
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) out = v;
        else if (!strcmp(a, "--arch")) continue;
        else if (!strcmp(a, "--embd")) ok = parse_i64(a, v, &p.n_embd);
        else if (!strcmp(a, "--heads")) ok = parse_i64(a, v, &p.n_head);
        else if (!strcmp(a, "--ff")) ok = parse_i64(a, v, &p.n_ff);
        else if (!strcmp(a, "--layers")) ok = parse_i64(a, v, &p.n_layer);
        else if (!strcmp(a, "--pos-side")) ok = parse_i64(a, v, &p.pos_side);
        else if (!strcmp(a, "--n-text") || !strcmp(a, "--text-embd")) ok = parse_i64(a, v, &p.n_text);
        else if (!strcmp(a, "--std")) ok = parse_float(a, v, &p.std);
        else if (!strcmp(a, "--eps")) ok = parse_float(a, v, &p.eps);
        else if (!strcmp(a, "--seed")) {
            ok = parse_i64(a, v, &x);
            p.seed = (uint64_t)x;
        } else if (!strcmp(a, "--type")) {
            if (!strcmp(v, "f16")) p.type = BRAID_TYPE_F16;
            else if (!strcmp(v, "f32")) p.type = BRAID_TYPE_F32;
            else {
                fprintf(stderr, "braid gen-model: qwen3vl-mmproj --type is f16 or f32, not '%s'\n", v);
                ok = 0;
            }
        } else if (!strcmp(a, "--deepstack")) {
            const char *c = v;
            while (ok && *c) {
                char *end;
                long l = strtol(c, &end, 10);
                if (end == c || l < 0 || p.n_deepstack >= GEN_MMPROJ_MAX_LAYERS || (*end && *end != ',')) {
                    fprintf(stderr, "braid gen-model: --deepstack wants layer numbers like 0,2, got '%s'\n", v);
                    ok = 0;
                    break;
                }
                p.deepstack[p.n_deepstack++] = (int32_t)l;
                c = *end ? end + 1 : end;
            }
        } else {
            fprintf(stderr, "braid gen-model: unknown option %s for qwen3vl-mmproj\n", a);
            usage(stderr);
            return 2;
        }
        if (!ok) return 2;
    }
    if (!out) {
        fprintf(stderr, "braid gen-model: -o FILE is required\n");
        return 2;
    }
    uint64_t n = 0;
    braid_status s = gen_mmproj_write(&p, out, &n);
    if (s != BRAID_OK) {
        fprintf(stderr, "braid gen-model: %s: %s\n", braid_status_name(s), braid_last_error());
        return 1;
    }
    printf("wrote %s: qwen3vl-mmproj, seed %llu, %s matrices: embd %lld heads %lld ff %lld layers %lld pos-side %lld "
           "n-text %lld deepstack %d, %.2f M parameters\n",
           out, (unsigned long long)p.seed, p.type == BRAID_TYPE_F16 ? "f16" : "f32", (long long)p.n_embd,
           (long long)p.n_head, (long long)p.n_ff, (long long)p.n_layer, (long long)p.pos_side, (long long)p.n_text,
           p.n_deepstack, (double)n / 1e6);
    return 0;
}

static int cmd_gen_model(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--arch") && !strcmp(argv[i + 1], "qwen3vl-mmproj")) return gen_mmproj_cmd(argc, argv);
    gen_params p;
    gen_params_default(&p);
    const char *out = NULL;
    static const struct {
        const char *opt;
        size_t off;
    } ints[] = {
        {"--ctx", offsetof(gen_shape, n_ctx)},          {"--layers", offsetof(gen_shape, n_layer)},
        {"--embd", offsetof(gen_shape, n_embd)},        {"--ff", offsetof(gen_shape, n_ff)},
        {"--heads", offsetof(gen_shape, n_head)},       {"--heads-kv", offsetof(gen_shape, n_head_kv)},
        {"--head-dim", offsetof(gen_shape, head_dim)},  {"--rot", offsetof(gen_shape, n_rot)},
        {"--conv", offsetof(gen_shape, ssm_conv)},      {"--state", offsetof(gen_shape, ssm_state)},
        {"--k-heads", offsetof(gen_shape, ssm_groups)}, {"--v-heads", offsetof(gen_shape, ssm_heads)},
        {"--inner", offsetof(gen_shape, ssm_inner)},    {"--interval", offsetof(gen_shape, interval)},
        {"--experts", offsetof(gen_shape, n_expert)},   {"--experts-used", offsetof(gen_shape, n_expert_used)},
        {"--ff-exp", offsetof(gen_shape, n_ff_exp)},    {"--ff-shexp", offsetof(gen_shape, n_ff_shexp)},
        {"--gate-up", offsetof(gen_shape, gate_up)},    {"--qkvz", offsetof(gen_shape, qkvz)},
        {"--nextn", offsetof(gen_shape, nextn)},
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "braid gen-model: %s needs a value\n", a);
            usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        int ok = 1, known = 1;
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) out = v;
        else if (!strcmp(a, "--arch")) p.arch = v;
        else if (!strcmp(a, "--preset")) p.preset = v;
        else if (!strcmp(a, "--vocab")) p.vocab = v;
        else if (!strcmp(a, "--n-vocab")) ok = parse_i64(a, v, &p.n_vocab);
        else if (!strcmp(a, "--std")) ok = parse_float(a, v, &p.std);
        else if (!strcmp(a, "--rope-base")) ok = parse_float(a, v, &p.over.rope_base);
        else if (!strcmp(a, "--eps")) ok = parse_float(a, v, &p.over.eps);
        else if (!strcmp(a, "--seed")) {
            int64_t s;
            ok = parse_i64(a, v, &s);
            p.seed = (uint64_t)s;
        } else if (!strcmp(a, "--type")) {
            int t = bd_type_from_name(v);
            if (t < 0 || !bd_type_supported((uint32_t)t)) { /* Q8_K / Q8_1 are activation formats */
                fprintf(stderr, "braid gen-model: unknown --type '%s'\n", v);
                ok = 0;
            }
            p.type = (uint32_t)t;
        } else if (!strcmp(a, "--pattern")) {
            if (strlen(v) >= sizeof p.over.pattern) {
                fprintf(stderr, "braid gen-model: --pattern longer than %zu\n", sizeof p.over.pattern - 1);
                ok = 0;
            } else {
                strcpy(p.over.pattern, v);
            }
        } else {
            known = 0;
            for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++)
                if (!strcmp(a, ints[k].opt)) {
                    known = 1;
                    ok = parse_i64(a, v, (int64_t *)(void *)((char *)&p.over + ints[k].off));
                }
        }
        if (!known) {
            fprintf(stderr, "braid gen-model: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
        if (!ok) return 2;
    }
    if (!out) {
        fprintf(stderr, "braid gen-model: -o FILE is required\n");
        usage(stderr);
        return 2;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    gen_summary sum;
    braid_status s = gen_model_write(&p, out, &sum);
    if (s != BRAID_OK) {
        fprintf(stderr, "braid gen-model: %s: %s\n", braid_status_name(s), braid_last_error());
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    const gen_shape *g = &sum.shape;
    printf("wrote %s: %s %s, seed %llu, %s matrices (std %g)\n", out, p.arch, p.preset, (unsigned long long)p.seed,
           bd_type_traits_get(p.type)->name, (double)p.std);
    /* the dimensions this architecture has (the others stay unset) */
    const struct {
        const char *name;
        int64_t v;
    } dims[] = {{"layers", g->n_layer},    {"embd", g->n_embd},       {"ff", g->n_ff},
                {"heads", g->n_head},      {"heads-kv", g->n_head_kv}, {"head-dim", g->head_dim},
                {"rot", g->n_rot},         {"conv", g->ssm_conv},     {"state", g->ssm_state},
                {"k-heads", g->ssm_groups}, {"v-heads", g->ssm_heads}, {"inner", g->ssm_inner},
                {"interval", g->interval}, {"ctx", g->n_ctx},         {"vocab", sum.n_vocab}};
    printf(" ");
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i].v > 0) printf(" %s %lld", dims[i].name, (long long)dims[i].v);
    if (g->pattern[0]) printf(" pattern %s", g->pattern);
    printf("\n");
    printf("  %zu tensors, %.1f M parameters, %.1f MiB of tensor data", sum.n_tensors, (double)sum.n_params / 1e6,
           (double)sum.n_bytes / (1024.0 * 1024.0));
    if (sum.n_fallback) printf(", %zu matrices in q8_0/f16 (rows not a multiple of the type's block)", sum.n_fallback);
    printf(", %.2f s\n", secs);
    return 0;
}

BRAID_COMMAND(gen-model, cmd_gen_model, "write a random-weight GGUF model (-o FILE --arch --preset --type ...)")
