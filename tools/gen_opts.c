/* gen_opts.c — see gen_opts.h. */
#include "gen_opts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "default_model.h"
#include "tool_util.h"

void gen_opts_init(gen_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_predict = 128;
    o->n_batch = 512;
    o->draft_n = 8;
    o->sp = braid_sampler_default_params();
    o->sp.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
}

void gen_opts_usage(FILE *f) {
    fprintf(f,
            "  -m, --model FILE      GGUF model (default: the built-in trained qwen35 model, models/ of the\n"
            "                        source tree, or $BRAID_MODELS_DIR)\n"
            "  -n, --n-predict N     generate at most N tokens (default 128)\n"
            "  --temp T              temperature, <= 0 for greedy (default 0.8)\n"
            "  --top-k K             keep the K best tokens, <= 0 off (default 40)\n"
            "  --top-p P             nucleus sampling, 1 off (default 0.95)\n"
            "  --min-p P             drop tokens under P x the best one's probability, 0 off (default 0.05)\n"
            "  --repeat-penalty R    penalty on recently seen tokens, 1 off (default 1)\n"
            "  --repeat-last-n N     how many recent tokens the penalty looks at (default 64)\n"
            "  --frequency-penalty F, --presence-penalty F   (default 0)\n"
            "  --seed S              random seed (default: from the clock)\n"
            "  --stop S              stop before the text S (repeatable)\n"
            "  -t, --threads N       compute threads (default: all online cores)\n"
            "  -c, --ctx N           context size in tokens\n"
            "  -b, --batch N         prompt tokens decoded per step (default 512)\n"
            "  --ctx-shift           when the context is full, keep the first --keep tokens, drop half of the\n"
            "                        rest and go on\n"
            "  --keep N              tokens a context shift keeps at the start (default 0)\n"
            "  --self-extend N W     Self-Extend: group size N, window W (a multiple of N)\n"
            "  --draft-model FILE    speculative decoding with this draft model (same vocabulary)\n"
            "  --draft-n N           tokens drafted per step (default 8; with --mtp 1)\n"
            "  --lookup N            speculative decoding drafting from earlier N-grams of the text\n"
            "  --mtp                 speculative decoding drafting with the model's own MTP (nextn) head\n"
            "  --session FILE        reuse the state saved in FILE for a shared prefix; save it after the\n"
            "                        prompt and after the reply\n"
            "  --json-schema FILE    constrained decoding: the reply is a JSON document matching the JSON Schema\n"
            "                        in FILE (braid.h lists the keywords; others are refused by name)\n"
            "  --json-object         constrained decoding: the reply is a JSON object\n"
            "  --json                JSON output\n");
}

