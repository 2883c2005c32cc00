/* The `music` program's subcommands. To add one: write `int music_cmd_NAME(int argc, char **argv)`
 * in its own file, declare it here, add a row to the table in main.c and the file to
 * meson.build's music_cmd_src. */
#ifndef MUSIC_COMMANDS_H
#define MUSIC_COMMANDS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct music_command {
    const char *name;
    const char *usage;   /* the arguments, for `music help` */
    const char *summary; /* one line */
    /* argv[0] is the command name. Returns the exit status: 0 done, 1 failed (message printed),
     * 2 bad usage. */
    int (*run)(int argc, char **argv);
} music_command;

int music_cmd_stats(int argc, char **argv);
int music_cmd_gen(int argc, char **argv);
int music_cmd_tokens(int argc, char **argv);

/* ---- argument helpers (main.c) ---- */

/* If argv[*i] is `--name VALUE` or `--name=VALUE`, stores VALUE, advances *i past it and returns
 * true; a missing VALUE prints an error and stores NULL. */
bool music_opt(int argc, char **argv, int *i, const char *name, const char **value);
/* Whole-string unsigned decimal in [0, max]; prints "music CMD: OPT: 'text' is not ..." if not. */
bool music_parse_u64(const char *cmd, const char *opt, const char *text, uint64_t max,
                     uint64_t *out);
/* Prints "music CMD: unknown argument 'ARG' (usage: music CMD USAGE)" and returns 2. */
int music_usage_error(const char *cmd, const char *arg);

#endif
