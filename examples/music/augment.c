/* Data augmentation: pitch transposition and time stretching, on notes and on token windows.
 * How out-of-range pitches are handled is stated in music.h. */
#include "music_internal.h"

#include <math.h>

music_augment_opts music_augment_defaults(void) {
    return (music_augment_opts){.max_transpose = 3,
                             .pitch_lo = 21,
                             .pitch_hi = 108,
                             .max_stretch = 0.05,
                             .stretch_steps = 5};
}

/* Shifts in [-max, max] that keep [pmin, pmax] inside the allowed range, which is the piece's own
 * extent where that is wider than [pitch_lo, pitch_hi]. Always contains 0. */
static void bounds(int pmin, int pmax, const music_augment_opts *o, int *lo, int *hi) {
    int m = o->max_transpose > 0 ? o->max_transpose : 0;
    if (m > 127) m = 127;
    if (pmin > pmax) { /* no notes: anything goes */
        *lo = -m;
        *hi = m;
        return;
    }
    int L = o->pitch_lo < pmin ? o->pitch_lo : pmin, H = o->pitch_hi > pmax ? o->pitch_hi : pmax;
    if (L < 0) L = 0;
    if (H > 127) H = 127;
    *lo = L - pmin > -m ? L - pmin : -m;
    *hi = H - pmax < m ? H - pmax : m;
}

void music_transpose_bounds(const music_note *notes, size_t n, const music_augment_opts *o, int *lo,
                         int *hi) {
    music_augment_opts d = music_augment_defaults();
    if (!o) o = &d;
    int pmin = 128, pmax = -1;
    for (size_t i = 0; i < n; i++) {
        if (notes[i].pitch < pmin) pmin = notes[i].pitch;
        if (notes[i].pitch > pmax) pmax = notes[i].pitch;
    }
    bounds(pmin, pmax, o, lo, hi);
}

size_t music_notes_transpose(music_notes *n, int semitones) {
    size_t k = 0;
    for (size_t i = 0; i < n->n; i++) {
        int p = n->v[i].pitch + semitones;
        if (p < 0 || p > 127) continue;
        n->v[k] = n->v[i];
        n->v[k++].pitch = (uint8_t)p;
    }
    size_t dropped = n->n - k;
    n->n = k;
    return dropped;
}

void music_notes_stretch(music_notes *n, double factor) {
    for (size_t i = 0; i < n->n; i++) {
        n->v[i].on *= factor;
        n->v[i].off *= factor;
    }
}

static mg_status draw(const music_augment_opts *o, int lo, int hi, mg_rng *rng, int *shift,
                      double *stretch) {
    if (!(o->max_stretch >= 0 && o->max_stretch < 1))
        return mg_set_error(MG_ERR_INVALID, "augment: max_stretch %g is not in [0, 1)",
                            o->max_stretch);
    *shift = lo + (int)mg_rng_below(rng, (uint32_t)(hi - lo + 1));
    *stretch = 1.0;
    if (o->stretch_steps > 1) {
        int i = (int)mg_rng_below(rng, (uint32_t)o->stretch_steps);
        *stretch = 1.0 - o->max_stretch + 2.0 * o->max_stretch * i / (o->stretch_steps - 1);
    }
    return MG_OK;
}

mg_status music_augment_notes(music_notes *n, const music_augment_opts *o, mg_rng *rng, int *shift,
                           double *stretch) {
    music_augment_opts d = music_augment_defaults();
    if (!o) o = &d;
    int lo, hi, sh;
    double st;
    music_transpose_bounds(n->v, n->n, o, &lo, &hi);
    mg_status s = draw(o, lo, hi, rng, &sh, &st);
    if (s) return s;
    music_notes_transpose(n, sh); /* drops nothing: sh is within the bounds */
    music_notes_stretch(n, st);
    if (shift) *shift = sh;
    if (stretch) *stretch = st;
    return MG_OK;
}

/* ---- token windows ---- */

static bool is_note(int32_t id) {
    return id >= MUSIC_PERF_NOTE_ON && id < MUSIC_PERF_TIME_SHIFT;
}
static int pitch_of(int32_t id) {
    return id < MUSIC_PERF_NOTE_OFF ? id : id - MUSIC_PERF_NOTE_OFF;
}

void music_perf_transpose_bounds(const int32_t *tok, size_t n, const music_augment_opts *o, int *lo,
                              int *hi) {
    music_augment_opts d = music_augment_defaults();
    if (!o) o = &d;
    int pmin = 128, pmax = -1;
    for (size_t i = 0; i < n; i++)
        if (is_note(tok[i])) {
            int p = pitch_of(tok[i]);
            if (p < pmin) pmin = p;
            if (p > pmax) pmax = p;
        }
    bounds(pmin, pmax, o, lo, hi);
}

mg_status music_perf_transpose(int32_t *tok, size_t n, int semitones) {
    for (size_t i = 0; i < n; i++)
        if (is_note(tok[i])) {
            int p = pitch_of(tok[i]) + semitones;
            if (p < 0 || p > 127)
                return mg_set_error(
                    MG_ERR_INVALID,
                    "perf transpose: token %zu (pitch %d) shifted by %d leaves 0..127", i,
                    pitch_of(tok[i]), semitones);
        }
    for (size_t i = 0; i < n; i++)
        if (is_note(tok[i])) tok[i] += semitones;
    return MG_OK;
}

static mg_status shift_to(music_tokens *out, int64_t *emitted, int64_t target) {
    mg_status s = MG_OK;
    while (*emitted < target && !s) {
        int64_t k =
            target - *emitted > MUSIC_PERF_SHIFT_STEPS ? MUSIC_PERF_SHIFT_STEPS : target - *emitted;
        s = music_tokens_push(out, (int32_t)(MUSIC_PERF_TIME_SHIFT + k - 1));
        *emitted += k;
    }
    return s;
}

mg_status music_perf_stretch(const int32_t *tok, size_t n, double factor, music_tokens *out) {
    if (!(factor > 0 && factor < 1e3))
        return mg_set_error(MG_ERR_INVALID, "perf stretch: factor %g is not in (0, 1000)", factor);
    int64_t t = 0, emitted = 0;
    mg_status s = MG_OK;
    for (size_t i = 0; i < n && !s; i++) {
        const int dt = music_perf_shift_steps(tok[i]);
        if (dt) {
            t += dt;
            continue;
        }
        s = shift_to(out, &emitted, llround((double)t * factor));
        if (!s) s = music_tokens_push(out, tok[i]);
    }
    if (!s) s = shift_to(out, &emitted, llround((double)t * factor));
    return s;
}

mg_status music_augment_tokens(const int32_t *tok, size_t n, const music_augment_opts *o, mg_rng *rng,
                            music_tokens *out) {
    music_augment_opts d = music_augment_defaults();
    if (!o) o = &d;
    int lo, hi, sh;
    double st;
    music_perf_transpose_bounds(tok, n, o, &lo, &hi);
    mg_status s = draw(o, lo, hi, rng, &sh, &st);
    if (s) return s;
    out->n = 0;
    s = music_perf_stretch(tok, n, st, out);
    if (!s) s = music_perf_transpose(out->v, out->n, sh);
    return s;
}
