/* The music example's MIDI library: SMF reader and writer (checked against Debian's midicsv when
 * installed), notes (tempo map, sustain, re-strikes), corrupt files, the performance encoding,
 * augmentation, directory loading, the procedural generator, the `music` program, and the real
 * MIDI files of the folder named by MINIGRAD_MIDI_DIR (skipped when it is unset or not a folder).
 * Also writes the fuzz target's seed corpus. */
#include "test_util.h"
#include "music.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ======================================================================================
 * helpers
 * ====================================================================================== */

static char *make_tmpdir(void) {
    char t[256];
    tu_make_tmpdir(t, sizeof t, "mg_test_midi");
    return strdup(t);
}

static void rm_rf(char *dir) {
    ck_assert(tu_remove_tree(dir));
    free(dir);
}

static char *path_in(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    ck_assert_ptr_nonnull(p);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* The folder of real MIDI files named by MINIGRAD_MIDI_DIR, when it is set and is a folder. */
static const char *data_dir(void) {
    const char *dir = getenv("MINIGRAD_MIDI_DIR");
    if (!dir || !*dir) return NULL;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    closedir(d);
    return dir;
}

#define REAL_FILES_HOWTO "set MINIGRAD_MIDI_DIR to a folder of MIDI files to run them"

static tu_program music = {.name = "music", .rel = "examples/music/music"};

static const char *music_bin(void) {
    return tu_program_built(&music) ? music.bin : NULL;
}

static bool have_midicsv(void) {
    return system("command -v midicsv >/dev/null 2>&1") == 0;
}

static void parse_ok(const uint8_t *b, size_t n, music_midi_file *f) {
    TU_OK(music_midi_parse(b, n, "test.mid", f));
}

static void encode_ok(const music_midi_file *f, bool running, uint8_t **b, size_t *n) {
    music_midi_write_opts o = {.no_running_status = !running};
    TU_OK(music_midi_encode(f, &o, b, n));
}

/* Two files hold the same events (f's tracks sorted by tick, as the writer stores them). */
static void assert_same_events(const music_midi_file *f, const music_midi_file *g) {
    ck_assert_int_eq(f->format, g->format);
    ck_assert_int_eq(f->division, g->division);
    ck_assert_uint_eq(f->ntracks, g->ntracks);
    for (size_t t = 0; t < f->ntracks; t++) {
        music_midi_track a = f->tracks[t];
        a.ev = malloc((a.n + 1) * sizeof *a.ev);
        memcpy(a.ev, f->tracks[t].ev, a.n * sizeof *a.ev);
        music_midi_sort_track(&a);
        const music_midi_track *b = &g->tracks[t];
        ck_assert_uint_eq(a.n, b->n);
        ck_assert_uint_eq(a.end_tick, b->end_tick);
        for (size_t i = 0; i < a.n; i++) {
            const music_midi_event *x = &a.ev[i], *y = &b->ev[i];
            ck_assert_msg(x->tick == y->tick && x->status == y->status && x->type == y->type &&
                              x->d1 == y->d1 && x->d2 == y->d2 && x->len == y->len,
                          "track %zu event %zu: tick %llu/%llu status %02x/%02x", t, i,
                          (unsigned long long)x->tick, (unsigned long long)y->tick, x->status,
                          y->status);
            if (x->len) ck_assert_mem_eq(music_midi_payload(f, x), music_midi_payload(g, y), x->len);
        }
        free(a.ev);
    }
}

/* ======================================================================================
 * The feature file: the MIDI features the reader must handle, in one small file, with its notes
 * worked out by hand below (feature_notes). Division 480; tempo 500000 us/quarter (1 tick =
 * 1/960 s) until tick 960, then 250000 (1/1920 s) until tick 3840, then 400000 (1/1200 s).
 * ====================================================================================== */

static void build_feature_file(music_midi_file *f, int format) {
    music_midi_init(f, format, 480);
    size_t t0, tn, tp;
    TU_OK(music_midi_add_track(f, &t0));
    tn = tp = t0;
    if (format == 1) {
        TU_OK(music_midi_add_track(f, &tn));
        TU_OK(music_midi_add_track(f, &tp)); /* the pedal in its own track, as in two Vienna files */
    }
    static const uint8_t odd_text[5] = {'a', 0xFF, 0xFE, 0x00, 'b'}; /* not UTF-8: opaque */
    static const uint8_t ts[4] = {4, 2, 24, 8}, ks[2] = {0xFE, 1}, seq[3] = {0x00, 0x20, 0x1F};
    static const uint8_t gm_on[5] = {0x7E, 0x7F, 0x09, 0x01, 0xF7}, escape[2] = {0xF3, 0x01};
    TU_OK(music_midi_add_meta(f, t0, 0, MUSIC_MIDI_META_TRACK_NAME, "features", 8));
    TU_OK(music_midi_add_meta(f, t0, 0, MUSIC_MIDI_META_TEXT, odd_text, 5));
    TU_OK(music_midi_add_meta(f, t0, 0, MUSIC_MIDI_META_TIME_SIGNATURE, ts, 4));
    TU_OK(music_midi_add_meta(f, t0, 0, MUSIC_MIDI_META_KEY_SIGNATURE, ks, 2));
    TU_OK(music_midi_add_meta(f, t0, 0, 0x7F, seq, 3)); /* sequencer-specific */
    TU_OK(music_midi_add_sysex(f, t0, 0, MUSIC_MIDI_SYSEX, gm_on, 5));
    TU_OK(music_midi_add_tempo(f, t0, 0, 500000));
    TU_OK(music_midi_add_tempo(f, t0, 960, 250000));
    TU_OK(music_midi_add_tempo(f, t0, 3840, 400000));
    TU_OK(music_midi_add_meta(f, t0, 0, MUSIC_MIDI_META_TEXT, "", 0)); /* empty payload */

    TU_OK(music_midi_add_channel(f, tn, 0, 0xC0, 0, 0));        /* program 0 on channel 0 */
    TU_OK(music_midi_add_channel(f, tn, 0, 0xC1, 5, 0));        /* program 5 on channel 1 */
    TU_OK(music_midi_add_channel(f, tn, 0, 0xB0, 7, 100));      /* volume */
    TU_OK(music_midi_add_channel(f, tn, 10, 0xE1, 0x00, 0x40)); /* pitch bend, centre */
    TU_OK(music_midi_add_channel(f, tn, 20, 0xD1, 0x30, 0));    /* channel pressure: one data byte */
    TU_OK(music_midi_add_channel(f, tn, 30, 0xA0, 60, 10));     /* poly pressure */
    TU_OK(music_midi_add_channel(f, tn, 0, 0x90, 60, 100));
    TU_OK(music_midi_add_channel(f, tn, 100, 0x99, 36, 120)); /* drum */
    TU_OK(music_midi_add_channel(f, tn, 200, 0x89, 36, 0));
    TU_OK(music_midi_add_channel(f, tn, 240, 0x91, 60,
                              90)); /* same pitch, other channel: no re-strike */
    TU_OK(music_midi_add_channel(f, tn, 360, 0x91, 60, 0));
    TU_OK(music_midi_add_channel(f, tn, 480, 0x80, 60, 64));
    TU_OK(music_midi_add_channel(f, tn, 480, 0x90, 62, 80));
    TU_OK(music_midi_add_channel(f, tn, 960, 0x90, 62, 0)); /* velocity-0 note-off */
    TU_OK(music_midi_add_channel(f, tn, 960, 0x90, 64, 70));
    TU_OK(music_midi_add_sysex(f, tn, 1000, MUSIC_MIDI_SYSEX_ESCAPE, escape, 2)); /* between notes */
    TU_OK(music_midi_add_meta(f, tn, 1500, MUSIC_MIDI_META_TEXT, "mid", 3));
    TU_OK(music_midi_add_channel(f, tn, 1920, 0x80, 64, 0));
    TU_OK(music_midi_add_channel(f, tn, 1920, 0x90, 65, 50)); /* on, on, off, off of one pitch */
    TU_OK(music_midi_add_channel(f, tn, 2112, 0x90, 65, 60));
    TU_OK(music_midi_add_channel(f, tn, 2208, 0x80, 65, 0));
    TU_OK(music_midi_add_channel(f, tn, 2400, 0x80, 65, 0));
    TU_OK(music_midi_add_channel(f, tn, 2400, 0x90, 67, 90));
    TU_OK(music_midi_add_channel(f, tn, 2496, 0x90, 69, 40));
    TU_OK(music_midi_add_channel(f, tn, 2592, 0x80, 67, 0)); /* released under the pedal */
    TU_OK(music_midi_add_channel(f, tn, 2592, 0x80, 69, 0));
    TU_OK(music_midi_add_channel(f, tn, 2688, 0x90, 69, 41)); /* re-struck while held by the pedal */
    TU_OK(music_midi_add_channel(f, tn, 2784, 0x90, 69, 0));
    TU_OK(music_midi_add_channel(f, tn, 3000, 0x90, 71, 30));
    TU_OK(music_midi_add_channel(f, tn, 3456, 0x80, 71, 0));  /* key still down when the pedal lifts */
    TU_OK(music_midi_add_channel(f, tn, 3500, 0x80, 50, 0));  /* nothing sounding: ignored */
    TU_OK(music_midi_add_channel(f, tn, 3600, 0x90, 72, 64)); /* never released */
    f->tracks[tn].end_tick = 4080;
    /* Pedal events last, so that in format 0 they follow the notes of their tick too. */
    TU_OK(music_midi_add_channel(f, tp, 2000, 0xB0, 64, 30)); /* below 64: up */
    TU_OK(music_midi_add_channel(f, tp, 2400, 0xB0, 64, 127));
    TU_OK(music_midi_add_channel(f, tp, 3000, 0xB0, 64, 100)); /* still down */
    TU_OK(music_midi_add_channel(f, tp, 3360, 0xB0, 64, 0));
}

typedef struct xnote {
    double on, off;
    int pitch, vel, ch, prog;
} xnote;

static const xnote feature_notes[] = {
    {0.0, 0.5, 60, 100, 0, 0},   {0.25, 0.375, 60, 90, 1, 5}, {0.5, 1.0, 62, 80, 0, 0},
    {1.0, 1.5, 64, 70, 0, 0},    {1.5, 1.65, 65, 50, 0, 0},   {1.6, 1.75, 65, 60, 0, 0},
    {1.75, 2.25, 67, 90, 0, 0},  {1.8, 1.9, 69, 40, 0, 0},    {1.9, 2.25, 69, 41, 0, 0},
    {2.0625, 2.3, 71, 30, 0, 0}, {2.375, 2.7, 72, 64, 0, 0},
};
#define N_FEATURE_NOTES (sizeof feature_notes / sizeof feature_notes[0])

static void assert_notes(const music_notes *n, const xnote *x, size_t nx) {
    ck_assert_uint_eq(n->n, nx);
    for (size_t i = 0; i < nx; i++) {
        const music_note *a = &n->v[i];
        ck_assert_msg(fabs(a->on - x[i].on) < 1e-9 && fabs(a->off - x[i].off) < 1e-9 &&
                          a->pitch == x[i].pitch && a->velocity == x[i].vel &&
                          a->channel == x[i].ch && a->program == x[i].prog,
                      "note %zu: got [%.6f, %.6f] p%d v%d ch%d prog%d, want [%.6f, %.6f] p%d v%d "
                      "ch%d prog%d",
                      i, a->on, a->off, a->pitch, a->velocity, a->channel, a->program, x[i].on,
                      x[i].off, x[i].pitch, x[i].vel, x[i].ch, x[i].prog);
    }
}

/* ======================================================================================
 * SMF reader and writer
 * ====================================================================================== */

START_TEST(writer_golden_bytes) {
    /* Assembled by hand from the SMF 1.0 spec: tempo, note-on, velocity-0 note-off and a second
     * note-on under running status, a delta of 192 (two VLQ bytes), End-of-Track. */
    /* clang-format off */
    static const uint8_t rs[] = {'M', 'T', 'h', 'd', 0, 0, 0, 6, 0, 0, 0, 1, 0, 0x60,
                                 'M', 'T', 'r', 'k', 0, 0, 0, 25,
                                 0x00, 0xFF, 0x51, 0x03, 0x07, 0xA1, 0x20,
                                 0x00, 0x90, 0x3C, 0x64,
                                 0x60, 0x3C, 0x00,
                                 0x00, 0x3E, 0x64,
                                 0x81, 0x40, 0x3E, 0x00,
                                 0x00, 0xFF, 0x2F, 0x00};
    static const uint8_t plain[] = {'M', 'T', 'h', 'd', 0, 0, 0, 6, 0, 0, 0, 1, 0, 0x60,
                                    'M', 'T', 'r', 'k', 0, 0, 0, 28,
                                    0x00, 0xFF, 0x51, 0x03, 0x07, 0xA1, 0x20,
                                    0x00, 0x90, 0x3C, 0x64,
                                    0x60, 0x90, 0x3C, 0x00,
                                    0x00, 0x90, 0x3E, 0x64,
                                    0x81, 0x40, 0x90, 0x3E, 0x00,
                                    0x00, 0xFF, 0x2F, 0x00};
    /* clang-format on */
    music_midi_file f, g;
    music_midi_init(&f, 0, 96);
    size_t t;
    TU_OK(music_midi_add_track(&f, &t));
    TU_OK(music_midi_add_tempo(&f, t, 0, 500000));
    TU_OK(music_midi_add_channel(&f, t, 0, 0x90, 60, 100));
    TU_OK(music_midi_add_channel(&f, t, 96, 0x90, 60, 0));
    TU_OK(music_midi_add_channel(&f, t, 96, 0x90, 62, 100));
    TU_OK(music_midi_add_channel(&f, t, 288, 0x90, 62, 0));
    uint8_t *b;
    size_t n;
    encode_ok(&f, true, &b, &n);
    ck_assert_uint_eq(n, sizeof rs);
    ck_assert_mem_eq(b, rs, n);
    free(b);
    encode_ok(&f, false, &b, &n);
    ck_assert_uint_eq(n, sizeof plain);
    ck_assert_mem_eq(b, plain, n);
    free(b);
    /* the reader gives back the same events from both */
    parse_ok(rs, sizeof rs, &g);
    assert_same_events(&f, &g);
    music_midi_free(&g);
    parse_ok(plain, sizeof plain, &g);
    assert_same_events(&f, &g);
    music_midi_free(&g);
    music_midi_free(&f);
}
END_TEST

START_TEST(vlq_limits) {
    /* deltas at every VLQ length boundary, then the largest, then one too many */
    static const uint32_t d[] = {0, 1, 127, 128, 16383, 16384, 2097151, 2097152, 0x0FFFFFFF};
    music_midi_file f, g;
    music_midi_init(&f, 0, 480);
    size_t t;
    TU_OK(music_midi_add_track(&f, &t));
    uint64_t tick = 0;
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        tick += d[i];
        TU_OK(music_midi_add_channel(&f, t, tick, 0xB0, 1, (uint8_t)i));
    }
    uint8_t *b;
    size_t n;
    encode_ok(&f, true, &b, &n);
    /* the last delta is the 4-byte maximum FF FF FF 7F, just before the repeated-status data */
    const uint8_t max_vlq[] = {0xFF, 0xFF, 0xFF, 0x7F, 0x01, 0x08};
    ck_assert_ptr_nonnull(memmem(b, n, max_vlq, sizeof max_vlq));
    const uint8_t vlq_16384[] = {0x81, 0x80, 0x00, 0x01, 0x05};
    ck_assert_ptr_nonnull(memmem(b, n, vlq_16384, sizeof vlq_16384));
    parse_ok(b, n, &g);
    assert_same_events(&f, &g);
    free(b);
    music_midi_free(&g);
    /* a gap that no delta time can hold */
    TU_OK(music_midi_add_channel(&f, t, tick + 0x10000000ULL, 0xB0, 1, 0));
    ck_assert_int_eq(music_midi_encode(&f, NULL, &b, &n), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "0x0FFFFFFF"));
    ck_assert_ptr_null(b);
    music_midi_free(&f);
}
END_TEST

