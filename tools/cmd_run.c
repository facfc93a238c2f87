/* cmd_run.c — `braid run`: generate a continuation of one prompt.
 *
 * Tokenize the prompt, decode it in n_batch chunks (a progress line on stderr when there is more than one
 * chunk), then sample and decode one token at a time until an end-of-generation token or -n tokens, streaming
 * the text to stdout as it comes. A token's bytes may end in the middle of a UTF-8 character (byte-level BPE
 * splits them), so the stream holds back an incomplete tail until the next token completes it. A line of
 * timings goes to stderr at the end. With --json nothing is streamed: one JSON object is printed instead.
 *
 * Without -m the built-in default model is used: a random-weight qwen35 file written once by the gen-model
 * code into ~/.cache/braid/models/ (see default_model.c) and reused afterwards. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "braid.h"
#include "commands.h"
#include "default_model.h"

typedef struct {
    const char *model;
    const char *prompt;
    const char *prompt_file;
    int32_t n_predict;
    int32_t n_threads; /* 0: braid's default */
    int32_t n_ctx;     /* 0: prompt + n_predict */
    int32_t n_batch;
    int json;
    int no_bos;
    braid_sampler_params sp;
} run_opts;

static void run_usage(FILE *f) {
    fprintf(f,
            "usage: braid run [-m FILE] (-p PROMPT | -f FILE) [-n N] [options]\n"
            "  -m, --model FILE      GGUF model (default: the built-in qwen35 model, generated once into\n"
            "                        ~/.cache/braid/models/)\n"
            "  -p, --prompt TEXT     the prompt\n"
            "  -f, --file FILE       read the prompt from FILE\n"
            "  -n, --n-predict N     generate at most N tokens (default 128)\n"
            "  --temp T              temperature, <= 0 for greedy (default 0.8)\n"
            "  --top-k K             keep the K best tokens, <= 0 off (default 40)\n"
            "  --top-p P             nucleus sampling, 1 off (default 0.95)\n"
            "  --min-p P             drop tokens under P x the best one's probability, 0 off (default 0.05)\n"
            "  --repeat-penalty R    penalty on recently seen tokens, 1 off (default 1)\n"
            "  --repeat-last-n N     how many recent tokens the penalty looks at (default 64)\n"
            "  --frequency-penalty F, --presence-penalty F   (default 0)\n"
            "  --seed S              random seed (default: from the clock)\n"
            "  -t, --threads N       compute threads (default: all online cores)\n"
            "  -c, --ctx N           context size in tokens (default: prompt + N)\n"
            "  -b, --batch N         prompt tokens decoded per step (default 512)\n"
            "  --no-bos              do not add the model's start-of-text token\n"
            "  --json                print one JSON object (prompt_tokens, tokens, text, timings) instead\n"
            "                        of streaming text\n");
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int parse_i32(const char *opt, const char *s, int32_t lo, int32_t hi, int32_t *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "braid run: %s wants an integer in [%ld, %ld], got '%s'\n", opt, (long)lo, (long)hi, s);
        return 0;
    }
    *out = (int32_t)v;
    return 1;
}

static int parse_f32(const char *opt, const char *s, float *out) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || !isfinite(v)) {
        fprintf(stderr, "braid run: %s wants a number, got '%s'\n", opt, s);
        return 0;
    }
    *out = v;
    return 1;
}

static int parse_u64(const char *opt, const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end || s[0] == '-') {
        fprintf(stderr, "braid run: %s wants a non-negative integer, got '%s'\n", opt, s);
        return 0;
    }
    *out = (uint64_t)v;
    return 1;
}

