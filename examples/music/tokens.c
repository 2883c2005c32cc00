/* The performance encoding: notes <-> NOTE_ON / NOTE_OFF / TIME_SHIFT / VELOCITY tokens on an
 * absolute 10 ms grid. The rules are spelled out in music.h. */
#include "music_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void music_tokens_free(music_tokens *t) {
    if (!t) return;
    free(t->v);
    memset(t, 0, sizeof *t);
}

mg_status music_tokens_push(music_tokens *t, int32_t id) {
    mg_status s = music_grow((void **)&t->v, &t->cap, t->n + 1, sizeof *t->v);
    if (s) return s;
    t->v[t->n++] = id;
    return MG_OK;
}

const char *music_perf_token_name(int32_t id, char *buf, size_t cap) {
    if (!cap) return buf;
    if (id >= MUSIC_PERF_NOTE_ON && id < MUSIC_PERF_NOTE_OFF)
        snprintf(buf, cap, "NOTE_ON %d", id);
    else if (id >= MUSIC_PERF_NOTE_OFF && id < MUSIC_PERF_TIME_SHIFT)
        snprintf(buf, cap, "NOTE_OFF %d", id - MUSIC_PERF_NOTE_OFF);
    else if (id >= MUSIC_PERF_TIME_SHIFT && id < MUSIC_PERF_VELOCITY)
        snprintf(buf, cap, "TIME_SHIFT %dms", 10 * (id - MUSIC_PERF_TIME_SHIFT + 1));
    else if (id >= MUSIC_PERF_VELOCITY && id < MUSIC_PERF_START)
        snprintf(buf, cap, "VELOCITY %d", id - MUSIC_PERF_VELOCITY);
    else if (id == MUSIC_PERF_START)
        snprintf(buf, cap, "START");
    else if (id == MUSIC_PERF_END)
        snprintf(buf, cap, "END");
    else
        snprintf(buf, cap, "?");
    return buf;
}

/* ---- encode ---- */

typedef struct qnote {
    int64_t on, off; /* grid steps */
    int pitch, bin, vel;
} qnote;

static int cmp_pitch_on(const void *pa, const void *pb) {
    const qnote *a = pa, *b = pb;
    if (a->pitch != b->pitch) return a->pitch - b->pitch;
    if (a->on != b->on) return a->on < b->on ? -1 : 1;
    /* at one onset the note ending later, then the louder, comes first and is the one kept */
    if (a->off != b->off) return a->off > b->off ? -1 : 1;
    return b->vel - a->vel;
}

typedef struct gev {
    int64_t t;
    int kind; /* 0 off, 1 on */
    int pitch, bin;
} gev;

static int cmp_gev(const void *pa, const void *pb) {
    const gev *a = pa, *b = pb;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    if (a->kind != b->kind) return a->kind - b->kind;
    return a->pitch - b->pitch;
}

static mg_status push_shift(music_tokens *out, int64_t steps) {
    mg_status s = MG_OK;
    while (steps > 0 && !s) {
        int64_t k = steps > MUSIC_PERF_SHIFT_STEPS ? MUSIC_PERF_SHIFT_STEPS : steps;
        s = music_tokens_push(out, (int32_t)(MUSIC_PERF_TIME_SHIFT + k - 1));
        steps -= k;
    }
    return s;
}

/* 1e9 steps is 116 days: far past any piece, and keeps step arithmetic exact in doubles. */
#define MAX_STEPS 1e9