/* Variants: format 0/1 x running status on/off. */
START_TEST(feature_file_roundtrip) {
    int format = _i / 2;
    bool running = _i % 2 == 0;
    music_midi_file f, g;
    build_feature_file(&f, format);
    uint8_t *b, *b2;
    size_t n, n2;
    encode_ok(&f, running, &b, &n);
    parse_ok(b, n, &g);
    assert_same_events(&f, &g);
    /* written again from what was read: the same bytes */
    encode_ok(&g, running, &b2, &n2);
    ck_assert_uint_eq(n, n2);
    ck_assert_mem_eq(b, b2, n);
    free(b2);
    /* Running status saves exactly one byte per channel message that repeats the previous
     * status of its track with no meta or sysex event in between. */
    size_t repeats = 0;
    for (size_t t = 0; t < g.ntracks; t++) {
        uint8_t prev = 0;
        for (size_t i = 0; i < g.tracks[t].n; i++) {
            uint8_t s = g.tracks[t].ev[i].status;
            if (s < 0xF0 && s == prev) repeats++;
            prev = s < 0xF0 ? s : 0;
        }
    }
    ck_assert_uint_gt(repeats, 5);
    encode_ok(&f, !running, &b2, &n2);
    ck_assert_uint_eq(running ? n2 - n : n - n2, repeats);
    free(b2);
    free(b);
    music_midi_free(&g);
    music_midi_free(&f);
}
END_TEST

START_TEST(feature_file_notes) {
    int format = _i;
    music_midi_file f, g;
    build_feature_file(&f, format);
    uint8_t *b;
    size_t n;
    encode_ok(&f, true, &b, &n);
    parse_ok(b, n, &g);
    free(b);
    music_notes notes;
    music_midi_info info;
    TU_OK(music_midi_to_notes(&g, "features.mid", NULL, &notes, &info));
    assert_notes(&notes, feature_notes, N_FEATURE_NOTES);
    ck_assert_int_eq(info.format, format);
    ck_assert_int_eq(info.division, 480);
    ck_assert_uint_eq(info.ntracks, format ? 3 : 1);
    ck_assert_uint_eq(info.note_ons, 12);
    ck_assert_uint_eq(info.tempo_events, 3);
    ck_assert_uint_eq(info.notes, 11);
    ck_assert_uint_eq(info.restrikes, 2);
    ck_assert_uint_eq(info.unmatched_offs, 1);
    ck_assert_uint_eq(info.unterminated, 1);
    ck_assert_uint_eq(info.drum_notes, 1);
    ck_assert_double_eq_tol(info.seconds, 2.7, 1e-9);
    music_notes_free(&notes);

    /* without the pedal, released notes end at their note-off */
    music_notes_opts o = {.no_sustain = true};
    TU_OK(music_midi_to_notes(&g, "features.mid", &o, &notes, &info));
    xnote dry[N_FEATURE_NOTES];
    memcpy(dry, feature_notes, sizeof dry);
    dry[6].off = 1.85;
    dry[7].off = 1.85;
    dry[8].off = 1.95;
    assert_notes(&notes, dry, N_FEATURE_NOTES);
    ck_assert_uint_eq(info.restrikes, 1);
    music_notes_free(&notes);

    /* the drum note comes back when asked for */
    o = (music_notes_opts){.keep_drums = true};
    TU_OK(music_midi_to_notes(&g, "features.mid", &o, &notes, &info));
    ck_assert_uint_eq(notes.n, N_FEATURE_NOTES + 1);
    ck_assert_uint_eq(info.drum_notes, 0);
    bool found = false;
    for (size_t i = 0; i < notes.n; i++)
        if (notes.v[i].channel == 9) {
            found = true;
            ck_assert_double_eq_tol(notes.v[i].on, 100.0 / 960, 1e-9);
            ck_assert_double_eq_tol(notes.v[i].off, 200.0 / 960, 1e-9);
        }
    ck_assert(found);
    music_notes_free(&notes);

    /* the same notes from the builder's unsorted tracks, without a write */
    TU_OK(music_midi_to_notes(&f, "features.mid", NULL, &notes, NULL));
    assert_notes(&notes, feature_notes, N_FEATURE_NOTES);
    music_notes_free(&notes);

    /* a file too long to be believed */
    o = (music_notes_opts){.max_seconds = 2.0};
    ck_assert_int_eq(music_midi_to_notes(&g, "features.mid", &o, &notes, NULL), MG_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "features.mid: lasts 3 s"));
    ck_assert_ptr_null(notes.v);
    music_midi_free(&g);
    music_midi_free(&f);
}
END_TEST

START_TEST(smpte_and_format2) {
    /* 25 frames/s x 40 ticks/frame = 1000 ticks/s, whatever the tempo says */
    music_midi_file f, g;
    music_midi_init(&f, 0, (int)(int16_t)0xE728);
    size_t t;
    TU_OK(music_midi_add_track(&f, &t));
    TU_OK(music_midi_add_tempo(&f, t, 0, 1000000));
    TU_OK(music_midi_add_channel(&f, t, 500, 0x90, 60, 100));
    TU_OK(music_midi_add_channel(&f, t, 1500, 0x80, 60, 0));
    uint8_t *b;
    size_t n;
    encode_ok(&f, true, &b, &n);
    ck_assert_uint_eq(b[12], 0xE7);
    ck_assert_uint_eq(b[13], 0x28);
    parse_ok(b, n, &g);
    free(b);
    ck_assert_int_eq(g.division, (int)(int16_t)0xE728);
    music_notes notes;
    music_midi_info info;
    TU_OK(music_midi_to_notes(&g, "smpte.mid", NULL, &notes, &info));
    ck_assert_uint_eq(notes.n, 1);
    ck_assert_double_eq_tol(notes.v[0].on, 0.5, 1e-12);
    ck_assert_double_eq_tol(notes.v[0].off, 1.5, 1e-12);
    music_notes_free(&notes);
    music_midi_free(&g);
    music_midi_free(&f);

    /* format 2 reads and writes, but is not one piece to play */
    music_midi_init(&f, 2, 480);
    TU_OK(music_midi_add_track(&f, &t));
    TU_OK(music_midi_add_track(&f, &t));
    encode_ok(&f, true, &b, &n);
    parse_ok(b, n, &g);
    free(b);
    ck_assert_int_eq(g.format, 2);
    ck_assert_int_eq(music_midi_to_notes(&g, "two.mid", NULL, &notes, NULL), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "two.mid: format 2"));
    music_midi_free(&g);
    music_midi_free(&f);
}
END_TEST

START_TEST(writer_rejects_what_smf_cannot_hold) {
    music_midi_file f;
    uint8_t *b;
    size_t n, t;
    music_midi_init(&f, 0, 480);
    ck_assert_int_eq(music_midi_encode(&f, NULL, &b, &n), MG_ERR_INVALID); /* no track */
    TU_OK(music_midi_add_track(&f, &t));
    TU_OK(music_midi_add_track(&f, &t));
    ck_assert_int_eq(music_midi_encode(&f, NULL, &b, &n), MG_ERR_INVALID); /* format 0, 2 tracks */
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "format 0"));
    f.format = 1;
    f.division = 0;
    ck_assert_int_eq(music_midi_encode(&f, NULL, &b, &n), MG_ERR_INVALID);
    f.division = 480;
    TU_OK(music_midi_encode(&f, NULL, &b, &n));
    free(b);
    ck_assert_int_eq(music_midi_add_channel(&f, 0, 0, 0x90, 128, 1), MG_ERR_INVALID);
    ck_assert_int_eq(music_midi_add_channel(&f, 0, 0, 0xF0, 1, 1), MG_ERR_INVALID);
    ck_assert_int_eq(music_midi_add_channel(&f, 5, 0, 0x90, 1, 1), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "track 5"));
    ck_assert_int_eq(music_midi_add_meta(&f, 0, 0, 0x2F, NULL, 0), MG_ERR_INVALID);
    ck_assert_int_eq(music_midi_add_tempo(&f, 0, 0, 0), MG_ERR_INVALID);
    ck_assert_int_eq(music_midi_add_sysex(&f, 0, 0, 0x90, NULL, 0), MG_ERR_INVALID);
    /* a write into a directory that does not exist fails cleanly and leaves nothing */
    ck_assert_int_eq(music_midi_write("/nonexistent-dir/x.mid", &f, NULL), MG_ERR_IO);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "/nonexistent-dir/x.mid"));
    music_midi_free(&f);
}
END_TEST

START_TEST(notes_to_midi_roundtrip) {
    /* format 0/1 x note-off style; notes in seconds on three channels, overlapping notes of
     * one pitch (written first-on first-off, which the reader matches the same way), a note
     * shorter than a tick */
    int format = _i / 2;
    bool vel0 = _i % 2;
    mg_rng r = mg_rng_make(11 + (uint64_t)_i);
    music_notes in = {0}, out;
    /* times on the tick grid (1/1600 s here), so that sorting both lists gives the same order */
    for (int i = 0; i < 300; i++) {
        double on = round(mg_rng_double(&r) * 60 * 1600) / 1600;
        music_note x = {.on = on,
                     .off = on + round((0.01 + mg_rng_double(&r) * 3) * 1600) / 1600,
                     .pitch = (uint8_t)(30 + mg_rng_below(&r, 60)),
                     .velocity = (uint8_t)(1 + mg_rng_below(&r, 127)),
                     .channel = (uint8_t)mg_rng_below(&r, 3)};
        x.program = (uint8_t)(x.channel * 7);
        TU_OK(music_notes_push(&in, x));
    }
    /* same-pitch overlaps must be first-in first-out to survive MIDI: make them so */
    music_notes_sort(&in);
    for (size_t i = 0; i < in.n; i++)
        for (size_t j = i + 1; j < in.n; j++)
            if (in.v[j].pitch == in.v[i].pitch && in.v[j].channel == in.v[i].channel &&
                in.v[j].off < in.v[i].off)
                in.v[j].off = in.v[i].off + 16.0 / 1600;
    TU_OK(music_notes_push(&in, (music_note){.on = 61, .off = 61.0001, .pitch = 90, .velocity = 5}));
    music_notes_midi_opts o = {
        .format = format, .division = 960, .us_per_quarter = 600000, .note_off_as_vel0 = vel0};
    music_midi_file f, g;
    TU_OK(music_notes_to_midi(&in, &o, &f));
    ck_assert_uint_eq(f.ntracks, format ? 4 : 1);
    uint8_t *b;
    size_t n;
    encode_ok(&f, true, &b, &n);
    parse_ok(b, n, &g);
    free(b);
    size_t offs = 0;
    for (size_t t = 0; t < g.ntracks; t++)
        for (size_t i = 0; i < g.tracks[t].n; i++)
            offs += (g.tracks[t].ev[i].status & 0xF0) == 0x80;
    ck_assert_uint_eq(offs, vel0 ? 0 : in.n);
    music_midi_info info;
    TU_OK(music_midi_to_notes(&g, "notes.mid", NULL, &out, &info));
    ck_assert_uint_eq(info.unmatched_offs, 0);
    ck_assert_uint_eq(info.unterminated, 0);
    music_notes_sort(&in);
    ck_assert_uint_eq(out.n, in.n);
    double tick = 0.6 / 960; /* seconds per tick */
    for (size_t i = 0; i < in.n; i++) {
        ck_assert_uint_eq(out.v[i].pitch, in.v[i].pitch);
        ck_assert_uint_eq(out.v[i].velocity, in.v[i].velocity);
        ck_assert_uint_eq(out.v[i].channel, in.v[i].channel);
        ck_assert_uint_eq(out.v[i].program, in.v[i].program);
        ck_assert_double_le(fabs(out.v[i].on - in.v[i].on), tick / 2 + 1e-9);
        ck_assert_double_le(fabs(out.v[i].off - in.v[i].off), tick + 1e-9);
        ck_assert_double_gt(out.v[i].off, out.v[i].on); /* the short note lasts a tick */
    }
    music_notes_free(&out);
    music_midi_free(&g);
    music_midi_free(&f);
    /* what cannot be written */
    in.v[3].velocity = 0;
    ck_assert_int_eq(music_notes_to_midi(&in, &o, &f), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "note 3"));
    music_notes_free(&in);
}
END_TEST