/* Returns 0 on success, 2 on a usage error (already reported), -1 for --help. */
static int run_parse(int argc, char **argv, run_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_predict = 128;
    o->n_batch = 512;
    o->sp = braid_sampler_default_params();
    o->sp.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return -1;
        if (!strcmp(a, "--json")) {
            o->json = 1;
            continue;
        }
        if (!strcmp(a, "--no-bos")) {
            o->no_bos = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "braid run: unknown option or missing value: '%s'\n", a);
            return 2;
        }
        const char *v = argv[++i];
        int ok = 1;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) o->prompt = v;
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) o->prompt_file = v;
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) ok = parse_i32(a, v, 0, INT32_MAX / 2, &o->n_predict);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) ok = parse_i32(a, v, 1, 1024, &o->n_threads);
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) ok = parse_i32(a, v, 1, INT32_MAX / 2, &o->n_ctx);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch")) ok = parse_i32(a, v, 1, 1 << 20, &o->n_batch);
        else if (!strcmp(a, "--temp")) ok = parse_f32(a, v, &o->sp.temperature);
        else if (!strcmp(a, "--top-k")) ok = parse_i32(a, v, INT32_MIN, INT32_MAX, &o->sp.top_k);
        else if (!strcmp(a, "--top-p")) ok = parse_f32(a, v, &o->sp.top_p);
        else if (!strcmp(a, "--min-p")) ok = parse_f32(a, v, &o->sp.min_p);
        else if (!strcmp(a, "--repeat-penalty")) ok = parse_f32(a, v, &o->sp.repeat_penalty);
        else if (!strcmp(a, "--repeat-last-n")) ok = parse_i32(a, v, 0, 1 << 20, &o->sp.penalty_last_n);
        else if (!strcmp(a, "--frequency-penalty")) ok = parse_f32(a, v, &o->sp.frequency_penalty);
        else if (!strcmp(a, "--presence-penalty")) ok = parse_f32(a, v, &o->sp.presence_penalty);
        else if (!strcmp(a, "--seed")) ok = parse_u64(a, v, &o->sp.seed);
        else {
            fprintf(stderr, "braid run: unknown option '%s'\n", a);
            return 2;
        }
        if (!ok) return 2;
    }
    if (!o->prompt == !o->prompt_file) {
        fprintf(stderr, "braid run: give the prompt with exactly one of -p or -f\n");
        return 2;
    }
    return 0;
}

/* Reads a whole file; *out is malloc'd (caller frees), NUL-terminated. */
static int read_file(const char *path, char **out, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "braid run: cannot open %s: %s\n", path, strerror(errno));
        return 0;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) break;
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf || err) {
        fprintf(stderr, "braid run: cannot read %s\n", path);
        free(buf);
        return 0;
    }
    buf[n] = 0;
    *out = buf;
    *len = n;
    return 1;
}

/* ---- UTF-8 ------------------------------------------------------------------------------------------------ */

/* Length of the longest prefix of s[0..n) that does not end inside a UTF-8 character still being completed:
 * a lead byte followed by fewer continuation bytes than it announces is held back. Bytes that cannot start or
 * continue a character are let through (they will never become valid). */
static size_t utf8_stream_prefix(const unsigned char *s, size_t n) {
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        unsigned char c = s[n - back];
        if ((c & 0xC0) == 0x80) continue; /* continuation byte: look further back for its lead */
        size_t need = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
        return back < need ? n - back : n;
    }
    return n;
}

/* Length of the valid UTF-8 character at s[0..n), or 0 if it is not one (bad lead, bad continuation, overlong,
 * surrogate, above U+10FFFF, or cut short). */
