/* From raw MIDI events to notes in seconds (merging tracks, tempo map, velocity-0 note-offs,
 * sustain pedal, re-struck pitches), and back from notes to a MIDI file. */
#include "music_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void music_notes_free(music_notes *n) {
    if (!n) return;
    free(n->v);
    memset(n, 0, sizeof *n);
}

mg_status music_notes_push(music_notes *n, music_note note) {
    mg_status s = music_grow((void **)&n->v, &n->cap, n->n + 1, sizeof *n->v);
    if (s) return s;
    n->v[n->n++] = note;
    return MG_OK;
}

static int cmp_note(const void *pa, const void *pb) {
    const music_note *a = pa, *b = pb;
    if (a->on != b->on) return a->on < b->on ? -1 : 1;
    if (a->pitch != b->pitch) return a->pitch < b->pitch ? -1 : 1;
    if (a->off != b->off) return a->off < b->off ? -1 : 1;
    if (a->channel != b->channel) return a->channel < b->channel ? -1 : 1;
    if (a->velocity != b->velocity) return a->velocity < b->velocity ? -1 : 1;
    return (a->program > b->program) - (a->program < b->program);
}

void music_notes_sort(music_notes *n) {
    if (n->n > 1) qsort(n->v, n->n, sizeof *n->v, cmp_note);
}

/* ---- events of all tracks in play order ---- */

typedef struct ref {
    uint64_t tick;
    uint32_t track, idx;
} ref;

