/* cmd_chat.c — `braid chat`: multi-turn chat on braid_gen, each turn computing only what is new.
 *
 * Every turn the whole conversation is rendered again with the model's chat template (chat_render.c) and
 * tokenized, and braid_gen_prompt keeps the longest prefix the memory already holds: a checkpoint closes every prompt and every reply, so when a
 * template rewrites an earlier turn the memory goes back to the nearest checkpoint and replays at most one
 * checkpoint interval, never the whole conversation. Replies stream to stdout.
 *
 * On a terminal lines are read with libedit (history, editing) and /save FILE, /load FILE, /reset, /stats are
 * commands. When standard input is not a terminal each line is one user turn (commands work too); with
 * --json every turn prints one JSON object instead of the streamed reply:
 *   {"turn", "prompt_tokens", "reused_tokens", "decoded_tokens", "ttft_ms", "text"} (+ "replayed_tokens").
 * /save FILE writes the conversation to FILE (JSON) and the memory to FILE.state; /load FILE reads both back
 * (if the state is refused, the conversation is kept and the next turn recomputes what it needs). */
#include <editline/readline.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "braid.h"
#include "chat_render.h"
#include "commands.h"
#include "gen_opts.h"
#include "image_prompt.h"
#include "tool_util.h"

static void chat_usage(FILE *f) {
    fprintf(f, "usage: braid chat [-m FILE] [--system TEXT] [options]\n"
               "  --system TEXT         the system message\n"
               "  --chat-template-file FILE   render with this Jinja template instead of the model's\n"
               "  --chat-template-kwargs JSON extra template variables, e.g. '{\"enable_thinking\": false}'\n"
               "  (-n is the most tokens per reply; -c defaults to 4096; --json prints one object per turn)\n"
               "  commands: /save FILE, /load FILE, /reset, /stats, /quit, /image FILE (with --mmproj: the image\n"
               "  goes into the next message)\n");
    gen_opts_usage(f);
    img_opts_usage(f);
}

typedef struct {
    gen_opts g;
    img_opts img;
    const char *system;
    const char *template_file; /* --chat-template-file */
    const char *kwargs;        /* --chat-template-kwargs */
} chat_opts;

typedef struct {
    chat_msg *msgs;
    size_t n, cap;
} convo;

static int convo_add(convo *c, const char *role, const char *content, size_t len) {
    if (c->n == c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 16;
        chat_msg *nm = realloc(c->msgs, nc * sizeof *nm);
        if (!nm) return 0;
        c->msgs = nm;
        c->cap = nc;
    }
    chat_msg *m = &c->msgs[c->n];
    m->role = strdup(role);
    m->content = strndup(content, len);
    if (!m->role || !m->content) {
        free(m->role);
        free(m->content);
        return 0;
    }
    c->n++;
    return 1;
}

static void convo_truncate(convo *c, size_t n) {
    while (c->n > n) {
        c->n--;
        free(c->msgs[c->n].role);
        free(c->msgs[c->n].content);
    }
}

typedef struct {
    gen_setup su;
    braid_gen *g;
    convo cv;
    chat_opts o;
    chat_template tmpl;
    int turn;
    int session_ok;
    braid_token *toks;
    size_t cap_toks;
    /* images (--mmproj): the conversation's, in the order of their markers, and those for the next message */
    braid_mmproj *mm;
    char *images[IMG_MAX];
    int n_images, n_pending;
} chat;

static int fail(const char *what, braid_status s) {
    fprintf(stderr, "braid chat: %s: %s: %s\n", what, braid_status_name(s), braid_last_error());
    return 0;
}

/* Renders and tokenizes the conversation (with the assistant's opening) into ch->toks. */
static int tokenize_convo(chat *ch, size_t *n_toks) {
    char *text = NULL;
    size_t len = 0;
    if (!chat_render(&ch->tmpl, ch->su.model, ch->cv.msgs, ch->cv.n, 1, &text, &len)) return 0;
    size_t n = 0;
    braid_status s = braid_tokenize(ch->su.model, text, len, 0, 1, ch->toks, ch->cap_toks, &n);
    if (s == BRAID_E_RANGE) {
        braid_token *nt = realloc(ch->toks, (n + 16) * sizeof *nt);
        if (!nt) {
            free(text);
            return fail("tokenize", BRAID_E_NOMEM);
        }
        ch->toks = nt;
        ch->cap_toks = n + 16;
        s = braid_tokenize(ch->su.model, text, len, 0, 1, ch->toks, ch->cap_toks, &n);
    }
    free(text);
    if (s != BRAID_OK) return fail("tokenize", s);
    *n_toks = n;
    return 1;
}