int gen_opts_parse(const char *cmd, int argc, char **argv, int *i, gen_opts *o) {
    const char *a = argv[*i];
    if (!strcmp(a, "--json")) return o->json = 1, 1;
    if (!strcmp(a, "--ctx-shift")) return o->ctx_shift = 1, 1;
    if (!strcmp(a, "--mtp")) {
        if (o->draft_model || o->lookup_n) {
            fprintf(stderr, "braid %s: --mtp excludes --draft-model and --lookup\n", cmd);
            return -1;
        }
        return o->mtp = 1, 1;
    }
    if (!strcmp(a, "--json-object")) return o->json_object = 1, 1;
    static const char *const with_value[] = {
        "-m", "--model", "-n", "--n-predict", "-t", "--threads", "-c", "--ctx", "-b", "--batch", "--temp", "--top-k",
        "--top-p", "--min-p", "--repeat-penalty", "--repeat-last-n", "--frequency-penalty", "--presence-penalty",
        "--seed", "--stop", "--keep", "--self-extend", "--draft-model", "--draft-n", "--lookup", "--session",
        "--json-schema"};
    int known = 0;
    for (size_t k = 0; k < sizeof with_value / sizeof *with_value; k++) known |= !strcmp(a, with_value[k]);
    if (!known) return 0;
    int need = !strcmp(a, "--self-extend") ? 2 : 1;
    if (*i + need >= argc) {
        fprintf(stderr, "braid %s: %s needs %s\n", cmd, a, need == 2 ? "two values" : "a value");
        return -1;
    }
    const char *v = argv[++*i];
    int ok = 1;
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model = v;
    else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) ok = tool_parse_i32(cmd, a, v, 0, INT32_MAX / 2, &o->n_predict);
    else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) ok = tool_parse_i32(cmd, a, v, 1, 1024, &o->n_threads);
    else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) ok = tool_parse_i32(cmd, a, v, 1, INT32_MAX / 2, &o->n_ctx);
    else if (!strcmp(a, "-b") || !strcmp(a, "--batch")) ok = tool_parse_i32(cmd, a, v, 1, 1 << 16, &o->n_batch);
    else if (!strcmp(a, "--temp")) ok = tool_parse_f32(cmd, a, v, &o->sp.temperature);
    else if (!strcmp(a, "--top-k")) ok = tool_parse_i32(cmd, a, v, INT32_MIN, INT32_MAX, &o->sp.top_k);
    else if (!strcmp(a, "--top-p")) ok = tool_parse_f32(cmd, a, v, &o->sp.top_p);
    else if (!strcmp(a, "--min-p")) ok = tool_parse_f32(cmd, a, v, &o->sp.min_p);
    else if (!strcmp(a, "--repeat-penalty")) ok = tool_parse_f32(cmd, a, v, &o->sp.repeat_penalty);
    else if (!strcmp(a, "--repeat-last-n")) ok = tool_parse_i32(cmd, a, v, 0, 1 << 20, &o->sp.penalty_last_n);
    else if (!strcmp(a, "--frequency-penalty")) ok = tool_parse_f32(cmd, a, v, &o->sp.frequency_penalty);
    else if (!strcmp(a, "--presence-penalty")) ok = tool_parse_f32(cmd, a, v, &o->sp.presence_penalty);
    else if (!strcmp(a, "--seed")) ok = tool_parse_u64(cmd, a, v, &o->sp.seed);
    else if (!strcmp(a, "--keep")) ok = tool_parse_i32(cmd, a, v, 0, INT32_MAX / 2, &o->n_keep);
    else if (!strcmp(a, "--draft-model")) o->draft_model = v;
    else if (!strcmp(a, "--draft-n")) ok = tool_parse_i32(cmd, a, v, 1, 64, &o->draft_n), o->draft_n_set = 1;
    else if (!strcmp(a, "--lookup")) ok = tool_parse_i32(cmd, a, v, 1, 64, &o->lookup_n);
    else if (!strcmp(a, "--session")) o->session = v;
    else if (!strcmp(a, "--json-schema")) o->json_schema = v;
    else if (!strcmp(a, "--stop")) {
        if (o->n_stop == GEN_OPTS_MAX_STOP || !v[0]) {
            fprintf(stderr, "braid %s: --stop: at most %d non-empty stop strings\n", cmd, GEN_OPTS_MAX_STOP);
            ok = 0;
        } else {
            o->stop[o->n_stop++] = v;
        }
    } else if (!strcmp(a, "--self-extend")) {
        ok = tool_parse_i32(cmd, a, v, 2, 1 << 16, &o->se_n) &&
             tool_parse_i32(cmd, a, argv[++*i], 1, 1 << 24, &o->se_w);
        if (ok && o->se_w % o->se_n) {
            fprintf(stderr, "braid %s: --self-extend: the window %d is not a multiple of %d\n", cmd, o->se_w, o->se_n);
            ok = 0;
        }
    }
    if (ok && o->mtp && (o->draft_model || o->lookup_n)) {
        fprintf(stderr, "braid %s: --mtp excludes --draft-model and --lookup\n", cmd);
        ok = 0;
    }
    if (ok && (o->json_schema || o->json_object) && (o->draft_model || o->lookup_n || o->mtp)) {
        fprintf(stderr, "braid %s: --json-schema / --json-object do not run with speculative decoding\n", cmd);
        ok = 0;
    }
    if (ok && o->json_schema && o->json_object) {
        fprintf(stderr, "braid %s: --json-schema and --json-object are exclusive\n", cmd);
        ok = 0;
    }
    if (ok && o->draft_model && o->lookup_n) {
        fprintf(stderr, "braid %s: --draft-model and --lookup are exclusive\n", cmd);
        ok = 0;
    }
    return ok ? 1 : -1;
}

static int load(const char *cmd, const char *path, braid_model **out) {
    braid_model_params mp = braid_model_default_params();
    braid_status s = braid_model_load(path, &mp, out);
    if (s != BRAID_OK) {
        fprintf(stderr, "braid %s: cannot load %s: %s: %s\n", cmd, path, braid_status_name(s), braid_last_error());
        return 0;
    }
    return 1;
}

