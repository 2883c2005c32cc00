/* music.h: the MIDI half of the music Transformer example, as a small library.
 *
 *   SMF bytes  <-- music_midi_parse / music_midi_encode -->  music_midi_file (tracks of raw events)
 *   music_midi_file  -- music_midi_to_notes -->  music_notes (seconds; tracks merged, tempo map, pedal)
 *   music_notes  <-- music_perf_encode / music_perf_decode -->  tokens (performance encoding, V = 390)
 *   music_notes  -- music_notes_to_midi -->  music_midi_file  (to write what a model sampled)
 *
 * plus data augmentation (transposition, time stretch), a directory loader with per-file results,
 * and a deterministic procedural corpus of piano pieces written as real MIDI files.
 *
 * Errors: every function that reads outside input returns an mg_status and sets mg_last_error()
 * (base.h) to a message naming the file (the `name` passed in) and, for a corrupt file, the byte
 * offset where the problem was found. Nothing crashes, hangs or allocates without bound on any
 * input: every length is checked against the bytes that remain.
 *
 * Ownership: each struct below that holds memory is initialised by the function that fills it and
 * released by its _free function; passing a zeroed struct to _free is fine. Inputs are borrowed.
 * Randomness: only through an explicit mg_rng (rng.h).
 */
#ifndef MUSIC_H
#define MUSIC_H

#include "minigrad/base.h"
#include "minigrad/rng.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================================
 * Standard MIDI File, raw level
 * ====================================================================================== */

/* One event of one track. Channel messages keep their status byte (0x80..0xEF, channel in the low
 * nibble) whether or not the file used running status; a note-on with velocity 0 stays a note-on
 * here (it is read as a note-off one level up). Meta events (status 0xFF) and sysex events (0xF0,
 * and 0xF7 escapes) keep their payload as opaque bytes in the file's blob: meta text need not be
 * UTF-8. End-of-Track is not an event; it sets the track's end_tick. */
typedef struct music_midi_event {
    uint64_t tick; /* absolute, from the start of the track */
    uint32_t len;  /* payload bytes (meta and sysex only) */
    uint32_t off;  /* payload offset in music_midi_file.blob */
    uint8_t status;
    uint8_t type;   /* meta type (0x51 Set Tempo, 0x03 track name, ...) when status == 0xFF */
    uint8_t d1, d2; /* data bytes of a channel message (d2 = 0 for 0xC0 and 0xD0) */
} music_midi_event;

typedef struct music_midi_track {
    music_midi_event *ev;
    size_t n, cap;
    uint64_t end_tick; /* tick of End-of-Track (at least the last event's tick) */
} music_midi_track;

/* division > 0: ticks per quarter note. division < 0: SMPTE timing, the header's raw 16-bit value
 * read as int16 (high byte = -frames per second, low byte = ticks per frame); tempo is then
 * ignored, as the standard says. */
typedef struct music_midi_file {
    int format; /* 0, 1 or 2 */
    int division;
    music_midi_track *tracks;
    size_t ntracks, tracks_cap;
    uint8_t *blob; /* meta and sysex payloads */
    size_t blob_len, blob_cap;
} music_midi_file;

enum {
    MUSIC_MIDI_NOTE_OFF = 0x80,
    MUSIC_MIDI_NOTE_ON = 0x90,
    MUSIC_MIDI_POLY_PRESSURE = 0xA0,
    MUSIC_MIDI_CONTROL = 0xB0,
    MUSIC_MIDI_PROGRAM = 0xC0,
    MUSIC_MIDI_CHANNEL_PRESSURE = 0xD0,
    MUSIC_MIDI_PITCH_BEND = 0xE0,
    MUSIC_MIDI_SYSEX = 0xF0,
    MUSIC_MIDI_SYSEX_ESCAPE = 0xF7,
    MUSIC_MIDI_META = 0xFF,
    MUSIC_MIDI_META_TEXT = 0x01,
    MUSIC_MIDI_META_TRACK_NAME = 0x03,
    MUSIC_MIDI_META_END_OF_TRACK = 0x2F,
    MUSIC_MIDI_META_TEMPO = 0x51,
    MUSIC_MIDI_META_TIME_SIGNATURE = 0x58,
    MUSIC_MIDI_META_KEY_SIGNATURE = 0x59,
    MUSIC_MIDI_CC_SUSTAIN = 64,
    MUSIC_MIDI_DEFAULT_TEMPO = 500000, /* microseconds per quarter note (120 bpm) */
};