/* ======================================================================================
 * midicsv (Debian package midicsv) as an independent reader
 * ====================================================================================== */

typedef struct csv_ev {
    unsigned track;
    unsigned long long tick;
    int status; /* channel status byte, or 0x151 for Set Tempo, 0x1F0 for sysex */
    int d1, d2;
} csv_ev;

typedef struct csv_file {
    int format, ntracks, division;
    csv_ev *ev;
    size_t n, cap;
} csv_file;

/* Runs midicsv and keeps what it says about channel messages, tempo and sysex events. */
static void midicsv_read(const char *path, csv_file *c) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "midicsv '%s' 2>&1", path);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    memset(c, 0, sizeof *c);
    c->format = -1;
    char line[8192];
    static const struct {
        const char *name;
        int status, nargs;
    } kinds[] = {{"Note_on_c", 0x90, 3},         {"Note_off_c", 0x80, 3},
                 {"Control_c", 0xB0, 3},         {"Program_c", 0xC0, 2},
                 {"Pitch_bend_c", 0xE0, 2},      {"Channel_aftertouch_c", 0xD0, 2},
                 {"Poly_aftertouch_c", 0xA0, 3}, {"Tempo", 0x151, 1},
                 {"System_exclusive", 0x1F0, 0}, {"System_exclusive_packet", 0x1F7, 0}};
    while (fgets(line, sizeof line, p)) {
        unsigned track;
        unsigned long long tick;
        char type[64];
        int a = 0, b = 0, d = 0, used = 0;
        if (sscanf(line, "%u, %llu, %63[^,\n]%n", &track, &tick, type, &used) < 3) continue;
        const char *rest = line + used;
        if (strcmp(type, "Header") == 0) {
            ck_assert_int_eq(sscanf(rest, ", %d, %d, %d", &c->format, &c->ntracks, &c->division),
                             3);
            continue;
        }
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            if (strcmp(type, kinds[k].name) != 0) continue;
            int got = kinds[k].nargs ? sscanf(rest, ", %d, %d, %d", &a, &b, &d) : 0;
            ck_assert_int_ge(got, kinds[k].nargs);
            csv_ev e = {track, tick, kinds[k].status, 0, 0};
            if (kinds[k].status < 0x100) {
                e.status |= a;
                if (kinds[k].status == 0xE0) {
                    e.d1 = b & 0x7F;
                    e.d2 = b >> 7;
                } else {
                    e.d1 = b;
                    e.d2 = kinds[k].nargs == 3 ? d : 0;
                }
            } else if (kinds[k].status == 0x151) {
                e.d1 = a;
            }
            if (c->n == c->cap) {
                c->cap = c->cap ? 2 * c->cap : 1024;
                c->ev = realloc(c->ev, c->cap * sizeof *c->ev);
            }
            c->ev[c->n++] = e;
        }
    }
    ck_assert_int_eq(pclose(p), 0);
}

/* midicsv's view of the file equals ours: header, and per track every channel message, tempo
 * and sysex event with its tick, in file order. */
static void assert_midicsv_agrees(const char *path, const music_midi_file *f) {
    csv_file c;
    midicsv_read(path, &c);
    ck_assert_int_eq(c.format, f->format);
    ck_assert_int_eq(c.ntracks, (int)f->ntracks);
    ck_assert_int_eq(c.division, f->division > 0 ? f->division : (f->division & 0xFFFF));
    size_t k = 0, notes = 0;
    for (size_t t = 0; t < f->ntracks; t++)
        for (size_t i = 0; i < f->tracks[t].n; i++) {
            const music_midi_event *e = &f->tracks[t].ev[i];
            int status = e->status;
            int d1 = e->d1, d2 = e->d2;
            if (e->status == 0xFF) {
                if (e->type != MUSIC_MIDI_META_TEMPO) continue;
                const uint8_t *p = music_midi_payload(f, e);
                status = 0x151;
                d1 = p[0] << 16 | p[1] << 8 | p[2];
                d2 = 0;
            } else if (e->status >= 0xF0) {
                status = 0x100 | e->status;
                d1 = d2 = 0;
            }
            ck_assert_uint_lt(k, c.n);
            const csv_ev *x = &c.ev[k++];
            ck_assert_msg(x->track == t + 1 && x->tick == e->tick && x->status == status &&
                              x->d1 == d1 && x->d2 == d2,
                          "%s: event %zu: midicsv says track %u tick %llu %x %d %d, we say track "
                          "%zu tick %llu %x %d %d",
                          path, k - 1, x->track, x->tick, x->status, x->d1, x->d2, t + 1,
                          (unsigned long long)e->tick, status, d1, d2);
            notes += (status & 0xE0) == 0x80;
        }
    ck_assert_uint_eq(k, c.n);
    ck_assert_uint_gt(notes, 0);
    free(c.ev);
}

START_TEST(midicsv_reads_our_files) {
    char *dir = make_tmpdir();
    for (int v = 0; v < 4; v++) {
        music_midi_file f, g;
        build_feature_file(&f, v / 2);
        char name[32];
        snprintf(name, sizeof name, "feature_%d.mid", v);
        char *p = path_in(dir, name);
        music_midi_write_opts o = {.no_running_status = v % 2};
        TU_OK(music_midi_write(p, &f, &o));
        TU_OK(music_midi_read(p, &g));
        assert_midicsv_agrees(p, &g);
        music_midi_free(&g);
        music_midi_free(&f);
        free(p);
    }
    for (uint32_t i = 0; i < 3; i++) {
        music_midi_file f, g;
        TU_OK(music_generate_piece(99, i, &f));
        char name[32];
        snprintf(name, sizeof name, "gen_%u.mid", i);
        char *p = path_in(dir, name);
        TU_OK(music_midi_write(p, &f, NULL));
        TU_OK(music_midi_read(p, &g));
        assert_midicsv_agrees(p, &g);
        music_midi_free(&g);
        music_midi_free(&f);
        free(p);
    }
    rm_rf(dir);
}
END_TEST

START_TEST(midicsv_agrees_on_real_files) {
    char **paths;
    size_t n;
    TU_OK(music_find_files(data_dir(), &paths, &n));
    ck_assert_uint_gt(n, 0);
    size_t step = n / 12 + 1, checked = 0; /* a spread of files keeps this quick */
    for (size_t i = 0; i < n; i += step, checked++) {
        music_midi_file f;
        TU_OK(music_midi_read(paths[i], &f));
        assert_midicsv_agrees(paths[i], &f);
        music_midi_free(&f);
    }
    ck_assert_uint_ge(checked, 10);
    music_paths_free(paths, n);
}
END_TEST

/* ======================================================================================
 * Corrupt files: each case names the byte offset where the reader must stop
 * ====================================================================================== */

typedef struct corrupt_case {
    const char *name;
    const uint8_t *bytes;
    size_t len;
    size_t offset;
    const char *says;
} corrupt_case;

/* clang-format off */
#define HDR(fmt, ntr, div) 'M', 'T', 'h', 'd', 0, 0, 0, 6, 0, (fmt), 0, (ntr), ((div) >> 8), ((div)&0xFF)
#define TRK(len) 'M', 'T', 'r', 'k', 0, 0, ((len) >> 8), ((len)&0xFF)
#define CASE(n, off, msg, ...)                                                                     \
    {n, (const uint8_t[]){__VA_ARGS__}, sizeof((const uint8_t[]){__VA_ARGS__}), off, msg}

static const corrupt_case corrupt[] = {
    {"empty file", (const uint8_t *)"", 0, 0, "missing MThd header"},
    CASE("not a MIDI file", 0, "missing MThd header", 'R', 'I', 'F', 'F', 0, 0, 0, 4, 'R', 'M', 'I', 'D'),
    CASE("header chunk too short", 4, "header chunk length 5 is shorter than 6", 'M', 'T', 'h', 'd',
         0, 0, 0, 5, 0, 0, 0, 1, 0),
    CASE("header runs past the end", 4, "header chunk length 100 runs past the end", 'M', 'T', 'h',
         'd', 0, 0, 0, 100, 0, 0, 0, 1, 0, 96),
    CASE("format 3", 8, "format 3 is not 0, 1 or 2", HDR(3, 1, 96), TRK(4), 0, 0xFF, 0x2F, 0),
    CASE("no tracks", 10, "header declares no tracks", HDR(1, 0, 96)),
    CASE("format 0 with two tracks", 10, "format 0 must hold exactly one track", HDR(0, 2, 96),
         TRK(4), 0, 0xFF, 0x2F, 0, TRK(4), 0, 0xFF, 0x2F, 0),
    CASE("division 0", 12, "division is 0", HDR(0, 1, 0), TRK(4), 0, 0xFF, 0x2F, 0),
    CASE("bad SMPTE rate", 12, "SMPTE division", HDR(0, 1, 0xEA28), TRK(4), 0, 0xFF, 0x2F, 0),
    CASE("absurd track count", 10, "header declares 255 tracks but only 12 bytes follow",
         HDR(1, 255, 96), TRK(4), 0, 0xFF, 0x2F, 0),
    CASE("missing track", 34, "file ends after 1 of the 2 tracks", HDR(1, 2, 96), TRK(12), 0, 0xFF,
         0x01, 4, 'a', 'b', 'c', 'd', 0, 0xFF, 0x2F, 0),
    CASE("truncated chunk header", 26, "truncated chunk header (5 bytes left)", HDR(1, 2, 96),
         TRK(4), 0, 0xFF, 0x2F, 0, 'M', 'T', 'r', 'k', 0),
    CASE("track length past the end", 18, "track chunk length 1000 runs past the end", HDR(0, 1, 96),
         TRK(1000), 0, 0xFF, 0x2F, 0),
    CASE("unknown chunk past the end", 18, "unknown chunk length 1000 runs past the end",
         HDR(0, 1, 96), 'X', 'F', 'I', 'H', 0, 0, 0x03, 0xE8, 0, 0),
    CASE("delta time past the end", 22, "delta time (variable-length quantity) runs past the end of "
                                        "track 0",
         HDR(0, 1, 96), TRK(2), 0x81, 0x82),
    CASE("delta time of 5 bytes", 22, "delta time (variable-length quantity) is longer than 4 bytes",
         HDR(0, 1, 96), TRK(9), 0x81, 0x81, 0x81, 0x81, 0x00, 0x90, 0x3C, 0x40, 0),
    CASE("data byte without status", 23, "data byte 0x3c in track 0 with no running status",
         HDR(0, 1, 96), TRK(3), 0, 0x3C, 0x40),
    CASE("data byte with top bit", 25, "data byte 0x90 of channel message 0x90 has its top bit set",
         HDR(0, 1, 96), TRK(4), 0, 0x90, 0x3C, 0x90),
    CASE("channel message cut by the end", 23, "channel message 0x90 needs 2 data bytes",
         HDR(0, 1, 96), TRK(3), 0, 0x90, 0x3C),
    CASE("meta past the end", 23, "meta event 0x01 of 16 bytes runs past the end of track 0",
         HDR(0, 1, 96), TRK(5), 0, 0xFF, 0x01, 0x10, 'a'),
    CASE("meta length past the end", 25, "meta event length (variable-length quantity) runs past",
         HDR(0, 1, 96), TRK(4), 0, 0xFF, 0x01, 0x80),
    CASE("meta without type", 23, "meta event with no type byte", HDR(0, 1, 96), TRK(2), 0, 0xFF),
    CASE("sysex past the end", 23, "sysex event of 5 bytes runs past the end of track 0",
         HDR(0, 1, 96), TRK(4), 0, 0xF0, 0x05, 0x01),
    CASE("system common status", 23, "status byte 0xf2 is a real-time or system-common message",
         HDR(0, 1, 96), TRK(4), 0, 0xF2, 0x00, 0x00),
    CASE("delta with no event", 23, "track 0 ends after a delta time, with no event", HDR(0, 1, 96),
         TRK(1), 0),
    CASE("second track corrupt", 35, "data byte 0x40 in track 1 with no running status",
         HDR(1, 2, 96), TRK(4), 0, 0xFF, 0x2F, 0, TRK(4), 0, 0x40, 0x40, 0x40),
    CASE("tempo of 0", 23, "tempo meta event (0x51) sets 0 microseconds per quarter note",
         HDR(0, 1, 96), TRK(18), 0, 0xFF, 0x51, 0x03, 0, 0, 0, 0, 0x90, 0x3C, 0x40, 0x60, 0x3C, 0,
         0, 0xFF, 0x2F, 0),
};
#define N_CORRUPT (sizeof corrupt / sizeof corrupt[0])
/* clang-format on */