int gen_setup_models(const char *cmd, gen_opts *o, gen_setup *su) {
    memset(su, 0, sizeof *su);
    if (!o->model) {
        if (!tool_default_model_path(su->default_path, sizeof su->default_path)) return 0;
        o->model = su->default_path;
    }
    if (o->json_schema || o->json_object) {
        char *text = NULL;
        size_t len = 0;
        if (o->json_schema && !tool_read_file(cmd, o->json_schema, &text, &len)) return 0;
        braid_status s = braid_json_constraint_new(text, len, &su->json);
        free(text);
        if (s != BRAID_OK) {
            fprintf(stderr, "braid %s: %s: %s: %s\n", cmd, o->json_schema ? o->json_schema : "--json-object",
                    braid_status_name(s), braid_last_error());
            return 0;
        }
    }
    if (!load(cmd, o->model, &su->model)) return 0;
    if (o->draft_model) {
        if (!load(cmd, o->draft_model, &su->draft_model)) return 0;
        if (braid_model_n_vocab(su->draft_model) != braid_model_n_vocab(su->model)) {
            fprintf(stderr, "braid %s: the draft model has %d tokens, the model %d: they must share the vocabulary\n",
                    cmd, braid_model_n_vocab(su->draft_model), braid_model_n_vocab(su->model));
            return 0;
        }
    }
    return 1;
}

int gen_setup_contexts(const char *cmd, const gen_opts *o, uint32_t n_ctx, gen_setup *su) {
    braid_context_params cp = braid_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = (uint32_t)o->n_batch;
    if (o->n_threads) cp.n_threads = (uint32_t)o->n_threads;
    const int32_t dn = gen_opts_draft_n(o);
    if ((o->draft_model || o->lookup_n || o->mtp) && cp.n_rollback < (uint32_t)dn + 1) cp.n_rollback = (uint32_t)dn + 1;
    braid_status s = braid_context_new(su->model, &cp, &su->ctx);
    if (s == BRAID_OK && su->draft_model) s = braid_context_new(su->draft_model, &cp, &su->draft_ctx);
    if (s != BRAID_OK) {
        fprintf(stderr, "braid %s: context: %s: %s\n", cmd, braid_status_name(s), braid_last_error());
        return 0;
    }
    return 1;
}

void gen_setup_free(gen_setup *su) {
    braid_context_free(su->draft_ctx);
    braid_context_free(su->ctx);
    braid_model_free(su->draft_model);
    braid_model_free(su->model);
    braid_json_constraint_free(su->json);
    memset(su, 0, sizeof *su);
}

braid_gen_params gen_opts_params(const gen_opts *o, const gen_setup *su) {
    braid_gen_params gp = braid_gen_default_params();
    gp.n_predict = o->n_predict;
    gp.sampler = o->sp;
    gp.stop = o->stop;
    gp.n_stop = o->n_stop;
    gp.ctx_shift = o->ctx_shift;
    gp.n_keep = o->n_keep;
    gp.self_extend_n = o->se_n;
    gp.self_extend_w = o->se_w;
    gp.draft = su->draft_ctx;
    gp.draft_n = gen_opts_draft_n(o);
    gp.lookup_n = o->lookup_n;
    gp.mtp = o->mtp;
    gp.json = su->json;
    return gp;
}

int32_t gen_opts_draft_n(const gen_opts *o) {
    /* An MTP head is trained on the trunk's hidden state to predict the token after next; chained on its own
     * hidden state it is out of what it learned (the default model after "And God said": 63 of 65 single
     * drafts accepted, of 3-token chains only the first, 64 of 190), and every rejected draft costs a verified
     * row: one draft per step was the fastest on every prompt measured. So --mtp drafts 1 unless told. */
    return o->mtp && !o->draft_n_set ? 1 : o->draft_n;
}

int gen_session_load(const char *cmd, braid_context *ctx, const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT) return 0;
        fprintf(stderr, "braid %s: session %s not used: %s\n", cmd, path, strerror(errno));
        return -1;
    }
    braid_status s = braid_state_seq_load_file(ctx, 0, path);
    if (s != BRAID_OK) {
        fprintf(stderr, "braid %s: session %s refused (%s: %s); starting from scratch, the file is left as it is\n",
                cmd, path, braid_status_name(s), braid_last_error());
        return -1;
    }
    return 1;
}

int gen_session_save(const char *cmd, braid_context *ctx, const char *path) {
    braid_status s = braid_state_seq_save_file(ctx, 0, path);
    if (s != BRAID_OK) {
        fprintf(stderr, "braid %s: cannot save the session to %s: %s: %s\n", cmd, path, braid_status_name(s),
                braid_last_error());
        return 0;
    }
    return 1;
}

int gen_put_piece(void *user, braid_token t, const char *text, size_t len) {
    (void)user;
    (void)t;
    if (len) fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0;
}
