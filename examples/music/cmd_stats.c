/* music stats --data DIR: what each MIDI file under DIR holds, as tab-separated lines. */
#include "commands.h"
#include "music.h"

#include <stdio.h>
#include <string.h>

int music_cmd_stats(int argc, char **argv) {
    const char *dir = NULL;
    music_load_opts opts = {0};
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (music_opt(argc, argv, &i, "--data", &v)) {
            if (!v) return 2;
            dir = v;
        } else if (strcmp(argv[i], "--no-sustain") == 0) {
            opts.notes.no_sustain = true;
        } else if (strcmp(argv[i], "--keep-drums") == 0) {
            opts.notes.keep_drums = true;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: music stats --data DIR [--no-sustain] [--keep-drums]\n"
                   "One tab-separated line per MIDI file under DIR: path, SMF format, tracks, "
                   "note-ons (velocity > 0, before merging), tempo events, seconds, tokens; then a "
                   "total line.\n"
                   "  --no-sustain  ignore the sustain pedal (CC 64) when counting tokens\n"
                   "  --keep-drums  keep channel 10 (drums), which is dropped by default\n");
            return 0;
        } else {
            return music_usage_error("stats", argv[i]);
        }
    }
    if (!dir) {
        fprintf(stderr, "music stats: --data DIR is required\n");
        return 2;
    }
    music_corpus c;
    mg_status s = music_load_dir(dir, &opts, &c);
    if (s) {
        fprintf(stderr, "music stats: %s\n", mg_last_error());
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