START_TEST(corrupt_files_name_file_and_offset) {
    const corrupt_case *c = &corrupt[_i];
    music_midi_file f;
    memset(&f, 0x5A, sizeof f);
    ck_assert_int_eq(music_midi_parse(c->bytes, c->len, "corrupt.mid", &f), MG_ERR_FORMAT);
    char want[256];
    snprintf(want, sizeof want, "corrupt.mid: offset %zu: ", c->offset);
    const char *msg = mg_last_error();
    ck_assert_msg(strncmp(msg, want, strlen(want)) == 0 && strstr(msg, c->says),
                  "%s: got \"%s\", want \"%s...%s\"", c->name, msg, want, c->says);
    ck_assert_ptr_null(f.tracks); /* left empty, safe to free */
    music_midi_free(&f);
    /* through the file system the message names the path */
    char *dir = make_tmpdir(), *p = path_in(dir, "bad file.mid");
    tu_write_bytes(p, c->bytes, c->len);
    ck_assert_int_eq(music_midi_read(p, &f), MG_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), p));
    ck_assert_ptr_nonnull(strstr(mg_last_error(), c->says));
    free(p);
    rm_rf(dir);
}
END_TEST

START_TEST(missing_file) {
    music_midi_file f;
    ck_assert_int_eq(music_midi_read("/nonexistent/song.mid", &f), MG_ERR_IO);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "/nonexistent/song.mid: cannot open: "));
    ck_assert_ptr_nonnull(strstr(mg_last_error(), strerror(ENOENT)));
    music_midi_free(&f);
}
END_TEST

/* A file larger than the 256 MiB a MIDI file may have (sparse: no disk is used) is refused by
 * its size, before a byte is read or allocated for it; a corpus directory skips it with that
 * reason. */
START_TEST(oversized_file_is_refused_unread) {
    char *dir = make_tmpdir(), *p = path_in(dir, "huge.mid");
    FILE *fp = fopen(p, "wb");
    ck_assert_ptr_nonnull(fp);
    ck_assert_int_eq(ftruncate(fileno(fp), ((off_t)256 << 20) + 1), 0);
    fclose(fp);
    music_midi_file f;
    double t0 = mg_time();
    ck_assert_int_eq(music_midi_read(p, &f), MG_ERR_IO);
    ck_assert_msg(strstr(mg_last_error(), "huge.mid: larger than 268435456 bytes: not read"), "%s", mg_last_error());
    ck_assert_msg(mg_time() - t0 < 0.5, "refusing it took %.2f s: it was read", mg_time() - t0);
    music_midi_free(&f);
    music_corpus c;
    ck_assert_int_eq(music_load_dir(dir, NULL, &c), MG_OK);
    ck_assert_uint_eq(c.n_skipped, 1);
    ck_assert_ptr_nonnull(strstr(c.items[0].error, "larger than 268435456 bytes"));
    music_corpus_free(&c);
    free(p);
    rm_rf(dir);
}
END_TEST

START_TEST(every_truncation_fails_cleanly) {
    music_midi_file f, g;
    build_feature_file(&f, 1);
    uint8_t *b;
    size_t n;
    encode_ok(&f, true, &b, &n);
    for (size_t k = 0; k < n; k++) {
        uint8_t *cut = malloc(k + 1); /* exact size, so ASan sees any read past the end */
        memcpy(cut, b, k);
        ck_assert_int_eq(music_midi_parse(cut, k, "cut.mid", &g), MG_ERR_FORMAT);
        const char *msg = mg_last_error();
        ck_assert_msg(strncmp(msg, "cut.mid: offset ", 16) == 0, "%zu bytes: %s", k, msg);
        ck_assert_uint_le(strtoull(msg + 16, NULL, 10), k);
        free(cut);
    }
    free(b);
    music_midi_free(&f);
}
END_TEST

START_TEST(random_damage_never_crashes) {
    /* A seeded mutation loop over real-looking files; the fuzz target goes further. Whatever the
     * damage, the reader either fails with a message naming the file or returns a file whose
     * notes and tokens can be computed. */
    mg_rng r = mg_rng_make(2024);
    uint8_t *src[2];
    size_t srcn[2];
    music_midi_file f;
    build_feature_file(&f, 1);
    encode_ok(&f, true, &src[0], &srcn[0]);
    music_midi_free(&f);
    TU_OK(music_generate_piece(5, 0, &f));
    encode_ok(&f, true, &src[1], &srcn[1]);
    music_midi_free(&f);
    size_t parsed = 0, failed = 0;
    for (int it = 0; it < 1500; it++) {
        size_t which = it % 2, n = srcn[which];
        uint8_t *b = malloc(n + 16);
        memcpy(b, src[which], n);
        int edits = 1 + (int)mg_rng_below(&r, 4);
        for (int e = 0; e < edits; e++) {
            size_t at = mg_rng_below(&r, (uint32_t)n);
            switch (mg_rng_below(&r, 4)) {
            case 0:
                b[at] = (uint8_t)mg_rng_next(&r);
                break;
            case 1:
                b[at] ^= (uint8_t)(1u << mg_rng_below(&r, 8));
                break;
            case 2:
                n = at;
                break; /* truncate */
            default:   /* an absurd length or delta in a likely place */
                if (at + 4 <= n) memcpy(b + at, "\xFF\xFF\xFF\x7F", 4);
            }
        }
        uint8_t *exact = malloc(n + 1);
        memcpy(exact, b, n);
        free(b);
        music_midi_file g;
        if (music_midi_parse(exact, n, "damaged.mid", &g) != MG_OK) {
            ck_assert_msg(strncmp(mg_last_error(), "damaged.mid: offset ", 20) == 0, "%s",
                          mg_last_error());
            failed++;
        } else {
            parsed++;
            music_notes notes;
            if (music_midi_to_notes(&g, "damaged.mid", NULL, &notes, NULL) == MG_OK) {
                music_tokens tok = {0};
                music_notes back = {0};
                TU_OK(music_perf_encode(notes.v, notes.n, &tok));
                TU_OK(music_perf_decode(tok.v, tok.n, &back));
                ck_assert_uint_le(back.n, notes.n);
                music_tokens_free(&tok);
                music_notes_free(&back);
                music_notes_free(&notes);
            } else {
                ck_assert_msg(strncmp(mg_last_error(), "damaged.mid: ", 13) == 0, "%s",
                              mg_last_error());
            }
            music_midi_free(&g);
        }
        free(exact);
    }
    ck_assert_uint_gt(parsed, 100);
    ck_assert_uint_gt(failed, 100);
    free(src[0]);
    free(src[1]);
}
END_TEST

/* ======================================================================================
 * Performance encoding
 * ====================================================================================== */

