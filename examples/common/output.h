/* What the example programs write on standard output is checked like any file: a program whose
 * output was lost (a full disk, a redirection to /dev/full) says so, with the reason, and does not
 * exit 0. Files the programs write go through minigrad/file.h. */
#ifndef EX_OUTPUT_H
#define EX_OUTPUT_H

/* First thing in main: stdout keeps the reason of a failed write (mg_stdout_track_errors). */
void ex_stdout_begin(void);

/* The status for main to return: rc, or (when rc is 0) 1 after a message on stderr naming
 * standard output and the reason, if anything written to stdout could not be written. */
int ex_exit_status(const char *prog, int rc);

/* A program made of subcommands: `prog COMMAND [OPTIONS]`. */
typedef struct ex_command {
    const char *name, *usage, *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the command's name */
} ex_command;

/* The whole of main for such a program: starts the stdout check, answers help / --help / -h (and no
 * command at all, on stderr with status 2) with the list of commands, runs the named one and returns
 * its ex_exit_status; an unknown command is named on stderr, before the list, with status 2. */
int ex_command_main(const char *prog, const ex_command *cmds, int n_cmds, int argc, char **argv);

#endif
