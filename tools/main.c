/* main.c — the braid command: dispatches `braid SUBCOMMAND ...` to the subcommands that registered
 * themselves (see commands.h), and prints the list of them for `braid` / `braid help`. */
#include <stdio.h>
#include <string.h>

#include "commands.h"

#define MAX_COMMANDS 32

static struct {
    const char *name;
    braid_command_fn fn;
    const char *help;
} commands[MAX_COMMANDS];
static int n_commands;

void braid_register_command(const char *name, braid_command_fn fn, const char *help) {
    if (n_commands < MAX_COMMANDS) {
        commands[n_commands].name = name;
        commands[n_commands].fn = fn;
        commands[n_commands].help = help;
        n_commands++;
    }
}

static void usage(FILE *f) {
    fprintf(f, "braid — inference for hybrid attention + recurrent language models\n\nusage: braid COMMAND [ARGS]\n\n");
    for (int i = 0; i < n_commands; i++) fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n`braid COMMAND --help` describes a command.\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (int i = 0; i < n_commands; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "braid: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