/* An empty file (no tracks) to be filled with the music_midi_add_* functions. */
void music_midi_init(music_midi_file *f, int format, int division);
void music_midi_free(music_midi_file *f);

/* Parses SMF bytes. `name` (a path, or any label) starts every error message, followed by the
 * byte offset: "song.mid: offset 1234: track 2 chunk length 9999 runs past the end of the file
 * (4321 bytes)". Accepts formats 0, 1 and 2, running status (kept across meta and sysex events,
 * as many writers expect), chunks of unknown type (skipped), bytes after the declared tracks
 * (ignored), a missing End-of-Track (the chunk end ends the track). On error *out is left empty. */
mg_status music_midi_parse(const uint8_t *buf, size_t len, const char *name, music_midi_file *out);
/* Reads and parses a file; MG_ERR_IO names the path and the system's reason. */
mg_status music_midi_read(const char *path, music_midi_file *out);

/* Builders. Events may be added in any tick order: the writer and music_midi_to_notes order each
 * track stably by tick (see music_midi_sort_track). */
mg_status music_midi_add_track(music_midi_file *f, size_t *index);
mg_status music_midi_add_channel(music_midi_file *f, size_t track, uint64_t tick, uint8_t status,
                              uint8_t d1, uint8_t d2);
mg_status music_midi_add_meta(music_midi_file *f, size_t track, uint64_t tick, uint8_t type,
                           const void *data, uint32_t len);
mg_status music_midi_add_tempo(music_midi_file *f, size_t track, uint64_t tick, uint32_t us_per_quarter);
/* status 0xF0 (payload = bytes after F0, normally ending in F7) or 0xF7 (escape, raw bytes). */
mg_status music_midi_add_sysex(music_midi_file *f, size_t track, uint64_t tick, uint8_t status,
                            const void *data, uint32_t len);
/* Stable sort of one track by tick: events at one tick keep the order they were added in. */
void music_midi_sort_track(music_midi_track *t);
/* Payload of a meta or sysex event. */
static inline const uint8_t *music_midi_payload(const music_midi_file *f, const music_midi_event *e) {
    return f->blob + e->off;
}

typedef struct music_midi_write_opts {
    bool no_running_status; /* false (default): omit repeated status bytes of channel messages */
} music_midi_write_opts;

/* Serialises to SMF bytes (*buf malloc'ed, caller frees). Tracks are written sorted by tick
 * (a copy is sorted; f is not changed) and each gets an End-of-Track at its end_tick. A status
 * byte is always written after a meta or sysex event, as the standard requires. opts may be NULL.
 * MG_ERR_INVALID for what SMF cannot hold (a delta time over 0x0FFFFFFF, a bad status byte, a
 * data byte over 127, format 0 with other than one track). */
mg_status music_midi_encode(const music_midi_file *f, const music_midi_write_opts *opts, uint8_t **buf,
                         size_t *len);
/* Writes atomically (temporary file + rename; a device such as /dev/stdout is written in place), so a
 * failed write (a full disk) never leaves half a file: MG_ERR_IO names path and the reason. */
mg_status music_midi_write(const char *path, const music_midi_file *f, const music_midi_write_opts *opts);

/* ======================================================================================
 * Notes: what was played, in seconds
 * ====================================================================================== */

typedef struct music_note {
    double on, off;   /* seconds from the start of the file, off >= on */
    uint8_t pitch;    /* 0..127 */
    uint8_t velocity; /* 1..127 */
    uint8_t channel;  /* 0..15 */
    uint8_t program;  /* the channel's program at the onset (0 = Acoustic Grand Piano) */
} music_note;

typedef struct music_notes {
    music_note *v;
    size_t n, cap;
} music_notes;

void music_notes_free(music_notes *n);
mg_status music_notes_push(music_notes *n, music_note note);
/* Orders by onset, then pitch, then offset, then channel: the canonical order every function
 * here produces. */
void music_notes_sort(music_notes *n);

/* What a file held, counted while converting it to notes. */
typedef struct music_midi_info {
    int format, division;
    size_t ntracks;
    size_t note_ons;       /* raw note-on events with velocity > 0, all channels, before merging */
    size_t tempo_events;   /* Set Tempo meta events */
    size_t notes;          /* notes produced (drum-channel notes excluded unless kept) */
    size_t restrikes;      /* note-ons of a pitch already sounding on that channel (key or pedal) */
    size_t unmatched_offs; /* note-offs with no sounding note: ignored */
    size_t unterminated;   /* notes still sounding at the end of the file: closed there */
    size_t drum_notes;     /* channel-10 notes dropped */
    double seconds;        /* duration: the last End-of-Track through the tempo map */
} music_midi_info;