START_TEST(vocabulary_layout) {
    ck_assert_int_eq(MUSIC_PERF_VOCAB, 390);
    ck_assert_int_eq(MUSIC_PERF_PAD, MUSIC_PERF_END);
    char b[32];
    static const struct {
        int id;
        const char *name;
    } names[] = {{0, "NOTE_ON 0"},
                 {60, "NOTE_ON 60"},
                 {127, "NOTE_ON 127"},
                 {128, "NOTE_OFF 0"},
                 {255, "NOTE_OFF 127"},
                 {256, "TIME_SHIFT 10ms"},
                 {355, "TIME_SHIFT 1000ms"},
                 {356, "VELOCITY 0"},
                 {387, "VELOCITY 31"},
                 {388, "START"},
                 {389, "END"},
                 {390, "?"},
                 {-1, "?"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        ck_assert_str_eq(music_perf_token_name(names[i].id, b, sizeof b), names[i].name);
    /* 32 bins of four velocities (the last of three), each decoded inside itself */
    int count[32] = {0};
    for (int v = 1; v <= 127; v++) {
        int bin = music_perf_velocity_bin(v);
        ck_assert_int_eq(bin, (v - 1) / 4);
        count[bin]++;
        if (v > 1) ck_assert_int_ge(bin, music_perf_velocity_bin(v - 1));
    }
    for (int bin = 0; bin < 32; bin++) {
        ck_assert_int_eq(count[bin], bin == 31 ? 3 : 4);
        ck_assert_int_eq(music_perf_velocity_bin(music_perf_bin_velocity(bin)), bin);
    }
}
END_TEST

START_TEST(encode_exact_tokens) {
    /* C and E together, then G louder-to-softer with a gap of 2.25 s in its length */
    const music_note n[] = {{.on = 0.5, .off = 2.75, .pitch = 67, .velocity = 60},
                         {.on = 0.0, .off = 0.5, .pitch = 64, .velocity = 100},
                         {.on = 0.0, .off = 0.5, .pitch = 60, .velocity = 99}};
    /* clang-format off */
    const int32_t want[] = {MUSIC_PERF_START,
                            MUSIC_PERF_VELOCITY + 24, 60, 64,
                            MUSIC_PERF_TIME_SHIFT + 49,
                            MUSIC_PERF_NOTE_OFF + 60, MUSIC_PERF_NOTE_OFF + 64,
                            MUSIC_PERF_VELOCITY + 14, 67,
                            MUSIC_PERF_TIME_SHIFT + 99, MUSIC_PERF_TIME_SHIFT + 99, MUSIC_PERF_TIME_SHIFT + 24,
                            MUSIC_PERF_NOTE_OFF + 67,
                            MUSIC_PERF_END};
    /* clang-format on */
    music_tokens t = {0};
    TU_OK(music_perf_encode(n, 3, &t));
    ck_assert_uint_eq(t.n, sizeof want / sizeof want[0]);
    ck_assert_mem_eq(t.v, want, sizeof want);
    music_notes back = {0};
    TU_OK(music_perf_decode(t.v, t.n, &back));
    ck_assert_uint_eq(back.n, 3);
    ck_assert_uint_eq(back.v[0].pitch, 60);
    ck_assert_uint_eq(back.v[0].velocity, music_perf_bin_velocity(24));
    ck_assert_double_eq_tol(back.v[2].off, 2.75, 1e-9);
    music_notes_free(&back);
    /* encoding appends */
    TU_OK(music_perf_encode(n, 0, &t));
    ck_assert_uint_eq(t.n, sizeof want / sizeof want[0] + 2);
    ck_assert_int_eq(t.v[t.n - 2], MUSIC_PERF_START);
    ck_assert_int_eq(t.v[t.n - 1], MUSIC_PERF_END);
    music_tokens_free(&t);
}
END_TEST

static int cmp_pitch_on(const void *pa, const void *pb) {
    const music_note *a = pa, *b = pb;
    if (a->pitch != b->pitch) return a->pitch - b->pitch;
    return (a->on > b->on) - (a->on < b->on);
}

/* The encoding's promise, checked against the notes that went in: every note comes back with
 * its pitch, onset within 10 ms (5 ms for notes of at least 10 ms), offset within the same of
 * min(offset, next onset of its pitch), velocity in its bin. A note whose pitch is struck again
 * within 20 ms may merge with it (same 10 ms step): allowed only when !strict, then counted. */
static size_t check_roundtrip(const music_note *orig, size_t n, bool strict) {
    music_tokens t = {0};
    music_notes dec = {0};
    TU_OK(music_perf_encode(orig, n, &t));
    TU_OK(music_perf_decode(t.v, t.n, &dec));
    ck_assert_int_eq(t.v[0], MUSIC_PERF_START);
    ck_assert_int_eq(t.v[t.n - 1], MUSIC_PERF_END);
    music_note *a = malloc((n + 1) * sizeof *a);
    memcpy(a, orig, n * sizeof *a);
    qsort(a, n, sizeof *a, cmp_pitch_on);
    qsort(dec.v, dec.n, sizeof *dec.v, cmp_pitch_on);
    size_t close = 0, j = 0;
    for (size_t i = 0; i < n; i++) {
        bool has_next = i + 1 < n && a[i + 1].pitch == a[i].pitch;
        bool has_prev = i > 0 && a[i - 1].pitch == a[i].pitch;
        if ((has_next && a[i + 1].on - a[i].on < 0.02) ||
            (has_prev && a[i].on - a[i - 1].on < 0.02)) {
            close++;
            continue;
        }
        bool cut = has_next && a[i + 1].on < a[i].off; /* re-struck while sounding */
        double off = cut ? a[i + 1].on : a[i].off;
        /* 5 ms from rounding; 10 ms for a note too short for the grid (or ended by one) */
        double tol = a[i].off - a[i].on >= 0.01 ? 0.005 + 1e-9 : 0.01 + 1e-9;
        double tol_off = cut ? 0.01 + 1e-9 : tol;
        /* the decoded note of this pitch with the nearest onset */
        while (j < dec.n && (dec.v[j].pitch < a[i].pitch ||
                             (dec.v[j].pitch == a[i].pitch && dec.v[j].on < a[i].on - 0.0101)))
            j++;
        ck_assert_msg(j < dec.n && dec.v[j].pitch == a[i].pitch &&
                          fabs(dec.v[j].on - a[i].on) <= tol,
                      "note pitch %d at %.4f s lost", a[i].pitch, a[i].on);
        ck_assert_msg(fabs(dec.v[j].off - off) <= tol_off,
                      "pitch %d at %.4f s: off %.4f, want %.4f", a[i].pitch, a[i].on, dec.v[j].off,
                      off);
        ck_assert_int_eq(music_perf_velocity_bin(dec.v[j].velocity),
                         music_perf_velocity_bin(a[i].velocity));
    }
    if (strict) {
        ck_assert_uint_eq(close, 0);
        ck_assert_uint_eq(dec.n, n);
    } else {
        ck_assert_uint_le(dec.n, n);
        ck_assert_uint_ge(dec.n, n - close);
    }
    free(a);
    music_notes_free(&dec);
    music_tokens_free(&t);
    return close;
}

/* Random pieces: chords, long and very short notes, gaps from 0 to minutes, re-struck pitches
 * (onsets of one pitch at least 20 ms apart). */
static void random_piece(mg_rng *r, size_t count, music_notes *out) {
    double t = mg_rng_double(r) * 3, last_on[128];
    for (int p = 0; p < 128; p++) last_on[p] = -1;
    while (out->n < count) {
        uint32_t kind = mg_rng_below(r, 100);
        double gap = kind < 70   ? mg_rng_double(r) * 0.4
                     : kind < 97 ? 1 + mg_rng_double(r) * 3
                                 : 60 + mg_rng_double(r) * 200;
        t += gap;
        int chord = mg_rng_below(r, 4) == 0 ? 2 + (int)mg_rng_below(r, 4) : 1;
        for (int c = 0; c < chord; c++) {
            int p = 21 + (int)mg_rng_below(r, 88);
            if (last_on[p] >= 0 && t - last_on[p] < 0.02) continue;
            uint32_t dk = mg_rng_below(r, 100);
            double dur = dk < 75   ? 0.03 + mg_rng_double(r)
                         : dk < 93 ? 1 + mg_rng_double(r) * 9
                                   : mg_rng_double(r) * 0.015;
            double on = t + (mg_rng_below(r, 2) ? 0.003 * mg_rng_double(r) : 0);
            last_on[p] = on;
            music_note x = {.on = on,
                         .off = on + dur,
                         .pitch = (uint8_t)p,
                         .velocity = (uint8_t)(1 + mg_rng_below(r, 127))};
            TU_OK(music_notes_push(out, x));
        }
    }
}

START_TEST(roundtrip_random_pieces) {
    mg_rng r = mg_rng_make(1000 + (uint64_t)_i);
    music_notes n = {0};
    random_piece(&r, 3000, &n);
    check_roundtrip(n.v, n.n, true);
    music_notes_free(&n);
}
END_TEST

START_TEST(long_silences_and_long_notes) {
    /* three minutes of silence, then a 7.5 s note and a chord after another 45.67 s */
    const music_note n[] = {{.on = 180.004, .off = 187.504, .pitch = 40, .velocity = 70},
                         {.on = 233.174, .off = 233.674, .pitch = 72, .velocity = 70},
                         {.on = 233.174, .off = 235.0, .pitch = 76, .velocity = 71},
                         {.on = 233.176, .off = 234.0, .pitch = 79, .velocity = 72}};
    music_tokens t = {0};
    TU_OK(music_perf_encode(n, 4, &t));
    size_t i = 1;
    while (t.v[i] == MUSIC_PERF_TIME_SHIFT + 99) i++;
    ck_assert_uint_eq(i - 1, 180); /* 180 shifts of one second, nothing left over */
    ck_assert_int_eq(t.v[i], MUSIC_PERF_VELOCITY + music_perf_velocity_bin(70));
    ck_assert_int_eq(t.v[i + 1], 40);
    for (size_t k = i + 2; k < i + 9; k++) /* 7.5 s = 7 x 1 s + 500 ms */
        ck_assert_int_eq(t.v[k], MUSIC_PERF_TIME_SHIFT + 99);
    ck_assert_int_eq(t.v[i + 9], MUSIC_PERF_TIME_SHIFT + 49);
    ck_assert_int_eq(t.v[i + 10], MUSIC_PERF_NOTE_OFF + 40);
    /* one velocity token for the chord: all three notes share bin 17 */
    size_t vel = 0;
    for (size_t k = 0; k < t.n; k++) vel += t.v[k] >= MUSIC_PERF_VELOCITY && t.v[k] < MUSIC_PERF_START;
    ck_assert_uint_eq(vel, 1);
    music_tokens_free(&t);
    check_roundtrip(n, 4, true);
}
END_TEST

START_TEST(grid_is_absolute) {
    /* 3000 notes a third of a second apart: a relative grid would drift by up to 3000 x 3.3 ms;
     * the absolute grid keeps the last one within 5 ms. */
    music_notes n = {0};
    for (int i = 0; i < 3000; i++)
        TU_OK(music_notes_push(&n, (music_note){.on = i / 3.0,
                                          .off = i / 3.0 + 0.2,
                                          .pitch = (uint8_t)(40 + i % 40),
                                          .velocity = 64}));
    check_roundtrip(n.v, n.n, true);
    music_notes_free(&n);
}
END_TEST

START_TEST(restrikes_short_notes_and_same_step) {
    music_tokens t = {0};
    music_notes d = {0};
    /* overlap of one pitch: the re-strike ends the earlier note; OFF precedes ON in the step */
    const music_note a[] = {{.on = 0, .off = 1.0, .pitch = 60, .velocity = 80},
                         {.on = 0.5, .off = 1.5, .pitch = 60, .velocity = 40}};
    TU_OK(music_perf_encode(a, 2, &t));
    ck_assert_int_eq(t.v[4], MUSIC_PERF_NOTE_OFF + 60);
    ck_assert_int_eq(t.v[5], MUSIC_PERF_VELOCITY + music_perf_velocity_bin(40));
    ck_assert_int_eq(t.v[6], 60);
    TU_OK(music_perf_decode(t.v, t.n, &d));
    ck_assert_uint_eq(d.n, 2);
    ck_assert_double_eq_tol(d.v[0].off, 0.5, 1e-9);
    ck_assert_double_eq_tol(d.v[1].off, 1.5, 1e-9);
    music_notes_free(&d);
    music_tokens_free(&t);
    /* two onsets in one step: one note, the one ending later */
    const music_note b[] = {{.on = 0.101, .off = 0.5, .pitch = 50, .velocity = 100},
                         {.on = 0.103, .off = 0.9, .pitch = 50, .velocity = 20}};
    TU_OK(music_perf_encode(b, 2, &t));
    TU_OK(music_perf_decode(t.v, t.n, &d));
    ck_assert_uint_eq(d.n, 1);
    ck_assert_double_eq_tol(d.v[0].on, 0.1, 1e-9);
    ck_assert_double_eq_tol(d.v[0].off, 0.9, 1e-9);
    ck_assert_uint_eq(music_perf_velocity_bin(d.v[0].velocity), music_perf_velocity_bin(20));
    music_notes_free(&d);
    music_tokens_free(&t);
    /* notes shorter than a step keep one step and stay within 10 ms */
    const music_note c[] = {{.on = 0.012, .off = 0.013, .pitch = 70, .velocity = 9},
                         {.on = 0.016, .off = 0.0161, .pitch = 71, .velocity = 9},
                         {.on = 0.02, .off = 0.02, .pitch = 72, .velocity = 9}};
    TU_OK(music_perf_encode(c, 3, &t));
    TU_OK(music_perf_decode(t.v, t.n, &d));
    ck_assert_uint_eq(d.n, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_double_le(fabs(d.v[i].on - c[i].on), 0.01 + 1e-9);
        ck_assert_double_le(fabs(d.v[i].off - c[i].off), 0.01 + 1e-9);
        ck_assert_double_eq_tol(d.v[i].off - d.v[i].on, 0.01, 1e-9);
    }
    music_notes_free(&d);
    music_tokens_free(&t);
}
END_TEST

START_TEST(decode_any_sequence) {
    music_notes d = {0};
    /* out of range ids are named */
    const int32_t bad[] = {MUSIC_PERF_START, 60, 390};
    ck_assert_int_eq(music_perf_decode(bad, 3, &d), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "token 2 is 390"));
    const int32_t neg[] = {-7};
    ck_assert_int_eq(music_perf_decode(neg, 1, &d), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "token 0 is -7"));
    ck_assert_uint_eq(d.n, 0);
    /* before START: ignored; orphan NOTE_OFF: ignored; NOTE_ON twice in one step: one note;
     * ON then OFF in one step: one step long; unclosed notes end at the time reached; END stops */
    const int32_t s[] = {64,
                         MUSIC_PERF_TIME_SHIFT + 5,
                         MUSIC_PERF_START,
                         MUSIC_PERF_NOTE_OFF + 30,
                         61,
                         61,
                         MUSIC_PERF_TIME_SHIFT + 9,
                         62,
                         MUSIC_PERF_NOTE_OFF + 62,
                         MUSIC_PERF_VELOCITY + 31,
                         63,
                         MUSIC_PERF_TIME_SHIFT + 99,
                         MUSIC_PERF_END,
                         65,
                         MUSIC_PERF_TIME_SHIFT + 99};
    TU_OK(music_perf_decode(s, sizeof s / sizeof s[0], &d));
    ck_assert_uint_eq(d.n, 3);
    ck_assert_int_eq(d.v[0].pitch, 61);
    ck_assert_double_eq_tol(d.v[0].on, 0.0, 1e-12);
    ck_assert_double_eq_tol(d.v[0].off, 1.1, 1e-9);
    ck_assert_uint_eq(d.v[0].velocity, music_perf_bin_velocity(music_perf_velocity_bin(64)));
    ck_assert_int_eq(d.v[1].pitch, 62);
    ck_assert_double_eq_tol(d.v[1].on, 0.1, 1e-9);
    ck_assert_double_eq_tol(d.v[1].off, 0.11, 1e-9);
    ck_assert_int_eq(d.v[2].pitch, 63);
    ck_assert_uint_eq(d.v[2].velocity, music_perf_bin_velocity(31));
    ck_assert_double_eq_tol(d.v[2].off, 1.1, 1e-9);
    music_notes_free(&d);
    /* nothing to play leaves the list empty (and untouched: no pointer arithmetic on NULL) */
    const int32_t empty[] = {MUSIC_PERF_START, MUSIC_PERF_TIME_SHIFT + 3, MUSIC_PERF_END};
    TU_OK(music_perf_decode(empty, 3, &d));
    TU_OK(music_perf_decode(empty, 0, &d));
    ck_assert_uint_eq(d.n, 0);
    ck_assert_ptr_null(d.v);
    /* a window cut from the middle (no START) is read whole and appended after what is there */
    TU_OK(music_notes_push(&d, (music_note){.on = 5, .off = 6, .pitch = 1, .velocity = 1}));
    const int32_t w[] = {MUSIC_PERF_NOTE_OFF + 40, MUSIC_PERF_TIME_SHIFT, 41, MUSIC_PERF_TIME_SHIFT + 2};
    TU_OK(music_perf_decode(w, 4, &d));
    ck_assert_uint_eq(d.n, 2);
    ck_assert_int_eq(d.v[0].pitch, 1);
    ck_assert_double_eq_tol(d.v[1].on, 0.01, 1e-9);
    ck_assert_double_eq_tol(d.v[1].off, 0.04, 1e-9);
    music_notes_free(&d);
}
END_TEST

START_TEST(encode_rejects_bad_notes) {
    music_tokens t = {0};
    const music_note bad[] = {{.on = NAN, .off = 1, .pitch = 60, .velocity = 1},
                           {.on = -1, .off = 1, .pitch = 60, .velocity = 1},
                           {.on = 2, .off = 1, .pitch = 60, .velocity = 1},
                           {.on = 0, .off = 1, .pitch = 128, .velocity = 1},
                           {.on = 0, .off = 1, .pitch = 60, .velocity = 0},
                           {.on = 0, .off = 1e12, .pitch = 60, .velocity = 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        music_note two[2] = {{.on = 0, .off = 1, .pitch = 1, .velocity = 1}, bad[i]};
        ck_assert_int_eq(music_perf_encode(two, 2, &t), MG_ERR_INVALID);
        ck_assert_ptr_nonnull(strstr(mg_last_error(), "note 1 "));
        ck_assert_uint_eq(t.n, 0);
    }
    music_tokens_free(&t);
}
END_TEST

/* ======================================================================================
 * Augmentation
 * ====================================================================================== */

static void span(music_notes *n, int lo, int hi) {
    n->n = 0;
    TU_OK(music_notes_push(n, (music_note){.on = 0, .off = 1, .pitch = (uint8_t)lo, .velocity = 50}));
    TU_OK(music_notes_push(n, (music_note){.on = 0.5, .off = 1, .pitch = (uint8_t)hi, .velocity = 50}));
}

START_TEST(transpose_bounds_keep_pitches_in_range) {
    static const struct {
        int lo, hi, want_lo, want_hi;
    } c[] = {{21, 108, 0, 0}, {60, 72, -3, 3},   {22, 100, -1, 3}, {10, 115, 0, 0},
             {15, 60, 0, 3},  {100, 127, -3, 0}, {0, 127, 0, 0},   {106, 106, -3, 2}};
    music_notes n = {0};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        span(&n, c[i].lo, c[i].hi);
        int lo, hi;
        music_transpose_bounds(n.v, n.n, NULL, &lo, &hi);
        ck_assert_msg(lo == c[i].want_lo && hi == c[i].want_hi, "%d..%d: got [%d, %d]", c[i].lo,
                      c[i].hi, lo, hi);
        music_tokens t = {0};
        TU_OK(music_perf_encode(n.v, n.n, &t));
        int tlo, thi;
        music_perf_transpose_bounds(t.v, t.n, NULL, &tlo, &thi);
        ck_assert_int_eq(tlo, lo);
        ck_assert_int_eq(thi, hi);
        music_tokens_free(&t);
    }
    int lo, hi;
    music_transpose_bounds(NULL, 0, NULL, &lo, &hi);
    ck_assert(lo == -3 && hi == 3);
    /* an explicit shift drops what leaves 0..127, and says how many */
    span(&n, 3, 125);
    TU_OK(music_notes_push(&n, (music_note){.on = 1, .off = 2, .pitch = 60, .velocity = 50}));
    ck_assert_uint_eq(music_notes_transpose(&n, 5), 1);
    ck_assert_uint_eq(n.n, 2);
    ck_assert_uint_eq(n.v[0].pitch, 8);
    ck_assert_uint_eq(n.v[1].pitch, 65);
    music_notes_free(&n);
}
END_TEST

