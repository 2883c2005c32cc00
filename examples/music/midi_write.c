/* Standard MIDI File writer. */
#include "music_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct bytes {
    uint8_t *p;
    size_t n, cap;
} bytes;

static mg_status put(bytes *b, const void *src, size_t n) {
    mg_status s = music_grow((void **)&b->p, &b->cap, b->n + n, 1);
    if (s) return s;
    memcpy(b->p + b->n, src, n);
    b->n += n;
    return MG_OK;
}

static mg_status put_byte(bytes *b, uint8_t v) {
    return put(b, &v, 1);
}

static mg_status put_be(bytes *b, uint32_t v, int n) {
    uint8_t t[4];
    for (int i = 0; i < n; i++) t[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
    return put(b, t, (size_t)n);
}

/* Callers keep v <= 0x0FFFFFFF, the most four 7-bit groups hold. */
static mg_status put_vlq(bytes *b, uint32_t v) {
    uint8_t t[4];
    int n = 0;
    do {
        t[n++] = v & 0x7F;
        v >>= 7;
    } while (v);
    uint8_t o[4];
    for (int i = 0; i < n; i++) o[i] = t[n - 1 - i] | (i < n - 1 ? 0x80 : 0);
    return put(b, o, (size_t)n);
}

static mg_status put_delta(bytes *b, uint64_t tick, uint64_t *prev, size_t track) {
    uint64_t d = tick - *prev;
    if (d > 0x0FFFFFFF)
        return mg_set_error(MG_ERR_INVALID,
                            "midi: track %zu: gap of %llu ticks before tick %llu exceeds the "
                            "largest delta time (0x0FFFFFFF)",
                            track, (unsigned long long)d, (unsigned long long)tick);
    *prev = tick;
    return put_vlq(b, (uint32_t)d);
}

static mg_status write_track(bytes *b, const music_midi_file *f, size_t ti, bool running_status) {
    const music_midi_track *src = &f->tracks[ti];
    music_midi_track t = *src;
    t.ev = NULL;
    if (src->n) {
        t.ev = malloc(src->n * sizeof *t.ev);
        if (!t.ev) return mg_set_error(MG_ERR_NOMEM, "midi: out of memory");
        memcpy(t.ev, src->ev, src->n * sizeof *t.ev);
        music_midi_sort_track(&t);
    }
    mg_status s = put(b, "MTrk\0\0\0\0", 8);
    size_t len_at = b->n - 4, start = b->n;
    uint64_t prev = 0, end = src->end_tick;
    uint8_t running = 0;
    for (size_t i = 0; i < t.n && !s; i++) {
        const music_midi_event *e = &t.ev[i];
        if ((s = put_delta(b, e->tick, &prev, ti))) break;
        if (e->status >= 0x80 && e->status < 0xF0) {
            uint8_t kind = e->status & 0xF0;
            if (e->d1 > 127 || e->d2 > 127) {
                s = mg_set_error(MG_ERR_INVALID, "midi: track %zu event %zu: data byte over 127",
                                 ti, i);
                break;
            }
            if (!running_status || e->status != running) s = put_byte(b, e->status);
            running = e->status;
            if (!s) s = put_byte(b, e->d1);
            if (!s && kind != MUSIC_MIDI_PROGRAM && kind != MUSIC_MIDI_CHANNEL_PRESSURE)
                s = put_byte(b, e->d2);
        } else if (e->status == MUSIC_MIDI_META || e->status == MUSIC_MIDI_SYSEX ||
                   e->status == MUSIC_MIDI_SYSEX_ESCAPE) {
            if (e->len > 0x0FFFFFFF || (size_t)e->off + e->len > f->blob_len) {
                s = mg_set_error(MG_ERR_INVALID, "midi: track %zu event %zu: bad payload", ti, i);
                break;
            }
            if (e->status == MUSIC_MIDI_META &&
                (e->type > 127 || e->type == MUSIC_MIDI_META_END_OF_TRACK)) {
                s = mg_set_error(MG_ERR_INVALID, "midi: track %zu event %zu: meta type 0x%02x", ti,
                                 i, e->type);
                break;
            }
            s = put_byte(b, e->status);
            if (!s && e->status == MUSIC_MIDI_META) s = put_byte(b, e->type);
            if (!s) s = put_vlq(b, e->len);
            if (!s) s = put(b, f->blob + e->off, e->len);
            running = 0; /* the standard: meta and sysex events cancel running status */
        } else {
            s = mg_set_error(MG_ERR_INVALID, "midi: track %zu event %zu: status byte 0x%02x", ti, i,
                             e->status);
        }
    }
    if (!s) {
        if (end < prev) end = prev;
        s = put_delta(b, end, &prev, ti);
        if (!s) s = put(b, "\xFF\x2F\x00", 3);
    }
    free(t.ev);
    if (s) return s;
    size_t clen = b->n - start;
    if (clen > UINT32_MAX) return mg_set_error(MG_ERR_INVALID, "midi: track %zu over 4 GiB", ti);
    for (int i = 0; i < 4; i++) b->p[len_at + (size_t)i] = (uint8_t)(clen >> (24 - 8 * i));
    return MG_OK;
}

mg_status music_midi_encode(const music_midi_file *f, const music_midi_write_opts *opts, uint8_t **buf,
                         size_t *len) {
    *buf = NULL;
    *len = 0;
    bool running_status = !(opts && opts->no_running_status);
    if (f->format < 0 || f->format > 2)
        return mg_set_error(MG_ERR_INVALID, "midi: format %d is not 0, 1 or 2", f->format);
    if (f->ntracks == 0 || f->ntracks > 65535 || (f->format == 0 && f->ntracks != 1))
        return mg_set_error(MG_ERR_INVALID, "midi: %zu tracks cannot be written in format %d",
                            f->ntracks, f->format);
    if (f->division == 0 || f->division < -32768 || f->division > 32767)
        return mg_set_error(MG_ERR_INVALID, "midi: division %d is not valid", f->division);
    bytes b = {0};
    mg_status s = put(&b, "MThd\0\0\0\6", 8);
    if (!s) s = put_be(&b, (uint32_t)f->format, 2);
    if (!s) s = put_be(&b, (uint32_t)f->ntracks, 2);
    if (!s) s = put_be(&b, (uint32_t)(uint16_t)(int16_t)f->division, 2);
    for (size_t t = 0; t < f->ntracks && !s; t++) s = write_track(&b, f, t, running_status);
    if (s) {
        free(b.p);
        return s;
    }
    *buf = b.p;
    *len = b.n;
    return MG_OK;
}

mg_status music_midi_write(const char *path, const music_midi_file *f, const music_midi_write_opts *opts) {
    uint8_t *buf;
    size_t len;
    mg_status s = music_midi_encode(f, opts, &buf, &len);
    if (s) return mg_wrap_error(s, "%s", path);
    s = music_write_file(path, buf, len);
    free(buf);
    return s;
}