typedef struct music_notes_opts {
    bool no_sustain;    /* default false: CC 64 >= 64 holds released notes until the pedal lifts */
    bool keep_drums;    /* default false: channel 10 (index 9) is unpitched and dropped */
    double max_seconds; /* 0 = 86400: a longer file is refused, so a corrupt delta time cannot ask
                         * the tokenizer for billions of time shifts */
} music_notes_opts;

/* Plays the file: merges all tracks by time (tick, then track, then order in the track), converts
 * ticks to seconds through the tempo map (Set Tempo events from any track apply to all), reads a
 * note-on with velocity 0 as a note-off, and applies these rules per channel and pitch:
 *  - a note-off ends the OLDEST sounding note of its pitch (first in, first out), so two
 *    overlapping notes of one pitch written on, on, off, off come back as written;
 *  - with the pedal down a note-off only marks the note released; the note ends when the pedal
 *    lifts (CC 64 < 64) or when its pitch is struck again, whichever comes first;
 *  - a note-off with nothing sounding is ignored (counted in info->unmatched_offs);
 *  - notes still sounding at the end of the file end there.
 * Every note-on with velocity > 0 thus yields one note (except dropped drum notes). Output is
 * sorted (music_notes_sort). info and opts may be NULL. MG_ERR_INVALID for format 2, whose tracks
 * are independent songs. */
mg_status music_midi_to_notes(const music_midi_file *f, const char *name, const music_notes_opts *opts,
                           music_notes *out, music_midi_info *info);

typedef struct music_notes_midi_opts {
    int format;              /* 0 (default): one track; 1: a tempo track, then one per channel */
    int division;            /* 0 = 480 ticks per quarter */
    uint32_t us_per_quarter; /* 0 = 500000 (120 bpm) */
    bool note_off_as_vel0;   /* write note-offs as note-on with velocity 0 */
} music_notes_midi_opts;

/* Builds a file that plays the notes (one Set Tempo, a program change per channel used). Times
 * are rounded to ticks; each note lasts at least one tick, and at equal ticks note-offs come
 * before note-ons so a re-struck pitch reads back as two notes. opts may be NULL. */
mg_status music_notes_to_midi(const music_notes *notes, const music_notes_midi_opts *opts,
                           music_midi_file *out);

/* ======================================================================================
 * Performance encoding (Oore et al. 2018, "This time with feeling"; Huang et al. 2018, Music
 * Transformer): a piece is a stream of events on a 10 ms grid. Vocabulary, id by id:
 *
 *   id        token                    meaning
 *   0..127    NOTE_ON  p = id          start pitch p (MIDI number; 60 = C4) at the current time,
 *                                      with the current velocity
 *   128..255  NOTE_OFF p = id - 128    end pitch p at the current time
 *   256..355  TIME_SHIFT k = id - 255  advance the current time by k * 10 ms (10 ms .. 1 s)
 *   356..387  VELOCITY b = id - 356    current velocity := bin b, MIDI velocities 4b+1 .. 4b+4
 *                                      (bin 31 is 125..127); decoded as 4b+2
 *   388       START                    first token of every encoded piece
 *   389       END                      last token of every encoded piece; also the padding
 *                                      token: a padded position holds END and the training loss
 *                                      ignores it (cross-entropy ignore index), so there is no
 *                                      separate PAD id and V stays 390
 *
 * Encoding rules (music_perf_encode):
 *  - Times are quantised to the absolute 10 ms grid (round to nearest), so errors never add up
 *    along a piece: onsets and offsets come back within 5 ms. A note that rounds to zero length
 *    gets onset floor(t) and one step of length, so it stays within 10 ms.
 *  - A gap longer than 1 s is several TIME_SHIFTs: as many 1 s shifts as fit, then the rest.
 *    Silence at the start of a piece is kept (a piece may open with minutes of TIME_SHIFT 1 s).
 *  - At one grid time all NOTE_OFFs come first, then the NOTE_ONs, each in rising pitch; a
 *    VELOCITY precedes a NOTE_ON only when the bin changes (always before the first).
 *  - Channels and programs are merged into one piano: the vocabulary has no channel.
 *  - One pitch sounds once at a time. A re-struck pitch still sounding ends the earlier note at
 *    the new onset (the NOTE_OFF and NOTE_ON sit in the same step). Two onsets of one pitch in
 *    the same 10 ms step are one note: the one that ends later (then the louder) is kept.
 * Decoding (music_perf_decode) reads any sequence, including sampled ones and windows cut from a
 * piece: tokens up to the first START (when there is one) and from the first END after it are
 * ignored, a NOTE_OFF of a silent pitch is ignored, a NOTE_ON of a sounding pitch ends the
 * earlier note (or is ignored when in the same step), a note ended in its own step lasts one
 * step, notes still sounding at the end end at the time reached (at least one step after their
 * onset), and the velocity before any VELOCITY token is that of 64's bin.
 * ====================================================================================== */