START_TEST(augment_draws_are_safe_and_seeded) {
    mg_rng r = mg_rng_make(77);
    music_notes base = {0}, n = {0};
    random_piece(&r, 200, &base);
    for (size_t i = 0; i < base.n; i++)
        base.v[i].pitch = (uint8_t)(23 + base.v[i].pitch % 60); /* 23..82 */
    base.v[0].pitch = 23;
    int shifts[7] = {0}, stretches[5] = {0};
    music_augment_opts o = music_augment_defaults();
    ck_assert_int_eq(o.max_transpose, 3);
    ck_assert_int_eq(o.pitch_lo, 21);
    ck_assert_int_eq(o.pitch_hi, 108);
    for (int k = 0; k < 400; k++) {
        n.n = 0;
        for (size_t i = 0; i < base.n; i++) TU_OK(music_notes_push(&n, base.v[i]));
        int sh;
        double st;
        TU_OK(music_augment_notes(&n, &o, &r, &sh, &st));
        ck_assert(sh >= -2 && sh <= 3); /* the lowest note 23 allows only -2 */
        shifts[sh + 3]++;
        int si = (int)lround((st - 0.95) / 0.025);
        ck_assert_double_eq_tol(st, 0.95 + 0.025 * si, 1e-12);
        stretches[si]++;
        ck_assert_uint_eq(n.n, base.n);
        for (size_t i = 0; i < n.n; i++) {
            ck_assert_int_eq(n.v[i].pitch, base.v[i].pitch + sh);
            ck_assert_double_eq_tol(n.v[i].on, base.v[i].on * st, 1e-9);
            ck_assert_double_eq_tol(n.v[i].off, base.v[i].off * st, 1e-9);
        }
    }
    ck_assert_int_eq(shifts[0], 0);
    for (int s = 1; s < 7; s++) ck_assert_int_gt(shifts[s], 30);
    for (int s = 0; s < 5; s++) ck_assert_int_gt(stretches[s], 40);
    /* same seed, same draws */
    mg_rng a = mg_rng_make(5), b = mg_rng_make(5);
    for (int k = 0; k < 50; k++) {
        int s1, s2;
        double t1, t2;
        music_notes x = {0};
        TU_OK(music_augment_notes(&x, NULL, &a, &s1, &t1));
        TU_OK(music_augment_notes(&x, NULL, &b, &s2, &t2));
        ck_assert(s1 == s2 && t1 == t2);
    }
    o.max_stretch = 1.5;
    ck_assert_int_eq(music_augment_notes(&n, &o, &r, NULL, NULL), MG_ERR_INVALID);
    music_notes_free(&n);
    music_notes_free(&base);
}
END_TEST

START_TEST(token_augmentation_matches_notes) {
    mg_rng r = mg_rng_make(31);
    music_notes n = {0}, d1 = {0}, d2 = {0};
    random_piece(&r, 500, &n);
    music_tokens t = {0}, t2 = {0}, s = {0};
    TU_OK(music_perf_encode(n.v, n.n, &t));
    /* transposing tokens = encoding transposed notes */
    for (size_t i = 0; i < n.n; i++) n.v[i].pitch = (uint8_t)(30 + n.v[i].pitch % 70);
    t.n = 0;
    TU_OK(music_perf_encode(n.v, n.n, &t));
    music_notes up = {0};
    for (size_t i = 0; i < n.n; i++) TU_OK(music_notes_push(&up, n.v[i]));
    ck_assert_uint_eq(music_notes_transpose(&up, 2), 0);
    TU_OK(music_perf_encode(up.v, up.n, &t2));
    int32_t *copy = malloc(t.n * sizeof *copy);
    memcpy(copy, t.v, t.n * sizeof *copy);
    TU_OK(music_perf_transpose(copy, t.n, 2));
    ck_assert_uint_eq(t.n, t2.n);
    ck_assert_mem_eq(copy, t2.v, t.n * sizeof *copy);
    /* a shift that leaves 0..127 changes nothing */
    memcpy(copy, t.v, t.n * sizeof *copy);
    ck_assert_int_eq(music_perf_transpose(copy, t.n, 100), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "leaves 0..127"));
    ck_assert_mem_eq(copy, t.v, t.n * sizeof *copy);
    free(copy);
    /* stretching tokens = stretching the decoded notes, to the grid */
    TU_OK(music_perf_decode(t.v, t.n, &d1));
    for (int k = 0; k < 3; k++) {
        double f = (double[]){0.95, 1.05, 1.5}[k];
        s.n = 0;
        TU_OK(music_perf_stretch(t.v, t.n, f, &s));
        d2.n = 0;
        TU_OK(music_perf_decode(s.v, s.n, &d2));
        ck_assert_uint_eq(d2.n, d1.n);
        /* notes of one pitch keep their order; notes of different pitches may share a step */
        qsort(d1.v, d1.n, sizeof *d1.v, cmp_pitch_on);
        qsort(d2.v, d2.n, sizeof *d2.v, cmp_pitch_on);
        for (size_t i = 0; i < d1.n; i++) {
            ck_assert_uint_eq(d2.v[i].pitch, d1.v[i].pitch);
            ck_assert_double_le(fabs(d2.v[i].on - d1.v[i].on * f), 0.005 + 1e-9);
            ck_assert_double_le(fabs(d2.v[i].off - d1.v[i].off * f),
                                0.005 + 1e-9 + (d1.v[i].off - d1.v[i].on < 0.03 ? 0.01 : 0));
        }
    }
    ck_assert_int_eq(music_perf_stretch(t.v, t.n, 0, &s), MG_ERR_INVALID);
    /* the window version draws a safe shift; with no stretch allowed it is a pure transposition */
    music_augment_opts o = music_augment_defaults();
    o.stretch_steps = 1;
    for (int k = 0; k < 20; k++) {
        TU_OK(music_augment_tokens(t.v + 100, 500, &o, &r, &s));
        ck_assert_uint_eq(s.n, 500);
        int delta = 0;
        for (size_t i = 0; i < 500; i++) {
            int32_t a = t.v[100 + i], b = s.v[i];
            if (a < MUSIC_PERF_TIME_SHIFT) {
                if (!delta) delta = b - a;
                ck_assert_int_eq(b - a, delta);
            } else {
                ck_assert_int_eq(a, b);
            }
        }
    }
    music_tokens_free(&t);
    music_tokens_free(&t2);
    music_tokens_free(&s);
    music_notes_free(&n);
    music_notes_free(&up);
    music_notes_free(&d1);
    music_notes_free(&d2);
}
END_TEST

/* ======================================================================================
 * Directories and the generator
 * ====================================================================================== */

static void write_piece(const char *path, uint64_t seed, uint32_t i) {
    music_midi_file f;
    TU_OK(music_generate_piece(seed, i, &f));
    TU_OK(music_midi_write(path, &f, NULL));
    music_midi_free(&f);
}

START_TEST(find_files_sorted_recursive) {
    char *dir = make_tmpdir();
    const char *dirs[] = {"a", "a/deep", "sub", "zz", "elsewhere"};
    for (size_t i = 0; i < 5; i++) {
        char *p = path_in(dir, dirs[i]);
        ck_assert_int_eq(mkdir(p, 0777), 0);
        free(p);
    }
    const char *files[] = {"b.mid",     "a/z.MID", "a/y.midi",       "a/deep/x.Mid",     "c.txt",
                           "d.mid.bak", "mid",     "zz/.hidden.mid", "elsewhere/far.mid"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char *p = path_in(dir, files[i]);
        tu_write_bytes(p, "x", 1);
        free(p);
    }
    char *link = path_in(dir, "link_dir"), *target = path_in(dir, "elsewhere");
    ck_assert_int_eq(symlink(target, link), 0); /* not followed: no duplicates, no cycles */
    free(link);
    link = path_in(dir, "zz/link.mid");
    char *ftarget = path_in(dir, "b.mid");
    ck_assert_int_eq(symlink(ftarget, link), 0); /* a link to a file is a file */
    free(link);
    free(ftarget);
    free(target);
    char **paths;
    size_t n;
    TU_OK(music_find_files(dir, &paths, &n));
    const char *want[] = {"a/deep/x.Mid",      "a/y.midi",       "a/z.MID",    "b.mid",
                          "elsewhere/far.mid", "zz/.hidden.mid", "zz/link.mid"};
    ck_assert_uint_eq(n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < n; i++) {
        char *p = path_in(dir, want[i]);
        ck_assert_str_eq(paths[i], p);
        free(p);
    }
    music_paths_free(paths, n);
    ck_assert_int_eq(music_find_files("/nonexistent/midi", &paths, &n), MG_ERR_IO);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "/nonexistent/midi: cannot open directory"));
    rm_rf(dir);
}
END_TEST

START_TEST(load_dir_reports_what_it_skips) {
    char *dir = make_tmpdir();
    char *p1 = path_in(dir, "1_good.mid"), *p2 = path_in(dir, "2_corrupt.mid"),
         *p3 = path_in(dir, "3_silent.mid"), *p4 = path_in(dir, "4_good.midi");
    write_piece(p1, 3, 0);
    tu_write_bytes(p2, corrupt[16].bytes, corrupt[16].len); /* data byte without status */
    music_midi_file f;
    music_midi_init(&f, 0, 96);
    TU_OK(music_midi_add_track(&f, NULL));
    TU_OK(music_midi_add_tempo(&f, 0, 0, 400000));
    TU_OK(music_midi_write(p3, &f, NULL));
    music_midi_free(&f);
    write_piece(p4, 3, 1);
    music_corpus c;
    music_load_opts o = {.keep_notes = true, .keep_tokens = true};
    TU_OK(music_load_dir(dir, &o, &c));
    ck_assert_uint_eq(c.n, 4);
    ck_assert_uint_eq(c.n_ok, 2);
    ck_assert_uint_eq(c.n_skipped, 2);
    ck_assert_int_eq(c.items[0].status, MG_OK);
    ck_assert_int_eq(c.items[1].status, MG_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(c.items[1].error, p2));
    ck_assert_ptr_nonnull(strstr(c.items[1].error, "offset 23: data byte 0x3c"));
    ck_assert_int_eq(c.items[2].status, MG_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(c.items[2].error, "no notes"));
    ck_assert_uint_eq(c.notes, c.items[0].info.notes + c.items[3].info.notes);
    ck_assert_uint_eq(c.tokens, c.items[0].encoding.n + c.items[3].encoding.n);
    ck_assert_uint_eq(c.items[0].notes.n, c.items[0].info.notes);
    ck_assert_double_eq_tol(c.seconds, c.items[0].info.seconds + c.items[3].info.seconds, 1e-9);
    char buf[4096] = {0};
    FILE *mem = fmemopen(buf, sizeof buf - 1, "w");
    music_corpus_summary(&c, mem);
    fclose(mem);
    ck_assert_ptr_nonnull(strstr(buf, "4 files: 2 used, 2 skipped;"));
    ck_assert_ptr_nonnull(strstr(buf, "skipped: "));
    ck_assert_ptr_nonnull(strstr(buf, "3_silent.mid: no notes"));
    music_corpus_free(&c);
    /* without keep_*, nothing heavy is held */
    TU_OK(music_load_dir(dir, NULL, &c));
    ck_assert_ptr_null(c.items[0].notes.v);
    ck_assert_ptr_null(c.items[0].encoding.v);
    ck_assert_uint_gt(c.items[0].tokens, 0);
    music_corpus_free(&c);
    free(p1);
    free(p2);
    free(p3);
    free(p4);
    rm_rf(dir);
}
END_TEST

START_TEST(generator_is_deterministic) {
    uint8_t *a, *b;
    size_t na, nb;
    music_midi_file f;
    TU_OK(music_generate_piece(7, 3, &f));
    encode_ok(&f, true, &a, &na);
    music_midi_free(&f);
    TU_OK(music_generate_piece(7, 3, &f));
    encode_ok(&f, true, &b, &nb);
    music_midi_free(&f);
    ck_assert_uint_eq(na, nb);
    ck_assert_mem_eq(a, b, na);
    free(b);
    TU_OK(music_generate_piece(8, 3, &f));
    encode_ok(&f, true, &b, &nb);
    music_midi_free(&f);
    ck_assert(na != nb || memcmp(a, b, na) != 0);
    free(b);
    /* on disk: piece 3 of a 5-piece corpus is piece 3 of a 4-piece one, and equals the above */
    char *d1 = make_tmpdir(), *d2 = make_tmpdir();
    TU_OK(music_generate_dir(d1, 5, 7));
    TU_OK(music_generate_dir(d2, 4, 7));
    char *p1 = path_in(d1, "gen_7_0003.mid"), *p2 = path_in(d2, "gen_7_0003.mid");
    uint8_t *x = tu_read_file(p1, &nb), *y;
    ck_assert_uint_eq(nb, na);
    ck_assert_mem_eq(x, a, na);
    y = tu_read_file(p2, &nb);
    ck_assert_mem_eq(x, y, na);
    free(x);
    free(y);
    free(p1);
    free(p2);
    p1 = path_in(d1, "gen_7_0004.mid");
    ck_assert_int_eq(access(p1, R_OK), 0);
    free(p1);
    p1 = path_in(d2, "gen_7_0004.mid");
    ck_assert_int_ne(access(p1, R_OK), 0);
    free(p1);
    free(a);
    rm_rf(d1);
    rm_rf(d2);
    ck_assert_int_eq(music_generate_dir("/nonexistent/x/y", 1, 1), MG_ERR_IO);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "/nonexistent/x/y"));
}
END_TEST

