/* Procedural piano pieces, so the music example runs with no data on a fresh machine.
 *
 * A piece is composed in beats: a key (major or minor), a meter (4/4 or 3/4), a base tempo, then
 * two to four sections, each repeating a chord progression (one chord per bar) under one texture:
 *   block     bass note and close chords in the left hand, a melody above
 *   arpeggio  broken chords over two octaves in the left hand (pedalled), a melody above
 *   alberti   low-high-middle-high eighths in the left hand, a melody above
 *   scales    runs of eighths or sixteenths in the right hand over a bass line
 *   walking   a stepwise bass in quarters (dry, detached) under a melody
 * and ends with a cadence and a ritardando. The melody is a random walk on the scale that lands
 * on chord tones on strong beats. Each section has its own tempo (plus small drifts every phrase),
 * dynamic level and articulation; velocities follow phrase arcs and beat accents; onsets and
 * lengths are jittered by a few milliseconds. The pedal is lifted and pressed again just after
 * each chord change (legato pedalling). Everything random comes from one mg_rng seeded from
 * (seed, index). */
#include "music_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { TEX_BLOCK, TEX_ARPEGGIO, TEX_ALBERTI, TEX_SCALES, TEX_WALKING, TEX_COUNT };
enum { RH, LH };

typedef struct gnote {
    double beat, len; /* beats */
    int pitch, vel, hand;
} gnote;

typedef struct gctl {
    double beat;
    int kind;       /* 0 tempo, 1 pedal */
    uint32_t value; /* us per quarter, or CC value */
} gctl;

typedef struct piece {
    mg_rng *r;
    int tonic, minor, meter;
    gnote *notes;
    size_t n, cap;
    gctl *ctl;
    size_t nc, ccap;
    mg_status s;
} piece;

static const int major_steps[7] = {0, 2, 4, 5, 7, 9, 11};
static const int minor_steps[7] = {0, 2, 3, 5, 7, 8, 10};

static int floordiv7(int d) {
    return d >= 0 ? d / 7 : -((-d + 6) / 7);
}

/* Pitch of scale degree d (0 = the tonic above middle C). In minor, the seventh degree is raised
 * over a dominant chord (harmonic minor), as a leading tone. */
static int deg_pitch(const piece *p, int d, bool dominant) {
    int o = floordiv7(d), k = d - 7 * o;
    int pc = (p->minor ? minor_steps : major_steps)[k];
    if (p->minor && dominant && k == 6) pc++;
    int pitch = 60 + p->tonic + 12 * o + pc;
    return pitch < 21 ? 21 : pitch > 108 ? 108 : pitch;
}