enum {
    MUSIC_PERF_NOTE_ON = 0,
    MUSIC_PERF_NOTE_OFF = 128,
    MUSIC_PERF_TIME_SHIFT = 256, /* + (steps - 1) */
    MUSIC_PERF_VELOCITY = 356,   /* + bin */
    MUSIC_PERF_START = 388,
    MUSIC_PERF_END = 389,
    MUSIC_PERF_VOCAB = 390,
    MUSIC_PERF_PAD = MUSIC_PERF_END,
    MUSIC_PERF_SHIFT_STEPS = 100, /* longest TIME_SHIFT, in steps */
    MUSIC_PERF_VELOCITY_BINS = 32,
};
#define MUSIC_PERF_STEP_SECONDS 0.01

typedef struct music_tokens {
    int32_t *v;
    size_t n, cap;
} music_tokens;

void music_tokens_free(music_tokens *t);
mg_status music_tokens_push(music_tokens *t, int32_t id);

/* Appends START, the events, END to *out (notes need not be sorted). MG_ERR_INVALID for a note
 * with a negative or non-finite time, off < on, or pitch / velocity out of range. */
mg_status music_perf_encode(const music_note *notes, size_t n, music_tokens *out);
/* Appends the notes the tokens describe (sorted, channel 0, program 0). MG_ERR_INVALID names the
 * position and value of an id outside 0..389. */
mg_status music_perf_decode(const int32_t *tok, size_t n, music_notes *out);
/* "NOTE_ON 60", "NOTE_OFF 60", "TIME_SHIFT 250ms", "VELOCITY 15", "START", "END"; "?" when out
 * of range. Writes into buf (always terminated) and returns it. */
const char *music_perf_token_name(int32_t id, char *buf, size_t cap);
/* The 10 ms steps a TIME_SHIFT token advances (1..100); 0 for every other token. */
static inline int music_perf_shift_steps(int32_t id) {
    return id >= MUSIC_PERF_TIME_SHIFT && id < MUSIC_PERF_VELOCITY ? id - MUSIC_PERF_TIME_SHIFT + 1 : 0;
}
static inline int music_perf_velocity_bin(int velocity) {
    return velocity <= 1 ? 0 : velocity >= 127 ? 31 : (velocity - 1) / 4;
}
static inline int music_perf_bin_velocity(int bin) {
    return 4 * bin + 2;
}

/* ======================================================================================
 * Data augmentation (Music Transformer: transpose by up to 3 semitones, stretch time by
 * 0.95, 0.975, 1, 1.025 or 1.05).
 * ====================================================================================== */

typedef struct music_augment_opts {
    int max_transpose;      /* semitones each way; default 3 */
    int pitch_lo, pitch_hi; /* range a transposition must respect; default 21..108 (piano) */
    double max_stretch;     /* default 0.05: factors in [1 - s, 1 + s] */
    int stretch_steps;      /* default 5 evenly spaced factors (1 gives only 1.0) */
} music_augment_opts;

music_augment_opts music_augment_defaults(void);

/* Out-of-range pitches, deliberately:
 *  - music_augment_* never creates one: it draws the shift uniformly among the shifts in
 *    [-max_transpose, max_transpose] that keep every note within pitch_lo..pitch_hi. A piece that
 *    already goes beyond that range is allowed its own extent (within 0..127), so shift 0 is
 *    always possible and no note is dropped or folded into another octave.
 *  - music_notes_transpose, given an explicit shift, drops the notes that would leave 0..127 and
 *    returns how many (a caller that must not lose notes checks music_transpose_bounds first). */
size_t music_notes_transpose(music_notes *n, int semitones);
void music_transpose_bounds(const music_note *notes, size_t n, const music_augment_opts *o, int *lo,
                         int *hi);
/* Multiplies every onset and offset by factor (> 0). */
void music_notes_stretch(music_notes *n, double factor);
/* Draws a shift and a stretch with rng and applies them. shift / stretch may be NULL. */
mg_status music_augment_notes(music_notes *n, const music_augment_opts *o, mg_rng *rng, int *shift,
                           double *stretch);