START_TEST(generated_pieces_are_piano_music) {
    size_t formats[2] = {0}, vel0 = 0, off80 = 0, pedal_pieces = 0, minutes_total = 0;
    double total = 0;
    for (uint32_t i = 0; i < 24; i++) {
        music_midi_file f, g;
        TU_OK(music_generate_piece(42, i, &f));
        uint8_t *b;
        size_t n;
        encode_ok(&f, true, &b, &n);
        parse_ok(b, n, &g);
        free(b);
        ck_assert(g.format == 0 || g.format == 1);
        formats[g.format]++;
        ck_assert_uint_eq(g.ntracks, g.format ? 3 : 1);
        size_t pedal = 0, tempo = 0, sysex = 0, off_grid = 0, on = 0;
        for (size_t t = 0; t < g.ntracks; t++)
            for (size_t k = 0; k < g.tracks[t].n; k++) {
                const music_midi_event *e = &g.tracks[t].ev[k];
                pedal += (e->status & 0xF0) == 0xB0 && e->d1 == 64;
                tempo += e->status == 0xFF && e->type == 0x51;
                sysex += e->status == 0xF0;
                vel0 += e->status == 0x90 && e->d2 == 0;
                off80 += e->status == 0x80;
                if (e->status == 0x90 && e->d2) {
                    on++;
                    off_grid += e->tick % 120 != 0; /* humanised: not on the sixteenth grid */
                    ck_assert(e->d1 >= 21 && e->d1 <= 108);
                }
            }
        pedal_pieces += pedal > 0;
        ck_assert_uint_ge(tempo, 5); /* per-phrase tempo plus the final ritardando */
        ck_assert_uint_eq(sysex, 1);
        ck_assert_uint_gt(off_grid, on / 2);
        music_notes notes;
        music_midi_info info;
        TU_OK(music_midi_to_notes(&g, "gen.mid", NULL, &notes, &info));
        ck_assert_uint_eq(info.notes, info.note_ons);
        ck_assert_uint_ge(notes.n, 40);
        ck_assert_double_ge(info.seconds, 8);
        ck_assert_double_le(info.seconds, 300);
        total += info.seconds;
        int vels[128] = {0}, distinct = 0, chords = 0;
        for (size_t k = 0; k < notes.n; k++) {
            distinct += !vels[notes.v[k].velocity]++;
            ck_assert(notes.v[k].off > notes.v[k].on);
            if (k > 0 && notes.v[k].on - notes.v[k - 1].on < 0.03) chords++;
        }
        ck_assert_int_ge(distinct, 15);
        ck_assert_int_ge(chords, 5);
        check_roundtrip(notes.v, notes.n, false);
        music_notes_free(&notes);
        music_midi_free(&g);
        music_midi_free(&f);
    }
    minutes_total = (size_t)(total / 60);
    ck_assert_uint_gt(formats[0], 0);
    ck_assert_uint_gt(formats[1], 0);
    ck_assert_uint_gt(vel0, 0);
    ck_assert_uint_gt(off80, 0);
    ck_assert_uint_ge(pedal_pieces, 12);
    ck_assert_uint_ge(minutes_total, 8);
}
END_TEST

START_TEST(default_corpus_in_memory) {
    music_corpus c;
    music_load_opts o = {.keep_tokens = true};
    TU_OK(music_generate_corpus(6, 123, &o, &c));
    ck_assert_uint_eq(c.n, 6);
    ck_assert_uint_eq(c.n_ok, 6);
    ck_assert_str_eq(c.items[2].path, "gen_123_0002.mid");
    /* the same as writing the files and loading the directory */
    char *dir = make_tmpdir();
    TU_OK(music_generate_dir(dir, 6, 123));
    music_corpus d;
    TU_OK(music_load_dir(dir, &o, &d));
    ck_assert_uint_eq(d.n, 6);
    for (size_t i = 0; i < 6; i++) {
        ck_assert_uint_eq(c.items[i].tokens, d.items[i].tokens);
        ck_assert_mem_eq(c.items[i].encoding.v, d.items[i].encoding.v,
                         c.items[i].tokens * sizeof(int32_t));
    }
    ck_assert_uint_eq(c.notes, d.notes);
    music_corpus_free(&d);
    music_corpus_free(&c);
    rm_rf(dir);
}
END_TEST

/* ======================================================================================
 * The `music` program
 * ====================================================================================== */

/* Runs a shell command, returns its exit status and (malloc'ed) stdout. */
static int run_cmd(const char *cmd, char **out) {
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    size_t got;
    while ((got = fread(b + n, 1, cap - n - 1, p)) > 0) {
        n += got;
        if (cap - n < 4096) b = realloc(b, cap *= 2);
    }
    b[n] = 0;
    int st = pclose(p);
    *out = b;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(music_command_line) {
    const char *bin = music_bin();
    char *dir = make_tmpdir(), cmd[8192], *out;
    snprintf(cmd, sizeof cmd, "'%s' gen --out '%s/g' --pieces 3 --seed 5", bin, dir);
    ck_assert_int_eq(run_cmd(cmd, &out), 0);
    ck_assert_ptr_nonnull(strstr(out, "wrote 3 pieces (seed 5)"));
    ck_assert_ptr_nonnull(strstr(out, "3 files: 3 used, 0 skipped"));
    free(out);
    char *p = path_in(dir, "g/gen_5_0002.mid");
    size_t n;
    uint8_t *b = tu_read_file(p, &n), *a;
    size_t na;
    music_midi_file f;
    TU_OK(music_generate_piece(5, 2, &f));
    encode_ok(&f, true, &a, &na);
    music_midi_free(&f);
    ck_assert_uint_eq(n, na);
    ck_assert_mem_eq(a, b, n);
    free(a);
    free(b);
    free(p);
    /* a corrupt file among them gets its error line; stats prints header, lines, total */
    p = path_in(dir, "g/broken.mid");
    tu_write_bytes(p, corrupt[13].bytes, corrupt[13].len);
    free(p);
    snprintf(cmd, sizeof cmd, "'%s' stats --data '%s/g' 2>/dev/null", bin, dir);
    ck_assert_int_eq(run_cmd(cmd, &out), 0);
    ck_assert_str_eq(strtok(out, "\n"),
                     "path\tformat\ttracks\tnote_ons\ttempo_events\tseconds\ttokens");
    char *line = strtok(NULL, "\n");
    ck_assert_ptr_nonnull(strstr(line, "/g/broken.mid\terror\t"));
    ck_assert_ptr_nonnull(strstr(line, "offset 18: unknown chunk length 1000"));
    music_corpus c;
    char *g = path_in(dir, "g");
    TU_OK(music_load_dir(g, NULL, &c));
    for (size_t i = 1; i < 4; i++) {
        line = strtok(NULL, "\n");
        const music_item *it = &c.items[i];
        char want[8192];
        snprintf(want, sizeof want, "%s\t%d\t%zu\t%zu\t%zu\t%.3f\t%zu", it->path, it->info.format,
                 it->info.ntracks, it->info.note_ons, it->info.tempo_events, it->info.seconds,
                 it->tokens);
        ck_assert_str_eq(line, want);
    }
    line = strtok(NULL, "\n");
    ck_assert_ptr_nonnull(line);
    ck_assert_int_eq(strncmp(line, "total\t3 files\t", 14), 0);
    ck_assert_ptr_null(strtok(NULL, "\n"));
    free(out);
    /* the tokens command prints the encoding */
    snprintf(cmd, sizeof cmd, "'%s' tokens '%s/gen_5_0000.mid' --limit 3 2>/dev/null", bin, g);
    ck_assert_int_eq(run_cmd(cmd, &out), 0);
    ck_assert_int_eq(strncmp(out, "0\t388\tSTART\n1\t", 14), 0);
    ck_assert_ptr_null(strstr(out, "\n3\t"));
    free(out);
    /* usage errors exit with 2 and say why; run-time errors with 1 */
    static const struct {
        const char *args, *says;
        int rc;
    } bad[] = {{"", "usage: music COMMAND", 2},
               {"frobnicate", "unknown command 'frobnicate'", 2},
               {"stats", "--data DIR is required", 2},
               {"stats --data", "--data needs a value", 2},
               {"stats --data /nonexistent/dir", "/nonexistent/dir: cannot open directory", 1},
               {"gen --out /tmp --pieces -3", "--pieces: -3 is out of range 0..100000", 2},
               {"gen --out /tmp --pieces 12x", "--pieces expects an integer in 0..100000, got '12x'", 2},
               {"gen --out /tmp --pieces 4294967297", "--pieces: 4294967297 is out of range 0..100000", 2},
               {"gen --out /tmp --seed -1", "--seed: -1 is out of range 0..", 2},
               {"gen --pieces 3", "--out DIR is required", 2},
               {"gen --out /tmp --colour red", "unknown option '--colour'", 2},
               {"tokens", "FILE is required", 2},
               {"tokens a.mid b.mid", "unexpected argument 'b.mid'", 2},
               {"tokens a.mid --limit -1", "--limit: -1 is out of range 0..", 2},
               {"stats --data d --no-sustain=1", "--no-sustain takes no value", 2},
               {"tokens /nonexistent.mid", "/nonexistent.mid: cannot open", 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", bin, bad[i].args);
        ck_assert_int_eq(run_cmd(cmd, &out), bad[i].rc);
        ck_assert_msg(strstr(out, bad[i].says), "music %s: %s", bad[i].args, out);
        free(out);
    }
    /* a tempo of 0 once put every note at 0 s; the file is refused where the event is */
    const corrupt_case *t0 = &corrupt[N_CORRUPT - 1];
    ck_assert_str_eq(t0->name, "tempo of 0");
    p = path_in(dir, "tempo0.mid");
    tu_write_bytes(p, t0->bytes, t0->len);
    snprintf(cmd, sizeof cmd, "'%s' tokens '%s' 2>&1", bin, p);
    ck_assert_int_eq(run_cmd(cmd, &out), 1);
    char want[8192];
    snprintf(want, sizeof want, "%s: offset 23: tempo meta event (0x51) sets 0 microseconds per quarter note", p);
    ck_assert_msg(strstr(out, want), "music tokens tempo0.mid: %s", out);
    free(out);
    free(p);
    snprintf(cmd, sizeof cmd, "'%s' help", bin);
    ck_assert_int_eq(run_cmd(cmd, &out), 0);
    ck_assert_ptr_nonnull(strstr(out, "stats --data DIR"));
    ck_assert_ptr_nonnull(strstr(out, "gen --out DIR"));
    free(out);
    music_corpus_free(&c);
    free(g);
    rm_rf(dir);
}
END_TEST

/* A full disk under a MIDI file: /dev/full (and a link to it) is written in place and the failure
 * names it; a regular file that cannot grow keeps its old contents and no temporary is left; the
 * program fails by name, for a piece and for its standard output. */
START_TEST(midi_write_on_a_full_disk_fails_by_name) {
    char *dir = make_tmpdir();
    music_midi_file f;
    TU_OK(music_generate_piece(7, 0, &f));
    TU_ASSERT_ERR(music_midi_write("/dev/full", &f, NULL), MG_ERR_IO, "/dev/full: write failed: ",
                  strerror(ENOSPC));
    tu_assert_dev_full_intact();
    char *link = path_in(dir, "piece.mid");
    ck_assert_int_eq(symlink("/dev/full", link), 0);
    TU_ASSERT_ERR(music_midi_write(link, &f, NULL), MG_ERR_IO, link, strerror(ENOSPC));
    struct stat sb;
    ck_assert_int_eq(lstat(link, &sb), 0);
    ck_assert(S_ISLNK(sb.st_mode));
    char *p = path_in(dir, "old.mid");
    tu_write_text(p, "old contents");
    struct rlimit old = tu_limit_file_size(64);
    mg_status st = music_midi_write(p, &f, NULL);
    tu_restore_file_size(old);
    ck_assert_int_eq(st, MG_ERR_IO);
    tu_assert_error_has(p);
    tu_assert_error_has(strerror(EFBIG));
    char *b = tu_read_file(p, NULL);
    ck_assert_str_eq(b, "old contents");
    free(b);
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d))) ck_assert_msg(!strstr(e->d_name, ".tmp"), "%s left behind", e->d_name);
    closedir(d);
    music_midi_free(&f);

    if (music_bin()) {
        char cmd[8192], *out;
        char *g = path_in(dir, "g");
        ck_assert_int_eq(mkdir(g, 0755), 0);
        char *first = path_in(g, "gen_5_0000.mid");
        ck_assert_int_eq(symlink("/dev/full", first), 0);
        snprintf(cmd, sizeof cmd, "'%s' gen --out '%s' --pieces 2 --seed 5 2>&1", music.bin, g);
        ck_assert_int_eq(run_cmd(cmd, &out), 1);
        ck_assert_msg(strstr(out, "gen_5_0000.mid: write failed: No space left on device"), "%s", out);
        free(out);
        ck_assert_int_eq(unlink(first), 0);
        snprintf(cmd, sizeof cmd, "'%s' gen --out '%s' --pieces 2 --seed 5 >/dev/null 2>&1", music.bin, g);
        ck_assert_int_eq(run_cmd(cmd, &out), 0);
        free(out);
        snprintf(cmd, sizeof cmd, "'%s' tokens '%s' 2>&1 >/dev/full", music.bin, first);
        ck_assert_int_eq(run_cmd(cmd, &out), 1);
        ck_assert_msg(strstr(out, "music: standard output: write failed: No space left on device"), "%s", out);
        free(out);
        snprintf(cmd, sizeof cmd, "'%s' stats --data '%s' 2>&1 >/dev/full", music.bin, g);
        ck_assert_int_eq(run_cmd(cmd, &out), 1);
        ck_assert_msg(strstr(out, "music: standard output: write failed: No space left on device"), "%s", out);
        free(out);
        free(first);
        free(g);
    } else {
        fprintf(stderr, "# music program not built: its full-disk cases skipped\n");
    }
    tu_assert_dev_full_intact();
    free(p);
    free(link);
    rm_rf(dir);
}
END_TEST

/* ======================================================================================
 * The real files of the MINIGRAD_MIDI_DIR folder
 * ====================================================================================== */

static bool in_folder(const char *path, const char *folder) {
    return strstr(path, folder) != NULL;
}

