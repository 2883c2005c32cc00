/* Fuzz target for the MIDI reader of the music example (examples/music/midi_read.c).
 *
 * Beyond "no crash, no hang, no leak, no undefined behaviour" it checks three properties of every
 * input the reader accepts:
 *  - write then read again gives the same events (the writer can hold all the reader accepts);
 *  - playing it to notes either works or fails with a message naming the file;
 *  - the notes encode to tokens that decode again, to no more notes than went in.
 * Seeds: fuzz/corpus/midi, and the files tests/test_midi.c writes to BUILD/fuzz/midi_seed. */
#include "fuzz_util.h"

#include "music.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void same_file(const music_midi_file *a, const music_midi_file *b) {
    fz_expect(a->format == b->format && a->division == b->division && a->ntracks == b->ntracks,
           "header survives a write");
    for (size_t t = 0; t < a->ntracks; t++) {
        const music_midi_track *x = &a->tracks[t], *y = &b->tracks[t];
        fz_expect(x->n == y->n && x->end_tick == y->end_tick, "track survives a write");
        for (size_t i = 0; i < x->n; i++) {
            const music_midi_event *e = &x->ev[i], *g = &y->ev[i];
            fz_expect(e->tick == g->tick && e->status == g->status && e->type == g->type &&
                       e->d1 == g->d1 && e->d2 == g->d2 && e->len == g->len,
                   "event survives a write");
            fz_expect(e->len == 0 || memcmp(music_midi_payload(a, e), music_midi_payload(b, g), e->len) == 0,
                   "payload survives a write");
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    music_midi_file f;
    if (music_midi_parse(data, size, "fuzz.mid", &f) != MG_OK) {
        fz_expect(strncmp(mg_last_error(), "fuzz.mid: ", 10) == 0, "an error names the file");
        return 0;
    }
    uint8_t *buf;
    size_t len;
    fz_expect(music_midi_encode(&f, NULL, &buf, &len) == MG_OK, "a file read can be written");
    music_midi_file g;
    fz_expect(music_midi_parse(buf, len, "rewritten.mid", &g) == MG_OK, "a file written can be read");
    same_file(&f, &g);
    free(buf);
    music_midi_free(&g);

    music_notes notes;
    music_notes_opts o = {.max_seconds = 3600}; /* keeps each run short */
    if (music_midi_to_notes(&f, "fuzz.mid", &o, &notes, NULL) == MG_OK) {
        music_tokens tok = {0};
        music_notes back = {0};
        fz_expect(music_perf_encode(notes.v, notes.n, &tok) == MG_OK, "notes encode");
        fz_expect(music_perf_decode(tok.v, tok.n, &back) == MG_OK, "tokens decode");
        fz_expect(back.n <= notes.n, "decoding invents no notes");
        music_tokens_free(&tok);
        music_notes_free(&back);
        music_notes_free(&notes);
    } else {
        fz_expect(strncmp(mg_last_error(), "fuzz.mid: ", 10) == 0, "an error names the file");
    }
    music_midi_free(&f);
    return 0;
}
