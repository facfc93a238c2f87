/* cmd_run.c — `braid run`: generate a continuation of one prompt, a thin client of braid_gen (braid.h).
 *
 * Tokenize the prompt, hand it to braid_gen_prompt (decoded in n_batch chunks; a progress line on stderr when
 * there is more than one chunk), then braid_gen_run streams the text to stdout as whole UTF-8 characters. A
 * line of timings goes to stderr at the end. With --json nothing is streamed: one JSON object is printed
 * instead. --session FILE reuses a saved state for the prompt's shared prefix and saves it again after the
 * prompt and after the reply.
 *
 * Without -m the built-in default model is used: the small trained qwen35 in the tree's models/ (see
 * default_model.c and train/). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "braid.h"
#include "commands.h"
#include "gen_opts.h"
#include "image_prompt.h"
#include "tool_util.h"

static void run_usage(FILE *f) {
    fprintf(f, "usage: braid run [-m FILE] (-p PROMPT | -f FILE) [-n N] [options]\n"
               "  -p, --prompt TEXT     the prompt\n"
               "  -f, --file FILE       read the prompt from FILE\n"
               "  --no-bos              do not add the model's start-of-text token\n"
               "  (-c defaults to prompt + N, at least 4096 with --session; --json prints one object: prompt_tokens, tokens, text, stop,\n"
               "  timings, context_shifts, speculative, session_reused_tokens)\n");
    gen_opts_usage(f);
    img_opts_usage(f);
}

typedef struct {
    gen_opts g;
    img_opts img;
    const char *prompt, *prompt_file;
    int no_bos;
} run_opts;

/* Returns 0 on success, 2 on a usage error (already reported), -1 for --help. */
static int run_parse(int argc, char **argv, run_opts *o) {
    memset(o, 0, sizeof *o);
    gen_opts_init(&o->g);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return -1;
        if (!strcmp(a, "--no-bos")) {
            o->no_bos = 1;
            continue;
        }
        int r = gen_opts_parse("run", argc, argv, &i, &o->g);
        if (r < 0) return 2;
        if (r > 0) continue;
        r = img_opts_parse("run", argc, argv, &i, &o->img);
        if (r < 0) return 2;
        if (r > 0) continue;
        if ((!strcmp(a, "-p") || !strcmp(a, "--prompt") || !strcmp(a, "-f") || !strcmp(a, "--file")) &&
            i + 1 < argc) {
            if (a[1] == 'p' || a[2] == 'p') o->prompt = argv[++i];
            else o->prompt_file = argv[++i];
            continue;
        }
        fprintf(stderr, "braid run: unknown option or missing value: '%s'\n", a);
        return 2;
    }
    if (!o->prompt == !o->prompt_file) {
        fprintf(stderr, "braid run: give the prompt with exactly one of -p or -f\n");
        return 2;
    }
    if ((o->img.n_images || o->img.dump) && !o->img.mmproj) {
        fprintf(stderr, "braid run: --image and --dump-image-embd need --mmproj FILE\n");
        return 2;
    }
    return 0;
}

static int report(const char *what, braid_status s) {
    fprintf(stderr, "braid run: %s: %s: %s\n", what, braid_status_name(s), braid_last_error());
    return 1;
}

/* On a terminal the progress line is redrawn after every chunk; into a file or pipe, one line per tenth. */
typedef struct {
    int tty;
    int32_t next_line;
    double t0;
    int shown;
} progress;

static void show_progress(void *user, int32_t done, int32_t total) {
    progress *p = user;
    if (p->tty || done >= p->next_line || done == total) {
        double dt = tool_now_seconds() - p->t0;
        fprintf(stderr, "%sprompt: %d/%d tokens (%.1f tok/s)%s", p->tty ? "\r" : "", (int)done, (int)total,
                dt > 0 ? (double)done / dt : 0.0, p->tty ? "" : "\n");
        fflush(stderr);
        p->next_line = done + total / 10;
        p->shown = 1;
    }
}