mg_status music_perf_encode(const music_note *notes, size_t n, music_tokens *out) {
    qnote *q = malloc((n ? n : 1) * sizeof *q);
    gev *ev = malloc((2 * n + 1) * sizeof *ev);
    mg_status s = MG_OK;
    if (!q || !ev) {
        s = mg_set_error(MG_ERR_NOMEM, "perf encode: out of memory for %zu notes", n);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const music_note *a = &notes[i];
        if (!isfinite(a->on) || !isfinite(a->off) || a->on < 0 || a->off < a->on ||
            a->off / MUSIC_PERF_STEP_SECONDS > MAX_STEPS || a->pitch > 127 || a->velocity < 1 ||
            a->velocity > 127) {
            s = mg_set_error(MG_ERR_INVALID,
                             "perf encode: note %zu (on %g s, off %g s, pitch %u, velocity %u) is "
                             "not a note",
                             i, a->on, a->off, a->pitch, a->velocity);
            goto done;
        }
        int64_t on = llround(a->on / MUSIC_PERF_STEP_SECONDS),
                off = llround(a->off / MUSIC_PERF_STEP_SECONDS);
        if (off <= on) { /* too short for the grid: keep it one step long, within 10 ms */
            on = (int64_t)floor(a->on / MUSIC_PERF_STEP_SECONDS);
            off = on + 1;
        }
        q[i] = (qnote){on, off, a->pitch, music_perf_velocity_bin(a->velocity), a->velocity};
    }
    qsort(q, n, sizeof *q, cmp_pitch_on);
    size_t ne = 0;
    for (size_t i = 0; i < n; i++) {
        /* q[i-1] is the last note kept when it has the same pitch (a dropped note is never
         * followed by an earlier onset, so checking the previous entry is enough). */
        if (i > 0 && q[i - 1].pitch == q[i].pitch) {
            if (q[i].on == q[i - 1].on) { /* same step: one note, the first (kept) one */
                q[i] = q[i - 1];
                continue;
            }
            if (q[i - 1].off > q[i].on)
                ev[ne - 1].t = q[i].on; /* re-strike ends the earlier note */
        }
        ev[ne++] = (gev){q[i].on, 1, q[i].pitch, q[i].bin};
        ev[ne++] = (gev){q[i].off, 0, q[i].pitch, 0};
    }
    qsort(ev, ne, sizeof *ev, cmp_gev);
    s = music_tokens_push(out, MUSIC_PERF_START);
    int64_t now = 0;
    int bin = -1;
    for (size_t i = 0; i < ne && !s; i++) {
        if (ev[i].t > now) {
            s = push_shift(out, ev[i].t - now);
            now = ev[i].t;
        }
        if (!s && ev[i].kind == 1 && ev[i].bin != bin) {
            bin = ev[i].bin;
            s = music_tokens_push(out, MUSIC_PERF_VELOCITY + bin);
        }
        if (!s)
            s = music_tokens_push(out,
                               (ev[i].kind ? MUSIC_PERF_NOTE_ON : MUSIC_PERF_NOTE_OFF) + ev[i].pitch);
    }
    if (!s) s = music_tokens_push(out, MUSIC_PERF_END);
done:
    free(q);
    free(ev);
    return s;
}

/* ---- decode ---- */

mg_status music_perf_decode(const int32_t *tok, size_t n, music_notes *out) {
    for (size_t i = 0; i < n; i++)
        if (tok[i] < 0 || tok[i] >= MUSIC_PERF_VOCAB)
            return mg_set_error(MG_ERR_INVALID,
                                "perf decode: token %zu is %d, outside the vocabulary 0..%d", i,
                                tok[i], MUSIC_PERF_VOCAB - 1);
    size_t first = out->n, start = 0;
    for (size_t i = 0; i < n; i++)
        if (tok[i] == MUSIC_PERF_START) {
            start = i + 1;
            break;
        }
    /* A window cut from the middle of a piece has no START: read it all. */
    int64_t sounding[128], now = 0;
    uint8_t vel[128];
    for (int p = 0; p < 128; p++) sounding[p] = -1;
    int velocity = music_perf_bin_velocity(music_perf_velocity_bin(64));
    mg_status s = MG_OK;
    for (size_t i = start; i < n && !s && tok[i] != MUSIC_PERF_END; i++) {
        int32_t id = tok[i];
        const int dt = music_perf_shift_steps(id);
        if (dt) {
            now += dt;
            continue;
        }
        if (id >= MUSIC_PERF_VELOCITY && id < MUSIC_PERF_START) {
            velocity = music_perf_bin_velocity(id - MUSIC_PERF_VELOCITY);
            continue;
        }
        if (id >= MUSIC_PERF_START) continue;
        int p = id < MUSIC_PERF_NOTE_OFF ? id : id - MUSIC_PERF_NOTE_OFF;
        if (sounding[p] >= 0) {
            if (id < MUSIC_PERF_NOTE_OFF && sounding[p] == now) continue; /* same step: one note */
            int64_t off = now > sounding[p] ? now : sounding[p] + 1;
            s = music_notes_push(out, (music_note){.on = (double)sounding[p] * MUSIC_PERF_STEP_SECONDS,
                                             .off = (double)off * MUSIC_PERF_STEP_SECONDS,
                                             .pitch = (uint8_t)p,
                                             .velocity = vel[p]});
            sounding[p] = -1;
        }
        if (id < MUSIC_PERF_NOTE_OFF) {
            sounding[p] = now;
            vel[p] = (uint8_t)velocity;
        }
    }
    for (int p = 0; p < 128 && !s; p++)
        if (sounding[p] >= 0) {
            int64_t off = now > sounding[p] ? now : sounding[p] + 1;
            s = music_notes_push(out, (music_note){.on = (double)sounding[p] * MUSIC_PERF_STEP_SECONDS,
                                             .off = (double)off * MUSIC_PERF_STEP_SECONDS,
                                             .pitch = (uint8_t)p,
                                             .velocity = vel[p]});
        }
    if (s) return s;
    if (out->n > first) {
        music_notes tail = {out->v + first, out->n - first, out->n - first};
        music_notes_sort(&tail);
    }
    return MG_OK;
}