static double normal(mg_rng *r) {
    return (double)mg_rng_normal(r);
}
static double unif(mg_rng *r, double lo, double hi) {
    return lo + (hi - lo) * mg_rng_double(r);
}
static int clampi(int v, int lo, int hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

static void add_note(piece *p, double beat, double len, int pitch, int vel, int hand) {
    if (p->s) return;
    p->s = music_grow((void **)&p->notes, &p->cap, p->n + 1, sizeof *p->notes);
    if (!p->s)
        p->notes[p->n++] = (gnote){beat, len, clampi(pitch, 21, 108), clampi(vel, 1, 127), hand};
}

static void add_ctl(piece *p, double beat, int kind, uint32_t value) {
    if (p->s) return;
    p->s = music_grow((void **)&p->ctl, &p->ccap, p->nc + 1, sizeof *p->ctl);
    if (!p->s) p->ctl[p->nc++] = (gctl){beat, kind, value};
}

static const int prog_major[][4] = {{0, 4, 5, 3}, {0, 5, 3, 4}, {0, 3, 4, 0}, {1, 4, 0, 0},
                                    {0, 5, 1, 4}, {0, 3, 0, 4}, {5, 3, 0, 4}, {0, 2, 3, 4}};
static const int prog_minor[][4] = {
    {0, 5, 2, 6}, {0, 3, 4, 0}, {0, 6, 5, 4}, {0, 3, 6, 2}, {5, 6, 0, 4}};

/* Rhythms of one bar, in beats. */
static const double rhythm4[][8] = {{1, 1, 1, 1},
                                    {2, 1, 1},
                                    {1.5, 0.5, 2},
                                    {0.5, 0.5, 1, 2},
                                    {3, 1},
                                    {1, 0.5, 0.5, 1, 1},
                                    {0.5, 0.5, 0.5, 0.5, 1, 1},
                                    {2, 2}};
static const double rhythm3[][8] = {{1, 1, 1}, {2, 1},           {1.5, 0.5, 1},
                                    {3},       {0.5, 0.5, 1, 1}, {1, 0.5, 0.5, 1}};

typedef struct section {
    int texture, vel, pedal;
    double legato; /* fraction of the written length actually held */
} section;

/* Nearest degree to `d` that is a tone of the chord on `root` (root, third, fifth). */
static int nearest_chord_tone(int d, int root) {
    for (int k = 0; k <= 3; k++) {
        int cand[2] = {d - k, d + k};
        for (int j = 0; j < 2; j++) {
            int m = ((cand[j] - root) % 7 + 7) % 7;
            if (m == 0 || m == 2 || m == 4) return cand[j];
        }
    }
    return d;
}

static int phrase_arc(double bar_in_phrase) {
    return (int)lround(9.0 * sin(M_PI * bar_in_phrase / 4.0));
}

static void melody_bar(piece *p, const section *sc, double t0, int root, int *mdeg, int bar) {
    mg_rng *r = p->r;
    bool dom = root == 4;
    int npat = p->meter == 4 ? 8 : 6;
    const double *rh = p->meter == 4 ? rhythm4[mg_rng_below(r, (uint32_t)npat)]
                                     : rhythm3[mg_rng_below(r, (uint32_t)npat)];
    double pos = 0;
    for (int i = 0; i < 8 && rh[i] > 0; i++) {
        double len = rh[i];
        bool strong = fmod(pos, p->meter == 4 ? 2.0 : 3.0) == 0.0;
        if (strong) {
            *mdeg = nearest_chord_tone(*mdeg, root);
        } else {
            uint32_t u = mg_rng_below(r, 10);
            int step = u < 5 ? 1 : u < 7 ? 2 : u < 8 ? 0 : 3;
            if (mg_rng_below(r, 2)) step = -step;
            *mdeg += step;
        }
        if (*mdeg < 4) *mdeg += 2;
        if (*mdeg > 16) *mdeg -= 2;
        if (mg_rng_below(r, 12) != 0 || strong) {
            int vel = sc->vel + 8 + (pos == 0 ? 6 : 0) + phrase_arc(bar % 4 + pos / p->meter) +
                      (int)lround(4 * normal(r));
            add_note(p, t0 + pos, len * sc->legato, deg_pitch(p, *mdeg, dom), vel, RH);
            /* block texture doubles strong melody notes a third below */
            if (sc->texture == TEX_BLOCK && strong)
                add_note(p, t0 + pos, len * sc->legato, deg_pitch(p, *mdeg - 2, dom), vel - 10, RH);
        }
        pos += len;
    }
}

static void scales_bar(piece *p, const section *sc, double t0, int root, int bar) {
    mg_rng *r = p->r;
    bool dom = root == 4, six = mg_rng_below(r, 3) == 0;
    double step = six ? 0.25 : 0.5;
    int n = (int)(p->meter / step), dir = (bar % 2) ? -1 : 1;
    /* up then back down (or the reverse): the run spans at most n/2 degrees */
    int d = root + (dir < 0 ? 14 : 0) + (int)mg_rng_below(r, 3) * 2;
    for (int i = 0; i < n; i++) {
        int vel = sc->vel + (i == 0 ? 8 : 0) + phrase_arc(bar % 4 + (double)i / n) - 2 * (i % 2) +
                  (int)lround(3 * normal(r));
        add_note(p, t0 + i * step, step * 0.9, deg_pitch(p, d, dom), vel, RH);
        d += i < n / 2 ? dir : -dir;
    }
}

static void accompaniment_bar(piece *p, const section *sc, double t0, int root, int next_root) {
    mg_rng *r = p->r;
    bool dom = root == 4;
    int m = p->meter, v = sc->vel - 8;
    int bass = root - 14 + (root > 3 ? -7 : 0) + 7; /* root in the octave below middle C or lower */
    int vj[16];
    for (int i = 0; i < 16; i++) vj[i] = v + (int)lround(4 * normal(r));
    switch (sc->texture) {
    case TEX_BLOCK:
        add_note(p, t0, m * 0.97, deg_pitch(p, bass - 7, dom), vj[0] + 4, LH);
        for (int b = 0; b < m; b += (m == 4 ? 2 : 1))
            for (int k = 0; k < 3; k++)
                add_note(p, t0 + b, (m == 4 ? 2 : 1) * sc->legato, deg_pitch(p, bass + 2 * k, dom),
                         vj[1 + k] - (b ? 4 : 0), LH);
        break;
    case TEX_ARPEGGIO: {
        static const int shape[8] = {0, 4, 7, 9, 11, 9, 7, 4};
        for (int i = 0; i < 2 * m; i++)
            add_note(p, t0 + 0.5 * i, 1.0 + 0.5 * (i == 0), deg_pitch(p, bass - 7 + shape[i], dom),
                     vj[i] + (i == 0 ? 6 : 0), LH);
        break;
    }
    case TEX_ALBERTI: {
        static const int shape[4] = {0, 4, 2, 4};
        for (int i = 0; i < 2 * m; i++)
            add_note(p, t0 + 0.5 * i, 0.5 * sc->legato, deg_pitch(p, bass + shape[i % 4], dom),
                     vj[i] - (i % 2) * 5, LH);
        break;
    }
    case TEX_SCALES:
        add_note(p, t0, m * 0.5 * 0.95, deg_pitch(p, bass - 7, dom), vj[0] + 5, LH);
        add_note(p, t0 + m * 0.5, m * 0.5 * 0.95, deg_pitch(p, bass - 3, dom), vj[1], LH);
        for (int k = 0; k < 3; k++)
            add_note(p, t0, m * 0.95, deg_pitch(p, bass + 2 * k, dom), vj[2 + k] - 6, LH);
        break;
    default: { /* walking bass, detached */
        int nb = next_root - 14 + (next_root > 3 ? -7 : 0);
        int line[4] = {bass - 7, bass - 5, bass - 3, nb - 1};
        if (m == 3) line[2] = nb + 1;
        for (int i = 0; i < m; i++)
            add_note(p, t0 + i, 0.6, deg_pitch(p, line[i], dom), vj[i] + (i == 0 ? 5 : 0), LH);
        break;
    }
    }
}

static void compose(piece *p) {
    mg_rng *r = p->r;
    p->tonic = (int)mg_rng_below(r, 12) - 5; /* keeps the register centred: tonic G3..F#4 */
    p->minor = mg_rng_below(r, 3) == 0;
    p->meter = mg_rng_below(r, 3) == 0 ? 3 : 4;
    double bpm = unif(r, 66, 138);
    int nsec = 2 + (int)mg_rng_below(r, 3);
    double t = 0;
    int mdeg = 9 + (int)mg_rng_below(r, 4);
    const int(*prog)[4] = p->minor ? prog_minor : prog_major;
    uint32_t nprog = p->minor ? 5 : 8;
    int bar = 0;
    for (int s = 0; s < nsec; s++) {
        section sc = {.texture = (int)mg_rng_below(r, TEX_COUNT),
                      .vel = 48 + (int)mg_rng_below(r, 45)};
        sc.pedal =
            sc.texture == TEX_ARPEGGIO || (sc.texture != TEX_WALKING && mg_rng_below(r, 3) != 0);
        sc.legato = sc.texture == TEX_WALKING || mg_rng_below(r, 4) == 0 ? 0.55 : 0.95;
        const int *pr = prog[mg_rng_below(r, nprog)];
        int nbars = 4 * (1 + (int)mg_rng_below(r, 2));
        double sbpm = bpm * unif(r, 0.88, 1.12);
        for (int b = 0; b < nbars; b++, bar++) {
            if (b % 4 == 0) add_ctl(p, t, 0, (uint32_t)lround(60e6 / (sbpm * unif(r, 0.97, 1.03))));
            int root = pr[b % 4], next = pr[(b + 1) % 4];
            if (sc.pedal) {
                /* lift just after the chord changes (so the new bass is caught, the old
                 * harmony is cleared), press again a moment later */
                if (t > 0) add_ctl(p, t + 0.06, 1, (uint32_t)mg_rng_below(r, 20));
                add_ctl(p, t + 0.16, 1, 90 + mg_rng_below(r, 38));
            }
            if (sc.texture == TEX_SCALES)
                scales_bar(p, &sc, t, root, bar);
            else
                melody_bar(p, &sc, t, root, &mdeg, bar);
            accompaniment_bar(p, &sc, t, root, next);
            t += p->meter;
        }
        if (sc.pedal) add_ctl(p, t - 0.02, 1, 0);
    }
    /* Cadence: V then I, slowing down over the two bars, the last chord held with a fermata. */
    int v = 70 + (int)mg_rng_below(r, 15);
    for (int k = 0; k < 4; k++)
        add_ctl(p, t + k * p->meter * 0.5, 0, (uint32_t)lround(60e6 / (bpm * (0.92 - 0.07 * k))));
    for (int k = 0; k < 3; k++)
        add_note(p, t, p->meter * 0.95, deg_pitch(p, 4 + 2 * k - 7, true), v - 8, LH);
    add_note(p, t, p->meter * 0.95, deg_pitch(p, 4 - 14, true), v - 4, LH);
    add_note(p, t, p->meter * 0.5, deg_pitch(p, 8, true), v, RH);
    add_note(p, t + p->meter * 0.5, p->meter * 0.45, deg_pitch(p, 6, true), v - 3, RH);
    t += p->meter;
    add_ctl(p, t + 0.05, 1, 100);
    for (int k = 0; k < 3; k++)
        add_note(p, t, p->meter + 2.0, deg_pitch(p, 2 * k - 7, false), v - 6 + k, LH);
    add_note(p, t, p->meter + 2.0, deg_pitch(p, -14, false), v - 2, LH);
    add_note(p, t, p->meter + 2.0, deg_pitch(p, 7, false), v + 4, RH);
    add_ctl(p, t + p->meter + 2.2, 1, 0);
}

static const int8_t sharps_major[12] = {0, -5, 2, -3, 4, -1, 6, 1, -4, 3, -2, 5};

static mg_status render(piece *p, uint64_t seed, uint32_t index, music_midi_file *f) {
    mg_rng *r = p->r;
    const int div = 480;
    int format = mg_rng_below(r, 3) == 0 ? 0 : 1;
    bool vel0 = mg_rng_below(r, 2);
    double first_bpm = p->nc && p->ctl[0].kind == 0 ? 60e6 / p->ctl[0].value : 100;
    double sigma = 0.008 * div * first_bpm / 60.0; /* about 8 ms of timing noise, in ticks */
    music_midi_init(f, format, div);
    size_t meta = 0, rh = 0, lh = 0;
    mg_status s = music_midi_add_track(f, &meta);
    if (!s && format == 1) s = music_midi_add_track(f, &rh);
    if (!s && format == 1) s = music_midi_add_track(f, &lh);
    char text[128];
    snprintf(text, sizeof text, "minigrad music gen: seed %llu, piece %u", (unsigned long long)seed,
             index);
    static const uint8_t gm_on[5] = {0x7E, 0x7F, 0x09, 0x01, 0xF7};
    int pc = ((p->tonic % 12) + 12) % 12;
    int8_t sf = sharps_major[p->minor ? (pc + 3) % 12 : pc];
    uint8_t ts[4] = {(uint8_t)p->meter, 2, 24, 8}, ks[2] = {(uint8_t)sf, (uint8_t)p->minor};
    if (!s) s = music_midi_add_meta(f, meta, 0, MUSIC_MIDI_META_TRACK_NAME, "minigrad piano", 14);
    if (!s) s = music_midi_add_meta(f, meta, 0, MUSIC_MIDI_META_TEXT, text, (uint32_t)strlen(text));
    if (!s) s = music_midi_add_meta(f, meta, 0, MUSIC_MIDI_META_TIME_SIGNATURE, ts, 4);
    if (!s) s = music_midi_add_meta(f, meta, 0, MUSIC_MIDI_META_KEY_SIGNATURE, ks, 2);
    if (!s) s = music_midi_add_sysex(f, meta, 0, MUSIC_MIDI_SYSEX, gm_on, 5);
    if (!s && format == 1)
        s = music_midi_add_meta(f, rh, 0, MUSIC_MIDI_META_TRACK_NAME, "right hand", 10);
    if (!s && format == 1) s = music_midi_add_meta(f, lh, 0, MUSIC_MIDI_META_TRACK_NAME, "left hand", 9);
    if (!s) s = music_midi_add_channel(f, rh, 0, MUSIC_MIDI_PROGRAM, 0, 0);
    if (!s && format == 1) s = music_midi_add_channel(f, lh, 0, MUSIC_MIDI_PROGRAM, 0, 0);
    for (size_t i = 0; i < p->nc && !s; i++) {
        const gctl *c = &p->ctl[i];
        uint64_t tick = (uint64_t)llround(c->beat * div);
        if (c->kind == 0)
            s = music_midi_add_tempo(f, meta, tick, c->value);
        else
            s = music_midi_add_channel(f, lh, tick, MUSIC_MIDI_CONTROL, MUSIC_MIDI_CC_SUSTAIN,
                                    (uint8_t)c->value);
    }
    for (size_t i = 0; i < p->n && !s; i++) {
        const gnote *g = &p->notes[i];
        double on = g->beat * div + sigma * normal(r);
        if (on < 0) on = 0;
        double len = g->len * div * (1.0 + 0.05 * normal(r));
        uint64_t a = (uint64_t)llround(on), b = (uint64_t)llround(on + (len > 1 ? len : 1));
        if (b <= a) b = a + 1;
        size_t tr = g->hand == RH ? rh : lh;
        s = music_midi_add_channel(f, tr, a, MUSIC_MIDI_NOTE_ON, (uint8_t)g->pitch, (uint8_t)g->vel);
        if (!s)
            s = music_midi_add_channel(f, tr, b, vel0 ? MUSIC_MIDI_NOTE_ON : MUSIC_MIDI_NOTE_OFF,
                                    (uint8_t)g->pitch, vel0 ? 0 : 64);
    }
    /* Events were added per note; playing order within a tick is the order added, which the
     * writer keeps (stable sort by tick). */
    for (size_t t = 0; t < f->ntracks && !s; t++) music_midi_sort_track(&f->tracks[t]);
    if (s) music_midi_free(f);
    return s;
}

mg_status music_generate_piece(uint64_t seed, uint32_t index, music_midi_file *out) {
    mg_rng mix = mg_rng_make(seed ^ (0xD1B54A32D192ED03ULL * ((uint64_t)index + 1)));
    mg_rng r = mg_rng_make(mg_rng_next(&mix));
    piece p = {.r = &r};
    compose(&p);
    mg_status s = p.s ? p.s : render(&p, seed, index, out);
    free(p.notes);
    free(p.ctl);
    if (s) memset(out, 0, sizeof *out);
    return s;
}

mg_status music_generate_dir(const char *dir, uint32_t n, uint64_t seed) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return mg_set_error(MG_ERR_IO, "%s: cannot create directory: %s", dir, strerror(errno));
    size_t dl = strlen(dir);
    for (uint32_t i = 0; i < n; i++) {
        char path[4096];
        if (dl + 64 > sizeof path) return mg_set_error(MG_ERR_INVALID, "%s: path too long", dir);
        snprintf(path, sizeof path, "%s/gen_%llu_%04u.mid", dir, (unsigned long long)seed, i);
        music_midi_file f;
        mg_status s = music_generate_piece(seed, i, &f);
        if (!s) s = music_midi_write(path, &f, NULL);
        music_midi_free(&f);
        if (s) return s;
    }
    return MG_OK;
}

mg_status music_generate_corpus(uint32_t n, uint64_t seed, const music_load_opts *opts,
                                   music_corpus *out) {
    memset(out, 0, sizeof *out);
    for (uint32_t i = 0; i < n; i++) {
        music_midi_file f;
        uint8_t *buf = NULL;
        size_t len = 0;
        char name[64];
        snprintf(name, sizeof name, "gen_%llu_%04u.mid", (unsigned long long)seed, i);
        mg_status s = music_generate_piece(seed, i, &f);
        if (!s) s = music_midi_encode(&f, NULL, &buf, &len);
        music_midi_free(&f);
        if (!s) s = music_corpus_add(out, name, buf, len, opts);
        free(buf);
        if (s) {
            music_corpus_free(out);
            return s;
        }
    }
    return MG_OK;
}
