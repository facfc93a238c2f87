/* commands.h — how a subcommand of the braid command registers itself.
 *
 * Each subcommand lives in its own file tools/cmd_NAME.c and ends with
 *     BRAID_COMMAND(NAME, cmd_NAME, "one-line help");
 * which adds it to the table that main.c dispatches on, so adding a command never touches main.c.
 * A command gets argv with argv[0] = its own name and returns the process exit code:
 * 0 success, 1 a failure reported on stderr, 2 a usage error. */
#ifndef BRAID_TOOLS_COMMANDS_H
#define BRAID_TOOLS_COMMANDS_H

typedef int (*braid_command_fn)(int argc, char **argv);

void braid_register_command(const char *name, braid_command_fn fn, const char *help);

#define BRAID_COMMAND(name, fn, help)                                                                          \
    __attribute__((constructor)) static void register_##fn(void) { braid_register_command(#name, fn, help); }

#endif
