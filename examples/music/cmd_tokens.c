/* music tokens FILE: the performance encoding of one file, one token a line. */
#include "cli.h"
#include "commands.h"
#include "music.h"

#include <stdio.h>

#define PROG "music tokens"

int music_cmd_tokens(int argc, char **argv) {
    int64_t limit = INT64_MAX;
    const ex_opt table[] = {
        EX_INT_OPT("limit", &limit, 0, INT64_MAX, "print the first N tokens only"),
    };
    const char *pos[1];
    int n_pos = 0;
    ex_parse_result pr = ex_parse(PROG, "FILE [--limit N]", argc - 1, argv + 1, table, 1, pos, 1, &n_pos);
    if (pr != EX_PARSE_OK) return pr == EX_PARSE_HELP ? 0 : 2;
    if (n_pos == 0) {
        fprintf(stderr, PROG ": FILE is required\n");
        return 2;
    }
    const char *path = pos[0];
    music_midi_file f;
    music_notes notes = {0};
    music_tokens tok = {0};
    music_midi_info info;
    mg_status s = music_midi_read(path, &f);
    if (!s) s = music_midi_to_notes(&f, path, NULL, &notes, &info);
    if (!s) s = music_perf_encode(notes.v, notes.n, &tok);
    music_midi_free(&f);
    if (s) {
        fprintf(stderr, PROG ": %s\n", mg_last_error());
        music_notes_free(&notes);
        music_tokens_free(&tok);
        return 1;
    }
    fprintf(stderr, "%s: %zu notes, %.3f s, %zu tokens\n", path, notes.n, info.seconds, tok.n);
    char name[32];
    for (size_t i = 0; i < tok.n && (int64_t)i < limit; i++)
        printf("%zu\t%d\t%s\n", i, tok.v[i], music_perf_token_name(tok.v[i], name, sizeof name));
    music_notes_free(&notes);
    music_tokens_free(&tok);
    return 0;
}
