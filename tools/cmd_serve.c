/* cmd_serve.c — `braid serve`: the OpenAI-compatible HTTP server (server/) over one model and one context
 * of --parallel sequences. Prints "braid serve: listening on http://HOST:PORT" on stderr once it accepts
 * connections (with --port 0 the port is the one the system chose) and runs until SIGINT or SIGTERM. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "braid.h"
#include "commands.h"
#include "default_model.h"
#include "image_prompt.h"
#include "server.h"
#include "tool_util.h"

static void serve_usage(FILE *f) {
    fprintf(f, "usage: braid serve [-m FILE] [options]\n"
               "  -m, --model FILE      the GGUF to serve (default: the built-in model)\n"
               "  --host ADDR           IPv4 address to listen on (default 127.0.0.1)\n"
               "  --port N              port (default 8080; 0: any free one)\n"
               "  --api-key KEY         require this key (Authorization: Bearer KEY or X-Api-Key); repeatable\n"
               "  --api-key-file FILE   keys, one per line\n"
               "  --timeout S           idle connection timeout in seconds (default 600)\n"
               "  --parallel N          slots: requests decoded together (default 4)\n"
               "  -c, --ctx N           tokens per slot, prompt + reply (default 4096)\n"
               "  -b, --batch N         rows per decode step (default 512)\n"
               "  -t, --threads N       compute threads (default: all cores)\n"
               "  --queue N             requests waiting for a slot before 429 (default 64)\n"
               "  --max-body BYTES      request body limit, 413 beyond it (default 8388608)\n"
               "  --alias NAME          another model name clients may use; repeatable\n"
               "  --checkpoint-interval N  recurrent checkpoint every N prompt tokens (default 256)\n"
               "  --cache-ram MiB       prompt cache shared by all slots: one budget for cached cells,\n"
               "                        checkpoints and logits (default 1024; 0: off, each slot reuses its own)\n"
               "  --cache-entries N     cached prompts and replies at most (default 4 per slot)\n"
               "  --slot-save-path DIR  where POST /slots/{id}?action=save|restore keeps slot files\n"
               "  --draft-model FILE    speculative decoding with this draft model (same vocabulary) by default;\n"
               "                        its context holds one sequence per slot\n"
               "  --lookup N            speculative decoding from earlier N-grams of each request's text by default\n"
               "  --mtp                 speculative decoding with the model's own MTP (nextn) head by default\n"
               "  --draft-n N           tokens drafted per step (default 8; with --mtp 1); requests may ask up to\n"
               "                        max(N, 7) with \"speculative\": {\"mode\", \"n\", \"ngram\"} (mode \"default\",\n"
               "                        \"off\", \"lookup\", \"draft\" or \"mtp\")\n"
               "  --mmproj FILE         vision projector (mmproj GGUF): chat messages may hold image_url parts\n"
               "                        (base64 data: URLs), and the chat page offers to attach images\n"
               "  --image-min-tokens N, --image-max-tokens N   rows per image (default: the projector's)\n");
}

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig) {
    (void)sig;
    stop_flag = 1;
}

static char *key_store[SRV_MAX_KEYS];

static int read_keys(const char *path, srv_config *c) {
    char *txt = NULL;
    size_t len = 0;
    if (!tool_read_file("braid serve", path, &txt, &len)) return 0;
    for (char *line = strtok(txt, "\r\n"); line; line = strtok(NULL, "\r\n")) {
        if (!*line) continue;
        if (c->n_keys == SRV_MAX_KEYS) {
            fprintf(stderr, "braid serve: more than %d keys\n", SRV_MAX_KEYS);
            free(txt);
            return 0;
        }
        key_store[c->n_keys] = strdup(line);
        c->api_keys[c->n_keys] = key_store[c->n_keys];
        c->n_keys++;
    }
    free(txt);
    return 1;
}

static int cmd_serve(int argc, char **argv) {
    srv_config cfg;
    srv_config_default(&cfg);
    const char *model_path = NULL;
    int32_t n_batch = 512, n_threads = 0, interval = 256, v = 0, cache_mib = 1024, cache_entries = 0;
    int32_t draft_n = 8, lookup_n = 0;
    int mtp = 0, draft_n_set = 0;
    const char *draft_path = NULL;
    int ok = 1, io = 0;
    img_opts img;
    memset(&img, 0, sizeof img);
    for (int i = 1; ok && i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED()                                                                                                 \
    do {                                                                                                       \
        if (!val) {                                                                                            \
            fprintf(stderr, "braid serve: %s needs a value\n", a);                                             \
            return 2;                                                                                          \
        }                                                                                                      \
        i++;                                                                                                   \
    } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            serve_usage(stdout);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            NEED();
            model_path = val;
        } else if (!strcmp(a, "--host")) {
            NEED();
            cfg.host = val;
        } else if (!strcmp(a, "--port")) {
            NEED();
            ok = tool_parse_i32("braid serve", a, val, 0, 65535, &v), cfg.port = v;
        } else if (!strcmp(a, "--api-key")) {
            NEED();
            if (cfg.n_keys == SRV_MAX_KEYS) return fprintf(stderr, "braid serve: too many keys\n"), 2;
            cfg.api_keys[cfg.n_keys++] = val;
        } else if (!strcmp(a, "--api-key-file")) {
            NEED();
            if (!read_keys(val, &cfg)) return 1;
        } else if (!strcmp(a, "--timeout")) {
            NEED();
            ok = tool_parse_i32("braid serve", a, val, 1, 86400 * 7, &v), cfg.timeout_s = v;
        } else if (!strcmp(a, "--parallel") || !strcmp(a, "-np")) {
            NEED();
            ok = tool_parse_i32("braid serve", a, val, 1, (int32_t)BRAID_MAX_SEQ, &v), cfg.parallel = v;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) {
            NEED();
            ok = tool_parse_i32("braid serve", a, val, 2, 1 << 24, &cfg.ctx_per_slot);
        } else if (!strcmp(a, "-b") || !strcmp(a, "--batch")) {
            NEED();
            ok = tool_parse_i32("braid serve", a, val, 1, (int32_t)BRAID_MAX_BATCH, &n_batch);
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            NEED();
            ok = tool_parse_i32("braid serve", a, val, 0, (int32_t)BRAID_MAX_THREADS, &n_threads);
        } else if (!strcmp(a, "--queue")) {
            NEED();
            ok = tool_parse_i32("braid serve", a, val, 0, 1 << 20, &v), cfg.queue_max = v;
        } else if (!strcmp(a, "--max-body")) {
            NEED();
            uint64_t b = 0;
            ok = tool_parse_u64("braid serve", a, val, &b), cfg.body_max = (size_t)b;
        } else if (!strcmp(a, "--alias")) {
            NEED();
            if (cfg.n_alias == SRV_MAX_ALIAS) return fprintf(stderr, "braid serve: too many aliases\n"), 2;
            cfg.aliases[cfg.n_alias++] = val;
        } else if (!strcmp(a, "--cache-ram")) {
            NEED();
            ok = tool_parse_i32("braid serve", a, val, 0, 1 << 22, &cache_mib);
        } else if (!strcmp(a, "--cache-entries")) {
            NEED();
            ok = tool_parse_i32("braid serve", a, val, 1, (int32_t)BRAID_MAX_SEQ - 1, &cache_entries);
        } else if (!strcmp(a, "--slot-save-path")) {
            NEED();
            struct stat sb;
            if (stat(val, &sb) || !S_ISDIR(sb.st_mode))
                return fprintf(stderr, "braid serve: --slot-save-path %s is not a directory\n", val), 2;
            cfg.slot_save_path = val;
        } else if (!strcmp(a, "--draft-model") || !strcmp(a, "-md")) {
            NEED();
            draft_path = val;
        } else if (!strcmp(a, "--draft-n")) {
            NEED();
            ok = tool_parse_i32("braid serve", a, val, 1, 64, &draft_n);
            draft_n_set = 1;
        } else if (!strcmp(a, "--mtp")) {
            mtp = 1;
        } else if (!strcmp(a, "--lookup")) {
            NEED();
            ok = tool_parse_i32("braid serve", a, val, 1, 64, &lookup_n);
        } else if ((io = img_opts_parse("serve", argc, argv, &i, &img)) != 0) {
            if (io < 0) return 2;
            if (img.n_images || img.dump)
                return fprintf(stderr, "braid serve: images come with the requests (image_url parts)\n"), 2;
        } else if (!strcmp(a, "--checkpoint-interval")) {
            NEED();
            ok = tool_parse_i32("braid serve", a, val, 0, (int32_t)BRAID_MAX_CHECKPOINT_INTERVAL, &interval);
        } else {
            fprintf(stderr, "braid serve: unknown option %s\n", a);
            serve_usage(stderr);
            return 2;
        }
#undef NEED
    }
    if (!ok) return 2;
    if ((draft_path != NULL) + (lookup_n > 0) + mtp > 1) {
        fprintf(stderr, "braid serve: --draft-model, --lookup and --mtp are exclusive defaults (a request may still "
                        "ask for another with \"speculative\")\n");
        return 2;
    }
    /* the MTP head was trained for the next token only: one draft per step unless --draft-n says otherwise */
    const int32_t mtp_n = draft_n_set ? draft_n : 1;
    char def[4096];
    if (!model_path) {
        if (!tool_default_model_path(def, sizeof def)) return 1;
        model_path = def;
    }
    braid_model_params mp = braid_model_default_params();
    braid_model *model = NULL;
    braid_status st = braid_model_load(model_path, &mp, &model);
    if (st != BRAID_OK) {
        fprintf(stderr, "braid serve: %s: %s\n", model_path, braid_last_error());
        return 1;
    }
    braid_mmproj *mm = NULL;
    if (img.mmproj && !img_load_mmproj("serve", &img, model, n_threads, &mm)) {
        braid_model_free(model);
        return 1;
    }
    cfg.mmproj = mm;
    braid_context_params cp = braid_context_default_params();
    cfg.cache_ram = (uint64_t)cache_mib << 20;
    cfg.cache_entries = cache_entries > 0 ? cache_entries : 4 * cfg.parallel;
    if (cfg.parallel + cfg.cache_entries > (int)BRAID_MAX_SEQ) cfg.cache_entries = (int)BRAID_MAX_SEQ - cfg.parallel;
    if (cfg.cache_entries < 1) cfg.cache_ram = 0;
    uint64_t cells = (uint64_t)cfg.ctx_per_slot * (uint64_t)cfg.parallel;
    /* the cache's cells come from the same pool: as many again as the slots (it evicts to leave the slots
     * room), within what a context can have */
    if (cfg.cache_ram && cells <= BRAID_MAX_CTX) cells = cells * 2 > BRAID_MAX_CTX ? BRAID_MAX_CTX : cells * 2;
    if (cells > BRAID_MAX_CTX) {
        fprintf(stderr, "braid serve: %d slots x %d tokens is more than %u cells\n", cfg.parallel, cfg.ctx_per_slot,
                BRAID_MAX_CTX);
        braid_mmproj_free(mm);
        braid_model_free(model);
        return 2;
    }
    cp.n_ctx = (uint32_t)cells;
    cp.n_seq_max = (uint32_t)(cfg.parallel + (cfg.cache_ram ? cfg.cache_entries : 0));
    cp.checkpoint_budget_bytes += cfg.cache_ram; /* the cache's checkpoints are the context's too */
    cp.n_batch = (uint32_t)n_batch;
    cp.n_threads = (uint32_t)n_threads;
    cp.checkpoint_interval = (uint32_t)interval;
    /* Rejected drafts are dropped through the rollback buffer, which must cover a verify batch (draft_n + 1
     * rows). The default context keeps 8 states per sequence; only a server that speculates by default pays
     * for more. */
    if ((draft_path || lookup_n) && cp.n_rollback < (uint32_t)draft_n + 1) cp.n_rollback = (uint32_t)draft_n + 1;
    if (mtp && cp.n_rollback < (uint32_t)mtp_n + 1) cp.n_rollback = (uint32_t)mtp_n + 1;
    cfg.draft_n = draft_n;
    cfg.draft_n_max = (int32_t)cp.n_rollback - 1;
    cfg.lookup_n = lookup_n;
    cfg.mtp = mtp;
    cfg.mtp_n = mtp_n;
    braid_context *ctx = NULL;
    st = braid_context_new(model, &cp, &ctx);
    if (st != BRAID_OK) {
        fprintf(stderr, "braid serve: context: %s\n", braid_last_error());
        braid_mmproj_free(mm);
        braid_model_free(model);
        return 1;
    }
    {
        /* whether requests may draft with the model's MTP head: a generator that asks for it says */
        braid_gen_params gp = braid_gen_default_params();
        gp.mtp = 1;
        gp.draft_n = 1;
        braid_gen *probe = NULL;
        cfg.mtp_ok = braid_gen_new(ctx, &gp, &probe) == BRAID_OK;
        braid_gen_free(probe);
        if (mtp && !cfg.mtp_ok) {
            fprintf(stderr, "braid serve: --mtp: %s\n", braid_last_error());
            braid_context_free(ctx);
            braid_mmproj_free(mm);
            braid_model_free(model);
            return 1;
        }
    }
    braid_model *draft_model = NULL;
    braid_context *draft_ctx = NULL;
    if (draft_path) {
        /* the draft's context: sequence i is slot i's (the prompt cache's entries are the target's only; a
         * slot's draft sequence catches up on whatever its target sequence holds) */
        st = braid_model_load(draft_path, &mp, &draft_model);
        if (st == BRAID_OK && braid_model_n_vocab(draft_model) != braid_model_n_vocab(model))
            st = BRAID_E_MISMATCH;
        if (st == BRAID_OK) {
            braid_context_params dp = braid_context_default_params();
            dp.n_ctx = (uint32_t)((uint64_t)cfg.ctx_per_slot * (uint64_t)cfg.parallel);
            dp.n_seq_max = (uint32_t)cfg.parallel;
            dp.n_batch = (uint32_t)n_batch;
            dp.n_threads = (uint32_t)n_threads;
            dp.checkpoint_interval = (uint32_t)interval;
            st = braid_context_new(draft_model, &dp, &draft_ctx);
        }
        if (st != BRAID_OK) {
            if (st == BRAID_E_MISMATCH)
                fprintf(stderr, "braid serve: the draft model has %d tokens, the model %d: they must share the vocabulary\n",
                        braid_model_n_vocab(draft_model), braid_model_n_vocab(model));
            else
                fprintf(stderr, "braid serve: draft model %s: %s\n", draft_path, braid_last_error());
            braid_model_free(draft_model);
            braid_context_free(ctx);
            braid_model_free(model);
            return 1;
        }
        cfg.draft_ctx = draft_ctx;
    }
    /* the id /v1/models lists: the file's name without its folder */
    const char *base = strrchr(model_path, '/');
    cfg.model_id = base ? base + 1 : model_path;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    srv *s = NULL;
    if (!srv_start(&cfg, model, ctx, &s)) {
        braid_context_free(draft_ctx);
        braid_model_free(draft_model);
        braid_context_free(ctx);
        braid_mmproj_free(mm);
        braid_model_free(model);
        return 1;
    }
    fprintf(stderr, "braid serve: %s, %d slots x %d tokens, speculative %s (draft_n %d); listening on http://%s:%d\n",
            cfg.model_id, cfg.parallel, cfg.ctx_per_slot,
            draft_path ? "draft model" : lookup_n ? "lookup" : mtp ? "mtp" : "off by default", mtp ? mtp_n : draft_n,
            cfg.host, srv_port(s));
    fflush(stderr);
    while (!stop_flag) pause();
    fprintf(stderr, "braid serve: stopping\n");
    srv_stop(s);
    braid_context_free(draft_ctx);
    braid_model_free(draft_model);
    braid_context_free(ctx);
    braid_mmproj_free(mm);
    braid_model_free(model);
    for (int i = 0; i < SRV_MAX_KEYS; i++) free(key_store[i]);
    return 0;
}

BRAID_COMMAND(serve, cmd_serve, "OpenAI-compatible HTTP server (chat, completions, streaming, parallel slots)");