static size_t utf8_char_len(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07;
    else return 0;
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

/* A valid UTF-8 copy of s[0..n) with each invalid byte replaced by U+FFFD (JSON strings must be valid
 * UTF-8; a random-weight model happily emits half characters). Caller frees; NULL on allocation failure. */
static char *utf8_sanitize(const char *s, size_t n) {
    char *out = malloc(n * 3 + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t l = utf8_char_len((const unsigned char *)s + i, n - i);
        if (l) {
            memcpy(out + o, s + i, l);
            o += l;
            i += l;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    out[o] = 0;
    return out;
}

/* ---- the run ---------------------------------------------------------------------------------------------- */

typedef struct {
    braid_token *prompt; /* [n_prompt] */
    size_t n_prompt;
    braid_token *gen; /* [n_predict] generated ids */
    int32_t n_gen;
    double t_prompt, t_gen; /* seconds */
    int32_t n_gen_eval;     /* generated tokens fed back through braid_decode (timed in t_gen) */
    const char *stop;       /* "eog", "length", "context" */
} run_result;

/* Streams bytes to stdout, holding back an incomplete UTF-8 tail. */
typedef struct {
    char buf[256]; /* pending bytes; a held-back tail is at most 3 bytes, the rest is flushed at once */
    size_t n;
} stream_out;

static void stream_put(stream_out *st, const char *p, size_t n, int final) {
    while (n > 0 || (final && st->n > 0)) {
        size_t take = sizeof st->buf - st->n;
        if (take > n) take = n;
        memcpy(st->buf + st->n, p, take);
        st->n += take;
        p += take;
        n -= take;
        size_t ok = final && n == 0 ? st->n : utf8_stream_prefix((const unsigned char *)st->buf, st->n);
        fwrite(st->buf, 1, ok, stdout);
        memmove(st->buf, st->buf + ok, st->n - ok);
        st->n -= ok;
        if (final && n == 0) break;
    }
    fflush(stdout);
}

static int report(const char *what, braid_status s) {
    fprintf(stderr, "braid run: %s: %s: %s\n", what, braid_status_name(s), braid_last_error());
    return 1;
}

/* Decodes the prompt in n_batch chunks; only the last input of the last chunk asks for logits. */
static int run_prompt(braid_context *ctx, const run_opts *o, run_result *r) {
    uint8_t *flags = calloc((size_t)o->n_batch, 1);
    if (!flags) return report("prompt", BRAID_E_NOMEM);
    /* On a terminal the line is redrawn after every chunk; into a file or pipe, one line per tenth. */
    int progress = r->n_prompt > (size_t)o->n_batch, tty = isatty(STDERR_FILENO);
    size_t next_line = 0;
    double t0 = now_seconds();
    for (size_t i = 0; i < r->n_prompt; i += (size_t)o->n_batch) {
        size_t n = r->n_prompt - i < (size_t)o->n_batch ? r->n_prompt - i : (size_t)o->n_batch;
        int last = i + n == r->n_prompt;
        flags[n - 1] = (uint8_t)last;
        braid_batch b = {.n_tokens = (int32_t)n, .token = r->prompt + i, .logits = flags};
        braid_status s = braid_decode(ctx, &b);
        flags[n - 1] = 0;
        if (s != BRAID_OK) {
            if (progress) fputc('\n', stderr);
            free(flags);
            return report("decoding the prompt", s);
        }
        if (progress && (tty || i + n >= next_line || last)) {
            double dt = now_seconds() - t0;
            fprintf(stderr, "%sprompt: %zu/%zu tokens (%.1f tok/s)%s", tty ? "\r" : "", i + n, r->n_prompt,
                    (double)(i + n) / dt, tty ? "" : "\n");
            fflush(stderr);
            next_line = i + n + r->n_prompt / 10;
        }
    }
    if (progress && tty) fputc('\n', stderr);
    r->t_prompt = now_seconds() - t0;
    free(flags);
    return 0;
}

static int run_generate(const braid_model *model, braid_context *ctx, const run_opts *o, int32_t n_ctx,
                        run_result *r) {
    braid_sampler *smp = NULL;
    braid_status s = braid_sampler_new(&o->sp, &smp);
    if (s != BRAID_OK) return report("sampler", s);
    /* The prompt feeds the repetition penalties as llama.cpp's does. */
    for (size_t i = 0; i < r->n_prompt; i++) braid_sampler_accept(smp, r->prompt[i]);
    int32_t n_vocab = braid_model_n_vocab(model);
    stream_out st = {.n = 0};
    char piece[256];
    int32_t logit_row = (int32_t)((r->n_prompt - 1) % (size_t)o->n_batch);
    int rc = 0;
    r->stop = "length";
    double t0 = now_seconds();
    while (r->n_gen < o->n_predict) {
        const float *logits = braid_logits(ctx, logit_row);
        if (!logits) {
            fprintf(stderr, "braid run: no logits for row %d\n", (int)logit_row);
            rc = 1;
            break;
        }
        braid_token t;
        s = braid_sampler_sample(smp, logits, n_vocab, &t);
        if (s != BRAID_OK) {
            rc = report("sampling", s);
            break;
        }
        if (braid_token_is_eog(model, t)) {
            r->stop = "eog";
            break;
        }
        braid_sampler_accept(smp, t);
        r->gen[r->n_gen++] = t;
        if (!o->json) {
            size_t len = 0;
            s = braid_token_to_piece(model, t, 0, piece, sizeof piece, &len);
            if (s != BRAID_OK) {
                rc = report("token to text", s);
                break;
            }
            if (len > sizeof piece) { /* a very long piece: fetch it whole */
                char *big = malloc(len);
                if (big && braid_token_to_piece(model, t, 0, big, len, &len) == BRAID_OK)
                    stream_put(&st, big, len, 0);
                free(big);
            } else {
                stream_put(&st, piece, len, 0);
            }
        }
        if (r->n_gen == o->n_predict) break; /* the last token needs no decode */
        if ((int64_t)r->n_prompt + r->n_gen >= n_ctx) {
            r->stop = "context";
            break;
        }
        braid_batch b = {.n_tokens = 1, .token = &t};
        s = braid_decode(ctx, &b);
        if (s != BRAID_OK) {
            rc = report("decoding", s);
            break;
        }
        r->n_gen_eval++;
        /* Generation time spans n_gen_eval (sample, decode) steps: it stops at the last decode, so the final
         * sample (or the end-of-generation token) is not counted against a decode that did not happen. */
        r->t_gen = now_seconds() - t0;
        logit_row = 0;
    }
    if (!o->json) {
        stream_put(&st, "", 0, 1);
        fputc('\n', stdout);
        fflush(stdout);
    }
    braid_sampler_free(smp);
    return rc;
}

static int run_print_json(const braid_model *model, const run_result *r) {
    json_t *root = json_object(), *pt = json_array(), *gt = json_array(), *tm = json_object();
    if (!root || !pt || !gt || !tm) return report("json", BRAID_E_NOMEM);
    for (size_t i = 0; i < r->n_prompt; i++) json_array_append_new(pt, json_integer(r->prompt[i]));
    for (int32_t i = 0; i < r->n_gen; i++) json_array_append_new(gt, json_integer(r->gen[i]));
    char *text = NULL;
    size_t len = 0;
    braid_status s = braid_detokenize(model, r->gen, (size_t)r->n_gen, 0, &text, &len);
    if (s != BRAID_OK) {
        json_decref(root);
        json_decref(pt);
        json_decref(gt);
        json_decref(tm);
        return report("detokenize", s);
    }
    char *clean = utf8_sanitize(text, len);
    braid_free(text);
    json_object_set_new(root, "prompt_tokens", pt);
    json_object_set_new(root, "tokens", gt);
    json_object_set_new(root, "text", json_string(clean ? clean : ""));
    free(clean);
    json_object_set_new(root, "stop", json_string(r->stop));
    json_object_set_new(tm, "prompt_n", json_integer((json_int_t)r->n_prompt));
    json_object_set_new(tm, "prompt_ms", json_real(r->t_prompt * 1e3));
    json_object_set_new(tm, "prompt_per_second", json_real(r->t_prompt > 0 ? (double)r->n_prompt / r->t_prompt : 0));
    json_object_set_new(tm, "predicted_n", json_integer(r->n_gen_eval));
    json_object_set_new(tm, "predicted_ms", json_real(r->t_gen * 1e3));
    json_object_set_new(tm, "predicted_per_second",
                        json_real(r->t_gen > 0 ? (double)r->n_gen_eval / r->t_gen : 0));
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
        if (!read_file(o.prompt_file, &prompt_buf, &prompt_len)) return 1;
    } else {
        prompt_len = strlen(o.prompt);
    }
    const char *prompt = o.prompt_file ? prompt_buf : o.prompt;

    char default_path[4096];
    if (!o.model) {
        if (!tool_default_model_path(default_path, sizeof default_path)) {
            free(prompt_buf);
            return 1;
        }
        o.model = default_path;
    }

    int rc = 1;
    braid_model *model = NULL;
    braid_context *ctx = NULL;
    run_result r;
    memset(&r, 0, sizeof r);
    braid_model_params mp = braid_model_default_params();
    braid_status s = braid_model_load(o.model, &mp, &model);
    if (s != BRAID_OK) {
        fprintf(stderr, "braid run: cannot load %s: %s: %s\n", o.model, braid_status_name(s), braid_last_error());
        goto done;
    }

    /* Tokenize: ask for the size first, then fill. */
    int add_bos = !o.no_bos;
    s = braid_tokenize(model, prompt, prompt_len, add_bos, 1, NULL, 0, &r.n_prompt);
    if (s != BRAID_OK && s != BRAID_E_RANGE) {
        report("tokenize", s);
        goto done;
    }
    r.prompt = malloc((r.n_prompt ? r.n_prompt : 1) * sizeof *r.prompt);
    r.gen = malloc(((size_t)o.n_predict + 1) * sizeof *r.gen);
    if (!r.prompt || !r.gen) {
        report("tokenize", BRAID_E_NOMEM);
        goto done;
    }
    s = braid_tokenize(model, prompt, prompt_len, add_bos, 1, r.prompt, r.n_prompt, &r.n_prompt);
    if (s != BRAID_OK) {
        report("tokenize", s);
        goto done;
    }
    if (r.n_prompt == 0) {
        fprintf(stderr, "braid run: the prompt is empty (no tokens) and the model adds no start token\n");
        goto done;
    }

    braid_context_params cp = braid_context_default_params();
    int64_t want_ctx = (int64_t)r.n_prompt + o.n_predict;
    cp.n_ctx = (uint32_t)(o.n_ctx ? o.n_ctx : (want_ctx < 16 ? 16 : want_ctx > INT32_MAX ? INT32_MAX : want_ctx));
    if (r.n_prompt > cp.n_ctx) {
        fprintf(stderr, "braid run: the prompt has %zu tokens, more than the context (%u); raise --ctx\n",
                r.n_prompt, cp.n_ctx);
        goto done;
    }
    cp.n_batch = (uint32_t)o.n_batch;
    if (o.n_threads) cp.n_threads = (uint32_t)o.n_threads;
    s = braid_context_new(model, &cp, &ctx);
    if (s != BRAID_OK) {
        report("context", s);
        goto done;
    }

    if (run_prompt(ctx, &o, &r)) goto done;
    if (o.n_predict > 0 && run_generate(model, ctx, &o, (int32_t)cp.n_ctx, &r)) goto done;
    if (o.json && run_print_json(model, &r)) goto done;
    fprintf(stderr,
            "prompt: %zu tokens in %.1f ms (%.2f tok/s) | generation: %d tokens, %d decodes in %.1f ms (%.2f tok/s)"
            " | stop: %s\n",
            r.n_prompt, r.t_prompt * 1e3, r.t_prompt > 0 ? (double)r.n_prompt / r.t_prompt : 0.0, (int)r.n_gen,
            (int)r.n_gen_eval, r.t_gen * 1e3, r.t_gen > 0 ? (double)r.n_gen_eval / r.t_gen : 0.0,
            r.stop ? r.stop : "length");
    rc = 0;
done:
    braid_context_free(ctx);
    braid_model_free(model);
    free(r.prompt);
    free(r.gen);
    free(prompt_buf);
    return rc;
}

BRAID_COMMAND(run, cmd_run, "generate text from a prompt (-m FILE -p PROMPT -n N)")
