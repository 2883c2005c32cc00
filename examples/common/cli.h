/* Command-line options for the example programs: one table per command, `--name value` or
 * `--name=value`, typed, with --help generated from the table. Unknown options and bad values are
 * errors that name the option and the value. Also what such a program does at start-up (find the
 * plugins beside it) and on failure (say the library's message). */
#ifndef EX_CLI_H
#define EX_CLI_H

#include "minigrad/base.h"

#include <stdbool.h>
#include <stdint.h>

typedef enum { EX_INT, EX_FLOAT, EX_STR, EX_FLAG } ex_opt_type;

/* One option. A numeric one (EX_INT, EX_FLOAT) has an allowed range, inclusive: min..max for
 * EX_INT, lo..hi for EX_FLOAT (finite). A value outside it, or one that is not a number, is an
 * error naming the option and the range ("--threads: 4294967297 is out of range 0..1024"); the
 * range is listed by --help. A numeric option declared without a range (both bounds 0) is
 * refused as a defect of the program. Write the rows with EX_INT_OPT / EX_FLOAT_OPT. */
typedef struct ex_opt {
    const char *name; /* without the leading dashes */
    ex_opt_type type;
    void *ptr;        /* int64_t*, float*, const char**, bool* */
    const char *help;
    int64_t min, max; /* EX_INT */
    double lo, hi;    /* EX_FLOAT */
} ex_opt;

/* Initialisers of ex_opt rows (in an array initialiser as they are; (ex_opt)EX_INT_OPT(...) makes
 * a value of one). */
#define EX_INT_OPT(name, ptr, min, max, help) {(name), EX_INT, (ptr), (help), (min), (max), 0, 0}
#define EX_FLOAT_OPT(name, ptr, lo, hi, help) {(name), EX_FLOAT, (ptr), (help), 0, 0, (lo), (hi)}
#define EX_STR_OPT(name, ptr, help) {(name), EX_STR, (ptr), (help), 0, 0, 0, 0}
#define EX_FLAG_OPT(name, ptr, help) {(name), EX_FLAG, (ptr), (help), 0, 0, 0, 0}

/* Ranges several programs share. */
#define EX_MAX_THREADS 1024          /* --threads (0: all cores) */
#define EX_MAX_STEPS 1000000000      /* --steps, --warmup, --eval-every, ... */
#define EX_MAX_BATCH 65536           /* --batch */
#define EX_MAX_BLOCK (1 << 20)       /* --block-size */
#define EX_MAX_GEN_TOKENS (1 << 24)  /* tokens a sample may generate */

typedef enum { EX_PARSE_OK = 0, EX_PARSE_HELP = 1, EX_PARSE_ERROR = 2 } ex_parse_result;

/* Parses argv[0..argc) (argv[0] is NOT the program name: pass argv+1 or the words after a
 * subcommand). Defaults are whatever the pointers hold before the call. Positional words are
 * stored in pos[0..max_pos) and counted in *n_pos (pos may be NULL when max_pos is 0; then any
 * positional word is an error). On --help prints usage to stdout; on error prints a message
 * prefixed by `prog` to stderr. `usage` is what follows the program's name on the usage line
 * ("usage: PROG USAGE"), so it does not repeat the name. */
ex_parse_result ex_parse(const char *prog, const char *usage, int argc, char **argv, const ex_opt *opts,
                         int n_opts, const char **pos, int max_pos, int *n_pos);

void ex_print_usage(const char *prog, const char *usage, const ex_opt *opts, int n_opts);

/* Checks the values the numeric options hold now against their ranges (for values that did not
 * come from the command line, such as the settings a checkpoint remembers). On the first one out
 * of range prints "PROG: --NAME: V is out of range MIN..MAX" followed by " (where)" when where is
 * not NULL, and returns false. */
bool ex_check_ranges(const char *prog, const ex_opt *opts, int n_opts, const char *where);

/* Prints "PROG: message" for the last recoverable error (mg_last_error) and returns 1, the exit
 * status of a failed command. */
int ex_fail(const char *prog);

/* The program as the user started it (argv[0]: "build/examples/textgen/textgen", "./music"), for
 * the commands a program suggests; prog when that is not known. */
const char *ex_invoked_as(const char *prog);

/* s as one shell word: unchanged when it holds only characters no shell treats specially, else in
 * single quotes (a quote within as '\''). Returns buf, which receives it (cut short if it does not
 * fit in n bytes). */
const char *ex_shell_word(const char *s, char *buf, size_t n);

/* After a checkpoint failed to load: ex_fail's message, then, when the file does not exist, what
 * makes one ("PROG: train a model first (TRAIN_CMD) or pass --ckpt FILE"). Returns 1. */
int ex_fail_load(const char *prog, const char *train_cmd, const char *ckpt);

/* mkdir -p: dir and every missing folder above it. */
mg_status ex_mkdirs(const char *dir);

/* The `plugins` command of every program: `PROG plugins [--schemes]` prints each layer and
 * positional scheme the program can use with where it comes from (built-in or a plugin's path),
 * the plugin folders searched in order, and the plugins that did not load with the reason. */
int ex_cmd_plugins(const char *prog, int argc, char **argv); /* argv: the words after `plugins` */

#endif