static int print_turn_json(chat *ch, const char *text, size_t len) {
    const braid_gen_stats *st = braid_gen_get_stats(ch->g);
    json_t *o = json_object();
    char *clean = tool_utf8_sanitize(text, len);
    if (!o || !clean) {
        json_decref(o);
        free(clean);
        return fail("json", BRAID_E_NOMEM);
    }
    json_object_set_new(o, "turn", json_integer(ch->turn));
    json_object_set_new(o, "prompt_tokens", json_integer(st->prompt_tokens));
    json_object_set_new(o, "reused_tokens", json_integer(st->reused_tokens));
    json_object_set_new(o, "decoded_tokens", json_integer(st->decoded_tokens));
    json_object_set_new(o, "replayed_tokens", json_integer(st->replayed_tokens));
    json_object_set_new(o, "ttft_ms", json_real(st->ttft_ms));
    json_object_set_new(o, "reply_tokens", json_integer(st->n_generated));
    json_object_set_new(o, "text", json_string(clean));
    free(clean);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!s) return fail("json", BRAID_E_NOMEM);
    puts(s);
    free(s);
    fflush(stdout);
    return 1;
}

/* The conversation with its images as prompt parts (the images' rows come from the projector's cache after
 * the first time), decoded by braid_gen_prompt_parts: the common prefix includes earlier images. */
static braid_status prompt_with_images(chat *ch) {
    char *text = NULL;
    size_t len = 0;
    if (!chat_render(&ch->tmpl, ch->su.model, ch->cv.msgs, ch->cv.n, 1, &text, &len)) return BRAID_E_FORMAT;
    img_prompt ip;
    int ok = img_prompt_build("chat", ch->su.model, ch->mm, text, len, (const char *const *)ch->images, ch->n_images,
                              0, NULL, &ip);
    free(text);
    if (!ok) return BRAID_E_INVALID;
    braid_status s = braid_gen_prompt_parts(ch->g, ip.parts, ip.n_parts);
    img_prompt_free(&ip);
    if (s != BRAID_OK) fail("decoding the prompt", s);
    return s;
}

/* One user turn: render, reuse, decode, reply. */
static int do_turn(chat *ch, const char *line) {
    size_t keep = ch->cv.n;
    int keep_images = ch->n_images - ch->n_pending;
    /* the images given with /image go before the text of this message */
    size_t ml = strlen(IMG_MARKER), ll = strlen(line);
    char *content = malloc((size_t)ch->n_pending * ml + ll + 1);
    if (!content) return fail("turn", BRAID_E_NOMEM);
    for (int i = 0; i < ch->n_pending; i++) memcpy(content + (size_t)i * ml, IMG_MARKER, ml);
    memcpy(content + (size_t)ch->n_pending * ml, line, ll + 1);
    ch->n_pending = 0;
    int added = convo_add(&ch->cv, "user", content, strlen(content));
    free(content);
    size_t n = 0;
    braid_status s;
    if (!added) {
        fail("turn", BRAID_E_NOMEM);
        goto undo;
    }
    if (ch->mm) {
        if (prompt_with_images(ch) != BRAID_OK) goto undo;
        s = BRAID_OK;
    } else {
        if (!tokenize_convo(ch, &n)) goto undo;
        s = braid_gen_prompt(ch->g, ch->toks, (int32_t)n);
    }
    if (s != BRAID_OK) {
        fail("decoding the prompt", s);
        goto undo;
    }
    if (ch->o.g.session && ch->session_ok) gen_session_save("chat", ch->su.ctx, ch->o.g.session);
    s = braid_gen_run(ch->g);
    if (!ch->o.g.json) {
        fputc('\n', stdout);
        fflush(stdout);
    }
    if (s != BRAID_OK) {
        fail("generating", s);
        goto undo;
    }
    ch->turn++;
    size_t len = 0;
    const char *text = braid_gen_text(ch->g, &len);
    if (!convo_add(&ch->cv, "assistant", text, len)) {
        fail("turn", BRAID_E_NOMEM);
        goto undo;
    }
    if (ch->o.g.session && ch->session_ok) gen_session_save("chat", ch->su.ctx, ch->o.g.session);
    if (ch->o.g.json) return print_turn_json(ch, text, len);
    return 1;
undo:
    convo_truncate(&ch->cv, keep); /* the memory may hold more: the next turn's common prefix sorts it out */
    while (ch->n_images > keep_images) free(ch->images[--ch->n_images]); /* this message's images go too */
    return 0;
}

/* /image FILE: decoded and encoded now (so a bad file is refused with its reason and nothing changes, and the
 * rows are cached for the turn), attached to the next message. */
