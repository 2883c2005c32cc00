/* music gen --out DIR --pieces N --seed S: the procedural corpus as MIDI files. */
#include "commands.h"
#include "music.h"

#include <stdio.h>

int music_cmd_gen(int argc, char **argv) {
    const char *out = NULL;
    uint64_t pieces = 16, seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (music_opt(argc, argv, &i, "--out", &v)) {
            if (!v) return 2;
            out = v;
        } else if (music_opt(argc, argv, &i, "--pieces", &v)) {
            if (!v || !music_parse_u64("gen", "--pieces", v, 100000, &pieces)) return 2;
        } else if (music_opt(argc, argv, &i, "--seed", &v)) {
            if (!v || !music_parse_u64("gen", "--seed", v, UINT64_MAX, &seed)) return 2;
        } else {
            return music_usage_error("gen", argv[i]);
        }
    }
    if (!out) {
        fprintf(stderr, "music gen: --out DIR is required\n");
        return 2;
    }
    mg_status s = music_generate_dir(out, (uint32_t)pieces, seed);
    if (s) {
        fprintf(stderr, "music gen: %s\n", mg_last_error());
        return 1;
    }
    /* The summary comes from the same pieces read back through the reader. */
    music_corpus c;
    s = music_generate_corpus((uint32_t)pieces, seed, NULL, &c);
    if (s) {
        fprintf(stderr, "music gen: %s\n", mg_last_error());
        return 1;
    }
    printf("wrote %llu pieces (seed %llu) to %s: ", (unsigned long long)pieces,
           (unsigned long long)seed, out);
    music_corpus_summary(&c, stdout);
    music_corpus_free(&c);
    return 0;
}