static int print_json(const braid_gen *g, const braid_token *prompt, size_t n_prompt, const run_opts *o,
                      int session_reused) {
    const braid_gen_stats *st = braid_gen_get_stats(g);
    json_t *root = json_object(), *pt = json_array(), *gt = json_array(), *tm = json_object();
    if (!root || !pt || !gt || !tm) return report("json", BRAID_E_NOMEM);
    for (size_t i = 0; i < n_prompt; i++) json_array_append_new(pt, json_integer(prompt[i]));
    int32_t n_gen = 0;
    const braid_token *gen = braid_gen_tokens(g, &n_gen);
    for (int32_t i = 0; i < n_gen; i++) json_array_append_new(gt, json_integer(gen[i]));
    size_t len = 0;
    const char *text = braid_gen_text(g, &len);
    char *clean = tool_utf8_sanitize(text, len);
    json_object_set_new(root, "prompt_tokens", pt);
    json_object_set_new(root, "tokens", gt);
    json_object_set_new(root, "text", json_string(clean ? clean : ""));
    free(clean);
    json_object_set_new(root, "stop", json_string(st->stop));
    json_object_set_new(root, "context_shifts", json_integer(st->context_shifts));
    if (o->g.session) json_object_set_new(root, "session_reused_tokens", json_integer(session_reused));
    if (o->g.draft_model || o->g.lookup_n || o->g.mtp) {
        json_t *sp = json_object();
        json_object_set_new(sp, "drafted", json_integer(st->drafted));
        json_object_set_new(sp, "accepted", json_integer(st->accepted));
        json_object_set_new(sp, "replayed", json_integer(st->spec_replayed));
        json_object_set_new(root, "speculative", sp);
    }
    json_object_set_new(tm, "prompt_n", json_integer((json_int_t)n_prompt));
    json_object_set_new(tm, "prompt_decoded", json_integer(st->decoded_tokens));
    json_object_set_new(tm, "prompt_ms", json_real(st->prompt_ms));
    json_object_set_new(tm, "prompt_per_second",
                        json_real(st->prompt_ms > 0 ? st->decoded_tokens / (st->prompt_ms * 1e-3) : 0));
    json_object_set_new(tm, "ttft_ms", json_real(st->ttft_ms));
    json_object_set_new(tm, "predicted_n", json_integer(st->n_decodes));
    json_object_set_new(tm, "predicted_ms", json_real(st->gen_ms));
    json_object_set_new(tm, "predicted_per_second",
                        json_real(st->gen_ms > 0 ? st->n_decodes / (st->gen_ms * 1e-3) : 0));
    json_object_set_new(tm, "generated_per_second",
                        json_real(st->gen_ms > 0 ? st->n_generated / (st->gen_ms * 1e-3) : 0));
    json_object_set_new(root, "timings", tm);
    char *out = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!out) return report("json", BRAID_E_NOMEM);
    puts(out);
    free(out);
    fflush(stdout);
    return 0;
}