static void add_image(chat *ch, const char *path) {
    if (!ch->mm) {
        fprintf(stderr, "braid chat: /image needs a projector (--mmproj FILE)\n");
        return;
    }
    if (ch->n_images == IMG_MAX) {
        fprintf(stderr, "braid chat: at most %d images in a conversation\n", IMG_MAX);
        return;
    }
    braid_image *im = NULL;
    float *rows = NULL;
    int32_t nx = 0, ny = 0;
    braid_status s = braid_image_load_file(path, &im);
    if (s == BRAID_OK) s = braid_mmproj_encode(ch->mm, im, &rows, &nx, &ny);
    braid_image_free(im);
    braid_free(rows);
    char *copy = s == BRAID_OK ? strdup(path) : NULL;
    if (s == BRAID_OK && !copy) s = BRAID_E_NOMEM;
    if (s != BRAID_OK) {
        fprintf(stderr, "braid chat: image %s not added: %s: %s\n", path, braid_status_name(s), braid_last_error());
        return;
    }
    ch->images[ch->n_images++] = copy;
    ch->n_pending++;
    fprintf(stderr, "image %s: %d x %d rows, goes with the next message\n", path, nx, ny);
}

static void print_stats(chat *ch) {
    const braid_gen_stats *st = braid_gen_get_stats(ch->g);
    fprintf(stderr,
            "turns %d | last prompt %d tokens: reused %d, decoded %d (replay %d) in %.1f ms, first token after "
            "%.1f ms | reply %d tokens in %.1f ms (%.2f tok/s) | sequence %d of %d\n",
            ch->turn, st->prompt_tokens, st->reused_tokens, st->decoded_tokens, st->replayed_tokens, st->prompt_ms,
            st->ttft_ms, st->n_generated, st->gen_ms, st->gen_ms > 0 ? st->n_generated / (st->gen_ms * 1e-3) : 0.0,
            braid_seq_len(ch->su.ctx, 0), ch->o.g.n_ctx);
}

static int save_chat(chat *ch, const char *path) {
    json_t *root = json_object(), *arr = json_array();
    for (size_t i = 0; root && arr && i < ch->cv.n; i++) {
        json_t *m = json_object();
        char *c = tool_utf8_sanitize(ch->cv.msgs[i].content, strlen(ch->cv.msgs[i].content));
        json_object_set_new(m, "role", json_string(ch->cv.msgs[i].role));
        json_object_set_new(m, "content", json_string(c ? c : ""));
        free(c);
        json_array_append_new(arr, m);
    }
    json_object_set_new(root, "messages", arr);
    int ok = json_dump_file(root, path, JSON_INDENT(1)) == 0;
    json_decref(root);
    if (!ok) {
        fprintf(stderr, "braid chat: cannot write %s\n", path);
        return 0;
    }
    char sp[4200];
    snprintf(sp, sizeof sp, "%s.state", path);
    if (!gen_session_save("chat", ch->su.ctx, sp)) return 0;
    fprintf(stderr, "saved %zu messages to %s and the memory to %s\n", ch->cv.n, path, sp);
    return 1;
}

static int load_chat(chat *ch, const char *path) {
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    json_t *arr = root ? json_object_get(root, "messages") : NULL;
    if (!json_is_array(arr)) {
        fprintf(stderr, "braid chat: %s is not a saved chat: %s\n", path, root ? "no messages" : err.text);
        json_decref(root);
        return 0;
    }
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *m = json_array_get(arr, i);
        if (!json_is_string(json_object_get(m, "role")) || !json_is_string(json_object_get(m, "content"))) {
            fprintf(stderr, "braid chat: %s: message %zu has no role or content\n", path, i);
            json_decref(root);
            return 0;
        }
    }
    convo_truncate(&ch->cv, 0);
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *m = json_array_get(arr, i);
        const char *c = json_string_value(json_object_get(m, "content"));
        if (!convo_add(&ch->cv, json_string_value(json_object_get(m, "role")), c, strlen(c))) break;
    }
    json_decref(root);
    char sp[4200];
    snprintf(sp, sizeof sp, "%s.state", path);
    if (gen_session_load("chat", ch->su.ctx, sp) <= 0)
        fprintf(stderr, "braid chat: continuing without the saved memory (the next turn recomputes it)\n");
    ch->turn = 0;
    for (size_t i = 0; i < ch->cv.n; i++) ch->turn += !strcmp(ch->cv.msgs[i].role, "assistant");
    fprintf(stderr, "loaded %zu messages from %s\n", ch->cv.n, path);
    return 1;
}

