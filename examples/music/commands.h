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

/* The most pieces the generated corpus may have (music gen --pieces, music train --pieces). */
#define MUSIC_MAX_PIECES 100000

#endif
