/* cmd_template.c — `braid template (-m FILE | --template-file FILE) --messages FILE.json [--tools FILE.json]
 * [--no-generation-prompt] [--bos-token S] [--eos-token S] [--chat-template-kwargs JSON] [--name NAME]
 * [--now SECONDS]`: renders a chat template for a conversation and prints exactly the rendering, nothing
 * added (for scripts and tests). With -m the template and the bos/eos texts come from the model (vocab-only
 * load); --name picks tokenizer.chat_template.NAME. Exit 0 on success, 1 on a failure, 2 on a usage error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "braid.h"
#include "commands.h"

static void usage(FILE *o) {
    fprintf(o, "usage: braid template (-m FILE | --template-file FILE) --messages FILE.json [options]\n"
               "  -m FILE                     a GGUF file: its tokenizer.chat_template and bos/eos tokens\n"
               "  --template-file FILE        a Jinja chat template file instead\n"
               "  --messages FILE.json        the conversation: a JSON array of messages ('-' = stdin)\n"
               "  --tools FILE.json           tool definitions: a JSON array (the template's `tools`)\n"
               "  --no-generation-prompt      add_generation_prompt = false\n"
               "  --bos-token S, --eos-token S  the bos_token / eos_token texts (default: the model's, or \"\")\n"
               "  --chat-template-kwargs JSON extra template variables, e.g. '{\"enable_thinking\": false}'\n"
               "  --name NAME                 the model's named template tokenizer.chat_template.NAME\n"
               "  --now SECONDS               the time strftime_now formats (default: now)\n");
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    while (b) {
        if (n == cap) {
            char *nb = realloc(b, cap * 2 + 1);
            if (!nb) { free(b); b = NULL; break; }
            b = nb;
            cap *= 2;
        }
        size_t r = fread(b + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    int err = ferror(f);
    if (f != stdin) fclose(f);
    if (!b || err) { free(b); return NULL; }
    b[n] = 0;
    *len = n;
    return b;
}

static int cmd_template(int argc, char **argv) {
    const char *model_path = NULL, *tmpl_path = NULL, *messages_path = NULL, *tools_path = NULL, *name = NULL;
    braid_chat_params p = braid_chat_default_params();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--no-generation-prompt")) p.add_generation_prompt = 0;
        else if (has && !strcmp(a, "-m")) model_path = argv[++i];
        else if (has && !strcmp(a, "--template-file")) tmpl_path = argv[++i];
        else if (has && !strcmp(a, "--messages")) messages_path = argv[++i];
        else if (has && !strcmp(a, "--tools")) tools_path = argv[++i];
        else if (has && !strcmp(a, "--bos-token")) p.bos_token = argv[++i];
        else if (has && !strcmp(a, "--eos-token")) p.eos_token = argv[++i];
        else if (has && !strcmp(a, "--chat-template-kwargs")) p.kwargs_json = argv[++i];
        else if (has && !strcmp(a, "--name")) name = argv[++i];
        else if (has && !strcmp(a, "--now")) {
            char *end;
            p.now = strtoll(argv[++i], &end, 10);
            if (*end || p.now <= 0) { fprintf(stderr, "braid template: --now wants seconds since the epoch\n"); return 2; }
        } else { fprintf(stderr, "braid template: unknown or incomplete option '%s'\n", a); usage(stderr); return 2; }
    }
    if (!messages_path || (!model_path == !tmpl_path)) { usage(stderr); return 2; }
    size_t len;
    char *messages = read_file(messages_path, &len), *tools = NULL, *tmpl = NULL;
    int rc = 1;
    braid_model *model = NULL;
    char *out = NULL;
    size_t out_len = 0;
    if (!messages) { fprintf(stderr, "braid template: cannot read %s\n", messages_path); goto done; }
    if (tools_path && !(tools = read_file(tools_path, &len))) {
        fprintf(stderr, "braid template: cannot read %s\n", tools_path);
        goto done;
    }
    p.tools_json = tools;
    braid_status s;
    if (model_path) {
        braid_model_params mp = braid_model_default_params();
        mp.vocab_only = 1;
        s = braid_model_load(model_path, &mp, &model);
        if (s == BRAID_OK) s = braid_chat_template_apply(model, name, messages, &p, &out, &out_len);
    } else {
        size_t tl;
        if (!(tmpl = read_file(tmpl_path, &tl))) { fprintf(stderr, "braid template: cannot read %s\n", tmpl_path); goto done; }
        s = braid_chat_template_render(tmpl, tl, messages, &p, &out, &out_len);
    }
    if (s != BRAID_OK) {
        fprintf(stderr, "braid template: %s: %s\n", braid_status_name(s), braid_last_error());
        goto done;
    }
    if (fwrite(out, 1, out_len, stdout) != out_len || fflush(stdout) != 0) {
        fprintf(stderr, "braid template: write failed\n");
        goto done;
    }
    rc = 0;
done:
    braid_free(out);
    braid_model_free(model);
    free(messages);
    free(tools);
    free(tmpl);
    return rc;
}

BRAID_COMMAND(template, cmd_template, "render a chat template for a conversation (exact output)");