/* Returns 1 if line was a command (handled), 0 if it is a user turn, -1 to quit. */
static int command(chat *ch, const char *line) {
    if (line[0] != '/') return 0;
    if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) return -1;
    if (!strcmp(line, "/stats")) return print_stats(ch), 1;
    if (!strncmp(line, "/image ", 7)) return add_image(ch, line + 7), 1;
    if (!strcmp(line, "/reset")) {
        while (ch->n_images) free(ch->images[--ch->n_images]);
        ch->n_pending = 0;
        convo_truncate(&ch->cv, ch->o.system ? 1 : 0);
        braid_seq_clear(ch->su.ctx, 0);
        ch->turn = 0;
        fprintf(stderr, "conversation reset\n");
        return 1;
    }
    if (!strncmp(line, "/save ", 6)) return save_chat(ch, line + 6), 1;
    if (!strncmp(line, "/load ", 6)) return load_chat(ch, line + 6), 1;
    fprintf(stderr, "braid chat: unknown command %s (/save FILE, /load FILE, /reset, /stats, /quit, /image FILE)\n",
            line);
    return 1;
}

static int cmd_chat(int argc, char **argv) {
    chat ch;
    memset(&ch, 0, sizeof ch);
    gen_opts_init(&ch.o.g);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            chat_usage(stdout);
            return 0;
        }
        int r = gen_opts_parse("chat", argc, argv, &i, &ch.o.g);
        if (r < 0) return chat_usage(stderr), 2;
        if (r > 0) continue;
        r = img_opts_parse("chat", argc, argv, &i, &ch.o.img);
        if (r < 0) return chat_usage(stderr), 2;
        if (r > 0) continue;
        if (!strcmp(a, "--system") && i + 1 < argc) {
            ch.o.system = argv[++i];
            continue;
        }
        if (!strcmp(a, "--chat-template-file") && i + 1 < argc) {
            ch.o.template_file = argv[++i];
            continue;
        }
        if (!strcmp(a, "--chat-template-kwargs") && i + 1 < argc) {
            ch.o.kwargs = argv[++i];
            continue;
        }
        fprintf(stderr, "braid chat: unknown option or missing value: '%s'\n", a);
        chat_usage(stderr);
        return 2;
    }
    if (!ch.o.g.n_ctx) ch.o.g.n_ctx = 4096;
    int rc = 1;
    if (!gen_setup_models("chat", &ch.o.g, &ch.su) ||
        !gen_setup_contexts("chat", &ch.o.g, (uint32_t)ch.o.g.n_ctx, &ch.su))
        goto done;
    if (!chat_template_init(&ch.tmpl, ch.su.model, ch.o.template_file, ch.o.kwargs)) goto done;
    if (ch.o.img.n_images || ch.o.img.dump) {
        fprintf(stderr, "braid chat: images come with /image FILE during the chat\n");
        goto done;
    }
    if (ch.o.img.mmproj && !img_load_mmproj("chat", &ch.o.img, ch.su.model, ch.o.g.n_threads, &ch.mm)) goto done;
    ch.session_ok = 1;
    if (ch.o.g.session) ch.session_ok = gen_session_load("chat", ch.su.ctx, ch.o.g.session) >= 0;
    braid_gen_params gp = gen_opts_params(&ch.o.g, &ch.su);
    if (!ch.o.g.json) gp.on_piece = gen_put_piece;
    braid_status s = braid_gen_new(ch.su.ctx, &gp, &ch.g);
    if (s != BRAID_OK) {
        fail("generator", s);
        goto done;
    }
    if (ch.o.system && !convo_add(&ch.cv, "system", ch.o.system, strlen(ch.o.system))) goto done;
    int tty = isatty(STDIN_FILENO);
    if (tty) {
        using_history();
        fprintf(stderr, "braid chat: %s — /save FILE, /load FILE, /reset, /stats, /quit; Ctrl-D ends\n",
                braid_model_arch(ch.su.model));
    }
    char *line = NULL;
    size_t cap = 0;
    for (;;) {
        char *in;
        if (tty) {
            in = readline("> ");
            if (!in) break;
            if (*in) add_history(in);
        } else {
            ssize_t got = getline(&line, &cap, stdin);
            if (got < 0) break;
            while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = 0;
            in = line;
        }
        int c = in[0] ? command(&ch, in) : 1;
        if (c == 0) do_turn(&ch, in);
        if (tty) free(in);
        if (c < 0) break;
    }
    free(line);
    rc = 0;
done:
    convo_truncate(&ch.cv, 0);
    chat_template_free(&ch.tmpl);
    while (ch.n_images) free(ch.images[--ch.n_images]);
    braid_mmproj_free(ch.mm);
    free(ch.cv.msgs);
    free(ch.toks);
    braid_gen_free(ch.g);
    gen_setup_free(&ch.su);
    return rc;
}

BRAID_COMMAND(chat, cmd_chat, "multi-turn chat that recomputes only what is new (-m FILE)")
