/* music tokens FILE: the performance encoding of one file, one token a line. */
#include "commands.h"
#include "music.h"

#include <stdio.h>

int music_cmd_tokens(int argc, char **argv) {
    const char *path = NULL;
    uint64_t limit = UINT64_MAX;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (music_opt(argc, argv, &i, "--limit", &v)) {
            if (!v || !music_parse_u64("tokens", "--limit", v, UINT64_MAX, &limit)) return 2;
        } else if (argv[i][0] != '-' && !path) {
            path = argv[i];
        } else {
            return music_usage_error("tokens", argv[i]);
        }
    }
    if (!path) {
        fprintf(stderr, "music tokens: FILE is required\n");
        return 2;
    }
    music_midi_file f;
    music_notes notes = {0};
    music_tokens tok = {0};
    music_midi_info info;
    mg_status s = music_midi_read(path, &f);
    if (!s) s = music_midi_to_notes(&f, path, NULL, &notes, &info);
    if (!s) s = music_perf_encode(notes.v, notes.n, &tok);
    music_midi_free(&f);
    if (s) {
        fprintf(stderr, "music tokens: %s\n", mg_last_error());
        music_notes_free(&notes);
        music_tokens_free(&tok);
        return 1;
    }
    fprintf(stderr, "%s: %zu notes, %.3f s, %zu tokens\n", path, notes.n, info.seconds, tok.n);
    char name[32];
    for (size_t i = 0; i < tok.n && i < limit; i++)
        printf("%zu\t%d\t%s\n", i, tok.v[i], music_perf_token_name(tok.v[i], name, sizeof name));
    music_notes_free(&notes);
    music_tokens_free(&tok);
    return 0;
}
