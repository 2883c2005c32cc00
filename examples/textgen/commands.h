/* The `textgen` program's subcommands (one file each) and the helpers they share (main.c). */
#ifndef TG_COMMANDS_H
#define TG_COMMANDS_H

#include "textgen.h"

#include <stdio.h>

/* argv[0] is the command name. Each returns the exit status: 0 done, 1 failed (message printed),
 * 2 bad usage, 130 interrupted by Ctrl-C (checkpoint saved). */
int textgen_cmd_train(int argc, char **argv);
int textgen_cmd_sample(int argc, char **argv);
int textgen_cmd_eval(int argc, char **argv);

#define TEXTGEN_DEFAULT_OUT "out/textgen"
#define TEXTGEN_DEFAULT_CKPT TEXTGEN_DEFAULT_OUT "/model.safetensors"

/* Checkpoint metadata the train command adds (besides the model config and the vocabulary). */
#define TEXTGEN_META_DATA "textgen.data" /* corpus files, '\n'-separated; "" = the default corpus */

/* Reads the corpus: the files (n > 0), else the default corpus (made on first use), each of at
 * most max_file_mib MiB (1..TG_MAX_FILE_MIB_LIMIT, the --max-file-mib option). *label gets a short
 * description for messages ("kjv.txt" or the first file, "+ 2 more"). */
mg_status textgen_read_corpus(const char *const *files, int n, int64_t max_file_mib, char **text, size_t *len,
                              char *label, size_t label_n);
/* Splits a '\n'-separated list into a new array of strings (one allocation; free(*out)). */
int textgen_split_list(const char *list, const char ***out);
/* Streams generated tokens to stdout as they come: an mg_gen_token_fn whose user is the vocab. */
bool textgen_print_token(void *user, int64_t step, int32_t token, const float *logits, int64_t vocab);

#endif