static int cmd_run(int argc, char **argv) {
    run_opts o;
    int pr = run_parse(argc, argv, &o);
    if (pr == -1) {
        run_usage(stdout);
        return 0;
    }
    if (pr) {
        run_usage(stderr);
        return pr;
    }
    char *prompt_buf = NULL;
    size_t prompt_len = 0;
    if (o.prompt_file) {
        if (!tool_read_file("run", o.prompt_file, &prompt_buf, &prompt_len)) return 1;
    } else {
        prompt_len = strlen(o.prompt);
    }
    const char *prompt = o.prompt_file ? prompt_buf : o.prompt;

    int rc = 1;
    gen_setup su;
    braid_gen *g = NULL;
    braid_token *toks = NULL;
    size_t n_toks = 0;
    braid_mmproj *mm = NULL;
    img_prompt ip;
    memset(&ip, 0, sizeof ip);
    const int with_images = o.img.mmproj != NULL;
    braid_status s = BRAID_OK;
    if (!gen_setup_models("run", &o.g, &su)) goto done;
    if (with_images) {
        if (!img_load_mmproj("run", &o.img, su.model, o.g.n_threads, &mm)) goto done;
        FILE *dump = o.img.dump ? fopen(o.img.dump, "wb") : NULL;
        if (o.img.dump && !dump) {
            fprintf(stderr, "braid run: cannot write %s\n", o.img.dump);
            goto done;
        }
        int ok = img_prompt_build("run", su.model, mm, prompt, prompt_len, o.img.images, o.img.n_images, !o.no_bos,
                                  dump, &ip);
        if (dump && fclose(dump) != 0 && ok) {
            fprintf(stderr, "braid run: cannot write %s\n", o.img.dump);
            ok = 0;
        }
        if (!ok) goto done;
        /* the text tokens, for --json's prompt_tokens */
        toks = malloc(((size_t)ip.n_inputs + 1) * sizeof *toks);
        if (!toks) {
            report("prompt", BRAID_E_NOMEM);
            goto done;
        }
        for (int32_t k = 0; k < ip.n_parts; k++)
            for (int32_t j = 0; j < ip.parts[k].n_tokens; j++) toks[n_toks++] = ip.parts[k].tokens[j];
        goto tokenized;
    }

    /* Tokenize: ask for the size first, then fill. */
    s = braid_tokenize(su.model, prompt, prompt_len, !o.no_bos, 1, NULL, 0, &n_toks);
    if (s != BRAID_OK && s != BRAID_E_RANGE) {
        report("tokenize", s);
        goto done;
    }
    toks = malloc((n_toks ? n_toks : 1) * sizeof *toks);
    if (!toks) {
        report("tokenize", BRAID_E_NOMEM);
        goto done;
    }
    s = braid_tokenize(su.model, prompt, prompt_len, !o.no_bos, 1, toks, n_toks, &n_toks);
    if (s != BRAID_OK) {
        report("tokenize", s);
        goto done;
    }
    if (n_toks == 0) {
        fprintf(stderr, "braid run: the prompt is empty (no tokens) and the model adds no start token\n");
        goto done;
    }
tokenized:;
    const size_t n_inputs = with_images ? (size_t)ip.n_inputs : n_toks;
    if (n_inputs == 0) {
        fprintf(stderr, "braid run: the prompt is empty\n");
        goto done;
    }
    int64_t want = (int64_t)n_inputs + o.g.n_predict;
    if (o.g.session && want < 4096) want = 4096; /* room for what an earlier run saved, not just this prompt */
    uint32_t n_ctx = (uint32_t)(o.g.n_ctx ? o.g.n_ctx : (want < 16 ? 16 : want > INT32_MAX / 2 ? INT32_MAX / 2 : want));
    if (n_inputs > n_ctx && (!o.g.ctx_shift || with_images)) {
        fprintf(stderr, "braid run: the prompt has %zu inputs, more than the context (%u); raise --ctx\n", n_inputs,
                n_ctx);
        goto done;
    }
    if (!gen_setup_contexts("run", &o.g, n_ctx, &su)) goto done;

    int session_ok = 1, session_reused = 0;
    if (o.g.session) session_ok = gen_session_load("run", su.ctx, o.g.session) >= 0;
    braid_gen_params gp = gen_opts_params(&o.g, &su);
    progress prog = {.tty = isatty(STDERR_FILENO), .t0 = tool_now_seconds()};
    if (n_inputs > (size_t)o.g.n_batch) {
        gp.on_progress = show_progress;
        gp.progress_user = &prog;
    }
    if (!o.g.json) gp.on_piece = gen_put_piece;
    s = braid_gen_new(su.ctx, &gp, &g);
    if (s != BRAID_OK) {
        report("generator", s);
        goto done;
    }
    s = with_images ? braid_gen_prompt_parts(g, ip.parts, ip.n_parts) : braid_gen_prompt(g, toks, (int32_t)n_toks);
    if (prog.shown && prog.tty) fputc('\n', stderr);
    if (s != BRAID_OK) {
        report("decoding the prompt", s);
        goto done;
    }
    const braid_gen_stats *st = braid_gen_get_stats(g);
    session_reused = st->reused_tokens;
    if (o.g.session && session_ok) gen_session_save("run", su.ctx, o.g.session);
    if (o.g.n_predict > 0) {
        s = braid_gen_run(g);
        if (!o.g.json) {
            fputc('\n', stdout);
            fflush(stdout);
        }
        if (s != BRAID_OK) {
            report("generating", s);
            goto done;
        }
        if (o.g.session && session_ok) gen_session_save("run", su.ctx, o.g.session);
    }
    if (o.g.json && print_json(g, toks, n_toks, &o, session_reused)) goto done;
    fprintf(stderr,
            "prompt: %zu tokens (%d decoded) in %.1f ms (%.2f tok/s) | generation: %d tokens, %d decodes in %.1f ms "
            "(%.2f tok/s) | stop: %s",
            n_inputs, (int)st->decoded_tokens, st->prompt_ms,
            st->prompt_ms > 0 ? st->decoded_tokens / (st->prompt_ms * 1e-3) : 0.0, (int)st->n_generated,
            (int)st->n_decodes, st->gen_ms, st->gen_ms > 0 ? st->n_generated / (st->gen_ms * 1e-3) : 0.0,
            st->stop[0] ? st->stop : "length");
    if (st->context_shifts) fprintf(stderr, " | context shifts: %d", (int)st->context_shifts);
    if (gp.draft || gp.lookup_n || gp.mtp)
        fprintf(stderr, " | drafted %d, accepted %d, replayed %d", (int)st->drafted, (int)st->accepted,
                (int)st->spec_replayed);
    if (o.g.session) fprintf(stderr, " | session reused %d", session_reused);
    fputc('\n', stderr);
    rc = 0;
done:
    braid_gen_free(g);
    img_prompt_free(&ip);
    braid_mmproj_free(mm);
    gen_setup_free(&su);
    free(toks);
    free(prompt_buf);
    return rc;
}

BRAID_COMMAND(run, cmd_run, "generate text from a prompt (-m FILE -p PROMPT -n N)")