static int cmp_ref(const void *pa, const void *pb) {
    const ref *a = pa, *b = pb;
    if (a->tick != b->tick) return a->tick < b->tick ? -1 : 1;
    if (a->track != b->track) return a->track < b->track ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

/* Seconds at a tick: piecewise linear through the tempo changes seen so far. */
typedef struct clock {
    bool smpte;
    double sec_per_tick_smpte;
    int division;
    uint32_t tempo; /* us per quarter */
    uint64_t base_tick;
    double base_sec;
} clock;

static double clock_sec(const clock *c, uint64_t tick) {
    if (c->smpte) return (double)tick * c->sec_per_tick_smpte;
    return c->base_sec + (double)(tick - c->base_tick) * (double)c->tempo / (1e6 * c->division);
}

static void clock_set_tempo(clock *c, uint64_t tick, uint32_t tempo) {
    c->base_sec = clock_sec(c, tick);
    c->base_tick = tick;
    c->tempo = tempo;
}

/* Sounding notes: per channel and pitch, a first-in-first-out list of indices into the output.
 * A released note (key up, pedal down) stays in its list until the pedal lifts or a re-strike. */
typedef struct player {
    music_notes *out;
    size_t *next; /* per note: the next note in its list, or NONE */
    bool *released;
    size_t cap;
    size_t head[16][128];
} player;

#define NONE ((size_t)-1)

static void end_note(player *pl, size_t ch, size_t pitch, size_t prev, size_t i, double t) {
    if (prev == NONE)
        pl->head[ch][pitch] = pl->next[i];
    else
        pl->next[prev] = pl->next[i];
    pl->out->v[i].off = t;
}

static void end_released(player *pl, size_t ch, size_t pitch, double t) {
    size_t prev = NONE;
    for (size_t i = pl->head[ch][pitch]; i != NONE;) {
        size_t nx = pl->next[i];
        if (pl->released[i])
            end_note(pl, ch, pitch, prev, i, t);
        else
            prev = i;
        i = nx;
    }
}

static mg_status start_note(player *pl, music_note note) {
    mg_status s = music_notes_push(pl->out, note);
    if (s) return s;
    size_t i = pl->out->n - 1;
    if (i >= pl->cap) {
        size_t c = pl->cap ? pl->cap * 2 : 256;
        size_t *nx = realloc(pl->next, c * sizeof *nx);
        if (!nx) return mg_set_error(MG_ERR_NOMEM, "midi: out of memory");
        pl->next = nx;
        bool *r = realloc(pl->released, c * sizeof *r);
        if (!r) return mg_set_error(MG_ERR_NOMEM, "midi: out of memory");
        pl->released = r;
        pl->cap = c;
    }
    pl->next[i] = NONE;
    pl->released[i] = false;
    size_t *link = &pl->head[note.channel][note.pitch];
    while (*link != NONE) link = &pl->next[*link];
    *link = i;
    return MG_OK;
}

mg_status music_midi_to_notes(const music_midi_file *f, const char *name, const music_notes_opts *opts,
                           music_notes *out, music_midi_info *info) {
    static const music_notes_opts defaults = {0};
    if (!opts) opts = &defaults;
    if (!name) name = "(midi)";
    double max_seconds = opts->max_seconds > 0 ? opts->max_seconds : 86400.0;
    music_midi_info inf = {.format = f->format, .division = f->division, .ntracks = f->ntracks};
    memset(out, 0, sizeof *out);
    if (info) *info = inf;
    if (f->format == 2)
        return mg_set_error(MG_ERR_INVALID,
                            "%s: format 2 holds independent songs, not one piece: not supported",
                            name);
    if (f->division == 0) return mg_set_error(MG_ERR_INVALID, "%s: division 0", name);

    size_t total = 0;
    uint64_t end_tick = 0;
    for (size_t t = 0; t < f->ntracks; t++) {
        total += f->tracks[t].n;
        if (f->tracks[t].end_tick > end_tick) end_tick = f->tracks[t].end_tick;
    }
    ref *order = malloc((total ? total : 1) * sizeof *order);
    player pl = {.out = out};
    if (!order) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", name);
    memset(pl.head, 0xFF, sizeof pl.head);
    size_t k = 0;
    for (size_t t = 0; t < f->ntracks; t++)
        for (size_t i = 0; i < f->tracks[t].n; i++) {
            order[k++] = (ref){f->tracks[t].ev[i].tick, (uint32_t)t, (uint32_t)i};
            if (f->tracks[t].ev[i].tick > end_tick) end_tick = f->tracks[t].ev[i].tick;
        }
    qsort(order, total, sizeof *order, cmp_ref);

    clock ck = {.division = f->division, .tempo = MUSIC_MIDI_DEFAULT_TEMPO};
    if (f->division < 0) {
        int fps = -(int)(int8_t)((uint16_t)f->division >> 8), tpf = f->division & 0xFF;
        double rate = fps == 29 ? 30000.0 / 1001.0 : fps;
        ck.smpte = true;
        ck.sec_per_tick_smpte = 1.0 / (rate * (tpf ? tpf : 1));
    }
    uint8_t program[16] = {0};
    bool pedal[16] = {false};
    mg_status s = MG_OK;
    for (size_t j = 0; j < total && !s; j++) {
        const music_midi_event *e = &f->tracks[order[j].track].ev[order[j].idx];
        if (e->status == MUSIC_MIDI_META) {
            if (e->type == MUSIC_MIDI_META_TEMPO && e->len == 3) {
                const uint8_t *p = music_midi_payload(f, e);
                inf.tempo_events++;
                clock_set_tempo(&ck, e->tick, (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2]);
            }
            continue;
        }
        if (e->status >= 0xF0) continue; /* sysex: nothing to play */
        double t = clock_sec(&ck, e->tick);
        size_t ch = e->status & 0x0F, kind = e->status & 0xF0;
        bool drum = ch == 9 && !opts->keep_drums;
        if (kind == MUSIC_MIDI_NOTE_ON && e->d2 > 0) {
            inf.note_ons++;
            if (drum) {
                inf.drum_notes++;
                continue;
            }
            if (pl.head[ch][e->d1] != NONE) {
                inf.restrikes++;
                end_released(&pl, ch, e->d1, t);
            }
            s = start_note(&pl, (music_note){.on = t,
                                          .off = t,
                                          .pitch = e->d1,
                                          .velocity = e->d2,
                                          .channel = (uint8_t)ch,
                                          .program = program[ch]});
        } else if (kind == MUSIC_MIDI_NOTE_OFF || kind == MUSIC_MIDI_NOTE_ON) {
            if (drum) continue;
            size_t prev = NONE, i = pl.head[ch][e->d1];
            while (i != NONE && pl.released[i]) {
                prev = i;
                i = pl.next[i];
            }
            if (i == NONE)
                inf.unmatched_offs++;
            else if (pedal[ch] && !opts->no_sustain)
                pl.released[i] = true;
            else
                end_note(&pl, ch, e->d1, prev, i, t);
        } else if (kind == MUSIC_MIDI_CONTROL && e->d1 == MUSIC_MIDI_CC_SUSTAIN) {
            bool down = e->d2 >= 64;
            if (pedal[ch] && !down)
                for (size_t p = 0; p < 128; p++) end_released(&pl, ch, p, t);
            pedal[ch] = down;
        } else if (kind == MUSIC_MIDI_PROGRAM) {
            program[ch] = e->d1;
        }
    }
    free(order);
    inf.seconds = clock_sec(&ck, end_tick);
    if (!s)
        for (size_t ch = 0; ch < 16; ch++)
            for (size_t p = 0; p < 128; p++)
                for (size_t i = pl.head[ch][p]; i != NONE; i = pl.next[i]) {
                    out->v[i].off = inf.seconds;
                    inf.unterminated++;
                }
    free(pl.next);
    free(pl.released);
    if (!s && !(inf.seconds <= max_seconds))
        s = mg_set_error(MG_ERR_FORMAT, "%s: lasts %.0f s, more than the %.0f s accepted", name,
                         inf.seconds, max_seconds);
    if (s) {
        music_notes_free(out);
        if (s == MG_ERR_NOMEM) mg_wrap_error(s, "%s", name);
        return s;
    }
    inf.notes = out->n;
    music_notes_sort(out);
    if (info) *info = inf;
    return MG_OK;
}

/* ---- notes to a file ---- */

typedef struct wev {
    uint64_t tick;
    int kind; /* 0 note-off, 1 note-on: offs first at one tick */
    size_t seq;
    uint8_t ch, pitch, vel;
} wev;

static int cmp_wev(const void *pa, const void *pb) {
    const wev *a = pa, *b = pb;
    if (a->tick != b->tick) return a->tick < b->tick ? -1 : 1;
    if (a->kind != b->kind) return a->kind - b->kind;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

mg_status music_notes_to_midi(const music_notes *notes, const music_notes_midi_opts *opts,
                           music_midi_file *out) {
    static const music_notes_midi_opts defaults = {0};
    if (!opts) opts = &defaults;
    int division = opts->division ? opts->division : 480;
    uint32_t tempo = opts->us_per_quarter ? opts->us_per_quarter : MUSIC_MIDI_DEFAULT_TEMPO;
    memset(out, 0, sizeof *out);
    if ((opts->format != 0 && opts->format != 1) || division <= 0 || division > 32767 ||
        tempo > 0xFFFFFF)
        return mg_set_error(MG_ERR_INVALID, "notes to midi: format %d, division %d, tempo %u",
                            opts->format, division, tempo);
    double tps = division * 1e6 / tempo;
    int used[16] = {0}, program[16] = {0};
    for (size_t i = 0; i < notes->n; i++) {
        const music_note *n = &notes->v[i];
        if (!isfinite(n->on) || !isfinite(n->off) || n->on < 0 || n->off < n->on ||
            n->off * tps > 0x0FFFFFFF || n->pitch > 127 || n->velocity < 1 || n->velocity > 127 ||
            n->channel > 15)
            return mg_set_error(
                MG_ERR_INVALID,
                "notes to midi: note %zu (on %g s, off %g s, pitch %u, velocity %u, "
                "channel %u) cannot be written",
                i, n->on, n->off, n->pitch, n->velocity, n->channel);
        if (!used[n->channel]++) program[n->channel] = n->program;
    }
    music_midi_init(out, opts->format, division);
    size_t t0;
    mg_status s = music_midi_add_track(out, &t0);
    if (!s) s = music_midi_add_tempo(out, t0, 0, tempo);
    size_t track_of[16];
    for (int c = 0; c < 16 && !s; c++) {
        if (!used[c]) continue;
        track_of[c] = t0;
        if (opts->format == 1) s = music_midi_add_track(out, &track_of[c]);
        if (!s)
            s = music_midi_add_channel(out, track_of[c], 0, (uint8_t)(MUSIC_MIDI_PROGRAM | c),
                                    (uint8_t)program[c], 0);
    }
    wev *ev = s ? NULL : malloc((2 * notes->n + 1) * sizeof *ev);
    if (!s && !ev) s = mg_set_error(MG_ERR_NOMEM, "notes to midi: out of memory");
    if (!s) {
        for (size_t i = 0; i < notes->n; i++) {
            const music_note *n = &notes->v[i];
            uint64_t on = (uint64_t)llround(n->on * tps), off = (uint64_t)llround(n->off * tps);
            if (off <= on) off = on + 1;
            ev[2 * i] = (wev){on, 1, 2 * i, n->channel, n->pitch, n->velocity};
            ev[2 * i + 1] = (wev){off, 0, 2 * i + 1, n->channel, n->pitch, 0};
        }
        qsort(ev, 2 * notes->n, sizeof *ev, cmp_wev);
        for (size_t i = 0; i < 2 * notes->n && !s; i++) {
            const wev *w = &ev[i];
            uint8_t status = w->kind                  ? MUSIC_MIDI_NOTE_ON
                             : opts->note_off_as_vel0 ? MUSIC_MIDI_NOTE_ON
                                                      : MUSIC_MIDI_NOTE_OFF;
            uint8_t vel = w->kind ? w->vel : opts->note_off_as_vel0 ? 0 : 64;
            s = music_midi_add_channel(out, track_of[w->ch], w->tick, (uint8_t)(status | w->ch),
                                    w->pitch, vel);
        }
    }
    free(ev);
    if (s) music_midi_free(out);
    return s;
}