START_TEST(real_files_all_parse_and_roundtrip) {
    music_corpus c;
    music_load_opts o = {.keep_notes = true};
    TU_OK(music_load_dir(data_dir(), &o, &c));
    ck_assert_uint_ge(c.n, 150);
    ck_assert_uint_eq(c.n_ok, c.n);
    bool fmt[2] = {false}, div384 = false, div480 = false, div4000 = false;
    size_t close_piano = 0, close_ensemble = 0;
    for (size_t i = 0; i < c.n; i++) {
        const music_item *it = &c.items[i];
        ck_assert_msg(it->status == MG_OK, "%s", it->error);
        ck_assert(it->info.format == 0 || it->info.format == 1);
        fmt[it->info.format] = true;
        div384 |= it->info.division == 384;
        div480 |= it->info.division == 480;
        div4000 |= it->info.division == 4000;
        /* every note-on makes a note: there is no drum channel here */
        ck_assert_uint_eq(it->info.notes, it->info.note_ons);
        ck_assert_uint_eq(it->info.drum_notes, 0);
        for (size_t k = 0; k < it->notes.n; k++)
            ck_assert(it->notes.v[k].pitch >= 21 && it->notes.v[k].pitch <= 108);
        size_t close = check_roundtrip(it->notes.v, it->notes.n, false);
        if (in_folder(it->path, "score_mutopia/"))
            close_ensemble += close;
        else
            close_piano += close;
    }
    ck_assert(fmt[0] && fmt[1] && div384 && div480 && div4000);
    ck_assert_double_gt(c.seconds / 3600, 9.0);
    /* A piano seldom strikes one key twice within 20 ms; the Bach concerto's instruments double
     * each other in unison, and those doublings become one note of the merged piano. */
    ck_assert_uint_lt(close_piano, c.notes / 1000);
    ck_assert_uint_gt(close_ensemble, 1000);
    music_corpus_free(&c);
}
END_TEST

START_TEST(real_files_tricky_cases) {
    music_corpus c;
    music_load_opts o = {.keep_notes = true, .keep_tokens = true};
    TU_OK(music_load_dir(data_dir(), &o, &c));
    size_t pedal_split = 0, pedal_split_vienna = 0, giant_notes = 0, giant_restrikes = 0,
           many_tempi = 0;
    bool long_silence = false, mutopia_channels = false;
    for (size_t i = 0; i < c.n; i++) {
        const music_item *it = &c.items[i];
        music_midi_file f;
        TU_OK(music_midi_read(it->path, &f));
        /* Pedal in one track, notes in another: the pedal must still hold the notes. */
        size_t note_tracks = 0, pedal_tracks = 0, overlap = 0;
        for (size_t t = 0; t < f.ntracks; t++) {
            bool has_note = false, has_pedal = false;
            for (size_t k = 0; k < f.tracks[t].n; k++) {
                const music_midi_event *e = &f.tracks[t].ev[k];
                has_note |= (e->status & 0xF0) == 0x90;
                has_pedal |= (e->status & 0xF0) == 0xB0 && e->d1 == 64;
            }
            note_tracks += has_note;
            pedal_tracks += has_pedal;
            overlap += has_note && has_pedal;
        }
        if (note_tracks && pedal_tracks && !overlap) {
            pedal_split++;
            music_notes dry;
            music_notes_opts nos = {.no_sustain = true};
            TU_OK(music_midi_to_notes(&f, it->path, &nos, &dry, NULL));
            double wet_len = 0, dry_len = 0;
            for (size_t k = 0; k < dry.n; k++) {
                dry_len += dry.v[k].off - dry.v[k].on;
                wet_len += it->notes.v[k].off - it->notes.v[k].on;
            }
            ck_assert_double_gt(wet_len, dry_len);
            if (it->info.division == 4000) { /* the two Vienna performances: pedal throughout */
                pedal_split_vienna++;
                ck_assert_double_gt(wet_len, 1.5 * dry_len);
            }
            music_notes_free(&dry);
        }
        /* Thousands of tempo changes: the duration equals the tempo map integrated here. */
        if (it->info.tempo_events >= 1000) {
            many_tempi++;
            uint64_t end = 0, prev_tick = 0;
            double sec = 0, tempo = 500000;
            for (size_t t = 0; t < f.ntracks; t++)
                if (f.tracks[t].end_tick > end) end = f.tracks[t].end_tick;
            /* the Set Tempo events of all tracks, ordered by tick (insertion sort: stable) */
            size_t seen = 0;
            uint64_t(*tm)[2] = malloc(it->info.tempo_events * sizeof *tm);
            for (size_t t = 0; t < f.ntracks; t++)
                for (size_t k = 0; k < f.tracks[t].n; k++) {
                    const music_midi_event *e = &f.tracks[t].ev[k];
                    if (e->status != 0xFF || e->type != 0x51 || e->len != 3) continue;
                    ck_assert_uint_lt(seen, it->info.tempo_events);
                    const uint8_t *p = music_midi_payload(&f, e);
                    size_t at = seen++;
                    while (at > 0 && tm[at - 1][0] > e->tick) {
                        tm[at][0] = tm[at - 1][0];
                        tm[at][1] = tm[at - 1][1];
                        at--;
                    }
                    tm[at][0] = e->tick;
                    tm[at][1] = (uint64_t)(p[0] << 16 | p[1] << 8 | p[2]);
                }
            ck_assert_uint_eq(seen, it->info.tempo_events);
            for (size_t k = 0; k < seen; k++) {
                sec += (double)(tm[k][0] - prev_tick) * tempo / (1e6 * f.division);
                prev_tick = tm[k][0];
                tempo = (double)tm[k][1];
            }
            free(tm);
            sec += (double)(end - prev_tick) * tempo / (1e6 * f.division);
            ck_assert_double_eq_tol(it->info.seconds, sec, 1e-6);
        }
        if (in_folder(it->path, "performance_giantmidi/")) {
            /* with the pedal ignored, a re-strike is a key struck while still held down */
            music_notes dry;
            music_midi_info di;
            music_notes_opts nos = {.no_sustain = true};
            TU_OK(music_midi_to_notes(&f, it->path, &nos, &dry, &di));
            giant_notes += di.notes;
            giant_restrikes += di.restrikes;
            music_notes_free(&dry);
        }
        /* Minutes of silence first: a run of one-second shifts, the onset kept. */
        if (it->notes.n && it->notes.v[0].on > 150) {
            long_silence = true;
            size_t k = 1;
            while (it->encoding.v[k] == MUSIC_PERF_TIME_SHIFT + 99) k++;
            ck_assert_uint_ge(k - 1, 150);
            music_notes back = {0};
            TU_OK(music_perf_decode(it->encoding.v, it->encoding.n, &back));
            ck_assert_double_le(fabs(back.v[0].on - it->notes.v[0].on), 0.005 + 1e-9);
            music_notes_free(&back);
        }
        /* Several channels and programs: all notes kept, each with its channel and program. */
        if (in_folder(it->path, "score_mutopia/")) {
            int ch = 0, prog = 0;
            bool chs[16] = {false}, progs[128] = {false};
            for (size_t k = 0; k < it->notes.n; k++) {
                ch += !chs[it->notes.v[k].channel];
                chs[it->notes.v[k].channel] = true;
                prog += !progs[it->notes.v[k].program];
                progs[it->notes.v[k].program] = true;
            }
            if (ch >= 3 && prog >= 2) mutopia_channels = true;
        }
        music_midi_free(&f);
    }
    ck_assert_uint_ge(pedal_split, 10);
    ck_assert_uint_eq(pedal_split_vienna, 2);
    ck_assert_uint_ge(many_tempi, 1);
    ck_assert(long_silence);
    ck_assert(mutopia_channels);
    /* GiantMIDI re-strikes a sounding pitch about one note in eight */
    ck_assert_uint_gt(giant_restrikes * 20, giant_notes);
    ck_assert_uint_lt(giant_restrikes * 4, giant_notes);
    music_corpus_free(&c);
}
END_TEST

/* ======================================================================================
 * Seed corpus for the fuzz target: small files covering the reader's paths
 * ====================================================================================== */

START_TEST(write_fuzz_seed_corpus) {
    char dir[4096];
    ck_assert(tu_build_path(dir, sizeof dir, "fuzz"));
    ck_assert(mkdir(dir, 0777) == 0 || errno == EEXIST);
    ck_assert(tu_build_path(dir, sizeof dir, "fuzz/midi_seed"));
    ck_assert(mkdir(dir, 0777) == 0 || errno == EEXIST);
    char name[64];
    size_t written = 0;
    for (int v = 0; v < 4; v++) {
        music_midi_file f;
        build_feature_file(&f, v / 2);
        snprintf(name, sizeof name, "feature_f%d_%s.mid", v / 2, v % 2 ? "plain" : "running");
        char *p = path_in(dir, name);
        music_midi_write_opts o = {.no_running_status = v % 2};
        TU_OK(music_midi_write(p, &f, &o));
        free(p);
        music_midi_free(&f);
        written++;
    }
    for (uint32_t i = 0; i < 3; i++) {
        /* the first bars of generated pieces: real texture, a few hundred bytes */
        music_midi_file f;
        TU_OK(music_generate_piece(1, i, &f));
        for (size_t t = 0; t < f.ntracks; t++) {
            music_midi_sort_track(&f.tracks[t]);
            size_t k = 0;
            while (k < f.tracks[t].n && f.tracks[t].ev[k].tick < 1920) k++;
            f.tracks[t].n = k;
            f.tracks[t].end_tick = 1920;
        }
        snprintf(name, sizeof name, "gen_%u.mid", i);
        char *p = path_in(dir, name);
        TU_OK(music_midi_write(p, &f, NULL));
        free(p);
        music_midi_free(&f);
        written++;
    }
    for (size_t i = 0; i < N_CORRUPT; i += 4) {
        snprintf(name, sizeof name, "corrupt_%02zu.mid", i);
        char *p = path_in(dir, name);
        tu_write_bytes(p, corrupt[i].bytes, corrupt[i].len);
        free(p);
        written++;
    }
    char **paths;
    size_t n, ok = 0;
    TU_OK(music_find_files(dir, &paths, &n));
    ck_assert_uint_ge(n, written);
    for (size_t i = 0; i < n; i++) {
        music_midi_file f;
        ok += music_midi_read(paths[i], &f) == MG_OK;
        music_midi_free(&f);
    }
    ck_assert_uint_ge(ok, 7);
    music_paths_free(paths, n);
}
END_TEST

static Suite *midi_suite(void) {
    Suite *s = suite_create("midi");
    TCase *tc = tcase_create("smf");
    tcase_add_test(tc, writer_golden_bytes);
    tcase_add_test(tc, vlq_limits);
    tcase_add_loop_test(tc, feature_file_roundtrip, 0, 4);
    tcase_add_loop_test(tc, feature_file_notes, 0, 2);
    tcase_add_test(tc, smpte_and_format2);
    tcase_add_test(tc, writer_rejects_what_smf_cannot_hold);
    tcase_add_loop_test(tc, notes_to_midi_roundtrip, 0, 4);
    suite_add_tcase(s, tc);

    tc = tcase_create("corrupt");
    tcase_add_loop_test(tc, corrupt_files_name_file_and_offset, 0, (int)N_CORRUPT);
    tcase_add_test(tc, missing_file);
    tcase_add_test(tc, oversized_file_is_refused_unread);
    tcase_add_test(tc, every_truncation_fails_cleanly);
    tcase_add_test(tc, random_damage_never_crashes);
    suite_add_tcase(s, tc);

    tc = tcase_create("tokens");
    tcase_add_test(tc, vocabulary_layout);
    tcase_add_test(tc, encode_exact_tokens);
    tcase_add_loop_test(tc, roundtrip_random_pieces, 0, 4);
    tcase_add_test(tc, long_silences_and_long_notes);
    tcase_add_test(tc, grid_is_absolute);
    tcase_add_test(tc, restrikes_short_notes_and_same_step);
    tcase_add_test(tc, decode_any_sequence);
    tcase_add_test(tc, encode_rejects_bad_notes);
    tcase_add_test(tc, transpose_bounds_keep_pitches_in_range);
    tcase_add_test(tc, augment_draws_are_safe_and_seeded);
    tcase_add_test(tc, token_augmentation_matches_notes);
    suite_add_tcase(s, tc);

    tc = tcase_create("corpus");
    tcase_add_test(tc, find_files_sorted_recursive);
    tcase_add_test(tc, load_dir_reports_what_it_skips);
    tcase_add_test(tc, generator_is_deterministic);
    tcase_add_test(tc, generated_pieces_are_piano_music);
    tcase_add_test(tc, default_corpus_in_memory);
    if (music_bin())
        tcase_add_test(tc, music_command_line);
    else
        fprintf(stderr, "# music program not found under MINIGRAD_BUILD_ROOT: its test skipped\n");
    if (getenv("MINIGRAD_BUILD_ROOT")) tcase_add_test(tc, write_fuzz_seed_corpus);
    if (tu_have_dev_full())
        tcase_add_test(tc, midi_write_on_a_full_disk_fails_by_name);
    else
        fprintf(stderr, "# /dev/full not found: midi_write_on_a_full_disk_fails_by_name skipped\n");
    suite_add_tcase(s, tc);

    bool csv = have_midicsv();
    if (csv) {
        tc = tcase_create("midicsv");
        tcase_add_test(tc, midicsv_reads_our_files);
        if (data_dir())
            tcase_add_test(tc, midicsv_agrees_on_real_files);
        else
            fprintf(stderr, "# midicsv_agrees_on_real_files skipped: " REAL_FILES_HOWTO "\n");
        suite_add_tcase(s, tc);
    } else {
        fprintf(stderr, "# midicsv not installed (apt-get install midicsv): its cases skipped\n");
    }
    if (data_dir()) {
        tc = tcase_create("real");
        tcase_add_test(tc, real_files_all_parse_and_roundtrip);
        tcase_add_test(tc, real_files_tricky_cases);
        suite_add_tcase(s, tc);
    } else {
        fprintf(stderr, "# real_files_all_parse_and_roundtrip, real_files_tricky_cases skipped: "
                        REAL_FILES_HOWTO "\n");
    }
    return s;
}

MG_TEST_MAIN(midi_suite)
