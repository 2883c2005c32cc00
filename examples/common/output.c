/* Standard output, checked on the way out. */
#include "output.h"

#include "minigrad/file.h"

#include <stdio.h>
#include <string.h>

void ex_stdout_begin(void) {
    if (mg_stdout_track_errors() != MG_OK) mg_clear_error(); /* the plain stdout is still checked */
}

int ex_exit_status(const char *prog, int rc) {
    if (mg_stdout_check() == MG_OK) return rc;
    fprintf(stderr, "%s: %s\n", prog, mg_last_error());
    return rc ? rc : 1;
}

static void command_help(FILE *out, const char *prog, const ex_command *cmds, int n_cmds) {
    fprintf(out, "usage: %s COMMAND [OPTIONS]    (%s COMMAND --help lists the options)\n\ncommands:\n", prog, prog);
    for (int i = 0; i < n_cmds; i++) fprintf(out, "  %s %s\n      %s\n", cmds[i].name, cmds[i].usage, cmds[i].summary);
}

int ex_command_main(const char *prog, const ex_command *cmds, int n_cmds, int argc, char **argv) {
    ex_stdout_begin();
    if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        command_help(argc < 2 ? stderr : stdout, prog, cmds, n_cmds);
        return argc < 2 ? 2 : ex_exit_status(prog, 0);
    }
    for (int i = 0; i < n_cmds; i++)
        if (!strcmp(cmds[i].name, argv[1])) return ex_exit_status(prog, cmds[i].run(argc - 1, argv + 1));
    fprintf(stderr, "%s: unknown command '%s'\n\n", prog, argv[1]);
    command_help(stderr, prog, cmds, n_cmds);
    return 2;
}
