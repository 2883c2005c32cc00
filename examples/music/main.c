/* `music`: the MIDI side of the music Transformer example. One table of subcommands; each
 * lives in its own file (see commands.h). */
#include "commands.h"
#include "cli.h"
#include "cmd_model.h"
#include "output.h"

#include "minigrad/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int music_cmd_plugins(int argc, char **argv) { return ex_cmd_plugins("music", argc - 1, argv + 1); }

static const music_command commands[] = {
    {"stats", "--data DIR [--no-sustain] [--keep-drums]",
     "one tab-separated line per MIDI file under DIR (format, tracks, note-ons, tempo events, "
     "seconds, tokens), then totals",
     music_cmd_stats},
    {"gen", "--out DIR [--pieces N] [--seed S]",
     "write N procedural piano pieces (default 16, seed 1) as MIDI files into DIR", music_cmd_gen},
    {"tokens", "FILE [--limit N]", "print the performance-encoding tokens of one MIDI file",
     music_cmd_tokens},
    {"train", "[--data DIR] [--out DIR] [options]",
     "train a GPT on MIDI performances (default: generated piano pieces), with a live progress "
     "line, checkpoints, a loss plot and a sample at the end; --resume continues a run",
     music_cmd_train},
    {"sample",
     "[--ckpt FILE] [--prompt FILE.mid] [--tokens N] [--out FILE.mid] [--png FILE.png] "
     "[--wav FILE.wav] [options]",
     "continue a MIDI file (or start a piece) with a trained model: MIDI, piano roll, audio",
     music_cmd_sample},
    {"eval", "[--ckpt FILE] [--data DIR]",
     "mean loss (nats/token) of a checkpoint on the validation windows", music_cmd_eval},
    {"plugins", "[--schemes]",
     "every layer and positional scheme (--pos), where each comes from, and the plugin search path",
     music_cmd_plugins},
};

#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void help(FILE *out) {
    fprintf(out, "usage: music COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "  %s %s\n      %s\n", commands[i].name, commands[i].usage,
                commands[i].summary);
}

int main(int argc, char **argv) {
    ex_stdout_begin();
    if (argc < 2 || strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "-h") == 0) {
        help(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : ex_exit_status("music", 0);
    }
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, argv[1]) == 0)
            return ex_exit_status("music", commands[i].run(argc - 1, argv + 1));
    fprintf(stderr, "music: unknown command '%s'\n", argv[1]);
    help(stderr);
    return 2;
}
