/* music gen --out DIR --pieces N --seed S: the procedural corpus as MIDI files. */
#include "cli.h"
#include "commands.h"
#include "music.h"

#include <stdio.h>

#define PROG "music gen"

int music_cmd_gen(int argc, char **argv) {
    const char *out = NULL;
    int64_t pieces = 16, seed = 1;
    const ex_opt table[] = {
        EX_STR_OPT("out", &out, "directory to write the pieces into (required; created if missing)"),
        EX_INT_OPT("pieces", &pieces, 0, MUSIC_MAX_PIECES, "pieces to write"),
        EX_INT_OPT("seed", &seed, 0, INT64_MAX, "seed of the pieces (the same seed writes the same pieces)"),
    };
    ex_parse_result pr = ex_parse(PROG, "--out DIR [--pieces N] [--seed S]", argc - 1, argv + 1, table,
                                  (int)(sizeof table / sizeof table[0]), NULL, 0, NULL);
    if (pr != EX_PARSE_OK) return pr == EX_PARSE_HELP ? 0 : 2;
    if (!out) {
        fprintf(stderr, PROG ": --out DIR is required\n");
        return 2;
    }
    mg_status s = music_generate_dir(out, (uint32_t)pieces, (uint64_t)seed);
    if (s) {
        fprintf(stderr, PROG ": %s\n", mg_last_error());
        return 1;
    }
    /* The summary comes from the same pieces read back through the reader. */
    music_corpus c;
    s = music_generate_corpus((uint32_t)pieces, (uint64_t)seed, NULL, &c);
    if (s) {
        fprintf(stderr, PROG ": %s\n", mg_last_error());
        return 1;
    }
    printf("wrote %lld pieces (seed %lld) to %s: ", (long long)pieces, (long long)seed, out);
    music_corpus_summary(&c, stdout);
    music_corpus_free(&c);
    return 0;
}
