/* `textgen`: a character-level GPT on any text: train, sample, eval. One table of subcommands; each
 * lives in its own file (see commands.h). */
#include "cli.h"
#include "commands.h"
#include "output.h"

#include <stdlib.h>
#include <string.h>

static int cmd_plugins(int argc, char **argv) { return ex_cmd_plugins("textgen", argc - 1, argv + 1); }

static const ex_command commands[] = {
    {"train", "[--data FILE] [options] [FILE...]",
     "train a GPT on text (default: the King James Bible), with a live progress line, checkpoints, a loss "
     "plot and a sample at the end; --resume continues a run",
     textgen_cmd_train},
    {"sample", "[--ckpt FILE] [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S]",
     "stream text from a trained checkpoint", textgen_cmd_sample},
    {"eval", "[--ckpt FILE] [--data FILE] [--split val|train|all]",
     "validation loss of a checkpoint in nats and bits per character", textgen_cmd_eval},
    {"plugins", "[--schemes]",
     "every layer and positional scheme (--pos), where each comes from, and the plugin search path",
     cmd_plugins},
};

int main(int argc, char **argv) {
    return ex_command_main("textgen", commands, (int)(sizeof commands / sizeof commands[0]), argc, argv);
}

/* ---- shared helpers ---- */

mg_status textgen_read_corpus(const char *const *files, int n, int64_t max_file_mib, char **text, size_t *len,
                              char *label, size_t label_n) {
    return tg_read_corpus(files, n, max_file_mib, text, len, label, label_n);
}

int textgen_split_list(const char *list, const char ***out) {
    size_t n = 1, len = strlen(list);
    if (len == 0) {
        *out = NULL;
        return 0;
    }
    for (size_t i = 0; i < len; i++) n += list[i] == '\n';
    /* the pointers, then a copy of the text they point into */
    char **v = malloc(n * sizeof *v + len + 1);
    if (!v) return -1;
    char *s = (char *)(v + n);
    memcpy(s, list, len + 1);
    int k = 0;
    for (char *p = s; p;) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = 0;
        if (*p) v[k++] = p;
        p = nl ? nl + 1 : NULL;
    }
    *out = (const char **)v;
    return k;
}

bool textgen_print_token(void *user, int64_t step, int32_t token, const float *logits, int64_t vocab) {
    (void)step, (void)logits, (void)vocab;
    char s[4];
    int n = tg_decode_one(user, token, s);
    /* a failed write (a full disk, a closed pipe) stops the generation; main reports it */
    return fwrite(s, 1, (size_t)n, stdout) == (size_t)n && fflush(stdout) == 0;
}
