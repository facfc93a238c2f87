/* cmd_tokenize.c — `braid tokenize -m FILE [--no-special] [--no-bos] [--ids] TEXT | --file F | --stdin`:
 * tokenizes text with a model's vocabulary (vocab-only load, so any GGUF works) and prints one line per token,
 * `id<TAB>'piece'` (control bytes in pieces escaped), or with --ids only the ids, space-separated, on one
 * line. Special tokens written in the text are parsed unless --no-special; BOS/EOS are added as the
 * vocabulary says unless --no-bos. Exit 0 on success, 1 on a failure, 2 on a usage error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "braid.h"
#include "commands.h"

static void usage(FILE *o) {
    fprintf(o, "usage: braid tokenize -m FILE [--no-special] [--no-bos] [--ids] (TEXT | --file F | --stdin)\n"
               "  -m FILE        a GGUF file (only its tokenizer is read)\n"
               "  --no-special   tokenize special-token text (e.g. <|im_start|>) as plain text\n"
               "  --no-bos       do not add the BOS/EOS tokens the vocabulary asks for\n"
               "  --ids          print only the ids, space-separated, on one line\n"
               "  --file F       tokenize the contents of file F\n"
               "  --stdin        tokenize standard input\n");
}

static char *read_stream(FILE *f, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    if (!b) return NULL;
    for (;;) {
        if (n == cap) {
            cap *= 2;
            char *nb = realloc(b, cap);
            if (!nb) {
                free(b);
                return NULL;
            }
            b = nb;
        }
        size_t r = fread(b + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    *len = n;
    return b;
}

static void print_piece(const char *p, size_t n) {
    putchar('\'');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c == '\\') fputs("\\\\", stdout);
        else if (c == '\'') fputs("\\'", stdout);
        else if (c < 0x20 || c == 0x7F) printf("\\x%02x", c);
        else putchar(c);
    }
    putchar('\'');
}

static int cmd_tokenize(int argc, char **argv) {
    const char *model_path = NULL, *file = NULL, *text = NULL;
    int parse_special = 1, add_special = 1, ids_only = 0, use_stdin = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && i + 1 < argc) model_path = argv[++i];
        else if (!strcmp(a, "--no-special")) parse_special = 0;
        else if (!strcmp(a, "--no-bos")) add_special = 0;
        else if (!strcmp(a, "--ids")) ids_only = 1;
        else if (!strcmp(a, "--file") && i + 1 < argc) file = argv[++i];
        else if (!strcmp(a, "--stdin")) use_stdin = 1;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (a[0] == '-' && a[1] && !text) {
            fprintf(stderr, "braid tokenize: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (!text) text = a;
        else {
            fprintf(stderr, "braid tokenize: more than one text given\n");
            return 2;
        }
    }
    if (!model_path || (!!text + !!file + use_stdin) != 1) {
        usage(stderr);
        return 2;
    }
    char *buf = NULL;
    size_t len = 0;
    if (file) {
        FILE *f = fopen(file, "rb");
        if (!f) {
            fprintf(stderr, "braid tokenize: cannot open %s\n", file);
            return 1;
        }
        buf = read_stream(f, &len);
        fclose(f);
    } else if (use_stdin) {
        buf = read_stream(stdin, &len);
    } else {
        len = strlen(text);
        buf = malloc(len + 1);
        if (buf) memcpy(buf, text, len + 1);
    }
    if (!buf) {
        fprintf(stderr, "braid tokenize: out of memory\n");
        return 1;
    }
    braid_model_params mp = braid_model_default_params();
    mp.vocab_only = 1;
    braid_model *model = NULL;
    braid_status st = braid_model_load(model_path, &mp, &model);
    if (st != BRAID_OK) {
        fprintf(stderr, "braid tokenize: %s: %s\n", model_path, braid_last_error());
        free(buf);
        return 1;
    }
    size_t cap = len + 16, n = 0;
    braid_token *ids = malloc(cap * sizeof *ids);
    st = ids ? braid_tokenize(model, buf, len, add_special, parse_special, ids, cap, &n) : BRAID_E_NOMEM;
    if (st == BRAID_E_RANGE) { /* more ids than bytes (byte fallback): size exactly and run again */
        free(ids);
        cap = n;
        ids = malloc(cap * sizeof *ids);
        st = ids ? braid_tokenize(model, buf, len, add_special, parse_special, ids, cap, &n) : BRAID_E_NOMEM;
    }
    int rc = 0;
    if (st != BRAID_OK) {
        fprintf(stderr, "braid tokenize: %s\n", braid_last_error());
        rc = 1;
    } else if (ids_only) {
        for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
        putchar('\n');
    } else {
        for (size_t i = 0; i < n; i++) {
            char piece[256];
            size_t pl = 0;
            if (braid_token_to_piece(model, ids[i], 1, piece, sizeof piece, &pl) != BRAID_OK) pl = 0;
            printf("%6d\t", ids[i]);
            print_piece(piece, pl < sizeof piece ? pl : sizeof piece);
            putchar('\n');
        }
    }
    free(ids);
    free(buf);
    braid_model_free(model);
    return rc;
}

BRAID_COMMAND(tokenize, cmd_tokenize, "tokenize text with a model's vocabulary (ids and pieces)")
