/* music stats --data DIR: what each MIDI file under DIR holds, as tab-separated lines. */
#include "cli.h"
#include "commands.h"
#include "music.h"

#include <stdio.h>
#include <string.h>

#define PROG "music stats"

int music_cmd_stats(int argc, char **argv) {
    const char *dir = NULL;
    music_load_opts opts = {0};
    const ex_opt table[] = {
        EX_STR_OPT("data", &dir, "directory of MIDI files (.mid/.midi, searched recursively; required)"),
        EX_FLAG_OPT("no-sustain", &opts.notes.no_sustain, "ignore the sustain pedal (CC 64) when counting tokens"),
        EX_FLAG_OPT("keep-drums", &opts.notes.keep_drums, "keep channel 10 (drums), which is dropped by default"),
    };
    ex_parse_result pr =
        ex_parse(PROG,
                 "--data DIR [--no-sustain] [--keep-drums]\n\n"
                 "One tab-separated line per MIDI file under DIR: path, SMF format, tracks, note-ons "
                 "(velocity > 0, before merging), tempo events, seconds, tokens; then a total line.",
                 argc - 1, argv + 1, table, (int)(sizeof table / sizeof table[0]), NULL, 0, NULL);
    if (pr != EX_PARSE_OK) return pr == EX_PARSE_HELP ? 0 : 2;
    if (!dir) {
        fprintf(stderr, PROG ": --data DIR is required\n");
        return 2;
    }
    music_corpus c;
    mg_status s = music_load_dir(dir, &opts, &c);
    if (s) {
        fprintf(stderr, PROG ": %s\n", mg_last_error());
        return 1;
    }
    size_t tracks = 0, note_ons = 0, tempo = 0;
    printf("path\tformat\ttracks\tnote_ons\ttempo_events\tseconds\ttokens\n");
    for (size_t i = 0; i < c.n; i++) {
        const music_item *it = &c.items[i];
        if (it->status) {
            printf("%s\terror\t%s\n", it->path, it->error ? it->error : mg_status_str(it->status));
            continue;
        }
        printf("%s\t%d\t%zu\t%zu\t%zu\t%.3f\t%zu\n", it->path, it->info.format, it->info.ntracks,
               it->info.note_ons, it->info.tempo_events, it->info.seconds, it->tokens);
        tracks += it->info.ntracks;
        note_ons += it->info.note_ons;
        tempo += it->info.tempo_events;
    }
    printf("total\t%zu files\t%zu\t%zu\t%zu\t%.3f\t%zu\n", c.n_ok, tracks, note_ons, tempo,
           c.seconds, c.tokens);
    fflush(stdout);
    music_corpus_summary(&c, stderr);
    music_corpus_free(&c);
    return 0;
}