/* The same on token windows (which may start or end mid-piece):
 *  - transpose shifts NOTE_ON / NOTE_OFF ids in place; MG_ERR_INVALID, with nothing changed, when
 *    a pitch would leave 0..127 (use music_perf_transpose_bounds to pick a safe shift);
 *  - stretch retimes on the absolute grid (a token at step t moves to round(t * factor)), so
 *    errors do not add up; the result is appended to *out and may be shorter or longer. */
void music_perf_transpose_bounds(const int32_t *tok, size_t n, const music_augment_opts *o, int *lo,
                              int *hi);
mg_status music_perf_transpose(int32_t *tok, size_t n, int semitones);
mg_status music_perf_stretch(const int32_t *tok, size_t n, double factor, music_tokens *out);
/* Draws a safe shift and a stretch, writes the augmented window to *out (cleared first). */
mg_status music_augment_tokens(const int32_t *tok, size_t n, const music_augment_opts *o, mg_rng *rng,
                            music_tokens *out);

/* ======================================================================================
 * A directory of MIDI files
 * ====================================================================================== */

/* Every .mid / .midi file (any case) under dir, recursively, sorted by path (strcmp) so the
 * order never depends on the file system. Symbolic links to directories are not followed (no
 * cycles). *paths is an array of n malloc'ed strings "dir/sub/name.mid"; free with
 * music_paths_free. MG_ERR_IO when dir cannot be opened (a sub-directory that cannot be opened
 * is reported through mg_log and skipped). */
mg_status music_find_files(const char *dir, char ***paths, size_t *n);
void music_paths_free(char **paths, size_t n);

typedef struct music_item {
    char *path;
    mg_status status; /* MG_OK, or why the file is skipped */
    char *error;      /* the message when status != MG_OK ("no notes" is an error too) */
    music_midi_info info;
    size_t tokens;      /* length of the encoding, START and END included */
    music_notes notes;     /* filled when opts.keep_notes */
    music_tokens encoding; /* filled when opts.keep_tokens */
} music_item;

typedef struct music_corpus {
    music_item *items; /* one per file found, in path order */
    size_t n;
    size_t n_ok, n_skipped;
    size_t notes, tokens; /* over the files kept */
    double seconds;
} music_corpus;

typedef struct music_load_opts {
    music_notes_opts notes;
    bool keep_notes, keep_tokens;
} music_load_opts;

/* Loads every file music_find_files finds. A file that cannot be read, parsed or encoded, or
 * holds no notes, is kept in the list with its error and counted as skipped; only a directory
 * that cannot be listed (or memory running out) fails the call. opts may be NULL. */
mg_status music_load_dir(const char *dir, const music_load_opts *opts, music_corpus *out);
/* Adds one file's result (used by load_dir and by the generated corpus). bytes may be NULL to
 * read path from disk. */
mg_status music_corpus_add(music_corpus *c, const char *path, const uint8_t *bytes,
                              size_t len, const music_load_opts *opts);
void music_corpus_free(music_corpus *c);
/* "158 files: 158 used, 0 skipped; 306953 notes, 9.83 hours, 1164744 tokens", then a line
 * "skipped: <error naming the file>" per skipped file. */
void music_corpus_summary(const music_corpus *c, FILE *out);

/* ======================================================================================
 * Procedural corpus: piano pieces (chord progressions, arpeggios, scales, melodies over a bass
 * line, varied tempo, humanised timing and velocity, sustain pedal), as real MIDI files.
 * ====================================================================================== */

/* Piece `index` of the corpus for `seed`: the same (seed, index) gives the same bytes whatever
 * the number of pieces asked for. Pitches stay within 21..108; all on channel 0, program 0;
 * format 0 or 1 (several tracks, pedal in the left-hand track), division 480, running status. */
mg_status music_generate_piece(uint64_t seed, uint32_t index, music_midi_file *out);
/* Writes pieces 0..n-1 as dir/gen_<seed>_<index, 4 digits>.mid (creating dir, not its parents). */
mg_status music_generate_dir(const char *dir, uint32_t n, uint64_t seed);
/* The default corpus when no --data is given: the same pieces, encoded to SMF bytes and loaded
 * back through the reader into *out, without touching the disk. */
mg_status music_generate_corpus(uint32_t n, uint64_t seed, const music_load_opts *opts,
                                   music_corpus *out);

#ifdef __cplusplus
}
#endif
#endif
